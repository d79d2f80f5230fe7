//===- OnnxComposedOps.cpp - ONNX ops imported as memopt compositions -----===//
//
// Handlers of GraphImporter (GraphImporter.h) for ONNX ops that have no
// memopt op of their own and import as a few memopt ops with the same
// meaning, so every pass, both backends, autodiff and the folders already
// know them:
//   CastLike              cast to the element type of the second input
//   LessOrEqual / GreaterOrEqual   or(less|greater, equal) (NaN gives false)
//   Tile                  reshape -> expand -> reshape
//   ReduceL1 / L2 / SumSquare / LogSum / LogSumExp   abs, mul, sqrt, log,
//                         exp around reduce_sum (LogSumExp subtracts the
//                         maximum first, as onnxruntime's kernel does)
//   InstanceNormalization, GroupNormalization   layer normalization of the
//                         [N, groups, rest] view, then the per-channel
//                         scale and bias (the layer-normalization op keeps
//                         only mean and 1/std for its gradient)
//   RMSNormalization      x * 1 / sqrt(mean(x^2) + epsilon) * scale, the
//                         decomposition transformers' RMSNorm exports to
//   SplitToSequence + SequenceAt / ConcatFromSequence / SequenceLength
//                         sequences of statically many tensors: a split
//                         whose results the importer keeps by name
// The same compositions are onnxruntime's function bodies in the ONNX
// schemas (GroupNormalization-21, RMSNormalization-23 are defined as
// functions there); memopt builds them with its own ops at import instead of
// expanding the schema's function body, so the result folds and verifies
// like any other node.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"
#include "OnnxTensors.h"

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/ShapeUtils.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::onnx_import;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

Value GraphImporter::scalarConstant(Location loc, Type elementType,
                                    double value) {
  auto type = RankedTensorType::get({}, elementType);
  Attribute element = isa<FloatType>(elementType)
                          ? Attribute(builder.getFloatAttr(elementType, value))
                          : Attribute(builder.getIntegerAttr(
                                elementType, static_cast<int64_t>(value)));
  return createConstant(loc, DenseElementsAttr::get(type, element));
}

Value GraphImporter::build(const Node &node, StringRef opName,
                           ArrayRef<Value> operands,
                           ArrayRef<NamedAttribute> attrs,
                           ArrayRef<Type> explicitTypes) {
  if (llvm::is_contained(operands, Value()))
    return {};
  auto result = createOne(node, opName, operands, attrs, explicitTypes);
  return succeeded(result) ? *result : Value();
}

SmallVector<NamedAttribute> GraphImporter::reduceAttrs(ArrayRef<int64_t> axes,
                                                       int64_t keepdims) {
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "axes", builder.getDenseI64ArrayAttr(axes));
  setAttr(attrs, "keepdims", builder.getI64IntegerAttr(keepdims));
  return attrs;
}

Value GraphImporter::sliceAlong(const Node &node, Value value, int64_t axis,
                                int64_t start, int64_t end, int64_t step) {
  if (!value)
    return {};
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "starts", builder.getDenseI64ArrayAttr({start}));
  setAttr(attrs, "ends", builder.getDenseI64ArrayAttr({end}));
  setAttr(attrs, "axes", builder.getDenseI64ArrayAttr({axis}));
  setAttr(attrs, "steps", builder.getDenseI64ArrayAttr({step}));
  return build(node, "memopt.slice", {value}, attrs);
}

Value GraphImporter::transposeBy(const Node &node, Value value,
                                 ArrayRef<int64_t> perm) {
  if (!value)
    return {};
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "perm", builder.getDenseI64ArrayAttr(perm));
  return build(node, "memopt.transpose", {value}, attrs);
}

Value GraphImporter::concatAlong(const Node &node, ArrayRef<Value> values,
                                 int64_t axis) {
  if (values.size() == 1)
    return values.front();
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "axis", builder.getI64IntegerAttr(axis));
  return build(node, "memopt.concat", values, attrs);
}

