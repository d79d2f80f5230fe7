//===- HostAdam.cpp - the CPU optimizer of --offload optimizer ------------===//
//
// See HostAdam.h. The step's plan (micro-step gate, skipped step, bias
// correction, made once per update so that the loops have no branch), the
// thread pool, the engine and the operands' checks; the element loops are in
// HostAdamLoops.cpp.
//
//===----------------------------------------------------------------------===//

#include "HostAdam.h"
#include "Internal.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

namespace memopt::rt {

namespace {

/// The message of an update's error (the engine names the node).
std::string nodeError(const HostUpdate &, const std::string &message) {
  return message;
}

} // namespace

std::string planHostUpdate(const HostUpdate &u, HostUpdatePlan &plan) {
  plan = HostUpdatePlan();
  if (!u.master || !u.grad || !u.scalars || u.elements < 0)
    return nodeError(u, "offloaded update without its master, gradient or "
                        "staging");
  if (u.gradType != DType::F32 && u.gradType != DType::F16 &&
      u.gradType != DType::BF16)
    return nodeError(u, std::string("offloaded gradient of type ") +
                            dtypeName(u.gradType) +
                            " (expected f32, f16 or "
                            "bf16)");
  const float *s = u.scalars;
  if (u.accumulationSteps > 0) {
    double micro = s[kStagingMicroStep];
    if (!(micro >= 0 && micro < double(u.accumulationSteps) &&
          micro == std::floor(micro)))
      return nodeError(u, "micro_step " + std::to_string(micro) +
                              " is not an integer in [0, " +
                              std::to_string(u.accumulationSteps) + ")");
    plan.accumulate = u.accumulator != nullptr;
    plan.first = micro == 0;
    plan.apply = micro == double(u.accumulationSteps - 1);
  }
  if (u.scaled) {
    plan.scaled = true;
    if (s[kStagingFoundInf] != 0.0f)
      plan.apply = false;
    plan.inverseScale = double(float(1.0 / double(s[kStagingLossScale])));
  }
  plan.rate = double(s[kStagingLr]);
  if (u.kind == HostUpdate::Kind::AdamW && plan.apply) {
    double t = double(s[kStagingStep]);
    if (u.scaled)
      t -= double(s[kStagingSkipped]);
    if (!(t >= 1))
      return nodeError(u, "AdamW step " + std::to_string(t) +
                              " is not a 1-based step number");
    plan.stepSize = plan.rate / (1 - std::pow(double(u.beta1), t));
    plan.correction2 = std::sqrt(1 - std::pow(double(u.beta2), t));
  }
  if (plan.apply && u.kind == HostUpdate::Kind::Sgd && u.momentum != 0.0f &&
      !u.momentumBuffer)
    return nodeError(u, "SGD with momentum needs its buffer");
  if (plan.apply && u.kind == HostUpdate::Kind::AdamW &&
      (!u.expAvg || !u.expAvgSq))
    return nodeError(u, "AdamW needs its moments");
  return "";
}

int64_t getHostUpdateStreamedBytes(const HostUpdate &update,
                                   const HostUpdatePlan &plan) {
  if (!plan.accumulate && !plan.apply)
    return 0;
  int64_t gradBytes = update.gradType == DType::F32 ? 4 : 2;
  int64_t perElement = gradBytes;
  if (update.accumulator)
    perElement += 4;
  if (plan.apply)
    for (const float *operand :
         {static_cast<const float *>(update.master),
          static_cast<const float *>(update.momentumBuffer),
          static_cast<const float *>(update.expAvg),
          static_cast<const float *>(update.expAvgSq)})
      if (operand)
        perElement += 4;
  if (plan.apply && update.param && update.paramType != DType::F32)
    perElement += 2; // a low working parameter's rounded copy
  return perElement * update.elements;
}

std::string runHostUpdate(const HostUpdate &update, HostUpdatePool &pool,
                          int64_t *streamedBytes) {
  if (streamedBytes)
    *streamedBytes = 0;
  HostUpdatePlan plan;
  std::string error = planHostUpdate(update, plan);
  if (!error.empty())
    return error;
  if (!plan.accumulate && !plan.apply && !update.refreshParam)
    return "";
  if (streamedBytes)
    *streamedBytes = getHostUpdateStreamedBytes(update, plan);
  // 16 Ki elements a chunk: 64 KiB of each f32 stream, enough to hide the
  // hand-out and small enough to balance a few-MiB tensor over the cores.
  pool.parallelFor(update.elements, int64_t(1) << 14,
                   [&](int64_t lo, int64_t hi) {
                     runHostUpdateRange(update, plan, lo, hi);
                   });
  return "";
}

//===----------------------------------------------------------------------===//
// HostUpdatePool
//===----------------------------------------------------------------------===//

HostUpdatePool::HostUpdatePool(int threads) {
  if (threads <= 0) {
    if (const char *env = std::getenv("MEMOPT_OFFLOAD_THREADS"))
      threads = std::atoi(env);
    if (threads <= 0)
      threads = int(std::max(1u, std::thread::hardware_concurrency()));
  }
  for (int i = 1; i < threads; ++i)
    workers_.emplace_back([this] { work(); });
}

HostUpdatePool::~HostUpdatePool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread &worker : workers_)
    worker.join();
}

