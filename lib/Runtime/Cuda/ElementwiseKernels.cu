//===- ElementwiseKernels.cu - elementwise CUDA kernels -------------------===//
//
// Unary / binary / compare / where / cast / fill / expand and the conv
// bias+activation epilogue. Same-shape operands take a vectorized path
// (16-byte loads and stores when every pointer is 16-byte aligned), other
// shapes a grid-stride broadcast kernel with per-operand strides (0 where a
// dim broadcasts), as in onnxruntime's BinaryElementWise kernels.
//
//===----------------------------------------------------------------------===//

#include "CudaDevice.cuh"

#include <type_traits>

namespace memopt::rt {

namespace {

using fused::aligned16;
using fused::vectorWidth;

template <typename T, int V>
__global__ void unaryKernel(const T *__restrict__ x, T *__restrict__ y,
                            int64_t chunks, UnaryOp op, float alpha,
                            float beta) {
  MEMOPT_GRID_STRIDE(i, chunks) {
    T in[V], out[V];
    if constexpr (V > 1)
      *reinterpret_cast<uint4 *>(in) = reinterpret_cast<const uint4 *>(x)[i];
    else
      in[0] = x[i];
#pragma unroll
    for (int j = 0; j < V; ++j)
      out[j] = fromFloat<T>(unaryStep(op, toFloat(in[j]), alpha, beta));
    if constexpr (V > 1)
      reinterpret_cast<uint4 *>(y)[i] = *reinterpret_cast<uint4 *>(out);
    else
      y[i] = out[0];
  }
}

template <typename T>
__global__ void unaryIntKernel(const T *x, T *y, int64_t n, UnaryOp op) {
  MEMOPT_GRID_STRIDE(i, n) {
    T v = x[i];
    y[i] = op == UnaryOp::Neg    ? T(-v)
           : op == UnaryOp::Abs  ? (v < 0 ? T(-v) : v)
           : op == UnaryOp::Relu ? (v < 0 ? T(0) : v)
                                 : v;
  }
}

__global__ void notKernel(const uint8_t *x, uint8_t *y, int64_t n) {
  MEMOPT_GRID_STRIDE(i, n) { y[i] = x[i] ? 0 : 1; }
}

/// Runs a map over n elements: vectorized body on the aligned prefix, scalar
/// body on the tail.
template <typename T, typename VecLaunch, typename ScalarLaunch>
void splitVectorized(int64_t n, bool canVectorize, VecLaunch vec,
                     ScalarLaunch scalar) {
  constexpr int V = vectorWidth<T>();
  int64_t chunks = canVectorize ? n / V : 0;
  if (chunks)
    vec(chunks);
  if (n - chunks * V)
    scalar(chunks * V, n - chunks * V);
}

template <typename T>
__device__ __forceinline__ T combine(BinaryOp op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
    case BinaryOp::Add:
      return a + b;
    case BinaryOp::Sub:
      return a - b;
    case BinaryOp::Mul:
      return a * b;
    case BinaryOp::Div:
      return b == 0 ? T(0) : T(a / b);
    case BinaryOp::Max:
      return a > b ? a : b;
    case BinaryOp::Min:
      return a < b ? a : b;
    case BinaryOp::Mod: {
      if (b == 0 || b == T(-1)) // INT_MIN % -1 overflows; the answer is 0
        return 0;
      T r = a % b;
      return (r != 0 && ((r < 0) != (b < 0))) ? T(r + b) : r;
    }
    case BinaryOp::FMod:
      return b == 0 || b == T(-1) ? T(0) : T(a % b);
    default:
      return 0;
    }
  } else {
    return fromFloat<T>(binaryStep(op, toFloat(a), toFloat(b)));
  }
}

/// Index of element `e` in an operand that repeats every `period` elements
/// of the output (0: the operand is as large as the output).
__device__ __forceinline__ int64_t periodic(int64_t e, int64_t period) {
  return period == 0 ? e : period == 1 ? 0 : e % period;
}

/// Loads V elements starting at operand index `at` (a period-1 operand is
/// replicated).
template <typename T, int V>
__device__ __forceinline__ void loadChunk(const T *__restrict__ p, int64_t at,
                                          int64_t period, T *out) {
  if (period == 1) {
#pragma unroll
    for (int j = 0; j < V; ++j)
      out[j] = p[0];
  } else if constexpr (V > 1) {
    *reinterpret_cast<uint4 *>(out) = *reinterpret_cast<const uint4 *>(p + at);
  } else {
    out[0] = p[at];
  }
}

