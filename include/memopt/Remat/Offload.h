//===- Offload.h - keep, recompute or copy to host: the copy choice -*- C++
//-*-===//
//
// The third choice of the memory-budget solver for a saved value: copy it
// to pinned host memory after its last forward read and back before its
// first backward read (Capuchin, SwapAdvisor, POET; torchtitan's
// keep / recompute / offload choice; torchtune's activation offloading on a
// copy stream). Plain C++17 like the rest of lib/Remat.
//
// The model: the compute stream runs the steps in order, each for its
// estimated (or measured) time. Two copy streams, one per direction (the
// GPU's separate copy engines), each at `bytesPerSecond` plus a fixed
// latency per copy. An offload of value v is four events:
//   - after step `offloadAfter` (v's last forward read) the device-to-host
//     copy is issued; it starts when the D2H stream is free;
//   - before step `waitBefore` the compute stream waits for it; v's bytes
//     are free from there;
//   - before step `reloadBefore` the host-to-device copy into a fresh buffer
//     is issued (it starts when the H2D stream is free);
//   - before step `reloadWaitBefore` (v's first backward read) the compute
//     stream waits for it.
// A copy costs only the time the compute stream waits: `simulateOffload`
// replays the timeline and says how much of the copy time hid under
// compute. Device memory: v's bytes are free over steps
// [waitBefore, reloadBefore).
//
// The choice (`planOffload`): at the fullest step over the budget, among
// the candidates whose free interval covers it, take
// the one whose marginal exposed time (the stall it adds to the whole timeline)
// is lowest per byte, provided it is below what recomputing the value would
// cost (its node's time; infinite where it must not run twice). Free
// offloads (fully hidden) go first, largest first. What is left over the
// budget is the recomputation solver's (lib/Remat, solveRemat), which then
// runs on the graph with the offloads in place. Where we went further than
// torchtune (which offloads every activation it can, with a bounded number
// in flight): each copy is placed by the timeline, only where the budget
// needs it and where it is cheaper than recomputation; where further than
// Capuchin (which measures swap stalls at run time): the plan is fixed at
// compile time and its exposure predicted.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_REMAT_OFFLOAD_H
#define MEMOPT_REMAT_OFFLOAD_H

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace memopt::remat {

/// A value that may be offloaded: read last in the forward at step
/// `lastForwardStep`, next at `firstBackwardStep` (> lastForwardStep + 1).
struct OffloadCandidate {
  /// Caller's identifier, returned in the placement.
  int64_t id = 0;
  std::string name;
  int64_t bytes = 0;
  int lastForwardStep = 0;
  int firstBackwardStep = 0;
  /// What recomputing the value instead would add (seconds); infinite when
  /// it may not be recomputed.
  double recomputeSeconds = std::numeric_limits<double>::infinity();
};

struct OffloadProblem {
  /// Compute time of each step, in program order.
  std::vector<double> stepSeconds;
  /// Device bytes live at each step without any offload (the model's).
  std::vector<int64_t> stepBytes;
  std::vector<OffloadCandidate> candidates;
  /// Copy bandwidth per direction (pinned host memory; PCIe 5 ~ 40 GB/s).
  double bytesPerSecond = 40e9;
  /// Fixed cost of one copy (issue and completion).
  double latencySeconds = 2e-6;
  /// Bytes the peak must reach; the choice stops there.
  int64_t budget = 0;
};

/// Where the copies of one offloaded candidate go (steps as above).
struct OffloadPlacement {
  int candidate = 0; ///< index into OffloadProblem::candidates
  int offloadAfter = 0;
  int waitBefore = 0;
  int reloadBefore = 0;
  int reloadWaitBefore = 0;
};

/// The replayed timeline of a set of placements.
struct OffloadTimeline {
  /// Sum of the step times, and the compute stream's end with the waits.
  double baseSeconds = 0;
  double endSeconds = 0;
  /// Both copies of every placement, latency included.
  double copySeconds = 0;
  /// endSeconds - baseSeconds: the copy time that did not hide.
  double exposedSeconds() const { return endSeconds - baseSeconds; }
  double hiddenSeconds() const {
    double hidden = copySeconds - exposedSeconds();
    return hidden > 0 ? hidden : 0;
  }
};

struct OffloadPlan {
  std::vector<OffloadPlacement> placements;
  OffloadTimeline timeline;
  /// Device bytes per step with the offloads, and their peak.
  std::vector<int64_t> stepBytes;
  int64_t peakBytes = 0;
  int64_t offloadedBytes = 0;
  /// Candidates the choice considered and refused because recomputing them
  /// was cheaper than their exposed copy time.
  int refusedForRecompute = 0;
};

/// Seconds one copy of `bytes` takes in one direction.
double copySeconds(const OffloadProblem &problem, int64_t bytes);

/// The placement of `candidate` alone: the D2H wait at the first step that
/// starts after the copy would end, the reload issued at the last step that
/// leaves it time to arrive before the first backward read. Where the gap
/// is too short to hide both, the waits come right after the issue and
/// right before the read (the copy then stalls). Fails (returns false) when
/// the value would never be free: no step between the two reads.
bool placeOffload(const OffloadProblem &problem, int candidate,
                  OffloadPlacement &placement);

/// Replays the compute and copy streams with `placements`.
OffloadTimeline
simulateOffload(const OffloadProblem &problem,
                const std::vector<OffloadPlacement> &placements);

/// An empty string when the problem is well formed, else what is wrong
/// (naming the candidate).
std::string checkOffloadProblem(const OffloadProblem &problem);

/// Chooses offloads until the peak is within the budget or no candidate
/// left is cheaper than recomputing it (see the file comment).
OffloadPlan planOffload(const OffloadProblem &problem);

} // namespace memopt::remat

#endif // MEMOPT_REMAT_OFFLOAD_H
