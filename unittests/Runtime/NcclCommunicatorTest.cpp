//===- NcclCommunicatorTest.cpp - NCCL launch and communicator ------------===//
//
// What runs without a GPU: the torchrun-style environment (RANK,
// WORLD_SIZE, LOCAL_RANK, MEMOPT_NCCL_ID_FILE, MASTER_ADDR / MASTER_PORT /
// MEMOPT_RDZV_PORT) and its errors; the id-file
// exchange (atomic publish, a reader that starts first, a stale file, a
// timeout, a file for another world size); a missing or wrong NCCL library
// (one message, the release callback still runs); and the calls the
// communicator makes, through a stand-in library (FakeNccl.cpp) that records
// their arguments: ncclFloat32 = 7, ncclSum = 0, ncclAvg = 4, counts,
// in-place pointers, the stream, and abort.
//
//===----------------------------------------------------------------------===//

#include "memopt/Runtime/Communicator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <thread>
#include <unistd.h>

using namespace memopt::rt;

namespace {

/// Sets (or, with nullptr, unsets) environment variables for one test and
/// restores them after.
class Environment {
public:
  ~Environment() {
    for (auto &entry : saved_) {
      if (entry.second.first)
        setenv(entry.first.c_str(), entry.second.second.c_str(), 1);
      else
        unsetenv(entry.first.c_str());
    }
  }
  void set(const char *name, const char *value) {
    if (!saved_.count(name)) {
      const char *old = std::getenv(name);
      saved_[name] = {old != nullptr, old ? old : ""};
    }
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  /// A clean launch environment: none of the variables set.
  void clear() {
    for (const char *name :
         {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MEMOPT_NCCL_ID_FILE",
          "MEMOPT_NCCL_ID_TIMEOUT", "MEMOPT_NCCL_LIBRARY", "MASTER_ADDR",
          "MASTER_PORT", "MEMOPT_RDZV_PORT", "MEMOPT_NCCL_TIMEOUT_S"})
      set(name, nullptr);
  }

private:
  std::map<std::string, std::pair<bool, std::string>> saved_;
};

std::string temporaryPath(const char *stem) {
  std::string path =
      ::testing::TempDir() + stem + "." + std::to_string(getpid()) + "." +
      ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::remove(path.c_str());
  return path;
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

TEST(LaunchEnvironment, NothingSetIsOneRank) {
  Environment env;
  env.clear();
  LaunchEnvironment launch;
  std::string error;
  ASSERT_TRUE(readLaunchEnvironment(launch, error)) << error;
  EXPECT_EQ(launch.rank, 0);
  EXPECT_EQ(launch.worldSize, 1);
  EXPECT_EQ(launch.localRank, 0);
  EXPECT_EQ(launch.idTimeoutSeconds, 300);
  EXPECT_EQ(launch.collectiveTimeoutSeconds, 600);
}

TEST(LaunchEnvironment, CollectiveTimeout) {
  Environment env;
  env.clear();
  LaunchEnvironment launch;
  std::string error;
  env.set("MEMOPT_NCCL_TIMEOUT_S", "2.5");
  ASSERT_TRUE(readLaunchEnvironment(launch, error)) << error;
  EXPECT_EQ(launch.collectiveTimeoutSeconds, 2.5);
  env.set("MEMOPT_NCCL_TIMEOUT_S", "0"); // the watchdog off
  ASSERT_TRUE(readLaunchEnvironment(launch, error)) << error;
  EXPECT_EQ(launch.collectiveTimeoutSeconds, 0);
  for (const char *bad : {"-1", "ten", "5s"}) {
    env.set("MEMOPT_NCCL_TIMEOUT_S", bad);
    EXPECT_FALSE(readLaunchEnvironment(launch, error)) << bad;
    EXPECT_TRUE(contains(error, std::string("MEMOPT_NCCL_TIMEOUT_S='") + bad +
                                    "' is not a number of seconds"))
        << error;
  }
}

TEST(LaunchEnvironment, TorchrunVariables) {
  Environment env;
  env.clear();
  env.set("RANK", "3");
  env.set("WORLD_SIZE", "4");
  env.set("LOCAL_RANK", "1");
  env.set("MEMOPT_NCCL_ID_FILE", "/tmp/id");
  env.set("MEMOPT_NCCL_ID_TIMEOUT", "2.5");
  LaunchEnvironment launch;
  std::string error;
  ASSERT_TRUE(readLaunchEnvironment(launch, error)) << error;
  EXPECT_EQ(launch.rank, 3);
  EXPECT_EQ(launch.worldSize, 4);
  EXPECT_EQ(launch.localRank, 1);
  EXPECT_EQ(launch.idFile, "/tmp/id");
  EXPECT_EQ(launch.idTimeoutSeconds, 2.5);
  // LOCAL_RANK defaults to RANK (one node).
  env.set("LOCAL_RANK", nullptr);
  ASSERT_TRUE(readLaunchEnvironment(launch, error)) << error;
  EXPECT_EQ(launch.localRank, 3);
  // WORLD_SIZE=1 needs no id file.
  env.clear();
  env.set("RANK", "0");
  env.set("WORLD_SIZE", "1");
  ASSERT_TRUE(readLaunchEnvironment(launch, error)) << error;
  EXPECT_EQ(launch.worldSize, 1);
}

TEST(LaunchEnvironment, Errors) {
  struct Case {
    const char *rank, *world, *local, *file, *timeout, *expected;
  } cases[] = {
      {"0", "2", "0", nullptr, nullptr, "needs a rendezvous: MASTER_ADDR"},
      {"2", "2", "0", "/tmp/id", nullptr, "RANK=2 is not below WORLD_SIZE=2"},
      {"0", "two", "0", "/tmp/id", nullptr, "WORLD_SIZE='two'"},
      {"0", "0", "0", "/tmp/id", nullptr, "WORLD_SIZE='0'"},
      {"-1", "2", "0", "/tmp/id", nullptr, "RANK='-1'"},
      {"0", "2", "x", "/tmp/id", nullptr, "LOCAL_RANK='x'"},
      {"1", nullptr, nullptr, "/tmp/id", nullptr, "without WORLD_SIZE"},
      {nullptr, "2", nullptr, "/tmp/id", nullptr, "without RANK"},
      {"0", "2", "0", "/tmp/id", "0", "MEMOPT_NCCL_ID_TIMEOUT='0'"},
  };
  for (const Case &c : cases) {
    Environment env;
    env.clear();
    env.set("RANK", c.rank);
    env.set("WORLD_SIZE", c.world);
    env.set("LOCAL_RANK", c.local);
    env.set("MEMOPT_NCCL_ID_FILE", c.file);
    env.set("MEMOPT_NCCL_ID_TIMEOUT", c.timeout);
    LaunchEnvironment launch;
    std::string error;
    EXPECT_FALSE(readLaunchEnvironment(launch, error)) << c.expected;
    EXPECT_TRUE(contains(error, c.expected)) << error;
  }
}

TEST(LaunchEnvironment, TcpRendezvousVariables) {
  Environment env;
  env.clear();
  env.set("RANK", "1");
  env.set("WORLD_SIZE", "2");
  env.set("MASTER_ADDR", "node0.cluster");
  env.set("MASTER_PORT", "29500");
  LaunchEnvironment launch;
  std::string error;
  ASSERT_TRUE(readLaunchEnvironment(launch, error)) << error;
  EXPECT_EQ(launch.masterAddress, "node0.cluster");
  // torchrun's store holds MASTER_PORT: the rendezvous takes the next one.
  EXPECT_EQ(launch.rendezvousPort, 29501);
  EXPECT_TRUE(launch.idFile.empty());
  env.set("MEMOPT_RDZV_PORT", "31000");
  ASSERT_TRUE(readLaunchEnvironment(launch, error)) << error;
  EXPECT_EQ(launch.rendezvousPort, 31000);
  // MEMOPT_RDZV_PORT alone is enough.
  env.set("MASTER_PORT", nullptr);
  ASSERT_TRUE(readLaunchEnvironment(launch, error)) << error;
  EXPECT_EQ(launch.rendezvousPort, 31000);
  struct Case {
    const char *address, *masterPort, *port, *expected;
  } cases[] = {
      {nullptr, "29500", nullptr, "needs a rendezvous: MASTER_ADDR"},
      {"node0", nullptr, nullptr, "needs a rendezvous: MASTER_ADDR"},
      {"node0", "70000", nullptr, "MASTER_PORT=70000 is not a port"},
      {"node0", "65535", nullptr, "set MEMOPT_RDZV_PORT"},
      {"node0", "29500", "0", "MEMOPT_RDZV_PORT='0'"},
      {"node0", "x", nullptr, "MASTER_PORT='x'"},
  };
  for (const Case &c : cases) {
    env.set("MASTER_ADDR", c.address);
    env.set("MASTER_PORT", c.masterPort);
    env.set("MEMOPT_RDZV_PORT", c.port);
    EXPECT_FALSE(readLaunchEnvironment(launch, error)) << c.expected;
    EXPECT_TRUE(contains(error, c.expected)) << error;
  }
}

TEST(UniqueIdFile, PublishThenRead) {
  std::string path = temporaryPath("nccl-id");
  unsigned char id[128], got[128] = {};
  for (int i = 0; i < 128; ++i)
    id[i] = (unsigned char)(i * 7 + 1);
  std::string error;
  ASSERT_TRUE(publishUniqueId(path, 4, id, sizeof id, error)) << error;
  ASSERT_TRUE(waitForUniqueId(path, 4, 1.0, got, sizeof got, error)) << error;
  EXPECT_EQ(std::memcmp(id, got, sizeof id), 0);
  // No temporary file is left next to it.
  EXPECT_NE(access((path + ".tmp." + std::to_string(getpid())).c_str(), F_OK),
            0);
  // A file left by an earlier launch is refused by rank 0...
  EXPECT_FALSE(publishUniqueId(path, 4, id, sizeof id, error));
  EXPECT_TRUE(contains(error, "exists already")) << error;
  // ... and by a rank of another world size.
  EXPECT_FALSE(waitForUniqueId(path, 2, 1.0, got, sizeof got, error));
  EXPECT_TRUE(contains(error, "written for 4 ranks")) << error;
  std::remove(path.c_str());
}

TEST(UniqueIdFile, ReaderStartsFirst) {
  std::string path = temporaryPath("nccl-id");
  unsigned char id[128], got[128] = {};
  std::memset(id, 0x33, sizeof id);
  std::string readError;
  bool read = false;
  std::thread reader([&] {
    read = waitForUniqueId(path, 2, 10.0, got, sizeof got, readError);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::string error;
  ASSERT_TRUE(publishUniqueId(path, 2, id, sizeof id, error)) << error;
  reader.join();
  ASSERT_TRUE(read) << readError;
  EXPECT_EQ(std::memcmp(id, got, sizeof id), 0);
  std::remove(path.c_str());
}

TEST(UniqueIdFile, TimeoutAndForeignFile) {
  std::string path = temporaryPath("nccl-id");
  unsigned char got[128];
  std::string error;
  EXPECT_FALSE(waitForUniqueId(path, 2, 0.05, got, sizeof got, error));
  EXPECT_TRUE(contains(error, "did not write the NCCL id file")) << error;
  EXPECT_TRUE(contains(error, "0.05 s")) << error;
  FILE *file = std::fopen(path.c_str(), "wb");
  ASSERT_TRUE(file);
  std::fputs("not an id", file);
  std::fclose(file);
  EXPECT_FALSE(waitForUniqueId(path, 2, 1.0, got, sizeof got, error));
  EXPECT_TRUE(contains(error, "is not one memopt wrote")) << error;
  std::remove(path.c_str());
}

TEST(NcclLibrary, MissingLibraryIsOneMessage) {
  Environment env;
  env.clear();
  env.set("MEMOPT_NCCL_LIBRARY", "/nonexistent/libnccl.so.2");
  int released = 0;
  std::string error;
  auto comm = createNcclCommunicator(
      LaunchEnvironment(), nullptr, [&] { ++released; }, error);
  EXPECT_FALSE(comm);
  EXPECT_EQ(released, 1);
  EXPECT_TRUE(contains(error, "cannot load NCCL: dlopen(\"/nonexistent/"
                              "libnccl.so.2\") failed"))
      << error;
}

TEST(NcclLibrary, NotNccl) {
  Environment env;
  env.clear();
  env.set("MEMOPT_NCCL_LIBRARY", "libm.so.6");
  std::string error;
  auto comm = createNcclCommunicator(LaunchEnvironment(), nullptr, {}, error);
  EXPECT_FALSE(comm);
  EXPECT_TRUE(contains(error, "'libm.so.6' is not an NCCL library: it lacks "
                              "ncclGetVersion, ncclGetUniqueId"))
      << error;
}

struct FakeCall {
  char name[32];
  const void *send;
  void *recv;
  size_t count;
  int datatype, op, root;
  void *comm, *stream;
};

TEST(NcclCommunicator, CallsThroughTheLibrary) {
  Environment env;
  env.clear();
  env.set("MEMOPT_NCCL_LIBRARY", MEMOPT_FAKE_NCCL);
  void *fake = dlopen(MEMOPT_FAKE_NCCL, RTLD_NOW | RTLD_LOCAL);
  ASSERT_TRUE(fake) << dlerror();
  auto lastCall =
      reinterpret_cast<const FakeCall *(*)()>(dlsym(fake, "fakeNcclLastCall"));
  auto liveComms =
      reinterpret_cast<int (*)()>(dlsym(fake, "fakeNcclLiveComms"));
  ASSERT_TRUE(lastCall && liveComms);

  float scratch = 0;
  int released = 0;
  std::string error;
  auto comm = createNcclCommunicator(
      LaunchEnvironment(), &scratch, [&] { ++released; }, error);
  ASSERT_TRUE(comm) << error;
  EXPECT_EQ(liveComms(), 1);
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  void *stream = reinterpret_cast<void *>(0x1234);

  float a[5] = {1, 2, 3, 4, 5}, b[5] = {};
  ASSERT_TRUE(comm->allReduce(a, b, 5, CollectiveReduction::Average, stream))
      << comm->error();
  const FakeCall *call = lastCall();
  EXPECT_STREQ(call->name, "ncclAllReduce");
  EXPECT_EQ(call->send, a);
  EXPECT_EQ(call->recv, b);
  EXPECT_EQ(call->count, 5u);
  EXPECT_EQ(call->datatype, 7); // ncclFloat32
  EXPECT_EQ(call->op, 4);       // ncclAvg
  EXPECT_EQ(call->stream, stream);
  EXPECT_EQ(b[4], 5.0f);

  ASSERT_TRUE(comm->reduceScatter(a, a, 3, CollectiveReduction::Sum, stream));
  EXPECT_STREQ(call->name, "ncclReduceScatter");
  EXPECT_EQ(call->op, 0); // ncclSum
  EXPECT_EQ(call->count, 3u);
  EXPECT_EQ(call->send, call->recv); // in place

  // Gradients reduced in their low type, the overflow flag with max.
  uint16_t h[4] = {1, 2, 3, 4};
  ASSERT_TRUE(
      comm->allReduce(h, h, 4, DType::F16, CollectiveReduction::Max, stream))
      << comm->error();
  EXPECT_EQ(call->datatype, 6); // ncclFloat16
  EXPECT_EQ(call->op, 2);       // ncclMax
  ASSERT_TRUE(comm->reduceScatter(h, h + 2, 2, DType::BF16,
                                  CollectiveReduction::Average, stream))
      << comm->error();
  EXPECT_STREQ(call->name, "ncclReduceScatter");
  EXPECT_EQ(call->datatype, 9); // ncclBfloat16
  EXPECT_EQ(call->op, 4);
  EXPECT_FALSE(
      comm->allReduce(h, h, 4, DType::I32, CollectiveReduction::Sum, stream));
  EXPECT_TRUE(contains(comm->error(), "collectives reduce f32, f16 or bf16"))
      << comm->error();

  ASSERT_TRUE(comm->allGather(b + 1, b, 2, stream));
  EXPECT_STREQ(call->name, "ncclAllGather");
  EXPECT_EQ(call->count, 2u);
  EXPECT_EQ(call->datatype, 7);

  ASSERT_TRUE(comm->broadcast(a, b, 4, 0, stream));
  EXPECT_STREQ(call->name, "ncclBroadcast");
  EXPECT_EQ(call->root, 0);
  EXPECT_FALSE(comm->broadcast(a, b, 4, 1, stream));
  EXPECT_TRUE(contains(comm->error(), "broadcast from rank 1"))
      << comm->error();

  ASSERT_TRUE(comm->barrier(stream));
  EXPECT_STREQ(call->name, "ncclAllReduce");
  EXPECT_EQ(call->send, &scratch);
  EXPECT_EQ(call->count, 1u);

  // A bucket's calls in one NCCL group (memopt-bucket-collectives).
  ASSERT_TRUE(comm->groupStart()) << comm->error();
  EXPECT_STREQ(call->name, "ncclGroupStart");
  ASSERT_TRUE(comm->allReduce(a, a, 2, CollectiveReduction::Average, stream));
  EXPECT_STREQ(call->name, "ncclAllReduce");
  ASSERT_TRUE(comm->groupEnd()) << comm->error();
  EXPECT_STREQ(call->name, "ncclGroupEnd");

  // Zero elements: no call at all (NCCL would accept it, but nothing to do).
  ASSERT_TRUE(comm->allReduce(a, b, 0, CollectiveReduction::Sum, stream));
  EXPECT_STREQ(call->name, "ncclGroupEnd");

  comm->abort("a kernel failed");
  EXPECT_STREQ(call->name, "ncclCommAbort");
  EXPECT_EQ(liveComms(), 0);
  EXPECT_FALSE(comm->allReduce(a, b, 5, CollectiveReduction::Sum, stream));
  EXPECT_EQ(comm->error(), "rank 0: a kernel failed");
  comm.reset();
  EXPECT_EQ(released, 1);
  EXPECT_EQ(liveComms(), 0); // an aborted communicator is not destroyed again
}

TEST(NcclCommunicator, DestroyedWithoutAbort) {
  Environment env;
  env.clear();
  env.set("MEMOPT_NCCL_LIBRARY", MEMOPT_FAKE_NCCL);
  void *fake = dlopen(MEMOPT_FAKE_NCCL, RTLD_NOW | RTLD_LOCAL);
  ASSERT_TRUE(fake) << dlerror();
  auto liveComms =
      reinterpret_cast<int (*)()>(dlsym(fake, "fakeNcclLiveComms"));
  std::string error;
  int before = liveComms();
  {
    auto comm = createNcclCommunicator(LaunchEnvironment(), nullptr, {}, error);
    ASSERT_TRUE(comm) << error;
    EXPECT_EQ(liveComms(), before + 1);
    EXPECT_FALSE(comm->barrier(nullptr)); // no device scratch
    EXPECT_TRUE(contains(comm->error(), "no device scratch"));
  }
  EXPECT_EQ(liveComms(), before);
}

TEST(NcclCommunicator, InitFailureNamesTheRank) {
  // Two ranks against the one-rank stand-in: rank 0 publishes the id, then
  // ncclCommInitRank fails; the message names the rank and NCCL's error,
  // and the id file is removed.
  Environment env;
  env.clear();
  env.set("MEMOPT_NCCL_LIBRARY", MEMOPT_FAKE_NCCL);
  LaunchEnvironment launch;
  launch.worldSize = 2;
  launch.idFile = temporaryPath("nccl-id");
  std::string error;
  auto comm = createNcclCommunicator(launch, nullptr, {}, error);
  EXPECT_FALSE(comm);
  EXPECT_TRUE(contains(error, "rank 0: ncclCommInitRank: invalid usage"))
      << error;
  EXPECT_NE(access(launch.idFile.c_str(), F_OK), 0);
}

/// The stand-in's controls of the watchdog's tests (FakeNccl.cpp).
struct FakeControls {
  const FakeCall *(*lastCall)() = nullptr;
  void (*setAsyncError)(int) = nullptr;
  int (*waitForAbort)(double) = nullptr;
};

FakeControls fakeControls() {
  void *fake = dlopen(MEMOPT_FAKE_NCCL, RTLD_NOW | RTLD_LOCAL);
  FakeControls controls;
  if (!fake)
    return controls;
  controls.lastCall =
      reinterpret_cast<const FakeCall *(*)()>(dlsym(fake, "fakeNcclLastCall"));
  controls.setAsyncError =
      reinterpret_cast<void (*)(int)>(dlsym(fake, "fakeNcclSetAsyncError"));
  controls.waitForAbort =
      reinterpret_cast<int (*)(double)>(dlsym(fake, "fakeNcclWaitForAbort"));
  return controls;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

TEST(NcclWatchdog, WaitThatCompletesIsNotDisturbed) {
  Environment env;
  env.clear();
  env.set("MEMOPT_NCCL_LIBRARY", MEMOPT_FAKE_NCCL);
  FakeControls fake = fakeControls();
  ASSERT_TRUE(fake.lastCall && fake.setAsyncError && fake.waitForAbort);
  fake.setAsyncError(0);
  LaunchEnvironment launch;
  launch.collectiveTimeoutSeconds = 1.0;
  std::string error;
  auto comm = createNcclCommunicator(launch, nullptr, {}, error);
  ASSERT_TRUE(comm) << error;
  float a[3] = {1, 2, 3};
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(comm->allReduce(a, a, 3, CollectiveReduction::Sum, nullptr));
    bool waited = false;
    EXPECT_TRUE(comm->watchWait([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      waited = true;
    })) << comm->error();
    EXPECT_TRUE(waited);
  }
  // Between waits (host work, however long) nothing is watched.
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  EXPECT_TRUE(comm->allReduce(a, a, 3, CollectiveReduction::Sum, nullptr))
      << comm->error();
  EXPECT_STREQ(fake.lastCall()->name, "ncclAllReduce");
}

TEST(NcclWatchdog, StuckWaitIsAbortedAfterTheTimeout) {
  // A peer that died: the stream never drains until ncclCommAbort releases
  // it. The watchdog aborts after the timeout and the wait returns with a
  // message naming the timeout and the last collective.
  Environment env;
  env.clear();
  env.set("MEMOPT_NCCL_LIBRARY", MEMOPT_FAKE_NCCL);
  FakeControls fake = fakeControls();
  ASSERT_TRUE(fake.lastCall && fake.setAsyncError && fake.waitForAbort);
  fake.setAsyncError(0);
  LaunchEnvironment launch;
  launch.collectiveTimeoutSeconds = 0.3;
  std::string error;
  auto comm = createNcclCommunicator(launch, nullptr, {}, error);
  ASSERT_TRUE(comm) << error;
  float a[5] = {};
  ASSERT_TRUE(comm->allReduce(a, a, 5, CollectiveReduction::Average, nullptr));
  ASSERT_TRUE(comm->allGather(a, a, 5, nullptr));
  comm->label("fc1.weight_grad"); // the program's node (Cuda/Collectives.cpp)
  ASSERT_TRUE(comm->reduceScatter(a, a, 4, CollectiveReduction::Sum, nullptr));
  int released = 0;
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(comm->watchWait([&] { released = fake.waitForAbort(30); }));
  double waited = secondsSince(start);
  EXPECT_EQ(released, 1); // ncclCommAbort released the stuck wait
  EXPECT_GE(waited, 0.3);
  EXPECT_LT(waited, 10.0);
  EXPECT_STREQ(fake.lastCall()->name, "ncclCommAbort");
  const std::string &message = comm->error();
  EXPECT_TRUE(contains(message, "collective watchdog: the work queued behind "
                                "the collectives did not complete within 0.3 s "
                                "(MEMOPT_NCCL_TIMEOUT_S): a peer rank died"))
      << message;
  EXPECT_TRUE(contains(message, "the last collective this rank issued was #3, "
                                "ncclReduceScatter of 4 f32 elements (sum) for "
                                "node 'fc1.weight_grad'; the communicator"))
      << message;
  EXPECT_TRUE(contains(message, "the communicator is aborted (ncclCommAbort)"))
      << message;
  // Every later call fails with the reason, naming the rank.
  EXPECT_FALSE(comm->allReduce(a, a, 5, CollectiveReduction::Sum, nullptr));
  EXPECT_TRUE(contains(comm->error(), "rank 0: collective watchdog: "))
      << comm->error();
  EXPECT_FALSE(comm->watchWait([] {}));
}

TEST(NcclWatchdog, AsyncErrorAbortsBeforeTheTimeout) {
  // NCCL noticed the peer's death itself (ncclRemoteError): the watchdog
  // aborts at its next poll, long before the 60 s timeout.
  Environment env;
  env.clear();
  env.set("MEMOPT_NCCL_LIBRARY", MEMOPT_FAKE_NCCL);
  FakeControls fake = fakeControls();
  ASSERT_TRUE(fake.lastCall && fake.setAsyncError && fake.waitForAbort);
  fake.setAsyncError(0);
  LaunchEnvironment launch;
  launch.collectiveTimeoutSeconds = 60;
  std::string error;
  auto comm = createNcclCommunicator(launch, nullptr, {}, error);
  ASSERT_TRUE(comm) << error;
  uint16_t h[2] = {};
  // A label names the next call only: the last one here has none.
  comm->label("loss_scale_flag");
  ASSERT_TRUE(
      comm->allReduce(h, h, 2, DType::BF16, CollectiveReduction::Sum, nullptr));
  ASSERT_TRUE(
      comm->allReduce(h, h, 2, DType::BF16, CollectiveReduction::Max, nullptr));
  int released = 0;
  auto start = std::chrono::steady_clock::now();
  std::thread peerDies([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    fake.setAsyncError(6); // ncclRemoteError
  });
  EXPECT_FALSE(comm->watchWait([&] { released = fake.waitForAbort(30); }));
  peerDies.join();
  fake.setAsyncError(0);
  EXPECT_EQ(released, 1);
  EXPECT_LT(secondsSince(start), 10.0);
  EXPECT_TRUE(contains(comm->error(),
                       "collective watchdog: NCCL reported an asynchronous "
                       "error (ncclCommGetAsyncError): remote process exited "
                       "or there was a network error (fake); the last "
                       "collective this rank issued was #2, ncclAllReduce of "
                       "2 bf16 elements (max); the communicator"))
      << comm->error();
}

TEST(NcclWatchdog, TimeoutZeroTurnsItOff) {
  Environment env;
  env.clear();
  env.set("MEMOPT_NCCL_LIBRARY", MEMOPT_FAKE_NCCL);
  FakeControls fake = fakeControls();
  ASSERT_TRUE(fake.waitForAbort);
  LaunchEnvironment launch;
  launch.collectiveTimeoutSeconds = 0;
  std::string error;
  auto comm = createNcclCommunicator(launch, nullptr, {}, error);
  ASSERT_TRUE(comm) << error;
  int released = -1;
  EXPECT_TRUE(comm->watchWait([&] { released = fake.waitForAbort(0.3); }));
  EXPECT_EQ(released, 0); // waited the whole 0.3 s, nothing aborted
}

} // namespace
