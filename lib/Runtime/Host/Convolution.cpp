//===- Convolution.cpp - host convolution and pooling ---------------------===//
//
// conv, convTranspose, convResidual, pool and globalAvgPool on the host (the
// CUDA side: cuDNN in Cuda/CudaLibraries.cpp, pooling and the direct
// fallback in Cuda/Kernels.cu). A forward conv is an implicit GEMM per image
// and group (im2col panels built on the fly through Gemm.h's tile); channels-
// last operands go through channels-first copies. Moved out of
// HostBackend.cpp unchanged.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "HostKernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace memopt::rt {

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

namespace host {

/// [outer][inner][channels] -> [outer][channels][inner]: a channels-last
/// tensor (or a KRSC filter) in channels-first order. The host computes
/// channels-last ops through these copies: the reference stays one loop nest.
std::vector<double> channelsToFront(Context &ctx, const std::vector<double> &v,
                                    int64_t outer, int64_t inner,
                                    int64_t channels) {
  std::vector<double> out(v.size());
  parallelFor(ctx, 0, outer * channels, grainFor(inner),
              [&](int64_t lo, int64_t hi) {
                for (int64_t oc = lo; oc < hi; ++oc) {
                  int64_t o = oc / channels, c = oc % channels;
                  const double *src = v.data() + o * inner * channels + c;
                  double *dst = out.data() + oc * inner;
                  for (int64_t i = 0; i < inner; ++i)
                    dst[i] = src[i * channels];
                }
              });
  return out;
}

/// [outer][channels][inner] -> [outer][inner][channels].
std::vector<double> channelsToBack(Context &ctx, const std::vector<double> &v,
                                   int64_t outer, int64_t inner,
                                   int64_t channels) {
  std::vector<double> out(v.size());
  parallelFor(ctx, 0, outer * channels, grainFor(inner),
              [&](int64_t lo, int64_t hi) {
                for (int64_t oc = lo; oc < hi; ++oc) {
                  int64_t o = oc / channels, c = oc % channels;
                  const double *src = v.data() + oc * inner;
                  double *dst = out.data() + o * inner * channels + c;
                  for (int64_t i = 0; i < inner; ++i)
                    dst[i * channels] = src[i];
                }
              });
  return out;
}

} // namespace host

using host::channelsToBack;
using host::channelsToFront;

namespace {

/// floor(a / b) and ceil(a / b) for b > 0.
int64_t floorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

/// The positions p in [0, count) with 0 <= p * stride + offset < limit, as
/// [lo, hi) (empty when hi <= lo): the padding test hoisted out of a loop.
void validRange(int64_t count, int64_t stride, int64_t offset, int64_t limit,
                int64_t &lo, int64_t &hi) {
  lo = std::max<int64_t>(0, ceilDiv(-offset, stride));
  hi = std::min<int64_t>(count, floorDiv(limit - 1 - offset, stride) + 1);
}

/// Forward conv of kBlock output channels (consecutive, one group) of one
/// image into out[kBlock][outSpatial], which starts at zero. For each output
/// element the sum runs over input channel, then kernel position, as the
/// naive loop does; one input value feeds kBlock channels.
template <int kBlock>
void convChannels(const ConvGeometry &g, const double *xImage,
                  const double *weights, int64_t inPerGroup, int64_t ci0,
                  double *out) {
  int64_t inSpatial = g.in[0] * g.in[1] * g.in[2];
  int64_t outSpatial = g.out[0] * g.out[1] * g.out[2];
  int64_t kSpatial = g.kernel[0] * g.kernel[1] * g.kernel[2];
  for (int64_t cl = 0; cl < inPerGroup; ++cl) {
    const double *xin = xImage + (ci0 + cl) * inSpatial;
    for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0)
      for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1)
        for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
          int64_t kIndex = (k0 * g.kernel[1] + k1) * g.kernel[2] + k2;
          double wv[kBlock];
          for (int b = 0; b < kBlock; ++b)
            wv[b] = weights[(b * inPerGroup + cl) * kSpatial + kIndex];
          int64_t kk[3] = {k0, k1, k2}, lo[3], hi[3], offset[3];
          for (int d = 0; d < 3; ++d) {
            offset[d] = kk[d] * g.dilations[d] - g.padsBegin[d];
            validRange(g.out[d], g.strides[d], offset[d], g.in[d], lo[d],
                       hi[d]);
          }
          for (int64_t p0 = lo[0]; p0 < hi[0]; ++p0)
            for (int64_t p1 = lo[1]; p1 < hi[1]; ++p1) {
              int64_t q0 = p0 * g.strides[0] + offset[0];
              int64_t q1 = p1 * g.strides[1] + offset[1];
              const double *xRow = xin + (q0 * g.in[1] + q1) * g.in[2];
              double *yRow = out + (p0 * g.out[1] + p1) * g.out[2];
              int64_t s2 = g.strides[2], o2 = offset[2];
              for (int b = 0; b < kBlock; ++b) {
                double w = wv[b];
                double *y = yRow + b * outSpatial;
                // Unit stride: a contiguous axpy the compiler vectorizes.
                if (s2 == 1)
                  for (int64_t p2 = lo[2]; p2 < hi[2]; ++p2)
                    y[p2] += w * xRow[p2 + o2];
                else
                  for (int64_t p2 = lo[2]; p2 < hi[2]; ++p2)
                    y[p2] += w * xRow[p2 * s2 + o2];
              }
            }
        }
  }
}

