//===- HostEvaluator.cpp - constants evaluated by the host kernels --------===//
//
// HostConstantEvaluator (include/memopt/Evaluate/HostEvaluator.h): gathers
// the constant operands' bytes (an inline `dense` attribute's storage, a
// splat expanded, booleans as one byte each, a `dense_resource` blob read
// in place), calls the host runtime's entry point for the op with
// TensorRefs over them, and turns the result bytes back into attributes.
// The op -> call mapping mirrors the program emitter's
// (lib/Conversion/Emit*.cpp), so a folded constant holds exactly what the
// host program would have computed.
//
// Why the compiler links memopt_runtime_host: the runtime knows nothing of
// MLIR and the host backend is plain C++ with no device dependency, so the
// dependency points one way (evaluator -> runtime), and every op the
// runtime learns folds at import without a second implementation.
// Taken from XLA's HloConstantFolding and onnxruntime's constant folding
// (which calls its CPU kernels the same way).
//
//===----------------------------------------------------------------------===//

#include "memopt/Evaluate/HostEvaluator.h"

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/WeightBlobs.h"
#include "memopt/Runtime/Runtime.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

using namespace mlir;
using namespace mlir::memopt;
namespace rt = ::memopt::rt;

namespace {

/// One operand or result: its bytes (owned when they had to be copied) and
/// the TensorRef the kernel sees.
struct Buffer {
  std::vector<uint64_t> storage;
  rt::TensorRef ref;
};

std::optional<rt::DType> runtimeType(Type type) {
  if (type.isF32())
    return rt::DType::F32;
  if (type.isF16())
    return rt::DType::F16;
  if (type.isBF16())
    return rt::DType::BF16;
  if (type.isF64())
    return rt::DType::F64;
  if (type.isInteger(64))
    return rt::DType::I64;
  if (type.isInteger(32))
    return rt::DType::I32;
  if (type.isUnsignedInteger(8))
    return rt::DType::U8;
  if (type.isInteger(8))
    return rt::DType::I8;
  if (type.isInteger(1))
    return rt::DType::Bool;
  return std::nullopt;
}

/// A TensorRef of `type` over `data`; false for types or ranks the runtime
/// lacks.
bool describe(RankedTensorType type, void *data, rt::TensorRef &ref) {
  std::optional<rt::DType> dtype = runtimeType(type.getElementType());
  ArrayRef<int64_t> shape = type.getShape();
  if (!dtype || int64_t(shape.size()) > rt::kMaxRank)
    return false;
  ref.data = data;
  ref.dtype = *dtype;
  ref.rank = int(shape.size());
  for (auto [index, dim] : llvm::enumerate(shape))
    ref.shape[index] = dim;
  return true;
}

/// The bytes of constant `value` (of `type`) in runtime layout; false when
/// they cannot be had (an elided resource, an unknown attribute kind).
bool operandBuffer(Attribute value, RankedTensorType type, Buffer &buffer) {
  int64_t count = type.getNumElements();
  std::optional<rt::DType> dtype = runtimeType(type.getElementType());
  if (!dtype)
    return false;
  size_t width = rt::dtypeSize(*dtype);
  size_t bytes = size_t(count) * width;
  auto own = [&]() -> char * {
    buffer.storage.assign((bytes + 7) / 8 + 1, 0);
    return reinterpret_cast<char *>(buffer.storage.data());
  };
  if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
    if (dense.getType() != type)
      return false;
    if (type.getElementType().isInteger(1)) {
      char *out = own();
      int64_t index = 0;
      for (bool element : dense.getValues<bool>())
        out[index++] = element ? 1 : 0;
      return describe(type, out, buffer.ref);
    }
    ArrayRef<char> raw = dense.getRawData();
    if (dense.isSplat()) {
      if (raw.size() != width)
        return false;
      char *out = own();
      for (int64_t i = 0; i < count; ++i)
        std::memcpy(out + i * width, raw.data(), width);
      return describe(type, out, buffer.ref);
    }
    if (raw.size() != bytes)
      return false;
    // Inputs are only read; the storage is copied when misaligned.
    const char *data = raw.data();
    if (reinterpret_cast<uintptr_t>(data) % 8) {
      char *out = own();
      std::memcpy(out, data, bytes);
      data = out;
    }
    return describe(type, const_cast<char *>(data), buffer.ref);
  }
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    if (resource.getType() != type || type.getElementType().isInteger(1))
      return false;
    ArrayRef<char> raw = getWeightData(cast<ElementsAttr>(value));
    if (raw.size() != bytes || raw.empty())
      return false;
    const char *data = raw.data();
    if (reinterpret_cast<uintptr_t>(data) % 8) {
      char *out = own();
      std::memcpy(out, data, bytes);
      data = out;
    }
    return describe(type, const_cast<char *>(data), buffer.ref);
  }
  return false;
}

