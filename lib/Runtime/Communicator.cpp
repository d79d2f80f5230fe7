//===- Communicator.cpp - the in-process communicator ---------------------===//
//
// N ranks as N threads of one process (include/memopt/Runtime/
// Communicator.h). Every collective is a rendezvous in three phases:
//   1. each rank posts its call; the last to arrive checks that all ranks
//      called the same collective with the same count, snapshots the calls
//      and sizes a shared scratch buffer;
//   2. each rank computes its share of the result into the scratch buffer
//      (rank r reduces the elements of its 1/N of the buffer, adding the
//      ranks' values in rank order in double precision, so the result does
//      not depend on which thread computed it); a second barrier;
//   3. each rank copies its result out of the scratch buffer.
// Results go through the scratch buffer so that any in-place use (recv
// overlapping a send that other ranks still read in phase 2) is safe. The
// scratch buffer is resized only in phase 1's completion, when no rank is in
// phase 3 of the previous collective.
//
// A rank that waits at a rendezvous longer than the group's timeout
// (MEMOPT_NCCL_TIMEOUT_S) aborts the group, naming the ranks that have not
// arrived and the call it waited in: PyTorch's NCCL watchdog (a collective
// not complete within the process group's timeout tears the group down) for
// threads, where the rendezvous itself knows who is missing.
// MEMOPT_FAULT_LATE_RANK=R:SECONDS makes rank R sleep before each call, so
// tests reach that path deterministically instead of racing the threads.
//
//===----------------------------------------------------------------------===//

#include "memopt/Runtime/Communicator.h"
#include "Internal.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

namespace memopt::rt {

Communicator::~Communicator() = default;

namespace {

enum class CallKind { AllReduce, ReduceScatter, AllGather, Broadcast, Barrier };

const char *callName(CallKind kind) {
  switch (kind) {
  case CallKind::AllReduce:
    return "all_reduce";
  case CallKind::ReduceScatter:
    return "reduce_scatter";
  case CallKind::AllGather:
    return "all_gather";
  case CallKind::Broadcast:
    return "broadcast";
  case CallKind::Barrier:
    return "barrier";
  }
  return "?";
}

struct Call {
  CallKind kind = CallKind::Barrier;
  const void *send = nullptr;
  void *recv = nullptr;
  size_t count = 0; ///< NCCL's count argument of the call
  CollectiveReduction reduction = CollectiveReduction::Sum;
  int root = 0;
  DType dtype = DType::F32;
};

// The communicator links without a backend (unittests link it alone), so it
// names and sizes the three types it reduces itself.
const char *typeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  default:
    return "unsupported";
  }
}

size_t typeBytes(DType dtype) { return dtype == DType::F32 ? 4 : 2; }

const char *reductionName(CollectiveReduction reduction) {
  switch (reduction) {
  case CollectiveReduction::Sum:
    return "sum";
  case CollectiveReduction::Average:
    return "average";
  case CollectiveReduction::Max:
    return "max";
  }
  return "?";
}

std::string describe(const Call &call) {
  std::string text = callName(call.kind);
  if (call.kind != CallKind::Barrier)
    text += " of " + std::to_string(call.count) +
            (call.dtype == DType::F32
                 ? std::string(" elements")
                 : std::string(" ") + typeName(call.dtype) + " elements");
  if (call.kind == CallKind::AllReduce || call.kind == CallKind::ReduceScatter)
    text += std::string(" (") + reductionName(call.reduction) + ")";
  if (call.kind == CallKind::Broadcast)
    text += " from rank " + std::to_string(call.root);
  return text;
}

