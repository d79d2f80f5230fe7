// memopt-opt's --memopt-compile-pipeline runs what memopt-compile runs up to
// planning: the planned IR of both is the same text (memopt-opt ends it
// with an empty line: diff -B).
// RUN: memopt-compile %s --emit plan -o %t.driver --quiet
// RUN: memopt-opt %s --memopt-compile-pipeline > %t.opt
// RUN: diff -B %t.driver %t.opt
// RUN: FileCheck %s --input-file=%t.opt
// RUN: memopt-compile %s --emit plan -o %t.budget --quiet --memory-budget 4096 --no-fuse-epilogues --no-fuse-elementwise --separate-outputs
// RUN: memopt-opt %s --memopt-compile-pipeline="memory-budget=4096 fuse-epilogues=false fuse-elementwise=false outputs-in-arena=false" > %t.budget.opt
// RUN: diff -B %t.budget %t.budget.opt
// RUN: FileCheck %s --check-prefix=UNFUSED --input-file=%t.budget.opt
// A training step: make-trainable, attention fusion, loss, autodiff, then
// the same passes.
// RUN: memopt-compile %s --train --loss mse --optimizer adamw --lr 0.5 --emit plan -o %t.train --quiet
// RUN: memopt-opt %s --memopt-compile-pipeline="train=true loss=mse optimizer=adamw lr=0.5" > %t.train.opt
// RUN: diff -B %t.train %t.train.opt
// RUN: FileCheck %s --check-prefix=TRAIN --input-file=%t.train.opt
// Data parallel: memopt-data-parallel after autodiff, the same passes after.
// RUN: memopt-compile %s --train --loss mse --optimizer adamw --data-parallel 4 --shard optimizer --emit plan -o %t.dp --quiet
// RUN: memopt-opt %s --memopt-compile-pipeline="train=true loss=mse optimizer=adamw data-parallel=4 shard=optimizer" > %t.dp.opt
// RUN: diff -B %t.dp %t.dp.opt
// RUN: FileCheck %s --check-prefix=DP --input-file=%t.dp.opt
// RUN: memopt-compile %s --train --loss mse --data-parallel 2 --emit plan -o %t.dplog | FileCheck %s --check-prefix=DPLOG
// RUN: not memopt-opt %s --memopt-compile-pipeline="train=true shard=optimizer" 2>&1 | FileCheck %s --check-prefix=SHARDALONE
// RUN: not memopt-opt %s --memopt-compile-pipeline="data-parallel=2" 2>&1 | FileCheck %s --check-prefix=DPTRAIN
// --emit mlir stops before the memory passes: stop-after=graph.
// RUN: memopt-compile %s --emit mlir -o %t.graph --quiet
// RUN: memopt-opt %s --memopt-compile-pipeline="stop-after=graph" > %t.graph.opt
// RUN: diff -B %t.graph %t.graph.opt
// RUN: FileCheck %s --check-prefix=GRAPH --input-file=%t.graph.opt
// The driver's phase lines come from the pipeline's instrumentation.
// RUN: memopt-compile %s --emit plan -o %t.log | FileCheck %s --check-prefix=LOG
// RUN: memopt-compile %s --train --loss mse --emit plan -o %t.trainlog | FileCheck %s --check-prefix=TRAINLOG
// RUN: not memopt-opt %s --memopt-compile-pipeline="precision=fp8" 2>&1 | FileCheck %s --check-prefix=BADPRECISION
// Mixed-precision training: the same passes from the driver and memopt-opt.
// RUN: memopt-compile %s --train --loss mse --precision fp16 --momentum 0.9 --emit plan -o %t.fp16 --quiet
// RUN: memopt-opt %s --memopt-compile-pipeline="train=true loss=mse precision=fp16 momentum=0.9" > %t.fp16.opt
// RUN: diff -B %t.fp16 %t.fp16.opt
// RUN: FileCheck %s --check-prefix=TRAINFP16 --input-file=%t.fp16.opt
// RUN: memopt-compile %s --train --loss mse --precision bf16 --emit plan -o %t.bf16 --quiet
// RUN: FileCheck %s --check-prefix=TRAINBF16 --input-file=%t.bf16
// RUN: memopt-compile %s --train --loss mse --precision fp16 --emit plan -o %t.fp16log | FileCheck %s --check-prefix=TRAINFP16LOG
// RUN: not memopt-opt %s --memopt-compile-pipeline="precision=fp16 loss-scale=dynamic" 2>&1 | FileCheck %s --check-prefix=SCALENOTRAIN
// RUN: not memopt-compile %s --train --precision fp16 --loss-scale sometimes -o %t.bad 2>&1 | FileCheck %s --check-prefix=BADSCALE

