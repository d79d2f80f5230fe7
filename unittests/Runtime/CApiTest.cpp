//===- CApiTest.cpp - the C API over the example program ------------------===//

#include "memopt/Runtime/memopt_c_api.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

TEST(CApi, CreatesRunsAndReportsErrors) {
  char error[256] = {};
  memopt_model *model = memopt_model_create(nullptr, 5, error, sizeof(error));
  ASSERT_NE(model, nullptr) << error;
  ASSERT_EQ(memopt_model_num_inputs(model), 1);
  ASSERT_EQ(memopt_model_num_outputs(model), 1);
  EXPECT_EQ(std::string(memopt_model_tensor_name(model, 0, 0)), "image");
  EXPECT_EQ(std::string(memopt_model_tensor_name(model, 1, 0)), "probs");
  EXPECT_EQ(memopt_model_tensor_bytes(model, 0, 0), 2u * 3 * 8 * 8 * 4);
  EXPECT_EQ(memopt_model_tensor_name(model, 1, 3), nullptr);

  std::vector<float> image(2 * 3 * 8 * 8);
  for (size_t i = 0; i < image.size(); ++i)
    image[i] = std::sin(float(i) * 0.37f) + 0.05f;
  std::vector<float> first(10, -1.0f), second(10, -2.0f);
  const void *inputs[1] = {image.data()};
  void *outputs[1] = {first.data()};
  ASSERT_EQ(memopt_model_run(model, inputs, outputs), 0)
      << memopt_model_error(model);
  outputs[0] = second.data();
  ASSERT_EQ(memopt_model_run(model, inputs, outputs), 0);
  EXPECT_EQ(first, second); // replays give the same answer
  for (int row = 0; row < 2; ++row) {
    float sum = 0;
    for (int j = 0; j < 5; ++j) {
      EXPECT_GT(first[row * 5 + j], 0.0f);
      sum += first[row * 5 + j];
    }
    EXPECT_NEAR(sum, 1.0f, 1e-5f);
  }
  memopt_model_destroy(model);

  EXPECT_EQ(
      memopt_model_create("/nonexistent/weights.bin", 0, error, sizeof(error)),
      nullptr);
  EXPECT_NE(std::string(error).find("cannot open weight file"),
            std::string::npos)
      << error;
}

