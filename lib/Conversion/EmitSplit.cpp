//===- EmitSplit.cpp - a large generated program in chunks and parts ------===//
//
// A large program's run function (TinyLlama's training step: 30,000 lines,
// one runtime call per op) is more than the system compiler handles well:
// GCC's optimizer is superlinear in the size of one function, and one file
// compiles on one core. The driver (EmitProgram.cpp) writes the body op by op
// into segments; here they are cut at op boundaries into chunk functions of
// about EmitProgramOptions::splitLines lines, and the chunks into part files
// of about partLines lines (docs/lowering.md, "Split programs"):
//
//   OUT.parts.h     the includes, the generated kernels' Program types, ref(),
//                   the chunks' declarations, an `extern template` per kernel
//   OUT.cu / .cpp   the tables, ProgramInfo and run(), which calls the chunks
//                   in order
//   OUT.partK.cu    chunk functions. A chunk declares the TensorRef locals it
//                   uses that an earlier chunk (or the inputs and weights)
//                   declared, under the same names and over the same planned
//                   pointers, so an op's text is the one function's text.
//
// Each generated kernel (fusedElementwiseProgram<FusedProgramN, TIn, T>) is
// instantiated once, by the part that launches it first; the other parts see
// its `extern template` declaration and call that instantiation.
//
// Taken from: XLA's GPU compiler (llvm::SplitModule cuts the module into
// parts that are compiled in parallel) and CINN's parallel compiler (one
// compilation job per group of kernels). Different: the cut is textual, at op
// boundaries of an ahead-of-time program; nothing crosses a chunk boundary
// but the arena, weights, inputs and outputs pointers, because every tensor
// sits at a planned offset, so a chunk rebuilds its TensorRefs from them.
//
//===----------------------------------------------------------------------===//

#include "EmitProgramInternal.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::emit_program;

std::string mlir::memopt::emit_program::refFunction(bool inlined) {
  std::string text = inlined ? "inline TensorRef ref(void *data, DType dtype,\n"
                               "                     "
                             : "TensorRef ref(void *data, DType dtype,\n"
                               "              ";
  return text + "std::initializer_list<int64_t> shape) {\n"
                "  TensorRef t;\n  t.data = data;\n  t.dtype = dtype;\n"
                "  t.rank = int(shape.size());\n  int i = 0;\n"
                "  for (int64_t d : shape)\n    t.shape[i++] = d;\n"
                "  return t;\n}\n\n";
}

void ProgramEmitter::endSegment(bool declarationsOnly) {
  BodySegment segment;
  segment.begin = segmentBegin;
  segment.end = body.size();
  segment.lines =
      llvm::count(StringRef(body).slice(segment.begin, segment.end), '\n');
  segment.declarationsOnly = declarationsOnly;
  segment.uses = std::move(segmentUses);
  segment.kernels = std::move(segmentKernels);
  segmentUses.clear();
  segmentKernels.clear();
  segments.push_back(std::move(segment));
  segmentBegin = body.size();
}

namespace {

/// Consecutive segments [begin, end) of the body as one function, and the
/// locals it declares again from the pointers of their first declaration.
struct Chunk {
  size_t begin = 0, end = 0;
  int64_t lines = 0;
  std::vector<unsigned> redeclared;
};

/// "name(Context &ctx, ...)": a chunk's parameters, those of run().
constexpr const char *kChunkParameters =
    "(Context &ctx, uint8_t *arena, const uint8_t *weights,\n"
    "    void *const *inputs, void *const *outputs)";

/// The signature of fusedElementwiseProgram (FusedKernel.cuh) after its
/// template arguments, for its explicit instantiations.
constexpr const char *kKernelInstanceSignature =
    "(Context &, const char *, const ElementwiseStep *, int, "
    "const TensorRef *, int, TensorRef);\n";

std::string chunkName(size_t index) {
  return "runChunk" + std::to_string(index + 1);
}

} // namespace

