//===- Program.h - the generated program's interface -------------*- C++
//-*-===//
//
// What a generated memopt program exports so that the runtime's driver (the
// executable main in Main.cpp, or the C API in CApi.cpp) can run it. The
// compiler emits one C++ source file that defines `memopt_program()`; the same
// file links against either backend.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_PROGRAM_H
#define MEMOPT_RUNTIME_PROGRAM_H

#include "memopt/Runtime/Runtime.h"

namespace memopt::rt {

/// ABI version of ProgramInfo; bump on any layout change.
constexpr int32_t kProgramAbiVersion = 7;

/// What a weight-region tensor is. Inference programs hold constants only;
/// a training program's state (parameters, optimizer moments, the learning
/// rate and step counter the driver sets before each step) lives in the same
/// region and is updated in place by the program.
enum class WeightRole : int32_t {
  Constant = 0,
  Parameter = 1,
  OptimizerState = 2,
  LearningRate = 3, ///< F32 scalar, set by the driver before each step
  StepCount = 4,    ///< F32 scalar: the 1-based step number, set likewise
  Statistic = 5,    ///< running statistics (batch normalization), updated
                    ///< in place like parameters, not trained
  GradientAccumulator = 6, ///< --accumulate: a parameter's summed gradient
  MicroStep = 7,           ///< F32 scalar: the micro-batch's index within
                           ///< the optimizer step (0 .. K - 1), set by the
                           ///< driver before each micro-batch
  RandomKey = 8,           ///< I64 [seed, micro-batch number]: the dropout
                           ///< key, set by the driver before each run
  LossScale = 9,           ///< F32 scalar: the dynamic loss scale, updated
                           ///< on the device (f16 mixed-precision training)
  LossScaleState = 10,     ///< F32 [2]: steps since the scale last changed
                           ///< without overflow, and skipped steps
  Master = 11, ///< --offload optimizer: a parameter's f32 master, in the
               ///< host state region (ProgramInfo::hostWeights)
};

/// One input, output or weight of a program.
struct TensorInfo {
  const char *name;
  DType dtype;
  int32_t rank;
  int64_t shape[kMaxRank];
  /// Inputs/outputs: byte offset into the arena, or -1 when the driver gives
  /// the tensor its own buffer. Weights: byte offset into the weight region.
  int64_t offset;
  /// Weights only: bytes embedded in the program (small constants such as
  /// shape tensors), copied at start-up and never randomized; or nullptr.
  const void *initData;
  /// Weights only: what the tensor is (Constant when not given).
  WeightRole role;
};

/// The program body. `inputs[i]` / `outputs[i]` point to the device buffers of
/// ProgramInfo::inputs[i] / outputs[i] (inside the arena when their offset is
/// >= 0). The pointers are stable across calls (CUDA graph replay needs it).
using ProgramRunFn = void (*)(Context &ctx, uint8_t *arena,
                              const uint8_t *weights, void *const *inputs,
                              void *const *outputs);

struct ProgramInfo {
  int32_t abiVersion; ///< kProgramAbiVersion
  const char *name;
  int64_t arenaBytes;  ///< activations, conv workspaces included
  int64_t weightBytes; ///< the weight region (= the weight file's size)
  int32_t numInputs;
  int32_t numOutputs;
  int32_t numWeights;
  const TensorInfo *inputs;
  const TensorInfo *outputs;
  const TensorInfo *weights;
  ProgramRunFn run;
  /// Non-zero for a training step: `run` computes the loss (output 0) and
  /// updates the Parameter / OptimizerState weights in place.
  int32_t isTraining;
  /// Micro-batches per optimizer step (--accumulate K); 0 or 1: every run
  /// is a whole step.
  int32_t accumulationSteps;
  /// Data parallel (--data-parallel N): the ranks the program was compiled
  /// for (its collectives and shard shapes assume them); 0: a program for
  /// one process without collectives.
  int32_t dataParallelSize;
  /// How the optimizer state is sharded over the ranks: 0 none, 1
  /// optimizer (ZeRO-1), 2 gradients (ZeRO-2; the accumulators too), 3
  /// parameters (ZeRO-3: the parameters too; the weight file then holds one
  /// region per rank, rank r's at byte r * weightBytes).
  int32_t shardMode;
  /// For each weight: the index of the parameter (in `weights`) it holds
  /// this rank's shard of (sharded optimizer state and accumulators:
  /// the parameter's chunk dataParallelSize then its tail, see Runtime.h's
  /// reduceScatter), or -1; nullptr when nothing is sharded. A sharded
  /// parameter (shardMode 3) is a shard of itself: shardOf[w] == w.
  const int32_t *shardOf;
  /// Pinned host memory for offloaded activations (docs/offload.md): the
  /// driver reserves it at load (reserveHostPool); 0: none.
  int64_t hostPoolBytes;
  /// --offload optimizer (docs/offload.md): the bytes of the host state
  /// region (pinned host memory the driver allocates with hostStateAlloc and
  /// hands to the context with setHostState): the f32 masters, the
  /// optimizer state and the gradients' staging slots, at offsets fixed at
  /// compile time; 0 without offload.
  int64_t hostStateBytes;
  /// The tensors of the host state region (offsets into it; roles Master,
  /// OptimizerState, GradientAccumulator), and for each the index in
  /// `weights` of the parameter it is the master of (the driver copies the
  /// parameter's initial value into it), or -1; nullptr when none.
  int32_t numHostWeights;
  const TensorInfo *hostWeights;
  const int32_t *masterOf;
  /// For each weight, the tensor as saved (--save, --save-state): with
  /// shardMode 3 the whole tensor a shard belongs to (name, dtype and shape
  /// of the parameter; `offset` -1), for a low working parameter its F32
  /// master's (`offset` -1), the weight's own entry otherwise; nullptr when
  /// no weight is either.
  const TensorInfo *wholeWeights;
};

/// The whole parameter weight `w` of `program` is (a shard of, for
/// shardMode 3), or weight `w` itself.
inline const TensorInfo &wholeWeight(const ProgramInfo &program, int w) {
  return program.wholeWeights ? program.wholeWeights[w] : program.weights[w];
}

/// Weight regions in the weight file: one per rank for shardMode 3 (each
/// rank's parameter shards differ), one otherwise.
inline int64_t weightFileRegions(const ProgramInfo &program) {
  return program.shardMode == 3 && program.dataParallelSize > 1
             ? int64_t(program.dataParallelSize)
             : 1;
}

/// Element count of a TensorInfo.
int64_t numElements(const TensorInfo &info);

/// --offload optimizer's low working parameters (docs/offload.md): for host
/// weight `h`, the index in `weights` of the f16 / bf16 parameter it is the
/// f32 master of, else -1. Such a parameter is saved as its master
/// (`wholeWeights` gives it F32), and the weight file holds the masters
/// after the region, in host-weight order (WeightsFile.h).
int32_t lowParameterOf(const ProgramInfo &program, int h);
/// The bytes of those masters (0 without low working parameters).
int64_t lowMasterBytes(const ProgramInfo &program);
/// The weight file's size without its trailer: every rank's region, then
/// the low working parameters' masters.
inline int64_t weightFileBytes(const ProgramInfo &program) {
  return program.weightBytes * weightFileRegions(program) +
         lowMasterBytes(program);
}

} // namespace memopt::rt

/// Defined by the generated program.
extern "C" const memopt::rt::ProgramInfo *memopt_program(void);

#endif // MEMOPT_RUNTIME_PROGRAM_H
