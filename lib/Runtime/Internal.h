//===- Internal.h - helpers shared by the runtime backends -------*- C++
//-*-===//
//
// Private to lib/Runtime: argument validation (so both backends report the
// same errors), numpy broadcasting, and f16 / bf16 conversion on the host.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_RUNTIME_INTERNAL_H
#define MEMOPT_LIB_RUNTIME_INTERNAL_H

#include "memopt/Runtime/Runtime.h"

#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#ifdef __CUDACC__
#define MEMOPT_HOST_DEVICE __host__ __device__
#else
#define MEMOPT_HOST_DEVICE
#endif

namespace memopt::rt {

/// Records "message" for `nodeName` on the context; printf-style.
void failf(Context &ctx, const char *nodeName, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/// Returns true when the context already holds an error: ops then do nothing.
bool hasError(Context &ctx);

/// The engine an environment variable such as MEMOPT_CONV_ENGINE or
/// MEMOPT_ATTENTION_ENGINE picks: `option` (a ConvEngine's or
/// AttentionEngine's value) where `environment` is null or empty, else the
/// engine it names, `measured` (0), `cudnn` (1) or `memopt` (2); false
/// (`engine` unchanged) for any other text.
bool engineFromEnvironment(int32_t option, const char *environment,
                           int32_t &engine);

/// "[2, 3, 4]"
std::string shapeString(const TensorRef &t);

//===----------------------------------------------------------------------===//
// Validation: each returns false after recording an error.
//===----------------------------------------------------------------------===//

bool checkTensor(Context &ctx, const char *node, const TensorRef &t,
                 const char *what);
bool checkFloat(Context &ctx, const char *node, const TensorRef &t,
                const char *what);
bool checkSameDType(Context &ctx, const char *node, const TensorRef &a,
                    const TensorRef &b, const char *what);
bool checkSameShape(Context &ctx, const char *node, const TensorRef &a,
                    const TensorRef &b, const char *what);
bool checkSameCount(Context &ctx, const char *node, const TensorRef &a,
                    const TensorRef &b, const char *what);
/// Every input must broadcast to `out`; with `exact`, `out` must also be
/// exactly the broadcast shape of the inputs (no extra expansion).
bool checkBroadcast(Context &ctx, const char *node, const TensorRef *inputs,
                    int numInputs, const TensorRef &out, bool exact = true);
bool checkAxis(Context &ctx, const char *node, int axis, int rank);

//===----------------------------------------------------------------------===//
// Broadcasting
//===----------------------------------------------------------------------===//

/// Element strides of `in` aligned to `out`'s rank, 0 where `in` broadcasts.
struct BroadcastStrides {
  int64_t stride[kMaxRank];
};
BroadcastStrides broadcastStrides(const TensorRef &in, const TensorRef &out);
/// Row-major element strides of a shape.
void contiguousStrides(const TensorRef &t, int64_t *strides);
/// True when every dim of `in` (right-aligned) equals `out`'s.
bool sameShape(const TensorRef &a, const TensorRef &b);

//===----------------------------------------------------------------------===//
// Host-side f16 / bf16 conversion (round to nearest even, NaN/Inf kept).
//===----------------------------------------------------------------------===//

inline float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else { // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mantissa <<= 1;
      } while ((mantissa & 0x400) == 0);
      bits = sign | uint32_t(127 - 15 - e) << 23 | (mantissa & 0x3ff) << 13;
    }
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | mantissa << 13;
  } else {
    bits = sign | (exponent + 127 - 15) << 23 | mantissa << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t floatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000;
  uint32_t absBits = bits & 0x7fffffff;
  if (absBits >= 0x7f800000) // Inf or NaN
    return uint16_t(sign | 0x7c00 | (absBits > 0x7f800000 ? 0x200 : 0));
  if (absBits >= 0x477ff000) // rounds to >= 65520: overflow to Inf
    return uint16_t(sign | 0x7c00);
  if (absBits < 0x38800000) { // subnormal half (or zero)
    if (absBits < 0x33000000)
      return uint16_t(sign);
    uint32_t exponent = absBits >> 23;
    uint32_t mantissa = (absBits & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - exponent; // 14..24
    uint32_t value = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (value & 1)))
      ++value;
    return uint16_t(sign | value);
  }
  uint32_t value = ((absBits >> 13) - (112u << 10));
  uint32_t rest = absBits & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (value & 1)))
    ++value;
  return uint16_t(sign | value);
}

