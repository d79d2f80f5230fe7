//===- OnnxComposedResize.cpp - Resize as interpolation matrices ----------===//
//
// Resize is separable: along each axis every output element is a fixed
// combination of input elements, so with static shapes the resize along an
// axis is a product with a constant [out, in] matrix. The importer builds
// those matrices for the forms memopt.resize's kernels do not compute: cubic
// (any cubic_coeff_a, exclude_outside), antialias (linear and cubic),
// tf_crop_and_resize (a constant roi, extrapolation_value for the outputs
// that fall outside), half_pixel_symmetric, and scales whose output size is
// not input * scale (the coordinates follow the given scale). The weights
// are computed in double exactly as ONNX's reference implementation does
// (onnx/reference/ops/op_resize.py: _compute_x_ori, the coefficient
// functions, the neighbour indices of the edge-padded input, the
// exclude_outside renormalization); torch-mlir and onnxruntime compute the
// same weights per output element at run time.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

#include <cmath>

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::onnx_import;

namespace {

/// The interpolation weights of one output element: ONNX's coefficient
/// functions for `ratio` (the distance past the floor of the source
/// coordinate, 1 at an integer coordinate) and `scale`.
SmallVector<double> coefficients(StringRef mode, StringRef nearestMode,
                                 bool antialias, double a, double ratio,
                                 double scale) {
  if (mode == "nearest") {
    if (ratio == std::floor(ratio))
      return {0, 1};
    if (nearestMode == "round_prefer_ceil")
      return {double(ratio < 0.5), double(ratio >= 0.5)};
    if (nearestMode == "floor")
      return {1, 0};
    if (nearestMode == "ceil")
      return {0, 1};
    return {double(ratio <= 0.5), double(ratio > 0.5)};
  }
  SmallVector<double> weights;
  if (mode == "linear" && !antialias)
    return {1 - ratio, ratio};
  if (mode == "linear") {
    scale = std::min(scale, 1.0);
    int64_t start = static_cast<int64_t>(std::floor(-1 / scale) + 1);
    int64_t footprint = 2 - 2 * start;
    for (int64_t i = start; i < start + footprint; ++i)
      weights.push_back(
          std::clamp(1 - std::abs((double(i) - ratio) * scale), 0.0, 1.0));
  } else if (!antialias) {
    double r = ratio, s = 1 - ratio;
    return {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
            ((a + 2) * r - (a + 3)) * r * r + 1,
            ((a + 2) * s - (a + 3)) * s * s + 1,
            ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a};
  } else {
    scale = std::min(scale, 1.0);
    auto keys = [&](double x) {
      x = std::abs(x);
      if (x <= 1)
        return ((a + 2) * x - (a + 3)) * x * x + 1;
      if (x < 2)
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
      return 0.0;
    };
    int64_t start = static_cast<int64_t>(std::floor(-2 / scale) + 1);
    for (int64_t i = start; i < 2 - start; ++i)
      weights.push_back(keys(scale * (double(i) - ratio)));
  }
  double total = 0;
  for (double w : weights)
    total += w;
  for (double &w : weights)
    w /= total;
  return weights;
}

} // namespace

