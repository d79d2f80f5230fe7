//===- RendezvousTest.cpp - ranks meet over TCP on 127.0.0.1 --------------===//
//
// The TCP rendezvous of lib/Runtime/Rendezvous.cpp with ranks as threads of
// this process, over the loopback interface only: every rank receives rank
// 0's id (also when it connects before rank 0 listens, and through the
// launch environment's exchangeUniqueId as a torchrun-launched rank calls
// it); a rank that never arrives is named on rank 0 and on the ranks that
// did come, and so is one that arrived and died before the others came;
// another world size and a duplicate rank are refused with their
// reason; an unreachable rank 0 times out with one message. Every wait is
// bounded (at most a few seconds).
//
//===----------------------------------------------------------------------===//

#include "memopt/Runtime/Rendezvous.h"
#include "memopt/Runtime/Communicator.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <chrono>
#include <cstring>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace memopt::rt;

namespace {

constexpr size_t kIdBytes = 128;

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

std::vector<unsigned char> makeId(unsigned char seed) {
  std::vector<unsigned char> id(kIdBytes);
  for (size_t i = 0; i < id.size(); ++i)
    id[i] = (unsigned char)(seed + i * 13);
  return id;
}

struct JoinResult {
  bool ok = false;
  std::string error;
  std::vector<unsigned char> id = std::vector<unsigned char>(kIdBytes, 0);
};

/// Rank `rank` joining 127.0.0.1:`port` on a thread.
std::thread joinOnThread(int port, int rank, int world, double timeout,
                         JoinResult &result) {
  return std::thread([=, &result] {
    result.ok = joinRendezvous("127.0.0.1", port, rank, world, timeout,
                               result.id.data(), kIdBytes, result.error);
  });
}

TEST(Rendezvous, EveryRankReceivesTheId) {
  for (int world : {2, 3, 8}) {
    RendezvousServer server;
    std::string error;
    ASSERT_TRUE(server.listen(0, error)) << error;
    ASSERT_GT(server.port(), 0);
    std::vector<JoinResult> results(static_cast<size_t>(world));
    std::vector<std::thread> threads;
    // Ranks arrive in reverse order: the server does not expect rank 1
    // first.
    for (int r = world - 1; r >= 1; --r)
      threads.push_back(
          joinOnThread(server.port(), r, world, 5.0, results[size_t(r)]));
    std::vector<unsigned char> id = makeId((unsigned char)world);
    EXPECT_TRUE(server.serve(world, id.data(), id.size(), 5.0, error)) << error;
    for (std::thread &t : threads)
      t.join();
    for (int r = 1; r < world; ++r) {
      EXPECT_TRUE(results[size_t(r)].ok) << results[size_t(r)].error;
      EXPECT_EQ(results[size_t(r)].id, id) << "rank " << r;
    }
  }
}

TEST(Rendezvous, RankConnectsBeforeRankZeroListens) {
  int port;
  {
    RendezvousServer probe; // a free port, released again
    std::string error;
    ASSERT_TRUE(probe.listen(0, error)) << error;
    port = probe.port();
  }
  JoinResult result;
  std::thread rank1 = joinOnThread(port, 1, 2, 5.0, result);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  RendezvousServer server;
  std::string error;
  ASSERT_TRUE(server.listen(port, error)) << error;
  std::vector<unsigned char> id = makeId(7);
  EXPECT_TRUE(server.serve(2, id.data(), id.size(), 5.0, error)) << error;
  rank1.join();
  EXPECT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.id, id);
}

