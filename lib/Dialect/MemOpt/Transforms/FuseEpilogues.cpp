//===- FuseEpilogues.cpp - bias and activation epilogues ------------------===//
//
// Folds the elementwise tails of contractions into the contraction, so that
// they run as the library call's epilogue (cuBLASLt's BIAS / RELU / GELU
// epilogues, the CUDA backend's one bias+activation pass after cuDNN) instead
// of one full read and write of the activation each, and so that the
// intermediate never needs arena space:
//
//   * the tanh-approximated GELU that GPT-2-style models spell as eight
//     elementwise ops, 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))),
//     becomes `gelu {approximate = "tanh"}` (onnxruntime's FastGelu fusion);
//   * matmul(A [..., K], B [K, N]) becomes a 2-D gemm between aliasing
//     reshapes, so Linear layers on [batch, tokens, features] get the gemm
//     epilogues too (XLA and onnxruntime do the same flattening);
//   * gemm + row bias (an Add of a [N] / [1, N] vector) -> gemm with C
//     (onnxruntime's MatMulAddFusion, TensorRT's bias fusion);
//   * gemm / conv + relu / gelu -> the op's `activation` (onnxruntime's
//     FusedConv / FusedGemm, TensorRT's conv+activation fusion);
//   * conv + residual add (+ relu) -> conv_residual, ResNet's
//     relu(conv(x) + shortcut) (cuDNN's cudnnConvolutionBiasActivationForward
//     with its `z` input, onnxruntime's FusedConv with `Z`, TensorFlow's
//     FusedConv2DBiasActivation side input).
//   * training-mode batch normalization + relu -> its `activation` (cuDNN's
//     fused BN-activation forward);
//   * a convolution's all-zero constant bias is dropped (the zero biases
//     torch.onnx adds to torchvision's bias-free convolutions, constants once
//     a training step freezes them): no bias pass or fused bias epilogue runs
//     for it (0.03 ms on a layer-3 convolution of ResNet-50's fp16 training
//     step, MEMOPT_CONV_LOG).
//
// Each rewrite requires the fused intermediate to have no other user, and
// looks through one aliasing reshape between the contraction and its tail
// (the reshape moves to the fused result). Where this goes further than
// onnxruntime's fusions: they run on ONNX graphs before memory planning;
// here they also shrink the liveness problem the planner solves.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>
#include <optional>

namespace mlir::memopt {
#define GEN_PASS_DEF_MEMOPTFUSEEPILOGUES
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"
} // namespace mlir::memopt

using namespace mlir;
using namespace mlir::memopt;

namespace {

/// The value of a scalar-like float constant (every element equal), if any.
std::optional<double> splatValue(Value value) {
  DenseElementsAttr attr;
  if (!matchPattern(value, m_Constant(&attr)) || !attr.isSplat() ||
      !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  return attr.getSplatValue<APFloat>().convertToDouble();
}

bool isConstantNear(Value value, double expected) {
  std::optional<double> actual = splatValue(value);
  return actual && std::abs(*actual - expected) <= 1e-4 * std::abs(expected);
}

/// For a commutative binary op `op` (lhs, rhs) whose one operand satisfies
/// `isConstantNear(_, c)`, returns the other operand.
template <typename OpTy> Value otherThanConstant(Value value, double c) {
  auto op = value.getDefiningOp<OpTy>();
  if (!op)
    return {};
  if (isConstantNear(op->getOperand(1), c))
    return op->getOperand(0);
  if (isConstantNear(op->getOperand(0), c))
    return op->getOperand(1);
  return {};
}

/// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) -> gelu_tanh(x).
/// The root is the last multiply: mul(mul(x, 0.5), add(tanh(..), 1)) with the
/// operands in either order.
struct FuseGeluTanh : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  /// x from x + 0.044715 * x^3 (x^3 as pow(x, 3) or x * x * x).
  static Value innerInput(Value sum) {
    auto add = sum.getDefiningOp<AddOp>();
    if (!add)
      return {};
    for (int i = 0; i < 2; ++i) {
      Value x = add->getOperand(i), cubeTerm = add->getOperand(1 - i);
      Value cube = otherThanConstant<MulOp>(cubeTerm, 0.044715);
      if (!cube)
        continue;
      if (auto pow = cube.getDefiningOp<PowOp>())
        if (pow->getOperand(0) == x && isConstantNear(pow->getOperand(1), 3.0))
          return x;
      if (auto mul = cube.getDefiningOp<MulOp>()) {
        for (int j = 0; j < 2; ++j) {
          auto square = mul->getOperand(j).getDefiningOp<MulOp>();
          if (square && mul->getOperand(1 - j) == x &&
              square->getOperand(0) == x && square->getOperand(1) == x)
            return x;
        }
      }
    }
    return {};
  }

  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    for (int i = 0; i < 2; ++i) {
      Value half = op->getOperand(i), onePlus = op->getOperand(1 - i);
      Value x = otherThanConstant<MulOp>(half, 0.5);
      Value tanhValue = otherThanConstant<AddOp>(onePlus, 1.0);
      if (!x || !tanhValue)
        continue;
      auto tanh = tanhValue.getDefiningOp<TanhOp>();
      if (!tanh)
        continue;
      Value scaled = otherThanConstant<MulOp>(
          tanh->getOperand(0), 0.7978845608028654 /* sqrt(2 / pi) */);
      if (!scaled || innerInput(scaled) != x || x.getType() != op.getType())
        continue;
      rewriter.replaceOpWithNewOp<GeluOp>(op, op.getType(), x,
                                          rewriter.getStringAttr("tanh"));
      return success();
    }
    return failure();
  }
};

