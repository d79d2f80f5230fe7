// RUN: memopt-opt %s -split-input-file --memopt-plan-memory | FileCheck %s
// RUN: memopt-opt %s -split-input-file --memopt-plan-memory="algorithm=best-fit-size alignment=64 print=true" -o /dev/null | FileCheck %s --check-prefix=TEXT
// RUN: not memopt-opt %s -split-input-file --memopt-plan-memory="capacity=16384" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BUDGET

// Two branches already scheduled one after the other: the two 16 KiB
// expansions never live together and share offset 0; the 1 KiB results sit
// above them. The arena equals max-live.
// BUDGET: error: memory planning failed: capacity of 16384 bytes is below max-live (18432 bytes)
// CHECK-LABEL: func.func @two_branches
// CHECK-SAME: memopt.arena_size = 18432 : i64
// CHECK-SAME: memopt.max_live = 18432 : i64
// CHECK-SAME: memopt.weights_size = 1024 : i64
// CHECK: memopt.constant {memopt.weight_offset = 0 : i64}
// CHECK: memopt.exp %arg0 {memopt.offsets = array<i64: 0>}
// CHECK: memopt.matmul {{.*}} {memopt.offsets = array<i64: 16384>}
// CHECK: memopt.exp %arg0 {memopt.offsets = array<i64: 0>}
// CHECK: memopt.matmul {{.*}} {memopt.offsets = array<i64: 17408>}
// The result is the caller's output buffer, not in the arena.
// CHECK: memopt.add {{.*}} {memopt.offsets = array<i64: -1>}
// TEXT: memory report of @two_branches (5 ops)
// TEXT: arena {{.*}}18.00 KiB  (1.000x max-live, plan: best-fit-size
// TEXT: naive {{.*}}34.00 KiB
// TEXT: fragmentation at peak 0.00%
func.func @two_branches(%x: tensor<64x64xf32>) -> tensor<64x4xf32> {
  %w = memopt.constant dense<0.5> : tensor<64x4xf32>
  %a1 = memopt.exp %x : tensor<64x64xf32>
  %a2 = memopt.matmul %a1, %w : (tensor<64x64xf32>, tensor<64x4xf32>) -> tensor<64x4xf32>
  %b1 = memopt.exp %x : tensor<64x64xf32>
  %b2 = memopt.matmul %b1, %w : (tensor<64x64xf32>, tensor<64x4xf32>) -> tensor<64x4xf32>
  %s = memopt.add %a2, %b2 : (tensor<64x4xf32>, tensor<64x4xf32>) -> tensor<64x4xf32>
  return %s : tensor<64x4xf32>
}

// -----

// In-place results and views share their operand's offset; the weight region
// is aligned per constant.
// CHECK-LABEL: func.func @shared_storage
// CHECK-SAME: memopt.arena_size = 640 : i64
// CHECK-SAME: memopt.weights_size = 1040 : i64
// CHECK: memopt.constant {memopt.weight_offset = 0 : i64}
// CHECK: memopt.constant {memopt.weight_offset = 1024 : i64}
// CHECK: memopt.exp %arg0 {memopt.offsets = array<i64: 0>}
// CHECK: memopt.reshape {{.*}} {memopt.offsets = array<i64: 0>}
// CHECK: memopt.relu {{.*}} {memopt.in_place = 0 : i64, memopt.offsets = array<i64: 0>}
// CHECK: memopt.matmul {{.*}} {memopt.offsets = array<i64: 512>}
// TEXT: memory report of @shared_storage
// TEXT: in-place saved {{.*}}512 B, views saved 512 B
func.func @shared_storage(%x: tensor<128xf32>) -> tensor<4x8xf32> {
  %w = memopt.constant dense<0.5> : tensor<32x8xf32>
  %v = memopt.constant dense<1.0> : tensor<4xf32>
  %a = memopt.exp %x : tensor<128xf32>
  %r = memopt.reshape %a : (tensor<128xf32>) -> tensor<4x32xf32>
  %b = memopt.relu %r {memopt.in_place = 0 : i64} : tensor<4x32xf32>
  %m = memopt.matmul %b, %w : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
  %e = memopt.exp %m : tensor<4x8xf32>
  return %e : tensor<4x8xf32>
}

