//===- CompileDriver.cpp - the memopt-compile pipeline --------------------===//
//
// import -> the compile pipeline (CompilePipeline.h: canonicalize, training,
// fusions, mixed precision, schedule, bufferize, plan-memory; the same passes
// `memopt-opt --memopt-compile-pipeline` runs) -> EmitProgram -> system
// compiler. The shape follows onnx-mlir's `onnx-mlir` driver (one
// tool, `--EmitONNXIR/--EmitMLIR/--EmitLib` style stop points, the system
// compiler invoked at the end) and TVM's `tvmc compile` (target and output
// chosen by flags).
//
//===----------------------------------------------------------------------===//

#include "memopt/Conversion/CompileDriver.h"

#include "CompileConfig.h"
#include "ParallelBuild.h"
#include "memopt/Conversion/EmitProgram.h"
#include "memopt/Conversion/Fit.h"
#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/Transforms/CompilePipeline.h"
#include "memopt/Import/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <chrono>
#include <cmath>

using namespace mlir;
using namespace mlir::memopt;

namespace {

/// The host compiler's optimization level for a generated program. Its host
/// code is straight-line glue (one runtime call per op, no loops: the kernels
/// live in the runtime libraries, built at -O2, and the fused elementwise
/// kernels go through ptxas at its full optimization whatever this says).
/// GCC's -O2 on one function of thousands of calls is superlinear: GPT-2's
/// training step took 216 s under nvcc -O2 and 23 s under -O1 (6 s with g++
/// -O0) on 2 cores, for the same kernels and no measurable step time.
constexpr const char *kProgramOptLevel = "-O1";

/// The host optimization level of a split program's files (EmitSplit.cpp):
/// functions of about a thousand calls, whose optimization buys nothing (the
/// CUDA program replays a graph after its second run; a host kernel call
/// costs far more than its unoptimized glue), at half the compile: TinyLlama's
/// step took 16.3 s of nvcc CPU at -O0 and 31.7 s at -O1. nvcc's -O is the
/// host code's: the PTX is the same byte for byte, and the host program's
/// numbers too (python/tests/test_split_program.py).
constexpr const char *kSplitProgramOptLevel = "-O0";

/// --split-lines' default where memopt-compile builds the program: GCC at
/// -O1 takes a quarter less time over 1,000-line functions than over
/// 2,000-line ones, and 8% less again over 500-line ones (TinyLlama's
/// training step, docs/scale.md).
constexpr int64_t kDefaultSplitLines = 1000;

/// Writes `contents` to `path`, creating its folder first (`-o out/model`
/// needs no mkdir).
LogicalResult writeFile(StringRef path, StringRef contents,
                        llvm::raw_ostream &errors) {
  std::string message;
  StringRef folder = llvm::sys::path::parent_path(path);
  if (!folder.empty())
    if (std::error_code error = llvm::sys::fs::create_directories(folder)) {
      errors << "memopt-compile: error: cannot create folder '" << folder
             << "': " << error.message() << "\n";
      return failure();
    }
  std::unique_ptr<llvm::ToolOutputFile> file = openOutputFile(path, &message);
  if (!file) {
    errors << "memopt-compile: error: cannot write '" << path
           << "': " << message << "\n";
    return failure();
  }
  file->os() << contents;
  file->keep();
  return success();
}

/// Runs `program` with `arguments`; prints its failure with what it wrote
/// on stderr (kept in a temporary file, so that a caller who collects the
/// errors, such as the Python package, gets the compiler's message too).
LogicalResult runTool(StringRef program, ArrayRef<std::string> arguments,
                      llvm::raw_ostream &log, bool quiet,
                      llvm::raw_ostream &errors) {
  SmallVector<StringRef> argv;
  argv.push_back(program);
  for (const std::string &argument : arguments)
    argv.push_back(argument);
  if (!quiet) {
    log << "  $";
    for (StringRef argument : argv)
      log << " " << argument;
    log << "\n";
  }
  SmallString<128> stderrPath;
  bool captured =
      !llvm::sys::fs::createTemporaryFile("memopt-tool", "txt", stderrPath);
  std::optional<StringRef> redirects[] = {std::nullopt, std::nullopt,
                                          StringRef(stderrPath)};
  std::string message;
  int status = llvm::sys::ExecuteAndWait(
      program, argv, std::nullopt,
      captured ? ArrayRef<std::optional<StringRef>>(redirects)
               : ArrayRef<std::optional<StringRef>>(),
      0, 0, &message);
  if (captured) {
    if (auto output = llvm::MemoryBuffer::getFile(stderrPath))
      if (status != 0 || !quiet)
        (status != 0 ? errors : log) << (*output)->getBuffer();
    llvm::sys::fs::remove(stderrPath);
  }
  if (status != 0) {
    errors << "memopt-compile: error: " << program << " failed"
           << (message.empty() ? "" : ": " + message) << " (exit " << status
           << ")\n";
    return failure();
  }
  return success();
}

SmallVector<std::string> splitList(StringRef list) {
  SmallVector<StringRef> parts;
  list.split(parts, ';', -1, /*KeepEmpty=*/false);
  return llvm::map_to_vector(parts, [](StringRef s) { return s.str(); });
}

/// A runtime library recorded at configure time, found relative to this
/// executable (<bin>/../<path in the build tree>) so a moved build tree still
/// works; the configured path otherwise.
std::string locateRuntimeLibrary(StringRef configured) {
  StringRef relative = configured;
  if (!relative.consume_front(MEMOPT_BUILD_ROOT "/"))
    return configured.str();
  std::string executable = llvm::sys::fs::getMainExecutable(nullptr, nullptr);
  if (executable.empty())
    return configured.str();
  SmallString<256> candidate(
      llvm::sys::path::parent_path(llvm::sys::path::parent_path(executable)));
  llvm::sys::path::append(candidate, relative);
  return llvm::sys::fs::exists(candidate) ? candidate.str().str()
                                          : configured.str();
}

std::string findNvcc() {
  if (llvm::sys::fs::can_execute(MEMOPT_NVCC))
    return MEMOPT_NVCC;
  if (auto path = llvm::sys::findProgramByName("nvcc"))
    return *path;
  return "";
}

/// Checks that nvcc can generate code for `arch` (e.g. sm_90).
LogicalResult checkCudaArch(StringRef arch, StringRef nvcc,
                            llvm::raw_ostream &errors) {
  StringRef digits = arch;
  if (!digits.consume_front("sm_") || digits.empty() ||
      !llvm::isDigit(digits.front())) {
    errors << "memopt-compile: error: --arch '" << arch
           << "' is not a GPU architecture (expected sm_NN, e.g. "
              "sm_90)\n";
    return failure();
  }
  if (nvcc.empty())
    return success();
  SmallString<128> listing;
  if (llvm::sys::fs::createTemporaryFile("memopt-nvcc-arch", "txt", listing))
    return success();
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(listing),
                                          std::nullopt};
  StringRef argv[] = {nvcc, "--list-gpu-code"};
  int status = llvm::sys::ExecuteAndWait(nvcc, argv, std::nullopt, redirects);
  auto buffer = llvm::MemoryBuffer::getFile(listing);
  llvm::sys::fs::remove(listing);
  if (status != 0 || !buffer)
    return success();
  SmallVector<StringRef> codes;
  (*buffer)->getBuffer().split(codes, '\n', -1, false);
  for (StringRef code : codes)
    if (code.trim() == arch)
      return success();
  errors << "memopt-compile: error: nvcc (" << nvcc << ") cannot target --arch "
         << arch << "; it supports: ";
  llvm::interleaveComma(codes, errors,
                        [&](StringRef code) { errors << code.trim(); });
  errors << "\n";
  return failure();
}

