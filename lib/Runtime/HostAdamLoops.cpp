//===- HostAdamLoops.cpp - the element loops of the CPU optimizer ---------===//
//
// See HostAdam.h. The element loops of an offloaded update: the host
// backend's sgdUpdate / adamwUpdate (Host/TrainingKernels.cpp) with the
// gradient widened on load, the accumulation in f32 and the update in
// double, so that every stored value is rounded exactly where the reference
// rounds it; the step's decisions (micro-step gate, skipped step, bias
// correction) are made once per update (planHostUpdate), outside the loops.
//
// One pass over memory: the update loop widens the staged f16 / bf16
// gradient as it loads it (branch-free, no buffer), and a low (f16 / bf16)
// working copy is written right behind the update, 2048 elements (8 KiB of
// new masters) at a time, so the copy reads the master from L1 instead of
// re-streaming it from memory in a second pass over the chunk (that pass
// cost 12-24% of an AdamW update here, up to 75% of an SGD one). The copy is
// its own loop on the tile rather than a store in the update loop: one loop
// mixing double, f32 and 16-bit lanes vectorized worse (measured: up to 1.5x
// slower, SSE2 with an f16 copy, never faster; bench/host_update_bench.cpp).
// The last micro-step of an accumulation is tiled the same way: the tile's
// sums are added and then read by the update from L1.
// One instantiation per (rule, gradient type, loss scaling) keeps every loop
// free of branches for gcc's vectorizer.
//
// Like DeepSpeed's CPU Adam (csrc/includes/cpu_adam.h: AVX512 / AVX2 code
// paths chosen at build time), the loops are compiled for several ISAs and
// one is picked at run time (__builtin_cpu_supports): AVX-512, AVX2, and
// the x86-64 baseline (SSE2). The double square root and divisions of AdamW
// bound its speed, so 4 or 8 lanes instead of 2 is what pays. Where memopt
// differs: the arithmetic is the same correctly rounded IEEE operations in
// every lane width, and the file is compiled with -ffp-contract=off (AVX-512
// brings FMA, which would fuse the reference's separate roundings), so
// every ISA gives the host backend's bits (HostAdamTest runs with the widest
// the machine has, and again capped: ctest RuntimeHostAdamTests.isa_*).
// MEMOPT_OFFLOAD_ISA=avx2|sse2 caps the choice (tests, benchmarks).
//
//===----------------------------------------------------------------------===//

#include "HostAdam.h"
#include "Internal.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

