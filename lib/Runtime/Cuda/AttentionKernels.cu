//===- AttentionKernels.cu - fused scaled dot-product attention -----------===//
//
// Flash-attention style: a block owns a tile of query rows, walks the keys in
// tiles staged in shared memory, and keeps a running row maximum and sum
// (the online softmax), so the [S, Sk] scores never reach global memory and
// every K / V element is read once per query tile.
//
//  * f16 / bf16 on sm_80+: tensor cores through WMMA (16x16x16, f32
//    accumulation). 4 warps x 16 query rows, 64 keys per tile. Each warp
//    computes its 16 x 64 scores into shared memory, two lanes per row apply
//    scale, bias and masks and update the row statistics, the probabilities
//    go back to shared memory as f16 / bf16, and P V accumulates into a
//    16 x Dv f32 tile in shared memory (rescaled per row when the maximum
//    moves; WMMA accumulator layouts are opaque, so the rescale happens in
//    shared memory). Tiles are loaded with 16-byte vectors when the head
//    sizes and pointers allow.
//  * f32 (and f16 / bf16 before sm_80): CUDA cores. 4 warps x 8 query rows,
//    32 keys per tile; lane j owns key j of the tile for the scores (K is
//    stored transposed in shared memory with a padded row, so both K layouts
//    load coalesced and read without bank conflicts) and head dimensions
//    lane + 32 t of the output, with 8 rows per warp reusing every shared
//    memory read.
//
// Training dropout (AttentionParams::dropoutRatio): memopt's Philox mask
// (AttentionDropout.cuh), drawn per tile in registers where the
// probabilities are formed. The row sums and statistics take every
// probability; only the kept ones go into P V, and 1 / (1 - ratio) is applied
// with 1 / sum at the end (the chunked path's softmax kernel writes the kept
// probabilities times the scale instead).
//
// Scores are kept in the log2 domain (exp2f). Rows whose keys are all masked
// so far are guarded (no -inf - -inf); a row that stays fully masked ends as
// 0 / 0 = NaN, like the unfused softmax.
//
// Taken from: FlashAttention-2 (Dao, 2023: online softmax, query-tile
// outer loop, one pass over K/V, 1 / l applied once at the end), the
// memory-efficient attention of xFormers / PyTorch SDPA (the same algorithm
// on CUDA cores for f32), onnxruntime's MultiHeadAttention CUDA kernels (the
// causal tile skip and the additive bias broadcast). Different: plain WMMA
// with shared-memory staging rather than hand-laid mma.sync fragments, and
// arbitrary numpy batch broadcasting of Q, K, V and bias through strides.
//
//===----------------------------------------------------------------------===//

#include "AttentionDropout.cuh"
#include "CudaDevice.cuh"

#include <mma.h>