/// Binary op where each operand is either the output's size, a scalar, or a
/// suffix of the output's shape (a row bias [N] over [M, N]): operand index =
/// output index modulo the operand's period. Covers the common broadcasts
/// with vector loads and no per-dimension index math.
template <typename T, int V>
__global__ void
binaryPeriodicKernel(const T *__restrict__ a, const T *__restrict__ b,
                     T *__restrict__ c, int64_t start, int64_t chunks,
                     int64_t aPeriod, int64_t bPeriod, BinaryOp op) {
  MEMOPT_GRID_STRIDE(i, chunks) {
    int64_t e = start + i * V;
    T x[V], y[V], out[V];
    loadChunk<T, V>(a, periodic(e, aPeriod), aPeriod, x);
    loadChunk<T, V>(b, periodic(e, bPeriod), bPeriod, y);
#pragma unroll
    for (int j = 0; j < V; ++j)
      out[j] = combine(op, x[j], y[j]);
    if constexpr (V > 1)
      *reinterpret_cast<uint4 *>(c + e) = *reinterpret_cast<uint4 *>(out);
    else
      c[e] = out[0];
  }
}

template <typename T>
__global__ void binaryBroadcastKernel(const T *a, const T *b, T *c, int64_t n,
                                      KernelDims da, KernelDims db,
                                      BinaryOp op) {
  MEMOPT_GRID_STRIDE(i, n) {
    c[i] = combine(op, a[offsetOf(i, da)], b[offsetOf(i, db)]);
  }
}

/// The period of `t` inside `out` (see binaryPeriodicKernel): 0 when t has
/// out's layout, the element count when t's shape (without leading ones) is
/// a suffix of out's shape, -1 otherwise.
int64_t periodOf(const TensorRef &t, const TensorRef &out) {
  int64_t n = t.numElements();
  if (n == out.numElements())
    return 0;
  int first = 0;
  while (first < t.rank && t.shape[first] == 1)
    ++first;
  int suffix = t.rank - first;
  if (suffix > out.rank)
    return -1;
  for (int i = 0; i < suffix; ++i)
    if (t.shape[first + i] != out.shape[out.rank - suffix + i])
      return -1;
  return n;
}

template <typename T>
void launchBinary(Context &ctx, BinaryOp op, const TensorRef &a,
                  const TensorRef &b, const TensorRef &c) {
  int64_t n = c.numElements();
  const T *pa = static_cast<const T *>(a.data);
  const T *pb = static_cast<const T *>(b.data);
  T *pc = static_cast<T *>(c.data);
  int64_t aPeriod = periodOf(a, c), bPeriod = periodOf(b, c);
  if (aPeriod < 0 || bPeriod < 0) {
    binaryBroadcastKernel<T><<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
        pa, pb, pc, n, broadcastDims(a, c), broadcastDims(b, c), op);
    return;
  }
  constexpr int V = vectorWidth<T>();
  auto vectorOk = [&](const T *p, int64_t period) {
    return period == 1 || (aligned16(p) && period % V == 0);
  };
  bool vec = aligned16(pc) && vectorOk(pa, aPeriod) && vectorOk(pb, bPeriod);
  splitVectorized<T>(
      n, vec,
      [&](int64_t chunks) {
        binaryPeriodicKernel<T, V>
            <<<gridFor(ctx, chunks), 256, 0, ctx.stream>>>(
                pa, pb, pc, 0, chunks, aPeriod, bPeriod, op);
      },
      [&](int64_t start, int64_t count) {
        binaryPeriodicKernel<T, 1><<<gridFor(ctx, count), 256, 0, ctx.stream>>>(
            pa, pb, pc, start, count, aPeriod, bPeriod, op);
      });
}

//===----------------------------------------------------------------------===//
// Fused elementwise programs
//===----------------------------------------------------------------------===//

struct FusedArgs {
  ElementwiseStep steps[kMaxFusedSteps];
  const void *inputs[kMaxFusedInputs];
  int64_t periods[kMaxFusedInputs]; ///< see periodOf; -1: general broadcast
  int numSteps, numInputs;
};
struct FusedDims {
  KernelDims dims[kMaxFusedInputs];
};

