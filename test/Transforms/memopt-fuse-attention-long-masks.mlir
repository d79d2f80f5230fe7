// RUN: memopt-opt %s -split-input-file --memopt-fuse-attention | FileCheck %s
// RUN: memopt-opt %s -split-input-file --mlir-disable-threading --memopt-fuse-attention=report -o /dev/null | FileCheck %s --check-prefix=REPORT

// Masks built by ops at sequence lengths where no folder reduces them to a
// constant (the dialect folds up to 65,536 elements; these are 1024 x 1024):
// they are computed from constants alone and classified by value all the
// same, whatever ops build them. Each test's mask is built the way an
// exporter writes it; none needs weights.

// transformers' causal mask without an attention_mask (Llama, GPT-2 dynamo
// exports): key and query positions from Range, LessOrEqual (imported as
// Less Or Equal), Expand to [B, 1, S, S], Where(mask, 0, finfo.min) added in
// every layer. Both layers get `causal` and no bias; the mask's ops die with
// the terms and are erased: no S x S tensor is left.
// CHECK-LABEL: func.func @transformers_causal
// CHECK-NOT: 1024x1024
// CHECK: memopt.attention %arg0, %arg1, %arg2 {causal = true, key_transposed = true, safe_softmax = true, scale = 0.353553385 : f32}
// CHECK-NOT: 1024x1024
// CHECK: memopt.attention %arg0, %arg1, %arg2 {causal = true, key_transposed = true, safe_softmax = true, scale = 0.353553385 : f32}
// CHECK-NOT: 1024x1024
// CHECK: return
// REPORT: memopt-fuse-attention @transformers_causal: 2 attentions fused (2 causal, 2 safe softmax)
// REPORT-NEXT: 'layer0_softmax': fused, mask causal; causal in the kernel; safe softmax
// REPORT-NEXT: 'layer1_softmax': fused, mask causal; causal in the kernel; safe softmax
func.func @transformers_causal(%q: tensor<4x2x1024x8xf32>, %kt: tensor<4x2x8x1024xf32>, %v: tensor<4x2x1024x8xf32>) -> (tensor<4x2x1024x8xf32>, tensor<4x2x1024x8xf32>) {
  %start = memopt.constant dense<0> : tensor<i64>
  %limit = memopt.constant dense<1024> : tensor<i64>
  %delta = memopt.constant dense<1> : tensor<i64>
  %zero = memopt.constant dense<0.0> : tensor<f32>
  %lowest = memopt.constant dense<-3.40282347E+38> : tensor<f32>
  %scale = memopt.constant dense<0.353553385> : tensor<f32>
  %positions = memopt.range %start, %limit, %delta : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<1024xi64>
  %keys = memopt.unsqueeze %positions {axes = array<i64: 0, 1, 2>} : (tensor<1024xi64>) -> tensor<1x1x1x1024xi64>
  %queries = memopt.unsqueeze %positions {axes = array<i64: 0, 1, 3>} : (tensor<1024xi64>) -> tensor<1x1x1024x1xi64>
  %lt = memopt.less %keys, %queries : (tensor<1x1x1x1024xi64>, tensor<1x1x1024x1xi64>) -> tensor<1x1x1024x1024xi1>
  %eq = memopt.equal %keys, %queries : (tensor<1x1x1x1024xi64>, tensor<1x1x1024x1xi64>) -> tensor<1x1x1024x1024xi1>
  %le = memopt.or %lt, %eq : (tensor<1x1x1024x1024xi1>, tensor<1x1x1024x1024xi1>) -> tensor<1x1x1024x1024xi1>
  %mask = memopt.expand %le : (tensor<1x1x1024x1024xi1>) -> tensor<4x1x1024x1024xi1>
  %b0 = memopt.where %mask, %zero, %lowest : (tensor<4x1x1024x1024xi1>, tensor<f32>, tensor<f32>) -> tensor<4x1x1024x1024xf32>
  %s0 = memopt.matmul %q, %kt : (tensor<4x2x1024x8xf32>, tensor<4x2x8x1024xf32>) -> tensor<4x2x1024x1024xf32>
  %m0 = memopt.mul %s0, %scale : (tensor<4x2x1024x1024xf32>, tensor<f32>) -> tensor<4x2x1024x1024xf32>
  %a0 = memopt.add %m0, %b0 : (tensor<4x2x1024x1024xf32>, tensor<4x1x1024x1024xf32>) -> tensor<4x2x1024x1024xf32>
  %p0 = memopt.softmax %a0 : (tensor<4x2x1024x1024xf32>) -> tensor<4x2x1024x1024xf32> loc("layer0_softmax")
  %n0 = memopt.is_nan %p0 : (tensor<4x2x1024x1024xf32>) -> tensor<4x2x1024x1024xi1>
  %z0 = memopt.where %n0, %zero, %p0 : (tensor<4x2x1024x1024xi1>, tensor<f32>, tensor<4x2x1024x1024xf32>) -> tensor<4x2x1024x1024xf32>
  %y0 = memopt.matmul %z0, %v : (tensor<4x2x1024x1024xf32>, tensor<4x2x1024x8xf32>) -> tensor<4x2x1024x8xf32>
  %b1 = memopt.where %mask, %zero, %lowest : (tensor<4x1x1024x1024xi1>, tensor<f32>, tensor<f32>) -> tensor<4x1x1024x1024xf32>
  %s1 = memopt.matmul %q, %kt : (tensor<4x2x1024x8xf32>, tensor<4x2x8x1024xf32>) -> tensor<4x2x1024x1024xf32>
  %m1 = memopt.mul %s1, %scale : (tensor<4x2x1024x1024xf32>, tensor<f32>) -> tensor<4x2x1024x1024xf32>
  %a1 = memopt.add %m1, %b1 : (tensor<4x2x1024x1024xf32>, tensor<4x1x1024x1024xf32>) -> tensor<4x2x1024x1024xf32>
  %p1 = memopt.softmax %a1 : (tensor<4x2x1024x1024xf32>) -> tensor<4x2x1024x1024xf32> loc("layer1_softmax")
  %n1 = memopt.is_nan %p1 : (tensor<4x2x1024x1024xf32>) -> tensor<4x2x1024x1024xi1>
  %z1 = memopt.where %n1, %zero, %p1 : (tensor<4x2x1024x1024xi1>, tensor<f32>, tensor<4x2x1024x1024xf32>) -> tensor<4x2x1024x1024xf32>
  %y1 = memopt.matmul %z1, %v : (tensor<4x2x1024x1024xf32>, tensor<4x2x1024x8xf32>) -> tensor<4x2x1024x8xf32>
  return %y0, %y1 : tensor<4x2x1024x8xf32>, tensor<4x2x1024x8xf32>
}

