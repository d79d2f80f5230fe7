//===- HostKernelsMovementTest.cpp - host kernels vs naive references ----===//
//
// The second half of the host kernel tests (HostKernelsTest.cpp says how they
// work): reductions, cumSum, data movement (transpose, concat, split, slice,
// gather, scatterND, expand, pad, resize), in-place ops, error handling, the
// conv workspace bound, and bit-identical results across thread counts.
//
//===----------------------------------------------------------------------===//

#include "HostKernelsTest.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

using namespace memopt::rt;
using namespace memopt::rt::test;

namespace {

TEST_F(HostKernels, ReduceOverNonContiguousAxes) {
  Buffer x = random(DType::F32, {3, 4, 5}, 31);
  int axes[2] = {0, 2};
  for (ReduceOp op :
       {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::L2}) {
    Buffer y(DType::F32, {1, 4, 1});
    reduce(*ctx, "reduce", op, axes, 2, x.ref(), y.ref());
    std::vector<double> expected;
    for (int64_t j = 0; j < 4; ++j) {
      double acc = op == ReduceOp::Max ? -1e30 : 0;
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t k = 0; k < 5; ++k) {
          double v = x.at((i * 4 + j) * 5 + k);
          acc = op == ReduceOp::Max  ? std::max(acc, v)
                : op == ReduceOp::L2 ? acc + v * v
                                     : acc + v;
        }
      expected.push_back(op == ReduceOp::Mean ? acc / 15
                         : op == ReduceOp::L2 ? std::sqrt(acc)
                                              : acc);
    }
    expectClose(y, expected, 1e-5);
  }
  Buffer arg(DType::I64, {3, 5});
  argReduce(*ctx, "argmax", true, 1, x.ref(), arg.ref());
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t k = 0; k < 5; ++k) {
      int64_t best = 0;
      for (int64_t j = 1; j < 4; ++j)
        if (x.at((i * 4 + j) * 5 + k) > x.at((i * 4 + best) * 5 + k))
          best = j;
      EXPECT_EQ(arg.at(i * 5 + k), best);
    }
}

/// ONNX CumSum written from the definition: element (o, a, i) of the
/// [outer, axis, inner] view sums the elements j of its row with j <= a
/// (j >= a when reversed), j != a when exclusive. `add` accumulates.
template <typename T, typename Add>
std::vector<T> cumSumReference(const std::vector<T> &x, int64_t outer,
                               int64_t axis, int64_t inner, bool exclusive,
                               bool reverse, Add add) {
  std::vector<T> y(x.size(), T(0));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t a = 0; a < axis; ++a)
      for (int64_t i = 0; i < inner; ++i) {
        T sum = T(0);
        for (int64_t j = 0; j < axis; ++j)
          if ((reverse ? j >= a : j <= a) && !(exclusive && j == a))
            sum = add(sum, x[size_t((o * axis + j) * inner + i)]);
        y[size_t((o * axis + a) * inner + i)] = sum;
      }
  return y;
}

std::vector<int64_t> int64Values(const Buffer &b) {
  std::vector<int64_t> values(size_t(b.count()));
  std::memcpy(values.data(), b.storage.data(), values.size() * 8);
  return values;
}

TEST_F(HostKernels, CumSumFloatsOverTheMiddleAxis) {
  auto addDouble = [](double a, double b) { return a + b; };
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    Buffer x = random(dt, {3, 5, 4}, 40);
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true}) {
        SCOPED_TRACE(std::string(dtypeName(dt)) +
                     (exclusive ? " exclusive" : "") +
                     (reverse ? " reverse" : ""));
        Buffer y(dt, {3, 5, 4});
        cumSum(*ctx, "cumsum", 1, exclusive, reverse, x.ref(), y.ref());
        expectClose(
            y,
            cumSumReference(x.values(), 3, 5, 4, exclusive, reverse, addDouble),
            tolerance(dt));
      }
  }
  // In place over the last axis: each element is read before it is written.
  Buffer x = random(DType::F32, {2, 7}, 41);
  std::vector<double> expected =
      cumSumReference(x.values(), 2, 7, 1, true, true, addDouble);
  cumSum(*ctx, "cumsum_in_place", 1, true, true, x.ref(), x.ref());
  expectClose(x, expected, 1e-6);
}

