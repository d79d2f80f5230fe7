//===- HostKernelsTest.cpp - host backend kernels vs naive references -----===//
//
// Each kernel family runs on small, odd-sized, never-zero random inputs and is
// compared with a reference written here from the ONNX definition (direct
// loops, not the backend's code).
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

using namespace memopt::rt;
using namespace memopt::rt::test;

namespace {

class HostKernels : public ::testing::Test {
protected:
  void SetUp() override { ctx = createContext(); }
  void TearDown() override {
    EXPECT_EQ(contextError(*ctx), nullptr)
        << "unexpected runtime error: " << contextError(*ctx);
    destroyContext(ctx);
  }
  Buffer random(DType dtype, std::vector<int64_t> shape, unsigned seed) {
    Buffer b(dtype, shape);
    fillRandom(*ctx, b, seed);
    return b;
  }
  Context *ctx = nullptr;
};

void expectClose(const Buffer &out, const std::vector<double> &expected,
                 double tol) {
  ASSERT_EQ(size_t(out.count()), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    double got = out.at(int64_t(i));
    EXPECT_NEAR(got, expected[i], tol * std::max(1.0, std::fabs(expected[i])))
        << "element " << i;
  }
}

/// Row-major coordinates of `index` in `shape`.
std::vector<int64_t> coordsOf(int64_t index,
                              const std::vector<int64_t> &shape) {
  std::vector<int64_t> c(shape.size());
  for (int d = int(shape.size()) - 1; d >= 0; --d) {
    c[size_t(d)] = index % shape[size_t(d)];
    index /= shape[size_t(d)];
  }
  return c;
}

int64_t indexOf(const std::vector<int64_t> &coords,
                const std::vector<int64_t> &shape) {
  int64_t index = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    index = index * shape[d] + coords[d];
  return index;
}

/// Value of a (right-aligned, broadcast) input at output coordinates.
double broadcastAt(const Buffer &in, const std::vector<int64_t> &outCoords) {
  std::vector<int64_t> c(in.shape.size());
  size_t offset = outCoords.size() - in.shape.size();
  for (size_t d = 0; d < in.shape.size(); ++d)
    c[d] = in.shape[d] == 1 ? 0 : outCoords[offset + d];
  return in.at(indexOf(c, in.shape));
}

TEST_F(HostKernels, HalfAndBf16Conversions) {
  Buffer f(DType::F32, {6});
  float values[6] = {1.0f, -2.5f, 65504.0f, 5.9604645e-8f, 1e-3f, 3.14159f};
  std::memcpy(f.storage.data(), values, sizeof(values));
  Buffer h(DType::F16, {6}), b(DType::BF16, {6});
  cast(*ctx, "to_f16", f.ref(), h.ref());
  cast(*ctx, "to_bf16", f.ref(), b.ref());
  uint16_t bits[6];
  std::memcpy(bits, h.storage.data(), 12);
  EXPECT_EQ(bits[0], 0x3c00);
  EXPECT_EQ(bits[1], 0xc100);
  EXPECT_EQ(bits[2], 0x7bff); // largest finite half
  EXPECT_EQ(bits[3], 0x0001); // smallest subnormal
  for (int i = 0; i < 6; ++i) {
    EXPECT_NEAR(h.at(i), values[i], std::fabs(values[i]) * 1e-3) << i;
    EXPECT_NEAR(b.at(i), values[i], std::fabs(values[i]) * 8e-3) << i;
  }
  // Round to nearest even at the half tie 1 + 2^-11.
  Buffer tie(DType::F32, {1}), tieHalf(DType::F16, {1});
  float t = 1.0f + std::ldexp(1.0f, -11);
  std::memcpy(tie.storage.data(), &t, 4);
  cast(*ctx, "tie", tie.ref(), tieHalf.ref());
  EXPECT_EQ(tieHalf.at(0), 1.0);
}

TEST_F(HostKernels, CastToIntegersAndBool) {
  Buffer f(DType::F32, {4});
  float values[4] = {-2.7f, 3.9f, 0.0f, 0.25f};
  std::memcpy(f.storage.data(), values, sizeof(values));
  Buffer i64(DType::I64, {4}), b(DType::Bool, {4});
  cast(*ctx, "to_i64", f.ref(), i64.ref());
  cast(*ctx, "to_bool", f.ref(), b.ref());
  expectClose(i64, {-2, 3, 0, 0}, 0);
  expectClose(b, {1, 1, 0, 1}, 0);
}

TEST_F(HostKernels, UnaryOpsAllFloatTypes) {
  struct Case {
    UnaryOp op;
    float alpha, beta;
    std::function<double(double)> ref;
  };
  std::vector<Case> cases = {
      {UnaryOp::Relu, 0, 0, [](double x) { return x > 0 ? x : 0; }},
      {UnaryOp::LeakyRelu, 0.1f, 0,
       [](double x) { return x > 0 ? x : 0.1 * x; }},
      {UnaryOp::Sigmoid, 0, 0, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {UnaryOp::Tanh, 0, 0, [](double x) { return std::tanh(x); }},
      {UnaryOp::Gelu, 0, 0,
       [](double x) { return x * 0.5 * std::erfc(-x / std::sqrt(2.0)); }},
      {UnaryOp::Silu, 0, 0, [](double x) { return x / (1 + std::exp(-x)); }},
      {UnaryOp::Exp, 0, 0, [](double x) { return std::exp(x); }},
      {UnaryOp::Abs, 0, 0, [](double x) { return x < 0 ? -x : x; }},
      {UnaryOp::Clip, -0.5f, 0.75f,
       [](double x) { return x < -0.5   ? -0.5
                             : x > 0.75 ? 0.75
                                        : x; }},
      {UnaryOp::HardSigmoid, 0.2f, 0.5f,
       [](double x) { return std::clamp(0.2 * x + 0.5, 0.0, 1.0); }},
      {UnaryOp::Reciprocal, 0, 0, [](double x) { return 1 / x; }},
  };
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    for (const Case &c : cases) {
      Buffer x = random(dtype, {3, 7}, 11), y(dtype, {3, 7});
      unary(*ctx, "unary", c.op, c.alpha, c.beta, x.ref(), y.ref());
      std::vector<double> expected;
      for (int64_t i = 0; i < x.count(); ++i)
        expected.push_back(c.ref(x.at(i)));
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " op " +
                   std::to_string(int(c.op)));
      expectClose(y, expected, tolerance(dtype));
    }
  }
}

TEST_F(HostKernels, BinaryBroadcasting) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    Buffer a = random(dtype, {2, 1, 3}, 1), b = random(dtype, {4, 1}, 2);
    for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul,
                        BinaryOp::Div, BinaryOp::Max, BinaryOp::Min}) {
      Buffer c(dtype, {2, 4, 3});
      binary(*ctx, "binary", op, a.ref(), b.ref(), c.ref());
      std::vector<double> expected;
      for (int64_t i = 0; i < c.count(); ++i) {
        std::vector<int64_t> co = coordsOf(i, c.shape);
        double x = broadcastAt(a, co), y = broadcastAt(b, co);
        expected.push_back(op == BinaryOp::Add   ? x + y
                           : op == BinaryOp::Sub ? x - y
                           : op == BinaryOp::Mul ? x * y
                           : op == BinaryOp::Div ? x / y
                           : op == BinaryOp::Max ? std::max(x, y)
                                                 : std::min(x, y));
      }
      SCOPED_TRACE(dtypeName(dtype));
      expectClose(c, expected, tolerance(dtype));
    }
  }
}

// y = relu(x * s + b) * x with s broadcast per row and b a scalar: the
// steps read the right registers, inputs broadcast, in place works.
TEST_F(HostKernels, FusedElementwiseProgram) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    Buffer x = random(dtype, {3, 4}, 1), s = random(dtype, {3, 1}, 2),
           b = random(dtype, {1}, 3);
    const ElementwiseStep steps[] = {
        {ElementwiseStep::kBinary, int32_t(BinaryOp::Mul), 0, 1, 0, 0},
        {ElementwiseStep::kBinary, int32_t(BinaryOp::Add), 3, 2, 0, 0},
        {ElementwiseStep::kUnary, int32_t(UnaryOp::Relu), 4, -1, 0, 0},
        {ElementwiseStep::kBinary, int32_t(BinaryOp::Mul), 5, 0, 0, 0}};
    std::vector<double> expected;
    for (int64_t i = 0; i < x.count(); ++i) {
      double v = x.at(i), t = v * s.at(i / 4) + b.at(0);
      expected.push_back(std::max(t, 0.0) * v);
    }
    Buffer y(dtype, {3, 4});
    const TensorRef inputs[] = {x.ref(), s.ref(), b.ref()};
    fusedElementwise(*ctx, "fused", steps, 4, inputs, 3, y.ref());
    SCOPED_TRACE(dtypeName(dtype));
    expectClose(y, expected, tolerance(dtype));
    // In place over x (same shape as y).
    const TensorRef inPlace[] = {x.ref(), s.ref(), b.ref()};
    fusedElementwise(*ctx, "fused", steps, 4, inPlace, 3, x.ref());
    expectClose(x, expected, tolerance(dtype));
  }
}

TEST_F(HostKernels, FusedElementwiseRejectsBadPrograms) {
  Buffer x = random(DType::F32, {4}, 1), row = random(DType::F32, {1}, 2);
  Buffer y(DType::F32, {4});
  const TensorRef inputs[] = {x.ref(), row.ref()};
  // A step that reads a register not written yet.
  const ElementwiseStep forward[] = {
      {ElementwiseStep::kBinary, int32_t(BinaryOp::Add), 0, 2, 0, 0}};
  fusedElementwise(*ctx, "bad_step", forward, 1, inputs, 2, y.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx)).find("bad_step"),
            std::string::npos);
  destroyContext(ctx);
  ctx = createContext();
  // Writing over a broadcast input in place.
  const ElementwiseStep add[] = {
      {ElementwiseStep::kBinary, int32_t(BinaryOp::Add), 0, 1, 0, 0}};
  const TensorRef aliased[] = {x.ref(), row.ref()};
  TensorRef rowOut = row.ref();
  rowOut.rank = 1;
  rowOut.shape[0] = 4;
  fusedElementwise(*ctx, "alias", add, 1, aliased, 2, rowOut);
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx))
                .find("aliases broadcast or converted input 1"),
            std::string::npos);
  destroyContext(ctx);
  ctx = createContext();
}

