// RUN: memopt-opt %s --split-input-file --memopt-weight-casts | FileCheck %s
// RUN: memopt-opt %s --split-input-file --memopt-weight-casts=policy=keep | FileCheck %s --check-prefix=KEEP
// RUN: memopt-opt %s --split-input-file --memopt-weight-casts=policy=recast | FileCheck %s --check-prefix=RECAST
// RUN: memopt-opt %s --split-input-file --mlir-disable-threading --memopt-weight-casts=report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: not memopt-opt %s --split-input-file --memopt-weight-casts=policy=sometimes -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD

// A mixed-precision training step after autodiff (memopt-mixed-precision
// training=true, memopt-autodiff): the f16 copy of `w` is read by the
// forward matmul and by the backward gemm (the input gradient). Small
// activations, a large weight: the copy is most of what the step holds
// across the boundary, and a second cast costs a few percent of the step,
// so auto casts the master again right before the backward gemm.
// CHECK-LABEL: func.func @large_weight
// CHECK-SAME: memopt.weight_casts = {{{.*}}decision = "recast"{{.*}}held_bytes = 131072 : i64{{.*}}policy = "auto", recast = 1 : i64
// CHECK: %[[W:.*]] = memopt.variable "w"
// CHECK: %[[F:.*]] = memopt.cast %[[W]] : (tensor<256x256xf32>) -> tensor<256x256xf16>
// CHECK: memopt.matmul %{{.*}}, %[[F]]
// CHECK: memopt.softmax_cross_entropy_grad
// CHECK: %[[B:.*]] = memopt.cast %[[W]] : (tensor<256x256xf32>) -> tensor<256x256xf16>
// CHECK-NEXT: memopt.gemm %{{.*}}, %[[B]] {transB = 1 : i64}
// CHECK: memopt.gemm %{{.*}}, %{{.*}} {transA = 1 : i64}
// KEEP-LABEL: func.func @large_weight
// KEEP-SAME: decision = "keep"
// KEEP-COUNT-1: memopt.cast %{{.*}} : (tensor<256x256xf32>) -> tensor<256x256xf16>
// KEEP-NOT: memopt.cast %{{.*}} : (tensor<256x256xf32>)
// REPORT: memopt-weight-casts @large_weight: 1 parameter copies read by the backward, 131072 bytes ({{.*}}% of the {{[0-9]+}} bytes held across the step); casting them again costs {{.*}} us ({{.*}}% of the estimated step): recast
func.func @large_weight(%x: tensor<2x256xf16>, %labels: tensor<2xi64>) -> tensor<f32> {
  %w = memopt.variable "w" {role = "parameter"} : tensor<256x256xf32>
  %seed = memopt.constant dense<1.0> : tensor<f32>
  %wl = memopt.cast %w : (tensor<256x256xf32>) -> tensor<256x256xf16>
  %h = memopt.matmul %x, %wl : (tensor<2x256xf16>, tensor<256x256xf16>) -> tensor<2x256xf16>
  %r = memopt.relu %h : tensor<2x256xf16>
  %y = memopt.matmul %r, %wl : (tensor<2x256xf16>, tensor<256x256xf16>) -> tensor<2x256xf16>
  %loss = memopt.softmax_cross_entropy %y, %labels : (tensor<2x256xf16>, tensor<2xi64>) -> tensor<f32>
  %dy = memopt.softmax_cross_entropy_grad %y, %labels, %seed : (tensor<2x256xf16>, tensor<2xi64>, tensor<f32>) -> tensor<2x256xf16>
  %dr = memopt.gemm %dy, %wl {transB = 1 : i64} : (tensor<2x256xf16>, tensor<256x256xf16>) -> tensor<2x256xf16>
  %dw = memopt.gemm %r, %dy {transA = 1 : i64} : (tensor<2x256xf16>, tensor<2x256xf16>) -> tensor<256x256xf16>
  %lr = memopt.variable "memopt.learning_rate" {role = "learning_rate"} : tensor<f32>
  memopt.sgd_update %w, %dw, lr %lr : tensor<256x256xf32>, tensor<256x256xf16>, tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Large activations, a small weight (a convolution over a big image): the
// copy is a sliver of what the step holds across the boundary, while a
// second cast would cost a larger share of the step: auto keeps it.
// CHECK-LABEL: func.func @large_activations
// CHECK-SAME: decision = "keep"
// CHECK-COUNT-1: memopt.cast %{{.*}} : (tensor<8x8x3x3xf32>) -> tensor<8x8x3x3xf16>
// CHECK-NOT: memopt.cast %{{.*}} : (tensor<8x8x3x3xf32>)
// RECAST-LABEL: func.func @large_activations
// RECAST-SAME: decision = "recast"
// RECAST-COUNT-2: memopt.cast %{{.*}} : (tensor<8x8x3x3xf32>) -> tensor<8x8x3x3xf16>
// REPORT: memopt-weight-casts @large_activations: 1 parameter copies read by the backward, 1152 bytes ({{.*}}): keep
func.func @large_activations(%x: tensor<16x8x64x64xf16>, %labels: tensor<16xi64>) -> tensor<f32> {
  %w = memopt.variable "w" {role = "parameter"} : tensor<8x8x3x3xf32>
  %seed = memopt.constant dense<1.0> : tensor<f32>
  %wl = memopt.cast %w : (tensor<8x8x3x3xf32>) -> tensor<8x8x3x3xf16>
  %c = memopt.conv %x, %wl {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<16x8x64x64xf16>, tensor<8x8x3x3xf16>) -> tensor<16x8x64x64xf16>
  %r = memopt.relu %c : tensor<16x8x64x64xf16>
  %c2 = memopt.conv %r, %wl {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<16x8x64x64xf16>, tensor<8x8x3x3xf16>) -> tensor<16x8x64x64xf16>
  %g = memopt.global_average_pool %c2 : (tensor<16x8x64x64xf16>) -> tensor<16x8x1x1xf16>
  %f = memopt.reshape %g : (tensor<16x8x1x1xf16>) -> tensor<16x8xf16>
  %loss = memopt.softmax_cross_entropy %f, %labels : (tensor<16x8xf16>, tensor<16xi64>) -> tensor<f32>
  %df = memopt.softmax_cross_entropy_grad %f, %labels, %seed : (tensor<16x8xf16>, tensor<16xi64>, tensor<f32>) -> tensor<16x8xf16>
  %dg = memopt.reshape %df : (tensor<16x8xf16>) -> tensor<16x8x1x1xf16>
  %dc2 = memopt.expand %dg : (tensor<16x8x1x1xf16>) -> tensor<16x8x64x64xf16>
  %dr = memopt.conv_transpose %dc2, %wl {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, output_padding = array<i64: 0, 0>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<16x8x64x64xf16>, tensor<8x8x3x3xf16>) -> tensor<16x8x64x64xf16>
  %dw = memopt.conv_backward_filter %r, %dc2 {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<16x8x64x64xf16>, tensor<16x8x64x64xf16>) -> tensor<8x8x3x3xf16>
  %dw2 = memopt.conv_backward_filter %x, %dr {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<16x8x64x64xf16>, tensor<16x8x64x64xf16>) -> tensor<8x8x3x3xf16>
  %sum = memopt.add %dw, %dw2 : (tensor<8x8x3x3xf16>, tensor<8x8x3x3xf16>) -> tensor<8x8x3x3xf16>
  %lr = memopt.variable "memopt.learning_rate" {role = "learning_rate"} : tensor<f32>
  memopt.sgd_update %w, %sum, lr %lr : tensor<8x8x3x3xf32>, tensor<8x8x3x3xf16>, tensor<f32>
  return %loss : tensor<f32>
}

// BAD: error: memopt-weight-casts: policy 'sometimes' is not auto, keep or recast