/// matmul(A [..., K], B [K, N]) -> reshape(gemm(reshape(A) [M, K], B)).
struct MatMulToGemm : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatMulOp op,
                                PatternRewriter &rewriter) const override {
    auto aType = cast<RankedTensorType>(op.getA().getType());
    auto bType = cast<RankedTensorType>(op.getB().getType());
    if (bType.getRank() != 2 || aType.getRank() < 2)
      return failure();
    int64_t k = aType.getShape().back();
    if (k == 0 || aType.getNumElements() == 0)
      return failure();
    rewriter.replaceOp(op, createFlattenedGemm(rewriter, op.getLoc(), op.getA(),
                                               op.getB(),
                                               /*transB=*/false, op.getType()));
    return success();
  }
};

/// The contraction behind `value`: `value` itself or an aliasing reshape of
/// it, each with exactly one use (the tail being fused).
template <typename OpTy>
std::pair<OpTy, ReshapeOp> producerThroughReshape(Value value) {
  if (!value.hasOneUse())
    return {};
  ReshapeOp reshape = value.getDefiningOp<ReshapeOp>();
  if (reshape) {
    value = reshape.getData();
    if (!value.hasOneUse())
      return {};
  }
  return {value.getDefiningOp<OpTy>(), reshape};
}

/// Copies `op` with the given C and activation (other attributes kept).
GemmOp cloneGemm(PatternRewriter &rewriter, GemmOp op, Value c,
                 StringRef activation) {
  return GemmOp::create(
      rewriter, op.getLoc(), op.getA(), op.getB(), c, op.getAlphaAttr(),
      c ? op.getBetaAttr() : rewriter.getF32FloatAttr(1), op.getTransAAttr(),
      op.getTransBAttr(), rewriter.getStringAttr(activation));
}

/// add(gemm, bias) / add(reshape(gemm), bias) with a row bias -> gemm with C.
struct FuseGemmBias : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    for (int i = 0; i < 2; ++i) {
      auto [gemm, reshape] = producerThroughReshape<GemmOp>(op->getOperand(i));
      Value bias = op->getOperand(1 - i);
      if (!gemm || gemm.getC() || gemm.getActivation() != "none")
        continue;
      auto gemmType = cast<RankedTensorType>(gemm.getType());
      auto biasType = cast<RankedTensorType>(bias.getType());
      int64_t n = gemmType.getDimSize(1);
      // A row vector: [N], or [1, ..., 1, N]; the add must not broadcast the
      // product itself (its result is the product's shape).
      Value product = reshape ? reshape.getResult() : gemm.getResult();
      if (op.getResult().getType() != product.getType() ||
          biasType.getElementType() != gemmType.getElementType() ||
          biasType.getRank() == 0 || biasType.getShape().back() != n ||
          biasType.getNumElements() != n)
        continue;
      if (reshape &&
          cast<RankedTensorType>(reshape.getType()).getShape().back() != n)
        continue;
      Value row = bias;
      if (biasType.getRank() != 1)
        row = ReshapeOp::create(
            rewriter, bias.getLoc(),
            RankedTensorType::get({n}, biasType.getElementType()), bias);
      Value fused = cloneGemm(rewriter, gemm, row, "none");
      if (reshape)
        fused = ReshapeOp::create(rewriter, reshape.getLoc(), reshape.getType(),
                                  fused);
      rewriter.replaceOp(op, fused);
      return success();
    }
    return failure();
  }
};

/// The activation name an op computes, or "" when it is not one.
StringRef activationOf(Operation *op) {
  if (isa<ReluOp>(op))
    return "relu";
  if (auto gelu = dyn_cast<GeluOp>(op))
    return gelu.getApproximate() == "tanh" ? "gelu_tanh" : "gelu";
  return "";
}

