//===- WeightStream.cu - weight-region primitives of the CUDA backend -----===//
//
// WeightStream.h on CUDA: pinned staging slots (cudaHostAlloc) whose copies
// run on the context's stream, each followed by an event the host waits on
// before it refills the slot, so that reading chunk k + 1 from disk overlaps
// the DMA of chunk k; zeroing with cudaMemsetAsync; and --random-weights'
// fill as a grid-stride kernel over WeightStream.h's generator.
//
//===----------------------------------------------------------------------===//

#include "../WeightStream.h"
#include "CudaDevice.cuh"

#include <type_traits>
#include <vector>

namespace memopt::rt {

struct Staging {
  std::vector<void *> slots;
  std::vector<cudaEvent_t> done;
  size_t slotBytes = 0;
};

void *hostAddressOf(Context &, void *) { return nullptr; }

Staging *createStaging(Context &ctx, size_t slotBytes, int slots) {
  const char *node = "<weight staging>";
  if (hasError(ctx))
    return nullptr;
  auto *staging = new Staging();
  staging->slotBytes = slotBytes;
  for (int s = 0; s < slots; ++s) {
    void *slot = nullptr;
    cudaEvent_t event = nullptr;
    if (!checkCuda(ctx, node,
                   cudaHostAlloc(&slot, slotBytes ? slotBytes : 1,
                                 cudaHostAllocDefault),
                   "cudaHostAlloc")) {
      destroyStaging(ctx, staging);
      return nullptr;
    }
    staging->slots.push_back(slot);
    if (!checkCuda(ctx, node,
                   cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                   "cudaEventCreate")) {
      destroyStaging(ctx, staging);
      return nullptr;
    }
    staging->done.push_back(event);
  }
  return staging;
}

void destroyStaging(Context &ctx, Staging *staging) {
  if (!staging)
    return;
  // The copies queued from the slots finish before their memory goes.
  if (ctx.stream)
    cudaStreamSynchronize(ctx.stream);
  for (cudaEvent_t event : staging->done)
    cudaEventDestroy(event);
  for (void *slot : staging->slots)
    cudaFreeHost(slot);
  delete staging;
}

uint8_t *stagingSlot(Context &ctx, Staging &staging, int slot) {
  if (hasError(ctx) ||
      !checkCuda(ctx, "<weight staging>",
                 cudaEventSynchronize(staging.done[size_t(slot)]),
                 "cudaEventSynchronize"))
    return nullptr;
  return static_cast<uint8_t *>(staging.slots[size_t(slot)]);
}

namespace {

void queueSlotCopy(Context &ctx, Staging &staging, int slot, void *dst,
                   const void *src, size_t bytes, cudaMemcpyKind kind) {
  const char *node = "<weight staging>";
  if (hasError(ctx) || !bytes)
    return;
  if (checkCuda(ctx, node, cudaMemcpyAsync(dst, src, bytes, kind, ctx.stream),
                "cudaMemcpyAsync"))
    checkCuda(ctx, node,
              cudaEventRecord(staging.done[size_t(slot)], ctx.stream),
              "cudaEventRecord");
}

template <typename T>
__global__ void randomUniformKernel(T *data, int64_t count, uint64_t stream,
                                    double low, double high) {
  MEMOPT_GRID_STRIDE(i, count) {
    double value = randomWeightValue(stream, uint64_t(i), low, high);
    if constexpr (std::is_same_v<T, double>)
      data[i] = value;
    else if constexpr (std::is_same_v<T, float>)
      data[i] = __double2float_rn(value);
    else if constexpr (std::is_same_v<T, __half>)
      data[i] = __float2half_rn(__double2float_rn(value));
    else
      data[i] = __float2bfloat16_rn(__double2float_rn(value));
  }
}

template <typename T>
void launchRandomUniform(Context &ctx, void *device, int64_t count,
                         uint64_t stream, double low, double high) {
  randomUniformKernel<T><<<gridFor(ctx, count), 256, 0, ctx.stream>>>(
      static_cast<T *>(device), count, stream, low, high);
  checkLaunch(ctx, "<random weights>");
}

} // namespace

void stagingToDevice(Context &ctx, Staging &staging, int slot, void *device,
                     size_t bytes) {
  queueSlotCopy(ctx, staging, slot, device, staging.slots[size_t(slot)], bytes,
                cudaMemcpyHostToDevice);
}

void stagingFromDevice(Context &ctx, Staging &staging, int slot,
                       const void *device, size_t bytes) {
  queueSlotCopy(ctx, staging, slot, staging.slots[size_t(slot)], device, bytes,
                cudaMemcpyDeviceToHost);
}

void zeroDevice(Context &ctx, void *device, size_t bytes) {
  if (!hasError(ctx) && bytes)
    checkCuda(ctx, "<weights>", cudaMemsetAsync(device, 0, bytes, ctx.stream),
              "cudaMemsetAsync");
}

void fillRandomUniform(Context &ctx, void *device, DType dtype, int64_t count,
                       uint64_t stream, double low, double high) {
  if (hasError(ctx) || count <= 0)
    return;
  switch (dtype) {
  case DType::F32:
    return launchRandomUniform<float>(ctx, device, count, stream, low, high);
  case DType::F16:
    return launchRandomUniform<__half>(ctx, device, count, stream, low, high);
  case DType::BF16:
    return launchRandomUniform<__nv_bfloat16>(ctx, device, count, stream, low,
                                              high);
  case DType::F64:
    return launchRandomUniform<double>(ctx, device, count, stream, low, high);
  default:
    failf(ctx, "<random weights>", "no random fill for dtype %s",
          dtypeName(dtype));
  }
}

} // namespace memopt::rt