/// "0.3", "600": seconds as a message writes them.
std::string secondsText(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

/// The state the ranks of one group share.
class Group {
public:
  Group(int size, double timeoutSeconds, LateRank late)
      : size_(size), timeoutSeconds_(timeoutSeconds), late_(late),
        posted_(size_t(size)), here_(size_t(size), false) {}
  int size() const { return size_; }

  /// Posts `call` of `rank` (phase 1). Returns false with `error` when the
  /// group is aborted or the ranks' calls differ.
  bool post(int rank, const Call &call, std::string &error) {
    if (rank == late_.rank)
      std::this_thread::sleep_for(std::chrono::duration<double>(late_.seconds));
    posted_[size_t(rank)] = call;
    return arrive(
        [&] {
          for (int k = 1; k < size_; ++k) {
            const Call &a = posted_[0], &b = posted_[size_t(k)];
            if (a.kind != b.kind || a.count != b.count ||
                a.reduction != b.reduction || a.root != b.root ||
                a.dtype != b.dtype) {
              abortLocked("collective mismatch: rank 0 called " + describe(a) +
                          ", rank " + std::to_string(k) + " called " +
                          describe(b));
              return;
            }
          }
          active_ = posted_;
          size_t elements = 0;
          switch (active_[0].kind) {
          case CallKind::AllReduce:
          case CallKind::Broadcast:
            elements = active_[0].count;
            break;
          case CallKind::ReduceScatter:
          case CallKind::AllGather:
            elements = active_[0].count * size_t(size_);
            break;
          case CallKind::Barrier:
            break;
          }
          if (scratch_.size() < elements)
            scratch_.resize(elements);
        },
        rank, error);
  }

  /// A plain barrier (phase 2's end).
  bool sync(int rank, std::string &error) {
    return arrive(nullptr, rank, error);
  }

  void abort(const std::string &reason) {
    std::lock_guard<std::mutex> lock(mutex_);
    abortLocked(reason);
  }

  const std::vector<Call> &active() const { return active_; }
  float *scratch() { return scratch_.data(); }

private:
  /// Waits until every rank has arrived (the last runs `completion`), the
  /// group is aborted, or the timeout passes: then the group is aborted
  /// with a message naming the ranks that did not come (PyTorch's NCCL
  /// watchdog reports a collective that did not complete in its timeout
  /// the same way, and tears the group down).
  bool arrive(const std::function<void()> &completion, int rank,
              std::string &error) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (aborted_) {
      error = abortReason_;
      return false;
    }
    uint64_t generation = generation_;
    here_[size_t(rank)] = true;
    if (++arrived_ == size_) {
      if (completion)
        completion();
      arrived_ = 0;
      std::fill(here_.begin(), here_.end(), false);
      ++generation_;
      cv_.notify_all();
    } else {
      auto done = [&] { return generation_ != generation || aborted_; };
      if (timeoutSeconds_ <= 0) {
        cv_.wait(lock, done);
      } else if (!cv_.wait_for(lock,
                               std::chrono::duration<double>(timeoutSeconds_),
                               done)) {
        std::string missing;
        int count = 0;
        for (int k = 0; k < size_; ++k)
          if (!here_[size_t(k)]) {
            missing += std::string(count ? ", " : "") + std::to_string(k);
            ++count;
          }
        abortLocked("collective timeout: rank " + std::to_string(rank) +
                    " waited " + secondsText(timeoutSeconds_) + " s in " +
                    describe(posted_[size_t(rank)]) + " for rank" +
                    (count > 1 ? "s " : " ") + missing + " of " +
                    std::to_string(size_) +
                    " (MEMOPT_NCCL_TIMEOUT_S): a rank that failed without "
                    "aborting, hangs, or calls other collectives");
      }
    }
    if (aborted_) {
      error = abortReason_;
      return false;
    }
    return true;
  }

  void abortLocked(const std::string &reason) {
    if (!aborted_) {
      aborted_ = true;
      abortReason_ = reason;
    }
    cv_.notify_all();
  }

  const int size_;
  const double timeoutSeconds_;
  const LateRank late_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::string abortReason_;
  /// Each rank's latest call (written by the rank before it arrives) and the
  /// snapshot the ranks read in phase 2 (taken when all have arrived, so a
  /// fast rank posting its next call cannot disturb a slow one).
  std::vector<Call> posted_, active_;
  /// The ranks that have arrived at the current rendezvous.
  std::vector<bool> here_;
  std::vector<float> scratch_;
};

/// [begin, end) of rank r's 1/N share of `count` items.
std::pair<size_t, size_t> share(size_t count, int rank, int ranks) {
  size_t begin = count * size_t(rank) / size_t(ranks);
  size_t end = count * size_t(rank + 1) / size_t(ranks);
  return {begin, end};
}