/// act(gemm) / act(reshape(gemm)) -> gemm {activation};
/// relu(batch_norm_training) -> batch_norm_training {activation = relu};
/// act(conv) -> conv {activation}.
struct FuseActivation : RewritePattern {
  explicit FuseActivation(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    StringRef activation = activationOf(op);
    if (activation.empty() ||
        op->getOperand(0).getType() != op->getResult(0).getType())
      return failure();
    Value input = op->getOperand(0);
    if (auto [gemm, reshape] = producerThroughReshape<GemmOp>(input);
        gemm && gemm.getActivation() == "none") {
      Value fused = cloneGemm(rewriter, gemm, gemm.getC(), activation);
      if (reshape)
        fused = ReshapeOp::create(rewriter, reshape.getLoc(), reshape.getType(),
                                  fused);
      rewriter.replaceOp(op, fused);
      return success();
    }
    if (auto norm = input.getDefiningOp<BatchNormTrainingOp>();
        norm && activation == "relu" && input.hasOneUse() &&
        norm.getActivation() == "none" && !norm.getZ()) {
      // Its gradient reads X, mean and 1/std, never Y: Y may be the relu's.
      rewriter.modifyOpInPlace(
          norm, [&] { norm.setActivation(rewriter.getStringAttr("relu")); });
      rewriter.replaceOp(op, norm.getY());
      return success();
    }
    Operation *conv = input.getDefiningOp();
    if (!isa_and_nonnull<ConvOp, ConvResidualOp>(conv) || !input.hasOneUse() ||
        conv->getAttrOfType<StringAttr>("activation").getValue() != "none")
      return failure();
    rewriter.modifyOpInPlace(conv, [&] {
      conv->setAttr("activation", rewriter.getStringAttr(activation));
    });
    // The conv keeps its own location (its ONNX node name).
    rewriter.replaceOp(op, conv->getResult(0));
    return success();
  }
};

/// add(conv(x), z) -> conv_residual(x, w, b, z) when the conv's result has
/// no other user, the conv has no activation yet and z has the sum's type
/// (no broadcast). A conv without a bias gets a zero bias (cuDNN's fused
/// call takes one). A relu after the add then folds in (FuseActivation).
struct FuseConvResidual : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    for (unsigned side = 0; side < 2; ++side) {
      Value convResult = op->getOperand(side);
      Value residual = op->getOperand(1 - side);
      auto conv = convResult.getDefiningOp<ConvOp>();
      if (!conv || !convResult.hasOneUse() || conv.getActivation() != "none" ||
          conv.getChannelsLast() || residual.getType() != op.getType() ||
          convResult.getType() != op.getType() || residual == convResult)
        continue;
      Value bias = conv.getB();
      if (!bias) {
        auto type = cast<RankedTensorType>(conv.getType());
        auto biasType =
            RankedTensorType::get({type.getDimSize(1)}, type.getElementType());
        bias = ConstantOp::create(
            rewriter, conv.getLoc(),
            DenseElementsAttr::get(
                biasType, rewriter.getFloatAttr(type.getElementType(), 0.0)));
      }
      auto fused = ConvResidualOp::create(
          rewriter, conv.getLoc(), op.getType(), conv.getX(), conv.getW(), bias,
          residual, conv.getKernelShapeAttr(), conv.getStridesAttr(),
          conv.getPadsAttr(), conv.getDilationsAttr(), conv.getGroupAttr(),
          conv.getActivationAttr(), /*channels_last=*/nullptr);
      rewriter.replaceOp(op, fused.getResult());
      rewriter.eraseOp(conv);
      return success();
    }
    return failure();
  }
};

/// conv / conv_transpose(x, w, zeros) -> the op without a bias. A zero added
/// to the sum changes nothing but the sign of a -0 result.
template <typename ConvLike>
struct DropZeroConvBias : OpRewritePattern<ConvLike> {
  using OpRewritePattern<ConvLike>::OpRewritePattern;

  LogicalResult matchAndRewrite(ConvLike op,
                                PatternRewriter &rewriter) const override {
    DenseElementsAttr value;
    if (!op.getB() || !matchPattern(op.getB(), m_Constant(&value)) ||
        !value.isSplat() || !isa<FloatType>(value.getElementType()) ||
        !value.template getSplatValue<APFloat>().isZero())
      return failure();
    rewriter.modifyOpInPlace(op, [&] { op.getBMutable().clear(); });
    return success();
  }
};

struct MemOptFuseEpiloguesPass
    : public mlir::memopt::impl::MemOptFuseEpiloguesBase<
          MemOptFuseEpiloguesPass> {
  using MemOptFuseEpiloguesBase::MemOptFuseEpiloguesBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseGeluTanh, MatMulToGemm, FuseGemmBias, FuseActivation,
                 FuseConvResidual, DropZeroConvBias<ConvOp>,
                 DropZeroConvBias<ConvTransposeOp>>(&getContext());
    // Canonical forms first (shape sub-graphs folded, matmul of transposes),
    // so the tails are found in the form the patterns expect.
    for (RegisteredOperationName name : getContext().getRegisteredOperations())
      if (name.getDialectNamespace() == MemOptDialect::getDialectNamespace())
        name.getCanonicalizationPatterns(patterns, &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace

void mlir::memopt::populateGeluTanhFusionPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseGeluTanh>(patterns.getContext());
}
