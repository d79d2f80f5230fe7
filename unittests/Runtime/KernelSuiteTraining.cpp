//===- KernelSuiteTraining.cpp - the suite's training cases ---------------===//
//
// The kernel suite's training cases: cross-entropy, the convolution and
// pooling gradients, dropout, gradient accumulation and the optimizers.
//
//===----------------------------------------------------------------------===//

#include "KernelSuite.h"

#include <algorithm>

namespace memopt::rt::suite {

void addTrainingCases(std::vector<Case> &cases) {
  const DType floats[3] = {DType::F32, DType::F16, DType::BF16};
  const std::vector<ConvCase> &convs = convCases();
  // Training: cross-entropy (warp per row, wide and narrow rows, ignored
  // rows), the conv filter gradient on the conv cases above (cuDNN's
  // backward-filter search; the asymmetric-pad case runs the own kernel),
  // the pool gradient and the optimizer updates over two steps.
  for (DType dt : floats) {
    struct E {
      const char *name;
      int64_t rows, classes;
      DType labels;
    };
    for (E e :
         {E{"wide", 37, 5003, DType::I64}, E{"narrow", 4099, 10, DType::I32}})
      cases.push_back(
          {std::string("cross_entropy_") + e.name + "_" + tag(dt),
           tol(dt, 1e-4), [=](Suite &s) {
             TensorRef logits = s.random(dt, {e.rows, e.classes});
             std::vector<double> y;
             for (int64_t r = 0; r < e.rows; ++r)
               y.push_back(r % 5 == 2 ? -100 : double((r * 7919) % e.classes));
             TensorRef labels = s.ints(e.labels, {e.rows}, y);
             TensorRef loss = s.empty(DType::F32, {});
             TensorRef dloss = s.upload(DType::F32, {}, {1.25});
             TensorRef dlogits = s.empty(dt, {e.rows, e.classes});
             softmaxCrossEntropy(*s.ctx, "ce", -100, logits, labels, loss);
             softmaxCrossEntropyGrad(*s.ctx, "ce_grad", -100, logits, labels,
                                     dloss, dlogits);
             // Scaled so that the gradient's entries (about 1 / (rows *
             // classes)) are compared at the tolerance of the loss.
             TensorRef scaled = s.empty(DType::F32, {e.rows, e.classes});
             cast(*s.ctx, "cast", dlogits, scaled);
             TensorRef factor =
                 s.upload(DType::F32, {1}, {double(e.rows * e.classes)});
             binary(*s.ctx, "scale", BinaryOp::Mul, scaled, factor, scaled);
             return std::vector<TensorRef>{loss, scaled};
           }});
    cases.push_back(
        {std::string("cross_entropy_all_ignored_") + tag(dt), 0, [=](Suite &s) {
           TensorRef logits = s.random(dt, {9, 33});
           TensorRef labels =
               s.ints(DType::I64, {9}, std::vector<double>(9, -1.0));
           TensorRef loss = s.random(DType::F32, {});
           TensorRef dloss = s.upload(DType::F32, {}, {1.0});
           TensorRef dlogits = s.random(dt, {9, 33});
           softmaxCrossEntropy(*s.ctx, "ce", -1, logits, labels, loss);
           softmaxCrossEntropyGrad(*s.ctx, "ce_grad", -1, logits, labels, dloss,
                                   dlogits);
           return std::vector<TensorRef>{loss, dlogits};
         }});
    // The fused head + loss over 517 classes (an odd tail of 5 after the
    // aligned 512): chunks of 128 classes (dx summed over five GEMMs, the
    // accumulating ones included) and the whole aligned width at once;
    // ignored rows and labels in the first, a middle and the tail chunk.
    for (int64_t chunk : {int64_t(128), int64_t(512)})
      cases.push_back(
          {std::string("linear_cross_entropy_chunk") + std::to_string(chunk) +
               "_" + tag(dt),
           tol(dt, 1e-4), [=](Suite &s) {
             const int64_t rows = 38, features = 24, classes = 517;
             TensorRef x = s.random(dt, {2, rows / 2, features}, 0.05, 0.5);
             TensorRef w = s.random(dt, {classes, features}, 0.05, 0.5);
             std::vector<double> y;
             for (int64_t r = 0; r < rows; ++r)
               y.push_back(r % 7 == 3   ? -100
                           : r % 7 == 5 ? double(classes - 1 - r % 5)
                                        : double((r * 131) % classes));
             TensorRef labels = s.ints(DType::I64, {2, rows / 2}, y);
             TensorRef loss = s.empty(DType::F32, {});
             TensorRef lse = s.empty(DType::F32, {2, rows / 2});
             TensorRef dloss = s.upload(DType::F32, {}, {1.25});
             TensorRef dx = s.empty(dt, {2, rows / 2, features});
             TensorRef dw = s.empty(dt, {classes, features});
             size_t bytes = linearCrossEntropyWorkspaceBytes(rows, chunk, dt);
             void *ws = s.empty(DType::U8, {int64_t(bytes)}).data;
             LinearCrossEntropyParams params;
             linearCrossEntropy(*s.ctx, "lce", params, x, w, labels, loss, lse,
                                ws, bytes);
             linearCrossEntropyGrad(*s.ctx, "lce_grad", params, x, w, labels,
                                    lse, dloss, dx, dw, ws, bytes);
             // dx and dw scaled by the rows (their entries are sums of
             // about 1 / rows each), as the cross-entropy cases do.
             std::vector<TensorRef> out = {loss, lse};
             for (TensorRef g : {dx, dw}) {
               TensorRef scaled = s.empty(
                   DType::F32, std::vector<int64_t>(g.shape, g.shape + g.rank));
               cast(*s.ctx, "cast", g, scaled);
               TensorRef factor = s.upload(DType::F32, {1}, {double(rows)});
               binary(*s.ctx, "scale", BinaryOp::Mul, scaled, factor, scaled);
               out.push_back(scaled);
             }
             return out;
           }});
  }
  for (DType dt : floats)
    for (const ConvCase &v : convs) {
      if (v.transposed || (dt != DType::F32 && v.spatial == 3))
        continue;
      cases.push_back(
          {std::string("conv_backward_filter_") + v.name + "_" + tag(dt),
           tol(dt, 1e-3), [=](Suite &s) {
             TensorRef x = s.random(dt, v.x), dy = s.random(dt, v.y, 0.05, 0.5);
             TensorRef dw = s.empty(dt, v.w);
             ConvParams p;
             p.spatialRank = v.spatial;
             p.group = v.group;
             for (int i = 0; i < v.spatial; ++i) {
               p.strides[i] = v.stride;
               p.dilations[i] = v.dilation;
               p.padsBegin[i] = v.padBegin;
               p.padsEnd[i] = v.padEnd;
             }
             size_t ws = convWorkspaceBound(p, x, dw, dy);
             TensorRef workspace = s.empty(DType::U8, {int64_t(ws)});
             convBackwardFilter(*s.ctx, "conv_dw", p, x, dy, dw, workspace.data,
                                ws);
             return std::vector<TensorRef>{dw};
           }});
    }
  // The convolution gradients of a ResNet bottleneck's last stage at 2
  // images of 64x64 (2x2 planes): data gradients of strided convolutions
  // need output_padding 1, filter gradients of 3x3 convs see mostly padding.
  {
    struct G {
      const char *name;
      std::vector<int64_t> x, w, y;
      int64_t kernel, stride, pad;
    };
    for (G g :
         {G{"1x1_s2", {2, 96, 4, 4}, {160, 96, 1, 1}, {2, 160, 2, 2}, 1, 2, 0},
          G{"3x3_s2", {2, 64, 4, 4}, {64, 64, 3, 3}, {2, 64, 2, 2}, 3, 2, 1},
          G{"3x3_2x2", {2, 64, 2, 2}, {64, 64, 3, 3}, {2, 64, 2, 2}, 3, 1, 1},
          G{"1x1_2x2",
            {2, 128, 2, 2},
            {64, 128, 1, 1},
            {2, 64, 2, 2},
            1,
            1,
            0}})
      cases.push_back(
          {std::string("conv_gradients_small_") + g.name, 1e-4, [=](Suite &s) {
             TensorRef x = s.random(DType::F32, g.x);
             TensorRef w = s.random(DType::F32, g.w, 0.05, 0.5);
             TensorRef dy = s.random(DType::F32, g.y, 0.05, 0.5);
             TensorRef dx = s.empty(DType::F32, g.x),
                       dw = s.empty(DType::F32, g.w);
             ConvParams p;
             p.spatialRank = 2;
             for (int i = 0; i < 2; ++i) {
               p.strides[i] = g.stride;
               p.dilations[i] = 1;
               p.padsBegin[i] = p.padsEnd[i] = g.pad;
               int64_t covered =
                   g.stride * (g.y[2 + i] - 1) + g.kernel - 2 * g.pad;
               p.outputPadding[i] = g.x[2 + i] - covered;
             }
             size_t wsData = convWorkspaceBound(p, dy, w, dx);
             size_t wsFilter = convWorkspaceBound(p, x, dw, dy);
             size_t ws = std::max(wsData, wsFilter);
             TensorRef workspace = s.empty(DType::U8, {int64_t(ws) + 1});
             convTranspose(*s.ctx, "conv_dx", p, dy, w, nullptr, dx,
                           workspace.data, ws);
             convBackwardFilter(*s.ctx, "conv_dw", p, x, dy, dw, workspace.data,
                                ws);
             return std::vector<TensorRef>{dx, dw};
           }});
  }
  for (DType dt : floats) {
    struct P {
      const char *name;
      PoolKind kind;
      bool includePad, ceil;
      int64_t out, dilation;
    };
    for (P p : {P{"max", PoolKind::Max, false, false, 10, 1},
                P{"max_dilated", PoolKind::Max, false, false, 9, 2},
                P{"avg_pad", PoolKind::Avg, true, false, 10, 1},
                P{"avg_ceil", PoolKind::Avg, false, true, 11, 1}})
      cases.push_back({std::string("pool_grad_") + p.name + "_" + tag(dt),
                       tol(dt), [=](Suite &s) {
                         // Distinct values (no ties in a window) in shuffled
                         // order.
                         int64_t n = 2 * 5 * 20 * 20;
                         std::vector<double> values(static_cast<size_t>(n));
                         for (int64_t i = 0; i < n; ++i)
                           values[size_t(i)] =
                               double((i * 7919) % n) / 256.0 - 7.0;
                         TensorRef x = s.upload(dt, {2, 5, 20, 20}, values);
                         TensorRef dy = s.random(dt, {2, 5, p.out, p.out});
                         TensorRef dx = s.empty(dt, {2, 5, 20, 20});
                         PoolParams pp;
                         pp.kind = p.kind;
                         pp.countIncludePad = p.includePad;
                         pp.ceilMode = p.ceil;
                         for (int i = 0; i < 2; ++i) {
                           pp.kernel[i] = 3;
                           pp.strides[i] = 2;
                           pp.dilations[i] = p.dilation;
                           pp.padsBegin[i] = pp.padsEnd[i] = 1;
                         }
                         poolGrad(*s.ctx, "pool_grad", pp, x, dy, dx);
                         return std::vector<TensorRef>{dx};
                       }});
  }
  // Max pooling's gradient over planes of several 32 x 32 tiles with partial
  // edge tiles: 3x3 / 2 with padding (a ResNet stem) and 2x2 / 1 (windows
  // overlapping by one), ties included (values repeat every 97 elements).
  for (DType dt : floats)
    for (int64_t stride : {2, 1})
      cases.push_back({std::string("pool_grad_max_tiles_s") +
                           std::to_string(stride) + "_" + tag(dt),
                       tol(dt), [=](Suite &s) {
                         std::vector<int64_t> shape = {2, 3, 70, 45};
                         int64_t n = 2 * 3 * 70 * 45, k = stride == 2 ? 3 : 2,
                                 pad = stride == 2 ? 1 : 0;
                         std::vector<double> values(static_cast<size_t>(n));
                         for (int64_t i = 0; i < n; ++i)
                           values[size_t(i)] =
                               double((i * 7919) % 97) / 8.0 - 6.0;
                         TensorRef x = s.upload(dt, shape, values);
                         int64_t oh = (70 + 2 * pad - k) / stride + 1,
                                 ow = (45 + 2 * pad - k) / stride + 1;
                         TensorRef dy = s.random(dt, {2, 3, oh, ow});
                         TensorRef dx = s.empty(dt, shape);
                         PoolParams pp;
                         pp.kind = PoolKind::Max;
                         for (int i = 0; i < 2; ++i) {
                           pp.kernel[i] = k;
                           pp.strides[i] = stride;
                           pp.dilations[i] = 1;
                           pp.padsBegin[i] = pp.padsEnd[i] = pad;
                         }
                         poolGrad(*s.ctx, "pool_grad_tiles", pp, x, dy, dx);
                         return std::vector<TensorRef>{dx};
                       }});
  cases.push_back({"sgd_momentum_weight_decay", 1e-6, [](Suite &s) {
                     TensorRef param = s.random(DType::F32, {10007});
                     TensorRef buffer = s.empty(DType::F32, {10007});
                     fill(*s.ctx, "zero", 0.0, buffer);
                     TensorRef lr = s.upload(DType::F32, {}, {0.05});
                     for (int step = 0; step < 2; ++step) {
                       TensorRef grad = s.random(DType::F32, {10007});
                       sgdUpdate(*s.ctx, "sgd", 0.9f, 1e-2f, param, grad,
                                 &buffer, lr);
                     }
                     return std::vector<TensorRef>{param, buffer};
                   }});
  cases.push_back({"sgd_plain", 1e-6, [](Suite &s) {
                     TensorRef param = s.random(DType::F32, {4099});
                     TensorRef grad = s.random(DType::F32, {4099});
                     TensorRef lr = s.upload(DType::F32, {}, {0.1});
                     sgdUpdate(*s.ctx, "sgd", 0.0f, 0.0f, param, grad, nullptr,
                               lr);
                     return std::vector<TensorRef>{param};
                   }});
  cases.push_back({"adamw_two_steps", 1e-5, [](Suite &s) {
                     TensorRef param = s.random(DType::F32, {10007});
                     TensorRef m = s.empty(DType::F32, {10007});
                     TensorRef v = s.empty(DType::F32, {10007});
                     fill(*s.ctx, "zero", 0.0, m);
                     fill(*s.ctx, "zero", 0.0, v);
                     TensorRef lr = s.upload(DType::F32, {}, {1e-2});
                     for (int step = 1; step <= 2; ++step) {
                       TensorRef grad = s.random(DType::F32, {10007});
                       TensorRef t = s.upload(DType::F32, {}, {double(step)});
                       adamwUpdate(*s.ctx, "adamw", 0.9f, 0.999f, 1e-8f, 1e-2f,
                                   param, grad, m, v, lr, t);
                     }
                     return std::vector<TensorRef>{param, m, v};
                   }});

  // Dropout: the CUDA mask must be the host's bit for bit (Philox.h is one
  // header for both), so f32 is compared exactly; an element count that is
  // not a multiple of 4, a 64-bit seed, a large micro-batch number, in place.
  for (DType dt : floats) {
    for (bool inPlace : {false, true}) {
      cases.push_back(
          {std::string("dropout_") + tag(dt) + (inPlace ? "_in_place" : ""),
           dt == DType::F32 ? 0.0 : tol(dt), [dt, inPlace](Suite &s) {
             TensorRef x = s.random(dt, {3, 1367});
             TensorRef key =
                 s.ints(DType::I64, {2}, {double(0x1234567890ll), 70000.0 + 1});
             TensorRef y = inPlace ? x : s.empty(dt, {3, 1367});
             dropout(*s.ctx, "dropout", 0.3f, 5u, x, key, y);
             TensorRef again = s.empty(dt, {3, 1367});
             dropout(*s.ctx, "dropout_again", 0.1f, 6u, y, key, again);
             return std::vector<TensorRef>{y, again};
           }});
    }
  }

  // Gradient accumulation over 3 micro-steps (the update runs on the last
  // one; the micro-step is read on the device), then a fourth micro-batch
  // that starts the next step: param, state and accumulator.
  for (bool adamw : {false, true}) {
    cases.push_back(
        {adamw ? "adamw_accumulate" : "sgd_accumulate", 1e-5,
         [adamw](Suite &s) {
           const int64_t n = 10007;
           TensorRef param = s.random(DType::F32, {n});
           TensorRef m = s.empty(DType::F32, {n});
           TensorRef v = s.empty(DType::F32, {n});
           TensorRef sum = s.random(DType::F32, {n}); // stale: overwritten
           fill(*s.ctx, "zero", 0.0, m);
           fill(*s.ctx, "zero", 0.0, v);
           TensorRef lr = s.upload(DType::F32, {}, {adamw ? 1e-2 : 0.05});
           TensorRef step = s.upload(DType::F32, {}, {1.0});
           for (int micro : {0, 1, 2, 0}) {
             GradientAccumulation accumulation;
             accumulation.accumulator = sum;
             accumulation.microStep = s.upload(DType::F32, {}, {double(micro)});
             accumulation.steps = 3;
             TensorRef grad = s.random(DType::F32, {n});
             if (adamw)
               adamwUpdate(*s.ctx, "adamw", 0.9f, 0.999f, 1e-8f, 1e-2f, param,
                           grad, m, v, lr, step, &accumulation);
             else
               sgdUpdate(*s.ctx, "sgd", 0.9f, 1e-2f, param, grad, &m, lr,
                         &accumulation);
           }
           return std::vector<TensorRef>{param, m, v, sum};
         }});
    // The micro-step gate alone (data parallel: a collective accumulated
    // and reduced the gradient): only micro-step 2 of 3 updates.
    cases.push_back(
        {adamw ? "adamw_gate" : "sgd_gate", 1e-5, [adamw](Suite &s) {
           const int64_t n = 4099;
           TensorRef param = s.random(DType::F32, {n});
           TensorRef m = s.empty(DType::F32, {n});
           TensorRef v = s.empty(DType::F32, {n});
           fill(*s.ctx, "zero", 0.0, m);
           fill(*s.ctx, "zero", 0.0, v);
           TensorRef lr = s.upload(DType::F32, {}, {adamw ? 1e-2 : 0.05});
           TensorRef step = s.upload(DType::F32, {}, {1.0});
           for (int micro : {0, 1, 2}) {
             GradientAccumulation gate;
             gate.microStep = s.upload(DType::F32, {}, {double(micro)});
             gate.steps = 3;
             TensorRef grad = s.random(DType::F32, {n});
             if (adamw)
               adamwUpdate(*s.ctx, "adamw", 0.9f, 0.999f, 1e-8f, 1e-2f, param,
                           grad, m, v, lr, step, &gate);
             else
               sgdUpdate(*s.ctx, "sgd", 0.9f, 1e-2f, param, grad, &m, lr,
                         &gate);
           }
           return std::vector<TensorRef>{param, m, v};
         }});
  }

  // The accumulation pass alone (--offload-accumulators device): f32, f16
  // and bf16 gradients summed into an f32 accumulator over 3 micro-steps
  // and the first of the next step (which restarts the sum).
  for (DType type : {DType::F32, DType::F16, DType::BF16}) {
    cases.push_back({std::string("accumulate_gradient_") + tag(type), 1e-6,
                     [type](Suite &s) {
                       const int64_t n = 5003;
                       TensorRef sum =
                           s.random(DType::F32, {n}); // stale: overwritten
                       TensorRef first;
                       for (int micro : {0, 1, 2, 0}) {
                         GradientAccumulation accumulation;
                         accumulation.accumulator = sum;
                         accumulation.microStep =
                             s.upload(DType::F32, {}, {double(micro)});
                         accumulation.steps = 3;
                         accumulateGradient(*s.ctx, "accumulate",
                                            s.random(type, {n}), accumulation);
                         if (micro == 2) {
                           first = s.empty(DType::F32, {n});
                           copy(*s.ctx, "keep", sum, first);
                         }
                       }
                       return std::vector<TensorRef>{first, sum};
                     }});
  }
}

} // namespace memopt::rt::suite
