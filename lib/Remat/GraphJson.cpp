//===- GraphJson.cpp - Remat graphs from networkx node-link JSON ----------===//

#include "memopt/Remat/GraphJson.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace memopt::remat {

namespace {

/// An integer field; JSON numbers written as integral doubles are accepted.
std::optional<int64_t> integer(const llvm::json::Value *value) {
  if (!value)
    return std::nullopt;
  if (std::optional<int64_t> exact = value->getAsInteger())
    return exact;
  if (std::optional<double> number = value->getAsNumber())
    if (std::floor(*number) == *number && std::fabs(*number) < 9.0e18)
      return static_cast<int64_t>(*number);
  return std::nullopt;
}

std::string describe(const llvm::json::Value *value) {
  if (!value)
    return "missing";
  std::string text;
  llvm::raw_string_ostream stream(text);
  stream << *value;
  return "'" + text + "'";
}

} // namespace

bool readGraphJson(std::string_view text, Graph &graph, std::string &error) {
  graph = Graph();
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse(llvm::StringRef(text.data(), text.size()));
  if (!parsed) {
    error = "malformed JSON: " + llvm::toString(parsed.takeError());
    return false;
  }
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root) {
    error = "expected a JSON object with 'nodes' and 'links'";
    return false;
  }
  const llvm::json::Array *nodes = root->getArray("nodes");
  const llvm::json::Array *links = root->getArray("links");
  if (!nodes || !links) {
    error = std::string("missing '") + (nodes ? "links" : "nodes") +
            "' array (expected networkx node-link JSON)";
    return false;
  }

  std::map<int64_t, int> indexOf;
  for (size_t k = 0; k < nodes->size(); ++k) {
    const llvm::json::Object *object = (*nodes)[k].getAsObject();
    if (!object) {
      error = "nodes[" + std::to_string(k) + "] is not an object";
      return false;
    }
    Node node;
    bool randomLayout = !object->get("id");
    const llvm::json::Value *idField =
        randomLayout ? object->get("name") : object->get("id");
    std::optional<int64_t> id = integer(idField);
    if (!id) {
      error = "nodes[" + std::to_string(k) + "]: '" +
              (randomLayout ? "name" : "id") + "' is " + describe(idField) +
              ", expected an integer id";
      return false;
    }
    node.id = *id;
    if (!randomLayout)
      if (std::optional<llvm::StringRef> name = object->getString("name"))
        node.name = name->str();
    const char *costKey = object->get("cost_cpu") ? "cost_cpu" : "duration";
    const char *bytesKey = object->get("cost_ram") ? "cost_ram" : "out_cost";
    std::optional<int64_t> cost = integer(object->get(costKey));
    std::optional<int64_t> bytes = integer(object->get(bytesKey));
    if (!cost || !bytes) {
      std::string key = !cost ? "compute cost ('cost_cpu' or 'duration')"
                              : "output bytes ('cost_ram' or 'out_cost')";
      error = "node " + std::to_string(node.id) + ": the " + key + " is " +
              describe(object->get(!cost ? costKey : bytesKey)) +
              ", expected an integer";
      return false;
    }
    node.cost = *cost;
    node.bytes = *bytes;
    if (const llvm::json::Value *limit = object->get("max_computations")) {
      std::optional<int64_t> value = integer(limit);
      if (!value || *value < 1 || *value > 1000000) {
        error = "node " + std::to_string(node.id) + ": 'max_computations' is " +
                describe(limit) + ", expected a positive integer";
        return false;
      }
      node.maxComputations = static_cast<int>(*value);
    }
    if (!indexOf.emplace(node.id, static_cast<int>(k)).second) {
      error = "duplicate node id " + std::to_string(node.id);
      return false;
    }
    graph.nodes.push_back(std::move(node));
  }

  graph.inputs.assign(graph.nodes.size(), {});
  std::set<std::pair<int, int>> seen;
  for (size_t k = 0; k < links->size(); ++k) {
    const llvm::json::Object *object = (*links)[k].getAsObject();
    if (!object) {
      error = "links[" + std::to_string(k) + "] is not an object";
      return false;
    }
    const char *sourceKey = object->get("source") ? "source" : "0";
    const char *targetKey = object->get("target") ? "target" : "1";
    std::optional<int64_t> source = integer(object->get(sourceKey));
    std::optional<int64_t> target = integer(object->get(targetKey));
    if (!source || !target) {
      error = "links[" + std::to_string(k) +
              "]: expected integer 'source' and 'target' (or '0' and '1')";
      return false;
    }
    for (int64_t end : {*source, *target})
      if (!indexOf.count(end)) {
        error = "links[" + std::to_string(k) + "] names unknown node id " +
                std::to_string(end);
        return false;
      }
    int from = indexOf[*source], to = indexOf[*target];
    if (from == to) {
      error = "links[" + std::to_string(k) + "]: node " +
              std::to_string(*source) + " is its own input (a cycle)";
      return false;
    }
    if (seen.insert({from, to}).second)
      graph.inputs[to].push_back(from);
  }

  std::vector<int> topological;
  if (!topologicalOrder(graph, topological, error))
    return false;

  const llvm::json::Object *attributes = root->getObject("graph");
  const llvm::json::Array *order =
      attributes ? attributes->getArray("order") : nullptr;
  if (order) {
    for (size_t k = 0; k < order->size(); ++k) {
      std::optional<int64_t> id = integer(&(*order)[k]);
      if (!id || !indexOf.count(*id)) {
        error = "graph.order[" + std::to_string(k) + "] is " +
                describe(&(*order)[k]) + ", not a node id";
        return false;
      }
      graph.order.push_back(indexOf[*id]);
    }
  } else {
    for (const auto &[id, index] : indexOf)
      graph.order.push_back(index);
  }
  error = checkGraph(graph);
  return error.empty();
}

std::string writeScheduleJson(const Graph &graph, const RematResult &result) {
  llvm::json::Array order;
  for (int v : result.schedule)
    order.push_back(graph.nodes[v].id);
  llvm::json::Object object{
      {"order", std::move(order)},
      {"peak_bytes", result.peakBytes},
      {"total_cost", result.totalCost},
      {"budget_bytes", result.budget},
      {"optimal", result.provedOptimal},
      {"base_cost", result.baseCost},
      {"initial_peak_bytes", result.initialPeak},
      {"recomputations", result.recomputations},
      {"method", methodName(result.producedBy)},
  };
  std::string text;
  llvm::raw_string_ostream stream(text);
  stream << llvm::formatv("{0:2}", llvm::json::Value(std::move(object)))
         << "\n";
  return text;
}

} // namespace memopt::remat