TEST_F(HostKernels, CumSumIntegersAreExactAndWrap) {
  // Beyond 2^53 (where a double accumulator would round) and past INT64_MAX.
  const int64_t big = int64_t(1) << 62;
  std::vector<int64_t> values = {big, 1, big, big, 3,   -7, 1,   1,
                                 1,   0, -1,  5,   big, 9,  -2,  4,
                                 6,   8, 10,  12,  -3,  2,  big, 7};
  Buffer x(DType::I64, {2, 4, 3});
  fillInts(x, values);
  auto wrap = [](int64_t a, int64_t b) {
    return int64_t(uint64_t(a) + uint64_t(b));
  };
  for (bool exclusive : {false, true})
    for (bool reverse : {false, true}) {
      SCOPED_TRACE(std::string(exclusive ? "exclusive" : "inclusive") +
                   (reverse ? " reverse" : ""));
      Buffer y(DType::I64, {2, 4, 3});
      cumSum(*ctx, "cumsum_i64", 1, exclusive, reverse, x.ref(), y.ref());
      EXPECT_EQ(int64Values(y),
                cumSumReference(values, 2, 4, 3, exclusive, reverse, wrap));
    }
  // Position ids of a padding mask: cumsum(mask, -1) on i32.
  Buffer mask(DType::I32, {2, 5}), ids(DType::I32, {2, 5});
  fillInts(mask, {1, 1, 1, 0, 0, 0, 1, 1, 1, 1});
  cumSum(*ctx, "position_ids", 1, false, false, mask.ref(), ids.ref());
  expectClose(ids, {1, 2, 3, 3, 3, 0, 1, 2, 3, 4}, 0);
  // i32 wraps in 32 bits.
  Buffer edge(DType::I32, {2}), wrapped(DType::I32, {2});
  fillInts(edge, {2147483647, 1});
  cumSum(*ctx, "cumsum_i32", 0, false, false, edge.ref(), wrapped.ref());
  expectClose(wrapped, {2147483647.0, -2147483648.0}, 0);
}

TEST_F(HostKernels, CumSumRejectsBadArgumentsNamingTheNode) {
  Buffer flags(DType::Bool, {4}), out(DType::Bool, {4});
  cumSum(*ctx, "/model/CumSum", 0, false, false, flags.ref(), out.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx)).find("/model/CumSum"),
            std::string::npos);
  EXPECT_NE(std::string(contextError(*ctx)).find("bool"), std::string::npos);
  destroyContext(ctx);
  ctx = createContext();
  Buffer x(DType::F32, {2, 3}), y(DType::F32, {2, 3});
  cumSum(*ctx, "/model/CumSum_1", 2, false, false, x.ref(), y.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx)).find("axis 2 out of range"),
            std::string::npos);
  destroyContext(ctx);
  ctx = createContext();
}

TEST_F(HostKernels, TransposeConcatSplit) {
  Buffer x = random(DType::F16, {2, 3, 4}, 32), y(DType::F16, {4, 2, 3});
  int perm[3] = {2, 0, 1};
  transpose(*ctx, "transpose", perm, x.ref(), y.ref());
  for (int64_t i = 0; i < 24; ++i) {
    std::vector<int64_t> c = coordsOf(i, y.shape);
    EXPECT_EQ(y.at(i), x.at((c[1] * 3 + c[2]) * 4 + c[0]));
  }
  Buffer a = random(DType::I32, {2, 1, 3}, 33),
         b = random(DType::I32, {2, 2, 3}, 34);
  Buffer cat(DType::I32, {2, 3, 3});
  TensorRef parts[2] = {a.ref(), b.ref()};
  concat(*ctx, "concat", 1, parts, 2, cat.ref());
  for (int64_t i = 0; i < 18; ++i) {
    std::vector<int64_t> c = coordsOf(i, cat.shape);
    double expected = c[1] == 0 ? a.at(c[0] * 3 + c[2])
                                : b.at((c[0] * 2 + c[1] - 1) * 3 + c[2]);
    EXPECT_EQ(cat.at(i), expected);
  }
  Buffer a2(DType::I32, {2, 1, 3}), b2(DType::I32, {2, 2, 3});
  TensorRef outs[2] = {a2.ref(), b2.ref()};
  split(*ctx, "split", 1, cat.ref(), outs, 2);
  EXPECT_EQ(a2.storage, a.storage);
  EXPECT_EQ(b2.storage, b.storage);
}

TEST_F(HostKernels, SliceWithNegativeStep) {
  Buffer x = random(DType::F32, {4, 6}, 35), y(DType::F32, {2, 3});
  int64_t starts[2] = {1, 5}, steps[2] = {2, -2};
  slice(*ctx, "slice", starts, steps, x.ref(), y.ref());
  expectClose(y,
              {x.at(1 * 6 + 5), x.at(1 * 6 + 3), x.at(1 * 6 + 1),
               x.at(3 * 6 + 5), x.at(3 * 6 + 3), x.at(3 * 6 + 1)},
              0);
}