/// Each thread loads V output positions of every input (16-byte vectors
/// where the layout allows, like binaryPeriodicKernel; General: per-element
/// broadcast offsets, V = 1), then runs the program on f32 registers and
/// stores once. Steps are the outer loop and the V elements the inner one:
/// the step's opcode is uniform across the grid (a kernel parameter), so
/// each step costs one well-predicted branch per V elements, not per element.
template <typename T, int V, bool General>
__global__ void fusedElementwiseKernel(FusedArgs a, FusedDims d,
                                       T *__restrict__ y, int64_t start,
                                       int64_t chunks) {
  MEMOPT_GRID_STRIDE(i, chunks) {
    int64_t e = start + i * V;
    float r[kMaxFusedInputs + kMaxFusedSteps][V];
    for (int k = 0; k < a.numInputs; ++k) {
      const T *p = static_cast<const T *>(a.inputs[k]);
      T in[V];
      if constexpr (General)
        in[0] = p[offsetOf(e, d.dims[k])];
      else
        loadChunk<T, V>(p, periodic(e, a.periods[k]), a.periods[k], in);
#pragma unroll
      for (int j = 0; j < V; ++j)
        r[k][j] = toFloat(in[j]);
    }
    for (int s = 0; s < a.numSteps; ++s) {
      const ElementwiseStep &st = a.steps[s];
      float *out = r[a.numInputs + s];
      const float *x = r[st.a];
      if (st.kind == ElementwiseStep::kUnary) {
#pragma unroll
        for (int j = 0; j < V; ++j)
          out[j] = unaryStep(UnaryOp(st.op), x[j], st.alpha, st.beta);
      } else {
        const float *z = r[st.b];
#pragma unroll
        for (int j = 0; j < V; ++j)
          out[j] = combine<float>(BinaryOp(st.op), x[j], z[j]);
      }
    }
    T out[V];
    const float *result = r[a.numInputs + a.numSteps - 1];
#pragma unroll
    for (int j = 0; j < V; ++j)
      out[j] = fromFloat<T>(result[j]);
    if constexpr (V > 1)
      *reinterpret_cast<uint4 *>(y + e) = *reinterpret_cast<uint4 *>(out);
    else
      y[e] = out[0];
  }
}

template <typename T>
void launchFused(Context &ctx, FusedArgs &args, const TensorRef *inputs,
                 const TensorRef &y) {
  int64_t n = y.numElements();
  T *py = static_cast<T *>(y.data);
  constexpr int V = vectorWidth<T>();
  bool general = false, vec = aligned16(py);
  for (int k = 0; k < args.numInputs; ++k) {
    args.periods[k] = periodOf(inputs[k], y);
    general = general || args.periods[k] < 0;
    vec = vec && (args.periods[k] == 1 ||
                  (aligned16(inputs[k].data) && args.periods[k] % V == 0));
  }
  FusedDims dims = {};
  if (general) {
    for (int k = 0; k < args.numInputs; ++k)
      dims.dims[k] = broadcastDims(inputs[k], y);
    fusedElementwiseKernel<T, 1, true>
        <<<gridFor(ctx, n), 256, 0, ctx.stream>>>(args, dims, py, 0, n);
    return;
  }
  splitVectorized<T>(
      n, vec,
      [&](int64_t chunks) {
        fusedElementwiseKernel<T, V, false>
            <<<gridFor(ctx, chunks), 256, 0, ctx.stream>>>(args, dims, py, 0,
                                                           chunks);
      },
      [&](int64_t start, int64_t count) {
        fusedElementwiseKernel<T, 1, false>
            <<<gridFor(ctx, count), 256, 0, ctx.stream>>>(args, dims, py, start,
                                                          count);
      });
}

/// Index of output element `i` in an operand: by its period (periodOf: the
/// output's size, a scalar or a suffix of the output's shape) when it has one,
/// else by per-dimension strides (the choice is the same for every thread).
/// Through the strides alone, the ReLU gradients `where(x > 0, dy, 0)` of
/// ResNet-50's f16 training step moved 257 GB/s on an H100 (node_relu: 1.0
/// ms for 257 MB; d9a817f:bench/results/train_amp_raw/profiles).
__device__ __forceinline__ int64_t operandIndex(int64_t i, int64_t period,
                                                const KernelDims &dims) {
  return period >= 0 ? periodic(i, period) : offsetOf(i, dims);
}