TEST_F(HostKernels, IntegerModFollowsDivisorSign) {
  Buffer a(DType::I64, {4}), b(DType::I64, {4}), c(DType::I64, {4});
  fillInts(a, {7, -7, 7, -7});
  fillInts(b, {3, 3, -3, -3});
  binary(*ctx, "mod", BinaryOp::Mod, a.ref(), b.ref(), c.ref());
  expectClose(c, {1, 2, -2, -1}, 0);
}

TEST_F(HostKernels, IntegerFModTruncates) {
  Buffer a(DType::I32, {5}), b(DType::I32, {5}), c(DType::I32, {5});
  fillInts(a, {7, -7, 7, -7, 5});
  fillInts(b, {3, 3, -3, -3, 0});
  binary(*ctx, "fmod", BinaryOp::FMod, a.ref(), b.ref(), c.ref());
  // The sign of the dividend (C's %); a zero divisor gives 0.
  expectClose(c, {1, -1, 1, -1, 0}, 0);
  // INT64_MIN mod -1 would overflow in C; the answer is 0 in both modes.
  Buffer m(DType::I64, {1}), n(DType::I64, {1}), r(DType::I64, {1});
  fillInts(m, {std::numeric_limits<int64_t>::min()});
  fillInts(n, {-1});
  for (BinaryOp op : {BinaryOp::Mod, BinaryOp::FMod}) {
    binary(*ctx, "mod_min", op, m.ref(), n.ref(), r.ref());
    expectClose(r, {0}, 0);
  }
  Buffer x(DType::F32, {2}), y(DType::F32, {2}), z(DType::F32, {2});
  float xs[2] = {5.5f, -5.5f}, ys[2] = {2.0f, 2.0f};
  std::memcpy(x.storage.data(), xs, 8);
  std::memcpy(y.storage.data(), ys, 8);
  binary(*ctx, "fmod_f", BinaryOp::FMod, x.ref(), y.ref(), z.ref());
  expectClose(z, {1.5, -1.5}, 0);
}

TEST_F(HostKernels, ReluGradSelectsWherePositive) {
  // dy where y > 0, else 0; a NaN y gives 0, as where(y > 0, dy, 0) does.
  Buffer dy(DType::F32, {5}), y(DType::F32, {5}), dx(DType::F32, {5});
  float dys[5] = {1.5f, -2.0f, 3.0f, 4.0f, 5.0f};
  float ys[5] = {0.5f, 2.0f, 0.0f, -1.0f, std::nanf("")};
  std::memcpy(dy.storage.data(), dys, sizeof(dys));
  std::memcpy(y.storage.data(), ys, sizeof(ys));
  binary(*ctx, "relu_grad", BinaryOp::ReluGrad, dy.ref(), y.ref(), dx.ref());
  expectClose(dx, {1.5, -2.0, 0, 0, 0}, 0);
  // Integers have no ReLU gradient: one error naming the node.
  Buffer i(DType::I32, {2});
  fillInts(i, {1, 2});
  binary(*ctx, "relu_grad_int", BinaryOp::ReluGrad, i.ref(), i.ref(), i.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx)).find("relu_grad_int"),
            std::string::npos);
  destroyContext(ctx);
  ctx = createContext();
}

TEST_F(HostKernels, CompareWhereAndLogical) {
  Buffer a = random(DType::F32, {3, 4}, 3), b = random(DType::F32, {4}, 4);
  Buffer less(DType::Bool, {3, 4}), eq(DType::Bool, {3, 4});
  compare(*ctx, "less", CompareOp::Less, a.ref(), b.ref(), less.ref());
  compare(*ctx, "eq", CompareOp::Equal, a.ref(), a.ref(), eq.ref());
  Buffer picked(DType::F32, {3, 4});
  where(*ctx, "where", less.ref(), a.ref(), b.ref(), picked.ref());
  Buffer both(DType::Bool, {3, 4});
  logical(*ctx, "and", LogicalOp::And, less.ref(), eq.ref(), both.ref());
  for (int64_t i = 0; i < 12; ++i) {
    double x = a.at(i), y = b.at(i % 4);
    EXPECT_EQ(less.at(i), x < y ? 1 : 0);
    EXPECT_EQ(eq.at(i), 1);
    EXPECT_EQ(picked.at(i), x < y ? x : y);
    EXPECT_EQ(both.at(i), x < y ? 1 : 0);
  }
}

TEST_F(HostKernels, MatmulBatchBroadcastAndTranspose) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    Buffer a = random(dtype, {2, 1, 3, 5}, 5), b = random(dtype, {4, 5, 7}, 6);
    Buffer c(dtype, {2, 4, 3, 7});
    matmul(*ctx, "matmul", MatmulParams(), a.ref(), b.ref(), nullptr, c.ref());
    std::vector<double> expected;
    for (int64_t i = 0; i < c.count(); ++i) {
      std::vector<int64_t> co = coordsOf(i, c.shape);
      double acc = 0;
      for (int64_t k = 0; k < 5; ++k)
        acc += a.at(indexOf({co[0], 0, co[2], k}, a.shape)) *
               b.at(indexOf({co[1], k, co[3]}, b.shape));
      expected.push_back(acc);
    }
    SCOPED_TRACE(dtypeName(dtype));
    expectClose(c, expected, tolerance(dtype) * 4);
  }
}

TEST_F(HostKernels, MatmulLowOperandsStoreF32Output) {
  // f16 / bf16 operands, f32 result and bias: the accumulator is stored as
  // it is, so the result matches a double reference of the rounded operands.
  for (DType dtype : {DType::F16, DType::BF16}) {
    Buffer a = random(dtype, {2, 3, 5}, 11), b = random(dtype, {5, 4}, 12);
    Buffer bias = random(DType::F32, {4}, 13);
    Buffer c(DType::F32, {2, 3, 4});
    TensorRef biasRef = bias.ref();
    matmul(*ctx, "matmul_wide", MatmulParams(), a.ref(), b.ref(), &biasRef,
           c.ref());
    std::vector<double> expected;
    for (int64_t i = 0; i < c.count(); ++i) {
      std::vector<int64_t> co = coordsOf(i, c.shape);
      double acc = bias.at(co[2]);
      for (int64_t k = 0; k < 5; ++k)
        acc += a.at(indexOf({co[0], co[1], k}, a.shape)) *
               b.at(indexOf({k, co[2]}, b.shape));
      expected.push_back(acc);
    }
    SCOPED_TRACE(dtypeName(dtype));
    expectClose(c, expected, 1e-6);
  }
}

TEST(HostKernelErrors, MatmulOutputNarrowerThanOperands) {
  // Only the widening direction is allowed: f32 operands, f16 result fails.
  Context *ctx = createContext();
  Buffer a(DType::F32, {2, 3}), b(DType::F32, {3, 2}), c(DType::F16, {2, 2});
  matmul(*ctx, "narrow", MatmulParams(), a.ref(), b.ref(), nullptr, c.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx)).find("node 'narrow'"),
            std::string::npos)
      << contextError(*ctx);
  destroyContext(ctx);
}

TEST_F(HostKernels, GemmTransposesBiasAndRelu) {
  // A^T: [K=6, M=5], B^T: [N=3, K=6], C: [M, 1] broadcast along N.
  Buffer a = random(DType::F32, {6, 5}, 7), b = random(DType::F32, {3, 6}, 8);
  Buffer bias = random(DType::F32, {5, 1}, 9),
         rowBias = random(DType::F32, {3}, 10);
  MatmulParams p;
  p.transA = p.transB = true;
  p.alpha = 0.5f;
  p.beta = 2.0f;
  p.activation = Activation::Relu;
  Buffer c(DType::F32, {5, 3}), d(DType::F32, {5, 3});
  TensorRef biasRef = bias.ref();
  matmul(*ctx, "gemm", p, a.ref(), b.ref(), &biasRef, c.ref());
  p.activation = Activation::None;
  p.beta = 1.0f;
  TensorRef rowRef = rowBias.ref();
  matmul(*ctx, "gemm_row", p, a.ref(), b.ref(), &rowRef, d.ref());
  std::vector<double> expectedC, expectedD;
  for (int64_t m = 0; m < 5; ++m)
    for (int64_t n = 0; n < 3; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < 6; ++k)
        acc += a.at(k * 5 + m) * b.at(n * 6 + k);
      expectedC.push_back(std::max(0.0, 0.5 * acc + 2.0 * bias.at(m)));
      expectedD.push_back(0.5 * acc + rowBias.at(n));
    }
  expectClose(c, expectedC, 1e-5);
  expectClose(d, expectedD, 1e-5);
}

/// Direct convolution from the ONNX definition (2-D).
std::vector<double> referenceConv2d(const Buffer &x, const Buffer &w,
                                    const Buffer *bias, const ConvParams &p,
                                    const std::vector<int64_t> &yShape) {
  int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  int64_t m = w.shape[0], kh = w.shape[2], kw = w.shape[3];
  int64_t cg = c / p.group, mg = m / p.group;
  std::vector<double> y;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t oy = 0; oy < yShape[2]; ++oy)
        for (int64_t ox = 0; ox < yShape[3]; ++ox) {
          double acc = bias ? bias->at(o) : 0;
          int64_t g = o / mg;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                int64_t iy =
                    oy * p.strides[0] - p.padsBegin[0] + ky * p.dilations[0];
                int64_t ix =
                    ox * p.strides[1] - p.padsBegin[1] + kx * p.dilations[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd)
                  continue;
                acc += x.at(((b * c + g * cg + ci) * h + iy) * wd + ix) *
                       w.at(((o * cg + ci) * kh + ky) * kw + kx);
              }
          y.push_back(p.activation == Activation::Relu ? std::max(acc, 0.0)
                                                       : acc);
        }
  return y;
}