/// Forward conv as an implicit GEMM per image and group: C[co][s] = sum over
/// t of W[co][t] * X[t][s], t = (input channel, kernel position) in the naive
/// loop's order, s = output position. X's panels are built on the fly
/// (im2col, kKC taps x kNC positions at a time) and run through the matmul
/// tile. A tap that falls in the padding reads 0: w * 0 leaves the sum
/// unchanged (it starts at +0 and so never becomes -0), so the result equals
/// the loop that skips padded taps, unless a weight is inf or NaN (then NaN,
/// as ONNX's zero padding defines).
void convGemm(Context &ctx, const ConvGeometry &g, const ConvParams &params,
              const std::vector<double> &vx, const std::vector<double> &vw,
              const std::vector<double> &vb, bool hasBias, const TensorRef &y) {
  int64_t inPerGroup = g.inChannels / g.group;
  int64_t m = g.outChannels / g.group;
  int64_t inSpatial = g.in[0] * g.in[1] * g.in[2];
  int64_t n = g.out[0] * g.out[1] * g.out[2];
  int64_t kSpatial = g.kernel[0] * g.kernel[1] * g.kernel[2];
  int64_t k = inPerGroup * kSpatial;
  // Weights as A panels [group][tile][t][kMR]: W[co][t] is vw[co * k + t].
  int64_t coTiles = (m + kMR - 1) / kMR;
  std::vector<double> aPanels(size_t(g.group * coTiles * k * kMR));
  parallelFor(ctx, 0, g.group * coTiles, grainFor(k * kMR),
              [&](int64_t lo, int64_t hi) {
                for (int64_t item = lo; item < hi; ++item) {
                  int64_t group = item / coTiles, tile = item % coTiles;
                  double *dst = aPanels.data() + item * k * kMR;
                  for (int64_t t = 0; t < k; ++t)
                    for (int64_t r = 0; r < kMR; ++r) {
                      int64_t ol = tile * kMR + r;
                      dst[t * kMR + r] =
                          ol < m ? vw[size_t((group * m + ol) * k + t)] : 0.0;
                    }
                }
              });
  // Work items: (image, group, block of kMC output channels, block of kNC
  // positions).
  int64_t coBlocks = (m + kMC - 1) / kMC, posBlocks = (n + kNC - 1) / kNC;
  int64_t items = g.batch * g.group * coBlocks * posBlocks;
  parallelFor(
      ctx, 0, items, grainFor(kMC * kNC * k), [&](int64_t lo, int64_t hi) {
        std::vector<double> bPanels(size_t(kKC * (kNC + kNR)));
        std::vector<double> acc(size_t(kMC * (kNC + kNR)));
        int64_t ldc = kNC + kNR;
        // Per position of the block: its first input coordinate on each axis
        // (before the kernel offset); per tap of a kKC slice: the channel's
        // offset and the kernel offset on each axis.
        int64_t start[3][kNC + kNR];
        int64_t tapChannel[kKC], tapOffset[3][kKC];
        for (int64_t item = lo; item < hi; ++item) {
          int64_t image = item / (g.group * coBlocks * posBlocks);
          int64_t group = item / (coBlocks * posBlocks) % g.group;
          int64_t m0 = item / posBlocks % coBlocks * kMC;
          int64_t s0 = item % posBlocks * kNC;
          int64_t rows = std::min(kMC, m - m0), cols = std::min(kNC, n - s0);
          int64_t tiles = (rows + kMR - 1) / kMR;
          int64_t panels = (cols + kNR - 1) / kNR;
          for (int64_t c = 0; c < panels * kNR; ++c) {
            int64_t s = std::min(s0 + c, n - 1), p2 = s % g.out[2];
            int64_t p1 = s / g.out[2] % g.out[1],
                    p0 = s / (g.out[1] * g.out[2]);
            start[0][c] = p0 * g.strides[0] - g.padsBegin[0];
            start[1][c] = p1 * g.strides[1] - g.padsBegin[1];
            start[2][c] = p2 * g.strides[2] - g.padsBegin[2];
          }
          const double *xImage =
              vx.data() +
              (image * g.inChannels + group * inPerGroup) * inSpatial;
          for (int64_t t0 = 0; t0 < k; t0 += kKC) {
            int64_t kc = std::min(kKC, k - t0);
            for (int64_t t = 0; t < kc; ++t) {
              int64_t tap = t0 + t, kIndex = tap % kSpatial;
              tapChannel[t] = tap / kSpatial * inSpatial;
              tapOffset[0][t] =
                  kIndex / (g.kernel[1] * g.kernel[2]) * g.dilations[0];
              tapOffset[1][t] =
                  kIndex / g.kernel[2] % g.kernel[1] * g.dilations[1];
              tapOffset[2][t] = kIndex % g.kernel[2] * g.dilations[2];
            }
            // im2col of this slice: B panels [panel][t][kNR].
            for (int64_t jp = 0; jp < panels; ++jp)
              for (int64_t t = 0; t < kc; ++t)
                for (int64_t cc = 0; cc < kNR; ++cc) {
                  int64_t c = jp * kNR + cc;
                  int64_t q0 = start[0][c] + tapOffset[0][t];
                  int64_t q1 = start[1][c] + tapOffset[1][t];
                  int64_t q2 = start[2][c] + tapOffset[2][t];
                  bool inside = c < cols && q0 >= 0 && q0 < g.in[0] &&
                                q1 >= 0 && q1 < g.in[1] && q2 >= 0 &&
                                q2 < g.in[2];
                  bPanels[size_t((jp * kc + t) * kNR + cc)] =
                      inside ? xImage[tapChannel[t] +
                                      (q0 * g.in[1] + q1) * g.in[2] + q2]
                             : 0.0;
                }
            const double *a =
                aPanels.data() + ((group * coTiles + m0 / kMR) * k + t0) * kMR;
            for (int64_t jp = 0; jp < panels; ++jp)
              for (int64_t t = 0; t < tiles; ++t)
                matmulTile(kc, a + t * k * kMR, bPanels.data() + jp * kc * kNR,
                           acc.data() + t * kMR * ldc + jp * kNR, ldc, t0 == 0);
          }
          if (k == 0)
            std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t r = 0; r < rows; ++r) {
            int64_t co = group * m + m0 + r;
            double *row = acc.data() + r * ldc;
            for (int64_t c = 0; c < cols; ++c)
              row[c] = applyActivation(
                  params.activation, row[c] + (hasBias ? vb[size_t(co)] : 0.0));
            int64_t first = (image * g.outChannels + co) * n + s0;
            storeRange(row, first, first + cols, y);
          }
        }
      });
}

