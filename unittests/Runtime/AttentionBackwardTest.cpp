//===- AttentionBackwardTest.cpp - host attention statistics and gradients ===//
//
// The host backend's attention row statistics (`lse`) and attentionBackward
// against an unfused reference in double that keeps the whole [S, Sk]
// probability matrix: scores rounded to f32 as the graph computes them,
// P = softmax, dV = P^T dO, dP = dO V^T, D = rowsum(P * dP) (not from O, so
// the kernel's dO . O is checked too), dS = P (dP - D), dQ = scale dS K,
// dK = scale dS^T Q, dbias = dS summed over the bias's broadcast axes.
//
//===----------------------------------------------------------------------===//

#include "HostKernelsTest.h"
#include "Internal.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

using namespace memopt::rt;
using namespace memopt::rt::test;

namespace {

class AttentionBackward : public ::testing::Test {
protected:
  void SetUp() override { ctx = createContext(); }
  void TearDown() override { destroyContext(ctx); }
  Buffer random(std::vector<int64_t> shape, unsigned seed) {
    Buffer b(DType::F32, shape);
    fillRandom(*ctx, b, seed);
    return b;
  }
  Context *ctx = nullptr;
};

struct Reference {
  std::vector<double> y, statistics, dq, dk, dv, dbias;
};

/// The unfused forward and backward in double (see the file comment).
Reference reference(const Buffer &q, const Buffer &k, const Buffer &v,
                    const Buffer *bias, const Buffer &dy,
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
  Reference r;
  r.y.assign(size_t(batch * queries * valueSize), 0.0);
  r.statistics.assign(size_t(batch * queries * 2), 0.0);
  r.dq.assign(size_t(batch * queries * headSize), 0.0);
  r.dk.assign(size_t(batch * keys * headSize), 0.0);
  r.dv.assign(size_t(batch * keys * valueSize), 0.0);
  if (bias)
    r.dbias.assign(size_t(bias->count()), 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<int64_t> co = coordsOf(b, batchShape);
    auto index = [&](const std::vector<int64_t> &shape, int64_t row,
                     int64_t column) {
      std::vector<int64_t> c = co;
      c.push_back(row);
      c.push_back(column);
      return broadcastIndex(shape, c);
    };
    auto qAt = [&](int64_t i, int64_t d) { return q.at(index(q.shape, i, d)); };
    auto kAt = [&](int64_t j, int64_t d) {
      return params.keyTransposed ? k.at(index(k.shape, d, j))
                                  : k.at(index(k.shape, j, d));
    };
    auto vAt = [&](int64_t j, int64_t e) { return v.at(index(v.shape, j, e)); };
    auto dyAt = [&](int64_t i, int64_t e) {
      return dy.at((b * queries + i) * valueSize + e);
    };
    for (int64_t i = 0; i < queries; ++i) {
      std::vector<double> p(static_cast<size_t>(keys)),
          dp(static_cast<size_t>(keys));
      double max = -INFINITY;
      for (int64_t j = 0; j < keys; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < headSize; ++d)
          dot += qAt(i, d) * kAt(j, d);
        // The graph computes the score in f32 (finfo.min + x == finfo.min).
        double score = float(params.scale * dot +
                             (bias ? bias->at(index(bias->shape, i, j)) : 0.0));
        p[size_t(j)] = params.causal && j > i ? -INFINITY : score;
        max = std::max(max, p[size_t(j)]);
      }
      double sum = 0;
      for (double &x : p)
        sum += (x = max == -INFINITY ? 0.0 : std::exp(x - max));
      double *stat = r.statistics.data() + 2 * (b * queries + i);
      stat[0] = max < kAttentionSaturation ? kAttentionLowestMax : max;
      stat[1] = max == -INFINITY ? -INFINITY : std::log(sum);
      if (max == -INFINITY)
        stat[0] = -INFINITY;
      for (double &x : p)
        x = sum == 0 ? 0.0 : x / sum; // fully masked: the safe softmax's 0
      for (int64_t e = 0; e < valueSize; ++e)
        for (int64_t j = 0; j < keys; ++j)
          r.y[size_t((b * queries + i) * valueSize + e)] +=
              p[size_t(j)] * vAt(j, e);
      double dot = 0;
      for (int64_t j = 0; j < keys; ++j) {
        for (int64_t e = 0; e < valueSize; ++e)
          dp[size_t(j)] += dyAt(i, e) * vAt(j, e);
        dot += p[size_t(j)] * dp[size_t(j)];
      }
      for (int64_t j = 0; j < keys; ++j) {
        double ds = p[size_t(j)] * (dp[size_t(j)] - dot);
        for (int64_t e = 0; e < valueSize; ++e)
          r.dv[size_t((b * keys + j) * valueSize + e)] +=
              p[size_t(j)] * dyAt(i, e);
        for (int64_t d = 0; d < headSize; ++d) {
          r.dq[size_t((b * queries + i) * headSize + d)] +=
              params.scale * ds * kAt(j, d);
          r.dk[size_t(params.keyTransposed ? (b * headSize + d) * keys + j
                                           : (b * keys + j) * headSize + d)] +=
              params.scale * ds * qAt(i, d);
        }
        if (bias)
          r.dbias[size_t(index(bias->shape, i, j))] += ds;
      }
    }
  }
  return r;
}

