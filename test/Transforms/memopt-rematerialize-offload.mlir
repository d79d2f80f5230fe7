// The budget's third choice (docs/offload.md, "Activations"): copy a saved
// value to pinned host memory and back where that is cheaper than
// recomputing it. The measured kernel times make the chain between `a`'s
// two reads long enough (b2: 20 us, b3: 10 us) for its copies (2 us + 16 KiB
// at the bandwidth) to hide at 40 GB/s, not at 1 MB/s.
// RUN: echo '{"b2": 2e-5, "b3": 1e-5}' > %t.times.json
// RUN: memopt-opt %s --memopt-rematerialize="budget=40000 offload=true kernel-times=%t.times.json" | FileCheck %s --check-prefix=FAST
// RUN: memopt-opt %s --mlir-disable-threading --memopt-rematerialize="budget=40000 offload=true report=true kernel-times=%t.times.json" -o /dev/null | FileCheck %s --check-prefix=FASTREPORT
// RUN: memopt-opt %s --memopt-rematerialize="budget=40000 offload=true offload-bandwidth=0.001 kernel-times=%t.times.json" | FileCheck %s --check-prefix=SLOW
// RUN: memopt-opt %s --mlir-disable-threading --memopt-rematerialize="budget=40000 offload=true offload-bandwidth=0.001 report=true kernel-times=%t.times.json" -o /dev/null | FileCheck %s --check-prefix=SLOWREPORT
// RUN: memopt-opt %s --memopt-rematerialize="budget=40000 offload=true offload-bandwidth=0.001 allow=matmul kernel-times=%t.times.json" | FileCheck %s --check-prefix=ONLYCOPY
// RUN: echo '{"b2": 2e-5, "b3": 1e-5, "<copy 1 GiB>": 1000.0}' > %t.slowcopy.json
// RUN: memopt-opt %s --memopt-rematerialize="budget=40000 offload=true kernel-times=%t.slowcopy.json" | FileCheck %s --check-prefix=SLOW
// RUN: not memopt-opt %s --memopt-rematerialize="budget=1000 offload=true kernel-times=%t.times.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TIGHT
// RUN: not memopt-opt %s --memopt-rematerialize="budget=40000 offload=true offload-bandwidth=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BANDWIDTH
// RUN: memopt-opt %s --memopt-rematerialize="budget=40000 offload=true kernel-times=%t.times.json" --memopt-schedule --memopt-bufferize --memopt-plan-memory | FileCheck %s --check-prefix=PLAN

