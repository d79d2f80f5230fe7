// RUN: memopt-opt %s -split-input-file -verify-diagnostics

// One case per verifier or inference error. Inference errors come with the
// generic "failed to infer returned types" that follows them.

func.func @reshape_count(%x: tensor<2x3xf32>) -> tensor<7xf32> {
  // expected-error @+1 {{(6 elements) to 'tensor<7xf32>' (7 elements)}}
  %0 = memopt.reshape %x : (tensor<2x3xf32>) -> tensor<7xf32>
  return %0 : tensor<7xf32>
}

// -----

func.func @reshape_element_type(%x: tensor<2x3xf32>) -> tensor<6xf16> {
  // expected-error @+1 {{changes the element type from 'f32' to 'f16'}}
  %0 = memopt.reshape %x : (tensor<2x3xf32>) -> tensor<6xf16>
  return %0 : tensor<6xf16>
}

// -----

func.func @add_broadcast(%x: tensor<2x3xf32>, %y: tensor<4xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.add %x, %y : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @add_element_types(%x: tensor<3xf32>, %y: tensor<3xf16>) -> tensor<3xf32> {
  // expected-error @+1 {{operand element types differ}}
  %0 = memopt.add %x, %y : (tensor<3xf32>, tensor<3xf16>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @and_needs_bool(%x: tensor<3xi32>) -> tensor<3xi1> {
  // expected-error @+1 {{operands must be i1 tensors}}
  %0 = memopt.and %x, %x : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
  return %0 : tensor<3xi1>
}

// -----

func.func @equal_result_is_bool(%x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 1-bit signless integer values}}
  %0 = memopt.equal %x, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @where_types(%c: tensor<3xi1>, %x: tensor<3xf32>, %y: tensor<3xf16>) -> tensor<3xf32> {
  // expected-error @+2 {{X and Y element types differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.where %c, %x, %y : (tensor<3xi1>, tensor<3xf32>, tensor<3xf16>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @where_broadcast(%c: tensor<2xi1>, %x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+2 {{do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.where %c, %x, %x : (tensor<2xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @gelu_approximate(%x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{approximate must be 'none' or 'tanh', got 'fast'}}
  %0 = memopt.gelu %x {approximate = "fast"} : tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @clip_bounds(%x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{min 6.000000e+00 is greater than max 0.000000e+00}}
  %0 = memopt.clip %x {min = 6.0 : f64, max = 0.0 : f64} : tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @cast_shape(%x: tensor<3xf32>) -> tensor<4xi32> {
  // expected-error @+1 {{requires the same shape for all operands and results}}
  %0 = memopt.cast %x : (tensor<3xf32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @dynamic_shape(%x: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{operand #0 must be statically shaped tensor}}
  %0 = memopt.relu %x : tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

func.func @matmul_contraction(%x: tensor<2x3xf32>, %y: tensor<4x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+2 {{contraction sizes differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.matmul %x, %y : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @matmul_batch(%x: tensor<2x2x3xf32>, %y: tensor<3x3x5xf32>) -> tensor<2x2x5xf32> {
  // expected-error @+2 {{batch dimensions of 'tensor<2x2x3xf32>' and 'tensor<3x3x5xf32>' do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.matmul %x, %y : (tensor<2x2x3xf32>, tensor<3x3x5xf32>) -> tensor<2x2x5xf32>
  return %0 : tensor<2x2x5xf32>
}

// -----

func.func @gemm_rank(%x: tensor<2x3x4xf32>, %y: tensor<4x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+2 {{must be 2-D}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.gemm %x, %y : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @gemm_contraction(%x: tensor<2x3xf32>, %y: tensor<4x5xf32>) -> tensor<2x4xf32> {
  // expected-error @+2 {{op(A) has K = 3, op(B) has K = 5}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.gemm %x, %y {transB = 1 : i64} : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @gemm_bias(%x: tensor<2x3xf32>, %y: tensor<3x5xf32>, %c: tensor<3xf32>) -> tensor<2x5xf32> {
  // expected-error @+2 {{C 'tensor<3xf32>' does not broadcast to [2, 5]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.gemm %x, %y, %c : (tensor<2x3xf32>, tensor<3x5xf32>, tensor<3xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @gemm_bias_type(%x: tensor<2x3xf16>, %y: tensor<3x5xf16>, %c: tensor<5xf16>) -> tensor<2x5xf32> {
  // expected-error @+1 {{C 'tensor<5xf16>' must have the result's element type ('f32')}}
  %0 = memopt.gemm %x, %y, %c : (tensor<2x3xf16>, tensor<3x5xf16>, tensor<5xf16>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

// A matmul may widen f16 / bf16 operands to an f32 result, never narrow.
func.func @matmul_narrowed(%x: tensor<2x3xf32>, %y: tensor<3x5xf32>) -> tensor<2x5xf16> {
  // expected-error @+2 {{inferred type(s) 'tensor<2x5xf32>' are incompatible with return type(s) of operation 'tensor<2x5xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.matmul %x, %y : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf16>
  return %0 : tensor<2x5xf16>
}

// -----

func.func @conv_rank(%x: tensor<1x3x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{must have the same rank, at least 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.conv %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{X has 3 channels but W 'tensor<4x2x3x3xf32>' with group 1 expects 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.conv %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_group(%x: tensor<1x4x8x8xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x6x6xf32> {
  // expected-error @+2 {{group 2 does not divide the 3 filters of W}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.conv %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 2 : i64} : (tensor<1x4x8x8xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x6x6xf32>
  return %0 : tensor<1x3x6x6xf32>
}

// -----

func.func @conv_kernel_shape(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x7x7xf32> {
  // expected-error @+2 {{kernel_shape [2, 2] does not match W 'tensor<4x3x3x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.conv %x, %w {kernel_shape = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x7x7xf32>
  return %0 : tensor<1x4x7x7xf32>
}

// -----

func.func @conv_pads_length(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{pads has 2 entries, expected 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.conv %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_stride_zero(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{must be positive on spatial axis 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.conv %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 0>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_negative_pads(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{pads must not be negative on spatial axis 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.conv %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: -1, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_kernel_too_large(%x: tensor<1x3x2x2xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x1x1xf32> {
  // expected-error @+2 {{the dilated kernel is larger than the padded input on spatial axis 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.conv %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x2x2xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x1x1xf32>
  return %0 : tensor<1x4x1x1xf32>
}

// -----

func.func @conv_bias(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{B 'tensor<3xf32>' must be 1-D with 4 elements}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.conv %x, %w, %b {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_missing_attribute(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{requires attribute 'dilations'}}
  %0 = memopt.conv %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_transpose_channels(%x: tensor<1x4x5x5xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x2x7x7xf32> {
  // expected-error @+2 {{X has 4 channels but W 'tensor<3x2x3x3xf32>' expects 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.conv_transpose %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x5x5xf32>, tensor<3x2x3x3xf32>) -> tensor<1x2x7x7xf32>
  return %0 : tensor<1x2x7x7xf32>
}

// -----

func.func @conv_transpose_output_padding(%x: tensor<1x4x5x5xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x2x13x13xf32> {
  // expected-error @+2 {{output_padding 2 on spatial axis 0 must be smaller than the stride or the dilation}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.conv_transpose %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 2, 2>} : (tensor<1x4x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x2x13x13xf32>
  return %0 : tensor<1x2x13x13xf32>
}

// -----

func.func @conv_transpose_group(%x: tensor<1x3x5x5xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x4x7x7xf32> {
  // expected-error @+2 {{group 2 does not divide the 3 input channels}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.conv_transpose %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 2 : i64} : (tensor<1x3x5x5xf32>, tensor<3x2x3x3xf32>) -> tensor<1x4x7x7xf32>
  return %0 : tensor<1x4x7x7xf32>
}

// -----

func.func @pool_rank(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+2 {{X 'tensor<4x8xf32>' must have rank 3 or more}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.max_pool %x {kernel_shape = array<i64: 2>, strides = array<i64: 2>, pads = array<i64: 0, 0>, dilations = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @pool_pads(%x: tensor<1x1x8x8xf32>) -> tensor<1x1x5x5xf32> {
  // expected-error @+2 {{pads on spatial axis 0 must be smaller than the kernel}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.average_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 2, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x5x5xf32>
  return %0 : tensor<1x1x5x5xf32>
}

// -----

func.func @pool_kernel_length(%x: tensor<1x1x8x8xf32>) -> tensor<1x1x4x4xf32> {
  // expected-error @+2 {{kernel_shape has 1 entries, expected 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.max_pool %x {kernel_shape = array<i64: 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x4x4xf32>
  return %0 : tensor<1x1x4x4xf32>
}

// -----

func.func @global_pool_rank(%x: tensor<4x8xf32>) -> tensor<4x1xf32> {
  // expected-error @+2 {{must have rank 3 or more}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.global_average_pool %x : (tensor<4x8xf32>) -> tensor<4x1xf32>
  return %0 : tensor<4x1xf32>
}

// -----

func.func @batch_norm_channels(%x: tensor<2x4x3x3xf32>, %c: tensor<4xf32>, %v: tensor<3xf32>) -> tensor<2x4x3x3xf32> {
  // expected-error @+2 {{input_var 'tensor<3xf32>' must be 1-D with one entry per channel (4)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.batch_normalization %x, %c, %c, %c, %v : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<3xf32>) -> tensor<2x4x3x3xf32>
  return %0 : tensor<2x4x3x3xf32>
}

// -----

func.func @batch_norm_rank(%x: tensor<4xf32>, %c: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{must have rank 2 or more}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.batch_normalization %x, %c, %c, %c, %c : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @layer_norm_scale(%x: tensor<2x5x16xf32>, %g: tensor<8xf32>) -> tensor<2x5x16xf32> {
  // expected-error @+2 {{Scale 'tensor<8xf32>' does not broadcast to the normalized shape [16]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.layer_normalization %x, %g : (tensor<2x5x16xf32>, tensor<8xf32>) -> tensor<2x5x16xf32>
  return %0 : tensor<2x5x16xf32>
}

// -----

func.func @layer_norm_axis(%x: tensor<2x5x16xf32>, %g: tensor<16xf32>) -> tensor<2x5x16xf32> {
  // expected-error @+2 {{axis 3 is out of range for rank 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.layer_normalization %x, %g {axis = 3 : i64} : (tensor<2x5x16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32>
  return %0 : tensor<2x5x16xf32>
}

// -----

func.func @softmax_axis(%x: tensor<2x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+2 {{axis -3 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.softmax %x {axis = -3 : i64} : (tensor<2x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @reduce_empty_axes(%x: tensor<2x5xf32>) -> tensor<1x1xf32> {
  // expected-error @+2 {{axes must not be empty}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.reduce_sum %x {axes = array<i64>} : (tensor<2x5xf32>) -> tensor<1x1xf32>
  return %0 : tensor<1x1xf32>
}

// -----

func.func @reduce_axis_range(%x: tensor<2x5xf32>) -> tensor<2x1xf32> {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.reduce_mean %x {axes = array<i64: 2>} : (tensor<2x5xf32>) -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// -----

// The importer normalizes ONNX's negative axis: the op takes [0, rank) only.
func.func @cum_sum_negative_axis(%x: tensor<2x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+2 {{axis -1 is out of range [0, 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.cum_sum %x {axis = -1 : i64} : (tensor<2x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @cum_sum_axis_range(%x: tensor<2x5xi64>) -> tensor<2x5xi64> {
  // expected-error @+2 {{axis 2 is out of range [0, 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.cum_sum %x {axis = 2 : i64} : (tensor<2x5xi64>) -> tensor<2x5xi64>
  return %0 : tensor<2x5xi64>
}

// -----

func.func @cum_sum_missing_axis(%x: tensor<2x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{requires attribute 'axis'}}
  %0 = memopt.cum_sum %x : (tensor<2x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @cum_sum_exclusive(%x: tensor<2x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{exclusive must be 0 or 1, got 2}}
  %0 = memopt.cum_sum %x {axis = 1 : i64, exclusive = 2 : i64} : (tensor<2x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @cum_sum_reverse(%x: tensor<2x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{reverse must be 0 or 1, got -1}}
  %0 = memopt.cum_sum %x {axis = 1 : i64, reverse = -1 : i64} : (tensor<2x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @cum_sum_element_type(%x: tensor<2x5xi1>) -> tensor<2x5xi1> {
  // expected-error @+1 {{operand #0 must be}}
  %0 = memopt.cum_sum %x {axis = 1 : i64} : (tensor<2x5xi1>) -> tensor<2x5xi1>
  return %0 : tensor<2x5xi1>
}

// -----

func.func @reduce_axis_repeated(%x: tensor<2x5xf32>) -> tensor<2x1xf32> {
  // expected-error @+2 {{axis -1 is repeated}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.reduce_max %x {axes = array<i64: 1, -1>} : (tensor<2x5xf32>) -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// -----

func.func @flatten_axis(%x: tensor<2x5xf32>) -> tensor<10x1xf32> {
  // expected-error @+2 {{axis 3 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.flatten %x {axis = 3 : i64} : (tensor<2x5xf32>) -> tensor<10x1xf32>
  return %0 : tensor<10x1xf32>
}

// -----

func.func @transpose_perm_length(%x: tensor<2x5x3xf32>) -> tensor<5x2x3xf32> {
  // expected-error @+2 {{perm has 2 entries for an operand of rank 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x5x3xf32>) -> tensor<5x2x3xf32>
  return %0 : tensor<5x2x3xf32>
}

// -----

func.func @transpose_perm_repeated(%x: tensor<2x5x3xf32>) -> tensor<5x5x3xf32> {
  // expected-error @+2 {{perm [1, 1, 2] is not a permutation of [0, 3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.transpose %x {perm = array<i64: 1, 1, 2>} : (tensor<2x5x3xf32>) -> tensor<5x5x3xf32>
  return %0 : tensor<5x5x3xf32>
}

// -----

func.func @squeeze_not_one(%x: tensor<2x1x3xf32>) -> tensor<1x3xf32> {
  // expected-error @+2 {{cannot squeeze axis 0 of size 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.squeeze %x {axes = array<i64: 0>} : (tensor<2x1x3xf32>) -> tensor<1x3xf32>
  return %0 : tensor<1x3xf32>
}

// -----

func.func @unsqueeze_axis(%x: tensor<2x3xf32>) -> tensor<2x3x1xf32> {
  // expected-error @+2 {{axis 3 is out of range for rank 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.unsqueeze %x {axes = array<i64: 3>} : (tensor<2x3xf32>) -> tensor<2x3x1xf32>
  return %0 : tensor<2x3x1xf32>
}

// -----

func.func @unsqueeze_repeated(%x: tensor<2x3xf32>) -> tensor<1x1x2x3xf32> {
  // expected-error @+2 {{axis -4 is repeated}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.unsqueeze %x {axes = array<i64: 0, -4>} : (tensor<2x3xf32>) -> tensor<1x1x2x3xf32>
  return %0 : tensor<1x1x2x3xf32>
}

// -----

func.func @concat_dims(%x: tensor<2x3xf32>, %y: tensor<4x4xf32>) -> tensor<6x3xf32> {
  // expected-error @+2 {{differs from 'tensor<2x3xf32>' in dimension 1 (not the concat axis)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.concat %x, %y {axis = 0 : i64} : (tensor<2x3xf32>, tensor<4x4xf32>) -> tensor<6x3xf32>
  return %0 : tensor<6x3xf32>
}

// -----

func.func @concat_rank(%x: tensor<2x3xf32>, %y: tensor<3xf32>) -> tensor<5x3xf32> {
  // expected-error @+2 {{does not match 'tensor<2x3xf32>' in rank or element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.concat %x, %y {axis = 0 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// -----

func.func @concat_axis(%x: tensor<2x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.concat %x, %x {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @split_sum(%x: tensor<2x6xf32>) -> tensor<2x2xf32> {
  // expected-error @+2 {{split sizes [2, 3] sum to 5 but axis 1 of 'tensor<2x6xf32>' has size 6}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = memopt.split %x {axis = 1 : i64, split = array<i64: 2, 3>} : (tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x3xf32>)
  return %0#0 : tensor<2x2xf32>
}

// -----

func.func @split_result_count(%x: tensor<2x6xf32>) -> tensor<2x2xf32> {
  // expected-error @+2 {{inferred type(s) 'tensor<2x2xf32>', 'tensor<2x2xf32>', 'tensor<2x2xf32>' are incompatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = memopt.split %x {axis = 1 : i64, split = array<i64: 2, 2, 2>} : (tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x4xf32>)
  return %0#0 : tensor<2x2xf32>
}

// -----

func.func @split_negative(%x: tensor<2x6xf32>) -> tensor<2x8xf32> {
  // expected-error @+2 {{split size -2 is negative}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = memopt.split %x {axis = 1 : i64, split = array<i64: 8, -2>} : (tensor<2x6xf32>) -> (tensor<2x8xf32>, tensor<2x0xf32>)
  return %0#0 : tensor<2x8xf32>
}

// -----

func.func @slice_lengths(%x: tensor<6xf32>) -> tensor<3xf32> {
  // expected-error @+2 {{starts, ends, axes and steps have 1, 2, 1 and 1 entries; they must be equal}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.slice %x {starts = array<i64: 0>, ends = array<i64: 3, 4>, axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<6xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @slice_zero_step(%x: tensor<6xf32>) -> tensor<3xf32> {
  // expected-error @+2 {{step for axis 0 is zero}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.slice %x {starts = array<i64: 0>, ends = array<i64: 3>, axes = array<i64: 0>, steps = array<i64: 0>} : (tensor<6xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @slice_axis(%x: tensor<6xf32>) -> tensor<3xf32> {
  // expected-error @+2 {{axis 1 is out of range for rank 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.slice %x {starts = array<i64: 0>, ends = array<i64: 3>, axes = array<i64: 1>, steps = array<i64: 1>} : (tensor<6xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @gather_axis(%x: tensor<2x3xf32>, %i: tensor<2xi64>) -> tensor<2x2xf32> {
  // expected-error @+2 {{axis 2 is out of range for data of rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.gather %x, %i {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @gather_index_type(%x: tensor<2x3xf32>, %i: tensor<2xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = memopt.gather %x, %i : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @gather_elements_rank(%x: tensor<2x3xf32>, %i: tensor<2xi64>) -> tensor<2xf32> {
  // expected-error @+2 {{data 'tensor<2x3xf32>' and indices 'tensor<2xi64>' must have the same rank}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.gather_elements %x, %i : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @gather_elements_axis(%x: tensor<2x3xf32>, %i: tensor<2x3xi64>) -> tensor<2x3xf32> {
  // expected-error @+2 {{axis -3 is out of range for data of rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.gather_elements %x, %i {axis = -3 : i64} : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @expand_shape(%x: tensor<2x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{cannot broadcast 'tensor<2x3xf32>' to 'tensor<4x3xf32>'}}
  %0 = memopt.expand %x : (tensor<2x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @expand_element_type(%x: tensor<3xf32>) -> tensor<2x3xi32> {
  // expected-error @+1 {{changes the element type from 'f32' to 'i32'}}
  %0 = memopt.expand %x : (tensor<3xf32>) -> tensor<2x3xi32>
  return %0 : tensor<2x3xi32>
}

// -----

func.func @pad_length(%x: tensor<2x3xf32>) -> tensor<2x5xf32> {
  // expected-error @+2 {{pads has 2 entries; rank 2 needs 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.pad %x {pads = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @pad_mode(%x: tensor<2x3xf32>) -> tensor<2x5xf32> {
  // expected-error @+2 {{unknown mode 'mirror'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.pad %x {pads = array<i64: 0, 1, 0, 1>, mode = "mirror"} : (tensor<2x3xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @pad_crop(%x: tensor<2x3xf32>) -> tensor<2x0xf32> {
  // expected-error @+2 {{pads crop axis 1 of 'tensor<2x3xf32>' to a negative size}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.pad %x {pads = array<i64: 0, -2, 0, -2>} : (tensor<2x3xf32>) -> tensor<2x0xf32>
  return %0 : tensor<2x0xf32>
}

// -----

func.func @resize_mode(%x: tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32> {
  // expected-error @+1 {{mode must be 'nearest' or 'linear', got 'cubic'}}
  %0 = memopt.resize %x {mode = "cubic"} : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32>
  return %0 : tensor<1x3x8x8xf32>
}

// -----

func.func @resize_rank(%x: tensor<1x3x4x4xf32>) -> tensor<3x8x8xf32> {
  // expected-error @+1 {{must have the rank and element type of 'tensor<1x3x4x4xf32>'}}
  %0 = memopt.resize %x : (tensor<1x3x4x4xf32>) -> tensor<3x8x8xf32>
  return %0 : tensor<3x8x8xf32>
}

// -----

func.func @resize_transform(%x: tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32> {
  // expected-error @+1 {{unknown coordinate_transformation_mode 'corners'}}
  %0 = memopt.resize %x {coordinate_transformation_mode = "corners"} : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32>
  return %0 : tensor<1x3x8x8xf32>
}

// -----

func.func @resize_nearest_mode(%x: tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32> {
  // expected-error @+1 {{unknown nearest_mode 'round'}}
  %0 = memopt.resize %x {nearest_mode = "round"} : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32>
  return %0 : tensor<1x3x8x8xf32>
}

// -----

func.func @constant_of_shape_rank(%s: tensor<3xi64>) -> tensor<2x3xf32> {
  // expected-error @+1 {{shape operand 'tensor<3xi64>' does not have one entry per dimension of 'tensor<2x3xf32>'}}
  %0 = memopt.constant_of_shape %s : (tensor<3xi64>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @constant_of_shape_value_type(%s: tensor<2xi64>) -> tensor<2x3xf32> {
  // expected-error @+1 {{value element type 'i32' differs from the result's 'f32'}}
  %0 = memopt.constant_of_shape %s {value = dense<1> : tensor<1xi32>} : (tensor<2xi64>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @constant_of_shape_value_count(%s: tensor<2xi64>) -> tensor<2x3xf32> {
  // expected-error @+1 {{value must have exactly one element, got 2}}
  %0 = memopt.constant_of_shape %s {value = dense<1.0> : tensor<2xf32>} : (tensor<2xi64>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @range_scalars(%a: tensor<1xi64>) -> tensor<4xi64> {
  // expected-error @+1 {{start, limit and delta must be scalars of 'i64', got 'tensor<1xi64>'}}
  %0 = memopt.range %a, %a, %a : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

func.func @range_rank(%a: tensor<i64>) -> tensor<2x2xi64> {
  // expected-error @+1 {{result must be 1-D, got 'tensor<2x2xi64>'}}
  %0 = memopt.range %a, %a, %a : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<2x2xi64>
  return %0 : tensor<2x2xi64>
}

// -----

func.func @constant_type() -> tensor<3xi64> {
  // expected-error @+1 {{failed to verify that all of {value, output} have same type}}
  %0 = "memopt.constant"() {value = dense<[1, 2]> : tensor<2xi64>} : () -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

func.func @gemm_activation(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+2 {{activation 'swish' is not one of none, relu, gelu, gelu_tanh}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.gemm %a, %b {activation = "swish"} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @relu_grad_integer(%x: tensor<4xi32>) {
  // expected-error @+1 {{needs float operands, got 'tensor<4xi32>'}}
  %0 = memopt.relu_grad %x, %x : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @mod_float_floor(%x: tensor<4xf32>) {
  // expected-error @+1 {{fmod must be 1 for floating-point operands ('f32'), as ONNX requires}}
  %0 = memopt.mod %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @mod_bad_fmod(%x: tensor<4xi32>) {
  // expected-error @+1 {{fmod must be 0 or 1, got 2}}
  %0 = memopt.mod %x, %x {fmod = 2 : i64} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @mod_bool(%x: tensor<4xi1>) {
  // expected-error @+1 {{operands must be numeric, got 'tensor<4xi1>'}}
  %0 = memopt.mod %x, %x : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  return
}

// -----

func.func @mod_mixed_types(%x: tensor<4xi32>, %y: tensor<4xi64>) {
  // expected-error @+1 {{operand element types differ}}
  %0 = memopt.mod %x, %y : (tensor<4xi32>, tensor<4xi64>) -> tensor<4xi32>
  return
}

// -----

func.func @scatter_nd_updates_shape(%d: tensor<4x5xf32>, %i: tensor<2x1xi64>, %u: tensor<2x4xf32>) {
  // expected-error @+1 {{updates 'tensor<2x4xf32>' must be 'tensor<2x5xf32>' (indices.shape[:-1] + data.shape[k:] for data 'tensor<4x5xf32>' and indices 'tensor<2x1xi64>')}}
  %0 = memopt.scatter_nd %d, %i, %u : (tensor<4x5xf32>, tensor<2x1xi64>, tensor<2x4xf32>) -> tensor<4x5xf32>
  return
}

// -----

func.func @scatter_nd_too_many_axes(%d: tensor<4xf32>, %i: tensor<2x2xi64>, %u: tensor<2xf32>) {
  // expected-error @+1 {{indices 'tensor<2x2xi64>' address 2 axes, but data 'tensor<4xf32>' has rank 1}}
  %0 = memopt.scatter_nd %d, %i, %u : (tensor<4xf32>, tensor<2x2xi64>, tensor<2xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @scatter_nd_scalar_indices(%d: tensor<4xf32>, %i: tensor<i64>, %u: tensor<f32>) {
  // expected-error @+1 {{indices must have rank >= 1, got 'tensor<i64>'}}
  %0 = memopt.scatter_nd %d, %i, %u : (tensor<4xf32>, tensor<i64>, tensor<f32>) -> tensor<4xf32>
  return
}

// -----

func.func @scatter_nd_reduction(%d: tensor<4xf32>, %i: tensor<1x1xi64>, %u: tensor<1xf32>) {
  // expected-error @+1 {{reduction must be 'none', 'add', 'mul', 'max' or 'min', got 'sum'}}
  %0 = memopt.scatter_nd %d, %i, %u {reduction = "sum"} : (tensor<4xf32>, tensor<1x1xi64>, tensor<1xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @scatter_nd_bool_add(%d: tensor<4xi1>, %i: tensor<1x1xi64>, %u: tensor<1xi1>) {
  // expected-error @+1 {{reduction 'add' needs a numeric element type, got 'tensor<4xi1>'}}
  %0 = memopt.scatter_nd %d, %i, %u {reduction = "add"} : (tensor<4xi1>, tensor<1x1xi64>, tensor<1xi1>) -> tensor<4xi1>
  return
}

// -----

func.func @scatter_nd_updates_type(%d: tensor<4xf32>, %i: tensor<1x1xi64>, %u: tensor<1xf16>) {
  // expected-error @+1 {{updates element type differs from data: 'tensor<1xf16>' vs 'tensor<4xf32>'}}
  %0 = memopt.scatter_nd %d, %i, %u : (tensor<4xf32>, tensor<1x1xi64>, tensor<1xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @scatter_nd_result_type(%d: tensor<4xf32>, %i: tensor<1x1xi64>, %u: tensor<1xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4xf32>' are incompatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.scatter_nd %d, %i, %u : (tensor<4xf32>, tensor<1x1xi64>, tensor<1xf32>) -> tensor<5xf32>
  return
}

// -----

func.func @attention_head_size(%q: tensor<4x8xf32>, %k: tensor<6x16xf32>, %v: tensor<6x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{K 'tensor<6x16xf32>' has head size 16 but Q 'tensor<4x8xf32>' has 8}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<4x8xf32>, tensor<6x16xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @attention_transposed_keys(%q: tensor<4x8xf32>, %kt: tensor<8x6xf32>, %v: tensor<5x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{V 'tensor<5x8xf32>' has 5 keys but K 'tensor<8x6xf32>' has 6}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.attention %q, %kt, %v {scale = 1.0 : f32, key_transposed = true} : (tensor<4x8xf32>, tensor<8x6xf32>, tensor<5x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @attention_dropout_ratio(%q: tensor<4x8xf32>, %key: tensor<2xi64>) -> tensor<4x8xf32> {
  // expected-error @+1 {{dropout_ratio 1.000000e+00 is not in [0, 1)}}
  %0 = memopt.attention %q, %q, %q dropout_key %key {scale = 1.0 : f32, dropout_ratio = 1.0 : f32} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<2xi64>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @attention_dropout_without_key(%q: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{dropout_ratio 1.000000e-01 needs a dropout_key operand}}
  %0 = memopt.attention %q, %q, %q {scale = 1.0 : f32, dropout_ratio = 0.1 : f32} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @attention_key_without_dropout(%q: tensor<4x8xf32>, %key: tensor<2xi64>) -> tensor<4x8xf32> {
  // expected-error @+1 {{has a dropout_key but dropout_ratio 0}}
  %0 = memopt.attention %q, %q, %q dropout_key %key {scale = 1.0 : f32} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<2xi64>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @attention_grad_dropout_key(%q: tensor<4x8xf32>, %lse: tensor<4x2xf32>, %key: tensor<3xi64>) -> tensor<4x8xf32> {
  // expected-error @+1 {{dropout_key must hold two i64 elements [seed, micro-batch]}}
  %dq, %dk, %dv = memopt.attention_grad %q, %q, %q, %q, %q, %lse dropout_key %key {scale = 1.0 : f32, dropout_ratio = 0.5 : f32} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x2xf32>, tensor<3xi64>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  return %dq : tensor<4x8xf32>
}

// -----

func.func @attention_cudnn_rng_without_dropout(%q: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{dropout_cudnn_rng needs a dropout}}
  %0 = memopt.attention %q, %q, %q {scale = 1.0 : f32, dropout_cudnn_rng} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @attention_batch(%q: tensor<2x4x8xf32>, %k: tensor<3x6x8xf32>, %v: tensor<6x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+2 {{batch dimensions of Q 'tensor<2x4x8xf32>', K 'tensor<3x6x8xf32>' and V 'tensor<6x8xf32>' do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<2x4x8xf32>, tensor<3x6x8xf32>, tensor<6x8xf32>) -> tensor<2x4x8xf32>
  return %0 : tensor<2x4x8xf32>
}

// -----

func.func @attention_bias_widens(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x8xf32>, %b: tensor<3x1x6xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+2 {{bias 'tensor<3x1x6xf32>' does not broadcast to the scores [2, 4, 6]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.attention %q, %k, %v, %b {scale = 1.0 : f32} : (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<3x1x6xf32>) -> tensor<2x4x8xf32>
  return %0 : tensor<2x4x8xf32>
}

// -----

func.func @attention_element_types(%q: tensor<4x8xf32>, %k: tensor<6x8xf16>, %v: tensor<6x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{have different element types}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<4x8xf32>, tensor<6x8xf16>, tensor<6x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @attention_no_scale(%q: tensor<4x8xf32>, %k: tensor<6x8xf32>, %v: tensor<6x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{requires attribute 'scale'}}
  %0 = memopt.attention %q, %k, %v : (tensor<4x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @fused_unknown_step(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{unknown step 'softmax'}}
  %0 = memopt.fused_elementwise %x {ops = ["softmax"], registers = array<i64: 0, -1>, alphas = array<f32: 0.0>, betas = array<f32: 0.0>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @fused_future_register(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{step 0 ('add') reads registers 0, 1; registers 0..0 exist}}
  %0 = memopt.fused_elementwise %x {ops = ["add"], registers = array<i64: 0, 1>, alphas = array<f32: 0.0>, betas = array<f32: 0.0>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @fused_unary_second(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{and a unary step's second is -1}}
  %0 = memopt.fused_elementwise %x {ops = ["relu"], registers = array<i64: 0, 0>, alphas = array<f32: 0.0>, betas = array<f32: 0.0>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @fused_shape(%x: tensor<4xf32>, %y: tensor<3x1xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{result 'tensor<4xf32>' is not the broadcast shape of the inputs}}
  %0 = memopt.fused_elementwise %x, %y {ops = ["add"], registers = array<i64: 0, 1>, alphas = array<f32: 0.0>, betas = array<f32: 0.0>} : (tensor<4xf32>, tensor<3x1xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @fused_element_type(%x: tensor<4xf32>, %y: tensor<4xf16>) -> tensor<4xf32> {
  // expected-error @+1 {{input 'tensor<4xf16>' does not have the element type 'f32' of the first input}}
  %0 = memopt.fused_elementwise %x, %y {ops = ["add"], registers = array<i64: 0, 1>, alphas = array<f32: 0.0>, betas = array<f32: 0.0>} : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @fused_counts(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{needs two operand registers, one alpha and one beta per step}}
  %0 = memopt.fused_elementwise %x {ops = ["relu"], registers = array<i64: 0>, alphas = array<f32: 0.0>, betas = array<f32: 0.0>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Generic-form ops whose operand list does not fit the op: refused before
// type inference reads an operand that is not there (issue 13).
func.func @add_one_operand(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'memopt.add' op expected 2 operands, but found 1}}
  %0 = "memopt.add"(%a) : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @gemm_one_operand(%a: tensor<2x3xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'memopt.gemm' op expected 2 or more operands, but found 1}}
  %0 = "memopt.gemm"(%a) : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @concat_no_operand() -> tensor<2xf32> {
  // expected-error @+1 {{'memopt.concat'}}
  %0 = "memopt.concat"() {axis = 0 : i64} : () -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @dropout_ratio_one(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'memopt.dropout' op ratio 1.000000e+00 is not in [0, 1)}}
  %0 = memopt.dropout %x {ratio = 1.0 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @random_uniform_f64(%key: tensor<2xi64>) -> tensor<4xf64> {
  // expected-error @+1 {{'memopt.random_uniform' op draws f32, f16 or bf16 numbers, not 'f64'}}
  %0 = memopt.random_uniform %key {low = 0.0 : f32, high = 1.0 : f32} : (tensor<2xi64>) -> tensor<4xf64>
  return %0 : tensor<4xf64>
}

// -----

func.func @random_uniform_empty_range(%key: tensor<2xi64>) -> tensor<4xf32> {
  // expected-error @+1 {{'memopt.random_uniform' op needs finite low <= high, got [2.000000e+00, 1.000000e+00)}}
  %0 = memopt.random_uniform %key {low = 2.0 : f32, high = 1.0 : f32} : (tensor<2xi64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @dropout_short_key(%x: tensor<4xf32>, %key: tensor<1xi64>) -> tensor<4xf32> {
  // expected-error @+1 {{'memopt.dropout' op key must hold two i64 elements [seed, micro-batch]}}
  %0 = memopt.dropout %x, key %key {ratio = 0.5 : f32} : (tensor<4xf32>, tensor<1xi64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @accumulation_without_micro_step(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>) {
  %param = memopt.variable "p" {role = "parameter"} : tensor<4xf32>
  %m = memopt.variable "p.momentum_buffer" {role = "optimizer_state"} : tensor<4xf32>
  // expected-error @+1 {{'memopt.sgd_update' op accumulation_steps 4 needs the micro_step}}
  memopt.sgd_update %param, %g, momentum %m, lr %lr {accumulation_steps = 4 : i64, momentum = 0.9 : f32} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>
  return
}

// -----

func.func @loss_scale_state_not_a_variable(%g: tensor<4xf16>, %lr: tensor<f32>) {
  %param = memopt.variable "p" {role = "parameter"} : tensor<4xf32>
  %scale = memopt.variable "memopt.loss_scale" {role = "loss_scale"} : tensor<f32>
  %m = memopt.variable "p.exp_avg" {role = "optimizer_state"} : tensor<4xf32>
  // expected-error @+1 {{'memopt.adamw_update' op loss_scale_state must be the [2] loss_scale_state variable}}
  memopt.adamw_update %param, %g, %m, %m, lr %lr, step %lr loss_scale %scale, found_inf %lr, loss_scale_state %lr : tensor<4xf32>, tensor<4xf16>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
  return
}

// -----

func.func @loss_scale_not_a_variable(%g: tensor<4xf16>, %lr: tensor<f32>, %s: tensor<f32>) {
  %param = memopt.variable "p" {role = "parameter"} : tensor<4xf32>
  // expected-error @+1 {{'memopt.sgd_update' op loss_scale must be the loss_scale variable}}
  memopt.sgd_update %param, %g, lr %lr loss_scale %s, found_inf %lr : tensor<4xf32>, tensor<4xf16>, tensor<f32>, tensor<f32>, tensor<f32>
  return
}

// -----

func.func @gradient_of_another_shape(%g: tensor<5xf16>, %lr: tensor<f32>) {
  %param = memopt.variable "p" {role = "parameter"} : tensor<4xf32>
  // expected-error @+1 {{'memopt.sgd_update' op grad must have the parameter's shape}}
  memopt.sgd_update %param, %g, lr %lr : tensor<4xf32>, tensor<5xf16>, tensor<f32>
  return
}

// -----

func.func @bad_loss_scale_factors(%f: tensor<f32>) {
  %scale = memopt.variable "memopt.loss_scale" {role = "loss_scale"} : tensor<f32>
  %state = memopt.variable "memopt.loss_scale_state" {role = "loss_scale_state"} : tensor<2xf32>
  // expected-error @+1 {{'memopt.update_loss_scale' op needs growth_factor >= 1, backoff_factor in (0, 1] and growth_interval >= 1}}
  memopt.update_loss_scale %scale, %state, found_inf %f {backoff_factor = 2.0 : f32} : tensor<f32>, tensor<2xf32>, tensor<f32>
  return
}

// -----

func.func @found_inf_accumulators_without_micro_step(%g: tensor<4xf16>) -> tensor<f32> {
  %acc = memopt.variable "p.grad" {role = "gradient_accumulator"} : tensor<4xf32>
  // expected-error @+1 {{'memopt.found_inf' op accumulators and micro_step come together}}
  %f = memopt.found_inf %g accumulators(%acc) : (tensor<4xf16>, tensor<4xf32>) -> tensor<f32>
  return %f : tensor<f32>
}

// -----

func.func @accumulator_without_micro_step(%g: tensor<4xf32>, %lr: tensor<f32>) {
  %param = memopt.variable "p" {role = "parameter"} : tensor<4xf32>
  %m = memopt.variable "p.momentum_buffer" {role = "optimizer_state"} : tensor<4xf32>
  %acc = memopt.variable "p.grad" {role = "gradient_accumulator"} : tensor<4xf32>
  // expected-error @+1 {{'memopt.sgd_update' op an accumulator needs the micro_step}}
  memopt.sgd_update %param, %g, momentum %m, lr %lr accumulate %acc, {accumulation_steps = 4 : i64, momentum = 0.9 : f32} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>
  return
}

// -----

func.func @batch_norm_training_low_scale(%x: tensor<2x3x4x4xf16>, %s: tensor<3xf16>) -> tensor<2x3x4x4xf16> {
  // expected-error @+1 {{'memopt.batch_norm_training' op scale, B, mean and inv_std must be f32 tensors of 3 elements}}
  %y, %m, %i = memopt.batch_norm_training %x, %s, %s : (tensor<2x3x4x4xf16>, tensor<3xf16>, tensor<3xf16>) -> (tensor<2x3x4x4xf16>, tensor<3xf32>, tensor<3xf32>)
  return %y : tensor<2x3x4x4xf16>
}

// -----

// A sharded update takes this rank's shard: 10 elements over 4 ranks are
// chunks of 2 and a tail of 2, shards of 4.
func.func @sharded_update_wrong_shard(%g: tensor<5xf32>, %lr: tensor<f32>) {
  %param = memopt.variable "p" {role = "parameter"} : tensor<10xf32>
  %m = memopt.variable "p.momentum_buffer" {role = "optimizer_state"} : tensor<5xf32>
  // expected-error @+1 {{'memopt.sgd_update' op grad must have type 'tensor<4xf32>' (this rank's shard of the parameter)}}
  memopt.sgd_update %param, %g, momentum %m, lr %lr {momentum = 0.9 : f32, shards = 4 : i64} : tensor<10xf32>, tensor<5xf32>, tensor<5xf32>, tensor<f32>
  return
}

// -----

func.func @all_reduce_type(%g: tensor<4xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'memopt.all_reduce' op result must have the input's type}}
  %r = memopt.all_reduce %g : (tensor<4xf32>) -> tensor<2x2xf32>
  return %r : tensor<2x2xf32>
}

// -----

func.func @all_reduce_reduction(%g: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'memopt.all_reduce' op reduction 'min' is not sum, average or max}}
  %r = memopt.all_reduce %g {reduction = "min"} : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// Collectives reduce f32, f16 or bf16 (a gradient reduced in its low type).
func.func @all_reduce_element_type(%g: tensor<4xf64>) -> tensor<4xf64> {
  // expected-error @+1 {{'memopt.all_reduce' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values}}
  %r = memopt.all_reduce %g : (tensor<4xf64>) -> tensor<4xf64>
  return %r : tensor<4xf64>
}

// -----

func.func @reduce_scatter_shard(%g: tensor<10xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'memopt.reduce_scatter' op result must have type 'tensor<4xf32>' (this rank's shard of the input over 4 ranks)}}
  %r = memopt.reduce_scatter %g {ranks = 4 : i64} : (tensor<10xf32>) -> tensor<3xf32>
  return %r : tensor<3xf32>
}

// -----

func.func @reduce_scatter_ranks(%g: tensor<10xf32>) -> tensor<10xf32> {
  // expected-error @+1 {{'memopt.reduce_scatter' op ranks must be at least 1, got 0}}
  %r = memopt.reduce_scatter %g {ranks = 0 : i64} : (tensor<10xf32>) -> tensor<10xf32>
  return %r : tensor<10xf32>
}

// -----

func.func @all_gather_not_a_variable(%p: tensor<10xf32>) {
  // expected-error @+1 {{'memopt.all_gather' op param must be a memopt.variable (the update writes it in place)}}
  memopt.all_gather %p {ranks = 2 : i64} : tensor<10xf32>
  return
}

// -----

// A converted weight's type is its source's, permuted and (f32 only) cast.
func.func @converted_weight_shape() {
  // expected-error @+1 {{has type 'tensor<2x3xf16>', but its source 'tensor<2x3xf32>' permuted has shape [3, 2]}}
  %0 = memopt.constant #memopt.converted<dense_resource<w> : tensor<2x3xf32>, permutation = [1, 0]> : tensor<2x3xf16>
  return
}

// -----

func.func @converted_weight_permutation() {
  // expected-error @+1 {{has a permutation that is not one of the 2 source axes}}
  %0 = memopt.constant #memopt.converted<dense_resource<w> : tensor<2x3xf32>, permutation = [0, 0]> : tensor<2x2xf32>
  return
}

// -----

func.func @converted_weight_cast() {
  // expected-error @+1 {{casts 'i32' to 'f16' (only f32 to f16 or bf16)}}
  %0 = memopt.constant #memopt.converted<dense_resource<w> : tensor<4xi32>> : tensor<4xf16>
  return
}

// -----

func.func @batch_norm_stats_low_scale(%x: tensor<2x3x4x4xf16>, %s: tensor<3xf16>, %c: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'memopt.batch_norm_stats' op scale, B, mean, inv_std, applied_scale and applied_bias must be f32 tensors of 3 elements}}
  %m, %i, %a, %b = memopt.batch_norm_stats %x, %s, %c : (tensor<2x3x4x4xf16>, tensor<3xf16>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
  return %m : tensor<3xf32>
}

// -----

func.func @norm_relu_conv_wrong_output(%x: tensor<2x3x4x4xf16>, %w: tensor<5x3x3x3xf16>, %c: tensor<3xf32>) -> tensor<2x5x4x4xf16> {
  // expected-error @+1 {{'memopt.norm_relu_conv' op shapes X [2, 3, 4, 4], W [5, 3, 3, 3], Y [2, 5, 4, 4] (channels-first) do not form a convolution}}
  %y = memopt.norm_relu_conv %x, %w, %c, %c {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x3x4x4xf16>, tensor<5x3x3x3xf16>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x5x4x4xf16>
  return %y : tensor<2x5x4x4xf16>
}

// -----

func.func @norm_relu_conv_scale_of_output_channels(%x: tensor<2x3x4x4xf16>, %w: tensor<5x3x1x1xf16>, %c: tensor<5xf32>) -> tensor<2x5x4x4xf16> {
  // expected-error @+1 {{'memopt.norm_relu_conv' op scale and bias must be f32 tensors of 3 elements}}
  %y = memopt.norm_relu_conv %x, %w, %c, %c {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x3x4x4xf16>, tensor<5x3x1x1xf16>, tensor<5xf32>, tensor<5xf32>) -> tensor<2x5x4x4xf16>
  return %y : tensor<2x5x4x4xf16>
}

// -----

func.func @batch_norm_training_residual_type(%x: tensor<2x3x4x4xf16>, %z: tensor<2x3x4x4xbf16>, %c: tensor<3xf32>) -> tensor<2x3x4x4xf16> {
  // expected-error @+1 {{'memopt.batch_norm_training' op residual Z must have Y's type}}
  %y, %m, %i = memopt.batch_norm_training %x, %c, %c residual %z {activation = "relu"} : (tensor<2x3x4x4xf16>, tensor<3xf32>, tensor<3xf32>, tensor<2x3x4x4xbf16>) -> (tensor<2x3x4x4xf16>, tensor<3xf32>, tensor<3xf32>)
  return %y : tensor<2x3x4x4xf16>
}

// -----

func.func @batch_norm_add_relu_grad_output_type(%x: tensor<2x3x4x4xf16>, %y: tensor<2x3x4x4xf32>, %c: tensor<3xf32>) -> tensor<2x3x4x4xf16> {
  // expected-error @+1 {{'memopt.batch_norm_add_relu_grad' op dY, Y, dX and dZ must have X's type}}
  %dx, %ds, %db, %dz = memopt.batch_norm_add_relu_grad %x, %x, %y, %c, %c, %c : (tensor<2x3x4x4xf16>, tensor<2x3x4x4xf16>, tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf16>, tensor<3xf32>, tensor<3xf32>, tensor<2x3x4x4xf16>)
  return %dx : tensor<2x3x4x4xf16>
}

// -----

func.func @batch_norm_add_relu_grad_channels(%x: tensor<2x3x4x4xf16>, %c: tensor<3xf32>, %d: tensor<4xf32>) -> tensor<2x3x4x4xf16> {
  // expected-error @+1 {{'memopt.batch_norm_add_relu_grad' op scale, mean, inv_std, dscale and dB must be f32 tensors of 3 elements}}
  %dx, %ds, %db, %dz = memopt.batch_norm_add_relu_grad %x, %x, %x, %c, %d, %c : (tensor<2x3x4x4xf16>, tensor<2x3x4x4xf16>, tensor<2x3x4x4xf16>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf16>, tensor<3xf32>, tensor<3xf32>, tensor<2x3x4x4xf16>)
  return %dx : tensor<2x3x4x4xf16>
}

// -----

func.func @batch_norm_relu_grad_mixed_types(%x: tensor<2x3x4x4xf16>, %dy: tensor<2x3x4x4xbf16>, %c: tensor<3xf32>) -> tensor<2x3x4x4xf16> {
  // expected-error @+1 {{'memopt.batch_norm_relu_grad' op dY and dX must have X's type}}
  %dx, %ds, %db = memopt.batch_norm_relu_grad %x, %dy, %c, %c, %c, %c, %c : (tensor<2x3x4x4xf16>, tensor<2x3x4x4xbf16>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf16>, tensor<3xf32>, tensor<3xf32>)
  return %dx : tensor<2x3x4x4xf16>
}
