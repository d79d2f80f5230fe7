//===- RematSummaryTest.cpp - memopt.remat's one reader and writer --------===//
//
// RematSummary.h: a summary written on a function reads back the same, keys
// the pass did not set stay absent, the kernel times kept are those that
// name an op of the function, and estimateRematSeconds prices an op with
// its measured time where there is one, else with the H100 roofline.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/RematSummary.h"
#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::memopt;

namespace {

constexpr const char *kFunction = R"mlir(
func.func @f(%x: tensor<1024x1024xf32>) -> (tensor<1024x1024xf32>, tensor<1024x1024xf32>) {
  %r = memopt.relu %x : tensor<1024x1024xf32> loc("relu_node")
  %m = memopt.matmul %r, %r : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32> loc("matmul_node")
  return %r, %m : tensor<1024x1024xf32>, tensor<1024x1024xf32>
}
)mlir";

class RematSummaryTest : public ::testing::Test {
protected:
  void SetUp() override {
    context.loadDialect<func::FuncDialect, MemOptDialect>();
    module = parseSourceString<ModuleOp>(kFunction, &context);
    ASSERT_TRUE(module);
    function = *module->getOps<func::FuncOp>().begin();
    for (Operation &op : function.getBody().front().without_terminator())
      ops.push_back(&op);
    ASSERT_EQ(ops.size(), 2u);
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  func::FuncOp function;
  std::vector<Operation *> ops;
};

TEST_F(RematSummaryTest, NoneUntilWritten) {
  EXPECT_FALSE(readRematSummary(function).has_value());
}

TEST_F(RematSummaryTest, RoundTrip) {
  RematSummary summary;
  summary.solved = true;
  summary.budget = 1000;
  summary.initialPeak = 3000;
  summary.peak = 900;
  summary.recomputations = 2;
  summary.searched = true;
  summary.memoryBudget = 4096;
  summary.unconstrainedArena = 8192;
  summary.plannedArena = 4000;
  summary.solverRuns = 3;
  summary.addedTimeFraction = 0.125;
  summary.kernelSeconds["relu_node"] = 1e-3;
  writeRematSummary(function, summary);
  std::optional<RematSummary> read = readRematSummary(function);
  ASSERT_TRUE(read.has_value());
  EXPECT_TRUE(read->solved);
  EXPECT_EQ(read->budget, 1000);
  EXPECT_EQ(read->initialPeak, 3000);
  EXPECT_EQ(read->peak, 900);
  EXPECT_EQ(read->recomputations, 2);
  EXPECT_TRUE(read->searched);
  EXPECT_EQ(read->memoryBudget, 4096);
  EXPECT_EQ(read->unconstrainedArena, 8192);
  EXPECT_EQ(read->plannedArena, 4000);
  EXPECT_EQ(read->solverRuns, 3);
  EXPECT_DOUBLE_EQ(read->addedTimeFraction, 0.125);
  ASSERT_EQ(read->kernelSeconds.size(), 1u);
  EXPECT_DOUBLE_EQ(read->kernelSeconds.lookup("relu_node"), 1e-3);
}

TEST_F(RematSummaryTest, SearchWithoutSolverKeepsOnlyItsKeys) {
  // A budget the unconstrained arena meets: the solver never ran.
  RematSummary summary;
  summary.searched = true;
  summary.memoryBudget = 4096;
  summary.unconstrainedArena = 2048;
  summary.plannedArena = 2048;
  writeRematSummary(function, summary);
  auto attributes = function->getAttrOfType<DictionaryAttr>(kRematAttrName);
  ASSERT_TRUE(attributes);
  EXPECT_FALSE(attributes.contains("budget"));
  EXPECT_FALSE(attributes.contains("peak"));
  EXPECT_FALSE(function->hasAttr(kRematKernelSecondsAttrName));
  EXPECT_TRUE(attributes.contains("memory_budget"));
  std::optional<RematSummary> read = readRematSummary(function);
  ASSERT_TRUE(read.has_value());
  EXPECT_FALSE(read->solved);
  EXPECT_TRUE(read->searched);
  EXPECT_EQ(read->unconstrainedArena, 2048);
}

TEST_F(RematSummaryTest, KeepsTheTimesOfTheFunctionsOps) {
  KernelTimes times;
  times["relu_node"] = 2e-3;
  times["elsewhere"] = 5.0;
  KernelTimes selected = selectKernelTimes(function, times);
  ASSERT_EQ(selected.size(), 1u);
  EXPECT_DOUBLE_EQ(selected.lookup("relu_node"), 2e-3);
}

TEST_F(RematSummaryTest, PricesAsTheSolverDid) {
  RematSummary roofline;
  Roofline h100 = Roofline::h100();
  EXPECT_DOUBLE_EQ(estimateRematSeconds(ops[0], roofline),
                   estimateOpSeconds(ops[0], h100));
  EXPECT_EQ(describeRematCosts(roofline), "roofline");
  RematSummary measured;
  measured.kernelSeconds["relu_node"] = 2e-3;
  EXPECT_DOUBLE_EQ(estimateRematSeconds(ops[0], measured), 2e-3);
  // The matmul was not measured: the roofline prices it.
  EXPECT_DOUBLE_EQ(estimateRematSeconds(ops[1], measured),
                   estimateOpSeconds(ops[1], h100));
  EXPECT_EQ(describeRematCosts(measured),
            "measured kernel times (1 ops), the roofline elsewhere");
}

} // namespace
