//===- DataMovement.cpp - host data movement ------------------------------===//
//
// transpose, concat, split, slice, gather, gatherElements, scatterND, pad and
// resize on the host, any dtype, bytes copied per element (the CUDA side:
// Kernels.cu's data movement and ScatterND). Moved out of HostBackend.cpp
// unchanged.
//
//===----------------------------------------------------------------------===//

#include "HostKernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace memopt::rt {

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

namespace {

/// Copies element `from` of src into element `to` of dst.
inline void copyElement(const TensorRef &src, int64_t from, uint8_t *dst,
                        int64_t to, size_t elem) {
  std::memcpy(dst + to * elem,
              static_cast<const uint8_t *>(src.data) + from * elem, elem);
}

void decompose(int64_t index, const TensorRef &t, int64_t *coords) {
  for (int d = t.rank - 1; d >= 0; --d) {
    coords[d] = index % t.shape[d];
    index /= t.shape[d];
  }
}

} // namespace

void transpose(Context &ctx, const char *node, const int *perm, TensorRef x,
               TensorRef y) {
  if (hasError(ctx) || !validateTranspose(ctx, node, perm, x, y))
    return;
  size_t elem = dtypeSize(x.dtype);
  int64_t xStrides[kMaxRank];
  contiguousStrides(x, xStrides);
  int64_t n = y.numElements();
  std::vector<uint8_t> out(size_t(n) * elem);
  // Rows of y's last dim: one index decomposition per row, then a fixed
  // source stride along it.
  int64_t inner = y.rank ? y.shape[y.rank - 1] : 1;
  int64_t rows = inner ? n / inner : 0;
  int64_t step = y.rank ? xStrides[perm[y.rank - 1]] : 0;
  parallelFor(ctx, 0, rows, grainFor(inner), [&](int64_t lo, int64_t hi) {
    int64_t coords[kMaxRank];
    for (int64_t r = lo; r < hi; ++r) {
      decompose(r * inner, y, coords);
      int64_t from = 0;
      for (int d = 0; d < y.rank; ++d)
        from += coords[d] * xStrides[perm[d]];
      for (int64_t j = 0; j < inner; ++j)
        copyElement(x, from + j * step, out.data(), r * inner + j, elem);
    }
  });
  if (!out.empty()) // an empty vector's data() may be null
    std::memcpy(y.data, out.data(), out.size());
}

void concat(Context &ctx, const char *node, int axis, const TensorRef *inputs,
            int numInputs, TensorRef y) {
  if (hasError(ctx) || !validateConcat(ctx, node, axis, inputs, numInputs, y))
    return;
  size_t elem = dtypeSize(y.dtype);
  AxisSplit s = splitAt(y, axis);
  std::vector<uint8_t> out(y.bytes());
  int64_t offset = 0;
  for (int k = 0; k < numInputs; ++k) {
    int64_t len = inputs[k].shape[axis];
    size_t block = size_t(len * s.inner) * elem;
    for (int64_t o = 0; block > 0 && o < s.outer; ++o)
      std::memcpy(out.data() + size_t((o * s.axis + offset) * s.inner) * elem,
                  static_cast<uint8_t *>(inputs[k].data) + o * block, block);
    offset += len;
  }
  if (!out.empty()) // an empty vector's data() may be null
    std::memcpy(y.data, out.data(), out.size());
}

void split(Context &ctx, const char *node, int axis, TensorRef x,
           const TensorRef *outputs, int numOutputs) {
  if (hasError(ctx) || !validateConcat(ctx, node, axis, outputs, numOutputs, x))
    return;
  size_t elem = dtypeSize(x.dtype);
  AxisSplit s = splitAt(x, axis);
  std::vector<uint8_t> in(static_cast<uint8_t *>(x.data),
                          static_cast<uint8_t *>(x.data) + x.bytes());
  int64_t offset = 0;
  for (int k = 0; k < numOutputs; ++k) {
    int64_t len = outputs[k].shape[axis];
    size_t block = size_t(len * s.inner) * elem;
    for (int64_t o = 0; block > 0 && o < s.outer; ++o)
      std::memcpy(static_cast<uint8_t *>(outputs[k].data) + o * block,
                  in.data() + size_t((o * s.axis + offset) * s.inner) * elem,
                  block);
    offset += len;
  }
}

