//===- TrainingKernels.cpp - host losses, gradients, optimizer updates ----===//
//
// The host reference of the training entry points of Runtime.h: softmax
// cross-entropy and its gradient, the conv filter gradient, the pooling input
// gradient, and PyTorch's SGD and AdamW updates. As in HostBackend.cpp,
// floats are computed in double and rounded once on store, work is split
// into items fixed by the shapes (rows, filter slices, planes, element
// ranges) and every output element is written by one item, in one order, so
// results do not depend on the thread count. Reductions across items (the
// loss) are summed serially in row order afterwards.
//
// Formulas: PyTorch's derivatives.yaml (cross_entropy, convolution_backward,
// max_pool / avg_pool backward) and torch.optim.SGD / AdamW. Mixed-precision
// training: updates take f16 / bf16 gradients and GradScaler's unscale and
// skip (the fused optimizers' grad_scale / found_inf), foundInf and
// updateLossScale are _amp_foreach_non_finite_check_and_unscale_'s flag and
// _amp_update_scale_, and the training normalizations take low activations
// with f32 statistics and parameters.
//
//===----------------------------------------------------------------------===//

#include "../Philox.h"
#include "HostInternal.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace memopt::rt {

namespace {

int64_t labelAt(const TensorRef &labels, int64_t row) {
  return labels.dtype == DType::I64
             ? static_cast<const int64_t *>(labels.data)[row]
             : static_cast<const int32_t *>(labels.data)[row];
}

/// Checks every label (an error names the first bad row) and counts the rows
/// that are not ignored.
bool countLabels(Context &ctx, const char *node, int64_t ignoreIndex,
                 const TensorRef &labels, int64_t rows, int64_t classes,
                 int64_t &counted) {
  counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = labelAt(labels, r);
    if (label == ignoreIndex)
      continue;
    if (label < 0 || label >= classes) {
      failf(ctx, node, "label %lld of row %lld is outside [0, %lld)",
            (long long)label, (long long)r, (long long)classes);
      return false;
    }
    ++counted;
  }
  return true;
}

/// max and log(sum(exp(x - max))) of one row.
void rowStatistics(const double *row, int64_t classes, double &max,
                   double &logSum) {
  max = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < classes; ++c)
    max = std::max(max, row[c]);
  double sum = 0;
  for (int64_t c = 0; c < classes; ++c)
    sum += std::exp(row[c] - max);
  logSum = std::log(sum);
}

float loadScalar(const TensorRef &t) {
  return *static_cast<const float *>(t.data);
}

} // namespace

void softmaxCrossEntropy(Context &ctx, const char *node, int64_t ignoreIndex,
                         TensorRef logits, TensorRef labels, TensorRef loss) {
  int64_t rows = 0, classes = 0, counted = 0;
  if (hasError(ctx) ||
      !validateSoftmaxCrossEntropy(ctx, node, logits, labels, loss, "loss",
                                   rows, classes) ||
      !countLabels(ctx, node, ignoreIndex, labels, rows, classes, counted))
    return;
  std::vector<double> values = host::toDouble(ctx, logits);
  std::vector<double> rowLoss(size_t(rows), 0.0);
  host::parallelFor(ctx, 0, rows, host::grainFor(4 * classes),
                    [&](int64_t lo, int64_t hi) {
                      for (int64_t r = lo; r < hi; ++r) {
                        int64_t label = labelAt(labels, r);
                        if (label == ignoreIndex)
                          continue;
                        const double *row = values.data() + r * classes;
                        double max, logSum;
                        rowStatistics(row, classes, max, logSum);
                        rowLoss[size_t(r)] = max + logSum - row[label];
                      }
                    });
  double sum = 0;
  for (double v : rowLoss)
    sum += v;
  *static_cast<float *>(loss.data) = counted ? float(sum / double(counted)) : 0;
}

void softmaxCrossEntropyGrad(Context &ctx, const char *node,
                             int64_t ignoreIndex, TensorRef logits,
                             TensorRef labels, TensorRef dloss,
                             TensorRef dlogits) {
  int64_t rows = 0, classes = 0, counted = 0;
  if (hasError(ctx) ||
      !validateSoftmaxCrossEntropy(ctx, node, logits, labels, dloss, "dloss",
                                   rows, classes) ||
      !checkFloat(ctx, node, dlogits, "dlogits") ||
      !checkSameDType(ctx, node, logits, dlogits, "logits/dlogits") ||
      !checkSameCount(ctx, node, logits, dlogits, "logits/dlogits") ||
      !countLabels(ctx, node, ignoreIndex, labels, rows, classes, counted))
    return;
  std::vector<double> values = host::toDouble(ctx, logits);
  double scale = counted ? double(loadScalar(dloss)) / double(counted) : 0.0;
  host::parallelFor(ctx, 0, rows, host::grainFor(4 * classes),
                    [&](int64_t lo, int64_t hi) {
                      for (int64_t r = lo; r < hi; ++r) {
                        double *row = values.data() + r * classes;
                        int64_t label = labelAt(labels, r);
                        if (label == ignoreIndex) {
                          std::fill(row, row + classes, 0.0);
                          continue;
                        }
                        double max, logSum;
                        rowStatistics(row, classes, max, logSum);
                        for (int64_t c = 0; c < classes; ++c)
                          row[c] = scale * (std::exp(row[c] - max - logSum) -
                                            (c == label ? 1.0 : 0.0));
                      }
                    });
  host::store(ctx, values, dlogits);
}

