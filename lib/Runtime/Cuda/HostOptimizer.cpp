//===- HostOptimizer.cpp - --offload optimizer on the CUDA backend --------===//
//
// The device side of ZeRO-Offload's split (docs/offload.md). For each
// offloaded update, in stream order and capturable in the CUDA graph:
//
//   compute stream S:  ... gradient k ready ─record ready_k─┐
//   copy-out stream D: wait ready_k; D2H gradient k and the step's scalars
//                      into the update's pinned staging slot; record copied_k;
//                      host function: queue update k to the CPU optimizer;
//                      record queued_k
//   S:                 wait copied_{k-1}, the previous update's copy (the
//                      planner keeps each offloaded gradient's arena bytes
//                      until the next offloaded update, HostUpdates.h's
//                      getDeferredOffloadGradient, so the D2H of k overlaps
//                      the ops up to update k+1); under dynamic loss scaling
//                      wait copied_k at once (the scalars are a snapshot that
//                      update_loss_scale rewrites after the updates)
//   copy-back stream U: wait queued_k; host function: wait for update k on
//                      the CPU; H2D master k into the parameter (a low
//                      working parameter: the CPU's rounded copy of it, from
//                      the staging slot, 2 bytes a parameter)
//   end of step:       S waits for U's last copy (offloadFinish)
//
// So the CPU update of bucket k runs while S computes the gradients of the
// next buckets, and S never stalls on the copy it just issued; the copies run
// on their own engines. Further than torchao's CPUOffloadOptimizer, whose
// backward hook synchronizes on each copy before the gradient is freed: here
// the live-range extension is planned, so the arena holds one gradient more,
// known at compile time, instead of a stall per parameter. A host function
// makes no CUDA call and waits only for CPU work queued by a host function that
// the stream order runs first (U waits on queued_k), as cudaLaunchHostFunc
// requires. The loss scale's skip decision is made on the device before the
// copy (found_inf runs before the updates; ZeRO-Offload checks overflow on
// the GPU too) and travels with the gradient.
//
// Taken from ZeRO-Offload (DeepSpeed's CPU Adam with its gradient copies on
// a separate stream into pinned buffers) and torchao's CPUOffloadOptimizer
// (per-parameter D2H in a backward hook on a side stream, CPU step, H2D
// back). Where memopt differs: the staging slots, the masters and the state
// are one host region planned at compile time, the whole step (copies and
// host functions included) is one CUDA graph, and the CPU arithmetic is the
// host backend's, bit for bit.
//
//===----------------------------------------------------------------------===//

#include "CudaInternal.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

