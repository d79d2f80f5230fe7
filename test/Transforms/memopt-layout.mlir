// RUN: memopt-opt %s -split-input-file -verify-diagnostics --memopt-layout | FileCheck %s
// RUN: memopt-opt %s -split-input-file --memopt-layout=layout=nhwc | FileCheck %s --check-prefix=NHWC
// RUN: memopt-opt %s -split-input-file --memopt-layout="layout=auto target=host" | FileCheck %s --check-prefix=HOST
// RUN: memopt-opt %s -split-input-file --mlir-disable-threading --memopt-layout="layout=nhwc report" -o /dev/null 2>/dev/null | FileCheck %s --check-prefix=REPORT
// RUN: not memopt-opt %s -split-input-file --memopt-layout=layout=chw -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: memopt-layout: layout 'chw' is not auto, nchw or nhwc

// f16 convolutions go channels-last by default (target cuda): the filter is
// transposed to KRSC at compile time, the relu between the two convolutions
// follows the layout, and the only transposes left are at the borders (the
// input and the output).
// CHECK-LABEL: func.func @f16_chain
// CHECK-SAME: memopt.layout = "nhwc"
// CHECK: %[[W1:.*]] = memopt.constant dense<{{\[\[\[\[}}1.000000e+00, 2.000000e+00]]], {{\[\[\[}}3.000000e+00, 4.000000e+00]]], {{\[\[\[}}5.000000e+00, 6.000000e+00]]]]> : tensor<3x1x1x2xf16>
// CHECK: %[[IN:.*]] = memopt.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x2x5x5xf16>) -> tensor<1x5x5x2xf16>
// CHECK: %[[C1:.*]] = memopt.conv %[[IN]], %[[W1]] {channels_last, {{.*}}} : (tensor<1x5x5x2xf16>, tensor<3x1x1x2xf16>) -> tensor<1x5x5x3xf16>
// CHECK-NEXT: %[[R:.*]] = memopt.relu %[[C1]] : tensor<1x5x5x3xf16>
// CHECK-NEXT: %[[C2:.*]] = memopt.conv %[[R]], %{{.*}} {channels_last, {{.*}}} : (tensor<1x5x5x3xf16>, tensor<4x3x3x3xf16>) -> tensor<1x5x5x4xf16>
// CHECK-NEXT: %[[OUT:.*]] = memopt.transpose %[[C2]] {perm = array<i64: 0, 3, 1, 2>} : (tensor<1x5x5x4xf16>) -> tensor<1x4x5x5xf16>
// CHECK-NEXT: return %[[OUT]]
// HOST-LABEL: func.func @f16_chain
// HOST-SAME: memopt.layout = "nchw"
// HOST-NOT: memopt.transpose
// HOST-NOT: channels_last
// HOST: return
// REPORT: memopt-layout @f16_chain: 2 of 2 convolutions channels-last, 2 layout transposes left (300 bytes)
func.func @f16_chain(%x: tensor<1x2x5x5xf16>) -> tensor<1x4x5x5xf16> {
  %w1 = memopt.constant dense<[[[[1.0]], [[2.0]]], [[[3.0]], [[4.0]]], [[[5.0]], [[6.0]]]]> : tensor<3x2x1x1xf16>
  %w2 = memopt.constant dense<0.5> : tensor<4x3x3x3xf16>
  %c1 = memopt.conv %x, %w1 {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x5x5xf16>, tensor<3x2x1x1xf16>) -> tensor<1x3x5x5xf16>
  %r = memopt.relu %c1 : tensor<1x3x5x5xf16>
  %c2 = memopt.conv %r, %w2 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x3x5x5xf16>, tensor<4x3x3x3xf16>) -> tensor<1x4x5x5xf16>
  return %c2 : tensor<1x4x5x5xf16>
}

// -----

