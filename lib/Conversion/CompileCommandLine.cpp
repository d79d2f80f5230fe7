//===- CompileCommandLine.cpp - CompileOptions bound to llvm::cl ----------===//
//
// One llvm::cl option per line of CompileOptions.def, written into the
// CompileOptions after parsing. Values are held by the cl options and
// copied when given, so CompileOptions' defaults (the table's) stay the
// only defaults. After IREE's OptionsBinder (cl options made per bound
// field, lists through a callback); further: the binding is generated.
//
//===----------------------------------------------------------------------===//

#include "memopt/Conversion/CompileCommandLine.h"

#include <type_traits>

using namespace mlir;
using namespace mlir::memopt;
namespace cl = llvm::cl;

namespace {

template <typename T>
T &fieldOf(CompileOptions &options, T CompileOptions::*member) {
  return options.*member;
}
template <typename T>
T &fieldOf(CompileOptions &options, T TrainingOptions::*member) {
  return options.training.*member;
}

} // namespace

CompileCommandLine::CompileCommandLine(CompileOptions &options)
    : options(options) {
  for (int index = 0; index <= int(OptionCategory::Budget); ++index)
    categories.push_back(std::make_unique<cl::OptionCategory>(
        getOptionCategoryTitle(OptionCategory(index))));
#define MEMOPT_OPTION(STRUCT, FIELD, TYPE, DEFAULT, KIND, FLAG, PIPELINE,      \
                      PYTHON, CATEGORY, META, SHOWN, HELP)                     \
  bind(fieldOf(options, &STRUCT##Options::FIELD), OptionKind::KIND, FLAG,      \
       META, HELP, OptionCategory::CATEGORY);
#include "memopt/Conversion/CompileOptions.def"
}

CompileCommandLine::~CompileCommandLine() = default;

SmallVector<const cl::OptionCategory *>
CompileCommandLine::getCategories() const {
  SmallVector<const cl::OptionCategory *> list;
  for (const std::unique_ptr<cl::OptionCategory> &category : categories)
    list.push_back(category.get());
  return list;
}

template <typename T>
void CompileCommandLine::bind(T &field, OptionKind kind, StringRef flag,
                              StringRef meta, StringRef help,
                              OptionCategory category) {
  cl::OptionCategory &cat = *categories[int(category)];
  Binding binding;
  if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    auto list = std::make_unique<cl::list<std::string>>(
        flag, cl::desc(help), cl::value_desc(meta), cl::cat(cat));
    if (kind == OptionKind::List)
      list->setMiscFlag(cl::CommaSeparated);
    cl::list<std::string> *raw = list.get();
    binding.apply = [raw, &field](std::string &) {
      field.assign(raw->begin(), raw->end());
      return success();
    };
    binding.option = std::move(list);
  } else {
    if (kind == OptionKind::Bytes || kind == OptionKind::OnOff) {
      // Parsed by setCompileOption (CompileOptions.cpp), as Python's
      // options= is.
      auto text = std::make_unique<cl::opt<std::string>>(
          flag, cl::desc(help), cl::value_desc(meta), cl::cat(cat));
      cl::opt<std::string> *raw = text.get();
      std::string name = ("--" + flag).str();
      binding.apply = [this, raw, name, kind](std::string &message) {
        // An empty size is no budget, as before the table.
        if (kind == OptionKind::Bytes && raw->getValue().empty())
          return success();
        return setCompileOption(options, name, raw->getValue(), message);
      };
      binding.option = std::move(text);
    } else if constexpr (std::is_same_v<T, bool>) {
      auto value =
          std::make_unique<cl::opt<bool>>(flag, cl::desc(help), cl::cat(cat));
      cl::opt<bool> *raw = value.get();
      bool negated = kind == OptionKind::Negated;
      binding.apply = [raw, negated, &field](std::string &) {
        field = negated ? !raw->getValue() : raw->getValue();
        return success();
      };
      binding.option = std::move(value);
    } else {
      std::unique_ptr<cl::opt<T>> value;
      if (kind == OptionKind::Positional)
        value = std::make_unique<cl::opt<T>>(
            cl::Positional,
            cl::desc(texts.emplace_back(("<" + meta + ">").str())),
            cl::Required, cl::cat(cat));
      else if (kind == OptionKind::Required)
        value = std::make_unique<cl::opt<T>>(flag, cl::desc(help),
                                             cl::value_desc(meta), cl::Required,
                                             cl::cat(cat));
      else
        value = std::make_unique<cl::opt<T>>(
            flag, cl::desc(help), cl::value_desc(meta), cl::cat(cat));
      if constexpr (std::is_enum_v<T>)
        for (const EnumValueName<T> &entry : getEnumValueNames<T>())
          value->getParser().addLiteralOption(entry.name, entry.value,
                                              entry.help);
      cl::opt<T> *raw = value.get();
      binding.apply = [raw, &field](std::string &) {
        field = raw->getValue();
        return success();
      };
      binding.option = std::move(value);
    }
  }
  bindings.push_back(std::move(binding));
}

LogicalResult CompileCommandLine::apply(std::string &message) {
  for (Binding &binding : bindings)
    if (binding.option->getNumOccurrences() > 0 &&
        failed(binding.apply(message)))
      return failure();
  // 0 ranks is "not data parallel" by default, an error when given.
  options.training.dataParallelGiven =
      llvm::any_of(bindings, [](const Binding &binding) {
        return binding.option->ArgStr == "data-parallel" &&
               binding.option->getNumOccurrences() > 0;
      });
  return success();
}
