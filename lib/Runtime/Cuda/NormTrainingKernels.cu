//===- NormTrainingKernels.cu - normalization for training ----------------===//
//
// Training-mode BatchNormalization (batch statistics, its gradient, the
// running-statistics update) and LayerNormalization's gradient.
//
// Taken from PyTorch's native CUDA kernels (Normalization.cuh: a statistics
// pass per channel, batch_norm_backward_reduce then batch_norm_backward_elemt;
// layer_norm_backward: dx by rows, gamma / beta gradients by columns) and
// cuDNN's BatchNormalizationForwardTraining / Backward split (one reduction
// pass, one elementwise pass). Where this differs: the statistics are sums
// shifted by one sample of the channel (as stable as Welford for the spread
// of activations, without a division per element); a channel or a column
// set is split over several blocks whose partial sums go to a workspace the
// memory planner placed in the arena (nothing allocated, the same bytes on
// every CUDA graph replay), and partials are merged in a fixed order, so the
// results do not change from run to run. Activations (x, y, dy, dx) may be
// f16 / bf16 (mixed-precision training): they are widened on load and
// rounded once on store, while the statistics, the parameters and their
// gradients stay f32, as in cuDNN's and PyTorch's mixed-precision batch
// normalization. Loads and stores are 16 bytes (8 halves, 4 floats) where
// the spatial size allows, like PyTorch's vectorized elementwise loads, and
// index arithmetic divides in 32 bits where the sizes fit.
//
// Channels-last activations ([N, spatial..., C], memopt-layout's training
// programs) are rows of C channels: a block reduces up to 32 packs of
// neighbouring channels (16-byte loads) over a share of the rows, the other
// threads taking the next rows, as PyTorch's
// batch_norm_collect_statistics_channels_last_kernel splits. The partials
// (same workspace bytes) are laid out channel-major per split and merged by
// a finishing kernel in which a warp reads 32 neighbouring channels and 32
// groups of threads share the splits, in a fixed order; the channels-first
// finishing kernels, one thread per channel walking its splits, were the
// bulk of the channels-last time (issue 26: a few channels times 1024
// strided splits on one multiprocessor). The elementwise passes keep one
// pack of channels per thread with its constants in registers and walk the
// rows (PyTorch's transform_input / backward_elemt channels-last kernels do
// the same, reading the parameters per element): one read of x (and dy) and
// one 16-byte store per pack, no division or parameter load per element.
//
// The statistics and gradient launches are shared (NormTraining.h) with the
// fused batch-norm -> ReLU -> convolution (NormConvKernels.cu):
// batchNormStats runs the statistics alone, batchNormReluGrad the gradient
// kernels with a template flag that masks dy by the recomputed ReLU mask as
// it is loaded, in the same split order, so fused and unfused programs
// agree bit for bit. The normalization fused with a residual add and its
// ReLU (cuDNN's NormAddRelu / DReluForkDNorm, memopt-fuse-norm-conv) is the
// same launches again: the apply kernels add z before the activation
// (Residual), and the gradient's reduction (Fork) masks dy by the forward's
// output y > 0 as relu_grad does, writes that dz for the residual branch as
// it reduces, and the dx pass reads dz: one pass over dz fewer than
// relu_grad + batchNormTrainingGrad, with the same sums in the same order.
//
//===----------------------------------------------------------------------===//

#include "CudaDevice.cuh"
#include "NormTraining.h"
#include "VectorPack.cuh"
#include "memopt/Runtime/Workspace.h"

#include <algorithm>
#include <type_traits>

namespace memopt::rt {

namespace {

constexpr int kThreads = 256;

/// Channel c's elements of x [N, C, S] in units of V elements (S a multiple
/// of V): unit j of the channel (j in [0, N*S/V)) is unit
/// (j / S') * C * S' + c * S' + j % S' of x, S' = S / V.
template <typename T, int V> struct ChannelView {
  const T *x;
  int64_t channels, spatial; // spatial in units of V elements
  __device__ __forceinline__ int64_t offset(int64_t c, int64_t j) const {
    int64_t n = quotient(j, spatial);
    return (n * channels + c) * spatial + (j - n * spatial);
  }
};

/// The channel of unit i of x [N, C, S'] (S' in units).
__device__ __forceinline__ int64_t channelOf(int64_t i, int64_t spatialUnits,
                                             int64_t channels) {
  int64_t plane = quotient(i, spatialUnits);
  return plane - quotient(plane, channels) * channels;
}

/// Adds the V values at unit j to (s1, s2) = (sum (v - shift),
/// sum (v - shift)^2).
template <typename T, int V>
__device__ __forceinline__ void
accumulateShifted(const T *x, int64_t unit, float shift, float &s1, float &s2) {
  float v[V];
  loadPack<T, V>(x, unit, v);
#pragma unroll
  for (int k = 0; k < V; ++k) {
    float a = v[k] - shift;
    s1 += a;
    s2 += a * a;
  }
}

/// Block-wide sum of two values; thread 0 gets them.
__device__ __forceinline__ void blockSum2(float &a, float &b) {
  __shared__ float scratch[2][32];
  a = warpSum(a);
  b = warpSum(b);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) {
    scratch[0][warp] = a;
    scratch[1][warp] = b;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < int(blockDim.x >> 5); ++w) {
      a += scratch[0][w];
      b += scratch[1][w];
    }
  }
}

/// The range of channel units that split `split` of `splits` covers.
__device__ __forceinline__ void splitRange(int64_t units, int splits, int split,
                                           int64_t &begin, int64_t &end) {
  int64_t chunk = (units + splits - 1) / splits;
  begin = min(int64_t(split) * chunk, units);
  end = min(begin + chunk, units);
}

/// Statistics pass: block (c, split) sums its share of channel c, shifted
/// by the channel's first element. With one split it finishes the channel;
/// otherwise it stores (s1, s2) as partials[(c * splits + split) * 2].
template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    bnStatisticsKernel(ChannelView<T, V> view, int64_t units, int splits,
                       float epsilon, float *partials, float *mean,
                       float *invStd) {
  int64_t c = blockIdx.x;
  int split = blockIdx.y;
  int64_t begin, end;
  splitRange(units, splits, split, begin, end);
  float shift = toFloat(view.x[c * view.spatial * V]);
  float s1 = 0, s2 = 0;
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x)
    accumulateShifted<T, V>(view.x, view.offset(c, j), shift, s1, s2);
  blockSum2(s1, s2);
  if (threadIdx.x != 0)
    return;
  if (splits > 1) {
    partials[(c * splits + split) * 2] = s1;
    partials[(c * splits + split) * 2 + 1] = s2;
    return;
  }
  double count = double(units) * V;
  double m = double(s1) / count;
  double var = fmax(double(s2) / count - m * m, 0.0);
  mean[c] = float(m + shift);
  invStd[c] = float(1.0 / sqrt(var + double(epsilon)));
}

