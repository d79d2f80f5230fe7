// RUN: split-file %s %t
// RUN: memopt-compile %t/ops.mlir --lower-only --emit source -o %t/split --split-lines 8 --split-part-lines 14 --quiet
// RUN: FileCheck %s --check-prefix=MAIN < %t/split.cpp
// RUN: FileCheck %s --check-prefix=HEADER < %t/split.parts.h
// RUN: cat %t/split.part1.cpp %t/split.part2.cpp %t/split.part3.cpp | FileCheck %s --check-prefix=PARTS
// RUN: FileCheck %s --check-prefix=SCRIPT < %t/split.build.sh
// RUN: ls %t/split* | FileCheck %s --check-prefix=FILES
// RUN: memopt-compile %t/fused.mlir --lower-only --target cuda --emit source -o %t/fused --split-lines 10 --split-part-lines 10 --quiet
// RUN: FileCheck %s --check-prefix=KERNEL-HEADER < %t/fused.parts.h
// RUN: FileCheck %s --check-prefix=KERNEL-FIRST < %t/fused.part1.cu
// RUN: FileCheck %s --check-prefix=KERNEL-LATER < %t/fused.part2.cu
// The same program, not split: a body of at most --split-part-lines lines
// stays one function in one file (and --emit source does not split unless
// asked); a smaller split removes the parts a larger one left.
// RUN: memopt-compile %t/ops.mlir --lower-only --emit source -o %t/split --split-lines 8 --split-part-lines 1000 --quiet
// RUN: memopt-compile %t/ops.mlir --lower-only --emit source -o %t/whole --quiet
// RUN: ls %t/split* %t/whole* | FileCheck %s --check-prefix=WHOLE
// RUN: FileCheck %s --check-prefix=ONE < %t/whole.cpp

// The run function calls the chunks in order; the tables and ProgramInfo
// stay in the main file, which includes the shared header.
// MAIN: // The run function's 4 chunks are in 3 part files (split.parts.h declares them).
// MAIN-NEXT: #include "split.parts.h"
// MAIN: const TensorInfo kInputs[] = {
// MAIN: void run(Context &ctx, uint8_t *arena, const uint8_t *weights,
// MAIN-NEXT: void *const *inputs, void *const *outputs) {
// MAIN-NEXT: memopt_generated::runChunk1(ctx, arena, weights, inputs, outputs);
// MAIN-NEXT: memopt_generated::runChunk2(ctx, arena, weights, inputs, outputs);
// MAIN-NEXT: memopt_generated::runChunk3(ctx, arena, weights, inputs, outputs);
// MAIN-NEXT: memopt_generated::runChunk4(ctx, arena, weights, inputs, outputs);
// MAIN-NEXT: }
// MAIN: const ProgramInfo kProgram = {kProgramAbiVersion, "ops", 512, 272, 2, 5, 2, kInputs, kOutputs, kWeights, run, 0, 1, 0, 0, nullptr, 0, 0, 0, nullptr, nullptr, nullptr};
// MAIN: extern "C" const ProgramInfo *memopt_program(void)

// HEADER: #include "memopt/Runtime/Program.h"
// HEADER: namespace memopt_generated {
// HEADER: inline TensorRef ref(void *data, DType dtype,
// HEADER: void runChunk1(Context &ctx, uint8_t *arena, const uint8_t *weights,
// HEADER: void runChunk4(Context &ctx, uint8_t *arena, const uint8_t *weights,
// HEADER: } // namespace memopt_generated
// HEADER-NOT: extern template

