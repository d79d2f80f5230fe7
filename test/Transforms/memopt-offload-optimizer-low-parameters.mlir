// RUN: memopt-opt %s --split-input-file --memopt-mixed-precision="training=true precision=bf16" --canonicalize --memopt-append-loss --memopt-autodiff="optimizer=adamw" --canonicalize --memopt-offload-optimizer | FileCheck %s
// RUN: memopt-opt %s --split-input-file --memopt-mixed-precision="training=true precision=f16" --canonicalize --memopt-append-loss --memopt-autodiff="optimizer=sgd momentum=0.9 loss-scale=dynamic accumulate=2" --canonicalize --memopt-offload-optimizer="accumulators-on-device=true" | FileCheck %s --check-prefix=F16
// RUN: memopt-opt %s --split-input-file --memopt-mixed-precision="training=true precision=bf16" --canonicalize --memopt-append-loss --memopt-autodiff="optimizer=adamw" --canonicalize --memopt-offload-optimizer="low-parameters=false" | FileCheck %s --check-prefix=OFF
// RUN: memopt-opt %s --split-input-file --mlir-disable-threading --memopt-mixed-precision="training=true precision=bf16" --canonicalize --memopt-append-loss --memopt-autodiff="optimizer=adamw" --canonicalize --memopt-offload-optimizer="report=true" -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: memopt-opt %s --split-input-file --memopt-mixed-precision="training=true precision=bf16" --canonicalize --memopt-append-loss --memopt-autodiff="optimizer=adamw" --canonicalize --memopt-offload-optimizer --memopt-schedule --memopt-bufferize --memopt-plan-memory | FileCheck %s --check-prefix=PLAN
// RUN: memopt-opt %s --split-input-file --memopt-mixed-precision="training=true precision=bf16" --canonicalize --memopt-append-loss --memopt-autodiff="optimizer=adamw" --canonicalize --memopt-offload-optimizer="low-parameters=false" --memopt-schedule --memopt-bufferize --memopt-plan-memory | FileCheck %s --check-prefix=PLAN-OFF

// Mixed precision reads fc.weight and fc.bias through bf16 casts only: with
// the optimizer offloaded they become bf16 variables without an initial
// value (their f32 masters keep it), the casts are gone and the matmul and
// the add read the variables; the update writes the rounded master into
// them. The embedding table's gathered rows are all cast: the table becomes
// bf16 and the gather gives bf16 rows (the same bits: the cast commutes with
// the gather). The layer norm's scale and bias (read in f32 by the policy)
// stay f32.
// CHECK-LABEL: func.func @embed_norm_fc
// CHECK-DAG: %[[T:.*]] = memopt.variable "wte" {role = "parameter"} : tensor<64x8xbf16>
// CHECK-DAG: %[[G:.*]] = memopt.variable "ln.weight" {initial_value = {{.*}}, role = "parameter"} : tensor<8xf32>
// CHECK-DAG: %[[W:.*]] = memopt.variable "fc.weight" {role = "parameter"} : tensor<8x512xbf16>
// CHECK-DAG: %[[WM:.*]] = memopt.variable "fc.weight.master" {initial_value = dense<5.000000e-01> : tensor<8x512xf32>, memopt.placement = "host", role = "master"} : tensor<8x512xf32>
// CHECK-DAG: %[[B:.*]] = memopt.variable "fc.bias" {role = "parameter"} : tensor<512xbf16>
// CHECK-NOT: memopt.cast %[[W]]
// CHECK-NOT: memopt.cast %[[B]]
// CHECK: %[[E:.*]] = memopt.gather %[[T]], %{{.*}} : (tensor<64x8xbf16>, tensor<4xi64>) -> tensor<4x8xbf16>
// CHECK-NEXT: memopt.layer_normalization %[[E]], %[[G]], %{{.*}} : (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>)
// CHECK: memopt.matmul %{{.*}}, %[[W]] : (tensor<4x8xbf16>, tensor<8x512xbf16>) -> tensor<4x512xbf16>
// CHECK: memopt.add %{{.*}}, %[[B]] : (tensor<4x512xbf16>, tensor<512xbf16>) -> tensor<4x512xbf16>
// CHECK: memopt.adamw_update %[[W]], %{{.*}} master %[[WM]] : tensor<8x512xbf16>, tensor<8x512x{{.*}}>, tensor<8x512xf32>, tensor<8x512xf32>
// CHECK: memopt.adamw_update %[[G]], {{.*}} master %{{.*}} : tensor<8xf32>,

