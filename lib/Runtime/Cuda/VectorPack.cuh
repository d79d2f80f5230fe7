//===- VectorPack.cuh - packed loads and stores --------------*- CUDA -*-===//
//
// V consecutive elements of a float type as one 4-, 8- or 16-byte load or
// store, widened to / rounded from f32 in registers: the vectorized access
// of the normalization and pooling kernels (PyTorch's vectorized
// elementwise loads; channels-last kernels pack neighbouring channels).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_RUNTIME_CUDA_VECTORPACK_CUH
#define MEMOPT_LIB_RUNTIME_CUDA_VECTORPACK_CUH

#include "CudaDevice.cuh"

namespace memopt::rt {

/// V consecutive elements of T (V * sizeof(T) of 1, 2, 4, 8 or 16 bytes,
/// aligned to that size) as one load or store.
template <typename T, int V>
__device__ __forceinline__ void loadPack(const T *p, int64_t unit,
                                         float (&out)[V]) {
  constexpr int kBytes = V * int(sizeof(T));
  alignas(16) T v[V];
  if constexpr (kBytes == 16)
    *reinterpret_cast<uint4 *>(v) = reinterpret_cast<const uint4 *>(p)[unit];
  else if constexpr (kBytes == 8)
    *reinterpret_cast<uint2 *>(v) = reinterpret_cast<const uint2 *>(p)[unit];
  else if constexpr (kBytes == 4 && V > 1)
    *reinterpret_cast<uint32_t *>(v) =
        reinterpret_cast<const uint32_t *>(p)[unit];
  else
    v[0] = p[unit];
#pragma unroll
  for (int k = 0; k < V; ++k)
    out[k] = toFloat(v[k]);
}
template <typename T, int V>
__device__ __forceinline__ void storePack(T *p, int64_t unit,
                                          const float (&in)[V]) {
  constexpr int kBytes = V * int(sizeof(T));
  alignas(16) T v[V];
#pragma unroll
  for (int k = 0; k < V; ++k)
    v[k] = fromFloat<T>(in[k]);
  if constexpr (kBytes == 16)
    reinterpret_cast<uint4 *>(p)[unit] = *reinterpret_cast<const uint4 *>(v);
  else if constexpr (kBytes == 8)
    reinterpret_cast<uint2 *>(p)[unit] = *reinterpret_cast<const uint2 *>(v);
  else if constexpr (kBytes == 4 && V > 1)
    reinterpret_cast<uint32_t *>(p)[unit] =
        *reinterpret_cast<const uint32_t *>(v);
  else
    p[unit] = v[0];
}

} // namespace memopt::rt

#endif // MEMOPT_LIB_RUNTIME_CUDA_VECTORPACK_CUH