TEST_F(HostKernels, GatherNegativeIndicesAndGatherElements) {
  Buffer x = random(DType::F32, {2, 5, 3}, 36), idx(DType::I64, {2, 2});
  fillInts(idx, {0, -1, 3, -5});
  Buffer y(DType::F32, {2, 2, 2, 3});
  gather(*ctx, "gather", 1, x.ref(), idx.ref(), y.ref());
  int64_t wrapped[4] = {0, 4, 3, 0};
  for (int64_t i = 0; i < y.count(); ++i) {
    std::vector<int64_t> c = coordsOf(i, y.shape);
    EXPECT_EQ(y.at(i), x.at((c[0] * 5 + wrapped[c[1] * 2 + c[2]]) * 3 + c[3]));
  }
  Buffer eidx(DType::I32, {2, 2, 3}), ey(DType::F32, {2, 2, 3});
  fillInts(eidx, {4, 0, -1, 2, 2, 2, 1, 3, 0, 0, -2, 4});
  gatherElements(*ctx, "gather_elements", 1, x.ref(), eidx.ref(), ey.ref());
  for (int64_t i = 0; i < 12; ++i) {
    std::vector<int64_t> c = coordsOf(i, ey.shape);
    int64_t j = int64_t(eidx.at(i));
    j = j < 0 ? j + 5 : j;
    EXPECT_EQ(ey.at(i), x.at((c[0] * 5 + j) * 3 + c[2]));
  }
}

TEST_F(HostKernels, GatherOutOfRangeNamesTheNode) {
  Buffer x = random(DType::F32, {3}, 37), idx(DType::I64, {1}),
         y(DType::F32, {1});
  fillInts(idx, {3});
  gather(*ctx, "/embed/Gather", 0, x.ref(), idx.ref(), y.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx)).find("/embed/Gather"),
            std::string::npos);
  EXPECT_NE(std::string(contextError(*ctx)).find("out of range"),
            std::string::npos);
  destroyContext(ctx);
  ctx = createContext();
}

/// ScatterND reference written from the ONNX definition: copy, then apply
/// the tuples in order.
std::vector<double> scatterReference(const Buffer &data, const Buffer &indices,
                                     const Buffer &updates,
                                     ScatterReduction reduction) {
  std::vector<double> out = data.values();
  int64_t k = indices.shape.back();
  int64_t tuples = indices.count() / std::max<int64_t>(k, 1);
  int64_t slice = updates.count() / tuples;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t base = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t index = int64_t(indices.at(t * k + d));
      if (index < 0)
        index += data.shape[size_t(d)];
      int64_t stride = 1;
      for (size_t e = size_t(d) + 1; e < data.shape.size(); ++e)
        stride *= data.shape[e];
      base += index * stride;
    }
    for (int64_t j = 0; j < slice; ++j) {
      double &v = out[size_t(base + j)];
      double u = updates.at(t * slice + j);
      v = reduction == ScatterReduction::None  ? u
          : reduction == ScatterReduction::Add ? v + u
          : reduction == ScatterReduction::Mul ? v * u
          : reduction == ScatterReduction::Max ? std::max(v, u)
                                               : std::min(v, u);
    }
  }
  return out;
}

TEST_F(HostKernels, ScatterNDSlicesElementsAndReductions) {
  // Row slices (k = 1) with a negative index, f32.
  Buffer data = random(DType::F32, {5, 3}, 40), rows(DType::I64, {2, 1});
  fillInts(rows, {-1, 1});
  Buffer updates = random(DType::F32, {2, 3}, 41), y(DType::F32, {5, 3});
  scatterND(*ctx, "rows", ScatterReduction::None, data.ref(), rows.ref(),
            updates.ref(), y.ref());
  expectClose(y, scatterReference(data, rows, updates, ScatterReduction::None),
              0);
  // Single elements (k = 2), i32 indices, every reduction with a repeated
  // tuple: applied in order.
  for (ScatterReduction reduction :
       {ScatterReduction::Add, ScatterReduction::Mul, ScatterReduction::Max,
        ScatterReduction::Min}) {
    Buffer grid = random(DType::F64, {3, 4}, 42), at(DType::I32, {3, 2});
    fillInts(at, {2, 3, 0, -4, 2, 3});
    Buffer values = random(DType::F64, {3}, 43), out(DType::F64, {3, 4});
    scatterND(*ctx, "elements", reduction, grid.ref(), at.ref(), values.ref(),
              out.ref());
    SCOPED_TRACE(int(reduction));
    expectClose(out, scatterReference(grid, at, values, reduction), 1e-12);
  }
  // Integer reductions wrap like the integer type (u8: 250 + 10 = 4).
  Buffer bytes(DType::U8, {4}), at(DType::I64, {2, 1}), add(DType::U8, {2});
  fillInts(bytes, {250, 1, 2, 3});
  fillInts(at, {0, 3});
  fillInts(add, {10, 7});
  Buffer sum(DType::U8, {4});
  scatterND(*ctx, "wrap", ScatterReduction::Add, bytes.ref(), at.ref(),
            add.ref(), sum.ref());
  expectClose(sum, {4, 1, 2, 10}, 0);
}

