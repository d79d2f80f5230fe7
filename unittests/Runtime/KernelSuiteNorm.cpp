//===- KernelSuiteNorm.cpp - normalization, softmax, reductions -----------===//
//
// The kernel suite's cases of normalization (batch, layer, RMS; training
// mode and gradients), softmax, reductions and running sums.
//
//===----------------------------------------------------------------------===//

#include "KernelSuite.h"

#include <limits>

namespace memopt::rt::suite {

void addNormCases(std::vector<Case> &cases) {
  const DType floats[3] = {DType::F32, DType::F16, DType::BF16};
  // Normalization, softmax, reductions.
  for (DType dt : floats) {
    cases.push_back(
        {std::string("batchnorm_") + tag(dt), tol(dt), [=](Suite &s) {
           TensorRef x = s.random(dt, {2, 19, 9, 7});
           TensorRef sc = s.random(DType::F32, {19}),
                     b = s.random(DType::F32, {19});
           TensorRef m = s.random(DType::F32, {19});
           TensorRef v = s.random(DType::F32, {19}, 0.5, 2.0, true);
           TensorRef y = s.empty(dt, {2, 19, 9, 7});
           batchNorm(*s.ctx, "bn", 1e-5f, x, sc, b, m, v, y);
           return std::vector<TensorRef>{y};
         }});
    cases.push_back(
        {std::string("batchnorm_nhwc_") + tag(dt), tol(dt), [=](Suite &s) {
           TensorRef x = s.random(dt, {2, 9, 7, 19});
           TensorRef sc = s.random(DType::F32, {19}),
                     b = s.random(DType::F32, {19});
           TensorRef m = s.random(DType::F32, {19});
           TensorRef v = s.random(DType::F32, {19}, 0.5, 2.0, true);
           TensorRef y = s.empty(dt, {2, 9, 7, 19});
           batchNorm(*s.ctx, "bn_nhwc", 1e-5f, x, sc, b, m, v, y, true);
           return std::vector<TensorRef>{y};
         }});
    for (int64_t cols : {int64_t(768), int64_t(37), int64_t(3001)})
      cases.push_back({"layernorm_" + std::to_string(cols) + "_" + tag(dt),
                       tol(dt, 2e-4), [=](Suite &s) {
                         TensorRef x = s.random(dt, {2, 9, cols});
                         TensorRef sc = s.random(dt, {cols}),
                                   b = s.random(dt, {cols});
                         TensorRef y = s.empty(dt, {2, 9, cols});
                         layerNorm(*s.ctx, "ln", 2, 1e-5f, x, sc, &b, y);
                         return std::vector<TensorRef>{y};
                       }});
    for (int64_t cols : {int64_t(1000), int64_t(5003), int64_t(7)})
      cases.push_back(
          {"softmax_" + std::to_string(cols) + "_" + tag(dt), tol(dt, 2e-4),
           [=](Suite &s) {
             TensorRef x = s.random(dt, {13, cols}, 0.1, 6.0);
             TensorRef y = s.empty(dt, {13, cols}), l = s.empty(dt, {13, cols});
             softmax(*s.ctx, "softmax", 1, false, x, y);
             softmax(*s.ctx, "logsoftmax", 1, true, x, l);
             return std::vector<TensorRef>{y, l};
           }});
    cases.push_back({std::string("softmax_middle_axis_") + tag(dt),
                     tol(dt, 2e-4), [=](Suite &s) {
                       TensorRef x = s.random(dt, {3, 50, 17});
                       TensorRef y = s.empty(dt, {3, 50, 17});
                       softmax(*s.ctx, "softmax", 1, false, x, y);
                       return std::vector<TensorRef>{y};
                     }});
    struct R {
      const char *name;
      std::vector<int> axes;
      ReduceOp op;
      std::vector<int64_t> out;
    };
    for (R r : {R{"last_mean", {2}, ReduceOp::Mean, {6, 11}},
                R{"middle_sum", {1}, ReduceOp::Sum, {6, 333}},
                R{"generic_max", {0, 2}, ReduceOp::Max, {11}},
                R{"all_l2", {0, 1, 2}, ReduceOp::L2, {1}},
                R{"trailing2_min", {1, 2}, ReduceOp::Min, {6}}})
      cases.push_back({std::string("reduce_") + r.name + "_" + tag(dt),
                       tol(dt, 2e-4), [=](Suite &s) {
                         TensorRef x = s.random(dt, {6, 11, 333});
                         TensorRef y = s.empty(dt, r.out);
                         reduce(*s.ctx, "reduce", r.op, r.axes.data(),
                                int(r.axes.size()), x, y);
                         return std::vector<TensorRef>{y};
                       }});
  }
  cases.push_back({"reduce_prod_small", 1e-4, [](Suite &s) {
                     TensorRef x = s.random(DType::F32, {5, 4, 3}, 0.8, 1.2);
                     TensorRef y = s.empty(DType::F32, {5});
                     int axes[2] = {1, 2};
                     reduce(*s.ctx, "prod", ReduceOp::Prod, axes, 2, x, y);
                     return std::vector<TensorRef>{y};
                   }});
  cases.push_back({"argmax", 0, [](Suite &s) {
                     TensorRef x = s.random(DType::F32, {7, 100, 9});
                     TensorRef y = s.empty(DType::I64, {7, 9});
                     argReduce(*s.ctx, "argmax", true, 1, x, y);
                     return std::vector<TensorRef>{y};
                   }});
  // Running sums: long contiguous rows (block scans over several chunks, a
  // partial last chunk, more rows than blocks), short rows and a middle axis
  // (one thread per row), every exclusive / reverse combination, in place.
  {
    struct S {
      const char *name;
      std::vector<int64_t> shape;
      int axis;
      bool exclusive, reverse, inPlace;
    };
    for (DType dt : floats)
      for (S c :
           {S{"rows", {37, 1000}, 1, false, false, false},
            S{"rows_exclusive_reverse", {5, 777}, 1, true, true, false},
            S{"many_rows_exclusive", {4096, 40}, 1, true, false, false},
            S{"short_rows_reverse", {1000, 7}, 1, false, true, false},
            S{"middle_axis", {3, 50, 17}, 1, false, true, false},
            S{"middle_axis_exclusive", {3, 50, 17}, 1, true, false, false},
            S{"rows_in_place", {3, 2049}, 1, true, true, true},
            S{"middle_in_place", {6, 33, 5}, 1, false, false, true}})
        cases.push_back({std::string("cumsum_") + c.name + "_" + tag(dt),
                         tol(dt, 1e-3), [=](Suite &s) {
                           TensorRef x = s.random(dt, c.shape);
                           TensorRef y = c.inPlace ? x : s.empty(dt, c.shape);
                           cumSum(*s.ctx, "cumsum", c.axis, c.exclusive,
                                  c.reverse, x, y);
                           return std::vector<TensorRef>{y};
                         }});
    for (DType dt : {DType::I32, DType::I64})
      for (S c : {S{"rows", {9, 3001}, 1, true, false, false},
                  S{"middle_axis", {4, 40, 9}, 1, false, true, false},
                  S{"rows_in_place", {2, 513}, 1, false, true, true}})
        cases.push_back(
            {std::string("cumsum_") + c.name + "_" + tag(dt), 0, [=](Suite &s) {
               int64_t n = 1;
               for (int64_t d : c.shape)
                 n *= d;
               std::vector<double> values;
               for (int64_t i = 0; i < n; ++i)
                 values.push_back(double((i * 7919) % 2001 - 1000));
               TensorRef x = s.ints(dt, c.shape, values);
               TensorRef y = c.inPlace ? x : s.empty(dt, c.shape);
               cumSum(*s.ctx, "cumsum", c.axis, c.exclusive, c.reverse, x, y);
               return std::vector<TensorRef>{y};
             }});
  }

  // Long reductions split over blocks through a workspace (bias and
  // per-channel gradients), and the same without one.
  {
    struct R {
      const char *name;
      std::vector<int64_t> in;
      std::vector<int> axes;
      ReduceOp op;
      std::vector<int64_t> out;
    };
    for (R r :
         {R{"bias_grad", {64, 197, 96}, {0, 1}, ReduceOp::Sum, {96}},
          R{"channel", {16, 24, 30, 30}, {0, 2, 3}, ReduceOp::Sum, {24}},
          R{"channel_odd", {5, 7, 9, 13}, {0, 2, 3}, ReduceOp::Mean, {7}},
          R{"few_rows", {3, 50021}, {1}, ReduceOp::Mean, {3}},
          R{"outer_inner", {40, 3, 500, 5}, {0, 2}, ReduceOp::Max, {3, 5}}})
      for (bool split : {true, false})
        cases.push_back(
            {std::string("reduce_split_") + r.name +
                 (split ? "" : "_no_workspace"),
             1e-4, [=](Suite &s) {
               TensorRef x = s.random(DType::F32, r.in);
               TensorRef y = s.empty(DType::F32, r.out);
               TensorRef ws = s.empty(DType::F32, {64 * 1024});
               reduce(*s.ctx, "reduce", r.op, r.axes.data(), int(r.axes.size()),
                      x, y, split ? ws.data : nullptr, split ? ws.bytes() : 0);
               return std::vector<TensorRef>{y};
             }});
  }

  // Training-mode batch normalization (scalar and float4 paths, one and
  // several blocks per channel, fused relu) and its gradient, in place over
  // dY; the small case has 8 values per channel (ResNet-50's last stage at
  // 2 images of 64x64).
  {
    struct B {
      const char *name;
      std::vector<int64_t> shape;
      bool relu, workspace;
    };
    for (B b : {B{"odd_relu", {4, 12, 9, 9}, true, true},
                B{"vec", {6, 10, 8, 8}, false, true},
                B{"vec_no_workspace", {6, 10, 8, 8}, true, false},
                B{"long_channels", {32, 3, 40, 40}, false, true},
                B{"small_count", {2, 16, 2, 2}, false, true}})
      cases.push_back(
          {std::string("batch_norm_training_") + b.name, 5e-5, [=](Suite &s) {
             int64_t c = b.shape[1];
             TensorRef x = s.random(DType::F32, b.shape, 0.1, 3.0);
             TensorRef scale = s.random(DType::F32, {c}, 0.5, 1.5);
             TensorRef bias = s.random(DType::F32, {c});
             TensorRef y = s.empty(DType::F32, b.shape);
             TensorRef mean = s.empty(DType::F32, {c});
             TensorRef inv = s.empty(DType::F32, {c});
             TensorRef ws = s.empty(DType::F32, {c * 64});
             void *w = b.workspace ? ws.data : nullptr;
             size_t wb = b.workspace ? ws.bytes() : 0;
             batchNormTraining(*s.ctx, "bn", 1e-5f,
                               b.relu ? Activation::Relu : Activation::None, x,
                               scale, bias, y, mean, inv, w, wb);
             TensorRef runMean = s.random(DType::F32, {c});
             TensorRef runVar = s.random(DType::F32, {c}, 0.5, 1.5, true);
             batchNormRunningUpdate(*s.ctx, "bn_running", 0.9f, 1e-5f, mean,
                                    inv, runMean, runVar);
             TensorRef dy = s.random(DType::F32, b.shape);
             TensorRef dscale = s.empty(DType::F32, {c});
             TensorRef dbias = s.empty(DType::F32, {c});
             TensorRef dx = dy; // in place over dY
             batchNormTrainingGrad(*s.ctx, "bn_grad", x, dy, scale, mean, inv,
                                   dx, dscale, dbias, w, wb);
             return std::vector<TensorRef>{y,      mean, inv,    runMean,
                                           runVar, dx,   dscale, dbias};
           }});
  }
  // Mixed-precision training: low activations, f32 statistics and parameters.
  // Spatial sizes 81, 196 and 256 take one-element, 8-byte and 16-byte
  // loads.
  for (DType low : {DType::F16, DType::BF16})
    for (int64_t side : {9, 14, 16})
      cases.push_back(
          {std::string("batch_norm_training_") + tag(low) +
               (side == 9 ? "" : "_s" + std::to_string(side * side)),
           tol(low), [=](Suite &s) {
             std::vector<int64_t> shape = {4, 12, side, side};
             TensorRef x = s.random(low, shape, 0.1, 3.0);
             TensorRef scale = s.random(DType::F32, {12}, 0.5, 1.5);
             TensorRef bias = s.random(DType::F32, {12});
             TensorRef y = s.empty(low, shape);
             TensorRef mean = s.empty(DType::F32, {12});
             TensorRef inv = s.empty(DType::F32, {12});
             TensorRef ws = s.empty(DType::F32, {12 * 64});
             batchNormTraining(*s.ctx, "bn", 1e-5f, Activation::Relu, x, scale,
                               bias, y, mean, inv, ws.data, ws.bytes());
             TensorRef dy = s.random(low, shape);
             TensorRef dscale = s.empty(DType::F32, {12});
             TensorRef dbias = s.empty(DType::F32, {12});
             batchNormTrainingGrad(*s.ctx, "bn_grad", x, dy, scale, mean, inv,
                                   dy, dscale, dbias, ws.data, ws.bytes());
             return std::vector<TensorRef>{y, mean, inv, dy, dscale, dbias};
           }});
  for (DType low : {DType::F16, DType::BF16}) {
    cases.push_back(
        {std::string("layer_norm_grad_") + tag(low), tol(low), [=](Suite &s) {
           TensorRef x = s.random(low, {37, 96}, 0.1, 3.0);
           TensorRef dy = s.random(low, {37, 96});
           TensorRef scale = s.random(DType::F32, {96}, 0.5, 1.5);
           TensorRef dx = s.empty(low, {37, 96});
           TensorRef dscale = s.empty(DType::F32, {96});
           TensorRef dbias = s.empty(DType::F32, {96});
           TensorRef ws = s.empty(DType::F32, {16 * 1024 + 64 * 96});
           layerNormGrad(*s.ctx, "ln_grad", 1e-5f, x, dy, scale, dx, dscale,
                         dbias, ws.data, ws.bytes());
           return std::vector<TensorRef>{dx, dscale, dbias};
         }});
    // Updates with a low gradient under dynamic loss scaling: a clean step
    // (unscaled by 1 / 1024), then a skipped one (nothing written), the
    // scale's update after each, and the overflow check over a low gradient,
    // an f32 one and an accumulator.
    cases.push_back(
        {std::string("loss_scaled_updates_") + tag(low), 1e-5, [=](Suite &s) {
           const int64_t n = 10007;
           TensorRef param = s.random(DType::F32, {n});
           TensorRef m = s.empty(DType::F32, {n});
           TensorRef v = s.empty(DType::F32, {n});
           TensorRef w = s.random(DType::F32, {n});
           TensorRef buf = s.empty(DType::F32, {n});
           fill(*s.ctx, "zero", 0.0, m);
           fill(*s.ctx, "zero", 0.0, v);
           fill(*s.ctx, "zero", 0.0, buf);
           TensorRef grad = s.random(low, {n}, 10.0, 1000.0);
           TensorRef lr = s.upload(DType::F32, {}, {1e-2});
           TensorRef step = s.upload(DType::F32, {}, {2.0});
           TensorRef scale = s.upload(DType::F32, {}, {1024.0});
           TensorRef state = s.upload(DType::F32, {2}, {0.0, 1.0});
           TensorRef found = s.empty(DType::F32, {});
           TensorRef f32grad = s.random(DType::F32, {333});
           TensorRef sum = s.random(DType::F32, {n});
           TensorRef micro = s.upload(DType::F32, {}, {1.0});
           std::vector<double> values = s.read(grad);
           values[4321] = std::numeric_limits<double>::infinity();
           TensorRef bad = s.upload(low, {n}, values);
           std::vector<TensorRef> outputs;
           for (TensorRef g : {grad, bad}) {
             // The low gradient second: its inf is in chunk 1 of the
             // second tensor of the launch (kFoundInfChunk = 4096).
             TensorRef grads[2] = {f32grad, g};
             foundInf(*s.ctx, "found_inf", grads, 2, &sum, 1, &micro, found);
             outputs.push_back(s.empty(DType::F32, {}));
             copy(*s.ctx, "flag", found, outputs.back());
             LossScaling scaling{scale, found, state};
             adamwUpdate(*s.ctx, "adamw", 0.9f, 0.999f, 1e-8f, 1e-2f, param, g,
                         m, v, lr, step, nullptr, &scaling);
             sgdUpdate(*s.ctx, "sgd", 0.9f, 1e-2f, w, g, &buf, lr, nullptr,
                       &scaling);
             updateLossScale(*s.ctx, "scale", 2.0f, 0.5f, 3, scale, state,
                             found);
           }
           for (TensorRef t : {param, m, v, w, buf, scale, state})
             outputs.push_back(t);
           return outputs;
         }});
  }
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{37, 96}, std::vector<int64_t>{5, 7, 200},
        std::vector<int64_t>{1000, 33}})
    cases.push_back({"layer_norm_grad_" + std::to_string(shape.back()), 5e-5,
                     [=](Suite &s) {
                       int64_t cols = shape.back();
                       TensorRef x = s.random(DType::F32, shape, 0.1, 3.0);
                       TensorRef dy = s.random(DType::F32, shape);
                       TensorRef scale = s.random(DType::F32, {cols}, 0.5, 1.5);
                       TensorRef dx = s.empty(DType::F32, shape);
                       TensorRef dscale = s.empty(DType::F32, {cols});
                       TensorRef dbias = s.empty(DType::F32, {cols});
                       TensorRef ws =
                           s.empty(DType::F32, {16 * 1024 + 64 * cols});
                       layerNormGrad(*s.ctx, "ln_grad", 1e-5f, x, dy, scale, dx,
                                     dscale, dbias, ws.data, ws.bytes());
                       return std::vector<TensorRef>{dx, dscale, dbias};
                     }});
}

} // namespace memopt::rt::suite
