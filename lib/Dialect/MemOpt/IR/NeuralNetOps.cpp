//===- NeuralNetOps.cpp - matmul, gemm, conv, pools, norms, reductions ----===//
//
// Output-size rules follow the ONNX operator specification (the same rules
// onnx-mlir's shape helpers and PyTorch's pooling implement), for static
// shapes with `auto_pad` already resolved into `pads`. FLOP counts are
// 2 * multiply-accumulates for contractions, as in the usual roofline models.
//
//===----------------------------------------------------------------------===//

#include "OpUtils.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Runtime/Workspace.h"
#include "mlir/IR/PatternMatch.h"

#include <algorithm>
#include <numeric>

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::impl;

static int64_t product(ArrayRef<int64_t> values) {
  return std::accumulate(values.begin(), values.end(), int64_t{1},
                         std::multiplies<int64_t>());
}

/// The fused activations conv and gemm accept (the runtime's Activation).
/// A null attribute is the default (`none`): builders infer result types
/// before default-valued properties are filled in.
static LogicalResult verifyActivation(std::optional<Location> loc,
                                      StringRef opName, StringAttr attr) {
  StringRef activation = attr ? attr.getValue() : StringRef("none");
  if (activation == "none" || activation == "relu" || activation == "gelu" ||
      activation == "gelu_tanh")
    return success();
  return inferError(loc, opName, "activation '", activation,
                    "' is not one of none, relu, gelu, gelu_tanh");
}

//===----------------------------------------------------------------------===//
// MatMulOp
//===----------------------------------------------------------------------===//

LogicalResult MatMulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         MatMulOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<MatMulOp>(loc, adaptor.getOperands())))
    return failure();
  auto lhs = cast<RankedTensorType>(adaptor.getA().getType());
  auto rhs = cast<RankedTensorType>(adaptor.getB().getType());
  if (lhs.getRank() == 0 || rhs.getRank() == 0)
    return inferError(loc, getOperationName(), "operands must not be scalars");
  if (lhs.getElementType() != rhs.getElementType())
    return inferError(loc, getOperationName(),
                      "operand element types differ: ", lhs, " vs ", rhs);
  // numpy rule: 1-D operands are promoted and the added dimension removed.
  SmallVector<int64_t> lhsShape(lhs.getShape()), rhsShape(rhs.getShape());
  bool lhsVector = lhsShape.size() == 1, rhsVector = rhsShape.size() == 1;
  if (lhsVector)
    lhsShape.insert(lhsShape.begin(), 1);
  if (rhsVector)
    rhsShape.push_back(1);
  int64_t k = lhsShape.back();
  if (k != rhsShape[rhsShape.size() - 2])
    return inferError(loc, getOperationName(),
                      "contraction sizes differ: ", lhs, " x ", rhs);
  std::optional<SmallVector<int64_t>> batch = broadcastShapes(
      ArrayRef(lhsShape).drop_back(2), ArrayRef(rhsShape).drop_back(2));
  if (!batch)
    return inferError(loc, getOperationName(), "batch dimensions of ", lhs,
                      " and ", rhs, " do not broadcast");
  SmallVector<int64_t> shape = *batch;
  if (!lhsVector)
    shape.push_back(lhsShape[lhsShape.size() - 2]);
  if (!rhsVector)
    shape.push_back(rhsShape.back());
  results.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

/// The inferred result, or the same shape in f32 when the inferred element
/// type is f16 or bf16 (the f32 accumulator stored as it is).
static bool isInferredOrWidened(TypeRange inferred, TypeRange actual) {
  if (inferred.size() != 1 || actual.size() != 1)
    return false;
  if (inferred.front() == actual.front())
    return true;
  auto expected = dyn_cast<RankedTensorType>(inferred.front());
  auto result = dyn_cast<RankedTensorType>(actual.front());
  return expected && result && expected.getShape() == result.getShape() &&
         (expected.getElementType().isF16() ||
          expected.getElementType().isBF16()) &&
         result.getElementType().isF32();
}

bool MatMulOp::isCompatibleReturnTypes(TypeRange inferred, TypeRange actual) {
  return isInferredOrWidened(inferred, actual);
}

int64_t MatMulOp::getFlops() {
  int64_t k = getA().getType().getShape().back();
  return 2 * k * getType().getNumElements();
}

//===----------------------------------------------------------------------===//
// GemmOp
//===----------------------------------------------------------------------===//

LogicalResult GemmOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       GemmOp::Adaptor adaptor,
                                       SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<GemmOp>(loc, adaptor.getOperands())))
    return failure();
  if (failed(verifyActivation(loc, getOperationName(),
                              adaptor.getActivationAttr())))
    return failure();
  auto a = cast<RankedTensorType>(adaptor.getA().getType());
  auto b = cast<RankedTensorType>(adaptor.getB().getType());
  if (a.getRank() != 2 || b.getRank() != 2)
    return inferError(loc, getOperationName(), "A ", a, " and B ", b,
                      " must be 2-D");
  if (a.getElementType() != b.getElementType())
    return inferError(loc, getOperationName(),
                      "operand element types differ: ", a, " vs ", b);
  bool transA = adaptor.getTransA() != 0, transB = adaptor.getTransB() != 0;
  int64_t m = a.getDimSize(transA ? 1 : 0), k = a.getDimSize(transA ? 0 : 1);
  int64_t kB = b.getDimSize(transB ? 1 : 0), n = b.getDimSize(transB ? 0 : 1);
  if (k != kB)
    return inferError(loc, getOperationName(),
                      "contraction sizes differ: op(A) ", "has K = ", k,
                      ", op(B) has K = ", kB);
  if (Value c = adaptor.getC()) {
    auto cType = cast<RankedTensorType>(c.getType());
    std::optional<SmallVector<int64_t>> shape =
        broadcastShapes(cType.getShape(), {m, n});
    if (cType.getRank() > 2 || !shape ||
        ArrayRef<int64_t>(*shape) != ArrayRef<int64_t>{m, n})
      return inferError(loc, getOperationName(), "C ", cType,
                        " does not broadcast to [", m, ", ", n, "]");
  }
  results.push_back(RankedTensorType::get({m, n}, a.getElementType()));
  return success();
}

/// cuBLASLt's scratch (split-K and stream-K reductions): the library-call
/// policy, except that GEMMs whose operands and result are all below 1 MiB get
/// none (they run at full speed without one, and a tiny model keeps a tiny
/// arena).
static int64_t gemmWorkspaceBytes(Operation *op) {
  int64_t bytes = mlir::memopt::detail::libraryWorkspaceBytes(op);
  return bytes < (int64_t(1) << 20) ? 0 : bytes;
}