/// Merges the partials of each channel in split order.
template <typename T>
__global__ void
bnStatisticsFinishKernel(const T *x, int64_t channels, int64_t spatialElements,
                         double count, int splits, float epsilon,
                         const float *partials, float *mean, float *invStd) {
  MEMOPT_GRID_STRIDE(c, channels) {
    double s1 = 0, s2 = 0;
    for (int k = 0; k < splits; ++k) {
      s1 += partials[(c * splits + k) * 2];
      s2 += partials[(c * splits + k) * 2 + 1];
    }
    double m = s1 / count;
    double var = fmax(s2 / count - m * m, 0.0);
    mean[c] = float(m + toFloat(x[c * spatialElements]));
    invStd[c] = float(1.0 / sqrt(var + double(epsilon)));
  }
}

/// y = (x - mean) * invStd * scale + bias (Residual: + z) (then relu),
/// elementwise, V elements of one channel per unit (bnApplyLastKernel for
/// channels-last). y may be x or z.
template <typename T, int V, bool Residual>
__global__ void
bnApplyKernel(const T *x, const T *z, T *y, int64_t units, int64_t channels,
              int64_t spatialUnits, const float *scale, const float *bias,
              const float *mean, const float *invStd, bool relu) {
  MEMOPT_GRID_STRIDE(i, units) {
    int64_t c = channelOf(i, spatialUnits, channels);
    float v[V], r[V];
    loadPack<T, V>(x, i, v);
    if (Residual)
      loadPack<T, V>(z, i, r);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float a = invStd[c] * scale[c];
      float b = bias[c] - mean[c] * a;
      v[k] = v[k] * a + b;
      if (Residual)
        v[k] += r[k];
      if (relu)
        v[k] = fmaxf(v[k], 0.0f);
    }
    storePack<T, V>(y, i, v);
  }
}

/// batchNormReluGrad's mask (Mask): dy counts only where the recomputed
/// ReLU input fmaf(x, maskScale, maskBias) is positive, as if the ReLU's
/// gradient had been materialized (batch_norm_relu_grad, NormConv.h).
template <bool Mask>
__device__ __forceinline__ float maskedDy(float g, float x, float maskScale,
                                          float maskBias) {
  if (!Mask)
    return g;
  return __fmaf_rn(x, maskScale, maskBias) > 0.0f ? g : 0.0f;
}

/// batchNormAddReluGrad's fork (Fork): the V values of dy at `unit` masked
/// by the forward's output y > 0 (relu_grad's comparison: a NaN y gives
/// 0), stored as dz (which may be dy) and left in g for the reduction.
template <typename T, int V, bool Fork>
__device__ __forceinline__ void forkDy(float (&g)[V], const T *y, T *dz,
                                       int64_t unit) {
  if (!Fork)
    return;
  float out[V];
  loadPack<T, V>(y, unit, out);
#pragma unroll
  for (int k = 0; k < V; ++k)
    g[k] = out[k] > 0.0f ? g[k] : 0.0f;
  storePack<T, V>(dz, unit, g);
}

/// Gradient reduction: block (c, split) sums dy and dy * (x - mean) over its
/// share of channel c; one split finishes (dbias, dscale) directly. Mask:
/// dy is masked as it is read (maskedDy); Fork: masked by y and stored to
/// dz (forkDy).
template <typename T, int V, bool Mask, bool Fork = false>
__global__ void __launch_bounds__(kThreads)
    bnGradReduceKernel(ChannelView<T, V> view, const T *dy, int64_t units,
                       int splits, const float *mean, const float *invStd,
                       float *partials, float *dscale, float *dbias,
                       const float *maskScale, const float *maskBias,
                       const T *forkY = nullptr, T *forkDz = nullptr) {
  int64_t c = blockIdx.x;
  int split = blockIdx.y;
  int64_t begin, end;
  splitRange(units, splits, split, begin, end);
  float m = mean[c];
  float ms = Mask ? maskScale[c] : 0.0f, mb = Mask ? maskBias[c] : 0.0f;
  float sumDy = 0, sumDyX = 0;
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
    int64_t unit = view.offset(c, j);
    float g[V], v[V];
    loadPack<T, V>(dy, unit, g);
    forkDy<T, V, Fork>(g, forkY, forkDz, unit);
    loadPack<T, V>(view.x, unit, v);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      g[k] = maskedDy<Mask>(g[k], v[k], ms, mb);
      sumDy += g[k];
      sumDyX += g[k] * (v[k] - m);
    }
  }
  blockSum2(sumDy, sumDyX);
  if (threadIdx.x != 0)
    return;
  if (splits > 1) {
    partials[(c * splits + split) * 2] = sumDy;
    partials[(c * splits + split) * 2 + 1] = sumDyX;
    return;
  }
  dbias[c] = sumDy;
  dscale[c] = sumDyX * invStd[c];
}

__global__ void bnGradFinishKernel(int64_t channels, int splits,
                                   const float *partials, const float *invStd,
                                   float *dscale, float *dbias) {
  MEMOPT_GRID_STRIDE(c, channels) {
    double sumDy = 0, sumDyX = 0;
    for (int k = 0; k < splits; ++k) {
      sumDy += partials[(c * splits + k) * 2];
      sumDyX += partials[(c * splits + k) * 2 + 1];
    }
    dbias[c] = float(sumDy);
    dscale[c] = float(sumDyX) * invStd[c];
  }
}

/// dx = scale * invStd * (dy - dbias / M - (x - mean) * invStd * dscale / M),
/// channels-first (bnGradApplyLastKernel for channels-last); Mask: dy
/// masked as it is read.
template <typename T, int V, bool Mask>
__global__ void
bnGradApplyKernel(const T *x, const T *dy, T *dx, int64_t units,
                  int64_t channels, int64_t spatialUnits, float inverseCount,
                  const float *scale, const float *mean, const float *invStd,
                  const float *dscale, const float *dbias,
                  const float *maskScale, const float *maskBias) {
  MEMOPT_GRID_STRIDE(i, units) {
    int64_t c = channelOf(i, spatialUnits, channels);
    float g[V], v[V];
    loadPack<T, V>(dy, i, g);
    loadPack<T, V>(x, i, v);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      if (Mask)
        g[e] = maskedDy<Mask>(g[e], v[e], maskScale[c], maskBias[c]);
      float k = scale[c] * invStd[c];
      float b = dbias[c] * inverseCount;
      float w = invStd[c] * dscale[c] * inverseCount;
      g[e] = k * (g[e] - b - (v[e] - mean[c]) * w);
    }
    storePack<T, V>(dx, i, g);
  }
}

