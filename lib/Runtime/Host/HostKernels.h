//===- HostKernels.h - helpers of the host op-family files ------*- C++ -*-===//
//
// What the host backend's op-family files (Elementwise.cpp, Gemm.cpp,
// Convolution.cpp, Normalization.cpp, Attention.cpp, Reductions.cpp,
// DataMovement.cpp) share: parallelFor over the context's ThreadPool, the
// conversions to and from double, broadcasting offsets and the scalar math of
// the elementwise ops and the fused activations. These were file-local in
// the single HostBackend.cpp; they are inline here, unchanged, so every
// family file compiles them as before (the same inlining, no calls through
// std::function: HostInternal.h's host:: forms are for the other files).
//
// Semantics follow the ONNX operator specification; the structure (one loop
// nest per op, index decomposition for broadcasting) follows TFLite's
// reference kernels (HostBackend.cpp's header says more).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_RUNTIME_HOST_HOSTKERNELS_H
#define MEMOPT_LIB_RUNTIME_HOST_HOSTKERNELS_H

#include "HostInternal.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

namespace memopt::rt {

/// The host's loops need no scratch, but the CUDA backend writes anywhere in
/// a planned workspace: the host fills it with NaN (all bits set) before and
/// after the op, so a workspace that overlaps live data shows up as wrong
/// results in host-backend tests, not only on a GPU.
inline void poisonWorkspace(void *workspace, size_t bytes) {
  if (workspace && bytes)
    std::memset(workspace, 0xff, bytes);
}

/// Work (in multiply-adds or simple flops, about a nanosecond each) below
/// which a chunk is not worth a thread: waking a worker costs tens of
/// microseconds.
inline constexpr int64_t kMinChunkWork = int64_t(1) << 17;
/// Elements per chunk of a conversion to or from double (about 0.5 ns each).
inline constexpr int64_t kMinChunkElements = int64_t(1) << 18;

/// Items per chunk so that a chunk does at least kMinChunkWork.
inline int64_t grainFor(int64_t workPerItem) {
  return std::max<int64_t>(1,
                           kMinChunkWork / std::max<int64_t>(workPerItem, 1));
}

/// Calls fn(lo, hi) on chunks of at least `grain` items covering [begin,
/// end), spread over the context's threads (serially when there is one chunk
/// or one thread). Chunk boundaries depend on the thread count, so `fn` must
/// compute each item the same way whatever chunk holds it.
template <typename Fn>
void parallelFor(Context &ctx, int64_t begin, int64_t end, int64_t grain,
                 const Fn &fn) {
  int64_t items = end - begin;
  if (items <= 0)
    return;
  grain = std::max<int64_t>(grain, 1);
  int64_t maxChunks = (items + grain - 1) / grain;
  if (ctx.threads <= 1 || maxChunks <= 1 || insideParallelFor) {
    fn(begin, end);
    return;
  }
  // A few chunks per thread even out items of uneven cost.
  int64_t chunks = std::min<int64_t>(maxChunks, int64_t(ctx.threads) * 4);
  int64_t size = (items + chunks - 1) / chunks;
  chunks = (items + size - 1) / size;
  if (!ctx.pool)
    ctx.pool = std::make_unique<ThreadPool>(ctx.threads - 1);
  ctx.pool->run(chunks, [&](int64_t chunk) {
    int64_t lo = begin + chunk * size;
    fn(lo, std::min(end, lo + size));
  });
}

/// Elements [lo, hi) of `t` as double (f32 without the per-element switch).
inline void loadRange(const TensorRef &t, int64_t lo, int64_t hi, double *out) {
  if (t.dtype == DType::F32) {
    const float *src = static_cast<const float *>(t.data);
    for (int64_t i = lo; i < hi; ++i)
      out[i - lo] = src[i];
    return;
  }
  for (int64_t i = lo; i < hi; ++i)
    out[i - lo] = loadAsDouble(t.data, t.dtype, i);
}

/// Stores in[0, hi - lo) into elements [lo, hi) of `t`.
inline void storeRange(const double *in, int64_t lo, int64_t hi,
                       const TensorRef &t) {
  if (t.dtype == DType::F32) {
    float *dst = static_cast<float *>(t.data);
    for (int64_t i = lo; i < hi; ++i)
      dst[i] = float(in[i - lo]);
    return;
  }
  for (int64_t i = lo; i < hi; ++i)
    storeFromDouble(t.data, t.dtype, i, in[i - lo]);
}

inline std::vector<double> toDouble(const TensorRef &t) {
  int64_t n = t.numElements();
  std::vector<double> v(size_t(std::max<int64_t>(n, 0)));
  loadRange(t, 0, n, v.data());
  return v;
}

/// toDouble spread over the context's threads (conversions of large
/// activations are a visible share of a convolutional network's time).
inline std::vector<double> toDouble(Context &ctx, const TensorRef &t) {
  int64_t n = t.numElements();
  std::vector<double> v(size_t(std::max<int64_t>(n, 0)));
  parallelFor(ctx, 0, n, kMinChunkElements, [&](int64_t lo, int64_t hi) {
    loadRange(t, lo, hi, v.data() + lo);
  });
  return v;
}

inline void store(const std::vector<double> &v, const TensorRef &t) {
  storeRange(v.data(), 0, int64_t(v.size()), t);
}

inline void store(Context &ctx, const std::vector<double> &v,
                  const TensorRef &t) {
  parallelFor(
      ctx, 0, int64_t(v.size()), kMinChunkElements,
      [&](int64_t lo, int64_t hi) { storeRange(v.data() + lo, lo, hi, t); });
}

inline std::vector<int64_t> toInt64(const TensorRef &t) {
  int64_t n = t.numElements();
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = t.dtype == DType::I64 ? static_cast<int64_t *>(t.data)[i]
                   : t.dtype == DType::I32
                       ? static_cast<int32_t *>(t.data)[i]
                       : int64_t(loadAsDouble(t.data, t.dtype, i));
  return v;
}

inline void storeInt64(const std::vector<int64_t> &v, const TensorRef &t) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (t.dtype == DType::I64)
      static_cast<int64_t *>(t.data)[i] = v[i];
    else
      static_cast<int32_t *>(t.data)[i] = int32_t(v[i]);
  }
}

