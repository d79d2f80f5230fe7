//===- CompilerModule.cpp - memopt._compiler: the compile driver ----------===//
//
// Binds the library behind memopt-compile (CompileDriver.h) to Python:
// CompileOptions and TrainingOptions field by field, runCompile with its
// phase log and its error messages caught in strings (the GIL released
// while it runs), and the driver's own parsers for sizes and precisions, so
// that Python accepts and refuses exactly what the command line does.
// memopt.compile (python/memopt/_compile.py) fills the options and raises
// memopt.CompileError with the collected messages.
//
// Shaped after TVM's Python driver (tvmc's compile is a thin call into the
// C++ build with a target string) and onnx-mlir's PyCompile (compile a
// model file to a shared library, return its path, raise on the compiler's
// message). Different: nothing is parsed or re-implemented in Python.
//
//===----------------------------------------------------------------------===//

#include "Errors.h"
#include "memopt/Conversion/CompileDriver.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "llvm/Support/raw_ostream.h"

#include <string>
#include <tuple>

namespace nb = nanobind;
using namespace mlir::memopt;
using memopt::python::raise;

NB_MODULE(_compiler, m) {
  m.doc() = "memopt's compile driver (internal: use memopt.compile).";

  nb::enum_<CompileTarget>(m, "Target")
      .value("host", CompileTarget::Host)
      .value("cuda", CompileTarget::Cuda);
  nb::enum_<CompilePrecision>(m, "Precision")
      .value("fp32", CompilePrecision::FP32)
      .value("fp16", CompilePrecision::FP16)
      .value("bf16", CompilePrecision::BF16)
      .value("tf32", CompilePrecision::TF32);
  nb::enum_<EmitKind>(m, "Emit")
      .value("mlir", EmitKind::Mlir)
      .value("plan", EmitKind::Plan)
      .value("source", EmitKind::Source)
      .value("exe", EmitKind::Exe)
      .value("lib", EmitKind::Lib);

  nb::class_<TrainingOptions>(m, "TrainingOptions",
                              "memopt-compile --train's options.")
      .def(nb::init<>())
      .def_rw("enabled", &TrainingOptions::enabled)
      .def_rw("loss", &TrainingOptions::loss)
      .def_rw("loss_output", &TrainingOptions::lossOutput)
      .def_rw("ignore_index", &TrainingOptions::ignoreIndex)
      .def_rw("fuse_head", &TrainingOptions::fuseHead)
      .def_rw("optimizer", &TrainingOptions::optimizer)
      .def_rw("learning_rate", &TrainingOptions::learningRate)
      .def_rw("momentum", &TrainingOptions::momentum)
      .def_rw("weight_decay", &TrainingOptions::weightDecay)
      .def_rw("beta1", &TrainingOptions::beta1)
      .def_rw("beta2", &TrainingOptions::beta2)
      .def_rw("eps", &TrainingOptions::eps)
      .def_rw("accumulate", &TrainingOptions::accumulate)
      .def_rw("batch_statistics", &TrainingOptions::batchStatistics)
      .def_rw("freeze", &TrainingOptions::freeze)
      .def_rw("train_params", &TrainingOptions::trainParams)
      .def_rw("loss_scale", &TrainingOptions::lossScale)
      .def_rw("data_parallel", &TrainingOptions::dataParallel)
      .def_rw("data_parallel_given", &TrainingOptions::dataParallelGiven)
      .def_rw("shard", &TrainingOptions::shard)
      .def_rw("reduce_dtype", &TrainingOptions::reduceDtype);

  nb::class_<CompileOptions>(m, "CompileOptions",
                             "memopt-compile's options (CompileDriver.h).")
      .def(nb::init<>())
      .def_rw("input_path", &CompileOptions::inputPath)
      .def_rw("output_path", &CompileOptions::outputPath)
      .def_rw("target", &CompileOptions::target)
      .def_rw("precision", &CompileOptions::precision)
      .def_rw("memory_budget", &CompileOptions::memoryBudget)
      .def_rw("remat_allow", &CompileOptions::rematAllow)
      .def_rw("remat_time_limit", &CompileOptions::rematTimeLimit)
      .def_rw("remat_max_computations", &CompileOptions::rematMaxComputations)
      .def_rw("remat_kernel_times", &CompileOptions::rematKernelTimes)
      .def_rw("layout", &CompileOptions::layout)
      .def_rw("input_shapes", &CompileOptions::inputShapes)
      .def_rw("emit", &CompileOptions::emit)
      .def_rw("report_path", &CompileOptions::reportPath)
      .def_rw("report_svg_path", &CompileOptions::reportSvgPath)
      .def_rw("cuda_arch", &CompileOptions::cudaArch)
      .def_rw("runtime_dir", &CompileOptions::runtimeDir)
      .def_rw("no_plan", &CompileOptions::noPlan)
      .def_rw("outputs_in_arena", &CompileOptions::outputsInArena)
      .def_rw("fuse_attention", &CompileOptions::fuseAttention)
      .def_rw("fuse_epilogues", &CompileOptions::fuseEpilogues)
      .def_rw("fuse_elementwise", &CompileOptions::fuseElementwise)
      .def_rw("quiet", &CompileOptions::quiet)
      .def_rw("timing", &CompileOptions::timing)
      .def_rw("training", &CompileOptions::training);

  m.def(
      "run_compile",
      [](const CompileOptions &options) {
        std::string log, errors;
        int status;
        {
          nb::gil_scoped_release release;
          llvm::raw_string_ostream logStream(log), errorStream(errors);
          status = runCompile(options, logStream, errorStream);
        }
        return std::make_tuple(status, log, errors);
      },
      nb::arg("options"),
      "Runs memopt-compile's pipeline. Returns (status, log, errors): "
      "status 0 on success, else the messages are in `errors`.");

  m.def(
      "parse_byte_size",
      [](const std::string &text) {
        mlir::FailureOr<int64_t> bytes = parseByteSize(text);
        if (mlir::failed(bytes) || *bytes <= 0)
          raise("InputError", "memory_budget '" + text +
                                  "' is not a size (e.g. 2GiB, 512MiB, "
                                  "4096)");
        return *bytes;
      },
      nb::arg("text"), "Bytes in '2GiB', '512MiB', '1.5GB' or '4096'.");

  m.def(
      "parse_precision",
      [](const std::string &name) {
        mlir::FailureOr<CompilePrecision> precision =
            parseCompilePrecision(name);
        if (mlir::failed(precision))
          raise("InputError", "precision '" + name +
                                  "' is not one this memopt knows (" +
                                  getCompilePrecisionNames().str() + ")");
        return *precision;
      },
      nb::arg("name"), "The Precision memopt-compile --precision NAME means.");
}
