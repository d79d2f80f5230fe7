//===- KernelSuiteMatmulConv.cpp - matrix products, convolutions, pooling -===//
//
// The kernel suite's cases of matrix products, convolutions (NCHW,
// channels-last, TF32) and pooling.
//
//===----------------------------------------------------------------------===//

#include "KernelSuite.h"

#include <algorithm>

namespace memopt::rt::suite {

const std::vector<ConvCase> &convCases() {
  static const std::vector<ConvCase> convs = {
      {"3x3_bias_relu",
       {2, 16, 19, 19},
       {32, 16, 3, 3},
       {2, 32, 19, 19},
       2,
       1,
       1,
       1,
       1,
       1,
       false,
       true,
       Activation::Relu},
      {"s2_g4_d2",
       {1, 16, 21, 21},
       {32, 4, 3, 3},
       {1, 32, 10, 10},
       2,
       4,
       2,
       2,
       1,
       1,
       false,
       false,
       Activation::None},
      {"depthwise",
       {2, 24, 15, 15},
       {24, 1, 3, 3},
       {2, 24, 15, 15},
       2,
       24,
       1,
       1,
       1,
       1,
       false,
       true,
       Activation::None},
      {"pointwise",
       {2, 40, 7, 7},
       {24, 40, 1, 1},
       {2, 24, 7, 7},
       2,
       1,
       1,
       1,
       0,
       0,
       false,
       true,
       Activation::None},
      {"asym_pads",
       {1, 8, 10, 10},
       {8, 8, 3, 3},
       {1, 8, 5, 5},
       2,
       1,
       2,
       1,
       0,
       1,
       false,
       true,
       Activation::Relu},
      {"conv1d",
       {2, 12, 50},
       {16, 12, 5},
       {2, 16, 50},
       1,
       1,
       1,
       1,
       2,
       2,
       false,
       true,
       Activation::None},
      {"conv3d",
       {1, 4, 6, 7, 8},
       {8, 4, 3, 3, 3},
       {1, 8, 6, 7, 8},
       3,
       1,
       1,
       1,
       1,
       1,
       false,
       false,
       Activation::None},
      // MobileNetV3-Large's last pointwise conv at batch 32 (in f16 an
      // H100's cuDNN 9 returned BAD_PARAM for the algorithm its search chose
      // first; the plan then falls back to the next one).
      {"pointwise_672_160_b32",
       {32, 672, 7, 7},
       {160, 672, 1, 1},
       {32, 160, 7, 7},
       2,
       1,
       1,
       1,
       0,
       0,
       false,
       false,
       Activation::None},
      {"transpose_s2",
       {2, 16, 7, 7},
       {16, 8, 3, 3},
       {2, 8, 13, 13},
       2,
       1,
       2,
       1,
       1,
       1,
       true,
       true,
       Activation::None},
  };
  return convs;
}

void addMatmulCases(std::vector<Case> &cases) {
  const DType floats[3] = {DType::F32, DType::F16, DType::BF16};
  // Matrix products.
  for (DType dt : floats) {
    cases.push_back(
        {std::string("matmul_plain_") + tag(dt), tol(dt, 1e-3), [=](Suite &s) {
           TensorRef a = s.random(dt, {64, 96}), b = s.random(dt, {96, 80});
           TensorRef c = s.empty(dt, {64, 80});
           matmul(*s.ctx, "mm", MatmulParams(), a, b, nullptr, c);
           return std::vector<TensorRef>{c};
         }});
    // An odd N (a row is not whole 16-byte vectors, GPT-2's vocabulary)
    // with a bias and relu, through a planned workspace.
    cases.push_back(
        {std::string("gemm_odd_rows_") + tag(dt), tol(dt, 1e-3), [=](Suite &s) {
           TensorRef a = s.random(dt, {300, 64}), b = s.random(dt, {1003, 64});
           TensorRef bias = s.random(dt, {1003});
           TensorRef c = s.empty(dt, {300, 1003});
           MatmulParams p;
           p.transB = true;
           p.activation = Activation::Relu;
           size_t ws = size_t(4) << 20;
           TensorRef workspace = s.empty(DType::U8, {int64_t(ws)});
           setMatmulWorkspace(*s.ctx, workspace.data, ws);
           matmul(*s.ctx, "gemm_odd", p, a, b, &bias, c);
           return std::vector<TensorRef>{c};
         }});
    cases.push_back(
        {std::string("matmul_batched_") + tag(dt), tol(dt, 1e-3),
         [=](Suite &s) {
           TensorRef a = s.random(dt, {3, 33, 65}), b = s.random(dt, {65, 17});
           TensorRef c = s.empty(dt, {3, 33, 17});
           matmul(*s.ctx, "bmm", MatmulParams(), a, b, nullptr, c);
           return std::vector<TensorRef>{c};
         }});
    cases.push_back(
        {std::string("matmul_bcast_") + tag(dt), tol(dt, 1e-3), [=](Suite &s) {
           TensorRef a = s.random(dt, {2, 1, 16, 24}),
                     b = s.random(dt, {1, 3, 24, 8});
           TensorRef c = s.empty(dt, {2, 3, 16, 8});
           matmul(*s.ctx, "bmm_bcast", MatmulParams(), a, b, nullptr, c);
           return std::vector<TensorRef>{c};
         }});
    cases.push_back(
        {std::string("gemm_trans_bias_relu_") + tag(dt), tol(dt, 1e-3),
         [=](Suite &s) {
           TensorRef a = s.random(dt, {40, 24}), b = s.random(dt, {56, 40});
           TensorRef bias = s.random(dt, {56});
           TensorRef c = s.empty(dt, {24, 56});
           MatmulParams p;
           p.transA = p.transB = true;
           p.alpha = 0.5f;
           p.activation = Activation::Relu;
           matmul(*s.ctx, "gemm", p, a, b, &bias, c);
           return std::vector<TensorRef>{c};
         }});
    cases.push_back(
        {std::string("gemm_colbias_beta_gelu_") + tag(dt), tol(dt, 1e-3),
         [=](Suite &s) {
           TensorRef a = s.random(dt, {24, 40}), b = s.random(dt, {40, 56});
           TensorRef bias = s.random(dt, {24, 1});
           TensorRef c = s.empty(dt, {24, 56});
           MatmulParams p;
           p.beta = 0.5f;
           p.activation = Activation::Gelu;
           matmul(*s.ctx, "gemm2", p, a, b, &bias, c);
           return std::vector<TensorRef>{c};
         }});
    cases.push_back(
        {std::string("matmul_bias_gelutanh_") + tag(dt), tol(dt, 1e-3),
         [=](Suite &s) {
           TensorRef a = s.random(dt, {2, 24, 40}), b = s.random(dt, {40, 64});
           TensorRef bias = s.random(dt, {64});
           TensorRef c = s.empty(dt, {2, 24, 64});
           MatmulParams p;
           p.activation = Activation::GeluTanh;
           matmul(*s.ctx, "mm_gelu", p, a, b, &bias, c);
           return std::vector<TensorRef>{c};
         }});
  }
  // f16 / bf16 operands storing an f32 result (mixed precision's outputs):
  // strided batch and the fused row bias, both f32 on the output side.
  for (DType dt : {DType::F16, DType::BF16})
    cases.push_back(
        {std::string("matmul_f32_output_") + tag(dt), 1e-3, [=](Suite &s) {
           TensorRef a = s.random(dt, {3, 33, 64}), b = s.random(dt, {64, 40});
           TensorRef bias = s.random(DType::F32, {40});
           TensorRef c = s.empty(DType::F32, {3, 33, 40});
           matmul(*s.ctx, "mm_f32_out", MatmulParams(), a, b, &bias, c);
           return std::vector<TensorRef>{c};
         }});
}

void addConvCases(std::vector<Case> &cases) {
  const DType floats[3] = {DType::F32, DType::F16, DType::BF16};
  const std::vector<ConvCase> &convs = convCases();
  for (DType dt : floats)
    for (const ConvCase &v : convs) {
      if (dt != DType::F32 && (v.spatial == 3 || v.transposed))
        continue;
      cases.push_back(
          {std::string("conv_") + v.name + "_" + tag(dt), tol(dt, 1e-3),
           [=](Suite &s) {
             TensorRef x = s.random(dt, v.x), w = s.random(dt, v.w, 0.05, 0.5);
             TensorRef bias = s.random(dt, {v.y[1]});
             TensorRef y = s.empty(dt, v.y);
             ConvParams p;
             p.spatialRank = v.spatial;
             p.group = v.group;
             p.activation = v.act;
             for (int i = 0; i < v.spatial; ++i) {
               p.strides[i] = v.stride;
               p.dilations[i] = v.dilation;
               p.padsBegin[i] = v.padBegin;
               p.padsEnd[i] = v.padEnd;
             }
             size_t ws = convWorkspaceBound(p, x, w, y);
             TensorRef workspace = s.empty(DType::U8, {int64_t(ws)});
             if (v.transposed)
               convTranspose(*s.ctx, "convT", p, x, w, v.bias ? &bias : nullptr,
                             y, workspace.data, ws);
             else
               conv(*s.ctx, "conv", p, x, w, v.bias ? &bias : nullptr, y,
                    workspace.data, ws);
             return std::vector<TensorRef>{y};
           }});
    }

  // Channels-last (memopt-layout): the same convolutions on NHWC tensors
  // and KRSC filters, the residual convolution (separate and in place, the
  // planner's usual choice for ResNet's shortcut) in both layouts, and TF32.
  auto last = [](std::vector<int64_t> shape) {
    std::rotate(shape.begin() + 1, shape.begin() + 2, shape.end());
    return shape;
  };
  auto convParams = [](const ConvCase &v) {
    ConvParams p;
    p.spatialRank = v.spatial;
    p.group = v.group;
    p.activation = v.act;
    for (int i = 0; i < v.spatial; ++i) {
      p.strides[i] = v.stride;
      p.dilations[i] = v.dilation;
      p.padsBegin[i] = v.padBegin;
      p.padsEnd[i] = v.padEnd;
    }
    return p;
  };
  for (DType dt : floats)
    for (const ConvCase &v : convs) {
      if (v.transposed || (dt != DType::F32 && v.spatial == 3))
        continue;
      cases.push_back({std::string("conv_nhwc_") + v.name + "_" + tag(dt),
                       tol(dt, 1e-3), [=](Suite &s) {
                         TensorRef x = s.random(dt, last(v.x)),
                                   w = s.random(dt, last(v.w), 0.05, 0.5);
                         TensorRef bias = s.random(dt, {v.y[1]});
                         TensorRef y = s.empty(dt, last(v.y));
                         ConvParams p = convParams(v);
                         p.channelsLast = true;
                         size_t ws = convWorkspaceBound(p, x, w, y);
                         TensorRef workspace =
                             s.empty(DType::U8, {int64_t(ws)});
                         conv(*s.ctx, "conv_nhwc", p, x, w,
                              v.bias ? &bias : nullptr, y, workspace.data, ws);
                         return std::vector<TensorRef>{y};
                       }});
      for (bool inPlace : {false, true}) {
        if (v.spatial != 2)
          continue;
        for (bool channelsLast : {false, true})
          cases.push_back(
              {std::string("conv_residual_") + (channelsLast ? "nhwc_" : "") +
                   (inPlace ? "inplace_" : "") + v.name + "_" + tag(dt),
               tol(dt, 1e-3), [=](Suite &s) {
                 auto layout = [&](const std::vector<int64_t> &shape) {
                   return channelsLast ? last(shape) : shape;
                 };
                 TensorRef x = s.random(dt, layout(v.x)),
                           w = s.random(dt, layout(v.w), 0.05, 0.5);
                 TensorRef bias = s.random(dt, {v.y[1]});
                 TensorRef z = s.random(dt, layout(v.y));
                 TensorRef y = inPlace ? z : s.empty(dt, layout(v.y));
                 ConvParams p = convParams(v);
                 p.activation = Activation::Relu;
                 p.channelsLast = channelsLast;
                 size_t ws = convWorkspaceBound(p, x, w, y);
                 TensorRef workspace = s.empty(DType::U8, {int64_t(ws)});
                 convResidual(*s.ctx, "conv_residual", p, x, w, &bias, z, y,
                              workspace.data, ws);
                 // A second call runs the plan chosen by the first (the
                 // first times candidates); the in-place case needs the
                 // residual again.
                 if (!inPlace)
                   convResidual(*s.ctx, "conv_residual", p, x, w, &bias, z, y,
                                workspace.data, ws);
                 return std::vector<TensorRef>{y};
               }});
      }
    }
  // TF32 (f32 storage, 10-bit mantissa products, f32 sums): about 1e-3
  // relative per product; the host computes in double.
  for (const ConvCase &v : convs) {
    if (v.transposed || v.spatial != 2)
      continue;
    for (bool channelsLast : {false, true})
      cases.push_back(
          {std::string("conv_tf32_") + (channelsLast ? "nhwc_" : "") + v.name,
           2e-2, [=](Suite &s) {
             auto layout = [&](const std::vector<int64_t> &shape) {
               return channelsLast ? last(shape) : shape;
             };
             TensorRef x = s.random(DType::F32, layout(v.x)),
                       w = s.random(DType::F32, layout(v.w), 0.05, 0.5);
             TensorRef bias = s.random(DType::F32, {v.y[1]});
             TensorRef y = s.empty(DType::F32, layout(v.y));
             ConvParams p = convParams(v);
             p.channelsLast = channelsLast;
             p.allowTf32 = true;
             size_t ws = convWorkspaceBound(p, x, w, y);
             TensorRef workspace = s.empty(DType::U8, {int64_t(ws)});
             conv(*s.ctx, "conv_tf32", p, x, w, v.bias ? &bias : nullptr, y,
                  workspace.data, ws);
             return std::vector<TensorRef>{y};
           }});
  }
  cases.push_back({"matmul_tf32", 2e-2, [](Suite &s) {
                     TensorRef a = s.random(DType::F32, {3, 65, 256}),
                               b = s.random(DType::F32, {256, 96}, 0.05, 0.5);
                     TensorRef bias = s.random(DType::F32, {96});
                     TensorRef c = s.empty(DType::F32, {3, 65, 96});
                     MatmulParams p;
                     p.allowTf32 = true;
                     p.activation = Activation::Relu;
                     matmul(*s.ctx, "mm_tf32", p, a, b, &bias, c);
                     return std::vector<TensorRef>{c};
                   }});
}

void addPoolCases(std::vector<Case> &cases) {
  const DType floats[3] = {DType::F32, DType::F16, DType::BF16};
  // Pooling.
  for (DType dt : floats) {
    struct P {
      const char *name;
      PoolKind kind;
      bool includePad, ceil;
      int64_t out;
    };
    for (P p : {P{"max", PoolKind::Max, false, false, 10},
                P{"avg_pad", PoolKind::Avg, true, false, 10},
                P{"avg_ceil", PoolKind::Avg, false, true, 11}})
      cases.push_back({std::string("pool_") + p.name + "_" + tag(dt), tol(dt),
                       [=](Suite &s) {
                         // 20x20, k3 s2 p1: 10 outputs, 11 with ceil_mode.
                         TensorRef x = s.random(dt, {2, 5, 20, 20});
                         TensorRef y = s.empty(dt, {2, 5, p.out, p.out});
                         PoolParams pp;
                         pp.kind = p.kind;
                         pp.countIncludePad = p.includePad;
                         pp.ceilMode = p.ceil;
                         for (int i = 0; i < 2; ++i) {
                           pp.kernel[i] = 3;
                           pp.strides[i] = 2;
                           pp.padsBegin[i] = pp.padsEnd[i] = 1;
                         }
                         pool(*s.ctx, "pool", pp, x, y);
                         return std::vector<TensorRef>{y};
                       }});
    for (P p : {P{"max", PoolKind::Max, false, false, 10},
                P{"avg_ceil", PoolKind::Avg, false, true, 11}})
      cases.push_back({std::string("pool_nhwc_") + p.name + "_" + tag(dt),
                       tol(dt), [=](Suite &s) {
                         TensorRef x = s.random(dt, {2, 20, 20, 5});
                         TensorRef y = s.empty(dt, {2, p.out, p.out, 5});
                         PoolParams pp;
                         pp.kind = p.kind;
                         pp.countIncludePad = p.includePad;
                         pp.ceilMode = p.ceil;
                         pp.channelsLast = true;
                         for (int i = 0; i < 2; ++i) {
                           pp.kernel[i] = 3;
                           pp.strides[i] = 2;
                           pp.padsBegin[i] = pp.padsEnd[i] = 1;
                         }
                         pool(*s.ctx, "pool_nhwc", pp, x, y);
                         return std::vector<TensorRef>{y};
                       }});
    cases.push_back({std::string("global_avg_pool_nhwc_") + tag(dt), tol(dt),
                     [=](Suite &s) {
                       TensorRef x = s.random(dt, {3, 13, 11, 37});
                       TensorRef y = s.empty(dt, {3, 1, 1, 37});
                       globalAvgPool(*s.ctx, "gap_nhwc", x, y, true);
                       return std::vector<TensorRef>{y};
                     }});
    cases.push_back(
        {std::string("global_avg_pool_") + tag(dt), tol(dt), [=](Suite &s) {
           TensorRef x = s.random(dt, {3, 37, 13, 11});
           TensorRef y = s.empty(dt, {3, 37, 1, 1});
           globalAvgPool(*s.ctx, "gap", x, y);
           return std::vector<TensorRef>{y};
         }});
  }
}

} // namespace memopt::rt::suite
