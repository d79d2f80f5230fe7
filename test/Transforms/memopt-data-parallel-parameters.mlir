// ZeRO-3 (memopt-data-parallel shard=parameters): the parameter variable holds
// this rank's shard, the whole parameter is gathered into the arena right
// before its first forward use and again before its first backward use, the
// gradient is reduce-scattered into the shard and the update is a plain
// update of shard-shaped tensors (no all-gather after it).
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-data-parallel="ranks=4 shard=parameters" | FileCheck %s
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-data-parallel="ranks=4 shard=parameters report=true" -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-data-parallel="ranks=1 shard=parameters report=true" | FileCheck %s --check-prefix=ONE

// SGD with momentum on a 3x3 parameter (9 elements over 4 ranks: chunks of 2
// and a tail of 1, shards of 3). The forward (what the returned loss depends
// on) reads w through the first gather; the backward's read through the
// second, placed right before it.
// CHECK-LABEL: func.func @sgd
// CHECK-SAME: memopt.data_parallel = {ranks = 4 : i64, shard = "parameters"}
// CHECK: %[[W:.*]] = memopt.variable "w" {initial_value = dense<{{.*}}> : tensor<3x3xf32>, memopt.shards = 4 : i64, role = "parameter"} : tensor<3xf32>
// CHECK: %[[M:.*]] = memopt.variable "w.momentum_buffer" {role = "optimizer_state"} : tensor<3xf32>
// CHECK: %[[F:.*]] = memopt.gather_parameter %[[W]] {ranks = 4 : i64} : (tensor<3xf32>) -> tensor<3x3xf32>
// CHECK-NEXT: %[[Y:.*]] = memopt.mul %{{.*}}, %[[F]]
// CHECK-NEXT: %[[D:.*]] = memopt.relu %[[Y]]
// CHECK-NEXT: %[[B:.*]] = memopt.gather_parameter %[[W]] {ranks = 4 : i64} : (tensor<3xf32>) -> tensor<3x3xf32>
// CHECK-NEXT: %[[G:.*]] = memopt.mul %[[D]], %[[B]]
// CHECK-NEXT: %[[S:.*]] = memopt.reduce_scatter %[[G]] {ranks = 4 : i64} : (tensor<3x3xf32>) -> tensor<3xf32>
// CHECK-NEXT: memopt.sgd_update %[[W]], %[[S]], momentum %[[M]], lr %{{.*}} {momentum = 0.899999976 : f32} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>
// CHECK-NOT: memopt.all_gather
// CHECK: return %[[Y]]
// REPORT: memopt-data-parallel: 4 ranks, shard parameters (ZeRO-3): 1 gradient reduce-scatters, 2 parameter gathers of 1 sharded parameters; parameters per rank 12 of 36 bytes; optimizer state per rank 12 of 36 bytes
// One rank owns every element: nothing is sharded.
// ONE: memopt-data-parallel: shard parameters over 1 rank is shard none
// ONE-LABEL: func.func @sgd
// ONE-NOT: memopt.gather_parameter
// ONE: memopt.all_reduce
func.func @sgd(%x: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %w = memopt.variable "w" {initial_value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]> : tensor<3x3xf32>, role = "parameter"} : tensor<3x3xf32>
  %m = memopt.variable "w.momentum_buffer" {role = "optimizer_state"} : tensor<3x3xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %y = memopt.mul %x, %w : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  %d = memopt.relu %y : tensor<3x3xf32>
  %g = memopt.mul %d, %w : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  memopt.sgd_update %w, %g, momentum %m, lr %lr {momentum = 0.9 : f32} : tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x3xf32>, tensor<f32>
  return %y : tensor<3x3xf32>
}

// -----

// Gradient accumulation (AdamW, 10 elements over 4 ranks: shards of 4): as
// ZeRO-2, every micro-batch's gradient is reduce-scattered and summed into a
// shard-shaped accumulator by the update, gated on the last micro-step; the
// parameter is gathered on every micro-batch.
// CHECK-LABEL: func.func @accumulate
// CHECK-DAG: %[[V:.*]] = memopt.variable "v" {{.*}}memopt.shards = 4 : i64{{.*}} : tensor<4xf32>
// CHECK-DAG: memopt.variable "v.exp_avg" {role = "optimizer_state"} : tensor<4xf32>
// CHECK-DAG: %[[ACC:.*]] = memopt.variable "v.grad" {role = "gradient_accumulator"} : tensor<4xf32>
// CHECK: memopt.gather_parameter %[[V]] {ranks = 4 : i64} : (tensor<4xf32>) -> tensor<10xf32>
// CHECK: %[[S:.*]] = memopt.reduce_scatter %{{.*}} {ranks = 4 : i64} : (tensor<10xf32>) -> tensor<4xf32>
// CHECK-NEXT: memopt.adamw_update %[[V]], %[[S]], {{.*}} accumulate %[[ACC]], micro_step %{{.*}} {accumulation_steps = 2 : i64} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<4xf32>, tensor<f32>
// CHECK-NOT: memopt.all_gather
func.func @accumulate(%x: tensor<10xf32>) -> tensor<10xf32> {
  %v = memopt.variable "v" {initial_value = dense<0.5> : tensor<10xf32>, role = "parameter"} : tensor<10xf32>
  %a = memopt.variable "v.exp_avg" {role = "optimizer_state"} : tensor<10xf32>
  %b = memopt.variable "v.exp_avg_sq" {role = "optimizer_state"} : tensor<10xf32>
  %acc = memopt.variable "v.grad" {role = "gradient_accumulator"} : tensor<10xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %step = memopt.variable "memopt.step" {initial_value = dense<0.0> : tensor<f32>, role = "step"} : tensor<f32>
  %micro = memopt.variable "memopt.micro_step" {initial_value = dense<0.0> : tensor<f32>, role = "micro_step"} : tensor<f32>
  %y = memopt.mul %x, %v : (tensor<10xf32>, tensor<10xf32>) -> tensor<10xf32>
  %g = memopt.relu %x : tensor<10xf32>
  memopt.adamw_update %v, %g, %a, %b, lr %lr, step %step accumulate %acc, micro_step %micro {accumulation_steps = 2 : i64} : tensor<10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<f32>, tensor<f32>, tensor<10xf32>, tensor<f32>
  return %y : tensor<10xf32>
}

