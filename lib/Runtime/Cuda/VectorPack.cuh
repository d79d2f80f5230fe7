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

/// The bytes of V consecutive elements of T, as loadRawPack reads them.
template <typename T, int V> struct RawPack { alignas(16) T v[V]; };

/// V consecutive elements of T (V * sizeof(T) of 1, 2, 4, 8 or 16 bytes,
/// aligned to that size) as one load, not yet widened: a kernel can issue
/// several before it uses any.
template <typename T, int V>
__device__ __forceinline__ RawPack<T, V> loadRawPack(const T *p, int64_t unit) {
  constexpr int kBytes = V * int(sizeof(T));
  RawPack<T, V> r;
  if constexpr (kBytes == 16)
    *reinterpret_cast<uint4 *>(r.v) = reinterpret_cast<const uint4 *>(p)[unit];
  else if constexpr (kBytes == 8)
    *reinterpret_cast<uint2 *>(r.v) = reinterpret_cast<const uint2 *>(p)[unit];
  else if constexpr (kBytes == 4 && V > 1)
    *reinterpret_cast<uint32_t *>(r.v) =
        reinterpret_cast<const uint32_t *>(p)[unit];
  else
    r.v[0] = p[unit];
  return r;
}

/// The same, widened to f32.
template <typename T, int V>
__device__ __forceinline__ void loadPack(const T *p, int64_t unit,
                                         float (&out)[V]) {
  RawPack<T, V> r = loadRawPack<T, V>(p, unit);
#pragma unroll
  for (int k = 0; k < V; ++k)
    out[k] = toFloat(r.v[k]);
}

/// V floats rounded to T and stored as one access (aligned as above).
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
