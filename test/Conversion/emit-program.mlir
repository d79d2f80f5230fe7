// RUN: memopt-compile %s --lower-only --emit source -o %t --quiet
// RUN: FileCheck %s < %t.cpp
// RUN: od -A d -t f4 -v %t.weights | FileCheck %s --check-prefix=WEIGHTS

// A hand-planned function: the lowering must use exactly the recorded
// offsets, emit no call for views, write outputs in place when their storage
// is the output buffer, and copy returned values that live elsewhere (an
// input, another output, a weight).

// CHECK: const TensorInfo kInputs[] = {
// CHECK-NEXT: {"x", DType::F32, 2, {2, 8}, -1, nullptr, WeightRole::Constant},
// CHECK-NEXT: {"y", DType::F32, 1, {4}, -1, nullptr, WeightRole::Constant},
// CHECK: const TensorInfo kOutputs[] = {
// An output planned in the arena (memopt.output_offsets) carries its offset:
// the driver binds outputs[0] to arena + 384.
// CHECK-NEXT: {"out", DType::F32, 2, {2, 4}, 384, nullptr, WeightRole::Constant},
// CHECK-NEXT: {"flat", DType::F32, 1, {16}, -1, nullptr, WeightRole::Constant},
// CHECK: const TensorInfo kWeights[] = {
// CHECK-NEXT: {"fc.weight", DType::F32, 2, {8, 4}, 0, nullptr, WeightRole::Constant},
// Float weights with more than one element have no init data (random-weight
// runs may replace them); scalars and integer tensors do.
// CHECK-NEXT: {"fc.bias", DType::F32, 1, {4}, 256, nullptr, WeightRole::Constant},

// CHECK: void run(
// CHECK: TensorRef [[X:t[0-9]+]] = ref(static_cast<uint8_t *>(inputs[0]), DType::F32, {2, 8});
// CHECK: TensorRef [[Y:t[0-9]+]] = ref(static_cast<uint8_t *>(inputs[1]), DType::F32, {4});
// CHECK: TensorRef [[W:t[0-9]+]] = ref(W + 0, DType::F32, {8, 4});
// CHECK: TensorRef [[B:t[0-9]+]] = ref(W + 256, DType::F32, {4});
// CHECK: TensorRef [[E:t[0-9]+]] = ref(arena + 128, DType::F32, {2, 8});
// CHECK-NEXT: unary(ctx, "exp_node", UnaryOp::Exp, 0.0f, 0.0f, [[X]], [[E]]);
// After every call, the per-op instrumentation hook (--profile, --dump-ops).
// CHECK-NEXT: {
// CHECK-NEXT: const TensorRef results[] = {[[E]]};
// CHECK-NEXT: opDone(ctx, 0, "exp_node", "memopt.exp", results, 1);
// CHECK-NEXT: }
// The reshape is a view: a new shape over arena + 128, no call.
// CHECK-NEXT: // reshape_node (memopt.reshape): view, no call
// CHECK-NEXT: TensorRef [[R:t[0-9]+]] = ref(arena + 128, DType::F32, {16});
// CHECK-NEXT: TensorRef [[N:t[0-9]+]] = ref(outputs[1], DType::F32, {16});
// CHECK-NEXT: unary(ctx, "neg_node", UnaryOp::Neg, 0.0f, 0.0f, [[R]], [[N]]);
// CHECK: // back_node (memopt.reshape): view, no call
// CHECK-NEXT: TensorRef [[F:t[0-9]+]] = ref(outputs[1], DType::F32, {2, 8});
// CHECK-NEXT: TensorRef [[M:t[0-9]+]] = ref(arena + 256, DType::F32, {2, 4});
// CHECK: params.transB = false;
// CHECK: params.alpha = 0.5f;
// CHECK: matmul(ctx, "gemm_node", params, [[F]], [[W]], &[[B]], [[M]]);
// CHECK: TensorRef [[S:t[0-9]+]] = ref(outputs[0], DType::F32, {2, 4});
// CHECK-NEXT: unary(ctx, "relu_node", UnaryOp::Relu, 0.0f, 0.0f, [[M]], [[S]]);
// Output 1 is written in place above; the input, the second use of output
// 1 and the weight are copied.
// CHECK-NOT: copy(ctx, "output #0"
// CHECK-NOT: copy(ctx, "output #1"
// CHECK: copy(ctx, "output #2", [[Y]], ref(outputs[2], DType::F32, {4}));
// CHECK-NEXT: copy(ctx, "output #3", [[N]], ref(outputs[3], DType::F32, {16}));
// CHECK-NEXT: copy(ctx, "output #4", [[B]], ref(outputs[4], DType::F32, {4}));
// CHECK-NEXT: }
// CHECK: const ProgramInfo kProgram = {kProgramAbiVersion, "emit-program", 512, 272, 2, 5, 2, kInputs, kOutputs, kWeights, run, 0, 1, 0, 0, nullptr, 0, 0, 0, nullptr, nullptr, nullptr};
// CHECK: extern "C" const ProgramInfo *memopt_program(void)

// The weight image: fc.weight at 0, fc.bias (splat 0.5) at 256, zeros between.
// WEIGHTS: 0000000 1 2 3 4
// WEIGHTS-NEXT: 0000016 5 6 7 8
// WEIGHTS: 0000112 5 6 7 8
// WEIGHTS-NEXT: 0000128 0 0 0 0
// WEIGHTS: 0000256 0.5 0.5 0.5 0.5
// WEIGHTS-NEXT: 0000272
func.func @main(%x: tensor<2x8xf32> {memopt.name = "x"},
                %y: tensor<4xf32> {memopt.name = "y"})
    -> (tensor<2x4xf32> {memopt.name = "out"},
        tensor<16xf32> {memopt.name = "flat"},
        tensor<4xf32> {memopt.name = "passthrough"},
        tensor<16xf32> {memopt.name = "flat_again"},
        tensor<4xf32> {memopt.name = "bias"})
    attributes {memopt.arena_size = 512 : i64, memopt.weights_size = 272 : i64,
                memopt.output_offsets = array<i64: 384, -1, -1, -1, -1>} {
  %w = memopt.constant {memopt.weight_offset = 0 : i64} dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<8x4xf32> loc("fc.weight")
  %b = memopt.constant {memopt.weight_offset = 256 : i64} dense<0.5> : tensor<4xf32> loc("fc.bias")
  %e = memopt.exp %x {memopt.offsets = array<i64: 128>} : tensor<2x8xf32> loc("exp_node")
  %r = memopt.reshape %e {memopt.offsets = array<i64: 128>} : (tensor<2x8xf32>) -> tensor<16xf32> loc("reshape_node")
  %n = memopt.neg %r {memopt.offsets = array<i64: -1>} : tensor<16xf32> loc("neg_node")
  %f = memopt.reshape %n {memopt.offsets = array<i64: -1>} : (tensor<16xf32>) -> tensor<2x8xf32> loc("back_node")
  %m = memopt.gemm %f, %w, %b {alpha = 0.5 : f32, transB = 0 : i64, memopt.offsets = array<i64: 256>} : (tensor<2x8xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("gemm_node")
  %s = memopt.relu %m {memopt.offsets = array<i64: -1>} : tensor<2x4xf32> loc("relu_node")
  return %s, %n, %y, %n, %b : tensor<2x4xf32>, tensor<16xf32>, tensor<4xf32>, tensor<16xf32>, tensor<4xf32>
}