TEST(CApi, TensorInfoAndRunOnCallerBuffers) {
  char error[256] = {};
  memopt_model *model = memopt_model_create(nullptr, 5, error, sizeof(error));
  ASSERT_NE(model, nullptr) << error;
  EXPECT_EQ(std::string(memopt_model_backend(model)), "host");
  EXPECT_FALSE(memopt_model_is_training(model));
  EXPECT_GT(memopt_model_arena_bytes(model), 0);
  memopt_tensor_info info;
  ASSERT_EQ(memopt_model_tensor_info(model, MEMOPT_TENSOR_INPUT, 0, &info), 0);
  EXPECT_EQ(std::string(info.name), "image");
  EXPECT_EQ(info.dtype, 0); // f32
  ASSERT_EQ(info.rank, 4);
  EXPECT_EQ(std::vector<int64_t>(info.shape, info.shape + 4),
            (std::vector<int64_t>{2, 3, 8, 8}));
  EXPECT_EQ(info.bytes, 2u * 3 * 8 * 8 * 4);
  EXPECT_NE(memopt_model_tensor_info(model, MEMOPT_TENSOR_OUTPUT, 1, &info), 0);
  EXPECT_NE(memopt_model_tensor_info(model, 7, 0, &info), 0);
  ASSERT_GT(memopt_model_num_weights(model), 0);
  ASSERT_EQ(memopt_model_tensor_info(model, MEMOPT_TENSOR_WEIGHT, 0, &info), 0);
  EXPECT_GE(info.offset, 0);

  // run_buffers on the host backend gives what run gives; the caller's input
  // is never written (it is copied into the program's slot).
  std::vector<float> image(2 * 3 * 8 * 8);
  for (size_t i = 0; i < image.size(); ++i)
    image[i] = std::cos(float(i) * 0.21f);
  std::vector<float> kept = image, viaRun(10), viaBuffers(10);
  const void *inputs[1] = {image.data()};
  void *outputs[1] = {viaRun.data()};
  ASSERT_EQ(memopt_model_run(model, inputs, outputs), 0);
  outputs[0] = viaBuffers.data();
  ASSERT_EQ(memopt_model_run_buffers(model, inputs, outputs, nullptr), 0)
      << memopt_model_error(model);
  ASSERT_EQ(memopt_model_synchronize(model), 0);
  EXPECT_EQ(viaRun, viaBuffers);
  EXPECT_EQ(image, kept);

  // Weights: write changes the answer, write back restores it, a saved
  // file loads, a foreign one does not.
  std::vector<uint8_t> region(memopt_model_weight_bytes(model));
  ASSERT_EQ(memopt_model_read_weights(model, region.data()), 0);
  std::string path = ::testing::TempDir() + "capi_test.weights";
  ASSERT_EQ(memopt_model_save_weights(model, path.c_str()), 0);
  std::vector<uint8_t> zeros(region.size(), 0);
  ASSERT_EQ(memopt_model_write_weights(model, zeros.data()), 0);
  std::vector<float> changed(10);
  outputs[0] = changed.data();
  ASSERT_EQ(memopt_model_run(model, inputs, outputs), 0);
  EXPECT_NE(changed, viaRun);
  ASSERT_EQ(memopt_model_load_weights(model, path.c_str()), 0)
      << memopt_model_error(model);
  ASSERT_EQ(memopt_model_run(model, inputs, outputs), 0);
  EXPECT_EQ(changed, viaRun);
  EXPECT_NE(memopt_model_load_weights(model, "/nonexistent.weights"), 0);
  EXPECT_NE(std::string(memopt_model_error(model)).find("/nonexistent.weights"),
            std::string::npos);
  // Not a training program: nothing to save as ONNX.
  EXPECT_NE(memopt_model_save_onnx(model, "t.onnx-template", "out.onnx"), 0);
  EXPECT_NE(std::string(memopt_model_error(model)).find("not a training step"),
            std::string::npos);
  memopt_model_destroy(model);
}

/// Sets MEMOPT_WEIGHT_CHUNK_BYTES and MEMOPT_WEIGHT_STAGING for one scope.
class WeightStreaming {
public:
  WeightStreaming(size_t chunkBytes, bool staging) {
    if (chunkBytes)
      setenv("MEMOPT_WEIGHT_CHUNK_BYTES", std::to_string(chunkBytes).c_str(),
             1);
    if (staging)
      setenv("MEMOPT_WEIGHT_STAGING", "1", 1);
  }
  ~WeightStreaming() {
    unsetenv("MEMOPT_WEIGHT_CHUNK_BYTES");
    unsetenv("MEMOPT_WEIGHT_STAGING");
  }
};

std::vector<char> readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in),
                           std::istreambuf_iterator<char>());
}

