//===- RematMemoryBudgetTest.cpp - the direct budget path -----------------===//
//
// The memory phase's plain functions (MemoryPhase.h) and the memory budget
// search that calls them (Rematerialize.h), without a PassManager: the
// search returns a typed result (the arenas, the chosen solver run, the
// chosen function scheduled and carrying its recomputation), and a budget
// nothing meets is a result with a message, not a failure. The chain is
// test/Transforms/memopt-rematerialize.mlir's @arena_fit.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"
#include "memopt/Dialect/MemOpt/Transforms/MemoryPhase.h"
#include "memopt/Dialect/MemOpt/Transforms/Rematerialize.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::memopt;

namespace {

constexpr const char *kChain = R"mlir(
func.func @arena_fit(%x: tensor<64x64xf32>) -> tensor<64x4xf32> {
  %w = memopt.constant dense<0.5> : tensor<64x4xf32>
  %k = memopt.constant dense<0.125> : tensor<64x64xf32>
  %a = memopt.exp %x : tensor<64x64xf32> loc("a")
  %b = memopt.matmul %a, %k : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("b")
  %c = memopt.matmul %b, %k : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("c")
  %d = memopt.add %c, %a : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("d")
  %e = memopt.matmul %d, %w : (tensor<64x64xf32>, tensor<64x4xf32>) -> tensor<64x4xf32> loc("e")
  return %e : tensor<64x4xf32>
}
)mlir";

class RematMemoryBudgetTest : public ::testing::Test {
protected:
  void SetUp() override {
    context.loadDialect<func::FuncDialect, MemOptDialect>();
    module = parseSourceString<ModuleOp>(kChain, &context);
    ASSERT_TRUE(module);
  }

  func::FuncOp getFunction(ModuleOp of) {
    return *of.getOps<func::FuncOp>().begin();
  }

  /// The op kinds and locations in program order.
  std::string printOrder(ModuleOp of) {
    std::string text;
    llvm::raw_string_ostream os(text);
    for (Operation &op : getFunction(of).getBody().front())
      os << op.getName() << " " << op.getLoc() << "\n";
    return text;
  }

  MemoryBudgetOptions budget(int64_t bytes) {
    MemoryBudgetOptions options;
    options.memoryBudget = bytes;
    options.remat.timeLimitSeconds = 1.0;
    return options;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(RematMemoryBudgetTest, MemoryPhaseFunctionsPlanTheChain) {
  func::FuncOp function = getFunction(*module);
  FailureOr<ScheduleResult> scheduled = scheduleFunction(function);
  ASSERT_TRUE(succeeded(scheduled));
  EXPECT_FALSE(scheduled->orderKept);
  EXPECT_LE(scheduled->maxLiveAfter, scheduled->maxLiveBefore);
  FailureOr<BucketCollectivesResult> buckets =
      bucketCollectives(function, 25, getFirstBucketMib(25), 25);
  ASSERT_TRUE(succeeded(buckets));
  EXPECT_TRUE(buckets->bucketSizes.empty()); // not data parallel
  EXPECT_TRUE(buckets->gatherGroupSizes.empty());
  ASSERT_TRUE(succeeded(bufferizeFunction(function)));
  PlanMemoryOptions plan;
  plan.outputsInArena = true;
  FailureOr<MemoryReport> report = planFunctionMemory(function, plan);
  ASSERT_TRUE(succeeded(report));
  // a, b and c (16 KiB each) at c; the output beside them at the end.
  EXPECT_EQ(report->arenaBytes, 49152);
  auto arena = function->getAttrOfType<IntegerAttr>("memopt.arena_size");
  ASSERT_TRUE(arena);
  EXPECT_EQ(arena.getInt(), report->arenaBytes);
}

TEST_F(RematMemoryBudgetTest, FitsByRecomputingOneOp) {
  FailureOr<MemoryBudgetResult> result =
      rematerializeToMemoryBudget(*module, budget(40000));
  ASSERT_TRUE(succeeded(result));
  EXPECT_TRUE(result->fits);
  EXPECT_FALSE(result->synchronousCollectives);
  EXPECT_EQ(result->unconstrainedArena, 49152);
  EXPECT_EQ(result->arena, 32768);
  EXPECT_GE(result->probes, 1);
  EXPECT_EQ(result->remat.recomputations, 1);
  EXPECT_GT(result->remat.addedSeconds, 0);
  // The chosen function, not the input, holds the clone.
  ASSERT_TRUE(result->module);
  int clones = 0;
  getFunction(result->module.get()).walk([&](Operation *op) {
    clones += op->hasAttr(kRecomputedAttrName);
  });
  EXPECT_EQ(clones, 1);
  getFunction(*module).walk(
      [&](Operation *op) { EXPECT_FALSE(op->hasAttr(kRecomputedAttrName)); });
}

TEST_F(RematMemoryBudgetTest, RoomyBudgetReturnsTheFunctionScheduled) {
  FailureOr<MemoryBudgetResult> result =
      rematerializeToMemoryBudget(*module, budget(1 << 20));
  ASSERT_TRUE(succeeded(result));
  EXPECT_TRUE(result->fits);
  EXPECT_EQ(result->probes, 0);
  EXPECT_EQ(result->arena, result->unconstrainedArena);
  ASSERT_TRUE(result->module);
  // In the order memopt-schedule gives the input: the pipeline does not
  // schedule it again.
  OwningOpRef<ModuleOp> expected = module->clone();
  ASSERT_TRUE(succeeded(scheduleFunction(getFunction(*expected))));
  EXPECT_EQ(printOrder(result->module.get()), printOrder(*expected));
}

TEST_F(RematMemoryBudgetTest, ImpossibleBudgetIsAResultWithAMessage) {
  FailureOr<MemoryBudgetResult> result =
      rematerializeToMemoryBudget(*module, budget(20000));
  ASSERT_TRUE(succeeded(result));
  EXPECT_FALSE(result->fits);
  EXPECT_FALSE(result->module);
  EXPECT_EQ(result->arena, 32768); // the smallest reached
  EXPECT_NE(result->message.find("the smallest arena reached (1 ops "
                                 "recomputed) is 32.00 KiB (32768 bytes)"),
            std::string::npos)
      << result->message;
}

} // namespace