int64_t MatMulOp::getWorkspaceBytes() { return gemmWorkspaceBytes(*this); }

int64_t GemmOp::getWorkspaceBytes() { return gemmWorkspaceBytes(*this); }

bool GemmOp::isCompatibleReturnTypes(TypeRange inferred, TypeRange actual) {
  return isInferredOrWidened(inferred, actual);
}

/// The runtime adds C into the result buffer: both have one element type.
LogicalResult GemmOp::verify() {
  if (Value c = getC();
      c && cast<RankedTensorType>(c.getType()).getElementType() !=
               getType().getElementType())
    return emitOpError("C ")
           << c.getType() << " must have the result's element type ("
           << getType().getElementType() << ")";
  return success();
}

int64_t GemmOp::getFlops() {
  auto a = getA().getType();
  int64_t k = a.getDimSize(getTransA() ? 0 : 1);
  int64_t outputs = getType().getNumElements();
  return 2 * k * outputs + (getC() ? outputs : 0);
}

//===----------------------------------------------------------------------===//
// Canonicalization: transposed matrices become GEMM flags
//===----------------------------------------------------------------------===//
//
// Exporters write `x @ W.T` (a Linear layer whose weight is shared, e.g.
// GPT-2's LM head tied to the token embedding) as MatMul(x, Transpose(W)).
// Executed as written, the transpose materializes a copy of W in the activation
// arena (8 MiB for a 8192 x 256 vocabulary, 147 MiB for GPT-2 small's 50257 x
// 768) although every BLAS reads a transposed operand for free. onnxruntime's
// MatMul+Transpose fusion (FusedMatMul) and XLA's algebraic simplifier (dot of
// a transpose becomes a dot with swapped contracting dimensions) do the same;
// here the contraction becomes a 2-D `gemm` with `transB` (a leading batch of
// `x` is folded into M through aliasing reshapes, which cost no bytes).

Value mlir::memopt::createFlattenedGemm(OpBuilder &builder, Location loc,
                                        Value a, Value b, bool transB,
                                        Type resultType) {
  auto aType = cast<RankedTensorType>(a.getType());
  int64_t k = aType.getShape().back();
  if (aType.getRank() != 2)
    a = ReshapeOp::create(
        builder, loc,
        RankedTensorType::get(
            {aType.getNumElements() / std::max<int64_t>(k, 1), k},
            aType.getElementType()),
        a);
  Value product = GemmOp::create(
      builder, loc, a, b, /*C=*/Value(), builder.getF32FloatAttr(1),
      builder.getF32FloatAttr(1), builder.getI64IntegerAttr(0),
      builder.getI64IntegerAttr(transB ? 1 : 0), builder.getStringAttr("none"));
  if (product.getType() != resultType)
    product = ReshapeOp::create(builder, loc, resultType, product);
  return product;
}

namespace {
/// matmul(A [..., K], transpose(W [N, K])) -> reshape(gemm(A' [M, K], W,
/// transB = 1)) where A' and the result reshape are views.
struct MatMulOfTransposedMatrix : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatMulOp op,
                                PatternRewriter &rewriter) const override {
    auto transpose = op.getB().getDefiningOp<TransposeOp>();
    if (!transpose)
      return failure();
    auto bType = cast<RankedTensorType>(op.getB().getType());
    auto aType = cast<RankedTensorType>(op.getA().getType());
    if (bType.getRank() != 2 || aType.getRank() < 2)
      return failure();
    int64_t k = aType.getShape().back();
    if (k == 0 || bType.getNumElements() == 0)
      return failure();
    rewriter.replaceOp(op, createFlattenedGemm(rewriter, op.getLoc(), op.getA(),
                                               transpose.getData(),
                                               /*transB=*/true, op.getType()));
    return success();
  }
};

/// gemm(transpose(A), B) / gemm(A, transpose(B)) with 2-D transposes: the
/// transpose becomes the operand's trans flag.
struct GemmOfTransposedOperand : OpRewritePattern<GemmOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GemmOp op,
                                PatternRewriter &rewriter) const override {
    auto transposeA = op.getA().getDefiningOp<TransposeOp>();
    auto transposeB = op.getB().getDefiningOp<TransposeOp>();
    if (!transposeA && !transposeB)
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      if (transposeA) {
        op.getAMutable().assign(transposeA.getData());
        op.setTransA(op.getTransA() ? 0 : 1);
      }
      if (transposeB) {
        op.getBMutable().assign(transposeB.getData());
        op.setTransB(op.getTransB() ? 0 : 1);
      }
    });
    return success();
  }
};
} // namespace

void MatMulOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                           MLIRContext *context) {
  patterns.add<MatMulOfTransposedMatrix>(context);
}

void GemmOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                         MLIRContext *context) {
  patterns.add<GemmOfTransposedOperand>(context);
}

//===----------------------------------------------------------------------===//
// Window attributes (conv, conv_transpose, pools)
//===----------------------------------------------------------------------===//

/// Checks the lengths and ranges of the window attributes for
/// `spatialRank` spatial axes.
static LogicalResult
verifyWindow(std::optional<Location> loc, StringRef opName, int64_t spatialRank,
             ArrayRef<int64_t> kernelShape, ArrayRef<int64_t> strides,
             ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations) {
  auto checkLength = [&](StringRef name, ArrayRef<int64_t> values,
                         int64_t expected) -> LogicalResult {
    if (static_cast<int64_t>(values.size()) != expected)
      return inferError(loc, opName, name, " has ", values.size(),
                        " entries, expected ", expected);
    return success();
  };
  if (failed(checkLength("kernel_shape", kernelShape, spatialRank)) ||
      failed(checkLength("strides", strides, spatialRank)) ||
      failed(checkLength("pads", pads, 2 * spatialRank)) ||
      failed(checkLength("dilations", dilations, spatialRank)))
    return failure();
  for (int64_t i = 0; i < spatialRank; ++i) {
    if (kernelShape[i] < 1 || strides[i] < 1 || dilations[i] < 1)
      return inferError(loc, opName, "kernel_shape, strides and dilations ",
                        "must be positive on spatial axis ", i);
    if (pads[i] < 0 || pads[i + spatialRank] < 0)
      return inferError(loc, opName, "pads must not be negative on spatial ",
                        "axis ", i);
  }
  return success();
}

/// Output size of a sliding window along one axis; ceil mode drops a last
/// window that would start inside the end padding (ONNX, PyTorch).
static int64_t windowOutputSize(int64_t input, int64_t kernel, int64_t stride,
                                int64_t padBegin, int64_t padEnd,
                                int64_t dilation, bool ceilMode) {
  int64_t span = input + padBegin + padEnd - (dilation * (kernel - 1) + 1);
  if (span < 0)
    return 0;
  if (!ceilMode)
    return span / stride + 1;
  int64_t size = llvm::divideCeil(span, stride) + 1;
  if ((size - 1) * stride >= input + padBegin)
    --size;
  return size;
}