/// The channels-first convolution of already converted operands into y.
void convChannelsFirst(Context &ctx, const ConvGeometry &g,
                       const ConvParams &params, bool transposed,
                       const std::vector<double> &vx,
                       const std::vector<double> &vw,
                       const std::vector<double> &vb, const TensorRef *bias,
                       TensorRef y) {
  int64_t inPerGroup = g.inChannels / g.group;
  int64_t outPerGroup = g.outChannels / g.group;
  // Enough output channels per group to fill register tiles: a GEMM. The
  // others (depthwise convs) and ConvTranspose run the direct loops below.
  if (!transposed && outPerGroup >= 2 * kMR) {
    convGemm(ctx, g, params, vx, vw, vb, bias != nullptr, y);
    return;
  }
  int64_t inSpatial = g.in[0] * g.in[1] * g.in[2];
  int64_t outSpatial = g.out[0] * g.out[1] * g.out[2];
  int64_t kSpatial = g.kernel[0] * g.kernel[1] * g.kernel[2];
  // Work items: blocks of kBlock output channels of one image, within one
  // group; each owns its output planes, so no two threads add into one
  // element.
  constexpr int kBlock = 4;
  int64_t blocksPerGroup = (outPerGroup + kBlock - 1) / kBlock;
  int64_t items = g.batch * g.group * blocksPerGroup;
  int64_t work =
      kBlock * inPerGroup * kSpatial * (transposed ? inSpatial : outSpatial);
  parallelFor(ctx, 0, items, grainFor(work), [&](int64_t lo, int64_t hi) {
    std::vector<double> out(size_t(kBlock * outSpatial));
    for (int64_t item = lo; item < hi; ++item) {
      int64_t n = item / (g.group * blocksPerGroup);
      int64_t group = item / blocksPerGroup % g.group;
      int64_t ol0 = item % blocksPerGroup * kBlock;
      int64_t count = std::min<int64_t>(kBlock, outPerGroup - ol0);
      int64_t co0 = group * outPerGroup + ol0;
      std::fill(out.begin(), out.end(), 0.0);
      const double *xImage = vx.data() + n * g.inChannels * inSpatial;
      if (!transposed) {
        // Weights w[co][cl][k].
        const double *wk = vw.data() + co0 * inPerGroup * kSpatial;
        if (count == kBlock)
          convChannels<kBlock>(g, xImage, wk, inPerGroup, group * inPerGroup,
                               out.data());
        else
          for (int64_t b = 0; b < count; ++b)
            convChannels<1>(g, xImage, wk + b * inPerGroup * kSpatial,
                            inPerGroup, group * inPerGroup,
                            out.data() + b * outSpatial);
      } else {
        // Scatter each input element to the outputs it reaches, input
        // channel, then kernel position, then input position: the naive
        // loop's order of contributions to every output element.
        for (int64_t b = 0; b < count; ++b) {
          int64_t ol = ol0 + b;
          double *yout = out.data() + b * outSpatial;
          for (int64_t cl = 0; cl < inPerGroup; ++cl) {
            int64_t ci = group * inPerGroup + cl;
            // Weights w[ci][ol][k].
            const double *wk = &vw[size_t((ci * outPerGroup + ol) * kSpatial)];
            const double *xin = xImage + ci * inSpatial;
            for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0)
              for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1)
                for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
                  double wv = wk[(k0 * g.kernel[1] + k1) * g.kernel[2] + k2];
                  int64_t kk[3] = {k0, k1, k2}, plo[3], phi[3], offset[3];
                  for (int d = 0; d < 3; ++d) {
                    offset[d] = kk[d] * g.dilations[d] - g.padsBegin[d];
                    validRange(g.in[d], g.strides[d], offset[d], g.out[d],
                               plo[d], phi[d]);
                  }
                  for (int64_t p0 = plo[0]; p0 < phi[0]; ++p0)
                    for (int64_t p1 = plo[1]; p1 < phi[1]; ++p1) {
                      int64_t q0 = p0 * g.strides[0] + offset[0];
                      int64_t q1 = p1 * g.strides[1] + offset[1];
                      const double *xRow = xin + (p0 * g.in[1] + p1) * g.in[2];
                      double *yRow = yout + (q0 * g.out[1] + q1) * g.out[2];
                      for (int64_t p2 = plo[2]; p2 < phi[2]; ++p2)
                        yRow[p2 * g.strides[2] + offset[2]] += wv * xRow[p2];
                    }
                }
          }
        }
      }
      for (int64_t b = 0; b < count; ++b) {
        int64_t co = co0 + b;
        double *plane = out.data() + b * outSpatial;
        for (int64_t s = 0; s < outSpatial; ++s)
          plane[s] = applyActivation(params.activation,
                                     plane[s] + (bias ? vb[co] : 0.0));
        storeRange(plane, (n * g.outChannels + co) * outSpatial,
                   (n * g.outChannels + co + 1) * outSpatial, y);
      }
    }
  });
}

