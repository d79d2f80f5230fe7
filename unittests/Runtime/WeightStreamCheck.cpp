//===- WeightStreamCheck.cpp - weight files streamed to a backend ---------===//
//
//   memopt-weight-stream-check-{host,cuda} [--bytes N] [--dir DIR] [--old]
//
// A program with a weight region of about N bytes (default 64 MiB: f32, bf16,
// f16 and f64 parameters, zeroed optimizer state, an embedded i64 constant),
// driven through the C API as an embedder would: --random-weights' fill is
// checked element by element (sampled) against WeightStream.h's generator,
// the region is saved, loaded back cold (the file's cached pages dropped),
// warm, in odd-sized chunks and with load_weights, each compared with the
// original byte for byte; wrong files (truncated, a foreign trailer) are
// refused at once. Prints the load times ('[load] weights: ...', GB/s) and,
// with --old, the time of the whole-file read and single copy the driver
// did before issue 25. ctest runs the host build on a small region in
// chunks; scripts/gpu_check.sh runs the CUDA build on a GiB-sized one. Prints
// "WEIGHT STREAM CHECK PASSED" or exits non-zero.
//
//===----------------------------------------------------------------------===//

#include "WeightStream.h"
#include "memopt/Runtime/Program.h"
#include "memopt/Runtime/Runtime.h"
#include "memopt/Runtime/memopt_c_api.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>
#include <vector>

using namespace memopt::rt;

namespace {

int failures = 0;

void expect(bool ok, const std::string &what) {
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what.c_str());
  std::fflush(stdout);
  failures += ok ? 0 : 1;
}

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const int64_t kTable[4] = {1, 2, 3, -4};
std::vector<TensorInfo> weights;
ProgramInfo program;

void run(Context &, uint8_t *, const uint8_t *, void *const *, void *const *) {}

TensorInfo weight(const char *name, DType dtype, std::vector<int64_t> shape,
                  int64_t &offset, WeightRole role,
                  const void *init = nullptr) {
  TensorInfo info{name, dtype, int32_t(shape.size()), {}, offset, init, role};
  int64_t elements = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    info.shape[i] = shape[i];
    elements *= shape[i];
  }
  offset += (elements * int64_t(dtypeSize(dtype)) + 255) / 256 * 256;
  return info;
}

/// About `bytes` of weights: 3/8 f32 rows, 1/8 bf16 rows, 1/2 optimizer
/// state (zero), and small tensors.
void buildProgram(int64_t bytes) {
  int64_t rows = std::max<int64_t>(bytes / 8 / 4096, 1), offset = 0;
  weights = {
      weight("embed", DType::F32, {3 * rows, 1024}, offset,
             WeightRole::Parameter),
      weight("proj", DType::BF16, {rows, 2, 1024}, offset,
             WeightRole::Parameter),
      weight("norm", DType::F16, {1000}, offset, WeightRole::Parameter),
      weight("table", DType::I64, {4}, offset, WeightRole::Constant, kTable),
      weight("embed.m", DType::F32, {4 * rows, 1024}, offset,
             WeightRole::OptimizerState),
      weight("bias", DType::F64, {1001}, offset, WeightRole::Parameter),
  };
  program = ProgramInfo{kProgramAbiVersion,
                        "weight-stream-check",
                        256,
                        offset,
                        0,
                        0,
                        int32_t(weights.size()),
                        nullptr,
                        nullptr,
                        weights.data(),
                        run,
                        /*isTraining=*/0,
                        /*accumulationSteps=*/0,
                        /*dataParallelSize=*/0,
                        /*shardMode=*/0,
                        /*shardOf=*/nullptr};
}

/// Element i of float weight w as the host computes --random-weights 7.
double expected(int w, int64_t i) {
  const TensorInfo &info = weights[size_t(w)];
  double low = 0.5, high = 1.5;
  if (info.rank >= 2) {
    int64_t fanIn = 1;
    for (int d = 1; d < info.rank; ++d)
      fanIn *= info.shape[d];
    low = -1.0 / std::sqrt(double(fanIn));
    high = -low;
  }
  double v = randomWeightValue(splitmix64(7 ^ splitmix64(uint64_t(w) + 1)),
                               uint64_t(i), low, high);
  std::vector<uint8_t> one(8);
  storeFromDouble(one.data(), info.dtype, 0, v);
  return loadAsDouble(one.data(), info.dtype, 0);
}

/// The random fill, sampled: the first and last 4096 elements of each float
/// weight and every 61st in between; the constant; zeroed state.
void checkRandomFill(const std::vector<uint8_t> &region) {
  int64_t checked = 0, wrong = 0;
  for (int w = 0; w < int(weights.size()); ++w) {
    const TensorInfo &info = weights[size_t(w)];
    const uint8_t *data = region.data() + info.offset;
    int64_t n = numElements(info);
    if (info.role == WeightRole::Parameter) {
      for (int64_t i = 0; i < n; i += (i < 4096 || i >= n - 4096) ? 1 : 61) {
        ++checked;
        wrong += loadAsDouble(data, info.dtype, i) != expected(w, i);
      }
    } else if (info.initData) {
      wrong += std::memcmp(data, info.initData, sizeof kTable) != 0;
    } else {
      for (int64_t i = 0; i < n; i += 7)
        wrong += loadAsDouble(data, info.dtype, i) != 0;
    }
  }
  expect(wrong == 0, "random fill: " + std::to_string(checked) +
                         " sampled values equal the generator's, embedded "
                         "constant copied, optimizer state zero (" +
                         std::to_string(wrong) + " wrong)");
}

std::vector<uint8_t> readRegion(memopt_model *model) {
  std::vector<uint8_t> region(memopt_model_weight_bytes(model));
  if (memopt_model_read_weights(model, region.data()) != 0)
    expect(false, std::string("read_weights: ") + memopt_model_error(model));
  return region;
}