TEST_F(HostKernels, ConvGroupsStridesDilationsAsymmetricPads) {
  for (DType dtype : {DType::F32, DType::F16}) {
    ConvParams p;
    p.group = 2;
    p.strides[0] = 2;
    p.dilations[1] = 2;
    p.padsBegin[0] = 1;
    p.padsEnd[0] = 2;
    p.padsBegin[1] = 2;
    p.padsEnd[1] = 0;
    p.activation = Activation::Relu;
    Buffer x = random(dtype, {2, 4, 7, 6}, 12),
           w = random(dtype, {6, 2, 3, 2}, 13);
    Buffer bias = random(dtype, {6}, 14);
    // H: (7 + 3 - 3) / 2 + 1 = 4; W: (6 + 2 - 3) / 1 + 1 = 6.
    Buffer y(dtype, {2, 6, 4, 6});
    TensorRef biasRef = bias.ref();
    conv(*ctx, "conv", p, x.ref(), w.ref(), &biasRef, y.ref(), nullptr, 0);
    SCOPED_TRACE(dtypeName(dtype));
    expectClose(y, referenceConv2d(x, w, &bias, p, y.shape),
                tolerance(dtype) * 4);
  }
}

/// A 4-D NCHW buffer in NHWC order (or, with `toFirst`, the other way).
Buffer permuteChannels(const Buffer &from, bool toFirst = false) {
  std::vector<int64_t> s = from.shape;
  std::vector<int64_t> shape =
      toFirst ? std::vector<int64_t>{s[0], s[3], s[1], s[2]}
              : std::vector<int64_t>{s[0], s[2], s[3], s[1]};
  Buffer to(from.dtype, shape);
  size_t bytes = dtypeSize(from.dtype);
  int64_t n = s[0], c = toFirst ? s[3] : s[1], h = toFirst ? s[1] : s[2],
          w = toFirst ? s[2] : s[3];
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
          int64_t first = ((b * c + ch) * h + y) * w + x;
          int64_t last = ((b * h + y) * w + x) * c + ch;
          int64_t src = toFirst ? last : first, dst = toFirst ? first : last;
          std::memcpy(to.storage.data() + size_t(dst) * bytes,
                      from.storage.data() + size_t(src) * bytes, bytes);
        }
  return to;
}

void expectSameValues(const Buffer &a, const Buffer &b) {
  ASSERT_EQ(a.count(), b.count());
  for (int64_t i = 0; i < a.count(); ++i)
    ASSERT_EQ(a.at(i), b.at(i)) << "element " << i;
}

// The channels-last forms (memopt-layout) compute exactly what the NCHW ones
// do, element for element: conv (groups, strides, dilations, asymmetric
// pads, bias, relu; the direct and the GEMM path), conv_residual (separate
// and in place), pools, global average pool, batch norm.
TEST_F(HostKernels, ChannelsLastMatchesChannelsFirst) {
  for (DType dtype : {DType::F32, DType::F16}) {
    SCOPED_TRACE(dtypeName(dtype));
    for (int64_t group : {int64_t(1), int64_t(2), int64_t(12)}) {
      ConvParams p;
      p.group = group;
      p.strides[0] = 2;
      p.dilations[1] = 2;
      p.padsBegin[0] = 1;
      p.padsEnd[0] = 2;
      p.padsBegin[1] = 2;
      p.activation = Activation::Relu;
      Buffer x = random(dtype, {2, 12, 7, 6}, 40);
      Buffer w = random(dtype, {24, 12 / group, 3, 2}, 41);
      Buffer bias = random(dtype, {24}, 42);
      TensorRef biasRef = bias.ref();
      Buffer y(dtype, {2, 24, 4, 6});
      conv(*ctx, "conv", p, x.ref(), w.ref(), &biasRef, y.ref(), nullptr, 0);
      Buffer xl = permuteChannels(x), wl = permuteChannels(w);
      Buffer yl(dtype, {2, 4, 6, 24});
      ConvParams pl = p;
      pl.channelsLast = true;
      conv(*ctx, "conv_nhwc", pl, xl.ref(), wl.ref(), &biasRef, yl.ref(),
           nullptr, 0);
      SCOPED_TRACE("group " + std::to_string(group));
      expectSameValues(permuteChannels(yl, true), y);

      // conv_residual = relu(conv + bias + z), separate and in place.
      ConvParams linear = p;
      linear.activation = Activation::None;
      Buffer z = random(dtype, {2, 24, 4, 6}, 43);
      std::vector<double> expected =
          referenceConv2d(x, w, &bias, linear, y.shape);
      for (size_t i = 0; i < expected.size(); ++i)
        expected[i] = std::max(0.0, expected[i] + z.at(int64_t(i)));
      Buffer r(dtype, y.shape);
      convResidual(*ctx, "conv_residual", p, x.ref(), w.ref(), &biasRef,
                   z.ref(), r.ref(), nullptr, 0);
      expectClose(r, expected, tolerance(dtype) * 4);
      Buffer zl = permuteChannels(z);
      convResidual(*ctx, "conv_residual_nhwc", pl, xl.ref(), wl.ref(), &biasRef,
                   zl.ref(), zl.ref(), nullptr, 0);
      expectSameValues(permuteChannels(zl, true), r);
    }
    Buffer x = random(dtype, {2, 5, 9, 8}, 44), xl = permuteChannels(x);
    for (PoolKind kind : {PoolKind::Max, PoolKind::Avg}) {
      PoolParams p;
      p.kind = kind;
      p.ceilMode = true;
      for (int i = 0; i < 2; ++i) {
        p.kernel[i] = 3;
        p.strides[i] = 2;
        p.padsBegin[i] = p.padsEnd[i] = 1;
      }
      Buffer y(dtype, {2, 5, 5, 5}), yl(dtype, {2, 5, 5, 5});
      pool(*ctx, "pool", p, x.ref(), y.ref());
      p.channelsLast = true;
      pool(*ctx, "pool_nhwc", p, xl.ref(), yl.ref());
      expectSameValues(permuteChannels(yl, true), y);
    }
    Buffer g(dtype, {2, 5, 1, 1}), gl(dtype, {2, 1, 1, 5});
    globalAvgPool(*ctx, "gap", x.ref(), g.ref());
    globalAvgPool(*ctx, "gap_nhwc", xl.ref(), gl.ref(), true);
    expectSameValues(gl, g);
    Buffer scale = random(DType::F32, {5}, 45),
           shift = random(DType::F32, {5}, 46),
           mean = random(DType::F32, {5}, 47), var(DType::F32, {5});
    const float variance = 1.5f;
    for (int i = 0; i < 5; ++i)
      std::memcpy(var.storage.data() + 4 * i, &variance, 4);
    Buffer n(dtype, x.shape), nl(dtype, xl.shape);
    batchNorm(*ctx, "bn", 1e-5f, x.ref(), scale.ref(), shift.ref(), mean.ref(),
              var.ref(), n.ref());
    batchNorm(*ctx, "bn_nhwc", 1e-5f, xl.ref(), scale.ref(), shift.ref(),
              mean.ref(), var.ref(), nl.ref(), true);
    expectSameValues(permuteChannels(nl, true), n);
  }
}

TEST_F(HostKernels, Conv1d) {
  ConvParams p;
  p.spatialRank = 1;
  p.padsBegin[0] = p.padsEnd[0] = 1;
  Buffer x = random(DType::F32, {1, 3, 9}, 15),
         w = random(DType::F32, {2, 3, 3}, 16);
  Buffer y(DType::F32, {1, 2, 9});
  conv(*ctx, "conv1d", p, x.ref(), w.ref(), nullptr, y.ref(), nullptr, 0);
  std::vector<double> expected;
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t t = 0; t < 9; ++t) {
      double acc = 0;
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t k = 0; k < 3; ++k)
          if (t + k - 1 >= 0 && t + k - 1 < 9)
            acc += x.at(c * 9 + t + k - 1) * w.at((o * 3 + c) * 3 + k);
      expected.push_back(acc);
    }
  expectClose(y, expected, 1e-5);
}

TEST_F(HostKernels, ConvTransposeMatchesGatherFormulation) {
  ConvParams p;
  p.strides[0] = p.strides[1] = 2;
  p.padsBegin[0] = p.padsEnd[0] = 1;
  p.outputPadding[0] = p.outputPadding[1] = 1;
  // x [1, 3, 4, 5], w [3, 2, 3, 3]: out = 2*(in-1) + 1 + 3 - 1 - pads.
  Buffer x = random(DType::F32, {1, 3, 4, 5}, 17),
         w = random(DType::F32, {3, 2, 3, 3}, 18);
  Buffer bias = random(DType::F32, {2}, 19);
  int64_t oh = 2 * 3 + 1 + 3 - 2, ow = 2 * 4 + 1 + 3 - 0;
  Buffer y(DType::F32, {1, 2, oh, ow});
  TensorRef biasRef = bias.ref();
  convTranspose(*ctx, "convT", p, x.ref(), w.ref(), &biasRef, y.ref(), nullptr,
                0);
  std::vector<double> expected;
  for (int64_t m = 0; m < 2; ++m)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        double acc = bias.at(m);
        for (int64_t c = 0; c < 3; ++c)
          for (int64_t ky = 0; ky < 3; ++ky)
            for (int64_t kx = 0; kx < 3; ++kx) {
              int64_t ty = oy + p.padsBegin[0] - ky,
                      tx = ox + p.padsBegin[1] - kx;
              if (ty % 2 || tx % 2 || ty < 0 || tx < 0 || ty / 2 >= 4 ||
                  tx / 2 >= 5)
                continue;
              acc += x.at((c * 4 + ty / 2) * 5 + tx / 2) *
                     w.at(((c * 2 + m) * 3 + ky) * 3 + kx);
            }
        expected.push_back(acc);
      }
  expectClose(y, expected, 1e-5);
}

