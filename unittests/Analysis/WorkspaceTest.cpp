//===- WorkspaceTest.cpp - the compiler's and the runtime's workspaces agree =//
//
// The compiler plans an op's workspace with getWorkspaceBytes; the runtime
// carves the planned bytes up with its own helpers (attentionChunkBytes,
// linearCrossEntropyWorkspaceBytes, the normalization splits). Both read
// include/memopt/Runtime/Workspace.h; this test parses ops of a few shapes
// and element types and checks that what the compiler plans is exactly what
// the runtime needs for its widest chunk, and that the formulas keep their
// layout (issue 28, "workspace formulas in one header the compiler includes
// too").
//
//===----------------------------------------------------------------------===//

#include "memopt/Runtime/Workspace.h"
#include "../../lib/Runtime/Internal.h"
#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
namespace rt = ::memopt::rt;
namespace ws = ::memopt::workspace;

namespace {

constexpr const char *kFunction = R"mlir(
func.func @f(%q32: tensor<2x3x40x16xf32>, %k32: tensor<2x3x24x16xf32>,
             %q16: tensor<6x40x16xf16>, %k16: tensor<6x24x16xf16>,
             %lse16: tensor<6x40x2xf32>, %o16: tensor<6x40x16xf16>,
             %x: tensor<512x64xbf16>, %w: tensor<1000x64xbf16>,
             %labels: tensor<512xi64>, %c: tensor<8x12x5x5xf16>,
             %s: tensor<12xf32>, %rows: tensor<300x96xf32>, %scale: tensor<96xf32>,
             %bias: tensor<8192x256xf32>) {
  %a = memopt.attention %q32, %k32, %k32 {scale = 0.25 : f32} : (tensor<2x3x40x16xf32>, tensor<2x3x24x16xf32>, tensor<2x3x24x16xf32>) -> tensor<2x3x40x16xf32>
  %b = memopt.attention %q16, %k16, %k16 {scale = 0.25 : f32} : (tensor<6x40x16xf16>, tensor<6x24x16xf16>, tensor<6x24x16xf16>) -> tensor<6x40x16xf16>
  %dq, %dk, %dv = memopt.attention_grad %q16, %k16, %k16, %o16, %o16, %lse16 {scale = 0.25 : f32} : (tensor<6x40x16xf16>, tensor<6x24x16xf16>, tensor<6x24x16xf16>, tensor<6x40x16xf16>, tensor<6x40x16xf16>, tensor<6x40x2xf32>) -> (tensor<6x40x16xf16>, tensor<6x24x16xf16>, tensor<6x24x16xf16>)
  %loss, %lse = memopt.linear_cross_entropy %x, %w, %labels : (tensor<512x64xbf16>, tensor<1000x64xbf16>, tensor<512xi64>) -> (tensor<f32>, tensor<512xf32>)
  %y, %mean, %inv = memopt.batch_norm_training %c, %s, %s : (tensor<8x12x5x5xf16>, tensor<12xf32>, tensor<12xf32>) -> (tensor<8x12x5x5xf16>, tensor<12xf32>, tensor<12xf32>)
  %dx, %ds, %db = memopt.layer_normalization_grad %rows, %rows, %scale {axis = 1 : i64} : (tensor<300x96xf32>, tensor<300x96xf32>, tensor<96xf32>) -> (tensor<300x96xf32>, tensor<96xf32>, tensor<96xf32>)
  %r = memopt.reduce_sum %bias {axes = array<i64: 0>} : (tensor<8192x256xf32>) -> tensor<1x256xf32>
  return
}
)mlir";

class WorkspaceTest : public ::testing::Test {
protected:
  void SetUp() override {
    context.loadDialect<func::FuncDialect, ::mlir::memopt::MemOptDialect>();
    module = parseSourceString<ModuleOp>(kFunction, &context);
    ASSERT_TRUE(module);
    for (Operation &op : (*module->getOps<func::FuncOp>().begin())
                             .getBody()
                             .front()
                             .without_terminator())
      ops.push_back(&op);
    ASSERT_EQ(ops.size(), 7u);
  }

  int64_t planned(int index) {
    auto cost = dyn_cast<::mlir::memopt::CostOpInterface>(ops[size_t(index)]);
    EXPECT_TRUE(cost);
    return cost ? cost.getWorkspaceBytes() : -1;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::vector<Operation *> ops;
};

TEST_F(WorkspaceTest, AttentionPlansTheRuntimesWholeBatchChunk) {
  // 2 x 3 heads of 40 queries over 24 keys, f32: the scores only.
  EXPECT_EQ(planned(0),
            int64_t(rt::attentionChunkBytes(6, 40, 24, rt::DType::F32)));
  EXPECT_EQ(planned(0), ws::roundUp256(6 * 40 * 24 * 4));
  // f16: the f32 scores, then the f16 probabilities.
  EXPECT_EQ(planned(1),
            int64_t(rt::attentionChunkBytes(6, 40, 24, rt::DType::F16)));
  EXPECT_EQ(planned(1), ws::roundUp256(5760 * 4) + 5760 * 2);
}

TEST_F(WorkspaceTest, AttentionGradPlansTheRuntimesWholeBatchChunk) {
  EXPECT_EQ(planned(2), int64_t(rt::attentionBackwardChunkBytes(
                            6, 40, 24, rt::DType::F16)));
  EXPECT_EQ(planned(2),
            2 * ws::roundUp256(5760 * 4) + 2 * ws::roundUp256(5760 * 2));
}

TEST_F(WorkspaceTest, LinearCrossEntropyPlansEveryClassInOneChunk) {
  // 1000 classes: all in one chunk (a multiple of 8), bf16 logits.
  EXPECT_EQ(planned(3), int64_t(rt::linearCrossEntropyWorkspaceBytes(
                            512, 1000, rt::DType::BF16)));
  EXPECT_EQ(planned(3),
            ws::roundUp256(512 * 12) + ws::roundUp256(512 * 1000 * 2));
}

TEST_F(WorkspaceTest, NormalizationPlansEverySplit) {
  EXPECT_EQ(planned(4),
            ws::kNormalizationSplits * ws::normalizationSplitBytes(12));
  EXPECT_EQ(planned(4), 12 * 32 * 2 * 4);
  // Layer norm's gradient: 300 rows of statistics, then 32 splits of 96
  // columns; the runtime needs the statistics and at least one split.
  EXPECT_EQ(planned(5), ws::layerNormGradBytes(300, 96));
  EXPECT_EQ(planned(5), ws::roundUp256(300 * 8) + 32 * 96 * 8);
  EXPECT_GE(planned(5), ws::layerNormGradBytes(300, 96, /*splits=*/1));
}

TEST_F(WorkspaceTest, ReductionPlansTheRuntimesLargestSplit) {
  // 256 outputs of 8192 elements: min(64, 8192 / 256) = 32 partials each.
  EXPECT_EQ(planned(6), ws::reductionBytes(256, 8192 * 256));
  EXPECT_EQ(planned(6), 256 * 32 * 4);
  EXPECT_EQ(ws::reductionBytes(256, 256 * 65536),
            256 * ws::kReductionMaxSplits * 4);
  // Few outputs, or short reductions: none.
  EXPECT_EQ(ws::reductionBytes(16, 16 * 65536), 0);
  EXPECT_EQ(ws::reductionBytes(256, 256 * 1024), 0);
}

} // namespace
