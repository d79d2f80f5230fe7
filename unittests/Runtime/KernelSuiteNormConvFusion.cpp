//===- KernelSuiteNormConvFusion.cpp - batch-norm -> ReLU -> conv engines -===//
//
// The kernel suite's fused normalization-ReLU convolutions (normReluConv,
// normReluConvBackwardFilter: a training step's relu(batch_norm(x)) applied
// as the convolution loads x) on each CUDA engine: cuDNN's scale-bias-relu
// fusion forced, memopt's apply + conv forced, and the measured choice (the
// suite's own context: both timed at the first call, the faster from the
// second). The host computes every case with its reference (r = the prologue
// rounded to x's dtype, then its convolution), whatever the engine. Shapes:
// ResNet-50's channels-last f16 / bf16 convolutions of a bottleneck (3x3 at
// strides 1 and 2, 1x1 widening and narrowing; one 1x1 with the
// convolution's own bias, as DenseNet's) at batch 2, and one f32 NCHW case;
// scale and bias of both signs, so that the ReLU zeroes about half of
// the inputs. Tolerances as the convolution cases'.
//
//===----------------------------------------------------------------------===//

#include "KernelSuite.h"
#include "memopt/Runtime/Workspace.h"

namespace memopt::rt::suite {

namespace {

struct NormConvCase {
  const char *name;
  DType dtype;
  bool channelsLast;
  int64_t batch, channels, height, width; ///< x
  int64_t outChannels, kernel, stride, pad;
  bool convBias; ///< the convolution's own bias (forward cases)
};

const std::vector<NormConvCase> &normConvCases() {
  // clang-format off
  static const std::vector<NormConvCase> cases = {
      // name, dtype, channels-last, N, C, H, W, M, kernel, stride, pad,
      // conv bias
      {"3x3_s1_c64_f16", DType::F16, true, 2, 64, 56, 56, 64, 3, 1, 1, false},
      {"3x3_s1_c64_bf16", DType::BF16, true, 2, 64, 56, 56, 64, 3, 1, 1, false},
      {"3x3_s2_c128_f16", DType::F16, true, 2, 128, 56, 56, 128, 3, 2, 1, false},
      {"3x3_s2_c128_bf16", DType::BF16, true, 2, 128, 56, 56, 128, 3, 2, 1, false},
      {"1x1_c64_256_f16", DType::F16, true, 2, 64, 56, 56, 256, 1, 1, 0, false},
      {"1x1_c256_64_bf16", DType::BF16, true, 2, 256, 56, 56, 64, 1, 1, 0, false},
      {"1x1_c512_128_f16", DType::F16, true, 2, 512, 28, 28, 128, 1, 1, 0, false},
      {"1x1_c128_32_bias_f16", DType::F16, true, 2, 128, 28, 28, 32, 1, 1, 0, true},
      {"3x3_s1_c16_nchw_f32", DType::F32, false, 2, 16, 14, 14, 32, 3, 1, 1, false},
  };
  // clang-format on
  return cases;
}

struct Engine {
  const char *name;
  Context *Suite::*context; ///< null: the suite's own (measured) context
};

} // namespace

void addNormConvFusionCases(std::vector<Case> &cases) {
  const Engine engines[3] = {{"cudnn", &Suite::cudnnConv},
                             {"memopt", &Suite::memoptConv},
                             {"measured", nullptr}};
  for (const NormConvCase &v : normConvCases())
    for (bool backward : {false, true})
      for (const Engine &engine : engines) {
        if (backward && v.convBias)
          continue;
        std::string name = std::string(backward ? "norm_relu_conv_dw_fusion_"
                                                : "norm_relu_conv_fusion_") +
                           v.name + "_" + engine.name;
        cases.push_back(
            {name, tol(v.dtype, 1e-3), [=](Suite &s) {
               Context &ctx = engine.context ? *(s.*engine.context) : *s.ctx;
               int64_t out = (v.height + 2 * v.pad - v.kernel) / v.stride + 1;
               int64_t outW = (v.width + 2 * v.pad - v.kernel) / v.stride + 1;
               std::vector<int64_t> xShape, yShape, wShape;
               if (v.channelsLast) {
                 xShape = {v.batch, v.height, v.width, v.channels};
                 yShape = {v.batch, out, outW, v.outChannels};
                 wShape = {v.outChannels, v.kernel, v.kernel, v.channels};
               } else {
                 xShape = {v.batch, v.channels, v.height, v.width};
                 yShape = {v.batch, v.outChannels, out, outW};
                 wShape = {v.outChannels, v.channels, v.kernel, v.kernel};
               }
               TensorRef x = s.random(v.dtype, xShape);
               TensorRef scale = s.random(DType::F32, {v.channels}, 0.2, 1.5);
               TensorRef bias = s.random(DType::F32, {v.channels}, 0.05, 1.0);
               ConvParams p;
               p.channelsLast = v.channelsLast;
               for (int i = 0; i < 2; ++i) {
                 p.strides[i] = v.stride;
                 p.padsBegin[i] = p.padsEnd[i] = v.pad;
               }
               TensorRef operand = backward
                                       ? s.random(v.dtype, yShape, 0.05, 0.5)
                                       : s.random(v.dtype, wShape, 0.05, 0.5);
               TensorRef result = s.empty(v.dtype, backward ? wShape : yShape);
               TensorRef w = backward ? result : operand;
               TensorRef y = backward ? operand : result;
               size_t ws = size_t(workspace::normReluConvTempBytes(
                               int64_t(x.bytes()))) +
                           convWorkspaceBound(p, x, w, y);
               TensorRef workspace = s.empty(DType::U8, {int64_t(ws)});
               TensorRef convBias = s.random(v.dtype, {v.outChannels});
               // The first call chooses (and, measured, times both
               // engines); a second runs the choice.
               for (int call = 0; call < 2; ++call) {
                 if (backward)
                   normReluConvBackwardFilter(ctx, s.name.c_str(), p, x,
                                              operand, scale, bias, result,
                                              workspace.data, ws);
                 else
                   normReluConv(ctx, s.name.c_str(), p, x, operand, scale, bias,
                                v.convBias ? &convBias : nullptr, result,
                                workspace.data, ws);
               }
               synchronize(ctx);
               return std::vector<TensorRef>{result};
             }});
      }
}

} // namespace memopt::rt::suite
