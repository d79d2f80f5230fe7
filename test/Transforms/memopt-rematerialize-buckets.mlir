// RUN: memopt-opt %s --memopt-schedule --memopt-rematerialize="memory-budget=32768 bucket-mib=0.03125 report=true" | FileCheck %s --check-prefix=SYNC
// RUN: memopt-opt %s --memopt-schedule --memopt-rematerialize="memory-budget=65536 bucket-mib=0.03125" | FileCheck %s --check-prefix=KEEP
// RUN: memopt-opt %s --memopt-schedule --memopt-rematerialize="memory-budget=32768 bucket-mib=0.03125" --memopt-bucket-collectives="bucket-mib=0.03125" | FileCheck %s --check-prefix=LEFT

// Under a budget, remat plans each candidate with the gradient buckets the
// compile pipeline will add (bucket-mib). Four 16 KiB gradients: with 32 KiB
// buckets the in-flight gradients and results need 64 KiB, synchronous
// collectives 16 KiB. A 32 KiB budget is met only synchronously: the function
// is marked memopt.synchronous_collectives (the remat log says why) and
// memopt-bucket-collectives leaves it alone; a 64 KiB budget keeps the buckets.
// SYNC: memopt-rematerialize: the budget is met with synchronous collectives: with 0.03125 MiB gradient buckets the arena does not fit in the memory budget of 32.00 KiB
// SYNC: func.func @ddp{{.*}}memopt.synchronous_collectives
// KEEP: func.func @ddp
// KEEP-NOT: memopt.synchronous_collectives
// LEFT: func.func @ddp{{.*}}memopt.synchronous_collectives
// LEFT-NOT: bucket =
// LEFT-NOT: memopt.wait_collectives

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

