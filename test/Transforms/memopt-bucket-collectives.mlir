// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-bucket-collectives="first-bucket-mib=0.015625 bucket-mib=0.03125" | FileCheck %s
// RUN: memopt-opt %s --split-input-file --memopt-bucket-collectives="first-bucket-mib=0.015625 bucket-mib=0.03125 report=true" -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: memopt-opt %s --split-input-file --memopt-bucket-collectives="bucket-mib=0" | FileCheck %s --check-prefix=OFF
// RUN: not memopt-opt %s --split-input-file --memopt-bucket-collectives="first-bucket-mib=0.015625 bucket-mib=0.03125" --memopt-bucket-collectives 2>&1 | FileCheck %s --check-prefix=TWICE

// DDP (shard none): four 16 KiB gradients complete in the order w3, w2, w1,
// w0 (the reverse of the forward). First bucket cap 16 KiB, then 32 KiB:
// buckets {w3}, {w2, w1}, {w0}. A bucket is issued where its last gradient
// is complete (w2's all-reduce moves down to w1's); its wait comes after the
// next bucket's issue and takes every buffer the bucket's collectives read
// or write; the updates move after their own bucket's wait.
// CHECK-LABEL: func.func @ddp
// CHECK: %[[G3:.*]] = memopt.relu
// CHECK-NEXT: %[[R3:.*]] = memopt.all_reduce %[[G3]] {bucket = 0 : i64}
// CHECK-NEXT: %[[G2:.*]] = memopt.exp
// CHECK-NEXT: %[[G1:.*]] = memopt.sqrt
// CHECK-NEXT: %[[R2:.*]] = memopt.all_reduce %[[G2]] {bucket = 1 : i64}
// CHECK-NEXT: %[[R1:.*]] = memopt.all_reduce %[[G1]] {bucket = 1 : i64}
// CHECK-NEXT: memopt.wait_collectives %[[G3]], %[[R3]] {bucket = 0 : i64}
// CHECK-NEXT: memopt.sgd_update %{{.*}}, %[[R3]], lr
// CHECK-NEXT: %[[G0:.*]] = memopt.tanh
// CHECK-NEXT: %[[R0:.*]] = memopt.all_reduce %[[G0]] {bucket = 2 : i64}
// CHECK-NEXT: memopt.wait_collectives %[[G2]], %[[R2]], %[[G1]], %[[R1]] {bucket = 1 : i64}
// CHECK-NEXT: memopt.sgd_update %{{.*}}, %[[R2]], lr
// CHECK-NEXT: memopt.sgd_update %{{.*}}, %[[R1]], lr
// The last bucket has no next one to overlap: its wait is where its update
// was.
// CHECK-NEXT: memopt.wait_collectives %[[G0]], %[[R0]] {bucket = 2 : i64}
// CHECK-NEXT: memopt.sgd_update %{{.*}}, %[[R0]], lr
// CHECK-NEXT: return
// REPORT: memopt-bucket-collectives: 3 buckets (4 gradient collectives): 1 x 16384 bytes, 2 x 32768 bytes, 1 x 16384 bytes
// OFF-LABEL: func.func @ddp
// OFF-NOT: bucket
// OFF-NOT: memopt.wait_collectives
// TWICE: error: the collectives are bucketed already: run memopt-bucket-collectives once
func.func @ddp(%x: tensor<64x64xf32>) -> tensor<64x64xf32> attributes {memopt.data_parallel = {ranks = 2 : i64, shard = "none"}} {
  %w0 = memopt.variable "w0" {initial_value = dense<0.5> : tensor<64x64xf32>, role = "parameter"} : tensor<64x64xf32>
  %w1 = memopt.variable "w1" {initial_value = dense<0.5> : tensor<64x64xf32>, role = "parameter"} : tensor<64x64xf32>
  %w2 = memopt.variable "w2" {initial_value = dense<0.5> : tensor<64x64xf32>, role = "parameter"} : tensor<64x64xf32>
  %w3 = memopt.variable "w3" {initial_value = dense<0.5> : tensor<64x64xf32>, role = "parameter"} : tensor<64x64xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %g3 = memopt.relu %x : tensor<64x64xf32>
  %r3 = memopt.all_reduce %g3 : (tensor<64x64xf32>) -> tensor<64x64xf32>
  memopt.sgd_update %w3, %r3, lr %lr : tensor<64x64xf32>, tensor<64x64xf32>, tensor<f32>
  %g2 = memopt.exp %x : tensor<64x64xf32>
  %r2 = memopt.all_reduce %g2 : (tensor<64x64xf32>) -> tensor<64x64xf32>
  memopt.sgd_update %w2, %r2, lr %lr : tensor<64x64xf32>, tensor<64x64xf32>, tensor<f32>
  %g1 = memopt.sqrt %x : tensor<64x64xf32>
  %r1 = memopt.all_reduce %g1 : (tensor<64x64xf32>) -> tensor<64x64xf32>
  memopt.sgd_update %w1, %r1, lr %lr : tensor<64x64xf32>, tensor<64x64xf32>, tensor<f32>
  %g0 = memopt.tanh %x : tensor<64x64xf32>
  %r0 = memopt.all_reduce %g0 : (tensor<64x64xf32>) -> tensor<64x64xf32>
  memopt.sgd_update %w0, %r0, lr %lr : tensor<64x64xf32>, tensor<64x64xf32>, tensor<f32>
  return %x : tensor<64x64xf32>
}