void expectClose(const Buffer &out, const std::vector<double> &expected,
                 double tol, const char *what) {
  ASSERT_EQ(size_t(out.count()), expected.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    double got = out.at(int64_t(i));
    if (std::isinf(expected[i])) {
      EXPECT_EQ(got, expected[i]) << what << " element " << i;
      continue;
    }
    EXPECT_NEAR(got, expected[i], tol * std::max(1.0, std::fabs(expected[i])))
        << what << " element " << i;
  }
}

std::vector<int64_t> gradientShape(const std::vector<int64_t> &y,
                                   const std::vector<int64_t> &operand) {
  std::vector<int64_t> shape(y.begin(), y.end() - 2);
  shape.push_back(operand[operand.size() - 2]);
  shape.push_back(operand.back());
  return shape;
}

/// Runs the forward with statistics and the backward, and compares every
/// output with the reference.
void check(Context &ctx, Buffer &q, Buffer &k, Buffer &v, Buffer *bias,
           Buffer &dy, const AttentionParams &params, bool biasGradient,
           double tol = 1e-5) {
  std::vector<int64_t> yShape = dy.shape;
  std::vector<int64_t> statShape(yShape.begin(), yShape.end() - 1);
  statShape.push_back(2);
  Buffer y(DType::F32, yShape), lse(DType::F32, statShape);
  TensorRef biasRef = bias ? bias->ref() : TensorRef(), lseRef = lse.ref();
  attention(ctx, "attention", params, q.ref(), k.ref(), v.ref(),
            bias ? &biasRef : nullptr, y.ref(), nullptr, 0, &lseRef);
  Buffer dq(DType::F32, gradientShape(yShape, q.shape)),
      dk(DType::F32, gradientShape(yShape, k.shape)),
      dv(DType::F32, gradientShape(yShape, v.shape));
  Buffer dbias(DType::F32, bias ? bias->shape : std::vector<int64_t>{1});
  TensorRef dbiasRef = dbias.ref();
  // A workspace: the host poisons it (NaN), which must not reach a result.
  Buffer workspace(DType::F32, {1024});
  attentionBackward(ctx, "attention_grad", params, q.ref(), k.ref(), v.ref(),
                    bias ? &biasRef : nullptr, y.ref(), dy.ref(), lse.ref(),
                    dq.ref(), dk.ref(), dv.ref(),
                    biasGradient ? &dbiasRef : nullptr, workspace.ref().data,
                    4096);
  ASSERT_EQ(contextError(ctx), nullptr) << contextError(ctx);
  Reference r = reference(q, k, v, bias, dy, params, yShape);
  expectClose(y, r.y, tol, "y");
  expectClose(lse, r.statistics, tol, "lse");
  expectClose(dq, r.dq, tol, "dq");
  expectClose(dk, r.dk, tol, "dk");
  expectClose(dv, r.dv, tol, "dv");
  if (biasGradient)
    expectClose(dbias, r.dbias, tol, "dbias");
}

