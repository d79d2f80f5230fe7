//===- Driver.cpp - loads and runs a generated program --------------------===//

#include "Driver.h"
#include "HostAdam.h"
#include "Internal.h"
#include "WeightStream.h"
#include "memopt/Runtime/WeightsFile.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace memopt::rt {

size_t tensorBytes(const TensorInfo &info) {
  return size_t(numElements(info)) * dtypeSize(info.dtype);
}

bool verboseFromEnvironment() {
  const char *env = std::getenv("MEMOPT_VERBOSE");
  return env && *env && std::strcmp(env, "0") != 0;
}

std::string LoadReport::describe() const {
  char text[160];
  double rate = seconds > 0 ? double(bytes) / seconds / 1e9 : 0;
  std::snprintf(text, sizeof text, " in %.3f s (%.2f GB/s)", seconds, rate);
  return "[load] weights: " + std::to_string(bytes) + " bytes from " + source +
         text;
}

Model::~Model() {
  if (!ctx_)
    return;
  synchronize(*ctx_);
  for (void *p : ownBuffers_)
    deviceFree(*ctx_, p);
  deviceFree(*ctx_, arena_);
  if (hostState_)
    hostStateFree(*ctx_, hostState_);
  if (weightsMapped_)
    ::munmap(weights_, size_t(program_->weightBytes));
  else
    deviceFree(*ctx_, weights_);
  destroyContext(ctx_);
}

bool Model::check(std::string &error) {
  if (program_ && program_->hostStateBytes > 0)
    offloadCheck(*ctx_); // the CPU updates of a replayed graph
  if (const char *message = contextError(*ctx_)) {
    error = message;
    return false;
  }
  return true;
}

/// Checks the weight table (offsets inside the region, the driver-written
/// scalars' dtypes and shapes) before anything is loaded.
static bool checkWeightTable(const ProgramInfo &program, std::string &error) {
  for (int w = 0; w < program.numWeights; ++w) {
    const TensorInfo &info = program.weights[w];
    if (info.offset < 0 ||
        info.offset + int64_t(tensorBytes(info)) > program.weightBytes) {
      error = std::string("weight '") + info.name +
              "' lies outside the weight region";
      return false;
    }
    bool scalar = info.role == WeightRole::LearningRate ||
                  info.role == WeightRole::StepCount ||
                  info.role == WeightRole::MicroStep;
    if (scalar && (info.dtype != DType::F32 || numElements(info) != 1)) {
      error = std::string("weight '") + info.name +
              "' (learning rate, step count or micro-step) is not one f32 "
              "element";
      return false;
    }
    if (info.role == WeightRole::RandomKey &&
        (info.dtype != DType::I64 || numElements(info) != 2)) {
      error = std::string("weight '") + info.name +
              "' (dropout key) is not two i64 elements";
      return false;
    }
    if ((info.role == WeightRole::LossScale &&
         (info.dtype != DType::F32 || numElements(info) != 1)) ||
        (info.role == WeightRole::LossScaleState &&
         (info.dtype != DType::F32 || numElements(info) != 2))) {
      error = std::string("weight '") + info.name +
              "' (loss scale or its state) is not one / two f32 elements";
      return false;
    }
  }
  return true;
}

