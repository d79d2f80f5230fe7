//===- ValidateTraining.cpp - training argument checks of both backends ---===//
//
// The argument checks of the training families (losses, optimizer updates,
// loss scaling, training-mode normalization), the collectives and activation
// offload. Both backends call them before any work, so a malformed call
// fails with the same message on the CPU and on the GPU (issue 28, "argument
// checks once in front of both"; Validate.cpp holds the inference families).
// The shape follows PyTorch's ATen, whose `check_*` helpers sit in front of
// every backend's kernel; here each op family has one entry point instead of
// a string of checks at every call site.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"
#include "memopt/Runtime/Workspace.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace memopt::rt {

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

static bool checkScalarF32(Context &ctx, const char *node, const TensorRef &t,
                           const char *what) {
  if (!checkTensor(ctx, node, t, what))
    return false;
  if (t.dtype != DType::F32 || t.numElements() != 1) {
    failf(ctx, node, "%s must be one f32 element, got %s %s", what,
          dtypeName(t.dtype), shapeString(t).c_str());
    return false;
  }
  return true;
}

/// A gradient: F32, F16 or BF16 with the parameter's element count.
static bool checkGradient(Context &ctx, const char *node, const TensorRef &t,
                          const TensorRef &param) {
  if (!checkTensor(ctx, node, t, "grad"))
    return false;
  if (t.dtype != DType::F32 && t.dtype != DType::F16 &&
      t.dtype != DType::BF16) {
    failf(ctx, node, "grad has dtype %s; expected f32, f16 or bf16",
          dtypeName(t.dtype));
    return false;
  }
  if (t.numElements() != param.numElements()) {
    failf(ctx, node, "grad %s does not match param %s", shapeString(t).c_str(),
          shapeString(param).c_str());
    return false;
  }
  return true;
}

static bool checkF32Like(Context &ctx, const char *node, const TensorRef &t,
                         const TensorRef &param, const char *what) {
  if (!checkTensor(ctx, node, t, what))
    return false;
  if (t.dtype != DType::F32) {
    failf(ctx, node, "%s has dtype %s; optimizer state is f32", what,
          dtypeName(t.dtype));
    return false;
  }
  if (t.numElements() != param.numElements()) {
    failf(ctx, node, "%s %s does not match param %s", what,
          shapeString(t).c_str(), shapeString(param).c_str());
    return false;
  }
  return true;
}

bool validateSoftmaxCrossEntropy(Context &ctx, const char *node,
                                 const TensorRef &logits,
                                 const TensorRef &labels,
                                 const TensorRef &scalar, const char *what,
                                 int64_t &rows, int64_t &classes) {
  if (!checkFloat(ctx, node, logits, "logits") ||
      !checkTensor(ctx, node, labels, "labels") ||
      !checkScalarF32(ctx, node, scalar, what))
    return false;
  if (logits.rank < 1) {
    failf(ctx, node, "logits must have a class axis, got a scalar");
    return false;
  }
  if (labels.dtype != DType::I64 && labels.dtype != DType::I32) {
    failf(ctx, node, "labels have dtype %s; expected i64 or i32",
          dtypeName(labels.dtype));
    return false;
  }
  classes = logits.shape[logits.rank - 1];
  rows = classes ? logits.numElements() / classes : 0;
  if (labels.numElements() != rows) {
    failf(ctx, node, "labels %s do not match the %lld rows of logits %s",
          shapeString(labels).c_str(), (long long)rows,
          shapeString(logits).c_str());
    return false;
  }
  return true;
}

