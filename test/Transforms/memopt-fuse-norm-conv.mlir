// RUN: memopt-opt %s --memopt-autodiff="optimizer=sgd momentum=0.9" --canonicalize --memopt-fuse-epilogues --memopt-layout=layout=nhwc --memopt-fuse-norm-conv=mode=on | FileCheck %s
// RUN: memopt-opt %s --memopt-autodiff="optimizer=sgd momentum=0.9" --canonicalize --memopt-fuse-epilogues --memopt-fuse-norm-conv=mode=on | FileCheck %s --check-prefix=NCHW
// RUN: memopt-opt %s --memopt-autodiff="optimizer=sgd momentum=0.9" --canonicalize --memopt-fuse-epilogues --memopt-layout=layout=nhwc --memopt-fuse-norm-conv | FileCheck %s --check-prefix=F32
// RUN: memopt-opt %s --memopt-autodiff="optimizer=sgd momentum=0.9" --canonicalize --memopt-fuse-epilogues --memopt-layout=layout=nhwc --memopt-fuse-norm-conv="mode=off" | FileCheck %s --check-prefix=F32
// RUN: sed -e '/softmax_cross_entropy/d' -e 's/return %%loss : tensor<f32>/return %%logits : tensor<2x4xf32>/' -e 's/, %%labels: tensor<2xi64>) -> tensor<f32> {/) -> tensor<2x4xf32> {/' %s | memopt-opt --memopt-mixed-precision="training=true precision=bf16" --canonicalize --memopt-append-loss=kind=cross-entropy --memopt-autodiff="optimizer=sgd momentum=0.9" --canonicalize --memopt-fuse-epilogues --memopt-layout --memopt-fuse-norm-conv="report=true" | FileCheck %s --check-prefix=BF16
// RUN: sed -e '/softmax_cross_entropy/d' -e 's/return %%loss : tensor<f32>/return %%logits : tensor<2x4xf32>/' -e 's/, %%labels: tensor<2xi64>) -> tensor<f32> {/) -> tensor<2x4xf32> {/' %s | memopt-opt --memopt-mixed-precision="training=true precision=bf16" --canonicalize --memopt-append-loss=kind=cross-entropy --memopt-autodiff="optimizer=sgd momentum=0.9" --canonicalize --memopt-fuse-epilogues --memopt-layout=layout=nhwc --memopt-fuse-norm-conv="target=host" | FileCheck %s --check-prefix=F32
// RUN: not memopt-opt %s --memopt-fuse-norm-conv=mode=sometimes 2>&1 | FileCheck %s --check-prefix=MODE

// A ResNet-style step: conv1 -> bn1 -> relu -> conv2 -> bn2 -> relu ->
// global average pool -> linear. bn1's output R1 is read only by conv2,
// conv2's filter gradient and the relu's gradient: with the fusion it is
// never formed. bn2's relu output feeds the pool: it stays. @shared_output's
// normalization also feeds a residual add: it stays.
// CHECK-LABEL: func.func @resnet_step
// CHECK: %[[C1:.*]] = memopt.conv %{{.*}} {channels_last
// The running statistics read the new op's mean and 1/std.
// CHECK-NEXT: %[[M1:.*]], %[[I1:.*]], %[[A1:.*]], %[[B1:.*]] = memopt.batch_norm_stats %[[C1]], %{{.*}}, %{{.*}} {channels_last} : (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: memopt.batch_norm_running_update %[[M1]], %[[I1]] to
// CHECK: %[[C2:.*]] = memopt.norm_relu_conv %[[C1]], %{{.*}}, %[[A1]], %[[B1]] {channels_last, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x8x8x8xf32>, tensor<8x3x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x8x8xf32>
// CHECK-NEXT: memopt.batch_norm_training %[[C2]], {{.*}} {activation = "relu", channels_last}
// The backward: conv2's data gradient as before, its filter gradient from
// C1 (R1 formed on the fly), bn1's gradient with the relu's mask from C1.
// CHECK-DAG: %[[DR1:.*]] = memopt.conv_transpose %[[DY2:[^ ,]*]]
// CHECK-DAG: memopt.norm_relu_conv_backward_filter %[[C1]], %[[DY2]], %[[A1]], %[[B1]] {channels_last
// CHECK: memopt.batch_norm_relu_grad %[[C1]], %[[DR1]], %{{.*}}, %[[M1]], %[[I1]], %[[A1]], %[[B1]] {channels_last}
// Nothing reads a normalized bn1 any more: bn2 keeps its relu gradient.
// CHECK-NOT: memopt.norm_relu_conv
// CHECK-LABEL: func.func @shared_output
// CHECK-NOT: memopt.batch_norm_stats
// CHECK: return

