//===- ParallelBuild.cpp - compile a split program's files at once --------===//
//
// See ParallelBuild.h. The children are started with llvm::sys::ExecuteNoWait
// and reaped with non-blocking llvm::sys::Wait calls (which also give their
// CPU time and peak memory, wait4's rusage); each one's stderr goes to a
// temporary file of its own, so that a failure prints that file's messages
// together.
//
//===----------------------------------------------------------------------===//

#include "ParallelBuild.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Threading.h"

#include <chrono>
#include <optional>
#include <thread>

using namespace mlir;
using namespace mlir::memopt;

unsigned mlir::memopt::getDefaultCompileJobs() {
  return std::max(1u, llvm::hardware_concurrency().compute_thread_count());
}

namespace {

/// A started compiler run.
struct RunningJob {
  size_t index = 0;
  llvm::sys::ProcessInfo process;
  SmallString<128> stderrPath;
  std::chrono::steady_clock::time_point start;
  TimingScope timer;
};

} // namespace

LogicalResult mlir::memopt::runCompileJobs(
    StringRef compiler, ArrayRef<CompileJob> jobs, unsigned parallel,
    llvm::raw_ostream &log, bool quiet, llvm::raw_ostream &errors,
    TimingScope &timer, std::vector<CompileJobTime> &times) {
  parallel = std::max(1u, parallel);
  std::vector<RunningJob> running;
  size_t next = 0;
  bool failed = false;
  // Reports a job that ended (or did not start); false on failure.
  auto finish = [&](RunningJob &job, const llvm::sys::ProcessInfo &result,
                    const std::optional<llvm::sys::ProcessStatistics> &stats,
                    StringRef message) {
    job.timer.stop();
    const CompileJob &compile = jobs[job.index];
    CompileJobTime time;
    time.file = llvm::sys::path::filename(compile.file).str();
    time.wallSeconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - job.start)
                           .count();
    if (stats) {
      time.cpuSeconds = double(stats->TotalTime.count()) * 1e-6;
      time.peakBytes = stats->PeakMemory * 1024;
    }
    times.push_back(time);
    auto output = llvm::MemoryBuffer::getFile(job.stderrPath);
    if (output && (result.ReturnCode != 0 || !quiet))
      (result.ReturnCode != 0 ? errors : log) << (*output)->getBuffer();
    llvm::sys::fs::remove(job.stderrPath);
    if (result.ReturnCode == 0)
      return true;
    errors << "memopt-compile: error: " << llvm::sys::path::filename(compiler)
           << " failed on " << compile.file
           << (message.empty() ? "" : ": " + message.str()) << " (exit "
           << result.ReturnCode << ")\n";
    return false;
  };

  while ((!failed && next < jobs.size()) || !running.empty()) {
    while (!failed && next < jobs.size() && running.size() < parallel) {
      const CompileJob &compile = jobs[next];
      SmallVector<StringRef> argv = {compiler};
      for (const std::string &argument : compile.arguments)
        argv.push_back(argument);
      if (!quiet) {
        log << "  $";
        for (StringRef argument : argv)
          log << " " << argument;
        log << "\n";
      }
      RunningJob job;
      job.index = next++;
      job.start = std::chrono::steady_clock::now();
      job.timer = timer.nest(llvm::sys::path::filename(compile.file));
      bool captured = !llvm::sys::fs::createTemporaryFile("memopt-tool", "txt",
                                                          job.stderrPath);
      std::optional<StringRef> redirects[] = {std::nullopt, std::nullopt,
                                              StringRef(job.stderrPath)};
      std::string message;
      bool executionFailed = false;
      job.process = llvm::sys::ExecuteNoWait(
          compiler, argv, std::nullopt,
          captured ? ArrayRef<std::optional<StringRef>>(redirects)
                   : ArrayRef<std::optional<StringRef>>(),
          0, &message, &executionFailed);
      if (executionFailed) {
        llvm::sys::ProcessInfo result;
        result.ReturnCode = -1;
        finish(job, result, std::nullopt, message);
        failed = true;
        break;
      }
      running.push_back(std::move(job));
    }
    // Reap the jobs that ended; sleep a little when none has.
    bool reaped = false;
    for (size_t i = 0; i < running.size();) {
      std::string message;
      std::optional<llvm::sys::ProcessStatistics> stats;
      llvm::sys::ProcessInfo result = llvm::sys::Wait(
          running[i].process, /*SecondsToWait=*/0, &message, &stats);
      if (result.Pid == llvm::sys::ProcessInfo::InvalidPid && message.empty()) {
        ++i;
        continue;
      }
      if (result.ReturnCode == 0 && !message.empty())
        result.ReturnCode = -1;
      if (!finish(running[i], result, stats, message))
        failed = true;
      running.erase(running.begin() + i);
      reaped = true;
    }
    if (!reaped && !running.empty())
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return success(!failed);
}
