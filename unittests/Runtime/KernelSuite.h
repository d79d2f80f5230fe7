//===- KernelSuite.h - the kernel suite's cases and helpers -----*- C++ -*-===//
//
// Private to the kernel suite (memopt-kernel-suite-host / -cuda): the Suite
// a case runs on (tensors in device memory through the runtime API), the
// case list's entries and each op family's cases, one file per family:
//
//   KernelSuiteElementwise.cpp  unary, binary, fused elementwise, compare, cast
//   KernelSuiteMatmulConv.cpp   matrix products, convolutions, pooling
//   KernelSuiteDepthwise.cpp    channels-last depthwise convolutions on each
//                               CUDA engine
//   KernelSuiteNormConvFusion.cpp
//                               batch-norm -> ReLU -> convolution (and its
//                               filter gradient) on each CUDA engine
//   KernelSuiteTraining.cpp     cross-entropy, conv / pool gradients, dropout,
//                               gradient accumulation, optimizers
//   KernelSuiteNormConv.cpp     batch norm -> ReLU -> convolution fused
//                               (statistics, normalized convolutions, the
//                               masked gradient)
//   KernelSuiteAttention.cpp    attention forward and gradients
//   KernelSuiteAttentionDropout.cpp
//                               attention with dropout (memopt's mask and
//                               cuDNN's generator)
//   KernelSuiteNorm.cpp         normalization, softmax, reductions, scans
//   KernelSuiteDataMovement.cpp transpose, slice, gather, scatter, pad, ...
//   KernelSuitePerf.cpp         --perf
//
// KernelSuite.cpp lists the families in order and runs them.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_UNITTESTS_RUNTIME_KERNELSUITE_H
#define MEMOPT_UNITTESTS_RUNTIME_KERNELSUITE_H

