//===- WeightIO.cpp - the weight region between files and the device ------===//
//
// Weight files are streamed, never held whole on the host (issue 25): a file
// is opened and checked first (size, trailer, fingerprint: a wrong file is
// refused before the device is touched), then read in chunks of
// weightChunkBytes(). On CUDA each chunk is read into one of two page-locked
// staging slots while the other slot's copy to the device runs; the host
// backend reads straight into the region, which is host memory. Saving runs
// the same pipeline backwards. --random-weights fills the region on the
// device (WeightStream.h's generator), then copies the embedded constants.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"
#include "WeightStream.h"
#include "memopt/Runtime/WeightsFile.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace memopt::rt {

namespace {

/// The staging slots of one streamed copy (two: one fills while the other
/// copies).
constexpr int kStagingSlots = 2;

/// MEMOPT_WEIGHT_STAGING=1: the host backend takes the staging path too
/// (tests of the CUDA backend's pipeline on a machine without a GPU).
bool forceStaging() {
  const char *env = std::getenv("MEMOPT_WEIGHT_STAGING");
  return env && *env && std::strcmp(env, "0") != 0;
}

std::string systemError() { return std::strerror(errno); }

/// Reads exactly `bytes` at `offset`; false with `error` set otherwise.
bool readAt(int fd, uint8_t *dst, size_t bytes, int64_t offset,
            const std::string &path, std::string &error) {
  while (bytes > 0) {
    ssize_t n = ::pread(fd, dst, std::min<size_t>(bytes, size_t(1) << 30),
                        off_t(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      error = "cannot read weight file '" + path + "': " + systemError();
      return false;
    }
    if (n == 0) {
      error = "weight file '" + path + "' ended early (at byte " +
              std::to_string(offset) + "): it changed while being read";
      return false;
    }
    dst += n;
    bytes -= size_t(n);
    offset += n;
  }
  return true;
}

bool writeAll(int fd, const uint8_t *src, size_t bytes, const std::string &path,
              std::string &error) {
  while (bytes > 0) {
    ssize_t n = ::write(fd, src, std::min<size_t>(bytes, size_t(1) << 30));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      error = "cannot write '" + path + "': " + systemError();
      return false;
    }
    src += n;
    bytes -= size_t(n);
  }
  return true;
}

bool contextOk(Context &ctx, std::string &error) {
  if (const char *message = contextError(ctx)) {
    error = message;
    return false;
  }
  return true;
}

uint64_t programFingerprint(const ProgramInfo &program) {
  WeightsFingerprint table;
  for (int w = 0; w < program.numWeights; ++w) {
    const TensorInfo &info = program.weights[w];
    table.addWeight(info.name, info.rank, info.shape, info.offset,
                    int64_t(tensorBytes(info)));
  }
  // The low working parameters' masters after the region (EmitProgram's
  // collectHostWeights adds them alike).
  int64_t offset = program.weightBytes;
  for (int h = 0; h < program.numHostWeights; ++h)
    if (lowParameterOf(program, h) >= 0) {
      const TensorInfo &info = program.hostWeights[h];
      table.addWeight(info.name, info.rank, info.shape, offset,
                      int64_t(tensorBytes(info)));
      offset += int64_t(tensorBytes(info));
    }
  return table.finish(offset);
}

} // namespace

size_t weightChunkBytes() {
  if (const char *env = std::getenv("MEMOPT_WEIGHT_CHUNK_BYTES")) {
    char *end = nullptr;
    unsigned long long bytes = std::strtoull(env, &end, 10);
    if (end != env && *end == '\0' && bytes > 0)
      return size_t(bytes);
  }
  return kWeightChunkBytes;
}

bool checkWeightsTrailer(const ProgramInfo &program, const std::string &path,
                         int64_t fileBytes, const uint8_t *trailer,
                         std::string &error) {
  // ZeRO-3: one region per rank (Program.h, weightFileRegions), or one
  // rank's own region (--save-weights' PATH.rankR-of-N).
  // (Low working parameters' masters follow the region: never with ranks.)
  int64_t masters = lowMasterBytes(program);
  int64_t all = weightFileBytes(program);
  int64_t expected =
      fileBytes == all || fileBytes == all + int64_t(kWeightsTrailerBytes)
          ? all
          : program.weightBytes + masters;
  std::string file = "weight file '" + path + "'";
  if (fileBytes == expected)
    return true;
  if (fileBytes != expected + int64_t(kWeightsTrailerBytes) || !trailer) {
    error =
        file + " has " + std::to_string(fileBytes) +
        " bytes; the program's weight region has " + std::to_string(expected) +
        (weightFileRegions(program) > 1 ? " in all the ranks' regions" : "") +
        (masters ? " with the masters of its f16 / bf16 parameters" : "") +
        " (+" + std::to_string(kWeightsTrailerBytes) +
        " bytes of trailer): it is truncated or belongs to another model";
    return false;
  }
  uint64_t fingerprint = 0;
  int64_t regionBytes = 0;
  if (!parseWeightsTrailer(trailer, fingerprint, regionBytes) ||
      regionBytes != expected) {
    error = file + " does not end in a memopt weight trailer for a region of " +
            std::to_string(expected) + " bytes";
    return false;
  }
  uint64_t ours = programFingerprint(program);
  if (fingerprint != ours) {
    char text[80];
    std::snprintf(text, sizeof(text), "%016llx, this program %016llx",
                  (unsigned long long)fingerprint, (unsigned long long)ours);
    error = file +
            " was written for another program (weight table "
            "fingerprint " +
            text + ")";
    return false;
  }
  return true;
}

