// RUN: memopt-compile %s --lower-only --emit source -o %t --quiet
// RUN: FileCheck %s < %t.cpp

// A planned data-parallel step (memopt-data-parallel, shard=optimizer, 4
// ranks): the collectives become runtime calls; the sharded update runs
// once over the rank's chunk of the 9-element parameter (2 elements at
// rank * 2, element [0, 2) of each shard) and once over the tail (element
// 8, shard element 2); the program table says 4 ranks, ZeRO-1, and which
// weight is a shard of which parameter.
// CHECK: const int32_t kShardOf[] = {-1, 0, -1};
// CHECK: reduceScatter(ctx, "scatter", CollectiveReduction::Average, 4, [[G:t[0-9]+]], [[S:t[0-9]+]]);
// CHECK: const int64_t rank = communicatorRank(ctx);
// CHECK-NEXT: (void)rank;
// CHECK-NEXT: {
// CHECK-NEXT: TensorRef buffer = ref(W + 256 + size_t(0) * 4, DType::F32, {2});
// CHECK-NEXT: sgdUpdate(ctx, "update", 0.899999976f, 0.0f, ref(W + 0 + size_t(rank * 2) * 4, DType::F32, {2}), ref(arena + 256 + size_t(0) * 4, DType::F32, {2}), &buffer, {{t[0-9]+}});
// CHECK: TensorRef buffer = ref(W + 256 + size_t(2) * 4, DType::F32, {1});
// CHECK-NEXT: sgdUpdate(ctx, "update", 0.899999976f, 0.0f, ref(W + 0 + size_t(8) * 4, DType::F32, {1}), ref(arena + 256 + size_t(2) * 4, DType::F32, {1}), &buffer, {{t[0-9]+}});
// CHECK: allGather(ctx, "gather", 4, {{t[0-9]+}});
// CHECK: allReduce(ctx, "reduce", CollectiveReduction::Sum, {{t[0-9]+}}, {{t[0-9]+}});
// CHECK: kInputs, kOutputs, kWeights, run, 1, 1, 4, 1, kShardOf, 0, 0, 0, nullptr, nullptr, nullptr};
func.func @main(%x: tensor<9xf32> {memopt.name = "x"}) -> (tensor<f32> {memopt.name = "loss"})
    attributes {memopt.arena_size = 512 : i64, memopt.weights_size = 768 : i64, memopt.data_parallel = {ranks = 4 : i64, shard = "optimizer"}} {
  %w = memopt.variable "w" {initial_value = dense<0.5> : tensor<3x3xf32>, role = "parameter", memopt.weight_offset = 0 : i64} : tensor<3x3xf32>
  %m = memopt.variable "w.momentum_buffer" {role = "optimizer_state", memopt.weight_offset = 256 : i64} : tensor<3xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate", memopt.weight_offset = 512 : i64} : tensor<f32>
  %g = memopt.relu %x {memopt.offsets = array<i64: 0>} : tensor<9xf32> loc("grad")
  %gw = memopt.reshape %g {memopt.offsets = array<i64: 0>} : (tensor<9xf32>) -> tensor<3x3xf32> loc("view")
  %s = memopt.reduce_scatter %gw {ranks = 4 : i64, memopt.offsets = array<i64: 256>} : (tensor<3x3xf32>) -> tensor<3xf32> loc("scatter")
  memopt.sgd_update %w, %s, momentum %m, lr %lr {momentum = 0.9 : f32, shards = 4 : i64, memopt.offsets = array<i64>} : tensor<3x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32> loc("update")
  memopt.all_gather %w {ranks = 4 : i64, memopt.offsets = array<i64>} : tensor<3x3xf32> loc("gather")
  %r = memopt.all_reduce %x {reduction = "sum", memopt.offsets = array<i64: 384>} : (tensor<9xf32>) -> tensor<9xf32> loc("reduce")
  %l = memopt.reduce_sum %r {axes = array<i64: 0>, keepdims = 0 : i64, memopt.offsets = array<i64: -1>} : (tensor<9xf32>) -> tensor<f32> loc("loss")
  return %l : tensor<f32>
}