// f32 convolutions stay NCHW under `auto` (cuDNN's f32 kernels were not
// faster channels-last); `layout=nhwc` converts them anyway.
// CHECK-LABEL: func.func @f32_stays
// CHECK-SAME: memopt.layout = "nchw"
// CHECK-NOT: memopt.transpose
// CHECK: memopt.conv %arg0, %{{.*}} {dilations
// NHWC-LABEL: func.func @f32_stays
// NHWC: memopt.conv %{{.*}}, %{{.*}} {channels_last
// REPORT: memopt-layout @f32_stays: 1 of 1 convolutions channels-last, 2 layout transposes left
func.func @f32_stays(%x: tensor<1x2x5x5xf32>) -> tensor<1x4x5x5xf32> {
  %w = memopt.constant dense<0.5> : tensor<4x2x3x3xf32>
  %c = memopt.conv %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x5x5xf32>
  return %c : tensor<1x4x5x5xf32>
}

// -----

// A ResNet block and its head: max pooling gets channels_last, the residual
// convolution takes its shortcut channels-last, the global mean over H and
// W becomes a mean over axes 1 and 2 whose [N, 1, 1, C] result reaches the
// classifier through reshapes only: no transpose but the input's.
// CHECK-LABEL: func.func @resnet_block
// CHECK: memopt.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>}
// CHECK: %[[P:.*]] = memopt.max_pool %{{.*}} {channels_last, {{.*}}} : (tensor<2x8x8x4xf16>) -> tensor<2x4x4x4xf16>
// CHECK: %[[C:.*]] = memopt.conv %[[P]], %{{.*}} {activation = "relu", channels_last
// CHECK: %[[S:.*]] = memopt.conv_residual %[[C]], %{{.*}}, %{{.*}}, %[[P]] {activation = "relu", channels_last
// CHECK: %[[M:.*]] = memopt.reduce_mean %[[S]] {axes = array<i64: 1, 2>} : (tensor<2x4x4x4xf16>) -> tensor<2x1x1x4xf16>
// CHECK-NOT: memopt.transpose
// CHECK: memopt.reshape %[[M]] : (tensor<2x1x1x4xf16>) -> tensor<2x4xf16>
// CHECK: memopt.gemm
func.func @resnet_block(%x: tensor<2x4x16x16xf16>) -> tensor<2x3xf16> {
  %w0 = memopt.constant dense<0.5> : tensor<4x4x3x3xf16>
  %w1 = memopt.constant dense<0.25> : tensor<4x4x3x3xf16>
  %b = memopt.constant dense<0.1> : tensor<4xf16>
  %fc = memopt.constant dense<0.1> : tensor<3x4xf16>
  %c0 = memopt.conv %x, %w0 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, activation = "relu"} : (tensor<2x4x16x16xf16>, tensor<4x4x3x3xf16>) -> tensor<2x4x8x8xf16>
  %p = memopt.max_pool %c0 {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x4x8x8xf16>) -> tensor<2x4x4x4xf16>
  %c1 = memopt.conv %p, %w1, %b {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, activation = "relu"} : (tensor<2x4x4x4xf16>, tensor<4x4x3x3xf16>, tensor<4xf16>) -> tensor<2x4x4x4xf16>
  %s = memopt.conv_residual %c1, %w1, %b, %p {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, activation = "relu"} : (tensor<2x4x4x4xf16>, tensor<4x4x3x3xf16>, tensor<4xf16>, tensor<2x4x4x4xf16>) -> tensor<2x4x4x4xf16>
  %m = memopt.reduce_mean %s {axes = array<i64: 2, 3>, keepdims = 1 : i64} : (tensor<2x4x4x4xf16>) -> tensor<2x4x1x1xf16>
  %f = memopt.reshape %m : (tensor<2x4x1x1xf16>) -> tensor<2x4xf16>
  %y = memopt.gemm %f, %fc {transB = 1 : i64} : (tensor<2x4xf16>, tensor<3x4xf16>) -> tensor<2x3xf16>
  return %y : tensor<2x3xf16>
}

// -----