/// The command that builds the generated source into an executable, and
/// for a split program the two steps: each file compiled with
/// `compileFlags -c FILE -o OBJECT`, the objects linked with
/// `linkFlags OBJECTS -o OUT libraries`.
struct BuildCommand {
  std::string compiler;
  std::vector<std::string> arguments;
  std::vector<std::string> compileFlags, linkFlags, libraries;
};

/// The runtime libraries to link, in order: the executable's main (or, for
/// a shared library, the C API), driver, backend, common. A shared library
/// takes the whole C API archive: nothing in the program references its
/// exported functions, so the linker would otherwise leave them out.
SmallVector<std::string> runtimeLibraries(const CompileOptions &options) {
  // CompileOptions::runtimeDir holds the same archives under lib/.
  auto locate = [&](StringRef configured) {
    if (options.runtimeDir.empty())
      return locateRuntimeLibrary(configured);
    SmallString<256> path(options.runtimeDir);
    llvm::sys::path::append(path, "lib", llvm::sys::path::filename(configured));
    return path.str().str();
  };
  SmallVector<std::string> libraries = splitList(
      options.target == CompileTarget::Host ? MEMOPT_RUNTIME_HOST_LIBS
                                            : MEMOPT_RUNTIME_CUDA_LIBS);
  for (std::string &library : libraries)
    library = locate(library);
  if (options.emit != EmitKind::Lib || libraries.empty())
    return libraries;
  std::string capi = locate(MEMOPT_RUNTIME_CAPI_LIB);
  if (options.target == CompileTarget::Host) {
    libraries.front() = capi;
    libraries.insert(libraries.begin(), "-Wl,--whole-archive");
    libraries.insert(libraries.begin() + 2, "-Wl,--no-whole-archive");
  } else {
    // nvcc moves -Xlinker options away from the libraries: keep the three
    // together in one option.
    libraries.front() =
        "-Xlinker=--whole-archive," + capi + ",--no-whole-archive";
  }
  return libraries;
}

/// The folder holding memopt/Runtime/*.h for the generated program.
std::string runtimeIncludeDir(const CompileOptions &options) {
  if (options.runtimeDir.empty())
    return MEMOPT_SOURCE_INCLUDE_DIR;
  SmallString<256> path(options.runtimeDir);
  llvm::sys::path::append(path, "include");
  return path.str().str();
}

