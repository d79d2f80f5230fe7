//===- HostBackend.cpp - the CPU reference backend ------------------------===//
//
// Straightforward loops, correct above all: this backend is the reference the
// CUDA backend is compared against and the way CI catches aliasing mistakes of
// the memory planner without a GPU. Float math converts every element to float
// (f16/bf16 included) and accumulates in double; results are rounded once on
// store. Inputs are converted before any output is written, so an op may run
// in place (y aliasing x) wherever the compiler allows it.
//
// Semantics follow the ONNX operator specification; the structure (one loop
// nest per op, index decomposition for broadcasting) follows TFLite's
// reference kernels.
//
//===----------------------------------------------------------------------===//

#include "../Internal.h"
#include "memopt/Runtime/Runtime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace memopt::rt {

struct Context {
  std::string error;
  std::chrono::steady_clock::time_point timerStart;
  /// The planned workspace of the next matmul (setMatmulWorkspace).
  void *matmulWorkspace = nullptr;
  size_t matmulWorkspaceBytes = 0;
};

Context *createContext(const ContextOptions &) { return new Context(); }
void destroyContext(Context *ctx) { delete ctx; }
const char *contextError(Context &ctx) {
  return ctx.error.empty() ? nullptr : ctx.error.c_str();
}
void contextFail(Context &ctx, const char *nodeName, const char *message) {
  if (ctx.error.empty())
    ctx.error =
        std::string("node '") + (nodeName ? nodeName : "?") + "': " + message;
}
const char *backendName() { return "host"; }

void *deviceAlloc(Context &ctx, size_t bytes, const char *what) {
  size_t rounded = std::max<size_t>((bytes + 255) / 256 * 256, 256);
  void *ptr = std::aligned_alloc(256, rounded);
  if (!ptr)
    failf(ctx, what, "cannot allocate %zu bytes", bytes);
  return ptr;
}
void deviceFree(Context &, void *ptr) { std::free(ptr); }
void copyToDevice(Context &, void *dst, const void *src, size_t bytes) {
  if (bytes)
    std::memmove(dst, src, bytes);
}
void copyToHost(Context &, void *dst, const void *src, size_t bytes) {
  if (bytes)
    std::memmove(dst, src, bytes);
}
void synchronize(Context &) {}
void execute(Context &ctx, void (*body)(Context &, void *), void *user) {
  body(ctx, user);
}
void timerStart(Context &ctx) {
  ctx.timerStart = std::chrono::steady_clock::now();
}
double timerStopMs(Context &ctx) {
  std::chrono::duration<double, std::milli> elapsed =
      std::chrono::steady_clock::now() - ctx.timerStart;
  return elapsed.count();
}
MemoryInfo memoryInfo(Context &) { return MemoryInfo(); }

