//===- HostAdamTest.cpp - the CPU optimizer of --offload optimizer --------===//
//
// The offloaded update (lib/Runtime/HostAdam.h) against a scalar reference
// written here from PyTorch's formulas, and against the host backend's own
// sgdUpdate / adamwUpdate bit for bit (what makes an offloaded program give
// the plain one's numbers): f32, f16 and bf16 gradients, loss scaling (a
// clean and a skipped step), accumulation, several steps; the thread pool's
// coverage; the engine's order and errors; the host backend's offloaded
// calls end to end (staging, CPU update, master back in the parameter).
//
//===----------------------------------------------------------------------===//

#include "HostAdam.h"
#include "Internal.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace memopt::rt;

namespace {

TensorRef tensor(std::vector<float> &data) {
  int64_t shape[1] = {int64_t(data.size())};
  return makeTensor(data.data(), DType::F32, 1, shape);
}
TensorRef tensor16(std::vector<uint16_t> &data, DType dtype) {
  int64_t shape[1] = {int64_t(data.size())};
  return makeTensor(data.data(), dtype, 1, shape);
}
TensorRef scalar(float &value) {
  return makeTensor(&value, DType::F32, 0, nullptr);
}

std::vector<float> randomVector(size_t n, uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

/// torch.optim.AdamW's step for one element, in double, the stores rounded
/// to f32, with the hyperparameters as the f32 values the program stores
/// (the reference the offloaded kernel must meet within one f32 rounding).
void referenceAdamw(float &p, float &m, float &v, double g, double lr,
                    double beta1, double beta2, double eps, double decay,
                    double t) {
  double pi = double(p) * (1 - lr * decay);
  m = float(beta1 * m + (1 - beta1) * g);
  v = float(beta2 * v + (1 - beta2) * g * g);
  double mHat = double(m) / (1 - std::pow(beta1, t));
  double vHat = double(v) / (1 - std::pow(beta2, t));
  p = float(pi - lr * mHat / (std::sqrt(vHat) + eps));
}

HostUpdate adamwUpdateOf(std::vector<float> &p, std::vector<float> &m,
                         std::vector<float> &v, const void *grad, DType type,
                         const float *scalars) {
  HostUpdate u;
  u.kind = HostUpdate::Kind::AdamW;
  u.node = "fc.weight";
  u.beta1 = 0.9f;
  u.beta2 = 0.999f;
  u.eps = 1e-8f;
  u.weightDecay = 0.01f;
  u.master = p.data();
  u.expAvg = m.data();
  u.expAvgSq = v.data();
  u.grad = grad;
  u.gradType = type;
  u.elements = int64_t(p.size());
  u.scalars = scalars;
  return u;
}

TEST(HostAdamTest, AdamwMatchesScalarReference) {
  const size_t n = 1000;
  std::vector<float> p = randomVector(n, 1, 1.0f), m(n, 0.0f), v(n, 0.0f);
  std::vector<float> rp = p, rm = m, rv = v;
  HostUpdatePool pool(3);
  for (int step = 1; step <= 5; ++step) {
    std::vector<float> g = randomVector(n, 100 + step, 0.1f);
    float scalars[16] = {};
    scalars[kStagingLr] = 1e-3f;
    scalars[kStagingStep] = float(step);
    HostUpdate u = adamwUpdateOf(p, m, v, g.data(), DType::F32, scalars);
    ASSERT_EQ(runHostUpdate(u, pool), "");
    for (size_t i = 0; i < n; ++i)
      referenceAdamw(rp[i], rm[i], rv[i], g[i], double(1e-3f), double(0.9f),
                     double(0.999f), double(1e-8f), double(0.01f), step);
  }
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(m[i], rm[i]) << i;
    EXPECT_EQ(v[i], rv[i]) << i;
    // The reference divides by sqrt(1 - beta2^t) inside the square root;
    // the kernel (and the host backend) outside: one f32 rounding apart.
    EXPECT_NEAR(p[i], rp[i], 2e-7 * std::max(1.0f, std::fabs(rp[i]))) << i;
  }
}

/// The host backend's adamwUpdate / sgdUpdate and the offloaded update on
/// the same values: equal bit for bit over several steps.
struct PlainVersusOffloaded {
  Context *ctx = createContext();
  ~PlainVersusOffloaded() { destroyContext(ctx); }
};

TEST(HostAdamTest, AdamwEqualsHostBackendBitForBit) {
  PlainVersusOffloaded env;
  HostUpdatePool pool(4);
  for (DType type : {DType::F32, DType::F16, DType::BF16}) {
    const size_t n = 70001; // not a multiple of any chunk or vector width
    std::vector<float> p = randomVector(n, 7, 0.5f), m(n, 0.0f), v(n, 0.0f);
    std::vector<float> pp = p, pm = m, pv = v;
    for (int step = 1; step <= 3; ++step) {
      std::vector<float> g32 = randomVector(n, 200 + step, 0.05f);
      std::vector<uint16_t> g16(n);
      for (size_t i = 0; i < n; ++i)
        g16[i] = type == DType::F16 ? floatToHalf(g32[i]) : floatToBf16(g32[i]);
      TensorRef grad = type == DType::F32 ? tensor(g32) : tensor16(g16, type);
      float lr = 3e-3f, t = float(step);
      adamwUpdate(*env.ctx, "plain", 0.9f, 0.999f, 1e-8f, 0.01f, tensor(pp),
                  grad, tensor(pm), tensor(pv), scalar(lr), scalar(t));
      ASSERT_EQ(contextError(*env.ctx), nullptr);
      float scalars[16] = {};
      scalars[kStagingLr] = lr;
      scalars[kStagingStep] = t;
      HostUpdate u = adamwUpdateOf(p, m, v, grad.data, type, scalars);
      ASSERT_EQ(runHostUpdate(u, pool), "");
    }
    EXPECT_EQ(std::memcmp(p.data(), pp.data(), n * 4), 0) << dtypeName(type);
    EXPECT_EQ(std::memcmp(m.data(), pm.data(), n * 4), 0) << dtypeName(type);
    EXPECT_EQ(std::memcmp(v.data(), pv.data(), n * 4), 0) << dtypeName(type);
  }
}

TEST(HostAdamTest, ScaledAccumulatedSgdEqualsHostBackend) {
  PlainVersusOffloaded env;
  HostUpdatePool pool(2);
  const size_t n = 4099;
  const int64_t steps = 3;
  std::vector<float> p = randomVector(n, 3, 1.0f), buf(n, 0.0f), acc(n, 0.0f);
  std::vector<float> pp = p, pbuf = buf, pacc = acc;
  float scale = 1024.0f, state[2] = {0, 0};
  for (int micro = 0; micro < 2 * steps; ++micro) {
    float microStep = float(micro % steps), lr = 0.05f;
    // Micro-batch 4 overflows: the whole second step is skipped.
    float found = micro == 5 ? 1.0f : 0.0f;
    std::vector<uint16_t> g(n);
    std::vector<float> g32 = randomVector(n, 300 + micro, 50.0f);
    for (size_t i = 0; i < n; ++i)
      g[i] = floatToHalf(g32[i]);
    GradientAccumulation plainAcc{tensor(pacc), scalar(microStep), steps};
    int64_t stateShape[1] = {2};
    LossScaling scaling{scalar(scale), scalar(found),
                        makeTensor(state, DType::F32, 1, stateShape)};
    TensorRef bufRef = tensor(pbuf);
    sgdUpdate(*env.ctx, "plain", 0.9f, 1e-4f, tensor(pp),
              tensor16(g, DType::F16), &bufRef, scalar(lr), &plainAcc,
              &scaling);
    ASSERT_EQ(contextError(*env.ctx), nullptr);

    float scalars[16] = {};
    scalars[kStagingLr] = lr;
    scalars[kStagingMicroStep] = microStep;
    scalars[kStagingLossScale] = scale;
    scalars[kStagingFoundInf] = found;
    HostUpdate u;
    u.kind = HostUpdate::Kind::Sgd;
    u.node = "conv.weight";
    u.momentum = 0.9f;
    u.weightDecay = 1e-4f;
    u.master = p.data();
    u.momentumBuffer = buf.data();
    u.accumulator = acc.data();
    u.accumulationSteps = steps;
    u.scaled = true;
    u.grad = g.data();
    u.gradType = DType::F16;
    u.elements = int64_t(n);
    u.scalars = scalars;
    ASSERT_EQ(runHostUpdate(u, pool), "");
  }
  EXPECT_EQ(std::memcmp(p.data(), pp.data(), n * 4), 0);
  EXPECT_EQ(std::memcmp(buf.data(), pbuf.data(), n * 4), 0);
  EXPECT_EQ(std::memcmp(acc.data(), pacc.data(), n * 4), 0);
  // Not trivially equal: the first step moved the weights.
  EXPECT_NE(std::memcmp(p.data(), randomVector(n, 3, 1.0f).data(), n * 4), 0);
}

TEST(HostAdamTest, WidenedGradientIsTheBackendsWidening) {
  // Every f16 and bf16 bit pattern, staged as a gradient and accumulated on
  // a first micro-step (the accumulator receives the widened gradient):
  // the loops' branch-free widening must be Internal.h's halfToFloat /
  // bf16ToFloat bit for bit, NaN payloads and subnormals included.
  const size_t n = 65536;
  std::vector<uint16_t> grad(n);
  for (size_t i = 0; i < n; ++i)
    grad[i] = uint16_t(i);
  for (DType type : {DType::F16, DType::BF16}) {
    std::vector<float> master(n, 0.0f), m(n, 0.0f), v(n, 0.0f), sum(n, -1.0f);
    float scalars[16] = {};
    scalars[kStagingLr] = 0.1f;
    scalars[kStagingStep] = 1.0f;
    HostUpdate u = adamwUpdateOf(master, m, v, grad.data(), type, scalars);
    u.accumulator = sum.data();
    u.accumulationSteps = 2; // micro-step 0 of 2: accumulate only
    HostUpdatePool pool(2);
    ASSERT_EQ(runHostUpdate(u, pool), "");
    for (size_t i = 0; i < n; ++i) {
      float expected =
          type == DType::F16 ? halfToFloat(grad[i]) : bf16ToFloat(grad[i]);
      uint32_t got, want;
      std::memcpy(&got, &sum[i], 4);
      std::memcpy(&want, &expected, 4);
      ASSERT_EQ(got, want) << dtypeName(type) << " bits 0x" << std::hex << i;
    }
    EXPECT_EQ(master, std::vector<float>(n, 0.0f)); // not applied
  }
}

TEST(HostAdamTest, PoolCoversEveryElementOnce) {
  HostUpdatePool pool(5);
  for (int64_t n : {int64_t(1), int64_t(1000), int64_t(1 << 20) + 17}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallelFor(n, 64, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        hits[size_t(i)]++;
    });
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(hits[size_t(i)].load(), 1) << n << " " << i;
  }
}