TEST(Rendezvous, MissingRankIsNamed) {
  RendezvousServer server;
  std::string error;
  ASSERT_TRUE(server.listen(0, error)) << error;
  JoinResult rank1, rank3;
  std::thread a = joinOnThread(server.port(), 1, 4, 5.0, rank1);
  std::thread b = joinOnThread(server.port(), 3, 4, 5.0, rank3);
  std::vector<unsigned char> id = makeId(1);
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(server.serve(4, id.data(), id.size(), 0.5, error));
  double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  a.join();
  b.join();
  EXPECT_LT(waited, 3.0);
  EXPECT_TRUE(contains(error, "rank 2 of 4 did not arrive")) << error;
  EXPECT_TRUE(contains(error, "within 0.5 s")) << error;
  // The ranks that came are told which one did not, and get no id.
  for (JoinResult *r : {&rank1, &rank3}) {
    EXPECT_FALSE(r->ok);
    EXPECT_TRUE(contains(r->error, "rank 2 of 4 did not arrive")) << r->error;
    EXPECT_EQ(r->id, std::vector<unsigned char>(kIdBytes, 0));
  }
  // Several missing ranks are listed together.
  RendezvousServer alone;
  ASSERT_TRUE(alone.listen(0, error)) << error;
  EXPECT_FALSE(alone.serve(4, id.data(), id.size(), 0.2, error));
  EXPECT_TRUE(contains(error, "ranks 1, 2, 3 of 4 did not arrive")) << error;
}

/// A process that says hello as rank `rank` of `world` on 127.0.0.1:`port`,
/// then dies (closes its socket) without waiting for the id.
void helloThenDie(int port, int rank, int world) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(uint16_t(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof address),
            0);
  unsigned char hello[16] = {'M', 'E', 'M', 'O', 'R', 'D', 'V', '1'};
  for (int i = 0; i < 4; ++i) {
    hello[8 + i] = (unsigned char)((rank >> (8 * i)) & 0xff);
    hello[12 + i] = (unsigned char)((world >> (8 * i)) & 0xff);
  }
  ASSERT_EQ(send(fd, hello, sizeof hello, MSG_NOSIGNAL), ssize_t(sizeof hello));
  close(fd);
}

