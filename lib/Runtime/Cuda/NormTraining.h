//===- NormTraining.h - training batch norm launches, shared ----*- C++ -*-===//
//
// The launches of training-mode batch normalization (NormTrainingKernels.cu)
// that the fused batch-norm -> ReLU -> convolution's runtime functions
// (NormConvKernels.cu: batchNormStats, batchNormReluGrad) share with
// batchNormTraining / batchNormTrainingGrad, so that a fused and an unfused
// program reduce in the same order and agree bit for bit; and the pack width
// of their vectorized loads.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_RUNTIME_CUDA_NORMTRAINING_H
#define MEMOPT_LIB_RUNTIME_CUDA_NORMTRAINING_H

#include "CudaInternal.h"

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace memopt::rt {

/// Elements per load of activations of `elementSize` bytes whose innermost
/// run (a channel's spatial run, or channels-last the channels) is `inner`
/// elements: 16 or 8 bytes where `inner` is a multiple of them and every
/// pointer is aligned to them, else one element.
int normPackWidth(size_t elementSize, int64_t inner,
                  std::initializer_list<const void *> pointers);

/// Calls f(std::integral_constant<int, V>) for the pack width of T.
template <typename T, typename F> void withNormPackWidth(int width, F &&f) {
  constexpr int kWide = 16 / int(sizeof(T)), kNarrow = 8 / int(sizeof(T));
  if (width == kWide)
    f(std::integral_constant<int, kWide>());
  else if (width == kNarrow)
    f(std::integral_constant<int, kNarrow>());
  else
    f(std::integral_constant<int, 1>());
}

/// batchNormTraining's statistics of x [N, C, ...] (or channels-last): mean
/// and invStd [C] f32, the reduction split over what `workspace` holds. The
/// pack width depends on x alone. Launches only (the caller checks).
void launchBatchNormStatistics(Context &ctx, const TensorRef &x,
                               int64_t channels, int64_t spatial,
                               bool channelsLast, float epsilon,
                               void *workspace, size_t workspaceBytes,
                               float *mean, float *invStd);

/// batchNormTrainingGrad's launches: dscale, dbias, then dx (may be dy).
/// With maskScale / maskBias (f32 [C]) dy is read as
/// fmaf(x, maskScale[c], maskBias[c]) > 0 ? dy : 0 (batchNormReluGrad);
/// with forkY / forkDz (x's shape and dtype) as forkY > 0 ? dy : 0, which
/// the reduction stores to forkDz and dx is computed from
/// (batchNormAddReluGrad; dx may then be dy, not forkDz).
void launchBatchNormGrad(Context &ctx, const TensorRef &x, const TensorRef &dy,
                         const TensorRef &dx, int64_t channels, int64_t spatial,
                         bool channelsLast, void *workspace,
                         size_t workspaceBytes, const float *mean,
                         const float *invStd, const float *scale, float *dscale,
                         float *dbias, const float *maskScale,
                         const float *maskBias,
                         const TensorRef *forkY = nullptr,
                         const TensorRef *forkDz = nullptr);

} // namespace memopt::rt

#endif // MEMOPT_LIB_RUNTIME_CUDA_NORMTRAINING_H
