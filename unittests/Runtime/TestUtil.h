//===- TestUtil.h - helpers for the runtime unit tests -----------*- C++
//-*-===//

#ifndef MEMOPT_UNITTESTS_RUNTIME_TESTUTIL_H
#define MEMOPT_UNITTESTS_RUNTIME_TESTUTIL_H

#include "memopt/Runtime/Runtime.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace memopt::rt::test {

/// Independent f16 / bf16 decoding for the tests (ldexp-based, unlike the
/// runtime's bit manipulation).
inline float decodeHalf(uint16_t h) {
  int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (exponent == 0)
    return sign * std::ldexp(float(mantissa), -24);
  if (exponent == 31)
    return mantissa ? NAN : sign * INFINITY;
  return sign * std::ldexp(float(mantissa + 1024), exponent - 25);
}
inline float decodeBf16(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// A host tensor with float "truth" values and storage in its dtype.
struct Buffer {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> storage;

  Buffer() = default;
  Buffer(DType dtype, std::vector<int64_t> shape) : dtype(dtype), shape(shape) {
    storage.assign(size_t(count()) * dtypeSize(dtype) + 1, 0);
  }
  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  TensorRef ref() {
    return makeTensor(storage.data(), dtype, int(shape.size()), shape.data());
  }
  /// Element i as float (decoded independently of the runtime).
  double at(int64_t i) const {
    const uint8_t *p = storage.data() + size_t(i) * dtypeSize(dtype);
    switch (dtype) {
    case DType::F32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::F16:
    case DType::BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return dtype == DType::F16 ? decodeHalf(h) : decodeBf16(h);
    }
    case DType::F64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case DType::I64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return double(v);
    }
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::I8:
      return int8_t(*p);
    case DType::U8:
    case DType::Bool:
      return *p;
    }
    return 0;
  }
  std::vector<double> values() const {
    std::vector<double> v;
    for (int64_t i = 0; i < count(); ++i)
      v.push_back(at(i));
    return v;
  }
};

/// Fills a float buffer with values in +-[0.1, 2) (never zero), exactly
/// representable in the buffer's dtype: the stored value is what `at`
/// returns, so references compute from the same numbers.
inline void fillRandom(Context &ctx, Buffer &b, unsigned seed, double low = 0.1,
                       double high = 2.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> magnitude(low, high);
  std::bernoulli_distribution negative(0.5);
  Buffer staging(DType::F64, b.shape);
  double *values = reinterpret_cast<double *>(staging.storage.data());
  for (int64_t i = 0; i < b.count(); ++i)
    values[i] = negative(rng) ? -magnitude(rng) : magnitude(rng);
  cast(ctx, "fillRandom", staging.ref(), b.ref());
}

inline void fillInts(Buffer &b, std::vector<int64_t> values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (b.dtype == DType::I64)
      std::memcpy(b.storage.data() + i * 8, &values[i], 8);
    else if (b.dtype == DType::I32) {
      int32_t v = int32_t(values[i]);
      std::memcpy(b.storage.data() + i * 4, &v, 4);
    } else {
      b.storage[i] = uint8_t(values[i]);
    }
  }
}

/// Relative-or-absolute tolerance per dtype.
inline double tolerance(DType dtype) {
  return dtype == DType::F32 ? 1e-4 : dtype == DType::F16 ? 4e-3 : 2e-2;
}

} // namespace memopt::rt::test

#endif // MEMOPT_UNITTESTS_RUNTIME_TESTUTIL_H
