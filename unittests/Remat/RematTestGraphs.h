//===- RematTestGraphs.h - Small graphs with known optima -------*- C++ -*-===//

#ifndef MEMOPT_UNITTESTS_REMAT_REMATTESTGRAPHS_H
#define MEMOPT_UNITTESTS_REMAT_REMATTESTGRAPHS_H

#include "memopt/Remat/Graph.h"

#include <utility>
#include <vector>

namespace memopt::remat::testing {

/// Nodes 0..n-1 with the given (cost, bytes), edges (from, to), order 0..n-1.
inline Graph makeGraph(const std::vector<std::pair<int64_t, int64_t>> &nodes,
                       const std::vector<std::pair<int, int>> &edges) {
  Graph graph;
  for (size_t v = 0; v < nodes.size(); ++v) {
    Node node;
    node.id = static_cast<int64_t>(v);
    node.cost = nodes[v].first;
    node.bytes = nodes[v].second;
    graph.nodes.push_back(node);
    graph.order.push_back(static_cast<int>(v));
  }
  graph.inputs.assign(nodes.size(), {});
  for (auto [from, to] : edges)
    graph.inputs[to].push_back(from);
  return graph;
}

/// A chain 0 -> 1 -> ... -> n-1 of 10-byte outputs, cost 1 each.
inline Graph chain(int n) {
  std::vector<std::pair<int64_t, int64_t>> nodes(n, {1, 10});
  std::vector<std::pair<int, int>> edges;
  for (int v = 1; v < n; ++v)
    edges.push_back({v - 1, v});
  return makeGraph(nodes, edges);
}

/// A U-Net: encoder x0 -> x1 -> x2 -> x3, decoder y2 = f(x3, x2),
/// y1 = f(y2, x1), y0 = f(y1, x0); 10 bytes each; x0 costs 5, the rest 1.
/// Node order: x0 x1 x2 x3 y2 y1 y0 (indices 0..6). Initial peak 50 (at y2:
/// x0, x1, x2, x3 and y2).
inline Graph unet() {
  return makeGraph(
      {{5, 10}, {1, 10}, {1, 10}, {1, 10}, {1, 10}, {1, 10}, {1, 10}},
      {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {2, 4}, {4, 5}, {1, 5}, {5, 6}, {0, 6}});
}

/// A diamond a -> b, a -> c, b -> d, c -> d with a large source: a 20 bytes,
/// b, c, d 5 bytes, cost 1 each. Initial peak 30 (at c: a, b, c).
inline Graph diamond() {
  return makeGraph({{1, 20}, {1, 5}, {1, 5}, {1, 5}},
                   {{0, 1}, {0, 2}, {1, 3}, {2, 3}});
}

} // namespace memopt::remat::testing

#endif // MEMOPT_UNITTESTS_REMAT_REMATTESTGRAPHS_H
