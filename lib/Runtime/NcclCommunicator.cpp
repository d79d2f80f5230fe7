//===- NcclCommunicator.cpp - NCCL ranks, one process per GPU -------------===//
//
// The NCCL implementation of Communicator (include/memopt/Runtime/
// Communicator.h) and the torchrun-style launch around it.
//
// NCCL is loaded at run time with dlopen, as CuPy's and JAX's CUDA plugins
// load their libraries: nothing NCCL is needed to build the runtime (this
// machine has no libnccl-dev), and a program that never communicates never
// loads it. The library is MEMOPT_NCCL_LIBRARY when set, else
// "libnccl.so.2" through the dynamic linker's search (LD_LIBRARY_PATH; the
// PyTorch wheel ships it as site-packages/nvidia/nccl/lib/libnccl.so.2).
// The few entry points used are declared here from NCCL's public header
// (github.com/NVIDIA/nccl, src/nccl.h.in; the values below were checked
// against it): ncclResult_t ncclSuccess = 0; ncclUniqueId is
// `struct { char internal[NCCL_UNIQUE_ID_BYTES = 128]; }` passed by value to
// ncclCommInitRank; ncclDataType_t ncclFloat16 = 6, ncclFloat32 = 7,
// ncclBfloat16 = 9; ncclRedOp_t ncclSum = 0, ncclMax = 2, ncclAvg = 4
// (ncclAvg and ncclBfloat16 exist from NCCL 2.10, so older libraries are
// refused); the enums are passed as int, cudaStream_t and ncclComm_t as
// pointers. These are NCCL's stable C ABI (unchanged since 2.x).
//
// The launch is torchrun's: RANK, WORLD_SIZE, LOCAL_RANK in the
// environment, one process per GPU (PyTorch's ProcessGroupNCCL). The unique
// id goes over TCP from rank 0 to the others (MASTER_ADDR, MEMOPT_RDZV_PORT
// or MASTER_PORT + 1; lib/Runtime/Rendezvous.cpp), or through a file when
// MEMOPT_NCCL_ID_FILE is set (torch.distributed's FileStore does the same for
// its rendezvous): rank 0 writes it under a temporary name and renames it
// into place, so a reader never sees half a file; it refuses a file left by
// an earlier launch (a stale id would make the others join a communicator
// that no longer exists) and removes the file once ncclCommInitRank has
// returned, which NCCL returns only when every rank has joined, so every
// rank has read it. As in ProcessGroupNCCL, a failing rank calls
// ncclCommAbort, which releases this process's pending collectives; the
// other processes are stopped by the launcher (torchrun ends the job when one
// rank exits non-zero).
//
// A peer that dies without that (killed, out of memory, a lost node) is
// noticed by the collective watchdog (watchWait), ProcessGroupNCCL's design:
// a thread polls ncclCommGetAsyncError and the time the host has waited
// behind the collectives (MEMOPT_NCCL_TIMEOUT_S, 600 s by default, PyTorch's
// NCCL timeout), and on an error or the timeout aborts the communicator,
// which ends the stuck NCCL kernels, so the host's wait returns and the step
// fails with one message naming the rank and the last collective issued
// (PyTorch's SeqNum / OpType). Unlike PyTorch's, which watches every
// collective's end event all the time and tears the process down itself,
// ours watches only while the host waits (so the abort never races a call
// of the main thread) and hands the error back to the caller, which exits.
//
//===----------------------------------------------------------------------===//

#include "memopt/Runtime/Communicator.h"
#include "memopt/Runtime/Rendezvous.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace memopt::rt {

//===----------------------------------------------------------------------===//
// Launch environment and the id file
//===----------------------------------------------------------------------===//

namespace {

/// Parses environment variable `name` as an integer >= `minimum`. Returns
/// false with `error` when it is set but not such a number; `present` says
/// whether it was set.
bool readInteger(const char *name, long minimum, long &value, bool &present,
                 std::string &error) {
  const char *text = std::getenv(name);
  present = text && *text;
  if (!present)
    return true;
  char *end = nullptr;
  errno = 0;
  long parsed = std::strtol(text, &end, 10);
  if (errno || !end || *end || parsed < minimum || parsed > 1000000) {
    error = std::string(name) + "='" + text + "' is not " +
            (minimum == 0 ? "an integer >= 0" : "an integer >= 1");
    return false;
  }
  value = parsed;
  return true;
}

constexpr char kIdMagic[8] = {'M', 'E', 'M', 'O', 'N', 'C', 'I', 'D'};

} // namespace