// -----

// A convolution's workspace is arena space live during that op only: here
// max(input 4096, output 8192) bytes at op 1, packed beside the two
// activations alive then.
// CHECK-LABEL: func.func @conv_workspace
// CHECK-SAME: memopt.arena_size = 20480 : i64
// CHECK: memopt.exp %arg0 {memopt.offsets = array<i64: 16384>}
// CHECK: memopt.conv {{.*}}memopt.offsets = array<i64: 0>, memopt.workspace_offset = 8192 : i64, memopt.workspace_size = 8192 : i64
// TEXT: memory report of @conv_workspace
// TEXT: conv.workspace
func.func @conv_workspace(%x: tensor<1x4x16x16xf32>) -> tensor<1x8x16x16xf32> {
  %k = memopt.constant dense<0.5> : tensor<8x4x3x3xf32>
  %a = memopt.exp %x : tensor<1x4x16x16xf32>
  %c = memopt.conv %a, %k {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x4x16x16xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x16x16xf32>
  %e = memopt.exp %c : tensor<1x8x16x16xf32>
  return %e : tensor<1x8x16x16xf32>
}

// -----

// Workspaces are elastic: planned at a 1 MiB floor (never raising the arena
// beyond tensors + floor), then grown into bytes free during their op. Here
// nothing is free at the conv: 4 MiB input + the 1 MiB floor; the conv wants
// max(input 4 MiB, output 8 MiB) = 8 MiB but gets 1 MiB.
// CHECK-LABEL: func.func @workspace_floor
// CHECK-SAME: memopt.arena_size = 5242880 : i64
// CHECK: memopt.conv {{.*}}memopt.workspace_size = 1048576 : i64
func.func @workspace_floor(%x: tensor<1x4x512x512xf32>) -> tensor<1x8x512x512xf32> {
  %k = memopt.constant dense<0.5> : tensor<8x4x1x1xf32>
  %a = memopt.exp %x : tensor<1x4x512x512xf32>
  %c = memopt.conv %a, %k {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x4x512x512xf32>, tensor<8x4x1x1xf32>) -> tensor<1x8x512x512xf32>
  return %c : tensor<1x8x512x512xf32>
}

// -----

// The same conv after a 16 MiB tensor made the arena 17 MiB: at the conv only
// its 4 MiB input is live (the output is the function's), and the conv wants
// twice its traffic (2 x (4 + 8 MiB + the filter): room for cuDNN to
// transpose channels-first tensors), so the workspace grows into all 13 MiB
// free and the arena stays 17 MiB (16 MiB + the 1 MiB reduction alive with it).
// CHECK-LABEL: func.func @workspace_grows
// CHECK-SAME: memopt.arena_size = 17825792 : i64
// CHECK: memopt.conv {{.*}}memopt.workspace_offset = 4194304 : i64, memopt.workspace_size = 13631488 : i64
func.func @workspace_grows(%x: tensor<1x4x512x512xf32>, %y: tensor<1x16x512x512xf32>) -> tensor<1x8x512x512xf32> {
  %k = memopt.constant dense<0.5> : tensor<8x4x1x1xf32>
  %b = memopt.exp %y : tensor<1x16x512x512xf32>
  %r = memopt.reduce_sum %b {axes = array<i64: 1>} : (tensor<1x16x512x512xf32>) -> tensor<1x1x512x512xf32>
  %a = memopt.add %x, %r : (tensor<1x4x512x512xf32>, tensor<1x1x512x512xf32>) -> tensor<1x4x512x512xf32>
  %c = memopt.conv %a, %k {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x4x512x512xf32>, tensor<8x4x1x1xf32>) -> tensor<1x8x512x512xf32>
  return %c : tensor<1x8x512x512xf32>
}

// -----

// An attention's workspace (room for all its f32 scores, 2 x 64 x 64 x 4 =
// 32 KiB) is optional: the fused kernel needs none, so the floor is 0 and,
// with the result outside the arena, the arena stays empty; nothing is free
// at the attention, so the workspace stays empty too.
// CHECK-LABEL: func.func @attention_workspace_optional
// CHECK-SAME: memopt.arena_size = 0 : i64
// CHECK: memopt.attention {{.*}}memopt.workspace_offset = 0 : i64, memopt.workspace_size = 0 : i64
func.func @attention_workspace_optional(%q: tensor<2x64x16xf32>, %k: tensor<2x64x16xf32>, %v: tensor<2x64x16xf32>) -> tensor<2x64x16xf32> {
  %y = memopt.attention %q, %k, %v {scale = 0.25 : f32} : (tensor<2x64x16xf32>, tensor<2x64x16xf32>, tensor<2x64x16xf32>) -> tensor<2x64x16xf32>
  return %y : tensor<2x64x16xf32>
}

// -----

// With `memopt.cudnn_workspace` (--memopt-attention-engine on target cuda)
// the bytes cuDNN's SDPA needs are promised, not optional: the arena holds
// them at the attention even though nothing else is live there.
// CHECK-LABEL: func.func @attention_cudnn_workspace_promised
// CHECK-SAME: memopt.arena_size = 65536 : i64
// CHECK: memopt.attention {{.*}}memopt.workspace_offset = 0 : i64, memopt.workspace_size = 65536 : i64
func.func @attention_cudnn_workspace_promised(%q: tensor<2x64x16xf16>, %k: tensor<2x64x16xf16>, %v: tensor<2x64x16xf16>) -> tensor<2x64x16xf16> {
  %y = memopt.attention %q, %k, %v {scale = 0.25 : f32, memopt.cudnn_workspace = 65536 : i64} : (tensor<2x64x16xf16>, tensor<2x64x16xf16>, tensor<2x64x16xf16>) -> tensor<2x64x16xf16>
  return %y : tensor<2x64x16xf16>
}

// -----

// The backward's promised bytes (cuDNN's f32 dQ accumulator and more) are
// live at the gradient only: its 16 KiB dQ, dK, dV results (in the arena,
// returned) follow, and the arena is the larger of the two moments.
// CHECK-LABEL: func.func @attention_grad_cudnn_workspace_promised
// CHECK: memopt.attention_grad {{.*}}memopt.workspace_size = 100000 : i64
func.func @attention_grad_cudnn_workspace_promised(%q: tensor<2x64x16xf16>, %k: tensor<2x64x16xf16>, %v: tensor<2x64x16xf16>, %o: tensor<2x64x16xf16>, %do: tensor<2x64x16xf16>, %lse: tensor<2x64x2xf32>) -> tensor<2x64x16xf16> {
  %dq, %dk, %dv = memopt.attention_grad %q, %k, %v, %o, %do, %lse {scale = 0.25 : f32, memopt.cudnn_workspace = 100000 : i64} : (tensor<2x64x16xf16>, tensor<2x64x16xf16>, tensor<2x64x16xf16>, tensor<2x64x16xf16>, tensor<2x64x16xf16>, tensor<2x64x2xf32>) -> (tensor<2x64x16xf16>, tensor<2x64x16xf16>, tensor<2x64x16xf16>)
  %s = memopt.add %dq, %dk : (tensor<2x64x16xf16>, tensor<2x64x16xf16>) -> tensor<2x64x16xf16>
  %t = memopt.add %s, %dv : (tensor<2x64x16xf16>, tensor<2x64x16xf16>) -> tensor<2x64x16xf16>
  return %t : tensor<2x64x16xf16>
}

// -----

// After a 64 KiB tensor set the arena (64 KiB + the 4-byte sum), the
// attention's workspace grows into the bytes free while it runs, up to all
// 32 KiB of scores (the chunked library path then runs in one chunk), after
// the live 8 KiB Q; the arena stays max-live.
// CHECK-LABEL: func.func @attention_workspace_grows
// CHECK-SAME: memopt.arena_size = 65540 : i64, memopt.max_live = 65540 : i64
// CHECK: memopt.attention {{.*}}memopt.workspace_offset = 8192 : i64, memopt.workspace_size = 32768 : i64
func.func @attention_workspace_grows(%big: tensor<16384xf32>, %q: tensor<2x64x16xf32>, %k: tensor<2x64x16xf32>, %v: tensor<2x64x16xf32>) -> tensor<2x64x16xf32> {
  %e = memopt.exp %big : tensor<16384xf32>
  %s = memopt.reduce_sum %e {axes = array<i64: 0>} : (tensor<16384xf32>) -> tensor<1xf32>
  %q2 = memopt.add %q, %s : (tensor<2x64x16xf32>, tensor<1xf32>) -> tensor<2x64x16xf32>
  %y = memopt.attention %q2, %k, %v {scale = 0.25 : f32} : (tensor<2x64x16xf32>, tensor<2x64x16xf32>, tensor<2x64x16xf32>) -> tensor<2x64x16xf32>
  return %y : tensor<2x64x16xf32>
}

// -----

// An f16 attention backward's optional workspace holds, besides the two f32
// score buffers (S, dP: 2 x 2 x 64 x 64 x 4 = 64 KiB), P and dS in f16 for
// the gradient GEMMs (2 x 2 x 64 x 64 x 2 = 32 KiB): 96 KiB grow into the
// 256 KiB that the dead exponentials leave free; the arena stays max-live.
// CHECK-LABEL: func.func @attention_grad_f16_workspace
// CHECK-SAME: memopt.arena_size = 262148 : i64, memopt.max_live = 262148 : i64
// CHECK: memopt.attention_grad {{.*}}memopt.workspace_size = 98304 : i64
func.func @attention_grad_f16_workspace(%big: tensor<65536xf32>, %q: tensor<2x64x16xf16>, %y: tensor<2x64x16xf16>, %lse: tensor<2x64x2xf32>) -> (tensor<2x64x16xf16>, tensor<2x64x16xf16>, tensor<2x64x16xf16>) {
  %e = memopt.exp %big : tensor<65536xf32>
  %s = memopt.reduce_sum %e {axes = array<i64: 0>} : (tensor<65536xf32>) -> tensor<1xf32>
  %l = memopt.add %lse, %s : (tensor<2x64x2xf32>, tensor<1xf32>) -> tensor<2x64x2xf32>
  %dq, %dk, %dv = memopt.attention_grad %q, %q, %q, %y, %y, %l {scale = 0.25 : f32} : (tensor<2x64x16xf16>, tensor<2x64x16xf16>, tensor<2x64x16xf16>, tensor<2x64x16xf16>, tensor<2x64x16xf16>, tensor<2x64x2xf32>) -> (tensor<2x64x16xf16>, tensor<2x64x16xf16>, tensor<2x64x16xf16>)
  return %dq, %dk, %dv : tensor<2x64x16xf16>, tensor<2x64x16xf16>, tensor<2x64x16xf16>
}

// -----

// The fused head + loss promises its own floor (getWorkspaceFloor): the row
// statistics (4 rows x 3 f32, 256 bytes rounded) and the logits of a chunk
// of 2048 classes (4 x 2048 x 4 = 32 KiB), not the planner's 1 MiB rule and
// not all 4099 classes; with nothing else live that floor is the arena.
// CHECK-LABEL: func.func @head_floor
// CHECK-SAME: memopt.arena_size = 33024 : i64
// CHECK: memopt.linear_cross_entropy {{.*}}memopt.workspace_offset = 0 : i64, memopt.workspace_size = 33024 : i64
func.func @head_floor(%x: tensor<4x8xf32>, %w: tensor<4099x8xf32>, %labels: tensor<4xi64>) -> (tensor<f32>, tensor<4xf32>) {
  %loss, %lse = memopt.linear_cross_entropy %x, %w, %labels : (tensor<4x8xf32>, tensor<4099x8xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4xf32>)
  return %loss, %lse : tensor<f32>, tensor<4xf32>
}