// A squeeze-excitation gate (MobileNetV3): the [N, C, 1, 1] scale is
// broadcast over the feature map; in channels-last it is [N, 1, 1, C], a
// reshape of the gate's own channels-last result. Batch norm, average
// pooling and a channel concat follow the layout (concat on axis 3).
// CHECK-LABEL: func.func @se_gate_concat
// CHECK-COUNT-1: memopt.transpose %arg0
// CHECK-NOT: memopt.transpose
// CHECK: memopt.reduce_mean %{{.*}} {axes = array<i64: 1, 2>} : (tensor<1x6x6x8xf16>) -> tensor<1x1x1x8xf16>
// CHECK: memopt.hard_sigmoid %{{.*}} : tensor<1x1x1x8xf16>
// CHECK: memopt.mul %{{.*}}, %{{.*}} : (tensor<1x6x6x8xf16>, tensor<1x1x1x8xf16>) -> tensor<1x6x6x8xf16>
// CHECK: memopt.batch_normalization %{{.*}} {channels_last
// CHECK: memopt.average_pool %{{.*}} {channels_last
// CHECK: memopt.concat %{{.*}}, %{{.*}} {axis = 3 : i64} : (tensor<1x3x3x8xf16>, tensor<1x3x3x8xf16>) -> tensor<1x3x3x16xf16>
// CHECK: memopt.transpose %{{.*}} {perm = array<i64: 0, 3, 1, 2>}
// CHECK-NOT: memopt.transpose
// CHECK: return
func.func @se_gate_concat(%x: tensor<1x8x6x6xf16>) -> tensor<1x16x3x3xf16> {
  %w = memopt.constant dense<0.5> : tensor<8x8x1x1xf16>
  %ch = memopt.constant dense<1.0> : tensor<8xf16>
  %c = memopt.conv %x, %w {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x8x6x6xf16>, tensor<8x8x1x1xf16>) -> tensor<1x8x6x6xf16>
  %m = memopt.reduce_mean %c {axes = array<i64: 2, 3>, keepdims = 1 : i64} : (tensor<1x8x6x6xf16>) -> tensor<1x8x1x1xf16>
  %g = memopt.conv %m, %w {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x8x1x1xf16>, tensor<8x8x1x1xf16>) -> tensor<1x8x1x1xf16>
  %h = memopt.hard_sigmoid %g {alpha = 0.1666 : f32, beta = 0.5 : f32} : tensor<1x8x1x1xf16>
  %s = memopt.mul %c, %h : (tensor<1x8x6x6xf16>, tensor<1x8x1x1xf16>) -> tensor<1x8x6x6xf16>
  %n = memopt.batch_normalization %s, %ch, %ch, %ch, %ch : (tensor<1x8x6x6xf16>, tensor<8xf16>, tensor<8xf16>, tensor<8xf16>, tensor<8xf16>) -> tensor<1x8x6x6xf16>
  %a = memopt.average_pool %n {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x8x6x6xf16>) -> tensor<1x8x3x3xf16>
  %k = memopt.concat %a, %a {axis = 1 : i64} : (tensor<1x8x3x3xf16>, tensor<1x8x3x3xf16>) -> tensor<1x16x3x3xf16>
  return %k : tensor<1x16x3x3xf16>
}

// -----

// An elementwise op whose other operand is a full NCHW tensor from outside
// the region would need a real transpose of that operand: the transpose
// stays before the add instead (only moved transposes are free).
// CHECK-LABEL: func.func @foreign_operand
// CHECK: %[[C:.*]] = memopt.conv {{.*}}channels_last
// CHECK: %[[T:.*]] = memopt.transpose %[[C]] {perm = array<i64: 0, 3, 1, 2>}
// CHECK: memopt.add %[[T]], %arg1 : (tensor<1x4x5x5xf16>, tensor<1x4x5x5xf16>) -> tensor<1x4x5x5xf16>
func.func @foreign_operand(%x: tensor<1x2x5x5xf16>, %y: tensor<1x4x5x5xf16>) -> tensor<1x4x5x5xf16> {
  %w = memopt.constant dense<0.5> : tensor<4x2x3x3xf16>
  %c = memopt.conv %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x2x5x5xf16>, tensor<4x2x3x3xf16>) -> tensor<1x4x5x5xf16>
  %a = memopt.add %c, %y : (tensor<1x4x5x5xf16>, tensor<1x4x5x5xf16>) -> tensor<1x4x5x5xf16>
  return %a : tensor<1x4x5x5xf16>
}