TEST_F(AttentionBackward, BroadcastBatchAndTrainedBias) {
  // K is shared by the 3 heads, the bias by the 2 sequences and the rows;
  // 40 keys span two key blocks.
  Buffer q = random({2, 3, 5, 8}, 1), k = random({2, 1, 40, 8}, 2);
  Buffer v = random({2, 3, 40, 6}, 3), bias = random({3, 1, 40}, 4);
  Buffer dy = random({2, 3, 5, 6}, 5);
  AttentionParams params;
  params.scale = 0.35f;
  check(*ctx, q, k, v, &bias, dy, params, /*biasGradient=*/true);
}

TEST_F(AttentionBackward, CausalTransposedKeysManyRows) {
  // More queries than keys and than a row block (16); K stored [D, Sk].
  Buffer q = random({3, 37, 4}, 6), k = random({3, 4, 35}, 7);
  Buffer v = random({3, 35, 2}, 8), dy = random({3, 37, 2}, 9);
  AttentionParams params;
  params.scale = 0.5f;
  params.causal = true;
  params.keyTransposed = true;
  check(*ctx, q, k, v, nullptr, dy, params, false);
}

TEST_F(AttentionBackward, FullBiasGradient) {
  // A bias with every axis of the scores (no broadcast): dbias is dS.
  Buffer q = random({2, 9, 5}, 10), k = random({2, 11, 5}, 11);
  Buffer v = random({2, 11, 3}, 12), bias = random({2, 9, 11}, 13);
  Buffer dy = random({2, 9, 3}, 14);
  AttentionParams params;
  params.scale = 0.2f;
  params.causal = true;
  check(*ctx, q, k, v, &bias, dy, params, true);
}

TEST_F(AttentionBackward, SafeSoftmaxMaskedRowsGetZeroGradients) {
  // Causal with 3 left-padding keys (-inf) in the second sequence: its rows
  // 0..2 see no key; they give zeros and contribute nothing.
  Buffer q = random({2, 6, 4}, 15), k = random({2, 6, 4}, 16);
  Buffer v = random({2, 6, 4}, 17), dy = random({2, 6, 4}, 18);
  Buffer bias(DType::F32, {2, 1, 6});
  std::vector<float> mask(12, 0.0f);
  for (int j = 0; j < 3; ++j)
    mask[size_t(6 + j)] = -INFINITY;
  std::memcpy(bias.storage.data(), mask.data(), 12 * sizeof(float));
  AttentionParams params;
  params.scale = 0.5f;
  params.causal = true;
  params.safeSoftmax = true;
  check(*ctx, q, k, v, &bias, dy, params, false);
}

TEST_F(AttentionBackward, LowestFillRowsAreUniform) {
  // Rows masked by finfo.min (a finite fill) are uniform over their keys in
  // f32; the statistics keep them exact (a single log-sum-exp would round
  // log(count) away next to -3.4e38).
  Buffer q = random({1, 5, 4}, 19), k = random({1, 7, 4}, 20);
  Buffer v = random({1, 7, 3}, 21), dy = random({1, 5, 3}, 22);
  Buffer bias(DType::F32, {5, 7});
  std::vector<float> fill(35, 0.0f);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j)
      if (i < 2 || j > i + 1)
        fill[size_t(i * 7 + j)] = -3.4028234663852886e38f;
  std::memcpy(bias.storage.data(), fill.data(), 35 * sizeof(float));
  AttentionParams params;
  params.scale = 0.3f;
  params.safeSoftmax = true;
  check(*ctx, q, k, v, &bias, dy, params, false);
}

