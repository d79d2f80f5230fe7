//===- MemOptOps.td - memopt operations ---------------------*- tablegen -*-===//
//
// Operations with ONNX semantics and static shapes. Each op documents where it
// departs from ONNX (shape-deciding inputs become attributes).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_TD
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_TD

include "memopt/Dialect/MemOpt/IR/MemOptDialect.td"
include "memopt/Dialect/MemOpt/IR/MemOptInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Types and base classes
//===----------------------------------------------------------------------===//

def MemOpt_Tensor : StaticShapeTensorOf<[AnyType]>;
def MemOpt_FloatTensor : StaticShapeTensorOf<[AnyFloat]>;
def MemOpt_BoolTensor : StaticShapeTensorOf<[I1]>;
def MemOpt_IndexTensor : StaticShapeTensorOf<[I32, I64]>;

// Every op is pure and has a cost; `costOverrides` names the cost methods an
// op implements itself instead of taking the per-element default.
class MemOpt_Op<string mnemonic, list<Trait> traits = [],
                list<string> costOverrides = []>
    : Op<MemOpt_Dialect, mnemonic, !listconcat(traits, [Pure,
         DeclareOpInterfaceMethods<MemOpt_CostOpInterface, costOverrides>])>;

// Ops whose result types follow from operands and attributes; the C++ side
// implements `inferReturnTypes` with the ONNX shape rule.
class MemOpt_InferredOp<string mnemonic, list<Trait> traits = [],
                        list<string> costOverrides = []>
    : MemOpt_Op<mnemonic, !listconcat(traits, [InferTypeOpAdaptor]),
                costOverrides>;

// y = f(x), same shape and element type: elementwise and in-place capable.
class MemOpt_UnaryElementwiseOp<string mnemonic, Type operandType = MemOpt_Tensor,
                                list<Trait> traits = []>
    : MemOpt_Op<mnemonic, !listconcat(traits, [
        SameOperandsAndResultType,
        DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                                  ["isElementwise", "canWriteInPlace"]>])> {
  let arguments = (ins operandType:$X);
  let results = (outs operandType:$Y);
  let assemblyFormat = "$X attr-dict `:` type($Y)";
}

// c = a op b with ONNX multidirectional (numpy) broadcasting.
class MemOpt_BinaryElementwiseOp<string mnemonic, list<Trait> traits = []>
    : MemOpt_InferredOp<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                                  ["isElementwise", "canWriteInPlace"]>])> {
  let arguments = (ins MemOpt_Tensor:$A, MemOpt_Tensor:$B);
  let results = (outs MemOpt_Tensor:$C);
  let assemblyFormat =
      "$A `,` $B attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

// Comparisons and logic: broadcast like the arithmetic ops, result is i1.
class MemOpt_CompareOp<string mnemonic, list<Trait> traits = []>
    : MemOpt_BinaryElementwiseOp<mnemonic, traits> {
  let results = (outs MemOpt_BoolTensor:$C);
}

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

//===----------------------------------------------------------------------===//
// Unary elementwise
//===----------------------------------------------------------------------===//

def MemOpt_ReluOp : MemOpt_UnaryElementwiseOp<"relu"> {
  let summary = "max(x, 0)";
}
def MemOpt_ExpOp : MemOpt_UnaryElementwiseOp<"exp", MemOpt_FloatTensor> {
  let summary = "e^x";
}

//===----------------------------------------------------------------------===//
// Binary elementwise
//===----------------------------------------------------------------------===//

def MemOpt_AddOp : MemOpt_BinaryElementwiseOp<"add", [Commutative]> {
  let summary = "a + b with broadcasting";
  let hasFolder = 1;
}
def MemOpt_MulOp : MemOpt_BinaryElementwiseOp<"mul", [Commutative]> {
  let summary = "a * b with broadcasting";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

def MemOpt_ShapeOp : MemOpt_InferredOp<"shape"> {
  let summary = "The shape of a tensor as a 1-D i64 tensor (always folds)";
  let description = [{
    Shapes are static, so this op always folds to a constant; it exists so
    that the importer can build ONNX shape sub-graphs and fold them away.
    `start` and `end` follow ONNX opset 15 (negative counts from the back).
  }];
  let arguments = (ins MemOpt_Tensor:$data,
                       DefaultValuedAttr<I64Attr, "0">:$start,
                       OptionalAttr<I64Attr>:$end);
  let results = (outs StaticShapeTensorOf<[I64]>:$shape);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def MemOpt_ReshapeOp : MemOpt_Op<"reshape", [
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["isAliasingView"]>]> {
  let summary = "Same elements, new static shape (an aliasing view)";
  let description = [{
    ONNX's `shape` input is resolved at import (0 copies a dimension, -1 is
    inferred); here the result type carries the shape.
  }];
  let arguments = (ins MemOpt_Tensor:$data);
  let results = (outs MemOpt_Tensor:$reshaped);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def MemOpt_MatMulOp : MemOpt_InferredOp<"matmul", [], ["getFlops"]> {
  let summary = "numpy matmul: batched, with broadcast batch dimensions";
  let arguments = (ins MemOpt_Tensor:$A, MemOpt_Tensor:$B);
  let results = (outs MemOpt_Tensor:$Y);
  let assemblyFormat =
      "$A `,` $B attr-dict `:` functional-type(operands, results)";
}

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_TD
