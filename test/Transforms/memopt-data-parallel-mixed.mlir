// Mixed-precision data parallelism (memopt-data-parallel on an f16 / bf16
// training step): the type each gradient is reduced in, and the overflow
// flag of dynamic loss scaling agreed over the ranks.
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-data-parallel="ranks=4" | FileCheck %s
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-data-parallel="ranks=4 shard=optimizer" | FileCheck %s --check-prefix=ZERO1
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-data-parallel="ranks=4 shard=gradients reduce-dtype=low" | FileCheck %s --check-prefix=ZERO2-LOW
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-data-parallel="ranks=4 shard=gradients reduce-dtype=low report=true" -o /dev/null | FileCheck %s --check-prefix=REPORT
// With an f32 accumulator (none / optimizer with accumulation) the low type
// is refused; the step without accumulation is reduced in it.
// RUN: not memopt-opt %s --split-input-file --memopt-data-parallel="ranks=4 reduce-dtype=low" 2>/dev/null | FileCheck %s --check-prefix=LOW
// RUN: not memopt-opt %s --split-input-file --memopt-data-parallel="ranks=4 shard=optimizer reduce-dtype=low" 2>/dev/null | FileCheck %s --check-prefix=ZERO1-LOW
// RUN: not memopt-opt %s --split-input-file --memopt-data-parallel="ranks=4 reduce-dtype=low" 2>&1 >/dev/null | FileCheck %s --check-prefix=LOW-ACCUM
// RUN: not memopt-opt %s --split-input-file --memopt-data-parallel="ranks=2 reduce-dtype=f8" 2>&1 | FileCheck %s --check-prefix=DTYPE

// f16 SGD with dynamic loss scaling (a 3x3 parameter: shards of 3 over 4
// ranks). The flag of each rank's own gradients is all-reduced with max right
// after the check; the updates and the scale update read the agreed flag.
// f32 (the default): the f16 gradient is widened, then averaged in f32.
// CHECK-LABEL: func.func @scaled
// CHECK-SAME: memopt.data_parallel = {ranks = 4 : i64, reduce_dtype = "f32", shard = "none"}
// CHECK: %[[G:.*]] = memopt.relu
// CHECK-NEXT: %[[F:.*]] = memopt.found_inf %[[G]] : (tensor<3x3xf16>) -> tensor<f32>
// CHECK-NEXT: %[[ANY:.*]] = memopt.all_reduce %[[F]] {reduction = "max"} : (tensor<f32>) -> tensor<f32>
// CHECK-NEXT: %[[W:.*]] = memopt.cast %[[G]] : (tensor<3x3xf16>) -> tensor<3x3xf32>
// CHECK-NEXT: %[[R:.*]] = memopt.all_reduce %[[W]] : (tensor<3x3xf32>) -> tensor<3x3xf32>
// CHECK-NEXT: memopt.sgd_update %{{.*}}, %[[R]], momentum %{{.*}}, lr %{{.*}} loss_scale %{{.*}}, found_inf %[[ANY]]
// CHECK-NEXT: memopt.update_loss_scale %{{.*}}, %{{.*}}, found_inf %[[ANY]]
// low: averaged in f16, in place; the update widens it.
// LOW-LABEL: func.func @scaled
// LOW-SAME: reduce_dtype = "low"
// LOW: %[[G:.*]] = memopt.relu
// LOW: %[[ANY:.*]] = memopt.all_reduce %{{.*}} {reduction = "max"} : (tensor<f32>) -> tensor<f32>
// LOW-NOT: memopt.cast
// LOW-NEXT: %[[R:.*]] = memopt.all_reduce %[[G]] : (tensor<3x3xf16>) -> tensor<3x3xf16>
// LOW-NEXT: memopt.sgd_update %{{.*}}, %[[R]], {{.*}} found_inf %[[ANY]] {{.*}}: tensor<3x3xf32>, tensor<3x3xf16>,
// ZeRO-1: widened, reduce-scattered in f32 into an f32 shard; the f32
// momentum shard and the master's all-gather as in f32 training.
// ZERO1-LABEL: func.func @scaled
// ZERO1: memopt.variable "w.momentum_buffer" {role = "optimizer_state"} : tensor<3xf32>
// ZERO1: %[[ANY:.*]] = memopt.all_reduce %{{.*}} {reduction = "max"}
// ZERO1-NEXT: %[[W:.*]] = memopt.cast %{{.*}} : (tensor<3x3xf16>) -> tensor<3x3xf32>
// ZERO1-NEXT: %[[S:.*]] = memopt.reduce_scatter %[[W]] {ranks = 4 : i64} : (tensor<3x3xf32>) -> tensor<3xf32>
// ZERO1-NEXT: memopt.sgd_update %{{.*}}, %[[S]], {{.*}} found_inf %[[ANY]] {momentum = 0.899999976 : f32, shards = 4 : i64}
// ZERO1-NEXT: memopt.all_gather
// ZeRO-1 in the low type: an f16 shard that the sharded update reads.
// ZERO1-LOW-LABEL: func.func @scaled
// ZERO1-LOW: %[[S:.*]] = memopt.reduce_scatter %{{.*}} {ranks = 4 : i64} : (tensor<3x3xf16>) -> tensor<3xf16>
// ZERO1-LOW-NEXT: memopt.sgd_update %{{.*}}, %[[S]], {{.*}}shards = 4 : i64} : tensor<3x3xf32>, tensor<3xf16>, tensor<3xf32>,
// ZERO2-LOW-LABEL: func.func @scaled
// ZERO2-LOW: memopt.reduce_scatter %{{.*}} {ranks = 4 : i64} : (tensor<3x3xf16>) -> tensor<3xf16>
// REPORT: memopt-data-parallel: 4 ranks, shard gradients (ZeRO-2): 1 gradient reduce-scatters, 1 parameter all-gathers; 1 gradients reduced in their low type; overflow flag all-reduced (max) before the updates; optimizer state per rank 12 of 36 bytes
// DTYPE: error: reduce-dtype 'f8' is not one of f32, low

