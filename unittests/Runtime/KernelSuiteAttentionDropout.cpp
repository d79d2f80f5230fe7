//===- KernelSuiteAttentionDropout.cpp - attention with dropout -----------===//
//
// The kernel suite's cases of attention with training dropout (issue 26):
//
//  * memopt's mask (AttentionParams::dropoutRatio without dropoutCudnnRng):
//    forward and backward on memopt's fused kernels and the chunked path
//    (chunk boundaries inside a batch dim too), f32 / f16 / bf16, causal,
//    bias, padding with the safe softmax, grouped-query heads, micro-batch
//    numbers other than 0; compared with the host backend's attention, which
//    draws the same Philox mask. A self-check beside them: fused attention
//    with dropout against the unfused graph (matmul, softmax, the dropout
//    op, matmul) on the same backend, whose mask is the same by definition.
//  * cuDNN's generator (dropoutCudnnRng, CUDA, f16 / bf16): the host cannot
//    draw cuDNN's mask, so the CUDA side also writes cuDNN's draws
//    (setCudnnAttentionRngDump: 1 kept, 0 dropped, as cudnn-frontend's
//    test_mhas.py multiplies the probabilities by the dump) and the host
//    side recomputes forward and gradients in double with that mask, read
//    from the CUDA side's output (Suite::reference). The CUDA side checks
//    alone that the fraction dropped is within 5 sigma of the ratio, that two
//    calls with one key give identical bits, that another micro-batch gives
//    another mask and that the plan with the dump gives the program's plan's
//    output.
//
//===----------------------------------------------------------------------===//

#include "KernelSuite.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace memopt::rt::suite {