//===----------------------------------------------------------------------===//
// ConvOp
//===----------------------------------------------------------------------===//

/// The result type of `conv` and `conv_residual` (one adaptor interface).
template <typename Op, typename Adaptor>
static LogicalResult inferConvType(std::optional<Location> loc, Adaptor adaptor,
                                   SmallVectorImpl<Type> &results) {
  StringRef name = Op::getOperationName();
  if (failed(requireOperands<Op>(loc, adaptor.getOperands())))
    return failure();
  if (failed(requireAttributes(loc, name,
                               {{"kernel_shape", adaptor.getKernelShapeAttr()},
                                {"strides", adaptor.getStridesAttr()},
                                {"pads", adaptor.getPadsAttr()},
                                {"dilations", adaptor.getDilationsAttr()}})))
    return failure();
  if (failed(verifyActivation(loc, name, adaptor.getActivationAttr())))
    return failure();
  auto x = cast<RankedTensorType>(adaptor.getX().getType());
  auto w = cast<RankedTensorType>(adaptor.getW().getType());
  if (x.getRank() < 3 || w.getRank() != x.getRank())
    return inferError(loc, name, "X ", x, " and W ", w,
                      " must have the same rank, at least 3");
  // Channels-last: check and infer on the channels-first views.
  bool channelsLast = adaptor.getChannelsLast();
  if (channelsLast) {
    x = channelsFirstView(x);
    w = channelsFirstView(w);
  }
  if (x.getElementType() != w.getElementType())
    return inferError(loc, name, "X ", x, " and W ", w,
                      " have different element types");
  int64_t spatialRank = x.getRank() - 2;
  ArrayRef<int64_t> kernel = adaptor.getKernelShape();
  ArrayRef<int64_t> strides = adaptor.getStrides();
  ArrayRef<int64_t> pads = adaptor.getPads();
  ArrayRef<int64_t> dilations = adaptor.getDilations();
  if (failed(verifyWindow(loc, name, spatialRank, kernel, strides, pads,
                          dilations)))
    return failure();
  int64_t group = static_cast<int64_t>(adaptor.getGroup());
  int64_t channels = x.getDimSize(1), filters = w.getDimSize(0);
  if (group < 1 || filters % group != 0)
    return inferError(loc, name, "group ", group, " does not divide the ",
                      filters, " filters of W");
  if (channels != w.getDimSize(1) * group)
    return inferError(loc, name, "X has ", channels, " channels but W ", w,
                      " with group ", group, " expects ",
                      w.getDimSize(1) * group);
  if (ArrayRef<int64_t>(w.getShape()).drop_front(2) != kernel)
    return inferError(loc, name, "kernel_shape [", kernel,
                      "] does not match W ", w);
  if (Value bias = adaptor.getB()) {
    auto b = cast<RankedTensorType>(bias.getType());
    if (b.getRank() != 1 || b.getDimSize(0) != filters)
      return inferError(loc, name, "B ", b, " must be 1-D with ", filters,
                        " elements");
  }
  SmallVector<int64_t> shape = {x.getDimSize(0), filters};
  for (int64_t i = 0; i < spatialRank; ++i) {
    int64_t size = windowOutputSize(x.getDimSize(i + 2), kernel[i], strides[i],
                                    pads[i], pads[i + spatialRank],
                                    dilations[i], /*ceilMode=*/false);
    if (size < 1)
      return inferError(loc, name, "the dilated kernel is larger than the ",
                        "padded input on spatial axis ", i);
    shape.push_back(size);
  }
  auto result = RankedTensorType::get(shape, x.getElementType());
  results.push_back(channelsLast ? channelsLastView(result) : result);
  return success();
}

LogicalResult ConvOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       ConvOp::Adaptor adaptor,
                                       SmallVectorImpl<Type> &results) {
  return inferConvType<ConvOp>(loc, adaptor, results);
}

LogicalResult ConvResidualOp::inferReturnTypes(MLIRContext *,
                                               std::optional<Location> loc,
                                               ConvResidualOp::Adaptor adaptor,
                                               SmallVectorImpl<Type> &results) {
  if (failed(inferConvType<ConvResidualOp>(loc, adaptor, results)))
    return failure();
  if (adaptor.getZ().getType() != results.front())
    return inferError(loc, getOperationName(), "Z ", adaptor.getZ().getType(),
                      " must have the result's type ", results.front());
  return success();
}

bool ConvResidualOp::canWriteInPlace(unsigned operandIndex) {
  return operandIndex == 3;
}

int64_t ConvResidualOp::getWorkspaceBytes() {
  return detail::convWorkspaceBytes(*this);
}

int64_t ConvResidualOp::getFlops() {
  auto w = getW().getType();
  int64_t outputs = getType().getNumElements();
  return 2 * product(w.getShape().drop_front(1)) * outputs + 2 * outputs;
}

int64_t ConvOp::getWorkspaceBytes() {
  return detail::convWorkspaceBytes(*this);
}

int64_t ConvOp::getWorkspaceFloor() {
  return detail::convWorkspaceFloor(*this, getChannelsLast());
}

int64_t ConvOp::getFlops() {
  // Every output element reduces over (C / group) * prod(kernel) inputs.
  auto w = getW().getType();
  int64_t macsPerOutput = product(w.getShape().drop_front(1));
  int64_t outputs = getType().getNumElements();
  return 2 * macsPerOutput * outputs + (getB() ? outputs : 0);
}

//===----------------------------------------------------------------------===//
// ConvTransposeOp
//===----------------------------------------------------------------------===//

