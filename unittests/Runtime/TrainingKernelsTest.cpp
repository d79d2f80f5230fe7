//===- TrainingKernelsTest.cpp - host training kernels vs references ------===//
//
// The training entry points on the host: cross-entropy and its gradient and
// the optimizer updates against double-precision references written here
// from PyTorch's formulas; the conv filter gradient and the pooling gradient
// against direct references and against central finite differences of the
// forward host kernels (L = sum(dy * forward(...)), so dL/dw and dL/dx are
// exactly what the backward kernels compute).
//
//===----------------------------------------------------------------------===//

#include "Philox.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <string>

using namespace memopt::rt;
using namespace memopt::rt::test;

namespace {

class TrainingKernels : public ::testing::Test {
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
  Buffer scalar(float value) {
    Buffer b(DType::F32, {});
    std::memcpy(b.storage.data(), &value, 4);
    return b;
  }
  Context *ctx = nullptr;
};

void expectClose(const Buffer &out, const std::vector<double> &expected,
                 double tol) {
  ASSERT_EQ(size_t(out.count()), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(out.at(int64_t(i)), expected[i],
                tol * std::max(1.0, std::fabs(expected[i])))
        << "element " << i;
}

void setFloats(Buffer &b, const std::vector<double> &values) {
  for (size_t i = 0; i < values.size(); ++i) {
    float f = float(values[i]);
    std::memcpy(b.storage.data() + i * 4, &f, 4);
  }
}

//===----------------------------------------------------------------------===//
// Softmax cross-entropy
//===----------------------------------------------------------------------===//

/// Loss and dlogits (for dloss) from the definition, in double.
void referenceCrossEntropy(const Buffer &logits, const std::vector<int64_t> &y,
                           int64_t ignoreIndex, double dloss, double &loss,
                           std::vector<double> &grad) {
  int64_t classes = logits.shape.back(), rows = logits.count() / classes;
  int64_t counted = 0;
  for (int64_t label : y)
    counted += label != ignoreIndex;
  loss = 0;
  grad.assign(size_t(logits.count()), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    if (y[size_t(r)] == ignoreIndex)
      continue;
    double total = 0;
    for (int64_t c = 0; c < classes; ++c)
      total += std::exp(logits.at(r * classes + c));
    loss += std::log(total) - logits.at(r * classes + y[size_t(r)]);
    for (int64_t c = 0; c < classes; ++c)
      grad[size_t(r * classes + c)] =
          dloss *
          (std::exp(logits.at(r * classes + c)) / total -
           (c == y[size_t(r)] ? 1.0 : 0.0)) /
          double(counted);
  }
  loss = counted ? loss / double(counted) : 0.0;
}

TEST_F(TrainingKernels, CrossEntropyWithIgnoreIndexAllFloatTypes) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16})
    for (DType labelType : {DType::I64, DType::I32}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + dtypeName(labelType));
      // [2, 3, 7] logits: a language model's [B, S, vocab] view.
      Buffer logits = random(dtype, {2, 3, 7}, 1);
      std::vector<int64_t> y = {3, -100, 0, 6, 2, -100};
      Buffer labels(labelType, {2, 3});
      fillInts(labels, y);
      Buffer loss(DType::F32, {}), dloss = scalar(1.75f);
      Buffer dlogits(dtype, {2, 3, 7});
      softmaxCrossEntropy(*ctx, "ce", -100, logits.ref(), labels.ref(),
                          loss.ref());
      softmaxCrossEntropyGrad(*ctx, "ce_grad", -100, logits.ref(), labels.ref(),
                              dloss.ref(), dlogits.ref());
      double expectedLoss;
      std::vector<double> expectedGrad;
      referenceCrossEntropy(logits, y, -100, 1.75, expectedLoss, expectedGrad);
      EXPECT_NEAR(loss.at(0), expectedLoss, 1e-6 * expectedLoss);
      expectClose(dlogits, expectedGrad, tolerance(dtype));
      for (int64_t c = 0; c < 7; ++c)
        EXPECT_EQ(dlogits.at(7 + c), 0.0); // the ignored row
    }
}

TEST_F(TrainingKernels, CrossEntropyGradInPlace) {
  Buffer logits = random(DType::F32, {4, 5}, 2);
  Buffer copy = logits;
  Buffer labels(DType::I64, {4});
  fillInts(labels, {4, 0, 2, 2});
  Buffer dloss = scalar(1.0f);
  softmaxCrossEntropyGrad(*ctx, "ce_grad", -1, logits.ref(), labels.ref(),
                          dloss.ref(), logits.ref());
  double loss;
  std::vector<double> grad;
  referenceCrossEntropy(copy, {4, 0, 2, 2}, -1, 1.0, loss, grad);
  expectClose(logits, grad, 1e-6);
}

TEST_F(TrainingKernels, CrossEntropyFullyIgnoredBatchIsZero) {
  Buffer logits = random(DType::F32, {3, 4}, 3);
  Buffer labels(DType::I64, {3});
  fillInts(labels, {-100, -100, -100});
  Buffer loss = scalar(5.0f), dloss = scalar(1.0f);
  Buffer dlogits = random(DType::F32, {3, 4}, 4);
  softmaxCrossEntropy(*ctx, "ce", -100, logits.ref(), labels.ref(), loss.ref());
  softmaxCrossEntropyGrad(*ctx, "ce_grad", -100, logits.ref(), labels.ref(),
                          dloss.ref(), dlogits.ref());
  EXPECT_EQ(loss.at(0), 0.0);
  for (int64_t i = 0; i < 12; ++i)
    EXPECT_EQ(dlogits.at(i), 0.0);
}

/// The fused head + loss against its definition: logits = x w^T in double,
/// then the cross-entropy reference; dx = d w, dw = d^T x. x as a [B, S, K]
/// view, w [C, K], an ignored row, and both label types.
TEST_F(TrainingKernels, LinearCrossEntropyMatchesItsDefinition) {
  const int64_t rows = 6, features = 4, classes = 9;
  for (DType labelType : {DType::I64, DType::I32}) {
    Buffer x = random(DType::F32, {2, 3, features}, 5);
    Buffer w = random(DType::F32, {classes, features}, 6);
    std::vector<int64_t> y = {8, -100, 0, 4, 4, 1};
    Buffer labels(labelType, {2, 3});
    fillInts(labels, y);
    Buffer loss(DType::F32, {}), lse(DType::F32, {2, 3}), dloss = scalar(1.5f);
    Buffer dx(DType::F32, {2, 3, features}),
        dw(DType::F32, {classes, features});
    LinearCrossEntropyParams params;
    linearCrossEntropy(*ctx, "lce", params, x.ref(), w.ref(), labels.ref(),
                       loss.ref(), lse.ref(), nullptr, 0);
    linearCrossEntropyGrad(*ctx, "lce_grad", params, x.ref(), w.ref(),
                           labels.ref(), lse.ref(), dloss.ref(), dx.ref(),
                           dw.ref(), nullptr, 0);
    Buffer logits(DType::F32, {rows, classes});
    std::vector<double> values;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < classes; ++c) {
        double dot = 0;
        for (int64_t k = 0; k < features; ++k)
          dot += x.at(r * features + k) * w.at(c * features + k);
        values.push_back(dot);
      }
    setFloats(logits, values);
    double expectedLoss;
    std::vector<double> d;
    referenceCrossEntropy(logits, y, -100, 1.5, expectedLoss, d);
    EXPECT_NEAR(loss.at(0), expectedLoss, 1e-6 * expectedLoss);
    std::vector<double> expectedLse, expectedDx(size_t(rows * features), 0.0),
        expectedDw(size_t(classes * features), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      double total = 0;
      for (int64_t c = 0; c < classes; ++c)
        total += std::exp(values[size_t(r * classes + c)]);
      expectedLse.push_back(std::log(total));
      for (int64_t c = 0; c < classes; ++c)
        for (int64_t k = 0; k < features; ++k) {
          double g = d[size_t(r * classes + c)];
          expectedDx[size_t(r * features + k)] += g * w.at(c * features + k);
          expectedDw[size_t(c * features + k)] += g * x.at(r * features + k);
        }
    }
    expectClose(lse, expectedLse, 1e-6);
    expectClose(dx, expectedDx, 1e-5);
    expectClose(dw, expectedDw, 1e-5);
  }
}