namespace {

constexpr double kSeed = double(0x5eed1234567ll);

/// Broadcast batch of Q, K, V, then [S, Dv] (as KernelSuiteAttention.cpp).
std::vector<int64_t> outputShape(const std::vector<int64_t> &q,
                                 const std::vector<int64_t> &k,
                                 const std::vector<int64_t> &v) {
  size_t rank = std::max({q.size(), k.size(), v.size()});
  std::vector<int64_t> out(rank, 1);
  for (const std::vector<int64_t> *t : {&q, &k, &v})
    for (size_t i = 0; i + 2 < t->size(); ++i) {
      size_t o = rank - t->size() + i;
      out[o] = std::max(out[o], (*t)[i]);
    }
  out[rank - 2] = q[q.size() - 2];
  out[rank - 1] = v.back();
  return out;
}

/// One memopt-mask case's shapes and options.
struct DropCase {
  const char *name;
  std::vector<int64_t> q, k, v, bias;
  bool causal, keyTransposed;
  float scale;
  /// 0: random bias (if any); 1: -inf left padding [B, 1, 1, Sk] with the
  /// safe softmax (fully masked rows where causal).
  int mask;
  /// Workspace items per chunk for the chunked path (0: fused kernels).
  int64_t chunkItems;
  bool grouped, biasGradient;
  int64_t microBatch;
};

TensorRef biasOf(Suite &s, DType dt, const DropCase &a, int64_t keys) {
  if (a.bias.empty())
    return TensorRef();
  if (a.mask == 1) {
    std::vector<double> values;
    for (int64_t b = 0; b < a.bias.front(); ++b)
      for (int64_t j = 0; j < keys; ++j)
        values.push_back(j < 13 * (b + 1) ? -INFINITY : 0.0);
    return s.upload(dt, a.bias, values);
  }
  return s.random(dt, a.bias, 0.1, 1.0);
}

void addMemoptMaskCases(std::vector<Case> &cases) {
  const DType floats[3] = {DType::F32, DType::F16, DType::BF16};
  // chunkItems: the chunked path's workspace holds that many batch entries
  // (Q, K and V hold the whole batch); [3, 5] batches in chunks of 4 entries
  // put chunk boundaries inside the head dim (entries 4, 8, 12).
  const DropCase list[] = {
      {"causal_bias",
       {2, 2, 130, 64},
       {2, 2, 130, 64},
       {2, 2, 130, 64},
       {2, 1, 130, 130},
       true,
       false,
       0.125f,
       0,
       0,
       false,
       false,
       3},
      {"causal_bias_chunked",
       {2, 2, 130, 64},
       {2, 2, 130, 64},
       {2, 2, 130, 64},
       {2, 1, 130, 130},
       true,
       false,
       0.125f,
       0,
       2,
       false,
       false,
       3},
      {"padding_safe",
       {2, 2, 100, 64},
       {2, 2, 100, 64},
       {2, 2, 100, 64},
       {2, 1, 1, 100},
       true,
       false,
       0.125f,
       1,
       0,
       false,
       false,
       0},
      {"padding_safe_chunked",
       {2, 2, 100, 64},
       {2, 2, 100, 64},
       {2, 2, 100, 64},
       {2, 1, 1, 100},
       true,
       false,
       0.125f,
       1,
       2,
       false,
       false,
       11},
      {"midbatch_chunked_kt",
       {3, 5, 37, 40},
       {3, 5, 40, 75},
       {3, 5, 75, 24},
       {},
       false,
       true,
       0.16f,
       0,
       4,
       false,
       false,
       70001},
      {"midbatch_fused_kt",
       {3, 5, 37, 40},
       {3, 5, 40, 75},
       {3, 5, 75, 24},
       {},
       false,
       true,
       0.16f,
       0,
       0,
       false,
       false,
       70001},
      {"gqa_causal",
       {2, 2, 3, 96, 64},
       {2, 2, 1, 96, 64},
       {2, 2, 1, 96, 64},
       {},
       true,
       false,
       0.125f,
       0,
       0,
       false,
       false,
       5},
      {"gqa_grouped",
       {2, 2, 3, 96, 64},
       {2, 2, 1, 96, 64},
       {2, 2, 1, 96, 64},
       {},
       true,
       false,
       0.125f,
       0,
       0,
       true,
       false,
       5},
      {"long_keys_dbias",
       {2, 3, 40, 32},
       {2, 3, 1100, 32},
       {2, 3, 1100, 48},
       {2, 1, 1, 1100},
       false,
       false,
       0.2f,
       0,
       0,
       false,
       true,
       2},
      {"long_keys_dbias_chunked",
       {2, 3, 40, 32},
       {2, 3, 1100, 32},
       {2, 3, 1100, 48},
       {2, 1, 1, 1100},
       false,
       false,
       0.2f,
       0,
       3,
       false,
       true,
       2},
  };
  for (const DropCase &a : list)
    for (DType dt : floats)
      for (float ratio : {0.1f, 0.5f})
        for (bool backward : {false, true}) {
          // A trained bias is f32 only (attentionBackward's dbias).
          if (a.biasGradient && (dt != DType::F32 || !backward))
            continue;
          if (a.grouped && !backward)
            continue;
          char name[160];
          std::snprintf(name, sizeof(name), "attention_dropout%s_%s_p%02d_%s",
                        backward ? "_backward" : "", a.name,
                        int(ratio * 100 + 0.5f), tag(dt));
          cases.push_back(
              {name, backward ? tol(dt, 5e-4) : tol(dt, 2e-4), [=](Suite &s) {
                 TensorRef q = s.random(dt, a.q), k = s.random(dt, a.k),
                           v = s.random(dt, a.v);
                 std::vector<int64_t> out = outputShape(a.q, a.k, a.v);
                 const int64_t queries = out[out.size() - 2];
                 const int64_t keys =
                     a.keyTransposed ? a.k.back() : a.k[a.k.size() - 2];
                 TensorRef bias = biasOf(s, dt, a, keys);
                 const TensorRef *biasRef = a.bias.empty() ? nullptr : &bias;
                 TensorRef key =
                     s.ints(DType::I64, {2}, {kSeed, double(a.microBatch)});
                 AttentionParams params;
                 params.scale = a.scale;
                 params.causal = a.causal;
                 params.keyTransposed = a.keyTransposed;
                 params.safeSoftmax = a.mask == 1;
                 params.groupedGradients = a.grouped;
                 params.dropoutRatio = ratio;
                 params.dropoutStream = 17;
                 params.dropoutKey = static_cast<const int64_t *>(key.data);
                 // memopt's mask never runs on cuDNN: no cuDNN workspace,
                 // the chunked path's where asked (else the fused kernels).
                 size_t forwardBytes =
                     a.chunkItems
                         ? attentionChunkBytes(a.chunkItems, queries, keys, dt)
                         : 0;
                 size_t backwardBytes =
                     a.chunkItems ? attentionBackwardChunkBytes(
                                        a.chunkItems, queries, keys, dt)
                                  : 0;
                 void *workspace =
                     a.chunkItems
                         ? s.empty(
                                DType::F32,
                                {int64_t(std::max(forwardBytes, backwardBytes) /
                                         4) +
                                 1})
                               .data
                         : nullptr;
                 std::vector<int64_t> statShape(out.begin(), out.end() - 1);
                 statShape.push_back(2);
                 TensorRef y = s.empty(dt, out),
                           lse = s.empty(DType::F32, statShape);
                 attention(*s.ctx, s.name.c_str(), params, q, k, v, biasRef, y,
                           workspace, forwardBytes, backward ? &lse : nullptr);
                 if (!backward)
                   return std::vector<TensorRef>{y};
                 TensorRef dy = s.random(dt, out, 0.1, 1.0);
                 // Grouped: dK and dV in K's and V's own shapes.
                 auto gradShape = [&](const std::vector<int64_t> &operand,
                                      bool own) {
                   if (own)
                     return operand;
                   std::vector<int64_t> shape(out.begin(), out.end() - 2);
                   shape.push_back(operand[operand.size() - 2]);
                   shape.push_back(operand.back());
                   return shape;
                 };
                 TensorRef dq = s.empty(dt, gradShape(a.q, false)),
                           dk = s.empty(dt, gradShape(a.k, a.grouped)),
                           dv = s.empty(dt, gradShape(a.v, a.grouped));
                 TensorRef dbias;
                 if (a.biasGradient)
                   dbias = s.empty(dt, a.bias);
                 attentionBackward(*s.ctx, s.name.c_str(), params, q, k, v,
                                   biasRef, y, dy, lse, dq, dk, dv,
                                   a.biasGradient ? &dbias : nullptr, workspace,
                                   backwardBytes);
                 std::vector<TensorRef> results = {y, dq, dk, dv};
                 if (a.biasGradient)
                   results.push_back(dbias);
                 return results;
               }});
        }
}

/// Fused attention with dropout against the unfused graph on one backend:
/// scale Q K^T, softmax, dropout (the op whose mask the fused one is),
/// P V, and the backward's dV against (dropout(P))^T dO. The case's values
/// are 1 where they agree within `limit` (else the worst relative
/// difference), on either backend.
void addUnfusedCheckCases(std::vector<Case> &cases) {
  for (int64_t chunkItems : {int64_t(0), int64_t(4)})
    cases.push_back(
        {std::string("attention_dropout_matches_unfused") +
             (chunkItems ? "_chunked" : ""),
         0.0, [=](Suite &s) {
           const int64_t batch = 6, queries = 70, keys = 93, d = 32;
           const float scale = 0.17f, ratio = 0.3f;
           const uint32_t stream = 9;
           TensorRef q = s.random(DType::F32, {batch, queries, d}),
                     k = s.random(DType::F32, {batch, keys, d}),
                     v = s.random(DType::F32, {batch, keys, d});
           TensorRef key = s.ints(DType::I64, {2}, {kSeed, 42.0});
           AttentionParams params;
           params.scale = scale;
           params.dropoutRatio = ratio;
           params.dropoutStream = stream;
           params.dropoutKey = static_cast<const int64_t *>(key.data);
           size_t bytes = chunkItems ? attentionChunkBytes(chunkItems, queries,
                                                           keys, DType::F32)
                                     : 0;
           size_t backwardBytes =
               chunkItems ? attentionBackwardChunkBytes(chunkItems, queries,
                                                        keys, DType::F32)
                          : 0;
           void *workspace =
               chunkItems
                   ? s.empty(DType::F32,
                             {int64_t(std::max(bytes, backwardBytes) / 4) + 1})
                         .data
                   : nullptr;
           TensorRef fused = s.empty(DType::F32, {batch, queries, d}),
                     lse = s.empty(DType::F32, {batch, queries, 2});
           attention(*s.kernels, s.name.c_str(), params, q, k, v, nullptr,
                     fused, workspace, bytes, &lse);
           // dV = (c M P)^T dO: the backward's mask against the op's.
           TensorRef dy = s.random(DType::F32, {batch, queries, d}, 0.1, 1.0),
                     dq = s.empty(DType::F32, {batch, queries, d}),
                     dk = s.empty(DType::F32, {batch, keys, d}),
                     dv = s.empty(DType::F32, {batch, keys, d}),
                     unfusedDv = s.empty(DType::F32, {batch, keys, d});
           attentionBackward(*s.kernels, s.name.c_str(), params, q, k, v,
                             nullptr, fused, dy, lse, dq, dk, dv, nullptr,
                             workspace, backwardBytes);
           TensorRef scores = s.empty(DType::F32, {batch, queries, keys}),
                     probs = s.empty(DType::F32, {batch, queries, keys}),
                     dropped = s.empty(DType::F32, {batch, queries, keys}),
                     unfused = s.empty(DType::F32, {batch, queries, d});
           MatmulParams qk;
           qk.alpha = scale;
           qk.transB = true;
           matmul(*s.kernels, "qk", qk, q, k, nullptr, scores);
           softmax(*s.kernels, "softmax", 2, false, scores, probs);
           dropout(*s.kernels, "dropout", ratio, stream, probs, key, dropped);
           matmul(*s.kernels, "pv", MatmulParams(), dropped, v, nullptr,
                  unfused);
           MatmulParams pTdy;
           pTdy.transA = true;
           matmul(*s.kernels, "dv", pTdy, dropped, dy, nullptr, unfusedDv);
           synchronize(*s.kernels);
           auto agreement = [&](const TensorRef &x, const TensorRef &y) {
             std::vector<double> a = s.read(x), b = s.read(y);
             double worst = 0.0;
             for (size_t i = 0; i < a.size(); ++i)
               worst = std::max(worst, std::fabs(a[i] - b[i]) /
                                           (1.0 + std::fabs(b[i])));
             const double limit = 1e-4;
             return worst <= limit ? 1.0 : worst;
           };
           return std::vector<TensorRef>{
               s.upload(DType::F32, {2},
                        std::vector<double>{agreement(fused, unfused),
                                            agreement(dv, unfusedDv)})};
         }});
}

//===----------------------------------------------------------------------===//
// cuDNN's generator
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_SUITE_CUDA
/// Forward and gradients in double of attention [B, S, D] (B: the batch
/// entries of y, cuDNN's b x h) with the keep mask `keep` [B, S, Sk] (1 / 0)
/// and scale 1 / (1 - ratio): y, dq, dk, dv appended to `out`.
void referenceWithMask(const std::vector<double> &q,
                       const std::vector<double> &k,
                       const std::vector<double> &v,
                       const std::vector<double> &dy, const double *keep,
                       int64_t batch, int64_t queries, int64_t keys, int64_t d,
                       double scale, bool causal, double ratio,
                       std::vector<double> &out) {
  const double c = 1.0 / (1.0 - ratio);
  std::vector<double> y(size_t(batch * queries * d), 0.0), dq(y.size(), 0.0),
      dk(size_t(batch * keys * d), 0.0), dv(dk.size(), 0.0);
  std::vector<double> p(static_cast<size_t>(keys)),
      dp(static_cast<size_t>(keys));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < queries; ++i) {
      const double *qi = &q[size_t((b * queries + i) * d)];
      const double *gi = &dy[size_t((b * queries + i) * d)];
      const double *mi = keep + (b * queries + i) * keys;
      double m = -INFINITY;
      for (int64_t j = 0; j < keys; ++j) {
        double dot = 0.0;
        for (int64_t e = 0; e < d; ++e)
          dot += qi[e] * k[size_t((b * keys + j) * d + e)];
        p[size_t(j)] = causal && j > i ? -INFINITY : dot * scale;
        m = std::max(m, p[size_t(j)]);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < keys; ++j)
        sum += (p[size_t(j)] = std::exp(p[size_t(j)] - m));
      double rowDot = 0.0; // D = sum_j P dP
      for (int64_t j = 0; j < keys; ++j) {
        p[size_t(j)] /= sum;
        const double kept = mi[j] > 0.5 ? c : 0.0;
        double dpd = 0.0;
        for (int64_t e = 0; e < d; ++e) {
          const double vj = v[size_t((b * keys + j) * d + e)];
          y[size_t((b * queries + i) * d + e)] += kept * p[size_t(j)] * vj;
          dv[size_t((b * keys + j) * d + e)] += kept * p[size_t(j)] * gi[e];
          dpd += gi[e] * vj;
        }
        dp[size_t(j)] = kept * dpd;
        rowDot += p[size_t(j)] * dp[size_t(j)];
      }
      for (int64_t j = 0; j < keys; ++j) {
        const double ds = p[size_t(j)] * (dp[size_t(j)] - rowDot) * scale;
        for (int64_t e = 0; e < d; ++e) {
          dq[size_t((b * queries + i) * d + e)] +=
              ds * k[size_t((b * keys + j) * d + e)];
          dk[size_t((b * keys + j) * d + e)] += ds * qi[e];
        }
      }
    }
  for (const std::vector<double> *t : {&y, &dq, &dk, &dv})
    out.insert(out.end(), t->begin(), t->end());
}
#endif