inline float bf16ToFloat(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffff) > 0x7f800000)
    return uint16_t((bits >> 16) | 0x40);
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return uint16_t((bits + rounding) >> 16);
}

/// Loads element `i` of a buffer of `dtype` as double (any dtype).
double loadAsDouble(const void *data, DType dtype, int64_t i);
/// Stores `v` into element `i` (float→int truncates; →Bool is v != 0).
void storeFromDouble(void *data, DType dtype, int64_t i, double v);

} // namespace memopt::rt

//===----------------------------------------------------------------------===//
// Per-op validation shared by both backends (Validate.cpp: inference
// families; ValidateTraining.cpp: training, collectives, offload). Each
// returns false after recording an error, and fills in the geometry the
// kernels need. A backend's entry point calls one of these before any work.
//===----------------------------------------------------------------------===//

namespace memopt::rt {

bool validateUnary(Context &ctx, const char *node, UnaryOp op,
                   const TensorRef &x, const TensorRef &y);
bool validateFusedElementwise(Context &ctx, const char *node,
                              const ElementwiseStep *steps, int numSteps,
                              const TensorRef *inputs, int numInputs,
                              const TensorRef &y);
bool validateBinary(Context &ctx, const char *node, BinaryOp op,
                    const TensorRef &a, const TensorRef &b, const TensorRef &c);
bool validateCompare(Context &ctx, const char *node, const TensorRef &a,
                     const TensorRef &b, const TensorRef &c, bool logical);
bool validateWhere(Context &ctx, const char *node, const TensorRef &cond,
                   const TensorRef &x, const TensorRef &z, const TensorRef &y);
bool validateIsNaN(Context &ctx, const char *node, const TensorRef &x,
                   const TensorRef &y);
bool validateRange(Context &ctx, const char *node, const TensorRef &start,
                   const TensorRef &delta, const TensorRef &y);

/// Cast: any dtypes, one element count.
bool validateCast(Context &ctx, const char *node, const TensorRef &x,
                  const TensorRef &y);
/// Copy: any tensors of one byte size.
bool validateCopy(Context &ctx, const char *node, const TensorRef &x,
                  const TensorRef &y);
/// Expand: one dtype, x broadcasting to y.
bool validateExpand(Context &ctx, const char *node, const TensorRef &x,
                    const TensorRef &y);

struct MatmulGeometry {
  int64_t m = 0, n = 0, k = 0;
  int batchRank = 0;
  int64_t batchCount = 1;
  TensorRef aBatch, bBatch, cBatch; ///< batch dims only (for broadcasting)
  /// The bias is a row vector of length N (every other dim 1).
  bool biasIsRowVector = false;
};
bool validateMatmul(Context &ctx, const char *node, const MatmulParams &params,
                    const TensorRef &a, const TensorRef &b,
                    const TensorRef *bias, const TensorRef &c,
                    MatmulGeometry &geometry);

/// Flattened attention problem: `batch` entries of [S, D] x [Sk, D] -> [S,
/// Dv]. Per-operand batch strides (elements, 0 where broadcast) are given for
/// each of up to kMaxRank batch dims of y; bias strides cover all of y's
/// batch dims plus the row (query) and column (key) dims.
struct AttentionGeometry {
  int64_t batch = 1, queries = 0, keys = 0, headSize = 0, valueSize = 0;
  int batchRank = 0;
  int64_t batchShape[kMaxRank] = {};
  int64_t qStride[kMaxRank] = {}, kStride[kMaxRank] = {},
          vStride[kMaxRank] = {}, biasStride[kMaxRank] = {};
  int64_t biasRowStride = 0, biasColStride = 0;
  bool hasBias = false;
  /// attentionBackward with groupedGradients: the consecutive batch entries
  /// that share one K / V entry (entry e holds batch entries e * group to
  /// e * group + group - 1); 1 otherwise.
  int64_t group = 1;
};
bool validateAttention(Context &ctx, const char *node,
                       const AttentionParams &params, const TensorRef &q,
                       const TensorRef &k, const TensorRef &v,
                       const TensorRef *bias, const TensorRef &y,
                       AttentionGeometry &geometry);
/// The row statistics of attention (`lse`): F32 [batch..., S, 2] with y's
/// batch dims, aliasing none of the other tensors given.
bool validateAttentionStatistics(
    Context &ctx, const char *node, const TensorRef &lse, const TensorRef &y,
    std::initializer_list<const TensorRef *> others);
/// attentionBackward's tensors (the forward's checked by validateAttention).
bool validateAttentionBackward(
    Context &ctx, const char *node, const AttentionParams &params,
    const TensorRef &q, const TensorRef &k, const TensorRef &v,
    const TensorRef *bias, const TensorRef &y, const TensorRef &dy,
    const TensorRef &lse, const TensorRef &dq, const TensorRef &dk,
    const TensorRef &dv, const TensorRef *dbias, AttentionGeometry &geometry);
/// CUDA backend only (the kernel suite's check of cuDNN's dropout; no host
/// definition): the next attention forward on `ctx` whose dropout cuDNN's
/// generator draws (AttentionParams::dropoutCudnnRng) also writes cuDNN's
/// draws, F32 [b, h, S, Sk] in cuDNN's view of the call (1 where an element
/// is kept, 0 where dropped), to the device memory `dump` (its plan is one of
/// its own).
void setCudnnAttentionRngDump(Context &ctx, void *dump);
/// Statistics below this (natural units) are stored saturated as
/// kAttentionLowestMax: the CUDA kernels' log2 domain ends at -FLT_MAX.
constexpr float kAttentionSaturation = -2.35e38f;
constexpr float kAttentionLowestMax = -2.3586574e38f; // -FLT_MAX / log2(e)

/// Spatial dims padded to 3 (missing dims are 1 with kernel 1, stride 1).
struct ConvGeometry {
  /// x and y (and a conv's w) have their channel axis last.
  bool channelsLast = false;
  int64_t batch = 0, inChannels = 0, outChannels = 0, group = 1;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1};
  int64_t padsBegin[3] = {0, 0, 0}, padsEnd[3] = {0, 0, 0};
  int64_t strides[3] = {1, 1, 1}, dilations[3] = {1, 1, 1};
};
/// `t` with its last axis moved to position 1 (same data): the
/// channels-first view of a channels-last tensor, for shape checks.
TensorRef channelsFirstView(const TensorRef &t);
bool validateConv(Context &ctx, const char *node, const ConvParams &params,
                  bool transposed, const TensorRef &x, const TensorRef &w,
                  const TensorRef *bias, const TensorRef &y,
                  ConvGeometry &geometry);