TEST(TrainingKernelErrors, LinearCrossEntropyChecksItsOperands) {
  Context *ctx = createContext();
  Buffer x(DType::F32, {4, 3}), w(DType::F32, {5, 2}), labels(DType::I64, {4});
  fillInts(labels, {0, 1, 2, 3});
  Buffer loss(DType::F32, {}), lse(DType::F32, {4});
  linearCrossEntropy(*ctx, "head", LinearCrossEntropyParams(), x.ref(), w.ref(),
                     labels.ref(), loss.ref(), lse.ref(), nullptr, 0);
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx)).find("head"), std::string::npos);
  EXPECT_NE(std::string(contextError(*ctx)).find("[C, K]"), std::string::npos)
      << contextError(*ctx);
  destroyContext(ctx);
  ctx = createContext();
  Buffer w2(DType::F32, {5, 3});
  fillInts(labels, {0, 1, 7, 3});
  linearCrossEntropy(*ctx, "head", LinearCrossEntropyParams(), x.ref(),
                     w2.ref(), labels.ref(), loss.ref(), lse.ref(), nullptr, 0);
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx)).find("label 7 of row 2"),
            std::string::npos)
      << contextError(*ctx);
  destroyContext(ctx);
}

TEST(TrainingKernelErrors, CrossEntropyNamesTheNodeAndRow) {
  Context *ctx = createContext();
  Buffer logits(DType::F32, {3, 4}), loss(DType::F32, {});
  Buffer labels(DType::I64, {3});
  fillInts(labels, {1, 4, 0});
  softmaxCrossEntropy(*ctx, "/loss/ce", -100, logits.ref(), labels.ref(),
                      loss.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_EQ(std::string(contextError(*ctx)),
            "node '/loss/ce': label 4 of row 1 is outside [0, 4)");
  destroyContext(ctx);

  for (int which = 0; which < 3; ++which) {
    ctx = createContext();
    Buffer floatLabels(DType::F32, {3}), shortLabels(DType::I64, {2});
    Buffer wideLoss(DType::F32, {2});
    softmaxCrossEntropy(*ctx, "/loss/ce", -100, logits.ref(),
                        which == 0   ? floatLabels.ref()
                        : which == 1 ? shortLabels.ref()
                                     : labels.ref(),
                        which == 2 ? wideLoss.ref() : loss.ref());
    ASSERT_NE(contextError(*ctx), nullptr);
    std::string error = contextError(*ctx);
    EXPECT_EQ(error.rfind("node '/loss/ce': ", 0), 0u) << error;
    EXPECT_NE(error.find(which == 0   ? "labels have dtype f32"
                         : which == 1 ? "do not match the 3 rows"
                                      : "loss must be one f32 element"),
              std::string::npos)
        << error;
    destroyContext(ctx);
  }
}

//===----------------------------------------------------------------------===//
// Conv filter gradient
//===----------------------------------------------------------------------===//

struct ConvCase {
  const char *name;
  std::vector<int64_t> x, w;
  int spatial;
  int64_t group;
  int64_t strides[2], dilations[2], padsBegin[2], padsEnd[2];
};

/// y's shape for a conv case (ONNX's formula).
std::vector<int64_t> convOutputShape(const ConvCase &c) {
  std::vector<int64_t> y = {c.x[0], c.w[0]};
  for (int i = 0; i < c.spatial; ++i) {
    int64_t span = c.dilations[i] * (c.w[size_t(2 + i)] - 1) + 1;
    y.push_back((c.x[size_t(2 + i)] + c.padsBegin[i] + c.padsEnd[i] - span) /
                    c.strides[i] +
                1);
  }
  return y;
}

ConvParams convParams(const ConvCase &c) {
  ConvParams p;
  p.spatialRank = c.spatial;
  p.group = c.group;
  for (int i = 0; i < c.spatial; ++i) {
    p.strides[i] = c.strides[i];
    p.dilations[i] = c.dilations[i];
    p.padsBegin[i] = c.padsBegin[i];
    p.padsEnd[i] = c.padsEnd[i];
  }
  return p;
}

/// dw from the definition: every (image, output channel, output position,
/// filter tap) adds dy * x.
std::vector<double> referenceConvFilterGrad(const ConvCase &c, const Buffer &x,
                                            const Buffer &dy) {
  std::vector<int64_t> yShape = convOutputShape(c);
  // 1-D as 2-D with height 1.
  auto dim = [&](const std::vector<int64_t> &s, int i) {
    return c.spatial == 2 ? s[size_t(2 + i)] : (i == 0 ? 1 : s[2]);
  };
  auto param = [&](const int64_t *v, int i) {
    return c.spatial == 2
               ? v[i]
               : (i == 0 ? (v == c.strides || v == c.dilations ? 1 : 0) : v[0]);
  };
  int64_t n = c.x[0], cin = c.x[1], m = c.w[0], cg = cin / c.group,
          mg = m / c.group;
  int64_t h = dim(c.x, 0), wd = dim(c.x, 1), kh = dim(c.w, 0), kw = dim(c.w, 1),
          oh = dim(yShape, 0), ow = dim(yShape, 1);
  std::vector<double> dw(size_t(m * cg * kh * kw), 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double g = dy.at(((b * m + o) * oh + oy) * ow + ox);
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                int64_t iy = oy * param(c.strides, 0) - param(c.padsBegin, 0) +
                             ky * param(c.dilations, 0);
                int64_t ix = ox * param(c.strides, 1) - param(c.padsBegin, 1) +
                             kx * param(c.dilations, 1);
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd)
                  continue;
                int64_t channel = o / mg * cg + ci;
                dw[size_t(((o * cg + ci) * kh + ky) * kw + kx)] +=
                    g * x.at(((b * cin + channel) * h + iy) * wd + ix);
              }
        }
  return dw;
}

const ConvCase kConvCases[] = {
    {"plain_3x3",
     {2, 3, 6, 5},
     {4, 3, 3, 3},
     2,
     1,
     {1, 1},
     {1, 1},
     {1, 1},
     {1, 1}},
    {"stride2_asym_pads",
     {2, 4, 7, 6},
     {6, 4, 3, 2},
     2,
     1,
     {2, 1},
     {1, 1},
     {1, 2},
     {2, 0}},
    {"dilated_groups",
     {1, 4, 9, 8},
     {6, 2, 3, 3},
     2,
     2,
     {1, 2},
     {2, 1},
     {2, 1},
     {2, 1}},
    {"depthwise_s2",
     {2, 5, 7, 7},
     {5, 1, 3, 3},
     2,
     5,
     {2, 2},
     {1, 1},
     {1, 1},
     {1, 1}},
    {"conv1d_strided",
     {3, 4, 11},
     {6, 2, 3},
     1,
     2,
     {2, 1},
     {2, 1},
     {2, 0},
     {1, 0}},
    {"pointwise",
     {2, 6, 4, 3},
     {5, 6, 1, 1},
     2,
     1,
     {1, 1},
     {1, 1},
     {0, 0},
     {0, 0}},
};