namespace memopt::rt {

namespace {

/// Round-to-nearest-even of an f32 into bf16 bits, branch-free (a NaN
/// keeps its sign and top mantissa bits, made quiet).
inline uint16_t roundToBf16(uint32_t bits) {
  uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  uint32_t quiet = (bits >> 16) | 0x40u;
  uint32_t isNan = 0u - uint32_t((bits & 0x7fffffffu) > 0x7f800000u);
  return uint16_t((quiet & isNan) | (rounded & ~isNan));
}

/// Round-to-nearest-even of an f32 into f16 bits, branch-free (F. Giesen's
/// float_to_half_fast3_rtne): normal results by integer rounding of the
/// mantissa, subnormal ones by one f32 addition of a magic number (the FPU
/// rounds to nearest even), overflow to infinity, NaN to the quiet 0x7e00.
inline uint16_t roundToHalf(uint32_t bits) {
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t x = bits & 0x7fffffffu;
  // Normal: rebias, add half an ulp less one plus the odd bit, truncate.
  uint32_t normal = (x + 0xc8000fffu + ((x >> 13) & 1u)) >> 13;
  // Subnormal or zero: 0.5 with the exponent of 2^-14 * 2^10 added and
  // subtracted back in bits; the sum's low bits are the f16 mantissa.
  float magic, value;
  uint32_t magicBits = (127u - 15u + 23u - 10u + 1u) << 23;
  std::memcpy(&magic, &magicBits, 4);
  std::memcpy(&value, &x, 4);
  float sum = value + magic;
  uint32_t sumBits;
  std::memcpy(&sumBits, &sum, 4);
  uint32_t subnormal = sumBits - magicBits;
  uint32_t infinite = 0x7c00u | uint32_t(x > 0x7f800000u) << 9;
  // Masks, not branches, so that the loop over elements vectorizes.
  uint32_t isInfinite = 0u - uint32_t(x >= 0x47800000u);
  uint32_t isSubnormal = ~isInfinite & (0u - uint32_t(x < 0x38800000u));
  uint32_t isNormal = ~(isInfinite | isSubnormal);
  uint32_t result =
      (infinite & isInfinite) | (subnormal & isSubnormal) | (normal & isNormal);
  return uint16_t(result | sign);
}

/// f16 bits widened to f32, exactly as Internal.h's halfToFloat (NaN
/// payloads kept, subnormals normalized), branch-free (F. Giesen's
/// half_to_float): the exponent rebiased in bits, infinities and NaNs
/// rebiased once more, subnormals normalized by one exact f32 subtraction.
inline float widenHalf(uint16_t h) {
  const uint32_t shiftedExponent = 0x7c00u << 13;
  uint32_t bits = uint32_t(h & 0x7fffu) << 13;
  uint32_t exponent = bits & shiftedExponent;
  bits += (127u - 15u) << 23;
  uint32_t special = bits + ((128u - 16u) << 23);
  uint32_t magicBits = 113u << 23;
  float magic, low;
  std::memcpy(&magic, &magicBits, 4);
  uint32_t lowBits = bits + (1u << 23);
  std::memcpy(&low, &lowBits, 4);
  low -= magic;
  std::memcpy(&lowBits, &low, 4);
  uint32_t isSpecial = 0u - uint32_t(exponent == shiftedExponent);
  uint32_t isLow = 0u - uint32_t(exponent == 0);
  uint32_t isNormal = ~(isSpecial | isLow);
  uint32_t result = (special & isSpecial) | (lowBits & isLow) |
                    (bits & isNormal) | uint32_t(h & 0x8000u) << 16;
  float out;
  std::memcpy(&out, &result, 4);
  return out;
}

inline float widenBf16(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

enum class Rule { Sgd, SgdMomentum, AdamW };
/// The type of the gradient the loop reads (the accumulator is F32).
enum class Grad { F32, F16, BF16 };
/// What the loop writes into `param` besides the master.
enum class Copy { None, F32, F16, BF16 };
enum class Isa { Base, Avx2, Avx512 };

/// Everything one loop reads, hoisted out of the HostUpdate and the plan.
struct Loop {
  const void *grad;   ///< what the update reads (the accumulator if any)
  const void *staged; ///< what the accumulation adds (the staged gradient)
  float *master, *buffer, *m, *v, *sum;
  const float *source; ///< what the copy rounds (the new masters)
  void *param;
  double inverse, rate, momentum, weightDecay, decay, beta1, beta2, eps,
      stepSize, correction2;
};

template <Grad G> inline float loadGradient(const void *grad, int64_t i) {
  if constexpr (G == Grad::F32)
    return static_cast<const float *>(grad)[i];
  else if constexpr (G == Grad::F16)
    return widenHalf(static_cast<const uint16_t *>(grad)[i]);
  else
    return widenBf16(static_cast<const uint16_t *>(grad)[i]);
}

template <Copy C> inline void storeCopy(void *param, int64_t i, float value) {
  if constexpr (C == Copy::F32) {
    static_cast<float *>(param)[i] = value;
  } else if constexpr (C != Copy::None) {
    uint32_t bits;
    std::memcpy(&bits, &value, 4);
    static_cast<uint16_t *>(param)[i] =
        C == Copy::F16 ? roundToHalf(bits) : roundToBf16(bits);
  }
}

/// The update of [begin, end).
template <Rule R, Grad G, bool Scaled>
__attribute__((always_inline)) inline void
applyLoop(const Loop &l, int64_t begin, int64_t end) {
  const void *__restrict g = l.grad;
  float *__restrict p = l.master;
  const double inverse = l.inverse, rate = l.rate;
  // PyTorch's inv_scale (the reciprocal in double, rounded to f32), the
  // product rounded to f32 as the reference stores it.
  auto gradientAt = [&](int64_t i) {
    double value = double(loadGradient<G>(g, i));
    return Scaled ? double(float(value * inverse)) : value;
  };
  if constexpr (R == Rule::SgdMomentum) {
    float *__restrict buf = l.buffer;
    const double momentum = l.momentum, weightDecay = l.weightDecay;
    for (int64_t i = begin; i < end; ++i) {
      double d = gradientAt(i) + weightDecay * double(p[i]);
      float b = float(momentum * double(buf[i]) + d);
      buf[i] = b;
      float next = float(double(p[i]) - rate * double(b));
      p[i] = next;
    }
  } else if constexpr (R == Rule::Sgd) {
    const double weightDecay = l.weightDecay;
    for (int64_t i = begin; i < end; ++i) {
      double d = gradientAt(i) + weightDecay * double(p[i]);
      float next = float(double(p[i]) - rate * d);
      p[i] = next;
    }
  } else {
    float *__restrict m = l.m;
    float *__restrict v = l.v;
    const double decay = l.decay, beta1 = l.beta1, beta2 = l.beta2, eps = l.eps,
                 stepSize = l.stepSize, correction2 = l.correction2;
    for (int64_t i = begin; i < end; ++i) {
      double gi = gradientAt(i);
      double pi = double(p[i]) * decay;
      float mi = float(beta1 * double(m[i]) + (1 - beta1) * gi);
      float vi = float(beta2 * double(v[i]) + (1 - beta2) * gi * gi);
      m[i] = mi;
      v[i] = vi;
      double denom = std::sqrt(double(vi)) / correction2 + eps;
      float next = float(pi - stepSize * double(mi) / denom);
      p[i] = next;
    }
  }
}

/// f32 additions into the accumulator, as both backends' update kernels do
/// them (the first micro-step stores the gradient).
template <Grad G, bool First>
__attribute__((always_inline)) inline void
accumulateLoop(const Loop &l, int64_t begin, int64_t end) {
  const void *__restrict g = l.staged;
  float *__restrict sum = l.sum;
  for (int64_t i = begin; i < end; ++i) {
    float value = loadGradient<G>(g, i);
    sum[i] = First ? value : sum[i] + value;
  }
}

/// The copy of the new masters of [begin, end) into `param`.
template <Copy C>
__attribute__((always_inline)) inline void
copyLoop(const Loop &l, int64_t begin, int64_t end) {
  const float *__restrict p = l.source;
  void *__restrict out = l.param;
  for (int64_t i = begin; i < end; ++i)
    storeCopy<C>(out, i, p[i]);
}

using LoopFn = void (*)(const Loop &, int64_t, int64_t);

/// Elements per tile of an update with a copy or an accumulation.
constexpr int64_t kTile = 2048;

// One copy of every loop per ISA: the target attribute compiles the inlined
// body (and gcc's vectorization of it) for that instruction set.
#define MEMOPT_HOST_UPDATE_ISA(NAME, TARGET)                                   \
  template <Rule R, Grad G, bool Scaled>                                       \
  TARGET void apply##NAME(const Loop &l, int64_t begin, int64_t end) {         \
    applyLoop<R, G, Scaled>(l, begin, end);                                    \
  }                                                                            \
  template <Copy C>                                                            \
  TARGET void copy##NAME(const Loop &l, int64_t begin, int64_t end) {          \
    copyLoop<C>(l, begin, end);                                                \
  }                                                                            \
  template <Grad G, bool First>                                                \
  TARGET void accumulate##NAME(const Loop &l, int64_t begin, int64_t end) {    \
    accumulateLoop<G, First>(l, begin, end);                                   \
  }