// Default: the bias and relu become the first gemm's epilogue; its result
// gets arena offset 0 and the output lives in the arena after it.
// CHECK-LABEL: func.func @main
// CHECK-SAME: memopt.arena_size = 320 : i64
// CHECK-SAME: memopt.output_offsets = array<i64: 256>
// CHECK: memopt.gemm {{.*}}activation = "relu", memopt.offsets = array<i64: 0>
// CHECK: memopt.gemm {{.*}}memopt.offsets = array<i64: -1>

// Unfused, outputs in buffers of their own: the add and the relu are ops of
// their own, written in place over the matmul's result.
// UNFUSED-LABEL: func.func @main
// UNFUSED-SAME: memopt.arena_size = 256 : i64
// UNFUSED: memopt.add {{.*}}memopt.in_place = 0 : i64, memopt.offsets = array<i64: 0>
// UNFUSED: memopt.relu {{.*}}memopt.in_place = 0 : i64, memopt.offsets = array<i64: 0>

// TRAIN-LABEL: func.func @main
// TRAIN-SAME: {memopt.name = "target"}
// TRAIN-DAG: memopt.variable "fc.weight.exp_avg" {{.*}}role = "optimizer_state"
// TRAIN-DAG: memopt.variable "memopt.learning_rate" {initial_value = dense<5.000000e-01>
// TRAIN-DAG: memopt.variable "fc.weight" {{.*}}role = "parameter"
// TRAIN: memopt.adamw_update
// TRAIN: memopt.adamw_update
// TRAIN: memopt.adamw_update
// TRAIN: return {{.*}} : tensor<f32>

// DP-LABEL: func.func @main
// DP-SAME: memopt.data_parallel = {ranks = 4 : i64, shard = "optimizer"}
// DP-DAG: memopt.variable "fc.weight.exp_avg" {{.*}}role = "optimizer_state"{{.*}} : tensor<32xf32>
// DP: memopt.reduce_scatter {{.*}}ranks = 4 : i64
// DP: memopt.adamw_update {{.*}}shards = 4 : i64
// DP: memopt.all_gather

// DPLOG: [train] mse loss, reverse-mode gradients, sgd updates
// DPLOG-NEXT: memopt-data-parallel: 2 ranks, shard none: 3 gradient all-reduces
// DPLOG-NEXT: [data-parallel] 2 ranks, shard none (DDP): 3 gradient all-reduces
// After the last scheduling the gradients' all-reduces form buckets (the
// first 1 MiB holds all three here) that overlap the backward.
// DPLOG: memopt-bucket-collectives: 1 buckets (3 gradient collectives): 3 x {{[0-9]+}} bytes
// SHARDALONE: memopt-compile-pipeline: shard optimizer needs data-parallel N
// DPTRAIN: memopt-compile-pipeline: data-parallel needs train

// GRAPH-LABEL: func.func @main
// GRAPH-NOT: memopt.arena_size
// GRAPH: memopt.gemm {{.*}}activation = "relu"
// GRAPH-NOT: memopt.offsets