TEST_F(TrainingKernels, ConvBackwardFilterMatchesDefinition) {
  unsigned seed = 10;
  for (const ConvCase &c : kConvCases)
    for (DType dtype : {DType::F32, DType::F16}) {
      SCOPED_TRACE(std::string(c.name) + " " + dtypeName(dtype));
      Buffer x = random(dtype, c.x, seed++);
      Buffer dy = random(dtype, convOutputShape(c), seed++);
      Buffer dw(dtype, c.w);
      std::vector<uint8_t> workspace(4096, 0);
      convBackwardFilter(*ctx, "conv_dw", convParams(c), x.ref(), dy.ref(),
                         dw.ref(), workspace.data(), workspace.size());
      expectClose(dw, referenceConvFilterGrad(c, x, dy),
                  dtype == DType::F32 ? 1e-5 : 4 * tolerance(dtype));
    }
}

TEST_F(TrainingKernels, ConvBackwardFilterMatchesFiniteDifferences) {
  unsigned seed = 40;
  for (const ConvCase &c : kConvCases) {
    SCOPED_TRACE(c.name);
    ConvParams p = convParams(c);
    Buffer x = random(DType::F32, c.x, seed++);
    Buffer w = random(DType::F32, c.w, seed++);
    Buffer dy = random(DType::F32, convOutputShape(c), seed++);
    Buffer y(DType::F32, convOutputShape(c)), dw(DType::F32, c.w);
    convBackwardFilter(*ctx, "conv_dw", p, x.ref(), dy.ref(), dw.ref(), nullptr,
                       0);
    // L(w) = sum(dy * conv(x, w)) is linear in w: a central difference with
    // a large, exactly representable step is exact up to rounding.
    auto lossAt = [&](const Buffer &weights) {
      Buffer copy = weights;
      conv(*ctx, "conv", p, x.ref(), copy.ref(), nullptr, y.ref(), nullptr, 0);
      double sum = 0;
      for (int64_t i = 0; i < y.count(); ++i)
        sum += dy.at(i) * y.at(i);
      return sum;
    };
    const float step = 0.25f;
    std::vector<double> numeric;
    for (int64_t i = 0; i < w.count(); ++i) {
      Buffer plus = w, minus = w;
      float v = float(w.at(i)), up = v + step, down = v - step;
      std::memcpy(plus.storage.data() + i * 4, &up, 4);
      std::memcpy(minus.storage.data() + i * 4, &down, 4);
      numeric.push_back((lossAt(plus) - lossAt(minus)) / double(up - down));
    }
    expectClose(dw, numeric, 1e-4);
  }
}

//===----------------------------------------------------------------------===//
// Pooling gradient
//===----------------------------------------------------------------------===//

struct PoolCase {
  const char *name;
  PoolKind kind;
  int spatial;
  std::vector<int64_t> x, y;
  int64_t kernel, stride, dilation, padBegin, padEnd;
  bool includePad, ceil;
};

PoolParams poolParams(const PoolCase &c) {
  PoolParams p;
  p.kind = c.kind;
  p.spatialRank = c.spatial;
  p.countIncludePad = c.includePad;
  p.ceilMode = c.ceil;
  for (int i = 0; i < c.spatial; ++i) {
    p.kernel[i] = c.kernel;
    p.strides[i] = c.stride;
    p.dilations[i] = c.dilation;
    p.padsBegin[i] = c.padBegin;
    p.padsEnd[i] = c.padEnd;
  }
  return p;
}

const PoolCase kPoolCases[] = {
    // 7x7, k3 s2 p1: 4 outputs per axis, overlapping windows.
    {"max_overlap",
     PoolKind::Max,
     2,
     {2, 2, 7, 7},
     {2, 2, 4, 4},
     3,
     2,
     1,
     1,
     1,
     false,
     false},
    {"max_ceil",
     PoolKind::Max,
     2,
     {1, 2, 6, 6},
     {1, 2, 4, 4},
     3,
     2,
     1,
     1,
     1,
     false,
     true},
    {"max_dilated",
     PoolKind::Max,
     2,
     {1, 2, 7, 7},
     {1, 2, 3, 3},
     2,
     2,
     2,
     0,
     0,
     false,
     false},
    {"avg_exclude_pad",
     PoolKind::Avg,
     2,
     {2, 2, 7, 7},
     {2, 2, 4, 4},
     3,
     2,
     1,
     1,
     1,
     false,
     false},
    {"avg_include_pad",
     PoolKind::Avg,
     2,
     {2, 2, 7, 7},
     {2, 2, 4, 4},
     3,
     2,
     1,
     1,
     1,
     true,
     false},
    // 6 + 2 - 3 = 5 -> ceil(5 / 2) + 1 = 4: the last window is clipped.
    {"avg_ceil_include_pad",
     PoolKind::Avg,
     2,
     {1, 2, 6, 6},
     {1, 2, 4, 4},
     3,
     2,
     1,
     1,
     1,
     true,
     true},
    {"avg_ceil",
     PoolKind::Avg,
     2,
     {1, 2, 6, 6},
     {1, 2, 4, 4},
     3,
     2,
     1,
     1,
     1,
     false,
     true},
    {"max_1d",
     PoolKind::Max,
     1,
     {2, 3, 10},
     {2, 3, 5},
     3,
     2,
     1,
     1,
     0,
     false,
     false},
    {"avg_1d_include_pad",
     PoolKind::Avg,
     1,
     {2, 3, 10},
     {2, 3, 5},
     3,
     2,
     1,
     1,
     0,
     true,
     false},
};

/// x with distinct values 0.05 apart in shuffled order, so that no window
/// has a tie and a small perturbation never moves a window's maximum.
Buffer distinctValues(const std::vector<int64_t> &shape, unsigned seed) {
  Buffer b(DType::F32, shape);
  std::vector<double> values(size_t(b.count()));
  std::iota(values.begin(), values.end(), 0.0);
  std::shuffle(values.begin(), values.end(), std::mt19937(seed));
  for (double &v : values)
    v = v * 0.05 - 3.0;
  setFloats(b, values);
  return b;
}

/// dx from the definition: each output's gradient goes to its window's first
/// maximum, or is shared over the window by the forward's divisor.
std::vector<double> referencePoolGrad(const PoolCase &c, const Buffer &x,
                                      const Buffer &dy) {
  int64_t planes = c.x[0] * c.x[1];
  int64_t h = c.spatial == 2 ? c.x[2] : 1, w = c.x.back();
  int64_t oh = c.spatial == 2 ? c.y[2] : 1, ow = c.y.back();
  int64_t kh = c.spatial == 2 ? c.kernel : 1;
  int64_t sh = c.spatial == 2 ? c.stride : 1,
          dh = c.spatial == 2 ? c.dilation : 1;
  int64_t ph = c.spatial == 2 ? c.padBegin : 0,
          peh = c.spatial == 2 ? c.padEnd : 0;
  std::vector<double> dx(size_t(x.count()), 0.0);
  for (int64_t plane = 0; plane < planes; ++plane)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        double g = dy.at((plane * oh + oy) * ow + ox);
        std::vector<int64_t> inside;
        int64_t padded = 0;
        for (int64_t ky = 0; ky < kh; ++ky)
          for (int64_t kx = 0; kx < c.kernel; ++kx) {
            int64_t iy = oy * sh - ph + ky * dh;
            int64_t ix = ox * c.stride - c.padBegin + kx * c.dilation;
            padded += iy >= -ph && iy < h + peh && ix >= -c.padBegin &&
                      ix < w + c.padEnd;
            if (iy >= 0 && iy < h && ix >= 0 && ix < w)
              inside.push_back((plane * h + iy) * w + ix);
          }
        if (c.kind == PoolKind::Max) {
          int64_t best = inside[0];
          for (int64_t at : inside)
            if (x.at(at) > x.at(best))
              best = at;
          dx[size_t(best)] += g;
        } else {
          double divisor =
              double(c.includePad ? padded : int64_t(inside.size()));
          for (int64_t at : inside)
            dx[size_t(at)] += g / divisor;
        }
      }
  return dx;
}

