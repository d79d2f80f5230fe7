//===- CApiTrainTest.cpp - the C API's training step ----------------------===//

#include "memopt/Runtime/memopt_c_api.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

TEST(CApiTrain, StepsLowerTheLossAndLrZeroKeepsIt) {
  char error[256] = {};
  memopt_model *model = memopt_model_create(nullptr, 3, error, sizeof(error));
  ASSERT_NE(model, nullptr) << error;
  ASSERT_EQ(memopt_model_num_inputs(model), 2);
  ASSERT_EQ(memopt_model_weight_bytes(model), 144u);
  // Four samples whose class is their largest feature.
  std::vector<float> x = {2.0f, 0.1f,  -1.0f, -0.5f, 1.5f, 0.2f,
                          0.3f, -0.2f, 1.8f,  -1.0f, 0.9f, 0.1f};
  std::vector<int64_t> labels = {0, 1, 2, 1};
  const void *inputs[2] = {x.data(), labels.data()};
  std::vector<float> losses;
  for (int step = 0; step < 20; ++step) {
    float loss = NAN;
    ASSERT_EQ(memopt_model_train_step(model, inputs, -1.0f, &loss), 0)
        << memopt_model_error(model);
    losses.push_back(loss);
  }
  EXPECT_LT(losses.back(), 0.5f * losses.front());
  float frozen[2];
  for (float &loss : frozen)
    ASSERT_EQ(memopt_model_train_step(model, inputs, 0.0f, &loss), 0);
  EXPECT_EQ(frozen[0], frozen[1]);
  std::vector<uint8_t> region(memopt_model_weight_bytes(model));
  ASSERT_EQ(memopt_model_read_weights(model, region.data()), 0);
  float step;
  std::memcpy(&step, region.data() + 132, 4);
  EXPECT_EQ(step, 22.0f); // the step count the driver wrote last
  memopt_model_destroy(model);
}

} // namespace