memopt_model *create(const char *path, const std::string &what) {
  char error[512] = {};
  double start = now();
  memopt_model *model = memopt_model_create(path, 7, error, sizeof error);
  double seconds = now() - start;
  int64_t bytes = program.weightBytes;
  char line[256];
  std::snprintf(line, sizeof line, "%s: %lld bytes in %.3f s (%.2f GB/s)",
                what.c_str(), (long long)bytes, seconds,
                double(bytes) / seconds / 1e9);
  expect(model != nullptr, model ? line : what + ": " + error);
  return model;
}

/// Drops the file's cached pages, so the next read comes from the disk.
void dropCache(const std::string &path) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return;
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
}

/// What Model::init did before issue 25: the whole file into a host vector
/// through istreambuf_iterator, then one copy to the device.
void oldLoad(const std::string &path) {
  double start = now();
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> region((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
  double read = now() - start;
  Context *ctx = createContext();
  void *device = deviceAlloc(*ctx, region.size(), "old");
  double copyStart = now();
  copyToDevice(*ctx, device, region.data(), size_t(program.weightBytes));
  synchronize(*ctx);
  double copy = now() - copyStart, total = now() - start;
  char line[256];
  std::snprintf(line, sizeof line,
                "old whole-file load: %.3f s (%.2f GB/s; read %.3f s, "
                "copy %.3f s), host copy %zu bytes",
                total, double(program.weightBytes) / total / 1e9, read, copy,
                region.size());
  expect(contextError(*ctx) == nullptr, line);
  deviceFree(*ctx, device);
  destroyContext(ctx);
}

void refused(const std::string &path, const std::string &message) {
  char error[512] = {};
  double start = now();
  memopt_model *model =
      memopt_model_create(path.c_str(), 0, error, sizeof error);
  double seconds = now() - start;
  expect(!model && std::string(error).find(message) != std::string::npos &&
             seconds < 0.5,
         "refused in " + std::to_string(seconds) + " s: " + error);
  if (model)
    memopt_model_destroy(model);
}

} // namespace

extern "C" const ProgramInfo *memopt_program(void) { return &program; }

int main(int argc, char **argv) {
  int64_t bytes = int64_t(64) << 20;
  std::string dir = "/tmp";
  bool old = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--bytes" && i + 1 < argc)
      bytes = std::strtoll(argv[++i], nullptr, 10);
    else if (arg == "--dir" && i + 1 < argc)
      dir = argv[++i];
    else if (arg == "--old")
      old = true;
    else {
      std::fprintf(stderr, "usage: %s [--bytes N] [--dir DIR] [--old]\n",
                   argv[0]);
      return 2;
    }
  }
  buildProgram(bytes);
  std::string path = dir + "/weight-stream-check." + std::to_string(getpid());
  std::printf("backend %s, weight region %lld bytes, chunk %s\n", backendName(),
              (long long)program.weightBytes,
              std::getenv("MEMOPT_WEIGHT_CHUNK_BYTES")
                  ? std::getenv("MEMOPT_WEIGHT_CHUNK_BYTES")
                  : "64 MiB");

  memopt_model *model = create(nullptr, "random fill on the device");
  if (!model)
    return 1;
  std::vector<uint8_t> original = readRegion(model);
  checkRandomFill(original);
  double start = now();
  int saved = memopt_model_save_weights(model, path.c_str());
  double seconds = now() - start;
  expect(saved == 0, "save_weights (streamed): " + std::to_string(seconds) +
                         " s, " +
                         std::to_string(double(bytes) / seconds / 1e9) +
                         " GB/s " + (saved ? memopt_model_error(model) : ""));
  memopt_model_destroy(model);

  dropCache(path);
  for (const char *what : {"load, cold (pages dropped)", "load, warm"}) {
    model = create(path.c_str(), what);
    if (model) {
      expect(readRegion(model) == original, "loaded region equals the saved");
      memopt_model_destroy(model);
    }
  }
  setenv("MEMOPT_WEIGHT_CHUNK_BYTES", "1000003", 1);
  model = create(path.c_str(), "load in 1000003-byte chunks");
  if (model) {
    expect(readRegion(model) == original, "loaded region equals the saved");
    std::vector<uint8_t> zeros(original.size(), 0);
    memopt_model_write_weights(model, zeros.data());
    expect(memopt_model_load_weights(model, path.c_str()) == 0 &&
               readRegion(model) == original,
           "load_weights in chunks restores the region");
    memopt_model_destroy(model);
  }
  unsetenv("MEMOPT_WEIGHT_CHUNK_BYTES");
  if (old)
    oldLoad(path);

  // Wrong files cost no streaming: sparse files of the wrong size, or of
  // the right one with a foreign trailer.
  std::string bad = path + ".bad";
  int fd = open(bad.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  expect(fd >= 0 && ftruncate(fd, program.weightBytes + 23) == 0,
         "sparse truncated file");
  close(fd);
  refused(bad, "bytes; the program's weight region has");
  fd = open(bad.c_str(), O_WRONLY);
  expect(fd >= 0 && ftruncate(fd, program.weightBytes + 24) == 0 &&
             pwrite(fd, "MEMOPTWT", 8, program.weightBytes) == 8,
         "sparse file with a foreign trailer");
  close(fd);
  refused(bad, "does not end in a memopt weight trailer");
  std::remove(bad.c_str());
  std::remove(path.c_str());

  std::printf(failures ? "WEIGHT STREAM CHECK FAILED (%d)\n"
                       : "WEIGHT STREAM CHECK PASSED\n",
              failures);
  return failures ? 1 : 0;
}
