//===- Communicator.h - collectives between data-parallel ranks --*- C++
//-*-===//
//
// The transport of data-parallel training (docs/data-parallel.md): N ranks
// run the same planned step on their slices of the batch and meet in
// collectives over f32 buffers (gradients reduced in their low type: f16 /
// bf16). A generated program never calls this
// interface directly: its collective ops (Runtime.h, "Collectives") take the
// communicator from the context (ContextOptions::communicator).
//
// The calls are NCCL's (ncclAllReduce, ncclReduceScatter, ncclAllGather,
// ncclBroadcast): the same argument order, counts in elements, in-place
// rules and a `stream` argument (a cudaStream_t for a CUDA communicator,
// ignored on the host), so an NCCL implementation is a thin wrapper, one
// ncclComm_t per rank. What we took from PyTorch's ProcessGroup (c10d): one
// object per rank with rank() / size() and the collectives as methods, and
// an abort that unblocks every rank when one of them fails (ncclCommAbort),
// so a failing rank never leaves the others hanging in a collective; and
// ProcessGroupNCCL's watchdog with its timeout (watchWait,
// MEMOPT_NCCL_TIMEOUT_S), so a rank that dies without failing does not
// either.
//
// Implementations: the in-process one (createInProcessCommunicators), N
// ranks as N threads of one process over host memory, for the host backend
// and CI. Its reductions add the ranks' values in rank order (0, 1, ..., N -
// 1) in double precision for every element, whichever thread computes it,
// so results are identical on every rank and from run to run (NCCL's ring
// order depends on the topology and is reproducible only for a fixed one).
// And NCCL (createNcclCommunicator, lib/Runtime/NcclCommunicator.cpp): one
// process per GPU, launched torchrun-style (LaunchEnvironment), NCCL loaded
// at run time with dlopen, so nothing is needed to build it.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_COMMUNICATOR_H
#define MEMOPT_RUNTIME_COMMUNICATOR_H

#include "memopt/Runtime/Runtime.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace memopt::rt {

// CollectiveReduction (ncclSum, ncclAvg, ncclMax) is in Runtime.h.

/// One rank's end of a group of `size()` ranks. Every rank must issue the
/// same collectives in the same order with the same counts (as NCCL
/// requires); the in-process implementation checks this and fails every rank
/// with a message naming both calls when they differ. A failed call returns
/// false and error() says why; after abort() every call fails at once.
class Communicator {
public:
  virtual ~Communicator();
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// recv[i] = reduction over ranks of send[i], `count` elements of
  /// `dtype` (F32, F16 or BF16: ncclFloat32 / ncclFloat16 / ncclBfloat16);
  /// recv may be send (in place).
  virtual bool allReduce(const void *send, void *recv, size_t count,
                         DType dtype, CollectiveReduction reduction,
                         void *stream) = 0;
  /// Rank r's recv[i] = reduction over ranks of send[r * recvCount + i];
  /// send holds size() * recvCount elements of `dtype` (as allReduce). In
  /// place when recv is send + rank() * recvCount.
  virtual bool reduceScatter(const void *send, void *recv, size_t recvCount,
                             DType dtype, CollectiveReduction reduction,
                             void *stream) = 0;
  /// The same over f32 buffers.
  bool allReduce(const float *send, float *recv, size_t count,
                 CollectiveReduction reduction, void *stream) {
    return allReduce(send, recv, count, DType::F32, reduction, stream);
  }
  bool reduceScatter(const float *send, float *recv, size_t recvCount,
                     CollectiveReduction reduction, void *stream) {
    return reduceScatter(send, recv, recvCount, DType::F32, reduction, stream);
  }
  /// recv[k * sendCount + i] = rank k's send[i]; recv holds size() *
  /// sendCount elements of `dtype` (F32, F16 or BF16: ZeRO-3 gathers a
  /// parameter's low-precision copy). In place when send is recv + rank() *
  /// sendCount.
  virtual bool allGather(const void *send, void *recv, size_t sendCount,
                         DType dtype, void *stream) = 0;
  bool allGather(const float *send, float *recv, size_t sendCount,
                 void *stream) {
    return allGather(send, recv, sendCount, DType::F32, stream);
  }
  /// recv[i] = rank root's send[i] (send is read on the root only); recv
  /// may be send.
  virtual bool broadcast(const float *send, float *recv, size_t count, int root,
                         void *stream) = 0;
  /// Returns when every rank has called barrier.
  virtual bool barrier(void *stream) = 0;
  /// The collectives between groupStart and groupEnd are issued together
  /// (ncclGroupStart / ncclGroupEnd: one launch for a bucket of small
  /// tensors, memopt-bucket-collectives). Every rank groups the same calls.
  /// Implementations that complete each call at once need nothing: the
  /// defaults do nothing.
  virtual bool groupStart() { return true; }
  virtual bool groupEnd() { return true; }