namespace {

/// Row r's logits x[r] . w[c] for every class c, in double.
void logitsRow(const std::vector<double> &x, const std::vector<double> &w,
               int64_t r, int64_t classes, int64_t features, double *out) {
  const double *xr = x.data() + r * features;
  for (int64_t c = 0; c < classes; ++c) {
    const double *wc = w.data() + c * features;
    double dot = 0;
    for (int64_t k = 0; k < features; ++k)
      dot += xr[k] * wc[k];
    out[c] = dot;
  }
}

} // namespace

// The host reference of the fused head + loss computes every logit in double
// from x and w (the separate matmul would round them to x's dtype first) and
// keeps no [R, C] tensor either: the gradient recomputes each logit once for
// dx (by rows) and once for dw (by classes), so every output element is
// written by one item.
void linearCrossEntropy(Context &ctx, const char *node,
                        const LinearCrossEntropyParams &params, TensorRef x,
                        TensorRef w, TensorRef labels, TensorRef loss,
                        TensorRef lse, void *, size_t) {
  int64_t rows = 0, classes = 0, features = 0, counted = 0;
  if (hasError(ctx) ||
      !validateLinearCrossEntropy(ctx, node, x, w, labels, loss, "loss", lse,
                                  rows, classes, features) ||
      !countLabels(ctx, node, params.ignoreIndex, labels, rows, classes,
                   counted))
    return;
  std::vector<double> xs = host::toDouble(ctx, x), ws = host::toDouble(ctx, w);
  std::vector<double> rowLoss(size_t(rows), 0.0), rowLse(size_t(rows), 0.0);
  host::parallelFor(
      ctx, 0, rows, host::grainFor(2 * classes * features),
      [&](int64_t lo, int64_t hi) {
        std::vector<double> row(static_cast<size_t>(classes), 0.0);
        for (int64_t r = lo; r < hi; ++r) {
          logitsRow(xs, ws, r, classes, features, row.data());
          double max, logSum;
          rowStatistics(row.data(), classes, max, logSum);
          rowLse[size_t(r)] = max + logSum;
          int64_t label = labelAt(labels, r);
          if (label != params.ignoreIndex)
            rowLoss[size_t(r)] = max + logSum - row[size_t(label)];
        }
      });
  double sum = 0;
  for (double v : rowLoss)
    sum += v;
  *static_cast<float *>(loss.data) = counted ? float(sum / double(counted)) : 0;
  host::store(ctx, rowLse, lse);
}

void linearCrossEntropyGrad(Context &ctx, const char *node,
                            const LinearCrossEntropyParams &params, TensorRef x,
                            TensorRef w, TensorRef labels, TensorRef lse,
                            TensorRef dloss, TensorRef dx, TensorRef dw, void *,
                            size_t) {
  int64_t rows = 0, classes = 0, features = 0, counted = 0;
  if (hasError(ctx) ||
      !validateLinearCrossEntropy(ctx, node, x, w, labels, dloss, "dloss", lse,
                                  rows, classes, features) ||
      !validateLinearCrossEntropyGrad(ctx, node, x, w, dx, dw) ||
      !countLabels(ctx, node, params.ignoreIndex, labels, rows, classes,
                   counted))
    return;
  std::vector<double> xs = host::toDouble(ctx, x), ws = host::toDouble(ctx, w);
  double scale = counted ? double(loadScalar(dloss)) / double(counted) : 0.0;
  // The row statistics in double (not lse's f32 copy), as the unfused
  // gradient recomputes them from the logits.
  std::vector<double> rowLse(size_t(rows), 0.0);
  std::vector<double> dxs(size_t(rows * features), 0.0);
  host::parallelFor(
      ctx, 0, rows, host::grainFor(4 * classes * features),
      [&](int64_t lo, int64_t hi) {
        std::vector<double> row(static_cast<size_t>(classes), 0.0);
        for (int64_t r = lo; r < hi; ++r) {
          int64_t label = labelAt(labels, r);
          if (label == params.ignoreIndex)
            continue;
          logitsRow(xs, ws, r, classes, features, row.data());
          double max, logSum;
          rowStatistics(row.data(), classes, max, logSum);
          rowLse[size_t(r)] = max + logSum;
          double *out = dxs.data() + r * features;
          for (int64_t c = 0; c < classes; ++c) {
            double d = scale * (std::exp(row[size_t(c)] - max - logSum) -
                                (c == label ? 1.0 : 0.0));
            const double *wc = ws.data() + c * features;
            for (int64_t k = 0; k < features; ++k)
              out[k] += d * wc[k];
          }
        }
      });
  std::vector<double> dws(size_t(classes * features), 0.0);
  host::parallelFor(ctx, 0, classes, host::grainFor(2 * rows * features),
                    [&](int64_t lo, int64_t hi) {
                      for (int64_t c = lo; c < hi; ++c) {
                        const double *wc = ws.data() + c * features;
                        double *out = dws.data() + c * features;
                        for (int64_t r = 0; r < rows; ++r) {
                          int64_t label = labelAt(labels, r);
                          if (label == params.ignoreIndex)
                            continue;
                          const double *xr = xs.data() + r * features;
                          double dot = 0;
                          for (int64_t k = 0; k < features; ++k)
                            dot += xr[k] * wc[k];
                          double d =
                              scale * (std::exp(dot - rowLse[size_t(r)]) -
                                       (c == label ? 1.0 : 0.0));
                          for (int64_t k = 0; k < features; ++k)
                            out[k] += d * xr[k];
                        }
                      }
                    });
  host::store(ctx, dxs, dx);
  host::store(ctx, dws, dw);
}

