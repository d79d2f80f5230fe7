//===- FitSearchTest.cpp - memopt-compile --fit's search ------------------===//
//
// searchFit (Fit.h) on planners with a known model of memory and time, so
// that the best configuration is known: the chosen one fits and is the
// fastest of those that fit, the micro-batch search is a bisection, the
// recomputation walk is pruned by its bound and stops at the first miss,
// a limit nothing meets leaves nothing chosen, an offload lever meets a
// limit that only moving the optimizer state meets, and the host update
// timeline hides what the backward can hide.
//
//===----------------------------------------------------------------------===//

#include "memopt/Conversion/Fit.h"

#include <gtest/gtest.h>

using namespace mlir::memopt;

namespace {

/// A model of one step: weights, an arena linear in the micro-batch (a
/// third of it when recomputation may run, at `rematCost` more time), and
/// a micro-step of `fixedSeconds` plus `perSampleSeconds` per sample. The
/// low precision halves the arena and the time.
struct ModelPlanner {
  int64_t weights = 1000;
  int64_t arenaPerSample = 100;
  double fixedSeconds = 1e-3, perSampleSeconds = 1e-5, rematCost = 0.2;
  int calls = 0, rematCalls = 0;

  FitPoint operator()(const FitPoint &candidate) {
    ++calls;
    FitPoint point = candidate;
    bool low = !candidate.choices.empty() && candidate.choices[0] == "bf16";
    int64_t arena = arenaPerSample * candidate.microBatch / (low ? 2 : 1);
    double seconds = (fixedSeconds + perSampleSeconds * candidate.microBatch) /
                     (low ? 2 : 1);
    if (candidate.memoryBudget > 0) {
      ++rematCalls;
      int64_t floor = arena / 3;
      if (floor > candidate.memoryBudget) {
        point.failure = "the arena does not fit in the memory budget";
        return point;
      }
      arena = std::min(arena, candidate.memoryBudget);
      seconds *= 1 + rematCost;
      point.recomputations = 3;
    }
    point.planned = true;
    point.weightBytes = weights;
    point.arenaBytes = arena;
    point.microStepSeconds = seconds;
    return point;
  }
};

FitLever precisionLever(std::vector<std::string> values) {
  return {"precision", std::move(values),
          [](CompileOptions &, const std::string &) {}};
}

/// The chosen point fits and no fitting point is faster.
void expectChosenIsFastestFit(const FitResult &result) {
  ASSERT_TRUE(result.chosen.has_value());
  const FitPoint &chosen = result.points[*result.chosen];
  EXPECT_TRUE(chosen.fits);
  EXPECT_LE(chosen.deviceBytes(), result.limitBytes);
  for (const FitPoint &point : result.points) {
    if (point.fits) {
      EXPECT_LE(point.samplesPerSecond, chosen.samplesPerSecond)
          << point.describe();
    }
  }
}

TEST(FitSearch, LargestPlainMicroBatchByBisection) {
  ModelPlanner model;
  model.rematCost = 10; // recomputation never pays
  // 64 samples: divisors 1 2 4 8 16 32 64; arena 100 per sample.
  FitResult result = searchFit({precisionLever({"fp32"})}, 64, 64, 1000 + 1700,
                               [&](const FitPoint &c) { return model(c); });
  expectChosenIsFastestFit(result);
  const FitPoint &chosen = result.points[*result.chosen];
  EXPECT_EQ(chosen.microBatch, 16);
  EXPECT_EQ(chosen.accumulate, 4);
  EXPECT_EQ(chosen.memoryBudget, 0);
  EXPECT_DOUBLE_EQ(chosen.stepSeconds, 4 * (1e-3 + 16e-5));
  EXPECT_DOUBLE_EQ(chosen.samplesPerSecond, 64 / chosen.stepSeconds);
  // Bisection: 3 plain plans for 7 divisors (8, 32, 16), then 64 as the
  // bound of its recomputation; 32 with recomputation fits but is slower,
  // 64 cannot fit and ends the walk.
  EXPECT_EQ(model.calls - model.rematCalls, 4);
  EXPECT_EQ(model.rematCalls, 2);
}

TEST(FitSearch, RecomputationWhenItIsFaster) {
  ModelPlanner model; // fixed cost dominates: larger micro-batches pay
  FitResult result = searchFit({precisionLever({"fp32"})}, 64, 64, 1000 + 1700,
                               [&](const FitPoint &c) { return model(c); });
  expectChosenIsFastestFit(result);
  const FitPoint &chosen = result.points[*result.chosen];
  // 32 with recomputation (floor 1067 <= 1700) beats 16 without; 64 needs
  // a floor of 2134: the walk stops there.
  EXPECT_EQ(chosen.microBatch, 32);
  EXPECT_EQ(chosen.memoryBudget, 1700);
  EXPECT_EQ(chosen.recomputations, 3);
  EXPECT_EQ(model.rematCalls, 2);
  bool triedSixtyFour = false;
  for (const FitPoint &point : result.points)
    triedSixtyFour |=
        point.microBatch == 64 && point.memoryBudget > 0 && !point.planned;
  EXPECT_TRUE(triedSixtyFour);
}

TEST(FitSearch, AccumulatingUpdatesRunWholeOncePerStep) {
  // Of a 10 us micro-step, 4 us are updates; accumulating costs 1 us.
  FitResult result = searchFit({precisionLever({"fp32"})}, 8, 8, 1 << 20,
                               [&](const FitPoint &candidate) {
                                 FitPoint point = candidate;
                                 point.planned = true;
                                 point.microStepSeconds = 10e-6;
                                 point.updateSeconds = 4e-6;
                                 point.accumulateSeconds = 1e-6;
                                 return point;
                               });
  for (const FitPoint &point : result.points) {
    double k = double(point.accumulate);
    EXPECT_DOUBLE_EQ(point.stepSeconds, k * 6e-6 + (k - 1) * 1e-6 + 4e-6)
        << point.describe();
  }
  EXPECT_EQ(result.points[*result.chosen].accumulate, 1);
}

TEST(FitSearch, BoundPrunesRecomputation) {
  ModelPlanner model;
  model.fixedSeconds = 0; // samples/s the same at every micro-batch
  FitResult result = searchFit({precisionLever({"fp32"})}, 64, 64, 1000 + 1700,
                               [&](const FitPoint &c) { return model(c); });
  expectChosenIsFastestFit(result);
  EXPECT_EQ(model.rematCalls, 0);
}

TEST(FitSearch, LeversMultiplyTheSearch) {
  ModelPlanner model;
  model.rematCost = 10;
  FitResult result =
      searchFit({precisionLever({"fp32", "bf16"})}, 64, 64, 1000 + 1700,
                [&](const FitPoint &c) { return model(c); });
  expectChosenIsFastestFit(result);
  const FitPoint &chosen = result.points[*result.chosen];
  EXPECT_EQ(chosen.choices, std::vector<std::string>{"bf16"});
  EXPECT_EQ(chosen.microBatch, 32);
  llvm::json::Value json = result.toJson();
  const llvm::json::Object *object = json.getAsObject();
  ASSERT_NE(object, nullptr);
  EXPECT_EQ(object->getInteger("chosen").value_or(-1), int64_t(*result.chosen));
  EXPECT_EQ(object->getArray("points")->size(), result.points.size());
}

TEST(FitSearch, ParetoFrontHasNoDominatedPoint) {
  ModelPlanner model;
  FitResult result =
      searchFit({precisionLever({"fp32", "bf16"})}, 64, 64, 1000 + 1700,
                [&](const FitPoint &c) { return model(c); });
  size_t onFront = 0;
  for (const FitPoint &point : result.points) {
    if (!point.pareto)
      continue;
    ++onFront;
    for (const FitPoint &other : result.points) {
      if (!other.planned || &other == &point)
        continue;
      EXPECT_FALSE(other.deviceBytes() <= point.deviceBytes() &&
                   other.stepSeconds <= point.stepSeconds &&
                   (other.deviceBytes() < point.deviceBytes() ||
                    other.stepSeconds < point.stepSeconds))
          << point.describe() << " is dominated by " << other.describe();
    }
  }
  EXPECT_GT(onFront, 1u);
}

TEST(FitSearch, NothingFitsLeavesTheSmallest) {
  ModelPlanner model;
  FitResult result = searchFit({precisionLever({"fp32"})}, 64, 64, 900,
                               [&](const FitPoint &c) { return model(c); });
  EXPECT_FALSE(result.chosen.has_value());
  ASSERT_TRUE(result.smallest.has_value());
  EXPECT_EQ(result.points[*result.smallest].microBatch, 1);
  // The weights alone pass the limit: no arena budget is left to try.
  EXPECT_EQ(model.rematCalls, 0);
}

} // namespace

