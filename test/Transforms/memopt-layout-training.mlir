// RUN: memopt-opt %s --memopt-autodiff="optimizer=sgd momentum=0.9" --canonicalize --memopt-layout=layout=nhwc | FileCheck %s
// RUN: memopt-opt %s --memopt-autodiff="optimizer=sgd momentum=0.9" --canonicalize --memopt-layout | FileCheck %s --check-prefix=AUTO
// RUN: memopt-opt %s --memopt-autodiff="optimizer=adamw" --canonicalize --memopt-layout=layout=nhwc | grep -c "memopt.transpose" | FileCheck %s --check-prefix=COUNT
// RUN: sed 's/-> tensor<f32> {$/-> tensor<f32> attributes {memopt.precision = "tf32"} {/' %s | memopt-opt --memopt-autodiff="optimizer=sgd momentum=0.9" --canonicalize --memopt-layout | FileCheck %s --check-prefix=AUTO
// RUN: sed -e '/softmax_cross_entropy/d' -e 's/return %%loss : tensor<f32>/return %%logits : tensor<2x4xf32>/' -e 's/, %%labels: tensor<2xi64>) -> tensor<f32> {/) -> tensor<2x4xf32> {/' %s | memopt-opt --memopt-mixed-precision="training=true precision=bf16" --canonicalize --memopt-append-loss=kind=cross-entropy --memopt-autodiff="optimizer=sgd momentum=0.9" --canonicalize --memopt-layout | FileCheck %s --check-prefix=BF16