/// convResidual's residual: y's shape and dtype (y may be the residual).
bool validateConvResidual(Context &ctx, const char *node,
                          const TensorRef &residual, const TensorRef &y);
bool validatePool(Context &ctx, const char *node, const PoolParams &params,
                  const TensorRef &x, const TensorRef &y,
                  ConvGeometry &geometry);

/// [outer, axis, inner] view of a tensor around `axis`.
struct AxisSplit {
  int64_t outer = 1, axis = 1, inner = 1;
};
AxisSplit splitAt(const TensorRef &t, int axis);

/// Softmax / LogSoftmax: float x and y of one type and shape, axis in range.
bool validateSoftmax(Context &ctx, const char *node, int axis,
                     const TensorRef &x, const TensorRef &y);
/// GlobalAveragePool: float x [N, C, ...] (or [N, ..., C]) and y of one
/// type holding N x C elements; gives C.
bool validateGlobalAvgPool(Context &ctx, const char *node, const TensorRef &x,
                           const TensorRef &y, bool channelsLast,
                           int64_t &channels);
/// ArgMax / ArgMin: float x, an I64 y of the reduced element count.
bool validateArgReduce(Context &ctx, const char *node, int axis,
                       const TensorRef &x, const TensorRef &y);
bool validateLayerNorm(Context &ctx, const char *node, int axis,
                       const TensorRef &x, const TensorRef &scale,
                       const TensorRef *bias, const TensorRef &y);
