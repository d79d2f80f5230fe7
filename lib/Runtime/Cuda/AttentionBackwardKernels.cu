//===- AttentionBackwardKernels.cu - attention gradients ------------------===//
//
// attentionBackward without the [S, Sk] probabilities in memory, on two paths
// chosen as the forward chooses (attentionChunked in AttentionKernels.cu):
//
//  * Chunked, through the planned workspace (two f32 score buffers per chunk
//    of batch entries): cuBLASLt writes scale * Q K^T and dP = dO V^T, one
//    kernel turns them into P = exp2(S - max - logsum) and
//    dS = P * (dP - D) in place (D = rowsum(dO * O), one warp per row; the
//    bias gradient is summed with atomics), and three more GEMMs give
//    dV = P^T dO, dQ = scale * dS K and dK = scale * dS^T Q (or its
//    transpose for K stored as [D, Sk]). Five GEMMs at cuBLASLt's f32 rate
//    instead of CUDA-core loops: on an H100 the fastest f32 backward where
//    the workspace fits (docs/attention.md has the timings).
//  * Fused (no workspace), FlashAttention-2's backward on CUDA cores in two
//    kernels without atomics: one owns 32 keys of one batch entry (with
//    grouped gradients, of one K / V entry: it walks the batch entries of
//    its group in turn), keeps their dK and dV in registers and walks the
//    query rows in tiles of 32 (recomputing S and dP there); the other owns
//    32 query rows, keeps their
//    dQ and walks the keys (and adds dS into the bias gradient). Each
//    recomputes D from dO and O while it loads the rows. Tiles as in the
//    forward's CUDA-core kernel: K and V transposed in shared memory with a
//    padded row (lane = key for the scores), 4 warps x 8 rows, lanes owning
//    head dimensions lane + 32 t for the accumulators.
//
// f16 / bf16 operands (mixed-precision training) take the chunked path too:
// the score GEMMs accumulate and store S and dP in f32, the row kernel
// rounds P and dS once into two more buffers of the operands' type, and the
// three gradient GEMMs run on tensor cores with f32 accumulation (what
// FlashAttention-2's backward feeds its dV / dQ / dK MMAs). Without the
// workspace they take the fused kernels: every load widens to f32 (the
// shared tiles and all accumulation are f32, as in the f32 kernels) and
// every dQ / dK / dV element is rounded once on store. A trained bias (its
// gradient summed with f32 atomics) stays f32-only.
//
// Training dropout (mask M regenerated from the forward's key, scale c =
// 1 / (1 - ratio); AttentionDropout.cuh): dV = (c M * P)^T dO, dP = c M *
// dO V^T, dS = P * (dP - D) with D = rowsum(dO * O) as before (O is the
// dropped output), computed where P and dP are formed (the fused kernels'
// tiles, the chunked path's row kernel); nothing was saved by the forward.
//
// Scores are in the log2 domain with the forward's saturation
// (toLog2Domain), the row statistics brought there the same way, so a row
// masked by a finite fill gets exactly the forward's uniform probabilities.
//
// Taken from: FlashAttention-2 (Dao, 2023; Algorithm 2: recomputation from
// the log-sum-exp, D = rowsum(dO * O), the key-block outer loop for dK/dV),
// Triton's fused-attention tutorial (dK/dV and dQ in separate loops instead
// of dQ atomics), the memory-efficient attention of xFormers / PyTorch (the
// same algorithm on CUDA cores for f32). Different: the chunked library path
// over a workspace the planner found free, and a reduced bias gradient.
//
//===----------------------------------------------------------------------===//

#include "AttentionDropout.cuh"
#include "CudaDevice.cuh"

