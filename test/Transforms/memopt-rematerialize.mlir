// RUN: memopt-opt %s -split-input-file --memopt-rematerialize=budget=40000 | FileCheck %s
// RUN: memopt-opt %s -split-input-file --mlir-disable-threading --memopt-rematerialize="budget=40000 report=true" -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: not memopt-opt %s -split-input-file --memopt-rematerialize="budget=40000 allow=relu" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ALLOW
// RUN: not memopt-opt %s -split-input-file --memopt-rematerialize=budget=1000 -o /dev/null 2>&1 | FileCheck %s --check-prefix=TIGHT
// RUN: not memopt-opt %s --memopt-rematerialize="budget=40000 allow=frobnicate" -o /dev/null 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: echo '{"first": 0.001}' > %t.first.json
// RUN: echo '{"second": 0.001}' > %t.second.json
// RUN: memopt-opt %s -split-input-file --memopt-rematerialize="budget=40000 kernel-times=%t.first.json" | FileCheck %s --check-prefix=FIRST
// RUN: memopt-opt %s -split-input-file --memopt-rematerialize="budget=40000 kernel-times=%t.second.json" | FileCheck %s --check-prefix=SECOND
// RUN: memopt-opt %s -split-input-file --mlir-disable-threading --memopt-rematerialize="budget=40000 kernel-times=%t.first.json" --memopt-bufferize --memopt-plan-memory="print=true" | FileCheck %s --check-prefix=PRICED
// RUN: echo '{"first": "slow"}' > %t.bad.json
// RUN: not memopt-opt %s --memopt-rematerialize="budget=40000 kernel-times=%t.bad.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADTIMES
// RUN: memopt-opt %s -split-input-file --memopt-rematerialize="memory-budget=40000" | FileCheck %s --check-prefix=ARENA
// RUN: memopt-opt %s -split-input-file --mlir-disable-threading --memopt-rematerialize="memory-budget=40000 report=true" -o /dev/null | FileCheck %s --check-prefix=ARENAREPORT
// RUN: not memopt-opt %s -split-input-file --memopt-rematerialize="memory-budget=20000" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ARENAERR
// RUN: not memopt-opt %s --memopt-rematerialize -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOBUDGET

// `a` (16 KiB) is read right away and again at the end; in between two more
// 16 KiB tensors are alive (matmuls: no in-place reuse). Recomputing `a` next to its late user brings the
// peak from 48 KiB to 32 KiB: the clone sits right before that user, which
// reads it, and the early user keeps the original.
// CHECK-LABEL: func.func @late_use({{.*}} attributes {memopt.remat = {budget = 40000 : i64, initial_peak = 49152 : i64, peak = 32768 : i64, recomputations = 1 : i64}}
// CHECK: %[[A:.*]] = memopt.exp %arg0 : tensor<64x64xf32>
// CHECK-NEXT: %[[B:.*]] = memopt.matmul %[[A]]
// CHECK-NEXT: %[[C:.*]] = memopt.matmul %[[B]]
// CHECK-NEXT: %[[E:.*]] = memopt.matmul %[[C]]
// CHECK-NEXT: %[[A2:.*]] = memopt.exp %arg0 {memopt.recomputed} : tensor<64x64xf32>
// CHECK-NEXT: %[[F:.*]] = memopt.matmul %[[A2]]
// CHECK-NEXT: memopt.add %[[E]], %[[F]]
// REPORT: memopt-rematerialize @late_use: budget 40000, peak 49152 -> 32768 bytes, 1 recomputations, +4096 FLOPs
// ALLOW: error: memopt-rematerialize: @late_use does not fit in 40000 bytes: infeasible: no schedule with at most 2 computations per node fits in 40000 bytes (proved by the exact method over staged schedules); smallest peak found 49152 bytes
// TIGHT: error: memopt-rematerialize: @late_use does not fit in 1000 bytes: infeasible: the budget of 1000 bytes is below the 32768 bytes that node 1 ('b') needs for its inputs and output; smallest peak found 32768 bytes
// KIND: error: memopt-rematerialize: 'frobnicate' in the rematerialization allow list is not a memopt op kind
// NOBUDGET: error: memopt-rematerialize: give one of budget=BYTES (the solver's model) and memory-budget=BYTES (the planned arena)
func.func @late_use(%x: tensor<64x64xf32>) -> tensor<64x4xf32> {
  %w = memopt.constant dense<0.5> : tensor<64x4xf32>
  %k = memopt.constant dense<0.125> : tensor<64x64xf32>
  %a = memopt.exp %x : tensor<64x64xf32> loc("a")
  %b = memopt.matmul %a, %k : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("b")
  %c = memopt.matmul %b, %k : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("c")
  %e = memopt.matmul %c, %w : (tensor<64x64xf32>, tensor<64x4xf32>) -> tensor<64x4xf32>
  %f = memopt.matmul %a, %w : (tensor<64x64xf32>, tensor<64x4xf32>) -> tensor<64x4xf32>
  %g = memopt.add %e, %f : (tensor<64x4xf32>, tensor<64x4xf32>) -> tensor<64x4xf32>
  return %g : tensor<64x4xf32>
}

