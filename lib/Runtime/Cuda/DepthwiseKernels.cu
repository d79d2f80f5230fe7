//===- DepthwiseKernels.cu - channels-last depthwise convolution ----------===//
//
// memopt's own forward depthwise convolution on channels-last tensors (group
// == C_in == C_out, one filter per channel): x [N, H, W, C], w [C, kh, kw, 1]
// (cuDNN's KRSC with one input channel per group), y [N, OH, OW, C], with the
// convolution op's epilogue (bias, a residual, ReLU / GELU) applied before
// the one store. f32, f16 and bf16 storage, f32 accumulation. 1-D
// convolutions run as H = 1; 3-D ones are left to cuDNN.
//
// Tiling, 3x3. A thread owns V neighbouring channels (8 x 16-bit or 4 x
// f32: one 16-byte load or store along C, the contiguous dimension) of P = 4
// neighbouring output pixels of one output row (2 for 8-wide stride 2, where
// 4 would spill: ptxas -v for sm_90). A block is a tile of up to 32 channel
// vectors (one warp's loads cover up to 512 contiguous bytes of a pixel)
// times as many pixel groups as fit in 256 threads; blocks stride over the
// pixel groups, so the filter tile each block stages in shared memory
// (transposed to [tap][channel], f32) is loaded once per block. For each
// filter row the thread keeps the row's taps in registers and streams the
// input strip of that row ((P - 1) x stride + kw pixels) through one vector
// register: each input vector is loaded once and feeds every output pixel
// whose window covers it (the compiler resolves which at compile time). The
// input halo comes straight from L1 / L2: neighbouring pixel groups of a
// block read overlapping strips, which the caches serve.
//
// Tiling, 5x5 and 7x7 (strides 1 and 2). Streamed from L1 / L2 as above,
// these ran at 120-140 GB/s on an H200 (7x7): each thread re-read every
// input vector once per filter row with 8-byte loads, at two 256-thread
// blocks an SM, and waited on each. Here a block instead stages a whole
// input tile in shared memory with cp.async (16-byte copies, all in flight
// at once, zero-filled outside the image): the (TH - 1) x S + K rows by
// (TW - 1) x S + K pixels by up to 32 channel vectors that a TH x TW output
// tile needs, so each input pixel leaves L2 once per block rather than K
// times per output row. Its threads then run the register tiling above over
// the tile, R = 2 output rows by P = 4 pixels by 4 channels each: per filter
// row the taps in registers and each row's strip streamed through one
// vector. The host picks the tile per layer (chooseTiledShape: the least
// estimated work over the channel tile and the thread grid, halo, partial
// tiles, SM fill and occupancy counted) and pads the staged pixel so that a
// warp's reads spread over the shared-memory banks (bankWavefronts).
//
// Other kernel sizes, strides and dilations run a generic path (one pixel
// per thread, runtime loops), as do channel counts that are not a multiple
// of 4 (vectors of 2 or 1).
//
// Taken from: PyTorch's channels-last depthwise design as Inductor and TVM
// schedule it (`depthwise_conv2d_nhwc`: channels vectorized across threads,
// a tile of output pixels per thread with the window's input reused in
// registers, weights staged once per block) and cuDNN's / CUTLASS's
// depthwise `DirectConv` (a filter tile in shared memory, the output tile
// accumulated in registers, the epilogue fused). Where this goes further:
// the tile widths adapt to the channel count (a channel count that is not a
// multiple of the vector width runs narrower vectors rather than a separate
// tail kernel), the 5x5 / 7x7 tiles are shaped per layer by a cost model
// rather than fixed (in f16, ConvNeXt's 56 px stage takes tiles of 28 rows
// x 8 pixels, its 7 px stage 8 x 8), the residual add of memopt's conv_residual
// is part of the epilogue, and the runtime times this kernel against cuDNN per
// call site and keeps the faster (CudaLibraries.cpp, docs/layout.md).
//
//===----------------------------------------------------------------------===//

#include "CudaDevice.cuh"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

