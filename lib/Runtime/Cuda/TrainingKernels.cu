//===- TrainingKernels.cu - losses, gradients, optimizer updates ----------===//
//
// The training entry points of Runtime.h that are not library calls (the
// conv filter gradient goes to cuDNN in CudaLibraries.cpp; its asymmetric-pad
// fallback is here).
//
// * Softmax cross-entropy: one warp per row with an online softmax (max and
//   sum of exponentials in one pass, merged across lanes as FlashAttention
//   merges blocks). Nothing is allocated, so the mean needs no scratch: every
//   block counts the rows that are not ignored itself (a pass over the
//   labels, which are tiny next to the logits) and adds its share of the
//   mean to the loss with one atomicAdd after a memset. The sum's order, and
//   so its last bits, varies from run to run.
// * Pooling gradient: one thread per input element gathers from the windows
//   that contain it (one per kernel tap at most) instead of scattering with
//   atomics, so f16 / bf16 gradients are summed in f32 and stored once; max
//   pooling recomputes each window's first maximum. 2-D max pooling runs
//   by tiles instead: the window maxima of a tile once into shared memory,
//   then a gather per element (channels-first planes, or channels-last
//   with 16-byte packs of neighbouring channels per thread).
// * SGD / AdamW: one grid-stride pass; the learning rate and the step are
//   read from device scalars, so a captured CUDA graph stays valid when the
//   driver changes them. With gradient accumulation the same pass first sums
//   the gradient into its accumulator and updates only when the device-side
//   micro-step is the last one (one graph for every micro-batch). The
//   gradient may be f16 / bf16 (widened on load). Under dynamic loss
//   scaling the kernel reads the scale and the found-inf flag on the device,
//   multiplies by 1 / scale and returns without writing when the flag is
//   set: PyTorch's fused Adam / SGD with `grad_scale` and `found_inf`, with
//   no host synchronization.
// * found_inf: PyTorch's _amp_foreach_non_finite_check_and_unscale_ without
//   the unscale, in multi_tensor_apply's shape: one launch per up to 64
//   tensors whose pointers travel in the kernel's parameters (no device
//   table, valid in a CUDA graph), a bit test per element (exponent all
//   ones), and a plain store of 1.0 by any thread that finds one (all write
//   the same value, so no atomics).
// * update_loss_scale: _amp_update_scale_, one thread.
// * Dropout: Philox 4x32-10 (lib/Runtime/Philox.h, shared with the host), one
//   thread per four elements, the key read on the device.
//
//===----------------------------------------------------------------------===//

#include "../Philox.h"
#include "CudaDevice.cuh"
#include "VectorPack.cuh"

#include <algorithm>

