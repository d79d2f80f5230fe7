// RUN: memopt-opt %s -split-input-file --memopt-fuse-attention | FileCheck %s
// RUN: memopt-opt %s -split-input-file --mlir-disable-threading --memopt-fuse-attention=report -o /dev/null | FileCheck %s --check-prefix=REPORT

// Attention dropout (issue 26): softmax -> memopt.dropout (keyed by
// memopt-make-trainable) -> matmul fuses, the dropout's ratio, stream and
// key carried into the op (its mask is the dropout's: the row-major index of
// the probabilities).
// CHECK-LABEL: func.func @softmax_dropout_matmul
// CHECK-SAME: (%[[Q:.*]]: tensor<2x3x4x8xf32>, %[[KT:.*]]: tensor<2x3x8x4xf32>, %[[V:.*]]: tensor<2x3x4x8xf32>, %[[KEY:.*]]: tensor<2xi64>)
// CHECK-NOT: memopt.dropout
// CHECK: %[[Y:.*]] = memopt.attention %[[Q]], %[[KT]], %[[V]] dropout_key %[[KEY]] {dropout_ratio = 1.000000e-01 : f32, dropout_stream = 3 : i64, key_transposed = true, scale = 1.250000e-01 : f32} : (tensor<2x3x4x8xf32>, tensor<2x3x8x4xf32>, tensor<2x3x4x8xf32>, tensor<2xi64>) -> tensor<2x3x4x8xf32>
// CHECK-NEXT: return %[[Y]]
// REPORT: memopt-fuse-attention @softmax_dropout_matmul: 1 attentions fused (0 causal, 0 safe softmax, 1 dropout), 768 bytes of scores and probabilities removed
// REPORT-NEXT: 'line {{[0-9]+}}': fused, mask none; dropout 0.1 (stream 3)
func.func @softmax_dropout_matmul(%q: tensor<2x3x4x8xf32>, %kt: tensor<2x3x8x4xf32>, %v: tensor<2x3x4x8xf32>, %key: tensor<2xi64>) -> tensor<2x3x4x8xf32> {
  %c = memopt.constant dense<0.125> : tensor<f32>
  %s = memopt.matmul %q, %kt : (tensor<2x3x4x8xf32>, tensor<2x3x8x4xf32>) -> tensor<2x3x4x4xf32>
  %d = memopt.mul %s, %c : (tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  %p = memopt.softmax %d : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %pd = memopt.dropout %p, key %key {ratio = 0.1 : f32, stream = 3 : i64} : (tensor<2x3x4x4xf32>, tensor<2xi64>) -> tensor<2x3x4x4xf32>
  %y = memopt.matmul %pd, %v : (tensor<2x3x4x4xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  return %y : tensor<2x3x4x8xf32>
}

// -----

// An inference dropout (keyless: the identity, which canonicalization would
// remove) and a dropout of ratio 0 do not block the fusion, and give none.
// CHECK-LABEL: func.func @inference_dropout
// CHECK-NOT: memopt.dropout
// CHECK: memopt.attention %arg0, %arg1, %arg2 {key_transposed = true, scale = 1.250000e-01 : f32}
// CHECK-NOT: dropout
// REPORT: memopt-fuse-attention @inference_dropout: 1 attentions fused (0 causal, 0 safe softmax), 768 bytes
func.func @inference_dropout(%q: tensor<2x3x4x8xf32>, %kt: tensor<2x3x8x4xf32>, %v: tensor<2x3x4x8xf32>, %key: tensor<2xi64>) -> tensor<2x3x4x8xf32> {
  %c = memopt.constant dense<0.125> : tensor<f32>
  %s = memopt.matmul %q, %kt : (tensor<2x3x4x8xf32>, tensor<2x3x8x4xf32>) -> tensor<2x3x4x4xf32>
  %d = memopt.mul %s, %c : (tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  %p = memopt.softmax %d : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %p1 = memopt.dropout %p {ratio = 0.1 : f32} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %p2 = memopt.dropout %p1, key %key {ratio = 0.0 : f32, stream = 2 : i64} : (tensor<2x3x4x4xf32>, tensor<2xi64>) -> tensor<2x3x4x4xf32>
  %y = memopt.matmul %p2, %v : (tensor<2x3x4x4xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  return %y : tensor<2x3x4x8xf32>
}

// -----

// torch's SDPA as the dynamo exporter writes it with a boolean mask and
// dropout_p: the safe softmax Where, then the dropout; scores viewed as
// [B*H, S, S] after the softmax (BLOOM's bmm). The views keep the row-major
// order, so the mask is the same in the attention's view.
// CHECK-LABEL: func.func @safe_softmax_view_dropout
// CHECK-NOT: memopt.dropout
// CHECK: memopt.attention %arg0, %arg1, %{{.*}} dropout_key %arg3 {dropout_ratio = 2.500000e-01 : f32, dropout_stream = 7 : i64, key_transposed = true, safe_softmax = true, scale = 1.000000e+00 : f32}
// REPORT: memopt-fuse-attention @safe_softmax_view_dropout: 1 attentions fused (0 causal, 1 safe softmax, 1 dropout)
// REPORT-NEXT: fused, mask none; safe softmax; dropout 0.25 (stream 7)
func.func @safe_softmax_view_dropout(%q: tensor<2x3x4x8xf32>, %kt: tensor<2x3x8x4xf32>, %v: tensor<6x4x8xf32>, %key: tensor<2xi64>) -> tensor<6x4x8xf32> {
  %zero = memopt.constant dense<0.0> : tensor<f32>
  %s = memopt.matmul %q, %kt : (tensor<2x3x4x8xf32>, tensor<2x3x8x4xf32>) -> tensor<2x3x4x4xf32>
  %p = memopt.softmax %s : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %nan = memopt.is_nan %p : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xi1>
  %safe = memopt.where %nan, %zero, %p : (tensor<2x3x4x4xi1>, tensor<f32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %pd = memopt.dropout %safe, key %key {ratio = 0.25 : f32, stream = 7 : i64} : (tensor<2x3x4x4xf32>, tensor<2xi64>) -> tensor<2x3x4x4xf32>
  %flat = memopt.reshape %pd : (tensor<2x3x4x4xf32>) -> tensor<6x4x4xf32>
  %y = memopt.matmul %flat, %v : (tensor<6x4x4xf32>, tensor<6x4x8xf32>) -> tensor<6x4x8xf32>
  return %y : tensor<6x4x8xf32>
}

// -----

// The dropout before the safe softmax's Where (a dropped NaN is 0, a kept one
// NaN: the Where zeroes the row either way, as the op's safe softmax does).
// CHECK-LABEL: func.func @dropout_before_safe_softmax
// CHECK-NOT: memopt.dropout
// CHECK-NOT: memopt.is_nan
// CHECK: memopt.attention %arg0, %arg1, %arg2 dropout_key %arg3 {dropout_ratio = 5.000000e-01 : f32, dropout_stream = 2 : i64, key_transposed = true, safe_softmax = true, scale = 1.000000e+00 : f32}
func.func @dropout_before_safe_softmax(%q: tensor<2x3x4x8xf32>, %kt: tensor<2x3x8x4xf32>, %v: tensor<2x3x4x8xf32>, %key: tensor<2xi64>) -> tensor<2x3x4x8xf32> {
  %zero = memopt.constant dense<0.0> : tensor<f32>
  %s = memopt.matmul %q, %kt : (tensor<2x3x4x8xf32>, tensor<2x3x8x4xf32>) -> tensor<2x3x4x4xf32>
  %p = memopt.softmax %s : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %pd = memopt.dropout %p, key %key {ratio = 0.5 : f32, stream = 2 : i64} : (tensor<2x3x4x4xf32>, tensor<2xi64>) -> tensor<2x3x4x4xf32>
  %nan = memopt.is_nan %pd : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xi1>
  %safe = memopt.where %nan, %zero, %pd : (tensor<2x3x4x4xi1>, tensor<f32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %y = memopt.matmul %safe, %v : (tensor<2x3x4x4xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  return %y : tensor<2x3x4x8xf32>
}

// -----

// Mixed precision (autocast's spelling): the softmax in f32 over f16
// scores, the dropout in f32 before the cast back, or in f16 after it.
// CHECK-LABEL: func.func @mixed_precision_dropout
// CHECK-NOT: memopt.dropout
// CHECK: memopt.attention %arg0, %arg1, %arg2 dropout_key %arg3 {dropout_ratio = 1.000000e-01 : f32, dropout_stream = 1 : i64, key_transposed = true, scale = 1.000000e+00 : f32} : (tensor<1x2x4x8xf16>, tensor<1x2x8x4xf16>, tensor<1x2x4x8xf16>, tensor<2xi64>) -> tensor<1x2x4x8xf16>
// CHECK: memopt.attention %arg0, %arg1, %arg2 dropout_key %arg3 {dropout_ratio = 1.000000e-01 : f32, dropout_stream = 2 : i64, key_transposed = true, scale = 1.000000e+00 : f32} : (tensor<1x2x4x8xf16>, tensor<1x2x8x4xf16>, tensor<1x2x4x8xf16>, tensor<2xi64>) -> tensor<1x2x4x8xf16>
func.func @mixed_precision_dropout(%q: tensor<1x2x4x8xf16>, %kt: tensor<1x2x8x4xf16>, %v: tensor<1x2x4x8xf16>, %key: tensor<2xi64>) -> (tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16>) {
  %s = memopt.matmul %q, %kt : (tensor<1x2x4x8xf16>, tensor<1x2x8x4xf16>) -> tensor<1x2x4x4xf16>
  %s32 = memopt.cast %s : (tensor<1x2x4x4xf16>) -> tensor<1x2x4x4xf32>
  %p = memopt.softmax %s32 : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %pd = memopt.dropout %p, key %key {ratio = 0.1 : f32, stream = 1 : i64} : (tensor<1x2x4x4xf32>, tensor<2xi64>) -> tensor<1x2x4x4xf32>
  %p16 = memopt.cast %pd : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf16>
  %y = memopt.matmul %p16, %v : (tensor<1x2x4x4xf16>, tensor<1x2x4x8xf16>) -> tensor<1x2x4x8xf16>
  %t = memopt.matmul %q, %kt : (tensor<1x2x4x8xf16>, tensor<1x2x8x4xf16>) -> tensor<1x2x4x4xf16>
  %t32 = memopt.cast %t : (tensor<1x2x4x4xf16>) -> tensor<1x2x4x4xf32>
  %r = memopt.softmax %t32 : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %r16 = memopt.cast %r : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf16>
  %rd = memopt.dropout %r16, key %key {ratio = 0.1 : f32, stream = 2 : i64} : (tensor<1x2x4x4xf16>, tensor<2xi64>) -> tensor<1x2x4x4xf16>
  %z = memopt.matmul %rd, %v : (tensor<1x2x4x4xf16>, tensor<1x2x4x8xf16>) -> tensor<1x2x4x8xf16>
  return %y, %z : tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16>
}

// -----

// Not folded: two dropouts of the probabilities (two masks; the op applies
// one), dropped probabilities used twice (they are needed anyway), and a
// dropout of the scores before the softmax (not a step).
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: memopt.attention
// CHECK: return
// REPORT: memopt-fuse-attention @not_fused: 0 attentions fused (0 causal, 0 safe softmax)
// REPORT-NEXT: 'two_masks': not fused at memopt.dropout 'second': a second dropout of the probabilities (the fused op applies one mask)
// REPORT-NEXT: 'used_twice': not fused at func.return 'return': the probabilities are used 2 times (they are needed besides MatMul(P, V))
// REPORT-NEXT: 'scores_dropout': not fused at memopt.dropout 'on_scores': not a step between MatMul(Q, K^T) and the softmax (a scale, a mask or bias term, a batch view or a float cast)
func.func @not_fused(%q: tensor<1x2x4x8xf32>, %kt: tensor<1x2x8x4xf32>, %v: tensor<1x2x4x8xf32>, %key: tensor<2xi64>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) {
  %s = memopt.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %p = memopt.softmax %s : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> loc("two_masks")
  %p1 = memopt.dropout %p, key %key {ratio = 0.1 : f32, stream = 1 : i64} : (tensor<1x2x4x4xf32>, tensor<2xi64>) -> tensor<1x2x4x4xf32>
  %p2 = memopt.dropout %p1, key %key {ratio = 0.1 : f32, stream = 2 : i64} : (tensor<1x2x4x4xf32>, tensor<2xi64>) -> tensor<1x2x4x4xf32> loc("second")
  %y = memopt.matmul %p2, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %t = memopt.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %r = memopt.softmax %t : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> loc("used_twice")
  %rd = memopt.dropout %r, key %key {ratio = 0.1 : f32, stream = 3 : i64} : (tensor<1x2x4x4xf32>, tensor<2xi64>) -> tensor<1x2x4x4xf32>
  %z = memopt.matmul %rd, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> loc("kept_user")
  %u = memopt.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %ud = memopt.dropout %u, key %key {ratio = 0.1 : f32, stream = 4 : i64} : (tensor<1x2x4x4xf32>, tensor<2xi64>) -> tensor<1x2x4x4xf32> loc("on_scores")
  %up = memopt.softmax %ud : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> loc("scores_dropout")
  %w = memopt.matmul %up, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %y, %z, %rd, %w : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>
}

// -----

// A dropout of V (not of the probabilities) is an ordinary operand: V is
// the dropout's result, and the op draws no mask of its own.
// CHECK-LABEL: func.func @dropout_of_values
// CHECK: %[[VD:.*]] = memopt.dropout %arg2, key %arg3 {ratio = 1.000000e-01 : f32, stream = 5 : i64}
// CHECK: memopt.attention %arg0, %arg1, %[[VD]] {key_transposed = true, scale = 1.000000e+00 : f32}
func.func @dropout_of_values(%q: tensor<1x2x4x8xf32>, %kt: tensor<1x2x8x4xf32>, %v: tensor<1x2x4x8xf32>, %key: tensor<2xi64>) -> tensor<1x2x4x8xf32> {
  %s = memopt.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %p = memopt.softmax %s : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %vd = memopt.dropout %v, key %key {ratio = 0.1 : f32, stream = 5 : i64} : (tensor<1x2x4x8xf32>, tensor<2xi64>) -> tensor<1x2x4x8xf32>
  %y = memopt.matmul %p, %vd : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}
