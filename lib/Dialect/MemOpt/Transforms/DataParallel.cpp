//===- DataParallel.cpp - one rank's step of data-parallel training -------===//
//
// memopt-data-parallel turns a training step (memopt-autodiff's output) into
// the step one of N ranks runs on its own micro-batch: gradients are
// averaged over the ranks before their updates, and with sharding each rank
// keeps and updates only its 1/N of every parameter's optimizer state
// (docs/data-parallel.md).
//
// Taken from:
//  - PyTorch DDP (torch/csrc/distributed/c10d/reducer.cpp): the gradient
//    all-reduce launched as soon as a gradient is ready during the backward,
//    averaged over the world size; `no_sync()` for gradient accumulation
//    (communicate on the last micro-batch only); per-rank BatchNorm
//    statistics without SyncBatchNorm. DDP's buckets are
//    memopt-bucket-collectives' (BucketCollectives.cpp), after scheduling.
//  - DeepSpeed ZeRO stages 1 and 2 (Rajbhandari et al., SC'20;
//    deepspeed/runtime/zero/stage_1_and_2.py): each rank owns 1/N of the
//    optimizer state and updates 1/N of the parameters, then the
//    parameters are all-gathered; ZeRO-1 reduces the accumulated gradient
//    at the accumulation boundary, ZeRO-2 reduce-scatters every micro-batch
//    into partitioned gradients. Communication volume equals DDP's
//    all-reduce (reduce-scatter + all-gather).
//  - FSDP (SHARD_GRAD_OP is ZeRO-2): shards are even splits so that
//    reduce-scatter and all-gather are NCCL's in place. FSDP pads its flat
//    parameter to a multiple of N; we split every parameter into N equal
//    chunks plus a tail of E % N elements that every rank owns (the tail
//    gradient is all-reduced, so all ranks update it identically): no
//    padding, no flat copy, the parameters keep their own variables.
//  - Mixed precision (PyTorch DDP + AMP, DeepSpeed's fp16 optimizers,
//    FSDP's ShardedGradScaler): the f16 / bf16 gradients of the f32 master
//    parameters are widened and reduced in f32 by default (DDP reduces the
//    f32 .grad of the f32 parameters autocast trains), or reduced in their
//    low type with reduce-dtype=low (half the bytes; DeepSpeed's fp16 engine
//    and FSDP's MixedPrecision(reduce_dtype=...) do). With dynamic loss
//    scaling each rank's overflow flag (memopt.found_inf over its own
//    gradients) is all-reduced with max before any update or the scale
//    update reads it: every rank skips the same steps and keeps the same
//    scale, as DeepSpeed's CheckOverflow (all_reduce MAX over the
//    data-parallel group) and FSDP's ShardedGradScaler (an all_reduce sum
//    of found_inf: non-zero skips) make them.
// Further than DDP and ZeRO: the collective sits right where the gradient
// is complete and the update right after it, so the scheduler and the
// planner see the collective's buffers (in-place all-reduce: none;
// reduce-scatter: a 1/N shard) like any other and the gradient still dies at
// its update. memopt-bucket-collectives later groups the collectives into
// buckets that overlap the backward on a communication stream.
// shard=parameters (ZeRO-3, FSDP's FULL_SHARD) shards the parameters too:
// ShardParameters.cpp.
//
//===----------------------------------------------------------------------===//

#include "ShardParameters.h"

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::memopt {
#define GEN_PASS_DEF_MEMOPTDATAPARALLEL
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"
} // namespace mlir::memopt

using namespace mlir;
using namespace mlir::memopt;