namespace {

/// The host's loops need no scratch, but the CUDA backend writes anywhere in
/// a planned workspace: the host fills it with NaN (all bits set) before and
/// after the op, so a workspace that overlaps live data shows up as wrong
/// results in host-backend tests, not only on a GPU.
void poisonWorkspace(void *workspace, size_t bytes) {
  if (workspace && bytes)
    std::memset(workspace, 0xff, bytes);
}

std::vector<double> toDouble(const TensorRef &t) {
  int64_t n = t.numElements();
  std::vector<double> v(size_t(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = loadAsDouble(t.data, t.dtype, i);
  return v;
}

void store(const std::vector<double> &v, const TensorRef &t) {
  for (size_t i = 0; i < v.size(); ++i)
    storeFromDouble(t.data, t.dtype, int64_t(i), v[i]);
}

std::vector<int64_t> toInt64(const TensorRef &t) {
  int64_t n = t.numElements();
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = t.dtype == DType::I64 ? static_cast<int64_t *>(t.data)[i]
                   : t.dtype == DType::I32
                       ? static_cast<int32_t *>(t.data)[i]
                       : int64_t(loadAsDouble(t.data, t.dtype, i));
  return v;
}

void storeInt64(const std::vector<int64_t> &v, const TensorRef &t) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (t.dtype == DType::I64)
      static_cast<int64_t *>(t.data)[i] = v[i];
    else
      static_cast<int32_t *>(t.data)[i] = int32_t(v[i]);
  }
}

/// Offset into a broadcast input for output element `index`.
int64_t broadcastOffset(int64_t index, const TensorRef &out,
                        const BroadcastStrides &strides) {
  int64_t offset = 0;
  for (int d = out.rank - 1; d >= 0; --d) {
    int64_t coord = index % out.shape[d];
    index /= out.shape[d];
    offset += coord * strides.stride[d];
  }
  return offset;
}

double applyUnary(UnaryOp op, double x, double alpha, double beta) {
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

double applyActivation(Activation act, double x) {
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

double applyBinary(BinaryOp op, double a, double b) {
  switch (op) {
  case BinaryOp::Add:
    return a + b;
  case BinaryOp::Sub:
    return a - b;
  case BinaryOp::Mul:
    return a * b;
  case BinaryOp::Div:
    return a / b;
  case BinaryOp::Pow:
    return std::pow(a, b);
  case BinaryOp::Max:
    return std::max(a, b);
  case BinaryOp::Min:
    return std::min(a, b);
  case BinaryOp::Mod:
  case BinaryOp::FMod:
    return std::fmod(a, b);
  }
  return 0;
}

int64_t applyBinaryInt(BinaryOp op, int64_t a, int64_t b) {
  switch (op) {
  case BinaryOp::Add:
    return a + b;
  case BinaryOp::Sub:
    return a - b;
  case BinaryOp::Mul:
    return a * b;
  case BinaryOp::Div:
    return b == 0 ? 0 : a / b;
  case BinaryOp::Max:
    return std::max(a, b);
  case BinaryOp::Min:
    return std::min(a, b);
  case BinaryOp::Mod: {
    if (b == 0 || b == -1) // -1: INT64_MIN % -1 overflows; the answer is 0
      return 0;
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  }
  case BinaryOp::FMod:
    return b == 0 || b == -1 ? 0 : a % b;
  case BinaryOp::Pow:
    return 0;
  }
  return 0;
}

bool isIntType(DType t) { return t == DType::I32 || t == DType::I64; }

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

void unary(Context &ctx, const char *node, UnaryOp op, float alpha, float beta,
           TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateUnary(ctx, node, op, x, y))
    return;
  if (isIntType(x.dtype)) {
    std::vector<int64_t> v = toInt64(x);
    for (int64_t &e : v)
      e = op == UnaryOp::Neg    ? -e
          : op == UnaryOp::Abs  ? (e < 0 ? -e : e)
          : op == UnaryOp::Relu ? std::max<int64_t>(e, 0)
                                : e;
    storeInt64(v, y);
    return;
  }
  std::vector<double> v = toDouble(x);
  for (double &e : v)
    e = applyUnary(op, e, alpha, beta);
  store(v, y);
}

void fusedElementwise(Context &ctx, const char *node,
                      const ElementwiseStep *steps, int numSteps,
                      const TensorRef *inputs, int numInputs, TensorRef y) {
  if (hasError(ctx) || !validateFusedElementwise(ctx, node, steps, numSteps,
                                                 inputs, numInputs, y))
    return;
  std::vector<std::vector<double>> values;
  std::vector<BroadcastStrides> strides;
  for (int i = 0; i < numInputs; ++i) {
    values.push_back(toDouble(inputs[i]));
    strides.push_back(broadcastStrides(inputs[i], y));
  }
  int64_t n = y.numElements();
  std::vector<double> out(static_cast<size_t>(n));
  double registers[kMaxFusedInputs + kMaxFusedSteps];
  for (int64_t e = 0; e < n; ++e) {
    for (int i = 0; i < numInputs; ++i)
      registers[i] =
          values[size_t(i)][size_t(broadcastOffset(e, y, strides[size_t(i)]))];
    for (int s = 0; s < numSteps; ++s) {
      const ElementwiseStep &step = steps[s];
      registers[numInputs + s] =
          step.kind == ElementwiseStep::kUnary
              ? applyUnary(UnaryOp(step.op), registers[step.a], step.alpha,
                           step.beta)
              : applyBinary(BinaryOp(step.op), registers[step.a],
                            registers[step.b]);
    }
    out[size_t(e)] = registers[numInputs + numSteps - 1];
  }
  store(out, y);
}

void binary(Context &ctx, const char *node, BinaryOp op, TensorRef a,
            TensorRef b, TensorRef c) {
  if (hasError(ctx) || !validateBinary(ctx, node, op, a, b, c))
    return;
  BroadcastStrides sa = broadcastStrides(a, c), sb = broadcastStrides(b, c);
  int64_t n = c.numElements();
  if (isIntType(c.dtype)) {
    std::vector<int64_t> va = toInt64(a), vb = toInt64(b),
                         out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      out[size_t(i)] = applyBinaryInt(op, va[broadcastOffset(i, c, sa)],
                                      vb[broadcastOffset(i, c, sb)]);
    storeInt64(out, c);
    return;
  }
  std::vector<double> va = toDouble(a), vb = toDouble(b),
                      out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    out[size_t(i)] = applyBinary(op, va[broadcastOffset(i, c, sa)],
                                 vb[broadcastOffset(i, c, sb)]);
  store(out, c);
}

void compare(Context &ctx, const char *node, CompareOp op, TensorRef a,
             TensorRef b, TensorRef c) {
  if (hasError(ctx) || !validateCompare(ctx, node, a, b, c, false))
    return;
  BroadcastStrides sa = broadcastStrides(a, c), sb = broadcastStrides(b, c);
  bool ints = isIntType(a.dtype);
  std::vector<double> fa, fb;
  std::vector<int64_t> ia, ib;
  if (ints) {
    ia = toInt64(a);
    ib = toInt64(b);
  } else {
    fa = toDouble(a);
    fb = toDouble(b);
  }
  int64_t n = c.numElements();
  std::vector<uint8_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t oa = broadcastOffset(i, c, sa), ob = broadcastOffset(i, c, sb);
    bool lt = ints ? ia[oa] < ib[ob] : fa[oa] < fb[ob];
    bool gt = ints ? ia[oa] > ib[ob] : fa[oa] > fb[ob];
    bool eq = ints ? ia[oa] == ib[ob] : fa[oa] == fb[ob];
    bool r = op == CompareOp::Equal         ? eq
             : op == CompareOp::Less        ? lt
             : op == CompareOp::LessOrEqual ? (lt || eq)
             : op == CompareOp::Greater     ? gt
                                            : (gt || eq);
    out[size_t(i)] = r;
  }
  std::memcpy(c.data, out.data(), out.size());
}

void logical(Context &ctx, const char *node, LogicalOp op, TensorRef a,
             TensorRef b, TensorRef c) {
  if (hasError(ctx) || !validateCompare(ctx, node, a, b, c, true))
    return;
  BroadcastStrides sa = broadcastStrides(a, c), sb = broadcastStrides(b, c);
  std::vector<uint8_t> va(static_cast<uint8_t *>(a.data),
                          static_cast<uint8_t *>(a.data) + a.numElements());
  std::vector<uint8_t> vb(static_cast<uint8_t *>(b.data),
                          static_cast<uint8_t *>(b.data) + b.numElements());
  int64_t n = c.numElements();
  for (int64_t i = 0; i < n; ++i) {
    bool x = va[broadcastOffset(i, c, sa)] != 0;
    bool y = vb[broadcastOffset(i, c, sb)] != 0;
    bool r = op == LogicalOp::And  ? (x && y)
             : op == LogicalOp::Or ? (x || y)
                                   : (x != y);
    static_cast<uint8_t *>(c.data)[i] = r;
  }
}

void where(Context &ctx, const char *node, TensorRef cond, TensorRef x,
           TensorRef z, TensorRef y) {
  if (hasError(ctx) || !validateWhere(ctx, node, cond, x, z, y))
    return;
  size_t elem = dtypeSize(y.dtype);
  BroadcastStrides sc = broadcastStrides(cond, y), sx = broadcastStrides(x, y),
                   sz = broadcastStrides(z, y);
  int64_t n = y.numElements();
  std::vector<uint8_t> out(size_t(n) * elem);
  for (int64_t i = 0; i < n; ++i) {
    bool c = static_cast<uint8_t *>(cond.data)[broadcastOffset(i, y, sc)];
    const uint8_t *src =
        c ? static_cast<uint8_t *>(x.data) + broadcastOffset(i, y, sx) * elem
          : static_cast<uint8_t *>(z.data) + broadcastOffset(i, y, sz) * elem;
    std::memcpy(out.data() + i * elem, src, elem);
  }
  std::memcpy(y.data, out.data(), out.size());
}

void cast(Context &ctx, const char *node, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !checkTensor(ctx, node, x, "input") ||
      !checkTensor(ctx, node, y, "output") ||
      !checkSameCount(ctx, node, x, y, "input/output"))
    return;
  int64_t n = x.numElements();
  if (isIntType(x.dtype) && isIntType(y.dtype)) {
    storeInt64(toInt64(x), y);
    return;
  }
  if (x.dtype == DType::I64 && y.dtype != DType::Bool) {
    std::vector<int64_t> v = toInt64(x);
    for (int64_t i = 0; i < n; ++i)
      storeFromDouble(y.data, y.dtype, i, double(v[size_t(i)]));
    return;
  }
  store(toDouble(x), y);
}

