// RUN: memopt-opt %s -split-input-file --memopt-attention-engine="target=cuda report=true" | FileCheck %s
// RUN: memopt-opt %s -split-input-file --memopt-attention-engine="target=cuda dropout-rng=memopt report=true" | FileCheck %s --check-prefix=MEMOPT
// RUN: memopt-opt %s -split-input-file --memopt-attention-engine="target=host" | FileCheck %s --check-prefix=HOST
// RUN: not memopt-opt %s -split-input-file --memopt-attention-engine="target=cuda dropout-rng=curand" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD

// Attention dropout on the CUDA target: a forward and its gradients (the
// same Q, K, V, key and stream) draw one mask, so they take cuDNN's
// generator together, only where cuDNN runs all of them, and keep their
// workspaces; otherwise none does and none keeps a cuDNN workspace.
// dropout-rng=memopt: memopt's mask everywhere. The host changes nothing.
// HOST-NOT: dropout_cudnn_rng
// HOST-NOT: memopt.cudnn_workspace
// BAD: memopt-attention-engine: dropout-rng 'curand' is not auto or memopt

// An f16 forward with its gradient, both eligible: both draw cuDNN's mask.
// CHECK: memopt-attention-engine @pair: 2 of 2 attention calls reserve cuDNN's SDPA workspace (largest {{[0-9]+}} bytes); 2 of 2 with dropout draw cuDNN's mask
// CHECK-LABEL: func.func @pair
// CHECK: memopt.attention {{.*}}dropout_cudnn_rng{{.*}}memopt.cudnn_workspace = 
// CHECK: memopt.attention_grad {{.*}}dropout_cudnn_rng{{.*}}memopt.cudnn_workspace = 
// MEMOPT: memopt-attention-engine @pair: 0 of 2 attention calls reserve cuDNN's SDPA workspace (largest 0 bytes); 0 of 2 with dropout draw cuDNN's mask
// MEMOPT-LABEL: func.func @pair
// MEMOPT-NOT: dropout_cudnn_rng
// MEMOPT-NOT: memopt.cudnn_workspace
// MEMOPT: return
func.func @pair(%q: tensor<2x4x32x64xf16>, %k: tensor<2x4x32x64xf16>, %v: tensor<2x4x32x64xf16>, %do: tensor<2x4x32x64xf16>, %key: tensor<2xi64>) -> (tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>) {
  %y, %lse = memopt.attention %q, %k, %v dropout_key %key {scale = 0.125 : f32, causal = true, return_lse = true, dropout_ratio = 0.1 : f32, dropout_stream = 2 : i64} : (tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2xi64>) -> (tensor<2x4x32x64xf16>, tensor<2x4x32x2xf32>)
  %dq, %dk, %dv = memopt.attention_grad %q, %k, %v, %y, %do, %lse dropout_key %key {scale = 0.125 : f32, causal = true, dropout_ratio = 0.1 : f32, dropout_stream = 2 : i64} : (tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x2xf32>, tensor<2xi64>) -> (tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>)
  return %dq, %dk, %dv : tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>
}

// -----

