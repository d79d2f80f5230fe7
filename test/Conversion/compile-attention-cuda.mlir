// RUN: memopt-compile %s --target cuda --emit plan -o %t.plan --report %t.json | FileCheck %s --check-prefix=LOG
// RUN: FileCheck %s --check-prefix=REPORT < %t.json
// RUN: memopt-compile %s --target cuda --emit source -o %t --quiet
// RUN: FileCheck %s --check-prefix=SOURCE < %t.cu
// RUN: memopt-compile %s --emit plan -o %t.host | FileCheck %s --check-prefix=HOST

// For the CUDA target, the f16 attention cuDNN's fused SDPA runs reserves
// its workspace in the arena (--memopt-attention-engine: 64 KiB for the
// forward), which the planner promises (the arena: the 64 KiB output and
// the workspace; the memory report lists it) and the program passes to the
// call; the host plans none (the output alone).
// LOG: [attention-engine] 1 of 1 attention calls on cuDNN's SDPA: its workspace planned in the arena (largest 65536 bytes)
// LOG: arena 128.00 KiB (1.000x max-live
// LOG: attn.workspace 64.00 KiB 65536
// REPORT: "attn.workspace"
// SOURCE: // Arena: 131072 bytes;
// SOURCE: attention(ctx, "attn", params, t0, t1, t2, nullptr, t3, arena + 65536, size_t(65536));
// HOST-NOT: [attention-engine]
// HOST-NOT: attn.workspace
// HOST: arena 64.00 KiB (1.000x max-live
func.func @main(%q: tensor<2x4x64x64xf16>, %k: tensor<2x4x64x64xf16>, %v: tensor<2x4x64x64xf16>) -> tensor<2x4x64x64xf16> {
  %y = memopt.attention %q, %k, %v {scale = 0.125 : f32, causal = true} : (tensor<2x4x64x64xf16>, tensor<2x4x64x64xf16>, tensor<2x4x64x64xf16>) -> tensor<2x4x64x64xf16> loc("attn")
  return %y : tensor<2x4x64x64xf16>
}
