// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-append-loss | FileCheck %s
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-append-loss="kind=mse" | FileCheck %s --check-prefix=MSE

// Cross-entropy over the last axis of a language model's [B, S, V] logits:
// labels [B, S] become a new i64 argument, the loss the only result.
// CHECK-LABEL: func.func @lm
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x5xf32> {memopt.name = "x"}, %[[L:.*]]: tensor<2x3xi64> {memopt.name = "labels"}) -> (tensor<f32> {memopt.name = "loss"})
// CHECK: %[[LOSS:.*]] = memopt.softmax_cross_entropy %{{.*}}, %[[L]] :
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>
// MSE-LABEL: func.func @lm
// MSE-SAME: %{{.*}}: tensor<2x3x5xf32> {memopt.name = "target"}
// MSE: %[[D:.*]] = memopt.sub
// MSE-NEXT: %[[S:.*]] = memopt.mul %[[D]], %[[D]]
// MSE-NEXT: %[[M:.*]] = memopt.reduce_mean %[[S]] {axes = array<i64: 0, 1, 2>, keepdims = 0 : i64}
// MSE-NEXT: return %[[M]]
func.func @lm(%x: tensor<2x3x5xf32> {memopt.name = "x"}) -> (tensor<2x3x5xf32> {memopt.name = "logits"}) {
  %y = memopt.relu %x : tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// expected-error @+1 {{the model has several float outputs (a, b); choose the one the loss reads with --loss-output}}
func.func @two_outputs(%x: tensor<2x3xf32>) -> (tensor<2x3xf32> {memopt.name = "a"}, tensor<2x3xf32> {memopt.name = "b"}) {
  %y = memopt.relu %x : tensor<2x3xf32>
  return %x, %y : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// After mixed precision (training) the output is a cast of low logits:
// cross-entropy reads the f16 logits themselves (its kernel computes in f32),
// so no f32 copy of the logits (nor of their gradient) is made; mse reads
// the f32 output.
// CHECK-LABEL: func.func @low_logits
// CHECK: %[[L:.*]] = memopt.matmul {{.*}} -> tensor<2x5xf16>
// CHECK: %[[LOSS:.*]] = memopt.softmax_cross_entropy %[[L]], %{{.*}} : (tensor<2x5xf16>, tensor<2xi64>) -> tensor<f32>
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>
// MSE-LABEL: func.func @low_logits
// MSE: %[[W:.*]] = memopt.cast %{{.*}} : (tensor<2x5xf16>) -> tensor<2x5xf32>
// MSE-NEXT: memopt.sub %[[W]], %{{.*}} : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
func.func @low_logits(%x: tensor<2x4xf16>, %w: tensor<4x5xf16>) -> tensor<2x5xf32> {
  %l = memopt.matmul %x, %w : (tensor<2x4xf16>, tensor<4x5xf16>) -> tensor<2x5xf16>
  %y = memopt.cast %l : (tensor<2x5xf16>) -> tensor<2x5xf32>
  return %y : tensor<2x5xf32>
}
