// Mixed-precision data parallelism (memopt-data-parallel on an f16 / bf16
// training step): the type each gradient is reduced in, and the overflow
// flag of dynamic loss scaling agreed over the ranks.
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-data-parallel="ranks=4" | FileCheck %s
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-data-parallel="ranks=4 reduce-dtype=low" | FileCheck %s --check-prefix=LOW
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-data-parallel="ranks=4 shard=optimizer" | FileCheck %s --check-prefix=ZERO1
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-data-parallel="ranks=4 shard=optimizer reduce-dtype=low" | FileCheck %s --check-prefix=ZERO1-LOW
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-data-parallel="ranks=4 shard=gradients reduce-dtype=low" | FileCheck %s --check-prefix=ZERO2-LOW
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-data-parallel="ranks=4 shard=gradients reduce-dtype=low report=true" -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: not memopt-opt %s --split-input-file --memopt-data-parallel="ranks=2 reduce-dtype=f8" 2>&1 | FileCheck %s --check-prefix=DTYPE
// RUN: not memopt-opt %s --split-input-file --memopt-data-parallel="ranks=2 reduce-dtype=low" 2>&1 | FileCheck %s --check-prefix=LOW-ACCUM

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