MEMOPT_HOST_UPDATE_ISA(Base, )
#if defined(__x86_64__) && defined(__GNUC__)
MEMOPT_HOST_UPDATE_ISA(Avx2, __attribute__((target("avx2"))))
MEMOPT_HOST_UPDATE_ISA(Avx512,
                       __attribute__((target("avx512f,avx512bw,avx512vl"))))
#define MEMOPT_HOST_UPDATE_X86 1
#endif
#undef MEMOPT_HOST_UPDATE_ISA

/// The widest ISA this CPU has, capped by MEMOPT_OFFLOAD_ISA.
Isa detectIsa() {
#ifdef MEMOPT_HOST_UPDATE_X86
  __builtin_cpu_init();
  std::string cap;
  if (const char *env = std::getenv("MEMOPT_OFFLOAD_ISA"))
    cap = env;
  if (cap != "avx2" && cap != "sse2" && __builtin_cpu_supports("avx512f") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return Isa::Avx512;
  if (cap != "sse2" && __builtin_cpu_supports("avx2"))
    return Isa::Avx2;
#endif
  return Isa::Base;
}

Isa hostIsa() {
  static const Isa isa = detectIsa();
  return isa;
}

template <Rule R, Grad G, bool Scaled> LoopFn pickApply() {
#ifdef MEMOPT_HOST_UPDATE_X86
  switch (hostIsa()) {
  case Isa::Avx512:
    return &applyAvx512<R, G, Scaled>;
  case Isa::Avx2:
    return &applyAvx2<R, G, Scaled>;
  case Isa::Base:
    break;
  }
#endif
  return &applyBase<R, G, Scaled>;
}

template <Copy C> LoopFn pickCopy() {
#ifdef MEMOPT_HOST_UPDATE_X86
  switch (hostIsa()) {
  case Isa::Avx512:
    return &copyAvx512<C>;
  case Isa::Avx2:
    return &copyAvx2<C>;
  case Isa::Base:
    break;
  }
#endif
  return &copyBase<C>;
}

LoopFn pickCopy(Copy copy) {
  return copy == Copy::F16    ? pickCopy<Copy::F16>()
         : copy == Copy::BF16 ? pickCopy<Copy::BF16>()
                              : pickCopy<Copy::F32>();
}

template <Grad G, bool First> LoopFn pickAccumulate() {
#ifdef MEMOPT_HOST_UPDATE_X86
  switch (hostIsa()) {
  case Isa::Avx512:
    return &accumulateAvx512<G, First>;
  case Isa::Avx2:
    return &accumulateAvx2<G, First>;
  case Isa::Base:
    break;
  }
#endif
  return &accumulateBase<G, First>;
}

// The runtime choices peeled into template arguments one at a time.
template <Rule R, Grad G> LoopFn pickApply(bool scaled) {
  return scaled ? pickApply<R, G, true>() : pickApply<R, G, false>();
}
template <Rule R> LoopFn pickApply(Grad grad, bool scaled) {
  switch (grad) {
  case Grad::F32:
    return pickApply<R, Grad::F32>(scaled);
  case Grad::F16:
    return pickApply<R, Grad::F16>(scaled);
  case Grad::BF16:
    break;
  }
  return pickApply<R, Grad::BF16>(scaled);
}
LoopFn pickApply(Rule rule, Grad grad, bool scaled) {
  switch (rule) {
  case Rule::Sgd:
    return pickApply<Rule::Sgd>(grad, scaled);
  case Rule::SgdMomentum:
    return pickApply<Rule::SgdMomentum>(grad, scaled);
  case Rule::AdamW:
    break;
  }
  return pickApply<Rule::AdamW>(grad, scaled);
}
LoopFn pickAccumulate(Grad grad, bool first) {
  switch (grad) {
  case Grad::F32:
    return first ? pickAccumulate<Grad::F32, true>()
                 : pickAccumulate<Grad::F32, false>();
  case Grad::F16:
    return first ? pickAccumulate<Grad::F16, true>()
                 : pickAccumulate<Grad::F16, false>();
  case Grad::BF16:
    break;
  }
  return first ? pickAccumulate<Grad::BF16, true>()
               : pickAccumulate<Grad::BF16, false>();
}

Grad gradOf(DType type) {
  return type == DType::F16    ? Grad::F16
         : type == DType::BF16 ? Grad::BF16
                               : Grad::F32;
}

Copy copyOf(const HostUpdate &u) {
  if (!u.param)
    return Copy::None;
  return u.paramType == DType::F16    ? Copy::F16
         : u.paramType == DType::BF16 ? Copy::BF16
                                      : Copy::F32;
}

} // namespace