namespace memopt::rt {

namespace {

constexpr int kRowBlock = 256; // 8 warps, one row each at a time

__device__ __forceinline__ int64_t loadLabel(const void *labels, bool is64,
                                             int64_t row) {
  return is64 ? static_cast<const int64_t *>(labels)[row]
              : int64_t(static_cast<const int32_t *>(labels)[row]);
}

/// Rows whose label is not `ignoreIndex`, counted by the whole block (every
/// thread gets the count).
__device__ int64_t countCounted(const void *labels, bool is64, int64_t rows,
                                int64_t ignoreIndex) {
  __shared__ unsigned long long total;
  if (threadIdx.x == 0)
    total = 0;
  __syncthreads();
  unsigned long long local = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    local += loadLabel(labels, is64, r) != ignoreIndex;
  atomicAdd(&total, local);
  __syncthreads();
  return int64_t(total);
}

/// Max and sum of exp(x - max) of one row, by one warp (every lane gets
/// them).
template <typename T>
__device__ __forceinline__ void
rowStatistics(const T *row, int64_t classes, int lane, float &max, float &sum) {
  max = -INFINITY;
  sum = 0.0f;
  for (int64_t c = lane; c < classes; c += 32) {
    float v = toFloat(row[c]);
    if (v > max) {
      sum = sum * expf(max - v) + 1.0f;
      max = v;
    } else {
      sum += expf(v - max);
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    float otherMax = __shfl_xor_sync(0xffffffffu, max, offset);
    float otherSum = __shfl_xor_sync(0xffffffffu, sum, offset);
    float merged = fmaxf(max, otherMax);
    // A lane that saw no element has max -inf and sum 0: it adds nothing.
    sum = (sum > 0.0f ? sum * expf(max - merged) : 0.0f) +
          (otherSum > 0.0f ? otherSum * expf(otherMax - merged) : 0.0f);
    max = merged;
  }
}

template <typename T>
__global__ void __launch_bounds__(kRowBlock)
    crossEntropyKernel(const T *logits, const void *labels, bool labels64,
                       int64_t rows, int64_t classes, int64_t ignoreIndex,
                       float *loss) {
  __shared__ float scratch[32];
  int64_t counted = countCounted(labels, labels64, rows, ignoreIndex);
  int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  float partial = 0.0f;
  for (int64_t r = int64_t(blockIdx.x) * warps + (threadIdx.x >> 5); r < rows;
       r += int64_t(gridDim.x) * warps) {
    int64_t label = loadLabel(labels, labels64, r);
    if (label == ignoreIndex)
      continue;
    const T *row = logits + r * classes;
    float max, sum;
    rowStatistics(row, classes, lane, max, sum);
    bool valid = label >= 0 && label < classes;
    if (lane == 0)
      partial += valid ? max + logf(sum) - toFloat(row[label]) : NAN;
  }
  float total = blockReduce<false>(partial, scratch);
  if (threadIdx.x == 0 && counted > 0)
    atomicAdd(loss, total / float(counted));
}

template <typename T>
__global__ void __launch_bounds__(kRowBlock)
    crossEntropyGradKernel(const T *logits, const void *labels, bool labels64,
                           int64_t rows, int64_t classes, int64_t ignoreIndex,
                           const float *dloss, T *dlogits) {
  int64_t counted = countCounted(labels, labels64, rows, ignoreIndex);
  float scale = counted > 0 ? *dloss / float(counted) : 0.0f;
  int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  for (int64_t r = int64_t(blockIdx.x) * warps + (threadIdx.x >> 5); r < rows;
       r += int64_t(gridDim.x) * warps) {
    int64_t label = loadLabel(labels, labels64, r);
    const T *row = logits + r * classes;
    T *out = dlogits + r * classes;
    if (label == ignoreIndex) {
      for (int64_t c = lane; c < classes; c += 32)
        out[c] = fromFloat<T>(0.0f);
      continue;
    }
    float max, sum;
    rowStatistics(row, classes, lane, max, sum);
    bool valid = label >= 0 && label < classes;
    float inverse = valid ? 1.0f / sum : NAN;
    // Each lane reads, then writes, its own elements: dlogits may alias
    // logits.
    for (int64_t c = lane; c < classes; c += 32) {
      float p = expf(toFloat(row[c]) - max) * inverse;
      out[c] = fromFloat<T>(scale * (p - (c == label ? 1.0f : 0.0f)));
    }
  }
}

/// The fused head + loss, one chunk of `width` classes starting at `first`:
/// logits [rows, width] (the chunk's GEMM output). Merges each row's max and
/// sum of exponentials into state[r] = (max, sum, label logit) by one warp
/// per row (the label's logit taken from the chunk that holds it).
template <typename T>
__global__ void __launch_bounds__(kRowBlock)
    lceChunkStatsKernel(const T *logits, int64_t rows, int64_t width,
                        int64_t first, const void *labels, bool labels64,
                        float *state, bool firstChunk) {
  int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  for (int64_t r = int64_t(blockIdx.x) * warps + (threadIdx.x >> 5); r < rows;
       r += int64_t(gridDim.x) * warps) {
    const T *row = logits + r * width;
    float max, sum;
    rowStatistics(row, width, lane, max, sum);
    if (lane != 0)
      continue;
    float *s = state + 3 * r;
    if (firstChunk) {
      s[0] = max;
      s[1] = sum;
      s[2] = NAN; // stays NaN for a label outside [0, classes)
    } else {
      float merged = fmaxf(s[0], max);
      s[1] = (s[1] > 0.0f ? s[1] * expf(s[0] - merged) : 0.0f) +
             (sum > 0.0f ? sum * expf(max - merged) : 0.0f);
      s[0] = merged;
    }
    int64_t label = loadLabel(labels, labels64, r);
    if (label >= first && label < first + width)
      s[2] = toFloat(row[label - first]);
  }
}

/// lse[r] = max + log(sum), and the mean loss over counted rows.
__global__ void __launch_bounds__(kRowBlock)
    lceFinishKernel(const float *state, const void *labels, bool labels64,
                    int64_t rows, int64_t ignoreIndex, float *lse,
                    float *loss) {
  __shared__ float scratch[32];
  int64_t counted = countCounted(labels, labels64, rows, ignoreIndex);
  float partial = 0.0f;
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
       r += int64_t(gridDim.x) * blockDim.x) {
    const float *s = state + 3 * r;
    float value = s[0] + logf(s[1]);
    lse[r] = value;
    if (loadLabel(labels, labels64, r) != ignoreIndex)
      partial += value - s[2];
  }
  float total = blockReduce<false>(partial, scratch);
  if (threadIdx.x == 0 && counted > 0)
    atomicAdd(loss, total / float(counted));
}

/// The chunk's logits become dloss * (softmax - onehot) / count in place (0
/// for ignored rows), by one warp per row.
template <typename T>
__global__ void __launch_bounds__(kRowBlock)
    lceChunkGradKernel(T *logits, int64_t rows, int64_t width, int64_t first,
                       const void *labels, bool labels64, int64_t ignoreIndex,
                       const float *lse, const float *dloss) {
  int64_t counted = countCounted(labels, labels64, rows, ignoreIndex);
  float scale = counted > 0 ? *dloss / float(counted) : 0.0f;
  int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  for (int64_t r = int64_t(blockIdx.x) * warps + (threadIdx.x >> 5); r < rows;
       r += int64_t(gridDim.x) * warps) {
    T *row = logits + r * width;
    int64_t label = loadLabel(labels, labels64, r);
    bool ignored = label == ignoreIndex;
    float rowLse = lse[r];
    for (int64_t c = lane; c < width; c += 32) {
      float d = ignored ? 0.0f
                        : scale * (expf(toFloat(row[c]) - rowLse) -
                                   (first + c == label ? 1.0f : 0.0f));
      row[c] = fromFloat<T>(d);
    }
  }
}

/// dw[co][cl][k] = sum over images and output positions; one thread per
/// filter element (the fallback for pads cuDNN cannot express).
template <typename T>
__global__ void directConvBackwardFilterKernel(const T *x, const T *dy, T *dw,
                                               ConvGeometry g, int64_t n) {
  int64_t outSpatial = g.out[0] * g.out[1] * g.out[2];
  int64_t inSpatial = g.in[0] * g.in[1] * g.in[2];
  int64_t kSpatial = g.kernel[0] * g.kernel[1] * g.kernel[2];
  int64_t inPerGroup = g.inChannels / g.group;
  int64_t outPerGroup = g.outChannels / g.group;
  // Channels-last: x [N, in..., C], dy [N, out..., M], dw [M, k..., C/g].
  bool last = g.channelsLast;
  int64_t xStride = last ? g.inChannels : 1;
  int64_t dyStride = last ? g.outChannels : 1;
  MEMOPT_GRID_STRIDE(i, n) {
    int64_t k = last ? i / inPerGroup % kSpatial : i % kSpatial;
    int64_t cl = last ? i % inPerGroup : i / kSpatial % inPerGroup;
    int64_t co = i / (kSpatial * inPerGroup);
    int64_t ci = co / outPerGroup * inPerGroup + cl;
    int64_t kk[3] = {k / (g.kernel[1] * g.kernel[2]),
                     k / g.kernel[2] % g.kernel[1], k % g.kernel[2]};
    int64_t offset[3];
    for (int d = 0; d < 3; ++d)
      offset[d] = kk[d] * g.dilations[d] - g.padsBegin[d];
    float acc = 0.0f;
    for (int64_t b = 0; b < g.batch; ++b) {
      const T *xp = last ? x + b * inSpatial * g.inChannels + ci
                         : x + (b * g.inChannels + ci) * inSpatial;
      const T *dyp = last ? dy + b * outSpatial * g.outChannels + co
                          : dy + (b * g.outChannels + co) * outSpatial;
      for (int64_t p0 = 0; p0 < g.out[0]; ++p0) {
        int64_t q0 = p0 * g.strides[0] + offset[0];
        if (q0 < 0 || q0 >= g.in[0])
          continue;
        for (int64_t p1 = 0; p1 < g.out[1]; ++p1) {
          int64_t q1 = p1 * g.strides[1] + offset[1];
          if (q1 < 0 || q1 >= g.in[1])
            continue;
          for (int64_t p2 = 0; p2 < g.out[2]; ++p2) {
            int64_t q2 = p2 * g.strides[2] + offset[2];
            if (q2 < 0 || q2 >= g.in[2])
              continue;
            acc += toFloat(
                       dyp[((p0 * g.out[1] + p1) * g.out[2] + p2) * dyStride]) *
                   toFloat(xp[((q0 * g.in[1] + q1) * g.in[2] + q2) * xStride]);
          }
        }
      }
    }
    dw[i] = fromFloat<T>(acc);
  }
}

template <typename T>
__global__ void poolGradKernel(const T *x, const T *dy, T *dx, ConvGeometry g,
                               int64_t n, PoolKind kind, bool includePad) {
  int64_t outSpatial = g.out[0] * g.out[1] * g.out[2];
  int64_t inSpatial = g.in[0] * g.in[1] * g.in[2];
  int64_t kSpatial = g.kernel[0] * g.kernel[1] * g.kernel[2];
  // Channels-last: one (image, channel) plane is every C-th element, and
  // neighbouring threads take neighbouring channels (coalesced).
  int64_t stride = g.channelsLast ? g.inChannels : 1;
  MEMOPT_GRID_STRIDE(i, n) {
    int64_t q, xBase, dyBase;
    if (g.channelsLast) {
      int64_t c = i % g.inChannels, rest = i / g.inChannels;
      int64_t image = rest / inSpatial;
      q = rest % inSpatial;
      xBase = image * inSpatial * g.inChannels + c;
      dyBase = image * outSpatial * g.inChannels + c;
    } else {
      int64_t plane = i / inSpatial;
      q = i % inSpatial;
      xBase = plane * inSpatial;
      dyBase = plane * outSpatial;
    }
    int64_t qc[3] = {q / (g.in[1] * g.in[2]), q / g.in[2] % g.in[1],
                     q % g.in[2]};
    const T *xp = x + xBase;
    const T *dyp = dy + dyBase;
    float acc = 0.0f;
    // Each kernel tap puts this element in at most one window per axis.
    for (int64_t k = 0; k < kSpatial; ++k) {
      int64_t kk[3] = {k / (g.kernel[1] * g.kernel[2]),
                       k / g.kernel[2] % g.kernel[1], k % g.kernel[2]};
      int64_t oc[3];
      bool hit = true;
      for (int d = 0; d < 3 && hit; ++d) {
        int64_t start = qc[d] + g.padsBegin[d] - kk[d] * g.dilations[d];
        oc[d] = start / g.strides[d];
        hit = start >= 0 && start % g.strides[d] == 0 && oc[d] < g.out[d];
      }
      if (!hit)
        continue;
      float grad = toFloat(
          dyp[((oc[0] * g.out[1] + oc[1]) * g.out[2] + oc[2]) * stride]);
      int64_t valid = 0, padded = 1, best = -1;
      float bestValue = 0.0f;
      for (int d = 0; d < 3; ++d) {
        int64_t start = oc[d] * g.strides[d] - g.padsBegin[d], count = 0;
        for (int64_t t = 0; t < g.kernel[d]; ++t) {
          int64_t pos = start + t * g.dilations[d];
          count += pos >= -g.padsBegin[d] && pos < g.in[d] + g.padsEnd[d];
        }
        padded *= count;
      }
      for (int64_t t = 0; t < kSpatial; ++t) {
        int64_t tt[3] = {t / (g.kernel[1] * g.kernel[2]),
                         t / g.kernel[2] % g.kernel[1], t % g.kernel[2]};
        int64_t p[3];
        bool inside = true;
        for (int d = 0; d < 3 && inside; ++d) {
          p[d] = oc[d] * g.strides[d] - g.padsBegin[d] + tt[d] * g.dilations[d];
          inside = p[d] >= 0 && p[d] < g.in[d];
        }
        if (!inside)
          continue;
        ++valid;
        int64_t at = (p[0] * g.in[1] + p[1]) * g.in[2] + p[2];
        float v = toFloat(xp[at * stride]);
        if (kind == PoolKind::Max && (best < 0 || v > bestValue)) {
          best = at;
          bestValue = v;
        }
      }
      if (kind == PoolKind::Max)
        acc += best == q ? grad : 0.0f;
      else
        acc += grad / float(includePad ? padded : (valid ? valid : 1));
    }
    dx[i] = fromFloat<T>(acc);
  }
}

/// The first window (of stride s, size k, padding p) that holds row h.
__device__ __forceinline__ int firstWindow(int h, int k, int s, int p) {
  int lo = h + p - k + 1;
  return lo <= 0 ? 0 : (lo + s - 1) / s;
}

constexpr int kPoolTile = 32;

/// Shared bytes of maxPoolGrad2dTiledKernel: (argmax, dy) of every window
/// that touches a kPoolTile x kPoolTile tile.
inline size_t poolTileWindows(int k, int s) {
  return size_t((kPoolTile + k - 2) / s + 2);
}

/// Max pooling's gradient on 2-D planes without dilation (a ResNet stem's
/// 3x3 / 2 over 64 x 112 x 112), by tiles with 32-bit index math: a block
/// takes a 32 x 32 tile of one plane, finds the argmax of each window that
/// touches the tile once (into shared memory, with the window's dy), then
/// every element sums the dy of the windows whose argmax it is. A gather per
/// element (poolGradKernel) re-reads every window's taps for each of its
/// elements (a 3x3 / 2 window 4 times over) through 64-bit divisions; as
/// PyTorch's max_pool2d backward, which reads the forward's saved indices
/// instead, each element here reads at most ceil(k / s)^2 small entries.
/// Ties go to the first tap, as in the forward.
template <typename T>
__global__ void __launch_bounds__(256)
    maxPoolGrad2dTiledKernel(const T *x, const T *dy, T *dx, int inH, int inW,
                             int outH, int outW, int kH, int kW, int sH, int sW,
                             int pH, int pW, int tilesH, int tilesW) {
  extern __shared__ unsigned char poolShared[];
  int tiles = tilesH * tilesW;
  int64_t plane = blockIdx.x / tiles;
  int tile = int(blockIdx.x - plane * tiles);
  int h0 = (tile / tilesW) * kPoolTile, w0 = (tile % tilesW) * kPoolTile;
  int h1 = min(h0 + kPoolTile, inH) - 1, w1 = min(w0 + kPoolTile, inW) - 1;
  int ohLo = firstWindow(h0, kH, sH, pH), ohHi = min(outH - 1, (h1 + pH) / sH);
  int owLo = firstWindow(w0, kW, sW, pW), owHi = min(outW - 1, (w1 + pW) / sW);
  int winH = max(0, ohHi - ohLo + 1), winW = max(0, owHi - owLo + 1);
  int *best = reinterpret_cast<int *>(poolShared);
  float *grad = reinterpret_cast<float *>(best + winH * winW);
  const T *xp = x + plane * inH * inW;
  const T *dyp = dy + plane * outH * outW;
  for (int k = threadIdx.x; k < winH * winW; k += blockDim.x) {
    int oh = ohLo + k / winW, ow = owLo + k % winW;
    int r0 = oh * sH - pH, c0 = ow * sW - pW, at = -1;
    float bestValue = 0.0f;
    for (int r = max(r0, 0); r < min(r0 + kH, inH); ++r)
      for (int c = max(c0, 0); c < min(c0 + kW, inW); ++c) {
        float v = toFloat(xp[r * inW + c]);
        if (at < 0 || v > bestValue) {
          at = r * inW + c;
          bestValue = v;
        }
      }
    best[k] = at;
    grad[k] = toFloat(dyp[oh * outW + ow]);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kPoolTile * kPoolTile; e += blockDim.x) {
    int h = h0 + e / kPoolTile, w = w0 + e % kPoolTile;
    if (h > h1 || w > w1)
      continue;
    int q = h * inW + w;
    float acc = 0.0f;
    int ohEnd = min(ohHi, (h + pH) / sH), owEnd = min(owHi, (w + pW) / sW);
    for (int oh = max(ohLo, firstWindow(h, kH, sH, pH)); oh <= ohEnd; ++oh)
      for (int ow = max(owLo, firstWindow(w, kW, sW, pW)); ow <= owEnd; ++ow) {
        int k = (oh - ohLo) * winW + (ow - owLo);
        if (best[k] == q)
          acc += grad[k];
      }
    dx[plane * inH * inW + q] = fromFloat<T>(acc);
  }
}

/// Channels-last max pooling's gradient tile: kPoolLastTile x kPoolLastTile
/// positions of one image, and a slab of up to kPoolLastLanes packs of
/// neighbouring channels.
constexpr int kPoolLastTile = 16, kPoolLastLanes = 8;

/// Windows along one axis that touch a kPoolLastTile-wide tile.
inline int64_t poolLastTileWindows(int64_t k, int64_t s) {
  return (kPoolLastTile + k - 2) / s + 2;
}

/// Max pooling's gradient on channels-last 2-D images without dilation (a
/// ResNet stem's 3x3 / 2 over 64 x 112 x 112 x 64, memopt-layout's training
/// programs): maxPoolGrad2dTiledKernel with the channel innermost. Block
/// (image x tile, slab) takes a 16 x 16 tile of positions and `lanes` packs
/// of V neighbouring channels (16-byte loads along the contiguous axis, as
/// PyTorch's max_pool_backward_nhwc vectorizes along C); first every window
/// that touches the tile finds each channel's first maximum, with the same
/// scan order, tie and NaN rule as the forward, the host and the
/// channels-first kernel (the first tap in range starts, a later one wins
/// only when greater), and keeps it as a tap index with its dy in shared
/// memory; then each element sums, in window order, the dy of the windows
/// whose maximum it is and stores its pack once. PyTorch reads the
/// forward's saved indices; here nothing is saved, each window's taps are
/// read once per tile (about 3 loads per element, through L1) and the
/// index math is 32-bit without a division per tap. Taps are bytes (at most
/// 254 per window; 255: a window wholly in the padding).
template <typename T, int V>
__global__ void __launch_bounds__(256)
    maxPoolGradLastKernel(const T *x, const T *dy, T *dx, int inH, int inW,
                          int outH, int outW, int kH, int kW, int sH, int sW,
                          int pH, int pW, int tilesH, int tilesW, int packs,
                          int lanes) {
  extern __shared__ unsigned char poolShared[];
  int tiles = tilesH * tilesW;
  int image = int(blockIdx.x) / tiles;
  int tile = int(blockIdx.x) - image * tiles;
  int h0 = (tile / tilesW) * kPoolLastTile,
      w0 = (tile % tilesW) * kPoolLastTile;
  int h1 = min(h0 + kPoolLastTile, inH) - 1,
      w1 = min(w0 + kPoolLastTile, inW) - 1;
  int ohLo = firstWindow(h0, kH, sH, pH), ohHi = min(outH - 1, (h1 + pH) / sH);
  int owLo = firstWindow(w0, kW, sW, pW), owHi = min(outW - 1, (w1 + pW) / sW);
  int winH = max(0, ohHi - ohLo + 1), winW = max(0, owHi - owLo + 1);
  int slab = lanes * V;
  // grad[window][slab channel] as float, then tap[window][slab channel].
  float *grad = reinterpret_cast<float *>(poolShared);
  unsigned char *tap =
      reinterpret_cast<unsigned char *>(grad + winH * winW * slab);
  int lane = int(threadIdx.x) % lanes, pos = int(threadIdx.x) / lanes;
  int posLanes = int(blockDim.x) / lanes;
  int pack = int(blockIdx.y) * lanes + lane;
  bool valid = pack < packs;
  const T *xi = x + int64_t(image) * inH * inW * packs * V;
  const T *dyi = dy + int64_t(image) * outH * outW * packs * V;
  if (valid)
    for (int k = pos; k < winH * winW; k += posLanes) {
      int oh = ohLo + k / winW, ow = owLo + k % winW;
      int r0 = oh * sH - pH, c0 = ow * sW - pW;
      float best[V];
      int at[V];
      bool none = true;
      for (int r = max(r0, 0); r < min(r0 + kH, inH); ++r)
        for (int c = max(c0, 0); c < min(c0 + kW, inW); ++c) {
          float v[V];
          loadPack<T, V>(xi, int64_t(r * inW + c) * packs + pack, v);
          int t = (r - r0) * kW + (c - c0);
#pragma unroll
          for (int e = 0; e < V; ++e)
            if (none || v[e] > best[e]) {
              best[e] = v[e];
              at[e] = t;
            }
          none = false;
        }
      float g[V];
      loadPack<T, V>(dyi, int64_t(oh * outW + ow) * packs + pack, g);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        grad[k * slab + lane * V + e] = g[e];
        tap[k * slab + lane * V + e] = (unsigned char)(none ? 255 : at[e]);
      }
    }
  __syncthreads();
  if (!valid)
    return;
  T *dxi = dx + int64_t(image) * inH * inW * packs * V;
  for (int e = pos; e < kPoolLastTile * kPoolLastTile; e += posLanes) {
    int h = h0 + e / kPoolLastTile, w = w0 + e % kPoolLastTile;
    if (h > h1 || w > w1)
      continue;
    float acc[V];
#pragma unroll
    for (int j = 0; j < V; ++j)
      acc[j] = 0.0f;
    int ohEnd = min(ohHi, (h + pH) / sH), owEnd = min(owHi, (w + pW) / sW);
    for (int oh = max(ohLo, firstWindow(h, kH, sH, pH)); oh <= ohEnd; ++oh)
      for (int ow = max(owLo, firstWindow(w, kW, sW, pW)); ow <= owEnd; ++ow) {
        int k = (oh - ohLo) * winW + (ow - owLo);
        int t = (h - (oh * sH - pH)) * kW + (w - (ow * sW - pW));
#pragma unroll
        for (int j = 0; j < V; ++j)
          if (tap[k * slab + lane * V + j] == t)
            acc[j] += grad[k * slab + lane * V + j];
      }
    storePack<T, V>(dxi, int64_t(h * inW + w) * packs + pack, acc);
  }
}

/// Launches maxPoolGradLastKernel when it applies (2-D windows without
/// dilation, at most 254 taps, 32-bit positions, the tile's windows in
/// 48 KiB of shared memory); false leaves the gradient to poolGradKernel.
bool launchMaxPoolGradLast(Context &ctx, const ConvGeometry &g, TensorRef x,
                           TensorRef dy, TensorRef dx) {
  if (g.in[0] != 1 || g.out[0] != 1 || g.kernel[0] != 1 ||
      g.dilations[1] != 1 || g.dilations[2] != 1 ||
      g.kernel[1] * g.kernel[2] > 254 ||
      g.in[1] * g.in[2] * g.inChannels >= (int64_t(1) << 31) ||
      g.out[1] * g.out[2] * g.inChannels >= (int64_t(1) << 31))
    return false;
  int64_t tilesH = (g.in[1] + kPoolLastTile - 1) / kPoolLastTile,
          tilesW = (g.in[2] + kPoolLastTile - 1) / kPoolLastTile;
  int64_t blocks = g.batch * tilesH * tilesW;
  int64_t windows = poolLastTileWindows(g.kernel[1], g.strides[1]) *
                    poolLastTileWindows(g.kernel[2], g.strides[2]);
  if (blocks >= (int64_t(1) << 31))
    return false;
  bool launched = false;
  MEMOPT_DISPATCH_FLOAT(dx.dtype, T, {
    // 16-byte packs of neighbouring channels where the channel count and
    // the pointers allow, else 8 bytes, else one channel per thread.
    int vec = 1;
    for (int bytes : {16, 8}) {
      int width = bytes / int(sizeof(T));
      bool aligned = true;
      for (const void *p :
           std::initializer_list<const void *>{x.data, dy.data, dx.data})
        aligned = aligned && reinterpret_cast<uintptr_t>(p) % bytes == 0;
      if (vec == 1 && width > 1 && g.inChannels % width == 0 && aligned)
        vec = width;
    }
    int64_t packs = g.inChannels / vec;
    int lanes = 1;
    while (lanes < kPoolLastLanes && lanes < packs)
      lanes *= 2;
    size_t shared = size_t(windows * lanes * vec) * (sizeof(float) + 1);
    int64_t slabs = (packs + lanes - 1) / lanes;
    if (shared <= 48 * 1024 && slabs < 65536) {
      dim3 grid{unsigned(blocks), unsigned(slabs)};
      auto launch = [&](auto kernel) {
        kernel<<<grid, 256, shared, ctx.stream>>>(
            static_cast<const T *>(x.data), static_cast<const T *>(dy.data),
            static_cast<T *>(dx.data), int(g.in[1]), int(g.in[2]),
            int(g.out[1]), int(g.out[2]), int(g.kernel[1]), int(g.kernel[2]),
            int(g.strides[1]), int(g.strides[2]), int(g.padsBegin[1]),
            int(g.padsBegin[2]), int(tilesH), int(tilesW), int(packs), lanes);
      };
      constexpr int kWide = 16 / int(sizeof(T)), kNarrow = 8 / int(sizeof(T));
      if (vec == kWide)
        launch(maxPoolGradLastKernel<T, kWide>);
      else if (vec == kNarrow)
        launch(maxPoolGradLastKernel<T, kNarrow>);
      else
        launch(maxPoolGradLastKernel<T, 1>);
      launched = true;
    }
  });
  return launched;
}

/// One thread per group of four elements: one Philox call gives the four
/// words (lib/Runtime/Philox.h, the host backend's mask bit for bit). The key
/// is read from device memory, so graph replays see the driver's new
/// micro-batch number.
template <typename T>
__global__ void dropoutKernel(const T *x, T *y, const int64_t *key,
                              uint32_t stream, float ratio, int64_t n) {
  DropoutKey d = makeDropoutKey(key, stream, ratio);
  int64_t groups = (n + 3) / 4;
  MEMOPT_GRID_STRIDE(group, groups) {
    Philox4x32 words = dropoutWords(d, uint64_t(group));
    for (int k = 0; k < 4; ++k) {
      int64_t i = group * 4 + k;
      if (i < n)
        y[i] = fromFloat<T>(
            words.word[k] < d.threshold ? 0.0f : toFloat(x[i]) * d.scale);
    }
  }
}

/// One thread per group of four elements, the words dropoutKernel draws.
template <typename T>
__global__ void randomUniformKernel(T *y, const int64_t *key, uint32_t stream,
                                    float low, float range, int64_t n) {
  DropoutKey d = makeDropoutKey(key, stream, 0.0f);
  int64_t groups = (n + 3) / 4;
  MEMOPT_GRID_STRIDE(group, groups) {
    Philox4x32 words = dropoutWords(d, uint64_t(group));
    for (int k = 0; k < 4; ++k) {
      int64_t i = group * 4 + k;
      if (i < n)
        y[i] = fromFloat<T>(fmaf(range, philoxUnitFloat(words.word[k]), low));
    }
  }
}

/// Gradient accumulation on the device (GradientAccumulation): every
/// micro-step sums the gradient into the accumulator, only the last one
/// updates. The micro-step is read from device memory, so one captured graph
/// serves every micro-batch; the kernels of the other micro-steps only add.
struct DeviceAccumulation {
  float *sum = nullptr;             ///< null: no accumulation
  const float *microStep = nullptr; ///< null: no micro-step gate
  float lastStep = 0;
};

DeviceAccumulation deviceAccumulation(const GradientAccumulation *a) {
  DeviceAccumulation d;
  if (a) {
    d.sum = static_cast<float *>(a->accumulator.data);
    d.microStep = static_cast<const float *>(a->microStep.data);
    d.lastStep = float(a->steps - 1);
  }
  return d;
}

/// The gradient element the update uses: the accumulator's element after
/// summing `grad` into it (the gradient itself without accumulation).
template <typename T>
__device__ inline float accumulatedGradient(const DeviceAccumulation &a,
                                            float micro, const T *grad,
                                            int64_t i) {
  float g = toFloat(grad[i]);
  if (!a.sum)
    return g;
  g = micro == 0.0f ? g : a.sum[i] + g;
  a.sum[i] = g;
  return g;
}

/// The accumulation pass alone (accumulateGradient: --offload-accumulators
/// device, whose update runs on the CPU from the sum).
template <typename T>
__global__ void accumulateKernel(const T *grad, int64_t n,
                                 DeviceAccumulation accumulation) {
  float micro = *accumulation.microStep;
  MEMOPT_GRID_STRIDE(i, n) {
    accumulatedGradient(accumulation, micro, grad, i);
  }
}

/// Dynamic loss scaling on the device (null pointers: none).
struct DeviceScaling {
  const float *scale = nullptr;
  const float *foundInf = nullptr;
  const float *state = nullptr;
};

DeviceScaling deviceScaling(const LossScaling *s) {
  DeviceScaling d;
  if (s) {
    d.scale = static_cast<const float *>(s->scale.data);
    d.foundInf = static_cast<const float *>(s->foundInf.data);
    d.state =
        s->state.data ? static_cast<const float *>(s->state.data) : nullptr;
  }
  return d;
}

/// 1 / scale as PyTorch computes inv_scale (the reciprocal in double,
/// rounded to f32); 1 without scaling.
__device__ inline float inverseScale(const DeviceScaling &s) {
  return s.scale ? float(1.0 / double(*s.scale)) : 1.0f;
}

template <typename T>
__global__ void sgdKernel(float *param, const T *grad, float *buffer,
                          const float *lr, float momentum, float weightDecay,
                          int64_t n, DeviceAccumulation accumulation,
                          DeviceScaling scaling) {
  float rate = *lr;
  float micro = accumulation.microStep ? *accumulation.microStep : 0.0f;
  bool apply = (!accumulation.microStep || micro == accumulation.lastStep) &&
               !(scaling.foundInf && *scaling.foundInf != 0.0f);
  float inverse = inverseScale(scaling);
  MEMOPT_GRID_STRIDE(i, n) {
    float g = accumulatedGradient(accumulation, micro, grad, i);
    if (!apply)
      continue;
    g *= inverse;
    float d = g + weightDecay * param[i];
    if (buffer) {
      d = momentum * buffer[i] + d;
      buffer[i] = d;
    }
    param[i] -= rate * d;
  }
}

template <typename T>
__global__ void adamwKernel(float *param, const T *grad, float *m, float *v,
                            const float *lr, const float *step, float beta1,
                            float beta2, float eps, float weightDecay,
                            int64_t n, DeviceAccumulation accumulation,
                            DeviceScaling scaling) {
  float rate = *lr, t = *step;
  // Skipped steps did not step the optimizer.
  if (scaling.state)
    t -= scaling.state[1];
  float stepSize = rate / (1.0f - powf(beta1, t));
  float correction2 = sqrtf(1.0f - powf(beta2, t));
  float micro = accumulation.microStep ? *accumulation.microStep : 0.0f;
  bool apply = (!accumulation.microStep || micro == accumulation.lastStep) &&
               !(scaling.foundInf && *scaling.foundInf != 0.0f);
  float inverse = inverseScale(scaling);
  MEMOPT_GRID_STRIDE(i, n) {
    float g = accumulatedGradient(accumulation, micro, grad, i);
    if (!apply)
      continue;
    g *= inverse;
    float p = param[i] * (1.0f - rate * weightDecay);
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] = p - stepSize * mi / (sqrtf(vi) / correction2 + eps);
  }
}