/// The ONNX node name of a location, for the kernels' messages.
std::string nodeName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (auto found = nodeName(inner); !found.empty())
        return found;
  return "";
}

double toDouble(APFloat value) {
  bool losesInfo = false;
  value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                &losesInfo);
  return value.convertToDouble();
}

int normalizeAxis(int64_t axis, int64_t rank) {
  return int(axis < 0 ? axis + rank : axis);
}

/// conv / convTranspose with the emitter's parameters (emitConv); the host
/// kernels need no workspace.
bool convolution(rt::Context &ctx, Operation *op, const char *node,
                 ArrayRef<Buffer> in, rt::TensorRef y, ArrayRef<int64_t> kernel,
                 ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                 ArrayRef<int64_t> dilations, int64_t group,
                 ArrayRef<int64_t> outputPadding, bool channelsLast,
                 bool transposed) {
  size_t spatial = kernel.size();
  if (spatial < 1 || spatial > 3 || strides.size() != spatial ||
      dilations.size() != spatial || pads.size() != 2 * spatial)
    return false;
  rt::ConvParams params;
  params.spatialRank = int(spatial);
  for (size_t i = 0; i < spatial; ++i) {
    params.padsBegin[i] = pads[i];
    params.padsEnd[i] = pads[spatial + i];
    params.strides[i] = strides[i];
    params.dilations[i] = dilations[i];
    if (i < outputPadding.size())
      params.outputPadding[i] = outputPadding[i];
  }
  params.group = group;
  params.channelsLast = channelsLast;
  // The bias is the third operand when present.
  rt::TensorRef bias = in.size() > 2 ? in[2].ref : rt::TensorRef();
  const rt::TensorRef *biasRef = in.size() > 2 ? &bias : nullptr;
  if (transposed)
    rt::convTranspose(ctx, node, params, in[0].ref, in[1].ref, biasRef, y,
                      nullptr, 0);
  else
    rt::conv(ctx, node, params, in[0].ref, in[1].ref, biasRef, y, nullptr, 0);
  return true;
}

/// pool with the emitter's parameters (emitPool).
bool pooling(rt::Context &ctx, const char *node, rt::TensorRef x,
             rt::TensorRef y, rt::PoolKind kind, ArrayRef<int64_t> kernel,
             ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
             ArrayRef<int64_t> dilations, bool ceilMode, bool countIncludePad,
             bool channelsLast) {
  size_t spatial = kernel.size();
  if (spatial < 1 || spatial > 3 || strides.size() != spatial ||
      pads.size() != 2 * spatial)
    return false;
  rt::PoolParams params;
  params.kind = kind;
  params.spatialRank = int(spatial);
  for (size_t i = 0; i < spatial; ++i) {
    params.kernel[i] = kernel[i];
    params.padsBegin[i] = pads[i];
    params.padsEnd[i] = pads[spatial + i];
    params.strides[i] = strides[i];
    params.dilations[i] = i < dilations.size() ? dilations[i] : 1;
  }
  params.ceilMode = ceilMode;
  params.countIncludePad = countIncludePad;
  params.channelsLast = channelsLast;
  rt::pool(ctx, node, params, x, y);
  return true;
}

