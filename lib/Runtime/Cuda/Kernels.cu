//===- Kernels.cu - pooling, normalization, softmax, reductions, cumSum ---===//
//
// Row-wise ops (softmax, layer norm, reductions over trailing axes) use one
// warp per row with the row held in registers when it has at most 1024
// elements (one global read, two-pass statistics on registers, one write),
// and one 1024-thread block per row otherwise (re-reads hit L2), in the style
// of Apex / onnxruntime's softmax and layer-norm kernels. Ops over a middle
// axis use one thread per (outer, inner) pair so loads stay coalesced along
// the inner dimension. Running sums (CumSum) scan a long contiguous row per
// block (warp-shuffle scans, CUB's block-scan structure) and other rows one
// per thread. Data movement: DataMovementKernels.cu.
//
//===----------------------------------------------------------------------===//

#include "CudaDevice.cuh"
#include "memopt/Runtime/Workspace.h"

#include <type_traits>

namespace memopt::rt {

namespace {

constexpr int kWarpRowMax = 1024; // 32 lanes x 32 registers

//===----------------------------------------------------------------------===//
// Pooling and the direct-convolution fallback
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void poolKernel(const T *x, T *y, ConvGeometry g, int64_t n,
                           PoolKind kind, bool includePad) {
  int64_t outSpatial = g.out[0] * g.out[1] * g.out[2];
  int64_t inSpatial = g.in[0] * g.in[1] * g.in[2];
  MEMOPT_GRID_STRIDE(i, n) {
    // Channels-last: consecutive threads take consecutive channels of one
    // position (coalesced); x's elements of a channel are C apart.
    int64_t o, step;
    const T *xp;
    if (g.channelsLast) {
      int64_t c = i % g.inChannels, rest = i / g.inChannels;
      o = rest % outSpatial;
      xp = x + (rest / outSpatial) * inSpatial * g.inChannels + c;
      step = g.inChannels;
    } else {
      o = i % outSpatial;
      xp = x + (i / outSpatial) * inSpatial;
      step = 1;
    }
    int64_t oc[3] = {o / (g.out[1] * g.out[2]), (o / g.out[2]) % g.out[1],
                     o % g.out[2]};
    float best = -INFINITY, sum = 0.0f;
    int64_t valid = 0, padded = 1;
    for (int d = 0; d < 3; ++d) {
      int64_t start = oc[d] * g.strides[d] - g.padsBegin[d], count = 0;
      for (int64_t k = 0; k < g.kernel[d]; ++k) {
        int64_t pos = start + k * g.dilations[d];
        count += pos >= -g.padsBegin[d] && pos < g.in[d] + g.padsEnd[d];
      }
      padded *= count;
    }
    for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0) {
      int64_t q0 = oc[0] * g.strides[0] - g.padsBegin[0] + k0 * g.dilations[0];
      if (q0 < 0 || q0 >= g.in[0])
        continue;
      for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1) {
        int64_t q1 =
            oc[1] * g.strides[1] - g.padsBegin[1] + k1 * g.dilations[1];
        if (q1 < 0 || q1 >= g.in[1])
          continue;
        for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
          int64_t q2 =
              oc[2] * g.strides[2] - g.padsBegin[2] + k2 * g.dilations[2];
          if (q2 < 0 || q2 >= g.in[2])
            continue;
          float v = toFloat(xp[((q0 * g.in[1] + q1) * g.in[2] + q2) * step]);
          best = fmaxf(best, v);
          sum += v;
          ++valid;
        }
      }
    }
    float r = kind == PoolKind::Max
                  ? best
                  : sum / float(includePad ? padded : (valid ? valid : 1));
    y[i] = fromFloat<T>(r);
  }
}

template <typename T>
__global__ void directConvKernel(const T *x, const T *w, T *y, ConvGeometry g,
                                 int64_t n, bool accumulate) {
  int64_t outSpatial = g.out[0] * g.out[1] * g.out[2];
  int64_t inSpatial = g.in[0] * g.in[1] * g.in[2];
  int64_t kSpatial = g.kernel[0] * g.kernel[1] * g.kernel[2];
  int64_t inPerGroup = g.inChannels / g.group;
  int64_t outPerGroup = g.outChannels / g.group;
  // Element strides: NCHW x [b][c][s], w [co][cl][k]; channels-last x
  // [b][s][c], w [co][k][cl].
  bool last = g.channelsLast;
  int64_t xStep = last ? g.inChannels : 1;
  int64_t wStep = last ? inPerGroup : 1;
  MEMOPT_GRID_STRIDE(i, n) {
    int64_t o, co, b;
    if (last) {
      co = i % g.outChannels;
      o = (i / g.outChannels) % outSpatial;
      b = i / (outSpatial * g.outChannels);
    } else {
      o = i % outSpatial;
      co = (i / outSpatial) % g.outChannels;
      b = i / (outSpatial * g.outChannels);
    }
    int64_t oc[3] = {o / (g.out[1] * g.out[2]), (o / g.out[2]) % g.out[1],
                     o % g.out[2]};
    int64_t group = co / outPerGroup;
    float acc = 0.0f;
    for (int64_t cl = 0; cl < inPerGroup; ++cl) {
      int64_t ci = group * inPerGroup + cl;
      const T *xp = last ? x + b * inSpatial * g.inChannels + ci
                         : x + (b * g.inChannels + ci) * inSpatial;
      const T *wp = last ? w + co * kSpatial * inPerGroup + cl
                         : w + (co * inPerGroup + cl) * kSpatial;
      for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0) {
        int64_t q0 =
            oc[0] * g.strides[0] - g.padsBegin[0] + k0 * g.dilations[0];
        if (q0 < 0 || q0 >= g.in[0])
          continue;
        for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1) {
          int64_t q1 =
              oc[1] * g.strides[1] - g.padsBegin[1] + k1 * g.dilations[1];
          if (q1 < 0 || q1 >= g.in[1])
            continue;
          for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
            int64_t q2 =
                oc[2] * g.strides[2] - g.padsBegin[2] + k2 * g.dilations[2];
            if (q2 < 0 || q2 >= g.in[2])
              continue;
            acc +=
                toFloat(xp[((q0 * g.in[1] + q1) * g.in[2] + q2) * xStep]) *
                toFloat(
                    wp[((k0 * g.kernel[1] + k1) * g.kernel[2] + k2) * wStep]);
          }
        }
      }
    }
    y[i] = fromFloat<T>(accumulate ? acc + toFloat(y[i]) : acc);
  }
}

