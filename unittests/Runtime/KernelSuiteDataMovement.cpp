//===- KernelSuiteDataMovement.cpp - the suite's data-movement cases ------===//
//
// The kernel suite's data-movement cases: transpose, slice, gather,
// scatter, pad, resize, concat, split and the strided copy paths.
//
//===----------------------------------------------------------------------===//

#include "KernelSuite.h"

namespace memopt::rt::suite {

void addDataMovementCases(std::vector<Case> &cases) {
  // Data movement.
  cases.push_back({"transpose_nchw_nhwc_f16", 0, [](Suite &s) {
                     TensorRef x = s.random(DType::F16, {2, 16, 9, 7});
                     TensorRef y = s.empty(DType::F16, {2, 9, 7, 16});
                     int perm[4] = {0, 2, 3, 1};
                     transpose(*s.ctx, "transpose", perm, x, y);
                     return std::vector<TensorRef>{y};
                   }});
  cases.push_back(
      {"transpose_nhwc_nchw_i64_odd", 0, [](Suite &s) {
         TensorRef x = s.random(DType::I64, {3, 37, 5, 45}, 1, 1000);
         TensorRef y = s.empty(DType::I64, {3, 45, 37, 5});
         int perm[4] = {0, 3, 1, 2};
         transpose(*s.ctx, "transpose", perm, x, y);
         return std::vector<TensorRef>{y};
       }});
  cases.push_back({"transpose_2d_and_middle_u8", 0, [](Suite &s) {
                     TensorRef x = s.random(DType::U8, {70, 33}, 1, 200, true);
                     TensorRef y = s.empty(DType::U8, {33, 70});
                     int perm2[2] = {1, 0};
                     transpose(*s.ctx, "transpose2d", perm2, x, y);
                     TensorRef z = s.random(DType::F32, {2, 5, 3, 7});
                     TensorRef w = s.empty(DType::F32, {2, 3, 5, 7});
                     int perm4[4] = {0, 2, 1, 3};
                     transpose(*s.ctx, "transpose_mid", perm4, z, w);
                     return std::vector<TensorRef>{y, w};
                   }});
  // The copy paths of transpose / slice (Kernels.cu launchStridedCopy):
  // inner runs kept (Swin's window partition, head transposes) in 16- and
  // 8-byte vectors, a tiled transpose with batch dims on both sides of the
  // moved contiguous dim, and slices of whole, offset and reversed rows.
  cases.push_back({"transpose_window_partition_f16", 0, [](Suite &s) {
                     TensorRef x = s.random(DType::F16, {2, 3, 7, 4, 7, 12});
                     TensorRef y = s.empty(DType::F16, {2, 3, 4, 7, 7, 12});
                     TensorRef z = s.random(DType::F16, {2, 2, 7, 3, 7, 16});
                     TensorRef w = s.empty(DType::F16, {2, 2, 3, 7, 7, 16});
                     int perm[6] = {0, 1, 3, 2, 4, 5};
                     transpose(*s.ctx, "partition12", perm, x, y);
                     transpose(*s.ctx, "partition16", perm, z, w);
                     return std::vector<TensorRef>{y, w};
                   }});
  cases.push_back({"transpose_heads_f32_bf16", 0, [](Suite &s) {
                     TensorRef x = s.random(DType::F32, {2, 5, 3, 4, 8});
                     TensorRef y = s.empty(DType::F32, {3, 2, 4, 5, 8});
                     int perm[5] = {2, 0, 3, 1, 4};
                     transpose(*s.ctx, "qkv_heads", perm, x, y);
                     TensorRef a = s.random(DType::BF16, {3, 9, 4, 6});
                     TensorRef b = s.empty(DType::BF16, {3, 4, 9, 6});
                     int perm2[4] = {0, 2, 1, 3};
                     transpose(*s.ctx, "heads_odd", perm2, a, b);
                     return std::vector<TensorRef>{y, b};
                   }});
  cases.push_back(
      {"transpose_tiled_batch_dims", 0, [](Suite &s) {
         TensorRef x = s.random(DType::F32, {3, 5, 6, 37});
         TensorRef y = s.empty(DType::F32, {37, 5, 3, 6});
         int perm[4] = {3, 1, 0, 2};
         transpose(*s.ctx, "tiled_f32", perm, x, y);
         TensorRef a = s.random(DType::U8, {4, 33, 2, 9}, 1, 200, true);
         TensorRef b = s.empty(DType::U8, {2, 9, 4, 33});
         int perm2[4] = {2, 3, 0, 1};
         transpose(*s.ctx, "tiled_u8", perm2, a, b);
         TensorRef c = s.random(DType::I64, {6, 40, 3}, 1, 1000);
         TensorRef d = s.empty(DType::I64, {3, 6, 40});
         int perm3[3] = {2, 0, 1};
         transpose(*s.ctx, "tiled_i64", perm3, c, d);
         return std::vector<TensorRef>{y, b, d};
       }});
  cases.push_back({"slice_rows_vectorized", 0, [](Suite &s) {
                     TensorRef x = s.random(DType::F16, {4, 10, 24});
                     TensorRef y = s.empty(DType::F16, {2, 6, 24});
                     int64_t starts[3] = {1, 2, 0}, steps[3] = {1, 1, 1};
                     slice(*s.ctx, "whole_rows", starts, steps, x, y);
                     TensorRef a = s.empty(DType::F16, {4, 10, 16});
                     int64_t starts2[3] = {0, 0, 3};
                     slice(*s.ctx, "offset_rows", starts2, steps, x, a);
                     TensorRef b = s.empty(DType::F16, {4, 10, 20});
                     int64_t starts3[3] = {0, 0, 2};
                     slice(*s.ctx, "offset_rows_4b", starts3, steps, x, b);
                     TensorRef c = s.empty(DType::F16, {3, 5, 24});
                     int64_t starts4[3] = {3, 9, 0}, steps4[3] = {-1, -2, 1};
                     slice(*s.ctx, "reversed_rows", starts4, steps4, x, c);
                     TensorRef d = s.empty(DType::F16, {1, 10, 24});
                     int64_t starts5[3] = {2, 0, 0};
                     slice(*s.ctx, "one_block", starts5, steps, x, d);
                     return std::vector<TensorRef>{y, a, b, c, d};
                   }});
  cases.push_back({"gather_rows_vectorized", 0, [](Suite &s) {
                     TensorRef x = s.random(DType::F32, {3, 10, 12});
                     TensorRef idx = s.ints(DType::I64, {4}, {9, 0, -1, 4});
                     TensorRef y = s.empty(DType::F32, {3, 4, 12});
                     gather(*s.ctx, "gather_axis1", 1, x, idx, y);
                     TensorRef t = s.random(DType::F16, {50, 6});
                     TensorRef i2 = s.ints(DType::I32, {3}, {7, 49, 0});
                     TensorRef z = s.empty(DType::F16, {3, 6});
                     gather(*s.ctx, "gather_f16_rows", 0, t, i2, z);
                     return std::vector<TensorRef>{y, z};
                   }});
  cases.push_back({"slice_steps", 0, [](Suite &s) {
                     TensorRef x = s.random(DType::F32, {9, 20, 6});
                     TensorRef y = s.empty(DType::F32, {4, 7, 6});
                     int64_t starts[3] = {1, 19, 0}, steps[3] = {2, -3, 1};
                     slice(*s.ctx, "slice", starts, steps, x, y);
                     return std::vector<TensorRef>{y};
                   }});
  cases.push_back({"gather_embedding", 0, [](Suite &s) {
                     TensorRef table = s.random(DType::BF16, {1000, 64});
                     TensorRef idx = s.ints(DType::I64, {2, 3},
                                            {0, 999, -1, 17, -1000, 500});
                     TensorRef y = s.empty(DType::BF16, {2, 3, 64});
                     gather(*s.ctx, "gather", 0, table, idx, y);
                     return std::vector<TensorRef>{y};
                   }});
  cases.push_back({"gather_elements", 0, [](Suite &s) {
                     TensorRef x = s.random(DType::F32, {3, 5, 4});
                     std::vector<double> idx;
                     for (int i = 0; i < 3 * 2 * 4; ++i)
                       idx.push_back(double((i * 7) % 10 - 5));
                     TensorRef ind = s.ints(DType::I32, {3, 2, 4}, idx);
                     TensorRef y = s.empty(DType::F32, {3, 2, 4});
                     gatherElements(*s.ctx, "gather_elements", 1, x, ind, y);
                     return std::vector<TensorRef>{y};
                   }});
  // ScatterND: distinct row tuples (k = 2 of rank 3, some negative) for
  // "none"; repeated tuples for the reductions, which must apply every
  // update (CUDA: atomics on 8-, 4-, 2- and 1-byte elements, the last two
  // through the enclosing 32-bit word); u8 in place, wrapping.
  cases.push_back({"scatter_nd_none_rows_f32", 0, [](Suite &s) {
                     TensorRef data = s.random(DType::F32, {50, 33, 7});
                     std::vector<double> idx;
                     for (int t = 0; t < 40; ++t) {
                       idx.push_back(t % 2 ? t : t - 50);
                       idx.push_back((t * 5) % 33);
                     }
                     TensorRef ind = s.ints(DType::I64, {40, 2}, idx);
                     TensorRef up = s.random(DType::F32, {40, 7});
                     TensorRef y = s.empty(DType::F32, {50, 33, 7});
                     scatterND(*s.ctx, "scatter_none", ScatterReduction::None,
                               data, ind, up, y);
                     return std::vector<TensorRef>{y};
                   }});
  struct S {
    const char *name;
    DType dtype, indexType;
    ScatterReduction reduction;
    double tolerance;
  };
  for (S c : {S{"add_f32", DType::F32, DType::I64, ScatterReduction::Add, 1e-5},
              S{"mul_f16", DType::F16, DType::I32, ScatterReduction::Mul, 1e-2},
              S{"max_bf16", DType::BF16, DType::I64, ScatterReduction::Max, 0},
              S{"min_f64", DType::F64, DType::I64, ScatterReduction::Min, 0},
              S{"add_i64", DType::I64, DType::I32, ScatterReduction::Add, 0},
              S{"max_i32", DType::I32, DType::I64, ScatterReduction::Max, 0},
              S{"mul_i8", DType::I8, DType::I64, ScatterReduction::Mul, 0}})
    cases.push_back(
        {std::string("scatter_nd_") + c.name + "_repeated", c.tolerance,
         [=](Suite &s) {
           bool isInt = c.dtype == DType::I64 || c.dtype == DType::I32 ||
                        c.dtype == DType::I8;
           std::vector<double> values, idx;
           for (int i = 0; i < 999; ++i)
             values.push_back(isInt ? (i * 37) % 11 - 5 : 0.5 + (i % 7) * 0.25);
           TensorRef data = s.upload(c.dtype, {999}, values);
           // 3000 tuples over 999 elements: each is hit about 3 times.
           for (int t = 0; t < 3000; ++t)
             idx.push_back((t * 7919) % 999 - (t % 3 ? 0 : 999));
           TensorRef ind = s.ints(c.indexType, {3000, 1}, idx);
           std::vector<double> ups;
           for (int t = 0; t < 3000; ++t)
             ups.push_back(isInt ? (t * 13) % 7 - 3 : 0.75 + (t % 5) * 0.125);
           TensorRef up = s.upload(c.dtype, {3000}, ups);
           TensorRef y = s.empty(c.dtype, {999});
           scatterND(*s.ctx, c.name, c.reduction, data, ind, up, y);
           return std::vector<TensorRef>{y};
         }});
  cases.push_back({"scatter_nd_add_u8_in_place", 0, [](Suite &s) {
                     std::vector<double> values, idx, ups;
                     for (int i = 0; i < 301; ++i)
                       values.push_back(200 + i % 50);
                     TensorRef data = s.upload(DType::U8, {301}, values);
                     for (int t = 0; t < 903; ++t) {
                       idx.push_back((t * 101) % 301);
                       ups.push_back(20 + t % 30);
                     }
                     TensorRef ind = s.ints(DType::I64, {903, 1}, idx);
                     TensorRef up = s.upload(DType::U8, {903}, ups);
                     scatterND(*s.ctx, "scatter_u8", ScatterReduction::Add,
                               data, ind, up, data);
                     return std::vector<TensorRef>{data};
                   }});
  for (PadMode mode : {PadMode::Constant, PadMode::Reflect, PadMode::Edge})
    cases.push_back({"pad_mode" + std::to_string(int(mode)), 0, [=](Suite &s) {
                       TensorRef x = s.random(DType::F32, {2, 3, 5, 6});
                       TensorRef y = s.empty(DType::F32, {2, 3, 8, 10});
                       int64_t begin[4] = {0, 0, 2, 1}, end[4] = {0, 0, 1, 3};
                       pad(*s.ctx, "pad", mode, begin, end, -0.25, x, y);
                       return std::vector<TensorRef>{y};
                     }});
  for (CoordinateMode cm :
       {CoordinateMode::HalfPixel, CoordinateMode::AlignCorners,
        CoordinateMode::Asymmetric, CoordinateMode::PytorchHalfPixel})
    for (ResizeMode rm : {ResizeMode::Nearest, ResizeMode::Linear})
      cases.push_back(
          {"resize_" + std::to_string(int(rm)) + "_" + std::to_string(int(cm)),
           1e-5, [=](Suite &s) {
             TensorRef x = s.random(DType::F32, {2, 3, 7, 9});
             TensorRef y = s.empty(DType::F32, {2, 3, 15, 13});
             ResizeParams p;
             p.mode = rm;
             p.coordinateMode = cm;
             resize(*s.ctx, "resize", p, x, y);
             return std::vector<TensorRef>{y};
           }});
  cases.push_back({"concat_split", 0, [](Suite &s) {
                     TensorRef a = s.random(DType::F16, {2, 3, 5}),
                               b = s.random(DType::F16, {2, 7, 5});
                     TensorRef c = s.random(DType::F16, {2, 1, 5});
                     TensorRef y = s.empty(DType::F16, {2, 11, 5});
                     TensorRef parts[3] = {a, b, c};
                     concat(*s.ctx, "concat", 1, parts, 3, y);
                     TensorRef p0 = s.empty(DType::F16, {2, 4, 5}),
                               p1 = s.empty(DType::F16, {2, 7, 5});
                     TensorRef outs[2] = {p0, p1};
                     split(*s.ctx, "split", 1, y, outs, 2);
                     return std::vector<TensorRef>{y, p0, p1};
                   }});
}

} // namespace memopt::rt::suite