bool readLaunchEnvironment(LaunchEnvironment &env, std::string &error) {
  env = LaunchEnvironment();
  long rank = 0, world = 1, local = 0;
  bool hasRank = false, hasWorld = false, hasLocal = false;
  if (!readInteger("RANK", 0, rank, hasRank, error) ||
      !readInteger("WORLD_SIZE", 1, world, hasWorld, error) ||
      !readInteger("LOCAL_RANK", 0, local, hasLocal, error))
    return false;
  if (hasRank && !hasWorld) {
    error = "RANK=" + std::to_string(rank) +
            " is set without WORLD_SIZE (launch with torchrun, or set RANK, "
            "WORLD_SIZE and LOCAL_RANK for every process)";
    return false;
  }
  if (hasWorld && world > 1 && !hasRank) {
    error = "WORLD_SIZE=" + std::to_string(world) +
            " is set without RANK (launch with torchrun, or set RANK, "
            "WORLD_SIZE and LOCAL_RANK for every process)";
    return false;
  }
  if (rank >= world) {
    error = "RANK=" + std::to_string(rank) +
            " is not below WORLD_SIZE=" + std::to_string(world);
    return false;
  }
  env.rank = int(rank);
  env.worldSize = int(world);
  env.localRank = int(hasLocal ? local : rank);
  if (const char *file = std::getenv("MEMOPT_NCCL_ID_FILE"))
    env.idFile = file;
  if (const char *text = std::getenv("MEMOPT_NCCL_ID_TIMEOUT")) {
    char *end = nullptr;
    double seconds = std::strtod(text, &end);
    if (!*text || !end || *end || !(seconds > 0)) {
      error = std::string("MEMOPT_NCCL_ID_TIMEOUT='") + text +
              "' is not a positive number of seconds";
      return false;
    }
    env.idTimeoutSeconds = seconds;
  }
  if (!collectiveTimeoutFromEnvironment(env.collectiveTimeoutSeconds, error))
    return false;
  long masterPort = 0, rendezvousPort = 0;
  bool hasMasterPort = false, hasRendezvousPort = false;
  if (!readInteger("MASTER_PORT", 1, masterPort, hasMasterPort, error) ||
      !readInteger("MEMOPT_RDZV_PORT", 1, rendezvousPort, hasRendezvousPort,
                   error))
    return false;
  if (hasMasterPort && masterPort > 65535) {
    error = "MASTER_PORT=" + std::to_string(masterPort) + " is not a port";
    return false;
  }
  if (hasRendezvousPort && rendezvousPort > 65535) {
    error =
        "MEMOPT_RDZV_PORT=" + std::to_string(rendezvousPort) + " is not a port";
    return false;
  }
  // torchrun's agent store listens on MASTER_PORT; ours takes the next one
  // unless told otherwise.
  if (!hasRendezvousPort && hasMasterPort) {
    rendezvousPort = masterPort + 1;
    if (rendezvousPort > 65535) {
      error =
          "MASTER_PORT=65535 leaves no port for the rendezvous (MASTER_PORT "
          "+ 1): set MEMOPT_RDZV_PORT";
      return false;
    }
  }
  if (const char *address = std::getenv("MASTER_ADDR"))
    env.masterAddress = address;
  env.rendezvousPort = int(rendezvousPort);
  if (env.worldSize > 1 && env.idFile.empty() &&
      (env.masterAddress.empty() || env.rendezvousPort == 0)) {
    error = "WORLD_SIZE=" + std::to_string(env.worldSize) +
            " needs a rendezvous: MASTER_ADDR and MASTER_PORT (torchrun sets "
            "them; rank 0 listens on MEMOPT_RDZV_PORT, default MASTER_PORT + "
            "1), or MEMOPT_NCCL_ID_FILE, a path every rank can read, fresh "
            "for each launch, where rank 0 writes NCCL's unique id";
    return false;
  }
  return true;
}