__global__ void bnRunningUpdateKernel(int64_t channels, float momentum,
                                      float epsilon, const float *mean,
                                      const float *invStd, float *runningMean,
                                      float *runningVar) {
  MEMOPT_GRID_STRIDE(c, channels) {
    float s = invStd[c];
    float var = fmaxf(1.0f / (s * s) - epsilon, 0.0f);
    runningMean[c] = momentum * runningMean[c] + (1.0f - momentum) * mean[c];
    runningVar[c] = momentum * runningVar[c] + (1.0f - momentum) * var;
  }
}

/// Splits per channel so that about four blocks run per multiprocessor, at
/// least `perSplit` units each, as many as `workspace` holds (2 floats each).
int channelSplits(const Context &ctx, int64_t channels, int64_t units,
                  size_t workspaceBytes) {
  int64_t want = (int64_t(ctx.smCount) * 4 + channels - 1) / channels;
  int64_t room =
      int64_t(workspaceBytes) / workspace::normalizationSplitBytes(channels);
  int64_t split = std::min({want, room, units / 1024, int64_t(1024)});
  return int(std::max<int64_t>(1, split));
}

/// The shape of a channels-last reduction block: `lanes` threads side by
/// side each take a pack of V neighbouring channels (one 16-byte load per
/// row where the channels allow), kThreads / lanes rows are read at a time.
/// lanes is a power of two covering the channel packs, at most 32.
int lastLanes(int64_t packs) {
  int lanes = 1;
  while (lanes < 32 && lanes < packs)
    lanes *= 2;
  return lanes;
}

/// The channels-last reductions of batch normalization over the rows of x
/// [R, C] (C a multiple of V): block (tile, split) sums, for the
/// lanes * V channels of its tile, over its share of the rows
/// - statistics (!Grad): sum (x - shift) and sum (x - shift)^2, shifted by
///   each channel's first element (as bnStatisticsKernel);
/// - the gradient (Grad): sum dy and sum dy * (x - mean), with Mask dy
///   masked as it is read (maskedDy), with Fork masked by y and stored to
///   dz (forkDy).
/// With one split it finishes the channels (mean / invStd, or dbias /
/// dscale); otherwise it stores the pair of channel c of split s at
/// partials[(s * C + c) * 2]: channel-major within a split, so that the
/// finishing kernel's neighbouring threads read neighbouring channels
/// (bnFinishLastKernel). PyTorch's
/// batch_norm_collect_statistics_channels_last splits the same way
/// (channels across a warp, rows across warps and blocks); the packs of V
/// channels per thread are the vectorized loads of the channels-first
/// kernels, and the row loop is unrolled so that several loads are in
/// flight per thread.
template <typename T, int V, bool Grad, bool Mask = false, bool Fork = false>
__global__ void __launch_bounds__(kThreads)
    bnReduceLastKernel(const T *x, const T *dy, int64_t rows, int64_t channels,
                       int lanes, int splits, float epsilon, float *partials,
                       const float *mean, const float *invStd, float *out1,
                       float *out2, const float *maskScale = nullptr,
                       const float *maskBias = nullptr,
                       const T *forkY = nullptr, T *forkDz = nullptr) {
  __shared__ float scratch[2][kThreads][V];
  int lane = int(threadIdx.x) % lanes, row = int(threadIdx.x) / lanes;
  int rowLanes = kThreads / lanes;
  int64_t packs = channels / V;
  int64_t pack = int64_t(blockIdx.x) * lanes + lane;
  int64_t c0 = pack * V;
  int split = blockIdx.y;
  int64_t begin, end;
  splitRange(rows, splits, split, begin, end);
  bool valid = pack < packs;
  float center[V], a[V], b[V], ms[V], mb[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    a[k] = b[k] = 0.0f;
    center[k] = ms[k] = mb[k] = 0.0f;
  }
  if (valid) {
    if (Grad) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        center[k] = mean[c0 + k];
        if (Mask) {
          ms[k] = maskScale[c0 + k];
          mb[k] = maskBias[c0 + k];
        }
      }
    } else {
      loadPack<T, V>(x, pack, center);
    }
#pragma unroll 4
    for (int64_t r = begin + row; r < end; r += rowLanes) {
      float v[V];
      loadPack<T, V>(x, r * packs + pack, v);
      if (Grad) {
        float g[V];
        loadPack<T, V>(dy, r * packs + pack, g);
        forkDy<T, V, Fork>(g, forkY, forkDz, r * packs + pack);
#pragma unroll
        for (int k = 0; k < V; ++k) {
          g[k] = maskedDy<Mask>(g[k], v[k], ms[k], mb[k]);
          a[k] += g[k];
          b[k] += g[k] * (v[k] - center[k]);
        }
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          float d = v[k] - center[k];
          a[k] += d;
          b[k] += d * d;
        }
      }
    }
  }
#pragma unroll
  for (int k = 0; k < V; ++k) {
    scratch[0][threadIdx.x][k] = a[k];
    scratch[1][threadIdx.x][k] = b[k];
  }
  __syncthreads();
  if (row != 0 || !valid)
    return;
  for (int r = 1; r < rowLanes; ++r)
#pragma unroll
    for (int k = 0; k < V; ++k) {
      a[k] += scratch[0][r * lanes + lane][k];
      b[k] += scratch[1][r * lanes + lane][k];
    }
#pragma unroll
  for (int k = 0; k < V; ++k) {
    int64_t c = c0 + k;
    if (splits > 1) {
      partials[(split * channels + c) * 2] = a[k];
      partials[(split * channels + c) * 2 + 1] = b[k];
    } else if (Grad) {
      out1[c] = a[k];             // dbias
      out2[c] = b[k] * invStd[c]; // dscale
    } else {
      double count = double(rows);
      double m = double(a[k]) / count;
      double var = fmax(double(b[k]) / count - m * m, 0.0);
      out1[c] = float(m + center[k]);                     // mean
      out2[c] = float(1.0 / sqrt(var + double(epsilon))); // invStd
    }
  }
}

/// Threads of a channels-last finishing block: 32 channels side by side,
/// kFinishGroups groups of splits.
constexpr int kFinishGroups = 32;

