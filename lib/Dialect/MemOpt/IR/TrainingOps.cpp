//===- TrainingOps.cpp - state, loss, gradient and optimizer ops ----------===//
//
// Verifiers and costs of the ops that only a training step holds. Their
// semantics follow PyTorch (F.cross_entropy, torch.optim.SGD / AdamW) so
// that a memopt step and a PyTorch step agree.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Runtime/Workspace.h"

#include "OpUtils.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;
using namespace mlir::memopt;

std::string mlir::memopt::describeNode(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  Location loc = op->getLoc();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    if (!fused.getLocations().empty())
      loc = fused.getLocations().front();
  if (auto name = dyn_cast<NameLoc>(loc))
    os << "node '" << name.getName().getValue() << "' (" << op->getName()
       << ")";
  else
    os << op->getName();
  return text;
}

//===----------------------------------------------------------------------===//
// VariableOp
//===----------------------------------------------------------------------===//

LogicalResult VariableOp::verify() {
  StringRef role = getRole();
  if (!llvm::is_contained({"parameter", "optimizer_state", "statistic",
                           "learning_rate", "step", "gradient_accumulator",
                           "micro_step", "random_key", "loss_scale",
                           "loss_scale_state", "master"},
                          role))
    return emitOpError("role '")
           << role
           << "' is not one of parameter, optimizer_state, statistic, "
              "learning_rate, step, gradient_accumulator, micro_step, "
              "random_key, loss_scale, loss_scale_state, master";
  if (auto placement = (*this)->getAttrOfType<StringAttr>(kPlacementAttrName))
    if (placement.getValue() != "host")
      return emitOpError("memopt.placement '")
             << placement.getValue() << "' is not 'host'";
  if (getName().empty())
    return emitOpError("needs a non-empty name");
  // ZeRO-3 (memopt-data-parallel shard=parameters): the variable holds this
  // rank's shard over `memopt.shards` ranks of a parameter whose whole value
  // is the initial value; the weight file holds each rank's shard of it.
  if (auto shards = (*this)->getAttrOfType<IntegerAttr>("memopt.shards")) {
    auto initial = getInitialValueAttr();
    auto whole = initial ? dyn_cast<RankedTensorType>(initial.getType())
                         : RankedTensorType();
    if (getRole() != "parameter" || !whole || shards.getInt() < 1)
      return emitOpError("memopt.shards needs a parameter with an initial "
                         "value and at least 1 rank");
    Type shard = RankedTensorType::get(
        {getShardElements(whole.getNumElements(), shards.getInt())},
        whole.getElementType());
    if (getType() != shard)
      return emitOpError("sharded over ")
             << shards.getInt() << " ranks, the parameter of type " << whole
             << " has shards of type " << shard << ", not " << getType();
    return success();
  }
  if (auto initial = getInitialValueAttr())
    if (initial.getType() != getType())
      return emitOpError("initial value of type ")
             << initial.getType() << " does not match the result type "
             << getType();
  return success();
}

//===----------------------------------------------------------------------===//
// DropoutOp
//===----------------------------------------------------------------------===//

LogicalResult DropoutOp::verify() {
  float ratio = getRatio().convertToFloat();
  if (!(ratio >= 0.0f && ratio < 1.0f))
    return emitOpError("ratio ") << ratio << " is not in [0, 1)";
  if (Value key = getKey())
    if (cast<ShapedType>(key.getType()).getNumElements() != 2)
      return emitOpError("key must hold two i64 elements [seed, micro-batch]");
  if (getStream() > uint64_t(UINT32_MAX))
    return emitOpError("stream ") << getStream() << " is not a 32-bit id";
  return success();
}

/// Without a key (inference) or with ratio 0 the dropout is the identity.
LogicalResult DropoutOp::canonicalize(DropoutOp op, PatternRewriter &rewriter) {
  if (op.getKey() && !op.getRatio().isZero())
    return failure();
  rewriter.replaceOp(op, op.getX());
  return success();
}

//===----------------------------------------------------------------------===//
// RandomUniformOp
//===----------------------------------------------------------------------===//

LogicalResult RandomUniformOp::verify() {
  if (cast<ShapedType>(getKey().getType()).getNumElements() != 2)
    return emitOpError("key must hold two i64 elements [seed, micro-batch]");
  if (getStream() > uint64_t(UINT32_MAX))
    return emitOpError("stream ") << getStream() << " is not a 32-bit id";
  float low = getLow().convertToFloat(), high = getHigh().convertToFloat();
  if (!std::isfinite(low) || !std::isfinite(high) || low > high)
    return emitOpError("needs finite low <= high, got [")
           << low << ", " << high << ")";
  auto type = cast<ShapedType>(getOutput().getType());
  if (!type.hasStaticShape())
    return emitOpError("result must have a static shape");
  if (!type.getElementType().isF32() && !type.getElementType().isF16() &&
      !type.getElementType().isBF16())
    return emitOpError("draws f32, f16 or bf16 numbers, not ")
           << type.getElementType();
  return success();
}

bool DropoutOp::isElementwise() { return true; }
bool DropoutOp::canWriteInPlace(unsigned operandIndex) {
  return operandIndex == 0;
}

//===----------------------------------------------------------------------===//
// Softmax cross-entropy
//===----------------------------------------------------------------------===//