namespace {

struct DataParallelPass
    : public mlir::memopt::impl::MemOptDataParallelBase<DataParallelPass> {
  using MemOptDataParallelBase::MemOptDataParallelBase;

  void runOnOperation() override;

private:
  LogicalResult rewriteUpdate(Operation *update);
  /// Replaces the state variable `value` (used by one update and, for an
  /// accumulator, the overflow check) by a variable of the same name and
  /// role with this rank's shard type.
  FailureOr<Value> shardVariable(Operation *update, Value value,
                                 RankedTensorType type);
  /// Dynamic loss scaling: every rank's overflow flag all-reduced with max
  /// before anything reads it.
  void agreeOnOverflow(func::FuncOp function);

  int64_t allReduces = 0, reduceScatters = 0, allGathers = 0, widened = 0,
          lowReduced = 0, flagReduces = 0;
  int64_t stateBytes = 0, unshardedStateBytes = 0;
  /// shard=parameters: the forward ops, and what sharding the parameters
  /// did.
  llvm::DenseSet<Operation *> forward;
  ParameterSharding parameters;
};

FailureOr<Value> DataParallelPass::shardVariable(Operation *update, Value value,
                                                 RankedTensorType type) {
  auto variable = value.getDefiningOp<VariableOp>();
  if (!variable || llvm::any_of(variable->getUsers(), [&](Operation *user) {
        return user != update && !isa<FoundInfOp>(user);
      }))
    return update->emitError()
           << describeNode(update)
           << ": memopt-data-parallel shards optimizer state that only "
              "its update uses";
  if (variable.getInitialValueAttr())
    return variable.emitError()
           << "optimizer state '" << variable.getName()
           << "' has an initial value; sharded state starts at zero";
  OpBuilder builder(variable);
  auto sharded = VariableOp::create(builder, variable.getLoc(), type,
                                    variable.getNameAttr(),
                                    variable.getRoleAttr(), ElementsAttr());
  variable.getValue().replaceAllUsesWith(sharded.getValue());
  variable.erase();
  return sharded.getValue();
}

LogicalResult DataParallelPass::rewriteUpdate(Operation *op) {
  auto sgd = dyn_cast<SGDUpdateOp>(op);
  auto adamw = dyn_cast<AdamWUpdateOp>(op);
  Value param = sgd ? sgd.getParam() : adamw.getParam();
  Value grad = sgd ? sgd.getGrad() : adamw.getGrad();
  Value accumulator = sgd ? sgd.getAccumulator() : adamw.getAccumulator();
  Value microStep = sgd ? sgd.getMicroStep() : adamw.getMicroStep();
  int64_t steps =
      sgd ? sgd.getAccumulationSteps() : adamw.getAccumulationSteps();
  MutableOperandRange gradRange =
      sgd ? sgd.getGradMutable() : adamw.getGradMutable();
  MutableOperandRange accumulatorRange =
      sgd ? sgd.getAccumulatorMutable() : adamw.getAccumulatorMutable();
  SmallVector<OpOperand *> states;
  if (sgd && sgd.getMomentumBuffer())
    states.push_back(&sgd.getMomentumBufferMutable()[0]);
  if (adamw) {
    states.push_back(&adamw.getExpAvgMutable());
    states.push_back(&adamw.getExpAvgSqMutable());
  }
  int64_t shards = sgd ? sgd.getShards() : adamw.getShards();
  if (shards != 1)
    return op->emitError() << describeNode(op)
                           << " is sharded already: run memopt-data-parallel "
                              "once";

  OpBuilder builder(op);
  Location loc = op->getLoc();
  IntegerAttr stepsAttr = builder.getI64IntegerAttr(steps);
  // Mixed precision: an f16 / bf16 gradient is reduced in f32 (widened
  // first) or, with reduce-dtype=low, in its own type. The collective that
  // reduces an f32 accumulator (none / optimizer with accumulation) reduces
  // f32 whatever the option says, so low is refused there.
  Type gradElement = getElementTypeOrSelf(grad.getType());
  if (gradElement.isF16() || gradElement.isBF16()) {
    bool reducesAccumulator =
        accumulator && shard != "gradients" && shard != "parameters";
    if (reduceDtype == "low" && reducesAccumulator)
      return op->emitError()
             << describeNode(op)
             << ": reduce-dtype low cannot reduce the f32 gradient "
                "accumulator of shard "
             << shard
             << " (--accumulate): use reduce-dtype f32 or shard gradients";
    if (reduceDtype != "low") {
      auto wide =
          cast<RankedTensorType>(grad.getType()).clone(builder.getF32Type());
      grad = CastOp::create(builder, loc, wide, grad).getResult();
      ++widened;
    } else {
      ++lowReduced;
    }
  }
  StringAttr average = builder.getStringAttr("average");
  for (OpOperand *state : states)
    unshardedStateBytes += getTensorBytes(state->get().getType());
  if (shard == "none") {
    // DDP: average the gradient (the accumulated one on the last
    // micro-step) in place, then the unchanged update.
    auto reduce =
        AllReduceOp::create(builder, loc, grad.getType(), grad, accumulator,
                            microStep, average, stepsAttr);
    gradRange.assign(reduce.getResult());
    if (accumulator)
      accumulatorRange.clear();
    for (OpOperand *state : states)
      stateBytes += getTensorBytes(state->get().getType());
    ++allReduces;
    return success();
  }

  auto paramType = cast<RankedTensorType>(param.getType());
  auto shardType = RankedTensorType::get(
      {getShardElements(paramType.getNumElements(), ranks)},
      paramType.getElementType());
  // The reduced gradient's shard keeps the type it is reduced in.
  auto gradShardType = shardType.clone(getElementTypeOrSelf(grad.getType()));
  IntegerAttr ranksAttr = builder.getI64IntegerAttr(ranks);
  // ZeRO-2 and ZeRO-3 reduce-scatter every micro-batch's gradient into a
  // sharded accumulator; ZeRO-1 accumulates whole gradients locally and
  // reduce-scatters their sum on the last micro-step.
  bool shardGradients = shard == "gradients" || shard == "parameters";
  auto scatter = ReduceScatterOp::create(
      builder, loc, gradShardType, grad, shardGradients ? Value() : accumulator,
      shardGradients ? Value() : microStep, ranksAttr, average,
      builder.getI64IntegerAttr(shardGradients ? 1 : steps));
  gradRange.assign(scatter.getResult());
  for (OpOperand *state : states) {
    FailureOr<Value> sharded = shardVariable(op, state->get(), shardType);
    if (failed(sharded))
      return failure();
    state->set(*sharded);
    stateBytes += getTensorBytes(shardType);
  }
  if (accumulator) {
    if (shardGradients) {
      FailureOr<Value> sharded = shardVariable(op, accumulator, shardType);
      if (failed(sharded))
        return failure();
      accumulatorRange.assign(*sharded);
    } else {
      accumulatorRange.clear();
    }
  }
  ++reduceScatters;
  // ZeRO-3: the parameter is a shard too, so the update is a plain one of
  // shard-shaped tensors and nothing is gathered after it.
  if (shard == "parameters")
    return shardParameter(op, param, ranks, forward, parameters);
  op->setAttr("shards", ranksAttr);
  builder.setInsertionPointAfter(op);
  AllGatherOp::create(builder, loc, param, microStep, ranksAttr, stepsAttr);
  ++allGathers;
  return success();
}

void DataParallelPass::agreeOnOverflow(func::FuncOp function) {
  SmallVector<FoundInfOp> checks;
  function.walk([&](FoundInfOp check) { checks.push_back(check); });
  for (FoundInfOp check : checks) {
    // With accumulation the flag matters on the last micro-step only (the
    // updates and the scale update act there): communicate once per
    // optimizer step, as the gradients do.
    int64_t steps = 1;
    for (Operation *user : check->getUsers())
      if (auto update = dyn_cast<UpdateLossScaleOp>(user))
        steps = update.getAccumulationSteps();
    Value microStep = steps > 1 ? check.getMicroStep() : Value();
    OpBuilder builder(check->getContext());
    builder.setInsertionPointAfter(check);
    auto reduce = AllReduceOp::create(
        builder, check.getLoc(), check.getType(), check.getFound(), Value(),
        microStep, builder.getStringAttr("max"),
        builder.getI64IntegerAttr(microStep ? steps : 1));
    check.getFound().replaceAllUsesExcept(reduce.getResult(), reduce);
    ++flagReduces;
  }
}

void DataParallelPass::runOnOperation() {
  func::FuncOp function = getOperation();
  if (function.isExternal())
    return;
  if (ranks < 1) {
    function.emitError("data-parallel ranks must be at least 1, got ")
        << int64_t(ranks);
    return signalPassFailure();
  }
  if (shard != "none" && shard != "optimizer" && shard != "gradients" &&
      shard != "parameters") {
    function.emitError("shard '")
        << shard << "' is not one of none, optimizer, gradients, parameters";
    return signalPassFailure();
  }
  if (reduceDtype != "f32" && reduceDtype != "low") {
    function.emitError("reduce-dtype '")
        << reduceDtype << "' is not one of f32, low";
    return signalPassFailure();
  }
  // One rank owns every element: a shard is the whole parameter, so ZeRO
  // degenerates to the all-reduce (a copy over one rank), as DeepSpeed's
  // ZeRO runs unsharded on a world of one.
  if (ranks == 1 && shard != "none") {
    if (report)
      llvm::outs() << "memopt-data-parallel: shard " << shard
                   << " over 1 rank is shard none\n";
    shard = "none";
  }
  bool collectives = false;
  SmallVector<Operation *> updates;
  function.walk([&](Operation *op) {
    if (isa<SGDUpdateOp, AdamWUpdateOp>(op))
      updates.push_back(op);
    collectives |= isa<AllReduceOp, ReduceScatterOp, AllGatherOp>(op);
  });
  if (collectives || function->hasAttr("memopt.data_parallel")) {
    function.emitError("the function is data-parallel already: run "
                       "memopt-data-parallel once");
    return signalPassFailure();
  }
  if (updates.empty()) {
    function.emitError("memopt-data-parallel needs a training step with "
                       "optimizer updates (run memopt-autodiff first)");
    return signalPassFailure();
  }
  if (shard == "parameters")
    forward = getForwardOps(function);
  for (Operation *update : updates)
    if (failed(rewriteUpdate(update)))
      return signalPassFailure();
  agreeOnOverflow(function);
  Builder builder(&getContext());
  SmallVector<NamedAttribute> attributes = {
      builder.getNamedAttr("ranks", builder.getI64IntegerAttr(ranks)),
      builder.getNamedAttr("shard", builder.getStringAttr(shard))};
  // The type low-precision gradients are reduced in (f32 steps have none).
  if (widened || lowReduced)
    attributes.push_back(builder.getNamedAttr(
        "reduce_dtype", builder.getStringAttr(reduceDtype)));
  function->setAttr("memopt.data_parallel",
                    builder.getDictionaryAttr(attributes));
  if (report) {
    llvm::outs() << "memopt-data-parallel: " << ranks << " ranks, shard "
                 << shard;
    if (shard == "none")
      llvm::outs() << ": " << allReduces << " gradient all-reduces";
    else if (shard == "parameters")
      llvm::outs() << " (ZeRO-3): " << reduceScatters
                   << " gradient reduce-scatters, " << parameters.gathers
                   << " parameter gathers"
                   << (parameters.lowGathers
                           ? " (" + std::to_string(parameters.lowGathers) +
                                 " of the low copy)"
                           : std::string())
                   << " of " << parameters.parameters
                   << " sharded parameters; parameters per rank "
                   << parameters.shardBytes << " of " << parameters.wholeBytes
                   << " bytes";
    else
      llvm::outs() << " (ZeRO-" << (shard == "optimizer" ? 1 : 2)
                   << "): " << reduceScatters << " gradient reduce-scatters, "
                   << allGathers << " parameter all-gathers";
    if (widened)
      llvm::outs() << "; " << widened
                   << " low-precision gradients reduced in f32";
    if (lowReduced)
      llvm::outs() << "; " << lowReduced
                   << " gradients reduced in their low type";
    if (flagReduces)
      llvm::outs() << "; overflow flag all-reduced (max) before the updates";
    llvm::outs() << "; optimizer state per rank " << stateBytes << " of "
                 << unshardedStateBytes << " bytes\n";
  }
}

} // namespace
