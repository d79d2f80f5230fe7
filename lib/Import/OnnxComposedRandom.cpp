//===- OnnxComposedRandom.cpp - ONNX random-number ops --------------------===//
//
// Handlers of GraphImporter (GraphImporter.h) for ONNX's random generators:
//   RandomUniform, RandomUniformLike -> memopt.random_uniform
//   RandomNormal, RandomNormalLike   -> Box-Muller of two random_uniform
//   Bernoulli                        -> cast(less(random_uniform, p))
// Exporters write them for dropout and stochastic depth in training mode
// (torch.onnx's export of torchvision's EfficientNet: bernoulli_ becomes
// RandomUniformLike + Less).
//
// Every random_uniform gets a key `[seed, 0]` (the node's `seed`, else 0)
// and a stream of its own, so two generators of one shape never draw the
// same numbers and canonicalization never merges them. An inference compile
// draws the same numbers every run (onnxruntime with a seed does too, with a
// different generator: the numbers are not onnxruntime's); a training step
// draws new ones every micro-batch (memopt-make-trainable keys them with the
// program's random_key, as it keys dropouts: PyTorch's Philox offset).
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"
#include "OnnxTensors.h"

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

#include <cmath>

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::onnx_import;

FailureOr<SmallVector<Value>> GraphImporter::importRandom(const Node &node) {
  StringRef type = node.type();
  bool like = type.ends_with("Like") || type == "Bernoulli";
  // The result's shape: the input's (…Like, Bernoulli) or the `shape`
  // attribute; its type: `dtype`, else the input's, else f32.
  SmallVector<int64_t> shape;
  Type inputElement;
  Value input;
  if (like) {
    auto value = lookup(node, 0);
    if (failed(value))
      return failure();
    input = *value;
    shape.assign(typeOf(input).getShape().begin(),
                 typeOf(input).getShape().end());
    inputElement = typeOf(input).getElementType();
  } else {
    std::optional<SmallVector<int64_t>> dims = intsAttr(node, "shape");
    if (!dims)
      return emitError(node.loc)
             << node.describe() << ": the `shape` attribute is required";
    for (int64_t dim : *dims)
      if (dim < 0)
        return emitError(node.loc)
               << node.describe() << ": shape [" << formatShape(*dims)
               << "] has a negative dimension";
    shape = *dims;
  }
  Type elementType = inputElement ? inputElement : builder.getF32Type();
  if (const onnx::AttributeProto *dtype = node.attribute("dtype")) {
    elementType = convertElementType(int32_t(dtype->i()), &context);
    if (!elementType)
      return emitError(node.loc) << node.describe() << ": dtype "
                                 << onnxTypeName(int32_t(dtype->i()))
                                 << " is not supported by memopt";
  }
  if (type != "Bernoulli" && !isa<FloatType>(elementType))
    return emitError(node.loc)
           << node.describe() << ": random numbers must be floats, got "
           << elementType;
  if (type == "Bernoulli" &&
      (!isa<FloatType>(inputElement) || !elementType.isIntOrFloat()))
    return emitError(node.loc)
           << node.describe()
           << ": Bernoulli needs float probabilities and a numeric dtype";

  // One random_uniform: key [seed, 0] and the next stream.
  float seed = floatAttr(node, "seed", 0.0f);
  auto keyType = RankedTensorType::get({2}, builder.getI64Type());
  Value key = createConstant(
      node.loc, DenseElementsAttr::get(
                    keyType, ArrayRef<int64_t>{int64_t(std::floor(seed)), 0}));
  auto uniform = [&](Type element, float low, float high) -> Value {
    return build(node, "memopt.random_uniform", {key},
                 {builder.getNamedAttr("low", builder.getF32FloatAttr(low)),
                  builder.getNamedAttr("high", builder.getF32FloatAttr(high)),
                  builder.getNamedAttr(
                      "stream", builder.getI64IntegerAttr(++randomStreams))},
                 {RankedTensorType::get(shape, element)});
  };
  auto scalar = [&](Type element, double value) {
    return scalarConstant(node.loc, element, value);
  };

  Value result;
  if (type == "RandomUniform" || type == "RandomUniformLike") {
    result = uniform(elementType, floatAttr(node, "low", 0.0f),
                     floatAttr(node, "high", 1.0f));
  } else if (type == "RandomNormal" || type == "RandomNormalLike") {
    // Box-Muller in f32: sqrt(-2 ln(1 - u1)) cos(2 pi u2), u in [0, 1) (1 - u1
    // is in (0, 1], so the log is finite).
    Type f32 = builder.getF32Type();
    Value u1 = uniform(f32, 0.0f, 1.0f), u2 = uniform(f32, 0.0f, 1.0f);
    Value radius = build(
        node, "memopt.sqrt",
        {build(node, "memopt.mul",
               {scalar(f32, -2.0),
                build(node, "memopt.log",
                      {build(node, "memopt.sub", {scalar(f32, 1.0), u1})})})});
    Value angle = build(
        node, "memopt.cos",
        {build(node, "memopt.mul", {scalar(f32, 6.283185307179586), u2})});
    Value normal = build(node, "memopt.add",
                         {scalar(f32, floatAttr(node, "mean", 0.0f)),
                          build(node, "memopt.mul",
                                {scalar(f32, floatAttr(node, "scale", 1.0f)),
                                 build(node, "memopt.mul", {radius, angle})})});
    result = elementType == f32
                 ? normal
                 : build(node, "memopt.cast", {normal}, {},
                         {RankedTensorType::get(shape, elementType)});
  } else { // Bernoulli: 1 where u < p.
    Value u = uniform(inputElement, 0.0f, 1.0f);
    Value drawn = build(node, "memopt.less", {u, input});
    result = build(node, "memopt.cast", {drawn}, {},
                   {RankedTensorType::get(shape, elementType)});
  }
  if (!result)
    return failure();
  return SmallVector<Value>{result};
}
