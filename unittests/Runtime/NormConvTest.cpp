//===- NormConvTest.cpp - fused batch norm -> ReLU -> conv on the host ----===//
//
// The runtime functions of the fused batch-norm -> ReLU -> convolution
// (Runtime.h: batchNormStats, normReluConv, normReluConvBackwardFilter,
// batchNormReluGrad; batchNormTrainingAdd and batchNormAddReluGrad, the
// residual fusion) against the composition of the existing host functions
// they replace, bit for bit: the statistics against batchNormTraining's, the
// convolutions against conv / convBackwardFilter of a materialized r =
// max(fmaf(x, appliedScale, appliedBias), 0), the gradient against
// batchNormTrainingGrad of the masked dy; f32, f16 and bf16, channels-first
// and channels-last, 13 channels (not a multiple of 8); then the
// validation errors.
//
//===----------------------------------------------------------------------===//

#include "HostKernelsTest.h"
#include "memopt/Runtime/Workspace.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace memopt::rt::test {

namespace {

constexpr int64_t kN = 2, kC = 13, kH = 7, kW = 6, kM = 6;

/// The tensors of one case: x [N, C, H, W] or channels-last [N, H, W, C],
/// its per-channel parameters and statistics from batchNormStats.
struct NormCase {
  DType dtype;
  bool last;
  Buffer x, gamma, beta, mean, inv, scale, bias;

  std::vector<int64_t> shape(int64_t n, int64_t c, int64_t h, int64_t w) const {
    return last ? std::vector<int64_t>{n, h, w, c}
                : std::vector<int64_t>{n, c, h, w};
  }
  int64_t channelOf(int64_t i) const {
    return last ? i % kC : i / (kH * kW) % kC;
  }
};

class NormConv : public HostKernels {
protected:
  NormCase make(DType dtype, bool last, unsigned seed) {
    NormCase k;
    k.dtype = dtype;
    k.last = last;
    k.x = random(dtype, k.shape(kN, kC, kH, kW), seed);
    k.gamma = random(DType::F32, {kC}, seed + 1);
    k.beta = random(DType::F32, {kC}, seed + 2);
    for (Buffer *b : {&k.mean, &k.inv, &k.scale, &k.bias})
      *b = Buffer(DType::F32, {kC});
    batchNormStats(*ctx, "bn_stats", 1e-5f, k.x.ref(), k.gamma.ref(),
                   k.beta.ref(), k.mean.ref(), k.inv.ref(), k.scale.ref(),
                   k.bias.ref(), nullptr, 0, last);
    return k;
  }
  /// fmaf(x, scale[c], bias[c]) of element i.
  static float normalized(const NormCase &k, int64_t i) {
    int64_t c = k.channelOf(i);
    return std::fmaf(float(k.x.at(i)), float(k.scale.at(c)),
                     float(k.bias.at(c)));
  }
  /// r = max(fmaf(...), 0) rounded to x's dtype (through the runtime's
  /// cast: round to nearest even).
  Buffer materialize(const NormCase &k) {
    Buffer wide(DType::F32, k.x.shape);
    for (int64_t i = 0; i < k.x.count(); ++i) {
      float v = normalized(k, i);
      v = v > 0 ? v : 0.0f;
      std::memcpy(wide.storage.data() + 4 * i, &v, 4);
    }
    Buffer r(k.dtype, k.x.shape);
    cast(*ctx, "materialize", wide.ref(), r.ref());
    return r;
  }
  void expectError(const char *node, const char *fragment) {
    ASSERT_NE(contextError(*ctx), nullptr) << node;
    std::string error = contextError(*ctx);
    EXPECT_NE(error.find(node), std::string::npos) << error;
    EXPECT_NE(error.find(fragment), std::string::npos) << error;
    destroyContext(ctx);
    ctx = createContext();
  }
};

void expectSameBits(const Buffer &a, const Buffer &b) {
  ASSERT_EQ(a.storage.size(), b.storage.size());
  for (int64_t i = 0; i < a.count(); ++i)
    ASSERT_EQ(a.at(i), b.at(i)) << "element " << i;
}

const DType kFloats[] = {DType::F32, DType::F16, DType::BF16};

} // namespace

