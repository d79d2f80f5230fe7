//===- Validator.cpp - Independent check of a memory plan -----------------===//
//
// Deliberately simple: per-buffer checks, then every pair of buffers whose
// lifetimes intersect, found by sorting on the start time. The pair loop costs
// O(n log n + number of time-overlapping pairs), and uses none of the
// planners' data structures (sections, gap lists), so a bug there cannot hide
// itself here.
//
//===----------------------------------------------------------------------===//

#include "memopt/Planner/Validator.h"

#include <algorithm>

namespace memopt::planner {

static std::string describe(const Buffer &buffer, int64_t offset) {
  return "buffer " + std::to_string(buffer.id) + " (lifetime [" +
         std::to_string(buffer.lower) + ", " + std::to_string(buffer.upper) +
         "), bytes [" + std::to_string(offset) + ", " +
         std::to_string(offset + buffer.size) + "))";
}

ValidationResult validatePlan(const Problem &problem, const Plan &plan,
                              std::optional<int64_t> capacity) {
  const std::vector<Buffer> &buffers = problem.buffers;
  if (plan.offsets.size() != buffers.size())
    return {Violation::OffsetCount,
            "plan has " + std::to_string(plan.offsets.size()) +
                " offsets for " + std::to_string(buffers.size()) + " buffers"};
  if (capacity && plan.arenaSize > *capacity)
    return {Violation::OverCapacity,
            "arena size " + std::to_string(plan.arenaSize) +
                " exceeds the capacity " + std::to_string(*capacity)};

  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer &buffer = buffers[i];
    int64_t offset = plan.offsets[i];
    if (offset < 0)
      return {Violation::NegativeOffset, "buffer " + std::to_string(buffer.id) +
                                             " has negative offset " +
                                             std::to_string(offset)};
    if (buffer.alignment > 1 && offset % buffer.alignment != 0)
      return {Violation::Misaligned,
              "buffer " + std::to_string(buffer.id) + " at offset " +
                  std::to_string(offset) + " is not aligned to " +
                  std::to_string(buffer.alignment)};
    if (offset > plan.arenaSize - buffer.size)
      return {Violation::OutsideArena,
              describe(buffer, offset) + " ends past the arena of " +
                  std::to_string(plan.arenaSize) + " bytes"};
  }

  // Buffers that occupy bytes over a non-empty lifetime, by start time.
  std::vector<size_t> order;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].size > 0 && buffers[i].lower < buffers[i].upper)
      order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return buffers[a].lower < buffers[b].lower;
  });
  for (size_t x = 0; x < order.size(); ++x) {
    const Buffer &first = buffers[order[x]];
    int64_t firstOffset = plan.offsets[order[x]];
    // Every later buffer starting before `first` ends is live with it.
    for (size_t y = x + 1; y < order.size(); ++y) {
      const Buffer &second = buffers[order[y]];
      if (second.lower >= first.upper)
        break;
      int64_t secondOffset = plan.offsets[order[y]];
      bool bytesIntersect = firstOffset < secondOffset + second.size &&
                            secondOffset < firstOffset + first.size;
      if (bytesIntersect)
        return {Violation::Overlap, describe(first, firstOffset) + " and " +
                                        describe(second, secondOffset) +
                                        " are live together and overlap"};
    }
  }
  return {};
}

} // namespace memopt::planner