void slice(Context &ctx, const char *node, const int64_t *starts,
           const int64_t *steps, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateSlice(ctx, node, starts, steps, x, y))
    return;
  size_t elem = dtypeSize(x.dtype);
  int64_t xStrides[kMaxRank];
  contiguousStrides(x, xStrides);
  int64_t n = y.numElements();
  std::vector<uint8_t> out(size_t(n) * elem);
  // Rows of y's last dim, as in transpose.
  int64_t inner = y.rank ? y.shape[y.rank - 1] : 1;
  int64_t rows = inner ? n / inner : 0;
  int64_t step = y.rank ? steps[y.rank - 1] * xStrides[y.rank - 1] : 0;
  parallelFor(ctx, 0, rows, grainFor(inner), [&](int64_t lo, int64_t hi) {
    int64_t coords[kMaxRank];
    for (int64_t r = lo; r < hi; ++r) {
      decompose(r * inner, y, coords);
      int64_t from = 0;
      for (int d = 0; d < y.rank; ++d)
        from += (starts[d] + coords[d] * steps[d]) * xStrides[d];
      for (int64_t j = 0; j < inner; ++j)
        copyElement(x, from + j * step, out.data(), r * inner + j, elem);
    }
  });
  if (!out.empty()) // an empty vector's data() may be null
    std::memcpy(y.data, out.data(), out.size());
}

void gather(Context &ctx, const char *node, int axis, TensorRef x,
            TensorRef indices, TensorRef y) {
  if (hasError(ctx) || !validateGather(ctx, node, axis, x, indices, y, false))
    return;
  size_t elem = dtypeSize(x.dtype);
  AxisSplit s = splitAt(x, axis);
  std::vector<int64_t> idx = toInt64(indices);
  std::vector<uint8_t> out(y.bytes());
  for (size_t j = 0; j < idx.size(); ++j) {
    int64_t index = idx[j] < 0 ? idx[j] + s.axis : idx[j];
    if (index < 0 || index >= s.axis) {
      failf(ctx, node, "index %lld out of range [-%lld, %lld)",
            (long long)idx[j], (long long)s.axis, (long long)s.axis);
      return;
    }
    idx[j] = index;
  }
  int64_t count = int64_t(idx.size());
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t j = 0; j < count; ++j)
      std::memcpy(out.data() + size_t((o * count + j) * s.inner) * elem,
                  static_cast<uint8_t *>(x.data) +
                      size_t((o * s.axis + idx[size_t(j)]) * s.inner) * elem,
                  size_t(s.inner) * elem);
  if (!out.empty()) // an empty vector's data() may be null
    std::memcpy(y.data, out.data(), out.size());
}

void gatherElements(Context &ctx, const char *node, int axis, TensorRef x,
                    TensorRef indices, TensorRef y) {
  if (hasError(ctx) || !validateGather(ctx, node, axis, x, indices, y, true))
    return;
  size_t elem = dtypeSize(x.dtype);
  int64_t xStrides[kMaxRank], coords[kMaxRank];
  contiguousStrides(x, xStrides);
  std::vector<int64_t> idx = toInt64(indices);
  int64_t n = y.numElements();
  std::vector<uint8_t> out(size_t(n) * elem);
  for (int64_t i = 0; i < n; ++i) {
    decompose(i, y, coords);
    int64_t index = idx[size_t(i)];
    if (index < 0)
      index += x.shape[axis];
    if (index < 0 || index >= x.shape[axis]) {
      failf(ctx, node, "index %lld out of range for axis size %lld",
            (long long)idx[size_t(i)], (long long)x.shape[axis]);
      return;
    }
    coords[axis] = index;
    int64_t from = 0;
    for (int d = 0; d < x.rank; ++d)
      from += coords[d] * xStrides[d];
    copyElement(x, from, out.data(), i, elem);
  }
  if (!out.empty()) // an empty vector's data() may be null
    std::memcpy(y.data, out.data(), out.size());
}