template <typename T>
__global__ void planeMeanKernel(const T *x, T *y, int64_t planes,
                                int64_t spatial) {
  int warpsPerBlock = blockDim.x >> 5, lane = threadIdx.x & 31;
  for (int64_t p = int64_t(blockIdx.x) * warpsPerBlock + (threadIdx.x >> 5);
       p < planes; p += int64_t(gridDim.x) * warpsPerBlock) {
    const T *xp = x + p * spatial;
    float sum = 0.0f;
    for (int64_t s = lane; s < spatial; s += 32)
      sum += toFloat(xp[s]);
    sum = warpSum(sum);
    if (lane == 0)
      y[p] = fromFloat<T>(spatial ? sum / float(spatial) : 0.0f);
  }
}

/// Channels-last global average pool: y[b][c] = mean over s of x[b][s][c];
/// consecutive threads read consecutive channels.
template <typename T>
__global__ void channelMeanKernel(const T *x, T *y, int64_t batch,
                                  int64_t spatial, int64_t channels) {
  MEMOPT_GRID_STRIDE(i, batch * channels) {
    int64_t b = i / channels, c = i % channels;
    const T *xp = x + b * spatial * channels + c;
    float sum = 0.0f;
    for (int64_t s = 0; s < spatial; ++s)
      sum += toFloat(xp[s * channels]);
    y[i] = fromFloat<T>(spatial ? sum / float(spatial) : 0.0f);
  }
}

//===----------------------------------------------------------------------===//
// Normalization and softmax
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void batchNormKernel(const T *x, T *y, int64_t n, int64_t channels,
                                int64_t inner, const void *scale, DType st,
                                const void *bias, DType bt, const void *mean,
                                DType mt, const void *var, DType vt,
                                float epsilon) {
  MEMOPT_GRID_STRIDE(i, n) {
    int64_t c = (i / inner) % channels;
    float a = loadFloat(scale, st, c) * rsqrtf(loadFloat(var, vt, c) + epsilon);
    y[i] = fromFloat<T>((toFloat(x[i]) - loadFloat(mean, mt, c)) * a +
                        loadFloat(bias, bt, c));
  }
}

/// Per-row parameters of layer norm / softmax.
struct RowOp {
  int kind; ///< 0 layer norm, 1 softmax, 2 log-softmax
  float epsilon;
  const void *scale;
  const void *bias;
  DType paramType;
};

__device__ __forceinline__ float finishRow(const RowOp &op, float v, int64_t j,
                                           float a, float b) {
  // layer norm: a = mean, b = 1/std; softmax: a = max, b = 1/sum or log(sum)
  if (op.kind == 0) {
    float r = (v - a) * b * loadFloat(op.scale, op.paramType, j);
    return op.bias ? r + loadFloat(op.bias, op.paramType, j) : r;
  }
  if (op.kind == 1)
    return __expf(v - a) * b;
  return v - a - b;
}

