//===- host_kernel_bench.cpp - host backend kernels on zoo shapes ---------===//
//
// Times the host (CPU) backend's heavy kernels on shapes taken from the model
// zoo (ResNet-50, ViT-B/16, BERT-base, GPT-2 small at one image / sequence),
// so thread scaling and loop changes can be measured per op family without
// compiling a model. Needs only the runtime libraries (no MLIR):
//
//   RT=build/lib/Runtime
//   g++ -std=c++17 -O2 bench/host_kernel_bench.cpp -Iinclude
//     $RT/libmemopt_runtime_host.a $RT/libmemopt_runtime_common.a
//     -lpthread -o /tmp/hkb            (one command line)
//   MEMOPT_HOST_THREADS=1 /tmp/hkb [REPEATS] [FILTER]
//
// Prints one line per case: the median time of REPEATS calls (default 5) and
// the multiply-add rate where the case has one. Inputs are deterministic.
//
//===----------------------------------------------------------------------===//

#include "memopt/Runtime/Runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace memopt::rt;

namespace {

/// An f32 tensor with values in [-1, 1) from a fixed linear congruential
/// sequence.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
  explicit Tensor(std::vector<int64_t> dims, uint32_t seed = 1)
      : shape(std::move(dims)) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    data.resize(size_t(n));
    uint32_t state = seed * 2654435761u + 1;
    for (float &v : data) {
      state = state * 1664525u + 1013904223u;
      v = float(state >> 8) / float(1 << 23) - 1.0f;
    }
  }
  TensorRef ref() {
    return makeTensor(data.data(), DType::F32, int(shape.size()), shape.data());
  }
};

struct Case {
  const char *name;
  double macs; ///< multiply-adds per call (0: not a product)
  std::function<void(Context &)> run;
};

} // namespace