void convBackwardFilter(Context &ctx, const char *node,
                        const ConvParams &params, TensorRef x, TensorRef dy,
                        TensorRef dw, void *workspace, size_t workspaceBytes) {
  ConvGeometry g;
  if (hasError(ctx) ||
      !validateConvBackwardFilter(ctx, node, params, x, dy, dw, g))
    return;
  host::poisonWorkspace(workspace, workspaceBytes);
  std::vector<double> vx = host::toDouble(ctx, x),
                      vdy = host::toDouble(ctx, dy);
  int64_t inPerGroup = g.inChannels / g.group;
  int64_t outPerGroup = g.outChannels / g.group;
  int64_t inSpatial = g.in[0] * g.in[1] * g.in[2];
  int64_t outSpatial = g.out[0] * g.out[1] * g.out[2];
  int64_t kSpatial = g.kernel[0] * g.kernel[1] * g.kernel[2];
  // Channels-last operands go through channels-first copies (as the
  // forward's), and the KRSC filter gradient is stored back from one.
  if (g.channelsLast) {
    vx = host::channelsToFront(ctx, vx, g.batch, inSpatial, g.inChannels);
    vdy = host::channelsToFront(ctx, vdy, g.batch, outSpatial, g.outChannels);
  }
  std::vector<double> vdw(size_t(g.outChannels * inPerGroup * kSpatial), 0.0);
  // Items: (output channel, input channel of its group); each owns the
  // kSpatial filter taps dw[co][cl][:], summed over images, then output
  // positions with the padding bounds hoisted per tap.
  host::parallelFor(
      ctx, 0, g.outChannels * inPerGroup,
      host::grainFor(g.batch * outSpatial * kSpatial),
      [&](int64_t lo, int64_t hi) {
        for (int64_t item = lo; item < hi; ++item) {
          int64_t co = item / inPerGroup, cl = item % inPerGroup;
          int64_t ci = co / outPerGroup * inPerGroup + cl;
          double *taps = vdw.data() + item * kSpatial;
          for (int64_t n = 0; n < g.batch; ++n) {
            const double *xin = vx.data() + (n * g.inChannels + ci) * inSpatial;
            const double *dyPlane =
                vdy.data() + (n * g.outChannels + co) * outSpatial;
            for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0)
              for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1)
                for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
                  int64_t kk[3] = {k0, k1, k2}, first[3], last[3], offset[3];
                  for (int d = 0; d < 3; ++d) {
                    offset[d] = kk[d] * g.dilations[d] - g.padsBegin[d];
                    // Output positions p with 0 <= p * stride + offset < in.
                    first[d] =
                        std::max<int64_t>(0, (std::max<int64_t>(-offset[d], 0) +
                                              g.strides[d] - 1) /
                                                 g.strides[d]);
                    int64_t room = g.in[d] - 1 - offset[d];
                    last[d] = room < 0
                                  ? 0
                                  : std::min(g.out[d], room / g.strides[d] + 1);
                  }
                  double sum = 0;
                  for (int64_t p0 = first[0]; p0 < last[0]; ++p0)
                    for (int64_t p1 = first[1]; p1 < last[1]; ++p1) {
                      int64_t q0 = p0 * g.strides[0] + offset[0];
                      int64_t q1 = p1 * g.strides[1] + offset[1];
                      const double *xRow = xin + (q0 * g.in[1] + q1) * g.in[2];
                      const double *dyRow =
                          dyPlane + (p0 * g.out[1] + p1) * g.out[2];
                      for (int64_t p2 = first[2]; p2 < last[2]; ++p2)
                        sum += dyRow[p2] * xRow[p2 * g.strides[2] + offset[2]];
                    }
                  taps[(k0 * g.kernel[1] + k1) * g.kernel[2] + k2] += sum;
                }
          }
        }
      });
  if (g.channelsLast)
    vdw = host::channelsToBack(ctx, vdw, g.outChannels, kSpatial, inPerGroup);
  host::store(ctx, vdw, dw);
  host::poisonWorkspace(workspace, workspaceBytes);
}