/// Element i of a buffer of `dtype` (F32, F16 or BF16) as a double.
double loadElement(const void *data, DType dtype, size_t i) {
  if (dtype == DType::F32)
    return double(static_cast<const float *>(data)[i]);
  uint16_t bits = static_cast<const uint16_t *>(data)[i];
  return double(dtype == DType::F16 ? halfToFloat(bits) : bf16ToFloat(bits));
}

void storeElement(void *data, DType dtype, size_t i, double value) {
  if (dtype == DType::F32)
    static_cast<float *>(data)[i] = float(value);
  else
    static_cast<uint16_t *>(data)[i] = dtype == DType::F16
                                           ? floatToHalf(float(value))
                                           : floatToBf16(float(value));
}

/// scratch[i] = reduction over ranks (in rank order, in double) of
/// calls[k].send[offset + i] for i in [begin, end), rounded once to the
/// calls' type. Max keeps NaN (an overflow flag must not be lost).
void reduceInto(void *scratch, const std::vector<Call> &calls, size_t offset,
                size_t begin, size_t end, CollectiveReduction reduction) {
  double ranks = double(calls.size());
  DType dtype = calls.front().dtype;
  for (size_t i = begin; i < end; ++i) {
    double result = 0;
    for (size_t k = 0; k < calls.size(); ++k) {
      double value = loadElement(calls[k].send, dtype, offset + i);
      if (reduction != CollectiveReduction::Max)
        result += value;
      else if (k == 0 || std::isnan(value) || value > result)
        result = std::isnan(result) ? result : value;
    }
    if (reduction == CollectiveReduction::Average)
      result /= ranks;
    storeElement(scratch, dtype, i, result);
  }
}

class InProcessCommunicator final : public Communicator {
public:
  InProcessCommunicator(std::shared_ptr<Group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }

  using Communicator::allGather;
  using Communicator::allReduce;
  using Communicator::reduceScatter;

  bool allReduce(const void *send, void *recv, size_t count, DType dtype,
                 CollectiveReduction reduction, void *) override {
    if (!checkType(dtype))
      return false;
    Call call{CallKind::AllReduce, send, recv, count, reduction, 0, dtype};
    return run(call, [&](float *scratch, const std::vector<Call> &calls) {
      auto [begin, end] = share(count, rank_, size());
      reduceInto(scratch, calls, 0, begin, end, reduction);
    });
  }

  bool reduceScatter(const void *send, void *recv, size_t recvCount,
                     DType dtype, CollectiveReduction reduction,
                     void *) override {
    if (!checkType(dtype))
      return false;
    Call call{
        CallKind::ReduceScatter, send, recv, recvCount, reduction, 0, dtype};
    return run(call, [&](float *scratch, const std::vector<Call> &calls) {
      size_t offset = size_t(rank_) * recvCount;
      reduceInto(reinterpret_cast<uint8_t *>(scratch) +
                     offset * typeBytes(dtype),
                 calls, offset, 0, recvCount, reduction);
    });
  }

  bool allGather(const void *send, void *recv, size_t sendCount, DType dtype,
                 void *) override {
    if (!checkType(dtype))
      return false;
    Call call{CallKind::AllGather,      send, recv, sendCount,
              CollectiveReduction::Sum, 0,    dtype};
    return run(call, [&](float *scratch, const std::vector<Call> &) {
      size_t bytes = sendCount * typeBytes(dtype);
      if (bytes)
        std::memcpy(reinterpret_cast<uint8_t *>(scratch) +
                        size_t(rank_) * bytes,
                    send, bytes);
    });
  }

  bool broadcast(const float *send, float *recv, size_t count, int root,
                 void *) override {
    if (root < 0 || root >= size()) {
      error_ = "broadcast from rank " + std::to_string(root) +
               " in a group of " + std::to_string(size()) + " ranks";
      group_->abort("rank " + std::to_string(rank_) + ": " + error_);
      return false;
    }
    Call call{CallKind::Broadcast,      send, recv,      count,
              CollectiveReduction::Sum, root, DType::F32};
    return run(call, [&](float *scratch, const std::vector<Call> &calls) {
      auto [begin, end] = share(count, rank_, size());
      if (end > begin)
        std::memcpy(scratch + begin,
                    static_cast<const float *>(calls[size_t(root)].send) +
                        begin,
                    (end - begin) * sizeof(float));
    });
  }

