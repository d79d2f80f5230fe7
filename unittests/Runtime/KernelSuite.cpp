//===- KernelSuite.cpp - every kernel family on fixed inputs --------------===//
//
// Built twice, once per backend (memopt-kernel-suite-host / -cuda). Each case
// builds deterministic never-zero inputs in device memory through the runtime
// API, runs one op, and reads the result back.
//
//   memopt-kernel-suite-cuda --out DIR      writes DIR/<case>.npy (float64)
//   memopt-kernel-suite-host --compare DIR  reruns on the host and compares
//   memopt-kernel-suite-cuda --perf [FILTER] times the large cases
//
// so the CUDA backend is checked against the host reference without linking
// both backends into one program (they define the same symbols). Sizes are
// odd and large enough to hit the vectorized paths, their scalar tails,
// multi-block grids and the warp / block row kernels.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"
#include "memopt/Runtime/Npy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace memopt::rt;

namespace {

struct Suite {
  Context *ctx = nullptr;
  /// The case's name: the node name of its attention calls, so that the
  /// engine report (attentionEngineReport) lists the engine of each case.
  std::string name;
  /// A context of the same backend whose attention always runs memopt's
  /// kernels (ContextOptions::cudnnAttention off), for cases that check
  /// what those kernels do and cuDNN's engine does not (docs/attention.md).
  Context *kernels = nullptr;
  std::vector<void *> allocations;
  unsigned seed = 1;

  ~Suite() {
    for (void *p : allocations)
      deviceFree(*ctx, p);
  }

  TensorRef empty(DType dtype, std::vector<int64_t> shape) {
    TensorRef t = makeTensor(nullptr, dtype, int(shape.size()), shape.data());
    t.data = deviceAlloc(*ctx, t.bytes() + 64, "suite");
    allocations.push_back(t.data);
    return t;
  }
  TensorRef upload(DType dtype, std::vector<int64_t> shape,
                   const std::vector<double> &values) {
    TensorRef t = empty(dtype, shape);
    std::vector<uint8_t> bytes(t.bytes() + 8);
    for (size_t i = 0; i < values.size(); ++i)
      storeFromDouble(bytes.data(), dtype, int64_t(i), values[i]);
    copyToDevice(*ctx, t.data, bytes.data(), t.bytes());
    return t;
  }
  /// Values in +-[low, high), never zero.
  TensorRef random(DType dtype, std::vector<int64_t> shape, double low = 0.1,
                   double high = 2.0, bool positive = false) {
    std::mt19937 rng(seed++);
    std::uniform_real_distribution<double> magnitude(low, high);
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    std::vector<double> values(static_cast<size_t>(n));
    for (double &v : values)
      v = (positive || (rng() & 1)) ? magnitude(rng) : -magnitude(rng);
    return upload(dtype, shape, values);
  }
  TensorRef ints(DType dtype, std::vector<int64_t> shape,
                 const std::vector<double> &values) {
    return upload(dtype, shape, values);
  }
  std::vector<double> read(const TensorRef &t) {
    std::vector<uint8_t> bytes(t.bytes() + 8);
    copyToHost(*ctx, bytes.data(), t.data, t.bytes());
    synchronize(*ctx);
    std::vector<double> values(static_cast<size_t>(t.numElements()));
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = loadAsDouble(bytes.data(), t.dtype, int64_t(i));
    return values;
  }
};

struct Case {
  std::string name;
  double tolerance;
  std::function<std::vector<TensorRef>(Suite &)> run;
};

const char *tag(DType t) { return dtypeName(t); }

double tol(DType t, double f32 = 1e-4) {
  return t == DType::F32 ? f32 : t == DType::F16 ? 1e-2 : 5e-2;
}

/// Broadcast batch of Q, K, V, then [S, Dv].
std::vector<int64_t> attentionShape(const std::vector<int64_t> &q,
                                    const std::vector<int64_t> &k,
                                    const std::vector<int64_t> &v) {
  size_t rank = std::max({q.size(), k.size(), v.size()});
  std::vector<int64_t> out(rank, 1);
  for (const std::vector<int64_t> *t : {&q, &k, &v})
    for (size_t i = 0; i + 2 < t->size(); ++i) {
      size_t o = rank - t->size() + i;
      out[o] = std::max(out[o], (*t)[i]);
    }
  out[rank - 2] = q[q.size() - 2];
  out[rank - 1] = v.back();
  return out;
}

/// `values` of shape `from` summed over the axes along which `to` (aligned
/// right, numpy-style) broadcasts: the gradient of a broadcast operand, which
/// engines may split differently between its copies (cuDNN puts a K / V head
/// group's sum in the group's first copy; the caller sums them anyway).
std::vector<double> sumToShape(const std::vector<double> &values,
                               const std::vector<int64_t> &from,
                               const std::vector<int64_t> &to) {
  size_t rank = from.size(), offset = rank - to.size();
  int64_t total = 1;
  for (int64_t n : to)
    total *= n;
  std::vector<double> sums(size_t(total), 0.0);
  std::vector<int64_t> index(rank, 0);
  for (double value : values) {
    int64_t flat = 0;
    for (size_t d = offset; d < rank; ++d)
      flat = flat * to[d - offset] + (to[d - offset] == 1 ? 0 : index[d]);
    sums[size_t(flat)] += value;
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < from[d])
        break;
      index[d] = 0;
    }
  }
  return sums;
}