// -----

// The late user reads `a` through a reshape: the clone gets its own reshape,
// placed with it; the original reshape, read by nothing any more, stays
// next to `a`.
// CHECK-LABEL: func.func @through_view
// CHECK: %[[A:.*]] = memopt.exp %arg0 : tensor<64x64xf32>
// CHECK-NEXT: memopt.reshape %[[A]]
// CHECK-NEXT: %[[B:.*]] = memopt.matmul %[[A]]
// CHECK: %[[A2:.*]] = memopt.exp %arg0 {memopt.recomputed} : tensor<64x64xf32>
// CHECK-NEXT: %[[V2:.*]] = memopt.reshape %[[A2]] : (tensor<64x64xf32>) -> tensor<16x256xf32>
// CHECK-NEXT: memopt.matmul %[[V2]]
// CHECK-NEXT: return
// REPORT: memopt-rematerialize @through_view: budget 40000, peak 49152 -> 32768 bytes, 1 recomputations
func.func @through_view(%x: tensor<64x64xf32>) -> (tensor<64x4xf32>, tensor<16x4xf32>) {
  %w = memopt.constant dense<0.5> : tensor<64x4xf32>
  %w2 = memopt.constant dense<0.25> : tensor<256x4xf32>
  %k = memopt.constant dense<0.125> : tensor<64x64xf32>
  %a = memopt.exp %x : tensor<64x64xf32>
  %v = memopt.reshape %a : (tensor<64x64xf32>) -> tensor<16x256xf32>
  %b = memopt.matmul %a, %k : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %c = memopt.matmul %b, %k : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %e = memopt.matmul %c, %w : (tensor<64x64xf32>, tensor<64x4xf32>) -> tensor<64x4xf32>
  %f = memopt.matmul %v, %w2 : (tensor<16x256xf32>, tensor<256x4xf32>) -> tensor<16x4xf32>
  return %e, %f : tensor<64x4xf32>, tensor<16x4xf32>
}

// -----