TEST(HostAdamTest, EngineRunsInOrderAndReportsErrors) {
  OffloadEngine engine;
  const size_t n = 256;
  std::vector<float> p(n, 1.0f), m(n, 0.0f), v(n, 0.0f), g(n, 0.5f);
  float good[16] = {}, bad[16] = {};
  good[kStagingLr] = 0.1f;
  good[kStagingStep] = 1.0f;
  bad[kStagingLr] = 0.1f; // step 0: not a 1-based step number
  uint64_t first =
      engine.submit(adamwUpdateOf(p, m, v, g.data(), DType::F32, good));
  uint64_t second =
      engine.submit(adamwUpdateOf(p, m, v, g.data(), DType::F32, bad));
  EXPECT_LT(first, second);
  engine.waitFor(second);
  EXPECT_NE(p[0], 1.0f); // the first update ran
  std::string node;
  std::string error = engine.takeError(node);
  EXPECT_EQ(node, "fc.weight");
  EXPECT_NE(error.find("not a 1-based step number"), std::string::npos)
      << error;
  EXPECT_EQ(engine.takeError(node), "");
}

TEST(HostAdamTest, EngineMeasuresStreamedBytes) {
  // AdamW in place (master = param): gradient, master and two moments, 4
  // bytes each, per element; a bf16 gradient streams 2 bytes.
  const size_t n = 1024;
  std::vector<float> p(n, 1.0f), m(n, 0.0f), v(n, 0.0f), g(n, 0.5f);
  float scalars[16] = {};
  scalars[kStagingLr] = 0.1f;
  scalars[kStagingStep] = 1.0f;
  HostUpdate update = adamwUpdateOf(p, m, v, g.data(), DType::F32, scalars);
  HostUpdatePlan plan;
  ASSERT_EQ(planHostUpdate(update, plan), "");
  EXPECT_EQ(getHostUpdateStreamedBytes(update, plan), int64_t(16 * n));
  update.gradType = DType::BF16;
  EXPECT_EQ(getHostUpdateStreamedBytes(update, plan), int64_t(14 * n));
  update.gradType = DType::F32;

  OffloadEngine engine;
  EXPECT_EQ(engine.measuredSecondsPerGiB(), 0.0); // nothing streamed yet
  OpTimes empty;
  appendHostUpdateTime(&engine, empty);
  EXPECT_TRUE(empty.ops.empty());
  engine.waitFor(engine.submit(update));
  double seconds = engine.measuredSecondsPerGiB();
  EXPECT_GT(seconds, 0.0);
  OpTimes times;
  times.runs = 3;
  appendHostUpdateTime(&engine, times);
  ASSERT_EQ(times.ops.size(), 1u);
  EXPECT_EQ(times.ops[0].node, "<host update 1 GiB>");
  EXPECT_DOUBLE_EQ(times.ops[0].ms, seconds * 1000.0 * 3);
}