// Each chunk declares the TensorRefs it uses that were declared before it
// (inputs, weights, earlier ops' results) under their names, over the same
// pointers; the ops' text is the one function's.
// PARTS: // Part 1 of 3: chunks 1-2 of 4.
// PARTS: #include "split.parts.h"
// PARTS: void runChunk1(
// PARTS: uint8_t *W = const_cast<uint8_t *>(weights);
// PARTS: TensorRef [[X:t[0-9]+]] = ref(static_cast<uint8_t *>(inputs[0]), DType::F32, {2, 8});
// PARTS-NEXT: TensorRef [[E:t[0-9]+]] = ref(arena + 128, DType::F32, {2, 8});
// PARTS-NEXT: unary(ctx, "exp_node", UnaryOp::Exp, 0.0f, 0.0f, [[X]], [[E]]);
// PARTS: TensorRef [[R:t[0-9]+]] = ref(arena + 128, DType::F32, {16});
// PARTS-NEXT: }
// PARTS: void runChunk2(
// PARTS: TensorRef [[R]] = ref(arena + 128, DType::F32, {16});
// PARTS-NEXT: TensorRef [[N:t[0-9]+]] = ref(outputs[1], DType::F32, {16});
// PARTS-NEXT: unary(ctx, "neg_node", UnaryOp::Neg, 0.0f, 0.0f, [[R]], [[N]]);
// PARTS: // Part 2 of 3: chunk 3 of 4.
// PARTS: void runChunk3(
// The weights are declared where they are used, not at the top.
// PARTS: TensorRef [[W:t[0-9]+]] = ref(W + 0, DType::F32, {8, 4});
// PARTS-NEXT: TensorRef [[B:t[0-9]+]] = ref(W + 256, DType::F32, {4});
// PARTS-NEXT: TensorRef [[F:t[0-9]+]] = ref(outputs[1], DType::F32, {2, 8});
// PARTS: matmul(ctx, "gemm_node", params, [[F]], [[W]], &[[B]], [[M:t[0-9]+]]);
// PARTS: // Part 3 of 3: chunk 4 of 4.
// PARTS: void runChunk4(
// PARTS: TensorRef [[Y:t[0-9]+]] = ref(static_cast<uint8_t *>(inputs[1]), DType::F32, {4});
// PARTS-NEXT: TensorRef [[B]] = ref(W + 256, DType::F32, {4});
// PARTS-NEXT: TensorRef [[N]] = ref(outputs[1], DType::F32, {16});
// PARTS-NEXT: TensorRef [[M]] = ref(arena + 256, DType::F32, {2, 4});
// PARTS: unary(ctx, "relu_node", UnaryOp::Relu, 0.0f, 0.0f, [[M]], [[S:t[0-9]+]]);
// PARTS: copy(ctx, "output #2", [[Y]], ref(outputs[2], DType::F32, {4}));
// PARTS-NEXT: copy(ctx, "output #3", [[N]], ref(outputs[3], DType::F32, {16}));
// PARTS-NEXT: copy(ctx, "output #4", [[B]], ref(outputs[4], DType::F32, {4}));
// PARTS-NEXT: }
// PARTS: } // namespace memopt_generated

// The build script compiles the four files in parallel, then links objects.
// SCRIPT: # Builds split from split.cpp and its 3 parts (generated by memopt-compile).
// SCRIPT: printf '%s\n' 'split.cpp' 'split.part1.cpp' 'split.part2.cpp' 'split.part3.cpp' |
// SCRIPT-NEXT: xargs -P "${JOBS:-$(nproc)}" -I{} ${CXX:-g++} -std=c++17 -O0 -fPIC -I"$ROOT/include" -c "$HERE/{}" -o "$OBJ/{}.o"
// SCRIPT-NEXT: ${CXX:-g++} "$OBJ/split.cpp.o" "$OBJ/split.part1.cpp.o" "$OBJ/split.part2.cpp.o" "$OBJ/split.part3.cpp.o" -o "$HERE/split" \
// SCRIPT: ${CXX:-g++} -shared "$OBJ/split.cpp.o" {{.*}} -o "$HERE/split.so" \

// FILES: split.build.sh
// FILES-NEXT: {{.*}}split.cpp
// FILES-NEXT: {{.*}}split.part1.cpp
// FILES-NEXT: {{.*}}split.part2.cpp
// FILES-NEXT: {{.*}}split.part3.cpp
// FILES-NEXT: {{.*}}split.parts.h
// FILES-NEXT: {{.*}}split.weights

