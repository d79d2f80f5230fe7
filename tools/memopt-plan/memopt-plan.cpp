//===- memopt-plan.cpp - The static memory planner on CSV files -----------===//
//
// Reads a MiniMalloc CSV problem, plans it with MemOptPlanner and writes the
// CSV back with an `offset` column. Thin by design: parsing, planning and
// validation live in the library. No LLVM: a small hand-written option parser.
//
// Exit status: 0 planned; 1 bad usage or bad input; 2 no packing within the
// capacity (proved infeasible, or none found in the time limit); 3 the
// validator rejected a plan (a planner bug).
//
//===----------------------------------------------------------------------===//

#include "memopt/Planner/Csv.h"
#include "memopt/Planner/Planner.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

using namespace memopt::planner;

namespace {

constexpr const char *kUsage =
    "usage: memopt-plan [options] <input.csv | ->\n"
    "\n"
    "Packs buffers with lifetimes into one arena. Input: MiniMalloc CSV with\n"
    "columns id,lower,upper,size (+ optional alignment); lifetimes are\n"
    "half-open [lower, upper).\n"
    "\n"
    "options:\n"
    "  --capacity N         the arena must fit in N bytes (exit 2 if no\n"
    "                       packing is found)\n"
    "  --algo NAME          auto (default), exact, best-fit (= "
    "best-fit-size),\n"
    "                       best-fit-lifetime\n"
    "  --time-limit SECONDS budget for the exact search (default 10)\n"
    "  -o FILE              write the CSV with an offset column to FILE\n"
    "                       (default: stdout)\n"
    "  -h, --help           show this help\n";

int usageError(const std::string &message) {
  std::cerr << "memopt-plan: error: " << message << "\n"
            << "(run 'memopt-plan --help' for usage)\n";
  return 1;
}

bool parseInt64(const std::string &text, int64_t &value) {
  if (text.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0')
    return false;
  value = parsed;
  return true;
}

bool parseSeconds(const std::string &text, double &value) {
  if (text.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return errno == 0 && *end == '\0' && value > 0 && value < 1e9;
}

} // namespace

int main(int argc, char **argv) {
  PlanOptions options;
  std::string inputPath, outputPath;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool hasValue = false;
    // Accept both "--name value" and "--name=value".
    if (arg.rfind("--", 0) == 0) {
      size_t equals = arg.find('=');
      if (equals != std::string::npos) {
        value = arg.substr(equals + 1);
        arg = arg.substr(0, equals);
        hasValue = true;
      }
    }
    auto takeValue = [&]() -> bool {
      if (hasValue)
        return true;
      if (i + 1 >= argc)
        return false;
      value = argv[++i];
      return true;
    };
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "--capacity") {
      int64_t capacity = 0;
      if (!takeValue())
        return usageError("--capacity needs a value");
      if (!parseInt64(value, capacity) || capacity < 0)
        return usageError("--capacity: '" + value +
                          "' is not a non-negative integer");
      options.capacity = capacity;
    } else if (arg == "--algo") {
      if (!takeValue())
        return usageError("--algo needs a value");
      std::optional<Algorithm> algorithm = parseAlgorithm(value);
      if (!algorithm)
        return usageError("--algo: unknown algorithm '" + value +
                          "' (expected auto, exact, best-fit, "
                          "best-fit-size, best-fit-lifetime)");
      options.algorithm = *algorithm;
    } else if (arg == "--time-limit") {
      if (!takeValue())
        return usageError("--time-limit needs a value");
      if (!parseSeconds(value, options.timeLimitSeconds))
        return usageError("--time-limit: '" + value +
                          "' is not a positive number of seconds");
    } else if (arg == "-o") {
      if (i + 1 >= argc)
        return usageError("-o needs a file name");
      outputPath = argv[++i];
    } else if (arg != "-" && arg.size() > 1 && arg[0] == '-') {
      return usageError("unknown option '" + arg + "'");
    } else if (!inputPath.empty()) {
      return usageError("more than one input file ('" + inputPath + "' and '" +
                        arg + "')");
    } else {
      inputPath = arg;
    }
  }
  if (inputPath.empty())
    return usageError("no input file (use '-' for stdin)");

  std::string text;
  if (inputPath == "-") {
    std::ostringstream buffer;
    buffer << std::cin.rdbuf();
    text = buffer.str();
  } else {
    std::ifstream file(inputPath, std::ios::binary);
    if (!file) {
      std::cerr << "memopt-plan: error: cannot open '" << inputPath << "'\n";
      return 1;
    }
    std::ostringstream buffer;
    buffer << file.rdbuf();
    text = buffer.str();
  }

  CsvProblem input;
  std::string error;
  if (!parseProblemCsv(text, input, error)) {
    std::cerr << "memopt-plan: error: " << inputPath << ": " << error << "\n";
    return 1;
  }

  PlanResult result = plan(input.problem, options);
  if (result.status == PlanStatus::InvalidInput) {
    std::cerr << "memopt-plan: error: " << inputPath << ": " << result.message
              << "\n";
    return 1;
  }
  if (!result.ok()) {
    std::cerr << "memopt-plan: error: " << inputPath << ": " << result.message
              << "\n";
    return result.status == PlanStatus::InvalidPlan ? 3 : 2;
  }

  std::string csv = writePlanCsv(input, result.plan);
  if (outputPath.empty() || outputPath == "-") {
    std::cout << csv;
  } else {
    std::ofstream file(outputPath, std::ios::binary);
    if (!file || !(file << csv)) {
      std::cerr << "memopt-plan: error: cannot write '" << outputPath << "'\n";
      return 1;
    }
  }

  char ratio[32];
  std::snprintf(ratio, sizeof(ratio), "%.4f",
                result.maxLive > 0
                    ? static_cast<double>(result.plan.arenaSize) /
                          static_cast<double>(result.maxLive)
                    : 1.0);
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.3f", result.seconds);
  std::cerr << "memopt-plan: buffers=" << input.problem.buffers.size()
            << " max-live=" << result.maxLive
            << " arena=" << result.plan.arenaSize << " ratio=" << ratio
            << " algorithm=" << algorithmName(result.producedBy)
            << " time=" << seconds << "s"
            << (result.provedOptimal ? " optimal" : "");
  if (result.searchNodes > 0)
    std::cerr << " nodes=" << result.searchNodes;
  std::cerr << "\n";
  return 0;
}
