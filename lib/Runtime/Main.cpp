//===- Main.cpp - the executable driver of a compiled model ---------------===//
//
//   OUT --input NAME=FILE.npy ... --output-dir DIR [--weights FILE]
//       [--random-weights SEED] [--bench N] [--fused-attention]
//   OUT --input input=X.npy --input labels=Y.npy --steps N [--batch-size B]
//       [--lr LR] [--log loss.csv] [--bench N] [--save-weights FILE] ...
//       [--ranks N]
//
// Linked with a generated program (which defines memopt_program) and one
// backend library. Inputs are checked by name, dtype and shape against the
// program's table; outputs are written as DIR/<name>.npy (bf16 tensors are
// read and written as float32 .npy since NumPy has no bfloat16); they are
// written only once the run succeeded, all or none (writeNpyFiles). Weights
// come from --weights, --random-weights (filled on the device), or
// OUT.weights next to the executable; files are streamed to the device in
// chunks (WeightIO.cpp) and --verbose reports the load time. A training program
// (ProgramInfo::isTraining) runs --steps optimizer steps over batches of its
// compiled batch size taken from the samples of the input files in order,
// wrapping around (K micro-batches per step when compiled with --accumulate K),
// and prints every step's loss. A program compiled with --data-parallel N runs
// N ranks, each step taking N batches, rank r the r-th: as N threads on the
// host backend; on the CUDA backend as N processes over NCCL, one per GPU,
// launched torchrun-style (RANK, WORLD_SIZE, LOCAL_RANK; the ranks meet over
// TCP at MASTER_ADDR or through MEMOPT_NCCL_ID_FILE; RankGroup), rank 0
// printing and writing the files. Checkpoints of a sharded run: --save
// gathers the whole model (every rank takes part, rank 0 writes one ONNX
// file); --save-weights writes each rank's own region (PATH.rankR-of-N, as
// DeepSpeed keeps one optimizer-state file per rank) and --weights PATH
// resumes from them.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"
#include "Internal.h"
#include "memopt/Runtime/Npy.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
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
               "training programs: %s --input NAME=FILE.npy ... --steps N\n"
               "          [--batch-size B] [--lr LR] [--seed S] "
               "[--log FILE.csv] [--bench N]\n"
               "          [--save TRAINED.onnx [--template FILE] "
               "[--save-external-data]]\n"
               "          [--save-weights FILE] [--save-state DIR]  (sharded "
               "programs: FILE.rankR-of-N\n"
               "          per rank, read back by --weights FILE)\n"
               "          [--output-dir DIR] [--ranks N]  (data-parallel "
               "programs: host: N ranks as threads;\n"
               "          CUDA: one process per rank, RANK / WORLD_SIZE / "
               "LOCAL_RANK, MASTER_ADDR /\n"
               "          MASTER_PORT or MEMOPT_NCCL_ID_FILE)\n"
               "any program: [--check-finite]  (refuse NaN/inf in inputs "
               "and outputs)\n"
               "          [--verbose]  (the weights' load time; also "
               "MEMOPT_VERBOSE=1)\n"
               "          [--profile]  (time every op; CUDA runs eagerly)\n"
               "          [--profile-times FILE.json]  (--profile, and each "
               "node's forward time\n"
               "          as memopt-compile --remat-kernel-times reads it)\n"
               "          [--dump-ops DIR]  (every op's results of the first "
               "run as DIR/NNNNN_K.npy, DIR/ops.txt)\n",
               argv0, argv0);
}

/// --profile-times: the JSON written to PATH.tmp, then renamed, so a failed
/// run leaves no half-written file. The micro-batch it states is dimension 0
/// of the program's first input (memopt-compile --fit's batch dimension).
bool saveProfileTimes(Context &ctx, const ProgramInfo *program,
                      const std::string &path, std::string &error) {
  std::string temporary = path + ".tmp";
  FILE *file = std::fopen(temporary.c_str(), "w");
  if (!file) {
    error = "--profile-times: cannot write '" + path + "'";
    return false;
  }
  int64_t microBatch = program->numInputs > 0 && program->inputs[0].rank > 0
                           ? program->inputs[0].shape[0]
                           : 0;
  writeProfileTimes(ctx, file, microBatch);
  bool written = std::fflush(file) == 0 && !std::ferror(file);
  written = std::fclose(file) == 0 && written;
  if (!written || std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    error = "--profile-times: cannot write '" + path + "'";
    return false;
  }
  return true;
}