namespace memopt::rt {

namespace {

/// One offloaded update's events and its description (stable addresses:
/// the captured host functions point at it).
struct OffloadSite {
  HostUpdate update;
  OffloadEngine *engine = nullptr;
  /// Written by the copy-out stream's host function, read by the copy-back
  /// stream's (ordered by the queued event).
  std::atomic<uint64_t> ticket{0};
  cudaEvent_t ready = nullptr, copied = nullptr, queued = nullptr;
};

struct CudaOffload {
  cudaStream_t copyOut = nullptr, copyBack = nullptr;
  cudaEvent_t finished = nullptr;
  std::vector<std::unique_ptr<OffloadSite>> sites;
  /// The site whose gradient copy the compute stream has not waited for yet
  /// (the previous offloaded update of this step), or null.
  OffloadSite *inFlight = nullptr;
};

void destroyCudaOffload(void *data) {
  auto *state = static_cast<CudaOffload *>(data);
  for (auto &site : state->sites)
    for (cudaEvent_t event : {site->ready, site->copied, site->queued})
      if (event)
        cudaEventDestroy(event);
  if (state->finished)
    cudaEventDestroy(state->finished);
  for (cudaStream_t stream : {state->copyOut, state->copyBack})
    if (stream) {
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    }
  delete state;
}

CudaOffload *cudaOffload(Context &ctx, const char *node) {
  OffloadEngine &engine = offloadEngine(ctx);
  if (engine.backend)
    return static_cast<CudaOffload *>(engine.backend);
  auto *state = new CudaOffload();
  engine.backend = state;
  engine.destroyBackend = &destroyCudaOffload;
  if (!checkCuda(
          ctx, node,
          cudaStreamCreateWithFlags(&state->copyOut, cudaStreamNonBlocking),
          "cudaStreamCreate") ||
      !checkCuda(
          ctx, node,
          cudaStreamCreateWithFlags(&state->copyBack, cudaStreamNonBlocking),
          "cudaStreamCreate") ||
      !checkCuda(
          ctx, node,
          cudaEventCreateWithFlags(&state->finished, cudaEventDisableTiming),
          "cudaEventCreate"))
    return nullptr;
  return state;
}

/// The site of update number `index`, made by the first (eager) run.
OffloadSite *offloadSite(Context &ctx, CudaOffload &state, int index,
                         const char *node) {
  if (index < 0) {
    failf(ctx, node, "offloaded update site %d is negative", index);
    return nullptr;
  }
  if (size_t(index) >= state.sites.size())
    state.sites.resize(size_t(index) + 1);
  std::unique_ptr<OffloadSite> &site = state.sites[size_t(index)];
  if (!site) {
    site = std::make_unique<OffloadSite>();
    for (cudaEvent_t *event : {&site->ready, &site->copied, &site->queued})
      if (!checkCuda(ctx, node,
                     cudaEventCreateWithFlags(event, cudaEventDisableTiming),
                     "cudaEventCreate"))
        return nullptr;
  }
  return site.get();
}

void CUDART_CB queueUpdate(void *data) {
  auto *site = static_cast<OffloadSite *>(data);
  site->ticket.store(site->engine->submit(site->update));
}

void CUDART_CB waitForUpdate(void *data) {
  auto *site = static_cast<OffloadSite *>(data);
  site->engine->waitFor(site->ticket.load());
}

/// A device F32 scalar into slot `index` of the staging head.
bool copyScalar(Context &ctx, const char *node, cudaStream_t stream,
                void *staging, int index, const void *source) {
  if (!source)
    return true;
  return checkCuda(ctx, node,
                   cudaMemcpyAsync(static_cast<float *>(staging) + index,
                                   source, sizeof(float),
                                   cudaMemcpyDeviceToHost, stream),
                   "cudaMemcpyAsync (offload scalar)");
}

/// The compute stream's wait for the gradient copies out: the previous
/// offloaded update's (whose gradient's arena bytes the plan frees after
/// this update), and `site`'s own at once when `now` (loss scaling) or
/// later (the next update, or offloadFinish through the copy-back stream).
bool waitForCopiedGradients(Context &ctx, const char *node, CudaOffload &state,
                            OffloadSite *site, bool now) {
  OffloadSite *previous = std::exchange(state.inFlight, now ? nullptr : site);
  for (OffloadSite *copied : {previous, now ? site : nullptr})
    if (copied && !checkCuda(ctx, node,
                             cudaStreamWaitEvent(ctx.stream, copied->copied, 0),
                             "cudaStreamWaitEvent"))
      return false;
  return true;
}

void offloadUpdate(Context &ctx, const char *node, int index, void *staging,
                   const HostUpdate &update, const TensorRef &param,
                   const TensorRef &grad, const TensorRef &lr,
                   const TensorRef *step,
                   const GradientAccumulation *accumulation,
                   const LossScaling *scaling) {
  CudaOffload *state = cudaOffload(ctx, node);
  if (!state)
    return;
  OffloadSite *site = offloadSite(ctx, *state, index, node);
  if (!site)
    return;
  site->update = update;
  // An f32 parameter is copied back from the master; a low working
  // parameter from its rounded copy, which the CPU keeps in the staging
  // slot after the staged tensor (getHostLowCopyOffset): half the bytes.
  bool low = param.dtype != DType::F32;
  site->update.param =
      low ? static_cast<uint8_t *>(staging) + getHostLowCopyOffset(grad.bytes())
          : nullptr;
  site->update.paramPersists = low;
  const void *copyBackSource = low ? site->update.param : update.master;
  site->engine = &offloadEngine(ctx);
  cudaStream_t out = state->copyOut, back = state->copyBack;
  const float *stateScalars =
      scaling && scaling->state.data
          ? static_cast<const float *>(scaling->state.data)
          : nullptr;
  // Each call records its error on the context; the chain stops at the
  // first.
  bool queued =
      checkCuda(ctx, node, cudaEventRecord(site->ready, ctx.stream),
                "cudaEventRecord") &&
      checkCuda(ctx, node, cudaStreamWaitEvent(out, site->ready, 0),
                "cudaStreamWaitEvent") &&
      checkCuda(ctx, node,
                cudaMemcpyAsync(
                    static_cast<uint8_t *>(staging) + kHostStagingScalarBytes,
                    grad.data, grad.bytes(), cudaMemcpyDeviceToHost, out),
                "cudaMemcpyAsync (offload gradient)") &&
      copyScalar(ctx, node, out, staging, kStagingLr, lr.data) &&
      copyScalar(ctx, node, out, staging, kStagingStep,
                 step ? step->data : nullptr) &&
      copyScalar(ctx, node, out, staging, kStagingMicroStep,
                 accumulation ? accumulation->microStep.data : nullptr) &&
      copyScalar(ctx, node, out, staging, kStagingLossScale,
                 scaling ? scaling->scale.data : nullptr) &&
      copyScalar(ctx, node, out, staging, kStagingFoundInf,
                 scaling ? scaling->foundInf.data : nullptr) &&
      copyScalar(ctx, node, out, staging, kStagingSkipped,
                 stateScalars ? stateScalars + 1 : nullptr) &&
      checkCuda(ctx, node, cudaEventRecord(site->copied, out),
                "cudaEventRecord") &&
      waitForCopiedGradients(ctx, node, *state, site, scaling != nullptr) &&
      checkCuda(ctx, node, cudaLaunchHostFunc(out, &queueUpdate, site),
                "cudaLaunchHostFunc") &&
      checkCuda(ctx, node, cudaEventRecord(site->queued, out),
                "cudaEventRecord") &&
      checkCuda(ctx, node, cudaStreamWaitEvent(back, site->queued, 0),
                "cudaStreamWaitEvent") &&
      checkCuda(ctx, node, cudaLaunchHostFunc(back, &waitForUpdate, site),
                "cudaLaunchHostFunc") &&
      checkCuda(ctx, node,
                cudaMemcpyAsync(param.data, copyBackSource, param.bytes(),
                                cudaMemcpyHostToDevice, back),
                "cudaMemcpyAsync (offload master)");
  (void)queued;
}

} // namespace

void *hostStateAlloc(Context &ctx, size_t bytes) {
  void *ptr = nullptr;
  size_t rounded = std::max<size_t>((bytes + 255) / 256 * 256, 256);
  // The what says how much: the host's physical memory is the limit
  // (--offload optimizer keeps masters, moments and perhaps accumulators
  // there), and the compiler does not know the run's host.
  char what[192];
  std::snprintf(what, sizeof what,
                "cudaHostAlloc of %.2f GiB (pinned host state region: the f32 "
                "masters, the optimizer state and any host accumulators)",
                double(rounded) / double(1ull << 30));
  if (!checkCuda(ctx, "<host state>",
                 cudaHostAlloc(&ptr, rounded, cudaHostAllocPortable), what))
    return nullptr;
  std::memset(ptr, 0, rounded);
  return ptr;
}

void hostStateFree(Context &, void *ptr) {
  if (ptr)
    cudaFreeHost(ptr);
}

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
  offloadUpdate(ctx, node, site, staging, update, param, grad, lr, nullptr,
                accumulation, scaling);
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
  offloadUpdate(ctx, node, site, staging, update, param, grad, lr, &step,
                accumulation, scaling);
}