  /// Fails the collectives every rank is blocked in, and all later ones,
  /// with "rank R: reason" (the first abort's reason wins).
  virtual void abort(const std::string &reason) = 0;
  /// Runs `wait`, a blocking wait for the work this rank queued (the CUDA
  /// backend's cudaStreamSynchronize), under the communicator's watchdog
  /// (PyTorch's ProcessGroupNCCL watchdog): when the wait outlasts the
  /// collective timeout, or the transport reports an asynchronous error
  /// meanwhile (ncclCommGetAsyncError: a peer died, the network failed),
  /// the watchdog aborts the communicator (ncclCommAbort, which releases
  /// the collectives the wait is stuck behind) and this returns false with
  /// error() saying why and naming the last collective issued. The
  /// default, for a transport whose calls complete before they return (the
  /// in-process one, which times out inside its calls), just waits.
  virtual bool watchWait(const std::function<void()> &wait) {
    wait();
    return true;
  }
  /// The program's node whose collective the next call issues, for the
  /// watchdog's message (the next call consumes it). Ignored by default.
  virtual void label(const char *node) { (void)node; }
  /// Why the last call failed ("" when none has).
  virtual const std::string &error() const = 0;
};

/// How long a rank waits for the others in one collective before the
/// group is torn down with a message naming the ranks that did not come
/// (PyTorch's default NCCL timeout is 10 minutes too).
constexpr double kDefaultCollectiveTimeoutSeconds = 600;

/// The collective timeout: MEMOPT_NCCL_TIMEOUT_S (seconds; 0 turns the
/// watchdog off), else kDefaultCollectiveTimeoutSeconds. False with a
/// message for a value that is not a number >= 0.
bool collectiveTimeoutFromEnvironment(double &seconds, std::string &error);

/// `ranks` communicators of one in-process group, rank i at index i, each
/// to be used by one thread. The group lives until the last one is
/// destroyed. Returns an empty vector for ranks < 1. A rank that waits in
/// a collective longer than `timeoutSeconds` (0: forever) for the others
/// aborts the group with "collective timeout: rank R waited T s in CALL
/// for ranks ... of N": a rank that died or hangs never hangs the others.
std::vector<std::unique_ptr<Communicator>> createInProcessCommunicators(
    int ranks, double timeoutSeconds = kDefaultCollectiveTimeoutSeconds);

/// Fault injection for the in-process group (tests of the timeout path):
/// one rank that comes late to every collective.
struct LateRank {
  int rank = -1;        ///< -1: none.
  double seconds = 0.0; ///< How long it sleeps before posting each call.
};

/// MEMOPT_FAULT_LATE_RANK=R:SECONDS (unset: no late rank). False with a
/// message for a value that is not "rank:seconds" with rank in [0, ranks)
/// and seconds >= 0.
bool lateRankFromEnvironment(int ranks, LateRank &late, std::string &error);

/// The same group with `late` injected.
std::vector<std::unique_ptr<Communicator>>
createInProcessCommunicators(int ranks, double timeoutSeconds, LateRank late);

//===----------------------------------------------------------------------===//
// One process per rank (the CUDA backend, over NCCL)
//===----------------------------------------------------------------------===//

/// How this process was launched, torchrun-style: RANK, WORLD_SIZE and
/// LOCAL_RANK (the CUDA device) from the environment, and how rank 0 hands
/// NCCL's unique id to the others: through a file every rank can read
/// (MEMOPT_NCCL_ID_FILE, one host or a shared file system) or else over TCP
/// (Rendezvous.h): rank 0 listens on port MEMOPT_RDZV_PORT (MASTER_PORT + 1
/// when unset: torchrun's own store holds MASTER_PORT) and the others
/// connect to MASTER_ADDR. Either waits MEMOPT_NCCL_ID_TIMEOUT seconds (300
/// by default).
struct LaunchEnvironment {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  std::string idFile;
  /// The TCP rendezvous (used when idFile is empty and worldSize > 1).
  std::string masterAddress;
  int rendezvousPort = 0;
  double idTimeoutSeconds = 300;
  /// MEMOPT_NCCL_TIMEOUT_S: the collective watchdog's timeout
  /// (Communicator::watchWait; 0: no watchdog).
  double collectiveTimeoutSeconds = kDefaultCollectiveTimeoutSeconds;
};

