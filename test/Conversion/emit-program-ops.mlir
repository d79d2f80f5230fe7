// RUN: split-file %s %t
// RUN: memopt-compile %t/conv.mlir --lower-only --emit source -o %t/conv --quiet
// RUN: FileCheck %s --check-prefix=CONV < %t/conv.cpp
// RUN: memopt-compile %t/shapes.mlir --lower-only --emit source -o %t/shapes --quiet
// RUN: FileCheck %s --check-prefix=SHAPES < %t/shapes.cpp

// A conv with a planned workspace gets that arena pointer and size; one
// without gets nullptr / 0. Pads are split into begins and ends. A fused
// activation (--memopt-fuse-epilogues) becomes ConvParams::activation.
// CONV: TensorRef [[Y1:t[0-9]+]] = ref(arena + 0, DType::F32, {1, 4, 8, 8});
// CONV: params.padsBegin[0] = 1;
// CONV-NEXT: params.padsEnd[0] = 2;
// CONV-NEXT: params.strides[0] = 1;
// CONV-NEXT: params.dilations[0] = 1;
// CONV: params.padsBegin[1] = 0;
// CONV-NEXT: params.padsEnd[1] = 2;
// CONV: params.group = 1;
// CONV-NEXT: conv(ctx, "conv_ws", params, {{t[0-9]+}}, {{t[0-9]+}}, &{{t[0-9]+}}, [[Y1]], arena + 1024, size_t(4096));
// CONV: params.group = 1;
// CONV-NEXT: params.activation = Activation::Gelu;
// CONV-NEXT: conv(ctx, "conv_no_ws", params, [[Y1]], {{t[0-9]+}}, nullptr, {{t[0-9]+}}, nullptr, size_t(0));