LogicalResult
ConvTransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  ConvTransposeOp::Adaptor adaptor,
                                  SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  if (failed(requireOperands<ConvTransposeOp>(loc, adaptor.getOperands())))
    return failure();
  if (failed(requireAttributes(loc, name,
                               {{"kernel_shape", adaptor.getKernelShapeAttr()},
                                {"strides", adaptor.getStridesAttr()},
                                {"pads", adaptor.getPadsAttr()},
                                {"dilations", adaptor.getDilationsAttr()}})))
    return failure();
  auto x = cast<RankedTensorType>(adaptor.getX().getType());
  auto w = cast<RankedTensorType>(adaptor.getW().getType());
  if (x.getRank() < 3 || w.getRank() != x.getRank())
    return inferError(loc, name, "X ", x, " and W ", w,
                      " must have the same rank, at least 3");
  // Channels-last: check and infer on the channels-first views.
  bool channelsLast = adaptor.getChannelsLast();
  if (channelsLast) {
    x = channelsFirstView(x);
    w = channelsFirstView(w);
  }
  if (x.getElementType() != w.getElementType())
    return inferError(loc, name, "X ", x, " and W ", w,
                      " have different element types");
  int64_t spatialRank = x.getRank() - 2;
  ArrayRef<int64_t> kernel = adaptor.getKernelShape();
  ArrayRef<int64_t> strides = adaptor.getStrides();
  ArrayRef<int64_t> pads = adaptor.getPads();
  ArrayRef<int64_t> dilations = adaptor.getDilations();
  if (failed(verifyWindow(loc, name, spatialRank, kernel, strides, pads,
                          dilations)))
    return failure();
  ArrayRef<int64_t> outputPadding = adaptor.getOutputPadding();
  if (!outputPadding.empty() &&
      static_cast<int64_t>(outputPadding.size()) != spatialRank)
    return inferError(loc, name, "output_padding has ", outputPadding.size(),
                      " entries, expected ", spatialRank);
  int64_t group = static_cast<int64_t>(adaptor.getGroup());
  int64_t channels = x.getDimSize(1);
  if (group < 1 || channels % group != 0)
    return inferError(loc, name, "group ", group, " does not divide the ",
                      channels, " input channels");
  if (w.getDimSize(0) != channels)
    return inferError(loc, name, "X has ", channels, " channels but W ", w,
                      " expects ", w.getDimSize(0));
  if (ArrayRef<int64_t>(w.getShape()).drop_front(2) != kernel)
    return inferError(loc, name, "kernel_shape [", kernel,
                      "] does not match W ", w);
  int64_t filters = w.getDimSize(1) * group;
  if (Value bias = adaptor.getB()) {
    auto b = cast<RankedTensorType>(bias.getType());
    if (b.getRank() != 1 || b.getDimSize(0) != filters)
      return inferError(loc, name, "B ", b, " must be 1-D with ", filters,
                        " elements");
  }
  SmallVector<int64_t> shape = {x.getDimSize(0), filters};
  for (int64_t i = 0; i < spatialRank; ++i) {
    int64_t extra = outputPadding.empty() ? 0 : outputPadding[i];
    if (extra < 0 || (extra >= strides[i] && extra >= dilations[i]))
      return inferError(loc, name, "output_padding ", extra,
                        " on spatial axis ", i,
                        " must be smaller than the stride or the dilation");
    int64_t size = strides[i] * (x.getDimSize(i + 2) - 1) + extra +
                   dilations[i] * (kernel[i] - 1) + 1 - pads[i] -
                   pads[i + spatialRank];
    if (size < 1)
      return inferError(loc, name, "pads leave no output on spatial axis ", i);
    shape.push_back(size);
  }
  auto result = RankedTensorType::get(shape, x.getElementType());
  results.push_back(channelsLast ? channelsLastView(result) : result);
  return success();
}

int64_t ConvTransposeOp::getWorkspaceBytes() {
  return detail::convWorkspaceBytes(*this);
}

int64_t ConvTransposeOp::getWorkspaceFloor() {
  return detail::convWorkspaceFloor(*this, getChannelsLast());
}

int64_t ConvTransposeOp::getFlops() {
  // Every input element scatters into (M / group) * prod(kernel) outputs.
  auto w = getW().getType();
  int64_t macsPerInput = product(w.getShape().drop_front(1));
  return 2 * macsPerInput * getX().getType().getNumElements() +
         (getB() ? getType().getNumElements() : 0);
}

//===----------------------------------------------------------------------===//
// Pools
//===----------------------------------------------------------------------===//

static LogicalResult inferPoolType(std::optional<Location> loc, StringRef name,
                                   Value input, ArrayRef<int64_t> kernel,
                                   ArrayRef<int64_t> strides,
                                   ArrayRef<int64_t> pads,
                                   ArrayRef<int64_t> dilations, bool ceilMode,
                                   bool channelsLast,
                                   SmallVectorImpl<Type> &results) {
  if (failed(requireStaticTensors(loc, name, input)))
    return failure();
  auto x = cast<RankedTensorType>(input.getType());
  if (x.getRank() < 3)
    return inferError(loc, name, "X ", x, " must have rank 3 or more");
  if (channelsLast)
    x = channelsFirstView(x);
  int64_t spatialRank = x.getRank() - 2;
  if (failed(verifyWindow(loc, name, spatialRank, kernel, strides, pads,
                          dilations)))
    return failure();
  SmallVector<int64_t> shape(x.getShape().take_front(2));
  for (int64_t i = 0; i < spatialRank; ++i) {
    if (pads[i] >= kernel[i] || pads[i + spatialRank] >= kernel[i])
      return inferError(loc, name, "pads on spatial axis ", i,
                        " must be smaller than the kernel");
    int64_t size =
        windowOutputSize(x.getDimSize(i + 2), kernel[i], strides[i], pads[i],
                         pads[i + spatialRank], dilations[i], ceilMode);
    if (size < 1)
      return inferError(loc, name, "the window is larger than the padded ",
                        "input on spatial axis ", i);
    shape.push_back(size);
  }
  auto result = RankedTensorType::get(shape, x.getElementType());
  results.push_back(channelsLast ? channelsLastView(result) : result);
  return success();
}

LogicalResult MaxPoolOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          MaxPoolOp::Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<MaxPoolOp>(loc, adaptor.getOperands())))
    return failure();
  StringRef name = getOperationName();
  if (failed(requireAttributes(loc, name,
                               {{"kernel_shape", adaptor.getKernelShapeAttr()},
                                {"strides", adaptor.getStridesAttr()},
                                {"pads", adaptor.getPadsAttr()},
                                {"dilations", adaptor.getDilationsAttr()}})))
    return failure();
  return inferPoolType(loc, name, adaptor.getX(), adaptor.getKernelShape(),
                       adaptor.getStrides(), adaptor.getPads(),
                       adaptor.getDilations(), adaptor.getCeilMode() != 0,
                       adaptor.getChannelsLast(), results);
}

int64_t MaxPoolOp::getFlops() {
  return getType().getNumElements() * product(getKernelShape());
}

LogicalResult AveragePoolOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              AveragePoolOp::Adaptor adaptor,
                                              SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<AveragePoolOp>(loc, adaptor.getOperands())))
    return failure();
  StringRef name = getOperationName();
  if (failed(requireAttributes(loc, name,
                               {{"kernel_shape", adaptor.getKernelShapeAttr()},
                                {"strides", adaptor.getStridesAttr()},
                                {"pads", adaptor.getPadsAttr()},
                                {"dilations", adaptor.getDilationsAttr()}})))
    return failure();
  return inferPoolType(loc, name, adaptor.getX(), adaptor.getKernelShape(),
                       adaptor.getStrides(), adaptor.getPads(),
                       adaptor.getDilations(), adaptor.getCeilMode() != 0,
                       adaptor.getChannelsLast(), results);
}

