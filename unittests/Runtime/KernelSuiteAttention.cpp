//===- KernelSuiteAttention.cpp - the suite's attention cases -------------===//
//
// The kernel suite's attention cases: the forward (masks, biases, broadcast
// batches, the chunked path, memopt's kernels and cuDNN's engine) and the
// gradients.
//
//===----------------------------------------------------------------------===//

#include "KernelSuite.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace memopt::rt::suite {

namespace {

/// Broadcast batch of Q, K, V, then [S, Dv].
std::vector<int64_t> attentionShape(const std::vector<int64_t> &q,
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

/// `values` of shape `from` summed over the axes along which `to` (aligned
/// right, numpy-style) broadcasts: the gradient of a broadcast operand, which
/// engines may split differently between its copies (cuDNN puts a K / V head
/// group's sum in the group's first copy; the caller sums them anyway).
std::vector<double> sumToShape(const std::vector<double> &values,
                               const std::vector<int64_t> &from,
                               const std::vector<int64_t> &to) {
  size_t rank = from.size(), offset = rank - to.size();
  int64_t total = 1;
  for (int64_t n : to)
    total *= n;
  std::vector<double> sums(size_t(total), 0.0);
  std::vector<int64_t> index(rank, 0);
  for (double value : values) {
    int64_t flat = 0;
    for (size_t d = offset; d < rank; ++d)
      flat = flat * to[d - offset] + (to[d - offset] == 1 ? 0 : index[d]);
    sums[size_t(flat)] += value;
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < from[d])
        break;
      index[d] = 0;
    }
  }
  return sums;
}

} // namespace