FailureOr<BuildCommand> getBuildCommand(const CompileOptions &options,
                                        StringRef source, StringRef output,
                                        llvm::raw_ostream &errors) {
  BuildCommand command;
  bool shared = options.emit == EmitKind::Lib;
  std::string include = "-I" + runtimeIncludeDir(options);
  if (options.target == CompileTarget::Host) {
    auto compiler = llvm::sys::findProgramByName(MEMOPT_HOST_CXX);
    if (!compiler) {
      errors << "memopt-compile: error: " MEMOPT_HOST_CXX
                " not found in PATH\n";
      return failure();
    }
    command.compiler = *compiler;
    command.arguments = {"-std=c++17", kProgramOptLevel, source.str(), include,
                         "-o",         output.str()};
    command.compileFlags = {"-std=c++17", kSplitProgramOptLevel, include};
    for (const std::string &flag : splitList(MEMOPT_HOST_SANITIZER_FLAGS)) {
      command.arguments.push_back(flag);
      command.compileFlags.push_back(flag);
      command.linkFlags.push_back(flag);
    }
    if (shared) {
      command.arguments.insert(command.arguments.begin(), {"-shared", "-fPIC"});
      command.compileFlags.push_back("-fPIC");
      command.linkFlags.push_back("-shared");
    }
    for (const std::string &library : runtimeLibraries(options))
      command.libraries.push_back(library);
    command.libraries.push_back("-lpthread");
  } else {
    command.compiler = findNvcc();
    if (command.compiler.empty()) {
      errors << "memopt-compile: error: --target cuda needs nvcc, which "
                "was not found (use --emit source and build on a GPU "
                "machine)\n";
      return failure();
    }
    command.arguments = {
        "-std=c++17", kProgramOptLevel, "-arch=" + options.cudaArch,
        source.str(), include,          "-o",
        output.str()};
    command.compileFlags = {"-std=c++17", kSplitProgramOptLevel,
                            "-arch=" + options.cudaArch, include};
    command.linkFlags = {"-arch=" + options.cudaArch};
    if (shared) {
      command.arguments.insert(command.arguments.begin(),
                               {"-shared", "-Xcompiler", "-fPIC"});
      command.compileFlags.insert(command.compileFlags.end(),
                                  {"-Xcompiler", "-fPIC"});
      command.linkFlags.push_back("-shared");
    }
    SmallVector<std::string> libraries = runtimeLibraries(options);
    if (libraries.empty()) {
      errors << "memopt-compile: error: this build has no CUDA runtime "
                "backend (memopt_runtime_cuda); use --emit source\n";
      return failure();
    }
    command.libraries.assign(libraries.begin(), libraries.end());
    for (StringRef library : {"-lcudart", "-lcublasLt", "-lcudnn"})
      command.libraries.push_back(library.str());
  }
  llvm::append_range(command.arguments, command.libraries);
  for (const std::string &argument : command.arguments)
    if (StringRef(argument).ends_with(".a") &&
        !StringRef(argument).starts_with("-") &&
        !llvm::sys::fs::exists(argument)) {
      errors << "memopt-compile: error: runtime library '" << argument
             << "' is missing; build the runtime targets first\n";
      return failure();
    }
  return command;
}

/// The generated program's file: OUT.cu for the CUDA target (nvcc compiles
/// its generated fused kernels), OUT.cpp for the host.
std::string sourceSuffix(const CompileOptions &options) {
  return options.target == CompileTarget::Cuda ? ".cu" : ".cpp";
}