// A generated kernel is instantiated by the part that launches it first; the
// header declares it `extern template` for the others.
// KERNEL-HEADER: namespace memopt_generated {
// KERNEL-HEADER: struct FusedProgram0 {
// KERNEL-HEADER: extern template void memopt::rt::fusedElementwiseProgram<memopt_generated::FusedProgram0, float, float>(Context &, const char *, const ElementwiseStep *, int, const TensorRef *, int, TensorRef);
// KERNEL-FIRST: #ifdef __CUDACC__
// KERNEL-FIRST-NEXT: template void memopt::rt::fusedElementwiseProgram<memopt_generated::FusedProgram0, float, float>(Context &, const char *, const ElementwiseStep *, int, const TensorRef *, int, TensorRef);
// KERNEL-FIRST-NEXT: #endif
// KERNEL-FIRST: fusedElementwiseProgram<FusedProgram0, float, float>(ctx, "first", steps, 1, inputs, 2, {{t[0-9]+}});
// KERNEL-LATER-NOT: template void
// KERNEL-LATER: fusedElementwiseProgram<FusedProgram0, float, float>(ctx, "second", steps, 1, inputs, 2, {{t[0-9]+}});

// WHOLE-NOT: part
// WHOLE: split.cpp
// WHOLE-NOT: part
// WHOLE: whole.cpp
// WHOLE-NOT: part

// ONE-NOT: parts.h
// ONE: void run(Context &ctx, uint8_t *arena, const uint8_t *weights,
// ONE: unary(ctx, "exp_node"
// ONE: copy(ctx, "output #4"

//--- ops.mlir
// The hand-planned function of emit-program.mlir.
func.func @main(%x: tensor<2x8xf32> {memopt.name = "x"},
                %y: tensor<4xf32> {memopt.name = "y"})
    -> (tensor<2x4xf32> {memopt.name = "out"},
        tensor<16xf32> {memopt.name = "flat"},
        tensor<4xf32> {memopt.name = "passthrough"},
        tensor<16xf32> {memopt.name = "flat_again"},
        tensor<4xf32> {memopt.name = "bias"})
    attributes {memopt.arena_size = 512 : i64, memopt.weights_size = 272 : i64,
                memopt.output_offsets = array<i64: 384, -1, -1, -1, -1>} {
  %w = memopt.constant {memopt.weight_offset = 0 : i64} dense<1.0> : tensor<8x4xf32> loc("fc.weight")
  %b = memopt.constant {memopt.weight_offset = 256 : i64} dense<0.5> : tensor<4xf32> loc("fc.bias")
  %e = memopt.exp %x {memopt.offsets = array<i64: 128>} : tensor<2x8xf32> loc("exp_node")
  %r = memopt.reshape %e {memopt.offsets = array<i64: 128>} : (tensor<2x8xf32>) -> tensor<16xf32> loc("reshape_node")
  %n = memopt.neg %r {memopt.offsets = array<i64: -1>} : tensor<16xf32> loc("neg_node")
  %f = memopt.reshape %n {memopt.offsets = array<i64: -1>} : (tensor<16xf32>) -> tensor<2x8xf32> loc("back_node")
  %m = memopt.gemm %f, %w, %b {alpha = 0.5 : f32, transB = 0 : i64, memopt.offsets = array<i64: 256>} : (tensor<2x8xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("gemm_node")
  %s = memopt.relu %m {memopt.offsets = array<i64: -1>} : tensor<2x4xf32> loc("relu_node")
  return %s, %n, %y, %n, %b : tensor<2x4xf32>, tensor<16xf32>, tensor<4xf32>, tensor<16xf32>, tensor<4xf32>
}

//--- fused.mlir
// One chain twice, the two launches in different parts.
func.func @main(%x: tensor<2x8xf32> {memopt.name = "x"},
                %b: tensor<8xf32> {memopt.name = "b"})
    -> (tensor<2x8xf32> {memopt.name = "y"})
    attributes {memopt.arena_size = 256 : i64, memopt.weights_size = 0 : i64} {
  %a = memopt.fused_elementwise %x, %b {ops = ["mul"], registers = array<i64: 0, 1>, alphas = array<f32: 0.0>, betas = array<f32: 0.0>, memopt.offsets = array<i64: 0>} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32> loc("first")
  %n = memopt.neg %a {memopt.offsets = array<i64: 128>} : tensor<2x8xf32> loc("middle")
  %c = memopt.fused_elementwise %n, %b {ops = ["mul"], registers = array<i64: 0, 1>, alphas = array<f32: 0.0>, betas = array<f32: 0.0>, memopt.offsets = array<i64: -1>} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32> loc("second")
  return %c : tensor<2x8xf32>
}
