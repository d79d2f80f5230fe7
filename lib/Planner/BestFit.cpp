//===- BestFit.cpp - Greedy best-fit memory planners ----------------------===//

#include "memopt/Planner/BestFit.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace memopt::planner {

Plan planBestFit(const Problem &problem, BestFitOrder order) {
  const std::vector<Buffer> &buffers = problem.buffers;
  std::vector<size_t> sequence(buffers.size());
  std::iota(sequence.begin(), sequence.end(), 0);
  std::stable_sort(sequence.begin(), sequence.end(), [&](size_t a, size_t b) {
    const Buffer &x = buffers[a], &y = buffers[b];
    int64_t xLength = x.upper - x.lower, yLength = y.upper - y.lower;
    if (order == BestFitOrder::DecreasingSize) {
      if (x.size != y.size)
        return x.size > y.size;
      return x.lower < y.lower;
    }
    if (xLength != yLength)
      return xLength > yLength;
    if (x.size != y.size)
      return x.size > y.size;
    return x.lower < y.lower;
  });

  Plan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> placed;
  // Byte ranges of placed buffers live together with the current one.
  std::vector<std::pair<int64_t, int64_t>> occupied;
  for (size_t index : sequence) {
    const Buffer &buffer = buffers[index];
    if (buffer.size == 0)
      continue;
    occupied.clear();
    for (size_t other : placed) {
      const Buffer &o = buffers[other];
      if (o.lower < buffer.upper && buffer.lower < o.upper)
        occupied.push_back({plan.offsets[other], plan.offsets[other] + o.size});
    }
    std::sort(occupied.begin(), occupied.end());

    int64_t bestOffset = -1;
    int64_t bestGap = std::numeric_limits<int64_t>::max();
    int64_t cursor = 0; // Everything below `cursor` is taken.
    for (const auto &[begin, end] : occupied) {
      int64_t candidate = alignUp(cursor, buffer.alignment);
      if (candidate + buffer.size <= begin && begin - cursor < bestGap) {
        bestGap = begin - cursor;
        bestOffset = candidate;
      }
      cursor = std::max(cursor, end);
    }
    if (bestOffset < 0)
      bestOffset = alignUp(cursor, buffer.alignment);
    plan.offsets[index] = bestOffset;
    placed.push_back(index);
  }
  plan.arenaSize = arenaSizeOf(problem, plan.offsets);
  return plan;
}

} // namespace memopt::planner
