//===- Staged.cpp - Staged schedules and their fast evaluation ------------===//

#include "memopt/Remat/Staged.h"

#include <algorithm>

namespace memopt::remat {

std::vector<int> stagedSchedule(const Graph &graph, const StagedPlan &plan) {
  int count = static_cast<int>(graph.nodes.size());
  std::vector<int> position(count);
  for (int p = 0; p < count; ++p)
    position[graph.order[p]] = p;
  std::vector<std::vector<int>> bucket(count);
  for (int p = 0; p < count; ++p) {
    int v = graph.order[p];
    if (v < static_cast<int>(plan.recomputeStages.size()))
      for (int stage : plan.recomputeStages[v])
        bucket[stage].push_back(v);
  }
  std::vector<int> schedule;
  for (int stage = 0; stage < count; ++stage) {
    for (int v : bucket[stage])
      schedule.push_back(v);
    schedule.push_back(graph.order[stage]);
  }
  return schedule;
}

bool planFromSchedule(const Graph &graph, const std::vector<int> &schedule,
                      StagedPlan &plan) {
  int count = static_cast<int>(graph.nodes.size());
  std::vector<int> position(count);
  for (int p = 0; p < count; ++p)
    position[graph.order[p]] = p;
  plan.recomputeStages.assign(count, {});
  std::vector<bool> computed(count, false);
  int stage = 0;
  size_t step = 0;
  while (step < schedule.size()) {
    if (stage >= count)
      return false;
    // Recomputations of stage `stage`, in increasing position, then the first
    // computation of order[stage].
    int lastPosition = -1;
    while (step < schedule.size() && schedule[step] != graph.order[stage]) {
      int v = schedule[step];
      if (v < 0 || v >= count || !computed[v] || position[v] <= lastPosition)
        return false;
      lastPosition = position[v];
      plan.recomputeStages[v].push_back(stage);
      ++step;
    }
    if (step == schedule.size())
      return false;
    computed[graph.order[stage]] = true;
    ++step;
    ++stage;
  }
  return stage == count;
}

StagedEvaluator::StagedEvaluator(const Graph &graph) : order(graph.order) {
  int count = static_cast<int>(order.size());
  position.assign(count, 0);
  for (int p = 0; p < count; ++p)
    position[order[p]] = p;
  inputs.assign(count, {});
  users.assign(count, {});
  bytes.assign(count, 0);
  cost.assign(count, 0);
  scratch.assign(count, 0);
  inPlaceFrom.assign(count, -1);
  for (int p = 0; p < count; ++p) {
    int v = order[p];
    bytes[p] = graph.nodes[v].bytes;
    cost[p] = graph.nodes[v].cost;
    scratch[p] = graph.nodes[v].scratchBytes;
    if (mayWriteInPlace(graph, v))
      inPlaceFrom[p] = position[graph.nodes[v].inPlaceInput];
    for (int u : graph.inputs[v]) {
      inputs[p].push_back(position[u]);
      users[position[u]].push_back(p);
    }
    std::sort(inputs[p].begin(), inputs[p].end());
  }
  for (auto &list : users)
    std::sort(list.begin(), list.end());
  bucket.assign(count, {});
  newestCopy.assign(count, -1);
}

StagedEvaluator::PositionPlan
StagedEvaluator::toPositions(const StagedPlan &plan) const {
  PositionPlan result(size());
  for (size_t v = 0; v < plan.recomputeStages.size(); ++v)
    result[position[v]] = plan.recomputeStages[v];
  return result;
}

StagedPlan StagedEvaluator::fromPositions(const PositionPlan &plan) const {
  StagedPlan result;
  result.recomputeStages.assign(size(), {});
  for (int p = 0; p < size(); ++p)
    result.recomputeStages[order[p]] = plan[p];
  return result;
}

int64_t StagedEvaluator::run(const PositionPlan &plan, int64_t budget,
                             int64_t &excess) {
  int count = size();
  for (auto &list : bucket)
    list.clear();
  for (int p = 0; p < count; ++p)
    for (int stage : plan[p])
      bucket[stage].push_back(p);
  eventPos.clear();
  eventStage.clear();
  firstOfStage.clear();
  for (int stage = 0; stage < count; ++stage) {
    firstOfStage.push_back(static_cast<int>(eventPos.size()));
    for (int p : bucket[stage]) {
      eventPos.push_back(p);
      eventStage.push_back(stage);
    }
    eventPos.push_back(stage);
    eventStage.push_back(stage);
  }
  int steps = static_cast<int>(eventPos.size());
  firstOfStage.push_back(steps);
  eventLastUse.assign(steps, 0);
  readCopies.clear();
  readBegin.assign(steps + 1, 0);
  inPlaceCopy.assign(steps, -1);
  for (int e = 0; e < steps; ++e) {
    int p = eventPos[e];
    readBegin[e] = static_cast<int>(readCopies.size());
    for (int u : inputs[p]) {
      int copy = newestCopy[u];
      eventLastUse[copy] = e;
      readCopies.push_back(copy);
      if (u == inPlaceFrom[p])
        inPlaceCopy[e] = copy;
    }
    newestCopy[p] = e;
    eventLastUse[e] = e;
  }
  readBegin[steps] = static_cast<int>(readCopies.size());
  delta.assign(steps + 1, 0);
  for (int e = 0; e < steps; ++e) {
    int64_t size = bytes[eventPos[e]];
    delta[e] += size;
    delta[eventLastUse[e] + 1] -= size;
    delta[e] += scratch[eventPos[e]];
    delta[e + 1] -= scratch[eventPos[e]];
    // An in-place computation takes over the copy it reads last: the copy
    // ends one step early, where the output begins.
    int copy = inPlaceCopy[e];
    if (copy >= 0 && eventLastUse[copy] == e) {
      delta[e] -= size;
      delta[e + 1] += size;
    }
  }
  eventMemory.resize(steps);
  int64_t current = 0, peak = 0;
  excess = 0;
  for (int e = 0; e < steps; ++e) {
    current += delta[e];
    eventMemory[e] = current;
    peak = std::max(peak, current);
    if (current > budget)
      excess += current - budget;
  }
  std::fill(newestCopy.begin(), newestCopy.end(), -1);
  return peak;
}

} // namespace memopt::remat
