//===- NcclCudaCheck.cpp - the CUDA collectives over real NCCL, one rank --===//
//
// Run on a GPU machine by scripts/gpu_nccl_check.sh (not by ctest: no GPU
// here): the CUDA backend's collectives (lib/Runtime/Cuda/Collectives.cpp)
// over an NCCL communicator of this process's launch (WORLD_SIZE unset or
// 1), including the reduce-scatter and all-gather calls a one-rank program
// never makes (memopt-compile --data-parallel 1 shards nothing), and the
// micro-step gate the host decides: with accumulation over K = 3, the
// accumulator sums every micro-batch's gradient and the collective writes
// only on micro-step 2. Prints one line per check and "NCCL CUDA CHECK
// PASSED" or exits non-zero.
//
//===----------------------------------------------------------------------===//

#include "memopt/Runtime/Communicator.h"
#include "memopt/Runtime/Runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace memopt::rt;

namespace {

int failures = 0;

void expect(bool ok, const char *what) {
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
  failures += ok ? 0 : 1;
}

bool equal(const std::vector<float> &a, const std::vector<float> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::fabs(a[i] - b[i]) > 1e-6f * (1 + std::fabs(b[i])))
      return false;
  return true;
}

} // namespace

int main() {
  LaunchEnvironment env;
  std::string error;
  if (!readLaunchEnvironment(env, error)) {
    std::fprintf(stderr, "error: %s\n", error.c_str());
    return 1;
  }
  if (env.worldSize != 1) {
    std::fprintf(stderr, "error: run this check as one rank (WORLD_SIZE %d)\n",
                 env.worldSize);
    return 1;
  }
  std::unique_ptr<Communicator> comm = createProcessCommunicator(env, error);
  if (!comm) {
    std::fprintf(stderr, "error: %s\n", error.c_str());
    return 1;
  }
  ContextOptions options;
  options.device = env.localRank;
  options.communicator = comm.get();
  Context *ctx = createContext(options);
  const int64_t n = 10;
  auto alloc = [&](int64_t count) {
    return static_cast<float *>(
        deviceAlloc(*ctx, size_t(count) * sizeof(float), "check"));
  };
  float *x = alloc(n), *y = alloc(n), *acc = alloc(n), *micro = alloc(1);
  auto ref = [&](float *data, int64_t count) {
    return makeTensor(data, DType::F32, 1, &count);
  };
  auto upload = [&](float *to, const std::vector<float> &values) {
    copyToDevice(*ctx, to, values.data(), values.size() * sizeof(float));
  };
  auto download = [&](const float *from, int64_t count) {
    std::vector<float> values(static_cast<size_t>(count));
    copyToHost(*ctx, values.data(), from, size_t(count) * sizeof(float));
    synchronize(*ctx);
    return values;
  };
  std::vector<float> values(static_cast<size_t>(n)),
      sentinel(static_cast<size_t>(n), -7.0f);
  for (int64_t i = 0; i < n; ++i)
    values[size_t(i)] = 0.5f * float(i) - 2.0f;

  upload(x, values);
  upload(y, sentinel);
  allReduce(*ctx, "all_reduce", CollectiveReduction::Average, ref(x, n),
            ref(y, n));
  expect(equal(download(y, n), values), "all_reduce (average, out of place)");
  allReduce(*ctx, "all_reduce", CollectiveReduction::Sum, ref(x, n), ref(x, n));
  expect(equal(download(x, n), values), "all_reduce (sum, in place)");
  upload(y, sentinel);
  reduceScatter(*ctx, "reduce_scatter", CollectiveReduction::Average, 1,
                ref(x, n), ref(y, n));
  expect(equal(download(y, n), values), "reduce_scatter over 1 rank");
  allGather(*ctx, "all_gather", 1, ref(y, n));
  expect(equal(download(y, n), values), "all_gather over 1 rank");

  // Accumulation over K = 3 micro-steps: the driver sets the micro-step
  // on the host (setMicroStep) and in the weight.
  GradientAccumulation accumulation;
  accumulation.accumulator = ref(acc, n);
  accumulation.microStep = makeTensor(micro, DType::F32, 0, nullptr);
  accumulation.steps = 3;
  std::vector<float> sum(static_cast<size_t>(n), 0.0f);
  upload(y, sentinel);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> g(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      g[size_t(i)] = float(step + 1) * values[size_t(i)] + float(i);
      sum[size_t(i)] += g[size_t(i)];
    }
    float m = float(step);
    upload(x, g);
    upload(micro, {m});
    setMicroStep(*ctx, step);
    allReduce(*ctx, "all_reduce", CollectiveReduction::Average, ref(x, n),
              ref(y, n), &accumulation);
    bool last = step == 2;
    char what[96];
    std::snprintf(what, sizeof what,
                  "accumulated all_reduce, micro-step %d: %s", step,
                  last ? "communicates the sum" : "accumulates only");
    expect(equal(download(y, n), last ? sum : sentinel) &&
               equal(download(acc, n), sum),
           what);
  }
  // The ZeRO-1 shape: reduce-scatter of the accumulated sum.
  std::fill(sum.begin(), sum.end(), 0.0f);
  upload(y, sentinel);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> g(values);
    for (float &v : g)
      v *= float(step + 2);
    for (int64_t i = 0; i < n; ++i)
      sum[size_t(i)] += g[size_t(i)];
    upload(x, g);
    setMicroStep(*ctx, step);
    reduceScatter(*ctx, "reduce_scatter", CollectiveReduction::Average, 1,
                  ref(x, n), ref(y, n), &accumulation);
  }
  expect(equal(download(y, n), sum), "accumulated reduce_scatter");
  expect(contextError(*ctx) == nullptr,
         contextError(*ctx) ? contextError(*ctx) : "no error so far");

  // A micro-step the host does not know: one message, no NCCL call.
  setMicroStep(*ctx, -1);
  allReduce(*ctx, "gated", CollectiveReduction::Average, ref(x, n), ref(y, n),
            &accumulation);
  const char *message = contextError(*ctx);
  expect(message && std::string(message).find("does not know the micro-step") !=
                        std::string::npos,
         "unknown micro-step is refused");
  if (message)
    std::printf("      (%s)\n", message);

  deviceFree(*ctx, x);
  deviceFree(*ctx, y);
  deviceFree(*ctx, acc);
  deviceFree(*ctx, micro);
  destroyContext(ctx);
  comm.reset();
  std::printf("NCCL CUDA CHECK %s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