bool validateLinearCrossEntropy(Context &ctx, const char *node,
                                const TensorRef &x, const TensorRef &w,
                                const TensorRef &labels,
                                const TensorRef &scalar, const char *what,
                                const TensorRef &lse, int64_t &rows,
                                int64_t &classes, int64_t &features) {
  if (!checkFloat(ctx, node, x, "x") || !checkFloat(ctx, node, w, "w") ||
      !checkSameDType(ctx, node, x, w, "x/w") ||
      !checkTensor(ctx, node, labels, "labels") ||
      !checkScalarF32(ctx, node, scalar, what) ||
      !checkTensor(ctx, node, lse, "lse"))
    return false;
  if (x.rank < 1 || w.rank != 2 || x.shape[x.rank - 1] != w.shape[1]) {
    failf(ctx, node,
          "x %s and w %s must be [..., K] and [C, K] (the classes' rows)",
          shapeString(x).c_str(), shapeString(w).c_str());
    return false;
  }
  if (labels.dtype != DType::I64 && labels.dtype != DType::I32) {
    failf(ctx, node, "labels have dtype %s; expected i64 or i32",
          dtypeName(labels.dtype));
    return false;
  }
  features = w.shape[1];
  classes = w.shape[0];
  rows = features ? x.numElements() / features : 0;
  if (labels.numElements() != rows) {
    failf(ctx, node, "labels %s do not match the %lld rows of x %s",
          shapeString(labels).c_str(), (long long)rows, shapeString(x).c_str());
    return false;
  }
  if (lse.dtype != DType::F32 || lse.numElements() != rows) {
    failf(ctx, node, "lse must be f32 with %lld elements, got %s %s",
          (long long)rows, dtypeName(lse.dtype), shapeString(lse).c_str());
    return false;
  }
  return true;
}

bool validateLinearCrossEntropyGrad(Context &ctx, const char *node,
                                    const TensorRef &x, const TensorRef &w,
                                    const TensorRef &dx, const TensorRef &dw) {
  return checkTensor(ctx, node, dx, "dx") && checkTensor(ctx, node, dw, "dw") &&
         checkSameDType(ctx, node, x, dx, "x/dx") &&
         checkSameCount(ctx, node, x, dx, "x/dx") &&
         checkSameDType(ctx, node, w, dw, "w/dw") &&
         checkSameCount(ctx, node, w, dw, "w/dw");
}

size_t linearCrossEntropyWorkspaceBytes(int64_t rows, int64_t chunkClasses,
                                        DType dtype) {
  return size_t(workspace::linearCrossEntropyBytes(rows, chunkClasses,
                                                   int64_t(dtypeSize(dtype))));
}

bool validateSgdUpdate(Context &ctx, const char *node, float momentum,
                       const TensorRef &param, const TensorRef &grad,
                       const TensorRef *momentumBuffer, const TensorRef &lr) {
  if (!checkF32Like(ctx, node, param, param, "param") ||
      !checkGradient(ctx, node, grad, param) ||
      !checkScalarF32(ctx, node, lr, "lr"))
    return false;
  if (momentum != 0.0f && !momentumBuffer) {
    failf(ctx, node, "SGD with momentum %g needs a momentum buffer",
          double(momentum));
    return false;
  }
  return !momentumBuffer ||
         checkF32Like(ctx, node, *momentumBuffer, param, "momentum buffer");
}

bool validateRandomUniform(Context &ctx, const char *node, float low,
                           float high, const TensorRef &key,
                           const TensorRef &y) {
  if (!(std::isfinite(low) && std::isfinite(high) && low <= high)) {
    failf(ctx, node, "random_uniform needs finite low <= high, got [%g, %g)",
          double(low), double(high));
    return false;
  }
  if (!checkTensor(ctx, node, key, "key") || !checkTensor(ctx, node, y, "y"))
    return false;
  if (!isFloatType(y.dtype)) {
    failf(ctx, node, "random_uniform needs a float result, got %s %s",
          dtypeName(y.dtype), shapeString(y).c_str());
    return false;
  }
  if (key.dtype != DType::I64 || key.numElements() != 2) {
    failf(ctx, node,
          "random_uniform key must be i64 [seed, micro-batch], got %s %s",
          dtypeName(key.dtype), shapeString(key).c_str());
    return false;
  }
  return true;
}

bool validateDropout(Context &ctx, const char *node, float ratio,
                     const TensorRef &x, const TensorRef &key,
                     const TensorRef &y) {
  if (!(ratio >= 0.0f && ratio < 1.0f)) {
    failf(ctx, node, "dropout ratio %g is not in [0, 1)", double(ratio));
    return false;
  }
  if (!checkTensor(ctx, node, x, "x") || !checkTensor(ctx, node, y, "y") ||
      !checkTensor(ctx, node, key, "key"))
    return false;
  if (!isFloatType(x.dtype) || y.dtype != x.dtype ||
      x.numElements() != y.numElements()) {
    failf(ctx, node,
          "dropout needs float x and y of one type and shape, got %s %s and %s "
          "%s",
          dtypeName(x.dtype), shapeString(x).c_str(), dtypeName(y.dtype),
          shapeString(y).c_str());
    return false;
  }
  if (key.dtype != DType::I64 || key.numElements() != 2) {
    failf(ctx, node, "dropout key must be i64 [seed, micro-batch], got %s %s",
          dtypeName(key.dtype), shapeString(key).c_str());
    return false;
  }
  return true;
}

