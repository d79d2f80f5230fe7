//===- KernelSuite.cpp - every kernel family on fixed inputs --------------===//
//
// Built twice, once per backend (memopt-kernel-suite-host / -cuda). Each case
// builds deterministic never-zero inputs in device memory through the runtime
// API, runs one op, and reads the result back.
//
//   memopt-kernel-suite-cuda --out DIR      writes DIR/<case>.npy (float64)
//   memopt-kernel-suite-host --compare DIR  reruns on the host and compares
//   memopt-kernel-suite-cuda --perf [FILTER] times the large cases
//
// so the CUDA backend is checked against the host reference without linking
// both backends into one program (they define the same symbols). Sizes are
// odd and large enough to hit the vectorized paths, their scalar tails,
// multi-block grids and the warp / block row kernels.
//
// The cases are in one file per op family (KernelSuite.h lists them); this
// file puts them in order, runs them and compares.
//
//===----------------------------------------------------------------------===//

#include "KernelSuite.h"
#include "memopt/Runtime/Npy.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace memopt::rt;
using namespace memopt::rt::suite;

namespace {

std::vector<Case> buildCases() {
  std::vector<Case> cases;
  addElementwiseCases(cases);
  addMatmulCases(cases);
  addConvCases(cases);
  addDepthwiseCases(cases);
  addNormConvFusionCases(cases);
  addPoolCases(cases);
  addTrainingCases(cases);
  addChannelsLastTrainingCases(cases);
  addNormConvCases(cases);
  addAttentionCases(cases);
  addAttentionDropoutCases(cases);
  addNormCases(cases);
  addDataMovementCases(cases);
  return cases;
}

/// Runs a small program three times through execute() (CUDA: eager, graph
/// capture, replay) with new input data each time.
std::vector<double> graphReplay(Suite &s) {
  struct State {
    TensorRef x, b, sum, y;
  } st;
  st.x = s.random(DType::F32, {64, 300});
  st.b = s.random(DType::F32, {300});
  st.sum = s.empty(DType::F32, {64, 300});
  st.y = s.empty(DType::F32, {64, 300});
  std::vector<double> all;
  for (int run = 0; run < 3; ++run) {
    std::vector<uint8_t> data(st.x.bytes());
    for (size_t i = 0; i < data.size() / 4; ++i) {
      float v = float(std::sin(double(i) * 0.01 + run) + 0.05);
      std::memcpy(data.data() + i * 4, &v, 4);
    }
    copyToDevice(*s.ctx, st.x.data, data.data(), data.size());
    execute(
        *s.ctx,
        [](Context &ctx, void *user) {
          State &st = *static_cast<State *>(user);
          binary(ctx, "add", BinaryOp::Add, st.x, st.b, st.sum);
          softmax(ctx, "softmax", 1, false, st.sum, st.y);
        },
        &st);
    std::vector<double> y = s.read(st.y);
    all.insert(all.end(), y.begin(), y.end());
  }
  return all;
}

} // namespace