TEST_F(HostKernels, PoolingModes) {
  // 6x6 input, kernel 3, stride 2, pads 1: 3 outputs per axis, 4 with
  // ceil_mode (the last window starts in the input and is clipped).
  Buffer x = random(DType::F32, {1, 2, 6, 6}, 20);
  struct Case {
    PoolKind kind;
    bool includePad, ceil;
  };
  for (Case c :
       {Case{PoolKind::Max, false, false}, Case{PoolKind::Avg, false, false},
        Case{PoolKind::Avg, true, false}, Case{PoolKind::Avg, false, true},
        Case{PoolKind::Max, false, true}}) {
    PoolParams p;
    p.kind = c.kind;
    p.countIncludePad = c.includePad;
    p.ceilMode = c.ceil;
    for (int i = 0; i < 2; ++i) {
      p.kernel[i] = 3;
      p.strides[i] = 2;
      p.padsBegin[i] = p.padsEnd[i] = 1;
    }
    int64_t out = c.ceil ? 4 : 3;
    Buffer y(DType::F32, {1, 2, out, out});
    pool(*ctx, "pool", p, x.ref(), y.ref());
    std::vector<double> expected;
    for (int64_t ch = 0; ch < 2; ++ch)
      for (int64_t oy = 0; oy < out; ++oy)
        for (int64_t ox = 0; ox < out; ++ox) {
          double best = -1e30, sum = 0;
          int64_t n = 0, padded = 0;
          for (int64_t ky = 0; ky < 3; ++ky)
            for (int64_t kx = 0; kx < 3; ++kx) {
              int64_t iy = oy * 2 - 1 + ky, ix = ox * 2 - 1 + kx;
              if (iy >= -1 && iy < 7 && ix >= -1 && ix < 7)
                ++padded;
              if (iy < 0 || iy >= 6 || ix < 0 || ix >= 6)
                continue;
              double v = x.at((ch * 6 + iy) * 6 + ix);
              best = std::max(best, v);
              sum += v;
              ++n;
            }
          expected.push_back(c.kind == PoolKind::Max
                                 ? best
                                 : sum / double(c.includePad ? padded : n));
        }
    SCOPED_TRACE(std::to_string(int(c.kind)) + (c.ceil ? " ceil" : "") +
                 (c.includePad ? " include_pad" : ""));
    expectClose(y, expected, 1e-5);
  }
}

TEST_F(HostKernels, GlobalAvgPool) {
  Buffer x = random(DType::BF16, {2, 3, 4, 5}, 21),
         y(DType::BF16, {2, 3, 1, 1});
  globalAvgPool(*ctx, "gap", x.ref(), y.ref());
  std::vector<double> expected(6, 0);
  for (int64_t i = 0; i < x.count(); ++i)
    expected[size_t(i / 20)] += x.at(i) / 20;
  expectClose(y, expected, 2e-2);
}

TEST_F(HostKernels, BatchAndLayerNorm) {
  Buffer x = random(DType::F32, {2, 3, 5}, 22);
  Buffer scale = random(DType::F32, {3}, 23),
         bias = random(DType::F32, {3}, 24);
  Buffer mean = random(DType::F32, {3}, 25), var = random(DType::F32, {3}, 26);
  Buffer y(DType::F32, {2, 3, 5});
  std::vector<double> expected;
  for (int64_t i = 0; i < 30; ++i) {
    int64_t c = (i / 5) % 3;
    expected.push_back((x.at(i) - mean.at(c)) /
                           std::sqrt(std::fabs(var.at(c)) + 1e-5) *
                           scale.at(c) +
                       bias.at(c));
  }
  // Variances must be positive: the random fill has both signs.
  Buffer absVar(DType::F32, {3});
  unary(*ctx, "abs", UnaryOp::Abs, 0, 0, var.ref(), absVar.ref());
  batchNorm(*ctx, "bn", 1e-5f, x.ref(), scale.ref(), bias.ref(), mean.ref(),
            absVar.ref(), y.ref());
  expectClose(y, expected, 1e-4);

  for (DType dtype : {DType::F32, DType::F16}) {
    Buffer lx = random(dtype, {3, 2, 7}, 27), ls = random(dtype, {2, 7}, 28);
    Buffer lb = random(dtype, {2, 7}, 29), ly(dtype, {3, 2, 7});
    TensorRef lbRef = lb.ref();
    layerNorm(*ctx, "ln", 1, 1e-5f, lx.ref(), ls.ref(), &lbRef, ly.ref());
    std::vector<double> lexp;
    for (int64_t r = 0; r < 3; ++r) {
      double mu = 0, sq = 0;
      for (int64_t j = 0; j < 14; ++j)
        mu += lx.at(r * 14 + j) / 14;
      for (int64_t j = 0; j < 14; ++j)
        sq += (lx.at(r * 14 + j) - mu) * (lx.at(r * 14 + j) - mu) / 14;
      for (int64_t j = 0; j < 14; ++j)
        lexp.push_back((lx.at(r * 14 + j) - mu) / std::sqrt(sq + 1e-5) *
                           ls.at(j) +
                       lb.at(j));
    }
    SCOPED_TRACE(dtypeName(dtype));
    expectClose(ly, lexp, tolerance(dtype) * 2);
  }
}

TEST_F(HostKernels, SoftmaxOverMiddleAxisAndLogSoftmax) {
  Buffer x = random(DType::F32, {2, 5, 3}, 30);
  Buffer y(DType::F32, {2, 5, 3}), ly(DType::F32, {2, 5, 3});
  softmax(*ctx, "softmax", 1, false, x.ref(), y.ref());
  softmax(*ctx, "logsoftmax", 1, true, x.ref(), ly.ref());
  std::vector<double> expected(30), logExpected(30);
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t i = 0; i < 3; ++i) {
      double sum = 0;
      for (int64_t a = 0; a < 5; ++a)
        sum += std::exp(x.at((o * 5 + a) * 3 + i));
      for (int64_t a = 0; a < 5; ++a) {
        int64_t idx = (o * 5 + a) * 3 + i;
        expected[size_t(idx)] = std::exp(x.at(idx)) / sum;
        logExpected[size_t(idx)] = x.at(idx) - std::log(sum);
      }
    }
  expectClose(y, expected, 1e-5);
  expectClose(ly, logExpected, 1e-5);
}

/// Unfused attention: the whole [S, Sk] score matrix, softmax, then P V.
std::vector<double> referenceAttention(const Buffer &q, const Buffer &k,
                                       const Buffer &v, const Buffer *bias,
                                       const AttentionParams &params,
                                       const std::vector<int64_t> &yShape) {
  size_t rank = yShape.size();
  int64_t queries = yShape[rank - 2], valueSize = yShape[rank - 1];
  int64_t headSize = q.shape.back();
  int64_t keys =
      params.keyTransposed ? k.shape.back() : k.shape[k.shape.size() - 2];
  std::vector<int64_t> batchShape(yShape.begin(), yShape.end() - 2);
  int64_t batch = 1;
  for (int64_t d : batchShape)
    batch *= d;
  std::vector<double> out;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<int64_t> co = coordsOf(b, batchShape);
    auto at = [&](const Buffer &t, int64_t row, int64_t column) {
      std::vector<int64_t> c = co;
      c.push_back(row);
      c.push_back(column);
      return broadcastAt(t, c);
    };
    std::vector<std::vector<double>> scores(
        static_cast<size_t>(queries),
        std::vector<double>(static_cast<size_t>(keys)));
    for (int64_t i = 0; i < queries; ++i)
      for (int64_t j = 0; j < keys; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < headSize; ++d)
          dot +=
              at(q, i, d) * (params.keyTransposed ? at(k, d, j) : at(k, j, d));
        double score = params.scale * dot + (bias ? at(*bias, i, j) : 0.0);
        scores[size_t(i)][size_t(j)] =
            params.causal && j > i ? -INFINITY : score;
      }
    for (int64_t i = 0; i < queries; ++i) {
      std::vector<double> &row = scores[size_t(i)];
      double max = -INFINITY, sum = 0;
      for (double s : row)
        max = std::max(max, s);
      for (double &s : row)
        sum += (s = std::exp(s - max));
      for (int64_t d = 0; d < valueSize; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < keys; ++j)
          acc += row[size_t(j)] / sum * at(v, j, d);
        out.push_back(acc);
      }
    }
  }
  return out;
}

TEST_F(HostKernels, AttentionBroadcastsBatchAndBias) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    // K is shared by the 3 heads, the bias by the 2 sequences and the rows.
    Buffer q = random(dtype, {2, 3, 5, 8}, 50),
           k = random(dtype, {2, 1, 7, 8}, 51);
    Buffer v = random(dtype, {2, 3, 7, 6}, 52),
           bias = random(dtype, {3, 1, 7}, 53);
    Buffer y(dtype, {2, 3, 5, 6});
    AttentionParams params;
    params.scale = 0.35f;
    TensorRef biasRef = bias.ref();
    attention(*ctx, "attention", params, q.ref(), k.ref(), v.ref(), &biasRef,
              y.ref());
    SCOPED_TRACE(dtypeName(dtype));
    expectClose(y, referenceAttention(q, k, v, &bias, params, y.shape),
                tolerance(dtype) * 4);
  }
}

TEST_F(HostKernels, AttentionCausalWithTransposedKeys) {
  // More queries than keys: rows 2.. see every key, row 0 only key 0.
  Buffer q = random(DType::F32, {3, 5, 4}, 54),
         k = random(DType::F32, {3, 4, 3}, 55);
  Buffer v = random(DType::F32, {3, 3, 2}, 56), y(DType::F32, {3, 5, 2});
  AttentionParams params;
  params.scale = 0.5f;
  params.causal = true;
  params.keyTransposed = true;
  attention(*ctx, "attention", params, q.ref(), k.ref(), v.ref(), nullptr,
            y.ref());
  expectClose(y, referenceAttention(q, k, v, nullptr, params, y.shape), 1e-6);
  // Row 0 of each batch attends to key 0 only: its output is V's first row.
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t d = 0; d < 2; ++d)
      EXPECT_NEAR(y.at(b * 10 + d), v.at(b * 6 + d), 1e-6);
}