//--- conv.mlir
func.func @main(%x: tensor<1x3x7x8xf32>) -> tensor<1x4x8x8xf32>
    attributes {memopt.arena_size = 8192 : i64, memopt.weights_size = 1024 : i64} {
  %w = memopt.constant {memopt.weight_offset = 0 : i64} dense<0.1> : tensor<4x3x3x3xf32> loc("w")
  %b = memopt.constant {memopt.weight_offset = 512 : i64} dense<0.2> : tensor<4xf32> loc("b")
  %w2 = memopt.constant {memopt.weight_offset = 768 : i64} dense<0.3> : tensor<4x4x1x1xf32> loc("w2")
  %y = memopt.conv %x, %w, %b {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 0, 2, 2>, dilations = array<i64: 1, 1>, memopt.offsets = array<i64: 0>, memopt.workspace_offset = 1024 : i64, memopt.workspace_size = 4096 : i64} : (tensor<1x3x7x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32> loc("conv_ws")
  %z = memopt.conv %y, %w2 {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, activation = "gelu", memopt.offsets = array<i64: -1>} : (tensor<1x4x8x8xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x8x8xf32> loc("conv_no_ws")
  return %z : tensor<1x4x8x8xf32>
}

// `memopt.precision = "tf32"` (memopt-compile --precision tf32): f32 convs and
// matmuls may use TF32; an f16 matmul gets no flag (it has tensor cores
// anyway). Without the attribute (conv.mlir above) no flag is written.
// RUN: memopt-compile %t/tf32.mlir --lower-only --emit source -o %t/tf32 --quiet
// RUN: FileCheck %s --check-prefix=TF32 < %t/tf32.cpp
// RUN: FileCheck %s --check-prefix=NOTF32 < %t/conv.cpp
// TF32: params.group = 1;
// TF32-NEXT: params.allowTf32 = true;
// TF32-NEXT: conv(ctx, "conv_tf32",
// TF32: MatmulParams params;
// TF32-NEXT: params.allowTf32 = true;
// TF32-NEXT: matmul(ctx, "mm_tf32",
// TF32: MatmulParams params;
// TF32-NEXT: matmul(ctx, "mm_f16",
// The attention gradient's five chunked GEMMs follow the forward's flag.
// TF32: AttentionParams params;
// TF32: params.safeSoftmax = false;
// TF32-NEXT: params.allowTf32 = true;
// TF32-NEXT: attentionBackward(ctx, "attn_grad_tf32",
// NOTF32-NOT: allowTf32

//--- tf32.mlir
func.func @main(%x: tensor<1x3x8x8xf32>, %a: tensor<4x8xf32>, %h: tensor<4x8xf16>, %q: tensor<2x4x8xf32>, %lse: tensor<2x4x2xf32>) -> (tensor<1x4x8x8xf32>, tensor<4x4xf32>, tensor<4x4xf16>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
    attributes {memopt.arena_size = 1024 : i64, memopt.weights_size = 1024 : i64, memopt.precision = "tf32"} {
  %w = memopt.constant {memopt.weight_offset = 0 : i64} dense<0.1> : tensor<4x3x1x1xf32> loc("w")
  %b = memopt.constant {memopt.weight_offset = 256 : i64} dense<0.2> : tensor<8x4xf32> loc("b")
  %bh = memopt.constant {memopt.weight_offset = 512 : i64} dense<0.2> : tensor<8x4xf16> loc("bh")
  %y = memopt.conv %x, %w {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, memopt.offsets = array<i64: -1>} : (tensor<1x3x8x8xf32>, tensor<4x3x1x1xf32>) -> tensor<1x4x8x8xf32> loc("conv_tf32")
  %m = memopt.matmul %a, %b {memopt.offsets = array<i64: -1>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32> loc("mm_tf32")
  %n = memopt.matmul %h, %bh {memopt.offsets = array<i64: -1>} : (tensor<4x8xf16>, tensor<8x4xf16>) -> tensor<4x4xf16> loc("mm_f16")
  %dq, %dk, %dv = memopt.attention_grad %q, %q, %q, %q, %q, %lse {scale = 0.5 : f32, memopt.offsets = array<i64: -1, -1, -1>, memopt.workspace_offset = 0 : i64, memopt.workspace_size = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x2xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) loc("attn_grad_tf32")
  return %y, %m, %n, %dq, %dk, %dv : tensor<1x4x8x8xf32>, tensor<4x4xf32>, tensor<4x4xf16>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// ONNX's 1-D matmul operands become a row / a column for the runtime; slice
// starts are normalized (negative, clamped) per axis of the input; reduce
// axes are made non-negative and sorted.
// A planned matmul workspace is handed to the next matmul call.
// SHAPES: setMatmulWorkspace(ctx, arena + 512, size_t(256));
// SHAPES-NEXT: {
// SHAPES-NEXT: MatmulParams params;
// SHAPES-NEXT: matmul(ctx, "mv", params, ref(static_cast<uint8_t *>(inputs[0]), DType::F32, {1, 6}), ref(W + 0, DType::F32, {2, 6, 4}), nullptr, ref(arena + 0, DType::F32, {2, 1, 4}));
// SHAPES: const int64_t starts[] = {0, 3};
// SHAPES-NEXT: const int64_t steps[] = {1, -2};
// SHAPES-NEXT: slice(ctx, "sl",
// SHAPES: const int axes[] = {0, 2};
// SHAPES-NEXT: reduce(ctx, "rm", ReduceOp::Mean, axes, 2,

// ONNX Mod lowers to BinaryOp::Mod (fmod = 0, floored) or BinaryOp::FMod
// (fmod = 1, truncated); ScatterND to scatterND with its reduction, here in
// place: its result has data's arena offset.
// RUN: memopt-compile %t/scatter.mlir --lower-only --emit source -o %t/scatter --quiet
// RUN: FileCheck %s --check-prefix=SCATTER < %t/scatter.cpp
// SCATTER: binary(ctx, "floor_mod", BinaryOp::Mod,
// SCATTER: binary(ctx, "trunc_mod", BinaryOp::FMod,
// SCATTER: TensorRef [[DATA:t[0-9]+]] = ref(arena + 0, DType::F32, {4, 8});
// SCATTER: TensorRef [[OUT:t[0-9]+]] = ref(arena + 0, DType::F32, {4, 8});
// SCATTER-NEXT: scatterND(ctx, "scatter", ScatterReduction::Add, [[DATA]], {{t[0-9]+}}, {{t[0-9]+}}, [[OUT]]);

//--- scatter.mlir
func.func @main(%x: tensor<4x8xf32>, %u: tensor<2x8xf32>, %a: tensor<3xi64>) -> (tensor<4x8xf32>, tensor<3xi64>)
    attributes {memopt.arena_size = 512 : i64, memopt.weights_size = 16 : i64} {
  %i = memopt.constant {memopt.weight_offset = 0 : i64} dense<[[3], [0]]> : tensor<2x1xi64> loc("idx")
  %m = memopt.mod %a, %a {memopt.offsets = array<i64: 256>} : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64> loc("floor_mod")
  %n = memopt.mod %m, %a {fmod = 1 : i64, memopt.offsets = array<i64: -1>} : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64> loc("trunc_mod")
  %e = memopt.exp %x {memopt.offsets = array<i64: 0>} : tensor<4x8xf32> loc("exp")
  %s = memopt.scatter_nd %e, %i, %u {reduction = "add", memopt.in_place = 0 : i64, memopt.offsets = array<i64: 0>} : (tensor<4x8xf32>, tensor<2x1xi64>, tensor<2x8xf32>) -> tensor<4x8xf32> loc("scatter")
  %o = memopt.exp %s {memopt.offsets = array<i64: -1>} : tensor<4x8xf32> loc("exp2")
  return %o, %n : tensor<4x8xf32>, tensor<3xi64>
}

//--- shapes.mlir
func.func @main(%v: tensor<6xf32>) -> tensor<4xf32>
    attributes {memopt.arena_size = 1024 : i64, memopt.weights_size = 256 : i64} {
  %m = memopt.constant {memopt.weight_offset = 0 : i64} dense<0.5> : tensor<2x6x4xf32> loc("m")
  %y = memopt.matmul %v, %m {memopt.offsets = array<i64: 0>, memopt.workspace_offset = 512 : i64, memopt.workspace_size = 256 : i64} : (tensor<6xf32>, tensor<2x6x4xf32>) -> tensor<2x4xf32> loc("mv")
  %s = memopt.slice %y {starts = array<i64: -1>, ends = array<i64: -100>, axes = array<i64: -1>, steps = array<i64: -2>, memopt.offsets = array<i64: 256>} : (tensor<2x4xf32>) -> tensor<2x2xf32> loc("sl")
  %u = memopt.unsqueeze %s {axes = array<i64: 1>, memopt.offsets = array<i64: 256>} : (tensor<2x2xf32>) -> tensor<2x1x2xf32> loc("un")
  %r = memopt.reduce_mean %u {axes = array<i64: -1, 0>, keepdims = 0 : i64, memopt.offsets = array<i64: 512>} : (tensor<2x1x2xf32>) -> tensor<1xf32> loc("rm")
  %o = memopt.expand %r {memopt.offsets = array<i64: -1>} : (tensor<1xf32>) -> tensor<4xf32> loc("ex")
  return %o : tensor<4xf32>
}

// Attention: params from the attributes, the bias by pointer (nullptr
// without); Q, K, V and the output at their planned places; a planned
// workspace by pointer and size (nullptr and 0 without).
// RUN: memopt-compile %t/attention.mlir --lower-only --emit source -o %t/attention --quiet
// RUN: FileCheck %s --check-prefix=ATTENTION < %t/attention.cpp
// Attention dropout: ratio, stream, the key tensor's data (the program's
// random_key, a device pointer on CUDA) and cuDNN's generator, forward and
// backward alike.
// RUN: memopt-compile %t/attention_dropout.mlir --lower-only --emit source -o %t/attention_dropout --quiet
// RUN: FileCheck %s --check-prefix=DROPOUT < %t/attention_dropout.cpp
// DROPOUT: TensorRef [[KEY:t[0-9]+]] = ref(static_cast<uint8_t *>(inputs[3]), DType::I64, {2});
// DROPOUT: params.safeSoftmax = true;
// DROPOUT-NEXT: params.dropoutRatio = 0.100000001f;
// DROPOUT-NEXT: params.dropoutStream = 3u;
// DROPOUT-NEXT: params.dropoutKey = static_cast<const int64_t *>([[KEY]].data);
// DROPOUT-NEXT: params.dropoutCudnnRng = true;
// DROPOUT-NEXT: attention(ctx, "attn_dropout", params,
// DROPOUT: params.safeSoftmax = false;
// DROPOUT-NEXT: params.dropoutRatio = 0.100000001f;
// DROPOUT-NEXT: params.dropoutStream = 3u;
// DROPOUT-NEXT: params.dropoutKey = static_cast<const int64_t *>([[KEY]].data);
// DROPOUT-NEXT: params.dropoutCudnnRng = true;
// DROPOUT-NEXT: attentionBackward(ctx, "attn_grad_dropout", params,
// RUN: memopt-compile %t/fused.mlir --lower-only --emit source -o %t/fused --quiet
// RUN: FileCheck %s --check-prefix=FUSED < %t/fused.cpp
// RUN: memopt-compile %t/fused_cast.mlir --lower-only --emit source -o %t/fused_cast --quiet
// RUN: FileCheck %s --check-prefix=FUSEDCAST < %t/fused_cast.cpp

// A fused elementwise op. For nvcc, a Program type whose apply() is the
// chain as code (registers after the inputs, parameters inline), included
// with FusedKernel.cuh only then; for every build, the static step table
// (runtime enums, registers, parameters, clip's open bound as INFINITY), the
// inputs in register order, and the call: the generated kernel under
// __CUDACC__, the interpreter otherwise.
// FUSED: #include "memopt/Runtime/Program.h"
// FUSED-NEXT: #ifdef __CUDACC__
// FUSED-NEXT: #include "memopt/Runtime/FusedKernel.cuh"
// FUSED-NEXT: #endif

// A fused cast: f32 inputs, a bf16 result; the generated kernel gets both
// element types, the interpreter reads them from the tensors.
// FUSEDCAST: TensorRef [[Y:t[0-9]+]] = ref(outputs[0], DType::BF16, {2, 8});
// FUSEDCAST: fusedElementwiseProgram<FusedProgram0, float, __nv_bfloat16>(ctx, "norm_cast", steps, 1, inputs, 2, [[Y]]);
// FUSEDCAST-NEXT: #else
// FUSEDCAST-NEXT: fusedElementwise(ctx, "norm_cast", steps, 1, inputs, 2, [[Y]]);
// FUSED: #ifdef __CUDACC__
// FUSED-NEXT: struct FusedProgram0 {
// FUSED-NEXT: static constexpr int kInputs = 2;
// FUSED-NEXT: __device__ __forceinline__ static float apply(const float *x) {
// FUSED-NEXT: const float r2 = binaryStep(BinaryOp::Mul, x[0], x[1]);
// FUSED-NEXT: const float r3 = unaryStep(UnaryOp::Clip, r2, 0.0f, INFINITY);
// FUSED-NEXT: const float r4 = unaryStep(UnaryOp::LeakyRelu, r3, 0.100000001f, 0.0f);
// FUSED-NEXT: return r4;
// FUSED: TensorRef [[X:t[0-9]+]] = ref(static_cast<uint8_t *>(inputs[0]), DType::F32, {2, 8});
// FUSED: TensorRef [[B:t[0-9]+]] = ref(static_cast<uint8_t *>(inputs[1]), DType::F32, {8});
// FUSED: TensorRef [[Y:t[0-9]+]] = ref(outputs[0], DType::F32, {2, 8});
// FUSED-NEXT: {
// FUSED-NEXT: static const ElementwiseStep steps[] = {
// FUSED-NEXT: {ElementwiseStep::kBinary, int32_t(BinaryOp::Mul), 0, 1, 0.0f, 0.0f},
// FUSED-NEXT: {ElementwiseStep::kUnary, int32_t(UnaryOp::Clip), 2, -1, 0.0f, INFINITY},
// FUSED-NEXT: {ElementwiseStep::kUnary, int32_t(UnaryOp::LeakyRelu), 3, -1, 0.100000001f, 0.0f},
// FUSED-NEXT: };
// FUSED-NEXT: const TensorRef inputs[] = {[[X]], [[B]]};
// FUSED-NEXT: #ifdef __CUDACC__
// FUSED-NEXT: fusedElementwiseProgram<FusedProgram0, float, float>(ctx, "tail", steps, 3, inputs, 2, [[Y]]);
// FUSED-NEXT: #else
// FUSED-NEXT: fusedElementwise(ctx, "tail", steps, 3, inputs, 2, [[Y]]);
// FUSED-NEXT: #endif
// ATTENTION: TensorRef [[Q:t[0-9]+]] = ref(static_cast<uint8_t *>(inputs[0]), DType::F32, {2, 4, 8, 16});
// ATTENTION: TensorRef [[B:t[0-9]+]] = ref(static_cast<uint8_t *>(inputs[3]), DType::F32, {2, 1, 1, 8});
// ATTENTION: TensorRef [[Y:t[0-9]+]] = ref(arena + 0, DType::F32, {2, 4, 8, 32});
// ATTENTION-NEXT: {
// ATTENTION-NEXT: AttentionParams params;
// ATTENTION-NEXT: params.scale = 0.125f;
// ATTENTION-NEXT: params.causal = true;
// ATTENTION-NEXT: params.keyTransposed = true;
// ATTENTION-NEXT: attention(ctx, "attn", params, [[Q]], {{t[0-9]+}}, {{t[0-9]+}}, &[[B]], [[Y]], arena + 8192, size_t(2048));
// ATTENTION: params.scale = 0.25f;
// ATTENTION-NEXT: params.causal = false;
// ATTENTION-NEXT: params.keyTransposed = false;
// ATTENTION-NEXT: attention(ctx, "attn_plain", params, [[Y]], {{t[0-9]+}}, {{t[0-9]+}}, nullptr, {{t[0-9]+}}, nullptr, size_t(0));

//--- fused.mlir
func.func @main(%x: tensor<2x8xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32>
    attributes {memopt.arena_size = 256 : i64, memopt.weights_size = 0 : i64} {
  %y = memopt.fused_elementwise %x, %b {ops = ["mul", "clip", "leaky_relu"], registers = array<i64: 0, 1, 2, -1, 3, -1>, alphas = array<f32: 0.0, 0.0, 0.1>, betas = array<f32: 0.0, 0x7F800000, 0.0>, memopt.offsets = array<i64: 0>} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32> loc("tail")
  return %y : tensor<2x8xf32>
}

//--- fused_cast.mlir
func.func @main(%x: tensor<2x8xf32>, %b: tensor<8xf32>) -> tensor<2x8xbf16>
    attributes {memopt.arena_size = 256 : i64, memopt.weights_size = 0 : i64} {
  %y = memopt.fused_elementwise %x, %b {ops = ["mul"], registers = array<i64: 0, 1>, alphas = array<f32: 0.0>, betas = array<f32: 0.0>, memopt.offsets = array<i64: 0>} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xbf16> loc("norm_cast")
  return %y : tensor<2x8xbf16>
}

//--- attention.mlir
func.func @main(%q: tensor<2x4x8x16xf32>, %kt: tensor<2x4x16x8xf32>, %v: tensor<2x4x8x32xf32>, %b: tensor<2x1x1x8xf32>, %k2: tensor<8x32xf32>, %v2: tensor<8x4xf32>) -> tensor<2x4x8x4xf32>
    attributes {memopt.arena_size = 16384 : i64, memopt.weights_size = 0 : i64} {
  %y = memopt.attention %q, %kt, %v, %b {scale = 0.125 : f32, causal = true, key_transposed = true, memopt.offsets = array<i64: 0>, memopt.workspace_offset = 8192 : i64, memopt.workspace_size = 2048 : i64} : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>, tensor<2x4x8x32xf32>, tensor<2x1x1x8xf32>) -> tensor<2x4x8x32xf32> loc("attn")
  %z = memopt.attention %y, %k2, %v2 {scale = 0.25 : f32, memopt.offsets = array<i64: -1>} : (tensor<2x4x8x32xf32>, tensor<8x32xf32>, tensor<8x4xf32>) -> tensor<2x4x8x4xf32> loc("attn_plain")
  return %z : tensor<2x4x8x4xf32>
}

//--- attention_dropout.mlir
func.func @main(%q: tensor<2x4x8xf32>, %o: tensor<2x4x8xf32>, %lse: tensor<2x4x2xf32>, %key: tensor<2xi64>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
    attributes {memopt.arena_size = 256 : i64, memopt.weights_size = 0 : i64} {
  %y = memopt.attention %q, %q, %q dropout_key %key {scale = 0.5 : f32, safe_softmax = true, dropout_ratio = 0.1 : f32, dropout_stream = 3 : i64, dropout_cudnn_rng, memopt.offsets = array<i64: -1>} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2xi64>) -> tensor<2x4x8xf32> loc("attn_dropout")
  %dq, %dk, %dv = memopt.attention_grad %q, %q, %q, %o, %o, %lse dropout_key %key {scale = 0.5 : f32, dropout_ratio = 0.1 : f32, dropout_stream = 3 : i64, dropout_cudnn_rng, memopt.offsets = array<i64: -1, -1, -1>} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x2xf32>, tensor<2xi64>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) loc("attn_grad_dropout")
  return %y, %dq, %dk, %dv : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// Weights from a dense_resource blob land at their weight offset; an i64
// constant gets init data in the program too.
// RUN: memopt-compile %t/resource.mlir --lower-only --emit source -o %t/resource --quiet
// RUN: FileCheck %s --check-prefix=RESOURCE < %t/resource.cpp
// RUN: od -A d -t f4 -v -N 8 -j 256 %t/resource.weights | FileCheck %s --check-prefix=BLOB
// RESOURCE: alignas(8) const unsigned char kInit1[] = {1,0,0,0,0,0,0,0};
// RESOURCE: {"blob_weight", DType::F32, 1, {2}, 256, nullptr, WeightRole::Constant},
// RESOURCE-NEXT: {"index", DType::I64, 1, {1}, 512, kInit1, WeightRole::Constant},
// RESOURCE: gather(ctx, "g", 0, {{t[0-9]+}}, {{t[0-9]+}}, {{t[0-9]+}});
// BLOB: 0000256 1 2

//--- resource.mlir
func.func @main(%x: tensor<2xf32>) -> tensor<1xf32>
    attributes {memopt.arena_size = 256 : i64, memopt.weights_size = 520 : i64} {
  %w = memopt.constant {memopt.weight_offset = 256 : i64} dense_resource<blob_weight> : tensor<2xf32> loc("blob_weight")
  %i = memopt.constant {memopt.weight_offset = 512 : i64} dense<1> : tensor<1xi64> loc("index")
  %a = memopt.add %x, %w {memopt.offsets = array<i64: 0>} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32> loc("a")
  %g = memopt.gather %a, %i {axis = 0 : i64, memopt.offsets = array<i64: -1>} : (tensor<2xf32>, tensor<1xi64>) -> tensor<1xf32> loc("g")
  return %g : tensor<1xf32>
}

{-#
  dialect_resources: {
    builtin: {
      blob_weight: "0x040000000000803F00000040"
    }
  }
#-}