TEST_F(HostKernels, ScatterNDInPlaceAndNoneWithRepeats) {
  // y is data (the planner's in-place case): no copy, the updates land on it.
  Buffer data(DType::I64, {2, 3}), at(DType::I64, {3, 1}),
      rows(DType::I64, {3, 3});
  fillInts(data, {1, 2, 3, 4, 5, 6});
  fillInts(at, {1, 0, 1});
  fillInts(rows, {10, 20, 30, 40, 50, 60, 70, 80, 90});
  scatterND(*ctx, "in_place", ScatterReduction::None, data.ref(), at.ref(),
            rows.ref(), data.ref());
  // Row 1 is written twice; the last update wins on the host.
  expectClose(data, {40, 50, 60, 70, 80, 90}, 0);
  // Bool data with reduction none (any dtype moves).
  Buffer mask(DType::Bool, {4}), one(DType::I64, {1, 1}), on(DType::Bool, {1});
  fillInts(one, {2});
  fillInts(on, {1});
  Buffer masked(DType::Bool, {4});
  scatterND(*ctx, "mask", ScatterReduction::None, mask.ref(), one.ref(),
            on.ref(), masked.ref());
  expectClose(masked, {0, 0, 1, 0}, 0);
}

TEST_F(HostKernels, ScatterNDErrorsNameTheNode) {
  struct Bad {
    const char *node, *message;
    std::function<void(Context &)> run;
  };
  Buffer data(DType::F32, {4}), at(DType::I64, {1, 1}), up(DType::F32, {1}),
      y(DType::F32, {4}), wide(DType::F32, {2}), flag(DType::Bool, {4}),
      flagUp(DType::Bool, {1});
  fillInts(at, {4});
  for (const Bad &bad : std::vector<Bad>{
           {"/mask/ScatterND", "index 4 out of range [-4, 4) on axis 0",
            [&](Context &c) {
              scatterND(c, "/mask/ScatterND", ScatterReduction::None,
                        data.ref(), at.ref(), up.ref(), y.ref());
            }},
           {"shape", "updates [2] must have shape indices[:-1] + data[k:]",
            [&](Context &c) {
              scatterND(c, "shape", ScatterReduction::None, data.ref(),
                        at.ref(), wide.ref(), y.ref());
            }},
           {"overlap", "indices and updates must not overlap the output",
            [&](Context &c) {
              TensorRef alias = y.ref();
              alias.rank = 1;
              alias.shape[0] = 1;
              scatterND(c, "overlap", ScatterReduction::None, data.ref(),
                        at.ref(), alias, y.ref());
            }},
           {"bool_add", "needs a numeric dtype, got bool", [&](Context &c) {
              scatterND(c, "bool_add", ScatterReduction::Add, flag.ref(),
                        at.ref(), flagUp.ref(), flag.ref());
            }}}) {
    bad.run(*ctx);
    ASSERT_NE(contextError(*ctx), nullptr) << bad.node;
    std::string error = contextError(*ctx);
    EXPECT_NE(error.find(bad.node), std::string::npos) << error;
    EXPECT_NE(error.find(bad.message), std::string::npos) << error;
    destroyContext(ctx);
    ctx = createContext();
  }
  // Nothing was written by the out-of-range call.
  expectClose(y, {0, 0, 0, 0}, 0);
}

TEST_F(HostKernels, ExpandAndFill) {
  Buffer x = random(DType::BF16, {3, 1}, 38), y(DType::BF16, {2, 3, 4});
  expand(*ctx, "expand", x.ref(), y.ref());
  for (int64_t i = 0; i < 24; ++i)
    EXPECT_EQ(y.at(i), x.at((i / 4) % 3));
  Buffer f(DType::I64, {5});
  fill(*ctx, "fill", -3, f.ref());
  expectClose(f, {-3, -3, -3, -3, -3}, 0);
}

