//===- AttentionDropoutTest.cpp - dropout inside the host's attention -----===//
//
// The host backend's attention with a dropout of the probabilities
// (AttentionParams::dropoutRatio, issue 26) against the unfused graph run on
// the same runtime: the scores and their softmax in double, the runtime's
// dropout() on the probabilities (the mask the fused op must draw: the
// row-major [y's batch dims..., S, Sk] index, the same key and stream), and
// the products in double. The backward against the unfused graph's
// gradients with the same mask M (s = 1 / (1 - ratio)): dV = (s M P)^T dO,
// dP = s M (dO V^T), D = rowsum(P * dP), dS = P (dP - D), dQ = scale dS K,
// dK = scale dS^T Q, dbias = dS summed over the bias's broadcast axes; and
// one gradient against central finite differences of the fused forward.
//
//===----------------------------------------------------------------------===//

#include "HostKernelsTest.h"
#include "Internal.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

using namespace memopt::rt;
using namespace memopt::rt::test;

namespace {

class AttentionDropout : public ::testing::Test {
protected:
  void SetUp() override {
    ctx = createContext();
    int64_t words[2] = {1234567, 3};
    std::memcpy(key.storage.data(), words, sizeof words);
  }
  void TearDown() override { destroyContext(ctx); }
  Buffer random(std::vector<int64_t> shape, unsigned seed) {
    Buffer b(DType::F32, shape);
    fillRandom(*ctx, b, seed);
    return b;
  }
  AttentionParams dropoutParams(float ratio, uint32_t stream) {
    AttentionParams params;
    params.dropoutRatio = ratio;
    params.dropoutStream = stream;
    params.dropoutKey = reinterpret_cast<const int64_t *>(key.storage.data());
    return params;
  }
  Context *ctx = nullptr;
  Buffer key{DType::I64, {2}};
};

/// f32 values into an f32 buffer.
void storeFloats(Buffer &b, const std::vector<double> &values) {
  for (size_t i = 0; i < values.size(); ++i) {
    float f = float(values[i]);
    std::memcpy(b.storage.data() + i * 4, &f, 4);
  }
}

struct Unfused {
  std::vector<double> y, dq, dk, dv, dbias;
};

/// The unfused graph: P = softmax(scale Q K^T + bias) in double, stored as
/// the f32 probabilities tensor, the runtime's dropout() of it, then the
/// products and the gradients in double (see the file comment).
Unfused unfused(Context &ctx, const Buffer &q, const Buffer &k, const Buffer &v,
                const Buffer *bias, const Buffer &dy,
                const AttentionParams &params, Buffer &key) {
  const std::vector<int64_t> &yShape = dy.shape;
  size_t rank = yShape.size();
  int64_t queries = yShape[rank - 2], valueSize = yShape[rank - 1];
  int64_t headSize = q.shape.back();
  int64_t keys =
      params.keyTransposed ? k.shape.back() : k.shape[k.shape.size() - 2];
  std::vector<int64_t> batchShape(yShape.begin(), yShape.end() - 2);
  int64_t batch = 1;
  for (int64_t d : batchShape)
    batch *= d;
  std::vector<int64_t> probsShape = batchShape;
  probsShape.push_back(queries);
  probsShape.push_back(keys);
  Buffer probs(DType::F32, probsShape), dropped(DType::F32, probsShape),
      ones(DType::F32, probsShape), mask(DType::F32, probsShape);
  auto index = [](const std::vector<int64_t> &co,
                  const std::vector<int64_t> &shape, int64_t row,
                  int64_t column) {
    std::vector<int64_t> c = co;
    c.push_back(row);
    c.push_back(column);
    return broadcastIndex(shape, c);
  };
  std::vector<double> p(size_t(batch * queries * keys));
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<int64_t> co = coordsOf(b, batchShape);
    for (int64_t i = 0; i < queries; ++i) {
      double *row = p.data() + (b * queries + i) * keys;
      double max = -INFINITY;
      for (int64_t j = 0; j < keys; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < headSize; ++d)
          dot += q.at(index(co, q.shape, i, d)) *
                 (params.keyTransposed ? k.at(index(co, k.shape, d, j))
                                       : k.at(index(co, k.shape, j, d)));
        double score = params.scale * dot +
                       (bias ? bias->at(index(co, bias->shape, i, j)) : 0.0);
        row[j] = params.causal && j > i ? -INFINITY : score;
        max = std::max(max, row[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < keys; ++j)
        sum += (row[j] = std::exp(row[j] - max));
      for (int64_t j = 0; j < keys; ++j)
        row[j] /= sum;
    }
  }
  storeFloats(probs, p);
  dropout(ctx, "unfused_dropout", params.dropoutRatio, params.dropoutStream,
          probs.ref(), key.ref(), dropped.ref());
  // The mask itself (0 or s), for the backward: dropout() of ones.
  storeFloats(ones, std::vector<double>(size_t(ones.count()), 1.0));
  dropout(ctx, "unfused_mask", params.dropoutRatio, params.dropoutStream,
          ones.ref(), key.ref(), mask.ref());
  Unfused r;
  r.y.assign(size_t(batch * queries * valueSize), 0.0);
  r.dq.assign(size_t(batch * queries * headSize), 0.0);
  r.dk.assign(size_t(batch * keys * headSize), 0.0);
  r.dv.assign(size_t(batch * keys * valueSize), 0.0);
  if (bias)
    r.dbias.assign(size_t(bias->count()), 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<int64_t> co = coordsOf(b, batchShape);
    for (int64_t i = 0; i < queries; ++i) {
      int64_t rowBase = (b * queries + i) * keys;
      std::vector<double> dp(size_t(keys), 0.0);
      double dot = 0;
      for (int64_t j = 0; j < keys; ++j) {
        double pd = dropped.at(rowBase + j), m = mask.at(rowBase + j);
        for (int64_t e = 0; e < valueSize; ++e) {
          double vje = v.at(index(co, v.shape, j, e));
          double dye = dy.at((b * queries + i) * valueSize + e);
          r.y[size_t((b * queries + i) * valueSize + e)] += pd * vje;
          r.dv[size_t((b * keys + j) * valueSize + e)] += pd * dye;
          dp[size_t(j)] += dye * vje;
        }
        dp[size_t(j)] *= m;
        dot += p[size_t(rowBase + j)] * dp[size_t(j)];
      }
      for (int64_t j = 0; j < keys; ++j) {
        double ds = p[size_t(rowBase + j)] * (dp[size_t(j)] - dot);
        for (int64_t d = 0; d < headSize; ++d) {
          double kjd = params.keyTransposed ? k.at(index(co, k.shape, d, j))
                                            : k.at(index(co, k.shape, j, d));
          r.dq[size_t((b * queries + i) * headSize + d)] +=
              params.scale * ds * kjd;
          r.dk[size_t(params.keyTransposed ? (b * headSize + d) * keys + j
                                           : (b * keys + j) * headSize + d)] +=
              params.scale * ds * q.at(index(co, q.shape, i, d));
        }
        if (bias)
          r.dbias[size_t(index(co, bias->shape, i, j))] += ds;
      }
    }
  }
  return r;
}

void expectClose(const Buffer &out, const std::vector<double> &expected,
                 double tol, const char *what) {
  ASSERT_EQ(size_t(out.count()), expected.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(out.at(int64_t(i)), expected[i],
                tol * std::max(1.0, std::fabs(expected[i])))
        << what << " element " << i;
}

std::vector<int64_t> gradientShape(const std::vector<int64_t> &y,
                                   const std::vector<int64_t> &operand) {
  std::vector<int64_t> shape(y.begin(), y.end() - 2);
  shape.push_back(operand[operand.size() - 2]);
  shape.push_back(operand.back());
  return shape;
}

struct Fused {
  Buffer y, lse, dq, dk, dv, dbias;
};

Fused runFused(Context &ctx, Buffer &q, Buffer &k, Buffer &v, Buffer *bias,
               Buffer &dy, const AttentionParams &params, bool biasGradient) {
  std::vector<int64_t> yShape = dy.shape;
  std::vector<int64_t> statShape(yShape.begin(), yShape.end() - 1);
  statShape.push_back(2);
  Fused f{Buffer(DType::F32, yShape),
          Buffer(DType::F32, statShape),
          Buffer(DType::F32, gradientShape(yShape, q.shape)),
          Buffer(DType::F32, gradientShape(yShape, k.shape)),
          Buffer(DType::F32, gradientShape(yShape, v.shape)),
          Buffer(DType::F32, bias ? bias->shape : std::vector<int64_t>{1})};
  TensorRef biasRef = bias ? bias->ref() : TensorRef(), lseRef = f.lse.ref();
  TensorRef dbiasRef = f.dbias.ref();
  attention(ctx, "attention", params, q.ref(), k.ref(), v.ref(),
            bias ? &biasRef : nullptr, f.y.ref(), nullptr, 0, &lseRef);
  attentionBackward(ctx, "attention_grad", params, q.ref(), k.ref(), v.ref(),
                    bias ? &biasRef : nullptr, f.y.ref(), dy.ref(), f.lse.ref(),
                    f.dq.ref(), f.dk.ref(), f.dv.ref(),
                    biasGradient ? &dbiasRef : nullptr, nullptr, 0);
  return f;
}

void check(Context &ctx, Buffer &q, Buffer &k, Buffer &v, Buffer *bias,
           Buffer &dy, const AttentionParams &params, Buffer &key,
           bool biasGradient, double tol = 2e-5) {
  Fused f = runFused(ctx, q, k, v, bias, dy, params, biasGradient);
  ASSERT_EQ(contextError(ctx), nullptr) << contextError(ctx);
  Unfused r = unfused(ctx, q, k, v, bias, dy, params, key);
  ASSERT_EQ(contextError(ctx), nullptr) << contextError(ctx);
  expectClose(f.y, r.y, tol, "y");
  expectClose(f.dq, r.dq, tol, "dq");
  expectClose(f.dk, r.dk, tol, "dk");
  expectClose(f.dv, r.dv, tol, "dv");
  if (biasGradient)
    expectClose(f.dbias, r.dbias, tol, "dbias");
}

TEST_F(AttentionDropout, EqualsSoftmaxDropoutMatmul) {
  // K shared by the 3 heads (the mask follows y's broadcast batch), 40 keys
  // over two key blocks, a trained bias broadcast over the sequences.
  Buffer q = random({2, 3, 5, 8}, 1), k = random({2, 1, 40, 8}, 2);
  Buffer v = random({2, 3, 40, 6}, 3), bias = random({3, 1, 40}, 4);
  Buffer dy = random({2, 3, 5, 6}, 5);
  AttentionParams params = dropoutParams(0.3f, 7);
  params.scale = 0.35f;
  check(*ctx, q, k, v, &bias, dy, params, key, /*biasGradient=*/true);
}

TEST_F(AttentionDropout, CausalTransposedKeysManyRows) {
  // More queries than a row block; K stored [D, Sk]; a high ratio.
  Buffer q = random({3, 37, 4}, 6), k = random({3, 4, 35}, 7);
  Buffer v = random({3, 35, 2}, 8), dy = random({3, 37, 2}, 9);
  AttentionParams params = dropoutParams(0.6f, 2);
  params.scale = 0.5f;
  params.causal = true;
  params.keyTransposed = true;
  check(*ctx, q, k, v, nullptr, dy, params, key, false);
}

TEST_F(AttentionDropout, GroupedGradients) {
  // Grouped-query K / V (two query heads per K / V head): dK and dV summed
  // over each group in their own shapes, the mask per query head.
  Buffer q = random({2, 2, 2, 6, 8}, 10), k = random({2, 2, 1, 9, 8}, 11);
  Buffer v = random({2, 2, 1, 9, 4}, 12), dy = random({2, 2, 2, 6, 4}, 13);
  AttentionParams params = dropoutParams(0.2f, 5);
  params.scale = 0.3f;
  Fused f = runFused(*ctx, q, k, v, nullptr, dy, params, false);
  params.groupedGradients = true;
  Buffer dk(DType::F32, k.shape), dv(DType::F32, v.shape),
      dq(DType::F32, q.shape);
  attentionBackward(*ctx, "grouped", params, q.ref(), k.ref(), v.ref(), nullptr,
                    f.y.ref(), dy.ref(), f.lse.ref(), dq.ref(), dk.ref(),
                    dv.ref(), nullptr, nullptr, 0);
  ASSERT_EQ(contextError(*ctx), nullptr) << contextError(*ctx);
  params.groupedGradients = false;
  Unfused r = unfused(*ctx, q, k, v, nullptr, dy, params, key);
  expectClose(f.y, r.y, 2e-5, "y");
  expectClose(dq, r.dq, 2e-5, "dq");
  // The reference's per-query-head dK / dV summed over the group (axis 2).
  std::vector<double> dkSum(size_t(k.count()), 0.0),
      dvSum(size_t(v.count()), 0.0);
  for (size_t i = 0; i < r.dk.size(); ++i) {
    size_t perHead = 9 * 8, entry = i / perHead, head = entry / 2;
    dkSum[head * perHead + i % perHead] += r.dk[i];
  }
  for (size_t i = 0; i < r.dv.size(); ++i) {
    size_t perHead = 9 * 4, entry = i / perHead, head = entry / 2;
    dvSum[head * perHead + i % perHead] += r.dv[i];
  }
  expectClose(dk, dkSum, 2e-5, "dk");
  expectClose(dv, dvSum, 2e-5, "dv");
}

TEST_F(AttentionDropout, MaskDependsOnKeyAndStream) {
  // Another stream or micro-batch draws another mask; the same ones repeat
  // it; ratio 0 is the attention without dropout.
  Buffer q = random({2, 7, 8}, 20), k = random({2, 9, 8}, 21);
  Buffer v = random({2, 9, 5}, 22), dy = random({2, 7, 5}, 23);
  AttentionParams params = dropoutParams(0.5f, 1);
  params.scale = 0.4f;
  Fused a = runFused(*ctx, q, k, v, nullptr, dy, params, false);
  Fused again = runFused(*ctx, q, k, v, nullptr, dy, params, false);
  EXPECT_EQ(a.y.values(), again.y.values());
  EXPECT_EQ(a.dq.values(), again.dq.values());
  params.dropoutStream = 2;
  Fused other = runFused(*ctx, q, k, v, nullptr, dy, params, false);
  EXPECT_NE(a.y.values(), other.y.values());
  int64_t words[2] = {1234567, 4};
  std::memcpy(key.storage.data(), words, sizeof words);
  params.dropoutStream = 1;
  Fused nextBatch = runFused(*ctx, q, k, v, nullptr, dy, params, false);
  EXPECT_NE(a.y.values(), nextBatch.y.values());
  AttentionParams plain;
  plain.scale = 0.4f;
  params.dropoutRatio = 0.0f;
  Fused zero = runFused(*ctx, q, k, v, nullptr, dy, params, false);
  Fused none = runFused(*ctx, q, k, v, nullptr, dy, plain, false);
  EXPECT_EQ(zero.y.values(), none.y.values());
  EXPECT_EQ(zero.dk.values(), none.dk.values());
  ASSERT_EQ(contextError(*ctx), nullptr) << contextError(*ctx);
}

TEST_F(AttentionDropout, GradientMatchesFiniteDifferences) {
  // d(sum(dy * y))/dq by central differences of the fused forward (its
  // mask fixed by the key): the backward's dQ.
  Buffer q = random({1, 4, 6}, 30), k = random({1, 5, 6}, 31);
  Buffer v = random({1, 5, 3}, 32), dy = random({1, 4, 3}, 33);
  AttentionParams params = dropoutParams(0.4f, 9);
  params.scale = 0.45f;
  params.causal = true;
  Fused f = runFused(*ctx, q, k, v, nullptr, dy, params, false);
  ASSERT_EQ(contextError(*ctx), nullptr) << contextError(*ctx);
  auto objective = [&](Buffer &qq) {
    Buffer y(DType::F32, dy.shape);
    attention(*ctx, "fd", params, qq.ref(), k.ref(), v.ref(), nullptr, y.ref(),
              nullptr, 0, nullptr);
    double sum = 0;
    for (int64_t i = 0; i < y.count(); ++i)
      sum += y.at(i) * dy.at(i);
    return sum;
  };
  const double h = 1e-2;
  for (int64_t i = 0; i < q.count(); ++i) {
    std::vector<double> values = q.values();
    Buffer plus(DType::F32, q.shape), minus(DType::F32, q.shape);
    values[size_t(i)] += h;
    storeFloats(plus, values);
    values[size_t(i)] -= 2 * h;
    storeFloats(minus, values);
    double numeric = (objective(plus) - objective(minus)) / (2 * h);
    EXPECT_NEAR(f.dq.at(i), numeric, 2e-3 * std::max(1.0, std::fabs(numeric)))
        << "dq element " << i;
  }
}

TEST(AttentionDropoutErrors, ValidatesRatioAndKey) {
  Buffer q(DType::F32, {2, 4, 8}), y(DType::F32, {2, 4, 8});
  int64_t words[2] = {1, 0};
  for (auto [ratio, keyed, message] :
       {std::tuple<float, bool, const char *>{
            1.0f, true,
            "node '/attn': attention dropout ratio 1 is not in "
            "[0, 1)"},
        {-0.5f, true,
         "node '/attn': attention dropout ratio -0.5 is not in [0, 1)"},
        {0.1f, false,
         "node '/attn': attention dropout ratio 0.1 needs dropoutKey (the "
         "program's random_key)"}}) {
    Context *ctx = createContext();
    AttentionParams params;
    params.dropoutRatio = ratio;
    params.dropoutKey = keyed ? words : nullptr;
    attention(*ctx, "/attn", params, q.ref(), q.ref(), q.ref(), nullptr,
              y.ref(), nullptr, 0, nullptr);
    ASSERT_NE(contextError(*ctx), nullptr);
    EXPECT_EQ(std::string(contextError(*ctx)), message);
    destroyContext(ctx);
  }
}

} // namespace