// -----

// A reduction without keepdims: the remaining axes of a channels-last
// reduction over H and W are already [N, C]: no transpose.
// CHECK-LABEL: func.func @reduce_no_keepdims
// CHECK: memopt.reduce_mean %{{.*}} {axes = array<i64: 1, 2>, keepdims = 0 : i64} : (tensor<2x5x5x4xf16>) -> tensor<2x4xf16>
// CHECK-NEXT: return
func.func @reduce_no_keepdims(%x: tensor<2x2x5x5xf16>) -> tensor<2x4xf16> {
  %w = memopt.constant dense<0.5> : tensor<4x2x3x3xf16>
  %c = memopt.conv %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x2x5x5xf16>, tensor<4x2x3x3xf16>) -> tensor<2x4x5x5xf16>
  %m = memopt.reduce_mean %c {axes = array<i64: 2, 3>, keepdims = 0 : i64} : (tensor<2x4x5x5xf16>) -> tensor<2x4xf16>
  return %m : tensor<2x4xf16>
}

// -----

// ConvNeXt: the exporter's own permutes to NHWC for LayerNorm and back
// cancel against the convolution's channels-last result. A depthwise
// convolution (group == C_in == C_out) goes channels-last under auto too:
// the CUDA runtime runs it on memopt's depthwise kernel or cuDNN's,
// whichever it measures faster.
// CHECK-LABEL: func.func @convnext_permutes
// CHECK-SAME: memopt.layout = "nhwc"
// CHECK-COUNT-1: memopt.transpose %arg0
// CHECK: memopt.conv {{.*}}channels_last{{.*}}group = 4
// CHECK-NEXT: memopt.layer_normalization
// CHECK: memopt.add
// CHECK: memopt.transpose %{{.*}} {perm = array<i64: 0, 3, 1, 2>}
// CHECK-NEXT: return
// HOST-LABEL: func.func @convnext_permutes
// HOST-SAME: memopt.layout = "nchw"
// NHWC-LABEL: func.func @convnext_permutes
// NHWC-COUNT-1: memopt.transpose %arg0
// NHWC: memopt.conv {{.*}}channels_last
// NHWC-NEXT: memopt.layer_normalization
// NHWC: memopt.add
// NHWC: memopt.transpose %{{.*}} {perm = array<i64: 0, 3, 1, 2>}
// NHWC-NEXT: return
func.func @convnext_permutes(%x: tensor<1x4x5x5xf16>) -> tensor<1x4x5x5xf16> {
  %w = memopt.constant dense<0.5> : tensor<4x1x3x3xf16>
  %g = memopt.constant dense<1.0> : tensor<4xf16>
  %c = memopt.conv %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 4 : i64} : (tensor<1x4x5x5xf16>, tensor<4x1x3x3xf16>) -> tensor<1x4x5x5xf16>
  %t = memopt.transpose %c {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x4x5x5xf16>) -> tensor<1x5x5x4xf16>
  %n = memopt.layer_normalization %t, %g, %g {axis = -1 : i64} : (tensor<1x5x5x4xf16>, tensor<4xf16>, tensor<4xf16>) -> tensor<1x5x5x4xf16>
  %b = memopt.transpose %n {perm = array<i64: 0, 3, 1, 2>} : (tensor<1x5x5x4xf16>) -> tensor<1x4x5x5xf16>
  %r = memopt.add %b, %c : (tensor<1x4x5x5xf16>, tensor<1x4x5x5xf16>) -> tensor<1x4x5x5xf16>
  return %r : tensor<1x4x5x5xf16>
}

// -----

