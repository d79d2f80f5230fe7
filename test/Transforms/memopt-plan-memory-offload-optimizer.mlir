// RUN: memopt-opt %s --split-input-file --memopt-bufferize --memopt-plan-memory | FileCheck %s

// --offload optimizer (docs/offload.md): the compute stream waits for an
// offloaded gradient's copy to the host only at the next offloaded update,
// so the planner keeps the gradient's bytes until then (the last one's until
// the step's end). Here %g1 lives to the second update: %a cannot take its
// bytes (without the extension everything shares offset 0 in 1 KiB); %g2
// lives to the end, so %b takes %g1's old bytes, not %g2's.
// CHECK-LABEL: func.func @deferred
// CHECK-SAME: memopt.arena_size = 2048
// CHECK: memopt.exp %arg0 {memopt.offsets = array<i64: 0>}
// CHECK-NEXT: memopt.sgd_update
// CHECK-NEXT: memopt.exp %arg0 {memopt.offsets = array<i64: 1024>}
// CHECK-NEXT: memopt.exp %{{.*}}memopt.offsets = array<i64: 1024>
// CHECK-NEXT: memopt.sgd_update
// CHECK-NEXT: memopt.exp %arg0 {memopt.offsets = array<i64: 0>}
func.func @deferred(%x: tensor<256xf32>) -> tensor<256xf32> {
  %w1 = memopt.variable "w1" {initial_value = dense<0.5> : tensor<256xf32>, role = "parameter"} : tensor<256xf32>
  %m1 = memopt.variable "w1.master" {initial_value = dense<0.5> : tensor<256xf32>, memopt.placement = "host", role = "master"} : tensor<256xf32>
  %w2 = memopt.variable "w2" {initial_value = dense<0.5> : tensor<256xf32>, role = "parameter"} : tensor<256xf32>
  %m2 = memopt.variable "w2.master" {initial_value = dense<0.5> : tensor<256xf32>, memopt.placement = "host", role = "master"} : tensor<256xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %g1 = memopt.exp %x : tensor<256xf32>
  memopt.sgd_update %w1, %g1, lr %lr master %m1 : tensor<256xf32>, tensor<256xf32>, tensor<f32>, tensor<256xf32>
  %a = memopt.exp %x : tensor<256xf32>
  %g2 = memopt.exp %a : tensor<256xf32>
  memopt.sgd_update %w2, %g2, lr %lr master %m2 : tensor<256xf32>, tensor<256xf32>, tensor<f32>, tensor<256xf32>
  %b = memopt.exp %x : tensor<256xf32>
  %c = memopt.exp %b : tensor<256xf32>
  return %c : tensor<256xf32>
}

// -----

// Under dynamic loss scaling each copy is waited for at once (the copy
// carries the scale update_loss_scale rewrites): nothing is extended.
// CHECK-LABEL: func.func @scaled
// CHECK-SAME: memopt.arena_size = 1024
func.func @scaled(%x: tensor<256xf32>) -> tensor<256xf32> {
  %w1 = memopt.variable "w1" {initial_value = dense<0.5> : tensor<256xf32>, role = "parameter"} : tensor<256xf32>
  %m1 = memopt.variable "w1.master" {initial_value = dense<0.5> : tensor<256xf32>, memopt.placement = "host", role = "master"} : tensor<256xf32>
  %w2 = memopt.variable "w2" {initial_value = dense<0.5> : tensor<256xf32>, role = "parameter"} : tensor<256xf32>
  %m2 = memopt.variable "w2.master" {initial_value = dense<0.5> : tensor<256xf32>, memopt.placement = "host", role = "master"} : tensor<256xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %scale = memopt.variable "memopt.loss_scale" {initial_value = dense<1.0> : tensor<f32>, role = "loss_scale"} : tensor<f32>
  %found = memopt.variable "memopt.found_inf" {initial_value = dense<0.0> : tensor<f32>, role = "loss_scale"} : tensor<f32>
  %g1 = memopt.exp %x : tensor<256xf32>
  memopt.sgd_update %w1, %g1, lr %lr loss_scale %scale, found_inf %found master %m1 : tensor<256xf32>, tensor<256xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<256xf32>
  %a = memopt.exp %x : tensor<256xf32>
  %g2 = memopt.exp %a : tensor<256xf32>
  memopt.sgd_update %w2, %g2, lr %lr loss_scale %scale, found_inf %found master %m2 : tensor<256xf32>, tensor<256xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<256xf32>
  %b = memopt.exp %x : tensor<256xf32>
  %c = memopt.exp %b : tensor<256xf32>
  return %c : tensor<256xf32>
}

// -----

// --offload-accumulators device: the accumulator stays in the weight region
// (a weight offset, no host offset), the staging slot holds its f32 sum (64
// bytes of scalars + 1024, where a bf16 gradient would need 512), and the
// arena gradient dies at its update (the copy reads the accumulator).
// CHECK-LABEL: func.func @device_sum
// CHECK-SAME: memopt.arena_size = 512
// CHECK-SAME: memopt.host_staging_size = 1088
// CHECK: memopt.variable "w1.grad" {memopt.weight_offset = {{[0-9]+}} : i64, role = "gradient_accumulator"}
func.func @device_sum(%x: tensor<256xbf16>) -> tensor<256xbf16> {
  %w1 = memopt.variable "w1" {initial_value = dense<0.5> : tensor<256xf32>, role = "parameter"} : tensor<256xf32>
  %m1 = memopt.variable "w1.master" {initial_value = dense<0.5> : tensor<256xf32>, memopt.placement = "host", role = "master"} : tensor<256xf32>
  %acc = memopt.variable "w1.grad" {role = "gradient_accumulator"} : tensor<256xf32>
  %micro = memopt.variable "memopt.micro_step" {initial_value = dense<0.0> : tensor<f32>, role = "micro_step"} : tensor<f32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %g1 = memopt.exp %x : tensor<256xbf16>
  memopt.sgd_update %w1, %g1, lr %lr accumulate %acc, micro_step %micro master %m1 {accumulation_steps = 2 : i64} : tensor<256xf32>, tensor<256xbf16>, tensor<f32>, tensor<256xf32>, tensor<f32>, tensor<256xf32>
  %b = memopt.exp %x : tensor<256xbf16>
  %c = memopt.exp %b : tensor<256xbf16>
  return %c : tensor<256xbf16>
}
