//===- KernelSuitePerf.cpp - the suite's --perf timings -------------------===//
//
// memopt-kernel-suite-cuda --perf [FILTER]: a few large kernels timed (median
// of 20 runs after warm-up) with their effective bandwidth / throughput.
//
//===----------------------------------------------------------------------===//

#include "KernelSuite.h"
#include "memopt/Runtime/Workspace.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace memopt::rt::suite {

/// Times a few large kernels (median of 20 runs after warm-up) and prints
/// effective bandwidth / throughput, for the performance notes.
namespace {

/// MEMOPT_ATTENTION_ENGINE=cudnn on the CUDA backend: the perf context runs
/// attention on cuDNN's SDPA (memopt's kernels otherwise).
bool perfRunsCudnn() {
  const char *engine = std::getenv("MEMOPT_ATTENTION_ENGINE");
  return engine && !std::strcmp(engine, "cudnn") &&
         !std::strcmp(backendName(), "cuda");
}

/// The workspace a program for target cuda plans for cuDNN's SDPA forward
/// of Q, K, V = t[0..2] (cudnnAttentionWorkspaceBound); an empty tensor
/// when the perf runs memopt's kernels, which then run fused.
TensorRef cudnnWorkspace(Suite &s, const AttentionParams &params,
                         const std::vector<TensorRef> &t) {
  size_t bytes = perfRunsCudnn()
                     ? cudnnAttentionWorkspaceBound(params, t[0], t[1], t[2],
                                                    nullptr, false, false)
                     : 0;
  return s.empty(DType::U8, {int64_t(bytes)});
}

} // namespace