double measureOptimizerCopySecondsPerGiB(Context &ctx) {
  OffloadEngine *engine = ctx.optimizerOffload;
  auto *state = engine ? static_cast<CudaOffload *>(engine->backend) : nullptr;
  if (!state || hasError(ctx))
    return 0;
  // A pinned scratch buffer (the host state holds masters and moments: not
  // to be overwritten) of the host state's size up to 256 MiB, timed on the
  // copy-out and copy-back streams.
  size_t bytes = std::clamp<size_t>(engine->hostStateBytes, size_t(1) << 20,
                                    size_t(256) << 20);
  void *scratch = nullptr;
  if (!checkCuda(ctx, "<copy bandwidth>",
                 cudaHostAlloc(&scratch, bytes, cudaHostAllocPortable),
                 "cudaHostAlloc (copy bandwidth scratch)"))
    return 0;
  double seconds = timeCopySecondsPerGiB(ctx, scratch, bytes, state->copyOut,
                                         state->copyBack);
  cudaFreeHost(scratch);
  return seconds;
}

void offloadFinish(Context &ctx) {
  if (hasError(ctx))
    return;
  CudaOffload *state = cudaOffload(ctx, "<offload>");
  if (!state)
    return;
  // The copy-back stream's last work follows every copy out (each H2D
  // waits for its update's queued event, recorded after its D2H), so this
  // one wait covers the copy still in flight too.
  state->inFlight = nullptr;
  if (checkCuda(ctx, "<offload>",
                cudaEventRecord(state->finished, state->copyBack),
                "cudaEventRecord"))
    checkCuda(ctx, "<offload>",
              cudaStreamWaitEvent(ctx.stream, state->finished, 0),
              "cudaStreamWaitEvent");
  offloadCheck(ctx);
}

OffloadEngine &offloadEngine(Context &ctx) {
  if (!ctx.optimizerOffload)
    ctx.optimizerOffload = new OffloadEngine();
  return *ctx.optimizerOffload;
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