TEST_F(AttentionBackward, LowPrecisionMatchesF32OnTheSameValues) {
  // f16 / bf16 Q, K, V, O and dO (mixed-precision training) exactly
  // representable: the gradients are the f32 kernel's on the same values,
  // rounded once (the host computes both in double).
  AttentionParams params;
  params.scale = 0.4f;
  params.causal = true;
  for (DType low : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtypeName(low));
    std::vector<int64_t> qShape = {2, 3, 9, 8}, vShape = {2, 3, 9, 6};
    Buffer q = random(qShape, 30), k = random(qShape, 31),
           v = random(vShape, 32);
    Buffer dy = random(vShape, 33);
    Buffer ql(low, qShape), kl(low, qShape), vl(low, vShape), dyl(low, vShape);
    for (auto [from, to] : {std::pair<Buffer *, Buffer *>{&q, &ql},
                            {&k, &kl},
                            {&v, &vl},
                            {&dy, &dyl}}) {
      cast(*ctx, "to_low", from->ref(), to->ref());
      cast(*ctx, "back", to->ref(), from->ref()); // the f32 run sees the same
    }
    std::vector<int64_t> statShape = {2, 3, 9, 2};
    Buffer y(DType::F32, vShape), lse(DType::F32, statShape);
    Buffer yl(low, vShape), lsel(DType::F32, statShape);
    TensorRef lseRef = lse.ref(), lselRef = lsel.ref();
    attention(*ctx, "attention", params, q.ref(), k.ref(), v.ref(), nullptr,
              y.ref(), nullptr, 0, &lseRef);
    attention(*ctx, "attention_low", params, ql.ref(), kl.ref(), vl.ref(),
              nullptr, yl.ref(), nullptr, 0, &lselRef);
    cast(*ctx, "y_back", yl.ref(), y.ref()); // the backward reads the stored O
    Buffer dq(DType::F32, qShape), dk(DType::F32, qShape),
        dv(DType::F32, vShape);
    Buffer dql(low, qShape), dkl(low, qShape), dvl(low, vShape);
    attentionBackward(*ctx, "attention_grad", params, q.ref(), k.ref(), v.ref(),
                      nullptr, y.ref(), dy.ref(), lsel.ref(), dq.ref(),
                      dk.ref(), dv.ref(), nullptr);
    attentionBackward(*ctx, "attention_grad_low", params, ql.ref(), kl.ref(),
                      vl.ref(), nullptr, yl.ref(), dyl.ref(), lsel.ref(),
                      dql.ref(), dkl.ref(), dvl.ref(), nullptr);
    ASSERT_EQ(contextError(*ctx), nullptr) << contextError(*ctx);
    double u = low == DType::F16 ? 1.0 / 2048 : 1.0 / 256;
    expectClose(dql, dq.values(), u, "dq");
    expectClose(dkl, dk.values(), u, "dk");
    expectClose(dvl, dv.values(), u, "dv");
  }
}

/// Grouped-query K and V ([B, Hkv, 1, ...] against [B, Hkv, n, ...], the
/// fusion's view of repeat_kv): with groupedGradients, dK and dV come in K's
/// and V's own shapes, each the sum over its group of the per-query-head
/// gradients the ungrouped call gives (K as [Sk, D] and as [D, Sk], causal,
/// with a bias).
TEST_F(AttentionBackward, GroupedGradientsAreTheGroupSums) {
  for (bool keyTransposed : {false, true}) {
    const int64_t batch = 2, kvHeads = 2, group = 3, rows = 21, keys = 37,
                  d = 8, dvSize = 5;
    Buffer q = random({batch, kvHeads, group, rows, d}, 30);
    Buffer k =
        random(keyTransposed ? std::vector<int64_t>{batch, kvHeads, 1, d, keys}
                             : std::vector<int64_t>{batch, kvHeads, 1, keys, d},
               31);
    Buffer v = random({batch, kvHeads, 1, keys, dvSize}, 32);
    Buffer bias = random({batch, 1, 1, 1, keys}, 33);
    Buffer dy = random({batch, kvHeads, group, rows, dvSize}, 34);
    AttentionParams params;
    params.scale = 0.3f;
    params.causal = true;
    params.keyTransposed = keyTransposed;
    std::vector<int64_t> yShape = dy.shape;
    std::vector<int64_t> statShape(yShape.begin(), yShape.end() - 1);
    statShape.push_back(2);
    Buffer y(DType::F32, yShape), lse(DType::F32, statShape);
    TensorRef biasRef = bias.ref(), lseRef = lse.ref();
    attention(*ctx, "attention", params, q.ref(), k.ref(), v.ref(), &biasRef,
              y.ref(), nullptr, 0, &lseRef);
    Buffer dq(DType::F32, q.shape),
        dk(DType::F32, gradientShape(yShape, k.shape)),
        dv(DType::F32, gradientShape(yShape, v.shape));
    attentionBackward(*ctx, "attention_grad", params, q.ref(), k.ref(), v.ref(),
                      &biasRef, y.ref(), dy.ref(), lse.ref(), dq.ref(),
                      dk.ref(), dv.ref(), nullptr);
    params.groupedGradients = true;
    Buffer dqGrouped(DType::F32, q.shape), dkGrouped(DType::F32, k.shape),
        dvGrouped(DType::F32, v.shape);
    attentionBackward(*ctx, "attention_grad", params, q.ref(), k.ref(), v.ref(),
                      &biasRef, y.ref(), dy.ref(), lse.ref(), dqGrouped.ref(),
                      dkGrouped.ref(), dvGrouped.ref(), nullptr);
    ASSERT_EQ(contextError(*ctx), nullptr) << contextError(*ctx);
    auto groupSums = [&](const Buffer &perHead) {
      int64_t entry = perHead.count() / (batch * kvHeads * group);
      std::vector<double> sums(size_t(batch * kvHeads * entry), 0.0);
      for (int64_t i = 0; i < perHead.count(); ++i) {
        int64_t head = i / entry, within = i % entry;
        sums[size_t(head / group * entry + within)] += perHead.at(i);
      }
      return sums;
    };
    // Both round to f32 on store: the grouped sum once, the per-head
    // gradients each before the sum here.
    expectClose(dqGrouped, dq.values(), 0.0, "dq");
    expectClose(dkGrouped, groupSums(dk), 1e-6, "dk");
    expectClose(dvGrouped, groupSums(dv), 1e-6, "dv");
  }
}