bool checkWeightsFile(const ProgramInfo &program, const std::string &path,
                      std::vector<uint8_t> &region, std::string &error) {
  int64_t size = int64_t(region.size());
  int64_t regions = weightFileBytes(program);
  if (size != regions + int64_t(kWeightsTrailerBytes))
    regions = program.weightBytes + lowMasterBytes(program);
  const uint8_t *trailer = size == regions + int64_t(kWeightsTrailerBytes)
                               ? region.data() + regions
                               : nullptr;
  if (!checkWeightsTrailer(program, path, size, trailer, error))
    return false;
  region.resize(size_t(program.weightBytes));
  return true;
}

//===----------------------------------------------------------------------===//
// WeightsFile
//===----------------------------------------------------------------------===//

WeightsFile::~WeightsFile() { close(); }

void WeightsFile::close() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

bool WeightsFile::open(const ProgramInfo &program, const std::string &path,
                       std::string &error) {
  close();
  path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open weight file '" + path + "'";
    return false;
  }
  fd_ = fd;
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    error = "weight file '" + path + "' is not a regular file";
    close();
    return false;
  }
  int64_t size = int64_t(info.st_size);
  uint8_t trailer[kWeightsTrailerBytes];
  int64_t regions = weightFileBytes(program);
  if (size != regions + int64_t(sizeof trailer))
    regions = program.weightBytes + lowMasterBytes(program);
  bool hasTrailer = size == regions + int64_t(sizeof trailer);
  if ((hasTrailer &&
       !readAt(fd, trailer, sizeof trailer, regions, path, error)) ||
      !checkWeightsTrailer(program, path, size, hasTrailer ? trailer : nullptr,
                           error)) {
    close();
    return false;
  }
  // The kernel reads ahead further for a file read front to back once.
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  return true;
}

//===----------------------------------------------------------------------===//
// Streaming
//===----------------------------------------------------------------------===//

bool loadRegion(Context &ctx, const WeightsFile &file, int64_t regionBytes,
                void *device, std::string &error, int64_t fileOffset) {
  size_t total = size_t(regionBytes), chunk = weightChunkBytes();
  auto *region = static_cast<uint8_t *>(device);
  if (auto *direct = static_cast<uint8_t *>(hostAddressOf(ctx, device));
      direct && !forceStaging()) {
    for (size_t offset = 0; offset < total; offset += chunk)
      if (!readAt(file.fd(), direct + offset, std::min(chunk, total - offset),
                  fileOffset + int64_t(offset), file.path(), error))
        return false;
    return contextOk(ctx, error);
  }
  Staging *staging = createStaging(
      ctx, std::min(chunk, std::max<size_t>(total, 1)), kStagingSlots);
  if (!staging)
    return contextOk(ctx, error);
  bool ok = true;
  for (size_t offset = 0, k = 0; ok && offset < total; offset += chunk, ++k) {
    size_t bytes = std::min(chunk, total - offset);
    int slot = int(k % kStagingSlots);
    // Waits for the copy queued from this slot two chunks ago; the other
    // slot's copy runs while this chunk is read.
    uint8_t *buffer = stagingSlot(ctx, *staging, slot);
    ok = buffer && readAt(file.fd(), buffer, bytes,
                          fileOffset + int64_t(offset), file.path(), error);
    if (ok)
      stagingToDevice(ctx, *staging, slot, region + offset, bytes);
  }
  destroyStaging(ctx, staging);
  return ok && contextOk(ctx, error);
}

bool readWeightFile(const WeightsFile &file, int64_t offset, void *dst,
                    size_t bytes, std::string &error) {
  return readAt(file.fd(), static_cast<uint8_t *>(dst), bytes, offset,
                file.path(), error);
}