/// Calls `op`'s host kernel on `in` (one per operand) writing `out` (one
/// per result); false when the evaluator has no call for the op.
bool callKernel(rt::Context &ctx, Operation *op, const char *node,
                ArrayRef<Buffer> in, MutableArrayRef<Buffer> out) {
  auto x = [&](unsigned i) { return in[i].ref; };
  rt::TensorRef y = out.empty() ? rt::TensorRef() : out[0].ref;
  auto unary = [&](rt::UnaryOp kind, double alpha = 0, double beta = 0) {
    rt::unary(ctx, node, kind, float(alpha), float(beta), x(0), y);
    return true;
  };
  auto binary = [&](rt::BinaryOp kind) {
    rt::binary(ctx, node, kind, x(0), x(1), y);
    return true;
  };
  auto compare = [&](rt::CompareOp kind) {
    rt::compare(ctx, node, kind, x(0), x(1), y);
    return true;
  };
  auto logical = [&](rt::LogicalOp kind) {
    rt::logical(ctx, node, kind, x(0), x(1), y);
    return true;
  };
  auto reduce = [&](rt::ReduceOp kind, ArrayRef<int64_t> axes) {
    int64_t rank = x(0).rank;
    SmallVector<int> normalized;
    for (int64_t axis : axes)
      normalized.push_back(normalizeAxis(axis, rank));
    if (normalized.empty())
      for (int axis = 0; axis < rank; ++axis)
        normalized.push_back(axis);
    llvm::sort(normalized);
    normalized.erase(llvm::unique(normalized), normalized.end());
    if (rt::isFloatType(x(0).dtype)) {
      rt::reduce(ctx, node, kind, normalized.data(), int(normalized.size()),
                 x(0), y);
      return true;
    }
    // The reduction kernels take floats. Integer shape arithmetic (the
    // largest of a few lengths, their sum) goes through f32 where that is
    // exact: every operand and result below 2^24 in magnitude (the kernel
    // accumulates in double). The mean of integers truncates in ONNX, so it
    // is left alone.
    bool wide = x(0).dtype == rt::DType::I64;
    if ((!wide && x(0).dtype != rt::DType::I32) || kind == rt::ReduceOp::Mean)
      return false;
    constexpr double kExact = double(1 << 24);
    std::vector<float> xs(size_t(x(0).numElements())),
        ys(size_t(y.numElements()));
    for (size_t i = 0; i < xs.size(); ++i) {
      double v = wide ? double(static_cast<const int64_t *>(x(0).data)[i])
                      : double(static_cast<const int32_t *>(x(0).data)[i]);
      if (std::fabs(v) >= kExact)
        return false;
      xs[i] = float(v);
    }
    rt::TensorRef xf = x(0), yf = y;
    xf.data = xs.data();
    yf.data = ys.data();
    xf.dtype = yf.dtype = rt::DType::F32;
    rt::reduce(ctx, node, kind, normalized.data(), int(normalized.size()), xf,
               yf);
    for (size_t i = 0; i < ys.size(); ++i) {
      if (!(std::fabs(ys[i]) < kExact))
        return false;
      if (wide)
        static_cast<int64_t *>(y.data)[i] = int64_t(ys[i]);
      else
        static_cast<int32_t *>(y.data)[i] = int32_t(ys[i]);
    }
    return true;
  };
  constexpr double kFloatMax = std::numeric_limits<float>::infinity();
  using rt::UnaryOp;
  return llvm::TypeSwitch<Operation *, bool>(op)
      // Elementwise (EmitElementwise.cpp).
      .Case([&](ReluOp) { return unary(UnaryOp::Relu); })
      .Case([&](ExpOp) { return unary(UnaryOp::Exp); })
      .Case([&](LogOp) { return unary(UnaryOp::Log); })
      .Case([&](SqrtOp) { return unary(UnaryOp::Sqrt); })
      .Case([&](ReciprocalOp) { return unary(UnaryOp::Reciprocal); })
      .Case([&](NegOp) { return unary(UnaryOp::Neg); })
      .Case([&](AbsOp) { return unary(UnaryOp::Abs); })
      .Case([&](SigmoidOp) { return unary(UnaryOp::Sigmoid); })
      .Case([&](TanhOp) { return unary(UnaryOp::Tanh); })
      .Case([&](ErfOp) { return unary(UnaryOp::Erf); })
      .Case([&](SinOp) { return unary(UnaryOp::Sin); })
      .Case([&](CosOp) { return unary(UnaryOp::Cos); })
      .Case([&](NotOp) { return unary(UnaryOp::Not); })
      .Case([&](HardSwishOp) { return unary(UnaryOp::HardSwish); })
      .Case([&](LeakyReluOp leaky) {
        return unary(UnaryOp::LeakyRelu, toDouble(leaky.getAlpha()));
      })
      .Case([&](HardSigmoidOp hard) {
        return unary(UnaryOp::HardSigmoid, toDouble(hard.getAlpha()),
                     toDouble(hard.getBeta()));
      })
      .Case([&](GeluOp gelu) {
        return unary(gelu.getApproximate() == "tanh" ? UnaryOp::GeluTanh
                                                     : UnaryOp::Gelu);
      })
      .Case([&](ClipOp clip) {
        std::optional<APFloat> low = clip.getMin(), high = clip.getMax();
        return unary(UnaryOp::Clip, low ? toDouble(*low) : -kFloatMax,
                     high ? toDouble(*high) : kFloatMax);
      })
      .Case([&](AddOp) { return binary(rt::BinaryOp::Add); })
      .Case([&](SubOp) { return binary(rt::BinaryOp::Sub); })
      .Case([&](MulOp) { return binary(rt::BinaryOp::Mul); })
      .Case([&](DivOp) { return binary(rt::BinaryOp::Div); })
      .Case([&](PowOp) { return binary(rt::BinaryOp::Pow); })
      .Case([&](ModOp mod) {
        return binary(mod.getFmod() ? rt::BinaryOp::FMod : rt::BinaryOp::Mod);
      })
      .Case([&](MinOp) { return binary(rt::BinaryOp::Min); })
      .Case([&](MaxOp) { return binary(rt::BinaryOp::Max); })
      .Case([&](EqualOp) { return compare(rt::CompareOp::Equal); })
      .Case([&](LessOp) { return compare(rt::CompareOp::Less); })
      .Case([&](GreaterOp) { return compare(rt::CompareOp::Greater); })
      .Case([&](AndOp) { return logical(rt::LogicalOp::And); })
      .Case([&](OrOp) { return logical(rt::LogicalOp::Or); })
      .Case([&](IsNaNOp) {
        rt::isNaN(ctx, node, x(0), y);
        return true;
      })
      .Case([&](CastOp) {
        rt::cast(ctx, node, x(0), y);
        return true;
      })
      .Case([&](WhereOp) {
        rt::where(ctx, node, x(0), x(1), x(2), y);
        return true;
      })
      .Case([&](RangeOp) {
        rt::range(ctx, node, x(0), x(2), y);
        return true;
      })
      // Views: the same bytes under the result's shape.
      .Case<ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp, IdentityOp>(
          [&](Operation *) {
            rt::copy(ctx, node, x(0), y);
            return true;
          })
      // Products and normalizations (EmitNeuralNet.cpp).
      .Case([&](MatMulOp) {
        // ONNX's 1-D operands: a row (A) or a column (B), the unit
        // dimension dropped from the result (the emitter's emitMatMul).
        rt::TensorRef a = x(0), b = x(1), c = y;
        if (c.rank + (a.rank == 1) + (b.rank == 1) > rt::kMaxRank)
          return false;
        if (a.rank == 1) {
          a.shape[1] = a.shape[0];
          a.shape[0] = 1;
          a.rank = 2;
          int insertAt = c.rank - (b.rank == 1 ? 0 : 1);
          for (int i = c.rank; i > insertAt; --i)
            c.shape[i] = c.shape[i - 1];
          c.shape[insertAt] = 1;
          ++c.rank;
        }
        if (b.rank == 1) {
          b.shape[1] = 1;
          b.rank = 2;
          c.shape[c.rank++] = 1;
        }
        rt::matmul(ctx, node, rt::MatmulParams(), a, b, nullptr, c);
        return true;
      })
      .Case([&](GemmOp gemm) {
        if (gemm.getActivation() != "none")
          return false;
        rt::MatmulParams params;
        params.transA = gemm.getTransA();
        params.transB = gemm.getTransB();
        params.alpha = float(toDouble(gemm.getAlpha()));
        params.beta = float(toDouble(gemm.getBeta()));
        rt::TensorRef c = gemm.getC() ? x(2) : rt::TensorRef();
        rt::matmul(ctx, node, params, x(0), x(1), gemm.getC() ? &c : nullptr,
                   y);
        return true;
      })
      .Case([&](SoftmaxOp softmax) {
        rt::softmax(ctx, node, normalizeAxis(softmax.getAxis(), x(0).rank),
                    /*logSoftmax=*/false, x(0), y);
        return true;
      })
      .Case([&](LayerNormalizationOp norm) {
        rt::TensorRef bias = norm.getB() ? x(2) : rt::TensorRef();
        rt::layerNorm(ctx, node, normalizeAxis(norm.getAxis(), x(0).rank),
                      float(toDouble(norm.getEpsilon())), x(0), x(1),
                      norm.getB() ? &bias : nullptr, y);
        return true;
      })
      .Case([&](BatchNormalizationOp norm) {
        rt::batchNorm(ctx, node, float(toDouble(norm.getEpsilon())), x(0), x(1),
                      x(2), x(3), x(4), y, norm.getChannelsLast());
        return true;
      })
      .Case([&](ConvOp conv) {
        if (conv.getActivation() != "none")
          return false;
        return convolution(ctx, op, node, in, y, conv.getKernelShape(),
                           conv.getStrides(), conv.getPads(),
                           conv.getDilations(), conv.getGroup(), {},
                           conv.getChannelsLast(), /*transposed=*/false);
      })
      .Case([&](ConvTransposeOp conv) {
        return convolution(ctx, op, node, in, y, conv.getKernelShape(),
                           conv.getStrides(), conv.getPads(),
                           conv.getDilations(), conv.getGroup(),
                           conv.getOutputPadding(), conv.getChannelsLast(),
                           /*transposed=*/true);
      })
      .Case([&](MaxPoolOp pool) {
        return pooling(ctx, node, x(0), y, rt::PoolKind::Max,
                       pool.getKernelShape(), pool.getStrides(), pool.getPads(),
                       pool.getDilations(), pool.getCeilMode() != 0, false,
                       pool.getChannelsLast());
      })
      .Case([&](AveragePoolOp pool) {
        return pooling(ctx, node, x(0), y, rt::PoolKind::Avg,
                       pool.getKernelShape(), pool.getStrides(), pool.getPads(),
                       pool.getDilations(), pool.getCeilMode() != 0,
                       pool.getCountIncludePad() != 0, pool.getChannelsLast());
      })
      .Case([&](GlobalAveragePoolOp pool) {
        rt::globalAvgPool(ctx, node, x(0), y, pool.getChannelsLast());
        return true;
      })
      // Reductions, layout and indexing (EmitTensorOps.cpp).
      .Case([&](ReduceMeanOp r) {
        return reduce(rt::ReduceOp::Mean, r.getAxes());
      })
      .Case(
          [&](ReduceSumOp r) { return reduce(rt::ReduceOp::Sum, r.getAxes()); })
      .Case(
          [&](ReduceMaxOp r) { return reduce(rt::ReduceOp::Max, r.getAxes()); })
      .Case([&](CumSumOp cumSum) {
        rt::cumSum(ctx, node, int(cumSum.getAxis()), cumSum.getExclusive(),
                   cumSum.getReverse(), x(0), y);
        return true;
      })
      .Case([&](TransposeOp transpose) {
        int rank = x(0).rank;
        SmallVector<int> perm;
        if (auto given = transpose.getPerm())
          for (int64_t axis : *given)
            perm.push_back(int(axis));
        else
          for (int axis = rank - 1; axis >= 0; --axis)
            perm.push_back(axis);
        rt::transpose(ctx, node, perm.data(), x(0), y);
        return true;
      })
      .Case([&](ConcatOp concat) {
        SmallVector<rt::TensorRef> inputs;
        for (const Buffer &buffer : in)
          inputs.push_back(buffer.ref);
        rt::concat(ctx, node, normalizeAxis(concat.getAxis(), y.rank),
                   inputs.data(), int(inputs.size()), y);
        return true;
      })
      .Case([&](SplitOp split) {
        SmallVector<rt::TensorRef> outputs;
        for (const Buffer &buffer : out)
          outputs.push_back(buffer.ref);
        rt::split(ctx, node, normalizeAxis(split.getAxis(), x(0).rank), x(0),
                  outputs.data(), int(outputs.size()));
        return true;
      })
      .Case([&](SliceOp slice) {
        // ONNX's clamping, as the emitter's emitSlice.
        int64_t rank = x(0).rank;
        SmallVector<int64_t> starts(rank, 0), steps(rank, 1);
        for (auto [i, axisValue] : llvm::enumerate(slice.getAxes())) {
          int64_t axis = normalizeAxis(axisValue, rank);
          if (axis < 0 || axis >= rank || i >= slice.getStarts().size() ||
              i >= slice.getSteps().size())
            return false;
          int64_t dim = x(0).shape[axis];
          int64_t step = slice.getSteps()[i];
          int64_t start = slice.getStarts()[i];
          if (start < 0)
            start += dim;
          start = step > 0 ? std::clamp<int64_t>(start, 0, dim)
                           : std::clamp<int64_t>(start, 0, dim - 1);
          starts[axis] =
              std::min<int64_t>(start, std::max<int64_t>(dim - 1, 0));
          steps[axis] = step;
        }
        rt::slice(ctx, node, starts.data(), steps.data(), x(0), y);
        return true;
      })
      .Case([&](GatherOp gather) {
        rt::gather(ctx, node, normalizeAxis(gather.getAxis(), x(0).rank), x(0),
                   x(1), y);
        return true;
      })
      .Case([&](GatherElementsOp gather) {
        rt::gatherElements(ctx, node,
                           normalizeAxis(gather.getAxis(), x(0).rank), x(0),
                           x(1), y);
        return true;
      })
      .Case([&](ScatterNDOp scatter) {
        std::optional<rt::ScatterReduction> reduction =
            llvm::StringSwitch<std::optional<rt::ScatterReduction>>(
                scatter.getReduction())
                .Case("none", rt::ScatterReduction::None)
                .Case("add", rt::ScatterReduction::Add)
                .Case("mul", rt::ScatterReduction::Mul)
                .Case("max", rt::ScatterReduction::Max)
                .Case("min", rt::ScatterReduction::Min)
                .Default(std::nullopt);
        if (!reduction)
          return false;
        rt::scatterND(ctx, node, *reduction, x(0), x(1), x(2), y);
        return true;
      })
      .Case([&](ExpandOp) {
        rt::expand(ctx, node, x(0), y);
        return true;
      })
      .Case([&](PadOp pad) {
        std::optional<rt::PadMode> mode =
            llvm::StringSwitch<std::optional<rt::PadMode>>(pad.getMode())
                .Case("constant", rt::PadMode::Constant)
                .Case("reflect", rt::PadMode::Reflect)
                .Case("edge", rt::PadMode::Edge)
                .Default(std::nullopt);
        ArrayRef<int64_t> pads = pad.getPads();
        if (!mode || pads.size() != size_t(2 * x(0).rank))
          return false;
        rt::pad(ctx, node, *mode, pads.data(), pads.data() + x(0).rank,
                toDouble(pad.getConstantValue()), x(0), y);
        return true;
      })
      .Default([](Operation *) { return false; });
}