bool ProgramEmitter::splitProgram(EmittedProgram &program, StringRef banner,
                                  StringRef includes, StringRef programInfo) {
  int64_t limit = options.splitLines;
  int64_t total = 0;
  for (const BodySegment &segment : segments)
    total += segment.lines;
  if (limit <= 0 || total <= std::max(limit, options.partLines))
    return false;

  // Chunks: segments in order until one reaches the limit, counting the
  // declarations it needs from before.
  std::vector<Chunk> chunks;
  Chunk chunk;
  llvm::DenseSet<unsigned> needed;
  auto close = [&](size_t end) {
    chunk.end = end;
    llvm::sort(chunk.redeclared);
    chunks.push_back(std::move(chunk));
    chunk = Chunk();
    chunk.begin = end;
    needed.clear();
  };
  for (auto [index, segment] : llvm::enumerate(segments)) {
    if (segment.declarationsOnly) {
      if (chunk.begin == index)
        chunk.begin = index + 1;
      continue;
    }
    for (unsigned local : segment.uses) {
      size_t declared = declaredIn[local];
      bool inChunk = declared >= chunk.begin && declared < index + 1 &&
                     !segments[declared].declarationsOnly;
      if (!inChunk && needed.insert(local).second) {
        chunk.redeclared.push_back(local);
        ++chunk.lines;
      }
    }
    chunk.lines += segment.lines;
    if (chunk.lines >= limit && index + 1 < segments.size())
      close(index + 1);
  }
  close(segments.size());
  // A last chunk of nothing but declarations (the weights after the last
  // op) does nothing.
  while (chunks.size() > 1 && chunks.back().lines == 0)
    chunks.pop_back();
  if (chunks.size() < 2)
    return false;

  // Parts: chunks in order until one reaches partLines (one chunk each
  // without it).
  std::vector<std::pair<size_t, size_t>> parts; // chunk ranges
  int64_t partLimit = std::max(options.partLines, limit);
  int64_t lines = 0;
  for (size_t first = 0, index = 0; index < chunks.size(); ++index) {
    lines += chunks[index].lines;
    if (options.partLines <= 0 || lines >= partLimit ||
        index + 1 == chunks.size()) {
      parts.push_back({first, index + 1});
      first = index + 1;
      lines = 0;
    }
  }

  // The part that instantiates each kernel: the first to launch it.
  SmallVector<size_t> kernelPart(fusedInstances.size(), parts.size());
  for (auto [partIndex, range] : llvm::enumerate(parts))
    for (size_t k = range.first; k < range.second; ++k)
      for (size_t s = chunks[k].begin; s < chunks[k].end; ++s)
        for (unsigned kernel : segments[s].kernels)
          kernelPart[kernel] = std::min(kernelPart[kernel], partIndex);

  std::string partFiles = parts.size() == 1
                              ? std::string("one part file")
                              : std::to_string(parts.size()) + " part files";

  // The shared header.
  llvm::raw_string_ostream header(program.partsHeader);
  header << banner << "// What the program's files share: the run function in "
         << chunks.size() << " chunks, " << partFiles << ".\n"
         << "#ifndef MEMOPT_GENERATED_PROGRAM_PARTS_H\n"
         << "#define MEMOPT_GENERATED_PROGRAM_PARTS_H\n\n"
         << includes << "namespace memopt_generated {\n\n";
  if (!kernels.empty())
    header << "#ifdef __CUDACC__\n" << kernels << "#endif\n\n";
  header << refFunction(/*inlined=*/true);
  for (size_t index = 0; index < chunks.size(); ++index)
    header << "void " << chunkName(index) << kChunkParameters << ";\n";
  header << "\n} // namespace memopt_generated\n\n";
  if (!fusedInstances.empty()) {
    header << "#ifdef __CUDACC__\n";
    for (const std::string &instance : fusedInstances)
      header << "extern template void memopt::rt::fusedElementwiseProgram<"
             << "memopt_generated::" << instance << ">"
             << kKernelInstanceSignature;
    header << "#endif\n\n";
  }
  header << "#endif // MEMOPT_GENERATED_PROGRAM_PARTS_H\n";

  // The parts.
  std::string prologue = "  uint8_t *W = const_cast<uint8_t *>(weights);\n"
                         "  (void)W;\n  (void)arena;\n  (void)inputs;\n"
                         "  (void)outputs;\n";
  if (hostStateSize > 0)
    prologue += "  uint8_t *H = hostState(ctx);\n  (void)H;\n";
  StringRef text = body;
  for (auto [partIndex, range] : llvm::enumerate(parts)) {
    std::string source;
    llvm::raw_string_ostream part(source);
    part << banner << "// Part " << partIndex + 1 << " of " << parts.size()
         << ": chunk" << (range.second - range.first > 1 ? "s " : " ")
         << range.first + 1;
    if (range.second - range.first > 1)
      part << "-" << range.second;
    part << " of " << chunks.size() << ".\n"
         << "#include \"" << options.partsHeaderName << "\"\n\n";
    bool anyKernel = false;
    for (auto [kernel, owner] : llvm::enumerate(kernelPart))
      if (owner == partIndex) {
        part << (anyKernel ? "" : "#ifdef __CUDACC__\n")
             << "template void memopt::rt::fusedElementwiseProgram<"
             << "memopt_generated::" << fusedInstances[kernel] << ">"
             << kKernelInstanceSignature;
        anyKernel = true;
      }
    if (anyKernel)
      part << "#endif\n\n";
    part << "namespace memopt_generated {\n\n";
    for (size_t k = range.first; k < range.second; ++k) {
      const Chunk &chunk = chunks[k];
      part << "void " << chunkName(k) << kChunkParameters << " {\n" << prologue;
      for (unsigned local : chunk.redeclared)
        part << declarations[local];
      for (size_t s = chunk.begin; s < chunk.end; ++s)
        if (!segments[s].declarationsOnly)
          part << text.slice(segments[s].begin, segments[s].end);
      part << "}\n\n";
    }
    part << "} // namespace memopt_generated\n";
    program.parts.push_back(std::move(source));
  }

  // The main file: the tables, run() and ProgramInfo.
  llvm::raw_string_ostream out(program.source);
  out << banner << "// The run function's " << chunks.size()
      << " chunks are in " << partFiles << " (" << options.partsHeaderName
      << " declares them).\n"
      << "#include \"" << options.partsHeaderName << "\"\n\n"
      << "namespace {\n\n"
      << tables << "\n"
      << "void run(Context &ctx, uint8_t *arena, const uint8_t *weights,\n"
      << "         void *const *inputs, void *const *outputs) {\n";
  for (size_t index = 0; index < chunks.size(); ++index)
    out << "  memopt_generated::" << chunkName(index)
        << "(ctx, arena, weights, inputs, outputs);\n";
  out << "}\n\n"
      << programInfo << "} // namespace\n\n"
      << "extern \"C\" const ProgramInfo *memopt_program(void) {\n"
      << "  return &kProgram;\n}\n";
  return true;
}