namespace memopt::rt {

namespace {

constexpr int kMaxHeadSize = kAttentionKernelsMaxHeadSize;
constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 8;
constexpr int kRows = kWarps * kRowsPerWarp; // query rows per tile
constexpr int kKeys = 32;                    // keys per tile
constexpr int kKeyPitch = kKeys + 1;         // transposed K / V rows
constexpr int kTilePitch = kKeys + 4;        // P / dS rows (float4 reads)
constexpr int kThreads = kWarps * 32;

/// The operands: T (float, __half, __nv_bfloat16) for Q, K, V, bias, O,
/// dO and the gradients (the kernels' template parameter); f32 for the row
/// statistics and the bias gradient.
struct BackwardArgs {
  const void *q, *k, *v, *bias, *y, *dy;
  const float *lse;
  void *dq, *dk, *dv;
  float *dbias;
  int64_t queries, keys;
  int headSize, valueSize;
  int batchRank;
  int64_t batchShape[kMaxRank];
  int64_t qStride[kMaxRank], kStride[kMaxRank], vStride[kMaxRank],
      biasStride[kMaxRank];
  int64_t biasRowStride, biasColStride;
  float scale;
  bool causal, keyTransposed, hasBias, safeSoftmax;
  /// Key tiles (dK/dV kernel) or row tiles (dQ kernel) per batch entry.
  int64_t tiles;
  /// Consecutive batch entries whose dK / dV the dK/dV kernel sums into one
  /// entry (grouped gradients; 1 otherwise).
  int64_t group;
  /// The forward's dropout, its mask regenerated per tile
  /// (AttentionDropout.cuh).
  AttentionDropoutArgs dropout;
};

struct Offsets {
  int64_t q = 0, k = 0, v = 0, bias = 0;
};

__device__ __forceinline__ Offsets offsetsOf(const BackwardArgs &a, int64_t b) {
  Offsets o;
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

/// A row's statistics in the log2 domain.
struct RowStatistics {
  float dot = 0.0f, max2 = 0.0f, logSum2 = 0.0f;
};

__device__ __forceinline__ RowStatistics loadStatistics(const float *lse,
                                                        float dot) {
  RowStatistics r;
  r.dot = dot;
  r.max2 = toLog2Domain(lse[0]);
  r.logSum2 = lse[1] * kLog2e;
  return r;
}

/// P of (row, key) from the raw dot product q . k and the row statistics; 0
/// for masked and out-of-range keys; NaN (or 0 with the safe softmax) for a
/// fully masked row.
__device__ __forceinline__ float
probability(bool causal, bool hasBias, bool safeSoftmax, float scale,
            float biasValue, float dot, int64_t row, int64_t key, int64_t keys,
            const RowStatistics &s) {
  if (key >= keys)
    return 0.0f;
  if (s.max2 == -INFINITY)
    return safeSoftmax ? 0.0f : NAN;
  if (causal && key > row)
    return 0.0f;
  float x = dot * scale;
  if (hasBias)
    x += biasValue;
  return exp2f((toLog2Domain(x) - s.max2) - s.logSum2);
}

/// Loads keys [key0, key0 + kKeys) of K and V transposed into shared memory
/// (kT[d][j], vT[e][j], zero padded), for either K layout.
template <typename T>
__device__ __forceinline__ void loadKeyTiles(const BackwardArgs &a, const T *k,
                                             const T *v, int64_t key0, int dPad,
                                             int dvPad, float *kT, float *vT) {
  const int tid = threadIdx.x;
  if (a.keyTransposed) {
    for (int i = tid; i < dPad * kKeys; i += kThreads) {
      int d = i / kKeys, j = i % kKeys;
      int64_t key = key0 + j;
      kT[d * kKeyPitch + j] =
          key < a.keys && d < a.headSize ? toFloat(k[d * a.keys + key]) : 0.0f;
    }
  } else {
    for (int i = tid; i < kKeys * dPad; i += kThreads) {
      int j = i / dPad, d = i % dPad;
      int64_t key = key0 + j;
      kT[d * kKeyPitch + j] = key < a.keys && d < a.headSize
                                  ? toFloat(k[key * a.headSize + d])
                                  : 0.0f;
    }
  }
  for (int i = tid; i < kKeys * dvPad; i += kThreads) {
    int j = i / dvPad, e = i % dvPad;
    int64_t key = key0 + j;
    vT[e * kKeyPitch + j] = key < a.keys && e < a.valueSize
                                ? toFloat(v[key * a.valueSize + e])
                                : 0.0f;
  }
}

/// Loads query rows [row0, row0 + kRows) of Q and dO (zero padded) and
/// returns, for the calling warp's rows, D = dO . O and the statistics.
template <typename T>
__device__ __forceinline__ void
loadRowTiles(const BackwardArgs &a, int64_t b, const T *q, int64_t row0,
             int dPad, int dvPad, float *qTile, float *dyTile,
             RowStatistics (&rows)[kRowsPerWarp]) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const T *dy = static_cast<const T *>(a.dy) + b * a.queries * a.valueSize;
  for (int i = tid; i < kRows * dPad; i += kThreads) {
    int r = i / dPad, d = i % dPad;
    int64_t row = row0 + r;
    qTile[i] = row < a.queries && d < a.headSize
                   ? toFloat(q[row * a.headSize + d])
                   : 0.0f;
  }
  for (int i = tid; i < kRows * dvPad; i += kThreads) {
    int r = i / dvPad, e = i % dvPad;
    int64_t row = row0 + r;
    dyTile[i] = row < a.queries && e < a.valueSize
                    ? toFloat(dy[row * a.valueSize + e])
                    : 0.0f;
  }
  const T *y = static_cast<const T *>(a.y) + b * a.queries * a.valueSize;
  const float *lse = a.lse + 2 * b * a.queries;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    int64_t row = row0 + warp * kRowsPerWarp + r;
    if (row >= a.queries) {
      rows[r] = RowStatistics();
      continue;
    }
    float dot = 0.0f;
    for (int e = lane; e < a.valueSize; e += 32)
      dot += toFloat(dy[row * a.valueSize + e]) *
             toFloat(y[row * a.valueSize + e]);
    rows[r] = loadStatistics(lse + 2 * row, warpSum(dot));
  }
}

/// S (raw q . k) and dP = dO . v for the warp's 8 rows against key `lane`
/// of the tile.
__device__ __forceinline__ void scoreTile(const float *qWarp,
                                          const float *dyWarp, const float *kT,
                                          const float *vT, int dPad, int dvPad,
                                          float (&s)[kRowsPerWarp],
                                          float (&dp)[kRowsPerWarp]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
    s[r] = dp[r] = 0.0f;
  for (int d = 0; d < dPad; d += 4) {
    float k0 = kT[d * kKeyPitch + lane], k1 = kT[(d + 1) * kKeyPitch + lane];
    float k2 = kT[(d + 2) * kKeyPitch + lane];
    float k3 = kT[(d + 3) * kKeyPitch + lane];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      float4 qv = *reinterpret_cast<const float4 *>(qWarp + r * dPad + d);
      s[r] = fmaf(qv.x, k0, s[r]);
      s[r] = fmaf(qv.y, k1, s[r]);
      s[r] = fmaf(qv.z, k2, s[r]);
      s[r] = fmaf(qv.w, k3, s[r]);
    }
  }
  for (int e = 0; e < dvPad; e += 4) {
    float v0 = vT[e * kKeyPitch + lane], v1 = vT[(e + 1) * kKeyPitch + lane];
    float v2 = vT[(e + 2) * kKeyPitch + lane];
    float v3 = vT[(e + 3) * kKeyPitch + lane];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      float4 g = *reinterpret_cast<const float4 *>(dyWarp + r * dvPad + e);
      dp[r] = fmaf(g.x, v0, dp[r]);
      dp[r] = fmaf(g.y, v1, dp[r]);
      dp[r] = fmaf(g.z, v2, dp[r]);
      dp[r] = fmaf(g.w, v3, dp[r]);
    }
  }
}

