//===- ExactSolver.cpp - Exact packing search -----------------------------===//
//
// Depth-first search over canonical packings, after MiniMalloc (ASPLOS 2023).
// Written from the paper's description of the method, not from its code.
//
// Canonical packings. Any packing can be pushed down until every buffer sits
// at offset 0 or at the (aligned) top of a buffer below it that is live at the
// same time. Listing the buffers of such a packing by offset, each one sits at
// the lowest offset the earlier ones allow: its "minimum offset", the aligned
// maximum of the tops of earlier placed buffers that it meets in time. So the
// search only ever places a buffer at its minimum offset, and only in
// non-decreasing offset order (ties broken by a static rank), which visits
// every canonical packing once.
//
// Inference and pruning at each node:
//  - Minimum offsets are raised as buffers are placed; a buffer whose minimum
//    offset plus size exceeds the capacity kills the branch.
//  - Sections: the time axis is cut into the maximal sets of buffers live at
//    one moment. A section's buffers still to place all sit at or above the
//    section's floor (the highest top placed in it, and the lowest minimum
//    offset of its unplaced buffers) and at or above the offset just used
//    (placements never go down), and they are stacked; so
//    max(floor, offset) + (their total size) must fit in the capacity.
//    Sizes count their alignment: every offset is a multiple of the grain
//    (the gcd of the alignments), so a buffer with another stacked on it
//    takes its size rounded up to the grain, and a stack needs its padded
//    total less the largest padding (only the topmost keeps its tail). With
//    256-byte offsets and small tensors the unpadded bound is far too weak to
//    refute a capacity, and the search then ran to its time limit.
//  - Dominance: if some unplaced buffer could sit entirely below a candidate
//    offset (its minimum offset + size <= that offset), placing the candidate
//    there leaves a gap that buffer would fill; such branches are skipped.
//  - Forced moves ("hatless" buffers, from MiniMalloc's later releases): when
//    placing a buffer raised no other buffer's minimum offset, nothing still
//    to place sits above it, so if that branch fails, no sibling can succeed.
//  - Decomposition: when no unplaced buffer spans the boundary between two
//    sections, the buffers left on either side are independent and are
//    solved as separate subproblems (a failure in one fails the node).
//
// Ordering. Candidates at a node are tried by minimum offset, then by a static
// rank computed per subproblem from each buffer's lifetime width (W), area
// (size x width, A) and the largest section total it meets (T). As in
// MiniMalloc, three rank orders (WAT, TAW, TWA) are tried round-robin with a
// node budget that doubles each round, so one unlucky order cannot stall the
// search forever.
//
//===----------------------------------------------------------------------===//

#include "memopt/Planner/ExactSolver.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

