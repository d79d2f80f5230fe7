//===- Driver.h - loads and runs a generated program -------------*- C++
//-*-===//
//
// Shared by the executable main (Main.cpp) and the C API (CApi.cpp): one
// arena allocation, one weight-region allocation, own buffers for inputs and
// outputs that live outside the arena, weight loading or deterministic random
// weights, and runs through `execute` (CUDA graph replay after the first run).
// Training programs (ProgramInfo::isTraining) run one micro-batch per
// `trainStep`: the driver writes the learning rate, the step number, the
// micro-step (gradient accumulation) and the dropout key into their weights
// before the run and reads the loss (output 0) after it. Without
// accumulation every micro-batch is a whole optimizer step.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_RUNTIME_DRIVER_H
#define MEMOPT_LIB_RUNTIME_DRIVER_H

#include "memopt/Runtime/Communicator.h"
#include "memopt/Runtime/Program.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace memopt::rt {

/// Weight files are read and written in chunks of this many bytes through
/// the staging slots (WeightIO.cpp): the host never holds more of the region
/// than two chunks (CUDA) or nothing at all (the host backend reads into the
/// region). weightChunkBytes() is this, or MEMOPT_WEIGHT_CHUNK_BYTES when set
/// (tests stream small regions in several chunks).
constexpr size_t kWeightChunkBytes = size_t(64) << 20;
size_t weightChunkBytes();

/// An open weight file, checked against a program (its size, the trailer and
/// the weight table's fingerprint; include/memopt/Runtime/WeightsFile.h)
/// before anything reads its region.
class WeightsFile {
public:
  WeightsFile() = default;
  WeightsFile(const WeightsFile &) = delete;
  WeightsFile &operator=(const WeightsFile &) = delete;
  ~WeightsFile();
  /// Opens and checks `path`; false with `error` (the messages
  /// checkWeightsTrailer gives) otherwise.
  bool open(const ProgramInfo &program, const std::string &path,
            std::string &error);
  void close();
  bool isOpen() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string &path() const { return path_; }

private:
  int fd_ = -1;
  std::string path_;
};

/// Streams `regionBytes` of an open weight file from byte `fileOffset` (a
/// ZeRO-3 rank's region, Program.h) into the device region `device`, chunk
/// by chunk (see kWeightChunkBytes).
bool loadRegion(Context &ctx, const WeightsFile &file, int64_t regionBytes,
                void *device, std::string &error, int64_t fileOffset = 0);
/// Writes the device region `device` (program.weightBytes) to `path`, chunk
/// by chunk, with the weight file's trailer when `withTrailer`; through
/// PATH.tmp renamed at the end.
/// A program with low working parameters (Program.h, lowParameterOf) also
/// writes their f32 masters after the region, from `hostState`.
bool saveRegion(Context &ctx, const ProgramInfo &program, const void *device,
                const std::string &path, bool withTrailer, std::string &error,
                const uint8_t *hostState = nullptr);
/// Reads `bytes` of an open weight file at `offset` into host memory.
bool readWeightFile(const WeightsFile &file, int64_t offset, void *dst,
                    size_t bytes, std::string &error);

/// Fills the device weight region `device` deterministically, on the device
/// (WeightStream.h's generator, the same on every backend): every weight
/// gets values from a splitmix64 hash of (seed, weight index, element index).
/// Matrices and kernels (rank >= 2) are uniform in +-1/sqrt(fan_in) with
/// fan_in the product of all dims but the first; vectors (biases, norm
/// scales, variances) are uniform in [0.5, 1.5) so variances stay positive;
/// integer and bool weights are 0 (always a valid index). Weights with
/// initData get its bytes. Optimizer state, the learning rate and the step
/// count start at zero (unless they have initData), as optimizers start.
/// Stream-ordered: synchronize before reading the region.
void fillRandomWeights(Context &ctx, const ProgramInfo &program, uint64_t seed,
                       void *device);

/// MEMOPT_VERBOSE set (and not "0"): the executable and the C API print the
/// weights' load report (the executable also with --verbose).
bool verboseFromEnvironment();

/// How the weights got to the device (Model::loadReport).
struct LoadReport {
  /// "file 'PATH'", "random (seed N, filled on the device)" or "the
  /// program (embedded)"
  std::string source;
  int64_t bytes = 0;
  double seconds = 0;
  /// "[load] weights: N bytes from SOURCE in T s (X GB/s)"
  std::string describe() const;
};