/// Merges bnReduceLastKernel's partials: block b takes channels
/// [32 b, 32 b + 32), thread (lane, group) sums splits group, group +
/// kFinishGroups, ... in split order (in double), then the groups' sums are
/// added in group order: the same order on every run, and each warp reads
/// 32 neighbouring channels' pairs (256 contiguous bytes) per split. The
/// channels-first bnStatisticsFinishKernel walks one channel's splits per
/// thread, which here (1024 splits, one block of C threads) was a long
/// chain of strided loads on one multiprocessor.
/// Statistics (!Grad): mean / invStd, shifted by x's first row; gradient
/// (Grad): dbias / dscale.
template <typename T, bool Grad>
__global__ void __launch_bounds__(32 * kFinishGroups)
    bnFinishLastKernel(const T *x, int64_t channels, int splits, double count,
                       float epsilon, const float *partials,
                       const float *invStd, float *out1, float *out2) {
  __shared__ double sums[2][kFinishGroups][32];
  int lane = int(threadIdx.x) & 31, group = int(threadIdx.x) >> 5;
  int64_t c = int64_t(blockIdx.x) * 32 + lane;
  double a = 0, b = 0;
  if (c < channels) {
    const auto *pairs = reinterpret_cast<const float2 *>(partials);
#pragma unroll 4
    for (int k = group; k < splits; k += kFinishGroups) {
      float2 p = pairs[int64_t(k) * channels + c];
      a += p.x;
      b += p.y;
    }
  }
  sums[0][group][lane] = a;
  sums[1][group][lane] = b;
  __syncthreads();
  if (group != 0 || c >= channels)
    return;
  for (int g = 1; g < kFinishGroups; ++g) {
    a += sums[0][g][lane];
    b += sums[1][g][lane];
  }
  if (Grad) {
    out1[c] = float(a);             // dbias
    out2[c] = float(b) * invStd[c]; // dscale
    return;
  }
  double m = a / count;
  double var = fmax(b / count - m * m, 0.0);
  out1[c] = float(m + toFloat(x[c]));                 // mean
  out2[c] = float(1.0 / sqrt(var + double(epsilon))); // invStd
}

/// Rows an elementwise thread loads before it stores any: y (dx) may alias
/// x (dy), so the compiler cannot move a later row's load above a store;
/// loading kApplyBatch rows first keeps that many 16-byte loads in flight.
constexpr int kApplyBatch = 4;

/// The channels-last elementwise passes: thread (lane, row) of block
/// (rowBlock, tile) keeps the pack of V channels tile * lanes + lane and
/// walks the rows rowBlock * rowLanes + row, + gridDim.x * rowLanes, ...
/// (kApplyBatch of them loaded at a time): the channel constants are
/// computed once per thread (no division and no parameter loads per
/// element), every load and store is a 16-byte pack of neighbouring
/// channels, and a warp covers contiguous bytes. PyTorch's
/// batch_norm_transform_input_channels_last_kernel and
/// batch_norm_backward_elemt_channels_last_kernel fix the channel per
/// thread the same way; they read the parameters per element, here they
/// are folded into two (forward) or four (backward) per-channel constants.
///
/// Forward: y = x * a + b (Residual: + z) (then relu), a = invStd * scale,
/// b = bias - mean * a (the channels-first bnApplyKernel's arithmetic).
template <typename T, int V, bool Residual>
__global__ void __launch_bounds__(kThreads)
    bnApplyLastKernel(const T *x, const T *z, T *y, int64_t rows, int64_t packs,
                      int lanes, const float *scale, const float *bias,
                      const float *mean, const float *invStd, bool relu) {
  int lane = int(threadIdx.x) % lanes, row = int(threadIdx.x) / lanes;
  int rowLanes = kThreads / lanes;
  int64_t pack = int64_t(blockIdx.y) * lanes + lane;
  if (pack >= packs)
    return;
  float a[V], b[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    int64_t c = pack * V + k;
    a[k] = invStd[c] * scale[c];
    b[k] = bias[c] - mean[c] * a[k];
  }
  int64_t step = int64_t(gridDim.x) * rowLanes;
  for (int64_t r = int64_t(blockIdx.x) * rowLanes + row; r < rows;
       r += kApplyBatch * step) {
    float v[kApplyBatch][V], w[kApplyBatch][V];
#pragma unroll
    for (int u = 0; u < kApplyBatch; ++u)
      if (r + u * step < rows) {
        loadPack<T, V>(x, (r + u * step) * packs + pack, v[u]);
        if (Residual)
          loadPack<T, V>(z, (r + u * step) * packs + pack, w[u]);
      }
#pragma unroll
    for (int u = 0; u < kApplyBatch; ++u) {
      if (r + u * step >= rows)
        continue;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        v[u][k] = v[u][k] * a[k] + b[k];
        if (Residual)
          v[u][k] += w[u][k];
        if (relu)
          v[u][k] = fmaxf(v[u][k], 0.0f);
      }
      storePack<T, V>(y, (r + u * step) * packs + pack, v[u]);
    }
  }
}

/// Backward: dx = k * (dy - dbias / M - (x - mean) * invStd * dscale / M),
/// k = scale * invStd (bnGradApplyKernel's arithmetic); one read of x and
/// dy per element, dx may be dy (in place). Mask: dy masked as it is read.
template <typename T, int V, bool Mask>
__global__ void __launch_bounds__(kThreads)
    bnGradApplyLastKernel(const T *x, const T *dy, T *dx, int64_t rows,
                          int64_t packs, int lanes, float inverseCount,
                          const float *scale, const float *mean,
                          const float *invStd, const float *dscale,
                          const float *dbias, const float *maskScale,
                          const float *maskBias) {
  int lane = int(threadIdx.x) % lanes, row = int(threadIdx.x) / lanes;
  int rowLanes = kThreads / lanes;
  int64_t pack = int64_t(blockIdx.y) * lanes + lane;
  if (pack >= packs)
    return;
  float k[V], b[V], w[V], m[V], ms[V], mb[V];
#pragma unroll
  for (int e = 0; e < V; ++e) {
    int64_t c = pack * V + e;
    k[e] = scale[c] * invStd[c];
    b[e] = dbias[c] * inverseCount;
    w[e] = invStd[c] * dscale[c] * inverseCount;
    m[e] = mean[c];
    ms[e] = Mask ? maskScale[c] : 0.0f;
    mb[e] = Mask ? maskBias[c] : 0.0f;
  }
  int64_t step = int64_t(gridDim.x) * rowLanes;
  for (int64_t r = int64_t(blockIdx.x) * rowLanes + row; r < rows;
       r += kApplyBatch * step) {
    float g[kApplyBatch][V], v[kApplyBatch][V];
#pragma unroll
    for (int u = 0; u < kApplyBatch; ++u)
      if (r + u * step < rows) {
        loadPack<T, V>(dy, (r + u * step) * packs + pack, g[u]);
        loadPack<T, V>(x, (r + u * step) * packs + pack, v[u]);
      }
#pragma unroll
    for (int u = 0; u < kApplyBatch; ++u) {
      if (r + u * step >= rows)
        continue;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        float dy = maskedDy<Mask>(g[u][e], v[u][e], ms[e], mb[e]);
        g[u][e] = k[e] * (dy - b[e] - (v[u][e] - m[e]) * w[e]);
      }
      storePack<T, V>(dx, (r + u * step) * packs + pack, g[u]);
    }
  }
}