size_t fusedSharedFloats(int headSize, int valueSize) {
  size_t dPad = size_t(headSize + 3) / 4 * 4,
         dvPad = size_t(valueSize + 3) / 4 * 4;
  return (dPad + dvPad) * kKeyPitch + kRows * (dPad + dvPad) +
         2 * kRows * kTilePitch;
}

/// dK and dV of kKeys keys of one batch entry, or with grouped gradients
/// of one K / V entry, summed over the `group` batch entries sharing it.
template <typename T, bool Dropout>
__global__ void __launch_bounds__(kThreads)
    attentionBackwardKeysKernel(BackwardArgs a) {
  extern __shared__ __align__(16) float keysShared[];
  const int dPad = (a.headSize + 3) / 4 * 4, dvPad = (a.valueSize + 3) / 4 * 4;
  float *kT = keysShared;                // [dPad][kKeyPitch]
  float *vT = kT + dPad * kKeyPitch;     // [dvPad][kKeyPitch]
  float *qTile = vT + dvPad * kKeyPitch; // [kRows][dPad]
  float *dyTile = qTile + kRows * dPad;  // [kRows][dvPad]
  float *pTile = dyTile + kRows * dvPad; // [kRows][kTilePitch]
  float *dsTile = pTile + kRows * kTilePitch;

  const int64_t entry = blockIdx.x / a.tiles;
  const int64_t key0 = blockIdx.x % a.tiles * kKeys;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  constexpr bool dropping = Dropout;
  const DropoutKey drop = attentionDropoutKeyIf<Dropout>(a.dropout);

  float dK[kRowsPerWarp][kMaxHeadSize / 32] = {};
  float dV[kRowsPerWarp][kMaxHeadSize / 32] = {};
  // Causal: rows before key0 see none of these keys.
  const int64_t firstRow = a.causal ? key0 / kRows * kRows : 0;
  // The group's batch entries read the same K and V entry.
  {
    const Offsets o = offsetsOf(a, entry * a.group);
    loadKeyTiles(a, static_cast<const T *>(a.k) + o.k,
                 static_cast<const T *>(a.v) + o.v, key0, dPad, dvPad, kT, vT);
  }
  for (int64_t b = entry * a.group; b < (entry + 1) * a.group; ++b) {
    const Offsets o = offsetsOf(a, b);
    const T *q = static_cast<const T *>(a.q) + o.q;
    const T *bias =
        a.hasBias ? static_cast<const T *>(a.bias) + o.bias : nullptr;
    for (int64_t row0 = firstRow; row0 < a.queries; row0 += kRows) {
      __syncthreads(); // the previous tiles are consumed
      RowStatistics rows[kRowsPerWarp];
      loadRowTiles(a, b, q, row0, dPad, dvPad, qTile, dyTile, rows);
      __syncthreads();
      float s[kRowsPerWarp], dp[kRowsPerWarp];
      scoreTile(qTile + warp * kRowsPerWarp * dPad,
                dyTile + warp * kRowsPerWarp * dvPad, kT, vT, dPad, dvPad, s,
                dp);
      const int64_t key = key0 + lane;
      // Dropout (mask M, scale c): dV takes c M * P, and dP = c M * dO V^T.
      const uint32_t keep =
          dropping ? tileKeepBits8x32(drop,
                                      (uint64_t(b) * a.queries + row0 +
                                       warp * kRowsPerWarp) *
                                              a.keys +
                                          key0,
                                      uint64_t(a.keys))
                   : ~0u;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        int local = warp * kRowsPerWarp + r;
        int64_t row = row0 + local;
        const bool kept = (keep >> r) & 1u;
        float p = 0.0f, ds = 0.0f;
        if (row < a.queries) {
          float biasValue =
              a.hasBias && key < a.keys
                  ? toFloat(bias[row * a.biasRowStride + key * a.biasColStride])
                  : 0.0f;
          p = probability(a.causal, a.hasBias, a.safeSoftmax, a.scale,
                          biasValue, s[r], row, key, a.keys, rows[r]);
          ds = p * ((kept ? dp[r] * drop.scale : 0.0f) - rows[r].dot);
        }
        pTile[local * kTilePitch + lane] = kept ? p * drop.scale : 0.0f;
        dsTile[local * kTilePitch + lane] = a.scale * ds;
      }
      __syncthreads();
      // dV += P^T dO, dK += scale dS^T Q: the warp's 8 keys, lane's dims.
      const int rowCount =
          a.queries - row0 < kRows ? int(a.queries - row0) : kRows;
      for (int i = 0; i < rowCount; ++i) {
        const float *pRow = pTile + i * kTilePitch + warp * kRowsPerWarp;
        const float *dsRow = dsTile + i * kTilePitch + warp * kRowsPerWarp;
        float4 p0 = *reinterpret_cast<const float4 *>(pRow);
        float4 p1 = *reinterpret_cast<const float4 *>(pRow + 4);
        float4 s0 = *reinterpret_cast<const float4 *>(dsRow);
        float4 s1 = *reinterpret_cast<const float4 *>(dsRow + 4);
        float pj[kRowsPerWarp] = {p0.x, p0.y, p0.z, p0.w,
                                  p1.x, p1.y, p1.z, p1.w};
        float sj[kRowsPerWarp] = {s0.x, s0.y, s0.z, s0.w,
                                  s1.x, s1.y, s1.z, s1.w};
#pragma unroll
        for (int t = 0; t < kMaxHeadSize / 32; ++t) {
          int e = lane + 32 * t;
          if (e < a.valueSize) {
            float g = dyTile[i * dvPad + e];
#pragma unroll
            for (int c = 0; c < kRowsPerWarp; ++c)
              dV[c][t] = fmaf(pj[c], g, dV[c][t]);
          }
          if (e < a.headSize) {
            float x = qTile[i * dPad + e];
#pragma unroll
            for (int c = 0; c < kRowsPerWarp; ++c)
              dK[c][t] = fmaf(sj[c], x, dK[c][t]);
          }
        }
      }
    }
  }
  T *dk = static_cast<T *>(a.dk) + entry * a.keys * a.headSize;
  T *dv = static_cast<T *>(a.dv) + entry * a.keys * a.valueSize;
