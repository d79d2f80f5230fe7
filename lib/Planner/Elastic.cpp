//===- Elastic.cpp - growing scratch buffers into free space --------------===//

#include "memopt/Planner/Elastic.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace memopt::planner {

int64_t growIntoFreeSpace(Problem &problem, Plan &plan,
                          const std::vector<int64_t> &maxSizes) {
  std::vector<Buffer> &buffers = problem.buffers;
  std::vector<size_t> order;
  for (size_t i = 0; i < buffers.size() && i < maxSizes.size(); ++i)
    if (maxSizes[i] > buffers[i].size && buffers[i].lower < buffers[i].upper)
      order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return maxSizes[a] > maxSizes[b];
  });

  int64_t added = 0;
  std::vector<std::pair<int64_t, int64_t>> used;
  for (size_t i : order) {
    Buffer &buffer = buffers[i];
    used.clear();
    for (size_t j = 0; j < buffers.size(); ++j) {
      const Buffer &other = buffers[j];
      if (j == i || other.size == 0 || other.upper <= buffer.lower ||
          buffer.upper <= other.lower)
        continue;
      used.push_back({plan.offsets[j], plan.offsets[j] + other.size});
    }
    std::sort(used.begin(), used.end());
    // Walk the free blocks of [0, arenaSize) between the used ranges.
    int64_t bestOffset = plan.offsets[i], bestSize = buffer.size;
    int64_t cursor = 0;
    auto consider = [&](int64_t begin, int64_t end) {
      int64_t start = alignUp(begin, buffer.alignment);
      if (start >= end)
        return;
      int64_t size = std::min(maxSizes[i], end - start);
      if (size > bestSize) {
        bestSize = size;
        bestOffset = start;
      }
    };
    for (const auto &[begin, end] : used) {
      if (begin > cursor)
        consider(cursor, begin);
      cursor = std::max(cursor, end);
    }
    if (cursor < plan.arenaSize)
      consider(cursor, plan.arenaSize);
    added += bestSize - buffer.size;
    buffer.size = bestSize;
    plan.offsets[i] = bestOffset;
  }
  return added;
}

} // namespace memopt::planner