// mean / invStd are batchNormTraining's; appliedScale / appliedBias fold
// them as Runtime.h says.
TEST_F(NormConv, StatsAreBatchNormTrainingStatistics) {
  for (DType dtype : kFloats)
    for (bool last : {false, true}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + (last ? " nhwc" : " nchw"));
      NormCase k = make(dtype, last, 11);
      Buffer y(dtype, k.x.shape), mean(DType::F32, {kC}), inv(DType::F32, {kC});
      batchNormTraining(*ctx, "bn", 1e-5f, Activation::Relu, k.x.ref(),
                        k.gamma.ref(), k.beta.ref(), y.ref(), mean.ref(),
                        inv.ref(), nullptr, 0, last);
      expectSameBits(k.mean, mean);
      expectSameBits(k.inv, inv);
      for (int64_t c = 0; c < kC; ++c) {
        float a = float(k.gamma.at(c)) * float(k.inv.at(c));
        EXPECT_EQ(float(k.scale.at(c)), a);
        EXPECT_EQ(float(k.bias.at(c)),
                  std::fmaf(-float(k.mean.at(c)), a, float(k.beta.at(c))));
      }
    }
}

// normReluApply forms r itself (the pool readers' form), in place too.
TEST_F(NormConv, ApplyFormsTheMaterializedInput) {
  for (DType dtype : kFloats)
    for (bool last : {false, true}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + (last ? " nhwc" : " nchw"));
      NormCase k = make(dtype, last, 41);
      Buffer r(dtype, k.x.shape);
      normReluApply(*ctx, "apply", k.x.ref(), k.scale.ref(), k.bias.ref(),
                    r.ref(), last);
      ASSERT_EQ(contextError(*ctx), nullptr);
      expectSameBits(r, materialize(k));
      Buffer inPlace = k.x;
      normReluApply(*ctx, "apply", inPlace.ref(), k.scale.ref(), k.bias.ref(),
                    inPlace.ref(), last);
      expectSameBits(inPlace, r);
    }
  NormCase k = make(DType::F32, false, 42);
  Buffer wrong(DType::F16, k.x.shape);
  normReluApply(*ctx, "/nrc/apply", k.x.ref(), k.scale.ref(), k.bias.ref(),
                wrong.ref());
  expectError("/nrc/apply", "X/R");
}

// normReluConv and normReluConvBackwardFilter are conv / convBackwardFilter
// of the materialized r (3x3 padded, and 1x1 with stride 2).
TEST_F(NormConv, ConvolutionsOfTheMaterializedInput) {
  for (DType dtype : kFloats)
    for (bool last : {false, true})
      for (int64_t kernel : {3, 1}) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) +
                     (last ? " nhwc" : " nchw") + " k" +
                     std::to_string(kernel));
        NormCase k = make(dtype, last, 21);
        ConvParams p;
        p.channelsLast = last;
        int64_t stride = kernel == 1 ? 2 : 1, pad = kernel / 2;
        for (int i = 0; i < 2; ++i) {
          p.strides[i] = stride;
          p.padsBegin[i] = p.padsEnd[i] = pad;
        }
        int64_t oh = (kH + 2 * pad - kernel) / stride + 1;
        int64_t ow = (kW + 2 * pad - kernel) / stride + 1;
        Buffer w = random(dtype, k.shape(kM, kC, kernel, kernel), 22);
        // The 1x1 case carries the convolution's own bias.
        Buffer convBias = random(dtype, {kM}, 24);
        TensorRef biasRef = convBias.ref();
        const TensorRef *withBias = kernel == 1 ? &biasRef : nullptr;
        Buffer r = materialize(k);
        Buffer expected(dtype, k.shape(kN, kM, oh, ow)),
            y(dtype, k.shape(kN, kM, oh, ow));
        conv(*ctx, "conv", p, r.ref(), w.ref(), withBias, expected.ref(),
             nullptr, 0);
        Buffer before = k.x;
        // The temporary and 4 KiB more for the convolution.
        int64_t bytes =
            workspace::normReluConvTempBytes(int64_t(k.x.ref().bytes())) + 4096;
        Buffer ws(DType::U8, {bytes});
        normReluConv(*ctx, "norm_relu_conv", p, k.x.ref(), w.ref(),
                     k.scale.ref(), k.bias.ref(), withBias, y.ref(),
                     ws.storage.data(), size_t(bytes));
        expectSameBits(y, expected);
        expectSameBits(k.x, before);

        Buffer dy = random(dtype, k.shape(kN, kM, oh, ow), 23);
        Buffer dwExpected(dtype, w.shape), dw(dtype, w.shape);
        convBackwardFilter(*ctx, "conv_dw", p, r.ref(), dy.ref(),
                           dwExpected.ref(), nullptr, 0);
        normReluConvBackwardFilter(*ctx, "norm_relu_conv_dw", p, k.x.ref(),
                                   dy.ref(), k.scale.ref(), k.bias.ref(),
                                   dw.ref(), ws.storage.data(), size_t(bytes));
        expectSameBits(dw, dwExpected);
      }
}

