//===- fused_kernel_bench.cu - fused elementwise kernels on the GPU -------===//
//
// Times three ways to run ResNet's residual add + relu and MobileNetV3's
// scale-shift-hard-swish on an H100 / H200: the runtime's separate unary /
// binary kernels, the step interpreter (fusedElementwise) and the kernel
// memopt-compile generates (fusedElementwiseProgram with the Program type the
// emitter writes for these chains), and checks that the generated kernel and
// the interpreter give the same values. Prints one line per case (median of
// 50 CUDA-event timings after warm-up) and exits non-zero on a mismatch.
//
// Build against a CUDA runtime build (scripts/gpu_check.sh makes one):
//   nvcc -std=c++17 -O2 -arch=sm_90 bench/fused_kernel_bench.cu -Iinclude \
//     RT/libmemopt_runtime_cuda.a RT/libmemopt_runtime_common.a \
//     -lcublasLt -lcudnn -o fused_kernel_bench
//
//===----------------------------------------------------------------------===//

#include "memopt/Runtime/FusedKernel.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

using namespace memopt::rt;

namespace {

// What EmitProgram writes for the two chains.
struct ResidualRelu {
  static constexpr int kInputs = 2;
  __device__ __forceinline__ static float apply(const float *x) {
    const float r2 = binaryStep(BinaryOp::Add, x[0], x[1]);
    const float r3 = unaryStep(UnaryOp::Relu, r2, 0.0f, 0.0f);
    return r3;
  }
};

struct ScaleShiftHardSwish {
  static constexpr int kInputs = 3;
  __device__ __forceinline__ static float apply(const float *x) {
    const float r3 = binaryStep(BinaryOp::Mul, x[0], x[1]);
    const float r4 = binaryStep(BinaryOp::Add, r3, x[2]);
    const float r5 = unaryStep(UnaryOp::HardSigmoid, r4, 0.2f, 0.5f);
    const float r6 = binaryStep(BinaryOp::Mul, r4, r5);
    return r6;
  }
};

TensorRef tensor(std::vector<int64_t> shape, std::mt19937 &rng) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<float> host(static_cast<size_t>(n));
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (float &v : host)
    v = dist(rng);
  void *data = nullptr;
  cudaMalloc(&data, size_t(n) * sizeof(float));
  cudaMemcpy(data, host.data(), size_t(n) * sizeof(float),
             cudaMemcpyHostToDevice);
  return makeTensor(data, DType::F32, int(shape.size()), shape.data());
}

std::vector<float> download(const TensorRef &t) {
  std::vector<float> host(static_cast<size_t>(t.numElements()));
  cudaMemcpy(host.data(), t.data, host.size() * sizeof(float),
             cudaMemcpyDeviceToHost);
  return host;
}