/// Blocks of kThreads of `kernel` that the GPU holds at once (one wave).
template <typename Kernel>
int64_t residentBlocks(const Context &ctx, Kernel kernel) {
  int perMultiprocessor = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &perMultiprocessor, kernel, kThreads, 0) != cudaSuccess ||
      perMultiprocessor < 1)
    perMultiprocessor = 1;
  return int64_t(perMultiprocessor) * ctx.smCount;
}

/// Splits of the rows of a channels-last [R, C] reduction with packs of V
/// channels: one wave of `resident` blocks over the channel tiles (long
/// blocks with several loads in flight per thread and no tail wave), at
/// least 4 rows per row lane, as many as `workspace` holds (the compiler
/// plans batchNormTrainingBytes with channels-last,
/// workspace::kChannelsLastNormalizationBlocks blocks at most).
int rowSplits(int64_t resident, int64_t channels, int64_t rows, int vec,
              size_t workspaceBytes) {
  int64_t packs = channels / vec;
  int lanes = lastLanes(packs);
  int64_t tiles = (packs + lanes - 1) / lanes;
  int64_t want = (resident + tiles - 1) / tiles;
  int64_t room =
      int64_t(workspaceBytes) / workspace::normalizationSplitBytes(channels);
  int64_t split =
      std::min({want, room, rows / (4 * (kThreads / lanes)), int64_t(1024)});
  return int(std::max<int64_t>(1, split));
}

/// The channels-last shape of a launch: packs of Vec channels, `lanes`
/// packs side by side (lastLanes), `tiles` of them across the channels.
struct LastShape {
  int64_t rows, packs;
  int lanes;
  unsigned tiles;
};
LastShape lastShape(int64_t rows, int64_t channels, int vec) {
  LastShape s;
  s.rows = rows;
  s.packs = channels / vec;
  s.lanes = lastLanes(s.packs);
  s.tiles = unsigned((s.packs + s.lanes - 1) / s.lanes);
  return s;
}

/// Row blocks of the elementwise passes: one wave of `resident` blocks over
/// all tiles (each thread then walks several rows, with its channel
/// constants in registers), fewer for small tensors.
unsigned applyRowBlocks(int64_t resident, const LastShape &s) {
  int64_t rowLanes = kThreads / s.lanes;
  int64_t needed = (s.rows + rowLanes - 1) / rowLanes;
  int64_t want = (resident + s.tiles - 1) / s.tiles;
  return unsigned(std::max<int64_t>(1, std::min(needed, want)));
}

/// The statistics (mean, invStd) of activations of type T, Vec elements per
/// load; `last`: x is channels-last (rows of `channels`, spatial = rows /
/// N).
template <typename T, int Vec>
void launchStatistics(Context &ctx, const TensorRef &x, int64_t channels,
                      int64_t spatial, bool last, size_t workspaceBytes,
                      float epsilon, float *partials, float *pm, float *ps) {
  int64_t batch = x.shape[0];
  auto *px = static_cast<const T *>(x.data);
  if (last) {
    LastShape s = lastShape(batch * spatial, channels, Vec);
    int splits =
        rowSplits(residentBlocks(ctx, bnReduceLastKernel<T, Vec, false>),
                  channels, s.rows, Vec, workspaceBytes);
    bnReduceLastKernel<T, Vec, false>
        <<<dim3(s.tiles, unsigned(splits)), kThreads, 0, ctx.stream>>>(
            px, nullptr, s.rows, channels, s.lanes, splits, epsilon, partials,
            nullptr, nullptr, pm, ps);
    if (splits > 1)
      bnFinishLastKernel<T, false>
          <<<unsigned((channels + 31) / 32), 32 * kFinishGroups, 0,
             ctx.stream>>>(px, channels, splits, double(s.rows), epsilon,
                           partials, nullptr, pm, ps);
    return;
  }
  int64_t units = batch * spatial / Vec;
  int splits = channelSplits(ctx, channels, units, workspaceBytes);
  dim3 grid(static_cast<unsigned>(channels), static_cast<unsigned>(splits));
  bnStatisticsKernel<T, Vec><<<grid, kThreads, 0, ctx.stream>>>(
      {px, channels, spatial / Vec}, units, splits, epsilon, partials, pm, ps);
  if (splits > 1)
    bnStatisticsFinishKernel<T>
        <<<gridFor(ctx, channels), kThreads, 0, ctx.stream>>>(
            px, channels, spatial, double(batch * spatial), splits, epsilon,
            partials, pm, ps);
}

/// y from the statistics, for activations of type T, Vec elements per load;
/// Residual: z (of y's shape) added before the activation.
template <typename T, int Vec, bool Residual>
void launchApply(Context &ctx, const TensorRef &x, const void *z, TensorRef &y,
                 int64_t channels, int64_t spatial, bool last, const float *pm,
                 const float *ps, const float *pscale, const float *pbias,
                 bool relu) {
  int64_t batch = x.shape[0];
  auto *px = static_cast<const T *>(x.data);
  auto *pz = static_cast<const T *>(z);
  if (last) {
    LastShape s = lastShape(batch * spatial, channels, Vec);
    unsigned rowBlocks = applyRowBlocks(
        residentBlocks(ctx, bnApplyLastKernel<T, Vec, Residual>), s);
    bnApplyLastKernel<T, Vec, Residual>
        <<<dim3(rowBlocks, s.tiles), kThreads, 0, ctx.stream>>>(
            px, pz, static_cast<T *>(y.data), s.rows, s.packs, s.lanes, pscale,
            pbias, pm, ps, relu);
    return;
  }
  int64_t total = x.numElements() / Vec;
  bnApplyKernel<T, Vec, Residual>
      <<<gridFor(ctx, total), kThreads, 0, ctx.stream>>>(
          px, pz, static_cast<T *>(y.data), total, channels, spatial / Vec,
          pscale, pbias, pm, ps, relu);
}