TEST_F(HostKernels, AttentionFullyMaskedRowIsNaN) {
  Buffer q = random(DType::F32, {2, 4}, 57), k = random(DType::F32, {3, 4}, 58);
  Buffer v = random(DType::F32, {3, 4}, 59), bias(DType::F32, {2, 3});
  float values[6] = {-INFINITY, -INFINITY, -INFINITY, 0.0f, -INFINITY, 1.0f};
  std::memcpy(bias.storage.data(), values, sizeof(values));
  Buffer y(DType::F32, {2, 4});
  AttentionParams params;
  TensorRef biasRef = bias.ref();
  attention(*ctx, "attention", params, q.ref(), k.ref(), v.ref(), &biasRef,
            y.ref());
  for (int64_t d = 0; d < 4; ++d)
    EXPECT_TRUE(std::isnan(y.at(d))) << d;
  std::vector<double> expected =
      referenceAttention(q, k, v, &bias, params, y.shape);
  for (int64_t d = 4; d < 8; ++d)
    EXPECT_NEAR(y.at(d), expected[size_t(d)], 1e-6);
}

TEST_F(HostKernels, AttentionSafeSoftmaxGivesFullyMaskedRowsZeros) {
  // PyTorch's safe softmax: row 0 sees no key and gives zeros; row 1 is the
  // ordinary attention over its two unmasked keys, as without the flag.
  Buffer q = random(DType::F32, {2, 4}, 57), k = random(DType::F32, {3, 4}, 58);
  Buffer v = random(DType::F32, {3, 4}, 59), bias(DType::F32, {2, 3});
  float values[6] = {-INFINITY, -INFINITY, -INFINITY, 0.0f, -INFINITY, 1.0f};
  std::memcpy(bias.storage.data(), values, sizeof(values));
  Buffer y(DType::F32, {2, 4});
  AttentionParams params;
  params.safeSoftmax = true;
  TensorRef biasRef = bias.ref();
  attention(*ctx, "attention", params, q.ref(), k.ref(), v.ref(), &biasRef,
            y.ref());
  for (int64_t d = 0; d < 4; ++d)
    EXPECT_EQ(y.at(d), 0.0) << d;
  std::vector<double> expected =
      referenceAttention(q, k, v, &bias, AttentionParams(), y.shape);
  for (int64_t d = 4; d < 8; ++d)
    EXPECT_NEAR(y.at(d), expected[size_t(d)], 1e-6);
}

TEST_F(HostKernels, IsNaN) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    Buffer staging(DType::F64, {5}), x(dtype, {5}), y(DType::Bool, {5});
    double values[5] = {1.5, NAN, -INFINITY, 0.0, -NAN};
    std::memcpy(staging.storage.data(), values, sizeof(values));
    cast(*ctx, "stage", staging.ref(), x.ref());
    isNaN(*ctx, "is_nan", x.ref(), y.ref());
    SCOPED_TRACE(dtypeName(dtype));
    for (int64_t i = 0; i < 5; ++i)
      EXPECT_EQ(y.at(i), std::isnan(values[i]) ? 1 : 0) << i;
  }
  Buffer x(DType::I64, {2}), y(DType::Bool, {2});
  isNaN(*ctx, "/IsNaN", x.ref(), y.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx)).find("/IsNaN"), std::string::npos);
  destroyContext(ctx);
  ctx = createContext();
}

TEST_F(HostKernels, Range) {
  Buffer start(DType::I64, {}), delta(DType::I64, {}), y(DType::I64, {4});
  fillInts(start, {7});
  fillInts(delta, {-3});
  range(*ctx, "range", start.ref(), delta.ref(), y.ref());
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_EQ(y.at(i), 7.0 - 3.0 * double(i)) << i;
  Buffer fstart(DType::F32, {}), fdelta(DType::F32, {}), fy(DType::F32, {3});
  float first = 0.5f, step = 0.25f;
  std::memcpy(fstart.storage.data(), &first, 4);
  std::memcpy(fdelta.storage.data(), &step, 4);
  range(*ctx, "range", fstart.ref(), fdelta.ref(), fy.ref());
  for (int64_t i = 0; i < 3; ++i)
    EXPECT_EQ(fy.at(i), 0.5 + 0.25 * double(i)) << i;
  ASSERT_EQ(contextError(*ctx), nullptr);
}

TEST_F(HostKernels, AttentionErrorsNameTheNode) {
  Buffer q = random(DType::F32, {2, 4}, 60), k = random(DType::F32, {3, 5}, 61);
  Buffer v = random(DType::F32, {3, 4}, 62), y(DType::F32, {2, 4});
  attention(*ctx, "/attn/MatMul", AttentionParams(), q.ref(), k.ref(), v.ref(),
            nullptr, y.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  std::string message = contextError(*ctx);
  EXPECT_NE(message.find("node '/attn/MatMul'"), std::string::npos) << message;
  EXPECT_NE(message.find("K [3, 5]"), std::string::npos) << message;

  destroyContext(ctx);
  ctx = createContext();
  Buffer k2 = random(DType::F32, {3, 4}, 63);
  attention(*ctx, "/attn/alias", AttentionParams(), q.ref(), k2.ref(), v.ref(),
            nullptr, q.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx)).find("must not alias"),
            std::string::npos);
  destroyContext(ctx);
  ctx = createContext();
}

TEST_F(HostKernels, ReduceOverNonContiguousAxes) {
  Buffer x = random(DType::F32, {3, 4, 5}, 31);
  int axes[2] = {0, 2};
  for (ReduceOp op :
       {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::L2}) {
    Buffer y(DType::F32, {1, 4, 1});
    reduce(*ctx, "reduce", op, axes, 2, x.ref(), y.ref());
    std::vector<double> expected;
    for (int64_t j = 0; j < 4; ++j) {
      double acc = op == ReduceOp::Max ? -1e30 : 0;
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t k = 0; k < 5; ++k) {
          double v = x.at((i * 4 + j) * 5 + k);
          acc = op == ReduceOp::Max  ? std::max(acc, v)
                : op == ReduceOp::L2 ? acc + v * v
                                     : acc + v;
        }
      expected.push_back(op == ReduceOp::Mean ? acc / 15
                         : op == ReduceOp::L2 ? std::sqrt(acc)
                                              : acc);
    }
    expectClose(y, expected, 1e-5);
  }
  Buffer arg(DType::I64, {3, 5});
  argReduce(*ctx, "argmax", true, 1, x.ref(), arg.ref());
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t k = 0; k < 5; ++k) {
      int64_t best = 0;
      for (int64_t j = 1; j < 4; ++j)
        if (x.at((i * 4 + j) * 5 + k) > x.at((i * 4 + best) * 5 + k))
          best = j;
      EXPECT_EQ(arg.at(i * 5 + k), best);
    }
}

/// ONNX CumSum written from the definition: element (o, a, i) of the
/// [outer, axis, inner] view sums the elements j of its row with j <= a
/// (j >= a when reversed), j != a when exclusive. `add` accumulates.
template <typename T, typename Add>
std::vector<T> cumSumReference(const std::vector<T> &x, int64_t outer,
                               int64_t axis, int64_t inner, bool exclusive,
                               bool reverse, Add add) {
  std::vector<T> y(x.size(), T(0));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t a = 0; a < axis; ++a)
      for (int64_t i = 0; i < inner; ++i) {
        T sum = T(0);
        for (int64_t j = 0; j < axis; ++j)
          if ((reverse ? j >= a : j <= a) && !(exclusive && j == a))
            sum = add(sum, x[size_t((o * axis + j) * inner + i)]);
        y[size_t((o * axis + a) * inner + i)] = sum;
      }
  return y;
}

std::vector<int64_t> int64Values(const Buffer &b) {
  std::vector<int64_t> values(size_t(b.count()));
  std::memcpy(values.data(), b.storage.data(), values.size() * 8);
  return values;
}

TEST_F(HostKernels, CumSumFloatsOverTheMiddleAxis) {
  auto addDouble = [](double a, double b) { return a + b; };
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    Buffer x = random(dt, {3, 5, 4}, 40);
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true}) {
        SCOPED_TRACE(std::string(dtypeName(dt)) +
                     (exclusive ? " exclusive" : "") +
                     (reverse ? " reverse" : ""));
        Buffer y(dt, {3, 5, 4});
        cumSum(*ctx, "cumsum", 1, exclusive, reverse, x.ref(), y.ref());
        expectClose(
            y,
            cumSumReference(x.values(), 3, 5, 4, exclusive, reverse, addDouble),
            tolerance(dt));
      }
  }
  // In place over the last axis: each element is read before it is written.
  Buffer x = random(DType::F32, {2, 7}, 41);
  std::vector<double> expected =
      cumSumReference(x.values(), 2, 7, 1, true, true, addDouble);
  cumSum(*ctx, "cumsum_in_place", 1, true, true, x.ref(), x.ref());
  expectClose(x, expected, 1e-6);
}

TEST_F(HostKernels, CumSumIntegersAreExactAndWrap) {
  // Beyond 2^53 (where a double accumulator would round) and past INT64_MAX.
  const int64_t big = int64_t(1) << 62;
  std::vector<int64_t> values = {big, 1, big, big, 3,   -7, 1,   1,
                                 1,   0, -1,  5,   big, 9,  -2,  4,
                                 6,   8, 10,  12,  -3,  2,  big, 7};
  Buffer x(DType::I64, {2, 4, 3});
  fillInts(x, values);
  auto wrap = [](int64_t a, int64_t b) {
    return int64_t(uint64_t(a) + uint64_t(b));
  };
  for (bool exclusive : {false, true})
    for (bool reverse : {false, true}) {
      SCOPED_TRACE(std::string(exclusive ? "exclusive" : "inclusive") +
                   (reverse ? " reverse" : ""));
      Buffer y(DType::I64, {2, 4, 3});
      cumSum(*ctx, "cumsum_i64", 1, exclusive, reverse, x.ref(), y.ref());
      EXPECT_EQ(int64Values(y),
                cumSumReference(values, 2, 4, 3, exclusive, reverse, wrap));
    }
  // Position ids of a padding mask: cumsum(mask, -1) on i32.
  Buffer mask(DType::I32, {2, 5}), ids(DType::I32, {2, 5});
  fillInts(mask, {1, 1, 1, 0, 0, 0, 1, 1, 1, 1});
  cumSum(*ctx, "position_ids", 1, false, false, mask.ref(), ids.ref());
  expectClose(ids, {1, 2, 3, 3, 3, 0, 1, 2, 3, 4}, 0);
  // i32 wraps in 32 bits.
  Buffer edge(DType::I32, {2}), wrapped(DType::I32, {2});
  fillInts(edge, {2147483647, 1});
  cumSum(*ctx, "cumsum_i32", 0, false, false, edge.ref(), wrapped.ref());
  expectClose(wrapped, {2147483647.0, -2147483648.0}, 0);
}