/// Up to kFoundInfTensors tensors checked by one launch; their pointers,
/// sizes, dtypes and first blocks travel in the kernel's parameters. Each
/// block checks kFoundInfChunk elements of one tensor, so the blocks follow
/// the bytes. (A fixed row of blocks per tensor gave GPT-2's 38.6M-element
/// embedding gradient 20 blocks, 132 SMs x 8 / 52 gradients, while the others
/// finished: 2.8 ms of a 28.8 ms profiled fp16 step on an H200.)
constexpr int kFoundInfTensors = 64;
constexpr int kFoundInfThreads = 256;
constexpr int64_t kFoundInfChunk = kFoundInfThreads * 16;
struct TensorList {
  const void *data[kFoundInfTensors];
  int64_t count[kFoundInfTensors];
  int64_t firstBlock[kFoundInfTensors];
  DType dtype[kFoundInfTensors];
  int tensors;
};

/// True if the element's exponent bits are all ones (inf or NaN).
__device__ __forceinline__ bool isNonFinite(const void *p, DType t, int64_t i) {
  switch (t) {
  case DType::F16:
    return (static_cast<const uint16_t *>(p)[i] & 0x7c00u) == 0x7c00u;
  case DType::BF16:
    return (static_cast<const uint16_t *>(p)[i] & 0x7f80u) == 0x7f80u;
  default:
    return (static_cast<const uint32_t *>(p)[i] & 0x7f800000u) == 0x7f800000u;
  }
}