// batchNormReluGrad is batchNormTrainingGrad of dy masked where the
// recomputed ReLU input is not positive; dy stays as it was, or is dx.
TEST_F(NormConv, GradientOfTheMaskedDy) {
  for (DType dtype : kFloats)
    for (bool last : {false, true}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + (last ? " nhwc" : " nchw"));
      NormCase k = make(dtype, last, 31);
      Buffer dy = random(dtype, k.x.shape, 32);
      Buffer masked = dy;
      size_t size = dtypeSize(dtype);
      int64_t zeros = 0;
      for (int64_t i = 0; i < dy.count(); ++i)
        if (!(normalized(k, i) > 0)) {
          std::memset(masked.storage.data() + size_t(i) * size, 0, size);
          ++zeros;
        }
      ASSERT_GT(zeros, dy.count() / 5);
      ASSERT_LT(zeros, dy.count() * 4 / 5);
      Buffer dx0(dtype, k.x.shape), dg0(DType::F32, {kC}),
          db0(DType::F32, {kC});
      batchNormTrainingGrad(*ctx, "bn_grad", k.x.ref(), masked.ref(),
                            k.gamma.ref(), k.mean.ref(), k.inv.ref(), dx0.ref(),
                            dg0.ref(), db0.ref(), nullptr, 0, last);
      Buffer before = dy;
      Buffer dx(dtype, k.x.shape), dg(DType::F32, {kC}), db(DType::F32, {kC});
      batchNormReluGrad(*ctx, "bn_relu_grad", k.x.ref(), dy.ref(),
                        k.gamma.ref(), k.mean.ref(), k.inv.ref(), k.scale.ref(),
                        k.bias.ref(), dx.ref(), dg.ref(), db.ref(), nullptr, 0,
                        last);
      expectSameBits(dx, dx0);
      expectSameBits(dg, dg0);
      expectSameBits(db, db0);
      expectSameBits(dy, before);
      // In place over dy.
      batchNormReluGrad(*ctx, "bn_relu_grad", k.x.ref(), dy.ref(),
                        k.gamma.ref(), k.mean.ref(), k.inv.ref(), k.scale.ref(),
                        k.bias.ref(), dy.ref(), dg.ref(), db.ref(), nullptr, 0,
                        last);
      expectSameBits(dy, dx0);
    }
}