TEST(HostAdamTest, HostBackendOffloadedCallWritesTheParameter) {
  Context *ctx = createContext();
  const size_t n = 3000;
  std::vector<float> param = randomVector(n, 9, 1.0f), master = param,
                     m(n, 0.0f), v(n, 0.0f), plain = param, pm = m, pv = v;
  std::vector<float> grad = randomVector(n, 10, 0.1f);
  std::vector<uint8_t> region(size_t(kHostStagingScalarBytes) + n * 4 + 256);
  setHostState(*ctx, region.data(), region.size());
  ASSERT_EQ(hostState(*ctx), region.data());
  float lr = 1e-2f, step = 1.0f;
  offloadAdamwUpdate(*ctx, "w", 0, region.data(), 0.9f, 0.999f, 1e-8f, 0.01f,
                     tensor(param), tensor(grad), tensor(master), tensor(m),
                     tensor(v), scalar(lr), scalar(step));
  // The gradient's arena bytes may be reused right away: it was staged.
  std::fill(grad.begin(), grad.end(), 1e9f);
  offloadFinish(*ctx);
  ASSERT_EQ(contextError(*ctx), nullptr);
  std::vector<float> g = randomVector(n, 10, 0.1f);
  adamwUpdate(*ctx, "plain", 0.9f, 0.999f, 1e-8f, 0.01f, tensor(plain),
              tensor(g), tensor(pm), tensor(pv), scalar(lr), scalar(step));
  EXPECT_EQ(std::memcmp(param.data(), plain.data(), n * 4), 0);
  EXPECT_EQ(std::memcmp(master.data(), plain.data(), n * 4), 0);
  // A master of another shape is refused, naming the node.
  std::vector<float> small(10, 0.0f);
  offloadAdamwUpdate(*ctx, "w2", 1, region.data(), 0.9f, 0.999f, 1e-8f, 0.01f,
                     tensor(param), tensor(grad), tensor(small), tensor(m),
                     tensor(v), scalar(lr), scalar(step));
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx)).find("w2"), std::string::npos);
  destroyContext(ctx);
}

