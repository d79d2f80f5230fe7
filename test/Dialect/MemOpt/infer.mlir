// RUN: memopt-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// Result-type inference, checked through the verifier: every op here must
// carry exactly the type that the ONNX shape rule gives. A function with no
// expected-error must verify (its CHECK-LABEL proves it was printed); each
// wrong type next to it must be rejected with the inferred type named.

// CHECK-LABEL: func.func @conv_window
func.func @conv_window(%x: tensor<1x3x10x10xf32>, %w: tensor<8x3x3x3xf32>,
                       %x1: tensor<2x4x9xf32>, %w1: tensor<6x2x4xf32>,
                       %x3: tensor<1x2x5x6x7xf32>, %w3: tensor<4x2x1x2x3xf32>) {
  // H: (10 + 1 + 2 - (2 * 2 + 1)) / 2 + 1 = 5; W: (10 + 0 + 1 - 3) / 3 + 1 = 3.
  %0 = memopt.conv %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 3>, pads = array<i64: 1, 0, 2, 1>, dilations = array<i64: 2, 1>} : (tensor<1x3x10x10xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x5x3xf32>
  // 1-D, group 2: (9 + 0 + 0 - 4) / 1 + 1 = 6.
  %1 = memopt.conv %x1, %w1 {kernel_shape = array<i64: 4>, strides = array<i64: 1>, pads = array<i64: 0, 0>, dilations = array<i64: 1>, group = 2 : i64} : (tensor<2x4x9xf32>, tensor<6x2x4xf32>) -> tensor<2x6x6xf32>
  // 3-D with stride 2 on the last axis: (7 - 3) / 2 + 1 = 3.
  %2 = memopt.conv %x3, %w3 {kernel_shape = array<i64: 1, 2, 3>, strides = array<i64: 1, 1, 2>, pads = array<i64: 0, 0, 0, 0, 0, 0>, dilations = array<i64: 1, 1, 1>} : (tensor<1x2x5x6x7xf32>, tensor<4x2x1x2x3xf32>) -> tensor<1x4x5x5x3xf32>
  return
}

// -----

func.func @conv_window_wrong(%x: tensor<1x3x10x10xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<1x8x5x3xf32>' are incompatible with return type(s) of operation 'tensor<1x8x5x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.conv %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 3>, pads = array<i64: 1, 0, 2, 1>, dilations = array<i64: 2, 1>} : (tensor<1x3x10x10xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x5x4xf32>
  return
}

// -----

// CHECK-LABEL: func.func @conv_transpose_output_padding
func.func @conv_transpose_output_padding(%x: tensor<1x4x5x5xf32>, %w: tensor<4x2x3x3xf32>) {
  // M = 2 * group; H: 2 * (5 - 1) + 1 + 2 * (3 - 1) + 1 - 1 - 1 = 12;
  // W: 2 * (5 - 1) + 0 + 3 - 1 - 1 = 9.
  %0 = memopt.conv_transpose %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 2, 1>, output_padding = array<i64: 1, 0>, group = 2 : i64} : (tensor<1x4x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x12x9xf32>
  return
}

// -----

func.func @conv_transpose_wrong(%x: tensor<1x4x5x5xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<1x2x11x11xf32>' are incompatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.conv_transpose %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x2x10x10xf32>
  return
}

// -----

// CHECK-LABEL: func.func @pool_ceil_mode
func.func @pool_ceil_mode(%x: tensor<1x1x7x7xf32>, %y: tensor<1x1x5x5xf32>) {
  // floor((7 - 2) / 2) + 1 = 3.
  %0 = memopt.max_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x1x7x7xf32>) -> tensor<1x1x3x3xf32>
  // ceil((7 - 2) / 2) + 1 = 4.
  %1 = memopt.max_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = 1 : i64} : (tensor<1x1x7x7xf32>) -> tensor<1x1x4x4xf32>
  // ceil((5 + 2 - 2) / 2) + 1 = 4, but the 4th window would start in the
  // end padding (3 * 2 >= 5 + 1), so it is dropped: 3 (PyTorch agrees).
  %2 = memopt.average_pool %y {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = 1 : i64} : (tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32>
  // Dilated window: (7 - (2 * 2 + 1)) / 1 + 1 = 3.
  %3 = memopt.max_pool %x {kernel_shape = array<i64: 3, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 2, 1>} : (tensor<1x1x7x7xf32>) -> tensor<1x1x3x7xf32>
  %4 = memopt.global_average_pool %x : (tensor<1x1x7x7xf32>) -> tensor<1x1x1x1xf32>
  return
}

