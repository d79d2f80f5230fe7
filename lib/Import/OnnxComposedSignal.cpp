//===- OnnxComposedSignal.cpp - DFT and STFT as matrix products -----------===//
//
// Handler of GraphImporter (GraphImporter.h) for ONNX DFT (opsets 17 and
// 20): the transform along one (static) axis as products with constant
// cosine and sine matrices, one matmul per real / imaginary term, the way
// torch-mlir decomposes aten.fft_rfft into matmuls with a DFT basis
// (DecomposeComplexOps.cpp). O(n^2) per signal instead of an FFT's
// O(n log n), which is what a memory planner wants for the short windows
// models use (and a kernel of its own would be the next step for long
// ones). Forward and inverse (1/n scaled), complex or real input, one-sided
// output (rfft) and one-sided inverse (irfft, real output through the
// Hermitian weights 1, 2, ..., 2, 1); dft_length pads or truncates the
// signal. STFT (17) frames the signal with one gather of constant sample
// positions, applies the window and takes the same transform per frame.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/ShapeUtils.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

#include <cmath>

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::onnx_import;

FailureOr<SmallVector<Value>> GraphImporter::importDFT(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  RankedTensorType type = typeOf(*input);
  int64_t rank = type.getRank();
  Type elementType = type.getElementType();
  int64_t parts = rank ? type.getDimSize(rank - 1) : 0;
  if (rank < 3 || (parts != 1 && parts != 2) || !elementType.isF32())
    return emitError(node.loc)
           << node.describe() << ": expected an f32 input [batch, ..., 1 or 2]";
  // Opset 17: axis attribute (default 1); opset 20: axis input (default -2).
  int64_t axisValue = opset >= 20 ? -2 : intAttr(node, "axis", 1);
  if (opset >= 20 && node.hasInput(2)) {
    auto axes = constantInts(node, 2);
    if (failed(axes))
      return failure();
    axisValue = axes->empty() ? -2 : axes->front();
  }
  std::optional<int64_t> axis = normalizeAxis(axisValue, rank);
  if (!axis || *axis == 0 || *axis == rank - 1)
    return emitError(node.loc) << node.describe() << ": axis " << axisValue
                               << " is not a signal axis of " << type;
  bool inverse = intAttr(node, "inverse", 0) != 0;
  bool onesided = intAttr(node, "onesided", 0) != 0;
  int64_t length = type.getDimSize(*axis);
  // The signal length n, and the bins the output holds.
  int64_t n = inverse && onesided ? 2 * (length - 1) : length;
  if (node.hasInput(1)) {
    auto given = constantInts(node, 1);
    if (failed(given))
      return failure();
    if (!given->empty())
      n = given->front();
  }
  if (n <= 0)
    return emitError(node.loc)
           << node.describe() << ": dft_length " << n << " is not positive";
  auto result = transformAlong(node, *input, *axis, n, inverse, onesided);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<Value> GraphImporter::transformAlong(const Node &node, Value input,
                                               int64_t axis, int64_t n,
                                               bool inverse, bool onesided) {
  RankedTensorType type = typeOf(input);
  int64_t rank = type.getRank();
  Type elementType = type.getElementType();
  int64_t parts = type.getDimSize(rank - 1);
  int64_t length = type.getDimSize(axis);
  bool realOutput = inverse && onesided;
  int64_t bins = realOutput ? n : onesided ? n / 2 + 1 : n;
  // Real and imaginary parts with the signal axis last: [..., length].
  SmallVector<int64_t> perm;
  for (int64_t i = 0; i < rank - 1; ++i)
    if (i != axis)
      perm.push_back(i);
  perm.push_back(axis);
  auto part = [&](int64_t index) -> Value {
    Value slice = sliceAlong(node, input, rank - 1, index, index + 1);
    if (!slice)
      return {};
    SmallVector<int64_t> shape(type.getShape().drop_back());
    Value squeezed = build(node, "memopt.reshape", {slice}, {},
                           {RankedTensorType::get(shape, elementType)});
    return transposeBy(node, squeezed, perm);
  };
  Value real = part(0);
  Value imaginary = parts == 2 ? part(1) : Value();

  // out_real = real @ A + imaginary @ B, out_imaginary = imaginary @ A + real @
  // C with A = cos, B = +-sin, C = -+sin over rows j < min(length, n) (rows
  // beyond n are zero: truncation; a shorter input is zero-padded).
  double sign = inverse ? 1.0 : -1.0;
  double scale = inverse ? 1.0 / n : 1.0;
  SmallVector<float> cosines(length * bins, 0.0f), sines(length * bins, 0.0f);
  for (int64_t j = 0; j < std::min(length, n); ++j)
    for (int64_t k = 0; k < bins; ++k) {
      // irfft: row j is input bin j, column k the output sample k; bins
      // other than 0 and n/2 stand for themselves and their mirror.
      int64_t bin = realOutput ? j : k, sample = realOutput ? k : j;
      double weight = realOutput ? (bin == 0 || 2 * bin == n ? 1.0 : 2.0) : 1.0;
      double angle = 2.0 * M_PI * static_cast<double>((bin * sample) % n) / n;
      // Zeros of cos / sin stay exact (pi/2 leaves 6e-17 in double).
      auto exact = [](double v) { return std::abs(v) < 1e-12 ? 0.0 : v; };
      cosines[j * bins + k] =
          static_cast<float>(weight * scale * exact(std::cos(angle)));
      sines[j * bins + k] =
          static_cast<float>(weight * scale * sign * exact(std::sin(angle)));
    }
  auto matrixType = RankedTensorType::get({length, bins}, elementType);
  Value cosine = createConstant(
      node.loc, DenseElementsAttr::get(matrixType, ArrayRef(cosines)));
  Value sine = createConstant(
      node.loc, DenseElementsAttr::get(matrixType, ArrayRef(sines)));
  auto matmul = [&](Value a, Value b) {
    return build(node, "memopt.matmul", {a, b});
  };
  // (re + i im)(cos + i s) with s = sign * sin: re cos - im s + i(im cos +
  // re s).
  Value outReal = matmul(real, cosine);
  if (imaginary)
    outReal = build(node, "memopt.sub", {outReal, matmul(imaginary, sine)});
  Value outImaginary;
  if (!realOutput) {
    outImaginary = matmul(real, sine);
    if (imaginary)
      outImaginary =
          build(node, "memopt.add", {outImaginary, matmul(imaginary, cosine)});
  }
  // Back to the input's order of axes, the parts last.
  SmallVector<int64_t> inversePerm(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inversePerm[p] = i;
  auto restore = [&](Value value) -> Value {
    Value transposed = transposeBy(node, value, inversePerm);
    SmallVector<NamedAttribute> unsqueeze;
    setAttr(unsqueeze, "axes", builder.getDenseI64ArrayAttr({rank - 1}));
    return build(node, "memopt.unsqueeze", {transposed}, unsqueeze);
  };
  Value result = restore(outReal);
  if (!realOutput) {
    result = concatAlong(node, {result, restore(outImaginary)}, rank - 1);
  }
  if (!result)
    return failure();
  return result;
}

FailureOr<SmallVector<Value>> GraphImporter::importSTFT(const Node &node) {
  auto signal = lookup(node, 0);
  auto window = lookup(node, 2);
  if (failed(signal) || failed(window))
    return failure();
  RankedTensorType type = typeOf(*signal);
  if (type.getRank() != 3 ||
      (type.getDimSize(2) != 1 && type.getDimSize(2) != 2) ||
      !type.getElementType().isF32())
    return emitError(node.loc) << node.describe()
                               << ": expected an f32 signal [batch, length, "
                                  "1 or 2], got "
                               << type;
  auto steps = constantInts(node, 1);
  if (failed(steps))
    return failure();
  int64_t frameLength = *window ? typeOf(*window).getNumElements() : 0;
  if (node.hasInput(3)) {
    auto given = constantInts(node, 3);
    if (failed(given))
      return failure();
    frameLength = given->empty() ? frameLength : given->front();
  }
  int64_t length = type.getDimSize(1);
  int64_t step = steps->empty() ? 0 : steps->front();
  if (frameLength <= 0 || frameLength > length || step <= 0 ||
      (*window && typeOf(*window).getNumElements() != frameLength))
    return emitError(node.loc)
           << node.describe() << ": frame_step " << step << " and frame length "
           << frameLength << " (window and frame_length agreeing) must fit the "
           << length << " samples";
  // Frames [batch, frames, frame_length, parts] by one gather of constant
  // sample positions, windowed, then the DFT along the frame.
  int64_t frames = 1 + (length - frameLength) / step;
  SmallVector<int64_t> positions;
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t i = 0; i < frameLength; ++i)
      positions.push_back(f * step + i);
  Value indices = createConstant(
      node.loc,
      DenseElementsAttr::get(
          RankedTensorType::get({frames, frameLength}, builder.getI64Type()),
          ArrayRef(positions)));
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "axis", builder.getI64IntegerAttr(1));
  Value framed = build(node, "memopt.gather", {*signal, indices}, attrs);
  if (*window) {
    auto column = reshapeTo(node, *window, {1, 1, frameLength, 1});
    if (failed(column))
      return failure();
    framed = build(node, "memopt.mul", {framed, *column});
  }
  if (!framed)
    return failure();
  auto result = transformAlong(node, framed, 2, frameLength, /*inverse=*/false,
                               intAttr(node, "onesided", 1) != 0);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}
