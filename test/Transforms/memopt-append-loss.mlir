// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-append-loss | FileCheck %s
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-append-loss="kind=mse" | FileCheck %s --check-prefix=MSE
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-append-loss="fuse-head=false" | FileCheck %s --check-prefix=UNFUSED

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
// the f32 output. The logits are a bias-free linear layer's: by default the
// head and the loss are one linear_cross_entropy on the f16 operands, with
// the weight transposed to the classes' rows [C, K].
// CHECK-LABEL: func.func @low_logits
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf16>, %[[W:.*]]: tensor<4x5xf16>, %[[LB:.*]]: tensor<2xi64> {memopt.name = "labels"})
// CHECK: %[[T:.*]] = memopt.transpose %[[W]] {perm = array<i64: 1, 0>} : (tensor<4x5xf16>) -> tensor<5x4xf16>
// CHECK: %[[LOSS:.*]], %{{.*}} = memopt.linear_cross_entropy %[[X]], %[[T]], %[[LB]] : (tensor<2x4xf16>, tensor<5x4xf16>, tensor<2xi64>) -> (tensor<f32>, tensor<2xf32>)
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>
// UNFUSED-LABEL: func.func @low_logits
// UNFUSED: %[[L:.*]] = memopt.matmul {{.*}} -> tensor<2x5xf16>
// UNFUSED: %[[LOSS:.*]] = memopt.softmax_cross_entropy %[[L]], %{{.*}} : (tensor<2x5xf16>, tensor<2xi64>) -> tensor<f32>
// UNFUSED-NEXT: return %[[LOSS]] : tensor<f32>
// MSE-LABEL: func.func @low_logits
// MSE: %[[W:.*]] = memopt.cast %{{.*}} : (tensor<2x5xf16>) -> tensor<2x5xf32>
// MSE-NEXT: memopt.sub %[[W]], %{{.*}} : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
func.func @low_logits(%x: tensor<2x4xf16>, %w: tensor<4x5xf16>) -> tensor<2x5xf32> {
  %l = memopt.matmul %x, %w : (tensor<2x4xf16>, tensor<4x5xf16>) -> tensor<2x5xf16>
  %y = memopt.cast %l : (tensor<2x5xf16>) -> tensor<2x5xf32>
  return %y : tensor<2x5xf32>
}

// -----

// A language model's head as the exporters write nn.Linear and a tied
// embedding: MatMul(x, Transpose(W)) with W [C, K]. The fused loss reads W
// itself (no transposed copy) and x [B, S, K] against labels [B, S].
// CHECK-LABEL: func.func @tied_head
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>, %[[W:.*]]: tensor<7x4xf32>, %[[LB:.*]]: tensor<2x3xi64> {memopt.name = "labels"})
// CHECK: %[[LOSS:.*]], %{{.*}} = memopt.linear_cross_entropy %[[X]], %[[W]], %[[LB]] : (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x3xi64>) -> (tensor<f32>, tensor<2x3xf32>)
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>
// UNFUSED-LABEL: func.func @tied_head
// UNFUSED: memopt.softmax_cross_entropy %{{.*}} : (tensor<2x3x7xf32>, tensor<2x3xi64>) -> tensor<f32>
func.func @tied_head(%x: tensor<2x3x4xf32>, %w: tensor<7x4xf32>) -> tensor<2x3x7xf32> {
  %t = memopt.transpose %w {perm = array<i64: 1, 0>} : (tensor<7x4xf32>) -> tensor<4x7xf32>
  %l = memopt.matmul %x, %t : (tensor<2x3x4xf32>, tensor<4x7xf32>) -> tensor<2x3x7xf32>
  return %l : tensor<2x3x7xf32>
}

// -----

// Gemm with transB reads W [C, K] as it is; a Gemm with a bias (C) or an
// activation stays unfused.
// CHECK-LABEL: func.func @gemm_heads
// CHECK: memopt.linear_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<7x4xf32>, tensor<2xi64>)
// CHECK-LABEL: func.func @gemm_with_bias
// CHECK-NOT: linear_cross_entropy
// CHECK: memopt.softmax_cross_entropy
func.func @gemm_heads(%x: tensor<2x4xf32>, %w: tensor<7x4xf32>) -> tensor<2x7xf32> {
  %l = memopt.gemm %x, %w {transB = 1 : i64} : (tensor<2x4xf32>, tensor<7x4xf32>) -> tensor<2x7xf32>
  return %l : tensor<2x7xf32>
}
func.func @gemm_with_bias(%x: tensor<2x4xf32>, %w: tensor<7x4xf32>, %b: tensor<7xf32>) -> tensor<2x7xf32> {
  %l = memopt.gemm %x, %w, %b {transB = 1 : i64} : (tensor<2x4xf32>, tensor<7x4xf32>, tensor<7xf32>) -> tensor<2x7xf32>
  return %l : tensor<2x7xf32>
}