/// `op`'s host kernel on `in` into `out`; false when it refuses (the context
/// then holds its error, and the op stays).
bool runHostKernel(rt::Context &context, Operation *op, ArrayRef<Buffer> in,
                   MutableArrayRef<Buffer> out) {
  std::string node = nodeName(op->getLoc());
  return callKernel(context, op, node.c_str(), in, out) &&
         !rt::contextError(context);
}

/// The splat of `type` whose one element is `output`'s first.
Attribute splatAttribute(RankedTensorType type, const Buffer &output) {
  const char *data = reinterpret_cast<const char *>(output.storage.data());
  if (type.getElementType().isInteger(1))
    return DenseElementsAttr::get(type, data[0] != 0);
  return DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(data, rt::dtypeSize(output.ref.dtype)));
}

} // namespace

//===----------------------------------------------------------------------===//
// HostConstantEvaluator
//===----------------------------------------------------------------------===//

bool mlir::memopt::readsTrainableInitializer(Operation *op) {
  return llvm::any_of(op->getOperands(), [&](Value operand) {
    auto constant = operand.getDefiningOp<ConstantOp>();
    if (!constant || !constant->hasAttr(kInitializerAttrName) ||
        !isa<FloatType>(getElementTypeOrSelf(operand.getType())))
      return false;
    auto kind = constant->getAttrOfType<StringAttr>(kStateKindAttrName);
    return !kind || kind.getValue() == "parameter";
  });
}

