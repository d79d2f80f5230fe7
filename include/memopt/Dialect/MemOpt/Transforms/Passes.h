//===- Passes.h - memopt passes ---------------------------------*- C++ -*-===//

#ifndef MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_H
#define MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_H

#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"

namespace mlir::memopt {

#define GEN_PASS_DECL
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"

/// The tanh-GELU spelling of GPT-2-style exports (eight elementwise ops) ->
/// `gelu {approximate = "tanh"}` (from --memopt-fuse-epilogues; autodiff runs
/// it first, so the gradient is GELU's, reading x only).
void populateGeluTanhFusionPatterns(RewritePatternSet &patterns);

} // namespace mlir::memopt

#endif // MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_H