/// A script that builds OUT.cpp / OUT.cu on a machine without MLIR: it builds
/// the runtime standalone from the source tree and links the program as an
/// executable (OUT) and as a shared library with the C API (OUT.so).
/// A split program's files (`files`: the main file, then its parts) are
/// compiled in parallel (xargs -P, JOBS at once) to objects in a temporary
/// folder, which both links take.
std::string getBuildScript(const CompileOptions &options, StringRef stem,
                           ArrayRef<std::string> files) {
  bool cuda = options.target == CompileTarget::Cuda;
  bool split = files.size() > 1;
  std::string script;
  llvm::raw_string_ostream os(script);
  os << "#!/bin/sh\n"
     << "# Builds " << stem << " from " << stem << sourceSuffix(options);
  if (split)
    os << " and its " << files.size() - 1 << " parts";
  os << " (generated by memopt-compile).\n"
     << "# Usage: MEMOPT_ROOT=<memopt source tree> sh " << stem << ".build.sh\n"
     << "set -e\n"
     << "HERE=$(cd \"$(dirname \"$0\")\" && pwd)\n"
     << "ROOT=${MEMOPT_ROOT:-" << MEMOPT_SOURCE_ROOT << "}\n"
     << "RT=${MEMOPT_RUNTIME_BUILD:-$HERE/memopt-runtime-build}\n"
     << "cmake -S \"$ROOT/lib/Runtime\" -B \"$RT\" -DCMAKE_BUILD_TYPE=Release"
     << (cuda ? " -DMEMOPT_ENABLE_CUDA=ON" : " -DMEMOPT_ENABLE_CUDA=OFF")
     << " >/dev/null\n"
     << "cmake --build \"$RT\" -j8 --target memopt_runtime_main "
     << "memopt_runtime_capi "
     << (cuda ? "memopt_runtime_cuda" : "memopt_runtime_host") << "\n";
  StringRef backend = cuda ? "cuda" : "host";
  StringRef compiler = cuda ? "${NVCC:-nvcc}" : "${CXX:-g++}";
  if (split) {
    os << "OBJ=$(mktemp -d)\ntrap 'rm -rf \"$OBJ\"' EXIT\nprintf '%s\\n'";
    for (const std::string &file : files)
      os << " '" << file << "'";
    os << " |\n  xargs -P \"${JOBS:-$(nproc)}\" -I{} " << compiler
       << " -std=c++17 " << kSplitProgramOptLevel;
    if (cuda)
      os << " -arch=" << options.cudaArch;
    os << (cuda ? " -Xcompiler -fPIC" : " -fPIC")
       << " -I\"$ROOT/include\" -c \"$HERE/{}\" -o \"$OBJ/{}.o\"\n";
  }
  for (bool shared : {false, true}) {
    StringRef first = shared ? "capi" : "main";
    os << compiler;
    if (!split)
      os << " -std=c++17 " << kProgramOptLevel;
    if (cuda)
      os << " -arch=" << options.cudaArch
         << (!shared ? ""
             : split ? " -shared"
                     : " -shared -Xcompiler -fPIC");
    else
      os << (!shared ? "" : split ? " -shared" : " -shared -fPIC");
    // The C API archive whole (see runtimeLibraries); nvcc keeps the three
    // together only inside one -Xlinker option.
    StringRef wholeArchive =
        cuda ? "-Xlinker=--whole-archive," : "-Wl,--whole-archive ";
    StringRef noWholeArchive =
        cuda ? ",--no-whole-archive" : " -Wl,--no-whole-archive";
    if (split)
      for (const std::string &file : files)
        os << " \"$OBJ/" << file << ".o\"";
    else
      os << " \"$HERE/" << stem << sourceSuffix(options)
         << "\" -I\"$ROOT/include\"";
    os << " -o \"$HERE/" << stem << (shared ? ".so" : "") << "\" \\\n  "
       << (shared ? wholeArchive : "") << "\"$RT/libmemopt_runtime_" << first
       << ".a\"" << (shared ? noWholeArchive : "")
       << " \"$RT/libmemopt_runtime_driver.a\" "
       << "\"$RT/libmemopt_runtime_" << backend << ".a\" "
       << "\"$RT/libmemopt_runtime_common.a\" \\\n  "
       << (cuda ? "-lcudart -lcublasLt -lcudnn" : "-lpthread") << "\n";
  }
  os << "echo \"built $HERE/" << stem << " and $HERE/" << stem
     << ".so (weights: $HERE/" << stem << ".weights)\"\n";
  return script;
}

/// Removes OUT.partK files beyond `parts` (and OUT.parts.h when there are
/// none) that an earlier, larger split of the same OUT left.
void removeStaleParts(const CompileOptions &options, StringRef headerPath,
                      size_t parts) {
  if (parts == 0)
    llvm::sys::fs::remove(headerPath);
  for (size_t part = parts + 1;; ++part) {
    std::string path = options.outputPath + ".part" + std::to_string(part) +
                       sourceSuffix(options);
    if (!llvm::sys::fs::exists(path))
      return;
    llvm::sys::fs::remove(path);
  }
}

