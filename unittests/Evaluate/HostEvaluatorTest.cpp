//===- HostEvaluatorTest.cpp - constants evaluated by the host kernels ----===//
//
// HostConstantEvaluator (memopt/Evaluate/HostEvaluator.h) on ops parsed from
// text: every result of a multi-result op, booleans, f16, results above the
// inline limit as resource blobs, and what it refuses (non-constant or
// too-large operands, a kernel error, integer sums f32 cannot hold exactly)
// without losing its context for the next op.
//
//===----------------------------------------------------------------------===//

#include "memopt/Evaluate/HostEvaluator.h"
#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::memopt;

namespace {

constexpr const char *kFunction = R"mlir(
func.func @f(%arg: tensor<2xf32>) -> () {
  %a = memopt.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %s:2 = memopt.split %a {axis = 1 : i64, split = array<i64: 1, 2>} : (tensor<2x3xf32>) -> (tensor<2x1xf32>, tensor<2x2xf32>)
  %l = memopt.less %a, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %h = memopt.constant dense<[1.5, -2.0]> : tensor<2xf16>
  %hh = memopt.add %h, %h : (tensor<2xf16>, tensor<2xf16>) -> tensor<2xf16>
  %e = memopt.exp %a : tensor<2x3xf32>
  %x = memopt.exp %arg : tensor<2xf32>
  %i = memopt.constant dense<[5]> : tensor<1xi64>
  %g = memopt.gather %a, %i {axis = 0 : i64} : (tensor<2x3xf32>, tensor<1xi64>) -> tensor<1x3xf32>
  %big = memopt.constant dense<[16777216, 16777216]> : tensor<2xi64>
  %sum = memopt.reduce_sum %big {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2xi64>) -> tensor<i64>
  %k = memopt.constant dense<[3, -2]> : tensor<2xi32>
  %ksum = memopt.reduce_sum %k {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2xi32>) -> tensor<i32>
  return
}
)mlir";

class HostEvaluatorTest : public ::testing::Test {
protected:
  void SetUp() override {
    context.loadDialect<func::FuncDialect, MemOptDialect>();
    module = parseSourceString<ModuleOp>(kFunction, &context);
    ASSERT_TRUE(module);
    for (Operation &op : (*module->getOps<func::FuncOp>().begin())
                             .getBody()
                             .front()
                             .without_terminator())
      if (!isa<ConstantOp>(op))
        ops.push_back(&op);
    ASSERT_EQ(ops.size(), 8u);
  }

  static std::vector<float> floats(Attribute value) {
    std::vector<float> result;
    for (float v : cast<DenseElementsAttr>(value).getValues<float>())
      result.push_back(v);
    return result;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::vector<Operation *> ops;
};

TEST_F(HostEvaluatorTest, EveryResultOfASplit) {
  HostConstantEvaluator evaluator;
  FailureOr<SmallVector<Attribute>> results = evaluator.evaluate(ops[0]);
  ASSERT_TRUE(succeeded(results));
  ASSERT_EQ(results->size(), 2u);
  EXPECT_EQ(floats((*results)[0]), (std::vector<float>{1, 4}));
  EXPECT_EQ(floats((*results)[1]), (std::vector<float>{2, 3, 5, 6}));
  EXPECT_EQ(evaluator.getEvaluatedCount(), 1);
}

TEST_F(HostEvaluatorTest, BooleansAndHalfFloats) {
  HostConstantEvaluator evaluator;
  FailureOr<SmallVector<Attribute>> less = evaluator.evaluate(ops[1]);
  ASSERT_TRUE(succeeded(less));
  auto dense = cast<DenseElementsAttr>((*less)[0]);
  EXPECT_TRUE(dense.getElementType().isInteger(1));
  for (bool v : dense.getValues<bool>())
    EXPECT_FALSE(v);
  FailureOr<SmallVector<Attribute>> sum = evaluator.evaluate(ops[2]);
  ASSERT_TRUE(succeeded(sum));
  std::vector<double> values;
  for (APFloat v : cast<DenseElementsAttr>((*sum)[0]).getValues<APFloat>())
    values.push_back(v.convertToFloat());
  EXPECT_EQ(values, (std::vector<double>{3.0, -4.0}));
}

TEST_F(HostEvaluatorTest, LargeResultsBecomeResourceBlobs) {
  HostEvaluationLimits limits;
  limits.maxInlineElements = 4;
  HostConstantEvaluator evaluator(limits);
  FailureOr<SmallVector<Attribute>> exp = evaluator.evaluate(ops[3]);
  ASSERT_TRUE(succeeded(exp));
  EXPECT_TRUE(isa<DenseResourceElementsAttr>((*exp)[0]));
  // A result of at most maxInlineElements stays inline.
  FailureOr<SmallVector<Attribute>> split = evaluator.evaluate(ops[0]);
  ASSERT_TRUE(succeeded(split));
  EXPECT_TRUE(isa<DenseElementsAttr>((*split)[1]));
}

TEST_F(HostEvaluatorTest, RefusesWhatItCannotEvaluate) {
  HostEvaluationLimits limits;
  limits.maxElements = 5;
  HostConstantEvaluator small(limits);
  // Six elements: over the limit.
  EXPECT_TRUE(failed(small.evaluate(ops[3])));
  HostConstantEvaluator evaluator;
  // A function argument is not a constant.
  EXPECT_TRUE(failed(evaluator.evaluate(ops[4])));
  // The gather kernel refuses index 5 of 2 rows; the next op still folds.
  EXPECT_TRUE(failed(evaluator.evaluate(ops[5])));
  EXPECT_TRUE(succeeded(evaluator.evaluate(ops[0])));
  // 2^24 + 2^24 is not exact through f32's reduction: left alone.
  EXPECT_TRUE(failed(evaluator.evaluate(ops[6])));
  FailureOr<SmallVector<Attribute>> ksum = evaluator.evaluate(ops[7]);
  ASSERT_TRUE(succeeded(ksum));
  EXPECT_EQ(*cast<DenseElementsAttr>((*ksum)[0]).getValues<int32_t>().begin(),
            1);
  EXPECT_EQ(evaluator.getEvaluatedCount(), 2);
}

TEST_F(HostEvaluatorTest, FoldBuildsConstantsBeforeTheOp) {
  HostConstantEvaluator evaluator;
  OpBuilder builder(&context);
  FailureOr<SmallVector<Value>> folded = evaluator.fold(builder, ops[0]);
  ASSERT_TRUE(succeeded(folded));
  ASSERT_EQ(folded->size(), 2u);
  for (auto [index, value] : llvm::enumerate(*folded)) {
    auto constant = value.getDefiningOp<ConstantOp>();
    ASSERT_TRUE(constant);
    EXPECT_TRUE(constant->isBeforeInBlock(ops[0]));
    EXPECT_EQ(value.getType(), ops[0]->getResult(index).getType());
  }
}

} // namespace
