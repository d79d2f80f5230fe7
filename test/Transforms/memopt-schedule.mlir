// RUN: memopt-opt %s -split-input-file --memopt-schedule | FileCheck %s
// RUN: memopt-opt %s -split-input-file --mlir-disable-threading --memopt-schedule=report -o /dev/null | FileCheck %s --check-prefix=REPORT

// Two branches that each expand to 16 KiB and shrink to 1 KiB. Running both
// expansions first keeps 32 KiB alive; finishing one branch before starting
// the other needs about half.
// CHECK-LABEL: func.func @two_branches
// CHECK: %[[A1:.*]] = memopt.exp %arg0
// CHECK-NEXT: %[[A2:.*]] = memopt.matmul %[[A1]]
// CHECK-NEXT: %[[B1:.*]] = memopt.exp %arg0
// CHECK-NEXT: %[[B2:.*]] = memopt.matmul %[[B1]]
// CHECK-NEXT: memopt.add %[[A2]], %[[B2]]
// a1 + b1 + a2 = 16384 + 16384 + 1024 before; b1 + a2 + b2 after.
// REPORT: memopt-schedule @two_branches: max-live before 33792, after 18432 (greedy)
func.func @two_branches(%x: tensor<64x64xf32>) -> tensor<64x4xf32> {
  %w = memopt.constant dense<0.5> : tensor<64x4xf32>
  %a1 = memopt.exp %x : tensor<64x64xf32>
  %b1 = memopt.exp %x : tensor<64x64xf32>
  %a2 = memopt.matmul %a1, %w : (tensor<64x64xf32>, tensor<64x4xf32>) -> tensor<64x4xf32>
  %b2 = memopt.matmul %b1, %w : (tensor<64x64xf32>, tensor<64x4xf32>) -> tensor<64x4xf32>
  %s = memopt.add %a2, %b2 : (tensor<64x4xf32>, tensor<64x4xf32>) -> tensor<64x4xf32>
  return %s : tensor<64x4xf32>
}

// -----

// An order that is already best is kept as it is.
// CHECK-LABEL: func.func @already_good
// CHECK: memopt.exp
// CHECK-NEXT: memopt.relu
// CHECK-NEXT: memopt.exp
// REPORT: memopt-schedule @already_good: max-live before 64, after 64 (original)
func.func @already_good(%x: tensor<16xf32>) -> tensor<16xf32> {
  %a = memopt.exp %x : tensor<16xf32>
  %b = memopt.relu %a : tensor<16xf32>
  %c = memopt.exp %b : tensor<16xf32>
  return %c : tensor<16xf32>
}
