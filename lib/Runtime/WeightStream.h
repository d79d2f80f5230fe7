//===- WeightStream.h - backend primitives for the weight region -*- C++-*-===//
//
// What the driver (WeightIO.cpp) needs from a backend to move the weight
// region between a file and the device without a host copy of the whole
// model (issue 25): page-locked staging slots that the host fills (or
// drains) while the device copies the other slot, stream-ordered zeroing,
// and --random-weights' uniform fill computed on the device. Each backend
// defines these (Host/HostWeights.cpp, Cuda/WeightStream.cu); the generator
// below is compiled by both, so host and CUDA fill bit-identical regions.
// Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_RUNTIME_WEIGHTSTREAM_H
#define MEMOPT_LIB_RUNTIME_WEIGHTSTREAM_H

#include "Internal.h"

#include <cmath>
#include <cstdint>

namespace memopt::rt {

/// Where `device` memory can be read and written by the host directly: the
/// host backend's device memory is host memory (returns `device`); CUDA
/// returns nullptr (copies go through staging).
void *hostAddressOf(Context &ctx, void *device);

/// `slots` host buffers of `slotBytes` each for streamed copies: page-locked
/// on CUDA (cudaHostAlloc), each with an event marking the end of the copy
/// last queued from or into it. nullptr with the context failed when the
/// memory cannot be had.
struct Staging;
Staging *createStaging(Context &ctx, size_t slotBytes, int slots);
/// Waits for the pending copies and frees the buffers.
void destroyStaging(Context &ctx, Staging *staging);
/// Slot `slot`'s buffer, once the copy last queued from or into it has
/// finished (the host waits for that copy only); nullptr after an error.
uint8_t *stagingSlot(Context &ctx, Staging &staging, int slot);
/// Queues the copy of the first `bytes` of slot `slot` to `device` on the
/// context's stream; the slot stays busy until stagingSlot returns it.
void stagingToDevice(Context &ctx, Staging &staging, int slot, void *device,
                     size_t bytes);
/// Queues the copy of `bytes` at `device` into slot `slot` (read it once
/// stagingSlot returns it).
void stagingFromDevice(Context &ctx, Staging &staging, int slot,
                       const void *device, size_t bytes);

/// Sets `bytes` of device memory to zero (stream-ordered).
void zeroDevice(Context &ctx, void *device, size_t bytes);
/// Element i of the `count` elements of float tensor `device` (F32, F16,
/// BF16 or F64) becomes randomWeightValue(stream, i, low, high) rounded to
/// the dtype (stream-ordered).
void fillRandomUniform(Context &ctx, void *device, DType dtype, int64_t count,
                       uint64_t stream, double low, double high);

/// splitmix64 (Steele et al., "Fast splittable pseudorandom number
/// generators", OOPSLA'14): the finalizer of a 64-bit counter.
MEMOPT_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// --random-weights' value of element `i` of the weight keyed `stream`:
/// uniform in [low, high) from the top 53 bits of splitmix64(stream + i).
/// One fused multiply-add (exactly rounded on every device, so no compiler
/// contraction can make the host and CUDA values differ).
MEMOPT_HOST_DEVICE inline double randomWeightValue(uint64_t stream, uint64_t i,
                                                   double low, double high) {
  uint64_t bits = splitmix64(stream + i);
  double u = double(bits >> 11) * (1.0 / 9007199254740992.0);
#ifdef __CUDA_ARCH__
  return fma(high - low, u, low);
#else
  return std::fma(high - low, u, low);
#endif
}

} // namespace memopt::rt

#endif // MEMOPT_LIB_RUNTIME_WEIGHTSTREAM_H