TEST(Rendezvous, RankThatDiesAfterArrivingIsNamed) {
  // Rank 2 of 3 arrives and dies before rank 1 comes: rank 0 does not hand
  // the id to a dead process (the others would hang in ncclCommInitRank);
  // it counts rank 2 missing again and names it when the wait times out.
  RendezvousServer server;
  std::string error;
  ASSERT_TRUE(server.listen(0, error)) << error;
  std::vector<unsigned char> id = makeId(4);
  bool served = true;
  std::thread rank0(
      [&] { served = server.serve(3, id.data(), id.size(), 0.8, error); });
  helloThenDie(server.port(), 2, 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  JoinResult rank1;
  std::thread t1 = joinOnThread(server.port(), 1, 3, 5.0, rank1);
  auto start = std::chrono::steady_clock::now();
  t1.join();
  rank0.join();
  EXPECT_LT(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count(),
      3.0);
  EXPECT_FALSE(served);
  EXPECT_TRUE(contains(error, "rank 2 of 3 did not arrive")) << error;
  EXPECT_TRUE(contains(error, "rank 2 connected, then closed its connection"))
      << error;
  EXPECT_FALSE(rank1.ok);
  EXPECT_TRUE(contains(rank1.error, "rank 2 of 3 did not arrive"))
      << rank1.error;
  EXPECT_EQ(rank1.id, std::vector<unsigned char>(kIdBytes, 0));
}

TEST(Rendezvous, ForeignWorldSizeAndDuplicateRankAreRefused) {
  RendezvousServer server;
  std::string error;
  ASSERT_TRUE(server.listen(0, error)) << error;
  JoinResult foreign, first, duplicate, outside;
  // A process of another launch comes first (connections queue in
  // order), then the real rank 1.
  std::thread t1 = joinOnThread(server.port(), 1, 3, 5.0, foreign);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::thread t2 = joinOnThread(server.port(), 1, 2, 5.0, first);
  std::vector<unsigned char> id = makeId(9);
  EXPECT_TRUE(server.serve(2, id.data(), id.size(), 5.0, error)) << error;
  t1.join();
  t2.join();
  EXPECT_FALSE(foreign.ok);
  EXPECT_TRUE(contains(foreign.error, "rank 1 has WORLD_SIZE=3; rank 0 has "
                                      "WORLD_SIZE=2"))
      << foreign.error;
  EXPECT_TRUE(first.ok) << first.error;
  EXPECT_EQ(first.id, id);

  RendezvousServer second;
  ASSERT_TRUE(second.listen(0, error)) << error;
  std::thread t3 = joinOnThread(second.port(), 1, 3, 5.0, first);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::thread t4 = joinOnThread(second.port(), 1, 3, 5.0, duplicate);
  std::thread t5 = joinOnThread(second.port(), 5, 3, 5.0, outside);
  EXPECT_FALSE(second.serve(3, id.data(), id.size(), 0.8, error));
  t3.join();
  t4.join();
  t5.join();
  EXPECT_TRUE(contains(duplicate.error, "two processes say they are rank 1"))
      << duplicate.error;
  EXPECT_TRUE(contains(outside.error, "says it is rank 5, outside [1, 3)"))
      << outside.error;
  // Rank 0's timeout names the missing rank and what it refused.
  EXPECT_TRUE(contains(error, "rank 2 of 3 did not arrive")) << error;
  EXPECT_TRUE(contains(error, "refused: two processes say they are rank 1"))
      << error;
}

TEST(Rendezvous, UnreachableRankZeroTimesOut) {
  int port;
  {
    RendezvousServer probe;
    std::string error;
    ASSERT_TRUE(probe.listen(0, error)) << error;
    port = probe.port();
  }
  std::vector<unsigned char> id(kIdBytes);
  std::string error;
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(
      joinRendezvous("127.0.0.1", port, 1, 2, 0.3, id.data(), kIdBytes, error));
  EXPECT_LT(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count(),
      3.0);
  EXPECT_TRUE(contains(error, "rank 1 could not reach rank 0 at 127.0.0.1:" +
                                  std::to_string(port) + " within 0.3 s"))
      << error;
  EXPECT_FALSE(joinRendezvous("no-such-host.invalid", port, 1, 2, 0.2,
                              id.data(), kIdBytes, error));
  EXPECT_TRUE(contains(error, "cannot resolve MASTER_ADDR 'no-such-host."
                              "invalid'"))
      << error;
}

TEST(Rendezvous, PortTaken) {
  RendezvousServer first, second;
  std::string error;
  ASSERT_TRUE(first.listen(0, error)) << error;
  EXPECT_FALSE(second.listen(first.port(), error));
  EXPECT_TRUE(contains(error, "rank 0 cannot listen on port " +
                                  std::to_string(first.port())))
      << error;
  EXPECT_TRUE(contains(error, "MEMOPT_RDZV_PORT")) << error;
}

/// What a torchrun-launched rank does: exchangeUniqueId with the launch
/// environment's address and port (no id file).
TEST(Rendezvous, ExchangeThroughTheLaunchEnvironment) {
  int port;
  {
    RendezvousServer probe;
    std::string error;
    ASSERT_TRUE(probe.listen(0, error)) << error;
    port = probe.port();
  }
  const int world = 4;
  std::vector<std::vector<unsigned char>> ids(
      world, std::vector<unsigned char>(kIdBytes, 0));
  ids[0] = makeId(42);
  std::vector<std::string> errors(world);
  std::vector<int> ok(world, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      LaunchEnvironment env;
      env.rank = r;
      env.worldSize = world;
      env.localRank = r;
      env.masterAddress = "127.0.0.1";
      env.rendezvousPort = port;
      env.idTimeoutSeconds = 10;
      ok[size_t(r)] = exchangeUniqueId(env, ids[size_t(r)].data(), kIdBytes,
                                       errors[size_t(r)]);
    });
  for (std::thread &t : threads)
    t.join();
  for (int r = 0; r < world; ++r) {
    EXPECT_TRUE(ok[size_t(r)]) << errors[size_t(r)];
    EXPECT_EQ(ids[size_t(r)], ids[0]) << "rank " << r;
  }
  // A lone rank 1 names itself in its error.
  LaunchEnvironment env;
  env.rank = 1;
  env.worldSize = 2;
  env.masterAddress = "127.0.0.1";
  env.rendezvousPort = port;
  env.idTimeoutSeconds = 0.2;
  std::string error;
  EXPECT_FALSE(exchangeUniqueId(env, ids[1].data(), kIdBytes, error));
  EXPECT_EQ(error.rfind("rank 1: rendezvous: rank 1 could not reach", 0), 0u)
      << error;
}

} // namespace