TEST_F(HostKernels, CumSumRejectsBadArgumentsNamingTheNode) {
  Buffer flags(DType::Bool, {4}), out(DType::Bool, {4});
  cumSum(*ctx, "/model/CumSum", 0, false, false, flags.ref(), out.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx)).find("/model/CumSum"),
            std::string::npos);
  EXPECT_NE(std::string(contextError(*ctx)).find("bool"), std::string::npos);
  destroyContext(ctx);
  ctx = createContext();
  Buffer x(DType::F32, {2, 3}), y(DType::F32, {2, 3});
  cumSum(*ctx, "/model/CumSum_1", 2, false, false, x.ref(), y.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx)).find("axis 2 out of range"),
            std::string::npos);
  destroyContext(ctx);
  ctx = createContext();
}

TEST_F(HostKernels, TransposeConcatSplit) {
  Buffer x = random(DType::F16, {2, 3, 4}, 32), y(DType::F16, {4, 2, 3});
  int perm[3] = {2, 0, 1};
  transpose(*ctx, "transpose", perm, x.ref(), y.ref());
  for (int64_t i = 0; i < 24; ++i) {
    std::vector<int64_t> c = coordsOf(i, y.shape);
    EXPECT_EQ(y.at(i), x.at((c[1] * 3 + c[2]) * 4 + c[0]));
  }
  Buffer a = random(DType::I32, {2, 1, 3}, 33),
         b = random(DType::I32, {2, 2, 3}, 34);
  Buffer cat(DType::I32, {2, 3, 3});
  TensorRef parts[2] = {a.ref(), b.ref()};
  concat(*ctx, "concat", 1, parts, 2, cat.ref());
  for (int64_t i = 0; i < 18; ++i) {
    std::vector<int64_t> c = coordsOf(i, cat.shape);
    double expected = c[1] == 0 ? a.at(c[0] * 3 + c[2])
                                : b.at((c[0] * 2 + c[1] - 1) * 3 + c[2]);
    EXPECT_EQ(cat.at(i), expected);
  }
  Buffer a2(DType::I32, {2, 1, 3}), b2(DType::I32, {2, 2, 3});
  TensorRef outs[2] = {a2.ref(), b2.ref()};
  split(*ctx, "split", 1, cat.ref(), outs, 2);
  EXPECT_EQ(a2.storage, a.storage);
  EXPECT_EQ(b2.storage, b.storage);
}

TEST_F(HostKernels, SliceWithNegativeStep) {
  Buffer x = random(DType::F32, {4, 6}, 35), y(DType::F32, {2, 3});
  int64_t starts[2] = {1, 5}, steps[2] = {2, -2};
  slice(*ctx, "slice", starts, steps, x.ref(), y.ref());
  expectClose(y,
              {x.at(1 * 6 + 5), x.at(1 * 6 + 3), x.at(1 * 6 + 1),
               x.at(3 * 6 + 5), x.at(3 * 6 + 3), x.at(3 * 6 + 1)},
              0);
}

TEST_F(HostKernels, GatherNegativeIndicesAndGatherElements) {
  Buffer x = random(DType::F32, {2, 5, 3}, 36), idx(DType::I64, {2, 2});
  fillInts(idx, {0, -1, 3, -5});
  Buffer y(DType::F32, {2, 2, 2, 3});
  gather(*ctx, "gather", 1, x.ref(), idx.ref(), y.ref());
  int64_t wrapped[4] = {0, 4, 3, 0};
  for (int64_t i = 0; i < y.count(); ++i) {
    std::vector<int64_t> c = coordsOf(i, y.shape);
    EXPECT_EQ(y.at(i), x.at((c[0] * 5 + wrapped[c[1] * 2 + c[2]]) * 3 + c[3]));
  }
  Buffer eidx(DType::I32, {2, 2, 3}), ey(DType::F32, {2, 2, 3});
  fillInts(eidx, {4, 0, -1, 2, 2, 2, 1, 3, 0, 0, -2, 4});
  gatherElements(*ctx, "gather_elements", 1, x.ref(), eidx.ref(), ey.ref());
  for (int64_t i = 0; i < 12; ++i) {
    std::vector<int64_t> c = coordsOf(i, ey.shape);
    int64_t j = int64_t(eidx.at(i));
    j = j < 0 ? j + 5 : j;
    EXPECT_EQ(ey.at(i), x.at((c[0] * 5 + j) * 3 + c[2]));
  }
}

TEST_F(HostKernels, GatherOutOfRangeNamesTheNode) {
  Buffer x = random(DType::F32, {3}, 37), idx(DType::I64, {1}),
         y(DType::F32, {1});
  fillInts(idx, {3});
  gather(*ctx, "/embed/Gather", 0, x.ref(), idx.ref(), y.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx)).find("/embed/Gather"),
            std::string::npos);
  EXPECT_NE(std::string(contextError(*ctx)).find("out of range"),
            std::string::npos);
  destroyContext(ctx);
  ctx = createContext();
}

/// ScatterND reference written from the ONNX definition: copy, then apply
/// the tuples in order.
std::vector<double> scatterReference(const Buffer &data, const Buffer &indices,
                                     const Buffer &updates,
                                     ScatterReduction reduction) {
  std::vector<double> out = data.values();
  int64_t k = indices.shape.back();
  int64_t tuples = indices.count() / std::max<int64_t>(k, 1);
  int64_t slice = updates.count() / tuples;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t base = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t index = int64_t(indices.at(t * k + d));
      if (index < 0)
        index += data.shape[size_t(d)];
      int64_t stride = 1;
      for (size_t e = size_t(d) + 1; e < data.shape.size(); ++e)
        stride *= data.shape[e];
      base += index * stride;
    }
    for (int64_t j = 0; j < slice; ++j) {
      double &v = out[size_t(base + j)];
      double u = updates.at(t * slice + j);
      v = reduction == ScatterReduction::None  ? u
          : reduction == ScatterReduction::Add ? v + u
          : reduction == ScatterReduction::Mul ? v * u
          : reduction == ScatterReduction::Max ? std::max(v, u)
                                               : std::min(v, u);
    }
  }
  return out;
}

TEST_F(HostKernels, ScatterNDSlicesElementsAndReductions) {
  // Row slices (k = 1) with a negative index, f32.
  Buffer data = random(DType::F32, {5, 3}, 40), rows(DType::I64, {2, 1});
  fillInts(rows, {-1, 1});
  Buffer updates = random(DType::F32, {2, 3}, 41), y(DType::F32, {5, 3});
  scatterND(*ctx, "rows", ScatterReduction::None, data.ref(), rows.ref(),
            updates.ref(), y.ref());
  expectClose(y, scatterReference(data, rows, updates, ScatterReduction::None),
              0);
  // Single elements (k = 2), i32 indices, every reduction with a repeated
  // tuple: applied in order.
  for (ScatterReduction reduction :
       {ScatterReduction::Add, ScatterReduction::Mul, ScatterReduction::Max,
        ScatterReduction::Min}) {
    Buffer grid = random(DType::F64, {3, 4}, 42), at(DType::I32, {3, 2});
    fillInts(at, {2, 3, 0, -4, 2, 3});
    Buffer values = random(DType::F64, {3}, 43), out(DType::F64, {3, 4});
    scatterND(*ctx, "elements", reduction, grid.ref(), at.ref(), values.ref(),
              out.ref());
    SCOPED_TRACE(int(reduction));
    expectClose(out, scatterReference(grid, at, values, reduction), 1e-12);
  }
  // Integer reductions wrap like the integer type (u8: 250 + 10 = 4).
  Buffer bytes(DType::U8, {4}), at(DType::I64, {2, 1}), add(DType::U8, {2});
  fillInts(bytes, {250, 1, 2, 3});
  fillInts(at, {0, 3});
  fillInts(add, {10, 7});
  Buffer sum(DType::U8, {4});
  scatterND(*ctx, "wrap", ScatterReduction::Add, bytes.ref(), at.ref(),
            add.ref(), sum.ref());
  expectClose(sum, {4, 1, 2, 10}, 0);
}

TEST_F(HostKernels, ScatterNDInPlaceAndNoneWithRepeats) {
  // y is data (the planner's in-place case): no copy, the updates land on it.
  Buffer data(DType::I64, {2, 3}), at(DType::I64, {3, 1}),
      rows(DType::I64, {3, 3});
  fillInts(data, {1, 2, 3, 4, 5, 6});
  fillInts(at, {1, 0, 1});
  fillInts(rows, {10, 20, 30, 40, 50, 60, 70, 80, 90});
  scatterND(*ctx, "in_place", ScatterReduction::None, data.ref(), at.ref(),
            rows.ref(), data.ref());
  // Row 1 is written twice; the last update wins on the host.
  expectClose(data, {40, 50, 60, 70, 80, 90}, 0);
  // Bool data with reduction none (any dtype moves).
  Buffer mask(DType::Bool, {4}), one(DType::I64, {1, 1}), on(DType::Bool, {1});
  fillInts(one, {2});
  fillInts(on, {1});
  Buffer masked(DType::Bool, {4});
  scatterND(*ctx, "mask", ScatterReduction::None, mask.ref(), one.ref(),
            on.ref(), masked.ref());
  expectClose(masked, {0, 0, 1, 0}, 0);
}

