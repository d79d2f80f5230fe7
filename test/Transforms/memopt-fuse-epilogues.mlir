// RUN: memopt-opt %s --memopt-fuse-epilogues --split-input-file | FileCheck %s

// A Linear layer on [batch, tokens, features] followed by GPT-2's tanh GELU,
// as the dynamo exporter writes it: one gemm with the bias as C and the
// activation as its epilogue, between views.
// CHECK-LABEL: func.func @linear_bias_gelu_tanh
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>, %[[W:.*]]: tensor<4x5xf32>, %[[B:.*]]: tensor<5xf32>)
// CHECK-NEXT: %[[A:.*]] = memopt.reshape %[[X]] : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT: %[[G:.*]] = memopt.gemm %[[A]], %[[W]], %[[B]] {activation = "gelu_tanh"} : (tensor<6x4xf32>, tensor<4x5xf32>, tensor<5xf32>) -> tensor<6x5xf32>
// CHECK-NEXT: %[[Y:.*]] = memopt.reshape %[[G]] : (tensor<6x5xf32>) -> tensor<2x3x5xf32>
// CHECK-NEXT: return %[[Y]]
func.func @linear_bias_gelu_tanh(%x: tensor<2x3x4xf32>, %w: tensor<4x5xf32>, %b: tensor<5xf32>) -> tensor<2x3x5xf32> {
  %half = memopt.constant dense<5.000000e-01> : tensor<f32>
  %three = memopt.constant dense<3.000000e+00> : tensor<f32>
  %c = memopt.constant dense<4.471500e-02> : tensor<f32>
  %s = memopt.constant dense<0.797884583> : tensor<f32>
  %one = memopt.constant dense<1.000000e+00> : tensor<f32>
  %m = memopt.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %h = memopt.add %m, %b : (tensor<2x3x5xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
  %0 = memopt.mul %h, %half : (tensor<2x3x5xf32>, tensor<f32>) -> tensor<2x3x5xf32>
  %1 = memopt.pow %h, %three : (tensor<2x3x5xf32>, tensor<f32>) -> tensor<2x3x5xf32>
  %2 = memopt.mul %1, %c : (tensor<2x3x5xf32>, tensor<f32>) -> tensor<2x3x5xf32>
  %3 = memopt.add %h, %2 : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %4 = memopt.mul %3, %s : (tensor<2x3x5xf32>, tensor<f32>) -> tensor<2x3x5xf32>
  %5 = memopt.tanh %4 : tensor<2x3x5xf32>
  %6 = memopt.add %5, %one : (tensor<2x3x5xf32>, tensor<f32>) -> tensor<2x3x5xf32>
  %7 = memopt.mul %0, %6 : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  return %7 : tensor<2x3x5xf32>
}

// -----

// x^3 written as x * x * x, operands commuted: still the tanh GELU.
// CHECK-LABEL: func.func @gelu_tanh_commuted
// CHECK-NEXT: %[[G:.*]] = memopt.gelu %arg0 {approximate = "tanh"} : tensor<8xf32>
// CHECK-NEXT: return %[[G]]
func.func @gelu_tanh_commuted(%x: tensor<8xf32>) -> tensor<8xf32> {
  %half = memopt.constant dense<5.000000e-01> : tensor<f32>
  %c = memopt.constant dense<4.471500e-02> : tensor<f32>
  %s = memopt.constant dense<0.797884583> : tensor<f32>
  %one = memopt.constant dense<1.000000e+00> : tensor<f32>
  %0 = memopt.mul %half, %x : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %sq = memopt.mul %x, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = memopt.mul %sq, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %2 = memopt.mul %c, %1 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %3 = memopt.add %2, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %4 = memopt.mul %s, %3 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %5 = memopt.tanh %4 : tensor<8xf32>
  %6 = memopt.add %one, %5 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %7 = memopt.mul %6, %0 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %7 : tensor<8xf32>
}

// -----

// A wrong coefficient is another function: left alone.
// CHECK-LABEL: func.func @not_gelu
// CHECK: memopt.tanh
// CHECK-NOT: memopt.gelu
func.func @not_gelu(%x: tensor<8xf32>) -> tensor<8xf32> {
  %half = memopt.constant dense<5.000000e-01> : tensor<f32>
  %three = memopt.constant dense<3.000000e+00> : tensor<f32>
  %c = memopt.constant dense<5.000000e-02> : tensor<f32>
  %s = memopt.constant dense<0.797884583> : tensor<f32>
  %one = memopt.constant dense<1.000000e+00> : tensor<f32>
  %0 = memopt.mul %x, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %1 = memopt.pow %x, %three : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %2 = memopt.mul %1, %c : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %3 = memopt.add %x, %2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %4 = memopt.mul %3, %s : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %5 = memopt.tanh %4 : tensor<8xf32>
  %6 = memopt.add %5, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %7 = memopt.mul %0, %6 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %7 : tensor<8xf32>
}

// -----

// Conv + relu: the conv's activation.
// CHECK-LABEL: func.func @conv_relu
// CHECK-NEXT: %[[C:.*]] = memopt.conv %arg0, %arg1, %arg2 {activation = "relu", {{.*}}}
// CHECK-NEXT: return %[[C]]
func.func @conv_relu(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x1x1xf32>, %b: tensor<3xf32>) -> tensor<1x3x4x4xf32> {
  %0 = memopt.conv %x, %w, %b {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32> loc("stem/Conv")
  %1 = memopt.relu %0 : tensor<1x3x4x4xf32> loc("stem/Relu")
  return %1 : tensor<1x3x4x4xf32>
}

// -----

// The pre-activation value is also returned: nothing to fuse.
// CHECK-LABEL: func.func @conv_relu_two_uses
// CHECK: memopt.conv
// CHECK-NOT: activation
// CHECK: memopt.relu
func.func @conv_relu_two_uses(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x1x1xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) {
  %0 = memopt.conv %x, %w {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %1 = memopt.relu %0 : tensor<1x3x4x4xf32>
  return %0, %1 : tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>
}

// -----

// gemm + [1, N] bias (as a view to [N]) + relu; a full [M, N] addend (a
// residual) is not a bias and stays an add.
// CHECK-LABEL: func.func @gemm_bias_relu_then_residual
// CHECK-NEXT: %[[B:.*]] = memopt.reshape %arg2 : (tensor<1x5xf32>) -> tensor<5xf32>
// CHECK-NEXT: %[[G:.*]] = memopt.gemm %arg0, %arg1, %[[B]] {activation = "relu", transB = 1 : i64}
// CHECK-NEXT: %[[R:.*]] = memopt.add %[[G]], %arg3
// CHECK-NEXT: return %[[R]]
func.func @gemm_bias_relu_then_residual(%a: tensor<3x4xf32>, %w: tensor<5x4xf32>, %b: tensor<1x5xf32>, %r: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %0 = memopt.gemm %a, %w {transB = 1 : i64} : (tensor<3x4xf32>, tensor<5x4xf32>) -> tensor<3x5xf32>
  %1 = memopt.add %b, %0 : (tensor<1x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %2 = memopt.relu %1 : tensor<3x5xf32>
  %3 = memopt.add %2, %r : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  return %3 : tensor<3x5xf32>
}

// -----

// A gemm that already has C keeps it; a second bias add is not merged.
// CHECK-LABEL: func.func @gemm_with_c
// CHECK: memopt.gemm %arg0, %arg1, %arg2 :
// CHECK-NEXT: memopt.add
func.func @gemm_with_c(%a: tensor<3x4xf32>, %w: tensor<4x5xf32>, %c: tensor<5xf32>) -> tensor<3x5xf32> {
  %0 = memopt.gemm %a, %w, %c : (tensor<3x4xf32>, tensor<4x5xf32>, tensor<5xf32>) -> tensor<3x5xf32>
  %1 = memopt.add %0, %c : (tensor<3x5xf32>, tensor<5xf32>) -> tensor<3x5xf32>
  return %1 : tensor<3x5xf32>
}

// -----

// ResNet's shortcut: relu(conv(x) + z) is one conv_residual (cuDNN's fused
// conv + bias + z + activation), whichever side of the add the conv is on. A
// conv without a bias gets a zero one.
// CHECK-LABEL: func.func @conv_residual_relu
// CHECK-DAG: %[[ZERO:.*]] = memopt.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK: %[[R:.*]] = memopt.conv_residual %arg0, %arg1, %[[ZERO]], %arg2 {activation = "relu", {{.*}}} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>, tensor<3xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
// CHECK-NEXT: return %[[R]]
func.func @conv_residual_relu(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x1x1xf32>, %z: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %0 = memopt.conv %x, %w {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %1 = memopt.add %z, %0 : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %2 = memopt.relu %1 : tensor<1x3x4x4xf32>
  return %2 : tensor<1x3x4x4xf32>
}

// -----

// Not fused: a broadcast addend (a bias, not a residual), a conv result that
// is used again, and an add of a conv that already has an activation.
// CHECK-LABEL: func.func @conv_residual_not_fused
// CHECK-NOT: memopt.conv_residual
// CHECK: return
func.func @conv_residual_not_fused(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x1x1xf32>, %v: tensor<1x3x1x1xf32>, %z: tensor<1x3x4x4xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) {
  %0 = memopt.conv %x, %w {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %1 = memopt.add %0, %v : (tensor<1x3x4x4xf32>, tensor<1x3x1x1xf32>) -> tensor<1x3x4x4xf32>
  %2 = memopt.conv %x, %w {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %3 = memopt.add %2, %z : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %4 = memopt.conv %x, %w {activation = "relu", dilations = array<i64: 1, 1>, kernel_shape = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %5 = memopt.add %4, %z : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %6 = memopt.add %3, %2 : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  return %1, %6, %5 : tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>
}

// -----

// relu after a training-mode batch normalization becomes its activation.
// CHECK-LABEL: func.func @batch_norm_relu
// CHECK: %[[Y:.*]], %{{.*}}, %{{.*}} = memopt.batch_norm_training %arg0, %arg1, %arg2 {activation = "relu"}
// CHECK-NOT: memopt.relu
// CHECK: return %[[Y]]
func.func @batch_norm_relu(%x: tensor<2x3x4x4xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<2x3x4x4xf32> {
  %y, %m, %i = memopt.batch_norm_training %x, %s, %b : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  %r = memopt.relu %y : tensor<2x3x4x4xf32>
  return %r : tensor<2x3x4x4xf32>
}

// -----

// A convolution's all-zero constant bias (torch.onnx's zero biases, frozen)
// is dropped, in the forward and in the data gradient; a non-zero one stays.
// CHECK-LABEL: func.func @zero_conv_bias
// CHECK: memopt.conv %arg0, %arg1 {
// CHECK: memopt.conv_transpose %{{[0-9]+}}, %{{[0-9]+}} {
// CHECK: memopt.conv %arg0, %arg1, %{{.*}} {
func.func @zero_conv_bias(%x: tensor<1x2x4x4xf16>, %w: tensor<3x2x1x1xf16>) -> (tensor<1x3x4x4xf16>, tensor<1x3x4x4xf16>, tensor<1x3x4x4xf16>) {
  %zero = memopt.constant dense<0.0> : tensor<3xf16>
  %one = memopt.constant dense<1.0> : tensor<3xf16>
  %zero2 = memopt.constant dense<0.0> : tensor<3xf16>
  %0 = memopt.conv %x, %w, %zero {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf16>, tensor<3x2x1x1xf16>, tensor<3xf16>) -> tensor<1x3x4x4xf16>
  %wt = memopt.constant dense<0.5> : tensor<3x3x1x1xf16>
  %1 = memopt.conv_transpose %0, %wt, %zero2 {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf16>, tensor<3x3x1x1xf16>, tensor<3xf16>) -> tensor<1x3x4x4xf16>
  %2 = memopt.conv %x, %w, %one {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf16>, tensor<3x2x1x1xf16>, tensor<3xf16>) -> tensor<1x3x4x4xf16>
  return %0, %1, %2 : tensor<1x3x4x4xf16>, tensor<1x3x4x4xf16>, tensor<1x3x4x4xf16>
}
