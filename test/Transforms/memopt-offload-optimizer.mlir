// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-autodiff="optimizer=sgd momentum=0.9" --memopt-offload-optimizer | FileCheck %s
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-autodiff="optimizer=adamw accumulate=2" --memopt-offload-optimizer | FileCheck %s --check-prefix=ADAMW
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-autodiff="optimizer=adamw accumulate=2" --memopt-offload-optimizer --memopt-schedule --memopt-bufferize --memopt-plan-memory | FileCheck %s --check-prefix=PLAN
// RUN: memopt-opt %s --split-input-file --memopt-autodiff="optimizer=adamw accumulate=2" --memopt-offload-optimizer --memopt-schedule --memopt-bufferize --memopt-plan-memory="print=true" -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: not memopt-opt %s --split-input-file --memopt-autodiff="optimizer=sgd loss-scale=dynamic accumulate=2" --memopt-offload-optimizer 2>&1 | FileCheck %s --check-prefix=SCALED-ACCUM
// RUN: not memopt-opt %s --split-input-file --memopt-offload-optimizer 2>&1 | FileCheck %s --check-prefix=NO-UPDATE
// RUN: memopt-opt %s --split-input-file --memopt-autodiff="optimizer=sgd loss-scale=dynamic" --memopt-offload-optimizer | FileCheck %s --check-prefix=SCALED
// RUN: memopt-opt %s --split-input-file --memopt-autodiff="optimizer=adamw accumulate=2" --memopt-offload-optimizer="accumulators-on-device=true" | FileCheck %s --check-prefix=DEVICE
// RUN: memopt-opt %s --split-input-file --memopt-autodiff="optimizer=sgd loss-scale=dynamic accumulate=2" --memopt-offload-optimizer="accumulators-on-device=true" | FileCheck %s --check-prefix=DEVICE-SCALED

// Each update gets an f32 master on the host whose initial value is the
// parameter's; the master and the momentum buffer are placed on the host,
// the parameter (the device's working copy) stays in the weight region.
// CHECK-LABEL: func.func @mlp
// CHECK-DAG: %[[W1:.*]] = memopt.variable "w1" {initial_value = dense<5.000000e-01> : tensor<5x4xf32>, role = "parameter"}
// CHECK-DAG: %[[M1:.*]] = memopt.variable "w1.master" {initial_value = dense<5.000000e-01> : tensor<5x4xf32>, memopt.placement = "host", role = "master"}
// CHECK-DAG: %[[B1:.*]] = memopt.variable "w1.momentum_buffer" {memopt.placement = "host", role = "optimizer_state"}
// CHECK-DAG: %[[W2:.*]] = memopt.variable "w2" {initial_value = dense<2.500000e-01> : tensor<3x4xf32>, role = "parameter"}
// CHECK-DAG: %[[M2:.*]] = memopt.variable "w2.master" {{.*}}memopt.placement = "host", role = "master"
// CHECK-DAG: %[[LR:.*]] = memopt.variable "memopt.learning_rate"
// CHECK-NOT: memopt.placement = "host", role = "learning_rate"
// CHECK: memopt.sgd_update %[[W2]], %{{.*}}, momentum %{{.*}}, lr %[[LR]] master %[[M2]] {momentum = 0.899999976 : f32}
// CHECK: memopt.sgd_update %[[W1]], %{{.*}}, momentum %[[B1]], lr %[[LR]] master %[[M1]] {momentum = 0.899999976 : f32}

// AdamW's moments and the gradient accumulators move too; the micro-step
// and the step count stay on the device (the update's scalars are copied
// with the gradient).
// ADAMW-LABEL: func.func @mlp
// ADAMW-DAG: memopt.variable "w1.exp_avg" {memopt.placement = "host", role = "optimizer_state"}
// ADAMW-DAG: memopt.variable "w1.exp_avg_sq" {memopt.placement = "host", role = "optimizer_state"}
// ADAMW-DAG: %[[ACC:.*]] = memopt.variable "w1.grad" {memopt.placement = "host", role = "gradient_accumulator"}
// ADAMW-DAG: %[[MICRO:.*]] = memopt.variable "memopt.micro_step" {initial_value = dense<0.000000e+00> : tensor<f32>, role = "micro_step"}
// ADAMW-DAG: %[[MASTER:.*]] = memopt.variable "w1.master"
// ADAMW: memopt.adamw_update {{.*}} accumulate %[[ACC]], micro_step %[[MICRO]] master %[[MASTER]] {accumulation_steps = 2 : i64}

