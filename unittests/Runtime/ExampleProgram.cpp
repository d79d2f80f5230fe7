//===- ExampleProgram.cpp - a hand-written "generated program" ------------===//
//
// What the compiler's C++ emitter is expected to produce, written by hand: a
// tiny CNN classifier (Conv+ReLU -> MaxPool -> GlobalAveragePool -> Gemm ->
// Softmax) whose activations live at fixed offsets of one arena, with buffers
// reused once they are dead (the pool output overwrites the input image, the
// logits overwrite the conv output), and whose weights are one region.
// Linked against either backend; the executable tests run it end to end.
//
//===----------------------------------------------------------------------===//

#include "memopt/Runtime/Program.h"

#include <initializer_list>

using namespace memopt::rt;

namespace {

constexpr int64_t kBatch = 2;

// Arena layout (bytes).
constexpr int64_t kImageOffset = 0;     // [2,3,8,8] f32, 1536 B (input)
constexpr int64_t kConvOffset = 1536;   // [2,4,8,8] f32, 2048 B
constexpr int64_t kPoolOffset = 0;      // [2,4,4,4] f32, 512 B (reuses image)
constexpr int64_t kGapOffset = 512;     // [2,4,1,1] f32, 32 B
constexpr int64_t kLogitsOffset = 1536; // [2,5] f32, 40 B (reuses conv)
constexpr int64_t kWorkspaceOffset = 4096;
constexpr int64_t kWorkspaceBytes = int64_t(1) << 20;
constexpr int64_t kArenaBytes = kWorkspaceOffset + kWorkspaceBytes;

// Weight region layout (bytes).
constexpr int64_t kW1 = 0, kB1 = 448, kW2 = 512, kB2 = 640, kWeightBytes = 704;

const TensorInfo kInputs[] = {
    {"image", DType::F32, 4, {kBatch, 3, 8, 8}, kImageOffset, nullptr}};
const TensorInfo kOutputs[] = {
    {"probs", DType::F32, 2, {kBatch, 5}, -1, nullptr}};
const TensorInfo kWeights[] = {
    {"conv.weight", DType::F32, 4, {4, 3, 3, 3}, kW1, nullptr},
    {"conv.bias", DType::F32, 1, {4}, kB1, nullptr},
    {"fc.weight", DType::F32, 2, {4, 5}, kW2, nullptr},
    {"fc.bias", DType::F32, 1, {5}, kB2, nullptr},
};

TensorRef tensor(void *data, std::initializer_list<int64_t> shape) {
  TensorRef t;
  t.data = data;
  t.dtype = DType::F32;
  t.rank = int(shape.size());
  int i = 0;
  for (int64_t d : shape)
    t.shape[i++] = d;
  return t;
}

void run(Context &ctx, uint8_t *arena, const uint8_t *weights,
         void *const *inputs, void *const *outputs) {
  auto w = [&](int64_t offset) {
    return const_cast<uint8_t *>(weights) + offset;
  };
  TensorRef image = tensor(inputs[0], {kBatch, 3, 8, 8});
  TensorRef convOut = tensor(arena + kConvOffset, {kBatch, 4, 8, 8});
  TensorRef w1 = tensor(w(kW1), {4, 3, 3, 3});
  TensorRef b1 = tensor(w(kB1), {4});
  ConvParams convParams;
  for (int i = 0; i < 2; ++i)
    convParams.padsBegin[i] = convParams.padsEnd[i] = 1;
  convParams.activation = Activation::Relu;
  conv(ctx, "/conv/Conv", convParams, image, w1, &b1, convOut,
       arena + kWorkspaceOffset, size_t(kWorkspaceBytes));

  TensorRef pooled = tensor(arena + kPoolOffset, {kBatch, 4, 4, 4});
  PoolParams poolParams;
  poolParams.kind = PoolKind::Max;
  for (int i = 0; i < 2; ++i)
    poolParams.kernel[i] = poolParams.strides[i] = 2;
  pool(ctx, "/pool/MaxPool", poolParams, convOut, pooled);

  TensorRef gap = tensor(arena + kGapOffset, {kBatch, 4, 1, 1});
  globalAvgPool(ctx, "/gap/GlobalAveragePool", pooled, gap);

  TensorRef flat = tensor(arena + kGapOffset, {kBatch, 4}); // reshape: a view
  TensorRef logits = tensor(arena + kLogitsOffset, {kBatch, 5});
  TensorRef w2 = tensor(w(kW2), {4, 5});
  TensorRef b2 = tensor(w(kB2), {5});
  MatmulParams gemmParams;
  matmul(ctx, "/fc/Gemm", gemmParams, flat, w2, &b2, logits);

  softmax(ctx, "/softmax/Softmax", 1, false, logits,
          tensor(outputs[0], {kBatch, 5}));
}

const ProgramInfo kProgram = {kProgramAbiVersion,
                              "example_cnn",
                              kArenaBytes,
                              kWeightBytes,
                              1,
                              1,
                              4,
                              kInputs,
                              kOutputs,
                              kWeights,
                              run};

} // namespace

extern "C" const ProgramInfo *memopt_program(void) { return &kProgram; }
