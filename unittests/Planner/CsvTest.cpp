//===- CsvTest.cpp - MiniMalloc CSV reading and writing -------------------===//

#include "memopt/Planner/Csv.h"

#include <gtest/gtest.h>

using namespace memopt::planner;

namespace {

std::string parseError(const std::string &text) {
  CsvProblem problem;
  std::string error;
  EXPECT_FALSE(parseProblemCsv(text, problem, error)) << text;
  return error;
}

TEST(CsvTest, ReadsMiniMallocFormat) {
  CsvProblem input;
  std::string error;
  ASSERT_TRUE(parseProblemCsv("id,lower,upper,size\n0,0,3,10\n1,2,5,20\n",
                              input, error))
      << error;
  ASSERT_EQ(input.problem.buffers.size(), 2u);
  const Buffer &second = input.problem.buffers[1];
  EXPECT_EQ(second.id, 1);
  EXPECT_EQ(second.lower, 2);
  EXPECT_EQ(second.upper, 5);
  EXPECT_EQ(second.size, 20);
  EXPECT_EQ(second.alignment, 1);
  EXPECT_FALSE(input.hasAlignment);
}

TEST(CsvTest, ReadsAlignmentColumnsInAnyOrderAndCrlf) {
  CsvProblem input;
  std::string error;
  ASSERT_TRUE(parseProblemCsv(
      "size, alignment ,id,upper,lower\r\n7,256,4,9,1\r\n\r\n", input, error))
      << error;
  ASSERT_EQ(input.problem.buffers.size(), 1u);
  const Buffer &buffer = input.problem.buffers[0];
  EXPECT_EQ(buffer.id, 4);
  EXPECT_EQ(buffer.lower, 1);
  EXPECT_EQ(buffer.upper, 9);
  EXPECT_EQ(buffer.size, 7);
  EXPECT_EQ(buffer.alignment, 256);
  EXPECT_TRUE(input.hasAlignment);
}

TEST(CsvTest, ZeroSizeMayHaveEmptyLifetime) {
  CsvProblem input;
  std::string error;
  EXPECT_TRUE(parseProblemCsv("id,lower,upper,size\n0,5,5,0\n", input, error))
      << error;
}

TEST(CsvTest, HeaderOnlyIsAnEmptyProblem) {
  CsvProblem input;
  std::string error;
  EXPECT_TRUE(parseProblemCsv("id,lower,upper,size\n", input, error));
  EXPECT_TRUE(input.problem.buffers.empty());
}

TEST(CsvTest, WritesOffsetColumn) {
  CsvProblem input;
  std::string error;
  ASSERT_TRUE(parseProblemCsv("id,lower,upper,size,alignment\n3,0,2,5,8\n"
                              "4,1,2,6,8\n",
                              input, error));
  EXPECT_EQ(writePlanCsv(input, Plan{{0, 8}, 14}),
            "id,lower,upper,size,alignment,offset\n3,0,2,5,8,0\n"
            "4,1,2,6,8,8\n");
}

TEST(CsvTest, OffsetColumnIsIgnoredOnInput) {
  CsvProblem input;
  std::string error;
  ASSERT_TRUE(
      parseProblemCsv("id,lower,upper,size,offset\n3,0,2,5,99\n", input, error))
      << error;
  EXPECT_EQ(writePlanCsv(input, Plan{{0}, 5}),
            "id,lower,upper,size,offset\n3,0,2,5,0\n");
}

TEST(CsvTest, ErrorsNameTheLine) {
  EXPECT_EQ(parseError(""),
            "line 1: empty input, expected a header 'id,lower,upper,size'");
  EXPECT_EQ(parseError("id,lower,size\n0,1,2\n"),
            "line 1: missing column 'upper' in the header (expected "
            "id,lower,upper,size)");
  EXPECT_EQ(parseError("id,lower,upper,size,colour\n"),
            "line 1: unknown column 'colour' (expected id, lower, upper, "
            "size, and optionally alignment)");
  EXPECT_EQ(parseError("id,lower,upper,size\n0,0,1,4\n1,0,x1,4\n"),
            "line 3: column 'upper': 'x1' is not an integer");
  EXPECT_EQ(parseError("id,lower,upper,size\n0,0,1,4.5\n"),
            "line 2: column 'size': '4.5' is not an integer");
  EXPECT_EQ(parseError("id,lower,upper,size\n0,0,1\n"),
            "line 2: expected 4 fields, found 3");
  EXPECT_EQ(parseError("id,lower,upper,size\n\n7,4,4,16\n"),
            "line 3: buffer 7 has upper (4) <= lower (4)");
  EXPECT_EQ(parseError("id,lower,upper,size\n7,0,4,-16\n"),
            "line 2: buffer 7 has negative size -16");
  EXPECT_EQ(parseError("id,lower,upper,size,alignment\n7,0,4,16,0\n"),
            "line 2: buffer 7 has alignment 0 (must be >= 1)");
  EXPECT_EQ(parseError("id,lower,upper,size\n5,0,4,16\n5,1,2,3\n"),
            "line 3: duplicate id 5 (first on line 2)");
  EXPECT_EQ(parseError("id,lower,upper,size\n5,0,4,\n"),
            "line 2: column 'size': '' is not an integer");
  EXPECT_EQ(parseError("id,lower,upper,size\n5,0,99999999999999999999,1\n"),
            "line 2: column 'upper': '99999999999999999999' is not an "
            "integer");
}

} // namespace