TEST_F(HostKernels, ScatterNDErrorsNameTheNode) {
  struct Bad {
    const char *node, *message;
    std::function<void(Context &)> run;
  };
  Buffer data(DType::F32, {4}), at(DType::I64, {1, 1}), up(DType::F32, {1}),
      y(DType::F32, {4}), wide(DType::F32, {2}), flag(DType::Bool, {4}),
      flagUp(DType::Bool, {1});
  fillInts(at, {4});
  for (const Bad &bad : std::vector<Bad>{
           {"/mask/ScatterND", "index 4 out of range [-4, 4) on axis 0",
            [&](Context &c) {
              scatterND(c, "/mask/ScatterND", ScatterReduction::None,
                        data.ref(), at.ref(), up.ref(), y.ref());
            }},
           {"shape", "updates [2] must have shape indices[:-1] + data[k:]",
            [&](Context &c) {
              scatterND(c, "shape", ScatterReduction::None, data.ref(),
                        at.ref(), wide.ref(), y.ref());
            }},
           {"overlap", "indices and updates must not overlap the output",
            [&](Context &c) {
              TensorRef alias = y.ref();
              alias.rank = 1;
              alias.shape[0] = 1;
              scatterND(c, "overlap", ScatterReduction::None, data.ref(),
                        at.ref(), alias, y.ref());
            }},
           {"bool_add", "needs a numeric dtype, got bool", [&](Context &c) {
              scatterND(c, "bool_add", ScatterReduction::Add, flag.ref(),
                        at.ref(), flagUp.ref(), flag.ref());
            }}}) {
    bad.run(*ctx);
    ASSERT_NE(contextError(*ctx), nullptr) << bad.node;
    std::string error = contextError(*ctx);
    EXPECT_NE(error.find(bad.node), std::string::npos) << error;
    EXPECT_NE(error.find(bad.message), std::string::npos) << error;
    destroyContext(ctx);
    ctx = createContext();
  }
  // Nothing was written by the out-of-range call.
  expectClose(y, {0, 0, 0, 0}, 0);
}

TEST_F(HostKernels, ExpandAndFill) {
  Buffer x = random(DType::BF16, {3, 1}, 38), y(DType::BF16, {2, 3, 4});
  expand(*ctx, "expand", x.ref(), y.ref());
  for (int64_t i = 0; i < 24; ++i)
    EXPECT_EQ(y.at(i), x.at((i / 4) % 3));
  Buffer f(DType::I64, {5});
  fill(*ctx, "fill", -3, f.ref());
  expectClose(f, {-3, -3, -3, -3, -3}, 0);
}

TEST_F(HostKernels, PadModes) {
  Buffer x = random(DType::F32, {2, 4}, 39);
  int64_t begin[2] = {1, 2}, end[2] = {0, 3};
  for (PadMode mode : {PadMode::Constant, PadMode::Reflect, PadMode::Edge}) {
    Buffer y(DType::F32, {3, 9});
    pad(*ctx, "pad", mode, begin, end, 0.5, x.ref(), y.ref());
    for (int64_t i = 0; i < 27; ++i) {
      int64_t r = i / 9 - 1, c = i % 9 - 2;
      double expected;
      if (mode == PadMode::Constant) {
        expected = (r < 0 || c < 0 || c >= 4) ? 0.5 : x.at(r * 4 + c);
      } else if (mode == PadMode::Edge) {
        expected = x.at(std::clamp<int64_t>(r, 0, 1) * 4 +
                        std::clamp<int64_t>(c, 0, 3));
      } else {
        int64_t rr = r < 0 ? -r : r, cc = c < 0 ? -c : c >= 4 ? 6 - c : c;
        expected = x.at(rr * 4 + cc);
      }
      EXPECT_EQ(y.at(i), expected) << "mode " << int(mode) << " element " << i;
    }
  }
}

TEST_F(HostKernels, ResizeNearestAndLinear) {
  Buffer x = random(DType::F32, {1, 1, 3, 4}, 40);
  ResizeParams nearest;
  nearest.coordinateMode = CoordinateMode::Asymmetric;
  nearest.nearestMode = NearestMode::Floor;
  Buffer y(DType::F32, {1, 1, 6, 8});
  resize(*ctx, "resize_nearest", nearest, x.ref(), y.ref());
  for (int64_t i = 0; i < 48; ++i)
    EXPECT_EQ(y.at(i), x.at((i / 8 / 2) * 4 + (i % 8) / 2));

  for (CoordinateMode mode :
       {CoordinateMode::HalfPixel, CoordinateMode::AlignCorners,
        CoordinateMode::PytorchHalfPixel, CoordinateMode::Asymmetric}) {
    ResizeParams linear;
    linear.mode = ResizeMode::Linear;
    linear.coordinateMode = mode;
    Buffer z(DType::F32, {1, 1, 5, 7});
    resize(*ctx, "resize_linear", linear, x.ref(), z.ref());
    auto source = [&](int64_t o, int64_t in, int64_t out) {
      double s = double(out) / double(in), v;
      if (mode == CoordinateMode::HalfPixel ||
          mode == CoordinateMode::PytorchHalfPixel)
        v = (o + 0.5) / s - 0.5;
      else if (mode == CoordinateMode::AlignCorners)
        v = double(o) * double(in - 1) / double(out - 1);
      else
        v = o / s;
      return std::clamp(v, 0.0, double(in - 1));
    };
    std::vector<double> expected;
    for (int64_t oy = 0; oy < 5; ++oy)
      for (int64_t ox = 0; ox < 7; ++ox) {
        double sy = source(oy, 3, 5), sx = source(ox, 4, 7);
        int64_t y0 = int64_t(sy), x0 = int64_t(sx);
        int64_t y1 = std::min<int64_t>(y0 + 1, 2),
                x1 = std::min<int64_t>(x0 + 1, 3);
        double fy = sy - y0, fx = sx - x0;
        expected.push_back(
            (1 - fy) * ((1 - fx) * x.at(y0 * 4 + x0) + fx * x.at(y0 * 4 + x1)) +
            fy * ((1 - fx) * x.at(y1 * 4 + x0) + fx * x.at(y1 * 4 + x1)));
      }
    SCOPED_TRACE(int(mode));
    expectClose(z, expected, 1e-5);
  }
}

TEST_F(HostKernels, InPlaceElementwiseAndCopy) {
  Buffer x = random(DType::F32, {17}, 41);
  Buffer original = x;
  unary(*ctx, "neg", UnaryOp::Neg, 0, 0, x.ref(), x.ref());
  for (int64_t i = 0; i < 17; ++i)
    EXPECT_EQ(x.at(i), -original.at(i));
  Buffer y(DType::F32, {17});
  copy(*ctx, "copy", x.ref(), y.ref());
  EXPECT_EQ(y.storage, x.storage);
}

TEST_F(HostKernels, ErrorsNameTheNodeAndStopLaterOps) {
  Buffer a = random(DType::F32, {2, 3}, 42), b = random(DType::F32, {4}, 43);
  Buffer c(DType::F32, {2, 3});
  binary(*ctx, "/block/Add", BinaryOp::Add, a.ref(), b.ref(), c.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  std::string message = contextError(*ctx);
  EXPECT_NE(message.find("node '/block/Add'"), std::string::npos) << message;
  EXPECT_NE(message.find("[4]"), std::string::npos) << message;
  // The next op does nothing and the first error stays.
  Buffer d(DType::F32, {2, 3});
  fill(*ctx, "fill", 1.0, d.ref());
  EXPECT_EQ(d.at(0), 0.0);
  EXPECT_EQ(message, contextError(*ctx));

  destroyContext(ctx);
  ctx = createContext();
  Buffer w = random(DType::F32, {2, 3, 3, 3}, 44),
         x = random(DType::F32, {1, 3, 5, 5}, 45);
  Buffer wrong(DType::F32, {1, 2, 5, 5}); // no padding: expected 3x3
  conv(*ctx, "/stem/Conv", ConvParams(), x.ref(), w.ref(), nullptr, wrong.ref(),
       nullptr, 0);
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx)).find("/stem/Conv"),
            std::string::npos);
  destroyContext(ctx);
  ctx = createContext();
}

TEST(ConvWorkspace, BoundIsDocumentedFormula) {
  TensorRef x, w, y;
  int64_t xs[4] = {1, 64, 56, 56}, ws[4] = {64, 64, 3, 3},
          ys[4] = {1, 64, 56, 56};
  x = makeTensor(nullptr, DType::F16, 4, xs);
  w = makeTensor(nullptr, DType::F16, 4, ws);
  y = makeTensor(nullptr, DType::F16, 4, ys);
  EXPECT_EQ(convWorkspaceBound(ConvParams(), x, w, y), size_t(1) << 20);
  int64_t big[4] = {8, 256, 128, 128};
  TensorRef bigX = makeTensor(nullptr, DType::F32, 4, big);
  EXPECT_EQ(convWorkspaceBound(ConvParams(), bigX, w, bigX), size_t(64) << 20);
  int64_t mid[4] = {1, 100, 100, 101};
  TensorRef midX = makeTensor(nullptr, DType::F32, 4, mid);
  size_t bound = convWorkspaceBound(ConvParams(), midX, w, midX);
  EXPECT_EQ(bound % 256, 0u);
  EXPECT_GE(bound, midX.bytes());
  EXPECT_LT(bound, midX.bytes() + 256);
}

/// A context whose ops use `threads` threads (the backend reads
/// MEMOPT_HOST_THREADS when the context is created).
Context *createContextWithThreads(int threads) {
  const char *previous = std::getenv("MEMOPT_HOST_THREADS");
  std::string saved = previous ? previous : "";
  setenv("MEMOPT_HOST_THREADS", std::to_string(threads).c_str(), 1);
  Context *context = createContext();
  if (previous)
    setenv("MEMOPT_HOST_THREADS", saved.c_str(), 1);
  else
    unsetenv("MEMOPT_HOST_THREADS");
  return context;
}