int runPerf(Context *ctx, const std::string &filter) {
  struct Perf {
    std::string name;
    double bytes, flops;
    std::function<void(Suite &, std::vector<TensorRef> &)> setup;
    std::function<void(Context &, std::vector<TensorRef> &)> run;
  };
  const int64_t big = int64_t(1) << 26;
  // [N, C, H, W] or, channels-last, [N, H, W, C].
  auto layoutShape = [](int64_t n, int64_t c, int64_t h, int64_t w, bool last) {
    return last ? std::vector<int64_t>{n, h, w, c}
                : std::vector<int64_t>{n, c, h, w};
  };
  // A depthwise convolution channels-last, f16, batch 32, padding k / 2,
  // bias + ReLU: its bytes are x, y and the filter.
  auto depthwisePerf = [&](int64_t channels, int64_t size, int64_t kernel,
                           int64_t stride) {
    int64_t out = (size - 1) / stride + 1;
    std::string name =
        "depthwise" + std::to_string(kernel) + "x" + std::to_string(kernel) +
        "s" + std::to_string(stride) + "_f16_32x" + std::to_string(size) + "x" +
        std::to_string(size) + "x" + std::to_string(channels) + "_nhwc";
    ConvParams p;
    p.group = channels;
    p.channelsLast = true;
    p.activation = Activation::Relu;
    for (int i = 0; i < 2; ++i) {
      p.strides[i] = stride;
      p.padsBegin[i] = p.padsEnd[i] = kernel / 2;
    }
    return Perf{
        name,
        2.0 * (32.0 * channels * (size * size + out * out) +
               double(channels) * kernel * kernel),
        2.0 * 32 * channels * out * out * kernel * kernel,
        [=](Suite &s, std::vector<TensorRef> &t) {
          t = {s.random(DType::F16, {32, size, size, channels}),
               s.random(DType::F16, {channels, kernel, kernel, 1}, 0.01, 0.1),
               s.random(DType::F16, {channels}),
               s.empty(DType::F16, {32, out, out, channels})};
          t.push_back(s.empty(
              DType::U8, {int64_t(convWorkspaceBound(p, t[0], t[1], t[3]))}));
        },
        [=](Context &c, std::vector<TensorRef> &t) {
          conv(c, "depthwise", p, t[0], t[1], &t[2], t[3], t[4].data,
               t[4].bytes());
        }};
  };
  auto bnTrainingPerf = [&](const char *name, bool last) {
    std::vector<int64_t> shape = layoutShape(64, 64, 56, 56, last);
    double elements = 64.0 * 64 * 56 * 56;
    return Perf{
        name, 8.0 * 2 * elements, 0,
        [=](Suite &s, std::vector<TensorRef> &t) {
          t = {s.random(DType::BF16, shape),
               s.random(DType::F32, {64}),
               s.random(DType::F32, {64}),
               s.empty(DType::BF16, shape),
               s.empty(DType::F32, {64}),
               s.empty(DType::F32, {64}),
               s.random(DType::BF16, shape),
               s.empty(DType::F32, {64}),
               s.empty(DType::F32, {64}),
               s.empty(DType::U8, {workspace::batchNormTrainingLastBytes(
                                      64, 64 * 56 * 56)}),
               s.empty(DType::BF16, shape)};
        },
        [=](Context &c, std::vector<TensorRef> &t) {
          batchNormTraining(c, "bn", 1e-5f, Activation::Relu, t[0], t[1], t[2],
                            t[3], t[4], t[5], t[9].data, t[9].bytes(), last);
          batchNormTrainingGrad(c, "bn_grad", t[0], t[6], t[1], t[4], t[5],
                                t[10], t[7], t[8], t[9].data, t[9].bytes(),
                                last);
        }};
  };
  auto convGradientsPerf = [&](const char *name, bool last) {
    std::vector<int64_t> act = layoutShape(64, 64, 56, 56, last);
    std::vector<int64_t> filter = layoutShape(64, 64, 3, 3, last);
    return Perf{name, 0, 2 * 2.0 * 64 * 56 * 56 * 64 * 64 * 9,
                [=](Suite &s, std::vector<TensorRef> &t) {
                  t = {s.random(DType::BF16, act),
                       s.random(DType::BF16, filter),
                       s.random(DType::BF16, act),
                       s.empty(DType::BF16, act),
                       s.empty(DType::BF16, filter),
                       s.empty(DType::U8, {int64_t(64) << 20})};
                },
                [=](Context &c, std::vector<TensorRef> &t) {
                  ConvParams p;
                  p.channelsLast = last;
                  for (int i = 0; i < 2; ++i)
                    p.padsBegin[i] = p.padsEnd[i] = 1;
                  convTranspose(c, "conv_dx", p, t[2], t[1], nullptr, t[3],
                                t[5].data, t[5].bytes());
                  convBackwardFilter(c, "conv_dw", p, t[0], t[2], t[4],
                                     t[5].data, t[5].bytes());
                }};
  };
  auto maxPoolGradPerf = [&](const char *name, bool last) {
    std::vector<int64_t> in = layoutShape(64, 64, 112, 112, last);
    std::vector<int64_t> out = layoutShape(64, 64, 56, 56, last);
    double elements = 64.0 * 64 * 112 * 112;
    return Perf{name, 2.0 * (2 * elements + elements / 4), 0,
                [=](Suite &s, std::vector<TensorRef> &t) {
                  t = {s.random(DType::BF16, in), s.random(DType::BF16, out),
                       s.empty(DType::BF16, in)};
                },
                [=](Context &c, std::vector<TensorRef> &t) {
                  PoolParams p;
                  p.channelsLast = last;
                  for (int i = 0; i < 2; ++i) {
                    p.kernel[i] = 3;
                    p.strides[i] = 2;
                    p.padsBegin[i] = p.padsEnd[i] = 1;
                  }
                  poolGrad(c, "pool_grad", p, t[0], t[1], t[2]);
                }};
  };
  std::vector<Perf> perfs = {
      {"add_f16_64M", 3.0 * 2 * big, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {big}), s.random(DType::F16, {big}),
              s.empty(DType::F16, {big})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         binary(c, "add", BinaryOp::Add, t[0], t[1], t[2]);
       }},
      {"rowbias_add_f16_8192x4096", 2.0 * 2 * 8192 * 4096, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {8192, 4096}), s.random(DType::F16, {4096}),
              s.empty(DType::F16, {8192, 4096})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         binary(c, "add", BinaryOp::Add, t[0], t[1], t[2]);
       }},
      {"gelu_bf16_64M", 2.0 * 2 * big, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::BF16, {big}), s.empty(DType::BF16, {big})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         unary(c, "gelu", UnaryOp::Gelu, 0, 0, t[0], t[1]);
       }},
      {"layernorm_f16_16384x1024", 2.0 * 2 * 16384 * 1024, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {16384, 1024}), s.random(DType::F16, {1024}),
              s.empty(DType::F16, {16384, 1024})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         layerNorm(c, "ln", 1, 1e-5f, t[0], t[1], nullptr, t[2]);
       }},
      // ResNet-50's first stage at batch 64 (bf16 training): batch
      // normalization forward + backward (x read twice and y written, then x
      // and dy read twice and dx written), the 3x3 convolution's data and
      // filter gradients, the stem's max-pool gradient, channels-first and
      // channels-last (memopt-layout on a training step).
      bnTrainingPerf("bn_training_fwd_bwd_bf16_64x64x56x56", false),
      bnTrainingPerf("bn_training_fwd_bwd_bf16_64x56x56x64_nhwc", true),
      convGradientsPerf("conv3x3_gradients_bf16_64x64x56x56", false),
      convGradientsPerf("conv3x3_gradients_bf16_64x56x56x64_nhwc", true),
      maxPoolGradPerf("max_pool_grad_bf16_64x64x112x112", false),
      maxPoolGradPerf("max_pool_grad_bf16_64x112x112x64_nhwc", true),
      {"softmax_f16_16384x1000", 2.0 * 2 * 16384 * 1000, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {16384, 1000}),
              s.empty(DType::F16, {16384, 1000})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         softmax(c, "sm", 1, false, t[0], t[1]);
       }},
      // BERT-base / GPT-2 small attention: 8 sequences x 12 heads x 512
      // tokens x 64; flops count both contractions over every score.
      {"attention_bf16_causal_kt_8x12x512x64", 0, 2.0 * 96 * 512 * 513 * 64,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::BF16, {8, 12, 512, 64}),
              s.random(DType::BF16, {8, 12, 64, 512}),
              s.random(DType::BF16, {8, 12, 512, 64}),
              s.empty(DType::BF16, {8, 12, 512, 64})};
         AttentionParams p;
         p.keyTransposed = true;
         t.push_back(cudnnWorkspace(s, p, t));
       },
       [](Context &c, std::vector<TensorRef> &t) {
         AttentionParams p;
         p.scale = 0.125f;
         p.causal = true;
         p.keyTransposed = true;
         attention(c, "attn", p, t[0], t[1], t[2], nullptr, t[3],
                   t[4].bytes() ? t[4].data : nullptr, t[4].bytes());
       }},
      {"attention_f16_8x12x512x128", 0, 4.0 * 96 * 512 * 512 * 128,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {8, 12, 512, 128}),
              s.random(DType::F16, {8, 12, 512, 128}),
              s.random(DType::F16, {8, 12, 512, 128}),
              s.empty(DType::F16, {8, 12, 512, 128})};
         t.push_back(cudnnWorkspace(s, AttentionParams(), t));
       },
       [](Context &c, std::vector<TensorRef> &t) {
         AttentionParams p;
         p.scale = 0.088f;
         attention(c, "attn", p, t[0], t[1], t[2], nullptr, t[3],
                   t[4].bytes() ? t[4].data : nullptr, t[4].bytes());
       }},
      // The same attention unfused (cuBLASLt, softmax, cuBLASLt) with its
      // [8, 12, 512, 512] scores: the fused kernel's speed reference.
      {"unfused_attention_f16_8x12x512x64", 0, 4.0 * 96 * 512 * 512 * 64,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {8, 12, 512, 64}),
              s.random(DType::F16, {8, 12, 512, 64}),
              s.random(DType::F16, {8, 12, 512, 64}),
              s.empty(DType::F16, {8, 12, 512, 512}),
              s.empty(DType::F16, {8, 12, 512, 64})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         MatmulParams scores;
         scores.transB = true;
         scores.alpha = 0.125f;
         matmul(c, "qk", scores, t[0], t[1], nullptr, t[3]);
         softmax(c, "softmax", 3, false, t[3], t[3]);
         matmul(c, "pv", MatmulParams(), t[3], t[2], nullptr, t[4]);
       }},
      {"unfused_attention_f32_8x12x512x64", 0, 4.0 * 96 * 512 * 512 * 64,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F32, {8, 12, 512, 64}),
              s.random(DType::F32, {8, 12, 512, 64}),
              s.random(DType::F32, {8, 12, 512, 64}),
              s.empty(DType::F32, {8, 12, 512, 512}),
              s.empty(DType::F32, {8, 12, 512, 64})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         MatmulParams scores;
         scores.transB = true;
         scores.alpha = 0.125f;
         matmul(c, "qk", scores, t[0], t[1], nullptr, t[3]);
         softmax(c, "softmax", 3, false, t[3], t[3]);
         matmul(c, "pv", MatmulParams(), t[3], t[2], nullptr, t[4]);
       }},
      {"softmax_f32_2048x8192", 2.0 * 4 * 2048 * 8192, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F32, {2048, 8192}),
              s.empty(DType::F32, {2048, 8192})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         softmax(c, "sm", 1, false, t[0], t[1]);
       }},
      {"transpose_f16_nchw_nhwc_32x256x56x56", 2.0 * 2 * 32 * 256 * 56 * 56, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {32, 256, 56, 56}),
              s.empty(DType::F16, {32, 56, 56, 256})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         int perm[4] = {0, 2, 3, 1};
         transpose(c, "tr", perm, t[0], t[1]);
       }},
      {"transpose_f16_swin_window_32x8x7x8x7x96", 2.0 * 2 * 32 * 56 * 56 * 96,
       0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {32, 8, 7, 8, 7, 96}),
              s.empty(DType::F16, {32, 8, 8, 7, 7, 96})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         int perm[6] = {0, 1, 3, 2, 4, 5};
         transpose(c, "tr", perm, t[0], t[1]);
       }},
      {"transpose_f16_heads_8x512x12x64", 2.0 * 2 * 8 * 512 * 768, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {8, 512, 12, 64}),
              s.empty(DType::F16, {8, 12, 512, 64})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         int perm[4] = {0, 2, 1, 3};
         transpose(c, "tr", perm, t[0], t[1]);
       }},
      {"transpose_f16_keys_8x12x512x64", 2.0 * 2 * 8 * 512 * 768, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {8, 512, 12, 64}),
              s.empty(DType::F16, {8, 12, 64, 512})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         int perm[4] = {0, 2, 3, 1};
         transpose(c, "tr", perm, t[0], t[1]);
       }},
      {"slice_f32_half_rows_4096x2304", 2.0 * 4 * 4096 * 768, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F32, {4096, 2304}),
              s.empty(DType::F32, {4096, 768})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         int64_t starts[2] = {0, 768}, steps[2] = {1, 1};
         slice(c, "sl", starts, steps, t[0], t[1]);
       }},
      {"linear_cross_entropy_f16_gpt2_4096x768x50257", 0,
       8.0 * 4096 * 768 * 50257,
       [&](Suite &s, std::vector<TensorRef> &t) {
         std::vector<double> y;
         for (int64_t r = 0; r < 4096; ++r)
           y.push_back(double((r * 7919) % 50257));
         t = {s.random(DType::F16, {4096, 768}, 0.01, 0.1),
              s.random(DType::F16, {50257, 768}, 0.01, 0.1),
              s.ints(DType::I64, {4096}, y),
              s.empty(DType::F32, {}),
              s.empty(DType::F32, {4096}),
              s.upload(DType::F32, {}, {1.0}),
              s.empty(DType::F16, {4096, 768}),
              s.empty(DType::F16, {50257, 768}),
              s.empty(DType::U8, {int64_t(linearCrossEntropyWorkspaceBytes(
                                     4096, 50256, DType::F16))})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         LinearCrossEntropyParams p;
         size_t bytes = t[8].bytes();
         linearCrossEntropy(c, "lce", p, t[0], t[1], t[2], t[3], t[4],
                            t[8].data, bytes);
         linearCrossEntropyGrad(c, "lce_grad", p, t[0], t[1], t[2], t[4], t[5],
                                t[6], t[7], t[8].data, bytes);
       }},
      {"matmul_bf16_4096^3", 0, 2.0 * 4096 * 4096 * 4096,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::BF16, {4096, 4096}),
              s.random(DType::BF16, {4096, 4096}),
              s.empty(DType::BF16, {4096, 4096})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         matmul(c, "mm", MatmulParams(), t[0], t[1], nullptr, t[2]);
       }},
      {"matmul_f32_2048^3", 0, 2.0 * 2048 * 2048 * 2048,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F32, {2048, 2048}),
              s.random(DType::F32, {2048, 2048}),
              s.empty(DType::F32, {2048, 2048})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         matmul(c, "mm", MatmulParams(), t[0], t[1], nullptr, t[2]);
       }},
      {"conv3x3_f16_32x256x56x56", 0, 2.0 * 32 * 256 * 56 * 56 * 256 * 9,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {32, 256, 56, 56}),
              s.random(DType::F16, {256, 256, 3, 3}, 0.01, 0.1),
              s.empty(DType::F16, {32, 256, 56, 56}),
              s.empty(DType::U8, {64 << 20})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         ConvParams p;
         p.padsBegin[0] = p.padsBegin[1] = p.padsEnd[0] = p.padsEnd[1] = 1;
         conv(c, "conv", p, t[0], t[1], nullptr, t[2], t[3].data,
              convWorkspaceBound(p, t[0], t[1], t[2]));
       }},
      // Channels-last depthwise convolutions (ConvNeXt-T's first stage,
      // MobileNetV2's and EfficientNet-B0's): the engine the context
      // measures faster, or the one MEMOPT_CONV_ENGINE=memopt|cudnn forces
      // (bench/depthwise_conv_bench.py compares them against PyTorch).
      depthwisePerf(96, 56, 7, 1),
      depthwisePerf(144, 56, 3, 2),
      depthwisePerf(240, 28, 5, 1),
      {"maxpool3x3s2_f16_32x64x112x112", 2.0 * 32 * 64 * (112 * 112 + 56 * 56),
       0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {32, 64, 112, 112}),
              s.empty(DType::F16, {32, 64, 56, 56})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         PoolParams p;
         for (int i = 0; i < 2; ++i) {
           p.kernel[i] = 3;
           p.strides[i] = 2;
           p.padsBegin[i] = p.padsEnd[i] = 1;
         }
         pool(c, "pool", p, t[0], t[1]);
       }},
      {"reduce_mean_last_f32_8192x4096", 4.0 * 8192 * 4096, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F32, {8192, 4096}), s.empty(DType::F32, {8192})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         int axes[1] = {1};
         reduce(c, "mean", ReduceOp::Mean, axes, 1, t[0], t[1]);
       }},
  };
  // Attention as the compiler's programs call it: the fused kernel (no
  // workspace) against the chunked cuBLASLt path with a workspace that holds
  // 1 / chunks of the batch's scores. BERT-base / GPT-2 small (12 heads x
  // 512 x 64) at 8 and 1 sequences, ViT-B/16 (197 tokens) at 32 images.
  struct AttentionPerf {
    const char *model;
    int64_t batch, tokens;
    DType dtype;
    std::vector<int64_t> chunks;
  };
  for (const AttentionPerf &a :
       {AttentionPerf{"bert", 8, 512, DType::F32, {0, 1, 4, 8, 16}},
        AttentionPerf{"bert", 8, 512, DType::F16, {0, 1, 8}},
        AttentionPerf{"bert", 1, 512, DType::F32, {0, 1, 2, 4, 12}},
        AttentionPerf{"vit", 32, 197, DType::F32, {0, 1, 2, 8, 16}},
        AttentionPerf{"vit", 1, 197, DType::F32, {0, 1, 2, 12}}})
    for (int64_t chunks : a.chunks) {
      int64_t heads = a.batch * 12, tokens = a.tokens;
      std::vector<int64_t> shape = {a.batch, 12, tokens, 64};
      DType dt = a.dtype;
      size_t workspaceBytes =
          chunks ? attentionChunkBytes((heads + chunks - 1) / chunks, tokens,
                                       tokens, dt)
                 : 0;
      std::string name =
          std::string("attention_") + a.model + "_b" + std::to_string(a.batch) +
          "_" + dtypeName(dt) +
          (chunks ? "_chunks" + std::to_string(chunks) : std::string("_fused"));
      perfs.push_back(
          {name, 0, 4.0 * double(heads) * tokens * tokens * 64,
           [=](Suite &s, std::vector<TensorRef> &t) {
             t = {s.random(dt, shape), s.random(dt, shape), s.random(dt, shape),
                  s.empty(dt, shape),
                  s.empty(DType::F32,
                          {std::max<int64_t>(1, int64_t(workspaceBytes / 4))})};
           },
           [=](Context &c, std::vector<TensorRef> &t) {
             AttentionParams p;
             p.scale = 0.125f;
             attention(c, "attn", p, t[0], t[1], t[2], nullptr, t[3],
                       workspaceBytes ? t[4].data : nullptr, workspaceBytes);
           }});
    }

  // The attention backward (f32, and f16 as mixed-precision training runs
  // it) at ViT-B/16 (32 images x 12 heads x 197
  // tokens x 64) and GPT-2 small (8 x 12 heads x 512 x 64, causal): the
  // fused kernels against the chunked path with a workspace for 1 / chunks
  // of the batch; and the forward with its row statistics (training's
  // forward) against the plain one above. Flops: the five products of the
  // backward (two recomputed) over the unmasked scores. `_drop`: with a
  // training dropout of 0.1 (memopt's mask, drawn in the kernels: its cost).
  struct BackwardPerf {
    const char *model;
    int64_t batch, tokens;
    bool causal;
    std::vector<int64_t> chunks;
  };
  for (const BackwardPerf &a :
       {BackwardPerf{"vit", 32, 197, false, {0, 1, 2, 4}},
        BackwardPerf{"gpt2", 8, 512, true, {0, 1, 2, 4, 8}}})
    for (DType dt : {DType::F32, DType::F16})
      for (int64_t chunks : a.chunks)
        for (float ratio : {0.0f, 0.1f}) {
          int64_t heads = a.batch * 12, tokens = a.tokens;
          std::vector<int64_t> shape = {a.batch, 12, tokens, 64};
          std::vector<int64_t> statShape = {a.batch, 12, tokens, 2};
          int64_t items = chunks ? (heads + chunks - 1) / chunks : 0;
          size_t forwardBytes =
              chunks ? attentionChunkBytes(items, tokens, tokens, dt) : 0;
          size_t backwardBytes =
              chunks ? attentionBackwardChunkBytes(items, tokens, tokens, dt)
                     : 0;
          if (!chunks && perfRunsCudnn() && ratio == 0.0f) {
            // The room cuDNN's SDPA is planned (none for f32: the fused
            // kernels).
            TensorRef operand = makeTensor(nullptr, dt, 4, shape.data());
            AttentionParams p;
            forwardBytes = cudnnAttentionWorkspaceBound(
                p, operand, operand, operand, nullptr, true, false);
            backwardBytes = cudnnAttentionWorkspaceBound(
                p, operand, operand, operand, nullptr, false, true);
          }
          double scores = a.causal ? double(tokens) * (tokens + 1) / 2
                                   : double(tokens) * tokens;
          std::string suffix = std::string("_b") + std::to_string(a.batch) +
                               (chunks ? "_chunks" + std::to_string(chunks)
                                       : std::string("_fused")) +
                               (dt == DType::F32 ? "" : "_f16") +
                               (ratio > 0.0f ? "_drop" : "");
          // The parameters of every call; t[10] holds the dropout's key.
          auto paramsOf = [=](const std::vector<TensorRef> &t) {
            AttentionParams p;
            p.scale = 0.125f;
            p.causal = a.causal;
            p.dropoutRatio = ratio;
            p.dropoutStream = 3;
            p.dropoutKey = static_cast<const int64_t *>(t[10].data);
            return p;
          };
          auto setup = [=](Suite &s, std::vector<TensorRef> &t) {
            t = {s.random(dt, shape),
                 s.random(dt, shape),
                 s.random(dt, shape),
                 s.empty(dt, shape),
                 s.empty(DType::F32, statShape),
                 s.random(dt, shape, 0.1, 1.0),
                 s.empty(dt, shape),
                 s.empty(dt, shape),
                 s.empty(dt, shape),
                 s.empty(DType::F32,
                         {std::max<int64_t>(
                             1, int64_t(std::max(forwardBytes, backwardBytes) /
                                        4))}),
                 s.ints(DType::I64, {2}, {1234.0, 1.0})};
            attention(*s.ctx, "attn", paramsOf(t), t[0], t[1], t[2], nullptr,
                      t[3], forwardBytes ? t[9].data : nullptr, forwardBytes,
                      &t[4]);
          };
          perfs.push_back({std::string("attention_fwd_lse_") + a.model + suffix,
                           0, 4.0 * heads * scores * 64, setup,
                           [=](Context &c, std::vector<TensorRef> &t) {
                             attention(c, "attn", paramsOf(t), t[0], t[1], t[2],
                                       nullptr, t[3],
                                       forwardBytes ? t[9].data : nullptr,
                                       forwardBytes, &t[4]);
                           }});
          perfs.push_back({std::string("attention_bwd_") + a.model + suffix, 0,
                           10.0 * heads * scores * 64, setup,
                           [=](Context &c, std::vector<TensorRef> &t) {
                             attentionBackward(
                                 c, "attn_grad", paramsOf(t), t[0], t[1], t[2],
                                 nullptr, t[3], t[5], t[4], t[6], t[7], t[8],
                                 nullptr, backwardBytes ? t[9].data : nullptr,
                                 backwardBytes);
                           }});
        }

  for (Perf &p : perfs) {
    if (!filter.empty() && p.name.find(filter) == std::string::npos)
      continue;
    Suite suite;
    suite.ctx = ctx;
    std::vector<TensorRef> tensors;
    p.setup(suite, tensors);
    for (int i = 0; i < 3; ++i)
      p.run(*ctx, tensors);
    synchronize(*ctx);
    std::vector<double> times;
    for (int i = 0; i < 20; ++i) {
      timerStart(*ctx);
      p.run(*ctx, tensors);
      times.push_back(timerStopMs(*ctx));
    }
    std::sort(times.begin(), times.end());
    double ms = times[times.size() / 2];
    if (const char *error = contextError(*ctx)) {
      std::printf("perf %s: error %s\n", p.name.c_str(), error);
      return 1;
    }
    std::printf("perf %-40s %9.4f ms", p.name.c_str(), ms);
    if (p.bytes > 0)
      std::printf("  %8.1f GB/s", p.bytes / ms / 1e6);
    if (p.flops > 0)
      std::printf("  %8.1f TFLOP/s", p.flops / ms / 1e9);
    std::printf("\n");
  }
  return 0;
}

} // namespace memopt::rt::suite
