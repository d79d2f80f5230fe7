//===- Main.cpp - the executable driver of a compiled model ---------------===//
//
//   OUT --input NAME=FILE.npy ... --output-dir DIR [--weights FILE]
//       [--random-weights SEED] [--bench N] [--fused-attention]
//       [--check-finite]
//
// Linked with a generated program (which defines memopt_program) and one
// backend library. Inputs are checked by name, dtype and shape against the
// program's table; outputs are written as DIR/<name>.npy (bf16 tensors are
// read and written as float32 .npy since NumPy has no bfloat16); they are
// written only once the run succeeded, all or none (writeNpyFiles).
//
//===----------------------------------------------------------------------===//

#include "Driver.h"
#include "Internal.h"
#include "memopt/Runtime/Npy.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

using namespace memopt::rt;

namespace {

int fail(const std::string &message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

void usage(const char *argv0) {
  std::fprintf(stderr,
               "usage: %s --input NAME=FILE.npy ... --output-dir DIR\n"
               "          [--weights FILE] [--random-weights SEED] "
               "[--bench N]\n"
               "          [--fused-attention]  (CUDA: never the chunked "
               "library path)\n"
               "          [--check-finite]  (refuse NaN/inf in inputs and "
               "outputs)\n",
               argv0);
}

std::string shapeText(const int64_t *shape, size_t rank) {
  std::string s = "[";
  for (size_t i = 0; i < rank; ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Output file name: the tensor name with path separators replaced.
std::string fileNameFor(const char *name) {
  std::string s = name;
  for (char &c : s)
    if (c == '/' || c == '\\' || c == ':' || c == ' ')
      c = '_';
  return s + ".npy";
}

/// With --check-finite: the error for a NaN or infinity in `array`, or "".
std::string nonFiniteError(const char *kind, const char *name,
                           const NpyArray &array) {
  int64_t index = firstNonFinite(array);
  if (index < 0)
    return "";
  return std::string(kind) + " '" + name + "' holds a NaN or infinity (" +
         "element " + std::to_string(index) + " of " +
         std::to_string(array.numElements()) + "; --check-finite)";
}

/// Converts a loaded array to the program's dtype (bf16 from f32 only).
bool toProgramLayout(const TensorInfo &info, const NpyArray &array,
                     std::vector<uint8_t> &bytes, std::string &error) {
  if (array.shape.size() != size_t(info.rank) ||
      !std::equal(array.shape.begin(), array.shape.end(), info.shape)) {
    error = std::string("input '") + info.name + "' has shape " +
            shapeText(array.shape.data(), array.shape.size()) +
            "; the program expects " + shapeText(info.shape, info.rank);
    return false;
  }
  if (info.dtype == DType::BF16 && array.dtype == DType::F32) {
    int64_t n = array.numElements();
    bytes.resize(size_t(n) * 2);
    for (int64_t i = 0; i < n; ++i)
      storeFromDouble(bytes.data(), DType::BF16, i,
                      loadAsDouble(array.data.data(), DType::F32, i));
    return true;
  }
  if (array.dtype != info.dtype) {
    error = std::string("input '") + info.name + "' has dtype " +
            dtypeName(array.dtype) + "; the program expects " +
            dtypeName(info.dtype) +
            (info.dtype == DType::BF16 ? " (pass float32)" : "");
    return false;
  }
  bytes = array.data;
  return true;
}

} // namespace

int main(int argc, char **argv) {
  const ProgramInfo *program = memopt_program();
  std::map<std::string, std::string> inputFiles;
  std::string outputDir, weightsPath;
  bool randomWeights = false;
  bool checkFinite = false;
  uint64_t seed = 0;
  int benchRuns = 0;
  ContextOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string &out) {
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    std::string v;
    if (arg == "--help" || arg == "-h") {
      usage(argv[0]);
      return 0;
    }
    if (arg == "--input" && value(v)) {
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0)
        return fail("--input expects NAME=FILE.npy, got '" + v + "'");
      inputFiles[v.substr(0, eq)] = v.substr(eq + 1);
    } else if (arg == "--output-dir" && value(v)) {
      outputDir = v;
    } else if (arg == "--weights" && value(v)) {
      weightsPath = v;
    } else if (arg == "--random-weights" && value(v)) {
      char *end = nullptr;
      seed = std::strtoull(v.c_str(), &end, 10);
      if (!end || *end)
        return fail("--random-weights expects an integer seed, got '" + v +
                    "'");
      randomWeights = true;
    } else if (arg == "--check-finite") {
      checkFinite = true;
    } else if (arg == "--fused-attention") {
      options.chunkedAttention = false;
    } else if (arg == "--bench" && value(v)) {
      benchRuns = std::atoi(v.c_str());
      if (benchRuns < 1)
        return fail("--bench expects a positive run count, got '" + v + "'");
    } else {
      usage(argv[0]);
      return fail("unknown or incomplete argument '" + arg + "'");
    }
  }

  // Inputs: every program input exactly once, nothing else.
  for (const auto &entry : inputFiles) {
    bool known = false;
    for (int i = 0; i < program->numInputs && !known; ++i)
      known = entry.first == program->inputs[i].name;
    if (!known) {
      std::string names;
      for (int i = 0; i < program->numInputs; ++i)
        names += std::string(i ? ", " : "") + program->inputs[i].name;
      return fail("unknown input '" + entry.first +
                  "' (the program has: " + names + ")");
    }
  }
  std::vector<std::vector<uint8_t>> inputData(size_t(program->numInputs));
  std::vector<const void *> inputPointers;
  for (int i = 0; i < program->numInputs; ++i) {
    const TensorInfo &info = program->inputs[i];
    auto it = inputFiles.find(info.name);
    if (it == inputFiles.end())
      return fail(std::string("missing input '") + info.name +
                  "' (pass --input " + info.name + "=FILE.npy)");
    NpyArray array;
    std::string error;
    if (!readNpy(it->second, array, error) ||
        !toProgramLayout(info, array, inputData[size_t(i)], error))
      return fail(error);
    if (checkFinite &&
        !(error = nonFiniteError("input", info.name, array)).empty())
      return fail(error);
    inputPointers.push_back(inputData[size_t(i)].data());
  }

  Model model;
  std::string error;
  if (!model.init(program, weightsPath, randomWeights, seed, error, options) ||
      !model.setInputs(inputPointers.data(), error) || !model.execute(error))
    return fail(error);

  if (benchRuns > 0) {
    Context &ctx = model.context();
    // Warm-up: the first graph capture and a few replays.
    for (int i = 0; i < 3; ++i)
      if (!model.execute(error))
        return fail(error);
    synchronize(ctx);
    std::vector<double> times;
    for (int i = 0; i < benchRuns; ++i) {
      // Inputs the planner put in the arena were overwritten by the last
      // run; copying them back is not part of the measured latency.
      if (!model.refreshInputs(error))
        return fail(error);
      timerStart(ctx);
      if (!model.execute(error))
        return fail(error);
      times.push_back(timerStopMs(ctx));
    }
    std::sort(times.begin(), times.end());
    MemoryInfo memory = memoryInfo(ctx);
    std::printf("bench: backend=%s runs=%d median_ms=%.4f min_ms=%.4f "
                "max_ms=%.4f\n",
                backendName(), benchRuns, times[times.size() / 2], times[0],
                times.back());
    std::printf("memory: arena_bytes=%lld weight_bytes=%lld io_bytes=%zu "
                "workspace_bytes=%zu device_peak_used_bytes=%zu "
                "device_total_bytes=%zu\n",
                (long long)program->arenaBytes, (long long)program->weightBytes,
                model.ioBytes(), memory.workspaceBytes, memory.peakUsedBytes,
                memory.totalBytes);
  }

  if (outputDir.empty()) {
    if (benchRuns == 0)
      return fail("no --output-dir given");
    return 0;
  }
  std::vector<std::vector<uint8_t>> outputData(size_t(program->numOutputs));
  std::vector<void *> outputPointers;
  for (int i = 0; i < program->numOutputs; ++i) {
    outputData[size_t(i)].resize(tensorBytes(program->outputs[i]));
    outputPointers.push_back(outputData[size_t(i)].data());
  }
  if (!model.getOutputs(outputPointers.data(), error))
    return fail(error);
  std::vector<std::pair<std::string, NpyArray>> files;
  for (int i = 0; i < program->numOutputs; ++i) {
    const TensorInfo &info = program->outputs[i];
    NpyArray array;
    array.dtype = info.dtype;
    array.shape.assign(info.shape, info.shape + info.rank);
    if (info.dtype == DType::BF16) {
      array.dtype = DType::F32;
      int64_t n = numElements(info);
      array.data.resize(size_t(n) * 4);
      for (int64_t j = 0; j < n; ++j)
        storeFromDouble(
            array.data.data(), DType::F32, j,
            loadAsDouble(outputData[size_t(i)].data(), DType::BF16, j));
    } else {
      array.data = std::move(outputData[size_t(i)]);
    }
    if (checkFinite &&
        !(error = nonFiniteError("output", info.name, array)).empty())
      return fail(error);
    files.emplace_back(outputDir + "/" + fileNameFor(info.name),
                       std::move(array));
  }
  if (!writeNpyFiles(files, error))
    return fail(error);
  return 0;
}
