//===- CompileOptions.cpp - the option table as data ----------------------===//
//
// CompileOptions.def read as data: the option list the docs generator and
// the Python module print, setCompileOption (an option set by name from
// text, with the command line's parsers: sizes, enum names, on / off,
// comma lists) and docs/cli.md's flag reference. The value parsers live
// here, once: the command line (CompileCommandLine.cpp) and Python call
// them.
//
// After IREE's OptionsBinder::parseArguments / printArguments (a struct's
// options set and printed by name through the binding); further: the
// documentation is printed from the same table.
//
//===----------------------------------------------------------------------===//

#include "memopt/Conversion/CompileOptions.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

using namespace mlir;
using namespace mlir::memopt;

FailureOr<int64_t> mlir::memopt::parseByteSize(StringRef text) {
  StringRef trimmed = text.trim();
  size_t split = trimmed.find_first_not_of("0123456789.");
  StringRef number = trimmed.substr(0, split);
  StringRef unit = split == StringRef::npos ? "" : trimmed.substr(split).trim();
  double value = 0;
  if (number.empty() || number.getAsDouble(value) || value < 0)
    return failure();
  std::optional<double> scale =
      llvm::StringSwitch<std::optional<double>>(unit.lower())
          .Case("", 1.0)
          .Case("b", 1.0)
          .Case("kib", 1024.0)
          .Case("mib", 1024.0 * 1024)
          .Case("gib", 1024.0 * 1024 * 1024)
          .Case("kb", 1e3)
          .Case("mb", 1e6)
          .Case("gb", 1e9)
          .Default(std::nullopt);
  if (!scale)
    return failure();
  return int64_t(std::llround(value * *scale));
}

FailureOr<CompilePrecision>
mlir::memopt::parseCompilePrecision(StringRef name) {
  return parseEnumName<CompilePrecision>(name);
}

std::string mlir::memopt::getCompilePrecisionNames() {
  return getEnumNames<CompilePrecision>();
}

StringRef mlir::memopt::getOptionCategoryTitle(OptionCategory category) {
  switch (category) {
  case OptionCategory::Import:
    return "Import";
  case OptionCategory::Compile:
    return "Compile: target, what to produce, which passes";
  case OptionCategory::Precision:
    return "Precision";
  case OptionCategory::Layout:
    return "Layout";
  case OptionCategory::Training:
    return "Training";
  case OptionCategory::MixedPrecision:
    return "Mixed-precision training";
  case OptionCategory::DataParallel:
    return "Data parallel";
  case OptionCategory::Budget:
    return "Memory budget";
  }
  return "";
}

StringRef mlir::memopt::getOptionKindName(OptionKind kind) {
  switch (kind) {
  case OptionKind::Value:
    return "Value";
  case OptionKind::Enum:
    return "Enum";
  case OptionKind::Negated:
    return "Negated";
  case OptionKind::OnOff:
    return "OnOff";
  case OptionKind::Bytes:
    return "Bytes";
  case OptionKind::List:
    return "List";
  case OptionKind::Repeated:
    return "Repeated";
  case OptionKind::Positional:
    return "Positional";
  case OptionKind::Required:
    return "Required";
  }
  return "";
}

namespace {

// A field's default as text (the docs' default column).
std::string printValue(bool value, OptionKind kind) {
  if (kind == OptionKind::OnOff)
    return value ? "on" : "off";
  return "";
}
std::string printValue(int value, OptionKind) { return std::to_string(value); }
std::string printValue(int64_t value, OptionKind) {
  return std::to_string(value);
}
std::string printValue(double value, OptionKind) {
  // The shortest text that reads back as the value (0.999, 1e-8, 65536).
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value)
      break;
  }
  std::string printed = text;
  size_t exponent = printed.find("e-0");
  if (exponent != std::string::npos)
    printed.erase(exponent + 2, 1);
  return printed;
}
std::string printValue(const std::string &value, OptionKind) { return value; }
std::string printValue(const std::vector<std::string> &value, OptionKind) {
  return llvm::join(value, ",");
}
template <typename E, typename = std::enable_if_t<std::is_enum_v<E>>>
std::string printValue(E value, OptionKind) {
  return getEnumName(value);
}

