//===- FusedKernel.cuh - generated fused elementwise kernels -*- CUDA -*-===//
//
// CUDA only. memopt-compile writes one `Program` type per
// memopt.fused_elementwise op into a CUDA program (OUT.cu):
//
//   struct FusedProgram3 {
//     static constexpr int kInputs = 2;
//     __device__ static float apply(const float *x) {
//       const float r2 = binaryStep(BinaryOp::Add, x[0], x[1]);
//       return unaryStep(UnaryOp::Relu, r2, 0.0f, 0.0f);
//     }
//   };
//   fusedElementwiseProgram<FusedProgram3, float, float>(ctx, node, steps,
//                                                        2, inputs, 2, y);
//
// and nvcc inlines the steps into one kernel per op: every input read once
// (16-byte vectors where the layout allows), the chain on f32 registers, one
// store. The inputs share one element type and the result may have another
// (a cast that ends the chain, as XLA fuses a convert into its loop fusion):
// the conversion happens on the f32 register before the store. This is what
// XLA's loop fusion and TorchInductor's pointwise kernels
// do (code generated per fused group); the step table stays beside it, so an
// input layout the kernel does not address (a broadcast whose non-1 dims are
// not one contiguous run of the output's) and the host backend take the
// interpreter, runtime fusedElementwise().
//
// The device math (toFloat / fromFloat, the activations, unaryStep,
// binaryStep) is the runtime's own: its kernels include this header too, so a
// generated kernel and the runtime's unary / binary kernels compute the same
// values.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_FUSEDKERNEL_CUH
#define MEMOPT_RUNTIME_FUSEDKERNEL_CUH

#include "memopt/Runtime/Runtime.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace memopt::rt {

//===----------------------------------------------------------------------===//
// Device math shared by the runtime's kernels and generated ones
//===----------------------------------------------------------------------===//