bool Model::init(const ProgramInfo *program, const std::string &weightsPath,
                 bool randomWeights, uint64_t seed, std::string &error,
                 const ContextOptions &options) {
  program_ = program;
  if (!program || program->abiVersion != kProgramAbiVersion) {
    error = "program ABI version mismatch (runtime expects " +
            std::to_string(kProgramAbiVersion) + ")";
    return false;
  }
  // Data parallel: the collectives' shapes assume the compiled ranks.
  int ranks = options.communicator ? options.communicator->size() : 1;
  if (program->dataParallelSize > 1 && ranks != program->dataParallelSize) {
    error = "the program was compiled for " +
            std::to_string(program->dataParallelSize) +
            " data-parallel ranks; this run has " + std::to_string(ranks) +
            " (the executable runs them with --ranks " +
            std::to_string(program->dataParallelSize) + ")";
    return false;
  }
  if (program->dataParallelSize == 0 && ranks > 1) {
    error = "the program was not compiled for data parallelism "
            "(memopt-compile --train --data-parallel N); it runs one rank";
    return false;
  }
  if (!checkWeightTable(*program, error))
    return false;
  // The weight file is opened and checked before the device is touched.
  WeightsFile file;
  bool embeddedOnly = false;
  if (!randomWeights) {
    bool allEmbedded = true;
    for (int w = 0; w < program->numWeights; ++w)
      allEmbedded = allEmbedded && program->weights[w].initData;
    if (weightsPath.empty() && !allEmbedded) {
      error = "the program needs weights: pass --weights FILE or "
              "--random-weights SEED";
      return false;
    }
    if (!weightsPath.empty() && !file.open(*program, weightsPath, error))
      return false;
    embeddedOnly = weightsPath.empty();
  }
  // ZeRO-3: the compiled weight file holds one region per rank (Program.h);
  // a rank's own file (--save-weights) holds its region alone.
  fileOffset_ = 0;
  struct stat fileInfo;
  int64_t regions = weightFileRegions(*program);
  if (regions > 1 && options.communicator && file.isOpen() &&
      ::fstat(file.fd(), &fileInfo) == 0 &&
      int64_t(fileInfo.st_size) >= regions * program->weightBytes)
    fileOffset_ = int64_t(options.communicator->rank()) * program->weightBytes;
  ctx_ = createContext(options);
  if (!check(error) || !checkDeviceMemory(*ctx_, *program, error))
    return false;
  arena_ = static_cast<uint8_t *>(
      deviceAlloc(*ctx_, size_t(program->arenaBytes), "arena"));
  if (!check(error))
    return false;
  reserveHostPool(*ctx_, size_t(program->hostPoolBytes));
  if (!check(error))
    return false;
  // The host backend maps the weight file as its region (private: what the
  // program writes, the trained parameters, is copied on write), so a model
  // larger than the host's memory runs from the page cache and loading reads
  // nothing up front. MEMOPT_WEIGHT_MAP=0 reads it instead, as asking for
  // the streamed path's chunks or staging (MEMOPT_WEIGHT_CHUNK_BYTES,
  // MEMOPT_WEIGHT_STAGING) does.
  const char *mapSetting = std::getenv("MEMOPT_WEIGHT_MAP");
  bool mayMap = !(mapSetting && std::string(mapSetting) == "0") &&
                !std::getenv("MEMOPT_WEIGHT_CHUNK_BYTES") &&
                !std::getenv("MEMOPT_WEIGHT_STAGING");
  static char mapProbe; // any host address: the host backend returns it
  long page = ::sysconf(_SC_PAGESIZE);
  if (file.isOpen() && mayMap && program->weightBytes > 0 &&
      (page <= 0 || fileOffset_ % page == 0) &&
      hostAddressOf(*ctx_, &mapProbe) != nullptr) {
    // An inference program writes nothing to its weights: no commit charge
    // is reserved for copies (a model larger than memory could not be mapped
    // otherwise). A training step writes its parameters and state, so their
    // copies are reserved, and a region too large for that is read instead.
    int flags = MAP_PRIVATE | (program->isTraining ? 0 : MAP_NORESERVE);
    void *mapped =
        ::mmap(nullptr, size_t(program->weightBytes), PROT_READ | PROT_WRITE,
               flags, file.fd(), off_t(fileOffset_));
    if (mapped != MAP_FAILED) {
      weights_ = static_cast<uint8_t *>(mapped);
      weightsMapped_ = true;
    }
  }
  if (!weightsMapped_)
    weights_ = static_cast<uint8_t *>(
        deviceAlloc(*ctx_, size_t(program->weightBytes), "weights"));
  if (!check(error))
    return false;

  auto bind = [&](const TensorInfo *infos, int count,
                  std::vector<void *> &pointers, const char *kind) {
    for (int i = 0; i < count; ++i) {
      const TensorInfo &info = infos[i];
      size_t bytes = tensorBytes(info);
      if (info.offset >= 0) {
        if (info.offset + int64_t(bytes) > program->arenaBytes) {
          error =
              std::string(kind) + " '" + info.name + "' lies outside the arena";
          return false;
        }
        pointers.push_back(arena_ + info.offset);
      } else {
        ioBytes_ += bytes; // a buffer of its own, outside the arena
        pointers.push_back(deviceAlloc(*ctx_, bytes, info.name));
        ownBuffers_.push_back(pointers.back());
      }
    }
    return check(error);
  };
  if (!bind(program->inputs, program->numInputs, inputs_, "input") ||
      !bind(program->outputs, program->numOutputs, outputs_, "output"))
    return false;

  for (int w = 0; w < program->numWeights; ++w) {
    const TensorInfo &info = program->weights[w];
    if (info.role == WeightRole::LossScale && !lossScale_)
      lossScale_ = &info;
    if (info.role == WeightRole::LossScaleState && !lossScaleState_)
      lossScaleState_ = &info;
    if (info.role == WeightRole::MicroStep && !microStep_)
      microStep_ = &info;
    if (info.role == WeightRole::RandomKey && !randomKey_)
      randomKey_ = &info;
    if (info.role == WeightRole::LearningRate && !learningRate_)
      learningRate_ = &info;
    if (info.role == WeightRole::StepCount && !stepCount_)
      stepCount_ = &info;
  }
  if (program->isTraining &&
      (program->numOutputs < 1 || program->outputs[0].dtype != DType::F32 ||
       numElements(program->outputs[0]) != 1)) {
    error = "training program's output 0 is not an f32 scalar loss";
    return false;
  }
  if (bool(lossScale_) != bool(lossScaleState_)) {
    error = "the program has a loss scale without its state (or the reverse)";
    return false;
  }
  accumulationSteps_ = std::max<int64_t>(program->accumulationSteps, 1);
  if ((accumulationSteps_ > 1) != (microStep_ != nullptr)) {
    error = "the program accumulates over " +
            std::to_string(accumulationSteps_) +
            " micro-batches but its micro-step weight is " +
            (microStep_ ? "present" : "missing");
    return false;
  }

  auto start = std::chrono::steady_clock::now();
  if (weightsMapped_) {
    loadReport_.source = "file '" + file.path() + "' (mapped)";
  } else if (file.isOpen()) {
    if (!loadRegion(*ctx_, file, program->weightBytes, weights_, error,
                    fileOffset_))
      return false;
    loadReport_.source = "file '" + file.path() + "'";
  } else {
    // Random weights, or a program whose weights are all embedded (seed 0
    // only zeroes the padding).
    fillRandomWeights(*ctx_, *program, embeddedOnly ? 0 : seed, weights_);
    loadReport_.source = embeddedOnly ? "the program (embedded)"
                                      : "random (seed " + std::to_string(seed) +
                                            ", filled on the device)";
  }
  synchronize(*ctx_);
  if (!check(error) || !readRegionScalars(/*initial=*/true, error))
    return false;
  if (program->hostStateBytes > 0) {
    hostState_ = static_cast<uint8_t *>(
        hostStateAlloc(*ctx_, size_t(program->hostStateBytes)));
    if (!check(error))
      return false;
    setHostState(*ctx_, hostState_, size_t(program->hostStateBytes));
    if (!initMasters(file.isOpen() ? &file : nullptr, error))
      return false;
  }
  loadReport_.bytes = program->weightBytes;
  loadReport_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return true;
}