/// One warp per row, row in registers (cols <= 1024). With V > 1 every lane
/// moves 16-byte chunks (cols % V == 0 and 16-byte aligned rows); register k
/// holds column (lane + 32 * (k / V)) * V + k % V.
template <typename T, int V>
__global__ void warpRowKernel(const T *x, T *y, int64_t rows, int64_t cols,
                              RowOp op) {
  constexpr int kPerLane = kWarpRowMax / 32;
  constexpr int kChunks = kPerLane / V;
  int warpsPerBlock = blockDim.x >> 5, lane = threadIdx.x & 31;
  for (int64_t r = int64_t(blockIdx.x) * warpsPerBlock + (threadIdx.x >> 5);
       r < rows; r += int64_t(gridDim.x) * warpsPerBlock) {
    const T *xr = x + r * cols;
    float v[kPerLane];
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      int64_t col = int64_t(lane + 32 * c) * V;
      T chunk[V] = {};
      if (col < cols) {
        if constexpr (V > 1)
          *reinterpret_cast<uint4 *>(chunk) =
              *reinterpret_cast<const uint4 *>(xr + col);
        else
          chunk[0] = xr[col];
      }
#pragma unroll
      for (int t = 0; t < V; ++t)
        v[c * V + t] = col < cols ? toFloat(chunk[t]) : 0.0f;
    }
    auto inRow = [&](int k) { return int64_t(lane + 32 * (k / V)) * V < cols; };
    float a, b;
    if (op.kind == 0) {
      float sum = 0.0f;
#pragma unroll
      for (int k = 0; k < kPerLane; ++k)
        sum += v[k];
      a = warpSum(sum) / float(cols);
      float sq = 0.0f;
#pragma unroll
      for (int k = 0; k < kPerLane; ++k) {
        float d = inRow(k) ? v[k] - a : 0.0f;
        sq += d * d;
      }
      b = rsqrtf(warpSum(sq) / float(cols) + op.epsilon);
    } else {
      float best = -INFINITY;
#pragma unroll
      for (int k = 0; k < kPerLane; ++k)
        if (inRow(k))
          best = fmaxf(best, v[k]);
      a = warpMax(best);
      float sum = 0.0f;
#pragma unroll
      for (int k = 0; k < kPerLane; ++k)
        if (inRow(k))
          sum += __expf(v[k] - a);
      sum = warpSum(sum);
      b = op.kind == 1 ? 1.0f / sum : logf(sum);
    }
    T *yr = y + r * cols;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      int64_t col = int64_t(lane + 32 * c) * V;
      if (col >= cols)
        continue;
      T chunk[V];
#pragma unroll
      for (int t = 0; t < V; ++t)
        chunk[t] = fromFloat<T>(finishRow(op, v[c * V + t], col + t, a, b));
      if constexpr (V > 1)
        *reinterpret_cast<uint4 *>(yr + col) =
            *reinterpret_cast<uint4 *>(chunk);
      else
        yr[col] = chunk[0];
    }
  }
}

/// One block per row (cols > 1024): statistics pass(es), then the write.
template <typename T>
__global__ void blockRowKernel(const T *x, T *y, int64_t rows, int64_t cols,
                               RowOp op) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * cols;
    float a, b;
    if (op.kind == 0) {
      float sum = 0.0f;
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        sum += toFloat(xr[j]);
      a = blockReduce<false>(sum, scratch) / float(cols);
      float sq = 0.0f;
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        float d = toFloat(xr[j]) - a;
        sq += d * d;
      }
      b = rsqrtf(blockReduce<false>(sq, scratch) / float(cols) + op.epsilon);
    } else {
      float best = -INFINITY;
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        best = fmaxf(best, toFloat(xr[j]));
      a = blockReduce<true>(best, scratch);
      float sum = 0.0f;
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        sum += __expf(toFloat(xr[j]) - a);
      sum = blockReduce<false>(sum, scratch);
      b = op.kind == 1 ? 1.0f / sum : logf(sum);
    }
    T *yr = y + r * cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      yr[j] = fromFloat<T>(finishRow(op, toFloat(xr[j]), j, a, b));
    __syncthreads();
  }
}

/// Softmax over a middle axis: one thread per (outer, inner).
template <typename T>
__global__ void softmaxStridedKernel(const T *x, T *y, int64_t outer,
                                     int64_t axis, int64_t inner, bool log) {
  MEMOPT_GRID_STRIDE(i, outer * inner) {
    int64_t o = i / inner, in = i % inner;
    const T *xp = x + o * axis * inner + in;
    T *yp = y + o * axis * inner + in;
    float best = -INFINITY, sum = 0.0f;
    for (int64_t a = 0; a < axis; ++a)
      best = fmaxf(best, toFloat(xp[a * inner]));
    for (int64_t a = 0; a < axis; ++a)
      sum += __expf(toFloat(xp[a * inner]) - best);
    float inv = 1.0f / sum, logSum = logf(sum);
    for (int64_t a = 0; a < axis; ++a) {
      float v = toFloat(xp[a * inner]) - best;
      yp[a * inner] = fromFloat<T>(log ? v - logSum : __expf(v) * inv);
    }
  }
}