struct HostConstantEvaluator::Runtime {
  rt::Context *context = nullptr;
  ~Runtime() { rt::destroyContext(context); }
  /// A context without a recorded error (the first error of a context
  /// sticks, so a failed evaluation gets a fresh one).
  rt::Context &fresh() {
    if (context && rt::contextError(*context)) {
      rt::destroyContext(context);
      context = nullptr;
    }
    if (!context) {
      rt::ContextOptions options;
      // One thread: the compiler runs on shared machines, and the folded
      // tensors are small.
      options.hostThreads = 1;
      context = rt::createContext(options);
    }
    return *context;
  }
};

HostConstantEvaluator::HostConstantEvaluator(const HostEvaluationLimits &limits)
    : limits(limits), runtime(std::make_unique<Runtime>()) {}

HostConstantEvaluator::~HostConstantEvaluator() = default;

bool HostConstantEvaluator::hasHostKernel(Operation *op) {
  // Dropout draws random numbers; updates, variables and collectives have
  // effects. None of them is in the table below, and an op with memory
  // effects never folds whatever it is.
  if (!isMemoryEffectFree(op))
    return false;
  return isa<ReluOp, ExpOp, LogOp, SqrtOp, ReciprocalOp, NegOp, AbsOp,
             SigmoidOp, TanhOp, ErfOp, SinOp, CosOp, NotOp, HardSwishOp,
             LeakyReluOp, HardSigmoidOp, GeluOp, ClipOp, AddOp, SubOp, MulOp,
             DivOp, PowOp, ModOp, MinOp, MaxOp, EqualOp, LessOp, GreaterOp,
             AndOp, OrOp, IsNaNOp, CastOp, WhereOp, RangeOp, ReshapeOp,
             FlattenOp, SqueezeOp, UnsqueezeOp, IdentityOp, MatMulOp, GemmOp,
             SoftmaxOp, LayerNormalizationOp, BatchNormalizationOp, ConvOp,
             ConvTransposeOp, MaxPoolOp, AveragePoolOp, GlobalAveragePoolOp,
             ReduceMeanOp, ReduceSumOp, ReduceMaxOp, CumSumOp, TransposeOp,
             ConcatOp, SplitOp, SliceOp, GatherOp, GatherElementsOp,
             ScatterNDOp, ExpandOp, PadOp>(op);
}