void convImpl(Context &ctx, const char *node, const ConvParams &params,
              bool transposed, TensorRef x, TensorRef w, const TensorRef *bias,
              TensorRef y) {
  ConvGeometry g;
  if (hasError(ctx) ||
      !validateConv(ctx, node, params, transposed, x, w, bias, y, g))
    return;
  // Inputs are converted first; the workers then write disjoint parts of y.
  std::vector<double> vx = toDouble(ctx, x), vw = toDouble(ctx, w), vb;
  if (bias)
    vb = toDouble(*bias);
  if (!g.channelsLast) {
    convChannelsFirst(ctx, g, params, transposed, vx, vw, vb, bias, y);
    return;
  }
  // Channels-last: the same loops on channels-first copies, the result
  // computed into a double buffer and stored back channels-last.
  int64_t inSpatial = g.in[0] * g.in[1] * g.in[2];
  int64_t outSpatial = g.out[0] * g.out[1] * g.out[2];
  int64_t kSpatial = g.kernel[0] * g.kernel[1] * g.kernel[2];
  vx = channelsToFront(ctx, vx, g.batch, inSpatial, g.inChannels);
  // Filters: conv's [M, k..., C/g]; ConvTranspose's [C, k..., M/g].
  vw = transposed ? channelsToFront(ctx, vw, g.inChannels, kSpatial,
                                    g.outChannels / g.group)
                  : channelsToFront(ctx, vw, g.outChannels, kSpatial,
                                    g.inChannels / g.group);
  std::vector<double> vy(size_t(y.numElements()));
  TensorRef first = channelsFirstView(y);
  first.data = vy.data();
  first.dtype = DType::F64;
  convChannelsFirst(ctx, g, params, transposed, vx, vw, vb, bias, first);
  store(ctx, channelsToBack(ctx, vy, g.batch, outSpatial, g.outChannels), y);
}

} // namespace

