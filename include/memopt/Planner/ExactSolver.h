//===- ExactSolver.h - Exact packing search ---------------------*- C++ -*-===//
//
// Decides whether the buffers fit in a given capacity, by depth-first search
// over canonical packings, following the method of MiniMalloc (Moffitt,
// "MiniMalloc: A Lightweight Memory Allocator for Hardware-Accelerated
// Machine Learning", ASPLOS 2023). Written from the paper's description; see
// docs/planner.md for the rules and how this implementation differs.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_PLANNER_EXACTSOLVER_H
#define MEMOPT_PLANNER_EXACTSOLVER_H

#include "memopt/Planner/Problem.h"

#include <chrono>

namespace memopt::planner {

enum class SearchOutcome {
  /// A packing within the capacity was found.
  Found,
  /// The search finished without one: no packing within the capacity exists.
  Infeasible,
  /// The deadline passed first; nothing is known.
  TimedOut,
};

struct ExactSearchResult {
  SearchOutcome outcome = SearchOutcome::TimedOut;
  /// Set when outcome == Found; arenaSize <= capacity.
  Plan plan;
  /// Search nodes visited (over all restarts).
  int64_t nodes = 0;
};

/// Searches for offsets such that every buffer ends at or below `capacity`.
/// The problem must pass `checkProblem`. Complete: given enough time it
/// returns Found or Infeasible, never a wrong answer either way.
ExactSearchResult searchPacking(const Problem &problem, int64_t capacity,
                                std::chrono::steady_clock::time_point deadline);

} // namespace memopt::planner

#endif // MEMOPT_PLANNER_EXACTSOLVER_H