template <typename T>
__global__ void compareKernel(const T *a, const T *b, uint8_t *c, int64_t n,
                              KernelDims da, KernelDims db, int64_t aPeriod,
                              int64_t bPeriod, CompareOp op) {
  MEMOPT_GRID_STRIDE(i, n) {
    T x = a[operandIndex(i, aPeriod, da)], y = b[operandIndex(i, bPeriod, db)];
    bool r;
    if constexpr (std::is_integral_v<T>) {
      r = op == CompareOp::Equal         ? x == y
          : op == CompareOp::Less        ? x < y
          : op == CompareOp::LessOrEqual ? x <= y
          : op == CompareOp::Greater     ? x > y
                                         : x >= y;
    } else {
      float fx = toFloat(x), fy = toFloat(y);
      r = op == CompareOp::Equal         ? fx == fy
          : op == CompareOp::Less        ? fx < fy
          : op == CompareOp::LessOrEqual ? fx <= fy
          : op == CompareOp::Greater     ? fx > fy
                                         : fx >= fy;
    }
    c[i] = r;
  }
}

__global__ void logicalKernel(const uint8_t *a, const uint8_t *b, uint8_t *c,
                              int64_t n, KernelDims da, KernelDims db,
                              LogicalOp op) {
  MEMOPT_GRID_STRIDE(i, n) {
    bool x = a[offsetOf(i, da)] != 0, y = b[offsetOf(i, db)] != 0;
    c[i] = op == LogicalOp::And  ? (x && y)
           : op == LogicalOp::Or ? (x || y)
                                 : (x != y);
  }
}

template <typename T>
__global__ void whereKernel(const uint8_t *cond, const T *x, const T *z, T *y,
                            int64_t n, KernelDims dc, KernelDims dx,
                            KernelDims dz, int64_t cPeriod, int64_t xPeriod,
                            int64_t zPeriod) {
  MEMOPT_GRID_STRIDE(i, n) {
    y[i] = cond[operandIndex(i, cPeriod, dc)] ? x[operandIndex(i, xPeriod, dx)]
                                              : z[operandIndex(i, zPeriod, dz)];
  }
}

template <typename T>
__global__ void isNaNKernel(const T *x, uint8_t *y, int64_t n) {
  MEMOPT_GRID_STRIDE(i, n) {
    if constexpr (std::is_same_v<T, double>)
      y[i] = isnan(x[i]) ? 1 : 0;
    else
      y[i] = isnan(toFloat(x[i])) ? 1 : 0;
  }
}

/// y[i] = start + i * delta, start and delta read on the device (they may be
/// computed by an earlier op). Integers exactly, floats in double.
template <typename T>
__global__ void rangeKernel(const T *start, const T *delta, T *y, int64_t n) {
  MEMOPT_GRID_STRIDE(i, n) {
    if constexpr (std::is_integral_v<T>)
      y[i] = T(start[0] + T(i) * delta[0]);
    else if constexpr (std::is_same_v<T, double>)
      y[i] = start[0] + double(i) * delta[0];
    else
      y[i] = fromFloat<T>(float(double(toFloat(start[0])) +
                                double(i) * double(toFloat(delta[0]))));
  }
}

template <typename T>
__global__ void broadcastCopyKernel(const T *x, T *y, int64_t n,
                                    KernelDims dx) {
  MEMOPT_GRID_STRIDE(i, n) { y[i] = x[offsetOf(i, dx)]; }
}

/// y[0, n) = one value, `x[0]` (a one-element tensor on the device: a scalar
/// expand) or else `value`, in 16-byte stores (y aligned to 16 bytes): the
/// elementwise broadcast kernel's index arithmetic made ViT's zero-filled
/// gradient buffers (expand of a scalar 0 to 29 MB) run at about a tenth of
/// the memory bandwidth.
template <typename T>
__global__ void splatKernel(const T *x, T value, T *y, int64_t n) {
  constexpr int kLanes = 16 / sizeof(T);
  T v = x ? x[0] : value;
  union {
    uint4 vector;
    T lanes[kLanes];
  } pack;
#pragma unroll
  for (int j = 0; j < kLanes; ++j)
    pack.lanes[j] = v;
  int64_t vectors = n / kLanes;
  uint4 *out = reinterpret_cast<uint4 *>(y);
  MEMOPT_GRID_STRIDE(i, vectors) { out[i] = pack.vector; }
  int64_t tail =
      vectors * kLanes + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tail < n)
    y[tail] = v;
}

template <typename T> __global__ void fillKernel(T *y, int64_t n, T value) {
  MEMOPT_GRID_STRIDE(i, n) { y[i] = value; }
}