int main(int argc, char **argv) {
  std::string mode = argc >= 2 ? argv[1] : "";
  if (mode == "--perf") {
    // The attention cases time exactly the chunk counts they name, on
    // memopt's kernels (MEMOPT_ATTENTION_ENGINE=cudnn times cuDNN's instead;
    // bench/attention_sdpa_bench.py compares the engines).
    ContextOptions options;
    options.attentionMaxChunks = 1 << 20;
    options.attentionMinChunkScores = 0;
    options.attentionEngine = AttentionEngine::Memopt;
    Context *ctx = createContext(options);
    int status = contextError(*ctx) ? 1 : runPerf(ctx, argc > 2 ? argv[2] : "");
    destroyContext(ctx);
    return status;
  }
  if (argc < 3 || (mode != "--out" && mode != "--compare")) {
    std::fprintf(stderr,
                 "usage: %s (--out|--compare) DIR [filter] | --perf [filter]\n",
                 argv[0]);
    return 2;
  }
  std::string dir = argv[2], filter = argc > 3 ? argv[3] : "";
  // Chunked attention on the suite's small shapes too. The attention cases
  // run cuDNN's SDPA wherever it accepts the call (ctx), memopt's kernels
  // (kernels) or the measured choice (measuredAttention, `_measured`).
  ContextOptions options;
  options.attentionMinChunkScores = 0;
  options.attentionEngine = AttentionEngine::Cudnn;
  Context *ctx = createContext(options);
  options.attentionEngine = AttentionEngine::Memopt;
  Context *kernels = createContext(options);
  options.attentionEngine = AttentionEngine::Measured;
  Context *measuredAttention = createContext(options);
  options.attentionEngine = AttentionEngine::Cudnn;
  options.convEngine = ConvEngine::Cudnn;
  Context *cudnnConv = createContext(options);
  options.convEngine = ConvEngine::Memopt;
  Context *memoptConv = createContext(options);
  const std::vector<Context *> contexts = {ctx, kernels, measuredAttention,
                                           cudnnConv, memoptConv};
  for (Context *c : contexts)
    if (const char *error = contextError(*c)) {
      std::fprintf(stderr, "error: %s\n", error);
      return 1;
    }
  const char *engine = std::getenv("MEMOPT_ATTENTION_ENGINE");
  bool cudnnAttention = !std::strcmp(backendName(), "cuda") &&
                        !(engine && !std::strcmp(engine, "memopt"));
  std::vector<Case> cases = buildCases();
  cases.push_back({"graph_replay", 1e-5, nullptr});
  int failures = 0, passed = 0;
  for (const Case &c : cases) {
    if (!filter.empty() && c.name.find(filter) == std::string::npos)
      continue;
    std::string path = dir + "/" + c.name + ".npy";
    std::string error;
    // --compare: the other backend's values, read first (a case may use
    // them: Suite::reference).
    NpyArray other;
    bool haveOther = mode == "--compare" && readNpy(path, other, error);
    std::vector<double> otherValues;
    if (haveOther) {
      otherValues.resize(size_t(other.numElements()));
      std::memcpy(otherValues.data(), other.data.data(),
                  otherValues.size() * sizeof(double));
    }
    std::vector<double> values;
    {
      Suite suite;
      suite.reference = haveOther ? &otherValues : nullptr;
      suite.ctx = ctx;
      suite.kernels = kernels;
      suite.measuredAttention = measuredAttention;
      suite.cudnnConv = cudnnConv;
      suite.memoptConv = memoptConv;
      suite.cudnnAttention = cudnnAttention;
      suite.name = c.name;
      if (c.run) {
        std::vector<TensorRef> outputs = c.run(suite);
        for (const TensorRef &t : outputs) {
          std::vector<double> v = suite.read(t);
          values.insert(values.end(), v.begin(), v.end());
        }
      } else {
        values = graphReplay(suite);
      }
      synchronize(*ctx);
    }
    for (Context *context : contexts)
      if (const char *error = contextError(*context)) {
        std::printf("FAIL %s: runtime error: %s\n", c.name.c_str(), error);
        return 1;
      }
    if (mode == "--out") {
      NpyArray array;
      array.dtype = DType::F64;
      array.shape = {int64_t(values.size())};
      array.data.resize(values.size() * 8);
      std::memcpy(array.data.data(), values.data(), array.data.size());
      if (!writeNpy(path, array, error)) {
        std::fprintf(stderr, "error: %s\n", error.c_str());
        return 1;
      }
      ++passed;
      continue;
    }
    if (!haveOther) {
      std::printf("FAIL %s: %s\n", c.name.c_str(), error.c_str());
      ++failures;
      continue;
    }
    const double *theirs = otherValues.data();
    if (size_t(other.numElements()) != values.size()) {
      std::printf("FAIL %s: %lld values, expected %zu\n", c.name.c_str(),
                  (long long)other.numElements(), values.size());
      ++failures;
      continue;
    }
    double worst = 0;
    size_t worstAt = 0, bad = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      // Equal infinities match (a fully masked attention row's -inf
      // statistics on both backends); a NaN on either side is an error and
      // stays the reported worst.
      double err = theirs[i] == values[i] ? 0.0
                                          : std::fabs(theirs[i] - values[i]) /
                                                (1.0 + std::fabs(values[i]));
      if (!(err <= c.tolerance))
        ++bad;
      if (std::isnan(err) ? !std::isnan(worst) : err > worst) {
        worst = err;
        worstAt = i;
      }
    }
    if (bad) {
      std::printf(
          "FAIL %s: %zu of %zu values off (worst %.3g at %zu: got %.6g, "
          "host %.6g, tolerance %.1g)\n",
          c.name.c_str(), bad, values.size(), worst, worstAt, theirs[worstAt],
          values[worstAt], c.tolerance);
      ++failures;
    } else {
      std::printf("PASS %s (%zu values, max rel err %.2g)\n", c.name.c_str(),
                  values.size(), worst);
      ++passed;
    }
  }
  for (Context *c : {ctx, measuredAttention})
    if (mode == "--out" && *attentionEngineReport(*c))
      std::printf("attention engines%s:\n%s",
                  c == measuredAttention ? " (measured)" : "",
                  attentionEngineReport(*c));
  for (Context *c : {ctx, cudnnConv, memoptConv})
    if (mode == "--out" && *convolutionEngineReport(*c))
      std::printf("convolution engines:\n%s", convolutionEngineReport(*c));
  destroyContext(memoptConv);
  destroyContext(cudnnConv);
  destroyContext(measuredAttention);
  destroyContext(kernels);
  destroyContext(ctx);
  std::printf("%s: %d passed, %d failed\n", failures ? "FAILED" : "ALL PASSED",
              passed, failures);
  return failures ? 1 : 0;
}
