//===- AttentionDropout.cuh - dropout masks inside attention kernels -*- CUDA
//-*-===//
//
// The keep bits of memopt's dropout mask (lib/Runtime/Philox.h: element e of
// the row-major [y's batch dims..., S, Sk] probabilities is kept unless word
// e % 4 of Philox(counter e / 4) is below the threshold) for the tiles that
// memopt's attention kernels hold, computed in registers where the
// probabilities are formed, so neither the mask nor the probabilities reach
// memory. The mask is the unfused dropout op's bit for bit: the host
// backend and the dropout kernel (TrainingKernels.cu) draw the same words.
//
// Taken from: FlashAttention-2's Dropout (csrc/flash_attn/src/dropout.h:
// one Philox call per tile fragment that a thread owns, counters from the
// fragment's (row, column) coordinates, the keep test fused into the
// softmax tile so the mask never leaves registers). Different: the counter
// is the element's index in the whole probability tensor (not a (row,
// column-block) pair tied to the MMA layout), so every kernel, tile shape
// and chunking of memopt's (fused, chunked, forward, backward) and the host
// draws the same mask; one call gives four elements (FlashAttention-2 takes
// 16 8-bit draws from one call), and the 32 lanes of a warp share calls
// through shuffles where their tiles are strided.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_RUNTIME_CUDA_ATTENTIONDROPOUT_CUH
#define MEMOPT_LIB_RUNTIME_CUDA_ATTENTIONDROPOUT_CUH

#include "../Philox.h"
#include "CudaDevice.cuh"

namespace memopt::rt {

/// The dropout of one attention call, by value in the kernels' arguments.
struct AttentionDropoutArgs {
  const int64_t *key = nullptr; ///< device I64 [2]: [seed, micro-batch]
  uint32_t stream = 0;
  float ratio = 0.0f; ///< 0: no dropout (key may be null)
};

/// The kernels' view of AttentionParams' dropout (none when the ratio is 0).
inline AttentionDropoutArgs dropoutArgsOf(const AttentionParams &params) {
  AttentionDropoutArgs a;
  if (params.dropoutRatio > 0.0f) {
    a.key = params.dropoutKey;
    a.stream = params.dropoutStream;
    a.ratio = params.dropoutRatio;
  }
  return a;
}

/// The key of a kernel instantiated with or without dropout: without it the
/// identity (scale 1, constant), so the kernels keep their registers.
template <bool Dropout>
__device__ __forceinline__ DropoutKey
attentionDropoutKeyIf(const AttentionDropoutArgs &a) {
  if constexpr (Dropout) {
    return makeDropoutKey(a.key, a.stream, a.ratio);
  } else {
    DropoutKey d = {};
    d.scale = 1.0f;
    return d;
  }
}

/// Keep bits of the four elements of group `group` (bit w: element
/// 4 group + w).
__device__ __forceinline__ uint32_t keepNibble(const DropoutKey &d,
                                               uint64_t group) {
  Philox4x32 w = dropoutWords(d, group);
  return uint32_t(w.word[0] >= d.threshold) |
         uint32_t(w.word[1] >= d.threshold) << 1 |
         uint32_t(w.word[2] >= d.threshold) << 2 |
         uint32_t(w.word[3] >= d.threshold) << 3;
}

/// One thread's keep bits of 32 consecutive elements [first, first + 32):
/// bit c for element first + c. Eight Philox calls, nine when `first` is not
/// a multiple of 4.
__device__ __forceinline__ uint32_t keepBits32(const DropoutKey &d,
                                               uint64_t first) {
  const uint64_t group0 = first / 4;
  const int skew = int(first % 4);
  uint64_t bits = 0;
#pragma unroll
  for (int i = 0; i < 9; ++i)
    if (i < 8 || skew)
      bits |= uint64_t(keepNibble(d, group0 + i)) << (4 * i);
  return uint32_t(bits >> skew);
}

/// Keep bits of an 8-row x 32-key tile, lane j holding key j of each row:
/// bit r of the result is element rowFirst + r * rowPitch + lane. Rows of 32
/// elements span nine Philox groups; 27 lanes draw the groups of three rows
/// at a time (three calls per lane for the tile instead of eight), and each
/// lane takes its bits from the drawing lanes by shuffle. Every lane of the
/// warp must call it.
__device__ __forceinline__ uint32_t tileKeepBits8x32(const DropoutKey &d,
                                                     uint64_t rowFirst,
                                                     uint64_t rowPitch) {
  const int lane = threadIdx.x & 31;
  const int drawRow = lane / 9, drawGroup = lane % 9;
  uint32_t bits = 0;
#pragma unroll
  for (int round = 0; round < 3; ++round) {
    uint32_t nibble = 0;
    const int r = 3 * round + drawRow;
    if (drawRow < 3 && r < 8)
      nibble = keepNibble(d, (rowFirst + uint64_t(r) * rowPitch) / 4 +
                                 uint64_t(drawGroup));
#pragma unroll
    for (int m = 0; m < 3; ++m) {
      const int row = 3 * round + m;
      if (row < 8) {
        const uint64_t first = rowFirst + uint64_t(row) * rowPitch;
        const int at = int(first % 4) + lane; // 0..34 from the row's group
        const uint32_t got =
            __shfl_sync(0xffffffffu, nibble, 9 * m + (at >> 2));
        bits |= ((got >> (at & 3)) & 1u) << row;
      }
    }
  }
  return bits;
}

/// A warp's keep bits of 128 consecutive elements from `first` (plus up to
/// three more, for an unaligned start): lane l holds the nibble of group
/// first / 4 + l, and `extra` the 33rd group's. Every lane must construct
/// it and call keep().
struct WarpKeepWindow {
  uint64_t group0;
  uint32_t nibble, extra;

  __device__ __forceinline__ WarpKeepWindow(const DropoutKey &d,
                                            uint64_t first) {
    const int lane = threadIdx.x & 31;
    group0 = first / 4;
    nibble = keepNibble(d, group0 + uint64_t(lane));
    extra = first % 4 ? keepNibble(d, group0 + 32) : 0u; // warp-uniform
  }
  /// Whether element `e` (in [4 group0, 4 group0 + 132)) is kept.
  __device__ __forceinline__ bool keep(uint64_t e) const {
    const int at = int(e - 4 * group0);
    const uint32_t got = __shfl_sync(0xffffffffu, nibble, (at >> 2) & 31);
    return ((at >> 2) == 32 ? extra : got) >> (at & 3) & 1u;
  }
};

} // namespace memopt::rt

#endif // MEMOPT_LIB_RUNTIME_CUDA_ATTENTIONDROPOUT_CUH