/// The CUDA side's checks, each 1 when it holds: the fraction dropped, one
/// key's bits twice, another micro-batch's other mask, the dump's plan's
/// output the program's plan's.
constexpr int64_t kFlags = 4;

void addCudnnGeneratorCases(std::vector<Case> &cases) {
  struct C {
    const char *name;
    DType dt;
    float ratio;
    bool causal;
  };
  for (C a : {C{"f16_p20", DType::F16, 0.2f, false},
              C{"bf16_p50_causal", DType::BF16, 0.5f, true}})
    cases.push_back(
        {std::string("attention_dropout_cudnn_rng_") + a.name, tol(a.dt, 5e-4),
         [=](Suite &s) {
           const int64_t b = 2, h = 3, queries = 128, keys = 128, d = 64;
           const std::vector<int64_t> shape = {b, h, queries, d};
           const float scale = 0.125f;
           TensorRef q = s.random(a.dt, shape), k = s.random(a.dt, shape),
                     v = s.random(a.dt, shape),
                     dy = s.random(a.dt, shape, 0.1, 1.0);
           const int64_t scores = b * h * queries * keys;
           std::vector<TensorRef> results;
#ifdef MEMOPT_SUITE_CUDA
           if (!s.cudnnAttention)
             return results; // MEMOPT_ATTENTION_ENGINE=memopt: nothing
           TensorRef key = s.ints(DType::I64, {2}, {kSeed, 5.0}),
                     otherKey = s.ints(DType::I64, {2}, {kSeed, 6.0});
           AttentionParams params;
           params.scale = scale;
           params.causal = a.causal;
           params.dropoutRatio = a.ratio;
           params.dropoutStream = 23;
           params.dropoutKey = static_cast<const int64_t *>(key.data);
           params.dropoutCudnnRng = true;
           void *forwardWorkspace = nullptr, *backwardWorkspace = nullptr;
           size_t forwardBytes = 0, backwardBytes = 0;
           s.cudnnAttentionWorkspace(params, q, k, v, nullptr, true, false,
                                     forwardWorkspace, forwardBytes);
           s.cudnnAttentionWorkspace(params, q, k, v, nullptr, false, true,
                                     backwardWorkspace, backwardBytes);
           TensorRef dump = s.empty(DType::F32, {b, h, queries, keys});
           TensorRef y = s.empty(a.dt, shape),
                     lse = s.empty(DType::F32, {b, h, queries, 2});
           setCudnnAttentionRngDump(*s.ctx, dump.data);
           attention(*s.ctx, s.name.c_str(), params, q, k, v, nullptr, y,
                     forwardWorkspace, forwardBytes, &lse);
           TensorRef dq = s.empty(a.dt, shape), dk = s.empty(a.dt, shape),
                     dv = s.empty(a.dt, shape);
           attentionBackward(*s.ctx, s.name.c_str(), params, q, k, v, nullptr,
                             y, dy, lse, dq, dk, dv, nullptr, backwardWorkspace,
                             backwardBytes);
           // The same key twice (without the dump: the program's training
           // plan, with statistics), and another micro-batch.
           TensorRef again0 = s.empty(a.dt, shape),
                     again1 = s.empty(a.dt, shape),
                     other = s.empty(a.dt, shape),
                     scratchLse = s.empty(DType::F32, {b, h, queries, 2});
           for (TensorRef *t : {&again0, &again1})
             attention(*s.ctx, s.name.c_str(), params, q, k, v, nullptr, *t,
                       forwardWorkspace, forwardBytes, &scratchLse);
           AttentionParams otherParams = params;
           otherParams.dropoutKey = static_cast<const int64_t *>(otherKey.data);
           attention(*s.ctx, s.name.c_str(), otherParams, q, k, v, nullptr,
                     other, forwardWorkspace, forwardBytes, &scratchLse);
           synchronize(*s.ctx);
           std::vector<double> mask = s.read(dump);
           double dropped = 0.0;
           bool binary = true;
           for (double m : mask) {
             dropped += m == 0.0 ? 1.0 : 0.0;
             binary = binary && (m == 0.0 || m == 1.0);
           }
           const double n = double(scores), p = a.ratio;
           const double fraction = dropped / n,
                        sigma = std::sqrt(p * (1.0 - p) / n);
           const bool fractionOk =
               binary && std::fabs(fraction - p) <= 5.0 * sigma;
           std::vector<uint8_t> bytes0(again0.bytes()), bytes1(again1.bytes()),
               bytesOther(other.bytes()), bytesDumped(y.bytes());
           copyToHost(*s.ctx, bytesDumped.data(), y.data, bytesDumped.size());
           copyToHost(*s.ctx, bytes0.data(), again0.data, bytes0.size());
           copyToHost(*s.ctx, bytes1.data(), again1.data, bytes1.size());
           copyToHost(*s.ctx, bytesOther.data(), other.data, bytesOther.size());
           synchronize(*s.ctx);
           const bool sameBits = bytes0 == bytes1;
           const bool otherDiffers = bytes0 != bytesOther;
           // The plan with the dump draws the program's plan's mask (the
           // dump is what the program's forward and backward used).
           const bool dumpPlanSame = bytes0 == bytesDumped;
           if (!fractionOk || !sameBits || !otherDiffers || !dumpPlanSame)
             std::printf("%s: dropped %.4f (ratio %.2f, 5 sigma %.4f)%s; same "
                         "key %s; other micro-batch %s; with the dump %s\n",
                         s.name.c_str(), fraction, p, 5.0 * sigma,
                         binary ? "" : ", dump not 0 / 1",
                         sameBits ? "identical" : "DIFFERS",
                         otherDiffers ? "differs" : "IDENTICAL",
                         dumpPlanSame ? "identical" : "DIFFERS");
           results.push_back(s.upload(
               DType::F32, {kFlags},
               std::vector<double>{
                   fractionOk ? 1.0 : fraction, sameBits ? 1.0 : 0.0,
                   otherDiffers ? 1.0 : 0.0, dumpPlanSame ? 1.0 : 0.0}));
           results.push_back(dump);
           for (TensorRef t : {y, dq, dk, dv})
             results.push_back(t);
#else
           // The host: the CUDA side's flags and mask, forward and gradients
           // recomputed with that mask.
           if (!s.reference || s.reference->size() < size_t(kFlags + scores))
             return results;
           const std::vector<double> &theirs = *s.reference;
           std::vector<double> values(size_t(kFlags), 1.0);
           values.insert(values.end(), theirs.begin() + kFlags,
                         theirs.begin() + kFlags + scores);
           referenceWithMask(s.read(q), s.read(k), s.read(v), s.read(dy),
                             theirs.data() + kFlags, b * h, queries, keys, d,
                             scale, a.causal, a.ratio, values);
           results.push_back(
               s.upload(DType::F32, {int64_t(values.size())}, values));
#endif
           return results;
         }});
}

} // namespace

void addAttentionDropoutCases(std::vector<Case> &cases) {
  addMemoptMaskCases(cases);
  addUnfusedCheckCases(cases);
  addCudnnGeneratorCases(cases);
}

} // namespace memopt::rt::suite
