//===- Planner.cpp - Static memory planner entry point --------------------===//

#include "memopt/Planner/Planner.h"
#include "memopt/Planner/BestFit.h"
#include "memopt/Planner/ExactSolver.h"
#include "memopt/Planner/Validator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace memopt::planner {

using Clock = std::chrono::steady_clock;

const char *algorithmName(Algorithm algorithm) {
  switch (algorithm) {
  case Algorithm::BestFitSize:
    return "best-fit-size";
  case Algorithm::BestFitLifetime:
    return "best-fit-lifetime";
  case Algorithm::Exact:
    return "exact";
  case Algorithm::Auto:
    return "auto";
  }
  return "unknown";
}

std::optional<Algorithm> parseAlgorithm(std::string_view name) {
  if (name == "best-fit" || name == "best-fit-size")
    return Algorithm::BestFitSize;
  if (name == "best-fit-lifetime")
    return Algorithm::BestFitLifetime;
  if (name == "exact")
    return Algorithm::Exact;
  if (name == "auto")
    return Algorithm::Auto;
  return std::nullopt;
}

namespace {

/// Carries one call of `plan()`: the result being built and the clock.
class PlanBuilder {
public:
  PlanBuilder(const Problem &problem, const PlanOptions &options)
      : problem(problem), options(options), start(Clock::now()) {
    double limit = options.timeLimitSeconds > 0 ? options.timeLimitSeconds : 0;
    deadline = start + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(limit));
  }

  PlanResult run();

private:
  /// Validates `candidate`; on failure records InvalidPlan and returns false.
  bool accept(const Plan &candidate, Algorithm producer);
  PlanResult finish(PlanStatus status, std::string message = {});
  PlanResult runHeuristic(BestFitOrder order, Algorithm algorithm);
  PlanResult runDecision(int64_t capacity);
  PlanResult runDecisionWithHeuristics(int64_t capacity);
  PlanResult runMinimize();
  int64_t nextArena(int64_t bytes) const;
  std::string bytes(int64_t value) { return std::to_string(value) + " bytes"; }

  const Problem &problem;
  const PlanOptions &options;
  Clock::time_point start, deadline;
  PlanResult result;
  /// No arena is smaller: maxLive, with alignment counted (Problem.h).
  int64_t lowerBound = 0;
};

bool PlanBuilder::accept(const Plan &candidate, Algorithm producer) {
  ValidationResult check = validatePlan(problem, candidate);
  if (!check.ok()) {
    result.status = PlanStatus::InvalidPlan;
    result.message = std::string(algorithmName(producer)) +
                     " produced an invalid plan: " + check.message;
    return false;
  }
  result.plan = candidate;
  result.producedBy = producer;
  return true;
}

