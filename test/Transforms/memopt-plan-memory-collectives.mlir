// The planner and collectives in flight (memopt-bucket-collectives): a
// bucket's buffers stay alive until its memopt.wait_collectives, so nothing
// the backward computes meanwhile reuses their bytes; a prefetched ZeRO-3
// gather's buffer is alive from its group's issue.
// RUN: memopt-opt %s --split-input-file --memopt-bucket-collectives="first-bucket-mib=0.0009765625 bucket-mib=0.0009765625 gather-mib=0.0009765625" --memopt-bufferize --memopt-plan-memory | FileCheck %s
// RUN: memopt-opt %s --split-input-file --memopt-bucket-collectives="bucket-mib=0 gather-mib=0" --memopt-bufferize --memopt-plan-memory | FileCheck %s --check-prefix=SYNC

// ZeRO-1, two 1 KiB gradients, one bucket each (1 KiB caps). Overlapped:
// the first gradient %g1 and its shard %s1 are read and written by the
// reduce-scatter until the wait, which comes after the second gradient %g0
// is computed and sent: all four are alive together and get disjoint bytes
// (%g1 [0, 1024), %g0 [1024, 2048), %s1 [2048, 2560), %s0 [2560, 3072)).
// CHECK-LABEL: func.func @zero1
// CHECK-SAME: memopt.arena_size = 3072 : i64
// CHECK: memopt.relu %arg0 {memopt.offsets = array<i64: 0>}
// CHECK-NEXT: memopt.reduce_scatter {{.*}}bucket = 0 : i64, memopt.offsets = array<i64: 2048>
// CHECK-NEXT: memopt.exp %arg0 {memopt.offsets = array<i64: 1024>}
// CHECK-NEXT: memopt.reduce_scatter {{.*}}bucket = 1 : i64, memopt.offsets = array<i64: 2560>
// CHECK-NEXT: memopt.wait_collectives {{.*}}bucket = 0 : i64
// Synchronous (no buckets): %g1 dies at its reduce-scatter and %g0 reuses
// its bytes.
// SYNC-LABEL: func.func @zero1
// SYNC-SAME: memopt.arena_size = 1536 : i64
// SYNC: memopt.relu %arg0 {memopt.offsets = array<i64: 0>}
// SYNC-NEXT: memopt.reduce_scatter {{.*}}memopt.offsets = array<i64: 1024>
// SYNC: memopt.exp %arg0 {memopt.offsets = array<i64: 0>}
func.func @zero1(%x: tensor<256xf32>) -> tensor<256xf32> attributes {memopt.data_parallel = {ranks = 2 : i64, shard = "optimizer"}} {
  %w0 = memopt.variable "w0" {initial_value = dense<0.5> : tensor<256xf32>, role = "parameter"} : tensor<256xf32>
  %w1 = memopt.variable "w1" {initial_value = dense<0.5> : tensor<256xf32>, role = "parameter"} : tensor<256xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %g1 = memopt.relu %x : tensor<256xf32>
  %s1 = memopt.reduce_scatter %g1 {ranks = 2 : i64} : (tensor<256xf32>) -> tensor<128xf32>
  memopt.sgd_update %w1, %s1, lr %lr {shards = 2 : i64} : tensor<256xf32>, tensor<128xf32>, tensor<f32>
  memopt.all_gather %w1 {ranks = 2 : i64} : tensor<256xf32>
  %g0 = memopt.exp %x : tensor<256xf32>
  %s0 = memopt.reduce_scatter %g0 {ranks = 2 : i64} : (tensor<256xf32>) -> tensor<128xf32>
  memopt.sgd_update %w0, %s0, lr %lr {shards = 2 : i64} : tensor<256xf32>, tensor<128xf32>, tensor<f32>
  memopt.all_gather %w0 {ranks = 2 : i64} : tensor<256xf32>
  return %x : tensor<256xf32>
}

// -----