#include "Internal.h"

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace memopt::rt::suite {

struct Suite {
  Context *ctx = nullptr;
  /// The case's name: the node name of its attention calls, so that the
  /// engine report (attentionEngineReport) lists the engine of each case.
  std::string name;
  /// A context of the same backend whose attention always runs memopt's
  /// kernels (ContextOptions::attentionEngine Memopt), for cases that check
  /// what those kernels do and cuDNN's engine does not (docs/attention.md).
  /// `ctx` forces cuDNN's SDPA wherever cuDNN accepts the call.
  Context *kernels = nullptr;
  /// A context of the same backend whose attention runs the engine its
  /// first call measures faster (ContextOptions::attentionEngine Measured,
  /// a program's default): the suite's `_measured` attention cases.
  Context *measuredAttention = nullptr;
  /// Contexts of the same backend whose channels-last depthwise
  /// convolutions run cuDNN (cudnnConv) or memopt's depthwise kernel
  /// (memoptConv), and whose fused normalization-ReLU convolutions run
  /// cuDNN's fusion or apply + conv: ContextOptions::convEngine forced (the
  /// host ignores it).
  Context *cudnnConv = nullptr, *memoptConv = nullptr;
  std::vector<void *> allocations;
  unsigned seed = 1;
  /// --compare: the other backend's values of this case (its .npy file,
  /// null when there is none), for cases whose host side recomputes from
  /// what the CUDA side drew (cuDNN's dropout mask).
  const std::vector<double> *reference = nullptr;

  ~Suite() {
    for (void *p : allocations)
      deviceFree(*ctx, p);
  }

  TensorRef empty(DType dtype, std::vector<int64_t> shape) {
    TensorRef t = makeTensor(nullptr, dtype, int(shape.size()), shape.data());
    t.data = deviceAlloc(*ctx, t.bytes() + 64, "suite");
    allocations.push_back(t.data);
    return t;
  }
  /// Whether `ctx` (and `measuredAttention`) may run attention on cuDNN's
  /// fused SDPA where cuDNN accepts it (the CUDA backend,
  /// MEMOPT_ATTENTION_ENGINE not `memopt`).
  bool cudnnAttention = false;

  /// Where a case gives an attention call no workspace (`workspace` null)
  /// and `ctx` runs cuDNN, the room a program compiled for target cuda
  /// plans for cuDNN's SDPA (cudnnAttentionWorkspaceBound; none where the
  /// compiler plans none, so those calls stay on the fused kernels).
  void cudnnAttentionWorkspace(const AttentionParams &params,
                               const TensorRef &q, const TensorRef &k,
                               const TensorRef &v, const TensorRef *bias,
                               bool statistics, bool backward, void *&workspace,
                               size_t &workspaceBytes) {
    if (workspace || !cudnnAttention)
      return;
    workspaceBytes = cudnnAttentionWorkspaceBound(params, q, k, v, bias,
                                                  statistics, backward);
    if (workspaceBytes)
      workspace = empty(DType::F32, {int64_t(workspaceBytes + 3) / 4}).data;
  }
  TensorRef upload(DType dtype, std::vector<int64_t> shape,
                   const std::vector<double> &values) {
    TensorRef t = empty(dtype, shape);
    std::vector<uint8_t> bytes(t.bytes() + 8);
    for (size_t i = 0; i < values.size(); ++i)
      storeFromDouble(bytes.data(), dtype, int64_t(i), values[i]);
    copyToDevice(*ctx, t.data, bytes.data(), t.bytes());
    return t;
  }
  /// Values in +-[low, high), never zero.
  TensorRef random(DType dtype, std::vector<int64_t> shape, double low = 0.1,
                   double high = 2.0, bool positive = false) {
    std::mt19937 rng(seed++);
    std::uniform_real_distribution<double> magnitude(low, high);
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    std::vector<double> values(static_cast<size_t>(n));
    for (double &v : values)
      v = (positive || (rng() & 1)) ? magnitude(rng) : -magnitude(rng);
    return upload(dtype, shape, values);
  }
  TensorRef ints(DType dtype, std::vector<int64_t> shape,
                 const std::vector<double> &values) {
    return upload(dtype, shape, values);
  }
  std::vector<double> read(const TensorRef &t) {
    std::vector<uint8_t> bytes(t.bytes() + 8);
    copyToHost(*ctx, bytes.data(), t.data, t.bytes());
    synchronize(*ctx);
    std::vector<double> values(static_cast<size_t>(t.numElements()));
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = loadAsDouble(bytes.data(), t.dtype, int64_t(i));
    return values;
  }
};

struct Case {
  std::string name;
  double tolerance;
  std::function<std::vector<TensorRef>(Suite &)> run;
};

inline const char *tag(DType t) { return dtypeName(t); }

inline double tol(DType t, double f32 = 1e-4) {
  return t == DType::F32 ? f32 : t == DType::F16 ? 1e-2 : 5e-2;
}

/// A convolution case (KernelSuiteMatmulConv.cpp); the training cases take
/// the filter gradient of each.
struct ConvCase {
  const char *name;
  std::vector<int64_t> x, w, y;
  int spatial;
  int64_t group, stride, dilation, padBegin, padEnd;
  bool transposed, bias;
  Activation act;
};
const std::vector<ConvCase> &convCases();

/// Each family appends its cases, in the suite's order (KernelSuite.cpp).
void addElementwiseCases(std::vector<Case> &cases);
void addMatmulCases(std::vector<Case> &cases);
void addConvCases(std::vector<Case> &cases);
void addDepthwiseCases(std::vector<Case> &cases);
void addNormConvFusionCases(std::vector<Case> &cases);
void addPoolCases(std::vector<Case> &cases);
void addTrainingCases(std::vector<Case> &cases);
void addChannelsLastTrainingCases(std::vector<Case> &cases);
void addNormConvCases(std::vector<Case> &cases);
void addAttentionCases(std::vector<Case> &cases);
void addAttentionDropoutCases(std::vector<Case> &cases);
void addNormCases(std::vector<Case> &cases);
void addDataMovementCases(std::vector<Case> &cases);

/// --perf: times the large cases matching `filter`; 1 on a runtime error.
int runPerf(Context *ctx, const std::string &filter);

} // namespace memopt::rt::suite

#endif // MEMOPT_UNITTESTS_RUNTIME_KERNELSUITE_H