namespace memopt::rt {

namespace {

/// The largest shared-memory filter tile (f32 taps): the default 48 KiB.
constexpr int64_t kFilterTileBytes = 48 * 1024;
/// Threads per block, and at most 32 channel vectors per block.
constexpr int kBlockThreads = 256;
constexpr int kMaxTileVectors = 32;
/// Output pixels per thread on the fast paths (pixelsPerThread).
constexpr int kPixels = 4;
/// Shared memory an SM holds (sm_90: 228 KiB; each block also takes 1 KiB).
constexpr int64_t kSharedPerSm = 228 * 1024;

/// The problem as the kernel sees it (a 1-D convolution has H = 1).
struct DepthwiseDims {
  int batch, height, width, channels;
  int outHeight, outWidth;
  int kernelHeight, kernelWidth;
  int strideHeight, strideWidth, dilationHeight, dilationWidth;
  int padTop, padLeft;
  /// Channels per block (a multiple of the vector width) and its vectors.
  int tileChannels, tileVectors;
  /// Pixel groups per block, per output row, and in all.
  int groupsPerBlock, widthGroups;
  int64_t groups;
  Activation activation;
};

template <typename T, int V> struct alignas(sizeof(T) * V) Vector {
  T value[V];
};

template <typename T, int V>
__device__ __forceinline__ void loadVector(const T *p, float (&out)[V]) {
  Vector<T, V> v = *reinterpret_cast<const Vector<T, V> *>(p);
#pragma unroll
  for (int k = 0; k < V; ++k)
    out[k] = toFloat(v.value[k]);
}

/// V taps of one filter position from the shared tile (16-byte aligned when
/// V is a multiple of 4: tile rows and channel offsets are multiples of V).
template <int V>
__device__ __forceinline__ void loadTaps(const float *p, float (&out)[V]) {
  if constexpr (V % 4 == 0) {
#pragma unroll
    for (int k = 0; k < V; k += 4) {
      float4 q = *reinterpret_cast<const float4 *>(p + k);
      out[k] = q.x;
      out[k + 1] = q.y;
      out[k + 2] = q.z;
      out[k + 3] = q.w;
    }
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k)
      out[k] = p[k];
  }
}

/// K, S: the square kernel size and stride of a fast path (dilation 1), 0
/// for the generic path (runtime sizes, strides and dilations, P = 1).
template <typename T, int V, int K, int S, int P>
__global__ void __launch_bounds__(kBlockThreads, 2)
    depthwiseChannelsLastKernel(const T *__restrict__ x,
                                const T *__restrict__ w,
                                const T *__restrict__ bias, const T *residual,
                                T *y, DepthwiseDims d) {
  extern __shared__ float taps[]; // [kh * kw][tileChannels]
  const int kh = K ? K : d.kernelHeight, kw = K ? K : d.kernelWidth;
  const int kernelArea = kh * kw;
  const int c0 = int(blockIdx.y) * d.tileChannels;
  const int tileChannels = min(d.tileChannels, d.channels - c0);
  // The filter rows of the tile's channels are contiguous: read them in
  // order, store them transposed.
  for (int i = threadIdx.x; i < tileChannels * kernelArea; i += blockDim.x) {
    int c = i / kernelArea, tap = i - c * kernelArea;
    taps[tap * d.tileChannels + c] = toFloat(w[int64_t(c0) * kernelArea + i]);
  }
  __syncthreads();
  const int lane = threadIdx.x % d.tileVectors;
  const int slot = threadIdx.x / d.tileVectors;
  const int channelInTile = lane * V;
  if (slot >= d.groupsPerBlock || channelInTile >= tileChannels)
    return;
  const int c = c0 + channelInTile;
  const int64_t rowPitch = int64_t(d.width) * d.channels;
  float biasValues[V];
#pragma unroll
  for (int k = 0; k < V; ++k)
    biasValues[k] = 0.0f;
  if (bias)
    loadVector<T, V>(bias + c, biasValues);

  for (int64_t group = int64_t(blockIdx.x) * d.groupsPerBlock + slot;
       group < d.groups; group += int64_t(gridDim.x) * d.groupsPerBlock) {
    const int widthGroup = int(group % d.widthGroups);
    const int64_t rest = group / d.widthGroups;
    const int oh = int(rest % d.outHeight);
    const int64_t n = rest / d.outHeight;
    const int ow0 = widthGroup * P;
    float acc[P][V];
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int k = 0; k < V; ++k)
        acc[p][k] = 0.0f;
    const T *image = x + n * d.height * rowPitch + c;
    if constexpr (K != 0) {
      const int ih0 = oh * S - d.padTop, iw0 = ow0 * S - d.padLeft;
#pragma unroll
      for (int i = 0; i < K; ++i) {
        const int ih = ih0 + i;
        if (ih < 0 || ih >= d.height)
          continue;
        float rowTaps[K][V];
#pragma unroll
        for (int j = 0; j < K; ++j)
          loadTaps<V>(taps + (i * K + j) * d.tileChannels + channelInTile,
                      rowTaps[j]);
        const T *row = image + int64_t(ih) * rowPitch;
        constexpr int kStrip = (P - 1) * S + K;
#pragma unroll
        for (int col = 0; col < kStrip; ++col) {
          const int iw = iw0 + col;
          float in[V];
          if (iw >= 0 && iw < d.width) {
            loadVector<T, V>(row + int64_t(iw) * d.channels, in);
          } else {
#pragma unroll
            for (int k = 0; k < V; ++k)
              in[k] = 0.0f;
          }
#pragma unroll
          for (int p = 0; p < P; ++p) {
            const int j = col - p * S;
            if (j >= 0 && j < K) {
#pragma unroll
              for (int k = 0; k < V; ++k)
                acc[p][k] = fmaf(in[k], rowTaps[j][k], acc[p][k]);
            }
          }
        }
      }
    } else {
      const int ih0 = oh * d.strideHeight - d.padTop;
#pragma unroll
      for (int p = 0; p < P; ++p) {
        const int iw0 = (ow0 + p) * d.strideWidth - d.padLeft;
        for (int i = 0; i < kh; ++i) {
          const int ih = ih0 + i * d.dilationHeight;
          if (ih < 0 || ih >= d.height)
            continue;
          const T *row = image + int64_t(ih) * rowPitch;
          for (int j = 0; j < kw; ++j) {
            const int iw = iw0 + j * d.dilationWidth;
            if (iw < 0 || iw >= d.width)
              continue;
            float in[V], tap[V];
            loadVector<T, V>(row + int64_t(iw) * d.channels, in);
            loadTaps<V>(taps + (i * kw + j) * d.tileChannels + channelInTile,
                        tap);
#pragma unroll
            for (int k = 0; k < V; ++k)
              acc[p][k] = fmaf(in[k], tap[k], acc[p][k]);
          }
        }
      }
    }
    // Epilogue: bias, residual, activation, one vector store per pixel.
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int ow = ow0 + p;
      if (ow >= d.outWidth)
        break;
      const int64_t at =
          ((n * d.outHeight + oh) * d.outWidth + ow) * d.channels + c;
      float add[V];
      if (residual) {
        loadVector<T, V>(residual + at, add);
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k)
          add[k] = 0.0f;
      }
      Vector<T, V> out;
#pragma unroll
      for (int k = 0; k < V; ++k)
        out.value[k] = fromFloat<T>(applyActivationDevice(
            d.activation, acc[p][k] + biasValues[k] + add[k]));
      *reinterpret_cast<Vector<T, V> *>(y + at) = out;
    }
  }
}

