//===- OnnxComposedSampling.cpp - GridSample as gathers -------------------===//
//
// Handler of GraphImporter (GraphImporter.h) for ONNX GridSample (opsets 16
// and 20; 2-D and 3-D): per spatial axis the grid's coordinate is mapped to
// pixels (align_corners), rounded (nearest, halves to even), brought back
// inside by the padding mode (border: clamp, reflection: reflect), and split
// into taps (nearest 1, linear 2, cubic 4, with Keys' coefficients at
// a = -0.75); every combination of taps over the axes is one
// gather_elements of the input viewed [N, C, pixels] at the flat index,
// weighted by the product of the taps' weights (zeros padding: times 0 where
// a tap falls outside). The steps and their order are those of the ONNX
// reference implementation (onnx/reference/ops/op_grid_sample.py), which
// onnxruntime's kernel follows; memopt builds them from its own ops, so both
// backends run it and a CUDA kernel is not needed for correctness.
//
//===----------------------------------------------------------------------===//

#include "ElementwiseBuilder.h"
#include "GraphImporter.h"

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::onnx_import;

namespace {
/// One tap along one axis: its pixel index (as a float) and its weight, and
/// whether it lies inside the input (zeros padding; null otherwise).
struct Tap {
  Value index;
  Value weight;
  Value inside;
};
} // namespace