// batchNormTrainingAdd (NormAddRelu) is batchNormTraining's normalization
// plus z, then the ReLU, rounded once: the statistics bit for bit, y within
// the rounding of the unfused composition's stored BN(x) (one unit of the
// dtype's epsilon at |BN(x)| and |y|); in place over z and over x too.
TEST_F(NormConv, ResidualAddIsTheUnfusedComposition) {
  for (DType dtype : kFloats)
    for (bool last : {false, true}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + (last ? " nhwc" : " nchw"));
      NormCase k = make(dtype, last, 51);
      Buffer z = random(dtype, k.x.shape, 52);
      Buffer y0(dtype, k.x.shape), m0(DType::F32, {kC}), i0(DType::F32, {kC});
      batchNormTraining(*ctx, "bn", 1e-5f, Activation::None, k.x.ref(),
                        k.gamma.ref(), k.beta.ref(), y0.ref(), m0.ref(),
                        i0.ref(), nullptr, 0, last);
      Buffer y(dtype, k.x.shape), mean(DType::F32, {kC}), inv(DType::F32, {kC});
      batchNormTrainingAdd(*ctx, "bn_add", 1e-5f, Activation::Relu, k.x.ref(),
                           k.gamma.ref(), k.beta.ref(), z.ref(), y.ref(),
                           mean.ref(), inv.ref(), nullptr, 0, last);
      ASSERT_EQ(contextError(*ctx), nullptr) << contextError(*ctx);
      expectSameBits(mean, m0);
      expectSameBits(inv, i0);
      double eps = dtype == DType::F32   ? 0x1p-23
                   : dtype == DType::F16 ? 0x1p-10
                                         : 0x1p-7;
      int64_t zeros = 0;
      for (int64_t i = 0; i < y.count(); ++i) {
        double expected = std::max(y0.at(i) + z.at(i), 0.0);
        zeros += expected == 0.0;
        ASSERT_NEAR(y.at(i), expected,
                    eps * (std::fabs(y0.at(i)) + std::fabs(expected)))
            << "element " << i;
      }
      ASSERT_GT(zeros, 0);
      ASSERT_LT(zeros, y.count());
      // Without the activation: BN(x) + z.
      Buffer sum(dtype, k.x.shape);
      batchNormTrainingAdd(*ctx, "bn_add", 1e-5f, Activation::None, k.x.ref(),
                           k.gamma.ref(), k.beta.ref(), z.ref(), sum.ref(),
                           mean.ref(), inv.ref(), nullptr, 0, last);
      for (int64_t i = 0; i < y.count(); ++i)
        ASSERT_EQ(y.at(i), std::max(sum.at(i), 0.0)) << "element " << i;
      // In place over z, then over x.
      Buffer inZ = z;
      batchNormTrainingAdd(*ctx, "bn_add", 1e-5f, Activation::Relu, k.x.ref(),
                           k.gamma.ref(), k.beta.ref(), inZ.ref(), inZ.ref(),
                           mean.ref(), inv.ref(), nullptr, 0, last);
      expectSameBits(inZ, y);
      Buffer inX = k.x;
      batchNormTrainingAdd(*ctx, "bn_add", 1e-5f, Activation::Relu, inX.ref(),
                           k.gamma.ref(), k.beta.ref(), z.ref(), inX.ref(),
                           mean.ref(), inv.ref(), nullptr, 0, last);
      expectSameBits(inX, y);
    }
}

