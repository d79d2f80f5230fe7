//===- Gemm.cpp - host matrix products ------------------------------------===//
//
// MatMul / Gemm on the host (the CUDA side calls cuBLASLt from
// Cuda/CudaLibraries.cpp): B packed once into column panels, A packed per
// work item, Gemm.h's 4 x 4 register tile over them (GotoBLAS / BLIS
// structure), double accumulation in the naive loop's order, so results are
// bit-identical to it whatever the thread count. Moved out of HostBackend.cpp
// unchanged.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "HostKernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace memopt::rt {

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

/// The host's loops need no scratch: the planned slice is only poisoned
/// around the next matmul (poisonWorkspace).
void setMatmulWorkspace(Context &ctx, void *workspace, size_t bytes) {
  ctx.matmulWorkspace = workspace;
  ctx.matmulWorkspaceBytes = bytes;
}

namespace {
void matmulImpl(Context &ctx, const char *node, const MatmulParams &params,
                TensorRef a, TensorRef b, const TensorRef *bias, TensorRef c);
} // namespace

void matmul(Context &ctx, const char *node, const MatmulParams &params,
            TensorRef a, TensorRef b, const TensorRef *bias, TensorRef c) {
  void *workspace = ctx.matmulWorkspace;
  size_t bytes = ctx.matmulWorkspaceBytes;
  ctx.matmulWorkspace = nullptr;
  ctx.matmulWorkspaceBytes = 0;
  poisonWorkspace(workspace, bytes);
  matmulImpl(ctx, node, params, a, b, bias, c);
  poisonWorkspace(workspace, bytes);
}

namespace {

void matmulImpl(Context &ctx, const char *node, const MatmulParams &params,
                TensorRef a, TensorRef b, const TensorRef *bias, TensorRef c) {
  MatmulGeometry g;
  if (hasError(ctx) || !validateMatmul(ctx, node, params, a, b, bias, c, g))
    return;
  // Every input is read (A and the bias converted, B packed) before any
  // output is written: a full-size bias may be C itself.
  std::vector<double> va = toDouble(ctx, a), vbias;
  BroadcastStrides sbias;
  if (bias) {
    vbias = toDouble(ctx, *bias);
    sbias = broadcastStrides(*bias, c);
  }
  BroadcastStrides sa = broadcastStrides(g.aBatch, g.cBatch),
                   sb = broadcastStrides(g.bBatch, g.cBatch);
  int64_t m = g.m, n = g.n, k = g.k;
  int64_t bMatrices = g.bBatch.numElements();
  int64_t panels = (n + kNR - 1) / kNR;
  // Packed B: matrix, panel, p, column within the panel (zero past n, so
  // the edge panel runs the same tile; its extra columns are dropped).
  std::vector<double> &packedB = ctx.packedB;
  size_t packedSize = size_t(bMatrices * panels * k * kNR);
  if (packedB.size() < packedSize) {
    packedB = std::vector<double>(); // no copy of the old contents
    packedB.resize(packedSize);
  }
  parallelFor(ctx, 0, bMatrices * panels, grainFor(k * kNR),
              [&](int64_t lo, int64_t hi) {
                for (int64_t item = lo; item < hi; ++item) {
                  int64_t matrix = item / panels, j0 = item % panels * kNR;
                  double *dst = packedB.data() + item * k * kNR;
                  const float *f32 = b.dtype == DType::F32
                                         ? static_cast<const float *>(b.data)
                                         : nullptr;
                  for (int64_t p = 0; p < k; ++p)
                    for (int64_t jj = 0; jj < kNR; ++jj) {
                      int64_t j = j0 + jj;
                      int64_t index = matrix * k * n +
                                      (params.transB ? j * k + p : p * n + j);
                      dst[p * kNR + jj] =
                          j >= n ? 0.0
                          : f32  ? double(f32[index])
                                 : loadAsDouble(b.data, b.dtype, index);
                    }
                }
              });

  // Work items: (batch, block of kMC rows, block of kNC columns).
  int64_t rowBlocks = (m + kMC - 1) / kMC, colBlocks = (n + kNC - 1) / kNC;
  int64_t items = g.batchCount * rowBlocks * colBlocks;
  parallelFor(
      ctx, 0, items, grainFor(kMC * kNC * k), [&](int64_t lo, int64_t hi) {
        // Per chunk: A panels [tile][p][kMR] for kKC values of p, and the
        // block's accumulators [kMC rows][kNC + kNR columns].
        std::vector<double> packedA(size_t(kMC * kKC));
        std::vector<double> acc(size_t(kMC * (kNC + kNR)));
        int64_t ldc = kNC + kNR;
        for (int64_t item = lo; item < hi; ++item) {
          int64_t batch = item / (rowBlocks * colBlocks);
          int64_t i0 = item / colBlocks % rowBlocks * kMC;
          int64_t j0 = item % colBlocks * kNC;
          int64_t rows = std::min(kMC, m - i0), cols = std::min(kNC, n - j0);
          int64_t tiles = (rows + kMR - 1) / kMR;
          int64_t colPanels = (cols + kNR - 1) / kNR;
          const double *pa =
              va.data() + broadcastOffset(batch, g.cBatch, sa) * m * k;
          const double *pb =
              packedB.data() +
              (broadcastOffset(batch, g.cBatch, sb) * panels + j0 / kNR) * k *
                  kNR;
          for (int64_t p0 = 0; p0 < k; p0 += kKC) {
            int64_t kc = std::min(kKC, k - p0);
            for (int64_t t = 0; t < tiles; ++t)
              for (int64_t p = 0; p < kc; ++p)
                for (int64_t r = 0; r < kMR; ++r) {
                  int64_t i = i0 + t * kMR + r;
                  double v = 0;
                  if (i < m)
                    v = params.transA ? pa[(p0 + p) * m + i]
                                      : pa[i * k + p0 + p];
                  packedA[size_t((t * kc + p) * kMR + r)] = v;
                }
            for (int64_t jp = 0; jp < colPanels; ++jp)
              for (int64_t t = 0; t < tiles; ++t)
                matmulTile(kc, &packedA[size_t(t * kc * kMR)],
                           pb + (jp * k + p0) * kNR,
                           &acc[size_t(t * kMR * ldc + jp * kNR)], ldc,
                           p0 == 0);
          }
          if (k == 0)
            std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t r = 0; r < rows; ++r) {
            int64_t start = (batch * m + i0 + r) * n + j0;
            // Along a row only the last coordinate moves: the bias offset is
            // linear in the column.
            int64_t biasStart = bias ? broadcastOffset(start, c, sbias) : 0;
            int64_t biasStride = bias ? sbias.stride[c.rank - 1] : 0;
            double *row = &acc[size_t(r * ldc)];
            for (int64_t jj = 0; jj < cols; ++jj) {
              double v = params.alpha * row[jj];
              if (bias)
                v += params.beta * vbias[size_t(biasStart + jj * biasStride)];
              row[jj] = applyActivation(params.activation, v);
            }
            storeRange(row, start, start + cols, c);
          }
        }
      });
}

} // namespace

} // namespace memopt::rt