bool exchangeUniqueId(const LaunchEnvironment &env, void *id, size_t bytes,
                      std::string &error) {
  if (env.worldSize <= 1)
    return true;
  std::string prefix = "rank " + std::to_string(env.rank) + ": ";
  bool ok;
  if (!env.idFile.empty()) {
    ok = env.rank == 0
             ? publishUniqueId(env.idFile, env.worldSize, id, bytes, error)
             : waitForUniqueId(env.idFile, env.worldSize, env.idTimeoutSeconds,
                               id, bytes, error);
  } else if (env.rank == 0) {
    RendezvousServer server;
    ok = server.listen(env.rendezvousPort, error) &&
         server.serve(env.worldSize, id, bytes, env.idTimeoutSeconds, error);
  } else {
    ok = joinRendezvous(env.masterAddress, env.rendezvousPort, env.rank,
                        env.worldSize, env.idTimeoutSeconds, id, bytes, error);
  }
  if (!ok)
    error = prefix + error;
  return ok;
}

bool publishUniqueId(const std::string &path, int worldSize, const void *id,
                     size_t bytes, std::string &error) {
  struct stat info;
  if (stat(path.c_str(), &info) == 0) {
    error = "the NCCL id file '" + path +
            "' exists already (left by an earlier launch?): remove it or "
            "use a fresh MEMOPT_NCCL_ID_FILE for each launch";
    return false;
  }
  std::string temporary = path + ".tmp." + std::to_string(getpid());
  int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    error = "cannot create the NCCL id file '" + temporary +
            "': " + std::strerror(errno);
    return false;
  }
  std::string contents(kIdMagic, sizeof kIdMagic);
  int32_t world = worldSize;
  contents.append(reinterpret_cast<const char *>(&world), sizeof world);
  contents.append(static_cast<const char *>(id), bytes);
  bool ok =
      write(fd, contents.data(), contents.size()) == ssize_t(contents.size());
  ok = fsync(fd) == 0 && ok;
  ok = close(fd) == 0 && ok;
  if (!ok || std::rename(temporary.c_str(), path.c_str()) != 0) {
    error =
        "cannot write the NCCL id file '" + path + "': " + std::strerror(errno);
    std::remove(temporary.c_str());
    return false;
  }
  return true;
}

