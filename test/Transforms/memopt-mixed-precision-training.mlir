// RUN: memopt-opt %s -split-input-file --memopt-mixed-precision=training=true 2>/dev/null | FileCheck %s
// RUN: memopt-opt %s -split-input-file --memopt-mixed-precision="training=true precision=bf16" 2>/dev/null | FileCheck %s --check-prefix=BF16
// RUN: memopt-opt %s -split-input-file --mlir-disable-threading --memopt-mixed-precision="training=true report" -o /dev/null 2>/dev/null | FileCheck %s --check-prefix=REPORT
// RUN: memopt-opt %s -split-input-file --mlir-disable-threading --memopt-mixed-precision=training=true -o /dev/null 2>&1 | FileCheck %s --check-prefix=WARN
// RUN: memopt-opt %s -split-input-file --memopt-mixed-precision | FileCheck %s --check-prefix=INFER

// memopt-mixed-precision with training=true: the model before
// memopt-append-loss and memopt-autodiff (docs/training.md, "Mixed
// precision"). The inference cases are in memopt-mixed-precision.mlir.

// Training (before autodiff): parameters stay f32 master variables; an op
// that runs low reads one cast of each, placed before its first user; the
// output is not widened (the loss reads the low logits), it gets a cast.
// CHECK-LABEL: func.func @train_mlp
// CHECK-DAG: %[[W1:.*]] = memopt.variable "w1" {{.*}}role = "parameter"} : tensor<8x16xf32>
// CHECK-DAG: %[[W2:.*]] = memopt.variable "w2" {{.*}}role = "parameter"} : tensor<16x4xf32>
// CHECK: %[[W1L:.*]] = memopt.cast %[[W1]] : (tensor<8x16xf32>) -> tensor<8x16xf16>
// CHECK: %[[H:.*]] = memopt.matmul %{{.*}}, %[[W1L]] : (tensor<4x8xf16>, tensor<8x16xf16>) -> tensor<4x16xf16>
// CHECK: %[[BL:.*]] = memopt.cast %{{.*}} : (tensor<16xf32>) -> tensor<16xf16>
// CHECK: memopt.add %[[H]], %[[BL]] : (tensor<4x16xf16>, tensor<16xf16>) -> tensor<4x16xf16>
// CHECK: %[[W2L:.*]] = memopt.cast %[[W2]] : (tensor<16x4xf32>) -> tensor<16x4xf16>
// CHECK: %[[O:.*]] = memopt.matmul %{{.*}}, %[[W2L]] : (tensor<4x16xf16>, tensor<16x4xf16>) -> tensor<4x4xf16>
// CHECK: %[[O32:.*]] = memopt.cast %[[O]] : (tensor<4x4xf16>) -> tensor<4x4xf32>
// CHECK-NEXT: return %[[O32]]
// BF16-LABEL: func.func @train_mlp
// BF16: memopt.matmul %{{.*}}, %{{.*}} : (tensor<4x16xbf16>, tensor<16x4xbf16>) -> tensor<4x4xbf16>
// REPORT: memopt-mixed-precision @train_mlp: f16: {{.*}}; training: 3 f32 master parameters, 3 read through a f16 copy, 0 normalization parameter operands read in f32, 0 ops in f32 for want of a low-precision gradient
func.func @train_mlp(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  %w1 = memopt.variable "w1" {initial_value = dense<0.5> : tensor<8x16xf32>, role = "parameter"} : tensor<8x16xf32>
  %b1 = memopt.variable "b1" {initial_value = dense<0.5> : tensor<16xf32>, role = "parameter"} : tensor<16xf32>
  %w2 = memopt.variable "w2" {initial_value = dense<0.5> : tensor<16x4xf32>, role = "parameter"} : tensor<16x4xf32>
  %h = memopt.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %a = memopt.add %h, %b1 : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %r = memopt.relu %a : tensor<4x16xf32>
  %o = memopt.matmul %r, %w2 : (tensor<4x16xf32>, tensor<16x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}

// -----

// Training-mode batch normalization: x and y low, the trained scale and
// bias read in f32 (no low copy; their gradients will be f32), the saved
// statistics f32, and the running-statistics update untouched.
// CHECK-LABEL: func.func @train_batch_norm
// CHECK-DAG: %[[S:.*]] = memopt.variable "bn.scale" {{.*}} : tensor<4xf32>
// CHECK-DAG: %[[B:.*]] = memopt.variable "bn.bias" {{.*}} : tensor<4xf32>
// CHECK: %[[C:.*]] = memopt.conv {{.*}} -> tensor<2x4x6x6xf16>
// CHECK: %[[Y:.*]], %[[M:.*]], %[[I:.*]] = memopt.batch_norm_training %[[C]], %[[S]], %[[B]] : (tensor<2x4x6x6xf16>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x6x6xf16>, tensor<4xf32>, tensor<4xf32>)
// CHECK: memopt.batch_norm_running_update %[[M]], %[[I]] to %{{.*}}, %{{.*}} {{.*}}: tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
// REPORT: memopt-mixed-precision @train_batch_norm: {{.*}}; training: 3 f32 master parameters, 1 read through a f16 copy, 2 normalization parameter operands read in f32
func.func @train_batch_norm(%x: tensor<2x3x8x8xf32>) -> tensor<2x4x6x6xf32> {
  %w = memopt.variable "conv.weight" {initial_value = dense<0.5> : tensor<4x3x3x3xf32>, role = "parameter"} : tensor<4x3x3x3xf32>
  %s = memopt.variable "bn.scale" {initial_value = dense<1.0> : tensor<4xf32>, role = "parameter"} : tensor<4xf32>
  %b = memopt.variable "bn.bias" {initial_value = dense<0.0> : tensor<4xf32>, role = "parameter"} : tensor<4xf32>
  %rm = memopt.variable "bn.mean" {initial_value = dense<0.0> : tensor<4xf32>, role = "statistic"} : tensor<4xf32>
  %rv = memopt.variable "bn.var" {initial_value = dense<1.0> : tensor<4xf32>, role = "statistic"} : tensor<4xf32>
  %c = memopt.conv %x, %w {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  %y, %mean, %inv = memopt.batch_norm_training %c, %s, %b : (tensor<2x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>)
  memopt.batch_norm_running_update %mean, %inv to %rm, %rv {momentum = 0.9 : f32} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return %y : tensor<2x4x6x6xf32>
}

// -----

// Layer normalization reads its trained Scale and B (of the normalized
// size) in f32; an embedding gather reads the f32 table and its (smaller)
// result is cast for the matmul, instead of a low copy of the whole table.
// CHECK-LABEL: func.func @train_embedding_layer_norm
// CHECK-DAG: %[[T:.*]] = memopt.variable "wte" {{.*}} : tensor<64x8xf32>
// CHECK-DAG: %[[G:.*]] = memopt.variable "ln.weight" {{.*}} : tensor<8xf32>
// CHECK: %[[E:.*]] = memopt.gather %[[T]], %arg0 : (tensor<64x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
// CHECK: %[[EL:.*]] = memopt.cast %[[E]] : (tensor<4x8xf32>) -> tensor<4x8xf16>
// CHECK: %[[N:.*]] = memopt.layer_normalization %[[EL]], %[[G]], %{{.*}} : (tensor<4x8xf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf16>
// CHECK: memopt.matmul %[[N]], %{{.*}} : (tensor<4x8xf16>, tensor<8x8xf16>) -> tensor<4x8xf16>
func.func @train_embedding_layer_norm(%ids: tensor<4xi64>) -> tensor<4x8xf32> {
  %table = memopt.variable "wte" {initial_value = dense<0.5> : tensor<64x8xf32>, role = "parameter"} : tensor<64x8xf32>
  %g = memopt.variable "ln.weight" {initial_value = dense<1.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %beta = memopt.variable "ln.bias" {initial_value = dense<0.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %w = memopt.variable "fc.weight" {initial_value = dense<0.5> : tensor<8x8xf32>, role = "parameter"} : tensor<8x8xf32>
  %e = memopt.gather %table, %ids {axis = 0 : i64} : (tensor<64x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
  %n = memopt.layer_normalization %e, %g, %beta : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %o = memopt.matmul %n, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %o : tensor<4x8xf32>
}

// -----

// The fused attention runs low in training too (attention_grad takes f16 /
// bf16 operands); one whose additive bias is trained (swin's relative-position
// table: its gradient has f32 kernels only) runs in f32, and the pass says
// so; inference runs both low.
// CHECK-LABEL: func.func @train_attention_fallback
// CHECK: memopt.attention {{.*}} : (tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16>) -> tensor<1x2x4x8xf16>
// CHECK: %[[Y:.*]] = memopt.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {scale = 5.000000e-01 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<4x4xf32>) -> tensor<1x2x4x8xf32>
// CHECK: %[[YL:.*]] = memopt.cast %[[Y]] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf16>
// CHECK: memopt.matmul %[[YL]]
// INFER-LABEL: func.func @train_attention_fallback
// INFER-COUNT-2: memopt.attention {{.*}} -> tensor<1x2x4x8xf16>
// WARN: warning: {{.*}}node 'biased' (memopt.attention) runs in f32: its gradient has no f16 kernel
// WARN-NOT: node 'plain'
// REPORT: memopt-mixed-precision @train_attention_fallback: {{.*}} 1 ops in f32 for want of a low-precision gradient
func.func @train_attention_fallback(%x: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %w = memopt.variable "proj" {initial_value = dense<0.5> : tensor<8x8xf32>, role = "parameter"} : tensor<8x8xf32>
  %table = memopt.variable "relpos" {initial_value = dense<0.1> : tensor<4x4xf32>, role = "parameter"} : tensor<4x4xf32>
  %q = memopt.matmul %x, %w : (tensor<1x2x4x8xf32>, tensor<8x8xf32>) -> tensor<1x2x4x8xf32>
  %a = memopt.attention %q, %q, %q {scale = 0.5 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> loc("plain")
  %y = memopt.attention %a, %a, %a, %table {scale = 0.5 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<4x4xf32>) -> tensor<1x2x4x8xf32> loc("biased")
  %o = memopt.matmul %y, %w : (tensor<1x2x4x8xf32>, tensor<8x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}