namespace memopt::planner {
namespace {

using Clock = std::chrono::steady_clock;

enum class Status { Found, NotFound, NodeLimit, TimedOut };

struct Item {
  int64_t size = 0;
  /// The size rounded up to the problem's offset grain.
  int64_t padded = 0;
  int64_t alignment = 1;
  int64_t lower = 0;
  int64_t upper = 0;
  /// Index into Problem::buffers.
  size_t buffer = 0;
  /// The sections this item is live in: [firstSection, endSection).
  int firstSection = 0;
  int endSection = 0;
  /// Items whose lifetimes intersect this one's.
  std::vector<int> overlaps;
};

/// A subproblem: the unplaced items live in sections [begin, end), in rank
/// order.
struct Subproblem {
  int begin = 0;
  int end = 0;
  std::vector<int> ranked;
};

/// Per-section totals with range add and range max, so the monotonic-floor
/// bound (offset + largest unplaced total <= capacity) costs O(log sections)
/// per node instead of a scan.
class SectionTotals {
public:
  void init(const std::vector<int64_t> &values) {
    count = static_cast<int>(values.size());
    maxima.assign(4 * std::max(count, 1), 0);
    pending.assign(4 * std::max(count, 1), 0);
    if (count > 0)
      build(1, 0, count, values);
  }
  void add(int begin, int end, int64_t delta) {
    if (begin < end)
      add(1, 0, count, begin, end, delta);
  }
  int64_t max(int begin, int end) const {
    return begin < end ? max(1, 0, count, begin, end) : 0;
  }

private:
  void build(int node, int low, int high, const std::vector<int64_t> &values) {
    if (high - low == 1) {
      maxima[node] = values[low];
      return;
    }
    int middle = (low + high) / 2;
    build(2 * node, low, middle, values);
    build(2 * node + 1, middle, high, values);
    maxima[node] = std::max(maxima[2 * node], maxima[2 * node + 1]);
  }
  void add(int node, int low, int high, int begin, int end, int64_t delta) {
    if (end <= low || high <= begin)
      return;
    if (begin <= low && high <= end) {
      maxima[node] += delta;
      pending[node] += delta;
      return;
    }
    int middle = (low + high) / 2;
    add(2 * node, low, middle, begin, end, delta);
    add(2 * node + 1, middle, high, begin, end, delta);
    maxima[node] =
        pending[node] + std::max(maxima[2 * node], maxima[2 * node + 1]);
  }
  int64_t max(int node, int low, int high, int begin, int end) const {
    if (begin <= low && high <= end)
      return maxima[node];
    int middle = (low + high) / 2;
    int64_t best = std::numeric_limits<int64_t>::min();
    if (begin < middle)
      best = std::max(best, max(2 * node, low, middle, begin, end));
    if (middle < end)
      best = std::max(best, max(2 * node + 1, middle, high, begin, end));
    return best + pending[node];
  }

  int count = 0;
  std::vector<int64_t> maxima, pending;
};

class PackingSearch {
public:
  PackingSearch(const Problem &problem, int64_t capacity,
                Clock::time_point deadline)
      : problem(problem), capacity(capacity), deadline(deadline) {}

  ExactSearchResult run();

private:
  void buildItems();
  void sweep();
  Status solveAll(const std::string &heuristic);
  Status solveRange(int begin, int end, std::vector<int> members,
                    const std::string &heuristic);
  Status search(const Subproblem &sub, const std::string &heuristic,
                int64_t lastOffset, int lastRank);
  Status place(const Subproblem &sub, const std::string &heuristic, int rank,
               int64_t offset, bool &raisedNothing);
  Status descend(const Subproblem &sub, const std::string &heuristic, int item,
                 int64_t offset, int rank);

  const Problem &problem;
  const int64_t capacity;
  const Clock::time_point deadline;
  /// Every offset is a multiple of `grain`; `padding` is the most a size
  /// gains rounded up to it (Problem.h: offsetGrain, largestPadding).
  int64_t grain = 1;
  int64_t padding = 0;

  /// Whether unplaced items of padded total `stacked`, all at or above
  /// `base`, cannot fit under the capacity.
  bool overflows(int64_t base, int64_t stacked) const {
    return stacked > 0 && alignUp(base, grain) + stacked - padding > capacity;
  }

  std::vector<Item> items;
  std::vector<std::vector<int>> sections;

  // Search state, restored on backtrack.
  std::vector<int64_t> offset;    // -1 while unplaced.
  std::vector<int64_t> minOffset; // Lowest canonical offset per item.
  std::vector<int64_t> floor;     // Per section.
  std::vector<int64_t> total;     // Unplaced size per section.
  std::vector<int> cuts;          // Unplaced items spanning s | s+1.
  SectionTotals totalTree;        // Mirrors `total` for range maxima.
  std::vector<std::pair<int, int64_t>> offsetTrail, floorTrail;
  // Scratch space reused across nodes: candidate lists stack up with the
  // recursion; the affected-section list is used and emptied per placement.
  std::vector<std::pair<int64_t, int>> candidateStack;
  std::vector<int> affected;
  std::vector<unsigned> sectionStamp;
  unsigned stamp = 0;