namespace memopt::rt {

namespace {

constexpr int kMaxHeadSize = kAttentionKernelsMaxHeadSize;

/// Everything a kernel needs, by value.
struct AttentionArgs {
  const void *q, *k, *v, *bias;
  void *y;
  int64_t queries, keys;
  int headSize, valueSize;
  int batchRank;
  int64_t batchShape[kMaxRank];
  int64_t qStride[kMaxRank], kStride[kMaxRank], vStride[kMaxRank],
      biasStride[kMaxRank];
  int64_t biasRowStride, biasColStride;
  float scale;
  bool causal, keyTransposed, hasBias, vectorLoads;
  /// A fully masked row (sum of exponentials 0) gives zeros, not 0 / 0.
  bool safeSoftmax;
  int64_t rowTiles;
  /// Row statistics [batch, queries, 2] (maximum, log-sum), or null.
  float *lse;
  /// Dropout of the probabilities fed to P V (AttentionDropout.cuh).
  AttentionDropoutArgs dropout;
};

struct BatchOffsets {
  int64_t q = 0, k = 0, v = 0, bias = 0;
};

__device__ __forceinline__ BatchOffsets batchOffsets(const AttentionArgs &a,
                                                     int64_t b) {
  BatchOffsets o;
  for (int i = a.batchRank - 1; i >= 0; --i) {
    int64_t coord = b % a.batchShape[i];
    b /= a.batchShape[i];
    o.q += coord * a.qStride[i];
    o.k += coord * a.kStride[i];
    o.v += coord * a.vStride[i];
    o.bias += coord * a.biasStride[i];
  }
  return o;
}

/// Stores a row's statistics from the log2-domain maximum and the sum of
/// exp2(score - maximum) (natural units; a fully masked row gets -inf twice).
__device__ __forceinline__ void storeRowStatistics(float *lse, float rowMax,
                                                   float rowSum) {
  constexpr float kLn2 = 0.6931471805599453f;
  bool masked = rowMax == -INFINITY;
  lse[0] = masked ? -INFINITY : rowMax * kLn2;
  lse[1] = masked ? -INFINITY : logf(rowSum);
}

/// The score of (row, key) in the log2 domain: scale, bias, masks.
template <typename T>
__device__ __forceinline__ float finishScore(const AttentionArgs &a,
                                             const T *bias, float dot,
                                             int64_t row, int64_t key) {
  if (key >= a.keys || (a.causal && key > row))
    return -INFINITY;
  float x = dot * a.scale;
  if (a.hasBias && row < a.queries)
    x += toFloat(bias[row * a.biasRowStride + key * a.biasColStride]);
  return toLog2Domain(x);
}

//===----------------------------------------------------------------------===//
// CUDA-core kernel (any float type)
//===----------------------------------------------------------------------===//

constexpr int kSimtWarps = 4;
constexpr int kSimtRowsPerWarp = 8;
constexpr int kSimtRows = kSimtWarps * kSimtRowsPerWarp;
constexpr int kSimtKeys = 32;
constexpr int kSimtKeyPitch = kSimtKeys + 1;

/// Shared memory of the CUDA-core kernel, in floats.
size_t simtSharedFloats(int headSize, int valueSize) {
  size_t padded = size_t(headSize + 3) / 4 * 4;
  return kSimtRows * padded + padded * kSimtKeyPitch +
         size_t(kSimtKeys) * valueSize +
         size_t(kSimtWarps) * kSimtKeys * kSimtRowsPerWarp;
}

template <typename T, bool Dropout>
__global__ void __launch_bounds__(kSimtWarps * 32)
    attentionSimtKernel(AttentionArgs a) {
  extern __shared__ __align__(16) float simtShared[];
  const int headSize = a.headSize, valueSize = a.valueSize;
  const int padded = (headSize + 3) / 4 * 4;
  float *qTile = simtShared;                     // [rows][padded]
  float *kTile = qTile + kSimtRows * padded;     // [padded][keyPitch]
  float *vTile = kTile + padded * kSimtKeyPitch; // [keys][valueSize]
  float *pTile = vTile + kSimtKeys * valueSize;  // [warp][key][row]

  const int64_t rowTile = blockIdx.x % a.rowTiles;
  const int64_t b = blockIdx.x / a.rowTiles;
  const int64_t rowBase = rowTile * kSimtRows;
  const BatchOffsets offsets = batchOffsets(a, b);
  const T *q = static_cast<const T *>(a.q) + offsets.q;
  const T *k = static_cast<const T *>(a.k) + offsets.k;
  const T *v = static_cast<const T *>(a.v) + offsets.v;
  const T *bias = static_cast<const T *>(a.bias) + offsets.bias;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int threads = kSimtWarps * 32;
  constexpr bool dropping = Dropout;
  const DropoutKey drop = attentionDropoutKeyIf<Dropout>(a.dropout);

  for (int i = tid; i < kSimtRows * padded; i += threads) {
    int r = i / padded, d = i % padded;
    int64_t row = rowBase + r;
    qTile[i] =
        row < a.queries && d < headSize ? toFloat(q[row * headSize + d]) : 0.0f;
  }

  float rowMax[kSimtRowsPerWarp], rowSum[kSimtRowsPerWarp];
  float acc[kSimtRowsPerWarp][kMaxHeadSize / 32];
#pragma unroll
  for (int r = 0; r < kSimtRowsPerWarp; ++r) {
    rowMax[r] = -INFINITY;
    rowSum[r] = 0.0f;
#pragma unroll
    for (int t = 0; t < kMaxHeadSize / 32; ++t)
      acc[r][t] = 0.0f;
  }
  const int64_t firstRow = rowBase + warp * kSimtRowsPerWarp;
  int64_t keyEnd = a.keys;
  if (a.causal && rowBase + kSimtRows < keyEnd)
    keyEnd = rowBase + kSimtRows;
  float *pWarp = pTile + warp * kSimtKeys * kSimtRowsPerWarp;

  for (int64_t key0 = 0; key0 < keyEnd; key0 += kSimtKeys) {
    __syncthreads(); // the previous tile is consumed (and Q is stored)
    if (a.keyTransposed) {
      for (int i = tid; i < padded * kSimtKeys; i += threads) {
        int d = i / kSimtKeys, j = i % kSimtKeys;
        int64_t key = key0 + j;
        kTile[d * kSimtKeyPitch + j] =
            key < a.keys && d < headSize ? toFloat(k[d * a.keys + key]) : 0.0f;
      }
    } else {
      for (int i = tid; i < kSimtKeys * padded; i += threads) {
        int j = i / padded, d = i % padded;
        int64_t key = key0 + j;
        kTile[d * kSimtKeyPitch + j] = key < a.keys && d < headSize
                                           ? toFloat(k[key * headSize + d])
                                           : 0.0f;
      }
    }
    for (int i = tid; i < kSimtKeys * valueSize; i += threads) {
      int64_t key = key0 + i / valueSize;
      vTile[i] = key < a.keys ? toFloat(v[key0 * valueSize + i]) : 0.0f;
    }
    __syncthreads();
    // Every key of the tile is masked for all of this warp's rows.
    if (a.causal && key0 > firstRow + kSimtRowsPerWarp - 1)
      continue;

    // Scores: lane = key, 8 rows.
    float score[kSimtRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kSimtRowsPerWarp; ++r)
      score[r] = 0.0f;
    const float *qWarp = qTile + warp * kSimtRowsPerWarp * padded;
    for (int d = 0; d < padded; d += 4) {
      float k0 = kTile[d * kSimtKeyPitch + lane];
      float k1 = kTile[(d + 1) * kSimtKeyPitch + lane];
      float k2 = kTile[(d + 2) * kSimtKeyPitch + lane];
      float k3 = kTile[(d + 3) * kSimtKeyPitch + lane];
#pragma unroll
      for (int r = 0; r < kSimtRowsPerWarp; ++r) {
        float4 qv = *reinterpret_cast<const float4 *>(qWarp + r * padded + d);
        score[r] = fmaf(qv.x, k0, score[r]);
        score[r] = fmaf(qv.y, k1, score[r]);
        score[r] = fmaf(qv.z, k2, score[r]);
        score[r] = fmaf(qv.w, k3, score[r]);
      }
    }
    // Online softmax per row; the row sums take every probability, P V only
    // the kept ones (the scale 1 / (1 - ratio) is applied at the end).
    const int64_t key = key0 + lane;
    const uint32_t keep =
        dropping
            ? tileKeepBits8x32(
                  drop, (uint64_t(b) * a.queries + firstRow) * a.keys + key0,
                  uint64_t(a.keys))
            : ~0u;
#pragma unroll
    for (int r = 0; r < kSimtRowsPerWarp; ++r) {
      float x = finishScore(a, bias, score[r], firstRow + r, key);
      float newMax = fmaxf(rowMax[r], warpMax(x));
      float alpha = newMax == -INFINITY ? 1.0f : exp2f(rowMax[r] - newMax);
      float p = newMax == -INFINITY ? 0.0f : exp2f(x - newMax);
      rowSum[r] = rowSum[r] * alpha + warpSum(p);
      rowMax[r] = newMax;
#pragma unroll
      for (int t = 0; t < kMaxHeadSize / 32; ++t)
        acc[r][t] *= alpha;
      pWarp[lane * kSimtRowsPerWarp + r] = (keep >> r) & 1u ? p : 0.0f;
    }
    __syncwarp();
    // Output: lane owns dimensions lane + 32 t.
    for (int j = 0; j < kSimtKeys; ++j) {
      float4 p0 =
          *reinterpret_cast<const float4 *>(pWarp + j * kSimtRowsPerWarp);
      float4 p1 =
          *reinterpret_cast<const float4 *>(pWarp + j * kSimtRowsPerWarp + 4);
      float pj[kSimtRowsPerWarp] = {p0.x, p0.y, p0.z, p0.w,
                                    p1.x, p1.y, p1.z, p1.w};
#pragma unroll
      for (int t = 0; t < kMaxHeadSize / 32; ++t) {
        int d = lane + 32 * t;
        if (d < valueSize) {
          float vd = vTile[j * valueSize + d];
#pragma unroll
          for (int r = 0; r < kSimtRowsPerWarp; ++r)
            acc[r][t] = fmaf(pj[r], vd, acc[r][t]);
        }
      }
    }
    __syncwarp();
  }

  T *y = static_cast<T *>(a.y) + b * a.queries * valueSize;
#pragma unroll
  for (int r = 0; r < kSimtRowsPerWarp; ++r) {
    int64_t row = firstRow + r;
    if (row >= a.queries)
      continue;
#pragma unroll
    for (int t = 0; t < kMaxHeadSize / 32; ++t) {
      int d = lane + 32 * t;
      if (d < valueSize)
        y[row * valueSize + d] =
            fromFloat<T>(a.safeSoftmax && rowSum[r] == 0.0f
                             ? 0.0f
                             : acc[r][t] / rowSum[r] * drop.scale);
    }
    if (a.lse && lane == 0)
      storeRowStatistics(a.lse + 2 * (b * a.queries + row), rowMax[r],
                         rowSum[r]);
  }
}

//===----------------------------------------------------------------------===//
// Tensor-core kernel (f16 / bf16, sm_80+)
//===----------------------------------------------------------------------===//

constexpr int kWmmaWarps = 4;
constexpr int kWmmaRows = kWmmaWarps * 16;
constexpr int kWmmaKeys = 64;

__host__ __device__ constexpr int roundUp16(int n) {
  return (n + 15) / 16 * 16;
}

/// Shared memory of the tensor-core kernel, in bytes (T is 2 bytes).
size_t wmmaSharedBytes(int headSize, int valueSize) {
  size_t d = roundUp16(headSize), dv = roundUp16(valueSize);
  return 2 * (kWmmaRows * d + kWmmaKeys * d + kWmmaKeys * dv) + // Q, K, V
         4 * kWmmaRows * kWmmaKeys +                            // scores
         2 * kWmmaRows * kWmmaKeys +                            // probabilities
         4 * kWmmaRows * dv;                                    // output
}

/// dst[r][c] = src[r * srcPitch + c] for r < validRows and c < validCols,
/// zero elsewhere in [rows, cols). With `Vector`, 8 elements per load
/// (validCols, srcPitch and the pointers multiples of 8 elements / 16 B).
template <typename T, bool Vector>
__device__ __forceinline__ void
loadTile(T *dst, int dstPitch, const T *src, int64_t srcPitch, int rows,
         int64_t validRows, int cols, int64_t validCols) {
  const int threads = kWmmaWarps * 32;
  if constexpr (Vector) {
    int units = cols / 8;
    for (int i = threadIdx.x; i < rows * units; i += threads) {
      int r = i / units, c = (i % units) * 8;
      uint4 value = make_uint4(0, 0, 0, 0);
      if (r < validRows && c < validCols)
        value = *reinterpret_cast<const uint4 *>(src + r * srcPitch + c);
      *reinterpret_cast<uint4 *>(dst + r * dstPitch + c) = value;
    }
  } else {
    for (int i = threadIdx.x; i < rows * cols; i += threads) {
      int r = i / cols, c = i % cols;
      dst[r * dstPitch + c] = r < validRows && c < validCols
                                  ? src[r * srcPitch + c]
                                  : fromFloat<T>(0.0f);
    }
  }
}

template <typename T, bool Vector, bool Dropout>
__device__ void attentionWmmaBody(const AttentionArgs &a,
                                  unsigned char *shared) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  using namespace nvcuda;
  const int headSize = a.headSize, valueSize = a.valueSize;
  const int dPad = roundUp16(headSize), dvPad = roundUp16(valueSize);
  T *qTile = reinterpret_cast<T *>(shared); // [rows][dPad]
  T *kTile = qTile + kWmmaRows * dPad;      // [keys][dPad] or [dPad][keys]
  T *vTile = kTile + kWmmaKeys * dPad;      // [keys][dvPad]
  float *sTile = reinterpret_cast<float *>(vTile + kWmmaKeys * dvPad);
  T *pTile = reinterpret_cast<T *>(sTile + kWmmaRows * kWmmaKeys);
  float *oTile = reinterpret_cast<float *>(pTile + kWmmaRows * kWmmaKeys);
  __shared__ float rowSums[kWmmaRows];

