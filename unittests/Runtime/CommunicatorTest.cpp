//===- CommunicatorTest.cpp - the in-process communicator -----------------===//
//
// Every collective for 1 to 4 ranks (threads) on odd sizes, in place and out
// of place, against references computed here serially (the ranks' values
// added in rank order in double, what the communicator promises, so results
// compare exactly); every rank gets bit-identical results; back-to-back
// collectives of changing sizes; a mismatch between ranks and an abort fail
// every rank with one message instead of hanging; a rank that never comes
// to a collective (dead, stuck, or calling something else later) fails the
// others after the timeout with a message naming it, and itself when it
// comes.
//
//===----------------------------------------------------------------------===//

#include "memopt/Runtime/Communicator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

using namespace memopt::rt;

namespace {

/// Runs fn(rank, communicator) on one thread per rank.
void runRanks(int ranks, const std::function<void(int, Communicator &)> &fn,
              double timeoutSeconds = kDefaultCollectiveTimeoutSeconds) {
  std::vector<std::unique_ptr<Communicator>> comms =
      createInProcessCommunicators(ranks, timeoutSeconds);
  ASSERT_EQ(int(comms.size()), ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] { fn(r, *comms[size_t(r)]); });
  for (std::thread &thread : threads)
    thread.join();
}

/// Values of very different magnitudes, so that the order of the additions
/// changes the f32 result.
std::vector<float> values(size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  std::vector<float> v(count);
  for (float &x : v)
    x = std::ldexp(mantissa(rng), exponent(rng));
  return v;
}

float reduced(const std::vector<std::vector<float>> &sends, size_t i,
              CollectiveReduction reduction) {
  double sum = 0;
  for (const auto &send : sends)
    sum += double(send[i]);
  return float(reduction == CollectiveReduction::Average
                   ? sum / double(sends.size())
                   : sum);
}

const size_t kCounts[] = {0, 1, 7, 1000, 4099};

class CommunicatorRanks : public ::testing::TestWithParam<int> {};

TEST(Communicator, RejectsNoRanks) {
  EXPECT_TRUE(createInProcessCommunicators(0).empty());
  EXPECT_TRUE(createInProcessCommunicators(-3).empty());
}

TEST_P(CommunicatorRanks, RankAndSize) {
  int ranks = GetParam();
  std::vector<int> seen(static_cast<size_t>(ranks), -1);
  runRanks(ranks, [&](int rank, Communicator &comm) {
    EXPECT_EQ(comm.size(), ranks);
    seen[size_t(rank)] = comm.rank();
  });
  for (int r = 0; r < ranks; ++r)
    EXPECT_EQ(seen[size_t(r)], r);
}

TEST_P(CommunicatorRanks, AllReduce) {
  int ranks = GetParam();
  for (size_t count : kCounts)
    for (auto reduction :
         {CollectiveReduction::Sum, CollectiveReduction::Average})
      for (bool inPlace : {false, true}) {
        std::vector<std::vector<float>> sends,
            recvs(static_cast<size_t>(ranks));
        for (int r = 0; r < ranks; ++r)
          sends.push_back(values(count, 100u * unsigned(r) + unsigned(count)));
        runRanks(ranks, [&](int rank, Communicator &comm) {
          std::vector<float> &recv = recvs[size_t(rank)];
          recv = inPlace ? sends[size_t(rank)] : std::vector<float>(count, -1);
          const float *send =
              inPlace ? recv.data() : sends[size_t(rank)].data();
          EXPECT_TRUE(
              comm.allReduce(send, recv.data(), count, reduction, nullptr))
              << comm.error();
        });
        for (int r = 0; r < ranks; ++r)
          for (size_t i = 0; i < count; ++i)
            ASSERT_EQ(recvs[size_t(r)][i], reduced(sends, i, reduction))
                << "rank " << r << " element " << i << " of " << count
                << (inPlace ? " in place" : "");
      }
}