class Model {
public:
  ~Model();
  /// Allocates everything and loads weights (from `weightsPath`, or random
  /// from `seed` when `randomWeights`). Returns false with `error` set.
  bool init(const ProgramInfo *program, const std::string &weightsPath,
            bool randomWeights, uint64_t seed, std::string &error,
            const ContextOptions &options = ContextOptions());
  /// Copies host inputs in (in ProgramInfo order). The host buffers must
  /// stay valid until the next setInputs: inputs that live in the arena are
  /// overwritten by a run (the planner reuses their bytes once they are dead)
  /// and are copied in again before the next run.
  bool setInputs(const void *const *hostInputs, std::string &error);
  /// Re-copies the arena-resident inputs if a run has clobbered them (the
  /// bench calls this before starting its timer).
  bool refreshInputs(std::string &error);
  /// Runs the program once on the device (refreshing inputs as needed).
  bool execute(std::string &error);
  /// Copies outputs out (in ProgramInfo order).
  bool getOutputs(void *const *hostOutputs, std::string &error);
  /// One run on buffers the caller owns, each host or device memory
  /// (copyAnywhere), ordered on the caller's `stream` (waitForStream before,
  /// signalStream after): inputs are copied into the program's own slots
  /// (the planner reuses arena-resident input bytes, so a caller's buffer is
  /// never handed to the program), the program runs, outputs are copied into
  /// `outputs`. No host copy and no host synchronization (except the first
  /// CUDA run, which selects algorithms eagerly). The Python package's
  /// device path (DLPack tensors).
  bool runOnBuffers(const void *const *inputs, void *const *outputs,
                    void *stream, std::string &error);
  /// Waits for everything queued on the context.
  bool waitUntilDone(std::string &error);

  /// Training programs: one micro-batch on `hostInputs` with learning rate
  /// `lr`; `loss` gets output 0 (that micro-batch's loss), NaN or inf
  /// included. Micro-batch K of every accumulationSteps() applies the
  /// optimizer step (the step number continues from the loaded StepCount
  /// weight).
  bool trainStep(const void *const *hostInputs, float lr, float &loss,
                 std::string &error);
  /// Micro-batches per optimizer step (1 without --accumulate).
  int64_t accumulationSteps() const { return accumulationSteps_; }
  /// The seed of the dropout masks (key [seed, micro-batch number]).
  void setRandomSeed(uint64_t seed) { randomSeed_ = seed; }
  /// Data parallel: this model is rank `rank` of `ranks`. Its dropout key
  /// numbers the micro-batches of all ranks (micro-batch m of rank r is
  /// m * ranks + r), so the ranks draw independent masks.
  void setRank(int rank, int ranks) {
    rank_ = rank;
    ranks_ = ranks;
  }
  /// The learning rate the program was compiled with (the LearningRate
  /// weight's initData, else its loaded value; 0 without one).
  float compiledLearningRate() const { return compiledLearningRate_; }
  /// Dynamic loss scaling (f16 mixed-precision training): whether the
  /// program has it, and the scale and skipped-step count after the last
  /// trainStep (read with the loss, no extra synchronization).
  bool hasLossScale() const { return lossScale_ != nullptr; }
  float lossScale() const { return lossScaleValue_; }
  float skippedSteps() const { return lossScaleStateValue_[1]; }
  /// Copies the whole weight region (ProgramInfo::weightBytes bytes, the
  /// weight file's format without the trailer) into `region`, host memory
  /// the caller owns (the C API's read_weights).
  bool readRegion(void *region, std::string &error);
  /// Replaces the whole weight region from `region` (weightBytes bytes of
  /// host memory). A training program continues from the step count the
  /// region holds.
  bool writeRegion(const void *region, std::string &error);
  /// Streams a checked weight file into the region (as init does).
  bool loadWeights(const WeightsFile &file, std::string &error);
  /// Streams the region into a weight file at `path` (with the trailer when
  /// `withTrailer`); atomic.
  bool saveWeights(const std::string &path, bool withTrailer,
                   std::string &error);
  /// Copies weight `w`'s bytes (tensorBytes of it) into host memory `dst`.
  bool readTensor(int w, void *dst, std::string &error);
  /// --offload optimizer: copies host state tensor `h`
  /// (ProgramInfo::hostWeights) into `dst`, after the queued work.
  bool readHostTensor(int h, void *dst, std::string &error);
  /// How init loaded the weights.
  const LoadReport &loadReport() const { return loadReport_; }

  const ProgramInfo &program() const { return *program_; }
  Context &context() { return *ctx_; }
  size_t ioBytes() const { return ioBytes_; }

private:
  bool check(std::string &error);
  /// After the region changed: the step count and the loss scale (and, at
  /// init, the loaded learning rate) read back from the device.
  bool readRegionScalars(bool initial, std::string &error);
  /// --offload optimizer: copies each parameter into its host master
  /// (after the weight region was loaded or replaced). A low working
  /// parameter's master comes from `file` (after the region) when given,
  /// else is the parameter widened; the parameter is then the master
  /// rounded (what the CPU update writes).
  bool initMasters(const WeightsFile *file, std::string &error);
  static void body(Context &ctx, void *self);