template <typename T>
void launchRows(Context &ctx, const T *x, T *y, int64_t rows, int64_t cols,
                const RowOp &op) {
  if (cols <= kWarpRowMax) {
    int64_t blocks = (rows + 7) / 8;
    int64_t cap = int64_t(ctx.smCount) * 16;
    unsigned grid = unsigned(std::max<int64_t>(1, std::min(blocks, cap)));
    constexpr int V = 16 / sizeof(T);
    bool vec = cols % V == 0 && (reinterpret_cast<uintptr_t>(x) & 15) == 0 &&
               (reinterpret_cast<uintptr_t>(y) & 15) == 0;
    if (vec)
      warpRowKernel<T, V><<<grid, 256, 0, ctx.stream>>>(x, y, rows, cols, op);
    else
      warpRowKernel<T, 1><<<grid, 256, 0, ctx.stream>>>(x, y, rows, cols, op);
  } else {
    int64_t cap = int64_t(ctx.smCount) * 2;
    blockRowKernel<T><<<unsigned(std::max<int64_t>(1, std::min(rows, cap))),
                        1024, 0, ctx.stream>>>(x, y, rows, cols, op);
  }
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

__device__ __forceinline__ float reduceInit(ReduceOp op) {
  return op == ReduceOp::Max    ? -INFINITY
         : op == ReduceOp::Min  ? INFINITY
         : op == ReduceOp::Prod ? 1.0f
                                : 0.0f;
}

__device__ __forceinline__ float reduceMap(ReduceOp op, float v) {
  return op == ReduceOp::SumSquare || op == ReduceOp::L2 ? v * v : v;
}

__device__ __forceinline__ float reduceCombine(ReduceOp op, float a, float b) {
  switch (op) {
  case ReduceOp::Max:
    return fmaxf(a, b);
  case ReduceOp::Min:
    return fminf(a, b);
  case ReduceOp::Prod:
    return a * b;
  default:
    return a + b;
  }
}

__device__ __forceinline__ float reduceFinish(ReduceOp op, float acc,
                                              int64_t count) {
  if (op == ReduceOp::Mean)
    return count ? acc / float(count) : 0.0f;
  if (op == ReduceOp::L2)
    return sqrtf(acc);
  return acc;
}

/// One block (256 threads) per row of a [rows, cols] view.
template <typename T>
__global__ void reduceRowsKernel(const T *x, T *y, int64_t rows, int64_t cols,
                                 ReduceOp op) {
  __shared__ float scratch[8];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float acc = reduceInit(op);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      acc = reduceCombine(op, acc, reduceMap(op, toFloat(x[r * cols + j])));
    for (int o = 16; o > 0; o >>= 1)
      acc = reduceCombine(op, acc, __shfl_xor_sync(0xffffffffu, acc, o));
    if ((threadIdx.x & 31) == 0)
      scratch[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
      float total = scratch[0];
      for (int w = 1; w < int(blockDim.x >> 5); ++w)
        total = reduceCombine(op, total, scratch[w]);
      y[r] = fromFloat<T>(reduceFinish(op, total, cols));
    }
    __syncthreads();
  }
}

/// [outer, reduced, inner]: one thread per (outer, inner). Only for many
/// outputs with a contiguous inner extent (each warp reads 32 neighbours).
template <typename T>
__global__ void reduceMiddleKernel(const T *x, T *y, int64_t outer,
                                   int64_t reduced, int64_t inner,
                                   ReduceOp op) {
  MEMOPT_GRID_STRIDE(i, outer * inner) {
    int64_t o = i / inner, in = i % inner;
    float acc = reduceInit(op);
    for (int64_t r = 0; r < reduced; ++r)
      acc = reduceCombine(
          op, acc, reduceMap(op, toFloat(x[(o * reduced + r) * inner + in])));
    y[i] = fromFloat<T>(reduceFinish(op, acc, reduced));
  }
}

/// A reduction with its dims merged into runs of kept / reduced axes. The
/// outputs are indexed by `kept` (x's strides), the reduced elements of one
/// output by `outer` (every reduced run but the innermost one) and `inner`
/// (the innermost reduced run, stride `innerStride`).
struct ReducePlan {
  KernelDims kept, outer;
  int64_t inner = 1, innerStride = 1, reducedCount = 1, outCount = 1;
  int splits = 1; ///< partial results per output (in the workspace)
};

