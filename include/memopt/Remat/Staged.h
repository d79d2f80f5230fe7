//===- Staged.h - Schedules in stages: first computations in order -*- C++ -*-//
//
// The schedule space both solvers search, after Checkmate's stages (Jain et
// al., MLSys 2020; Moccasin's `use_stage` uses the same one). Stage s
// computes node order[s] for the first time, preceded by the recomputations
// placed in stage s, in initial-order position. So a plan is, for each node,
// the set of later stages at which it is computed again. Every such plan is a
// valid schedule (an input's position is always earlier than its consumer's,
// so some copy of it exists), and only memory and cost vary.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_REMAT_STAGED_H
#define MEMOPT_REMAT_STAGED_H

#include "memopt/Remat/Graph.h"

#include <cstdint>
#include <vector>

namespace memopt::remat {

/// `recomputeStages[v]` lists, in increasing order, the stages (positions in
/// `graph.order`) before which node v is computed again; each is greater
/// than v's own position. Indexed by node index.
struct StagedPlan {
  std::vector<std::vector<int>> recomputeStages;
};

/// The schedule (node indices) a plan stands for.
std::vector<int> stagedSchedule(const Graph &graph, const StagedPlan &plan);

/// Reads a schedule back as a plan: its first computations must follow
/// `graph.order` and every recomputation must be placed, within the stage
/// of the next first computation, in order position. Returns false if not.
bool planFromSchedule(const Graph &graph, const std::vector<int> &schedule,
                      StagedPlan &plan);

/// Evaluates plans quickly (O(nodes + edges + recomputations)), with scratch
/// buffers kept between calls. Works in position space: node `order[p]` is
/// position p.
class StagedEvaluator {
public:
  explicit StagedEvaluator(const Graph &graph);

  int size() const { return static_cast<int>(position.size()); }
  int positionOf(int node) const { return position[node]; }
  int nodeAt(int pos) const { return order[pos]; }
  const std::vector<int> &inputsAt(int pos) const { return inputs[pos]; }
  const std::vector<int> &usersAt(int pos) const { return users[pos]; }
  int64_t bytesAt(int pos) const { return bytes[pos]; }
  int64_t scratchAt(int pos) const { return scratch[pos]; }
  int64_t costAt(int pos) const { return cost[pos]; }

  /// Stages per position (`stages[p]` sorted, each > p).
  using PositionPlan = std::vector<std::vector<int>>;
  PositionPlan toPositions(const StagedPlan &plan) const;
  StagedPlan fromPositions(const PositionPlan &plan) const;

  /// Runs the plan. Afterwards `events()` holds the computed position per
  /// step, `stageOfEvent()` its stage, `memory()` the bytes at each step and
  /// `lastUse()` each step's copy's last read (its own step if unread).
  /// Returns the peak; `excess` receives the sum over steps of the bytes
  /// above `budget`.
  int64_t run(const PositionPlan &plan, int64_t budget, int64_t &excess);

  const std::vector<int> &events() const { return eventPos; }
  const std::vector<int> &stageOfEvent() const { return eventStage; }
  const std::vector<int64_t> &memory() const { return eventMemory; }
  const std::vector<int> &lastUse() const { return eventLastUse; }
  /// First step of each stage (one entry per stage, plus the step count).
  const std::vector<int> &stageStart() const { return firstOfStage; }
  /// Flattened reads: for step e, the copies (steps) it reads are
  /// reads()[readStart()[e] .. readStart()[e + 1]).
  const std::vector<int> &reads() const { return readCopies; }
  const std::vector<int> &readStart() const { return readBegin; }

private:
  std::vector<int> order, position;
  std::vector<std::vector<int>> inputs, users;
  std::vector<int64_t> bytes, cost, scratch;
  /// For each position: the position of the input whose copy it may take
  /// over (same bytes), or -1.
  std::vector<int> inPlaceFrom;
  // Scratch and results of the last run.
  std::vector<std::vector<int>> bucket;
  std::vector<int> eventPos, eventStage, eventLastUse, newestCopy, firstOfStage;
  std::vector<int> readCopies, readBegin, inPlaceCopy;
  std::vector<int64_t> eventMemory, delta;
};

} // namespace memopt::remat

#endif // MEMOPT_REMAT_STAGED_H
