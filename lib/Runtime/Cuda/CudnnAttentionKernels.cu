//===- CudnnAttentionKernels.cu - kernels around cuDNN's fused attention --===//
//
// The small kernels the cuDNN SDPA path (CudnnAttention.cpp) runs around its
// calls, where memopt's conventions and cuDNN's differ:
//  * row statistics: cuDNN keeps one log-sum-exp per query row, memopt's
//    attention a pair per row whose sum is the log-sum-exp (its kernels store
//    maximum and log-sum); converted both ways, so that a forward on one
//    engine feeds a backward on the other;
//  * K stored [D, Sk] (the exporters' K^T): cuDNN reads K with the head
//    dimension innermost, so K is transposed into scratch first (and dK back);
//  * dropout drawn by cuDNN's generator: its seed and offset are device
//    scalars, derived here from the program's key so that a captured graph
//    replays each micro-batch's own mask.
// The transpose is the classic tiled one (32 x 32 tiles through shared
// memory with a padded row, coalesced on both sides).
//
//===----------------------------------------------------------------------===//

#include "CudaDevice.cuh"

namespace memopt::rt {

namespace {

__global__ void statisticsToPairsKernel(const float *statistics, float *pairs,
                                        int64_t rows) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows;
       i += int64_t(gridDim.x) * blockDim.x) {
    float logSumExp = statistics[i];
    // A fully masked row: memopt's kernels store (-inf, -inf).
    bool masked = logSumExp == -INFINITY;
    pairs[2 * i] = logSumExp;
    pairs[2 * i + 1] = masked ? -INFINITY : 0.0f;
  }
}

__global__ void pairsToStatisticsKernel(const float *pairs, float *statistics,
                                        int64_t rows) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows;
       i += int64_t(gridDim.x) * blockDim.x)
    statistics[i] = pairs[2 * i] + pairs[2 * i + 1];
}

/// SplitMix64's finalizer (Steele et al., "Fast splittable pseudorandom
/// number generators", OOPSLA'14): a bijection that spreads every input bit.
__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// cuDNN's Philox seed: the program's seed mixed with the op's stream and
/// the micro-batch (every (stream, micro-batch) its own key, as memopt's own
/// mask keys its counter with both); the offset is the micro-batch number.
__global__ void cudnnDropoutSeedKernel(const int64_t *key, uint32_t stream,
                                       int64_t *seedOffset) {
  const uint64_t seed = uint64_t(key[0]), batch = uint64_t(key[1]);
  uint64_t mixed = mix64(seed + 0x9E3779B97F4A7C15ull * (uint64_t(stream) + 1));
  mixed = mix64(mixed ^ (batch * 0xD1B54A32D192ED03ull));
  seedOffset[0] = int64_t(mixed);
  seedOffset[1] = int64_t(batch);
}

constexpr int kTile = 32;
constexpr int kTileRows = 8;

__global__ void __launch_bounds__(kTile *kTileRows)
    transposeMatricesKernel(const uint16_t *x, uint16_t *y, int64_t batch,
                            int64_t rows, int64_t cols) {
  __shared__ uint16_t tile[kTile][kTile + 1];
  const int64_t rowTile = int64_t(blockIdx.y) * kTile;
  const int64_t colTile = int64_t(blockIdx.x) * kTile;
  for (int64_t b = blockIdx.z; b < batch; b += gridDim.z) {
    const uint16_t *src = x + b * rows * cols;
    uint16_t *dst = y + b * rows * cols;
    for (int r = threadIdx.y; r < kTile; r += kTileRows) {
      int64_t row = rowTile + r, col = colTile + threadIdx.x;
      if (row < rows && col < cols)
        tile[r][threadIdx.x] = src[row * cols + col];
    }
    __syncthreads();
    for (int r = threadIdx.y; r < kTile; r += kTileRows) {
      int64_t col = colTile + r, row = rowTile + threadIdx.x;
      if (row < rows && col < cols)
        dst[col * rows + row] = tile[threadIdx.x][r];
    }
    __syncthreads();
  }
}

} // namespace

bool launchStatisticsToPairs(Context &ctx, const char *node,
                             const float *statistics, float *pairs,
                             int64_t rows) {
  statisticsToPairsKernel<<<gridFor(ctx, rows), 256, 0, ctx.stream>>>(
      statistics, pairs, rows);
  return checkLaunch(ctx, node);
}

bool launchPairsToStatistics(Context &ctx, const char *node, const float *pairs,
                             float *statistics, int64_t rows) {
  pairsToStatisticsKernel<<<gridFor(ctx, rows), 256, 0, ctx.stream>>>(
      pairs, statistics, rows);
  return checkLaunch(ctx, node);
}

bool launchCudnnDropoutSeed(Context &ctx, const char *node, const int64_t *key,
                            uint32_t stream, int64_t *seedOffset) {
  cudnnDropoutSeedKernel<<<1, 1, 0, ctx.stream>>>(key, stream, seedOffset);
  return checkLaunch(ctx, node);
}

bool launchTransposeMatrices16(Context &ctx, const char *node, const void *x,
                               void *y, int64_t batch, int64_t rows,
                               int64_t cols) {
  if (batch == 0 || rows == 0 || cols == 0)
    return true;
  int64_t colTiles = (cols + kTile - 1) / kTile;
  int64_t rowTiles = (rows + kTile - 1) / kTile;
  if (rowTiles > 65535) {
    failf(ctx, node, "transpose of %lld rows exceeds the grid",
          (long long)rows);
    return false;
  }
  dim3 grid(unsigned(colTiles), unsigned(rowTiles),
            unsigned(std::min<int64_t>(batch, 65535)));
  transposeMatricesKernel<<<grid, dim3(kTile, kTileRows), 0, ctx.stream>>>(
      static_cast<const uint16_t *>(x), static_cast<uint16_t *>(y), batch, rows,
      cols);
  return checkLaunch(ctx, node);
}

} // namespace memopt::rt