bool validateBatchNorm(Context &ctx, const char *node, const TensorRef &x,
                       const TensorRef &scale, const TensorRef &bias,
                       const TensorRef &mean, const TensorRef &var,
                       const TensorRef &y, bool channelsLast = false);
bool validateReduce(Context &ctx, const char *node, const int *axes,
                    int numAxes, const TensorRef &x, const TensorRef &y);
/// CumSum: x and y of one shape and of one dtype among F32, F16, BF16, I32
/// and I64; axis in [0, rank).
bool validateCumSum(Context &ctx, const char *node, int axis,
                    const TensorRef &x, const TensorRef &y);
bool validateTranspose(Context &ctx, const char *node, const int *perm,
                       const TensorRef &x, const TensorRef &y);
bool validateConcat(Context &ctx, const char *node, int axis,
                    const TensorRef *inputs, int numInputs, const TensorRef &y);
bool validateSlice(Context &ctx, const char *node, const int64_t *starts,
                   const int64_t *steps, const TensorRef &x,
                   const TensorRef &y);
bool validateGather(Context &ctx, const char *node, int axis,
                    const TensorRef &x, const TensorRef &indices,
                    const TensorRef &y, bool elements);
/// ScatterND: `tuples` index tuples of `k` entries each address `sliceSize`
/// contiguous elements of y; `dims` / `strides` are data's first k axes.
struct ScatterGeometry {
  int64_t tuples = 0, k = 0, sliceSize = 1;
  int64_t dims[kMaxRank] = {}, strides[kMaxRank] = {};
};
bool validateScatterND(Context &ctx, const char *node,
                       ScatterReduction reduction, const TensorRef &data,
                       const TensorRef &indices, const TensorRef &updates,
                       const TensorRef &y, ScatterGeometry &geometry);
bool validatePad(Context &ctx, const char *node, PadMode mode,
                 const int64_t *padsBegin, const int64_t *padsEnd,
                 const TensorRef &x, const TensorRef &y);
/// Per-axis source coordinate scale for Resize (input/output ratio inverse).
bool validateResize(Context &ctx, const char *node, const ResizeParams &params,
                    const TensorRef &x, const TensorRef &y, float *scales);

/// Training ops. Cross-entropy: logits [R, C] (any [..., C] view),
/// labels I64 / I32 with R elements, loss / dloss F32 with one element.
bool validateSoftmaxCrossEntropy(Context &ctx, const char *node,
                                 const TensorRef &logits,
                                 const TensorRef &labels,
                                 const TensorRef &scalar, const char *what,
                                 int64_t &rows, int64_t &classes);
/// The fused head + loss: x [R, K] (any [..., K] view), w [C, K] of x's
/// float dtype, labels with R elements, loss / dloss F32 scalars, lse F32
/// with R elements; the gradient's dx / dw have x's / w's shapes and dtype.
bool validateLinearCrossEntropy(Context &ctx, const char *node,
                                const TensorRef &x, const TensorRef &w,
                                const TensorRef &labels,
                                const TensorRef &scalar, const char *what,
                                const TensorRef &lse, int64_t &rows,
                                int64_t &classes, int64_t &features);