void conv(Context &ctx, const char *node, const ConvParams &params, TensorRef x,
          TensorRef w, const TensorRef *bias, TensorRef y, void *workspace,
          size_t workspaceBytes) {
  poisonWorkspace(workspace, workspaceBytes);
  convImpl(ctx, node, params, false, x, w, bias, y);
  poisonWorkspace(workspace, workspaceBytes);
}

void convTranspose(Context &ctx, const char *node, const ConvParams &params,
                   TensorRef x, TensorRef w, const TensorRef *bias, TensorRef y,
                   void *workspace, size_t workspaceBytes) {
  poisonWorkspace(workspace, workspaceBytes);
  convImpl(ctx, node, params, true, x, w, bias, y);
  poisonWorkspace(workspace, workspaceBytes);
}

void convResidual(Context &ctx, const char *node, const ConvParams &params,
                  TensorRef x, TensorRef w, const TensorRef *bias,
                  TensorRef residual, TensorRef y, void *workspace,
                  size_t workspaceBytes) {
  if (hasError(ctx) || !validateConvResidual(ctx, node, residual, y))
    return;
  // y may be the residual: read it before the convolution overwrites it.
  std::vector<double> vr = toDouble(ctx, residual);
  ConvParams linear = params;
  linear.activation = Activation::None;
  conv(ctx, node, linear, x, w, bias, y, workspace, workspaceBytes);
  if (hasError(ctx))
    return;
  std::vector<double> vy = toDouble(ctx, y);
  for (size_t i = 0; i < vy.size(); ++i)
    vy[i] = applyActivation(params.activation, vy[i] + vr[i]);
  store(ctx, vy, y);
}