void poolGrad(Context &ctx, const char *node, const PoolParams &params,
              TensorRef x, TensorRef dy, TensorRef dx) {
  ConvGeometry g;
  if (hasError(ctx) || !validatePoolGrad(ctx, node, params, x, dy, dx, g))
    return;
  std::vector<double> vx = host::toDouble(ctx, x),
                      vdy = host::toDouble(ctx, dy);
  int64_t inSpatial = g.in[0] * g.in[1] * g.in[2];
  int64_t outSpatial = g.out[0] * g.out[1] * g.out[2];
  if (g.channelsLast) {
    vx = host::channelsToFront(ctx, vx, g.batch, inSpatial, g.inChannels);
    vdy = host::channelsToFront(ctx, vdy, g.batch, outSpatial, g.inChannels);
  }
  std::vector<double> vdx(vx.size(), 0.0);
  int64_t kSpatial = g.kernel[0] * g.kernel[1] * g.kernel[2];
  // Items: (image, channel) planes; each output element scatters into its
  // own plane only, in output order, so overlapping windows accumulate in
  // the same order whatever the thread count.
  host::parallelFor(
      ctx, 0, g.batch * g.inChannels, host::grainFor(outSpatial * kSpatial),
      [&](int64_t lo, int64_t hi) {
        for (int64_t plane = lo; plane < hi; ++plane) {
          const double *xin = vx.data() + plane * inSpatial;
          double *dxin = vdx.data() + plane * inSpatial;
          for (int64_t o = 0; o < outSpatial; ++o) {
            int64_t oc[3] = {o / (g.out[1] * g.out[2]), o / g.out[2] % g.out[1],
                             o % g.out[2]};
            double grad = vdy[size_t(plane * outSpatial + o)];
            int64_t padded = 1, valid = 0, best = -1;
            double bestValue = 0;
            for (int d = 0; d < 3; ++d) {
              // Window positions inside the padded input (as `pool`).
              int64_t start = oc[d] * g.strides[d] - g.padsBegin[d], count = 0;
              for (int64_t k = 0; k < g.kernel[d]; ++k) {
                int64_t pos = start + k * g.dilations[d];
                count += pos >= -g.padsBegin[d] && pos < g.in[d] + g.padsEnd[d];
              }
              padded *= count;
            }
            // First pass: the first maximum (Max) or the divisor (Avg).
            for (int64_t k = 0; k < kSpatial; ++k) {
              int64_t kk[3] = {k / (g.kernel[1] * g.kernel[2]),
                               k / g.kernel[2] % g.kernel[1], k % g.kernel[2]};
              int64_t q[3];
              bool inside = true;
              for (int d = 0; d < 3 && inside; ++d) {
                q[d] = oc[d] * g.strides[d] - g.padsBegin[d] +
                       kk[d] * g.dilations[d];
                inside = q[d] >= 0 && q[d] < g.in[d];
              }
              if (!inside)
                continue;
              int64_t at = (q[0] * g.in[1] + q[1]) * g.in[2] + q[2];
              ++valid;
              if (params.kind == PoolKind::Max &&
                  (best < 0 || xin[at] > bestValue)) {
                best = at;
                bestValue = xin[at];
              }
            }
            if (params.kind == PoolKind::Max) {
              if (best >= 0)
                dxin[best] += grad;
              continue;
            }
            double share = grad / double(params.countIncludePad
                                             ? padded
                                             : std::max<int64_t>(valid, 1));
            for (int64_t k = 0; k < kSpatial; ++k) {
              int64_t kk[3] = {k / (g.kernel[1] * g.kernel[2]),
                               k / g.kernel[2] % g.kernel[1], k % g.kernel[2]};
              int64_t q[3];
              bool inside = true;
              for (int d = 0; d < 3 && inside; ++d) {
                q[d] = oc[d] * g.strides[d] - g.padsBegin[d] +
                       kk[d] * g.dilations[d];
                inside = q[d] >= 0 && q[d] < g.in[d];
              }
              if (inside)
                dxin[(q[0] * g.in[1] + q[1]) * g.in[2] + q[2]] += share;
            }
          }
        }
      });
  if (g.channelsLast)
    vdx = host::channelsToBack(ctx, vdx, g.batch, inSpatial, g.inChannels);
  host::store(ctx, vdx, dx);
}

namespace {

/// The gradient an update uses, in double: `grad` (any float dtype), or the
/// F32 accumulator after `grad` is summed into it (see
/// GradientAccumulation), multiplied by 1 / scale under loss scaling.
/// Returns false when the update does not run now: a micro-step before the
/// last, or a step whose gradients overflowed (LossScaling::foundInf).
bool prepareGradient(Context &ctx, const char *node, const TensorRef &param,
                     const TensorRef &grad,
                     const GradientAccumulation *accumulation,
                     const LossScaling *scaling, bool needsState,
                     std::vector<double> &gradient) {
  if (scaling && !validateLossScaling(ctx, node, *scaling, needsState))
    return false;
  gradient = host::toDouble(ctx, grad);
  if (accumulation) {
    if (!validateAccumulation(ctx, node, param, *accumulation))
      return false;
    double micro = loadScalar(accumulation->microStep);
    if (!(micro >= 0 && micro < double(accumulation->steps) &&
          micro == std::floor(micro))) {
      failf(ctx, node, "micro_step %g is not an integer in [0, %lld)", micro,
            (long long)accumulation->steps);
      return false;
    }
    float *sum = static_cast<float *>(accumulation->accumulator.data);
    bool first = micro == 0;
    // f32 additions, as the CUDA kernel does them. A null accumulator is the
    // micro-step gate alone (data parallel: a collective accumulated and
    // reduced the gradient).
    if (sum)
      host::parallelFor(ctx, 0, param.numElements(), host::kElementGrain,
                        [&](int64_t lo, int64_t hi) {
                          for (int64_t i = lo; i < hi; ++i) {
                            float g = float(gradient[size_t(i)]);
                            sum[i] = first ? g : sum[i] + g;
                            gradient[size_t(i)] = sum[i];
                          }
                        });
    if (micro != double(accumulation->steps - 1))
      return false;
  }
  if (scaling) {
    if (loadScalar(scaling->foundInf) != 0.0f)
      return false;
    // PyTorch's inv_scale: the reciprocal in double, rounded to f32.
    double inverse = double(float(1.0 / double(loadScalar(scaling->scale))));
    for (double &g : gradient)
      g = double(float(g * inverse));
  }
  return true;
}

} // namespace

