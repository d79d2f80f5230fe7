//===- RematSummary.cpp - what memopt-rematerialize decided ---------------===//
//
// The one reader and writer of `memopt.remat` and
// `memopt.remat_kernel_seconds` (RematSummary.h says why they live on the
// IR).
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/RematSummary.h"
#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Analysis/MemoryReport.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::memopt;

std::optional<RematSummary>
mlir::memopt::readRematSummary(func::FuncOp function) {
  auto attributes = function->getAttrOfType<DictionaryAttr>(kRematAttrName);
  if (!attributes)
    return std::nullopt;
  auto get = [&](StringRef name) -> std::optional<int64_t> {
    if (auto value = attributes.getAs<IntegerAttr>(name))
      return value.getInt();
    return std::nullopt;
  };
  RematSummary summary;
  summary.solved = get("budget").has_value();
  summary.budget = get("budget").value_or(0);
  summary.initialPeak = get("initial_peak").value_or(0);
  summary.peak = get("peak").value_or(0);
  summary.recomputations = get("recomputations").value_or(0);
  summary.searched = get("memory_budget").has_value();
  summary.memoryBudget = get("memory_budget").value_or(0);
  summary.unconstrainedArena = get("unconstrained_arena").value_or(0);
  summary.plannedArena = get("planned_arena").value_or(0);
  summary.solverRuns = get("solver_runs").value_or(0);
  if (auto fraction = attributes.getAs<FloatAttr>("added_time_fraction"))
    summary.addedTimeFraction = fraction.getValueAsDouble();
  if (auto times =
          function->getAttrOfType<DictionaryAttr>(kRematKernelSecondsAttrName))
    for (NamedAttribute entry : times)
      if (auto seconds = dyn_cast<FloatAttr>(entry.getValue()))
        summary.kernelSeconds[entry.getName().getValue()] =
            seconds.getValueAsDouble();
  return summary;
}

void mlir::memopt::writeRematSummary(func::FuncOp function,
                                     const RematSummary &summary) {
  Builder builder(function.getContext());
  NamedAttrList entries;
  auto set = [&](StringRef name, int64_t value) {
    entries.set(name, builder.getI64IntegerAttr(value));
  };
  if (summary.solved) {
    set("budget", summary.budget);
    set("initial_peak", summary.initialPeak);
    set("peak", summary.peak);
  }
  set("recomputations", summary.recomputations);
  if (summary.searched) {
    set("memory_budget", summary.memoryBudget);
    set("unconstrained_arena", summary.unconstrainedArena);
    set("planned_arena", summary.plannedArena);
    set("solver_runs", summary.solverRuns);
    entries.set("added_time_fraction",
                builder.getF64FloatAttr(summary.addedTimeFraction));
  }
  function->setAttr(kRematAttrName,
                    entries.getDictionary(function.getContext()));
  if (summary.kernelSeconds.empty()) {
    function->removeAttr(kRematKernelSecondsAttrName);
    return;
  }
  NamedAttrList times;
  for (const auto &entry : summary.kernelSeconds)
    times.set(entry.getKey(), builder.getF64FloatAttr(entry.getValue()));
  function->setAttr(kRematKernelSecondsAttrName,
                    times.getDictionary(function.getContext()));
}

KernelTimes mlir::memopt::selectKernelTimes(func::FuncOp function,
                                            const KernelTimes &times) {
  KernelTimes selected;
  if (times.empty())
    return selected;
  function.walk([&](Operation *op) {
    if (!isa<CostOpInterface>(op))
      return;
    std::string name = getOpName(op);
    if (auto it = times.find(name); it != times.end())
      selected[name] = it->second;
  });
  return selected;
}

double mlir::memopt::estimateRematSeconds(Operation *op,
                                          const RematSummary &summary) {
  static const Roofline roofline = Roofline::h100();
  return estimateOpSeconds(op, roofline, &summary.kernelSeconds);
}

std::string mlir::memopt::describeRematCosts(const RematSummary &summary) {
  if (summary.kernelSeconds.empty())
    return "roofline";
  return "measured kernel times (" +
         std::to_string(summary.kernelSeconds.size()) +
         " ops), the roofline elsewhere";
}