double medianMs(Context &ctx, const std::function<void()> &body) {
  for (int i = 0; i < 5; ++i)
    body();
  std::vector<double> times;
  for (int i = 0; i < 50; ++i) {
    timerStart(ctx); // CUDA events on the context's stream
    body();
    times.push_back(timerStopMs(ctx));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

} // namespace

int main() {
  Context *ctx = createContext();
  std::mt19937 rng(1);
  int failures = 0;
  auto report = [&](const char *name, double ms, double bytes) {
    std::printf("%-44s %8.4f ms %8.1f GB/s\n", name, ms, bytes / ms / 1e6);
  };
  auto compare = [&](const char *name, const TensorRef &a, const TensorRef &b) {
    std::vector<float> x = download(a), y = download(b);
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i)
      worst = std::max(worst, double(std::fabs(x[i] - y[i])) /
                                  std::max(1.0, double(std::fabs(x[i]))));
    std::printf("%-44s max rel diff %.2e\n", name, worst);
    failures += worst > 1e-6;
  };

  {
    const int64_t n = int64_t(1) << 24;
    TensorRef a = tensor({n}, rng), b = tensor({n}, rng), y = tensor({n}, rng),
              z = tensor({n}, rng);
    const TensorRef inputs[] = {a, b};
    const ElementwiseStep steps[] = {
        {ElementwiseStep::kBinary, int32_t(BinaryOp::Add), 0, 1, 0, 0},
        {ElementwiseStep::kUnary, int32_t(UnaryOp::Relu), 2, -1, 0, 0}};
    double bytes = 4.0 * n;
    report("residual_relu_f32_16M separate kernels",
           medianMs(*ctx,
                    [&] {
                      binary(*ctx, "add", BinaryOp::Add, a, b, y);
                      unary(*ctx, "relu", UnaryOp::Relu, 0, 0, y, y);
                    }),
           5 * bytes);
    report("residual_relu_f32_16M interpreter",
           medianMs(*ctx,
                    [&] {
                      fusedElementwise(*ctx, "fused", steps, 2, inputs, 2, y);
                    }),
           3 * bytes);
    report("residual_relu_f32_16M generated",
           medianMs(*ctx,
                    [&] {
                      fusedElementwiseProgram<ResidualRelu, float, float>(
                          *ctx, "fused", steps, 2, inputs, 2, z);
                    }),
           3 * bytes);
    compare("residual_relu_f32_16M generated vs interpreter", y, z);
  }
  {
    std::vector<int64_t> shape = {32, 96, 56, 56};
    int64_t n = 32 * 96 * 56 * 56;
    TensorRef x = tensor(shape, rng), scale = tensor({96, 1, 1}, rng),
              shift = tensor({1}, rng), t = tensor(shape, rng),
              u = tensor(shape, rng), y = tensor(shape, rng),
              z = tensor(shape, rng);
    const TensorRef inputs[] = {x, scale, shift};
    const ElementwiseStep steps[] = {
        {ElementwiseStep::kBinary, int32_t(BinaryOp::Mul), 0, 1, 0, 0},
        {ElementwiseStep::kBinary, int32_t(BinaryOp::Add), 3, 2, 0, 0},
        {ElementwiseStep::kUnary, int32_t(UnaryOp::HardSigmoid), 4, -1, 0.2f,
         0.5f},
        {ElementwiseStep::kBinary, int32_t(BinaryOp::Mul), 4, 5, 0, 0}};
    double bytes = 4.0 * n;
    report("scale_shift_hswish_f32_32x96x56x56 separate",
           medianMs(*ctx,
                    [&] {
                      binary(*ctx, "mul", BinaryOp::Mul, x, scale, t);
                      binary(*ctx, "add", BinaryOp::Add, t, shift, t);
                      unary(*ctx, "hsig", UnaryOp::HardSigmoid, 0.2f, 0.5f, t,
                            u);
                      binary(*ctx, "mul", BinaryOp::Mul, t, u, u);
                    }),
           9 * bytes);
    report("scale_shift_hswish_f32_32x96x56x56 interpreter",
           medianMs(*ctx,
                    [&] {
                      fusedElementwise(*ctx, "fused", steps, 4, inputs, 3, y);
                    }),
           2 * bytes);
    report(
        "scale_shift_hswish_f32_32x96x56x56 generated",
        medianMs(*ctx,
                 [&] {
                   fusedElementwiseProgram<ScaleShiftHardSwish, float, float>(
                       *ctx, "fused", steps, 4, inputs, 3, z);
                 }),
        2 * bytes);
    compare("scale_shift_hswish generated vs interpreter", y, z);
    compare("scale_shift_hswish generated vs separate", u, z);
  }
  if (const char *error = contextError(*ctx)) {
    std::printf("error: %s\n", error);
    return 1;
  }
  destroyContext(ctx);
  std::printf(failures ? "FUSED KERNEL BENCH FAILED\n"
                       : "FUSED KERNEL BENCH PASSED\n");
  return failures ? 1 : 0;
}