/// Offset into a broadcast input for output element `index`.
inline int64_t broadcastOffset(int64_t index, const TensorRef &out,
                               const BroadcastStrides &strides) {
  int64_t offset = 0;
  for (int d = out.rank - 1; d >= 0; --d) {
    int64_t coord = index % out.shape[d];
    index /= out.shape[d];
    offset += coord * strides.stride[d];
  }
  return offset;
}

inline double applyUnary(UnaryOp op, double x, double alpha, double beta) {
  switch (op) {
  case UnaryOp::Identity:
    return x;
  case UnaryOp::Relu:
    return x > 0 ? x : 0;
  case UnaryOp::LeakyRelu:
    return x >= 0 ? x : alpha * x;
  case UnaryOp::Elu:
    return x >= 0 ? x : alpha * (std::exp(x) - 1);
  case UnaryOp::Sigmoid:
    return 1 / (1 + std::exp(-x));
  case UnaryOp::HardSigmoid:
    return std::max(0.0, std::min(1.0, alpha * x + beta));
  case UnaryOp::HardSwish:
    return x * std::max(0.0, std::min(1.0, x / 6 + 0.5));
  case UnaryOp::Tanh:
    return std::tanh(x);
  case UnaryOp::Gelu:
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  case UnaryOp::GeluTanh:
    return 0.5 * x *
           (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  case UnaryOp::Silu:
    return x / (1 + std::exp(-x));
  case UnaryOp::Softplus:
    return std::log1p(std::exp(x));
  case UnaryOp::Exp:
    return std::exp(x);
  case UnaryOp::Log:
    return std::log(x);
  case UnaryOp::Sqrt:
    return std::sqrt(x);
  case UnaryOp::Reciprocal:
    return 1 / x;
  case UnaryOp::Neg:
    return -x;
  case UnaryOp::Abs:
    return std::fabs(x);
  case UnaryOp::Erf:
    return std::erf(x);
  case UnaryOp::Sin:
    return std::sin(x);
  case UnaryOp::Cos:
    return std::cos(x);
  case UnaryOp::Floor:
    return std::floor(x);
  case UnaryOp::Ceil:
    return std::ceil(x);
  case UnaryOp::Round:
    return std::nearbyint(x);
  case UnaryOp::Clip:
    return std::min(std::max(x, alpha), beta);
  case UnaryOp::Not:
    return x == 0 ? 1 : 0;
  case UnaryOp::PowScalar:
    return std::pow(x, alpha);
  }
  return x;
}

inline double applyActivation(Activation act, double x) {
  switch (act) {
  case Activation::None:
    return x;
  case Activation::Relu:
    return applyUnary(UnaryOp::Relu, x, 0, 0);
  case Activation::Gelu:
    return applyUnary(UnaryOp::Gelu, x, 0, 0);
  case Activation::GeluTanh:
    return applyUnary(UnaryOp::GeluTanh, x, 0, 0);
  }
  return x;
}

} // namespace memopt::rt

#endif // MEMOPT_LIB_RUNTIME_HOST_HOSTKERNELS_H