/// Launches splatKernel where y is 16-byte aligned; false otherwise.
template <typename T>
bool launchSplat(Context &ctx, const T *x, T value, TensorRef y) {
  if (reinterpret_cast<uintptr_t>(y.data) % 16 != 0)
    return false;
  int64_t n = y.numElements();
  int64_t vectors = std::max<int64_t>(1, n / int64_t(16 / sizeof(T)));
  splatKernel<T><<<gridFor(ctx, vectors), 256, 0, ctx.stream>>>(
      x, value, static_cast<T *>(y.data), n);
  return true;
}

__device__ double loadAny(const void *p, DType t, int64_t i) {
  switch (t) {
  case DType::F32:
    return static_cast<const float *>(p)[i];
  case DType::F16:
    return __half2float(static_cast<const __half *>(p)[i]);
  case DType::BF16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
  case DType::F64:
    return static_cast<const double *>(p)[i];
  case DType::I64:
    return double(static_cast<const int64_t *>(p)[i]);
  case DType::I32:
    return static_cast<const int32_t *>(p)[i];
  case DType::I8:
    return static_cast<const int8_t *>(p)[i];
  default:
    return static_cast<const uint8_t *>(p)[i];
  }
}

__device__ void storeAny(void *p, DType t, int64_t i, double v) {
  bool finite = isfinite(v);
  switch (t) {
  case DType::F32:
    static_cast<float *>(p)[i] = float(v);
    return;
  case DType::F16:
    static_cast<__half *>(p)[i] = __double2half(v);
    return;
  case DType::BF16:
    static_cast<__nv_bfloat16 *>(p)[i] = __double2bfloat16(v);
    return;
  case DType::F64:
    static_cast<double *>(p)[i] = v;
    return;
  case DType::I64:
    static_cast<int64_t *>(p)[i] = finite ? int64_t(v) : 0;
    return;
  case DType::I32:
    static_cast<int32_t *>(p)[i] = finite ? int32_t(v) : 0;
    return;
  case DType::I8:
    static_cast<int8_t *>(p)[i] = finite ? int8_t(v) : 0;
    return;
  case DType::U8:
    static_cast<uint8_t *>(p)[i] = finite ? uint8_t(v) : 0;
    return;
  case DType::Bool:
    static_cast<uint8_t *>(p)[i] = v != 0.0;
    return;
  }
}

__global__ void castKernel(const void *x, DType from, void *y, DType to,
                           int64_t n) {
  MEMOPT_GRID_STRIDE(i, n) {
    if (from == DType::I64 && to == DType::I32)
      static_cast<int32_t *>(y)[i] =
          int32_t(static_cast<const int64_t *>(x)[i]);
    else if (from == DType::I32 && to == DType::I64)
      static_cast<int64_t *>(y)[i] = static_cast<const int32_t *>(x)[i];
    else
      storeAny(y, to, i, loadAny(x, from, i));
  }
}

/// Casts between two float types, V elements per thread (16 bytes of the
/// wider type): castKernel goes through double and a per-element switch on
/// both types, and ran mixed precision's f32 <-> bf16 casts at about half the
/// H200's bandwidth (2 TB/s for the 32000 x 2048 embedding). The values are
/// castKernel's: both round the same f32 value to nearest even.
template <typename From, typename To>
__global__ void castVectorKernel(const From *__restrict__ x, To *__restrict__ y,
                                 int64_t chunks) {
  constexpr int V = fused::vectorWidth<From, To>();
  MEMOPT_GRID_STRIDE(c, chunks) {
    From in[V];
    fused::copyVector<From, V>(in, x + c * V);
    To out[V];
#pragma unroll
    for (int j = 0; j < V; ++j)
      out[j] = fromFloat<To>(toFloat(in[j]));
    fused::copyVector<To, V>(y + c * V, out);
  }
}

template <typename T>
__global__ void biasActivationKernel(T *y, const T *bias, const T *residual,
                                     int64_t n, int64_t channels,
                                     int64_t spatial, Activation act) {
  MEMOPT_GRID_STRIDE(i, n) {
    float v = toFloat(y[i]);
    if (bias)
      v += toFloat(bias[(i / spatial) % channels]);
    if (residual)
      v += toFloat(residual[i]);
    y[i] = fromFloat<T>(applyActivationDevice(act, v));
  }
}

} // namespace