// -----

func.func @pool_ceil_mode_wrong(%x: tensor<1x1x7x7xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<1x1x4x4xf32>' are incompatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.max_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = 1 : i64} : (tensor<1x1x7x7xf32>) -> tensor<1x1x3x3xf32>
  return
}

// -----

// CHECK-LABEL: func.func @slice_clamping
func.func @slice_clamping(%x: tensor<10xf32>, %m: tensor<4x6xf32>, %e: tensor<2x0xf32>) {
  // Negative step, end clamped to -1: elements 9, 6, 3, 0.
  %0 = memopt.slice %x {starts = array<i64: -1>, ends = array<i64: -100>, axes = array<i64: 0>, steps = array<i64: -3>} : (tensor<10xf32>) -> tensor<4xf32>
  // Start past the end is clamped: empty.
  %1 = memopt.slice %x {starts = array<i64: 100>, ends = array<i64: 200>, axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<10xf32>) -> tensor<0xf32>
  // Start past the end with a negative step is clamped to dim - 1: 9, 7, 5.
  %2 = memopt.slice %x {starts = array<i64: 100>, ends = array<i64: 4>, axes = array<i64: 0>, steps = array<i64: -2>} : (tensor<10xf32>) -> tensor<3xf32>
  // Huge steps take one element; an empty axis stays empty.
  %4 = memopt.slice %x {starts = array<i64: 2>, ends = array<i64: 10>, axes = array<i64: 0>, steps = array<i64: 9223372036854775807>} : (tensor<10xf32>) -> tensor<1xf32>
  %5 = memopt.slice %x {starts = array<i64: -1>, ends = array<i64: -9223372036854775808>, axes = array<i64: 0>, steps = array<i64: -9223372036854775808>} : (tensor<10xf32>) -> tensor<1xf32>
  %6 = memopt.slice %e {starts = array<i64: 0>, ends = array<i64: -1>, axes = array<i64: 1>, steps = array<i64: -1>} : (tensor<2x0xf32>) -> tensor<2x0xf32>
  // Two axes, one negative, INT64_MAX end: rows 1..3, columns 0, 2, 4.
  %3 = memopt.slice %m {starts = array<i64: 0, 1>, ends = array<i64: 9223372036854775807, -1>, axes = array<i64: -1, 0>, steps = array<i64: 2, 1>} : (tensor<4x6xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_negative_step_wrong(%x: tensor<10xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4xf32>' are incompatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.slice %x {starts = array<i64: -1>, ends = array<i64: -100>, axes = array<i64: 0>, steps = array<i64: -3>} : (tensor<10xf32>) -> tensor<3xf32>
  return
}

// -----

// CHECK-LABEL: func.func @gather_ranks
func.func @gather_ranks(%d: tensor<5x4x3xf32>, %i: tensor<2x6xi64>, %s: tensor<i32>,
                        %e: tensor<5x2x3xi64>) {
  // data rank + indices rank - 1, indices in place of the axis.
  %0 = memopt.gather %d, %i {axis = 1 : i64} : (tensor<5x4x3xf32>, tensor<2x6xi64>) -> tensor<5x2x6x3xf32>
  // A scalar index removes the axis.
  %1 = memopt.gather %d, %s : (tensor<5x4x3xf32>, tensor<i32>) -> tensor<4x3xf32>
  %2 = memopt.gather %d, %i {axis = -1 : i64} : (tensor<5x4x3xf32>, tensor<2x6xi64>) -> tensor<5x4x2x6xf32>
  // gather_elements: the shape of the indices.
  %3 = memopt.gather_elements %d, %e {axis = 1 : i64} : (tensor<5x4x3xf32>, tensor<5x2x3xi64>) -> tensor<5x2x3xf32>
  return
}

// -----

func.func @gather_wrong(%d: tensor<5x4x3xf32>, %i: tensor<2x6xi64>) {
  // expected-error @+2 {{inferred type(s) 'tensor<5x2x6x3xf32>' are incompatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.gather %d, %i {axis = 1 : i64} : (tensor<5x4x3xf32>, tensor<2x6xi64>) -> tensor<5x12x3xf32>
  return
}

// -----

// CHECK-LABEL: func.func @gemm_and_matmul
func.func @gemm_and_matmul(%a: tensor<3x4xf32>, %b: tensor<5x3xf32>, %c: tensor<1x5xf32>,
                           %v: tensor<3xf32>, %m: tensor<3x4xf32>,
                           %p: tensor<2x1x3x4xf32>, %q: tensor<5x4x6xf32>) {
  // op(A) = A^T is 4x3, op(B) = B^T is 3x5; C broadcasts along rows.
  %0 = memopt.gemm %a, %b, %c {transA = 1 : i64, transB = 1 : i64, alpha = 2.0 : f32} : (tensor<3x4xf32>, tensor<5x3xf32>, tensor<1x5xf32>) -> tensor<4x5xf32>
  // Vector times matrix drops the promoted axis.
  %1 = memopt.matmul %v, %m : (tensor<3xf32>, tensor<3x4xf32>) -> tensor<4xf32>
  // Batch dimensions broadcast.
  %2 = memopt.matmul %p, %q : (tensor<2x1x3x4xf32>, tensor<5x4x6xf32>) -> tensor<2x5x3x6xf32>
  return
}

// -----

func.func @gemm_transpose_wrong(%a: tensor<3x4xf32>, %b: tensor<5x3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4x5xf32>' are incompatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.gemm %a, %b {transA = 1 : i64, transB = 1 : i64} : (tensor<3x4xf32>, tensor<5x3xf32>) -> tensor<3x5xf32>
  return
}

// -----

// CHECK-LABEL: func.func @reductions_keepdims
func.func @reductions_keepdims(%x: tensor<2x3x4xf32>) {
  %0 = memopt.reduce_sum %x {axes = array<i64: 0, 2>, keepdims = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<3xf32>
  %1 = memopt.reduce_mean %x {axes = array<i64: -1>} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  %2 = memopt.reduce_max %x {axes = array<i64: 0, 1, 2>, keepdims = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<f32>
  return
}

// -----

func.func @reduce_keepdims_wrong(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<3xf32>' are incompatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.reduce_sum %x {axes = array<i64: 0, 2>, keepdims = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  return
}

// -----

// cum_sum keeps the operand's type, whatever the axis and flags.
// CHECK-LABEL: func.func @cum_sum_keeps_type
func.func @cum_sum_keeps_type(%x: tensor<2x3x4xf16>, %i: tensor<5xi64>) {
  %0 = memopt.cum_sum %x {axis = 1 : i64, exclusive = 1 : i64} : (tensor<2x3x4xf16>) -> tensor<2x3x4xf16>
  %1 = memopt.cum_sum %i {axis = 0 : i64, reverse = 1 : i64} : (tensor<5xi64>) -> tensor<5xi64>
  return
}

// -----

func.func @cum_sum_type_wrong(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x3x4xf32>' are incompatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.cum_sum %x {axis = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  return
}

// -----

// CHECK-LABEL: func.func @shape_rules
func.func @shape_rules(%x: tensor<2x3x4xf32>, %o: tensor<1x3x1x2xf32>, %m: tensor<3x4xf32>,
                       %c: tensor<3x1x1xi1>, %cx: tensor<1x4x1xf32>, %cy: tensor<1x1x5xf32>) {
  // transpose without perm reverses the axes.
  %0 = memopt.transpose %x : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
  // squeeze without axes removes every size-1 axis.
  %1 = memopt.squeeze %o : (tensor<1x3x1x2xf32>) -> tensor<3x2xf32>
  // unsqueeze axes index the result: 1 and -1 (= 3).
  %2 = memopt.unsqueeze %m {axes = array<i64: 1, -1>} : (tensor<3x4xf32>) -> tensor<3x1x4x1xf32>
  // flatten to 2-D at axis 0, 2 and -1.
  %3 = memopt.flatten %x {axis = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<1x24xf32>
  %4 = memopt.flatten %x {axis = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %5 = memopt.flatten %x {axis = -1 : i64} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  // concat along a negative axis.
  %6 = memopt.concat %x, %x {axis = -2 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x6x4xf32>
  // split with the default axis 0.
  %7:2 = memopt.split %x {split = array<i64: 1, 1>} : (tensor<2x3x4xf32>) -> (tensor<1x3x4xf32>, tensor<1x3x4xf32>)
  // where broadcasts all three operands.
  %8 = memopt.where %c, %cx, %cy : (tensor<3x1x1xi1>, tensor<1x4x1xf32>, tensor<1x1x5xf32>) -> tensor<3x4x5xf32>
  // shape with negative start and end: dims [1, 2).
  %9 = memopt.shape %x {start = -2 : i64, end = -1 : i64} : (tensor<2x3x4xf32>) -> tensor<1xi64>
  // pad with a negative (cropping) end.
  %10 = memopt.pad %x {pads = array<i64: 0, 1, 0, 0, 2, -3>} : (tensor<2x3x4xf32>) -> tensor<2x6x1xf32>
  // compare ops and is_nan give i1.
  %11 = memopt.less %x, %m : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xi1>
  %12 = memopt.is_nan %x : (tensor<2x3x4xf32>) -> tensor<2x3x4xi1>
  // softmax and the normalizations keep the shape.
  %13 = memopt.softmax %x : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %14 = memopt.layer_normalization %x, %m {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @transpose_default_wrong(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4x3x2xf32>' are incompatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.transpose %x : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @where_wrong(%c: tensor<3x1x1xi1>, %cx: tensor<1x4x1xf32>, %cy: tensor<1x1x5xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<3x4x5xf32>' are incompatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.where %c, %cx, %cy : (tensor<3x1x1xi1>, tensor<1x4x1xf32>, tensor<1x1x5xf32>) -> tensor<1x4x5xf32>
  return
}

// -----

func.func @compare_wrong_shape(%x: tensor<2x3xf32>, %y: tensor<3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x3xi1>' are incompatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.greater %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3xi1>
  return
}

// -----

func.func @unsqueeze_wrong(%m: tensor<3x4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<3x1x4x1xf32>' are incompatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.unsqueeze %m {axes = array<i64: 1, -1>} : (tensor<3x4xf32>) -> tensor<3x1x1x4xf32>
  return
}

// -----

// attention: broadcast batch of Q, K, V; S from Q, Dv from V.
// CHECK-LABEL: func.func @attention_shape
func.func @attention_shape(%q: tensor<3x1x5x8xf32>, %k: tensor<4x7x8xf32>, %v: tensor<1x7x2xf32>) {
  %0 = memopt.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<3x1x5x8xf32>, tensor<4x7x8xf32>, tensor<1x7x2xf32>) -> tensor<3x4x5x2xf32>
  return
}

// -----

func.func @attention_wrong(%q: tensor<3x1x5x8xf32>, %k: tensor<4x7x8xf32>, %v: tensor<1x7x2xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<3x4x5x2xf32>' are incompatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<3x1x5x8xf32>, tensor<4x7x8xf32>, tensor<1x7x2xf32>) -> tensor<3x4x5x8xf32>
  return
}

// -----

// return_lse adds the row statistics [batch..., S, 2] in f32; attention_grad
// gives dQ, dK (in K's layout), dV with the broadcast batch, dbias in the
// bias's shape.
// CHECK-LABEL: func.func @attention_grad_shapes
func.func @attention_grad_shapes(%q: tensor<3x1x5x8xf32>, %kt: tensor<4x8x7xf32>, %v: tensor<1x7x2xf32>, %b: tensor<4x1x7xf32>, %dy: tensor<3x4x5x2xf32>) {
  %y, %lse = memopt.attention %q, %kt, %v, %b {scale = 1.0 : f32, key_transposed = true, return_lse = true} : (tensor<3x1x5x8xf32>, tensor<4x8x7xf32>, tensor<1x7x2xf32>, tensor<4x1x7xf32>) -> (tensor<3x4x5x2xf32>, tensor<3x4x5x2xf32>)
  %dq, %dk, %dv, %db = memopt.attention_grad %q, %kt, %v, %y, %dy, %lse, %b {scale = 1.0 : f32, key_transposed = true, bias_gradient = true} : (tensor<3x1x5x8xf32>, tensor<4x8x7xf32>, tensor<1x7x2xf32>, tensor<3x4x5x2xf32>, tensor<3x4x5x2xf32>, tensor<3x4x5x2xf32>, tensor<4x1x7xf32>) -> (tensor<3x4x5x8xf32>, tensor<3x4x8x7xf32>, tensor<3x4x7x2xf32>, tensor<4x1x7xf32>)
  return
}

// -----

func.func @attention_grad_statistics(%q: tensor<2x5x8xf32>, %y: tensor<2x5x8xf32>, %lse: tensor<2x5xf32>) {
  // expected-error @+2 {{lse 'tensor<2x5xf32>' must be 'tensor<2x5x2xf32>' (the forward's row statistics)}}
  // expected-error @+1 {{failed to infer returned types}}
  %dq, %dk, %dv = memopt.attention_grad %q, %q, %q, %y, %y, %lse {scale = 1.0 : f32} : (tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5xf32>) -> (tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>)
  return
}

// -----

func.func @attention_grad_bias_gradient(%q: tensor<2x5x8xf32>, %y: tensor<2x5x8xf32>, %lse: tensor<2x5x2xf32>) {
  // expected-error @+2 {{bias_gradient needs a bias}}
  // expected-error @+1 {{failed to infer returned types}}
  %dq, %dk, %dv = memopt.attention_grad %q, %q, %q, %y, %y, %lse {scale = 1.0 : f32, bias_gradient = true} : (tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x2xf32>) -> (tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>)
  return
}

// -----

// grouped_gradients (grouped-query K / V, broadcast over a trailing run of
// the batch dims): dK and dV have K's and V's own shapes.
// CHECK-LABEL: func.func @attention_grad_grouped
func.func @attention_grad_grouped(%q: tensor<2x2x3x5x8xf16>, %k: tensor<2x2x1x6x8xf16>, %v: tensor<2x2x1x6x4xf16>, %y: tensor<2x2x3x5x4xf16>, %lse: tensor<2x2x3x5x2xf32>) {
  %dq, %dk, %dv = memopt.attention_grad %q, %k, %v, %y, %y, %lse {scale = 1.0 : f32, grouped_gradients = true} : (tensor<2x2x3x5x8xf16>, tensor<2x2x1x6x8xf16>, tensor<2x2x1x6x4xf16>, tensor<2x2x3x5x4xf16>, tensor<2x2x3x5x4xf16>, tensor<2x2x3x5x2xf32>) -> (tensor<2x2x3x5x8xf16>, tensor<2x2x1x6x8xf16>, tensor<2x2x1x6x4xf16>)
  return
}

// -----

// A broadcast over a leading axis (the sequences) is no group.
func.func @attention_grad_grouped_leading(%q: tensor<2x2x5x8xf32>, %k: tensor<1x2x6x8xf32>, %y: tensor<2x2x5x8xf32>, %lse: tensor<2x2x5x2xf32>) {
  // expected-error @+2 {{grouped_gradients needs K 'tensor<1x2x6x8xf32>' and V 'tensor<1x2x6x8xf32>' with the same batch dims, those of the output 'tensor<2x2x5x8xf32>' up to a trailing run they broadcast along}}
  // expected-error @+1 {{failed to infer returned types}}
  %dq, %dk, %dv = memopt.attention_grad %q, %k, %k, %y, %y, %lse {scale = 1.0 : f32, grouped_gradients = true} : (tensor<2x2x5x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x2xf32>) -> (tensor<2x2x5x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>)
  return
}
