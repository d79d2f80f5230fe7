//===- ParallelBuild.h - compile a split program's files at once -*- C++
//-*-===//
//
// Internal to lib/Conversion (CompileDriver.cpp): runs the system compiler
// on each file of a split generated program (EmitSplit.cpp), at most N at a
// time, and reports each one's time. The shape is ninja's and make -j's (a
// pool of N running commands; the next starts when one ends; the first
// failure stops new starts and each failed command's output is printed with
// its file), without a build graph: the files are independent until the
// link.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_CONVERSION_PARALLELBUILD_H
#define MEMOPT_LIB_CONVERSION_PARALLELBUILD_H

#include "mlir/Support/LLVM.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::memopt {

/// One compiler run: the file it compiles (for messages) and its arguments.
struct CompileJob {
  std::string file;
  std::vector<std::string> arguments;
};

/// What one finished job took.
struct CompileJobTime {
  std::string file;
  double wallSeconds = 0;
  /// User + system time of the compiler and the processes it waited for.
  double cpuSeconds = 0;
  /// The largest resident set of those processes, in bytes.
  uint64_t peakBytes = 0;
};

/// Runs `compiler` once per job, at most `parallel` at once (at least 1).
/// Prints each command line on `log` unless `quiet`; a job that fails gets
/// its compiler's output and `memopt-compile: error: <compiler> failed on
/// <file> (exit N)` on `errors`, no further job starts and the running ones
/// are waited for. Each job's time is appended to `times` and, under
/// --timing, to a scope of `timer` named after its file.
LogicalResult runCompileJobs(StringRef compiler, ArrayRef<CompileJob> jobs,
                             unsigned parallel, llvm::raw_ostream &log,
                             bool quiet, llvm::raw_ostream &errors,
                             TimingScope &timer,
                             std::vector<CompileJobTime> &times);

/// The number of jobs --jobs 0 stands for: the processors this process may
/// run on.
unsigned getDefaultCompileJobs();

} // namespace mlir::memopt

#endif // MEMOPT_LIB_CONVERSION_PARALLELBUILD_H