TEST_P(CommunicatorRanks, ReduceScatter) {
  int ranks = GetParam();
  for (size_t recvCount : kCounts)
    for (auto reduction :
         {CollectiveReduction::Sum, CollectiveReduction::Average})
      for (bool inPlace : {false, true}) {
        size_t total = recvCount * size_t(ranks);
        std::vector<std::vector<float>> sends,
            results(static_cast<size_t>(ranks));
        for (int r = 0; r < ranks; ++r)
          sends.push_back(values(total, 7u * unsigned(r) + unsigned(total)));
        std::vector<std::vector<float>> buffers = sends;
        runRanks(ranks, [&](int rank, Communicator &comm) {
          std::vector<float> &buffer = buffers[size_t(rank)];
          std::vector<float> own(recvCount, -1);
          float *recv =
              inPlace ? buffer.data() + size_t(rank) * recvCount : own.data();
          EXPECT_TRUE(comm.reduceScatter(buffer.data(), recv, recvCount,
                                         reduction, nullptr))
              << comm.error();
          results[size_t(rank)].assign(recv, recv + recvCount);
        });
        for (int r = 0; r < ranks; ++r)
          for (size_t i = 0; i < recvCount; ++i)
            ASSERT_EQ(results[size_t(r)][i],
                      reduced(sends, size_t(r) * recvCount + i, reduction))
                << "rank " << r << " element " << i;
      }
}

TEST_P(CommunicatorRanks, AllGather) {
  int ranks = GetParam();
  for (size_t sendCount : kCounts)
    for (bool inPlace : {false, true}) {
      size_t total = sendCount * size_t(ranks);
      std::vector<std::vector<float>> sends, recvs(static_cast<size_t>(ranks));
      for (int r = 0; r < ranks; ++r)
        sends.push_back(values(sendCount, 31u * unsigned(r) + 5));
      runRanks(ranks, [&](int rank, Communicator &comm) {
        std::vector<float> &recv = recvs[size_t(rank)];
        recv.assign(total, -1);
        const float *send = sends[size_t(rank)].data();
        if (inPlace) {
          std::copy(sends[size_t(rank)].begin(), sends[size_t(rank)].end(),
                    recv.begin() + std::ptrdiff_t(size_t(rank) * sendCount));
          send = recv.data() + size_t(rank) * sendCount;
        }
        EXPECT_TRUE(comm.allGather(send, recv.data(), sendCount, nullptr))
            << comm.error();
      });
      for (int r = 0; r < ranks; ++r)
        for (int k = 0; k < ranks; ++k)
          for (size_t i = 0; i < sendCount; ++i)
            ASSERT_EQ(recvs[size_t(r)][size_t(k) * sendCount + i],
                      sends[size_t(k)][i])
                << "rank " << r << " chunk " << k << " element " << i;
    }
}

TEST_P(CommunicatorRanks, Broadcast) {
  int ranks = GetParam();
  for (int root = 0; root < ranks; ++root)
    for (size_t count : kCounts) {
      std::vector<std::vector<float>> buffers;
      for (int r = 0; r < ranks; ++r)
        buffers.push_back(values(count, 11u * unsigned(r) + 1));
      std::vector<float> expected = buffers[size_t(root)];
      runRanks(ranks, [&](int rank, Communicator &comm) {
        std::vector<float> &buffer = buffers[size_t(rank)];
        EXPECT_TRUE(
            comm.broadcast(buffer.data(), buffer.data(), count, root, nullptr))
            << comm.error();
      });
      for (int r = 0; r < ranks; ++r)
        ASSERT_EQ(buffers[size_t(r)], expected) << "rank " << r;
    }
}

TEST_P(CommunicatorRanks, Barrier) {
  int ranks = GetParam();
  std::atomic<int> arrived{0};
  runRanks(ranks, [&](int rank, Communicator &comm) {
    // Late ranks arrive later; nobody may pass before all have arrived.
    std::this_thread::sleep_for(std::chrono::milliseconds(5 * rank));
    arrived.fetch_add(1);
    EXPECT_TRUE(comm.barrier(nullptr)) << comm.error();
    EXPECT_EQ(arrived.load(), ranks);
  });
}

