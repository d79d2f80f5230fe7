//===- Philox.h - counter-based random numbers for dropout ------*- C++ -*-===//
//
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11; the generator of cuRAND, PyTorch's CUDA generator and JAX's
// alternative PRNG): a keyed bijection of a 128-bit counter, so any element's
// random bits are computed from (key, counter) alone, in any order, on any
// device. One header for both backends: the host loops and the CUDA kernels
// compile the same integer arithmetic, so their masks are bit-identical.
//
// How memopt keys it (docs/training.md): key = the run's 64-bit seed;
// counter = (element / 4, dropout op's stream id, micro-batch number low and
// high words); word element % 4 of the result decides the element. Like
// PyTorch's (seed, offset) Philox state, but the offset is not a running
// total: every op has its own stream, so recomputing one dropout (remat) or
// running the backward's copy of it regenerates exactly its mask.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_PHILOX_H
#define MEMOPT_RUNTIME_PHILOX_H

#include "Internal.h"

#include <cstdint>

namespace memopt::rt {

struct Philox4x32 {
  uint32_t word[4];
};

MEMOPT_HOST_DEVICE inline void philoxMulHiLo(uint32_t a, uint32_t b,
                                             uint32_t &hi, uint32_t &lo) {
  uint64_t product = uint64_t(a) * uint64_t(b);
  hi = uint32_t(product >> 32);
  lo = uint32_t(product);
}

/// Philox4x32 with 10 rounds (Random123's philox4x32_10).
MEMOPT_HOST_DEVICE inline Philox4x32
philox4x32_10(Philox4x32 counter, uint32_t key0, uint32_t key1) {
  const uint32_t multiplier0 = 0xD2511F53u, multiplier1 = 0xCD9E8D57u;
  const uint32_t weyl0 = 0x9E3779B9u, weyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    philoxMulHiLo(multiplier0, counter.word[0], hi0, lo0);
    philoxMulHiLo(multiplier1, counter.word[2], hi1, lo1);
    counter = Philox4x32{
        {hi1 ^ counter.word[1] ^ key0, lo1, hi0 ^ counter.word[3] ^ key1, lo0}};
    key0 += weyl0;
    key1 += weyl1;
  }
  return counter;
}

/// The dropout parameters every backend derives the same way from the
/// op's ratio and the device-side key [seed, micro-batch].
struct DropoutKey {
  uint32_t seed0, seed1;   ///< Philox key
  uint32_t stream;         ///< the op's stream id
  uint32_t batch0, batch1; ///< micro-batch number (low, high words)
  uint32_t threshold;      ///< an element is dropped when its word < this
  float scale;             ///< 1 / (1 - ratio)
};

MEMOPT_HOST_DEVICE inline DropoutKey
makeDropoutKey(const int64_t *key, uint32_t stream, float ratio) {
  DropoutKey d;
  uint64_t seed = uint64_t(key[0]), batch = uint64_t(key[1]);
  d.seed0 = uint32_t(seed);
  d.seed1 = uint32_t(seed >> 32);
  d.stream = stream;
  d.batch0 = uint32_t(batch);
  d.batch1 = uint32_t(batch >> 32);
  // ratio in [0, 1): threshold = ratio * 2^32 in double arithmetic, exact
  // and the same on every device; P(word < threshold) = ratio up to 2^-32.
  d.threshold = uint32_t(double(ratio) * 4294967296.0);
  d.scale = 1.0f / (1.0f - ratio);
  return d;
}

/// The four random words of elements [4 * group, 4 * group + 4).
MEMOPT_HOST_DEVICE inline Philox4x32 dropoutWords(const DropoutKey &d,
                                                  uint64_t group) {
  Philox4x32 counter{
      {uint32_t(group), d.stream, d.batch0, d.batch1 ^ uint32_t(group >> 32)}};
  return philox4x32_10(counter, d.seed0, d.seed1);
}

/// A random word as a float in [0, 1): its top 24 bits times 2^-24 (every
/// value exact in f32).
MEMOPT_HOST_DEVICE inline float philoxUnitFloat(uint32_t word) {
  return float(word >> 8) * (1.0f / 16777216.0f);
}

} // namespace memopt::rt

#endif // MEMOPT_RUNTIME_PHILOX_H