// -----

// Mixed precision: the forward reads only the f16 copy of the f32 master, so
// the forward gather gathers the f16 copy itself (FSDP's param_dtype: half
// the bytes; the f32 shard is cast into place); the backward user read the
// same copy and gets a gather of its own, of f16 too, so no whole copy is
// held across the step. The gradient is widened and reduce-scattered in f32
// (reduce-dtype f32, the default).
// CHECK-LABEL: func.func @mixed
// CHECK: %[[W:.*]] = memopt.variable "w" {{.*}} : tensor<3xf32>
// CHECK: %[[F:.*]] = memopt.gather_parameter %[[W]] {ranks = 4 : i64} : (tensor<3xf32>) -> tensor<3x3xf16>
// CHECK-NEXT: %[[Y:.*]] = memopt.mul %{{.*}}, %[[F]]
// CHECK: %[[B:.*]] = memopt.gather_parameter %[[W]] {ranks = 4 : i64} : (tensor<3xf32>) -> tensor<3x3xf16>
// CHECK-NEXT: %[[G:.*]] = memopt.mul %{{.*}}, %[[B]]
// CHECK-NEXT: %[[WIDE:.*]] = memopt.cast %[[G]] : (tensor<3x3xf16>) -> tensor<3x3xf32>
// CHECK-NEXT: memopt.reduce_scatter %[[WIDE]] {ranks = 4 : i64} : (tensor<3x3xf32>) -> tensor<3xf32>
// CHECK-NOT: memopt.cast %{{.*}} : (tensor<3x3xf32>) -> tensor<3x3xf16>
// REPORT: memopt-data-parallel: 4 ranks, shard parameters (ZeRO-3): 1 gradient reduce-scatters, 2 parameter gathers (2 of the low copy) of 1 sharded parameters
func.func @mixed(%x: tensor<3x3xf16>) -> tensor<3x3xf16> {
  %w = memopt.variable "w" {initial_value = dense<0.25> : tensor<3x3xf32>, role = "parameter"} : tensor<3x3xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %l = memopt.cast %w : (tensor<3x3xf32>) -> tensor<3x3xf16>
  %y = memopt.mul %x, %l : (tensor<3x3xf16>, tensor<3x3xf16>) -> tensor<3x3xf16>
  %d = memopt.relu %y : tensor<3x3xf16>
  %g = memopt.mul %d, %l : (tensor<3x3xf16>, tensor<3x3xf16>) -> tensor<3x3xf16>
  memopt.sgd_update %w, %g, lr %lr : tensor<3x3xf32>, tensor<3x3xf16>, tensor<f32>
  return %y : tensor<3x3xf16>
}


// -----

// An f32 reader besides the low copy's (a bias added in f32, say): the
// forward gathers the f32 master and casts it, as before; the backward reads
// the low copy only and gathers it in bf16.
// CHECK-LABEL: func.func @mixed_f32_reader
// CHECK: %[[W:.*]] = memopt.variable "w" {{.*}} : tensor<2xf32>
// CHECK: %[[F:.*]] = memopt.gather_parameter %[[W]] {ranks = 4 : i64} : (tensor<2xf32>) -> tensor<8xf32>
// CHECK-DAG: memopt.cast %[[F]] : (tensor<8xf32>) -> tensor<8xbf16>
// CHECK-DAG: memopt.add %{{.*}}, %[[F]]
// CHECK: %[[B:.*]] = memopt.gather_parameter %[[W]] {ranks = 4 : i64} : (tensor<2xf32>) -> tensor<8xbf16>
// CHECK-NEXT: memopt.mul %{{.*}}, %[[B]]
// REPORT: 2 parameter gathers (1 of the low copy) of 1 sharded parameters
func.func @mixed_f32_reader(%x: tensor<8xbf16>, %z: tensor<8xf32>) -> (tensor<8xbf16>, tensor<8xf32>) {
  %w = memopt.variable "w" {initial_value = dense<0.25> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %l = memopt.cast %w : (tensor<8xf32>) -> tensor<8xbf16>
  %y = memopt.mul %x, %l : (tensor<8xbf16>, tensor<8xbf16>) -> tensor<8xbf16>
  %s = memopt.add %z, %w : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %d = memopt.relu %y : tensor<8xbf16>
  %g = memopt.mul %d, %l : (tensor<8xbf16>, tensor<8xbf16>) -> tensor<8xbf16>
  memopt.sgd_update %w, %g, lr %lr : tensor<8xf32>, tensor<8xbf16>, tensor<f32>
  return %y, %s : tensor<8xbf16>, tensor<8xf32>
}