TEST_F(HostKernels, PadModes) {
  Buffer x = random(DType::F32, {2, 4}, 39);
  int64_t begin[2] = {1, 2}, end[2] = {0, 3};
  for (PadMode mode : {PadMode::Constant, PadMode::Reflect, PadMode::Edge}) {
    Buffer y(DType::F32, {3, 9});
    pad(*ctx, "pad", mode, begin, end, 0.5, x.ref(), y.ref());
    for (int64_t i = 0; i < 27; ++i) {
      int64_t r = i / 9 - 1, c = i % 9 - 2;
      double expected;
      if (mode == PadMode::Constant) {
        expected = (r < 0 || c < 0 || c >= 4) ? 0.5 : x.at(r * 4 + c);
      } else if (mode == PadMode::Edge) {
        expected = x.at(std::clamp<int64_t>(r, 0, 1) * 4 +
                        std::clamp<int64_t>(c, 0, 3));
      } else {
        int64_t rr = r < 0 ? -r : r, cc = c < 0 ? -c : c >= 4 ? 6 - c : c;
        expected = x.at(rr * 4 + cc);
      }
      EXPECT_EQ(y.at(i), expected) << "mode " << int(mode) << " element " << i;
    }
  }
}

TEST_F(HostKernels, ResizeNearestAndLinear) {
  Buffer x = random(DType::F32, {1, 1, 3, 4}, 40);
  ResizeParams nearest;
  nearest.coordinateMode = CoordinateMode::Asymmetric;
  nearest.nearestMode = NearestMode::Floor;
  Buffer y(DType::F32, {1, 1, 6, 8});
  resize(*ctx, "resize_nearest", nearest, x.ref(), y.ref());
  for (int64_t i = 0; i < 48; ++i)
    EXPECT_EQ(y.at(i), x.at((i / 8 / 2) * 4 + (i % 8) / 2));

  for (CoordinateMode mode :
       {CoordinateMode::HalfPixel, CoordinateMode::AlignCorners,
        CoordinateMode::PytorchHalfPixel, CoordinateMode::Asymmetric}) {
    ResizeParams linear;
    linear.mode = ResizeMode::Linear;
    linear.coordinateMode = mode;
    Buffer z(DType::F32, {1, 1, 5, 7});
    resize(*ctx, "resize_linear", linear, x.ref(), z.ref());
    auto source = [&](int64_t o, int64_t in, int64_t out) {
      double s = double(out) / double(in), v;
      if (mode == CoordinateMode::HalfPixel ||
          mode == CoordinateMode::PytorchHalfPixel)
        v = (o + 0.5) / s - 0.5;
      else if (mode == CoordinateMode::AlignCorners)
        v = double(o) * double(in - 1) / double(out - 1);
      else
        v = o / s;
      return std::clamp(v, 0.0, double(in - 1));
    };
    std::vector<double> expected;
    for (int64_t oy = 0; oy < 5; ++oy)
      for (int64_t ox = 0; ox < 7; ++ox) {
        double sy = source(oy, 3, 5), sx = source(ox, 4, 7);
        int64_t y0 = int64_t(sy), x0 = int64_t(sx);
        int64_t y1 = std::min<int64_t>(y0 + 1, 2),
                x1 = std::min<int64_t>(x0 + 1, 3);
        double fy = sy - y0, fx = sx - x0;
        expected.push_back(
            (1 - fy) * ((1 - fx) * x.at(y0 * 4 + x0) + fx * x.at(y0 * 4 + x1)) +
            fy * ((1 - fx) * x.at(y1 * 4 + x0) + fx * x.at(y1 * 4 + x1)));
      }
    SCOPED_TRACE(int(mode));
    expectClose(z, expected, 1e-5);
  }
}

TEST_F(HostKernels, InPlaceElementwiseAndCopy) {
  Buffer x = random(DType::F32, {17}, 41);
  Buffer original = x;
  unary(*ctx, "neg", UnaryOp::Neg, 0, 0, x.ref(), x.ref());
  for (int64_t i = 0; i < 17; ++i)
    EXPECT_EQ(x.at(i), -original.at(i));
  Buffer y(DType::F32, {17});
  copy(*ctx, "copy", x.ref(), y.ref());
  EXPECT_EQ(y.storage, x.storage);
}

