// RUN: memopt-opt %s -split-input-file --memopt-attention-engine="target=cuda report=true" | FileCheck %s
// RUN: memopt-opt %s -split-input-file --memopt-attention-engine="target=host" | FileCheck %s --check-prefix=HOST
// RUN: not memopt-opt %s -split-input-file --memopt-attention-engine="target=tpu" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD

// On the CUDA target each attention cuDNN's fused SDPA can run gets a bound
// of the workspace it needs there (include/memopt/Runtime/Workspace.h); on
// the host nothing changes.
// HOST-NOT: memopt.cudnn_workspace
// BAD: memopt-attention-engine: target 'tpu' is not cuda or host

// GPT-2's causal forward in f16: cuDNN's own workspace (256 bytes stated by
// cuDNN 9.19) within the 64 KiB bound, nothing else.
// CHECK: memopt-attention-engine @gpt2_forward: 1 of 1 attention calls reserve cuDNN's SDPA workspace (largest 65536 bytes)
// CHECK-LABEL: func.func @gpt2_forward
// CHECK: memopt.attention {{.*}}memopt.cudnn_workspace = 65536 : i64
func.func @gpt2_forward(%q: tensor<8x12x512x64xf16>, %k: tensor<8x12x512x64xf16>, %v: tensor<8x12x512x64xf16>) -> tensor<8x12x512x64xf16> {
  %y = memopt.attention %q, %k, %v {scale = 0.125 : f32, causal = true} : (tensor<8x12x512x64xf16>, tensor<8x12x512x64xf16>, tensor<8x12x512x64xf16>) -> tensor<8x12x512x64xf16>
  return %y : tensor<8x12x512x64xf16>
}

// -----

// With its statistics and K stored [D, Sk]: 64 KiB, the f32 log-sum-exp of
// 8 x 12 x 512 rows (196608 bytes) and K transposed (6 MiB).
// CHECK-LABEL: func.func @statistics_key_transposed
// CHECK: memopt.attention {{.*}}memopt.cudnn_workspace = 6553600 : i64
func.func @statistics_key_transposed(%q: tensor<8x12x512x64xbf16>, %k: tensor<8x12x64x512xbf16>, %v: tensor<8x12x512x64xbf16>) -> (tensor<8x12x512x64xbf16>, tensor<8x12x512x2xf32>) {
  %y, %lse = memopt.attention %q, %k, %v {scale = 0.125 : f32, key_transposed = true, return_lse = true} : (tensor<8x12x512x64xbf16>, tensor<8x12x64x512xbf16>, tensor<8x12x512x64xbf16>) -> (tensor<8x12x512x64xbf16>, tensor<8x12x512x2xf32>)
  return %y, %lse : tensor<8x12x512x64xbf16>, tensor<8x12x512x2xf32>
}

// -----

// GPT-2's backward: the f32 dQ accumulator (12 MiB) and softmax sum of
// cuDNN, 64 KiB, then the f32 log-sum-exp: 12.4 MiB (cuDNN stated 12.2 MiB
// for itself on an H200).
// CHECK-LABEL: func.func @gpt2_backward
// CHECK: memopt.attention_grad {{.*}}memopt.cudnn_workspace = 13041664 : i64
func.func @gpt2_backward(%q: tensor<8x12x512x64xf16>, %k: tensor<8x12x512x64xf16>, %v: tensor<8x12x512x64xf16>, %o: tensor<8x12x512x64xf16>, %do: tensor<8x12x512x64xf16>, %lse: tensor<8x12x512x2xf32>) -> (tensor<8x12x512x64xf16>, tensor<8x12x512x64xf16>, tensor<8x12x512x64xf16>) {
  %dq, %dk, %dv = memopt.attention_grad %q, %k, %v, %o, %do, %lse {scale = 0.125 : f32, causal = true} : (tensor<8x12x512x64xf16>, tensor<8x12x512x64xf16>, tensor<8x12x512x64xf16>, tensor<8x12x512x64xf16>, tensor<8x12x512x64xf16>, tensor<8x12x512x2xf32>) -> (tensor<8x12x512x64xf16>, tensor<8x12x512x64xf16>, tensor<8x12x512x64xf16>)
  return %dq, %dk, %dv : tensor<8x12x512x64xf16>, tensor<8x12x512x64xf16>, tensor<8x12x512x64xf16>
}

// -----

// Grouped-query heads (Llama: 4 x 32 query heads over 8 K / V heads, the
// fusion's [B, Hkv, n] view): cuDNN also computes dK and dV per query head
// in f16 before their group sum: 65.1 MiB (cuDNN stated 64.5 MiB).
// CHECK-LABEL: func.func @grouped_backward
// CHECK: memopt.attention_grad {{.*}}memopt.cudnn_workspace = 68222976 : i64
func.func @grouped_backward(%q: tensor<4x8x4x1024x64xf16>, %k: tensor<4x8x1x1024x64xf16>, %v: tensor<4x8x1x1024x64xf16>, %o: tensor<4x8x4x1024x64xf16>, %do: tensor<4x8x4x1024x64xf16>, %lse: tensor<4x8x4x1024x2xf32>) -> (tensor<4x8x4x1024x64xf16>, tensor<4x8x4x1024x64xf16>, tensor<4x8x4x1024x64xf16>) {
  %dq, %dk, %dv = memopt.attention_grad %q, %k, %v, %o, %do, %lse {scale = 0.125 : f32, causal = true} : (tensor<4x8x4x1024x64xf16>, tensor<4x8x1x1024x64xf16>, tensor<4x8x1x1024x64xf16>, tensor<4x8x4x1024x64xf16>, tensor<4x8x4x1024x64xf16>, tensor<4x8x4x1024x2xf32>) -> (tensor<4x8x4x1024x64xf16>, tensor<4x8x4x1024x64xf16>, tensor<4x8x4x1024x64xf16>)
  return %dq, %dk, %dv : tensor<4x8x4x1024x64xf16>, tensor<4x8x4x1024x64xf16>, tensor<4x8x4x1024x64xf16>
}

