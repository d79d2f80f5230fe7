//===- FastSolver.cpp - Greedy + large-neighbourhood remat search ---------===//
//
// Greedy repair (after XLA's HloRematerialization): while some step is over
// the budget, look at the step with the most memory and at every copy that
// is resident there without being read there. Recomputing that node just
// before its next read splits the copy's life in two. Each candidate comes in
// two variants: alone (its inputs stay resident longer), or together with
// the inputs that would otherwise be revived from the dead (recursively, as
// Checkmate's schedules do). The candidate with the largest drop of the
// over-budget bytes summed over all steps, per unit of added cost, wins.
// Unlike XLA, every candidate is scored by re-running the whole schedule, so
// the score is exact; then large-neighbourhood search improves the cost.
//
//===----------------------------------------------------------------------===//

#include "memopt/Remat/FastSolver.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>

namespace memopt::remat {

namespace {

using PositionPlan = StagedEvaluator::PositionPlan;
using Clock = std::chrono::steady_clock;

struct Move {
  // (position, stage) pairs to add.
  std::vector<std::pair<int, int>> additions;
};

class FastSearch {
public:
  FastSearch(const Graph &graph, const FastOptions &options)
      : options(options), evaluator(graph), rng(options.seed) {
    int count = evaluator.size();
    limit.resize(count);
    for (int p = 0; p < count; ++p)
      limit[p] =
          computationLimit(graph, evaluator.nodeAt(p), options.maxComputations);
    deadline = Clock::now() +
               std::chrono::duration_cast<Clock::duration>(
                   std::chrono::duration<double>(options.timeLimitSeconds));
  }

  FastResult run();

private:
  int64_t addedCost(const PositionPlan &plan) const {
    int64_t total = 0;
    for (int p = 0; p < evaluator.size(); ++p)
      total += evaluator.costAt(p) * static_cast<int64_t>(plan[p].size());
    return total;
  }

  int64_t evaluate(const PositionPlan &plan, int64_t &excess) {
    ++evaluations;
    int64_t peak = evaluator.run(plan, options.budget, excess);
    if (peak < smallestPeak) {
      smallestPeak = peak;
      smallestPeakPlan = plan;
    }
    return peak;
  }

  bool canAdd(const PositionPlan &plan, int p, int stage) const {
    if (stage <= p || stage >= evaluator.size())
      return false;
    if (static_cast<int>(plan[p].size()) + 1 >= limit[p])
      return false;
    return !std::binary_search(plan[p].begin(), plan[p].end(), stage);
  }

  static void add(PositionPlan &plan, int p, int stage) {
    auto it = std::lower_bound(plan[p].begin(), plan[p].end(), stage);
    plan[p].insert(it, stage);
  }

  static void remove(PositionPlan &plan, int p, int stage) {
    auto it = std::lower_bound(plan[p].begin(), plan[p].end(), stage);
    if (it != plan[p].end() && *it == stage)
      plan[p].erase(it);
  }

  bool outOfTime() const { return Clock::now() >= deadline; }

  void candidates(const PositionPlan &plan, int peakStep,
                  std::vector<Move> &moves);
  std::vector<Move> targetedMoves(const PositionPlan &plan);
  bool repair(PositionPlan &plan, double noise);
  void prune(PositionPlan &plan);