/// The shared-memory tiling of the 5x5 and 7x7 paths (launchTiled): a block
/// computes a tile of tileRows x tileCols output pixels of one image for
/// tileVectors x 4 channels; its threads split the tile into groups of R
/// rows x P pixels x 4 channels.
struct TiledShape {
  int tileVectors, widthGroups, rowGroups;
  int tileRows, tileCols, inRows, inCols;
  int tilesHigh, tilesWide;
  /// Elements from one staged pixel to the next (the channels plus a pad
  /// that spreads a warp's reads over the banks), and the bytes of one
  /// global-to-shared copy (16, or the vector's 8 where 16 would straddle).
  int pixelStride, copyBytes;
};

/// One global-to-shared copy of B bytes, zero-filled where !valid (the
/// halo outside the image): cp.async from sm_80 on, so that a thread's
/// copies are all in flight at once without holding registers.
template <int B>
__device__ __forceinline__ void copyToShared(void *dst, const void *src,
                                             bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned d = unsigned(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(d),
               "l"(src), "n"(B), "r"(valid ? B : 0));
#else
  using Word = std::conditional_t<B == 16, uint4, uint2>;
  Word v = {};
  if (valid)
    v = *reinterpret_cast<const Word *>(src);
  *reinterpret_cast<Word *>(dst) = v;
#endif
}

__device__ __forceinline__ void waitCopies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::);
#endif
}