/// Clears the flag before the checks.
__global__ void foundInfResetKernel(float *found) { *found = 0.0f; }

/// Block b checks chunk b - firstBlock[t] of the tensor t it falls in; with
/// `microStep`, the launch checks only after micro-step 0 (accumulators).
__global__ void __launch_bounds__(kFoundInfThreads)
    foundInfKernel(TensorList list, const float *microStep, float *found) {
  if (microStep && *microStep == 0.0f)
    return;
  const int64_t block = blockIdx.x;
  int t = 0;
  while (t + 1 < list.tensors && list.firstBlock[t + 1] <= block)
    ++t;
  const void *p = list.data[t];
  const DType dtype = list.dtype[t];
  const int64_t begin = (block - list.firstBlock[t]) * kFoundInfChunk;
  const int64_t end = min(begin + kFoundInfChunk, list.count[t]);
  bool bad = false;
  for (int64_t i = begin + threadIdx.x; i < end; i += kFoundInfThreads)
    bad |= isNonFinite(p, dtype, i);
  if (__any_sync(0xffffffffu, bad) && (threadIdx.x & 31) == 0)
    *found = 1.0f;
}

__global__ void updateLossScaleKernel(float *scale, float *state,
                                      const float *foundInf,
                                      const float *microStep, float lastStep,
                                      float growth, float backoff,
                                      float interval) {
  if (microStep && *microStep != lastStep)
    return;
  if (*foundInf != 0.0f) {
    *scale *= backoff;
    state[0] = 0.0f;
    state[1] += 1.0f;
    return;
  }
  state[0] += 1.0f;
  if (state[0] >= interval) {
    float grown = *scale * growth;
    if (isfinite(grown))
      *scale = grown;
    state[0] = 0.0f;
  }
}

