//===- Elastic.h - growing scratch buffers into free space -------*- C++
//-*-===//
//
// Kernel workspaces are elastic: a convolution or a GEMM runs with any
// scratch size (the library picks the fastest algorithm that fits), faster
// with more. The compiler therefore plans each workspace at a small floor
// size, so it never raises the arena, and then grows it into the bytes that
// are free anyway during its lifetime. TensorRT bounds its tactics by one
// global workspace limit and XLA by a fixed scratch size per call; here the
// limit of each call is whatever the plan leaves free at that moment, up to
// what the call can use.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_PLANNER_ELASTIC_H
#define MEMOPT_PLANNER_ELASTIC_H

#include "memopt/Planner/Problem.h"

#include <vector>

namespace memopt::planner {

/// Grows buffers of a valid `plan` of `problem` in place: every buffer i with
/// `maxSizes[i] > problem.buffers[i].size` moves to the largest block of the
/// arena that no other buffer with an intersecting lifetime occupies, and
/// takes min(maxSizes[i], that block) bytes (never less than it had: its own
/// position is one of the candidates). Buffers are grown largest `maxSizes`
/// first; ties go to the lowest offset. The arena size does not change, so
/// the plan stays valid (validate it again to be sure). Returns the bytes
/// added over all buffers.
int64_t growIntoFreeSpace(Problem &problem, Plan &plan,
                          const std::vector<int64_t> &maxSizes);

} // namespace memopt::planner

#endif // MEMOPT_PLANNER_ELASTIC_H
