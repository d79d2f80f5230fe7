// RUN: memopt-opt %s --memopt-summary -o /dev/null | FileCheck %s

// CHECK-LABEL: memopt summary of @mlp
// CHECK:   ops: 5 (4 kinds)
// CHECK:     add{{ +}}1
// CHECK:     constant{{ +}}2
// CHECK:     matmul{{ +}}1
// CHECK:     relu{{ +}}1
// CHECK:   tensors: 2 constants, 3 activations
// 4x16 f32 weight (256 bytes) + 16 f32 bias (64 bytes)
// CHECK:   weights_bytes: 320
// three 8x16 f32 activations
// CHECK:   activation_bytes: 1536
// CHECK:   io_bytes: 640 (inputs 128, outputs 512)
func.func @mlp(%x: tensor<8x4xf32>) -> tensor<8x16xf32> {
  %w = memopt.constant dense<0.5> : tensor<4x16xf32>
  %b = memopt.constant dense<0.25> : tensor<16xf32>
  %0 = memopt.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %1 = memopt.add %0, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %2 = memopt.relu %1 : tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}