/// Blocks for the row kernels: enough warps for the rows, few enough that
/// the per-block label count stays small next to the rows' work.
unsigned rowBlocks(const Context &ctx, int64_t rows) {
  int64_t blocks = (rows + kRowBlock / 32 - 1) / (kRowBlock / 32);
  return unsigned(std::max<int64_t>(
      1, std::min<int64_t>(blocks, int64_t(ctx.smCount) * 4)));
}

} // namespace

void softmaxCrossEntropy(Context &ctx, const char *node, int64_t ignoreIndex,
                         TensorRef logits, TensorRef labels, TensorRef loss) {
  int64_t rows = 0, classes = 0;
  if (hasError(ctx) ||
      !validateSoftmaxCrossEntropy(ctx, node, logits, labels, loss, "loss",
                                   rows, classes) ||
      !checkCuda(ctx, node,
                 cudaMemsetAsync(loss.data, 0, sizeof(float), ctx.stream),
                 "cudaMemsetAsync"))
    return;
  if (rows == 0 || classes == 0)
    return;
  bool is64 = labels.dtype == DType::I64;
  MEMOPT_DISPATCH_FLOAT(
      logits.dtype, T,
      crossEntropyKernel<T><<<rowBlocks(ctx, rows), kRowBlock, 0, ctx.stream>>>(
          static_cast<const T *>(logits.data), labels.data, is64, rows, classes,
          ignoreIndex, static_cast<float *>(loss.data)));
  checkLaunch(ctx, node);
}

