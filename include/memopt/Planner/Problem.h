//===- Problem.h - Static memory planning problem ---------------*- C++ -*-===//
//
// The input and output of the static memory planner: buffers with a
// half-open lifetime [lower, upper), a size and an alignment, packed into one
// arena. The lifetime convention and the CSV layout follow MiniMalloc
// (google/minimalloc), so its benchmark instances can be read unchanged.
//
// This library is plain C++17: no MLIR, no LLVM. The MLIR pass that plans a
// function's buffers converts its live ranges into a `Problem` and reads the
// offsets back from a `Plan`.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_PLANNER_PROBLEM_H
#define MEMOPT_PLANNER_PROBLEM_H

#include <cstdint>
#include <string>
#include <vector>

namespace memopt::planner {

/// One buffer to place. It is live over the half-open interval
/// [lower, upper): two buffers conflict when their intervals intersect, so a
/// buffer that ends at time t may share bytes with one that starts at t.
/// A buffer of size 0 occupies no bytes and conflicts with nothing.
struct Buffer {
  /// Caller's name for the buffer; the planner never interprets it.
  int64_t id = 0;
  int64_t lower = 0;
  int64_t upper = 0;
  int64_t size = 0;
  /// The offset must be a multiple of this (>= 1).
  int64_t alignment = 1;
};

/// A set of buffers to pack into one arena. Offsets in a `Plan` are indexed
/// like `buffers`.
struct Problem {
  std::vector<Buffer> buffers;
};

/// A packing: `offsets[i]` is the byte offset of `buffers[i]`, and
/// `arenaSize` is the arena the plan needs (the highest end of any buffer).
struct Plan {
  std::vector<int64_t> offsets;
  int64_t arenaSize = 0;
};

/// The largest total size of buffers live at one moment: no plan can use a
/// smaller arena. Zero-size buffers and alignment are ignored.
int64_t maxLive(const Problem &problem);

/// The alignment every offset is a multiple of: the gcd of the buffers'
/// alignments (1 for none). Packed below another buffer of the same time, a
/// buffer occupies its size rounded up to this grain.
int64_t offsetGrain(const Problem &problem);

/// The largest padding a buffer's size gains when rounded up to the grain.
int64_t largestPadding(const Problem &problem, int64_t grain);

/// A lower bound on any plan's arena that counts alignment: at one moment
/// the live buffers are stacked, each but the topmost taking its size rounded
/// up to the grain, so the arena is at least the largest padded total minus
/// the largest padding, and never below maxLive. With alignment 1 it is
/// maxLive; with memopt's 256-byte offsets and small tensors it is the bound
/// that lets the exact search prove a plan optimal instead of searching
/// until its time limit (issue 28: a 2-rank MLP planned for 10 s).
int64_t alignedLowerBound(const Problem &problem);

/// Checks that the problem is well formed: size >= 0, alignment >= 1,
/// lower < upper for every buffer with size > 0, and sizes small enough that
/// no sum of them overflows. Returns an empty string when it is, otherwise a
/// message naming the first bad buffer (by its id).
std::string checkProblem(const Problem &problem);

/// The smallest multiple of `alignment` that is >= `value` (value >= 0,
/// alignment >= 1).
inline int64_t alignUp(int64_t value, int64_t alignment) {
  int64_t remainder = value % alignment;
  return remainder == 0 ? value : value + (alignment - remainder);
}

/// The arena a set of offsets needs: max(offset + size) over all buffers
/// (0 for no buffers).
int64_t arenaSizeOf(const Problem &problem,
                    const std::vector<int64_t> &offsets);

} // namespace memopt::planner

#endif // MEMOPT_PLANNER_PROBLEM_H