void copy(Context &ctx, const char *node, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !checkTensor(ctx, node, x, "input") ||
      !checkTensor(ctx, node, y, "output"))
    return;
  if (x.bytes() != y.bytes()) {
    failf(ctx, node, "copy of %zu bytes into %zu bytes", x.bytes(), y.bytes());
    return;
  }
  if (x.data != y.data && x.bytes())
    std::memmove(y.data, x.data, x.bytes());
}

void fill(Context &ctx, const char *node, double value, TensorRef y) {
  if (hasError(ctx) || !checkTensor(ctx, node, y, "output"))
    return;
  int64_t n = y.numElements();
  for (int64_t i = 0; i < n; ++i)
    storeFromDouble(y.data, y.dtype, i, value);
}

void expand(Context &ctx, const char *node, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !checkTensor(ctx, node, x, "input") ||
      !checkTensor(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, x, y, "input/output") ||
      !checkBroadcast(ctx, node, &x, 1, y, /*exact=*/false))
    return;
  size_t elem = dtypeSize(y.dtype);
  BroadcastStrides sx = broadcastStrides(x, y);
  int64_t n = y.numElements();
  std::vector<uint8_t> out(size_t(n) * elem);
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out.data() + i * elem,
                static_cast<uint8_t *>(x.data) +
                    broadcastOffset(i, y, sx) * elem,
                elem);
  std::memcpy(y.data, out.data(), out.size());
}

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

/// The host's loops need no scratch: the planned slice is only poisoned
/// around the next matmul (poisonWorkspace).
void setMatmulWorkspace(Context &ctx, void *workspace, size_t bytes) {
  ctx.matmulWorkspace = workspace;
  ctx.matmulWorkspaceBytes = bytes;
}

namespace {
void matmulImpl(Context &ctx, const char *node, const MatmulParams &params,
                TensorRef a, TensorRef b, const TensorRef *bias, TensorRef c);
} // namespace

void matmul(Context &ctx, const char *node, const MatmulParams &params,
            TensorRef a, TensorRef b, const TensorRef *bias, TensorRef c) {
  void *workspace = ctx.matmulWorkspace;
  size_t bytes = ctx.matmulWorkspaceBytes;
  ctx.matmulWorkspace = nullptr;
  ctx.matmulWorkspaceBytes = 0;
  poisonWorkspace(workspace, bytes);
  matmulImpl(ctx, node, params, a, b, bias, c);
  poisonWorkspace(workspace, bytes);
}

namespace {
void matmulImpl(Context &ctx, const char *node, const MatmulParams &params,
                TensorRef a, TensorRef b, const TensorRef *bias, TensorRef c) {
  MatmulGeometry g;
  if (hasError(ctx) || !validateMatmul(ctx, node, params, a, b, bias, c, g))
    return;
  std::vector<double> va = toDouble(a), vb = toDouble(b), vbias;
  BroadcastStrides sbias;
  if (bias) {
    vbias = toDouble(*bias);
    sbias = broadcastStrides(*bias, c);
  }
  BroadcastStrides sa = broadcastStrides(g.aBatch, g.cBatch),
                   sb = broadcastStrides(g.bBatch, g.cBatch);
  int64_t m = g.m, n = g.n, k = g.k;
  std::vector<double> out(size_t(g.batchCount * m * n));
  for (int64_t batch = 0; batch < g.batchCount; ++batch) {
    const double *pa = va.data() + broadcastOffset(batch, g.cBatch, sa) * m * k;
    const double *pb = vb.data() + broadcastOffset(batch, g.cBatch, sb) * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          double av = params.transA ? pa[p * m + i] : pa[i * k + p];
          double bv = params.transB ? pb[j * k + p] : pb[p * n + j];
          acc += av * bv;
        }
        int64_t index = (batch * m + i) * n + j;
        double r = params.alpha * acc;
        if (bias)
          r += params.beta * vbias[broadcastOffset(index, c, sbias)];
        out[size_t(index)] = applyActivation(params.activation, r);
      }
    }
  }
  store(out, c);
}
} // namespace

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