int64_t AveragePoolOp::getFlops() {
  return getType().getNumElements() * product(getKernelShape());
}

LogicalResult GlobalAveragePoolOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc,
    GlobalAveragePoolOp::Adaptor adaptor, SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<GlobalAveragePoolOp>(loc, adaptor.getOperands())))
    return failure();
  auto x = cast<RankedTensorType>(adaptor.getX().getType());
  if (x.getRank() < 3)
    return inferError(loc, getOperationName(), "X ", x,
                      " must have rank 3 or more");
  SmallVector<int64_t> shape(x.getRank(), 1);
  shape[0] = x.getDimSize(0);
  if (adaptor.getChannelsLast())
    shape.back() = x.getDimSize(x.getRank() - 1);
  else
    shape[1] = x.getDimSize(1);
  results.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

int64_t GlobalAveragePoolOp::getFlops() {
  return getX().getType().getNumElements();
}

//===----------------------------------------------------------------------===//
// Normalizations and softmax
//===----------------------------------------------------------------------===//

LogicalResult BatchNormalizationOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc,
    BatchNormalizationOp::Adaptor adaptor, SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  if (failed(requireOperands<BatchNormalizationOp>(loc, adaptor.getOperands())))
    return failure();
  auto x = cast<RankedTensorType>(adaptor.getX().getType());
  if (x.getRank() < 2)
    return inferError(loc, name, "X ", x, " must have rank 2 or more");
  int64_t channels =
      x.getDimSize(adaptor.getChannelsLast() ? x.getRank() - 1 : 1);
  std::pair<StringRef, Value> parameters[] = {
      {"scale", adaptor.getScale()},
      {"B", adaptor.getB()},
      {"input_mean", adaptor.getInputMean()},
      {"input_var", adaptor.getInputVar()}};
  for (auto [parameterName, value] : parameters) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getRank() != 1 || type.getDimSize(0) != channels)
      return inferError(loc, name, parameterName, " ", type,
                        " must be 1-D with one entry per channel (", channels,
                        ")");
  }
  results.push_back(x);
  return success();
}

bool BatchNormalizationOp::canWriteInPlace(unsigned operandIndex) {
  return operandIndex == 0 && getX().getType() == getType();
}

/// With the statistics folded into a scale and a shift, one multiply-add per
/// element.
int64_t BatchNormalizationOp::getFlops() {
  return 2 * getType().getNumElements();
}

LogicalResult LayerNormalizationOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc,
    LayerNormalizationOp::Adaptor adaptor, SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  if (failed(requireOperands<LayerNormalizationOp>(loc, adaptor.getOperands())))
    return failure();
  auto x = cast<RankedTensorType>(adaptor.getX().getType());
  int64_t rawAxis = static_cast<int64_t>(adaptor.getAxis());
  std::optional<int64_t> axis = normalizeAxis(rawAxis, x.getRank());
  if (!axis)
    return inferError(loc, name, "axis ", rawAxis, " is out of range for rank ",
                      x.getRank());
  ArrayRef<int64_t> normalized = x.getShape().drop_front(*axis);
  std::pair<StringRef, Value> parameters[] = {{"Scale", adaptor.getScale()},
                                              {"B", adaptor.getB()}};
  for (auto [parameterName, value] : parameters) {
    if (!value)
      continue;
    auto type = cast<RankedTensorType>(value.getType());
    std::optional<SmallVector<int64_t>> shape =
        broadcastShapes(type.getShape(), normalized);
    if (type.getRank() > static_cast<int64_t>(normalized.size()) || !shape ||
        ArrayRef<int64_t>(*shape) != normalized)
      return inferError(loc, name, parameterName, " ", type,
                        " does not broadcast to the normalized shape [",
                        normalized, "]");
  }
  results.push_back(x);
  return success();
}

bool LayerNormalizationOp::canWriteInPlace(unsigned operandIndex) {
  return operandIndex == 0 && getX().getType() == getType();
}

/// Mean, variance (subtract, square, sum), normalize (subtract, multiply),
/// scale and shift: about eight operations per element.
int64_t LayerNormalizationOp::getFlops() {
  return 8 * getType().getNumElements();
}

LogicalResult SoftmaxOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          SoftmaxOp::Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<SoftmaxOp>(loc, adaptor.getOperands())))
    return failure();
  auto type = cast<RankedTensorType>(adaptor.getInput().getType());
  int64_t rawAxis = static_cast<int64_t>(adaptor.getAxis());
  if (!normalizeAxis(rawAxis, type.getRank()))
    return inferError(loc, getOperationName(), "axis ", rawAxis,
                      " is out of range for rank ", type.getRank());
  results.push_back(type);
  return success();
}

bool SoftmaxOp::canWriteInPlace(unsigned operandIndex) {
  return operandIndex == 0 && getInput().getType() == getType();
}

/// Max, subtract, exp, sum, divide: five operations per element.
int64_t SoftmaxOp::getFlops() { return 5 * getType().getNumElements(); }

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

/// A default-valued flag: builders leave it null before defaults are set.
static bool isSet(BoolAttr flag) { return flag && flag.getValue(); }