template <typename T> std::vector<std::string> enumNamesOf(bool help) {
  std::vector<std::string> names;
  if constexpr (std::is_enum_v<T>)
    for (const EnumValueName<T> &entry : getEnumValueNames<T>())
      names.push_back(help ? entry.help : entry.name);
  return names;
}

// Text -> value, as the command line spells it.
LogicalResult parseText(StringRef text, bool &value) {
  std::optional<bool> parsed = llvm::StringSwitch<std::optional<bool>>(text)
                                   .Cases({"true", "1", "on"}, true)
                                   .Cases({"false", "0", "off"}, false)
                                   .Default(std::nullopt);
  if (!parsed)
    return failure();
  value = *parsed;
  return success();
}
LogicalResult parseText(StringRef text, int &value) {
  return failure(text.getAsInteger(10, value));
}
LogicalResult parseText(StringRef text, int64_t &value) {
  return failure(text.getAsInteger(10, value));
}
LogicalResult parseText(StringRef text, double &value) {
  return failure(text.getAsDouble(value));
}
LogicalResult parseText(StringRef text, std::string &value) {
  value = text.str();
  return success();
}
LogicalResult parseText(StringRef text, std::vector<std::string> &value) {
  value.clear();
  SmallVector<StringRef> parts;
  text.split(parts, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (StringRef part : parts)
    value.push_back(part.str());
  return success();
}
template <typename E, typename = std::enable_if_t<std::is_enum_v<E>>>
LogicalResult parseText(StringRef text, E &value) {
  FailureOr<E> parsed = parseEnumName<E>(text);
  if (failed(parsed))
    return failure();
  value = *parsed;
  return success();
}

/// Sets `field` from `text` by the option's kind; the message names the
/// option as `name`.
template <typename T>
LogicalResult setField(T &field, OptionKind kind, StringRef name,
                       StringRef text, std::string &message) {
  auto invalid = [&](StringRef expected) {
    message = (name + " '" + text + "' is not " + expected).str();
    return failure();
  };
  if constexpr (std::is_same_v<T, bool>) {
    bool value = false;
    if (kind == OptionKind::OnOff) {
      if (text != "on" && text != "off")
        return invalid("one of on, off");
      field = text == "on";
      return success();
    }
    if (failed(parseText(text, value)))
      return invalid("true or false");
    field = kind == OptionKind::Negated ? !value : value;
    return success();
  } else if constexpr (std::is_same_v<T, int64_t>) {
    if (kind == OptionKind::Bytes) {
      FailureOr<int64_t> bytes = parseByteSize(text);
      if (failed(bytes) || *bytes <= 0)
        return invalid("a size (e.g. 2GiB, 512MiB, 4096)");
      field = *bytes;
      return success();
    }
    if (failed(parseText(text, field)))
      return invalid("a whole number");
    return success();
  } else if constexpr (std::is_enum_v<T>) {
    if (failed(parseText(text, field)))
      return invalid("one of " + getEnumNames<T>());
    return success();
  } else if constexpr (std::is_same_v<T, int> || std::is_same_v<T, double>) {
    if (failed(parseText(text, field)))
      return invalid(std::is_same_v<T, int> ? "a whole number" : "a number");
    return success();
  } else {
    return parseText(text, field);
  }
}

/// The option's field in `options`.
template <typename T>
T &fieldOf(CompileOptions &options, T CompileOptions::*member) {
  return options.*member;
}
template <typename T>
T &fieldOf(CompileOptions &options, T TrainingOptions::*member) {
  return options.training.*member;
}

} // namespace

const std::vector<CompileOptionInfo> &mlir::memopt::getCompileOptionInfos() {
  static const std::vector<CompileOptionInfo> infos = [] {
    CompileOptions defaults;
    std::vector<CompileOptionInfo> list;
#define MEMOPT_OPTION(STRUCT, FIELD, TYPE, DEFAULT, KIND, FLAG, PIPELINE,      \
                      PYTHON, CATEGORY, META, SHOWN, HELP)                     \
  list.push_back(CompileOptionInfo{                                            \
      #STRUCT, #FIELD, #TYPE, OptionKind::KIND, FLAG, PIPELINE, PYTHON,        \
      OptionCategory::CATEGORY, META, HELP,                                    \
      StringRef(SHOWN).empty()                                                 \
          ? printValue(fieldOf(defaults, &STRUCT##Options::FIELD),             \
                       OptionKind::KIND)                                       \
          : std::string(SHOWN),                                                \
      enumNamesOf<TYPE>(false), enumNamesOf<TYPE>(true)});
#include "memopt/Conversion/CompileOptions.def"
    return list;
  }();
  return infos;
}