bool Model::readRegionScalars(bool initial, std::string &error) {
  float step = 0;
  if (initial && learningRate_) {
    // The compiled learning rate: its embedded value, else the loaded one.
    if (learningRate_->initData)
      std::memcpy(&compiledLearningRate_, learningRate_->initData,
                  sizeof compiledLearningRate_);
    else
      copyToHost(*ctx_, &compiledLearningRate_,
                 weights_ + learningRate_->offset,
                 sizeof compiledLearningRate_);
  }
  if (stepCount_)
    copyToHost(*ctx_, &step, weights_ + stepCount_->offset, sizeof step);
  if (lossScale_) {
    copyToHost(*ctx_, &lossScaleValue_, weights_ + lossScale_->offset,
               sizeof lossScaleValue_);
    copyToHost(*ctx_, lossScaleStateValue_, weights_ + lossScaleState_->offset,
               sizeof lossScaleStateValue_);
  }
  synchronize(*ctx_);
  // A loaded region continues its step count.
  stepsDone_ = step;
  stepValue_ = step;
  return check(error);
}

bool Model::setInputs(const void *const *hostInputs, std::string &error) {
  hostInputs_.assign(hostInputs, hostInputs + program_->numInputs);
  for (int i = 0; i < program_->numInputs; ++i)
    copyToDevice(*ctx_, inputs_[i], hostInputs[i],
                 tensorBytes(program_->inputs[i]));
  inputsStale_ = false;
  return check(error);
}

bool Model::refreshInputs(std::string &error) {
  if (!inputsStale_)
    return check(error);
  if (hostInputs_.size() != size_t(program_->numInputs)) {
    error = "the program's inputs were overwritten by the last run and "
            "have not been set again";
    return false;
  }
  for (int i = 0; i < program_->numInputs; ++i)
    if (program_->inputs[i].offset >= 0)
      copyToDevice(*ctx_, inputs_[i], hostInputs_[i],
                   tensorBytes(program_->inputs[i]));
  inputsStale_ = false;
  return check(error);
}

void Model::body(Context &ctx, void *self) {
  Model &model = *static_cast<Model *>(self);
  model.program_->run(ctx, model.arena_, model.weights_, model.inputs_.data(),
                      model.outputs_.data());
}

bool Model::execute(std::string &error) {
  if (!refreshInputs(error))
    return false;
  rt::execute(*ctx_, &Model::body, this);
  for (int i = 0; i < program_->numInputs; ++i)
    inputsStale_ = inputsStale_ || program_->inputs[i].offset >= 0;
  return check(error);
}

bool Model::getOutputs(void *const *hostOutputs, std::string &error) {
  for (int i = 0; i < program_->numOutputs; ++i)
    copyToHost(*ctx_, hostOutputs[i], outputs_[i],
               tensorBytes(program_->outputs[i]));
  synchronize(*ctx_);
  return check(error);
}