void softmaxCrossEntropyGrad(Context &ctx, const char *node,
                             int64_t ignoreIndex, TensorRef logits,
                             TensorRef labels, TensorRef dloss,
                             TensorRef dlogits) {
  int64_t rows = 0, classes = 0;
  if (hasError(ctx) ||
      !validateSoftmaxCrossEntropy(ctx, node, logits, labels, dloss, "dloss",
                                   rows, classes) ||
      !checkFloat(ctx, node, dlogits, "dlogits") ||
      !checkSameDType(ctx, node, logits, dlogits, "logits/dlogits") ||
      !checkSameCount(ctx, node, logits, dlogits, "logits/dlogits"))
    return;
  if (rows == 0 || classes == 0)
    return;
  bool is64 = labels.dtype == DType::I64;
  MEMOPT_DISPATCH_FLOAT(logits.dtype, T,
                        crossEntropyGradKernel<T>
                        <<<rowBlocks(ctx, rows), kRowBlock, 0, ctx.stream>>>(
                            static_cast<const T *>(logits.data), labels.data,
                            is64, rows, classes, ignoreIndex,
                            static_cast<const float *>(dloss.data),
                            static_cast<T *>(dlogits.data)));
  checkLaunch(ctx, node);
}

namespace {

/// Classes per chunk of the fused head + loss within `bytes`: all of them
/// when they fit (less the odd tail: a width that is a multiple of 8 keeps
/// the chunk's rows 16-byte aligned for tensor-core GEMMs, and the tail of
/// fewer than 8 classes is its own small chunk), else a multiple of 64.
int64_t lceChunkClasses(int64_t rows, int64_t classes, DType dtype,
                        size_t bytes) {
  int64_t aligned = classes >= 8 ? classes / 8 * 8 : classes;
  if (linearCrossEntropyWorkspaceBytes(rows, aligned, dtype) <= bytes)
    return aligned;
  size_t perClass = size_t(std::max<int64_t>(rows, 1)) * dtypeSize(dtype);
  int64_t width = int64_t(bytes / perClass) / 64 * 64;
  while (width > 0 &&
         linearCrossEntropyWorkspaceBytes(rows, width, dtype) > bytes)
    width -= 64;
  return std::min(width, aligned);
}

/// The workspace's layout for `rows` rows: the row statistics, then a
/// chunk of `width` classes' logits.
struct LceChunks {
  int64_t rows = 0, width = 0;
  float *state = nullptr;
  void *logits = nullptr;
};

bool lceChunks(Context &ctx, const char *node, const TensorRef &x, int64_t rows,
               int64_t classes, void *workspace, size_t workspaceBytes,
               LceChunks &c) {
  c.rows = rows;
  c.width =
      workspace ? lceChunkClasses(rows, classes, x.dtype, workspaceBytes) : 0;
  if (c.width < 1) {
    failf(ctx, node,
          "the fused linear cross-entropy needs a workspace of at least %zu "
          "bytes (8 classes of %lld rows), got %zu",
          linearCrossEntropyWorkspaceBytes(rows, std::min<int64_t>(classes, 8),
                                           x.dtype),
          (long long)rows, workspaceBytes);
    return false;
  }
  c.state = static_cast<float *>(workspace);
  c.logits = static_cast<uint8_t *>(workspace) +
             linearCrossEntropyWorkspaceBytes(rows, 0, x.dtype);
  return true;
}

TensorRef matrix(void *data, DType dtype, int64_t rows, int64_t cols) {
  int64_t shape[2] = {rows, cols};
  return makeTensor(data, dtype, 2, shape);
}

/// Classes [first, first + width) of w, as a [width, K] matrix.
TensorRef classRows(const TensorRef &w, int64_t first, int64_t width) {
  return matrix(static_cast<uint8_t *>(w.data) +
                    size_t(first * w.shape[1]) * dtypeSize(w.dtype),
                w.dtype, width, w.shape[1]);
}

/// The chunk's logits x w[first, first + width)^T into the workspace, in x's
/// dtype (the separate MatMul's rounding); false on an error.
bool chunkLogits(Context &ctx, const char *node, bool allowTf32,
                 const TensorRef &xs, const TensorRef &w, int64_t first,
                 int64_t width, const LceChunks &c, TensorRef &chunk) {
  MatmulParams params;
  params.transB = true;
  params.allowTf32 = allowTf32;
  chunk = matrix(c.logits, xs.dtype, c.rows, width);
  matmulWithWorkspace(ctx, node, params, xs, classRows(w, first, width),
                      nullptr, chunk, nullptr, 0);
  return !hasError(ctx);
}

} // namespace

