//===- Common.cpp - backend-independent runtime helpers -------------------===//
//
// dtype tables, argument validation shared by both backends, numpy
// broadcasting and the conv workspace bound.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"
#include "memopt/Runtime/Communicator.h"
#include "memopt/Runtime/Npy.h"
#include "memopt/Runtime/Program.h"
#include "memopt/Runtime/Workspace.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

namespace memopt::rt {

size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    return 1;
  }
  return 0;
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::F64:
    return "f64";
  case DType::I64:
    return "i64";
  case DType::I32:
    return "i32";
  case DType::I8:
    return "i8";
  case DType::U8:
    return "u8";
  case DType::Bool:
    return "bool";
  }
  return "?";
}

bool isFloatType(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}

int communicatorRank(Context &ctx) {
  Communicator *comm = contextCommunicator(ctx);
  return comm ? comm->rank() : 0;
}

int communicatorSize(Context &ctx) {
  Communicator *comm = contextCommunicator(ctx);
  return comm ? comm->size() : 1;
}

Communicator *collectiveCommunicator(Context &ctx, const char *node,
                                     int64_t ranks, bool &ok) {
  Communicator *comm = contextCommunicator(ctx);
  int size = comm ? comm->size() : 1;
  ok = ranks < 1 || size == ranks;
  if (!ok)
    failf(ctx, node,
          "the program was compiled for %lld data-parallel ranks; this run "
          "has %d",
          (long long)ranks, size);
  return comm;
}

void failCollective(Context &ctx, const char *node, const char *call,
                    Communicator &comm) {
  failf(ctx, node, "%s failed: %s", call, comm.error().c_str());
}

int64_t TensorRef::numElements() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i)
    n *= shape[i];
  return n;
}

TensorRef makeTensor(void *data, DType dtype, int rank, const int64_t *shape) {
  TensorRef t;
  t.data = data;
  t.dtype = dtype;
  t.rank = rank;
  for (int i = 0; i < rank && i < kMaxRank; ++i)
    t.shape[i] = shape[i];
  return t;
}

int64_t numElements(const TensorInfo &info) {
  int64_t n = 1;
  for (int i = 0; i < info.rank; ++i)
    n *= info.shape[i];
  return n;
}

int32_t lowParameterOf(const ProgramInfo &program, int h) {
  if (!program.hostWeights || !program.masterOf || h < 0 ||
      h >= program.numHostWeights)
    return -1;
  int32_t param = program.masterOf[h];
  if (param < 0 || param >= program.numWeights ||
      program.hostWeights[h].dtype != DType::F32 ||
      program.weights[param].dtype == DType::F32)
    return -1;
  return param;
}

int64_t lowMasterBytes(const ProgramInfo &program) {
  int64_t bytes = 0;
  for (int h = 0; h < program.numHostWeights; ++h)
    if (lowParameterOf(program, h) >= 0)
      bytes += numElements(program.hostWeights[h]) *
               int64_t(dtypeSize(program.hostWeights[h].dtype));
  return bytes;
}

void failf(Context &ctx, const char *nodeName, const char *format, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  contextFail(ctx, nodeName, buffer);
}

bool hasError(Context &ctx) { return contextError(ctx) != nullptr; }

bool engineFromEnvironment(int32_t option, const char *environment,
                           int32_t &engine) {
  if (!environment || !*environment) {
    engine = option;
    return true;
  }
  const char *names[3] = {"measured", "cudnn", "memopt"};
  for (int32_t i = 0; i < 3; ++i)
    if (!std::strcmp(environment, names[i])) {
      engine = i;
      return true;
    }
  return false;
}

std::string shapeString(const TensorRef &t) {
  std::string s = "[";
  for (int i = 0; i < t.rank; ++i) {
    if (i)
      s += ", ";
    s += std::to_string(t.shape[i]);
  }
  return s + "]";
}

