// RUN: memopt-opt %s -split-input-file --memopt-plan-memory | FileCheck %s
// RUN: memopt-opt %s -split-input-file --memopt-plan-memory="algorithm=best-fit" | FileCheck %s --check-prefix=BESTFIT

// Lifetimes across an offload (docs/offload.md): `a` is live until its
// offload_wait, the reload's buffer from the reload to its last reader
// (through reload_wait, a view). In between, `c` may use a's bytes: the
// arena is two 16 KiB buffers, where keeping `a` would need three (a, b and
// c are live together at c otherwise).
// CHECK-LABEL: func.func @across_offload
// CHECK-SAME: memopt.arena_size = 32768 : i64
// CHECK-SAME: memopt.host_pool_size = 16384 : i64
// CHECK-SAME: memopt.max_live = 32768 : i64
// CHECK: memopt.exp %arg0 {memopt.offsets = array<i64: [[A:[0-9]+]]>}
// CHECK: memopt.offload %{{.*}} {host_offset = 0 : i64, memopt.offsets = array<i64>, slot = 0 : i64}
// CHECK: memopt.matmul {{.*}} {memopt.offsets = array<i64: [[A]]>}
// CHECK: memopt.reload {host_offset = 0 : i64, memopt.offsets = array<i64: [[A]]>, slot = 0 : i64}
// BESTFIT-LABEL: func.func @across_offload
// BESTFIT-SAME: memopt.arena_size = 32768 : i64
func.func @across_offload(%x: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %k = memopt.constant dense<0.0625> : tensor<64x64xf32>
  %a = memopt.exp %x : tensor<64x64xf32> loc("a")
  %b = memopt.matmul %a, %k : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("b")
  memopt.offload %a {slot = 0 : i64} : tensor<64x64xf32>
  memopt.offload_wait %a {slot = 0 : i64} : tensor<64x64xf32>
  %c = memopt.matmul %b, %k : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("c")
  %d = memopt.matmul %c, %k : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("d")
  %r = memopt.reload {slot = 0 : i64} : tensor<64x64xf32>
  %rw = memopt.reload_wait %r {slot = 0 : i64} : tensor<64x64xf32>
  %e = memopt.add %rw, %d : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("e")
  return %e : tensor<64x64xf32>
}

// -----

// The host pool is planned like the arena: slot 1 is offloaded after slot 0
// came back, so it reuses slot 0's host bytes.
// CHECK-LABEL: func.func @host_pool_reuse
// CHECK-SAME: memopt.host_pool_size = 16384 : i64
// CHECK: memopt.offload %{{.*}} {host_offset = 0 : i64, memopt.offsets = array<i64>, slot = 0 : i64}
// CHECK: memopt.offload %{{.*}} {host_offset = 0 : i64, memopt.offsets = array<i64>, slot = 1 : i64}
func.func @host_pool_reuse(%x: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %a = memopt.exp %x : tensor<64x64xf32> loc("a")
  memopt.offload %a {slot = 0 : i64} : tensor<64x64xf32>
  memopt.offload_wait %a {slot = 0 : i64} : tensor<64x64xf32>
  %r = memopt.reload {slot = 0 : i64} : tensor<64x64xf32>
  %rw = memopt.reload_wait %r {slot = 0 : i64} : tensor<64x64xf32>
  %b = memopt.exp %rw : tensor<64x64xf32> loc("b")
  memopt.offload %b {slot = 1 : i64} : tensor<64x64xf32>
  memopt.offload_wait %b {slot = 1 : i64} : tensor<64x64xf32>
  %r1 = memopt.reload {slot = 1 : i64} : tensor<64x64xf32>
  %rw1 = memopt.reload_wait %r1 {slot = 1 : i64} : tensor<64x64xf32>
  %c = memopt.exp %rw1 : tensor<64x64xf32> loc("c")
  return %c : tensor<64x64xf32>
}

