//===- BestFit.h - Greedy best-fit memory planners --------------*- C++ -*-===//
//
// Greedy planners: take buffers in a fixed order and put each into the
// smallest gap, among the buffers already placed whose lifetimes intersect
// its own, that holds it; when no gap does, on top of them all.
//
// - DecreasingSize is TFLite's arena planner (lite/arena_planner.cc with
//   simple_memory_arena.cc): largest buffer first, earlier first use breaking
//   ties.
// - DecreasingLifetime is the other order of XLA's heap simulator
//   (GlobalDecreasingSizeBestFitHeap, "temporal" order): longest-lived buffer
//   first, larger size breaking ties. XLA runs both orders and keeps the
//   better; `plan()` with Algorithm::Auto does the same.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_PLANNER_BESTFIT_H
#define MEMOPT_PLANNER_BESTFIT_H

#include "memopt/Planner/Problem.h"

namespace memopt::planner {

enum class BestFitOrder { DecreasingSize, DecreasingLifetime };

/// Places every buffer (the problem must pass `checkProblem`). Zero-size
/// buffers get offset 0. O(n^2 log n) in the worst case.
Plan planBestFit(const Problem &problem, BestFitOrder order);

} // namespace memopt::planner

#endif // MEMOPT_PLANNER_BESTFIT_H
