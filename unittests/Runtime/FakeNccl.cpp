//===- FakeNccl.cpp - a stand-in libnccl for the communicator's tests -----===//
//
// Loaded by NcclCommunicatorTest through MEMOPT_NCCL_LIBRARY, in place of
// NCCL (which this machine does not have): the entry points the NCCL
// communicator resolves, with NCCL's C signatures, over host memory and one
// rank. Every call records its arguments (fakeNcclLastCall) so the test
// checks what the communicator passes: the data type (ncclFloat32 = 7,
// ncclFloat16 = 6, ncclBfloat16 = 9), the reduction (ncclSum = 0, ncclMax =
// 2, ncclAvg = 4), counts, pointers, the stream. A
// reduction over one rank is a copy, which is what NCCL computes for one
// rank too. ncclCommInitRank fails for a world size other than 1 (no
// transport here) with ncclInvalidUsage = 5.
//
// The collective watchdog's tests drive two more things: the asynchronous
// error ncclCommGetAsyncError reports (fakeNcclSetAsyncError, e.g.
// ncclRemoteError = 6, what NCCL reports when a peer process dies), and a
// wait that completes only when the communicator is aborted
// (fakeNcclWaitForAbort), as a stream stuck behind a collective whose peer
// is gone is released by ncclCommAbort.
//
//===----------------------------------------------------------------------===//

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <string>

extern "C" {

struct FakeUniqueId {
  char internal[128];
};

struct FakeCall {
  char name[32];
  const void *send;
  void *recv;
  size_t count;
  int datatype, op, root;
  void *comm, *stream;
};

static FakeCall lastCall;
static int comms = 0;
static int asyncError = 0;
static std::mutex abortMutex;
static std::condition_variable abortSignal;
static int aborts = 0;

__attribute__((visibility("default"))) void fakeNcclSetAsyncError(int result) {
  std::lock_guard<std::mutex> lock(abortMutex);
  asyncError = result;
}
/// Blocks until ncclCommAbort is called or `seconds` pass; returns 1 when an
/// abort released it.
__attribute__((visibility("default"))) int
fakeNcclWaitForAbort(double seconds) {
  std::unique_lock<std::mutex> lock(abortMutex);
  int before = aborts;
  return abortSignal.wait_for(lock, std::chrono::duration<double>(seconds),
                              [&] { return aborts != before; })
             ? 1
             : 0;
}

__attribute__((visibility("default"))) const FakeCall *fakeNcclLastCall() {
  return &lastCall;
}
__attribute__((visibility("default"))) int fakeNcclLiveComms() { return comms; }

static void record(const char *name, const void *send, void *recv, size_t count,
                   int datatype, int op, int root, void *comm, void *stream) {
  std::memset(&lastCall, 0, sizeof lastCall);
  std::strncpy(lastCall.name, name, sizeof lastCall.name - 1);
  lastCall.send = send;
  lastCall.recv = recv;
  lastCall.count = count;
  lastCall.datatype = datatype;
  lastCall.op = op;
  lastCall.root = root;
  lastCall.comm = comm;
  lastCall.stream = stream;
}

static int fakeComm; // the one communicator's handle

__attribute__((visibility("default"))) int ncclGetVersion(int *version) {
  *version = 21903; // 2.19.3
  return 0;
}
__attribute__((visibility("default"))) int ncclGetUniqueId(FakeUniqueId *id) {
  std::memset(id->internal, 0x5a, sizeof id->internal);
  return 0;
}
__attribute__((visibility("default"))) int
ncclCommInitRank(void **comm, int ranks, FakeUniqueId id, int rank) {
  if (ranks != 1 || rank != 0 || id.internal[0] != 0x5a ||
      id.internal[127] != 0x5a)
    return 5;
  *comm = &fakeComm;
  ++comms;
  return 0;
}
__attribute__((visibility("default"))) int ncclCommDestroy(void *comm) {
  if (comm != &fakeComm)
    return 4;
  --comms;
  return 0;
}
__attribute__((visibility("default"))) int ncclCommAbort(void *comm) {
  record("ncclCommAbort", nullptr, nullptr, 0, -1, -1, -1, comm, nullptr);
  --comms;
  {
    std::lock_guard<std::mutex> lock(abortMutex);
    ++aborts;
  }
  abortSignal.notify_all();
  return 0;
}
__attribute__((visibility("default"))) int ncclCommGetAsyncError(void *comm,
                                                                 int *result) {
  if (comm != &fakeComm)
    return 4;
  std::lock_guard<std::mutex> lock(abortMutex);
  *result = asyncError;
  return 0;
}
__attribute__((visibility("default"))) const char *
ncclGetErrorString(int result) {
  return result == 5   ? "invalid usage (fake)"
         : result == 6 ? "remote process exited or there was a network error "
                         "(fake)"
                       : "fake error";
}
__attribute__((visibility("default"))) int
ncclAllReduce(const void *send, void *recv, size_t count, int datatype, int op,
              void *comm, void *stream) {
  record("ncclAllReduce", send, recv, count, datatype, op, -1, comm, stream);
  // ncclFloat32 = 7; ncclFloat16 = 6 and ncclBfloat16 = 9 take 2 bytes.
  size_t bytes = datatype == 7 ? 4 : datatype == 6 || datatype == 9 ? 2 : 0;
  if (!bytes)
    return 4;
  std::memmove(recv, send, count * bytes);
  return 0;
}
__attribute__((visibility("default"))) int
ncclReduceScatter(const void *send, void *recv, size_t count, int datatype,
                  int op, void *comm, void *stream) {
  record("ncclReduceScatter", send, recv, count, datatype, op, -1, comm,
         stream);
  std::memmove(recv, send, count * (datatype == 7 ? 4 : 2));
  return 0;
}
__attribute__((visibility("default"))) int
ncclAllGather(const void *send, void *recv, size_t count, int datatype,
              void *comm, void *stream) {
  record("ncclAllGather", send, recv, count, datatype, -1, -1, comm, stream);
  std::memmove(recv, send, count * 4);
  return 0;
}
__attribute__((visibility("default"))) int
ncclBroadcast(const void *send, void *recv, size_t count, int datatype,
              int root, void *comm, void *stream) {
  record("ncclBroadcast", send, recv, count, datatype, -1, root, comm, stream);
  std::memmove(recv, send, count * 4);
  return 0;
}

__attribute__((visibility("default"))) int ncclGroupStart() {
  record("ncclGroupStart", nullptr, nullptr, 0, -1, -1, -1, nullptr, nullptr);
  return 0;
}
__attribute__((visibility("default"))) int ncclGroupEnd() {
  record("ncclGroupEnd", nullptr, nullptr, 0, -1, -1, -1, nullptr, nullptr);
  return 0;
}

} // extern "C"