namespace {

void convImpl(Context &ctx, const char *node, const ConvParams &params,
              bool transposed, TensorRef x, TensorRef w, const TensorRef *bias,
              TensorRef y) {
  ConvGeometry g;
  if (hasError(ctx) ||
      !validateConv(ctx, node, params, transposed, x, w, bias, y, g))
    return;
  std::vector<double> vx = toDouble(x), vw = toDouble(w), vb;
  if (bias)
    vb = toDouble(*bias);
  int64_t inPerGroup = g.inChannels / g.group;
  int64_t outPerGroup = g.outChannels / g.group;
  int64_t inSpatial = g.in[0] * g.in[1] * g.in[2];
  int64_t outSpatial = g.out[0] * g.out[1] * g.out[2];
  int64_t kSpatial = g.kernel[0] * g.kernel[1] * g.kernel[2];
  std::vector<double> out(size_t(g.batch * g.outChannels * outSpatial), 0.0);
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t ci = 0; ci < g.inChannels; ++ci) {
      int64_t group = ci / inPerGroup, cl = ci % inPerGroup;
      for (int64_t ol = 0; ol < outPerGroup; ++ol) {
        int64_t co = group * outPerGroup + ol;
        // Weight index: conv w[co][cl][k], transposed w[ci][ol][k].
        const double *wk = transposed
                               ? &vw[size_t((ci * outPerGroup + ol) * kSpatial)]
                               : &vw[size_t((co * inPerGroup + cl) * kSpatial)];
        const double *xin = &vx[size_t((n * g.inChannels + ci) * inSpatial)];
        double *yout = &out[size_t((n * g.outChannels + co) * outSpatial)];
        for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0)
          for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1)
            for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
              double wv = wk[(k0 * g.kernel[1] + k1) * g.kernel[2] + k2];
              int64_t kk[3] = {k0, k1, k2};
              // Iterate the output (conv) or the input (transposed) grid.
              const int64_t *grid = transposed ? g.in : g.out;
              for (int64_t p0 = 0; p0 < grid[0]; ++p0)
                for (int64_t p1 = 0; p1 < grid[1]; ++p1)
                  for (int64_t p2 = 0; p2 < grid[2]; ++p2) {
                    int64_t p[3] = {p0, p1, p2}, q[3];
                    bool inside = true;
                    for (int d = 0; d < 3 && inside; ++d) {
                      q[d] = p[d] * g.strides[d] - g.padsBegin[d] +
                             kk[d] * g.dilations[d];
                      int64_t limit = transposed ? g.out[d] : g.in[d];
                      inside = q[d] >= 0 && q[d] < limit;
                    }
                    if (!inside)
                      continue;
                    int64_t pIndex = (p[0] * grid[1] + p[1]) * grid[2] + p[2];
                    if (transposed) {
                      int64_t qIndex =
                          (q[0] * g.out[1] + q[1]) * g.out[2] + q[2];
                      yout[qIndex] += wv * xin[pIndex];
                    } else {
                      int64_t qIndex = (q[0] * g.in[1] + q[1]) * g.in[2] + q[2];
                      yout[pIndex] += wv * xin[qIndex];
                    }
                  }
            }
      }
    }
  }
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t co = 0; co < g.outChannels; ++co)
      for (int64_t s = 0; s < outSpatial; ++s) {
        double &v = out[size_t((n * g.outChannels + co) * outSpatial + s)];
        v = applyActivation(params.activation, v + (bias ? vb[co] : 0.0));
      }
  store(out, y);
}

} // namespace

void conv(Context &ctx, const char *node, const ConvParams &params, TensorRef x,
          TensorRef w, const TensorRef *bias, TensorRef y, void *workspace,
          size_t workspaceBytes) {
  poisonWorkspace(workspace, workspaceBytes);
  convImpl(ctx, node, params, false, x, w, bias, y);
  poisonWorkspace(workspace, workspaceBytes);
}

void convTranspose(Context &ctx, const char *node, const ConvParams &params,
                   TensorRef x, TensorRef w, const TensorRef *bias, TensorRef y,
                   void *workspace, size_t workspaceBytes) {
  poisonWorkspace(workspace, workspaceBytes);
  convImpl(ctx, node, params, true, x, w, bias, y);
  poisonWorkspace(workspace, workspaceBytes);
}

void pool(Context &ctx, const char *node, const PoolParams &params, TensorRef x,
          TensorRef y) {
  ConvGeometry g;
  if (hasError(ctx) || !validatePool(ctx, node, params, x, y, g))
    return;
  std::vector<double> vx = toDouble(x);
  int64_t inSpatial = g.in[0] * g.in[1] * g.in[2];
  int64_t outSpatial = g.out[0] * g.out[1] * g.out[2];
  std::vector<double> out(size_t(g.batch * g.inChannels * outSpatial));
  for (int64_t plane = 0; plane < g.batch * g.inChannels; ++plane) {
    const double *xin = &vx[size_t(plane * inSpatial)];
    for (int64_t o = 0; o < outSpatial; ++o) {
      int64_t oc[3] = {o / (g.out[1] * g.out[2]), (o / g.out[2]) % g.out[1],
                       o % g.out[2]};
      double best = -std::numeric_limits<double>::infinity(), sum = 0;
      int64_t valid = 0, padded = 1;
      for (int d = 0; d < 3; ++d) {
        // Window positions inside the padded input (count_include_pad).
        int64_t start = oc[d] * g.strides[d] - g.padsBegin[d];
        int64_t inPadded = 0;
        for (int64_t k = 0; k < g.kernel[d]; ++k) {
          int64_t pos = start + k * g.dilations[d];
          inPadded += pos >= -g.padsBegin[d] && pos < g.in[d] + g.padsEnd[d];
        }
        padded *= inPadded;
      }
      for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0)
        for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1)
          for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
            int64_t kk[3] = {k0, k1, k2}, q[3];
            bool inside = true;
            for (int d = 0; d < 3 && inside; ++d) {
              q[d] = oc[d] * g.strides[d] - g.padsBegin[d] +
                     kk[d] * g.dilations[d];
              inside = q[d] >= 0 && q[d] < g.in[d];
            }
            if (!inside)
              continue;
            double v = xin[(q[0] * g.in[1] + q[1]) * g.in[2] + q[2]];
            best = std::max(best, v);
            sum += v;
            ++valid;
          }
      double r;
      if (params.kind == PoolKind::Max)
        r = best;
      else
        r = sum / double(params.countIncludePad ? padded
                                                : std::max<int64_t>(valid, 1));
      out[size_t(plane * outSpatial + o)] = r;
    }
  }
  store(out, y);
}

void globalAvgPool(Context &ctx, const char *node, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !checkFloat(ctx, node, x, "X") ||
      !checkFloat(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, x, y, "X/output"))
    return;
  if (x.rank < 2 || y.numElements() != x.shape[0] * x.shape[1]) {
    failf(ctx, node, "GlobalAveragePool output %s does not match input %s",
          shapeString(y).c_str(), shapeString(x).c_str());
    return;
  }
  std::vector<double> vx = toDouble(x);
  int64_t planes = x.shape[0] * x.shape[1];
  int64_t spatial = planes ? x.numElements() / planes : 0;
  std::vector<double> out(static_cast<size_t>(planes));
  for (int64_t p = 0; p < planes; ++p) {
    double sum = 0;
    for (int64_t s = 0; s < spatial; ++s)
      sum += vx[size_t(p * spatial + s)];
    out[size_t(p)] = spatial ? sum / double(spatial) : 0;
  }
  store(out, y);
}