bool validateAccumulation(Context &ctx, const char *node,
                          const TensorRef &param,
                          const GradientAccumulation &accumulation) {
  if (accumulation.steps < 2) {
    failf(ctx, node, "gradient accumulation needs at least 2 steps, got %lld",
          (long long)accumulation.steps);
    return false;
  }
  // Null accumulator data: the micro-step gate alone.
  return (!accumulation.accumulator.data ||
          checkF32Like(ctx, node, accumulation.accumulator, param,
                       "gradient accumulator")) &&
         checkScalarF32(ctx, node, accumulation.microStep, "micro_step");
}

bool validateGradientAccumulation(Context &ctx, const char *node,
                                  const TensorRef &grad,
                                  const GradientAccumulation &accumulation) {
  if (!checkTensor(ctx, node, grad, "gradient"))
    return false;
  if (grad.dtype != DType::F32 && grad.dtype != DType::F16 &&
      grad.dtype != DType::BF16) {
    failf(ctx, node, "gradient has dtype %s; expected f32, f16 or bf16",
          dtypeName(grad.dtype));
    return false;
  }
  if (!accumulation.accumulator.data) {
    failf(ctx, node, "the accumulation pass needs its accumulator");
    return false;
  }
  return validateAccumulation(ctx, node, grad, accumulation);
}

bool validateCollective(Context &ctx, const char *node, const TensorRef &x,
                        const TensorRef &y, int64_t yElements) {
  if (!checkTensor(ctx, node, x, "input") ||
      !checkTensor(ctx, node, y, "result"))
    return false;
  bool reducible =
      x.dtype == DType::F32 || x.dtype == DType::F16 || x.dtype == DType::BF16;
  if (!reducible || y.dtype != x.dtype) {
    failf(ctx, node,
          "collectives run on f32, f16 or bf16 tensors of one type, got %s "
          "and %s",
          dtypeName(x.dtype), dtypeName(y.dtype));
    return false;
  }
  if (y.numElements() != yElements) {
    failf(ctx, node, "result %s must hold %lld elements for input %s",
          shapeString(y).c_str(), (long long)yElements, shapeString(x).c_str());
    return false;
  }
  return true;
}

bool validateAdamwUpdate(Context &ctx, const char *node, const TensorRef &param,
                         const TensorRef &grad, const TensorRef &m,
                         const TensorRef &v, const TensorRef &lr,
                         const TensorRef &step) {
  return checkF32Like(ctx, node, param, param, "param") &&
         checkGradient(ctx, node, grad, param) &&
         checkF32Like(ctx, node, m, param, "exp_avg") &&
         checkF32Like(ctx, node, v, param, "exp_avg_sq") &&
         checkScalarF32(ctx, node, lr, "lr") &&
         checkScalarF32(ctx, node, step, "step");
}

bool validateLossScaling(Context &ctx, const char *node,
                         const LossScaling &scaling, bool needsState) {
  if (!checkScalarF32(ctx, node, scaling.scale, "loss scale") ||
      !checkScalarF32(ctx, node, scaling.foundInf, "found_inf"))
    return false;
  if (!needsState)
    return true;
  if (!checkTensor(ctx, node, scaling.state, "loss scale state"))
    return false;
  if (scaling.state.dtype != DType::F32 || scaling.state.numElements() != 2) {
    failf(ctx, node, "loss scale state must be two f32 elements, got %s %s",
          dtypeName(scaling.state.dtype), shapeString(scaling.state).c_str());
    return false;
  }
  return true;
}