// -----

// ZeRO-1: the reduce-scatters are bucketed; each update and the all-gather
// that completes its parameter (it writes what the update wrote) move after
// the bucket's wait together, in their order. The all-gathers are not
// bucketed. The overflow flag's all-reduce (max) is not a gradient's.
// CHECK-LABEL: func.func @zero1
// CHECK: %[[G1:.*]] = memopt.relu
// CHECK-NEXT: %[[S1:.*]] = memopt.reduce_scatter %[[G1]] {bucket = 0 : i64, ranks = 2 : i64}
// CHECK-NEXT: %[[G0:.*]] = memopt.exp
// CHECK-NEXT: %[[S0:.*]] = memopt.reduce_scatter %[[G0]] {bucket = 1 : i64, ranks = 2 : i64}
// CHECK-NEXT: memopt.wait_collectives %[[G1]], %[[S1]] {bucket = 0 : i64}
// CHECK-NEXT: memopt.sgd_update %[[W1:.*]], %[[S1]], lr
// CHECK-NEXT: memopt.all_gather %[[W1]] {ranks = 2 : i64}
// CHECK-NEXT: memopt.wait_collectives %[[G0]], %[[S0]] {bucket = 1 : i64}
// CHECK-NEXT: memopt.sgd_update %[[W0:.*]], %[[S0]], lr
// CHECK-NEXT: memopt.all_gather %[[W0]] {ranks = 2 : i64}
// CHECK-NOT: bucket
// CHECK: return
func.func @zero1(%x: tensor<64x64xf32>) -> tensor<64x64xf32> attributes {memopt.data_parallel = {ranks = 2 : i64, shard = "optimizer"}} {
  %w0 = memopt.variable "w0" {initial_value = dense<0.5> : tensor<64x64xf32>, role = "parameter"} : tensor<64x64xf32>
  %w1 = memopt.variable "w1" {initial_value = dense<0.5> : tensor<64x64xf32>, role = "parameter"} : tensor<64x64xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %g1 = memopt.relu %x : tensor<64x64xf32>
  %s1 = memopt.reduce_scatter %g1 {ranks = 2 : i64} : (tensor<64x64xf32>) -> tensor<2048xf32>
  memopt.sgd_update %w1, %s1, lr %lr {shards = 2 : i64} : tensor<64x64xf32>, tensor<2048xf32>, tensor<f32>
  memopt.all_gather %w1 {ranks = 2 : i64} : tensor<64x64xf32>
  %g0 = memopt.exp %x : tensor<64x64xf32>
  %s0 = memopt.reduce_scatter %g0 {ranks = 2 : i64} : (tensor<64x64xf32>) -> tensor<2048xf32>
  memopt.sgd_update %w0, %s0, lr %lr {shards = 2 : i64} : tensor<64x64xf32>, tensor<2048xf32>, tensor<f32>
  memopt.all_gather %w0 {ranks = 2 : i64} : tensor<64x64xf32>
  %flag = memopt.relu %x : tensor<64x64xf32>
  return %flag : tensor<64x64xf32>
}

// -----

// Without memopt.data_parallel (a single-process step) the pass does
// nothing.
// CHECK-LABEL: func.func @single
// CHECK-NOT: bucket
// CHECK-NOT: memopt.wait_collectives
func.func @single(%x: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %w0 = memopt.variable "w0" {initial_value = dense<0.5> : tensor<64x64xf32>, role = "parameter"} : tensor<64x64xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %g0 = memopt.relu %x : tensor<64x64xf32>
  %r0 = memopt.all_reduce %g0 : (tensor<64x64xf32>) -> tensor<64x64xf32>
  memopt.sgd_update %w0, %r0, lr %lr : tensor<64x64xf32>, tensor<64x64xf32>, tensor<f32>
  return %x : tensor<64x64xf32>
}

// -----

// Dynamic loss scaling: the overflow flag's all-reduce (max) feeds the
// updates but is not a gradient: it stays out of the buckets, where it was.
// CHECK-LABEL: func.func @flag
// CHECK: %[[F:.*]] = memopt.all_reduce %{{.*}} {reduction = "max"}
// CHECK: memopt.all_reduce %{{.*}} {bucket = 0 : i64}
// CHECK: memopt.wait_collectives
// CHECK-NEXT: memopt.sgd_update {{.*}}found_inf %[[F]]
func.func @flag(%x: tensor<64x64xf32>, %f: tensor<f32>) -> tensor<64x64xf32> attributes {memopt.data_parallel = {ranks = 2 : i64, shard = "none"}} {
  %w0 = memopt.variable "w0" {initial_value = dense<0.5> : tensor<64x64xf32>, role = "parameter"} : tensor<64x64xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %s = memopt.variable "memopt.loss_scale" {initial_value = dense<1024.0> : tensor<f32>, role = "loss_scale"} : tensor<f32>
  %any = memopt.all_reduce %f {reduction = "max"} : (tensor<f32>) -> tensor<f32>
  %g0 = memopt.relu %x : tensor<64x64xf32>
  %r0 = memopt.all_reduce %g0 : (tensor<64x64xf32>) -> tensor<64x64xf32>
  memopt.sgd_update %w0, %r0, lr %lr loss_scale %s, found_inf %any : tensor<64x64xf32>, tensor<64x64xf32>, tensor<f32>, tensor<f32>, tensor<f32>
  return %x : tensor<64x64xf32>
}