  bool barrier(void *) override {
    Call call{CallKind::Barrier,        nullptr, nullptr,   0,
              CollectiveReduction::Sum, 0,       DType::F32};
    error_.clear();
    return group_->post(rank_, call, error_);
  }

  void abort(const std::string &reason) override {
    group_->abort("rank " + std::to_string(rank_) + ": " + reason);
  }

  const std::string &error() const override { return error_; }

private:
  bool checkType(DType dtype) {
    if (dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16)
      return true;
    error_ = std::string("collectives reduce f32, f16 or bf16, not ") +
             typeName(dtype);
    group_->abort("rank " + std::to_string(rank_) + ": " + error_);
    return false;
  }

  bool
  run(const Call &call,
      const std::function<void(float *, const std::vector<Call> &)> &compute) {
    error_.clear();
    if (!group_->post(rank_, call, error_))
      return false;
    compute(group_->scratch(), group_->active());
    if (!group_->sync(rank_, error_))
      return false;
    const auto *scratch = reinterpret_cast<const uint8_t *>(group_->scratch());
    size_t offset = 0, count = call.count, bytes = typeBytes(call.dtype);
    if (call.kind == CallKind::ReduceScatter)
      offset = size_t(rank_) * call.count;
    else if (call.kind == CallKind::AllGather)
      count = call.count * size_t(size());
    if (count)
      std::memmove(call.recv, scratch + offset * bytes, count * bytes);
    return true;
  }

  std::shared_ptr<Group> group_;
  int rank_;
  std::string error_;
};

} // namespace

std::vector<std::unique_ptr<Communicator>>
createInProcessCommunicators(int ranks, double timeoutSeconds) {
  return createInProcessCommunicators(ranks, timeoutSeconds, LateRank());
}

std::vector<std::unique_ptr<Communicator>>
createInProcessCommunicators(int ranks, double timeoutSeconds, LateRank late) {
  std::vector<std::unique_ptr<Communicator>> communicators;
  if (ranks < 1)
    return communicators;
  auto group = std::make_shared<Group>(ranks, timeoutSeconds, late);
  for (int r = 0; r < ranks; ++r)
    communicators.push_back(std::make_unique<InProcessCommunicator>(group, r));
  return communicators;
}

bool collectiveTimeoutFromEnvironment(double &seconds, std::string &error) {
  seconds = kDefaultCollectiveTimeoutSeconds;
  const char *text = std::getenv("MEMOPT_NCCL_TIMEOUT_S");
  if (!text || !*text)
    return true;
  char *end = nullptr;
  double parsed = std::strtod(text, &end);
  if (!end || *end || !(parsed >= 0) || parsed > 1e9) {
    error = std::string("MEMOPT_NCCL_TIMEOUT_S='") + text +
            "' is not a number of seconds (0 turns the timeout off)";
    return false;
  }
  seconds = parsed;
  return true;
}

bool lateRankFromEnvironment(int ranks, LateRank &late, std::string &error) {
  late = LateRank();
  const char *text = std::getenv("MEMOPT_FAULT_LATE_RANK");
  if (!text || !*text)
    return true;
  char *end = nullptr;
  long rank = std::strtol(text, &end, 10);
  double seconds = -1;
  if (end && *end == ':') {
    const char *rest = end + 1;
    seconds = std::strtod(rest, &end);
    if (end == rest)
      seconds = -1;
  }
  if (!end || *end || rank < 0 || rank >= ranks || !(seconds >= 0) ||
      seconds > 1e6) {
    error = std::string("MEMOPT_FAULT_LATE_RANK='") + text +
            "' is not RANK:SECONDS with a rank below " + std::to_string(ranks);
    return false;
  }
  late.rank = int(rank);
  late.seconds = seconds;
  return true;
}

} // namespace memopt::rt
