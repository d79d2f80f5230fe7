//===- Gemm.h - the host backend's 4 x 4 double register tile ---*- C++ -*-===//
//
// The blocking constants and the register tile that every host product runs
// through: matmul (Gemm.cpp), conv as an implicit GEMM (Convolution.cpp) and
// both products of attention (Attention.cpp). GotoBLAS / BLIS structure in
// double: packed panels of kMR rows of A and kNR columns of B, one kMR x kNR
// tile of accumulators in SSE2 registers. Moved out of HostBackend.cpp
// unchanged (inline, so each product still inlines the tile).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_RUNTIME_HOST_GEMM_H
#define MEMOPT_LIB_RUNTIME_HOST_GEMM_H

#include <cstdint>
#include <cstring>

namespace memopt::rt {

// Blocking of the matmul (GotoBLAS / BLIS structure, in double): B is packed
// once into column panels of kNR columns, [k][kNR] each; a work item packs
// kMC rows of A into kMR-row panels, kKC columns of k at a time, and runs a
// kMR x kNR register tile over them. Tile, panel and item boundaries depend
// only on the shapes.
constexpr int64_t kMR = 4, kNR = 4;
constexpr int64_t kMC = 64, kNC = 128, kKC = 256;

/// Two doubles: one SSE2 register, which every x86-64 has (the runtime is
/// built without -march flags).
typedef double Double2 __attribute__((vector_size(16)));

inline Double2 loadDouble2(const double *p) {
  Double2 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void storeDouble2(double *p, Double2 v) { std::memcpy(p, &v, sizeof v); }

/// c[kMR x kNR] (row stride ldc) = (first ? 0 : c) + sum over p of
/// a[p][r] * b[p][col], p in increasing order: for every element the same
/// sequence of double adds as the naive `acc += a * b` loop.
inline void matmulTile(int64_t kc, const double *a, const double *b, double *c,
                       int64_t ldc, bool first) {
  static_assert(kMR == 4 && kNR == 4, "the tile is written out for 4 x 4");
  Double2 c00 = {0, 0}, c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
          c30 = c00, c31 = c00;
  if (!first) {
    c00 = loadDouble2(c), c01 = loadDouble2(c + 2);
    c10 = loadDouble2(c + ldc), c11 = loadDouble2(c + ldc + 2);
    c20 = loadDouble2(c + 2 * ldc), c21 = loadDouble2(c + 2 * ldc + 2);
    c30 = loadDouble2(c + 3 * ldc), c31 = loadDouble2(c + 3 * ldc + 2);
  }
  for (int64_t p = 0; p < kc; ++p, a += kMR, b += kNR) {
    Double2 b0 = loadDouble2(b), b1 = loadDouble2(b + 2);
    Double2 a0 = {a[0], a[0]}, a1 = {a[1], a[1]}, a2 = {a[2], a[2]},
            a3 = {a[3], a[3]};
    c00 += a0 * b0, c01 += a0 * b1;
    c10 += a1 * b0, c11 += a1 * b1;
    c20 += a2 * b0, c21 += a2 * b1;
    c30 += a3 * b0, c31 += a3 * b1;
  }
  storeDouble2(c, c00), storeDouble2(c + 2, c01);
  storeDouble2(c + ldc, c10), storeDouble2(c + ldc + 2, c11);
  storeDouble2(c + 2 * ldc, c20), storeDouble2(c + 2 * ldc + 2, c21);
  storeDouble2(c + 3 * ldc, c30), storeDouble2(c + 3 * ldc + 2, c31);
}

} // namespace memopt::rt

#endif // MEMOPT_LIB_RUNTIME_HOST_GEMM_H