/// The splat results of an elementwise `op` whose operands are all splats,
/// whatever their sizes: the kernel runs on one element of each. A mask
/// built from constant positions (transformers' packed-sequence mask, all
/// true when nothing is packed) folds this way to one value instead of
/// staying a [B, 1, S, S] op because it is larger than the limits. Failure
/// when `op` is not elementwise or an operand is not a splat.
FailureOr<SmallVector<Attribute>>
HostConstantEvaluator::evaluateSplats(Operation *op) {
  auto behavior = dyn_cast<BufferBehaviorOpInterface>(op);
  if (!behavior || !behavior.isElementwise() || op->getNumOperands() == 0)
    return failure();
  auto single = [](Type type) -> RankedTensorType {
    auto ranked = dyn_cast<RankedTensorType>(type);
    if (!ranked || !ranked.hasStaticShape())
      return {};
    return RankedTensorType::get(SmallVector<int64_t>(ranked.getRank(), 1),
                                 ranked.getElementType());
  };
  SmallVector<Buffer> inputs(op->getNumOperands());
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    auto constant = operand.getDefiningOp<ConstantOp>();
    auto dense = constant ? dyn_cast<DenseElementsAttr>(constant.getValue())
                          : DenseElementsAttr();
    RankedTensorType one = single(operand.getType());
    if (!dense || !dense.isSplat() || !one ||
        !operandBuffer(dense.resizeSplat(one), one, inputs[index]))
      return failure();
  }
  SmallVector<Buffer> outputs(op->getNumResults());
  for (auto [index, result] : llvm::enumerate(op->getResults())) {
    RankedTensorType one = single(result.getType());
    std::optional<rt::DType> dtype =
        one ? runtimeType(one.getElementType()) : std::nullopt;
    if (!dtype)
      return failure();
    outputs[index].storage.assign(2, 0);
    if (!describe(one, outputs[index].storage.data(), outputs[index].ref))
      return failure();
  }
  if (!runHostKernel(runtime->fresh(), op, inputs, outputs))
    return failure();
  SmallVector<Attribute> results;
  for (auto [index, result] : llvm::enumerate(op->getResults()))
    results.push_back(splatAttribute(cast<RankedTensorType>(result.getType()),
                                     outputs[index]));
  ++evaluated;
  return results;
}

