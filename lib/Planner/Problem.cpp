//===- Problem.cpp - Static memory planning problem -----------------------===//

#include "memopt/Planner/Problem.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace memopt::planner {

namespace {

/// The largest total of `weight(buffer)` over buffers live at one moment.
template <typename Weight>
int64_t peakLive(const Problem &problem, Weight weight) {
  // Sweep over lifetime endpoints. At equal times an end (+0) sorts before a
  // start (+1): lifetimes are half-open, so those buffers never coexist.
  std::vector<std::pair<int64_t, int>> events;
  events.reserve(problem.buffers.size() * 2);
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const Buffer &buffer = problem.buffers[i];
    if (buffer.size <= 0 || buffer.lower >= buffer.upper)
      continue;
    events.push_back({buffer.lower, 2 * static_cast<int>(i) + 1});
    events.push_back({buffer.upper, 2 * static_cast<int>(i)});
  }
  std::sort(events.begin(), events.end(), [](const auto &a, const auto &b) {
    if (a.first != b.first)
      return a.first < b.first;
    return (a.second & 1) < (b.second & 1);
  });
  int64_t live = 0, peak = 0;
  for (const auto &[time, code] : events) {
    const Buffer &buffer = problem.buffers[code / 2];
    if (code & 1) {
      live += weight(buffer);
      peak = std::max(peak, live);
    } else {
      live -= weight(buffer);
    }
  }
  return peak;
}

} // namespace

int64_t maxLive(const Problem &problem) {
  return peakLive(problem, [](const Buffer &buffer) { return buffer.size; });
}

int64_t offsetGrain(const Problem &problem) {
  int64_t grain = 0;
  for (const Buffer &buffer : problem.buffers)
    if (buffer.size > 0)
      grain = std::gcd(grain, buffer.alignment);
  return grain > 0 ? grain : 1;
}

int64_t largestPadding(const Problem &problem, int64_t grain) {
  int64_t padding = 0;
  for (const Buffer &buffer : problem.buffers)
    if (buffer.size > 0)
      padding = std::max(padding, alignUp(buffer.size, grain) - buffer.size);
  return padding;
}

int64_t alignedLowerBound(const Problem &problem) {
  int64_t grain = offsetGrain(problem);
  if (grain == 1)
    return maxLive(problem);
  int64_t padded = peakLive(problem, [&](const Buffer &buffer) {
    return alignUp(buffer.size, grain);
  });
  return std::max(maxLive(problem), padded - largestPadding(problem, grain));
}

std::string checkProblem(const Problem &problem) {
  // Keeping every size and the total below 2^61 leaves headroom for the
  // offset + size sums and alignment round-ups the planners compute.
  constexpr int64_t kLimit = int64_t(1) << 61;
  int64_t total = 0;
  for (const Buffer &buffer : problem.buffers) {
    std::string name = "buffer " + std::to_string(buffer.id);
    if (buffer.size < 0)
      return name + ": negative size " + std::to_string(buffer.size);
    if (buffer.alignment < 1)
      return name + ": alignment must be >= 1, got " +
             std::to_string(buffer.alignment);
    if (buffer.size > 0 && buffer.upper <= buffer.lower)
      return name + ": empty lifetime [" + std::to_string(buffer.lower) + ", " +
             std::to_string(buffer.upper) + ") for a buffer of size " +
             std::to_string(buffer.size);
    if (buffer.size >= kLimit || buffer.alignment >= kLimit ||
        total >= kLimit - buffer.size - buffer.alignment)
      return name + ": sizes too large (the total must stay below 2^61)";
    total += buffer.size + buffer.alignment;
  }
  return {};
}

int64_t arenaSizeOf(const Problem &problem,
                    const std::vector<int64_t> &offsets) {
  int64_t arena = 0;
  for (size_t i = 0; i < problem.buffers.size() && i < offsets.size(); ++i)
    arena = std::max(arena, offsets[i] + problem.buffers[i].size);
  return arena;
}

} // namespace memopt::planner