__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(__half v) { return __half2float(v); }
__device__ __forceinline__ float toFloat(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <typename T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ float fromFloat<float>(float v) {
  return v;
}
template <> __device__ __forceinline__ __half fromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

__device__ __forceinline__ float applyActivationDevice(Activation a, float x) {
  switch (a) {
  case Activation::Relu:
    return fmaxf(x, 0.0f);
  case Activation::Gelu:
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  case Activation::GeluTanh:
    return 0.5f * x *
           (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  default:
    return x;
  }
}

/// One unary step in f32 (alpha / beta: LeakyRelu, Elu, HardSigmoid, Clip,
/// PowScalar). With a constant `op` the switch folds away.
__device__ __forceinline__ float unaryStep(UnaryOp op, float x, float alpha,
                                           float beta) {
  switch (op) {
  case UnaryOp::Identity:
    return x;
  case UnaryOp::Relu:
    return fmaxf(x, 0.0f);
  case UnaryOp::LeakyRelu:
    return x >= 0.0f ? x : alpha * x;
  case UnaryOp::Elu:
    return x >= 0.0f ? x : alpha * expm1f(x);
  case UnaryOp::Sigmoid:
    return 1.0f / (1.0f + __expf(-x));
  case UnaryOp::HardSigmoid:
    return fminf(fmaxf(alpha * x + beta, 0.0f), 1.0f);
  case UnaryOp::HardSwish:
    return x * fminf(fmaxf(x / 6.0f + 0.5f, 0.0f), 1.0f);
  case UnaryOp::Tanh:
    return tanhf(x);
  case UnaryOp::Gelu:
    return applyActivationDevice(Activation::Gelu, x);
  case UnaryOp::GeluTanh:
    return applyActivationDevice(Activation::GeluTanh, x);
  case UnaryOp::Silu:
    return x / (1.0f + __expf(-x));
  case UnaryOp::Softplus:
    return x > 20.0f ? x : log1pf(__expf(x));
  case UnaryOp::Exp:
    return expf(x);
  case UnaryOp::Log:
    return logf(x);
  case UnaryOp::Sqrt:
    return sqrtf(x);
  case UnaryOp::Reciprocal:
    return 1.0f / x;
  case UnaryOp::Neg:
    return -x;
  case UnaryOp::Abs:
    return fabsf(x);
  case UnaryOp::Erf:
    return erff(x);
  case UnaryOp::Sin:
    return sinf(x);
  case UnaryOp::Cos:
    return cosf(x);
  case UnaryOp::Floor:
    return floorf(x);
  case UnaryOp::Ceil:
    return ceilf(x);
  case UnaryOp::Round:
    return rintf(x);
  case UnaryOp::Clip:
    return fminf(fmaxf(x, alpha), beta);
  case UnaryOp::PowScalar:
    return powf(x, alpha);
  case UnaryOp::Not:
    return x == 0.0f ? 1.0f : 0.0f;
  }
  return x;
}

/// One binary step in f32 (Mod / FMod: C fmod, as ONNX allows on floats).
__device__ __forceinline__ float binaryStep(BinaryOp op, float x, float y) {
  switch (op) {
  case BinaryOp::Add:
    return x + y;
  case BinaryOp::Sub:
    return x - y;
  case BinaryOp::Mul:
    return x * y;
  case BinaryOp::Div:
    return x / y;
  case BinaryOp::Pow:
    return powf(x, y);
  case BinaryOp::Max:
    return fmaxf(x, y);
  case BinaryOp::Min:
    return fminf(x, y);
  case BinaryOp::ReluGrad:
    return y > 0.0f ? x : 0.0f;
  default:
    return fmodf(x, y);
  }
}

//===----------------------------------------------------------------------===//
// Generated fused elementwise kernels
//===----------------------------------------------------------------------===//

/// Checks the op like fusedElementwise() does and hands out the context's
/// stream (a cudaStream_t) and the grid-size cap; false when the context has
/// an error or the op is invalid (the error names `node`). CUDA backend only.
bool fusedKernelBegin(Context &ctx, const char *node,
                      const ElementwiseStep *steps, int numSteps,
                      const TensorRef *inputs, int numInputs,
                      const TensorRef &y, void **stream, unsigned *maxBlocks);
/// Checks the launch that was just made for `node`.
void fusedKernelEnd(Context &ctx, const char *node);

namespace fused {

/// How a kernel reads input k at output index e: element (e / div) % mod.
/// Full: the output's own index (div 1, mod n, no division). Replicated: one
/// element for a vector of V outputs (div a multiple of V, or a scalar).
/// Block: a vector load at (e % mod) (div 1, mod a multiple of V).
enum class Access : int32_t { Full, Replicated, Block };

struct InputAccess {
  const void *data;
  Access access;
  uint64_t div, mod;
};

template <int N> struct Inputs { InputAccess input[N]; };

/// Elements per 16-byte vector, and whether a pointer allows such vectors.
template <typename T> constexpr int vectorWidth() { return 16 / sizeof(T); }
/// Elements per vector when a kernel reads TIn and writes TOut: 16 bytes of
/// the wider type (the narrower one moves 8 or 4 bytes at a time).
template <typename TIn, typename TOut> constexpr int vectorWidth() {
  return 16 / (sizeof(TIn) > sizeof(TOut) ? sizeof(TIn) : sizeof(TOut));
}

/// Copies N elements of T (N * sizeof(T) is 2, 4, 8 or 16 bytes, and both
/// pointers are aligned to it) as one access.
template <typename T, int N>
__device__ __forceinline__ void copyVector(T *to, const T *from) {
  constexpr int bytes = N * int(sizeof(T));
  static_assert(bytes == 2 || bytes == 4 || bytes == 8 || bytes == 16,
                "a vector is 2, 4, 8 or 16 bytes");
  if constexpr (bytes == 16)
    *reinterpret_cast<uint4 *>(to) = *reinterpret_cast<const uint4 *>(from);
  else if constexpr (bytes == 8)
    *reinterpret_cast<uint2 *>(to) = *reinterpret_cast<const uint2 *>(from);
  else if constexpr (bytes == 4)
    *reinterpret_cast<uint32_t *>(to) =
        *reinterpret_cast<const uint32_t *>(from);
  else
    *reinterpret_cast<uint16_t *>(to) =
        *reinterpret_cast<const uint16_t *>(from);
}
inline bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

template <typename T, int V, typename Index>
__device__ __forceinline__ void load(const InputAccess &a, Index e,
                                     float (&out)[V]) {
  const T *p = static_cast<const T *>(a.data);
  if (a.access == Access::Full) {
    T v[V];
    copyVector<T, V>(v, p + e);
#pragma unroll
    for (int j = 0; j < V; ++j)
      out[j] = toFloat(v[j]);
    return;
  }
  Index at = a.mod == 1 ? Index(0) : Index(e / Index(a.div)) % Index(a.mod);
  if (a.access == Access::Replicated) {
    float v = toFloat(p[at]);
#pragma unroll
    for (int j = 0; j < V; ++j)
      out[j] = v;
    return;
  }
  T v[V];
  copyVector<T, V>(v, p + at);
#pragma unroll
  for (int j = 0; j < V; ++j)
    out[j] = toFloat(v[j]);
}

/// Outputs [start + V * c, start + V * (c + 1)) for c < chunks, grid-stride.
template <typename Program, typename TIn, typename T, int V, typename Index>
__global__ void kernel(Inputs<Program::kInputs> in, T *__restrict__ y,
                       Index start, Index chunks) {
  for (Index c = Index(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks;
       c += Index(gridDim.x) * blockDim.x) {
    Index e = start + c * V;
    float x[Program::kInputs][V];
#pragma unroll
    for (int k = 0; k < Program::kInputs; ++k)
      load<TIn, V, Index>(in.input[k], e, x[k]);
    T out[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float element[Program::kInputs];
#pragma unroll
      for (int k = 0; k < Program::kInputs; ++k)
        element[k] = x[k][j];
      out[j] = fromFloat<T>(Program::apply(element));
    }
    copyVector<T, V>(y + e, out);
  }
}

/// Input `t` read at output `y`'s index as (e / div) % mod: true when the
/// non-1 dims of `t` (aligned to y's last dims) are one contiguous run of
/// y's dims of the same sizes.
inline bool blockOf(const TensorRef &t, const TensorRef &y, uint64_t &div,
                    uint64_t &mod) {
  int offset = y.rank - t.rank;
  if (offset < 0)
    return false;
  int first = -1, last = -1;
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] == 1)
      continue;
    if (t.shape[i] != y.shape[offset + i] || (last >= 0 && last != i - 1))
      return false;
    if (first < 0)
      first = i;
    last = i;
  }
  div = 1;
  mod = 1;
  if (first < 0)
    return true;
  for (int i = offset + last + 1; i < y.rank; ++i)
    div *= uint64_t(y.shape[i]);
  for (int i = first; i <= last; ++i)
    mod *= uint64_t(t.shape[i]);
  return true;
}

template <typename Program, typename TIn, typename T, typename Index>
void launch(const Inputs<Program::kInputs> &in, T *y, uint64_t n, bool vector,
            cudaStream_t stream, unsigned maxBlocks) {
  constexpr int V = vectorWidth<TIn, T>();
  auto grid = [&](uint64_t items) {
    uint64_t blocks = (items + 255) / 256;
    return unsigned(blocks < 1 ? 1 : blocks > maxBlocks ? maxBlocks : blocks);
  };
  uint64_t chunks = vector ? n / V : 0;
  if (chunks)
    kernel<Program, TIn, T, V, Index>
        <<<grid(chunks), 256, 0, stream>>>(in, y, Index(0), Index(chunks));
  if (uint64_t tail = n - chunks * V)
    kernel<Program, TIn, T, 1, Index>
        <<<grid(tail), 256, 0, stream>>>(in, y, Index(chunks * V), Index(tail));
}

} // namespace fused