#pragma unroll
  for (int c = 0; c < kRowsPerWarp; ++c) {
    int64_t key = key0 + warp * kRowsPerWarp + c;
    if (key >= a.keys)
      continue;
#pragma unroll
    for (int t = 0; t < kMaxHeadSize / 32; ++t) {
      int e = lane + 32 * t;
      if (e < a.valueSize)
        dv[key * a.valueSize + e] = fromFloat<T>(dV[c][t]);
      if (e < a.headSize) {
        if (a.keyTransposed)
          dk[e * a.keys + key] = fromFloat<T>(dK[c][t]);
        else
          dk[key * a.headSize + e] = fromFloat<T>(dK[c][t]);
      }
    }
  }
}

/// dQ of kRows query rows of one batch entry, and their share of dbias.
template <typename T, bool Dropout>
__global__ void __launch_bounds__(kThreads)
    attentionBackwardQueriesKernel(BackwardArgs a) {
  extern __shared__ __align__(16) float queriesShared[];
  const int dPad = (a.headSize + 3) / 4 * 4, dvPad = (a.valueSize + 3) / 4 * 4;
  float *kT = queriesShared;              // [dPad][kKeyPitch]
  float *vT = kT + dPad * kKeyPitch;      // [dvPad][kKeyPitch]
  float *qTile = vT + dvPad * kKeyPitch;  // [kRows][dPad]
  float *dyTile = qTile + kRows * dPad;   // [kRows][dvPad]
  float *dsTile = dyTile + kRows * dvPad; // [warp][key][row]

  const int64_t b = blockIdx.x / a.tiles;
  const int64_t row0 = blockIdx.x % a.tiles * kRows;
  const Offsets o = offsetsOf(a, b);
  const T *q = static_cast<const T *>(a.q) + o.q;
  const T *k = static_cast<const T *>(a.k) + o.k;
  const T *v = static_cast<const T *>(a.v) + o.v;
  const T *bias = a.hasBias ? static_cast<const T *>(a.bias) + o.bias : nullptr;
  float *dbias = a.dbias ? a.dbias + o.bias : nullptr;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  constexpr bool dropping = Dropout;
  const DropoutKey drop = attentionDropoutKeyIf<Dropout>(a.dropout);
  RowStatistics rows[kRowsPerWarp];
  loadRowTiles(a, b, q, row0, dPad, dvPad, qTile, dyTile, rows);
  const int64_t warpRow = row0 + warp * kRowsPerWarp;
  const float *qWarp = qTile + warp * kRowsPerWarp * dPad;
  const float *dyWarp = dyTile + warp * kRowsPerWarp * dvPad;
  float *dsWarp = dsTile + warp * kKeys * kRowsPerWarp;

  float dQ[kRowsPerWarp][kMaxHeadSize / 32] = {};
  int64_t keyEnd = a.keys;
  if (a.causal && row0 + kRows < keyEnd)
    keyEnd = row0 + kRows;
  for (int64_t key0 = 0; key0 < keyEnd; key0 += kKeys) {
    __syncthreads(); // the previous tile is consumed (and Q, dO are stored)
    loadKeyTiles(a, k, v, key0, dPad, dvPad, kT, vT);
    __syncthreads();
    if (a.causal && key0 > warpRow + kRowsPerWarp - 1)
      continue; // every key of the tile is masked for this warp's rows
    float s[kRowsPerWarp], dp[kRowsPerWarp];
    scoreTile(qWarp, dyWarp, kT, vT, dPad, dvPad, s, dp);
    const int64_t key = key0 + lane;
    // Dropout (mask M, scale c): dP = c M * dO V^T.
    const uint32_t keep =
        dropping
            ? tileKeepBits8x32(
                  drop, (uint64_t(b) * a.queries + warpRow) * a.keys + key0,
                  uint64_t(a.keys))
            : ~0u;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      int64_t row = warpRow + r;
      const bool kept = (keep >> r) & 1u;
      float ds = 0.0f;
      if (row < a.queries) {
        int64_t biasIndex = row * a.biasRowStride + key * a.biasColStride;
        float biasValue =
            a.hasBias && key < a.keys ? toFloat(bias[biasIndex]) : 0.0f;
        float p = probability(a.causal, a.hasBias, a.safeSoftmax, a.scale,
                              biasValue, s[r], row, key, a.keys, rows[r]);
        ds = p * ((kept ? dp[r] * drop.scale : 0.0f) - rows[r].dot);
        if (dbias && key < a.keys && ds != 0.0f)
          atomicAdd(dbias + biasIndex, ds);
      }
      dsWarp[lane * kRowsPerWarp + r] = a.scale * ds;
    }
    __syncwarp();
    for (int j = 0; j < kKeys; ++j) {
      float4 d0 = *reinterpret_cast<const float4 *>(dsWarp + j * kRowsPerWarp);
      float4 d1 =
          *reinterpret_cast<const float4 *>(dsWarp + j * kRowsPerWarp + 4);
      float dj[kRowsPerWarp] = {d0.x, d0.y, d0.z, d0.w, d1.x, d1.y, d1.z, d1.w};
#pragma unroll
      for (int t = 0; t < kMaxHeadSize / 32; ++t) {
        int x = lane + 32 * t;
        if (x < a.headSize) {
          float kv = kT[x * kKeyPitch + j];
#pragma unroll
          for (int r = 0; r < kRowsPerWarp; ++r)
            dQ[r][t] = fmaf(dj[r], kv, dQ[r][t]);
        }
      }
    }
    __syncwarp();
  }
  T *dq = static_cast<T *>(a.dq) + b * a.queries * a.headSize;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    int64_t row = warpRow + r;
    if (row >= a.queries)
      continue;
