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
constexpr int32_t kProgramAbiVersion = 1;

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
};

/// Element count of a TensorInfo.
int64_t numElements(const TensorInfo &info);

} // namespace memopt::rt

/// Defined by the generated program.
extern "C" const memopt::rt::ProgramInfo *memopt_program(void);

#endif // MEMOPT_RUNTIME_PROGRAM_H
