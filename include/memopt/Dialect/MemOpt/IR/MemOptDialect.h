//===- MemOptDialect.h - memopt dialect -------------------------*- C++ -*-===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTDIALECT_H
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTDIALECT_H

#include "mlir/IR/Dialect.h"

#include "memopt/Dialect/MemOpt/IR/MemOptOpsDialect.h.inc"

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTDIALECT_H
