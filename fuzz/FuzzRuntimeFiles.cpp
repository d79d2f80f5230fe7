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

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace memopt::rt;

namespace {

const TensorInfo kWeights[] = {
    {"conv.weight", DType::F32, 4, {4, 2, 3, 3}, 0, nullptr},
    {"conv.bias", DType::F16, 1, {4}, 320, nullptr},
    {"shape", DType::I64, 1, {2}, 384, nullptr},
};
const ProgramInfo kProgram = {
    kProgramAbiVersion, "fuzz", 0, 400, 0, 0, 3, nullptr, nullptr,
    kWeights,           nullptr};

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