//===----------------------------------------------------------------------===//
// Normalization, softmax, reductions
//===----------------------------------------------------------------------===//

void batchNorm(Context &ctx, const char *node, float epsilon, TensorRef x,
               TensorRef scale, TensorRef bias, TensorRef mean, TensorRef var,
               TensorRef y) {
  if (hasError(ctx) ||
      !validateBatchNorm(ctx, node, x, scale, bias, mean, var, y))
    return;
  std::vector<double> vx = toDouble(x), vs = toDouble(scale),
                      vb = toDouble(bias), vm = toDouble(mean),
                      vv = toDouble(var);
  AxisSplit s = splitAt(x, 1);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t c = 0; c < s.axis; ++c)
      for (int64_t i = 0; i < s.inner; ++i) {
        double &v = vx[size_t((o * s.axis + c) * s.inner + i)];
        v = (v - vm[c]) / std::sqrt(vv[c] + epsilon) * vs[c] + vb[c];
      }
  store(vx, y);
}

void layerNorm(Context &ctx, const char *node, int axis, float epsilon,
               TensorRef x, TensorRef scale, const TensorRef *bias,
               TensorRef y) {
  if (hasError(ctx) || !validateLayerNorm(ctx, node, axis, x, scale, bias, y))
    return;
  std::vector<double> vx = toDouble(x), vs = toDouble(scale), vb;
  if (bias)
    vb = toDouble(*bias);
  int64_t cols = int64_t(vs.size());
  int64_t rows = cols ? x.numElements() / cols : 0;
  for (int64_t r = 0; r < rows; ++r) {
    double *row = &vx[size_t(r * cols)];
    double mean = 0, var = 0;
    for (int64_t j = 0; j < cols; ++j)
      mean += row[j];
    mean /= double(cols);
    for (int64_t j = 0; j < cols; ++j)
      var += (row[j] - mean) * (row[j] - mean);
    var /= double(cols);
    double inv = 1 / std::sqrt(var + epsilon);
    for (int64_t j = 0; j < cols; ++j)
      row[j] = (row[j] - mean) * inv * vs[j] + (bias ? vb[j] : 0.0);
  }
  store(vx, y);
}

void softmax(Context &ctx, const char *node, int axis, bool logSoftmax,
             TensorRef x, TensorRef y) {
  if (hasError(ctx) || !checkFloat(ctx, node, x, "input") ||
      !checkFloat(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, x, y, "input/output") ||
      !checkSameShape(ctx, node, x, y, "input/output") ||
      !checkAxis(ctx, node, axis, x.rank))
    return;
  std::vector<double> v = toDouble(x);
  AxisSplit s = splitAt(x, axis);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      auto at = [&](int64_t a) -> double & {
        return v[size_t((o * s.axis + a) * s.inner + i)];
      };
      double best = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t a = 0; a < s.axis; ++a)
        best = std::max(best, at(a));
      for (int64_t a = 0; a < s.axis; ++a)
        sum += std::exp(at(a) - best);
      for (int64_t a = 0; a < s.axis; ++a)
        at(a) = logSoftmax ? at(a) - best - std::log(sum)
                           : std::exp(at(a) - best) / sum;
    }
  store(v, y);
}

void attention(Context &ctx, const char *node, const AttentionParams &params,
               TensorRef q, TensorRef k, TensorRef v, const TensorRef *bias,
               TensorRef y, void *workspace, size_t workspaceBytes) {
  if (hasError(ctx))
    return;
  AttentionGeometry g;
  if (!validateAttention(ctx, node, params, q, k, v, bias, y, g))
    return;
  // The CUDA backend may write scores anywhere in the workspace: clobber it
  // here too, before the operands are read and after the result is written.
  poisonWorkspace(workspace, workspaceBytes);
  std::vector<double> vq = toDouble(q), vk = toDouble(k), vv = toDouble(v),
                      vbias = bias ? toDouble(*bias) : std::vector<double>();
  std::vector<double> out(size_t(y.numElements()));
  // One row of scores and one of outputs: never the [S, Sk] matrix.
  std::vector<double> row(size_t(g.keys)), acc(size_t(g.valueSize));
  for (int64_t b = 0; b < g.batch; ++b) {
    int64_t qOffset = 0, kOffset = 0, vOffset = 0, biasOffset = 0;
    for (int64_t rest = b, i = g.batchRank - 1; i >= 0; --i) {
      int64_t coord = rest % g.batchShape[i];
      rest /= g.batchShape[i];
      qOffset += coord * g.qStride[i];
      kOffset += coord * g.kStride[i];
      vOffset += coord * g.vStride[i];
      biasOffset += coord * g.biasStride[i];
    }
    for (int64_t i = 0; i < g.queries; ++i) {
      const double *qRow = vq.data() + qOffset + i * g.headSize;
      double rowMax = -INFINITY;
      for (int64_t j = 0; j < g.keys; ++j) {
        if (params.causal && j > i) {
          row[j] = -INFINITY;
          continue;
        }
        double dot = 0;
        for (int64_t d = 0; d < g.headSize; ++d)
          dot += qRow[d] *
                 vk[kOffset + (params.keyTransposed ? d * g.keys + j
                                                    : j * g.headSize + d)];
        double score = params.scale * dot;
        if (g.hasBias)
          score +=
              vbias[biasOffset + i * g.biasRowStride + j * g.biasColStride];
        row[j] = score;
        rowMax = std::max(rowMax, score);
      }
      // All -inf: exp(-inf - -inf) is NaN, as in the unfused graph.
      double sum = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < g.keys; ++j) {
        double p = std::exp(row[j] - rowMax);
        sum += p;
        const double *vRow = vv.data() + vOffset + j * g.valueSize;
        for (int64_t d = 0; d < g.valueSize; ++d)
          acc[d] += p * vRow[d];
      }
      double *yRow = out.data() + (b * g.queries + i) * g.valueSize;
      for (int64_t d = 0; d < g.valueSize; ++d)
        yRow[d] = acc[d] / sum;
    }
  }
  store(out, y);
  poisonWorkspace(workspace, workspaceBytes);
}