bool validateLinearCrossEntropyGrad(Context &ctx, const char *node,
                                    const TensorRef &x, const TensorRef &w,
                                    const TensorRef &dx, const TensorRef &dw);
/// The filter gradient has the geometry of `conv` with dw as its weight.
bool validateConvBackwardFilter(Context &ctx, const char *node,
                                const ConvParams &params, const TensorRef &x,
                                const TensorRef &dy, const TensorRef &dw,
                                ConvGeometry &geometry);
bool validatePoolGrad(Context &ctx, const char *node, const PoolParams &params,
                      const TensorRef &x, const TensorRef &dy,
                      const TensorRef &dx, ConvGeometry &geometry);
/// Optimizer updates: F32 tensors of one element count (the gradient may be
/// F16 or BF16), F32 scalars for the learning rate and the step.
bool validateSgdUpdate(Context &ctx, const char *node, float momentum,
                       const TensorRef &param, const TensorRef &grad,
                       const TensorRef *momentumBuffer, const TensorRef &lr);
bool validateAdamwUpdate(Context &ctx, const char *node, const TensorRef &param,
                         const TensorRef &grad, const TensorRef &m,
                         const TensorRef &v, const TensorRef &lr,
                         const TensorRef &step);

/// Dropout: float x and y of one type and shape, an I64 key of two
/// elements, ratio in [0, 1).
bool validateRandomUniform(Context &ctx, const char *node, float low,
                           float high, const TensorRef &key,
                           const TensorRef &y);
bool validateDropout(Context &ctx, const char *node, float ratio,
                     const TensorRef &x, const TensorRef &key,
                     const TensorRef &y);
/// accumulateGradient's operands: a float gradient, an f32 accumulator of
/// its elements (required), the micro-step.
bool validateGradientAccumulation(Context &ctx, const char *node,
                                  const TensorRef &grad,
                                  const GradientAccumulation &accumulation);
/// Gradient accumulation: an F32 accumulator of the parameter's shape, an
/// F32 scalar micro-step and at least 2 steps.
bool validateAccumulation(Context &ctx, const char *node,
                          const TensorRef &param,
                          const GradientAccumulation &accumulation);
/// Loss scaling of an update: F32 scalars scale and foundInf; `needsState`
/// (AdamW): an F32 [2] state.
bool validateLossScaling(Context &ctx, const char *node,
                         const LossScaling &scaling, bool needsState);
/// foundInf: float gradients, F32 accumulators with an F32 scalar micro-step
/// (both or neither), an F32 scalar flag.
bool validateFoundInf(Context &ctx, const char *node,
                      const TensorRef *gradients, int count,
                      const TensorRef *accumulators, int accumulatorCount,
                      const TensorRef *microStep, const TensorRef &found);
/// updateLossScale: F32 scalars scale and foundInf, F32 [2] state, factors
/// growth >= 1, backoff in (0, 1], interval >= 1, micro-step with K > 1.
bool validateUpdateLossScale(Context &ctx, const char *node, float growth,
                             float backoff, int64_t interval,
                             const TensorRef &scale, const TensorRef &state,
                             const TensorRef &foundInf,
                             const TensorRef *microStep, int64_t steps);

/// Training-mode normalization: x [N, C, ...] gives C channels and the
/// product of the other axes.
struct ChannelLayout {
  int64_t channels = 0, spatial = 1;
  /// x is [N, spatial..., C] (the channel innermost).
  bool channelsLast = false;
};
/// Activations (X, Y) of one float type and shape, f32 scale, B, mean and
/// inv_std of C elements; relu the one fused activation.
bool validateBatchNormTraining(Context &ctx, const char *node,
                               Activation activation, const TensorRef &x,
                               const TensorRef &scale, const TensorRef &bias,
                               const TensorRef &y, const TensorRef &mean,
                               const TensorRef &invStd, ChannelLayout &layout);