/// Stages the block's input tile (inRows x inCols pixels x the channel
/// tile, zero outside the image and past the last channel) in shared memory.
/// Each thread keeps one chunk of the channels and walks the pixels with a
/// fixed step, so the loop carries no divisions.
template <typename T, int B>
__device__ __forceinline__ void
stageTile(const T *__restrict__ x, T *tile, const DepthwiseDims &d,
          const TiledShape &t, int64_t n, int ih0, int iw0, int c0) {
  constexpr int kChunk = B / int(sizeof(T));
  const int chunks = d.tileChannels / kChunk; // <= blockDim.x (host)
  const int step = int(blockDim.x) / chunks;
  int pixel = int(threadIdx.x) / chunks;
  if (pixel >= step)
    return;
  const int chunk = int(threadIdx.x) % chunks;
  const int stepRows = step / t.inCols, stepCols = step % t.inCols;
  int row = pixel / t.inCols, col = pixel % t.inCols;
  const int c = c0 + chunk * kChunk;
  const bool channelValid = c < d.channels;
  const T *image = x + n * d.height * d.width * d.channels + c;
  T *dst = tile + chunk * kChunk;
  const int pixels = t.inRows * t.inCols;
#pragma unroll 4
  for (; pixel < pixels; pixel += step) {
    const int ih = ih0 + row, iw = iw0 + col;
    const bool valid = channelValid && unsigned(ih) < unsigned(d.height) &&
                       unsigned(iw) < unsigned(d.width);
    const T *src = valid ? image + (ih * d.width + iw) * d.channels : x;
    copyToShared<B>(dst + pixel * t.pixelStride, src, valid);
    col += stepCols;
    row += stepRows;
    if (col >= t.inCols) {
      col -= t.inCols;
      ++row;
    }
  }
}

/// The 5x5 and 7x7 paths (K, S: square kernel and stride, dilation 1; 4
/// channels a thread, P output pixels along W times R output rows). The
/// block stages its input tile once (every input pixel read from L2 / HBM
/// once per block, with 16-byte copies that are all in flight together),
/// then each thread runs the register tiling of the kernel above over it:
/// per filter row, the row's taps in registers and the (P - 1) x S + K input
/// strip of each of its R rows streamed through one vector.
template <typename T, int K, int S, int P, int R>
__global__ void __launch_bounds__(kBlockThreads, 2)
    depthwiseTiledKernel(const T *__restrict__ x, const T *__restrict__ w,
                         const T *__restrict__ bias, const T *residual, T *y,
                         DepthwiseDims d, TiledShape t) {
  constexpr int V = 4;
  constexpr int kArea = K * K;
  extern __shared__ __align__(16) unsigned char shared[];
  float *taps = reinterpret_cast<float *>(shared); // [K * K][tileChannels]
  T *tile = reinterpret_cast<T *>(shared + sizeof(float) * kArea *
                                               size_t(d.tileChannels));
  const int c0 = int(blockIdx.y) * d.tileChannels;
  const int tileChannels = min(d.tileChannels, d.channels - c0);
  int64_t block = blockIdx.x;
  const int tileCol = int(block % t.tilesWide);
  block /= t.tilesWide;
  const int tileRow = int(block % t.tilesHigh);
  const int64_t n = block / t.tilesHigh;
  const int oh0 = tileRow * t.tileRows, ow0 = tileCol * t.tileCols;
  if (t.copyBytes == 16)
    stageTile<T, 16>(x, tile, d, t, n, oh0 * S - d.padTop, ow0 * S - d.padLeft,
                     c0);
  else
    stageTile<T, 8>(x, tile, d, t, n, oh0 * S - d.padTop, ow0 * S - d.padLeft,
                    c0);
  for (int i = threadIdx.x; i < tileChannels * kArea; i += blockDim.x) {
    int c = i / kArea, tap = i - c * kArea;
    taps[tap * d.tileChannels + c] = toFloat(w[int64_t(c0) * kArea + i]);
  }
  waitCopies();
  __syncthreads();

  const int lane = threadIdx.x % t.tileVectors;
  const int rest = threadIdx.x / t.tileVectors;
  const int widthGroup = rest % t.widthGroups, rowGroup = rest / t.widthGroups;
  const int channelInTile = lane * V;
  if (rowGroup >= t.rowGroups || channelInTile >= tileChannels)
    return;
  float acc[R][P][V];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int k = 0; k < V; ++k)
        acc[r][p][k] = 0.0f;
  const T *origin = tile +
                    int64_t(rowGroup * R * S * t.inCols + widthGroup * P * S) *
                        t.pixelStride +
                    channelInTile;
  const int rowPitch = t.inCols * t.pixelStride;
#pragma unroll 1
  for (int i = 0; i < K; ++i) {
    float rowTaps[K][V];
#pragma unroll
    for (int j = 0; j < K; ++j)
      loadTaps<V>(taps + (i * K + j) * d.tileChannels + channelInTile,
                  rowTaps[j]);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const T *row = origin + (r * S + i) * rowPitch;
      constexpr int kStrip = (P - 1) * S + K;
#pragma unroll
      for (int col = 0; col < kStrip; ++col) {
        float in[V];
        loadVector<T, V>(row + col * t.pixelStride, in);
#pragma unroll
        for (int p = 0; p < P; ++p) {
          const int j = col - p * S;
          if (j >= 0 && j < K) {
#pragma unroll
            for (int k = 0; k < V; ++k)
              acc[r][p][k] = fmaf(in[k], rowTaps[j][k], acc[r][p][k]);
          }
        }
      }
    }
  }
  const int c = c0 + channelInTile;
  float biasValues[V];