namespace {

/// Element `i` of an integer tensor (I64, I32, I8, U8) as int64_t.
int64_t loadInt(const void *data, DType dtype, int64_t i) {
  switch (dtype) {
  case DType::I64:
    return static_cast<const int64_t *>(data)[i];
  case DType::I32:
    return static_cast<const int32_t *>(data)[i];
  case DType::I8:
    return static_cast<const int8_t *>(data)[i];
  default:
    return static_cast<const uint8_t *>(data)[i];
  }
}

/// Stores `v` wrapped to the integer dtype (two's complement, as C++20).
void storeInt(void *data, DType dtype, int64_t i, int64_t v) {
  switch (dtype) {
  case DType::I64:
    static_cast<int64_t *>(data)[i] = v;
    break;
  case DType::I32:
    static_cast<int32_t *>(data)[i] = static_cast<int32_t>(v);
    break;
  case DType::I8:
    static_cast<int8_t *>(data)[i] = static_cast<int8_t>(v);
    break;
  default:
    static_cast<uint8_t *>(data)[i] = static_cast<uint8_t>(v);
    break;
  }
}

template <typename T> T combineScatter(ScatterReduction op, T a, T b) {
  switch (op) {
  case ScatterReduction::Add:
    if constexpr (std::is_integral_v<T>)
      return T(uint64_t(a) + uint64_t(b)); // wraps instead of overflowing
    else
      return a + b;
  case ScatterReduction::Mul:
    if constexpr (std::is_integral_v<T>)
      return T(uint64_t(a) * uint64_t(b));
    else
      return a * b;
  case ScatterReduction::Max:
    return std::max(a, b);
  case ScatterReduction::Min:
    return std::min(a, b);
  case ScatterReduction::None:
    break;
  }
  return b;
}

} // namespace

/// onnxruntime's ScatterND structure: copy data into the output unless they
/// are the same buffer, then visit the index tuples in order. Every index is
/// checked before anything is written.
void scatterND(Context &ctx, const char *node, ScatterReduction reduction,
               TensorRef data, TensorRef indices, TensorRef updates,
               TensorRef y) {
  ScatterGeometry g;
  if (hasError(ctx) ||
      !validateScatterND(ctx, node, reduction, data, indices, updates, y, g))
    return;
  std::vector<int64_t> idx = toInt64(indices);
  std::vector<int64_t> offsets(size_t(g.tuples), 0);
  for (int64_t t = 0; t < g.tuples; ++t) {
    for (int64_t d = 0; d < g.k; ++d) {
      int64_t raw = idx[size_t(t * g.k + d)];
      int64_t index = raw < 0 ? raw + g.dims[d] : raw;
      if (index < 0 || index >= g.dims[d]) {
        failf(ctx, node, "index %lld out of range [-%lld, %lld) on axis %lld",
              (long long)raw, (long long)g.dims[d], (long long)g.dims[d],
              (long long)d);
        return;
      }
      offsets[size_t(t)] += index * g.strides[d];
    }
  }
  if (y.data != data.data && y.bytes())
    std::memmove(y.data, data.data, y.bytes());
  size_t elem = dtypeSize(y.dtype);
  auto *out = static_cast<uint8_t *>(y.data);
  bool isInt = y.dtype == DType::I64 || y.dtype == DType::I32 ||
               y.dtype == DType::I8 || y.dtype == DType::U8;
  for (int64_t t = 0; t < g.tuples; ++t) {
    int64_t base = offsets[size_t(t)], from = t * g.sliceSize;
    if (reduction == ScatterReduction::None) {
      std::memcpy(out + size_t(base) * elem,
                  static_cast<const uint8_t *>(updates.data) +
                      size_t(from) * elem,
                  size_t(g.sliceSize) * elem);
      continue;
    }
    for (int64_t j = 0; j < g.sliceSize; ++j) {
      if (isInt)
        storeInt(y.data, y.dtype, base + j,
                 combineScatter(reduction, loadInt(y.data, y.dtype, base + j),
                                loadInt(updates.data, y.dtype, from + j)));
      else
        storeFromDouble(
            y.data, y.dtype, base + j,
            combineScatter(reduction, loadAsDouble(y.data, y.dtype, base + j),
                           loadAsDouble(updates.data, y.dtype, from + j)));
    }
  }
}