// Channels-first fuses too under mode=on (the runtime's fallback and cuDNN's
// channels-first engines).
// NCHW-LABEL: func.func @resnet_step
// NCHW: memopt.batch_norm_stats
// NCHW-NOT: channels_last
// NCHW: memopt.norm_relu_conv {{.*}} : (tensor<2x8x8x8xf32>, tensor<8x8x3x3xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x8x8xf32>
// NCHW: memopt.norm_relu_conv_backward_filter
// NCHW: memopt.batch_norm_relu_grad

// auto fuses only on CUDA channels-last f16 / bf16: an f32 step, the host
// target and mode=off keep the plain ops.
// F32-LABEL: func.func @resnet_step
// F32-NOT: memopt.batch_norm_stats
// F32-NOT: memopt.norm_relu_conv
// F32: return

// bf16 on CUDA under auto (channels-last, as layout auto lays bf16 training
// out): fused, in bf16.
// The reports (one per function, in any order: functions run in parallel).
// BF16-DAG: memopt-fuse-norm-conv @resnet_step: 1 of 2 batch norm + relu folded into the ops that read them (2048 bytes of activations not formed); 0 of 0 batch norm + add + relu fused
// BF16-DAG: memopt-fuse-norm-conv @residual_block: 0 of 1 batch norm + relu folded into the ops that read them (0 bytes of activations not formed); 1 of 1 batch norm + add + relu fused (1 gradients, 2048 bytes of normalized outputs not formed)
// BF16-DAG: memopt-fuse-norm-conv @downsample_block: 0 of 0 batch norm + relu folded into the ops that read them (0 bytes of activations not formed); 1 of 1 batch norm + add + relu fused (1 gradients, 512 bytes of normalized outputs not formed)
// BF16-LABEL: func.func @resnet_step
// BF16: memopt.batch_norm_stats %{{.*}} {channels_last} : (tensor<2x8x8x8xbf16>, tensor<8xf32>, tensor<8xf32>)
// BF16: memopt.norm_relu_conv {{.*}} : (tensor<2x8x8x8xbf16>, tensor<8x3x3x8xbf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x8x8xbf16>
// BF16: memopt.norm_relu_conv_backward_filter
// BF16: memopt.batch_norm_relu_grad

// MODE: memopt-fuse-norm-conv: mode 'sometimes' is not auto, on or off

