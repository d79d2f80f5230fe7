// RUN: memopt-compile %s --train --loss mse --precision fp16 --output-precision low --emit mlir -o %t.mlir --quiet
// RUN: FileCheck %s --input-file=%t.mlir
// RUN: memopt-compile %s --train --loss mse --output-precision low --emit mlir -o %t.fp32.mlir --quiet
// RUN: FileCheck %s --check-prefix=FP32 --input-file=%t.fp32.mlir

// --output-precision low on a training step (docs/mixed-precision.md,
// "Outputs stored in f32"): the model's output is the loss's input and the
// step returns only its loss, which stays f32; and it is no error with fp32
// (--fit may try fp32 with it). The inference cases are in
// memopt-mixed-precision-outputs.mlir.
// CHECK-LABEL: func.func @regression
// CHECK-SAME: -> (tensor<f32> {memopt.name = "loss"})
// CHECK-SAME: memopt.precision = "f16"
// CHECK: return %{{.*}} : tensor<f32>
// FP32-LABEL: func.func @regression
// FP32-SAME: -> (tensor<f32> {memopt.name = "loss"})
func.func @regression(%x: tensor<4x8xf32>) -> tensor<4x16xf32> {
  %w = memopt.constant {memopt.initializer = "w"} dense<0.5> : tensor<8x16xf32>
  %l = memopt.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %l : tensor<4x16xf32>
}
