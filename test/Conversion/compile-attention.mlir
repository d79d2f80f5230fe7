// RUN: memopt-compile %s --emit source -o %t --quiet
// RUN: FileCheck %s --check-prefix=FUSED < %t.cpp
// RUN: memopt-compile %s --emit source -o %t.unfused --quiet --no-fuse-attention
// RUN: FileCheck %s --check-prefix=UNFUSED < %t.unfused.cpp
// RUN: memopt-compile %s --emit plan -o %t.plan --no-fuse-attention | FileCheck %s --check-prefix=LOG-OFF
// RUN: memopt-compile %s --emit plan -o %t.plan | FileCheck %s --check-prefix=LOG

// memopt-compile fuses attention by default, after canonicalize and before
// scheduling: the program calls `attention` once and never materializes the
// [2, 64, 64] scores (the unfused arena holds them and K^T: 32 KiB + 8 KiB;
// the fused arena only the 8 KiB output); --no-fuse-attention keeps
// MatMul -> Softmax -> MatMul.
// FUSED: // Arena: 8192 bytes; weight region: 0 bytes.
// FUSED: void run(
// FUSED-NOT: softmax(
// FUSED: params.scale = 0.25f;
// FUSED-NEXT: params.causal = false;
// FUSED-NEXT: params.keyTransposed = false;
// FUSED-NEXT: attention(ctx, "qk",
// FUSED-NOT: matmul(
// UNFUSED: // Arena: 40960 bytes; weight region: 4 bytes.
// UNFUSED: matmul(ctx, "qk"
// UNFUSED: softmax(ctx, "softmax"
// UNFUSED: matmul(ctx, "pv"
// LOG: [fuse-attention] 1 memopt.attention ops; 1 of 1 attention sites fused
// LOG-NEXT: 'softmax': fused, mask none
// LOG-OFF-NOT: [fuse-attention]
// LOG-OFF: [memory]
func.func @main(%q: tensor<2x64x16xf32>, %k: tensor<2x64x16xf32>, %v: tensor<2x64x16xf32>) -> tensor<2x64x16xf32> {
  %c = memopt.constant dense<4.0> : tensor<f32>
  %kt = memopt.transpose %k {perm = array<i64: 0, 2, 1>} : (tensor<2x64x16xf32>) -> tensor<2x16x64xf32> loc("kt")
  %s = memopt.matmul %q, %kt : (tensor<2x64x16xf32>, tensor<2x16x64xf32>) -> tensor<2x64x64xf32> loc("qk")
  %d = memopt.div %s, %c : (tensor<2x64x64xf32>, tensor<f32>) -> tensor<2x64x64xf32> loc("div")
  %p = memopt.softmax %d : (tensor<2x64x64xf32>) -> tensor<2x64x64xf32> loc("softmax")
  %y = memopt.matmul %p, %v : (tensor<2x64x64xf32>, tensor<2x64x16xf32>) -> tensor<2x64x16xf32> loc("pv")
  return %y : tensor<2x64x16xf32>
}
