// RUN: memopt-opt %s -split-input-file --memopt-fuse-elementwise | FileCheck %s
// RUN: memopt-opt %s -split-input-file --mlir-disable-threading --memopt-fuse-elementwise=report=true -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: memopt-opt %s -split-input-file --memopt-fuse-elementwise | memopt-opt -split-input-file --verify-each | FileCheck %s --check-prefix=ROUNDTRIP

// ResNet's residual tail: add then relu becomes one op; the conv output and
// the shortcut are its inputs (registers 0 and 1), add writes register 2,
// relu reads it and writes 3.
// CHECK-LABEL: func.func @residual_relu
// CHECK-NEXT: %[[F:.*]] = memopt.fused_elementwise %arg0, %arg1 {alphas = array<f32: 0.000000e+00, 0.000000e+00>, betas = array<f32: 0.000000e+00, 0.000000e+00>, ops = ["add", "relu"], registers = array<i64: 0, 1, 2, -1>} : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
// CHECK-NEXT: return %[[F]]
// REPORT: memopt-fuse-elementwise @residual_relu: 2 ops in 1 fused_elementwise ops
// ROUNDTRIP: memopt.fused_elementwise
func.func @residual_relu(%x: tensor<2x8x4x4xf32>, %s: tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32> {
  %a = memopt.add %x, %s : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %r = memopt.relu %a : tensor<2x8x4x4xf32>
  return %r : tensor<2x8x4x4xf32>
}

// -----

// A tree with a broadcast input and a parameterised step: x * clip(x * s + b,
// 0, 6); x is read once (register 0) though two steps use it; the [8, 1, 1]
// scale and the scalar shift stay inputs (they broadcast).
// CHECK-LABEL: func.func @tree_with_broadcast
// CHECK: %[[F:.*]] = memopt.fused_elementwise %arg0, %arg1, %{{.*}} {{{.*}}betas = array<f32: 0.000000e+00, 0.000000e+00, 6.000000e+00, 0.000000e+00>, ops = ["mul", "add", "clip", "mul"], registers = array<i64: 0, 1, 3, 2, 4, -1, 0, 5>}
// CHECK-NOT: memopt.mul
// REPORT: memopt-fuse-elementwise @tree_with_broadcast: 4 ops in 1 fused_elementwise ops
func.func @tree_with_broadcast(%x: tensor<2x8x4x4xf32>, %s: tensor<8x1x1xf32>) -> tensor<2x8x4x4xf32> {
  %c = memopt.constant dense<3.0> : tensor<f32>
  %m = memopt.mul %x, %s : (tensor<2x8x4x4xf32>, tensor<8x1x1xf32>) -> tensor<2x8x4x4xf32>
  %a = memopt.add %m, %c : (tensor<2x8x4x4xf32>, tensor<f32>) -> tensor<2x8x4x4xf32>
  %k = memopt.clip %a {min = 0.0 : f64, max = 6.0 : f64} : tensor<2x8x4x4xf32>
  %y = memopt.mul %x, %k : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  return %y : tensor<2x8x4x4xf32>
}

// -----

// An intermediate with a second user is needed anyway: the sigmoid is not
// fused into the mul, and a lone op is left alone.
// CHECK-LABEL: func.func @shared_intermediate
// CHECK: %[[S:.*]] = memopt.sigmoid %arg0
// CHECK: memopt.mul %arg0, %[[S]]
// CHECK-NOT: fused_elementwise
// REPORT: memopt-fuse-elementwise @shared_intermediate: 0 ops in 0 fused_elementwise ops
func.func @shared_intermediate(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %s = memopt.sigmoid %x : tensor<16xf32>
  %y = memopt.mul %x, %s : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %y, %s : tensor<16xf32>, tensor<16xf32>
}

// -----

// A DAG: the shifted value feeds both the hard sigmoid and the product (a
// hard swish), so it joins once both readers are in the group and register
// 2 is read twice.
// CHECK-LABEL: func.func @dag_hard_swish
// CHECK-NEXT: %[[F:.*]] = memopt.fused_elementwise %arg0, %arg1 {{{.*}}ops = ["add", "hard_sigmoid", "mul", "relu"], registers = array<i64: 0, 1, 2, -1, 2, 3, 4, -1>}
// CHECK-NEXT: return %[[F]]
// REPORT: memopt-fuse-elementwise @dag_hard_swish: 4 ops in 1 fused_elementwise ops
func.func @dag_hard_swish(%x: tensor<2x8xf32>, %s: tensor<8xf32>) -> tensor<2x8xf32> {
  %a = memopt.add %x, %s : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %h = memopt.hard_sigmoid %a {alpha = 0.2 : f32, beta = 0.5 : f32} : tensor<2x8xf32>
  %m = memopt.mul %a, %h : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %r = memopt.relu %m : tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}

// -----

// An intermediate smaller than the result (broadcast further) is an input,
// not a step: MobileNetV3's squeeze-excitation gate is computed once per
// channel, then the product is fused with what follows.
// CHECK-LABEL: func.func @small_intermediate
// CHECK: %[[G:.*]] = memopt.hard_sigmoid %arg1
// CHECK: memopt.fused_elementwise %arg0, %[[G]] {{{.*}}ops = ["mul", "relu"], registers = array<i64: 0, 1, 2, -1>}
func.func @small_intermediate(%x: tensor<2x8x4x4xf32>, %p: tensor<2x8x1x1xf32>) -> tensor<2x8x4x4xf32> {
  %g = memopt.hard_sigmoid %p {alpha = 0.2 : f32, beta = 0.5 : f32} : tensor<2x8x1x1xf32>
  %m = memopt.mul %x, %g : (tensor<2x8x4x4xf32>, tensor<2x8x1x1xf32>) -> tensor<2x8x4x4xf32>
  %r = memopt.relu %m : tensor<2x8x4x4xf32>
  return %r : tensor<2x8x4x4xf32>
}

// -----

// Integer ops and casts are not fused; neither are comparisons.
// CHECK-LABEL: func.func @not_float
// CHECK-NOT: fused_elementwise
func.func @not_float(%x: tensor<4xi64>, %y: tensor<4xi64>) -> tensor<4xi64> {
  %a = memopt.add %x, %y : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %b = memopt.mul %a, %y : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return %b : tensor<4xi64>
}

// -----

// At most 8 inputs: a sum of ten tensors fuses its first additions up to
// that limit and leaves the rest as ops.
// CHECK-LABEL: func.func @input_limit
// CHECK: memopt.fused_elementwise {{.*}} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @input_limit(%a0: tensor<4xf32>, %a1: tensor<4xf32>, %a2: tensor<4xf32>, %a3: tensor<4xf32>, %a4: tensor<4xf32>, %a5: tensor<4xf32>, %a6: tensor<4xf32>, %a7: tensor<4xf32>, %a8: tensor<4xf32>, %a9: tensor<4xf32>) -> tensor<4xf32> {
  %s1 = memopt.add %a0, %a1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s2 = memopt.add %s1, %a2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s3 = memopt.add %s2, %a3 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s4 = memopt.add %s3, %a4 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s5 = memopt.add %s4, %a5 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s6 = memopt.add %s5, %a6 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s7 = memopt.add %s6, %a7 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s8 = memopt.add %s7, %a8 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s9 = memopt.add %s8, %a9 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %s9 : tensor<4xf32>
}

// -----

// A ReLU gradient joins the sum of two incoming gradients (a residual
// block's backward): one kernel reads both gradients and the relu output.
// CHECK-LABEL: func.func @relu_grad_of_sum
// CHECK-NEXT: %[[F:.*]] = memopt.fused_elementwise %arg0, %arg1, %arg2 {{{.*}}ops = ["add", "relu_grad"], registers = array<i64: 0, 1, 3, 2>}
// CHECK-NEXT: return %[[F]]
// REPORT: memopt-fuse-elementwise @relu_grad_of_sum: 2 ops in 1 fused_elementwise ops
func.func @relu_grad_of_sum(%g1: tensor<2x8x4x4xf16>, %g2: tensor<2x8x4x4xf16>, %y: tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16> {
  %s = memopt.add %g1, %g2 : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  %d = memopt.relu_grad %s, %y : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  return %d : tensor<2x8x4x4xf16>
}
