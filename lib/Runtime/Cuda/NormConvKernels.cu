//===- NormConvKernels.cu - batch norm -> ReLU -> conv, CUDA side ---------===//
//
// The CUDA kernels of the fused batch-norm -> ReLU -> convolution of a
// training step (Runtime.h, docs/runtime.md "Normalization fused into
// convolutions"; issue 26), except the convolutions themselves
// (CudnnConvFusion.cpp: cuDNN's fused graphs, with launchNormReluApply as
// the fallback):
//
// - batchNormStats: batchNormTraining's statistics through the same
//   launches (NormTraining.h: both layouts, the same splits and pack width,
//   so the statistics agree bit for bit with an unfused program's), without
//   writing y, then one small kernel folding them into appliedScale =
//   gamma * invStd and appliedBias = fmaf(-mean, appliedScale, beta);
// - batchNormReluGrad: batchNormTrainingGrad's kernels with the ReLU mask
//   (fmaf(x, appliedScale, appliedBias) > 0) applied to dy as it is loaded
//   (a template flag of those kernels), so the ReLU's gradient is never
//   stored;
// - launchNormReluApply: r = max(fmaf(x, scale, bias), 0), 16-byte packs
//   (8 halves, 4 floats) of one channel's spatial run or, channels-last, of
//   neighbouring channels.
//
// The folding into a per-channel scale and bias is cuDNN's (the "SBR"
// scale-bias-relu of cudnn-frontend samples/cpp/convolution/fprop.cpp and
// wgrads.cpp, whose inputs PyTorch's and cuDNN's BN-ReLU-conv fusions feed
// from the batch statistics); the arithmetic is explicit fmaf (__fmaf_rn,
// no contraction left to the compiler) so the host reference
// (Host/NormConv.cpp) computes the same bits.
//
//===----------------------------------------------------------------------===//

#include "CudaDevice.cuh"
#include "NormConv.h"
#include "NormTraining.h"
#include "VectorPack.cuh"

namespace memopt::rt {

namespace {

constexpr int kThreads = 256;

/// appliedScale = gamma * invStd, appliedBias = fmaf(-mean, appliedScale,
/// beta), in f32.
__global__ void foldStatisticsKernel(int64_t channels, const float *gamma,
                                     const float *beta, const float *mean,
                                     const float *invStd, float *appliedScale,
                                     float *appliedBias) {
  MEMOPT_GRID_STRIDE(c, channels) {
    float a = __fmul_rn(gamma[c], invStd[c]);
    appliedScale[c] = a;
    appliedBias[c] = __fmaf_rn(-mean[c], a, beta[c]);
  }
}

/// r = max(fmaf(x, scale[c], bias[c]), 0), V elements per unit: unit i's
/// channel is (i / spatialUnits) % channels channels-first (the V elements
/// share it), or channels-last (i % packs) * V + k for element k.
template <typename T, int V, bool Last>
__global__ void __launch_bounds__(kThreads)
    normReluApplyKernel(const T *x, T *r, int64_t units, int64_t channels,
                        int64_t inner, const float *scale, const float *bias) {
  MEMOPT_GRID_STRIDE(i, units) {
    float v[V];
    loadPack<T, V>(x, i, v);
    if (Last) {
      // inner: packs of V channels per row.
      int64_t c0 = (i - quotient(i, inner) * inner) * V;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        float a = __fmaf_rn(v[k], __ldg(scale + c0 + k), __ldg(bias + c0 + k));
        v[k] = a > 0.0f ? a : 0.0f;
      }
    } else {
      // inner: spatial units per channel.
      int64_t plane = quotient(i, inner);
      int64_t c = plane - quotient(plane, channels) * channels;
      float s = __ldg(scale + c), b = __ldg(bias + c);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        float a = __fmaf_rn(v[k], s, b);
        v[k] = a > 0.0f ? a : 0.0f;
      }
    }
    storePack<T, V>(r, i, v);
  }
}

} // namespace