void HostUpdatePool::work() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_)
      return;
    seen = generation_;
    while (next_ < n_) {
      int64_t lo = next_;
      int64_t hi = std::min(n_, lo + chunk_);
      next_ = hi;
      ++pending_;
      const auto *body = body_;
      lock.unlock();
      (*body)(lo, hi);
      lock.lock();
      if (--pending_ == 0 && next_ >= n_)
        done_.notify_all();
    }
  }
}

void HostUpdatePool::parallelFor(
    int64_t n, int64_t grain,
    const std::function<void(int64_t, int64_t)> &body) {
  if (n <= 0)
    return;
  if (workers_.empty() || n <= grain) {
    body(0, n);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  body_ = &body;
  n_ = n;
  next_ = 0;
  pending_ = 0;
  chunk_ = std::max(grain, (n + int64_t(threads()) * 4 - 1) /
                               (int64_t(threads()) * 4));
  ++generation_;
  wake_.notify_all();
  while (next_ < n_) {
    int64_t lo = next_;
    int64_t hi = std::min(n_, lo + chunk_);
    next_ = hi;
    ++pending_;
    lock.unlock();
    body(lo, hi);
    lock.lock();
    --pending_;
  }
  done_.wait(lock, [&] { return pending_ == 0; });
  body_ = nullptr;
  n_ = 0;
}

//===----------------------------------------------------------------------===//
// OffloadEngine
//===----------------------------------------------------------------------===//

OffloadEngine::OffloadEngine() {
  // Started here, not in the initializer list: the thread must not see the
  // mutex, condition variables and queue before they are constructed.
  dispatcher_ = std::thread([this] { dispatch(); });
}

OffloadEngine::~OffloadEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  dispatcher_.join();
  if (destroyBackend)
    destroyBackend(backend);
}

uint64_t OffloadEngine::submit(const HostUpdate &update) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t ticket = ++submitted_;
  queue_.emplace_back(ticket, update);
  wake_.notify_all();
  return ticket;
}

void OffloadEngine::waitFor(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return completed_ >= ticket; });
}

void OffloadEngine::invalidateParams() {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return completed_ >= submitted_; });
  freshParams_.clear();
}

void OffloadEngine::waitAll() {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return completed_ >= submitted_; });
}

std::string OffloadEngine::takeError(std::string &node) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string error;
  error.swap(error_);
  node.swap(errorNode_);
  errorNode_.clear();
  return error;
}

double OffloadEngine::measuredSecondsPerGiB() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (updateBytes_ <= 0)
    return 0;
  return updateSeconds_ * double(int64_t(1) << 30) / double(updateBytes_);
}

void appendHostUpdateTime(OffloadEngine *engine, OpTimes &times) {
  if (!engine)
    return;
  double seconds = engine->measuredSecondsPerGiB();
  if (seconds <= 0)
    return;
  OpTimes::Entry entry;
  entry.node = "<host update 1 GiB>";
  entry.kind = "host update";
  entry.calls = 1;
  entry.ms = seconds * 1000.0 * double(std::max<int64_t>(1, times.runs));
  times.ops.push_back(entry);
}

void OffloadEngine::dispatch() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty())
      return; // stopping, nothing left
    auto [ticket, update] = queue_.front();
    queue_.pop_front();
    // Guarded by the lock with the queue: invalidateParams clears it.
    if (update.paramPersists && update.param)
      update.refreshParam = freshParams_.insert(update.param).second;
    lock.unlock();
    int64_t streamed = 0;
    auto begin = std::chrono::steady_clock::now();
    std::string error = runHostUpdate(update, pool_, &streamed);
    std::chrono::duration<double> seconds =
        std::chrono::steady_clock::now() - begin;
    lock.lock();
    if (streamed > 0) {
      updateSeconds_ += seconds.count();
      updateBytes_ += streamed;
    }
    if (!error.empty() && error_.empty()) {
      error_ = error;
      errorNode_ = update.node ? update.node : "";
    }
    completed_ = ticket;
    done_.notify_all();
  }
}

