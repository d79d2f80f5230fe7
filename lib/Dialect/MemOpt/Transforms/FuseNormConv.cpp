//===- FuseNormConv.cpp - batch norm + ReLU folded into convolutions ------===//
//
// --memopt-fuse-norm-conv: a training step's `relu(batch_norm_training(X))`
// whose output R only feeds convolutions stops being a tensor. The
// normalization keeps its statistics (batch_norm_stats, which also folds
// scale, bias, mean and 1/std into one multiply-add per channel), each
// convolution and filter gradient that read R applies that multiply-add and
// the ReLU to X as it loads it (norm_relu_conv,
// norm_relu_conv_backward_filter), and the normalization's gradient takes
// the ReLU's mask from X (batch_norm_relu_grad) instead of from a stored R.
//
// Taken from cuDNN's ResNet training fusions (the graph API's ConvBNfprop,
// ConvBNwgrad and DReluForkDNorm patterns, used by NVIDIA's MXNet and
// PaddlePaddle ResNet-50 training) and from in-place activated batch norm
// (Rota Bulo et al., CVPR 2018), which also recomputes instead of storing
// the normalized activation. Further: the compiler applies it to any
// exported model where the pattern holds, proves per normalization that
// nothing else reads R, and the planner then sees R disappear from the
// saved set (the memory report shows it); cuDNN's engines are a runtime
// choice with memopt's own fallback, so the rewrite is legal on every
// target and layout, and `mode=on` makes the host tests run it.
//
//
// The normalizations before a residual add (ResNet's last of each block):
// `R = relu(add(batch_norm_training(X), Z))` becomes one
// `batch_norm_training X, scale, B residual Z {relu}` (cuDNN's NormAddRelu)
// that never stores BN(X), and `relu_grad(dR, R)` with the
// `batch_norm_training_grad` that reads it one `batch_norm_add_relu_grad`
// (cuDNN's DReluForkDNorm), which writes the sum's gradient dZ for the
// residual branch as it reduces. R stays (the next block reads it); the
// forward saves BN(X)'s write and read, the backward a read of dZ.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::memopt {
#define GEN_PASS_DEF_MEMOPTFUSENORMCONV
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"
} // namespace mlir::memopt

using namespace mlir;
using namespace mlir::memopt;

