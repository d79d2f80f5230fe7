//===- Normalization.cpp - host normalization, softmax --------------------===//
//
// batchNorm (inference), layerNorm and softmax / LogSoftmax on the host, one
// row per work item (the CUDA side: Kernels.cu's normalization and softmax;
// the training normalizations are in TrainingKernels.cpp as on the CUDA side
// in NormTrainingKernels.cu). Moved out of HostBackend.cpp unchanged.
//
//===----------------------------------------------------------------------===//

#include "HostKernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace memopt::rt {

//===----------------------------------------------------------------------===//
// Normalization, softmax, reductions
//===----------------------------------------------------------------------===//

void batchNorm(Context &ctx, const char *node, float epsilon, TensorRef x,
               TensorRef scale, TensorRef bias, TensorRef mean, TensorRef var,
               TensorRef y, bool channelsLast) {
  if (hasError(ctx) ||
      !validateBatchNorm(ctx, node, x, scale, bias, mean, var, y, channelsLast))
    return;
  std::vector<double> vx = toDouble(x), vs = toDouble(scale),
                      vb = toDouble(bias), vm = toDouble(mean),
                      vv = toDouble(var);
  AxisSplit s = splitAt(x, channelsLast ? x.rank - 1 : 1);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t c = 0; c < s.axis; ++c)
      for (int64_t i = 0; i < s.inner; ++i) {
        double &v = vx[size_t((o * s.axis + c) * s.inner + i)];
        v = (v - vm[c]) / std::sqrt(vv[c] + epsilon) * vs[c] + vb[c];
      }
  store(vx, y);
}

void layerNorm(Context &ctx, const char *node, int axis, float epsilon,
               TensorRef x, TensorRef scale, const TensorRef *bias,
               TensorRef y) {
  if (hasError(ctx) || !validateLayerNorm(ctx, node, axis, x, scale, bias, y))
    return;
  std::vector<double> vx = toDouble(ctx, x), vs = toDouble(scale), vb;
  if (bias)
    vb = toDouble(*bias);
  int64_t cols = int64_t(vs.size());
  int64_t rows = cols ? x.numElements() / cols : 0;
  parallelFor(ctx, 0, rows, grainFor(4 * cols), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      double *row = &vx[size_t(r * cols)];
      double mean = 0, var = 0;
      for (int64_t j = 0; j < cols; ++j)
        mean += row[j];
      mean /= double(cols);
      for (int64_t j = 0; j < cols; ++j)
        var += (row[j] - mean) * (row[j] - mean);
      var /= double(cols);
      double inv = 1 / std::sqrt(var + epsilon);
      for (int64_t j = 0; j < cols; ++j)
        row[j] = (row[j] - mean) * inv * vs[j] + (bias ? vb[j] : 0.0);
    }
  });
  store(ctx, vx, y);
}

void softmax(Context &ctx, const char *node, int axis, bool logSoftmax,
             TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateSoftmax(ctx, node, axis, x, y))
    return;
  std::vector<double> v = toDouble(ctx, x);
  AxisSplit s = splitAt(x, axis);
  // Items: (outer, inner) pairs, each one independent softmax.
  parallelFor(ctx, 0, s.outer * s.inner, grainFor(8 * s.axis),
              [&](int64_t lo, int64_t hi) {
                for (int64_t item = lo; item < hi; ++item) {
                  int64_t o = item / s.inner, i = item % s.inner;
                  auto at = [&](int64_t a) -> double & {
                    return v[size_t((o * s.axis + a) * s.inner + i)];
                  };
                  double best = -std::numeric_limits<double>::infinity(),
                         sum = 0;
                  for (int64_t a = 0; a < s.axis; ++a)
                    best = std::max(best, at(a));
                  if (logSoftmax) {
                    for (int64_t a = 0; a < s.axis; ++a)
                      sum += std::exp(at(a) - best);
                    for (int64_t a = 0; a < s.axis; ++a)
                      at(a) = at(a) - best - std::log(sum);
                    continue;
                  }
                  // Each exp once (the same value the sum used), then
                  // normalize.
                  for (int64_t a = 0; a < s.axis; ++a)
                    sum += (at(a) = std::exp(at(a) - best));
                  for (int64_t a = 0; a < s.axis; ++a)
                    at(a) /= sum;
                }
              });
  store(ctx, v, y);
}

} // namespace memopt::rt
