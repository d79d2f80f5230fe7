//===- FuzzPlannerCsv.cpp - fuzz target: the planner's CSV reader ---------===//
//
// Input: a problem in MiniMalloc's CSV format (what memopt-plan reads). A
// problem that parses is planned with a small capacity and time limit by the
// heuristics and the exact search, and the validator checks the result; a
// plan that `plan()` calls Ok but the validator refuses is a bug (abort).
//
//===----------------------------------------------------------------------===//

#include "memopt/Planner/Csv.h"
#include "memopt/Planner/Planner.h"
#include "memopt/Planner/Validator.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

using namespace memopt::planner;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  CsvProblem problem;
  std::string error;
  if (!parseProblemCsv(text, problem, error))
    return 0;
  if (problem.problem.buffers.size() > 64)
    return 0; // the exact search is exponential; keep each run short
  bool wellFormed = checkProblem(problem.problem).empty();
  for (Algorithm algorithm :
       {Algorithm::Auto, Algorithm::BestFitSize, Algorithm::Exact}) {
    PlanOptions options;
    options.algorithm = algorithm;
    options.timeLimitSeconds = 0.05;
    if (wellFormed && size % 2)
      options.capacity = maxLive(problem.problem) + int64_t(size % 7) * 64;
    PlanResult result = plan(problem.problem, options);
    if (result.ok() &&
        !validatePlan(problem.problem, result.plan, options.capacity).ok())
      std::abort();
    if (result.ok())
      (void)writePlanCsv(problem, result.plan);
  }
  return 0;
}