// batchNormAddReluGrad (DReluForkDNorm) is reluGrad(dy, y) -> dz, then
// batchNormTrainingGrad(x, dz), bit for bit; dx in place over dy too.
TEST_F(NormConv, ResidualGradientForksTheMaskedDy) {
  for (DType dtype : kFloats)
    for (bool last : {false, true}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + (last ? " nhwc" : " nchw"));
      NormCase k = make(dtype, last, 61);
      Buffer z = random(dtype, k.x.shape, 62);
      Buffer y(dtype, k.x.shape), mean(DType::F32, {kC}), inv(DType::F32, {kC});
      batchNormTrainingAdd(*ctx, "bn_add", 1e-5f, Activation::Relu, k.x.ref(),
                           k.gamma.ref(), k.beta.ref(), z.ref(), y.ref(),
                           mean.ref(), inv.ref(), nullptr, 0, last);
      Buffer dy = random(dtype, k.x.shape, 63);
      Buffer masked = dy;
      size_t size = dtypeSize(dtype);
      int64_t zeros = 0;
      for (int64_t i = 0; i < dy.count(); ++i)
        if (!(y.at(i) > 0)) {
          std::memset(masked.storage.data() + size_t(i) * size, 0, size);
          ++zeros;
        }
      ASSERT_GT(zeros, dy.count() / 5);
      ASSERT_LT(zeros, dy.count() * 4 / 5);
      Buffer dx0(dtype, k.x.shape), dg0(DType::F32, {kC}),
          db0(DType::F32, {kC});
      batchNormTrainingGrad(*ctx, "bn_grad", k.x.ref(), masked.ref(),
                            k.gamma.ref(), mean.ref(), inv.ref(), dx0.ref(),
                            dg0.ref(), db0.ref(), nullptr, 0, last);
      Buffer before = dy;
      Buffer dx(dtype, k.x.shape), dg(DType::F32, {kC}), db(DType::F32, {kC}),
          dz(dtype, k.x.shape);
      batchNormAddReluGrad(*ctx, "bn_add_relu_grad", k.x.ref(), dy.ref(),
                           y.ref(), k.gamma.ref(), mean.ref(), inv.ref(),
                           dx.ref(), dg.ref(), db.ref(), dz.ref(), nullptr, 0,
                           last);
      ASSERT_EQ(contextError(*ctx), nullptr) << contextError(*ctx);
      expectSameBits(dz, masked);
      expectSameBits(dx, dx0);
      expectSameBits(dg, dg0);
      expectSameBits(db, db0);
      expectSameBits(dy, before);
      // dx in place over dy.
      batchNormAddReluGrad(*ctx, "bn_add_relu_grad", k.x.ref(), dy.ref(),
                           y.ref(), k.gamma.ref(), mean.ref(), inv.ref(),
                           dy.ref(), dg.ref(), db.ref(), dz.ref(), nullptr, 0,
                           last);
      expectSameBits(dy, dx0);
      expectSameBits(dz, masked);
    }
}

