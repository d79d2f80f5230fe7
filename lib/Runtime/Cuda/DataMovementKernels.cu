//===- DataMovementKernels.cu - transpose, slice, gather, scatter, pad ----===//
//
// The CUDA side of Host/DataMovement.cpp: transpose and slice as one strided
// copy (moving up to 16 bytes per thread where runs are contiguous and
// aligned), concat / split through it, gather and gatherElements, scatterND
// (onnxruntime's layout: one thread per update element), pad and resize; one
// thread per output element with precomputed strides. Split from Kernels.cu
// (issue 28: one file per op family on both sides).
//
//===----------------------------------------------------------------------===//

#include "CudaDevice.cuh"

#include <type_traits>

namespace memopt::rt {

namespace {

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// Shape and x strides of a copy y[i] = x[base + offset(i)], in an index
/// type I (int32_t where every index and offset fits, which saves the 64-bit
/// divisions).
template <typename I> struct CopyDims {
  int rank;
  I shape[kMaxRank], stride[kMaxRank];
};

template <typename I>
__device__ __forceinline__ I copyOffset(I i, const CopyDims<I> &d) {
  I offset = 0;
  for (int k = d.rank - 1; k > 0; --k) {
    I coord = i % d.shape[k];
    i /= d.shape[k];
    offset += coord * d.stride[k];
  }
  return offset + i * d.stride[0];
}

/// y[i] = x[base + copyOffset(i, dims)] (transpose, slice). T is an unsigned
/// integer of the element's size or, for runs that are contiguous in x and
/// aligned, a vector of up to 16 bytes (uint4).
template <typename T, typename I>
__global__ void stridedCopyKernel(const T *__restrict__ x, T *__restrict__ y,
                                  I n, I base, CopyDims<I> dims) {
  for (I i = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); i < n;
       i += I(gridDim.x) * I(blockDim.x))
    y[i] = x[base + copyOffset(i, dims)];
}

/// Batched 2-D transpose [batch, rows, cols] -> [batch, cols, rows] through
/// a 32x33 shared-memory tile, so both the reads and the writes are
/// coalesced (the classic CUDA SDK transpose).
template <typename T>
__global__ void tiledTransposeKernel(const T *x, T *y, int64_t batch,
                                     int64_t rows, int64_t cols) {
  __shared__ T tile[32][33];
  int64_t c0 = int64_t(blockIdx.x) * 32, r0 = int64_t(blockIdx.y) * 32;
  for (int64_t b = blockIdx.z; b < batch; b += gridDim.z) {
    const T *xb = x + b * rows * cols;
    T *yb = y + b * rows * cols;
    for (int i = threadIdx.y; i < 32; i += blockDim.y) {
      int64_t r = r0 + i, c = c0 + threadIdx.x;
      if (r < rows && c < cols)
        tile[i][threadIdx.x] = xb[r * cols + c];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += blockDim.y) {
      int64_t c = c0 + i, r = r0 + threadIdx.x;
      if (r < rows && c < cols)
        yb[c * rows + r] = tile[threadIdx.x][i];
    }
    __syncthreads();
  }
}

/// The tiled copy of a permutation whose contiguous x dimension is not y's
/// innermost one (NCHW -> NHWC and every other transpose of that kind):
/// y's innermost dim (`cols`, x stride `colStride`) and the y dim that is
/// contiguous in x (`rows`, y stride `rowPitch`) go through a 32x33
/// shared-memory tile, so the reads are coalesced along x and the writes
/// along y (the classic CUDA SDK transpose); the other dims are the batch,
/// decomposed once per tile.
struct TileCopy {
  int64_t rows, cols, colStride, rowPitch, base, batch;
  KernelDims xBatch, yBatch;
};

template <typename T>
__global__ void tiledCopyKernel(const T *__restrict__ x, T *__restrict__ y,
                                TileCopy p) {
  __shared__ T tile[32][33];
  // blockIdx.x walks x's contiguous dim (the batched 2-D kernel's order).
  int64_t r0 = int64_t(blockIdx.x) * 32, c0 = int64_t(blockIdx.y) * 32;
  for (int64_t b = blockIdx.z; b < p.batch; b += gridDim.z) {
    const T *xb = x + p.base + offsetOf(b, p.xBatch);
    T *yb = y + offsetOf(b, p.yBatch);
    for (int i = threadIdx.y; i < 32; i += blockDim.y) {
      int64_t c = c0 + i, r = r0 + threadIdx.x;
      if (r < p.rows && c < p.cols)
        tile[i][threadIdx.x] = xb[r + c * p.colStride];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += blockDim.y) {
      int64_t r = r0 + i, c = c0 + threadIdx.x;
      if (r < p.rows && c < p.cols)
        yb[r * p.rowPitch + c] = tile[threadIdx.x][i];
    }
    __syncthreads();
  }
}

__device__ __forceinline__ int64_t loadIndex(const void *p, DType t,
                                             int64_t i) {
  return t == DType::I64 ? static_cast<const int64_t *>(p)[i]
                         : int64_t(static_cast<const int32_t *>(p)[i]);
}

__device__ __forceinline__ int64_t wrapIndex(int64_t index, int64_t size) {
  if (index < 0)
    index += size;
  return index < 0 ? 0 : index >= size ? size - 1 : index;
}

template <typename T>
__global__ void gatherKernel(const T *x, const void *indices, DType indexType,
                             T *y, int64_t n, int64_t count, int64_t axis,
                             int64_t inner) {
  MEMOPT_GRID_STRIDE(i, n) {
    int64_t in = i % inner, j = (i / inner) % count, o = i / (inner * count);
    int64_t index = wrapIndex(loadIndex(indices, indexType, j), axis);
    y[i] = x[(o * axis + index) * inner + in];
  }
}

template <typename T>
__global__ void
gatherElementsKernel(const T *x, const void *indices, DType indexType, T *y,
                     int64_t n, KernelDims yDims, KernelDims xDims, int axis) {
  MEMOPT_GRID_STRIDE(i, n) {
    int64_t rest = i, offset = 0;
    for (int d = yDims.rank - 1; d >= 0; --d) {
      int64_t coord = rest % yDims.shape[d];
      rest /= yDims.shape[d];
      if (d == axis)
        coord = wrapIndex(loadIndex(indices, indexType, i), xDims.shape[d]);
      offset += coord * xDims.stride[d];
    }
    y[i] = x[offset];
  }
}

//===----------------------------------------------------------------------===//
// ScatterND
//
// One thread per update element (onnxruntime's CUDA ScatterND layout: the
// copy of data first, then the scatter). Reductions combine through a
// compare-and-swap loop on the element's bits (on the aligned 32-bit word
// that holds it for 1- and 2-byte types), so repeated index tuples apply
// every update whatever the dtype; f32 add uses atomicAdd. Kernels are
// instantiated per element size and switch on the dtype at run time.
//===----------------------------------------------------------------------===//

template <typename V>
__device__ __forceinline__ V scatterValue(ScatterReduction op, V a, V b) {
  switch (op) {
  case ScatterReduction::Add:
    return a + b;
  case ScatterReduction::Mul:
    return a * b;
  case ScatterReduction::Max: // std::max(a, b)
    return a < b ? b : a;
  case ScatterReduction::Min: // std::min(a, b)
    return b < a ? b : a;
  default:
    return b;
  }
}

/// Integers: add and multiply wrap (computed on uint64_t).
__device__ __forceinline__ int64_t scatterInt(ScatterReduction op, int64_t a,
                                              int64_t b) {
  if (op == ScatterReduction::Add)
    return int64_t(uint64_t(a) + uint64_t(b));
  if (op == ScatterReduction::Mul)
    return int64_t(uint64_t(a) * uint64_t(b));
  return scatterValue(op, a, b);
}

/// Combines two elements given as their raw bits (in the low bytes); returns
/// the bits of the result (the caller keeps the element's bytes only).
__device__ __forceinline__ uint64_t scatterBits(DType dtype,
                                                ScatterReduction op, uint64_t a,
                                                uint64_t b) {
  switch (dtype) {
  case DType::F64:
    return uint64_t(__double_as_longlong(
        scatterValue(op, __longlong_as_double((long long)a),
                     __longlong_as_double((long long)b))));
  case DType::F32:
    return __float_as_uint(scatterValue(op, __uint_as_float(unsigned(a)),
                                        __uint_as_float(unsigned(b))));
  case DType::F16:
    return __half_as_ushort(__float2half_rn(
        scatterValue(op, __half2float(__ushort_as_half((unsigned short)a)),
                     __half2float(__ushort_as_half((unsigned short)b)))));
  case DType::BF16:
    return __bfloat16_as_ushort(__float2bfloat16_rn(scatterValue(
        op, __bfloat162float(__ushort_as_bfloat16((unsigned short)a)),
        __bfloat162float(__ushort_as_bfloat16((unsigned short)b)))));
  case DType::I64:
    return uint64_t(scatterInt(op, int64_t(a), int64_t(b)));
  case DType::I32:
    return uint64_t(scatterInt(op, int32_t(uint32_t(a)), int32_t(uint32_t(b))));
  case DType::I8:
    return uint64_t(scatterInt(op, int8_t(uint8_t(a)), int8_t(uint8_t(b))));
  case DType::U8:
    return uint64_t(scatterInt(op, uint8_t(a), uint8_t(b)));
  default:
    return b;
  }
}

/// *address = combine(*address, value), atomically.
template <typename U>
__device__ void atomicScatter(U *address, uint64_t value, DType dtype,
                              ScatterReduction op) {
  if constexpr (sizeof(U) == 8) {
    auto *word = reinterpret_cast<unsigned long long *>(address);
    unsigned long long seen = *word, expected;
    do {
      expected = seen;
      seen = atomicCAS(
          word, expected,
          (unsigned long long)scatterBits(dtype, op, expected, value));
    } while (seen != expected);
  } else if constexpr (sizeof(U) == 4) {
    auto *word = reinterpret_cast<unsigned int *>(address);
    unsigned int seen = *word, expected;
    do {
      expected = seen;
      seen = atomicCAS(word, expected,
                       unsigned(scatterBits(dtype, op, expected, value)));
    } while (seen != expected);
  } else {
    uintptr_t at = reinterpret_cast<uintptr_t>(address);
    auto *word = reinterpret_cast<unsigned int *>(at & ~uintptr_t(3));
    unsigned shift = unsigned(at & 3) * 8;
    unsigned mask = (sizeof(U) == 1 ? 0xffu : 0xffffu) << shift;
    unsigned int seen = *word, expected;
    do {
      expected = seen;
      unsigned current = (expected & mask) >> shift;
      unsigned next =
          (unsigned(scatterBits(dtype, op, current, value)) << shift) & mask;
      seen = atomicCAS(word, expected, (expected & ~mask) | next);
    } while (seen != expected);
  }
}

template <typename U>
__global__ void scatterNDKernel(const void *indices, DType indexType,
                                const U *updates, U *y, int64_t n,
                                ScatterGeometry g, DType dtype,
                                ScatterReduction op) {
  MEMOPT_GRID_STRIDE(i, n) {
    int64_t tuple = i / g.sliceSize, offset = i % g.sliceSize;
    bool inRange = true;
    for (int64_t d = 0; d < g.k; ++d) {
      int64_t index = loadIndex(indices, indexType, tuple * g.k + d);
      if (index < 0)
        index += g.dims[d];
      inRange = inRange && index >= 0 && index < g.dims[d];
      offset += index * g.strides[d];
    }
    if (!inRange)
      continue; // the host backend reports it; here the update is dropped
    U *target = y + offset;
    if (op == ScatterReduction::None) {
      *target = updates[i];
    } else if constexpr (sizeof(U) == 4) {
      if (dtype == DType::F32 && op == ScatterReduction::Add)
        atomicAdd(reinterpret_cast<float *>(target),
                  __uint_as_float(updates[i]));
      else
        atomicScatter(target, updates[i], dtype, op);
    } else {
      atomicScatter(target, uint64_t(updates[i]), dtype, op);
    }
  }
}

struct PadGeometry {
  int rank;
  int64_t xShape[kMaxRank], xStride[kMaxRank], yShape[kMaxRank],
      begin[kMaxRank];
};

template <typename T>
__global__ void padKernel(const T *x, T *y, int64_t n, PadGeometry g,
                          PadMode mode, T value) {
  MEMOPT_GRID_STRIDE(i, n) {
    int64_t rest = i, offset = 0;
    bool outside = false;
    for (int d = g.rank - 1; d >= 0; --d) {
      int64_t c = rest % g.yShape[d] - g.begin[d], size = g.xShape[d];
      rest /= g.yShape[d];
      if (c < 0 || c >= size) {
        if (mode == PadMode::Constant) {
          outside = true;
          continue;
        }
        if (mode == PadMode::Edge) {
          c = c < 0 ? 0 : size - 1;
        } else {
          while (c < 0 || c >= size)
            c = size == 1 ? 0 : c < 0 ? -c : 2 * (size - 1) - c;
        }
      }
      offset += c * g.xStride[d];
    }
    y[i] = outside ? value : x[offset];
  }
}

struct ResizeGeometry {
  int rank;
  int64_t xShape[kMaxRank], xStride[kMaxRank], yShape[kMaxRank];
  float scale[kMaxRank];
  bool resized[kMaxRank];
  CoordinateMode coordinateMode;
  NearestMode nearestMode;
};

template <typename T>
__global__ void resizeNearestKernel(const T *x, T *y, int64_t n,
                                    ResizeGeometry g) {
  MEMOPT_GRID_STRIDE(i, n) {
    int64_t rest = i, offset = 0;
    for (int d = g.rank - 1; d >= 0; --d) {
      int64_t c = rest % g.yShape[d];
      rest /= g.yShape[d];
      if (g.resized[d]) {
        float src = resizeSourceCoordinate(
            g.coordinateMode, float(c), g.scale[d], g.xShape[d], g.yShape[d]);
        float fl = floorf(src);
        switch (g.nearestMode) {
        case NearestMode::RoundPreferFloor:
          c = int64_t(src - fl == 0.5f ? fl : roundf(src));
          break;
        case NearestMode::RoundPreferCeil:
          c = int64_t(src - fl == 0.5f ? fl + 1.0f : roundf(src));
          break;
        case NearestMode::Floor:
          c = int64_t(fl);
          break;
        case NearestMode::Ceil:
          c = int64_t(ceilf(src));
          break;
        }
        c = c < 0 ? 0 : c >= g.xShape[d] ? g.xShape[d] - 1 : c;
      }
      offset += c * g.xStride[d];
    }
    y[i] = x[offset];
  }
}

template <typename T>
__global__ void resizeLinearKernel(const T *x, T *y, int64_t n,
                                   ResizeGeometry g) {
  MEMOPT_GRID_STRIDE(i, n) {
    int64_t rest = i, base = 0;
    int64_t low[3], high[3];
    float frac[3];
    int k = 0;
    for (int d = g.rank - 1; d >= 0; --d) {
      int64_t c = rest % g.yShape[d];
      rest /= g.yShape[d];
      if (!g.resized[d] || k == 3) {
        base += c * g.xStride[d];
        continue;
      }
      float src = resizeSourceCoordinate(g.coordinateMode, float(c), g.scale[d],
                                         g.xShape[d], g.yShape[d]);
      src = fminf(fmaxf(src, 0.0f), float(g.xShape[d] - 1));
      int64_t lo = int64_t(floorf(src));
      low[k] = lo * g.xStride[d];
      high[k] = (lo + 1 < g.xShape[d] ? lo + 1 : lo) * g.xStride[d];
      frac[k] = src - float(lo);
      ++k;
    }
    float acc = 0.0f;
    for (int corner = 0; corner < (1 << k); ++corner) {
      float weight = 1.0f;
      int64_t offset = base;
      for (int j = 0; j < k; ++j) {
        bool up = (corner >> j) & 1;
        weight *= up ? frac[j] : 1.0f - frac[j];
        offset += up ? high[j] : low[j];
      }
      acc += weight * toFloat(x[offset]);
    }
    y[i] = fromFloat<T>(acc);
  }
}

} // namespace

