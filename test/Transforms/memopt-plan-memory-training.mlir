// The memory report of a training step: the timeline picture shades the
// backward half, marks the boundary with the bytes saved for backward and
// colours the buffers by what they hold (saved for backward, gradients,
// others); the JSON gives each buffer's kind.
// RUN: memopt-opt %s --memopt-make-trainable --canonicalize --memopt-append-loss="kind=mse" --memopt-autodiff --canonicalize --memopt-schedule --memopt-bufferize --memopt-plan-memory="svg=%t.svg report=%t.json print=true" -o /dev/null | FileCheck %s --check-prefix=TEXT
// RUN: FileCheck %s --check-prefix=SVG --input-file=%t.svg
// RUN: FileCheck %s --check-prefix=JSON --input-file=%t.json

// TEXT: training step (backward from op [[START:[0-9]+]]
// TEXT: saved for backward {{ *}}320 B

// SVG-DAG: class="saved_for_backward"><title>
// SVG-DAG: class="gradient"><title>{{.*}}(gradient)</title>
// SVG: forward</text><text {{.*}}>backward + update</text>
// SVG-NEXT: class="boundary">saved for backward 320 B</text>
// SVG-DAG: >saved for backward</text>
// SVG-DAG: >gradient</text>

// JSON-DAG: "kind": "saved_for_backward"
// JSON-DAG: "kind": "gradient"
// JSON-DAG: "saved_for_backward_bytes":
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  %w = memopt.constant {memopt.initializer = "fc.weight"} dense<0.5> : tensor<8x16xf32>
  %b = memopt.constant {memopt.initializer = "fc.bias"} dense<0.25> : tensor<16xf32>
  %w2 = memopt.constant {memopt.initializer = "out.weight"} dense<0.125> : tensor<16x4xf32>
  %y = memopt.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32> loc("fc")
  %z = memopt.add %y, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32> loc("bias")
  %r = memopt.relu %z : tensor<4x16xf32> loc("relu")
  %o = memopt.matmul %r, %w2 : (tensor<4x16xf32>, tensor<16x4xf32>) -> tensor<4x4xf32> loc("out")
  return %o : tensor<4x4xf32>
}
