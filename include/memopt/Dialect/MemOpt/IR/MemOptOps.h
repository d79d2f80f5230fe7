//===- MemOptOps.h - memopt operations --------------------------*- C++ -*-===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_H
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_H

#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"
#include "memopt/Dialect/MemOpt/IR/MemOptInterfaces.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h.inc"

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_H
