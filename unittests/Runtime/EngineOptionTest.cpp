//===- EngineOptionTest.cpp - MEMOPT_*_ENGINE and ContextOptions ----------===//
//
// engineFromEnvironment (lib/Runtime/Common.cpp): the engine a CUDA context
// runs where both cuDNN and memopt's kernels can run an op, from
// ContextOptions::attentionEngine / convEngine and the environment
// variables MEMOPT_ATTENTION_ENGINE / MEMOPT_CONV_ENGINE that override them.
// The choice itself runs on the GPU (the kernel suite's `_measured` cases);
// this checks the parsing, which is the same on every machine.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include <gtest/gtest.h>

using namespace memopt::rt;

namespace {

TEST(EngineOption, DefaultsAreMeasured) {
  ContextOptions options;
  EXPECT_EQ(options.attentionEngine, AttentionEngine::Measured);
  EXPECT_EQ(options.convEngine, ConvEngine::Measured);
  // The two enums share their values (one parser serves both).
  EXPECT_EQ(int32_t(AttentionEngine::Cudnn), int32_t(ConvEngine::Cudnn));
  EXPECT_EQ(int32_t(AttentionEngine::Memopt), int32_t(ConvEngine::Memopt));
}

TEST(EngineOption, UnsetOrEmptyEnvironmentKeepsTheOption) {
  for (AttentionEngine option :
       {AttentionEngine::Measured, AttentionEngine::Cudnn,
        AttentionEngine::Memopt}) {
    int32_t engine = -1;
    EXPECT_TRUE(engineFromEnvironment(int32_t(option), nullptr, engine));
    EXPECT_EQ(engine, int32_t(option));
    engine = -1;
    EXPECT_TRUE(engineFromEnvironment(int32_t(option), "", engine));
    EXPECT_EQ(engine, int32_t(option));
  }
}

TEST(EngineOption, EnvironmentOverridesTheOption) {
  int32_t engine = -1;
  EXPECT_TRUE(engineFromEnvironment(int32_t(AttentionEngine::Memopt),
                                    "measured", engine));
  EXPECT_EQ(AttentionEngine(engine), AttentionEngine::Measured);
  EXPECT_TRUE(engineFromEnvironment(int32_t(AttentionEngine::Measured), "cudnn",
                                    engine));
  EXPECT_EQ(AttentionEngine(engine), AttentionEngine::Cudnn);
  EXPECT_TRUE(
      engineFromEnvironment(int32_t(AttentionEngine::Cudnn), "memopt", engine));
  EXPECT_EQ(AttentionEngine(engine), AttentionEngine::Memopt);
}

TEST(EngineOption, UnknownNamesAreRefused) {
  for (const char *text : {"cuDNN", "Measured", "memopt ", "1", "kernels"}) {
    int32_t engine = 7;
    EXPECT_FALSE(engineFromEnvironment(0, text, engine)) << text;
    EXPECT_EQ(engine, 7) << text;
  }
}

} // namespace
