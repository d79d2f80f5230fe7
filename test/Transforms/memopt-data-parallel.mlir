// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-data-parallel="ranks=4" | FileCheck %s
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-data-parallel="ranks=4 shard=optimizer" | FileCheck %s --check-prefix=ZERO1
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-data-parallel="ranks=4 shard=gradients" | FileCheck %s --check-prefix=ZERO2
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-data-parallel="ranks=4 shard=optimizer report=true" -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-data-parallel="ranks=1 shard=gradients report=true" | FileCheck %s --check-prefix=ONE
// RUN: not memopt-opt %s --split-input-file --memopt-data-parallel="ranks=0" 2>&1 | FileCheck %s --check-prefix=RANKS
// RUN: not memopt-opt %s --split-input-file --memopt-data-parallel="ranks=2 shard=zero4" 2>&1 | FileCheck %s --check-prefix=MODE

// SGD with momentum on a 3x3 parameter (9 elements: over 4 ranks, chunks of
// 2 and a tail of 1, so a shard holds 3 elements).
// none (DDP): the gradient is averaged in place right where it is complete,
// before its update; the update is unchanged.
// CHECK-LABEL: func.func @sgd
// CHECK-SAME: memopt.data_parallel = {ranks = 4 : i64, shard = "none"}
// CHECK: %[[M:.*]] = memopt.variable "w.momentum_buffer" {role = "optimizer_state"} : tensor<3x3xf32>
// CHECK: %[[G:.*]] = memopt.relu
// CHECK-NEXT: %[[R:.*]] = memopt.all_reduce %[[G]] : (tensor<3x3xf32>) -> tensor<3x3xf32>
// CHECK-NEXT: memopt.sgd_update %{{.*}}, %[[R]], momentum %[[M]], lr
// CHECK-NOT: memopt.all_gather
// ZeRO-1: a reduce-scatter gives the rank its 3-element shard of the
// averaged gradient, the momentum buffer is a shard, the update is sharded
// and the parameter is all-gathered after it.
// ZERO1-LABEL: func.func @sgd
// ZERO1-SAME: memopt.data_parallel = {ranks = 4 : i64, shard = "optimizer"}
// ZERO1: %[[W:.*]] = memopt.variable "w" {{.*}}: tensor<3x3xf32>
// ZERO1: %[[M:.*]] = memopt.variable "w.momentum_buffer" {role = "optimizer_state"} : tensor<3xf32>
// ZERO1: %[[G:.*]] = memopt.relu
// ZERO1-NEXT: %[[S:.*]] = memopt.reduce_scatter %[[G]] {ranks = 4 : i64} : (tensor<3x3xf32>) -> tensor<3xf32>
// ZERO1-NEXT: memopt.sgd_update %[[W]], %[[S]], momentum %[[M]], lr %{{.*}} {momentum = 0.899999976 : f32, shards = 4 : i64} : tensor<3x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>
// ZERO1-NEXT: memopt.all_gather %[[W]] {ranks = 4 : i64} : tensor<3x3xf32>
// Without accumulation ZeRO-2 is the same program (the gradient is an arena
// buffer that dies at the reduce-scatter either way).
// ZERO2-LABEL: func.func @sgd
// ZERO2: memopt.reduce_scatter %{{.*}} {ranks = 4 : i64} : (tensor<3x3xf32>) -> tensor<3xf32>
// ZERO2-NEXT: memopt.sgd_update {{.*}}shards = 4 : i64
// ZERO2-NEXT: memopt.all_gather
// REPORT: memopt-data-parallel: 4 ranks, shard optimizer (ZeRO-1): 1 gradient reduce-scatters, 1 parameter all-gathers; optimizer state per rank 12 of 36 bytes
// One rank owns every element: shard=gradients is the all-reduce.
// ONE: memopt-data-parallel: shard gradients over 1 rank is shard none
// ONE-LABEL: func.func @sgd
// ONE-SAME: memopt.data_parallel = {ranks = 1 : i64, shard = "none"}
// ONE: memopt.all_reduce %{{.*}} : (tensor<3x3xf32>) -> tensor<3x3xf32>
// ONE-NOT: memopt.reduce_scatter
// RANKS: error: data-parallel ranks must be at least 1, got 0
// MODE: error: shard 'zero4' is not one of none, optimizer, gradients, parameters
func.func @sgd(%x: tensor<3x3xf32>) {
  %w = memopt.variable "w" {initial_value = dense<0.5> : tensor<3x3xf32>, role = "parameter"} : tensor<3x3xf32>
  %m = memopt.variable "w.momentum_buffer" {role = "optimizer_state"} : tensor<3x3xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %g = memopt.relu %x : tensor<3x3xf32>
  memopt.sgd_update %w, %g, momentum %m, lr %lr {momentum = 0.9 : f32} : tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x3xf32>, tensor<f32>
  return
}

// -----