  const FastOptions &options;
  StagedEvaluator evaluator;
  std::mt19937_64 rng;
  std::vector<int> limit;
  Clock::time_point deadline;
  int64_t evaluations = 0;
  int64_t smallestPeak = std::numeric_limits<int64_t>::max();
  PositionPlan smallestPeakPlan;
  // Scratch for candidates().
  std::vector<int> firstReadAfter, copyStart;
  std::vector<std::vector<int>> copiesOf;
};

// Candidates at the step of highest memory, read from the evaluator's last
// run (which must be of `plan`).
void FastSearch::candidates(const PositionPlan &plan, int peakStep,
                            std::vector<Move> &moves) {
  const std::vector<int> &events = evaluator.events();
  const std::vector<int> &stageOf = evaluator.stageOfEvent();
  const std::vector<int> &lastUse = evaluator.lastUse();
  const std::vector<int> &reads = evaluator.reads();
  const std::vector<int> &readStart = evaluator.readStart();
  const std::vector<int> &stageStart = evaluator.stageStart();
  int steps = static_cast<int>(events.size());

  firstReadAfter.assign(steps, -1);
  for (int e = peakStep + 1; e < steps; ++e)
    for (int k = readStart[e]; k < readStart[e + 1]; ++k)
      if (firstReadAfter[reads[k]] < 0)
        firstReadAfter[reads[k]] = e;
  copiesOf.assign(evaluator.size(), {});
  for (int e = 0; e < steps; ++e)
    copiesOf[events[e]].push_back(e);

  // The step at which a recomputation of p in `stage` would run.
  auto insertionStep = [&](int p, int stage) {
    int e = stageStart[stage];
    while (events[e] < p && e + 1 < stageStart[stage + 1])
      ++e;
    return e;
  };

  int peakStage = stageOf[peakStep];
  // Recomputing p in `stage`, alone and (`withChain`) together with the
  // inputs that would otherwise be revived from the dead.
  auto propose = [&](int p, int stage, bool withChain) {
    if (!canAdd(plan, p, stage))
      return;
    // Recomputing in the peak's own stage only helps after the peak.
    if (stage < peakStage || (stage == peakStage && p < events[peakStep]))
      return;
    Move alone;
    alone.additions.push_back({p, stage});
    moves.push_back(alone);
    if (!withChain)
      return;
    Move chain;
    std::vector<std::pair<int, int>> work{{p, insertionStep(p, stage)}};
    std::vector<int> added{p};
    chain.additions.push_back({p, stage});
    while (!work.empty() && chain.additions.size() < 16) {
      auto [node, at] = work.back();
      work.pop_back();
      for (int input : evaluator.inputsAt(node)) {
        if (std::find(added.begin(), added.end(), input) != added.end())
          continue;
        const std::vector<int> &copies = copiesOf[input];
        auto it = std::lower_bound(copies.begin(), copies.end(), at);
        if (it == copies.begin())
          continue;
        int newest = *(it - 1);
        if (lastUse[newest] >= at || !canAdd(plan, input, stage))
          continue;
        chain.additions.push_back({input, stage});
        added.push_back(input);
        work.push_back({input, insertionStep(input, stage)});
      }
    }
    if (chain.additions.size() > 1)
      moves.push_back(chain);
  };

  for (int copy = 0; copy < peakStep; ++copy) {
    if (lastUse[copy] <= peakStep || firstReadAfter[copy] < 0)
      continue;
    int p = events[copy];
    int readerStage = stageOf[firstReadAfter[copy]];
    propose(p, readerStage, true);
    // Earlier stages, where an input's copy is still being read: the input
    // then need not stay resident until the reader's stage.
    for (int input : evaluator.inputsAt(p)) {
      const std::vector<int> &copies = copiesOf[input];
      auto it = std::lower_bound(copies.begin(), copies.end(), peakStep);
      if (it == copies.begin())
        continue;
      int stage = stageOf[lastUse[*(it - 1)]];
      if (stage < readerStage)
        propose(p, stage, false);
    }
  }
}

// Candidates at the step of highest memory and at up to three more steps
// over the budget in other stages (a copy resident across all of them may be
// the cheapest relief, and chains of recomputations are often only visible
// from a step other than the highest).
std::vector<Move> FastSearch::targetedMoves(const PositionPlan &plan) {
  const std::vector<int64_t> &memory = evaluator.memory();
  const std::vector<int> &stageOf = evaluator.stageOfEvent();
  std::vector<int> over;
  for (int e = 0; e < static_cast<int>(memory.size()); ++e)
    if (memory[e] > options.budget)
      over.push_back(e);
  std::stable_sort(over.begin(), over.end(),
                   [&](int a, int b) { return memory[a] > memory[b]; });
  std::vector<int> targets, stages;
  for (int e : over) {
    if (std::find(stages.begin(), stages.end(), stageOf[e]) != stages.end())
      continue;
    targets.push_back(e);
    stages.push_back(stageOf[e]);
    if (targets.size() == 4)
      break;
  }
  std::vector<Move> moves;
  for (int e : targets)
    candidates(plan, e, moves);
  for (Move &move : moves)
    std::sort(move.additions.begin(), move.additions.end());
  std::sort(moves.begin(), moves.end(), [](const Move &a, const Move &b) {
    return a.additions < b.additions;
  });
  moves.erase(std::unique(moves.begin(), moves.end(),
                          [](const Move &a, const Move &b) {
                            return a.additions == b.additions;
                          }),
              moves.end());
  return moves;
}

// Adds recomputations until the plan is within the budget. Returns false
// when no candidate lowers the over-budget bytes any more.
bool FastSearch::repair(PositionPlan &plan, double noise) {
  std::uniform_real_distribution<double> jitter(1.0 - noise, 1.0 + noise);
  int64_t excess = 0;
  evaluate(plan, excess);
  while (excess > 0) {
    std::vector<Move> moves = targetedMoves(plan);
    double bestScore = -1;
    const Move *best = nullptr;
    int64_t bestExcess = excess, bestMoveCost = 0;
    // The cheapest move that brings the plan within the budget on its own.
    const Move *finish = nullptr;
    int64_t finishCost = 0;
    for (const Move &move : moves) {
      int64_t cost = 0;
      for (auto [p, stage] : move.additions) {
        add(plan, p, stage);
        cost += evaluator.costAt(p);
      }
      int64_t after = 0;
      evaluate(plan, after);
      for (auto [p, stage] : move.additions)
        remove(plan, p, stage);
      if (after >= excess)
        continue;
      if (after == 0 && (!finish || cost < finishCost)) {
        finish = &move;
        finishCost = cost;
      }
      double gain = static_cast<double>(excess - after);
      // Free recomputations first, then bytes relieved per unit of cost.
      double score = cost == 0
                         ? 1e30 * gain / (1.0 + static_cast<double>(excess))
                         : gain / static_cast<double>(cost);
      if (noise > 0)
        score *= jitter(rng);
      if (score > bestScore) {
        bestScore = score;
        best = &move;
        bestExcess = after;
        bestMoveCost = cost;
      }
    }
    // A finishing move that costs no more than the best-scored one dominates
    // it; with noise, take the finishing move half of the time anyway.
    if (finish && (finishCost <= bestMoveCost || (noise > 0 && rng() % 2))) {
      best = finish;
      bestExcess = 0;
    }
    if (!best)
      return false;
    for (auto [p, stage] : best->additions)
      add(plan, p, stage);
    excess = bestExcess;
    evaluate(plan, excess);
  }
  return true;
}

// Drops recomputations that the budget no longer needs, most expensive
// first.
void FastSearch::prune(PositionPlan &plan) {
  std::vector<std::pair<int, int>> present;
  for (int p = 0; p < evaluator.size(); ++p)
    for (int stage : plan[p])
      present.push_back({p, stage});
  std::stable_sort(
      present.begin(), present.end(), [&](const auto &a, const auto &b) {
        return evaluator.costAt(a.first) > evaluator.costAt(b.first);
      });
  for (auto [p, stage] : present) {
    remove(plan, p, stage);
    int64_t excess = 0;
    evaluate(plan, excess);
    if (excess > 0)
      add(plan, p, stage);
  }
}

FastResult FastSearch::run() {
  int count = evaluator.size();
  FastResult result;
  // The best plan by (bytes over budget summed over steps, added cost).
  PositionPlan best(count);
  repair(best, 0.0);
  int64_t bestExcess = 0;
  evaluate(best, bestExcess);
  if (bestExcess == 0)
    prune(best);
  int64_t bestCost = addedCost(best);
  int64_t rounds = 0;
  int stall = 0;
  std::vector<std::pair<int, int>> present;
  // Late-acceptance hill climbing (Burke and Bykov): a round's plan replaces
  // the current one if it is no worse than the current one or than the
  // current one of `history.size()` rounds ago, so the search can cross
  // ridges that pure descent cannot.
  PositionPlan current = best;
  int64_t currentExcess = bestExcess, currentCost = bestCost;
  std::vector<std::pair<int64_t, int64_t>> history(64, {bestExcess, bestCost});
  while (stall < options.stallRounds && !outOfTime() &&
         !(bestExcess == 0 && bestCost == 0)) {
    ++rounds;
    ++stall;
    PositionPlan plan = current;
    present.clear();
    for (int p = 0; p < count; ++p)
      for (int stage : plan[p])
        present.push_back({p, stage});
    // Destroy: drop a few recomputations at random, or all of those in a
    // window of stages.
    if (!present.empty()) {
      std::shuffle(present.begin(), present.end(), rng);
      size_t drop =
          1 + rng() % std::min<size_t>(present.size(), 2 + present.size() / 3);
      if (rng() % 4 == 0) {
        int center = present[0].second;
        int width = 1 + static_cast<int>(rng() % (1 + count / 8));
        for (auto [p, stage] : present)
          if (std::abs(stage - center) <= width)
            remove(plan, p, stage);
      } else {
        for (size_t k = 0; k < drop; ++k)
          remove(plan, present[k].first, present[k].second);
      }
    }
    // Repair with randomized scores; a repair that gets stuck still counts
    // if it leaves fewer bytes over the budget.
    double noise = 0.1 + 0.4 * std::uniform_real_distribution<double>()(rng);
    repair(plan, noise);
    int64_t excess = 0;
    evaluate(plan, excess);
    if (excess == 0)
      prune(plan);
    int64_t cost = addedCost(plan);
    std::pair<int64_t, int64_t> key{excess, cost};
    std::pair<int64_t, int64_t> &past = history[rounds % history.size()];
    if (key <= past || key <= std::make_pair(currentExcess, currentCost)) {
      current = plan;
      currentExcess = excess;
      currentCost = cost;
    }
    if (std::make_pair(currentExcess, currentCost) < past)
      past = {currentExcess, currentCost};
    if (key < std::make_pair(bestExcess, bestCost)) {
      best = plan;
      bestExcess = excess;
      bestCost = cost;
      stall = 0;
    }
  }
  bool found = bestExcess == 0;
  result.found = found;
  result.rounds = rounds;
  result.smallestPeak = smallestPeak;
  const PositionPlan &chosen = found ? best : smallestPeakPlan;
  int64_t excess = 0;
  result.peakBytes = evaluator.run(chosen, options.budget, excess);
  int64_t base = 0;
  for (int p = 0; p < count; ++p)
    base += evaluator.costAt(p);
  result.totalCost = base + addedCost(chosen);
  result.plan = evaluator.fromPositions(chosen);
  result.evaluations = evaluations;
  return result;
}

} // namespace

FastResult solveFast(const Graph &graph, const FastOptions &options) {
  FastSearch search(graph, options);
  return search.run();
}

} // namespace memopt::remat