std::vector<Case> buildCases() {
  std::vector<Case> cases;
  const DType floats[3] = {DType::F32, DType::F16, DType::BF16};
  for (DType dt : floats) {
    struct U {
      const char *name;
      UnaryOp op;
      float alpha, beta;
    };
    for (U u :
         {U{"relu", UnaryOp::Relu, 0, 0}, U{"sigmoid", UnaryOp::Sigmoid, 0, 0},
          U{"gelu", UnaryOp::Gelu, 0, 0}, U{"silu", UnaryOp::Silu, 0, 0},
          U{"tanh", UnaryOp::Tanh, 0, 0}, U{"exp", UnaryOp::Exp, 0, 0},
          U{"clip", UnaryOp::Clip, -0.5f, 0.5f},
          U{"softplus", UnaryOp::Softplus, 0, 0},
          U{"leakyrelu", UnaryOp::LeakyRelu, 0.01f, 0}})
      cases.push_back({std::string("unary_") + u.name + "_" + tag(dt), tol(dt),
                       [=](Suite &s) {
                         TensorRef x = s.random(dt, {10007});
                         TensorRef y = s.empty(dt, {10007});
                         unary(*s.ctx, "unary", u.op, u.alpha, u.beta, x, y);
                         return std::vector<TensorRef>{y};
                       }});
    cases.push_back(
        {std::string("unary_misaligned_") + tag(dt), tol(dt), [=](Suite &s) {
           TensorRef x = s.random(dt, {1001});
           TensorRef y = s.empty(dt, {1001});
           x.data = static_cast<uint8_t *>(x.data) + dtypeSize(dt);
           y.data = static_cast<uint8_t *>(y.data) + dtypeSize(dt);
           x.shape[0] = y.shape[0] = 1000;
           unary(*s.ctx, "unary", UnaryOp::Sigmoid, 0, 0, x, y);
           return std::vector<TensorRef>{y};
         }});
    struct B {
      const char *name;
      std::vector<int64_t> a, b, c;
      BinaryOp op;
    };
    for (B b :
         {B{"same_add", {333, 65}, {333, 65}, {333, 65}, BinaryOp::Add},
          B{"scalar_mul", {1}, {4099}, {4099}, BinaryOp::Mul},
          B{"rowbias_add", {257, 129}, {129}, {257, 129}, BinaryOp::Add},
          B{"rowbias_vec_mul",
            {3, 64, 256},
            {1, 256},
            {3, 64, 256},
            BinaryOp::Mul},
          B{"lhs_suffix_sub", {40}, {2, 7, 40}, {2, 7, 40}, BinaryOp::Sub},
          B{"outer_div", {31, 1}, {1, 47}, {31, 47}, BinaryOp::Div},
          B{"bcast_max", {2, 1, 9}, {5, 1}, {2, 5, 9}, BinaryOp::Max},
          B{"same_sub", {4097}, {4097}, {4097}, BinaryOp::Sub}})
      cases.push_back({std::string("binary_") + b.name + "_" + tag(dt), tol(dt),
                       [=](Suite &s) {
                         TensorRef x = s.random(dt, b.a), y = s.random(dt, b.b);
                         TensorRef z = s.empty(dt, b.c);
                         binary(*s.ctx, "binary", b.op, x, y, z);
                         return std::vector<TensorRef>{z};
                       }});
    // Fused elementwise programs: relu(x * scale + shift) * x plus a
    // hard-sigmoid / clip / leaky-relu tail, with inputs that are full,
    // per-channel, scalar, or a general broadcast; sizes with a scalar tail
    // after the vectorized part; one in place.
    struct F {
      const char *name;
      std::vector<int64_t> x, scale, shift;
      bool inPlace;
    };
    for (F f : {F{"channels", {4, 16, 7, 7}, {16, 1, 1}, {1}, false},
                F{"rowvec_odd", {5, 1001}, {1001}, {5, 1}, false},
                F{"general_bcast", {3, 5, 9}, {3, 1, 9}, {1, 5, 1}, false},
                F{"in_place", {2, 64, 33}, {33}, {1}, true}})
      cases.push_back(
          {std::string("fused_elementwise_") + f.name + "_" + tag(dt), tol(dt),
           [=](Suite &s) {
             TensorRef x = s.random(dt, f.x), scale = s.random(dt, f.scale),
                       shift = s.random(dt, f.shift);
             TensorRef y = f.inPlace ? x : s.empty(dt, f.x);
             const ElementwiseStep steps[] = {
                 {ElementwiseStep::kBinary, int32_t(BinaryOp::Mul), 0, 1, 0, 0},
                 {ElementwiseStep::kBinary, int32_t(BinaryOp::Add), 3, 2, 0, 0},
                 {ElementwiseStep::kUnary, int32_t(UnaryOp::Relu), 4, -1, 0, 0},
                 {ElementwiseStep::kBinary, int32_t(BinaryOp::Mul), 5, 0, 0, 0},
                 {ElementwiseStep::kUnary, int32_t(UnaryOp::HardSigmoid), 6, -1,
                  0.2f, 0.5f},
                 {ElementwiseStep::kUnary, int32_t(UnaryOp::Clip), 7, -1, 0.1f,
                  0.9f},
                 {ElementwiseStep::kUnary, int32_t(UnaryOp::LeakyRelu), 8, -1,
                  0.01f, 0},
                 {ElementwiseStep::kBinary, int32_t(BinaryOp::Sub), 9, 1, 0,
                  0}};
             const TensorRef inputs[] = {x, scale, shift};
             fusedElementwise(*s.ctx, "fused", steps, 8, inputs, 3, y);
             return std::vector<TensorRef>{y};
           }});
  }
  cases.push_back(
      {"binary_mod_i64", 0, [](Suite &s) {
         TensorRef a = s.ints(DType::I64, {6}, {7, -7, 7, -7, 100, -3});
         TensorRef b = s.ints(DType::I64, {6}, {3, 3, -3, -3, 7, 5});
         TensorRef c = s.empty(DType::I64, {6});
         binary(*s.ctx, "mod", BinaryOp::Mod, a, b, c);
         return std::vector<TensorRef>{c};
       }});
  cases.push_back(
      {"binary_fmod_i32", 0, [](Suite &s) {
         TensorRef a = s.ints(DType::I32, {6}, {7, -7, 7, -7, 100, -3});
         TensorRef b = s.ints(DType::I32, {6}, {3, 3, -3, -3, 7, 0});
         TensorRef c = s.empty(DType::I32, {6});
         binary(*s.ctx, "fmod", BinaryOp::FMod, a, b, c);
         return std::vector<TensorRef>{c};
       }});
  // ReLU's gradient: alone (a broadcast relu output, a NaN and zeros in it)
  // and as a step after a sum of gradients, in each float type.
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    cases.push_back(
        {std::string("relu_grad_") + tag(dt), 0, [=](Suite &s) {
           TensorRef dy = s.random(dt, {37, 1001}),
                     dz = s.random(dt, {37, 1001});
           TensorRef y = s.random(dt, {37, 1001}, -1, 1);
           TensorRef row = s.random(dt, {1001}, -1, 1);
           TensorRef a = s.empty(dt, {37, 1001}), b = s.empty(dt, {37, 1001});
           binary(*s.ctx, "relu_grad", BinaryOp::ReluGrad, dy, row, a);
           const ElementwiseStep steps[] = {
               {ElementwiseStep::kBinary, int32_t(BinaryOp::Add), 0, 1, 0, 0},
               {ElementwiseStep::kBinary, int32_t(BinaryOp::ReluGrad), 3, 2, 0,
                0}};
           const TensorRef inputs[] = {dy, dz, y};
           fusedElementwise(*s.ctx, "fused_relu_grad", steps, 2, inputs, 3, b);
           return std::vector<TensorRef>{a, b};
         }});
  cases.push_back({"compare_where_logical", 0, [](Suite &s) {
                     TensorRef a = s.random(DType::F32, {37, 41}),
                               b = s.random(DType::F32, {41});
                     TensorRef lt = s.empty(DType::Bool, {37, 41}),
                               ge = s.empty(DType::Bool, {37, 41});
                     compare(*s.ctx, "less", CompareOp::Less, a, b, lt);
                     compare(*s.ctx, "ge", CompareOp::GreaterOrEqual, a, b, ge);
                     TensorRef both = s.empty(DType::Bool, {37, 41});
                     logical(*s.ctx, "xor", LogicalOp::Xor, lt, ge, both);
                     TensorRef w = s.empty(DType::F32, {37, 41});
                     where(*s.ctx, "where", lt, a, b, w);
                     return std::vector<TensorRef>{lt, both, w};
                   }});
  // IsNaN over every float type: NaN, +-inf, zero and ordinary values.
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64})
    cases.push_back({std::string("is_nan_") + tag(dt), 0, [=](Suite &s) {
                       std::vector<double> values;
                       for (int64_t i = 0; i < 1031; ++i)
                         values.push_back(
                             i % 7 == 0    ? NAN
                             : i % 11 == 0 ? (i % 2 ? INFINITY : -INFINITY)
                             : i % 13 == 0 ? 0.0
                                           : 0.5 * double(i % 17) - 4.0);
                       TensorRef x = s.upload(dt, {1031}, values);
                       TensorRef y = s.empty(DType::Bool, {1031});
                       isNaN(*s.ctx, "is_nan", x, y);
                       return std::vector<TensorRef>{y};
                     }});
  // Range: start and delta read on the device.
  for (DType dt : {DType::F32, DType::F16, DType::F64, DType::I32, DType::I64})
    cases.push_back(
        {std::string("range_") + tag(dt), tol(dt), [=](Suite &s) {
           TensorRef start = s.upload(dt, {}, {-3.0});
           TensorRef delta =
               s.upload(dt, {}, {0.5 + (dt == DType::I32 || dt == DType::I64)});
           TensorRef y = s.empty(dt, {777});
           range(*s.ctx, "range", start, delta, y);
           return std::vector<TensorRef>{y};
         }});
  struct C {
    DType from, to;
  };
  for (C c : {C{DType::F32, DType::F16}, C{DType::F16, DType::F32},
              C{DType::F32, DType::BF16}, C{DType::F32, DType::I64},
              C{DType::I64, DType::F32}, C{DType::F32, DType::Bool},
              C{DType::I64, DType::I32}})
    cases.push_back({std::string("cast_") + tag(c.from) + "_" + tag(c.to), 0,
                     [=](Suite &s) {
                       TensorRef x =
                           c.from == DType::I64
                               ? s.ints(DType::I64, {5}, {-3, 0, 7, 123456, -9})
                               : s.random(c.from, {1003}, 0.1, 50.0);
                       TensorRef y = s.empty(c.to, {x.shape[0]});
                       cast(*s.ctx, "cast", x, y);
                       return std::vector<TensorRef>{y};
                     }});
  cases.push_back({"fill_expand_copy", 0, [](Suite &s) {
                     TensorRef f = s.empty(DType::F16, {1001});
                     fill(*s.ctx, "fill", 0.3, f);
                     TensorRef x = s.random(DType::I32, {7, 1, 3}, 1, 100);
                     TensorRef e = s.empty(DType::I32, {2, 7, 5, 3});
                     expand(*s.ctx, "expand", x, e);
                     TensorRef c = s.empty(DType::I32, {2, 7, 5, 3});
                     copy(*s.ctx, "copy", e, c);
                     // Scalars expanded (the 16-byte splat and its tail).
                     TensorRef h = s.random(DType::F16, {}, -2, 2);
                     TensorRef hy = s.empty(DType::F16, {3, 1001});
                     expand(*s.ctx, "expand_scalar", h, hy);
                     TensorRef d = s.ints(DType::I64, {1}, {-123456789});
                     TensorRef dy = s.empty(DType::I64, {5, 7});
                     expand(*s.ctx, "expand_one", d, dy);
                     return std::vector<TensorRef>{f, c, hy, dy};
                   }});

  // Matrix products.
  for (DType dt : floats) {
    cases.push_back(
        {std::string("matmul_plain_") + tag(dt), tol(dt, 1e-3), [=](Suite &s) {
           TensorRef a = s.random(dt, {64, 96}), b = s.random(dt, {96, 80});
           TensorRef c = s.empty(dt, {64, 80});
           matmul(*s.ctx, "mm", MatmulParams(), a, b, nullptr, c);
           return std::vector<TensorRef>{c};
         }});
    // An odd N (a row is not whole 16-byte vectors, GPT-2's vocabulary)
    // with a bias and relu, through a planned workspace.
    cases.push_back(
        {std::string("gemm_odd_rows_") + tag(dt), tol(dt, 1e-3), [=](Suite &s) {
           TensorRef a = s.random(dt, {300, 64}), b = s.random(dt, {1003, 64});
           TensorRef bias = s.random(dt, {1003});
           TensorRef c = s.empty(dt, {300, 1003});
           MatmulParams p;
           p.transB = true;
           p.activation = Activation::Relu;
           size_t ws = size_t(4) << 20;
           TensorRef workspace = s.empty(DType::U8, {int64_t(ws)});
           setMatmulWorkspace(*s.ctx, workspace.data, ws);
           matmul(*s.ctx, "gemm_odd", p, a, b, &bias, c);
           return std::vector<TensorRef>{c};
         }});
    cases.push_back(
        {std::string("matmul_batched_") + tag(dt), tol(dt, 1e-3),
         [=](Suite &s) {
           TensorRef a = s.random(dt, {3, 33, 65}), b = s.random(dt, {65, 17});
           TensorRef c = s.empty(dt, {3, 33, 17});
           matmul(*s.ctx, "bmm", MatmulParams(), a, b, nullptr, c);
           return std::vector<TensorRef>{c};
         }});
    cases.push_back(
        {std::string("matmul_bcast_") + tag(dt), tol(dt, 1e-3), [=](Suite &s) {
           TensorRef a = s.random(dt, {2, 1, 16, 24}),
                     b = s.random(dt, {1, 3, 24, 8});
           TensorRef c = s.empty(dt, {2, 3, 16, 8});
           matmul(*s.ctx, "bmm_bcast", MatmulParams(), a, b, nullptr, c);
           return std::vector<TensorRef>{c};
         }});
    cases.push_back(
        {std::string("gemm_trans_bias_relu_") + tag(dt), tol(dt, 1e-3),
         [=](Suite &s) {
           TensorRef a = s.random(dt, {40, 24}), b = s.random(dt, {56, 40});
           TensorRef bias = s.random(dt, {56});
           TensorRef c = s.empty(dt, {24, 56});
           MatmulParams p;
           p.transA = p.transB = true;
           p.alpha = 0.5f;
           p.activation = Activation::Relu;
           matmul(*s.ctx, "gemm", p, a, b, &bias, c);
           return std::vector<TensorRef>{c};
         }});
    cases.push_back(
        {std::string("gemm_colbias_beta_gelu_") + tag(dt), tol(dt, 1e-3),
         [=](Suite &s) {
           TensorRef a = s.random(dt, {24, 40}), b = s.random(dt, {40, 56});
           TensorRef bias = s.random(dt, {24, 1});
           TensorRef c = s.empty(dt, {24, 56});
           MatmulParams p;
           p.beta = 0.5f;
           p.activation = Activation::Gelu;
           matmul(*s.ctx, "gemm2", p, a, b, &bias, c);
           return std::vector<TensorRef>{c};
         }});
    cases.push_back(
        {std::string("matmul_bias_gelutanh_") + tag(dt), tol(dt, 1e-3),
         [=](Suite &s) {
           TensorRef a = s.random(dt, {2, 24, 40}), b = s.random(dt, {40, 64});
           TensorRef bias = s.random(dt, {64});
           TensorRef c = s.empty(dt, {2, 24, 64});
           MatmulParams p;
           p.activation = Activation::GeluTanh;
           matmul(*s.ctx, "mm_gelu", p, a, b, &bias, c);
           return std::vector<TensorRef>{c};
         }});
  }
  // f16 / bf16 operands storing an f32 result (mixed precision's outputs):
  // strided batch and the fused row bias, both f32 on the output side.
  for (DType dt : {DType::F16, DType::BF16})
    cases.push_back(
        {std::string("matmul_f32_output_") + tag(dt), 1e-3, [=](Suite &s) {
           TensorRef a = s.random(dt, {3, 33, 64}), b = s.random(dt, {64, 40});
           TensorRef bias = s.random(DType::F32, {40});
           TensorRef c = s.empty(DType::F32, {3, 33, 40});
           matmul(*s.ctx, "mm_f32_out", MatmulParams(), a, b, &bias, c);
           return std::vector<TensorRef>{c};
         }});

  // Convolutions.
  struct V {
    const char *name;
    std::vector<int64_t> x, w, y;
    int spatial;
    int64_t group, stride, dilation, padBegin, padEnd;
    bool transposed, bias;
    Activation act;
  };
  std::vector<V> convs = {
      {"3x3_bias_relu",
       {2, 16, 19, 19},
       {32, 16, 3, 3},
       {2, 32, 19, 19},
       2,
       1,
       1,
       1,
       1,
       1,
       false,
       true,
       Activation::Relu},
      {"s2_g4_d2",
       {1, 16, 21, 21},
       {32, 4, 3, 3},
       {1, 32, 10, 10},
       2,
       4,
       2,
       2,
       1,
       1,
       false,
       false,
       Activation::None},
      {"depthwise",
       {2, 24, 15, 15},
       {24, 1, 3, 3},
       {2, 24, 15, 15},
       2,
       24,
       1,
       1,
       1,
       1,
       false,
       true,
       Activation::None},
      {"pointwise",
       {2, 40, 7, 7},
       {24, 40, 1, 1},
       {2, 24, 7, 7},
       2,
       1,
       1,
       1,
       0,
       0,
       false,
       true,
       Activation::None},
      {"asym_pads",
       {1, 8, 10, 10},
       {8, 8, 3, 3},
       {1, 8, 5, 5},
       2,
       1,
       2,
       1,
       0,
       1,
       false,
       true,
       Activation::Relu},
      {"conv1d",
       {2, 12, 50},
       {16, 12, 5},
       {2, 16, 50},
       1,
       1,
       1,
       1,
       2,
       2,
       false,
       true,
       Activation::None},
      {"conv3d",
       {1, 4, 6, 7, 8},
       {8, 4, 3, 3, 3},
       {1, 8, 6, 7, 8},
       3,
       1,
       1,
       1,
       1,
       1,
       false,
       false,
       Activation::None},
      // MobileNetV3-Large's last pointwise conv at batch 32 (in f16 an
      // H100's cuDNN 9 returned BAD_PARAM for the algorithm its search chose
      // first; the plan then falls back to the next one).
      {"pointwise_672_160_b32",
       {32, 672, 7, 7},
       {160, 672, 1, 1},
       {32, 160, 7, 7},
       2,
       1,
       1,
       1,
       0,
       0,
       false,
       false,
       Activation::None},
      {"transpose_s2",
       {2, 16, 7, 7},
       {16, 8, 3, 3},
       {2, 8, 13, 13},
       2,
       1,
       2,
       1,
       1,
       1,
       true,
       true,
       Activation::None},
  };
  for (DType dt : floats)
    for (const V &v : convs) {
      if (dt != DType::F32 && (v.spatial == 3 || v.transposed))
        continue;
      cases.push_back(
          {std::string("conv_") + v.name + "_" + tag(dt), tol(dt, 1e-3),
           [=](Suite &s) {
             TensorRef x = s.random(dt, v.x), w = s.random(dt, v.w, 0.05, 0.5);
             TensorRef bias = s.random(dt, {v.y[1]});
             TensorRef y = s.empty(dt, v.y);
             ConvParams p;
             p.spatialRank = v.spatial;
             p.group = v.group;
             p.activation = v.act;
             for (int i = 0; i < v.spatial; ++i) {
               p.strides[i] = v.stride;
               p.dilations[i] = v.dilation;
               p.padsBegin[i] = v.padBegin;
               p.padsEnd[i] = v.padEnd;
             }
             size_t ws = convWorkspaceBound(p, x, w, y);
             TensorRef workspace = s.empty(DType::U8, {int64_t(ws)});
             if (v.transposed)
               convTranspose(*s.ctx, "convT", p, x, w, v.bias ? &bias : nullptr,
                             y, workspace.data, ws);
             else
               conv(*s.ctx, "conv", p, x, w, v.bias ? &bias : nullptr, y,
                    workspace.data, ws);
             return std::vector<TensorRef>{y};
           }});
    }

  // Channels-last (memopt-layout): the same convolutions on NHWC tensors
  // and KRSC filters, the residual convolution (separate and in place, the
  // planner's usual choice for ResNet's shortcut) in both layouts, and TF32.
  auto last = [](std::vector<int64_t> shape) {
    std::rotate(shape.begin() + 1, shape.begin() + 2, shape.end());
    return shape;
  };
  auto convParams = [](const V &v) {
    ConvParams p;
    p.spatialRank = v.spatial;
    p.group = v.group;
    p.activation = v.act;
    for (int i = 0; i < v.spatial; ++i) {
      p.strides[i] = v.stride;
      p.dilations[i] = v.dilation;
      p.padsBegin[i] = v.padBegin;
      p.padsEnd[i] = v.padEnd;
    }
    return p;
  };
  for (DType dt : floats)
    for (const V &v : convs) {
      if (v.transposed || (dt != DType::F32 && v.spatial == 3))
        continue;
      cases.push_back({std::string("conv_nhwc_") + v.name + "_" + tag(dt),
                       tol(dt, 1e-3), [=](Suite &s) {
                         TensorRef x = s.random(dt, last(v.x)),
                                   w = s.random(dt, last(v.w), 0.05, 0.5);
                         TensorRef bias = s.random(dt, {v.y[1]});
                         TensorRef y = s.empty(dt, last(v.y));
                         ConvParams p = convParams(v);
                         p.channelsLast = true;
                         size_t ws = convWorkspaceBound(p, x, w, y);
                         TensorRef workspace =
                             s.empty(DType::U8, {int64_t(ws)});
                         conv(*s.ctx, "conv_nhwc", p, x, w,
                              v.bias ? &bias : nullptr, y, workspace.data, ws);
                         return std::vector<TensorRef>{y};
                       }});
      for (bool inPlace : {false, true}) {
        if (v.spatial != 2)
          continue;
        for (bool channelsLast : {false, true})
          cases.push_back(
              {std::string("conv_residual_") + (channelsLast ? "nhwc_" : "") +
                   (inPlace ? "inplace_" : "") + v.name + "_" + tag(dt),
               tol(dt, 1e-3), [=](Suite &s) {
                 auto layout = [&](const std::vector<int64_t> &shape) {
                   return channelsLast ? last(shape) : shape;
                 };
                 TensorRef x = s.random(dt, layout(v.x)),
                           w = s.random(dt, layout(v.w), 0.05, 0.5);
                 TensorRef bias = s.random(dt, {v.y[1]});
                 TensorRef z = s.random(dt, layout(v.y));
                 TensorRef y = inPlace ? z : s.empty(dt, layout(v.y));
                 ConvParams p = convParams(v);
                 p.activation = Activation::Relu;
                 p.channelsLast = channelsLast;
                 size_t ws = convWorkspaceBound(p, x, w, y);
                 TensorRef workspace = s.empty(DType::U8, {int64_t(ws)});
                 convResidual(*s.ctx, "conv_residual", p, x, w, &bias, z, y,
                              workspace.data, ws);
                 // A second call runs the plan chosen by the first (the
                 // first times candidates); the in-place case needs the
                 // residual again.
                 if (!inPlace)
                   convResidual(*s.ctx, "conv_residual", p, x, w, &bias, z, y,
                                workspace.data, ws);
                 return std::vector<TensorRef>{y};
               }});
      }
    }
  // TF32 (f32 storage, 10-bit mantissa products, f32 sums): about 1e-3
  // relative per product; the host computes in double.
  for (const V &v : convs) {
    if (v.transposed || v.spatial != 2)
      continue;
    for (bool channelsLast : {false, true})
      cases.push_back(
          {std::string("conv_tf32_") + (channelsLast ? "nhwc_" : "") + v.name,
           2e-2, [=](Suite &s) {
             auto layout = [&](const std::vector<int64_t> &shape) {
               return channelsLast ? last(shape) : shape;
             };
             TensorRef x = s.random(DType::F32, layout(v.x)),
                       w = s.random(DType::F32, layout(v.w), 0.05, 0.5);
             TensorRef bias = s.random(DType::F32, {v.y[1]});
             TensorRef y = s.empty(DType::F32, layout(v.y));
             ConvParams p = convParams(v);
             p.channelsLast = channelsLast;
             p.allowTf32 = true;
             size_t ws = convWorkspaceBound(p, x, w, y);
             TensorRef workspace = s.empty(DType::U8, {int64_t(ws)});
             conv(*s.ctx, "conv_tf32", p, x, w, v.bias ? &bias : nullptr, y,
                  workspace.data, ws);
             return std::vector<TensorRef>{y};
           }});
  }
  cases.push_back({"matmul_tf32", 2e-2, [](Suite &s) {
                     TensorRef a = s.random(DType::F32, {3, 65, 256}),
                               b = s.random(DType::F32, {256, 96}, 0.05, 0.5);
                     TensorRef bias = s.random(DType::F32, {96});
                     TensorRef c = s.empty(DType::F32, {3, 65, 96});
                     MatmulParams p;
                     p.allowTf32 = true;
                     p.activation = Activation::Relu;
                     matmul(*s.ctx, "mm_tf32", p, a, b, &bias, c);
                     return std::vector<TensorRef>{c};
                   }});

  // Pooling.
  for (DType dt : floats) {
    struct P {
      const char *name;
      PoolKind kind;
      bool includePad, ceil;
      int64_t out;
    };
    for (P p : {P{"max", PoolKind::Max, false, false, 10},
                P{"avg_pad", PoolKind::Avg, true, false, 10},
                P{"avg_ceil", PoolKind::Avg, false, true, 11}})
      cases.push_back({std::string("pool_") + p.name + "_" + tag(dt), tol(dt),
                       [=](Suite &s) {
                         // 20x20, k3 s2 p1: 10 outputs, 11 with ceil_mode.
                         TensorRef x = s.random(dt, {2, 5, 20, 20});
                         TensorRef y = s.empty(dt, {2, 5, p.out, p.out});
                         PoolParams pp;
                         pp.kind = p.kind;
                         pp.countIncludePad = p.includePad;
                         pp.ceilMode = p.ceil;
                         for (int i = 0; i < 2; ++i) {
                           pp.kernel[i] = 3;
                           pp.strides[i] = 2;
                           pp.padsBegin[i] = pp.padsEnd[i] = 1;
                         }
                         pool(*s.ctx, "pool", pp, x, y);
                         return std::vector<TensorRef>{y};
                       }});
    for (P p : {P{"max", PoolKind::Max, false, false, 10},
                P{"avg_ceil", PoolKind::Avg, false, true, 11}})
      cases.push_back({std::string("pool_nhwc_") + p.name + "_" + tag(dt),
                       tol(dt), [=](Suite &s) {
                         TensorRef x = s.random(dt, {2, 20, 20, 5});
                         TensorRef y = s.empty(dt, {2, p.out, p.out, 5});
                         PoolParams pp;
                         pp.kind = p.kind;
                         pp.countIncludePad = p.includePad;
                         pp.ceilMode = p.ceil;
                         pp.channelsLast = true;
                         for (int i = 0; i < 2; ++i) {
                           pp.kernel[i] = 3;
                           pp.strides[i] = 2;
                           pp.padsBegin[i] = pp.padsEnd[i] = 1;
                         }
                         pool(*s.ctx, "pool_nhwc", pp, x, y);
                         return std::vector<TensorRef>{y};
                       }});
    cases.push_back({std::string("global_avg_pool_nhwc_") + tag(dt), tol(dt),
                     [=](Suite &s) {
                       TensorRef x = s.random(dt, {3, 13, 11, 37});
                       TensorRef y = s.empty(dt, {3, 1, 1, 37});
                       globalAvgPool(*s.ctx, "gap_nhwc", x, y, true);
                       return std::vector<TensorRef>{y};
                     }});
    cases.push_back(
        {std::string("global_avg_pool_") + tag(dt), tol(dt), [=](Suite &s) {
           TensorRef x = s.random(dt, {3, 37, 13, 11});
           TensorRef y = s.empty(dt, {3, 37, 1, 1});
           globalAvgPool(*s.ctx, "gap", x, y);
           return std::vector<TensorRef>{y};
         }});
  }

  // Training: cross-entropy (warp per row, wide and narrow rows, ignored
  // rows), the conv filter gradient on the conv cases above (cuDNN's
  // backward-filter search; the asymmetric-pad case runs the own kernel),
  // the pool gradient and the optimizer updates over two steps.
  for (DType dt : floats) {
    struct E {
      const char *name;
      int64_t rows, classes;
      DType labels;
    };
    for (E e :
         {E{"wide", 37, 5003, DType::I64}, E{"narrow", 4099, 10, DType::I32}})
      cases.push_back(
          {std::string("cross_entropy_") + e.name + "_" + tag(dt),
           tol(dt, 1e-4), [=](Suite &s) {
             TensorRef logits = s.random(dt, {e.rows, e.classes});
             std::vector<double> y;
             for (int64_t r = 0; r < e.rows; ++r)
               y.push_back(r % 5 == 2 ? -100 : double((r * 7919) % e.classes));
             TensorRef labels = s.ints(e.labels, {e.rows}, y);
             TensorRef loss = s.empty(DType::F32, {});
             TensorRef dloss = s.upload(DType::F32, {}, {1.25});
             TensorRef dlogits = s.empty(dt, {e.rows, e.classes});
             softmaxCrossEntropy(*s.ctx, "ce", -100, logits, labels, loss);
             softmaxCrossEntropyGrad(*s.ctx, "ce_grad", -100, logits, labels,
                                     dloss, dlogits);
             // Scaled so that the gradient's entries (about 1 / (rows *
             // classes)) are compared at the tolerance of the loss.
             TensorRef scaled = s.empty(DType::F32, {e.rows, e.classes});
             cast(*s.ctx, "cast", dlogits, scaled);
             TensorRef factor =
                 s.upload(DType::F32, {1}, {double(e.rows * e.classes)});
             binary(*s.ctx, "scale", BinaryOp::Mul, scaled, factor, scaled);
             return std::vector<TensorRef>{loss, scaled};
           }});
    cases.push_back(
        {std::string("cross_entropy_all_ignored_") + tag(dt), 0, [=](Suite &s) {
           TensorRef logits = s.random(dt, {9, 33});
           TensorRef labels =
               s.ints(DType::I64, {9}, std::vector<double>(9, -1.0));
           TensorRef loss = s.random(DType::F32, {});
           TensorRef dloss = s.upload(DType::F32, {}, {1.0});
           TensorRef dlogits = s.random(dt, {9, 33});
           softmaxCrossEntropy(*s.ctx, "ce", -1, logits, labels, loss);
           softmaxCrossEntropyGrad(*s.ctx, "ce_grad", -1, logits, labels, dloss,
                                   dlogits);
           return std::vector<TensorRef>{loss, dlogits};
         }});
    // The fused head + loss over 517 classes (an odd tail of 5 after the
    // aligned 512): chunks of 128 classes (dx summed over five GEMMs, the
    // accumulating ones included) and the whole aligned width at once;
    // ignored rows and labels in the first, a middle and the tail chunk.
    for (int64_t chunk : {int64_t(128), int64_t(512)})
      cases.push_back(
          {std::string("linear_cross_entropy_chunk") + std::to_string(chunk) +
               "_" + tag(dt),
           tol(dt, 1e-4), [=](Suite &s) {
             const int64_t rows = 38, features = 24, classes = 517;
             TensorRef x = s.random(dt, {2, rows / 2, features}, 0.05, 0.5);
             TensorRef w = s.random(dt, {classes, features}, 0.05, 0.5);
             std::vector<double> y;
             for (int64_t r = 0; r < rows; ++r)
               y.push_back(r % 7 == 3   ? -100
                           : r % 7 == 5 ? double(classes - 1 - r % 5)
                                        : double((r * 131) % classes));
             TensorRef labels = s.ints(DType::I64, {2, rows / 2}, y);
             TensorRef loss = s.empty(DType::F32, {});
             TensorRef lse = s.empty(DType::F32, {2, rows / 2});
             TensorRef dloss = s.upload(DType::F32, {}, {1.25});
             TensorRef dx = s.empty(dt, {2, rows / 2, features});
             TensorRef dw = s.empty(dt, {classes, features});
             size_t bytes = linearCrossEntropyWorkspaceBytes(rows, chunk, dt);
             void *ws = s.empty(DType::U8, {int64_t(bytes)}).data;
             LinearCrossEntropyParams params;
             linearCrossEntropy(*s.ctx, "lce", params, x, w, labels, loss, lse,
                                ws, bytes);
             linearCrossEntropyGrad(*s.ctx, "lce_grad", params, x, w, labels,
                                    lse, dloss, dx, dw, ws, bytes);
             // dx and dw scaled by the rows (their entries are sums of
             // about 1 / rows each), as the cross-entropy cases do.
             std::vector<TensorRef> out = {loss, lse};
             for (TensorRef g : {dx, dw}) {
               TensorRef scaled = s.empty(
                   DType::F32, std::vector<int64_t>(g.shape, g.shape + g.rank));
               cast(*s.ctx, "cast", g, scaled);
               TensorRef factor = s.upload(DType::F32, {1}, {double(rows)});
               binary(*s.ctx, "scale", BinaryOp::Mul, scaled, factor, scaled);
               out.push_back(scaled);
             }
             return out;
           }});
  }
  for (DType dt : floats)
    for (const V &v : convs) {
      if (v.transposed || (dt != DType::F32 && v.spatial == 3))
        continue;
      cases.push_back(
          {std::string("conv_backward_filter_") + v.name + "_" + tag(dt),
           tol(dt, 1e-3), [=](Suite &s) {
             TensorRef x = s.random(dt, v.x), dy = s.random(dt, v.y, 0.05, 0.5);
             TensorRef dw = s.empty(dt, v.w);
             ConvParams p;
             p.spatialRank = v.spatial;
             p.group = v.group;
             for (int i = 0; i < v.spatial; ++i) {
               p.strides[i] = v.stride;
               p.dilations[i] = v.dilation;
               p.padsBegin[i] = v.padBegin;
               p.padsEnd[i] = v.padEnd;
             }
             size_t ws = convWorkspaceBound(p, x, dw, dy);
             TensorRef workspace = s.empty(DType::U8, {int64_t(ws)});
             convBackwardFilter(*s.ctx, "conv_dw", p, x, dy, dw, workspace.data,
                                ws);
             return std::vector<TensorRef>{dw};
           }});
    }
  // The convolution gradients of a ResNet bottleneck's last stage at 2
  // images of 64x64 (2x2 planes): data gradients of strided convolutions
  // need output_padding 1, filter gradients of 3x3 convs see mostly padding.
  {
    struct G {
      const char *name;
      std::vector<int64_t> x, w, y;
      int64_t kernel, stride, pad;
    };
    for (G g :
         {G{"1x1_s2", {2, 96, 4, 4}, {160, 96, 1, 1}, {2, 160, 2, 2}, 1, 2, 0},
          G{"3x3_s2", {2, 64, 4, 4}, {64, 64, 3, 3}, {2, 64, 2, 2}, 3, 2, 1},
          G{"3x3_2x2", {2, 64, 2, 2}, {64, 64, 3, 3}, {2, 64, 2, 2}, 3, 1, 1},
          G{"1x1_2x2",
            {2, 128, 2, 2},
            {64, 128, 1, 1},
            {2, 64, 2, 2},
            1,
            1,
            0}})
      cases.push_back(
          {std::string("conv_gradients_small_") + g.name, 1e-4, [=](Suite &s) {
             TensorRef x = s.random(DType::F32, g.x);
             TensorRef w = s.random(DType::F32, g.w, 0.05, 0.5);
             TensorRef dy = s.random(DType::F32, g.y, 0.05, 0.5);
             TensorRef dx = s.empty(DType::F32, g.x),
                       dw = s.empty(DType::F32, g.w);
             ConvParams p;
             p.spatialRank = 2;
             for (int i = 0; i < 2; ++i) {
               p.strides[i] = g.stride;
               p.dilations[i] = 1;
               p.padsBegin[i] = p.padsEnd[i] = g.pad;
               int64_t covered =
                   g.stride * (g.y[2 + i] - 1) + g.kernel - 2 * g.pad;
               p.outputPadding[i] = g.x[2 + i] - covered;
             }
             size_t wsData = convWorkspaceBound(p, dy, w, dx);
             size_t wsFilter = convWorkspaceBound(p, x, dw, dy);
             size_t ws = std::max(wsData, wsFilter);
             TensorRef workspace = s.empty(DType::U8, {int64_t(ws) + 1});
             convTranspose(*s.ctx, "conv_dx", p, dy, w, nullptr, dx,
                           workspace.data, ws);
             convBackwardFilter(*s.ctx, "conv_dw", p, x, dy, dw, workspace.data,
                                ws);
             return std::vector<TensorRef>{dx, dw};
           }});
  }
  for (DType dt : floats) {
    struct P {
      const char *name;
      PoolKind kind;
      bool includePad, ceil;
      int64_t out, dilation;
    };
    for (P p : {P{"max", PoolKind::Max, false, false, 10, 1},
                P{"max_dilated", PoolKind::Max, false, false, 9, 2},
                P{"avg_pad", PoolKind::Avg, true, false, 10, 1},
                P{"avg_ceil", PoolKind::Avg, false, true, 11, 1}})
      cases.push_back({std::string("pool_grad_") + p.name + "_" + tag(dt),
                       tol(dt), [=](Suite &s) {
                         // Distinct values (no ties in a window) in shuffled
                         // order.
                         int64_t n = 2 * 5 * 20 * 20;
                         std::vector<double> values(static_cast<size_t>(n));
                         for (int64_t i = 0; i < n; ++i)
                           values[size_t(i)] =
                               double((i * 7919) % n) / 256.0 - 7.0;
                         TensorRef x = s.upload(dt, {2, 5, 20, 20}, values);
                         TensorRef dy = s.random(dt, {2, 5, p.out, p.out});
                         TensorRef dx = s.empty(dt, {2, 5, 20, 20});
                         PoolParams pp;
                         pp.kind = p.kind;
                         pp.countIncludePad = p.includePad;
                         pp.ceilMode = p.ceil;
                         for (int i = 0; i < 2; ++i) {
                           pp.kernel[i] = 3;
                           pp.strides[i] = 2;
                           pp.dilations[i] = p.dilation;
                           pp.padsBegin[i] = pp.padsEnd[i] = 1;
                         }
                         poolGrad(*s.ctx, "pool_grad", pp, x, dy, dx);
                         return std::vector<TensorRef>{dx};
                       }});
  }
  // Max pooling's gradient over planes of several 32 x 32 tiles with partial
  // edge tiles: 3x3 / 2 with padding (a ResNet stem) and 2x2 / 1 (windows
  // overlapping by one), ties included (values repeat every 97 elements).
  for (DType dt : floats)
    for (int64_t stride : {2, 1})
      cases.push_back({std::string("pool_grad_max_tiles_s") +
                           std::to_string(stride) + "_" + tag(dt),
                       tol(dt), [=](Suite &s) {
                         std::vector<int64_t> shape = {2, 3, 70, 45};
                         int64_t n = 2 * 3 * 70 * 45, k = stride == 2 ? 3 : 2,
                                 pad = stride == 2 ? 1 : 0;
                         std::vector<double> values(static_cast<size_t>(n));
                         for (int64_t i = 0; i < n; ++i)
                           values[size_t(i)] =
                               double((i * 7919) % 97) / 8.0 - 6.0;
                         TensorRef x = s.upload(dt, shape, values);
                         int64_t oh = (70 + 2 * pad - k) / stride + 1,
                                 ow = (45 + 2 * pad - k) / stride + 1;
                         TensorRef dy = s.random(dt, {2, 3, oh, ow});
                         TensorRef dx = s.empty(dt, shape);
                         PoolParams pp;
                         pp.kind = PoolKind::Max;
                         for (int i = 0; i < 2; ++i) {
                           pp.kernel[i] = k;
                           pp.strides[i] = stride;
                           pp.dilations[i] = 1;
                           pp.padsBegin[i] = pp.padsEnd[i] = pad;
                         }
                         poolGrad(*s.ctx, "pool_grad_tiles", pp, x, dy, dx);
                         return std::vector<TensorRef>{dx};
                       }});
  cases.push_back({"sgd_momentum_weight_decay", 1e-6, [](Suite &s) {
                     TensorRef param = s.random(DType::F32, {10007});
                     TensorRef buffer = s.empty(DType::F32, {10007});
                     fill(*s.ctx, "zero", 0.0, buffer);
                     TensorRef lr = s.upload(DType::F32, {}, {0.05});
                     for (int step = 0; step < 2; ++step) {
                       TensorRef grad = s.random(DType::F32, {10007});
                       sgdUpdate(*s.ctx, "sgd", 0.9f, 1e-2f, param, grad,
                                 &buffer, lr);
                     }
                     return std::vector<TensorRef>{param, buffer};
                   }});
  cases.push_back({"sgd_plain", 1e-6, [](Suite &s) {
                     TensorRef param = s.random(DType::F32, {4099});
                     TensorRef grad = s.random(DType::F32, {4099});
                     TensorRef lr = s.upload(DType::F32, {}, {0.1});
                     sgdUpdate(*s.ctx, "sgd", 0.0f, 0.0f, param, grad, nullptr,
                               lr);
                     return std::vector<TensorRef>{param};
                   }});
  cases.push_back({"adamw_two_steps", 1e-5, [](Suite &s) {
                     TensorRef param = s.random(DType::F32, {10007});
                     TensorRef m = s.empty(DType::F32, {10007});
                     TensorRef v = s.empty(DType::F32, {10007});
                     fill(*s.ctx, "zero", 0.0, m);
                     fill(*s.ctx, "zero", 0.0, v);
                     TensorRef lr = s.upload(DType::F32, {}, {1e-2});
                     for (int step = 1; step <= 2; ++step) {
                       TensorRef grad = s.random(DType::F32, {10007});
                       TensorRef t = s.upload(DType::F32, {}, {double(step)});
                       adamwUpdate(*s.ctx, "adamw", 0.9f, 0.999f, 1e-8f, 1e-2f,
                                   param, grad, m, v, lr, t);
                     }
                     return std::vector<TensorRef>{param, m, v};
                   }});

  // Dropout: the CUDA mask must be the host's bit for bit (Philox.h is one
  // header for both), so f32 is compared exactly; an element count that is
  // not a multiple of 4, a 64-bit seed, a large micro-batch number, in place.
  for (DType dt : floats) {
    for (bool inPlace : {false, true}) {
      cases.push_back(
          {std::string("dropout_") + tag(dt) + (inPlace ? "_in_place" : ""),
           dt == DType::F32 ? 0.0 : tol(dt), [dt, inPlace](Suite &s) {
             TensorRef x = s.random(dt, {3, 1367});
             TensorRef key =
                 s.ints(DType::I64, {2}, {double(0x1234567890ll), 70000.0 + 1});
             TensorRef y = inPlace ? x : s.empty(dt, {3, 1367});
             dropout(*s.ctx, "dropout", 0.3f, 5u, x, key, y);
             TensorRef again = s.empty(dt, {3, 1367});
             dropout(*s.ctx, "dropout_again", 0.1f, 6u, y, key, again);
             return std::vector<TensorRef>{y, again};
           }});
    }
  }

  // Gradient accumulation over 3 micro-steps (the update runs on the last
  // one; the micro-step is read on the device), then a fourth micro-batch
  // that starts the next step: param, state and accumulator.
  for (bool adamw : {false, true}) {
    cases.push_back(
        {adamw ? "adamw_accumulate" : "sgd_accumulate", 1e-5,
         [adamw](Suite &s) {
           const int64_t n = 10007;
           TensorRef param = s.random(DType::F32, {n});
           TensorRef m = s.empty(DType::F32, {n});
           TensorRef v = s.empty(DType::F32, {n});
           TensorRef sum = s.random(DType::F32, {n}); // stale: overwritten
           fill(*s.ctx, "zero", 0.0, m);
           fill(*s.ctx, "zero", 0.0, v);
           TensorRef lr = s.upload(DType::F32, {}, {adamw ? 1e-2 : 0.05});
           TensorRef step = s.upload(DType::F32, {}, {1.0});
           for (int micro : {0, 1, 2, 0}) {
             GradientAccumulation accumulation;
             accumulation.accumulator = sum;
             accumulation.microStep = s.upload(DType::F32, {}, {double(micro)});
             accumulation.steps = 3;
             TensorRef grad = s.random(DType::F32, {n});
             if (adamw)
               adamwUpdate(*s.ctx, "adamw", 0.9f, 0.999f, 1e-8f, 1e-2f, param,
                           grad, m, v, lr, step, &accumulation);
             else
               sgdUpdate(*s.ctx, "sgd", 0.9f, 1e-2f, param, grad, &m, lr,
                         &accumulation);
           }
           return std::vector<TensorRef>{param, m, v, sum};
         }});
    // The micro-step gate alone (data parallel: a collective accumulated
    // and reduced the gradient): only micro-step 2 of 3 updates.
    cases.push_back(
        {adamw ? "adamw_gate" : "sgd_gate", 1e-5, [adamw](Suite &s) {
           const int64_t n = 4099;
           TensorRef param = s.random(DType::F32, {n});
           TensorRef m = s.empty(DType::F32, {n});
           TensorRef v = s.empty(DType::F32, {n});
           fill(*s.ctx, "zero", 0.0, m);
           fill(*s.ctx, "zero", 0.0, v);
           TensorRef lr = s.upload(DType::F32, {}, {adamw ? 1e-2 : 0.05});
           TensorRef step = s.upload(DType::F32, {}, {1.0});
           for (int micro : {0, 1, 2}) {
             GradientAccumulation gate;
             gate.microStep = s.upload(DType::F32, {}, {double(micro)});
             gate.steps = 3;
             TensorRef grad = s.random(DType::F32, {n});
             if (adamw)
               adamwUpdate(*s.ctx, "adamw", 0.9f, 0.999f, 1e-8f, 1e-2f, param,
                           grad, m, v, lr, step, &gate);
             else
               sgdUpdate(*s.ctx, "sgd", 0.9f, 1e-2f, param, grad, &m, lr,
                         &gate);
           }
           return std::vector<TensorRef>{param, m, v};
         }});
  }

  // Attention: head sizes that are and are not multiples of 8 / 16, query
  // and key counts that leave partial tiles, broadcast batches and biases, a
  // padding mask of -inf, causal masks with more queries than a tile.
  for (DType dt : floats) {
    struct A {
      const char *name;
      std::vector<int64_t> q, k, v, bias;
      bool causal, keyTransposed, paddingMask;
      float scale;
    };
    for (A a : {A{"bert",
                  {2, 3, 77, 64},
                  {2, 3, 77, 64},
                  {2, 3, 77, 64},
                  {},
                  false,
                  false,
                  false,
                  0.125f},
                A{"gpt2_causal_kt_mask",
                  {2, 2, 130, 64},
                  {2, 2, 64, 130},
                  {2, 2, 130, 64},
                  {2, 1, 1, 130},
                  true,
                  true,
                  true,
                  0.125f},
                A{"broadcast_d40_dv24",
                  {3, 1, 33, 40},
                  {1, 2, 50, 40},
                  {3, 2, 50, 24},
                  {2, 33, 50},
                  false,
                  false,
                  false,
                  0.16f},
                A{"d128_relpos",
                  {1, 4, 200, 128},
                  {1, 4, 200, 128},
                  {1, 4, 200, 128},
                  {200, 200},
                  false,
                  false,
                  false,
                  0.088f},
                A{"cross_kt_d32",
                  {2, 5, 32},
                  {2, 32, 296},
                  {2, 296, 32},
                  {},
                  false,
                  true,
                  false,
                  0.18f},
                A{"causal_square_d64",
                  {1, 2, 256, 64},
                  {1, 2, 256, 64},
                  {1, 2, 256, 64},
                  {},
                  true,
                  false,
                  false,
                  0.125f},
                A{"causal_relpos_b7",
                  {7, 130, 64},
                  {7, 130, 64},
                  {7, 130, 64},
                  {130, 130},
                  true,
                  false,
                  false,
                  0.125f},
                A{"long_keys_kt",
                  {2, 3, 40, 32},
                  {2, 3, 32, 1100},
                  {2, 3, 1100, 48},
                  {2, 1, 1, 1100},
                  false,
                  true,
                  false,
                  0.2f}})
      // chunks 0: no workspace (the fused kernel); otherwise a workspace
      // that holds the scores of ceil(batch / chunks) entries (the chunked
      // cuBLASLt path when Q, K and V hold the whole batch, the fused
      // kernel otherwise).
      for (int64_t chunks : {int64_t(0), int64_t(3)})
        cases.push_back(
            {std::string("attention_") + a.name + (chunks ? "_chunked_" : "_") +
                 tag(dt),
             tol(dt, 2e-4), [=](Suite &s) {
               TensorRef q = s.random(dt, a.q), k = s.random(dt, a.k),
                         v = s.random(dt, a.v);
               TensorRef bias;
               if (a.paddingMask) {
                 // Sequence b keeps its first keys - 37 * b keys.
                 int64_t keys = a.bias.back();
                 std::vector<double> values;
                 for (int64_t b = 0; b < a.bias.front(); ++b)
                   for (int64_t j = 0; j < keys; ++j)
                     values.push_back(j < keys - 37 * b ? 0.0 : -INFINITY);
                 bias = s.upload(dt, a.bias, values);
               } else if (!a.bias.empty()) {
                 bias = s.random(dt, a.bias, 0.1, 1.0);
               }
               std::vector<int64_t> out = attentionShape(a.q, a.k, a.v);
               TensorRef y = s.empty(dt, out);
               AttentionParams params;
               params.scale = a.scale;
               params.causal = a.causal;
               params.keyTransposed = a.keyTransposed;
               void *workspace = nullptr;
               size_t workspaceBytes = 0;
               if (chunks) {
                 int64_t batch = 1;
                 for (size_t i = 0; i + 2 < out.size(); ++i)
                   batch *= out[i];
                 int64_t keys =
                     a.keyTransposed ? a.k.back() : a.k[a.k.size() - 2];
                 workspaceBytes =
                     attentionChunkBytes((batch + chunks - 1) / chunks,
                                         out[out.size() - 2], keys, dt);
                 workspace =
                     s.empty(DType::F32, {int64_t(workspaceBytes / 4)}).data;
               }
               attention(*s.ctx, s.name.c_str(), params, q, k, v,
                         a.bias.empty() ? nullptr : &bias, y, workspace,
                         workspaceBytes);
               return std::vector<TensorRef>{y};
             }});
  }

  // A finfo.min mask (the dynamo exporter's Where(mask, 0, finfo.min)) with
  // fully masked rows: the graph gives those rows the mean of V (every score
  // the same), so must the log2-domain kernels (no overflow to -inf). On
  // memopt's kernels: cuDNN's engine gives those rows zeros (as PyTorch's
  // cuDNN SDPA does; docs/attention.md, "Engines").
  for (DType dt : {DType::F32, DType::BF16})
    for (int64_t chunks : {int64_t(0), int64_t(2)})
      cases.push_back(
          {std::string("attention_lowest_fill_rows") +
               (chunks ? "_chunked_" : "_") + tag(dt),
           tol(dt, 2e-4), [=](Suite &s) {
             const int64_t batch = 2, heads = 2, tokens = 72, d = 32;
             TensorRef q = s.random(dt, {batch, heads, tokens, d}),
                       k = s.random(dt, {batch, heads, tokens, d}),
                       v = s.random(dt, {batch, heads, tokens, d});
             // Sequence b: 7 (b + 1) left-padding keys under a causal mask,
             // filled with the dtype's lowest value (finfo.min).
             const double lowest = dt == DType::BF16 ? -3.3895313892515355e38
                                                     : -3.4028234663852886e38;
             std::vector<double> values;
             for (int64_t b = 0; b < batch; ++b)
               for (int64_t i = 0; i < tokens; ++i)
                 for (int64_t j = 0; j < tokens; ++j)
                   values.push_back(j > i || j < 7 * (b + 1) ? lowest : 0.0);
             TensorRef bias = s.upload(dt, {batch, 1, tokens, tokens}, values);
             TensorRef y = s.empty(dt, {batch, heads, tokens, d});
             AttentionParams params;
             params.scale = 0.17f;
             params.safeSoftmax = true;
             void *workspace = nullptr;
             size_t workspaceBytes = 0;
             if (chunks) {
               workspaceBytes = attentionChunkBytes(batch * heads / chunks,
                                                    tokens, tokens, dt);
               workspace =
                   s.empty(DType::F32, {int64_t(workspaceBytes / 4)}).data;
             }
             synchronize(*s.ctx);
             attention(*s.kernels, s.name.c_str(), params, q, k, v, &bias, y,
                       workspace, workspaceBytes);
             synchronize(*s.kernels);
             return std::vector<TensorRef>{y};
           }});

  // Safe softmax (PyTorch's SDPA with a boolean mask): fully masked rows give
  // zeros. A causal GPT-2 batch with left padding (query rows before the
  // first real token see no key) and a BERT-like per-row mask with whole
  // rows masked, on the fused kernel and the chunked path.
  for (DType dt : floats)
    for (bool causal : {true, false})
      for (int64_t chunks : {int64_t(0), int64_t(2)})
        cases.push_back(
            {std::string("attention_safe_") +
                 (causal ? "causal_left_pad" : "masked_rows") +
                 (chunks ? "_chunked_" : "_") + tag(dt),
             tol(dt, 2e-4), [=](Suite &s) {
               const int64_t batch = 2, heads = 2, tokens = 100, d = 64;
               TensorRef q = s.random(dt, {batch, heads, tokens, d}),
                         k = s.random(dt, {batch, heads, tokens, d}),
                         v = s.random(dt, {batch, heads, tokens, d});
               // Causal: sequence b starts with 13 (b + 1) padding keys.
               // Otherwise: in sequence b, query rows i % (3 + b) == 0 see
               // nothing and the others lose their last 9 keys.
               std::vector<int64_t> biasShape =
                   causal ? std::vector<int64_t>{batch, 1, 1, tokens}
                          : std::vector<int64_t>{batch, 1, tokens, tokens};
               std::vector<double> values;
               for (int64_t b = 0; b < batch; ++b)
                 for (int64_t i = 0; i < (causal ? 1 : tokens); ++i)
                   for (int64_t j = 0; j < tokens; ++j) {
                     bool masked = causal ? j < 13 * (b + 1)
                                          : i % (3 + b) == 0 || j >= tokens - 9;
                     values.push_back(masked ? -INFINITY : 0.0);
                   }
               TensorRef bias = s.upload(dt, biasShape, values);
               TensorRef y = s.empty(dt, {batch, heads, tokens, d});
               AttentionParams params;
               params.scale = 0.125f;
               params.causal = causal;
               params.safeSoftmax = true;
               void *workspace = nullptr;
               size_t workspaceBytes = 0;
               if (chunks) {
                 workspaceBytes = attentionChunkBytes(batch * heads / chunks,
                                                      tokens, tokens, dt);
                 workspace =
                     s.empty(DType::F32, {int64_t(workspaceBytes / 4)}).data;
               }
               attention(*s.ctx, s.name.c_str(), params, q, k, v, &bias, y,
                         workspace, workspaceBytes);
               return std::vector<TensorRef>{y};
             }});

  // Attention gradients (f32): the forward with its row statistics, then the
  // backward, on the fused kernels (no workspace) and the chunked cuBLASLt
  // path (workspaces for a third of the batch). Outputs: y, lse, dQ, dK, dV
  // and dbias where the bias is trained (summed over its broadcast axes).
  struct G {
    const char *name;
    std::vector<int64_t> q, k, v, bias;
    bool causal, keyTransposed, biasGradient;
    float scale;
    /// 0: random bias; 1: -inf left padding (fully masked rows, safe
    /// softmax); 2: finfo.min fill with fully masked rows (safe softmax).
    int mask;
  };
  for (G a : {G{"bert",
                {2, 3, 77, 64},
                {2, 3, 77, 64},
                {2, 3, 77, 64},
                {},
                false,
                false,
                false,
                0.125f,
                0},
              G{"gpt2_causal_kt",
                {2, 2, 130, 64},
                {2, 2, 64, 130},
                {2, 2, 130, 64},
                {},
                true,
                true,
                false,
                0.125f,
                0},
              G{"broadcast_d40_dv24_dbias",
                {3, 1, 33, 40},
                {1, 2, 50, 40},
                {3, 2, 50, 24},
                {2, 33, 50},
                false,
                false,
                true,
                0.16f,
                0},
              G{"d128_relpos_dbias",
                {2, 4, 70, 128},
                {2, 4, 70, 128},
                {2, 4, 70, 128},
                {4, 70, 70},
                false,
                false,
                true,
                0.088f,
                0},
              G{"causal_relpos_b7_dbias",
                {7, 130, 64},
                {7, 130, 64},
                {7, 130, 64},
                {130, 130},
                true,
                false,
                true,
                0.125f,
                0},
              G{"long_keys_kt_dbias",
                {2, 3, 40, 32},
                {2, 3, 32, 1100},
                {2, 3, 1100, 48},
                {2, 1, 1, 1100},
                false,
                true,
                true,
                0.2f,
                0},
              G{"safe_causal_left_pad",
                {2, 2, 100, 64},
                {2, 2, 100, 64},
                {2, 2, 100, 64},
                {2, 1, 1, 100},
                true,
                false,
                false,
                0.125f,
                1},
              // cuDNN-shaped cases (the engine runs f16 / bf16 there):
              // grouped-query heads (K, V broadcast over the 3 query heads
              // of each of 2 K / V heads), a padding bias [B, 1, 1, Sk] and
              // a bias [B, 1, S, Sk].
              G{"gqa_causal",
                {2, 2, 3, 96, 64},
                {2, 2, 1, 96, 64},
                {2, 2, 1, 96, 64},
                {},
                true,
                false,
                false,
                0.125f,
                0},
              G{"key_padding_bias",
                {2, 4, 128, 64},
                {2, 4, 128, 64},
                {2, 4, 128, 64},
                {2, 1, 1, 128},
                false,
                false,
                false,
                0.125f,
                0},
              G{"causal_bias_b1ss",
                {2, 2, 64, 32},
                {2, 2, 64, 32},
                {2, 2, 64, 32},
                {2, 1, 64, 64},
                true,
                false,
                false,
                0.17f,
                0},
              G{"lowest_fill_rows",
                {2, 2, 72, 32},
                {2, 2, 72, 32},
                {2, 2, 72, 32},
                {2, 1, 72, 72},
                false,
                false,
                false,
                0.17f,
                2}})
    for (int64_t chunks : {int64_t(0), int64_t(3)})
      for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
        // f16 / bf16 (mixed-precision training): fused and chunked, no
        // trained bias.
        if (dt != DType::F32 && a.biasGradient)
          continue;
        cases.push_back(
            {std::string("attention_backward_") + a.name +
                 (chunks ? "_chunked" : "") +
                 (dt == DType::F32 ? "" : std::string("_") + tag(dt)),
             tol(dt, 5e-4), [=](Suite &s) {
               TensorRef q = s.random(dt, a.q), k = s.random(dt, a.k),
                         v = s.random(dt, a.v);
               std::vector<int64_t> out = attentionShape(a.q, a.k, a.v);
               int64_t batch = 1;
               for (size_t i = 0; i + 2 < out.size(); ++i)
                 batch *= out[i];
               int64_t queries = out[out.size() - 2];
               int64_t keys =
                   a.keyTransposed ? a.k.back() : a.k[a.k.size() - 2];
               TensorRef bias;
               if (a.mask == 1) {
                 // Sequence b starts with 13 (b + 1) padding keys.
                 std::vector<double> values;
                 for (int64_t b = 0; b < a.bias.front(); ++b)
                   for (int64_t j = 0; j < keys; ++j)
                     values.push_back(j < 13 * (b + 1) ? -INFINITY : 0.0);
                 bias = s.upload(dt, a.bias, values);
               } else if (a.mask == 2) {
                 // Causal with 7 (b + 1) left-padding keys, all finfo.min.
                 std::vector<double> values;
                 for (int64_t b = 0; b < a.bias.front(); ++b)
                   for (int64_t i = 0; i < queries; ++i)
                     for (int64_t j = 0; j < keys; ++j)
                       values.push_back(j > i || j < 7 * (b + 1)
                                            ? -3.4028234663852886e38
                                            : 0.0);
                 bias = s.upload(dt, a.bias, values);
               } else if (!a.bias.empty()) {
                 bias = s.random(dt, a.bias, 0.1, 1.0);
               }
               const TensorRef *biasRef = a.bias.empty() ? nullptr : &bias;
               AttentionParams params;
               params.scale = a.scale;
               params.causal = a.causal;
               params.keyTransposed = a.keyTransposed;
               params.safeSoftmax = a.mask != 0;
               std::vector<int64_t> statShape(out.begin(), out.end() - 1);
               statShape.push_back(2);
               TensorRef y = s.empty(dt, out),
                         lse = s.empty(DType::F32, statShape);
               int64_t items = chunks ? (batch + chunks - 1) / chunks : 0;
               size_t forwardBytes =
                   chunks ? attentionChunkBytes(items, queries, keys, dt) : 0;
               size_t backwardBytes =
                   chunks
                       ? attentionBackwardChunkBytes(items, queries, keys, dt)
                       : 0;
               void *workspace =
                   chunks
                       ? s.empty(DType::F32, {int64_t(std::max(forwardBytes,
                                                               backwardBytes) /
                                                      4)})
                             .data
                       : nullptr;
               attention(*s.ctx, s.name.c_str(), params, q, k, v, biasRef, y,
                         workspace, forwardBytes, &lse);
               TensorRef dy = s.random(dt, out, 0.1, 1.0);
               auto gradShape = [&](const std::vector<int64_t> &operand) {
                 std::vector<int64_t> shape(out.begin(), out.end() - 2);
                 shape.push_back(operand[operand.size() - 2]);
                 shape.push_back(operand.back());
                 return shape;
               };
               TensorRef dq = s.empty(dt, gradShape(a.q)),
                         dk = s.empty(dt, gradShape(a.k)),
                         dv = s.empty(dt, gradShape(a.v));
               TensorRef dbias;
               if (a.biasGradient)
                 dbias = s.empty(dt, a.bias);
               attentionBackward(*s.ctx, s.name.c_str(), params, q, k, v,
                                 biasRef, y, dy, lse, dq, dk, dv,
                                 a.biasGradient ? &dbias : nullptr, workspace,
                                 backwardBytes);
               // dK and dV summed to K's and V's own shapes.
               auto summed = [&](const TensorRef &grad,
                                 const std::vector<int64_t> &operand) {
                 std::vector<double> sums =
                     sumToShape(s.read(grad), gradShape(operand), operand);
                 return s.upload(DType::F32, {int64_t(sums.size())}, sums);
               };
               std::vector<TensorRef> results = {y, dq, summed(dk, a.k),
                                                 summed(dv, a.v)};
               // The statistics as each row's log-sum-exp (the sum of its
               // pair: memopt's kernels and cuDNN store different pairs).
               // Fully masked rows store -inf statistics (not comparable).
               if (a.mask != 1) {
                 std::vector<double> pairs = s.read(lse), sums;
                 for (size_t i = 0; i + 1 < pairs.size(); i += 2)
                   sums.push_back(pairs[i] + pairs[i + 1]);
                 results.push_back(
                     s.upload(DType::F32, {int64_t(sums.size())}, sums));
               }
               if (a.biasGradient)
                 results.push_back(dbias);
               return results;
             }});
      }

  // Normalization, softmax, reductions.
  for (DType dt : floats) {
    cases.push_back(
        {std::string("batchnorm_") + tag(dt), tol(dt), [=](Suite &s) {
           TensorRef x = s.random(dt, {2, 19, 9, 7});
           TensorRef sc = s.random(DType::F32, {19}),
                     b = s.random(DType::F32, {19});
           TensorRef m = s.random(DType::F32, {19});
           TensorRef v = s.random(DType::F32, {19}, 0.5, 2.0, true);
           TensorRef y = s.empty(dt, {2, 19, 9, 7});
           batchNorm(*s.ctx, "bn", 1e-5f, x, sc, b, m, v, y);
           return std::vector<TensorRef>{y};
         }});
    cases.push_back(
        {std::string("batchnorm_nhwc_") + tag(dt), tol(dt), [=](Suite &s) {
           TensorRef x = s.random(dt, {2, 9, 7, 19});
           TensorRef sc = s.random(DType::F32, {19}),
                     b = s.random(DType::F32, {19});
           TensorRef m = s.random(DType::F32, {19});
           TensorRef v = s.random(DType::F32, {19}, 0.5, 2.0, true);
           TensorRef y = s.empty(dt, {2, 9, 7, 19});
           batchNorm(*s.ctx, "bn_nhwc", 1e-5f, x, sc, b, m, v, y, true);
           return std::vector<TensorRef>{y};
         }});
    for (int64_t cols : {int64_t(768), int64_t(37), int64_t(3001)})
      cases.push_back({"layernorm_" + std::to_string(cols) + "_" + tag(dt),
                       tol(dt, 2e-4), [=](Suite &s) {
                         TensorRef x = s.random(dt, {2, 9, cols});
                         TensorRef sc = s.random(dt, {cols}),
                                   b = s.random(dt, {cols});
                         TensorRef y = s.empty(dt, {2, 9, cols});
                         layerNorm(*s.ctx, "ln", 2, 1e-5f, x, sc, &b, y);
                         return std::vector<TensorRef>{y};
                       }});
    for (int64_t cols : {int64_t(1000), int64_t(5003), int64_t(7)})
      cases.push_back(
          {"softmax_" + std::to_string(cols) + "_" + tag(dt), tol(dt, 2e-4),
           [=](Suite &s) {
             TensorRef x = s.random(dt, {13, cols}, 0.1, 6.0);
             TensorRef y = s.empty(dt, {13, cols}), l = s.empty(dt, {13, cols});
             softmax(*s.ctx, "softmax", 1, false, x, y);
             softmax(*s.ctx, "logsoftmax", 1, true, x, l);
             return std::vector<TensorRef>{y, l};
           }});
    cases.push_back({std::string("softmax_middle_axis_") + tag(dt),
                     tol(dt, 2e-4), [=](Suite &s) {
                       TensorRef x = s.random(dt, {3, 50, 17});
                       TensorRef y = s.empty(dt, {3, 50, 17});
                       softmax(*s.ctx, "softmax", 1, false, x, y);
                       return std::vector<TensorRef>{y};
                     }});
    struct R {
      const char *name;
      std::vector<int> axes;
      ReduceOp op;
      std::vector<int64_t> out;
    };
    for (R r : {R{"last_mean", {2}, ReduceOp::Mean, {6, 11}},
                R{"middle_sum", {1}, ReduceOp::Sum, {6, 333}},
                R{"generic_max", {0, 2}, ReduceOp::Max, {11}},
                R{"all_l2", {0, 1, 2}, ReduceOp::L2, {1}},
                R{"trailing2_min", {1, 2}, ReduceOp::Min, {6}}})
      cases.push_back({std::string("reduce_") + r.name + "_" + tag(dt),
                       tol(dt, 2e-4), [=](Suite &s) {
                         TensorRef x = s.random(dt, {6, 11, 333});
                         TensorRef y = s.empty(dt, r.out);
                         reduce(*s.ctx, "reduce", r.op, r.axes.data(),
                                int(r.axes.size()), x, y);
                         return std::vector<TensorRef>{y};
                       }});
  }
  cases.push_back({"reduce_prod_small", 1e-4, [](Suite &s) {
                     TensorRef x = s.random(DType::F32, {5, 4, 3}, 0.8, 1.2);
                     TensorRef y = s.empty(DType::F32, {5});
                     int axes[2] = {1, 2};
                     reduce(*s.ctx, "prod", ReduceOp::Prod, axes, 2, x, y);
                     return std::vector<TensorRef>{y};
                   }});
  cases.push_back({"argmax", 0, [](Suite &s) {
                     TensorRef x = s.random(DType::F32, {7, 100, 9});
                     TensorRef y = s.empty(DType::I64, {7, 9});
                     argReduce(*s.ctx, "argmax", true, 1, x, y);
                     return std::vector<TensorRef>{y};
                   }});
  // Running sums: long contiguous rows (block scans over several chunks, a
  // partial last chunk, more rows than blocks), short rows and a middle axis
  // (one thread per row), every exclusive / reverse combination, in place.
  {
    struct S {
      const char *name;
      std::vector<int64_t> shape;
      int axis;
      bool exclusive, reverse, inPlace;
    };
    for (DType dt : floats)
      for (S c :
           {S{"rows", {37, 1000}, 1, false, false, false},
            S{"rows_exclusive_reverse", {5, 777}, 1, true, true, false},
            S{"many_rows_exclusive", {4096, 40}, 1, true, false, false},
            S{"short_rows_reverse", {1000, 7}, 1, false, true, false},
            S{"middle_axis", {3, 50, 17}, 1, false, true, false},
            S{"middle_axis_exclusive", {3, 50, 17}, 1, true, false, false},
            S{"rows_in_place", {3, 2049}, 1, true, true, true},
            S{"middle_in_place", {6, 33, 5}, 1, false, false, true}})
        cases.push_back({std::string("cumsum_") + c.name + "_" + tag(dt),
                         tol(dt, 1e-3), [=](Suite &s) {
                           TensorRef x = s.random(dt, c.shape);
                           TensorRef y = c.inPlace ? x : s.empty(dt, c.shape);
                           cumSum(*s.ctx, "cumsum", c.axis, c.exclusive,
                                  c.reverse, x, y);
                           return std::vector<TensorRef>{y};
                         }});
    for (DType dt : {DType::I32, DType::I64})
      for (S c : {S{"rows", {9, 3001}, 1, true, false, false},
                  S{"middle_axis", {4, 40, 9}, 1, false, true, false},
                  S{"rows_in_place", {2, 513}, 1, false, true, true}})
        cases.push_back(
            {std::string("cumsum_") + c.name + "_" + tag(dt), 0, [=](Suite &s) {
               int64_t n = 1;
               for (int64_t d : c.shape)
                 n *= d;
               std::vector<double> values;
               for (int64_t i = 0; i < n; ++i)
                 values.push_back(double((i * 7919) % 2001 - 1000));
               TensorRef x = s.ints(dt, c.shape, values);
               TensorRef y = c.inPlace ? x : s.empty(dt, c.shape);
               cumSum(*s.ctx, "cumsum", c.axis, c.exclusive, c.reverse, x, y);
               return std::vector<TensorRef>{y};
             }});
  }

  // Long reductions split over blocks through a workspace (bias and
  // per-channel gradients), and the same without one.
  {
    struct R {
      const char *name;
      std::vector<int64_t> in;
      std::vector<int> axes;
      ReduceOp op;
      std::vector<int64_t> out;
    };
    for (R r :
         {R{"bias_grad", {64, 197, 96}, {0, 1}, ReduceOp::Sum, {96}},
          R{"channel", {16, 24, 30, 30}, {0, 2, 3}, ReduceOp::Sum, {24}},
          R{"channel_odd", {5, 7, 9, 13}, {0, 2, 3}, ReduceOp::Mean, {7}},
          R{"few_rows", {3, 50021}, {1}, ReduceOp::Mean, {3}},
          R{"outer_inner", {40, 3, 500, 5}, {0, 2}, ReduceOp::Max, {3, 5}}})
      for (bool split : {true, false})
        cases.push_back(
            {std::string("reduce_split_") + r.name +
                 (split ? "" : "_no_workspace"),
             1e-4, [=](Suite &s) {
               TensorRef x = s.random(DType::F32, r.in);
               TensorRef y = s.empty(DType::F32, r.out);
               TensorRef ws = s.empty(DType::F32, {64 * 1024});
               reduce(*s.ctx, "reduce", r.op, r.axes.data(), int(r.axes.size()),
                      x, y, split ? ws.data : nullptr, split ? ws.bytes() : 0);
               return std::vector<TensorRef>{y};
             }});
  }

  // Training-mode batch normalization (scalar and float4 paths, one and
  // several blocks per channel, fused relu) and its gradient, in place over
  // dY; the small case has 8 values per channel (ResNet-50's last stage at
  // 2 images of 64x64).
  {
    struct B {
      const char *name;
      std::vector<int64_t> shape;
      bool relu, workspace;
    };
    for (B b : {B{"odd_relu", {4, 12, 9, 9}, true, true},
                B{"vec", {6, 10, 8, 8}, false, true},
                B{"vec_no_workspace", {6, 10, 8, 8}, true, false},
                B{"long_channels", {32, 3, 40, 40}, false, true},
                B{"small_count", {2, 16, 2, 2}, false, true}})
      cases.push_back(
          {std::string("batch_norm_training_") + b.name, 5e-5, [=](Suite &s) {
             int64_t c = b.shape[1];
             TensorRef x = s.random(DType::F32, b.shape, 0.1, 3.0);
             TensorRef scale = s.random(DType::F32, {c}, 0.5, 1.5);
             TensorRef bias = s.random(DType::F32, {c});
             TensorRef y = s.empty(DType::F32, b.shape);
             TensorRef mean = s.empty(DType::F32, {c});
             TensorRef inv = s.empty(DType::F32, {c});
             TensorRef ws = s.empty(DType::F32, {c * 64});
             void *w = b.workspace ? ws.data : nullptr;
             size_t wb = b.workspace ? ws.bytes() : 0;
             batchNormTraining(*s.ctx, "bn", 1e-5f,
                               b.relu ? Activation::Relu : Activation::None, x,
                               scale, bias, y, mean, inv, w, wb);
             TensorRef runMean = s.random(DType::F32, {c});
             TensorRef runVar = s.random(DType::F32, {c}, 0.5, 1.5, true);
             batchNormRunningUpdate(*s.ctx, "bn_running", 0.9f, 1e-5f, mean,
                                    inv, runMean, runVar);
             TensorRef dy = s.random(DType::F32, b.shape);
             TensorRef dscale = s.empty(DType::F32, {c});
             TensorRef dbias = s.empty(DType::F32, {c});
             TensorRef dx = dy; // in place over dY
             batchNormTrainingGrad(*s.ctx, "bn_grad", x, dy, scale, mean, inv,
                                   dx, dscale, dbias, w, wb);
             return std::vector<TensorRef>{y,      mean, inv,    runMean,
                                           runVar, dx,   dscale, dbias};
           }});
  }
  // Mixed-precision training: low activations, f32 statistics and parameters.
  // Spatial sizes 81, 196 and 256 take one-element, 8-byte and 16-byte
  // loads.
  for (DType low : {DType::F16, DType::BF16})
    for (int64_t side : {9, 14, 16})
      cases.push_back(
          {std::string("batch_norm_training_") + tag(low) +
               (side == 9 ? "" : "_s" + std::to_string(side * side)),
           tol(low), [=](Suite &s) {
             std::vector<int64_t> shape = {4, 12, side, side};
             TensorRef x = s.random(low, shape, 0.1, 3.0);
             TensorRef scale = s.random(DType::F32, {12}, 0.5, 1.5);
             TensorRef bias = s.random(DType::F32, {12});
             TensorRef y = s.empty(low, shape);
             TensorRef mean = s.empty(DType::F32, {12});
             TensorRef inv = s.empty(DType::F32, {12});
             TensorRef ws = s.empty(DType::F32, {12 * 64});
             batchNormTraining(*s.ctx, "bn", 1e-5f, Activation::Relu, x, scale,
                               bias, y, mean, inv, ws.data, ws.bytes());
             TensorRef dy = s.random(low, shape);
             TensorRef dscale = s.empty(DType::F32, {12});
             TensorRef dbias = s.empty(DType::F32, {12});
             batchNormTrainingGrad(*s.ctx, "bn_grad", x, dy, scale, mean, inv,
                                   dy, dscale, dbias, ws.data, ws.bytes());
             return std::vector<TensorRef>{y, mean, inv, dy, dscale, dbias};
           }});
  for (DType low : {DType::F16, DType::BF16}) {
    cases.push_back(
        {std::string("layer_norm_grad_") + tag(low), tol(low), [=](Suite &s) {
           TensorRef x = s.random(low, {37, 96}, 0.1, 3.0);
           TensorRef dy = s.random(low, {37, 96});
           TensorRef scale = s.random(DType::F32, {96}, 0.5, 1.5);
           TensorRef dx = s.empty(low, {37, 96});
           TensorRef dscale = s.empty(DType::F32, {96});
           TensorRef dbias = s.empty(DType::F32, {96});
           TensorRef ws = s.empty(DType::F32, {16 * 1024 + 64 * 96});
           layerNormGrad(*s.ctx, "ln_grad", 1e-5f, x, dy, scale, dx, dscale,
                         dbias, ws.data, ws.bytes());
           return std::vector<TensorRef>{dx, dscale, dbias};
         }});
    // Updates with a low gradient under dynamic loss scaling: a clean step
    // (unscaled by 1 / 1024), then a skipped one (nothing written), the
    // scale's update after each, and the overflow check over a low gradient,
    // an f32 one and an accumulator.
    cases.push_back(
        {std::string("loss_scaled_updates_") + tag(low), 1e-5, [=](Suite &s) {
           const int64_t n = 10007;
           TensorRef param = s.random(DType::F32, {n});
           TensorRef m = s.empty(DType::F32, {n});
           TensorRef v = s.empty(DType::F32, {n});
           TensorRef w = s.random(DType::F32, {n});
           TensorRef buf = s.empty(DType::F32, {n});
           fill(*s.ctx, "zero", 0.0, m);
           fill(*s.ctx, "zero", 0.0, v);
           fill(*s.ctx, "zero", 0.0, buf);
           TensorRef grad = s.random(low, {n}, 10.0, 1000.0);
           TensorRef lr = s.upload(DType::F32, {}, {1e-2});
           TensorRef step = s.upload(DType::F32, {}, {2.0});
           TensorRef scale = s.upload(DType::F32, {}, {1024.0});
           TensorRef state = s.upload(DType::F32, {2}, {0.0, 1.0});
           TensorRef found = s.empty(DType::F32, {});
           TensorRef f32grad = s.random(DType::F32, {333});
           TensorRef sum = s.random(DType::F32, {n});
           TensorRef micro = s.upload(DType::F32, {}, {1.0});
           std::vector<double> values = s.read(grad);
           values[4321] = std::numeric_limits<double>::infinity();
           TensorRef bad = s.upload(low, {n}, values);
           std::vector<TensorRef> outputs;
           for (TensorRef g : {grad, bad}) {
             // The low gradient second: its inf is in chunk 1 of the
             // second tensor of the launch (kFoundInfChunk = 4096).
             TensorRef grads[2] = {f32grad, g};
             foundInf(*s.ctx, "found_inf", grads, 2, &sum, 1, &micro, found);
             outputs.push_back(s.empty(DType::F32, {}));
             copy(*s.ctx, "flag", found, outputs.back());
             LossScaling scaling{scale, found, state};
             adamwUpdate(*s.ctx, "adamw", 0.9f, 0.999f, 1e-8f, 1e-2f, param, g,
                         m, v, lr, step, nullptr, &scaling);
             sgdUpdate(*s.ctx, "sgd", 0.9f, 1e-2f, w, g, &buf, lr, nullptr,
                       &scaling);
             updateLossScale(*s.ctx, "scale", 2.0f, 0.5f, 3, scale, state,
                             found);
           }
           for (TensorRef t : {param, m, v, w, buf, scale, state})
             outputs.push_back(t);
           return outputs;
         }});
  }
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{37, 96}, std::vector<int64_t>{5, 7, 200},
        std::vector<int64_t>{1000, 33}})
    cases.push_back({"layer_norm_grad_" + std::to_string(shape.back()), 5e-5,
                     [=](Suite &s) {
                       int64_t cols = shape.back();
                       TensorRef x = s.random(DType::F32, shape, 0.1, 3.0);
                       TensorRef dy = s.random(DType::F32, shape);
                       TensorRef scale = s.random(DType::F32, {cols}, 0.5, 1.5);
                       TensorRef dx = s.empty(DType::F32, shape);
                       TensorRef dscale = s.empty(DType::F32, {cols});
                       TensorRef dbias = s.empty(DType::F32, {cols});
                       TensorRef ws =
                           s.empty(DType::F32, {16 * 1024 + 64 * cols});
                       layerNormGrad(*s.ctx, "ln_grad", 1e-5f, x, dy, scale, dx,
                                     dscale, dbias, ws.data, ws.bytes());
                       return std::vector<TensorRef>{dx, dscale, dbias};
                     }});

  // Data movement.
  cases.push_back({"transpose_nchw_nhwc_f16", 0, [](Suite &s) {
                     TensorRef x = s.random(DType::F16, {2, 16, 9, 7});
                     TensorRef y = s.empty(DType::F16, {2, 9, 7, 16});
                     int perm[4] = {0, 2, 3, 1};
                     transpose(*s.ctx, "transpose", perm, x, y);
                     return std::vector<TensorRef>{y};
                   }});
  cases.push_back(
      {"transpose_nhwc_nchw_i64_odd", 0, [](Suite &s) {
         TensorRef x = s.random(DType::I64, {3, 37, 5, 45}, 1, 1000);
         TensorRef y = s.empty(DType::I64, {3, 45, 37, 5});
         int perm[4] = {0, 3, 1, 2};
         transpose(*s.ctx, "transpose", perm, x, y);
         return std::vector<TensorRef>{y};
       }});
  cases.push_back({"transpose_2d_and_middle_u8", 0, [](Suite &s) {
                     TensorRef x = s.random(DType::U8, {70, 33}, 1, 200, true);
                     TensorRef y = s.empty(DType::U8, {33, 70});
                     int perm2[2] = {1, 0};
                     transpose(*s.ctx, "transpose2d", perm2, x, y);
                     TensorRef z = s.random(DType::F32, {2, 5, 3, 7});
                     TensorRef w = s.empty(DType::F32, {2, 3, 5, 7});
                     int perm4[4] = {0, 2, 1, 3};
                     transpose(*s.ctx, "transpose_mid", perm4, z, w);
                     return std::vector<TensorRef>{y, w};
                   }});
  // The copy paths of transpose / slice (Kernels.cu launchStridedCopy):
  // inner runs kept (Swin's window partition, head transposes) in 16- and
  // 8-byte vectors, a tiled transpose with batch dims on both sides of the
  // moved contiguous dim, and slices of whole, offset and reversed rows.
  cases.push_back({"transpose_window_partition_f16", 0, [](Suite &s) {
                     TensorRef x = s.random(DType::F16, {2, 3, 7, 4, 7, 12});
                     TensorRef y = s.empty(DType::F16, {2, 3, 4, 7, 7, 12});
                     TensorRef z = s.random(DType::F16, {2, 2, 7, 3, 7, 16});
                     TensorRef w = s.empty(DType::F16, {2, 2, 3, 7, 7, 16});
                     int perm[6] = {0, 1, 3, 2, 4, 5};
                     transpose(*s.ctx, "partition12", perm, x, y);
                     transpose(*s.ctx, "partition16", perm, z, w);
                     return std::vector<TensorRef>{y, w};
                   }});
  cases.push_back({"transpose_heads_f32_bf16", 0, [](Suite &s) {
                     TensorRef x = s.random(DType::F32, {2, 5, 3, 4, 8});
                     TensorRef y = s.empty(DType::F32, {3, 2, 4, 5, 8});
                     int perm[5] = {2, 0, 3, 1, 4};
                     transpose(*s.ctx, "qkv_heads", perm, x, y);
                     TensorRef a = s.random(DType::BF16, {3, 9, 4, 6});
                     TensorRef b = s.empty(DType::BF16, {3, 4, 9, 6});
                     int perm2[4] = {0, 2, 1, 3};
                     transpose(*s.ctx, "heads_odd", perm2, a, b);
                     return std::vector<TensorRef>{y, b};
                   }});
  cases.push_back(
      {"transpose_tiled_batch_dims", 0, [](Suite &s) {
         TensorRef x = s.random(DType::F32, {3, 5, 6, 37});
         TensorRef y = s.empty(DType::F32, {37, 5, 3, 6});
         int perm[4] = {3, 1, 0, 2};
         transpose(*s.ctx, "tiled_f32", perm, x, y);
         TensorRef a = s.random(DType::U8, {4, 33, 2, 9}, 1, 200, true);
         TensorRef b = s.empty(DType::U8, {2, 9, 4, 33});
         int perm2[4] = {2, 3, 0, 1};
         transpose(*s.ctx, "tiled_u8", perm2, a, b);
         TensorRef c = s.random(DType::I64, {6, 40, 3}, 1, 1000);
         TensorRef d = s.empty(DType::I64, {3, 6, 40});
         int perm3[3] = {2, 0, 1};
         transpose(*s.ctx, "tiled_i64", perm3, c, d);
         return std::vector<TensorRef>{y, b, d};
       }});
  cases.push_back({"slice_rows_vectorized", 0, [](Suite &s) {
                     TensorRef x = s.random(DType::F16, {4, 10, 24});
                     TensorRef y = s.empty(DType::F16, {2, 6, 24});
                     int64_t starts[3] = {1, 2, 0}, steps[3] = {1, 1, 1};
                     slice(*s.ctx, "whole_rows", starts, steps, x, y);
                     TensorRef a = s.empty(DType::F16, {4, 10, 16});
                     int64_t starts2[3] = {0, 0, 3};
                     slice(*s.ctx, "offset_rows", starts2, steps, x, a);
                     TensorRef b = s.empty(DType::F16, {4, 10, 20});
                     int64_t starts3[3] = {0, 0, 2};
                     slice(*s.ctx, "offset_rows_4b", starts3, steps, x, b);
                     TensorRef c = s.empty(DType::F16, {3, 5, 24});
                     int64_t starts4[3] = {3, 9, 0}, steps4[3] = {-1, -2, 1};
                     slice(*s.ctx, "reversed_rows", starts4, steps4, x, c);
                     TensorRef d = s.empty(DType::F16, {1, 10, 24});
                     int64_t starts5[3] = {2, 0, 0};
                     slice(*s.ctx, "one_block", starts5, steps, x, d);
                     return std::vector<TensorRef>{y, a, b, c, d};
                   }});
  cases.push_back({"gather_rows_vectorized", 0, [](Suite &s) {
                     TensorRef x = s.random(DType::F32, {3, 10, 12});
                     TensorRef idx = s.ints(DType::I64, {4}, {9, 0, -1, 4});
                     TensorRef y = s.empty(DType::F32, {3, 4, 12});
                     gather(*s.ctx, "gather_axis1", 1, x, idx, y);
                     TensorRef t = s.random(DType::F16, {50, 6});
                     TensorRef i2 = s.ints(DType::I32, {3}, {7, 49, 0});
                     TensorRef z = s.empty(DType::F16, {3, 6});
                     gather(*s.ctx, "gather_f16_rows", 0, t, i2, z);
                     return std::vector<TensorRef>{y, z};
                   }});
  cases.push_back({"slice_steps", 0, [](Suite &s) {
                     TensorRef x = s.random(DType::F32, {9, 20, 6});
                     TensorRef y = s.empty(DType::F32, {4, 7, 6});
                     int64_t starts[3] = {1, 19, 0}, steps[3] = {2, -3, 1};
                     slice(*s.ctx, "slice", starts, steps, x, y);
                     return std::vector<TensorRef>{y};
                   }});
  cases.push_back({"gather_embedding", 0, [](Suite &s) {
                     TensorRef table = s.random(DType::BF16, {1000, 64});
                     TensorRef idx = s.ints(DType::I64, {2, 3},
                                            {0, 999, -1, 17, -1000, 500});
                     TensorRef y = s.empty(DType::BF16, {2, 3, 64});
                     gather(*s.ctx, "gather", 0, table, idx, y);
                     return std::vector<TensorRef>{y};
                   }});
  cases.push_back({"gather_elements", 0, [](Suite &s) {
                     TensorRef x = s.random(DType::F32, {3, 5, 4});
                     std::vector<double> idx;
                     for (int i = 0; i < 3 * 2 * 4; ++i)
                       idx.push_back(double((i * 7) % 10 - 5));
                     TensorRef ind = s.ints(DType::I32, {3, 2, 4}, idx);
                     TensorRef y = s.empty(DType::F32, {3, 2, 4});
                     gatherElements(*s.ctx, "gather_elements", 1, x, ind, y);
                     return std::vector<TensorRef>{y};
                   }});
  // ScatterND: distinct row tuples (k = 2 of rank 3, some negative) for
  // "none"; repeated tuples for the reductions, which must apply every
  // update (CUDA: atomics on 8-, 4-, 2- and 1-byte elements, the last two
  // through the enclosing 32-bit word); u8 in place, wrapping.
  cases.push_back({"scatter_nd_none_rows_f32", 0, [](Suite &s) {
                     TensorRef data = s.random(DType::F32, {50, 33, 7});
                     std::vector<double> idx;
                     for (int t = 0; t < 40; ++t) {
                       idx.push_back(t % 2 ? t : t - 50);
                       idx.push_back((t * 5) % 33);
                     }
                     TensorRef ind = s.ints(DType::I64, {40, 2}, idx);
                     TensorRef up = s.random(DType::F32, {40, 7});
                     TensorRef y = s.empty(DType::F32, {50, 33, 7});
                     scatterND(*s.ctx, "scatter_none", ScatterReduction::None,
                               data, ind, up, y);
                     return std::vector<TensorRef>{y};
                   }});
  struct S {
    const char *name;
    DType dtype, indexType;
    ScatterReduction reduction;
    double tolerance;
  };
  for (S c : {S{"add_f32", DType::F32, DType::I64, ScatterReduction::Add, 1e-5},
              S{"mul_f16", DType::F16, DType::I32, ScatterReduction::Mul, 1e-2},
              S{"max_bf16", DType::BF16, DType::I64, ScatterReduction::Max, 0},
              S{"min_f64", DType::F64, DType::I64, ScatterReduction::Min, 0},
              S{"add_i64", DType::I64, DType::I32, ScatterReduction::Add, 0},
              S{"max_i32", DType::I32, DType::I64, ScatterReduction::Max, 0},
              S{"mul_i8", DType::I8, DType::I64, ScatterReduction::Mul, 0}})
    cases.push_back(
        {std::string("scatter_nd_") + c.name + "_repeated", c.tolerance,
         [=](Suite &s) {
           bool isInt = c.dtype == DType::I64 || c.dtype == DType::I32 ||
                        c.dtype == DType::I8;
           std::vector<double> values, idx;
           for (int i = 0; i < 999; ++i)
             values.push_back(isInt ? (i * 37) % 11 - 5 : 0.5 + (i % 7) * 0.25);
           TensorRef data = s.upload(c.dtype, {999}, values);
           // 3000 tuples over 999 elements: each is hit about 3 times.
           for (int t = 0; t < 3000; ++t)
             idx.push_back((t * 7919) % 999 - (t % 3 ? 0 : 999));
           TensorRef ind = s.ints(c.indexType, {3000, 1}, idx);
           std::vector<double> ups;
           for (int t = 0; t < 3000; ++t)
             ups.push_back(isInt ? (t * 13) % 7 - 3 : 0.75 + (t % 5) * 0.125);
           TensorRef up = s.upload(c.dtype, {3000}, ups);
           TensorRef y = s.empty(c.dtype, {999});
           scatterND(*s.ctx, c.name, c.reduction, data, ind, up, y);
           return std::vector<TensorRef>{y};
         }});
  cases.push_back({"scatter_nd_add_u8_in_place", 0, [](Suite &s) {
                     std::vector<double> values, idx, ups;
                     for (int i = 0; i < 301; ++i)
                       values.push_back(200 + i % 50);
                     TensorRef data = s.upload(DType::U8, {301}, values);
                     for (int t = 0; t < 903; ++t) {
                       idx.push_back((t * 101) % 301);
                       ups.push_back(20 + t % 30);
                     }
                     TensorRef ind = s.ints(DType::I64, {903, 1}, idx);
                     TensorRef up = s.upload(DType::U8, {903}, ups);
                     scatterND(*s.ctx, "scatter_u8", ScatterReduction::Add,
                               data, ind, up, data);
                     return std::vector<TensorRef>{data};
                   }});
  for (PadMode mode : {PadMode::Constant, PadMode::Reflect, PadMode::Edge})
    cases.push_back({"pad_mode" + std::to_string(int(mode)), 0, [=](Suite &s) {
                       TensorRef x = s.random(DType::F32, {2, 3, 5, 6});
                       TensorRef y = s.empty(DType::F32, {2, 3, 8, 10});
                       int64_t begin[4] = {0, 0, 2, 1}, end[4] = {0, 0, 1, 3};
                       pad(*s.ctx, "pad", mode, begin, end, -0.25, x, y);
                       return std::vector<TensorRef>{y};
                     }});
  for (CoordinateMode cm :
       {CoordinateMode::HalfPixel, CoordinateMode::AlignCorners,
        CoordinateMode::Asymmetric, CoordinateMode::PytorchHalfPixel})
    for (ResizeMode rm : {ResizeMode::Nearest, ResizeMode::Linear})
      cases.push_back(
          {"resize_" + std::to_string(int(rm)) + "_" + std::to_string(int(cm)),
           1e-5, [=](Suite &s) {
             TensorRef x = s.random(DType::F32, {2, 3, 7, 9});
             TensorRef y = s.empty(DType::F32, {2, 3, 15, 13});
             ResizeParams p;
             p.mode = rm;
             p.coordinateMode = cm;
             resize(*s.ctx, "resize", p, x, y);
             return std::vector<TensorRef>{y};
           }});
  cases.push_back({"concat_split", 0, [](Suite &s) {
                     TensorRef a = s.random(DType::F16, {2, 3, 5}),
                               b = s.random(DType::F16, {2, 7, 5});
                     TensorRef c = s.random(DType::F16, {2, 1, 5});
                     TensorRef y = s.empty(DType::F16, {2, 11, 5});
                     TensorRef parts[3] = {a, b, c};
                     concat(*s.ctx, "concat", 1, parts, 3, y);
                     TensorRef p0 = s.empty(DType::F16, {2, 4, 5}),
                               p1 = s.empty(DType::F16, {2, 7, 5});
                     TensorRef outs[2] = {p0, p1};
                     split(*s.ctx, "split", 1, y, outs, 2);
                     return std::vector<TensorRef>{y, p0, p1};
                   }});
  return cases;
}

