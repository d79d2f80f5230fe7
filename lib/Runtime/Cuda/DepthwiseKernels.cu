//===- DepthwiseKernels.cu - channels-last depthwise convolution ----------===//
//
// memopt's own forward depthwise convolution on channels-last tensors (group
// == C_in == C_out, one filter per channel): x [N, H, W, C], w [C, kh, kw, 1]
// (cuDNN's KRSC with one input channel per group), y [N, OH, OW, C], with the
// convolution op's epilogue (bias, a residual, ReLU / GELU) applied before
// the one store. f32, f16 and bf16 storage, f32 accumulation. 1-D
// convolutions run as H = 1; 3-D ones are left to cuDNN.
//
// Tiling. A thread owns V neighbouring channels (8 x 16-bit or 4 x f32: one
// 16-byte load or store along C, the contiguous dimension; 4 x 16-bit on the
// 7x7 paths) of P = 4 neighbouring output pixels of one output row (2 where
// the registers would not hold 4: every path fits the 128 registers that
// let two 256-thread blocks share an SM without spilling, ptxas -v for
// sm_90). A block is a tile of up to
// 32 channel vectors (one warp's loads cover up to 512 contiguous bytes of a
// pixel) times as many pixel groups as fit in 256 threads; blocks stride over
// the pixel groups, so the filter tile each block stages in shared memory
// (transposed to [tap][channel], f32) is loaded once per block. For each
// filter row the thread keeps the row's taps in registers and streams the
// input strip of that row ((P - 1) x stride + kw pixels) through one vector
// register: each input vector is loaded once and feeds every output pixel
// whose window covers it (the compiler resolves which at compile time on the
// 3x3, 5x5 and 7x7 paths, strides 1 and 2). Other kernel sizes, strides and
// dilations run a generic path (one pixel per thread, runtime loops), as do
// channel counts that are not a multiple of 4 (vectors of 2 or 1). The
// input halo comes straight from L1 / L2: neighbouring pixel groups of a
// block read overlapping strips, which the caches serve.
//
// Taken from: PyTorch's channels-last depthwise design as Inductor and TVM
// schedule it (`depthwise_conv2d_nhwc`: channels vectorized across threads,
// a tile of output pixels per thread with the window's input reused in
// registers, weights staged once per block) and cuDNN's / CUTLASS's
// depthwise `DirectConv` (a filter tile in shared memory, the output tile
// accumulated in registers, the epilogue fused). Where this goes further:
// the tile widths adapt to the channel count (a channel count that is not a
// multiple of the vector width runs narrower vectors rather than a separate
// tail kernel), the residual add of memopt's conv_residual is part of the
// epilogue, and the runtime times this kernel against cuDNN per call site
// and keeps the faster (CudaLibraries.cpp, docs/layout.md).
//
//===----------------------------------------------------------------------===//

#include "CudaDevice.cuh"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

namespace memopt::rt {

namespace {

/// The largest shared-memory filter tile (f32 taps): the default 48 KiB.
constexpr int64_t kFilterTileBytes = 48 * 1024;
/// Threads per block, and at most 32 channel vectors per block.
constexpr int kBlockThreads = 256;
constexpr int kMaxTileVectors = 32;
/// Output pixels per thread on the fast paths (pixelsPerThread).
constexpr int kPixels = 4;

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

bool aligned(const void *p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

/// The vector width: the widest that divides the channel count and every
/// vector operand's alignment, of at most 16 bytes, or 4 elements where
/// `narrow` (the 7x7 fast paths: 8 channels' rows of 7 taps would not fit
/// the registers next to the sums).
int vectorWidth(const ConvGeometry &g, const TensorRef &x,
                const TensorRef *bias, const TensorRef *residual,
                const TensorRef &y, bool narrow) {
  size_t element = dtypeSize(x.dtype);
  for (int width = narrow ? 4 : int(16 / element); width > 1; width /= 2) {
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

/// Output pixels per thread: 4, or 2 where a row's taps (K x V f32
/// registers), 4 pixels' sums and the strip's loads would pass the 128
/// registers that let two 256-thread blocks share an SM (ptxas -v, sm_90:
/// 4-wide 7x7, 8-wide 5x5 and 8-wide stride-2 3x3 spilled at 4 pixels); 1 on
/// the generic path.
template <int V, int K, int S> constexpr int pixelsPerThread() {
  return K == 0 ? 1 : (V * K >= 28 || (V >= 8 && S == 2)) ? 2 : kPixels;
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
        return launchShape<T, V, 5, 1>(ctx, d, x, w, bias, residual, y);
      case 52:
        return launchShape<T, V, 5, 2>(ctx, d, x, w, bias, residual, y);
      default:
        // 7x7 runs 4-wide vectors (vectorWidth).
        if constexpr (V == 4) {
          if (d.strideHeight == 1)
            return launchShape<T, V, 7, 1>(ctx, d, x, w, bias, residual, y);
          return launchShape<T, V, 7, 2>(ctx, d, x, w, bias, residual, y);
        }
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
  int width = vectorWidth(g, x, bias, residual, y, fast && g.kernel[1] == 7);
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