// `W` is a parameter that its SGD update overwrites early. Recomputing the
// cheap `reads_w` (a relu of W) next to its late user would read the updated
// W, so that recomputation is refused and the dearer matmul is recomputed
// instead. The update itself (a side effect) is never cloned.
// CHECK-LABEL: func.func @state_read_after_update
// CHECK: memopt.relu
// CHECK-NOT: memopt.relu
// CHECK: memopt.sgd_update
// CHECK-NOT: memopt.sgd_update
// CHECK: %[[D2:.*]] = memopt.matmul %arg0, %{{.*}} {memopt.recomputed}
// CHECK-NEXT: memopt.matmul %[[D2]]
// REPORT: memopt-rematerialize @state_read_after_update: budget 40000, peak 49152 -> 36864 bytes, 1 recomputations, {{.*}}; 1 recomputations refused (they would read state after its update: 'reads_w')
func.func @state_read_after_update(%x: tensor<48x64xf32>, %g: tensor<48x64xf32>) -> tensor<48x4xf32> {
  %W = memopt.variable "W" {initial_value = dense<0.5> : tensor<48x64xf32>, role = "parameter"} : tensor<48x64xf32>
  %m = memopt.variable "W.momentum_buffer" {role = "optimizer_state"} : tensor<48x64xf32>
  %lr = memopt.variable "lr" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %k = memopt.constant dense<0.125> : tensor<64x64xf32>
  %w = memopt.constant dense<0.5> : tensor<64x4xf32>
  %a = memopt.relu %W : tensor<48x64xf32> loc("reads_w")
  %d = memopt.matmul %x, %k : (tensor<48x64xf32>, tensor<64x64xf32>) -> tensor<48x64xf32> loc("dear")
  memopt.sgd_update %W, %g, momentum %m, lr %lr {momentum = 0.9 : f32} : tensor<48x64xf32>, tensor<48x64xf32>, tensor<48x64xf32>, tensor<f32>
  %b = memopt.exp %x : tensor<48x64xf32>
  %c = memopt.matmul %b, %k : (tensor<48x64xf32>, tensor<64x64xf32>) -> tensor<48x64xf32>
  %e = memopt.matmul %c, %w : (tensor<48x64xf32>, tensor<64x4xf32>) -> tensor<48x4xf32>
  %f1 = memopt.matmul %a, %w : (tensor<48x64xf32>, tensor<64x4xf32>) -> tensor<48x4xf32>
  %f2 = memopt.matmul %d, %w : (tensor<48x64xf32>, tensor<64x4xf32>) -> tensor<48x4xf32>
  %h = memopt.add %e, %f1 : (tensor<48x4xf32>, tensor<48x4xf32>) -> tensor<48x4xf32>
  %h2 = memopt.add %h, %f2 : (tensor<48x4xf32>, tensor<48x4xf32>) -> tensor<48x4xf32>
  return %h2 : tensor<48x4xf32>
}

// -----

// Within the budget already: nothing is cloned or moved.
// CHECK-LABEL: func.func @fits({{.*}} attributes {memopt.remat = {budget = 40000 : i64, initial_peak = 128 : i64, peak = 128 : i64, recomputations = 0 : i64}}
// CHECK: memopt.exp
// CHECK-NEXT: memopt.relu
// CHECK-NOT: memopt.recomputed
func.func @fits(%x: tensor<16xf32>) -> tensor<16xf32> {
  %a = memopt.exp %x : tensor<16xf32>
  %b = memopt.relu %a : tensor<16xf32>
  return %b : tensor<16xf32>
}

// -----

// Two values of equal size and equal roofline cost are read late; one must
// go. Measured kernel times (by ONNX node name) decide which: the one that
// is cheap to run again is recomputed.
// CHECK-LABEL: func.func @measured
// FIRST-LABEL: func.func @measured
// FIRST: memopt.sigmoid %arg0 {memopt.recomputed}
// FIRST-NOT: memopt.recomputed
// FIRST: return
// SECOND-LABEL: func.func @measured
// SECOND: memopt.exp %arg0 {memopt.recomputed}
// SECOND-NOT: memopt.recomputed
// SECOND: return
// The report prices the step with the time that made the solver keep
// `first` (1 ms, not its 2 us on the roofline), and the summary on the
// function carries that time.
// PRICED: rematerialization: 1 ops recomputed, +{{.*}} GFLOP, +2.0 us (0.20% of the 1.02 ms step on measured kernel times (1 ops), the roofline elsewhere (H100
// PRICED: func.func @measured({{.*}}memopt.remat = {budget = 40000 : i64, {{.*}}}, memopt.remat_kernel_seconds = {first = 1.000000e-03 : f64}
// BADTIMES: error: memopt-rematerialize: kernel times '{{.*}}.bad.json': the time of 'first' must be a number of seconds >= 0
func.func @measured(%x: tensor<48x64xf32>) -> tensor<48x4xf32> {
  %w = memopt.constant dense<0.5> : tensor<64x4xf32>
  %p = memopt.exp %x : tensor<48x64xf32> loc("first")
  %q = memopt.sigmoid %x : tensor<48x64xf32> loc("second")
  %k = memopt.constant dense<0.125> : tensor<64x64xf32>
  %b = memopt.tanh %x : tensor<48x64xf32>
  %c = memopt.matmul %b, %k : (tensor<48x64xf32>, tensor<64x64xf32>) -> tensor<48x64xf32>
  %e = memopt.matmul %c, %w : (tensor<48x64xf32>, tensor<64x4xf32>) -> tensor<48x4xf32>
  %f1 = memopt.matmul %p, %w : (tensor<48x64xf32>, tensor<64x4xf32>) -> tensor<48x4xf32>
  %f2 = memopt.matmul %q, %w : (tensor<48x64xf32>, tensor<64x4xf32>) -> tensor<48x4xf32>
  %h = memopt.add %e, %f1 : (tensor<48x4xf32>, tensor<48x4xf32>) -> tensor<48x4xf32>
  %h2 = memopt.add %h, %f2 : (tensor<48x4xf32>, tensor<48x4xf32>) -> tensor<48x4xf32>
  return %h2 : tensor<48x4xf32>
}