/// Runs a small program three times through execute() (CUDA: eager, graph
/// capture, replay) with new input data each time.
std::vector<double> graphReplay(Suite &s) {
  struct State {
    TensorRef x, b, sum, y;
  } st;
  st.x = s.random(DType::F32, {64, 300});
  st.b = s.random(DType::F32, {300});
  st.sum = s.empty(DType::F32, {64, 300});
  st.y = s.empty(DType::F32, {64, 300});
  std::vector<double> all;
  for (int run = 0; run < 3; ++run) {
    std::vector<uint8_t> data(st.x.bytes());
    for (size_t i = 0; i < data.size() / 4; ++i) {
      float v = float(std::sin(double(i) * 0.01 + run) + 0.05);
      std::memcpy(data.data() + i * 4, &v, 4);
    }
    copyToDevice(*s.ctx, st.x.data, data.data(), data.size());
    execute(
        *s.ctx,
        [](Context &ctx, void *user) {
          State &st = *static_cast<State *>(user);
          binary(ctx, "add", BinaryOp::Add, st.x, st.b, st.sum);
          softmax(ctx, "softmax", 1, false, st.sum, st.y);
        },
        &st);
    std::vector<double> y = s.read(st.y);
    all.insert(all.end(), y.begin(), y.end());
  }
  return all;
}