bool validateBatchNormTrainingGrad(
    Context &ctx, const char *node, const TensorRef &x, const TensorRef &dy,
    const TensorRef &scale, const TensorRef &mean, const TensorRef &invStd,
    const TensorRef &dx, const TensorRef &dscale, const TensorRef &dbias,
    ChannelLayout &layout);
/// batchNormTrainingAdd: validateBatchNormTraining, and Z of X's shape and
/// dtype.
bool validateBatchNormTrainingAdd(Context &ctx, const char *node,
                                  Activation activation, const TensorRef &x,
                                  const TensorRef &scale, const TensorRef &bias,
                                  const TensorRef &z, const TensorRef &y,
                                  const TensorRef &mean,
                                  const TensorRef &invStd,
                                  ChannelLayout &layout);
/// batchNormAddReluGrad: validateBatchNormTrainingGrad, Y and dZ of X's
/// shape and dtype, dZ not dX's storage.
bool validateBatchNormAddReluGrad(
    Context &ctx, const char *node, const TensorRef &x, const TensorRef &dy,
    const TensorRef &y, const TensorRef &scale, const TensorRef &mean,
    const TensorRef &invStd, const TensorRef &dx, const TensorRef &dscale,
    const TensorRef &dbias, const TensorRef &dz, ChannelLayout &layout);
/// batchNormStats: validateBatchNormTraining's X and per-channel checks
/// (no Y) with the f32 appliedScale / appliedBias of C elements.
bool validateBatchNormStats(Context &ctx, const char *node, const TensorRef &x,
                            const TensorRef &gamma, const TensorRef &beta,
                            const TensorRef &mean, const TensorRef &invStd,
                            const TensorRef &appliedScale,
                            const TensorRef &appliedBias,
                            ChannelLayout &layout);
/// normReluApply: X and R of one shape and float dtype, f32 scale / bias of
/// C elements.
bool validateNormReluApply(Context &ctx, const char *node, const TensorRef &x,
                           const TensorRef &scale, const TensorRef &bias,
                           const TensorRef &r, ChannelLayout &layout);
/// batchNormReluGrad: validateBatchNormTrainingGrad, and the f32
/// appliedScale / appliedBias of C elements.
bool validateBatchNormReluGrad(Context &ctx, const char *node,
                               const TensorRef &x, const TensorRef &dy,
                               const TensorRef &gamma, const TensorRef &mean,
                               const TensorRef &invStd,
                               const TensorRef &appliedScale,
                               const TensorRef &appliedBias,
                               const TensorRef &dx, const TensorRef &dgamma,
                               const TensorRef &dbeta, ChannelLayout &layout);
/// normReluConv (`backwardFilter` false: `other` is W, `out` Y, as
/// validateConv) and normReluConvBackwardFilter (true: `other` dY, `out`
/// dW, as validateConvBackwardFilter): no activation, f32 scale / bias of
/// x's C channels, and a workspace of at least
/// workspace::normReluConvTempBytes(x.bytes()).
bool validateNormReluConv(Context &ctx, const char *node,
                          const ConvParams &params, bool backwardFilter,
                          const TensorRef &x, const TensorRef &other,
                          const TensorRef &scale, const TensorRef &bias,
                          const TensorRef &out, const void *workspace,
                          size_t workspaceBytes, ConvGeometry &geometry);
/// f32 statistics and running statistics of one channel count.
bool validateBatchNormRunningUpdate(Context &ctx, const char *node,
                                    const TensorRef &mean,
                                    const TensorRef &invStd,
                                    const TensorRef &runningMean,
                                    const TensorRef &runningVar);
/// X, dY, dX of one float type and shape; f32 Scale, dScale, dB of the
/// normalized columns (x is rows of them).
bool validateLayerNormGrad(Context &ctx, const char *node, const TensorRef &x,
                           const TensorRef &dy, const TensorRef &scale,
                           const TensorRef &dx, const TensorRef &dscale,
                           const TensorRef &dbias);

