//===- CApiTest.cpp - the C API over the example program ------------------===//

#include "memopt/Runtime/memopt_c_api.h"

#include <gtest/gtest.h>

#include <cmath>
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

} // namespace