/// This executable's path (for the default OUT.weights next to it).
std::string executablePath(const char *argv0) {
  char buffer[4096];
  ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0)
    return argv0;
  buffer[n] = '\0';
  return buffer;
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

/// Converts a loaded array to the program's dtype (bf16 from f32 only).
/// With `anySamples` (training), axis 0 may hold any number of samples.
bool toProgramLayout(const TensorInfo &info, const NpyArray &array,
                     std::vector<uint8_t> &bytes, std::string &error,
                     bool anySamples = false) {
  bool rankOk = array.shape.size() == size_t(info.rank);
  bool shapeOk = rankOk && (anySamples && info.rank > 0
                                ? std::equal(array.shape.begin() + 1,
                                             array.shape.end(), info.shape + 1)
                                : std::equal(array.shape.begin(),
                                             array.shape.end(), info.shape));
  if (!shapeOk) {
    std::string expected = shapeText(info.shape, info.rank);
    if (anySamples && info.rank > 0)
      expected = "[N" +
                 (info.rank > 1 ? ", " + expected.substr(expected.find(',') + 2)
                                : std::string("]")) +
                 " (N samples)";
    error = std::string("input '") + info.name + "' has shape " +
            shapeText(array.shape.data(), array.shape.size()) +
            "; the program expects " + expected;
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

/// Writes every output of the last run as DIR/<name>.npy.
int writeOutputs(Model &model, const std::string &outputDir, bool checkFinite) {
  const ProgramInfo *program = &model.program();
  std::string error;
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

void printMemory(Model &model) {
  const ProgramInfo &program = model.program();
  MemoryInfo memory = memoryInfo(model.context());
  std::printf("memory: arena_bytes=%lld weight_bytes=%lld io_bytes=%zu "
              "workspace_bytes=%zu device_peak_used_bytes=%zu "
              "device_total_bytes=%zu\n",
              (long long)program.arenaBytes, (long long)program.weightBytes,
              model.ioBytes(), memory.workspaceBytes, memory.peakUsedBytes,
              memory.totalBytes);
}

void printBench(int runs, std::vector<double> times) {
  std::sort(times.begin(), times.end());
  std::printf("bench: backend=%s runs=%d median_ms=%.4f min_ms=%.4f "
              "max_ms=%.4f\n",
              backendName(), runs, times[times.size() / 2], times[0],
              times.back());
}

struct TrainOptions {
  int64_t steps = -1;     ///< -1: not given
  int64_t batchSize = -1; ///< -1: the compiled one
  bool lrGiven = false;
  float lr = 0;
  std::string logPath, savePath, outputDir;
  /// --save-state: every parameter and optimizer-state tensor as DIR/NAME.npy.
  std::string stateDir;
  /// --save: the trained ONNX model, completed from the template;
  /// --save-external-data: its initializers in OUT.onnx.data whatever the
  /// size (else only a model that would pass 1.5 GiB has them there).
  std::string onnxPath, templatePath;
  ExternalData externalData = ExternalData::Auto;
  bool checkFinite = false;
  int benchRuns = 0;
  /// --seed: the dropout masks' key (with the micro-batch number).
  uint64_t seed = 0;
};

/// Files written under temporary names and renamed together by commit();
/// the ones not committed are removed when this goes away.
class PendingFiles {
public:
  PendingFiles() = default;
  PendingFiles(const PendingFiles &) = delete;
  PendingFiles &operator=(const PendingFiles &) = delete;
  ~PendingFiles() {
    for (const auto &file : files_)
      std::remove(file.first.c_str());
  }
  void add(const std::string &temporary, const std::string &path) {
    files_.emplace_back(temporary, path);
  }
  bool commit(std::string &error) {
    for (const auto &[temporary, path] : files_)
      if (std::rename(temporary.c_str(), path.c_str()) != 0) {
        error = "cannot rename '" + temporary + "' to '" + path + "'";
        return false;
      }
    files_.clear();
    return true;
  }

private:
  std::vector<std::pair<std::string, std::string>> files_;
};

/// --save-state DIR: every parameter and optimizer-state tensor as
/// DIR/NAME.npy (a sharded tensor gathered whole in its parameter's shape),
/// read and written one at a time as NAME.npy.partial, renamed by the
/// caller (`pending`). Every process takes part in the gathers (all-gathers
/// in weight order when ranks are processes); rank 0 writes. A writer that
/// fails keeps gathering, so that no process waits for it.
bool saveState(RankGroup &group, const std::string &dir, PendingFiles &pending,
               std::string &error) {
  const ProgramInfo &program = group.program();
  bool writer = group.firstRank() == 0;
  std::string failure;
  if (writer && mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    failure = "cannot create --save-state folder '" + dir +
              "': " + std::strerror(errno);
  for (int w = 0; w < program.numWeights; ++w) {
    const TensorInfo &info = program.weights[w];
    if (info.role != WeightRole::Parameter &&
        info.role != WeightRole::OptimizerState &&
        info.role != WeightRole::GradientAccumulator &&
        info.role != WeightRole::Statistic &&
        info.role != WeightRole::LossScale &&
        info.role != WeightRole::LossScaleState)
      continue;
    bool sharded = program.shardOf && program.shardOf[w] >= 0;
    if (!writer && !sharded)
      continue; // nothing to gather
    NpyArray array;
    if (!group.readTensor(w, array.data, error))
      return false; // a device error: the collectives fail everywhere
    if (!writer || !failure.empty())
      continue;
    const TensorInfo &shape = group.savedShape(w);
    array.dtype = shape.dtype; // a low working parameter's master: F32
    array.shape.assign(shape.shape, shape.shape + shape.rank);
    std::string path = dir + "/" + fileNameFor(info.name);
    pending.add(path + ".partial", path);
    writeNpy(path + ".partial", array, failure);
  }
  // --offload optimizer: the state in the host region (the masters equal
  // the parameters written above). Not with data parallelism: one rank.
  for (int h = 0; writer && failure.empty() && h < program.numHostWeights;
       ++h) {
    const TensorInfo &info = program.hostWeights[h];
    if (info.role == WeightRole::Master)
      continue;
    NpyArray array;
    array.data.resize(tensorBytes(info));
    if (!group.rank(0).readHostTensor(h, array.data.data(), error))
      return false;
    array.dtype = info.dtype;
    array.shape.assign(info.shape, info.shape + info.rank);
    std::string path = dir + "/" + fileNameFor(info.name);
    pending.add(path + ".partial", path);
    writeNpy(path + ".partial", array, failure);
  }
  if (!failure.empty()) {
    error = failure;
    return false;
  }
  return true;
}

/// --save: the tensors the trained model holds (parameters and BatchNorm
/// statistics, as writeTrainedOnnx reads them), each read through the rank
/// group: a sharded one is gathered whole, every process taking part in the
/// same order (the ranks of a fully sharded program hold 1/N of each
/// parameter); rank 0 keeps the bytes, the other processes drop them.
/// Generic over the shard mode: what is sharded is the program's table
/// (ProgramInfo::shardOf), not a rule of this loop.
bool gatherModelTensors(RankGroup &group,
                        std::map<int, std::vector<uint8_t>> &tensors,
                        std::string &error) {
  const ProgramInfo &program = group.program();
  bool writer = group.firstRank() == 0;
  for (int w = 0; w < program.numWeights; ++w) {
    const TensorInfo &info = program.weights[w];
    if (info.role != WeightRole::Parameter &&
        info.role != WeightRole::Statistic)
      continue;
    bool sharded = program.shardOf && program.shardOf[w] >= 0;
    if (!writer && !sharded)
      continue;
    std::vector<uint8_t> bytes;
    if (!group.readTensor(w, bytes, error))
      return false;
    if (writer)
      tensors[w].swap(bytes);
  }
  return true;
}

/// The training loop: batches of the compiled batch size from the samples
/// of every input (in order, wrapping around), one program run per step.
/// A non-finite loss stops it before anything is written.
int train(RankGroup &group, const std::vector<NpyArray> &arrays,
          const TrainOptions &options) {
  Model &model = group.rank(0);
  const ProgramInfo &program = model.program();
  int64_t ranks = group.worldSize();
  std::string error;
  if (options.steps < 0 && options.benchRuns == 0)
    return fail("a training program needs --steps N");
  // Each input holds samples along axis 0; every input must hold as many.
  int64_t batch = -1, samples = -1;
  std::vector<std::vector<uint8_t>> data(size_t(program.numInputs));
  std::vector<size_t> sampleBytes;
  for (int i = 0; i < program.numInputs; ++i) {
    const TensorInfo &info = program.inputs[i];
    if (info.rank < 1)
      return fail(std::string("training input '") + info.name +
                  "' has no sample axis");
    if (batch < 0)
      batch = info.shape[0];
    else if (info.shape[0] != batch)
      return fail("the program's inputs disagree on the batch size");
    if (!toProgramLayout(info, arrays[size_t(i)], data[size_t(i)], error,
                         /*anySamples=*/true))
      return fail(error);
    int64_t count = arrays[size_t(i)].shape[0];
    if (samples >= 0 && count != samples)
      return fail(std::string("inputs hold different sample counts: '") +
                  program.inputs[0].name + "' " + std::to_string(samples) +
                  ", '" + info.name + "' " + std::to_string(count));
    samples = count;
    sampleBytes.push_back(batch ? tensorBytes(info) / size_t(batch) : 0);
  }
  if (options.batchSize >= 0 && ranks > 1 && options.batchSize % ranks != 0)
    return fail("--batch-size " + std::to_string(options.batchSize) +
                " does not split over " + std::to_string(ranks) +
                " data-parallel ranks (the global batch is the ranks times "
                "the compiled micro-batch " +
                std::to_string(batch) + ")");
  if (options.batchSize >= 0 && options.batchSize != batch * ranks)
    return fail("--batch-size " + std::to_string(options.batchSize) +
                " does not match the compiled batch size " +
                (ranks > 1 ? std::to_string(ranks) + " ranks x " +
                                 std::to_string(batch) + " = " +
                                 std::to_string(ranks * batch)
                           : std::to_string(batch)) +
                " (recompile to change it)");
  // Each step takes one batch per rank: the global batch.
  batch *= ranks;
  if (samples < 1)
    return fail("the inputs hold no samples");
  float lr = options.lrGiven ? options.lr : model.compiledLearningRate();

  std::vector<std::vector<uint8_t>> batchData(size_t(program.numInputs));
  std::vector<const void *> pointers;
  for (int i = 0; i < program.numInputs; ++i) {
    batchData[size_t(i)].resize(size_t(ranks) * tensorBytes(program.inputs[i]));
    pointers.push_back(batchData[size_t(i)].data());
  }
  // The samples page-locked (up to 16 GiB in all), so each batch uploads at
  // the bus's speed, and a batch that lies in one piece of them is read in
  // place (PyTorch's DataLoader with pin_memory does the same): ResNet-50's
  // 256 images (154 MB in f32) were copied into the batch buffer and then
  // staged from pageable memory, 40 of a 96 ms step.
  struct Pinned {
    Context &ctx;
    std::vector<void *> pointers;
    ~Pinned() {
      for (void *ptr : pointers)
        unpinHostMemory(ctx, ptr);
    }
  } pinned{model.context(), {}};
  size_t pinnedBytes = 0;
  for (auto *buffers : {&data, &batchData})
    for (std::vector<uint8_t> &buffer : *buffers)
      if (pinnedBytes + buffer.size() <= (size_t(16) << 30) &&
          pinHostMemory(model.context(), buffer.data(), buffer.size())) {
        pinned.pointers.push_back(buffer.data());
        pinnedBytes += buffer.size();
      }
  if (program.dataParallelSize >= 1)
    std::printf("%s\n", group.describeRanks().c_str());
  int64_t next = 0; // the first sample of the next batch
  std::vector<std::pair<int64_t, float>> losses;
  // Dynamic loss scaling: the scale and the skipped-step count after each
  // step (read with the loss), for the log.
  std::vector<std::pair<float, float>> scales;
  bool scaled = model.hasLossScale();
  float skippedBefore = scaled ? model.skippedSteps() : 0;
  // One optimizer step: K micro-batches with gradient accumulation (the
  // update runs on the last), one batch otherwise. Its loss is the mean of
  // the micro-batches' losses (the loss of the whole K * B samples for a
  // mean loss over equal micro-batches).
  int64_t microBatches = model.accumulationSteps();
  auto step = [&](int64_t number) -> bool {
    double sum = 0;
    for (int64_t micro = 0; micro < microBatches; ++micro) {
      for (int i = 0; i < program.numInputs; ++i) {
        if (next + batch <= samples) { // in one piece: read in place
          pointers[size_t(i)] =
              data[size_t(i)].data() + size_t(next) * sampleBytes[i];
          continue;
        }
        pointers[size_t(i)] = batchData[size_t(i)].data();
        for (int64_t b = 0; b < batch; ++b)
          std::memcpy(batchData[size_t(i)].data() + size_t(b) * sampleBytes[i],
                      data[size_t(i)].data() +
                          size_t((next + b) % samples) * sampleBytes[i],
                      sampleBytes[i]);
      }
      next = (next + batch) % samples;
      float loss = 0;
      if (!group.trainStep(pointers.data(), lr, loss, error)) {
        fail(error);
        return false;
      }
      if (!std::isfinite(loss)) {
        std::string where = " at step " + std::to_string(number);
        if (microBatches > 1)
          where += " (micro-batch " + std::to_string(micro + 1) + " of " +
                   std::to_string(microBatches) + ")";
        // Loss scaling protects the gradients, not the forward.
        if (scaled)
          where += " (the f16 forward overflowed; loss scaling only "
                   "protects the backward: try --precision bf16)";
        fail(std::string("loss is ") + (std::isnan(loss) ? "NaN" : "inf") +
             where);
        return false;
      }
      sum += double(loss);
    }
    float loss = float(sum / double(microBatches));
    if (!scaled) {
      std::printf("step %lld loss %.6f\n", (long long)number, double(loss));
    } else {
      float skipped = model.skippedSteps();
      std::printf("step %lld loss %.6f loss_scale %.9g%s\n", (long long)number,
                  double(loss), double(model.lossScale()),
                  skipped > skippedBefore
                      ? " (inf/NaN gradients: update skipped, scale backed "
                        "off)"
                      : "");
      skippedBefore = skipped;
      scales.emplace_back(model.lossScale(), skipped);
      // DeepSpeed's min_loss_scale: gradients that overflow at every scale
      // down to 1 are not an underflow problem; the run would skip forever.
      if (model.lossScale() < 1.0f) {
        std::fflush(stdout);
        fail("the loss scale fell below 1 at step " + std::to_string(number) +
             ": the f16 gradients hold inf or NaN at every scale (" +
             std::to_string((long long)skipped) +
             " steps skipped); the forward or the model overflows f16 (try "
             "--precision bf16)");
        return false;
      }
    }
    losses.emplace_back(number, loss);
    return true;
  };
  int64_t number = 0;
  for (int64_t k = 0; k < options.steps; ++k)
    if (!step(++number))
      return 1;
  if (options.benchRuns > 0) {
    // Warm-up (graph capture and replays), then timed steps; each is a real
    // step (the weights keep training) including its batch upload.
    for (int k = 0; k < 3; ++k)
      if (!step(++number))
        return 1;
    std::vector<double> times;
    for (int k = 0; k < options.benchRuns; ++k) {
      timerStart(model.context());
      if (!step(++number))
        return 1;
      times.push_back(timerStopMs(model.context()));
    }
    printBench(options.benchRuns, times);
    printMemory(model);
  }
  if (scaled && !losses.empty())
    std::printf("loss scale %.9g after %lld steps, %lld skipped (inf/NaN "
                "gradients)\n",
                double(model.lossScale()), (long long)losses.size(),
                (long long)model.skippedSteps());
  std::fflush(stdout);
  // The ranks' parameters must agree after every step.
  if (!group.checkReplicas(error))
    return fail(error);
  PendingFiles state;
  if (!options.stateDir.empty() &&
      !saveState(group, options.stateDir, state, error))
    return fail(error);
  // --save: every rank takes part in gathering the parameters and
  // statistics that the model holds (a sharded one is all-gathered from
  // every rank's shard), rank 0 keeps them for writing below.
  std::map<int, std::vector<uint8_t>> modelTensors;
  if (!options.onnxPath.empty() &&
      !gatherModelTensors(group, modelTensors, error))
    return fail(error);
  // --save-weights of a sharded program: each rank's own region, written by
  // the process that holds it (resumed with --weights PATH).
  if (!options.savePath.empty() && group.ranksHoldOwnState() &&
      !group.saveRankRegions(options.savePath, error))
    return fail(error);
  // Ranks that are processes: rank 0 writes the files.
  if (group.firstRank() != 0)
    return 0;

  if (!options.logPath.empty()) {
    std::string csv =
        scaled ? "step,loss,loss_scale,skipped_steps\n" : "step,loss\n";
    char line[128];
    for (size_t k = 0; k < losses.size(); ++k) {
      const auto &entry = losses[k];
      if (scaled)
        std::snprintf(line, sizeof line, "%lld,%.9g,%.9g,%lld\n",
                      (long long)entry.first, double(entry.second),
                      double(scales[k].first), (long long)scales[k].second);
      else
        std::snprintf(line, sizeof line, "%lld,%.9g\n", (long long)entry.first,
                      double(entry.second));
      csv += line;
    }
    if (!writeFileAtomically(options.logPath,
                             std::vector<uint8_t>(csv.begin(), csv.end()),
                             error))
      return fail(error);
  }
  // Streamed from the device in chunks: no host copy of the region.
  if (!options.savePath.empty() && !group.ranksHoldOwnState() &&
      !model.saveWeights(options.savePath, /*withTrailer=*/false, error))
    return fail(error);
  if (!state.commit(error))
    return fail(error);
  auto readTensor = [&](int w, std::vector<uint8_t> &bytes,
                        std::string &message) {
    auto found = modelTensors.find(w);
    if (found == modelTensors.end()) {
      message = std::string("tensor '") + program.weights[w].name +
                "' was not gathered for --save";
      return false;
    }
    bytes.swap(found->second);
    return true;
  };
  if (!options.onnxPath.empty() &&
      !writeTrainedOnnx(program, readTensor, options.templatePath,
                        options.onnxPath, options.externalData, error))
    return fail(error);
  if (!options.outputDir.empty())
    return writeOutputs(model, options.outputDir, options.checkFinite);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  const ProgramInfo *program = memopt_program();
  std::map<std::string, std::string> inputFiles;
  std::string outputDir, weightsPath;
  bool randomWeights = false, trainingFlag = false, checkFinite = false;
  bool verbose = verboseFromEnvironment();
  uint64_t seed = 0;
  int benchRuns = 0;
  int64_t ranks = 0; // 0: the program's data-parallel size
  TrainOptions trainOptions;
  ContextOptions options;
  std::string dumpDirectory, profileTimes;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string &out) {
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    auto integer = [&](const std::string &text, int64_t &out) {
      char *end = nullptr;
      long long parsed = std::strtoll(text.c_str(), &end, 10);
      out = parsed;
      return !text.empty() && end && !*end && parsed >= 0;
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
    } else if (arg == "--verbose") {
      verbose = true;
    } else if (arg == "--fused-attention") {
      options.chunkedAttention = false;
    } else if (arg == "--profile") {
      options.profile = true;
    } else if (arg == "--profile-times" && value(profileTimes)) {
      options.profile = true;
    } else if (arg == "--dump-ops" && value(dumpDirectory)) {
      if (mkdir(dumpDirectory.c_str(), 0755) != 0 && errno != EEXIST)
        return fail("--dump-ops: cannot create '" + dumpDirectory + "'");
      options.dumpDirectory = dumpDirectory.c_str();
    } else if (arg == "--bench" && value(v)) {
      benchRuns = std::atoi(v.c_str());
      if (benchRuns < 1)
        return fail("--bench expects a positive run count, got '" + v + "'");
    } else if (arg == "--steps" && value(v)) {
      if (!integer(v, trainOptions.steps))
        return fail("--steps expects a step count, got '" + v + "'");
      trainingFlag = true;
    } else if (arg == "--batch-size" && value(v)) {
      if (!integer(v, trainOptions.batchSize) || trainOptions.batchSize < 1)
        return fail("--batch-size expects a positive size, got '" + v + "'");
      trainingFlag = true;
    } else if (arg == "--lr" && value(v)) {
      char *end = nullptr;
      trainOptions.lr = std::strtof(v.c_str(), &end);
      if (v.empty() || !end || *end || !std::isfinite(trainOptions.lr))
        return fail("--lr expects a number, got '" + v + "'");
      trainOptions.lrGiven = trainingFlag = true;
    } else if (arg == "--log" && value(v)) {
      trainOptions.logPath = v;
      trainingFlag = true;
    } else if (arg == "--save-state" && value(v)) {
      trainOptions.stateDir = v;
      trainingFlag = true;
    } else if (arg == "--save" && value(v)) {
      trainOptions.onnxPath = v;
      trainingFlag = true;
    } else if (arg == "--save-external-data") {
      trainOptions.externalData = ExternalData::Always;
      trainingFlag = true;
    } else if (arg == "--template" && value(v)) {
      trainOptions.templatePath = v;
      trainingFlag = true;
    } else if (arg == "--save-weights" && value(v)) {
      trainOptions.savePath = v;
      trainingFlag = true;
    } else if (arg == "--ranks" && value(v)) {
      if (!integer(v, ranks) || ranks < 1 || ranks > 1024)
        return fail("--ranks expects a number of ranks from 1 to 1024, got '" +
                    v + "'");
      trainingFlag = true;
    } else if (arg == "--seed" && value(v)) {
      char *end = nullptr;
      trainOptions.seed = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || !end || *end)
        return fail("--seed expects an integer, got '" + v + "'");
      trainingFlag = true;
    } else {
      usage(argv[0]);
      return fail("unknown or incomplete argument '" + arg + "'");
    }
  }
  if (trainingFlag && !program->isTraining)
    return fail(
        "--steps, --batch-size, --lr, --seed, --log, --save, --save-weights "
        "and --ranks are for training programs; this one runs inference");
  if (!trainOptions.onnxPath.empty() && trainOptions.templatePath.empty())
    trainOptions.templatePath = executablePath(argv[0]) + ".onnx-template";
  if (!trainOptions.onnxPath.empty() &&
      access(trainOptions.templatePath.c_str(), R_OK) != 0)
    return fail("--save needs the training template '" +
                trainOptions.templatePath +
                "' (memopt-compile --train writes OUT.onnx-template; pass "
                "--template FILE if it moved)");
  // Default weights: OUT.weights next to the executable.
  if (weightsPath.empty() && !randomWeights) {
    std::string nextToExecutable = executablePath(argv[0]) + ".weights";
    if (access(nextToExecutable.c_str(), R_OK) == 0)
      weightsPath = nextToExecutable;
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
  std::vector<NpyArray> arrays(size_t(program->numInputs));
  for (int i = 0; i < program->numInputs; ++i) {
    const TensorInfo &info = program->inputs[i];
    auto it = inputFiles.find(info.name);
    if (it == inputFiles.end())
      return fail(std::string("missing input '") + info.name +
                  "' (pass --input " + info.name + "=FILE.npy)");
    std::string error;
    if (!readNpy(it->second, arrays[size_t(i)], error))
      return fail(error);
    if (checkFinite &&
        !(error = nonFiniteError("input", info.name, arrays[size_t(i)]))
             .empty())
      return fail(error);
  }

  std::string error;
  if (program->isTraining) {
    RankGroup group;
    if (!group.init(program, int(ranks), weightsPath, randomWeights, seed,
                    error, options))
      return fail(error);
    // Ranks that are processes (CUDA, NCCL): rank 0 reports, the others
    // print errors only.
    if (group.firstRank() != 0 && !std::freopen("/dev/null", "w", stdout))
      return fail("cannot silence the standard output of rank " +
                  std::to_string(group.firstRank()));
    if (verbose)
      std::printf("%s\n", group.rank(0).loadReport().describe().c_str());
    group.setRandomSeed(trainOptions.seed);
    trainOptions.benchRuns = benchRuns;
    trainOptions.outputDir = outputDir;
    trainOptions.checkFinite = checkFinite;
    int status = train(group, arrays, trainOptions);
    if (options.profile)
      printProfile(group.rank(0).context(), stdout, 40);
    if (status == 0 && !profileTimes.empty() &&
        !saveProfileTimes(group.rank(0).context(), program, profileTimes,
                          error))
      return fail(error);
    return status;
  }
  Model model;
  if (!model.init(program, weightsPath, randomWeights, seed, error, options))
    return fail(error);
  if (verbose)
    std::printf("%s\n", model.loadReport().describe().c_str());

  std::vector<std::vector<uint8_t>> inputData(size_t(program->numInputs));
  std::vector<const void *> inputPointers;
  for (int i = 0; i < program->numInputs; ++i) {
    if (!toProgramLayout(program->inputs[i], arrays[size_t(i)],
                         inputData[size_t(i)], error))
      return fail(error);
    inputPointers.push_back(inputData[size_t(i)].data());
  }
  if (!model.setInputs(inputPointers.data(), error) || !model.execute(error))
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
    printBench(benchRuns, times);
    printMemory(model);
  }
  if (options.profile)
    printProfile(model.context(), stdout, 40);
  if (!profileTimes.empty() &&
      !saveProfileTimes(model.context(), program, profileTimes, error))
    return fail(error);

  if (outputDir.empty()) {
    if (benchRuns == 0)
      return fail("no --output-dir given");
    return 0;
  }
  return writeOutputs(model, outputDir, checkFinite);
}
