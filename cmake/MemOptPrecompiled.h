//===- MemOptPrecompiled.h - headers of the compiler's precompiled header -===//
//
// Every translation unit of the compiler libraries parses the same few
// hundred thousand lines of MLIR and memopt dialect headers before its own
// code; parsing is about two thirds of a typical pass's compile time with gcc.
// CMake precompiles this header once (memopt_precompiled_headers() in the top
// CMakeLists.txt) and force-includes it, so those headers are parsed once per
// build. It only lists headers: no declarations of its own. A source file
// still includes what it uses; configuring with
// -DMEMOPT_PRECOMPILED_HEADERS=OFF builds without the force-include and shows
// a missing one.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
