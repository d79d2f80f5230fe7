//===- Offload.cpp - keep, recompute or copy to host: the copy choice -----===//
//
// See include/memopt/Remat/Offload.h for the model and the choice.
//
//===----------------------------------------------------------------------===//

#include "memopt/Remat/Offload.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace memopt::remat {

namespace {

/// Step times are sums of doubles: compare with a picosecond of slack.
constexpr double kSlackSeconds = 1e-12;

std::vector<double> stepStarts(const OffloadProblem &problem) {
  std::vector<double> start(problem.stepSeconds.size() + 1, 0.0);
  for (size_t k = 0; k < problem.stepSeconds.size(); ++k)
    start[k + 1] = start[k] + problem.stepSeconds[k];
  return start;
}

} // namespace

double copySeconds(const OffloadProblem &problem, int64_t bytes) {
  return problem.latencySeconds + double(bytes) / problem.bytesPerSecond;
}

bool placeOffload(const OffloadProblem &problem, int candidate,
                  OffloadPlacement &placement) {
  const OffloadCandidate &value = problem.candidates[candidate];
  int a = value.lastForwardStep, b = value.firstBackwardStep;
  if (b - a < 2)
    return false;
  std::vector<double> start = stepStarts(problem);
  double copy = copySeconds(problem, value.bytes);
  double issued = start[a + 1];
  int wait = b;
  for (int k = a + 1; k <= b; ++k)
    if (start[k] + kSlackSeconds >= issued + copy) {
      wait = k;
      break;
    }
  int reload = a + 1;
  for (int k = b; k > a; --k)
    if (start[b] - start[k] + kSlackSeconds >= copy) {
      reload = k;
      break;
    }
  if (wait >= reload) {
    // Both copies cannot hide in the gap: free the value for the whole gap
    // and let the copies stall the compute stream.
    wait = a + 1;
    reload = b;
  }
  placement.candidate = candidate;
  placement.offloadAfter = a;
  placement.waitBefore = wait;
  placement.reloadBefore = reload;
  placement.reloadWaitBefore = b;
  return true;
}

OffloadTimeline
simulateOffload(const OffloadProblem &problem,
                const std::vector<OffloadPlacement> &placements) {
  int steps = int(problem.stepSeconds.size());
  // Events at each position k (before step k), in the order the IR places
  // them: offload issues, offload waits, reload issues, reload waits.
  enum Kind { OffloadIssue = 0, OffloadWait, ReloadIssue, ReloadWait };
  struct Event {
    int position;
    Kind kind;
    int placement;
  };
  std::vector<Event> events;
  for (int p = 0, e = int(placements.size()); p < e; ++p) {
    const OffloadPlacement &placement = placements[p];
    events.push_back({placement.offloadAfter + 1, OffloadIssue, p});
    events.push_back({placement.waitBefore, OffloadWait, p});
    events.push_back({placement.reloadBefore, ReloadIssue, p});
    events.push_back({placement.reloadWaitBefore, ReloadWait, p});
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const Event &x, const Event &y) {
                     return x.position != y.position ? x.position < y.position
                                                     : x.kind < y.kind;
                   });
  OffloadTimeline timeline;
  std::vector<double> d2hEnd(placements.size(), 0.0),
      h2dEnd(placements.size(), 0.0);
  double now = 0, d2hFree = 0, h2dFree = 0;
  size_t next = 0;
  for (int k = 0; k <= steps; ++k) {
    for (; next < events.size() && events[next].position == k; ++next) {
      const Event &event = events[next];
      const OffloadPlacement &placement = placements[event.placement];
      double copy =
          copySeconds(problem, problem.candidates[placement.candidate].bytes);
      switch (event.kind) {
      case OffloadIssue:
        d2hFree = std::max(d2hFree, now) + copy;
        d2hEnd[event.placement] = d2hFree;
        timeline.copySeconds += copy;
        break;
      case OffloadWait:
        now = std::max(now, d2hEnd[event.placement]);
        break;
      case ReloadIssue:
        h2dFree = std::max(h2dFree, now) + copy;
        h2dEnd[event.placement] = h2dFree;
        timeline.copySeconds += copy;
        break;
      case ReloadWait:
        now = std::max(now, h2dEnd[event.placement]);
        break;
      }
    }
    if (k < steps) {
      now += problem.stepSeconds[k];
      timeline.baseSeconds += problem.stepSeconds[k];
    }
  }
  timeline.endSeconds = now;
  return timeline;
}

