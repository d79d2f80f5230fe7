//===- HostKernelsTest.h - the host kernel tests' fixture and helpers -----===//
//
// Shared by HostKernelsTest.cpp (elementwise, matmul, conv, pooling,
// normalization, attention) and HostKernelsMovementTest.cpp (reductions,
// cumSum, data movement, errors, thread counts).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_UNITTESTS_RUNTIME_HOSTKERNELSTEST_H
#define MEMOPT_UNITTESTS_RUNTIME_HOSTKERNELSTEST_H

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace memopt::rt::test {

class HostKernels : public ::testing::Test {
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
  Context *ctx = nullptr;
};

inline void expectClose(const Buffer &out, const std::vector<double> &expected,
                        double tol) {
  ASSERT_EQ(size_t(out.count()), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    double got = out.at(int64_t(i));
    EXPECT_NEAR(got, expected[i], tol * std::max(1.0, std::fabs(expected[i])))
        << "element " << i;
  }
}

/// Row-major coordinates of `index` in `shape`.
inline std::vector<int64_t> coordsOf(int64_t index,
                                     const std::vector<int64_t> &shape) {
  std::vector<int64_t> c(shape.size());
  for (int d = int(shape.size()) - 1; d >= 0; --d) {
    c[size_t(d)] = index % shape[size_t(d)];
    index /= shape[size_t(d)];
  }
  return c;
}

inline int64_t indexOf(const std::vector<int64_t> &coords,
                       const std::vector<int64_t> &shape) {
  int64_t index = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    index = index * shape[d] + coords[d];
  return index;
}

/// Flat index in `shape` of the (right-aligned, broadcast) output
/// coordinates.
inline int64_t broadcastIndex(const std::vector<int64_t> &shape,
                              const std::vector<int64_t> &outCoords) {
  int64_t index = 0;
  size_t offset = outCoords.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    index = index * shape[d] + (shape[d] == 1 ? 0 : outCoords[offset + d]);
  return index;
}

/// Value of a (right-aligned, broadcast) input at output coordinates.
inline double broadcastAt(const Buffer &in,
                          const std::vector<int64_t> &outCoords) {
  return in.at(broadcastIndex(in.shape, outCoords));
}

/// Direct convolution from the ONNX definition (2-D).
inline std::vector<double> referenceConv2d(const Buffer &x, const Buffer &w,
                                           const Buffer *bias,
                                           const ConvParams &p,
                                           const std::vector<int64_t> &yShape) {
  int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  int64_t m = w.shape[0], kh = w.shape[2], kw = w.shape[3];
  int64_t cg = c / p.group, mg = m / p.group;
  std::vector<double> y;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t oy = 0; oy < yShape[2]; ++oy)
        for (int64_t ox = 0; ox < yShape[3]; ++ox) {
          double acc = bias ? bias->at(o) : 0;
          int64_t g = o / mg;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                int64_t iy =
                    oy * p.strides[0] - p.padsBegin[0] + ky * p.dilations[0];
                int64_t ix =
                    ox * p.strides[1] - p.padsBegin[1] + kx * p.dilations[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd)
                  continue;
                acc += x.at(((b * c + g * cg + ci) * h + iy) * wd + ix) *
                       w.at(((o * cg + ci) * kh + ky) * kw + kx);
              }
          y.push_back(p.activation == Activation::Relu ? std::max(acc, 0.0)
                                                       : acc);
        }
  return y;
}

/// Unfused attention: the whole [S, Sk] score matrix, softmax, then P V.
inline std::vector<double>
referenceAttention(const Buffer &q, const Buffer &k, const Buffer &v,
                   const Buffer *bias, const AttentionParams &params,
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
  std::vector<double> out;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<int64_t> co = coordsOf(b, batchShape);
    auto at = [&](const Buffer &t, int64_t row, int64_t column) {
      std::vector<int64_t> c = co;
      c.push_back(row);
      c.push_back(column);
      return broadcastAt(t, c);
    };
    std::vector<std::vector<double>> scores(
        static_cast<size_t>(queries),
        std::vector<double>(static_cast<size_t>(keys)));
    for (int64_t i = 0; i < queries; ++i)
      for (int64_t j = 0; j < keys; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < headSize; ++d)
          dot +=
              at(q, i, d) * (params.keyTransposed ? at(k, d, j) : at(k, j, d));
        double score = params.scale * dot + (bias ? at(*bias, i, j) : 0.0);
        scores[size_t(i)][size_t(j)] =
            params.causal && j > i ? -INFINITY : score;
      }
    for (int64_t i = 0; i < queries; ++i) {
      std::vector<double> &row = scores[size_t(i)];
      double max = -INFINITY, sum = 0;
      for (double s : row)
        max = std::max(max, s);
      for (double &s : row)
        sum += (s = std::exp(s - max));
      for (int64_t d = 0; d < valueSize; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < keys; ++j)
          acc += row[size_t(j)] / sum * at(v, j, d);
        out.push_back(acc);
      }
    }
  }
  return out;
}

} // namespace memopt::rt::test

#endif // MEMOPT_UNITTESTS_RUNTIME_HOSTKERNELSTEST_H
