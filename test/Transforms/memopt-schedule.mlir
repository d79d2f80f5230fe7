// RUN: memopt-opt %s -split-input-file --memopt-schedule | FileCheck %s
// RUN: memopt-opt %s -split-input-file --mlir-disable-threading --memopt-schedule=report -o /dev/null | FileCheck %s --check-prefix=REPORT

// Two branches that each expand to 16 KiB and shrink to 1 KiB. Running both
// expansions first keeps 32 KiB alive; finishing one branch before starting
// the other needs about half.
// CHECK-LABEL: func.func @two_branches
// CHECK: %[[A1:.*]] = memopt.exp %arg0
// CHECK-NEXT: %[[A2:.*]] = memopt.matmul %[[A1]]
// CHECK-NEXT: %[[B1:.*]] = memopt.exp %arg0
// CHECK-NEXT: %[[B2:.*]] = memopt.matmul %[[B1]]
// CHECK-NEXT: memopt.add %[[A2]], %[[B2]]
// a1 + b1 + a2 = 16384 + 16384 + 1024 before; b1 + a2 + b2 after.
// REPORT: memopt-schedule @two_branches: max-live before 33792, after 18432 (greedy)
func.func @two_branches(%x: tensor<64x64xf32>) -> tensor<64x4xf32> {
  %w = memopt.constant dense<0.5> : tensor<64x4xf32>
  %a1 = memopt.exp %x : tensor<64x64xf32>
  %b1 = memopt.exp %x : tensor<64x64xf32>
  %a2 = memopt.matmul %a1, %w : (tensor<64x64xf32>, tensor<64x4xf32>) -> tensor<64x4xf32>
  %b2 = memopt.matmul %b1, %w : (tensor<64x64xf32>, tensor<64x4xf32>) -> tensor<64x4xf32>
  %s = memopt.add %a2, %b2 : (tensor<64x4xf32>, tensor<64x4xf32>) -> tensor<64x4xf32>
  return %s : tensor<64x4xf32>
}

// -----

// An order that is already best is kept as it is.
// CHECK-LABEL: func.func @already_good
// CHECK: memopt.exp
// CHECK-NEXT: memopt.relu
// CHECK-NEXT: memopt.exp
// REPORT: memopt-schedule @already_good: max-live before 64, after 64 (original)
func.func @already_good(%x: tensor<16xf32>) -> tensor<16xf32> {
  %a = memopt.exp %x : tensor<16xf32>
  %b = memopt.relu %a : tensor<16xf32>
  %c = memopt.exp %b : tensor<16xf32>
  return %c : tensor<16xf32>
}

// -----

// A variable written twice in one step (a data-parallel sharded update, then
// the all-gather that completes the parameter) and read after both: the
// writes keep their program order and the later read stays after them,
// although a scalar reduction (4 bytes) is what the greedy scheduler would
// otherwise run first.
// CHECK-LABEL: func.func @state_written_twice
// CHECK: memopt.mul
// CHECK: memopt.reduce_scatter
// CHECK-NEXT: memopt.sgd_update
// CHECK-NEXT: memopt.all_gather
// CHECK-NEXT: memopt.reduce_sum %[[W:.*]] {
func.func @state_written_twice(%x: tensor<1024xf32>) -> (tensor<1024xf32>, tensor<f32>) {
  %w = memopt.variable "w" {initial_value = dense<0.5> : tensor<1024xf32>, role = "parameter"} : tensor<1024xf32>
  %m = memopt.variable "w.momentum_buffer" {role = "optimizer_state"} : tensor<256xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %y = memopt.mul %x, %w : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %g = memopt.exp %y : tensor<1024xf32>
  %s = memopt.reduce_scatter %g {ranks = 4 : i64} : (tensor<1024xf32>) -> tensor<256xf32>
  memopt.sgd_update %w, %s, momentum %m, lr %lr {momentum = 0.9 : f32, shards = 4 : i64} : tensor<1024xf32>, tensor<256xf32>, tensor<256xf32>, tensor<f32>
  memopt.all_gather %w {ranks = 4 : i64} : tensor<1024xf32>
  %t = memopt.reduce_sum %w {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<1024xf32>) -> tensor<f32>
  return %y, %t : tensor<1024xf32>, tensor<f32>
}
