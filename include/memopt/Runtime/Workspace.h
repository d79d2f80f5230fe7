//===- Workspace.h - workspace sizes the compiler plans, the runtime reads ===//
//
// Every workspace-size formula in one header, included by the compiler (the
// ops' getWorkspaceBytes, which the planner reserves in the arena) and by the
// runtime (the kernels that carve the planned workspace up). A kernel that
// lays out its scratch differently from what was planned would read past it,
// so the two sides must not hold copies (issue 28, "workspace formulas in one
// header the compiler includes too"). XLA and IREE keep the sizes on the
// compiler side only (the runtime is handed a buffer and trusts it); here the
// runtime also checks a workspace it is given against the same formula.
//
// No dependencies: plain constexpr functions of element counts and element
// byte sizes (4 for f32, 2 for f16 / bf16), in int64_t.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_WORKSPACE_H
#define MEMOPT_RUNTIME_WORKSPACE_H

#include <cstdint>

namespace memopt::workspace {

/// Scratch buffers start on 256-byte boundaries (cuBLASLt's and the vector
/// loads' alignment).
constexpr int64_t roundUp256(int64_t bytes) {
  return (bytes + 255) / 256 * 256;
}

//===----------------------------------------------------------------------===//
// Library calls: cuBLASLt, cuDNN convolutions
//===----------------------------------------------------------------------===//

/// The library-call policy (cuBLASLt GEMMs, cuDNN convolutions): the largest
/// operand or result, at most 32 MiB (cuBLASLt's recommendation on Hopper).
/// A maximum the planner grows into; the reasons are with
/// mlir::memopt::detail::libraryWorkspaceBytes (MemOptInterfaces.h).
constexpr int64_t libraryBytes(int64_t largestTensorBytes) {
  constexpr int64_t kMax = int64_t(32) << 20;
  return largestTensorBytes < kMax ? largestTensorBytes : kMax;
}

/// A convolution (forward, transposed, filter gradient): the library policy,
/// and from 1 MiB on at least twice the bytes it moves (at most 1 GiB), what
/// cuDNN's fastest algorithms asked on ResNet-50's training convolutions
/// (mlir::memopt::detail::convWorkspaceBytes says more).
constexpr int64_t convBytes(int64_t largestTensorBytes, int64_t bytesMoved) {
  constexpr int64_t kFloor = int64_t(1) << 20, kMax = int64_t(1) << 30;
  int64_t bytes = libraryBytes(largestTensorBytes);
  if (bytes < kFloor)
    return bytes;
  int64_t wish = 2 * bytesMoved < kMax ? 2 * bytesMoved : kMax;
  return bytes > wish ? bytes : wish;
}

/// The bound the runtime's kernel suite gives a convolution's workspace:
/// the largest tensor, between 1 MiB and 64 MiB, rounded up to 256 bytes.
constexpr int64_t convSuiteBytes(int64_t largestTensorBytes) {
  constexpr int64_t kMin = int64_t(1) << 20, kMax = int64_t(64) << 20;
  int64_t bound = largestTensorBytes > kMin ? largestTensorBytes : kMin;
  return roundUp256(bound < kMax ? bound : kMax);
}

/// norm_relu_conv and its filter gradient: the room for the normalized input
/// R = relu(x * scale + bias) that the fallback writes before the plain
/// convolution (the rest of the workspace goes to that convolution).
constexpr int64_t normReluConvTempBytes(int64_t xBytes) {
  return roundUp256(xBytes);
}

//===----------------------------------------------------------------------===//
// Attention (docs/attention.md)
//===----------------------------------------------------------------------===//

/// The scores of `items` attention problems of `queries` x `keys` in f32,
/// then (for a narrower element type) the probabilities in the element type:
/// the chunked cuBLASLt path's workspace for a chunk of `items`.
constexpr int64_t attentionBytes(int64_t items, int64_t queries, int64_t keys,
                                 int64_t elementBytes) {
  int64_t scores = items * queries * keys;
  return roundUp256(scores * 4) +
         (elementBytes < 4 ? scores * elementBytes : 0);
}

/// The backward's two f32 score buffers (S, then dP), plus P and dS in the
/// element type when it is narrower, for a chunk of `items`.
constexpr int64_t attentionBackwardBytes(int64_t items, int64_t queries,
                                         int64_t keys, int64_t elementBytes) {
  int64_t scores = items * queries * keys;
  return 2 * roundUp256(scores * 4) +
         (elementBytes < 4 ? 2 * roundUp256(scores * elementBytes) : 0);
}

/// cuDNN's own SDPA workspace beyond the tensors below: what the forward
/// states (256 bytes with cuDNN 9.19) and the alignment of the backward's
/// parts, with room to spare. A plan that states more than the bound runs
/// memopt's kernels (the engine report says so).
constexpr int64_t kCudnnAttentionSlackBytes = int64_t(64) << 10;

/// cuDNN's dropout seed and offset (two I64) where the call draws its mask
/// with cuDNN's generator (AttentionParams::dropoutCudnnRng).
constexpr int64_t kCudnnAttentionDropoutBytes = 16;

/// Whether a program for the CUDA target plans cuDNN's fused SDPA workspace
/// for an attention (forward or backward): f16 / bf16 (`lowFloat`), head
/// sizes multiples of 8 up to 256, Q holding the whole batch, and with a
/// bias (`hasBias`) keys a multiple of 8 (cuDNN moves bias tiles with
/// 16-byte vectors). What the runtime checks beyond (how K and V broadcast,
/// alignment, the GPU, cuDNN's own support check) costs at most the
/// workspace where it refuses: memopt's kernels then run, and the chunked
/// path grows into that room.
constexpr bool cudnnAttentionPlanned(bool lowFloat, int64_t headSize,
                                     int64_t valueSize, bool queryHoldsBatch,
                                     bool hasBias, int64_t keys) {
  return lowFloat && headSize > 0 && valueSize > 0 && headSize % 8 == 0 &&
         valueSize % 8 == 0 && headSize <= 256 && valueSize <= 256 &&
         queryHoldsBatch && (!hasBias || keys % 8 == 0);
}

/// The bound of what cuDNN's fused SDPA backward states for itself
/// (cudnn-frontend 1.18's SDPA backward node, measured with cuDNN 9.19):
/// the f32 dQ accumulator and the f32 softmax sum of its `rows` query rows
/// (batch x heads x queries), and for grouped K / V heads the full-head dK
/// and dV in the element type before their sum over the group
/// (`fullHeadKeyRows`: batch x query heads x keys, 0 without groups). 12.2
/// MiB at GPT-2's 8 x 12 x 512 x 64, 64.5 MiB at 4 x 32 (8 K / V) x 1024 x
/// 64, as cuDNN stated them on an H200.
constexpr int64_t cudnnAttentionBackwardOwnBytes(int64_t rows, int64_t headSize,
                                                 int64_t valueSize,
                                                 int64_t fullHeadKeyRows,
                                                 int64_t elementBytes) {
  return rows * headSize * 4 + rows * 4 +
         fullHeadKeyRows * (headSize + valueSize) * elementBytes +
         kCudnnAttentionSlackBytes;
}

/// The workspace an attention forward on cuDNN's SDPA is planned (the
/// runtime's layout, lib/Runtime/Cuda/CudnnAttention.cpp): cuDNN's own
/// first, then the f32 log-sum-exp of every row when the op returns its
/// statistics (converted into memopt's pairs), then K transposed to
/// [Sk, D] when it is stored [D, Sk] (`transposedKeyBytes`, else 0), then
/// cuDNN's dropout seed and offset with `cudnnDropout`.
constexpr int64_t cudnnAttentionBytes(int64_t rows, bool statistics,
                                      int64_t transposedKeyBytes,
                                      bool cudnnDropout = false) {
  return roundUp256(kCudnnAttentionSlackBytes) +
         (statistics ? roundUp256(rows * 4) : 0) +
         roundUp256(transposedKeyBytes) +
         (cudnnDropout ? roundUp256(kCudnnAttentionDropoutBytes) : 0);
}

/// The same for the backward: cuDNN's own (cudnnAttentionBackwardOwnBytes),
/// the f32 log-sum-exp of every row (from memopt's pairs), then for K
/// stored [D, Sk] K transposed and dK before its transpose back, then
/// cuDNN's dropout seed and offset with `cudnnDropout`.
constexpr int64_t cudnnAttentionBackwardBytes(int64_t rows, int64_t headSize,
                                              int64_t valueSize,
                                              int64_t fullHeadKeyRows,
                                              int64_t elementBytes,
                                              int64_t transposedKeyBytes,
                                              bool cudnnDropout = false) {
  return roundUp256(cudnnAttentionBackwardOwnBytes(
             rows, headSize, valueSize, fullHeadKeyRows, elementBytes)) +
         roundUp256(rows * 4) + 2 * roundUp256(transposedKeyBytes) +
         (cudnnDropout ? roundUp256(kCudnnAttentionDropoutBytes) : 0);
}

//===----------------------------------------------------------------------===//
// Fused linear cross-entropy (docs/training.md)
//===----------------------------------------------------------------------===//

/// Three f32 statistics a row, then the logits of a chunk of `chunkClasses`
/// classes in the element type.
constexpr int64_t linearCrossEntropyBytes(int64_t rows, int64_t chunkClasses,
                                          int64_t elementBytes) {
  return roundUp256(rows * 3 * 4) +
         roundUp256(rows * chunkClasses * elementBytes);
}

//===----------------------------------------------------------------------===//
// Training-mode normalization
//===----------------------------------------------------------------------===//

/// Partial sums per channel (or column) that the CUDA kernels may split a
/// long reduction into; the compiler plans this many, the runtime takes as
/// many as fit.
constexpr int64_t kNormalizationSplits = 32;

/// One split's partial sums: two f32 per channel (or column).
constexpr int64_t normalizationSplitBytes(int64_t columns) {
  return columns * 2 * 4;
}

/// Batch normalization in training mode and its gradient: the partial sums
/// of every split.
constexpr int64_t batchNormTrainingBytes(int64_t channels) {
  return kNormalizationSplits * normalizationSplitBytes(channels);
}

/// Channels-last batch normalization on CUDA reduces tiles of at most 256
/// channels over splits of the rows: the compiler plans partial sums for
/// about this many blocks (eight per multiprocessor of a 160-SM GPU; the
/// runtime takes one wave of resident blocks, fewer), with at least 32 rows
/// per split (4 per row of threads: ResNet-50's 14 x 14 and 7 x 7 stages
/// then still fill the GPU) and at most 1024 splits, never fewer than the
/// channels-first kNormalizationSplits.
constexpr int64_t kChannelsLastNormalizationBlocks = 1280;

constexpr int64_t batchNormTrainingLastSplits(int64_t channels, int64_t rows) {
  int64_t tiles = (channels + 255) / 256;
  int64_t want = (kChannelsLastNormalizationBlocks + tiles - 1) / tiles;
  int64_t splits = want < rows / 32 ? want : rows / 32;
  splits = splits < 1024 ? splits : 1024;
  return splits > kNormalizationSplits ? splits : kNormalizationSplits;
}

/// The same with `channels_last`: x is `rows` rows of `channels`.
constexpr int64_t batchNormTrainingLastBytes(int64_t channels, int64_t rows) {
  return batchNormTrainingLastSplits(channels, rows) *
         normalizationSplitBytes(channels);
}

/// Layer normalization's gradient: the row statistics (mean, 1/std) first.
constexpr int64_t layerNormGradStatisticsBytes(int64_t rows) {
  return roundUp256(rows * 2 * 4);
}

/// The row statistics, then `splits` splits of column partial sums (the
/// runtime needs at least one).
constexpr int64_t layerNormGradBytes(int64_t rows, int64_t columns,
                                     int64_t splits = kNormalizationSplits) {
  return layerNormGradStatisticsBytes(rows) +
         splits * normalizationSplitBytes(columns);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Blocks at most that one output's reduction is split over.
constexpr int64_t kReductionMaxSplits = 64;

/// Partial results when few outputs each reduce many elements (a bias
/// gradient: [tokens, features] -> [features]): the CUDA kernel then splits
/// each output's reduction over up to kReductionMaxSplits blocks of at least
/// 256 elements, so that the whole GPU works on it. Fewer than 32 outputs (a
/// loss mean) run one block per output without one.
constexpr int64_t reductionBytes(int64_t outputs, int64_t inputElements) {
  if (outputs == 0)
    return 0;
  int64_t reduced = inputElements / outputs;
  if (reduced < 4096 || outputs < 32 || outputs > 65536)
    return 0;
  int64_t splits =
      reduced / 256 < kReductionMaxSplits ? reduced / 256 : kReductionMaxSplits;
  return outputs * splits * 4;
}

} // namespace memopt::workspace

#endif // MEMOPT_RUNTIME_WORKSPACE_H