TEST_F(HostKernels, ErrorsNameTheNodeAndStopLaterOps) {
  Buffer a = random(DType::F32, {2, 3}, 42), b = random(DType::F32, {4}, 43);
  Buffer c(DType::F32, {2, 3});
  binary(*ctx, "/block/Add", BinaryOp::Add, a.ref(), b.ref(), c.ref());
  ASSERT_NE(contextError(*ctx), nullptr);
  std::string message = contextError(*ctx);
  EXPECT_NE(message.find("node '/block/Add'"), std::string::npos) << message;
  EXPECT_NE(message.find("[4]"), std::string::npos) << message;
  // The next op does nothing and the first error stays.
  Buffer d(DType::F32, {2, 3});
  fill(*ctx, "fill", 1.0, d.ref());
  EXPECT_EQ(d.at(0), 0.0);
  EXPECT_EQ(message, contextError(*ctx));

  destroyContext(ctx);
  ctx = createContext();
  Buffer w = random(DType::F32, {2, 3, 3, 3}, 44),
         x = random(DType::F32, {1, 3, 5, 5}, 45);
  Buffer wrong(DType::F32, {1, 2, 5, 5}); // no padding: expected 3x3
  conv(*ctx, "/stem/Conv", ConvParams(), x.ref(), w.ref(), nullptr, wrong.ref(),
       nullptr, 0);
  ASSERT_NE(contextError(*ctx), nullptr);
  EXPECT_NE(std::string(contextError(*ctx)).find("/stem/Conv"),
            std::string::npos);
  destroyContext(ctx);
  ctx = createContext();
}

TEST(ConvWorkspace, BoundIsDocumentedFormula) {
  TensorRef x, w, y;
  int64_t xs[4] = {1, 64, 56, 56}, ws[4] = {64, 64, 3, 3},
          ys[4] = {1, 64, 56, 56};
  x = makeTensor(nullptr, DType::F16, 4, xs);
  w = makeTensor(nullptr, DType::F16, 4, ws);
  y = makeTensor(nullptr, DType::F16, 4, ys);
  EXPECT_EQ(convWorkspaceBound(ConvParams(), x, w, y), size_t(1) << 20);
  int64_t big[4] = {8, 256, 128, 128};
  TensorRef bigX = makeTensor(nullptr, DType::F32, 4, big);
  EXPECT_EQ(convWorkspaceBound(ConvParams(), bigX, w, bigX), size_t(64) << 20);
  int64_t mid[4] = {1, 100, 100, 101};
  TensorRef midX = makeTensor(nullptr, DType::F32, 4, mid);
  size_t bound = convWorkspaceBound(ConvParams(), midX, w, midX);
  EXPECT_EQ(bound % 256, 0u);
  EXPECT_GE(bound, midX.bytes());
  EXPECT_LT(bound, midX.bytes() + 256);
}

/// A context whose ops use `threads` threads (the backend reads
/// MEMOPT_HOST_THREADS when the context is created).
Context *createContextWithThreads(int threads) {
  const char *previous = std::getenv("MEMOPT_HOST_THREADS");
  std::string saved = previous ? previous : "";
  setenv("MEMOPT_HOST_THREADS", std::to_string(threads).c_str(), 1);
  Context *context = createContext();
  if (previous)
    setenv("MEMOPT_HOST_THREADS", saved.c_str(), 1);
  else
    unsetenv("MEMOPT_HOST_THREADS");
  return context;
}

/// Direct N-D convolution (1-3 spatial dims) from the ONNX definition.
std::vector<double> referenceConv(const Buffer &x, const Buffer &w,
                                  const Buffer *bias, const ConvParams &p,
                                  const std::vector<int64_t> &yShape) {
  int rank = int(x.shape.size()) - 2;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, ker[3] = {1, 1, 1};
  for (int d = 0; d < rank; ++d) {
    in[d] = x.shape[size_t(2 + d)];
    out[d] = yShape[size_t(2 + d)];
    ker[d] = w.shape[size_t(2 + d)];
  }
  int64_t c = x.shape[1], m = w.shape[0], cg = c / p.group, mg = m / p.group;
  std::vector<double> y;
  for (int64_t b = 0; b < x.shape[0]; ++b)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t o0 = 0; o0 < out[0]; ++o0)
        for (int64_t o1 = 0; o1 < out[1]; ++o1)
          for (int64_t o2 = 0; o2 < out[2]; ++o2) {
            double acc = bias ? bias->at(o) : 0;
            int64_t oc[3] = {o0, o1, o2};
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t k = 0; k < ker[0] * ker[1] * ker[2]; ++k) {
                int64_t kc[3] = {k / (ker[1] * ker[2]), k / ker[2] % ker[1],
                                 k % ker[2]};
                int64_t ic[3];
                bool inside = true;
                for (int d = 0; d < 3; ++d) {
                  ic[d] = d < rank ? oc[d] * p.strides[d] - p.padsBegin[d] +
                                         kc[d] * p.dilations[d]
                                   : 0;
                  inside = inside && ic[d] >= 0 && ic[d] < in[d];
                }
                if (!inside)
                  continue;
                int64_t xi = (b * c + o / mg * cg + ci) * in[0] + ic[0];
                xi = (xi * in[1] + ic[1]) * in[2] + ic[2];
                acc += x.at(xi) *
                       w.at((o * cg + ci) * ker[0] * ker[1] * ker[2] + k);
              }
            y.push_back(p.activation == Activation::Relu ? std::max(acc, 0.0)
                                                         : acc);
          }
  return y;
}