/// Combines across a block; thread 0 gets the result.
__device__ __forceinline__ float blockCombine(ReduceOp op, float acc,
                                              float *scratch) {
  for (int o = 16; o > 0; o >>= 1)
    acc = reduceCombine(op, acc, __shfl_xor_sync(0xffffffffu, acc, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0)
    scratch[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < int(blockDim.x >> 5); ++w)
      acc = reduceCombine(op, acc, scratch[w]);
  return acc;
}

/// Innermost axis reduced: block (output, split) walks its share of the
/// output's reduced elements, consecutive threads on consecutive elements of
/// the contiguous inner run. One 32-bit division per element.
template <typename T>
__global__ void __launch_bounds__(256)
    reduceRowSplitKernel(const T *x, T *y, float *partials, ReducePlan p,
                         ReduceOp op) {
  __shared__ float scratch[8];
  int64_t o = blockIdx.x;
  int split = blockIdx.y;
  int64_t chunk = (p.reducedCount + p.splits - 1) / p.splits;
  int64_t begin = split * chunk;
  int64_t end = min(begin + chunk, p.reducedCount);
  const T *base = x + offsetOf(o, p.kept);
  float acc = reduceInit(op);
  if (p.outer.rank == 0) {
    for (int64_t r = begin + threadIdx.x; r < end; r += blockDim.x)
      acc = reduceCombine(op, acc,
                          reduceMap(op, toFloat(base[r * p.innerStride])));
  } else if (p.reducedCount < (int64_t(1) << 32)) {
    uint32_t inner = uint32_t(p.inner);
    for (int64_t r = begin + threadIdx.x; r < end; r += blockDim.x) {
      uint32_t row = uint32_t(r) / inner, col = uint32_t(r) - row * inner;
      int64_t offset = offsetOf(row, p.outer) + int64_t(col) * p.innerStride;
      acc = reduceCombine(op, acc, reduceMap(op, toFloat(base[offset])));
    }
  } else {
    for (int64_t r = begin + threadIdx.x; r < end; r += blockDim.x) {
      int64_t offset =
          offsetOf(r / p.inner, p.outer) + (r % p.inner) * p.innerStride;
      acc = reduceCombine(op, acc, reduceMap(op, toFloat(base[offset])));
    }
  }
  acc = blockCombine(op, acc, scratch);
  if (threadIdx.x == 0) {
    if (p.splits == 1)
      y[o] = fromFloat<T>(reduceFinish(op, acc, p.reducedCount));
    else
      partials[int64_t(split) * p.outCount + o] = acc;
  }
}

/// Innermost axis kept: 32 neighbouring outputs per block (threadIdx.x, so
/// reads are coalesced) times 8 rows of the reduction (threadIdx.y), and
/// blockIdx.y splits the reduction.
template <typename T>
__global__ void __launch_bounds__(256)
    reduceColumnSplitKernel(const T *x, T *y, float *partials, ReducePlan p,
                            int64_t columns, ReduceOp op) {
  __shared__ float tile[8][33];
  int64_t tilesPerRow = (columns + 31) / 32;
  int64_t outerOut = blockIdx.x / tilesPerRow;
  int64_t column = (blockIdx.x % tilesPerRow) * 32 + threadIdx.x;
  int split = blockIdx.y;
  int64_t chunk = (p.reducedCount + p.splits - 1) / p.splits;
  int64_t begin = split * chunk;
  int64_t end = min(begin + chunk, p.reducedCount);
  int64_t o = outerOut * columns + column;
  float acc = reduceInit(op);
  if (column < columns) {
    const T *base = x + offsetOf(o, p.kept);
    if (p.outer.rank == 1) {
      int64_t step = p.outer.stride[0];
      for (int64_t r = begin + threadIdx.y; r < end; r += 8)
        acc = reduceCombine(op, acc, reduceMap(op, toFloat(base[r * step])));
    } else {
      for (int64_t r = begin + threadIdx.y; r < end; r += 8)
        acc = reduceCombine(op, acc,
                            reduceMap(op, toFloat(base[offsetOf(r, p.outer)])));
    }
  }
  tile[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && column < columns) {
    for (int k = 1; k < 8; ++k)
      acc = reduceCombine(op, acc, tile[k][threadIdx.x]);
    if (p.splits == 1)
      y[o] = fromFloat<T>(reduceFinish(op, acc, p.reducedCount));
    else
      partials[int64_t(split) * p.outCount + o] = acc;
  }
}

/// Merges the partial results of each output in split order (deterministic).
template <typename T>
__global__ void reduceFinishKernel(const float *partials, T *y, ReducePlan p,
                                   ReduceOp op) {
  MEMOPT_GRID_STRIDE(o, p.outCount) {
    float acc = partials[o];
    for (int k = 1; k < p.splits; ++k)
      acc = reduceCombine(op, acc, partials[int64_t(k) * p.outCount + o]);
    y[o] = fromFloat<T>(reduceFinish(op, acc, p.reducedCount));
  }
}

template <typename T>
__global__ void argReduceKernel(const T *x, int64_t *y, int64_t outer,
                                int64_t axis, int64_t inner, bool isMax) {
  MEMOPT_GRID_STRIDE(i, outer * inner) {
    int64_t o = i / inner, in = i % inner;
    const T *xp = x + o * axis * inner + in;
    float best = toFloat(xp[0]);
    int64_t index = 0;
    for (int64_t a = 1; a < axis; ++a) {
      float v = toFloat(xp[a * inner]);
      if (isMax ? v > best : v < best) {
        best = v;
        index = a;
      }
    }
    y[i] = index;
  }
}

//===----------------------------------------------------------------------===//
// Running sums (CumSum)
//===----------------------------------------------------------------------===//

/// Float elements accumulate in f32; integers wrap in an unsigned integer of
/// their width (two's complement, no signed overflow).
template <typename T> struct ScanTraits {
  using Acc = float;
  static __device__ __forceinline__ Acc load(T v) { return toFloat(v); }
  static __device__ __forceinline__ T store(Acc v) { return fromFloat<T>(v); }
};
template <> struct ScanTraits<int32_t> {
  using Acc = uint32_t;
  static __device__ __forceinline__ Acc load(int32_t v) { return Acc(v); }
  static __device__ __forceinline__ int32_t store(Acc v) { return int32_t(v); }
};
template <> struct ScanTraits<int64_t> {
  using Acc = uint64_t;
  static __device__ __forceinline__ Acc load(int64_t v) { return Acc(v); }
  static __device__ __forceinline__ int64_t store(Acc v) { return int64_t(v); }
};

constexpr int kScanThreads = 256;
/// Rows at most this long (or strided ones) take one thread per row.
constexpr int64_t kScanThreadRowMax = 32;

/// Contiguous rows (the axis is the last non-unit one): one block per row,
/// in chunks of kScanThreads elements: a shuffle scan in each warp, one over
/// the warps' totals, plus the carry of the chunks before. The exclusive
/// value is the previous lane's inclusive sum (never `inclusive - own`,
/// which loses small terms next to a large one). Each thread reads and
/// writes only its own element, so y may be x.
template <typename T>
__global__ void __launch_bounds__(kScanThreads)
    cumSumRowsKernel(const T *x, T *y, int64_t rows, int64_t length,
                     bool exclusive, bool reverse) {
  using Traits = ScanTraits<T>;
  using Acc = typename Traits::Acc;
  constexpr int kWarps = kScanThreads / 32;
  __shared__ Acc warpPrefix[kWarps];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xRow = x + row * length;
    T *yRow = y + row * length;
    Acc carry = Acc(0);
    for (int64_t start = 0; start < length; start += kScanThreads) {
      int64_t step = start + threadIdx.x;
      int64_t at = reverse ? length - 1 - step : step;
      Acc sum = step < length ? Traits::load(xRow[at]) : Acc(0);
      for (int offset = 1; offset < 32; offset <<= 1) {
        Acc other = __shfl_up_sync(0xffffffffu, sum, offset);
        if (lane >= offset)
          sum += other;
      }
      Acc previous = __shfl_up_sync(0xffffffffu, sum, 1);
      if (lane == 31)
        warpPrefix[warp] = sum;
      __syncthreads();
      if (warp == 0) {
        Acc total = lane < kWarps ? warpPrefix[lane] : Acc(0);
        for (int offset = 1; offset < kWarps; offset <<= 1) {
          Acc other = __shfl_up_sync(0xffffffffu, total, offset);
          if (lane >= offset)
            total += other;
        }
        if (lane < kWarps)
          warpPrefix[lane] = total;
      }
      __syncthreads();
      Acc before = carry + (warp ? warpPrefix[warp - 1] : Acc(0));
      if (step < length)
        yRow[at] = Traits::store(exclusive ? (lane ? before + previous : before)
                                           : before + sum);
      carry += warpPrefix[kWarps - 1];
      // The next chunk overwrites warpPrefix.
      __syncthreads();
    }
  }
}

