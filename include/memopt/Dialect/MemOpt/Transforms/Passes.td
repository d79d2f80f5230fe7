//===- Passes.td - memopt passes ----------------------------*- tablegen -*-===//

#ifndef MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_TD
#define MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MemOptSummary : Pass<"memopt-summary", "ModuleOp"> {
  let summary = "Print per-op counts and weight and activation bytes";
  let description = [{
    A read-only report of what the importer produced: how many operations of
    each kind each function holds, how many tensors, the bytes of weights
    (constants) and of activations (every other op result), and the bytes of
    the function's inputs and outputs. The IR is left unchanged.
  }];
  let options = [
    Option<"outputFile", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the summary ('-' for stdout)">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

#endif // MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_TD