void writeFile(const std::string &path, const std::vector<char> &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

std::vector<float> runOnce(memopt_model *model) {
  std::vector<float> image(2 * 3 * 8 * 8), probs(10, -1.0f);
  for (size_t i = 0; i < image.size(); ++i)
    image[i] = std::sin(float(i) * 0.11f);
  const void *inputs[1] = {image.data()};
  void *outputs[1] = {probs.data()};
  EXPECT_EQ(memopt_model_run(model, inputs, outputs), 0)
      << memopt_model_error(model);
  return probs;
}

// A weight file streamed in chunks smaller than the region (the last one
// partial), straight into the region or through the staging slots the CUDA
// backend uses, loads what one chunk loads; saving streams likewise.
TEST(CApi, WeightFilesStreamInChunks) {
  char error[256] = {};
  memopt_model *model = memopt_model_create(nullptr, 9, error, sizeof(error));
  ASSERT_NE(model, nullptr) << error;
  size_t bytes = memopt_model_weight_bytes(model);
  ASSERT_EQ(bytes, 704u);
  std::vector<uint8_t> region(bytes);
  ASSERT_EQ(memopt_model_read_weights(model, region.data()), 0);
  std::vector<float> expected = runOnce(model);
  std::string path = ::testing::TempDir() + "capi_stream.weights";
  ASSERT_EQ(memopt_model_save_weights(model, path.c_str()), 0);
  memopt_model_destroy(model);
  std::vector<char> file = readFile(path);
  ASSERT_EQ(file.size(), bytes + 24);

  for (size_t chunk : {size_t(0), size_t(64), size_t(100), size_t(1)})
    for (bool staging : {false, true}) {
      SCOPED_TRACE("chunk " + std::to_string(chunk) + " staging " +
                   std::to_string(staging));
      WeightStreaming streaming(chunk, staging);
      model = memopt_model_create(path.c_str(), 0, error, sizeof(error));
      ASSERT_NE(model, nullptr) << error;
      std::vector<uint8_t> loaded(bytes);
      ASSERT_EQ(memopt_model_read_weights(model, loaded.data()), 0);
      EXPECT_EQ(loaded, region);
      EXPECT_EQ(runOnce(model), expected);
      // Saving streams back the same file; load_weights the same region.
      std::string again = path + ".again";
      ASSERT_EQ(memopt_model_save_weights(model, again.c_str()), 0)
          << memopt_model_error(model);
      EXPECT_EQ(readFile(again), file);
      std::vector<uint8_t> zeros(bytes, 0);
      ASSERT_EQ(memopt_model_write_weights(model, zeros.data()), 0);
      ASSERT_EQ(memopt_model_load_weights(model, again.c_str()), 0)
          << memopt_model_error(model);
      EXPECT_EQ(runOnce(model), expected);
      memopt_model_destroy(model);
    }
}

// A truncated, foreign or corrupt file is refused with the same messages
// whatever the chunking, and load_weights leaves the region as it was.
TEST(CApi, WrongWeightFilesAreRefusedBeforeLoading) {
  char error[512] = {};
  memopt_model *model = memopt_model_create(nullptr, 4, error, sizeof(error));
  ASSERT_NE(model, nullptr) << error;
  std::string path = ::testing::TempDir() + "capi_wrong.weights";
  ASSERT_EQ(memopt_model_save_weights(model, path.c_str()), 0);
  std::vector<char> file = readFile(path);
  ASSERT_EQ(file.size(), 704u + 24);
  std::vector<uint8_t> before(704), after(704);
  ASSERT_EQ(memopt_model_read_weights(model, before.data()), 0);
  std::vector<float> expected = runOnce(model);

  struct Case {
    std::string name, message;
    std::vector<char> bytes;
  };
  std::vector<char> truncated(file.begin(), file.end() - 1);
  std::vector<char> noMagic = file, foreign = file, otherSize = file;
  noMagic[704] = 'X';
  foreign[704 + 8] ^= 1; // the fingerprint's low byte
  otherSize[704 + 16] ^= 1;
  std::vector<Case> cases = {
      {"truncated",
       "has 727 bytes; the program's weight region has 704 (+24 "
       "bytes of trailer): it is truncated or belongs to another "
       "model",
       truncated},
      {"no magic",
       "does not end in a memopt weight trailer for a region of "
       "704 bytes",
       noMagic},
      {"other size", "does not end in a memopt weight trailer", otherSize},
      {"foreign", "was written for another program (weight table fingerprint",
       foreign},
  };
  WeightStreaming streaming(64, true);
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    std::string bad = path + "." + std::to_string(&c - cases.data());
    writeFile(bad, c.bytes);
    EXPECT_EQ(memopt_model_create(bad.c_str(), 0, error, sizeof(error)),
              nullptr);
    EXPECT_NE(std::string(error).find(c.message), std::string::npos) << error;
    EXPECT_NE(std::string(error).find(bad), std::string::npos) << error;
    EXPECT_NE(memopt_model_load_weights(model, bad.c_str()), 0);
    EXPECT_NE(std::string(memopt_model_error(model)).find(c.message),
              std::string::npos)
        << memopt_model_error(model);
    ASSERT_EQ(memopt_model_read_weights(model, after.data()), 0);
    EXPECT_EQ(after, before);
  }
  EXPECT_EQ(runOnce(model), expected);
  memopt_model_destroy(model);
}

} // namespace