void roundMasterRange(const float *src, void *dst, DType type, int64_t begin,
                      int64_t end) {
  if (type == DType::F32) {
    std::memcpy(static_cast<float *>(dst) + begin, src + begin,
                size_t(end - begin) * 4);
    return;
  }
  Loop l{};
  l.source = src;
  l.param = dst;
  pickCopy(type == DType::F16 ? Copy::F16 : Copy::BF16)(l, begin, end);
}

void widenParameterRange(const void *src, DType type, float *dst, int64_t begin,
                         int64_t end) {
  if (type == DType::F32) {
    std::memcpy(dst + begin, static_cast<const float *>(src) + begin,
                size_t(end - begin) * 4);
    return;
  }
  const uint16_t *bits = static_cast<const uint16_t *>(src);
  for (int64_t i = begin; i < end; ++i)
    dst[i] = type == DType::F16 ? halfToFloat(bits[i]) : bf16ToFloat(bits[i]);
}

void runHostUpdateRange(const HostUpdate &u, const HostUpdatePlan &plan,
                        int64_t begin, int64_t end) {
  Loop l{};
  l.grad = u.grad;
  Grad grad = gradOf(u.gradType);
  LoopFn accumulate = nullptr;
  if (plan.accumulate) {
    l.staged = u.grad;
    l.sum = u.accumulator;
    accumulate = pickAccumulate(grad, plan.first);
    // The update then reads the accumulator.
    l.grad = u.accumulator;
    grad = Grad::F32;
  }
  if (!plan.apply) {
    if (accumulate)
      accumulate(l, begin, end);
    // A persistent copy that this run does not write: the master's
    // rounding.
    if (u.refreshParam && u.param)
      roundMasterRange(u.master, u.param, u.paramType, begin, end);
    return;
  }
  l.master = u.master;
  l.source = u.master;
  l.buffer = u.momentumBuffer;
  l.m = u.expAvg;
  l.v = u.expAvgSq;
  l.param = u.param;
  l.inverse = plan.inverseScale;
  l.rate = plan.rate;
  l.momentum = u.momentum;
  l.weightDecay = u.weightDecay;
  l.decay = 1 - plan.rate * u.weightDecay;
  l.beta1 = u.beta1;
  l.beta2 = u.beta2;
  l.eps = u.eps;
  l.stepSize = plan.stepSize;
  l.correction2 = plan.correction2;
  Rule rule = u.kind == HostUpdate::Kind::AdamW ? Rule::AdamW
              : u.momentum != 0.0f              ? Rule::SgdMomentum
                                                : Rule::Sgd;
  LoopFn apply = pickApply(rule, grad, plan.scaled);
  Copy copy = copyOf(u);
  LoopFn copyTile = copy == Copy::None ? nullptr : pickCopy(copy);
  if (!accumulate && !copyTile) {
    apply(l, begin, end);
    return;
  }
  // The last micro-step's accumulation, the update and the copy a tile at a
  // time: the tile's sums and new masters (8 KiB each) are still in L1 when
  // the next loop reads them.
  for (int64_t lo = begin; lo < end; lo += kTile) {
    int64_t hi = std::min(end, lo + kTile);
    if (accumulate)
      accumulate(l, lo, hi);
    apply(l, lo, hi);
    if (copyTile)
      copyTile(l, lo, hi);
  }
}

const char *getHostUpdateIsa() {
  switch (hostIsa()) {
  case Isa::Avx512:
    return "avx512";
  case Isa::Avx2:
    return "avx2";
  case Isa::Base:
    break;
  }
  return "baseline";
}

} // namespace memopt::rt
