//===- DriverTest.cpp - .npy I/O, random weights and the executable -------===//
//
// The executable tests run the example program (ExampleProgram.cpp linked
// with the runtime main and the host backend) as a child process, with .npy
// files written here, and compare its output with a reference computed here.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"
#include "TestUtil.h"
#include "WeightStream.h"
#include "memopt/Runtime/Npy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

using namespace memopt::rt;

namespace {

TEST(Npy, RoundTripsEveryDType) {
  for (DType dtype : {DType::F32, DType::F16, DType::F64, DType::I64,
                      DType::I32, DType::I8, DType::U8, DType::Bool}) {
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{}, {5}, {2, 3, 4}, {1, 0, 3}}) {
      NpyArray array;
      array.dtype = dtype;
      array.shape = shape;
      array.data.resize(size_t(array.numElements()) * dtypeSize(dtype));
      for (size_t i = 0; i < array.data.size(); ++i)
        array.data[i] = uint8_t(i * 7 + 1);
      std::vector<uint8_t> bytes = serializeNpy(array);
      // The data starts 64-byte aligned, as NumPy writes it.
      size_t headerLen = bytes[8] | size_t(bytes[9]) << 8;
      EXPECT_EQ((10 + headerLen) % 64, 0u);
      NpyArray parsed;
      std::string error;
      ASSERT_TRUE(parseNpy(bytes, parsed, error)) << error;
      EXPECT_EQ(parsed.dtype, dtype);
      EXPECT_EQ(parsed.shape, shape);
      EXPECT_EQ(parsed.data, array.data);
    }
  }
}

std::vector<uint8_t> handMade(int version, const std::string &header,
                              size_t dataBytes) {
  std::vector<uint8_t> bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', uint8_t(version),
                                0};
  bytes.push_back(uint8_t(header.size()));
  bytes.push_back(uint8_t(header.size() >> 8));
  if (version >= 2) {
    bytes.push_back(0);
    bytes.push_back(0);
  }
  bytes.insert(bytes.end(), header.begin(), header.end());
  for (size_t i = 0; i < dataBytes; ++i)
    bytes.push_back(uint8_t(i));
  return bytes;
}

TEST(Npy, ParsesVersion2AndNumpyStyleHeaders) {
  NpyArray array;
  std::string error;
  ASSERT_TRUE(parseNpy(handMade(2,
                                "{'descr': '<i8', 'fortran_order': False, "
                                "'shape': (3, 2), }      \n",
                                48),
                       array, error))
      << error;
  EXPECT_EQ(array.dtype, DType::I64);
  EXPECT_EQ(array.shape, (std::vector<int64_t>{3, 2}));
  ASSERT_TRUE(parseNpy(handMade(1,
                                "{'descr': '|b1', 'fortran_order': False, "
                                "'shape': (7,), }\n",
                                7),
                       array, error));
  EXPECT_EQ(array.dtype, DType::Bool);
  EXPECT_EQ(array.shape, (std::vector<int64_t>{7}));
}

