//===- Passes.h - passes of the host evaluator ------------------*- C++ -*-===//

#ifndef MEMOPT_EVALUATE_PASSES_H
#define MEMOPT_EVALUATE_PASSES_H

#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::memopt {

#define GEN_PASS_DECL
#include "memopt/Evaluate/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "memopt/Evaluate/Passes.h.inc"

} // namespace mlir::memopt

#endif // MEMOPT_EVALUATE_PASSES_H
