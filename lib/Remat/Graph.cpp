//===- Graph.cpp - Rematerialization graph checks -------------------------===//

#include "memopt/Remat/Graph.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <unordered_set>

namespace memopt::remat {

namespace {

std::string nodeLabel(const Node &node) {
  std::string label = "node " + std::to_string(node.id);
  if (!node.name.empty() && node.name != std::to_string(node.id))
    label += " ('" + node.name + "')";
  return label;
}

} // namespace

std::string checkGraph(const Graph &graph) {
  int count = static_cast<int>(graph.nodes.size());
  if (graph.inputs.size() != graph.nodes.size())
    return std::to_string(graph.inputs.size()) + " input lists for " +
           std::to_string(count) + " nodes";
  // Values stay exact in a double (the MILP) and their sums far from
  // overflow: at most one copy of a node is resident at a time, so no peak
  // exceeds the sum of all bytes.
  constexpr int64_t kLimit = int64_t(1) << 53;
  constexpr int64_t kSumLimit = int64_t(1) << 60;
  int64_t costSum = 0, byteSum = 0;
  std::unordered_set<int64_t> ids;
  for (int v = 0; v < count; ++v) {
    const Node &node = graph.nodes[v];
    if (!ids.insert(node.id).second)
      return "duplicate node id " + std::to_string(node.id);
    if (node.cost < 0 || node.cost > kLimit)
      return nodeLabel(node) + " has cost " + std::to_string(node.cost) +
             " (expected 0 to " + std::to_string(kLimit) + ")";
    if (node.bytes < 0 || node.bytes > kLimit)
      return nodeLabel(node) + " has " + std::to_string(node.bytes) +
             " output bytes (expected 0 to " + std::to_string(kLimit) + ")";
    if (node.scratchBytes < 0 || node.scratchBytes > kLimit)
      return nodeLabel(node) + " has " + std::to_string(node.scratchBytes) +
             " scratch bytes (expected 0 to " + std::to_string(kLimit) + ")";
    if (node.inPlaceInput != -1 &&
        std::find(graph.inputs[v].begin(), graph.inputs[v].end(),
                  node.inPlaceInput) == graph.inputs[v].end())
      return nodeLabel(node) + " writes in place over node index " +
             std::to_string(node.inPlaceInput) + ", which is not its input";
    costSum += node.cost;
    byteSum += node.bytes + node.scratchBytes;
    if (costSum > kSumLimit || byteSum > kSumLimit)
      return "the costs or bytes add up to more than 2^60";
    if (node.maxComputations < 0)
      return nodeLabel(node) + " has a negative computation limit";
    std::vector<int> sorted = graph.inputs[v];
    std::sort(sorted.begin(), sorted.end());
    for (size_t k = 0; k < sorted.size(); ++k) {
      if (sorted[k] < 0 || sorted[k] >= count)
        return nodeLabel(node) + " has an input index " +
               std::to_string(sorted[k]) + " out of range";
      if (sorted[k] == v)
        return nodeLabel(node) + " is its own input (a cycle)";
      if (k > 0 && sorted[k] == sorted[k - 1])
        return nodeLabel(node) + " lists input " +
               std::to_string(graph.nodes[sorted[k]].id) + " twice";
    }
  }
  if (graph.order.size() != graph.nodes.size())
    return "the order has " + std::to_string(graph.order.size()) +
           " entries for " + std::to_string(count) + " nodes";
  std::vector<int> position(count, -1);
  for (int step = 0; step < count; ++step) {
    int v = graph.order[step];
    if (v < 0 || v >= count)
      return "the order names node index " + std::to_string(v) +
             ", out of range";
    if (position[v] >= 0)
      return "the order lists " + nodeLabel(graph.nodes[v]) + " twice";
    position[v] = step;
  }
  for (int v = 0; v < count; ++v)
    for (int u : graph.inputs[v])
      if (position[u] > position[v])
        return "the order is not topological: " + nodeLabel(graph.nodes[v]) +
               " comes before its input " + nodeLabel(graph.nodes[u]);
  return "";
}

bool topologicalOrder(const Graph &graph, std::vector<int> &order,
                      std::string &error) {
  int count = static_cast<int>(graph.nodes.size());
  std::vector<int> pending(count, 0);
  std::vector<std::vector<int>> users(count);
  for (int v = 0; v < count; ++v) {
    pending[v] = static_cast<int>(graph.inputs[v].size());
    for (int u : graph.inputs[v])
      users[u].push_back(v);
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int v = 0; v < count; ++v)
    if (pending[v] == 0)
      ready.push(v);
  order.clear();
  while (!ready.empty()) {
    int v = ready.top();
    ready.pop();
    order.push_back(v);
    for (int w : users[v])
      if (--pending[w] == 0)
        ready.push(w);
  }
  if (static_cast<int>(order.size()) == count)
    return true;
  // Every node left has an unscheduled input; walking inputs finds a cycle.
  int v = 0;
  while (pending[v] == 0)
    ++v;
  std::vector<bool> seen(count, false);
  while (!seen[v]) {
    seen[v] = true;
    for (int u : graph.inputs[v])
      if (pending[u] > 0) {
        v = u;
        break;
      }
  }
  error = "the graph has a cycle through " + nodeLabel(graph.nodes[v]);
  return false;
}

int64_t computationLowerBound(const Graph &graph, int *argmax) {
  int64_t best = 0;
  int bestNode = -1;
  for (size_t v = 0; v < graph.nodes.size(); ++v) {
    int64_t bytes = graph.nodes[v].bytes + graph.nodes[v].scratchBytes;
    for (int u : graph.inputs[v])
      bytes += graph.nodes[u].bytes;
    if (mayWriteInPlace(graph, static_cast<int>(v)))
      bytes -= graph.nodes[v].bytes;
    if (bestNode < 0 || bytes > best) {
      best = bytes;
      bestNode = static_cast<int>(v);
    }
  }
  if (argmax)
    *argmax = bestNode;
  return best;
}

bool hasInPlaceNodes(const Graph &graph) {
  for (const Node &node : graph.nodes)
    if (node.inPlaceInput >= 0)
      return true;
  return false;
}

int64_t baseCost(const Graph &graph) {
  int64_t total = 0;
  for (const Node &node : graph.nodes)
    total += node.cost;
  return total;
}

} // namespace memopt::remat