LogicalResult mlir::memopt::setCompileOption(CompileOptions &options,
                                             StringRef name, StringRef text,
                                             std::string &message) {
  // "--memory-budget", "memory-budget" and "memory_budget" name one option.
  StringRef key = name.ltrim('-');
  if (key.empty()) {
    message = "an option needs a name";
    return failure();
  }
#define MEMOPT_OPTION(STRUCT, FIELD, TYPE, DEFAULT, KIND, FLAG, PIPELINE,      \
                      PYTHON, CATEGORY, META, SHOWN, HELP)                     \
  if (key == FLAG || (!StringRef(PIPELINE).empty() && key == PIPELINE) ||      \
      (!StringRef(PYTHON).empty() && key == PYTHON)) {                         \
    /* A Negated option named by its flag takes the flag's sense. */           \
    OptionKind kind = OptionKind::KIND;                                        \
    if (kind == OptionKind::Negated && key != FLAG)                            \
      kind = OptionKind::Value;                                                \
    if (failed(setField(fieldOf(options, &STRUCT##Options::FIELD), kind, name, \
                        text, message)))                                       \
      return failure();                                                        \
    if (StringRef(#FIELD) == "dataParallel")                                   \
      options.training.dataParallelGiven = true;                               \
    return success();                                                          \
  }
#include "memopt/Conversion/CompileOptions.def"
  message = ("'" + name + "' is not a memopt-compile option").str();
  return failure();
}

void mlir::memopt::printCompileOptionsMarkdown(llvm::raw_ostream &os) {
  const std::vector<CompileOptionInfo> &infos = getCompileOptionInfos();
  // Table cells: a '|' inside a cell is escaped.
  auto cell = [](StringRef text) {
    std::string escaped;
    for (char c : text) {
      if (c == '|')
        escaped += '\\';
      escaped += c;
    }
    return escaped;
  };
  for (int index = 0; index <= int(OptionCategory::Budget); ++index) {
    auto category = OptionCategory(index);
    os << "### " << getOptionCategoryTitle(category) << "\n\n";
    os << "| flag | default | pipeline | Python | what |\n";
    os << "| --- | --- | --- | --- | --- |\n";
    for (const CompileOptionInfo &info : infos) {
      if (info.category != category)
        continue;
      std::string flag;
      if (info.kind == OptionKind::Positional)
        flag = ("<" + info.meta + ">").str();
      else if (info.flag.size() == 1)
        flag = ("-" + info.flag + " " + info.meta).str();
      else
        flag = ("--" + info.flag).str();
      if (info.kind == OptionKind::Enum)
        flag += " " + llvm::join(info.enumNames, "|");
      else if (!info.meta.empty() && info.kind != OptionKind::Positional &&
               info.flag.size() > 1)
        flag += (" " + info.meta).str();
      // A Negated flag is its field set false.
      std::string pipeline = info.pipeline.str();
      std::string python = info.python.str();
      if (info.kind == OptionKind::Negated) {
        pipeline += "=false";
        python += "=False";
      }
      if (!python.empty() && info.structName == "Training" &&
          info.python != "train")
        python = "Training(" + python + ")";
      std::string help = info.help.str();
      if (!info.enumNames.empty()) {
        help += ": ";
        for (size_t value = 0; value < info.enumNames.size(); ++value)
          help += (value ? "; " : "") + info.enumNames[value] + ", " +
                  info.enumHelps[value];
      }
      os << "| `" << cell(flag) << "` | "
         << (info.shownDefault.empty() ? ""
                                       : "`" + cell(info.shownDefault) + "`")
         << " | " << (pipeline.empty() ? "" : "`" + pipeline + "`") << " | "
         << (python.empty() ? "" : "`" + python + "`") << " | " << cell(help)
         << " |\n";
    }
    os << "\n";
  }
}