/// Builds a split program: its files compiled in parallel (--jobs) to
/// objects in a temporary folder, then linked; the folder is removed
/// whatever happens. Prints the compile's wall and summed CPU time (each
/// file's under --timing, which also times each file in MLIR's report).
LogicalResult buildSplitProgram(const CompileOptions &options,
                                const BuildCommand &command,
                                ArrayRef<std::string> sources,
                                StringRef binaryPath, TimingScope &buildTimer,
                                llvm::raw_ostream &log,
                                llvm::raw_ostream &errors) {
  SmallString<128> folder;
  if (std::error_code error =
          llvm::sys::fs::createUniqueDirectory("memopt-objects", folder)) {
    errors << "memopt-compile: error: cannot create a temporary folder: "
           << error.message() << "\n";
    return failure();
  }
  std::vector<std::string> objects;
  llvm::scope_exit removeObjects([&] {
    for (const std::string &object : objects)
      llvm::sys::fs::remove(object);
    llvm::sys::fs::remove(folder);
  });
  std::vector<CompileJob> jobs;
  for (const std::string &source : sources) {
    SmallString<128> object(folder);
    llvm::sys::path::append(object, llvm::sys::path::filename(source) + ".o");
    objects.push_back(object.str().str());
    CompileJob job;
    job.file = source;
    job.arguments = command.compileFlags;
    job.arguments.insert(job.arguments.end(),
                         {"-c", source, "-o", objects.back()});
    jobs.push_back(std::move(job));
  }
  unsigned parallel =
      options.jobs > 0 ? unsigned(options.jobs) : getDefaultCompileJobs();
  auto seconds = [](std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };
  auto start = std::chrono::steady_clock::now();
  TimingScope compileTimer =
      buildTimer.nest("compile " + std::to_string(jobs.size()) + " files, " +
                      std::to_string(parallel) + " at once");
  std::vector<CompileJobTime> times;
  if (failed(runCompileJobs(command.compiler, jobs, parallel, log,
                            options.quiet, errors, compileTimer, times)))
    return failure();
  compileTimer.stop();
  double compileWall = seconds(start);
  std::vector<std::string> link = command.linkFlags;
  llvm::append_range(link, objects);
  link.insert(link.end(), {"-o", binaryPath.str()});
  llvm::append_range(link, command.libraries);
  start = std::chrono::steady_clock::now();
  TimingScope linkTimer = buildTimer.nest("link");
  if (failed(runTool(command.compiler, link, log, options.quiet, errors)))
    return failure();
  linkTimer.stop();
  double linkWall = seconds(start);
  if (options.quiet)
    return success();
  double cpu = 0;
  uint64_t peak = 0;
  for (const CompileJobTime &time : times) {
    cpu += time.cpuSeconds;
    peak = std::max(peak, time.peakBytes);
  }
  log << llvm::formatv("[build] {0} files, {1} at once: compile {2:F1} s wall, "
                       "{3:F1} s CPU (largest peak RSS {4:F2} GiB); link "
                       "{5:F1} s\n",
                       times.size(), parallel, compileWall, cpu,
                       double(peak) / (1 << 30), linkWall);
  if (options.timing)
    for (const CompileJobTime &time : times)
      log << llvm::formatv("[build]   {0}: {1:F1} s wall, {2:F1} s CPU, peak "
                           "RSS {3:F2} GiB\n",
                           time.file, time.wallSeconds, time.cpuSeconds,
                           double(time.peakBytes) / (1 << 30));
  return success();
}

FailureOr<OwningOpRef<ModuleOp>> loadModule(const CompileOptions &options,
                                            MLIRContext &context,
                                            llvm::raw_ostream &errors) {
  if (StringRef(options.inputPath).ends_with(".mlir")) {
    OwningOpRef<ModuleOp> module =
        parseSourceFile<ModuleOp>(options.inputPath, &context);
    if (!module)
      return failure();
    return module;
  }
  ImportOptions importOptions;
  importOptions.replaceFixedDims = options.replaceFixedInputDims;
  importOptions.foldLimitElements = options.foldLimitElements;
  for (const std::string &spec : options.inputShapes) {
    std::string message;
    if (failed(parseInputShapeSpec(spec, importOptions, message))) {
      errors << "memopt-compile: error: --input-shape '" << spec
             << "': " << message << "\n";
      return failure();
    }
  }
  return importOnnxModel(options.inputPath, context, importOptions);
}

size_t countOps(ModuleOp module) {
  size_t count = 0;
  module.walk([&](Operation *op) {
    if (op->getDialect() && op->getDialect()->getNamespace() == "memopt")
      ++count;
  });
  return count;
}

/// Weight blobs larger than this are left out of the printed IR: a model's
/// weights stay in its ONNX file, and the IR names them by handle.
constexpr int64_t kPrintedBlobLimitBytes = int64_t(1) << 20;

/// Prints `module` (the last use of it: the large weights are detached
/// first). A weight over kPrintedBlobLimitBytes is printed as a handle
/// `dense_resource<KEY_elided>` with no entry in the resource section, so the
/// IR stays small and its printing never renders the weights as hex; such a
/// module fails to lower with a message that says so (WeightImage.cpp).
std::string printModule(ModuleOp module,
                        const std::function<void(const Twine &)> &say) {
  int64_t elided = 0, elidedBytes = 0;
  auto &blobs =
      DenseResourceElementsHandle::getManagerInterface(module.getContext());
  // Also where a handle is nested (the source of a #memopt.converted weight).
  AttrTypeReplacer replacer;
  replacer.addReplacement(
      [&](DenseResourceElementsAttr resource) -> std::optional<Attribute> {
        AsmResourceBlob *blob = resource.getRawHandle().getBlob();
        if (!blob || int64_t(blob->getData().size()) <= kPrintedBlobLimitBytes)
          return std::nullopt;
        ++elided;
        elidedBytes += int64_t(blob->getData().size());
        DenseResourceElementsHandle handle =
            blobs.insert((resource.getRawHandle().getKey() + "_elided").str());
        return DenseResourceElementsAttr::get(resource.getType(), handle);
      });
  replacer.recursivelyReplaceElementsIn(module, /*replaceAttrs=*/true,
                                        /*replaceLocs=*/false,
                                        /*replaceTypes=*/false);
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  if (elided)
    say("[emit] " + Twine(elided) + " weights (" + Twine(elidedBytes) +
        " bytes) of more than " + Twine(kPrintedBlobLimitBytes) +
        " bytes each are named, not printed: this IR cannot be lowered on "
        "its own (compile the ONNX model)");
  return text;
}

