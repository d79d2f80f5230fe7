// RUN: memopt-opt %s --memopt-bufferize --memopt-plan-memory -o %t.mlir
// RUN: memopt-compile %t.mlir --lower-only --emit source -o %t --quiet
// RUN: FileCheck %s < %t.cpp

// The lowering of offloaded updates (docs/offload.md): with the accumulator
// on the device (--offload-accumulators device) the device sums the
// gradient, the accumulation then only gates the CPU update, and the update
// stages the sum; with it on the host the gradient itself is staged. The
// step ends with offloadFinish.
// CHECK: accumulation.accumulator = [[ACC:t[0-9]+]];
// CHECK-NEXT: accumulation.microStep
// CHECK-NEXT: accumulation.steps = 2;
// CHECK-NEXT: accumulateGradient(ctx, [[NODE:"[^"]*"]], {{t[0-9]+}}, accumulation);
// CHECK-NEXT: accumulation.accumulator = TensorRef();
// CHECK-NEXT: offloadSgdUpdate(ctx, [[NODE]], 0, H + {{[0-9]+}}, 0.0f, 0.0f, {{t[0-9]+}}, [[ACC]], {{.*}}, &accumulation);
// CHECK-NOT: accumulateGradient
// CHECK: accumulation.accumulator = [[HOSTACC:t[0-9]+]];
// CHECK-NOT: accumulation.accumulator = TensorRef();
// CHECK: offloadSgdUpdate(ctx, {{"[^"]*"}}, 1, H + {{[0-9]+}}, 0.0f, 0.0f, {{t[0-9]+}}, [[G2:t[0-9]+]], {{.*}}, &accumulation);
// CHECK: offloadFinish(ctx);
func.func @offloaded(%x: tensor<256xbf16>) -> tensor<256xbf16> {
  %w1 = memopt.variable "w1" {initial_value = dense<0.5> : tensor<256xf32>, role = "parameter"} : tensor<256xf32>
  %m1 = memopt.variable "w1.master" {initial_value = dense<0.5> : tensor<256xf32>, memopt.placement = "host", role = "master"} : tensor<256xf32>
  %acc1 = memopt.variable "w1.grad" {role = "gradient_accumulator"} : tensor<256xf32>
  %w2 = memopt.variable "w2" {initial_value = dense<0.5> : tensor<256xf32>, role = "parameter"} : tensor<256xf32>
  %m2 = memopt.variable "w2.master" {initial_value = dense<0.5> : tensor<256xf32>, memopt.placement = "host", role = "master"} : tensor<256xf32>
  %acc2 = memopt.variable "w2.grad" {memopt.placement = "host", role = "gradient_accumulator"} : tensor<256xf32>
  %micro = memopt.variable "memopt.micro_step" {initial_value = dense<0.0> : tensor<f32>, role = "micro_step"} : tensor<f32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %g1 = memopt.exp %x : tensor<256xbf16>
  memopt.sgd_update %w1, %g1, lr %lr accumulate %acc1, micro_step %micro master %m1 {accumulation_steps = 2 : i64} : tensor<256xf32>, tensor<256xbf16>, tensor<f32>, tensor<256xf32>, tensor<f32>, tensor<256xf32> loc("device_update")
  %g2 = memopt.exp %g1 : tensor<256xbf16>
  memopt.sgd_update %w2, %g2, lr %lr accumulate %acc2, micro_step %micro master %m2 {accumulation_steps = 2 : i64} : tensor<256xf32>, tensor<256xbf16>, tensor<f32>, tensor<256xf32>, tensor<f32>, tensor<256xf32> loc("host_update")
  %y = memopt.exp %x : tensor<256xbf16>
  return %y : tensor<256xbf16>
}