FailureOr<Value> GraphImporter::resizeByMatrices(const Node &node, Value input,
                                                 ArrayRef<int64_t> outShape,
                                                 ArrayRef<double> scales,
                                                 ArrayRef<double> roi) {
  RankedTensorType type = typeOf(input);
  int64_t rank = type.getRank();
  Type elementType = type.getElementType();
  if (!elementType.isF32())
    return emitError(node.loc) << node.describe() << ": this Resize form ("
                               << "cubic, antialias, tf_crop_and_resize, "
                               << "half_pixel_symmetric or scales) takes f32";
  std::string mode = stringAttr(node, "mode", "nearest");
  std::string transform =
      stringAttr(node, "coordinate_transformation_mode", "half_pixel");
  std::string nearestMode =
      stringAttr(node, "nearest_mode", "round_prefer_floor");
  bool antialias = intAttr(node, "antialias", 0) != 0;
  bool excludeOutside = intAttr(node, "exclude_outside", 0) != 0;
  const onnx::AttributeProto *aAttr = node.attribute("cubic_coeff_a");
  double a = aAttr ? aAttr->f() : -0.75;
  const onnx::AttributeProto *extrapolationAttr =
      node.attribute("extrapolation_value");
  double extrapolation = extrapolationAttr ? extrapolationAttr->f() : 0.0;
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return emitError(node.loc)
           << node.describe() << ": unknown mode '" << mode << "'";

  Value x = input;
  for (int64_t axis = 0; axis < rank; ++axis) {
    int64_t in = type.getDimSize(axis), out = outShape[axis];
    double scale = scales[axis];
    bool fullRoi = roi.empty() || (std::abs(roi[axis]) < 1e-9 &&
                                   std::abs(roi[axis + rank] - 1) < 1e-9);
    if (std::abs(scale - 1) < 1e-9 && out == in && fullRoi)
      continue;
    double outWidth = scale * in;
    // [out, in] weights and, for tf_crop_and_resize, the outputs that
    // extrapolate.
    SmallVector<double> matrix(out * in, 0.0);
    SmallVector<bool> extrapolated(out, false);
    for (int64_t y = 0; y < out; ++y) {
      double source;
      if (transform == "align_corners")
        source = outWidth == 1 ? 0.0 : y * double(in - 1) / (outWidth - 1);
      else if (transform == "asymmetric")
        source = y / scale;
      else if (transform == "tf_crop_and_resize") {
        double begin = roi.empty() ? 0 : roi[axis];
        double end = roi.empty() ? 1 : roi[axis + rank];
        source = outWidth == 1 ? (end - begin) * (in - 1) / 2
                               : y * (end - begin) * (in - 1) / (outWidth - 1);
        source += begin * (in - 1);
        extrapolated[y] = source < 0 || source > in - 1;
      } else if (transform == "pytorch_half_pixel")
        source = outWidth == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
      else if (transform == "half_pixel")
        source = (y + 0.5) / scale - 0.5;
      else if (transform == "half_pixel_symmetric") {
        double adjustment = out / outWidth;
        double offset = in / 2.0 * (1 - adjustment);
        source = offset + (y + 0.5) / scale - 0.5;
      } else
        return emitError(node.loc)
               << node.describe()
               << ": unknown coordinate_transformation_mode '" << transform
               << "'";
      if (extrapolated[y])
        continue;
      double floor = std::floor(source);
      double ratio = source == floor ? 1.0 : source - floor;
      SmallVector<double> weights =
          coefficients(mode, nearestMode, antialias, a, ratio, scale);
      int64_t n = weights.size();
      // The first neighbour, as the reference finds it in the edge-padded
      // input.
      int64_t pad = (n + 1) / 2;
      double padded = source + pad;
      double paddedFloor = std::floor(padded);
      double fraction = padded - paddedFloor;
      int64_t first =
          n % 2 == 0 ? (fraction == 0 ? -(n / 2) : -(n / 2) + 1)
                     : (fraction <= 0.5 ? -((n - 1) / 2) : -((n - 1) / 2) + 1);
      int64_t start = static_cast<int64_t>(paddedFloor) + first - pad;
      if (excludeOutside) {
        double total = 0;
        for (int64_t k = 0; k < n; ++k) {
          if (start + k < 0 || start + k >= in)
            weights[k] = 0;
          total += weights[k];
        }
        if (total != 0)
          for (double &w : weights)
            w /= total;
      }
      for (int64_t k = 0; k < n; ++k) {
        int64_t index = std::clamp<int64_t>(start + k, 0, in - 1);
        matrix[y * in + index] += weights[k];
      }
    }
    // x with `axis` last, times the transposed matrix [in, out].
    SmallVector<int64_t> perm;
    for (int64_t i = 0; i < rank; ++i)
      if (i != axis)
        perm.push_back(i);
    perm.push_back(axis);
    SmallVector<int64_t> inversePerm(rank);
    for (int64_t i = 0; i < rank; ++i)
      inversePerm[perm[i]] = i;
    SmallVector<float> transposed(in * out);
    for (int64_t y = 0; y < out; ++y)
      for (int64_t i = 0; i < in; ++i)
        transposed[i * out + y] = static_cast<float>(matrix[y * in + i]);
    Value weights = createConstant(
        node.loc,
        DenseElementsAttr::get(RankedTensorType::get({in, out}, elementType),
                               ArrayRef(transposed)));
    SmallVector<NamedAttribute> toLast, back;
    setAttr(toLast, "perm", builder.getDenseI64ArrayAttr(perm));
    setAttr(back, "perm", builder.getDenseI64ArrayAttr(inversePerm));
    Value moved =
        axis == rank - 1 ? x : build(node, "memopt.transpose", {x}, toLast);
    Value product = build(node, "memopt.matmul", {moved, weights});
    if (llvm::is_contained(extrapolated, true)) {
      SmallVector<float> bias;
      for (bool outside : extrapolated)
        bias.push_back(outside ? static_cast<float>(extrapolation) : 0.0f);
      product = build(
          node, "memopt.add",
          {product, createConstant(
                        node.loc, DenseElementsAttr::get(
                                      RankedTensorType::get({out}, elementType),
                                      ArrayRef(bias)))});
    }
    x = axis == rank - 1 ? product
                         : build(node, "memopt.transpose", {product}, back);
    if (!x)
      return failure();
  }
  return x;
}