void accumulateGradient(Context &ctx, const char *node, TensorRef grad,
                        const GradientAccumulation &accumulation) {
  if (hasError(ctx) ||
      !validateGradientAccumulation(ctx, node, grad, accumulation))
    return;
  double micro = loadScalar(accumulation.microStep);
  if (!(micro >= 0 && micro < double(accumulation.steps) &&
        micro == std::floor(micro))) {
    failf(ctx, node, "micro_step %g is not an integer in [0, %lld)", micro,
          (long long)accumulation.steps);
    return;
  }
  // prepareGradient's accumulation, bit for bit: f32 additions of the
  // widened gradient.
  std::vector<double> gradient = host::toDouble(ctx, grad);
  float *sum = static_cast<float *>(accumulation.accumulator.data);
  bool first = micro == 0;
  host::parallelFor(ctx, 0, grad.numElements(), host::kElementGrain,
                    [&](int64_t lo, int64_t hi) {
                      for (int64_t i = lo; i < hi; ++i) {
                        float g = float(gradient[size_t(i)]);
                        sum[i] = first ? g : sum[i] + g;
                      }
                    });
}

void dropout(Context &ctx, const char *node, float ratio, uint32_t stream,
             TensorRef x, TensorRef key, TensorRef y) {
  if (hasError(ctx) || !validateDropout(ctx, node, ratio, x, key, y))
    return;
  DropoutKey d =
      makeDropoutKey(static_cast<const int64_t *>(key.data), stream, ratio);
  std::vector<double> values = host::toDouble(ctx, x);
  int64_t groups = (int64_t(values.size()) + 3) / 4;
  // The product of an f32 element and the f32 scale is exact in double, so
  // the rounding on store is the CUDA kernel's single f32 rounding.
  double scale = d.scale;
  host::parallelFor(
      ctx, 0, groups, host::kElementGrain / 4, [&](int64_t lo, int64_t hi) {
        for (int64_t group = lo; group < hi; ++group) {
          Philox4x32 words = dropoutWords(d, uint64_t(group));
          for (int64_t k = 0; k < 4; ++k) {
            size_t i = size_t(group * 4 + k);
            if (i < values.size())
              values[i] = words.word[k] < d.threshold ? 0.0 : values[i] * scale;
          }
        }
      });
  host::store(ctx, values, y);
}

void randomUniform(Context &ctx, const char *node, float low, float high,
                   uint32_t stream, TensorRef key, TensorRef y) {
  if (hasError(ctx) || !validateRandomUniform(ctx, node, low, high, key, y))
    return;
  DropoutKey d =
      makeDropoutKey(static_cast<const int64_t *>(key.data), stream, 0.0f);
  std::vector<double> values(size_t(y.numElements()));
  int64_t groups = (int64_t(values.size()) + 3) / 4;
  // In f32, as the CUDA kernel computes it, then stored (one rounding).
  float range = high - low;
  host::parallelFor(
      ctx, 0, groups, host::kElementGrain / 4, [&](int64_t lo, int64_t hi) {
        for (int64_t group = lo; group < hi; ++group) {
          Philox4x32 words = dropoutWords(d, uint64_t(group));
          for (int64_t k = 0; k < 4; ++k) {
            size_t i = size_t(group * 4 + k);
            if (i < values.size())
              values[i] =
                  double(std::fmaf(range, philoxUnitFloat(words.word[k]), low));
          }
        }
      });
  host::store(ctx, values, y);
}

void sgdUpdate(Context &ctx, const char *node, float momentum,
               float weightDecay, TensorRef param, TensorRef grad,
               const TensorRef *momentumBuffer, TensorRef lr,
               const GradientAccumulation *accumulation,
               const LossScaling *scaling) {
  std::vector<double> g;
  if (hasError(ctx) ||
      !validateSgdUpdate(ctx, node, momentum, param, grad, momentumBuffer,
                         lr) ||
      !prepareGradient(ctx, node, param, grad, accumulation, scaling,
                       /*needsState=*/false, g))
    return;
  float *p = static_cast<float *>(param.data);
  float *buf =
      momentumBuffer ? static_cast<float *>(momentumBuffer->data) : nullptr;
  double rate = loadScalar(lr);
  host::parallelFor(ctx, 0, param.numElements(), host::kElementGrain,
                    [&](int64_t lo, int64_t hi) {
                      for (int64_t i = lo; i < hi; ++i) {
                        double d = g[size_t(i)] + weightDecay * double(p[i]);
                        if (momentum != 0.0f) {
                          buf[i] = float(momentum * double(buf[i]) + d);
                          d = buf[i];
                        }
                        p[i] = float(double(p[i]) - rate * d);
                      }
                    });
}

