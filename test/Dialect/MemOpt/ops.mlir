// RUN: memopt-opt %s | memopt-opt | FileCheck %s

// Every op parses, verifies (including result-type inference) and prints in
// a form that parses again.

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<2x3xf32>, %i: tensor<4xi64>, %b: tensor<4xi1>) {
  // CHECK: memopt.relu %{{.*}} : tensor<2x3xf32>
  %0 = memopt.relu %x : tensor<2x3xf32>
  // CHECK: memopt.exp
  %1 = memopt.exp %x : tensor<2x3xf32>
  // CHECK: memopt.log
  %2 = memopt.log %x : tensor<2x3xf32>
  // CHECK: memopt.sqrt
  %3 = memopt.sqrt %x : tensor<2x3xf32>
  // CHECK: memopt.reciprocal
  %4 = memopt.reciprocal %x : tensor<2x3xf32>
  // CHECK: memopt.neg %{{.*}} : tensor<4xi64>
  %5 = memopt.neg %i : tensor<4xi64>
  // CHECK: memopt.abs
  %6 = memopt.abs %x : tensor<2x3xf32>
  // CHECK: memopt.sigmoid
  %7 = memopt.sigmoid %x : tensor<2x3xf32>
  // CHECK: memopt.tanh
  %8 = memopt.tanh %x : tensor<2x3xf32>
  // CHECK: memopt.erf
  %9 = memopt.erf %x : tensor<2x3xf32>
  // CHECK: memopt.sin
  %10 = memopt.sin %x : tensor<2x3xf32>
  // CHECK: memopt.cos
  %11 = memopt.cos %x : tensor<2x3xf32>
  // CHECK: memopt.not %{{.*}} : tensor<4xi1>
  %12 = memopt.not %b : tensor<4xi1>
  // CHECK: memopt.leaky_relu %{{.*}} {alpha = 2.000000e-01 : f32} : tensor<2x3xf32>
  %13 = memopt.leaky_relu %x {alpha = 0.2 : f32} : tensor<2x3xf32>
  // CHECK: memopt.gelu %{{.*}} {approximate = "tanh"} : tensor<2x3xf32>
  %14 = memopt.gelu %x {approximate = "tanh"} : tensor<2x3xf32>
  // CHECK: memopt.hard_swish
  %15 = memopt.hard_swish %x : tensor<2x3xf32>
  // CHECK: memopt.hard_sigmoid %{{.*}} {alpha = 1.000000e-01 : f32} : tensor<2x3xf32>
  %16 = memopt.hard_sigmoid %x {alpha = 0.1 : f32} : tensor<2x3xf32>
  // CHECK: memopt.clip %{{.*}} {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : tensor<2x3xf32>
  %17 = memopt.clip %x {min = 0.0 : f64, max = 6.0 : f64} : tensor<2x3xf32>
  // CHECK: memopt.is_nan %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xi1>
  %18 = memopt.is_nan %x : (tensor<2x3xf32>) -> tensor<2x3xi1>
  // CHECK: memopt.cast %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf16>
  %19 = memopt.cast %x : (tensor<2x3xf32>) -> tensor<2x3xf16>
  return
}

