//===- KernelSuiteDepthwise.cpp - channels-last depthwise convolutions ----===//
//
// The kernel suite's channels-last depthwise convolutions (group == C_in ==
// C_out) on each CUDA engine: cuDNN forced, memopt's depthwise kernel forced
// (DepthwiseKernels.cu) and the measured choice (the suite's own context,
// which times both at a call site's first call and runs the faster from the
// second). The host backend computes every case with its reference kernel,
// whatever the engine. The shapes cover the kernel's fast paths (3x3 at
// strides 1 and 2, with 4 and 2 pixels per thread, 8- and 4-wide vectors;
// the shared-memory tiled 5x5 and 7x7 at strides 1 and 2 over several
// spatial tiles, partial ones at the right and bottom edges among them, 16-
// and 8-byte staging copies, channel tiles that are not full: 40, 136), its
// generic path (dilation, a non-square filter, asymmetric
// pads, 9x9, 1-D), odd spatial sizes and output widths that are no multiple
// of the pixels per thread, channel counts that are not a multiple of the
// vector width (83: scalar lanes; 36 and 20: 4-wide half vectors), every
// epilogue (bias, ReLU, GELU, a residual separate and in place) and f32 /
// f16 / bf16.
//
//===----------------------------------------------------------------------===//

#include "KernelSuite.h"

namespace memopt::rt::suite {

namespace {

struct DepthwiseCase {
  const char *name;
  int64_t batch, channels;
  std::vector<int64_t> in, kernel; ///< spatial: [H, W] or [W]
  std::vector<int64_t> strides, dilations, padsBegin, padsEnd;
  bool bias;
  Activation act;
};

const std::vector<DepthwiseCase> &depthwiseCases() {
  // clang-format off
  static const std::vector<DepthwiseCase> cases = {
      // name, N, C, in, kernel, strides, dilations, pads begin, pads end,
      // bias, activation
      {"k3s1_c24", 2, 24, {17, 19}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, true, Activation::Relu},
      {"k3s2_c83", 2, 83, {15, 15}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, true, Activation::None},
      {"k3s2_c64", 2, 64, {15, 17}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, true, Activation::Relu},
      {"k5s1_c36", 1, 36, {13, 11}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}, true, Activation::Gelu},
      {"k5s1_c48", 2, 48, {13, 13}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}, false, Activation::Relu},
      {"k5s2_c40", 2, 40, {21, 21}, {5, 5}, {2, 2}, {1, 1}, {2, 2}, {2, 2}, false, Activation::None},
      {"k7s1_c96", 2, 96, {14, 14}, {7, 7}, {1, 1}, {1, 1}, {3, 3}, {3, 3}, true, Activation::None},
      {"k7s2_c20", 1, 20, {15, 17}, {7, 7}, {2, 2}, {1, 1}, {3, 3}, {3, 3}, true, Activation::Relu},
      {"k7s1_tiles_c40", 2, 40, {29, 37}, {7, 7}, {1, 1}, {1, 1}, {3, 3}, {3, 3}, true, Activation::Gelu},
      {"k5s2_tiles_c136", 1, 136, {33, 27}, {5, 5}, {2, 2}, {1, 1}, {2, 2}, {1, 1}, true, Activation::None},
      {"k3d2_c16", 2, 16, {11, 13}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}, true, Activation::None},
      {"k3x5_c32", 1, 32, {9, 12}, {3, 5}, {1, 2}, {1, 1}, {1, 2}, {1, 2}, false, Activation::GeluTanh},
      {"asym_c48", 2, 48, {10, 10}, {3, 3}, {1, 1}, {1, 1}, {0, 1}, {2, 1}, true, Activation::None},
      {"k9s1_c8", 1, 8, {20, 20}, {9, 9}, {1, 1}, {1, 1}, {4, 4}, {4, 4}, true, Activation::None},
      {"1d_k5_c64", 2, 64, {37}, {5}, {1}, {1}, {2}, {2}, true, Activation::Relu},
  };
  // clang-format on
  return cases;
}

/// The output size of one spatial axis.
int64_t outSize(const DepthwiseCase &v, size_t axis) {
  int64_t span = v.dilations[axis] * (v.kernel[axis] - 1) + 1;
  return (v.in[axis] + v.padsBegin[axis] + v.padsEnd[axis] - span) /
             v.strides[axis] +
         1;
}

struct Engine {
  const char *name;
  Context *Suite::*context; ///< null: the suite's own (measured) context
};

} // namespace

void addDepthwiseCases(std::vector<Case> &cases) {
  const DType floats[3] = {DType::F32, DType::F16, DType::BF16};
  const Engine engines[3] = {{"cudnn", &Suite::cudnnConv},
                             {"memopt", &Suite::memoptConv},
                             {"measured", nullptr}};
  for (DType dt : floats)
    for (const DepthwiseCase &v : depthwiseCases())
      for (const Engine &engine : engines)
        for (int residual = 0; residual < 3; ++residual) {
          // Residuals (0: none, 1: separate, 2: in place) on the 2-D cases
          // with an epilogue of their own, one per dtype and engine.
          if (residual && (v.in.size() != 2 || !v.bias))
            continue;
          std::string name = std::string("conv_dw_nhwc_") + v.name + "_" +
                             tag(dt) + "_" + engine.name +
                             (residual == 1   ? "_residual"
                              : residual == 2 ? "_residual_inplace"
                                              : "");
          cases.push_back(
              {name, tol(dt, 1e-4), [=](Suite &s) {
                 Context &ctx = engine.context ? *(s.*engine.context) : *s.ctx;
                 std::vector<int64_t> xShape = {v.batch}, yShape = {v.batch},
                                      wShape = {v.channels};
                 for (size_t a = 0; a < v.in.size(); ++a) {
                   xShape.push_back(v.in[a]);
                   yShape.push_back(outSize(v, a));
                   wShape.push_back(v.kernel[a]);
                 }
                 xShape.push_back(v.channels);
                 yShape.push_back(v.channels);
                 wShape.push_back(1);
                 TensorRef x = s.random(dt, xShape),
                           w = s.random(dt, wShape, 0.05, 0.5),
                           bias = s.random(dt, {v.channels});
                 TensorRef z = s.random(dt, yShape);
                 TensorRef y = residual == 2 ? z : s.empty(dt, yShape);
                 ConvParams p;
                 p.spatialRank = int(v.in.size());
                 p.group = v.channels;
                 p.activation = v.act;
                 p.channelsLast = true;
                 for (size_t a = 0; a < v.in.size(); ++a) {
                   p.strides[a] = v.strides[a];
                   p.dilations[a] = v.dilations[a];
                   p.padsBegin[a] = v.padsBegin[a];
                   p.padsEnd[a] = v.padsEnd[a];
                 }
                 size_t ws = convWorkspaceBound(p, x, w, y);
                 TensorRef workspace = s.empty(DType::U8, {int64_t(ws)});
                 const TensorRef *b = v.bias ? &bias : nullptr;
                 // The first call chooses (and, measured, times
                 // both engines); a second runs the choice. The
                 // in-place residual is used up by the first.
                 int calls = residual == 2 ? 1 : 2;
                 for (int call = 0; call < calls; ++call) {
                   if (residual)
                     convResidual(ctx, s.name.c_str(), p, x, w, b, z, y,
                                  workspace.data, ws);
                   else
                     conv(ctx, s.name.c_str(), p, x, w, b, y, workspace.data,
                          ws);
                 }
                 synchronize(ctx);
                 return std::vector<TensorRef>{y};
               }});
        }
}

} // namespace memopt::rt::suite