namespace {

/// Calls f(U()) with U an unsigned integer, or uint2 / uint4, of `bytes`
/// bytes (1 to 16): the unit a copy moves per thread.
template <typename F> void withUnit(int64_t bytes, F f) {
  switch (bytes) {
  case 16:
    return f(uint4());
  case 8:
    return f(uint2());
  case 4:
    return f(uint32_t());
  case 2:
    return f(uint16_t());
  default:
    return f(uint8_t());
  }
}

/// The widest of 16, 8, 4 and 2 bytes (down to `elemSize`) that divides the
/// `count` byte counts in `bytes` and both pointers.
int64_t widestUnit(size_t elemSize, const int64_t *bytes, int count,
                   const void *x, const void *y) {
  auto fits = [&](int64_t w) {
    if (reinterpret_cast<uintptr_t>(x) % w ||
        reinterpret_cast<uintptr_t>(y) % w)
      return false;
    for (int i = 0; i < count; ++i)
      if (bytes[i] % w)
        return false;
    return true;
  };
  int64_t width = 16;
  while (width > int64_t(elemSize) && !fits(width))
    width /= 2;
  return std::max<int64_t>(width, int64_t(elemSize));
}

/// A copy y[i] = x[base + offsetOf(i, dims)] (dims: y's shape, x's strides)
/// in its simplest form: size-1 dims dropped, and neighbours merged where x's
/// strides make them one dim (outer stride = inner stride * inner size). A
/// Swin window partition [B, H/7, 7, W/7, 7, C] -> [B, H/7, W/7, 7, 7, C]
/// becomes [B H/7, W/7, 7, 7 C] with a contiguous inner run of 7 C.
struct CopyForm {
  int rank = 0;
  int64_t shape[kMaxRank], stride[kMaxRank];
  int64_t base = 0;
};

CopyForm simplifyCopy(const KernelDims &dims, int64_t base) {
  CopyForm c;
  c.base = base;
  for (int d = 0; d < dims.rank; ++d) {
    if (dims.shape[d] == 1)
      continue;
    if (c.rank > 0 && c.stride[c.rank - 1] == dims.stride[d] * dims.shape[d]) {
      c.shape[c.rank - 1] *= dims.shape[d];
      c.stride[c.rank - 1] = dims.stride[d];
      continue;
    }
    c.shape[c.rank] = dims.shape[d];
    c.stride[c.rank] = dims.stride[d];
    ++c.rank;
  }
  return c;
}

/// Launches stridedCopyKernel over units of U (the element, or a vector of
/// elements), with 32-bit index math where every index and offset fits.
template <typename U>
void launchCopyUnits(Context &ctx, const void *x, void *y, int64_t n,
                     const CopyForm &c) {
  int64_t reach = c.base;
  for (int d = 0; d < c.rank; ++d)
    reach += (c.shape[d] - 1) * (c.stride[d] < 0 ? -c.stride[d] : c.stride[d]);
  const U *px = static_cast<const U *>(x);
  U *py = static_cast<U *>(y);
  auto launch = [&](auto zero) {
    using I = decltype(zero);
    CopyDims<I> dims;
    dims.rank = c.rank;
    for (int d = 0; d < c.rank; ++d) {
      dims.shape[d] = I(c.shape[d]);
      dims.stride[d] = I(c.stride[d]);
    }
    stridedCopyKernel<U, I><<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
        px, py, I(n), I(c.base), dims);
  };
  if (n < (int64_t(1) << 31) && reach < (int64_t(1) << 31))
    launch(int32_t(0));
  else
    launch(int64_t(0));
}