// -----

// What cuDNN's SDPA does not run gets nothing: f32, a head size that is not
// a multiple of 8, a bias over 197 keys (ViT: bias strides must be
// multiples of 8 elements), Q broadcast over the batch, and K stored
// [D, Sk] with grouped heads in the backward. A bias over 512 keys is fine.
// CHECK: memopt-attention-engine @refused: 1 of 6 attention calls reserve cuDNN's SDPA workspace (largest 65536 bytes)
// CHECK-LABEL: func.func @refused
// CHECK: memopt.attention
// CHECK-NOT: memopt.cudnn_workspace
// CHECK-SAME: -> tensor<2x3x16x64xf32>
// CHECK: memopt.attention
// CHECK-NOT: memopt.cudnn_workspace
// CHECK-SAME: -> tensor<2x3x16x36xf16>
// CHECK: memopt.attention
// CHECK-NOT: memopt.cudnn_workspace
// CHECK-SAME: -> tensor<2x3x197x64xf16>
// CHECK: memopt.attention {{.*}}memopt.cudnn_workspace = 65536 : i64
// CHECK-SAME: -> tensor<2x3x512x64xf16>
// CHECK: memopt.attention
// CHECK-NOT: memopt.cudnn_workspace
// CHECK-SAME: -> tensor<2x3x16x64xf16>
// CHECK: memopt.attention_grad
// CHECK-NOT: memopt.cudnn_workspace
// CHECK: return
func.func @refused(%q32: tensor<2x3x16x64xf32>, %q36: tensor<2x3x16x36xf16>, %q: tensor<2x3x197x64xf16>, %b: tensor<2x1x197x197xf16>, %q5: tensor<2x3x512x64xf16>, %b5: tensor<2x1x512x512xf16>, %qb: tensor<1x3x16x64xf16>, %kb: tensor<2x3x16x64xf16>, %gq: tensor<2x2x2x16x64xf16>, %gk: tensor<2x2x1x64x16xf16>, %gv: tensor<2x2x1x16x64xf16>, %gdo: tensor<2x2x2x16x64xf16>, %glse: tensor<2x2x2x16x2xf32>) -> (tensor<2x3x16x64xf32>, tensor<2x3x16x36xf16>, tensor<2x3x197x64xf16>, tensor<2x3x512x64xf16>, tensor<2x3x16x64xf16>, tensor<2x2x2x64x16xf16>) {
  %y32 = memopt.attention %q32, %q32, %q32 {scale = 0.125 : f32} : (tensor<2x3x16x64xf32>, tensor<2x3x16x64xf32>, tensor<2x3x16x64xf32>) -> tensor<2x3x16x64xf32>
  %y36 = memopt.attention %q36, %q36, %q36 {scale = 0.125 : f32} : (tensor<2x3x16x36xf16>, tensor<2x3x16x36xf16>, tensor<2x3x16x36xf16>) -> tensor<2x3x16x36xf16>
  %yb = memopt.attention %q, %q, %q, %b {scale = 0.125 : f32} : (tensor<2x3x197x64xf16>, tensor<2x3x197x64xf16>, tensor<2x3x197x64xf16>, tensor<2x1x197x197xf16>) -> tensor<2x3x197x64xf16>
  %y5 = memopt.attention %q5, %q5, %q5, %b5 {scale = 0.125 : f32} : (tensor<2x3x512x64xf16>, tensor<2x3x512x64xf16>, tensor<2x3x512x64xf16>, tensor<2x1x512x512xf16>) -> tensor<2x3x512x64xf16>
  %yq = memopt.attention %qb, %kb, %kb {scale = 0.125 : f32} : (tensor<1x3x16x64xf16>, tensor<2x3x16x64xf16>, tensor<2x3x16x64xf16>) -> tensor<2x3x16x64xf16>
  %dq, %dk, %dv = memopt.attention_grad %gq, %gk, %gv, %gdo, %gdo, %glse {scale = 0.125 : f32, key_transposed = true} : (tensor<2x2x2x16x64xf16>, tensor<2x2x1x64x16xf16>, tensor<2x2x1x16x64xf16>, tensor<2x2x2x16x64xf16>, tensor<2x2x2x16x64xf16>, tensor<2x2x2x16x2xf32>) -> (tensor<2x2x2x16x64xf16>, tensor<2x2x2x64x16xf16>, tensor<2x2x2x16x64xf16>)
  return %y32, %y36, %yb, %y5, %yq, %dk : tensor<2x3x16x64xf32>, tensor<2x3x16x36xf16>, tensor<2x3x197x64xf16>, tensor<2x3x512x64xf16>, tensor<2x3x16x64xf16>, tensor<2x2x2x64x16xf16>
}
