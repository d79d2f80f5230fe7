// The verifier of a sharded parameter variable and of memopt.gather_parameter.
// RUN: memopt-opt %s --split-input-file --verify-diagnostics
// RUN: not memopt-opt %s --split-input-file --memopt-data-parallel="ranks=4 shard=parameters" 2>&1 >/dev/null | FileCheck %s --check-prefix=ERR

func.func @wrong_shard() {
  // expected-error @+1 {{sharded over 4 ranks, the parameter of type 'tensor<3x3xf32>' has shards of type 'tensor<3xf32>', not 'tensor<9xf32>'}}
  %w = memopt.variable "w" {initial_value = dense<0.5> : tensor<3x3xf32>, memopt.shards = 4 : i64, role = "parameter"} : tensor<9xf32>
  return
}

// -----

func.func @no_initial_value() {
  // expected-error @+1 {{memopt.shards needs a parameter with an initial value and at least 1 rank}}
  %w = memopt.variable "w" {memopt.shards = 4 : i64, role = "parameter"} : tensor<3xf32>
  return
}

// -----

func.func @gather(%s: tensor<2xf32>) -> tensor<3x3xf32> {
  // expected-error @+1 {{shard must have type 'tensor<3xf32>' (this rank's shard of 'tensor<3x3xf32>' over 4 ranks)}}
  %w = memopt.gather_parameter %s {ranks = 4 : i64} : (tensor<2xf32>) -> tensor<3x3xf32>
  return %w : tensor<3x3xf32>
}

// -----

// The low copy is gathered from the f32 master's shard, never from a low one.
func.func @low_shard(%s: tensor<3xf16>) -> tensor<3x3xf16> {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float values, but got 'tensor<3xf16>'}}
  %w = memopt.gather_parameter %s {ranks = 4 : i64} : (tensor<3xf16>) -> tensor<3x3xf16>
  return %w : tensor<3x3xf16>
}

// -----

// A parameter read after its update cannot be gathered before it.
// ERR: error: {{.*}}reads parameter 'w' after its update: shard parameters gathers a parameter before its update only
func.func @late(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = memopt.variable "w" {initial_value = dense<0.5> : tensor<4xf32>, role = "parameter"} : tensor<4xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %g = memopt.relu %x : tensor<4xf32>
  memopt.sgd_update %w, %g, lr %lr : tensor<4xf32>, tensor<4xf32>, tensor<f32>
  %y = memopt.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