namespace {

/// What reads one normalization's output R, sorted by what each becomes.
struct NormReaders {
  SmallVector<ConvOp> convs;
  SmallVector<ConvBackwardFilterOp> filterGradients;
  /// Other readers that take R as it is (a max pool, its gradient): each
  /// gets R formed again right before it (norm_relu_apply).
  SmallVector<OpOperand *> reformed;
  /// relu_grad(dR, R) and the batch_norm_training_grad that reads it.
  SmallVector<std::pair<ReluGradOp, BatchNormTrainingGradOp>> gradients;
};

/// The readers of `norm`'s R when every one of them can take X instead, or
/// nothing.
std::optional<NormReaders> fusibleReaders(BatchNormTrainingOp norm) {
  Value r = norm.getY();
  bool channelsLast = norm.getChannelsLast();
  NormReaders readers;
  for (OpOperand &use : r.getUses()) {
    Operation *user = use.getOwner();
    if (auto conv = dyn_cast<ConvOp>(user)) {
      if (use.getOperandNumber() != 0 || conv.getW() == r || conv.getB() == r ||
          conv.getActivation() != "none" ||
          conv.getChannelsLast() != channelsLast)
        return std::nullopt;
      readers.convs.push_back(conv);
      continue;
    }
    if (auto grad = dyn_cast<ConvBackwardFilterOp>(user)) {
      if (use.getOperandNumber() != 0 || grad.getDY() == r ||
          grad.getChannelsLast() != channelsLast)
        return std::nullopt;
      readers.filterGradients.push_back(grad);
      continue;
    }
    if (isa<MaxPoolOp, AveragePoolOp, PoolGradOp>(user)) {
      // The pooled input (a pool gradient's X); never the gradient dY.
      if (use.getOperandNumber() != 0 ||
          (isa<PoolGradOp>(user) && user->getOperand(1) == r))
        return std::nullopt;
      readers.reformed.push_back(&use);
      continue;
    }
    auto relu = dyn_cast<ReluGradOp>(user);
    if (!relu || use.getOperandNumber() != 1 || relu.getA() == r ||
        relu.getA().getType() != r.getType() || !relu->hasOneUse())
      return std::nullopt;
    auto normGrad = dyn_cast<BatchNormTrainingGradOp>(*relu->user_begin());
    if (!normGrad || normGrad.getDY() != relu.getC() ||
        normGrad.getX() != norm.getX() ||
        normGrad.getScale() != norm.getScale() ||
        normGrad.getMean() != norm.getMean() ||
        normGrad.getInvStd() != norm.getInvStd() ||
        normGrad.getChannelsLast() != channelsLast)
      return std::nullopt;
    readers.gradients.push_back({relu, normGrad});
  }
  // A convolution or a pool must read R: with the ReLU's gradient alone R
  // would not be kept anyway.
  if (readers.convs.empty() && readers.reformed.empty())
    return std::nullopt;
  return readers;
}

/// `auto`'s rule: cuDNN's fused engines take channels-last f16 / bf16.
bool autoFuses(BatchNormTrainingOp norm, StringRef target) {
  Type element = getElementTypeOrSelf(norm.getX().getType());
  return target == "cuda" && norm.getChannelsLast() &&
         isa<Float16Type, BFloat16Type>(element);
}

/// Copies `from`'s discardable attributes (memopt.* annotations) to `to`.
void copyAnnotations(Operation *from, Operation *to) {
  for (NamedAttribute attr : from->getDiscardableAttrs())
    to->setAttr(attr.getName(), attr.getValue());
}

/// Rewrites `norm` and its readers; returns the bytes of R no longer formed.
int64_t fuse(BatchNormTrainingOp norm, const NormReaders &readers) {
  OpBuilder builder(norm);
  Value x = norm.getX();
  Type perChannel = norm.getMean().getType();
  auto stats = BatchNormStatsOp::create(
      builder, norm.getLoc(),
      TypeRange{perChannel, perChannel, perChannel, perChannel}, x,
      norm.getScale(), norm.getB(), norm.getEpsilonAttr(),
      norm.getChannelsLastAttr());
  copyAnnotations(norm, stats);
  Value scale = stats.getAppliedScale(), bias = stats.getAppliedBias();

  for (ConvOp conv : readers.convs) {
    builder.setInsertionPoint(conv);
    auto fused = NormReluConvOp::create(
        builder, conv.getLoc(), conv.getType(), x, conv.getW(), scale, bias,
        conv.getB(), conv.getKernelShapeAttr(), conv.getStridesAttr(),
        conv.getPadsAttr(), conv.getDilationsAttr(), conv.getGroupAttr(),
        conv.getChannelsLastAttr());
    copyAnnotations(conv, fused);
    conv.replaceAllUsesWith(fused.getY());
    conv.erase();
  }
  for (ConvBackwardFilterOp grad : readers.filterGradients) {
    builder.setInsertionPoint(grad);
    auto fused = NormReluConvBackwardFilterOp::create(
        builder, grad.getLoc(), grad.getType(), x, grad.getDY(), scale, bias,
        grad.getKernelShapeAttr(), grad.getStridesAttr(), grad.getPadsAttr(),
        grad.getDilationsAttr(), grad.getGroupAttr(),
        grad.getChannelsLastAttr());
    copyAnnotations(grad, fused);
    grad.replaceAllUsesWith(fused.getDW());
    grad.erase();
  }
  for (OpOperand *use : readers.reformed) {
    Operation *user = use->getOwner();
    builder.setInsertionPoint(user);
    auto apply =
        NormReluApplyOp::create(builder, norm.getLoc(), norm.getY().getType(),
                                x, scale, bias, norm.getChannelsLastAttr());
    use->set(apply.getR());
  }
  for (auto [relu, normGrad] : readers.gradients) {
    builder.setInsertionPoint(normGrad);
    auto fused = BatchNormReluGradOp::create(
        builder, normGrad.getLoc(), normGrad.getResultTypes(), x, relu.getA(),
        normGrad.getScale(), stats.getMean(), stats.getInvStd(), scale, bias,
        normGrad.getChannelsLastAttr());
    copyAnnotations(normGrad, fused);
    normGrad.replaceAllUsesWith(fused.getResults());
    normGrad.erase();
    relu.erase();
  }
  int64_t bytes = getTensorBytes(norm.getY().getType());
  norm.getMean().replaceAllUsesWith(stats.getMean());
  norm.getInvStd().replaceAllUsesWith(stats.getInvStd());
  norm.erase();
  return bytes;
}

/// A normalization whose output only feeds `relu(add(Y, Z))`, with the
/// gradients of that relu that feed this normalization's gradient.
struct ResidualReaders {
  AddOp add;
  ReluOp relu;
  Value residual;
  /// relu_grad(dR, R) and the batch_norm_training_grad of `norm` that reads
  /// it (at most one per relu gradient).
  SmallVector<std::pair<ReluGradOp, BatchNormTrainingGradOp>> gradients;
};

/// `norm`'s residual pattern when it is exact, or nothing: Y read only by
/// one add, the add only by one relu, Z of Y's type defined before `norm`
/// (the fused op takes its place), and each relu_grad(dR, R) that feeds this
/// normalization's gradient.
std::optional<ResidualReaders> residualReaders(BatchNormTrainingOp norm,
                                               DominanceInfo &dominance) {
  Value y = norm.getY();
  if (norm.getActivation() != "none" || norm.getZ() || !y.hasOneUse())
    return std::nullopt;
  auto add = dyn_cast<AddOp>(*y.user_begin());
  if (!add || add.getA() == add.getB() || add.getType() != y.getType() ||
      !add->hasOneUse())
    return std::nullopt;
  auto relu = dyn_cast<ReluOp>(*add->user_begin());
  if (!relu || relu.getType() != y.getType())
    return std::nullopt;
  ResidualReaders readers{
      add, relu, add.getA() == y ? add.getB() : add.getA(), {}};
  if (readers.residual.getType() != y.getType() ||
      !dominance.properlyDominates(readers.residual, norm))
    return std::nullopt;
  for (Operation *user : relu.getY().getUsers()) {
    auto grad = dyn_cast<ReluGradOp>(user);
    if (!grad || grad.getB() != relu.getY() || grad.getA() == relu.getY() ||
        grad.getA().getType() != y.getType())
      continue;
    for (Operation *gradUser : grad.getC().getUsers()) {
      auto normGrad = dyn_cast<BatchNormTrainingGradOp>(gradUser);
      if (normGrad && normGrad.getDY() == grad.getC() &&
          normGrad.getX() == norm.getX() &&
          normGrad.getScale() == norm.getScale() &&
          normGrad.getMean() == norm.getMean() &&
          normGrad.getInvStd() == norm.getInvStd() &&
          normGrad.getChannelsLast() == norm.getChannelsLast()) {
        readers.gradients.push_back({grad, normGrad});
        break;
      }
    }
  }
  return readers;
}

/// Rewrites `norm` with its add and relu into one normalization with the
/// residual, and its gradients; returns the bytes of BN(X) no longer formed.
int64_t fuseResidual(BatchNormTrainingOp norm, ResidualReaders &readers) {
  OpBuilder builder(norm);
  auto fused = BatchNormTrainingOp::create(
      builder, norm.getLoc(), norm.getResultTypes(), norm.getX(),
      norm.getScale(), norm.getB(), readers.residual, norm.getEpsilonAttr(),
      builder.getStringAttr("relu"), norm.getChannelsLastAttr());
  copyAnnotations(norm, fused);
  readers.relu.getY().replaceAllUsesWith(fused.getY());
  norm.getMean().replaceAllUsesWith(fused.getMean());
  norm.getInvStd().replaceAllUsesWith(fused.getInvStd());
  for (auto [relu, normGrad] : readers.gradients) {
    // At the relu gradient: its operands are there, and dZ replaces its
    // result, which other readers (the residual branch) may read before the
    // normalization's gradient.
    builder.setInsertionPoint(relu);
    auto grad = BatchNormAddReluGradOp::create(
        builder, normGrad.getLoc(),
        TypeRange{normGrad.getDX().getType(), normGrad.getDscale().getType(),
                  normGrad.getDB().getType(), relu.getC().getType()},
        normGrad.getX(), relu.getA(), fused.getY(), normGrad.getScale(),
        normGrad.getMean(), normGrad.getInvStd(),
        normGrad.getChannelsLastAttr());
    copyAnnotations(normGrad, grad);
    normGrad.getDX().replaceAllUsesWith(grad.getDX());
    normGrad.getDscale().replaceAllUsesWith(grad.getDscale());
    normGrad.getDB().replaceAllUsesWith(grad.getDB());
    relu.getC().replaceAllUsesWith(grad.getDZ());
    normGrad.erase();
    relu.erase();
  }
  int64_t bytes = getTensorBytes(norm.getY().getType());
  readers.relu.erase();
  readers.add.erase();
  norm.erase();
  return bytes;
}

struct MemOptFuseNormConvPass
    : public mlir::memopt::impl::MemOptFuseNormConvBase<
          MemOptFuseNormConvPass> {
  using MemOptFuseNormConvBase::MemOptFuseNormConvBase;

  void runOnOperation() override {
    func::FuncOp function = getOperation();
    if (mode != "auto" && mode != "on" && mode != "off") {
      function.emitError("memopt-fuse-norm-conv: mode '")
          << mode << "' is not auto, on or off";
      return signalPassFailure();
    }
    if (target != "cuda" && target != "host") {
      function.emitError("memopt-fuse-norm-conv: target '")
          << target << "' is not cuda or host";
      return signalPassFailure();
    }
    if (mode == "off")
      return;
    SmallVector<BatchNormTrainingOp> norms;
    function.walk([&](BatchNormTrainingOp norm) { norms.push_back(norm); });
    int64_t withRelu = 0, fused = 0, bytes = 0;
    int64_t withResidual = 0, residualFused = 0, residualGradients = 0,
            residualBytes = 0;
    DominanceInfo dominance(function);
    for (BatchNormTrainingOp norm : norms) {
      if (norm.getActivation() == "none") {
        std::optional<ResidualReaders> readers =
            residualReaders(norm, dominance);
        if (!readers)
          continue;
        ++withResidual;
        if (mode == "auto" && !autoFuses(norm, target))
          continue;
        residualGradients += int64_t(readers->gradients.size());
        residualBytes += fuseResidual(norm, *readers);
        ++residualFused;
        continue;
      }
      if (norm.getActivation() != "relu")
        continue;
      ++withRelu;
      if (mode == "auto" && !autoFuses(norm, target))
        continue;
      std::optional<NormReaders> readers = fusibleReaders(norm);
      if (!readers)
        continue;
      bytes += fuse(norm, *readers);
      ++fused;
    }
    if (report && !norms.empty())
      llvm::outs() << "memopt-fuse-norm-conv @" << function.getSymName() << ": "
                   << fused << " of " << withRelu
                   << " batch norm + relu folded into the ops that read them ("
                   << bytes << " bytes of activations not formed); "
                   << residualFused << " of " << withResidual
                   << " batch norm + add + relu fused (" << residualGradients
                   << " gradients, " << residualBytes
                   << " bytes of normalized outputs not formed)\n";
  }
};

} // namespace