/// The pipeline options memopt-compile's flags stand for: the table's
/// (CompileOptions.def, assign) and the driver's stop point and reports.
void setPipelineOptions(const CompileOptions &options,
                        CompilePipelineOptions &pipeline) {
  pipeline.assign(options);
  pipeline.stopAfter = options.emit == EmitKind::Mlir ? "graph" : "plan";
  pipeline.reportSvg = options.reportSvgPath;
  pipeline.report = !options.quiet;
}

} // namespace

int mlir::memopt::runCompile(const CompileOptions &options,
                             llvm::raw_ostream &log) {
  return runCompile(options, log, llvm::errs());
}

FailureOr<OwningOpRef<ModuleOp>>
mlir::memopt::planModule(const CompileOptions &options, MLIRContext &context,
                         llvm::raw_ostream &errors) {
  FailureOr<OwningOpRef<ModuleOp>> loaded =
      loadModule(options, context, errors);
  if (failed(loaded))
    return failure();
  CompileOptions quiet = options;
  quiet.quiet = true;
  quiet.reportPath.clear();
  quiet.reportSvgPath.clear();
  quiet.emit = EmitKind::Plan;
  CompilePipelineOptions pipelineOptions;
  setPipelineOptions(quiet, pipelineOptions);
  std::string invalid;
  if (failed(pipelineOptions.verify(invalid))) {
    errors << "memopt-compile: error: " << invalid << "\n";
    return failure();
  }
  PassManager pm(&context);
  buildCompilePipeline(pm, pipelineOptions);
  if (failed(pm.run(loaded->get())))
    return failure();
  return std::move(*loaded);
}