/// Times a few large kernels (median of 20 runs after warm-up) and prints
/// effective bandwidth / throughput, for the performance notes.
int runPerf(Context *ctx, const std::string &filter) {
  struct Perf {
    std::string name;
    double bytes, flops;
    std::function<void(Suite &, std::vector<TensorRef> &)> setup;
    std::function<void(Context &, std::vector<TensorRef> &)> run;
  };
  const int64_t big = int64_t(1) << 26;
  std::vector<Perf> perfs = {
      {"add_f16_64M", 3.0 * 2 * big, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {big}), s.random(DType::F16, {big}),
              s.empty(DType::F16, {big})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         binary(c, "add", BinaryOp::Add, t[0], t[1], t[2]);
       }},
      {"rowbias_add_f16_8192x4096", 2.0 * 2 * 8192 * 4096, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {8192, 4096}), s.random(DType::F16, {4096}),
              s.empty(DType::F16, {8192, 4096})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         binary(c, "add", BinaryOp::Add, t[0], t[1], t[2]);
       }},
      {"gelu_bf16_64M", 2.0 * 2 * big, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::BF16, {big}), s.empty(DType::BF16, {big})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         unary(c, "gelu", UnaryOp::Gelu, 0, 0, t[0], t[1]);
       }},
      {"layernorm_f16_16384x1024", 2.0 * 2 * 16384 * 1024, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {16384, 1024}), s.random(DType::F16, {1024}),
              s.empty(DType::F16, {16384, 1024})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         layerNorm(c, "ln", 1, 1e-5f, t[0], t[1], nullptr, t[2]);
       }},
      {"softmax_f16_16384x1000", 2.0 * 2 * 16384 * 1000, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {16384, 1000}),
              s.empty(DType::F16, {16384, 1000})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         softmax(c, "sm", 1, false, t[0], t[1]);
       }},
      // BERT-base / GPT-2 small attention: 8 sequences x 12 heads x 512
      // tokens x 64; flops count both contractions over every score.
      {"attention_bf16_causal_kt_8x12x512x64", 0, 2.0 * 96 * 512 * 513 * 64,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::BF16, {8, 12, 512, 64}),
              s.random(DType::BF16, {8, 12, 64, 512}),
              s.random(DType::BF16, {8, 12, 512, 64}),
              s.empty(DType::BF16, {8, 12, 512, 64})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         AttentionParams p;
         p.scale = 0.125f;
         p.causal = true;
         p.keyTransposed = true;
         attention(c, "attn", p, t[0], t[1], t[2], nullptr, t[3]);
       }},
      {"attention_f16_8x12x512x128", 0, 4.0 * 96 * 512 * 512 * 128,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {8, 12, 512, 128}),
              s.random(DType::F16, {8, 12, 512, 128}),
              s.random(DType::F16, {8, 12, 512, 128}),
              s.empty(DType::F16, {8, 12, 512, 128})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         AttentionParams p;
         p.scale = 0.088f;
         attention(c, "attn", p, t[0], t[1], t[2], nullptr, t[3]);
       }},
      // The same attention unfused (cuBLASLt, softmax, cuBLASLt) with its
      // [8, 12, 512, 512] scores: the fused kernel's speed reference.
      {"unfused_attention_f16_8x12x512x64", 0, 4.0 * 96 * 512 * 512 * 64,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {8, 12, 512, 64}),
              s.random(DType::F16, {8, 12, 512, 64}),
              s.random(DType::F16, {8, 12, 512, 64}),
              s.empty(DType::F16, {8, 12, 512, 512}),
              s.empty(DType::F16, {8, 12, 512, 64})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         MatmulParams scores;
         scores.transB = true;
         scores.alpha = 0.125f;
         matmul(c, "qk", scores, t[0], t[1], nullptr, t[3]);
         softmax(c, "softmax", 3, false, t[3], t[3]);
         matmul(c, "pv", MatmulParams(), t[3], t[2], nullptr, t[4]);
       }},
      {"unfused_attention_f32_8x12x512x64", 0, 4.0 * 96 * 512 * 512 * 64,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F32, {8, 12, 512, 64}),
              s.random(DType::F32, {8, 12, 512, 64}),
              s.random(DType::F32, {8, 12, 512, 64}),
              s.empty(DType::F32, {8, 12, 512, 512}),
              s.empty(DType::F32, {8, 12, 512, 64})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         MatmulParams scores;
         scores.transB = true;
         scores.alpha = 0.125f;
         matmul(c, "qk", scores, t[0], t[1], nullptr, t[3]);
         softmax(c, "softmax", 3, false, t[3], t[3]);
         matmul(c, "pv", MatmulParams(), t[3], t[2], nullptr, t[4]);
       }},
      {"softmax_f32_2048x8192", 2.0 * 4 * 2048 * 8192, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F32, {2048, 8192}),
              s.empty(DType::F32, {2048, 8192})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         softmax(c, "sm", 1, false, t[0], t[1]);
       }},
      {"transpose_f16_nchw_nhwc_32x256x56x56", 2.0 * 2 * 32 * 256 * 56 * 56, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {32, 256, 56, 56}),
              s.empty(DType::F16, {32, 56, 56, 256})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         int perm[4] = {0, 2, 3, 1};
         transpose(c, "tr", perm, t[0], t[1]);
       }},
      {"transpose_f16_swin_window_32x8x7x8x7x96", 2.0 * 2 * 32 * 56 * 56 * 96,
       0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {32, 8, 7, 8, 7, 96}),
              s.empty(DType::F16, {32, 8, 8, 7, 7, 96})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         int perm[6] = {0, 1, 3, 2, 4, 5};
         transpose(c, "tr", perm, t[0], t[1]);
       }},
      {"transpose_f16_heads_8x512x12x64", 2.0 * 2 * 8 * 512 * 768, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {8, 512, 12, 64}),
              s.empty(DType::F16, {8, 12, 512, 64})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         int perm[4] = {0, 2, 1, 3};
         transpose(c, "tr", perm, t[0], t[1]);
       }},
      {"transpose_f16_keys_8x12x512x64", 2.0 * 2 * 8 * 512 * 768, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {8, 512, 12, 64}),
              s.empty(DType::F16, {8, 12, 64, 512})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         int perm[4] = {0, 2, 3, 1};
         transpose(c, "tr", perm, t[0], t[1]);
       }},
      {"slice_f32_half_rows_4096x2304", 2.0 * 4 * 4096 * 768, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F32, {4096, 2304}),
              s.empty(DType::F32, {4096, 768})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         int64_t starts[2] = {0, 768}, steps[2] = {1, 1};
         slice(c, "sl", starts, steps, t[0], t[1]);
       }},
      {"linear_cross_entropy_f16_gpt2_4096x768x50257", 0,
       8.0 * 4096 * 768 * 50257,
       [&](Suite &s, std::vector<TensorRef> &t) {
         std::vector<double> y;
         for (int64_t r = 0; r < 4096; ++r)
           y.push_back(double((r * 7919) % 50257));
         t = {s.random(DType::F16, {4096, 768}, 0.01, 0.1),
              s.random(DType::F16, {50257, 768}, 0.01, 0.1),
              s.ints(DType::I64, {4096}, y),
              s.empty(DType::F32, {}),
              s.empty(DType::F32, {4096}),
              s.upload(DType::F32, {}, {1.0}),
              s.empty(DType::F16, {4096, 768}),
              s.empty(DType::F16, {50257, 768}),
              s.empty(DType::U8, {int64_t(linearCrossEntropyWorkspaceBytes(
                                     4096, 50256, DType::F16))})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         LinearCrossEntropyParams p;
         size_t bytes = t[8].bytes();
         linearCrossEntropy(c, "lce", p, t[0], t[1], t[2], t[3], t[4],
                            t[8].data, bytes);
         linearCrossEntropyGrad(c, "lce_grad", p, t[0], t[1], t[2], t[4], t[5],
                                t[6], t[7], t[8].data, bytes);
       }},
      {"matmul_bf16_4096^3", 0, 2.0 * 4096 * 4096 * 4096,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::BF16, {4096, 4096}),
              s.random(DType::BF16, {4096, 4096}),
              s.empty(DType::BF16, {4096, 4096})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         matmul(c, "mm", MatmulParams(), t[0], t[1], nullptr, t[2]);
       }},
      {"matmul_f32_2048^3", 0, 2.0 * 2048 * 2048 * 2048,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F32, {2048, 2048}),
              s.random(DType::F32, {2048, 2048}),
              s.empty(DType::F32, {2048, 2048})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         matmul(c, "mm", MatmulParams(), t[0], t[1], nullptr, t[2]);
       }},
      {"conv3x3_f16_32x256x56x56", 0, 2.0 * 32 * 256 * 56 * 56 * 256 * 9,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {32, 256, 56, 56}),
              s.random(DType::F16, {256, 256, 3, 3}, 0.01, 0.1),
              s.empty(DType::F16, {32, 256, 56, 56}),
              s.empty(DType::U8, {64 << 20})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         ConvParams p;
         p.padsBegin[0] = p.padsBegin[1] = p.padsEnd[0] = p.padsEnd[1] = 1;
         conv(c, "conv", p, t[0], t[1], nullptr, t[2], t[3].data,
              convWorkspaceBound(p, t[0], t[1], t[2]));
       }},
      {"maxpool3x3s2_f16_32x64x112x112", 2.0 * 32 * 64 * (112 * 112 + 56 * 56),
       0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F16, {32, 64, 112, 112}),
              s.empty(DType::F16, {32, 64, 56, 56})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         PoolParams p;
         for (int i = 0; i < 2; ++i) {
           p.kernel[i] = 3;
           p.strides[i] = 2;
           p.padsBegin[i] = p.padsEnd[i] = 1;
         }
         pool(c, "pool", p, t[0], t[1]);
       }},
      {"reduce_mean_last_f32_8192x4096", 4.0 * 8192 * 4096, 0,
       [&](Suite &s, std::vector<TensorRef> &t) {
         t = {s.random(DType::F32, {8192, 4096}), s.empty(DType::F32, {8192})};
       },
       [](Context &c, std::vector<TensorRef> &t) {
         int axes[1] = {1};
         reduce(c, "mean", ReduceOp::Mean, axes, 1, t[0], t[1]);
       }},
  };
  // Attention as the compiler's programs call it: the fused kernel (no
  // workspace) against the chunked cuBLASLt path with a workspace that holds
  // 1 / chunks of the batch's scores. BERT-base / GPT-2 small (12 heads x
  // 512 x 64) at 8 and 1 sequences, ViT-B/16 (197 tokens) at 32 images.
  struct AttentionPerf {
    const char *model;
    int64_t batch, tokens;
    DType dtype;
    std::vector<int64_t> chunks;
  };
  for (const AttentionPerf &a :
       {AttentionPerf{"bert", 8, 512, DType::F32, {0, 1, 4, 8, 16}},
        AttentionPerf{"bert", 8, 512, DType::F16, {0, 1, 8}},
        AttentionPerf{"bert", 1, 512, DType::F32, {0, 1, 2, 4, 12}},
        AttentionPerf{"vit", 32, 197, DType::F32, {0, 1, 2, 8, 16}},
        AttentionPerf{"vit", 1, 197, DType::F32, {0, 1, 2, 12}}})
    for (int64_t chunks : a.chunks) {
      int64_t heads = a.batch * 12, tokens = a.tokens;
      std::vector<int64_t> shape = {a.batch, 12, tokens, 64};
      DType dt = a.dtype;
      size_t workspaceBytes =
          chunks ? attentionChunkBytes((heads + chunks - 1) / chunks, tokens,
                                       tokens, dt)
                 : 0;
      std::string name =
          std::string("attention_") + a.model + "_b" + std::to_string(a.batch) +
          "_" + dtypeName(dt) +
          (chunks ? "_chunks" + std::to_string(chunks) : std::string("_fused"));
      perfs.push_back(
          {name, 0, 4.0 * double(heads) * tokens * tokens * 64,
           [=](Suite &s, std::vector<TensorRef> &t) {
             t = {s.random(dt, shape), s.random(dt, shape), s.random(dt, shape),
                  s.empty(dt, shape),
                  s.empty(DType::F32,
                          {std::max<int64_t>(1, int64_t(workspaceBytes / 4))})};
           },
           [=](Context &c, std::vector<TensorRef> &t) {
             AttentionParams p;
             p.scale = 0.125f;
             attention(c, "attn", p, t[0], t[1], t[2], nullptr, t[3],
                       workspaceBytes ? t[4].data : nullptr, workspaceBytes);
           }});
    }

  // The attention backward (f32, and f16 as mixed-precision training runs
  // it) at ViT-B/16 (32 images x 12 heads x 197
  // tokens x 64) and GPT-2 small (8 x 12 heads x 512 x 64, causal): the
  // fused kernels against the chunked path with a workspace for 1 / chunks
  // of the batch; and the forward with its row statistics (training's
  // forward) against the plain one above. Flops: the five products of the
  // backward (two recomputed) over the unmasked scores.
  struct BackwardPerf {
    const char *model;
    int64_t batch, tokens;
    bool causal;
    std::vector<int64_t> chunks;
  };
  for (const BackwardPerf &a :
       {BackwardPerf{"vit", 32, 197, false, {0, 1, 2, 4}},
        BackwardPerf{"gpt2", 8, 512, true, {0, 1, 2, 4, 8}}})
    for (DType dt : {DType::F32, DType::F16})
      for (int64_t chunks : a.chunks) {
        int64_t heads = a.batch * 12, tokens = a.tokens;
        std::vector<int64_t> shape = {a.batch, 12, tokens, 64};
        std::vector<int64_t> statShape = {a.batch, 12, tokens, 2};
        int64_t items = chunks ? (heads + chunks - 1) / chunks : 0;
        size_t forwardBytes =
            chunks ? attentionChunkBytes(items, tokens, tokens, dt) : 0;
        size_t backwardBytes =
            chunks ? attentionBackwardChunkBytes(items, tokens, tokens, dt) : 0;
        double scores = a.causal ? double(tokens) * (tokens + 1) / 2
                                 : double(tokens) * tokens;
        std::string suffix = std::string("_b") + std::to_string(a.batch) +
                             (chunks ? "_chunks" + std::to_string(chunks)
                                     : std::string("_fused")) +
                             (dt == DType::F32 ? "" : "_f16");
        auto setup = [=](Suite &s, std::vector<TensorRef> &t) {
          t = {s.random(dt, shape),
               s.random(dt, shape),
               s.random(dt, shape),
               s.empty(dt, shape),
               s.empty(DType::F32, statShape),
               s.random(dt, shape, 0.1, 1.0),
               s.empty(dt, shape),
               s.empty(dt, shape),
               s.empty(dt, shape),
               s.empty(DType::F32,
                       {std::max<int64_t>(
                           1, int64_t(std::max(forwardBytes, backwardBytes) /
                                      4))})};
          AttentionParams p;
          p.scale = 0.125f;
          p.causal = a.causal;
          attention(*s.ctx, "attn", p, t[0], t[1], t[2], nullptr, t[3],
                    forwardBytes ? t[9].data : nullptr, forwardBytes, &t[4]);
        };
        perfs.push_back({std::string("attention_fwd_lse_") + a.model + suffix,
                         0, 4.0 * heads * scores * 64, setup,
                         [=](Context &c, std::vector<TensorRef> &t) {
                           AttentionParams p;
                           p.scale = 0.125f;
                           p.causal = a.causal;
                           attention(c, "attn", p, t[0], t[1], t[2], nullptr,
                                     t[3], forwardBytes ? t[9].data : nullptr,
                                     forwardBytes, &t[4]);
                         }});
        perfs.push_back({std::string("attention_bwd_") + a.model + suffix, 0,
                         10.0 * heads * scores * 64, setup,
                         [=](Context &c, std::vector<TensorRef> &t) {
                           AttentionParams p;
                           p.scale = 0.125f;
                           p.causal = a.causal;
                           attentionBackward(
                               c, "attn_grad", p, t[0], t[1], t[2], nullptr,
                               t[3], t[5], t[4], t[6], t[7], t[8], nullptr,
                               backwardBytes ? t[9].data : nullptr,
                               backwardBytes);
                         }});
      }

  for (Perf &p : perfs) {
    if (!filter.empty() && p.name.find(filter) == std::string::npos)
      continue;
    Suite suite;
    suite.ctx = ctx;
    std::vector<TensorRef> tensors;
    p.setup(suite, tensors);
    for (int i = 0; i < 3; ++i)
      p.run(*ctx, tensors);
    synchronize(*ctx);
    std::vector<double> times;
    for (int i = 0; i < 20; ++i) {
      timerStart(*ctx);
      p.run(*ctx, tensors);
      times.push_back(timerStopMs(*ctx));
    }
    std::sort(times.begin(), times.end());
    double ms = times[times.size() / 2];
    if (const char *error = contextError(*ctx)) {
      std::printf("perf %s: error %s\n", p.name.c_str(), error);
      return 1;
    }
    std::printf("perf %-40s %9.4f ms", p.name.c_str(), ms);
    if (p.bytes > 0)
      std::printf("  %8.1f GB/s", p.bytes / ms / 1e6);
    if (p.flops > 0)
      std::printf("  %8.1f TFLOP/s", p.flops / ms / 1e9);
    std::printf("\n");
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string mode = argc >= 2 ? argv[1] : "";
  if (mode == "--perf") {
    // The attention cases time exactly the chunk counts they name, on
    // memopt's kernels (MEMOPT_ATTENTION_ENGINE=cudnn times cuDNN's instead;
    // bench/attention_sdpa_bench.py compares the engines).
    ContextOptions options;
    options.attentionMaxChunks = 1 << 20;
    options.attentionMinChunkScores = 0;
    options.cudnnAttention = false;
    Context *ctx = createContext(options);
    int status = contextError(*ctx) ? 1 : runPerf(ctx, argc > 2 ? argv[2] : "");
    destroyContext(ctx);
    return status;
  }
  if (argc < 3 || (mode != "--out" && mode != "--compare")) {
    std::fprintf(stderr,
                 "usage: %s (--out|--compare) DIR [filter] | --perf [filter]\n",
                 argv[0]);
    return 2;
  }
  std::string dir = argv[2], filter = argc > 3 ? argv[3] : "";
  // Chunked attention on the suite's small shapes too.
  ContextOptions options;
  options.attentionMinChunkScores = 0;
  Context *ctx = createContext(options);
  options.cudnnAttention = false;
  Context *kernels = createContext(options);
  for (Context *c : {ctx, kernels})
    if (const char *error = contextError(*c)) {
      std::fprintf(stderr, "error: %s\n", error);
      return 1;
    }
  std::vector<Case> cases = buildCases();
  cases.push_back({"graph_replay", 1e-5, nullptr});
  int failures = 0, passed = 0;
  for (const Case &c : cases) {
    if (!filter.empty() && c.name.find(filter) == std::string::npos)
      continue;
    std::vector<double> values;
    {
      Suite suite;
      suite.ctx = ctx;
      suite.kernels = kernels;
      suite.name = c.name;
      if (c.run) {
        std::vector<TensorRef> outputs = c.run(suite);
        for (const TensorRef &t : outputs) {
          std::vector<double> v = suite.read(t);
          values.insert(values.end(), v.begin(), v.end());
        }
      } else {
        values = graphReplay(suite);
      }
      synchronize(*ctx);
    }
    for (Context *context : {ctx, kernels})
      if (const char *error = contextError(*context)) {
        std::printf("FAIL %s: runtime error: %s\n", c.name.c_str(), error);
        return 1;
      }
    std::string path = dir + "/" + c.name + ".npy";
    std::string error;
    if (mode == "--out") {
      NpyArray array;
      array.dtype = DType::F64;
      array.shape = {int64_t(values.size())};
      array.data.resize(values.size() * 8);
      std::memcpy(array.data.data(), values.data(), array.data.size());
      if (!writeNpy(path, array, error)) {
        std::fprintf(stderr, "error: %s\n", error.c_str());
        return 1;
      }
      ++passed;
      continue;
    }
    NpyArray other;
    if (!readNpy(path, other, error)) {
      std::printf("FAIL %s: %s\n", c.name.c_str(), error.c_str());
      ++failures;
      continue;
    }
    const double *theirs = reinterpret_cast<const double *>(other.data.data());
    if (size_t(other.numElements()) != values.size()) {
      std::printf("FAIL %s: %lld values, expected %zu\n", c.name.c_str(),
                  (long long)other.numElements(), values.size());
      ++failures;
      continue;
    }
    double worst = 0;
    size_t worstAt = 0, bad = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      // Equal infinities match (a fully masked attention row's -inf
      // statistics on both backends); a NaN on either side is an error and
      // stays the reported worst.
      double err = theirs[i] == values[i] ? 0.0
                                          : std::fabs(theirs[i] - values[i]) /
                                                (1.0 + std::fabs(values[i]));
      if (!(err <= c.tolerance))
        ++bad;
      if (std::isnan(err) ? !std::isnan(worst) : err > worst) {
        worst = err;
        worstAt = i;
      }
    }
    if (bad) {
      std::printf(
          "FAIL %s: %zu of %zu values off (worst %.3g at %zu: got %.6g, "
          "host %.6g, tolerance %.1g)\n",
          c.name.c_str(), bad, values.size(), worst, worstAt, theirs[worstAt],
          values[worstAt], c.tolerance);
      ++failures;
    } else {
      std::printf("PASS %s (%zu values, max rel err %.2g)\n", c.name.c_str(),
                  values.size(), worst);
      ++passed;
    }
  }
  if (mode == "--out" && *attentionEngineReport(*ctx))
    std::printf("attention engines:\n%s", attentionEngineReport(*ctx));
  destroyContext(kernels);
  destroyContext(ctx);
  std::printf("%s: %d passed, %d failed\n", failures ? "FAILED" : "ALL PASSED",
              passed, failures);
  return failures ? 1 : 0;
}