bool validateFoundInf(Context &ctx, const char *node,
                      const TensorRef *gradients, int count,
                      const TensorRef *accumulators, int accumulatorCount,
                      const TensorRef *microStep, const TensorRef &found) {
  if (!checkScalarF32(ctx, node, found, "found_inf"))
    return false;
  if (count < 0 || accumulatorCount < 0 ||
      (accumulatorCount > 0) != (microStep != nullptr)) {
    failf(ctx, node, "found_inf: accumulators and micro_step come together");
    return false;
  }
  for (int i = 0; i < count; ++i) {
    if (!checkTensor(ctx, node, gradients[i], "gradient"))
      return false;
    if (!isFloatType(gradients[i].dtype)) {
      failf(ctx, node, "gradient %d has dtype %s; expected a float type", i,
            dtypeName(gradients[i].dtype));
      return false;
    }
  }
  for (int i = 0; i < accumulatorCount; ++i)
    if (!checkF32Like(ctx, node, accumulators[i], accumulators[i],
                      "gradient accumulator"))
      return false;
  return !microStep || checkScalarF32(ctx, node, *microStep, "micro_step");
}

bool validateUpdateLossScale(Context &ctx, const char *node, float growth,
                             float backoff, int64_t interval,
                             const TensorRef &scale, const TensorRef &state,
                             const TensorRef &foundInf,
                             const TensorRef *microStep, int64_t steps) {
  if (!(growth >= 1.0f) || !(backoff > 0.0f && backoff <= 1.0f) ||
      interval < 1) {
    failf(ctx, node,
          "loss scale update needs growth >= 1, backoff in (0, 1] and an "
          "interval of at least 1, got %g, %g, %lld",
          double(growth), double(backoff), (long long)interval);
    return false;
  }
  if ((steps > 1) != (microStep != nullptr)) {
    failf(ctx, node,
          "loss scale update: a micro-step comes with %lld > 1 "
          "accumulation steps",
          (long long)steps);
    return false;
  }
  LossScaling scaling{scale, foundInf, state};
  return validateLossScaling(ctx, node, scaling, /*needsState=*/true) &&
         (!microStep || checkScalarF32(ctx, node, *microStep, "micro_step"));
}

//===----------------------------------------------------------------------===//
// Training-mode normalization
//===----------------------------------------------------------------------===//

namespace {

/// Statistics and parameters of a training normalization: f32.
bool checkStatisticsF32(
    Context &ctx, const char *node,
    std::initializer_list<std::pair<const TensorRef *, const char *>> tensors) {
  for (auto [tensor, what] : tensors) {
    if (!checkTensor(ctx, node, *tensor, what))
      return false;
    if (tensor->dtype != DType::F32) {
      failf(ctx, node, "%s must be f32 (statistics and parameters stay f32)",
            what);
      return false;
    }
  }
  return true;
}

/// The activations of a training normalization: one float dtype (F32, or
/// F16 / BF16 under mixed precision).
bool checkActivations(
    Context &ctx, const char *node,
    std::initializer_list<std::pair<const TensorRef *, const char *>> tensors) {
  const TensorRef *first = nullptr;
  for (auto [tensor, what] : tensors) {
    if (!checkTensor(ctx, node, *tensor, what) ||
        !checkFloat(ctx, node, *tensor, what))
      return false;
    if (first && tensor->dtype != first->dtype) {
      failf(ctx, node, "%s has dtype %s, not the input's %s", what,
            dtypeName(tensor->dtype), dtypeName(first->dtype));
      return false;
    }
    first = first ? first : tensor;
  }
  return true;
}

/// x [N, C, ...] and per-channel tensors of C elements.
bool checkChannels(Context &ctx, const char *node, const TensorRef &x,
                   std::initializer_list<const TensorRef *> perChannel,
                   ChannelLayout &layout) {
  if (x.rank < 2) {
    failf(ctx, node, "batch normalization needs [N, C, ...], got %s",
          shapeString(x).c_str());
    return false;
  }
  // Channels-last: [N, spatial..., C]; the spatial axes are 1 .. rank-2.
  int channelAxis = layout.channelsLast ? x.rank - 1 : 1;
  layout.channels = x.shape[channelAxis];
  layout.spatial = 1;
  for (int d = 1; d < x.rank; ++d)
    if (d != channelAxis)
      layout.spatial *= x.shape[d];
  for (const TensorRef *t : perChannel)
    if (t->numElements() != layout.channels) {
      failf(ctx, node, "per-channel tensor %s does not hold %lld channels",
            shapeString(*t).c_str(), (long long)layout.channels);
      return false;
    }
  return true;
}

} // namespace