void reduce(Context &ctx, const char *node, ReduceOp op, const int *axes,
            int numAxes, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateReduce(ctx, node, axes, numAxes, x, y))
    return;
  bool reduced[kMaxRank] = {};
  for (int i = 0; i < numAxes; ++i)
    reduced[axes[i]] = true;
  std::vector<double> vx = toDouble(x);
  int64_t outCount = y.numElements();
  double init = op == ReduceOp::Max   ? -std::numeric_limits<double>::infinity()
                : op == ReduceOp::Min ? std::numeric_limits<double>::infinity()
                : op == ReduceOp::Prod ? 1.0
                                       : 0.0;
  std::vector<double> acc(size_t(outCount), init);
  int64_t count = outCount ? x.numElements() / outCount : 0;
  int64_t n = x.numElements();
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, outIndex = 0, outStride = 1;
    for (int d = x.rank - 1; d >= 0; --d) {
      int64_t coord = rest % x.shape[d];
      rest /= x.shape[d];
      if (!reduced[d]) {
        outIndex += coord * outStride;
        outStride *= x.shape[d];
      }
    }
    double v = vx[size_t(i)];
    double &a = acc[size_t(outIndex)];
    switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean:
      a += v;
      break;
    case ReduceOp::SumSquare:
    case ReduceOp::L2:
      a += v * v;
      break;
    case ReduceOp::Max:
      a = std::max(a, v);
      break;
    case ReduceOp::Min:
      a = std::min(a, v);
      break;
    case ReduceOp::Prod:
      a *= v;
      break;
    }
  }
  for (double &a : acc) {
    if (op == ReduceOp::Mean)
      a = count ? a / double(count) : 0;
    else if (op == ReduceOp::L2)
      a = std::sqrt(a);
  }
  store(acc, y);
}

void argReduce(Context &ctx, const char *node, bool isMax, int axis,
               TensorRef x, TensorRef y) {
  if (hasError(ctx) || !checkFloat(ctx, node, x, "input") ||
      !checkTensor(ctx, node, y, "output") ||
      !checkAxis(ctx, node, axis, x.rank))
    return;
  AxisSplit s = splitAt(x, axis);
  if (y.dtype != DType::I64 || y.numElements() != s.outer * s.inner) {
    failf(ctx, node, "ArgMax/ArgMin output must be i64 with %lld elements",
          (long long)(s.outer * s.inner));
    return;
  }
  std::vector<double> v = toDouble(x);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      int64_t best = 0;
      for (int64_t a = 1; a < s.axis; ++a) {
        double cur = v[size_t((o * s.axis + a) * s.inner + i)];
        double top = v[size_t((o * s.axis + best) * s.inner + i)];
        if (isMax ? cur > top : cur < top)
          best = a;
      }
      static_cast<int64_t *>(y.data)[o * s.inner + i] = best;
    }
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

namespace {

/// Copies element `from` of src into element `to` of dst.
inline void copyElement(const TensorRef &src, int64_t from, uint8_t *dst,
                        int64_t to, size_t elem) {
  std::memcpy(dst + to * elem,
              static_cast<const uint8_t *>(src.data) + from * elem, elem);
}

void decompose(int64_t index, const TensorRef &t, int64_t *coords) {
  for (int d = t.rank - 1; d >= 0; --d) {
    coords[d] = index % t.shape[d];
    index /= t.shape[d];
  }
}

} // namespace

void transpose(Context &ctx, const char *node, const int *perm, TensorRef x,
               TensorRef y) {
  if (hasError(ctx) || !validateTranspose(ctx, node, perm, x, y))
    return;
  size_t elem = dtypeSize(x.dtype);
  int64_t xStrides[kMaxRank], coords[kMaxRank];
  contiguousStrides(x, xStrides);
  int64_t n = y.numElements();
  std::vector<uint8_t> out(size_t(n) * elem);
  for (int64_t i = 0; i < n; ++i) {
    decompose(i, y, coords);
    int64_t from = 0;
    for (int d = 0; d < y.rank; ++d)
      from += coords[d] * xStrides[perm[d]];
    copyElement(x, from, out.data(), i, elem);
  }
  std::memcpy(y.data, out.data(), out.size());
}

void concat(Context &ctx, const char *node, int axis, const TensorRef *inputs,
            int numInputs, TensorRef y) {
  if (hasError(ctx) || !validateConcat(ctx, node, axis, inputs, numInputs, y))
    return;
  size_t elem = dtypeSize(y.dtype);
  AxisSplit s = splitAt(y, axis);
  std::vector<uint8_t> out(y.bytes());
  int64_t offset = 0;
  for (int k = 0; k < numInputs; ++k) {
    int64_t len = inputs[k].shape[axis];
    size_t block = size_t(len * s.inner) * elem;
    for (int64_t o = 0; o < s.outer; ++o)
      std::memcpy(out.data() + size_t((o * s.axis + offset) * s.inner) * elem,
                  static_cast<uint8_t *>(inputs[k].data) + o * block, block);
    offset += len;
  }
  std::memcpy(y.data, out.data(), out.size());
}

void split(Context &ctx, const char *node, int axis, TensorRef x,
           const TensorRef *outputs, int numOutputs) {
  if (hasError(ctx) || !validateConcat(ctx, node, axis, outputs, numOutputs, x))
    return;
  size_t elem = dtypeSize(x.dtype);
  AxisSplit s = splitAt(x, axis);
  std::vector<uint8_t> in(static_cast<uint8_t *>(x.data),
                          static_cast<uint8_t *>(x.data) + x.bytes());
  int64_t offset = 0;
  for (int k = 0; k < numOutputs; ++k) {
    int64_t len = outputs[k].shape[axis];
    size_t block = size_t(len * s.inner) * elem;
    for (int64_t o = 0; o < s.outer; ++o)
      std::memcpy(static_cast<uint8_t *>(outputs[k].data) + o * block,
                  in.data() + size_t((o * s.axis + offset) * s.inner) * elem,
                  block);
    offset += len;
  }
}