bool Model::runOnBuffers(const void *const *inputs, void *const *outputs,
                         void *stream, std::string &error) {
  waitForStream(*ctx_, stream);
  for (int i = 0; i < program_->numInputs; ++i)
    copyAnywhere(*ctx_, inputs_[i], inputs[i],
                 tensorBytes(program_->inputs[i]));
  // The caller's buffers may be gone before the next run: a later execute()
  // must get its inputs set again (refreshInputs says so).
  hostInputs_.clear();
  rt::execute(*ctx_, &Model::body, this);
  inputsStale_ = true;
  for (int i = 0; i < program_->numOutputs; ++i)
    copyAnywhere(*ctx_, outputs[i], outputs_[i],
                 tensorBytes(program_->outputs[i]));
  signalStream(*ctx_, stream);
  return check(error);
}

bool Model::waitUntilDone(std::string &error) {
  rt::synchronize(*ctx_);
  return check(error);
}

bool Model::trainStep(const void *const *hostInputs, float lr, float &loss,
                      std::string &error) {
  if (!program_->isTraining) {
    error = "the program is not a training step";
    return false;
  }
  // The first micro-batch of an optimizer step starts the step; the update
  // ops run on the last one (micro-step K - 1).
  int64_t micro = microBatchesDone_ % accumulationSteps_;
  if (micro == 0)
    stepsDone_ += 1;
  lrValue_ = lr;
  stepValue_ = float(stepsDone_);
  microStepValue_ = float(micro);
  randomKeyValue_[0] = int64_t(randomSeed_);
  // The 1-based micro-batch number, continuing from a loaded step count;
  // data-parallel ranks number their micro-batches apart.
  randomKeyValue_[1] =
      ((int64_t(stepsDone_) - 1) * accumulationSteps_ + micro) * ranks_ +
      rank_ + 1;
  if (learningRate_)
    copyToDevice(*ctx_, weights_ + learningRate_->offset, &lrValue_,
                 sizeof lrValue_);
  if (stepCount_)
    copyToDevice(*ctx_, weights_ + stepCount_->offset, &stepValue_,
                 sizeof stepValue_);
  if (microStep_)
    copyToDevice(*ctx_, weights_ + microStep_->offset, &microStepValue_,
                 sizeof microStepValue_);
  // The CUDA collectives gate on the host (Runtime.h, setMicroStep).
  setMicroStep(*ctx_, micro);
  if (randomKey_)
    copyToDevice(*ctx_, weights_ + randomKey_->offset, randomKeyValue_,
                 sizeof randomKeyValue_);
  if (!setInputs(hostInputs, error) || !execute(error))
    return false;
  microBatchesDone_ += 1;
  copyToHost(*ctx_, &loss, outputs_[0], sizeof loss);
  // The loss scale and its state ride on the loss's copy: no second
  // synchronization.
  if (lossScale_) {
    copyToHost(*ctx_, &lossScaleValue_, weights_ + lossScale_->offset,
               sizeof lossScaleValue_);
    copyToHost(*ctx_, lossScaleStateValue_, weights_ + lossScaleState_->offset,
               sizeof lossScaleStateValue_);
  }
  synchronize(*ctx_);
  return check(error);
}

bool Model::readRegion(void *region, std::string &error) {
  copyToHost(*ctx_, region, weights_, size_t(program_->weightBytes));
  synchronize(*ctx_);
  return check(error);
}

bool Model::writeRegion(const void *region, std::string &error) {
  copyToDevice(*ctx_, weights_, region, size_t(program_->weightBytes));
  synchronize(*ctx_);
  return check(error) && readRegionScalars(/*initial=*/false, error) &&
         initMasters(nullptr, error);
}

bool Model::loadWeights(const WeightsFile &file, std::string &error) {
  return loadRegion(*ctx_, file, program_->weightBytes, weights_, error,
                    fileOffset_) &&
         check(error) && readRegionScalars(/*initial=*/false, error) &&
         initMasters(&file, error);
}

bool Model::initMasters(const WeightsFile *file, std::string &error) {
  if (!hostState_)
    return true;
  // The CPU optimizer's persistent copies of low working parameters are
  // rounded again from the new masters on their next run.
  offloadEngine(*ctx_).invalidateParams();
  int64_t fileMaster = program_->weightBytes;
  for (int h = 0; h < program_->numHostWeights; ++h) {
    const TensorInfo &info = program_->hostWeights[h];
    int32_t param = program_->masterOf ? program_->masterOf[h] : -1;
    if (info.offset < 0 ||
        info.offset + int64_t(tensorBytes(info)) > program_->hostStateBytes) {
      error = std::string("host state tensor '") + info.name +
              "' lies outside the host state region";
      return false;
    }
    if (param < 0)
      continue;
    if (lowParameterOf(*program_, h) >= 0) {
      // A low working parameter: the master is the file's (or the
      // parameter widened), the parameter its rounding.
      const TensorInfo &weight = program_->weights[param];
      int64_t elements = numElements(info);
      if (numElements(weight) != elements) {
        error = std::string("master '") + info.name +
                "' does not match its parameter";
        return false;
      }
      auto *master = reinterpret_cast<float *>(hostState_ + info.offset);
      std::vector<uint8_t> low(tensorBytes(weight));
      if (file) {
        if (!readWeightFile(*file, fileOffset_ + fileMaster, master,
                            tensorBytes(info), error))
          return false;
      } else {
        copyToHost(*ctx_, low.data(), weights_ + weight.offset, low.size());
        synchronize(*ctx_);
        widenParameterRange(low.data(), weight.dtype, master, 0, elements);
      }
      fileMaster += int64_t(tensorBytes(info));
      roundMasterRange(master, low.data(), weight.dtype, 0, elements);
      copyToDevice(*ctx_, weights_ + weight.offset, low.data(), low.size());
      synchronize(*ctx_);
      continue;
    }
    if (param >= program_->numWeights ||
        tensorBytes(program_->weights[param]) != tensorBytes(info)) {
      error = std::string("master '") + info.name +
              "' does not match its parameter";
      return false;
    }
    copyToHost(*ctx_, hostState_ + info.offset,
               weights_ + program_->weights[param].offset, tensorBytes(info));
  }
  synchronize(*ctx_);
  return check(error);
}

