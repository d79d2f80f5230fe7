//===- Attention.cpp - host scaled dot-product attention ------------------===//
//
// attention (forward, optionally the row statistics attentionBackward reads)
// on the host, as Cuda/AttentionKernels.cu on the GPU: a block of query rows
// of one head per work item, both products through Gemm.h's 4 x 4 tile. The
// gradient is in AttentionBackward.cpp. Moved out of HostBackend.cpp
// unchanged. A dropout of the probabilities (params.dropoutRatio) multiplies
// each normalized probability by memopt.dropout's keep factor of its
// row-major index (AttentionDropout.h) before P V; the row statistics stay
// those of the undropped probabilities.
//
//===----------------------------------------------------------------------===//

#include "AttentionDropout.h"
#include "Gemm.h"
#include "HostKernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace memopt::rt {

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

void attention(Context &ctx, const char *node, const AttentionParams &params,
               TensorRef q, TensorRef k, TensorRef v, const TensorRef *bias,
               TensorRef y, void *workspace, size_t workspaceBytes,
               const TensorRef *lse) {
  if (hasError(ctx))
    return;
  AttentionGeometry g;
  if (!validateAttention(ctx, node, params, q, k, v, bias, y, g) ||
      (lse && !validateAttentionStatistics(ctx, node, *lse, y,
                                           {&q, &k, &v, bias, &y})))
    return;
  // The CUDA backend may write scores anywhere in the workspace: clobber it
  // here too, before the operands are read and after the result is written.
  poisonWorkspace(workspace, workspaceBytes);
  std::vector<double> vq = toDouble(ctx, q), vk = toDouble(ctx, k),
                      vv = toDouble(ctx, v),
                      vbias =
                          bias ? toDouble(ctx, *bias) : std::vector<double>();
  std::vector<double> out(size_t(y.numElements()));
  std::vector<double> statistics(lse ? size_t(2 * g.batch * g.queries) : 0);
  // Work items: kRows query rows of one batch entry. Both products go
  // through the matmul's register tile: an item packs Q's rows, K and V of
  // its entry into panels, computes its rows' scores (Q K^T), turns them into
  // probabilities row by row and multiplies them with V. The tile sums over
  // d, then over keys, in increasing order from zero, so every element is
  // the naive loop's `dot += q * k` and `acc += p * v` sequence.
  constexpr int64_t kRows = 32;
  static_assert(kRows % kMR == 0, "row blocks are whole tiles");
  int64_t rowBlocks = (g.queries + kRows - 1) / kRows;
  int64_t keysPadded = (g.keys + kNR - 1) / kNR * kNR;
  int64_t valuesPadded = (g.valueSize + kNR - 1) / kNR * kNR;
  int64_t work =
      std::min(kRows, g.queries) * g.keys * (g.headSize + g.valueSize);
  parallelFor(
      ctx, 0, g.batch * rowBlocks, grainFor(work), [&](int64_t lo, int64_t hi) {
        // Panels as the tile reads them: A [tile][p][kMR], B [panel][p][kNR].
        std::vector<double> qPanels(size_t(kRows * g.headSize));
        std::vector<double> kPanels(size_t(keysPadded * g.headSize));
        std::vector<double> vPanels(size_t(valuesPadded * g.keys));
        std::vector<double> pPanels(size_t(kRows * g.keys));
        // One block of scores (never the whole [S, Sk] matrix) and of outputs.
        std::vector<double> scores(size_t(kRows * keysPadded));
        std::vector<double> acc(size_t(kRows * valuesPadded));
        std::vector<double> rowSum(static_cast<size_t>(kRows));
        host::AttentionDropoutMask dropout(params);
        for (int64_t item = lo; item < hi; ++item) {
          int64_t b = item / rowBlocks, i0 = item % rowBlocks * kRows;
          int64_t rows = std::min(kRows, g.queries - i0);
          int64_t tiles = (rows + kMR - 1) / kMR;
          int64_t qOffset = 0, kOffset = 0, vOffset = 0, biasOffset = 0;
          for (int64_t rest = b, i = g.batchRank - 1; i >= 0; --i) {
            int64_t coord = rest % g.batchShape[i];
            rest /= g.batchShape[i];
            qOffset += coord * g.qStride[i];
            kOffset += coord * g.kStride[i];
            vOffset += coord * g.vStride[i];
            biasOffset += coord * g.biasStride[i];
          }
          int64_t d = g.headSize, dv = g.valueSize;
          for (int64_t t = 0; t < tiles; ++t)
            for (int64_t p = 0; p < d; ++p)
              for (int64_t r = 0; r < kMR; ++r) {
                int64_t i = i0 + t * kMR + r;
                qPanels[size_t((t * d + p) * kMR + r)] =
                    i < g.queries ? vq[size_t(qOffset + i * d + p)] : 0.0;
              }
          // Causal rows see keys up to their own index: later key panels are
          // not needed by any row of the block.
          int64_t scoredKeys =
              params.causal ? std::min(g.keys, i0 + rows) : g.keys;
          int64_t keyPanels = (scoredKeys + kNR - 1) / kNR;
          for (int64_t jp = 0; jp < keyPanels; ++jp)
            for (int64_t p = 0; p < d; ++p)
              for (int64_t c = 0; c < kNR; ++c) {
                int64_t j = jp * kNR + c;
                kPanels[size_t((jp * d + p) * kNR + c)] =
                    j >= g.keys ? 0.0
                    : params.keyTransposed
                        ? vk[size_t(kOffset + p * g.keys + j)]
                        : vk[size_t(kOffset + j * d + p)];
              }
          for (int64_t dp = 0; dp < valuesPadded / kNR; ++dp)
            for (int64_t j = 0; j < g.keys; ++j)
              for (int64_t c = 0; c < kNR; ++c) {
                int64_t e = dp * kNR + c;
                vPanels[size_t((dp * g.keys + j) * kNR + c)] =
                    e < dv ? vv[size_t(vOffset + j * dv + e)] : 0.0;
              }
          for (int64_t t = 0; t < tiles; ++t)
            for (int64_t jp = 0; jp < keyPanels; ++jp)
              matmulTile(d, qPanels.data() + t * d * kMR,
                         kPanels.data() + jp * d * kNR,
                         scores.data() + t * kMR * keysPadded + jp * kNR,
                         keysPadded, true);
          for (int64_t r = 0; r < rows; ++r) {
            int64_t i = i0 + r;
            double *row = scores.data() + r * keysPadded;
            double rowMax = -INFINITY;
            for (int64_t j = 0; j < g.keys; ++j) {
              if (params.causal && j > i) {
                row[j] = -INFINITY;
                continue;
              }
              double score = params.scale * row[j];
              if (g.hasBias)
                score += vbias[biasOffset + i * g.biasRowStride +
                               j * g.biasColStride];
              row[j] = score;
              rowMax = std::max(rowMax, score);
            }
            // All -inf: exp(-inf - -inf) is NaN, as in the unfused graph;
            // the safe softmax gives the row zeros instead.
            bool zeroRow = params.safeSoftmax && rowMax == -INFINITY;
            double sum = 0;
            int64_t finite = 0;
            // The dropout's factor (0 or 1 / (1 - ratio)) scales P after
            // the sum: y = (P * keep / (1 - ratio)) V with P undropped.
            uint64_t rowIndex = uint64_t((b * g.queries + i) * g.keys);
            for (int64_t j = 0; j < g.keys; ++j) {
              double p = zeroRow ? 0.0 : std::exp(row[j] - rowMax);
              sum += p;
              finite += row[j] != -INFINITY;
              if (dropout.enabled()) {
                // A dropped element is 0 even when NaN, as dropout() has it.
                double keep = dropout.factor(rowIndex + uint64_t(j));
                p = keep == 0.0 ? 0.0 : p * keep;
              }
              pPanels[size_t((r / kMR * g.keys + j) * kMR + r % kMR)] = p;
            }
            rowSum[size_t(r)] = zeroRow ? 1.0 : sum;
            if (lse) {
              // The statistics of the saturated scores (kernels' rule): when
              // the maximum saturates, every finite score does.
              double *stat = statistics.data() + 2 * (b * g.queries + i);
              bool saturated =
                  rowMax != -INFINITY && rowMax < kAttentionSaturation;
              stat[0] = saturated ? double(kAttentionLowestMax) : rowMax;
              stat[1] = rowMax == -INFINITY ? -INFINITY
                        : saturated         ? std::log(double(finite))
                                            : std::log(sum);
            }
          }
          // Padding rows of the last tile: zero probabilities, results dropped.
          for (int64_t r = rows; r < tiles * kMR; ++r)
            for (int64_t j = 0; j < g.keys; ++j)
              pPanels[size_t((r / kMR * g.keys + j) * kMR + r % kMR)] = 0.0;
          for (int64_t t = 0; t < tiles; ++t)
            for (int64_t dp = 0; dp < valuesPadded / kNR; ++dp)
              matmulTile(g.keys, pPanels.data() + t * g.keys * kMR,
                         vPanels.data() + dp * g.keys * kNR,
                         acc.data() + t * kMR * valuesPadded + dp * kNR,
                         valuesPadded, true);
          for (int64_t r = 0; r < rows; ++r) {
            double *yRow = out.data() + (b * g.queries + i0 + r) * dv;
            for (int64_t e = 0; e < dv; ++e)
              yRow[e] = acc[size_t(r * valuesPadded + e)] / rowSum[size_t(r)];
          }
        }
      });
  store(ctx, out, y);
  if (lse)
    store(ctx, statistics, *lse);
  poisonWorkspace(workspace, workspaceBytes);
}

} // namespace memopt::rt