void pool(Context &ctx, const char *node, const PoolParams &params, TensorRef x,
          TensorRef y) {
  ConvGeometry g;
  if (hasError(ctx) || !validatePool(ctx, node, params, x, y, g))
    return;
  std::vector<double> vx = toDouble(x);
  int64_t inSpatial = g.in[0] * g.in[1] * g.in[2];
  int64_t outSpatial = g.out[0] * g.out[1] * g.out[2];
  if (g.channelsLast)
    vx = channelsToFront(ctx, vx, g.batch, inSpatial, g.inChannels);
  std::vector<double> out(size_t(g.batch * g.inChannels * outSpatial));
  for (int64_t plane = 0; plane < g.batch * g.inChannels; ++plane) {
    const double *xin = &vx[size_t(plane * inSpatial)];
    for (int64_t o = 0; o < outSpatial; ++o) {
      int64_t oc[3] = {o / (g.out[1] * g.out[2]), (o / g.out[2]) % g.out[1],
                       o % g.out[2]};
      double best = -std::numeric_limits<double>::infinity(), sum = 0;
      int64_t valid = 0, padded = 1;
      for (int d = 0; d < 3; ++d) {
        // Window positions inside the padded input (count_include_pad).
        int64_t start = oc[d] * g.strides[d] - g.padsBegin[d];
        int64_t inPadded = 0;
        for (int64_t k = 0; k < g.kernel[d]; ++k) {
          int64_t pos = start + k * g.dilations[d];
          inPadded += pos >= -g.padsBegin[d] && pos < g.in[d] + g.padsEnd[d];
        }
        padded *= inPadded;
      }
      for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0)
        for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1)
          for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
            int64_t kk[3] = {k0, k1, k2}, q[3];
            bool inside = true;
            for (int d = 0; d < 3 && inside; ++d) {
              q[d] = oc[d] * g.strides[d] - g.padsBegin[d] +
                     kk[d] * g.dilations[d];
              inside = q[d] >= 0 && q[d] < g.in[d];
            }
            if (!inside)
              continue;
            double v = xin[(q[0] * g.in[1] + q[1]) * g.in[2] + q[2]];
            best = std::max(best, v);
            sum += v;
            ++valid;
          }
      double r;
      if (params.kind == PoolKind::Max)
        r = best;
      else
        r = sum / double(params.countIncludePad ? padded
                                                : std::max<int64_t>(valid, 1));
      out[size_t(plane * outSpatial + o)] = r;
    }
  }
  if (g.channelsLast)
    out = channelsToBack(ctx, out, g.batch, outSpatial, g.inChannels);
  store(out, y);
}

void globalAvgPool(Context &ctx, const char *node, TensorRef x, TensorRef y,
                   bool channelsLast) {
  int64_t channels = 0;
  if (hasError(ctx) ||
      !validateGlobalAvgPool(ctx, node, x, y, channelsLast, channels))
    return;
  std::vector<double> vx = toDouble(x);
  int64_t planes = x.shape[0] * channels;
  int64_t spatial = planes ? x.numElements() / planes : 0;
  if (channelsLast)
    vx = channelsToFront(ctx, vx, x.shape[0], spatial, channels);
  std::vector<double> out(static_cast<size_t>(planes));
  for (int64_t p = 0; p < planes; ++p) {
    double sum = 0;
    for (int64_t s = 0; s < spatial; ++s)
      sum += vx[size_t(p * spatial + s)];
    out[size_t(p)] = spatial ? sum / double(spatial) : 0;
  }
  store(out, y);
}

} // namespace memopt::rt