/// Reads the launch environment. None of the variables set: one rank
/// (rank 0 of 1 on device 0). LOCAL_RANK defaults to RANK (one node).
/// Returns false with a message naming the variable when a value is not a
/// number, RANK is outside [0, WORLD_SIZE), a port is outside [1, 65535], or
/// WORLD_SIZE > 1 comes with neither MEMOPT_NCCL_ID_FILE nor MASTER_ADDR and
/// a port (MEMOPT_RDZV_PORT or MASTER_PORT).
bool readLaunchEnvironment(LaunchEnvironment &env, std::string &error);

/// The id-file exchange: rank 0 writes `bytes` bytes of `id` (with a
/// header naming the world size) to `path` through a temporary file
/// renamed into place, refusing a file left from an earlier launch; the
/// others poll for it every 10 ms for at most `timeoutSeconds` and check
/// the header's world size against theirs.
bool publishUniqueId(const std::string &path, int worldSize, const void *id,
                     size_t bytes, std::string &error);
bool waitForUniqueId(const std::string &path, int worldSize,
                     double timeoutSeconds, void *id, size_t bytes,
                     std::string &error);

/// Hands `bytes` bytes of `id` from rank 0 to every rank of `env`: through
/// env.idFile when set, else over TCP (env.masterAddress,
/// env.rendezvousPort); nothing to do for one rank. Rank 0 passes its id in
/// `id`, the others receive it there. Errors start with the rank.
bool exchangeUniqueId(const LaunchEnvironment &env, void *id, size_t bytes,
                      std::string &error);

/// This process's rank of an NCCL communicator: loads libnccl.so.2 (the
/// MEMOPT_NCCL_LIBRARY path, else the dynamic linker's search, e.g.
/// LD_LIBRARY_PATH), exchanges the unique id (exchangeUniqueId) and calls
/// ncclCommInitRank on the current CUDA device. `deviceScratch` is one f32
/// of device memory for barrier(); `release` (may be empty) runs when the
/// communicator is destroyed. nullptr with `error` when NCCL cannot be
/// loaded or initialized.
std::unique_ptr<Communicator>
createNcclCommunicator(const LaunchEnvironment &env, float *deviceScratch,
                       std::function<void()> release, std::string &error);

/// The backend's communicator for ranks that are processes: the CUDA
/// backend selects device env.localRank and creates an NCCL communicator;
/// the host backend runs ranks as threads and returns nullptr with an
/// error. ranksAreProcesses() says which the backend does.
std::unique_ptr<Communicator>
createProcessCommunicator(const LaunchEnvironment &env, std::string &error);
bool ranksAreProcesses();

//===----------------------------------------------------------------------===//
// Buckets of collectives that overlap compute (memopt-bucket-collectives)
//===----------------------------------------------------------------------===//

/// The collectives a generated program calls between beginCollectives and
/// endCollectives are bucket `bucket`, issued together; waitCollectives
/// orders what follows after the bucket's completion (a program with
/// buckets includes this header). The CUDA backend issues a bucket on the
/// context's communication stream, after an event recorded on the compute
/// stream, in one NCCL group (groupStart / groupEnd), and records the
/// bucket's completion event there; the wait makes the compute stream wait
/// on that event. Collectives outside a bucket run on the communication
/// stream too, the compute stream waiting for each at once: one stream per
/// communicator, as NCCL wants. Without a communicator (a one-rank program
/// run alone) the three do nothing and the collectives are copies on the
/// compute stream. The host backend runs each collective where it is called
/// (its communicator completes every call at once): begin and end are the
/// communicator's group calls, the wait does nothing.
void beginCollectives(Context &ctx, int64_t bucket);
void endCollectives(Context &ctx, int64_t bucket);
void waitCollectives(Context &ctx, const char *nodeName, int64_t bucket);

} // namespace memopt::rt

#endif // MEMOPT_RUNTIME_COMMUNICATOR_H
