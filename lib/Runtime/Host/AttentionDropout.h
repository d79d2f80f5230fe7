//===- AttentionDropout.h - the keep mask of attention dropout --*- C++ -*-===//
//
// The host's mask of a dropout fused into attention (AttentionParams'
// dropoutRatio, dropoutStream, dropoutKey): element (b, i, j) of the
// row-major [y's batch dims..., S, Sk] probabilities is kept unless its
// Philox word is below ratio * 2^32, exactly as dropout() draws it on the
// unfused graph's probabilities (lib/Runtime/Philox.h, the same DropoutKey
// and the same words), and a kept probability is multiplied by the f32
// 1 / (1 - ratio). The forward (Attention.cpp) and the backward
// (AttentionBackward.cpp) regenerate the same mask; nothing is stored.
//
// Taken from FlashAttention-2 and PyTorch's SDPA (flash and memory-efficient
// kernels take the CUDA generator's Philox (seed, offset), draw one number
// per score and regenerate the same numbers in the backward instead of
// saving a mask; the forward returns seed and offset for it) and the Triton
// flash-attention kernels (`dropout_offsets`: the counter is the offset plus
// the score's row-major index `row * stride + column`). Different: the
// counter is memopt.dropout's (element / 4, the op's stream, the
// micro-batch; word element % 4), so the fused and unfused programs drop the
// same elements, on either backend, and nothing is threaded from the
// forward to the backward but the key and the stream.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_HOST_ATTENTIONDROPOUT_H
#define MEMOPT_RUNTIME_HOST_ATTENTIONDROPOUT_H

#include "../Philox.h"
#include "memopt/Runtime/Runtime.h"

#include <cstdint>

namespace memopt::rt::host {

/// One thread's view of the mask: keeps the last four words it drew, so a
/// row walked in order costs one Philox block per four scores.
class AttentionDropoutMask {
public:
  explicit AttentionDropoutMask(const AttentionParams &params)
      : active(params.dropoutRatio > 0.0f && params.dropoutKey) {
    if (active) {
      key = makeDropoutKey(params.dropoutKey, params.dropoutStream,
                           params.dropoutRatio);
      scale = key.scale;
    }
  }

  bool enabled() const { return active; }

  /// The factor of score `index` (the row-major probability index): 0 when
  /// dropped, 1 / (1 - ratio) when kept, 1 without a dropout.
  double factor(uint64_t index) {
    if (!active)
      return 1.0;
    uint64_t group = index / 4;
    if (group != cachedGroup) {
      words = dropoutWords(key, group);
      cachedGroup = group;
    }
    return words.word[index % 4] < key.threshold ? 0.0 : scale;
  }

private:
  bool active;
  DropoutKey key{};
  double scale = 1.0;
  uint64_t cachedGroup = ~uint64_t(0);
  Philox4x32 words{};
};

} // namespace memopt::rt::host

#endif // MEMOPT_RUNTIME_HOST_ATTENTIONDROPOUT_H
