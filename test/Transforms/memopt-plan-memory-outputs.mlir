// RUN: memopt-opt %s -split-input-file --memopt-plan-memory="outputs-in-arena=true" | FileCheck %s
// RUN: memopt-opt %s -split-input-file --memopt-plan-memory | FileCheck %s --check-prefix=SEPARATE
// RUN: memopt-opt %s -split-input-file --memopt-plan-memory="outputs-in-arena=true print=true" -o /dev/null | FileCheck %s --check-prefix=TEXT

// With outputs in the arena, the 4 KiB output reuses the slot of %a (dead
// after op 1): the arena stays at the 8 KiB of two live tensors, and no
// output buffer is needed. Outputs outside: the same 8 KiB arena plus a
// separate 4 KiB output (offset -1).
// CHECK-LABEL: func.func @output_reuses_dead_bytes
// CHECK-SAME: memopt.arena_size = 8192 : i64, memopt.max_live = 8192 : i64, memopt.output_offsets = array<i64: {{0|4096}}>, memopt.outputs_in_arena
// SEPARATE-LABEL: func.func @output_reuses_dead_bytes
// SEPARATE-SAME: memopt.arena_size = 8192 : i64, memopt.max_live = 8192 : i64, memopt.output_offsets = array<i64: -1>
// SEPARATE-NOT: outputs_in_arena
// TEXT: memory report of @output_reuses_dead_bytes
// TEXT: max-live          8.00 KiB
// TEXT: c {{.*}}4.00 KiB
func.func @output_reuses_dead_bytes(%x: tensor<1024xf32>) -> tensor<1024xf32> {
  %a = memopt.exp %x : tensor<1024xf32> loc("a")
  %b = memopt.exp %a : tensor<1024xf32> loc("b")
  %c = memopt.exp %b : tensor<1024xf32> loc("c")
  return %c : tensor<1024xf32>
}

// -----

// Results without a storage of their own (an input, a second return of one
// storage) stay the caller's buffers: -1; the first return of %c has a slot.
// CHECK-LABEL: func.func @io_kinds
// CHECK-SAME: memopt.output_offsets = array<i64: -1, {{[0-9]+}}, -1>
func.func @io_kinds(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %c = memopt.exp %x : tensor<16xf32>
  return %x, %c, %c : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}
