//===- CompilerModule.cpp - memopt._compiler: the compile driver ----------===//
//
// Binds the library behind memopt-compile (CompileDriver.h) to Python:
// CompileOptions and TrainingOptions field by field from the option table
// (CompileOptions.def, with the table itself as `options()`), runCompile with
// its phase log and its error messages caught in strings (the GIL released
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

#include <cctype>
#include <deque>
#include <string>
#include <tuple>

namespace nb = nanobind;
using namespace mlir::memopt;
using memopt::python::raise;

namespace {

/// memoryBudget -> memory_budget; the names outlive the module (nanobind
/// keeps the pointers).
const char *snakeCase(llvm::StringRef name) {
  static std::deque<std::string> names;
  std::string text;
  for (char c : name) {
    if (std::isupper(static_cast<unsigned char>(c))) {
      text += '_';
      text += char(std::tolower(static_cast<unsigned char>(c)));
    } else {
      text += c;
    }
  }
  return names.emplace_back(std::move(text)).c_str();
}

template <typename E> void bindEnum(nb::module_ &m, const char *name) {
  nb::enum_<E> type(m, name);
  for (const EnumValueName<E> &entry : getEnumValueNames<E>())
    type.value(entry.name, entry.value, entry.help);
}

} // namespace

NB_MODULE(_compiler, m) {
  m.doc() = "memopt's compile driver (internal: use memopt.compile).";

  // The enums, their values named as on the command line.
  bindEnum<CompileTarget>(m, "Target");
  bindEnum<CompilePrecision>(m, "Precision");
  bindEnum<EmitKind>(m, "Emit");

  // The options' fields, one per line of CompileOptions.def, named in
  // snake_case (memoryBudget -> memory_budget).
  nb::class_<TrainingOptions> training(m, "TrainingOptions",
                                       "memopt-compile --train's options.");
  training.def(nb::init<>())
      .def_rw("data_parallel_given", &TrainingOptions::dataParallelGiven);
  nb::class_<CompileOptions> compile(
      m, "CompileOptions", "memopt-compile's options (CompileOptions.def).");
  compile.def(nb::init<>())
      .def_rw("runtime_dir", &CompileOptions::runtimeDir)
      .def_rw("training", &CompileOptions::training);
#define MEMOPT_OPTION(STRUCT, FIELD, TYPE, DEFAULT, KIND, FLAG, PIPELINE,      \
                      PYTHON, CATEGORY, META, SHOWN, HELP)                     \
  MEMOPT_PYTHON_CLASS_##STRUCT.def_rw(snakeCase(#FIELD),                       \
                                      &STRUCT##Options::FIELD, HELP);
#define MEMOPT_PYTHON_CLASS_Compile compile
#define MEMOPT_PYTHON_CLASS_Training training
#include "memopt/Conversion/CompileOptions.def"
#undef MEMOPT_PYTHON_CLASS_Compile
#undef MEMOPT_PYTHON_CLASS_Training

  m.def(
      "options",
      []() {
        nb::list list;
        for (const CompileOptionInfo &info : getCompileOptionInfos()) {
          nb::dict entry;
          entry["struct"] = info.structName.str();
          entry["field"] = snakeCase(info.field);
          entry["type"] = info.type.str();
          entry["kind"] = getOptionKindName(info.kind).str();
          entry["flag"] = info.flag.str();
          entry["pipeline"] = info.pipeline.str();
          entry["python"] = info.python.str();
          entry["category"] = getOptionCategoryTitle(info.category).str();
          entry["meta"] = info.meta.str();
          entry["default"] = info.shownDefault;
          entry["help"] = info.help.str();
          entry["values"] = info.enumNames;
          list.append(entry);
        }
        return list;
      },
      "Every option of CompileOptions.def: struct, field (the Python "
      "module's), type, kind, flag (memopt-compile's), pipeline "
      "(--memopt-compile-pipeline's), python (memopt.compile's or "
      "memopt.Training's keyword), category, meta, default, help, values.");

  m.def(
      "options_markdown",
      []() {
        std::string text;
        llvm::raw_string_ostream os(text);
        printCompileOptionsMarkdown(os);
        return text;
      },
      "docs/cli.md's flag reference, as memopt-compile "
      "--print-options-markdown prints it.");

  m.def(
      "set_option",
      [](CompileOptions &options, const std::string &name,
         const std::string &text) {
        std::string message;
        if (mlir::failed(setCompileOption(options, name, text, message)))
          raise("InputError", "options: " + message);
      },
      nb::arg("options"), nb::arg("name"), nb::arg("text"),
      "Sets an option by its flag, pipeline or Python name from text as "
      "the command line spells it (lists comma-separated).");

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
                                  getCompilePrecisionNames() + ")");
        return *precision;
      },
      nb::arg("name"), "The Precision memopt-compile --precision NAME means.");
}
