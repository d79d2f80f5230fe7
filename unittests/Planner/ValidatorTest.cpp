//===- ValidatorTest.cpp - The independent plan validator -----------------===//

#include "memopt/Planner/Validator.h"

#include <gtest/gtest.h>

using namespace memopt::planner;

namespace {

// Three buffers: 0 and 1 live together, 2 starts when 0 ends.
Problem threeBuffers() {
  return Problem{{{10, 0, 4, 100, 1}, {11, 2, 6, 50, 1}, {12, 4, 8, 100, 1}}};
}

TEST(ValidatorTest, AcceptsValidPlan) {
  // 2 reuses 0's bytes: their lifetimes only touch at t=4.
  ValidationResult result =
      validatePlan(threeBuffers(), Plan{{0, 100, 0}, 150});
  EXPECT_TRUE(result.ok()) << result.message;
  EXPECT_EQ(result.violation, Violation::None);
}

TEST(ValidatorTest, AcceptsAdjacentByteRanges) {
  Problem problem{{{0, 0, 2, 8}, {1, 0, 2, 8}}};
  EXPECT_TRUE(validatePlan(problem, Plan{{0, 8}, 16}).ok());
}

TEST(ValidatorTest, ZeroSizeBuffersOverlapNothing) {
  Problem problem{{{0, 0, 2, 8}, {1, 0, 2, 0}}};
  EXPECT_TRUE(validatePlan(problem, Plan{{0, 4}, 8}).ok());
}

TEST(ValidatorTest, CatchesWrongOffsetCount) {
  ValidationResult result = validatePlan(threeBuffers(), Plan{{0, 100}, 150});
  EXPECT_EQ(result.violation, Violation::OffsetCount);
  EXPECT_NE(result.message.find("2 offsets for 3 buffers"), std::string::npos)
      << result.message;
}

TEST(ValidatorTest, CatchesNegativeOffset) {
  ValidationResult result =
      validatePlan(threeBuffers(), Plan{{0, 100, -1}, 150});
  EXPECT_EQ(result.violation, Violation::NegativeOffset);
  EXPECT_NE(result.message.find("buffer 12"), std::string::npos)
      << result.message;
}

TEST(ValidatorTest, CatchesMisalignment) {
  Problem problem{{{0, 0, 2, 10, 1}, {5, 0, 2, 7, 256}}};
  ValidationResult result = validatePlan(problem, Plan{{0, 10}, 17});
  EXPECT_EQ(result.violation, Violation::Misaligned);
  EXPECT_NE(result.message.find("buffer 5"), std::string::npos)
      << result.message;
  EXPECT_TRUE(validatePlan(problem, Plan{{0, 256}, 263}).ok());
}

TEST(ValidatorTest, CatchesBufferOutsideArena) {
  ValidationResult result =
      validatePlan(threeBuffers(), Plan{{0, 100, 0}, 149});
  EXPECT_EQ(result.violation, Violation::OutsideArena);
  EXPECT_NE(result.message.find("buffer 11"), std::string::npos)
      << result.message;
}

TEST(ValidatorTest, CatchesArenaOverCapacity) {
  ValidationResult result =
      validatePlan(threeBuffers(), Plan{{0, 100, 0}, 150}, int64_t(149));
  EXPECT_EQ(result.violation, Violation::OverCapacity);
  EXPECT_TRUE(
      validatePlan(threeBuffers(), Plan{{0, 100, 0}, 150}, int64_t(150)).ok());
}

TEST(ValidatorTest, CatchesOverlapOfLiveBuffers) {
  // 1 (bytes [99,149)) overlaps 0 (bytes [0,100)) by one byte.
  ValidationResult result = validatePlan(threeBuffers(), Plan{{0, 99, 0}, 150});
  EXPECT_EQ(result.violation, Violation::Overlap);
  EXPECT_NE(result.message.find("buffer 10"), std::string::npos)
      << result.message;
  EXPECT_NE(result.message.find("buffer 11"), std::string::npos)
      << result.message;
}

TEST(ValidatorTest, CatchesOverlapFoundLateInTheSweep) {
  // The conflicting pair (2 and 3) is not adjacent in start order.
  Problem problem{
      {{0, 0, 10, 4}, {1, 1, 2, 4}, {2, 2, 9, 4}, {3, 3, 4, 4}, {4, 8, 9, 4}}};
  EXPECT_TRUE(validatePlan(problem, Plan{{0, 4, 4, 8, 8}, 12}).ok());
  ValidationResult result = validatePlan(problem, Plan{{0, 4, 4, 6, 8}, 12});
  EXPECT_EQ(result.violation, Violation::Overlap);
  EXPECT_NE(result.message.find("buffer 3"), std::string::npos)
      << result.message;
}

} // namespace