/// y (contiguous, n elements of elemSize bytes) = the copy `dims` / `base`
/// describes, on the fastest path its form allows: one cudaMemcpy for a
/// contiguous range; runs contiguous in x copied in 16-, 8- or 4-byte vectors
/// where their length, offsets and the pointers allow (a head or window
/// transpose that keeps the innermost dim, a slice of whole rows); a tiled
/// transpose where x's contiguous dim moved; the element-wise gather
/// otherwise. Taken from: onnxruntime's CUDA Transpose (merged dims, the
/// innermost-dim-kept vectorized case, the 32x32 tile) and PyTorch's
/// TensorIterator (dims coalesced by strides, 32-bit indexing where it fits).
void launchStridedCopy(Context &ctx, const char *node, const void *x, void *y,
                       size_t elemSize, int64_t n, const KernelDims &dims,
                       int64_t base) {
  CopyForm c = simplifyCopy(dims, base);
  const uint8_t *xb = static_cast<const uint8_t *>(x);
  if (c.rank == 0 || (c.rank == 1 && c.stride[0] == 1)) {
    checkCuda(ctx, node,
              cudaMemcpyAsync(y, xb + c.base * int64_t(elemSize),
                              size_t(n) * elemSize, cudaMemcpyDeviceToDevice,
                              ctx.stream),
              "cudaMemcpyAsync");
    return;
  }
  int inner = c.rank - 1;
  if (c.stride[inner] == 1) {
    // The run, the offset and every outer stride, in bytes, keep each run
    // aligned to the unit.
    int64_t bytes[kMaxRank + 2] = {c.shape[inner] * int64_t(elemSize),
                                   c.base * int64_t(elemSize)};
    for (int d = 0; d < inner; ++d)
      bytes[2 + d] = c.stride[d] * int64_t(elemSize);
    int64_t width = widestUnit(elemSize, bytes, inner + 2, x, y);
    if (width > int64_t(elemSize)) {
      int64_t per = width / int64_t(elemSize);
      CopyForm v = c;
      v.base /= per;
      v.shape[inner] /= per;
      for (int d = 0; d < inner; ++d)
        v.stride[d] /= per;
      withUnit(width, [&](auto unit) {
        launchCopyUnits<decltype(unit)>(ctx, x, y, n / per, v);
      });
      checkLaunch(ctx, node);
      return;
    }
  } else if ((c.rank == 2 && c.stride[0] == 1 && c.stride[1] == c.shape[0]) ||
             (c.rank == 3 && c.stride[1] == 1 && c.stride[2] == c.shape[1] &&
              c.stride[0] == c.shape[1] * c.shape[2])) {
    // x = [batch, rows, cols] -> y = [batch, cols, rows] with no offset: the
    // batched 2-D kernel, which timed faster than the general tiled copy
    // (H200, kernel suite --perf: NCHW -> NHWC of 32x256x56x56 in f16 0.086
    // against 0.117 ms, attention keys [8, 512, 768] -> [8, 768, 512] 0.015
    // against 0.018 ms).
    int64_t batch = c.rank == 3 ? c.shape[0] : 1;
    int64_t rows = c.shape[c.rank - 1], cols = c.shape[c.rank - 2];
    if (c.base == 0 && (rows + 31) / 32 <= 65535) {
      dim3 grid(unsigned((cols + 31) / 32), unsigned((rows + 31) / 32),
                unsigned(std::min<int64_t>(batch, 65535)));
      MEMOPT_DISPATCH_BYTES(elemSize, T,
                            tiledTransposeKernel<T>
                            <<<grid, dim3(32, 8), 0, ctx.stream>>>(
                                static_cast<const T *>(x), static_cast<T *>(y),
                                batch, rows, cols));
      checkLaunch(ctx, node);
      return;
    }
  }
  if (c.stride[inner] != 1) {
    int contiguous = -1;
    for (int d = 0; d < inner; ++d)
      if (c.stride[d] == 1)
        contiguous = d;
    if (contiguous >= 0 && c.shape[contiguous] >= 4 && c.shape[inner] >= 4 &&
        (c.shape[inner] + 31) / 32 <= 65535) {
      TileCopy p = {};
      p.rows = c.shape[contiguous];
      p.cols = c.shape[inner];
      p.colStride = c.stride[inner];
      p.base = c.base;
      int64_t yStride[kMaxRank];
      yStride[inner] = 1;
      for (int d = inner - 1; d >= 0; --d)
        yStride[d] = yStride[d + 1] * c.shape[d + 1];
      p.rowPitch = yStride[contiguous];
      p.batch = 1;
      p.xBatch.rank = p.yBatch.rank = 0;
      for (int d = 0; d < inner; ++d) {
        if (d == contiguous)
          continue;
        int k = p.xBatch.rank++;
        p.yBatch.rank++;
        p.xBatch.shape[k] = p.yBatch.shape[k] = c.shape[d];
        p.xBatch.stride[k] = c.stride[d];
        p.yBatch.stride[k] = yStride[d];
        p.batch *= c.shape[d];
      }
      dim3 grid(unsigned((p.rows + 31) / 32), unsigned((p.cols + 31) / 32),
                unsigned(std::min<int64_t>(p.batch, 65535)));
      MEMOPT_DISPATCH_BYTES(
          elemSize, T,
          tiledCopyKernel<T><<<grid, dim3(32, 8), 0, ctx.stream>>>(
              static_cast<const T *>(x), static_cast<T *>(y), p));
      checkLaunch(ctx, node);
      return;
    }
  }
  withUnit(int64_t(elemSize), [&](auto unit) {
    launchCopyUnits<decltype(unit)>(ctx, x, y, n, c);
  });
  checkLaunch(ctx, node);
}

} // namespace

