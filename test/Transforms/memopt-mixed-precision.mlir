// RUN: memopt-opt %s -split-input-file -verify-diagnostics --memopt-mixed-precision | FileCheck %s
// RUN: memopt-opt %s -split-input-file --memopt-mixed-precision=precision=bf16 | FileCheck %s --check-prefix=BF16
// RUN: memopt-opt %s -split-input-file --mlir-disable-threading --memopt-mixed-precision=report -o /dev/null 2>/dev/null | FileCheck %s --check-prefix=REPORT
// RUN: not memopt-opt %s -split-input-file --memopt-mixed-precision=precision=f8 -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: memopt-opt %s -split-input-file --memopt-mixed-precision=precision=tf32 | FileCheck %s --check-prefix=TF32
// RUN: memopt-opt %s -split-input-file --mlir-disable-threading --memopt-mixed-precision="precision=tf32 report" -o /dev/null | FileCheck %s --check-prefix=TF32-REPORT

// BAD: error: memopt-mixed-precision: precision 'f8' is not f16, bf16 or tf32

// tf32 changes no type (no cast, the weight stays f32); it only marks the
// function, and the lowering lets its f32 contractions use TF32.
// TF32-LABEL: func.func @matmul_io_kept_f32
// TF32-SAME: attributes {memopt.precision = "tf32"}
// TF32-NOT: memopt.cast
// TF32: memopt.constant dense<5.000000e-01> : tensor<8x16xf32>
// TF32-NOT: memopt.cast
// TF32: memopt.matmul %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// TF32-NOT: memopt.cast
// TF32: return
// TF32-REPORT: memopt-mixed-precision @matmul_io_kept_f32: tf32: 1 f32 contractions may use TF32, every tensor stays f32