/// The forward attention's result types (output, and the row statistics
/// with `returnLse`), shared by attention and attention_grad.
static LogicalResult inferAttentionTypes(std::optional<Location> loc,
                                         StringRef name, Value query, Value key,
                                         Value value, Value bias,
                                         bool keyTransposed, bool returnLse,
                                         SmallVectorImpl<Type> &results) {
  auto q = cast<RankedTensorType>(query.getType());
  auto k = cast<RankedTensorType>(key.getType());
  auto v = cast<RankedTensorType>(value.getType());
  if (q.getRank() < 2 || k.getRank() < 2 || v.getRank() < 2)
    return inferError(loc, name, "Q ", q, ", K ", k, " and V ", v,
                      " must have rank 2 or more");
  Type elementType = q.getElementType();
  if (k.getElementType() != elementType || v.getElementType() != elementType)
    return inferError(loc, name, "Q ", q, ", K ", k, " and V ", v,
                      " have different element types");
  int64_t queries = q.getDimSize(q.getRank() - 2);
  int64_t headSize = q.getDimSize(q.getRank() - 1);
  int64_t keyHeadSize = k.getDimSize(k.getRank() - (keyTransposed ? 2 : 1));
  int64_t keys = k.getDimSize(k.getRank() - (keyTransposed ? 1 : 2));
  if (keyHeadSize != headSize)
    return inferError(
        loc, name, "K ", k, keyTransposed ? " (key_transposed)" : "",
        " has head size ", keyHeadSize, " but Q ", q, " has ", headSize);
  if (v.getDimSize(v.getRank() - 2) != keys)
    return inferError(loc, name, "V ", v, " has ",
                      v.getDimSize(v.getRank() - 2), " keys but K ", k, " has ",
                      keys);
  std::optional<SmallVector<int64_t>> batch =
      broadcastShapes(q.getShape().drop_back(2), k.getShape().drop_back(2));
  if (batch)
    batch = broadcastShapes(*batch, v.getShape().drop_back(2));
  if (!batch)
    return inferError(loc, name, "batch dimensions of Q ", q, ", K ", k,
                      " and V ", v, " do not broadcast");
  if (bias) {
    auto b = cast<RankedTensorType>(bias.getType());
    SmallVector<int64_t> scores = *batch;
    scores.append({queries, keys});
    std::optional<SmallVector<int64_t>> shape =
        broadcastShapes(b.getShape(), scores);
    if (b.getElementType() != elementType)
      return inferError(loc, name, "bias ", b, " must have the element type ",
                        elementType, " of Q");
    if (!shape || ArrayRef<int64_t>(*shape) != ArrayRef<int64_t>(scores))
      return inferError(loc, name, "bias ", b,
                        " does not broadcast to the scores [", scores, "]");
  }
  SmallVector<int64_t> shape = *batch;
  shape.append({queries, v.getDimSize(v.getRank() - 1)});
  results.push_back(RankedTensorType::get(shape, elementType));
  if (returnLse) {
    // Per query row: the maximum and the log-sum of exp(score - maximum).
    SmallVector<int64_t> statistics = *batch;
    statistics.append({queries, 2});
    results.push_back(
        RankedTensorType::get(statistics, Float32Type::get(q.getContext())));
  }
  return success();
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            AttentionOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  if (failed(requireOperands<AttentionOp>(loc, adaptor.getOperands())))
    return failure();
  if (failed(requireAttributes(loc, name, {{"scale", adaptor.getScaleAttr()}})))
    return failure();
  return inferAttentionTypes(loc, name, adaptor.getQ(), adaptor.getK(),
                             adaptor.getV(), adaptor.getBias(),
                             isSet(adaptor.getKeyTransposedAttr()),
                             isSet(adaptor.getReturnLseAttr()), results);
}

/// The dropout of an attention or its gradient: a ratio in [0, 1), the key
/// (I64 [2], [seed, micro-batch]) present exactly when the ratio is above 0,
/// a 32-bit stream, cuDNN's generator only with a dropout.
static LogicalResult verifyAttentionDropout(Operation *op, float ratio,
                                            Value key, uint64_t stream,
                                            bool cudnnRng) {
  if (!(ratio >= 0.0f && ratio < 1.0f))
    return op->emitOpError("dropout_ratio ") << ratio << " is not in [0, 1)";
  if (ratio > 0.0f && !key)
    return op->emitOpError("dropout_ratio ")
           << ratio << " needs a dropout_key operand";
  if (ratio == 0.0f && key)
    return op->emitOpError("has a dropout_key but dropout_ratio 0");
  if (key && cast<ShapedType>(key.getType()).getNumElements() != 2)
    return op->emitOpError(
        "dropout_key must hold two i64 elements [seed, micro-batch]");
  if (stream > uint64_t(UINT32_MAX))
    return op->emitOpError("dropout_stream ")
           << stream << " is not a 32-bit id";
  if (cudnnRng && ratio == 0.0f)
    return op->emitOpError("dropout_cudnn_rng needs a dropout");
  return success();
}

LogicalResult AttentionOp::verify() {
  return verifyAttentionDropout(*this, getDropoutRatio().convertToFloat(),
                                getDropoutKey(), getDropoutStream(),
                                getDropoutCudnnRng());
}

/// Row i of `queries` keeps keys 0..min(i, keys - 1) under a causal mask.
static int64_t unmaskedScores(int64_t queries, int64_t keys, bool causal) {
  if (!causal)
    return queries * keys;
  int64_t full = std::min(queries, keys);
  return full * (full + 1) / 2 + (queries - full) * keys;
}

int64_t AttentionOp::getUnmaskedScoreCount() {
  auto q = getQ().getType();
  auto k = getK().getType();
  return unmaskedScores(
      q.getDimSize(q.getRank() - 2),
      k.getDimSize(k.getRank() - (getKeyTransposed() ? 1 : 2)), getCausal());
}

/// Flops per score of a dropout's mask: its share of a Philox 4x32-10 block
/// (10 rounds of two multiplies and four xors for four elements), the
/// compare and the scale.
static constexpr int64_t kDropoutFlopsPerScore = 17;

/// Two contractions (Q K^T and P V, 2 flops per multiply-add), plus scale,
/// bias, max, exp, sum and normalize (about 6 per score): the work of the
/// unfused graph, with masked-out causal scores not computed; a dropout adds
/// its mask.
int64_t AttentionOp::getFlops() {
  int64_t headSize = getQ().getType().getShape().back();
  int64_t valueSize = getY().getType().getShape().back();
  int64_t batch = product(getY().getType().getShape().drop_back(2));
  return batch * getUnmaskedScoreCount() *
         (2 * headSize + 2 * valueSize + 6 +
          (hasDropout() ? kDropoutFlopsPerScore : 0));
}

/// The bytes --memopt-attention-engine reserved for cuDNN's SDPA, or -1.
static int64_t cudnnWorkspace(Operation *op) {
  if (auto bytes = op->getAttrOfType<IntegerAttr>(kCudnnWorkspaceAttrName))
    return bytes.getInt();
  return -1;
}

/// Room for every score in f32 (plus the probabilities in the element type
/// when it is narrower): workspace::attentionBytes of the whole
/// batch, the formula the runtime carves the workspace with; nothing when an
/// operand broadcasts over the batch (the runtime then always runs the fused
/// kernel). At least the bytes reserved for cuDNN's SDPA.
int64_t AttentionOp::getWorkspaceBytes() {
  int64_t cudnn = std::max<int64_t>(cudnnWorkspace(*this), 0);
  auto shape = getY().getType().getShape();
  int64_t batch = product(shape.drop_back(2));
  for (Value operand : {getQ(), getK(), getV()})
    if (product(cast<RankedTensorType>(operand.getType())
                    .getShape()
                    .drop_back(2)) != batch)
      return cudnn;
  // An empty attention (a zero-size dimension, as fuzzing gives) has no
  // scores to hold.
  int64_t elements = getY().getType().getNumElements();
  if (elements == 0)
    return cudnn;
  auto k = getK().getType();
  int64_t keys = k.getDimSize(k.getRank() - (getKeyTransposed() ? 1 : 2));
  int64_t elementBytes = getTensorBytes(getY().getType()) / elements;
  return std::max(
      cudnn, ::memopt::workspace::attentionBytes(batch, shape[shape.size() - 2],
                                                 keys, elementBytes));
}