bool validateBatchNormTraining(Context &ctx, const char *node,
                               Activation activation, const TensorRef &x,
                               const TensorRef &scale, const TensorRef &bias,
                               const TensorRef &y, const TensorRef &mean,
                               const TensorRef &invStd, ChannelLayout &layout) {
  if (!checkActivations(ctx, node, {{&x, "X"}, {&y, "Y"}}) ||
      !checkStatisticsF32(ctx, node,
                          {{&scale, "scale"},
                           {&bias, "B"},
                           {&mean, "mean"},
                           {&invStd, "inv_std"}}) ||
      !checkSameShape(ctx, node, x, y, "X/Y") ||
      !checkChannels(ctx, node, x, {&scale, &bias, &mean, &invStd}, layout))
    return false;
  if (activation != Activation::None && activation != Activation::Relu) {
    failf(ctx, node, "batch normalization fuses relu only");
    return false;
  }
  return true;
}

bool validateBatchNormTrainingGrad(
    Context &ctx, const char *node, const TensorRef &x, const TensorRef &dy,
    const TensorRef &scale, const TensorRef &mean, const TensorRef &invStd,
    const TensorRef &dx, const TensorRef &dscale, const TensorRef &dbias,
    ChannelLayout &layout) {
  return checkActivations(ctx, node, {{&x, "X"}, {&dy, "dY"}, {&dx, "dX"}}) &&
         checkStatisticsF32(ctx, node,
                            {{&scale, "scale"},
                             {&mean, "mean"},
                             {&invStd, "inv_std"},
                             {&dscale, "dscale"},
                             {&dbias, "dB"}}) &&
         checkSameShape(ctx, node, x, dy, "X/dY") &&
         checkSameShape(ctx, node, x, dx, "X/dX") &&
         checkChannels(ctx, node, x, {&scale, &mean, &invStd, &dscale, &dbias},
                       layout);
}

bool validateBatchNormTrainingAdd(Context &ctx, const char *node,
                                  Activation activation, const TensorRef &x,
                                  const TensorRef &scale, const TensorRef &bias,
                                  const TensorRef &z, const TensorRef &y,
                                  const TensorRef &mean,
                                  const TensorRef &invStd,
                                  ChannelLayout &layout) {
  return validateBatchNormTraining(ctx, node, activation, x, scale, bias, y,
                                   mean, invStd, layout) &&
         checkActivations(ctx, node, {{&x, "X"}, {&z, "Z"}}) &&
         checkSameShape(ctx, node, x, z, "X/Z");
}

bool validateBatchNormAddReluGrad(
    Context &ctx, const char *node, const TensorRef &x, const TensorRef &dy,
    const TensorRef &y, const TensorRef &scale, const TensorRef &mean,
    const TensorRef &invStd, const TensorRef &dx, const TensorRef &dscale,
    const TensorRef &dbias, const TensorRef &dz, ChannelLayout &layout) {
  if (!validateBatchNormTrainingGrad(ctx, node, x, dy, scale, mean, invStd, dx,
                                     dscale, dbias, layout) ||
      !checkActivations(ctx, node, {{&x, "X"}, {&y, "Y"}, {&dz, "dZ"}}) ||
      !checkSameShape(ctx, node, x, y, "X/Y") ||
      !checkSameShape(ctx, node, x, dz, "X/dZ"))
    return false;
  if (dz.data == dx.data && x.numElements() > 0) {
    failf(ctx, node, "dZ and dX must not share storage");
    return false;
  }
  return true;
}

bool validateBatchNormStats(Context &ctx, const char *node, const TensorRef &x,
                            const TensorRef &gamma, const TensorRef &beta,
                            const TensorRef &mean, const TensorRef &invStd,
                            const TensorRef &appliedScale,
                            const TensorRef &appliedBias,
                            ChannelLayout &layout) {
  return checkActivations(ctx, node, {{&x, "X"}}) &&
         checkStatisticsF32(ctx, node,
                            {{&gamma, "scale"},
                             {&beta, "B"},
                             {&mean, "mean"},
                             {&invStd, "inv_std"},
                             {&appliedScale, "applied scale"},
                             {&appliedBias, "applied bias"}}) &&
         checkChannels(
             ctx, node, x,
             {&gamma, &beta, &mean, &invStd, &appliedScale, &appliedBias},
             layout);
}

