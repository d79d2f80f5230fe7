//===- ThreadPool.cpp - the host backend's worker threads -----------------===//
//
// The pool behind parallelFor (HostKernels.h): threads - 1 workers per
// context, started by the first op large enough to split, that run the chunks
// of one parallelFor at a time with the calling thread; chunks are claimed
// from an atomic counter. A std::thread pool in the style of PyTorch's
// intra-op pool (at::parallel_for over a fixed worker set), kept deliberately
// simple: one job at a time, no work stealing, nested calls run serially.
// Moved out of HostBackend.cpp unchanged.
//
//===----------------------------------------------------------------------===//

#include "HostInternal.h"

#include <algorithm>
#include <cstdlib>

namespace memopt::rt {

ThreadPool::ThreadPool(int workers) {
  for (int i = 0; i < workers; ++i)
    threads.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  for (std::thread &t : threads)
    t.join();
}

void ThreadPool::run(int64_t count, const std::function<void(int64_t)> &task) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    current = &task;
    chunks = count;
    next.store(0);
    active = int(threads.size());
    ++generation;
  }
  wake.notify_all();
  drain(task, count);
  std::unique_lock<std::mutex> lock(mutex);
  done.wait(lock, [this] { return active == 0; });
  current = nullptr;
}

void ThreadPool::drain(const std::function<void(int64_t)> &task,
                       int64_t count) {
  insideParallelFor = true;
  for (int64_t i = next.fetch_add(1); i < count; i = next.fetch_add(1))
    task(i);
  insideParallelFor = false;
}

void ThreadPool::workerLoop() {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t)> *task;
    int64_t count;
    {
      std::unique_lock<std::mutex> lock(mutex);
      wake.wait(lock, [&] { return stopping || generation != seen; });
      if (stopping)
        return;
      seen = generation;
      task = current;
      count = chunks;
    }
    drain(*task, count);
    // run() waits for every worker, so none can miss a generation.
    std::lock_guard<std::mutex> lock(mutex);
    if (--active == 0)
      done.notify_one();
  }
}

int hostThreadCount() {
  if (const char *env = std::getenv("MEMOPT_HOST_THREADS")) {
    char *end = nullptr;
    long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n > 0)
      return int(std::min<long>(n, 1024));
  }
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

} // namespace memopt::rt
