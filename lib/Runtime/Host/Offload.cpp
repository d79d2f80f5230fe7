//===- Offload.cpp - activation offload on the host backend ---------------===//
//
// The host backend runs an offloaded program as the CUDA backend does,
// without streams: an offload copies the activation into the context's host
// pool, a reload copies it back into its new arena place, and the waits
// have nothing to wait for. So the host tests check the plan itself (the
// arena bytes the planner reuses between an offload_wait and its reload,
// the pool's offsets) by comparing numbers with the plain program's.
//
//===----------------------------------------------------------------------===//

#include "HostInternal.h"

#include <cstring>

namespace memopt::rt {

namespace {

/// The pool range [hostOffset, hostOffset + bytes), or nullptr after
/// recording an error naming the node.
uint8_t *poolRange(Context &ctx, const char *node, int64_t hostOffset,
                   int64_t bytes) {
  std::vector<uint8_t> &pool = host::hostPoolOf(ctx);
  if (!validateHostPoolRange(ctx, node, hostOffset, bytes,
                             /*poolReserved=*/true, pool.size()))
    return nullptr;
  return pool.data() + hostOffset;
}

} // namespace

void reserveHostPool(Context &ctx, size_t bytes) {
  host::hostPoolOf(ctx).assign(bytes, 0);
}

uint8_t *hostPool(Context &ctx) {
  std::vector<uint8_t> &pool = host::hostPoolOf(ctx);
  return pool.empty() ? nullptr : pool.data();
}

void offloadStart(Context &ctx, const char *nodeName, int64_t slot,
                  const void *src, int64_t hostOffset, int64_t bytes) {
  if (uint8_t *dst = poolRange(ctx, nodeName, hostOffset, bytes))
    std::memcpy(dst, src, size_t(bytes));
}

void offloadWait(Context &, const char *, int64_t) {}

void reloadStart(Context &ctx, const char *nodeName, int64_t slot, void *dst,
                 int64_t hostOffset, int64_t bytes) {
  if (uint8_t *src = poolRange(ctx, nodeName, hostOffset, bytes))
    std::memcpy(dst, src, size_t(bytes));
}

void reloadWait(Context &, const char *, int64_t) {}

} // namespace memopt::rt