void adamwUpdate(Context &ctx, const char *node, float beta1, float beta2,
                 float eps, float weightDecay, TensorRef param, TensorRef grad,
                 TensorRef m, TensorRef v, TensorRef lr, TensorRef step,
                 const GradientAccumulation *accumulation,
                 const LossScaling *scaling) {
  std::vector<double> g;
  if (hasError(ctx) ||
      !validateAdamwUpdate(ctx, node, param, grad, m, v, lr, step) ||
      !prepareGradient(ctx, node, param, grad, accumulation, scaling,
                       /*needsState=*/true, g))
    return;
  double t = loadScalar(step);
  // Skipped steps did not step the optimizer (PyTorch's fused AdamW under a
  // GradScaler takes them back from its step count).
  if (scaling)
    t -= double(static_cast<const float *>(scaling->state.data)[1]);
  if (!(t >= 1)) {
    failf(ctx, node, "AdamW step %g is not a 1-based step number", t);
    return;
  }
  float *p = static_cast<float *>(param.data);
  float *mp = static_cast<float *>(m.data), *vp = static_cast<float *>(v.data);
  double rate = loadScalar(lr);
  double stepSize = rate / (1 - std::pow(double(beta1), t));
  double correction2 = std::sqrt(1 - std::pow(double(beta2), t));
  host::parallelFor(
      ctx, 0, param.numElements(), host::kElementGrain,
      [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          double gi = g[size_t(i)];
          double pi = double(p[i]) * (1 - rate * weightDecay);
          mp[i] = float(beta1 * double(mp[i]) + (1 - double(beta1)) * gi);
          vp[i] = float(beta2 * double(vp[i]) + (1 - double(beta2)) * gi * gi);
          double denom = std::sqrt(double(vp[i])) / correction2 + eps;
          p[i] = float(pi - stepSize * double(mp[i]) / denom);
        }
      });
}

//===----------------------------------------------------------------------===//
// Dynamic loss scaling
//===----------------------------------------------------------------------===//

void foundInf(Context &ctx, const char *node, const TensorRef *gradients,
              int count, const TensorRef *accumulators, int accumulatorCount,
              const TensorRef *microStep, TensorRef found) {
  if (hasError(ctx) ||
      !validateFoundInf(ctx, node, gradients, count, accumulators,
                        accumulatorCount, microStep, found))
    return;
  auto anyNonFinite = [&](const TensorRef &t) {
    for (int64_t i = 0, n = t.numElements(); i < n; ++i)
      if (!std::isfinite(loadAsDouble(t.data, t.dtype, i)))
        return true;
    return false;
  };
  bool nonFinite = false;
  for (int i = 0; i < count && !nonFinite; ++i)
    nonFinite = anyNonFinite(gradients[i]);
  // The accumulators hold the earlier micro-batches' sum after micro-step 0.
  if (microStep && loadScalar(*microStep) != 0.0f)
    for (int i = 0; i < accumulatorCount && !nonFinite; ++i)
      nonFinite = anyNonFinite(accumulators[i]);
  *static_cast<float *>(found.data) = nonFinite ? 1.0f : 0.0f;
}

void updateLossScale(Context &ctx, const char *node, float growthFactor,
                     float backoffFactor, int64_t growthInterval,
                     TensorRef scale, TensorRef state, TensorRef foundInf,
                     const TensorRef *microStep, int64_t accumulationSteps) {
  if (hasError(ctx) ||
      !validateUpdateLossScale(ctx, node, growthFactor, backoffFactor,
                               growthInterval, scale, state, foundInf,
                               microStep, accumulationSteps))
    return;
  if (microStep && loadScalar(*microStep) != float(accumulationSteps - 1))
    return;
  float *s = static_cast<float *>(scale.data);
  float *counts = static_cast<float *>(state.data);
  if (loadScalar(foundInf) != 0.0f) {
    *s *= backoffFactor;
    counts[0] = 0;
    counts[1] += 1;
    return;
  }
  counts[0] += 1;
  if (counts[0] >= float(growthInterval)) {
    float grown = *s * growthFactor;
    if (std::isfinite(grown))
      *s = grown;
    counts[0] = 0;
  }
}

//===----------------------------------------------------------------------===//
// Training-mode normalization (batch statistics; layer normalization's
// gradient). Per channel / per row items; the per-channel and per-column
// sums run serially in element order.
//===----------------------------------------------------------------------===//

namespace host {

namespace {

/// Element (n, c, s) of x [N, C, S], or [N, S, C] channels-last. Each
/// channel is summed in the same (n, s) order in both layouts.
struct ChannelIndex {
  int64_t channels, spatial;
  bool channelsLast;
  int64_t operator()(int64_t n, int64_t c, int64_t s) const {
    return channelsLast ? (n * spatial + s) * channels + c
                        : (n * channels + c) * spatial + s;
  }
};

} // namespace

void batchNormStatistics(Context &ctx, const std::vector<double> &x,
                         int64_t batch, int64_t channels, int64_t spatial,
                         bool channelsLast, float epsilon,
                         std::vector<double> &mean,
                         std::vector<double> &invStd) {
  ChannelIndex at{channels, spatial, channelsLast};
  mean.assign(size_t(channels), 0.0);
  invStd.assign(size_t(channels), 0.0);
  double count = double(batch * spatial);
  parallelFor(ctx, 0, channels, grainFor(2 * batch * spatial),
              [&](int64_t lo, int64_t hi) {
                for (int64_t c = lo; c < hi; ++c) {
                  double sum = 0;
                  for (int64_t n = 0; n < batch; ++n)
                    for (int64_t s = 0; s < spatial; ++s)
                      sum += x[size_t(at(n, c, s))];
                  double m = count > 0 ? sum / count : 0;
                  double sq = 0;
                  for (int64_t n = 0; n < batch; ++n)
                    for (int64_t s = 0; s < spatial; ++s) {
                      double d = x[size_t(at(n, c, s))] - m;
                      sq += d * d;
                    }
                  mean[size_t(c)] = m;
                  invStd[size_t(c)] =
                      1.0 /
                      std::sqrt((count > 0 ? sq / count : 0) + double(epsilon));
                }
              });
}

void batchNormGradient(Context &ctx, const std::vector<double> &x,
                       const std::vector<double> &dy, int64_t batch,
                       int64_t channels, int64_t spatial, bool channelsLast,
                       const float *mean, const float *invStd,
                       const float *scale, float *dscale, float *dbias,
                       std::vector<double> &dx) {
  ChannelIndex at{channels, spatial, channelsLast};
  dx.assign(x.size(), 0.0);
  double count = double(batch * spatial);
  parallelFor(ctx, 0, channels, grainFor(4 * batch * spatial),
              [&](int64_t lo, int64_t hi) {
                for (int64_t c = lo; c < hi; ++c) {
                  double m = mean[c], inv = invStd[c];
                  double sumDy = 0, sumDyX = 0;
                  for (int64_t n = 0; n < batch; ++n)
                    for (int64_t s = 0; s < spatial; ++s) {
                      size_t i = size_t(at(n, c, s));
                      sumDy += dy[i];
                      sumDyX += dy[i] * (x[i] - m);
                    }
                  double k = scale[c] * inv;
                  double b = count > 0 ? sumDy / count : 0;
                  double w = count > 0 ? inv * inv * sumDyX / count : 0;
                  for (int64_t n = 0; n < batch; ++n)
                    for (int64_t s = 0; s < spatial; ++s) {
                      size_t i = size_t(at(n, c, s));
                      dx[i] = k * (dy[i] - b - (x[i] - m) * w);
                    }
                  dbias[c] = float(sumDy);
                  dscale[c] = float(sumDyX * inv);
                }
              });
}

} // namespace host