// A training program follows the same policy (f32: NCHW under auto). With
// layout=nhwc its filter, a variable, is transposed in the program (its value
// changes every step), not at compile time; memopt-layout-training.mlir has
// the gradients.
// CHECK-LABEL: func.func @training
// CHECK-SAME: memopt.layout = "nchw"
// CHECK-NOT: channels_last
// NHWC-LABEL: func.func @training
// NHWC-SAME: memopt.layout = "nhwc"
// NHWC-DAG: %[[X:.*]] = memopt.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>}
// NHWC-DAG: %[[W:.*]] = memopt.variable "w"
// NHWC-DAG: %[[WT:.*]] = memopt.transpose %[[W]] {perm = array<i64: 0, 2, 3, 1>} : (tensor<4x2x3x3xf32>) -> tensor<4x3x3x2xf32>
// NHWC: memopt.conv %[[X]], %[[WT]] {{.*}}channels_last
func.func @training(%x: tensor<1x2x5x5xf32>) -> tensor<1x4x5x5xf32> {
  %w = memopt.variable "w" {role = "parameter"} : tensor<4x2x3x3xf32>
  %c = memopt.conv %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x5x5xf32>
  return %c : tensor<1x4x5x5xf32>
}

// -----

// TF32 (f32 tensors, memopt.precision = "tf32"), like f16: channels-last when
// the function has no grouped convolution (dense nets gained on an H100,
// depthwise ones lost: docs/layout.md).
// CHECK-LABEL: func.func @tf32_dense
// CHECK-SAME: memopt.layout = "nhwc"
// CHECK: memopt.conv {{.*}}channels_last
// HOST-LABEL: func.func @tf32_dense
// HOST-SAME: memopt.layout = "nchw"
// NHWC-LABEL: func.func @tf32_dense
func.func @tf32_dense(%x: tensor<1x2x5x5xf32>) -> tensor<1x4x5x5xf32> attributes {memopt.precision = "tf32"} {
  %w = memopt.constant dense<0.5> : tensor<4x2x3x3xf32>
  %c = memopt.conv %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x5x5xf32>
  return %c : tensor<1x4x5x5xf32>
}

// -----