#pragma unroll
    for (int t = 0; t < kMaxHeadSize / 32; ++t) {
      int x = lane + 32 * t;
      if (x < a.headSize)
        dq[row * a.headSize + x] = fromFloat<T>(dQ[r][t]);
    }
  }
}

/// Raises a kernel's dynamic shared memory limit once (before any capture:
/// a program's first run is eager).
template <typename Kernel>
bool allowShared(Context &ctx, const char *node, Kernel kernel, size_t bytes,
                 size_t &allowed) {
  if (bytes <= 48 * 1024 || bytes <= allowed)
    return true;
  if (!checkCuda(
          ctx, node,
          cudaFuncSetAttribute(
              kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
          "cudaFuncSetAttribute(attention backward shared memory)"))
    return false;
  allowed = bytes;
  return true;
}

//===----------------------------------------------------------------------===//
// Chunked library path
//===----------------------------------------------------------------------===//

/// One chunk's rows: scores (scale * q . k) -> P, dP -> dS, in place for f32
/// operands; for f16 / bf16 rounded into the chunk's P and dS buffers of T
/// (the gradient GEMMs' operands), the f32 buffers only read.
struct ChunkRowsArgs {
  float *scores, *dp;
  void *p, *ds; ///< rows x keys of T; the f32 buffers themselves for float
  const void *y, *dy, *bias;
  const float *lse;
  float *dbias;
  int64_t rows, queries, keys, valueSize, firstBatch;
  int batchRank;
  int64_t batchShape[kMaxRank], biasStride[kMaxRank];
  int64_t biasRowStride, biasColStride;
  bool causal, hasBias, safeSoftmax;
  /// The forward's dropout: element (firstBatch * queries + row) * keys + j.
  AttentionDropoutArgs dropout;
};

constexpr int kChunkWarps = 8;

template <typename T, bool Dropout>
__global__ void __launch_bounds__(kChunkWarps * 32)
    chunkScoreGradientKernel(ChunkRowsArgs a) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kChunkWarps + (threadIdx.x >> 5);
  if (row >= a.rows)
    return;
  const int64_t i = row % a.queries;
  int64_t b = a.firstBatch + row / a.queries, biasOffset = 0;
  for (int d = a.batchRank - 1; d >= 0; --d) {
    biasOffset += (b % a.batchShape[d]) * a.biasStride[d];
    b /= a.batchShape[d];
  }
  biasOffset += i * a.biasRowStride;
  const T *y = static_cast<const T *>(a.y) + row * a.valueSize;
  const T *dy = static_cast<const T *>(a.dy) + row * a.valueSize;
  const T *bias = static_cast<const T *>(a.bias);
  float dot = 0.0f;
  for (int64_t e = lane; e < a.valueSize; e += 32)
    dot += toFloat(dy[e]) * toFloat(y[e]);
  const RowStatistics stats = loadStatistics(a.lse + 2 * row, warpSum(dot));
  const float *s = a.scores + row * a.keys, *dp = a.dp + row * a.keys;
  T *p = static_cast<T *>(a.p) + row * a.keys;
  T *ds = static_cast<T *>(a.ds) + row * a.keys;
  const DropoutKey drop = attentionDropoutKeyIf<Dropout>(a.dropout);
  // Dropout (mask M, scale c): P for dV is c M * P, dP = c M * dO V^T.
  auto element = [&](int64_t j, bool kept) {
    int64_t biasIndex = biasOffset + j * a.biasColStride;
    float biasValue = a.hasBias ? toFloat(bias[biasIndex]) : 0.0f;
    // The scores already carry the scale (the GEMM's alpha).
    float pj = probability(a.causal, a.hasBias, a.safeSoftmax, 1.0f, biasValue,
                           s[j], i, j, a.keys, stats);
    float dsj = pj * ((kept ? dp[j] * drop.scale : 0.0f) - stats.dot);
    p[j] = fromFloat<T>(kept ? pj * drop.scale : 0.0f);
    ds[j] = fromFloat<T>(dsj);
    if (a.dbias && dsj != 0.0f)
      atomicAdd(a.dbias + biasIndex, dsj);
  };
  if constexpr (!Dropout) {
    for (int64_t j = lane; j < a.keys; j += 32)
      element(j, true);
  } else {
    // The keep bits 128 columns at a time, one Philox call per lane.
    const uint64_t rowFirst =
        (uint64_t(a.firstBatch) * uint64_t(a.queries) + uint64_t(row)) *
        uint64_t(a.keys);
    for (int64_t j0 = 0; j0 < a.keys; j0 += 128) {
      const WarpKeepWindow window(drop, rowFirst + uint64_t(j0));
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        int64_t j = j0 + lane + 32 * t;
        bool kept = window.keep(rowFirst + uint64_t(j));
        if (j < a.keys)
          element(j, kept);
      }
    }
  }
}