void transpose(Context &ctx, const char *node, const int *perm, TensorRef x,
               TensorRef y) {
  if (hasError(ctx) || !validateTranspose(ctx, node, perm, x, y))
    return;
  int64_t n = y.numElements();
  if (n == 0)
    return;
  KernelDims dims = dimsOf(y), xDims = dimsOf(x);
  for (int d = 0; d < y.rank; ++d)
    dims.stride[d] = xDims.stride[perm[d]];
  launchStridedCopy(ctx, node, x.data, y.data, dtypeSize(y.dtype), n, dims, 0);
}

void slice(Context &ctx, const char *node, const int64_t *starts,
           const int64_t *steps, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateSlice(ctx, node, starts, steps, x, y))
    return;
  int64_t n = y.numElements();
  if (n == 0)
    return;
  KernelDims dims = dimsOf(y), xDims = dimsOf(x);
  int64_t base = 0;
  for (int d = 0; d < y.rank; ++d) {
    base += starts[d] * xDims.stride[d];
    dims.stride[d] = steps[d] * xDims.stride[d];
  }
  launchStridedCopy(ctx, node, x.data, y.data, dtypeSize(y.dtype), n, dims,
                    base);
}

void gather(Context &ctx, const char *node, int axis, TensorRef x,
            TensorRef indices, TensorRef y) {
  if (hasError(ctx) || !validateGather(ctx, node, axis, x, indices, y, false))
    return;
  int64_t n = y.numElements();
  if (n == 0)
    return;
  AxisSplit s = splitAt(x, axis);
  // Rows of `inner` elements move whole: in 16-, 8- or 4-byte vectors where
  // the row's bytes and both pointers allow (an embedding row, a rolled
  // window row).
  size_t elem = dtypeSize(y.dtype);
  int64_t rowBytes = s.inner * int64_t(elem);
  int64_t width = widestUnit(elem, &rowBytes, 1, x.data, y.data);
  int64_t per = width / int64_t(elem);
  withUnit(width, [&](auto unit) {
    using U = decltype(unit);
    gatherKernel<U><<<gridFor(ctx, n / per), 256, 0, ctx.stream>>>(
        static_cast<const U *>(x.data), indices.data, indices.dtype,
        static_cast<U *>(y.data), n / per, indices.numElements(), s.axis,
        s.inner / per);
  });
  checkLaunch(ctx, node);
}