std::string checkOffloadProblem(const OffloadProblem &problem) {
  int steps = int(problem.stepSeconds.size());
  if (problem.stepBytes.size() != problem.stepSeconds.size())
    return "the step times and the step bytes differ in length";
  if (!(problem.bytesPerSecond > 0))
    return "the copy bandwidth must be positive";
  if (!(problem.latencySeconds >= 0))
    return "the copy latency must not be negative";
  for (double seconds : problem.stepSeconds)
    if (!(seconds >= 0) || std::isinf(seconds))
      return "a step time is negative or not finite";
  for (const OffloadCandidate &value : problem.candidates) {
    if (value.bytes <= 0)
      return "candidate '" + value.name + "' has no bytes";
    if (value.lastForwardStep < 0 ||
        value.firstBackwardStep <= value.lastForwardStep ||
        value.firstBackwardStep >= steps)
      return "candidate '" + value.name + "' has reads outside the steps";
  }
  return "";
}

OffloadPlan planOffload(const OffloadProblem &problem) {
  OffloadPlan plan;
  plan.stepBytes = problem.stepBytes;
  plan.timeline = simulateOffload(problem, {});
  auto peakStep = [&] {
    return int(std::max_element(plan.stepBytes.begin(), plan.stepBytes.end()) -
               plan.stepBytes.begin());
  };
  if (plan.stepBytes.empty())
    return plan;
  int candidates = int(problem.candidates.size());
  std::vector<OffloadPlacement> alone(candidates);
  std::vector<bool> open(candidates, false);
  for (int c = 0; c < candidates; ++c)
    open[c] = placeOffload(problem, c, alone[c]);
  while (true) {
    // The fullest step: where no copy can lower it, recomputation has to,
    // and copies elsewhere would only pin values (a reload keeps its value
    // from the reload on) that the solver may rather recompute late.
    int peak = peakStep();
    if (plan.stepBytes[peak] <= problem.budget)
      break;
    std::vector<int> covering;
    for (int c = 0; c < candidates; ++c)
      if (open[c] && alone[c].waitBefore <= peak &&
          peak < alone[c].reloadBefore)
        covering.push_back(c);
    if (covering.empty())
      break;
    std::stable_sort(covering.begin(), covering.end(), [&](int x, int y) {
      return problem.candidates[x].bytes > problem.candidates[y].bytes;
    });
    int best = -1;
    double bestScore = 0;
    OffloadTimeline bestTimeline;
    for (int c : covering) {
      std::vector<OffloadPlacement> trial = plan.placements;
      trial.push_back(alone[c]);
      OffloadTimeline timeline = simulateOffload(problem, trial);
      double marginal =
          timeline.exposedSeconds() - plan.timeline.exposedSeconds();
      if (marginal >= problem.candidates[c].recomputeSeconds) {
        // Recomputing it is cheaper; later offloads only add to the stall.
        open[c] = false;
        ++plan.refusedForRecompute;
        continue;
      }
      double score = marginal / double(problem.candidates[c].bytes);
      if (best < 0 || score < bestScore) {
        best = c;
        bestScore = score;
        bestTimeline = timeline;
      }
      // Fully hidden, and the largest such: nothing beats it.
      if (marginal <= 1e-12)
        break;
    }
    // Every candidate there was refused (and closed): look again.
    if (best < 0)
      continue;
    open[best] = false;
    plan.placements.push_back(alone[best]);
    plan.timeline = bestTimeline;
    plan.offloadedBytes += problem.candidates[best].bytes;
    for (int k = alone[best].waitBefore; k < alone[best].reloadBefore; ++k)
      plan.stepBytes[k] -= problem.candidates[best].bytes;
  }
  plan.peakBytes = plan.stepBytes[peakStep()];
  return plan;
}

} // namespace memopt::remat