void pad(Context &ctx, const char *node, PadMode mode, const int64_t *padsBegin,
         const int64_t *padsEnd, double value, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validatePad(ctx, node, mode, padsBegin, padsEnd, x, y))
    return;
  size_t elem = dtypeSize(x.dtype);
  int64_t xStrides[kMaxRank], coords[kMaxRank];
  contiguousStrides(x, xStrides);
  int64_t n = y.numElements();
  std::vector<uint8_t> out(size_t(n) * elem);
  std::vector<uint8_t> constant(elem);
  storeFromDouble(constant.data(), x.dtype, 0, value);
  for (int64_t i = 0; i < n; ++i) {
    decompose(i, y, coords);
    int64_t from = 0;
    bool outside = false;
    for (int d = 0; d < y.rank; ++d) {
      int64_t c = coords[d] - padsBegin[d], size = x.shape[d];
      if (c < 0 || c >= size) {
        if (mode == PadMode::Constant) {
          outside = true;
          break;
        }
        if (mode == PadMode::Edge) {
          c = std::min(std::max<int64_t>(c, 0), size - 1);
        } else {
          while (c < 0 || c >= size)
            c = size == 1 ? 0 : c < 0 ? -c : 2 * (size - 1) - c;
        }
      }
      from += c * xStrides[d];
    }
    if (outside)
      std::memcpy(out.data() + i * elem, constant.data(), elem);
    else
      copyElement(x, from, out.data(), i, elem);
  }
  if (!out.empty()) // an empty vector's data() may be null
    std::memcpy(y.data, out.data(), out.size());
}

void resize(Context &ctx, const char *node, const ResizeParams &params,
            TensorRef x, TensorRef y) {
  float scales[kMaxRank];
  if (hasError(ctx) || !validateResize(ctx, node, params, x, y, scales))
    return;
  int64_t xStrides[kMaxRank], coords[kMaxRank];
  contiguousStrides(x, xStrides);
  int64_t n = y.numElements();
  size_t elem = dtypeSize(x.dtype);
  std::vector<uint8_t> out(size_t(n) * elem);
  std::vector<double> vx;
  if (params.mode == ResizeMode::Linear)
    vx = toDouble(x);
  for (int64_t i = 0; i < n; ++i) {
    decompose(i, y, coords);
    if (params.mode == ResizeMode::Nearest) {
      int64_t from = 0;
      for (int d = 0; d < y.rank; ++d) {
        int64_t c = coords[d];
        if (x.shape[d] != y.shape[d] || scales[d] != 1.0f) {
          float src = resizeSourceCoordinate(params.coordinateMode, float(c),
                                             scales[d], x.shape[d], y.shape[d]);
          float fl = std::floor(src);
          switch (params.nearestMode) {
          case NearestMode::RoundPreferFloor:
            c = int64_t(src - fl == 0.5f ? fl : std::round(src));
            break;
          case NearestMode::RoundPreferCeil:
            c = int64_t(src - fl == 0.5f ? fl + 1 : std::round(src));
            break;
          case NearestMode::Floor:
            c = int64_t(fl);
            break;
          case NearestMode::Ceil:
            c = int64_t(std::ceil(src));
            break;
          }
          c = std::min(std::max<int64_t>(c, 0), x.shape[d] - 1);
        }
        from += c * xStrides[d];
      }
      copyElement(x, from, out.data(), i, elem);
      continue;
    }
    // Linear: interpolate along every resized axis (corners 2^k).
    int resizedAxes[kMaxRank], k = 0;
    int64_t base = 0, low[kMaxRank], high[kMaxRank];
    double frac[kMaxRank];
    for (int d = 0; d < y.rank; ++d) {
      if (x.shape[d] == y.shape[d] && scales[d] == 1.0f) {
        base += coords[d] * xStrides[d];
        continue;
      }
      float src =
          resizeSourceCoordinate(params.coordinateMode, float(coords[d]),
                                 scales[d], x.shape[d], y.shape[d]);
      src = std::min(std::max(src, 0.0f), float(x.shape[d] - 1));
      low[k] = int64_t(std::floor(src));
      high[k] = std::min(low[k] + 1, x.shape[d] - 1);
      frac[k] = src - float(low[k]);
      resizedAxes[k++] = d;
    }
    double acc = 0;
    for (int corner = 0; corner < (1 << k); ++corner) {
      double weight = 1;
      int64_t from = base;
      for (int j = 0; j < k; ++j) {
        bool up = (corner >> j) & 1;
        weight *= up ? frac[j] : 1 - frac[j];
        from += (up ? high[j] : low[j]) * xStrides[resizedAxes[j]];
      }
      acc += weight * vx[size_t(from)];
    }
    storeFromDouble(out.data(), x.dtype, i, acc);
  }
  if (!out.empty()) // an empty vector's data() may be null
    std::memcpy(y.data, out.data(), out.size());
}

} // namespace memopt::rt