/// Many collectives back to back, of changing kinds and sizes, with ranks
/// running at different speeds: a fast rank's next call must not disturb
/// a slow rank's current one. Two runs give bit-identical results.
TEST_P(CommunicatorRanks, BackToBackIsDeterministic) {
  int ranks = GetParam();
  // shared: what all-reduce, all-gather and broadcast gave (the same on
  // every rank); shards: what reduce-scatter gave (each rank its own).
  struct Logs {
    std::vector<std::vector<float>> shared, shards;
  };
  auto once = [&] {
    Logs logs;
    logs.shared.resize(size_t(ranks));
    logs.shards.resize(size_t(ranks));
    runRanks(ranks, [&](int rank, Communicator &comm) {
      std::vector<float> &shared = logs.shared[size_t(rank)];
      for (int round = 0; round < 60; ++round) {
        size_t count = size_t(1 + (round * 37) % 301);
        std::vector<float> a =
            values(count * size_t(ranks), unsigned(round * 13 + rank * 1000));
        if (rank == round % ranks)
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        switch (round % 4) {
        case 0:
          ASSERT_TRUE(comm.allReduce(a.data(), a.data(), a.size(),
                                     CollectiveReduction::Average, nullptr));
          shared.insert(shared.end(), a.begin(), a.end());
          break;
        case 1: {
          std::vector<float> shard(count);
          ASSERT_TRUE(comm.reduceScatter(a.data(), shard.data(), count,
                                         CollectiveReduction::Sum, nullptr));
          logs.shards[size_t(rank)].insert(logs.shards[size_t(rank)].end(),
                                           shard.begin(), shard.end());
          break;
        }
        case 2: {
          std::vector<float> all(count * size_t(ranks));
          ASSERT_TRUE(comm.allGather(a.data(), all.data(), count, nullptr));
          shared.insert(shared.end(), all.begin(), all.end());
          break;
        }
        case 3:
          ASSERT_TRUE(
              comm.broadcast(a.data(), a.data(), a.size(), ranks - 1, nullptr));
          shared.insert(shared.end(), a.begin(), a.end());
          break;
        }
      }
    });
    return logs;
  };
  Logs first = once(), second = once();
  EXPECT_EQ(first.shared, second.shared);
  EXPECT_EQ(first.shards, second.shards);
  ASSERT_FALSE(first.shared[0].empty());
  for (int r = 1; r < ranks; ++r)
    EXPECT_EQ(first.shared[size_t(r)], first.shared[0]) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Ranks, CommunicatorRanks,
                         ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return std::to_string(info.param) + "ranks";
                         });

