//===- SharedValidationTest.cpp - the checks both backends call -----------===//
//
// The argument checks that each backend used to repeat (training-mode
// normalization, the sharded collectives, activation offload, copy / cast /
// expand, softmax, global pooling, arg reductions) live once in
// lib/Runtime/Validate.cpp and ValidateTraining.cpp. Each case makes one bad
// call on the host backend and checks the exact message; the CUDA backend
// calls the same function first, so it reports the same text (the kernel
// suite runs the good calls on both).
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

using namespace memopt::rt;
using namespace memopt::rt::test;

namespace {

/// The message a fresh context records for `call`.
std::string errorOf(const std::function<void(Context &)> &call) {
  Context *ctx = createContext();
  call(*ctx);
  const char *error = contextError(*ctx);
  std::string message = error ? error : "<no error>";
  destroyContext(ctx);
  return message;
}

struct BatchNormBuffers {
  Buffer x{DType::F32, {2, 3, 4}}, y{DType::F32, {2, 3, 4}};
  Buffer scale{DType::F32, {3}}, bias{DType::F32, {3}};
  Buffer mean{DType::F32, {3}}, invStd{DType::F32, {3}};
};

TEST(SharedValidation, BatchNormTraining) {
  BatchNormBuffers b;
  EXPECT_EQ(errorOf([&](Context &ctx) {
              batchNormTraining(ctx, "/bn", 1e-5f, Activation::Gelu, b.x.ref(),
                                b.scale.ref(), b.bias.ref(), b.y.ref(),
                                b.mean.ref(), b.invStd.ref());
            }),
            "node '/bn': batch normalization fuses relu only");
  Buffer shortScale(DType::F32, {2});
  EXPECT_EQ(errorOf([&](Context &ctx) {
              batchNormTraining(ctx, "/bn", 1e-5f, Activation::None, b.x.ref(),
                                shortScale.ref(), b.bias.ref(), b.y.ref(),
                                b.mean.ref(), b.invStd.ref());
            }),
            "node '/bn': per-channel tensor [2] does not hold 3 channels");
  Buffer halfMean(DType::F16, {3});
  EXPECT_EQ(
      errorOf([&](Context &ctx) {
        batchNormTraining(ctx, "/bn", 1e-5f, Activation::None, b.x.ref(),
                          b.scale.ref(), b.bias.ref(), b.y.ref(),
                          halfMean.ref(), b.invStd.ref());
      }),
      "node '/bn': mean must be f32 (statistics and parameters stay f32)");
  Buffer halfY(DType::F16, {2, 3, 4});
  EXPECT_EQ(errorOf([&](Context &ctx) {
              batchNormTraining(ctx, "/bn", 1e-5f, Activation::None, b.x.ref(),
                                b.scale.ref(), b.bias.ref(), halfY.ref(),
                                b.mean.ref(), b.invStd.ref());
            }),
            "node '/bn': Y has dtype f16, not the input's f32");
  Buffer vector(DType::F32, {3});
  EXPECT_EQ(errorOf([&](Context &ctx) {
              batchNormTraining(ctx, "/bn", 1e-5f, Activation::None,
                                vector.ref(), b.scale.ref(), b.bias.ref(),
                                vector.ref(), b.mean.ref(), b.invStd.ref());
            }),
            "node '/bn': batch normalization needs [N, C, ...], got [3]");
}

TEST(SharedValidation, BatchNormGradientAndRunningUpdate) {
  BatchNormBuffers b;
  Buffer dscale(DType::F32, {4});
  EXPECT_EQ(errorOf([&](Context &ctx) {
              batchNormTrainingGrad(ctx, "/bn_grad", b.x.ref(), b.y.ref(),
                                    b.scale.ref(), b.mean.ref(), b.invStd.ref(),
                                    b.y.ref(), dscale.ref(), b.bias.ref());
            }),
            "node '/bn_grad': per-channel tensor [4] does not hold 3 channels");
  Buffer running(DType::F32, {2});
  EXPECT_EQ(errorOf([&](Context &ctx) {
              batchNormRunningUpdate(ctx, "/bn_running", 0.9f, 1e-5f,
                                     b.mean.ref(), b.invStd.ref(),
                                     running.ref(), b.scale.ref());
            }),
            "node '/bn_running': running statistics of 3 channels expected");
}

TEST(SharedValidation, LayerNormGradient) {
  Buffer x(DType::F32, {2, 5}), scale(DType::F32, {3}), dscale(DType::F32, {3});
  EXPECT_EQ(errorOf([&](Context &ctx) {
              layerNormGrad(ctx, "/ln_grad", 1e-5f, x.ref(), x.ref(),
                            scale.ref(), x.ref(), dscale.ref(), dscale.ref(),
                            nullptr, 0);
            }),
            "node '/ln_grad': layer normalization gradient: [2, 5] is not "
            "rows of the 3 scale elements");
}

TEST(SharedValidation, ShardedCollectives) {
  Buffer x(DType::F32, {10}), shard(DType::F32, {4}), half(DType::F16, {10});
  Buffer halfShard(DType::F16, {4});
  EXPECT_EQ(errorOf([&](Context &ctx) {
              reduceScatter(ctx, "/rs", CollectiveReduction::Sum, 0, x.ref(),
                            shard.ref());
            }),
            "node '/rs': reduce_scatter over 0 ranks");
  EXPECT_EQ(errorOf([&](Context &ctx) { allGather(ctx, "/ag", -1, x.ref()); }),
            "node '/ag': all_gather over -1 ranks");
  EXPECT_EQ(errorOf([&](Context &ctx) {
              gatherParameter(ctx, "/gp", 0, shard.ref(), x.ref());
            }),
            "node '/gp': gather_parameter over 0 ranks");
  EXPECT_EQ(errorOf([&](Context &ctx) {
              gatherParameter(ctx, "/gp", 3, halfShard.ref(), half.ref());
            }),
            "node '/gp': gather_parameter gathers an f32 shard into an f32, "
            "f16 or bf16 parameter, got f16 and f16");
  // The low copy's gather reads an f32 shard of the right size.
  EXPECT_EQ(errorOf([&](Context &ctx) {
              gatherParameter(ctx, "/gp", 3, x.ref(), half.ref());
            }),
            "node '/gp': shard [10] must hold 4 elements (this rank's shard "
            "of [10] over 3 ranks)");
  // 10 elements over 3 ranks: a chunk of 3 and a tail of 1.
  EXPECT_EQ(errorOf([&](Context &ctx) {
              reduceScatter(ctx, "/rs", CollectiveReduction::Sum, 3, x.ref(),
                            x.ref());
            }),
            "node '/rs': result [10] must hold 4 elements for input [10]");
}

TEST(SharedValidation, CollectiveAccumulationSumsF32) {
  Buffer x(DType::F16, {4}), y(DType::F16, {4}), sum(DType::F32, {4});
  Buffer micro(DType::F32, {});
  GradientAccumulation accumulation;
  accumulation.accumulator = sum.ref();
  accumulation.microStep = micro.ref();
  accumulation.steps = 2;
  EXPECT_EQ(errorOf([&](Context &ctx) {
              allReduce(ctx, "/ar", CollectiveReduction::Sum, x.ref(), y.ref(),
                        &accumulation);
            }),
            "node '/ar': an f32 accumulator sums f32 gradients, got f16 "
            "(reduce the accumulated gradients in f32)");
}

TEST(SharedValidation, OffloadOutsideThePool) {
  Buffer x(DType::F32, {4});
  EXPECT_EQ(errorOf([&](Context &ctx) {
              reserveHostPool(ctx, 8);
              offloadStart(ctx, "/save", 0, x.storage.data(), 4, 16);
            }),
            "node '/save': offload of 16 bytes at host offset 4 is outside "
            "the host pool of 8 bytes (was the pool reserved?)");
}

TEST(SharedValidation, ConvResidualHasTheOutputsType) {
  Buffer x(DType::F32, {1, 2, 4, 4}), w(DType::F32, {2, 2, 1, 1});
  Buffer y(DType::F32, {1, 2, 4, 4}), residual(DType::F16, {1, 2, 4, 4});
  ConvParams params;
  EXPECT_EQ(errorOf([&](Context &ctx) {
              convResidual(ctx, "/conv_add", params, x.ref(), w.ref(), nullptr,
                           residual.ref(), y.ref(), nullptr, 0);
            }),
            "node '/conv_add': residual/output: dtypes differ (f16 vs f32)");
}

TEST(SharedValidation, CopiesCastsAndExpand) {
  Buffer x(DType::F32, {4}), y(DType::F32, {5}), z(DType::I64, {3});
  EXPECT_EQ(errorOf([&](Context &ctx) { copy(ctx, "/id", x.ref(), y.ref()); }),
            "node '/id': copy of 16 bytes into 20 bytes");
  EXPECT_EQ(
      errorOf([&](Context &ctx) { cast(ctx, "/cast", x.ref(), z.ref()); }),
      "node '/cast': input/output: element counts differ ([4] vs [3])");
  EXPECT_EQ(
      errorOf([&](Context &ctx) { expand(ctx, "/expand", y.ref(), x.ref()); }),
      "node '/expand': input 0 of shape [5] does not broadcast to [4]");
}

TEST(SharedValidation, SoftmaxGlobalPoolAndArgReduce) {
  Buffer x(DType::F32, {2, 3, 4}), y(DType::F32, {2, 3, 4});
  EXPECT_EQ(errorOf([&](Context &ctx) {
              softmax(ctx, "/softmax", 3, false, x.ref(), y.ref());
            }),
            "node '/softmax': axis 3 out of range for rank 3");
  Buffer pooled(DType::F32, {2, 4});
  EXPECT_EQ(errorOf([&](Context &ctx) {
              globalAvgPool(ctx, "/gap", x.ref(), pooled.ref());
            }),
            "node '/gap': GlobalAveragePool output [2, 4] does not match "
            "input [2, 3, 4]");
  Buffer index(DType::I32, {2, 4});
  EXPECT_EQ(errorOf([&](Context &ctx) {
              argReduce(ctx, "/argmax", true, 1, x.ref(), index.ref());
            }),
            "node '/argmax': ArgMax/ArgMin output must be i64 with 8 "
            "elements");
}

} // namespace
