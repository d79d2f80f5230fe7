//===- TrainingProgram.cpp - a hand-written training step -----------------===//
//
// What the compiler is expected to emit for `memopt-compile --train`, written
// by hand for the driver tests: a linear classifier logits = x W trained with
// softmax cross-entropy and SGD with momentum. One run is one step: forward,
// loss (output 0), backward (dlogits, then dW = x^T dlogits in the arena)
// and the update of W and its momentum buffer in the weight region. The
// learning rate and step number are weights the driver writes before each
// step; the loss gradient seed is an embedded constant.
//
//===----------------------------------------------------------------------===//

#include "memopt/Runtime/Program.h"

#include <initializer_list>

using namespace memopt::rt;

namespace {

constexpr int64_t kBatch = 4, kFeatures = 3, kClasses = 3;

// Arena layout (bytes).
constexpr int64_t kInputOffset = 0;     // [4, 3] f32 (input)
constexpr int64_t kLogitsOffset = 64;   // [4, 3] f32
constexpr int64_t kDLogitsOffset = 128; // [4, 3] f32
constexpr int64_t kDWeightOffset = 192; // [3, 3] f32
constexpr int64_t kArenaBytes = 256;

// Weight region layout (bytes).
constexpr int64_t kW = 0, kMomentum = 64, kLr = 128, kStep = 132, kSeed = 136,
                  kWeightBytes = 144;

const float kCompiledLr = 0.5f, kLossSeed = 1.0f;

const TensorInfo kInputs[] = {
    {"input",
     DType::F32,
     2,
     {kBatch, kFeatures},
     kInputOffset,
     nullptr,
     WeightRole::Constant},
    {"labels", DType::I64, 1, {kBatch}, -1, nullptr, WeightRole::Constant}};
const TensorInfo kOutputs[] = {
    {"loss", DType::F32, 0, {}, -1, nullptr, WeightRole::Constant}};
const TensorInfo kWeights[] = {
    {"fc.weight",
     DType::F32,
     2,
     {kFeatures, kClasses},
     kW,
     nullptr,
     WeightRole::Parameter},
    {"fc.weight.momentum",
     DType::F32,
     2,
     {kFeatures, kClasses},
     kMomentum,
     nullptr,
     WeightRole::OptimizerState},
    {"lr", DType::F32, 0, {}, kLr, &kCompiledLr, WeightRole::LearningRate},
    {"step", DType::F32, 0, {}, kStep, nullptr, WeightRole::StepCount},
    {"loss.grad_seed",
     DType::F32,
     0,
     {},
     kSeed,
     &kLossSeed,
     WeightRole::Constant},
};

TensorRef tensor(void *data, DType dtype,
                 std::initializer_list<int64_t> shape) {
  TensorRef t;
  t.data = data;
  t.dtype = dtype;
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
  TensorRef x = tensor(inputs[0], DType::F32, {kBatch, kFeatures});
  TensorRef labels = tensor(inputs[1], DType::I64, {kBatch});
  TensorRef weight = tensor(w(kW), DType::F32, {kFeatures, kClasses});
  TensorRef logits =
      tensor(arena + kLogitsOffset, DType::F32, {kBatch, kClasses});
  matmul(ctx, "/fc/MatMul", MatmulParams(), x, weight, nullptr, logits);
  TensorRef loss = tensor(outputs[0], DType::F32, {});
  softmaxCrossEntropy(ctx, "/loss/SoftmaxCrossEntropy", -100, logits, labels,
                      loss);

  TensorRef dlogits =
      tensor(arena + kDLogitsOffset, DType::F32, {kBatch, kClasses});
  softmaxCrossEntropyGrad(ctx, "/loss/SoftmaxCrossEntropy_grad", -100, logits,
                          labels, tensor(w(kSeed), DType::F32, {}), dlogits);
  TensorRef dweight =
      tensor(arena + kDWeightOffset, DType::F32, {kFeatures, kClasses});
  MatmulParams transposeX;
  transposeX.transA = true;
  matmul(ctx, "/fc/MatMul_grad_weight", transposeX, x, dlogits, nullptr,
         dweight);
  TensorRef momentum = tensor(w(kMomentum), DType::F32, {kFeatures, kClasses});
  sgdUpdate(ctx, "/optimizer/fc.weight", 0.9f, 0.0f, weight, dweight, &momentum,
            tensor(w(kLr), DType::F32, {}));
}

const ProgramInfo kProgram = {kProgramAbiVersion,
                              "example_linear_train",
                              kArenaBytes,
                              kWeightBytes,
                              2,
                              1,
                              5,
                              kInputs,
                              kOutputs,
                              kWeights,
                              run,
                              /*isTraining=*/1};

} // namespace

extern "C" const ProgramInfo *memopt_program(void) { return &kProgram; }
