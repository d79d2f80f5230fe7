// RUN: memopt-opt %s -split-input-file --memopt-fold-constants | FileCheck %s
// RUN: memopt-opt %s -split-input-file --memopt-fold-constants=max-elements=2 | FileCheck %s --check-prefix=LIMIT

// An op with no folder, on constants: the host kernel evaluates it.
// CHECK-LABEL: func.func @reduce_max
// CHECK-NOT: memopt.reduce_max
// CHECK: %[[C:.*]] = memopt.constant dense<[3.000000e+00, 4.000000e+00]> : tensor<2xf32>
// CHECK: return %[[C]]
// LIMIT-LABEL: func.func @reduce_max
// LIMIT: memopt.reduce_max
func.func @reduce_max() -> tensor<2xf32> {
  %0 = memopt.constant dense<[[3.0, 1.0], [2.0, 4.0]]> : tensor<2x2xf32>
  %1 = memopt.reduce_max %0 {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2x2xf32>) -> tensor<2xf32>
  return %1 : tensor<2xf32>
}

// -----

// A chain folds whole, in program order (softmax, then a matmul of its
// result); integers reduce exactly through the f32 kernel.
// CHECK-LABEL: func.func @chain
// CHECK-DAG: memopt.constant dense<2.500000e+00> : tensor<1x1xf32>
// CHECK-DAG: memopt.constant dense<7> : tensor<i64>
// CHECK-NOT: memopt.softmax
// CHECK-NOT: memopt.matmul
// CHECK-NOT: memopt.reduce_sum
// CHECK: return
func.func @chain() -> (tensor<1x1xf32>, tensor<i64>) {
  %0 = memopt.constant dense<[[0.0, 1.0986123]]> : tensor<1x2xf32>
  %1 = memopt.softmax %0 {axis = 1 : i64} : (tensor<1x2xf32>) -> tensor<1x2xf32>
  %2 = memopt.constant dense<[[1.0], [3.0]]> : tensor<2x1xf32>
  %3 = memopt.matmul %1, %2 : (tensor<1x2xf32>, tensor<2x1xf32>) -> tensor<1x1xf32>
  %4 = memopt.constant dense<[3, 4]> : tensor<2xi64>
  %5 = memopt.reduce_sum %4 {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2xi64>) -> tensor<i64>
  return %3, %5 : tensor<1x1xf32>, tensor<i64>
}

// -----

// Convolution and pooling of constants: a 1-D box filter (3, 5, 7), then
// the mean of each pair.
// CHECK-LABEL: func.func @conv_pool
// CHECK: %[[C:.*]] = memopt.constant dense<{{\[\[\[}}4.000000e+00, 6.000000e+00]]]> : tensor<1x1x2xf32>
// CHECK: return %[[C]]
func.func @conv_pool() -> tensor<1x1x2xf32> {
  %x = memopt.constant dense<[[[1.0, 2.0, 3.0, 4.0]]]> : tensor<1x1x4xf32>
  %w = memopt.constant dense<[[[1.0, 1.0]]]> : tensor<1x1x2xf32>
  %c = memopt.conv %x, %w {dilations = array<i64: 1>, kernel_shape = array<i64: 2>, pads = array<i64: 0, 0>, strides = array<i64: 1>} : (tensor<1x1x4xf32>, tensor<1x1x2xf32>) -> tensor<1x1x3xf32>
  %p = memopt.average_pool %c {dilations = array<i64: 1>, kernel_shape = array<i64: 2>, pads = array<i64: 0, 0>, strides = array<i64: 1>} : (tensor<1x1x3xf32>) -> tensor<1x1x2xf32>
  return %p : tensor<1x1x2xf32>
}

// -----

