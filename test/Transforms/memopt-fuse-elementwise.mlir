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

// -----

// RMSNorm's tail under mixed precision: w * (x * r) in f32, cast to bf16 for
// the next GEMM. The cast ends the group (no step of its own): one op reads
// x, r and w in f32 and writes bf16; x * r, read by the backward, stays.
// CHECK-LABEL: func.func @cast_ends_chain
// CHECK: %[[T:.*]] = memopt.mul %arg0, %arg1
// CHECK-NEXT: %[[F:.*]] = memopt.fused_elementwise %arg2, %[[T]] {{{.*}}ops = ["mul"], registers = array<i64: 0, 1>} : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xbf16>
// CHECK-NOT: memopt.cast
// CHECK: return %[[F]], %[[T]]
// REPORT: memopt-fuse-elementwise @cast_ends_chain: 2 ops in 1 fused_elementwise ops
func.func @cast_ends_chain(%x: tensor<2x4x8xf32>, %r: tensor<2x4x1xf32>, %w: tensor<8xf32>) -> (tensor<2x4x8xbf16>, tensor<2x4x8xf32>) {
  %t = memopt.mul %x, %r : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %n = memopt.mul %w, %t : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %c = memopt.cast %n : (tensor<2x4x8xf32>) -> tensor<2x4x8xbf16>
  return %c, %t : tensor<2x4x8xbf16>, tensor<2x4x8xf32>
}

// -----

// A longer f32 chain (a gradient) ending in a cast back to bf16: all of it
// is one op with a bf16 result.
// CHECK-LABEL: func.func @cast_ends_longer_chain
// CHECK-NEXT: %[[F:.*]] = memopt.fused_elementwise %arg0, %arg1, %arg2 {{{.*}}ops = ["mul", "sub", "mul"], registers = array<i64: 0, 1, 1, 3, 2, 4>} : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xbf16>
// CHECK-NEXT: return %[[F]]
func.func @cast_ends_longer_chain(%a: tensor<2x8xf32>, %b: tensor<2x8xf32>, %c: tensor<2x8xf32>) -> tensor<2x8xbf16> {
  %m = memopt.mul %a, %b : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %s = memopt.sub %b, %m : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %g = memopt.mul %c, %s : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = memopt.cast %g : (tensor<2x8xf32>) -> tensor<2x8xbf16>
  return %y : tensor<2x8xbf16>
}

// -----

// Not fused: the cast's operand has another user; a cast from an argument
// has no chain to end; a cast after a bf16 step would lose the step's
// rounding to bf16 (the registers are f32), so only f32 chains end in one.
// CHECK-LABEL: func.func @cast_not_fused
// CHECK: memopt.mul
// CHECK-NEXT: memopt.cast
// CHECK-NEXT: memopt.cast
// CHECK-NEXT: memopt.add
// CHECK-NEXT: memopt.cast
// CHECK-NOT: memopt.fused_elementwise
func.func @cast_not_fused(%a: tensor<2x8xf32>, %b: tensor<2x8xbf16>) -> (tensor<2x8xbf16>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %m = memopt.mul %a, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %c = memopt.cast %m : (tensor<2x8xf32>) -> tensor<2x8xbf16>
  %w = memopt.cast %b : (tensor<2x8xbf16>) -> tensor<2x8xf32>
  %s = memopt.add %b, %b : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<2x8xbf16>
  %v = memopt.cast %s : (tensor<2x8xbf16>) -> tensor<2x8xf32>
  return %c, %m, %w, %v : tensor<2x8xbf16>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// RMSNorm's backward: a [2, 4, 1] row term expanded to [2, 4, 8] before the
// elementwise tail. The group reads the row term itself (it broadcasts), and
// the expand, left without users, goes.
// CHECK-LABEL: func.func @expand_read_through
// CHECK-NEXT: %[[F:.*]] = memopt.fused_elementwise %arg0, %arg1, %arg2 {{{.*}}ops = ["mul", "add"], registers = array<i64: 0, 1, 3, 2>} : (tensor<2x4x8xf32>, tensor<2x4x1xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NOT: memopt.expand
// CHECK-NEXT: return %[[F]]
// REPORT: memopt-fuse-elementwise @expand_read_through: 2 ops in 1 fused_elementwise ops
func.func @expand_read_through(%x: tensor<2x4x8xf32>, %r: tensor<2x4x1xf32>, %g: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %e = memopt.expand %r : (tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %m = memopt.mul %x, %e : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %a = memopt.add %m, %g : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %a : tensor<2x4x8xf32>
}

// -----

// One step with an expanded operand is fused on its own (the expand goes);
// an expand whose source does not span the result with the other inputs
// stays: the op would have no input of the result's shape.
// CHECK-LABEL: func.func @expand_single_step
// CHECK-NEXT: %[[F:.*]] = memopt.fused_elementwise %arg0, %arg1 {{{.*}}ops = ["mul"], registers = array<i64: 0, 1>} : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[E:.*]] = memopt.expand %arg2
// CHECK-NEXT: memopt.neg %[[E]]
func.func @expand_single_step(%x: tensor<2x4x8xf32>, %r: tensor<2x4x1xf32>, %s: tensor<1xf32>) -> (tensor<2x4x8xf32>, tensor<4xf32>) {
  %e = memopt.expand %r : (tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %m = memopt.mul %x, %e : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %f = memopt.expand %s : (tensor<1xf32>) -> tensor<4xf32>
  %n = memopt.neg %f : tensor<4xf32>
  return %m, %n : tensor<2x4x8xf32>, tensor<4xf32>
}
