//===- CompileOptions.h - memopt-compile's options struct -------*- C++ -*-===//
//
// The options of a compile: CompileOptions (and TrainingOptions, its
// `--train` part), whose fields are declared by CompileOptions.def, the
// one table every binding is produced from (the command line, the pass
// pipeline's options, the Python module, docs/cli.md). The option list
// (getCompileOptionInfos) and setCompileOption give the table to code that
// works by name: the docs generator, the Python module, tests.
//
// After IREE's OptionsBinder (compiler/Utils/OptionUtils.h: one struct,
// bound to flags and used by the API as is); the table (not one bind call
// per binding) is LLVM's .def idiom.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_CONVERSION_COMPILEOPTIONS_H
#define MEMOPT_CONVERSION_COMPILEOPTIONS_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace mlir::memopt {

// The enums' names are MEMOPT_ENUM_VALUE lines of CompileOptions.def.
enum class CompileTarget { Host, Cuda };
enum class CompilePrecision { FP32, TF32, FP16, BF16 };
enum class EmitKind { Mlir, Plan, Source, Exe, Lib };

/// How the command line spells an option (CompileOptions.def, KIND).
enum class OptionKind {
  Value,
  Enum,
  Negated,
  OnOff,
  Bytes,
  List,
  Repeated,
  Positional,
  Required
};

/// The --help groups and docs/cli.md's sections, in their order.
enum class OptionCategory {
  Import,
  Compile,
  Precision,
  Layout,
  Training,
  MixedPrecision,
  DataParallel,
  Budget
};

/// What `--train` compiles: one training step (loss, gradients, update).
struct TrainingOptions {
#define MEMOPT_OPTION(STRUCT, FIELD, TYPE, DEFAULT, KIND, FLAG, PIPELINE,      \
                      PYTHON, CATEGORY, META, SHOWN, HELP)                     \
  MEMOPT_OPTION_FIELD_##STRUCT(FIELD, TYPE, DEFAULT)
#define MEMOPT_OPTION_FIELD_Training(FIELD, TYPE, DEFAULT) TYPE FIELD = DEFAULT;
#define MEMOPT_OPTION_FIELD_Compile(FIELD, TYPE, DEFAULT)
#include "memopt/Conversion/CompileOptions.def"
#undef MEMOPT_OPTION_FIELD_Training
#undef MEMOPT_OPTION_FIELD_Compile

  /// Set with dataParallel by the command line and memopt.compile: a value
  /// below 1 given there is an error (0 is "not data parallel").
  bool dataParallelGiven = false;
};

struct CompileOptions {
#define MEMOPT_OPTION(STRUCT, FIELD, TYPE, DEFAULT, KIND, FLAG, PIPELINE,      \
                      PYTHON, CATEGORY, META, SHOWN, HELP)                     \
  MEMOPT_OPTION_FIELD_##STRUCT(FIELD, TYPE, DEFAULT)
#define MEMOPT_OPTION_FIELD_Training(FIELD, TYPE, DEFAULT)
#define MEMOPT_OPTION_FIELD_Compile(FIELD, TYPE, DEFAULT) TYPE FIELD = DEFAULT;
#include "memopt/Conversion/CompileOptions.def"
#undef MEMOPT_OPTION_FIELD_Training
#undef MEMOPT_OPTION_FIELD_Compile

  TrainingOptions training;

  // Set by the callers, not options of the table.
  /// Where the runtime the program links lives: a folder with include/
  /// (memopt/Runtime/*.h) and lib/ (libmemopt_runtime_*.a), as the Python
  /// package installs it. Empty: the source and build trees this driver was
  /// configured with.
  std::string runtimeDir;
  /// The input shapes may change dimensions the model fixes (--fit gives
  /// each candidate micro-batch this way).
  bool replaceFixedInputDims = false;
};

/// One option of CompileOptions.def, as text (the docs, Python, tests).
struct CompileOptionInfo {
  StringRef structName; ///< "Compile" or "Training"
  StringRef field;
  StringRef type;
  OptionKind kind;
  StringRef flag;
  StringRef pipeline; ///< "" for the driver's own options
  StringRef python;
  OptionCategory category;
  StringRef meta;
  StringRef help;
  /// The default as the docs show it (SHOWN, else DEFAULT printed).
  std::string shownDefault;
  /// The enum's value names and their help (empty for other types).
  std::vector<std::string> enumNames;
  std::vector<std::string> enumHelps;
};

/// Every option, in the table's order.
const std::vector<CompileOptionInfo> &getCompileOptionInfos();
/// The title of a category ("Memory budget").
StringRef getOptionCategoryTitle(OptionCategory category);
StringRef getOptionKindName(OptionKind kind);

/// An enum value's name and help (MEMOPT_ENUM_VALUE).
template <typename E> struct EnumValueName {
  E value;
  const char *name;
  const char *help;
};

/// The named values of enum E, in the table's order.
template <typename E> std::vector<EnumValueName<E>> getEnumValueNames() {
  std::vector<EnumValueName<E>> names;
#define MEMOPT_ENUM_VALUE(TYPE, VALUE, NAME, HELP)                             \
  if constexpr (std::is_same_v<E, TYPE>)                                       \
    names.push_back({TYPE::VALUE, NAME, HELP});
#include "memopt/Conversion/CompileOptions.def"
  return names;
}

/// The name of an enum value ("cuda").
template <typename E> std::string getEnumName(E value) {
  for (const EnumValueName<E> &entry : getEnumValueNames<E>())
    if (entry.value == value)
      return entry.name;
  return "?";
}

/// The value named `name`, or failure.
template <typename E> FailureOr<E> parseEnumName(StringRef name) {
  for (const EnumValueName<E> &entry : getEnumValueNames<E>())
    if (name == entry.name)
      return entry.value;
  return failure();
}

/// The names of enum E, comma-separated (for messages).
template <typename E> std::string getEnumNames(StringRef separator = ", ") {
  std::string text;
  for (const EnumValueName<E> &entry : getEnumValueNames<E>()) {
    if (!text.empty())
      text += separator.str();
    text += entry.name;
  }
  return text;
}

/// Parses "2GiB", "512MiB", "1.5GB", "4096" (bytes) into bytes.
FailureOr<int64_t> parseByteSize(StringRef text);

/// The precision `--precision NAME` names, or failure.
FailureOr<CompilePrecision> parseCompilePrecision(StringRef name);
/// The names parseCompilePrecision accepts, comma-separated (for messages).
std::string getCompilePrecisionNames();

/// Sets the option named `name` (its flag, its pipeline name or its Python
/// name; dashes in front are ignored) from text as the command line spells
/// it (lists comma-separated; bools true / false; a Negated option named by
/// its flag takes the flag's sense: "no-plan"... "separate-outputs=true" is
/// outputsInArena = false). On failure `message` names the option as
/// `name` and the value.
LogicalResult setCompileOption(CompileOptions &options, StringRef name,
                               StringRef text, std::string &message);

/// docs/cli.md's flag reference (Markdown, one table per category).
void printCompileOptionsMarkdown(llvm::raw_ostream &os);

} // namespace mlir::memopt

#endif // MEMOPT_CONVERSION_COMPILEOPTIONS_H
