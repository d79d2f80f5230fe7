//===- HostInternal.h - shared by the host backend's files -------*- C++
//-*-===//
//
// The host backend's thread pool and double conversions (HostBackend.cpp)
// for the other host files, so every host kernel splits its work the same
// way: items fixed by the shapes, each output element owned by one item,
// results independent of the thread count.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_RUNTIME_HOST_HOSTINTERNAL_H
#define MEMOPT_LIB_RUNTIME_HOST_HOSTINTERNAL_H

#include "../Internal.h"

#include <functional>
#include <vector>

namespace memopt::rt::host {

/// Calls fn(lo, hi) on chunks of at least `grain` items covering [begin,
/// end) on the context's threads (HostBackend.cpp's parallelFor).
void parallelFor(Context &ctx, int64_t begin, int64_t end, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &fn);
/// Items per chunk so that a chunk does at least the minimum useful work
/// (about 2^17 multiply-adds); `workPerItem` in multiply-adds.
int64_t grainFor(int64_t workPerItem);
/// Elements per chunk of a plain elementwise pass.
constexpr int64_t kElementGrain = int64_t(1) << 16;
/// All elements of a float tensor as double, converted on the threads.
std::vector<double> toDouble(Context &ctx, const TensorRef &t);
/// Stores `values` (t's element count) into t, on the threads.
void store(Context &ctx, const std::vector<double> &values, const TensorRef &t);
/// The context's host pool of offloaded activations (Host/Offload.cpp).
std::vector<uint8_t> &hostPoolOf(Context &ctx);
/// Fills a planned workspace with NaN (see HostBackend.cpp).
void poisonWorkspace(void *workspace, size_t bytes);

} // namespace memopt::rt::host

#endif // MEMOPT_LIB_RUNTIME_HOST_HOSTINTERNAL_H