  const int64_t rowTile = blockIdx.x % a.rowTiles;
  const int64_t b = blockIdx.x / a.rowTiles;
  const int64_t rowBase = rowTile * kWmmaRows;
  const BatchOffsets offsets = batchOffsets(a, b);
  const T *q = static_cast<const T *>(a.q) + offsets.q;
  const T *k = static_cast<const T *>(a.k) + offsets.k;
  const T *v = static_cast<const T *>(a.v) + offsets.v;
  const T *bias = static_cast<const T *>(a.bias) + offsets.bias;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  loadTile<T, Vector>(qTile, dPad, q + rowBase * headSize, headSize, kWmmaRows,
                      a.queries - rowBase, dPad, headSize);
  T *qWarp = qTile + warp * 16 * dPad;
  float *sWarp = sTile + warp * 16 * kWmmaKeys;
  T *pWarp = pTile + warp * 16 * kWmmaKeys;
  float *oWarp = oTile + warp * 16 * dvPad;
  for (int i = lane; i < 16 * dvPad; i += 32)
    oWarp[i] = 0.0f;

  // Two lanes per row: row `lane / 2`, key half `lane % 2`.
  const int myRow = lane >> 1, half = lane & 1;
  const int64_t row = rowBase + warp * 16 + myRow;
  const int64_t warpLastRow = rowBase + warp * 16 + 15;
  constexpr bool dropping = Dropout;
  const DropoutKey drop = attentionDropoutKeyIf<Dropout>(a.dropout);
  float rowMax = -INFINITY, rowSum = 0.0f;
  int64_t keyEnd = a.keys;
  if (a.causal && rowBase + kWmmaRows < keyEnd)
    keyEnd = rowBase + kWmmaRows;