void slice(Context &ctx, const char *node, const int64_t *starts,
           const int64_t *steps, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateSlice(ctx, node, starts, steps, x, y))
    return;
  size_t elem = dtypeSize(x.dtype);
  int64_t xStrides[kMaxRank], coords[kMaxRank];
  contiguousStrides(x, xStrides);
  int64_t n = y.numElements();
  std::vector<uint8_t> out(size_t(n) * elem);
  for (int64_t i = 0; i < n; ++i) {
    decompose(i, y, coords);
    int64_t from = 0;
    for (int d = 0; d < y.rank; ++d)
      from += (starts[d] + coords[d] * steps[d]) * xStrides[d];
    copyElement(x, from, out.data(), i, elem);
  }
  std::memcpy(y.data, out.data(), out.size());
}

void gather(Context &ctx, const char *node, int axis, TensorRef x,
            TensorRef indices, TensorRef y) {
  if (hasError(ctx) || !validateGather(ctx, node, axis, x, indices, y, false))
    return;
  size_t elem = dtypeSize(x.dtype);
  AxisSplit s = splitAt(x, axis);
  std::vector<int64_t> idx = toInt64(indices);
  std::vector<uint8_t> out(y.bytes());
  for (size_t j = 0; j < idx.size(); ++j) {
    int64_t index = idx[j] < 0 ? idx[j] + s.axis : idx[j];
    if (index < 0 || index >= s.axis) {
      failf(ctx, node, "index %lld out of range [-%lld, %lld)",
            (long long)idx[j], (long long)s.axis, (long long)s.axis);
      return;
    }
    idx[j] = index;
  }
  int64_t count = int64_t(idx.size());
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t j = 0; j < count; ++j)
      std::memcpy(out.data() + size_t((o * count + j) * s.inner) * elem,
                  static_cast<uint8_t *>(x.data) +
                      size_t((o * s.axis + idx[size_t(j)]) * s.inner) * elem,
                  size_t(s.inner) * elem);
  std::memcpy(y.data, out.data(), out.size());
}

void gatherElements(Context &ctx, const char *node, int axis, TensorRef x,
                    TensorRef indices, TensorRef y) {
  if (hasError(ctx) || !validateGather(ctx, node, axis, x, indices, y, true))
    return;
  size_t elem = dtypeSize(x.dtype);
  int64_t xStrides[kMaxRank], coords[kMaxRank];
  contiguousStrides(x, xStrides);
  std::vector<int64_t> idx = toInt64(indices);
  int64_t n = y.numElements();
  std::vector<uint8_t> out(size_t(n) * elem);
  for (int64_t i = 0; i < n; ++i) {
    decompose(i, y, coords);
    int64_t index = idx[size_t(i)];
    if (index < 0)
      index += x.shape[axis];
    if (index < 0 || index >= x.shape[axis]) {
      failf(ctx, node, "index %lld out of range for axis size %lld",
            (long long)idx[size_t(i)], (long long)x.shape[axis]);
      return;
    }
    coords[axis] = index;
    int64_t from = 0;
    for (int d = 0; d < x.rank; ++d)
      from += coords[d] * xStrides[d];
    copyElement(x, from, out.data(), i, elem);
  }
  std::memcpy(y.data, out.data(), out.size());
}

namespace {

/// Element `i` of an integer tensor (I64, I32, I8, U8) as int64_t.
int64_t loadInt(const void *data, DType dtype, int64_t i) {
  switch (dtype) {
  case DType::I64:
    return static_cast<const int64_t *>(data)[i];
  case DType::I32:
    return static_cast<const int32_t *>(data)[i];
  case DType::I8:
    return static_cast<const int8_t *>(data)[i];
  default:
    return static_cast<const uint8_t *>(data)[i];
  }
}

/// Stores `v` wrapped to the integer dtype (two's complement, as C++20).
void storeInt(void *data, DType dtype, int64_t i, int64_t v) {
  switch (dtype) {
  case DType::I64:
    static_cast<int64_t *>(data)[i] = v;
    break;
  case DType::I32:
    static_cast<int32_t *>(data)[i] = static_cast<int32_t>(v);
    break;
  case DType::I8:
    static_cast<int8_t *>(data)[i] = static_cast<int8_t>(v);
    break;
  default:
    static_cast<uint8_t *>(data)[i] = static_cast<uint8_t>(v);
    break;
  }
}

template <typename T> T combineScatter(ScatterReduction op, T a, T b) {
  switch (op) {
  case ScatterReduction::Add:
    if constexpr (std::is_integral_v<T>)
      return T(uint64_t(a) + uint64_t(b)); // wraps instead of overflowing
    else
      return a + b;
  case ScatterReduction::Mul:
    if constexpr (std::is_integral_v<T>)
      return T(uint64_t(a) * uint64_t(b));
    else
      return a * b;
  case ScatterReduction::Max:
    return std::max(a, b);
  case ScatterReduction::Min:
    return std::min(a, b);
  case ScatterReduction::None:
    break;
  }
  return b;
}

} // namespace

