//===- host_update_bench.cpp - the CPU update of --offload optimizer ------===//
//
// Times the offloaded optimizer's CPU update (lib/Runtime/HostAdam.h,
// runHostUpdate on a HostUpdatePool) per GiB streamed, the unit the fit
// search prices it in ("<host update 1 GiB>", getHostUpdateStreamedBytes),
// and per parameter: AdamW and SGD with momentum over f32 masters, with an
// f32 or bf16 staged gradient, without a working copy (an f32 parameter is
// copied back from the master itself) and with a low (bf16 / f16) one
// rounded by the CPU (and once the last micro-step of a host accumulation
// over 2: accumulate, then update), on 1 and 2 threads (or the counts given).
// Needs only the runtime libraries (no MLIR), like host_kernel_bench.cpp:
//
//   RT=build/lib/Runtime
//   g++ -std=c++17 -O2 bench/host_update_bench.cpp -Iinclude -Ilib/Runtime
//     -Wl,--start-group $RT/libmemopt_runtime_host.a
//     $RT/libmemopt_runtime_common.a -Wl,--end-group -lpthread -ldl
//     -o /tmp/hub                      (one command line)
//   /tmp/hub [MIB_OF_MASTER] [REPEATS] [THREADS...]
//
// MEMOPT_OFFLOAD_ISA=avx2|sse2 caps the loops' instruction set
// (HostAdamLoops.cpp). Defaults: 256 MiB of f32 master (64 Mi parameters, far
// beyond the caches), 5 repeats (the median is printed, after one warm-up),
// threads 1 and 2. Inputs are deterministic and the step number grows across
// repeats, as in training.
//
//===----------------------------------------------------------------------===//

#include "HostAdam.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace memopt::rt;

namespace {

void fill(std::vector<float> &data, uint32_t seed, float scale) {
  uint32_t state = seed * 2654435761u + 1;
  for (float &v : data) {
    state = state * 1664525u + 1013904223u;
    v = (float(state >> 8) / float(1 << 23) - 1.0f) * scale;
  }
}

struct Config {
  HostUpdate::Kind kind;
  DType gradType;
  DType paramType; ///< F32: no working copy written (CUDA's f32 master)
  bool accumulated = false; ///< the last of 2 micro-steps, host accumulator
};

const char *typeName(DType type) {
  return type == DType::F32 ? "f32" : type == DType::F16 ? "f16" : "bf16";
}

} // namespace

int main(int argc, char **argv) {
  int64_t mib = argc > 1 ? std::max(1, std::atoi(argv[1])) : 256;
  int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  std::vector<int> threadCounts;
  for (int i = 3; i < argc; ++i)
    threadCounts.push_back(std::max(1, std::atoi(argv[i])));
  if (threadCounts.empty())
    threadCounts = {1, 2};

  int64_t n = mib * (int64_t(1) << 20) / 4;
  const size_t count = static_cast<size_t>(n);
  std::vector<float> master(count), m(count), v(count), gradF32(count);
  std::vector<uint16_t> gradLow(count), low(count);
  std::vector<float> accumulator(count, 0.0f);
  fill(master, 1, 1.0f);
  fill(m, 2, 1e-3f);
  fill(v, 3, 1e-6f);
  for (float &x : v)
    x = x < 0 ? -x : x;
  fill(gradF32, 4, 1e-2f);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &gradF32[size_t(i)], 4);
    gradLow[size_t(i)] = uint16_t(bits >> 16);
  }
  // lr, step, micro-step, loss scale, found_inf, skipped.
  float scalars[8] = {1e-4f, 1, 0, 1, 0, 0, 0, 0};

  const Config configs[] = {
      {HostUpdate::Kind::AdamW, DType::F32, DType::F32},
      {HostUpdate::Kind::AdamW, DType::F32, DType::BF16},
      {HostUpdate::Kind::AdamW, DType::F32, DType::F16},
      {HostUpdate::Kind::AdamW, DType::BF16, DType::BF16},
      {HostUpdate::Kind::AdamW, DType::BF16, DType::BF16, true},
      {HostUpdate::Kind::Sgd, DType::F32, DType::F32},
      {HostUpdate::Kind::Sgd, DType::F32, DType::BF16},
      {HostUpdate::Kind::Sgd, DType::F32, DType::F16},
      {HostUpdate::Kind::Sgd, DType::BF16, DType::BF16},
  };
  std::printf("%lld parameters (%lld MiB of f32 master), median of %d, "
              "loops for %s\n",
              (long long)n, (long long)mib, repeats, getHostUpdateIsa());
  std::printf("%-6s %-4s %-5s %-5s %7s %10s %9s %12s\n", "update", "grad",
              "param", "accum", "threads", "ms/update", "ms/GiB", "Gparams/s");
  for (int threads : threadCounts) {
    HostUpdatePool pool(threads);
    for (const Config &config : configs) {
      HostUpdate u;
      u.kind = config.kind;
      u.node = "bench";
      u.weightDecay = 0.01f;
      u.momentum = 0.9f;
      u.master = master.data();
      if (config.kind == HostUpdate::Kind::AdamW) {
        u.expAvg = m.data();
        u.expAvgSq = v.data();
      } else {
        u.momentumBuffer = m.data();
      }
      u.gradType = config.gradType;
      u.grad = config.gradType == DType::F32
                   ? static_cast<const void *>(gradF32.data())
                   : static_cast<const void *>(gradLow.data());
      u.elements = n;
      u.scalars = scalars;
      if (config.accumulated) {
        u.accumulator = accumulator.data();
        u.accumulationSteps = 2;
      }
      // An f32 parameter is the master itself on CUDA (copied back from
      // it): nothing more to write.
      if (config.paramType != DType::F32) {
        u.param = low.data();
        u.paramType = config.paramType;
      }
      std::vector<double> ms;
      int64_t streamed = 0;
      for (int r = 0; r <= repeats; ++r) {
        scalars[1] += 1;
        scalars[2] = config.accumulated ? 1.0f : 0.0f; // the applying one
        auto begin = std::chrono::steady_clock::now();
        std::string error = runHostUpdate(u, pool, &streamed);
        std::chrono::duration<double, std::milli> elapsed =
            std::chrono::steady_clock::now() - begin;
        if (!error.empty()) {
          std::fprintf(stderr, "error: %s\n", error.c_str());
          return 1;
        }
        if (r > 0) // the first run is a warm-up
          ms.push_back(elapsed.count());
      }
      std::sort(ms.begin(), ms.end());
      double median = ms[ms.size() / 2];
      double perGiB = median * double(int64_t(1) << 30) / double(streamed);
      std::printf("%-6s %-4s %-5s %-5s %7d %10.2f %9.1f %12.3f\n",
                  config.kind == HostUpdate::Kind::AdamW ? "adamw" : "sgd",
                  typeName(config.gradType), typeName(config.paramType),
                  config.accumulated ? "2" : "-", threads, median, perGiB,
                  double(n) / median / 1e6);
      std::fflush(stdout);
    }
  }
  return 0;
}