bool validateNormReluApply(Context &ctx, const char *node, const TensorRef &x,
                           const TensorRef &scale, const TensorRef &bias,
                           const TensorRef &r, ChannelLayout &layout) {
  return checkActivations(ctx, node, {{&x, "X"}}) &&
         checkSameDType(ctx, node, x, r, "X/R") &&
         checkSameShape(ctx, node, x, r, "X/R") &&
         checkStatisticsF32(ctx, node, {{&scale, "scale"}, {&bias, "bias"}}) &&
         checkChannels(ctx, node, x, {&scale, &bias}, layout);
}

bool validateBatchNormReluGrad(Context &ctx, const char *node,
                               const TensorRef &x, const TensorRef &dy,
                               const TensorRef &gamma, const TensorRef &mean,
                               const TensorRef &invStd,
                               const TensorRef &appliedScale,
                               const TensorRef &appliedBias,
                               const TensorRef &dx, const TensorRef &dgamma,
                               const TensorRef &dbeta, ChannelLayout &layout) {
  return validateBatchNormTrainingGrad(ctx, node, x, dy, gamma, mean, invStd,
                                       dx, dgamma, dbeta, layout) &&
         checkStatisticsF32(ctx, node,
                            {{&appliedScale, "applied scale"},
                             {&appliedBias, "applied bias"}}) &&
         checkChannels(ctx, node, x, {&appliedScale, &appliedBias}, layout);
}

bool validateNormReluConv(Context &ctx, const char *node,
                          const ConvParams &params, bool backwardFilter,
                          const TensorRef &x, const TensorRef &other,
                          const TensorRef &scale, const TensorRef &bias,
                          const TensorRef &out, const void *workspace,
                          size_t workspaceBytes, ConvGeometry &geometry) {
  if (backwardFilter ? !validateConvBackwardFilter(ctx, node, params, x, other,
                                                   out, geometry)
                     : !validateConv(ctx, node, params, false, x, other,
                                     nullptr, out, geometry))
    return false;
  if (params.activation != Activation::None) {
    failf(ctx, node,
          "a normalized convolution takes no activation (the ReLU is applied "
          "to its input)");
    return false;
  }
  if (!checkStatisticsF32(ctx, node,
                          {{&scale, "applied scale"}, {&bias, "applied bias"}}))
    return false;
  for (const TensorRef *t : {&scale, &bias})
    if (t->numElements() != geometry.inChannels) {
      failf(ctx, node, "per-channel tensor %s does not hold X's %lld channels",
            shapeString(*t).c_str(), (long long)geometry.inChannels);
      return false;
    }
  size_t need = size_t(workspace::normReluConvTempBytes(int64_t(x.bytes())));
  if ((!workspace && need) || workspaceBytes < need) {
    failf(ctx, node,
          "a normalized convolution needs a workspace of at least %zu bytes "
          "(its normalized input), got %zu",
          need, workspaceBytes);
    return false;
  }
  return true;
}

bool validateBatchNormRunningUpdate(Context &ctx, const char *node,
                                    const TensorRef &mean,
                                    const TensorRef &invStd,
                                    const TensorRef &runningMean,
                                    const TensorRef &runningVar) {
  if (!checkStatisticsF32(ctx, node,
                          {{&mean, "mean"},
                           {&invStd, "inv_std"},
                           {&runningMean, "running mean"},
                           {&runningVar, "running var"}}))
    return false;
  int64_t channels = mean.numElements();
  if (invStd.numElements() != channels ||
      runningMean.numElements() != channels ||
      runningVar.numElements() != channels) {
    failf(ctx, node, "running statistics of %lld channels expected",
          (long long)channels);
    return false;
  }
  return true;
}