void gatherElements(Context &ctx, const char *node, int axis, TensorRef x,
                    TensorRef indices, TensorRef y) {
  if (hasError(ctx) || !validateGather(ctx, node, axis, x, indices, y, true))
    return;
  int64_t n = y.numElements();
  if (n == 0)
    return;
  MEMOPT_DISPATCH_BYTES(
      dtypeSize(y.dtype), T,
      gatherElementsKernel<T><<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
          static_cast<const T *>(x.data), indices.data, indices.dtype,
          static_cast<T *>(y.data), n, dimsOf(y), dimsOf(x), axis));
  checkLaunch(ctx, node);
}

void scatterND(Context &ctx, const char *node, ScatterReduction reduction,
               TensorRef data, TensorRef indices, TensorRef updates,
               TensorRef y) {
  ScatterGeometry g;
  if (hasError(ctx) ||
      !validateScatterND(ctx, node, reduction, data, indices, updates, y, g))
    return;
  // In place (y is data): nothing to copy.
  if (y.data != data.data && y.bytes() &&
      !checkCuda(ctx, node,
                 cudaMemcpyAsync(y.data, data.data, y.bytes(),
                                 cudaMemcpyDeviceToDevice, ctx.stream),
                 "cudaMemcpyAsync"))
    return;
  int64_t n = updates.numElements();
  if (n == 0)
    return;
  MEMOPT_DISPATCH_BYTES(
      dtypeSize(y.dtype), U,
      scatterNDKernel<U><<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
          indices.data, indices.dtype, static_cast<const U *>(updates.data),
          static_cast<U *>(y.data), n, g, y.dtype, reduction));
  checkLaunch(ctx, node);
}

