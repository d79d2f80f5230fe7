// RUN: memopt-opt %s --split-input-file --memopt-make-trainable | FileCheck %s
// RUN: memopt-opt %s --split-input-file --memopt-make-trainable="freeze=fc1" | FileCheck %s --check-prefix=FROZEN
// RUN: not memopt-opt %s --split-input-file --memopt-make-trainable="freeze=nothing" 2>&1 | FileCheck %s --check-prefix=NOMATCH

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
