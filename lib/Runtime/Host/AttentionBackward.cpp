//===- AttentionBackward.cpp - host reference of attentionBackward --------===//
//
// The gradients of attention without the [S, Sk] probabilities: every pass
// recomputes a row's scores from Q and K, turns them into probabilities with
// the forward's row statistics (P = exp(S - max - logsum)) and forms
// dS = P * (dP - D) with dP = dO V^T and D = rowsum(dO * O), as
// FlashAttention-2's backward does. The work is split as the host backend
// always splits it (items fixed by the shapes, each output element written by
// one item in one order, so results do not depend on the thread count):
//
//   1. dK, dV: an item is a block of keys of one batch entry; it visits every
//      query row (causal: from the block's first key on) in order. With
//      grouped gradients (grouped-query K / V), of one K / V entry: it visits
//      the batch entries of its group in order, so dK and dV come summed
//      over the group in K's and V's own shapes.
//   2. dQ: an item is a block of query rows of one batch entry; it visits
//      every key in order.
//   3. dbias (when asked): an item is one row of the bias (the score rows
//      that broadcast onto it, in batch order), so the sum over broadcast
//      axes needs no atomics and no [S, Sk] buffer.
//
// Inner loops run over independent accumulators (keys of a block against a
// transposed K / V panel, or the head dimension), so they vectorize.
// Everything is computed in double and rounded once on store.
//
// Dropout (params.dropoutRatio > 0): the forward's keep mask M is drawn
// again per score (AttentionDropout.h, the forward's and memopt.dropout's
// mask) and, with s = 1 / (1 - ratio), dV = (s M * P)^T dO and
// dP = s M * (dO V^T); D = rowsum(dO * O) is unchanged (it equals
// sum_j P_ij dP_ij with the dropped dP), so dS = P * (dP - D) as before.
// FlashAttention-2's backward regenerates its mask from the Philox state the
// same way instead of saving it.
//
// Taken from: FlashAttention-2 (Dao, 2023), Algorithm 2 (recomputation from
// the log-sum-exp, D = rowsum(dO * O)); Triton's fused-attention tutorial
// (separate dK/dV and dQ loops instead of atomics). Different: the row
// statistics are kept as (max, log-sum) so rows masked by a finite fill stay
// exact, and the bias gradient is reduced per bias row.
//
//===----------------------------------------------------------------------===//

#include "AttentionDropout.h"
#include "HostInternal.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace memopt::rt {

using namespace host;

namespace {

constexpr int64_t kKeyBlock = 32;
constexpr int64_t kRowBlock = 16;

/// Offsets of batch entry `b` in each operand (elements).
struct EntryOffsets {
  int64_t q = 0, k = 0, v = 0, bias = 0;
};

EntryOffsets entryOffsets(const AttentionGeometry &g, int64_t b) {
  EntryOffsets o;
  for (int64_t rest = b, i = g.batchRank - 1; i >= 0; --i) {
    int64_t coord = rest % g.batchShape[i];
    rest /= g.batchShape[i];
    o.q += coord * g.qStride[i];
    o.k += coord * g.kStride[i];
    o.v += coord * g.vStride[i];
    o.bias += coord * g.biasStride[i];
  }
  return o;
}

/// Everything the passes read, as double.
struct Problem {
  const AttentionParams &params;
  const AttentionGeometry &g;
  std::vector<double> q, k, v, bias, dy, statistics, rowDot;

  /// K of entry `b` as a panel [d][keys of the block], V as [e][keys].
  void keyPanels(int64_t kOffset, int64_t vOffset, int64_t j0, int64_t count,
                 std::vector<double> &kT, std::vector<double> &vT) const {
    for (int64_t d = 0; d < g.headSize; ++d)
      for (int64_t c = 0; c < count; ++c)
        kT[size_t(d * kKeyBlock + c)] =
            params.keyTransposed
                ? k[size_t(kOffset + d * g.keys + j0 + c)]
                : k[size_t(kOffset + (j0 + c) * g.headSize + d)];
    for (int64_t e = 0; e < g.valueSize; ++e)
      for (int64_t c = 0; c < count; ++c)
        vT[size_t(e * kKeyBlock + c)] =
            v[size_t(vOffset + (j0 + c) * g.valueSize + e)];
  }