#pragma unroll
  for (int k = 0; k < V; ++k)
    biasValues[k] = 0.0f;
  if (bias)
    loadVector<T, V>(bias + c, biasValues);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int oh = oh0 + rowGroup * R + r;
    if (oh >= d.outHeight)
      break;
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int ow = ow0 + widthGroup * P + p;
      if (ow >= d.outWidth)
        break;
      const int64_t at =
          ((n * d.outHeight + oh) * d.outWidth + ow) * d.channels + c;
      float add[V];
      if (residual) {
        loadVector<T, V>(residual + at, add);
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k)
          add[k] = 0.0f;
      }
      Vector<T, V> out;
#pragma unroll
      for (int k = 0; k < V; ++k)
        out.value[k] = fromFloat<T>(applyActivationDevice(
            d.activation, acc[r][p][k] + biasValues[k] + add[k]));
      *reinterpret_cast<Vector<T, V> *>(y + at) = out;
    }
  }
}

bool aligned(const void *p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

/// The vector width: the widest that divides the channel count and every
/// vector operand's alignment, of at most 16 bytes (the 5x5 / 7x7 tiled
/// kernel runs 4-wide vectors whenever this is at least 4).
int vectorWidth(const ConvGeometry &g, const TensorRef &x,
                const TensorRef *bias, const TensorRef *residual,
                const TensorRef &y) {
  size_t element = dtypeSize(x.dtype);
  for (int width = int(16 / element); width > 1; width /= 2) {
    size_t bytes = element * size_t(width);
    if (g.inChannels % width == 0 && aligned(x.data, bytes) &&
        aligned(y.data, bytes) && (!bias || aligned(bias->data, bytes)) &&
        (!residual || aligned(residual->data, bytes)))
      return width;
  }
  return 1;
}

/// Channels per block for filters of `kernelArea` taps and vectors of
/// `width`: the channel vectors split evenly over the fewest tiles of at
/// most 32 vectors whose f32 taps fit the shared tile; 0 when not even one
/// vector's do.
int tileChannelsFor(int64_t channels, int64_t kernelArea, int width) {
  int64_t fit = kFilterTileBytes / (kernelArea * int64_t(sizeof(float)));
  int64_t maxVectors = std::min<int64_t>(kMaxTileVectors, fit / width);
  if (maxVectors < 1)
    return 0;
  int64_t vectors = (channels + width - 1) / width;
  int64_t tiles = (vectors + maxVectors - 1) / maxVectors;
  return int((vectors + tiles - 1) / tiles) * width;
}

/// Output pixels per thread of the 3x3 paths: 4, or 2 where 4 pixels' sums,
/// the row's taps and the strip's loads would pass the 128 registers that
/// let two 256-thread blocks share an SM (ptxas -v, sm_90: 8-wide stride 2
/// spilled at 4 pixels); 1 on the generic path.
template <int V, int K, int S> constexpr int pixelsPerThread() {
  return K == 0 ? 1 : (V >= 8 && S == 2) ? 2 : kPixels;
}

/// Launches the kernel of one shape: P pixels per thread, the pixel groups
/// over a grid of enough blocks for every SM several times over, each
/// staging its filter tile once and striding over pixel groups.
template <typename T, int V, int K, int S>
void launchShape(Context &ctx, const DepthwiseDims &d, const TensorRef &x,
                 const TensorRef &w, const TensorRef *bias,
                 const TensorRef *residual, const TensorRef &y) {
  constexpr int P = pixelsPerThread<V, K, S>();
  DepthwiseDims dims = d;
  dims.widthGroups = (d.outWidth + P - 1) / P;
  dims.groups = int64_t(d.batch) * d.outHeight * dims.widthGroups;
  dim3 block(unsigned(dims.tileVectors * dims.groupsPerBlock));
  int64_t blocks =
      (dims.groups + dims.groupsPerBlock - 1) / dims.groupsPerBlock;
  int64_t tiles = (d.channels + d.tileChannels - 1) / d.tileChannels;
  int64_t cap = std::max<int64_t>(1, int64_t(ctx.smCount) * 16 / tiles);
  dim3 grid(unsigned(std::min(blocks, cap)), unsigned(tiles));
  size_t shared =
      size_t(d.kernelHeight) * d.kernelWidth * d.tileChannels * sizeof(float);
  depthwiseChannelsLastKernel<T, V, K, S, P>
      <<<grid, block, shared, ctx.stream>>>(
          static_cast<const T *>(x.data), static_cast<const T *>(w.data),
          bias ? static_cast<const T *>(bias->data) : nullptr,
          residual ? static_cast<const T *>(residual->data) : nullptr,
          static_cast<T *>(y.data), dims);
}

/// Shared-memory bank wavefronts of the first strip read of every warp of
/// a block shaped `t` (vectors of `vectorBytes`, pixels `strideBytes`
/// apart): the hardware serves 128 bytes a wavefront, one per phase of
/// 128 / vectorBytes lanes when their words fall in distinct banks.
int64_t bankWavefronts(const TiledShape &t, int threads, int vectorBytes,
                       int strideBytes, int rowStep, int colStep) {
  const int phaseLanes = 128 / vectorBytes;
  int64_t wavefronts = 0;
  for (int phase = 0; phase < threads; phase += phaseLanes) {
    int counts[32] = {}, worst = 1;
    int64_t seen[32][32]; // per bank: the distinct words read
    for (int l = phase; l < std::min(threads, phase + phaseLanes); ++l) {
      int lane = l % t.tileVectors, rest = l / t.tileVectors;
      int widthGroup = rest % t.widthGroups, rowGroup = rest / t.widthGroups;
      int64_t byte = (int64_t(rowGroup) * rowStep * t.inCols +
                      int64_t(widthGroup) * colStep) *
                         strideBytes +
                     int64_t(lane) * vectorBytes;
      for (int wd = 0; wd < vectorBytes / 4; ++wd) {
        int64_t word = byte / 4 + wd;
        int bank = int(word % 32);
        bool known = false;
        for (int k = 0; k < counts[bank]; ++k)
          known |= seen[bank][k] == word;
        if (!known && counts[bank] < 32) {
          seen[bank][counts[bank]++] = word;
          worst = std::max(worst, counts[bank]);
        }
      }
    }
    wavefronts += worst;
  }
  return wavefronts;
}

/// The tile of a 5x5 / 7x7 launch: over channel tiles of 8, 16 or 32
/// vectors (split evenly) and thread groups of up to 16 x 16, the shape of
/// the least estimated work: the padded output tile's taps plus its staged
/// input (a copied element weighs 8 taps: the halo is what larger tiles
/// save), scaled up where the grid would not fill every SM four times and
/// for threads past the last full warp. Shared memory stays within the
/// default 48 KiB, so no launch needs an opt-in.
TiledShape chooseTiledShape(DepthwiseDims &d, int K, int S, int P, int R,
                            int elementBytes, int smCount) {
  const int V = 4, vectorBytes = V * elementBytes;
  const int64_t vectors = d.channels / V;
  const int64_t maxWidthGroups = std::min(16, (d.outWidth + P - 1) / P);
  const int64_t maxRowGroups = std::min(16, (d.outHeight + R - 1) / R);
  const int64_t maxPad = 16; // bytes, at most, per staged pixel
  double best = -1;
  TiledShape shape{};
  int bestTileChannels = 0;
  for (int maxVectors : {32, 16, 8}) {
    int64_t channelTiles = (vectors + maxVectors - 1) / maxVectors;
    int tileVectors = int((vectors + channelTiles - 1) / channelTiles);
    int tileChannels = tileVectors * V;
    for (int widthGroups = 1; widthGroups <= maxWidthGroups; ++widthGroups)
      for (int rowGroups = 1; rowGroups <= maxRowGroups; ++rowGroups) {
        int threads = tileVectors * widthGroups * rowGroups;
        if (threads > kBlockThreads)
          break;
        int tileRows = rowGroups * R, tileCols = widthGroups * P;
        int inRows = (tileRows - 1) * S + K, inCols = (tileCols - 1) * S + K;
        int64_t smem =
            int64_t(K) * K * tileChannels * 4 +
            int64_t(inRows) * inCols * (tileChannels * elementBytes + maxPad);
        if (smem > kFilterTileBytes)
          continue;
        int64_t blocks =
            int64_t(d.batch) * ((d.outHeight + tileRows - 1) / tileRows) *
            ((d.outWidth + tileCols - 1) / tileCols) * channelTiles;
        double perBlock = double(tileRows) * tileCols * tileChannels * K * K +
                          8.0 * inRows * inCols * tileChannels;
        double work = perBlock * double(blocks);
        if (blocks < 4 * int64_t(smCount))
          work *= double(4 * int64_t(smCount)) / double(blocks);
        // Threads past the last full warp, and SMs holding fewer than 32
        // warps of such blocks (by shared memory, threads, or registers at
        // about 96 a thread: ptxas -v gives 82-114 on sm_90) wait on the
        // staging copies with too little else to run.
        int64_t warps = (threads + 31) / 32;
        work *= double(warps * 32) / threads;
        int64_t blocksPerSm =
            std::min<int64_t>({32, 64 / warps, 65536 / (warps * 32 * 96),
                               kSharedPerSm / (smem + 1024)});
        if (blocksPerSm * warps < 32)
          work *= 32.0 / double(std::max<int64_t>(1, blocksPerSm * warps));
        if (best < 0 || work < best) {
          best = work;
          bestTileChannels = tileChannels;
          shape.tileVectors = tileVectors;
          shape.widthGroups = widthGroups;
          shape.rowGroups = rowGroups;
          shape.tileRows = tileRows;
          shape.tileCols = tileCols;
          shape.inRows = inRows;
          shape.inCols = inCols;
        }
      }
  }
  d.tileChannels = bestTileChannels;
  d.tileVectors = shape.tileVectors;
  shape.tilesHigh = (d.outHeight + shape.tileRows - 1) / shape.tileRows;
  shape.tilesWide = (d.outWidth + shape.tileCols - 1) / shape.tileCols;
  // The pad of fewest bank wavefronts, then the widest copies it allows.
  int threads = shape.tileVectors * shape.widthGroups * shape.rowGroups;
  int rowBytes = bestTileChannels * elementBytes, bestPad = 0;
  int64_t fewest = -1;
  // 16-byte copies where the channels allow them: the pads keep them.
  bool wide =
      rowBytes % 16 == 0 && (int64_t(d.channels) * elementBytes) % 16 == 0;
  for (int pad = 0; pad <= maxPad; pad += wide ? 16 : vectorBytes) {
    int64_t wavefronts = bankWavefronts(shape, threads, vectorBytes,
                                        rowBytes + pad, R * S, P * S);
    if (fewest < 0 || wavefronts < fewest) {
      fewest = wavefronts;
      bestPad = pad;
    }
  }
  shape.pixelStride = (rowBytes + bestPad) / elementBytes;
  shape.copyBytes = wide ? 16 : 8;
  return shape;
}

/// Launches the shared-memory tiled 5x5 / 7x7 kernel: one block per output
/// tile and channel tile.
template <typename T, int K, int S>
void launchTiled(Context &ctx, const DepthwiseDims &d, const TensorRef &x,
                 const TensorRef &w, const TensorRef *bias,
                 const TensorRef *residual, const TensorRef &y) {
  constexpr int P = 4, R = 2;
  DepthwiseDims dims = d;
  TiledShape t =
      chooseTiledShape(dims, K, S, P, R, int(sizeof(T)), ctx.smCount);
  if (t.copyBytes == 16 && !aligned(x.data, 16))
    t.copyBytes = 8;
  int64_t tiles = (d.channels + dims.tileChannels - 1) / dims.tileChannels;
  dim3 grid(unsigned(int64_t(d.batch) * t.tilesHigh * t.tilesWide),
            unsigned(tiles));
  dim3 block(unsigned(t.tileVectors * t.widthGroups * t.rowGroups));
  size_t shared = size_t(K) * K * dims.tileChannels * sizeof(float) +
                  size_t(t.inRows) * t.inCols * t.pixelStride * sizeof(T);
  depthwiseTiledKernel<T, K, S, P, R><<<grid, block, shared, ctx.stream>>>(
      static_cast<const T *>(x.data), static_cast<const T *>(w.data),
      bias ? static_cast<const T *>(bias->data) : nullptr,
      residual ? static_cast<const T *>(residual->data) : nullptr,
      static_cast<T *>(y.data), dims, t);
}

/// The fast path of d's square kernel and stride, else the generic one.
/// Vectors of fewer than 4 channels (channel counts that are not a multiple
/// of 4, rare in real networks) always take the generic path, which halves
/// the kernel's instantiations (build time).
template <typename T, int V>
void launchWidth(Context &ctx, const DepthwiseDims &d, bool fast,
                 const TensorRef &x, const TensorRef &w, const TensorRef *bias,
                 const TensorRef *residual, const TensorRef &y) {
  if constexpr (V >= 4) {
    if (fast) {
      switch (d.kernelHeight * 10 + d.strideHeight) {
      case 31:
        return launchShape<T, V, 3, 1>(ctx, d, x, w, bias, residual, y);
      case 32:
        return launchShape<T, V, 3, 2>(ctx, d, x, w, bias, residual, y);
      case 51:
        return launchTiled<T, 5, 1>(ctx, d, x, w, bias, residual, y);
      case 52:
        return launchTiled<T, 5, 2>(ctx, d, x, w, bias, residual, y);
      case 71:
        return launchTiled<T, 7, 1>(ctx, d, x, w, bias, residual, y);
      case 72:
        return launchTiled<T, 7, 2>(ctx, d, x, w, bias, residual, y);
      }
    }
  }
  launchShape<T, V, 0, 0>(ctx, d, x, w, bias, residual, y);
}

} // namespace

