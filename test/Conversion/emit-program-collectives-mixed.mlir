// RUN: memopt-compile %s --lower-only --emit source -o %t --quiet
// RUN: FileCheck %s < %t.cpp

// A planned mixed-precision data-parallel step (memopt-data-parallel,
// shard=optimizer reduce-dtype=low, 4 ranks, f16 loss scaling): the overflow
// flag's all-reduce is CollectiveReduction::Max; the f16 gradient is
// reduce-scattered in f16 and the sharded update reads 2-byte views of its
// f16 shard (the chunk at element 0, the tail at element 2) with 4-byte
// views of the f32 parameter and momentum buffer.
// CHECK: foundInf(ctx, "check"
// CHECK: allReduce(ctx, "agree", CollectiveReduction::Max, [[F:t[0-9]+]], {{t[0-9]+}});
// CHECK: reduceScatter(ctx, "scatter", CollectiveReduction::Average, 4, {{t[0-9]+}}, {{t[0-9]+}});
// CHECK: sgdUpdate(ctx, "update", 0.899999976f, 0.0f, ref(W + 0 + size_t(rank * 2) * 4, DType::F32, {2}), ref(arena + 256 + size_t(0) * 2, DType::F16, {2}), &buffer
// CHECK: sgdUpdate(ctx, "update", 0.899999976f, 0.0f, ref(W + 0 + size_t(8) * 4, DType::F32, {1}), ref(arena + 256 + size_t(2) * 2, DType::F16, {1}), &buffer
// CHECK: updateLossScale(ctx, "scale"
func.func @main(%x: tensor<9xf16> {memopt.name = "x"}) -> (tensor<f32> {memopt.name = "loss"})
    attributes {memopt.arena_size = 512 : i64, memopt.weights_size = 1024 : i64, memopt.data_parallel = {ranks = 4 : i64, reduce_dtype = "low", shard = "optimizer"}} {
  %w = memopt.variable "w" {initial_value = dense<0.5> : tensor<3x3xf32>, role = "parameter", memopt.weight_offset = 0 : i64} : tensor<3x3xf32>
  %m = memopt.variable "w.momentum_buffer" {role = "optimizer_state", memopt.weight_offset = 256 : i64} : tensor<3xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate", memopt.weight_offset = 512 : i64} : tensor<f32>
  %ls = memopt.variable "memopt.loss_scale" {initial_value = dense<1024.0> : tensor<f32>, role = "loss_scale", memopt.weight_offset = 640 : i64} : tensor<f32>
  %st = memopt.variable "memopt.loss_scale_state" {initial_value = dense<0.0> : tensor<2xf32>, role = "loss_scale_state", memopt.weight_offset = 768 : i64} : tensor<2xf32>
  %g = memopt.relu %x {memopt.offsets = array<i64: 0>} : tensor<9xf16> loc("grad")
  %gw = memopt.reshape %g {memopt.offsets = array<i64: 0>} : (tensor<9xf16>) -> tensor<3x3xf16> loc("view")
  %f = memopt.found_inf %gw {memopt.offsets = array<i64: 128>} : (tensor<3x3xf16>) -> tensor<f32> loc("check")
  %a = memopt.all_reduce %f {reduction = "max", memopt.offsets = array<i64: 128>} : (tensor<f32>) -> tensor<f32> loc("agree")
  %s = memopt.reduce_scatter %gw {ranks = 4 : i64, memopt.offsets = array<i64: 256>} : (tensor<3x3xf16>) -> tensor<3xf16> loc("scatter")
  memopt.sgd_update %w, %s, momentum %m, lr %lr loss_scale %ls, found_inf %a {momentum = 0.9 : f32, shards = 4 : i64, memopt.offsets = array<i64>} : tensor<3x3xf32>, tensor<3xf16>, tensor<3xf32>, tensor<f32>, tensor<f32>, tensor<f32> loc("update")
  memopt.update_loss_scale %ls, %st, found_inf %a {memopt.offsets = array<i64>} : tensor<f32>, tensor<2xf32>, tensor<f32> loc("scale")
  memopt.all_gather %w {ranks = 4 : i64, memopt.offsets = array<i64>} : tensor<3x3xf32> loc("gather")
  %c = memopt.cast %x {memopt.offsets = array<i64: 384>} : (tensor<9xf16>) -> tensor<9xf32> loc("wide")
  %l = memopt.reduce_sum %c {axes = array<i64: 0>, keepdims = 0 : i64, memopt.offsets = array<i64: -1>} : (tensor<9xf32>) -> tensor<f32> loc("loss")
  return %l : tensor<f32>
}