  /// dS of row i of entry b against keys [j0, j0 + count) (panels from
  /// keyPanels); also P into `p` when given (dropped out as the forward
  /// applied it: what dV reads). Keys masked by causal get 0.
  void scoreGradients(int64_t b, const EntryOffsets &o, int64_t i, int64_t j0,
                      int64_t count, const std::vector<double> &kT,
                      const std::vector<double> &vT, double *ds, double *p,
                      AttentionDropoutMask &dropout) const {
    double s[kKeyBlock] = {}, dp[kKeyBlock] = {};
    const double *qRow = q.data() + o.q + i * g.headSize;
    const double *dyRow = dy.data() + (b * g.queries + i) * g.valueSize;
    for (int64_t d = 0; d < g.headSize; ++d) {
      const double *panel = kT.data() + d * kKeyBlock;
      for (int64_t c = 0; c < count; ++c)
        s[c] += qRow[d] * panel[c];
    }
    for (int64_t e = 0; e < g.valueSize; ++e) {
      const double *panel = vT.data() + e * kKeyBlock;
      for (int64_t c = 0; c < count; ++c)
        dp[c] += dyRow[e] * panel[c];
    }
    const double *stat = statistics.data() + 2 * (b * g.queries + i);
    double max = stat[0], logSum = stat[1],
           dot = rowDot[size_t(b * g.queries + i)];
    for (int64_t c = 0; c < count; ++c) {
      int64_t j = j0 + c;
      double prob;
      if (max == -INFINITY) {
        // A fully masked row: NaN like the forward, zeros when safe.
        prob =
            params.safeSoftmax ? 0.0 : std::numeric_limits<double>::quiet_NaN();
      } else if (params.causal && j > i) {
        prob = 0.0;
      } else {
        double score = params.scale * s[c];
        if (g.hasBias)
          score +=
              bias[size_t(o.bias + i * g.biasRowStride + j * g.biasColStride)];
        if (score != -INFINITY && score < kAttentionSaturation)
          score = kAttentionLowestMax;
        prob = score == -INFINITY ? 0.0 : std::exp((score - max) - logSum);
      }
      if (dropout.enabled()) {
        // The forward's mask: dP = s M * dPd, and dV reads s M * P (a
        // dropped element is 0 even when P is NaN, as dropout() has it).
        double keep =
            dropout.factor(uint64_t((b * g.queries + i) * g.keys + j));
        ds[c] = prob * (keep * dp[c] - dot);
        if (p)
          p[c] = keep == 0.0 ? 0.0 : prob * keep;
        continue;
      }
      ds[c] = prob * (dp[c] - dot);
      if (p)
        p[c] = prob;
    }
  }
};

} // namespace