bool Model::saveWeights(const std::string &path, bool withTrailer,
                        std::string &error) {
  synchronize(*ctx_); // the host masters are the step's
  return check(error) && saveRegion(*ctx_, *program_, weights_, path,
                                    withTrailer, error, hostState_);
}

bool Model::readTensor(int w, void *dst, std::string &error) {
  // A low working parameter reads as its f32 master (Program.h).
  for (int h = 0; hostState_ && h < program_->numHostWeights; ++h)
    if (lowParameterOf(*program_, h) == w)
      return readHostTensor(h, dst, error);
  const TensorInfo &info = program_->weights[w];
  copyToHost(*ctx_, dst, weights_ + info.offset, tensorBytes(info));
  synchronize(*ctx_);
  return check(error);
}

bool Model::readHostTensor(int h, void *dst, std::string &error) {
  if (!hostState_ || h < 0 || h >= program_->numHostWeights) {
    error = "no host state tensor #" + std::to_string(h);
    return false;
  }
  synchronize(*ctx_); // the step's copies back, then the CPU updates are done
  const TensorInfo &info = program_->hostWeights[h];
  std::memcpy(dst, hostState_ + info.offset, tensorBytes(info));
  return check(error);
}

//===----------------------------------------------------------------------===//
// RankGroup
//===----------------------------------------------------------------------===//

RankGroup::~RankGroup() {
  if (deviceScalar_ && !models_.empty())
    deviceFree(models_.front()->context(), deviceScalar_);
  // The contexts (models_) go before the communicators they use.
  models_.clear();
}

std::string rankStatePath(const std::string &path, int rank, int worldSize) {
  return path + ".rank" + std::to_string(rank) + "-of-" +
         std::to_string(worldSize);
}

namespace {

/// The weight file rank `rank` of `worldSize` loads: `path` itself, or when
/// the program's ranks hold their own state and `path` does not exist, the
/// rank's own file (rankStatePath), which must then exist.
bool weightsForRank(const ProgramInfo &program, const std::string &path,
                    int rank, int worldSize, std::string &chosen,
                    std::string &error) {
  chosen = path;
  if (path.empty() || program.shardMode == 0 || worldSize < 2 ||
      access(path.c_str(), F_OK) == 0)
    return true;
  std::string own = rankStatePath(path, rank, worldSize);
  if (access(own.c_str(), R_OK) == 0) {
    chosen = own;
    return true;
  }
  std::string first = rankStatePath(path, 0, worldSize);
  error = "rank " + std::to_string(rank) + ": no weight file '" + path +
          "', nor this rank's own '" + own + "'" +
          (access(first.c_str(), F_OK) == 0
               ? " (the per-rank files of --save-weights are incomplete)"
               : " (per-rank files are PATH.rankR-of-N, written by "
                 "--save-weights over as many ranks)");
  return false;
}

} // namespace

bool RankGroup::initProcess(const ProgramInfo *program, int ranks,
                            const std::string &weightsPath, bool randomWeights,
                            uint64_t seed, std::string &error,
                            ContextOptions options) {
  LaunchEnvironment env;
  if (!readLaunchEnvironment(env, error))
    return false;
  int compiled = program->dataParallelSize;
  std::string launch =
      " (on the " + std::string(backendName()) +
      " backend each rank is a process: launch " + std::to_string(compiled) +
      " of them with torchrun --nproc-per-node " + std::to_string(compiled) +
      ", or set RANK, WORLD_SIZE, LOCAL_RANK and MASTER_ADDR / MASTER_PORT for "
      "each; docs/data-parallel.md)";
  if (ranks != 0 && ranks != env.worldSize) {
    error = "--ranks " + std::to_string(ranks) + ": WORLD_SIZE is " +
            std::to_string(env.worldSize) + launch;
    return false;
  }
  if (env.worldSize != compiled) {
    error = "the program was compiled for " + std::to_string(compiled) +
            " data-parallel ranks; WORLD_SIZE is " +
            std::to_string(env.worldSize) + launch;
    return false;
  }
  std::unique_ptr<Communicator> comm = createProcessCommunicator(env, error);
  if (!comm)
    return false;
  communicators_.push_back(std::move(comm));
  options.device = env.localRank;
  options.communicator = communicators_.front().get();
  std::string ownWeights;
  if (!weightsForRank(*program, weightsPath, env.rank, env.worldSize,
                      ownWeights, error))
    return false;
  models_.push_back(std::make_unique<Model>());
  if (!models_.back()->init(program, ownWeights, randomWeights, seed, error,
                            options)) {
    error = "rank " + std::to_string(env.rank) + ": " + error;
    return false;
  }
  models_.back()->setRank(env.rank, env.worldSize);
  worldSize_ = env.worldSize;
  firstRank_ = env.rank;
  processes_ = true;
  return true;
}