TEST(Npy, RejectsWhatItCannotRead) {
  NpyArray array;
  std::string error;
  EXPECT_FALSE(parseNpy({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, array, error));
  EXPECT_NE(error.find("magic"), std::string::npos);
  EXPECT_FALSE(parseNpy(handMade(1,
                                 "{'descr': '>f4', 'fortran_order': False, "
                                 "'shape': (2,), }\n",
                                 8),
                        array, error));
  EXPECT_NE(error.find(">f4"), std::string::npos);
  EXPECT_FALSE(parseNpy(handMade(1,
                                 "{'descr': '<f4', 'fortran_order': True, "
                                 "'shape': (2, 2), }\n",
                                 16),
                        array, error));
  EXPECT_NE(error.find("Fortran"), std::string::npos);
  EXPECT_FALSE(parseNpy(handMade(1,
                                 "{'descr': '<f4', 'fortran_order': False, "
                                 "'shape': (4,), }\n",
                                 15),
                        array, error));
  EXPECT_NE(error.find("truncated"), std::string::npos);
  // Two dimensions whose product overflows int64 before a zero one (no
  // bytes at all): found by fuzz-runtime-files, numElements() overflowed.
  EXPECT_FALSE(parseNpy(handMade(1,
                                 "{'descr': '|i1', 'fortran_order': False, "
                                 "'shape': (1136639886336, 8888888, 0), }\n",
                                 0),
                        array, error));
  EXPECT_NE(error.find("element count overflows"), std::string::npos);
}

TensorInfo weightInfo(const char *name, DType dtype, std::vector<int64_t> shape,
                      int64_t offset, const void *init = nullptr) {
  TensorInfo info{name, dtype, int32_t(shape.size()), {}, offset, init};
  for (size_t i = 0; i < shape.size(); ++i)
    info.shape[i] = shape[i];
  return info;
}

TEST(RandomWeights, DeterministicScaledAndRespectsEmbeddedConstants) {
  int64_t shapeConstant[2] = {7, -1};
  TensorInfo weights[] = {
      weightInfo("w", DType::F32, {64, 16, 3, 3}, 0),
      weightInfo("b", DType::F16, {64}, 64 * 16 * 9 * 4),
      weightInfo("shape", DType::I64, {2}, 64 * 16 * 9 * 4 + 128,
                 shapeConstant),
      weightInfo("w.momentum", DType::F32, {2, 2}, 64 * 16 * 9 * 4 + 160),
  };
  weights[3].role = WeightRole::OptimizerState;
  ProgramInfo program{kProgramAbiVersion,
                      "w",
                      0,
                      64 * 16 * 9 * 4 + 176,
                      0,
                      0,
                      4,
                      nullptr,
                      nullptr,
                      weights,
                      nullptr};
  // The host backend's device memory is host memory: the fill is read back
  // with plain copies.
  Context *ctx = createContext();
  void *device = deviceAlloc(*ctx, size_t(program.weightBytes), "weights");
  auto fill = [&](uint64_t seed) {
    std::memset(device, 0xab, size_t(program.weightBytes)); // not zero
    fillRandomWeights(*ctx, program, seed, device);
    synchronize(*ctx);
    const auto *bytes = static_cast<const uint8_t *>(device);
    return std::vector<uint8_t>(bytes, bytes + program.weightBytes);
  };
  std::vector<uint8_t> a = fill(1), b = fill(1), c = fill(2);
  ASSERT_EQ(contextError(*ctx), nullptr);
  deviceFree(*ctx, device);
  destroyContext(ctx);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  const float *w = reinterpret_cast<const float *>(a.data());
  double bound = 1 / std::sqrt(16.0 * 9), sum = 0, maxAbs = 0;
  for (int i = 0; i < 64 * 16 * 9; ++i) {
    sum += w[i];
    maxAbs = std::max(maxAbs, double(std::fabs(w[i])));
  }
  EXPECT_LE(maxAbs, bound);
  EXPECT_GT(maxAbs, bound * 0.9); // actually spans the range
  EXPECT_LT(std::fabs(sum / (64 * 16 * 9)), bound * 0.1);
  for (int i = 0; i < 64; ++i) {
    uint16_t h;
    std::memcpy(&h, a.data() + 64 * 16 * 9 * 4 + i * 2, 2);
    float v = test::decodeHalf(h);
    EXPECT_GE(v, 0.5f);
    EXPECT_LT(v, 1.5f);
  }
  EXPECT_EQ(std::memcmp(a.data() + 64 * 16 * 9 * 4 + 128, shapeConstant, 16),
            0);
  // The padding after the constant and the optimizer state are zero.
  for (int i = 64 * 16 * 9 * 4 + 144; i < 64 * 16 * 9 * 4 + 176; ++i)
    EXPECT_EQ(a[size_t(i)], 0) << i;
  // Element i is WeightStream.h's value rounded to the dtype: what the CUDA
  // kernel computes from the same header (scripts/gpu_check.sh compares).
  uint64_t stream = splitmix64(1 ^ splitmix64(1));
  for (int i : {0, 1, 577, 64 * 16 * 9 - 1})
    EXPECT_EQ(w[i],
              float(randomWeightValue(stream, uint64_t(i), -bound, bound)))
        << i;
}

//===----------------------------------------------------------------------===//
// The executable
//===----------------------------------------------------------------------===//

class Executable : public ::testing::Test {
protected:
  void SetUp() override {
    char pattern[] = "/tmp/memopt-runtime-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir = pattern;
  }
  void TearDown() override {
    std::string command = "rm -rf '" + dir + "'";
    EXPECT_EQ(std::system(command.c_str()), 0);
  }
  /// Runs the example model (with `environment`, "NAME=VALUE ...", set);
  /// returns the exit status, stdout and stderr in `log`.
  int runModel(const std::string &args, std::string &log,
               const std::string &environment = "") {
    std::string logPath = dir + "/log.txt";
    std::string command = environment + " " +
                          std::string(MEMOPT_EXAMPLE_MODEL) + " " + args +
                          " > '" + logPath + "' 2>&1";
    int status = std::system(command.c_str());
    std::ifstream in(logPath);
    log.assign(std::istreambuf_iterator<char>(in),
               std::istreambuf_iterator<char>());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  void writeArray(const std::string &name, DType dtype,
                  std::vector<int64_t> shape, const std::vector<float> &v) {
    NpyArray array;
    array.dtype = dtype;
    array.shape = shape;
    array.data.resize(v.size() * 4);
    std::memcpy(array.data.data(), v.data(), array.data.size());
    std::string error;
    ASSERT_TRUE(writeNpy(dir + "/" + name, array, error)) << error;
  }
  std::string dir;
};

std::vector<float> randomValues(size_t n, unsigned seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.1f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = (rng() & 1 ? 1 : -1) * dist(rng) * scale;
  return v;
}

/// The example CNN, computed directly.
std::vector<double> referenceExample(const std::vector<float> &image,
                                     const std::vector<float> &weights) {
  const float *w1 = weights.data(), *b1 = weights.data() + 112;
  const float *w2 = weights.data() + 128, *b2 = weights.data() + 160;
  std::vector<double> probs;
  for (int n = 0; n < 2; ++n) {
    double features[4];
    for (int m = 0; m < 4; ++m) {
      double conv[8][8];
      for (int y = 0; y < 8; ++y)
        for (int x = 0; x < 8; ++x) {
          double acc = b1[m];
          for (int c = 0; c < 3; ++c)
            for (int ky = 0; ky < 3; ++ky)
              for (int kx = 0; kx < 3; ++kx) {
                int iy = y + ky - 1, ix = x + kx - 1;
                if (iy >= 0 && iy < 8 && ix >= 0 && ix < 8)
                  acc += image[((n * 3 + c) * 8 + iy) * 8 + ix] *
                         w1[((m * 3 + c) * 3 + ky) * 3 + kx];
              }
          conv[y][x] = std::max(acc, 0.0);
        }
      double mean = 0;
      for (int y = 0; y < 4; ++y)
        for (int x = 0; x < 4; ++x)
          mean +=
              std::max({conv[2 * y][2 * x], conv[2 * y][2 * x + 1],
                        conv[2 * y + 1][2 * x], conv[2 * y + 1][2 * x + 1]}) /
              16;
      features[m] = mean;
    }
    double logits[5], total = 0;
    for (int j = 0; j < 5; ++j) {
      logits[j] = b2[j];
      for (int k = 0; k < 4; ++k)
        logits[j] += features[k] * w2[k * 5 + j];
      total += std::exp(logits[j]);
    }
    for (int j = 0; j < 5; ++j)
      probs.push_back(std::exp(logits[j]) / total);
  }
  return probs;
}

TEST_F(Executable, RunsTheExampleProgramEndToEnd) {
  std::vector<float> image = randomValues(2 * 3 * 8 * 8, 1, 1.0f);
  writeArray("image.npy", DType::F32, {2, 3, 8, 8}, image);
  // Weight region image: w1 @0, b1 @448, w2 @512, b2 @640, 704 bytes.
  std::vector<float> weights(176, 0.0f);
  std::vector<float> w1 = randomValues(108, 2, 0.5f),
                     b1 = randomValues(4, 3, 0.2f);
  std::vector<float> w2 = randomValues(20, 4, 2.0f),
                     b2 = randomValues(5, 5, 0.5f);
  std::copy(w1.begin(), w1.end(), weights.begin());
  std::copy(b1.begin(), b1.end(), weights.begin() + 112);
  std::copy(w2.begin(), w2.end(), weights.begin() + 128);
  std::copy(b2.begin(), b2.end(), weights.begin() + 160);
  {
    std::ofstream out(dir + "/weights.bin", std::ios::binary);
    out.write(reinterpret_cast<const char *>(weights.data()), 704);
  }
  std::string log;
  ASSERT_EQ(runModel("--input image=" + dir + "/image.npy --weights " + dir +
                         "/weights.bin --output-dir " + dir,
                     log),
            0)
      << log;
  NpyArray probs;
  std::string error;
  ASSERT_TRUE(readNpy(dir + "/probs.npy", probs, error)) << error;
  ASSERT_EQ(probs.dtype, DType::F32);
  ASSERT_EQ(probs.shape, (std::vector<int64_t>{2, 5}));
  std::vector<double> expected = referenceExample(image, weights);
  const float *got = reinterpret_cast<const float *>(probs.data.data());
  for (int i = 0; i < 10; ++i)
    EXPECT_NEAR(got[i], expected[size_t(i)], 1e-5) << i;
  // Not a degenerate answer: the classes differ.
  EXPECT_GT(std::fabs(expected[0] - expected[1]), 1e-4);
}

// The weight file streamed in chunks smaller than the region (the last one
// partial), into the region or through the staging slots the CUDA backend
// uses, gives the outputs of a one-chunk load; --verbose reports the load.
TEST_F(Executable, ChunkedWeightLoadMatchesOneChunk) {
  writeArray("image.npy", DType::F32, {2, 3, 8, 8},
             randomValues(384, 12, 1.0f));
  std::vector<float> weights = randomValues(176, 13, 0.5f);
  {
    std::ofstream out(dir + "/weights.bin", std::ios::binary);
    out.write(reinterpret_cast<const char *>(weights.data()), 704);
  }
  std::string log, outputs[4];
  const char *environments[] = {
      "", "MEMOPT_WEIGHT_CHUNK_BYTES=100",
      "MEMOPT_WEIGHT_CHUNK_BYTES=100 MEMOPT_WEIGHT_STAGING=1",
      "MEMOPT_WEIGHT_CHUNK_BYTES=7 MEMOPT_WEIGHT_STAGING=1"};
  for (int run = 0; run < 4; ++run) {
    std::string sub = dir + "/chunks" + std::to_string(run);
    ASSERT_EQ(mkdir(sub.c_str(), 0755), 0);
    ASSERT_EQ(runModel("--input image=" + dir + "/image.npy --weights " + dir +
                           "/weights.bin --verbose --output-dir " + sub,
                       log, environments[run]),
              0)
        << log;
    // Without a chunk size or staging asked for, the host backend maps the
    // file as its region instead of reading it.
    EXPECT_NE(log.find("[load] weights: 704 bytes from file '" + dir +
                       "/weights.bin'" + (run == 0 ? " (mapped)" : "") +
                       " in "),
              std::string::npos)
        << log;
    std::ifstream in(sub + "/probs.npy", std::ios::binary);
    outputs[run].assign(std::istreambuf_iterator<char>(in),
                        std::istreambuf_iterator<char>());
    EXPECT_FALSE(outputs[run].empty());
    EXPECT_EQ(outputs[run], outputs[0]) << environments[run];
  }
  ASSERT_EQ(
      runModel("--input image=" + dir +
                   "/image.npy --random-weights 3 --verbose --output-dir " +
                   dir,
               log, "MEMOPT_WEIGHT_STAGING=1"),
      0)
      << log;
  EXPECT_NE(log.find("[load] weights: 704 bytes from random (seed 3, filled "
                     "on the device) in "),
            std::string::npos)
      << log;
  // A truncated file is refused with the same message, chunked or not.
  {
    std::ofstream out(dir + "/cut.bin", std::ios::binary);
    out.write(reinterpret_cast<const char *>(weights.data()), 700);
  }
  EXPECT_EQ(runModel("--input image=" + dir + "/image.npy --weights " + dir +
                         "/cut.bin --output-dir " + dir,
                     log, environments[3]),
            1);
  EXPECT_NE(log.find("weight file '" + dir +
                     "/cut.bin' has 700 bytes; the program's weight region "
                     "has 704 (+24 bytes of trailer): it is truncated or "
                     "belongs to another model"),
            std::string::npos)
      << log;
}

// WeightStreamCheck.cpp on the host backend: a 3 MB region through the C API
// in 256 KiB chunks (odd-sized ones too), through the staging slots.
TEST_F(Executable, WeightStreamCheckPasses) {
  std::string log = dir + "/stream.txt";
  std::string command =
      "MEMOPT_WEIGHT_CHUNK_BYTES=262144 MEMOPT_WEIGHT_STAGING=1 " +
      std::string(MEMOPT_WEIGHT_STREAM_CHECK) +
      " --bytes 3000000 --old --dir '" + dir + "' > '" + log + "' 2>&1";
  int status = std::system(command.c_str());
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  EXPECT_EQ(status, 0) << text;
  EXPECT_NE(text.find("WEIGHT STREAM CHECK PASSED"), std::string::npos) << text;
}

TEST_F(Executable, BenchPrintsLatencyAndMemory) {
  writeArray("image.npy", DType::F32, {2, 3, 8, 8}, randomValues(384, 6, 1.0f));
  std::string log;
  ASSERT_EQ(runModel("--input image=" + dir +
                         "/image.npy --random-weights 3 --bench 5",
                     log),
            0)
      << log;
  EXPECT_NE(log.find("bench: backend=host runs=5 median_ms="),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("arena_bytes=1052672 weight_bytes=704"), std::string::npos)
      << log;
}

TEST_F(Executable, BenchRunsDoNotChangeTheOutputs) {
  // The input lives in the arena and the pool output overwrites it, so every
  // run must start from a fresh copy of the input.
  writeArray("image.npy", DType::F32, {2, 3, 8, 8},
             randomValues(384, 10, 1.0f));
  std::string log, outputs[2];
  for (int run = 0; run < 2; ++run) {
    std::string sub = dir + "/bench" + std::to_string(run);
    ASSERT_EQ(mkdir(sub.c_str(), 0755), 0);
    ASSERT_EQ(runModel("--input image=" + dir +
                           "/image.npy --random-weights 5 --output-dir " + sub +
                           (run ? " --bench 4" : ""),
                       log),
              0)
        << log;
    std::ifstream in(sub + "/probs.npy", std::ios::binary);
    outputs[run].assign(std::istreambuf_iterator<char>(in),
                        std::istreambuf_iterator<char>());
  }
  EXPECT_FALSE(outputs[0].empty());
  EXPECT_EQ(outputs[0], outputs[1]);
}

TEST_F(Executable, RandomWeightsAreDeterministic) {
  writeArray("image.npy", DType::F32, {2, 3, 8, 8}, randomValues(384, 7, 1.0f));
  std::string log, outputs[3];
  for (int run = 0; run < 3; ++run) {
    std::string sub = dir + "/out" + std::to_string(run);
    ASSERT_EQ(mkdir(sub.c_str(), 0755), 0);
    ASSERT_EQ(runModel("--input image=" + dir + "/image.npy --random-weights " +
                           (run < 2 ? "11" : "12") + " --output-dir " + sub,
                       log),
              0)
        << log;
    std::ifstream in(sub + "/probs.npy", std::ios::binary);
    outputs[run].assign(std::istreambuf_iterator<char>(in),
                        std::istreambuf_iterator<char>());
  }
  EXPECT_FALSE(outputs[0].empty());
  EXPECT_EQ(outputs[0], outputs[1]);
  EXPECT_NE(outputs[0], outputs[2]);
}

/// The start-up memory check (MemoryCheck.cpp): a device with less free
/// memory than the program's arena, weights and own buffers stops before
/// the first step with how much is missing; with enough it runs.
TEST_F(Executable, StartUpCheckSaysHowMuchMemoryIsMissing) {
  const ProgramInfo &program = *memopt_program();
  int64_t ioBytes = 0;
  int64_t needed = requiredDeviceBytes(program, ioBytes);
  ASSERT_EQ(needed, program.arenaBytes + program.weightBytes + ioBytes);
  writeArray("image.npy", DType::F32, {2, 3, 8, 8}, randomValues(384, 7, 1.0f));
  std::string args = "--input image=" + dir +
                     "/image.npy --random-weights 3 --output-dir " + dir;
  std::string log;
  EXPECT_NE(
      runModel(args, log,
               "MEMOPT_DEVICE_FREE_BYTES=" + std::to_string(needed - 100)),
      0);
  EXPECT_NE(log.find("not enough device memory for program"), std::string::npos)
      << log;
  EXPECT_NE(log.find("it needs "), std::string::npos) << log;
  EXPECT_NE(log.find("(100 bytes) missing"), std::string::npos) << log;
  EXPECT_NE(log.find("memopt-compile --fit " + std::to_string(needed - 100)),
            std::string::npos)
      << log;
  EXPECT_EQ(
      runModel(args, log, "MEMOPT_DEVICE_FREE_BYTES=" + std::to_string(needed)),
      0)
      << log;
  EXPECT_NE(runModel(args, log, "MEMOPT_DEVICE_FREE_BYTES=lots"), 0);
  EXPECT_NE(log.find("MEMOPT_DEVICE_FREE_BYTES='lots' is not a number of "
                     "bytes"),
            std::string::npos)
      << log;
}

TEST_F(Executable, RejectsBadInputsWithClearMessages) {
  writeArray("wrong_shape.npy", DType::F32, {2, 3, 8, 7},
             randomValues(336, 8, 1.0f));
  std::string log;
  EXPECT_EQ(runModel("--input image=" + dir +
                         "/wrong_shape.npy --random-weights 1 --output-dir " +
                         dir,
                     log),
            1);
  EXPECT_NE(log.find("input 'image' has shape [2, 3, 8, 7]; the program "
                     "expects [2, 3, 8, 8]"),
            std::string::npos)
      << log;

  NpyArray ints;
  ints.dtype = DType::I32;
  ints.shape = {2, 3, 8, 8};
  ints.data.assign(384 * 4, 1);
  std::string error;
  ASSERT_TRUE(writeNpy(dir + "/ints.npy", ints, error));
  EXPECT_EQ(runModel("--input image=" + dir +
                         "/ints.npy --random-weights 1 "
                         "--output-dir " +
                         dir,
                     log),
            1);
  EXPECT_NE(log.find("input 'image' has dtype i32; the program expects f32"),
            std::string::npos)
      << log;

  EXPECT_EQ(runModel("--random-weights 1 --output-dir " + dir, log), 1);
  EXPECT_NE(log.find("missing input 'image'"), std::string::npos) << log;

  EXPECT_EQ(
      runModel("--input photo=" + dir + "/ints.npy --output-dir " + dir, log),
      1);
  EXPECT_NE(log.find("unknown input 'photo' (the program has: image)"),
            std::string::npos)
      << log;

  writeArray("image.npy", DType::F32, {2, 3, 8, 8}, randomValues(384, 9, 1.0f));
  EXPECT_EQ(
      runModel("--input image=" + dir + "/image.npy --output-dir " + dir, log),
      1);
  EXPECT_NE(log.find("--random-weights"), std::string::npos) << log;

  {
    std::ofstream out(dir + "/short.bin", std::ios::binary);
    out << "abc";
  }
  EXPECT_EQ(runModel("--input image=" + dir + "/image.npy --weights " + dir +
                         "/short.bin --output-dir " + dir,
                     log),
            1);
  EXPECT_NE(log.find("has 3 bytes; the program's weight region has 704"),
            std::string::npos)
      << log;
}

//===----------------------------------------------------------------------===//
// The training loop (TrainingProgram.cpp: a linear classifier with SGD)
//===----------------------------------------------------------------------===//

class TrainingExecutable : public Executable {
protected:
  int runTrain(const std::string &args, std::string &log,
               const std::string &executable = MEMOPT_EXAMPLE_TRAIN_MODEL,
               const std::string &environment = "") {
    std::string logPath = dir + "/train-log.txt";
    std::string command = environment + " " + executable + " " + args + " > '" +
                          logPath + "' 2>&1";
    int status = std::system(command.c_str());
    std::ifstream in(logPath);
    log.assign(std::istreambuf_iterator<char>(in),
               std::istreambuf_iterator<char>());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  /// `samples` samples of 3 features whose class is the largest feature.
  void writeData(int64_t samples, int64_t nanSample = -1) {
    std::vector<float> x = randomValues(size_t(samples * 3), 21, 1.0f);
    if (nanSample >= 0)
      x[size_t(nanSample * 3 + 1)] = NAN;
    NpyArray labels;
    labels.dtype = DType::I64;
    labels.shape = {samples};
    for (int64_t i = 0; i < samples; ++i) {
      const float *row = x.data() + i * 3;
      int64_t label = int64_t(std::max_element(row, row + 3) - row);
      const uint8_t *bytes = reinterpret_cast<const uint8_t *>(&label);
      labels.data.insert(labels.data.end(), bytes, bytes + 8);
    }
    writeArray("x.npy", DType::F32, {samples, 3}, x);
    std::string error;
    ASSERT_TRUE(writeNpy(dir + "/y.npy", labels, error)) << error;
  }
  std::string dataArgs() {
    return "--input input=" + dir + "/x.npy --input labels=" + dir + "/y.npy ";
  }
  /// The losses printed as "step K loss V", in order.
  static std::vector<std::string> losses(const std::string &log) {
    std::vector<std::string> out;
    std::istringstream lines(log);
    std::string line;
    for (int64_t k = 1; std::getline(lines, line);) {
      std::string prefix = "step " + std::to_string(k) + " loss ";
      if (line.rfind(prefix, 0) == 0) {
        out.push_back(line.substr(prefix.size()));
        ++k;
      }
    }
    return out;
  }
  bool exists(const std::string &path) {
    struct stat info;
    return stat(path.c_str(), &info) == 0;
  }
};

TEST_F(TrainingExecutable, LossDecreasesAndIsLogged) {
  writeData(10); // batches of 4 wrap around the 10 samples
  std::string log;
  ASSERT_EQ(runTrain(dataArgs() + "--steps 40 --random-weights 1 --log " + dir +
                         "/loss.csv",
                     log),
            0)
      << log;
  std::vector<std::string> values = losses(log);
  ASSERT_EQ(values.size(), 40u) << log;
  double first =
      std::stod(values[0]) + std::stod(values[1]) + std::stod(values[2]);
  double last =
      std::stod(values[37]) + std::stod(values[38]) + std::stod(values[39]);
  EXPECT_LT(last, 0.5 * first) << log;
  std::ifstream csv(dir + "/loss.csv");
  std::string header, line;
  std::getline(csv, header);
  EXPECT_EQ(header, "step,loss");
  int rows = 0;
  while (std::getline(csv, line))
    ++rows;
  EXPECT_EQ(rows, 40);
  EXPECT_FALSE(exists(dir + "/loss.csv.tmp"));
}

TEST_F(TrainingExecutable, LearningRateOverride) {
  writeData(4); // one batch: every step sees the same samples
  std::string log;
  ASSERT_EQ(runTrain(dataArgs() + "--steps 3 --random-weights 2 --lr 0", log),
            0)
      << log;
  std::vector<std::string> frozen = losses(log);
  ASSERT_EQ(frozen.size(), 3u) << log;
  EXPECT_EQ(frozen[0], frozen[1]);
  EXPECT_EQ(frozen[1], frozen[2]);
  ASSERT_EQ(
      runTrain(dataArgs() + "--steps 3 --random-weights 2 --lr 0.05", log), 0);
  std::vector<std::string> slow = losses(log);
  ASSERT_EQ(runTrain(dataArgs() + "--steps 3 --random-weights 2", log), 0);
  std::vector<std::string> compiled = losses(log);
  ASSERT_EQ(slow.size(), 3u);
  ASSERT_EQ(compiled.size(), 3u);
  EXPECT_EQ(slow[0], frozen[0]); // the same start
  EXPECT_LT(std::stod(slow[2]), std::stod(frozen[2]));
  EXPECT_LT(std::stod(compiled[2]), std::stod(slow[2])); // lr 0.5 > 0.05
}

TEST_F(TrainingExecutable, NaNLossStopsAndWritesNothing) {
  writeData(8, /*nanSample=*/5); // in the second batch
  std::string log;
  EXPECT_EQ(runTrain(dataArgs() + "--steps 4 --random-weights 1 --log " + dir +
                         "/loss.csv --save-weights " + dir + "/trained.bin",
                     log),
            1);
  EXPECT_NE(log.find("step 1 loss "), std::string::npos) << log;
  EXPECT_NE(log.find("error: loss is NaN at step 2"), std::string::npos) << log;
  EXPECT_EQ(log.find("step 3 loss"), std::string::npos) << log;
  EXPECT_FALSE(exists(dir + "/loss.csv"));
  EXPECT_FALSE(exists(dir + "/loss.csv.tmp"));
  EXPECT_FALSE(exists(dir + "/trained.bin"));
}

TEST_F(TrainingExecutable, RejectsBadLabelsAndOptions) {
  writeData(8);
  std::string log;
  writeArray("float_labels.npy", DType::F32, {8}, std::vector<float>(8, 1.0f));
  EXPECT_EQ(runTrain("--input input=" + dir + "/x.npy --input labels=" + dir +
                         "/float_labels.npy --steps 1 --random-weights 1",
                     log),
            1);
  EXPECT_NE(log.find("input 'labels' has dtype f32; the program expects i64"),
            std::string::npos)
      << log;

  NpyArray column;
  column.dtype = DType::I64;
  column.shape = {8, 1};
  column.data.assign(64, 0);
  NpyArray few = column;
  few.shape = {6};
  few.data.resize(48);
  std::string error;
  ASSERT_TRUE(writeNpy(dir + "/column.npy", column, error));
  ASSERT_TRUE(writeNpy(dir + "/few.npy", few, error));
  EXPECT_EQ(runTrain("--input input=" + dir + "/x.npy --input labels=" + dir +
                         "/column.npy --steps 1 --random-weights 1",
                     log),
            1);
  EXPECT_NE(log.find("input 'labels' has shape [8, 1]; the program expects "
                     "[N] (N samples)"),
            std::string::npos)
      << log;
  EXPECT_EQ(runTrain("--input input=" + dir + "/x.npy --input labels=" + dir +
                         "/few.npy --steps 1 --random-weights 1",
                     log),
            1);
  EXPECT_NE(log.find("inputs hold different sample counts: 'input' 8, "
                     "'labels' 6"),
            std::string::npos)
      << log;
  EXPECT_EQ(
      runTrain(dataArgs() + "--steps 1 --batch-size 8 --random-weights 1", log),
      1);
  EXPECT_NE(log.find("--batch-size 8 does not match the compiled batch size 4"),
            std::string::npos)
      << log;
  EXPECT_EQ(runTrain(dataArgs() + "--random-weights 1", log), 1);
  EXPECT_NE(log.find("needs --steps N"), std::string::npos) << log;
  // Training options on an inference program.
  EXPECT_EQ(runModel("--input image=" + dir + "/x.npy --steps 3", log), 1);
  EXPECT_NE(log.find("this one runs inference"), std::string::npos) << log;
}

TEST_F(TrainingExecutable, SavedWeightsContinueTraining) {
  writeData(4);
  std::string log;
  ASSERT_EQ(runTrain(dataArgs() + "--steps 6 --random-weights 4", log), 0)
      << log;
  std::vector<std::string> straight = losses(log);
  ASSERT_EQ(straight.size(), 6u);
  ASSERT_EQ(runTrain(dataArgs() + "--steps 5 --random-weights 4 " +
                         "--save-weights " + dir + "/trained.weights",
                     log),
            0)
      << log;
  struct stat info;
  ASSERT_EQ(stat((dir + "/trained.weights").c_str(), &info), 0);
  EXPECT_EQ(info.st_size, 144);
  // Weights, momentum buffer and step count come back: the sixth step is the
  // same whether it runs in one process or after a save.
  ASSERT_EQ(
      runTrain(dataArgs() + "--steps 1 --weights " + dir + "/trained.weights",
               log),
      0)
      << log;
  std::vector<std::string> resumed = losses(log);
  ASSERT_EQ(resumed.size(), 1u) << log;
  EXPECT_EQ(resumed[0], straight[5]);
  // Without --weights, OUT.weights next to the executable is loaded.
  std::string copy = "cp '" + std::string(MEMOPT_EXAMPLE_TRAIN_MODEL) + "' '" +
                     dir + "/model' && cp '" + dir + "/trained.weights' '" +
                     dir + "/model.weights'";
  ASSERT_EQ(std::system(copy.c_str()), 0);
  ASSERT_EQ(runTrain(dataArgs() + "--steps 1", log, dir + "/model"), 0) << log;
  resumed = losses(log);
  ASSERT_EQ(resumed.size(), 1u) << log;
  EXPECT_EQ(resumed[0], straight[5]);
}

// --save-weights and --save-state read the region back in chunks (through
// the staging slots with MEMOPT_WEIGHT_STAGING=1): the same files.
TEST_F(TrainingExecutable, SavedWeightsStreamInChunks) {
  writeData(4);
  std::string log, saved[2], state[2];
  for (int run = 0; run < 2; ++run) {
    std::string prefix = dir + "/run" + std::to_string(run);
    ASSERT_EQ(runTrain(dataArgs() + "--steps 3 --random-weights 4 " +
                           "--save-weights " + prefix + ".weights " +
                           "--save-state " + prefix + "-state",
                       log, MEMOPT_EXAMPLE_TRAIN_MODEL,
                       run ? "MEMOPT_WEIGHT_CHUNK_BYTES=40 "
                             "MEMOPT_WEIGHT_STAGING=1"
                           : ""),
              0)
        << log;
    std::ifstream in(prefix + ".weights", std::ios::binary);
    saved[run].assign(std::istreambuf_iterator<char>(in),
                      std::istreambuf_iterator<char>());
    std::ifstream w(prefix + "-state/fc.weight.momentum.npy", std::ios::binary);
    state[run].assign(std::istreambuf_iterator<char>(w),
                      std::istreambuf_iterator<char>());
  }
  EXPECT_EQ(saved[0].size(), 144u);
  EXPECT_EQ(saved[0], saved[1]);
  EXPECT_FALSE(state[0].empty());
  EXPECT_EQ(state[0], state[1]);
  // And it loads back in chunks.
  ASSERT_EQ(runTrain(dataArgs() + "--steps 1 --verbose --weights " + dir +
                         "/run1.weights",
                     log, MEMOPT_EXAMPLE_TRAIN_MODEL,
                     "MEMOPT_WEIGHT_CHUNK_BYTES=40 MEMOPT_WEIGHT_STAGING=1"),
            0)
      << log;
  EXPECT_NE(log.find("[load] weights: 144 bytes from file"), std::string::npos)
      << log;
}

TEST_F(TrainingExecutable, BenchReportsStepTime) {
  writeData(4);
  std::string log;
  ASSERT_EQ(
      runTrain(dataArgs() + "--steps 2 --bench 5 --random-weights 1", log), 0)
      << log;
  EXPECT_EQ(losses(log).size(), 10u) << log; // 2 + 3 warm-up + 5 timed
  EXPECT_NE(log.find("bench: backend=host runs=5 median_ms="),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("memory: arena_bytes=256 weight_bytes=144"),
            std::string::npos)
      << log;
}

} // namespace