namespace {

/// batchNormTraining, and with `residual` batchNormTrainingAdd (the
/// residual added before the activation, in double: one rounding), after
/// their checks.
void batchNormForward(Context &ctx, float epsilon, Activation activation,
                      TensorRef x, TensorRef scale, TensorRef bias,
                      const TensorRef *residual, TensorRef y, TensorRef mean,
                      TensorRef invStd, void *workspace, size_t workspaceBytes,
                      bool channelsLast, const ChannelLayout &layout) {
  int64_t channels = layout.channels, spatial = layout.spatial;
  host::poisonWorkspace(workspace, workspaceBytes);
  int64_t batch = x.shape[0];
  std::vector<double> px = host::toDouble(ctx, x);
  // Read before y is stored: y may be z's storage.
  std::vector<double> pz;
  if (residual)
    pz = host::toDouble(ctx, *residual);
  std::vector<double> m, inv;
  host::batchNormStatistics(ctx, px, batch, channels, spatial, channelsLast,
                            epsilon, m, inv);
  std::vector<double> py(px.size());
  auto *pm = static_cast<float *>(mean.data);
  auto *ps = static_cast<float *>(invStd.data);
  auto *pscale = static_cast<const float *>(scale.data);
  auto *pbias = static_cast<const float *>(bias.data);
  bool relu = activation == Activation::Relu;
  // y elementwise by runs of one channel ([N, C, S]: planes of S) or of
  // all channels ([N, S, C]: rows of C); the per-channel constants in double.
  std::vector<double> a(static_cast<size_t>(channels)),
      b(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    a[size_t(c)] = inv[size_t(c)] * pscale[c];
    b[size_t(c)] = pbias[c] - m[size_t(c)] * a[size_t(c)];
  }
  int64_t runs = channelsLast ? batch * spatial : batch * channels;
  int64_t runLength = channelsLast ? channels : spatial;
  host::parallelFor(ctx, 0, runs, host::grainFor(runLength),
                    [&](int64_t lo, int64_t hi) {
                      for (int64_t run = lo; run < hi; ++run)
                        for (int64_t j = 0; j < runLength; ++j) {
                          size_t c = size_t(channelsLast ? j : run % channels);
                          size_t i = size_t(run * runLength + j);
                          double v = px[i] * a[c] + b[c];
                          if (residual)
                            v += pz[i];
                          py[i] = relu ? std::max(v, 0.0) : v;
                        }
                    });
  for (int64_t c = 0; c < channels; ++c) {
    pm[c] = float(m[size_t(c)]);
    ps[c] = float(inv[size_t(c)]);
  }
  host::store(ctx, py, y);
}

} // namespace

void batchNormTraining(Context &ctx, const char *node, float epsilon,
                       Activation activation, TensorRef x, TensorRef scale,
                       TensorRef bias, TensorRef y, TensorRef mean,
                       TensorRef invStd, void *workspace, size_t workspaceBytes,
                       bool channelsLast) {
  ChannelLayout layout;
  layout.channelsLast = channelsLast;
  if (hasError(ctx) ||
      !validateBatchNormTraining(ctx, node, activation, x, scale, bias, y, mean,
                                 invStd, layout))
    return;
  batchNormForward(ctx, epsilon, activation, x, scale, bias, nullptr, y, mean,
                   invStd, workspace, workspaceBytes, channelsLast, layout);
}

void batchNormTrainingAdd(Context &ctx, const char *node, float epsilon,
                          Activation activation, TensorRef x, TensorRef scale,
                          TensorRef bias, TensorRef z, TensorRef y,
                          TensorRef mean, TensorRef invStd, void *workspace,
                          size_t workspaceBytes, bool channelsLast) {
  ChannelLayout layout;
  layout.channelsLast = channelsLast;
  if (hasError(ctx) ||
      !validateBatchNormTrainingAdd(ctx, node, activation, x, scale, bias, z, y,
                                    mean, invStd, layout))
    return;
  batchNormForward(ctx, epsilon, activation, x, scale, bias, &z, y, mean,
                   invStd, workspace, workspaceBytes, channelsLast, layout);
}