// -----

// Another spelling of the same mask: Where(keep, scores, -inf) on the
// scores with keep = Not(key > query), the positions a Range in f32 and a
// broadcast compare of [1024, 1] against [1024].
// CHECK-LABEL: func.func @not_greater_keep
// CHECK-NOT: memopt.where
// CHECK: memopt.attention %arg0, %arg1, %arg2 {causal = true, key_transposed = true, scale = 1.000000e+00 : f32}
// REPORT: 'keep_softmax': fused, mask causal; causal in the kernel
func.func @not_greater_keep(%q: tensor<1x2x1024x8xf32>, %kt: tensor<1x2x8x1024xf32>, %v: tensor<1x2x1024x8xf32>) -> tensor<1x2x1024x8xf32> {
  %start = memopt.constant dense<0.0> : tensor<f32>
  %limit = memopt.constant dense<1024.0> : tensor<f32>
  %delta = memopt.constant dense<1.0> : tensor<f32>
  %ninf = memopt.constant dense<0xFF800000> : tensor<f32>
  %positions = memopt.range %start, %limit, %delta : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<1024xf32>
  %queries = memopt.reshape %positions : (tensor<1024xf32>) -> tensor<1024x1xf32>
  %future = memopt.greater %positions, %queries : (tensor<1024xf32>, tensor<1024x1xf32>) -> tensor<1024x1024xi1>
  %keep = memopt.not %future : tensor<1024x1024xi1>
  %s = memopt.matmul %q, %kt : (tensor<1x2x1024x8xf32>, tensor<1x2x8x1024xf32>) -> tensor<1x2x1024x1024xf32>
  %w = memopt.where %keep, %s, %ninf : (tensor<1024x1024xi1>, tensor<1x2x1024x1024xf32>, tensor<f32>) -> tensor<1x2x1024x1024xf32>
  %p = memopt.softmax %w : (tensor<1x2x1024x1024xf32>) -> tensor<1x2x1024x1024xf32> loc("keep_softmax")
  %y = memopt.matmul %p, %v : (tensor<1x2x1024x1024xf32>, tensor<1x2x1024x8xf32>) -> tensor<1x2x1024x8xf32>
  return %y : tensor<1x2x1024x8xf32>
}

