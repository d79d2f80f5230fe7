//===- EmitProgram.h - planned memopt IR -> generated C++ program -*- C++
//-*-===//
//
// The lowering: a function that went through `--memopt-plan-memory` becomes
// one C++ source file defining `memopt_program()` (include/memopt/Runtime/
// Program.h), whose run function calls the runtime's kernel entry points
// (include/memopt/Runtime/Runtime.h) with TensorRefs at the planned offsets,
// plus the weight region's layout (the constants at their
// `memopt.weight_offset`s), which WeightImage.h writes to the weight file. The
// lowering reads the plan; it never chooses an offset.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_CONVERSION_EMITPROGRAM_H
#define MEMOPT_CONVERSION_EMITPROGRAM_H

#include "memopt/Conversion/WeightImage.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace mlir::memopt {

/// What the lowering produces for one planned function.
struct EmittedProgram {
  /// The generated C++ source (links against either runtime backend): the
  /// whole program, or for a split one the tables, ProgramInfo and the run
  /// function that calls the chunks.
  std::string source;
  /// A split program (EmitProgramOptions::splitLines): the header its files
  /// share (written as EmitProgramOptions::partsHeaderName) and the part files,
  /// each a few chunks of the run function. Empty when not split.
  std::string partsHeader;
  std::vector<std::string> parts;
  /// The weight region: `memopt.weights_size` bytes, the tensors in it and
  /// the table's fingerprint (include/memopt/Runtime/WeightsFile.h), written
  /// to the weight file by writeWeightImage (WeightImage.h).
  WeightImage weights;
};

struct EmitProgramOptions {
  /// ProgramInfo::name; empty means the function's name.
  std::string programName;
  /// Split the run function into chunk functions of about this many lines,
  /// at op boundaries, and the chunks into part files of about
  /// `partLines` lines, so that the system compiler sees small functions
  /// and compiles the parts in parallel. 0, or a body of at most
  /// max(splitLines, partLines) lines: one function in one file
  /// (docs/lowering.md, "Split programs").
  int64_t splitLines = 0;
  /// The lines of a part file (at least one chunk each); 0: one chunk each.
  int64_t partLines = 0;
  /// The file name the parts and the main file include the shared header by.
  std::string partsHeaderName = "program.parts.h";
};

/// Lowers the planned `function`. Fails with one diagnostic naming the op
/// and its ONNX node when the IR is not planned, the plan is inconsistent,
/// or an op has no runtime kernel yet.
FailureOr<EmittedProgram> emitProgram(func::FuncOp function,
                                      const EmitProgramOptions &options = {});

/// The single non-external function of `module` that `emitProgram` lowers
/// (`main` when there are several); emits an error and returns null if none.
func::FuncOp getProgramFunction(ModuleOp module);

/// Replaces the arena offsets that `--memopt-plan-memory` recorded in
/// `function` with a naive layout: every arena storage (and every conv
/// workspace) gets its own slot, one after the other, so nothing is reused.
/// Same attributes, so the lowering is identical; used to show that planning
/// changes no numbers.
LogicalResult assignNaiveOffsets(func::FuncOp function, int64_t alignment);

} // namespace mlir::memopt

#endif // MEMOPT_CONVERSION_EMITPROGRAM_H
