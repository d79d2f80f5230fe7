// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-autodiff="optimizer=sgd momentum=0.9" | FileCheck %s
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-autodiff="optimizer=adamw lr=0.001" | FileCheck %s --check-prefix=ADAMW
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-autodiff | FileCheck %s --check-prefix=SAVED
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-autodiff="optimizer=sgd momentum=0.9 accumulate=4" | FileCheck %s --check-prefix=ACCUM
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-autodiff="optimizer=adamw accumulate=2" | FileCheck %s --check-prefix=ACCUM-ADAMW
// RUN: not memopt-opt %s --split-input-file --memopt-autodiff="accumulate=0" 2>&1 | FileCheck %s --check-prefix=ACCUM-ZERO
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-autodiff="optimizer=sgd momentum=0.9 loss-scale=dynamic loss-scale-init=1024 loss-scale-interval=100" | FileCheck %s --check-prefix=SCALED
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-autodiff="optimizer=adamw loss-scale=dynamic accumulate=2" | FileCheck %s --check-prefix=SCALED-ACCUM
// RUN: not memopt-opt %s --split-input-file --memopt-autodiff="loss-scale=static" 2>&1 | FileCheck %s --check-prefix=SCALE-BAD
// RUN: not memopt-opt %s --split-input-file --memopt-autodiff="loss-scale=dynamic loss-scale-backoff=2" 2>&1 | FileCheck %s --check-prefix=SCALE-BACKOFF

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
// CHECK: %[[DH:.*]] = memopt.relu_grad %[[DR]], %[[R]]
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
// ACCUM: memopt.sgd_update %{{.*}}, %{{.*}}, momentum %{{.*}}, lr %{{.*}} accumulate %[[ACC2]], micro_step %[[MICRO]] {accumulation_steps = 4 : i64, momentum = 0.899999976 : f32}
// ACCUM: memopt.sgd_update {{.*}} accumulate %[[ACC1]], micro_step %[[MICRO]] {accumulation_steps = 4 : i64
// ACCUM-ADAMW-LABEL: func.func @mlp
// ACCUM-ADAMW: memopt.adamw_update {{.*}} accumulate %{{.*}}, micro_step %{{.*}} {accumulation_steps = 2 : i64}
// ACCUM-ZERO: error: --accumulate 0 must be at least 1 micro-batch per step
// Dynamic loss scaling: the seed is the scale variable (times 1 / K), the
// updates no longer ride on the backward: one found_inf over every gradient
// comes after the whole backward, then the updates (which unscale and skip),
// then the scale update.
// SCALED-LABEL: func.func @mlp
// SCALED-DAG: %[[SCALE:.*]] = memopt.variable "memopt.loss_scale" {initial_value = dense<1.024000e+03> : tensor<f32>, role = "loss_scale"} : tensor<f32>
// SCALED-DAG: %[[STATE:.*]] = memopt.variable "memopt.loss_scale_state" {initial_value = dense<0.000000e+00> : tensor<2xf32>, role = "loss_scale_state"} : tensor<2xf32>
// SCALED-DAG: %[[W1:.*]] = memopt.variable "w1" {{.*}}role = "parameter"
// SCALED-DAG: %[[W2:.*]] = memopt.variable "w2" {{.*}}role = "parameter"
// SCALED: %[[SEED:.*]] = memopt.mul %[[SCALE]], %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// SCALED: memopt.softmax_cross_entropy_grad %{{.*}}, %arg1, %[[SEED]]
// SCALED-NOT: memopt.sgd_update
// SCALED: %[[DW2:.*]] = memopt.gemm %{{.*}}, %{{.*}} {transA = 1 : i64}
// SCALED-NOT: memopt.sgd_update
// SCALED: %[[DW1:.*]] = memopt.gemm %arg0, %{{.*}} {transA = 1 : i64}
// SCALED-NEXT: %[[FOUND:.*]] = memopt.found_inf %[[DW2]], %[[DW1]] : (tensor<3x4xf32>, tensor<5x4xf32>) -> tensor<f32>
// SCALED-NEXT: memopt.sgd_update %[[W2]], %[[DW2]], momentum %{{.*}}, lr %{{.*}} loss_scale %[[SCALE]], found_inf %[[FOUND]]
// SCALED-NEXT: memopt.sgd_update %[[W1]], %[[DW1]], momentum %{{.*}}, lr %{{.*}} loss_scale %[[SCALE]], found_inf %[[FOUND]]
// SCALED-NEXT: memopt.update_loss_scale %[[SCALE]], %[[STATE]], found_inf %[[FOUND]] {growth_interval = 100 : i64}
// SCALED-NEXT: return
// With accumulation the check also reads the accumulators (the earlier
// micro-batches' sum), and the scale changes on the last micro-step only;
// AdamW's bias correction reads the skipped-step count.
// SCALED-ACCUM-LABEL: func.func @mlp
// SCALED-ACCUM-DAG: %[[ACC1:.*]] = memopt.variable "w1.grad" {role = "gradient_accumulator"}
// SCALED-ACCUM-DAG: %[[ACC2:.*]] = memopt.variable "w2.grad" {role = "gradient_accumulator"}
// SCALED-ACCUM-DAG: %[[MICRO:.*]] = memopt.variable "memopt.micro_step"
// SCALED-ACCUM-DAG: %[[STATE:.*]] = memopt.variable "memopt.loss_scale_state"
// SCALED-ACCUM: %[[FOUND:.*]] = memopt.found_inf %{{.*}}, %{{.*}} accumulators(%[[ACC2]], %[[ACC1]]) micro_step %[[MICRO]]
// SCALED-ACCUM: memopt.adamw_update {{.*}} accumulate %[[ACC2]], micro_step %[[MICRO]] loss_scale %{{.*}}, found_inf %[[FOUND]], loss_scale_state %[[STATE]] {accumulation_steps = 2 : i64}
// SCALED-ACCUM: memopt.adamw_update {{.*}} accumulate %[[ACC1]], micro_step %[[MICRO]] loss_scale %{{.*}}, found_inf %[[FOUND]], loss_scale_state %[[STATE]] {accumulation_steps = 2 : i64}
// SCALED-ACCUM: memopt.update_loss_scale %{{.*}}, %[[STATE]], found_inf %[[FOUND]], micro_step %[[MICRO]] {accumulation_steps = 2 : i64}
// SCALE-BAD: error: loss-scale 'static' is not one of none, dynamic
// SCALE-BACKOFF: error: loss-scale-backoff 2 must be in (0, 1]
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

