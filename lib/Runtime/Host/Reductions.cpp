//===- Reductions.cpp - host reductions, running sums ---------------------===//
//
// reduce, argReduce and cumSum on the host (the CUDA side: Kernels.cu's
// reductions and running sums). Moved out of HostBackend.cpp unchanged.
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
// Reductions
//===----------------------------------------------------------------------===//

void reduce(Context &ctx, const char *node, ReduceOp op, const int *axes,
            int numAxes, TensorRef x, TensorRef y, void *workspace,
            size_t workspaceBytes) {
  if (hasError(ctx) || !validateReduce(ctx, node, axes, numAxes, x, y))
    return;
  poisonWorkspace(workspace, workspaceBytes);
  bool reduced[kMaxRank] = {};
  for (int i = 0; i < numAxes; ++i)
    reduced[axes[i]] = true;
  std::vector<double> vx = toDouble(x);
  int64_t outCount = y.numElements();
  double init = op == ReduceOp::Max   ? -std::numeric_limits<double>::infinity()
                : op == ReduceOp::Min ? std::numeric_limits<double>::infinity()
                : op == ReduceOp::Prod ? 1.0
                                       : 0.0;
  std::vector<double> acc(size_t(outCount), init);
  int64_t count = outCount ? x.numElements() / outCount : 0;
  int64_t n = x.numElements();
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, outIndex = 0, outStride = 1;
    for (int d = x.rank - 1; d >= 0; --d) {
      int64_t coord = rest % x.shape[d];
      rest /= x.shape[d];
      if (!reduced[d]) {
        outIndex += coord * outStride;
        outStride *= x.shape[d];
      }
    }
    double v = vx[size_t(i)];
    double &a = acc[size_t(outIndex)];
    switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean:
      a += v;
      break;
    case ReduceOp::SumSquare:
    case ReduceOp::L2:
      a += v * v;
      break;
    case ReduceOp::Max:
      a = std::max(a, v);
      break;
    case ReduceOp::Min:
      a = std::min(a, v);
      break;
    case ReduceOp::Prod:
      a *= v;
      break;
    }
  }
  for (double &a : acc) {
    if (op == ReduceOp::Mean)
      a = count ? a / double(count) : 0;
    else if (op == ReduceOp::L2)
      a = std::sqrt(a);
  }
  store(acc, y);
}

void argReduce(Context &ctx, const char *node, bool isMax, int axis,
               TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateArgReduce(ctx, node, axis, x, y))
    return;
  AxisSplit s = splitAt(x, axis);
  std::vector<double> v = toDouble(x);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      int64_t best = 0;
      for (int64_t a = 1; a < s.axis; ++a) {
        double cur = v[size_t((o * s.axis + a) * s.inner + i)];
        double top = v[size_t((o * s.axis + best) * s.inner + i)];
        if (isMax ? cur > top : cur < top)
          best = a;
      }
      static_cast<int64_t *>(y.data)[o * s.inner + i] = best;
    }
}

namespace {

/// Replaces every row of `values` (viewed as [outer, axis, inner]) by its
/// running sum along the axis, one row per item; `add` is the accumulation.
template <typename T, typename Add>
void scanRows(Context &ctx, const AxisSplit &s, bool exclusive, bool reverse,
              T *values, Add add) {
  parallelFor(
      ctx, 0, s.outer * s.inner, grainFor(s.axis), [&](int64_t lo, int64_t hi) {
        for (int64_t item = lo; item < hi; ++item) {
          T *row =
              values + (item / s.inner) * s.axis * s.inner + item % s.inner;
          T sum = T(0);
          for (int64_t step = 0; step < s.axis; ++step) {
            T &element = row[(reverse ? s.axis - 1 - step : step) * s.inner];
            T next = add(sum, element);
            element = exclusive ? sum : next;
            sum = next;
          }
        }
      });
}

} // namespace

void cumSum(Context &ctx, const char *node, int axis, bool exclusive,
            bool reverse, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateCumSum(ctx, node, axis, x, y))
    return;
  AxisSplit s = splitAt(x, axis);
  if (isFloatType(x.dtype)) {
    std::vector<double> v = toDouble(ctx, x);
    scanRows(ctx, s, exclusive, reverse, v.data(),
             [](double a, double b) { return a + b; });
    store(ctx, v, y);
    return;
  }
  // Integers wrap (two's complement) in 64 bits; I32 results keep the low
  // half, which is the 32-bit wrapped sum.
  std::vector<int64_t> v = toInt64(x);
  scanRows(ctx, s, exclusive, reverse, v.data(), [](int64_t a, int64_t b) {
    return int64_t(uint64_t(a) + uint64_t(b));
  });
  storeInt64(v, y);
}

} // namespace memopt::rt
