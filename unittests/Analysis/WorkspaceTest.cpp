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

/// A TensorRef of `shape` (no data: the bound reads shapes only).
rt::TensorRef shaped(rt::DType dtype, std::vector<int64_t> shape) {
  return rt::makeTensor(nullptr, dtype, int(shape.size()), shape.data());
}

TEST_F(WorkspaceTest, CudnnAttentionBoundCoversWhatCudnnStated) {
  // What cuDNN 9.19 stated for its own SDPA backward workspace on an H200
  // (docs/attention.md): the bound holds it, within its 64 KiB of slack.
  struct Stated {
    int64_t batch, heads, kvHeads, tokens, bytes;
  };
  for (Stated c : {Stated{8, 12, 12, 512, 12779520},    // GPT-2, 12.2 MiB
                   Stated{64, 12, 12, 197, 39336960},   // ViT, 37.5 MiB
                   Stated{4, 32, 8, 1024, 67633152}}) { // Llama, 64.5 MiB
    int64_t rows = c.batch * c.heads * c.tokens;
    int64_t fullHead = c.kvHeads < c.heads ? c.batch * c.heads * c.tokens : 0;
    int64_t own = ws::cudnnAttentionBackwardOwnBytes(rows, 64, 64, fullHead, 2);
    EXPECT_GE(own, c.bytes);
    EXPECT_LE(own, c.bytes + ws::kCudnnAttentionSlackBytes);
  }
  // The runtime's bound of a call is the compiler's (the lit test
  // memopt-attention-engine.mlir checks the same numbers on the ops).
  rt::AttentionParams params;
  rt::TensorRef gpt2 = shaped(rt::DType::F16, {8, 12, 512, 64});
  EXPECT_EQ(rt::cudnnAttentionWorkspaceBound(params, gpt2, gpt2, gpt2, nullptr,
                                             false, false),
            65536u);
  EXPECT_EQ(rt::cudnnAttentionWorkspaceBound(params, gpt2, gpt2, gpt2, nullptr,
                                             false, true),
            13041664u);
  rt::TensorRef q = shaped(rt::DType::F16, {4, 8, 4, 1024, 64}),
                kv = shaped(rt::DType::F16, {4, 8, 1, 1024, 64});
  EXPECT_EQ(
      rt::cudnnAttentionWorkspaceBound(params, q, kv, kv, nullptr, false, true),
      68222976u);
  params.keyTransposed = true;
  rt::TensorRef bf16 = shaped(rt::DType::BF16, {8, 12, 512, 64}),
                keys = shaped(rt::DType::BF16, {8, 12, 64, 512});
  EXPECT_EQ(rt::cudnnAttentionWorkspaceBound(params, bf16, keys, bf16, nullptr,
                                             true, false),
            6553600u);
  // None where the compiler plans none: f32, a head size not a multiple of
  // 8, a bias over 197 keys.
  params.keyTransposed = false;
  rt::TensorRef f32 = shaped(rt::DType::F32, {8, 12, 512, 64}),
                d36 = shaped(rt::DType::F16, {2, 3, 16, 36}),
                vit = shaped(rt::DType::F16, {2, 3, 197, 64}),
                vitBias = shaped(rt::DType::F16, {2, 1, 197, 197});
  EXPECT_EQ(rt::cudnnAttentionWorkspaceBound(params, f32, f32, f32, nullptr,
                                             false, true),
            0u);
  EXPECT_EQ(rt::cudnnAttentionWorkspaceBound(params, d36, d36, d36, nullptr,
                                             false, false),
            0u);
  EXPECT_EQ(rt::cudnnAttentionWorkspaceBound(params, vit, vit, vit, &vitBias,
                                             false, false),
            0u);
}