void unary(Context &ctx, const char *node, UnaryOp op, float alpha, float beta,
           TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateUnary(ctx, node, op, x, y))
    return;
  int64_t n = x.numElements();
  if (n == 0)
    return;
  if (op == UnaryOp::Not) {
    notKernel<<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
        static_cast<const uint8_t *>(x.data), static_cast<uint8_t *>(y.data),
        n);
  } else if (x.dtype == DType::I32) {
    unaryIntKernel<int32_t><<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
        static_cast<const int32_t *>(x.data), static_cast<int32_t *>(y.data), n,
        op);
  } else if (x.dtype == DType::I64) {
    unaryIntKernel<int64_t><<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
        static_cast<const int64_t *>(x.data), static_cast<int64_t *>(y.data), n,
        op);
  } else {
    MEMOPT_DISPATCH_FLOAT(x.dtype, T, {
      const T *px = static_cast<const T *>(x.data);
      T *py = static_cast<T *>(y.data);
      splitVectorized<T>(
          n, aligned16(px) && aligned16(py),
          [&](int64_t chunks) {
            unaryKernel<T, vectorWidth<T>()>
                <<<gridFor(ctx, chunks), 256, 0, ctx.stream>>>(px, py, chunks,
                                                               op, alpha, beta);
          },
          [&](int64_t start, int64_t count) {
            unaryKernel<T, 1><<<gridFor(ctx, count), 256, 0, ctx.stream>>>(
                px + start, py + start, count, op, alpha, beta);
          });
    });
  }
  checkLaunch(ctx, node);
}

void binary(Context &ctx, const char *node, BinaryOp op, TensorRef a,
            TensorRef b, TensorRef c) {
  if (hasError(ctx) || !validateBinary(ctx, node, op, a, b, c))
    return;
  if (c.numElements() == 0)
    return;
  if (c.dtype == DType::I32)
    launchBinary<int32_t>(ctx, op, a, b, c);
  else if (c.dtype == DType::I64)
    launchBinary<int64_t>(ctx, op, a, b, c);
  else {
    MEMOPT_DISPATCH_FLOAT(c.dtype, T, launchBinary<T>(ctx, op, a, b, c));
  }
  checkLaunch(ctx, node);
}

namespace {

/// The interpreter for a program whose inputs and result differ in element
/// type (a cast ends the chain): one element per thread, every input through
/// its broadcast strides, converted like castKernel.
__global__ void fusedConvertKernel(FusedArgs a, FusedDims d, DType from,
                                   void *y, DType to, int64_t n) {
  MEMOPT_GRID_STRIDE(e, n) {
    float r[kMaxFusedInputs + kMaxFusedSteps];
    for (int k = 0; k < a.numInputs; ++k)
      r[k] = float(loadAny(a.inputs[k], from, offsetOf(e, d.dims[k])));
    for (int s = 0; s < a.numSteps; ++s) {
      const ElementwiseStep &st = a.steps[s];
      r[a.numInputs + s] =
          st.kind == ElementwiseStep::kUnary
              ? unaryStep(UnaryOp(st.op), r[st.a], st.alpha, st.beta)
              : combine<float>(BinaryOp(st.op), r[st.a], r[st.b]);
    }
    storeAny(y, to, e, r[a.numInputs + a.numSteps - 1]);
  }
}

} // namespace

void fusedElementwise(Context &ctx, const char *node,
                      const ElementwiseStep *steps, int numSteps,
                      const TensorRef *inputs, int numInputs, TensorRef y) {
  void *stream = nullptr;
  unsigned maxBlocks = 0;
  if (!fusedKernelBegin(ctx, node, steps, numSteps, inputs, numInputs, y,
                        &stream, &maxBlocks) ||
      y.numElements() == 0)
    return;
  FusedArgs args = {};
  args.numSteps = numSteps;
  args.numInputs = numInputs;
  for (int s = 0; s < numSteps; ++s)
    args.steps[s] = steps[s];
  for (int k = 0; k < numInputs; ++k)
    args.inputs[k] = inputs[k].data;
  if (inputs[0].dtype != y.dtype) {
    FusedDims dims = {};
    for (int k = 0; k < numInputs; ++k)
      dims.dims[k] = broadcastDims(inputs[k], y);
    int64_t n = y.numElements();
    fusedConvertKernel<<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
        args, dims, inputs[0].dtype, y.data, y.dtype, n);
  } else {
    MEMOPT_DISPATCH_FLOAT(y.dtype, T, launchFused<T>(ctx, args, inputs, y));
  }
  fusedKernelEnd(ctx, node);
}

