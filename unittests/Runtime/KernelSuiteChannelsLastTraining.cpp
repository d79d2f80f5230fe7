//===- KernelSuiteChannelsLastTraining.cpp - NHWC training cases ----------===//
//
// The kernel suite's channels-last training cases (memopt-layout on a
// training program, docs/layout.md "Training"): the filter gradient on the
// conv cases' NHWC tensors and KRSC filters, ONNX ConvTranspose cases and a
// ResNet stage's data and filter gradients channels-last in f32 / f16 /
// bf16, the pooling gradient over NHWC planes, and batch normalization's
// training forward and backward with the channel innermost (channel counts
// below, at and above the CUDA kernels' 32-channel tiles, f16 / bf16 packs
// of neighbouring channels). The host computes them through channels-first
// copies; each case is compared between the backends as the others are.
//
//===----------------------------------------------------------------------===//

#include "KernelSuite.h"
#include "memopt/Runtime/Workspace.h"

#include <algorithm>

namespace memopt::rt::suite {

namespace {

/// [N, C, spatial...] -> [N, spatial..., C] (filters: [M, C/g, k...] ->
/// [M, k..., C/g]).
std::vector<int64_t> last(std::vector<int64_t> shape) {
  std::rotate(shape.begin() + 1, shape.begin() + 2, shape.end());
  return shape;
}

ConvParams paramsOf(const ConvCase &v) {
  ConvParams p;
  p.spatialRank = v.spatial;
  p.group = v.group;
  p.channelsLast = true;
  for (int i = 0; i < v.spatial; ++i) {
    p.strides[i] = v.stride;
    p.dilations[i] = v.dilation;
    p.padsBegin[i] = v.padBegin;
    p.padsEnd[i] = v.padEnd;
  }
  return p;
}

} // namespace

namespace {

/// The channels-last kernels of a ResNet-50 training step (issue 26): the
/// stem's max-pool gradient (16 x 16 position tiles, slabs of up to 8 packs
/// of neighbouring channels) and batch normalization at the network's
/// channel counts, each with the tails the CUDA kernels handle apart.
void addChannelsLastResNetCases(std::vector<Case> &cases) {
  const DType floats[3] = {DType::F32, DType::F16, DType::BF16};
  // Max-pool gradient: 3x3 / 2 padded 1 over odd sizes spanning several
  // tiles, 2x2 / 2 unpadded over odd sizes (the last row and column in no
  // window); 3 channels (one per thread), 64 (whole 16-byte packs, one
  // slab) and 200 (25 packs: a partly filled last slab; f32 and f16 in 8-
  // or 16-byte packs); distinct values, or ties every 13 elements (the
  // first tap in scan order wins).
  struct P {
    const char *name;
    int64_t h, w, k, s, p;
  };
  for (DType dt : floats)
    for (P p : {P{"3x3_s2_p1", 35, 33, 3, 2, 1}, P{"2x2_s2", 19, 21, 2, 2, 0}})
      for (int64_t c : {3, 64, 200})
        for (bool ties : {false, true}) {
          std::string name = std::string("max_pool_grad_nhwc_") + p.name +
                             "_c" + std::to_string(c) +
                             (ties ? "_ties_" : "_") + tag(dt);
          cases.push_back(
              {name, tol(dt), [=](Suite &s) {
                 int64_t oh = (p.h + 2 * p.p - p.k) / p.s + 1;
                 int64_t ow = (p.w + 2 * p.p - p.k) / p.s + 1;
                 std::vector<int64_t> shape = {2, p.h, p.w, c};
                 int64_t n = 2 * p.h * p.w * c;
                 std::vector<double> values(size_t(n), 0.0);
                 for (int64_t i = 0; i < n; ++i)
                   values[size_t(i)] =
                       ties ? double((i * 7919) % 13) / 4.0 - 1.0
                            : double((i * 7919) % n) / double(n) * 16.0 - 8.0;
                 TensorRef x = s.upload(dt, shape, values);
                 TensorRef dy = s.random(dt, {2, oh, ow, c});
                 TensorRef dx = s.empty(dt, shape);
                 PoolParams pp;
                 pp.kind = PoolKind::Max;
                 pp.channelsLast = true;
                 for (int i = 0; i < 2; ++i) {
                   pp.kernel[i] = p.k;
                   pp.strides[i] = p.s;
                   pp.dilations[i] = 1;
                   pp.padsBegin[i] = pp.padsEnd[i] = p.p;
                 }
                 poolGrad(*s.ctx, "max_pool_grad_nhwc", pp, x, dy, dx);
                 return std::vector<TensorRef>{dx};
               }});
        }
  // Batch normalization forward and backward with the workspace a program
  // plans (workspace::batchNormTrainingLastBytes: several splits of the
  // rows, merged by the finishing kernel): ResNet-50's channel counts at
  // small spatial sizes and batches (the same tiles, packs and split
  // merging as at batch 64), then channel counts that are not a multiple of
  // 8 (8-byte packs, one element per thread).
  struct B {
    const char *name;
    std::vector<int64_t> shape;
    DType dt;
    bool relu;
  };
  for (B b : {B{"c64_28", {8, 28, 28, 64}, DType::BF16, true},
              B{"c256_14", {4, 14, 14, 256}, DType::BF16, false},
              B{"c128_14_f16", {4, 14, 14, 128}, DType::F16, true},
              B{"c512_14_f32", {4, 14, 14, 512}, DType::F32, false},
              B{"c1024_14_f16", {8, 14, 14, 1024}, DType::F16, false},
              B{"c2048_7", {16, 7, 7, 2048}, DType::BF16, true},
              B{"c200_10", {4, 10, 10, 200}, DType::BF16, true},
              B{"c100_9", {4, 9, 9, 100}, DType::BF16, false},
              B{"c70_9_f16", {4, 9, 9, 70}, DType::F16, true},
              B{"c3_16_f32", {4, 16, 16, 3}, DType::F32, false}})
    cases.push_back(
        {std::string("batch_norm_training_nhwc_resnet_") + b.name,
         b.dt == DType::F32 ? 5e-5 : tol(b.dt), [=](Suite &s) {
           int64_t c = b.shape.back();
           int64_t rows = b.shape[0] * b.shape[1] * b.shape[2];
           TensorRef x = s.random(b.dt, b.shape, 0.1, 3.0);
           TensorRef scale = s.random(DType::F32, {c}, 0.5, 1.5);
           TensorRef bias = s.random(DType::F32, {c});
           TensorRef y = s.empty(b.dt, b.shape);
           TensorRef mean = s.empty(DType::F32, {c});
           TensorRef inv = s.empty(DType::F32, {c});
           TensorRef ws = s.empty(
               DType::U8, {workspace::batchNormTrainingLastBytes(c, rows)});
           batchNormTraining(*s.ctx, "bn_nhwc", 1e-5f,
                             b.relu ? Activation::Relu : Activation::None, x,
                             scale, bias, y, mean, inv, ws.data, ws.bytes(),
                             /*channelsLast=*/true);
           TensorRef dy = s.random(b.dt, b.shape);
           TensorRef dscale = s.empty(DType::F32, {c});
           TensorRef dbias = s.empty(DType::F32, {c});
           TensorRef dx = s.empty(b.dt, b.shape);
           batchNormTrainingGrad(*s.ctx, "bn_grad_nhwc", x, dy, scale, mean,
                                 inv, dx, dscale, dbias, ws.data, ws.bytes(),
                                 /*channelsLast=*/true);
           return std::vector<TensorRef>{y, mean, inv, dx, dscale, dbias};
         }});
}

} // namespace

void addChannelsLastTrainingCases(std::vector<Case> &cases) {
  const DType floats[3] = {DType::F32, DType::F16, DType::BF16};
  const std::vector<ConvCase> &convs = convCases();
  for (DType dt : floats)
    for (const ConvCase &v : convs) {
      if (dt != DType::F32 && (v.spatial == 3 || v.transposed))
        continue;
      if (v.transposed) {
        // ONNX ConvTranspose channels-last: w [C, k..., M/g].
        cases.push_back({std::string("conv_transpose_nhwc_") + v.name,
                         tol(dt, 1e-3), [=](Suite &s) {
                           TensorRef x = s.random(dt, last(v.x)),
                                     w = s.random(dt, last(v.w), 0.05, 0.5);
                           TensorRef y = s.empty(dt, last(v.y));
                           ConvParams p = paramsOf(v);
                           size_t ws = convWorkspaceBound(p, x, w, y);
                           TensorRef workspace =
                               s.empty(DType::U8, {int64_t(ws)});
                           convTranspose(*s.ctx, "convT_nhwc", p, x, w, nullptr,
                                         y, workspace.data, ws);
                           return std::vector<TensorRef>{y};
                         }});
        continue;
      }
      cases.push_back(
          {std::string("conv_backward_filter_nhwc_") + v.name + "_" + tag(dt),
           tol(dt, 1e-3), [=](Suite &s) {
             TensorRef x = s.random(dt, last(v.x));
             TensorRef dy = s.random(dt, last(v.y), 0.05, 0.5);
             TensorRef dw = s.empty(dt, last(v.w));
             ConvParams p = paramsOf(v);
             size_t ws = convWorkspaceBound(p, x, dw, dy);
             TensorRef workspace = s.empty(DType::U8, {int64_t(ws)});
             convBackwardFilter(*s.ctx, "conv_dw_nhwc", p, x, dy, dw,
                                workspace.data, ws);
             return std::vector<TensorRef>{dw};
           }});
    }
  // A ResNet-50 training step's convolution gradients, channels-last: the
  // data gradient (cuDNN backward data, NHWC tensors, KRSC filter) with the
  // output_padding of a strided forward, and the filter gradient.
  {
    struct G {
      const char *name;
      std::vector<int64_t> x, w, y;
      int64_t kernel, stride, pad;
    };
    for (DType dt : floats)
      for (G g :
           {G{"stem_7x7_s2",
              {2, 3, 32, 32},
              {64, 3, 7, 7},
              {2, 64, 16, 16},
              7,
              2,
              3},
            G{"3x3_s2", {2, 64, 8, 8}, {64, 64, 3, 3}, {2, 64, 4, 4}, 3, 2, 1},
            G{"1x1_expand",
              {2, 64, 8, 8},
              {256, 64, 1, 1},
              {2, 256, 8, 8},
              1,
              1,
              0},
            G{"1x1_s2",
              {2, 96, 4, 4},
              {160, 96, 1, 1},
              {2, 160, 2, 2},
              1,
              2,
              0}})
        cases.push_back(
            {std::string("conv_gradients_nhwc_") + g.name + "_" + tag(dt),
             tol(dt, 1e-4), [=](Suite &s) {
               TensorRef x = s.random(dt, last(g.x));
               TensorRef w = s.random(dt, last(g.w), 0.05, 0.5);
               TensorRef dy = s.random(dt, last(g.y), 0.05, 0.5);
               TensorRef dx = s.empty(dt, last(g.x)),
                         dw = s.empty(dt, last(g.w));
               ConvParams p;
               p.spatialRank = 2;
               p.channelsLast = true;
               for (int i = 0; i < 2; ++i) {
                 p.strides[i] = g.stride;
                 p.dilations[i] = 1;
                 p.padsBegin[i] = p.padsEnd[i] = g.pad;
                 int64_t covered =
                     g.stride * (g.y[2 + i] - 1) + g.kernel - 2 * g.pad;
                 p.outputPadding[i] = g.x[2 + i] - covered;
               }
               size_t ws = std::max(convWorkspaceBound(p, dy, w, dx),
                                    convWorkspaceBound(p, x, dw, dy));
               TensorRef workspace = s.empty(DType::U8, {int64_t(ws)});
               convTranspose(*s.ctx, "conv_dx_nhwc", p, dy, w, nullptr, dx,
                             workspace.data, ws);
               convBackwardFilter(*s.ctx, "conv_dw_nhwc", p, x, dy, dw,
                                  workspace.data, ws);
               return std::vector<TensorRef>{dx, dw};
             }});
  }
  // Pooling gradients over NHWC planes: a ResNet stem's max pool (distinct
  // values, then ties every 97 elements) and a padded average pool.
  for (DType dt : floats) {
    struct P {
      const char *name;
      PoolKind kind;
      bool ties, includePad;
    };
    for (P p : {P{"max", PoolKind::Max, false, false},
                P{"max_ties", PoolKind::Max, true, false},
                P{"avg_pad", PoolKind::Avg, false, true}})
      cases.push_back({std::string("pool_grad_nhwc_") + p.name + "_" + tag(dt),
                       tol(dt), [=](Suite &s) {
                         std::vector<int64_t> shape = {2, 21, 20, 37};
                         int64_t n = 2 * 21 * 20 * 37;
                         std::vector<double> values(static_cast<size_t>(n));
                         for (int64_t i = 0; i < n; ++i)
                           values[size_t(i)] =
                               p.ties ? double((i * 7919) % 97) / 8.0 - 6.0
                                      : double((i * 7919) % n) / 1024.0 - 7.0;
                         TensorRef x = s.upload(dt, shape, values);
                         TensorRef dy = s.random(dt, {2, 11, 10, 37});
                         TensorRef dx = s.empty(dt, shape);
                         PoolParams pp;
                         pp.kind = p.kind;
                         pp.countIncludePad = p.includePad;
                         pp.channelsLast = true;
                         for (int i = 0; i < 2; ++i) {
                           pp.kernel[i] = 3;
                           pp.strides[i] = 2;
                           pp.dilations[i] = 1;
                           pp.padsBegin[i] = pp.padsEnd[i] = 1;
                         }
                         poolGrad(*s.ctx, "pool_grad_nhwc", pp, x, dy, dx);
                         return std::vector<TensorRef>{dx};
                       }});
  }
  // Batch normalization in training mode, channel innermost: 12 channels
  // (one partial tile), 64 (two full tiles) and 83 (odd: one-element
  // loads), with and without a workspace (one split or several), f32 and
  // the low precisions (8 / 16-byte packs of neighbouring channels).
  struct B {
    const char *name;
    std::vector<int64_t> shape;
    DType dt;
    bool relu, workspace;
  };
  for (B b : {B{"c12_relu", {4, 9, 9, 12}, DType::F32, true, true},
              B{"c64", {8, 14, 14, 64}, DType::F32, false, true},
              B{"c64_no_workspace", {8, 14, 14, 64}, DType::F32, true, false},
              B{"c83", {3, 7, 11, 83}, DType::F32, false, true},
              B{"c64_f16", {8, 14, 14, 64}, DType::F16, true, true},
              B{"c64_bf16", {8, 14, 14, 64}, DType::BF16, true, true},
              B{"c12_f16", {4, 9, 9, 12}, DType::F16, false, true},
              B{"c83_bf16", {3, 7, 11, 83}, DType::BF16, true, false}})
    cases.push_back(
        {std::string("batch_norm_training_nhwc_") + b.name,
         b.dt == DType::F32 ? 5e-5 : tol(b.dt), [=](Suite &s) {
           int64_t c = b.shape.back();
           TensorRef x = s.random(b.dt, b.shape, 0.1, 3.0);
           TensorRef scale = s.random(DType::F32, {c}, 0.5, 1.5);
           TensorRef bias = s.random(DType::F32, {c});
           TensorRef y = s.empty(b.dt, b.shape);
           TensorRef mean = s.empty(DType::F32, {c});
           TensorRef inv = s.empty(DType::F32, {c});
           TensorRef ws = s.empty(DType::F32, {c * 64});
           void *w = b.workspace ? ws.data : nullptr;
           size_t wb = b.workspace ? ws.bytes() : 0;
           batchNormTraining(*s.ctx, "bn_nhwc", 1e-5f,
                             b.relu ? Activation::Relu : Activation::None, x,
                             scale, bias, y, mean, inv, w, wb,
                             /*channelsLast=*/true);
           TensorRef dy = s.random(b.dt, b.shape);
           TensorRef dscale = s.empty(DType::F32, {c});
           TensorRef dbias = s.empty(DType::F32, {c});
           TensorRef dx = dy; // in place over dY
           batchNormTrainingGrad(*s.ctx, "bn_grad_nhwc", x, dy, scale, mean,
                                 inv, dx, dscale, dbias, w, wb,
                                 /*channelsLast=*/true);
           return std::vector<TensorRef>{y, mean, inv, dx, dscale, dbias};
         }});
  addChannelsLastResNetCases(cases);
}

} // namespace memopt::rt::suite