void linearCrossEntropy(Context &ctx, const char *node,
                        const LinearCrossEntropyParams &params, TensorRef x,
                        TensorRef w, TensorRef labels, TensorRef loss,
                        TensorRef lse, void *workspace, size_t workspaceBytes) {
  int64_t rows = 0, classes = 0, features = 0;
  LceChunks c;
  if (hasError(ctx) ||
      !validateLinearCrossEntropy(ctx, node, x, w, labels, loss, "loss", lse,
                                  rows, classes, features) ||
      !checkCuda(ctx, node,
                 cudaMemsetAsync(loss.data, 0, sizeof(float), ctx.stream),
                 "cudaMemsetAsync"))
    return;
  if (rows == 0 || classes == 0)
    return;
  if (!lceChunks(ctx, node, x, rows, classes, workspace, workspaceBytes, c))
    return;
  const bool is64 = labels.dtype == DType::I64;
  TensorRef xs = matrix(x.data, x.dtype, rows, features);
  for (int64_t first = 0; first < classes && !hasError(ctx); first += c.width) {
    int64_t width = std::min(c.width, classes - first);
    TensorRef chunk;
    if (!chunkLogits(ctx, node, params.allowTf32, xs, w, first, width, c,
                     chunk))
      return;
    MEMOPT_DISPATCH_FLOAT(x.dtype, T,
                          lceChunkStatsKernel<T>
                          <<<rowBlocks(ctx, rows), kRowBlock, 0, ctx.stream>>>(
                              static_cast<const T *>(chunk.data), rows, width,
                              first, labels.data, is64, c.state, first == 0));
    if (!checkLaunch(ctx, node))
      return;
  }
  lceFinishKernel<<<rowBlocks(ctx, rows), kRowBlock, 0, ctx.stream>>>(
      c.state, labels.data, is64, rows, params.ignoreIndex,
      static_cast<float *>(lse.data), static_cast<float *>(loss.data));
  checkLaunch(ctx, node);
}

void linearCrossEntropyGrad(Context &ctx, const char *node,
                            const LinearCrossEntropyParams &params, TensorRef x,
                            TensorRef w, TensorRef labels, TensorRef lse,
                            TensorRef dloss, TensorRef dx, TensorRef dw,
                            void *workspace, size_t workspaceBytes) {
  int64_t rows = 0, classes = 0, features = 0;
  LceChunks c;
  if (hasError(ctx) ||
      !validateLinearCrossEntropy(ctx, node, x, w, labels, dloss, "dloss", lse,
                                  rows, classes, features) ||
      !validateLinearCrossEntropyGrad(ctx, node, x, w, dx, dw))
    return;
  if (rows == 0 || classes == 0 || features == 0) {
    if (dx.bytes())
      checkCuda(ctx, node, cudaMemsetAsync(dx.data, 0, dx.bytes(), ctx.stream),
                "cudaMemsetAsync");
    if (dw.bytes())
      checkCuda(ctx, node, cudaMemsetAsync(dw.data, 0, dw.bytes(), ctx.stream),
                "cudaMemsetAsync");
    return;
  }
  if (!lceChunks(ctx, node, x, rows, classes, workspace, workspaceBytes, c))
    return;
  const bool is64 = labels.dtype == DType::I64;
  TensorRef xs = matrix(x.data, x.dtype, rows, features);
  TensorRef dxs = matrix(dx.data, dx.dtype, rows, features);
  MatmulParams weightGrad, inputGrad;
  weightGrad.transA = true;
  weightGrad.allowTf32 = inputGrad.allowTf32 = params.allowTf32;
  for (int64_t first = 0; first < classes && !hasError(ctx); first += c.width) {
    int64_t width = std::min(c.width, classes - first);
    TensorRef chunk;
    if (!chunkLogits(ctx, node, params.allowTf32, xs, w, first, width, c,
                     chunk))
      return;
    MEMOPT_DISPATCH_FLOAT(x.dtype, T,
                          lceChunkGradKernel<T>
                          <<<rowBlocks(ctx, rows), kRowBlock, 0, ctx.stream>>>(
                              static_cast<T *>(chunk.data), rows, width, first,
                              labels.data, is64, params.ignoreIndex,
                              static_cast<const float *>(lse.data),
                              static_cast<const float *>(dloss.data)));
    if (!checkLaunch(ctx, node))
      return;
    // dw's rows of this chunk: d^T x; dx: the sum over chunks of d w.
    matmulWithWorkspace(ctx, node, weightGrad, chunk, xs, nullptr,
                        classRows(dw, first, width), nullptr, 0);
    TensorRef wc = classRows(w, first, width);
    if (first == 0)
      matmulWithWorkspace(ctx, node, inputGrad, chunk, wc, nullptr, dxs,
                          nullptr, 0);
    else
      matmulAccumulate(ctx, node, inputGrad, chunk, wc, dxs, nullptr, 0);
  }
}

bool launchDirectConvBackwardFilter(Context &ctx, const char *node,
                                    const ConvGeometry &g, TensorRef x,
                                    TensorRef dy, TensorRef dw) {
  int64_t n = dw.numElements();
  MEMOPT_DISPATCH_FLOAT(dw.dtype, T,
                        directConvBackwardFilterKernel<T>
                        <<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
                            static_cast<const T *>(x.data),
                            static_cast<const T *>(dy.data),
                            static_cast<T *>(dw.data), g, n));
  return checkLaunch(ctx, node);
}

void poolGrad(Context &ctx, const char *node, const PoolParams &params,
              TensorRef x, TensorRef dy, TensorRef dx) {
  ConvGeometry g;
  if (hasError(ctx) || !validatePoolGrad(ctx, node, params, x, dy, dx, g))
    return;
  int64_t n = dx.numElements();
  if (n == 0)
    return;
  bool planar = g.in[0] == 1 && g.out[0] == 1 && g.kernel[0] == 1 &&
                g.dilations[1] == 1 && g.dilations[2] == 1;
  size_t windows = poolTileWindows(int(g.kernel[1]), int(g.strides[1])) *
                   poolTileWindows(int(g.kernel[2]), int(g.strides[2]));
  size_t shared = windows * (sizeof(int) + sizeof(float));
  int64_t planes = n / std::max<int64_t>(1, g.in[1] * g.in[2]);
  int64_t tilesH = (g.in[1] + kPoolTile - 1) / kPoolTile,
          tilesW = (g.in[2] + kPoolTile - 1) / kPoolTile;
  if (params.kind == PoolKind::Max && planar && !g.channelsLast &&
      g.in[1] * g.in[2] < (int64_t(1) << 31) &&
      g.out[1] * g.out[2] < (int64_t(1) << 31) && shared <= 32 * 1024 &&
      planes * tilesH * tilesW < (int64_t(1) << 31)) {
    MEMOPT_DISPATCH_FLOAT(
        dx.dtype, T,
        maxPoolGrad2dTiledKernel<T>
        <<<unsigned(planes * tilesH * tilesW), 256, shared, ctx.stream>>>(
            static_cast<const T *>(x.data), static_cast<const T *>(dy.data),
            static_cast<T *>(dx.data), int(g.in[1]), int(g.in[2]),
            int(g.out[1]), int(g.out[2]), int(g.kernel[1]), int(g.kernel[2]),
            int(g.strides[1]), int(g.strides[2]), int(g.padsBegin[1]),
            int(g.padsBegin[2]), int(tilesH), int(tilesW)));
    checkLaunch(ctx, node);
    return;
  }
  if (params.kind == PoolKind::Max && g.channelsLast &&
      launchMaxPoolGradLast(ctx, g, x, dy, dx)) {
    checkLaunch(ctx, node);
    return;
  }
  MEMOPT_DISPATCH_FLOAT(
      dx.dtype, T,
      poolGradKernel<T><<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
          static_cast<const T *>(x.data), static_cast<const T *>(dy.data),
          static_cast<T *>(dx.data), g, n, params.kind,
          params.countIncludePad));
  checkLaunch(ctx, node);
}