int mlir::memopt::runCompile(const CompileOptions &options,
                             llvm::raw_ostream &log,
                             llvm::raw_ostream &errors) {
  if (!options.fit.empty())
    return runFit(options, log, errors);
  // Prints one clear error and returns the exit code.
  auto fail = [&](const Twine &message) {
    errors << "memopt-compile: error: " << message << "\n";
    return 1;
  };
  if (options.globalBatch != 0 || !options.fitPrecisions.empty() ||
      !options.fitOffload.empty() || !options.fitHostMemory.empty())
    return fail("--global-batch, --fit-precisions, --fit-offload and "
                "--fit-host-memory need --fit BYTES");
  // The memopt-mixed-precision setting: f16 / bf16 storage, or tf32 (f32
  // storage, TF32 math in contractions).
  StringRef lowType = options.precision == CompilePrecision::FP16   ? "f16"
                      : options.precision == CompilePrecision::BF16 ? "bf16"
                      : options.precision == CompilePrecision::TF32 ? "tf32"
                                                                    : "";
  StringRef precisionFlag = options.precision == CompilePrecision::FP16 ? "fp16"
                            : options.precision == CompilePrecision::BF16
                                ? "bf16"
                                : "tf32";
  if (!lowType.empty() && options.lowerOnly)
    return fail(Twine("--precision ") + precisionFlag +
                " needs the graph before planning; --lower-only input is "
                "already planned (compile the model with --precision "
                "instead)");
  if (options.outputPath.empty())
    return fail("no output given (-o OUT)");
  if (options.splitLines < -1 || options.splitPartLines < 0 || options.jobs < 0)
    return fail("--split-lines, --split-part-lines and --jobs take a number "
                "at least 0 (--split-lines -1: the default)");
  if (options.layout != "auto" && options.layout != "nchw" &&
      options.layout != "nhwc")
    return fail("--layout '" + options.layout + "' is not auto, nchw or nhwc");
  if (options.target == CompileTarget::Cuda &&
      (options.emit == EmitKind::Exe || options.emit == EmitKind::Lib ||
       options.emit == EmitKind::Source) &&
      failed(checkCudaArch(options.cudaArch, findNvcc(), errors)))
    return 1;

  DialectRegistry registry;
  registerImportDialects(registry);
  registry.insert<func::FuncDialect, MemOptDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // One message per error: the op's location names the ONNX node already.
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context, errors);

  auto say = [&](const Twine &line) {
    if (!options.quiet)
      log << line << "\n";
  };
  // --timing: MLIR's timing manager, one scope per phase; the pipeline's
  // passes nest under theirs. The report prints when `timing` goes away.
  DefaultTimingManager timing;
  timing.setEnabled(options.timing);
  TimingScope rootTimer = timing.getRootScope();

  TimingScope importTimer = rootTimer.nest("import");
  FailureOr<OwningOpRef<ModuleOp>> loaded =
      loadModule(options, context, errors);
  importTimer.stop();
  if (failed(loaded))
    return 1;
  ModuleOp module = loaded->get();
  say("[import] " + options.inputPath + ": " + Twine(countOps(module)) +
      " memopt ops");

  const TrainingOptions &training = options.training;
  if (training.enabled && options.lowerOnly)
    return fail("--train needs the model, not planned IR (--lower-only)");
  if (training.dataParallelGiven && training.dataParallel < 1)
    return fail("--data-parallel " + Twine(training.dataParallel) +
                ": the step needs at least 1 rank");
  if (!training.shard.empty() && training.shard != "none" &&
      training.shard != "optimizer" && training.shard != "gradients" &&
      training.shard != "parameters")
    return fail("--shard '" + training.shard +
                "' is not none, optimizer, gradients or parameters");
  if (!training.shard.empty() && !training.dataParallelGiven)
    return fail("--shard " + training.shard +
                " needs --data-parallel N (the ranks the optimizer state is "
                "sharded over)");
  if (training.dataParallelGiven && !training.enabled)
    return fail("--data-parallel needs --train (it averages a training "
                "step's gradients over the ranks)");
  if (!training.reduceDtype.empty() && training.reduceDtype != "f32" &&
      training.reduceDtype != "low")
    return fail("--reduce-dtype '" + training.reduceDtype +
                "' is not f32 or low");
  if (!training.reduceDtype.empty() && !training.dataParallelGiven)
    return fail("--reduce-dtype " + training.reduceDtype +
                " needs --data-parallel N (the type the ranks reduce their "
                "gradients in)");
  if (!(training.bucketMib >= 0))
    return fail(
        "--bucket-mib must be at least 0 (0: no overlap), got " +
        llvm::formatv("{0}", llvm::format("%g", training.bucketMib)).str());
  if (!(training.gatherMib >= 0))
    return fail(
        "--gather-mib must be at least 0 (0: no prefetch), got " +
        llvm::formatv("{0}", llvm::format("%g", training.gatherMib)).str());
  if (training.reduceDtype == "low" && lowType != "f16" && lowType != "bf16")
    return fail("--reduce-dtype low needs --precision fp16 or bf16 (the "
                "gradients are f32 otherwise)");
  std::string shardMode = training.shard.empty() ? "none" : training.shard;
  if (training.reduceDtype == "low" && training.accumulate > 1 &&
      shardMode != "gradients" && shardMode != "parameters")
    return fail("--reduce-dtype low cannot reduce the f32 gradient "
                "accumulator of shard " +
                shardMode + " (--accumulate " + Twine(training.accumulate) +
                "): use --reduce-dtype f32 or --shard gradients");
  if (!options.lowerOnly) {
    // One pipeline, the one `memopt-opt --memopt-compile-pipeline` runs;
    // the phase lines come from its instrumentation.
    CompilePipelineOptions pipelineOptions;
    setPipelineOptions(options, pipelineOptions);
    std::string invalid;
    if (failed(pipelineOptions.verify(invalid)))
      return fail(invalid);
    PassManager pm(&context);
    buildCompilePipeline(pm, pipelineOptions);
    TimingScope pipelineTimer = rootTimer.nest("pipeline");
    pm.enableTiming(pipelineTimer);
    auto phaseLog =
        std::make_unique<CompilePhaseLog>(pipelineOptions, log, options.quiet);
    CompilePhaseLog &phases = *phaseLog;
    pm.addInstrumentation(std::move(phaseLog));
    if (failed(pm.run(module)))
      return phases.getFailureMessage().empty()
                 ? 1
                 : fail(phases.getFailureMessage());
    if (options.emit == EmitKind::Mlir) {
      if (failed(
              writeFile(options.outputPath, printModule(module, say), errors)))
        return 1;
      say("[emit] graph IR: " + options.outputPath);
      return 0;
    }
  }

  func::FuncOp function = getProgramFunction(module);
  if (!function)
    return 1;
  if (options.noPlan) {
    if (failed(assignNaiveOffsets(function, /*alignment=*/256)))
      return 1;
    auto arena = function->getAttrOfType<IntegerAttr>("memopt.arena_size");
    if (options.memoryBudget > 0 && arena.getInt() > options.memoryBudget)
      return fail("--no-plan needs an arena of " + Twine(arena.getInt()) +
                  " bytes, above --memory-budget " +
                  Twine(options.memoryBudget));
    say("[no-plan] every tensor in its own slot: arena " +
        Twine(arena.getInt()) + " bytes");
  }
  if (options.emit == EmitKind::Plan || options.emit == EmitKind::Mlir) {
    if (failed(writeFile(options.outputPath, printModule(module, say), errors)))
      return 1;
    say("[emit] planned IR: " + options.outputPath);
    return 0;
  }

  TimingScope emitTimer = rootTimer.nest("emit (source, weights)");
  std::string stem = llvm::sys::path::filename(options.outputPath).str();
  EmitProgramOptions emitOptions;
  emitOptions.programName = llvm::sys::path::stem(options.inputPath).str();
  // Split where memopt-compile builds the program itself: --emit source's
  // users (the GPU benchmarks) take OUT.cu alone unless they ask for parts.
  emitOptions.splitLines =
      options.splitLines >= 0
          ? options.splitLines
          : (options.emit == EmitKind::Source ? 0 : kDefaultSplitLines);
  emitOptions.partLines = options.splitPartLines;
  emitOptions.partsHeaderName = stem + ".parts.h";
  FailureOr<EmittedProgram> program = emitProgram(function, emitOptions);
  if (failed(program))
    return 1;

  std::string sourcePath = options.outputPath + sourceSuffix(options);
  // A split program (EmitSplit.cpp): OUT.parts.h and OUT.part1.cu, ...
  std::string headerPath = options.outputPath + ".parts.h";
  std::vector<std::string> partPaths;
  for (size_t part = 1; part <= program->parts.size(); ++part)
    partPaths.push_back(options.outputPath + ".part" + std::to_string(part) +
                        sourceSuffix(options));
  std::string weightsPath = options.outputPath + ".weights";
  StringRef outputFolder = llvm::sys::path::parent_path(options.outputPath);
  if (!outputFolder.empty())
    if (std::error_code error = llvm::sys::fs::create_directories(outputFolder))
      return fail("cannot create folder '" + outputFolder +
                  "': " + error.message());
  // The training template first, then the weights: a failure of either
  // leaves nothing half-written.
  std::string templatePath;
  if (training.enabled && !StringRef(options.inputPath).ends_with(".mlir")) {
    // The model without its trained initializers (parameters and updated
    // running statistics): the executable's --save appends their values
    // (docs/training.md).
    std::vector<std::string> trained;
    function.walk([&](VariableOp variable) {
      if (variable.getRole() == "parameter" ||
          variable.getRole() == "statistic")
        trained.push_back(variable.getName().str());
    });
    templatePath = options.outputPath + ".onnx-template";
    if (failed(writeTrainingTemplate(options.inputPath, trained, templatePath,
                                     context)))
      return 1;
    say("[train] " + templatePath + " (the model without its " +
        Twine(trained.size()) + " trained initializers, for --save)");
  }

  // A value that cannot be read fails before the source is written.
  auto writeSources = [&]() {
    if (failed(writeFile(sourcePath, program->source, errors)))
      return failure();
    if (program->parts.empty())
      return success();
    if (failed(writeFile(headerPath, program->partsHeader, errors)))
      return failure();
    for (auto [path, part] : llvm::zip_equal(partPaths, program->parts))
      if (failed(writeFile(path, part, errors)))
        return failure();
    return success();
  };
  if (failed(writeWeightImage(program->weights, weightsPath)) ||
      failed(writeSources())) {
    if (!templatePath.empty())
      llvm::sys::fs::remove(templatePath);
    llvm::sys::fs::remove(weightsPath);
    llvm::sys::fs::remove(sourcePath);
    llvm::sys::fs::remove(headerPath);
    for (const std::string &path : partPaths)
      llvm::sys::fs::remove(path);
    return 1;
  }
  removeStaleParts(options, headerPath, partPaths.size());
  emitTimer.stop();
  if (partPaths.empty())
    say("[lower] " + sourcePath + ", " + weightsPath + " (" +
        Twine(program->weights.size) + " weight bytes)");
  else
    say("[lower] " + sourcePath + " with " + Twine(partPaths.size()) +
        (partPaths.size() == 1 ? " part (" : " parts (") + stem + ".part1" +
        sourceSuffix(options) + (partPaths.size() == 1 ? "" : " ...") +
        " and " + stem + ".parts.h: --split-lines " +
        Twine(emitOptions.splitLines) + "), " + weightsPath + " (" +
        Twine(program->weights.size) + " weight bytes)");
  // The files the compiler takes: the main file, then the parts.
  std::vector<std::string> sources = {sourcePath};
  llvm::append_range(sources, partPaths);
  if (options.emit == EmitKind::Source) {
    std::string scriptPath = options.outputPath + ".build.sh";
    std::vector<std::string> files;
    for (const std::string &source : sources)
      files.push_back(llvm::sys::path::filename(source).str());
    if (failed(writeFile(scriptPath, getBuildScript(options, stem, files),
                         errors)))
      return 1;
    say("[emit] source: " + sourcePath + " (build with sh " + scriptPath + ")");
    return 0;
  }

  bool shared = options.emit == EmitKind::Lib;
  std::string binaryPath = options.outputPath + (shared ? ".so" : "");
  FailureOr<BuildCommand> command =
      getBuildCommand(options, sourcePath, binaryPath, errors);
  if (failed(command))
    return 1;
  say(Twine("[build] ") +
      (options.target == CompileTarget::Host ? "host" : "cuda") +
      (shared ? " shared library " : " executable ") + binaryPath);
  TimingScope buildTimer = rootTimer.nest("build (C++ / CUDA compiler)");
  if (partPaths.empty()
          ? failed(runTool(command->compiler, command->arguments, log,
                           options.quiet, errors))
          : failed(buildSplitProgram(options, *command, sources, binaryPath,
                                     buildTimer, log, errors)))
    return 1;
  if (shared)
    say("[done] load " + binaryPath + " and call memopt_model_create(\"" +
        weightsPath + "\", 0, ...) (include/memopt/Runtime/memopt_c_api.h)");
  else
    say("[done] run: " + options.outputPath + " --weights " + weightsPath +
        " --input NAME=FILE.npy --output-dir DIR");
  return 0;
}