func.func @scaled(%x: tensor<3x3xf16>) {
  %w = memopt.variable "w" {initial_value = dense<0.5> : tensor<3x3xf32>, role = "parameter"} : tensor<3x3xf32>
  %m = memopt.variable "w.momentum_buffer" {role = "optimizer_state"} : tensor<3x3xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %s = memopt.variable "memopt.loss_scale" {initial_value = dense<65536.0> : tensor<f32>, role = "loss_scale"} : tensor<f32>
  %t = memopt.variable "memopt.loss_scale_state" {initial_value = dense<0.0> : tensor<2xf32>, role = "loss_scale_state"} : tensor<2xf32>
  %g = memopt.relu %x : tensor<3x3xf16>
  %f = memopt.found_inf %g : (tensor<3x3xf16>) -> tensor<f32>
  memopt.sgd_update %w, %g, momentum %m, lr %lr loss_scale %s, found_inf %f {momentum = 0.9 : f32} : tensor<3x3xf32>, tensor<3x3xf16>, tensor<3x3xf32>, tensor<f32>, tensor<f32>, tensor<f32>
  memopt.update_loss_scale %s, %t, found_inf %f : tensor<f32>, tensor<2xf32>, tensor<f32>
  return
}

// -----

// bf16 AdamW with accumulation over 2 micro-batches and (forced) loss
// scaling. The check reads the accumulator too; its flag is reduced on the
// last micro-step only (gated like the updates).
// none: the widened gradient is summed into the whole f32 accumulator by the
// all-reduce, which the check reads before it.
// CHECK-LABEL: func.func @accumulate
// CHECK: %[[ACC:.*]] = memopt.variable "v.grad" {role = "gradient_accumulator"} : tensor<10xf32>
// CHECK: %[[MICRO:.*]] = memopt.variable "memopt.micro_step"
// CHECK: %[[F:.*]] = memopt.found_inf %{{.*}} accumulators(%[[ACC]]) micro_step %[[MICRO]]
// CHECK-NEXT: %[[ANY:.*]] = memopt.all_reduce %[[F]], micro_step %[[MICRO]] {accumulation_steps = 2 : i64, reduction = "max"} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT: %[[W:.*]] = memopt.cast %{{.*}} : (tensor<10xbf16>) -> tensor<10xf32>
// CHECK-NEXT: memopt.all_reduce %[[W]], accumulate %[[ACC]], micro_step %[[MICRO]] {accumulation_steps = 2 : i64} : (tensor<10xf32>, tensor<10xf32>, tensor<f32>) -> tensor<10xf32>
// CHECK-NEXT: memopt.adamw_update {{.*}} found_inf %[[ANY]]
// CHECK-NEXT: memopt.update_loss_scale %{{.*}}, %{{.*}}, found_inf %[[ANY]], micro_step %[[MICRO]]
// ZeRO-2 in bf16: each micro-batch's bf16 gradient is reduce-scattered; the
// accumulator is a 4-element f32 shard, in the check as in the update.
// ZERO2-LOW-LABEL: func.func @accumulate
// ZERO2-LOW: %[[ACC:.*]] = memopt.variable "v.grad" {role = "gradient_accumulator"} : tensor<4xf32>
// ZERO2-LOW: memopt.found_inf %{{.*}} accumulators(%[[ACC]]) micro_step %{{.*}} : (tensor<10xbf16>, tensor<4xf32>, tensor<f32>) -> tensor<f32>
// ZERO2-LOW: %[[S:.*]] = memopt.reduce_scatter %{{.*}} {ranks = 4 : i64} : (tensor<10xbf16>) -> tensor<4xbf16>
// ZERO2-LOW-NEXT: memopt.adamw_update %{{.*}}, %[[S]], {{.*}} accumulate %[[ACC]], {{.*}} : tensor<10xf32>, tensor<4xbf16>,
// REPORT: memopt-data-parallel: 4 ranks, shard gradients (ZeRO-2): 1 gradient reduce-scatters, 1 parameter all-gathers; 1 gradients reduced in their low type; overflow flag all-reduced (max) before the updates; optimizer state per rank 32 of 80 bytes
// LOW-ACCUM: error: memopt.adamw_update: reduce-dtype low cannot reduce the f32 gradient accumulator of shard none (--accumulate): use reduce-dtype f32 or shard gradients
func.func @accumulate(%x: tensor<10xbf16>) {
  %v = memopt.variable "v" {initial_value = dense<0.5> : tensor<10xf32>, role = "parameter"} : tensor<10xf32>
  %a = memopt.variable "v.exp_avg" {role = "optimizer_state"} : tensor<10xf32>
  %b = memopt.variable "v.exp_avg_sq" {role = "optimizer_state"} : tensor<10xf32>
  %acc = memopt.variable "v.grad" {role = "gradient_accumulator"} : tensor<10xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %step = memopt.variable "memopt.step" {initial_value = dense<0.0> : tensor<f32>, role = "step"} : tensor<f32>
  %micro = memopt.variable "memopt.micro_step" {initial_value = dense<0.0> : tensor<f32>, role = "micro_step"} : tensor<f32>
  %s = memopt.variable "memopt.loss_scale" {initial_value = dense<65536.0> : tensor<f32>, role = "loss_scale"} : tensor<f32>
  %t = memopt.variable "memopt.loss_scale_state" {initial_value = dense<0.0> : tensor<2xf32>, role = "loss_scale_state"} : tensor<2xf32>
  %g = memopt.relu %x : tensor<10xbf16>
  %f = memopt.found_inf %g accumulators(%acc) micro_step %micro : (tensor<10xbf16>, tensor<10xf32>, tensor<f32>) -> tensor<f32>
  memopt.adamw_update %v, %g, %a, %b, lr %lr, step %step accumulate %acc, micro_step %micro loss_scale %s, found_inf %f, loss_scale_state %t {accumulation_steps = 2 : i64} : tensor<10xf32>, tensor<10xbf16>, tensor<10xf32>, tensor<10xf32>, tensor<f32>, tensor<f32>, tensor<10xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<2xf32>
  memopt.update_loss_scale %s, %t, found_inf %f, micro_step %micro {accumulation_steps = 2 : i64} : tensor<f32>, tensor<2xf32>, tensor<f32>, tensor<f32>
  return
}