// The layout pass on a training program (after autodiff): a ResNet stem and
// residual block, conv -> batch norm (training) -> relu -> max pool -> conv ->
// batch norm -> + pooled -> relu -> global average pool -> linear. With
// layout=nhwc every convolution and both gradients of the second one
// (conv_transpose for the data, conv_backward_filter for the filter) run
// channels-last; batch normalization forward and backward, max pooling and
// its gradient, the global average pool follow, and so do the relu
// gradients, the residual gradient sum and the pool gradient's broadcast.
// The only activation transpose left is the network input's (shared by the
// first convolution and its filter gradient); each filter, a variable in
// the ONNX layout, is transposed once to KRSC (shared by the second
// convolution and its data gradient) and each filter gradient once back
// before its update.
// CHECK-LABEL: func.func @resnet_block
// CHECK-SAME: memopt.layout = "nhwc"
// CHECK: %[[X:.*]] = memopt.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x3x8x8xf32>) -> tensor<2x8x8x3xf32>
// CHECK: %[[W1:.*]] = memopt.variable "conv1.weight"
// CHECK-NEXT: %[[W1T:.*]] = memopt.transpose %[[W1]] {perm = array<i64: 0, 2, 3, 1>}
// CHECK: %[[W2:.*]] = memopt.variable "conv2.weight"
// CHECK-NEXT: %[[W2T:.*]] = memopt.transpose %[[W2]] {perm = array<i64: 0, 2, 3, 1>} : (tensor<8x8x3x3xf32>) -> tensor<8x3x3x8xf32>
// CHECK: %[[C1:.*]] = memopt.conv %[[X]], %[[W1T]] {channels_last
// CHECK-NEXT: %[[Y1:.*]], %[[M1:.*]], %[[I1:.*]] = memopt.batch_norm_training %[[C1]], {{.*}} {channels_last}
// CHECK-NEXT: %[[R1:.*]] = memopt.relu %[[Y1]] : tensor<2x8x8x8xf32>
// CHECK-NEXT: %[[P:.*]] = memopt.max_pool %[[R1]] {channels_last{{.*}} -> tensor<2x4x4x8xf32>
// CHECK-NEXT: %[[C2:.*]] = memopt.conv %[[P]], %[[W2T]] {channels_last
// CHECK-NEXT: %[[Y2:.*]], %[[M2:.*]], %[[I2:.*]] = memopt.batch_norm_training %[[C2]], {{.*}} {channels_last}
// CHECK-NEXT: %[[S:.*]] = memopt.add %[[Y2]], %[[P]] : (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>)
// CHECK-NEXT: %[[R2:.*]] = memopt.relu %[[S]]
// CHECK-NEXT: %[[G:.*]] = memopt.global_average_pool %[[R2]] {channels_last} : (tensor<2x4x4x8xf32>) -> tensor<2x1x1x8xf32>
// CHECK-NEXT: memopt.reshape %[[G]] : (tensor<2x1x1x8xf32>) -> tensor<2x8xf32>
// The global average pool's gradient: a reshape (only 1s move) and a
// channels-last broadcast.
// CHECK: %[[DG:.*]] = memopt.reshape %{{.*}} : (tensor<2x8x1x1xf32>) -> tensor<2x1x1x8xf32>
// CHECK-NEXT: %[[DE:.*]] = memopt.expand %[[DG]] : (tensor<2x1x1x8xf32>) -> tensor<2x4x4x8xf32>
// CHECK-NEXT: %[[DR2:.*]] = memopt.relu_grad %[[DE]], %[[R2]] : (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>)
// CHECK-NEXT: %[[DX2:.*]], %{{.*}}, %{{.*}} = memopt.batch_norm_training_grad %[[C2]], %[[DR2]], %{{.*}}, %[[M2]], %[[I2]] {channels_last}
// CHECK: %[[DP:.*]] = memopt.conv_transpose %[[DX2]], %[[W2T]] {channels_last{{.*}} -> tensor<2x4x4x8xf32>
// CHECK-NEXT: %[[DW2:.*]] = memopt.conv_backward_filter %[[P]], %[[DX2]] {channels_last{{.*}} -> tensor<8x3x3x8xf32>
// CHECK-NEXT: %[[DW2T:.*]] = memopt.transpose %[[DW2]] {perm = array<i64: 0, 3, 1, 2>} : (tensor<8x3x3x8xf32>) -> tensor<8x8x3x3xf32>
// CHECK-NEXT: %[[DSUM:.*]] = memopt.add %[[DR2]], %[[DP]] : (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>)
// CHECK-NEXT: memopt.sgd_update %[[W2]], %[[DW2T]]
// CHECK-NEXT: %[[DR1:.*]] = memopt.pool_grad %[[R1]], %[[DSUM]] {channels_last{{.*}} -> tensor<2x8x8x8xf32>
// CHECK-NEXT: %[[DN1:.*]] = memopt.relu_grad %[[DR1]], %[[R1]]
// CHECK-NEXT: %[[DX1:.*]], %{{.*}}, %{{.*}} = memopt.batch_norm_training_grad %[[C1]], %[[DN1]], %{{.*}}, %[[M1]], %[[I1]] {channels_last}
// CHECK: %[[DW1:.*]] = memopt.conv_backward_filter %[[X]], %[[DX1]] {channels_last
// CHECK-NEXT: %[[DW1T:.*]] = memopt.transpose %[[DW1]] {perm = array<i64: 0, 3, 1, 2>}
// CHECK-NEXT: memopt.sgd_update %[[W1]], %[[DW1T]]
// Nothing else is transposed: five transposes in the whole step (AdamW too).
// CHECK-NOT: memopt.transpose
// COUNT: {{^}}5{{$}}
// Under auto on CUDA a training step stays NCHW in f32 and in TF32 (where an
// inference program would go channels-last): not measured channels-last on
// a GPU. In bf16 (and f16) it goes channels-last, measured faster on an H200
// (docs/layout.md, "Training"): the convolutions and both of their gradients.
// BF16-LABEL: func.func @resnet_block
// BF16-SAME: memopt.layout = "nhwc"
// BF16-DAG: memopt.conv {{.*}}channels_last
// BF16-DAG: memopt.conv_transpose {{.*}}channels_last
// BF16-DAG: memopt.conv_backward_filter {{.*}}channels_last
// AUTO-LABEL: func.func @resnet_block
// AUTO-SAME: memopt.layout = "nchw"
// AUTO-NOT: channels_last
// AUTO-NOT: memopt.transpose
func.func @resnet_block(%x: tensor<2x3x8x8xf32>, %labels: tensor<2xi64>) -> tensor<f32> {
  %w1 = memopt.variable "conv1.weight" {initial_value = dense<0.1> : tensor<8x3x3x3xf32>, role = "parameter"} : tensor<8x3x3x3xf32>
  %s1 = memopt.variable "bn1.weight" {initial_value = dense<1.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %b1 = memopt.variable "bn1.bias" {initial_value = dense<0.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %w2 = memopt.variable "conv2.weight" {initial_value = dense<0.1> : tensor<8x8x3x3xf32>, role = "parameter"} : tensor<8x8x3x3xf32>
  %s2 = memopt.variable "bn2.weight" {initial_value = dense<1.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %b2 = memopt.variable "bn2.bias" {initial_value = dense<0.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %fc = memopt.variable "fc.weight" {initial_value = dense<0.1> : tensor<4x8xf32>, role = "parameter"} : tensor<4x8xf32>
  %c1 = memopt.conv %x, %w1 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x8x8xf32>
  %n1, %m1, %i1 = memopt.batch_norm_training %c1, %s1, %b1 : (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %r1 = memopt.relu %n1 : tensor<2x8x8x8xf32>
  %p = memopt.max_pool %r1 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x8x8x8xf32>) -> tensor<2x8x4x4xf32>
  %c2 = memopt.conv %p, %w2 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x8x4x4xf32>, tensor<8x8x3x3xf32>) -> tensor<2x8x4x4xf32>
  %n2, %m2, %i2 = memopt.batch_norm_training %c2, %s2, %b2 : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  %sum = memopt.add %n2, %p : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %r2 = memopt.relu %sum : tensor<2x8x4x4xf32>
  %g = memopt.global_average_pool %r2 : (tensor<2x8x4x4xf32>) -> tensor<2x8x1x1xf32>
  %flat = memopt.reshape %g : (tensor<2x8x1x1xf32>) -> tensor<2x8xf32>
  %logits = memopt.gemm %flat, %fc {transB = 1 : i64} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  %loss = memopt.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