void attentionBackward(Context &ctx, const char *node,
                       const AttentionParams &params, TensorRef q, TensorRef k,
                       TensorRef v, const TensorRef *bias, TensorRef y,
                       TensorRef dy, TensorRef lse, TensorRef dq, TensorRef dk,
                       TensorRef dv, const TensorRef *dbias, void *workspace,
                       size_t workspaceBytes) {
  if (hasError(ctx))
    return;
  AttentionGeometry g;
  if (!validateAttentionBackward(ctx, node, params, q, k, v, bias, y, dy, lse,
                                 dq, dk, dv, dbias, g))
    return;
  poisonWorkspace(workspace, workspaceBytes);
  Problem pb{params, g, {}, {}, {}, {}, {}, {}, {}};
  pb.q = toDouble(ctx, q);
  pb.k = toDouble(ctx, k);
  pb.v = toDouble(ctx, v);
  if (bias)
    pb.bias = toDouble(ctx, *bias);
  pb.dy = toDouble(ctx, dy);
  pb.statistics = toDouble(ctx, lse);
  const int64_t rows = g.batch * g.queries;
  const int64_t d = g.headSize, dvSize = g.valueSize;
  {
    std::vector<double> out = toDouble(ctx, y);
    pb.rowDot.assign(size_t(rows), 0.0);
    parallelFor(ctx, 0, rows, grainFor(dvSize), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        double sum = 0;
        for (int64_t e = 0; e < dvSize; ++e)
          sum += pb.dy[size_t(r * dvSize + e)] * out[size_t(r * dvSize + e)];
        pb.rowDot[size_t(r)] = sum;
      }
    });
  }
  // Pass 1: dK and dV, a block of keys of one dK / dV entry per item: the
  // batch entry's, or with grouped gradients the sum over the `g.group`
  // batch entries that share the K / V entry, in batch order.
  std::vector<double> dkOut(size_t(dk.numElements())),
      dvOut(size_t(dv.numElements()));
  const int64_t keyBlocks = (g.keys + kKeyBlock - 1) / kKeyBlock;
  const int64_t group = params.groupedGradients ? g.group : 1;
  parallelFor(
      ctx, 0, g.batch / group * keyBlocks,
      grainFor(group * g.queries * kKeyBlock * 2 * (d + dvSize)),
      [&](int64_t lo, int64_t hi) {
        std::vector<double> kT(size_t(d * kKeyBlock)),
            vT(size_t(dvSize * kKeyBlock));
        std::vector<double> dkAcc(size_t(kKeyBlock * d)),
            dvAcc(size_t(kKeyBlock * dvSize));
        double ds[kKeyBlock], p[kKeyBlock];
        AttentionDropoutMask dropout(params);
        for (int64_t item = lo; item < hi; ++item) {
          int64_t entry = item / keyBlocks, j0 = item % keyBlocks * kKeyBlock;
          int64_t count = std::min(kKeyBlock, g.keys - j0);
          std::fill(dkAcc.begin(), dkAcc.end(), 0.0);
          std::fill(dvAcc.begin(), dvAcc.end(), 0.0);
          for (int64_t b = entry * group; b < (entry + 1) * group; ++b) {
            EntryOffsets o = entryOffsets(g, b);
            pb.keyPanels(o.k, o.v, j0, count, kT, vT);
            for (int64_t i = params.causal ? std::min(j0, g.queries) : 0;
                 i < g.queries; ++i) {
              pb.scoreGradients(b, o, i, j0, count, kT, vT, ds, p, dropout);
              const double *qRow = pb.q.data() + o.q + i * d;
              const double *dyRow = pb.dy.data() + (b * g.queries + i) * dvSize;
              for (int64_t c = 0; c < count; ++c) {
                double *dvRow = dvAcc.data() + c * dvSize;
                for (int64_t e = 0; e < dvSize; ++e)
                  dvRow[e] += p[c] * dyRow[e];
                double *dkRow = dkAcc.data() + c * d;
                double scaled = params.scale * ds[c];
                for (int64_t x = 0; x < d; ++x)
                  dkRow[x] += scaled * qRow[x];
              }
            }
          }
          const int64_t b = entry;
          for (int64_t c = 0; c < count; ++c) {
            int64_t j = j0 + c;
            for (int64_t x = 0; x < d; ++x)
              dkOut[size_t(params.keyTransposed ? (b * d + x) * g.keys + j
                                                : (b * g.keys + j) * d + x)] =
                  dkAcc[size_t(c * d + x)];
            for (int64_t e = 0; e < dvSize; ++e)
              dvOut[size_t((b * g.keys + j) * dvSize + e)] =
                  dvAcc[size_t(c * dvSize + e)];
          }
        }
      });
  // Pass 2: dQ, a block of query rows per item.
  std::vector<double> dqOut(size_t(dq.numElements()));
  const int64_t rowBlocks = (g.queries + kRowBlock - 1) / kRowBlock;
  parallelFor(ctx, 0, g.batch * rowBlocks,
              grainFor(kRowBlock * g.keys * (2 * d + dvSize)),
              [&](int64_t lo, int64_t hi) {
                std::vector<double> kT(size_t(d * kKeyBlock)),
                    vT(size_t(dvSize * kKeyBlock));
                double ds[kKeyBlock];
                AttentionDropoutMask dropout(params);
                for (int64_t item = lo; item < hi; ++item) {
                  int64_t b = item / rowBlocks,
                          i0 = item % rowBlocks * kRowBlock;
                  int64_t count = std::min(kRowBlock, g.queries - i0);
                  EntryOffsets o = entryOffsets(g, b);
                  double *dqBlock = dqOut.data() + (b * g.queries + i0) * d;
                  int64_t keyEnd =
                      params.causal ? std::min(g.keys, i0 + count) : g.keys;
                  for (int64_t j0 = 0; j0 < keyEnd; j0 += kKeyBlock) {
                    int64_t keys = std::min(kKeyBlock, g.keys - j0);
                    pb.keyPanels(o.k, o.v, j0, keys, kT, vT);
                    for (int64_t r = 0; r < count; ++r) {
                      pb.scoreGradients(b, o, i0 + r, j0, keys, kT, vT, ds,
                                        nullptr, dropout);
                      double *dqRow = dqBlock + r * d;
                      for (int64_t c = 0; c < keys; ++c) {
                        double scaled = params.scale * ds[c];
                        for (int64_t x = 0; x < d; ++x)
                          dqRow[x] += scaled * kT[size_t(x * kKeyBlock + c)];
                      }
                    }
                  }
                }
              });
  // Pass 3: dbias, one bias row per item (its score rows in batch order).
  std::vector<double> dbiasOut;
  if (dbias) {
    dbiasOut.assign(size_t(dbias->numElements()), 0.0);
    std::map<int64_t, std::vector<int64_t>> groups; // bias row -> score rows
    for (int64_t b = 0; b < g.batch; ++b) {
      int64_t base = entryOffsets(g, b).bias;
      for (int64_t i = 0; i < g.queries; ++i)
        groups[base + i * g.biasRowStride].push_back(b * g.queries + i);
    }
    std::vector<std::pair<int64_t, const std::vector<int64_t> *>> items;
    for (const auto &group : groups)
      items.push_back({group.first, &group.second});
    int64_t perRow = int64_t(items.empty() ? 0 : items.front().second->size()) *
                     g.keys * (d + dvSize);
    parallelFor(ctx, 0, int64_t(items.size()), grainFor(perRow),
                [&](int64_t lo, int64_t hi) {
                  std::vector<double> kT(size_t(d * kKeyBlock)),
                      vT(size_t(dvSize * kKeyBlock));
                  double ds[kKeyBlock];
                  AttentionDropoutMask dropout(params);
                  for (int64_t item = lo; item < hi; ++item) {
                    int64_t base = items[size_t(item)].first;
                    for (int64_t row : *items[size_t(item)].second) {
                      int64_t b = row / g.queries, i = row % g.queries;
                      EntryOffsets o = entryOffsets(g, b);
                      for (int64_t j0 = 0; j0 < g.keys; j0 += kKeyBlock) {
                        int64_t keys = std::min(kKeyBlock, g.keys - j0);
                        pb.keyPanels(o.k, o.v, j0, keys, kT, vT);
                        pb.scoreGradients(b, o, i, j0, keys, kT, vT, ds,
                                          nullptr, dropout);
                        for (int64_t c = 0; c < keys; ++c)
                          dbiasOut[size_t(base + (j0 + c) * g.biasColStride)] +=
                              ds[c];
                      }
                    }
                  }
                });
  }
  store(ctx, dqOut, dq);
  store(ctx, dkOut, dk);
  store(ctx, dvOut, dv);
  if (dbias)
    store(ctx, dbiasOut, *dbias);
  poisonWorkspace(workspace, workspaceBytes);
}

} // namespace memopt::rt
