// RUN: memopt-opt %s --canonicalize --split-input-file | FileCheck %s

// A tied LM head: x @ transpose(W) becomes a gemm reading W transposed; the
// leading batch of x folds into M through views, and no transpose is left.
// CHECK-LABEL: func.func @matmul_of_transposed_weight
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>, %[[W:.*]]: tensor<5x4xf32>)
// CHECK-NEXT: %[[A:.*]] = memopt.reshape %[[X]] : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT: %[[G:.*]] = memopt.gemm %[[A]], %[[W]] {transB = 1 : i64} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
// CHECK-NEXT: %[[Y:.*]] = memopt.reshape %[[G]] : (tensor<6x5xf32>) -> tensor<2x3x5xf32>
// CHECK-NEXT: return %[[Y]]
func.func @matmul_of_transposed_weight(%x: tensor<2x3x4xf32>, %w: tensor<5x4xf32>) -> tensor<2x3x5xf32> {
  %t = memopt.transpose %w {perm = array<i64: 1, 0>} : (tensor<5x4xf32>) -> tensor<4x5xf32>
  %y = memopt.matmul %x, %t : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// 2-D operands need no reshape; a transpose with another user stays for it.
// CHECK-LABEL: func.func @matmul_2d_shared_transpose
// CHECK: %[[T:.*]] = memopt.transpose %arg1
// CHECK-NEXT: %[[G:.*]] = memopt.gemm %arg0, %arg1 {transB = 1 : i64} : (tensor<3x4xf32>, tensor<5x4xf32>) -> tensor<3x5xf32>
// CHECK-NEXT: return %[[G]], %[[T]]
func.func @matmul_2d_shared_transpose(%x: tensor<3x4xf32>, %w: tensor<5x4xf32>) -> (tensor<3x5xf32>, tensor<4x5xf32>) {
  %t = memopt.transpose %w {perm = array<i64: 1, 0>} : (tensor<5x4xf32>) -> tensor<4x5xf32>
  %y = memopt.matmul %x, %t : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  return %y, %t : tensor<3x5xf32>, tensor<4x5xf32>
}

// -----

// A batched transposed operand (attention's K^T) is not a matrix: left alone.
// CHECK-LABEL: func.func @batched_transpose_kept
// CHECK: memopt.transpose
// CHECK: memopt.matmul
// CHECK-NOT: memopt.gemm
func.func @batched_transpose_kept(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>) -> tensor<2x3x3xf32> {
  %t = memopt.transpose %k {perm = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  %y = memopt.matmul %q, %t : (tensor<2x3x4xf32>, tensor<2x4x3xf32>) -> tensor<2x3x3xf32>
  return %y : tensor<2x3x3xf32>
}

// -----

// A 1-D left operand has no row dimension to fold: left alone.
// CHECK-LABEL: func.func @vector_times_transposed_matrix
// CHECK: memopt.matmul
func.func @vector_times_transposed_matrix(%x: tensor<4xf32>, %w: tensor<5x4xf32>) -> tensor<5xf32> {
  %t = memopt.transpose %w {perm = array<i64: 1, 0>} : (tensor<5x4xf32>) -> tensor<4x5xf32>
  %y = memopt.matmul %x, %t : (tensor<4xf32>, tensor<4x5xf32>) -> tensor<5xf32>
  return %y : tensor<5xf32>
}

// -----

// Gemm flips its trans flags instead of reading transposed copies.
// CHECK-LABEL: func.func @gemm_of_transposes
// CHECK-NEXT: %[[G:.*]] = memopt.gemm %arg0, %arg1, %arg2 {transA = 1 : i64} : (tensor<4x3xf32>, tensor<4x5xf32>, tensor<5xf32>) -> tensor<3x5xf32>
// CHECK-NEXT: return %[[G]]
func.func @gemm_of_transposes(%a: tensor<4x3xf32>, %b: tensor<4x5xf32>, %c: tensor<5xf32>) -> tensor<3x5xf32> {
  %at = memopt.transpose %a {perm = array<i64: 1, 0>} : (tensor<4x3xf32>) -> tensor<3x4xf32>
  %bt = memopt.transpose %b {perm = array<i64: 1, 0>} : (tensor<4x5xf32>) -> tensor<5x4xf32>
  %y = memopt.gemm %at, %bt, %c {transB = 1 : i64} : (tensor<3x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<3x5xf32>
  return %y : tensor<3x5xf32>
}

// -----

// A dropout without a key (inference: the importer's training-mode Dropout
// that memopt-make-trainable did not key) and one with ratio 0 are the
// identity; a keyed one stays.
// CHECK-LABEL: func.func @dropout_identity
// CHECK-NEXT: %[[D:.*]] = memopt.dropout %arg0, key %arg1 {ratio = 5.000000e-01 : f32, stream = 2 : i64}
// CHECK-NEXT: return %arg0, %arg0, %[[D]]
func.func @dropout_identity(%x: tensor<4xf32>, %key: tensor<2xi64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %a = memopt.dropout %x {ratio = 0.5 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  %b = memopt.dropout %x, key %key {ratio = 0.0 : f32, stream = 1 : i64} : (tensor<4xf32>, tensor<2xi64>) -> tensor<4xf32>
  %c = memopt.dropout %x, key %key {ratio = 0.5 : f32, stream = 2 : i64} : (tensor<4xf32>, tensor<2xi64>) -> tensor<4xf32>
  return %a, %b, %c : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Updates and the overflow check read a low gradient directly when its
// widening cast has no other users: the f32 copy is never made (the kernels
// widen on load). A cast with another user stays.
// CHECK-LABEL: func.func @low_gradients
// CHECK-DAG: %[[P:.*]] = memopt.variable "p"
// CHECK-DAG: %[[Q:.*]] = memopt.variable "q"
// CHECK: %[[CQ:.*]] = memopt.cast %arg1 : (tensor<4xbf16>) -> tensor<4xf32>
// CHECK: %[[F:.*]] = memopt.found_inf %arg0, %[[CQ]] : (tensor<4xf16>, tensor<4xf32>) -> tensor<f32>
// CHECK: memopt.sgd_update %[[P]], %arg0, lr %{{.*}} loss_scale %{{.*}}, found_inf %[[F]] : tensor<4xf32>, tensor<4xf16>
// CHECK: memopt.adamw_update %[[Q]], %[[CQ]],
// CHECK: return %[[CQ]]
func.func @low_gradients(%g: tensor<4xf16>, %h: tensor<4xbf16>) -> tensor<4xf32> {
  %p = memopt.variable "p" {role = "parameter"} : tensor<4xf32>
  %q = memopt.variable "q" {role = "parameter"} : tensor<4xf32>
  %m = memopt.variable "q.exp_avg" {role = "optimizer_state"} : tensor<4xf32>
  %v = memopt.variable "q.exp_avg_sq" {role = "optimizer_state"} : tensor<4xf32>
  %lr = memopt.variable "memopt.learning_rate" {role = "learning_rate"} : tensor<f32>
  %step = memopt.variable "memopt.step" {role = "step"} : tensor<f32>
  %scale = memopt.variable "memopt.loss_scale" {role = "loss_scale"} : tensor<f32>
  %state = memopt.variable "memopt.loss_scale_state" {role = "loss_scale_state"} : tensor<2xf32>
  %cg = memopt.cast %g : (tensor<4xf16>) -> tensor<4xf32>
  %ch = memopt.cast %h : (tensor<4xbf16>) -> tensor<4xf32>
  %found = memopt.found_inf %cg, %ch : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  memopt.sgd_update %p, %cg, lr %lr loss_scale %scale, found_inf %found : tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>
  memopt.adamw_update %q, %ch, %m, %v, lr %lr, step %step loss_scale %scale, found_inf %found, loss_scale_state %state : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<2xf32>
  return %ch : tensor<4xf32>
}

// -----

// An unbind (every index of axis 0 gathered once, as ViT's packed q, k, v):
// one split, each piece reshaped to its gather's result.
// CHECK-LABEL: func.func @unbind_to_split
// CHECK-NEXT: %[[S:.*]]:3 = memopt.split %arg0 {split = array<i64: 1, 1, 1>} : (tensor<3x2x4xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
// CHECK-DAG: %[[Q:.*]] = memopt.reshape %[[S]]#0 : (tensor<1x2x4xf32>) -> tensor<2x4xf32>
// CHECK-DAG: %[[K:.*]] = memopt.reshape %[[S]]#1 : (tensor<1x2x4xf32>) -> tensor<2x4xf32>
// CHECK-DAG: %[[V:.*]] = memopt.reshape %[[S]]#2 : (tensor<1x2x4xf32>) -> tensor<2x4xf32>
// CHECK: return %[[K]], %[[V]], %[[Q]]
// CHECK-NOT: memopt.gather
func.func @unbind_to_split(%x: tensor<3x2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %i0 = memopt.constant dense<0> : tensor<i64>
  %i1 = memopt.constant dense<-2> : tensor<i64>
  %i2 = memopt.constant dense<2> : tensor<i64>
  %k = memopt.gather %x, %i1 : (tensor<3x2x4xf32>, tensor<i64>) -> tensor<2x4xf32>
  %v = memopt.gather %x, %i2 : (tensor<3x2x4xf32>, tensor<i64>) -> tensor<2x4xf32>
  %q = memopt.gather %x, %i0 : (tensor<3x2x4xf32>, tensor<i64>) -> tensor<2x4xf32>
  return %k, %v, %q : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Not an unbind: an index missing, an index twice, or another user of the
// data: the gathers stay.
// CHECK-LABEL: func.func @partial_unbind_stays
// CHECK-COUNT-4: memopt.gather
// CHECK-NOT: memopt.split
func.func @partial_unbind_stays(%x: tensor<3x4xf32>, %y: tensor<2x4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x4xf32>) {
  %i0 = memopt.constant dense<0> : tensor<i64>
  %i1 = memopt.constant dense<1> : tensor<i64>
  %a = memopt.gather %x, %i0 : (tensor<3x4xf32>, tensor<i64>) -> tensor<4xf32>
  %b = memopt.gather %x, %i1 : (tensor<3x4xf32>, tensor<i64>) -> tensor<4xf32>
  %c = memopt.gather %y, %i0 : (tensor<2x4xf32>, tensor<i64>) -> tensor<4xf32>
  %d = memopt.gather %y, %i1 : (tensor<2x4xf32>, tensor<i64>) -> tensor<4xf32>
  %e = memopt.relu %y : tensor<2x4xf32>
  return %a, %b, %c, %d, %e : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x4xf32>
}