PlanResult PlanBuilder::finish(PlanStatus status, std::string message) {
  result.status = status;
  result.message = std::move(message);
  if (status == PlanStatus::Ok)
    result.provedOptimal =
        result.provedOptimal || result.plan.arenaSize <= lowerBound;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

PlanResult PlanBuilder::runHeuristic(BestFitOrder order, Algorithm algorithm) {
  if (!accept(planBestFit(problem, order), algorithm))
    return finish(PlanStatus::InvalidPlan, result.message);
  if (options.capacity && result.plan.arenaSize > *options.capacity)
    return finish(PlanStatus::NotFound,
                  std::string(algorithmName(algorithm)) + " needs " +
                      bytes(result.plan.arenaSize) + ", over the capacity of " +
                      bytes(*options.capacity));
  return finish(PlanStatus::Ok);
}

/// The smallest arena of at least `bytes` that a packing can have. An arena
/// is the end of its topmost buffer, an offset that is a multiple of the
/// buffer's alignment plus its size, so between two such ends no capacity
/// can be met that the lower one does not meet: a probe there would repeat
/// one the search has answered.
int64_t PlanBuilder::nextArena(int64_t bytes) const {
  int64_t best = -1;
  for (const Buffer &buffer : problem.buffers) {
    if (buffer.size <= 0)
      continue;
    int64_t end = buffer.size;
    if (end < bytes)
      end += (bytes - end + buffer.alignment - 1) / buffer.alignment *
             buffer.alignment;
    if (best < 0 || end < best)
      best = end;
  }
  return best < 0 ? bytes : best;
}

PlanResult PlanBuilder::runDecision(int64_t capacity) {
  ExactSearchResult search = searchPacking(problem, capacity, deadline);
  result.searchNodes += search.nodes;
  switch (search.outcome) {
  case SearchOutcome::Found:
    if (!accept(search.plan, Algorithm::Exact))
      return finish(PlanStatus::InvalidPlan, result.message);
    return finish(PlanStatus::Ok);
  case SearchOutcome::Infeasible:
    return finish(PlanStatus::Infeasible,
                  "no packing fits in " + bytes(capacity) +
                      " (exhaustive search; max-live is " +
                      bytes(result.maxLive) + ")");
  case SearchOutcome::TimedOut:
    break;
  }
  char limit[32];
  std::snprintf(limit, sizeof(limit), "%g", options.timeLimitSeconds);
  return finish(PlanStatus::NotFound, "no packing within " + bytes(capacity) +
                                          " found in the " + limit +
                                          " s time limit (max-live is " +
                                          bytes(result.maxLive) + ")");
}

PlanResult PlanBuilder::runDecisionWithHeuristics(int64_t capacity) {
  // Any packing within the capacity answers the decision problem, and the
  // greedy ones cost milliseconds; the search cannot exploit a loose capacity
  // as well as they do (its bounds ignore alignment padding, for one).
  for (auto [order, algorithm] :
       {std::pair{BestFitOrder::DecreasingSize, Algorithm::BestFitSize},
        std::pair{BestFitOrder::DecreasingLifetime,
                  Algorithm::BestFitLifetime}}) {
    Plan greedy = planBestFit(problem, order);
    if (greedy.arenaSize > capacity)
      continue;
    if (!accept(greedy, algorithm))
      return finish(PlanStatus::InvalidPlan, result.message);
    return finish(PlanStatus::Ok);
  }
  return runDecision(capacity);
}

PlanResult PlanBuilder::runMinimize() {
  // XLA keeps the better of its two orders; so do we, as the incumbent.
  Plan bySize = planBestFit(problem, BestFitOrder::DecreasingSize);
  Plan byLifetime = planBestFit(problem, BestFitOrder::DecreasingLifetime);
  bool lifetimeWins = byLifetime.arenaSize < bySize.arenaSize;
  if (!accept(lifetimeWins ? byLifetime : bySize,
              lifetimeWins ? Algorithm::BestFitLifetime
                           : Algorithm::BestFitSize))
    return finish(PlanStatus::InvalidPlan, result.message);

  int64_t low = nextArena(lowerBound);
  int64_t high = result.plan.arenaSize; // Known feasible.
  if (options.capacity && high > *options.capacity) {
    Plan heuristic = result.plan;
    PlanResult decided = runDecision(*options.capacity);
    if (!decided.ok()) {
      result.plan = heuristic; // Report the best over-capacity plan.
      return finish(decided.status, decided.message +
                                        "; best heuristic arena is " +
                                        bytes(heuristic.arenaSize));
    }
    high = result.plan.arenaSize;
  }

  // Look for smaller arenas, in granules (a capacity of k granules is met by
  // any arena that rounds up to k): the lower bound's granule first (often
  // feasible, and then optimal), then bisection. Only arenas a packing can
  // have are probed (nextArena). A probe that times out counts as failed but
  // proves nothing, so `proved` stays where the answered probes left it.
  int64_t granule = std::max<int64_t>(1, options.granule);
  auto granules = [&](int64_t value) {
    return (value + granule - 1) / granule;
  };
  int64_t proved = low;
  bool first = true;
  while (granules(low) < granules(high)) {
    Clock::time_point now = Clock::now();
    if (now >= deadline)
      break;
    int64_t lowUnits = granules(low), highUnits = granules(high);
    int64_t target =
        (first ? lowUnits : lowUnits + (highUnits - lowUnits) / 2) * granule;
    first = false;
    // Each probe gets half of what is left: the bound first, since a packing
    // there is optimal and is usually found fast when one exists.
    Clock::time_point probeDeadline = now + (deadline - now) / 2;
    ExactSearchResult search = searchPacking(problem, target, probeDeadline);
    result.searchNodes += search.nodes;
    if (search.outcome == SearchOutcome::Found) {
      if (!accept(search.plan, Algorithm::Exact))
        return finish(PlanStatus::InvalidPlan, result.message);
      high = result.plan.arenaSize;
      continue;
    }
    // Nothing fits in `target`: no arena below the next one a packing can
    // have (proved only when the search was exhaustive).
    low = nextArena(target + 1);
    if (search.outcome == SearchOutcome::Infeasible)
      proved = std::max(proved, low);
  }
  result.provedOptimal = granules(proved) >= granules(high);
  return finish(PlanStatus::Ok);
}

PlanResult PlanBuilder::run() {
  result.maxLive = maxLive(problem);
  if (std::string error = checkProblem(problem); !error.empty())
    return finish(PlanStatus::InvalidInput, error);
  lowerBound = alignedLowerBound(problem);
  if (options.capacity) {
    if (*options.capacity < 0)
      return finish(PlanStatus::InvalidInput,
                    "capacity must be >= 0, got " +
                        std::to_string(*options.capacity));
    if (result.maxLive > *options.capacity)
      return finish(PlanStatus::Infeasible,
                    "capacity of " + bytes(*options.capacity) +
                        " is below max-live (" + bytes(result.maxLive) + ")");
    if (lowerBound > *options.capacity)
      return finish(PlanStatus::Infeasible,
                    "capacity of " + bytes(*options.capacity) +
                        " is below the " + bytes(lowerBound) +
                        " that the buffers live at one moment take at their "
                        "alignment (max-live is " +
                        bytes(result.maxLive) + ")");
  }
  switch (options.algorithm) {
  case Algorithm::BestFitSize:
    return runHeuristic(BestFitOrder::DecreasingSize, Algorithm::BestFitSize);
  case Algorithm::BestFitLifetime:
    return runHeuristic(BestFitOrder::DecreasingLifetime,
                        Algorithm::BestFitLifetime);
  case Algorithm::Exact:
    if (options.capacity)
      return runDecisionWithHeuristics(*options.capacity);
    return runMinimize();
  case Algorithm::Auto:
    return runMinimize();
  }
  return finish(PlanStatus::InvalidInput, "unknown algorithm");
}

} // namespace

PlanResult plan(const Problem &problem, const PlanOptions &options) {
  return PlanBuilder(problem, options).run();
}

} // namespace memopt::planner