// f16 with loss scaling, SGD's momentum and device accumulators: the same
// choice; the accumulator and the momentum buffer are f32.
// F16-LABEL: func.func @embed_norm_fc
// F16-DAG: memopt.variable "wte" {role = "parameter"} : tensor<64x8xf16>
// F16-DAG: %[[W:.*]] = memopt.variable "fc.weight" {role = "parameter"} : tensor<8x512xf16>
// F16-DAG: memopt.variable "fc.weight.grad" {role = "gradient_accumulator"} : tensor<8x512xf32>
// F16-DAG: memopt.variable "ln.weight" {initial_value = {{.*}}, role = "parameter"} : tensor<8xf32>
// F16: memopt.sgd_update %[[W]], %{{.*}}, momentum %{{.*}}, lr %{{.*}} accumulate %{{.*}}, micro_step %{{.*}} loss_scale %{{.*}}, found_inf %{{.*}} master %{{.*}} {{.*}}: tensor<8x512xf16>, {{.*}}, tensor<8x512xf32>, tensor<f32>, tensor<8x512xf32>,

// low-parameters=false: every parameter stays f32, read through its cast.
// OFF-LABEL: func.func @embed_norm_fc
// OFF-DAG: %[[W:.*]] = memopt.variable "fc.weight" {initial_value = {{.*}}, role = "parameter"} : tensor<8x512xf32>
// OFF: memopt.cast %[[W]] : (tensor<8x512xf32>) -> tensor<8x512xbf16>

// REPORT: [offload] 5 optimizer updates on the host: {{.*}}; 3 working parameters in f16 / bf16 on the device (10240 bytes fewer)

// The weight region loses half of wte's, fc.weight's and fc.bias's bytes
// (5,120 parameters: 20,480 -> 10,240 bytes): 23,808 -> 13,568. The staging
// slots gain their rounded copies after the staged gradients (the copy back
// reads them): 11,648 -> 21,888 host bytes.
// PLAN-LABEL: func.func @embed_norm_fc
// PLAN-SAME: memopt.host_staging_size = 21888 : i64
// PLAN-SAME: memopt.weights_size = 13568 : i64
// PLAN-DAG: memopt.variable "fc.weight" {memopt.weight_offset = {{[0-9]+}} : i64, role = "parameter"} : tensor<8x512xbf16>
// PLAN-OFF-LABEL: func.func @embed_norm_fc
// PLAN-OFF-SAME: memopt.host_staging_size = 11648 : i64
// PLAN-OFF-SAME: memopt.weights_size = 23808 : i64
func.func @embed_norm_fc(%ids: tensor<4xi64>) -> tensor<4x512xf32> {
  %table = memopt.variable "wte" {initial_value = dense<0.5> : tensor<64x8xf32>, role = "parameter"} : tensor<64x8xf32>
  %g = memopt.variable "ln.weight" {initial_value = dense<1.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %beta = memopt.variable "ln.bias" {initial_value = dense<0.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %w = memopt.variable "fc.weight" {initial_value = dense<0.5> : tensor<8x512xf32>, role = "parameter"} : tensor<8x512xf32>
  %b = memopt.variable "fc.bias" {initial_value = dense<0.25> : tensor<512xf32>, role = "parameter"} : tensor<512xf32>
  %e = memopt.gather %table, %ids {axis = 0 : i64} : (tensor<64x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
  %n = memopt.layer_normalization %e, %g, %beta : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %o = memopt.matmul %n, %w : (tensor<4x8xf32>, tensor<8x512xf32>) -> tensor<4x512xf32>
  %y = memopt.add %o, %b : (tensor<4x512xf32>, tensor<512xf32>) -> tensor<4x512xf32>
  return %y : tensor<4x512xf32>
}
