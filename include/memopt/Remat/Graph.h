//===- Graph.h - Rematerialization problem: a cost/bytes DAG ----*- C++ -*-===//
//
// The input of the rematerialization solver: a DAG whose nodes have a compute
// cost and output bytes, an initial topological order, and the most times each
// node may be computed. A schedule is a sequence of node computations; a node
// that appears twice is recomputed. This follows the setting of Checkmate
// (Jain et al., MLSys 2020) and Moccasin (Bartan et al., ICML 2023).
//
// Memory semantics (Moccasin's `get_mem_from_schedule`): each computation
// creates a copy of the node's output; a consumer reads the most recent copy
// of each input; a copy is freed after its last use before the node's next
// computation. The memory at a step is the bytes of every copy that is still
// needed at this step or a later one, plus the output being computed. The
// peak is the largest memory over all steps.
//
// Two refinements for compilers (both optional; Checkmate's and Moccasin's
// graphs use neither): `scratchBytes` are needed only while the node is
// computed (a kernel's workspace); and a node with an `inPlaceInput` writes
// its output over that input's copy when this computation is the copy's last
// read and both have the same bytes (in-place reuse, as memopt's
// bufferization decides it): that copy then no longer counts at this step.
//
// Plain C++17: no MLIR, no LLVM. An MLIR pass maps a function onto a `Graph`
// (ids, costs, bytes, its current op order, a computation limit of 1 for ops
// that must not be recomputed) and reads the schedule back.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_REMAT_GRAPH_H
#define MEMOPT_REMAT_GRAPH_H

#include <cstdint>
#include <string>
#include <vector>

namespace memopt::remat {

struct Node {
  /// Caller's name for the node; the solver never interprets it.
  int64_t id = 0;
  /// For messages only.
  std::string name;
  /// Compute cost of one computation (any unit, >= 0).
  int64_t cost = 0;
  /// Bytes of the node's output (>= 0).
  int64_t bytes = 0;
  /// The most times this node may be computed; 0 means "the solver's
  /// default" (RematOptions::maxComputations). 1 forbids recomputation.
  int maxComputations = 0;
  /// Bytes needed during each computation only (>= 0).
  int64_t scratchBytes = 0;
  /// Index (into `nodes`) of an input whose copy the output may take over
  /// (see above); -1 for none.
  int inPlaceInput = -1;
};

/// A DAG. `inputs[v]` lists the indices (into `nodes`) of v's operands, each
/// once. `order` is the initial schedule: a topological order of all node
/// indices, each exactly once.
struct Graph {
  std::vector<Node> nodes;
  std::vector<std::vector<int>> inputs;
  std::vector<int> order;
};

/// Checks that the graph is well formed: one input list per node, input
/// indices in range and not repeated, no self-loops, costs and bytes >= 0 and
/// small enough that no sum overflows, distinct ids, and `order` a
/// permutation of the nodes in which every input comes before its consumer
/// (which also rules out cycles). Returns an empty string when it is,
/// otherwise a message naming the first bad node by its id.
std::string checkGraph(const Graph &graph);

/// Finds a topological order of the graph (Kahn's algorithm, smallest index
/// first). Returns false and names a node on a cycle in `error` if there is
/// none.
bool topologicalOrder(const Graph &graph, std::vector<int> &order,
                      std::string &error);

/// The smallest peak any schedule can have: a node's computation needs its
/// inputs, its output and its scratch at once (an in-place input's bytes
/// shared with the output). `argmax` receives that node's index.
int64_t computationLowerBound(const Graph &graph, int *argmax = nullptr);

/// The computation limit of node `index` under a default limit.
inline int computationLimit(const Graph &graph, int index, int defaultLimit) {
  int limit = graph.nodes[index].maxComputations;
  return limit > 0 ? limit : defaultLimit;
}

/// Sum of every node's cost: the cost of any schedule without recomputation.
int64_t baseCost(const Graph &graph);

/// True if some node may write in place (the exact method does not model it).
bool hasInPlaceNodes(const Graph &graph);

/// True if computing `v` may reuse the copy of its in-place input: it has
/// one, and that input has the same bytes.
inline bool mayWriteInPlace(const Graph &graph, int v) {
  int u = graph.nodes[v].inPlaceInput;
  return u >= 0 && graph.nodes[u].bytes == graph.nodes[v].bytes;
}

} // namespace memopt::remat

#endif // MEMOPT_REMAT_GRAPH_H