std::string depthwiseConvRefusal(const ConvGeometry &g, const TensorRef &x) {
  if (!g.channelsLast)
    return "channels-first tensors";
  if (!(g.group == g.inChannels && g.group == g.outChannels))
    return "not depthwise (group " + std::to_string(g.group) + ", " +
           std::to_string(g.inChannels) + " -> " +
           std::to_string(g.outChannels) + " channels)";
  if (g.in[0] != 1 || g.kernel[0] != 1)
    return "a 3-D convolution";
  if (!isFloatType(x.dtype))
    return std::string(dtypeName(x.dtype));
  constexpr int64_t kMax = std::numeric_limits<int>::max() / 2;
  if (g.batch > kMax || g.in[1] * g.in[2] * g.inChannels > kMax ||
      g.out[1] * g.out[2] * g.outChannels > kMax)
    return "a tensor too large for 32-bit pixel indices";
  if (tileChannelsFor(g.inChannels, g.kernel[1] * g.kernel[2], 1) == 0)
    return "a " + std::to_string(g.kernel[1]) + "x" +
           std::to_string(g.kernel[2]) +
           " filter too large for the shared-memory tile";
  return "";
}

bool launchDepthwiseConv(Context &ctx, const char *node, const ConvGeometry &g,
                         const TensorRef &x, const TensorRef &w,
                         const TensorRef *bias, const TensorRef *residual,
                         Activation activation, const TensorRef &y) {
  bool square = g.kernel[1] == g.kernel[2] && g.strides[1] == g.strides[2] &&
                g.dilations[1] == 1 && g.dilations[2] == 1;
  bool fast = square &&
              (g.kernel[1] == 3 || g.kernel[1] == 5 || g.kernel[1] == 7) &&
              (g.strides[1] == 1 || g.strides[1] == 2);
  int width = vectorWidth(g, x, bias, residual, y);
  int64_t kernelArea = g.kernel[1] * g.kernel[2];
  int tile = tileChannelsFor(g.inChannels, kernelArea, width);
  while (tile == 0 && width > 1) // very large filters: narrower tiles
    tile = tileChannelsFor(g.inChannels, kernelArea, width /= 2);
  if (tile == 0) {
    failf(ctx, node, "depthwise convolution: %s",
          depthwiseConvRefusal(g, x).c_str());
    return false;
  }
  DepthwiseDims d;
  d.batch = int(g.batch);
  d.height = int(g.in[1]);
  d.width = int(g.in[2]);
  d.channels = int(g.inChannels);
  d.outHeight = int(g.out[1]);
  d.outWidth = int(g.out[2]);
  d.kernelHeight = int(g.kernel[1]);
  d.kernelWidth = int(g.kernel[2]);
  d.strideHeight = int(g.strides[1]);
  d.strideWidth = int(g.strides[2]);
  d.dilationHeight = int(g.dilations[1]);
  d.dilationWidth = int(g.dilations[2]);
  d.padTop = int(g.padsBegin[1]);
  d.padLeft = int(g.padsBegin[2]);
  d.tileChannels = tile;
  d.tileVectors = tile / width;
  d.groupsPerBlock = std::max(1, kBlockThreads / d.tileVectors);
  d.widthGroups = 0;
  d.groups = 0;
  d.activation = activation;
  MEMOPT_DISPATCH_FLOAT(x.dtype, T, {
    if constexpr (sizeof(T) == 2) {
      switch (width) {
      case 8:
        launchWidth<T, 8>(ctx, d, fast, x, w, bias, residual, y);
        break;
      case 4:
        launchWidth<T, 4>(ctx, d, fast, x, w, bias, residual, y);
        break;
      case 2:
        launchWidth<T, 2>(ctx, d, fast, x, w, bias, residual, y);
        break;
      default:
        launchWidth<T, 1>(ctx, d, fast, x, w, bias, residual, y);
      }
    } else {
      switch (width) {
      case 4:
        launchWidth<T, 4>(ctx, d, fast, x, w, bias, residual, y);
        break;
      case 2:
        launchWidth<T, 2>(ctx, d, fast, x, w, bias, residual, y);
        break;
      default:
        launchWidth<T, 1>(ctx, d, fast, x, w, bias, residual, y);
      }
    }
  });
  return checkLaunch(ctx, node);
}

} // namespace memopt::rt