// A compute-bound op: the f32 input is cast down at the boundary, the weight
// is converted at compile time, the result is cast back for the f32 output
// (keep_io_types); the signature does not change.
// CHECK-LABEL: func.func @matmul_io_kept_f32
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
// CHECK-SAME: attributes {memopt.precision = "f16"}
// CHECK-DAG: %[[W:.*]] = memopt.constant dense<5.000000e-01> : tensor<8x16xf16>
// CHECK-DAG: %[[XL:.*]] = memopt.cast %[[X]] : (tensor<4x8xf32>) -> tensor<4x8xf16>
// CHECK: %[[M:.*]] = memopt.matmul %[[XL]], %[[W]] : (tensor<4x8xf16>, tensor<8x16xf16>) -> tensor<4x16xf16>
// CHECK: %[[R:.*]] = memopt.relu %[[M]] : tensor<4x16xf16>
// CHECK: %[[Y:.*]] = memopt.cast %[[M]] : (tensor<4x16xf16>) -> tensor<4x16xf32>
// CHECK: %[[R32:.*]] = memopt.cast %[[R]] : (tensor<4x16xf16>) -> tensor<4x16xf32>
// CHECK-NEXT: return %[[Y]], %[[R32]] : tensor<4x16xf32>, tensor<4x16xf32>
// BF16-LABEL: func.func @matmul_io_kept_f32
// BF16-SAME: attributes {memopt.precision = "bf16"}
// BF16: memopt.matmul %{{.*}}, %{{.*}} : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
// REPORT: memopt-mixed-precision @matmul_io_kept_f32: f16: 2 ops in f16, 0 in f32, 3 casts, 0 results stored in f32; weights 512 -> 256 bytes (1 constants converted, 0 values clamped, 0 raised from zero)
func.func @matmul_io_kept_f32(%x: tensor<4x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %w = memopt.constant dense<0.5> : tensor<8x16xf32>
  %m = memopt.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %r = memopt.relu %m : tensor<4x16xf32>
  return %m, %r : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// A matmul whose result only leaves the function stores its f32 accumulator
// into the output directly: no low copy, no cast (a language model's
// logits), also through aliasing views (a gemm between reshapes). A gemm
// with C does not (C would have to be f32 as well).
// CHECK-LABEL: func.func @output_stored_in_f32
// CHECK: %[[L:.*]] = memopt.matmul %{{.*}}, %{{.*}} : (tensor<4x8xf16>, tensor<8x16xf16>) -> tensor<4x16xf32>
// CHECK: %[[G:.*]] = memopt.gemm %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x8xf16>, tensor<8x16xf16>, tensor<16xf16>) -> tensor<4x16xf16>
// CHECK: %[[V:.*]] = memopt.gemm %{{.*}}, %{{.*}} : (tensor<4x8xf16>, tensor<8x16xf16>) -> tensor<4x16xf32>
// CHECK: %[[R:.*]] = memopt.reshape %[[V]] : (tensor<4x16xf32>) -> tensor<2x2x16xf32>
// CHECK: %[[G32:.*]] = memopt.cast %[[G]] : (tensor<4x16xf16>) -> tensor<4x16xf32>
// CHECK-NEXT: return %[[L]], %[[G32]], %[[R]]
// BF16-LABEL: func.func @output_stored_in_f32
// BF16: memopt.matmul %{{.*}}, %{{.*}} : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xf32>
// REPORT: memopt-mixed-precision @output_stored_in_f32: f16: 2 ops in f16, 3 in f32, 2 casts, 2 results stored in f32
func.func @output_stored_in_f32(%x: tensor<4x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<2x2x16xf32>) {
  %w = memopt.constant dense<0.5> : tensor<8x16xf32>
  %b = memopt.constant dense<0.5> : tensor<16xf32>
  %h = memopt.relu %x : tensor<4x8xf32>
  %l = memopt.matmul %h, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %g = memopt.gemm %h, %w, %b : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %v = memopt.gemm %h, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %r = memopt.reshape %v : (tensor<4x16xf32>) -> tensor<2x2x16xf32>
  return %l, %g, %r : tensor<4x16xf32>, tensor<4x16xf32>, tensor<2x2x16xf32>
}

// -----

// Elementwise and data-movement ops follow their operands: a conv chain stays
// in f16 end to end, bias and batch-norm parameters are converted, and the
// two outputs each get one cast up.
// CHECK-LABEL: func.func @conv_chain
// CHECK: %[[C:.*]] = memopt.conv %{{.*}}, %{{.*}}, %{{.*}} {{.*}}: (tensor<1x3x8x8xf16>, tensor<4x3x3x3xf16>, tensor<4xf16>) -> tensor<1x4x6x6xf16>
// CHECK: %[[B:.*]] = memopt.batch_normalization %[[C]], {{.*}} : (tensor<1x4x6x6xf16>, tensor<4xf16>, tensor<4xf16>, tensor<4xf16>, tensor<4xf16>) -> tensor<1x4x6x6xf16>
// CHECK: %[[R:.*]] = memopt.relu %[[B]] : tensor<1x4x6x6xf16>
// CHECK: %[[P:.*]] = memopt.max_pool %[[R]] {{.*}} -> tensor<1x4x3x3xf16>
// CHECK: %[[F:.*]] = memopt.flatten %[[P]] {{.*}} -> tensor<1x36xf16>
// CHECK-DAG: memopt.cast %[[F]] : (tensor<1x36xf16>) -> tensor<1x36xf32>
// CHECK-DAG: memopt.cast %[[R]] : (tensor<1x4x6x6xf16>) -> tensor<1x4x6x6xf32>
// REPORT: memopt-mixed-precision @conv_chain: f16: 5 ops in f16, 0 in f32, 3 casts, 0 results stored in f32
func.func @conv_chain(%x: tensor<1x3x8x8xf32>) -> (tensor<1x36xf32>, tensor<1x4x6x6xf32>) {
  %w = memopt.constant dense<0.1> : tensor<4x3x3x3xf32>
  %b = memopt.constant dense<0.0> : tensor<4xf32>
  %one = memopt.constant dense<1.0> : tensor<4xf32>
  %c = memopt.conv %x, %w, %b {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32>
  %n = memopt.batch_normalization %c, %one, %b, %b, %one : (tensor<1x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32>
  %r = memopt.relu %n : tensor<1x4x6x6xf32>
  %p = memopt.max_pool %r {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x4x6x6xf32>) -> tensor<1x4x3x3xf32>
  %f = memopt.flatten %p : (tensor<1x4x3x3xf32>) -> tensor<1x36xf32>
  return %f, %r : tensor<1x36xf32>, tensor<1x4x6x6xf32>
}

// -----

// Fused attention is compute-bound: Q, K, V and the additive mask run in f16,
// the mask's -3.4e38 (HuggingFace's finfo.min) clamped to -65504.
// CHECK-LABEL: func.func @attention_low
// CHECK: %[[MASK:.*]] = memopt.constant dense<[{{\[}}[0.000000e+00, -6.550400e+04]]]> : tensor<1x1x2xf16>
// CHECK: memopt.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[MASK]] {scale = 5.000000e-01 : f32} : (tensor<1x2x4xf16>, tensor<1x2x4xf16>, tensor<1x2x4xf16>, tensor<1x1x2xf16>) -> tensor<1x2x4xf16>
func.func @attention_low(%q: tensor<1x2x4xf32>, %k: tensor<1x2x4xf32>, %v: tensor<1x2x4xf32>) -> tensor<1x2x4xf32> {
  // expected-warning @+1 {{'constant': 1 value(s) beyond the f16 range clamped to +-65504}}
  %mask = memopt.constant dense<[[[0.0, -3.40282347e+38]]]> : tensor<1x1x2xf32>
  %a = memopt.attention %q, %k, %v, %mask {scale = 0.5 : f32} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x1x2xf32>) -> tensor<1x2x4xf32>
  return %a : tensor<1x2x4xf32>
}

// -----

// An f32 island (HuggingFace GPT-2's tanh GELU): pow's result would overflow
// f16 above |x| = 40, so pow runs in f32 and holds its consumers (mul, add)
// in f32 too, with the constants they read kept f32; tanh's result is
// bounded, so it is cast down once and the rest runs in f16. %h is cast up
// once although two f32 ops read it.
// CHECK-LABEL: func.func @gelu_tanh_island
// CHECK-DAG: %[[HALF:.*]] = memopt.constant dense<5.000000e-01> : tensor<f16>
// CHECK-DAG: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f16>
// CHECK-DAG: %[[THREE:.*]] = memopt.constant dense<3.000000e+00> : tensor<f32>
// CHECK-DAG: %[[K:.*]] = memopt.constant dense<4.471500e-02> : tensor<f32>
// CHECK: %[[H:.*]] = memopt.gemm {{.*}} -> tensor<4x16xf16>
// CHECK: %[[H32:.*]] = memopt.cast %[[H]] : (tensor<4x16xf16>) -> tensor<4x16xf32>
// CHECK-NEXT: %[[P:.*]] = memopt.pow %[[H32]], %[[THREE]] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
// CHECK-NEXT: %[[PK:.*]] = memopt.mul %[[P]], %[[K]] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
// CHECK-NEXT: %[[S:.*]] = memopt.add %[[H32]], %[[PK]] : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: %[[T:.*]] = memopt.tanh %[[S]] : tensor<4x16xf32>
// CHECK-NEXT: %[[T16:.*]] = memopt.cast %[[T]] : (tensor<4x16xf32>) -> tensor<4x16xf16>
// CHECK-NEXT: %[[T1:.*]] = memopt.add %[[T16]], %[[ONE]] : (tensor<4x16xf16>, tensor<f16>) -> tensor<4x16xf16>
// CHECK-NEXT: %[[HH:.*]] = memopt.mul %[[H]], %[[HALF]] : (tensor<4x16xf16>, tensor<f16>) -> tensor<4x16xf16>
// CHECK-NEXT: %[[G:.*]] = memopt.mul %[[HH]], %[[T1]] : (tensor<4x16xf16>, tensor<4x16xf16>) -> tensor<4x16xf16>
// CHECK-NEXT: %[[Y:.*]] = memopt.matmul %[[G]], %{{.*}} : (tensor<4x16xf16>, tensor<16x8xf16>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[Y]]
// REPORT: memopt-mixed-precision @gelu_tanh_island: f16: 4 ops in f16, 5 in f32, 3 casts, 1 results stored in f32; weights 1040 -> 524 bytes
func.func @gelu_tanh_island(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = memopt.constant dense<0.25> : tensor<8x16xf32>
  %w2 = memopt.constant dense<0.25> : tensor<16x8xf32>
  %half = memopt.constant dense<0.5> : tensor<f32>
  %one = memopt.constant dense<1.0> : tensor<f32>
  %three = memopt.constant dense<3.0> : tensor<f32>
  %k = memopt.constant dense<0.044715> : tensor<f32>
  %h = memopt.gemm %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %p = memopt.pow %h, %three : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %pk = memopt.mul %p, %k : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %s = memopt.add %h, %pk : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %t = memopt.tanh %s : tensor<4x16xf32>
  %t1 = memopt.add %t, %one : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %hh = memopt.mul %h, %half : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %g = memopt.mul %hh, %t1 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = memopt.matmul %g, %w2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A decomposed softmax: exp and the sum stay f32 (the sum of exps overflows
// f16), the division promotes to f32 and the result leaves in f32 without a
// cast. The fused softmax is bounded and runs in f16.
// CHECK-LABEL: func.func @float32_ops
// CHECK: %[[E:.*]] = memopt.exp %{{.*}} : tensor<2x64xf32>
// CHECK-NEXT: %[[S:.*]] = memopt.reduce_sum %[[E]] {{.*}} : (tensor<2x64xf32>) -> tensor<2x1xf32>
// CHECK-NEXT: %[[D:.*]] = memopt.div %[[E]], %[[S]] : (tensor<2x64xf32>, tensor<2x1xf32>) -> tensor<2x64xf32>
// CHECK-NEXT: %[[L:.*]] = memopt.cast %{{.*}} : (tensor<2x64xf32>) -> tensor<2x64xf16>
// CHECK-NEXT: %[[F:.*]] = memopt.softmax %[[L]] {{.*}} : (tensor<2x64xf16>) -> tensor<2x64xf16>
// CHECK-NEXT: %[[F32:.*]] = memopt.cast %[[F]] : (tensor<2x64xf16>) -> tensor<2x64xf32>
// CHECK-NEXT: return %[[D]], %[[F32]]
func.func @float32_ops(%x: tensor<2x64xf32>) -> (tensor<2x64xf32>, tensor<2x64xf32>) {
  %e = memopt.exp %x : tensor<2x64xf32>
  %s = memopt.reduce_sum %e {axes = array<i64: 1>} : (tensor<2x64xf32>) -> tensor<2x1xf32>
  %d = memopt.div %e, %s : (tensor<2x64xf32>, tensor<2x1xf32>) -> tensor<2x64xf32>
  %f = memopt.softmax %x {axis = 1 : i64} : (tensor<2x64xf32>) -> tensor<2x64xf32>
  return %d, %f : tensor<2x64xf32>, tensor<2x64xf32>
}

// -----

// A running sum grows like a sum: it takes the f16 matmul's result back in
// f32 and stays f32; an integer running sum (position ids) is untouched.
// CHECK-LABEL: func.func @cum_sum_float32
// CHECK: %[[M:.*]] = memopt.matmul %{{.*}} -> tensor<4x8xf16>
// CHECK-NEXT: %[[M32:.*]] = memopt.cast %[[M]] : (tensor<4x8xf16>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[C:.*]] = memopt.cum_sum %[[M32]] {axis = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[I:.*]] = memopt.cum_sum %arg1 {axis = 0 : i64} : (tensor<4xi64>) -> tensor<4xi64>
// CHECK-NEXT: return %[[C]], %[[I]]
func.func @cum_sum_float32(%x: tensor<4x8xf32>, %ids: tensor<4xi64>) -> (tensor<4x8xf32>, tensor<4xi64>) {
  %w = memopt.constant dense<0.5> : tensor<8x8xf32>
  %m = memopt.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %c = memopt.cum_sum %m {axis = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %i = memopt.cum_sum %ids {axis = 0 : i64} : (tensor<4xi64>) -> tensor<4xi64>
  return %c, %i : tensor<4x8xf32>, tensor<4xi64>
}

// -----

// Constants: converted once per type they are used in (%b feeds an f16 add
// and an f32 mul); finite values beyond f16 clamp to +-65504 with a warning,
// a non-zero value that would round to zero becomes the smallest subnormal,
// infinities stay. The original f32 constant survives only while used.
// CHECK-LABEL: func.func @constant_conversion
// CHECK-DAG: %[[B32:.*]] = memopt.constant dense<[1.000000e+05, -1.000000e+05, 9.99999971E-10, 0xFF800000]> : tensor<4xf32>
// CHECK-DAG: %[[B16:.*]] = memopt.constant dense<[6.550400e+04, -6.550400e+04, 5.960460e-08, 0xFC00]> : tensor<4xf16>
// CHECK-NOT: tensor<2x4xf32>
// CHECK: memopt.add %{{.*}}, %[[B16]] : (tensor<4x4xf16>, tensor<4xf16>) -> tensor<4x4xf16>
// CHECK: memopt.mul %{{.*}}, %[[B32]] : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
// BF16-LABEL: func.func @constant_conversion
// BF16-DAG: memopt.constant dense<[9.984000e+04, -9.984000e+04, 9.968060e-10, 0xFF80]> : tensor<4xbf16>
// REPORT: memopt-mixed-precision @constant_conversion: f16: 3 ops in f16, 2 in f32, 2 casts, 0 results stored in f32; weights 48 -> 40 bytes (2 constants converted, 2 values clamped, 1 raised from zero)
func.func @constant_conversion(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  // expected-warning @+1 {{'constant': 2 value(s) beyond the f16 range clamped to +-65504}}
  %b = memopt.constant dense<[1.0e+05, -1.0e+05, 1.0e-09, 0xFF800000]> : tensor<4xf32>
  %w = memopt.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<2x4xf32>
  %m = memopt.matmul %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %a = memopt.add %m, %b : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  %e = memopt.exp %x : tensor<4x4xf32>
  %p = memopt.mul %e, %b : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  %g = memopt.gemm %w, %a {transB = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %a, %p : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Weights stored as resource blobs are not copied: the constant records the
// cast over the same blob (#memopt.converted), and the weights file is
// written converted (1.0, 2.0, 3.0, 4.0 become f16 0x3C00 0x4000 0x4200
// 0x4400: unittests/Conversion/WeightConversionTest.cpp). Only the f32 blob
// is printed.
// CHECK-LABEL: func.func @resource_weight
// CHECK: memopt.constant #memopt.converted<dense_resource<w> : tensor<2x2xf32>> : tensor<2x2xf16>
// CHECK-NOT: w_f16
// CHECK: w: "0x040000000000803F000000400000404000008040"
// CHECK-NOT: w_f16
// BF16-LABEL: func.func @resource_weight
// BF16: memopt.constant #memopt.converted<dense_resource<w> : tensor<2x2xf32>> : tensor<2x2xbf16>
// BF16-NOT: w_bf16
func.func @resource_weight(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %w = memopt.constant dense_resource<w> : tensor<2x2xf32>
  %m = memopt.matmul %x, %w : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %m : tensor<2x2xf32>
}

{-#
  dialect_resources: {
    builtin: {
      w: "0x040000000000803F000000400000404000008040"
    }
  }
#-}

// -----

// Integer and bool values are untouched; comparisons and where follow their
// float operands; an integer cast to f32 narrows for free (it is cast
// straight to f16), and range keeps its f32 positions.
// CHECK-LABEL: func.func @integers_untouched
// CHECK-SAME: (%[[IDS:.*]]: tensor<4xi64>)
// CHECK: %[[G:.*]] = memopt.gather %{{.*}}, %[[IDS]] : (tensor<16x8xf16>, tensor<4xi64>) -> tensor<4x8xf16>
// CHECK: %[[LT:.*]] = memopt.less %[[G]], %{{.*}} : (tensor<4x8xf16>, tensor<f16>) -> tensor<4x8xi1>
// CHECK-NOT: tensor<4x8xf32>
// CHECK: %[[CF:.*]] = memopt.cast %[[LT]] : (tensor<4x8xi1>) -> tensor<4x8xf16>
// CHECK-NOT: tensor<4x8xf32>
// CHECK: memopt.where %[[LT]], %[[G]], %[[CF]] : (tensor<4x8xi1>, tensor<4x8xf16>, tensor<4x8xf16>) -> tensor<4x8xf16>
// CHECK: memopt.add %[[IDS]], %[[IDS]] : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
// CHECK: memopt.range %{{.*}}, %{{.*}}, %{{.*}} : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<4xf32>
func.func @integers_untouched(%ids: tensor<4xi64>) -> (tensor<4x8xf32>, tensor<4xi64>, tensor<4xf32>) {
  %table = memopt.constant dense<0.5> : tensor<16x8xf32>
  %zero = memopt.constant dense<0.0> : tensor<f32>
  %one = memopt.constant dense<1.0> : tensor<f32>
  %four = memopt.constant dense<4.0> : tensor<f32>
  %g = memopt.gather %table, %ids {axis = 0 : i64} : (tensor<16x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
  %lt = memopt.less %g, %zero : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xi1>
  %cf = memopt.cast %lt : (tensor<4x8xi1>) -> tensor<4x8xf32>
  %w = memopt.where %lt, %g, %cf : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %i = memopt.add %ids, %ids : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %r = memopt.range %zero, %four, %one : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<4xf32>
  return %w, %i, %r : tensor<4x8xf32>, tensor<4xi64>, tensor<4xf32>
}

// -----

// Other float types are left alone: an f64 op, and an f16 value the model
// already had, which an f16 compilation treats as low already.
// CHECK-LABEL: func.func @other_float_types
// CHECK: memopt.mul %{{.*}}, %{{.*}} : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>
// CHECK: %[[H:.*]] = memopt.relu %{{.*}} : tensor<4xf16>
// CHECK: memopt.add %[[H]], %{{.*}} : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
func.func @other_float_types(%d: tensor<4xf64>, %h: tensor<4xf16>, %x: tensor<4xf32>) -> (tensor<4xf64>, tensor<4xf32>) {
  %m = memopt.mul %d, %d : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>
  %r = memopt.relu %h : tensor<4xf16>
  %x16 = memopt.cast %x : (tensor<4xf32>) -> tensor<4xf16>
  %a = memopt.add %r, %x16 : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  %y = memopt.cast %a : (tensor<4xf16>) -> tensor<4xf32>
  return %m, %y : tensor<4xf64>, tensor<4xf32>
}
