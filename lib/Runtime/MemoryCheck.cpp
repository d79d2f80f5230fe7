//===- MemoryCheck.cpp - the device has what the program was compiled for -===//
//
// At start, before the arena is allocated: the program's device memory (the
// arena with its workspaces, the weight region with the optimizer state,
// inputs and outputs outside the arena, the context's own workspaces)
// against the device's free memory, so that a program compiled for a larger
// GPU (or a GPU another process fills) stops with how much is missing
// instead of failing in cudaMalloc or mid-step. PyTorch and JAX only learn
// this at the allocation that fails; memopt knows every byte before the
// first step, which is what memopt-compile --fit plans against
// (docs/fit.md). The free bytes come from cudaMemGetInfo (memoryInfo), or
// from MEMOPT_DEVICE_FREE_BYTES when it is set: the host backend has no
// device to ask, and tests state one.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace memopt::rt {

namespace {

std::string formatBytes(int64_t bytes) {
  char text[64];
  if (bytes < 1024)
    std::snprintf(text, sizeof text, "%lld B", static_cast<long long>(bytes));
  else if (bytes < (int64_t(1) << 20))
    std::snprintf(text, sizeof text, "%.2f KiB", bytes / 1024.0);
  else if (bytes < (int64_t(1) << 30))
    std::snprintf(text, sizeof text, "%.2f MiB", bytes / 1048576.0);
  else
    std::snprintf(text, sizeof text, "%.2f GiB", bytes / 1073741824.0);
  return text;
}

} // namespace

int64_t requiredDeviceBytes(const ProgramInfo &program, int64_t &ioBytes) {
  ioBytes = 0;
  for (int i = 0; i < program.numInputs; ++i)
    if (program.inputs[i].offset < 0)
      ioBytes += int64_t(tensorBytes(program.inputs[i]));
  for (int i = 0; i < program.numOutputs; ++i)
    if (program.outputs[i].offset < 0)
      ioBytes += int64_t(tensorBytes(program.outputs[i]));
  return program.arenaBytes + program.weightBytes + ioBytes;
}

bool checkDeviceMemory(Context &ctx, const ProgramInfo &program,
                       std::string &error) {
  int64_t freeBytes = -1;
  const char *stated = std::getenv("MEMOPT_DEVICE_FREE_BYTES");
  if (stated && *stated) {
    char *end = nullptr;
    errno = 0;
    long long value = std::strtoll(stated, &end, 10);
    if (errno != 0 || end == stated || *end != '\0' || value < 0) {
      error = "MEMOPT_DEVICE_FREE_BYTES='" + std::string(stated) +
              "' is not a number of bytes";
      return false;
    }
    freeBytes = value;
  } else {
    MemoryInfo info = memoryInfo(ctx);
    if (info.totalBytes == 0)
      return true; // no device to ask (the host): the allocations say it
    freeBytes = int64_t(info.totalBytes - info.usedBytes);
  }
  int64_t ioBytes = 0;
  int64_t needed = requiredDeviceBytes(program, ioBytes);
  if (needed <= freeBytes)
    return true;
  error = "not enough device memory for program '" +
          std::string(program.name ? program.name : "?") + "': it needs " +
          formatBytes(needed) + " (" + std::to_string(needed) +
          " bytes: arena " + std::to_string(program.arenaBytes) +
          ", weights and state " + std::to_string(program.weightBytes) +
          ", inputs and outputs " + std::to_string(ioBytes) +
          ") and the device has " + formatBytes(freeBytes) + " (" +
          std::to_string(freeBytes) +
          " bytes) free: " + formatBytes(needed - freeBytes) + " (" +
          std::to_string(needed - freeBytes) +
          " bytes) missing. Free memory on the device, or compile for what "
          "it has: memopt-compile --fit " +
          std::to_string(freeBytes) + " --global-batch B (docs/fit.md)";
  return false;
}

} // namespace memopt::rt