func.func @resnet_step(%x: tensor<2x3x8x8xf32>, %labels: tensor<2xi64>) -> tensor<f32> {
  %w1 = memopt.variable "conv1.weight" {initial_value = dense<0.1> : tensor<8x3x3x3xf32>, role = "parameter"} : tensor<8x3x3x3xf32>
  %s1 = memopt.variable "bn1.weight" {initial_value = dense<1.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %b1 = memopt.variable "bn1.bias" {initial_value = dense<0.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %rm1 = memopt.variable "bn1.running_mean" {initial_value = dense<0.0> : tensor<8xf32>, role = "statistic"} : tensor<8xf32>
  %rv1 = memopt.variable "bn1.running_var" {initial_value = dense<1.0> : tensor<8xf32>, role = "statistic"} : tensor<8xf32>
  %w2 = memopt.variable "conv2.weight" {initial_value = dense<0.1> : tensor<8x8x3x3xf32>, role = "parameter"} : tensor<8x8x3x3xf32>
  %s2 = memopt.variable "bn2.weight" {initial_value = dense<1.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %b2 = memopt.variable "bn2.bias" {initial_value = dense<0.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %fc = memopt.variable "fc.weight" {initial_value = dense<0.1> : tensor<4x8xf32>, role = "parameter"} : tensor<4x8xf32>
  %c1 = memopt.conv %x, %w1 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x8x8xf32>
  %n1, %m1, %i1 = memopt.batch_norm_training %c1, %s1, %b1 : (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>)
  memopt.batch_norm_running_update %m1, %i1 to %rm1, %rv1 {momentum = 0.9 : f32} : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
  %r1 = memopt.relu %n1 : tensor<2x8x8x8xf32>
  %c2 = memopt.conv %r1, %w2 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x8x8x8xf32>, tensor<8x8x3x3xf32>) -> tensor<2x8x8x8xf32>
  %n2, %m2, %i2 = memopt.batch_norm_training %c2, %s2, %b2 : (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %r2 = memopt.relu %n2 : tensor<2x8x8x8xf32>
  %g = memopt.global_average_pool %r2 : (tensor<2x8x8x8xf32>) -> tensor<2x8x1x1xf32>
  %flat = memopt.reshape %g : (tensor<2x8x1x1xf32>) -> tensor<2x8xf32>
  %logits = memopt.gemm %flat, %fc {transB = 1 : i64} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  %loss = memopt.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// bn's relu output feeds a convolution and a residual add: it must exist, so
// nothing is fused.
func.func @shared_output(%x: tensor<2x8x8x8xf32>, %labels: tensor<2xi64>) -> tensor<f32> {
  %s = memopt.variable "bn.weight" {initial_value = dense<1.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %b = memopt.variable "bn.bias" {initial_value = dense<0.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %w = memopt.variable "conv.weight" {initial_value = dense<0.1> : tensor<8x8x3x3xf32>, role = "parameter"} : tensor<8x8x3x3xf32>
  %fc = memopt.variable "fc2.weight" {initial_value = dense<0.1> : tensor<4x8xf32>, role = "parameter"} : tensor<4x8xf32>
  %n, %m, %i = memopt.batch_norm_training %x, %s, %b : (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %r = memopt.relu %n : tensor<2x8x8x8xf32>
  %c = memopt.conv %r, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x8x8x8xf32>, tensor<8x8x3x3xf32>) -> tensor<2x8x8x8xf32>
  %sum = memopt.add %c, %r : (tensor<2x8x8x8xf32>, tensor<2x8x8x8xf32>) -> tensor<2x8x8x8xf32>
  %g = memopt.global_average_pool %sum : (tensor<2x8x8x8xf32>) -> tensor<2x8x1x1xf32>
  %flat = memopt.reshape %g : (tensor<2x8x1x1xf32>) -> tensor<2x8xf32>
  %logits = memopt.gemm %flat, %fc {transB = 1 : i64} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  %loss = memopt.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// A convolution with its own trained bias (an exporter's zero bias before the
// next normalization, not frozen) fuses with it: the bias rides along as the
// fused op's B, and its gradient stays the reduction of dY it was.
// CHECK-LABEL: func.func @conv_bias
// CHECK: %{{.*}}, %{{.*}}, %[[A:.*]], %[[B:.*]] = memopt.batch_norm_stats
// CHECK: memopt.norm_relu_conv %{{.*}}, %{{.*}}, %[[A]], %[[B]], %{{.*}} {{.*}} : (tensor<2x8x8x8xf32>, tensor<8x3x3x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x8x8xf32>
// CHECK: memopt.norm_relu_conv_backward_filter
// CHECK: memopt.batch_norm_relu_grad
func.func @conv_bias(%x: tensor<2x3x8x8xf32>, %labels: tensor<2xi64>) -> tensor<f32> {
  %w1 = memopt.variable "c1.weight" {initial_value = dense<0.1> : tensor<8x3x3x3xf32>, role = "parameter"} : tensor<8x3x3x3xf32>
  %s1 = memopt.variable "n1.weight" {initial_value = dense<1.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %b1 = memopt.variable "n1.bias" {initial_value = dense<0.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %w2 = memopt.variable "c2.weight" {initial_value = dense<0.1> : tensor<8x8x3x3xf32>, role = "parameter"} : tensor<8x8x3x3xf32>
  %cb2 = memopt.variable "c2.bias" {initial_value = dense<0.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %s2 = memopt.variable "n2.weight" {initial_value = dense<1.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %b2 = memopt.variable "n2.bias" {initial_value = dense<0.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %fc = memopt.variable "head.weight" {initial_value = dense<0.1> : tensor<4x8xf32>, role = "parameter"} : tensor<4x8xf32>
  %c1 = memopt.conv %x, %w1 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x8x8xf32>
  %n1, %m1, %i1 = memopt.batch_norm_training %c1, %s1, %b1 : (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %r1 = memopt.relu %n1 : tensor<2x8x8x8xf32>
  %c2 = memopt.conv %r1, %w2, %cb2 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x8x8x8xf32>, tensor<8x8x3x3xf32>, tensor<8xf32>) -> tensor<2x8x8x8xf32>
  %n2, %m2, %i2 = memopt.batch_norm_training %c2, %s2, %b2 : (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %r2 = memopt.relu %n2 : tensor<2x8x8x8xf32>
  %g = memopt.global_average_pool %r2 : (tensor<2x8x8x8xf32>) -> tensor<2x8x1x1xf32>
  %flat = memopt.reshape %g : (tensor<2x8x1x1xf32>) -> tensor<2x8xf32>
  %logits = memopt.gemm %flat, %fc {transB = 1 : i64} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  %loss = memopt.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// ResNet's stem: conv -> batch norm -> relu -> max pool. The pool and its
// gradient read R as it is: each gets R formed again right before it
// (norm_relu_apply), so R lives for one op in the forward and one in the
// backward instead of from the forward to the backward.
// CHECK-LABEL: func.func @stem_pool
// CHECK: %{{.*}}, %{{.*}}, %[[A:.*]], %[[B:.*]] = memopt.batch_norm_stats %[[C:[^,]*]],
// CHECK: %[[R1:.*]] = memopt.norm_relu_apply %[[C]], %[[A]], %[[B]] {channels_last}
// CHECK-NEXT: memopt.max_pool %[[R1]]
// CHECK: %[[R2:.*]] = memopt.norm_relu_apply %[[C]], %[[A]], %[[B]] {channels_last}
// CHECK-NEXT: %[[DR:.*]] = memopt.pool_grad %[[R2]],
// CHECK: memopt.batch_norm_relu_grad %[[C]], %[[DR]],
// CHECK-NOT: memopt.relu_grad
// CHECK: return
func.func @stem_pool(%x: tensor<2x3x8x8xf32>, %labels: tensor<2xi64>) -> tensor<f32> {
  %w1 = memopt.variable "s.weight" {initial_value = dense<0.1> : tensor<8x3x3x3xf32>, role = "parameter"} : tensor<8x3x3x3xf32>
  %s1 = memopt.variable "sn.weight" {initial_value = dense<1.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %b1 = memopt.variable "sn.bias" {initial_value = dense<0.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %fc = memopt.variable "sfc.weight" {initial_value = dense<0.1> : tensor<4x8xf32>, role = "parameter"} : tensor<4x8xf32>
  %w2 = memopt.variable "s2.weight" {initial_value = dense<0.1> : tensor<8x8x1x1xf32>, role = "parameter"} : tensor<8x8x1x1xf32>
  %c1 = memopt.conv %x, %w1 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x8x8xf32>
  %n1, %m1, %i1 = memopt.batch_norm_training %c1, %s1, %b1 : (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %r1 = memopt.relu %n1 : tensor<2x8x8x8xf32>
  %p = memopt.max_pool %r1 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x8x8x8xf32>) -> tensor<2x8x4x4xf32>
  %c2 = memopt.conv %p, %w2 {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<2x8x4x4xf32>
  %g = memopt.global_average_pool %c2 : (tensor<2x8x4x4xf32>) -> tensor<2x8x1x1xf32>
  %flat = memopt.reshape %g : (tensor<2x8x1x1xf32>) -> tensor<2x8xf32>
  %logits = memopt.gemm %flat, %fc {transB = 1 : i64} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  %loss = memopt.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// A residual block (ResNet's identity block): bn2's output feeds only
// `relu(add(n2, r1))`. It becomes one batch_norm_training with the residual
// r1 (NormAddRelu: n2 is never stored), and the relu gradient with bn2's
// gradient one batch_norm_add_relu_grad (DReluForkDNorm) whose dZ the
// residual branch (r1's gradient) reads too. bn1's output r1 (its relu
// fused by fuse-epilogues) feeds the add: it stays, with its relu gradient.
// CHECK-LABEL: func.func @residual_block
// CHECK: %[[R1:[^,]*]], %{{.*}}, %{{.*}} = memopt.batch_norm_training %{{.*}} {activation = "relu", channels_last}
// CHECK: %[[C2:.*]] = memopt.conv %[[R1]]
// CHECK-NEXT: %[[Y:.*]], %[[M:.*]], %[[I:.*]] = memopt.batch_norm_training %[[C2]], %{{.*}}, %{{.*}} residual %[[R1]] {activation = "relu", channels_last} : (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x8x8x8xf32>) -> (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: memopt.batch_norm_running_update %[[M]], %[[I]] to
// CHECK-NOT: memopt.add %{{.*}} : (tensor<2x8x8x8xf32>
// CHECK: memopt.global_average_pool %[[Y]]
// CHECK: %[[DX:.*]], %{{.*}}, %{{.*}}, %[[DZ:.*]] = memopt.batch_norm_add_relu_grad %[[C2]], %{{.*}}, %[[Y]], %{{.*}}, %[[M]], %[[I]] {channels_last} : (tensor<2x8x8x8xf32>, tensor<2x8x8x8xf32>, tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x8x8x8xf32>)
// CHECK-DAG: memopt.conv_transpose %[[DX]]
// CHECK-DAG: memopt.add {{.*}}%[[DZ]]
// CHECK: memopt.relu_grad %{{.*}}, %[[R1]]
// CHECK-NOT: memopt.batch_norm_add_relu_grad
// CHECK: return
// NCHW-LABEL: func.func @residual_block
// NCHW: memopt.batch_norm_training %{{.*}}, %{{.*}}, %{{.*}} residual %{{.*}} {activation = "relu"} :
// NCHW: memopt.batch_norm_add_relu_grad
// F32-LABEL: func.func @residual_block
// F32-NOT: residual
// F32-NOT: memopt.batch_norm_add_relu_grad
// F32: return
// BF16-LABEL: func.func @residual_block
// BF16: memopt.batch_norm_training {{.*}} residual {{.*}} : (tensor<2x8x8x8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<2x8x8x8xbf16>)
// BF16: memopt.batch_norm_add_relu_grad
func.func @residual_block(%x: tensor<2x3x8x8xf32>, %labels: tensor<2xi64>) -> tensor<f32> {
  %w0 = memopt.variable "rb.conv0.weight" {initial_value = dense<0.1> : tensor<8x3x3x3xf32>, role = "parameter"} : tensor<8x3x3x3xf32>
  %w1 = memopt.variable "rb.conv1.weight" {initial_value = dense<0.1> : tensor<8x8x3x3xf32>, role = "parameter"} : tensor<8x8x3x3xf32>
  %s1 = memopt.variable "rb.bn1.weight" {initial_value = dense<1.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %b1 = memopt.variable "rb.bn1.bias" {initial_value = dense<0.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %w2 = memopt.variable "rb.conv2.weight" {initial_value = dense<0.1> : tensor<8x8x3x3xf32>, role = "parameter"} : tensor<8x8x3x3xf32>
  %s2 = memopt.variable "rb.bn2.weight" {initial_value = dense<1.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %b2 = memopt.variable "rb.bn2.bias" {initial_value = dense<0.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %rm2 = memopt.variable "rb.bn2.running_mean" {initial_value = dense<0.0> : tensor<8xf32>, role = "statistic"} : tensor<8xf32>
  %rv2 = memopt.variable "rb.bn2.running_var" {initial_value = dense<1.0> : tensor<8xf32>, role = "statistic"} : tensor<8xf32>
  %fc = memopt.variable "rb.fc.weight" {initial_value = dense<0.1> : tensor<4x8xf32>, role = "parameter"} : tensor<4x8xf32>
  %c0 = memopt.conv %x, %w0 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x8x8xf32>
  %c1 = memopt.conv %c0, %w1 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x8x8x8xf32>, tensor<8x8x3x3xf32>) -> tensor<2x8x8x8xf32>
  %n1, %m1, %i1 = memopt.batch_norm_training %c1, %s1, %b1 : (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %r1 = memopt.relu %n1 : tensor<2x8x8x8xf32>
  %c2 = memopt.conv %r1, %w2 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x8x8x8xf32>, tensor<8x8x3x3xf32>) -> tensor<2x8x8x8xf32>
  %n2, %m2, %i2 = memopt.batch_norm_training %c2, %s2, %b2 : (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>)
  memopt.batch_norm_running_update %m2, %i2 to %rm2, %rv2 {momentum = 0.9 : f32} : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
  %sum = memopt.add %n2, %r1 : (tensor<2x8x8x8xf32>, tensor<2x8x8x8xf32>) -> tensor<2x8x8x8xf32>
  %out = memopt.relu %sum : tensor<2x8x8x8xf32>
  %g = memopt.global_average_pool %out : (tensor<2x8x8x8xf32>) -> tensor<2x8x1x1xf32>
  %flat = memopt.reshape %g : (tensor<2x8x1x1xf32>) -> tensor<2x8xf32>
  %logits = memopt.gemm %flat, %fc {transB = 1 : i64} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  %loss = memopt.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// A downsampling block: the add reads two normalizations (the main branch's
// and the shortcut's). The one whose residual exists before it fuses (the
// shortcut's, written after); the other is the fused op's residual.
// CHECK-LABEL: func.func @downsample_block
// CHECK: %[[MAIN:[^,]*]], %{{.*}}, %{{.*}} = memopt.batch_norm_training %{{.*}} {channels_last}
// CHECK: memopt.batch_norm_training %{{.*}}, %{{.*}}, %{{.*}} residual %[[MAIN]] {activation = "relu", channels_last}
// CHECK: %{{.*}}, %{{.*}}, %{{.*}}, %[[DZ:.*]] = memopt.batch_norm_add_relu_grad
// The main branch's normalization reads the same dZ.
// CHECK: memopt.batch_norm_training_grad %{{.*}}, %[[DZ]],
// CHECK: return
func.func @downsample_block(%x: tensor<2x8x8x8xf32>, %labels: tensor<2xi64>) -> tensor<f32> {
  %w1 = memopt.variable "ds.conv1.weight" {initial_value = dense<0.1> : tensor<8x8x3x3xf32>, role = "parameter"} : tensor<8x8x3x3xf32>
  %s1 = memopt.variable "ds.bn1.weight" {initial_value = dense<1.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %b1 = memopt.variable "ds.bn1.bias" {initial_value = dense<0.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %w2 = memopt.variable "ds.down.weight" {initial_value = dense<0.1> : tensor<8x8x1x1xf32>, role = "parameter"} : tensor<8x8x1x1xf32>
  %s2 = memopt.variable "ds.bn2.weight" {initial_value = dense<1.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %b2 = memopt.variable "ds.bn2.bias" {initial_value = dense<0.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %fc = memopt.variable "ds.fc.weight" {initial_value = dense<0.1> : tensor<4x8xf32>, role = "parameter"} : tensor<4x8xf32>
  %c1 = memopt.conv %x, %w1 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x8x8x8xf32>, tensor<8x8x3x3xf32>) -> tensor<2x8x4x4xf32>
  %n1, %m1, %i1 = memopt.batch_norm_training %c1, %s1, %b1 : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  %c2 = memopt.conv %x, %w2 {kernel_shape = array<i64: 1, 1>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x8x8x8xf32>, tensor<8x8x1x1xf32>) -> tensor<2x8x4x4xf32>
  %n2, %m2, %i2 = memopt.batch_norm_training %c2, %s2, %b2 : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  %sum = memopt.add %n1, %n2 : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %out = memopt.relu %sum : tensor<2x8x4x4xf32>
  %g = memopt.global_average_pool %out : (tensor<2x8x4x4xf32>) -> tensor<2x8x1x1xf32>
  %flat = memopt.reshape %g : (tensor<2x8x1x1xf32>) -> tensor<2x8xf32>
  %logits = memopt.gemm %flat, %fc {transB = 1 : i64} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  %loss = memopt.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// Not exact: the sum is read by the relu and by the pool, or the
// normalization's output by the add and the pool. Nothing fuses.
// CHECK-LABEL: func.func @residual_sum_shared
// CHECK-NOT: residual
// CHECK-NOT: memopt.batch_norm_add_relu_grad
// CHECK: return
func.func @residual_sum_shared(%x: tensor<2x8x8x8xf32>, %labels: tensor<2xi64>) -> tensor<f32> {
  %w1 = memopt.variable "sh.conv.weight" {initial_value = dense<0.1> : tensor<8x8x3x3xf32>, role = "parameter"} : tensor<8x8x3x3xf32>
  %s1 = memopt.variable "sh.bn.weight" {initial_value = dense<1.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %b1 = memopt.variable "sh.bn.bias" {initial_value = dense<0.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %s2 = memopt.variable "sh.bn2.weight" {initial_value = dense<1.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %b2 = memopt.variable "sh.bn2.bias" {initial_value = dense<0.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %fc = memopt.variable "sh.fc.weight" {initial_value = dense<0.1> : tensor<4x8xf32>, role = "parameter"} : tensor<4x8xf32>
  %c1 = memopt.conv %x, %w1 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x8x8x8xf32>, tensor<8x8x3x3xf32>) -> tensor<2x8x8x8xf32>
  %n1, %m1, %i1 = memopt.batch_norm_training %c1, %s1, %b1 : (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %sum = memopt.add %n1, %x : (tensor<2x8x8x8xf32>, tensor<2x8x8x8xf32>) -> tensor<2x8x8x8xf32>
  %out = memopt.relu %sum : tensor<2x8x8x8xf32>
  %n2, %m2, %i2 = memopt.batch_norm_training %c1, %s2, %b2 : (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %sum2 = memopt.add %n2, %x : (tensor<2x8x8x8xf32>, tensor<2x8x8x8xf32>) -> tensor<2x8x8x8xf32>
  %out2 = memopt.relu %sum2 : tensor<2x8x8x8xf32>
  %both = memopt.add %out, %sum : (tensor<2x8x8x8xf32>, tensor<2x8x8x8xf32>) -> tensor<2x8x8x8xf32>
  %all = memopt.add %both, %n2 : (tensor<2x8x8x8xf32>, tensor<2x8x8x8xf32>) -> tensor<2x8x8x8xf32>
  %all2 = memopt.add %all, %out2 : (tensor<2x8x8x8xf32>, tensor<2x8x8x8xf32>) -> tensor<2x8x8x8xf32>
  %g = memopt.global_average_pool %all2 : (tensor<2x8x8x8xf32>) -> tensor<2x8x1x1xf32>
  %flat = memopt.reshape %g : (tensor<2x8x1x1xf32>) -> tensor<2x8xf32>
  %logits = memopt.gemm %flat, %fc {transB = 1 : i64} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  %loss = memopt.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