TEST_F(TrainingKernels, PoolGradMatchesDefinitionAndFiniteDifferences) {
  unsigned seed = 70;
  for (const PoolCase &c : kPoolCases) {
    SCOPED_TRACE(c.name);
    PoolParams p = poolParams(c);
    Buffer x = distinctValues(c.x, seed++);
    Buffer dy = random(DType::F32, c.y, seed++);
    Buffer dx(DType::F32, c.x), y(DType::F32, c.y);
    poolGrad(*ctx, "pool_grad", p, x.ref(), dy.ref(), dx.ref());
    std::vector<double> expected = referencePoolGrad(c, x, dy);
    expectClose(dx, expected, 1e-6);
    // Every output's gradient lands somewhere (max) or is spread whole
    // (avg without padding in the divisor).
    auto lossAt = [&](const Buffer &input) {
      Buffer copy = input;
      pool(*ctx, "pool", p, copy.ref(), y.ref());
      double sum = 0;
      for (int64_t i = 0; i < y.count(); ++i)
        sum += dy.at(i) * y.at(i);
      return sum;
    };
    const float step = 1.0f / 128;
    std::vector<double> numeric;
    for (int64_t i = 0; i < x.count(); ++i) {
      Buffer plus = x, minus = x;
      float v = float(x.at(i)), up = v + step, down = v - step;
      std::memcpy(plus.storage.data() + i * 4, &up, 4);
      std::memcpy(minus.storage.data() + i * 4, &down, 4);
      numeric.push_back((lossAt(plus) - lossAt(minus)) / double(up - down));
    }
    expectClose(dx, numeric, 1e-4);
  }
}

TEST_F(TrainingKernels, PoolGradLowPrecision) {
  const PoolCase &c = kPoolCases[0];
  for (DType dtype : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtypeName(dtype));
    Buffer x(dtype, c.x), dy = random(dtype, c.y, 90), dx(dtype, c.x);
    Buffer source = distinctValues(c.x, 91);
    cast(*ctx, "cast", source.ref(), x.ref());
    poolGrad(*ctx, "pool_grad", poolParams(c), x.ref(), dy.ref(), dx.ref());
    expectClose(dx, referencePoolGrad(c, x, dy), tolerance(dtype));
  }
}

