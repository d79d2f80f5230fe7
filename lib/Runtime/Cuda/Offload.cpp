//===- Offload.cpp - activation offload on the CUDA backend ---------------===//
//
// Saved activations to pinned host memory and back (Runtime.h, "Activation
// offload"; docs/offload.md). torchtune's activation offloading, compiled:
// the pool is one cudaHostAlloc'd block whose offsets the compiler planned,
// the device-to-host copies run on one copy stream and the host-to-device
// copies on another (the GPU's two copy engines work in parallel), each
// copy after an event recorded on the compute stream (so it starts after
// the producer, or after the last reader of the bytes a reload overwrites),
// and the compute stream waits on the copy's own event where the compiler
// placed the wait. Inside a CUDA graph capture the same event record /
// wait pairs fork the copy streams off the captured stream and join them
// back, so the copies become graph nodes with those dependencies; every
// copy is joined by its wait before the capture ends.
//
//===----------------------------------------------------------------------===//

#include "CudaInternal.h"

#include <algorithm>

namespace memopt::rt {

struct OffloadState {
  uint8_t *pool = nullptr;
  size_t poolBytes = 0;
  cudaStream_t d2h = nullptr, h2d = nullptr;
  /// Per slot: the compute stream's point a copy starts after, and the
  /// copy's completion.
  std::vector<cudaEvent_t> offloadIssued, offloadDone;
  std::vector<cudaEvent_t> reloadIssued, reloadDone;
};

namespace {

/// Makes sure `events[slot]` exists. Events are created in the first run,
/// which is eager (execute() captures from the second).
bool ensureEvent(Context &ctx, const char *node,
                 std::vector<cudaEvent_t> &events, int64_t slot) {
  while (int64_t(events.size()) <= slot) {
    cudaEvent_t event = nullptr;
    if (!checkCuda(ctx, node,
                   cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                   "cudaEventCreate"))
      return false;
    events.push_back(event);
  }
  return true;
}

OffloadState *stateFor(Context &ctx, const char *node, int64_t hostOffset,
                       int64_t bytes) {
  OffloadState *state = ctx.offload;
  if (!validateHostPoolRange(ctx, node, hostOffset, bytes, state != nullptr,
                             state ? state->poolBytes : size_t(0)))
    return nullptr;
  return state;
}

/// `copyStream` starts after what the compute stream enqueued so far, runs
/// the copy, and records `done`.
void copyAfterCompute(Context &ctx, const char *node, cudaStream_t copyStream,
                      cudaEvent_t issued, cudaEvent_t done, void *dst,
                      const void *src, int64_t bytes, cudaMemcpyKind kind) {
  if (!checkCuda(ctx, node, cudaEventRecord(issued, ctx.stream),
                 "cudaEventRecord") ||
      !checkCuda(ctx, node, cudaStreamWaitEvent(copyStream, issued, 0),
                 "cudaStreamWaitEvent") ||
      !checkCuda(ctx, node,
                 cudaMemcpyAsync(dst, src, size_t(bytes), kind, copyStream),
                 "cudaMemcpyAsync"))
    return;
  checkCuda(ctx, node, cudaEventRecord(done, copyStream), "cudaEventRecord");
}

void computeWaits(Context &ctx, const char *node,
                  std::vector<cudaEvent_t> &events, int64_t slot) {
  if (slot < 0 || slot >= int64_t(events.size())) {
    failf(ctx, node, "waits on offload slot %lld, which was never started",
          (long long)slot);
    return;
  }
  checkCuda(ctx, node, cudaStreamWaitEvent(ctx.stream, events[slot], 0),
            "cudaStreamWaitEvent");
}

} // namespace

void destroyOffloadState(Context &ctx) {
  OffloadState *state = ctx.offload;
  if (!state)
    return;
  for (auto *events : {&state->offloadIssued, &state->offloadDone,
                       &state->reloadIssued, &state->reloadDone})
    for (cudaEvent_t event : *events)
      cudaEventDestroy(event);
  if (state->d2h) {
    cudaStreamSynchronize(state->d2h);
    cudaStreamDestroy(state->d2h);
  }
  if (state->h2d) {
    cudaStreamSynchronize(state->h2d);
    cudaStreamDestroy(state->h2d);
  }
  if (state->pool)
    cudaFreeHost(state->pool);
  delete state;
  ctx.offload = nullptr;
}

void reserveHostPool(Context &ctx, size_t bytes) {
  if (bytes == 0 || ctx.offload)
    return;
  const char *node = "<host pool>";
  auto *state = new OffloadState();
  ctx.offload = state;
  if (!checkCuda(ctx, node, cudaHostAlloc(&state->pool, bytes, 0),
                 "cudaHostAlloc (pinned host pool of offloaded activations)"))
    return;
  state->poolBytes = bytes;
  if (checkCuda(ctx, node,
                cudaStreamCreateWithFlags(&state->d2h, cudaStreamNonBlocking),
                "cudaStreamCreate"))
    checkCuda(ctx, node,
              cudaStreamCreateWithFlags(&state->h2d, cudaStreamNonBlocking),
              "cudaStreamCreate");
}

double timeCopySecondsPerGiB(Context &ctx, void *host, size_t bytes,
                             cudaStream_t d2h, cudaStream_t h2d) {
  // Both directions, the best of three each (the first warms the path), on
  // the streams the program copies on; the slower direction, per GiB.
  const char *node = "<copy bandwidth>";
  void *device = nullptr;
  cudaEvent_t begin = nullptr, end = nullptr;
  double worst = 0;
  if (checkCuda(ctx, node, cudaMalloc(&device, bytes), "cudaMalloc") &&
      checkCuda(ctx, node, cudaEventCreate(&begin), "cudaEventCreate") &&
      checkCuda(ctx, node, cudaEventCreate(&end), "cudaEventCreate")) {
    for (bool toHost : {true, false}) {
      cudaStream_t stream = toHost ? d2h : h2d;
      float best = -1;
      for (int trial = 0; trial < 3; ++trial) {
        float ms = 0;
        if (!checkCuda(ctx, node, cudaEventRecord(begin, stream),
                       "cudaEventRecord") ||
            !checkCuda(ctx, node,
                       toHost ? cudaMemcpyAsync(host, device, bytes,
                                                cudaMemcpyDeviceToHost, stream)
                              : cudaMemcpyAsync(device, host, bytes,
                                                cudaMemcpyHostToDevice, stream),
                       "cudaMemcpyAsync") ||
            !checkCuda(ctx, node, cudaEventRecord(end, stream),
                       "cudaEventRecord") ||
            !checkCuda(ctx, node, cudaEventSynchronize(end),
                       "cudaEventSynchronize") ||
            !checkCuda(ctx, node, cudaEventElapsedTime(&ms, begin, end),
                       "cudaEventElapsedTime"))
          break;
        if (best < 0 || ms < best)
          best = ms;
      }
      if (best > 0)
        worst = std::max(worst, double(best) / 1000.0 *
                                    double(size_t(1) << 30) / double(bytes));
    }
  }
  if (begin)
    cudaEventDestroy(begin);
  if (end)
    cudaEventDestroy(end);
  if (device)
    cudaFree(device);
  return hasError(ctx) ? 0 : worst;
}

double measureCopySecondsPerGiB(Context &ctx) {
  OffloadState *state = ctx.offload;
  if (!state || !state->pool || hasError(ctx))
    return 0;
  // The pool's size up to 256 MiB, between the pool and the device.
  return timeCopySecondsPerGiB(
      ctx, state->pool, std::min<size_t>(state->poolBytes, size_t(256) << 20),
      state->d2h, state->h2d);
}

uint8_t *hostPool(Context &ctx) {
  return ctx.offload ? ctx.offload->pool : nullptr;
}

void offloadStart(Context &ctx, const char *nodeName, int64_t slot,
                  const void *src, int64_t hostOffset, int64_t bytes) {
  OffloadState *state = stateFor(ctx, nodeName, hostOffset, bytes);
  if (!state || !ensureEvent(ctx, nodeName, state->offloadIssued, slot) ||
      !ensureEvent(ctx, nodeName, state->offloadDone, slot))
    return;
  copyAfterCompute(ctx, nodeName, state->d2h, state->offloadIssued[slot],
                   state->offloadDone[slot], state->pool + hostOffset, src,
                   bytes, cudaMemcpyDeviceToHost);
}

void offloadWait(Context &ctx, const char *nodeName, int64_t slot) {
  if (ctx.offload)
    computeWaits(ctx, nodeName, ctx.offload->offloadDone, slot);
  else
    failf(ctx, nodeName, "offload wait without a host pool");
}

void reloadStart(Context &ctx, const char *nodeName, int64_t slot, void *dst,
                 int64_t hostOffset, int64_t bytes) {
  OffloadState *state = stateFor(ctx, nodeName, hostOffset, bytes);
  if (!state || !ensureEvent(ctx, nodeName, state->reloadIssued, slot) ||
      !ensureEvent(ctx, nodeName, state->reloadDone, slot))
    return;
  copyAfterCompute(ctx, nodeName, state->h2d, state->reloadIssued[slot],
                   state->reloadDone[slot], dst, state->pool + hostOffset,
                   bytes, cudaMemcpyHostToDevice);
}

void reloadWait(Context &ctx, const char *nodeName, int64_t slot) {
  if (ctx.offload)
    computeWaits(ctx, nodeName, ctx.offload->reloadDone, slot);
  else
    failf(ctx, nodeName, "reload wait without a host pool");
}

} // namespace memopt::rt