bool validateLayerNormGrad(Context &ctx, const char *node, const TensorRef &x,
                           const TensorRef &dy, const TensorRef &scale,
                           const TensorRef &dx, const TensorRef &dscale,
                           const TensorRef &dbias) {
  if (!checkActivations(ctx, node, {{&x, "X"}, {&dy, "dY"}, {&dx, "dX"}}) ||
      !checkStatisticsF32(
          ctx, node,
          {{&scale, "Scale"}, {&dscale, "dScale"}, {&dbias, "dB"}}) ||
      !checkSameShape(ctx, node, x, dy, "X/dY") ||
      !checkSameShape(ctx, node, x, dx, "X/dX"))
    return false;
  int64_t cols = scale.numElements();
  if (cols == 0 || x.numElements() % cols != 0 ||
      dscale.numElements() != cols || dbias.numElements() != cols) {
    failf(ctx, node,
          "layer normalization gradient: %s is not rows of the %lld scale "
          "elements",
          shapeString(x).c_str(), (long long)cols);
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Collectives and offload
//===----------------------------------------------------------------------===//

bool validateCollectiveAccumulation(Context &ctx, const char *node,
                                    const TensorRef &x,
                                    const GradientAccumulation &accumulation) {
  if (!validateAccumulation(ctx, node, x, accumulation))
    return false;
  if (accumulation.accumulator.data && x.dtype != DType::F32) {
    failf(ctx, node,
          "an f32 accumulator sums f32 gradients, got %s (reduce the "
          "accumulated gradients in f32)",
          dtypeName(x.dtype));
    return false;
  }
  return true;
}

/// `ranks` of a sharded collective named `what`: at least one.
static bool checkRanks(Context &ctx, const char *node, const char *what,
                       int64_t ranks) {
  if (ranks < 1) {
    failf(ctx, node, "%s over %lld ranks", what, (long long)ranks);
    return false;
  }
  return true;
}

/// The elements of a rank's shard of `elements`: an equal chunk and the tail.
static int64_t shardElements(int64_t elements, int64_t ranks) {
  return elements / ranks + elements % ranks;
}

bool validateReduceScatter(Context &ctx, const char *node, int64_t ranks,
                           const TensorRef &x, const TensorRef &y) {
  return checkRanks(ctx, node, "reduce_scatter", ranks) &&
         validateCollective(ctx, node, x, y,
                            shardElements(x.numElements(), ranks));
}

bool validateAllGather(Context &ctx, const char *node, int64_t ranks,
                       const TensorRef &param) {
  return checkRanks(ctx, node, "all_gather", ranks) &&
         validateCollective(ctx, node, param, param, param.numElements());
}

bool validateGatherParameter(Context &ctx, const char *node, int64_t ranks,
                             const TensorRef &shard, const TensorRef &whole) {
  if (!checkRanks(ctx, node, "gather_parameter", ranks) ||
      !checkTensor(ctx, node, shard, "shard") ||
      !checkTensor(ctx, node, whole, "result"))
    return false;
  // The shard is the f32 master's; the gathered parameter is f32 or its
  // low-precision copy (cast while it is put into place).
  bool gatherable = whole.dtype == DType::F32 || whole.dtype == DType::F16 ||
                    whole.dtype == DType::BF16;
  if (shard.dtype != DType::F32 || !gatherable) {
    failf(ctx, node,
          "gather_parameter gathers an f32 shard into an f32, f16 or bf16 "
          "parameter, got %s and %s",
          dtypeName(shard.dtype), dtypeName(whole.dtype));
    return false;
  }
  int64_t expected = shardElements(whole.numElements(), ranks);
  if (shard.numElements() != expected) {
    failf(ctx, node,
          "shard %s must hold %lld elements (this rank's shard of %s over "
          "%lld ranks)",
          shapeString(shard).c_str(), (long long)expected,
          shapeString(whole).c_str(), (long long)ranks);
    return false;
  }
  return true;
}

bool validateHostPoolRange(Context &ctx, const char *node, int64_t hostOffset,
                           int64_t bytes, bool poolReserved, size_t poolBytes) {
  if (!poolReserved || hostOffset < 0 || bytes < 0 ||
      uint64_t(hostOffset) + uint64_t(bytes) > poolBytes) {
    failf(ctx, node,
          "offload of %lld bytes at host offset %lld is outside the host "
          "pool of %zu bytes (was the pool reserved?)",
          (long long)bytes, (long long)hostOffset,
          poolReserved ? poolBytes : size_t(0));
    return false;
  }
  return true;
}

} // namespace memopt::rt