/// Data-parallel collectives: F32 x and y, y holding `yElements` elements.
bool validateCollective(Context &ctx, const char *node, const TensorRef &x,
                        const TensorRef &y, int64_t yElements);
/// A collective's gradient accumulation: validateAccumulation, and an f32
/// input where an accumulator sums it.
bool validateCollectiveAccumulation(Context &ctx, const char *node,
                                    const TensorRef &x,
                                    const GradientAccumulation &accumulation);
/// The sharded collectives: `ranks` >= 1, y (the shard) holding x's equal
/// chunk and the tail; all_gather in place over `param`; gather_parameter of
/// an f32 parameter.
bool validateReduceScatter(Context &ctx, const char *node, int64_t ranks,
                           const TensorRef &x, const TensorRef &y);
bool validateAllGather(Context &ctx, const char *node, int64_t ranks,
                       const TensorRef &param);
bool validateGatherParameter(Context &ctx, const char *node, int64_t ranks,
                             const TensorRef &shard, const TensorRef &whole);
/// Activation offload: [hostOffset, hostOffset + bytes) inside a reserved
/// host pool of `poolBytes`.
bool validateHostPoolRange(Context &ctx, const char *node, int64_t hostOffset,
                           int64_t bytes, bool poolReserved, size_t poolBytes);
/// The context's communicator, checked against the `ranks` the program was
/// compiled for (`ranks` < 1: any); nullptr with `ok` for a one-rank program
/// run alone. Both backends' collectives start here.
Communicator *collectiveCommunicator(Context &ctx, const char *node,
                                     int64_t ranks, bool &ok);
/// Fails the context with the communicator's error for `call`.
void failCollective(Context &ctx, const char *node, const char *call,
                    Communicator &comm);

/// ONNX Resize: the source coordinate of output index `o` along an axis.
MEMOPT_HOST_DEVICE inline float resizeSourceCoordinate(CoordinateMode mode,
                                                       float o, float scale,
                                                       int64_t inSize,
                                                       int64_t outSize) {
  switch (mode) {
  case CoordinateMode::HalfPixel:
    return (o + 0.5f) / scale - 0.5f;
  case CoordinateMode::PytorchHalfPixel:
    return outSize > 1 ? (o + 0.5f) / scale - 0.5f : 0.0f;
  case CoordinateMode::AlignCorners:
    return outSize == 1 ? 0.0f : o * float(inSize - 1) / float(outSize - 1);
  case CoordinateMode::Asymmetric:
    return o / scale;
  case CoordinateMode::TfHalfPixelForCenters:
    return (o + 0.5f) / scale;
  }
  return 0.0f;
}

//===----------------------------------------------------------------------===//
// Per-op instrumentation (opDone): timing and result dumps, both backends
//===----------------------------------------------------------------------===//

/// Time per op of the program, summed over the profiled runs.
struct OpTimes {
  struct Entry {
    std::string node, kind;
    double ms = 0;
    int64_t calls = 0;
  };
  std::vector<Entry> ops; ///< by the op's index in the program
  int64_t runs = 0;       ///< runs added (the first run is not)
  /// Entries written as they are after the ops ("<micro-batch>", "<op
  /// overhead>": what memopt-compile --fit scales the times with).
  std::vector<std::pair<std::string, double>> values;
  void add(int index, const char *node, const char *kind, double ms);
};
/// The table printProfile writes.
void printOpTimes(const OpTimes &times, FILE *out, int top,
                  const char *backend);
/// The JSON writeProfileTimes writes.
void writeOpTimes(const OpTimes &times, FILE *out);
/// Writes the results of op `index` of the first run as DIR/NNNNN.npy and a
/// line of DIR/ops.txt (copyToHost reads them).
void dumpOpResults(Context &ctx, const char *directory, int index,
                   const char *node, const char *kind, const TensorRef *results,
                   int numResults);

} // namespace memopt::rt
#endif // MEMOPT_LIB_RUNTIME_INTERNAL_H