// A result that would store more elements than its operands, beyond the
// inline limit, stays an op (an outer product: 4096 elements from 128, the
// shape of a mask or rotary table); a result repeating one value is a
// splat (relu of a splat).
// CHECK-LABEL: func.func @broadcast
// CHECK: memopt.matmul
// CHECK: memopt.constant dense<2.000000e+00> : tensor<64x64xf32>
// CHECK-NOT: memopt.relu
func.func @broadcast() -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %a = memopt.constant dense<[[0.0], [1.0], [2.0], [3.0], [4.0], [5.0], [6.0], [7.0], [8.0], [9.0], [10.0], [11.0], [12.0], [13.0], [14.0], [15.0], [16.0], [17.0], [18.0], [19.0], [20.0], [21.0], [22.0], [23.0], [24.0], [25.0], [26.0], [27.0], [28.0], [29.0], [30.0], [31.0], [32.0], [33.0], [34.0], [35.0], [36.0], [37.0], [38.0], [39.0], [40.0], [41.0], [42.0], [43.0], [44.0], [45.0], [46.0], [47.0], [48.0], [49.0], [50.0], [51.0], [52.0], [53.0], [54.0], [55.0], [56.0], [57.0], [58.0], [59.0], [60.0], [61.0], [62.0], [63.0]]> : tensor<64x1xf32>
  %b = memopt.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0, 33.0, 34.0, 35.0, 36.0, 37.0, 38.0, 39.0, 40.0, 41.0, 42.0, 43.0, 44.0, 45.0, 46.0, 47.0, 48.0, 49.0, 50.0, 51.0, 52.0, 53.0, 54.0, 55.0, 56.0, 57.0, 58.0, 59.0, 60.0, 61.0, 62.0, 63.0]]> : tensor<1x64xf32>
  %m = memopt.matmul %a, %b : (tensor<64x1xf32>, tensor<1x64xf32>) -> tensor<64x64xf32>
  %c = memopt.constant dense<2.0> : tensor<64x64xf32>
  %r = memopt.relu %c : tensor<64x64xf32>
  return %m, %r : tensor<64x64xf32>, tensor<64x64xf32>
}

// -----

// Trained initializers never fold (a parameter, or a float initializer with
// no mark); one the exporter calls a constant does.
// CHECK-LABEL: func.func @parameters
// CHECK: %[[P:.*]] = memopt.constant {memopt.initializer = "p", memopt.state_kind = "parameter"}
// CHECK: %[[U:.*]] = memopt.constant {memopt.initializer = "u"}
// CHECK: memopt.reduce_sum %[[P]]
// CHECK: memopt.reduce_sum %[[U]]
// CHECK-NOT: memopt.reduce_sum
// CHECK: return
func.func @parameters() -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %p = memopt.constant {memopt.initializer = "p", memopt.state_kind = "parameter"} dense<[1.0, 2.0]> : tensor<2xf32>
  %u = memopt.constant {memopt.initializer = "u"} dense<[1.0, 2.0]> : tensor<2xf32>
  %c = memopt.constant {memopt.initializer = "val_1", memopt.state_kind = "constant"} dense<[1.0, 2.0]> : tensor<2xf32>
  %0 = memopt.reduce_sum %p {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2xf32>) -> tensor<f32>
  %1 = memopt.reduce_sum %u {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2xf32>) -> tensor<f32>
  %2 = memopt.reduce_sum %c {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2xf32>) -> tensor<f32>
  return %0, %1, %2 : tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

// Random ops do not fold, even with a constant key.
// CHECK-LABEL: func.func @dropout
// CHECK: memopt.dropout
func.func @dropout() -> tensor<4xf32> {
  %x = memopt.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %k = memopt.constant dense<[1, 0]> : tensor<2xi64>
  %0 = memopt.dropout %x, key %k {ratio = 5.000000e-01 : f32} : (tensor<4xf32>, tensor<2xi64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A `dense_resource` operand is read in place.
// CHECK-LABEL: func.func @resource
// CHECK: memopt.constant dense<[2.000000e+00, 4.000000e+00]> : tensor<2xf32>
func.func @resource() -> tensor<2xf32> {
  %0 = memopt.constant {memopt.initializer = "b", memopt.state_kind = "buffer"} dense_resource<blob> : tensor<2xf32>
  %1 = memopt.constant dense<2.0> : tensor<f32>
  %2 = memopt.mul %0, %1 : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %3 = memopt.relu %2 : tensor<2xf32>
  return %3 : tensor<2xf32>
}

{-#
  dialect_resources: {
    builtin: {
      blob: "0x080000000000803F00000040"
    }
  }
#-}