/// The reduction, then dx, for activations of type T; Mask: dy masked by
/// the recomputed ReLU mask as it is read (batchNormReluGrad); Fork: dy
/// masked by y > 0 and stored to dz by the reduction, which the dx pass
/// reads (batchNormAddReluGrad).
template <typename T, int Vec, bool Mask, bool Fork = false>
void launchGrad(Context &ctx, const TensorRef &x, const TensorRef &dy,
                const TensorRef &dx, int64_t channels, int64_t spatial,
                bool last, size_t workspaceBytes, float *partials,
                const float *pm, const float *ps, const float *pscale,
                float *pdscale, float *pdbias, const float *maskScale,
                const float *maskBias, const void *forkY = nullptr,
                void *forkDz = nullptr) {
  int64_t batch = x.shape[0];
  auto *px = static_cast<const T *>(x.data);
  auto *pdy = static_cast<const T *>(dy.data);
  auto *py = static_cast<const T *>(forkY);
  auto *pdz = static_cast<T *>(forkDz);
  // The dx pass reads the masked gradient: dz with Fork.
  const T *applied = Fork ? pdz : pdy;
  float inverseCount = 1.0f / float(batch * spatial);
  if (last) {
    LastShape s = lastShape(batch * spatial, channels, Vec);
    // The unmasked kernel's occupancy decides the splits in both cases: the
    // masked reduction then sums in batchNormTrainingGrad's order.
    int splits =
        rowSplits(residentBlocks(ctx, bnReduceLastKernel<T, Vec, true, false>),
                  channels, s.rows, Vec, workspaceBytes);
    bnReduceLastKernel<T, Vec, true, Mask, Fork>
        <<<dim3(s.tiles, unsigned(splits)), kThreads, 0, ctx.stream>>>(
            px, pdy, s.rows, channels, s.lanes, splits, 0.0f, partials, pm, ps,
            pdbias, pdscale, maskScale, maskBias, py, pdz);
    if (splits > 1)
      bnFinishLastKernel<T, true>
          <<<unsigned((channels + 31) / 32), 32 * kFinishGroups, 0,
             ctx.stream>>>(px, channels, splits, double(s.rows), 0.0f, partials,
                           ps, pdbias, pdscale);
    unsigned rowBlocks = applyRowBlocks(
        residentBlocks(ctx, bnGradApplyLastKernel<T, Vec, Mask>), s);
    bnGradApplyLastKernel<T, Vec, Mask>
        <<<dim3(rowBlocks, s.tiles), kThreads, 0, ctx.stream>>>(
            px, applied, static_cast<T *>(dx.data), s.rows, s.packs, s.lanes,
            inverseCount, pscale, pm, ps, pdscale, pdbias, maskScale, maskBias);
    return;
  }
  int64_t units = batch * spatial / Vec;
  int splits = channelSplits(ctx, channels, units, workspaceBytes);
  dim3 grid(static_cast<unsigned>(channels), static_cast<unsigned>(splits));
  bnGradReduceKernel<T, Vec, Mask, Fork><<<grid, kThreads, 0, ctx.stream>>>(
      {px, channels, spatial / Vec}, pdy, units, splits, pm, ps, partials,
      pdscale, pdbias, maskScale, maskBias, py, pdz);
  if (splits > 1)
    bnGradFinishKernel<<<gridFor(ctx, channels), kThreads, 0, ctx.stream>>>(
        channels, splits, partials, ps, pdscale, pdbias);
  int64_t total = x.numElements() / Vec;
  bnGradApplyKernel<T, Vec, Mask>
      <<<gridFor(ctx, total), kThreads, 0, ctx.stream>>>(
          px, applied, static_cast<T *>(dx.data), total, channels,
          spatial / Vec, inverseCount, pscale, pm, ps, pdscale, pdbias,
          maskScale, maskBias);
}

} // namespace

int normPackWidth(size_t elementSize, int64_t inner,
                  std::initializer_list<const void *> pointers) {
  for (int bytes : {16, 8}) {
    int64_t width = bytes / int64_t(elementSize);
    if (width < 2 || inner % width != 0)
      continue;
    if (std::all_of(pointers.begin(), pointers.end(), [&](const void *p) {
          return reinterpret_cast<uintptr_t>(p) % unsigned(bytes) == 0;
        }))
      return int(width);
  }
  return 1;
}

void launchBatchNormStatistics(Context &ctx, const TensorRef &x,
                               int64_t channels, int64_t spatial,
                               bool channelsLast, float epsilon,
                               void *workspace, size_t workspaceBytes,
                               float *mean, float *invStd) {
  auto *partials = static_cast<float *>(workspace);
  MEMOPT_DISPATCH_FLOAT(x.dtype, T, {
    // Packs of one channel's spatial run, or channels-last of neighbouring
    // channels of one row; x alone decides, so batchNormStats reduces in
    // batchNormTraining's order whatever y is.
    int width =
        normPackWidth(sizeof(T), channelsLast ? channels : spatial, {x.data});
    withNormPackWidth<T>(width, [&](auto vec) {
      launchStatistics<T, decltype(vec)::value>(
          ctx, x, channels, spatial, channelsLast, workspaceBytes, epsilon,
          partials, mean, invStd);
    });
  });
}

void launchBatchNormGrad(Context &ctx, const TensorRef &x, const TensorRef &dy,
                         const TensorRef &dx, int64_t channels, int64_t spatial,
                         bool channelsLast, void *workspace,
                         size_t workspaceBytes, const float *mean,
                         const float *invStd, const float *scale, float *dscale,
                         float *dbias, const float *maskScale,
                         const float *maskBias, const TensorRef *forkY,
                         const TensorRef *forkDz) {
  auto *partials = static_cast<float *>(workspace);
  MEMOPT_DISPATCH_FLOAT(x.dtype, T, {
    int width =
        normPackWidth(sizeof(T), channelsLast ? channels : spatial,
                      {x.data, dy.data, dx.data, forkY ? forkY->data : x.data,
                       forkDz ? forkDz->data : x.data});
    withNormPackWidth<T>(width, [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      if (forkY)
        launchGrad<T, kVec, false, true>(
            ctx, x, dy, dx, channels, spatial, channelsLast, workspaceBytes,
            partials, mean, invStd, scale, dscale, dbias, nullptr, nullptr,
            forkY->data, forkDz->data);
      else if (maskScale)
        launchGrad<T, kVec, true>(
            ctx, x, dy, dx, channels, spatial, channelsLast, workspaceBytes,
            partials, mean, invStd, scale, dscale, dbias, maskScale, maskBias);
      else
        launchGrad<T, kVec, false>(
            ctx, x, dy, dx, channels, spatial, channelsLast, workspaceBytes,
            partials, mean, invStd, scale, dscale, dbias, nullptr, nullptr);
    });
  });
}