/// onnxruntime's ScatterND structure: copy data into the output unless they
/// are the same buffer, then visit the index tuples in order. Every index is
/// checked before anything is written.
void scatterND(Context &ctx, const char *node, ScatterReduction reduction,
               TensorRef data, TensorRef indices, TensorRef updates,
               TensorRef y) {
  ScatterGeometry g;
  if (hasError(ctx) ||
      !validateScatterND(ctx, node, reduction, data, indices, updates, y, g))
    return;
  std::vector<int64_t> idx = toInt64(indices);
  std::vector<int64_t> offsets(size_t(g.tuples), 0);
  for (int64_t t = 0; t < g.tuples; ++t) {
    for (int64_t d = 0; d < g.k; ++d) {
      int64_t raw = idx[size_t(t * g.k + d)];
      int64_t index = raw < 0 ? raw + g.dims[d] : raw;
      if (index < 0 || index >= g.dims[d]) {
        failf(ctx, node, "index %lld out of range [-%lld, %lld) on axis %lld",
              (long long)raw, (long long)g.dims[d], (long long)g.dims[d],
              (long long)d);
        return;
      }
      offsets[size_t(t)] += index * g.strides[d];
    }
  }
  if (y.data != data.data && y.bytes())
    std::memmove(y.data, data.data, y.bytes());
  size_t elem = dtypeSize(y.dtype);
  auto *out = static_cast<uint8_t *>(y.data);
  bool isInt = y.dtype == DType::I64 || y.dtype == DType::I32 ||
               y.dtype == DType::I8 || y.dtype == DType::U8;
  for (int64_t t = 0; t < g.tuples; ++t) {
    int64_t base = offsets[size_t(t)], from = t * g.sliceSize;
    if (reduction == ScatterReduction::None) {
      std::memcpy(out + size_t(base) * elem,
                  static_cast<const uint8_t *>(updates.data) +
                      size_t(from) * elem,
                  size_t(g.sliceSize) * elem);
      continue;
    }
    for (int64_t j = 0; j < g.sliceSize; ++j) {
      if (isInt)
        storeInt(y.data, y.dtype, base + j,
                 combineScatter(reduction, loadInt(y.data, y.dtype, base + j),
                                loadInt(updates.data, y.dtype, from + j)));
      else
        storeFromDouble(
            y.data, y.dtype, base + j,
            combineScatter(reduction, loadAsDouble(y.data, y.dtype, base + j),
                           loadAsDouble(updates.data, y.dtype, from + j)));
    }
  }
}

void pad(Context &ctx, const char *node, PadMode mode, const int64_t *padsBegin,
         const int64_t *padsEnd, double value, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validatePad(ctx, node, mode, padsBegin, padsEnd, x, y))
    return;
  size_t elem = dtypeSize(x.dtype);
  int64_t xStrides[kMaxRank], coords[kMaxRank];
  contiguousStrides(x, xStrides);
  int64_t n = y.numElements();
  std::vector<uint8_t> out(size_t(n) * elem);
  std::vector<uint8_t> constant(elem);
  storeFromDouble(constant.data(), x.dtype, 0, value);
  for (int64_t i = 0; i < n; ++i) {
    decompose(i, y, coords);
    int64_t from = 0;
    bool outside = false;
    for (int d = 0; d < y.rank; ++d) {
      int64_t c = coords[d] - padsBegin[d], size = x.shape[d];
      if (c < 0 || c >= size) {
        if (mode == PadMode::Constant) {
          outside = true;
          break;
        }
        if (mode == PadMode::Edge) {
          c = std::min(std::max<int64_t>(c, 0), size - 1);
        } else {
          while (c < 0 || c >= size)
            c = size == 1 ? 0 : c < 0 ? -c : 2 * (size - 1) - c;
        }
      }
      from += c * xStrides[d];
    }
    if (outside)
      std::memcpy(out.data() + i * elem, constant.data(), elem);
    else
      copyElement(x, from, out.data(), i, elem);
  }
  std::memcpy(y.data, out.data(), out.size());
}

void resize(Context &ctx, const char *node, const ResizeParams &params,
            TensorRef x, TensorRef y) {
  float scales[kMaxRank];
  if (hasError(ctx) || !validateResize(ctx, node, params, x, y, scales))
    return;
  int64_t xStrides[kMaxRank], coords[kMaxRank];
  contiguousStrides(x, xStrides);
  int64_t n = y.numElements();
  size_t elem = dtypeSize(x.dtype);
  std::vector<uint8_t> out(size_t(n) * elem);
  std::vector<double> vx;
  if (params.mode == ResizeMode::Linear)
    vx = toDouble(x);
  for (int64_t i = 0; i < n; ++i) {
    decompose(i, y, coords);
    if (params.mode == ResizeMode::Nearest) {
      int64_t from = 0;
      for (int d = 0; d < y.rank; ++d) {
        int64_t c = coords[d];
        if (x.shape[d] != y.shape[d] || scales[d] != 1.0f) {
          float src = resizeSourceCoordinate(params.coordinateMode, float(c),
                                             scales[d], x.shape[d], y.shape[d]);
          float fl = std::floor(src);
          switch (params.nearestMode) {
          case NearestMode::RoundPreferFloor:
            c = int64_t(src - fl == 0.5f ? fl : std::round(src));
            break;
          case NearestMode::RoundPreferCeil:
            c = int64_t(src - fl == 0.5f ? fl + 1 : std::round(src));
            break;
          case NearestMode::Floor:
            c = int64_t(fl);
            break;
          case NearestMode::Ceil:
            c = int64_t(std::ceil(src));
            break;
          }
          c = std::min(std::max<int64_t>(c, 0), x.shape[d] - 1);
        }
        from += c * xStrides[d];
      }
      copyElement(x, from, out.data(), i, elem);
      continue;
    }
    // Linear: interpolate along every resized axis (corners 2^k).
    int resizedAxes[kMaxRank], k = 0;
    int64_t base = 0, low[kMaxRank], high[kMaxRank];
    double frac[kMaxRank];
    for (int d = 0; d < y.rank; ++d) {
      if (x.shape[d] == y.shape[d] && scales[d] == 1.0f) {
        base += coords[d] * xStrides[d];
        continue;
      }
      float src =
          resizeSourceCoordinate(params.coordinateMode, float(coords[d]),
                                 scales[d], x.shape[d], y.shape[d]);
      src = std::min(std::max(src, 0.0f), float(x.shape[d] - 1));
      low[k] = int64_t(std::floor(src));
      high[k] = std::min(low[k] + 1, x.shape[d] - 1);
      frac[k] = src - float(low[k]);
      resizedAxes[k++] = d;
    }
    double acc = 0;
    for (int corner = 0; corner < (1 << k); ++corner) {
      double weight = 1;
      int64_t from = base;
      for (int j = 0; j < k; ++j) {
        bool up = (corner >> j) & 1;
        weight *= up ? frac[j] : 1 - frac[j];
        from += (up ? high[j] : low[j]) * xStrides[resizedAxes[j]];
      }
      acc += weight * vx[size_t(from)];
    }
    storeFromDouble(out.data(), x.dtype, i, acc);
  }
  std::memcpy(y.data, out.data(), out.size());
}

} // namespace memopt::rt
