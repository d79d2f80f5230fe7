//===- ScaledKernelTimes.cpp - measured op times at another batch --------===//
//
// The arithmetic of ScaledKernelTimes.h: per-name efficiencies at the
// measured micro-batches, interpolated in the micro-batch.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/ScaledKernelTimes.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::memopt;

void ScaledKernelTimes::addMeasurement(const KernelTimes &times,
                                       int64_t microBatch) {
  if (auto it = times.find(kOpOverheadTimeKey); it != times.end())
    measuredOverhead = it->second;
  for (const auto &entry : times) {
    StringRef name = entry.getKey();
    if (name.starts_with("<") && name.ends_with(">"))
      continue;
    std::vector<Sample> &samples = measured[name];
    // One time per micro-batch: a later file at the same one replaces it.
    auto same = llvm::find_if(
        samples, [&](const Sample &s) { return s.microBatch == microBatch; });
    if (same != samples.end())
      same->seconds = entry.getValue();
    else
      samples.push_back({microBatch, entry.getValue()});
  }
}

std::vector<int64_t> ScaledKernelTimes::getMeasuredMicroBatches() const {
  std::vector<int64_t> batches;
  for (const auto &entry : measured)
    for (const Sample &sample : entry.getValue())
      if (sample.microBatch > 0 &&
          !llvm::is_contained(batches, sample.microBatch))
        batches.push_back(sample.microBatch);
  llvm::sort(batches);
  return batches;
}

void ScaledKernelTimes::setReferenceWork(StringRef name, int64_t microBatch,
                                         double workSeconds, StringRef kind) {
  reference[name][microBatch] = {workSeconds, kind.str()};
}

std::optional<double> ScaledKernelTimes::predict(StringRef name,
                                                 int64_t microBatch,
                                                 double workSeconds,
                                                 StringRef kind) const {
  // The first op of this kind under the name, where the file measured it
  // apart (--profile-times writes kernelTimeKey entries) and the reference
  // plan had one.
  if (!kind.empty()) {
    std::string key = kernelTimeKey(name, kind);
    if (measured.count(key) && reference.count(key))
      return predict(key, microBatch, workSeconds);
  }
  double overhead = getOpOverhead();
  auto it = measured.find(name);
  // Efficiencies (seconds per roofline second) at the micro-batches whose
  // reference work is known and of this op's kind.
  std::vector<std::pair<int64_t, double>> efficiencies;
  auto works = reference.find(name);
  bool mismatched = false;
  if (it != measured.end())
    for (const Sample &sample : it->getValue()) {
      if (sample.microBatch <= 0 || works == reference.end())
        continue;
      auto work = works->getValue().find(sample.microBatch);
      if (work == works->getValue().end() || !(work->second.work > 0))
        continue;
      if (!kind.empty() && !work->second.kind.empty() &&
          work->second.kind != kind) {
        mismatched = true;
        continue;
      }
      efficiencies.push_back(
          {sample.microBatch,
           std::max(0.0, sample.seconds - overhead) / work->second.work});
    }
  if (it == measured.end() || it->getValue().empty() || mismatched)
    return std::nullopt;
  if (efficiencies.empty()) {
    // Nothing to scale by: the time as measured (the closest micro-batch's,
    // or the only one), as estimateOpSeconds takes it.
    const Sample *best = &it->getValue().front();
    for (const Sample &sample : it->getValue())
      if (std::llabs(sample.microBatch - microBatch) <
          std::llabs(best->microBatch - microBatch))
        best = &sample;
    return best->seconds;
  }
  llvm::sort(efficiencies);
  double efficiency = efficiencies.front().second;
  if (microBatch >= efficiencies.back().first) {
    efficiency = efficiencies.back().second;
  } else {
    for (size_t i = 1; i < efficiencies.size(); ++i) {
      auto [m0, e0] = efficiencies[i - 1];
      auto [m1, e1] = efficiencies[i];
      if (microBatch > m1)
        continue;
      if (microBatch >= m0)
        efficiency = e0 + (e1 - e0) * double(microBatch - m0) / double(m1 - m0);
      break;
    }
  }
  if (workSeconds <= 0)
    return overhead;
  return overhead + efficiency * workSeconds;
}
