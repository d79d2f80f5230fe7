//===- EmitTraining.cpp - losses, gradients, optimizer updates ------------===//
//
// The training family of the program emitter (EmitProgramInternal.h):
// the losses (softmax cross-entropy, the fused linear head + loss) and
// their gradients, the backward kernels (attention, convolution filter,
// pooling, batch / layer normalization), dropout, assign, the optimizer
// updates (SGD, AdamW: plain, gated on a micro-step for gradient
// accumulation, sharded across ranks, or offloaded to a host master) and
// dynamic loss scaling (found_inf, update_loss_scale).
//
// Taken from: DeepSpeed's ZeRO (a rank updates its chunk of each
// parameter; offloaded updates run on the host's fp32 master) and
// PyTorch's GradScaler (found-inf check, growth / backoff of the scale).
// Different: both are straight-line calls into a pre-planned arena, with
// the accumulation and scaling passed as small structs.
//
//===----------------------------------------------------------------------===//

#include "EmitProgramInternal.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::emit_program;

std::optional<LogicalResult>
ProgramEmitter::emitTrainingOp(Operation *op, const std::string &node) {
  // The fused head + loss and its gradient: params, then every operand and
  // every result in order (the runtime's signatures), then the workspace.
  auto headCall = [&](StringRef function,
                      int64_t ignoreIndex) -> LogicalResult {
    FailureOr<std::string> workspace = workspaceArguments(op);
    if (failed(workspace))
      return failure();
    os << "  {\n    LinearCrossEntropyParams params;\n"
       << "    params.ignoreIndex = int64_t(" << ignoreIndex << ");\n";
    emitTf32(op);
    os << "    " << function << "(ctx, " << node << ", params";
    for (Value value : op->getOperands())
      os << ", " << ref(value);
    for (Value value : op->getResults())
      os << ", " << ref(value);
    os << ", " << *workspace << ");\n  }\n";
    return success();
  };
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](AttentionGradOp grad) -> LogicalResult {
        FailureOr<std::string> workspace = workspaceArguments(op);
        if (failed(workspace))
          return failure();
        os << "  {\n    AttentionParams params;\n    params.scale = "
           << cppFloat(toDouble(grad.getScale()))
           << ";\n    params.causal = " << (grad.getCausal() ? "true" : "false")
           << ";\n    params.keyTransposed = "
           << (grad.getKeyTransposed() ? "true" : "false")
           << ";\n    params.safeSoftmax = "
           << (grad.getSafeSoftmax() ? "true" : "false") << ";\n";
        if (grad.getGroupedGradients())
          os << "    params.groupedGradients = true;\n";
        emitAttentionDropout(grad.getDropoutRatio().convertToFloat(),
                             grad.getDropoutStream(), grad.getDropoutKey(),
                             grad.getDropoutCudnnRng());
        emitTf32(op);
        if (grad.getDbias())
          os << "    TensorRef dbias = " << ref(grad.getDbias()) << ";\n";
        os << "    attentionBackward(ctx, " << node << ", params, "
           << ref(grad.getQ()) << ", " << ref(grad.getK()) << ", "
           << ref(grad.getV()) << ", "
           << (grad.getBias() ? "&" + ref(grad.getBias())
                              : std::string("nullptr"))
           << ", " << ref(grad.getO()) << ", " << ref(grad.getDO()) << ", "
           << ref(grad.getLse()) << ", " << ref(grad.getDQ()) << ", "
           << ref(grad.getDK()) << ", " << ref(grad.getDV()) << ", "
           << (grad.getDbias() ? "&dbias" : "nullptr") << ", " << *workspace
           << ");\n  }\n";
        return success();
      })
      .Case([&](SoftmaxCrossEntropyOp loss) {
        os << "  softmaxCrossEntropy(ctx, " << node << ", "
           << "int64_t(" << int64_t(loss.getIgnoreIndex()) << "), "
           << rowsByClasses(loss.getLogits()) << ", "
           << rowsOf(loss.getLabels(), loss.getLogits()) << ", "
           << ref(loss.getLoss()) << ");\n";
        return success();
      })
      .Case([&](SoftmaxCrossEntropyGradOp grad) {
        os << "  softmaxCrossEntropyGrad(ctx, " << node << ", "
           << "int64_t(" << int64_t(grad.getIgnoreIndex()) << "), "
           << rowsByClasses(grad.getLogits()) << ", "
           << rowsOf(grad.getLabels(), grad.getLogits()) << ", "
           << ref(grad.getDloss()) << ", " << rowsByClasses(grad.getDlogits())
           << ");\n";
        return success();
      })
      .Case([&](LinearCrossEntropyOp head) {
        return headCall("linearCrossEntropy", head.getIgnoreIndex());
      })
      .Case([&](LinearCrossEntropyGradOp grad) {
        return headCall("linearCrossEntropyGrad", grad.getIgnoreIndex());
      })
      .Case([&](ConvBackwardFilterOp grad) {
        return emitConv(op, grad.getKernelShape(), grad.getStrides(),
                        grad.getPads(), grad.getDilations(), grad.getGroup(),
                        {}, Value(), "convBackwardFilter", "none",
                        grad.getChannelsLast());
      })
      .Case([&](PoolGradOp grad) {
        return emitPool(op, grad.getKind() == "max" ? "Max" : "Avg",
                        grad.getKernelShape(), grad.getStrides(),
                        grad.getPads(), grad.getDilations(),
                        grad.getCeilMode() != 0, grad.getCountIncludePad() != 0,
                        grad.getChannelsLast());
      })
      .Case([&](BatchNormTrainingOp norm) -> LogicalResult {
        FailureOr<std::string> workspace = workspaceArguments(op);
        if (failed(workspace))
          return failure();
        // With a residual: batchNormTrainingAdd, Z after the bias.
        os << "  batchNormTraining" << (norm.getZ() ? "Add" : "") << "(ctx, "
           << node << ", " << cppFloat(toDouble(norm.getEpsilon())) << ", "
           << runtimeActivation(norm.getActivation()) << ", "
           << ref(norm.getX()) << ", " << ref(norm.getScale()) << ", "
           << ref(norm.getB()) << ", "
           << (norm.getZ() ? ref(norm.getZ()) + ", " : std::string())
           << ref(norm.getY()) << ", " << ref(norm.getMean()) << ", "
           << ref(norm.getInvStd()) << ", " << *workspace
           << (norm.getChannelsLast() ? ", true" : "") << ");\n";
        return success();
      })
      .Case([&](BatchNormTrainingGradOp grad) -> LogicalResult {
        FailureOr<std::string> workspace = workspaceArguments(op);
        if (failed(workspace))
          return failure();
        os << "  batchNormTrainingGrad(ctx, " << node << ", "
           << ref(grad.getX()) << ", " << ref(grad.getDY()) << ", "
           << ref(grad.getScale()) << ", " << ref(grad.getMean()) << ", "
           << ref(grad.getInvStd()) << ", " << ref(grad.getDX()) << ", "
           << ref(grad.getDscale()) << ", " << ref(grad.getDB()) << ", "
           << *workspace << (grad.getChannelsLast() ? ", true" : "") << ");\n";
        return success();
      })
      .Case([&](BatchNormStatsOp stats) -> LogicalResult {
        FailureOr<std::string> workspace = workspaceArguments(op);
        if (failed(workspace))
          return failure();
        os << "  batchNormStats(ctx, " << node << ", "
           << cppFloat(toDouble(stats.getEpsilon())) << ", "
           << ref(stats.getX()) << ", " << ref(stats.getScale()) << ", "
           << ref(stats.getB()) << ", " << ref(stats.getMean()) << ", "
           << ref(stats.getInvStd()) << ", " << ref(stats.getAppliedScale())
           << ", " << ref(stats.getAppliedBias()) << ", " << *workspace
           << (stats.getChannelsLast() ? ", true" : "") << ");\n";
        return success();
      })
      .Case([&](NormReluApplyOp apply) {
        os << "  normReluApply(ctx, " << node << ", " << ref(apply.getX())
           << ", " << ref(apply.getScale()) << ", " << ref(apply.getBias())
           << ", " << ref(apply.getR())
           << (apply.getChannelsLast() ? ", true" : "") << ");\n";
        return success();
      })
      .Case([&](NormReluConvOp conv) {
        return emitConv(op, conv.getKernelShape(), conv.getStrides(),
                        conv.getPads(), conv.getDilations(), conv.getGroup(),
                        {}, conv.getB(), "normReluConv", "none",
                        conv.getChannelsLast());
      })
      .Case([&](NormReluConvBackwardFilterOp grad) {
        return emitConv(op, grad.getKernelShape(), grad.getStrides(),
                        grad.getPads(), grad.getDilations(), grad.getGroup(),
                        {}, Value(), "normReluConvBackwardFilter", "none",
                        grad.getChannelsLast());
      })
      .Case([&](BatchNormReluGradOp grad) -> LogicalResult {
        FailureOr<std::string> workspace = workspaceArguments(op);
        if (failed(workspace))
          return failure();
        os << "  batchNormReluGrad(ctx, " << node << ", " << ref(grad.getX())
           << ", " << ref(grad.getDY()) << ", " << ref(grad.getScale()) << ", "
           << ref(grad.getMean()) << ", " << ref(grad.getInvStd()) << ", "
           << ref(grad.getAppliedScale()) << ", " << ref(grad.getAppliedBias())
           << ", " << ref(grad.getDX()) << ", " << ref(grad.getDscale()) << ", "
           << ref(grad.getDB()) << ", " << *workspace
           << (grad.getChannelsLast() ? ", true" : "") << ");\n";
        return success();
      })
      .Case([&](BatchNormAddReluGradOp grad) -> LogicalResult {
        FailureOr<std::string> workspace = workspaceArguments(op);
        if (failed(workspace))
          return failure();
        os << "  batchNormAddReluGrad(ctx, " << node << ", " << ref(grad.getX())
           << ", " << ref(grad.getDY()) << ", " << ref(grad.getY()) << ", "
           << ref(grad.getScale()) << ", " << ref(grad.getMean()) << ", "
           << ref(grad.getInvStd()) << ", " << ref(grad.getDX()) << ", "
           << ref(grad.getDscale()) << ", " << ref(grad.getDB()) << ", "
           << ref(grad.getDZ()) << ", " << *workspace
           << (grad.getChannelsLast() ? ", true" : "") << ");\n";
        return success();
      })
      .Case([&](LayerNormalizationGradOp grad) -> LogicalResult {
        FailureOr<std::string> workspace = workspaceArguments(op);
        if (failed(workspace))
          return failure();
        os << "  layerNormGrad(ctx, " << node << ", "
           << cppFloat(toDouble(grad.getEpsilon())) << ", " << ref(grad.getX())
           << ", " << ref(grad.getDY()) << ", " << ref(grad.getScale()) << ", "
           << ref(grad.getDX()) << ", " << ref(grad.getDScale()) << ", "
           << ref(grad.getDB()) << ", " << *workspace << ");\n";
        return success();
      })
      .Case([&](BatchNormRunningUpdateOp update) {
        os << "  batchNormRunningUpdate(ctx, " << node << ", "
           << cppFloat(toDouble(update.getMomentum())) << ", "
           << cppFloat(toDouble(update.getEpsilon())) << ", "
           << ref(update.getMean()) << ", " << ref(update.getInvStd()) << ", "
           << ref(update.getRunningMean()) << ", "
           << ref(update.getRunningVar()) << ");\n";
        return success();
      })
      .Case([&](DropoutOp drop) -> LogicalResult {
        if (!drop.getKey())
          return error(op) << "has no random key: run memopt-make-trainable "
                              "(training) or --canonicalize (inference, "
                              "where it folds away) before lowering";
        os << "  dropout(ctx, " << node << ", "
           << cppFloat(toDouble(drop.getRatio())) << ", "
           << uint32_t(drop.getStream()) << "u, " << ref(drop.getX()) << ", "
           << ref(drop.getKey()) << ", " << ref(drop.getY()) << ");\n";
        return success();
      })
      .Case([&](RandomUniformOp random) {
        os << "  randomUniform(ctx, " << node << ", "
           << cppFloat(toDouble(random.getLow())) << ", "
           << cppFloat(toDouble(random.getHigh())) << ", "
           << uint32_t(random.getStream()) << "u, " << ref(random.getKey())
           << ", " << ref(random.getOutput()) << ");\n";
        return success();
      })
      .Case([&](AssignOp assign) {
        os << "  copy(ctx, " << node << ", " << ref(assign.getValue()) << ", "
           << ref(assign.getTarget()) << ");\n";
        return success();
      })
      .Case([&](SGDUpdateOp update) -> LogicalResult {
        if (Value master = update.getMaster()) {
          os << "  {\n    TensorRef buffer = "
             << (update.getMomentumBuffer() ? ref(update.getMomentumBuffer())
                                            : std::string("TensorRef()"))
             << ";\n"
             << accumulation(update.getAccumulator(), update.getMicroStep(),
                             update.getAccumulationSteps())
             << deviceAccumulation(op, node)
             << lossScaling(update.getLossScale(), update.getFoundInf(),
                            Value())
             << "    offloadSgdUpdate(ctx, " << node << ", " << offloadSites++
             << ", " << stagingPointer(op) << ", "
             << cppFloat(toDouble(update.getMomentum())) << ", "
             << cppFloat(toDouble(update.getWeightDecay())) << ", "
             << ref(update.getParam()) << ", " << ref(getStagedValue(op))
             << ", " << ref(master) << ", "
             << (update.getMomentumBuffer() ? "&buffer" : "nullptr") << ", "
             << ref(update.getLr())
             << updateTail(update.getMicroStep(), update.getLossScale());
          return success();
        }
        auto call = [&](const std::function<std::string(Value)> &view,
                        const std::string &param) {
          os << "  {\n    TensorRef buffer = "
             << (update.getMomentumBuffer() ? view(update.getMomentumBuffer())
                                            : std::string("TensorRef()"))
             << ";\n"
             << accumulation(update.getAccumulator(), update.getMicroStep(),
                             update.getAccumulationSteps(),
                             update.getAccumulator()
                                 ? view(update.getAccumulator())
                                 : "")
             << lossScaling(update.getLossScale(), update.getFoundInf(),
                            Value())
             << "    sgdUpdate(ctx, " << node << ", "
             << cppFloat(toDouble(update.getMomentum())) << ", "
             << cppFloat(toDouble(update.getWeightDecay())) << ", " << param
             << ", " << view(update.getGrad()) << ", "
             << (update.getMomentumBuffer() ? "&buffer" : "nullptr") << ", "
             << ref(update.getLr())
             << updateTail(update.getMicroStep(), update.getLossScale());
        };
        if (update.getShards() > 1)
          return emitShardedUpdate(op, update.getParam(), update.getShards(),
                                   call);
        call([&](Value value) { return ref(value); }, ref(update.getParam()));
        return success();
      })
      .Case([&](AdamWUpdateOp update) -> LogicalResult {
        if (Value master = update.getMaster()) {
          os << "  {\n"
             << accumulation(update.getAccumulator(), update.getMicroStep(),
                             update.getAccumulationSteps())
             << deviceAccumulation(op, node)
             << lossScaling(update.getLossScale(), update.getFoundInf(),
                            update.getLossScaleState())
             << "    offloadAdamwUpdate(ctx, " << node << ", " << offloadSites++
             << ", " << stagingPointer(op) << ", "
             << cppFloat(toDouble(update.getBeta1())) << ", "
             << cppFloat(toDouble(update.getBeta2())) << ", "
             << cppFloat(toDouble(update.getEps())) << ", "
             << cppFloat(toDouble(update.getWeightDecay())) << ", "
             << ref(update.getParam()) << ", " << ref(getStagedValue(op))
             << ", " << ref(master) << ", " << ref(update.getExpAvg()) << ", "
             << ref(update.getExpAvgSq()) << ", " << ref(update.getLr()) << ", "
             << ref(update.getStep())
             << updateTail(update.getMicroStep(), update.getLossScale());
          return success();
        }
        auto call = [&](const std::function<std::string(Value)> &view,
                        const std::string &param) {
          os << "  {\n"
             << accumulation(update.getAccumulator(), update.getMicroStep(),
                             update.getAccumulationSteps(),
                             update.getAccumulator()
                                 ? view(update.getAccumulator())
                                 : "")
             << lossScaling(update.getLossScale(), update.getFoundInf(),
                            update.getLossScaleState())
             << "    adamwUpdate(ctx, " << node << ", "
             << cppFloat(toDouble(update.getBeta1())) << ", "
             << cppFloat(toDouble(update.getBeta2())) << ", "
             << cppFloat(toDouble(update.getEps())) << ", "
             << cppFloat(toDouble(update.getWeightDecay())) << ", " << param
             << ", " << view(update.getGrad()) << ", "
             << view(update.getExpAvg()) << ", " << view(update.getExpAvgSq())
             << ", " << ref(update.getLr()) << ", " << ref(update.getStep())
             << updateTail(update.getMicroStep(), update.getLossScale());
        };
        if (update.getShards() > 1)
          return emitShardedUpdate(op, update.getParam(), update.getShards(),
                                   call);
        call([&](Value value) { return ref(value); }, ref(update.getParam()));
        return success();
      })
      .Case([&](FoundInfOp check) {
        os << "  {\n    const TensorRef gradients[] = {";
        llvm::interleaveComma(check.getGradients(), os,
                              [&](Value gradient) { os << ref(gradient); });
        os << "};\n";
        size_t accumulators = check.getAccumulators().size();
        if (accumulators) {
          os << "    const TensorRef accumulators[] = {";
          llvm::interleaveComma(check.getAccumulators(), os,
                                [&](Value sum) { os << ref(sum); });
          os << "};\n    const TensorRef microStep = "
             << ref(check.getMicroStep()) << ";\n";
        }
        os << "    foundInf(ctx, " << node << ", gradients, "
           << check.getGradients().size() << ", "
           << (accumulators ? "accumulators" : "nullptr") << ", "
           << accumulators << ", " << (accumulators ? "&microStep" : "nullptr")
           << ", " << ref(check.getFound()) << ");\n  }\n";
        return success();
      })
      .Case([&](UpdateLossScaleOp update) {
        os << "  {\n";
        if (Value micro = update.getMicroStep())
          os << "    const TensorRef microStep = " << ref(micro) << ";\n";
        os << "    updateLossScale(ctx, " << node << ", "
           << cppFloat(toDouble(update.getGrowthFactor())) << ", "
           << cppFloat(toDouble(update.getBackoffFactor())) << ", "
           << update.getGrowthInterval() << ", " << ref(update.getLossScale())
           << ", " << ref(update.getState()) << ", "
           << ref(update.getFoundInf()) << ", "
           << (update.getMicroStep() ? "&microStep" : "nullptr") << ", "
           << update.getAccumulationSteps() << ");\n  }\n";
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}

LogicalResult ProgramEmitter::emitShardedUpdate(
    Operation *op, Value param, int64_t shards,
    const std::function<void(const std::function<std::string(Value)> &,
                             const std::string &)> &emitCall) {
  auto paramType = cast<RankedTensorType>(param.getType());
  if (!paramType.getElementType().isF32())
    return error(op) << "shards a non-f32 parameter";
  int64_t elements = paramType.getNumElements();
  int64_t chunk = elements / shards, tail = elements % shards;
  // The rank's chunk [rank * F, (rank + 1) * F) of the parameter is element
  // [0, F) of every shard; the tail [N * F, E) is shard element [F, F + T).
  os << "  {\n    const int64_t rank = communicatorRank(ctx);\n    (void)rank;"
        "\n";
  if (chunk > 0)
    emitCall([&](Value value) { return elementView(value, "0", chunk); },
             elementView(param, "rank * " + std::to_string(chunk), chunk));
  if (tail > 0)
    emitCall(
        [&](Value value) {
          return elementView(value, std::to_string(chunk), tail);
        },
        elementView(param, std::to_string(shards * chunk), tail));
  os << "  }\n";
  return success();
}