bool attentionBackwardChunked(Context &ctx, const char *node,
                              const AttentionParams &params,
                              const AttentionGeometry &g, const TensorRef &q,
                              const TensorRef &k, const TensorRef &v,
                              const TensorRef *bias, const TensorRef &y,
                              const TensorRef &dy, const TensorRef &lse,
                              const TensorRef &dq, const TensorRef &dk,
                              const TensorRef &dv, const TensorRef *dbias,
                              void *workspace, size_t workspaceBytes) {
  const int64_t batch = g.batch;
  // The score GEMMs write f32 (f16 / bf16 operands accumulate in f32 and
  // store it as it is); P and dS go to the gradient GEMMs in the operands'
  // type. A bias gradient (f32 atomics) needs f32 operands.
  if (!ctx.options.chunkedAttention || !workspace || batch < 1 ||
      (q.dtype != DType::F32 && dbias) ||
      q.numElements() != batch * g.queries * g.headSize ||
      k.numElements() != batch * g.keys * g.headSize ||
      v.numElements() != batch * g.keys * g.valueSize)
    return false;
  const DType dt = q.dtype;
  auto chunkBytes = [&](int64_t items) {
    return attentionBackwardChunkBytes(items, g.queries, g.keys, dt);
  };
  int64_t items = std::min<int64_t>(
      batch, int64_t(workspaceBytes / std::max<size_t>(1, chunkBytes(1))));
  while (items > 0 && chunkBytes(items) > workspaceBytes)
    --items;
  if (items < 1)
    return false;
  int64_t chunks = (batch + items - 1) / items;
  items = (batch + chunks - 1) / chunks;
  if (chunks > 1 &&
      (chunks > ctx.options.attentionMaxChunks ||
       items * g.queries * g.keys < ctx.options.attentionMinChunkScores))
    return false;

  // [S f32 | dP f32] (+ [P T | dS T] for f16 / bf16), each 256-aligned.
  const size_t f32Bytes =
      attentionBackwardChunkBytes(items, g.queries, g.keys, DType::F32) / 2;
  const size_t lowBytes = (chunkBytes(items) - 2 * f32Bytes) / 2;
  uint8_t *base = static_cast<uint8_t *>(workspace);
  float *scores = reinterpret_cast<float *>(base);
  float *dpBuffer = reinterpret_cast<float *>(base + f32Bytes);
  void *pBuffer = dt == DType::F32 ? static_cast<void *>(scores)
                                   : static_cast<void *>(base + 2 * f32Bytes);
  void *dsBuffer = dt == DType::F32
                       ? static_cast<void *>(dpBuffer)
                       : static_cast<void *>(base + 2 * f32Bytes + lowBytes);
  const size_t elem = dtypeSize(dt);
  ChunkRowsArgs rows = {};
  rows.scores = scores;
  rows.dp = dpBuffer;
  rows.p = pBuffer;
  rows.ds = dsBuffer;
  rows.bias = bias ? bias->data : nullptr;
  rows.dbias = dbias ? static_cast<float *>(dbias->data) : nullptr;
  rows.queries = g.queries;
  rows.keys = g.keys;
  rows.valueSize = g.valueSize;
  rows.batchRank = g.batchRank;
  for (int i = 0; i < g.batchRank; ++i) {
    rows.batchShape[i] = g.batchShape[i];
    rows.biasStride[i] = g.biasStride[i];
  }
  rows.biasRowStride = g.biasRowStride;
  rows.biasColStride = g.biasColStride;
  rows.causal = params.causal;
  rows.hasBias = g.hasBias;
  rows.safeSoftmax = params.safeSoftmax;
  rows.dropout = dropoutArgsOf(params);

  MatmulParams qk;
  qk.alpha = params.scale;
  qk.transB = !params.keyTransposed;
  MatmulParams dyv;
  dyv.transB = true;
  MatmulParams pTdy;
  pTdy.transA = true;
  MatmulParams dsK;
  dsK.alpha = params.scale;
  dsK.transB = params.keyTransposed;
  MatmulParams keyGrad; // dS^T Q, or Q^T dS for K stored as [D, Sk]
  keyGrad.alpha = params.scale;
  keyGrad.transA = true;
  // TF32 programs (f32 operands) multiply in TF32 as their forward does.
  qk.allowTf32 = dyv.allowTf32 = pTdy.allowTf32 = dsK.allowTf32 =
      keyGrad.allowTf32 = params.allowTf32;
  for (int64_t first = 0; first < batch && !hasError(ctx); first += items) {
    int64_t n = std::min(items, batch - first);
    auto slice = [&](const TensorRef &t, int64_t r, int64_t c) {
      int64_t shape[3] = {n, r, c};
      return makeTensor(static_cast<uint8_t *>(t.data) +
                            size_t(first * r * c) * elem,
                        dt, 3, shape);
    };
    TensorRef qs = slice(q, g.queries, g.headSize);
    TensorRef ks = params.keyTransposed ? slice(k, g.headSize, g.keys)
                                        : slice(k, g.keys, g.headSize);
    TensorRef vs = slice(v, g.keys, g.valueSize);
    TensorRef ys = slice(y, g.queries, g.valueSize);
    TensorRef dys = slice(dy, g.queries, g.valueSize);
    TensorRef dqs = slice(dq, g.queries, g.headSize);
    TensorRef dks = params.keyTransposed ? slice(dk, g.headSize, g.keys)
                                         : slice(dk, g.keys, g.headSize);
    TensorRef dvs = slice(dv, g.keys, g.valueSize);
    int64_t scoreShape[3] = {n, g.queries, g.keys};
    TensorRef s = makeTensor(scores, DType::F32, 3, scoreShape);
    TensorRef dp = makeTensor(dpBuffer, DType::F32, 3, scoreShape);
    TensorRef p = makeTensor(pBuffer, dt, 3, scoreShape);
    TensorRef ds = makeTensor(dsBuffer, dt, 3, scoreShape);
    matmulWithWorkspace(ctx, node, qk, qs, ks, nullptr, s, nullptr, 0);
    matmulWithWorkspace(ctx, node, dyv, dys, vs, nullptr, dp, nullptr, 0);
    if (hasError(ctx))
      return true;
    rows.rows = n * g.queries;
    rows.firstBatch = first;
    rows.y = ys.data;
    rows.dy = dys.data;
    rows.lse = static_cast<const float *>(lse.data) + 2 * first * g.queries;
    unsigned blocks = unsigned((rows.rows + kChunkWarps - 1) / kChunkWarps);
    if (rows.dropout.ratio > 0.0f) {
      MEMOPT_DISPATCH_FLOAT(
          dt, T,
          (chunkScoreGradientKernel<T, true>
           <<<blocks, kChunkWarps * 32, 0, ctx.stream>>>(rows)));
    } else {
      MEMOPT_DISPATCH_FLOAT(
          dt, T,
          (chunkScoreGradientKernel<T, false>
           <<<blocks, kChunkWarps * 32, 0, ctx.stream>>>(rows)));
    }
    if (!checkLaunch(ctx, node))
      return true;
    matmulWithWorkspace(ctx, node, pTdy, p, dys, nullptr, dvs, nullptr, 0);
    matmulWithWorkspace(ctx, node, dsK, ds, ks, nullptr, dqs, nullptr, 0);
    if (params.keyTransposed)
      matmulWithWorkspace(ctx, node, keyGrad, qs, ds, nullptr, dks, nullptr, 0);
    else
      matmulWithWorkspace(ctx, node, keyGrad, ds, qs, nullptr, dks, nullptr, 0);
  }
  return true;
}

