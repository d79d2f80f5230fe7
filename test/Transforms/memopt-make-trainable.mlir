// RUN: memopt-opt %s --split-input-file --memopt-make-trainable | FileCheck %s
// RUN: memopt-opt %s --split-input-file --memopt-make-trainable="freeze=fc1" | FileCheck %s --check-prefix=FROZEN
// RUN: not memopt-opt %s --split-input-file --memopt-make-trainable="freeze=nothing" 2>&1 | FileCheck %s --check-prefix=NOMATCH
// RUN: memopt-opt %s --split-input-file --memopt-make-trainable="bn-batch-stats=true" | FileCheck %s --check-prefix=BN

// Float initializers become parameters; integer ones and constants that are
// not initializers (folded shapes, scalars) stay constants.
// CHECK-LABEL: func.func @linear
// CHECK-DAG: memopt.variable "fc1.weight" {initial_value = dense<{{.*}}> : tensor<2x2xf32>, role = "parameter"} : tensor<2x2xf32>
// CHECK-DAG: memopt.constant {memopt.initializer = "indices"} dense<[0, 1]> : tensor<2xi64>
// CHECK-DAG: memopt.constant dense<2.000000e+00> : tensor<f32>
// FROZEN-LABEL: func.func @linear
// FROZEN-NOT: memopt.variable
// NOMATCH: error: --freeze pattern 'nothing' matches no float initializer of the model
func.func @linear(%x: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2xi64>) {
  %w = memopt.constant {memopt.initializer = "fc1.weight"} dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %i = memopt.constant {memopt.initializer = "indices"} dense<[0, 1]> : tensor<2xi64>
  %two = memopt.constant dense<2.0> : tensor<f32>
  %y = memopt.matmul %x, %w : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %z = memopt.mul %y, %two : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
  return %z, %i : tensor<2x2xf32>, tensor<2xi64>
}

// -----

// With bn-batch-stats a BatchNormalization becomes batch_norm_training (batch
// statistics, mean and 1/std saved for its gradient) and one in-place update
// of its running statistics, which become `statistic` variables. (Named
// fc1.bn.* so that the freeze=fc1 run above finds an initializer here too.)
// BN-LABEL: func.func @batch_statistics
// BN-DAG: %[[SCALE:.*]] = memopt.variable "fc1.bn.weight" {{.*}}role = "parameter"
// BN-DAG: %[[BIAS:.*]] = memopt.variable "fc1.bn.bias" {{.*}}role = "parameter"
// BN-DAG: %[[RM:.*]] = memopt.variable "fc1.bn.running_mean" {{.*}}role = "statistic"
// BN-DAG: %[[RV:.*]] = memopt.variable "fc1.bn.running_var" {{.*}}role = "statistic"
// BN: %[[Y:.*]], %[[MEAN:.*]], %[[INV:.*]] = memopt.batch_norm_training %arg0, %[[SCALE]], %[[BIAS]] {epsilon = 1.000000e-03 : f32} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
// BN-NEXT: memopt.batch_norm_running_update %[[MEAN]], %[[INV]] to %[[RM]], %[[RV]] {epsilon = 1.000000e-03 : f32, momentum = 8.000000e-01 : f32}
// BN-NOT: memopt.batch_normalization
// BN: return %[[Y]]
func.func @batch_statistics(%x: tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32> {
  %scale = memopt.constant {memopt.initializer = "fc1.bn.weight"} dense<1.0> : tensor<3xf32>
  %bias = memopt.constant {memopt.initializer = "fc1.bn.bias"} dense<0.0> : tensor<3xf32>
  %mean = memopt.constant {memopt.initializer = "fc1.bn.running_mean"} dense<0.0> : tensor<3xf32>
  %var = memopt.constant {memopt.initializer = "fc1.bn.running_var"} dense<1.0> : tensor<3xf32>
  %y = memopt.batch_normalization %x, %scale, %bias, %mean, %var {epsilon = 1.0e-3 : f32, momentum = 0.8 : f32} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  return %y : tensor<2x3x4x4xf32>
}
