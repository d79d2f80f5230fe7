// RUN: memopt-opt %s -split-input-file -verify-diagnostics

func.func @reshape_count(%x: tensor<2x3xf32>) -> tensor<7xf32> {
  // expected-error @+1 {{(6 elements) to 'tensor<7xf32>' (7 elements)}}
  %0 = memopt.reshape %x : (tensor<2x3xf32>) -> tensor<7xf32>
  return %0 : tensor<7xf32>
}

// -----

func.func @add_broadcast(%x: tensor<2x3xf32>, %y: tensor<4xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.add %x, %y : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @matmul_contraction(%x: tensor<2x3xf32>, %y: tensor<4x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+2 {{contraction sizes differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = memopt.matmul %x, %y : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}