  for (int64_t key0 = 0; key0 < keyEnd; key0 += kWmmaKeys) {
    __syncthreads(); // the previous tile is consumed (and Q is stored)
    if (a.keyTransposed)
      loadTile<T, Vector>(kTile, kWmmaKeys, k + key0, a.keys, dPad, headSize,
                          kWmmaKeys, a.keys - key0);
    else
      loadTile<T, Vector>(kTile, dPad, k + key0 * headSize, headSize, kWmmaKeys,
                          a.keys - key0, dPad, headSize);
    loadTile<T, Vector>(vTile, dvPad, v + key0 * valueSize, valueSize,
                        kWmmaKeys, a.keys - key0, dvPad, valueSize);
    __syncthreads();
    if (a.causal && key0 > warpLastRow)
      continue; // every key of the tile is masked for this warp's rows

    // S = Q K^T for this warp's 16 rows and the tile's 64 keys.
    for (int n = 0; n < kWmmaKeys / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> scores;
      wmma::fill_fragment(scores, 0.0f);
      for (int kk = 0; kk < dPad; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> qf;
        wmma::load_matrix_sync(qf, qWarp + kk, dPad);
        if (a.keyTransposed) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> kf;
          wmma::load_matrix_sync(kf, kTile + kk * kWmmaKeys + n * 16,
                                 kWmmaKeys);
          wmma::mma_sync(scores, qf, kf, scores);
        } else {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> kf;
          wmma::load_matrix_sync(kf, kTile + n * 16 * dPad + kk, dPad);
          wmma::mma_sync(scores, qf, kf, scores);
        }
      }
      wmma::store_matrix_sync(sWarp + n * 16, scores, kWmmaKeys,
                              wmma::mem_row_major);
    }
    __syncwarp();