bool waitForUniqueId(const std::string &path, int worldSize,
                     double timeoutSeconds, void *id, size_t bytes,
                     std::string &error) {
  size_t expected = sizeof kIdMagic + sizeof(int32_t) + bytes;
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    if (FILE *file = std::fopen(path.c_str(), "rb")) {
      std::string contents(expected + 1, '\0');
      size_t got = std::fread(&contents[0], 1, contents.size(), file);
      std::fclose(file);
      int32_t world = 0;
      if (got >= sizeof kIdMagic + sizeof world)
        std::memcpy(&world, contents.data() + sizeof kIdMagic, sizeof world);
      if (got != expected ||
          std::memcmp(contents.data(), kIdMagic, sizeof kIdMagic) != 0) {
        error = "the NCCL id file '" + path + "' is not one memopt wrote (" +
                std::to_string(got) + " bytes)";
        return false;
      }
      if (world != worldSize) {
        error = "the NCCL id file '" + path + "' was written for " +
                std::to_string(world) + " ranks; this rank's WORLD_SIZE is " +
                std::to_string(worldSize) +
                " (a file left by an earlier launch?)";
        return false;
      }
      std::memcpy(id, contents.data() + sizeof kIdMagic + sizeof world, bytes);
      return true;
    }
    double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (waited >= timeoutSeconds) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", timeoutSeconds);
      error = "rank 0 did not write the NCCL id file '" + path + "' within " +
              seconds +
              " s (MEMOPT_NCCL_ID_TIMEOUT): is rank 0 running, with the "
              "same MEMOPT_NCCL_ID_FILE?";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

//===----------------------------------------------------------------------===//
// The NCCL library
//===----------------------------------------------------------------------===//

namespace {

// From nccl.h (see the header comment).
constexpr size_t kUniqueIdBytes = 128;
struct NcclUniqueId {
  char internal[kUniqueIdBytes];
};
using NcclResult = int;
constexpr NcclResult kNcclSuccess = 0;
constexpr int kNcclFloat16 = 6;
constexpr int kNcclFloat32 = 7;
constexpr int kNcclBfloat16 = 9;
constexpr int kNcclSum = 0;
constexpr int kNcclMax = 2;
constexpr int kNcclAvg = 4;
constexpr NcclResult kNcclInProgress = 7; // a non-blocking call under way
constexpr int kMinimumVersion = 21000;    // 2.10.0: ncclAvg

struct NcclLibrary {
  NcclResult (*getVersion)(int *) = nullptr;
  NcclResult (*getUniqueId)(NcclUniqueId *) = nullptr;
  NcclResult (*commInitRank)(void **, int, NcclUniqueId, int) = nullptr;
  NcclResult (*commDestroy)(void *) = nullptr;
  NcclResult (*commAbort)(void *) = nullptr;
  NcclResult (*commGetAsyncError)(void *, NcclResult *) = nullptr;
  const char *(*getErrorString)(NcclResult) = nullptr;
  const char *(*getLastError)(void *) = nullptr; // optional (2.13)
  NcclResult (*allReduce)(const void *, void *, size_t, int, int, void *,
                          void *) = nullptr;
  NcclResult (*reduceScatter)(const void *, void *, size_t, int, int, void *,
                              void *) = nullptr;
  NcclResult (*allGather)(const void *, void *, size_t, int, void *,
                          void *) = nullptr;
  NcclResult (*broadcast)(const void *, void *, size_t, int, int, void *,
                          void *) = nullptr;
  NcclResult (*groupStart)() = nullptr;
  NcclResult (*groupEnd)() = nullptr;
  int version = 0;
  std::string path;
};

template <typename F>
bool resolve(void *handle, const char *name, F &function, std::string &missing,
             bool required = true) {
  function = reinterpret_cast<F>(dlsym(handle, name));
  if (!function && required)
    missing += std::string(missing.empty() ? "" : ", ") + name;
  return function != nullptr;
}

/// Loads NCCL (once per path and process); nullptr with `error` when it
/// cannot.
const NcclLibrary *loadNccl(std::string &error) {
  struct Loaded {
    NcclLibrary library;
    std::string error;
  };
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Loaded>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  const char *configured = std::getenv("MEMOPT_NCCL_LIBRARY");
  std::string path =
      configured && *configured ? configured : std::string("libnccl.so.2");
  std::unique_ptr<Loaded> &entry = loaded[path];
  if (!entry) {
    entry = std::make_unique<Loaded>();
    NcclLibrary &library = entry->library;
    std::string &loadError = entry->error;
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *why = dlerror();
      loadError =
          "cannot load NCCL: dlopen(\"" + path +
          "\") failed: " + (why ? why : "unknown error") +
          (configured && *configured
               ? std::string(" (MEMOPT_NCCL_LIBRARY)")
               : std::string(
                     "; set MEMOPT_NCCL_LIBRARY to libnccl.so.2 (PyTorch's "
                     "wheel: site-packages/nvidia/nccl/lib/libnccl.so.2) or "
                     "put its folder on LD_LIBRARY_PATH"));
    } else {
      std::string missing;
      NcclLibrary &l = library;
      resolve(handle, "ncclGetVersion", l.getVersion, missing);
      resolve(handle, "ncclGetUniqueId", l.getUniqueId, missing);
      resolve(handle, "ncclCommInitRank", l.commInitRank, missing);
      resolve(handle, "ncclCommDestroy", l.commDestroy, missing);
      resolve(handle, "ncclCommAbort", l.commAbort, missing);
      resolve(handle, "ncclCommGetAsyncError", l.commGetAsyncError, missing);
      resolve(handle, "ncclGetErrorString", l.getErrorString, missing);
      resolve(handle, "ncclGetLastError", l.getLastError, missing, false);
      resolve(handle, "ncclAllReduce", l.allReduce, missing);
      resolve(handle, "ncclReduceScatter", l.reduceScatter, missing);
      resolve(handle, "ncclAllGather", l.allGather, missing);
      resolve(handle, "ncclBroadcast", l.broadcast, missing);
      resolve(handle, "ncclGroupStart", l.groupStart, missing);
      resolve(handle, "ncclGroupEnd", l.groupEnd, missing);
      if (!missing.empty()) {
        loadError = "'" + path + "' is not an NCCL library: it lacks " +
                    missing + " (MEMOPT_NCCL_LIBRARY)";
      } else if (l.getVersion(&l.version) != kNcclSuccess ||
                 l.version < kMinimumVersion) {
        loadError = "'" + path + "' is NCCL version code " +
                    std::to_string(l.version) +
                    "; memopt needs NCCL 2.10 or later (ncclAvg)";
      } else {
        l.path = path;
      }
      if (!loadError.empty())
        dlclose(handle);
      // On success the library stays loaded for the process's lifetime.
    }
  }
  if (!entry->error.empty()) {
    error = entry->error;
    return nullptr;
  }
  return &entry->library;
}

const char *typeName(int type) {
  return type == kNcclFloat32    ? "f32"
         : type == kNcclFloat16  ? "f16"
         : type == kNcclBfloat16 ? "bf16"
                                 : "?";
}

const char *opName(int op) {
  return op == kNcclSum ? "sum" : op == kNcclMax ? "max" : "average";
}

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(const NcclLibrary &nccl, int rank, int size,
                   float *deviceScratch, std::function<void()> release,
                   double timeoutSeconds)
      : nccl_(nccl), rank_(rank), size_(size), scratch_(deviceScratch),
        release_(std::move(release)), timeoutSeconds_(timeoutSeconds) {}

  ~NcclCommunicator() override {
    stopWatchdog();
    if (comm_)
      nccl_.commDestroy(comm_);
    if (release_)
      release_();
  }

  /// ncclCommInitRank on the current device; false with error().
  bool init(const NcclUniqueId &id) {
    return check(nccl_.commInitRank(&comm_, size_, id, rank_),
                 "ncclCommInitRank");
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  using Communicator::allGather;
  using Communicator::allReduce;
  using Communicator::reduceScatter;

  bool allReduce(const void *send, void *recv, size_t count, DType dtype,
                 CollectiveReduction reduction, void *stream) override {
    int type = 0;
    return ready() && datatype(dtype, type) &&
           (count == 0 ||
            (issued("ncclAllReduce", count, type, op(reduction)) &&
             check(nccl_.allReduce(send, recv, count, type, op(reduction),
                                   comm_, stream),
                   "ncclAllReduce")));
  }

  bool reduceScatter(const void *send, void *recv, size_t recvCount,
                     DType dtype, CollectiveReduction reduction,
                     void *stream) override {
    int type = 0;
    return ready() && datatype(dtype, type) &&
           (recvCount == 0 ||
            (issued("ncclReduceScatter", recvCount, type, op(reduction)) &&
             check(nccl_.reduceScatter(send, recv, recvCount, type,
                                       op(reduction), comm_, stream),
                   "ncclReduceScatter")));
  }

  bool allGather(const void *send, void *recv, size_t sendCount, DType dtype,
                 void *stream) override {
    int type = 0;
    return ready() && datatype(dtype, type) &&
           (sendCount == 0 ||
            (issued("ncclAllGather", sendCount, type, -1) &&
             check(nccl_.allGather(send, recv, sendCount, type, comm_, stream),
                   "ncclAllGather")));
  }

  bool broadcast(const float *send, float *recv, size_t count, int root,
                 void *stream) override {
    if (!ready())
      return false;
    if (root < 0 || root >= size_) {
      error_ = "broadcast from rank " + std::to_string(root) +
               " in a group of " + std::to_string(size_) + " ranks";
      return false;
    }
    return count == 0 || (issued("ncclBroadcast", count, kNcclFloat32, -1) &&
                          check(nccl_.broadcast(send, recv, count, kNcclFloat32,
                                                root, comm_, stream),
                                "ncclBroadcast"));
  }

  /// Stream-ordered, as everything NCCL does: work queued on `stream` after
  /// it runs once every rank has reached it (a one-element all-reduce).
  bool barrier(void *stream) override {
    if (!ready())
      return false;
    if (!scratch_) {
      error_ = "barrier: the NCCL communicator has no device scratch";
      return false;
    }
    issued("ncclAllReduce (barrier)", 1, kNcclFloat32, kNcclSum);
    return check(nccl_.allReduce(scratch_, scratch_, 1, kNcclFloat32, kNcclSum,
                                 comm_, stream),
                 "ncclAllReduce (barrier)");
  }

  bool groupStart() override {
    return ready() && check(nccl_.groupStart(), "ncclGroupStart");
  }
  bool groupEnd() override {
    return ready() && check(nccl_.groupEnd(), "ncclGroupEnd");
  }

  void abort(const std::string &reason) override {
    std::lock_guard<std::mutex> lock(watch_);
    abortLocked(reason);
  }

  const std::string &error() const override { return error_; }

  bool watchWait(const std::function<void()> &wait) override {
    if (timeoutSeconds_ <= 0 || !ready()) {
      wait();
      return ready();
    }
    {
      std::lock_guard<std::mutex> lock(watch_);
      if (!watchdog_.joinable())
        watchdog_ = std::thread([this] { watchdogLoop(); });
      waiting_ = true;
      since_ = std::chrono::steady_clock::now();
    }
    wake_.notify_all();
    wait();
    std::lock_guard<std::mutex> lock(watch_);
    waiting_ = false;
    if (!aborted_)
      return true;
    error_ = fired_.empty() ? abortReason_ : fired_;
    return false;
  }

private:
  /// Under watch_.
  void abortLocked(const std::string &reason) {
    if (aborted_)
      return;
    aborted_ = true;
    abortReason_ = "rank " + std::to_string(rank_) + ": " + reason;
    if (comm_)
      nccl_.commAbort(comm_);
    comm_ = nullptr;
  }

  /// Remembers the call about to be issued, for the watchdog's message.
  /// Returns true.
  bool issued(const char *call, size_t count, int type, int op) {
    std::lock_guard<std::mutex> lock(watch_);
    ++calls_;
    int n = std::snprintf(
        lastCall_, sizeof lastCall_, "%s of %zu %s element%s%s%s%s", call,
        count, typeName(type), count == 1 ? "" : "s", op < 0 ? "" : " (",
        op < 0 ? "" : opName(op), op < 0 ? "" : ")");
    if (!node_.empty() && n > 0 && size_t(n) < sizeof lastCall_)
      std::snprintf(lastCall_ + n, sizeof lastCall_ - size_t(n),
                    " for node '%s'", node_.c_str());
    node_.clear();
    return true;
  }

public:
  void label(const char *node) override {
    std::lock_guard<std::mutex> lock(watch_);
    node_ = node ? node : "";
  }

private:
  /// The watchdog thread (started by the first watched wait): while the
  /// main thread waits, it polls ncclCommGetAsyncError every 100 ms (or a
  /// tenth of the timeout) and checks the time waited; either failing, it
  /// aborts the communicator, which releases the NCCL kernels the wait is
  /// stuck behind. Only while a wait is watched: then the main thread is in
  /// no NCCL call, so ncclCommAbort does not race one (ncclCommGetAsyncError
  /// may be called from any thread).
  void watchdogLoop() {
    auto poll = std::chrono::duration<double>(
        std::min(0.1, std::max(0.001, timeoutSeconds_ / 10)));
    std::unique_lock<std::mutex> lock(watch_);
    while (!stop_) {
      if (!waiting_ || aborted_) {
        wake_.wait(lock);
        continue;
      }
      wake_.wait_for(lock, poll);
      if (stop_ || !waiting_ || aborted_ || !comm_)
        continue;
      NcclResult async = kNcclSuccess;
      NcclResult queried = nccl_.commGetAsyncError(comm_, &async);
      std::string why;
      if (queried != kNcclSuccess) {
        why = std::string("ncclCommGetAsyncError failed: ") +
              nccl_.getErrorString(queried);
      } else if (async != kNcclSuccess && async != kNcclInProgress) {
        why = std::string("NCCL reported an asynchronous error "
                          "(ncclCommGetAsyncError): ") +
              nccl_.getErrorString(async);
        if (nccl_.getLastError) {
          const char *last = nccl_.getLastError(comm_);
          if (last && *last)
            why += std::string(" (") + last + ")";
        }
      } else {
        double waited = std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - since_)
                            .count();
        if (waited < timeoutSeconds_)
          continue;
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%g", timeoutSeconds_);
        why = std::string("the work queued behind the collectives did not "
                          "complete within ") +
              seconds +
              " s (MEMOPT_NCCL_TIMEOUT_S): a peer rank died, hangs, or "
              "issues other collectives";
      }
      fired_ = "collective watchdog: " + why + "; the last collective " +
               "this rank issued was #" + std::to_string(calls_) + ", " +
               (calls_ ? lastCall_ : "none") +
               "; the communicator is aborted (ncclCommAbort)";
      abortLocked(fired_);
    }
  }

  void stopWatchdog() {
    {
      std::lock_guard<std::mutex> lock(watch_);
      stop_ = true;
    }
    wake_.notify_all();
    if (watchdog_.joinable())
      watchdog_.join();
  }

  static int op(CollectiveReduction reduction) {
    switch (reduction) {
    case CollectiveReduction::Average:
      return kNcclAvg;
    case CollectiveReduction::Max:
      return kNcclMax;
    case CollectiveReduction::Sum:
      break;
    }
    return kNcclSum;
  }

  /// NCCL's data type of `dtype`; false with error() for a type the
  /// collectives do not reduce.
  bool datatype(DType dtype, int &type) {
    switch (dtype) {
    case DType::F32:
      type = kNcclFloat32;
      return true;
    case DType::F16:
      type = kNcclFloat16;
      return true;
    case DType::BF16:
      type = kNcclBfloat16;
      return true;
    default:
      error_ = "collectives reduce f32, f16 or bf16 tensors";
      return false;
    }
  }

  bool ready() {
    error_.clear();
    std::lock_guard<std::mutex> lock(watch_);
    if (aborted_) {
      error_ = abortReason_;
      return false;
    }
    return true;
  }

  bool check(NcclResult result, const char *call) {
    if (result == kNcclSuccess)
      return true;
    error_ = std::string(call) + ": " + nccl_.getErrorString(result);
    if (nccl_.getLastError && comm_) {
      const char *last = nccl_.getLastError(comm_);
      if (last && *last)
        error_ += std::string(" (") + last + ")";
    }
    return false;
  }

  const NcclLibrary &nccl_;
  int rank_, size_;
  float *scratch_;
  std::function<void()> release_;
  void *comm_ = nullptr;
  bool aborted_ = false;
  std::string abortReason_, error_;
  // The watchdog (watchWait): its thread, what it shares with the main
  // thread under watch_, and the last call issued.
  const double timeoutSeconds_;
  std::mutex watch_;
  std::condition_variable wake_;
  std::thread watchdog_;
  bool waiting_ = false, stop_ = false;
  std::chrono::steady_clock::time_point since_;
  std::string fired_;
  uint64_t calls_ = 0;
  char lastCall_[192] = "";
  std::string node_;
};

} // namespace

