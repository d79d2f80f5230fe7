//===- GatherParameterTest.cpp - ZeRO-3's gatherParameter on the host -----===//
//
// memopt.gather_parameter's runtime call (Runtime.h, gatherParameter) for 1
// to 4 ranks (threads, each with its own context over the in-process
// communicator) on sizes with and without a tail, fewer elements than ranks
// included: every rank's whole parameter is exactly the one the shards were
// cut from, and a low-precision whole (f16 / bf16, ZeRO-3's low copy) is
// exactly the cast of it. A shard of the wrong size and a rank count other than
// the communicator's fail with one message naming the node.
//
//===----------------------------------------------------------------------===//

#include "memopt/Runtime/Communicator.h"
#include "memopt/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace memopt::rt;

namespace {

/// Runs fn(rank, context) on one thread per rank, each context over its
/// end of an in-process communicator.
void runRanks(int ranks, const std::function<void(int, Context &)> &fn) {
  std::vector<std::unique_ptr<Communicator>> comms =
      createInProcessCommunicators(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      ContextOptions options;
      options.communicator = comms[size_t(r)].get();
      options.hostThreads = 1;
      Context *ctx = createContext(options);
      fn(r, *ctx);
      destroyContext(ctx);
    });
  for (std::thread &thread : threads)
    thread.join();
}

/// Rank r's shard of `whole` over `ranks`: its chunk, then the tail.
std::vector<float> shardOf(const std::vector<float> &whole, int rank,
                           int ranks) {
  size_t chunk = whole.size() / size_t(ranks);
  std::vector<float> shard(whole.begin() + long(size_t(rank) * chunk),
                           whole.begin() + long(size_t(rank + 1) * chunk));
  shard.insert(shard.end(), whole.begin() + long(size_t(ranks) * chunk),
               whole.end());
  return shard;
}

class GatherParameterRanks : public ::testing::TestWithParam<int> {};

TEST_P(GatherParameterRanks, EveryRankGetsTheWholeParameter) {
  int ranks = GetParam();
  for (int64_t elements : {1, 3, 7, 1000, 4099}) {
    std::vector<float> whole(static_cast<size_t>(elements));
    for (size_t i = 0; i < whole.size(); ++i)
      whole[i] = float(i) * 0.25f - 3.0f;
    std::vector<std::vector<float>> results(static_cast<size_t>(ranks));
    std::vector<std::string> errors(static_cast<size_t>(ranks));
    runRanks(ranks, [&](int rank, Context &ctx) {
      std::vector<float> shard = shardOf(whole, rank, ranks);
      std::vector<float> out(whole.size(), -1.0f);
      int64_t shardElements = int64_t(shard.size());
      TensorRef shardRef =
          makeTensor(shard.data(), DType::F32, 1, &shardElements);
      TensorRef outRef = makeTensor(out.data(), DType::F32, 1, &elements);
      gatherParameter(ctx, "w.gathered", ranks, shardRef, outRef);
      if (const char *error = contextError(ctx))
        errors[size_t(rank)] = error;
      results[size_t(rank)] = out;
    });
    for (int r = 0; r < ranks; ++r) {
      EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
      EXPECT_EQ(results[size_t(r)], whole)
          << ranks << " ranks, " << elements << " elements, rank " << r;
    }
  }
}

// The low copy (an f16 / bf16 whole from the f32 shards): every rank gets
// exactly the cast of the whole f32 parameter, as a cast after an f32
// gather would give (the chunk and tail are cast, then half the bytes
// gathered).
TEST_P(GatherParameterRanks, LowCopyEqualsTheCastOfTheWhole) {
  int ranks = GetParam();
  for (DType low : {DType::F16, DType::BF16}) {
    for (int64_t elements : {1, 7, 4099}) {
      std::vector<float> whole(static_cast<size_t>(elements));
      for (size_t i = 0; i < whole.size(); ++i)
        whole[i] = float(i) * 0.3317f - 5.1f; // not exact in f16 / bf16
      std::vector<uint16_t> expected(whole.size());
      {
        Context *ctx = createContext();
        cast(*ctx, "reference",
             makeTensor(whole.data(), DType::F32, 1, &elements),
             makeTensor(expected.data(), low, 1, &elements));
        ASSERT_EQ(contextError(*ctx), nullptr);
        destroyContext(ctx);
      }
      std::vector<std::vector<uint16_t>> results(static_cast<size_t>(ranks));
      std::vector<std::string> errors(static_cast<size_t>(ranks));
      runRanks(ranks, [&](int rank, Context &ctx) {
        std::vector<float> shard = shardOf(whole, rank, ranks);
        std::vector<uint16_t> out(whole.size(), 0xffff);
        int64_t shardElements = int64_t(shard.size());
        gatherParameter(ctx, "w.gathered", ranks,
                        makeTensor(shard.data(), DType::F32, 1, &shardElements),
                        makeTensor(out.data(), low, 1, &elements));
        if (const char *error = contextError(ctx))
          errors[size_t(rank)] = error;
        results[size_t(rank)] = out;
      });
      for (int r = 0; r < ranks; ++r) {
        EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
        EXPECT_EQ(results[size_t(r)], expected)
            << ranks << " ranks, " << elements << " elements, rank " << r
            << (low == DType::F16 ? ", f16" : ", bf16");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, GatherParameterRanks,
                         ::testing::Values(1, 2, 3, 4));

TEST(GatherParameter, WrongShardSizeNamesTheNode) {
  runRanks(1, [](int, Context &ctx) {
    std::vector<float> shard(3), out(9);
    int64_t three = 3, nine = 9;
    // Over one rank the shard is the whole parameter: 9 elements, not 3.
    gatherParameter(ctx, "w.gathered", 1,
                    makeTensor(shard.data(), DType::F32, 1, &three),
                    makeTensor(out.data(), DType::F32, 1, &nine));
    const char *error = contextError(ctx);
    ASSERT_NE(error, nullptr);
    EXPECT_NE(std::string(error).find("w.gathered"), std::string::npos)
        << error;
  });
}

TEST(GatherParameter, OtherRankCountFails) {
  runRanks(2, [](int, Context &ctx) {
    std::vector<float> shard(3), out(9);
    int64_t three = 3, nine = 9;
    gatherParameter(ctx, "w.gathered", 3,
                    makeTensor(shard.data(), DType::F32, 1, &three),
                    makeTensor(out.data(), DType::F32, 1, &nine));
    const char *error = contextError(ctx);
    ASSERT_NE(error, nullptr);
    EXPECT_NE(std::string(error).find("compiled for 3 data-parallel ranks"),
              std::string::npos)
        << error;
  });
}

} // namespace