FailureOr<SmallVector<Attribute>>
HostConstantEvaluator::evaluate(Operation *op) {
  if (limits.maxElements <= 0 || op->getNumResults() == 0 ||
      op->getNumRegions() != 0 || !hasHostKernel(op))
    return failure();
  if (FailureOr<SmallVector<Attribute>> splats = evaluateSplats(op);
      succeeded(splats))
    return splats;
  // Every operand a constant within the limit.
  SmallVector<Buffer> inputs(op->getNumOperands());
  // Elements the operands store (a splat stores one).
  int64_t operandElements = 0;
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    auto type = dyn_cast<RankedTensorType>(operand.getType());
    Attribute value;
    auto constant = operand.getDefiningOp<ConstantOp>();
    if (!type || !constant || type.getNumElements() > limits.maxElements)
      return failure();
    value = constant.getValue();
    if (!operandBuffer(value, type, inputs[index]))
      return failure();
    auto dense = dyn_cast<DenseElementsAttr>(value);
    operandElements += dense && dense.isSplat() ? 1 : type.getNumElements();
  }
  SmallVector<Buffer> outputs(op->getNumResults());
  for (auto [index, result] : llvm::enumerate(op->getResults())) {
    auto type = dyn_cast<RankedTensorType>(result.getType());
    if (!type || !type.hasStaticShape() ||
        type.getNumElements() > limits.maxElements)
      return failure();
    std::optional<rt::DType> dtype = runtimeType(type.getElementType());
    if (!dtype)
      return failure();
    size_t bytes = size_t(type.getNumElements()) * rt::dtypeSize(*dtype);
    outputs[index].storage.assign((bytes + 7) / 8 + 1, 0);
    if (!describe(type, outputs[index].storage.data(), outputs[index].ref))
      return failure();
  }

  if (!runHostKernel(runtime->fresh(), op, inputs, outputs))
    return failure();

  // A result that repeats one value is a splat. Results that would store
  // more elements than their operands, beyond the inline limit, stay ops: a
  // broadcast (a [S, S] mask from two ranges, a table from an outer
  // product) costs little to compute and a whole constant to keep, and the
  // attention fusion reads such masks row by row (RowEvaluator.h). XLA's
  // constant folding leaves broadcasts alone for the same reason. Growth of
  // at most the inline limit is no broadcast: a splat column concatenated to
  // a table (transformers' position differences, [B, 1] of -1 before [B, S]
  // positions) folds.
  SmallVector<bool> splats;
  int64_t resultElements = 0;
  for (const Buffer &output : outputs) {
    size_t width = rt::dtypeSize(output.ref.dtype);
    size_t bytes = output.ref.bytes();
    const char *data = reinterpret_cast<const char *>(output.storage.data());
    bool splat = bytes > 0;
    for (size_t offset = width; splat && offset < bytes; offset += width)
      splat = std::memcmp(data, data + offset, width) == 0;
    splats.push_back(splat);
    resultElements += splat ? 1 : output.ref.numElements();
  }
  if (resultElements > limits.maxInlineElements &&
      resultElements > operandElements + limits.maxInlineElements)
    return failure();

  SmallVector<Attribute> results;
  for (auto [index, result] : llvm::enumerate(op->getResults())) {
    auto type = cast<RankedTensorType>(result.getType());
    const char *data =
        reinterpret_cast<const char *>(outputs[index].storage.data());
    size_t bytes = outputs[index].ref.bytes();
    if (splats[index]) {
      results.push_back(splatAttribute(type, outputs[index]));
      continue;
    }
    if (type.getElementType().isInteger(1)) {
      SmallVector<bool> values;
      for (size_t i = 0; i < bytes; ++i)
        values.push_back(data[i] != 0);
      results.push_back(DenseElementsAttr::get(type, ArrayRef<bool>(values)));
      continue;
    }
    ArrayRef<char> raw(data, bytes);
    if (type.getNumElements() <= limits.maxInlineElements) {
      results.push_back(DenseElementsAttr::getFromRawBuffer(type, raw));
      continue;
    }
    // The blob's key: the node's name (the manager makes it unique).
    std::string key = "folded_" + nodeName(op->getLoc());
    for (char &c : key)
      if (!llvm::isAlnum(c) && c != '_')
        c = '_';
    results.push_back(DenseResourceElementsAttr::get(
        type, key,
        HeapAsmResourceBlob::allocateAndCopyWithAlign(raw, alignof(uint64_t))));
  }
  ++evaluated;
  return results;
}

FailureOr<SmallVector<Value>> HostConstantEvaluator::fold(OpBuilder &builder,
                                                          Operation *op) {
  FailureOr<SmallVector<Attribute>> values = evaluate(op);
  if (failed(values))
    return failure();
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(op);
  SmallVector<Value> results;
  for (Attribute value : *values)
    results.push_back(
        ConstantOp::create(builder, op->getLoc(), cast<ElementsAttr>(value))
            .getResult());
  return results;
}
