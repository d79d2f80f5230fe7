//===- GraphJson.h - Remat graphs from networkx node-link JSON --*- C++ -*-===//
//
// Reads the graphs of the rematerialization literature (Checkmate's and
// Moccasin's benchmark graphs, ../shared/data/remat/README.md) and writes
// schedules. Separate from MemOptRemat because it uses llvm::json.
//
// Two node-link layouts are accepted:
//  - Checkmate: node {id, name?, cost_cpu, cost_ram}, link {source, target};
//    the initial order is the node ids in increasing order.
//  - Random layered: node {name (the id), duration, out_cost}, link {"0",
//    "1"}; `graph.order` gives the initial order.
// Any node may also carry `max_computations` (1 forbids recomputation).
// A `graph.order` list, when present, is used with either layout. Repeated
// links (networkx multigraphs) count once.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_REMAT_GRAPHJSON_H
#define MEMOPT_REMAT_GRAPHJSON_H

#include "memopt/Remat/Graph.h"
#include "memopt/Remat/Remat.h"

#include <string>
#include <string_view>

namespace memopt::remat {

/// Parses `text` into `graph` (checked with `checkGraph`). Returns false with
/// one message in `error` naming the node or link at fault.
bool readGraphJson(std::string_view text, Graph &graph, std::string &error);

/// `{"order": [ids...], "peak_bytes": P, "total_cost": T, "budget_bytes": B,
/// "optimal": bool}` plus the base cost and initial peak for reference.
std::string writeScheduleJson(const Graph &graph, const RematResult &result);

} // namespace memopt::remat

#endif // MEMOPT_REMAT_GRAPHJSON_H