    // Scale, bias, masks, online softmax. Columns are visited in a rotated
    // order so that the 32 lanes hit 32 different banks.
    constexpr int kHalfKeys = kWmmaKeys / 2;
    float *sRow = sWarp + myRow * kWmmaKeys + half * kHalfKeys;
    T *pRow = pWarp + myRow * kWmmaKeys + half * kHalfKeys;
    float tileMax = -INFINITY;
    for (int c = 0; c < kHalfKeys; ++c) {
      int column = (c + lane) & (kHalfKeys - 1);
      float x = finishScore(a, bias, sRow[column], row,
                            key0 + half * kHalfKeys + column);
      sRow[column] = x;
      tileMax = fmaxf(tileMax, x);
    }
    tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, 1));
    // This lane's 32 keys: the sum takes every probability, P V the kept
    // ones (1 / (1 - ratio) is applied with 1 / sum at the end).
    const uint32_t keep =
        dropping ? keepBits32(drop, (uint64_t(b) * a.queries + row) * a.keys +
                                        key0 + half * kHalfKeys)
                 : ~0u;
    float newMax = fmaxf(rowMax, tileMax);
    float alpha = newMax == -INFINITY ? 1.0f : exp2f(rowMax - newMax);
    float tileSum = 0.0f;
    for (int c = 0; c < kHalfKeys; ++c) {
      int column = (c + lane) & (kHalfKeys - 1);
      float p = newMax == -INFINITY ? 0.0f : exp2f(sRow[column] - newMax);
      T stored = fromFloat<T>(p);
      pRow[column] = (keep >> column) & 1u ? stored : fromFloat<T>(0.0f);
      tileSum += toFloat(stored); // as P V sees it, before dropout
    }
    tileSum += __shfl_xor_sync(0xffffffffu, tileSum, 1);
    rowSum = rowSum * alpha + tileSum;
    rowMax = newMax;
    const int halfValues = dvPad / 2;
    float *oRow = oWarp + myRow * dvPad + half * halfValues;
    for (int c = 0; c < halfValues; ++c)
      oRow[(c + lane) % halfValues] *= alpha;
    __syncwarp();

    // O += P V.
    for (int n = 0; n < dvPad / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> out;
      wmma::load_matrix_sync(out, oWarp + n * 16, dvPad, wmma::mem_row_major);
      for (int kk = 0; kk < kWmmaKeys; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> pf;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> vf;
        wmma::load_matrix_sync(pf, pWarp + kk, kWmmaKeys);
        wmma::load_matrix_sync(vf, vTile + kk * dvPad + n * 16, dvPad);
        wmma::mma_sync(out, pf, vf, out);
      }
      wmma::store_matrix_sync(oWarp + n * 16, out, dvPad, wmma::mem_row_major);
    }
    __syncwarp();
  }

  if (half == 0)
    rowSums[warp * 16 + myRow] = rowSum;
  if (a.lse && half == 0 && row < a.queries)
    storeRowStatistics(a.lse + 2 * (b * a.queries + row), rowMax, rowSum);
  __syncwarp();
  T *y = static_cast<T *>(a.y) +
         (b * a.queries + rowBase + warp * 16) * int64_t(valueSize);
  for (int i = lane; i < 16 * valueSize; i += 32) {
    int r = i / valueSize, d = i % valueSize;
    if (rowBase + warp * 16 + r < a.queries)
      y[i] = fromFloat<T>(a.safeSoftmax && rowSums[warp * 16 + r] == 0.0f
                              ? 0.0f
                              : oWarp[r * dvPad + d] / rowSums[warp * 16 + r] *
                                    drop.scale);
  }
#endif
}

template <typename T, bool Dropout>
__global__ void __launch_bounds__(kWmmaWarps * 32)
    attentionWmmaKernel(AttentionArgs a) {
  extern __shared__ __align__(128) unsigned char wmmaShared[];
  if (a.vectorLoads)
    attentionWmmaBody<T, true, Dropout>(a, wmmaShared);
  else
    attentionWmmaBody<T, false, Dropout>(a, wmmaShared);
}