/// The two fused kernels for operands of type T (with or without dropout:
/// separate instantiations, the mask's registers only where it is drawn).
template <typename T, bool Dropout>
void launchFusedBackward(Context &ctx, const char *node, BackwardArgs args,
                         int64_t keyTiles, int64_t rowTiles, int64_t batch) {
  size_t bytes =
      fusedSharedFloats(args.headSize, args.valueSize) * sizeof(float);
  static size_t keysAllowed = 0, queriesAllowed = 0;
  if (!allowShared(ctx, node, attentionBackwardKeysKernel<T, Dropout>, bytes,
                   keysAllowed) ||
      !allowShared(ctx, node, attentionBackwardQueriesKernel<T, Dropout>, bytes,
                   queriesAllowed))
    return;
  if (keyTiles * batch > 0) {
    args.tiles = keyTiles;
    attentionBackwardKeysKernel<T, Dropout>
        <<<unsigned(keyTiles * (batch / args.group)), kThreads, bytes,
           ctx.stream>>>(args);
    if (!checkLaunch(ctx, node))
      return;
  }
  if (rowTiles * batch > 0) {
    args.tiles = rowTiles;
    attentionBackwardQueriesKernel<T, Dropout>
        <<<unsigned(rowTiles * batch), kThreads, bytes, ctx.stream>>>(args);
    checkLaunch(ctx, node);
  }
}

} // namespace