bool RankGroup::averageOverProcesses(float &value, std::string &error) {
  if (!processes_ || worldSize_ == 1)
    return true;
  Context &ctx = models_.front()->context();
  if (!deviceScalar_)
    deviceScalar_ =
        static_cast<float *>(deviceAlloc(ctx, sizeof(float), "<ranks>"));
  int64_t one = 1;
  TensorRef scalar = makeTensor(deviceScalar_, DType::F32, 1, &one);
  if (deviceScalar_) {
    copyToDevice(ctx, deviceScalar_, &value, sizeof value);
    allReduce(ctx, "<mean loss over the ranks>", CollectiveReduction::Average,
              scalar, scalar);
    copyToHost(ctx, &value, deviceScalar_, sizeof value);
    synchronize(ctx);
  }
  if (const char *message = contextError(ctx)) {
    // The watchdog fires here as often as in the step (the loss average
    // waits behind the step's collectives): name the rank either way.
    error = "rank " + std::to_string(firstRank_) + ": " + message;
    return false;
  }
  return true;
}

bool RankGroup::init(const ProgramInfo *program, int ranks,
                     const std::string &weightsPath, bool randomWeights,
                     uint64_t seed, std::string &error,
                     ContextOptions options) {
  if (deviceScalar_ && !models_.empty())
    deviceFree(models_.front()->context(), deviceScalar_);
  deviceScalar_ = nullptr;
  models_.clear();
  communicators_.clear();
  worldSize_ = 1;
  firstRank_ = 0;
  processes_ = false;
  if (!program || program->abiVersion != kProgramAbiVersion) {
    error = "program ABI version mismatch (runtime expects " +
            std::to_string(kProgramAbiVersion) + ")";
    return false;
  }
  if (program->dataParallelSize >= 1 && ranksAreProcesses())
    return initProcess(program, ranks, weightsPath, randomWeights, seed, error,
                       options);
  int compiled = std::max(program->dataParallelSize, 1);
  if (ranks == 0)
    ranks = compiled;
  if (ranks < 1) {
    error = "--ranks " + std::to_string(ranks) + ": at least 1 rank";
    return false;
  }
  if (program->dataParallelSize == 0 && ranks > 1) {
    error = "--ranks " + std::to_string(ranks) +
            ": the program was not compiled for data parallelism "
            "(memopt-compile --train --data-parallel N)";
    return false;
  }
  if (ranks != compiled) {
    error = "--ranks " + std::to_string(ranks) +
            ": the program was compiled for " + std::to_string(compiled) +
            " data-parallel ranks (its collectives and shards assume them)";
    return false;
  }
  if (program->dataParallelSize >= 1) {
    double timeout = 0;
    LateRank late;
    if (!collectiveTimeoutFromEnvironment(timeout, error) ||
        !lateRankFromEnvironment(ranks, late, error))
      return false;
    communicators_ = createInProcessCommunicators(ranks, timeout, late);
  }
  if (ranks > 1 && options.hostThreads == 0) {
    // The ranks share the cores (MEMOPT_HOST_THREADS counts all of them).
    long cores = long(std::max(1u, std::thread::hardware_concurrency()));
    if (const char *env = std::getenv("MEMOPT_HOST_THREADS")) {
      char *end = nullptr;
      long n = std::strtol(env, &end, 10);
      if (end != env && *end == '\0' && n > 0)
        cores = n;
    }
    options.hostThreads = int(std::max<long>(1, cores / ranks));
  }
  for (int r = 0; r < ranks; ++r) {
    options.communicator =
        communicators_.empty() ? nullptr : communicators_[size_t(r)].get();
    std::string ownWeights;
    if (!weightsForRank(*program, weightsPath, r, ranks, ownWeights, error))
      return false;
    models_.push_back(std::make_unique<Model>());
    if (!models_.back()->init(program, ownWeights, randomWeights, seed, error,
                              options)) {
      if (ranks > 1)
        error = "rank " + std::to_string(r) + ": " + error;
      return false;
    }
    models_.back()->setRank(r, ranks);
  }
  worldSize_ = ranks;
  return true;
}