TEST(FitSearch, OffloadLeverMeetsALimitNothingElseMeets) {
  // The weights and optimizer state are 1000 bytes; offloading the
  // optimizer leaves 300 of them on the device at 0.5 ms more a step.
  // Recomputation cannot shrink the weights, so a limit under 1000 is met
  // by the offload choice only, and its label names it.
  ModelPlanner model;
  model.rematCost = 10; // recomputation never pays
  FitPlanner planner = [&](const FitPoint &candidate) {
    FitPoint point = model(candidate);
    if (candidate.choices[1] == "optimizer") {
      point.weightBytes = 300;
      point.microStepSeconds += 5e-4;
    }
    return point;
  };
  FitLever offload{"offload",
                   {"none", "optimizer"},
                   [](CompileOptions &, const std::string &) {},
                   "offload "};
  FitResult result =
      searchFit({precisionLever({"fp32"}), offload}, 16, 16, 900, planner);
  expectChosenIsFastestFit(result);
  const FitPoint &chosen = result.points[*result.chosen];
  EXPECT_EQ(chosen.choices[1], "optimizer");
  EXPECT_EQ(chosen.describe(), "fp32, offload optimizer, micro-batch 4 x 4");
  for (const FitPoint &point : result.points)
    if (point.choices[1] == "none") {
      EXPECT_FALSE(point.fits) << point.describe();
    }
  // With room for the state, no offload is faster.
  FitResult roomy =
      searchFit({precisionLever({"fp32"}), offload}, 16, 16, 1 << 20, planner);
  EXPECT_EQ(roomy.points[*roomy.chosen].choices[1], "none");
}