// -----

// In-place reuse counts as bufferization will decide it: relu and sigmoid
// write over the buffer they read last, so the chain peaks at one 16 KiB
// buffer plus the small result, and fits without recomputation.
// CHECK-LABEL: func.func @in_place_chain({{.*}} attributes {memopt.remat = {budget = 40000 : i64, initial_peak = 17408 : i64, peak = 17408 : i64, recomputations = 0 : i64}}
func.func @in_place_chain(%x: tensor<64x64xf32>) -> tensor<64x4xf32> {
  %w = memopt.constant dense<0.5> : tensor<64x4xf32>
  %a = memopt.exp %x : tensor<64x64xf32>
  %b = memopt.relu %a : tensor<64x64xf32>
  %c = memopt.sigmoid %b : tensor<64x64xf32>
  %d = memopt.matmul %c, %w : (tensor<64x64xf32>, tensor<64x4xf32>) -> tensor<64x4xf32>
  return %d : tensor<64x4xf32>
}

// -----

// memory-budget: only the planned arena counts. The chain cannot be
// reordered, and without recomputation the arena holds a, b and c (48 KiB);
// recomputing `a` right before the add (which then writes over c) fits
// 40000 bytes. Below 32 KiB (b and its input) nothing fits: one error gives
// the smallest arena reached and the buffers alive at its peak.
// ARENA-LABEL: func.func @arena_fit({{.*}} attributes {memopt.remat = {{{.*}}memory_budget = 40000 : i64, peak = 32768 : i64, planned_arena = 32768 : i64, recomputations = 1 : i64, solver_runs = {{[0-9]+}} : i64, unconstrained_arena = 49152 : i64}}
// ARENA: memopt.matmul
// ARENA: memopt.matmul
// ARENA-NEXT: %[[A2:.*]] = memopt.exp %arg0 {memopt.recomputed}
// ARENA-NEXT: memopt.add %{{.*}}, %[[A2]]
// ARENAREPORT: memopt-rematerialize: unconstrained arena 49152 bytes
// ARENAREPORT-NEXT: memopt-rematerialize: solver budget 40000: 1 recomputations ({{.*}}), arena 32768 bytes (fits)
// ARENAERR: error: the arena does not fit in the memory budget of 19.53 KiB (20000 bytes): without recomputation it is 48.00 KiB; the smallest arena reached (1 ops recomputed) is 32.00 KiB (32768 bytes); at its peak, op 1 ('b'), it holds 'a' (exp) 16.00 KiB, 'b' (matmul) 16.00 KiB; below that, the solver's model of the arena says infeasible: the budget of 20000 bytes is below the 32768 bytes that node 1 ('b') needs for its inputs and output
func.func @arena_fit(%x: tensor<64x64xf32>) -> tensor<64x4xf32> {
  %w = memopt.constant dense<0.5> : tensor<64x4xf32>
  %k = memopt.constant dense<0.125> : tensor<64x64xf32>
  %a = memopt.exp %x : tensor<64x64xf32> loc("a")
  %b = memopt.matmul %a, %k : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("b")
  %c = memopt.matmul %b, %k : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("c")
  %d = memopt.add %c, %a : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("d")
  %e = memopt.matmul %d, %w : (tensor<64x64xf32>, tensor<64x4xf32>) -> tensor<64x4xf32> loc("e")
  return %e : tensor<64x4xf32>
}