int main(int argc, char **argv) {
  int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  std::string filter = argc > 2 ? argv[2] : "";
  Context *ctx = createContext();

  // Operands live for the whole run; the cases capture them.
  Tensor vitX({197, 768}), vitW({768, 3072}, 2), vitB({3072}, 3),
      vitY({197, 3072});
  Tensor bertX({512, 768}), qkvW({768, 2304}, 4), qkvB({2304}, 5),
      qkvY({512, 2304});
  Tensor headX({128, 768}), headW({8192, 768}, 6), headY({128, 8192});
  Tensor c3X({1, 64, 56, 56}), c3W({64, 64, 3, 3}, 7), c3Y({1, 64, 56, 56});
  Tensor c1X({1, 256, 56, 56}), c1W({64, 256, 1, 1}, 8), c1Y({1, 64, 56, 56});
  Tensor stemX({1, 3, 224, 224}), stemW({64, 3, 7, 7}, 9),
      stemY({1, 64, 112, 112});
  Tensor dwX({1, 240, 28, 28}), dwW({240, 1, 3, 3}, 10), dwY({1, 240, 28, 28});
  Tensor q({1, 12, 512, 64}, 11), k({1, 12, 512, 64}, 12),
      v({1, 12, 512, 64}, 13), attnY({1, 12, 512, 64});
  Tensor lnX({512, 768}, 14), lnS({768}, 15), lnB({768}, 16), lnY({512, 768});
  Tensor smX({12, 512, 512}, 17), smY({12, 512, 512});
  Tensor addA({512, 3072}, 18), addB({3072}, 19), addY({512, 3072});
  Tensor geluY({512, 3072});
  Tensor trY({1, 512, 12, 64});

  std::vector<Case> cases;
  cases.push_back({"matmul vit mlp [197,768]x[768,3072]+b gelu",
                   197.0 * 768 * 3072, [&](Context &c) {
                     MatmulParams p;
                     p.activation = Activation::Gelu;
                     TensorRef b = vitB.ref();
                     matmul(c, "mm", p, vitX.ref(), vitW.ref(), &b, vitY.ref());
                   }});
  cases.push_back({"matmul bert qkv [512,768]x[768,2304]+b", 512.0 * 768 * 2304,
                   [&](Context &c) {
                     TensorRef b = qkvB.ref();
                     matmul(c, "mm", MatmulParams(), bertX.ref(), qkvW.ref(),
                            &b, qkvY.ref());
                   }});
  cases.push_back({"matmul lm head [128,768]x[8192,768]^T", 128.0 * 768 * 8192,
                   [&](Context &c) {
                     MatmulParams p;
                     p.transB = true;
                     matmul(c, "mm", p, headX.ref(), headW.ref(), nullptr,
                            headY.ref());
                   }});
  cases.push_back(
      {"conv 3x3 [1,64,56,56]->64", 64.0 * 64 * 9 * 56 * 56, [&](Context &c) {
         ConvParams p;
         p.padsBegin[0] = p.padsBegin[1] = 1;
         p.padsEnd[0] = p.padsEnd[1] = 1;
         p.activation = Activation::Relu;
         conv(c, "conv", p, c3X.ref(), c3W.ref(), nullptr, c3Y.ref(), nullptr,
              0);
       }});
  cases.push_back(
      {"conv 1x1 [1,256,56,56]->64", 64.0 * 256 * 56 * 56, [&](Context &c) {
         conv(c, "conv", ConvParams(), c1X.ref(), c1W.ref(), nullptr, c1Y.ref(),
              nullptr, 0);
       }});
  cases.push_back({"conv 7x7/2 stem [1,3,224,224]->64",
                   64.0 * 3 * 49 * 112 * 112, [&](Context &c) {
                     ConvParams p;
                     p.strides[0] = p.strides[1] = 2;
                     p.padsBegin[0] = p.padsBegin[1] = 3;
                     p.padsEnd[0] = p.padsEnd[1] = 3;
                     conv(c, "conv", p, stemX.ref(), stemW.ref(), nullptr,
                          stemY.ref(), nullptr, 0);
                   }});
  cases.push_back({"conv depthwise 3x3 [1,240,28,28]", 240.0 * 9 * 28 * 28,
                   [&](Context &c) {
                     ConvParams p;
                     p.group = 240;
                     p.padsBegin[0] = p.padsBegin[1] = 1;
                     p.padsEnd[0] = p.padsEnd[1] = 1;
                     conv(c, "conv", p, dwX.ref(), dwW.ref(), nullptr,
                          dwY.ref(), nullptr, 0);
                   }});
  cases.push_back({"attention 12 heads 512x512x64", 2.0 * 12 * 512 * 512 * 64,
                   [&](Context &c) {
                     AttentionParams p;
                     p.scale = 0.125f;
                     attention(c, "attn", p, q.ref(), k.ref(), v.ref(), nullptr,
                               attnY.ref());
                   }});
  cases.push_back({"attention causal 12 heads 512x512x64",
                   2.0 * 12 * 512 * 512 * 64, [&](Context &c) {
                     AttentionParams p;
                     p.scale = 0.125f;
                     p.causal = true;
                     attention(c, "attn", p, q.ref(), k.ref(), v.ref(), nullptr,
                               attnY.ref());
                   }});
  cases.push_back({"layernorm [512,768]", 0, [&](Context &c) {
                     TensorRef b = lnB.ref();
                     layerNorm(c, "ln", 1, 1e-5f, lnX.ref(), lnS.ref(), &b,
                               lnY.ref());
                   }});
  cases.push_back({"softmax [12,512,512]", 0, [&](Context &c) {
                     softmax(c, "sm", 2, false, smX.ref(), smY.ref());
                   }});
  cases.push_back({"add row bias [512,3072]+[3072]", 0, [&](Context &c) {
                     binary(c, "add", BinaryOp::Add, addA.ref(), addB.ref(),
                            addY.ref());
                   }});
  cases.push_back({"gelu [512,3072]", 0, [&](Context &c) {
                     unary(c, "gelu", UnaryOp::Gelu, 0, 0, addA.ref(),
                           geluY.ref());
                   }});
  cases.push_back(
      {"transpose [1,12,512,64]->[1,512,12,64]", 0, [&](Context &c) {
         int perm[4] = {0, 2, 1, 3};
         transpose(c, "tr", perm, q.ref(), trY.ref());
       }});

  for (Case &c : cases) {
    if (!filter.empty() &&
        std::string(c.name).find(filter) == std::string::npos)
      continue;
    c.run(*ctx); // warm-up (pool start, page faults)
    std::vector<double> ms;
    for (int r = 0; r < repeats; ++r) {
      auto start = std::chrono::steady_clock::now();
      c.run(*ctx);
      std::chrono::duration<double, std::milli> elapsed =
          std::chrono::steady_clock::now() - start;
      ms.push_back(elapsed.count());
    }
    std::sort(ms.begin(), ms.end());
    double median = ms[ms.size() / 2];
    if (c.macs > 0)
      std::printf("%-44s %9.2f ms %7.2f GMAC/s\n", c.name, median,
                  c.macs / median / 1e6);
    else
      std::printf("%-44s %9.2f ms\n", c.name, median);
  }
  if (const char *error = contextError(*ctx)) {
    std::fprintf(stderr, "error: %s\n", error);
    return 1;
  }
  destroyContext(ctx);
  return 0;
}
