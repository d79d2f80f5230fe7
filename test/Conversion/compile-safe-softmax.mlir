// RUN: memopt-compile %s --emit source -o %t --quiet
// RUN: FileCheck %s --check-prefix=FUSED < %t.cpp
// RUN: memopt-compile %s --emit source -o %t.unfused --quiet --no-fuse-attention
// RUN: FileCheck %s --check-prefix=UNFUSED < %t.unfused.cpp

// PyTorch's safe softmax (Where(IsNaN(P), 0, P)) fuses into one attention
// call with AttentionParams::safeSoftmax; unfused, the IsNaN lowers to the
// runtime's isNaN (a bool tensor) and the Where to where.
// FUSED: params.keyTransposed = true;
// FUSED-NEXT: params.safeSoftmax = true;
// FUSED-NEXT: attention(ctx, "qk",
// FUSED-NOT: isNaN(
// UNFUSED: softmax(ctx, "softmax", 2,
// UNFUSED: isNaN(ctx, "nan", [[P:t[0-9]+]], [[N:t[0-9]+]]);
// UNFUSED: where(ctx, "safe", [[N]], {{t[0-9]+}}, [[P]],
func.func @main(%q: tensor<2x64x16xf32>, %kt: tensor<2x16x64xf32>, %v: tensor<2x64x16xf32>, %mask: tensor<2x1x64xi1>) -> tensor<2x64x16xf32> {
  %zero = memopt.constant dense<0.0> : tensor<f32>
  %ninf = memopt.constant dense<0xFF800000> : tensor<f32>
  %bias = memopt.where %mask, %zero, %ninf : (tensor<2x1x64xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x64xf32> loc("mask")
  %s = memopt.matmul %q, %kt : (tensor<2x64x16xf32>, tensor<2x16x64xf32>) -> tensor<2x64x64xf32> loc("qk")
  %a = memopt.add %s, %bias : (tensor<2x64x64xf32>, tensor<2x1x64xf32>) -> tensor<2x64x64xf32> loc("add")
  %p = memopt.softmax %a : (tensor<2x64x64xf32>) -> tensor<2x64x64xf32> loc("softmax")
  %n = memopt.is_nan %p : (tensor<2x64x64xf32>) -> tensor<2x64x64xi1> loc("nan")
  %z = memopt.where %n, %zero, %p : (tensor<2x64x64xi1>, tensor<f32>, tensor<2x64x64xf32>) -> tensor<2x64x64xf32> loc("safe")
  %y = memopt.matmul %z, %v : (tensor<2x64x64xf32>, tensor<2x64x16xf32>) -> tensor<2x64x16xf32> loc("pv")
  return %y : tensor<2x64x16xf32>
}