void batchNormTrainingGrad(Context &ctx, const char *node, TensorRef x,
                           TensorRef dy, TensorRef scale, TensorRef mean,
                           TensorRef invStd, TensorRef dx, TensorRef dscale,
                           TensorRef dbias, void *workspace,
                           size_t workspaceBytes, bool channelsLast) {
  ChannelLayout layout;
  layout.channelsLast = channelsLast;
  if (hasError(ctx) ||
      !validateBatchNormTrainingGrad(ctx, node, x, dy, scale, mean, invStd, dx,
                                     dscale, dbias, layout))
    return;
  host::poisonWorkspace(workspace, workspaceBytes);
  std::vector<double> px = host::toDouble(ctx, x);
  std::vector<double> pdy = host::toDouble(ctx, dy);
  std::vector<double> pdx;
  host::batchNormGradient(
      ctx, px, pdy, x.shape[0], layout.channels, layout.spatial, channelsLast,
      static_cast<const float *>(mean.data),
      static_cast<const float *>(invStd.data),
      static_cast<const float *>(scale.data), static_cast<float *>(dscale.data),
      static_cast<float *>(dbias.data), pdx);
  host::store(ctx, pdx, dx);
}

void batchNormRunningUpdate(Context &ctx, const char *node, float momentum,
                            float epsilon, TensorRef mean, TensorRef invStd,
                            TensorRef runningMean, TensorRef runningVar) {
  if (hasError(ctx) || !validateBatchNormRunningUpdate(ctx, node, mean, invStd,
                                                       runningMean, runningVar))
    return;
  int64_t channels = mean.numElements();
  auto *pm = static_cast<const float *>(mean.data);
  auto *ps = static_cast<const float *>(invStd.data);
  auto *rm = static_cast<float *>(runningMean.data);
  auto *rv = static_cast<float *>(runningVar.data);
  for (int64_t c = 0; c < channels; ++c) {
    double inv = ps[c];
    double var = std::max(1.0 / (inv * inv) - double(epsilon), 0.0);
    rm[c] = float(double(momentum) * rm[c] + (1.0 - double(momentum)) * pm[c]);
    rv[c] = float(double(momentum) * rv[c] + (1.0 - double(momentum)) * var);
  }
}

void layerNormGrad(Context &ctx, const char *node, float epsilon, TensorRef x,
                   TensorRef dy, TensorRef scale, TensorRef dx,
                   TensorRef dscale, TensorRef dbias, void *workspace,
                   size_t workspaceBytes) {
  if (hasError(ctx) ||
      !validateLayerNormGrad(ctx, node, x, dy, scale, dx, dscale, dbias))
    return;
  int64_t cols = scale.numElements();
  host::poisonWorkspace(workspace, workspaceBytes);
  int64_t rows = x.numElements() / cols;
  std::vector<double> vx = host::toDouble(ctx, x),
                      vdy = host::toDouble(ctx, dy);
  const double *px = vx.data(), *pdy = vdy.data();
  const float *pscale = static_cast<const float *>(scale.data);
  std::vector<double> vdx(vx.size());
  double *pdx = vdx.data();
  std::vector<double> stats(size_t(2 * rows));
  host::parallelFor(
      ctx, 0, rows, host::grainFor(6 * cols), [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r) {
          const double *xr = px + r * cols, *gr = pdy + r * cols;
          double sum = 0;
          for (int64_t j = 0; j < cols; ++j)
            sum += xr[j];
          double mean = sum / double(cols), sq = 0;
          for (int64_t j = 0; j < cols; ++j)
            sq += (xr[j] - mean) * (xr[j] - mean);
          double inv = 1.0 / std::sqrt(sq / double(cols) + double(epsilon));
          double sumG = 0, sumGX = 0;
          for (int64_t j = 0; j < cols; ++j) {
            double g = gr[j] * pscale[j];
            sumG += g;
            sumGX += g * (xr[j] - mean) * inv;
          }
          double meanG = sumG / double(cols), meanGX = sumGX / double(cols);
          for (int64_t j = 0; j < cols; ++j) {
            double g = gr[j] * pscale[j];
            double xhat = (xr[j] - mean) * inv;
            pdx[r * cols + j] = inv * (g - meanG - xhat * meanGX);
          }
          stats[size_t(2 * r)] = mean;
          stats[size_t(2 * r + 1)] = inv;
        }
      });
  host::store(ctx, vdx, dx);
  auto *ds = static_cast<float *>(dscale.data);
  auto *db = static_cast<float *>(dbias.data);
  host::parallelFor(ctx, 0, cols, host::grainFor(4 * rows),
                    [&](int64_t lo, int64_t hi) {
                      for (int64_t j = lo; j < hi; ++j) {
                        double s = 0, b = 0;
                        for (int64_t r = 0; r < rows; ++r) {
                          double g = pdy[r * cols + j];
                          s += g * (px[r * cols + j] - stats[size_t(2 * r)]) *
                               stats[size_t(2 * r + 1)];
                          b += g;
                        }
                        ds[j] = float(s);
                        db[j] = float(b);
                      }
                    });
}

} // namespace memopt::rt