void attentionBackward(Context &ctx, const char *node,
                       const AttentionParams &params, TensorRef q, TensorRef k,
                       TensorRef v, const TensorRef *bias, TensorRef y,
                       TensorRef dy, TensorRef lse, TensorRef dq, TensorRef dk,
                       TensorRef dv, const TensorRef *dbias, void *workspace,
                       size_t workspaceBytes) {
  if (hasError(ctx))
    return;
  AttentionGeometry g;
  if (!validateAttentionBackward(ctx, node, params, q, k, v, bias, y, dy, lse,
                                 dq, dk, dv, dbias, g))
    return;
  if (cudnnAttentionBackward(ctx, node, params, g, q, k, v, bias, y, dy, lse,
                             dq, dk, dv, dbias, workspace, workspaceBytes))
    return;
  attentionBackwardKernels(ctx, node, params, g, q, k, v, bias, y, dy, lse, dq,
                           dk, dv, dbias, workspace, workspaceBytes);
}

void attentionBackwardKernels(Context &ctx, const char *node,
                              const AttentionParams &params,
                              const AttentionGeometry &g, const TensorRef &q,
                              const TensorRef &k, const TensorRef &v,
                              const TensorRef *bias, const TensorRef &y,
                              const TensorRef &dy, const TensorRef &lse,
                              const TensorRef &dq, const TensorRef &dk,
                              const TensorRef &dv, const TensorRef *dbias,
                              void *workspace, size_t workspaceBytes) {
  if (g.headSize > kMaxHeadSize || g.valueSize > kMaxHeadSize) {
    failf(ctx, node,
          "attention head sizes %lld (Q, K) and %lld (V) must be at most %d "
          "on the GPU",
          (long long)g.headSize, (long long)g.valueSize, kMaxHeadSize);
    return;
  }
  if (dbias && dbias->bytes() &&
      !checkCuda(ctx, node,
                 cudaMemsetAsync(dbias->data, 0, dbias->bytes(), ctx.stream),
                 "cudaMemsetAsync(dbias)"))
    return;
  if (attentionBackwardChunked(ctx, node, params, g, q, k, v, bias, y, dy, lse,
                               dq, dk, dv, dbias, workspace, workspaceBytes))
    return;
  BackwardArgs args = {};
  args.q = q.data;
  args.k = k.data;
  args.v = v.data;
  args.bias = bias ? bias->data : nullptr;
  args.y = y.data;
  args.dy = dy.data;
  args.lse = static_cast<const float *>(lse.data);
  args.dq = dq.data;
  args.dk = dk.data;
  args.dv = dv.data;
  args.dbias = dbias ? static_cast<float *>(dbias->data) : nullptr;
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
  args.group = params.groupedGradients ? g.group : 1;
  args.dropout = dropoutArgsOf(params);
  int64_t keyTiles = (g.keys + kKeys - 1) / kKeys;
  int64_t rowTiles = (g.queries + kRows - 1) / kRows;
  if (keyTiles * g.batch > int64_t(0x7fffffff) ||
      rowTiles * g.batch > int64_t(0x7fffffff)) {
    failf(ctx, node, "attention backward needs more blocks than a grid holds");
    return;
  }
  if (args.dropout.ratio > 0.0f) {
    MEMOPT_DISPATCH_FLOAT(q.dtype, T,
                          (launchFusedBackward<T, true>(
                              ctx, node, args, keyTiles, rowTiles, g.batch)));
  } else {
    MEMOPT_DISPATCH_FLOAT(q.dtype, T,
                          (launchFusedBackward<T, false>(
                              ctx, node, args, keyTiles, rowTiles, g.batch)));
  }
}

} // namespace memopt::rt