/// Strided or short rows: one thread per (outer, inner) pair walks its row
/// (loads coalesced along the inner dimension), reading each element before
/// writing it, so y may be x.
template <typename T>
__global__ void cumSumStridedKernel(const T *x, T *y, int64_t outer,
                                    int64_t length, int64_t inner,
                                    bool exclusive, bool reverse) {
  using Traits = ScanTraits<T>;
  using Acc = typename Traits::Acc;
  MEMOPT_GRID_STRIDE(i, outer * inner) {
    int64_t base = (i / inner) * length * inner + i % inner;
    Acc sum = Acc(0);
    for (int64_t step = 0; step < length; ++step) {
      int64_t at = base + (reverse ? length - 1 - step : step) * inner;
      Acc next = sum + Traits::load(x[at]);
      y[at] = Traits::store(exclusive ? sum : next);
      sum = next;
    }
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Public entry points
//===----------------------------------------------------------------------===//

namespace {
__global__ void streamHoldKernel(uint64_t nanoseconds) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}
} // namespace

bool launchStreamHold(Context &ctx, float microseconds) {
  streamHoldKernel<<<1, 1, 0, ctx.stream>>>(uint64_t(microseconds * 1000.0f));
  return cudaGetLastError() == cudaSuccess;
}

bool launchDirectConv(Context &ctx, const char *node, const ConvGeometry &g,
                      TensorRef x, TensorRef w, TensorRef y, bool accumulate) {
  int64_t n = y.numElements();
  MEMOPT_DISPATCH_FLOAT(
      y.dtype, T,
      directConvKernel<T><<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
          static_cast<const T *>(x.data), static_cast<const T *>(w.data),
          static_cast<T *>(y.data), g, n, accumulate));
  return checkLaunch(ctx, node);
}

void pool(Context &ctx, const char *node, const PoolParams &params, TensorRef x,
          TensorRef y) {
  ConvGeometry g;
  if (hasError(ctx) || !validatePool(ctx, node, params, x, y, g))
    return;
  int64_t n = y.numElements();
  if (n == 0)
    return;
  MEMOPT_DISPATCH_FLOAT(y.dtype, T,
                        poolKernel<T><<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
                            static_cast<const T *>(x.data),
                            static_cast<T *>(y.data), g, n, params.kind,
                            params.countIncludePad));
  checkLaunch(ctx, node);
}

void globalAvgPool(Context &ctx, const char *node, TensorRef x, TensorRef y,
                   bool channelsLast) {
  int64_t channels = 0;
  if (hasError(ctx) ||
      !validateGlobalAvgPool(ctx, node, x, y, channelsLast, channels))
    return;
  int64_t planes = x.shape[0] * channels;
  if (planes == 0)
    return;
  int64_t spatial = x.numElements() / planes;
  if (channelsLast) {
    MEMOPT_DISPATCH_FLOAT(
        y.dtype, T,
        channelMeanKernel<T><<<gridFor(ctx, planes), 256, 0, ctx.stream>>>(
            static_cast<const T *>(x.data), static_cast<T *>(y.data),
            x.shape[0], spatial, channels));
    checkLaunch(ctx, node);
    return;
  }
  MEMOPT_DISPATCH_FLOAT(y.dtype, T,
                        planeMeanKernel<T>
                        <<<gridFor(ctx, planes * 32), 256, 0, ctx.stream>>>(
                            static_cast<const T *>(x.data),
                            static_cast<T *>(y.data), planes, spatial));
  checkLaunch(ctx, node);
}