/// f32 values at the edges of f16's and bf16's rounding.
std::vector<float> roundingEdgeCases() {
  auto fromBits = [](uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  };
  std::vector<float> values = {
      0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.996f, 65520.0f, -65520.0f,
      1e30f, 3.4e38f, -3.4e38f, std::ldexp(1.0f, -24), std::ldexp(1.0f, -25),
      // Ties at f16's smallest subnormal: 2^-25 rounds to 0, 3 * 2^-25 to
      // 2^-23 (even), just above 2^-25 to 2^-24.
      std::ldexp(3.0f, -25), std::nextafter(std::ldexp(1.0f, -25), 1.0f),
      std::ldexp(1.0f, -14), std::ldexp(1023.0f, -24), std::ldexp(2047.0f, -25),
      // Ties between normal f16 values (1 + 2^-11 and 1 + 3 * 2^-11) and
      // bf16 ones (1 + 2^-8, 1 + 3 * 2^-8).
      1.0f + std::ldexp(1.0f, -11), 1.0f + std::ldexp(3.0f, -11),
      1.0f + std::ldexp(1.0f, -8), 1.0f + std::ldexp(3.0f, -8),
      -(1.0f + std::ldexp(3.0f, -8)), std::numeric_limits<float>::infinity(),
      -std::numeric_limits<float>::infinity(),
      std::numeric_limits<float>::quiet_NaN(), fromBits(0xffc00001u),
      fromBits(0x7f800001u), // a signalling NaN: made quiet
      fromBits(0x7f7fffffu), fromBits(0x7f7f8000u), fromBits(0x00000001u),
      fromBits(0x80400000u), fromBits(0x00800000u), fromBits(0x007fffffu)};
  // And a sweep over the bit patterns (every 65,521st, both signs).
  for (uint64_t bits = 0; bits < (uint64_t(1) << 32); bits += 65521)
    values.push_back(fromBits(uint32_t(bits)));
  return values;
}