bool checkTensor(Context &ctx, const char *node, const TensorRef &t,
                 const char *what) {
  if (t.rank < 0 || t.rank > kMaxRank) {
    failf(ctx, node, "%s has rank %d (supported: 0..%d)", what, t.rank,
          kMaxRank);
    return false;
  }
  if (dtypeSize(t.dtype) == 0) {
    failf(ctx, node, "%s has an invalid dtype (%d)", what, int(t.dtype));
    return false;
  }
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] < 0) {
      failf(ctx, node, "%s has a negative dimension in %s", what,
            shapeString(t).c_str());
      return false;
    }
  }
  if (!t.data && t.numElements() > 0) {
    failf(ctx, node, "%s has no data pointer", what);
    return false;
  }
  return true;
}

bool checkFloat(Context &ctx, const char *node, const TensorRef &t,
                const char *what) {
  if (!checkTensor(ctx, node, t, what))
    return false;
  if (!isFloatType(t.dtype)) {
    failf(ctx, node, "%s has dtype %s; expected f32, f16 or bf16", what,
          dtypeName(t.dtype));
    return false;
  }
  return true;
}

bool checkSameDType(Context &ctx, const char *node, const TensorRef &a,
                    const TensorRef &b, const char *what) {
  if (a.dtype != b.dtype) {
    failf(ctx, node, "%s: dtypes differ (%s vs %s)", what, dtypeName(a.dtype),
          dtypeName(b.dtype));
    return false;
  }
  return true;
}

bool sameShape(const TensorRef &a, const TensorRef &b) {
  if (a.rank != b.rank)
    return false;
  for (int i = 0; i < a.rank; ++i)
    if (a.shape[i] != b.shape[i])
      return false;
  return true;
}

bool checkSameShape(Context &ctx, const char *node, const TensorRef &a,
                    const TensorRef &b, const char *what) {
  if (!sameShape(a, b)) {
    failf(ctx, node, "%s: shapes differ (%s vs %s)", what,
          shapeString(a).c_str(), shapeString(b).c_str());
    return false;
  }
  return true;
}

bool checkSameCount(Context &ctx, const char *node, const TensorRef &a,
                    const TensorRef &b, const char *what) {
  if (a.numElements() != b.numElements()) {
    failf(ctx, node, "%s: element counts differ (%s vs %s)", what,
          shapeString(a).c_str(), shapeString(b).c_str());
    return false;
  }
  return true;
}

bool checkBroadcast(Context &ctx, const char *node, const TensorRef *inputs,
                    int numInputs, const TensorRef &out, bool exact) {
  for (int k = 0; k < numInputs; ++k) {
    const TensorRef &in = inputs[k];
    bool ok = in.rank <= out.rank;
    for (int i = 0; ok && i < in.rank; ++i) {
      int64_t d = in.shape[in.rank - 1 - i];
      int64_t o = out.shape[out.rank - 1 - i];
      ok = d == o || d == 1;
    }
    if (!ok) {
      failf(ctx, node, "input %d of shape %s does not broadcast to %s", k,
            shapeString(in).c_str(), shapeString(out).c_str());
      return false;
    }
  }
  // Every output dim must come from some input (no silent expansion).
  for (int i = 0; exact && i < out.rank; ++i) {
    bool found = false;
    for (int k = 0; k < numInputs && !found; ++k) {
      int j = inputs[k].rank - out.rank + i;
      found = j >= 0 && inputs[k].shape[j] == out.shape[i];
    }
    if (!found && out.shape[i] != 1) {
      failf(ctx, node, "output shape %s is not the broadcast of the inputs",
            shapeString(out).c_str());
      return false;
    }
  }
  return true;
}

bool checkAxis(Context &ctx, const char *node, int axis, int rank) {
  if (axis < 0 || axis >= rank) {
    failf(ctx, node, "axis %d out of range for rank %d", axis, rank);
    return false;
  }
  return true;
}