void pad(Context &ctx, const char *node, PadMode mode, const int64_t *padsBegin,
         const int64_t *padsEnd, double value, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validatePad(ctx, node, mode, padsBegin, padsEnd, x, y))
    return;
  int64_t n = y.numElements();
  if (n == 0)
    return;
  PadGeometry g;
  g.rank = x.rank;
  KernelDims xDims = dimsOf(x);
  for (int d = 0; d < x.rank; ++d) {
    g.xShape[d] = x.shape[d];
    g.xStride[d] = xDims.stride[d];
    g.yShape[d] = y.shape[d];
    g.begin[d] = padsBegin[d];
  }
  uint64_t pattern = 0;
  storeFromDouble(&pattern, y.dtype, 0, value);
  MEMOPT_DISPATCH_BYTES(dtypeSize(y.dtype), T, {
    T v;
    std::memcpy(&v, &pattern, sizeof(T));
    padKernel<T><<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
        static_cast<const T *>(x.data), static_cast<T *>(y.data), n, g, mode,
        v);
  });
  checkLaunch(ctx, node);
}

void resize(Context &ctx, const char *node, const ResizeParams &params,
            TensorRef x, TensorRef y) {
  ResizeGeometry g;
  if (hasError(ctx) || !validateResize(ctx, node, params, x, y, g.scale))
    return;
  int64_t n = y.numElements();
  if (n == 0)
    return;
  g.rank = x.rank;
  g.coordinateMode = params.coordinateMode;
  g.nearestMode = params.nearestMode;
  KernelDims xDims = dimsOf(x);
  for (int d = 0; d < x.rank; ++d) {
    g.xShape[d] = x.shape[d];
    g.xStride[d] = xDims.stride[d];
    g.yShape[d] = y.shape[d];
    g.resized[d] = x.shape[d] != y.shape[d] || g.scale[d] != 1.0f;
  }
  if (params.mode == ResizeMode::Nearest) {
    MEMOPT_DISPATCH_BYTES(
        dtypeSize(y.dtype), T,
        resizeNearestKernel<T><<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
            static_cast<const T *>(x.data), static_cast<T *>(y.data), n, g));
  } else {
    MEMOPT_DISPATCH_FLOAT(
        y.dtype, T,
        resizeLinearKernel<T><<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
            static_cast<const T *>(x.data), static_cast<T *>(y.data), n, g));
  }
  checkLaunch(ctx, node);
}

} // namespace memopt::rt