void batchNorm(Context &ctx, const char *node, float epsilon, TensorRef x,
               TensorRef scale, TensorRef bias, TensorRef mean, TensorRef var,
               TensorRef y, bool channelsLast) {
  if (hasError(ctx) ||
      !validateBatchNorm(ctx, node, x, scale, bias, mean, var, y, channelsLast))
    return;
  int64_t n = x.numElements();
  if (n == 0)
    return;
  AxisSplit s = splitAt(x, channelsLast ? x.rank - 1 : 1);
  MEMOPT_DISPATCH_FLOAT(
      y.dtype, T,
      batchNormKernel<T><<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
          static_cast<const T *>(x.data), static_cast<T *>(y.data), n, s.axis,
          s.inner, scale.data, scale.dtype, bias.data, bias.dtype, mean.data,
          mean.dtype, var.data, var.dtype, epsilon));
  checkLaunch(ctx, node);
}

void layerNorm(Context &ctx, const char *node, int axis, float epsilon,
               TensorRef x, TensorRef scale, const TensorRef *bias,
               TensorRef y) {
  if (hasError(ctx) || !validateLayerNorm(ctx, node, axis, x, scale, bias, y))
    return;
  int64_t cols = scale.numElements();
  if (cols == 0 || x.numElements() == 0)
    return;
  RowOp op{0, epsilon, scale.data, bias ? bias->data : nullptr, scale.dtype};
  MEMOPT_DISPATCH_FLOAT(y.dtype, T,
                        launchRows<T>(ctx, static_cast<const T *>(x.data),
                                      static_cast<T *>(y.data),
                                      x.numElements() / cols, cols, op));
  checkLaunch(ctx, node);
}

void softmax(Context &ctx, const char *node, int axis, bool logSoftmax,
             TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateSoftmax(ctx, node, axis, x, y))
    return;
  AxisSplit s = splitAt(x, axis);
  if (x.numElements() == 0)
    return;
  RowOp op{logSoftmax ? 2 : 1, 0.0f, nullptr, nullptr, DType::F32};
  MEMOPT_DISPATCH_FLOAT(y.dtype, T, {
    const T *px = static_cast<const T *>(x.data);
    T *py = static_cast<T *>(y.data);
    if (s.inner == 1)
      launchRows<T>(ctx, px, py, s.outer, s.axis, op);
    else
      softmaxStridedKernel<T>
          <<<gridFor(ctx, s.outer * s.inner), 256, 0, ctx.stream>>>(
              px, py, s.outer, s.axis, s.inner, logSoftmax);
  });
  checkLaunch(ctx, node);
}