TEST(TrainingKernelErrors, ConvAndPoolGradientsNameTheNode) {
  Context *ctx = createContext();
  Buffer x(DType::F32, {1, 2, 5, 5}), dy(DType::F32, {1, 3, 3, 3}),
      dw(DType::F32, {3, 2, 2, 2});
  convBackwardFilter(*ctx, "/conv/dW", ConvParams(), x.ref(), dy.ref(),
                     dw.ref(), nullptr, 0);
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_EQ(std::string(contextError(*ctx)).rfind("node '/conv/dW': ", 0), 0u)
      << contextError(*ctx);
  destroyContext(ctx);

  ctx = createContext();
  PoolParams p;
  p.kernel[0] = p.kernel[1] = p.strides[0] = p.strides[1] = 2;
  Buffer py(DType::F32, {1, 2, 2, 2}), pdx(DType::F32, {1, 2, 5, 4});
  poolGrad(*ctx, "/pool/dX", p, x.ref(), py.ref(), pdx.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_EQ(std::string(contextError(*ctx)),
            "node '/pool/dX': X/dX: shapes differ ([1, 2, 5, 5] vs [1, 2, 5, "
            "4])");
  destroyContext(ctx);
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

/// Per-step gradients for the optimizer tests.
std::vector<std::vector<double>> stepGradients(int64_t n) {
  std::vector<std::vector<double>> grads(3);
  std::mt19937 rng(123);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (auto &g : grads)
    for (int64_t i = 0; i < n; ++i)
      g.push_back(float(dist(rng)));
  return grads;
}

TEST_F(TrainingKernels, SgdMatchesPyTorchOverThreeSteps) {
  struct Case {
    float momentum, weightDecay;
  };
  for (Case c : {Case{0.9f, 0.01f}, Case{0.0f, 0.05f}, Case{0.5f, 0.0f}}) {
    SCOPED_TRACE("momentum " + std::to_string(c.momentum) + " wd " +
                 std::to_string(c.weightDecay));
    const int64_t n = 37;
    Buffer param = random(DType::F32, {n}, 100), grad(DType::F32, {n});
    Buffer buffer(DType::F32, {n}), lr = scalar(0.1f);
    std::vector<double> p = param.values(), b(size_t(n), 0.0);
    auto grads = stepGradients(n);
    for (int step = 0; step < 3; ++step) {
      setFloats(grad, grads[size_t(step)]);
      TensorRef bufferRef = buffer.ref();
      sgdUpdate(*ctx, "sgd", c.momentum, c.weightDecay, param.ref(), grad.ref(),
                c.momentum != 0 ? &bufferRef : nullptr, lr.ref());
      // torch.optim.SGD (dampening 0, nesterov False).
      for (int64_t i = 0; i < n; ++i) {
        double d =
            grads[size_t(step)][size_t(i)] + c.weightDecay * p[size_t(i)];
        if (c.momentum != 0) {
          b[size_t(i)] = step == 0 ? d : c.momentum * b[size_t(i)] + d;
          d = b[size_t(i)];
        }
        p[size_t(i)] -= 0.1 * d;
      }
    }
    expectClose(param, p, 1e-6);
    if (c.momentum != 0)
      expectClose(buffer, b, 1e-6);
  }
}

// The micro-step gate without an accumulator (a data-parallel collective
// accumulated and reduced the gradient): micro-steps 0 and 1 of 3 leave
// everything as it was, micro-step 2 updates with the gradient it is given.
TEST_F(TrainingKernels, SgdMicroStepGateAlone) {
  const int64_t n = 19;
  Buffer param = random(DType::F32, {n}, 102),
         grad = random(DType::F32, {n}, 7);
  Buffer buffer(DType::F32, {n}), lr = scalar(0.1f);
  std::vector<double> p = param.values(), g = grad.values();
  for (int micro : {0, 1, 2}) {
    Buffer microStep = scalar(float(micro));
    GradientAccumulation gate;
    gate.microStep = microStep.ref();
    gate.steps = 3;
    TensorRef bufferRef = buffer.ref();
    sgdUpdate(*ctx, "sgd", 0.9f, 0.01f, param.ref(), grad.ref(), &bufferRef,
              lr.ref(), &gate);
    if (micro < 2)
      expectClose(param, p, 0.0);
  }
  std::vector<double> expected(static_cast<size_t>(n)),
      momentum(static_cast<size_t>(n));
  for (size_t i = 0; i < size_t(n); ++i) {
    momentum[i] = g[i] + 0.01 * p[i];
    expected[i] = p[i] - 0.1 * momentum[i];
  }
  expectClose(param, expected, 1e-6);
  expectClose(buffer, momentum, 1e-6);
}

TEST_F(TrainingKernels, AdamwMatchesPyTorchOverThreeSteps) {
  const int64_t n = 41;
  const double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, wd = 0.01, rate = 1e-2;
  Buffer param = random(DType::F32, {n}, 101), grad(DType::F32, {n});
  Buffer m(DType::F32, {n}), v(DType::F32, {n}), lr = scalar(float(rate));
  std::vector<double> p = param.values(), em(size_t(n), 0.0),
                      ev(size_t(n), 0.0);
  auto grads = stepGradients(n);
  for (int step = 1; step <= 3; ++step) {
    setFloats(grad, grads[size_t(step - 1)]);
    Buffer stepScalar = scalar(float(step));
    adamwUpdate(*ctx, "adamw", float(beta1), float(beta2), float(eps),
                float(wd), param.ref(), grad.ref(), m.ref(), v.ref(), lr.ref(),
                stepScalar.ref());
    // torch.optim.AdamW (amsgrad False), single-tensor path.
    for (int64_t i = 0; i < n; ++i) {
      double g = grads[size_t(step - 1)][size_t(i)];
      p[size_t(i)] *= 1 - rate * wd;
      em[size_t(i)] = beta1 * em[size_t(i)] + (1 - beta1) * g;
      ev[size_t(i)] = beta2 * ev[size_t(i)] + (1 - beta2) * g * g;
      double bias1 = 1 - std::pow(beta1, step),
             bias2 = 1 - std::pow(beta2, step);
      double denom = std::sqrt(ev[size_t(i)]) / std::sqrt(bias2) + eps;
      p[size_t(i)] -= rate / bias1 * em[size_t(i)] / denom;
    }
  }
  expectClose(param, p, 1e-6);
  expectClose(m, em, 1e-6);
  expectClose(v, ev, 1e-6);
}

TEST_F(TrainingKernels, AccumulatedSgdUpdatesOnTheLastMicroStep) {
  // Two optimizer steps of 3 micro-batches each: the accumulator holds each
  // step's gradient sum (the first micro-batch overwrites the last step's),
  // and the parameter moves only on micro-steps 2 and 5 with that sum.
  const int64_t n = 29;
  Buffer param = random(DType::F32, {n}, 102), grad(DType::F32, {n});
  Buffer buffer(DType::F32, {n}), sum = random(DType::F32, {n}, 103);
  Buffer lr = scalar(0.1f);
  std::vector<double> p = param.values(), b(size_t(n), 0.0),
                      acc(size_t(n), 0.0);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (int micro = 0; micro < 6; ++micro) {
    std::vector<double> g;
    for (int64_t i = 0; i < n; ++i)
      g.push_back(float(dist(rng)));
    setFloats(grad, g);
    Buffer microStep = scalar(float(micro % 3));
    GradientAccumulation accumulation;
    accumulation.accumulator = sum.ref();
    accumulation.microStep = microStep.ref();
    accumulation.steps = 3;
    TensorRef bufferRef = buffer.ref();
    sgdUpdate(*ctx, "sgd", 0.9f, 0.0f, param.ref(), grad.ref(), &bufferRef,
              lr.ref(), &accumulation);
    ASSERT_EQ(contextError(*ctx), nullptr);
    for (int64_t i = 0; i < n; ++i)
      acc[size_t(i)] =
          float(micro % 3 == 0 ? g[size_t(i)] : acc[size_t(i)] + g[size_t(i)]);
    if (micro % 3 == 2)
      for (int64_t i = 0; i < n; ++i) {
        b[size_t(i)] =
            micro == 2 ? acc[size_t(i)] : 0.9 * b[size_t(i)] + acc[size_t(i)];
        p[size_t(i)] -= 0.1 * b[size_t(i)];
      }
    expectClose(param, p, 1e-6);
    expectClose(sum, acc, 1e-6);
  }
  expectClose(buffer, b, 1e-6);
}

TEST(TrainingKernelErrors, OptimizersNameTheNode) {
  Buffer param(DType::F32, {4}), grad(DType::F32, {4}), lr(DType::F32, {});
  Buffer step(DType::F32, {}), shortGrad(DType::F32, {3});
  Context *ctx = createContext();
  sgdUpdate(*ctx, "/opt/sgd", 0.9f, 0, param.ref(), grad.ref(), nullptr,
            lr.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_EQ(std::string(contextError(*ctx)),
            "node '/opt/sgd': SGD with momentum 0.9 needs a momentum buffer");
  destroyContext(ctx);

  ctx = createContext();
  Buffer m(DType::F32, {4}), v(DType::F32, {4});
  adamwUpdate(*ctx, "/opt/adamw", 0.9f, 0.999f, 1e-8f, 0, param.ref(),
              grad.ref(), m.ref(), v.ref(), lr.ref(), step.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_EQ(std::string(contextError(*ctx)),
            "node '/opt/adamw': AdamW step 0 is not a 1-based step number");
  destroyContext(ctx);

  ctx = createContext();
  sgdUpdate(*ctx, "/opt/sgd", 0, 0, param.ref(), shortGrad.ref(), nullptr,
            lr.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_EQ(std::string(contextError(*ctx)),
            "node '/opt/sgd': grad [3] does not match param [4]");
  destroyContext(ctx);

  // The micro-step is an index into the K micro-batches of a step.
  ctx = createContext();
  Buffer sum(DType::F32, {4}), microStep(DType::F32, {});
  float three = 3.0f;
  std::memcpy(microStep.storage.data(), &three, sizeof three);
  GradientAccumulation accumulation;
  accumulation.accumulator = sum.ref();
  accumulation.microStep = microStep.ref();
  accumulation.steps = 3;
  sgdUpdate(*ctx, "/opt/sgd", 0, 0, param.ref(), grad.ref(), nullptr, lr.ref(),
            &accumulation);
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_EQ(std::string(contextError(*ctx)),
            "node '/opt/sgd': micro_step 3 is not an integer in [0, 3)");
  destroyContext(ctx);
}

//===----------------------------------------------------------------------===//
// Dynamic loss scaling (f16 mixed-precision training)
//===----------------------------------------------------------------------===//

/// Sets element i of a float buffer of any dtype to `value` (inf and NaN
/// included), through the runtime's cast.
void setElement(Context &ctx, Buffer &b, int64_t i, double value) {
  Buffer one(DType::F64, {1});
  std::memcpy(one.storage.data(), &value, 8);
  Buffer cast1(b.dtype, {1});
  cast(ctx, "set", one.ref(), cast1.ref());
  size_t size = dtypeSize(b.dtype);
  std::memcpy(b.storage.data() + size_t(i) * size, cast1.storage.data(), size);
}

float scalarValue(const Buffer &b) { return float(b.at(0)); }

TEST_F(TrainingKernels, FoundInfOnNaNAndInfInEveryFloatType) {
  Buffer a = random(DType::F32, {33}, 1), h = random(DType::F16, {17}, 2),
         bf = random(DType::BF16, {9}, 3), found = scalar(7.0f);
  // The largest finite f16 is finite.
  setElement(*ctx, h, 4, 65504.0);
  auto check = [&] {
    TensorRef grads[3] = {a.ref(), h.ref(), bf.ref()};
    foundInf(*ctx, "found_inf", grads, 3, nullptr, 0, nullptr, found.ref());
    EXPECT_EQ(contextError(*ctx), nullptr);
    return scalarValue(found);
  };
  EXPECT_EQ(check(), 0.0f);
  const double inf = std::numeric_limits<double>::infinity();
  setElement(*ctx, h, 16, inf); // the last element of an f16 gradient
  EXPECT_EQ(check(), 1.0f);
  setElement(*ctx, h, 16, 1.0);
  setElement(*ctx, bf, 0, std::nan(""));
  EXPECT_EQ(check(), 1.0f);
  setElement(*ctx, bf, 0, 1.0);
  setElement(*ctx, a, 20, -inf);
  EXPECT_EQ(check(), 1.0f);
  setElement(*ctx, a, 20, 1.0);
  EXPECT_EQ(check(), 0.0f);

  // With accumulation the accumulators count after micro-step 0 only: at
  // micro-step 0 they hold the last step's (possibly overflowed) sum.
  Buffer sum = random(DType::F32, {33}, 4);
  setElement(*ctx, sum, 3, std::nan(""));
  for (float micro : {0.0f, 1.0f}) {
    Buffer microStep = scalar(micro);
    TensorRef grads[1] = {h.ref()};
    TensorRef sums[1] = {sum.ref()};
    TensorRef microRef = microStep.ref();
    foundInf(*ctx, "found_inf", grads, 1, sums, 1, &microRef, found.ref());
    EXPECT_EQ(scalarValue(found), micro == 0.0f ? 0.0f : 1.0f)
        << "micro-step " << micro;
  }
}

TEST_F(TrainingKernels, ScaledUpdatesUnscaleLowGradientsAndSkipOnOverflow) {
  // An f16 gradient scaled by 1024 (exact): SGD and AdamW take the same
  // step as with the unscaled f32 gradient; with found_inf set they write
  // nothing.
  const int64_t n = 23;
  Buffer grad32 = random(DType::F32, {n}, 5);
  Buffer grad16(DType::F16, {n});
  {
    Buffer scaled(DType::F32, {n});
    std::vector<double> values = grad32.values();
    for (double &v : values)
      v *= 1024.0;
    setFloats(scaled, values);
    cast(*ctx, "to_f16", scaled.ref(), grad16.ref());
    // The reference uses exactly the f16 gradient / 1024.
    std::vector<double> back = grad16.values();
    for (double &v : back)
      v /= 1024.0;
    setFloats(grad32, back);
  }
  Buffer lr = scalar(0.1f), scale = scalar(1024.0f), clean = scalar(0.0f),
         overflow = scalar(1.0f);
  Buffer state(DType::F32, {2});
  for (bool adamw : {false, true}) {
    SCOPED_TRACE(adamw ? "adamw" : "sgd");
    Buffer p1 = random(DType::F32, {n}, 6), p2 = p1;
    Buffer m1(DType::F32, {n}), m2(DType::F32, {n}), v1(DType::F32, {n}),
        v2(DType::F32, {n});
    Buffer step = scalar(1.0f);
    LossScaling scaling{scale.ref(), clean.ref(), state.ref()};
    TensorRef m1Ref = m1.ref(), m2Ref = m2.ref();
    if (adamw) {
      adamwUpdate(*ctx, "ref", 0.9f, 0.999f, 1e-8f, 0.01f, p1.ref(),
                  grad32.ref(), m1.ref(), v1.ref(), lr.ref(), step.ref());
      adamwUpdate(*ctx, "scaled", 0.9f, 0.999f, 1e-8f, 0.01f, p2.ref(),
                  grad16.ref(), m2.ref(), v2.ref(), lr.ref(), step.ref(),
                  nullptr, &scaling);
    } else {
      sgdUpdate(*ctx, "ref", 0.9f, 0.01f, p1.ref(), grad32.ref(), &m1Ref,
                lr.ref());
      sgdUpdate(*ctx, "scaled", 0.9f, 0.01f, p2.ref(), grad16.ref(), &m2Ref,
                lr.ref(), nullptr, &scaling);
    }
    EXPECT_EQ(p1.values(), p2.values());
    EXPECT_EQ(m1.values(), m2.values());
    // Overflow: parameters and state keep their values.
    std::vector<double> before = p2.values(), stateBefore = m2.values();
    scaling.foundInf = overflow.ref();
    if (adamw)
      adamwUpdate(*ctx, "skipped", 0.9f, 0.999f, 1e-8f, 0.01f, p2.ref(),
                  grad16.ref(), m2.ref(), v2.ref(), lr.ref(), step.ref(),
                  nullptr, &scaling);
    else
      sgdUpdate(*ctx, "skipped", 0.9f, 0.01f, p2.ref(), grad16.ref(), &m2Ref,
                lr.ref(), nullptr, &scaling);
    EXPECT_EQ(p2.values(), before);
    EXPECT_EQ(m2.values(), stateBefore);
  }
}

TEST_F(TrainingKernels, AdamwBiasCorrectionCountsOnlyStepsNotSkipped) {
  // Step 3 after one skipped step is AdamW's second step (PyTorch's fused
  // AdamW under a GradScaler takes skipped steps back from its count).
  const int64_t n = 11;
  Buffer grad = random(DType::F32, {n}, 7), lr = scalar(0.01f);
  Buffer scale = scalar(1.0f), clean = scalar(0.0f);
  Buffer state(DType::F32, {2});
  float counts[2] = {0.0f, 1.0f};
  std::memcpy(state.storage.data(), counts, sizeof counts);
  Buffer p1 = random(DType::F32, {n}, 8), p2 = p1;
  Buffer m1 = random(DType::F32, {n}, 9), m2 = m1;
  Buffer v1(DType::F32, {n}), v2(DType::F32, {n});
  for (int64_t i = 0; i < n; ++i)
    setElement(*ctx, v1, i, 0.5), setElement(*ctx, v2, i, 0.5);
  Buffer second = scalar(2.0f), third = scalar(3.0f);
  LossScaling scaling{scale.ref(), clean.ref(), state.ref()};
  adamwUpdate(*ctx, "plain", 0.9f, 0.999f, 1e-8f, 0.0f, p1.ref(), grad.ref(),
              m1.ref(), v1.ref(), lr.ref(), second.ref());
  adamwUpdate(*ctx, "after_skip", 0.9f, 0.999f, 1e-8f, 0.0f, p2.ref(),
              grad.ref(), m2.ref(), v2.ref(), lr.ref(), third.ref(), nullptr,
              &scaling);
  EXPECT_EQ(p1.values(), p2.values());
}

TEST_F(TrainingKernels, LossScaleBacksOffOnOverflowAndGrowsAfterTheInterval) {
  // GradScaler's defaults but an interval of 3: two clean steps leave the
  // scale, an overflow halves it and restarts the count (one skipped step),
  // three clean steps double it.
  Buffer scale = scalar(65536.0f), state(DType::F32, {2});
  Buffer clean = scalar(0.0f), overflow = scalar(1.0f);
  auto update = [&](Buffer &found) {
    updateLossScale(*ctx, "scale", 2.0f, 0.5f, 3, scale.ref(), state.ref(),
                    found.ref());
    ASSERT_EQ(contextError(*ctx), nullptr);
  };
  update(clean);
  update(clean);
  EXPECT_EQ(scalarValue(scale), 65536.0f);
  EXPECT_EQ(state.values(), (std::vector<double>{2, 0}));
  update(overflow);
  EXPECT_EQ(scalarValue(scale), 32768.0f);
  EXPECT_EQ(state.values(), (std::vector<double>{0, 1}));
  update(clean);
  update(clean);
  EXPECT_EQ(scalarValue(scale), 32768.0f);
  update(clean);
  EXPECT_EQ(scalarValue(scale), 65536.0f);
  EXPECT_EQ(state.values(), (std::vector<double>{0, 1}));
  // A scale that would grow to infinity stays.
  setElement(*ctx, scale, 0, 3.0e38);
  for (int k = 0; k < 3; ++k)
    update(clean);
  EXPECT_EQ(scalarValue(scale), 3.0e38f);

  // With accumulation the update acts on the last micro-step only.
  Buffer micro0 = scalar(0.0f), micro1 = scalar(1.0f);
  setElement(*ctx, scale, 0, 1024.0);
  for (Buffer *micro : {&micro0, &micro1}) {
    TensorRef microRef = micro->ref();
    updateLossScale(*ctx, "scale", 2.0f, 0.5f, 3, scale.ref(), state.ref(),
                    overflow.ref(), &microRef, 2);
  }
  EXPECT_EQ(scalarValue(scale), 512.0f);
  EXPECT_EQ(state.values(), (std::vector<double>{0, 2}));
}

TEST_F(TrainingKernels, InjectedOverflowSkipsTheStepAndHalvesTheScale) {
  // One f16 step as memopt-autodiff emits it: found_inf over the gradients,
  // the updates, the scale update. An inf in one gradient: no parameter
  // moves, the scale halves, one skipped step; the next clean step moves
  // every parameter with the unscaled gradients.
  Buffer w1 = random(DType::F32, {6}, 10), w2 = random(DType::F32, {4}, 11);
  Buffer g1 = random(DType::F16, {6}, 12), g2 = random(DType::F16, {4}, 13);
  Buffer lr = scalar(0.5f), scale = scalar(65536.0f), state(DType::F32, {2});
  Buffer found = scalar(0.0f);
  auto step = [&] {
    TensorRef grads[2] = {g1.ref(), g2.ref()};
    foundInf(*ctx, "found_inf", grads, 2, nullptr, 0, nullptr, found.ref());
    LossScaling scaling{scale.ref(), found.ref(), TensorRef()};
    sgdUpdate(*ctx, "w1", 0, 0, w1.ref(), g1.ref(), nullptr, lr.ref(), nullptr,
              &scaling);
    sgdUpdate(*ctx, "w2", 0, 0, w2.ref(), g2.ref(), nullptr, lr.ref(), nullptr,
              &scaling);
    updateLossScale(*ctx, "scale", 2.0f, 0.5f, 2000, scale.ref(), state.ref(),
                    found.ref());
    ASSERT_EQ(contextError(*ctx), nullptr);
  };
  std::vector<double> before1 = w1.values(), before2 = w2.values();
  setElement(*ctx, g2, 2, std::numeric_limits<double>::infinity());
  step();
  EXPECT_EQ(w1.values(), before1);
  EXPECT_EQ(w2.values(), before2);
  EXPECT_EQ(scalarValue(scale), 32768.0f);
  EXPECT_EQ(state.values(), (std::vector<double>{0, 1}));
  setElement(*ctx, g2, 2, 1.0);
  step();
  std::vector<double> after1 = w1.values();
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(float(after1[size_t(i)]),
                    float(before1[size_t(i)] - 0.5 * g1.at(i) / 32768.0));
  EXPECT_EQ(scalarValue(scale), 32768.0f);
  EXPECT_EQ(state.values(), (std::vector<double>{1, 1}));
}

TEST(TrainingKernelErrors, LossScalingChecksItsOperands) {
  Buffer param(DType::F32, {4}), grad(DType::F16, {4}), lr(DType::F32, {});
  Buffer scale(DType::F32, {}), found(DType::F32, {}),
      shortState(DType::F32, {1});
  Buffer step(DType::F32, {}), m(DType::F32, {4}), v(DType::F32, {4});
  Context *ctx = createContext();
  LossScaling scaling{scale.ref(), found.ref(), shortState.ref()};
  adamwUpdate(*ctx, "/opt/adamw", 0.9f, 0.999f, 1e-8f, 0, param.ref(),
              grad.ref(), m.ref(), v.ref(), lr.ref(), step.ref(), nullptr,
              &scaling);
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_EQ(std::string(contextError(*ctx)),
            "node '/opt/adamw': loss scale state must be two f32 elements, "
            "got f32 [1]");
  destroyContext(ctx);

  ctx = createContext();
  Buffer state(DType::F32, {2});
  updateLossScale(*ctx, "/opt/scale", 2.0f, 1.5f, 10, scale.ref(), state.ref(),
                  found.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_EQ(std::string(contextError(*ctx)),
            "node '/opt/scale': loss scale update needs growth >= 1, backoff "
            "in (0, 1] and an interval of at least 1, got 2, 1.5, 10");
  destroyContext(ctx);

  ctx = createContext();
  Buffer ints(DType::I64, {3});
  TensorRef grads[1] = {ints.ref()};
  foundInf(*ctx, "/opt/found_inf", grads, 1, nullptr, 0, nullptr, found.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_EQ(std::string(contextError(*ctx)),
            "node '/opt/found_inf': gradient 0 has dtype i64; expected a float "
            "type");
  destroyContext(ctx);
}

//===----------------------------------------------------------------------===//
// Training normalization with low-precision activations
//===----------------------------------------------------------------------===//

TEST_F(TrainingKernels, LowPrecisionNormalizationMatchesF32OnTheSameValues) {
  // x and dy exactly representable in the low type: the statistics and the
  // parameter gradients (f32) equal the f32 kernel's, the activations are
  // its results rounded once.
  for (DType low : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtypeName(low));
    Buffer xLow = random(low, {3, 4, 5, 5}, 20),
           dyLow = random(low, {3, 4, 5, 5}, 21);
    Buffer x(DType::F32, {3, 4, 5, 5}), dy(DType::F32, {3, 4, 5, 5});
    cast(*ctx, "x", xLow.ref(), x.ref());
    cast(*ctx, "dy", dyLow.ref(), dy.ref());
    Buffer scale = random(DType::F32, {4}, 22),
           bias = random(DType::F32, {4}, 23);
    Buffer y(DType::F32, {3, 4, 5, 5}), yLow(low, {3, 4, 5, 5});
    Buffer mean(DType::F32, {4}), inv(DType::F32, {4}),
        meanLow(DType::F32, {4}), invLow(DType::F32, {4});
    batchNormTraining(*ctx, "bn", 1e-5f, Activation::Relu, x.ref(), scale.ref(),
                      bias.ref(), y.ref(), mean.ref(), inv.ref());
    batchNormTraining(*ctx, "bn_low", 1e-5f, Activation::Relu, xLow.ref(),
                      scale.ref(), bias.ref(), yLow.ref(), meanLow.ref(),
                      invLow.ref());
    EXPECT_EQ(mean.values(), meanLow.values());
    EXPECT_EQ(inv.values(), invLow.values());
    double u = low == DType::F16 ? 1.0 / 2048 : 1.0 / 256;
    expectClose(yLow, y.values(), u);
    Buffer dx(DType::F32, {3, 4, 5, 5}), dxLow(low, {3, 4, 5, 5});
    Buffer ds(DType::F32, {4}), db(DType::F32, {4}), dsLow(DType::F32, {4}),
        dbLow(DType::F32, {4});
    batchNormTrainingGrad(*ctx, "bn_grad", x.ref(), dy.ref(), scale.ref(),
                          mean.ref(), inv.ref(), dx.ref(), ds.ref(), db.ref());
    batchNormTrainingGrad(*ctx, "bn_grad_low", xLow.ref(), dyLow.ref(),
                          scale.ref(), mean.ref(), inv.ref(), dxLow.ref(),
                          dsLow.ref(), dbLow.ref());
    EXPECT_EQ(ds.values(), dsLow.values());
    EXPECT_EQ(db.values(), dbLow.values());
    expectClose(dxLow, dx.values(), u);

    Buffer lx = random(low, {6, 8}, 24), ldy = random(low, {6, 8}, 25);
    Buffer lx32(DType::F32, {6, 8}), ldy32(DType::F32, {6, 8});
    cast(*ctx, "lx", lx.ref(), lx32.ref());
    cast(*ctx, "ldy", ldy.ref(), ldy32.ref());
    Buffer gamma = random(DType::F32, {8}, 26);
    Buffer ldx(low, {6, 8}), ldx32(DType::F32, {6, 8});
    Buffer lds(DType::F32, {8}), ldb(DType::F32, {8}), lds32(DType::F32, {8}),
        ldb32(DType::F32, {8});
    Buffer ws(DType::F32, {4096});
    layerNormGrad(*ctx, "ln_grad", 1e-5f, lx32.ref(), ldy32.ref(), gamma.ref(),
                  ldx32.ref(), lds32.ref(), ldb32.ref(), ws.storage.data(),
                  4096 * 4);
    layerNormGrad(*ctx, "ln_grad_low", 1e-5f, lx.ref(), ldy.ref(), gamma.ref(),
                  ldx.ref(), lds.ref(), ldb.ref(), ws.storage.data(), 4096 * 4);
    EXPECT_EQ(lds32.values(), lds.values());
    EXPECT_EQ(ldb32.values(), ldb.values());
    expectClose(ldx, ldx32.values(), u);
  }
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

TEST(Philox, MatchesRandom123KnownAnswers) {
  // Random123's kat_vectors for philox4x32_10: counter, key, output.
  struct Vector {
    Philox4x32 counter;
    uint32_t key0, key1;
    Philox4x32 expected;
  };
  for (const Vector &v :
       {Vector{{{0, 0, 0, 0}},
               0,
               0,
               {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
        Vector{{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
               0xffffffff,
               0xffffffff,
               {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
        Vector{{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
               0xa4093822,
               0x299f31d0,
               {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}}}) {
    Philox4x32 out = philox4x32_10(v.counter, v.key0, v.key1);
    for (int k = 0; k < 4; ++k)
      EXPECT_EQ(out.word[k], v.expected.word[k]) << "word " << k;
  }
}

/// The kept/dropped pattern of `dropout` over n ones.
std::vector<bool> dropoutMask(Context &ctx, int64_t n, float ratio,
                              uint32_t stream, int64_t seed, int64_t batch) {
  Buffer x(DType::F32, {n}), y(DType::F32, {n}), key(DType::I64, {2});
  std::vector<double> ones(size_t(n), 1.0);
  setFloats(x, ones);
  int64_t words[2] = {seed, batch};
  std::memcpy(key.storage.data(), words, sizeof words);
  dropout(ctx, "dropout", ratio, stream, x.ref(), key.ref(), y.ref());
  std::vector<bool> kept;
  float scale = 1.0f / (1.0f - ratio);
  for (double value : y.values()) {
    EXPECT_TRUE(value == 0.0 || value == double(scale)) << value;
    kept.push_back(value != 0.0);
  }
  return kept;
}

TEST_F(TrainingKernels, DropoutMaskStatistics) {
  // 2^20 elements: the dropped fraction is the ratio within 5 standard
  // deviations, neighbours are uncorrelated, and the mask is a function of
  // (seed, micro-batch, stream) only: the same triple repeats it, changing
  // any one gives an independent mask (agreement p^2 + (1 - p)^2).
  const int64_t n = int64_t(1) << 20;
  for (float ratio : {0.1f, 0.5f, 0.9f}) {
    SCOPED_TRACE("ratio " + std::to_string(ratio));
    std::vector<bool> mask = dropoutMask(*ctx, n, ratio, 1, 42, 1);
    double dropped = double(std::count(mask.begin(), mask.end(), false)) / n;
    double sigma = std::sqrt(ratio * (1 - ratio) / n);
    EXPECT_NEAR(dropped, ratio, 5 * sigma);
    // Neighbours (inside and across the groups of four one Philox call
    // gives) are independent: P(both dropped) = ratio^2.
    for (int64_t lag : {1, 4}) {
      int64_t both = 0;
      for (int64_t i = 0; i + lag < n; ++i)
        both += !mask[size_t(i)] && !mask[size_t(i + lag)];
      EXPECT_NEAR(double(both) / double(n - lag), ratio * ratio,
                  5 * std::sqrt(ratio * ratio / n));
    }
    EXPECT_EQ(mask, dropoutMask(*ctx, n, ratio, 1, 42, 1));
    double agree = ratio * ratio + (1 - ratio) * (1 - ratio);
    for (std::vector<bool> other : {dropoutMask(*ctx, n, ratio, 2, 42, 1),
                                    dropoutMask(*ctx, n, ratio, 1, 43, 1),
                                    dropoutMask(*ctx, n, ratio, 1, 42, 2)}) {
      int64_t same = 0;
      for (int64_t i = 0; i < n; ++i)
        same += mask[size_t(i)] == other[size_t(i)];
      EXPECT_NEAR(double(same) / n, agree, 5 * std::sqrt(agree / n));
    }
  }
}

TEST(TrainingKernelErrors, DropoutChecksItsOperands) {
  Buffer x(DType::F32, {4}), y(DType::F32, {4}), key(DType::I64, {2});
  Buffer shortKey(DType::I64, {1});
  Context *ctx = createContext();
  dropout(*ctx, "/drop", 1.0f, 1, x.ref(), key.ref(), y.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_EQ(std::string(contextError(*ctx)),
            "node '/drop': dropout ratio 1 is not in [0, 1)");
  destroyContext(ctx);
  ctx = createContext();
  dropout(*ctx, "/drop", 0.5f, 1, x.ref(), shortKey.ref(), y.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_EQ(std::string(contextError(*ctx)),
            "node '/drop': dropout key must be i64 [seed, micro-batch], got "
            "i64 [1]");
  destroyContext(ctx);
}

//===----------------------------------------------------------------------===//
// Threads
//===----------------------------------------------------------------------===//

TEST(TrainingKernelThreads, BitIdenticalAcrossThreadCounts) {
  // Large enough to be split: 16 x 8 filter slices of 9 taps over 2 x 24 x 24
  // positions; 4 x 32 pooling planes; 300 rows of 500 classes.
  ConvParams convP;
  convP.padsBegin[0] = convP.padsEnd[0] = convP.padsBegin[1] =
      convP.padsEnd[1] = 1;
  PoolParams poolP;
  poolP.kernel[0] = poolP.kernel[1] = 3;
  poolP.strides[0] = poolP.strides[1] = 2;
  poolP.padsBegin[0] = poolP.padsBegin[1] = 1;
  std::vector<std::vector<uint8_t>> results[2];
  for (int run = 0; run < 2; ++run) {
    const char *previous = std::getenv("MEMOPT_HOST_THREADS");
    std::string saved = previous ? previous : "";
    setenv("MEMOPT_HOST_THREADS", run ? "3" : "1", 1);
    Context *ctx = createContext();
    if (previous)
      setenv("MEMOPT_HOST_THREADS", saved.c_str(), 1);
    else
      unsetenv("MEMOPT_HOST_THREADS");
    Buffer x(DType::F32, {2, 8, 24, 24}), dy(DType::F32, {2, 16, 24, 24});
    Buffer dw(DType::F32, {16, 8, 3, 3});
    fillRandom(*ctx, x, 1);
    fillRandom(*ctx, dy, 2);
    convBackwardFilter(*ctx, "dw", convP, x.ref(), dy.ref(), dw.ref(), nullptr,
                       0);
    Buffer px(DType::F32, {4, 32, 48, 48}), pdy(DType::F32, {4, 32, 24, 24});
    Buffer pdx(DType::F32, {4, 32, 48, 48});
    fillRandom(*ctx, px, 3);
    fillRandom(*ctx, pdy, 5);
    poolGrad(*ctx, "pool", poolP, px.ref(), pdy.ref(), pdx.ref());
    Buffer logits(DType::F32, {300, 500}), labels(DType::I64, {300});
    fillRandom(*ctx, logits, 4);
    std::vector<int64_t> y;
    for (int64_t r = 0; r < 300; ++r)
      y.push_back(r % 7 == 3 ? -100 : (r * 37) % 500);
    fillInts(labels, y);
    Buffer loss(DType::F32, {}), dlogits(DType::F32, {300, 500});
    Buffer dloss(DType::F32, {});
    float one = 1;
    std::memcpy(dloss.storage.data(), &one, 4);
    softmaxCrossEntropy(*ctx, "ce", -100, logits.ref(), labels.ref(),
                        loss.ref());
    softmaxCrossEntropyGrad(*ctx, "ce_grad", -100, logits.ref(), labels.ref(),
                            dloss.ref(), dlogits.ref());
    EXPECT_EQ(contextError(*ctx), nullptr) << contextError(*ctx);
    destroyContext(ctx);
    results[run] = {dw.storage, pdx.storage, loss.storage, dlogits.storage};
  }
  for (size_t i = 0; i < results[0].size(); ++i)
    EXPECT_EQ(results[0][i], results[1][i]) << "result " << i;
}

} // namespace
