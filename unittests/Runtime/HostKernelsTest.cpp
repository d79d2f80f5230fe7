//===- HostKernelsTest.cpp - host backend kernels vs naive references -----===//
//
// Each kernel family runs on small, odd-sized, never-zero random inputs and is
// compared with a reference written here from the ONNX definition (direct
// loops, not the backend's code). This file: conversions, elementwise,
// matmul, conv, pooling, normalization, attention; HostKernelsMovementTest.cpp
// the rest.
//
//===----------------------------------------------------------------------===//

#include "HostKernelsTest.h"

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

// The channels-last training gradients (memopt-layout on a training program)
// compute exactly what the NCHW ones do, element for element: a
// convolution's data gradient (conv_transpose with the forward's KRSC
// filter, strided with output_padding, grouped) and filter gradient (KRSC
// dW), the max / average pool gradient, batch normalization's training
// forward (statistics, relu) and backward.
// Depthwise convolutions channels-last (group == C_in == C_out, the
// convolutions memopt's CUDA depthwise kernel runs and the kernel suite
// compares it with): the ONNX definition, at the kernel sizes and strides of
// its fast paths, with a channel count that is no multiple of 8, odd sizes,
// bias and ReLU, and in place over a residual.
TEST_F(HostKernels, ChannelsLastDepthwiseMatchesReference) {
  for (DType dtype : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtypeName(dtype));
    for (int64_t k : {int64_t(3), int64_t(5), int64_t(7)})
      for (int64_t stride : {int64_t(1), int64_t(2)}) {
        SCOPED_TRACE("k " + std::to_string(k) + " stride " +
                     std::to_string(stride));
        ConvParams p;
        p.group = 13;
        p.activation = Activation::Relu;
        for (int a = 0; a < 2; ++a) {
          p.strides[a] = stride;
          p.padsBegin[a] = p.padsEnd[a] = k / 2;
        }
        Buffer x = random(dtype, {2, 13, 9, 11}, 60);
        Buffer w = random(dtype, {13, 1, k, k}, 61);
        Buffer bias = random(dtype, {13}, 62);
        TensorRef biasRef = bias.ref();
        std::vector<int64_t> yShape = {2, 13, (9 - 1) / stride + 1,
                                       (11 - 1) / stride + 1};
        std::vector<double> expected = referenceConv2d(x, w, &bias, p, yShape);
        Buffer xl = permuteChannels(x), wl = permuteChannels(w);
        Buffer yl(dtype, {yShape[0], yShape[2], yShape[3], yShape[1]});
        ConvParams pl = p;
        pl.channelsLast = true;
        conv(*ctx, "conv_dw_nhwc", pl, xl.ref(), wl.ref(), &biasRef, yl.ref(),
             nullptr, 0);
        ASSERT_EQ(contextError(*ctx), nullptr);
        expectClose(permuteChannels(yl, true), expected, tolerance(dtype) * 4);

        // In place over the residual: relu(conv + bias + z).
        ConvParams linear = p;
        linear.activation = Activation::None;
        Buffer z = random(dtype, {2, 13, yShape[2], yShape[3]}, 63);
        std::vector<double> withResidual =
            referenceConv2d(x, w, &bias, linear, yShape);
        for (size_t i = 0; i < withResidual.size(); ++i)
          withResidual[i] = std::max(0.0, withResidual[i] + z.at(int64_t(i)));
        Buffer zl = permuteChannels(z);
        convResidual(*ctx, "conv_dw_residual_nhwc", pl, xl.ref(), wl.ref(),
                     &biasRef, zl.ref(), zl.ref(), nullptr, 0);
        ASSERT_EQ(contextError(*ctx), nullptr);
        expectClose(permuteChannels(zl, true), withResidual,
                    tolerance(dtype) * 4);
      }
  }
}

