// RUN: memopt-opt %s -split-input-file --canonicalize | FileCheck %s

// Shapes are static, so Shape folds; arithmetic on small constants folds too.
// CHECK-LABEL: func.func @shape_arith
// CHECK-NEXT: %[[C:.*]] = memopt.constant dense<[4, 6]> : tensor<2xi64>
// CHECK-NEXT: return %[[C]]
func.func @shape_arith(%x: tensor<2x3xf32>) -> tensor<2xi64> {
  %s = memopt.shape %x : (tensor<2x3xf32>) -> tensor<2xi64>
  %t = memopt.add %s, %s : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %t : tensor<2xi64>
}

// -----

// CHECK-LABEL: func.func @reshape_chain
// CHECK-NEXT: %[[R:.*]] = memopt.reshape %arg0 : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_chain(%x: tensor<2x3xf32>) -> tensor<6xf32> {
  %0 = memopt.reshape %x : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = memopt.reshape %0 : (tensor<3x2xf32>) -> tensor<6xf32>
  return %1 : tensor<6xf32>
}
