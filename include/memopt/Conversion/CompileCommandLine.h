//===- CompileCommandLine.h - CompileOptions bound to llvm::cl --*- C++ -*-===//
//
// memopt-compile's command line, produced from CompileOptions.def: one
// llvm::cl option per table line, in one llvm::cl::OptionCategory per
// OptionCategory, written into a CompileOptions after parsing (sizes and
// on / off through the parsers of CompileOptions.cpp). A binder, as IREE's
// OptionsBinder: constructing it registers the options, so a tool builds
// it in main before cl::ParseCommandLineOptions.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_CONVERSION_COMPILECOMMANDLINE_H
#define MEMOPT_CONVERSION_COMPILECOMMANDLINE_H

#include "memopt/Conversion/CompileOptions.h"

#include "llvm/Support/CommandLine.h"

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mlir::memopt {

class CompileCommandLine {
public:
  /// Registers the table's options (in the global llvm::cl registry); the
  /// values given on the command line go into `options` in apply().
  explicit CompileCommandLine(CompileOptions &options);
  ~CompileCommandLine();
  CompileCommandLine(const CompileCommandLine &) = delete;
  CompileCommandLine &operator=(const CompileCommandLine &) = delete;

  /// The categories of the options, for cl::HideUnrelatedOptions.
  SmallVector<const llvm::cl::OptionCategory *> getCategories() const;

  /// After cl::ParseCommandLineOptions: writes the given values into the
  /// options. On a value that does not parse, `message` names the flag and
  /// the value ("--memory-budget 'lots' is not a size ...").
  LogicalResult apply(std::string &message);

private:
  struct Binding {
    std::unique_ptr<llvm::cl::Option> option;
    /// Writes the parsed value into the field; called when given.
    std::function<LogicalResult(std::string &message)> apply;
  };
  template <typename T>
  void bind(T &field, OptionKind kind, StringRef flag, StringRef meta,
            StringRef help, OptionCategory category);

  CompileOptions &options;
  std::vector<std::unique_ptr<llvm::cl::OptionCategory>> categories;
  std::vector<Binding> bindings;
  /// Texts the cl options point to (llvm::cl keeps StringRefs).
  std::deque<std::string> texts;
};

} // namespace mlir::memopt

#endif // MEMOPT_CONVERSION_COMPILECOMMANDLINE_H
