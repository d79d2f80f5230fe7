//===- HostWeights.cpp - weight-region primitives of the host backend -----===//
//
// WeightStream.h on the host: device memory is host memory, so the driver
// reads weight files straight into the region (hostAddressOf); the staging
// slots exist for tests that take the CUDA backend's path
// (MEMOPT_WEIGHT_STAGING=1) and are plain memory copied synchronously.
//
//===----------------------------------------------------------------------===//

#include "../WeightStream.h"
#include "HostInternal.h"

#include <cstdlib>
#include <cstring>
#include <vector>

namespace memopt::rt {

struct Staging {
  std::vector<void *> slots;
  size_t slotBytes = 0;
};

void *hostAddressOf(Context &, void *device) { return device; }

Staging *createStaging(Context &ctx, size_t slotBytes, int slots) {
  auto *staging = new Staging();
  staging->slotBytes = slotBytes;
  for (int s = 0; s < slots; ++s) {
    void *slot = deviceAlloc(ctx, slotBytes, "<weight staging>");
    if (!slot) {
      destroyStaging(ctx, staging);
      return nullptr;
    }
    staging->slots.push_back(slot);
  }
  return staging;
}

void destroyStaging(Context &ctx, Staging *staging) {
  if (!staging)
    return;
  for (void *slot : staging->slots)
    deviceFree(ctx, slot);
  delete staging;
}

uint8_t *stagingSlot(Context &ctx, Staging &staging, int slot) {
  if (hasError(ctx))
    return nullptr;
  return static_cast<uint8_t *>(staging.slots[size_t(slot)]);
}

void stagingToDevice(Context &ctx, Staging &staging, int slot, void *device,
                     size_t bytes) {
  if (!hasError(ctx) && bytes)
    std::memcpy(device, staging.slots[size_t(slot)], bytes);
}

void stagingFromDevice(Context &ctx, Staging &staging, int slot,
                       const void *device, size_t bytes) {
  if (!hasError(ctx) && bytes)
    std::memcpy(staging.slots[size_t(slot)], device, bytes);
}

void zeroDevice(Context &ctx, void *device, size_t bytes) {
  if (hasError(ctx) || !bytes)
    return;
  auto *base = static_cast<uint8_t *>(device);
  // Chunks of 4 MiB on the threads: the pages of a fresh region are first
  // touched here.
  constexpr int64_t kChunk = int64_t(1) << 22;
  int64_t chunks = (int64_t(bytes) + kChunk - 1) / kChunk;
  host::parallelFor(ctx, 0, chunks, 1, [&](int64_t lo, int64_t hi) {
    size_t begin = size_t(lo * kChunk);
    size_t end = std::min(bytes, size_t(hi * kChunk));
    std::memset(base + begin, 0, end - begin);
  });
}

void fillRandomUniform(Context &ctx, void *device, DType dtype, int64_t count,
                       uint64_t stream, double low, double high) {
  if (hasError(ctx) || count <= 0)
    return;
  host::parallelFor(
      ctx, 0, count, host::kElementGrain, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i)
          storeFromDouble(device, dtype, i,
                          randomWeightValue(stream, uint64_t(i), low, high));
      });
}

} // namespace memopt::rt
