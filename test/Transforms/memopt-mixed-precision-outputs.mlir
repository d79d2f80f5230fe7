// RUN: memopt-opt %s --memopt-mixed-precision=output-precision=low | FileCheck %s
// RUN: memopt-opt %s --memopt-mixed-precision="precision=bf16 output-precision=low" | FileCheck %s --check-prefix=BF16
// RUN: memopt-opt %s --mlir-disable-threading --memopt-mixed-precision="output-precision=low report" -o /dev/null 2>/dev/null | FileCheck %s --check-prefix=REPORT
// RUN: memopt-opt %s --memopt-mixed-precision="training=true output-precision=low" 2>/dev/null | FileCheck %s --check-prefix=TRAIN
// RUN: not memopt-opt %s --memopt-mixed-precision=output-precision=f16 -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD
// The option through the pipeline: the driver's --output-precision and its
// checks (a training step: memopt-mixed-precision-outputs-training.mlir).
// RUN: memopt-compile %s --precision fp16 --output-precision low --emit mlir -o %t.low.mlir --quiet
// RUN: FileCheck %s --check-prefix=PIPE --input-file=%t.low.mlir
// RUN: memopt-opt %s --memopt-compile-pipeline="precision=fp16 output-precision=low stop-after=graph" > %t.opt.mlir
// RUN: diff -B %t.low.mlir %t.opt.mlir
// RUN: not memopt-compile %s --output-precision low --emit mlir -o %t.fp32.mlir --quiet 2>&1 | FileCheck %s --check-prefix=NEEDS-LOW
// RUN: not memopt-compile %s --precision bf16 --output-precision f16 --emit mlir -o %t.bad.mlir --quiet 2>&1 | FileCheck %s --check-prefix=BAD-FLAG

// memopt-mixed-precision with output-precision=low (docs/mixed-precision.md,
// "Outputs stored in f32"): a result the model computes in the low type is
// returned in it (autocast's result types, onnxconverter's
// keep_io_types=False); the f32 cases are in memopt-mixed-precision.mlir.

// BAD: error: memopt-mixed-precision: output-precision 'f16' is not f32 or low
// NEEDS-LOW: memopt-compile: error: output-precision low needs precision fp16 or bf16
// BAD-FLAG: memopt-compile: error: output-precision 'f16' is not f32 or low

// A language model's head: the matmul's low result is the output itself (no
// f32 accumulator stored, no cast), through a view too; a relu of it stays
// low; an f32 island's result (exp) stays f32 and is not cast down; an input
// returned as it is stays f32; an integer output is untouched.
// CHECK-LABEL: func.func @decoder_outputs
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[I:.*]]: tensor<4xi64>) -> (tensor<4x16xf16>, tensor<2x2x16xf16>, tensor<4x16xf16>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xi64>)
// CHECK-SAME: attributes {memopt.precision = "f16"}
// CHECK-NOT: tensor<4x16xf32>
// CHECK: %[[L:.*]] = memopt.matmul %{{.*}}, %{{.*}} : (tensor<4x8xf16>, tensor<8x16xf16>) -> tensor<4x16xf16>
// CHECK: %[[V:.*]] = memopt.matmul %{{.*}}, %{{.*}} : (tensor<4x8xf16>, tensor<8x16xf16>) -> tensor<4x16xf16>
// CHECK: %[[R:.*]] = memopt.reshape %[[V]] : (tensor<4x16xf16>) -> tensor<2x2x16xf16>
// CHECK: %[[A:.*]] = memopt.relu %[[L]] : tensor<4x16xf16>
// CHECK: %[[E:.*]] = memopt.exp %[[X]] : tensor<4x8xf32>
// CHECK-NOT: memopt.cast
// CHECK: return %[[L]], %[[R]], %[[A]], %[[E]], %[[X]], %[[I]] : tensor<4x16xf16>, tensor<2x2x16xf16>, tensor<4x16xf16>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xi64>
// BF16-LABEL: func.func @decoder_outputs
// BF16-SAME: -> (tensor<4x16xbf16>, tensor<2x2x16xbf16>, tensor<4x16xbf16>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xi64>)
// BF16: memopt.matmul %{{.*}}, %{{.*}} : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
// BF16-NOT: memopt.cast {{.*}}-> tensor<4x16xf32>
// REPORT: memopt-mixed-precision @decoder_outputs: f16: {{.*}} casts, 0 results stored in f32, 3 returned in f16; weights
// The pipeline keeps the signature through the later passes.
// PIPE-LABEL: func.func @decoder_outputs
// PIPE-SAME: -> (tensor<4x16xf16>, tensor<2x2x16xf16>, tensor<4x16xf16>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xi64>)
// Training ignores the option: the results are the loss's inputs (cast up,
// as without it; memopt-append-loss then leaves one output, the f32 loss).
// TRAIN-LABEL: func.func @decoder_outputs
// TRAIN-SAME: -> (tensor<4x16xf32>, tensor<2x2x16xf32>, tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xi64>)
func.func @decoder_outputs(%x: tensor<4x8xf32>, %i: tensor<4xi64>) -> (tensor<4x16xf32>, tensor<2x2x16xf32>, tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xi64>) {
  %w = memopt.constant dense<0.5> : tensor<8x16xf32>
  %l = memopt.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %v = memopt.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %r = memopt.reshape %v : (tensor<4x16xf32>) -> tensor<2x2x16xf32>
  %a = memopt.relu %l : tensor<4x16xf32>
  %e = memopt.exp %x : tensor<4x8xf32>
  return %l, %r, %a, %e, %x, %i : tensor<4x16xf32>, tensor<2x2x16xf32>, tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xi64>
}