FailureOr<SmallVector<Value>>
GraphImporter::importGridSample(const Node &node) {
  auto input = lookup(node, 0);
  auto gridInput = lookup(node, 1);
  if (failed(input) || failed(gridInput))
    return failure();
  if (!*gridInput)
    return emitError(node.loc) << node.describe() << ": grid is missing";
  RankedTensorType type = typeOf(*input);
  RankedTensorType gridType = typeOf(*gridInput);
  int64_t spatial = type.getRank() - 2;
  Type elementType = type.getElementType();
  if ((spatial != 2 && spatial != 3) || !elementType.isF32() ||
      gridType.getRank() != spatial + 2 ||
      gridType.getDimSize(spatial + 1) != spatial ||
      gridType.getDimSize(0) != type.getDimSize(0) ||
      gridType.getElementType() != elementType)
    return emitError(node.loc)
           << node.describe() << ": expected an f32 input [N, C, H, W] (or "
           << "[N, C, D, H, W]) and a grid [N, H', W', 2] (or 3), got " << type
           << " and " << gridType;
  std::string mode = stringAttr(node, "mode", "linear");
  if (mode == "bilinear")
    mode = "linear";
  if (mode == "bicubic")
    mode = "cubic";
  std::string padding = stringAttr(node, "padding_mode", "zeros");
  if ((mode != "linear" && mode != "nearest" && mode != "cubic") ||
      (padding != "zeros" && padding != "border" && padding != "reflection"))
    return emitError(node.loc)
           << node.describe() << ": mode '" << mode << "' / padding_mode '"
           << padding << "' is not supported";
  bool alignCorners = intAttr(node, "align_corners", 0) != 0;

  int64_t batch = type.getDimSize(0), channels = type.getDimSize(1);
  int64_t points = gridType.getNumElements() / (batch * spatial);
  int64_t pixels = type.getNumElements() / (batch * channels);
  auto typedOp = [&](StringRef name, ArrayRef<Value> operands, Type result) {
    return result ? build(node, name, operands, {}, {result})
                  : build(node, name, operands);
  };
  auto constant = [&](double value) {
    return scalarConstant(node.loc, elementType, value);
  };
  ElementwiseBuilder b{typedOp, constant};
  auto pointType = RankedTensorType::get({batch, points}, elementType);

  // Axis i of the input (D, H, W order) reads grid component spatial-1-i.
  SmallVector<SmallVector<Tap>> taps(spatial);
  SmallVector<int64_t> strides(spatial, 1);
  for (int64_t i = spatial - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * type.getDimSize(i + 3);
  for (int64_t i = 0; i < spatial; ++i) {
    double dim = static_cast<double>(type.getDimSize(i + 2));
    Value component =
        sliceAlong(node, *gridInput, spatial + 1, spatial - 1 - i, spatial - i);
    Value g = component
                  ? build(node, "memopt.reshape", {component}, {}, {pointType})
                  : Value();
    // Pixel coordinates.
    Value x = alignCorners ? b.mul(b.add(g, 1.0), (dim - 1) / 2)
                           : b.mul(b.add(b.mul(g, dim), dim - 1), 0.5);
    if (mode == "nearest")
      x = b.roundHalfEven(x);
    double low = alignCorners ? 0.0 : -0.5;
    double high = alignCorners ? dim - 1 : dim - 0.5;
    // Reflect by the near border until inside [low, high].
    auto reflect = [&](Value v) {
      double range = high - low;
      Value below = b.less(v, low), above = b.greater(v, high);
      Value distance =
          b.select(below, b.sub(constant(low), v), b.sub(v, constant(high)));
      Value folds = b.floor(b.mul(distance, 1.0 / range));
      Value rest = b.sub(distance, b.mul(folds, range));
      Value even =
          b.equal(b.sub(folds, b.mul(b.floor(b.mul(folds, 0.5)), 2.0)), 0.0);
      Value fromLow = b.add(rest, low);
      Value fromHigh = b.sub(constant(high), rest);
      return b.select(below, b.select(even, fromLow, fromHigh),
                      b.select(above, b.select(even, fromHigh, fromLow), v));
    };
    auto clampToPixels = [&](Value v) {
      SmallVector<NamedAttribute> attrs;
      setAttr(attrs, "min", builder.getF64FloatAttr(0));
      setAttr(attrs, "max", builder.getF64FloatAttr(dim - 1));
      return build(node, "memopt.clip", {v}, attrs);
    };
    if (padding == "border") {
      Value outside = b.op("memopt.or", {b.less(x, low), b.greater(x, high)});
      x = b.select(outside, clampToPixels(x), x);
    } else if (padding == "reflection") {
      x = reflect(x);
    }
    // An integer tap index -> the pixel read and whether it counts.
    auto resolve = [&](Value index, Value weight) {
      Tap tap{index, weight, Value()};
      if (padding == "zeros") {
        tap.inside = b.castTo(
            b.op("memopt.and", {b.greater(index, -1.0), b.less(index, dim)}),
            pointType);
        tap.index = clampToPixels(index);
      } else if (padding == "border") {
        tap.index = clampToPixels(index);
      } else {
        // The reference reflects the integer index and truncates.
        Value reflected = reflect(index);
        tap.index = b.castTo(
            b.castTo(reflected, RankedTensorType::get({batch, points},
                                                      builder.getI64Type())),
            pointType);
      }
      return tap;
    };
    if (mode == "nearest") {
      // Truncation toward zero (the reference's astype(int32)).
      Value truncated =
          b.castTo(b.castTo(x, RankedTensorType::get({batch, points},
                                                     builder.getI64Type())),
                   pointType);
      taps[i].push_back(resolve(truncated, Value()));
      continue;
    }
    Value start = b.floor(x);
    Value t = b.sub(x, start);
    if (mode == "linear") {
      taps[i].push_back(resolve(start, b.sub(constant(1), t)));
      taps[i].push_back(resolve(b.add(start, 1.0), t));
      continue;
    }
    // Keys' cubic convolution, a = -0.75, at distances 1 + t, t, 1 - t,
    // 2 - t.
    double a = -0.75;
    auto outer = [&](Value d) {
      return b.add(b.mul(b.add(b.mul(b.add(b.mul(d, a), -5 * a), d), 8 * a), d),
                   -4 * a);
    };
    auto inner = [&](Value d) {
      return b.add(b.mul(b.mul(b.add(b.mul(d, a + 2), -(a + 3)), d), d), 1.0);
    };
    Value oneMinus = b.sub(constant(1), t);
    Value weights[4] = {outer(b.add(t, 1.0)), inner(t), inner(oneMinus),
                        outer(b.sub(constant(2), t))};
    for (int k = 0; k < 4; ++k)
      taps[i].push_back(resolve(b.add(start, double(k - 1)), weights[k]));
  }

  // Sum over every combination of taps.
  auto flatInput = reshapeTo(node, *input, {batch, channels, pixels});
  if (failed(flatInput))
    return failure();
  auto indexType =
      RankedTensorType::get({batch, channels, points}, builder.getI64Type());
  SmallVector<int64_t> choice(spatial, 0);
  Value sum;
  while (true) {
    Value flat, weight, inside;
    for (int64_t i = 0; i < spatial; ++i) {
      const Tap &tap = taps[i][choice[i]];
      Value term = b.mul(tap.index, double(strides[i]));
      flat = flat ? b.add(flat, term) : term;
      if (tap.weight)
        weight = weight ? b.mul(weight, tap.weight) : tap.weight;
      if (tap.inside)
        inside = inside ? b.mul(inside, tap.inside) : tap.inside;
    }
    if (inside)
      weight = weight ? b.mul(weight, inside) : inside;
    Value index = b.castTo(
        flat, RankedTensorType::get({batch, points}, builder.getI64Type()));
    Value spread = build(node, "memopt.expand",
                         {build(node, "memopt.reshape", {index}, {},
                                {RankedTensorType::get({batch, 1, points},
                                                       builder.getI64Type())})},
                         {}, {indexType});
    SmallVector<NamedAttribute> attrs;
    setAttr(attrs, "axis", builder.getI64IntegerAttr(2));
    Value sample =
        build(node, "memopt.gather_elements", {*flatInput, spread}, attrs);
    if (weight)
      sample = b.mul(sample, build(node, "memopt.reshape", {weight}, {},
                                   {RankedTensorType::get({batch, 1, points},
                                                          elementType)}));
    sum = sum ? b.add(sum, sample) : sample;
    if (!sum)
      return failure();
    int64_t axis = spatial - 1;
    while (axis >= 0 &&
           ++choice[axis] == static_cast<int64_t>(taps[axis].size())) {
      choice[axis] = 0;
      --axis;
    }
    if (axis < 0)
      break;
  }
  SmallVector<int64_t> shape = {batch, channels};
  for (int64_t i = 1; i <= spatial; ++i)
    shape.push_back(gridType.getDimSize(i));
  auto result = reshapeTo(node, sum, shape);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}
