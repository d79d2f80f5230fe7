// RUN: memopt-compile %s --lower-only --emit source -o %t --quiet
// RUN: FileCheck %s < %t.cpp

// ZeRO-3 gather groups (memopt-bucket-collectives gather-mib): a group's
// gatherParameter calls are bracketed by beginCollectives / endCollectives
// (one NCCL group on the communication stream, issued while the previous
// layer computes) and its wait is waitCollectives before the first reader.
// Gathers of the bf16 copy pass a bf16 whole: the runtime casts the f32
// shard into place and gathers half the bytes.
// CHECK: beginCollectives(ctx, 0);
// CHECK: gatherParameter(ctx, "w.gathered", 4, {{t[0-9]+}}, [[W:t[0-9]+]]);
// CHECK: endCollectives(ctx, 0);
// CHECK-NEXT: waitCollectives(ctx, "wait_0", 0);
// CHECK: beginCollectives(ctx, 1);
// CHECK: [[V:t[0-9]+]] = ref(arena + 64, DType::BF16, {3, 3});
// CHECK-NEXT: gatherParameter(ctx, "v.gathered", 4, {{t[0-9]+}}, [[V]]);
// CHECK: endCollectives(ctx, 1);
// CHECK: "y", "memopt.mul"
// CHECK: waitCollectives(ctx, "wait_1", 1);
// CHECK: "z", "memopt.mul"
func.func @main(%x: tensor<3x3xbf16> {memopt.name = "x"}) -> (tensor<f32> {memopt.name = "loss"})
    attributes {memopt.arena_size = 512 : i64, memopt.weights_size = 768 : i64, memopt.data_parallel = {ranks = 4 : i64, shard = "parameters"}} {
  %w = memopt.variable "w" {initial_value = dense<0.5> : tensor<3x3xf32>, memopt.shards = 4 : i64, role = "parameter", memopt.weight_offset = 0 : i64} : tensor<3xf32>
  %v = memopt.variable "v" {initial_value = dense<0.25> : tensor<3x3xf32>, memopt.shards = 4 : i64, role = "parameter", memopt.weight_offset = 256 : i64} : tensor<3xf32>
  %f = memopt.gather_parameter %w {bucket = 0 : i64, ranks = 4 : i64, memopt.offsets = array<i64: 0>} : (tensor<3xf32>) -> tensor<3x3xbf16> loc("w.gathered")
  memopt.wait_collectives %w, %f {bucket = 0 : i64, memopt.offsets = array<i64>} : tensor<3xf32>, tensor<3x3xbf16> loc("wait_0")
  %e = memopt.gather_parameter %v {bucket = 1 : i64, ranks = 4 : i64, memopt.offsets = array<i64: 64>} : (tensor<3xf32>) -> tensor<3x3xbf16> loc("v.gathered")
  %y = memopt.mul %x, %f {memopt.offsets = array<i64: 128>} : (tensor<3x3xbf16>, tensor<3x3xbf16>) -> tensor<3x3xbf16> loc("y")
  memopt.wait_collectives %v, %e {bucket = 1 : i64, memopt.offsets = array<i64>} : tensor<3xf32>, tensor<3x3xbf16> loc("wait_1")
  %z = memopt.mul %y, %e {memopt.offsets = array<i64: 192>} : (tensor<3x3xbf16>, tensor<3x3xbf16>) -> tensor<3x3xbf16> loc("z")
  %c = memopt.cast %z {memopt.offsets = array<i64: 256>} : (tensor<3x3xbf16>) -> tensor<3x3xf32> loc("widen")
  %l = memopt.reduce_sum %c {axes = array<i64: 0, 1>, keepdims = 0 : i64, memopt.offsets = array<i64: -1>} : (tensor<3x3xf32>) -> tensor<f32> loc("loss")
  return %l : tensor<f32>
}
