//===- CudaDevice.cuh - device helpers for the memopt kernels ----*- CUDA
//-*-===//
//
// Type conversion, dtype dispatch and index math shared by the kernel files.
// Kernels are templated on the element type only (float, __half,
// __nv_bfloat16, or an unsigned integer of the element's size for pure data
// movement); op kinds are runtime switches on uniform values, which keeps the
// number of instantiations, and so the build time, small.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_RUNTIME_CUDA_CUDADEVICE_CUH
#define MEMOPT_LIB_RUNTIME_CUDA_CUDADEVICE_CUH

#include "CudaInternal.h"
// toFloat / fromFloat and the activation / unary / binary math, shared with
// the kernels memopt-compile generates.
#include "memopt/Runtime/FusedKernel.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace memopt::rt {

/// Loads element i of any dtype as float (for small per-channel parameters).
__device__ __forceinline__ float loadFloat(const void *p, DType t, int64_t i) {
  switch (t) {
  case DType::F16:
    return __half2float(static_cast<const __half *>(p)[i]);
  case DType::BF16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
  default:
    return static_cast<const float *>(p)[i];
  }
}

/// Offset into a (broadcast) tensor for linear output index i.
__device__ __forceinline__ int64_t offsetOf(int64_t i, const KernelDims &d) {
  int64_t offset = 0;
  for (int k = d.rank - 1; k >= 0; --k) {
    int64_t coord = i % d.shape[k];
    i /= d.shape[k];
    offset += coord * d.stride[k];
  }
  return offset;
}

#define MEMOPT_GRID_STRIDE(i, n)                                               \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);    \
       i += int64_t(gridDim.x) * blockDim.x)

/// Runs BODY with T bound to the float type of `dtype`.
#define MEMOPT_DISPATCH_FLOAT(dtype, T, ...)                                   \
  switch (dtype) {                                                             \
  case DType::F16: {                                                           \
    using T = __half;                                                          \
    __VA_ARGS__;                                                               \
    break;                                                                     \
  }                                                                            \
  case DType::BF16: {                                                          \
    using T = __nv_bfloat16;                                                   \
    __VA_ARGS__;                                                               \
    break;                                                                     \
  }                                                                            \
  default: {                                                                   \
    using T = float;                                                           \
    __VA_ARGS__;                                                               \
    break;                                                                     \
  }                                                                            \
  }

/// Runs BODY with T bound to an unsigned integer of the element's size.
#define MEMOPT_DISPATCH_BYTES(elemSize, T, ...)                                \
  switch (elemSize) {                                                          \
  case 1: {                                                                    \
    using T = uint8_t;                                                         \
    __VA_ARGS__;                                                               \
    break;                                                                     \
  }                                                                            \
  case 2: {                                                                    \
    using T = uint16_t;                                                        \
    __VA_ARGS__;                                                               \
    break;                                                                     \
  }                                                                            \
  case 4: {                                                                    \
    using T = uint32_t;                                                        \
    __VA_ARGS__;                                                               \
    break;                                                                     \
  }                                                                            \
  default: {                                                                   \
    using T = uint64_t;                                                        \
    __VA_ARGS__;                                                               \
    break;                                                                     \
  }                                                                            \
  }

/// a / b for non-negative a, b; 32-bit division where both fit (a 64-bit
/// division is a long software sequence on the GPU).
__device__ __forceinline__ int64_t quotient(int64_t a, int64_t b) {
  if (((uint64_t(a) | uint64_t(b)) >> 32) == 0)
    return int64_t(uint32_t(a) / uint32_t(b));
  return a / b;
}

/// Warp-wide sum / max.
__device__ __forceinline__ float warpSum(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warpMax(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

constexpr float kLog2e = 1.4426950408889634f;

/// An attention score in the log2 domain (the attention kernels use exp2f).
/// Finite scores near -FLT_MAX / log2(e) (a mask filled with finfo.min, as
/// the dynamo exporter and HuggingFace write them, plus a score) would
/// overflow to -inf there and turn a fully masked row from the uniform row of
/// the graph (and of the host, which computes in double) into 0 / 0 (or zeros
/// with the safe softmax): below -2.35e38 (kAttentionSaturation) they
/// saturate at -FLT_MAX instead. -inf stays -inf, NaN stays NaN.
__device__ __forceinline__ float toLog2Domain(float x) {
  return x < kAttentionSaturation && x != -INFINITY ? -3.4028234663852886e38f
                                                    : x * kLog2e;
}

/// Block-wide reduction (blockDim.x a multiple of 32, <= 1024); every thread
/// gets the result. `scratch` holds 32 floats.
template <bool IsMax>
__device__ __forceinline__ float blockReduce(float v, float *scratch) {
  v = IsMax ? warpMax(v) : warpSum(v);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  int warps = blockDim.x >> 5;
  v = lane < warps ? scratch[lane] : (IsMax ? -INFINITY : 0.0f);
  v = IsMax ? warpMax(v) : warpSum(v);
  return v;
}

} // namespace memopt::rt

#endif // MEMOPT_LIB_RUNTIME_CUDA_CUDADEVICE_CUH
