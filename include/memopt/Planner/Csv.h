//===- Csv.h - MiniMalloc CSV reading and writing ---------------*- C++ -*-===//
//
// MiniMalloc's problem format: a header line naming the columns, then one
// buffer per line. Columns `id`, `lower`, `upper`, `size` are required,
// `alignment` is optional, and an `offset` column (as written by
// `writePlanCsv`) is accepted and ignored, so a plan can be re-planned.
// Columns may come in any order; every value is a decimal integer.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_PLANNER_CSV_H
#define MEMOPT_PLANNER_CSV_H

#include "memopt/Planner/Problem.h"

#include <string>
#include <string_view>

namespace memopt::planner {

struct CsvProblem {
  Problem problem;
  /// Whether the input had an `alignment` column (then the output has one).
  bool hasAlignment = false;
};

/// Parses `text`. On error returns false and sets `error` to one message
/// naming the line ("line 4: ..."): missing or unknown column, wrong number
/// of fields, a value that is not an integer, negative size, upper <= lower
/// for a buffer of non-zero size, alignment < 1, or a duplicate id.
bool parseProblemCsv(std::string_view text, CsvProblem &result,
                     std::string &error);

/// Writes the problem back with an `offset` column added:
/// `id,lower,upper,size[,alignment],offset`.
std::string writePlanCsv(const CsvProblem &input, const Plan &plan);

} // namespace memopt::planner

#endif // MEMOPT_PLANNER_CSV_H