bool fusedKernelBegin(Context &ctx, const char *node,
                      const ElementwiseStep *steps, int numSteps,
                      const TensorRef *inputs, int numInputs,
                      const TensorRef &y, void **stream, unsigned *maxBlocks) {
  if (hasError(ctx) || !validateFusedElementwise(ctx, node, steps, numSteps,
                                                 inputs, numInputs, y))
    return false;
  *stream = ctx.stream;
  *maxBlocks = gridFor(ctx, int64_t(1) << 62);
  return true;
}

void fusedKernelEnd(Context &ctx, const char *node) { checkLaunch(ctx, node); }

void compare(Context &ctx, const char *node, CompareOp op, TensorRef a,
             TensorRef b, TensorRef c) {
  if (hasError(ctx) || !validateCompare(ctx, node, a, b, c, false))
    return;
  int64_t n = c.numElements();
  if (n == 0)
    return;
  KernelDims da = broadcastDims(a, c), db = broadcastDims(b, c);
  int64_t ap = periodOf(a, c), bp = periodOf(b, c);
  uint8_t *pc = static_cast<uint8_t *>(c.data);
  unsigned grid = gridFor(ctx, n);
  if (a.dtype == DType::I32)
    compareKernel<int32_t><<<grid, 256, 0, ctx.stream>>>(
        static_cast<const int32_t *>(a.data),
        static_cast<const int32_t *>(b.data), pc, n, da, db, ap, bp, op);
  else if (a.dtype == DType::I64)
    compareKernel<int64_t><<<grid, 256, 0, ctx.stream>>>(
        static_cast<const int64_t *>(a.data),
        static_cast<const int64_t *>(b.data), pc, n, da, db, ap, bp, op);
  else if (isFloatType(a.dtype)) {
    MEMOPT_DISPATCH_FLOAT(a.dtype, T,
                          compareKernel<T><<<grid, 256, 0, ctx.stream>>>(
                              static_cast<const T *>(a.data),
                              static_cast<const T *>(b.data), pc, n, da, db, ap,
                              bp, op));
  } else {
    failf(ctx, node, "compare on %s is not supported on CUDA",
          dtypeName(a.dtype));
    return;
  }
  checkLaunch(ctx, node);
}

void logical(Context &ctx, const char *node, LogicalOp op, TensorRef a,
             TensorRef b, TensorRef c) {
  if (hasError(ctx) || !validateCompare(ctx, node, a, b, c, true))
    return;
  int64_t n = c.numElements();
  if (n == 0)
    return;
  logicalKernel<<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
      static_cast<const uint8_t *>(a.data),
      static_cast<const uint8_t *>(b.data), static_cast<uint8_t *>(c.data), n,
      broadcastDims(a, c), broadcastDims(b, c), op);
  checkLaunch(ctx, node);
}

void where(Context &ctx, const char *node, TensorRef cond, TensorRef x,
           TensorRef z, TensorRef y) {
  if (hasError(ctx) || !validateWhere(ctx, node, cond, x, z, y))
    return;
  int64_t n = y.numElements();
  if (n == 0)
    return;
  MEMOPT_DISPATCH_BYTES(dtypeSize(y.dtype), T,
                        whereKernel<T><<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
                            static_cast<const uint8_t *>(cond.data),
                            static_cast<const T *>(x.data),
                            static_cast<const T *>(z.data),
                            static_cast<T *>(y.data), n, broadcastDims(cond, y),
                            broadcastDims(x, y), broadcastDims(z, y),
                            periodOf(cond, y), periodOf(x, y), periodOf(z, y)));
  checkLaunch(ctx, node);
}

void isNaN(Context &ctx, const char *node, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateIsNaN(ctx, node, x, y))
    return;
  int64_t n = y.numElements();
  if (n == 0)
    return;
  uint8_t *py = static_cast<uint8_t *>(y.data);
  unsigned grid = gridFor(ctx, n);
  if (x.dtype == DType::F64) {
    isNaNKernel<double><<<grid, 256, 0, ctx.stream>>>(
        static_cast<const double *>(x.data), py, n);
  } else {
    MEMOPT_DISPATCH_FLOAT(x.dtype, T,
                          isNaNKernel<T><<<grid, 256, 0, ctx.stream>>>(
                              static_cast<const T *>(x.data), py, n));
  }
  checkLaunch(ctx, node);
}