/// The fused kernel needs no workspace: the scores never raise the arena.
bool AttentionOp::isWorkspaceOptional() { return true; }

/// cuDNN's SDPA needs its bytes where the CUDA target runs it.
int64_t AttentionOp::getWorkspaceFloor() { return cudnnWorkspace(*this); }

//===----------------------------------------------------------------------===//
// AttentionGradOp
//===----------------------------------------------------------------------===//

LogicalResult
AttentionGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  AttentionGradOp::Adaptor adaptor,
                                  SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  if (failed(requireOperands<AttentionGradOp>(loc, adaptor.getOperands())))
    return failure();
  if (failed(requireAttributes(loc, name, {{"scale", adaptor.getScaleAttr()}})))
    return failure();
  SmallVector<Type> forward;
  if (failed(inferAttentionTypes(loc, name, adaptor.getQ(), adaptor.getK(),
                                 adaptor.getV(), adaptor.getBias(),
                                 isSet(adaptor.getKeyTransposedAttr()),
                                 /*returnLse=*/true, forward)))
    return failure();
  auto output = cast<RankedTensorType>(forward[0]);
  auto statistics = cast<RankedTensorType>(forward[1]);
  auto o = cast<RankedTensorType>(adaptor.getO().getType());
  auto dO = cast<RankedTensorType>(adaptor.getDO().getType());
  auto lse = cast<RankedTensorType>(adaptor.getLse().getType());
  if (o != output || dO != output)
    return inferError(loc, name, "O ", o, " and dO ", dO,
                      " must have the forward's output type ", output);
  if (lse != statistics)
    return inferError(loc, name, "lse ", lse, " must be ", statistics,
                      " (the forward's row statistics)");
  bool biasGradient = isSet(adaptor.getBiasGradientAttr());
  if (biasGradient && !adaptor.getBias())
    return inferError(loc, name, "bias_gradient needs a bias");
  if (biasGradient && !output.getElementType().isF32())
    return inferError(loc, name,
                      "bias_gradient needs f32 operands (the bias "
                      "gradient kernels are f32 only)");
  bool grouped = isSet(adaptor.getGroupedGradientsAttr());
  if (grouped &&
      !AttentionGradOp::getGradientGroup(output, adaptor.getK().getType(),
                                         adaptor.getV().getType()))
    return inferError(loc, name, "grouped_gradients needs K ",
                      adaptor.getK().getType(), " and V ",
                      adaptor.getV().getType(),
                      " with the same batch dims, those of the output ", output,
                      " up to a trailing run they broadcast along");
  // dQ, dK, dV: the operands' last two axes with the broadcast batch axes
  // (K's and V's own shapes with grouped_gradients).
  ArrayRef<int64_t> batch = output.getShape().drop_back(2);
  for (Value operand : {adaptor.getQ(), adaptor.getK(), adaptor.getV()}) {
    auto type = cast<RankedTensorType>(operand.getType());
    if (grouped && operand != adaptor.getQ()) {
      results.push_back(type);
      continue;
    }
    SmallVector<int64_t> shape(batch);
    shape.append(type.getShape().take_back(2).begin(),
                 type.getShape().take_back(2).end());
    results.push_back(RankedTensorType::get(shape, type.getElementType()));
  }
  if (biasGradient)
    results.push_back(adaptor.getBias().getType());
  return success();
}

int64_t AttentionGradOp::getGradientGroup(Type output, Type k, Type v) {
  auto outputType = dyn_cast<RankedTensorType>(output);
  auto keyType = dyn_cast<RankedTensorType>(k);
  auto valueType = dyn_cast<RankedTensorType>(v);
  if (!outputType || !keyType || !valueType ||
      keyType.getRank() != outputType.getRank() ||
      valueType.getRank() != outputType.getRank())
    return 0;
  ArrayRef<int64_t> out = outputType.getShape().drop_back(2);
  ArrayRef<int64_t> key = keyType.getShape().drop_back(2);
  if (key != valueType.getShape().drop_back(2))
    return 0;
  // Equal dims, then a trailing run of 1s against the output's.
  size_t start = out.size();
  while (start > 0 && key[start - 1] == 1)
    --start;
  int64_t group = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (i < start && key[i] != out[i])
      return 0;
    if (i >= start)
      group *= out[i];
  }
  return group > 1 ? group : 0;
}

LogicalResult AttentionGradOp::verify() {
  return verifyAttentionDropout(*this, getDropoutRatio().convertToFloat(),
                                getDropoutKey(), getDropoutStream(),
                                getDropoutCudnnRng());
}

int64_t AttentionGradOp::getUnmaskedScoreCount() {
  auto q = getQ().getType();
  auto k = getK().getType();
  return unmaskedScores(
      q.getDimSize(q.getRank() - 2),
      k.getDimSize(k.getRank() - (getKeyTransposed() ? 1 : 2)), getCausal());
}

/// Five contractions over the unmasked scores (S and dP recomputed, dV, dQ,
/// dK) and about 8 flops per score for P, dS and the masks.
int64_t AttentionGradOp::getFlops() {
  int64_t headSize = getQ().getType().getShape().back();
  int64_t valueSize = getV().getType().getShape().back();
  int64_t batch = product(getO().getType().getShape().drop_back(2));
  return batch * getUnmaskedScoreCount() *
         (6 * headSize + 4 * valueSize + 8 +
          (hasDropout() ? kDropoutFlopsPerScore : 0));
}

/// Two f32 score buffers of the whole batch, plus P and dS in the element
/// type when it is narrower (workspace::attentionBackwardBytes, as
/// the runtime), nothing when an operand broadcasts.
int64_t AttentionGradOp::getWorkspaceBytes() {
  int64_t cudnn = std::max<int64_t>(cudnnWorkspace(*this), 0);
  auto shape = getO().getType().getShape();
  int64_t batch = product(shape.drop_back(2));
  for (Value operand : {getQ(), getK(), getV()})
    if (product(cast<RankedTensorType>(operand.getType())
                    .getShape()
                    .drop_back(2)) != batch)
      return cudnn;
  int64_t elements = getO().getType().getNumElements();
  if (elements == 0)
    return cudnn;
  auto k = getK().getType();
  int64_t keys = k.getDimSize(k.getRank() - (getKeyTransposed() ? 1 : 2));
  int64_t elementBytes = getTensorBytes(getO().getType()) / elements;
  return std::max(cudnn,
                  ::memopt::workspace::attentionBackwardBytes(
                      batch, shape[shape.size() - 2], keys, elementBytes));
}