TEST_F(WorkspaceTest, CudnnWorkspaceIsTheAttentionsFloor) {
  // memopt.cudnn_workspace (set by --memopt-attention-engine) is promised:
  // the workspace floor, and at least what the op asks for.
  constexpr const char *kReserved = R"mlir(
func.func @g(%q: tensor<6x40x16xf16>, %k: tensor<6x24x16xf16>,
             %o: tensor<6x40x16xf16>, %lse: tensor<6x40x2xf32>) {
  %a = memopt.attention %q, %k, %k {scale = 0.25 : f32, memopt.cudnn_workspace = 65536 : i64} : (tensor<6x40x16xf16>, tensor<6x24x16xf16>, tensor<6x24x16xf16>) -> tensor<6x40x16xf16>
  %dq, %dk, %dv = memopt.attention_grad %q, %k, %k, %o, %o, %lse {scale = 0.25 : f32, memopt.cudnn_workspace = 12 : i64} : (tensor<6x40x16xf16>, tensor<6x24x16xf16>, tensor<6x24x16xf16>, tensor<6x40x16xf16>, tensor<6x40x16xf16>, tensor<6x40x2xf32>) -> (tensor<6x40x16xf16>, tensor<6x24x16xf16>, tensor<6x24x16xf16>)
  return
}
)mlir";
  OwningOpRef<ModuleOp> reserved =
      parseSourceString<ModuleOp>(kReserved, &context);
  ASSERT_TRUE(reserved);
  std::vector<::mlir::memopt::CostOpInterface> costs;
  for (Operation &op : (*reserved->getOps<func::FuncOp>().begin())
                           .getBody()
                           .front()
                           .without_terminator())
    costs.push_back(dyn_cast<::mlir::memopt::CostOpInterface>(&op));
  ASSERT_EQ(costs.size(), 2u);
  EXPECT_EQ(costs[0].getWorkspaceFloor(), 65536);
  EXPECT_EQ(costs[0].getWorkspaceBytes(), 65536); // > the 34560 of scores
  EXPECT_EQ(costs[1].getWorkspaceFloor(), 12);
  EXPECT_EQ(costs[1].getWorkspaceBytes(), planned(2)); // the chunk is larger
  // Without it, the planner's rule: none promised (optional).
  auto plain = dyn_cast<::mlir::memopt::CostOpInterface>(ops[1]);
  EXPECT_EQ(plain.getWorkspaceFloor(), -1);
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

TEST_F(WorkspaceTest, ChannelsLastBatchNormPlansRowSplits) {
  // ResNet-50's 14 x 14 x 256 stage at batch 64, channels-last: 12544 rows
  // of one 256-channel tile, at least 32 rows per split (the CUDA kernels'
  // 4 rows per row of threads): 392 splits of 256 channels' (sum, sum of
  // squares). The 56 x 56 x 64 stage's 200704 rows reach the 1024-split
  // cap; at 7 x 7 x 2048 the 8 tiles would share 1280 blocks (160 splits)
  // but 3136 rows allow 98.
  constexpr const char *kLast = R"mlir(
func.func @g(%a: tensor<64x14x14x256xbf16>, %b: tensor<64x56x56x64xbf16>,
             %c: tensor<64x7x7x2048xbf16>, %s: tensor<256xf32>,
             %t: tensor<64xf32>, %u: tensor<2048xf32>) {
  %y, %m, %i = memopt.batch_norm_training %a, %s, %s {channels_last} : (tensor<64x14x14x256xbf16>, tensor<256xf32>, tensor<256xf32>) -> (tensor<64x14x14x256xbf16>, tensor<256xf32>, tensor<256xf32>)
  %y2, %m2, %i2 = memopt.batch_norm_training %b, %t, %t {channels_last} : (tensor<64x56x56x64xbf16>, tensor<64xf32>, tensor<64xf32>) -> (tensor<64x56x56x64xbf16>, tensor<64xf32>, tensor<64xf32>)
  %y3, %m3, %i3 = memopt.batch_norm_training %c, %u, %u {channels_last} : (tensor<64x7x7x2048xbf16>, tensor<2048xf32>, tensor<2048xf32>) -> (tensor<64x7x7x2048xbf16>, tensor<2048xf32>, tensor<2048xf32>)
  return
}
)mlir";
  OwningOpRef<ModuleOp> last = parseSourceString<ModuleOp>(kLast, &context);
  ASSERT_TRUE(last);
  std::vector<int64_t> bytes;
  for (Operation &op : (*last->getOps<func::FuncOp>().begin())
                           .getBody()
                           .front()
                           .without_terminator())
    bytes.push_back(
        dyn_cast<::mlir::memopt::CostOpInterface>(&op).getWorkspaceBytes());
  ASSERT_EQ(bytes.size(), 3u);
  EXPECT_EQ(bytes[0], ws::batchNormTrainingLastBytes(256, 12544));
  EXPECT_EQ(bytes[0], 392 * 256 * 2 * 4);
  EXPECT_EQ(bytes[1], 1024 * 64 * 2 * 4);
  EXPECT_EQ(bytes[2], 98 * 2048 * 2 * 4); // 3136 rows / 32
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
