//===- HostOffload.cpp - --offload optimizer on the host backend ----------===//
//
// The host backend runs an offloaded program with the same structure as the
// CUDA backend (docs/offload.md): the gradient and the step's scalars are
// copied into the update's staging slot of the host state region, the update
// is queued to the CPU optimizer (HostAdam.h), which runs it on its own
// threads while this thread goes on with the backward, and the step ends
// when every queued update has written its master back into the parameter.
// Host and device memory are the same here, so the copies are memcpy; what
// the tests check is that the separate state region and the CPU update give
// the plain program's numbers.
//
//===----------------------------------------------------------------------===//

#include "../HostAdam.h"
#include "../Internal.h"

#include <cstdlib>
#include <cstring>

namespace memopt::rt {

void *hostStateAlloc(Context &ctx, size_t bytes) {
  size_t rounded = std::max<size_t>((bytes + 255) / 256 * 256, 256);
  void *ptr = std::aligned_alloc(256, rounded);
  if (!ptr) {
    failf(ctx, "<host state>", "cannot allocate %zu bytes", bytes);
    return nullptr;
  }
  std::memset(ptr, 0, rounded);
  return ptr;
}

void hostStateFree(Context &, void *ptr) { std::free(ptr); }

namespace {

float loadF32(const TensorRef *t) {
  return t && t->data ? *static_cast<const float *>(t->data) : 0.0f;
}

/// Stages the gradient and the scalars, then queues the update.
void stageAndSubmit(Context &ctx, HostUpdate &update, void *staging,
                    const TensorRef &param, const TensorRef &grad,
                    const TensorRef &lr, const TensorRef *step,
                    const GradientAccumulation *accumulation,
                    const LossScaling *scaling) {
  float *scalars = static_cast<float *>(staging);
  std::memset(scalars, 0, kHostStagingScalarBytes);
  scalars[kStagingLr] = loadF32(&lr);
  scalars[kStagingStep] = loadF32(step);
  if (accumulation)
    scalars[kStagingMicroStep] = loadF32(&accumulation->microStep);
  if (scaling) {
    scalars[kStagingLossScale] = loadF32(&scaling->scale);
    scalars[kStagingFoundInf] = loadF32(&scaling->foundInf);
    if (scaling->state.data)
      scalars[kStagingSkipped] =
          static_cast<const float *>(scaling->state.data)[1];
  }
  std::memcpy(static_cast<uint8_t *>(staging) + kHostStagingScalarBytes,
              grad.data, grad.bytes());
  // The "copy back" to the device is the CPU update writing the parameter
  // (a low working parameter rounded, as CUDA's copy from the staging slot).
  update.param = param.data;
  offloadEngine(ctx).submit(update);
}

} // namespace

void offloadSgdUpdate(Context &ctx, const char *node, int site, void *staging,
                      float momentum, float weightDecay, TensorRef param,
                      TensorRef grad, TensorRef master,
                      const TensorRef *momentumBuffer, TensorRef lr,
                      const GradientAccumulation *accumulation,
                      const LossScaling *scaling) {
  HostUpdate update;
  if (hasError(ctx) ||
      !describeOffloadedSgd(ctx, node, staging, momentum, weightDecay, param,
                            grad, master, momentumBuffer, lr, accumulation,
                            scaling, update))
    return;
  stageAndSubmit(ctx, update, staging, param, grad, lr, nullptr, accumulation,
                 scaling);
}

void offloadAdamwUpdate(Context &ctx, const char *node, int site, void *staging,
                        float beta1, float beta2, float eps, float weightDecay,
                        TensorRef param, TensorRef grad, TensorRef master,
                        TensorRef m, TensorRef v, TensorRef lr, TensorRef step,
                        const GradientAccumulation *accumulation,
                        const LossScaling *scaling) {
  HostUpdate update;
  if (hasError(ctx) ||
      !describeOffloadedAdamw(ctx, node, staging, beta1, beta2, eps,
                              weightDecay, param, grad, master, m, v, lr, step,
                              accumulation, scaling, update))
    return;
  stageAndSubmit(ctx, update, staging, param, grad, lr, &step, accumulation,
                 scaling);
}

void offloadFinish(Context &ctx) {
  offloadEngine(ctx).waitAll();
  offloadCheck(ctx);
}

// The engine's per-context entry points are defined by each backend, next
// to its offloadEngine(): the backend-independent HostAdam.cpp (in
// memopt_runtime_common, linked after the backend) must not call back into a
// backend library.
void setHostState(Context &ctx, uint8_t *region, size_t bytes) {
  OffloadEngine &engine = offloadEngine(ctx);
  engine.hostState = region;
  engine.hostStateBytes = bytes;
}

uint8_t *hostState(Context &ctx) { return offloadEngine(ctx).hostState; }

void offloadCheck(Context &ctx) {
  std::string node;
  std::string error = offloadEngine(ctx).takeError(node);
  if (!error.empty())
    contextFail(ctx, node.c_str(), error.c_str());
}

} // namespace memopt::rt