/// The fused backward kernels need no workspace.
bool AttentionGradOp::isWorkspaceOptional() { return true; }

/// cuDNN's SDPA backward needs its bytes where the CUDA target runs it.
int64_t AttentionGradOp::getWorkspaceFloor() { return cudnnWorkspace(*this); }

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

static LogicalResult inferReduceType(std::optional<Location> loc,
                                     StringRef name, Value data,
                                     ArrayRef<int64_t> axes, bool keepDims,
                                     SmallVectorImpl<Type> &results) {
  if (failed(requireStaticTensors(loc, name, data)))
    return failure();
  auto type = cast<RankedTensorType>(data.getType());
  if (axes.empty())
    return inferError(loc, name, "axes must not be empty (the importer ",
                      "lists every axis for a full reduction)");
  SmallVector<bool> reduced(type.getRank(), false);
  for (int64_t axis : axes) {
    std::optional<int64_t> normalized = normalizeAxis(axis, type.getRank());
    if (!normalized)
      return inferError(loc, name, "axis ", axis, " is out of range for rank ",
                        type.getRank());
    if (reduced[*normalized])
      return inferError(loc, name, "axis ", axis, " is repeated");
    reduced[*normalized] = true;
  }
  SmallVector<int64_t> shape;
  for (auto [axis, size] : llvm::enumerate(type.getShape())) {
    if (!reduced[axis])
      shape.push_back(size);
    else if (keepDims)
      shape.push_back(1);
  }
  results.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

/// Room for partial results when few outputs each reduce many elements
/// (workspace::reductionBytes).
static int64_t reductionWorkspaceBytes(ShapedType input, ShapedType output) {
  return ::memopt::workspace::reductionBytes(output.getNumElements(),
                                             input.getNumElements());
}

#define MEMOPT_REDUCTION(OpClass)                                              \
  LogicalResult OpClass::inferReturnTypes(                                     \
      MLIRContext *, std::optional<Location> loc, OpClass::Adaptor adaptor,    \
      SmallVectorImpl<Type> &results) {                                        \
    if (failed(requireOperands<OpClass>(loc, adaptor.getOperands())))          \
      return failure();                                                        \
    if (failed(requireAttributes(loc, getOperationName(),                      \
                                 {{"axes", adaptor.getAxesAttr()}})))          \
      return failure();                                                        \
    return inferReduceType(loc, getOperationName(), adaptor.getData(),         \
                           adaptor.getAxes(), adaptor.getKeepdims() != 0,      \
                           results);                                           \
  }                                                                            \
  int64_t OpClass::getFlops() { return getData().getType().getNumElements(); } \
  int64_t OpClass::getWorkspaceBytes() {                                       \
    return reductionWorkspaceBytes(getData().getType(),                        \
                                   getReduced().getType());                    \
  }

MEMOPT_REDUCTION(ReduceMeanOp)
MEMOPT_REDUCTION(ReduceSumOp)
MEMOPT_REDUCTION(ReduceMaxOp)
#undef MEMOPT_REDUCTION

//===----------------------------------------------------------------------===//
// CumSumOp
//===----------------------------------------------------------------------===//

LogicalResult CumSumOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         CumSumOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  if (failed(requireOperands<CumSumOp>(loc, adaptor.getOperands())) ||
      failed(requireAttributes(loc, name, {{"axis", adaptor.getAxisAttr()}})))
    return failure();
  auto type = cast<RankedTensorType>(adaptor.getX().getType());
  int64_t axis = static_cast<int64_t>(adaptor.getAxis());
  // The importer normalizes ONNX's negative axes, so the lowering passes
  // this one through unchanged.
  if (axis < 0 || axis >= type.getRank())
    return inferError(loc, name, "axis ", axis, " is out of range [0, ",
                      type.getRank(), ") for ", type);
  results.push_back(type);
  return success();
}

LogicalResult CumSumOp::verify() {
  if (getExclusive() > 1)
    return emitOpError("exclusive must be 0 or 1, got ")
           << static_cast<int64_t>(getExclusive());
  if (getReverse() > 1)
    return emitOpError("reverse must be 0 or 1, got ")
           << static_cast<int64_t>(getReverse());
  return success();
}

/// Both kernels read every element of a row before (or as) they write it.
bool CumSumOp::canWriteInPlace(unsigned operandIndex) {
  return operandIndex == 0;
}

/// Scans a small constant: integers wrap in their width, floats sum in
/// double and round once per element, as the host kernel does.
OpFoldResult CumSumOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr input = getSmallDense(adaptor.getX());
  RankedTensorType type = getType();
  // An op not yet verified (createOrFold) may have a bad axis or flag.
  int64_t axis = static_cast<int64_t>(getAxis());
  if (!input || input.getType() != type || axis < 0 || axis >= type.getRank() ||
      getExclusive() > 1 || getReverse() > 1)
    return {};
  ArrayRef<int64_t> shape = type.getShape();
  int64_t outer = product(shape.take_front(axis));
  int64_t length = shape[axis];
  int64_t inner = product(shape.drop_front(axis + 1));
  bool exclusive = getExclusive() != 0, reverse = getReverse() != 0;
  // Calls visit(index, position) along each row in scan order.
  auto forEachRow = [&](auto visit) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i)
        for (int64_t step = 0; step < length; ++step) {
          int64_t position = reverse ? length - 1 - step : step;
          visit((o * length + position) * inner + i, step == 0);
        }
  };
  Type elementType = type.getElementType();
  if (auto integerType = dyn_cast<IntegerType>(elementType)) {
    SmallVector<APInt> values(input.getValues<APInt>());
    SmallVector<APInt> results(values.size());
    APInt sum(integerType.getWidth(), 0);
    forEachRow([&](int64_t index, bool rowStart) {
      if (rowStart)
        sum = APInt(integerType.getWidth(), 0);
      if (exclusive)
        results[index] = sum;
      sum += values[index];
      if (!exclusive)
        results[index] = sum;
    });
    return DenseElementsAttr::get(type, results);
  }
  if (auto floatType = dyn_cast<FloatType>(elementType)) {
    SmallVector<double> values;
    for (const APFloat &value : input.getValues<APFloat>())
      values.push_back(value.convertToDouble());
    SmallVector<Attribute> results(values.size());
    double sum = 0.0;
    forEachRow([&](int64_t index, bool rowStart) {
      if (rowStart)
        sum = 0.0;
      if (exclusive)
        results[index] = FloatAttr::get(floatType, sum);
      sum += values[index];
      if (!exclusive)
        results[index] = FloatAttr::get(floatType, sum);
    });
    return DenseElementsAttr::get(type, results);
  }
  return {};
}