/// Raises a kernel's dynamic shared memory limit once per instantiation
/// (before any graph capture: the first run of a program is eager).
template <typename Kernel>
bool allowSharedMemory(Context &ctx, const char *node, Kernel kernel,
                       size_t bytes, size_t &allowed) {
  if (bytes <= 48 * 1024 || bytes <= allowed)
    return true;
  if (!checkCuda(
          ctx, node,
          cudaFuncSetAttribute(
              kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
          "cudaFuncSetAttribute(attention shared memory)"))
    return false;
  allowed = bytes;
  return true;
}

bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

//===----------------------------------------------------------------------===//
// Chunked library path: cuBLASLt, masked softmax, cuBLASLt
//===----------------------------------------------------------------------===//

/// One chunk of the masked softmax: rows [0, rows) of f32 scores that belong
/// to batch entries firstBatch + row / queries.
struct ScoreSoftmaxArgs {
  const float *scores;
  void *probs; ///< rows x keys of T; the scores themselves when T is float
  const void *bias;
  int64_t rows, queries, keys, firstBatch;
  int batchRank;
  int64_t batchShape[kMaxRank], biasStride[kMaxRank];
  int64_t biasRowStride, biasColStride;
  bool causal, hasBias, safeSoftmax;
  /// Row statistics of the chunk's rows [rows, 2], or null.
  float *lse;
  /// Dropout of the probabilities written (the row statistics are the
  /// undropped scores'): element (firstBatch * queries + row) * keys + j.
  AttentionDropoutArgs dropout;
};

constexpr int kSoftmaxWarps = 8;

/// One warp per row. kVals > 0: the row lives in registers (keys <= 32 kVals,
/// one read, one write); kVals == 0: any length, three passes over the row.
/// Bias and masks are applied on the fly; exp2 in the log2 domain as in the
/// fused kernels. A row whose scores are all -inf gives NaN (0 / 0), as the
/// unfused softmax and the fused kernels do, or zeros with `safeSoftmax`.
/// With dropout the probabilities written are the kept ones times
/// 1 / (1 - ratio) (what the P V GEMM multiplies), zeros elsewhere; the keep
/// bits come 128 columns at a time from one Philox call per lane
/// (WarpKeepWindow). `Dropout` is a template parameter so that the kernels
/// without it keep their registers (and occupancy).
template <typename T, int kVals, bool Dropout>
__global__ void __launch_bounds__(kSoftmaxWarps * 32)
    scoreSoftmaxKernel(ScoreSoftmaxArgs a) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kSoftmaxWarps + (threadIdx.x >> 5);
  if (row >= a.rows)
    return;
  const int64_t i = row % a.queries;
  int64_t b = a.firstBatch + row / a.queries, biasOffset = 0;
  for (int d = a.batchRank - 1; d >= 0; --d) {
    biasOffset += (b % a.batchShape[d]) * a.biasStride[d];
    b /= a.batchShape[d];
  }
  const T *bias = static_cast<const T *>(a.bias) + biasOffset +
                  (a.hasBias ? i * a.biasRowStride : 0);
  const float *s = a.scores + row * a.keys;
  T *p = static_cast<T *>(a.probs) + row * a.keys;
  const int64_t keys = a.keys;
  constexpr bool dropping = Dropout;
  [[maybe_unused]] const DropoutKey drop =
      attentionDropoutKeyIf<Dropout>(a.dropout);
  // The row's first element in the call's [batch..., S, Sk] probabilities.
  [[maybe_unused]] const uint64_t rowFirst =
      (uint64_t(a.firstBatch) * uint64_t(a.queries) + uint64_t(row)) *
      uint64_t(keys);
  auto score = [&](int64_t j) {
    if (a.causal && j > i)
      return -INFINITY;
    float x = s[j];
    if (a.hasBias)
      x += toFloat(bias[j * a.biasColStride]);
    return toLog2Domain(x);
  };
  if constexpr (kVals > 0) {
    float x[kVals];
    float m = -INFINITY;
#pragma unroll
    for (int t = 0; t < kVals; ++t) {
      int64_t j = lane + 32 * t;
      x[t] = j < keys ? score(j) : -INFINITY;
      m = fmaxf(m, x[t]);
    }
    m = warpMax(m);
    if (a.lse && lane == 0 && m == -INFINITY)
      storeRowStatistics(a.lse + 2 * row, m, 0.0f);
    if (a.safeSoftmax && m == -INFINITY) {
      for (int64_t j = lane; j < keys; j += 32)
        p[j] = fromFloat<T>(0.0f);
      return;
    }
    float sum = 0.0f;
#pragma unroll
    for (int t = 0; t < kVals; ++t) {
      x[t] = exp2f(x[t] - m);
      sum += x[t];
    }
    sum = warpSum(sum);
    if (a.lse && lane == 0 && m != -INFINITY)
      storeRowStatistics(a.lse + 2 * row, m, sum);
    float inv = 1.0f / sum;
    if constexpr (dropping) {
      const float keptScale = inv * drop.scale;
#pragma unroll
      for (int t0 = 0; t0 < kVals; t0 += 4) {
        const WarpKeepWindow window(drop, rowFirst + uint64_t(32 * t0));
#pragma unroll
        for (int t = t0; t < t0 + 4; ++t) {
          int64_t j = lane + 32 * t;
          bool kept = window.keep(rowFirst + uint64_t(j));
          if (j < keys)
            p[j] = fromFloat<T>(kept ? x[t] * keptScale : 0.0f);
        }
      }
    } else {
#pragma unroll
      for (int t = 0; t < kVals; ++t) {
        int64_t j = lane + 32 * t;
        if (j < keys)
          p[j] = fromFloat<T>(x[t] * inv);
      }
    }
  } else {
    float m = -INFINITY;
    for (int64_t j = lane; j < keys; j += 32)
      m = fmaxf(m, score(j));
    m = warpMax(m);
    if (a.lse && lane == 0 && m == -INFINITY)
      storeRowStatistics(a.lse + 2 * row, m, 0.0f);
    if (a.safeSoftmax && m == -INFINITY) {
      for (int64_t j = lane; j < keys; j += 32)
        p[j] = fromFloat<T>(0.0f);
      return;
    }
    float sum = 0.0f;
    for (int64_t j = lane; j < keys; j += 32)
      sum += exp2f(score(j) - m);
    sum = warpSum(sum);
    if (a.lse && lane == 0 && m != -INFINITY)
      storeRowStatistics(a.lse + 2 * row, m, sum);
    float inv = 1.0f / sum;
    if constexpr (dropping) {
      const float keptScale = inv * drop.scale;
      for (int64_t j0 = 0; j0 < keys; j0 += 128) {
        const WarpKeepWindow window(drop, rowFirst + uint64_t(j0));
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          int64_t j = j0 + lane + 32 * t;
          bool kept = window.keep(rowFirst + uint64_t(j));
          if (j < keys)
            p[j] = fromFloat<T>(kept ? exp2f(score(j) - m) * keptScale : 0.0f);
        }
      }
    } else {
      for (int64_t j = lane; j < keys; j += 32)
        p[j] = fromFloat<T>(exp2f(score(j) - m) * inv);
    }
  }
}

template <typename T, bool Dropout>
void launchScoreSoftmax(Context &ctx, const ScoreSoftmaxArgs &a) {
  unsigned blocks = unsigned((a.rows + kSoftmaxWarps - 1) / kSoftmaxWarps);
  unsigned threads = kSoftmaxWarps * 32;
  if (a.keys <= 32 * 4)
    scoreSoftmaxKernel<T, 4, Dropout><<<blocks, threads, 0, ctx.stream>>>(a);
  else if (a.keys <= 32 * 8)
    scoreSoftmaxKernel<T, 8, Dropout><<<blocks, threads, 0, ctx.stream>>>(a);
  else if (a.keys <= 32 * 16)
    scoreSoftmaxKernel<T, 16, Dropout><<<blocks, threads, 0, ctx.stream>>>(a);
  else if (a.keys <= 32 * 32)
    scoreSoftmaxKernel<T, 32, Dropout><<<blocks, threads, 0, ctx.stream>>>(a);
  else
    scoreSoftmaxKernel<T, 0, Dropout><<<blocks, threads, 0, ctx.stream>>>(a);
}

