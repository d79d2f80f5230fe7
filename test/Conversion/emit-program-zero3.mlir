// RUN: memopt-compile %s --lower-only --emit source -o %t --quiet
// RUN: FileCheck %s < %t.cpp
// RUN: python3 -c "import os, sys; print(os.path.getsize(sys.argv[1]))" %t.weights | FileCheck %s --check-prefix=SIZE
// RUN: python3 -c "import struct, sys; d = open(sys.argv[1], 'rb').read(); print([struct.unpack_from('<3f', d, r * 768) for r in range(4)])" %t.weights | FileCheck %s --check-prefix=SHARDS

// A planned ZeRO-3 step (memopt-data-parallel shard=parameters, 4 ranks):
// the 9-element parameter w is a 3-element shard variable (chunk of 2, tail
// of 1) that is its own shard in kShardOf and has its whole 3x3 shape in
// kWholeWeights (offset -1); memopt.gather_parameter becomes gatherParameter
// from the shard into its arena buffer; the update of the shard is a plain
// one (no rank offsets); the program table says ZeRO-3.
// CHECK: const int32_t kShardOf[] = {0, 0, -1};
// CHECK: const TensorInfo kWholeWeights[] = {
// CHECK-NEXT: {"w", DType::F32, 2, {3, 3}, -1, nullptr, WeightRole::Parameter},
// CHECK-NEXT: {"w.momentum_buffer", DType::F32, 1, {3}, 256, nullptr, WeightRole::OptimizerState},
// CHECK: [[SHARD:t[0-9]+]] = ref(W + 0, DType::F32, {3});
// CHECK: [[WHOLE:t[0-9]+]] = ref(arena + 0, DType::F32, {3, 3});
// CHECK-NEXT: gatherParameter(ctx, "w.gathered", 4, [[SHARD]], [[WHOLE]]);
// CHECK: reduceScatter(ctx, "scatter", CollectiveReduction::Average, 4, {{t[0-9]+}}, [[S:t[0-9]+]]);
// CHECK-NOT: communicatorRank
// CHECK: sgdUpdate(ctx, "update", 0.899999976f, 0.0f, [[SHARD]], [[S]], &buffer,
// CHECK: kInputs, kOutputs, kWeights, run, 1, 1, 4, 3, kShardOf, 0, 0, 0, nullptr, nullptr, kWholeWeights};
// The weight file: one 768-byte region per rank, each with its shard of
// w = 0..8 (rank r: elements 2r, 2r + 1, then the tail 8), then the trailer.
// SIZE: 3096
// SHARDS: [(0.0, 1.0, 8.0), (2.0, 3.0, 8.0), (4.0, 5.0, 8.0), (6.0, 7.0, 8.0)]
func.func @main(%x: tensor<3x3xf32> {memopt.name = "x"}) -> (tensor<f32> {memopt.name = "loss"})
    attributes {memopt.arena_size = 512 : i64, memopt.weights_size = 768 : i64, memopt.data_parallel = {ranks = 4 : i64, shard = "parameters"}} {
  %w = memopt.variable "w" {initial_value = dense<[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]]> : tensor<3x3xf32>, memopt.shards = 4 : i64, role = "parameter", memopt.weight_offset = 0 : i64} : tensor<3xf32>
  %m = memopt.variable "w.momentum_buffer" {role = "optimizer_state", memopt.weight_offset = 256 : i64} : tensor<3xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate", memopt.weight_offset = 512 : i64} : tensor<f32>
  %f = memopt.gather_parameter %w {ranks = 4 : i64, memopt.offsets = array<i64: 0>} : (tensor<3xf32>) -> tensor<3x3xf32> loc("w.gathered")
  %g = memopt.mul %x, %f {memopt.offsets = array<i64: 64>} : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32> loc("grad")
  %s = memopt.reduce_scatter %g {ranks = 4 : i64, memopt.offsets = array<i64: 128>} : (tensor<3x3xf32>) -> tensor<3xf32> loc("scatter")
  memopt.sgd_update %w, %s, momentum %m, lr %lr {momentum = 0.9 : f32, memopt.offsets = array<i64>} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32> loc("update")
  %l = memopt.reduce_sum %x {axes = array<i64: 0, 1>, keepdims = 0 : i64, memopt.offsets = array<i64: -1>} : (tensor<3x3xf32>) -> tensor<f32> loc("loss")
  return %l : tensor<f32>
}