  const ProgramInfo *program_ = nullptr;
  Context *ctx_ = nullptr;
  uint8_t *arena_ = nullptr;
  uint8_t *weights_ = nullptr;
  /// The host backend's region mapped from the weight file (copy on write)
  /// instead of read into memory: freed with munmap.
  bool weightsMapped_ = false;
  /// --offload optimizer: the host state region (ProgramInfo::
  /// hostStateBytes; pinned on CUDA), or nullptr.
  uint8_t *hostState_ = nullptr;
  /// Where this rank's region starts in the weight file (ZeRO-3: rank r's
  /// at r * weightBytes; 0 otherwise).
  int64_t fileOffset_ = 0;
  std::vector<void *> inputs_, outputs_, ownBuffers_;
  std::vector<const void *> hostInputs_;
  bool inputsStale_ = false;
  size_t ioBytes_ = 0;
  // Training: where the driver writes the learning rate and step (nullptr
  // when the program has none), the host copies it writes from (stable
  // while an asynchronous copy runs), and the first step's number - 1.
  const TensorInfo *learningRate_ = nullptr, *stepCount_ = nullptr,
                   *microStep_ = nullptr, *randomKey_ = nullptr,
                   *lossScale_ = nullptr, *lossScaleState_ = nullptr;
  float lossScaleValue_ = 0, lossScaleStateValue_[2] = {0, 0};
  float compiledLearningRate_ = 0, stepValue_ = 0, lrValue_ = 0,
        microStepValue_ = 0;
  double stepsDone_ = 0;
  int64_t accumulationSteps_ = 1, microBatchesDone_ = 0;
  uint64_t randomSeed_ = 0;
  int64_t randomKeyValue_[2] = {0, 0};
  int rank_ = 0, ranks_ = 1;
  LoadReport loadReport_;
};

/// The ranks of a training program (docs/data-parallel.md). A program
/// compiled with --data-parallel N runs N ranks; any other training program
/// runs one rank, without a communicator, exactly as a lone Model.
/// Host backend: all N ranks in this process, one Model per rank, each with
/// its own context, arena and weight region, sharing an in-process
/// communicator (Communicator.h), the ranks of a step running as threads.
/// CUDA backend (ranksAreProcesses()): one rank per process, launched
/// torchrun-style (LaunchEnvironment: RANK, WORLD_SIZE, LOCAL_RANK), over
/// NCCL; this process holds one Model, rank firstRank() of worldSize().
class RankGroup {
public:
  ~RankGroup();
  /// `ranks`: 0 takes the program's (ProgramInfo::dataParallelSize, or 1);
  /// any other value must equal it (and WORLD_SIZE when ranks are
  /// processes). Each rank loads the same weights; on the host the ranks
  /// share the cores (ContextOptions::hostThreads).
  bool init(const ProgramInfo *program, int ranks,
            const std::string &weightsPath, bool randomWeights, uint64_t seed,
            std::string &error, ContextOptions options = ContextOptions());
  /// The ranks this process holds (rank(0) .. rank(size() - 1) are global
  /// ranks firstRank() ..).
  int size() const { return int(models_.size()); }
  /// All ranks of the group, in every process.
  int worldSize() const { return worldSize_; }
  int firstRank() const { return firstRank_; }
  /// Whether the ranks are processes (the CUDA backend, NCCL).
  bool processes() const { return processes_; }
  Model &rank(int r) { return *models_[size_t(r)]; }
  const Model &rank(int r) const { return *models_[size_t(r)]; }
  const ProgramInfo &program() const { return models_.front()->program(); }
  void setRandomSeed(uint64_t seed);

