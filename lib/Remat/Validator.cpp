//===- Validator.cpp - Independent check of a remat schedule --------------===//
//
// Replays the schedule: each computation creates a copy, each consumer reads
// the newest copy of each input, and a copy is released right after its last
// read (or, when an in-place computation reads it last, as that computation
// begins); scratch bytes count during their computation only. Shares no
// code with the solvers.
//
//===----------------------------------------------------------------------===//

#include "memopt/Remat/Validator.h"

namespace memopt::remat {

namespace {

std::string label(const Graph &graph, int v) {
  const Node &node = graph.nodes[v];
  std::string text = "node " + std::to_string(node.id);
  if (!node.name.empty() && node.name != std::to_string(node.id))
    text += " ('" + node.name + "')";
  return text;
}

} // namespace

ScheduleCheck validateSchedule(const Graph &graph,
                               const std::vector<int> &schedule,
                               int defaultLimit,
                               std::optional<int64_t> budget) {
  ScheduleCheck check;
  int count = static_cast<int>(graph.nodes.size());
  int steps = static_cast<int>(schedule.size());
  auto fail = [&](Violation violation, std::string message) {
    check.violation = violation;
    check.message = std::move(message);
    return check;
  };

  // Pass 1: dependences and computation counts; the step of each copy's last
  // read (a copy is identified by the step that computed it).
  std::vector<int> newest(count, -1);
  std::vector<int> computations(count, 0);
  std::vector<int> lastRead(steps, -1);
  // The copy an in-place computation may take over (same bytes), per step.
  std::vector<int> takesOver(steps, -1);
  for (int step = 0; step < steps; ++step) {
    int v = schedule[step];
    if (v < 0 || v >= count)
      return fail(Violation::UnknownNode,
                  "step " + std::to_string(step) + " names node index " +
                      std::to_string(v) + ", out of range");
    for (int u : graph.inputs[v]) {
      if (newest[u] < 0)
        return fail(Violation::MissingInput,
                    "step " + std::to_string(step) + " computes " +
                        label(graph, v) + " before its input " +
                        label(graph, u) + " was computed");
      lastRead[newest[u]] = step;
      if (u == graph.nodes[v].inPlaceInput &&
          graph.nodes[u].bytes == graph.nodes[v].bytes)
        takesOver[step] = newest[u];
    }
    newest[v] = step;
    if (++computations[v] > computationLimit(graph, v, defaultLimit))
      return fail(Violation::TooManyComputations,
                  label(graph, v) + " is computed " +
                      std::to_string(computations[v]) + " times, over its " +
                      "limit of " +
                      std::to_string(computationLimit(graph, v, defaultLimit)));
    check.totalCost += graph.nodes[v].cost;
  }
  for (int v = 0; v < count; ++v)
    if (computations[v] == 0)
      return fail(Violation::NeverComputed,
                  label(graph, v) + " is never computed");

  // Pass 2: replay. `releaseAt[s]` lists the copies whose last read is step s.
  std::vector<std::vector<int>> releaseAt(steps);
  for (int step = 0; step < steps; ++step)
    releaseAt[lastRead[step] >= 0 ? lastRead[step] : step].push_back(step);
  int64_t resident = 0;
  int peakStep = 0;
  for (int step = 0; step < steps; ++step) {
    const Node &node = graph.nodes[schedule[step]];
    int reused = takesOver[step];
    if (reused >= 0 && lastRead[reused] == step)
      resident -= graph.nodes[schedule[reused]].bytes;
    else
      reused = -1;
    resident += node.bytes + node.scratchBytes;
    if (resident > check.peakBytes) {
      check.peakBytes = resident;
      peakStep = step;
    }
    resident -= node.scratchBytes;
    for (int copy : releaseAt[step])
      if (copy != reused)
        resident -= graph.nodes[schedule[copy]].bytes;
  }
  if (budget && check.peakBytes > *budget)
    return fail(
        Violation::OverBudget,
        "peak of " + std::to_string(check.peakBytes) + " bytes at step " +
            std::to_string(peakStep) + " (" + label(graph, schedule[peakStep]) +
            ") is over the budget of " + std::to_string(*budget) + " bytes");
  return check;
}

} // namespace memopt::remat