size_t chunkBytes(int64_t items, const AttentionGeometry &g, DType dtype) {
  return attentionChunkBytes(items, g.queries, g.keys, dtype);
}

/// Runs the attention chunk by chunk through the workspace when every chunk
/// is large enough to keep the GPU busy; returns false (nothing done) when the
/// fused kernel should run instead.
bool attentionChunked(Context &ctx, const char *node,
                      const AttentionParams &params, const AttentionGeometry &g,
                      const TensorRef &q, const TensorRef &k,
                      const TensorRef &v, const TensorRef *bias,
                      const TensorRef &y, void *workspace,
                      size_t workspaceBytes, float *lse) {
  const int64_t batch = g.batch;
  // Q, K and V must each hold the whole batch (no broadcast): one batch
  // stride per operand.
  if (!ctx.options.chunkedAttention || !workspace || batch < 1 ||
      q.numElements() != batch * g.queries * g.headSize ||
      k.numElements() != batch * g.keys * g.headSize ||
      v.numElements() != batch * g.keys * g.valueSize)
    return false;
  int64_t items = std::min<int64_t>(
      batch,
      int64_t(workspaceBytes / std::max<size_t>(1, chunkBytes(1, g, y.dtype))));
  while (items > 0 && chunkBytes(items, g, y.dtype) > workspaceBytes)
    --items;
  if (items < 1)
    return false;
  // Balance the chunks: the same number of chunks, as even as possible.
  int64_t chunks = (batch + items - 1) / items;
  items = (batch + chunks - 1) / chunks;
  if (chunks > 1 &&
      (chunks > ctx.options.attentionMaxChunks ||
       items * g.queries * g.keys < ctx.options.attentionMinChunkScores))
    return false;

  uint8_t *base = static_cast<uint8_t *>(workspace);
  float *scores = reinterpret_cast<float *>(base);
  void *probs =
      y.dtype == DType::F32
          ? static_cast<void *>(scores)
          : static_cast<void *>(base + attentionChunkBytes(items, g.queries,
                                                           g.keys, DType::F32));
  size_t elem = dtypeSize(y.dtype);
  ScoreSoftmaxArgs sm = {};
  sm.scores = scores;
  sm.probs = probs;
  sm.bias = bias ? bias->data : nullptr;
  sm.queries = g.queries;
  sm.keys = g.keys;
  sm.batchRank = g.batchRank;
  for (int i = 0; i < g.batchRank; ++i) {
    sm.batchShape[i] = g.batchShape[i];
    sm.biasStride[i] = g.biasStride[i];
  }
  sm.biasRowStride = g.biasRowStride;
  sm.biasColStride = g.biasColStride;
  sm.causal = params.causal;
  sm.hasBias = g.hasBias;
  sm.safeSoftmax = params.safeSoftmax;
  sm.dropout = dropoutArgsOf(params);

  MatmulParams qk, pv;
  qk.alpha = params.scale;
  qk.transB = !params.keyTransposed;
  qk.allowTf32 = pv.allowTf32 = params.allowTf32;
  for (int64_t first = 0; first < batch && !hasError(ctx); first += items) {
    int64_t n = std::min(items, batch - first);
    auto slice = [&](const TensorRef &t, int64_t rows, int64_t cols) {
      int64_t shape[3] = {n, rows, cols};
      return makeTensor(static_cast<uint8_t *>(t.data) +
                            size_t(first * rows * cols) * elem,
                        t.dtype, 3, shape);
    };
    TensorRef qs = slice(q, g.queries, g.headSize);
    TensorRef ks = params.keyTransposed ? slice(k, g.headSize, g.keys)
                                        : slice(k, g.keys, g.headSize);
    TensorRef vs = slice(v, g.keys, g.valueSize);
    TensorRef ys = slice(y, g.queries, g.valueSize);
    int64_t scoreShape[3] = {n, g.queries, g.keys};
    TensorRef s = makeTensor(scores, DType::F32, 3, scoreShape);
    TensorRef p = makeTensor(probs, y.dtype, 3, scoreShape);
    matmulWithWorkspace(ctx, node, qk, qs, ks, nullptr, s, nullptr, 0);
    if (hasError(ctx))
      return true;
    sm.rows = n * g.queries;
    sm.firstBatch = first;
    sm.lse = lse ? lse + 2 * first * g.queries : nullptr;
    if (sm.dropout.ratio > 0.0f) {
      MEMOPT_DISPATCH_FLOAT(y.dtype, T, (launchScoreSoftmax<T, true>(ctx, sm)));
    } else {
      MEMOPT_DISPATCH_FLOAT(y.dtype, T,
                            (launchScoreSoftmax<T, false>(ctx, sm)));
    }
    if (!checkLaunch(ctx, node))
      return true;
    matmulWithWorkspace(ctx, node, pv, p, vs, nullptr, ys, nullptr, 0);
  }
  return true;
}

} // namespace