TEST_F(NormConv, RejectsBadArgumentsNamingTheNode) {
  NormCase k = make(DType::BF16, true, 41);
  ConvParams p;
  p.channelsLast = true;
  Buffer w = random(DType::BF16, {kM, 1, 1, kC}, 42);
  Buffer y(DType::BF16, {kN, kH, kW, kM});
  int64_t bytes = workspace::normReluConvTempBytes(int64_t(k.x.ref().bytes()));
  Buffer ws(DType::U8, {bytes});
  // A fused activation.
  ConvParams relu = p;
  relu.activation = Activation::Relu;
  normReluConv(*ctx, "/nrc/act", relu, k.x.ref(), w.ref(), k.scale.ref(),
               k.bias.ref(), nullptr, y.ref(), ws.storage.data(),
               size_t(bytes));
  expectError("/nrc/act", "activation");
  // Too small a workspace for r.
  normReluConv(*ctx, "/nrc/ws", p, k.x.ref(), w.ref(), k.scale.ref(),
               k.bias.ref(), nullptr, y.ref(), ws.storage.data(),
               size_t(bytes) - 256);
  expectError("/nrc/ws", "workspace");
  // Per-channel constants of another channel count, or not f32.
  Buffer shortScale(DType::F32, {kC - 1}), halfBias(DType::BF16, {kC});
  normReluConv(*ctx, "/nrc/channels", p, k.x.ref(), w.ref(), shortScale.ref(),
               k.bias.ref(), nullptr, y.ref(), ws.storage.data(),
               size_t(bytes));
  expectError("/nrc/channels", "13 channels");
  Buffer dy = random(DType::BF16, {kN, kH, kW, kM}, 43);
  normReluConvBackwardFilter(*ctx, "/nrc/dw", p, k.x.ref(), dy.ref(),
                             k.scale.ref(), halfBias.ref(), w.ref(),
                             ws.storage.data(), size_t(bytes));
  expectError("/nrc/dw", "f32");
  // A filter that does not fit x.
  Buffer wrong = random(DType::BF16, {kM, 1, 1, kC + 1}, 44);
  normReluConv(*ctx, "/nrc/w", p, k.x.ref(), wrong.ref(), k.scale.ref(),
               k.bias.ref(), nullptr, y.ref(), ws.storage.data(),
               size_t(bytes));
  expectError("/nrc/w", "weight");
  // batchNormStats: an applied scale that is not f32, of C elements.
  k = make(DType::BF16, true, 45);
  Buffer mean(DType::F32, {kC}), inv(DType::F32, {kC}),
      applied(DType::F32, {kC});
  batchNormStats(*ctx, "/bn_stats/dtype", 1e-5f, k.x.ref(), k.gamma.ref(),
                 k.beta.ref(), mean.ref(), inv.ref(), halfBias.ref(),
                 applied.ref(), nullptr, 0, true);
  expectError("/bn_stats/dtype", "applied scale must be f32");
  batchNormStats(*ctx, "/bn_stats/c", 1e-5f, k.x.ref(), k.gamma.ref(),
                 k.beta.ref(), mean.ref(), inv.ref(), applied.ref(),
                 shortScale.ref(), nullptr, 0, true);
  expectError("/bn_stats/c", "13 channels");
  // batchNormReluGrad: dY of another shape, applied bias of another count.
  k = make(DType::BF16, true, 46);
  Buffer dx(DType::BF16, k.x.shape), dg(DType::F32, {kC}), db(DType::F32, {kC});
  Buffer otherDy = random(DType::BF16, {kN, kH, kW + 1, kC}, 47);
  batchNormReluGrad(*ctx, "/bn_relu_grad/dy", k.x.ref(), otherDy.ref(),
                    k.gamma.ref(), k.mean.ref(), k.inv.ref(), k.scale.ref(),
                    k.bias.ref(), dx.ref(), dg.ref(), db.ref(), nullptr, 0,
                    true);
  expectError("/bn_relu_grad/dy", "X/dY");
  Buffer dyOk = random(DType::BF16, k.x.shape, 48);
  batchNormReluGrad(*ctx, "/bn_relu_grad/c", k.x.ref(), dyOk.ref(),
                    k.gamma.ref(), k.mean.ref(), k.inv.ref(), k.scale.ref(),
                    shortScale.ref(), dx.ref(), dg.ref(), db.ref(), nullptr, 0,
                    true);
  expectError("/bn_relu_grad/c", "13 channels");
  // batchNormTrainingAdd: Z of another shape or dtype.
  Buffer yn(DType::BF16, k.x.shape), zF32(DType::F32, k.x.shape);
  batchNormTrainingAdd(*ctx, "/bn_add/shape", 1e-5f, Activation::Relu,
                       k.x.ref(), k.gamma.ref(), k.beta.ref(), otherDy.ref(),
                       yn.ref(), mean.ref(), inv.ref(), nullptr, 0, true);
  expectError("/bn_add/shape", "X/Z");
  batchNormTrainingAdd(*ctx, "/bn_add/dtype", 1e-5f, Activation::Relu,
                       k.x.ref(), k.gamma.ref(), k.beta.ref(), zF32.ref(),
                       yn.ref(), mean.ref(), inv.ref(), nullptr, 0, true);
  expectError("/bn_add/dtype", "Z has dtype");
  // batchNormAddReluGrad: Y of another shape; dZ in dX's storage.
  Buffer dz(DType::BF16, k.x.shape);
  batchNormAddReluGrad(*ctx, "/bn_add_grad/y", k.x.ref(), dyOk.ref(),
                       otherDy.ref(), k.gamma.ref(), k.mean.ref(), k.inv.ref(),
                       dx.ref(), dg.ref(), db.ref(), dz.ref(), nullptr, 0,
                       true);
  expectError("/bn_add_grad/y", "X/Y");
  batchNormAddReluGrad(*ctx, "/bn_add_grad/alias", k.x.ref(), dyOk.ref(),
                       yn.ref(), k.gamma.ref(), k.mean.ref(), k.inv.ref(),
                       dx.ref(), dg.ref(), db.ref(), dx.ref(), nullptr, 0,
                       true);
  expectError("/bn_add_grad/alias", "must not share storage");
}

} // namespace memopt::rt::test