namespace {

/// batchNormTraining, and with `residual` batchNormTrainingAdd, after their
/// checks: the statistics, then the apply pass (Residual with z).
void batchNormForward(Context &ctx, const char *node, float epsilon,
                      Activation activation, const TensorRef &x,
                      const TensorRef &scale, const TensorRef &bias,
                      const TensorRef *residual, TensorRef &y,
                      const TensorRef &mean, const TensorRef &invStd,
                      void *workspace, size_t workspaceBytes, bool channelsLast,
                      const ChannelLayout &layout) {
  int64_t channels = layout.channels, spatial = layout.spatial;
  if (x.numElements() == 0)
    return;
  auto *pm = static_cast<float *>(mean.data);
  auto *ps = static_cast<float *>(invStd.data);
  launchBatchNormStatistics(ctx, x, channels, spatial, channelsLast, epsilon,
                            workspace, workspaceBytes, pm, ps);
  auto *pscale = static_cast<const float *>(scale.data);
  auto *pbias = static_cast<const float *>(bias.data);
  bool relu = activation == Activation::Relu;
  MEMOPT_DISPATCH_FLOAT(x.dtype, T, {
    int width =
        normPackWidth(sizeof(T), channelsLast ? channels : spatial,
                      {x.data, y.data, residual ? residual->data : x.data});
    withNormPackWidth<T>(width, [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      if (residual)
        launchApply<T, kVec, true>(ctx, x, residual->data, y, channels, spatial,
                                   channelsLast, pm, ps, pscale, pbias, relu);
      else
        launchApply<T, kVec, false>(ctx, x, nullptr, y, channels, spatial,
                                    channelsLast, pm, ps, pscale, pbias, relu);
    });
  });
  checkLaunch(ctx, node);
}

} // namespace

void batchNormTraining(Context &ctx, const char *node, float epsilon,
                       Activation activation, TensorRef x, TensorRef scale,
                       TensorRef bias, TensorRef y, TensorRef mean,
                       TensorRef invStd, void *workspace, size_t workspaceBytes,
                       bool channelsLast) {
  ChannelLayout layout;
  layout.channelsLast = channelsLast;
  if (hasError(ctx) ||
      !validateBatchNormTraining(ctx, node, activation, x, scale, bias, y, mean,
                                 invStd, layout))
    return;
  batchNormForward(ctx, node, epsilon, activation, x, scale, bias, nullptr, y,
                   mean, invStd, workspace, workspaceBytes, channelsLast,
                   layout);
}

void batchNormTrainingAdd(Context &ctx, const char *node, float epsilon,
                          Activation activation, TensorRef x, TensorRef scale,
                          TensorRef bias, TensorRef z, TensorRef y,
                          TensorRef mean, TensorRef invStd, void *workspace,
                          size_t workspaceBytes, bool channelsLast) {
  ChannelLayout layout;
  layout.channelsLast = channelsLast;
  if (hasError(ctx) ||
      !validateBatchNormTrainingAdd(ctx, node, activation, x, scale, bias, z, y,
                                    mean, invStd, layout))
    return;
  batchNormForward(ctx, node, epsilon, activation, x, scale, bias, &z, y, mean,
                   invStd, workspace, workspaceBytes, channelsLast, layout);
}

void batchNormTrainingGrad(Context &ctx, const char *node, TensorRef x,
                           TensorRef dy, TensorRef scale, TensorRef mean,
                           TensorRef invStd, TensorRef dx, TensorRef dscale,
                           TensorRef dbias, void *workspace,
                           size_t workspaceBytes, bool channelsLast) {
  ChannelLayout layout;
  layout.channelsLast = channelsLast;
  if (hasError(ctx) ||
      !validateBatchNormTrainingGrad(ctx, node, x, dy, scale, mean, invStd, dx,
                                     dscale, dbias, layout))
    return;
  if (x.numElements() == 0)
    return;
  launchBatchNormGrad(
      ctx, x, dy, dx, layout.channels, layout.spatial, channelsLast, workspace,
      workspaceBytes, static_cast<const float *>(mean.data),
      static_cast<const float *>(invStd.data),
      static_cast<const float *>(scale.data), static_cast<float *>(dscale.data),
      static_cast<float *>(dbias.data), nullptr, nullptr, nullptr, nullptr);
  checkLaunch(ctx, node);
}

void batchNormAddReluGrad(Context &ctx, const char *node, TensorRef x,
                          TensorRef dy, TensorRef y, TensorRef scale,
                          TensorRef mean, TensorRef invStd, TensorRef dx,
                          TensorRef dscale, TensorRef dbias, TensorRef dz,
                          void *workspace, size_t workspaceBytes,
                          bool channelsLast) {
  ChannelLayout layout;
  layout.channelsLast = channelsLast;
  if (hasError(ctx) ||
      !validateBatchNormAddReluGrad(ctx, node, x, dy, y, scale, mean, invStd,
                                    dx, dscale, dbias, dz, layout))
    return;
  if (x.numElements() == 0)
    return;
  launchBatchNormGrad(
      ctx, x, dy, dx, layout.channels, layout.spatial, channelsLast, workspace,
      workspaceBytes, static_cast<const float *>(mean.data),
      static_cast<const float *>(invStd.data),
      static_cast<const float *>(scale.data), static_cast<float *>(dscale.data),
      static_cast<float *>(dbias.data), nullptr, nullptr, &y, &dz);
  checkLaunch(ctx, node);
}

void batchNormRunningUpdate(Context &ctx, const char *node, float momentum,
                            float epsilon, TensorRef mean, TensorRef invStd,
                            TensorRef runningMean, TensorRef runningVar) {
  if (hasError(ctx) || !validateBatchNormRunningUpdate(ctx, node, mean, invStd,
                                                       runningMean, runningVar))
    return;
  int64_t channels = mean.numElements();
  if (!channels)
    return;
  bnRunningUpdateKernel<<<gridFor(ctx, channels), kThreads, 0, ctx.stream>>>(
      channels, momentum, epsilon, static_cast<const float *>(mean.data),
      static_cast<const float *>(invStd.data),
      static_cast<float *>(runningMean.data),
      static_cast<float *>(runningVar.data));
  checkLaunch(ctx, node);
}