TEST_F(HostKernels, TrainingChannelsLastMatchesChannelsFirst) {
  for (DType dtype : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtypeName(dtype));
    for (int64_t group : {int64_t(1), int64_t(3)}) {
      SCOPED_TRACE("group " + std::to_string(group));
      ConvParams p;
      p.group = group;
      p.strides[0] = p.strides[1] = 2;
      p.padsBegin[0] = p.padsEnd[0] = p.padsBegin[1] = p.padsEnd[1] = 1;
      p.outputPadding[0] = 1;
      Buffer x = random(dtype, {2, 6, 8, 7}, 50);
      Buffer w = random(dtype, {9, 6 / group, 3, 3}, 51);
      Buffer dy = random(dtype, {2, 9, 4, 4}, 52);
      Buffer dx(dtype, x.shape), dw(dtype, w.shape);
      convTranspose(*ctx, "conv_dx", p, dy.ref(), w.ref(), nullptr, dx.ref(),
                    nullptr, 0);
      convBackwardFilter(*ctx, "conv_dw", p, x.ref(), dy.ref(), dw.ref(),
                         nullptr, 0);
      ConvParams pl = p;
      pl.channelsLast = true;
      Buffer xl = permuteChannels(x), wl = permuteChannels(w),
             dyl = permuteChannels(dy);
      Buffer dxl(dtype, permuteChannels(dx).shape),
          dwl(dtype, permuteChannels(dw).shape);
      convTranspose(*ctx, "conv_dx_nhwc", pl, dyl.ref(), wl.ref(), nullptr,
                    dxl.ref(), nullptr, 0);
      convBackwardFilter(*ctx, "conv_dw_nhwc", pl, xl.ref(), dyl.ref(),
                         dwl.ref(), nullptr, 0);
      expectSameValues(permuteChannels(dxl, true), dx);
      expectSameValues(permuteChannels(dwl, true), dw);
    }
    Buffer x = random(dtype, {2, 5, 9, 8}, 53), xl = permuteChannels(x);
    Buffer dy = random(dtype, {2, 5, 5, 4}, 54), dyl = permuteChannels(dy);
    for (PoolKind kind : {PoolKind::Max, PoolKind::Avg}) {
      PoolParams p;
      p.kind = kind;
      p.countIncludePad = kind == PoolKind::Avg;
      for (int i = 0; i < 2; ++i) {
        p.kernel[i] = 3;
        p.strides[i] = 2;
        p.padsBegin[i] = p.padsEnd[i] = 1;
      }
      Buffer dx(dtype, x.shape), dxl(dtype, xl.shape);
      poolGrad(*ctx, "pool_grad", p, x.ref(), dy.ref(), dx.ref());
      p.channelsLast = true;
      poolGrad(*ctx, "pool_grad_nhwc", p, xl.ref(), dyl.ref(), dxl.ref());
      expectSameValues(permuteChannels(dxl, true), dx);
    }
    Buffer scale = random(DType::F32, {5}, 55),
           shift = random(DType::F32, {5}, 56);
    Buffer y(dtype, x.shape), yl(dtype, xl.shape);
    Buffer mean(DType::F32, {5}), inv(DType::F32, {5}), meanl(DType::F32, {5}),
        invl(DType::F32, {5});
    batchNormTraining(*ctx, "bn", 1e-5f, Activation::Relu, x.ref(), scale.ref(),
                      shift.ref(), y.ref(), mean.ref(), inv.ref());
    batchNormTraining(*ctx, "bn_nhwc", 1e-5f, Activation::Relu, xl.ref(),
                      scale.ref(), shift.ref(), yl.ref(), meanl.ref(),
                      invl.ref(), nullptr, 0, /*channelsLast=*/true);
    expectSameValues(permuteChannels(yl, true), y);
    expectSameValues(meanl, mean);
    expectSameValues(invl, inv);
    Buffer g = random(dtype, x.shape, 57), gl = permuteChannels(g);
    Buffer dx(dtype, x.shape), dxl(dtype, xl.shape);
    Buffer dscale(DType::F32, {5}), dbias(DType::F32, {5}),
        dscalel(DType::F32, {5}), dbiasl(DType::F32, {5});
    batchNormTrainingGrad(*ctx, "bn_grad", x.ref(), g.ref(), scale.ref(),
                          mean.ref(), inv.ref(), dx.ref(), dscale.ref(),
                          dbias.ref());
    batchNormTrainingGrad(*ctx, "bn_grad_nhwc", xl.ref(), gl.ref(), scale.ref(),
                          mean.ref(), inv.ref(), dxl.ref(), dscalel.ref(),
                          dbiasl.ref(), nullptr, 0,
                          /*channelsLast=*/true);
    expectSameValues(permuteChannels(dxl, true), dx);
    expectSameValues(dscalel, dscale);
    expectSameValues(dbiasl, dbias);
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
} // namespace