/// Direct N-D convolution (1-3 spatial dims) from the ONNX definition.
std::vector<double> referenceConv(const Buffer &x, const Buffer &w,
                                  const Buffer *bias, const ConvParams &p,
                                  const std::vector<int64_t> &yShape) {
  int rank = int(x.shape.size()) - 2;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, ker[3] = {1, 1, 1};
  for (int d = 0; d < rank; ++d) {
    in[d] = x.shape[size_t(2 + d)];
    out[d] = yShape[size_t(2 + d)];
    ker[d] = w.shape[size_t(2 + d)];
  }
  int64_t c = x.shape[1], m = w.shape[0], cg = c / p.group, mg = m / p.group;
  std::vector<double> y;
  for (int64_t b = 0; b < x.shape[0]; ++b)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t o0 = 0; o0 < out[0]; ++o0)
        for (int64_t o1 = 0; o1 < out[1]; ++o1)
          for (int64_t o2 = 0; o2 < out[2]; ++o2) {
            double acc = bias ? bias->at(o) : 0;
            int64_t oc[3] = {o0, o1, o2};
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t k = 0; k < ker[0] * ker[1] * ker[2]; ++k) {
                int64_t kc[3] = {k / (ker[1] * ker[2]), k / ker[2] % ker[1],
                                 k % ker[2]};
                int64_t ic[3];
                bool inside = true;
                for (int d = 0; d < 3; ++d) {
                  ic[d] = d < rank ? oc[d] * p.strides[d] - p.padsBegin[d] +
                                         kc[d] * p.dilations[d]
                                   : 0;
                  inside = inside && ic[d] >= 0 && ic[d] < in[d];
                }
                if (!inside)
                  continue;
                int64_t xi = (b * c + o / mg * cg + ci) * in[0] + ic[0];
                xi = (xi * in[1] + ic[1]) * in[2] + ic[2];
                acc += x.at(xi) *
                       w.at((o * cg + ci) * ker[0] * ker[1] * ker[2] + k);
              }
            y.push_back(p.activation == Activation::Relu ? std::max(acc, 0.0)
                                                         : acc);
          }
  return y;
}

/// The large kernels split their work over threads; every output element
/// must still be computed by one thread in one order, so 1 and 3 threads give
/// the same bits. The shapes are large enough to be split (several row and
/// column blocks, k past one packed block of 256) and divide by neither the
/// thread count nor the blocking; the 1-thread results are also checked
/// against the direct loops. Convs: a grouped one with few channels per
/// group (direct loops), a 2-D and a 3-D one with many (implicit GEMM).
TEST_F(HostKernels, ParallelKernelsAreBitIdenticalAcrossThreadCounts) {
  Buffer a = random(DType::F32, {2, 70, 300}, 60),
         b = random(DType::F32, {300, 301}, 61),
         rowBias = random(DType::F32, {301}, 62);
  Buffer aT = random(DType::F32, {2, 300, 70}, 63),
         bT = random(DType::F32, {2, 301, 300}, 64),
         fullBias = random(DType::F32, {2, 70, 301}, 65);
  ConvParams convP;
  convP.group = 2;
  convP.strides[0] = 2;
  convP.dilations[1] = 2;
  convP.padsBegin[0] = convP.padsEnd[0] = 1;
  convP.padsBegin[1] = 2;
  convP.activation = Activation::Relu;
  // H: (24 + 2 - 3) / 2 + 1 = 12; W: (20 + 2 - 5) + 1 = 18.
  Buffer x = random(DType::F32, {2, 8, 24, 20}, 66),
         w = random(DType::F32, {10, 4, 3, 3}, 67),
         convBias = random(DType::F32, {10}, 68);
  // Groups of 10 output channels and 32 x 3 x 3 = 288 taps (two slices of
  // the GEMM's k); H: (13 + 2 - 3) / 2 + 1 = 7, W: 9.
  Buffer gx = random(DType::F32, {2, 64, 13, 11}, 77),
         gw = random(DType::F32, {20, 32, 3, 3}, 78);
  ConvParams p3;
  p3.spatialRank = 3;
  p3.strides[1] = 2;
  p3.dilations[2] = 2;
  p3.padsBegin[0] = p3.padsEnd[2] = 1;
  p3.padsBegin[2] = 2;
  // [5, 9, 10] -> [(5 + 1 - 2) + 1, (9 - 3) / 2 + 1, (10 + 3 - 5) + 1].
  Buffer x3 = random(DType::F32, {1, 6, 5, 9, 10}, 79),
         w3 = random(DType::F32, {9, 6, 2, 3, 3}, 80);
  ConvParams transP;
  transP.strides[0] = transP.strides[1] = 2;
  transP.padsBegin[0] = transP.padsEnd[0] = 1;
  transP.padsBegin[1] = transP.padsEnd[1] = 1;
  transP.outputPadding[0] = transP.outputPadding[1] = 1;
  // out = 2 * (16 - 1) + 3 - 2 + 1 = 32.
  Buffer tx = random(DType::F32, {2, 8, 16, 16}, 69),
         tw = random(DType::F32, {8, 12, 3, 3}, 70);
  Buffer q = random(DType::F32, {2, 3, 70, 16}, 71),
         k = random(DType::F32, {2, 1, 50, 16}, 72),
         kT = random(DType::F32, {2, 3, 16, 70}, 73),
         v = random(DType::F32, {2, 3, 50, 12}, 74),
         vLong = random(DType::F32, {2, 3, 70, 12}, 75),
         attnBias = random(DType::F32, {3, 1, 50}, 76);

  std::vector<std::vector<Buffer>> runs;
  for (int threads : {1, 3}) {
    Context *context = createContextWithThreads(threads);
    std::vector<Buffer> out;
    MatmulParams mp;
    mp.activation = Activation::Gelu;
    TensorRef rowRef = rowBias.ref();
    out.emplace_back(DType::F32, std::vector<int64_t>{2, 70, 301});
    matmul(*context, "matmul", mp, a.ref(), b.ref(), &rowRef, out.back().ref());
    MatmulParams gemm;
    gemm.transA = gemm.transB = true;
    gemm.alpha = 0.5f;
    gemm.beta = 2.0f;
    TensorRef fullRef = fullBias.ref();
    out.emplace_back(DType::F32, std::vector<int64_t>{2, 70, 301});
    matmul(*context, "gemm", gemm, aT.ref(), bT.ref(), &fullRef,
           out.back().ref());
    TensorRef convBiasRef = convBias.ref();
    out.emplace_back(DType::F32, std::vector<int64_t>{2, 10, 12, 18});
    conv(*context, "conv", convP, x.ref(), w.ref(), &convBiasRef,
         out.back().ref(), nullptr, 0);
    out.emplace_back(DType::F32, std::vector<int64_t>{2, 20, 7, 9});
    conv(*context, "conv_gemm", convP, gx.ref(), gw.ref(), nullptr,
         out.back().ref(), nullptr, 0);
    out.emplace_back(DType::F32, std::vector<int64_t>{1, 9, 5, 4, 9});
    conv(*context, "conv3d", p3, x3.ref(), w3.ref(), nullptr, out.back().ref(),
         nullptr, 0);
    out.emplace_back(DType::F32, std::vector<int64_t>{2, 12, 32, 32});
    convTranspose(*context, "convT", transP, tx.ref(), tw.ref(), nullptr,
                  out.back().ref(), nullptr, 0);
    AttentionParams ap;
    ap.scale = 0.25f;
    TensorRef attnBiasRef = attnBias.ref();
    out.emplace_back(DType::F32, std::vector<int64_t>{2, 3, 70, 12});
    attention(*context, "attention", ap, q.ref(), k.ref(), v.ref(),
              &attnBiasRef, out.back().ref());
    ap.causal = ap.keyTransposed = true;
    out.emplace_back(DType::F32, std::vector<int64_t>{2, 3, 70, 12});
    attention(*context, "causal", ap, q.ref(), kT.ref(), vLong.ref(), nullptr,
              out.back().ref());
    EXPECT_EQ(contextError(*context), nullptr) << contextError(*context);
    destroyContext(context);
    runs.push_back(std::move(out));
  }
  for (size_t i = 0; i < runs[0].size(); ++i)
    EXPECT_EQ(runs[0][i].storage, runs[1][i].storage)
        << "kernel " << i << " differs between 1 and 3 threads";

  std::vector<double> expectedMatmul, expectedGemm;
  for (int64_t batch = 0; batch < 2; ++batch)
    for (int64_t i = 0; i < 70; ++i)
      for (int64_t j = 0; j < 301; ++j) {
        double acc = 0, accT = 0;
        for (int64_t p = 0; p < 300; ++p) {
          acc += a.at((batch * 70 + i) * 300 + p) * b.at(p * 301 + j);
          accT += aT.at((batch * 300 + p) * 70 + i) *
                  bT.at((batch * 301 + j) * 300 + p);
        }
        acc += rowBias.at(j);
        expectedMatmul.push_back(0.5 * acc *
                                 (1 + std::erf(acc / std::sqrt(2.0))));
        expectedGemm.push_back(0.5 * accT +
                               2.0 * fullBias.at((batch * 70 + i) * 301 + j));
      }
  expectClose(runs[0][0], expectedMatmul, 1e-5);
  expectClose(runs[0][1], expectedGemm, 1e-5);
  expectClose(runs[0][2],
              referenceConv2d(x, w, &convBias, convP, runs[0][2].shape), 1e-5);
  AttentionParams ap;
  ap.scale = 0.25f;
  expectClose(runs[0][3],
              referenceConv(gx, gw, nullptr, convP, runs[0][3].shape), 1e-5);
  expectClose(runs[0][4], referenceConv(x3, w3, nullptr, p3, runs[0][4].shape),
              1e-5);
  expectClose(runs[0][6],
              referenceAttention(q, k, v, &attnBias, ap, runs[0][6].shape),
              1e-5);
  ap.causal = ap.keyTransposed = true;
  expectClose(runs[0][7],
              referenceAttention(q, kT, vLong, nullptr, ap, runs[0][7].shape),
              1e-5);
}

} // namespace