void RankGroup::setRandomSeed(uint64_t seed) {
  for (auto &model : models_)
    model->setRandomSeed(seed);
}

bool RankGroup::trainStep(const void *const *inputs, float lr, float &loss,
                          std::string &error) {
  int ranks = size();
  const ProgramInfo &info = program();
  if (processes_) {
    // This process's batch of the global one.
    std::vector<const void *> mine(size_t(info.numInputs));
    for (int i = 0; i < info.numInputs; ++i)
      mine[size_t(i)] = static_cast<const uint8_t *>(inputs[i]) +
                        size_t(firstRank_) * tensorBytes(info.inputs[i]);
    if (!models_.front()->trainStep(mine.data(), lr, loss, error)) {
      communicators_.front()->abort(error);
      error = "rank " + std::to_string(firstRank_) + ": " + error;
      return false;
    }
    return averageOverProcesses(loss, error);
  }
  if (ranks == 1)
    return models_.front()->trainStep(inputs, lr, loss, error);
  std::vector<float> losses(size_t(ranks), 0.0f);
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  std::mutex mutex;
  int firstFailed = -1;
  auto runRank = [&](int r) {
    std::vector<const void *> mine(size_t(info.numInputs));
    for (int i = 0; i < info.numInputs; ++i)
      mine[size_t(i)] = static_cast<const uint8_t *>(inputs[i]) +
                        size_t(r) * tensorBytes(info.inputs[i]);
    if (models_[size_t(r)]->trainStep(mine.data(), lr, losses[size_t(r)],
                                      errors[size_t(r)]))
      return;
    // The first rank to fail names the error; its abort releases the ranks
    // waiting for it in a collective (they fail too).
    std::lock_guard<std::mutex> lock(mutex);
    if (firstFailed < 0)
      firstFailed = r;
    communicators_[size_t(r)]->abort(errors[size_t(r)]);
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < ranks; ++r)
    threads.emplace_back(runRank, r);
  runRank(0);
  for (std::thread &thread : threads)
    thread.join();
  if (firstFailed >= 0) {
    error = "rank " + std::to_string(firstFailed) + ": " +
            errors[size_t(firstFailed)];
    return false;
  }
  // Dynamic loss scaling: the ranks agree on every overflow (the program
  // all-reduces the flag), so they skip the same steps and keep the same
  // scale; the values were read with the loss.
  const Model &first = *models_.front();
  for (int r = 1; r < ranks && first.hasLossScale(); ++r) {
    const Model &other = *models_[size_t(r)];
    if (other.lossScale() != first.lossScale() ||
        other.skippedSteps() != first.skippedSteps()) {
      char text[160];
      std::snprintf(text, sizeof text,
                    "the ranks' loss scales differ (rank 0: %.9g, %g skipped; "
                    "rank %d: %.9g, %g skipped): a data-parallel bug",
                    double(first.lossScale()), double(first.skippedSteps()), r,
                    double(other.lossScale()), double(other.skippedSteps()));
      error = text;
      return false;
    }
  }
  double sum = 0;
  for (float value : losses)
    sum += double(value);
  loss = float(sum / double(ranks));
  return true;
}

bool RankGroup::checkReplicas(std::string &error) {
  const ProgramInfo &info = program();
  int ranks = size();
  std::vector<uint8_t> first, other;
  for (int w = 0; ranks > 1 && w < info.numWeights; ++w) {
    const TensorInfo &weight = info.weights[w];
    // ZeRO-3: each rank holds its own shard (shardOf[w] == w).
    if (weight.role != WeightRole::Parameter ||
        (info.shardOf && info.shardOf[w] == w))
      continue;
    size_t bytes = tensorBytes(weight);
    first.resize(bytes);
    other.resize(bytes);
    if (!models_[0]->readTensor(w, first.data(), error))
      return false;
    for (int r = 1; r < ranks; ++r) {
      if (!models_[size_t(r)]->readTensor(w, other.data(), error))
        return false;
      if (std::memcmp(first.data(), other.data(), bytes) != 0) {
        error = std::string("the ranks' copies of parameter '") + weight.name +
                "' differ (rank 0 and rank " + std::to_string(r) +
                "): a data-parallel bug";
        return false;
      }
    }
  }
  return true;
}

const TensorInfo &RankGroup::savedShape(int w) const {
  const ProgramInfo &info = program();
  int32_t param = info.shardOf ? info.shardOf[w] : -1;
  return param >= 0 && param < info.numWeights ? wholeWeight(info, param)
                                               : wholeWeight(info, w);
}

bool RankGroup::ranksHoldOwnState() const {
  return worldSize_ > 1 && program().shardMode != 0;
}