bool saveRegion(Context &ctx, const ProgramInfo &program, const void *device,
                const std::string &path, bool withTrailer, std::string &error,
                const uint8_t *hostState) {
  std::string temporary = path + ".tmp";
  int fd =
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = "cannot write '" + temporary + "': " + systemError();
    return false;
  }
  size_t total = size_t(program.weightBytes), chunk = weightChunkBytes();
  const auto *region = static_cast<const uint8_t *>(device);
  bool ok = true;
  if (auto *direct = static_cast<const uint8_t *>(
          hostAddressOf(ctx, const_cast<void *>(device)));
      direct && !forceStaging()) {
    synchronize(ctx);
    ok = contextOk(ctx, error);
    for (size_t offset = 0; ok && offset < total; offset += chunk)
      ok = writeAll(fd, direct + offset, std::min(chunk, total - offset),
                    temporary, error);
  } else if (Staging *staging =
                 createStaging(ctx, std::min(chunk, std::max<size_t>(total, 1)),
                               kStagingSlots)) {
    // Chunk k + 2 is copied into slot k % 2 once chunk k is written out, so
    // one copy from the device always runs while the host writes.
    size_t chunks = (total + chunk - 1) / chunk;
    auto queue = [&](size_t k) {
      if (k < chunks)
        stagingFromDevice(ctx, *staging, int(k % kStagingSlots),
                          region + k * chunk,
                          std::min(chunk, total - k * chunk));
    };
    for (size_t k = 0; k < size_t(kStagingSlots); ++k)
      queue(k);
    for (size_t k = 0; ok && k < chunks; ++k) {
      uint8_t *buffer = stagingSlot(ctx, *staging, int(k % kStagingSlots));
      ok = buffer && writeAll(fd, buffer, std::min(chunk, total - k * chunk),
                              temporary, error);
      if (ok)
        queue(k + kStagingSlots);
    }
    destroyStaging(ctx, staging);
    ok = ok && contextOk(ctx, error);
  } else {
    ok = contextOk(ctx, error);
  }
  // The low working parameters' f32 masters (the host's; the device holds
  // their rounding).
  int64_t fileBytes = program.weightBytes;
  for (int h = 0; ok && h < program.numHostWeights; ++h)
    if (lowParameterOf(program, h) >= 0) {
      const TensorInfo &info = program.hostWeights[h];
      if (!hostState) {
        error = std::string("cannot save the master of '") + info.name +
                "': no host state region";
        ok = false;
        break;
      }
      ok = writeAll(fd, hostState + info.offset, tensorBytes(info), temporary,
                    error);
      fileBytes += int64_t(tensorBytes(info));
    }
  if (ok && withTrailer) {
    std::string trailer =
        weightsTrailer(programFingerprint(program), fileBytes);
    ok = writeAll(fd, reinterpret_cast<const uint8_t *>(trailer.data()),
                  trailer.size(), temporary, error);
  }
  if (::close(fd) != 0 && ok) {
    error = "cannot write '" + temporary + "': " + systemError();
    ok = false;
  }
  if (ok && std::rename(temporary.c_str(), path.c_str()) != 0) {
    error = "cannot rename '" + temporary + "' to '" + path + "'";
    ok = false;
  }
  if (!ok)
    std::remove(temporary.c_str());
  return ok;
}

void fillRandomWeights(Context &ctx, const ProgramInfo &program, uint64_t seed,
                       void *device) {
  auto *region = static_cast<uint8_t *>(device);
  zeroDevice(ctx, region, size_t(program.weightBytes));
  for (int w = 0; w < program.numWeights; ++w) {
    const TensorInfo &info = program.weights[w];
    uint8_t *dst = region + info.offset;
    if (info.initData) {
      copyToDevice(ctx, dst, info.initData, tensorBytes(info));
      continue;
    }
    if (info.role == WeightRole::OptimizerState ||
        info.role == WeightRole::LearningRate ||
        info.role == WeightRole::StepCount ||
        info.role == WeightRole::GradientAccumulator ||
        info.role == WeightRole::MicroStep ||
        info.role == WeightRole::RandomKey ||
        info.role == WeightRole::LossScale ||
        info.role == WeightRole::LossScaleState)
      continue; // zero, as optimizers start
    if (!isFloatType(info.dtype) && info.dtype != DType::F64)
      continue; // integers and bools stay 0
    double low = 0.5, high = 1.5;
    if (info.rank >= 2) {
      int64_t fanIn = 1;
      for (int i = 1; i < info.rank; ++i)
        fanIn *= info.shape[i];
      double bound = 1.0 / std::sqrt(double(std::max<int64_t>(fanIn, 1)));
      low = -bound;
      high = bound;
    }
    uint64_t stream = splitmix64(seed ^ splitmix64(uint64_t(w) + 1));
    fillRandomUniform(ctx, dst, info.dtype, numElements(info), stream, low,
                      high);
  }
}

} // namespace memopt::rt
