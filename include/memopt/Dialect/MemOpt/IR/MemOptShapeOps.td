//===- MemOptShapeOps.td - shapes, data movement -----------*- tablegen -*-===//
//
// Views, shape ops and data movement (transpose, concat, split, slice, gather,
// scatter, expand, pad, resize), identity, dropout, constant_of_shape and
// range. Included by MemOptOps.td in the order the ops were defined: one file
// per op family, named after the .cpp file that holds their verifiers and shape
// inference (MLIR's own dialects split their ODS by op family the same way).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTSHAPEOPS_TD
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTSHAPEOPS_TD

include "memopt/Dialect/MemOpt/IR/MemOptBase.td"

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

def MemOpt_ShapeOp
    : MemOpt_InferredOp<"shape", [MemOpt_Precision], MemOpt_ViewCosts> {
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
                              ["isAliasingView"]>], MemOpt_ViewCosts> {
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

def MemOpt_FlattenOp : MemOpt_InferredOp<"flatten", [
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["isAliasingView"]>], MemOpt_ViewCosts> {
  let summary = "[d0..d(axis-1)] x [d(axis)..] as a 2-D view";
  let arguments = (ins MemOpt_Tensor:$input,
                       DefaultValuedAttr<I64Attr, "1">:$axis);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def MemOpt_TransposeOp : MemOpt_InferredOp<"transpose"> {
  let summary = "Permutes the axes (default: reverses them)";
  let arguments = (ins MemOpt_Tensor:$data,
                       OptionalAttr<DenseI64ArrayAttr>:$perm);
  let results = (outs MemOpt_Tensor:$transposed);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
  let extraClassDeclaration = [{
    /// `perm`, or the reversed axes when it is absent.
    ::llvm::SmallVector<int64_t> getPermutation();
  }];
}

def MemOpt_SqueezeOp : MemOpt_InferredOp<"squeeze", [
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["isAliasingView"]>], MemOpt_ViewCosts> {
  let summary = "Removes size-1 axes (an aliasing view)";
  let description = [{
    Departs from ONNX: `axes` is an attribute. The importer always sets it;
    when absent every size-1 axis is removed, as in ONNX.
  }];
  let arguments = (ins MemOpt_Tensor:$data,
                       OptionalAttr<DenseI64ArrayAttr>:$axes);
  let results = (outs MemOpt_Tensor:$squeezed);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def MemOpt_UnsqueezeOp : MemOpt_InferredOp<"unsqueeze", [
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["isAliasingView"]>], MemOpt_ViewCosts> {
  let summary = "Inserts size-1 axes (an aliasing view)";
  let description = [{
    Departs from ONNX: `axes` is an attribute; values index the result
    (rank + number of axes) and may be negative.
  }];
  let arguments = (ins MemOpt_Tensor:$data, DenseI64ArrayAttr:$axes);
  let results = (outs MemOpt_Tensor:$expanded);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def MemOpt_ConcatOp : MemOpt_InferredOp<"concat"> {
  let summary = "Joins tensors along `axis`";
  let arguments = (ins Variadic<MemOpt_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs MemOpt_Tensor:$concat_result);
  let assemblyFormat =
      "$inputs attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def MemOpt_SplitOp : MemOpt_InferredOp<"split"> {
  let summary = "Splits a tensor along `axis` into pieces of the given sizes";
  let description = [{
    Departs from ONNX: the `split` input is an attribute, always present,
    with one size per result (opset 18 `num_outputs` is resolved by the
    importer).
  }];
  let arguments = (ins MemOpt_Tensor:$input,
                       DefaultValuedAttr<I64Attr, "0">:$axis,
                       DenseI64ArrayAttr:$split);
  let results = (outs Variadic<MemOpt_Tensor>:$outputs);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
}

def MemOpt_SliceOp : MemOpt_InferredOp<"slice"> {
  let summary = "Strided slice with ONNX clamping (negative steps allowed)";
  let description = [{
    Departs from ONNX: `starts`, `ends`, `axes` and `steps` are attributes,
    all four present and of equal length. Starts and ends are clamped as
    ONNX does: to [0, dim] for positive steps and [-1, dim - 1] for
    negative steps, after adding `dim` to negative values.
  }];
  let arguments = (ins MemOpt_Tensor:$data, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$ends, DenseI64ArrayAttr:$axes,
                       DenseI64ArrayAttr:$steps);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def MemOpt_GatherOp : MemOpt_InferredOp<"gather"> {
  let summary = "Takes slices of `data` along `axis` at `indices`";
  let description = [{
    Result shape: `data.shape[:axis] + indices.shape + data.shape[axis+1:]`.
    Negative indices count from the back, as in ONNX.
  }];
  let arguments = (ins MemOpt_Tensor:$data, MemOpt_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat =
      "$data `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def MemOpt_GatherElementsOp : MemOpt_InferredOp<"gather_elements"> {
  let summary = "output[i][j] = data[indices[i][j]][j] (for axis 0)";
  let arguments = (ins MemOpt_Tensor:$data, MemOpt_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat =
      "$data `,` $indices attr-dict `:` functional-type(operands, results)";
}

def MemOpt_ScatterNDOp : MemOpt_InferredOp<"scatter_nd", [
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["canWriteInPlace"]>], ["getFlops"]> {
  let summary = "A copy of `data` with slices replaced (or combined) by `updates`";
  let description = [{
    ONNX ScatterND (opsets 13 to 18). `indices` has shape `[..., k]` with
    `k <= rank(data)`: each index tuple addresses a slice
    `data[i0, ..., ik-1, :, ...]`; `updates` has shape
    `indices.shape[:-1] + data.shape[k:]`. Negative indices count from the
    back (as onnxruntime accepts). `reduction` is `none` (replace; with
    duplicate indices ONNX leaves the result undefined, memopt's host backend
    and folder take the last update), `add`, `mul`, `max` or `min` (combine
    with the current value; not for i1). Result type: the type of `data`.
    The result may reuse `data`'s storage when `data` dies here, as
    onnxruntime does. Folds on small constants.
  }];
  let arguments = (ins MemOpt_Tensor:$data, MemOpt_IndexTensor:$indices,
                       MemOpt_Tensor:$updates,
                       DefaultValuedAttr<StrAttr, "\"none\"">:$reduction);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat = "$data `,` $indices `,` $updates attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def MemOpt_ExpandOp : MemOpt_Op<"expand"> {
  let summary = "Broadcasts to the result shape (explicit result type)";
  let description = [{
    Departs from ONNX: the `shape` input is resolved at import; the result
    type is the broadcast of the input shape with that shape.
  }];
  let arguments = (ins MemOpt_Tensor:$input);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def MemOpt_PadOp : MemOpt_InferredOp<"pad"> {
  let summary = "Pads (or, with negative values, crops) each axis";
  let description = [{
    Departs from ONNX: `pads` (all begins, then all ends; 2 * rank values,
    the opset 18 `axes` input resolved) and `constant_value` are attributes.
    `mode` is `constant`, `reflect`, `edge` or `wrap`.
  }];
  let arguments = (ins MemOpt_Tensor:$data, DenseI64ArrayAttr:$pads,
                       DefaultValuedAttr<StrAttr, "\"constant\"">:$mode,
                       DefaultValuedAttr<F64Attr, "0.0">:$constant_value);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
}

def MemOpt_ResizeOp : MemOpt_Op<"resize"> {
  let summary = "Spatial resampling (explicit result type)";
  let description = [{
    Departs from ONNX: `roi`, `scales` and `sizes` are resolved by the
    importer; the result type carries the output shape. `mode` is `nearest`
    or `linear` (`cubic` is not supported).
  }];
  let arguments = (ins MemOpt_FloatTensor:$X,
      DefaultValuedAttr<StrAttr, "\"nearest\"">:$mode,
      DefaultValuedAttr<StrAttr, "\"half_pixel\"">:$coordinate_transformation_mode,
      DefaultValuedAttr<StrAttr, "\"round_prefer_floor\"">:$nearest_mode,
      DefaultValuedAttr<F32Attr, "-0.75">:$cubic_coeff_a,
      DefaultValuedAttr<I64Attr, "0">:$exclude_outside);
  let results = (outs MemOpt_FloatTensor:$Y);
  let assemblyFormat = "$X attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def MemOpt_IdentityOp : MemOpt_Op<"identity", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["isAliasingView"]>], MemOpt_ViewCosts> {
  let summary = "The operand itself (ONNX Identity and inference Dropout)";
  let arguments = (ins MemOpt_Tensor:$input);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($output)";
  let hasFolder = 1;
}

def MemOpt_DropoutOp : MemOpt_Op<"dropout", [
    AllTypesMatch<["X", "Y"]>,
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["isElementwise", "canWriteInPlace"]>]> {
  let summary = "Training-mode Dropout with a counter-based mask";
  let description = [{
    `Y = X * mask / (1 - ratio)` where element i is kept unless its Philox
    4x32-10 word, keyed by `key` = `[seed, micro-batch number]` (the
    program's `random_key` variable) and counted by (i / 4, `stream`, the
    micro-batch number), is below `ratio * 2^32` (lib/Runtime/Philox.h). The
    mask is a function of (seed, micro-batch, stream, element), so a second
    dropout with the same key and stream on a tensor of the same shape
    applies the same mask: the gradient is `dropout(dY)` with the forward's
    stream (no mask is saved for backward), and a recomputed dropout
    (rematerialization) reproduces its mask. Without a key it is the
    identity (inference; canonicalization removes it, as it removes one
    with ratio 0): the importer keeps ONNX Dropout in training mode as a
    keyless dropout and memopt-make-trainable, which runs before the first
    canonicalization, gives every dropout the key and a stream of its own.
    (A canonicalization pattern, not a folder: the importer folds every op
    as it builds it.)
  }];
  let arguments = (ins MemOpt_FloatTensor:$X,
                       Optional<StaticShapeTensorOf<[I64]>>:$key,
                       F32Attr:$ratio,
                       DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs MemOpt_FloatTensor:$Y);
  let assemblyFormat = "$X (`,` `key` $key^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
  let hasCanonicalizeMethod = 1;
}

def MemOpt_RandomUniformOp : MemOpt_Op<"random_uniform"> {
  let summary = "Uniform random numbers from a counter-based generator";
  let description = [{
    Element i is `low + (high - low) * u` with `u = (w >> 8) * 2^-24` in
    [0, 1), `w` the Philox 4x32-10 word of element i keyed by `key` =
    `[seed, micro-batch number]` and counted by (i / 4, `stream`, the
    micro-batch number): dropout's generator (lib/Runtime/Philox.h), so the
    same (key, stream, shape) gives the same numbers on every backend and a
    recomputed op (rematerialization) redraws them exactly. ONNX
    RandomUniform(Like) import as it (Bernoulli as `cast(less(u, p))`) with a
    constant key `[seed, 0]` and a stream of their own (inference: the same
    numbers every run, as onnxruntime with a seed); memopt-make-trainable
    gives them the program's `random_key` variable and streams numbered with
    the dropouts', so every training step draws new numbers (torchvision's
    dropout and stochastic depth exported in training mode).
  }];
  let arguments = (ins StaticShapeTensorOf<[I64]>:$key, F32Attr:$low,
                       F32Attr:$high, DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs MemOpt_FloatTensor:$output);
  let assemblyFormat = "$key attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def MemOpt_ConstantOfShapeOp
    : MemOpt_Op<"constant_of_shape", [MemOpt_Precision]> {
  let summary = "A tensor filled with `value` (explicit result type)";
  let description = [{
    The result type carries the shape (the `input` operand is the 1-D i64
    shape tensor of ONNX). `value` is a one-element tensor of the result's
    element type; when absent the fill is zero. Always folds to a splat
    constant.
  }];
  let arguments = (ins StaticShapeTensorOf<[I64]>:$input,
                       OptionalAttr<ElementsAttr>:$value);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def MemOpt_RangeOp : MemOpt_Op<"range", [MemOpt_Precision]> {
  let summary = "start, start + delta, ... below limit (explicit result type)";
  let description = [{
    `start`, `limit` and `delta` are scalars (0-d tensors) of the result's
    element type; the 1-D result type carries the length
    `max(ceil((limit - start) / delta), 0)`. Folds when all three are
    constants.
  }];
  let arguments = (ins MemOpt_Tensor:$start, MemOpt_Tensor:$limit,
                       MemOpt_Tensor:$delta);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat = "$start `,` $limit `,` $delta attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTSHAPEOPS_TD
