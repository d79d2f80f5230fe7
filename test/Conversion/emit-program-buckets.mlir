// RUN: memopt-compile %s --lower-only --emit source -o %t --quiet
// RUN: FileCheck %s < %t.cpp
// RUN: not memopt-compile %S/Inputs/emit-program-buckets-errors.mlir --lower-only --emit source -o %t.bad --quiet 2>&1 | FileCheck %s --check-prefix=ERR

// Buckets of memopt-bucket-collectives: a bucket's collectives are
// bracketed by beginCollectives / endCollectives (one NCCL group on the
// communication stream), each wait becomes waitCollectives, and a
// collective outside a bucket (the flag's max) is a plain call.
// CHECK: "grad_b", "memopt.exp"
// CHECK-NOT: Collectives
// CHECK: beginCollectives(ctx, 0);
// CHECK-NOT: Collectives
// CHECK: allReduce(ctx, "reduce_a", CollectiveReduction::Average,
// CHECK-NOT: Collectives
// CHECK: allReduce(ctx, "reduce_b", CollectiveReduction::Average,
// CHECK: "reduce_b", "memopt.all_reduce"
// CHECK-NEXT: }
// CHECK-NEXT: endCollectives(ctx, 0);
// CHECK: "grad_c", "memopt.tanh"
// CHECK-NEXT: }
// CHECK-NEXT: beginCollectives(ctx, 1);
// CHECK: allReduce(ctx, "reduce_c", CollectiveReduction::Average,
// CHECK: "reduce_c", "memopt.all_reduce"
// CHECK-NEXT: }
// CHECK-NEXT: endCollectives(ctx, 1);
// CHECK-NEXT: waitCollectives(ctx, "wait_0", 0);
// CHECK: sgdUpdate(ctx, "update_a",
// CHECK: waitCollectives(ctx, "wait_1", 1);
// CHECK: sgdUpdate(ctx, "update_c",
// CHECK-NOT: beginCollectives
// CHECK: allReduce(ctx, "flag", CollectiveReduction::Max,
// CHECK-NOT: endCollectives
// CHECK: kInputs, kOutputs, kWeights, run, 1, 1, 2, 0, nullptr, 0, 0, 0, nullptr, nullptr, nullptr};
// ERR: error: loc("early_wait"): 'memopt.wait_collectives' (ONNX node 'early_wait') waits for bucket 0, which no collective before it starts
func.func @main(%x: tensor<8xf32> {memopt.name = "x"}) -> (tensor<f32> {memopt.name = "loss"})
    attributes {memopt.arena_size = 256 : i64, memopt.weights_size = 256 : i64, memopt.data_parallel = {ranks = 2 : i64, shard = "none"}} {
  %a = memopt.variable "a" {initial_value = dense<0.5> : tensor<8xf32>, role = "parameter", memopt.weight_offset = 0 : i64} : tensor<8xf32>
  %b = memopt.variable "b" {initial_value = dense<0.5> : tensor<8xf32>, role = "parameter", memopt.weight_offset = 64 : i64} : tensor<8xf32>
  %c = memopt.variable "c" {initial_value = dense<0.5> : tensor<8xf32>, role = "parameter", memopt.weight_offset = 128 : i64} : tensor<8xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate", memopt.weight_offset = 192 : i64} : tensor<f32>
  %ga = memopt.relu %x {memopt.offsets = array<i64: 0>} : tensor<8xf32> loc("grad_a")
  %gb = memopt.exp %x {memopt.offsets = array<i64: 64>} : tensor<8xf32> loc("grad_b")
  %ra = memopt.all_reduce %ga {bucket = 0 : i64, memopt.in_place = 0 : i64, memopt.offsets = array<i64: 0>} : (tensor<8xf32>) -> tensor<8xf32> loc("reduce_a")
  %rb = memopt.all_reduce %gb {bucket = 0 : i64, memopt.in_place = 0 : i64, memopt.offsets = array<i64: 64>} : (tensor<8xf32>) -> tensor<8xf32> loc("reduce_b")
  %gc = memopt.tanh %x {memopt.offsets = array<i64: 128>} : tensor<8xf32> loc("grad_c")
  %rc = memopt.all_reduce %gc {bucket = 1 : i64, memopt.in_place = 0 : i64, memopt.offsets = array<i64: 128>} : (tensor<8xf32>) -> tensor<8xf32> loc("reduce_c")
  memopt.wait_collectives %ga, %ra, %gb, %rb {bucket = 0 : i64, memopt.offsets = array<i64>} : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32> loc("wait_0")
  memopt.sgd_update %a, %ra, lr %lr {memopt.offsets = array<i64>} : tensor<8xf32>, tensor<8xf32>, tensor<f32> loc("update_a")
  memopt.sgd_update %b, %rb, lr %lr {memopt.offsets = array<i64>} : tensor<8xf32>, tensor<8xf32>, tensor<f32> loc("update_b")
  memopt.wait_collectives %gc, %rc {bucket = 1 : i64, memopt.offsets = array<i64>} : tensor<8xf32>, tensor<8xf32> loc("wait_1")
  memopt.sgd_update %c, %rc, lr %lr {memopt.offsets = array<i64>} : tensor<8xf32>, tensor<8xf32>, tensor<f32> loc("update_c")
  %l = memopt.reduce_sum %x {axes = array<i64: 0>, keepdims = 0 : i64, memopt.offsets = array<i64: -1>} : (tensor<8xf32>) -> tensor<f32> loc("loss_sum")
  %f = memopt.all_reduce %x {reduction = "max", memopt.offsets = array<i64: 192>} : (tensor<8xf32>) -> tensor<8xf32> loc("flag")
  return %l : tensor<f32>
}