//===----------------------------------------------------------------------===//
// LayerNormalization gradient
//===----------------------------------------------------------------------===//

namespace {

/// One warp per row: the row's mean and 1/std from x (two passes), then
/// sum g and sum g * xhat (g = dy * scale), then dx; the row's statistics go
/// to rowStats[2 * row] for the column pass.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    layerNormGradRowKernel(const T *x, const T *dy, const float *scale, T *dx,
                           float *rowStats, int64_t rows, int64_t cols,
                           float epsilon) {
  int lane = threadIdx.x & 31;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x >> 5);
  for (int64_t r = int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
       r < rows; r += warps) {
    const T *xr = x + r * cols;
    const T *gr = dy + r * cols;
    float sum = 0;
    for (int64_t j = lane; j < cols; j += 32)
      sum += toFloat(xr[j]);
    float mean = warpSum(sum) / float(cols);
    float sq = 0;
    for (int64_t j = lane; j < cols; j += 32) {
      float d = toFloat(xr[j]) - mean;
      sq += d * d;
    }
    float invStd = rsqrtf(warpSum(sq) / float(cols) + epsilon);
    float sumG = 0, sumGX = 0;
    for (int64_t j = lane; j < cols; j += 32) {
      float g = toFloat(gr[j]) * scale[j];
      sumG += g;
      sumGX += g * (toFloat(xr[j]) - mean) * invStd;
    }
    float meanG = warpSum(sumG) / float(cols);
    float meanGX = warpSum(sumGX) / float(cols);
    T *dr = dx + r * cols;
    for (int64_t j = lane; j < cols; j += 32) {
      float xhat = (toFloat(xr[j]) - mean) * invStd;
      float g = toFloat(gr[j]) * scale[j];
      dr[j] = fromFloat<T>(invStd * (g - meanG - xhat * meanGX));
    }
    if (lane == 0) {
      rowStats[2 * r] = mean;
      rowStats[2 * r + 1] = invStd;
    }
  }
}

/// Column partials: block (column tile of 32, split) sums dy * xhat and dy
/// over its rows with 8 row threads; partials[(split * 2 + k) * cols + j].
template <typename T>
__global__ void layerNormGradColumnKernel(const T *x, const T *dy,
                                          const float *rowStats, int64_t rows,
                                          int64_t cols, int splits,
                                          float *partials) {
  __shared__ float tile[2][8][33];
  int64_t j = int64_t(blockIdx.x) * 32 + threadIdx.x;
  int split = blockIdx.y;
  int64_t chunk = (rows + splits - 1) / splits;
  int64_t begin = min(int64_t(split) * chunk, rows);
  int64_t end = min(begin + chunk, rows);
  float dscale = 0, dbias = 0;
  if (j < cols)
    for (int64_t r = begin + threadIdx.y; r < end; r += 8) {
      float g = toFloat(dy[r * cols + j]);
      dscale += g * (toFloat(x[r * cols + j]) - rowStats[2 * r]) *
                rowStats[2 * r + 1];
      dbias += g;
    }
  tile[0][threadIdx.y][threadIdx.x] = dscale;
  tile[1][threadIdx.y][threadIdx.x] = dbias;
  __syncthreads();
  if (threadIdx.y < 2 && j < cols) {
    float total = 0;
    for (int k = 0; k < 8; ++k)
      total += tile[threadIdx.y][k][threadIdx.x];
    partials[(int64_t(split) * 2 + threadIdx.y) * cols + j] = total;
  }
}

__global__ void layerNormGradFinishKernel(const float *partials, int64_t cols,
                                          int splits, float *dscale,
                                          float *dbias) {
  MEMOPT_GRID_STRIDE(j, cols) {
    float s = 0, b = 0;
    for (int k = 0; k < splits; ++k) {
      s += partials[(int64_t(k) * 2) * cols + j];
      b += partials[(int64_t(k) * 2 + 1) * cols + j];
    }
    dscale[j] = s;
    dbias[j] = b;
  }
}

} // namespace

void layerNormGrad(Context &ctx, const char *node, float epsilon, TensorRef x,
                   TensorRef dy, TensorRef scale, TensorRef dx,
                   TensorRef dscale, TensorRef dbias, void *workspace,
                   size_t workspaceBytes) {
  if (hasError(ctx) ||
      !validateLayerNormGrad(ctx, node, x, dy, scale, dx, dscale, dbias))
    return;
  int64_t cols = scale.numElements();
  int64_t rows = x.numElements() / cols;
  if (!rows)
    return;
  // Workspace: the row statistics, then per split two columns of partials.
  size_t statBytes = size_t(workspace::layerNormGradStatisticsBytes(rows));
  size_t splitBytes = size_t(workspace::normalizationSplitBytes(cols));
  if (!workspace || workspaceBytes < statBytes + splitBytes) {
    failf(ctx, node,
          "layer normalization gradient needs a workspace of %zu "
          "bytes, got %zu",
          statBytes + splitBytes, workspaceBytes);
    return;
  }
  auto *rowStats = static_cast<float *>(workspace);
  auto *partials =
      reinterpret_cast<float *>(static_cast<char *>(workspace) + statBytes);
  int64_t tiles = (cols + 31) / 32;
  int64_t want = (int64_t(ctx.smCount) * 4 + tiles - 1) / tiles;
  int64_t room = int64_t((workspaceBytes - statBytes) / splitBytes);
  int splits = int(std::max<int64_t>(
      1, std::min({want, room, (rows + 63) / 64, int64_t(1024)})));
  int64_t blocks = std::min<int64_t>((rows + 7) / 8, int64_t(ctx.smCount) * 8);
  MEMOPT_DISPATCH_FLOAT(x.dtype, T, {
    auto *px = static_cast<const T *>(x.data);
    auto *pdy = static_cast<const T *>(dy.data);
    layerNormGradRowKernel<T><<<unsigned(blocks), kThreads, 0, ctx.stream>>>(
        px, pdy, static_cast<const float *>(scale.data),
        static_cast<T *>(dx.data), rowStats, rows, cols, epsilon);
    layerNormGradColumnKernel<T>
        <<<dim3(unsigned(tiles), unsigned(splits)), dim3(32, 8), 0,
           ctx.stream>>>(px, pdy, rowStats, rows, cols, splits, partials);
  });
  layerNormGradFinishKernel<<<gridFor(ctx, cols), kThreads, 0, ctx.stream>>>(
      partials, cols, splits, static_cast<float *>(dscale.data),
      static_cast<float *>(dbias.data));
  checkLaunch(ctx, node);
}

} // namespace memopt::rt