// Live bytes per step: a 16 KiB with b1, b2 (4 KiB each), then b3 and b4
// (16 KiB each): the peak, 48 KiB, is at b4, between a's reads by b1 and f.
//
// Fast copies: `a` goes to the host after b1 (its last forward read), the
// compute stream waits for the copy before b3 (it finished under b2), the
// reload starts before b5 and is waited for right before f, which reads the
// reloaded copy. Nothing is recomputed.
// FAST-LABEL: func.func @chain
// FAST-SAME: memopt.offload = {bytes = 16384 : i64, bytes_per_second = 4.000000e+10 : f64, copy_seconds = {{.*}}, exposed_seconds = 0.000000e+00 : f64, offloaded = 1 : i64}
// FAST-SAME: memopt.remat = {budget = 40000 : i64, initial_peak = 36864 : i64, peak = 36864 : i64, recomputations = 0 : i64}
// FAST: %[[A:.*]] = memopt.exp %arg0
// FAST-NEXT: %[[B1:.*]] = memopt.matmul %[[A]]
// FAST-NEXT: memopt.offload %[[A]] {host_offset = 0 : i64, slot = 0 : i64}
// FAST-NEXT: %[[B2:.*]] = memopt.matmul %[[B1]]
// FAST-NEXT: memopt.offload_wait %[[A]] {slot = 0 : i64}
// FAST-NEXT: %[[B3:.*]] = memopt.matmul %[[B2]]
// FAST-NEXT: %[[B4:.*]] = memopt.matmul %[[B3]]
// FAST-NEXT: %[[R:.*]] = memopt.reload {host_offset = 0 : i64, slot = 0 : i64} : tensor<64x64xf32>
// FAST-NEXT: %[[B5:.*]] = memopt.matmul %[[B4]]
// FAST-NEXT: %[[E:.*]] = memopt.matmul %[[B5]]
// FAST-NEXT: %[[RW:.*]] = memopt.reload_wait %[[R]] {slot = 0 : i64}
// FAST-NEXT: %[[F:.*]] = memopt.matmul %[[RW]]
// FAST-NEXT: memopt.add %[[E]], %[[F]]
// FAST-NOT: memopt.recomputed
// FASTREPORT: memopt-rematerialize @chain: offloaded 1 values (16384 bytes, host pool 16384 bytes), copies 4.82 us, 4.82 us hidden, 0 refused (recomputing them is cheaper), model peak 49152 -> 36864 bytes
// FASTREPORT: memopt-rematerialize @chain: budget 40000, peak 36864 -> 36864 bytes, 0 recomputations
//
// Slow copies (1 MB/s; or a measured "<copy 1 GiB>" of 1000 s): each would
// stall the step by 16 ms, dearer than recomputing the exp (2 us), so the
// exp is recomputed next to f instead.
// SLOW-LABEL: func.func @chain
// SLOW-NOT: memopt.offload
// SLOW: %[[A:.*]] = memopt.exp %arg0
// SLOW: %[[A2:.*]] = memopt.exp %arg0 {memopt.recomputed}
// SLOW-NEXT: memopt.matmul %[[A2]]
// SLOW-NOT: memopt.reload
// SLOWREPORT: memopt-rematerialize @chain: offloaded 0 values (0 bytes, host pool 0 bytes), copies 0.00 us, 0.00 us hidden, 1 refused (recomputing them is cheaper), model peak 49152 -> 49152 bytes
// SLOWREPORT: memopt-rematerialize @chain: budget 40000, peak 49152 -> 32768 bytes, 1 recomputations
//
// The same slow copies when only matmuls may be recomputed (and recomputing
// them does not help): the copy is the only way, stall and all.
// ONLYCOPY-LABEL: func.func @chain
// ONLYCOPY-SAME: memopt.offload = {bytes = 16384 : i64
// ONLYCOPY-NOT: memopt.recomputed
// ONLYCOPY: memopt.offload %
// ONLYCOPY: memopt.reload_wait
//
// TIGHT: error: memopt-rematerialize: @chain does not fit in 1000 bytes: infeasible: the budget of 1000 bytes is below the
// BANDWIDTH: error: memopt-rematerialize: the offload bandwidth must be positive
//
// The planner sees `a`'s live range end at the offload_wait and the reload's
// start at the reload: the arena is the 36 KiB peak that is left (b3, b4 and
// b2 or b5 with their inputs), and the host pool holds `a`.
// PLAN-LABEL: func.func @chain
// PLAN-SAME: memopt.arena_size = 36864 : i64
// PLAN-SAME: memopt.host_pool_size = 16384 : i64
func.func @chain(%x: tensor<64x64xf32>) -> tensor<64x4xf32> {
  %k1 = memopt.constant dense<0.5> : tensor<64x16xf32>
  %k16 = memopt.constant dense<0.25> : tensor<16x16xf32>
  %k2 = memopt.constant dense<0.125> : tensor<16x64xf32>
  %k = memopt.constant dense<0.0625> : tensor<64x64xf32>
  %w16 = memopt.constant dense<0.5> : tensor<16x4xf32>
  %w = memopt.constant dense<0.5> : tensor<64x4xf32>
  %a = memopt.exp %x : tensor<64x64xf32> loc("a")
  %b1 = memopt.matmul %a, %k1 : (tensor<64x64xf32>, tensor<64x16xf32>) -> tensor<64x16xf32> loc("b1")
  %b2 = memopt.matmul %b1, %k16 : (tensor<64x16xf32>, tensor<16x16xf32>) -> tensor<64x16xf32> loc("b2")
  %b3 = memopt.matmul %b2, %k2 : (tensor<64x16xf32>, tensor<16x64xf32>) -> tensor<64x64xf32> loc("b3")
  %b4 = memopt.matmul %b3, %k : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("b4")
  %b5 = memopt.matmul %b4, %k1 : (tensor<64x64xf32>, tensor<64x16xf32>) -> tensor<64x16xf32> loc("b5")
  %e = memopt.matmul %b5, %w16 : (tensor<64x16xf32>, tensor<16x4xf32>) -> tensor<64x4xf32> loc("e")
  %f = memopt.matmul %a, %w : (tensor<64x64xf32>, tensor<64x4xf32>) -> tensor<64x4xf32> loc("f")
  %g = memopt.add %e, %f : (tensor<64x4xf32>, tensor<64x4xf32>) -> tensor<64x4xf32> loc("g")
  return %g : tensor<64x4xf32>
}
