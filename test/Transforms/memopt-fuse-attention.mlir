// RUN: memopt-opt %s -split-input-file --memopt-fuse-attention | FileCheck %s
// RUN: memopt-opt %s -split-input-file --mlir-disable-threading --memopt-fuse-attention=report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: memopt-opt %s -split-input-file --memopt-fuse-attention=max-head-size=256 | FileCheck %s --check-prefix=WIDE

// torchscript BERT: K^T by Transpose(perm [0, 2, 3, 1]) of K [B, S, H, D]
// becomes the same transpose with its last two axes swapped (perm
// [0, 2, 1, 3]: K as [Sk, D], what cuDNN's SDPA reads, for the same bytes
// moved), Div by sqrt(d) becomes the scale.
// CHECK-LABEL: func.func @bert_torchscript
// CHECK-SAME: (%[[Q:.*]]: tensor<1x4x8x16xf32>, %[[K:.*]]: tensor<1x8x4x16xf32>, %[[V:.*]]: tensor<1x4x8x16xf32>)
// CHECK: %[[KEY:.*]] = memopt.transpose %[[K]] {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x4x16xf32>) -> tensor<1x4x8x16xf32>
// CHECK-NEXT: %[[Y:.*]] = memopt.attention %[[Q]], %[[KEY]], %[[V]] {scale = 2.500000e-01 : f32} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
// CHECK-NEXT: return %[[Y]]
// REPORT: memopt-fuse-attention @bert_torchscript: 1 attentions fused (0 causal, 0 safe softmax), 2048 bytes of scores and probabilities removed
func.func @bert_torchscript(%q: tensor<1x4x8x16xf32>, %k: tensor<1x8x4x16xf32>, %v: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %c = memopt.constant dense<4.0> : tensor<f32>
  %kt = memopt.transpose %k {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x8x4x16xf32>) -> tensor<1x4x16x8xf32>
  %s = memopt.matmul %q, %kt : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %d = memopt.div %s, %c : (tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %p = memopt.softmax %d : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %y = memopt.matmul %p, %v : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %y : tensor<1x4x8x16xf32>
}

// -----

// GPT-2 (torchscript): the same K^T under a causal Where; K as [Sk, D].
// CHECK-LABEL: func.func @gpt2_key_before_transpose
// CHECK: %[[KEY:.*]] = memopt.transpose %arg1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x3x16xf16>) -> tensor<2x3x8x16xf16>
// CHECK-NEXT: memopt.attention %arg0, %[[KEY]], %arg2 {causal = true, scale = 2.500000e-01 : f32} : (tensor<2x3x8x16xf16>, tensor<2x3x8x16xf16>, tensor<2x3x8x16xf16>) -> tensor<2x3x8x16xf16>
func.func @gpt2_key_before_transpose(%q: tensor<2x3x8x16xf16>, %k: tensor<2x8x3x16xf16>, %v: tensor<2x3x8x16xf16>) -> tensor<2x3x8x16xf16> {
  %c = memopt.constant dense<4.0> : tensor<f16>
  %mask = memopt.constant dense<[[true, false, false, false, false, false, false, false], [true, true, false, false, false, false, false, false], [true, true, true, false, false, false, false, false], [true, true, true, true, false, false, false, false], [true, true, true, true, true, false, false, false], [true, true, true, true, true, true, false, false], [true, true, true, true, true, true, true, false], [true, true, true, true, true, true, true, true]]> : tensor<8x8xi1>
  %fill = memopt.constant dense<0xFC00> : tensor<f16>
  %kt = memopt.transpose %k {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x8x3x16xf16>) -> tensor<2x3x16x8xf16>
  %s = memopt.matmul %q, %kt : (tensor<2x3x8x16xf16>, tensor<2x3x16x8xf16>) -> tensor<2x3x8x8xf16>
  %d = memopt.div %s, %c : (tensor<2x3x8x8xf16>, tensor<f16>) -> tensor<2x3x8x8xf16>
  %m = memopt.where %mask, %d, %fill : (tensor<8x8xi1>, tensor<2x3x8x8xf16>, tensor<f16>) -> tensor<2x3x8x8xf16>
  %p = memopt.softmax %m : (tensor<2x3x8x8xf16>) -> tensor<2x3x8x8xf16>
  %y = memopt.matmul %p, %v : (tensor<2x3x8x8xf16>, tensor<2x3x8x16xf16>) -> tensor<2x3x8x16xf16>
  return %y : tensor<2x3x8x16xf16>
}

// -----

// K^T used elsewhere too (returned): the transpose is needed anyway, so the
// attention reads it as it is (key_transposed).
// CHECK-LABEL: func.func @key_transpose_kept
// CHECK: %[[KT:.*]] = memopt.transpose %arg1 {perm = array<i64: 0, 2, 3, 1>}
// CHECK: memopt.attention %arg0, %[[KT]], %arg2 {key_transposed = true, scale = 2.500000e-01 : f32}
func.func @key_transpose_kept(%q: tensor<1x4x8x16xf32>, %k: tensor<1x8x4x16xf32>, %v: tensor<1x4x8x16xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) {
  %c = memopt.constant dense<4.0> : tensor<f32>
  %kt = memopt.transpose %k {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x8x4x16xf32>) -> tensor<1x4x16x8xf32>
  %s = memopt.matmul %q, %kt : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %d = memopt.div %s, %c : (tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %p = memopt.softmax %d : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %y = memopt.matmul %p, %v : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %y, %kt : tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>
}

// -----

// GPT-2 (both exporters): Where(constant causal mask, -inf, scores). The
// mask is exactly j > i, so it becomes `causal` and no bias is left.
// CHECK-LABEL: func.func @gpt2_causal_where
// CHECK-NOT: memopt.where
// CHECK: memopt.attention %arg0, %arg1, %arg2 {causal = true, key_transposed = true, scale = 1.250000e-01 : f32}
// CHECK-NOT: memopt.softmax
// REPORT: memopt-fuse-attention @gpt2_causal_where: 1 attentions fused (1 causal, 0 safe softmax)
func.func @gpt2_causal_where(%q: tensor<2x3x4x8xf32>, %kt: tensor<2x3x8x4xf32>, %v: tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32> {
  %c = memopt.constant dense<8.0> : tensor<f32>
  %mask = memopt.constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
  %ninf = memopt.constant dense<0xFF800000> : tensor<f32>
  %s = memopt.matmul %q, %kt : (tensor<2x3x4x8xf32>, tensor<2x3x8x4xf32>) -> tensor<2x3x4x4xf32>
  %d = memopt.div %s, %c : (tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  %w = memopt.where %mask, %ninf, %d : (tensor<4x4xi1>, tensor<f32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %p = memopt.softmax %w : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %y = memopt.matmul %p, %v : (tensor<2x3x4x4xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  return %y : tensor<2x3x4x8xf32>
}

// -----

// A mask that is not causal (or not constant) becomes an additive bias
// Where(mask, fill, 0); with the scores in the X branch the mask keeps
// where true, so the bias is Where(mask, 0, fill).
// CHECK-LABEL: func.func @where_mask_input
// CHECK-SAME: %[[MASK:[^:]*]]: tensor<2x1x1x4xi1>
// CHECK-DAG: %[[FILL:.*]] = memopt.constant dense<-3.40282347E+38> : tensor<f32>
// CHECK-DAG: %[[ZERO:.*]] = memopt.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[BIAS:.*]] = memopt.where %[[MASK]], %[[ZERO]], %[[FILL]] : (tensor<2x1x1x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x1x4xf32>
// CHECK: memopt.attention %arg0, %arg1, %arg2, %[[BIAS]] {key_transposed = true, scale = 1.000000e+00 : f32}
func.func @where_mask_input(%q: tensor<2x3x4x8xf32>, %kt: tensor<2x3x8x4xf32>, %v: tensor<2x3x4x8xf32>, %mask: tensor<2x1x1x4xi1>) -> tensor<2x3x4x8xf32> {
  %fill = memopt.constant dense<-3.40282347E+38> : tensor<f32>
  %s = memopt.matmul %q, %kt : (tensor<2x3x4x8xf32>, tensor<2x3x8x4xf32>) -> tensor<2x3x4x4xf32>
  %w = memopt.where %mask, %s, %fill : (tensor<2x1x1x4xi1>, tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  %p = memopt.softmax %w {axis = 3 : i64} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %y = memopt.matmul %p, %v : (tensor<2x3x4x4xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  return %y : tensor<2x3x4x8xf32>
}

// -----

// HF (dynamo): Mul by a scalar, then Add of the folded mask constant. A
// causal pattern of 0 / finfo.min becomes `causal`; an all-zero mask (BERT
// without padding) is dropped.
// CHECK-LABEL: func.func @hf_additive_masks
// CHECK: %[[A:.*]] = memopt.attention %arg0, %arg1, %arg2 {causal = true, key_transposed = true, scale = 1.250000e-01 : f32}
// CHECK: %[[B:.*]] = memopt.attention %arg0, %arg1, %arg2 {key_transposed = true, scale = 1.250000e-01 : f32}
// CHECK-NOT: memopt.add %
// CHECK: return %[[A]], %[[B]]
func.func @hf_additive_masks(%q: tensor<1x2x3x8xf32>, %kt: tensor<1x2x8x3xf32>, %v: tensor<1x2x3x8xf32>) -> (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) {
  %c = memopt.constant dense<0.125> : tensor<f32>
  %causal = memopt.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]]]> : tensor<1x1x3x3xf32>
  %zeros = memopt.constant dense<0.0> : tensor<1x1x3x3xf32>
  %s = memopt.matmul %q, %kt : (tensor<1x2x3x8xf32>, tensor<1x2x8x3xf32>) -> tensor<1x2x3x3xf32>
  %m = memopt.mul %s, %c : (tensor<1x2x3x3xf32>, tensor<f32>) -> tensor<1x2x3x3xf32>
  %a = memopt.add %m, %causal : (tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x2x3x3xf32>
  %p = memopt.softmax %a : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %y = memopt.matmul %p, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x8xf32>) -> tensor<1x2x3x8xf32>
  %s2 = memopt.matmul %q, %kt : (tensor<1x2x3x8xf32>, tensor<1x2x8x3xf32>) -> tensor<1x2x3x3xf32>
  %m2 = memopt.mul %s2, %c : (tensor<1x2x3x3xf32>, tensor<f32>) -> tensor<1x2x3x3xf32>
  %a2 = memopt.add %zeros, %m2 : (tensor<1x1x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %p2 = memopt.softmax %a2 : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %y2 = memopt.matmul %p2, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x8xf32>) -> tensor<1x2x3x8xf32>
  return %y, %y2 : tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>
}

// -----

// dynamo ViT: Q and K^T each multiplied by d^-1/4 (a 1-element tensor)
// before the MatMul; both factors join the scale. A relative-position bias
// (swin) is any other additive term.
// CHECK-LABEL: func.func @vit_scaled_operands_and_bias
// CHECK-NOT: memopt.mul
// CHECK: memopt.attention %arg0, %arg1, %arg2, %arg3 {key_transposed = true, scale = 2.500000e-01 : f32}
func.func @vit_scaled_operands_and_bias(%q: tensor<1x2x5x16xf32>, %kt: tensor<1x2x16x5xf32>, %v: tensor<1x2x5x16xf32>, %relpos: tensor<2x5x5xf32>) -> tensor<1x2x5x16xf32> {
  %c = memopt.constant dense<0.5> : tensor<1xf32>
  %qs = memopt.mul %q, %c : (tensor<1x2x5x16xf32>, tensor<1xf32>) -> tensor<1x2x5x16xf32>
  %ks = memopt.mul %c, %kt : (tensor<1xf32>, tensor<1x2x16x5xf32>) -> tensor<1x2x16x5xf32>
  %s = memopt.matmul %qs, %ks : (tensor<1x2x5x16xf32>, tensor<1x2x16x5xf32>) -> tensor<1x2x5x5xf32>
  %a = memopt.add %s, %relpos : (tensor<1x2x5x5xf32>, tensor<2x5x5xf32>) -> tensor<1x2x5x5xf32>
  %p = memopt.softmax %a : (tensor<1x2x5x5xf32>) -> tensor<1x2x5x5xf32>
  %y = memopt.matmul %p, %v : (tensor<1x2x5x5xf32>, tensor<1x2x5x16xf32>) -> tensor<1x2x5x16xf32>
  return %y : tensor<1x2x5x16xf32>
}

// -----

// K^T = Transpose(K) over the last two axes: K itself is the operand and the
// transpose disappears.
// CHECK-LABEL: func.func @swin_transpose_last_two
// CHECK-NOT: memopt.transpose
// CHECK: memopt.attention %arg0, %arg1, %arg2 {scale = 0.176776692 : f32} : (tensor<4x3x7x32xf32>, tensor<4x3x7x32xf32>, tensor<4x3x7x32xf32>) -> tensor<4x3x7x32xf32>
func.func @swin_transpose_last_two(%q: tensor<4x3x7x32xf32>, %k: tensor<4x3x7x32xf32>, %v: tensor<4x3x7x32xf32>) -> tensor<4x3x7x32xf32> {
  %c = memopt.constant dense<0.176776695> : tensor<f32>
  %qs = memopt.mul %q, %c : (tensor<4x3x7x32xf32>, tensor<f32>) -> tensor<4x3x7x32xf32>
  %kt = memopt.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<4x3x7x32xf32>) -> tensor<4x3x32x7xf32>
  %s = memopt.matmul %qs, %kt : (tensor<4x3x7x32xf32>, tensor<4x3x32x7xf32>) -> tensor<4x3x7x7xf32>
  %p = memopt.softmax %s : (tensor<4x3x7x7xf32>) -> tensor<4x3x7x7xf32>
  %y = memopt.matmul %p, %v : (tensor<4x3x7x7xf32>, tensor<4x3x7x32xf32>) -> tensor<4x3x7x32xf32>
  return %y : tensor<4x3x7x32xf32>
}

// -----

// swin's shifted window: the relative-position bias is added to [4, 3, N, N]
// scores (4 = 2 images x 2 windows), the window mask in a [2, 2, 3, N, N]
// view. The attention runs in the 5-D view: Q, K and V are regrouped
// (views), the relative bias broadcasts there as it is, the two terms are
// summed into one bias, and the result is viewed back as [4, 3, N, D].
// CHECK-LABEL: func.func @swin_shifted_window
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<4x3x5x8xf32>, %[[K:[^:]*]]: tensor<4x3x5x8xf32>, %[[V:[^:]*]]: tensor<4x3x5x8xf32>, %[[REL:[^:]*]]: tensor<1x3x5x5xf32>, %[[WIN:[^:]*]]: tensor<1x2x1x5x5xf32>)
// CHECK-DAG: %[[BIAS:.*]] = memopt.add %[[REL]], %[[WIN]] : (tensor<1x3x5x5xf32>, tensor<1x2x1x5x5xf32>) -> tensor<1x2x3x5x5xf32>
// CHECK-DAG: %[[Q5:.*]] = memopt.reshape %[[Q]] : (tensor<4x3x5x8xf32>) -> tensor<2x2x3x5x8xf32>
// CHECK-DAG: %[[K5:.*]] = memopt.reshape %[[K]] : (tensor<4x3x5x8xf32>) -> tensor<2x2x3x5x8xf32>
// CHECK-DAG: %[[V5:.*]] = memopt.reshape %[[V]] : (tensor<4x3x5x8xf32>) -> tensor<2x2x3x5x8xf32>
// CHECK: %[[Y5:.*]] = memopt.attention %[[Q5]], %[[K5]], %[[V5]], %[[BIAS]] {scale = 5.000000e-01 : f32}
// CHECK: %[[Y:.*]] = memopt.reshape %[[Y5]] : (tensor<2x2x3x5x8xf32>) -> tensor<4x3x5x8xf32>
// CHECK: return %[[Y]]
func.func @swin_shifted_window(%q: tensor<4x3x5x8xf32>, %k: tensor<4x3x5x8xf32>, %v: tensor<4x3x5x8xf32>, %relpos: tensor<1x3x5x5xf32>, %winmask: tensor<1x2x1x5x5xf32>) -> tensor<4x3x5x8xf32> {
  %c = memopt.constant dense<0.5> : tensor<f32>
  %qs = memopt.mul %q, %c : (tensor<4x3x5x8xf32>, tensor<f32>) -> tensor<4x3x5x8xf32>
  %kt = memopt.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<4x3x5x8xf32>) -> tensor<4x3x8x5xf32>
  %s = memopt.matmul %qs, %kt : (tensor<4x3x5x8xf32>, tensor<4x3x8x5xf32>) -> tensor<4x3x5x5xf32>
  %a = memopt.add %s, %relpos : (tensor<4x3x5x5xf32>, tensor<1x3x5x5xf32>) -> tensor<4x3x5x5xf32>
  %r = memopt.reshape %a : (tensor<4x3x5x5xf32>) -> tensor<2x2x3x5x5xf32>
  %m = memopt.add %r, %winmask : (tensor<2x2x3x5x5xf32>, tensor<1x2x1x5x5xf32>) -> tensor<2x2x3x5x5xf32>
  %b = memopt.reshape %m : (tensor<2x2x3x5x5xf32>) -> tensor<4x3x5x5xf32>
  %p = memopt.softmax %b : (tensor<4x3x5x5xf32>) -> tensor<4x3x5x5xf32>
  %y = memopt.matmul %p, %v : (tensor<4x3x5x5xf32>, tensor<4x3x5x8xf32>) -> tensor<4x3x5x8xf32>
  return %y : tensor<4x3x5x8xf32>
}

// -----

// Not fused: the scores are used twice.
// CHECK-LABEL: func.func @scores_used_twice
// REPORT: memopt-fuse-attention @scores_used_twice: 0 attentions fused
// REPORT-NEXT: 'line {{[0-9]+}}': not fused at memopt.matmul 'matmul': its result is used 2 times
// CHECK-NOT: memopt.attention
// CHECK: memopt.softmax
func.func @scores_used_twice(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>) {
  %s = memopt.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %p = memopt.softmax %s : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y = memopt.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y, %s : tensor<2x4x8xf32>, tensor<2x4x4xf32>
}

// -----

// Not fused: the probabilities are used twice.
// CHECK-LABEL: func.func @probabilities_used_twice
// REPORT: memopt-fuse-attention @probabilities_used_twice: 0 attentions fused
// REPORT-NEXT: 'line {{[0-9]+}}': not fused at func.return 'return': the probabilities are used 2 times
// CHECK-NOT: memopt.attention
func.func @probabilities_used_twice(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>) {
  %s = memopt.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %p = memopt.softmax %s : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y = memopt.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y, %p : tensor<2x4x8xf32>, tensor<2x4x4xf32>
}

// -----

// Not fused: softmax over another axis than the keys.
// CHECK-LABEL: func.func @softmax_other_axis
// REPORT: memopt-fuse-attention @softmax_other_axis: 0 attentions fused
// REPORT-NEXT: 'line {{[0-9]+}}': not fused at memopt.softmax 'softmax': the softmax is not over the last axis
// CHECK-NOT: memopt.attention
// CHECK: memopt.softmax %{{.*}} {axis = 1 : i64}
func.func @softmax_other_axis(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %s = memopt.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %p = memopt.softmax %s {axis = 1 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y = memopt.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Not fused: a per-key factor is not a scale.
// CHECK-LABEL: func.func @non_scalar_scale
// CHECK-NOT: memopt.attention
// CHECK: memopt.div
func.func @non_scalar_scale(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %c = memopt.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %s = memopt.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %d = memopt.div %s, %c : (tensor<2x4x4xf32>, tensor<4xf32>) -> tensor<2x4x4xf32>
  %p = memopt.softmax %d : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y = memopt.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// A scale after a bias scales the bias too: the scores' factor becomes the
// scale, the bias is multiplied by it ((s + b) * c = c s + c b).
// CHECK-LABEL: func.func @scale_after_bias
// CHECK-SAME: %[[B:[^:]*]]: tensor<4x4xf32>
// CHECK: %[[HALF:.*]] = memopt.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[SB:.*]] = memopt.mul %[[B]], %[[HALF]]
// CHECK: memopt.attention %arg0, %arg1, %arg2, %[[SB]] {key_transposed = true, scale = 5.000000e-01 : f32}
func.func @scale_after_bias(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>, %b: tensor<4x4xf32>) -> tensor<2x4x8xf32> {
  %c = memopt.constant dense<0.5> : tensor<f32>
  %s = memopt.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %a = memopt.add %s, %b : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
  %m = memopt.mul %a, %c : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %p = memopt.softmax %m : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y = memopt.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Not fused: a Where whose fill does not mask (-1) changes the softmax of the
// kept scores differently from an additive term.
// CHECK-LABEL: func.func @where_fill_not_masking
// CHECK-NOT: memopt.attention
func.func @where_fill_not_masking(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>, %mask: tensor<4x4xi1>) -> tensor<2x4x8xf32> {
  %fill = memopt.constant dense<-1.0> : tensor<f32>
  %s = memopt.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %w = memopt.where %mask, %fill, %s : (tensor<4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %p = memopt.softmax %w : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y = memopt.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Heads wider than max-head-size (128 by default) are left alone.
// CHECK-LABEL: func.func @wide_head
// REPORT: memopt-fuse-attention @wide_head: 0 attentions fused
// REPORT-NEXT: 'line {{[0-9]+}}': not fused at memopt.matmul 'matmul': head size 160 is above max-head-size 128
// CHECK-NOT: memopt.attention
// WIDE-LABEL: func.func @wide_head
// WIDE: memopt.attention %arg0, %arg1, %arg2 {key_transposed = true, scale = 1.000000e+00 : f32}
func.func @wide_head(%q: tensor<2x4x160xf32>, %kt: tensor<2x160x4xf32>, %v: tensor<2x4x160xf32>) -> tensor<2x4x160xf32> {
  %s = memopt.matmul %q, %kt : (tensor<2x4x160xf32>, tensor<2x160x4xf32>) -> tensor<2x4x4xf32>
  %p = memopt.softmax %s : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y = memopt.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x160xf32>) -> tensor<2x4x160xf32>
  return %y : tensor<2x4x160xf32>
}

// -----

// PyTorch's safe softmax as the dynamo exporter writes SDPA with a boolean
// mask: Where(mask, 0, -inf) added to the scores (each of Q and K^T scaled
// by sqrt(scale)), then Where(IsNaN(P), 0, P). The IsNaN / Where pair
// becomes `safe_softmax` (a fully masked row gives zeros), the runtime mask
// an additive bias.
// CHECK-LABEL: func.func @safe_softmax_bool_mask
// CHECK-SAME: %[[MASK:[^:]*]]: tensor<2x1x4x4xi1>
// CHECK: %[[BIAS:.*]] = memopt.where %[[MASK]]
// CHECK: memopt.attention %arg0, %arg1, %arg2, %[[BIAS]] {key_transposed = true, safe_softmax = true, scale = 0.124999993 : f32}
// CHECK-NOT: memopt.is_nan
// CHECK-NOT: memopt.softmax
// REPORT: memopt-fuse-attention @safe_softmax_bool_mask: 1 attentions fused (0 causal, 1 safe softmax)
func.func @safe_softmax_bool_mask(%q: tensor<2x3x4x8xf32>, %kt: tensor<2x3x8x4xf32>, %v: tensor<2x3x4x8xf32>, %mask: tensor<2x1x4x4xi1>) -> tensor<2x3x4x8xf32> {
  %root = memopt.constant dense<0.353553385> : tensor<f32>
  %zero = memopt.constant dense<0.0> : tensor<f32>
  %ninf = memopt.constant dense<0xFF800000> : tensor<f32>
  %qs = memopt.mul %q, %root : (tensor<2x3x4x8xf32>, tensor<f32>) -> tensor<2x3x4x8xf32>
  %ks = memopt.mul %kt, %root : (tensor<2x3x8x4xf32>, tensor<f32>) -> tensor<2x3x8x4xf32>
  %bias = memopt.where %mask, %zero, %ninf : (tensor<2x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x4x4xf32>
  %s = memopt.matmul %qs, %ks : (tensor<2x3x4x8xf32>, tensor<2x3x8x4xf32>) -> tensor<2x3x4x4xf32>
  %a = memopt.add %s, %bias : (tensor<2x3x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x3x4x4xf32>
  %p = memopt.softmax %a : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %n = memopt.is_nan %p : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xi1>
  %z = memopt.where %n, %zero, %p : (tensor<2x3x4x4xi1>, tensor<f32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %y = memopt.matmul %z, %v : (tensor<2x3x4x4xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  return %y : tensor<2x3x4x8xf32>
}

// -----

// Not fused: Where(IsNaN(P), 1, P) is not the safe softmax (a fully masked
// row would give ones), so P is used twice.
// CHECK-LABEL: func.func @nan_fill_not_zero
// CHECK-NOT: memopt.attention
// CHECK: memopt.is_nan
func.func @nan_fill_not_zero(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %one = memopt.constant dense<1.0> : tensor<f32>
  %s = memopt.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %p = memopt.softmax %s : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %n = memopt.is_nan %p : (tensor<2x4x4xf32>) -> tensor<2x4x4xi1>
  %z = memopt.where %n, %one, %p : (tensor<2x4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y = memopt.matmul %z, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Not fused: the NaN test is also an output, so it must be computed.
// CHECK-LABEL: func.func @nan_test_used_twice
// CHECK-NOT: memopt.attention
func.func @nan_test_used_twice(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xi1>) {
  %zero = memopt.constant dense<0.0> : tensor<f32>
  %s = memopt.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %p = memopt.softmax %s : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %n = memopt.is_nan %p : (tensor<2x4x4xf32>) -> tensor<2x4x4xi1>
  %z = memopt.where %n, %zero, %p : (tensor<2x4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y = memopt.matmul %z, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y, %n : tensor<2x4x8xf32>, tensor<2x4x4xi1>
}

// -----

// onnxscript's K^T: Reshape(K, [-1, Sk, D]) -> Transpose([0, 2, 1]) ->
// Reshape([b..., D, Sk]) is K itself (no copy, key_transposed = false);
// here K's batch axes are GQA's repeat_kv view [2, 2, 2] of [2, 4], so K
// gets a view with the scores' batch axes.
// CHECK-LABEL: func.func @flat_key_transpose
// CHECK-NOT: memopt.transpose
// CHECK: %[[KV:.*]] = memopt.reshape %arg1 : (tensor<2x2x2x6x8xf32>) -> tensor<2x4x6x8xf32>
// CHECK: memopt.attention %arg0, %[[KV]], %arg2 {scale = 5.000000e-01 : f32}
func.func @flat_key_transpose(%q: tensor<2x4x6x8xf32>, %k: tensor<2x2x2x6x8xf32>, %v: tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32> {
  %c = memopt.constant dense<0.5> : tensor<f32>
  %flat = memopt.reshape %k : (tensor<2x2x2x6x8xf32>) -> tensor<8x6x8xf32>
  %t = memopt.transpose %flat {perm = array<i64: 0, 2, 1>} : (tensor<8x6x8xf32>) -> tensor<8x8x6xf32>
  %kt = memopt.reshape %t : (tensor<8x8x6xf32>) -> tensor<2x4x8x6xf32>
  %s = memopt.matmul %q, %kt : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %m = memopt.mul %s, %c : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %p = memopt.softmax %m : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %y = memopt.matmul %p, %v : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  return %y : tensor<2x4x6x8xf32>
}

// -----

// The sqrt-split scale as the exporters leave it: Q and K^T each multiplied
// by sqrt(c) (a Sqrt canonicalize does not fold), K^T divided by
// Sqrt(16) as DeBERTa-v2 does, Q by Pow(d, -0.25): the factors are
// evaluated, and with the Mul of the scores by sqrt(16) all join the scale:
// (0.5 * 0.5) * (0.5 / 4) * 4 = 0.125.
// CHECK-LABEL: func.func @evaluated_scale_factors
// CHECK-NOT: memopt.sqrt
// CHECK-NOT: memopt.pow
// CHECK: memopt.attention %arg0, %arg1, %arg2 {key_transposed = true, scale = 1.250000e-01 : f32}
// REPORT: memopt-fuse-attention @evaluated_scale_factors: 1 attentions fused
// REPORT-NEXT: 'line {{[0-9]+}}': fused, mask none
func.func @evaluated_scale_factors(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %quarter = memopt.constant dense<0.25> : tensor<f32>
  %sixteen = memopt.constant dense<16.0> : tensor<f32>
  %d = memopt.constant dense<16.0> : tensor<1xf32>
  %exponent = memopt.constant dense<-0.25> : tensor<1xf32>
  %root = memopt.sqrt %quarter : tensor<f32>
  %norm = memopt.sqrt %sixteen : tensor<f32>
  %fourth = memopt.pow %d, %exponent : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  %qs = memopt.mul %q, %root : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %qs2 = memopt.mul %fourth, %qs : (tensor<1xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %ks = memopt.div %kt, %norm : (tensor<2x8x4xf32>, tensor<f32>) -> tensor<2x8x4xf32>
  %ks2 = memopt.mul %ks, %root : (tensor<2x8x4xf32>, tensor<f32>) -> tensor<2x8x4xf32>
  %s = memopt.matmul %qs2, %ks2 : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %sc = memopt.mul %s, %norm : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %p = memopt.softmax %sc : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y = memopt.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// f16 scores, softmax in f32 through casts (autocast's spelling): the
// attention runs on the f16 operands (the kernels accumulate in f32); the
// f32 causal constant becomes `causal`, the f32 bias is cast to f16 and the
// f32 finfo.min fill of the padding Where becomes f16's lowest (-65504, not
// -inf, so a fully masked row stays uniform).
// CHECK-LABEL: func.func @softmax_in_f32_through_casts
// CHECK-SAME: %[[B:[^:]*]]: tensor<1x1x4x4xf32>, %[[KEEP:[^:]*]]: tensor<1x1x1x4xi1>
// CHECK-DAG: %[[LOWEST:.*]] = memopt.constant dense<-6.550400e+04> : tensor<f16>
// CHECK-DAG: %[[ZERO:.*]] = memopt.constant dense<0.000000e+00> : tensor<f16>
// CHECK-DAG: %[[B16:.*]] = memopt.cast %[[B]] : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf16>
// CHECK-DAG: %[[PAD:.*]] = memopt.where %[[KEEP]], %[[ZERO]], %[[LOWEST]]
// CHECK: %[[BIAS:.*]] = memopt.add %[[B16]], %[[PAD]]
// CHECK: memopt.attention %arg0, %arg1, %arg2, %[[BIAS]] {causal = true, key_transposed = true, scale = 1.250000e-01 : f32} : (tensor<1x2x4x8xf16>, tensor<1x2x8x4xf16>, tensor<1x2x4x8xf16>, tensor<1x1x4x4xf16>) -> tensor<1x2x4x8xf16>
// CHECK-NOT: memopt.softmax
func.func @softmax_in_f32_through_casts(%q: tensor<1x2x4x8xf16>, %kt: tensor<1x2x8x4xf16>, %v: tensor<1x2x4x8xf16>, %b: tensor<1x1x4x4xf32>, %keep: tensor<1x1x1x4xi1>) -> tensor<1x2x4x8xf16> {
  %c = memopt.constant dense<0.125> : tensor<f32>
  %lowest = memopt.constant dense<-3.40282347E+38> : tensor<f32>
  %causal = memopt.constant dense<[[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %s = memopt.matmul %q, %kt : (tensor<1x2x4x8xf16>, tensor<1x2x8x4xf16>) -> tensor<1x2x4x4xf16>
  %s32 = memopt.cast %s : (tensor<1x2x4x4xf16>) -> tensor<1x2x4x4xf32>
  %m = memopt.mul %s32, %c : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %a = memopt.add %m, %causal : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %a2 = memopt.add %a, %b : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %w = memopt.where %keep, %a2, %lowest : (tensor<1x1x1x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = memopt.softmax %w : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p16 = memopt.cast %p : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf16>
  %y = memopt.matmul %p16, %v : (tensor<1x2x4x4xf16>, tensor<1x2x4x8xf16>) -> tensor<1x2x4x8xf16>
  return %y : tensor<1x2x4x8xf16>
}

// -----

// BLOOM's ALiBi: scores over merged batch x heads ([B*H, S, S] = [8, 4, 4]),
// the scale and the alibi bias [B*H, 1, S] added there (baddbmm), a view to
// [B, H, S, S], the causal mask added as a [B, 1, S, S] constant (the same
// for every sequence: causal), the softmax, a view back to [B*H, S, S] and
// MatMul(P, V). The attention runs in the [2, 4] view: the alibi bias is
// viewed as [2, 4, 1, 4] and is the only bias; the mask is `causal`.
// CHECK-LABEL: func.func @bloom_alibi
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<8x4x16xf32>, %[[K:[^:]*]]: tensor<8x4x16xf32>, %[[V:[^:]*]]: tensor<8x4x16xf32>, %[[ALIBI:[^:]*]]: tensor<8x1x4xf32>)
// CHECK-DAG: %[[A4:.*]] = memopt.reshape %[[ALIBI]] : (tensor<8x1x4xf32>) -> tensor<2x4x1x4xf32>
// CHECK-DAG: %[[Q4:.*]] = memopt.reshape %[[Q]] : (tensor<8x4x16xf32>) -> tensor<2x4x4x16xf32>
// CHECK-DAG: %[[K4:.*]] = memopt.reshape %[[K]] : (tensor<8x4x16xf32>) -> tensor<2x4x4x16xf32>
// CHECK-DAG: %[[V4:.*]] = memopt.reshape %[[V]] : (tensor<8x4x16xf32>) -> tensor<2x4x4x16xf32>
// CHECK: %[[Y4:.*]] = memopt.attention %[[Q4]], %[[K4]], %[[V4]], %[[A4]] {causal = true, scale = 2.500000e-01 : f32}
// CHECK: %[[Y:.*]] = memopt.reshape %[[Y4]] : (tensor<2x4x4x16xf32>) -> tensor<8x4x16xf32>
// CHECK: return %[[Y]]
// REPORT: memopt-fuse-attention @bloom_alibi: 1 attentions fused (1 causal, 0 safe softmax)
// REPORT-NEXT: 'alibi_softmax': fused, mask causal; causal in the kernel; bias operand [2, 4, 1, 4] (score bias)
func.func @bloom_alibi(%q: tensor<8x4x16xf32>, %k: tensor<8x4x16xf32>, %v: tensor<8x4x16xf32>, %alibi: tensor<8x1x4xf32>) -> tensor<8x4x16xf32> {
  %c = memopt.constant dense<0.25> : tensor<f32>
  %mask = memopt.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0, 0.0]]], [[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<2x1x4x4xf32>
  %kt = memopt.transpose %k {perm = array<i64: 0, 2, 1>} : (tensor<8x4x16xf32>) -> tensor<8x16x4xf32>
  %s = memopt.matmul %q, %kt : (tensor<8x4x16xf32>, tensor<8x16x4xf32>) -> tensor<8x4x4xf32>
  %m = memopt.mul %s, %c : (tensor<8x4x4xf32>, tensor<f32>) -> tensor<8x4x4xf32>
  %a = memopt.add %m, %alibi : (tensor<8x4x4xf32>, tensor<8x1x4xf32>) -> tensor<8x4x4xf32>
  %r = memopt.reshape %a : (tensor<8x4x4xf32>) -> tensor<2x4x4x4xf32>
  %b = memopt.add %r, %mask : (tensor<2x4x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x4x4x4xf32>
  %p = memopt.softmax %b : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32> loc("alibi_softmax")
  %pr = memopt.reshape %p : (tensor<2x4x4x4xf32>) -> tensor<8x4x4xf32>
  %y = memopt.matmul %pr, %v : (tensor<8x4x4xf32>, tensor<8x4x16xf32>) -> tensor<8x4x16xf32>
  return %y : tensor<8x4x16xf32>
}

// -----

// DeBERTa-v2's disentangled attention: content-to-position and
// position-to-content scores (computed elsewhere, here arguments) are added
// to the scaled content scores over merged batch x heads; the padding mask
// comes as Where in the [B, H, S, S] view. The two score terms and the mask
// become one bias operand in the [2, 2] view; K^T / sqrt(24) (DeBERTa's
// scale_factor 3 x head size 8) is the scale.
// CHECK-LABEL: func.func @deberta_disentangled
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<4x4x8xf32>, %[[KT:[^:]*]]: tensor<4x8x4xf32>, %[[V:[^:]*]]: tensor<4x4x8xf32>, %[[C2P:[^:]*]]: tensor<4x4x4xf32>, %[[P2C:[^:]*]]: tensor<4x4x4xf32>, %[[KEEP:[^:]*]]: tensor<2x1x4x4xi1>)
// CHECK-DAG: %[[C2P4:.*]] = memopt.reshape %[[C2P]] : (tensor<4x4x4xf32>) -> tensor<2x2x4x4xf32>
// CHECK-DAG: %[[P2C4:.*]] = memopt.reshape %[[P2C]] : (tensor<4x4x4xf32>) -> tensor<2x2x4x4xf32>
// CHECK: %[[SUM:.*]] = memopt.add %[[C2P4]], %[[P2C4]]
// CHECK: %[[MASK:.*]] = memopt.where %[[KEEP]]
// CHECK: %[[BIAS:.*]] = memopt.add %[[SUM]], %[[MASK]]
// CHECK: memopt.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[BIAS]] {key_transposed = true, scale = 0.204124153 : f32}
// REPORT: memopt-fuse-attention @deberta_disentangled: 1 attentions fused
// REPORT-NEXT: 'line {{[0-9]+}}': fused, mask padding; bias operand [2, 2, 4, 4] (mask + score bias)
func.func @deberta_disentangled(%q: tensor<4x4x8xf32>, %kt: tensor<4x8x4xf32>, %v: tensor<4x4x8xf32>, %c2p: tensor<4x4x4xf32>, %p2c: tensor<4x4x4xf32>, %keep: tensor<2x1x4x4xi1>) -> tensor<4x4x8xf32> {
  %scale_factor = memopt.constant dense<24.0> : tensor<f32>
  %lowest = memopt.constant dense<-3.40282347E+38> : tensor<f32>
  %norm = memopt.sqrt %scale_factor : tensor<f32>
  %ks = memopt.div %kt, %norm : (tensor<4x8x4xf32>, tensor<f32>) -> tensor<4x8x4xf32>
  %s = memopt.matmul %q, %ks : (tensor<4x4x8xf32>, tensor<4x8x4xf32>) -> tensor<4x4x4xf32>
  %a = memopt.add %s, %c2p : (tensor<4x4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %b = memopt.add %a, %p2c : (tensor<4x4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %r = memopt.reshape %b : (tensor<4x4x4xf32>) -> tensor<2x2x4x4xf32>
  %w = memopt.where %keep, %r, %lowest : (tensor<2x1x4x4xi1>, tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %p = memopt.softmax %w : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %pr = memopt.reshape %p : (tensor<2x2x4x4xf32>) -> tensor<4x4x4xf32>
  %y = memopt.matmul %pr, %v : (tensor<4x4x4xf32>, tensor<4x4x8xf32>) -> tensor<4x4x8xf32>
  return %y : tensor<4x4x8xf32>
}

// -----

// Grouped-query attention: K and V of 2 KV heads repeated for 4 query heads
// (Unsqueeze, Expand [2, 2, 1] -> [2, 2, 2], Reshape to [2, 4]). The
// attention reads them before the repeat, broadcast in the [2, 2, 2] view of
// the heads: the repeated K and V are never stored.
// CHECK-LABEL: func.func @gqa_expand_reshape
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<2x4x6x8xf32>, %[[K:[^:]*]]: tensor<2x2x6x8xf32>, %[[V:[^:]*]]: tensor<2x2x6x8xf32>)
// CHECK-DAG: %[[K5:.*]] = memopt.unsqueeze %[[K]]
// CHECK-DAG: %[[V5:.*]] = memopt.unsqueeze %[[V]]
// CHECK-DAG: %[[Q5:.*]] = memopt.reshape %[[Q]] : (tensor<2x4x6x8xf32>) -> tensor<2x2x2x6x8xf32>
// CHECK: %[[Y5:.*]] = memopt.attention %[[Q5]], %[[K5]], %[[V5]] {causal = true, scale = 0.353553385 : f32} : (tensor<2x2x2x6x8xf32>, tensor<2x2x1x6x8xf32>, tensor<2x2x1x6x8xf32>) -> tensor<2x2x2x6x8xf32>
// CHECK: memopt.reshape %[[Y5]] : (tensor<2x2x2x6x8xf32>) -> tensor<2x4x6x8xf32>
// CHECK-NOT: memopt.expand
func.func @gqa_expand_reshape(%q: tensor<2x4x6x8xf32>, %k: tensor<2x2x6x8xf32>, %v: tensor<2x2x6x8xf32>) -> tensor<2x4x6x8xf32> {
  %c = memopt.constant dense<0.353553385> : tensor<f32>
  %causal = memopt.constant dense<[[true, false, false, false, false, false], [true, true, false, false, false, false], [true, true, true, false, false, false], [true, true, true, true, false, false], [true, true, true, true, true, false], [true, true, true, true, true, true]]> : tensor<6x6xi1>
  %lowest = memopt.constant dense<-3.40282347E+38> : tensor<f32>
  %k5 = memopt.unsqueeze %k {axes = array<i64: 2>} : (tensor<2x2x6x8xf32>) -> tensor<2x2x1x6x8xf32>
  %ke = memopt.expand %k5 : (tensor<2x2x1x6x8xf32>) -> tensor<2x2x2x6x8xf32>
  %kr = memopt.reshape %ke : (tensor<2x2x2x6x8xf32>) -> tensor<2x4x6x8xf32>
  %v5 = memopt.unsqueeze %v {axes = array<i64: 2>} : (tensor<2x2x6x8xf32>) -> tensor<2x2x1x6x8xf32>
  %ve = memopt.expand %v5 : (tensor<2x2x1x6x8xf32>) -> tensor<2x2x2x6x8xf32>
  %vr = memopt.reshape %ve : (tensor<2x2x2x6x8xf32>) -> tensor<2x4x6x8xf32>
  %kt = memopt.transpose %kr {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %s = memopt.matmul %q, %kt : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %m = memopt.mul %s, %c : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %w = memopt.where %causal, %m, %lowest : (tensor<6x6xi1>, tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %p = memopt.softmax %w : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %y = memopt.matmul %p, %vr : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  return %y : tensor<2x4x6x8xf32>
}

// -----

// A sliding window (Mistral, Gemma-2: key j kept for i - 2 < j <= i) is no
// causal mask: it stays a bias operand and the report says what it is.
// CHECK-LABEL: func.func @sliding_window
// CHECK: %[[BIAS:.*]] = memopt.constant dense<{{\[\[}}0.000000e+00, 0xFF800000, 0xFF800000, 0xFF800000], [0.000000e+00, 0.000000e+00, 0xFF800000, 0xFF800000], [0xFF800000, 0.000000e+00, 0.000000e+00, 0xFF800000]
// CHECK: memopt.attention %arg0, %arg1, %arg2, %[[BIAS]] {key_transposed = true, scale = 1.000000e+00 : f32}
// REPORT: memopt-fuse-attention @sliding_window: 1 attentions fused (0 causal, 0 safe softmax)
// REPORT-NEXT: 'window_softmax': fused, mask sliding window; bias operand [4, 4] (mask)
func.func @sliding_window(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %keep = memopt.constant dense<[[true, false, false, false], [true, true, false, false], [false, true, true, false], [false, false, true, true]]> : tensor<4x4xi1>
  %ninf = memopt.constant dense<0xFF800000> : tensor<f32>
  %s = memopt.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %w = memopt.where %keep, %s, %ninf : (tensor<4x4xi1>, tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %p = memopt.softmax %w : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32> loc("window_softmax")
  %y = memopt.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// transformers' SDPA mask with an attention_mask: causal And padding, one
// boolean [B, 1, S, S] tensor added as Where(mask, 0, finfo.min). It stays
// one bias operand (a fully masked padding row is uniform in the unfused
// graph, which splitting out `causal` would change); the report classifies
// it as causal + padding.
// CHECK-LABEL: func.func @causal_and_padding
// CHECK: memopt.attention %arg0, %arg1, %arg2, %{{.*}} {key_transposed = true, safe_softmax = true, scale = 1.000000e+00 : f32}
// REPORT: memopt-fuse-attention @causal_and_padding: 1 attentions fused (0 causal, 1 safe softmax)
// REPORT-NEXT: 'sdpa_softmax': fused, mask causal + padding; bias operand [2, 1, 4, 4] (mask); safe softmax
func.func @causal_and_padding(%q: tensor<2x3x4x8xf32>, %kt: tensor<2x3x8x4xf32>, %v: tensor<2x3x4x8xf32>, %attention_mask: tensor<2x4xi64>) -> tensor<2x3x4x8xf32> {
  %causal = memopt.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %zero = memopt.constant dense<0.0> : tensor<f32>
  %lowest = memopt.constant dense<-3.40282347E+38> : tensor<f32>
  %keys = memopt.cast %attention_mask : (tensor<2x4xi64>) -> tensor<2x4xi1>
  %keys4 = memopt.reshape %keys : (tensor<2x4xi1>) -> tensor<2x1x1x4xi1>
  %keep = memopt.and %causal, %keys4 : (tensor<4x4xi1>, tensor<2x1x1x4xi1>) -> tensor<2x1x4x4xi1>
  %bias = memopt.where %keep, %zero, %lowest : (tensor<2x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x4x4xf32>
  %s = memopt.matmul %q, %kt : (tensor<2x3x4x8xf32>, tensor<2x3x8x4xf32>) -> tensor<2x3x4x4xf32>
  %a = memopt.add %s, %bias : (tensor<2x3x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x3x4x4xf32>
  %p = memopt.softmax %a : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32> loc("sdpa_softmax")
  %n = memopt.is_nan %p : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xi1>
  %z = memopt.where %n, %zero, %p : (tensor<2x3x4x4xi1>, tensor<f32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %y = memopt.matmul %z, %v : (tensor<2x3x4x4xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  return %y : tensor<2x3x4x8xf32>
}

// -----

// The report names the node that broke the pattern: here a Relu between
// the scores and the softmax (not a scale, mask, bias, view or cast).
// CHECK-LABEL: func.func @report_breaking_node
// CHECK-NOT: memopt.attention
// REPORT: memopt-fuse-attention @report_breaking_node: 0 attentions fused
// REPORT-NEXT: 'layer0_softmax': not fused at memopt.relu 'layer0_relu': not a step between MatMul(Q, K^T) and the softmax
func.func @report_breaking_node(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %s = memopt.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %r = memopt.relu %s : tensor<2x4x4xf32> loc("layer0_relu")
  %p = memopt.softmax %r : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32> loc("layer0_softmax")
  %y = memopt.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}