std::unique_ptr<Communicator>
createNcclCommunicator(const LaunchEnvironment &env, float *deviceScratch,
                       std::function<void()> release, std::string &error) {
  auto fail = [&](const std::string &message) {
    error = message;
    if (release)
      release();
    return std::unique_ptr<Communicator>();
  };
  const NcclLibrary *nccl = loadNccl(error);
  if (!nccl)
    return fail(error);
  std::string prefix = "rank " + std::to_string(env.rank) + ": ";
  NcclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (env.rank == 0) {
    NcclResult result = nccl->getUniqueId(&id);
    if (result != kNcclSuccess)
      return fail(prefix + "ncclGetUniqueId: " + nccl->getErrorString(result));
  }
  if (!exchangeUniqueId(env, &id, sizeof id, error))
    return fail(error);
  auto comm = std::make_unique<NcclCommunicator>(
      *nccl, env.rank, env.worldSize, deviceScratch, std::move(release),
      env.collectiveTimeoutSeconds);
  bool ok = comm->init(id);
  // ncclCommInitRank returns once every rank has joined, so every rank
  // has read the id: the file has served (and must not serve a later
  // launch).
  if (env.rank == 0 && env.worldSize > 1 && !env.idFile.empty())
    std::remove(env.idFile.c_str());
  if (!ok) {
    error = prefix + comm->error();
    return nullptr;
  }
  return comm;
}

} // namespace memopt::rt
