//===- MemOptOps.td - memopt operations ---------------------*- tablegen -*-===//
//
// Operations with ONNX semantics and static shapes. Each op documents where it
// departs from ONNX (shape-deciding inputs become attributes).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_TD
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_TD

include "memopt/Dialect/MemOpt/IR/MemOptBase.td"

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def MemOpt_ConstantOp : MemOpt_Op<"constant", [ConstantLike,
    AllTypesMatch<["value", "output"]>]> {
  let summary = "A tensor known at compile time (weights and folded shapes)";
  let description = [{
    Holds an `ElementsAttr`. Weights imported from ONNX are `dense_resource`
    blobs, so the IR text stays small whatever the model's size; small
    tensors (shapes, scalars) are inline `dense` attributes so that folding
    can read them.
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

// The op families, one file each (the C++ beside them: ElementwiseOps.cpp,
// NeuralNetOps.cpp, ShapeOps.cpp, TrainingOps.cpp).
include "memopt/Dialect/MemOpt/IR/MemOptElementwiseOps.td"
include "memopt/Dialect/MemOpt/IR/MemOptNeuralNetOps.td"
include "memopt/Dialect/MemOpt/IR/MemOptShapeOps.td"
include "memopt/Dialect/MemOpt/IR/MemOptTrainingOps.td"

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_TD
