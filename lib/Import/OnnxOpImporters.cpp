//===- OnnxOpImporters.cpp - ONNX ops whose inputs become attributes ------===//
//
// Handlers of GraphImporter (GraphImporter.h) for the ONNX ops whose
// shape-deciding inputs (Reshape's shape, Slice's starts, reduction axes,
// Resize's scales, ...) must fold to constants at import and become
// attributes of the memopt op, and for the ops whose attributes moved to
// inputs across opsets 13..21 (both forms land in the same attribute).
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"
#include "OnnxTensors.h"
#include "mlir/IR/Matchers.h"

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/ShapeUtils.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::onnx_import;

FailureOr<SmallVector<Value>> GraphImporter::importReshape(const Node &node) {
  auto data = lookup(node, 0);
  if (failed(data))
    return failure();
  auto requested = constantInts(node, 1);
  if (failed(requested))
    return failure();
  RankedTensorType inputType = typeOf(*data);
  bool allowZero = intAttr(node, "allowzero", 0) != 0;
  SmallVector<int64_t> shape;
  std::optional<size_t> inferredIndex;
  int64_t known = 1;
  for (auto [i, dim] : llvm::enumerate(*requested)) {
    if (dim == 0 && !allowZero) {
      if (i >= static_cast<size_t>(inputType.getRank()))
        return emitError(node.loc)
               << node.describe() << ": shape entry " << i
               << " is 0 (copy the input dimension), but the input "
               << inputType << " has rank " << inputType.getRank();
      dim = inputType.getDimSize(i);
    } else if (dim == -1) {
      if (inferredIndex)
        return emitError(node.loc)
               << node.describe() << ": shape has more than one -1";
      inferredIndex = i;
      shape.push_back(1);
      continue;
    } else if (dim < 0) {
      return emitError(node.loc)
             << node.describe() << ": shape entry " << i << " is " << dim;
    }
    shape.push_back(dim);
    if (llvm::MulOverflow(known, dim, known))
      return emitError(node.loc)
             << node.describe() << ": shape [" << formatShape(*requested)
             << "] has more elements than fit in 64 bits";
  }
  int64_t total = inputType.getNumElements();
  if (inferredIndex) {
    if (known == 0 || total % known != 0)
      return emitError(node.loc)
             << node.describe() << ": cannot infer the -1 of shape ["
             << formatShape(*requested) << "] for input " << inputType;
    shape[*inferredIndex] = total / known;
  } else if (known != total) {
    return emitError(node.loc)
           << node.describe() << ": cannot reshape " << inputType << " ("
           << total << " elements) to [" << formatShape(shape) << "]";
  }
  auto resultType = RankedTensorType::get(shape, inputType.getElementType());
  auto result = createOne(node, "memopt.reshape", {*data}, {}, {resultType});
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importExpand(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  auto shape = constantInts(node, 1);
  if (failed(shape))
    return failure();
  RankedTensorType inputType = typeOf(*input);
  std::optional<SmallVector<int64_t>> broadcast =
      broadcastShapes(inputType.getShape(), *shape);
  if (!broadcast)
    return emitError(node.loc)
           << node.describe() << ": input " << inputType
           << " does not broadcast to shape [" << formatShape(*shape) << "]";
  auto resultType =
      RankedTensorType::get(*broadcast, inputType.getElementType());
  auto result = createOne(node, "memopt.expand", {*input}, {}, {resultType});
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importCast(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  int64_t to = intAttr(node, "to", 0);
  Type elementType = convertElementType(static_cast<int32_t>(to), &context);
  if (!elementType)
    return emitError(node.loc) << node.describe() << ": target type "
                               << onnxTypeName(static_cast<int32_t>(to))
                               << " is not supported by memopt";
  auto attrs = nodeAttributes(node, {"to"});
  if (failed(attrs))
    return failure();
  auto resultType =
      RankedTensorType::get(typeOf(*input).getShape(), elementType);
  auto result = createOne(node, "memopt.cast", {*input}, *attrs, {resultType});
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>>
GraphImporter::importConstantOfShape(const Node &node) {
  auto shape = constantInts(node, 0);
  if (failed(shape))
    return failure();
  for (int64_t dim : *shape)
    if (dim < 0)
      return emitError(node.loc)
             << node.describe() << ": shape [" << formatShape(*shape)
             << "] has a negative dimension";
  DenseElementsAttr fill = DenseElementsAttr::get(
      RankedTensorType::get({1}, builder.getF32Type()), 0.0f);
  if (const onnx::AttributeProto *attr = node.attribute("value")) {
    ElementsAttr value = convertTensor(attr->t(), modelFolder, node.loc);
    if (!value)
      return failure();
    fill = dyn_cast<DenseElementsAttr>(value);
    if (!fill || fill.getNumElements() != 1)
      return emitError(node.loc)
             << node.describe() << ": 'value' must hold exactly one element";
  }
  auto type = RankedTensorType::get(*shape, fill.getElementType());
  return SmallVector<Value>{createConstant(
      node.loc, DenseElementsAttr::get(type, fill.getValues<Attribute>()[0]))};
}

/// The normalized output only: the running mean / var outputs exist for
/// training and must be unused. A BatchNormalization exported in training
/// mode keeps training_mode = 1: memopt-make-trainable turns it into batch
/// statistics with running statistic updates (docs/training.md).
FailureOr<SmallVector<Value>>
GraphImporter::importBatchNormalization(const Node &node) {
  if (failed(checkUnusedOutputs(node, 1, memoptOpName(node.type()))))
    return failure();
  return importGeneric(node, /*numResults=*/1);
}

FailureOr<SmallVector<Value>> GraphImporter::importRange(const Node &node) {
  SmallVector<Value> operands;
  SmallVector<double> bounds;
  for (int i = 0; i < 3; ++i) {
    auto value = lookup(node, i);
    if (failed(value))
      return failure();
    auto scalar = constantFloats(node, i);
    if (failed(scalar))
      return failure();
    if (scalar->size() != 1)
      return emitError(node.loc)
             << node.describe() << ": input " << i << " must be a scalar";
    operands.push_back(*value);
    bounds.push_back((*scalar)[0]);
  }
  if (bounds[2] == 0)
    return emitError(node.loc) << node.describe() << ": delta is 0";
  int64_t count = std::max<int64_t>(
      0, static_cast<int64_t>(std::ceil((bounds[1] - bounds[0]) / bounds[2])));
  auto resultType =
      RankedTensorType::get({count}, typeOf(operands[0]).getElementType());
  auto result = createOne(node, "memopt.range", operands, {}, {resultType});
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

/// Normalizes ONNX axes against `rank`, sorts them and drops repeats.
FailureOr<SmallVector<int64_t>>
mlir::memopt::onnx_import::normalizeAxes(ArrayRef<int64_t> axes, int64_t rank,
                                         Location loc, StringRef what) {
  SmallVector<int64_t> result;
  for (int64_t axis : axes) {
    std::optional<int64_t> normalized = normalizeAxis(axis, rank);
    if (!normalized)
      return emitError(loc) << what << ": axis " << axis
                            << " is out of range for rank " << rank;
    result.push_back(*normalized);
  }
  llvm::sort(result);
  result.erase(llvm::unique(result), result.end());
  return result;
}

FailureOr<SmallVector<Value>> GraphImporter::importSqueeze(const Node &node,
                                                           bool squeeze) {
  auto data = lookup(node, 0);
  if (failed(data))
    return failure();
  RankedTensorType inputType = typeOf(*data);
  // Opset 13 moved `axes` from an attribute to an input; accept both.
  SmallVector<int64_t> axes;
  if (node.hasInput(1)) {
    auto values = constantInts(node, 1);
    if (failed(values))
      return failure();
    axes = *values;
  } else if (auto attr = intsAttr(node, "axes")) {
    axes = *attr;
  } else if (squeeze) {
    for (auto [i, dim] : llvm::enumerate(inputType.getShape()))
      if (dim == 1)
        axes.push_back(i);
  } else {
    return emitError(node.loc) << node.describe() << ": 'axes' is missing";
  }
  int64_t rank = squeeze
                     ? inputType.getRank()
                     : inputType.getRank() + static_cast<int64_t>(axes.size());
  auto normalized = normalizeAxes(axes, rank, node.loc, node.describe());
  if (failed(normalized))
    return failure();
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "axes", builder.getDenseI64ArrayAttr(*normalized));
  auto result = createOne(node, squeeze ? "memopt.squeeze" : "memopt.unsqueeze",
                          {*data}, attrs);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importSlice(const Node &node) {
  auto data = lookup(node, 0);
  if (failed(data))
    return failure();
  int64_t rank = typeOf(*data).getRank();
  auto starts = constantInts(node, 1);
  if (failed(starts))
    return failure();
  auto ends = constantInts(node, 2);
  if (failed(ends))
    return failure();
  if (starts->size() != ends->size())
    return emitError(node.loc)
           << node.describe() << ": starts and ends differ in length";
  SmallVector<int64_t> axes, steps(starts->size(), 1);
  if (node.hasInput(3)) {
    auto values = constantInts(node, 3);
    if (failed(values))
      return failure();
    axes = *values;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(i);
  }
  if (node.hasInput(4)) {
    auto values = constantInts(node, 4);
    if (failed(values))
      return failure();
    steps = *values;
  }
  if (axes.size() != starts->size() || steps.size() != starts->size())
    return emitError(node.loc)
           << node.describe()
           << ": starts, ends, axes and steps must have the same length";
  for (int64_t &axis : axes) {
    std::optional<int64_t> normalized = normalizeAxis(axis, rank);
    if (!normalized)
      return emitError(node.loc) << node.describe() << ": axis " << axis
                                 << " is out of range for rank " << rank;
    axis = *normalized;
  }
  for (int64_t step : steps)
    if (step == 0)
      return emitError(node.loc) << node.describe() << ": a step is 0";
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "starts", builder.getDenseI64ArrayAttr(*starts));
  setAttr(attrs, "ends", builder.getDenseI64ArrayAttr(*ends));
  setAttr(attrs, "axes", builder.getDenseI64ArrayAttr(axes));
  setAttr(attrs, "steps", builder.getDenseI64ArrayAttr(steps));
  auto result = createOne(node, "memopt.slice", {*data}, attrs);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importSplit(const Node &node) {
  auto data = lookup(node, 0);
  if (failed(data))
    return failure();
  RankedTensorType inputType = typeOf(*data);
  int64_t axisAttr = intAttr(node, "axis", 0);
  std::optional<int64_t> axis = normalizeAxis(axisAttr, inputType.getRank());
  if (!axis)
    return emitError(node.loc) << node.describe() << ": axis " << axisAttr
                               << " is out of range for " << inputType;
  int64_t dim = inputType.getDimSize(*axis);
  int64_t numOutputs = node.proto.output_size();
  if (numOutputs == 0)
    return emitError(node.loc) << node.describe() << ": no outputs";
  SmallVector<int64_t> sizes;
  if (node.hasInput(1)) {
    auto values = constantInts(node, 1);
    if (failed(values))
      return failure();
    sizes = *values;
  } else if (auto attr = intsAttr(node, "split")) {
    sizes = *attr;
  } else if (const onnx::AttributeProto *count =
                 node.attribute("num_outputs")) {
    // Opset 18: ceil(dim / n) per output, the last one takes the remainder.
    if (count->i() != numOutputs)
      return emitError(node.loc)
             << node.describe() << ": num_outputs is " << count->i()
             << " but the node has " << numOutputs << " outputs";
    int64_t chunk = (dim + numOutputs - 1) / numOutputs;
    for (int64_t i = 0; i < numOutputs; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - chunk * i)));
  } else {
    if (dim % numOutputs != 0)
      return emitError(node.loc)
             << node.describe() << ": dimension " << dim << " of axis " << *axis
             << " does not split evenly into " << numOutputs << " outputs";
    sizes.assign(numOutputs, dim / numOutputs);
  }
  if (static_cast<int64_t>(sizes.size()) != numOutputs)
    return emitError(node.loc)
           << node.describe() << ": " << sizes.size() << " split sizes for "
           << numOutputs << " outputs";
  int64_t total = 0;
  for (int64_t size : sizes)
    if (size < 0 || llvm::AddOverflow(total, size, total))
      return emitError(node.loc)
             << node.describe() << ": split sizes [" << formatShape(sizes)
             << "] must be non-negative and add up to " << dim;
  if (total != dim)
    return emitError(node.loc)
           << node.describe() << ": split sizes [" << formatShape(sizes)
           << "] add up to " << total << ", not " << dim;
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "axis", builder.getI64IntegerAttr(*axis));
  setAttr(attrs, "split", builder.getDenseI64ArrayAttr(sizes));
  return createOp(node, "memopt.split", {*data}, attrs, numOutputs);
}

FailureOr<std::optional<std::pair<SmallVector<int64_t>, int64_t>>>
GraphImporter::reduceAxes(const Node &node, RankedTensorType inputType) {
  // ReduceSum takes `axes` as an input since opset 13, the others since 18;
  // accept whichever form the node carries.
  SmallVector<int64_t> axes;
  if (node.hasInput(1)) {
    auto values = constantInts(node, 1);
    if (failed(values))
      return failure();
    axes = *values;
  } else if (auto attr = intsAttr(node, "axes")) {
    axes = *attr;
  }
  if (axes.empty()) {
    if (intAttr(node, "noop_with_empty_axes", 0) != 0)
      return std::optional<std::pair<SmallVector<int64_t>, int64_t>>();
    for (int64_t i = 0; i < inputType.getRank(); ++i)
      axes.push_back(i);
  }
  auto normalized =
      normalizeAxes(axes, inputType.getRank(), node.loc, node.describe());
  if (failed(normalized))
    return failure();
  return std::optional<std::pair<SmallVector<int64_t>, int64_t>>(
      std::make_pair(*normalized, intAttr(node, "keepdims", 1)));
}

FailureOr<SmallVector<Value>> GraphImporter::importReduce(const Node &node) {
  auto data = lookup(node, 0);
  if (failed(data))
    return failure();
  auto axes = reduceAxes(node, typeOf(*data));
  if (failed(axes))
    return failure();
  if (!*axes)
    return SmallVector<Value>{*data};
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "axes", builder.getDenseI64ArrayAttr((*axes)->first));
  setAttr(attrs, "keepdims", builder.getI64IntegerAttr((*axes)->second));
  RankedTensorType type = typeOf(*data);
  bool isBool = type.getElementType().isInteger(1);
  bool isMin = node.type() == "ReduceMin";
  if (!isBool && !isMin) {
    auto result = createOne(node, memoptOpName(node.type()), {*data}, attrs);
    if (failed(result))
      return failure();
    return SmallVector<Value>{*result};
  }
  auto unary = [&](StringRef opName, Value value) {
    return createOne(node, opName, {value}, {});
  };
  if (!isBool) {
    // min(x) = -max(-x); an empty set gives +inf, as ONNX's ReduceMin.
    auto negated = unary("memopt.neg", *data);
    if (failed(negated))
      return failure();
    auto maximum = createOne(node, "memopt.reduce_max", {*negated}, attrs);
    if (failed(maximum))
      return failure();
    auto result = unary("memopt.neg", *maximum);
    if (failed(result))
      return failure();
    return SmallVector<Value>{*result};
  }
  // Booleans: max is "any" (a positive count of trues; false for an empty
  // set), min is "all" = not(any(not x)) (true for an empty set).
  Value x = *data;
  if (isMin) {
    auto inverted = unary("memopt.not", x);
    if (failed(inverted))
      return failure();
    x = *inverted;
  }
  auto counted =
      createOne(node, "memopt.cast", {x}, {},
                {RankedTensorType::get(type.getShape(), builder.getF32Type())});
  if (failed(counted))
    return failure();
  auto count = createOne(node, "memopt.reduce_sum", {*counted}, attrs);
  if (failed(count))
    return failure();
  Value zero = scalarConstant(node.loc, builder.getF32Type(), 0);
  auto result = createOne(node, "memopt.greater", {*count, zero}, {});
  if (succeeded(result) && isMin)
    result = unary("memopt.not", *result);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importPad(const Node &node) {
  auto data = lookup(node, 0);
  if (failed(data))
    return failure();
  int64_t rank = typeOf(*data).getRank();
  auto pads = constantInts(node, 1);
  if (failed(pads))
    return failure();
  double constantValue = 0;
  if (node.hasInput(2)) {
    auto value = constantFloats(node, 2);
    if (failed(value))
      return failure();
    if (value->size() != 1)
      return emitError(node.loc)
             << node.describe() << ": constant_value must be a scalar";
    constantValue = (*value)[0];
  }
  // Opset 18's `axes` input names the axes `pads` refers to.
  SmallVector<int64_t> axes;
  if (node.hasInput(3)) {
    auto values = constantInts(node, 3);
    if (failed(values))
      return failure();
    for (int64_t axis : *values) {
      std::optional<int64_t> normalized = normalizeAxis(axis, rank);
      if (!normalized)
        return emitError(node.loc) << node.describe() << ": axis " << axis
                                   << " is out of range for rank " << rank;
      axes.push_back(*normalized);
    }
  } else {
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  int64_t numAxes = axes.size();
  if (static_cast<int64_t>(pads->size()) != 2 * numAxes)
    return emitError(node.loc)
           << node.describe() << ": pads has " << pads->size()
           << " values, expected " << 2 * numAxes;
  SmallVector<int64_t> fullPads(2 * rank, 0);
  for (auto [i, axis] : llvm::enumerate(axes)) {
    fullPads[axis] = (*pads)[i];
    fullPads[axis + rank] = (*pads)[i + numAxes];
  }
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "pads", builder.getDenseI64ArrayAttr(fullPads));
  setAttr(attrs, "mode",
          builder.getStringAttr(stringAttr(node, "mode", "constant")));
  setAttr(attrs, "constant_value", builder.getF64FloatAttr(constantValue));
  auto result = createOne(node, "memopt.pad", {*data}, attrs);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importClip(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  SmallVector<NamedAttribute> attrs;
  const std::pair<int, StringRef> bounds[] = {{1, "min"}, {2, "max"}};
  for (auto [index, name] : bounds) {
    if (!node.hasInput(index))
      continue;
    auto value = constantFloats(node, index);
    if (failed(value))
      return failure();
    if (value->size() != 1)
      return emitError(node.loc)
             << node.describe() << ": " << name << " must be a scalar";
    setAttr(attrs, name, builder.getF64FloatAttr((*value)[0]));
  }
  auto result = createOne(node, "memopt.clip", {*input}, attrs);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importResize(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  RankedTensorType inputType = typeOf(*input);
  int64_t rank = inputType.getRank();
  SmallVector<int64_t> axes;
  if (auto attr = intsAttr(node, "axes")) {
    // Checked (in range, no repeats) but kept in order: scales and sizes
    // follow it (axes [3, 2] take sizes [W, H]).
    if (failed(normalizeAxes(*attr, rank, node.loc, node.describe())))
      return failure();
    for (int64_t axis : *attr)
      axes.push_back(axis < 0 ? axis + rank : axis);
    if (llvm::SmallDenseSet<int64_t>(axes.begin(), axes.end()).size() !=
        axes.size())
      return emitError(node.loc)
             << node.describe() << ": axes has a repeated axis";
  } else {
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }

  SmallVector<int64_t> shape(inputType.getShape());
  SmallVector<int64_t> sizes;
  SmallVector<double> scales;
  if (node.hasInput(3)) {
    auto values = constantInts(node, 3);
    if (failed(values))
      return failure();
    sizes = *values;
  }
  if (sizes.empty() && node.hasInput(2)) {
    auto values = constantFloats(node, 2);
    if (failed(values))
      return failure();
    scales = *values;
  }
  if (!sizes.empty()) {
    if (sizes.size() != axes.size())
      return emitError(node.loc)
             << node.describe() << ": sizes has " << sizes.size()
             << " values for " << axes.size() << " axes";
    std::string policy =
        stringAttr(node, "keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (auto [axis, size] : llvm::zip(axes, sizes))
        shape[axis] = size;
    } else if (policy == "not_larger" || policy == "not_smaller") {
      double scale = policy == "not_larger" ? INFINITY : 0;
      for (auto [axis, size] : llvm::zip(axes, sizes)) {
        double ratio = double(size) / double(inputType.getDimSize(axis));
        scale = policy == "not_larger" ? std::min(scale, ratio)
                                       : std::max(scale, ratio);
      }
      for (int64_t axis : axes) {
        double size = std::round(scale * double(inputType.getDimSize(axis)));
        if (!isDimension(size))
          return emitError(node.loc)
                 << node.describe() << ": output size " << size << " on axis "
                 << axis << " is not a tensor dimension";
        shape[axis] = static_cast<int64_t>(size);
      }
    } else {
      return emitError(node.loc)
             << node.describe() << ": unknown keep_aspect_ratio_policy '"
             << policy << "'";
    }
  } else if (!scales.empty()) {
    if (scales.size() != axes.size())
      return emitError(node.loc)
             << node.describe() << ": scales has " << scales.size()
             << " values for " << axes.size() << " axes";
    for (auto [axis, scale] : llvm::zip(axes, scales)) {
      double size = std::floor(double(inputType.getDimSize(axis)) * scale);
      if (!isDimension(size))
        return emitError(node.loc)
               << node.describe() << ": scale " << scale << " on axis " << axis
               << " gives " << size << ", which is not a tensor dimension";
      shape[axis] = static_cast<int64_t>(size);
    }
  } else {
    return emitError(node.loc)
           << node.describe() << ": neither scales nor sizes is given";
  }
  // The scale of every axis (what the coordinates follow): the given one, or
  // output / input.
  SmallVector<double> axisScales;
  for (int64_t i = 0; i < rank; ++i)
    axisScales.push_back(double(shape[i]) / double(inputType.getDimSize(i)));
  bool scaleDiffers = false;
  if (sizes.empty())
    for (auto [axis, scale] : llvm::zip(axes, scales)) {
      scaleDiffers |= std::abs(axisScales[axis] - scale) > 1e-9 * scale;
      axisScales[axis] = scale;
    }
  std::string transform =
      stringAttr(node, "coordinate_transformation_mode", "half_pixel");
  if (stringAttr(node, "mode", "nearest") == "cubic" ||
      intAttr(node, "antialias", 0) != 0 || transform == "tf_crop_and_resize" ||
      transform == "half_pixel_symmetric" || scaleDiffers) {
    // Forms the resize kernels lack: products with interpolation matrices
    // (OnnxComposedResize.cpp).
    SmallVector<double> roi;
    if (transform == "tf_crop_and_resize" && node.hasInput(1)) {
      auto values = constantFloats(node, 1);
      if (failed(values))
        return failure();
      if (values->size() != 2 * axes.size())
        return emitError(node.loc)
               << node.describe() << ": roi has " << values->size()
               << " values for " << axes.size() << " axes";
      roi.assign(rank, 0.0);
      roi.append(rank, 1.0);
      for (auto [i, axis] : llvm::enumerate(axes)) {
        roi[axis] = (*values)[i];
        roi[axis + rank] = (*values)[i + axes.size()];
      }
    }
    auto result = resizeByMatrices(node, *input, shape, axisScales, roi);
    if (failed(result))
      return failure();
    return SmallVector<Value>{*result};
  }
  auto attrs = nodeAttributes(node, {"axes", "keep_aspect_ratio_policy",
                                     "extrapolation_value", "antialias"});
  if (failed(attrs))
    return failure();
  auto resultType = RankedTensorType::get(shape, inputType.getElementType());
  auto result =
      createOne(node, "memopt.resize", {*input}, *attrs, {resultType});
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importWindowOp(const Node &node) {
  StringRef type = node.type();
  bool isConv = type == "Conv" || type == "ConvTranspose";
  SmallVector<Value> operands;
  for (int i = 0; i < node.proto.input_size(); ++i) {
    auto value = lookup(node, i);
    if (failed(value))
      return failure();
    operands.push_back(*value);
  }
  if (operands.empty() || !operands[0] ||
      (isConv && (operands.size() < 2 || !operands[1])))
    return emitError(node.loc) << node.describe() << ": missing inputs";
  if (isConv && typeOf(operands[1]).getRank() != typeOf(operands[0]).getRank())
    return emitError(node.loc)
           << node.describe() << ": weight " << typeOf(operands[1])
           << " must have the rank of the input " << typeOf(operands[0]);
  if (type == "MaxPool" &&
      failed(checkUnusedOutputs(node, 1, "memopt.max_pool")))
    return failure();
  auto attrs = windowAttributes(node, operands);
  if (failed(attrs))
    return failure();
  auto result = createOne(node, memoptOpName(type), operands, *attrs);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<NamedAttribute>>
GraphImporter::windowAttributes(const Node &node, ArrayRef<Value> operands,
                                ArrayRef<StringRef> skipped) {
  StringRef type = node.type();
  bool isConv = type == "Conv" || type == "ConvTranspose";
  bool isTranspose = type == "ConvTranspose";
  RankedTensorType inputType = typeOf(operands[0]);
  int64_t spatial = inputType.getRank() - 2;
  if (spatial < 1)
    return emitError(node.loc) << node.describe() << ": input " << inputType
                               << " has no spatial dimensions";
  ArrayRef<int64_t> inputShape = inputType.getShape().drop_front(2);

  SmallVector<int64_t> kernel;
  if (auto attr = intsAttr(node, "kernel_shape"))
    kernel = *attr;
  else if (isConv)
    kernel.assign(typeOf(operands[1]).getShape().drop_front(2).begin(),
                  typeOf(operands[1]).getShape().drop_front(2).end());
  else
    return emitError(node.loc)
           << node.describe() << ": 'kernel_shape' is missing";
  auto orOnes = [&](StringRef name) {
    return intsAttr(node, name).value_or(SmallVector<int64_t>(spatial, 1));
  };
  SmallVector<int64_t> strides = orOnes("strides");
  SmallVector<int64_t> dilations = orOnes("dilations");
  SmallVector<int64_t> pads =
      intsAttr(node, "pads").value_or(SmallVector<int64_t>(2 * spatial, 0));
  if (static_cast<int64_t>(kernel.size()) != spatial ||
      static_cast<int64_t>(strides.size()) != spatial ||
      static_cast<int64_t>(dilations.size()) != spatial ||
      static_cast<int64_t>(pads.size()) != 2 * spatial)
    return emitError(node.loc)
           << node.describe()
           << ": kernel_shape, strides, dilations and pads must have one "
              "entry per spatial axis ("
           << spatial << "; pads 2x)";

  std::string autoPad = stringAttr(node, "auto_pad", "NOTSET");
  bool sameUpper = autoPad == "SAME_UPPER", sameLower = autoPad == "SAME_LOWER";
  if (autoPad != "NOTSET" && autoPad != "VALID" && !sameUpper && !sameLower)
    return emitError(node.loc)
           << node.describe() << ": unknown auto_pad '" << autoPad << "'";
  if (autoPad == "VALID")
    pads.assign(2 * spatial, 0);

  SmallVector<NamedAttribute> extra;
  if (isTranspose) {
    SmallVector<int64_t> outputPadding =
        intsAttr(node, "output_padding")
            .value_or(SmallVector<int64_t>(spatial, 0));
    std::optional<SmallVector<int64_t>> outputShape =
        intsAttr(node, "output_shape");
    if (!outputShape && (sameUpper || sameLower)) {
      outputShape.emplace();
      for (int64_t i = 0; i < spatial; ++i)
        outputShape->push_back(inputShape[i] * strides[i]);
    }
    if (outputShape) {
      // The ONNX spec's rule for the padding implied by output_shape.
      ArrayRef<int64_t> out(*outputShape);
      if (static_cast<int64_t>(out.size()) > spatial)
        out = out.take_back(spatial);
      if (static_cast<int64_t>(out.size()) != spatial ||
          static_cast<int64_t>(outputPadding.size()) != spatial)
        return emitError(node.loc)
               << node.describe()
               << ": output_shape and output_padding need one entry per "
                  "spatial axis";
      for (int64_t i = 0; i < spatial; ++i) {
        int64_t total = strides[i] * (inputShape[i] - 1) + outputPadding[i] +
                        (kernel[i] - 1) * dilations[i] + 1 - out[i];
        if (total < 0)
          return emitError(node.loc)
                 << node.describe() << ": output_shape " << out[i]
                 << " on spatial axis " << i
                 << " is larger than the convolution can produce";
        int64_t half = total / 2;
        pads[i] = sameUpper ? half : total - half;
        pads[i + spatial] = sameUpper ? total - half : half;
      }
    }
    setAttr(extra, "output_padding",
            builder.getDenseI64ArrayAttr(outputPadding));
  } else if (sameUpper || sameLower) {
    // Output = ceil(in / stride); the total padding that gives it is split
    // evenly, the odd element at the end (SAME_UPPER) or the start.
    for (int64_t i = 0; i < spatial; ++i) {
      int64_t out = (inputShape[i] + strides[i] - 1) / strides[i];
      int64_t window = (kernel[i] - 1) * dilations[i] + 1;
      int64_t total =
          std::max<int64_t>(0, (out - 1) * strides[i] + window - inputShape[i]);
      int64_t small = total / 2;
      pads[i] = sameUpper ? small : total - small;
      pads[i + spatial] = sameUpper ? total - small : small;
    }
  }

  SmallVector<StringRef> resolved = {
      "auto_pad", "output_shape", "pads",          "kernel_shape",
      "strides",  "dilations",    "output_padding"};
  resolved.append(skipped.begin(), skipped.end());
  auto attrs = nodeAttributes(node, resolved);
  if (failed(attrs))
    return failure();
  setAttr(*attrs, "kernel_shape", builder.getDenseI64ArrayAttr(kernel));
  setAttr(*attrs, "strides", builder.getDenseI64ArrayAttr(strides));
  setAttr(*attrs, "dilations", builder.getDenseI64ArrayAttr(dilations));
  setAttr(*attrs, "pads", builder.getDenseI64ArrayAttr(pads));
  for (const NamedAttribute &attr : extra)
    setAttr(*attrs, attr.getName(), attr.getValue());
  return attrs;
}

/// Min / Max of two integer constants of one shape (or one of a single
/// element): the constant result. Shape arithmetic uses them (CenterCropPad's
/// function body takes Max(Shape(x), target)), and memopt.min / max have no
/// folder; null when it does not apply.
Value GraphImporter::foldIntegerMinMax(const Node &node, Value lhs, Value rhs) {
  if (node.type() != "Min" && node.type() != "Max")
    return {};
  DenseIntElementsAttr a, b;
  if (!lhs || !rhs || !matchPattern(lhs, m_Constant(&a)) ||
      !matchPattern(rhs, m_Constant(&b)) ||
      a.getElementType() != b.getElementType() ||
      a.getElementType().isInteger(1))
    return {};
  DenseIntElementsAttr larger =
      a.getNumElements() >= b.getNumElements() ? a : b;
  if (a.getNumElements() != b.getNumElements() &&
      std::min(a.getNumElements(), b.getNumElements()) != 1)
    return {};
  if (a.getNumElements() == b.getNumElements() &&
      a.getType().getShape() != b.getType().getShape())
    return {};
  SmallVector<APInt> lhsValues(a.getValues<APInt>()),
      rhsValues(b.getValues<APInt>());
  bool isMax = node.type() == "Max";
  SmallVector<APInt> values;
  for (int64_t i = 0; i < larger.getNumElements(); ++i) {
    const APInt &x = lhsValues[lhsValues.size() == 1 ? 0 : i];
    const APInt &y = rhsValues[rhsValues.size() == 1 ? 0 : i];
    bool takeX = isMax ? x.sge(y) : x.sle(y);
    values.push_back(takeX ? x : y);
  }
  return createConstant(node.loc,
                        DenseElementsAttr::get(larger.getType(), values));
}

FailureOr<SmallVector<Value>> GraphImporter::importVariadic(const Node &node) {
  if (node.proto.input_size() == 0)
    return emitError(node.loc) << node.describe() << ": no inputs";
  auto accumulated = lookup(node, 0);
  if (failed(accumulated) || !*accumulated)
    return failure();
  std::string opName = memoptOpName(node.type());
  // ONNX's variadic form is a left fold of the binary op.
  Value result = *accumulated;
  for (int i = 1; i < node.proto.input_size(); ++i) {
    auto next = lookup(node, i);
    if (failed(next))
      return failure();
    if (Value folded = foldIntegerMinMax(node, result, *next)) {
      result = folded;
      continue;
    }
    auto combined = createOne(node, opName, {result, *next}, {});
    if (failed(combined))
      return failure();
    result = *combined;
  }
  return SmallVector<Value>{result};
}

FailureOr<SmallVector<Value>> GraphImporter::importDropout(const Node &node) {
  auto data = lookup(node, 0);
  if (failed(data))
    return failure();
  if (node.hasInput(2)) {
    auto training = constantInts(node, 2);
    if (failed(training))
      return failure();
    // Training mode drops nothing when the ratio is 0 (the output is the
    // input, scaled by 1 / (1 - 0)): torchvision's swin_t calls F.dropout
    // with its default training=True and p=0, and the TorchScript exporter
    // keeps that node.
    double ratio = 0.5; // ONNX's default
    if (node.hasInput(1)) {
      auto ratios = constantFloats(node, 1);
      if (failed(ratios))
        return failure();
      if (ratios->size() != 1)
        return emitError(node.loc)
               << node.describe() << ": ratio must be a scalar";
      ratio = (*ratios)[0];
    }
    if (!(ratio >= 0 && ratio < 1)) {
      char ratioText[32];
      std::snprintf(ratioText, sizeof(ratioText), "%g", ratio);
      return emitError(node.loc) << node.describe() << ": ratio " << ratioText
                                 << " is not in [0, 1)";
    }
    // Training mode: a dropout without a key, the identity until
    // memopt-make-trainable (--train) keys it; an inference compile folds
    // it away (PyTorch's eval()).
    if (!training->empty() && (*training)[0] != 0 && ratio != 0) {
      if (node.proto.output_size() > 1 &&
          usedNames.contains(node.proto.output(1)))
        return emitError(node.loc)
               << node.describe() << ": output 1 ('" << node.proto.output(1)
               << "') is used, but a training-mode memopt.dropout has no "
                  "mask output";
      auto result = createOne(
          node, "memopt.dropout", {*data},
          {builder.getNamedAttr("ratio", builder.getF32FloatAttr(ratio))},
          {data->getType()});
      if (failed(result))
        return failure();
      return SmallVector<Value>{*result};
    }
  }
  auto result = createOne(node, "memopt.identity", {*data}, {});
  if (failed(result))
    return failure();
  // Nothing is dropped: the mask, when used, keeps every element.
  if (node.proto.output_size() < 2 || !usedNames.contains(node.proto.output(1)))
    return SmallVector<Value>{*result};
  auto maskType =
      RankedTensorType::get(typeOf(*data).getShape(), builder.getI1Type());
  return SmallVector<Value>{
      *result,
      createConstant(node.loc, DenseElementsAttr::get(maskType, true))};
}

/// ONNX GatherND (batch_dims 0) with constant indices `[..., k]`: a Gather
/// over the first k axes of `data` viewed as one axis, the index tuples
/// turned into linear indices here, so it needs no op of its own. The dynamo
/// exporter writes it for transformers' padding masks
/// (`attention_mask[batch, key]` with index tensors computed from aranges).
FailureOr<SmallVector<Value>> GraphImporter::importGatherND(const Node &node) {
  auto data = lookup(node, 0);
  auto indices = lookup(node, 1);
  if (failed(data) || failed(indices))
    return failure();
  if (intAttr(node, "batch_dims", 0) != 0)
    return emitError(node.loc)
           << node.describe() << ": batch_dims other than 0 is not supported";
  auto tuples = constantInts(node, 1);
  if (failed(tuples))
    return failure();
  RankedTensorType dataType = typeOf(*data), indicesType = typeOf(*indices);
  int64_t rank = dataType.getRank();
  int64_t width =
      indicesType.getRank() ? indicesType.getShape().back() : int64_t(0);
  if (width < 1 || width > rank)
    return emitError(node.loc)
           << node.describe() << ": indices " << indicesType
           << " must end in a tuple of 1 to " << rank << " indices";
  SmallVector<int64_t> linear;
  for (size_t first = 0; first < tuples->size(); first += width) {
    int64_t index = 0;
    for (int64_t axis = 0; axis < width; ++axis) {
      int64_t dim = dataType.getDimSize(axis);
      int64_t value = (*tuples)[first + axis];
      if (value < -dim || value >= dim)
        return emitError(node.loc)
               << node.describe() << ": index " << value
               << " is out of range for axis " << axis << " of size " << dim;
      index = index * dim + (value < 0 ? value + dim : value);
    }
    linear.push_back(index);
  }
  SmallVector<int64_t> flatShape = {1};
  for (int64_t axis = 0; axis < width; ++axis)
    flatShape[0] *= dataType.getDimSize(axis);
  llvm::append_range(flatShape, dataType.getShape().drop_front(width));
  auto flat =
      createOne(node, "memopt.reshape", {*data}, {},
                {RankedTensorType::get(flatShape, dataType.getElementType())});
  if (failed(flat))
    return failure();
  auto linearType = RankedTensorType::get(indicesType.getShape().drop_back(),
                                          builder.getI64Type());
  Value linearIndices = createConstant(
      node.loc, DenseElementsAttr::get(linearType, ArrayRef<int64_t>(linear)));
  auto result =
      createOne(node, "memopt.gather", {*flat, linearIndices},
                {builder.getNamedAttr("axis", builder.getI64IntegerAttr(0))});
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importTranspose(const Node &node) {
  auto data = lookup(node, 0);
  if (failed(data))
    return failure();
  auto attrs = nodeAttributes(node);
  if (failed(attrs))
    return failure();
  if (!node.attribute("perm")) {
    // ONNX's default reverses the dimensions; the attribute is made explicit.
    SmallVector<int64_t> perm;
    for (int64_t i = typeOf(*data).getRank() - 1; i >= 0; --i)
      perm.push_back(i);
    setAttr(*attrs, "perm", builder.getDenseI64ArrayAttr(perm));
  }
  auto result = createOne(node, "memopt.transpose", {*data}, *attrs);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importCumSum(const Node &node) {
  auto data = lookup(node, 0);
  if (failed(data))
    return failure();
  auto axisValues = constantInts(node, 1);
  if (failed(axisValues))
    return failure();
  int64_t rank = typeOf(*data).getRank();
  if (axisValues->size() != 1)
    return emitError(node.loc)
           << node.describe() << ": axis must hold one value";
  std::optional<int64_t> axis = normalizeAxis(axisValues->front(), rank);
  if (!axis)
    return emitError(node.loc)
           << node.describe() << ": axis " << axisValues->front()
           << " is out of range for rank " << rank;
  auto attrs = nodeAttributes(node);
  if (failed(attrs))
    return failure();
  setAttr(*attrs, "axis", builder.getI64IntegerAttr(*axis));
  auto result = createOne(node, "memopt.cum_sum", {*data}, *attrs);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}