/// y = Program::apply over the inputs, one generated kernel; the runtime's
/// step interpreter (fusedElementwise) where an input's broadcast is not a
/// contiguous block of y's dims. TIn and T: float, __half or __nv_bfloat16,
/// the inputs' type and y's.
template <typename Program, typename TIn, typename T>
void fusedElementwiseProgram(Context &ctx, const char *node,
                             const ElementwiseStep *steps, int numSteps,
                             const TensorRef *inputs, int numInputs,
                             TensorRef y) {
  using namespace fused;
  uint64_t n = uint64_t(y.numElements());
  constexpr int V = vectorWidth<TIn, T>();
  if (numInputs != Program::kInputs) {
    fusedElementwise(ctx, node, steps, numSteps, inputs, numInputs, y);
    return;
  }
  Inputs<Program::kInputs> in = {};
  bool vector = aligned16(y.data);
  for (int k = 0; k < numInputs; ++k) {
    InputAccess &a = in.input[k];
    a.data = inputs[k].data;
    if (uint64_t(inputs[k].numElements()) == n) {
      a.access = Access::Full;
      vector = vector && aligned16(a.data);
      continue;
    }
    if (!blockOf(inputs[k], y, a.div, a.mod)) {
      fusedElementwise(ctx, node, steps, numSteps, inputs, numInputs, y);
      return;
    }
    bool replicated = a.mod == 1 || a.div % V == 0;
    a.access = replicated ? Access::Replicated : Access::Block;
    vector = vector && (replicated ||
                        (a.div == 1 && a.mod % V == 0 && aligned16(a.data)));
  }
  void *stream = nullptr;
  unsigned maxBlocks = 1;
  if (!fusedKernelBegin(ctx, node, steps, numSteps, inputs, numInputs, y,
                        &stream, &maxBlocks) ||
      n == 0)
    return;
  T *py = static_cast<T *>(y.data);
  if (n < (uint64_t(1) << 31))
    launch<Program, TIn, T, uint32_t>(
        in, py, n, vector, static_cast<cudaStream_t>(stream), maxBlocks);
  else
    launch<Program, TIn, T, uint64_t>(
        in, py, n, vector, static_cast<cudaStream_t>(stream), maxBlocks);
  fusedKernelEnd(ctx, node);
}

} // namespace memopt::rt

#endif // MEMOPT_RUNTIME_FUSEDKERNEL_CUH