// Planning: host-placed variables get host offsets (none in the weight
// region), each offloaded update a staging slot (64 bytes of scalars, then
// its gradient) after them; the report lists the host bytes apart. Eight
// host variables (w1's four of 80 B, w2's four of 48 B: 512 B) at 256-byte
// steps up to 1792; staging 112 B (w2's update comes first) at 2048 and
// 144 B (w1) at 2304.
// PLAN-LABEL: func.func @mlp
// PLAN-SAME: memopt.host_size = 2560 : i64, memopt.host_staging_size = 256 : i64
// PLAN-DAG: memopt.variable "w1.master" {initial_value = {{.*}}, memopt.host_offset = {{[0-9]+}} : i64, memopt.placement = "host", role = "master"}
// PLAN-DAG: memopt.variable "w1" {initial_value = {{.*}}, memopt.weight_offset = {{[0-9]+}} : i64, role = "parameter"}
// PLAN: memopt.adamw_update {{.*}}memopt.staging_offset = 2048 : i64
// PLAN: memopt.adamw_update {{.*}}memopt.staging_offset = 2304 : i64
// REPORT: weights
// REPORT-NEXT: host state {{ *}}512 B {{.*}}plus 256 B of gradient staging

// SCALED-LABEL: func.func @mlp
// SCALED: %[[FOUND:.*]] = memopt.found_inf
// SCALED: memopt.sgd_update {{.*}} loss_scale %{{.*}}, found_inf %[[FOUND]] master %{{.*}} :

// --offload-accumulators device: the accumulators stay in the weight region
// (the device sums; the update stages the sum), the moments and master move.
// DEVICE-LABEL: func.func @mlp
// DEVICE-DAG: memopt.variable "w1.exp_avg" {memopt.placement = "host", role = "optimizer_state"}
// DEVICE-DAG: %[[ACC:.*]] = memopt.variable "w1.grad" {role = "gradient_accumulator"}
// DEVICE-DAG: %[[MASTER:.*]] = memopt.variable "w1.master" {{.*}}memopt.placement = "host"
// DEVICE: memopt.adamw_update {{.*}} accumulate %[[ACC]], micro_step %{{.*}} master %[[MASTER]] {accumulation_steps = 2 : i64}
// And the overflow check may read them: loss scaling with accumulation is
// accepted.
// DEVICE-SCALED-LABEL: func.func @mlp
// DEVICE-SCALED: %[[FOUND:.*]] = memopt.found_inf {{.*}}accumulators
// DEVICE-SCALED: memopt.sgd_update {{.*}} accumulate %{{.*}}, micro_step %{{.*}} loss_scale %{{.*}}, found_inf %[[FOUND]] master %{{.*}} {accumulation_steps = 2 : i64}
// SCALED-ACCUM: error: {{.*}}--offload optimizer with dynamic loss scaling and --accumulate is not supported
// NO-UPDATE: error: {{.*}}--offload optimizer: the function has no optimizer update to offload
func.func @mlp(%x: tensor<2x5xf32>, %labels: tensor<2xi64>) -> tensor<f32> {
  %w1 = memopt.variable "w1" {initial_value = dense<0.5> : tensor<5x4xf32>, role = "parameter"} : tensor<5x4xf32>
  %w2 = memopt.variable "w2" {initial_value = dense<0.25> : tensor<3x4xf32>, role = "parameter"} : tensor<3x4xf32>
  %h = memopt.gemm %x, %w1 : (tensor<2x5xf32>, tensor<5x4xf32>) -> tensor<2x4xf32>
  %r = memopt.relu %h : tensor<2x4xf32>
  %y = memopt.gemm %r, %w2 {transB = 1 : i64} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  %loss = memopt.softmax_cross_entropy %y, %labels : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