void attention(Context &ctx, const char *node, const AttentionParams &params,
               TensorRef q, TensorRef k, TensorRef v, const TensorRef *bias,
               TensorRef y, void *workspace, size_t workspaceBytes,
               const TensorRef *lse) {
  if (hasError(ctx))
    return;
  AttentionGeometry g;
  if (!validateAttention(ctx, node, params, q, k, v, bias, y, g) ||
      (lse && !validateAttentionStatistics(ctx, node, *lse, y,
                                           {&q, &k, &v, bias, &y})))
    return;
  if (y.numElements() == 0)
    return;
  if (cudnnAttentionForward(ctx, node, params, g, q, k, v, bias, y, lse,
                            workspace, workspaceBytes))
    return;
  attentionKernels(ctx, node, params, g, q, k, v, bias, y, workspace,
                   workspaceBytes, lse);
}

void attentionKernels(Context &ctx, const char *node,
                      const AttentionParams &params, const AttentionGeometry &g,
                      const TensorRef &q, const TensorRef &k,
                      const TensorRef &v, const TensorRef *bias,
                      const TensorRef &y, void *workspace,
                      size_t workspaceBytes, const TensorRef *lse) {
  if (g.headSize > kMaxHeadSize || g.valueSize > kMaxHeadSize) {
    failf(ctx, node,
          "attention head sizes %lld (Q, K) and %lld (V) must be at most %d "
          "on the GPU",
          (long long)g.headSize, (long long)g.valueSize, kMaxHeadSize);
    return;
  }
  float *statistics = lse ? static_cast<float *>(lse->data) : nullptr;
  if (attentionChunked(ctx, node, params, g, q, k, v, bias, y, workspace,
                       workspaceBytes, statistics))
    return;
  AttentionArgs args = {};
  args.q = q.data;
  args.k = k.data;
  args.v = v.data;
  args.bias = bias ? bias->data : nullptr;
  args.y = y.data;
  args.queries = g.queries;
  args.keys = g.keys;
  args.headSize = int(g.headSize);
  args.valueSize = int(g.valueSize);
  args.batchRank = g.batchRank;
  for (int i = 0; i < g.batchRank; ++i) {
    args.batchShape[i] = g.batchShape[i];
    args.qStride[i] = g.qStride[i];
    args.kStride[i] = g.kStride[i];
    args.vStride[i] = g.vStride[i];
    args.biasStride[i] = g.biasStride[i];
  }
  args.biasRowStride = g.biasRowStride;
  args.biasColStride = g.biasColStride;
  args.scale = params.scale;
  args.causal = params.causal;
  args.keyTransposed = params.keyTransposed;
  args.hasBias = g.hasBias;
  args.safeSoftmax = params.safeSoftmax;
  args.lse = statistics;
  args.dropout = dropoutArgsOf(params);

  bool tensorCores = y.dtype != DType::F32 && ctx.computeMajor >= 8;
  int rowsPerBlock = tensorCores ? kWmmaRows : kSimtRows;
  args.rowTiles = (g.queries + rowsPerBlock - 1) / rowsPerBlock;
  int64_t blocks = args.rowTiles * g.batch;
  if (blocks > int64_t(0x7fffffff)) {
    failf(ctx, node, "attention needs %lld blocks, more than a grid holds",
          (long long)blocks);
    return;
  }
  // Kernels with and without dropout are separate instantiations (the
  // mask's registers stay out of the kernels that draw none).
  const bool dropping = args.dropout.ratio > 0.0f;
  auto launch = [&](auto kernel, int warps, size_t bytes, size_t &allowed) {
    if (!allowSharedMemory(ctx, node, kernel, bytes, allowed))
      return false;
    kernel<<<unsigned(blocks), warps * 32, bytes, ctx.stream>>>(args);
    return true;
  };
  if (tensorCores) {
    // 16-byte tile loads: rows of whole vectors, aligned base pointers (the
    // batch strides are then multiples of 8 elements too).
    args.vectorLoads = g.headSize % 8 == 0 && g.valueSize % 8 == 0 &&
                       (!params.keyTransposed || g.keys % 8 == 0) &&
                       aligned16(q.data) && aligned16(k.data) &&
                       aligned16(v.data);
    size_t bytes = wmmaSharedBytes(args.headSize, args.valueSize);
    if (y.dtype == DType::F16 && dropping) {
      static size_t allowed = 0;
      if (!launch(attentionWmmaKernel<__half, true>, kWmmaWarps, bytes,
                  allowed))
        return;
    } else if (y.dtype == DType::F16) {
      static size_t allowed = 0;
      if (!launch(attentionWmmaKernel<__half, false>, kWmmaWarps, bytes,
                  allowed))
        return;
    } else if (dropping) {
      static size_t allowed = 0;
      if (!launch(attentionWmmaKernel<__nv_bfloat16, true>, kWmmaWarps, bytes,
                  allowed))
        return;
    } else {
      static size_t allowed = 0;
      if (!launch(attentionWmmaKernel<__nv_bfloat16, false>, kWmmaWarps, bytes,
                  allowed))
        return;
    }
  } else {
    size_t bytes =
        simtSharedFloats(args.headSize, args.valueSize) * sizeof(float);
    MEMOPT_DISPATCH_FLOAT(y.dtype, T, {
      if (dropping) {
        static size_t allowed = 0;
        if (!launch(attentionSimtKernel<T, true>, kSimtWarps, bytes, allowed))
          return;
      } else {
        static size_t allowed = 0;
        if (!launch(attentionSimtKernel<T, false>, kSimtWarps, bytes, allowed))
          return;
      }
    });
  }
  checkLaunch(ctx, node);
}

} // namespace memopt::rt