// CHECK-LABEL: func.func @binary
func.func @binary(%x: tensor<2x3xf32>, %y: tensor<3xf32>, %b: tensor<2x3xi1>,
                  %c: tensor<3xi1>) {
  // CHECK: memopt.add %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %0 = memopt.add %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: memopt.sub
  %1 = memopt.sub %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: memopt.mul
  %2 = memopt.mul %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: memopt.div
  %3 = memopt.div %y, %x : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: memopt.pow
  %4 = memopt.pow %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: memopt.min
  %5 = memopt.min %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: memopt.max
  %6 = memopt.max %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: memopt.relu_grad %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %rg = memopt.relu_grad %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: memopt.equal %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %7 = memopt.equal %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: memopt.less
  %8 = memopt.less %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: memopt.greater
  %9 = memopt.greater %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: memopt.and
  %10 = memopt.and %b, %c : (tensor<2x3xi1>, tensor<3xi1>) -> tensor<2x3xi1>
  // CHECK: memopt.or
  %11 = memopt.or %b, %c : (tensor<2x3xi1>, tensor<3xi1>) -> tensor<2x3xi1>
  // CHECK: memopt.where %{{.*}}, %{{.*}}, %{{.*}} : (tensor<3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %12 = memopt.where %c, %x, %y : (tensor<3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// CHECK-LABEL: func.func @linear_and_conv
func.func @linear_and_conv(%a: tensor<4x8xf32>, %w: tensor<16x8xf32>,
                           %bias: tensor<16xf32>, %x: tensor<1x4x9x9xf32>,
                           %k: tensor<8x2x3x3xf32>, %kt: tensor<4x3x3x3xf32>) {
  // CHECK: memopt.matmul %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %t = memopt.transpose %w : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %0 = memopt.matmul %a, %t : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  // CHECK: memopt.gemm %{{.*}}, %{{.*}}, %{{.*}} {transB = 1 : i64} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %1 = memopt.gemm %a, %w, %bias {transB = 1 : i64} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  // CHECK: memopt.gemm %{{.*}}, %{{.*}} {transB = 1 : i64} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %2 = memopt.gemm %a, %w {transB = 1 : i64} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  // CHECK: memopt.conv %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, group = 2 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x4x9x9xf32>, tensor<8x2x3x3xf32>) -> tensor<1x8x5x5xf32>
  %3 = memopt.conv %x, %k {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64} : (tensor<1x4x9x9xf32>, tensor<8x2x3x3xf32>) -> tensor<1x8x5x5xf32>
  // CHECK: memopt.conv_transpose %{{.*}}, %{{.*}} {{{.*}}output_padding = array<i64: 1, 1>{{.*}}} : (tensor<1x4x9x9xf32>, tensor<4x3x3x3xf32>) -> tensor<1x3x18x18xf32>
  %4 = memopt.conv_transpose %x, %kt {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, output_padding = array<i64: 1, 1>} : (tensor<1x4x9x9xf32>, tensor<4x3x3x3xf32>) -> tensor<1x3x18x18xf32>
  return
}

// CHECK-LABEL: func.func @pool_and_norm
func.func @pool_and_norm(%x: tensor<2x4x8x8xf32>, %c: tensor<4xf32>,
                         %s: tensor<2x5x16xf32>, %g: tensor<16xf32>) {
  // CHECK: memopt.max_pool %{{.*}} {{{.*}}} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  %0 = memopt.max_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: memopt.average_pool %{{.*}} {{{.*}}count_include_pad = 1 : i64{{.*}}} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %1 = memopt.average_pool %x {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, count_include_pad = 1 : i64} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: memopt.global_average_pool %{{.*}} : (tensor<2x4x8x8xf32>) -> tensor<2x4x1x1xf32>
  %2 = memopt.global_average_pool %x : (tensor<2x4x8x8xf32>) -> tensor<2x4x1x1xf32>
  // CHECK: memopt.batch_normalization %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-03 : f32} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %3 = memopt.batch_normalization %x, %c, %c, %c, %c {epsilon = 1.0e-3 : f32} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: memopt.layer_normalization %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x5x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32>
  %4 = memopt.layer_normalization %s, %g, %g : (tensor<2x5x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32>
  // CHECK: memopt.layer_normalization %{{.*}}, %{{.*}} {axis = 2 : i64} : (tensor<2x5x16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32>
  %5 = memopt.layer_normalization %s, %g {axis = 2 : i64} : (tensor<2x5x16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32>
  // CHECK: memopt.softmax %{{.*}} {axis = 1 : i64} : (tensor<2x5x16xf32>) -> tensor<2x5x16xf32>
  %6 = memopt.softmax %s {axis = 1 : i64} : (tensor<2x5x16xf32>) -> tensor<2x5x16xf32>
  // CHECK: memopt.reduce_mean %{{.*}} {axes = array<i64: 2>} : (tensor<2x5x16xf32>) -> tensor<2x5x1xf32>
  %7 = memopt.reduce_mean %s {axes = array<i64: 2>} : (tensor<2x5x16xf32>) -> tensor<2x5x1xf32>
  // CHECK: memopt.reduce_sum %{{.*}} {axes = array<i64: 0, 2>, keepdims = 0 : i64} : (tensor<2x5x16xf32>) -> tensor<5xf32>
  %8 = memopt.reduce_sum %s {axes = array<i64: 0, 2>, keepdims = 0 : i64} : (tensor<2x5x16xf32>) -> tensor<5xf32>
  // CHECK: memopt.reduce_max %{{.*}} {axes = array<i64: 1>} : (tensor<2x5x16xf32>) -> tensor<2x1x16xf32>
  %9 = memopt.reduce_max %s {axes = array<i64: 1>} : (tensor<2x5x16xf32>) -> tensor<2x1x16xf32>
  // CHECK: memopt.cum_sum %{{.*}} {axis = 1 : i64} : (tensor<2x5x16xf32>) -> tensor<2x5x16xf32>
  %10 = memopt.cum_sum %s {axis = 1 : i64} : (tensor<2x5x16xf32>) -> tensor<2x5x16xf32>
  // CHECK: memopt.cum_sum %{{.*}} {axis = 2 : i64, exclusive = 1 : i64, reverse = 1 : i64} : (tensor<2x5x16xf32>) -> tensor<2x5x16xf32>
  %11 = memopt.cum_sum %s {axis = 2 : i64, exclusive = 1 : i64, reverse = 1 : i64} : (tensor<2x5x16xf32>) -> tensor<2x5x16xf32>
  return
}

// Position ids from a padding mask (the HF `cumsum(mask) * mask` pattern)
// are integer running sums.
// CHECK-LABEL: func.func @cum_sum_integers
func.func @cum_sum_integers(%m: tensor<2x7xi64>, %n: tensor<3xi32>) {
  // CHECK: memopt.cum_sum %{{.*}} {axis = 1 : i64} : (tensor<2x7xi64>) -> tensor<2x7xi64>
  %0 = memopt.cum_sum %m {axis = 1 : i64} : (tensor<2x7xi64>) -> tensor<2x7xi64>
  // CHECK: memopt.cum_sum %{{.*}} {axis = 0 : i64, exclusive = 1 : i64} : (tensor<3xi32>) -> tensor<3xi32>
  %1 = memopt.cum_sum %n {axis = 0 : i64, exclusive = 1 : i64} : (tensor<3xi32>) -> tensor<3xi32>
  return
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x4x8x16xf32>, %k: tensor<2x1x8x16xf32>,
                     %kt: tensor<2x4x16x8xf32>, %v: tensor<2x4x8x32xf32>,
                     %b: tensor<2x1x1x8xf32>) {
  // CHECK: memopt.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 2.500000e-01 : f32} : (tensor<2x4x8x16xf32>, tensor<2x1x8x16xf32>, tensor<2x4x8x32xf32>) -> tensor<2x4x8x32xf32>
  %0 = memopt.attention %q, %k, %v {scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x1x8x16xf32>, tensor<2x4x8x32xf32>) -> tensor<2x4x8x32xf32>
  // CHECK: memopt.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {causal = true, key_transposed = true, scale = 1.250000e-01 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>, tensor<2x4x8x32xf32>, tensor<2x1x1x8xf32>) -> tensor<2x4x8x32xf32>
  %1 = memopt.attention %q, %kt, %v, %b {scale = 0.125 : f32, causal = true, key_transposed = true} : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>, tensor<2x4x8x32xf32>, tensor<2x1x1x8xf32>) -> tensor<2x4x8x32xf32>
  return
}

// CHECK-LABEL: func.func @fused_elementwise
func.func @fused_elementwise(%x: tensor<2x8xf32>, %b: tensor<8xf32>) {
  // CHECK: memopt.fused_elementwise %{{.*}}, %{{.*}} {alphas = array<f32: 0.000000e+00, 0.000000e+00>, betas = array<f32: 0.000000e+00, 6.000000e+00>, ops = ["add", "clip"], registers = array<i64: 0, 1, 2, -1>} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %0 = memopt.fused_elementwise %x, %b {ops = ["add", "clip"], registers = array<i64: 0, 1, 2, -1>, alphas = array<f32: 0.0, 0.0>, betas = array<f32: 0.0, 6.0>} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<2x1x3xf32>, %i: tensor<2x2xi64>, %j: tensor<2x1x3xi64>) {
  // CHECK: memopt.shape %{{.*}} {end = 2 : i64, start = 1 : i64} : (tensor<2x1x3xf32>) -> tensor<1xi64>
  %0 = memopt.shape %x {start = 1 : i64, end = 2 : i64} : (tensor<2x1x3xf32>) -> tensor<1xi64>
  // CHECK: memopt.reshape %{{.*}} : (tensor<2x1x3xf32>) -> tensor<6xf32>
  %1 = memopt.reshape %x : (tensor<2x1x3xf32>) -> tensor<6xf32>
  // CHECK: memopt.flatten %{{.*}} {axis = 2 : i64} : (tensor<2x1x3xf32>) -> tensor<2x3xf32>
  %2 = memopt.flatten %x {axis = 2 : i64} : (tensor<2x1x3xf32>) -> tensor<2x3xf32>
  // CHECK: memopt.transpose %{{.*}} {perm = array<i64: 2, 0, 1>} : (tensor<2x1x3xf32>) -> tensor<3x2x1xf32>
  %3 = memopt.transpose %x {perm = array<i64: 2, 0, 1>} : (tensor<2x1x3xf32>) -> tensor<3x2x1xf32>
  // CHECK: memopt.squeeze %{{.*}} {axes = array<i64: 1>} : (tensor<2x1x3xf32>) -> tensor<2x3xf32>
  %4 = memopt.squeeze %x {axes = array<i64: 1>} : (tensor<2x1x3xf32>) -> tensor<2x3xf32>
  // CHECK: memopt.unsqueeze %{{.*}} {axes = array<i64: 0, -1>} : (tensor<2x3xf32>) -> tensor<1x2x3x1xf32>
  %5 = memopt.unsqueeze %4 {axes = array<i64: 0, -1>} : (tensor<2x3xf32>) -> tensor<1x2x3x1xf32>
  // CHECK: memopt.concat %{{.*}}, %{{.*}} {axis = -1 : i64} : (tensor<2x1x3xf32>, tensor<2x1x3xf32>) -> tensor<2x1x6xf32>
  %6 = memopt.concat %x, %x {axis = -1 : i64} : (tensor<2x1x3xf32>, tensor<2x1x3xf32>) -> tensor<2x1x6xf32>
  // CHECK: memopt.split %{{.*}} {axis = 2 : i64, split = array<i64: 1, 2>} : (tensor<2x1x3xf32>) -> (tensor<2x1x1xf32>, tensor<2x1x2xf32>)
  %7:2 = memopt.split %x {axis = 2 : i64, split = array<i64: 1, 2>} : (tensor<2x1x3xf32>) -> (tensor<2x1x1xf32>, tensor<2x1x2xf32>)
  // CHECK: memopt.slice %{{.*}} {axes = array<i64: 2>, ends = array<i64: -9223372036854775807>, starts = array<i64: -1>, steps = array<i64: -1>} : (tensor<2x1x3xf32>) -> tensor<2x1x3xf32>
  %8 = memopt.slice %x {starts = array<i64: -1>, ends = array<i64: -9223372036854775807>, axes = array<i64: 2>, steps = array<i64: -1>} : (tensor<2x1x3xf32>) -> tensor<2x1x3xf32>
  // CHECK: memopt.gather %{{.*}}, %{{.*}} {axis = 2 : i64} : (tensor<2x1x3xf32>, tensor<2x2xi64>) -> tensor<2x1x2x2xf32>
  %9 = memopt.gather %x, %i {axis = 2 : i64} : (tensor<2x1x3xf32>, tensor<2x2xi64>) -> tensor<2x1x2x2xf32>
  // CHECK: memopt.gather_elements %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x1x3xf32>, tensor<2x1x3xi64>) -> tensor<2x1x3xf32>
  %10 = memopt.gather_elements %x, %j {axis = 1 : i64} : (tensor<2x1x3xf32>, tensor<2x1x3xi64>) -> tensor<2x1x3xf32>
  // CHECK: memopt.expand %{{.*}} : (tensor<2x1x3xf32>) -> tensor<4x2x5x3xf32>
  %11 = memopt.expand %x : (tensor<2x1x3xf32>) -> tensor<4x2x5x3xf32>
  // CHECK: memopt.pad %{{.*}} {constant_value = 1.500000e+00 : f64, pads = array<i64: 0, 0, 1, 0, 0, 2>} : (tensor<2x1x3xf32>) -> tensor<2x1x6xf32>
  %12 = memopt.pad %x {pads = array<i64: 0, 0, 1, 0, 0, 2>, constant_value = 1.5 : f64} : (tensor<2x1x3xf32>) -> tensor<2x1x6xf32>
  // CHECK: memopt.pad %{{.*}} {mode = "reflect", pads = array<i64: 0, 0, 1, 0, 0, 1>} : (tensor<2x1x3xf32>) -> tensor<2x1x5xf32>
  %13 = memopt.pad %x {pads = array<i64: 0, 0, 1, 0, 0, 1>, mode = "reflect"} : (tensor<2x1x3xf32>) -> tensor<2x1x5xf32>
  // CHECK: memopt.identity %{{.*}} : tensor<2x1x3xf32>
  %14 = memopt.identity %x : tensor<2x1x3xf32>
  return
}

// `fmod` and `reduction` print only when they differ from ONNX's defaults.
// CHECK-LABEL: func.func @mod_scatter_nd
func.func @mod_scatter_nd(%a: tensor<2x3xi64>, %b: tensor<3xi64>,
                          %f: tensor<4xf32>, %d: tensor<4x5xf32>,
                          %i: tensor<2x1xi64>, %u: tensor<2x5xf32>) {
  // CHECK: memopt.mod %{{.*}}, %{{.*}} : (tensor<2x3xi64>, tensor<3xi64>) -> tensor<2x3xi64>
  %0 = memopt.mod %a, %b : (tensor<2x3xi64>, tensor<3xi64>) -> tensor<2x3xi64>
  // CHECK: memopt.mod %{{.*}}, %{{.*}} {fmod = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = memopt.mod %f, %f {fmod = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK: memopt.scatter_nd %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x5xf32>, tensor<2x1xi64>, tensor<2x5xf32>) -> tensor<4x5xf32>
  %2 = memopt.scatter_nd %d, %i, %u : (tensor<4x5xf32>, tensor<2x1xi64>, tensor<2x5xf32>) -> tensor<4x5xf32>
  // CHECK: memopt.scatter_nd %{{.*}}, %{{.*}}, %{{.*}} {reduction = "max"} : (tensor<4x5xf32>, tensor<2x1xi64>, tensor<2x5xf32>) -> tensor<4x5xf32>
  %3 = memopt.scatter_nd %d, %i, %u {reduction = "max"} : (tensor<4x5xf32>, tensor<2x1xi64>, tensor<2x5xf32>) -> tensor<4x5xf32>
  return
}

// CHECK-LABEL: func.func @explicit_result_types
func.func @explicit_result_types(%x: tensor<1x3x4x4xf32>, %s: tensor<3xi64>,
                                 %a: tensor<i64>) {
  // CHECK: memopt.resize %{{.*}} {coordinate_transformation_mode = "asymmetric", mode = "linear"} : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32>
  %0 = memopt.resize %x {mode = "linear", coordinate_transformation_mode = "asymmetric"} : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32>
  // CHECK: memopt.constant_of_shape %{{.*}} {value = dense<7> : tensor<1xi32>} : (tensor<3xi64>) -> tensor<2x3x4xi32>
  %1 = memopt.constant_of_shape %s {value = dense<7> : tensor<1xi32>} : (tensor<3xi64>) -> tensor<2x3x4xi32>
  // CHECK: memopt.range %{{.*}}, %{{.*}}, %{{.*}} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<5xi64>
  %2 = memopt.range %a, %a, %a : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<5xi64>
  // CHECK: memopt.constant dense<[1, 2]> : tensor<2xi64>
  %3 = memopt.constant dense<[1, 2]> : tensor<2xi64>
  // CHECK: memopt.constant dense_resource<blob> : tensor<2xf32>
  %4 = memopt.constant dense_resource<blob> : tensor<2xf32>
  // A weight converted when it is written (MemOptAttributes.td).
  // CHECK: memopt.constant #memopt.converted<dense_resource<blob> : tensor<2xf32>> : tensor<2xbf16>
  %5 = memopt.constant #memopt.converted<dense_resource<blob> : tensor<2xf32>> : tensor<2xbf16>
  // CHECK: memopt.constant #memopt.converted<dense_resource<filter> : tensor<4x3x2x2xf32>, permutation = [0, 2, 3, 1]> : tensor<4x2x2x3xf16>
  %6 = memopt.constant #memopt.converted<dense_resource<filter> : tensor<4x3x2x2xf32>, permutation = [0, 2, 3, 1]> : tensor<4x2x2x3xf16>
  // CHECK: memopt.constant #memopt.converted<dense_resource<index> : tensor<2x3xi64>, permutation = [1, 0]> : tensor<3x2xi64>
  %7 = memopt.constant #memopt.converted<dense_resource<index> : tensor<2x3xi64>, permutation = [1, 0]> : tensor<3x2xi64>
  return
}

// f16 and bf16 everywhere the runtime takes them (what memopt-mixed-precision
// produces): every float op family verifies with low-precision tensors, and
// batch / layer normalization accept parameters of another float type.
// CHECK-LABEL: func.func @low_precision
func.func @low_precision(%x: tensor<1x4x8x8xf16>, %k: tensor<4x4x3x3xf16>, %kb: tensor<4xf16>, %p32: tensor<4xf32>, %s: tensor<2x5x16xbf16>, %g: tensor<16xf32>, %i: tensor<2xi64>, %m: tensor<2x5x16xi1>) {
  // CHECK: memopt.conv {{.*}} -> tensor<1x4x8x8xf16>
  %0 = memopt.conv %x, %k, %kb {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x4x8x8xf16>, tensor<4x4x3x3xf16>, tensor<4xf16>) -> tensor<1x4x8x8xf16>
  // CHECK: memopt.conv_transpose {{.*}} -> tensor<1x4x10x10xf16>
  %1 = memopt.conv_transpose %0, %k {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x8x8xf16>, tensor<4x4x3x3xf16>) -> tensor<1x4x10x10xf16>
  // CHECK: memopt.batch_normalization {{.*}} : (tensor<1x4x8x8xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf16>
  %2 = memopt.batch_normalization %0, %p32, %p32, %p32, %p32 : (tensor<1x4x8x8xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf16>
  // CHECK: memopt.max_pool {{.*}} -> tensor<1x4x4x4xf16>
  %3 = memopt.max_pool %2 {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x8x8xf16>) -> tensor<1x4x4x4xf16>
  // CHECK: memopt.average_pool {{.*}} -> tensor<1x4x4x4xf16>
  %4 = memopt.average_pool %2 {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x8x8xf16>) -> tensor<1x4x4x4xf16>
  // CHECK: memopt.global_average_pool {{.*}} -> tensor<1x4x1x1xf16>
  %5 = memopt.global_average_pool %4 : (tensor<1x4x4x4xf16>) -> tensor<1x4x1x1xf16>
  // CHECK: memopt.resize {{.*}} -> tensor<1x4x8x8xf16>
  %6 = memopt.resize %3 {mode = "linear"} : (tensor<1x4x4x4xf16>) -> tensor<1x4x8x8xf16>
  // CHECK: memopt.pad {{.*}} -> tensor<1x4x4x6xf16>
  %7 = memopt.pad %3 {pads = array<i64: 0, 0, 0, 1, 0, 0, 0, 1>, constant_value = -6.0e+04 : f64} : (tensor<1x4x4x4xf16>) -> tensor<1x4x4x6xf16>
  // CHECK: memopt.clip {{.*}} : tensor<1x4x4x4xf16>
  %8 = memopt.clip %3 {min = 0.0 : f64, max = 6.0 : f64} : tensor<1x4x4x4xf16>
  // CHECK: memopt.hard_swish {{.*}} : tensor<1x4x4x4xf16>
  %9 = memopt.hard_swish %8 : tensor<1x4x4x4xf16>
  // CHECK: memopt.layer_normalization {{.*}} : (tensor<2x5x16xbf16>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x5x16xbf16>
  %10 = memopt.layer_normalization %s, %g, %g : (tensor<2x5x16xbf16>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x5x16xbf16>
  // CHECK: memopt.softmax {{.*}} -> tensor<2x5x16xbf16>
  %11 = memopt.softmax %10 : (tensor<2x5x16xbf16>) -> tensor<2x5x16xbf16>
  // CHECK: memopt.gelu {{.*}} : tensor<2x5x16xbf16>
  %12 = memopt.gelu %11 : tensor<2x5x16xbf16>
  // CHECK: memopt.matmul {{.*}} -> tensor<2x5x5xbf16>
  %t = memopt.transpose %12 {perm = array<i64: 0, 2, 1>} : (tensor<2x5x16xbf16>) -> tensor<2x16x5xbf16>
  %13 = memopt.matmul %12, %t : (tensor<2x5x16xbf16>, tensor<2x16x5xbf16>) -> tensor<2x5x5xbf16>
  // CHECK: memopt.matmul {{.*}} -> tensor<2x5x5xf32>
  %wide = memopt.matmul %12, %t : (tensor<2x5x16xbf16>, tensor<2x16x5xbf16>) -> tensor<2x5x5xf32>
  // CHECK: memopt.gemm {{.*}} -> tensor<10x10xf32>
  %w0 = memopt.reshape %12 : (tensor<2x5x16xbf16>) -> tensor<10x16xbf16>
  %w1 = memopt.reshape %12 : (tensor<2x5x16xbf16>) -> tensor<16x10xbf16>
  %wideGemm = memopt.gemm %w0, %w1 : (tensor<10x16xbf16>, tensor<16x10xbf16>) -> tensor<10x10xf32>
  // CHECK: memopt.reduce_mean {{.*}} -> tensor<2x5x1xbf16>
  %14 = memopt.reduce_mean %12 {axes = array<i64: 2>} : (tensor<2x5x16xbf16>) -> tensor<2x5x1xbf16>
  // CHECK: memopt.reduce_max {{.*}} -> tensor<2x5xbf16>
  %15 = memopt.reduce_max %12 {axes = array<i64: 2>, keepdims = 0 : i64} : (tensor<2x5x16xbf16>) -> tensor<2x5xbf16>
  // CHECK: memopt.cum_sum {{.*}} -> tensor<2x5x16xbf16>
  %cumulative = memopt.cum_sum %12 {axis = 2 : i64} : (tensor<2x5x16xbf16>) -> tensor<2x5x16xbf16>
  // CHECK: memopt.where {{.*}} -> tensor<2x5x16xbf16>
  %16 = memopt.where %m, %12, %11 : (tensor<2x5x16xi1>, tensor<2x5x16xbf16>, tensor<2x5x16xbf16>) -> tensor<2x5x16xbf16>
  // CHECK: memopt.gather {{.*}} -> tensor<2x2x16xbf16>
  %17 = memopt.gather %16, %i {axis = 1 : i64} : (tensor<2x5x16xbf16>, tensor<2xi64>) -> tensor<2x2x16xbf16>
  // CHECK: memopt.concat {{.*}} -> tensor<2x7x16xbf16>
  %18 = memopt.concat %16, %17 {axis = 1 : i64} : (tensor<2x5x16xbf16>, tensor<2x2x16xbf16>) -> tensor<2x7x16xbf16>
  // CHECK: memopt.cast {{.*}} -> tensor<2x7x16xf16>
  %19 = memopt.cast %18 : (tensor<2x7x16xbf16>) -> tensor<2x7x16xf16>
  // CHECK: memopt.constant_of_shape {{.*}} -> tensor<2x3xf16>
  %shape = memopt.constant dense<[2, 3]> : tensor<2xi64>
  %20 = memopt.constant_of_shape %shape {value = dense<1.5> : tensor<1xf16>} : (tensor<2xi64>) -> tensor<2x3xf16>
  return
}

// Training state and updates: dropout with its key, updates with gradient
// accumulation.
// CHECK-LABEL: func.func @training_ops
func.func @training_ops(%x: tensor<2x4xf32>, %g: tensor<2x4xf32>) {
  %key = memopt.variable "memopt.random_key" {role = "random_key"} : tensor<2xi64>
  %w = memopt.variable "w" {role = "parameter"} : tensor<2x4xf32>
  %m = memopt.variable "w.momentum_buffer" {role = "optimizer_state"} : tensor<2x4xf32>
  %v = memopt.variable "w.exp_avg_sq" {role = "optimizer_state"} : tensor<2x4xf32>
  %acc = memopt.variable "w.grad" {role = "gradient_accumulator"} : tensor<2x4xf32>
  %lr = memopt.variable "memopt.learning_rate" {role = "learning_rate"} : tensor<f32>
  %step = memopt.variable "memopt.step" {role = "step"} : tensor<f32>
  %micro = memopt.variable "memopt.micro_step" {role = "micro_step"} : tensor<f32>
  // CHECK: memopt.dropout %{{.*}}, key %{{.*}} {ratio = 1.000000e-01 : f32, stream = 3 : i64} : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %d = memopt.dropout %x, key %key {ratio = 0.1 : f32, stream = 3 : i64} : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  // CHECK: memopt.sgd_update {{.*}}, momentum {{.*}}, lr {{.*}} accumulate {{.*}}, micro_step {{.*}} {accumulation_steps = 4 : i64, momentum = 0.899999976 : f32}
  memopt.sgd_update %w, %d, momentum %m, lr %lr accumulate %acc, micro_step %micro {accumulation_steps = 4 : i64, momentum = 0.9 : f32} : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<f32>, tensor<2x4xf32>, tensor<f32>
  // CHECK: memopt.adamw_update {{.*}}, step {{.*}} accumulate {{.*}}, micro_step {{.*}} {accumulation_steps = 2 : i64}
  memopt.adamw_update %w, %g, %m, %v, lr %lr, step %step accumulate %acc, micro_step %micro {accumulation_steps = 2 : i64} : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<f32>, tensor<f32>, tensor<2x4xf32>, tensor<f32>
  return
}

// Mixed-precision training: low gradients of f32 parameters, SGD without
// momentum, dynamic loss scaling (the check, the updates that unscale and
// skip, the scale update), normalization with low activations and f32
// statistics and parameters. Every form parses back (the round trip above).
// CHECK-LABEL: func.func @mixed_precision_training_ops
// CHECK: %[[F:.*]] = memopt.found_inf %{{.*}}, %{{.*}} accumulators(%{{.*}}) micro_step %{{.*}} : (tensor<2x4xf16>, tensor<4xbf16>, tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
// CHECK: memopt.sgd_update %{{.*}}, %{{.*}}, lr %{{.*}} loss_scale %{{.*}}, found_inf %[[F]] : tensor<2x4xf32>, tensor<2x4xf16>, tensor<f32>, tensor<f32>, tensor<f32>
// CHECK: memopt.sgd_update %{{.*}}, %{{.*}}, lr %{{.*}} accumulate %{{.*}}, micro_step %{{.*}} loss_scale %{{.*}}, found_inf %[[F]] {accumulation_steps = 2 : i64}
// CHECK: memopt.adamw_update {{.*}} loss_scale %{{.*}}, found_inf %[[F]], loss_scale_state %{{.*}} :
// CHECK: memopt.update_loss_scale %{{.*}}, %{{.*}}, found_inf %[[F]], micro_step %{{.*}} {accumulation_steps = 2 : i64, growth_interval = 10 : i64}
// CHECK: memopt.batch_norm_training %{{.*}} : (tensor<2x3x4x4xf16>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf16>, tensor<3xf32>, tensor<3xf32>)
// CHECK: memopt.batch_norm_training_grad {{.*}} -> (tensor<2x3x4x4xbf16>, tensor<3xf32>, tensor<3xf32>)
// CHECK: memopt.layer_normalization_grad {{.*}} -> (tensor<2x4xf16>, tensor<4xf32>, tensor<4xf32>)
func.func @mixed_precision_training_ops(%g: tensor<2x4xf16>, %h: tensor<4xbf16>, %x: tensor<2x3x4x4xf16>, %xb: tensor<2x3x4x4xbf16>, %c: tensor<3xf32>) {
  %w = memopt.variable "w" {role = "parameter"} : tensor<2x4xf32>
  %b = memopt.variable "b" {role = "parameter"} : tensor<4xf32>
  %bm = memopt.variable "b.exp_avg" {role = "optimizer_state"} : tensor<4xf32>
  %bv = memopt.variable "b.exp_avg_sq" {role = "optimizer_state"} : tensor<4xf32>
  %acc = memopt.variable "w.grad" {role = "gradient_accumulator"} : tensor<2x4xf32>
  %lr = memopt.variable "memopt.learning_rate" {role = "learning_rate"} : tensor<f32>
  %step = memopt.variable "memopt.step" {role = "step"} : tensor<f32>
  %micro = memopt.variable "memopt.micro_step" {role = "micro_step"} : tensor<f32>
  %scale = memopt.variable "memopt.loss_scale" {role = "loss_scale"} : tensor<f32>
  %state = memopt.variable "memopt.loss_scale_state" {role = "loss_scale_state"} : tensor<2xf32>
  %found = memopt.found_inf %g, %h accumulators(%acc) micro_step %micro : (tensor<2x4xf16>, tensor<4xbf16>, tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
  memopt.sgd_update %w, %g, lr %lr loss_scale %scale, found_inf %found : tensor<2x4xf32>, tensor<2x4xf16>, tensor<f32>, tensor<f32>, tensor<f32>
  memopt.sgd_update %w, %g, lr %lr accumulate %acc, micro_step %micro loss_scale %scale, found_inf %found {accumulation_steps = 2 : i64} : tensor<2x4xf32>, tensor<2x4xf16>, tensor<f32>, tensor<2x4xf32>, tensor<f32>, tensor<f32>, tensor<f32>
  memopt.adamw_update %b, %h, %bm, %bv, lr %lr, step %step loss_scale %scale, found_inf %found, loss_scale_state %state : tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<2xf32>
  memopt.update_loss_scale %scale, %state, found_inf %found, micro_step %micro {accumulation_steps = 2 : i64, growth_interval = 10 : i64} : tensor<f32>, tensor<2xf32>, tensor<f32>, tensor<f32>
  %y, %mean, %inv = memopt.batch_norm_training %x, %c, %c : (tensor<2x3x4x4xf16>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf16>, tensor<3xf32>, tensor<3xf32>)
  %dx, %ds, %db = memopt.batch_norm_training_grad %xb, %xb, %c, %c, %c : (tensor<2x3x4x4xbf16>, tensor<2x3x4x4xbf16>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xbf16>, tensor<3xf32>, tensor<3xf32>)
  %lx, %ls, %lb = memopt.layer_normalization_grad %g, %g, %b : (tensor<2x4xf16>, tensor<2x4xf16>, tensor<4xf32>) -> (tensor<2x4xf16>, tensor<4xf32>, tensor<4xf32>)
  return
}

// The fused batch norm -> relu -> convolution ops (memopt-fuse-norm-conv).
// CHECK-LABEL: func.func @norm_relu_conv_ops
// CHECK: memopt.batch_norm_stats %{{.*}} {channels_last} : (tensor<2x4x4x8xf16>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK: memopt.norm_relu_conv {{.*}} -> tensor<2x2x2x16xf16>
// CHECK: memopt.norm_relu_conv_backward_filter {{.*}} -> tensor<16x3x3x8xf16>
// CHECK: memopt.norm_relu_apply %{{.*}} {channels_last} : (tensor<2x4x4x8xf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x4x8xf16>
// CHECK: memopt.batch_norm_relu_grad {{.*}} -> (tensor<2x4x4x8xf16>, tensor<8xf32>, tensor<8xf32>)
// CHECK: memopt.batch_norm_training %{{.*}}, %{{.*}}, %{{.*}} residual %{{.*}} {activation = "relu", channels_last} : (tensor<2x4x4x8xf16>, tensor<8xf32>, tensor<8xf32>, tensor<2x4x4x8xf16>)
// CHECK: memopt.batch_norm_add_relu_grad {{.*}} -> (tensor<2x4x4x8xf16>, tensor<8xf32>, tensor<8xf32>, tensor<2x4x4x8xf16>)
func.func @norm_relu_conv_ops(%x: tensor<2x4x4x8xf16>, %w: tensor<16x3x3x8xf16>, %dy: tensor<2x2x2x16xf16>, %c: tensor<8xf32>) -> (tensor<2x2x2x16xf16>, tensor<16x3x3x8xf16>, tensor<2x4x4x8xf16>) {
  %m, %i, %a, %b = memopt.batch_norm_stats %x, %c, %c {channels_last} : (tensor<2x4x4x8xf16>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %y = memopt.norm_relu_conv %x, %w, %a, %b {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, channels_last} : (tensor<2x4x4x8xf16>, tensor<16x3x3x8xf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x2x2x16xf16>
  %dw = memopt.norm_relu_conv_backward_filter %x, %dy, %a, %b {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, channels_last} : (tensor<2x4x4x8xf16>, tensor<2x2x2x16xf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<16x3x3x8xf16>
  %r = memopt.norm_relu_apply %x, %a, %b {channels_last} : (tensor<2x4x4x8xf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x4x8xf16>
  %dx, %ds, %db = memopt.batch_norm_relu_grad %r, %x, %c, %m, %i, %a, %b {channels_last} : (tensor<2x4x4x8xf16>, tensor<2x4x4x8xf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x4x8xf16>, tensor<8xf32>, tensor<8xf32>)
  %ya, %ma, %ia = memopt.batch_norm_training %x, %c, %c residual %r {activation = "relu", channels_last} : (tensor<2x4x4x8xf16>, tensor<8xf32>, tensor<8xf32>, tensor<2x4x4x8xf16>) -> (tensor<2x4x4x8xf16>, tensor<8xf32>, tensor<8xf32>)
  %dxa, %dsa, %dba, %dza = memopt.batch_norm_add_relu_grad %x, %r, %ya, %c, %ma, %ia {channels_last} : (tensor<2x4x4x8xf16>, tensor<2x4x4x8xf16>, tensor<2x4x4x8xf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x4x8xf16>, tensor<8xf32>, tensor<8xf32>, tensor<2x4x4x8xf16>)
  return %y, %dw, %dx : tensor<2x2x2x16xf16>, tensor<16x3x3x8xf16>, tensor<2x4x4x8xf16>
}

{-#
  dialect_resources: {
    builtin: {
      blob: "0x040000000000803F00000040"
    }
  }
#-}