/// Checks logits [..., C] against labels [...].
static LogicalResult verifyLogitsAndLabels(Operation *op, ShapedType logits,
                                           ShapedType labels) {
  if (logits.getRank() < 1)
    return op->emitOpError("logits must have a class axis (rank >= 1)");
  if (labels.getShape() != logits.getShape().drop_back())
    return op->emitOpError("labels of shape [")
           << labels.getShape() << "] do not match logits ["
           << logits.getShape() << "] without their last (class) axis";
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::verify() {
  if (getType().getRank() != 0)
    return emitOpError("the loss must be a scalar (rank 0)");
  return verifyLogitsAndLabels(*this, getLogits().getType(),
                               getLabels().getType());
}

int64_t SoftmaxCrossEntropyOp::getFlops() {
  return 4 * getLogits().getType().getNumElements();
}

LogicalResult SoftmaxCrossEntropyGradOp::verify() {
  if (getDloss().getType().getRank() != 0)
    return emitOpError("dloss must be a scalar (rank 0)");
  if (getType() != getLogits().getType())
    return emitOpError("result type must be the logits' type");
  return verifyLogitsAndLabels(*this, getLogits().getType(),
                               getLabels().getType());
}

int64_t SoftmaxCrossEntropyGradOp::getFlops() {
  return 5 * getLogits().getType().getNumElements();
}

//===----------------------------------------------------------------------===//
// Linear cross-entropy (the fused head + loss)
//===----------------------------------------------------------------------===//

/// Checks x [..., K], w [C, K] of one float type, labels [...] and the
/// per-row lse [...].
static LogicalResult verifyLinearCrossEntropy(Operation *op, ShapedType x,
                                              ShapedType w, ShapedType labels,
                                              ShapedType lse) {
  if (x.getRank() < 1 || w.getRank() != 2 ||
      x.getShape().back() != w.getShape().back())
    return op->emitOpError("x [")
           << x.getShape() << "] and w [" << w.getShape()
           << "] must be [..., K] and [C, K] (the classes' rows)";
  if (x.getElementType() != w.getElementType())
    return op->emitOpError("x and w must have one element type, got ")
           << x.getElementType() << " and " << w.getElementType();
  if (labels.getShape() != x.getShape().drop_back())
    return op->emitOpError("labels of shape [")
           << labels.getShape() << "] do not match x [" << x.getShape()
           << "] without its last (feature) axis";
  if (lse.getShape() != labels.getShape())
    return op->emitOpError("lse of shape [")
           << lse.getShape() << "] must have the labels' shape";
  return success();
}

namespace {
/// Rows, classes and element bytes of a linear cross-entropy.
struct HeadShape {
  int64_t rows, classes, features, element;
};
HeadShape headShape(ShapedType x, ShapedType w) {
  int64_t features = w.getDimSize(1);
  int64_t rows = features ? x.getNumElements() / features : 0;
  return {rows, w.getDimSize(0), features,
          getTensorBytes(x) / std::max<int64_t>(1, x.getNumElements())};
}
/// rows x classes x per, in double and capped: no [rows, classes] tensor
/// exists to bound the product (x and w are each at most kMaxTensorBytes).
int64_t cappedProduct(const HeadShape &s, int64_t classes, double per) {
  double value = double(s.rows) * double(classes) * per;
  return value >= double(kMaxTensorBytes) ? kMaxTensorBytes : int64_t(value);
}
/// workspace::linearCrossEntropyBytes, the runtime's layout: three
/// f32 statistics a row and the logits of a chunk of `classes` classes (capped
/// at kMaxTensorBytes, as a tensor would be; the logits alone may overflow).
int64_t headWorkspace(const HeadShape &s, int64_t classes) {
  if (cappedProduct(s, classes, double(s.element)) >= kMaxTensorBytes)
    return kMaxTensorBytes;
  return std::min(kMaxTensorBytes, ::memopt::workspace::linearCrossEntropyBytes(
                                       s.rows, classes, s.element));
}
/// Every class in one chunk (less an odd tail of fewer than 8, its own
/// chunk), the runtime's fastest; at least chunks of 2048 classes, whose
/// GEMMs still fill an H100 at a few thousand rows.
int64_t headWish(const HeadShape &s) {
  return headWorkspace(s, s.classes >= 8 ? s.classes / 8 * 8 : s.classes);
}
int64_t headFloor(const HeadShape &s) {
  return std::min(headWish(s),
                  headWorkspace(s, std::min<int64_t>(s.classes, 2048)));
}
} // namespace

LogicalResult LinearCrossEntropyOp::verify() {
  if (getLoss().getType().getRank() != 0)
    return emitOpError("the loss must be a scalar (rank 0)");
  return verifyLinearCrossEntropy(*this, getX().getType(), getW().getType(),
                                  getLabels().getType(), getLse().getType());
}

int64_t LinearCrossEntropyOp::getFlops() {
  HeadShape s = headShape(getX().getType(), getW().getType());
  return cappedProduct(s, s.classes, 2.0 * double(s.features) + 4.0);
}

int64_t LinearCrossEntropyOp::getWorkspaceBytes() {
  return headWish(headShape(getX().getType(), getW().getType()));
}

int64_t LinearCrossEntropyOp::getWorkspaceFloor() {
  return headFloor(headShape(getX().getType(), getW().getType()));
}

LogicalResult LinearCrossEntropyGradOp::verify() {
  if (getDloss().getType().getRank() != 0)
    return emitOpError("dloss must be a scalar (rank 0)");
  if (getDx().getType() != getX().getType() ||
      getDw().getType() != getW().getType())
    return emitOpError("dx and dw must have the types of x and w");
  return verifyLinearCrossEntropy(*this, getX().getType(), getW().getType(),
                                  getLabels().getType(), getLse().getType());
}

/// The logits recomputed, then dx and dw: three products over the logits.
int64_t LinearCrossEntropyGradOp::getFlops() {
  HeadShape s = headShape(getX().getType(), getW().getType());
  return cappedProduct(s, s.classes, 6.0 * double(s.features) + 5.0);
}

int64_t LinearCrossEntropyGradOp::getWorkspaceBytes() {
  return headWish(headShape(getX().getType(), getW().getType()));
}

int64_t LinearCrossEntropyGradOp::getWorkspaceFloor() {
  return headFloor(headShape(getX().getType(), getW().getType()));
}

//===----------------------------------------------------------------------===//
// ConvBackwardFilterOp
//===----------------------------------------------------------------------===//

LogicalResult ConvBackwardFilterOp::verify() {
  auto x = cast<RankedTensorType>(getX().getType());
  auto dy = cast<RankedTensorType>(getDY().getType());
  auto dw = cast<RankedTensorType>(getType());
  // Channels-last: checked on the channels-first views.
  if (getChannelsLast()) {
    x = impl::channelsFirstView(x);
    dy = impl::channelsFirstView(dy);
    dw = impl::channelsFirstView(dw);
  }
  int64_t spatialRank = x.getRank() - 2;
  if (spatialRank < 1 || spatialRank > 3 || dy.getRank() != x.getRank() ||
      dw.getRank() != x.getRank())
    return emitOpError("X, dY and the result must have the same rank, 3 to 5");
  if (int64_t(getKernelShape().size()) != spatialRank ||
      int64_t(getStrides().size()) != spatialRank ||
      int64_t(getDilations().size()) != spatialRank ||
      int64_t(getPads().size()) != 2 * spatialRank)
    return emitOpError("kernel_shape, strides, dilations need one value and "
                       "pads two values per spatial axis");
  int64_t group = getGroup();
  if (group < 1 || x.getDimSize(1) % group != 0)
    return emitOpError("group ") << group << " does not divide the "
                                 << x.getDimSize(1) << " input channels";
  if (dy.getDimSize(0) != x.getDimSize(0) ||
      dw.getDimSize(0) != dy.getDimSize(1) ||
      dw.getDimSize(1) != x.getDimSize(1) / group ||
      dw.getShape().drop_front(2) != getKernelShape())
    return emitOpError("shapes X [")
           << x.getShape() << "], dY [" << dy.getShape() << "], dW ["
           << dw.getShape() << "] do not form a convolution";
  if (x.getElementType() != dy.getElementType() ||
      x.getElementType() != dw.getElementType())
    return emitOpError("X, dY and dW must share one element type");
  return success();
}

int64_t ConvBackwardFilterOp::getFlops() {
  ShapedType dy = getDY().getType(), dw = getType();
  return 2 * dy.getNumElements() *
         ShapedType::getNumElements(dw.getShape().drop_front(1));
}

int64_t ConvBackwardFilterOp::getWorkspaceBytes() {
  return detail::convWorkspaceBytes(*this);
}

int64_t ConvBackwardFilterOp::getWorkspaceFloor() {
  return detail::convWorkspaceFloor(*this, getChannelsLast());
}

//===----------------------------------------------------------------------===//
// PoolGradOp
//===----------------------------------------------------------------------===//

LogicalResult PoolGradOp::verify() {
  if (getKind() != "max" && getKind() != "average")
    return emitOpError("kind must be 'max' or 'average'");
  ShapedType x = getX().getType(), dy = getDY().getType();
  int64_t spatialRank = x.getRank() - 2;
  if (spatialRank < 1 || dy.getRank() != x.getRank())
    return emitOpError("X and dY must have the same rank (at least 3)");
  if (int64_t(getKernelShape().size()) != spatialRank ||
      int64_t(getStrides().size()) != spatialRank ||
      int64_t(getDilations().size()) != spatialRank ||
      int64_t(getPads().size()) != 2 * spatialRank)
    return emitOpError("kernel_shape, strides, dilations need one value and "
                       "pads two values per spatial axis");
  if (getType() != x)
    return emitOpError("the result must have X's type");
  if (dy.getElementType() != x.getElementType())
    return emitOpError("X and dY must share one element type");
  return success();
}

int64_t PoolGradOp::getFlops() {
  return getDY().getType().getNumElements() *
         ShapedType::getNumElements(getKernelShape());
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

/// Every written operand must be a variable: an update writes state in place.
static LogicalResult verifyWritesVariable(Operation *op, Value value,
                                          StringRef what) {
  if (!value.getDefiningOp<VariableOp>())
    return op->emitOpError() << what
                             << " must be a memopt.variable (the update "
                                "writes it in place)";
  return success();
}

static LogicalResult verifyScalar(Operation *op, Value value, StringRef what) {
  if (cast<ShapedType>(value.getType()).getNumElements() != 1)
    return op->emitOpError() << what << " must hold one element";
  return success();
}

/// The type of an update's gradient, optimizer state and accumulator: the
/// parameter's, or with `shards` > 1 this rank's 1-D shard of it
/// (getShardElements).
static Type getStateType(Value param, int64_t shards) {
  // f32 also for a low working parameter (MemOpt_MasterArg): the state and
  // the master are the optimizer's.
  auto type = cast<RankedTensorType>(param.getType())
                  .clone(Float32Type::get(param.getContext()));
  if (shards <= 1)
    return type;
  return RankedTensorType::get(
      {getShardElements(type.getNumElements(), shards)}, type.getElementType());
}

static LogicalResult verifyShards(Operation *op, int64_t shards) {
  if (shards < 1)
    return op->emitOpError("shards must be at least 1, got ") << shards;
  return success();
}

/// The accumulation operands of an update: an accumulator variable of the
/// gradient's type with the micro-step scalar and K > 1, or the micro-step
/// alone with K > 1 (the update only runs on micro-step K - 1: a collective
/// accumulated the gradient), or neither with K = 1.
static LogicalResult verifyAccumulation(Operation *op, Type gradientType,
                                        Value accumulator, Value microStep,
                                        int64_t steps) {
  if (!accumulator && !microStep) {
    if (steps != 1)
      return op->emitOpError("accumulation_steps ")
             << steps << " needs the micro_step";
    return success();
  }
  if (!microStep)
    return op->emitOpError("an accumulator needs the micro_step");
  if (steps < 2)
    return op->emitOpError("accumulation_steps must be at least 2 with a "
                           "micro_step, got ")
           << steps;
  if (accumulator) {
    if (accumulator.getType() != gradientType)
      return op->emitOpError("accumulator must have the gradient's type ")
             << gradientType;
    if (failed(verifyWritesVariable(op, accumulator, "accumulator")))
      return failure();
  }
  return verifyScalar(op, microStep, "micro_step");
}

LogicalResult AssignOp::verify() {
  if (getValue().getType() != getTarget().getType())
    return emitOpError("value and target must have the same type");
  return verifyWritesVariable(*this, getTarget(), "target");
}

int64_t AssignOp::getFlops() { return 0; }
int64_t AssignOp::getBytesMoved() {
  return 2 * getTensorBytes(getTarget().getType());
}

/// A gradient has the parameter's shape; f16 / bf16 gradients of an f32
/// parameter are widened by the kernel.
static LogicalResult verifyGradient(Operation *op, Value grad, Value param) {
  if (cast<ShapedType>(grad.getType()).getShape() !=
      cast<ShapedType>(param.getType()).getShape())
    return op->emitOpError("grad must have the parameter's shape");
  return success();
}

/// An update's gradient: the parameter's shape in any float type, or with
/// `shards` > 1 this rank's shard (`stateType`'s shape) in f32, f16 or bf16
/// (a gradient reduce-scattered in its low type).
static LogicalResult verifyUpdateGradient(Operation *op, Value grad,
                                          Value param, Type stateType,
                                          int64_t shards) {
  if (shards <= 1)
    return verifyGradient(op, grad, param);
  if (cast<ShapedType>(grad.getType()).getShape() !=
      cast<ShapedType>(stateType).getShape())
    return op->emitOpError("grad must have type ")
           << stateType << " (this rank's shard of the parameter)";
  return success();
}

/// The loss-scaling operands of an update: the loss_scale variable and the
/// found_inf scalar come together (and, for AdamW, the loss_scale_state
/// variable whose skipped-step count the bias correction subtracts).
static LogicalResult verifyLossScaling(Operation *op, Value scale,
                                       Value foundInf, Value state,
                                       bool needsState) {
  if (!scale && !foundInf && !state)
    return success();
  if (!scale || !foundInf || (needsState && !state))
    return op->emitOpError(needsState
                               ? "loss_scale, found_inf and loss_scale_state "
                                 "come together"
                               : "loss_scale and found_inf come together");
  if (failed(verifyScalar(op, scale, "loss_scale")) ||
      failed(verifyScalar(op, foundInf, "found_inf")))
    return failure();
  auto variable = scale.getDefiningOp<VariableOp>();
  if (!variable || variable.getRole() != "loss_scale")
    return op->emitOpError("loss_scale must be the loss_scale variable");
  if (state) {
    auto stateVariable = state.getDefiningOp<VariableOp>();
    if (!stateVariable || stateVariable.getRole() != "loss_scale_state" ||
        cast<ShapedType>(state.getType()).getNumElements() != 2)
      return op->emitOpError(
          "loss_scale_state must be the [2] loss_scale_state variable");
  }
  return success();
}

/// The low gradient behind `gradient` when it is a float widening cast read
/// only by updates and the overflow check: they read the low gradient
/// itself (each kernel widens an element as it loads it; widening keeps
/// infinities and NaN), so the f32 copy is never made.
static Value getNarrowSource(Value gradient) {
  auto cast = gradient.getDefiningOp<CastOp>();
  if (!cast || !getElementTypeOrSelf(cast.getOutput().getType()).isF32() ||
      !llvm::all_of(cast->getUsers(), [](Operation *user) {
        return isa<SGDUpdateOp, AdamWUpdateOp, FoundInfOp>(user);
      }))
    return {};
  Type source = getElementTypeOrSelf(cast.getInput().getType());
  if (!source.isF16() && !source.isBF16())
    return {};
  return cast.getInput();
}

LogicalResult SGDUpdateOp::canonicalize(SGDUpdateOp op,
                                        PatternRewriter &rewriter) {
  Value narrow = getNarrowSource(op.getGrad());
  if (!narrow)
    return failure();
  rewriter.modifyOpInPlace(op, [&] { op.getGradMutable().assign(narrow); });
  return success();
}

LogicalResult AdamWUpdateOp::canonicalize(AdamWUpdateOp op,
                                          PatternRewriter &rewriter) {
  Value narrow = getNarrowSource(op.getGrad());
  if (!narrow)
    return failure();
  rewriter.modifyOpInPlace(op, [&] { op.getGradMutable().assign(narrow); });
  return success();
}

/// The host master of an offloaded update (--offload optimizer): an f32
/// variable of role `master` with the parameter's shape (the parameter
/// itself f32, or f16 / bf16: a low working copy), placed on the host
/// like the optimizer state the update writes (the gradient accumulator may
/// stay on the device: --offload-accumulators device); not with a sharded
/// update.
static LogicalResult verifyMaster(Operation *op, Value master, Value param,
                                  int64_t shards, ArrayRef<Value> state) {
  auto paramType = cast<RankedTensorType>(param.getType());
  if (!master) {
    if (!paramType.getElementType().isF32())
      return op->emitOpError("a parameter of type ")
             << paramType << " needs a host master (only an offloaded update "
             << "writes a low-precision working parameter)";
    return success();
  }
  if (shards > 1)
    return op->emitOpError("a sharded update (shards = ")
           << shards << ") cannot have a host master";
  Type masterType = paramType.clone(Float32Type::get(op->getContext()));
  if (master.getType() != masterType)
    return op->emitOpError("master must have type ")
           << masterType << " (the parameter's shape in f32)";
  auto variable = master.getDefiningOp<VariableOp>();
  if (!variable || variable.getRole() != "master")
    return op->emitOpError("master must be a variable of role 'master'");
  auto placedOnHost = [&] {
    return isHostPlaced(master) && llvm::all_of(state, [](Value value) {
             return !value || isHostPlaced(value);
           });
  };
  if (!placedOnHost())
    return op->emitOpError("the state of an update with a host master must "
                           "be placed on the host (memopt.placement = "
                           "\"host\")");
  return success();
}

LogicalResult SGDUpdateOp::verify() {
  if (failed(verifyShards(*this, getShards())))
    return failure();
  Type stateType = getStateType(getParam(), getShards());
  if (failed(verifyUpdateGradient(*this, getGrad(), getParam(), stateType,
                                  getShards())) ||
      failed(verifyLossScaling(*this, getLossScale(), getFoundInf(), Value(),
                               /*needsState=*/false)))
    return failure();
  if (failed(verifyWritesVariable(*this, getParam(), "param")) ||
      failed(verifyScalar(*this, getLr(), "lr")))
    return failure();
  if (Value buffer = getMomentumBuffer()) {
    if (buffer.getType() != stateType)
      return emitOpError("momentum buffer must have the gradient's type");
    if (failed(verifyWritesVariable(*this, buffer, "momentum buffer")))
      return failure();
  } else if (getMomentum().convertToFloat() != 0.0f) {
    return emitOpError("momentum ")
           << getMomentum().convertToFloat() << " needs a momentum buffer";
  }
  if (failed(verifyMaster(*this, getMaster(), getParam(), getShards(),
                          {getMomentumBuffer()})))
    return failure();
  return verifyAccumulation(*this, stateType, getAccumulator(), getMicroStep(),
                            getAccumulationSteps());
}

// Update costs count the gradient's elements: with `shards` a rank updates
// only its shard.
int64_t SGDUpdateOp::getFlops() {
  return 4 * getGrad().getType().getNumElements();
}
int64_t SGDUpdateOp::getBytesMoved() {
  return ((getMomentumBuffer() ? 4 : 2) + (getAccumulator() ? 2 : 0)) *
             getTensorBytes(getStateType(getParam(), getShards())) +
         getTensorBytes(getGrad().getType());
}

LogicalResult AdamWUpdateOp::verify() {
  if (failed(verifyShards(*this, getShards())))
    return failure();
  Type type = getStateType(getParam(), getShards());
  if (getExpAvg().getType() != type || getExpAvgSq().getType() != type)
    return emitOpError("exp_avg and exp_avg_sq must have type ")
           << type
           << (getShards() > 1 ? " (this rank's shard of the parameter)"
                               : " (the parameter's)");
  if (failed(verifyUpdateGradient(*this, getGrad(), getParam(), type,
                                  getShards())) ||
      failed(verifyLossScaling(*this, getLossScale(), getFoundInf(),
                               getLossScaleState(), /*needsState=*/true)))
    return failure();
  if (failed(verifyWritesVariable(*this, getParam(), "param")) ||
      failed(verifyWritesVariable(*this, getExpAvg(), "exp_avg")) ||
      failed(verifyWritesVariable(*this, getExpAvgSq(), "exp_avg_sq")) ||
      failed(verifyScalar(*this, getLr(), "lr")) ||
      failed(verifyScalar(*this, getStep(), "step")))
    return failure();
  if (failed(verifyMaster(*this, getMaster(), getParam(), getShards(),
                          {getExpAvg(), getExpAvgSq()})))
    return failure();
  return verifyAccumulation(*this, type, getAccumulator(), getMicroStep(),
                            getAccumulationSteps());
}

int64_t AdamWUpdateOp::getFlops() {
  return 12 * getGrad().getType().getNumElements();
}
int64_t AdamWUpdateOp::getBytesMoved() {
  return (6 + (getAccumulator() ? 2 : 0)) *
             getTensorBytes(getStateType(getParam(), getShards())) +
         getTensorBytes(getGrad().getType());
}

//===----------------------------------------------------------------------===//
// Data-parallel collectives
//===----------------------------------------------------------------------===//

static LogicalResult verifyReduction(Operation *op, StringRef reduction) {
  if (reduction != "sum" && reduction != "average" && reduction != "max")
    return op->emitOpError("reduction '")
           << reduction << "' is not sum, average or max";
  return success();
}

static LogicalResult verifyRanks(Operation *op, int64_t ranks) {
  if (ranks < 1)
    return op->emitOpError("ranks must be at least 1, got ") << ranks;
  return success();
}

LogicalResult AllReduceOp::verify() {
  if (getResult().getType() != getInput().getType())
    return emitOpError("result must have the input's type");
  if (failed(verifyReduction(*this, getReduction())))
    return failure();
  return verifyAccumulation(*this, getInput().getType(), getAccumulator(),
                            getMicroStep(), getAccumulationSteps());
}

// A collective's cost: the additions of the reduction, and the bytes it
// reads and writes locally (what crosses the link is the report's concern).
int64_t AllReduceOp::getFlops() {
  return getInput().getType().getNumElements();
}
int64_t AllReduceOp::getBytesMoved() {
  return (2 + (getAccumulator() ? 2 : 0)) *
         getTensorBytes(getInput().getType());
}

bool AllReduceOp::canWriteInPlace(unsigned operandIndex) {
  return operandIndex == 0;
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(verifyRanks(*this, getRanks())) ||
      failed(verifyReduction(*this, getReduction())))
    return failure();
  Type shard = RankedTensorType::get(
      {getShardElements(getInput().getType().getNumElements(), getRanks())},
      getInput().getType().getElementType());
  if (getResult().getType() != shard)
    return emitOpError("result must have type ")
           << shard << " (this rank's shard of the input over " << getRanks()
           << " ranks)";
  return verifyAccumulation(*this, getInput().getType(), getAccumulator(),
                            getMicroStep(), getAccumulationSteps());
}

int64_t ReduceScatterOp::getFlops() {
  return getInput().getType().getNumElements();
}
int64_t ReduceScatterOp::getBytesMoved() {
  return (1 + (getAccumulator() ? 2 : 0)) *
             getTensorBytes(getInput().getType()) +
         getTensorBytes(getResult().getType());
}

LogicalResult AllGatherOp::verify() {
  if (failed(verifyRanks(*this, getRanks())) ||
      failed(verifyWritesVariable(*this, getParam(), "param")))
    return failure();
  return verifyAccumulation(*this, getParam().getType(), Value(),
                            getMicroStep(), getAccumulationSteps());
}

LogicalResult GatherParameterOp::verify() {
  if (failed(verifyRanks(*this, getRanks())))
    return failure();
  auto whole = cast<RankedTensorType>(getResult().getType());
  // The shard is the f32 master's, whatever type is gathered.
  Type shard = RankedTensorType::get(
      {getShardElements(whole.getNumElements(), getRanks())},
      Float32Type::get(getContext()));
  if (getShard().getType() != shard)
    return emitOpError("shard must have type ")
           << shard << " (this rank's shard of " << whole << " over "
           << getRanks() << " ranks)";
  return success();
}

int64_t GatherParameterOp::getFlops() { return 0; }
int64_t GatherParameterOp::getBytesMoved() {
  return getTensorBytes(getShard().getType()) +
         getTensorBytes(getResult().getType());
}

int64_t AllGatherOp::getFlops() { return 0; }
int64_t AllGatherOp::getBytesMoved() {
  return getTensorBytes(getParam().getType());
}

LogicalResult WaitCollectivesOp::verify() {
  if (int64_t bucket = getBucketAttr().getInt(); bucket < 0)
    return emitOpError("bucket must be at least 0, got ") << bucket;
  if (getBuffers().empty())
    return emitOpError("waits for no buffer");
  return success();
}

// A wait moves nothing: the bucket's collectives did the work.
int64_t WaitCollectivesOp::getFlops() { return 0; }
int64_t WaitCollectivesOp::getBytesMoved() { return 0; }

//===----------------------------------------------------------------------===//
// Dynamic loss scaling
//===----------------------------------------------------------------------===//

LogicalResult FoundInfOp::verify() {
  if (getType().getNumElements() != 1)
    return emitOpError("the flag must hold one element");
  if (getAccumulators().empty() != !getMicroStep())
    return emitOpError("accumulators and micro_step come together");
  if (Value micro = getMicroStep())
    if (failed(verifyScalar(*this, micro, "micro_step")))
      return failure();
  for (Value accumulator : getAccumulators()) {
    auto variable = accumulator.getDefiningOp<VariableOp>();
    if (!variable || variable.getRole() != "gradient_accumulator")
      return emitOpError("accumulators must be gradient_accumulator "
                         "variables");
  }
  return success();
}

int64_t FoundInfOp::getFlops() {
  int64_t elements = 0;
  for (Value value : getOperands())
    elements += cast<ShapedType>(value.getType()).getNumElements();
  return elements;
}

LogicalResult FoundInfOp::canonicalize(FoundInfOp op,
                                       PatternRewriter &rewriter) {
  bool changed = false;
  for (OpOperand &operand : op.getGradientsMutable())
    if (Value narrow = getNarrowSource(operand.get())) {
      rewriter.modifyOpInPlace(op, [&] { operand.set(narrow); });
      changed = true;
    }
  return success(changed);
}

LogicalResult UpdateLossScaleOp::verify() {
  if (failed(verifyScalar(*this, getFoundInf(), "found_inf")) ||
      failed(verifyLossScaling(*this, getLossScale(), getFoundInf(), getState(),
                               /*needsState=*/true)))
    return failure();
  int64_t steps = getAccumulationSteps();
  if ((steps > 1) != bool(getMicroStep()))
    return emitOpError("micro_step comes with accumulation_steps > 1");
  if (getMicroStep() &&
      failed(verifyScalar(*this, getMicroStep(), "micro_step")))
    return failure();
  float growth = getGrowthFactor().convertToFloat();
  float backoff = getBackoffFactor().convertToFloat();
  if (!(growth >= 1.0f) || !(backoff > 0.0f && backoff <= 1.0f) ||
      getGrowthInterval() < 1)
    return emitOpError("needs growth_factor >= 1, backoff_factor in (0, 1] "
                       "and growth_interval >= 1");
  return success();
}

int64_t UpdateLossScaleOp::getFlops() { return 4; }
int64_t UpdateLossScaleOp::getBytesMoved() { return 24; }

//===----------------------------------------------------------------------===//
// Training-mode normalization
//===----------------------------------------------------------------------===//

static bool isF32Tensor(Value value) {
  return getElementTypeOrSelf(value.getType()).isF32();
}

/// Checks `values` hold `count` f32 elements each.
static LogicalResult verifyPerChannel(Operation *op, ArrayRef<Value> values,
                                      int64_t count, StringRef what) {
  for (Value value : values)
    if (!isF32Tensor(value) ||
        cast<ShapedType>(value.getType()).getNumElements() != count)
      return op->emitOpError()
             << what << " must be f32 tensors of " << count << " elements";
  return success();
}

/// The channel axis of `x`: 1, or the last with `channels_last`.
static int64_t channelAxis(Value x, bool channelsLast) {
  return channelsLast ? cast<ShapedType>(x.getType()).getRank() - 1 : 1;
}

/// The channel count of `x` ([N, C, ...] of f32, f16 or bf16, or [N, ...,
/// C] with `channels_last`), or failure.
static FailureOr<int64_t> channelsOf(Operation *op, Value x,
                                     bool channelsLast) {
  auto type = cast<ShapedType>(x.getType());
  Type element = type.getElementType();
  if (type.getRank() < 2 ||
      !(element.isF32() || element.isF16() || element.isBF16()))
    return op->emitOpError("X must be an f32, f16 or bf16 tensor [N, C, ...]");
  return type.getDimSize(channelAxis(x, channelsLast));
}

LogicalResult BatchNormTrainingOp::verify() {
  FailureOr<int64_t> channels = channelsOf(*this, getX(), getChannelsLast());
  if (failed(channels))
    return failure();
  if (getY().getType() != getX().getType())
    return emitOpError("Y must have X's type");
  if (getActivation() != "none" && getActivation() != "relu")
    return emitOpError("activation '")
           << getActivation() << "' is not none or relu";
  if (getZ() && getZ().getType() != getY().getType())
    return emitOpError("residual Z must have Y's type");
  return verifyPerChannel(*this, {getScale(), getB(), getMean(), getInvStd()},
                          *channels, "scale, B, mean and inv_std");
}

int64_t BatchNormTrainingOp::getFlops() {
  // The residual: one add per element.
  return (getZ() ? 7 : 6) * getX().getType().getNumElements();
}

/// workspace::kNormalizationSplits splits of per-channel partial
/// sums.
/// Channels-last: more splits, over rows of C (Workspace.h).
static int64_t batchNormWorkspace(Value x, bool channelsLast) {
  auto type = cast<ShapedType>(x.getType());
  int64_t channels = type.getDimSize(channelAxis(x, channelsLast));
  if (!channelsLast)
    return ::memopt::workspace::batchNormTrainingBytes(channels);
  return ::memopt::workspace::batchNormTrainingLastBytes(
      channels, channels ? type.getNumElements() / channels : 0);
}

int64_t BatchNormTrainingOp::getWorkspaceBytes() {
  return batchNormWorkspace(getX(), getChannelsLast());
}

bool BatchNormTrainingOp::canWriteInPlace(unsigned operandIndex) {
  // X, or the residual Z (operand 3): both are read elementwise at Y's index.
  return operandIndex == 0 || (getZ() && operandIndex == 3);
}

LogicalResult BatchNormTrainingGradOp::verify() {
  FailureOr<int64_t> channels = channelsOf(*this, getX(), getChannelsLast());
  if (failed(channels))
    return failure();
  if (getDY().getType() != getX().getType() ||
      getDX().getType() != getX().getType())
    return emitOpError("dY and dX must have X's type");
  return verifyPerChannel(
      *this, {getScale(), getMean(), getInvStd(), getDscale(), getDB()},
      *channels, "scale, mean, inv_std, dscale and dB");
}

int64_t BatchNormTrainingGradOp::getFlops() {
  return 8 * getX().getType().getNumElements();
}

int64_t BatchNormTrainingGradOp::getWorkspaceBytes() {
  return batchNormWorkspace(getX(), getChannelsLast());
}

bool BatchNormTrainingGradOp::canWriteInPlace(unsigned operandIndex) {
  return operandIndex == 1;
}

//===----------------------------------------------------------------------===//
// The fused normalization -> ReLU -> convolution (memopt-fuse-norm-conv)
//===----------------------------------------------------------------------===//

LogicalResult BatchNormStatsOp::verify() {
  FailureOr<int64_t> channels = channelsOf(*this, getX(), getChannelsLast());
  if (failed(channels))
    return failure();
  return verifyPerChannel(*this,
                          {getScale(), getB(), getMean(), getInvStd(),
                           getAppliedScale(), getAppliedBias()},
                          *channels,
                          "scale, B, mean, inv_std, applied_scale and "
                          "applied_bias");
}

int64_t BatchNormStatsOp::getFlops() {
  return 3 * getX().getType().getNumElements();
}

int64_t BatchNormStatsOp::getWorkspaceBytes() {
  return batchNormWorkspace(getX(), getChannelsLast());
}

LogicalResult NormReluApplyOp::verify() {
  FailureOr<int64_t> channels = channelsOf(*this, getX(), getChannelsLast());
  if (failed(channels))
    return failure();
  if (getR().getType() != getX().getType())
    return emitOpError("R must have X's type");
  return verifyPerChannel(*this, {getScale(), getBias()}, *channels,
                          "scale and bias");
}

int64_t NormReluApplyOp::getFlops() {
  return 2 * getX().getType().getNumElements();
}

/// Checks a norm_relu_conv (`filterGradient` false: X, W -> Y) or its filter
/// gradient (true: X, dY -> dW): the convolution's shapes on channels-first
/// views, one element type, and per-channel `scale` / `bias` over X's
/// channels.
static LogicalResult
verifyNormReluConv(Operation *op, Value x, Value second, Value result,
                   Value scale, Value bias, ArrayRef<int64_t> kernel,
                   ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                   ArrayRef<int64_t> dilations, int64_t group,
                   bool channelsLast, bool filterGradient) {
  FailureOr<int64_t> channels = channelsOf(op, x, channelsLast);
  if (failed(channels))
    return failure();
  if (failed(verifyPerChannel(op, {scale, bias}, *channels, "scale and bias")))
    return failure();
  auto xType = cast<RankedTensorType>(x.getType());
  auto wType =
      cast<RankedTensorType>((filterGradient ? result : second).getType());
  auto yType =
      cast<RankedTensorType>((filterGradient ? second : result).getType());
  if (xType.getElementType() != wType.getElementType() ||
      xType.getElementType() != yType.getElementType())
    return op->emitOpError("X, the filter and the output must share one "
                           "element type");
  if (channelsLast) {
    xType = mlir::memopt::impl::channelsFirstView(xType);
    wType = mlir::memopt::impl::channelsFirstView(wType);
    yType = mlir::memopt::impl::channelsFirstView(yType);
  }
  int64_t spatialRank = xType.getRank() - 2;
  if (spatialRank < 1 || spatialRank > 3 ||
      wType.getRank() != xType.getRank() || yType.getRank() != xType.getRank())
    return op->emitOpError("X, the filter and the output must have the same "
                           "rank, 3 to 5");
  if (int64_t(kernel.size()) != spatialRank ||
      int64_t(strides.size()) != spatialRank ||
      int64_t(dilations.size()) != spatialRank ||
      int64_t(pads.size()) != 2 * spatialRank)
    return op->emitOpError("kernel_shape, strides, dilations need one value "
                           "and pads two values per spatial axis");
  if (group < 1 || xType.getDimSize(1) % group != 0 ||
      wType.getDimSize(0) % group != 0)
    return op->emitOpError("group ")
           << group << " does not divide the " << xType.getDimSize(1)
           << " input channels";
  bool formsConv = yType.getDimSize(0) == xType.getDimSize(0) &&
                   yType.getDimSize(1) == wType.getDimSize(0) &&
                   wType.getDimSize(1) == xType.getDimSize(1) / group &&
                   wType.getShape().drop_front(2) == kernel;
  for (int64_t axis = 0; formsConv && axis < spatialRank; ++axis) {
    if (strides[axis] < 1 || dilations[axis] < 1)
      return op->emitOpError("strides and dilations must be positive");
    int64_t span = xType.getDimSize(2 + axis) + pads[axis] +
                   pads[spatialRank + axis] -
                   dilations[axis] * (kernel[axis] - 1) - 1;
    formsConv =
        span >= 0 && yType.getDimSize(2 + axis) == span / strides[axis] + 1;
  }
  if (!formsConv)
    return op->emitOpError("shapes X [")
           << xType.getShape() << "], W [" << wType.getShape() << "], Y ["
           << yType.getShape()
           << "] (channels-first) do not form a convolution";
  return success();
}

/// The workspace of a norm_relu_conv or its filter gradient: the normalized
/// input R (the fallback's: the runtime writes R there and runs the plain
/// convolution) and a convolution's.
static int64_t normReluConvWorkspace(Operation *op) {
  return ::memopt::workspace::normReluConvTempBytes(
             getTensorBytes(op->getOperand(0).getType())) +
         mlir::memopt::detail::convWorkspaceBytes(op);
}

/// Promised: R and up to the planner's usual floor for the convolution.
static int64_t normReluConvWorkspaceFloor(Operation *op) {
  int64_t conv = mlir::memopt::detail::convWorkspaceBytes(op);
  return ::memopt::workspace::normReluConvTempBytes(
             getTensorBytes(op->getOperand(0).getType())) +
         std::min<int64_t>(conv, int64_t(1) << 20);
}

LogicalResult NormReluConvOp::verify() {
  if (failed(verifyNormReluConv(*this, getX(), getW(), getY(), getScale(),
                                getBias(), getKernelShape(), getStrides(),
                                getPads(), getDilations(), getGroup(),
                                getChannelsLast(), /*filterGradient=*/false)))
    return failure();
  if (Value b = getB()) {
    auto type = cast<ShapedType>(b.getType());
    int64_t outChannels = cast<ShapedType>(getW().getType()).getDimSize(0);
    if (type.getRank() != 1 || type.getDimSize(0) != outChannels ||
        type.getElementType() != getX().getType().getElementType())
      return emitOpError("B must be a [")
             << outChannels << "] tensor of X's element type";
  }
  return success();
}

/// A convolution's multiply-adds (the output's elements times a filter
/// row's) and the prologue's two per input element.
static int64_t normReluConvFlops(Value x, Value out, Value filter) {
  ShapedType o = cast<ShapedType>(out.getType()),
             w = cast<ShapedType>(filter.getType());
  return 2 * o.getNumElements() *
             ShapedType::getNumElements(w.getShape().drop_front(1)) +
         2 * cast<ShapedType>(x.getType()).getNumElements();
}

int64_t NormReluConvOp::getFlops() {
  return normReluConvFlops(getX(), getY(), getW());
}

int64_t NormReluConvOp::getWorkspaceBytes() {
  return normReluConvWorkspace(*this);
}

int64_t NormReluConvOp::getWorkspaceFloor() {
  return normReluConvWorkspaceFloor(*this);
}

LogicalResult NormReluConvBackwardFilterOp::verify() {
  return verifyNormReluConv(*this, getX(), getDY(), getDW(), getScale(),
                            getBias(), getKernelShape(), getStrides(),
                            getPads(), getDilations(), getGroup(),
                            getChannelsLast(), /*filterGradient=*/true);
}

int64_t NormReluConvBackwardFilterOp::getFlops() {
  return normReluConvFlops(getX(), getDY(), getDW());
}

int64_t NormReluConvBackwardFilterOp::getWorkspaceBytes() {
  return normReluConvWorkspace(*this);
}

int64_t NormReluConvBackwardFilterOp::getWorkspaceFloor() {
  return normReluConvWorkspaceFloor(*this);
}

LogicalResult BatchNormReluGradOp::verify() {
  FailureOr<int64_t> channels = channelsOf(*this, getX(), getChannelsLast());
  if (failed(channels))
    return failure();
  if (getDY().getType() != getX().getType() ||
      getDX().getType() != getX().getType())
    return emitOpError("dY and dX must have X's type");
  return verifyPerChannel(*this,
                          {getScale(), getMean(), getInvStd(),
                           getAppliedScale(), getAppliedBias(), getDscale(),
                           getDB()},
                          *channels,
                          "scale, mean, inv_std, applied_scale, "
                          "applied_bias, dscale and dB");
}

int64_t BatchNormReluGradOp::getFlops() {
  return 10 * getX().getType().getNumElements();
}

int64_t BatchNormReluGradOp::getWorkspaceBytes() {
  return batchNormWorkspace(getX(), getChannelsLast());
}

bool BatchNormReluGradOp::canWriteInPlace(unsigned operandIndex) {
  return operandIndex == 1;
}

LogicalResult BatchNormAddReluGradOp::verify() {
  FailureOr<int64_t> channels = channelsOf(*this, getX(), getChannelsLast());
  if (failed(channels))
    return failure();
  Type type = getX().getType();
  if (getDY().getType() != type || getY().getType() != type ||
      getDX().getType() != type || getDZ().getType() != type)
    return emitOpError("dY, Y, dX and dZ must have X's type");
  return verifyPerChannel(
      *this, {getScale(), getMean(), getInvStd(), getDscale(), getDB()},
      *channels, "scale, mean, inv_std, dscale and dB");
}

int64_t BatchNormAddReluGradOp::getFlops() {
  // batch_norm_training_grad's, and the mask.
  return 9 * getX().getType().getNumElements();
}

int64_t BatchNormAddReluGradOp::getWorkspaceBytes() {
  return batchNormWorkspace(getX(), getChannelsLast());
}

bool BatchNormAddReluGradOp::canWriteInPlace(unsigned operandIndex) {
  // dX after dY's last read (the first pass); never dZ's storage.
  return operandIndex == 1;
}

LogicalResult BatchNormRunningUpdateOp::verify() {
  int64_t channels = getMean().getType().getNumElements();
  if (getInvStd().getType() != getMean().getType() ||
      getRunningMean().getType().getNumElements() != channels ||
      getRunningVar().getType().getNumElements() != channels)
    return emitOpError("mean, inv_std and the running statistics must hold "
                       "the same number of channels");
  return failure(
      failed(verifyWritesVariable(*this, getRunningMean(), "running_mean")) ||
      failed(verifyWritesVariable(*this, getRunningVar(), "running_var")));
}

int64_t BatchNormRunningUpdateOp::getFlops() {
  return 6 * getMean().getType().getNumElements();
}
int64_t BatchNormRunningUpdateOp::getBytesMoved() {
  return 6 * getTensorBytes(getMean().getType());
}

/// Rows and columns of a layer normalization over [axis, rank) of `x`.
static std::pair<int64_t, int64_t> layerNormRowsAndColumns(ShapedType x,
                                                           int64_t axis) {
  if (axis < 0)
    axis += x.getRank();
  int64_t cols = ShapedType::getNumElements(x.getShape().drop_front(axis));
  return {cols ? x.getNumElements() / cols : 0, cols};
}

LogicalResult LayerNormalizationGradOp::verify() {
  auto x = cast<ShapedType>(getX().getType());
  int64_t axis = getAxis();
  if (axis < -x.getRank() || axis >= x.getRank())
    return emitOpError("axis ") << axis << " is outside the rank of X";
  Type element = getElementTypeOrSelf(getX().getType());
  if (!(element.isF32() || element.isF16() || element.isBF16()) ||
      getDY().getType() != getX().getType() ||
      getDX().getType() != getX().getType())
    return emitOpError("X, dY and dX must be f32, f16 or bf16 tensors of one "
                       "type");
  int64_t cols = layerNormRowsAndColumns(x, axis).second;
  if (getDScale().getType() != getScale().getType() ||
      getDB().getType() != getScale().getType())
    return emitOpError("dScale and dB must have Scale's type");
  return verifyPerChannel(*this, {getScale()}, cols, "Scale");
}

int64_t LayerNormalizationGradOp::getFlops() {
  return 10 * getX().getType().getNumElements();
}

int64_t LayerNormalizationGradOp::getWorkspaceBytes() {
  auto [rows, cols] = layerNormRowsAndColumns(getX().getType(), getAxis());
  // The row statistics, then two columns of partial sums per split (the
  // runtime's layout).
  return ::memopt::workspace::layerNormGradBytes(rows, cols);
}

bool SoftmaxCrossEntropyGradOp::canWriteInPlace(unsigned operandIndex) {
  return operandIndex == 0;
}
