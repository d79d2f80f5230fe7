// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-autodiff="optimizer=sgd momentum=0.9" | FileCheck %s
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-autodiff="optimizer=adamw lr=0.001" | FileCheck %s --check-prefix=ADAMW
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-autodiff="optimizer=sgd momentum=0.9 accumulate=4" | FileCheck %s --check-prefix=ACCUM
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-autodiff="optimizer=adamw accumulate=2" | FileCheck %s --check-prefix=ACCUM-ADAMW
// RUN: not memopt-opt %s --split-input-file --memopt-autodiff="accumulate=0" 2>&1 | FileCheck %s --check-prefix=ACCUM-ZERO

// A linear layer with a relu and cross-entropy. The relu's gradient reads its
// output (the input may die), the weight gradient is one transposed gemm, and
// each update follows its gradient directly: the weight's update comes
// before the first layer's backward starts.
// CHECK-LABEL: func.func @mlp
// CHECK-DAG: %[[MOM:.*]] = memopt.variable "w2.momentum_buffer" {role = "optimizer_state"} : tensor<3x4xf32>
// CHECK-DAG: %[[LR:.*]] = memopt.variable "memopt.learning_rate" {initial_value = dense<0.00999999977> : tensor<f32>, role = "learning_rate"}
// CHECK-DAG: %[[W1:.*]] = memopt.variable "w1" {{.*}}role = "parameter"
// CHECK-DAG: %[[W2:.*]] = memopt.variable "w2" {{.*}}role = "parameter"
// CHECK: %[[H:.*]] = memopt.gemm %arg0, %[[W1]]
// CHECK-NEXT: %[[R:.*]] = memopt.relu %[[H]]
// CHECK-NEXT: %[[Y:.*]] = memopt.gemm %[[R]], %[[W2]] {transB = 1 : i64}
// CHECK-NEXT: %[[LOSS:.*]] = memopt.softmax_cross_entropy %[[Y]], %arg1
// CHECK: %[[DY:.*]] = memopt.softmax_cross_entropy_grad %[[Y]], %arg1, %{{.*}}
// CHECK-DAG: %[[DR:.*]] = memopt.gemm %[[DY]], %[[W2]] :
// CHECK-DAG: %[[DW2:.*]] = memopt.gemm %[[DY]], %[[R]] {transA = 1 : i64}
// CHECK: memopt.sgd_update %[[W2]], %[[DW2]], momentum %[[MOM]], lr %[[LR]] {momentum = 0.899999976 : f32}
// CHECK: %[[POS:.*]] = memopt.greater %[[R]], %{{.*}}
// CHECK: %[[DH:.*]] = memopt.where %[[POS]], %[[DR]], %{{.*}}
// CHECK: %[[DW1:.*]] = memopt.gemm %arg0, %[[DH]] {transA = 1 : i64}
// CHECK-NEXT: memopt.sgd_update %[[W1]], %[[DW1]]
// CHECK-NEXT: return %[[LOSS]]
// ADAMW-LABEL: func.func @mlp
// ADAMW-DAG: memopt.variable "w1.exp_avg" {role = "optimizer_state"}
// ADAMW-DAG: memopt.variable "w1.exp_avg_sq" {role = "optimizer_state"}
// ADAMW-DAG: %[[STEP:.*]] = memopt.variable "memopt.step" {{.*}}role = "step"
// ADAMW: memopt.adamw_update {{.*}}, step %[[STEP]] :
// With accumulate=4 the backward starts from d(loss / 4), every parameter
// gets a persistent accumulator, and each update takes it with the
// micro-step variable (it sums, and updates on micro-step 3 only).
// ACCUM-LABEL: func.func @mlp
// ACCUM-DAG: %[[ACC1:.*]] = memopt.variable "w1.grad" {role = "gradient_accumulator"} : tensor<5x4xf32>
// ACCUM-DAG: %[[ACC2:.*]] = memopt.variable "w2.grad" {role = "gradient_accumulator"} : tensor<3x4xf32>
// ACCUM-DAG: %[[MICRO:.*]] = memopt.variable "memopt.micro_step" {initial_value = dense<0.000000e+00> : tensor<f32>, role = "micro_step"}
// ACCUM-DAG: %[[SEED:.*]] = memopt.constant dense<2.500000e-01> : tensor<f32>
// ACCUM: memopt.softmax_cross_entropy_grad %{{.*}}, %arg1, %[[SEED]]
// ACCUM: memopt.sgd_update %{{.*}}, %{{.*}}, momentum %{{.*}}, lr %{{.*}}, accumulate %[[ACC2]], micro_step %[[MICRO]] {accumulation_steps = 4 : i64, momentum = 0.899999976 : f32}
// ACCUM: memopt.sgd_update {{.*}}, accumulate %[[ACC1]], micro_step %[[MICRO]] {accumulation_steps = 4 : i64
// ACCUM-ADAMW-LABEL: func.func @mlp
// ACCUM-ADAMW: memopt.adamw_update {{.*}}, accumulate %{{.*}}, micro_step %{{.*}} {accumulation_steps = 2 : i64}
// ACCUM-ZERO: error: --accumulate 0 must be at least 1 micro-batch per step
func.func @mlp(%x: tensor<2x5xf32>, %labels: tensor<2xi64>) -> tensor<f32> {
  %w1 = memopt.variable "w1" {initial_value = dense<0.5> : tensor<5x4xf32>, role = "parameter"} : tensor<5x4xf32>
  %w2 = memopt.variable "w2" {initial_value = dense<0.25> : tensor<3x4xf32>, role = "parameter"} : tensor<3x4xf32>
  %h = memopt.gemm %x, %w1 : (tensor<2x5xf32>, tensor<5x4xf32>) -> tensor<2x4xf32>
  %r = memopt.relu %h : tensor<2x4xf32>
  %y = memopt.gemm %r, %w2 {transB = 1 : i64} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  %loss = memopt.softmax_cross_entropy %y, %labels : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A bias broadcast over the batch gets the gradient summed over it; a
// parameter used twice gets the sum of both contributions.
// CHECK-LABEL: func.func @broadcast_and_reuse
// CHECK: %[[B:.*]] = memopt.variable "b"
// CHECK: memopt.reduce_sum %{{.*}} {axes = array<i64: 0>} : (tensor<4x3xf32>) -> tensor<1x3xf32>
// CHECK: memopt.add
// CHECK: memopt.sgd_update %[[B]]
func.func @broadcast_and_reuse(%x: tensor<4x3xf32>, %t: tensor<4x3xf32>) -> tensor<f32> {
  %b = memopt.variable "b" {initial_value = dense<0.5> : tensor<3xf32>, role = "parameter"} : tensor<3xf32>
  %y = memopt.add %x, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %z = memopt.mul %y, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %d = memopt.sub %z, %t : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %s = memopt.mul %d, %d : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %loss = memopt.reduce_mean %s {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<4x3xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Running statistics get no gradient and turn back into constants.
// CHECK-LABEL: func.func @batch_norm
// CHECK-DAG: memopt.constant {memopt.initializer = "bn.running_mean"}
// CHECK-DAG: memopt.constant {memopt.initializer = "bn.running_var"}
// CHECK-DAG: memopt.sgd_update %{{.*}} lr
func.func @batch_norm(%x: tensor<2x3x4x4xf32>) -> tensor<f32> {
  %scale = memopt.variable "bn.weight" {initial_value = dense<1.0> : tensor<3xf32>, role = "parameter"} : tensor<3xf32>
  %bias = memopt.variable "bn.bias" {initial_value = dense<0.0> : tensor<3xf32>, role = "parameter"} : tensor<3xf32>
  %mean = memopt.variable "bn.running_mean" {initial_value = dense<0.0> : tensor<3xf32>, role = "parameter"} : tensor<3xf32>
  %var = memopt.variable "bn.running_var" {initial_value = dense<1.0> : tensor<3xf32>, role = "parameter"} : tensor<3xf32>
  %y = memopt.batch_normalization %x, %scale, %bias, %mean, %var : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  %loss = memopt.reduce_mean %y {axes = array<i64: 0, 1, 2, 3>, keepdims = 0 : i64} : (tensor<2x3x4x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Dropout's gradient is the same dropout (key, stream, ratio) of the output
// gradient: the mask is regenerated, nothing of the forward is read.
// CHECK-LABEL: func.func @dropout
// CHECK: %[[KEY:.*]] = memopt.variable "memopt.random_key"
// CHECK: %[[D:.*]] = memopt.dropout %{{.*}}, key %[[KEY]] {ratio = 3.000000e-01 : f32, stream = 7 : i64}
// CHECK: %[[DX:.*]] = memopt.dropout %{{.*}}, key %[[KEY]] {ratio = 3.000000e-01 : f32, stream = 7 : i64}
// CHECK: memopt.mul %[[DX]], %arg0
func.func @dropout(%x: tensor<2x4xf32>) -> tensor<f32> {
  %key = memopt.variable "memopt.random_key" {role = "random_key"} : tensor<2xi64>
  %w = memopt.variable "w" {initial_value = dense<0.5> : tensor<2x4xf32>, role = "parameter"} : tensor<2x4xf32>
  %y = memopt.mul %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %d = memopt.dropout %y, key %key {ratio = 0.3 : f32, stream = 7 : i64} : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %s = memopt.mul %d, %d : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %loss = memopt.reduce_mean %s {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A float op without a gradient on the path to the loss names the node.
func.func @no_gradient(%x: tensor<2x4xf32>) -> tensor<f32> {
  %w = memopt.variable "w" {initial_value = dense<0.5> : tensor<2x4xf32>, role = "parameter"} : tensor<2x4xf32>
  %y = memopt.mul %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  // expected-error @+1 {{memopt.resize is on the path from a trainable parameter to the loss but has no gradient}}
  %r = memopt.resize %y {mode = "nearest"} : (tensor<2x4xf32>) -> tensor<4x8xf32>
  %loss = memopt.reduce_mean %r {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<4x8xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