// -----

// Training-mode batch normalization: one gradient op that reads the input
// and the saved statistics (not the output).
// CHECK-LABEL: func.func @batch_norm_training
// CHECK: %[[Y:.*]], %[[MEAN:.*]], %[[INV:.*]] = memopt.batch_norm_training %arg0
// CHECK: %[[DX:.*]], %[[DS:.*]], %[[DB:.*]] = memopt.batch_norm_training_grad %arg0, %{{.*}}, %{{.*}}, %[[MEAN]], %[[INV]]
// CHECK-DAG: memopt.sgd_update %{{.*}}, %[[DS]]
// CHECK-DAG: memopt.sgd_update %{{.*}}, %[[DB]]
func.func @batch_norm_training(%x: tensor<2x3x4x4xf32>) -> tensor<f32> {
  %scale = memopt.variable "bn.weight" {initial_value = dense<1.0> : tensor<3xf32>, role = "parameter"} : tensor<3xf32>
  %bias = memopt.variable "bn.bias" {initial_value = dense<0.0> : tensor<3xf32>, role = "parameter"} : tensor<3xf32>
  %y, %mean, %inv = memopt.batch_norm_training %x, %scale, %bias : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  %sq = memopt.mul %y, %y : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %loss = memopt.reduce_mean %sq {axes = array<i64: 0, 1, 2, 3>, keepdims = 0 : i64} : (tensor<2x3x4x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Fused attention (FlashAttention-2's backward): the forward also returns the
// row statistics, and the backward reads Q, K, V, O and those statistics
// only. No [.., 12, 12] score or probability tensor exists anywhere (SAVED),
// so nothing of size S x S is saved for backward.
// CHECK-LABEL: func.func @attention
// CHECK-DAG: %[[WQ:.*]] = memopt.variable "wq"
// CHECK-DAG: %[[WK:.*]] = memopt.variable "wk"
// CHECK: %[[Q:.*]] = memopt.mul %arg0, %[[WQ]]
// CHECK: %[[K:.*]] = memopt.mul %arg0, %[[WK]]
// CHECK: %[[Y:.*]], %[[LSE:.*]] = memopt.attention %[[Q]], %[[K]], %{{.*}} {causal = true, return_lse = true, scale = 5.000000e-01 : f32} : (tensor<2x3x12x4xf32>, tensor<2x3x12x4xf32>, tensor<2x3x12x4xf32>) -> (tensor<2x3x12x4xf32>, tensor<2x3x12x2xf32>)
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = memopt.attention_grad %[[Q]], %[[K]], %{{.*}}, %[[Y]], %{{.*}}, %[[LSE]] {causal = true, scale = 5.000000e-01 : f32}
// CHECK-DAG: memopt.mul %[[DK]], %arg0
// CHECK-DAG: memopt.mul %[[DQ]], %arg0
// SAVED-NOT: x12x12xf32
func.func @attention(%x: tensor<2x3x12x4xf32>) -> tensor<f32> {
  %wq = memopt.variable "wq" {initial_value = dense<0.5> : tensor<4xf32>, role = "parameter"} : tensor<4xf32>
  %wk = memopt.variable "wk" {initial_value = dense<0.25> : tensor<4xf32>, role = "parameter"} : tensor<4xf32>
  %wv = memopt.variable "wv" {initial_value = dense<2.0> : tensor<4xf32>, role = "parameter"} : tensor<4xf32>
  %q = memopt.mul %x, %wq : (tensor<2x3x12x4xf32>, tensor<4xf32>) -> tensor<2x3x12x4xf32>
  %k = memopt.mul %x, %wk : (tensor<2x3x12x4xf32>, tensor<4xf32>) -> tensor<2x3x12x4xf32>
  %v = memopt.mul %x, %wv : (tensor<2x3x12x4xf32>, tensor<4xf32>) -> tensor<2x3x12x4xf32>
  %y = memopt.attention %q, %k, %v {scale = 0.5 : f32, causal = true} : (tensor<2x3x12x4xf32>, tensor<2x3x12x4xf32>, tensor<2x3x12x4xf32>) -> tensor<2x3x12x4xf32>
  %loss = memopt.reduce_mean %y {axes = array<i64: 0, 1, 2, 3>, keepdims = 0 : i64} : (tensor<2x3x12x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Fused attention with dropout of the probabilities: the forward with its
// statistics and the gradient carry the same ratio, stream and key (the
// backward regenerates the mask; no mask and no S x S tensor is saved).
// CHECK-LABEL: func.func @attention_dropout
// CHECK: %[[KEY:.*]] = memopt.variable "memopt.random_key"
// CHECK: %[[Y:.*]], %[[LSE:.*]] = memopt.attention %[[Q:.*]], %[[K:.*]], %[[V:.*]] dropout_key %[[KEY]] {causal = true, dropout_ratio = 1.000000e-01 : f32, dropout_stream = 4 : i64, return_lse = true, scale = 5.000000e-01 : f32} : (tensor<2x3x12x4xf32>, tensor<2x3x12x4xf32>, tensor<2x3x12x4xf32>, tensor<2xi64>) -> (tensor<2x3x12x4xf32>, tensor<2x3x12x2xf32>)
// CHECK: memopt.attention_grad %[[Q]], %[[K]], %[[V]], %[[Y]], %{{.*}}, %[[LSE]] dropout_key %[[KEY]] {causal = true, dropout_ratio = 1.000000e-01 : f32, dropout_stream = 4 : i64, scale = 5.000000e-01 : f32} : (tensor<2x3x12x4xf32>, tensor<2x3x12x4xf32>, tensor<2x3x12x4xf32>, tensor<2x3x12x4xf32>, tensor<2x3x12x4xf32>, tensor<2x3x12x2xf32>, tensor<2xi64>)
// SAVED-LABEL: func.func @attention_dropout
// SAVED-NOT: x12x12xf32
func.func @attention_dropout(%x: tensor<2x3x12x4xf32>) -> tensor<f32> {
  %key = memopt.variable "memopt.random_key" {initial_value = dense<0> : tensor<2xi64>, role = "random_key"} : tensor<2xi64>
  %wq = memopt.variable "wq" {initial_value = dense<0.5> : tensor<4xf32>, role = "parameter"} : tensor<4xf32>
  %wk = memopt.variable "wk" {initial_value = dense<0.25> : tensor<4xf32>, role = "parameter"} : tensor<4xf32>
  %wv = memopt.variable "wv" {initial_value = dense<2.0> : tensor<4xf32>, role = "parameter"} : tensor<4xf32>
  %q = memopt.mul %x, %wq : (tensor<2x3x12x4xf32>, tensor<4xf32>) -> tensor<2x3x12x4xf32>
  %k = memopt.mul %x, %wk : (tensor<2x3x12x4xf32>, tensor<4xf32>) -> tensor<2x3x12x4xf32>
  %v = memopt.mul %x, %wv : (tensor<2x3x12x4xf32>, tensor<4xf32>) -> tensor<2x3x12x4xf32>
  %y = memopt.attention %q, %k, %v dropout_key %key {scale = 0.5 : f32, causal = true, dropout_ratio = 0.1 : f32, dropout_stream = 4 : i64} : (tensor<2x3x12x4xf32>, tensor<2x3x12x4xf32>, tensor<2x3x12x4xf32>, tensor<2xi64>) -> tensor<2x3x12x4xf32>
  %loss = memopt.reduce_mean %y {axes = array<i64: 0, 1, 2, 3>, keepdims = 0 : i64} : (tensor<2x3x12x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Layer normalization over the last axis with a scale and bias of its width:
// one gradient op (dX, dScale, dB), no reductions of its own.
// CHECK-LABEL: func.func @layer_norm
// CHECK: %[[Y:.*]] = memopt.layer_normalization %arg0
// CHECK: %[[DX:.*]], %[[DS:.*]], %[[DB:.*]] = memopt.layer_normalization_grad %arg0, %{{.*}}, %{{.*}} {axis = 1 : i64}
// CHECK-DAG: memopt.sgd_update %{{.*}}, %[[DS]]
// CHECK-DAG: memopt.sgd_update %{{.*}}, %[[DB]]
func.func @layer_norm(%x: tensor<4x6xf32>) -> tensor<f32> {
  %w = memopt.variable "ln.weight" {initial_value = dense<1.0> : tensor<6xf32>, role = "parameter"} : tensor<6xf32>
  %b = memopt.variable "ln.bias" {initial_value = dense<0.0> : tensor<6xf32>, role = "parameter"} : tensor<6xf32>
  %y = memopt.layer_normalization %x, %w, %b {axis = -1 : i64} : (tensor<4x6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %sq = memopt.mul %y, %y : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %loss = memopt.reduce_mean %sq {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<4x6xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A trained bias (swin's relative-position table) gets its gradient from the
// kernel, summed over the batch it broadcasts along; a constant mask added to
// it needs none of its own. K broadcast over the batch (one head set for two
// sequences) gets dK summed back over that axis.
// CHECK-LABEL: func.func @attention_trained_bias
// CHECK: %[[TABLE:.*]] = memopt.variable "relative_position_bias"
// CHECK: %[[BIAS:.*]] = memopt.add %[[TABLE]], %{{.*}}
// CHECK: %[[Y:.*]], %[[LSE:.*]] = memopt.attention %{{.*}}, %arg1, %arg1, %[[BIAS]] {return_lse = true, scale = 1.250000e-01 : f32}
// CHECK: %{{.*}}, %[[DK:.*]], %{{.*}}, %[[DBIAS:.*]] = memopt.attention_grad {{.*}}, %[[LSE]], %[[BIAS]] {bias_gradient = true, scale = 1.250000e-01 : f32} : {{.*}} -> (tensor<2x3x5x4xf32>, tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>, tensor<3x5x6xf32>)
// CHECK: memopt.sgd_update %[[TABLE]], %[[DBIAS]]
func.func @attention_trained_bias(%x: tensor<2x3x5x4xf32>, %kv: tensor<3x6x4xf32>) -> tensor<f32> {
  %w = memopt.variable "w" {initial_value = dense<0.5> : tensor<4xf32>, role = "parameter"} : tensor<4xf32>
  %table = memopt.variable "relative_position_bias" {initial_value = dense<0.1> : tensor<3x5x6xf32>, role = "parameter"} : tensor<3x5x6xf32>
  %mask = memopt.constant dense<0.0> : tensor<1x5x6xf32>
  %bias = memopt.add %table, %mask : (tensor<3x5x6xf32>, tensor<1x5x6xf32>) -> tensor<3x5x6xf32>
  %q = memopt.mul %x, %w : (tensor<2x3x5x4xf32>, tensor<4xf32>) -> tensor<2x3x5x4xf32>
  %y = memopt.attention %q, %kv, %kv, %bias {scale = 0.125 : f32} : (tensor<2x3x5x4xf32>, tensor<3x6x4xf32>, tensor<3x6x4xf32>, tensor<3x5x6xf32>) -> tensor<2x3x5x4xf32>
  %loss = memopt.reduce_mean %y {axes = array<i64: 0, 1, 2, 3>, keepdims = 0 : i64} : (tensor<2x3x5x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A Linear layer on [batch, tokens, features] times a 2-D weight: both
// gradients are 2-D gemms over the flattened rows (no transposed copy of the
// activation, no per-batch weight gradient summed afterwards).
// CHECK-LABEL: func.func @linear_3d
// CHECK-NOT: memopt.transpose
// CHECK-DAG: %[[DX:.*]] = memopt.gemm %{{.*}}, %{{.*}} {transB = 1 : i64} : (tensor<6x5xf32>, tensor<4x5xf32>) -> tensor<6x4xf32>
// CHECK-DAG: %[[DW:.*]] = memopt.gemm %{{.*}}, %{{.*}} {transA = 1 : i64} : (tensor<6x4xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
// CHECK-NOT: memopt.reduce_sum
// CHECK: memopt.sgd_update %{{.*}}, %[[DW]]
func.func @linear_3d(%x: tensor<2x3x4xf32>) -> tensor<f32> {
  %w = memopt.variable "w" {initial_value = dense<0.5> : tensor<4x5xf32>, role = "parameter"} : tensor<4x5xf32>
  %y = memopt.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %sq = memopt.mul %y, %y : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %loss = memopt.reduce_mean %sq {axes = array<i64: 0, 1, 2>, keepdims = 0 : i64} : (tensor<2x3x5xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// K (a parameter here) broadcasts over the batch: dK is summed back over it.
// CHECK-LABEL: func.func @attention_broadcast_key
// CHECK: %[[KEY:.*]] = memopt.variable "k"
// CHECK: %{{.*}}, %[[DK:.*]], %{{.*}} = memopt.attention_grad
// CHECK: %[[SUM:.*]] = memopt.reduce_sum %[[DK]] {axes = array<i64: 0>} : (tensor<2x3x6x4xf32>) -> tensor<1x3x6x4xf32>
// CHECK: %[[GRAD:.*]] = memopt.reshape %[[SUM]] : (tensor<1x3x6x4xf32>) -> tensor<3x6x4xf32>
// CHECK: memopt.sgd_update %[[KEY]], %[[GRAD]]
func.func @attention_broadcast_key(%q: tensor<2x3x5x4xf32>, %v: tensor<2x3x6x4xf32>) -> tensor<f32> {
  %k = memopt.variable "k" {initial_value = dense<0.5> : tensor<3x6x4xf32>, role = "parameter"} : tensor<3x6x4xf32>
  %y = memopt.attention %q, %k, %v {scale = 0.125 : f32} : (tensor<2x3x5x4xf32>, tensor<3x6x4xf32>, tensor<2x3x6x4xf32>) -> tensor<2x3x5x4xf32>
  %loss = memopt.reduce_mean %y {axes = array<i64: 0, 1, 2, 3>, keepdims = 0 : i64} : (tensor<2x3x5x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Grouped-query K and V (parameters here), broadcast over the trailing
// query-head axis as the fusion's [B, Hkv, n] view gives them:
// attention_grad returns dK and dV in their own shapes, summed over each
// group by the kernels (grouped_gradients), so no reduce_sum follows.
// CHECK-LABEL: func.func @attention_grouped_key_value
// CHECK: %[[KEY:.*]] = memopt.variable "k"
// CHECK: %[[VALUE:.*]] = memopt.variable "v"
// CHECK: %{{.*}}, %[[DK:.*]], %[[DV:.*]] = memopt.attention_grad {{.*}} {grouped_gradients = true, scale = 1.250000e-01 : f32} : {{.*}} -> (tensor<2x2x3x5x8xf32>, tensor<2x2x1x6x8xf32>, tensor<2x2x1x6x8xf32>)
// CHECK-NOT: memopt.reduce_sum
// CHECK-DAG: memopt.sgd_update %[[KEY]], %[[DK]]
// CHECK-DAG: memopt.sgd_update %[[VALUE]], %[[DV]]
func.func @attention_grouped_key_value(%q: tensor<2x2x3x5x8xf32>) -> tensor<f32> {
  %k = memopt.variable "k" {initial_value = dense<0.5> : tensor<2x2x1x6x8xf32>, role = "parameter"} : tensor<2x2x1x6x8xf32>
  %v = memopt.variable "v" {initial_value = dense<0.25> : tensor<2x2x1x6x8xf32>, role = "parameter"} : tensor<2x2x1x6x8xf32>
  %y = memopt.attention %q, %k, %v {scale = 0.125 : f32} : (tensor<2x2x3x5x8xf32>, tensor<2x2x1x6x8xf32>, tensor<2x2x1x6x8xf32>) -> tensor<2x2x3x5x8xf32>
  %loss = memopt.reduce_mean %y {axes = array<i64: 0, 1, 2, 3, 4>, keepdims = 0 : i64} : (tensor<2x2x3x5x8xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// f16 attention (mixed-precision training): attention_grad in f16 with the
// f32 row statistics; a trained bias of an f16 attention has no gradient
// kernel (a training compilation runs that attention in f32): the error names
// the node.
// CHECK-LABEL: func.func @attention_f16
// CHECK: %[[Y:.*]], %[[LSE:.*]] = memopt.attention {{.*}} -> (tensor<2x5x4xf16>, tensor<2x5x2xf32>)
// CHECK: memopt.attention_grad {{.*}}, %[[LSE]] {scale = 5.000000e-01 : f32} : {{.*}} -> (tensor<2x5x4xf16>, tensor<2x5x4xf16>, tensor<2x5x4xf16>)
func.func @attention_f16(%x: tensor<2x5x4xf16>) -> tensor<f32> {
  %w = memopt.variable "w" {initial_value = dense<0.5> : tensor<4xf32>, role = "parameter"} : tensor<4xf32>
  %wl = memopt.cast %w : (tensor<4xf32>) -> tensor<4xf16>
  %q = memopt.mul %x, %wl : (tensor<2x5x4xf16>, tensor<4xf16>) -> tensor<2x5x4xf16>
  %y = memopt.attention %q, %q, %q {scale = 0.5 : f32} : (tensor<2x5x4xf16>, tensor<2x5x4xf16>, tensor<2x5x4xf16>) -> tensor<2x5x4xf16>
  %c = memopt.cast %y : (tensor<2x5x4xf16>) -> tensor<2x5x4xf32>
  %loss = memopt.reduce_mean %c {axes = array<i64: 0, 1, 2>, keepdims = 0 : i64} : (tensor<2x5x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @attention_f16_trained_bias(%x: tensor<2x5x4xf16>) -> tensor<f32> {
  %b32 = memopt.variable "b" {initial_value = dense<0.5> : tensor<5x5xf32>, role = "parameter"} : tensor<5x5xf32>
  %b = memopt.cast %b32 : (tensor<5x5xf32>) -> tensor<5x5xf16>
  // expected-error @+1 {{the gradient of a trained bias of a 'f16' attention is not supported (f32 only)}}
  %y = memopt.attention %x, %x, %x, %b {scale = 0.5 : f32} : (tensor<2x5x4xf16>, tensor<2x5x4xf16>, tensor<2x5x4xf16>, tensor<5x5xf16>) -> tensor<2x5x4xf16>
  %c = memopt.cast %y : (tensor<2x5x4xf16>) -> tensor<2x5x4xf32>
  %loss = memopt.reduce_mean %c {axes = array<i64: 0, 1, 2>, keepdims = 0 : i64} : (tensor<2x5x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// The fused head + loss: one linear_cross_entropy_grad gives the hidden
// state's and the tied weight's gradients from the forward's row statistics;
// the weight's two uses (the embedding gather and the head) are summed.
// CHECK-LABEL: func.func @tied_head
// CHECK: %[[E:.*]] = memopt.gather %[[W:.*]], %arg0
// CHECK: %[[LOSS:.*]], %[[LSE:.*]] = memopt.linear_cross_entropy %[[H:.*]], %[[W]], %arg1
// CHECK: %[[DH:.*]], %[[DW:.*]] = memopt.linear_cross_entropy_grad %[[H]], %[[W]], %arg1, %[[LSE]], %{{.*}} : (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x3xi64>, tensor<2x3xf32>, tensor<f32>) -> (tensor<2x3x4xf32>, tensor<7x4xf32>)
// CHECK: memopt.add %[[DW]], %{{.*}} : (tensor<7x4xf32>, tensor<7x4xf32>) -> tensor<7x4xf32>
// CHECK: memopt.sgd_update %[[W]]
func.func @tied_head(%ids: tensor<2x3xi64>, %labels: tensor<2x3xi64>) -> tensor<f32> {
  %w = memopt.variable "wte" {initial_value = dense<0.5> : tensor<7x4xf32>, role = "parameter"} : tensor<7x4xf32>
  %e = memopt.gather %w, %ids : (tensor<7x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %h = memopt.tanh %e : tensor<2x3x4xf32>
  %loss, %lse = memopt.linear_cross_entropy %h, %w, %labels : (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x3xi64>) -> (tensor<f32>, tensor<2x3xf32>)
  return %loss : tensor<f32>
}

// -----

// cum_sum's gradient is the same running sum of dY the other way (exclusive
// kept): the reverse scan of the forward's axis-0 scan runs forwards, and the
// axis-1 exclusive scan's runs reversed. Integer running sums (position ids
// from a mask) only index the embedding: they get no gradient and no second
// scan.
// CHECK-LABEL: func.func @cum_sum
// CHECK: %[[W:.*]] = memopt.variable "w"
// CHECK: %[[IDS:.*]] = memopt.cum_sum %arg1 {axis = 1 : i64} : (tensor<2x3xi64>) -> tensor<2x3xi64>
// CHECK: %[[Y:.*]] = memopt.mul %arg0, %[[W]]
// CHECK: %[[C:.*]] = memopt.cum_sum %[[Y]] {axis = 1 : i64, exclusive = 1 : i64} : (tensor<3x4xf32>)
// CHECK: memopt.cum_sum %[[C]] {axis = 0 : i64, reverse = 1 : i64} : (tensor<3x4xf32>)
// CHECK: %[[DC:.*]] = memopt.cum_sum %{{.*}} {axis = 0 : i64} : (tensor<3x4xf32>)
// CHECK: %[[DY:.*]] = memopt.cum_sum %[[DC]] {axis = 1 : i64, exclusive = 1 : i64, reverse = 1 : i64} : (tensor<3x4xf32>)
// CHECK: %[[DW:.*]] = memopt.mul %[[DY]], %arg0
// CHECK: memopt.sgd_update %[[W]], %[[DW]]
// CHECK-NOT: memopt.cum_sum {{.*}}xi64
func.func @cum_sum(%x: tensor<3x4xf32>, %mask: tensor<2x3xi64>) -> tensor<f32> {
  %w = memopt.variable "w" {initial_value = dense<0.5> : tensor<3x4xf32>, role = "parameter"} : tensor<3x4xf32>
  %table = memopt.variable "positions" {initial_value = dense<0.25> : tensor<4x4xf32>, role = "parameter"} : tensor<4x4xf32>
  %ids = memopt.cum_sum %mask {axis = 1 : i64} : (tensor<2x3xi64>) -> tensor<2x3xi64>
  %e = memopt.gather %table, %ids : (tensor<4x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %y = memopt.mul %x, %w : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %c = memopt.cum_sum %y {axis = 1 : i64, exclusive = 1 : i64} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %r = memopt.cum_sum %c {axis = 0 : i64, reverse = 1 : i64} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %s = memopt.add %e, %r : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  %sq = memopt.mul %s, %s : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %loss = memopt.reduce_mean %sq {axes = array<i64: 0, 1, 2>, keepdims = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
