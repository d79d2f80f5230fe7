// RUN: split-file %s %t
// RUN: not memopt-compile %t/unplanned.mlir --lower-only --emit source -o %t/a 2>&1 | FileCheck %s --check-prefix=UNPLANNED
// RUN: not memopt-compile %t/missing-offsets.mlir --lower-only --emit source -o %t/b 2>&1 | FileCheck %s --check-prefix=OFFSETS
// RUN: not memopt-compile %t/no-kernel.mlir --lower-only --emit source -o %t/c 2>&1 | FileCheck %s --check-prefix=KERNEL
// RUN: not memopt-compile %t/outside.mlir --lower-only --emit source -o %t/d 2>&1 | FileCheck %s --check-prefix=OUTSIDE
// RUN: not memopt-compile %t/unplanned.mlir --lower-only --emit source --precision fp16 -o %t/e 2>&1 | FileCheck %s --check-prefix=FP16
// RUN: not memopt-compile %t/unplanned.mlir --lower-only --emit source --target cuda --arch 90 -o %t/f 2>&1 | FileCheck %s --check-prefix=ARCH
// RUN: not memopt-compile %t/unplanned.mlir --emit plan --memory-budget 32 -o %t/g 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not memopt-compile %t/unplanned.mlir --emit plan --memory-budget lots -o %t/h 2>&1 | FileCheck %s --check-prefix=BADSIZE
// RUN: not memopt-compile %t/unplanned.mlir --bogus-flag -o %t/i 2>&1 | FileCheck %s --check-prefix=FLAG

// UNPLANNED: error: {{.*}}function @main is not planned (no memopt.arena_size / memopt.weights_size): run --memopt-plan-memory before lowering
// OFFSETS: error: {{.*}}'memopt.exp' (ONNX node 'exp_node') has no memopt.offsets: the function is not planned; run --memopt-plan-memory first
// KERNEL: error: {{.*}}'memopt.shape' (ONNX node 'shape_node') has no runtime kernel: it folds to a constant; run --canonicalize before lowering
// OUTSIDE: error: {{.*}}'memopt.exp' (ONNX node 'exp_node') has arena offset 128 for 64 bytes, outside the arena of 160 bytes
// FP16: error: --precision fp16 needs the graph before planning; --lower-only input is already planned
// ARCH: error: --arch '90' is not a GPU architecture (expected sm_NN, e.g. sm_90)
// memopt-compile plans outputs in the arena and fuses exp -> neg into one
// op: max-live is the 64-byte output alone, and no recomputation lowers it.
// BUDGET: error: the arena does not fit in the memory budget of 32 B (32 bytes): without recomputation it is 64 B; the smallest arena reached is 64 B (64 bytes); at its peak, op 0 ('neg_node'), it holds 'neg_node' (fused_elementwise) 64 B; below that, the solver's model of the arena says infeasible: the budget of 32 bytes is below the 64 bytes that node 0 ('neg_node') needs for its inputs and output
// BADSIZE: error: --memory-budget 'lots' is not a size
// FLAG: Unknown command line argument '--bogus-flag'

//--- unplanned.mlir
func.func @main(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %e = memopt.exp %x : tensor<4x4xf32> loc("exp_node")
  %n = memopt.neg %e : tensor<4x4xf32> loc("neg_node")
  return %n : tensor<4x4xf32>
}

//--- missing-offsets.mlir
func.func @main(%x: tensor<4x4xf32>) -> tensor<4x4xf32>
    attributes {memopt.arena_size = 256 : i64, memopt.weights_size = 0 : i64} {
  %e = memopt.exp %x : tensor<4x4xf32> loc("exp_node")
  %n = memopt.neg %e {memopt.offsets = array<i64: -1>} : tensor<4x4xf32> loc("neg_node")
  return %n : tensor<4x4xf32>
}

//--- no-kernel.mlir
func.func @main(%x: tensor<4x4xf32>) -> tensor<2xi64>
    attributes {memopt.arena_size = 0 : i64, memopt.weights_size = 0 : i64} {
  %n = memopt.shape %x {memopt.offsets = array<i64: -1>} : (tensor<4x4xf32>) -> tensor<2xi64> loc("shape_node")
  return %n : tensor<2xi64>
}

//--- outside.mlir
func.func @main(%x: tensor<4x4xf32>) -> tensor<4x4xf32>
    attributes {memopt.arena_size = 160 : i64, memopt.weights_size = 0 : i64} {
  %e = memopt.exp %x {memopt.offsets = array<i64: 128>} : tensor<4x4xf32> loc("exp_node")
  %n = memopt.neg %e {memopt.offsets = array<i64: -1>} : tensor<4x4xf32> loc("neg_node")
  return %n : tensor<4x4xf32>
}