void range(Context &ctx, const char *node, TensorRef start, TensorRef delta,
           TensorRef y) {
  if (hasError(ctx) || !validateRange(ctx, node, start, delta, y))
    return;
  int64_t n = y.numElements();
  if (n == 0)
    return;
  unsigned grid = gridFor(ctx, n);
  auto launch = [&](auto *typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    rangeKernel<T><<<grid, 256, 0, ctx.stream>>>(
        static_cast<const T *>(start.data), static_cast<const T *>(delta.data),
        static_cast<T *>(y.data), n);
  };
  if (y.dtype == DType::I32)
    launch(static_cast<int32_t *>(nullptr));
  else if (y.dtype == DType::I64)
    launch(static_cast<int64_t *>(nullptr));
  else if (y.dtype == DType::F64)
    launch(static_cast<double *>(nullptr));
  else
    MEMOPT_DISPATCH_FLOAT(y.dtype, T, launch(static_cast<T *>(nullptr)));
  checkLaunch(ctx, node);
}

void cast(Context &ctx, const char *node, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateCast(ctx, node, x, y))
    return;
  int64_t n = x.numElements();
  if (n == 0)
    return;
  if (x.dtype == y.dtype) {
    copy(ctx, node, x, y);
    return;
  }
  int64_t done = 0;
  if (isFloatType(x.dtype) && isFloatType(y.dtype) && x.dtype != DType::F64 &&
      y.dtype != DType::F64 && aligned16(x.data) && aligned16(y.data)) {
    MEMOPT_DISPATCH_FLOAT(
        x.dtype, From, MEMOPT_DISPATCH_FLOAT(y.dtype, To, {
          constexpr int V = fused::vectorWidth<From, To>();
          int64_t chunks = n / V;
          if (chunks)
            castVectorKernel<From, To>
                <<<gridFor(ctx, chunks), 256, 0, ctx.stream>>>(
                    static_cast<const From *>(x.data),
                    static_cast<To *>(y.data), chunks);
          done = chunks * V;
        }));
  }
  if (done < n)
    castKernel<<<gridFor(ctx, n - done), 256, 0, ctx.stream>>>(
        static_cast<const uint8_t *>(x.data) + done * dtypeSize(x.dtype),
        x.dtype, static_cast<uint8_t *>(y.data) + done * dtypeSize(y.dtype),
        y.dtype, n - done);
  checkLaunch(ctx, node);
}

void fill(Context &ctx, const char *node, double value, TensorRef y) {
  if (hasError(ctx) || !checkTensor(ctx, node, y, "output"))
    return;
  int64_t n = y.numElements();
  if (n == 0)
    return;
  uint64_t pattern = 0;
  storeFromDouble(&pattern, y.dtype, 0, value);
  MEMOPT_DISPATCH_BYTES(dtypeSize(y.dtype), T, {
    T v;
    std::memcpy(&v, &pattern, sizeof(T));
    if (!launchSplat<T>(ctx, nullptr, v, y))
      fillKernel<T><<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
          static_cast<T *>(y.data), n, v);
  });
  checkLaunch(ctx, node);
}

void expand(Context &ctx, const char *node, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateExpand(ctx, node, x, y))
    return;
  int64_t n = y.numElements();
  if (n == 0)
    return;
  MEMOPT_DISPATCH_BYTES(dtypeSize(y.dtype), T, {
    const T *source = static_cast<const T *>(x.data);
    if (x.numElements() != 1 || !launchSplat<T>(ctx, source, T(), y))
      broadcastCopyKernel<T><<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
          source, static_cast<T *>(y.data), n, broadcastDims(x, y));
  });
  checkLaunch(ctx, node);
}

bool launchBiasActivation(Context &ctx, const char *node, TensorRef y,
                          const TensorRef *bias, int64_t channels,
                          int64_t spatial, Activation activation,
                          const TensorRef *residual) {
  int64_t n = y.numElements();
  if (n == 0)
    return true;
  MEMOPT_DISPATCH_FLOAT(
      y.dtype, T,
      biasActivationKernel<T><<<gridFor(ctx, n), 256, 0, ctx.stream>>>(
          static_cast<T *>(y.data),
          bias ? static_cast<const T *>(bias->data) : nullptr,
          residual ? static_cast<const T *>(residual->data) : nullptr, n,
          channels, spatial, activation));
  return checkLaunch(ctx, node);
}

} // namespace memopt::rt