FailureOr<Value> GraphImporter::reshapeTo(const Node &node, Value value,
                                          ArrayRef<int64_t> shape) {
  RankedTensorType type = typeOf(value);
  if (type.getShape() == shape)
    return value;
  return createOne(node, "memopt.reshape", {value}, {},
                   {RankedTensorType::get(shape, type.getElementType())});
}

FailureOr<Value> GraphImporter::normalizeLastAxis(const Node &node, Value x,
                                                  float epsilon) {
  RankedTensorType type = typeOf(x);
  auto scaleType =
      RankedTensorType::get({type.getShape().back()}, type.getElementType());
  Value ones = createConstant(
      node.loc, DenseElementsAttr::get(
                    scaleType, builder.getFloatAttr(type.getElementType(), 1)));
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "axis", builder.getI64IntegerAttr(-1));
  setAttr(attrs, "epsilon", builder.getF32FloatAttr(epsilon));
  return createOne(node, "memopt.layer_normalization", {x, ones}, attrs);
}

//===----------------------------------------------------------------------===//
// Element types and comparisons
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<Value>> GraphImporter::importCastLike(const Node &node) {
  auto input = lookup(node, 0);
  auto like = lookup(node, 1);
  if (failed(input) || failed(like))
    return failure();
  if (!*like)
    return emitError(node.loc)
           << node.describe() << ": input 1 (target_type) is missing";
  Type elementType = typeOf(*like).getElementType();
  if (typeOf(*input).getElementType() == elementType)
    return SmallVector<Value>{*input};
  auto resultType =
      RankedTensorType::get(typeOf(*input).getShape(), elementType);
  auto result = createOne(node, "memopt.cast", {*input}, {}, {resultType});
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importOrEqual(const Node &node) {
  auto lhs = lookup(node, 0);
  auto rhs = lookup(node, 1);
  if (failed(lhs) || failed(rhs))
    return failure();
  if (!*rhs)
    return emitError(node.loc) << node.describe() << ": input 1 is missing";
  StringRef strict =
      node.type() == "LessOrEqual" ? "memopt.less" : "memopt.greater";
  auto ordered = createOne(node, strict, {*lhs, *rhs}, {});
  if (failed(ordered))
    return failure();
  auto equal = createOne(node, "memopt.equal", {*lhs, *rhs}, {});
  if (failed(equal))
    return failure();
  auto result = createOne(node, "memopt.or", {*ordered, *equal}, {});
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

//===----------------------------------------------------------------------===//
// Tile
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<Value>> GraphImporter::importTile(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  auto repeats = constantInts(node, 1);
  if (failed(repeats))
    return failure();
  RankedTensorType type = typeOf(*input);
  int64_t rank = type.getRank();
  if (static_cast<int64_t>(repeats->size()) != rank)
    return emitError(node.loc) << node.describe() << ": " << repeats->size()
                               << " repeats for an input of rank " << rank;
  if (llvm::all_of(*repeats, [](int64_t r) { return r == 1; }))
    return SmallVector<Value>{*input};
  // x[d0, d1] -> [1, d0, 1, d1] -> expand [r0, d0, r1, d1] -> [r0*d0, r1*d1].
  SmallVector<int64_t> spread, expanded, tiled;
  for (auto [dim, repeat] : llvm::zip(type.getShape(), *repeats)) {
    if (repeat < 0)
      return emitError(node.loc)
             << node.describe() << ": repeat " << repeat << " is negative";
    spread.append({1, dim});
    expanded.append({repeat, dim});
    tiled.push_back(repeat * dim);
  }
  auto spreadValue = reshapeTo(node, *input, spread);
  if (failed(spreadValue))
    return failure();
  auto expandedValue =
      createOne(node, "memopt.expand", {*spreadValue}, {},
                {RankedTensorType::get(expanded, type.getElementType())});
  if (failed(expandedValue))
    return failure();
  auto result = reshapeTo(node, *expandedValue, tiled);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<Value>>
GraphImporter::importComposedReduce(const Node &node) {
  auto data = lookup(node, 0);
  if (failed(data))
    return failure();
  StringRef type = node.type();
  auto axes = reduceAxes(node, typeOf(*data));
  if (failed(axes))
    return failure();
  auto unary = [&](StringRef opName, Value value) {
    return createOne(node, opName, {value}, {});
  };
  auto binary = [&](StringRef opName, Value lhs, Value rhs) {
    return createOne(node, opName, {lhs, rhs}, {});
  };
  auto reduce = [&](StringRef opName, Value value, int64_t keepdims) {
    SmallVector<NamedAttribute> attrs;
    setAttr(attrs, "axes", builder.getDenseI64ArrayAttr((*axes)->first));
    setAttr(attrs, "keepdims", builder.getI64IntegerAttr(keepdims));
    return createOne(node, opName, {value}, attrs);
  };

  // The element-wise part happens whatever the axes (noop_with_empty_axes
  // reduces nothing but still squares, takes absolute values, ...).
  Value x = *data;
  FailureOr<Value> mapped = x;
  if (type == "ReduceL1")
    mapped = unary("memopt.abs", x);
  else if (type == "ReduceL2" || type == "ReduceSumSquare")
    mapped = binary("memopt.mul", x, x);
  if (failed(mapped))
    return failure();

  if (!*axes) {
    FailureOr<Value> result = *mapped;
    if (type == "ReduceL2")
      result = unary("memopt.sqrt", *mapped);
    else if (type == "ReduceLogSum")
      result = unary("memopt.log", *mapped);
    if (failed(result))
      return failure();
    return SmallVector<Value>{*result};
  }

  int64_t keepdims = (*axes)->second;
  FailureOr<Value> result = failure();
  if (type == "ReduceLogSumExp") {
    // log(sum(exp(x - max))) + max: finite for large x.
    auto shiftBy = reduce("memopt.reduce_max", x, /*keepdims=*/1);
    if (failed(shiftBy))
      return failure();
    auto shifted = binary("memopt.sub", x, *shiftBy);
    if (failed(shifted))
      return failure();
    auto exponent = unary("memopt.exp", *shifted);
    if (failed(exponent))
      return failure();
    auto sum = reduce("memopt.reduce_sum", *exponent, keepdims);
    if (failed(sum))
      return failure();
    auto logSum = unary("memopt.log", *sum);
    if (failed(logSum))
      return failure();
    auto maximum = keepdims ? shiftBy : reduce("memopt.reduce_max", x, 0);
    if (failed(maximum))
      return failure();
    result = binary("memopt.add", *logSum, *maximum);
  } else {
    auto sum = reduce("memopt.reduce_sum", *mapped, keepdims);
    if (failed(sum))
      return failure();
    result = *sum;
    if (type == "ReduceL2")
      result = unary("memopt.sqrt", *sum);
    else if (type == "ReduceLogSum")
      result = unary("memopt.log", *sum);
  }
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

//===----------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------===//

/// InstanceNormalization (a group per channel) and GroupNormalization.
FailureOr<SmallVector<Value>>
GraphImporter::importGroupNormalization(const Node &node) {
  auto x = lookup(node, 0);
  auto scale = lookup(node, 1);
  auto bias = lookup(node, 2);
  if (failed(x) || failed(scale) || failed(bias))
    return failure();
  RankedTensorType type = typeOf(*x);
  if (type.getRank() < 3 || !*scale || !*bias)
    return emitError(node.loc)
           << node.describe()
           << ": expected an input of rank 3 or more [N, C, ...] with scale "
              "and bias";
  int64_t channels = type.getDimSize(1);
  bool instance = node.type() == "InstanceNormalization";
  int64_t groups = instance ? channels : intAttr(node, "num_groups", 0);
  if (groups <= 0 || channels % groups != 0)
    return emitError(node.loc)
           << node.describe() << ": num_groups " << groups
           << " must be positive and divide the " << channels << " channels";
  Value channelScale = *scale, channelBias = *bias;
  int64_t perGroup = channels / groups;
  // Opset 18 gives one scale and bias per group (the definition opset 21
  // replaced with one per channel); spread them over the group's channels.
  if (!instance && opset < 21 && typeOf(*scale).getNumElements() == groups &&
      perGroup != 1) {
    for (Value *value : {&channelScale, &channelBias}) {
      auto column = reshapeTo(node, *value, {groups, 1});
      if (failed(column))
        return failure();
      auto spread =
          createOne(node, "memopt.expand", {*column}, {},
                    {RankedTensorType::get({groups, perGroup},
                                           typeOf(*value).getElementType())});
      if (failed(spread))
        return failure();
      auto flat = reshapeTo(node, *spread, {channels});
      if (failed(flat))
        return failure();
      *value = *flat;
    }
  }
  if (typeOf(channelScale).getNumElements() != channels ||
      typeOf(channelBias).getNumElements() != channels)
    return emitError(node.loc)
           << node.describe() << ": scale and bias must have " << channels
           << " elements"
           << (!instance && opset < 21 ? " (or one per group)" : "");
  auto result =
      normalizeGroups(node, *x, groups, floatAttr(node, "epsilon", 1e-5f),
                      channelScale, channelBias);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>>
GraphImporter::importRMSNormalization(const Node &node) {
  auto x = lookup(node, 0);
  auto scale = lookup(node, 1);
  if (failed(x) || failed(scale))
    return failure();
  if (!*scale)
    return emitError(node.loc) << node.describe() << ": scale is missing";
  RankedTensorType type = typeOf(*x);
  int64_t rank = type.getRank();
  int64_t axisAttr = intAttr(node, "axis", -1);
  int64_t axis = axisAttr < 0 ? axisAttr + rank : axisAttr;
  if (axis < 0 || axis >= rank)
    return emitError(node.loc) << node.describe() << ": axis " << axisAttr
                               << " is out of range for rank " << rank;
  SmallVector<int64_t> axes;
  for (int64_t i = axis; i < rank; ++i)
    axes.push_back(i);
  Type elementType = type.getElementType();
  auto square = createOne(node, "memopt.mul", {*x, *x}, {});
  if (failed(square))
    return failure();
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "axes", builder.getDenseI64ArrayAttr(axes));
  setAttr(attrs, "keepdims", builder.getI64IntegerAttr(1));
  auto meanSquare = createOne(node, "memopt.reduce_mean", {*square}, attrs);
  if (failed(meanSquare))
    return failure();
  Value epsilon =
      scalarConstant(node.loc, elementType, floatAttr(node, "epsilon", 1e-5f));
  auto shifted = createOne(node, "memopt.add", {*meanSquare, epsilon}, {});
  if (failed(shifted))
    return failure();
  auto root = createOne(node, "memopt.sqrt", {*shifted}, {});
  if (failed(root))
    return failure();
  auto inverse = createOne(node, "memopt.reciprocal", {*root}, {});
  if (failed(inverse))
    return failure();
  auto normalized = createOne(node, "memopt.mul", {*x, *inverse}, {});
  if (failed(normalized))
    return failure();
  auto result = createOne(node, "memopt.mul", {*normalized, *scale}, {});
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<Value> GraphImporter::normalizeGroups(const Node &node, Value x,
                                                int64_t groups, float epsilon,
                                                Value channelScale,
                                                Value channelBias) {
  RankedTensorType type = typeOf(x);
  ArrayRef<int64_t> shape = type.getShape();
  int64_t batch = shape[0], channels = shape[1];
  int64_t rest = type.getNumElements() / (batch * groups);
  auto grouped = reshapeTo(node, x, {batch, groups, rest});
  if (failed(grouped))
    return failure();
  auto normalized = normalizeLastAxis(node, *grouped, epsilon);
  if (failed(normalized))
    return failure();
  auto restored = reshapeTo(node, *normalized, shape);
  if (failed(restored))
    return failure();
  // [C] -> [C, 1, ..., 1], broadcast against [N, C, ...].
  SmallVector<int64_t> channelShape(type.getRank() - 1, 1);
  channelShape[0] = channels;
  auto scale = reshapeTo(node, channelScale, channelShape);
  auto bias = reshapeTo(node, channelBias, channelShape);
  if (failed(scale) || failed(bias))
    return failure();
  auto scaled = createOne(node, "memopt.mul", {*restored, *scale}, {});
  if (failed(scaled))
    return failure();
  return createOne(node, "memopt.add", {*scaled, *bias}, {});
}

//===----------------------------------------------------------------------===//
// Sequences
//===----------------------------------------------------------------------===//

FailureOr<ArrayRef<Value>> GraphImporter::lookupSequence(const Node &node,
                                                         int inputIndex) {
  if (!node.hasInput(inputIndex))
    return emitError(node.loc) << node.describe() << ": input " << inputIndex
                               << " (the sequence) is missing";
  auto it = sequences.find(node.proto.input(inputIndex));
  if (it == sequences.end())
    return emitError(node.loc)
           << node.describe() << ": input " << inputIndex << " ('"
           << node.proto.input(inputIndex)
           << "') is not a sequence made by SplitToSequence; memopt imports "
              "no other sequences";
  return ArrayRef<Value>(it->second);
}

FailureOr<SmallVector<Value>>
GraphImporter::importSplitToSequence(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  RankedTensorType type = typeOf(*input);
  int64_t axisAttr = intAttr(node, "axis", 0);
  std::optional<int64_t> axis = normalizeAxis(axisAttr, type.getRank());
  if (!axis)
    return emitError(node.loc) << node.describe() << ": axis " << axisAttr
                               << " is out of range for " << type;
  int64_t dim = type.getDimSize(*axis);
  SmallVector<int64_t> sizes;
  bool squeeze = false;
  if (node.hasInput(1)) {
    auto split = constantInts(node, 1);
    if (failed(split))
      return failure();
    if (typeOf(*lookup(node, 1)).getRank() == 0) {
      // One chunk size: the last chunk takes what remains.
      int64_t chunk = (*split)[0];
      if (chunk <= 0)
        return emitError(node.loc) << node.describe() << ": split size "
                                   << chunk << " is not positive";
      for (int64_t start = 0; start < dim; start += chunk)
        sizes.push_back(std::min(chunk, dim - start));
    } else {
      sizes = *split;
    }
  } else {
    sizes.assign(dim, 1);
    squeeze = intAttr(node, "keepdims", 1) == 0;
  }
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0)
      return emitError(node.loc)
             << node.describe() << ": split size " << size << " is negative";
    total += size;
  }
  if (total != dim)
    return emitError(node.loc)
           << node.describe() << ": split sizes [" << formatShape(sizes)
           << "] add up to " << total << ", not " << dim;
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "axis", builder.getI64IntegerAttr(*axis));
  setAttr(attrs, "split", builder.getDenseI64ArrayAttr(sizes));
  auto parts =
      sizes.size() == 1
          ? FailureOr<SmallVector<Value>>(SmallVector<Value>{*input})
          : createOp(node, "memopt.split", {*input}, attrs, sizes.size());
  if (failed(parts))
    return failure();
  SmallVector<Value> tensors = *parts;
  if (squeeze) {
    SmallVector<NamedAttribute> squeezeAttrs;
    setAttr(squeezeAttrs, "axes", builder.getDenseI64ArrayAttr({*axis}));
    for (Value &tensor : tensors) {
      auto squeezed = createOne(node, "memopt.squeeze", {tensor}, squeezeAttrs);
      if (failed(squeezed))
        return failure();
      tensor = *squeezed;
    }
  }
  if (node.proto.output_size() != 1 || node.proto.output(0).empty())
    return emitError(node.loc) << node.describe() << ": expected one output";
  sequences[node.proto.output(0)] = std::move(tensors);
  return SmallVector<Value>();
}

FailureOr<SmallVector<Value>>
GraphImporter::importSequenceAt(const Node &node) {
  auto sequence = lookupSequence(node, 0);
  if (failed(sequence))
    return failure();
  auto position = constantInts(node, 1);
  if (failed(position))
    return failure();
  int64_t size = sequence->size();
  int64_t index = position->empty() ? 0 : (*position)[0];
  if (index < -size || index >= size)
    return emitError(node.loc)
           << node.describe() << ": position " << index
           << " is out of range for a sequence of " << size << " tensors";
  return SmallVector<Value>{(*sequence)[index < 0 ? index + size : index]};
}

FailureOr<SmallVector<Value>>
GraphImporter::importConcatFromSequence(const Node &node) {
  auto sequence = lookupSequence(node, 0);
  if (failed(sequence))
    return failure();
  if (sequence->empty())
    return emitError(node.loc) << node.describe() << ": the sequence is empty";
  int64_t newAxis = intAttr(node, "new_axis", 0);
  int64_t rank = typeOf(sequence->front()).getRank() + (newAxis ? 1 : 0);
  int64_t axisAttr = intAttr(node, "axis", 0);
  std::optional<int64_t> axis = normalizeAxis(axisAttr, rank);
  if (!axis)
    return emitError(node.loc) << node.describe() << ": axis " << axisAttr
                               << " is out of range for rank " << rank;
  SmallVector<Value> tensors(sequence->begin(), sequence->end());
  if (newAxis) {
    SmallVector<NamedAttribute> attrs;
    setAttr(attrs, "axes", builder.getDenseI64ArrayAttr({*axis}));
    for (Value &tensor : tensors) {
      auto expanded = createOne(node, "memopt.unsqueeze", {tensor}, attrs);
      if (failed(expanded))
        return failure();
      tensor = *expanded;
    }
  }
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "axis", builder.getI64IntegerAttr(*axis));
  auto result = createOne(node, "memopt.concat", tensors, attrs);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>>
GraphImporter::importSequenceLength(const Node &node) {
  auto sequence = lookupSequence(node, 0);
  if (failed(sequence))
    return failure();
  auto scalar = RankedTensorType::get({}, builder.getI64Type());
  return SmallVector<Value>{createConstant(
      node.loc,
      DenseElementsAttr::get(scalar, static_cast<int64_t>(sequence->size())))};
}

//===----------------------------------------------------------------------===//
// Mixed-type arithmetic
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<Value>> GraphImporter::importPow(const Node &node) {
  auto base = lookup(node, 0);
  auto exponent = lookup(node, 1);
  if (failed(base) || failed(exponent))
    return failure();
  if (!*exponent)
    return emitError(node.loc) << node.describe() << ": input 1 is missing";
  // ONNX lets the exponent's type differ from the base's (BLOOM's ALiBi
  // slopes raise f32 to i32 powers); memopt's pow takes one type, so the
  // exponent is converted to the base's.
  Type elementType = typeOf(*base).getElementType();
  Value power = *exponent;
  if (typeOf(power).getElementType() != elementType) {
    auto converted = createOne(
        node, "memopt.cast", {power}, {},
        {RankedTensorType::get(typeOf(power).getShape(), elementType)});
    if (failed(converted))
      return failure();
    power = *converted;
  }
  auto result = createOne(node, "memopt.pow", {*base, power}, {});
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}
