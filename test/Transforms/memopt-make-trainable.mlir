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
// FROZEN-LABEL: func.func @dropouts
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

// -----

// Training-mode dropouts (keyless from the importer) read one new
// random_key variable and get streams 1, 2 in program order.
// CHECK-LABEL: func.func @dropouts
// CHECK: %[[KEY:.*]] = memopt.variable "memopt.random_key" {initial_value = dense<0> : tensor<2xi64>, role = "random_key"} : tensor<2xi64>
// CHECK: %[[A:.*]] = memopt.dropout %{{.*}}, key %[[KEY]] {ratio = 1.000000e-01 : f32, stream = 1 : i64}
// CHECK: memopt.dropout %[[A]], key %[[KEY]] {ratio = 5.000000e-01 : f32, stream = 2 : i64}
func.func @dropouts(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w = memopt.constant {memopt.initializer = "fc1.scale"} dense<2.0> : tensor<2x4xf32>
  %y = memopt.mul %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %a = memopt.dropout %y {ratio = 0.1 : f32} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %b = memopt.dropout %a {ratio = 0.5 : f32} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %b : tensor<2x4xf32>
}

// -----

// A BatchNormalization exported in training mode gets batch statistics
// without bn-batch-stats; its running statistics become statistic variables
// updated by batch_norm_running_update. An eval-mode one keeps its running
// statistics.
// CHECK-LABEL: func.func @training_mode_batch_norm
// CHECK-DAG: %[[MEAN:.*]] = memopt.variable "bn.mean" {{.*}}role = "statistic"
// CHECK-DAG: memopt.variable "bn.var" {{.*}}role = "statistic"
// CHECK: %[[Y:.*]], %[[BM:.*]], %[[BI:.*]] = memopt.batch_norm_training %arg0
// CHECK: memopt.batch_norm_running_update %[[BM]], %[[BI]] to %[[MEAN]]
// CHECK: memopt.batch_normalization %{{.*}} : (tensor<2x3x4x4xf32>
// CHECK-NOT: training_mode
func.func @training_mode_batch_norm(%x: tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32> {
  %s = memopt.constant {memopt.initializer = "fc1.bn.scale"} dense<1.0> : tensor<3xf32>
  %b = memopt.constant {memopt.initializer = "bn.bias"} dense<0.0> : tensor<3xf32>
  %m = memopt.constant {memopt.initializer = "bn.mean"} dense<0.0> : tensor<3xf32>
  %v = memopt.constant {memopt.initializer = "bn.var"} dense<1.0> : tensor<3xf32>
  %y = memopt.batch_normalization %x, %s, %b, %m, %v {training_mode = 1 : i64} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  %m2 = memopt.constant {memopt.initializer = "bn2.mean"} dense<0.0> : tensor<3xf32>
  %v2 = memopt.constant {memopt.initializer = "bn2.var"} dense<1.0> : tensor<3xf32>
  %z = memopt.batch_normalization %y, %s, %b, %m2, %v2 : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  return %z : tensor<2x3x4x4xf32>
}