bool describeOffloadedUpdate(Context &ctx, HostUpdate::Kind kind,
                             const char *node, void *staging,
                             const TensorRef &param, const TensorRef &grad,
                             const TensorRef &master,
                             const TensorRef *momentumBuffer,
                             const TensorRef *m, const TensorRef *v,
                             const TensorRef &lr, const TensorRef *step,
                             const GradientAccumulation *accumulation,
                             const LossScaling *scaling, HostUpdate &update) {
  bool adamw = kind == HostUpdate::Kind::AdamW;
  if (adamw ? !validateAdamwUpdate(ctx, node, master, grad, *m, *v, lr, *step)
            : !validateSgdUpdate(ctx, node, 0.0f, master, grad, momentumBuffer,
                                 lr))
    return false;
  if (accumulation && !validateAccumulation(ctx, node, master, *accumulation))
    return false;
  if (scaling && !validateLossScaling(ctx, node, *scaling, adamw))
    return false;
  if ((param.dtype != DType::F32 && param.dtype != DType::F16 &&
       param.dtype != DType::BF16) ||
      param.numElements() != master.numElements()) {
    failf(ctx, node,
          "the device parameter %s %s does not match its f32 master %s",
          dtypeName(param.dtype), shapeString(param).c_str(),
          shapeString(master).c_str());
    return false;
  }
  if (!staging) {
    failf(ctx, node,
          "offloaded update without its staging slot (is the "
          "host state region set? setHostState)");
    return false;
  }
  update = HostUpdate();
  update.kind = kind;
  update.node = node;
  update.master = static_cast<float *>(master.data);
  if (momentumBuffer && momentumBuffer->data)
    update.momentumBuffer = static_cast<float *>(momentumBuffer->data);
  if (adamw) {
    update.expAvg = static_cast<float *>(m->data);
    update.expAvgSq = static_cast<float *>(v->data);
  }
  if (accumulation) {
    update.accumulator = static_cast<float *>(accumulation->accumulator.data);
    update.accumulationSteps = accumulation->steps;
  }
  update.scaled = scaling != nullptr;
  update.grad = static_cast<uint8_t *>(staging) + kHostStagingScalarBytes;
  update.gradType = grad.dtype;
  update.paramType = param.dtype;
  update.elements = grad.numElements();
  update.scalars = static_cast<const float *>(staging);
  return true;
}

bool describeOffloadedSgd(Context &ctx, const char *node, void *staging,
                          float momentum, float weightDecay,
                          const TensorRef &param, const TensorRef &grad,
                          const TensorRef &master,
                          const TensorRef *momentumBuffer, const TensorRef &lr,
                          const GradientAccumulation *accumulation,
                          const LossScaling *scaling, HostUpdate &update) {
  if (!describeOffloadedUpdate(ctx, HostUpdate::Kind::Sgd, node, staging, param,
                               grad, master, momentumBuffer, nullptr, nullptr,
                               lr, nullptr, accumulation, scaling, update))
    return false;
  if (momentum != 0.0f && !update.momentumBuffer) {
    failf(ctx, node, "SGD momentum %g needs a momentum buffer",
          double(momentum));
    return false;
  }
  update.momentum = momentum;
  update.weightDecay = weightDecay;
  return true;
}

bool describeOffloadedAdamw(Context &ctx, const char *node, void *staging,
                            float beta1, float beta2, float eps,
                            float weightDecay, const TensorRef &param,
                            const TensorRef &grad, const TensorRef &master,
                            const TensorRef &m, const TensorRef &v,
                            const TensorRef &lr, const TensorRef &step,
                            const GradientAccumulation *accumulation,
                            const LossScaling *scaling, HostUpdate &update) {
  if (!describeOffloadedUpdate(ctx, HostUpdate::Kind::AdamW, node, staging,
                               param, grad, master, nullptr, &m, &v, lr, &step,
                               accumulation, scaling, update))
    return false;
  update.beta1 = beta1;
  update.beta2 = beta2;
  update.eps = eps;
  update.weightDecay = weightDecay;
  return true;
}

void destroyOffloadEngine(OffloadEngine *engine) {
  if (!engine)
    return;
  engine->waitAll();
  delete engine;
}

} // namespace memopt::rt
