//===- Passes.td - passes of the host evaluator ------------*- tablegen -*-===//
//
// Kept apart from memopt/Dialect/MemOpt/Transforms/Passes.td: these passes
// call the host runtime, which the transforms library must not (DESIGN.md).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_EVALUATE_PASSES_TD
#define MEMOPT_EVALUATE_PASSES_TD

include "mlir/Pass/PassBase.td"

def MemOptFoldConstants
    : Pass<"memopt-fold-constants", "::mlir::func::FuncOp"> {
  let summary = "Evaluate ops of constants with the host kernels";
  let description = [{
    Replaces every op whose operands are all `memopt.constant`s by constants
    holding its results: through the op's folder when it has one, else by
    calling the host runtime's kernel for the op on the constants' bytes
    (include/memopt/Evaluate/HostEvaluator.h), in program order, so chains
    fold whole. The importer does the same as it builds each op; this pass
    does it for IR from elsewhere (memopt-opt, tests).

    Never folded: ops with memory effects or randomness (dropout, updates,
    collectives), ops without a host kernel, ops with an operand or result
    of more than `max-elements` elements, and ops reading a float
    initializer that training would train (`memopt.state_kind` absent or
    `parameter`; docs/import.md). With `report`, prints how many ops were
    evaluated.
  }];
  let options = [
    Option<"maxElements", "max-elements", "int64_t",
           /*default=*/"int64_t(1) << 20",
           "The most elements an operand or result of a folded op may have">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the number of ops evaluated by the host kernels">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

#endif // MEMOPT_EVALUATE_PASSES_TD