void contiguousStrides(const TensorRef &t, int64_t *strides) {
  int64_t s = 1;
  for (int i = t.rank - 1; i >= 0; --i) {
    strides[i] = s;
    s *= t.shape[i];
  }
}

BroadcastStrides broadcastStrides(const TensorRef &in, const TensorRef &out) {
  BroadcastStrides result;
  int64_t inStrides[kMaxRank];
  contiguousStrides(in, inStrides);
  for (int i = 0; i < out.rank; ++i) {
    int j = in.rank - out.rank + i;
    result.stride[i] = (j < 0 || in.shape[j] == 1) ? 0 : inStrides[j];
  }
  for (int i = out.rank; i < kMaxRank; ++i)
    result.stride[i] = 0;
  return result;
}

size_t convWorkspaceBound(const ConvParams &params, const TensorRef &x,
                          const TensorRef &w, const TensorRef &y) {
  (void)params;
  size_t largest = std::max({x.bytes(), y.bytes(), w.bytes()});
  return size_t(workspace::convSuiteBytes(int64_t(largest)));
}

double loadAsDouble(const void *data, DType dtype, int64_t i) {
  switch (dtype) {
  case DType::F32:
    return static_cast<const float *>(data)[i];
  case DType::F16:
    return halfToFloat(static_cast<const uint16_t *>(data)[i]);
  case DType::BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(data)[i]);
  case DType::F64:
    return static_cast<const double *>(data)[i];
  case DType::I64:
    return double(static_cast<const int64_t *>(data)[i]);
  case DType::I32:
    return static_cast<const int32_t *>(data)[i];
  case DType::I8:
    return static_cast<const int8_t *>(data)[i];
  case DType::U8:
  case DType::Bool:
    return static_cast<const uint8_t *>(data)[i];
  }
  return 0;
}

void storeFromDouble(void *data, DType dtype, int64_t i, double v) {
  switch (dtype) {
  case DType::F32:
    static_cast<float *>(data)[i] = float(v);
    return;
  case DType::F16:
    static_cast<uint16_t *>(data)[i] = floatToHalf(float(v));
    return;
  case DType::BF16:
    static_cast<uint16_t *>(data)[i] = floatToBf16(float(v));
    return;
  case DType::F64:
    static_cast<double *>(data)[i] = v;
    return;
  case DType::I64:
    static_cast<int64_t *>(data)[i] = std::isfinite(v) ? int64_t(v) : 0;
    return;
  case DType::I32:
    static_cast<int32_t *>(data)[i] = std::isfinite(v) ? int32_t(v) : 0;
    return;
  case DType::I8:
    static_cast<int8_t *>(data)[i] = std::isfinite(v) ? int8_t(v) : 0;
    return;
  case DType::U8:
    static_cast<uint8_t *>(data)[i] = std::isfinite(v) ? uint8_t(v) : 0;
    return;
  case DType::Bool:
    static_cast<uint8_t *>(data)[i] = v != 0 ? 1 : 0;
    return;
  }
}

//===----------------------------------------------------------------------===//
// Per-op instrumentation
//===----------------------------------------------------------------------===//

void OpTimes::add(int index, const char *node, const char *kind, double ms) {
  if (index < 0)
    return;
  if (size_t(index) >= ops.size())
    ops.resize(size_t(index) + 1);
  Entry &entry = ops[size_t(index)];
  if (entry.calls == 0) {
    entry.node = node ? node : "";
    entry.kind = kind ? kind : "";
  }
  entry.ms += ms;
  entry.calls += 1;
}