TEST(Communicator, MismatchFailsEveryRank) {
  std::vector<std::string> errors(2);
  std::vector<bool> ok(2, true);
  runRanks(2, [&](int rank, Communicator &comm) {
    std::vector<float> buffer(8, 1.0f);
    if (rank == 0)
      ok[0] = comm.allReduce(buffer.data(), buffer.data(), 4,
                             CollectiveReduction::Sum, nullptr);
    else
      ok[1] = comm.allGather(buffer.data(), buffer.data(), 4, nullptr);
    errors[size_t(rank)] = comm.error();
    // Everything after a failure fails at once, without waiting.
    EXPECT_FALSE(comm.barrier(nullptr));
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(ok[size_t(r)]);
    EXPECT_NE(errors[size_t(r)].find("collective mismatch: rank 0 called "
                                     "all_reduce of 4 elements (sum), rank 1 "
                                     "called all_gather of 4 elements"),
              std::string::npos)
        << errors[size_t(r)];
  }
}

TEST(Communicator, AbortUnblocksWaitingRanks) {
  std::vector<std::string> errors(3);
  runRanks(3, [&](int rank, Communicator &comm) {
    std::vector<float> buffer(16, 2.0f);
    if (rank == 2) {
      // This rank fails before its collective; the others are waiting.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      comm.abort("kernel failed");
      EXPECT_FALSE(comm.allReduce(buffer.data(), buffer.data(), 16,
                                  CollectiveReduction::Sum, nullptr));
    } else {
      EXPECT_FALSE(comm.allReduce(buffer.data(), buffer.data(), 16,
                                  CollectiveReduction::Sum, nullptr));
    }
    errors[size_t(rank)] = comm.error();
  });
  for (const std::string &error : errors)
    EXPECT_EQ(error, "rank 2: kernel failed");
}

TEST(Communicator, MissingRankTimesOut) {
  // Rank 1 comes to the all-reduce only after the timeout: ranks 0 and 2
  // fail after it (not a hang) naming rank 1 and the collective; when rank
  // 1 finally calls, it fails with the same message at once.
  std::vector<std::string> errors(3);
  std::vector<double> waited(3, 0);
  runRanks(
      3,
      [&](int rank, Communicator &comm) {
        std::vector<float> buffer(7, 1.0f);
        if (rank == 1)
          std::this_thread::sleep_for(std::chrono::milliseconds(2000));
        auto start = std::chrono::steady_clock::now();
        EXPECT_FALSE(comm.allReduce(buffer.data(), buffer.data(), 7,
                                    CollectiveReduction::Sum, nullptr));
        waited[size_t(rank)] = std::chrono::duration<double>(
                                   std::chrono::steady_clock::now() - start)
                                   .count();
        errors[size_t(rank)] = comm.error();
      },
      /*timeoutSeconds=*/0.2);
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(errors[size_t(r)].find(
                  "waited 0.2 s in all_reduce of 7 elements (sum) for rank 1 "
                  "of 3 (MEMOPT_NCCL_TIMEOUT_S)"),
              std::string::npos)
        << errors[size_t(r)];
    EXPECT_EQ(errors[size_t(r)].rfind("collective timeout: rank ", 0), 0u)
        << errors[size_t(r)];
  }
  EXPECT_GE(waited[0], 0.15);
  EXPECT_LT(waited[0], 1.8); // before rank 1 came
  EXPECT_LT(waited[1], 0.5); // the group was aborted already
}

TEST(Communicator, RankThatStopsCallingTimesOutInTheSecondPhase) {
  // Two collectives go through; then rank 3 of 4 stops (a rank thread
  // stuck or gone): the others' next barrier fails naming rank 3 only.
  std::vector<std::string> errors(4);
  runRanks(
      4,
      [&](int rank, Communicator &comm) {
        std::vector<float> buffer(8, float(rank));
        EXPECT_TRUE(comm.allReduce(buffer.data(), buffer.data(), 8,
                                   CollectiveReduction::Sum, nullptr));
        EXPECT_TRUE(comm.allGather(buffer.data() + 2 * rank, buffer.data(), 2,
                                   nullptr));
        if (rank == 3)
          return;
        EXPECT_FALSE(comm.barrier(nullptr));
        errors[size_t(rank)] = comm.error();
      },
      /*timeoutSeconds=*/0.2);
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(errors[size_t(r)].find("in barrier for rank 3 of 4"),
              std::string::npos)
        << errors[size_t(r)];
}

TEST(Communicator, TimeoutFromTheEnvironment) {
  const char *old = std::getenv("MEMOPT_NCCL_TIMEOUT_S");
  std::string saved = old ? old : "";
  double seconds = -1;
  std::string error;
  unsetenv("MEMOPT_NCCL_TIMEOUT_S");
  EXPECT_TRUE(collectiveTimeoutFromEnvironment(seconds, error));
  EXPECT_EQ(seconds, kDefaultCollectiveTimeoutSeconds);
  setenv("MEMOPT_NCCL_TIMEOUT_S", "0.25", 1);
  EXPECT_TRUE(collectiveTimeoutFromEnvironment(seconds, error));
  EXPECT_EQ(seconds, 0.25);
  setenv("MEMOPT_NCCL_TIMEOUT_S", "soon", 1);
  EXPECT_FALSE(collectiveTimeoutFromEnvironment(seconds, error));
  EXPECT_EQ(error, "MEMOPT_NCCL_TIMEOUT_S='soon' is not a number of seconds "
                   "(0 turns the timeout off)");
  if (old)
    setenv("MEMOPT_NCCL_TIMEOUT_S", saved.c_str(), 1);
  else
    unsetenv("MEMOPT_NCCL_TIMEOUT_S");
}