void dropout(Context &ctx, const char *node, float ratio, uint32_t stream,
             TensorRef x, TensorRef key, TensorRef y) {
  if (hasError(ctx) || !validateDropout(ctx, node, ratio, x, key, y))
    return;
  int64_t n = x.numElements();
  if (n == 0)
    return;
  MEMOPT_DISPATCH_FLOAT(
      x.dtype, T,
      dropoutKernel<T><<<gridFor(ctx, (n + 3) / 4), 256, 0, ctx.stream>>>(
          static_cast<const T *>(x.data), static_cast<T *>(y.data),
          static_cast<const int64_t *>(key.data), stream, ratio, n));
  checkLaunch(ctx, node);
}

void randomUniform(Context &ctx, const char *node, float low, float high,
                   uint32_t stream, TensorRef key, TensorRef y) {
  if (hasError(ctx) || !validateRandomUniform(ctx, node, low, high, key, y))
    return;
  int64_t n = y.numElements();
  if (n == 0)
    return;
  MEMOPT_DISPATCH_FLOAT(
      y.dtype, T,
      randomUniformKernel<T><<<gridFor(ctx, (n + 3) / 4), 256, 0, ctx.stream>>>(
          static_cast<T *>(y.data), static_cast<const int64_t *>(key.data),
          stream, low, high - low, n));
  checkLaunch(ctx, node);
}

void sgdUpdate(Context &ctx, const char *node, float momentum,
               float weightDecay, TensorRef param, TensorRef grad,
               const TensorRef *momentumBuffer, TensorRef lr,
               const GradientAccumulation *accumulation,
               const LossScaling *scaling) {
  if (hasError(ctx) ||
      !validateSgdUpdate(ctx, node, momentum, param, grad, momentumBuffer,
                         lr) ||
      (accumulation &&
       !validateAccumulation(ctx, node, param, *accumulation)) ||
      (scaling && !validateLossScaling(ctx, node, *scaling, false)))
    return;
  int64_t n = param.numElements();
  if (n == 0)
    return;
  float *buffer = momentum != 0.0f && momentumBuffer
                      ? static_cast<float *>(momentumBuffer->data)
                      : nullptr;
  MEMOPT_DISPATCH_FLOAT(
      grad.dtype, T,
      sgdKernel<T><<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
          static_cast<float *>(param.data), static_cast<const T *>(grad.data),
          buffer, static_cast<const float *>(lr.data), momentum, weightDecay, n,
          deviceAccumulation(accumulation), deviceScaling(scaling)));
  checkLaunch(ctx, node);
}

void adamwUpdate(Context &ctx, const char *node, float beta1, float beta2,
                 float eps, float weightDecay, TensorRef param, TensorRef grad,
                 TensorRef m, TensorRef v, TensorRef lr, TensorRef step,
                 const GradientAccumulation *accumulation,
                 const LossScaling *scaling) {
  if (hasError(ctx) ||
      !validateAdamwUpdate(ctx, node, param, grad, m, v, lr, step) ||
      (accumulation &&
       !validateAccumulation(ctx, node, param, *accumulation)) ||
      (scaling && !validateLossScaling(ctx, node, *scaling, true)))
    return;
  int64_t n = param.numElements();
  if (n == 0)
    return;
  MEMOPT_DISPATCH_FLOAT(
      grad.dtype, T,
      adamwKernel<T><<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
          static_cast<float *>(param.data), static_cast<const T *>(grad.data),
          static_cast<float *>(m.data), static_cast<float *>(v.data),
          static_cast<const float *>(lr.data),
          static_cast<const float *>(step.data), beta1, beta2, eps, weightDecay,
          n, deviceAccumulation(accumulation), deviceScaling(scaling)));
  checkLaunch(ctx, node);
}

void accumulateGradient(Context &ctx, const char *node, TensorRef grad,
                        const GradientAccumulation &accumulation) {
  if (hasError(ctx) ||
      !validateGradientAccumulation(ctx, node, grad, accumulation))
    return;
  int64_t n = grad.numElements();
  if (n == 0)
    return;
  MEMOPT_DISPATCH_FLOAT(grad.dtype, T,
                        accumulateKernel<T>
                        <<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
                            static_cast<const T *>(grad.data), n,
                            deviceAccumulation(&accumulation)));
  checkLaunch(ctx, node);
}

void foundInf(Context &ctx, const char *node, const TensorRef *gradients,
              int count, const TensorRef *accumulators, int accumulatorCount,
              const TensorRef *microStep, TensorRef found) {
  if (hasError(ctx) ||
      !validateFoundInf(ctx, node, gradients, count, accumulators,
                        accumulatorCount, microStep, found))
    return;
  auto *flag = static_cast<float *>(found.data);
  foundInfResetKernel<<<1, 1, 0, ctx.stream>>>(flag);
  // Batches of up to kFoundInfTensors tensors, one block per chunk of each.
  auto launch = [&](const TensorRef *tensors, int n, const float *micro) {
    for (int first = 0; first < n; first += kFoundInfTensors) {
      TensorList list{};
      int64_t blocks = 0;
      for (int k = 0; k < std::min(kFoundInfTensors, n - first); ++k) {
        const TensorRef &t = tensors[first + k];
        if (t.numElements() == 0)
          continue;
        int slot = list.tensors++;
        list.data[slot] = t.data;
        list.count[slot] = t.numElements();
        list.dtype[slot] = t.dtype;
        list.firstBlock[slot] = blocks;
        blocks += (list.count[slot] + kFoundInfChunk - 1) / kFoundInfChunk;
      }
      if (blocks == 0)
        continue;
      foundInfKernel<<<unsigned(blocks), kFoundInfThreads, 0, ctx.stream>>>(
          list, micro, flag);
    }
  };
  launch(gradients, count, nullptr);
  if (microStep)
    launch(accumulators, accumulatorCount,
           static_cast<const float *>(microStep->data));
  checkLaunch(ctx, node);
}

void updateLossScale(Context &ctx, const char *node, float growthFactor,
                     float backoffFactor, int64_t growthInterval,
                     TensorRef scale, TensorRef state, TensorRef foundInf,
                     const TensorRef *microStep, int64_t accumulationSteps) {
  if (hasError(ctx) ||
      !validateUpdateLossScale(ctx, node, growthFactor, backoffFactor,
                               growthInterval, scale, state, foundInf,
                               microStep, accumulationSteps))
    return;
  updateLossScaleKernel<<<1, 1, 0, ctx.stream>>>(
      static_cast<float *>(scale.data), static_cast<float *>(state.data),
      static_cast<const float *>(foundInf.data),
      microStep ? static_cast<const float *>(microStep->data) : nullptr,
      float(accumulationSteps - 1), growthFactor, backoffFactor,
      float(growthInterval));
  checkLaunch(ctx, node);
}

} // namespace memopt::rt