TEST(FitSearch, HostUpdateTimelineHidesUnderTheBackward) {
  // Two updates, 1 GB/s copies: each gradient (1000 bytes) leaves in 1 us,
  // which the compute stream waits for; the CPU update (10 us) of the
  // first runs while the device computes the 20 us before the second.
  HostUpdateEvent first{0, 1000, 2000, 10e-6};
  HostUpdateEvent second{20e-6, 1000, 2000, 10e-6};
  HostTimeline hidden = simulateHostUpdates({first, second}, 30e-6, 1e9, 0);
  // Device: 1 + 20 + 1 + 30 = 52 us; the last copy back ends at
  // 22 + 10 + 2 = 34 us, hidden.
  EXPECT_NEAR(hidden.endSeconds, 52e-6, 1e-12);
  EXPECT_NEAR(hidden.hostSeconds, 20e-6, 1e-12);
  EXPECT_NEAR(hidden.copySeconds, 6e-6, 1e-12);
  // Nothing after the last gradient: its update and copy back are exposed,
  // and a slow CPU queues the second update behind the first.
  HostUpdateEvent slow{0, 1000, 2000, 50e-6};
  HostTimeline exposed = simulateHostUpdates(
      {slow, HostUpdateEvent{5e-6, 1000, 2000, 50e-6}}, 0, 1e9, 0);
  // CPU: 1 -> 51, then 51 -> 101; copies back end at 53 and 103 us.
  EXPECT_NEAR(exposed.endSeconds, 103e-6, 1e-12);
  // 2 us a copy: each copy out stalls the device 2 us more (56 us in all),
  // each copy back takes 2 us more (hidden still).
  HostTimeline latent = simulateHostUpdates({first, second}, 30e-6, 1e9, 2e-6);
  EXPECT_NEAR(latent.endSeconds, 56e-6, 1e-12);
  EXPECT_NEAR(latent.copySeconds, 14e-6, 1e-12);
}

TEST(FitSearch, DeferredCopyWaitsLetTheCopiesOutOverlapCompute) {
  // The runtime without loss scaling: the compute stream waits for a
  // gradient's copy out only at the next update, so the 3 us copies (2 us
  // latency + 1 us of bytes) cost the device nothing: 20 + 30 = 50 us, not
  // 56.
  HostUpdateEvent first{0, 1000, 2000, 10e-6};
  HostUpdateEvent second{20e-6, 1000, 2000, 10e-6};
  HostTimeline deferred =
      simulateHostUpdates({first, second}, 30e-6, 1e9, 2e-6, true);
  EXPECT_NEAR(deferred.endSeconds, 50e-6, 1e-12);
  EXPECT_NEAR(deferred.copySeconds, 14e-6, 1e-12);
  // A copy out longer than the compute to the next update stalls that
  // update only by the rest: 40 us of bytes from 0, the next update at
  // 20 us waits to 42 us (2 us latency), then 30 us of compute; the second
  // copy (42 -> 45) and the CPU (52 -> 62 after the first's 42 -> 52) and
  // its copy back (62 -> 66) hide under it: 72 us.
  HostUpdateEvent large{0, 40000, 2000, 10e-6};
  HostTimeline stalled =
      simulateHostUpdates({large, second}, 30e-6, 1e9, 2e-6, true);
  EXPECT_NEAR(stalled.endSeconds, 72e-6, 1e-12);
  // Waiting at once (loss scaling) stalls the first update itself: 42 us,
  // then 20 us, the second copy's 3 us and 30 us.
  HostTimeline atOnce =
      simulateHostUpdates({large, second}, 30e-6, 1e9, 2e-6, false);
  EXPECT_NEAR(atOnce.endSeconds, 95e-6, 1e-12);
}