  /// One micro-batch on every rank: input i's buffer holds worldSize()
  /// batches of the program's input i back to back, rank r taking batch r
  /// (the global batch split along axis 0; a process takes its own).
  /// `loss` is the mean of all ranks' losses (averaged over the processes
  /// with one more all-reduce when ranks are processes). A rank that fails
  /// aborts the communicator, so no rank of this process waits for it; the
  /// error names the rank that failed first.
  bool trainStep(const void *const *inputs, float lr, float &loss,
                 std::string &error);
  /// Checks that the ranks' parameters agree bit for bit (they must after
  /// every step; a mismatch is a bug, reported), tensor by tensor: the host
  /// holds two copies of the largest parameter at most. When ranks are
  /// processes only this process's ranks are compared.
  bool checkReplicas(std::string &error);
  /// Weight `w` as one rank would save it, into `bytes`: rank 0's tensor,
  /// or for a sharded tensor (ProgramInfo::shardOf) the gathered whole in
  /// the parameter's shape (savedShape). Ranks that are processes gather a
  /// shard with an all-gather: every process must ask for the same sharded
  /// weights in the same order.
  bool readTensor(int w, std::vector<uint8_t> &bytes, std::string &error);
  /// The shape readTensor gives weight `w` (its parameter's for a shard).
  const TensorInfo &savedShape(int w) const;
  /// Whether the ranks' weight regions differ (a sharded program over
  /// several ranks): then each rank's state is saved and loaded per rank
  /// (rankStatePath).
  bool ranksHoldOwnState() const;
  /// Every rank this process holds writes its whole weight region to
  /// rankStatePath(path, rank, worldSize()) (atomic, as saveWeights).
  bool saveRankRegions(const std::string &path, std::string &error);
  /// Bytes of one rank's state by role: "data parallel: ..." lines.
  std::string describeRanks() const;

private:
  bool initProcess(const ProgramInfo *program, int ranks,
                   const std::string &weightsPath, bool randomWeights,
                   uint64_t seed, std::string &error, ContextOptions options);
  /// Processes: `value` averaged over every process's rank (a device
  /// all-reduce of one float on rank(0)'s context).
  bool averageOverProcesses(float &value, std::string &error);

  std::vector<std::unique_ptr<Communicator>> communicators_;
  std::vector<std::unique_ptr<Model>> models_;
  int worldSize_ = 1, firstRank_ = 0;
  bool processes_ = false;
  float *deviceScalar_ = nullptr; ///< on rank(0)'s context (processes)
};

size_t tensorBytes(const TensorInfo &info);

/// The device bytes a program needs at start: its arena (workspaces
/// included), its weight region (parameters and optimizer state) and the
/// inputs and outputs outside the arena (`ioBytes`).
int64_t requiredDeviceBytes(const ProgramInfo &program, int64_t &ioBytes);
/// Model::init's start-up check (MemoryCheck.cpp): the device's free memory
/// (cudaMemGetInfo, or MEMOPT_DEVICE_FREE_BYTES when set; nothing to check
/// on the host otherwise) against requiredDeviceBytes. False with a message
/// saying how much is missing.
bool checkDeviceMemory(Context &ctx, const ProgramInfo &program,
                       std::string &error);
/// A rank's own weight-region file of a sharded data-parallel program:
/// PATH.rankR-of-N (DeepSpeed's checkpoints likewise hold one
/// zero_pp_rank_R file of optimizer state per rank). `--save-weights PATH`
/// writes one per rank; `--weights PATH` loads them when PATH itself does
/// not exist.
std::string rankStatePath(const std::string &path, int rank, int worldSize);

/// Checks a weight file of `fileBytes` against `program` (its size, the
/// trailer, the weight table's fingerprint; include/memopt/Runtime/
/// WeightsFile.h). `trailer`: the file's last kWeightsTrailerBytes when it
/// has the size of a region and a trailer (else nullptr). A bare region
/// image of the right size (no trailer) is accepted. `path` is for the
/// message.
bool checkWeightsTrailer(const ProgramInfo &program, const std::string &path,
                         int64_t fileBytes, const uint8_t *trailer,
                         std::string &error);
/// checkWeightsTrailer on a whole file read into `region`; strips the
/// trailer.
bool checkWeightsFile(const ProgramInfo &program, const std::string &path,
                      std::vector<uint8_t> &region, std::string &error);

/// Reads weight `w` (ProgramInfo::weights index) as it is saved into
/// `bytes` (RankGroup::readTensor, Model::readTensor).
using TensorReader =
    std::function<bool(int w, std::vector<uint8_t> &bytes, std::string &error)>;

/// When writeTrainedOnnx puts the initializers in a file of their own
/// (OUTPUT.data beside the model, ONNX external data): Auto when the model
/// would pass kOnnxExternalDataBytes (protobuf cannot parse a message of 2
/// GiB or more), Always, or Never.
enum class ExternalData { Auto, Always, Never };
constexpr int64_t kOnnxExternalDataBytes = int64_t(1536) << 20;

/// Writes the trained model: the template memopt-compile --train wrote
/// (OUT.onnx-template, the model without its trained initializers) plus the
/// Parameter and Statistic weights read one at a time with `read`, under
/// their ONNX names, inline or as external data (`external`). Atomic.
bool writeTrainedOnnx(const ProgramInfo &program, const TensorReader &read,
                      const std::string &templatePath,
                      const std::string &outputPath, ExternalData external,
                      std::string &error);

/// Writes `bytes` to `path` through a temporary file renamed at the end, so
/// that a failure leaves no half-written file. Returns false with `error`.
bool writeFileAtomically(const std::string &path,
                         const std::vector<uint8_t> &bytes, std::string &error);

} // namespace memopt::rt

#endif // MEMOPT_LIB_RUNTIME_DRIVER_H