void reduce(Context &ctx, const char *node, ReduceOp op, const int *axes,
            int numAxes, TensorRef x, TensorRef y, void *workspace,
            size_t workspaceBytes) {
  if (hasError(ctx) || !validateReduce(ctx, node, axes, numAxes, x, y))
    return;
  int64_t outCount = y.numElements();
  if (outCount == 0)
    return;
  // Merge neighbouring axes of the same kind (size-1 axes vanish), so that
  // e.g. a bias gradient [N, C, H, W] -> [C] is "reduced, kept, reduced".
  KernelDims xDims = dimsOf(x);
  int64_t extent[kMaxRank], stride[kMaxRank];
  bool isReduced[kMaxRank];
  int runs = 0, next = 0;
  for (int d = 0; d < x.rank; ++d) {
    bool red = next < numAxes && axes[next] == d;
    if (red)
      ++next;
    if (x.shape[d] == 1)
      continue;
    if (runs && isReduced[runs - 1] == red &&
        stride[runs - 1] == x.shape[d] * xDims.stride[d]) {
      extent[runs - 1] *= x.shape[d];
      stride[runs - 1] = xDims.stride[d];
      continue;
    }
    extent[runs] = x.shape[d];
    stride[runs] = xDims.stride[d];
    isReduced[runs] = red;
    ++runs;
  }
  int64_t reducedCount = x.numElements() / outCount;
  bool innerReduced = runs > 0 && isReduced[runs - 1];
  bool contiguousRows =
      runs <= 2 && (runs == 0 || innerReduced) && (runs < 2 || !isReduced[0]);
  // Many outputs: the simple kernels already fill the GPU.
  int64_t wide = int64_t(ctx.smCount) * 2;
  MEMOPT_DISPATCH_FLOAT(y.dtype, T, {
    const T *px = static_cast<const T *>(x.data);
    T *py = static_cast<T *>(y.data);
    if (runs == 0 || reducedCount == 1) {
      reduceRowsKernel<T>
          <<<unsigned(std::max<int64_t>(1, std::min(outCount, wide * 4))), 256,
             0, ctx.stream>>>(px, py, outCount, reducedCount, op);
      break;
    }
    if (contiguousRows && outCount >= wide) {
      reduceRowsKernel<T>
          <<<unsigned(std::min(outCount, wide * 4)), 256, 0, ctx.stream>>>(
              px, py, outCount, reducedCount, op);
      break;
    }
    bool middle = runs == 3 && !isReduced[0] && isReduced[1] && !isReduced[2] &&
                  extent[2] >= 32;
    if ((middle || (runs == 2 && isReduced[0] && extent[1] >= 32)) &&
        outCount >= int64_t(ctx.smCount) * 1024) {
      int64_t inner = extent[runs - 1];
      reduceMiddleKernel<T><<<gridFor(ctx, outCount), 256, 0, ctx.stream>>>(
          px, py, outCount / inner, reducedCount, inner, op);
      break;
    }
    ReducePlan plan;
    plan.kept.rank = plan.outer.rank = 0;
    plan.outCount = outCount;
    plan.reducedCount = reducedCount;
    int lastReduced = -1;
    for (int k = 0; k < runs; ++k)
      if (isReduced[k])
        lastReduced = k;
    for (int k = 0; k < runs; ++k) {
      if (!isReduced[k]) {
        plan.kept.shape[plan.kept.rank] = extent[k];
        plan.kept.stride[plan.kept.rank++] = stride[k];
      } else if (innerReduced && k == lastReduced) {
        plan.inner = extent[k];
        plan.innerStride = stride[k];
      } else {
        plan.outer.shape[plan.outer.rank] = extent[k];
        plan.outer.stride[plan.outer.rank++] = stride[k];
      }
    }
    // Enough blocks for about four per multiprocessor, as many partial
    // results per output as the workspace holds.
    int64_t columns = innerReduced ? 1 : extent[runs - 1];
    int64_t blocks =
        innerReduced ? outCount : (outCount / columns) * ((columns + 31) / 32);
    int64_t want = (int64_t(ctx.smCount) * 4 + blocks - 1) / blocks;
    int64_t room =
        workspace ? int64_t(workspaceBytes / sizeof(float)) / outCount : 0;
    int64_t perSplit = innerReduced ? 2048 : 256;
    int64_t splits = std::min(
        std::min(want, room),
        std::min(reducedCount / perSplit, workspace::kReductionMaxSplits));
    plan.splits = int(std::max<int64_t>(1, splits));
    float *partials = static_cast<float *>(workspace);
    dim3 grid(static_cast<unsigned>(blocks),
              static_cast<unsigned>(plan.splits));
    if (innerReduced)
      reduceRowSplitKernel<T>
          <<<grid, 256, 0, ctx.stream>>>(px, py, partials, plan, op);
    else
      reduceColumnSplitKernel<T><<<grid, dim3(32, 8), 0, ctx.stream>>>(
          px, py, partials, plan, columns, op);
    if (plan.splits > 1)
      reduceFinishKernel<T><<<gridFor(ctx, outCount), 256, 0, ctx.stream>>>(
          partials, py, plan, op);
  });
  checkLaunch(ctx, node);
}

void argReduce(Context &ctx, const char *node, bool isMax, int axis,
               TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateArgReduce(ctx, node, axis, x, y))
    return;
  AxisSplit s = splitAt(x, axis);
  if (s.outer * s.inner == 0 || s.axis == 0)
    return;
  MEMOPT_DISPATCH_FLOAT(
      x.dtype, T,
      argReduceKernel<T>
      <<<gridFor(ctx, s.outer * s.inner), 256, 0, ctx.stream>>>(
          static_cast<const T *>(x.data), static_cast<int64_t *>(y.data),
          s.outer, s.axis, s.inner, isMax));
  checkLaunch(ctx, node);
}

void cumSum(Context &ctx, const char *node, int axis, bool exclusive,
            bool reverse, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateCumSum(ctx, node, axis, x, y))
    return;
  AxisSplit s = splitAt(x, axis);
  int64_t rows = s.outer * s.inner;
  if (rows == 0 || s.axis == 0)
    return;
  auto launch = [&](auto *typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    const T *px = static_cast<const T *>(x.data);
    T *py = static_cast<T *>(y.data);
    if (s.inner == 1 && s.axis > kScanThreadRowMax)
      cumSumRowsKernel<T>
          <<<unsigned(std::min<int64_t>(rows, int64_t(ctx.smCount) * 16)),
             kScanThreads, 0, ctx.stream>>>(px, py, rows, s.axis, exclusive,
                                            reverse);
    else
      cumSumStridedKernel<T><<<gridFor(ctx, rows), 256, 0, ctx.stream>>>(
          px, py, s.outer, s.axis, s.inner, exclusive, reverse);
  };
  if (x.dtype == DType::I32)
    launch(static_cast<int32_t *>(nullptr));
  else if (x.dtype == DType::I64)
    launch(static_cast<int64_t *>(nullptr));
  else
    MEMOPT_DISPATCH_FLOAT(x.dtype, T, launch(static_cast<T *>(nullptr)));
  checkLaunch(ctx, node);
}

} // namespace memopt::rt