TEST_F(AttentionBackward, RejectsGroupedGradientsOverALeadingAxis) {
  // K broadcast over the sequences (a leading axis), not a trailing group.
  Buffer q = random({2, 3, 4, 8}, 40), k = random({1, 3, 6, 8}, 41),
         v = random({1, 3, 6, 8}, 42), y = random({2, 3, 4, 8}, 43);
  Buffer lse(DType::F32, {2, 3, 4, 2}), dq(DType::F32, {2, 3, 4, 8}),
      dk(DType::F32, {1, 3, 6, 8}), dv(DType::F32, {1, 3, 6, 8});
  AttentionParams params;
  params.groupedGradients = true;
  attentionBackward(*ctx, "/attn/grad", params, q.ref(), k.ref(), v.ref(),
                    nullptr, y.ref(), y.ref(), lse.ref(), dq.ref(), dk.ref(),
                    dv.ref(), nullptr);
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx))
                .find("grouped attention gradients need K [1, 3, 6, 8]"),
            std::string::npos)
      << contextError(*ctx);
}

TEST_F(AttentionBackward, RejectsLowPrecisionBiasGradientsAndAliases) {
  AttentionParams params;
  Buffer q(DType::F16, {2, 4}), o(DType::F16, {2, 4}), lse(DType::F32, {2, 2}),
      g(DType::F16, {2, 4}), bias(DType::F16, {2, 2}),
      dbias(DType::F16, {2, 2});
  TensorRef biasRef = bias.ref(), dbiasRef = dbias.ref();
  attentionBackward(*ctx, "/attn/grad", params, q.ref(), q.ref(), q.ref(),
                    &biasRef, o.ref(), o.ref(), lse.ref(), g.ref(), g.ref(),
                    g.ref(), &dbiasRef);
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx))
                .find("attention bias gradients are f32 only"),
            std::string::npos)
      << contextError(*ctx);
  destroyContext(ctx);
  ctx = createContext();
  Buffer x = random({2, 4}, 23), y = random({2, 4}, 24),
         stats(DType::F32, {2, 2}), dq(DType::F32, {2, 4}),
         dk(DType::F32, {2, 4});
  attentionBackward(*ctx, "/attn/grad", params, x.ref(), x.ref(), x.ref(),
                    nullptr, y.ref(), y.ref(), stats.ref(), dq.ref(), dk.ref(),
                    dk.ref(), nullptr);
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx)).find("must not alias"),
            std::string::npos)
      << contextError(*ctx);
}

} // namespace
