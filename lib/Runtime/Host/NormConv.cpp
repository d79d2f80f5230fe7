//===- NormConv.cpp - host batch norm -> ReLU -> convolution --------------===//
//
// The host reference of the fused batch-norm -> ReLU -> convolution of a
// training step (Runtime.h, docs/runtime.md "Normalization fused into
// convolutions"; issue 26): batchNormStats (the statistics of
// batchNormTraining, shared through host::batchNormStatistics, and the
// folded per-channel scale and bias), normReluConv and
// normReluConvBackwardFilter (r = max(fmaf(x, scale, bias), 0) rounded to
// x's dtype, written at the workspace's head, then the host conv /
// convBackwardFilter on it with the rest of the workspace: the composition
// a backend without the fusion runs), and batchNormReluGrad (dy masked by
// the recomputed ReLU mask as it is read, then batchNormTrainingGrad's
// arithmetic, host::batchNormGradient). batchNormAddReluGrad (the
// gradient of a normalization fused with the residual add and the ReLU,
// cuDNN's DReluForkDNorm) masks dy by its output y > 0 as reluGrad does,
// stores that as dz and runs the same host::batchNormGradient on it.
//
// The fusion is cuDNN's (cudnn-frontend samples/cpp/convolution/fprop.cpp
// "SBRCS": scale-bias-relu before a convolution, and wgrads.cpp
// "scale-bias-relu-wgrad"); the host defines the arithmetic those CUDA
// paths must match: f32 fmaf with the folded constants, one rounding to the
// activation's dtype, and a mask that is the same comparison.
//
//===----------------------------------------------------------------------===//

#include "HostInternal.h"
#include "memopt/Runtime/Workspace.h"

#include <cmath>

namespace memopt::rt {

namespace {

/// The channel of element i of x: [N, C, S] or channels-last [N, S, C].
int64_t channelOf(int64_t i, int64_t channels, int64_t spatial,
                  bool channelsLast) {
  return channelsLast ? i % channels : i / spatial % channels;
}

/// fmaf(x, scale[c], bias[c]) for every element of x (in double: exact).
std::vector<double> normalized(Context &ctx, const std::vector<double> &x,
                               const float *scale, const float *bias,
                               int64_t channels, int64_t spatial,
                               bool channelsLast) {
  std::vector<double> v(x.size());
  host::parallelFor(ctx, 0, int64_t(x.size()), host::kElementGrain,
                    [&](int64_t lo, int64_t hi) {
                      for (int64_t i = lo; i < hi; ++i) {
                        int64_t c =
                            channelOf(i, channels, spatial, channelsLast);
                        v[size_t(i)] =
                            std::fmaf(float(x[size_t(i)]), scale[c], bias[c]);
                      }
                    });
  return v;
}

/// r = max(fmaf(x, scale[c], bias[c]), 0) in r's dtype (x's).
void formNormRelu(Context &ctx, const TensorRef &x, const TensorRef &scale,
                  const TensorRef &bias, int64_t channels, int64_t spatial,
                  bool channelsLast, const TensorRef &r) {
  std::vector<double> v = normalized(
      ctx, host::toDouble(ctx, x), static_cast<const float *>(scale.data),
      static_cast<const float *>(bias.data), channels, spatial, channelsLast);
  for (double &e : v)
    e = e > 0 ? e : 0.0;
  host::store(ctx, v, r);
}

/// The fallback of both normalized convolutions: r at the workspace's head;
/// returns r, and the rest of the workspace in (rest, restBytes).
TensorRef applyNormRelu(Context &ctx, const ConvParams &params,
                        const ConvGeometry &g, const TensorRef &x,
                        const TensorRef &scale, const TensorRef &bias,
                        void *workspace, size_t workspaceBytes, void *&rest,
                        size_t &restBytes) {
  TensorRef r = x;
  r.data = workspace;
  formNormRelu(ctx, x, scale, bias, g.inChannels, g.in[0] * g.in[1] * g.in[2],
               params.channelsLast, r);
  size_t head = size_t(workspace::normReluConvTempBytes(int64_t(x.bytes())));
  rest =
      workspaceBytes > head ? static_cast<char *>(workspace) + head : nullptr;
  restBytes = workspaceBytes > head ? workspaceBytes - head : 0;
  return r;
}

} // namespace

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
  host::poisonWorkspace(workspace, workspaceBytes);
  std::vector<double> m, inv;
  host::batchNormStatistics(ctx, host::toDouble(ctx, x), x.shape[0],
                            layout.channels, layout.spatial, channelsLast,
                            epsilon, m, inv);
  auto *pg = static_cast<const float *>(gamma.data);
  auto *pb = static_cast<const float *>(beta.data);
  auto *pm = static_cast<float *>(mean.data);
  auto *ps = static_cast<float *>(invStd.data);
  auto *pscale = static_cast<float *>(appliedScale.data);
  auto *pbias = static_cast<float *>(appliedBias.data);
  for (int64_t c = 0; c < layout.channels; ++c) {
    pm[c] = float(m[size_t(c)]);
    ps[c] = float(inv[size_t(c)]);
    // The f32 statistics as stored (what the CUDA kernel reads back).
    float a = pg[c] * ps[c];
    pscale[c] = a;
    pbias[c] = std::fmaf(-pm[c], a, pb[c]);
  }
}