void addAttentionCases(std::vector<Case> &cases) {
  const DType floats[3] = {DType::F32, DType::F16, DType::BF16};
  // Attention: head sizes that are and are not multiples of 8 / 16, query
  // and key counts that leave partial tiles, broadcast batches and biases, a
  // padding mask of -inf, causal masks with more queries than a tile.
  for (DType dt : floats) {
    struct A {
      const char *name;
      std::vector<int64_t> q, k, v, bias;
      bool causal, keyTransposed, paddingMask;
      float scale;
    };
    for (A a : {A{"bert",
                  {2, 3, 77, 64},
                  {2, 3, 77, 64},
                  {2, 3, 77, 64},
                  {},
                  false,
                  false,
                  false,
                  0.125f},
                A{"gpt2_causal_kt_mask",
                  {2, 2, 130, 64},
                  {2, 2, 64, 130},
                  {2, 2, 130, 64},
                  {2, 1, 1, 130},
                  true,
                  true,
                  true,
                  0.125f},
                A{"broadcast_d40_dv24",
                  {3, 1, 33, 40},
                  {1, 2, 50, 40},
                  {3, 2, 50, 24},
                  {2, 33, 50},
                  false,
                  false,
                  false,
                  0.16f},
                A{"d128_relpos",
                  {1, 4, 200, 128},
                  {1, 4, 200, 128},
                  {1, 4, 200, 128},
                  {200, 200},
                  false,
                  false,
                  false,
                  0.088f},
                A{"cross_kt_d32",
                  {2, 5, 32},
                  {2, 32, 296},
                  {2, 296, 32},
                  {},
                  false,
                  true,
                  false,
                  0.18f},
                A{"causal_square_d64",
                  {1, 2, 256, 64},
                  {1, 2, 256, 64},
                  {1, 2, 256, 64},
                  {},
                  true,
                  false,
                  false,
                  0.125f},
                A{"causal_relpos_b7",
                  {7, 130, 64},
                  {7, 130, 64},
                  {7, 130, 64},
                  {130, 130},
                  true,
                  false,
                  false,
                  0.125f},
                A{"long_keys_kt",
                  {2, 3, 40, 32},
                  {2, 3, 32, 1100},
                  {2, 3, 1100, 48},
                  {2, 1, 1, 1100},
                  false,
                  true,
                  false,
                  0.2f}})
      // chunks 0: no workspace (the fused kernel); otherwise a workspace
      // that holds the scores of ceil(batch / chunks) entries (the chunked
      // cuBLASLt path when Q, K and V hold the whole batch, the fused
      // kernel otherwise).
      for (int64_t chunks : {int64_t(0), int64_t(3)})
        for (bool measured : {false, true}) {
          // `_measured`: the engine the call site's first run times faster
          // (f16 / bf16, where both engines may run), called twice (the
          // second call takes the cached choice).
          if (measured && dt == DType::F32)
            continue;
          cases.push_back(
              {std::string("attention_") + a.name +
                   (chunks ? "_chunked_" : "_") + tag(dt) +
                   (measured ? "_measured" : ""),
               tol(dt, 2e-4), [=](Suite &s) {
                 TensorRef q = s.random(dt, a.q), k = s.random(dt, a.k),
                           v = s.random(dt, a.v);
                 TensorRef bias;
                 if (a.paddingMask) {
                   // Sequence b keeps its first keys - 37 * b keys.
                   int64_t keys = a.bias.back();
                   std::vector<double> values;
                   for (int64_t b = 0; b < a.bias.front(); ++b)
                     for (int64_t j = 0; j < keys; ++j)
                       values.push_back(j < keys - 37 * b ? 0.0 : -INFINITY);
                   bias = s.upload(dt, a.bias, values);
                 } else if (!a.bias.empty()) {
                   bias = s.random(dt, a.bias, 0.1, 1.0);
                 }
                 std::vector<int64_t> out = attentionShape(a.q, a.k, a.v);
                 TensorRef y = s.empty(dt, out);
                 AttentionParams params;
                 params.scale = a.scale;
                 params.causal = a.causal;
                 params.keyTransposed = a.keyTransposed;
                 void *workspace = nullptr;
                 size_t workspaceBytes = 0;
                 if (chunks) {
                   int64_t batch = 1;
                   for (size_t i = 0; i + 2 < out.size(); ++i)
                     batch *= out[i];
                   int64_t keys =
                       a.keyTransposed ? a.k.back() : a.k[a.k.size() - 2];
                   workspaceBytes =
                       attentionChunkBytes((batch + chunks - 1) / chunks,
                                           out[out.size() - 2], keys, dt);
                   workspace =
                       s.empty(DType::F32, {int64_t(workspaceBytes / 4)}).data;
                 }
                 const TensorRef *biasRef = a.bias.empty() ? nullptr : &bias;
                 s.cudnnAttentionWorkspace(params, q, k, v, biasRef, false,
                                           false, workspace, workspaceBytes);
                 Context &c = measured ? *s.measuredAttention : *s.ctx;
                 synchronize(*s.ctx);
                 for (int call = 0; call < (measured ? 2 : 1); ++call)
                   attention(c, s.name.c_str(), params, q, k, v, biasRef, y,
                             workspace, workspaceBytes);
                 synchronize(c);
                 return std::vector<TensorRef>{y};
               }});
        }
  }

  // A finfo.min mask (the dynamo exporter's Where(mask, 0, finfo.min)) with
  // fully masked rows: the graph gives those rows the mean of V (every score
  // the same), so must the log2-domain kernels (no overflow to -inf). On
  // memopt's kernels: cuDNN's engine gives those rows zeros (as PyTorch's
  // cuDNN SDPA does; docs/attention.md, "Engines").
  for (DType dt : {DType::F32, DType::BF16})
    for (int64_t chunks : {int64_t(0), int64_t(2)})
      cases.push_back(
          {std::string("attention_lowest_fill_rows") +
               (chunks ? "_chunked_" : "_") + tag(dt),
           tol(dt, 2e-4), [=](Suite &s) {
             const int64_t batch = 2, heads = 2, tokens = 72, d = 32;
             TensorRef q = s.random(dt, {batch, heads, tokens, d}),
                       k = s.random(dt, {batch, heads, tokens, d}),
                       v = s.random(dt, {batch, heads, tokens, d});
             // Sequence b: 7 (b + 1) left-padding keys under a causal mask,
             // filled with the dtype's lowest value (finfo.min).
             const double lowest = dt == DType::BF16 ? -3.3895313892515355e38
                                                     : -3.4028234663852886e38;
             std::vector<double> values;
             for (int64_t b = 0; b < batch; ++b)
               for (int64_t i = 0; i < tokens; ++i)
                 for (int64_t j = 0; j < tokens; ++j)
                   values.push_back(j > i || j < 7 * (b + 1) ? lowest : 0.0);
             TensorRef bias = s.upload(dt, {batch, 1, tokens, tokens}, values);
             TensorRef y = s.empty(dt, {batch, heads, tokens, d});
             AttentionParams params;
             params.scale = 0.17f;
             params.safeSoftmax = true;
             void *workspace = nullptr;
             size_t workspaceBytes = 0;
             if (chunks) {
               workspaceBytes = attentionChunkBytes(batch * heads / chunks,
                                                    tokens, tokens, dt);
               workspace =
                   s.empty(DType::F32, {int64_t(workspaceBytes / 4)}).data;
             }
             synchronize(*s.ctx);
             attention(*s.kernels, s.name.c_str(), params, q, k, v, &bias, y,
                       workspace, workspaceBytes);
             synchronize(*s.kernels);
             return std::vector<TensorRef>{y};
           }});

  // Safe softmax (PyTorch's SDPA with a boolean mask): fully masked rows give
  // zeros. A causal GPT-2 batch with left padding (query rows before the
  // first real token see no key) and a BERT-like per-row mask with whole
  // rows masked, on the fused kernel and the chunked path.
  for (DType dt : floats)
    for (bool causal : {true, false})
      for (int64_t chunks : {int64_t(0), int64_t(2)})
        cases.push_back(
            {std::string("attention_safe_") +
                 (causal ? "causal_left_pad" : "masked_rows") +
                 (chunks ? "_chunked_" : "_") + tag(dt),
             tol(dt, 2e-4), [=](Suite &s) {
               const int64_t batch = 2, heads = 2, tokens = 100, d = 64;
               TensorRef q = s.random(dt, {batch, heads, tokens, d}),
                         k = s.random(dt, {batch, heads, tokens, d}),
                         v = s.random(dt, {batch, heads, tokens, d});
               // Causal: sequence b starts with 13 (b + 1) padding keys.
               // Otherwise: in sequence b, query rows i % (3 + b) == 0 see
               // nothing and the others lose their last 9 keys.
               std::vector<int64_t> biasShape =
                   causal ? std::vector<int64_t>{batch, 1, 1, tokens}
                          : std::vector<int64_t>{batch, 1, tokens, tokens};
               std::vector<double> values;
               for (int64_t b = 0; b < batch; ++b)
                 for (int64_t i = 0; i < (causal ? 1 : tokens); ++i)
                   for (int64_t j = 0; j < tokens; ++j) {
                     bool masked = causal ? j < 13 * (b + 1)
                                          : i % (3 + b) == 0 || j >= tokens - 9;
                     values.push_back(masked ? -INFINITY : 0.0);
                   }
               TensorRef bias = s.upload(dt, biasShape, values);
               TensorRef y = s.empty(dt, {batch, heads, tokens, d});
               AttentionParams params;
               params.scale = 0.125f;
               params.causal = causal;
               params.safeSoftmax = true;
               void *workspace = nullptr;
               size_t workspaceBytes = 0;
               if (chunks) {
                 workspaceBytes = attentionChunkBytes(batch * heads / chunks,
                                                      tokens, tokens, dt);
                 workspace =
                     s.empty(DType::F32, {int64_t(workspaceBytes / 4)}).data;
               }
               s.cudnnAttentionWorkspace(params, q, k, v, &bias, false, false,
                                         workspace, workspaceBytes);
               attention(*s.ctx, s.name.c_str(), params, q, k, v, &bias, y,
                         workspace, workspaceBytes);
               return std::vector<TensorRef>{y};
             }});

  // Attention gradients (f32): the forward with its row statistics, then the
  // backward, on the fused kernels (no workspace) and the chunked cuBLASLt
  // path (workspaces for a third of the batch). Outputs: y, lse, dQ, dK, dV
  // and dbias where the bias is trained (summed over its broadcast axes).
  struct G {
    const char *name;
    std::vector<int64_t> q, k, v, bias;
    bool causal, keyTransposed, biasGradient;
    float scale;
    /// 0: random bias; 1: -inf left padding (fully masked rows, safe
    /// softmax); 2: finfo.min fill with fully masked rows (safe softmax).
    int mask;
    /// dK and dV in K's and V's own shapes, summed over each group of query
    /// heads (AttentionParams::groupedGradients).
    bool grouped = false;
  };
  for (G a : {G{"bert",
                {2, 3, 77, 64},
                {2, 3, 77, 64},
                {2, 3, 77, 64},
                {},
                false,
                false,
                false,
                0.125f,
                0},
              G{"gpt2_causal_kt",
                {2, 2, 130, 64},
                {2, 2, 64, 130},
                {2, 2, 130, 64},
                {},
                true,
                true,
                false,
                0.125f,
                0},
              G{"broadcast_d40_dv24_dbias",
                {3, 1, 33, 40},
                {1, 2, 50, 40},
                {3, 2, 50, 24},
                {2, 33, 50},
                false,
                false,
                true,
                0.16f,
                0},
              G{"d128_relpos_dbias",
                {2, 4, 70, 128},
                {2, 4, 70, 128},
                {2, 4, 70, 128},
                {4, 70, 70},
                false,
                false,
                true,
                0.088f,
                0},
              G{"causal_relpos_b7_dbias",
                {7, 130, 64},
                {7, 130, 64},
                {7, 130, 64},
                {130, 130},
                true,
                false,
                true,
                0.125f,
                0},
              G{"long_keys_kt_dbias",
                {2, 3, 40, 32},
                {2, 3, 32, 1100},
                {2, 3, 1100, 48},
                {2, 1, 1, 1100},
                false,
                true,
                true,
                0.2f,
                0},
              G{"safe_causal_left_pad",
                {2, 2, 100, 64},
                {2, 2, 100, 64},
                {2, 2, 100, 64},
                {2, 1, 1, 100},
                true,
                false,
                false,
                0.125f,
                1},
              // cuDNN-shaped cases (the engine runs f16 / bf16 there):
              // grouped-query heads (K, V broadcast over the 3 query heads
              // of each of 2 K / V heads), a padding bias [B, 1, 1, Sk] and
              // a bias [B, 1, S, Sk].
              G{"gqa_causal",
                {2, 2, 3, 96, 64},
                {2, 2, 1, 96, 64},
                {2, 2, 1, 96, 64},
                {},
                true,
                false,
                false,
                0.125f,
                0},
              G{"gqa_causal_grouped",
                {2, 2, 3, 96, 64},
                {2, 2, 1, 96, 64},
                {2, 2, 1, 96, 64},
                {},
                true,
                false,
                false,
                0.125f,
                0,
                true},
              G{"gqa_kt_grouped",
                {2, 2, 3, 40, 32},
                {2, 2, 1, 32, 40},
                {2, 2, 1, 40, 32},
                {2, 1, 1, 1, 40},
                false,
                true,
                false,
                0.2f,
                0,
                true},
              // A tiny causal call with K as [D, Sk]: cuDNN's path is
              // several small kernels (K's transpose, the statistics'
              // conversions, its own), where memopt's kernels time faster
              // (the measured choice's memopt side).
              G{"tiny_causal_kt",
                {1, 1, 16, 8},
                {1, 1, 8, 16},
                {1, 1, 16, 8},
                {},
                true,
                true,
                false,
                0.35f,
                0},
              G{"key_padding_bias",
                {2, 4, 128, 64},
                {2, 4, 128, 64},
                {2, 4, 128, 64},
                {2, 1, 1, 128},
                false,
                false,
                false,
                0.125f,
                0},
              G{"causal_bias_b1ss",
                {2, 2, 64, 32},
                {2, 2, 64, 32},
                {2, 2, 64, 32},
                {2, 1, 64, 64},
                true,
                false,
                false,
                0.17f,
                0},
              G{"lowest_fill_rows",
                {2, 2, 72, 32},
                {2, 2, 72, 32},
                {2, 2, 72, 32},
                {2, 1, 72, 72},
                false,
                false,
                false,
                0.17f,
                2}})
    for (int64_t chunks : {int64_t(0), int64_t(3)})
      for (DType dt : {DType::F32, DType::F16, DType::BF16})
        for (bool measured : {false, true}) {
          // f16 / bf16 (mixed-precision training): fused and chunked, no
          // trained bias. `_measured`: each of the forward and the backward
          // on the engine its first call times faster, called twice.
          if (dt != DType::F32 && a.biasGradient)
            continue;
          if (measured && dt == DType::F32)
            continue;
          cases.push_back(
              {std::string("attention_backward_") + a.name +
                   (chunks ? "_chunked" : "") +
                   (dt == DType::F32 ? "" : std::string("_") + tag(dt)) +
                   (measured ? "_measured" : ""),
               tol(dt, 5e-4), [=](Suite &s) {
                 TensorRef q = s.random(dt, a.q), k = s.random(dt, a.k),
                           v = s.random(dt, a.v);
                 std::vector<int64_t> out = attentionShape(a.q, a.k, a.v);
                 int64_t batch = 1;
                 for (size_t i = 0; i + 2 < out.size(); ++i)
                   batch *= out[i];
                 int64_t queries = out[out.size() - 2];
                 int64_t keys =
                     a.keyTransposed ? a.k.back() : a.k[a.k.size() - 2];
                 TensorRef bias;
                 if (a.mask == 1) {
                   // Sequence b starts with 13 (b + 1) padding keys.
                   std::vector<double> values;
                   for (int64_t b = 0; b < a.bias.front(); ++b)
                     for (int64_t j = 0; j < keys; ++j)
                       values.push_back(j < 13 * (b + 1) ? -INFINITY : 0.0);
                   bias = s.upload(dt, a.bias, values);
                 } else if (a.mask == 2) {
                   // Causal with 7 (b + 1) left-padding keys, all finfo.min.
                   std::vector<double> values;
                   for (int64_t b = 0; b < a.bias.front(); ++b)
                     for (int64_t i = 0; i < queries; ++i)
                       for (int64_t j = 0; j < keys; ++j)
                         values.push_back(j > i || j < 7 * (b + 1)
                                              ? -3.4028234663852886e38
                                              : 0.0);
                   bias = s.upload(dt, a.bias, values);
                 } else if (!a.bias.empty()) {
                   bias = s.random(dt, a.bias, 0.1, 1.0);
                 }
                 const TensorRef *biasRef = a.bias.empty() ? nullptr : &bias;
                 AttentionParams params;
                 params.scale = a.scale;
                 params.causal = a.causal;
                 params.keyTransposed = a.keyTransposed;
                 params.safeSoftmax = a.mask != 0;
                 params.groupedGradients = a.grouped;
                 std::vector<int64_t> statShape(out.begin(), out.end() - 1);
                 statShape.push_back(2);
                 TensorRef y = s.empty(dt, out),
                           lse = s.empty(DType::F32, statShape);
                 int64_t items = chunks ? (batch + chunks - 1) / chunks : 0;
                 size_t forwardBytes =
                     chunks ? attentionChunkBytes(items, queries, keys, dt) : 0;
                 size_t backwardBytes =
                     chunks
                         ? attentionBackwardChunkBytes(items, queries, keys, dt)
                         : 0;
                 void *workspace =
                     chunks
                         ? s.empty(
                                DType::F32,
                                {int64_t(std::max(forwardBytes, backwardBytes) /
                                         4)})
                               .data
                         : nullptr;
                 void *forwardWorkspace = workspace,
                      *backwardWorkspace = workspace;
                 s.cudnnAttentionWorkspace(params, q, k, v, biasRef, true,
                                           false, forwardWorkspace,
                                           forwardBytes);
                 if (!a.biasGradient)
                   s.cudnnAttentionWorkspace(params, q, k, v, biasRef, false,
                                             true, backwardWorkspace,
                                             backwardBytes);
                 Context &c = measured ? *s.measuredAttention : *s.ctx;
                 synchronize(*s.ctx);
                 for (int call = 0; call < (measured ? 2 : 1); ++call)
                   attention(c, s.name.c_str(), params, q, k, v, biasRef, y,
                             forwardWorkspace, forwardBytes, &lse);
                 synchronize(c);
                 TensorRef dy = s.random(dt, out, 0.1, 1.0);
                 auto gradShape = [&](const std::vector<int64_t> &operand) {
                   std::vector<int64_t> shape(out.begin(), out.end() - 2);
                   shape.push_back(operand[operand.size() - 2]);
                   shape.push_back(operand.back());
                   return shape;
                 };
                 // Grouped: dK and dV in K's and V's own shapes.
                 auto ownOrGradShape =
                     [&](const std::vector<int64_t> &operand) {
                       return a.grouped ? operand : gradShape(operand);
                     };
                 TensorRef dq = s.empty(dt, gradShape(a.q)),
                           dk = s.empty(dt, ownOrGradShape(a.k)),
                           dv = s.empty(dt, ownOrGradShape(a.v));
                 TensorRef dbias;
                 if (a.biasGradient)
                   dbias = s.empty(dt, a.bias);
                 synchronize(*s.ctx);
                 for (int call = 0; call < (measured ? 2 : 1); ++call)
                   attentionBackward(c, s.name.c_str(), params, q, k, v,
                                     biasRef, y, dy, lse, dq, dk, dv,
                                     a.biasGradient ? &dbias : nullptr,
                                     backwardWorkspace, backwardBytes);
                 synchronize(c);
                 // dK and dV summed to K's and V's own shapes.
                 auto summed = [&](const TensorRef &grad,
                                   const std::vector<int64_t> &operand) {
                   std::vector<double> sums = sumToShape(
                       s.read(grad), ownOrGradShape(operand), operand);
                   return s.upload(DType::F32, {int64_t(sums.size())}, sums);
                 };
                 std::vector<TensorRef> results = {y, dq, summed(dk, a.k),
                                                   summed(dv, a.v)};
                 // The statistics as each row's log-sum-exp (the sum of its
                 // pair: memopt's kernels and cuDNN store different pairs).
                 // Fully masked rows store -inf statistics (not comparable).
                 if (a.mask != 1) {
                   std::vector<double> pairs = s.read(lse), sums;
                   for (size_t i = 0; i + 1 < pairs.size(); i += 2)
                     sums.push_back(pairs[i] + pairs[i + 1]);
                   results.push_back(
                       s.upload(DType::F32, {int64_t(sums.size())}, sums));
                 }
                 if (a.biasGradient)
                   results.push_back(dbias);
                 return results;
               }});
        }

  // The measured choice as a program runs it: a fresh context's execute()
  // runs the forward and the backward eagerly (the timing), captures them
  // in a CUDA graph (no timing inside: the cached choices) and replays.
  for (DType dt : {DType::F16, DType::BF16})
    cases.push_back(
        {std::string("attention_measured_graph_replay_") + tag(dt),
         tol(dt, 5e-4), [=](Suite &s) {
           struct Step {
             AttentionParams params;
             TensorRef q, k, v, y, lse, dy, dq, dk, dv;
             void *forwardWorkspace = nullptr, *backwardWorkspace = nullptr;
             size_t forwardBytes = 0, backwardBytes = 0;
             const char *name = nullptr;
           } st;
           const std::vector<int64_t> shape = {2, 4, 128, 64};
           st.q = s.random(dt, shape);
           st.k = s.random(dt, shape);
           st.v = s.random(dt, shape);
           st.dy = s.random(dt, shape, 0.1, 1.0);
           st.y = s.empty(dt, shape);
           st.lse = s.empty(DType::F32, {2, 4, 128, 2});
           st.dq = s.empty(dt, shape);
           st.dk = s.empty(dt, shape);
           st.dv = s.empty(dt, shape);
           st.params.scale = 0.125f;
           st.params.causal = true;
           st.name = s.name.c_str();
           s.cudnnAttentionWorkspace(st.params, st.q, st.k, st.v, nullptr, true,
                                     false, st.forwardWorkspace,
                                     st.forwardBytes);
           s.cudnnAttentionWorkspace(st.params, st.q, st.k, st.v, nullptr,
                                     false, true, st.backwardWorkspace,
                                     st.backwardBytes);
           ContextOptions options;
           options.attentionEngine = AttentionEngine::Measured;
           Context *c = createContext(options);
           synchronize(*s.ctx);
           for (int run = 0; run < 3 && !contextError(*c); ++run)
             execute(
                 *c,
                 [](Context &ctx, void *user) {
                   Step &st = *static_cast<Step *>(user);
                   attention(ctx, st.name, st.params, st.q, st.k, st.v, nullptr,
                             st.y, st.forwardWorkspace, st.forwardBytes,
                             &st.lse);
                   attentionBackward(ctx, st.name, st.params, st.q, st.k, st.v,
                                     nullptr, st.y, st.dy, st.lse, st.dq, st.dk,
                                     st.dv, nullptr, st.backwardWorkspace,
                                     st.backwardBytes);
                 },
                 &st);
           synchronize(*c);
           if (const char *error = contextError(*c)) {
             std::printf("FAIL %s: runtime error: %s\n", s.name.c_str(), error);
             std::exit(1);
           }
           if (*attentionEngineReport(*c))
             std::printf("attention engines (%s):\n%s", s.name.c_str(),
                         attentionEngineReport(*c));
           destroyContext(c);
           return std::vector<TensorRef>{st.y, st.dq, st.dk, st.dv};
         }});
}

} // namespace memopt::rt::suite
