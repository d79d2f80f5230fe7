//===- FuzzRuntimeFiles.cpp - fuzz target: .npy and weight file readers ---===//
//
// Input: the first byte picks the reader, the rest is the file. 0: parseNpy
// (the executable's --input files), then the checks Main.cpp applies
// (shape/dtype against a program input, --check-finite). 1: checkWeightsFile
// (--weights) against a small program with three weights, the trailer's
// fingerprint included. Both must refuse bad bytes with a message.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"
#include "memopt/Runtime/Npy.h"
#include "memopt/Runtime/WeightsFile.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

using namespace memopt::rt;

namespace {

TensorInfo weight(const char *name, DType dtype,
                  std::initializer_list<int64_t> shape, int64_t offset) {
  TensorInfo info{};
  info.name = name;
  info.dtype = dtype;
  info.rank = int32_t(shape.size());
  std::copy(shape.begin(), shape.end(), info.shape);
  info.offset = offset;
  return info;
}

const TensorInfo kWeights[] = {
    weight("conv.weight", DType::F32, {4, 2, 3, 3}, 0),
    weight("conv.bias", DType::F16, {4}, 320),
    weight("shape", DType::I64, {2}, 384),
};

/// Value-initialized first, so fields added to ProgramInfo later start at 0.
ProgramInfo makeProgram() {
  ProgramInfo program{};
  program.abiVersion = kProgramAbiVersion;
  program.name = "fuzz";
  program.weightBytes = 400;
  program.numWeights = 3;
  program.weights = kWeights;
  return program;
}
const ProgramInfo kProgram = makeProgram();

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  std::vector<uint8_t> bytes(data + 1, data + size);
  std::string error;
  if (data[0] % 2 == 0) {
    NpyArray array;
    if (!parseNpy(bytes, array, error))
      return 0;
    size_t expected = size_t(array.numElements()) * dtypeSize(array.dtype);
    if (array.data.size() != expected)
      std::abort(); // parseNpy promised a complete array
    (void)firstNonFinite(array);
    (void)serializeNpy(array);
    return 0;
  }
  if (checkWeightsFile(kProgram, "fuzz.weights", bytes, error) &&
      int64_t(bytes.size()) != kProgram.weightBytes)
    std::abort(); // an accepted file must leave exactly the region
  return 0;
}
