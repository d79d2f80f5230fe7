// One instance of every op of the memopt dialect that reaches lowering,
// each named loc("op_<name>") and each result returned, so the whole
// pipeline keeps it (operands are function arguments: nothing folds).
// python/tests/test_op_coverage.py compiles this for the host and the CUDA
// backend and runs the host program; an op added to the dialect must be
// added here (or to that test's list of ops that are always rewritten before
// lowering).
func.func @main(%x: tensor<2x3xf32>, %y: tensor<3xf32>, %b: tensor<2x3xi1>,
                %c: tensor<3xi1>, %ia: tensor<2x3xi64>, %ib: tensor<3xi64>,
                %a: tensor<4x8xf32>, %w: tensor<16x8xf32>, %bias: tensor<16xf32>,
                %img: tensor<1x4x9x9xf32>, %k: tensor<8x2x3x3xf32>,
                %kt: tensor<4x3x3x3xf32>, %ch: tensor<4xf32>,
                %s: tensor<2x5x16xf32>, %g: tensor<16xf32>,
                %q: tensor<2x4x8x16xf32>, %kk: tensor<2x4x8x16xf32>,
                %v: tensor<2x4x8x16xf32>, %gi: tensor<2x2xi64>,
                %ge: tensor<2x1x3xi64>, %d: tensor<4x5xf32>,
                %si: tensor<2x1xi64>, %u: tensor<2x5xf32>, %sh: tensor<2xi64>,
                %r0: tensor<i64>, %r1: tensor<i64>, %r2: tensor<i64>,
                %x3: tensor<2x1x3xf32>, %small: tensor<1x3x4x4xf32>,
                %m: tensor<8x16xf32>, %nhwc: tensor<1x5x5x4xf32>,
                %kl: tensor<8x3x3x2xf32>)
    -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>,
        tensor<2x3xf32>, tensor<3xi64>, tensor<2x3xf32>, tensor<2x3xf32>,
        tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>,
        tensor<3xi1>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>,
        tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xi1>, tensor<2x3xf16>,
        tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>,
        tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xi1>,
        tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>,
        tensor<2x3xf32>, tensor<2x3xi64>, tensor<3xf32>, tensor<4x16xf32>,
        tensor<4x16xf32>, tensor<1x8x5x5xf32>, tensor<1x3x18x18xf32>,
        tensor<1x4x4x4xf32>, tensor<1x4x9x9xf32>, tensor<1x4x1x1xf32>,
        tensor<1x4x9x9xf32>, tensor<2x5x16xf32>, tensor<2x5x16xf32>,
        tensor<2x5x1xf32>, tensor<5xf32>, tensor<2x1x16xf32>,
        tensor<2x4x8x16xf32>, tensor<6xf32>, tensor<2x3xf32>,
        tensor<3x2x1xf32>, tensor<2x3xf32>, tensor<1x2x1x3xf32>,
        tensor<2x1x6xf32>, tensor<2x1x1xf32>, tensor<2x1x2xf32>,
        tensor<2x1x2xf32>, tensor<2x1x2x2xf32>, tensor<2x1x3xf32>,
        tensor<4x2x5x3xf32>, tensor<2x1x6xf32>, tensor<4x5xf32>,
        tensor<1x3x8x8xf32>, tensor<300x300xf32>, tensor<5xi64>,
        tensor<1x8x5x5xf32>, tensor<1x3x3x8xf32>, tensor<1x2x2x4xf32>,
        tensor<1x2x2x4xf32>, tensor<1x1x1x4xf32>, tensor<1x5x5x4xf32>,
        tensor<2x5x16xf32>, tensor<2x3xi64>) {
  %cw = memopt.constant dense<[0.5, 1.5, 2.5]> : tensor<3xf32> loc("op_constant")
  %0 = memopt.relu %x : tensor<2x3xf32> loc("op_relu")
  %1 = memopt.exp %x : tensor<2x3xf32> loc("op_exp")
  %2 = memopt.log %x : tensor<2x3xf32> loc("op_log")
  %3 = memopt.sqrt %x : tensor<2x3xf32> loc("op_sqrt")
  %4 = memopt.reciprocal %x : tensor<2x3xf32> loc("op_reciprocal")
  %5 = memopt.neg %ib : tensor<3xi64> loc("op_neg")
  %6 = memopt.abs %x : tensor<2x3xf32> loc("op_abs")
  %7 = memopt.sigmoid %x : tensor<2x3xf32> loc("op_sigmoid")
  %8 = memopt.tanh %x : tensor<2x3xf32> loc("op_tanh")
  %9 = memopt.erf %x : tensor<2x3xf32> loc("op_erf")
  %10 = memopt.sin %x : tensor<2x3xf32> loc("op_sin")
  %11 = memopt.cos %x : tensor<2x3xf32> loc("op_cos")
  %12 = memopt.not %c : tensor<3xi1> loc("op_not")
  %13 = memopt.leaky_relu %x {alpha = 0.2 : f32} : tensor<2x3xf32> loc("op_leaky_relu")
  %14 = memopt.gelu %x {approximate = "tanh"} : tensor<2x3xf32> loc("op_gelu")
  %15 = memopt.hard_swish %x : tensor<2x3xf32> loc("op_hard_swish")
  %16 = memopt.hard_sigmoid %x {alpha = 0.1 : f32} : tensor<2x3xf32> loc("op_hard_sigmoid")
  %17 = memopt.clip %x {min = 0.0 : f64, max = 6.0 : f64} : tensor<2x3xf32> loc("op_clip")
  %18 = memopt.is_nan %x : (tensor<2x3xf32>) -> tensor<2x3xi1> loc("op_is_nan")
  %19 = memopt.cast %x : (tensor<2x3xf32>) -> tensor<2x3xf16> loc("op_cast")
  %20 = memopt.add %x, %cw : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> loc("op_add")
  %21 = memopt.sub %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> loc("op_sub")
  %22 = memopt.mul %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> loc("op_mul")
  %23 = memopt.div %y, %x : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32> loc("op_div")
  %24 = memopt.pow %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> loc("op_pow")
  %25 = memopt.min %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> loc("op_min")
  %26 = memopt.max %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> loc("op_max")
  %27 = memopt.equal %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1> loc("op_equal")
  %28 = memopt.less %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1> loc("op_less")
  %29 = memopt.greater %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1> loc("op_greater")
  %30 = memopt.and %b, %c : (tensor<2x3xi1>, tensor<3xi1>) -> tensor<2x3xi1> loc("op_and")
  %31 = memopt.or %b, %c : (tensor<2x3xi1>, tensor<3xi1>) -> tensor<2x3xi1> loc("op_or")
  %32 = memopt.where %c, %x, %y : (tensor<3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> loc("op_where")
  %33 = memopt.mod %ia, %ib : (tensor<2x3xi64>, tensor<3xi64>) -> tensor<2x3xi64> loc("op_mod")
  %34 = memopt.fused_elementwise %y, %y {ops = ["add", "clip"], registers = array<i64: 0, 1, 2, -1>, alphas = array<f32: 0.0, 0.0>, betas = array<f32: 0.0, 6.0>} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32> loc("op_fused_elementwise")
  %35 = memopt.matmul %a, %m : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32> loc("op_matmul")
  %36 = memopt.gemm %a, %w, %bias {transB = 1 : i64} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32> loc("op_gemm")
  %37 = memopt.conv %img, %k {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64} : (tensor<1x4x9x9xf32>, tensor<8x2x3x3xf32>) -> tensor<1x8x5x5xf32> loc("op_conv")
  %38 = memopt.conv_transpose %img, %kt {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, output_padding = array<i64: 1, 1>} : (tensor<1x4x9x9xf32>, tensor<4x3x3x3xf32>) -> tensor<1x3x18x18xf32> loc("op_conv_transpose")
  %39 = memopt.max_pool %img {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x9x9xf32>) -> tensor<1x4x4x4xf32> loc("op_max_pool")
  %40 = memopt.average_pool %img {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, count_include_pad = 1 : i64} : (tensor<1x4x9x9xf32>) -> tensor<1x4x9x9xf32> loc("op_average_pool")
  %41 = memopt.global_average_pool %img : (tensor<1x4x9x9xf32>) -> tensor<1x4x1x1xf32> loc("op_global_average_pool")
  %42 = memopt.batch_normalization %img, %ch, %ch, %ch, %ch {epsilon = 1.0e-3 : f32} : (tensor<1x4x9x9xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x9x9xf32> loc("op_batch_normalization")
  %43 = memopt.layer_normalization %s, %g, %g : (tensor<2x5x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32> loc("op_layer_normalization")
  %44 = memopt.softmax %s {axis = 1 : i64} : (tensor<2x5x16xf32>) -> tensor<2x5x16xf32> loc("op_softmax")
  %45 = memopt.reduce_mean %s {axes = array<i64: 2>} : (tensor<2x5x16xf32>) -> tensor<2x5x1xf32> loc("op_reduce_mean")
  %46 = memopt.reduce_sum %s {axes = array<i64: 0, 2>, keepdims = 0 : i64} : (tensor<2x5x16xf32>) -> tensor<5xf32> loc("op_reduce_sum")
  %47 = memopt.reduce_max %s {axes = array<i64: 1>} : (tensor<2x5x16xf32>) -> tensor<2x1x16xf32> loc("op_reduce_max")
  %48 = memopt.attention %q, %kk, %v {scale = 0.25 : f32, causal = true, safe_softmax = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> loc("op_attention")
  %50 = memopt.reshape %x3 : (tensor<2x1x3xf32>) -> tensor<6xf32> loc("op_reshape")
  %51 = memopt.flatten %x3 {axis = 2 : i64} : (tensor<2x1x3xf32>) -> tensor<2x3xf32> loc("op_flatten")
  %52 = memopt.transpose %x3 {perm = array<i64: 2, 0, 1>} : (tensor<2x1x3xf32>) -> tensor<3x2x1xf32> loc("op_transpose")
  %53 = memopt.squeeze %x3 {axes = array<i64: 1>} : (tensor<2x1x3xf32>) -> tensor<2x3xf32> loc("op_squeeze")
  %54 = memopt.unsqueeze %x {axes = array<i64: 0, 2>} : (tensor<2x3xf32>) -> tensor<1x2x1x3xf32> loc("op_unsqueeze")
  %55 = memopt.concat %x3, %x3 {axis = -1 : i64} : (tensor<2x1x3xf32>, tensor<2x1x3xf32>) -> tensor<2x1x6xf32> loc("op_concat")
  %56:2 = memopt.split %x3 {axis = 2 : i64, split = array<i64: 1, 2>} : (tensor<2x1x3xf32>) -> (tensor<2x1x1xf32>, tensor<2x1x2xf32>) loc("op_split")
  %57 = memopt.slice %x3 {starts = array<i64: -1>, ends = array<i64: 0>, axes = array<i64: 2>, steps = array<i64: -1>} : (tensor<2x1x3xf32>) -> tensor<2x1x2xf32> loc("op_slice")
  %58 = memopt.gather %x3, %gi {axis = 2 : i64} : (tensor<2x1x3xf32>, tensor<2x2xi64>) -> tensor<2x1x2x2xf32> loc("op_gather")
  %59 = memopt.gather_elements %x3, %ge {axis = 1 : i64} : (tensor<2x1x3xf32>, tensor<2x1x3xi64>) -> tensor<2x1x3xf32> loc("op_gather_elements")
  %60 = memopt.expand %x3 : (tensor<2x1x3xf32>) -> tensor<4x2x5x3xf32> loc("op_expand")
  %61 = memopt.pad %x3 {pads = array<i64: 0, 0, 1, 0, 0, 2>, constant_value = 1.5 : f64} : (tensor<2x1x3xf32>) -> tensor<2x1x6xf32> loc("op_pad")
  %62 = memopt.scatter_nd %d, %si, %u : (tensor<4x5xf32>, tensor<2x1xi64>, tensor<2x5xf32>) -> tensor<4x5xf32> loc("op_scatter_nd")
  %63 = memopt.resize %small {mode = "linear", coordinate_transformation_mode = "asymmetric"} : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32> loc("op_resize")
  %64 = memopt.constant_of_shape %sh {value = dense<7.0> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<300x300xf32> loc("op_constant_of_shape")
  %65 = memopt.range %r0, %r1, %r2 : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<5xi64> loc("op_range")
  %cb = memopt.constant dense<0.5> : tensor<8xf32>
  %66 = memopt.conv_residual %img, %k, %cb, %37 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64, activation = "relu"} : (tensor<1x4x9x9xf32>, tensor<8x2x3x3xf32>, tensor<8xf32>, tensor<1x8x5x5xf32>) -> tensor<1x8x5x5xf32> loc("op_conv_residual")
  // The channels-last forms (memopt-layout) of the ops that have one.
  %67 = memopt.conv %nhwc, %kl {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64, channels_last} : (tensor<1x5x5x4xf32>, tensor<8x3x3x2xf32>) -> tensor<1x3x3x8xf32> loc("nhwc_conv")
  %68 = memopt.max_pool %nhwc {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, channels_last} : (tensor<1x5x5x4xf32>) -> tensor<1x2x2x4xf32> loc("nhwc_max_pool")
  %69 = memopt.average_pool %nhwc {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, channels_last} : (tensor<1x5x5x4xf32>) -> tensor<1x2x2x4xf32> loc("nhwc_average_pool")
  %70 = memopt.global_average_pool %nhwc {channels_last} : (tensor<1x5x5x4xf32>) -> tensor<1x1x1x4xf32> loc("nhwc_global_average_pool")
  %71 = memopt.batch_normalization %nhwc, %ch, %ch, %ch, %ch {epsilon = 1.0e-3 : f32, channels_last} : (tensor<1x5x5x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x5x5x4xf32> loc("nhwc_batch_normalization")
  // Running sums: a float one over a middle axis (exclusive, reversed) and
  // an integer one over the last axis (position ids).
  %72 = memopt.cum_sum %s {axis = 1 : i64, exclusive = 1 : i64, reverse = 1 : i64} : (tensor<2x5x16xf32>) -> tensor<2x5x16xf32> loc("op_cum_sum")
  %73 = memopt.cum_sum %ia {axis = 1 : i64} : (tensor<2x3xi64>) -> tensor<2x3xi64> loc("int_cum_sum")
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,
         %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29,
         %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43,
         %44, %45, %46, %47, %48, %50, %51, %52, %53, %54, %55, %56#0,
         %56#1, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68,
         %69, %70, %71, %72, %73
      : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>,
        tensor<2x3xf32>, tensor<3xi64>, tensor<2x3xf32>, tensor<2x3xf32>,
        tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>,
        tensor<3xi1>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>,
        tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xi1>, tensor<2x3xf16>,
        tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>,
        tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xi1>,
        tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>,
        tensor<2x3xf32>, tensor<2x3xi64>, tensor<3xf32>, tensor<4x16xf32>,
        tensor<4x16xf32>, tensor<1x8x5x5xf32>, tensor<1x3x18x18xf32>,
        tensor<1x4x4x4xf32>, tensor<1x4x9x9xf32>, tensor<1x4x1x1xf32>,
        tensor<1x4x9x9xf32>, tensor<2x5x16xf32>, tensor<2x5x16xf32>,
        tensor<2x5x1xf32>, tensor<5xf32>, tensor<2x1x16xf32>,
        tensor<2x4x8x16xf32>, tensor<6xf32>, tensor<2x3xf32>,
        tensor<3x2x1xf32>, tensor<2x3xf32>, tensor<1x2x1x3xf32>,
        tensor<2x1x6xf32>, tensor<2x1x1xf32>, tensor<2x1x2xf32>,
        tensor<2x1x2xf32>, tensor<2x1x2x2xf32>, tensor<2x1x3xf32>,
        tensor<4x2x5x3xf32>, tensor<2x1x6xf32>, tensor<4x5xf32>,
        tensor<1x3x8x8xf32>, tensor<300x300xf32>, tensor<5xi64>,
        tensor<1x8x5x5xf32>, tensor<1x3x3x8xf32>, tensor<1x2x2x4xf32>,
        tensor<1x2x2x4xf32>, tensor<1x1x1x4xf32>, tensor<1x5x5x4xf32>,
        tensor<2x5x16xf32>, tensor<2x3xi64>
}
