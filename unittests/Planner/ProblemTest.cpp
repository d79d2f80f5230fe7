//===- ProblemTest.cpp - max-live and problem checks ----------------------===//

#include "memopt/Planner/Problem.h"

#include <gtest/gtest.h>

using namespace memopt::planner;

namespace {

TEST(MaxLiveTest, EmptyProblemIsZero) { EXPECT_EQ(maxLive(Problem{}), 0); }

TEST(MaxLiveTest, LifetimesAreHalfOpen) {
  // [0,2) and [2,4) never coexist; [1,3) meets both.
  Problem problem{{{0, 0, 2, 10}, {1, 2, 4, 20}, {2, 1, 3, 5}}};
  EXPECT_EQ(maxLive(problem), 25);
}

TEST(MaxLiveTest, ZeroSizeBuffersCountForNothing) {
  Problem problem{{{0, 0, 10, 0}, {1, 0, 10, 7}, {2, 5, 5, 0}}};
  EXPECT_EQ(maxLive(problem), 7);
}

TEST(MaxLiveTest, PeakInTheMiddle) {
  Problem problem{{{0, 0, 10, 1}, {1, 2, 8, 2}, {2, 4, 6, 4}, {3, 6, 10, 8}}};
  // t in [4,6): 1+2+4 = 7; t in [6,8): 1+2+8 = 11; t in [8,10): 1+8 = 9.
  EXPECT_EQ(maxLive(problem), 11);
}

TEST(CheckProblemTest, AcceptsWellFormedProblems) {
  Problem problem{{{0, 0, 1, 5, 1}, {1, 3, 3, 0, 1}, {2, 0, 9, 7, 256}}};
  EXPECT_EQ(checkProblem(problem), "");
}

TEST(CheckProblemTest, RejectsNegativeSize) {
  Problem problem{{{0, 0, 1, 5}, {42, 0, 1, -3}}};
  std::string error = checkProblem(problem);
  EXPECT_NE(error.find("buffer 42"), std::string::npos) << error;
  EXPECT_NE(error.find("negative size"), std::string::npos) << error;
}

TEST(CheckProblemTest, RejectsEmptyLifetimeWithSize) {
  std::string error = checkProblem(Problem{{{7, 4, 4, 1}}});
  EXPECT_NE(error.find("buffer 7"), std::string::npos) << error;
  EXPECT_NE(error.find("empty lifetime"), std::string::npos) << error;
}

TEST(CheckProblemTest, RejectsBadAlignment) {
  std::string error = checkProblem(Problem{{{3, 0, 4, 1, 0}}});
  EXPECT_NE(error.find("alignment"), std::string::npos) << error;
}

TEST(CheckProblemTest, RejectsOverflowingSizes) {
  int64_t huge = int64_t(1) << 60;
  std::string error = checkProblem(
      Problem{{{0, 0, 4, huge}, {1, 0, 4, huge}, {2, 0, 4, huge}}});
  EXPECT_NE(error.find("too large"), std::string::npos) << error;
}

TEST(AlignUpTest, RoundsUpToMultiples) {
  EXPECT_EQ(alignUp(0, 256), 0);
  EXPECT_EQ(alignUp(1, 256), 256);
  EXPECT_EQ(alignUp(256, 256), 256);
  EXPECT_EQ(alignUp(257, 256), 512);
  EXPECT_EQ(alignUp(7, 1), 7);
}

} // namespace
