// RUN: memopt-opt %s -split-input-file --memopt-bufferize | FileCheck %s
// RUN: memopt-opt %s -split-input-file --mlir-disable-threading --memopt-bufferize=report -o /dev/null | FileCheck %s --check-prefix=REPORT

// A chain of elementwise ops: each result overwrites the operand that dies at
// it. The first op reads an input and a weight (never overwritten) and the
// last writes the caller's output buffer (no arena operand to reuse).
// CHECK-LABEL: func.func @chain
// CHECK: %[[A:.*]] = memopt.add %arg0, %{{.*}} :
// CHECK-NOT: memopt.in_place
// CHECK: %[[R:.*]] = memopt.relu %[[A]] {memopt.in_place = 0 : i64}
// CHECK: %[[E:.*]] = memopt.exp %[[R]] {memopt.in_place = 0 : i64}
// CHECK: %[[M:.*]] = memopt.mul %[[E]], %{{.*}} : (
// CHECK-NEXT: return %[[M]]
// REPORT: memopt-bufferize @chain: 2 ops in place, saved 4096 bytes; views saved 0 bytes
func.func @chain(%x: tensor<16x32xf32>) -> tensor<16x32xf32> {
  %c = memopt.constant dense<1.0> : tensor<32xf32>
  %a = memopt.add %x, %c : (tensor<16x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
  %r = memopt.relu %a : tensor<16x32xf32>
  %e = memopt.exp %r : tensor<16x32xf32>
  %m = memopt.mul %e, %c : (tensor<16x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
  return %m : tensor<16x32xf32>
}

// -----

// An operand read again later must survive: relu cannot overwrite %a, but
// the add, where %a dies, can.
// CHECK-LABEL: func.func @later_reader
// CHECK: %[[A:.*]] = memopt.exp %arg0 : tensor<8xf32>
// CHECK: %[[R:.*]] = memopt.relu %[[A]] : tensor<8xf32>
// CHECK: %[[S:.*]] = memopt.add %[[A]], %[[R]] {memopt.in_place = 0 : i64}
// REPORT: memopt-bufferize @later_reader: 2 ops in place, saved 64 bytes
func.func @later_reader(%x: tensor<8xf32>) -> tensor<8xf32> {
  %a = memopt.exp %x : tensor<8xf32>
  %r = memopt.relu %a : tensor<8xf32>
  %s = memopt.add %a, %r : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %t = memopt.exp %s : tensor<8xf32>
  %u = memopt.mul %t, %t : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %u : tensor<8xf32>
}

// -----

// Broadcasting: only the operand that already has the result's shape can be
// overwritten.
// CHECK-LABEL: func.func @broadcast
// CHECK: memopt.add %{{.*}}, %{{.*}} {memopt.in_place = 1 : i64} : (tensor<4x1xf32>, tensor<4x8xf32>)
func.func @broadcast(%x: tensor<4x1xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = memopt.exp %x : tensor<4x1xf32>
  %b = memopt.exp %y : tensor<4x8xf32>
  %s = memopt.add %a, %b : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = memopt.exp %s : tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}

// -----

// A view shares its operand's storage: the relu may overwrite it because
// neither the view nor its source is read afterwards; in @view_alive the
// view is read later, so the source must stay.
// CHECK-LABEL: func.func @view_dies
// CHECK: memopt.relu %{{.*}} {memopt.in_place = 0 : i64} : tensor<32xf32>
// REPORT: memopt-bufferize @view_dies: 1 ops in place, saved 128 bytes; views saved 128 bytes
func.func @view_dies(%x: tensor<4x8xf32>) -> tensor<32xf32> {
  %a = memopt.exp %x : tensor<4x8xf32>
  %v = memopt.reshape %a : (tensor<4x8xf32>) -> tensor<32xf32>
  %r = memopt.relu %v : tensor<32xf32>
  %t = memopt.exp %r : tensor<32xf32>
  return %t : tensor<32xf32>
}

// CHECK-LABEL: func.func @view_alive
// CHECK: memopt.relu %{{.*}} : tensor<4x8xf32>
// CHECK-NOT: memopt.in_place
// CHECK: return
func.func @view_alive(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<32xf32>) {
  %a = memopt.exp %x : tensor<4x8xf32>
  %v = memopt.reshape %a : (tensor<4x8xf32>) -> tensor<32xf32>
  %r = memopt.relu %a : tensor<4x8xf32>
  %t = memopt.exp %v : tensor<32xf32>
  return %r, %t : tensor<4x8xf32>, tensor<32xf32>
}

// -----

// ScatterND writes into `data` when `data` dies there (the kernel then skips
// its copy, as onnxruntime does), but never when `updates` or `indices`
// share data's storage through a view: the kernel would read what it has
// already overwritten.
// CHECK-LABEL: func.func @scatter_nd_in_place
// CHECK: memopt.scatter_nd %{{.*}}, %{{.*}}, %{{.*}} {memopt.in_place = 0 : i64} : (tensor<4x8xf32>
// REPORT: memopt-bufferize @scatter_nd_in_place: 1 ops in place, saved 128 bytes
func.func @scatter_nd_in_place(%x: tensor<4x8xf32>, %u: tensor<2x8xf32>) -> tensor<4x8xf32> {
  %i = memopt.constant dense<[[3], [0]]> : tensor<2x1xi64>
  %a = memopt.exp %x : tensor<4x8xf32>
  %s = memopt.scatter_nd %a, %i, %u : (tensor<4x8xf32>, tensor<2x1xi64>, tensor<2x8xf32>) -> tensor<4x8xf32>
  %t = memopt.exp %s : tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @scatter_nd_updates_view_of_data
// CHECK: memopt.scatter_nd %{{.*}}, %{{.*}}, %{{.*}} : (tensor<32xf32>
// CHECK-NOT: memopt.in_place
// CHECK: return
// REPORT: memopt-bufferize @scatter_nd_updates_view_of_data: 0 ops in place
func.func @scatter_nd_updates_view_of_data(%x: tensor<32xf32>) -> tensor<32xf32> {
  %i = memopt.constant dense<0> : tensor<1x0xi64>
  %a = memopt.exp %x : tensor<32xf32>
  %v = memopt.reshape %a : (tensor<32xf32>) -> tensor<1x32xf32>
  %s = memopt.scatter_nd %a, %i, %v : (tensor<32xf32>, tensor<1x0xi64>, tensor<1x32xf32>) -> tensor<32xf32>
  %t = memopt.exp %s : tensor<32xf32>
  return %t : tensor<32xf32>
}

// -----

// A running sum writes over its operand when that dies there (both kernels
// read an element before writing it, row by row).
// CHECK-LABEL: func.func @cum_sum_in_place
// CHECK: memopt.cum_sum %{{.*}} {axis = 1 : i64, memopt.in_place = 0 : i64, reverse = 1 : i64} : (tensor<4x8xf32>)
// REPORT: memopt-bufferize @cum_sum_in_place: 1 ops in place, saved 128 bytes
func.func @cum_sum_in_place(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = memopt.exp %x : tensor<4x8xf32>
  %c = memopt.cum_sum %a {axis = 1 : i64, reverse = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = memopt.exp %c : tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}