// TF32 with a depthwise convolution: channels-last under auto, the 1x1
// and the depthwise convolution alike (the whole function, as dense nets).
// CHECK-LABEL: func.func @tf32_depthwise
// CHECK-SAME: memopt.layout = "nhwc"
// CHECK-COUNT-2: channels_last
// NHWC-LABEL: func.func @tf32_depthwise
// NHWC-COUNT-2: channels_last
func.func @tf32_depthwise(%x: tensor<1x4x5x5xf32>) -> tensor<1x4x5x5xf32> attributes {memopt.precision = "tf32"} {
  %w = memopt.constant dense<0.5> : tensor<4x4x1x1xf32>
  %d = memopt.constant dense<0.5> : tensor<4x1x3x3xf32>
  %c = memopt.conv %x, %w {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x5x5xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x5x5xf32>
  %e = memopt.conv %c, %d {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 4 : i64} : (tensor<1x4x5x5xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x5x5xf32>
  return %e : tensor<1x4x5x5xf32>
}

// -----

// Grouped convolutions that are not depthwise keep the function NCHW under
// auto: cuDNN's channels-last grouped kernels alone run them (slower on the
// whole model), memopt's depthwise kernel does not. A group of 2 channels
// (ResNeXt-like), a channel multiplier of 2 (group == C_in, C_out = 2 C_in)
// and a 3-D depthwise convolution; layout=nhwc converts them anyway.
// CHECK-LABEL: func.func @grouped_not_depthwise
// CHECK-SAME: memopt.layout = "nchw"
// CHECK-NOT: channels_last
// CHECK: return
// NHWC-LABEL: func.func @grouped_not_depthwise
// NHWC-COUNT-2: channels_last
func.func @grouped_not_depthwise(%x: tensor<1x4x5x5xf16>) -> tensor<1x8x5x5xf16> {
  %w = memopt.constant dense<0.5> : tensor<4x2x3x3xf16>
  %m = memopt.constant dense<0.5> : tensor<8x1x3x3xf16>
  %c = memopt.conv %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64} : (tensor<1x4x5x5xf16>, tensor<4x2x3x3xf16>) -> tensor<1x4x5x5xf16>
  %d = memopt.conv %c, %m {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 4 : i64} : (tensor<1x4x5x5xf16>, tensor<8x1x3x3xf16>) -> tensor<1x8x5x5xf16>
  return %d : tensor<1x8x5x5xf16>
}

// -----

// CHECK-LABEL: func.func @multiplier_two
// CHECK-SAME: memopt.layout = "nchw"
// CHECK-NOT: channels_last
// CHECK: return
func.func @multiplier_two(%x: tensor<1x4x5x5xbf16>) -> tensor<1x8x5x5xbf16> {
  %m = memopt.constant dense<0.5> : tensor<8x1x3x3xbf16>
  %d = memopt.conv %x, %m {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 4 : i64} : (tensor<1x4x5x5xbf16>, tensor<8x1x3x3xbf16>) -> tensor<1x8x5x5xbf16>
  return %d : tensor<1x8x5x5xbf16>
}

// -----

// CHECK-LABEL: func.func @depthwise_3d
// CHECK-SAME: memopt.layout = "nchw"
// CHECK-NOT: channels_last
// CHECK: return
func.func @depthwise_3d(%x: tensor<1x4x3x5x5xf16>) -> tensor<1x4x3x5x5xf16> {
  %m = memopt.constant dense<0.5> : tensor<4x1x3x3x3xf16>
  %d = memopt.conv %x, %m {kernel_shape = array<i64: 3, 3, 3>, strides = array<i64: 1, 1, 1>, pads = array<i64: 1, 1, 1, 1, 1, 1>, dilations = array<i64: 1, 1, 1>, group = 4 : i64} : (tensor<1x4x3x5x5xf16>, tensor<4x1x3x3x3xf16>) -> tensor<1x4x3x5x5xf16>
  return %d : tensor<1x4x3x5x5xf16>
}

// -----

// A depthwise residual convolution (bf16, stride 2, 5x5, as EfficientNet's)
// goes channels-last with its shortcut.
// CHECK-LABEL: func.func @depthwise_residual
// CHECK-SAME: memopt.layout = "nhwc"
// CHECK: memopt.conv_residual {{.*}}channels_last{{.*}}group = 6
// HOST-LABEL: func.func @depthwise_residual
// HOST-SAME: memopt.layout = "nchw"
func.func @depthwise_residual(%x: tensor<2x6x9x9xbf16>, %z: tensor<2x6x5x5xbf16>) -> tensor<2x6x5x5xbf16> {
  %w = memopt.constant dense<0.5> : tensor<6x1x5x5xbf16>
  %b = memopt.constant dense<0.1> : tensor<6xbf16>
  %s = memopt.conv_residual %x, %w, %b, %z {kernel_shape = array<i64: 5, 5>, strides = array<i64: 2, 2>, pads = array<i64: 2, 2, 2, 2>, dilations = array<i64: 1, 1>, activation = "relu", group = 6 : i64} : (tensor<2x6x9x9xbf16>, tensor<6x1x5x5xbf16>, tensor<6xbf16>, tensor<2x6x5x5xbf16>) -> tensor<2x6x5x5xbf16>
  return %s : tensor<2x6x5x5xbf16>
}

// -----

// A weight's transpose is recorded over its blob, not applied
// (#memopt.converted, written permuted into the weights file): the filter
// keeps its f32 resource, the permutation composes with the bf16 cast mixed
// precision recorded, and no permuted copy is printed.
// Under `auto` the bf16 convolution alone goes channels-last.
// CHECK-LABEL: func.func @resource_filters
// CHECK-DAG: memopt.constant #memopt.converted<dense_resource<filter> : tensor<2x2x1x2xf32>, permutation = [0, 2, 3, 1]> : tensor<2x1x2x2xbf16>
// CHECK-DAG: memopt.constant dense_resource<filter> : tensor<2x2x1x2xf32>
// HOST-LABEL: func.func @resource_filters
// HOST-NOT: permutation
// HOST: return
// NHWC-LABEL: func.func @resource_filters
// NHWC-DAG: memopt.constant #memopt.converted<dense_resource<filter> : tensor<2x2x1x2xf32>, permutation = [0, 2, 3, 1]> : tensor<2x1x2x2xf32>
// NHWC-DAG: memopt.constant #memopt.converted<dense_resource<filter> : tensor<2x2x1x2xf32>, permutation = [0, 2, 3, 1]> : tensor<2x1x2x2xbf16>
// NHWC-NOT: filter_nhwc
// NHWC: filter: "0x040000000000803F0000004000004040000080400000A0400000C0400000E04000000041"
func.func @resource_filters(%x: tensor<1x2x5x5xf32>, %y: tensor<1x2x5x5xbf16>) -> (tensor<1x2x5x4xf32>, tensor<1x2x5x4xbf16>) {
  %w = memopt.constant dense_resource<filter> : tensor<2x2x1x2xf32>
  %v = memopt.constant #memopt.converted<dense_resource<filter> : tensor<2x2x1x2xf32>> : tensor<2x2x1x2xbf16>
  %c = memopt.conv %x, %w {kernel_shape = array<i64: 1, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x5x5xf32>, tensor<2x2x1x2xf32>) -> tensor<1x2x5x4xf32>
  %d = memopt.conv %y, %v {kernel_shape = array<i64: 1, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x5x5xbf16>, tensor<2x2x1x2xbf16>) -> tensor<1x2x5x4xbf16>
  return %c, %d : tensor<1x2x5x4xf32>, tensor<1x2x5x4xbf16>
}

{-#
  dialect_resources: {
    builtin: {
      filter: "0x040000000000803F0000004000004040000080400000A0400000C0400000E04000000041"
    }
  }
#-}

// -----

// A split along the channels of a channels-last value (a channel concat's
// gradient: DenseNet's backward) splits it in place on axis 3; each piece
// feeds its convolution channels-last, and no transpose is left between.
// CHECK-LABEL: func.func @channel_split
// CHECK: %[[C:.*]] = memopt.conv {{.*}}channels_last
// CHECK-NEXT: %[[S:.*]]:2 = memopt.split %[[C]] {axis = 3 : i64, split = array<i64: 4, 4>} : (tensor<1x5x5x8xf16>) -> (tensor<1x5x5x4xf16>, tensor<1x5x5x4xf16>)
// CHECK-NOT: memopt.transpose %[[S]]
// CHECK: memopt.conv %[[S]]#0, {{.*}}channels_last
// CHECK: memopt.conv %[[S]]#1, {{.*}}channels_last
func.func @channel_split(%x: tensor<1x2x5x5xf16>) -> (tensor<1x4x5x5xf16>, tensor<1x4x5x5xf16>) {
  %w = memopt.constant dense<0.5> : tensor<8x2x1x1xf16>
  %v = memopt.constant dense<0.25> : tensor<4x4x1x1xf16>
  %c = memopt.conv %x, %w {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x5x5xf16>, tensor<8x2x1x1xf16>) -> tensor<1x8x5x5xf16>
  %a, %b = memopt.split %c {axis = 1 : i64, split = array<i64: 4, 4>} : (tensor<1x8x5x5xf16>) -> (tensor<1x4x5x5xf16>, tensor<1x4x5x5xf16>)
  %ya = memopt.conv %a, %v {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x5x5xf16>, tensor<4x4x1x1xf16>) -> tensor<1x4x5x5xf16>
  %yb = memopt.conv %b, %v {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x5x5xf16>, tensor<4x4x1x1xf16>) -> tensor<1x4x5x5xf16>
  return %ya, %yb : tensor<1x4x5x5xf16>, tensor<1x4x5x5xf16>
}
