//===- ScaledKernelTimesTest.cpp - measured op times at other batches -----===//
//
// The arithmetic of ScaledKernelTimes (memopt/Analysis/ScaledKernelTimes.h):
// one measured micro-batch scales by the roofline work, two interpolate the
// efficiency, the op overhead is a constant per op, unmeasured names fall
// back to the roofline, and a file without its micro-batch is used as it
// is.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/ScaledKernelTimes.h"

#include <gtest/gtest.h>

using namespace mlir::memopt;

namespace {

KernelTimes times(std::initializer_list<std::pair<const char *, double>> list) {
  KernelTimes result;
  for (auto [name, seconds] : list)
    result[name] = seconds;
  return result;
}

TEST(ScaledKernelTimes, OneMicroBatchScalesByTheRooflineWork) {
  ScaledKernelTimes model;
  model.setDefaultOpOverhead(2e-6);
  // Measured at micro-batch 4: 42 us, of which 2 us fixed; the roofline
  // said 20 us of work there: efficiency 2 (the kernel runs at half the
  // peak).
  model.addMeasurement(times({{"mm", 42e-6}}), 4);
  EXPECT_EQ(model.getMeasuredMicroBatches(), std::vector<int64_t>{4});
  model.setReferenceWork("mm", 4, 20e-6);
  // At micro-batch 8 the roofline work doubles (40 us): 2 + 2 x 40 = 82 us,
  // not 2 x 42.
  EXPECT_NEAR(*model.predict("mm", 8, 40e-6), 82e-6, 1e-12);
  // At the measured batch the measured time comes back.
  EXPECT_NEAR(*model.predict("mm", 4, 20e-6), 42e-6, 1e-12);
  // A weight-sized op (the same work at every micro-batch) keeps its time;
  // a gradient op of the same name with 1.5x the work takes 1.5x the
  // variable part.
  EXPECT_NEAR(*model.predict("mm", 1, 20e-6), 42e-6, 1e-12);
  EXPECT_NEAR(*model.predict("mm", 4, 30e-6), 62e-6, 1e-12);
  // A name nothing measured: the caller's roofline.
  EXPECT_FALSE(model.predict("relu", 8, 1e-6).has_value());
  // An op without work costs its fixed part only.
  EXPECT_NEAR(*model.predict("mm", 8, 0), 2e-6, 1e-12);
}

TEST(ScaledKernelTimes, TwoMicroBatchesInterpolateTheEfficiency) {
  ScaledKernelTimes model;
  model.setDefaultOpOverhead(1e-6);
  // Small batches run further from the peak: efficiency 3 at micro-batch 2
  // (31 us for 10 us of work), 1.5 at 8 (61 us for 40 us).
  model.addMeasurement(times({{"mm", 31e-6}}), 2);
  model.addMeasurement(times({{"mm", 61e-6}}), 8);
  EXPECT_EQ(model.getMeasuredMicroBatches(), (std::vector<int64_t>{2, 8}));
  model.setReferenceWork("mm", 2, 10e-6);
  model.setReferenceWork("mm", 8, 40e-6);
  // Micro-batch 4 (20 us of work): efficiency 3 - 1.5 x 2/6 = 2.5, so
  // 1 + 2.5 x 20 = 51 us.
  EXPECT_NEAR(*model.predict("mm", 4, 20e-6), 51e-6, 1e-12);
  // Outside the measured range the nearest efficiency holds.
  EXPECT_NEAR(*model.predict("mm", 16, 80e-6), 121e-6, 1e-12);
  EXPECT_NEAR(*model.predict("mm", 1, 5e-6), 16e-6, 1e-12);
}

TEST(ScaledKernelTimes, MeasuredOverheadAndUnknownBatch) {
  ScaledKernelTimes model;
  model.setDefaultOpOverhead(2e-6);
  // The file's "<op overhead>" replaces the default; its "<...>" entries
  // are not ops.
  model.addMeasurement(
      times({{"mm", 11e-6}, {"<op overhead>", 1e-6}, {"<copy 1 GiB>", 0.03}}),
      4);
  EXPECT_DOUBLE_EQ(model.getOpOverhead(), 1e-6);
  EXPECT_FALSE(model.predict("<copy 1 GiB>", 4, 1e-6).has_value());
  model.setReferenceWork("mm", 4, 5e-6);
  EXPECT_NEAR(*model.predict("mm", 8, 10e-6), 21e-6, 1e-12);
  // Without a reference plan (or a micro-batch) the time is used as it is.
  ScaledKernelTimes unknown;
  unknown.addMeasurement(times({{"mm", 11e-6}}), 0);
  EXPECT_TRUE(unknown.getMeasuredMicroBatches().empty());
  EXPECT_NEAR(*unknown.predict("mm", 8, 10e-6), 11e-6, 1e-12);
  ScaledKernelTimes noReference;
  noReference.addMeasurement(times({{"mm", 11e-6}}), 4);
  noReference.addMeasurement(times({{"mm", 19e-6}}), 8);
  EXPECT_NEAR(*noReference.predict("mm", 7, 10e-6), 19e-6, 1e-12);
}

TEST(ScaledKernelTimes, AnotherKindUnderTheNameTakesTheRoofline) {
  ScaledKernelTimes model;
  model.setDefaultOpOverhead(1e-6);
  // The embedding's Gather: measured 9 us for 2 us of work, efficiency 4.
  model.addMeasurement(times({{"emb", 9e-6}}), 4);
  model.setReferenceWork("emb", 4, 2e-6, "memopt.gather");
  // The Gather's own kind takes its efficiency...
  EXPECT_NEAR(*model.predict("emb", 8, 4e-6, "memopt.gather"), 17e-6, 1e-12);
  // ...its scatter gradient, under the same name, was never measured: the
  // caller's roofline, not the Gather's ratio (a 4-byte constant under the
  // Gather's name once lent its ratio, 10^7, and made TinyLlama's predicted
  // step 194,000 s).
  EXPECT_FALSE(model.predict("emb", 8, 3e-6, "memopt.scatter_nd").has_value());
  // An op without a kind matches any reference.
  EXPECT_NEAR(*model.predict("emb", 8, 4e-6), 17e-6, 1e-12);
}

TEST(ScaledKernelTimes, EachKindUnderTheNameTakesItsOwnMeasurement) {
  ScaledKernelTimes model;
  model.setDefaultOpOverhead(1e-6);
  // A convolution measured at 5 us for 2 us of work (efficiency 2), its
  // filter gradient, under the same name, at 13 us for 3 us (efficiency 4).
  std::string filter = kernelTimeKey("conv_1", "memopt.conv_backward_filter");
  model.addMeasurement(times({{"conv_1", 5e-6}, {filter.c_str(), 13e-6}}), 4);
  model.setReferenceWork("conv_1", 4, 2e-6, "memopt.conv");
  model.setReferenceWork(filter, 4, 3e-6);
  EXPECT_NEAR(*model.predict("conv_1", 8, 4e-6, "memopt.conv"), 9e-6, 1e-12);
  EXPECT_NEAR(*model.predict("conv_1", 8, 6e-6, "memopt.conv_backward_filter"),
              25e-6, 1e-12);
  // A kind the file did not measure apart still takes the roofline.
  EXPECT_FALSE(
      model.predict("conv_1", 8, 6e-6, "memopt.transpose").has_value());
  EXPECT_EQ(filter, "conv_1 @ memopt.conv_backward_filter");
}

} // namespace