bool RankGroup::saveRankRegions(const std::string &path, std::string &error) {
  for (int r = 0; r < size(); ++r)
    if (!models_[size_t(r)]->saveWeights(
            rankStatePath(path, firstRank_ + r, worldSize_),
            /*withTrailer=*/false, error)) {
      error = "rank " + std::to_string(firstRank_ + r) + ": " + error;
      return false;
    }
  return true;
}

bool RankGroup::readTensor(int w, std::vector<uint8_t> &bytes,
                           std::string &error) {
  const ProgramInfo &info = program();
  const TensorInfo &weight = info.weights[w];
  int ranks = size(), world = worldSize_;
  int32_t param = info.shardOf ? info.shardOf[w] : -1;
  if (param < 0 || param >= info.numWeights) {
    bytes.resize(tensorBytes(savedShape(w))); // a low parameter's master
    return models_[0]->readTensor(w, bytes.data(), error);
  }
  // Rank r's shard: its chunk of the parameter's elements, then the tail
  // (the same on every rank).
  const TensorInfo &whole = wholeWeight(info, param);
  int64_t elements = numElements(whole);
  int64_t chunk = elements / world, tail = elements % world;
  if (numElements(weight) != chunk + tail || weight.dtype != DType::F32) {
    error = std::string("weight '") + weight.name +
            "' is not a shard of parameter '" + whole.name + "' over " +
            std::to_string(world) + " ranks";
    return false;
  }
  size_t chunkBytes = size_t(chunk) * sizeof(float);
  std::vector<uint8_t> shard(tensorBytes(weight));
  bytes.resize(size_t(elements) * sizeof(float));
  if (processes_) {
    // Ranks in other processes: this rank's chunk and the tail into place,
    // then the chunks all-gathered on the device (in place).
    if (!models_[0]->readTensor(w, shard.data(), error))
      return false;
    std::memcpy(bytes.data() + size_t(firstRank_) * chunkBytes, shard.data(),
                chunkBytes);
    std::memcpy(bytes.data() + size_t(world) * chunkBytes,
                shard.data() + chunkBytes, size_t(tail) * sizeof(float));
    Context &ctx = models_.front()->context();
    void *buffer = deviceAlloc(ctx, bytes.size(), "<save state>");
    if (buffer) {
      TensorRef tensor = makeTensor(buffer, DType::F32, 1, &elements);
      copyToDevice(ctx, buffer, bytes.data(), bytes.size());
      allGather(ctx, weight.name, world, tensor);
      copyToHost(ctx, bytes.data(), buffer, bytes.size());
      synchronize(ctx);
      deviceFree(ctx, buffer);
    }
    if (const char *message = contextError(ctx)) {
      error = message;
      return false;
    }
    return true;
  }
  for (int r = 0; r < ranks; ++r) {
    if (!models_[size_t(r)]->readTensor(w, shard.data(), error))
      return false;
    std::memcpy(bytes.data() + size_t(r) * chunkBytes, shard.data(),
                chunkBytes);
    if (r == 0)
      std::memcpy(bytes.data() + size_t(ranks) * chunkBytes,
                  shard.data() + chunkBytes, size_t(tail) * sizeof(float));
  }
  return true;
}

std::string RankGroup::describeRanks() const {
  const ProgramInfo &info = models_.front()->program();
  int64_t parameters = 0, state = 0, accumulators = 0;
  for (int w = 0; w < info.numWeights; ++w) {
    const TensorInfo &weight = info.weights[w];
    int64_t bytes = int64_t(tensorBytes(weight));
    if (weight.role == WeightRole::Parameter)
      parameters += bytes;
    else if (weight.role == WeightRole::OptimizerState)
      state += bytes;
    else if (weight.role == WeightRole::GradientAccumulator)
      accumulators += bytes;
  }
  static const char *const shardModes[] = {"none", "optimizer (ZeRO-1)",
                                           "gradients (ZeRO-2)",
                                           "parameters (ZeRO-3)"};
  int mode = std::clamp(info.shardMode, 0, 3);
  std::string where = processes_
                          ? " ranks (processes over NCCL; this is rank " +
                                std::to_string(firstRank_) + ")"
                          : " ranks (threads of this process)";
  return "data parallel: " + std::to_string(worldSize_) + where + ", shard " +
         shardModes[mode] +
         "; per rank: arena_bytes=" + std::to_string(info.arenaBytes) +
         " weight_bytes=" + std::to_string(info.weightBytes) +
         " parameter_bytes=" + std::to_string(parameters) +
         " optimizer_state_bytes=" + std::to_string(state) +
         " accumulator_bytes=" + std::to_string(accumulators);
}

bool writeFileAtomically(const std::string &path,
                         const std::vector<uint8_t> &bytes,
                         std::string &error) {
  std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(bytes.data()),
              std::streamsize(bytes.size()));
    if (!out) {
      error = "cannot write '" + temporary + "'";
      std::remove(temporary.c_str());
      return false;
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    error = "cannot rename '" + temporary + "' to '" + path + "'";
    std::remove(temporary.c_str());
    return false;
  }
  return true;
}

} // namespace memopt::rt