// -----

// Mistral's sliding window (key > query - 256 And key <= query): no causal
// mask, it stays a bias operand and the report says what it is.
// CHECK-LABEL: func.func @sliding_window
// CHECK: %[[BIAS:.*]] = memopt.where %{{.*}} : (tensor<1x1x1024x1024xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x1024x1024xf32>
// CHECK: memopt.attention %arg0, %arg1, %arg2, %[[BIAS]] {key_transposed = true, scale = 1.000000e+00 : f32}
// REPORT: 'window_softmax': fused, mask sliding window; bias operand [1, 1, 1024, 1024] (mask)
func.func @sliding_window(%q: tensor<1x2x1024x8xf32>, %kt: tensor<1x2x8x1024xf32>, %v: tensor<1x2x1024x8xf32>) -> tensor<1x2x1024x8xf32> {
  %start = memopt.constant dense<0> : tensor<i64>
  %limit = memopt.constant dense<1024> : tensor<i64>
  %delta = memopt.constant dense<1> : tensor<i64>
  %window = memopt.constant dense<256> : tensor<i64>
  %zero = memopt.constant dense<0.0> : tensor<f32>
  %lowest = memopt.constant dense<-3.40282347E+38> : tensor<f32>
  %positions = memopt.range %start, %limit, %delta : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<1024xi64>
  %keys = memopt.reshape %positions : (tensor<1024xi64>) -> tensor<1x1x1x1024xi64>
  %queries = memopt.reshape %positions : (tensor<1024xi64>) -> tensor<1x1x1024x1xi64>
  %first = memopt.sub %queries, %window : (tensor<1x1x1024x1xi64>, tensor<i64>) -> tensor<1x1x1024x1xi64>
  %recent = memopt.greater %keys, %first : (tensor<1x1x1x1024xi64>, tensor<1x1x1024x1xi64>) -> tensor<1x1x1024x1024xi1>
  %future = memopt.greater %keys, %queries : (tensor<1x1x1x1024xi64>, tensor<1x1x1024x1xi64>) -> tensor<1x1x1024x1024xi1>
  %past = memopt.not %future : tensor<1x1x1024x1024xi1>
  %keep = memopt.and %recent, %past : (tensor<1x1x1024x1024xi1>, tensor<1x1x1024x1024xi1>) -> tensor<1x1x1024x1024xi1>
  %bias = memopt.where %keep, %zero, %lowest : (tensor<1x1x1024x1024xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x1024x1024xf32>
  %s = memopt.matmul %q, %kt : (tensor<1x2x1024x8xf32>, tensor<1x2x8x1024xf32>) -> tensor<1x2x1024x1024xf32>
  %a = memopt.add %s, %bias : (tensor<1x2x1024x1024xf32>, tensor<1x1x1024x1024xf32>) -> tensor<1x2x1024x1024xf32>
  %p = memopt.softmax %a : (tensor<1x2x1024x1024xf32>) -> tensor<1x2x1024x1024xf32> loc("window_softmax")
  %y = memopt.matmul %p, %v : (tensor<1x2x1024x1024xf32>, tensor<1x2x1024x8xf32>) -> tensor<1x2x1024x8xf32>
  return %y : tensor<1x2x1024x8xf32>
}

// -----

// The causal mask And a padding mask from the input (attention_mask): one
// bias operand, as at short lengths (a fully masked padding row is uniform
// in the unfused graph, which splitting out `causal` would change); the
// report finds the causal part by value.
// CHECK-LABEL: func.func @causal_and_padding
// CHECK: memopt.attention %arg0, %arg1, %arg2, %{{.*}} {key_transposed = true, scale = 1.000000e+00 : f32}
// REPORT: 'padded_softmax': fused, mask causal + padding; bias operand [2, 1, 1024, 1024] (mask)
func.func @causal_and_padding(%q: tensor<2x2x1024x8xf32>, %kt: tensor<2x2x8x1024xf32>, %v: tensor<2x2x1024x8xf32>, %attention_mask: tensor<2x1024xi64>) -> tensor<2x2x1024x8xf32> {
  %start = memopt.constant dense<0> : tensor<i64>
  %limit = memopt.constant dense<1024> : tensor<i64>
  %delta = memopt.constant dense<1> : tensor<i64>
  %zero = memopt.constant dense<0.0> : tensor<f32>
  %lowest = memopt.constant dense<-3.40282347E+38> : tensor<f32>
  %positions = memopt.range %start, %limit, %delta : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<1024xi64>
  %keys = memopt.reshape %positions : (tensor<1024xi64>) -> tensor<1x1x1x1024xi64>
  %queries = memopt.reshape %positions : (tensor<1024xi64>) -> tensor<1x1x1024x1xi64>
  %future = memopt.greater %keys, %queries : (tensor<1x1x1x1024xi64>, tensor<1x1x1024x1xi64>) -> tensor<1x1x1024x1024xi1>
  %causal = memopt.not %future : tensor<1x1x1024x1024xi1>
  %present = memopt.cast %attention_mask : (tensor<2x1024xi64>) -> tensor<2x1024xi1>
  %present4 = memopt.reshape %present : (tensor<2x1024xi1>) -> tensor<2x1x1x1024xi1>
  %keep = memopt.and %causal, %present4 : (tensor<1x1x1024x1024xi1>, tensor<2x1x1x1024xi1>) -> tensor<2x1x1024x1024xi1>
  %bias = memopt.where %keep, %zero, %lowest : (tensor<2x1x1024x1024xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x1024x1024xf32>
  %s = memopt.matmul %q, %kt : (tensor<2x2x1024x8xf32>, tensor<2x2x8x1024xf32>) -> tensor<2x2x1024x1024xf32>
  %a = memopt.add %s, %bias : (tensor<2x2x1024x1024xf32>, tensor<2x1x1024x1024xf32>) -> tensor<2x2x1024x1024xf32>
  %p = memopt.softmax %a : (tensor<2x2x1024x1024xf32>) -> tensor<2x2x1024x1024xf32> loc("padded_softmax")
  %y = memopt.matmul %p, %v : (tensor<2x2x1024x1024xf32>, tensor<2x2x1024x8xf32>) -> tensor<2x2x1024x8xf32>
  return %y : tensor<2x2x1024x8xf32>
}

// -----

// Positions offset by one (key <= query + 1: each query also sees the next
// key) are not top-left causal: the mask stays a bias operand.
// CHECK-LABEL: func.func @offset_positions
// CHECK: memopt.attention %arg0, %arg1, %arg2, %{{.*}} {key_transposed = true, scale = 1.000000e+00 : f32}
// REPORT: 'offset_softmax': fused, mask arbitrary; bias operand [1, 1, 1024, 1024] (mask)
func.func @offset_positions(%q: tensor<1x2x1024x8xf32>, %kt: tensor<1x2x8x1024xf32>, %v: tensor<1x2x1024x8xf32>) -> tensor<1x2x1024x8xf32> {
  %start = memopt.constant dense<0> : tensor<i64>
  %limit = memopt.constant dense<1024> : tensor<i64>
  %delta = memopt.constant dense<1> : tensor<i64>
  %one = memopt.constant dense<1> : tensor<i64>
  %zero = memopt.constant dense<0.0> : tensor<f32>
  %lowest = memopt.constant dense<-3.40282347E+38> : tensor<f32>
  %positions = memopt.range %start, %limit, %delta : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<1024xi64>
  %keys = memopt.reshape %positions : (tensor<1024xi64>) -> tensor<1x1x1x1024xi64>
  %queries = memopt.reshape %positions : (tensor<1024xi64>) -> tensor<1x1x1024x1xi64>
  %next = memopt.add %queries, %one : (tensor<1x1x1024x1xi64>, tensor<i64>) -> tensor<1x1x1024x1xi64>
  %future = memopt.greater %keys, %next : (tensor<1x1x1x1024xi64>, tensor<1x1x1024x1xi64>) -> tensor<1x1x1024x1024xi1>
  %bias = memopt.where %future, %lowest, %zero : (tensor<1x1x1024x1024xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x1024x1024xf32>
  %s = memopt.matmul %q, %kt : (tensor<1x2x1024x8xf32>, tensor<1x2x8x1024xf32>) -> tensor<1x2x1024x1024xf32>
  %a = memopt.add %s, %bias : (tensor<1x2x1024x1024xf32>, tensor<1x1x1024x1024xf32>) -> tensor<1x2x1024x1024xf32>
  %p = memopt.softmax %a : (tensor<1x2x1024x1024xf32>) -> tensor<1x2x1024x1024xf32> loc("offset_softmax")
  %y = memopt.matmul %p, %v : (tensor<1x2x1024x1024xf32>, tensor<1x2x1024x8xf32>) -> tensor<1x2x1024x8xf32>
  return %y : tensor<1x2x1024x8xf32>
}

// -----

// A score bias computed from positions (ALiBi's slope x (key - query)) next
// to the computed causal mask: the mask becomes `causal`, the bias stays.
// CHECK-LABEL: func.func @alibi_and_causal
// CHECK: %[[ALIBI:.*]] = memopt.mul
// CHECK: memopt.attention %arg0, %arg1, %arg2, %[[ALIBI]] {causal = true, key_transposed = true, scale = 1.000000e+00 : f32}
// REPORT: 'alibi_softmax': fused, mask causal; causal in the kernel; bias operand [1, 1, 1024, 1024] (score bias)
func.func @alibi_and_causal(%q: tensor<1x2x1024x8xf32>, %kt: tensor<1x2x8x1024xf32>, %v: tensor<1x2x1024x8xf32>) -> tensor<1x2x1024x8xf32> {
  %start = memopt.constant dense<0> : tensor<i64>
  %limit = memopt.constant dense<1024> : tensor<i64>
  %delta = memopt.constant dense<1> : tensor<i64>
  %slope = memopt.constant dense<0.0625> : tensor<f32>
  %zero = memopt.constant dense<0.0> : tensor<f32>
  %lowest = memopt.constant dense<-3.40282347E+38> : tensor<f32>
  %positions = memopt.range %start, %limit, %delta : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<1024xi64>
  %keys = memopt.reshape %positions : (tensor<1024xi64>) -> tensor<1x1x1x1024xi64>
  %queries = memopt.reshape %positions : (tensor<1024xi64>) -> tensor<1x1x1024x1xi64>
  %distance = memopt.sub %keys, %queries : (tensor<1x1x1x1024xi64>, tensor<1x1x1024x1xi64>) -> tensor<1x1x1024x1024xi64>
  %distancef = memopt.cast %distance : (tensor<1x1x1024x1024xi64>) -> tensor<1x1x1024x1024xf32>
  %alibi = memopt.mul %distancef, %slope : (tensor<1x1x1024x1024xf32>, tensor<f32>) -> tensor<1x1x1024x1024xf32>
  %future = memopt.greater %keys, %queries : (tensor<1x1x1x1024xi64>, tensor<1x1x1024x1xi64>) -> tensor<1x1x1024x1024xi1>
  %mask = memopt.where %future, %lowest, %zero : (tensor<1x1x1024x1024xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x1024x1024xf32>
  %s = memopt.matmul %q, %kt : (tensor<1x2x1024x8xf32>, tensor<1x2x8x1024xf32>) -> tensor<1x2x1024x1024xf32>
  %b = memopt.add %s, %alibi : (tensor<1x2x1024x1024xf32>, tensor<1x1x1024x1024xf32>) -> tensor<1x2x1024x1024xf32>
  %a = memopt.add %b, %mask : (tensor<1x2x1024x1024xf32>, tensor<1x1x1024x1024xf32>) -> tensor<1x2x1024x1024xf32>
  %p = memopt.softmax %a : (tensor<1x2x1024x1024xf32>) -> tensor<1x2x1024x1024xf32> loc("alibi_softmax")
  %y = memopt.matmul %p, %v : (tensor<1x2x1024x1024xf32>, tensor<1x2x1024x8xf32>) -> tensor<1x2x1024x8xf32>
  return %y : tensor<1x2x1024x8xf32>
}

// -----

// Query positions as a running count down the query axis (CumSum over a
// non-last axis, which the classifier does not evaluate): the mask cannot be
// read, so it stays a bias operand, classified arbitrary; a score bias
// computed that way is neither mask nor score bias to the report, which says
// it is computed (not a constant).
// CHECK-LABEL: func.func @unread_masks
// CHECK: memopt.attention %arg0, %arg1, %arg2, %{{.*}} {key_transposed = true, scale = 1.000000e+00 : f32}
// CHECK: memopt.attention %arg0, %arg1, %arg2, %{{.*}} {key_transposed = true, scale = 1.000000e+00 : f32}
// REPORT: 'unread_mask_softmax': fused, mask arbitrary; bias operand [1, 1, 1024, 1024] (mask)
// REPORT-NEXT: 'unread_bias_softmax': fused, mask none; bias operand [1, 1, 1024, 1024] (computed)
func.func @unread_masks(%q: tensor<1x2x1024x8xf32>, %kt: tensor<1x2x8x1024xf32>, %v: tensor<1x2x1024x8xf32>) -> (tensor<1x2x1024x8xf32>, tensor<1x2x1024x8xf32>) {
  %ones = memopt.constant dense<1> : tensor<1x1x1024x1024xi64>
  %one = memopt.constant dense<1> : tensor<i64>
  %slope = memopt.constant dense<0.0625> : tensor<f32>
  %zero = memopt.constant dense<0.0> : tensor<f32>
  %lowest = memopt.constant dense<-3.40282347E+38> : tensor<f32>
  %count = memopt.cum_sum %ones {axis = 2 : i64} : (tensor<1x1x1024x1024xi64>) -> tensor<1x1x1024x1024xi64>
  %queries = memopt.sub %count, %one : (tensor<1x1x1024x1024xi64>, tensor<i64>) -> tensor<1x1x1024x1024xi64>
  %keys = memopt.cum_sum %ones {axis = 3 : i64, exclusive = 1 : i64} : (tensor<1x1x1024x1024xi64>) -> tensor<1x1x1024x1024xi64>
  %future = memopt.greater %keys, %queries : (tensor<1x1x1024x1024xi64>, tensor<1x1x1024x1024xi64>) -> tensor<1x1x1024x1024xi1>
  %mask = memopt.where %future, %lowest, %zero : (tensor<1x1x1024x1024xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x1024x1024xf32>
  %s0 = memopt.matmul %q, %kt : (tensor<1x2x1024x8xf32>, tensor<1x2x8x1024xf32>) -> tensor<1x2x1024x1024xf32>
  %a0 = memopt.add %s0, %mask : (tensor<1x2x1024x1024xf32>, tensor<1x1x1024x1024xf32>) -> tensor<1x2x1024x1024xf32>
  %p0 = memopt.softmax %a0 : (tensor<1x2x1024x1024xf32>) -> tensor<1x2x1024x1024xf32> loc("unread_mask_softmax")
  %y0 = memopt.matmul %p0, %v : (tensor<1x2x1024x1024xf32>, tensor<1x2x1024x8xf32>) -> tensor<1x2x1024x8xf32>
  %distance = memopt.sub %keys, %queries : (tensor<1x1x1024x1024xi64>, tensor<1x1x1024x1024xi64>) -> tensor<1x1x1024x1024xi64>
  %distancef = memopt.cast %distance : (tensor<1x1x1024x1024xi64>) -> tensor<1x1x1024x1024xf32>
  %bias = memopt.mul %distancef, %slope : (tensor<1x1x1024x1024xf32>, tensor<f32>) -> tensor<1x1x1024x1024xf32>
  %s1 = memopt.matmul %q, %kt : (tensor<1x2x1024x8xf32>, tensor<1x2x8x1024xf32>) -> tensor<1x2x1024x1024xf32>
  %a1 = memopt.add %s1, %bias : (tensor<1x2x1024x1024xf32>, tensor<1x1x1024x1024xf32>) -> tensor<1x2x1024x1024xf32>
  %p1 = memopt.softmax %a1 : (tensor<1x2x1024x1024xf32>) -> tensor<1x2x1024x1024xf32> loc("unread_bias_softmax")
  %y1 = memopt.matmul %p1, %v : (tensor<1x2x1024x1024xf32>, tensor<1x2x1024x8xf32>) -> tensor<1x2x1024x8xf32>
  return %y0, %y1 : tensor<1x2x1024x8xf32>, tensor<1x2x1024x8xf32>
}