  std::vector<int64_t> solution;
  int64_t nodes = 0;
  int64_t nodeBudget = 0;
  bool timedOut = false;
};

void PackingSearch::buildItems() {
  grain = offsetGrain(problem);
  padding = largestPadding(problem, grain);
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const Buffer &buffer = problem.buffers[i];
    if (buffer.size == 0)
      continue;
    Item item;
    item.size = buffer.size;
    item.padded = alignUp(buffer.size, grain);
    item.alignment = buffer.alignment;
    item.lower = buffer.lower;
    item.upper = buffer.upper;
    item.buffer = i;
    items.push_back(std::move(item));
  }
}

// Sweeps lifetime endpoints (ends before starts at equal times). A section is
// emitted at the first end after any start: it is the set of items live just
// then, a maximal set of items live together.
void PackingSearch::sweep() {
  std::vector<std::pair<int64_t, int>> events;
  for (size_t i = 0; i < items.size(); ++i) {
    events.push_back({items[i].lower, 2 * static_cast<int>(i) + 1});
    events.push_back({items[i].upper, 2 * static_cast<int>(i)});
  }
  std::sort(events.begin(), events.end(), [](const auto &a, const auto &b) {
    if (a.first != b.first)
      return a.first < b.first;
    if ((a.second & 1) != (b.second & 1))
      return (a.second & 1) < (b.second & 1);
    return a.second < b.second;
  });
  std::vector<int> active;
  std::vector<size_t> position(items.size());
  bool startedSinceSection = false;
  for (const auto &[time, code] : events) {
    int index = code / 2;
    Item &item = items[index];
    if (code & 1) {
      for (int other : active) {
        items[other].overlaps.push_back(index);
        item.overlaps.push_back(other);
      }
      position[index] = active.size();
      active.push_back(index);
      item.firstSection = static_cast<int>(sections.size());
      startedSinceSection = true;
      continue;
    }
    if (startedSinceSection) {
      sections.push_back(active);
      startedSinceSection = false;
    }
    size_t at = position[index];
    active[at] = active.back();
    position[active[at]] = at;
    active.pop_back();
    item.endSection = static_cast<int>(sections.size());
  }
}

ExactSearchResult PackingSearch::run() {
  ExactSearchResult result;
  buildItems();
  for (const Item &item : items) {
    if (item.size > capacity) {
      result.outcome = SearchOutcome::Infeasible;
      return result;
    }
  }
  sweep();
  size_t count = items.size();
  offset.assign(count, -1);
  minOffset.assign(count, 0);
  solution.assign(count, 0);
  floor.assign(sections.size(), 0);
  total.assign(sections.size(), 0);
  sectionStamp.assign(sections.size(), 0);
  cuts.assign(sections.empty() ? 0 : sections.size() - 1, 0);
  for (const Item &item : items) {
    for (int s = item.firstSection; s < item.endSection; ++s)
      total[s] += item.padded;
    for (int s = item.firstSection; s + 1 < item.endSection; ++s)
      ++cuts[s];
  }

  // Every later check is incremental, so it starts from a state that holds.
  for (int64_t sectionTotal : total) {
    if (overflows(0, sectionTotal)) {
      result.outcome = SearchOutcome::Infeasible;
      return result;
    }
  }
  totalTree.init(total);

  static const char *const kHeuristics[] = {"WAT", "TAW", "TWA"};
  Status status = Status::NodeLimit;
  for (int64_t budget = 2 * static_cast<int64_t>(count) + 2;
       status == Status::NodeLimit; budget *= 2) {
    for (const char *heuristic : kHeuristics) {
      nodeBudget = budget;
      status = solveAll(heuristic);
      if (status != Status::NodeLimit)
        break;
    }
  }
  result.nodes = nodes;
  if (status == Status::TimedOut)
    return result;
  if (status == Status::NotFound) {
    result.outcome = SearchOutcome::Infeasible;
    return result;
  }
  result.outcome = SearchOutcome::Found;
  result.plan.offsets.assign(problem.buffers.size(), 0);
  for (size_t i = 0; i < count; ++i)
    result.plan.offsets[items[i].buffer] = solution[i];
  result.plan.arenaSize = arenaSizeOf(problem, result.plan.offsets);
  return result;
}

Status PackingSearch::solveAll(const std::string &heuristic) {
  std::vector<int> all(items.size());
  std::iota(all.begin(), all.end(), 0);
  int begin = 0;
  for (int s = 0; s < static_cast<int>(sections.size()); ++s) {
    if (s + 1 < static_cast<int>(sections.size()) && cuts[s] != 0)
      continue;
    std::vector<int> members;
    for (int item : all)
      if (items[item].firstSection >= begin && items[item].firstSection <= s)
        members.push_back(item);
    Status status = solveRange(begin, s + 1, std::move(members), heuristic);
    if (status != Status::Found)
      return status;
    begin = s + 1;
  }
  return Status::Found;
}

Status PackingSearch::solveRange(int begin, int end, std::vector<int> members,
                                 const std::string &heuristic) {
  if (members.empty())
    return Status::Found;
  // Static rank keys, computed with the section totals of this moment.
  struct Keys {
    double width, area, total;
  };
  std::vector<Keys> keys(items.size());
  for (int item : members) {
    const Item &it = items[item];
    int64_t largest = 0;
    for (int s = it.firstSection; s < it.endSection; ++s)
      largest = std::max(largest, total[s]);
    double width = static_cast<double>(it.upper - it.lower);
    keys[item] = {width, width * static_cast<double>(it.size),
                  static_cast<double>(largest)};
  }
  std::sort(members.begin(), members.end(), [&](int a, int b) {
    for (char letter : heuristic) {
      double x = 0, y = 0;
      if (letter == 'W') {
        x = keys[a].width;
        y = keys[b].width;
      } else if (letter == 'A') {
        x = keys[a].area;
        y = keys[b].area;
      } else {
        x = keys[a].total;
        y = keys[b].total;
      }
      if (x != y)
        return x > y;
    }
    return a < b;
  });
  Subproblem sub{begin, end, std::move(members)};
  return search(sub, heuristic, 0, 0);
}

Status PackingSearch::search(const Subproblem &sub,
                             const std::string &heuristic, int64_t lastOffset,
                             int lastRank) {
  if (--nodeBudget < 0)
    return Status::NodeLimit;
  if ((++nodes & 255) == 1 && Clock::now() >= deadline)
    timedOut = true;
  if (timedOut)
    return Status::TimedOut;

  size_t mark = candidateStack.size();
  int64_t lowestTop = std::numeric_limits<int64_t>::max();
  for (int rank = 0; rank < static_cast<int>(sub.ranked.size()); ++rank) {
    int item = sub.ranked[rank];
    if (offset[item] >= 0)
      continue;
    candidateStack.push_back({minOffset[item], rank});
    lowestTop = std::min(lowestTop, minOffset[item] + items[item].size);
  }
  if (candidateStack.size() == mark)
    return Status::Found;
  std::sort(candidateStack.begin() + mark, candidateStack.end());

  Status status = Status::NotFound;
  // Indexes, not iterators: deeper nodes grow the stack and may move it.
  for (size_t c = mark; c < candidateStack.size(); ++c) {
    auto [candidateOffset, rank] = candidateStack[c];
    // Dominance: some unplaced item fits wholly below this offset.
    if (candidateOffset >= lowestTop)
      break;
    // Canonical order: offsets never decrease; ties go by rank.
    if (candidateOffset < lastOffset ||
        (candidateOffset == lastOffset && rank < lastRank))
      continue;
    bool raisedNothing = false;
    status = place(sub, heuristic, rank, candidateOffset, raisedNothing);
    if (status != Status::NotFound || raisedNothing)
      break;
  }
  candidateStack.resize(mark);
  return status;
}

Status PackingSearch::place(const Subproblem &sub, const std::string &heuristic,
                            int rank, int64_t at, bool &raisedNothing) {
  int index = sub.ranked[rank];
  const Item &item = items[index];
  offset[index] = at;
  solution[index] = at;
  size_t offsetMark = offsetTrail.size(), floorMark = floorTrail.size();
  int64_t top = at + item.size;
  bool feasible = true;
  raisedNothing = true;

  // Raise the minimum offsets of unplaced items live with this one.
  ++stamp;
  affected.clear();
  for (int other : item.overlaps) {
    if (offset[other] >= 0 || minOffset[other] >= top)
      continue;
    const Item &o = items[other];
    offsetTrail.push_back({other, minOffset[other]});
    minOffset[other] = alignUp(top, o.alignment);
    raisedNothing = false;
    if (minOffset[other] + o.size > capacity)
      feasible = false;
    for (int s = o.firstSection; s < o.endSection; ++s) {
      if (sectionStamp[s] != stamp) {
        sectionStamp[s] = stamp;
        affected.push_back(s);
      }
    }
  }
  for (int s = item.firstSection; s < item.endSection; ++s) {
    floorTrail.push_back({s, floor[s]});
    floor[s] = std::max(floor[s], top);
    total[s] -= item.padded;
    if (overflows(floor[s], total[s]))
      feasible = false;
  }
  totalTree.add(item.firstSection, item.endSection, -item.padded);

  if (feasible) {
    // A section's floor is at least the lowest minimum offset in it.
    for (int s : affected) {
      int64_t lowest = -1;
      for (int member : sections[s]) {
        if (offset[member] >= 0)
          continue;
        if (minOffset[member] <= floor[s]) {
          lowest = -1; // The floor stands; no need to look further.
          break;
        }
        if (lowest < 0 || minOffset[member] < lowest)
          lowest = minOffset[member];
      }
      if (lowest > floor[s]) {
        floorTrail.push_back({s, floor[s]});
        floor[s] = lowest;
        if (overflows(floor[s], total[s]))
          feasible = false;
      }
    }
    // Sections whose floor and total did not change still satisfy
    // floor + total <= capacity; all must satisfy offset + total too.
    if (overflows(at, totalTree.max(sub.begin, sub.end)))
      feasible = false;
  }

  Status status = Status::NotFound;
  if (feasible)
    status = descend(sub, heuristic, index, at, rank);

  for (size_t i = floorTrail.size(); i > floorMark; --i)
    floor[floorTrail[i - 1].first] = floorTrail[i - 1].second;
  floorTrail.resize(floorMark);
  for (int s = item.firstSection; s < item.endSection; ++s)
    total[s] += item.padded;
  totalTree.add(item.firstSection, item.endSection, item.padded);
  for (size_t i = offsetTrail.size(); i > offsetMark; --i)
    minOffset[offsetTrail[i - 1].first] = offsetTrail[i - 1].second;
  offsetTrail.resize(offsetMark);
  offset[index] = -1;
  return status;
}

Status PackingSearch::descend(const Subproblem &sub,
                              const std::string &heuristic, int index,
                              int64_t at, int rank) {
  const Item &item = items[index];
  std::vector<int> splits;
  for (int s = item.firstSection; s + 1 < item.endSection; ++s)
    if (--cuts[s] == 0)
      splits.push_back(s + 1);

  Status status = Status::Found;
  if (splits.empty()) {
    status = search(sub, heuristic, at, rank);
  } else {
    splits.push_back(sub.end);
    int begin = sub.begin;
    for (int end : splits) {
      std::vector<int> members;
      for (int other : sub.ranked)
        if (offset[other] < 0 && items[other].firstSection >= begin &&
            items[other].firstSection < end)
          members.push_back(other);
      status = solveRange(begin, end, std::move(members), heuristic);
      if (status != Status::Found)
        break;
      begin = end;
    }
  }

  for (int s = item.firstSection; s + 1 < item.endSection; ++s)
    ++cuts[s];
  return status;
}

} // namespace

ExactSearchResult searchPacking(const Problem &problem, int64_t capacity,
                                Clock::time_point deadline) {
  // Stacking every buffer needs at most the sum of sizes and alignments
  // (below 2^61 by checkProblem), so any larger capacity is equivalent to
  // that sum; clamping keeps offset arithmetic far from overflow.
  int64_t enough = 0;
  for (const Buffer &buffer : problem.buffers)
    enough += buffer.size + buffer.alignment;
  return PackingSearch(problem, std::min(capacity, enough), deadline).run();
}

} // namespace memopt::planner