TEST(HostAdamTest, RoundingEqualsTheBackendsCast) {
  // What the CPU writes into a low working parameter must be what the
  // device's cast of the master computes: the host backend's cast kernel
  // (the reference the CUDA kernel suite checks __float2half_rn /
  // __float2bfloat16_rn against).
  Context *ctx = createContext();
  std::vector<float> values = roundingEdgeCases();
  const size_t n = values.size();
  for (DType type : {DType::F16, DType::BF16}) {
    std::vector<uint16_t> rounded(n), cast16(n);
    roundMasterRange(values.data(), rounded.data(), type, 0, int64_t(n));
    memopt::rt::cast(*ctx, "cast", tensor(values), tensor16(cast16, type));
    ASSERT_EQ(contextError(*ctx), nullptr);
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(rounded[i], cast16[i])
          << dtypeName(type) << " of " << values[i] << " (element " << i << ")";
    // Widening the rounding and rounding again changes nothing (what a
    // load from a parameter, not a master, relies on).
    std::vector<float> widened(n);
    std::vector<uint16_t> again(n);
    widenParameterRange(rounded.data(), type, widened.data(), 0, int64_t(n));
    roundMasterRange(widened.data(), again.data(), type, 0, int64_t(n));
    for (size_t i = 0; i < n; ++i) {
      if (!std::isnan(widened[i])) {
        ASSERT_EQ(again[i], rounded[i]) << dtypeName(type) << " " << i;
      }
    }
  }
  // Spot checks by value: ties to even, overflow, subnormals, NaN.
  auto half = [](float value) {
    uint16_t out;
    roundMasterRange(&value, &out, DType::F16, 0, 1);
    return out;
  };
  auto bf16 = [](float value) {
    uint16_t out;
    roundMasterRange(&value, &out, DType::BF16, 0, 1);
    return out;
  };
  EXPECT_EQ(half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(half(1.0f + std::ldexp(3.0f, -11)), 0x3c02);
  EXPECT_EQ(half(65520.0f), 0x7c00);
  EXPECT_EQ(half(65519.996f), 0x7bff);
  EXPECT_EQ(half(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(half(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_EQ(half(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(half(std::numeric_limits<float>::quiet_NaN()) & 0x7e00, 0x7e00);
  EXPECT_EQ(bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(bf16(1.0f + std::ldexp(3.0f, -8)), 0x3f82);
  EXPECT_EQ(bf16(3.4e38f), 0x7f80);
  EXPECT_EQ(bf16(-std::numeric_limits<float>::quiet_NaN()) & 0xffc0, 0xffc0);
  destroyContext(ctx);
}

TEST(HostAdamTest, LowWorkingParameterIsTheMastersRounding) {
  // The host backend's offloaded AdamW with a bf16 / f16 device parameter:
  // the master is the plain f32 step's, the parameter its rounding.
  Context *ctx = createContext();
  const size_t n = 5000;
  for (DType type : {DType::BF16, DType::F16}) {
    std::vector<float> master = randomVector(n, 21, 1.0f), m(n, 0.0f),
                       v(n, 0.0f), plain = master, pm = m, pv = v;
    std::vector<uint16_t> param(n, 0), expected(n);
    std::vector<float> grad = randomVector(n, 22, 0.1f);
    std::vector<uint8_t> region(size_t(kHostStagingScalarBytes) + n * 4 + 256);
    setHostState(*ctx, region.data(), region.size());
    float lr = 1e-2f, step = 1.0f;
    offloadAdamwUpdate(*ctx, "w", 0, region.data(), 0.9f, 0.999f, 1e-8f, 0.01f,
                       tensor16(param, type), tensor(grad), tensor(master),
                       tensor(m), tensor(v), scalar(lr), scalar(step));
    offloadFinish(*ctx);
    ASSERT_EQ(contextError(*ctx), nullptr);
    adamwUpdate(*ctx, "plain", 0.9f, 0.999f, 1e-8f, 0.01f, tensor(plain),
                tensor(grad), tensor(pm), tensor(pv), scalar(lr), scalar(step));
    EXPECT_EQ(std::memcmp(master.data(), plain.data(), n * 4), 0);
    memopt::rt::cast(*ctx, "cast", tensor(plain), tensor16(expected, type));
    EXPECT_EQ(param, expected) << dtypeName(type);
  }
  destroyContext(ctx);
}

TEST(HostAdamTest, PersistentLowCopyIsRoundedOnItsFirstRun) {
  // CUDA's copy back reads a low parameter's copy on every run, also on a
  // micro-step that only accumulates: the engine has the CPU round the
  // master into it on the first run after invalidateParams, and not again
  // until the update applies.
  const size_t n = 100;
  std::vector<float> master = randomVector(n, 31, 1.0f), acc(n, 0.0f),
                     grad = randomVector(n, 32, 0.1f), m(n, 0.0f), v(n, 0.0f);
  std::vector<uint16_t> copy(n, 0), expected(n);
  roundMasterRange(master.data(), expected.data(), DType::BF16, 0, int64_t(n));
  float scalars[16] = {};
  scalars[kStagingLr] = 0.01f;
  scalars[kStagingStep] = 1.0f;
  scalars[kStagingMicroStep] = 0.0f; // accumulates only (of 2)
  HostUpdate update;
  update.kind = HostUpdate::Kind::AdamW;
  update.master = master.data();
  update.expAvg = m.data();
  update.expAvgSq = v.data();
  update.accumulator = acc.data();
  update.accumulationSteps = 2;
  update.grad = grad.data();
  update.elements = int64_t(n);
  update.scalars = scalars;
  update.param = copy.data();
  update.paramType = DType::BF16;
  update.paramPersists = true;
  OffloadEngine engine;
  engine.waitFor(engine.submit(update));
  EXPECT_EQ(copy, expected);
  std::fill(copy.begin(), copy.end(), uint16_t(0));
  engine.waitFor(engine.submit(update)); // fresh: not written again
  EXPECT_EQ(copy, std::vector<uint16_t>(n, 0));
  engine.invalidateParams();
  engine.waitFor(engine.submit(update));
  EXPECT_EQ(copy, expected);
  std::string node;
  EXPECT_EQ(engine.takeError(node), "");
}

} // namespace