void printOpTimes(const OpTimes &times, FILE *out, int top,
                  const char *backend) {
  double total = 0;
  std::map<std::string, std::pair<double, int64_t>> byKind;
  std::vector<const OpTimes::Entry *> order;
  for (const OpTimes::Entry &entry : times.ops) {
    if (!entry.calls)
      continue;
    total += entry.ms;
    auto &kind = byKind[entry.kind];
    kind.first += entry.ms;
    kind.second += 1;
    order.push_back(&entry);
  }
  double runs = double(std::max<int64_t>(1, times.runs));
  std::fprintf(out,
               "profile: backend=%s runs=%lld ops=%zu total_ms_per_run=%.3f\n",
               backend, (long long)times.runs, order.size(), total / runs);
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> kinds(
      byKind.begin(), byKind.end());
  std::sort(kinds.begin(), kinds.end(), [](const auto &a, const auto &b) {
    return a.second.first > b.second.first;
  });
  for (const auto &kind : kinds)
    std::fprintf(out, "profile-kind: %-36s ops=%-5lld ms=%9.3f %5.1f%%\n",
                 kind.first.c_str(), (long long)kind.second.second,
                 kind.second.first / runs,
                 total > 0 ? 100.0 * kind.second.first / total : 0.0);
  std::sort(order.begin(), order.end(),
            [](const auto *a, const auto *b) { return a->ms > b->ms; });
  for (int i = 0; i < top && i < int(order.size()); ++i)
    std::fprintf(out, "profile-op: %-30s ms=%8.3f %5.1f%%  %s\n",
                 order[size_t(i)]->kind.c_str(), order[size_t(i)]->ms / runs,
                 total > 0 ? 100.0 * order[size_t(i)]->ms / total : 0.0,
                 order[size_t(i)]->node.c_str());
}

void writeOpTimes(const OpTimes &times, FILE *out) {
  double runs = double(std::max<int64_t>(1, times.runs));
  std::set<std::string> written;
  std::fprintf(out, "{");
  auto write = [&](const std::string &key, double ms) {
    std::string name;
    for (char c : key) {
      if (c == '"' || c == '\\')
        name += '\\';
      if (static_cast<unsigned char>(c) >= 0x20)
        name += c;
    }
    std::fprintf(out, "%s\n  \"%s\": %.9g", written.size() > 1 ? "," : "",
                 name.c_str(), ms / runs / 1000.0);
  };
  // The name's first op (what older readers take for every op of the
  // name), then the first op of each kind under the name as "NAME @ KIND"
  // (memopt::kernelTimeKey): a training step gives one name to a forward
  // op and its gradients and transposes.
  for (const OpTimes::Entry &entry : times.ops) {
    if (!entry.calls || entry.node.empty())
      continue;
    if (written.insert(entry.node).second)
      write(entry.node, entry.ms);
    if (!entry.kind.empty()) {
      std::string key = entry.node + " @ " + entry.kind;
      if (written.insert(key).second)
        write(key, entry.ms);
    }
  }
  for (const auto &[name, value] : times.values)
    if (written.insert(name).second)
      std::fprintf(out, "%s\n  \"%s\": %.9g", written.size() > 1 ? "," : "",
                   name.c_str(), value);
  std::fprintf(out, "\n}\n");
}

void dumpOpResults(Context &ctx, const char *directory, int index,
                   const char *node, const char *kind, const TensorRef *results,
                   int numResults) {
  std::string base(directory);
  FILE *list = std::fopen((base + "/ops.txt").c_str(), index == 0 ? "w" : "a");
  for (int k = 0; k < numResults; ++k) {
    const TensorRef &t = results[k];
    NpyArray array;
    array.dtype = t.dtype;
    array.shape.assign(t.shape, t.shape + t.rank);
    array.data.resize(t.bytes());
    if (t.bytes())
      copyToHost(ctx, array.data.data(), t.data, t.bytes());
    synchronize(ctx);
    char name[64];
    std::snprintf(name, sizeof name, "%05d_%d.npy", index, k);
    std::string error;
    if (!writeNpy(base + "/" + name, array, error)) {
      contextFail(ctx, node, error.c_str());
      break;
    }
    if (list)
      std::fprintf(list, "%s %s %s %s\n", name, kind, node,
                   shapeString(t).c_str());
  }
  if (list)
    std::fclose(list);
}

} // namespace memopt::rt