void launchNormReluApply(Context &ctx, const char *node, const TensorRef &x,
                         const TensorRef &scale, const TensorRef &bias,
                         const TensorRef &r, bool channelsLast) {
  if (hasError(ctx) || x.numElements() == 0)
    return;
  int channelAxis = channelsLast ? x.rank - 1 : 1;
  int64_t channels = x.shape[channelAxis];
  int64_t spatial = x.numElements() / (x.shape[0] * channels);
  auto *ps = static_cast<const float *>(scale.data);
  auto *pb = static_cast<const float *>(bias.data);
  MEMOPT_DISPATCH_FLOAT(x.dtype, T, {
    int width = normPackWidth(sizeof(T), channelsLast ? channels : spatial,
                              {x.data, r.data});
    withNormPackWidth<T>(width, [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      int64_t units = x.numElements() / kVec;
      auto *px = static_cast<const T *>(x.data);
      auto *pr = static_cast<T *>(r.data);
      if (channelsLast)
        normReluApplyKernel<T, kVec, true>
            <<<gridFor(ctx, units), kThreads, 0, ctx.stream>>>(
                px, pr, units, channels, channels / kVec, ps, pb);
      else
        normReluApplyKernel<T, kVec, false>
            <<<gridFor(ctx, units), kThreads, 0, ctx.stream>>>(
                px, pr, units, channels, spatial / kVec, ps, pb);
    });
  });
  checkLaunch(ctx, node);
}

void normReluApply(Context &ctx, const char *node, TensorRef x, TensorRef scale,
                   TensorRef bias, TensorRef r, bool channelsLast) {
  ChannelLayout layout;
  layout.channelsLast = channelsLast;
  if (hasError(ctx) ||
      !validateNormReluApply(ctx, node, x, scale, bias, r, layout))
    return;
  launchNormReluApply(ctx, node, x, scale, bias, r, channelsLast);
}

void batchNormStats(Context &ctx, const char *node, float epsilon, TensorRef x,
                    TensorRef gamma, TensorRef beta, TensorRef mean,
                    TensorRef invStd, TensorRef appliedScale,
                    TensorRef appliedBias, void *workspace,
                    size_t workspaceBytes, bool channelsLast) {
  ChannelLayout layout;
  layout.channelsLast = channelsLast;
  if (hasError(ctx) ||
      !validateBatchNormStats(ctx, node, x, gamma, beta, mean, invStd,
                              appliedScale, appliedBias, layout))
    return;
  int64_t channels = layout.channels;
  if (x.numElements() == 0)
    return;
  auto *pm = static_cast<float *>(mean.data);
  auto *ps = static_cast<float *>(invStd.data);
  launchBatchNormStatistics(ctx, x, channels, layout.spatial, channelsLast,
                            epsilon, workspace, workspaceBytes, pm, ps);
  foldStatisticsKernel<<<gridFor(ctx, channels), kThreads, 0, ctx.stream>>>(
      channels, static_cast<const float *>(gamma.data),
      static_cast<const float *>(beta.data), pm, ps,
      static_cast<float *>(appliedScale.data),
      static_cast<float *>(appliedBias.data));
  checkLaunch(ctx, node);
}

void batchNormReluGrad(Context &ctx, const char *node, TensorRef x,
                       TensorRef dy, TensorRef gamma, TensorRef mean,
                       TensorRef invStd, TensorRef appliedScale,
                       TensorRef appliedBias, TensorRef dx, TensorRef dgamma,
                       TensorRef dbeta, void *workspace, size_t workspaceBytes,
                       bool channelsLast) {
  ChannelLayout layout;
  layout.channelsLast = channelsLast;
  if (hasError(ctx) || !validateBatchNormReluGrad(
                           ctx, node, x, dy, gamma, mean, invStd, appliedScale,
                           appliedBias, dx, dgamma, dbeta, layout))
    return;
  if (x.numElements() == 0)
    return;
  launchBatchNormGrad(
      ctx, x, dy, dx, layout.channels, layout.spatial, channelsLast, workspace,
      workspaceBytes, static_cast<const float *>(mean.data),
      static_cast<const float *>(invStd.data),
      static_cast<const float *>(gamma.data), static_cast<float *>(dgamma.data),
      static_cast<float *>(dbeta.data),
      static_cast<const float *>(appliedScale.data),
      static_cast<const float *>(appliedBias.data));
  checkLaunch(ctx, node);
}

} // namespace memopt::rt