void normReluConv(Context &ctx, const char *node, const ConvParams &params,
                  TensorRef x, TensorRef w, TensorRef scale, TensorRef bias,
                  const TensorRef *convBias, TensorRef y, void *workspace,
                  size_t workspaceBytes) {
  ConvGeometry g;
  if (hasError(ctx) ||
      !validateNormReluConv(ctx, node, params, false, x, w, scale, bias, y,
                            workspace, workspaceBytes, g))
    return;
  host::poisonWorkspace(workspace, workspaceBytes);
  void *rest = nullptr;
  size_t restBytes = 0;
  TensorRef r = applyNormRelu(ctx, params, g, x, scale, bias, workspace,
                              workspaceBytes, rest, restBytes);
  conv(ctx, node, params, r, w, convBias, y, rest, restBytes);
}

void normReluConvBackwardFilter(Context &ctx, const char *node,
                                const ConvParams &params, TensorRef x,
                                TensorRef dy, TensorRef scale, TensorRef bias,
                                TensorRef dw, void *workspace,
                                size_t workspaceBytes) {
  ConvGeometry g;
  if (hasError(ctx) ||
      !validateNormReluConv(ctx, node, params, true, x, dy, scale, bias, dw,
                            workspace, workspaceBytes, g))
    return;
  host::poisonWorkspace(workspace, workspaceBytes);
  void *rest = nullptr;
  size_t restBytes = 0;
  TensorRef r = applyNormRelu(ctx, params, g, x, scale, bias, workspace,
                              workspaceBytes, rest, restBytes);
  convBackwardFilter(ctx, node, params, r, dy, dw, rest, restBytes);
}

void normReluApply(Context &ctx, const char *node, TensorRef x, TensorRef scale,
                   TensorRef bias, TensorRef r, bool channelsLast) {
  ChannelLayout layout;
  layout.channelsLast = channelsLast;
  if (hasError(ctx) ||
      !validateNormReluApply(ctx, node, x, scale, bias, r, layout))
    return;
  formNormRelu(ctx, x, scale, bias, layout.channels, layout.spatial,
               channelsLast, r);
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
  host::poisonWorkspace(workspace, workspaceBytes);
  std::vector<double> px = host::toDouble(ctx, x);
  // dy is read into a copy and masked there: dy itself stays as it is
  // unless dx is dy.
  std::vector<double> g = host::toDouble(ctx, dy);
  std::vector<double> v =
      normalized(ctx, px, static_cast<const float *>(appliedScale.data),
                 static_cast<const float *>(appliedBias.data), layout.channels,
                 layout.spatial, channelsLast);
  for (size_t i = 0; i < g.size(); ++i)
    if (!(v[i] > 0))
      g[i] = 0.0;
  std::vector<double> pdx;
  host::batchNormGradient(
      ctx, px, g, x.shape[0], layout.channels, layout.spatial, channelsLast,
      static_cast<const float *>(mean.data),
      static_cast<const float *>(invStd.data),
      static_cast<const float *>(gamma.data), static_cast<float *>(dgamma.data),
      static_cast<float *>(dbeta.data), pdx);
  host::store(ctx, pdx, dx);
}

void batchNormAddReluGrad(Context &ctx, const char *node, TensorRef x,
                          TensorRef dy, TensorRef y, TensorRef scale,
                          TensorRef mean, TensorRef invStd, TensorRef dx,
                          TensorRef dscale, TensorRef dbias, TensorRef dz,
                          void *workspace, size_t workspaceBytes,
                          bool channelsLast) {
  ChannelLayout layout;
  layout.channelsLast = channelsLast;
  if (hasError(ctx) ||
      !validateBatchNormAddReluGrad(ctx, node, x, dy, y, scale, mean, invStd,
                                    dx, dscale, dbias, dz, layout))
    return;
  host::poisonWorkspace(workspace, workspaceBytes);
  std::vector<double> px = host::toDouble(ctx, x);
  std::vector<double> g = host::toDouble(ctx, dy);
  std::vector<double> py = host::toDouble(ctx, y);
  // reluGrad's mask: dy where y > 0 (a NaN y gives 0). g is exact in dz's
  // dtype (dy's or 0), so dz and the gradient below read the same values.
  for (size_t i = 0; i < g.size(); ++i)
    if (!(py[i] > 0))
      g[i] = 0.0;
  host::store(ctx, g, dz);
  std::vector<double> pdx;
  host::batchNormGradient(
      ctx, px, g, x.shape[0], layout.channels, layout.spatial, channelsLast,
      static_cast<const float *>(mean.data),
      static_cast<const float *>(invStd.data),
      static_cast<const float *>(scale.data), static_cast<float *>(dscale.data),
      static_cast<float *>(dbias.data), pdx);
  host::store(ctx, pdx, dx);
}

} // namespace memopt::rt
