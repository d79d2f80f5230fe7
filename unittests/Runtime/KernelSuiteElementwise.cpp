//===- KernelSuiteElementwise.cpp - the suite's elementwise cases ---------===//
//
// The kernel suite's elementwise cases (KernelSuite.cpp runs them): unary,
// binary and fused elementwise programs, ReLU's gradient, comparisons,
// IsNaN, Range and casts.
//
//===----------------------------------------------------------------------===//

#include "KernelSuite.h"

#include <cmath>

namespace memopt::rt::suite {

void addElementwiseCases(std::vector<Case> &cases) {
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
}

} // namespace memopt::rt::suite
