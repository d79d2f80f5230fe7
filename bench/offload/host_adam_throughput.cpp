//===- host_adam_throughput.cpp - the CPU AdamW's throughput
//---------------===//
//
// The throughput of --offload optimizer's CPU AdamW (lib/Runtime/HostAdam.cpp,
// runHostUpdate on every core): f32 gradients, 2^24 parameters, best of 5
// steps. --fit prices the host update with it (kHostUpdateBytesPerSecond,
// include/memopt/Conversion/Fit.h; docs/fit.md). Built against the runtime's
// archives of a build folder (one command line):
//
//   g++ -O3 -std=gnu++17 -Iinclude -Ilib/Runtime
//     bench/offload/host_adam_throughput.cpp
//     build/lib/Runtime/libmemopt_runtime_common.a
//     build/lib/Runtime/libmemopt_runtime_host.a
//     build/lib/Runtime/libmemopt_runtime_common.a -lpthread -o /tmp/host_adam
//   /tmp/host_adam     # MEMOPT_OFFLOAD_THREADS=N to choose the threads
//   /tmp/host_adam bf16   # (or f16) with a low working parameter: the CPU
//                         # also writes the master's rounding
//                         (docs/offload.md), # and the rounding alone
//                         (roundMasterRange, one thread)
//
//===----------------------------------------------------------------------===//
#include "HostAdam.h"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>
using namespace memopt::rt;
int main(int argc, char **argv) {
  const int64_t n = int64_t(1) << 24;
  DType paramType = argc > 1 && std::strcmp(argv[1], "bf16") == 0  ? DType::BF16
                    : argc > 1 && std::strcmp(argv[1], "f16") == 0 ? DType::F16
                                                                   : DType::F32;
  std::vector<uint16_t> low(paramType == DType::F32 ? 0 : size_t(n));
  std::vector<float> master(n, 0.5f), m(n, 0.f), v(n, 0.f), grad(n, 0.01f);
  float scalars[16] = {};
  scalars[kStagingLr] = 1e-3f;
  scalars[kStagingStep] = 1.f;
  HostUpdate update;
  update.kind = HostUpdate::Kind::AdamW;
  update.master = master.data();
  update.expAvg = m.data();
  update.expAvgSq = v.data();
  update.grad = grad.data();
  update.elements = n;
  update.weightDecay = 0.01f;
  update.scalars = scalars;
  if (paramType != DType::F32) {
    update.param = low.data();
    update.paramType = paramType;
  }
  HostUpdatePool pool;
  double best = 1e9;
  for (int i = 0; i < 5; ++i) {
    scalars[kStagingStep] = float(i + 1);
    auto t0 = std::chrono::steady_clock::now();
    std::string error = runHostUpdate(update, pool);
    auto t1 = std::chrono::steady_clock::now();
    if (!error.empty()) {
      std::printf("error %s\n", error.c_str());
      return 1;
    }
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  std::printf("threads %d: %.3f G parameters/s, %.2f GB/s of gradient, master "
              "and moments%s\n",
              pool.threads(), n / best / 1e9, 16.0 * n / best / 1e9,
              paramType == DType::F32 ? "" : " (and the low parameter)");
  if (paramType == DType::F32)
    return 0;
  double rounding = 1e9;
  for (int i = 0; i < 5; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    roundMasterRange(master.data(), low.data(), paramType, 0, n);
    auto t1 = std::chrono::steady_clock::now();
    rounding =
        std::min(rounding, std::chrono::duration<double>(t1 - t0).count());
  }
  std::printf("rounding alone, one thread: %.3f G parameters/s (%.2f GB/s read "
              "and written)\n",
              n / rounding / 1e9, 6.0 * n / rounding / 1e9);
}