// A forward cuDNN could run whose gradient it cannot (K stored [D, Sk] with
// grouped K / V heads, refused backward): neither draws cuDNN's mask, and
// the forward's workspace is dropped too (memopt's kernels run both). An
// attention without dropout beside them keeps its workspace.
// CHECK: memopt-attention-engine @backward_refused: 1 of 3 attention calls reserve cuDNN's SDPA workspace (largest 65536 bytes); 0 of 2 with dropout draw cuDNN's mask
// CHECK-LABEL: func.func @backward_refused
// CHECK-NOT: dropout_cudnn_rng
// CHECK: memopt.attention %arg0, %arg0, %arg0 {{.*}}memopt.cudnn_workspace = 65536
// CHECK-NOT: dropout_cudnn_rng
// CHECK-NOT: memopt.cudnn_workspace
// CHECK: return
func.func @backward_refused(%q: tensor<2x2x2x32x64xf16>, %kt: tensor<2x2x1x64x32xf16>, %v: tensor<2x2x1x32x64xf16>, %do: tensor<2x2x2x32x64xf16>, %key: tensor<2xi64>) -> (tensor<2x2x2x32x64xf16>, tensor<2x2x2x32x64xf16>, tensor<2x2x1x64x32xf16>, tensor<2x2x1x32x64xf16>) {
  %plain = memopt.attention %q, %q, %q {scale = 0.125 : f32} : (tensor<2x2x2x32x64xf16>, tensor<2x2x2x32x64xf16>, tensor<2x2x2x32x64xf16>) -> tensor<2x2x2x32x64xf16>
  %y, %lse = memopt.attention %q, %kt, %v dropout_key %key {scale = 0.125 : f32, key_transposed = true, return_lse = true, dropout_ratio = 0.1 : f32, dropout_stream = 1 : i64} : (tensor<2x2x2x32x64xf16>, tensor<2x2x1x64x32xf16>, tensor<2x2x1x32x64xf16>, tensor<2xi64>) -> (tensor<2x2x2x32x64xf16>, tensor<2x2x2x32x2xf32>)
  %dq, %dk, %dv = memopt.attention_grad %q, %kt, %v, %y, %do, %lse dropout_key %key {scale = 0.125 : f32, key_transposed = true, grouped_gradients = true, dropout_ratio = 0.1 : f32, dropout_stream = 1 : i64} : (tensor<2x2x2x32x64xf16>, tensor<2x2x1x64x32xf16>, tensor<2x2x1x32x64xf16>, tensor<2x2x2x32x64xf16>, tensor<2x2x2x32x64xf16>, tensor<2x2x2x32x2xf32>, tensor<2xi64>) -> (tensor<2x2x2x32x64xf16>, tensor<2x2x1x64x32xf16>, tensor<2x2x1x32x64xf16>)
  return %plain, %dq, %dk, %dv : tensor<2x2x2x32x64xf16>, tensor<2x2x2x32x64xf16>, tensor<2x2x1x64x32xf16>, tensor<2x2x1x32x64xf16>
}

// -----

// A forward recomputed for its gradient (rematerialization's copy, or a
// duplicate) joins the group: all three draw cuDNN's mask. Another stream
// is another group, decided on its own (f32 here: memopt's kernels).
// CHECK: memopt-attention-engine @recomputed: 3 of 4 attention calls reserve cuDNN's SDPA workspace (largest {{[0-9]+}} bytes); 3 of 4 with dropout draw cuDNN's mask
// CHECK-LABEL: func.func @recomputed
// CHECK: memopt.attention {{.*}}dropout_cudnn_rng
// CHECK: memopt.attention {{.*}}dropout_cudnn_rng
// CHECK: memopt.attention_grad {{.*}}dropout_cudnn_rng
// CHECK: memopt.attention
// CHECK-NOT: dropout_cudnn_rng
// CHECK-SAME: -> tensor<2x4x32x64xf32>
func.func @recomputed(%q: tensor<2x4x32x64xf16>, %k: tensor<2x4x32x64xf16>, %v: tensor<2x4x32x64xf16>, %do: tensor<2x4x32x64xf16>, %key: tensor<2xi64>, %f: tensor<2x4x32x64xf32>) -> (tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x64xf32>) {
  %y0 = memopt.attention %q, %k, %v dropout_key %key {scale = 0.125 : f32, dropout_ratio = 0.1 : f32, dropout_stream = 5 : i64} : (tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2xi64>) -> tensor<2x4x32x64xf16>
  %y, %lse = memopt.attention %q, %k, %v dropout_key %key {scale = 0.125 : f32, return_lse = true, dropout_ratio = 0.1 : f32, dropout_stream = 5 : i64} : (tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2xi64>) -> (tensor<2x4x32x64xf16>, tensor<2x4x32x2xf32>)
  %dq, %dk, %dv = memopt.attention_grad %q, %k, %v, %y, %do, %lse dropout_key %key {scale = 0.125 : f32, dropout_ratio = 0.1 : f32, dropout_stream = 5 : i64} : (tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x2xf32>, tensor<2xi64>) -> (tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>)
  %z = memopt.attention %f, %f, %f dropout_key %key {scale = 0.125 : f32, dropout_ratio = 0.1 : f32, dropout_stream = 6 : i64} : (tensor<2x4x32x64xf32>, tensor<2x4x32x64xf32>, tensor<2x4x32x64xf32>, tensor<2xi64>) -> tensor<2x4x32x64xf32>
  return %y0, %dq, %dk, %dv, %z : tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x64xf16>, tensor<2x4x32x64xf32>
}