TEST(Communicator, InjectedLateRankTimesOut) {
  // MEMOPT_FAULT_LATE_RANK's rank sleeps before each call: the others wait
  // for it past the timeout, however the threads are scheduled.
  std::vector<std::unique_ptr<Communicator>> comms =
      createInProcessCommunicators(3, 0.05, LateRank{2, 1.0});
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      float x = 1;
      if (!comms[size_t(r)]->allReduce(&x, &x, 1, DType::F32,
                                       CollectiveReduction::Sum, nullptr))
        errors[size_t(r)] = comms[size_t(r)]->error();
    });
  for (std::thread &thread : threads)
    thread.join();
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(errors[size_t(r)].find("for rank 2 of 3"), std::string::npos)
        << errors[size_t(r)];
}

TEST(Communicator, LateRankFromTheEnvironment) {
  const char *old = std::getenv("MEMOPT_FAULT_LATE_RANK");
  std::string saved = old ? old : "";
  LateRank late;
  std::string error;
  unsetenv("MEMOPT_FAULT_LATE_RANK");
  EXPECT_TRUE(lateRankFromEnvironment(2, late, error));
  EXPECT_EQ(late.rank, -1);
  setenv("MEMOPT_FAULT_LATE_RANK", "1:0.5", 1);
  EXPECT_TRUE(lateRankFromEnvironment(2, late, error));
  EXPECT_EQ(late.rank, 1);
  EXPECT_EQ(late.seconds, 0.5);
  for (const char *bad : {"2:1", "1", "1:", "x:1", "1:-1", "-1:1"}) {
    setenv("MEMOPT_FAULT_LATE_RANK", bad, 1);
    EXPECT_FALSE(lateRankFromEnvironment(2, late, error)) << bad;
    EXPECT_EQ(error, std::string("MEMOPT_FAULT_LATE_RANK='") + bad +
                         "' is not RANK:SECONDS with a rank below 2");
  }
  if (old)
    setenv("MEMOPT_FAULT_LATE_RANK", saved.c_str(), 1);
  else
    unsetenv("MEMOPT_FAULT_LATE_RANK");
}

TEST(Communicator, BadBroadcastRootFails) {
  runRanks(2, [&](int, Communicator &comm) {
    float x = 1;
    EXPECT_FALSE(comm.broadcast(&x, &x, 1, 5, nullptr));
    EXPECT_NE(comm.error().find("broadcast from rank 5 in a group of 2"),
              std::string::npos)
        << comm.error();
  });
}

/// Round trips through the low types (Internal.h's conversions, restated).
uint16_t toHalfBits(float value) {
  // Exact for the small integers and halves used below.
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if (value == 0.0f)
    return uint16_t(bits >> 16);
  int exponent = int((bits >> 23) & 0xff) - 127 + 15;
  return uint16_t(((bits >> 16) & 0x8000) | (uint32_t(exponent) << 10) |
                  ((bits >> 13) & 0x3ff));
}