// Gradient accumulation over 2 micro-batches (AdamW, 10 elements: chunks
// of 2 and a tail of 2 over 4 ranks, shards of 4).
// none: the all-reduce takes the accumulator and the micro-step (it sums
// every micro-batch and communicates on the last one only); the update is
// gated on the micro-step alone.
// CHECK-LABEL: func.func @accumulate
// CHECK: %[[ACC:.*]] = memopt.variable "v.grad" {role = "gradient_accumulator"} : tensor<10xf32>
// CHECK: %[[MICRO:.*]] = memopt.variable "memopt.micro_step"
// CHECK: %[[R:.*]] = memopt.all_reduce %{{.*}}, accumulate %[[ACC]], micro_step %[[MICRO]] {accumulation_steps = 2 : i64} : (tensor<10xf32>, tensor<10xf32>, tensor<f32>) -> tensor<10xf32>
// CHECK-NEXT: memopt.adamw_update %{{.*}}, %[[R]], %{{.*}}, %{{.*}}, lr %{{.*}}, step %{{.*}} micro_step %[[MICRO]] {accumulation_steps = 2 : i64}
// ZeRO-1: whole accumulators, reduce-scattered on the last micro-step; the
// moments are shards; update and all-gather on the last micro-step.
// ZERO1-LABEL: func.func @accumulate
// ZERO1-DAG: %[[ACC:.*]] = memopt.variable "v.grad" {role = "gradient_accumulator"} : tensor<10xf32>
// ZERO1-DAG: memopt.variable "v.exp_avg" {role = "optimizer_state"} : tensor<4xf32>
// ZERO1-DAG: memopt.variable "v.exp_avg_sq" {role = "optimizer_state"} : tensor<4xf32>
// ZERO1-DAG: %[[MICRO:.*]] = memopt.variable "memopt.micro_step"
// ZERO1: %[[S:.*]] = memopt.reduce_scatter %{{.*}}, accumulate %[[ACC]], micro_step %[[MICRO]] {accumulation_steps = 2 : i64, ranks = 4 : i64} : (tensor<10xf32>, tensor<10xf32>, tensor<f32>) -> tensor<4xf32>
// ZERO1-NEXT: memopt.adamw_update %{{.*}}, %[[S]], {{.*}} micro_step %[[MICRO]] {accumulation_steps = 2 : i64, shards = 4 : i64}
// ZERO1-NEXT: memopt.all_gather %{{.*}}, micro_step %[[MICRO]] {accumulation_steps = 2 : i64, ranks = 4 : i64}
// ZeRO-2: every micro-batch's gradient is reduce-scattered; the
// accumulator is a shard that the sharded update sums into.
// ZERO2-LABEL: func.func @accumulate
// ZERO2-DAG: %[[ACC:.*]] = memopt.variable "v.grad" {role = "gradient_accumulator"} : tensor<4xf32>
// ZERO2-DAG: %[[MICRO:.*]] = memopt.variable "memopt.micro_step"
// ZERO2: %[[S:.*]] = memopt.reduce_scatter %{{.*}} {ranks = 4 : i64} : (tensor<10xf32>) -> tensor<4xf32>
// ZERO2-NEXT: memopt.adamw_update %{{.*}}, %[[S]], {{.*}} accumulate %[[ACC]], micro_step %[[MICRO]] {accumulation_steps = 2 : i64, shards = 4 : i64}
// ZERO2-NEXT: memopt.all_gather %{{.*}}, micro_step %[[MICRO]] {accumulation_steps = 2 : i64, ranks = 4 : i64}
func.func @accumulate(%x: tensor<10xf32>) {
  %v = memopt.variable "v" {initial_value = dense<0.5> : tensor<10xf32>, role = "parameter"} : tensor<10xf32>
  %a = memopt.variable "v.exp_avg" {role = "optimizer_state"} : tensor<10xf32>
  %b = memopt.variable "v.exp_avg_sq" {role = "optimizer_state"} : tensor<10xf32>
  %acc = memopt.variable "v.grad" {role = "gradient_accumulator"} : tensor<10xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %step = memopt.variable "memopt.step" {initial_value = dense<0.0> : tensor<f32>, role = "step"} : tensor<f32>
  %micro = memopt.variable "memopt.micro_step" {initial_value = dense<0.0> : tensor<f32>, role = "micro_step"} : tensor<f32>
  %g = memopt.relu %x : tensor<10xf32>
  memopt.adamw_update %v, %g, %a, %b, lr %lr, step %step accumulate %acc, micro_step %micro {accumulation_steps = 2 : i64} : tensor<10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<f32>, tensor<f32>, tensor<10xf32>, tensor<f32>
  return
}

// -----

// Not a training step: nothing to make data-parallel.
// expected-error @+1 {{memopt-data-parallel needs a training step with optimizer updates (run memopt-autodiff first)}}
func.func @inference(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = memopt.relu %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Run once: a step with collectives already is refused.
// expected-error @+1 {{the function is data-parallel already: run memopt-data-parallel once}}
func.func @twice(%x: tensor<4xf32>) {
  %w = memopt.variable "w" {initial_value = dense<0.5> : tensor<4xf32>, role = "parameter"} : tensor<4xf32>
  %m = memopt.variable "w.momentum_buffer" {role = "optimizer_state"} : tensor<4xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %r = memopt.all_reduce %x : (tensor<4xf32>) -> tensor<4xf32>
  memopt.sgd_update %w, %r, momentum %m, lr %lr {momentum = 0.9 : f32} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>
  return
}