// DDP: the all-reduce still writes over its gradient in place although the
// wait reads the gradient too (the wait is part of the collective it
// waits for), and the next gradient does not reuse the in-flight bytes.
// CHECK-LABEL: func.func @ddp
// CHECK-SAME: memopt.arena_size = 2048 : i64
// CHECK: memopt.relu %arg0 {memopt.offsets = array<i64: 0>}
// CHECK-NEXT: memopt.all_reduce {{.*}}bucket = 0 : i64, memopt.in_place = 0 : i64, memopt.offsets = array<i64: 0>
// CHECK-NEXT: memopt.exp %arg0 {memopt.offsets = array<i64: 1024>}
// CHECK-NEXT: memopt.all_reduce {{.*}}bucket = 1 : i64, memopt.in_place = 0 : i64, memopt.offsets = array<i64: 1024>
// SYNC-LABEL: func.func @ddp
// SYNC-SAME: memopt.arena_size = 1024 : i64
// SYNC: memopt.all_reduce {{.*}}memopt.in_place = 0 : i64, memopt.offsets = array<i64: 0>
// SYNC: memopt.exp %arg0 {memopt.offsets = array<i64: 0>}
func.func @ddp(%x: tensor<256xf32>) -> tensor<256xf32> attributes {memopt.data_parallel = {ranks = 2 : i64, shard = "none"}} {
  %w0 = memopt.variable "w0" {initial_value = dense<0.5> : tensor<256xf32>, role = "parameter"} : tensor<256xf32>
  %w1 = memopt.variable "w1" {initial_value = dense<0.5> : tensor<256xf32>, role = "parameter"} : tensor<256xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %g1 = memopt.relu %x : tensor<256xf32>
  %r1 = memopt.all_reduce %g1 : (tensor<256xf32>) -> tensor<256xf32>
  memopt.sgd_update %w1, %r1, lr %lr : tensor<256xf32>, tensor<256xf32>, tensor<f32>
  %g0 = memopt.exp %x : tensor<256xf32>
  %r0 = memopt.all_reduce %g0 : (tensor<256xf32>) -> tensor<256xf32>
  memopt.sgd_update %w0, %r0, lr %lr : tensor<256xf32>, tensor<256xf32>, tensor<f32>
  return %x : tensor<256xf32>
}

// -----

// ZeRO-3, 1 KiB gather groups: w1's gather is prefetched (issued before
// layer 0's ops), so from its issue to its reader it keeps bytes of its own:
// layer 0's temporary %a0, alive meanwhile, gets others. Synchronous, the
// gather sits after %a0 died and reuses its bytes.
// CHECK-LABEL: func.func @zero3
// CHECK-SAME: memopt.arena_size = 3072 : i64
// CHECK: memopt.gather_parameter %{{.*}} {bucket = 0 : i64, memopt.offsets = array<i64: [[F0:[0-9]+]]>
// CHECK-NEXT: memopt.wait_collectives {{.*}}bucket = 0 : i64
// CHECK-NEXT: memopt.gather_parameter %{{.*}} {bucket = 1 : i64, memopt.offsets = array<i64: [[F1:[0-9]+]]>
// CHECK-NEXT: memopt.mul %arg0, %{{.*}} {memopt.in_place = 1 : i64, memopt.offsets = array<i64: [[F0]]>}
// CHECK-NEXT: memopt.exp %arg0 {memopt.offsets = array<i64: [[A0:[0-9]+]]>}
// CHECK-NOT: array<i64: [[F1]]>
// CHECK: memopt.wait_collectives {{.*}}bucket = 1 : i64
// SYNC-LABEL: func.func @zero3
// SYNC-SAME: memopt.arena_size = 2048 : i64
// SYNC: memopt.exp %arg0 {memopt.offsets = array<i64: [[A0:[0-9]+]]>}
// SYNC: memopt.gather_parameter %{{.*}} {memopt.offsets = array<i64: [[A0]]>
func.func @zero3(%x: tensor<256xf32>) -> tensor<256xf32> attributes {memopt.data_parallel = {ranks = 2 : i64, shard = "parameters"}} {
  %w0 = memopt.variable "w0" {initial_value = dense<0.5> : tensor<256xf32>, memopt.shards = 2 : i64, role = "parameter"} : tensor<128xf32>
  %w1 = memopt.variable "w1" {initial_value = dense<0.25> : tensor<256xf32>, memopt.shards = 2 : i64, role = "parameter"} : tensor<128xf32>
  %f0 = memopt.gather_parameter %w0 {ranks = 2 : i64} : (tensor<128xf32>) -> tensor<256xf32>
  %y0 = memopt.mul %x, %f0 : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  %a0 = memopt.exp %x : tensor<256xf32>
  %b0 = memopt.mul %y0, %a0 : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  %f1 = memopt.gather_parameter %w1 {ranks = 2 : i64} : (tensor<128xf32>) -> tensor<256xf32>
  %y1 = memopt.mul %b0, %f1 : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  return %y1 : tensor<256xf32>
}