// LOG: [import]
// LOG-NEXT: [canonicalize] {{[0-9]+}} memopt ops
// LOG-NEXT: [fuse-attention] 0 memopt.attention ops
// LOG-NEXT: [fuse] bias and activation epilogues: {{[0-9]+}} memopt ops
// LOG-NEXT: [fuse-elementwise] 0 ops in 0 memopt.fused_elementwise ops
// LOG-NEXT: [memory] schedule, bufferize (in-place), plan-memory
// LOG: [emit] planned IR:

// TRAINLOG: [import]
// TRAINLOG-NEXT: [canonicalize] {{[0-9]+}} memopt ops
// TRAINLOG-NEXT: [fuse-attention] 0 memopt.attention ops
// TRAINLOG-NEXT: memopt-autodiff: 3 parameters
// TRAINLOG-NEXT: [train] mse loss, reverse-mode gradients, sgd updates: {{[0-9]+}} memopt ops
// TRAINLOG: [memory]

// BADPRECISION: memopt-compile-pipeline: precision 'fp8' is not fp32, tf32, fp16 or bf16
// fp16 training: f32 master parameters read through f16 casts, f16
// gemms, one found_inf over the gradients before the updates, which unscale,
// and the scale update last.
// TRAINFP16-LABEL: func.func @main
// TRAINFP16-SAME: memopt.precision = "f16"
// TRAINFP16-DAG: %[[W:.*]] = memopt.variable "fc.weight" {{.*}}role = "parameter"{{.*}} : tensor<8x16xf32>
// TRAINFP16-DAG: %[[SCALE:.*]] = memopt.variable "memopt.loss_scale" {initial_value = dense<6.553600e+04> : tensor<f32>, {{.*}}role = "loss_scale"}
// TRAINFP16-DAG: %[[STATE:.*]] = memopt.variable "memopt.loss_scale_state" {{.*}}role = "loss_scale_state"
// TRAINFP16: memopt.cast %[[W]] {{.*}}: (tensor<8x16xf32>) -> tensor<8x16xf16>
// TRAINFP16: %[[FOUND:.*]] = memopt.found_inf
// TRAINFP16: memopt.sgd_update %[[W]], %{{.*}}, momentum %{{.*}}, lr %{{.*}} loss_scale %[[SCALE]], found_inf %[[FOUND]]
// TRAINFP16: memopt.update_loss_scale %[[SCALE]], %[[STATE]], found_inf %[[FOUND]] {{.*}}
// bf16: no loss scaling (f32's range); the updates ride on the backward.
// TRAINBF16-LABEL: func.func @main
// TRAINBF16-SAME: memopt.precision = "bf16"
// TRAINBF16-NOT: memopt.found_inf
// TRAINBF16: memopt.sgd_update {{.*}} : tensor<16x4xf32>, tensor<16x4xbf16>
// TRAINBF16-NOT: loss_scale
// TRAINFP16LOG: [precision] f16 forward where safe, f32 master parameters (memopt-mixed-precision training=true); the backward follows
// TRAINFP16LOG: memopt-autodiff: 3 parameters {{.*}}dynamic loss scale 65536 (x2 after 2000 clean steps, x0.5 on overflow
// TRAINFP16LOG: [weight-casts]
// SCALENOTRAIN: memopt-compile-pipeline: loss-scale dynamic needs train
// BADSCALE: memopt-compile: error: loss-scale 'sometimes' is not auto, dynamic or none
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  %w = memopt.constant {memopt.initializer = "fc.weight"} dense<0.5> : tensor<8x16xf32>
  %b = memopt.constant {memopt.initializer = "fc.bias"} dense<0.25> : tensor<16xf32>
  %w2 = memopt.constant {memopt.initializer = "out.weight"} dense<0.125> : tensor<16x4xf32>
  %y = memopt.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32> loc("fc")
  %z = memopt.add %y, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32> loc("bias")
  %r = memopt.relu %z : tensor<4x16xf32> loc("relu")
  %o = memopt.matmul %r, %w2 : (tensor<4x16xf32>, tensor<16x4xf32>) -> tensor<4x4xf32> loc("out")
  return %o : tensor<4x4xf32>
}
