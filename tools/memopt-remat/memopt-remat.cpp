//===- memopt-remat.cpp - Rematerialization on node-link JSON graphs ------===//
//
// Reads a computation graph (networkx node-link JSON, the format of the
// Checkmate and Moccasin benchmark graphs), finds a schedule within a byte
// budget at the least compute cost with MemOptRemat, writes it as JSON and
// prints one summary line. Thin by design, like memopt-plan: parsing,
// solving and validation live in the libraries.
//
// Exit status: 0 scheduled; 1 bad usage or bad input; 2 no schedule within
// the budget (proved infeasible, or none found); 3 the validator rejected a
// schedule (a solver bug).
//
//===----------------------------------------------------------------------===//

#include "memopt/Remat/GraphJson.h"
#include "memopt/Remat/Remat.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

using namespace memopt::remat;

namespace {

constexpr const char *kUsage =
    "usage: memopt-remat GRAPH.json (--budget BYTES | --budget-fraction F)\n"
    "                    [options] [-o SCHEDULE.json]\n"
    "\n"
    "Finds a schedule of the graph (node computations in order; a repeated\n"
    "node is recomputed) whose peak memory is within the budget, at the\n"
    "least total compute cost. Input: networkx node-link JSON (Checkmate or\n"
    "random-layered layout, see docs/remat.md).\n"
    "\n"
    "options:\n"
    "  --budget BYTES         the peak must not exceed BYTES\n"
    "  --budget-fraction F    budget = floor(F x the initial order's peak)\n"
    "  --max-computations C   the most times a node is computed (default 2;\n"
    "                         1 = no recomputation)\n"
    "  --method NAME          auto (default), fast, exact\n"
    "  --time-limit SECONDS   wall-clock limit (default 10)\n"
    "  --seed N               seed of the fast method's randomized search\n"
    "                         (default 1; runs are reproducible when the\n"
    "                         time limit is not reached)\n"
    "  -o FILE                write the schedule JSON to FILE ('-' = stdout)\n"
    "  -h, --help             show this help\n";

int usageError(const std::string &message) {
  std::cerr << "memopt-remat: error: " << message << "\n"
            << "(run 'memopt-remat --help' for usage)\n";
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

bool parseDouble(const std::string &text, double &value) {
  if (text.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return errno == 0 && *end == '\0' && std::isfinite(value);
}

std::string format(const char *pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), pattern, value);
  return buffer;
}

} // namespace

int main(int argc, char **argv) {
  RematOptions options;
  std::string inputPath, outputPath;
  std::optional<int64_t> budget;
  std::optional<double> fraction;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool hasValue = false;
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
    if (arg == "--budget") {
      int64_t bytes = 0;
      if (!takeValue())
        return usageError("--budget needs a value");
      if (!parseInt64(value, bytes) || bytes < 0)
        return usageError("--budget: '" + value +
                          "' is not a non-negative number of bytes");
      budget = bytes;
    } else if (arg == "--budget-fraction") {
      double number = 0;
      if (!takeValue())
        return usageError("--budget-fraction needs a value");
      if (!parseDouble(value, number) || number <= 0 || number > 1e6)
        return usageError("--budget-fraction: '" + value +
                          "' is not a positive number");
      fraction = number;
    } else if (arg == "--max-computations") {
      int64_t limit = 0;
      if (!takeValue())
        return usageError("--max-computations needs a value");
      if (!parseInt64(value, limit) || limit < 1 || limit > 1000000)
        return usageError("--max-computations: '" + value +
                          "' is not a positive integer");
      options.maxComputations = static_cast<int>(limit);
    } else if (arg == "--method") {
      if (!takeValue())
        return usageError("--method needs a value");
      std::optional<Method> method = parseMethod(value);
      if (!method)
        return usageError("--method: unknown method '" + value +
                          "' (expected auto, fast, exact)");
      options.method = *method;
    } else if (arg == "--time-limit") {
      if (!takeValue())
        return usageError("--time-limit needs a value");
      if (!parseDouble(value, options.timeLimitSeconds) ||
          options.timeLimitSeconds <= 0 || options.timeLimitSeconds > 1e9)
        return usageError("--time-limit: '" + value +
                          "' is not a positive number of seconds");
    } else if (arg == "--seed") {
      int64_t seed = 0;
      if (!takeValue())
        return usageError("--seed needs a value");
      if (!parseInt64(value, seed) || seed < 0)
        return usageError("--seed: '" + value +
                          "' is not a non-negative integer");
      options.seed = static_cast<uint64_t>(seed);
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
  if (budget.has_value() == fraction.has_value())
    return usageError("give exactly one of --budget and --budget-fraction");

  std::string text;
  if (inputPath == "-") {
    std::ostringstream buffer;
    buffer << std::cin.rdbuf();
    text = buffer.str();
  } else {
    std::ifstream file(inputPath, std::ios::binary);
    if (!file) {
      std::cerr << "memopt-remat: error: cannot open '" << inputPath << "'\n";
      return 1;
    }
    std::ostringstream buffer;
    buffer << file.rdbuf();
    text = buffer.str();
  }

  Graph graph;
  std::string error;
  if (!readGraphJson(text, graph, error)) {
    std::cerr << "memopt-remat: error: " << inputPath << ": " << error << "\n";
    return 1;
  }
  if (fraction) {
    long double bytes = static_cast<long double>(*fraction) *
                        static_cast<long double>(initialPeak(graph));
    if (bytes > 9.0e18L)
      return usageError("--budget-fraction: the budget overflows");
    budget = static_cast<int64_t>(std::floor(bytes));
  }
  options.budget = *budget;

  RematResult result = solveRemat(graph, options);
  if (result.status == RematStatus::InvalidInput) {
    std::cerr << "memopt-remat: error: " << inputPath << ": " << result.message
              << "\n";
    return 1;
  }
  if (!result.ok()) {
    std::cerr << "memopt-remat: error: " << inputPath << ": " << result.message
              << "\n";
    return result.status == RematStatus::InvalidSchedule ? 3 : 2;
  }

  if (!outputPath.empty()) {
    std::string json = writeScheduleJson(graph, result);
    if (outputPath == "-") {
      std::cout << json;
    } else {
      std::ofstream file(outputPath, std::ios::binary);
      if (!file || !(file << json)) {
        std::cerr << "memopt-remat: error: cannot write '" << outputPath
                  << "'\n";
        return 1;
      }
    }
  }

  double added =
      result.baseCost > 0
          ? 100.0 * static_cast<double>(result.totalCost - result.baseCost) /
                static_cast<double>(result.baseCost)
          : 0.0;
  std::cerr << "memopt-remat: nodes=" << graph.nodes.size()
            << " budget=" << result.budget
            << " initial-peak=" << result.initialPeak
            << " peak=" << result.peakBytes << " cost=" << result.totalCost
            << " base-cost=" << result.baseCost
            << " added=" << format("%.3f%%", added)
            << " recomputed=" << result.recomputations
            << " method=" << methodName(result.producedBy)
            << " time=" << format("%.3fs", result.seconds)
            << (result.provedOptimal ? " optimal" : "") << "\n";
  return 0;
}