/// The large kernels split their work over threads; every output element
/// must still be computed by one thread in one order, so 1 and 3 threads give
/// the same bits. The shapes are large enough to be split (several row and
/// column blocks, k past one packed block of 256) and divide by neither the
/// thread count nor the blocking; the 1-thread results are also checked
/// against the direct loops. Convs: a grouped one with few channels per
/// group (direct loops), a 2-D and a 3-D one with many (implicit GEMM).
TEST_F(HostKernels, ParallelKernelsAreBitIdenticalAcrossThreadCounts) {
  Buffer a = random(DType::F32, {2, 70, 300}, 60),
         b = random(DType::F32, {300, 301}, 61),
         rowBias = random(DType::F32, {301}, 62);
  Buffer aT = random(DType::F32, {2, 300, 70}, 63),
         bT = random(DType::F32, {2, 301, 300}, 64),
         fullBias = random(DType::F32, {2, 70, 301}, 65);
  ConvParams convP;
  convP.group = 2;
  convP.strides[0] = 2;
  convP.dilations[1] = 2;
  convP.padsBegin[0] = convP.padsEnd[0] = 1;
  convP.padsBegin[1] = 2;
  convP.activation = Activation::Relu;
  // H: (24 + 2 - 3) / 2 + 1 = 12; W: (20 + 2 - 5) + 1 = 18.
  Buffer x = random(DType::F32, {2, 8, 24, 20}, 66),
         w = random(DType::F32, {10, 4, 3, 3}, 67),
         convBias = random(DType::F32, {10}, 68);
  // Groups of 10 output channels and 32 x 3 x 3 = 288 taps (two slices of
  // the GEMM's k); H: (13 + 2 - 3) / 2 + 1 = 7, W: 9.
  Buffer gx = random(DType::F32, {2, 64, 13, 11}, 77),
         gw = random(DType::F32, {20, 32, 3, 3}, 78);
  ConvParams p3;
  p3.spatialRank = 3;
  p3.strides[1] = 2;
  p3.dilations[2] = 2;
  p3.padsBegin[0] = p3.padsEnd[2] = 1;
  p3.padsBegin[2] = 2;
  // [5, 9, 10] -> [(5 + 1 - 2) + 1, (9 - 3) / 2 + 1, (10 + 3 - 5) + 1].
  Buffer x3 = random(DType::F32, {1, 6, 5, 9, 10}, 79),
         w3 = random(DType::F32, {9, 6, 2, 3, 3}, 80);
  ConvParams transP;
  transP.strides[0] = transP.strides[1] = 2;
  transP.padsBegin[0] = transP.padsEnd[0] = 1;
  transP.padsBegin[1] = transP.padsEnd[1] = 1;
  transP.outputPadding[0] = transP.outputPadding[1] = 1;
  // out = 2 * (16 - 1) + 3 - 2 + 1 = 32.
  Buffer tx = random(DType::F32, {2, 8, 16, 16}, 69),
         tw = random(DType::F32, {8, 12, 3, 3}, 70);
  Buffer q = random(DType::F32, {2, 3, 70, 16}, 71),
         k = random(DType::F32, {2, 1, 50, 16}, 72),
         kT = random(DType::F32, {2, 3, 16, 70}, 73),
         v = random(DType::F32, {2, 3, 50, 12}, 74),
         vLong = random(DType::F32, {2, 3, 70, 12}, 75),
         attnBias = random(DType::F32, {3, 1, 50}, 76);

  std::vector<std::vector<Buffer>> runs;
  for (int threads : {1, 3}) {
    Context *context = createContextWithThreads(threads);
    std::vector<Buffer> out;
    MatmulParams mp;
    mp.activation = Activation::Gelu;
    TensorRef rowRef = rowBias.ref();
    out.emplace_back(DType::F32, std::vector<int64_t>{2, 70, 301});
    matmul(*context, "matmul", mp, a.ref(), b.ref(), &rowRef, out.back().ref());
    MatmulParams gemm;
    gemm.transA = gemm.transB = true;
    gemm.alpha = 0.5f;
    gemm.beta = 2.0f;
    TensorRef fullRef = fullBias.ref();
    out.emplace_back(DType::F32, std::vector<int64_t>{2, 70, 301});
    matmul(*context, "gemm", gemm, aT.ref(), bT.ref(), &fullRef,
           out.back().ref());
    TensorRef convBiasRef = convBias.ref();
    out.emplace_back(DType::F32, std::vector<int64_t>{2, 10, 12, 18});
    conv(*context, "conv", convP, x.ref(), w.ref(), &convBiasRef,
         out.back().ref(), nullptr, 0);
    out.emplace_back(DType::F32, std::vector<int64_t>{2, 20, 7, 9});
    conv(*context, "conv_gemm", convP, gx.ref(), gw.ref(), nullptr,
         out.back().ref(), nullptr, 0);
    out.emplace_back(DType::F32, std::vector<int64_t>{1, 9, 5, 4, 9});
    conv(*context, "conv3d", p3, x3.ref(), w3.ref(), nullptr, out.back().ref(),
         nullptr, 0);
    out.emplace_back(DType::F32, std::vector<int64_t>{2, 12, 32, 32});
    convTranspose(*context, "convT", transP, tx.ref(), tw.ref(), nullptr,
                  out.back().ref(), nullptr, 0);
    AttentionParams ap;
    ap.scale = 0.25f;
    TensorRef attnBiasRef = attnBias.ref();
    out.emplace_back(DType::F32, std::vector<int64_t>{2, 3, 70, 12});
    attention(*context, "attention", ap, q.ref(), k.ref(), v.ref(),
              &attnBiasRef, out.back().ref());
    ap.causal = ap.keyTransposed = true;
    out.emplace_back(DType::F32, std::vector<int64_t>{2, 3, 70, 12});
    attention(*context, "causal", ap, q.ref(), kT.ref(), vLong.ref(), nullptr,
              out.back().ref());
    EXPECT_EQ(contextError(*context), nullptr) << contextError(*context);
    destroyContext(context);
    runs.push_back(std::move(out));
  }
  for (size_t i = 0; i < runs[0].size(); ++i)
    EXPECT_EQ(runs[0][i].storage, runs[1][i].storage)
        << "kernel " << i << " differs between 1 and 3 threads";

  std::vector<double> expectedMatmul, expectedGemm;
  for (int64_t batch = 0; batch < 2; ++batch)
    for (int64_t i = 0; i < 70; ++i)
      for (int64_t j = 0; j < 301; ++j) {
        double acc = 0, accT = 0;
        for (int64_t p = 0; p < 300; ++p) {
          acc += a.at((batch * 70 + i) * 300 + p) * b.at(p * 301 + j);
          accT += aT.at((batch * 300 + p) * 70 + i) *
                  bT.at((batch * 301 + j) * 300 + p);
        }
        acc += rowBias.at(j);
        expectedMatmul.push_back(0.5 * acc *
                                 (1 + std::erf(acc / std::sqrt(2.0))));
        expectedGemm.push_back(0.5 * accT +
                               2.0 * fullBias.at((batch * 70 + i) * 301 + j));
      }
  expectClose(runs[0][0], expectedMatmul, 1e-5);
  expectClose(runs[0][1], expectedGemm, 1e-5);
  expectClose(runs[0][2],
              referenceConv2d(x, w, &convBias, convP, runs[0][2].shape), 1e-5);
  AttentionParams ap;
  ap.scale = 0.25f;
  expectClose(runs[0][3],
              referenceConv(gx, gw, nullptr, convP, runs[0][3].shape), 1e-5);
  expectClose(runs[0][4], referenceConv(x3, w3, nullptr, p3, runs[0][4].shape),
              1e-5);
  expectClose(runs[0][6],
              referenceAttention(q, k, v, &attnBias, ap, runs[0][6].shape),
              1e-5);
  ap.causal = ap.keyTransposed = true;
  expectClose(runs[0][7],
              referenceAttention(q, kT, vLong, nullptr, ap, runs[0][7].shape),
              1e-5);
}

} // namespace
