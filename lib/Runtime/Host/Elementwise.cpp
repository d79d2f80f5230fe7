//===- Elementwise.cpp - host elementwise ops -----------------------------===//
//
// The host reference of the elementwise entry points (the CUDA side is
// Cuda/ElementwiseKernels.cu): unary, the fused elementwise program,
// binary, compare, logical, where, isNaN, range, cast, copy, fill, expand.
// Moved out of HostBackend.cpp unchanged; the scalar math (applyUnary,
// applyActivation) is in HostKernels.h, shared with the matmul and conv
// epilogues. Semantics: the ONNX operator specification; structure: TFLite's
// reference kernels (one loop nest per op, broadcast by index decomposition).
//
//===----------------------------------------------------------------------===//

#include "HostKernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace memopt::rt {

namespace {

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
  case BinaryOp::ReluGrad:
    return b > 0 ? a : 0.0;
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
  case BinaryOp::ReluGrad: // floats only (validateBinary)
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
  std::vector<double> v = toDouble(ctx, x);
  // About 10 ns an element (exp, erf, tanh).
  parallelFor(ctx, 0, int64_t(v.size()), kMinChunkWork / 8,
              [&](int64_t lo, int64_t hi) {
                for (int64_t i = lo; i < hi; ++i)
                  v[size_t(i)] = applyUnary(op, v[size_t(i)], alpha, beta);
              });
  store(ctx, v, y);
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
    values.push_back(toDouble(ctx, inputs[i]));
    strides.push_back(broadcastStrides(inputs[i], y));
  }
  int64_t n = y.numElements();
  std::vector<double> out(static_cast<size_t>(n));
  // Rows of the last dim, as in binary(): each input's offset is decomposed
  // once per row and moves by its last stride (0 where it broadcasts).
  int64_t inner = y.rank ? y.shape[y.rank - 1] : 1;
  int64_t rows = inner ? n / inner : 0;
  int64_t step[kMaxFusedInputs];
  for (int i = 0; i < numInputs; ++i)
    step[i] = y.rank ? strides[size_t(i)].stride[y.rank - 1] : 0;
  parallelFor(
      ctx, 0, rows, grainFor(inner * numSteps), [&](int64_t lo, int64_t hi) {
        const double *row[kMaxFusedInputs];
        double registers[kMaxFusedInputs + kMaxFusedSteps];
        for (int64_t r = lo; r < hi; ++r) {
          for (int i = 0; i < numInputs; ++i)
            row[i] = values[size_t(i)].data() +
                     broadcastOffset(r * inner, y, strides[size_t(i)]);
          for (int64_t j = 0; j < inner; ++j) {
            for (int i = 0; i < numInputs; ++i)
              registers[i] = row[i][j * step[i]];
            for (int s = 0; s < numSteps; ++s) {
              const ElementwiseStep &st = steps[s];
              registers[numInputs + s] =
                  st.kind == ElementwiseStep::kUnary
                      ? applyUnary(UnaryOp(st.op), registers[st.a], st.alpha,
                                   st.beta)
                      : applyBinary(BinaryOp(st.op), registers[st.a],
                                    registers[st.b]);
            }
            out[size_t(r * inner + j)] = registers[numInputs + numSteps - 1];
          }
        }
      });
  store(ctx, out, y);
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
  std::vector<double> va = toDouble(ctx, a), vb = toDouble(ctx, b),
                      out(static_cast<size_t>(n));
  // Rows of the last dim: operand offsets are decomposed once per row and
  // move by the operand's last stride (0 where it broadcasts) along it.
  int64_t inner = c.rank ? c.shape[c.rank - 1] : 1;
  int64_t rows = inner ? n / inner : 0;
  int64_t strideA = c.rank ? sa.stride[c.rank - 1] : 0;
  int64_t strideB = c.rank ? sb.stride[c.rank - 1] : 0;
  parallelFor(ctx, 0, rows, grainFor(inner), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const double *pa = va.data() + broadcastOffset(r * inner, c, sa);
      const double *pb = vb.data() + broadcastOffset(r * inner, c, sb);
      double *po = out.data() + r * inner;
      for (int64_t j = 0; j < inner; ++j)
        po[j] = applyBinary(op, pa[j * strideA], pb[j * strideB]);
    }
  });
  store(ctx, out, c);
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

void isNaN(Context &ctx, const char *node, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateIsNaN(ctx, node, x, y))
    return;
  std::vector<double> v = toDouble(x);
  uint8_t *out = static_cast<uint8_t *>(y.data);
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = std::isnan(v[i]) ? 1 : 0;
}

void range(Context &ctx, const char *node, TensorRef start, TensorRef delta,
           TensorRef y) {
  if (hasError(ctx) || !validateRange(ctx, node, start, delta, y))
    return;
  int64_t n = y.numElements();
  if (y.dtype == DType::I32 || y.dtype == DType::I64) {
    int64_t first = toInt64(start)[0], step = toInt64(delta)[0];
    std::vector<int64_t> values(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      values[size_t(i)] = first + i * step;
    storeInt64(values, y);
    return;
  }
  double first = toDouble(start)[0], step = toDouble(delta)[0];
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    values[size_t(i)] = first + double(i) * step;
  store(values, y);
}

void cast(Context &ctx, const char *node, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateCast(ctx, node, x, y))
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
  if (hasError(ctx) || !validateCopy(ctx, node, x, y))
    return;
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
  if (hasError(ctx) || !validateExpand(ctx, node, x, y))
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

} // namespace memopt::rt