TEST_P(CommunicatorRanks, LowPrecisionReductions) {
  // f16 and bf16 gradients reduced in their own type (reduce-dtype=low):
  // rank r sends r + 1 + i / 2 at element i; the average and the sum are
  // exact in both types for these values, and every rank gets the same bits.
  int ranks = GetParam();
  const size_t count = 9;
  for (DType dtype : {DType::F16, DType::BF16})
    for (auto reduction :
         {CollectiveReduction::Sum, CollectiveReduction::Average}) {
      std::vector<std::vector<uint16_t>> results(static_cast<size_t>(ranks));
      runRanks(ranks, [&](int rank, Communicator &comm) {
        std::vector<uint16_t> buffer(count);
        for (size_t i = 0; i < count; ++i) {
          float value = float(rank + 1) + float(i) * 0.5f;
          uint32_t bits;
          std::memcpy(&bits, &value, sizeof bits);
          buffer[i] =
              dtype == DType::F16 ? toHalfBits(value) : uint16_t(bits >> 16);
        }
        EXPECT_TRUE(comm.allReduce(buffer.data(), buffer.data(), count, dtype,
                                   reduction, nullptr))
            << comm.error();
        results[size_t(rank)] = buffer;
      });
      for (size_t i = 0; i < count; ++i) {
        double sum = 0;
        for (int r = 0; r < ranks; ++r)
          sum += double(r + 1) + double(i) * 0.5;
        float expected = float(reduction == CollectiveReduction::Average
                                   ? sum / double(ranks)
                                   : sum);
        if (reduction == CollectiveReduction::Average &&
            expected != std::floor(expected * 2) / 2)
          continue; // not a half: rounding in the low type, skip
        uint32_t bits;
        std::memcpy(&bits, &expected, sizeof bits);
        uint16_t want =
            dtype == DType::F16 ? toHalfBits(expected) : uint16_t(bits >> 16);
        for (int r = 0; r < ranks; ++r)
          ASSERT_EQ(results[size_t(r)][i], want)
              << (dtype == DType::F16 ? "f16" : "bf16") << " rank " << r
              << " element " << i;
      }
    }
}

TEST_P(CommunicatorRanks, MaxAgreesOnAFlag) {
  // The loss scale's overflow flag: 1 on the last rank only, 0 elsewhere;
  // max gives every rank 1. Reduce-scatter in f16 keeps each rank's chunk.
  int ranks = GetParam();
  std::vector<float> flags(static_cast<size_t>(ranks), -1.0f);
  runRanks(ranks, [&](int rank, Communicator &comm) {
    float flag = rank == ranks - 1 ? 1.0f : 0.0f;
    EXPECT_TRUE(
        comm.allReduce(&flag, &flag, 1, CollectiveReduction::Max, nullptr))
        << comm.error();
    flags[size_t(rank)] = flag;
  });
  for (int r = 0; r < ranks; ++r)
    EXPECT_EQ(flags[size_t(r)], 1.0f) << "rank " << r;
  std::vector<uint16_t> chunks(static_cast<size_t>(ranks));
  runRanks(ranks, [&](int rank, Communicator &comm) {
    std::vector<uint16_t> send(size_t(ranks), toHalfBits(float(rank + 1)));
    uint16_t recv = 0;
    EXPECT_TRUE(comm.reduceScatter(send.data(), &recv, 1, DType::F16,
                                   CollectiveReduction::Sum, nullptr))
        << comm.error();
    chunks[size_t(rank)] = recv;
  });
  float total = float(ranks * (ranks + 1) / 2);
  for (int r = 0; r < ranks; ++r)
    EXPECT_EQ(chunks[size_t(r)], toHalfBits(total)) << "rank " << r;
}

TEST(Communicator, TypeMismatchFailsEveryRank) {
  std::vector<std::string> errors(2);
  runRanks(2, [&](int rank, Communicator &comm) {
    std::vector<uint16_t> buffer(4, 0);
    comm.allReduce(buffer.data(), buffer.data(), 4,
                   rank == 0 ? DType::F16 : DType::BF16,
                   CollectiveReduction::Sum, nullptr);
    errors[size_t(rank)] = comm.error();
  });
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(errors[size_t(r)].find("rank 0 called all_reduce of 4 f16 "
                                     "elements (sum), rank 1 called "
                                     "all_reduce of 4 bf16 elements (sum)"),
              std::string::npos)
        << errors[size_t(r)];
}

} // namespace
