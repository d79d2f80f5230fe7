//===- RowEvaluator.cpp - tensors computed from constants, row by row -----===//
//
// RowEvaluator.h. The ops between the constants and the tensor become a
// small graph of nodes; a row of a node is computed from rows of its
// operands (broadcast operands map the row index, views and slices pick
// elements), and each node keeps the row it computed last, so an operand
// that broadcasts over the rows (the key positions of a causal mask) is
// computed once. Nodes that only pick a row of their operand hand out the
// operand's row; an op with several operands copies each but the last before
// computing the next (two operands may share a node that a view reads at a
// different row). Constants are decoded row by row from their storage, so a
// large constant is never copied.
//
// The same idea as XLA's HloEvaluator and onnxruntime's constant folding
// (evaluate the ops on their constant inputs), streamed by rows instead of
// materialising the tensor: a [B, 1, S, S] mask costs one row per op.
//
//===----------------------------------------------------------------------===//

#include "RowEvaluator.h"

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/ShapeUtils.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::attention;

namespace {

/// Ops read for one tensor at most (a mask takes about ten).
constexpr size_t kMaxNodes = 256;

enum class Kind {
  Leaf,
  Range,
  Arithmetic,
  Where,
  Broadcast,
  View,
  Transpose,
  Slice,
  Concat,
  CumSum
};

/// Comparisons and logic last (their results are 0 or 1).
enum class Arithmetic {
  Identity,
  Not,
  Neg,
  Abs,
  Sqrt,
  Reciprocal,
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Min,
  Max,
  Equal,
  Less,
  Greater,
  And,
  Or
};

/// How a node's elements are rounded to its element type.
enum class Rounding { Exact, Float32, Float16, BFloat16, Integer, Bool };

/// How a constant stores its elements.
enum class Encoding {
  Splat,
  Bits,
  F64,
  F32,
  F16,
  BF16,
  I8,
  I16,
  I32,
  I64,
  U8,
  U16,
  U32,
  U64
};

std::optional<Encoding> encodingOf(Type type) {
  if (type.isF64())
    return Encoding::F64;
  if (type.isF32())
    return Encoding::F32;
  if (type.isF16())
    return Encoding::F16;
  if (type.isBF16())
    return Encoding::BF16;
  auto integer = dyn_cast<IntegerType>(type);
  if (!integer)
    return std::nullopt;
  bool isUnsigned = integer.isUnsigned();
  switch (integer.getWidth()) {
  case 1:
    return Encoding::Bits;
  case 8:
    return isUnsigned ? Encoding::U8 : Encoding::I8;
  case 16:
    return isUnsigned ? Encoding::U16 : Encoding::I16;
  case 32:
    return isUnsigned ? Encoding::U32 : Encoding::I32;
  case 64:
    return isUnsigned ? Encoding::U64 : Encoding::I64;
  default:
    return std::nullopt;
  }
}

size_t widthOf(Encoding encoding) {
  switch (encoding) {
  case Encoding::F64:
  case Encoding::I64:
  case Encoding::U64:
    return 8;
  case Encoding::F32:
  case Encoding::I32:
  case Encoding::U32:
    return 4;
  case Encoding::F16:
  case Encoding::BF16:
  case Encoding::I16:
  case Encoding::U16:
    return 2;
  case Encoding::I8:
  case Encoding::U8:
    return 1;
  case Encoding::Splat:
  case Encoding::Bits:
    return 0;
  }
  return 0;
}

double halfToDouble(uint16_t bits) {
  int exponent = (bits >> 10) & 0x1f;
  int mantissa = bits & 0x3ff;
  double magnitude;
  if (exponent == 0)
    magnitude = std::ldexp(mantissa, -24);
  else if (exponent == 31)
    magnitude = mantissa ? std::numeric_limits<double>::quiet_NaN()
                         : std::numeric_limits<double>::infinity();
  else
    magnitude = std::ldexp(mantissa | 0x400, exponent - 25);
  return (bits & 0x8000) ? -magnitude : magnitude;
}

/// Element `index` of raw little-endian storage.
double decode(Encoding encoding, const char *raw, int64_t index) {
  const char *at = raw + index * int64_t(widthOf(encoding));
  auto load = [&](auto value) {
    std::memcpy(&value, at, sizeof(value));
    return value;
  };
  switch (encoding) {
  case Encoding::F64:
    return load(double());
  case Encoding::F32:
    return load(float());
  case Encoding::F16:
    return halfToDouble(load(uint16_t()));
  case Encoding::BF16: {
    uint32_t bits = uint32_t(load(uint16_t())) << 16;
    float value;
    std::memcpy(&value, &bits, 4);
    return value;
  }
  case Encoding::I8:
    return load(int8_t());
  case Encoding::I16:
    return load(int16_t());
  case Encoding::I32:
    return load(int32_t());
  case Encoding::I64:
    return double(load(int64_t()));
  case Encoding::U8:
    return load(uint8_t());
  case Encoding::U16:
    return load(uint16_t());
  case Encoding::U32:
    return load(uint32_t());
  case Encoding::U64:
    return double(load(uint64_t()));
  case Encoding::Splat:
  case Encoding::Bits:
    break;
  }
  return 0;
}

double attributeToDouble(Attribute attr) {
  if (auto floatAttr = dyn_cast<FloatAttr>(attr)) {
    bool losesInfo = false;
    APFloat value = floatAttr.getValue();
    value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                  &losesInfo);
    return value.convertToDouble();
  }
  auto integerAttr = cast<IntegerAttr>(attr);
  auto integer = dyn_cast<IntegerType>(integerAttr.getType());
  if (integer && integer.getWidth() == 1)
    return integerAttr.getValue().isZero() ? 0.0 : 1.0;
  if (integer && integer.isUnsigned())
    return double(integerAttr.getValue().getZExtValue());
  return double(integerAttr.getValue().getSExtValue());
}

Rounding roundingOf(Type type) {
  if (type.isF32())
    return Rounding::Float32;
  if (type.isF16())
    return Rounding::Float16;
  if (type.isBF16())
    return Rounding::BFloat16;
  if (type.isInteger(1))
    return Rounding::Bool;
  if (isa<IntegerType>(type))
    return Rounding::Integer;
  return Rounding::Exact;
}

void roundTo(Rounding rounding, double *values, int64_t count) {
  // The smallest magnitudes that round to infinity in f16 and in bf16.
  constexpr double kHalfOverflow = 65520.0;
  constexpr double kBFloat16Overflow = 3.3961775292304958e38;
  switch (rounding) {
  case Rounding::Exact:
    return;
  case Rounding::Float32:
    for (int64_t k = 0; k < count; ++k)
      values[k] = double(float(values[k]));
    return;
  case Rounding::Float16:
  case Rounding::BFloat16: {
    double overflow =
        rounding == Rounding::Float16 ? kHalfOverflow : kBFloat16Overflow;
    for (int64_t k = 0; k < count; ++k) {
      double value = double(float(values[k]));
      values[k] =
          std::fabs(value) >= overflow
              ? std::copysign(std::numeric_limits<double>::infinity(), value)
              : value;
    }
    return;
  }
  case Rounding::Integer:
    for (int64_t k = 0; k < count; ++k)
      values[k] = std::trunc(values[k]);
    return;
  case Rounding::Bool:
    for (int64_t k = 0; k < count; ++k)
      values[k] = values[k] != 0 ? 1.0 : 0.0;
    return;
  }
}

int64_t rowLengthOf(ArrayRef<int64_t> shape) {
  return shape.empty() ? 1 : shape.back();
}

/// The index over every axis but the last of row `row` of `shape`.
SmallVector<int64_t, 6> rowIndex(ArrayRef<int64_t> shape, int64_t row) {
  SmallVector<int64_t, 6> index(shape.empty() ? 0 : shape.size() - 1);
  for (int64_t axis = int64_t(index.size()) - 1; axis >= 0; --axis) {
    index[axis] = row % shape[axis];
    row /= shape[axis];
  }
  return index;
}

/// The row of `shape` at `index` (over every axis but the last).
int64_t rowAt(ArrayRef<int64_t> shape, ArrayRef<int64_t> index) {
  int64_t row = 0;
  for (auto [dim, position] : llvm::zip(shape.drop_back(), index))
    row = row * dim + position;
  return row;
}

/// The row of an operand of `shape` that broadcasts (numpy rules) into the
/// result row at `index` of a result of rank `resultRank`.
int64_t broadcastRow(ArrayRef<int64_t> shape, ArrayRef<int64_t> index,
                     int64_t resultRank) {
  int64_t rank = shape.size();
  int64_t offset = resultRank - rank;
  int64_t row = 0;
  for (int64_t axis = 0; axis + 1 < rank; ++axis)
    row = row * shape[axis] + (shape[axis] == 1 ? 0 : index[axis + offset]);
  return row;
}

template <typename Function>
void unaryLoop(double *out, const double *x, int64_t count, Function f) {
  for (int64_t k = 0; k < count; ++k)
    out[k] = f(x[k]);
}

/// `a` and `b` are rows of `count` elements or, with aOne / bOne, one
/// element broadcast along the row.
template <typename Function>
void binaryLoop(double *out, const double *a, bool aOne, const double *b,
                bool bOne, int64_t count, Function f) {
  if (!aOne && !bOne) {
    for (int64_t k = 0; k < count; ++k)
      out[k] = f(a[k], b[k]);
    return;
  }
  for (int64_t k = 0; k < count; ++k)
    out[k] = f(a[aOne ? 0 : k], b[bOne ? 0 : k]);
}

} // namespace

struct RowEvaluator::Node {
  Kind kind;
  Arithmetic arithmetic = Arithmetic::Identity;
  Rounding rounding = Rounding::Exact;
  SmallVector<int64_t> shape;
  SmallVector<unsigned> operands;
  /// Per axis: whether the tensor may differ along it.
  SmallVector<bool> varies;

  // Leaf: a splat value, bit-packed i1 elements or raw storage.
  Encoding encoding = Encoding::Splat;
  double splat = 0;
  DenseElementsAttr bits;
  const char *raw = nullptr;

  // Slice: the first index and the step along each operand axis.
  // Transpose: the permutation. Concat, CumSum: the axis.
  SmallVector<int64_t> starts, steps, permutation;
  int64_t axis = 0;
  bool exclusive = false, reverse = false;

  /// The row last computed (a leaf splat computes it once).
  int64_t cachedRow = -1;
  std::vector<double> row;
  /// Copies of every operand's row but the last operand's.
  SmallVector<std::vector<double>, 2> operandRows;

  int64_t rowLength() const { return rowLengthOf(shape); }
  int64_t rank() const { return shape.size(); }
};

RowEvaluator::RowEvaluator(RankedTensorType type) : type(type) {}

RowEvaluator::~RowEvaluator() = default;

int64_t RowEvaluator::getRowLength() const { return nodes.back().rowLength(); }

bool RowEvaluator::mayVary(int64_t axis) const {
  return nodes.back().varies[axis];
}

ArrayRef<double> RowEvaluator::getRow(int64_t row) {
  return ArrayRef<double>(compute(nodes.size() - 1, row), getRowLength());
}

std::unique_ptr<RowEvaluator> RowEvaluator::create(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape() || type.getNumElements() == 0)
    return nullptr;
  std::unique_ptr<RowEvaluator> evaluator(new RowEvaluator(type));
  llvm::DenseMap<Value, unsigned> built;
  std::optional<unsigned> root = evaluator->addNode(value, built);
  if (!root)
    return nullptr;
  return evaluator;
}

std::optional<unsigned>
RowEvaluator::addNode(Value value, llvm::DenseMap<Value, unsigned> &built) {
  if (auto found = built.find(value); found != built.end())
    return found->second;
  auto type = dyn_cast<RankedTensorType>(value.getType());
  Operation *op = value.getDefiningOp();
  if (!op || !type || !type.hasStaticShape() || type.getNumElements() == 0 ||
      nodes.size() >= kMaxNodes)
    return std::nullopt;
  Node node;
  node.shape = SmallVector<int64_t>(type.getShape());
  node.rounding = roundingOf(type.getElementType());
  int64_t rank = node.rank();

  // Operands first; `node` is filled in below.
  auto addOperand = [&](Value operand) {
    std::optional<unsigned> index = addNode(operand, built);
    if (index)
      node.operands.push_back(*index);
    return index.has_value();
  };
  auto addOperands = [&](ValueRange operands) {
    return llvm::all_of(operands, addOperand);
  };
  auto operandShape = [&](unsigned k) -> ArrayRef<int64_t> {
    return nodes[node.operands[k]].shape;
  };
  // Broadcast operands: an axis varies where an operand varies along it.
  auto broadcastVaries = [&]() {
    node.varies.assign(rank, false);
    for (unsigned operand : node.operands) {
      const Node &input = nodes[operand];
      int64_t offset = rank - input.rank();
      for (int64_t axis = 0; axis < input.rank(); ++axis)
        if (input.shape[axis] != 1 && input.varies[axis])
          node.varies[axis + offset] = true;
    }
  };

  std::optional<Arithmetic> arithmetic =
      llvm::TypeSwitch<Operation *, std::optional<Arithmetic>>(op)
          .Case<IdentityOp, CastOp>([](auto) { return Arithmetic::Identity; })
          .Case<NotOp>([](auto) { return Arithmetic::Not; })
          .Case<NegOp>([](auto) { return Arithmetic::Neg; })
          .Case<AbsOp>([](auto) { return Arithmetic::Abs; })
          .Case<SqrtOp>([](auto) { return Arithmetic::Sqrt; })
          .Case<ReciprocalOp>([](auto) { return Arithmetic::Reciprocal; })
          .Case<AddOp>([](auto) { return Arithmetic::Add; })
          .Case<SubOp>([](auto) { return Arithmetic::Sub; })
          .Case<MulOp>([](auto) { return Arithmetic::Mul; })
          .Case<DivOp>([](auto) { return Arithmetic::Div; })
          .Case<PowOp>([](auto) { return Arithmetic::Pow; })
          .Case<MinOp>([](auto) { return Arithmetic::Min; })
          .Case<MaxOp>([](auto) { return Arithmetic::Max; })
          .Case<EqualOp>([](auto) { return Arithmetic::Equal; })
          .Case<LessOp>([](auto) { return Arithmetic::Less; })
          .Case<GreaterOp>([](auto) { return Arithmetic::Greater; })
          .Case<AndOp>([](auto) { return Arithmetic::And; })
          .Case<OrOp>([](auto) { return Arithmetic::Or; })
          .Default([](Operation *) { return std::nullopt; });

  if (auto constant = dyn_cast<ConstantOp>(op)) {
    node.kind = Kind::Leaf;
    node.varies.assign(rank, false);
    Attribute attr = constant.getValue();
    std::optional<Encoding> encoding = encodingOf(type.getElementType());
    if (!encoding)
      return std::nullopt;
    if (auto dense = dyn_cast<DenseElementsAttr>(attr)) {
      if (dense.isSplat()) {
        node.encoding = Encoding::Splat;
        node.splat = attributeToDouble(dense.getSplatValue<Attribute>());
      } else if (*encoding == Encoding::Bits) {
        node.encoding = Encoding::Bits;
        node.bits = dense;
      } else {
        node.encoding = *encoding;
        node.raw = dense.getRawData().data();
      }
    } else if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
      AsmResourceBlob *blob = resource.getRawHandle().getBlob();
      if (!blob || *encoding == Encoding::Bits ||
          int64_t(blob->getData().size()) !=
              type.getNumElements() * int64_t(widthOf(*encoding)))
        return std::nullopt;
      node.encoding = *encoding;
      node.raw = blob->getData().data();
    } else {
      return std::nullopt;
    }
    if (node.encoding != Encoding::Splat)
      for (int64_t axis = 0; axis < rank; ++axis)
        node.varies[axis] = node.shape[axis] > 1;
  } else if (auto range = dyn_cast<RangeOp>(op)) {
    node.kind = Kind::Range;
    if (rank != 1 || !addOperands(range->getOperands()))
      return std::nullopt;
    for (unsigned k = 0; k < 3; ++k)
      if (ShapedType::getNumElements(operandShape(k)) != 1)
        return std::nullopt;
    node.varies = {node.shape[0] > 1};
  } else if (arithmetic) {
    node.kind = Kind::Arithmetic;
    node.arithmetic = *arithmetic;
    if (op->getNumResults() != 1 || op->getNumOperands() < 1 ||
        op->getNumOperands() > 2 || !addOperands(op->getOperands()))
      return std::nullopt;
    // Comparisons and logic give 0 or 1 already.
    if (*arithmetic >= Arithmetic::Equal || *arithmetic == Arithmetic::Not)
      node.rounding = Rounding::Exact;
    broadcastVaries();
  } else if (isa<WhereOp>(op)) {
    node.kind = Kind::Where;
    if (!addOperands(op->getOperands()))
      return std::nullopt;
    broadcastVaries();
  } else if (auto expand = dyn_cast<ExpandOp>(op)) {
    node.kind = Kind::Broadcast;
    if (!addOperand(expand.getInput()))
      return std::nullopt;
    broadcastVaries();
  } else if (isa<ReshapeOp, SqueezeOp, UnsqueezeOp, FlattenOp>(op)) {
    node.kind = Kind::View;
    if (!addOperand(op->getOperand(0)))
      return std::nullopt;
    // A view that only inserts or removes axes of size 1 keeps which axes
    // vary; any other regrouping may make every axis vary.
    const Node &input = nodes[node.operands[0]];
    SmallVector<int64_t> inputAxes, resultAxes;
    for (int64_t axis = 0; axis < input.rank(); ++axis)
      if (input.shape[axis] != 1)
        inputAxes.push_back(axis);
    for (int64_t axis = 0; axis < rank; ++axis)
      if (node.shape[axis] != 1)
        resultAxes.push_back(axis);
    node.varies.assign(rank, false);
    bool sameAxes =
        inputAxes.size() == resultAxes.size() &&
        llvm::all_of(llvm::zip(inputAxes, resultAxes), [&](auto pair) {
          return input.shape[std::get<0>(pair)] ==
                 node.shape[std::get<1>(pair)];
        });
    for (auto [index, axis] : llvm::enumerate(resultAxes))
      node.varies[axis] = !sameAxes || input.varies[inputAxes[index]];
  } else if (auto transpose = dyn_cast<TransposeOp>(op)) {
    node.kind = Kind::Transpose;
    if (!addOperand(transpose.getData()))
      return std::nullopt;
    if (std::optional<ArrayRef<int64_t>> perm = transpose.getPerm()) {
      node.permutation = SmallVector<int64_t>(*perm);
    } else {
      for (int64_t axis = rank - 1; axis >= 0; --axis)
        node.permutation.push_back(axis);
    }
    const Node &input = nodes[node.operands[0]];
    // Moving the last axis reads single elements: constants only.
    if (int64_t(node.permutation.size()) != rank ||
        (rank > 0 && node.permutation.back() != rank - 1 &&
         input.kind != Kind::Leaf))
      return std::nullopt;
    for (int64_t axis : node.permutation)
      node.varies.push_back(input.varies[axis]);
  } else if (auto slice = dyn_cast<SliceOp>(op)) {
    node.kind = Kind::Slice;
    if (!addOperand(slice.getData()))
      return std::nullopt;
    const Node &input = nodes[node.operands[0]];
    node.starts.assign(rank, 0);
    node.steps.assign(rank, 1);
    if (input.rank() != rank)
      return std::nullopt;
    ArrayRef<int64_t> starts = slice.getStarts(), axes = slice.getAxes(),
                      steps = slice.getSteps();
    for (auto [position, given] : llvm::enumerate(starts)) {
      int64_t start = given;
      std::optional<int64_t> axis = normalizeAxis(
          position < axes.size() ? axes[position] : int64_t(position), rank);
      int64_t step = position < steps.size() ? steps[position] : 1;
      if (!axis || step == 0)
        return std::nullopt;
      int64_t dim = input.shape[*axis];
      if (start < 0)
        start += dim;
      start = step > 0 ? std::clamp<int64_t>(start, 0, dim)
                       : std::clamp<int64_t>(start, 0, dim - 1);
      node.starts[*axis] = start;
      node.steps[*axis] = step;
    }
    for (int64_t axis = 0; axis < rank; ++axis)
      node.varies.push_back(input.varies[axis] && node.shape[axis] > 1);
  } else if (auto concat = dyn_cast<ConcatOp>(op)) {
    node.kind = Kind::Concat;
    std::optional<int64_t> axis = normalizeAxis(concat.getAxis(), rank);
    if (!axis || !addOperands(concat.getInputs()))
      return std::nullopt;
    node.axis = *axis;
    broadcastVaries();
    node.varies[node.axis] = node.shape[node.axis] > 1;
  } else if (auto cumsum = dyn_cast<CumSumOp>(op)) {
    node.kind = Kind::CumSum;
    std::optional<int64_t> axis = normalizeAxis(cumsum.getAxis(), rank);
    if (!axis || *axis != rank - 1 || !addOperand(cumsum.getX()))
      return std::nullopt;
    node.axis = *axis;
    node.exclusive = cumsum.getExclusive() != 0;
    node.reverse = cumsum.getReverse() != 0;
    node.varies = nodes[node.operands[0]].varies;
    node.varies[node.axis] = node.shape[node.axis] > 1;
  } else {
    return std::nullopt;
  }

  // Every operand the row loops index must broadcast into the result.
  if (node.kind == Kind::Arithmetic || node.kind == Kind::Where ||
      node.kind == Kind::Broadcast) {
    for (unsigned operand : node.operands) {
      ArrayRef<int64_t> shape = nodes[operand].shape;
      if (int64_t(shape.size()) > rank)
        return std::nullopt;
      for (auto [dim, resultDim] :
           llvm::zip(llvm::reverse(shape), llvm::reverse(node.shape)))
        if (dim != 1 && dim != resultDim)
          return std::nullopt;
    }
  }
  node.row.resize(node.rowLength());
  if (node.operands.size() > 1)
    for (unsigned k = 0; k + 1 < node.operands.size(); ++k)
      node.operandRows.emplace_back(nodes[node.operands[k]].rowLength());
  nodes.push_back(std::move(node));
  built[value] = nodes.size() - 1;
  return nodes.size() - 1;
}

double RowEvaluator::leafElement(const Node &node, int64_t flat) {
  if (node.encoding == Encoding::Splat)
    return node.splat;
  if (node.encoding == Encoding::Bits)
    return *(node.bits.getValues<bool>().begin() + flat) ? 1.0 : 0.0;
  return decode(node.encoding, node.raw, flat);
}

const double *RowEvaluator::computeLeaf(Node &node, int64_t row) {
  int64_t length = node.rowLength();
  double *out = node.row.data();
  if (node.encoding == Encoding::Splat) {
    std::fill(out, out + length, node.splat);
    return out;
  }
  int64_t base = row * length;
  for (int64_t k = 0; k < length; ++k)
    out[k] = leafElement(node, base + k);
  return out;
}

const double *RowEvaluator::computeArithmetic(Node &node, int64_t row) {
  int64_t length = node.rowLength();
  int64_t rank = node.rank();
  SmallVector<int64_t, 6> index = rowIndex(node.shape, row);
  // Each operand's row; all but the last copied (the next may reuse the
  // node that produced it).
  SmallVector<const double *, 3> inputs;
  SmallVector<bool, 3> one;
  for (auto [k, operand] : llvm::enumerate(node.operands)) {
    const Node &input = nodes[operand];
    const double *values =
        compute(operand, broadcastRow(input.shape, index, rank));
    if (k + 1 < node.operands.size()) {
      std::copy(values, values + input.rowLength(),
                node.operandRows[k].begin());
      values = node.operandRows[k].data();
    }
    inputs.push_back(values);
    one.push_back(input.rowLength() == 1 && length != 1);
  }
  double *out = node.row.data();
  if (node.kind == Kind::Where) {
    for (int64_t k = 0; k < length; ++k)
      out[k] = inputs[0][one[0] ? 0 : k] != 0 ? inputs[1][one[1] ? 0 : k]
                                              : inputs[2][one[2] ? 0 : k];
    roundTo(node.rounding, out, length);
    return out;
  }
  if (node.kind == Kind::Broadcast) {
    std::fill(out, out + length, inputs[0][0]);
    return out;
  }
  if (inputs.size() == 1) {
    const double *x = inputs[0];
    // A one-element operand of a unary op has a one-element result.
    switch (node.arithmetic) {
    case Arithmetic::Identity:
      std::copy(x, x + length, out);
      break;
    case Arithmetic::Not:
      unaryLoop(out, x, length, [](double a) { return a == 0 ? 1.0 : 0.0; });
      break;
    case Arithmetic::Neg:
      unaryLoop(out, x, length, [](double a) { return -a; });
      break;
    case Arithmetic::Abs:
      unaryLoop(out, x, length, [](double a) { return std::fabs(a); });
      break;
    case Arithmetic::Sqrt:
      unaryLoop(out, x, length, [](double a) { return std::sqrt(a); });
      break;
    case Arithmetic::Reciprocal:
      unaryLoop(out, x, length, [](double a) { return 1.0 / a; });
      break;
    default:
      llvm_unreachable("a binary operation with one operand");
    }
    roundTo(node.rounding, out, length);
    return out;
  }
  const double *a = inputs[0], *b = inputs[1];
  bool aOne = one[0], bOne = one[1];
  switch (node.arithmetic) {
  case Arithmetic::Add:
    binaryLoop(out, a, aOne, b, bOne, length,
               [](double x, double y) { return x + y; });
    break;
  case Arithmetic::Sub:
    binaryLoop(out, a, aOne, b, bOne, length,
               [](double x, double y) { return x - y; });
    break;
  case Arithmetic::Mul:
    binaryLoop(out, a, aOne, b, bOne, length,
               [](double x, double y) { return x * y; });
    break;
  case Arithmetic::Div:
    // Integer division truncates toward zero (the rounding below).
    binaryLoop(out, a, aOne, b, bOne, length,
               [](double x, double y) { return x / y; });
    break;
  case Arithmetic::Pow:
    binaryLoop(out, a, aOne, b, bOne, length,
               [](double x, double y) { return std::pow(x, y); });
    break;
  case Arithmetic::Min:
    binaryLoop(out, a, aOne, b, bOne, length,
               [](double x, double y) { return y < x ? y : x; });
    break;
  case Arithmetic::Max:
    binaryLoop(out, a, aOne, b, bOne, length,
               [](double x, double y) { return y > x ? y : x; });
    break;
  case Arithmetic::Equal:
    binaryLoop(out, a, aOne, b, bOne, length,
               [](double x, double y) { return x == y ? 1.0 : 0.0; });
    break;
  case Arithmetic::Less:
    binaryLoop(out, a, aOne, b, bOne, length,
               [](double x, double y) { return x < y ? 1.0 : 0.0; });
    break;
  case Arithmetic::Greater:
    binaryLoop(out, a, aOne, b, bOne, length,
               [](double x, double y) { return x > y ? 1.0 : 0.0; });
    break;
  case Arithmetic::And:
    binaryLoop(out, a, aOne, b, bOne, length,
               [](double x, double y) { return x != 0 && y != 0 ? 1.0 : 0.0; });
    break;
  case Arithmetic::Or:
    binaryLoop(out, a, aOne, b, bOne, length,
               [](double x, double y) { return x != 0 || y != 0 ? 1.0 : 0.0; });
    break;
  default:
    llvm_unreachable("a unary operation with two operands");
  }
  roundTo(node.rounding, out, length);
  return out;
}

const double *RowEvaluator::computeView(Node &node, int64_t row) {
  int64_t length = node.rowLength();
  double *out = node.row.data();
  unsigned operand = node.operands[0];
  const Node &input = nodes[operand];
  int64_t inputLength = input.rowLength();
  // The same elements in the same order: rows of equal length coincide.
  if (inputLength == length)
    return compute(operand, row);
  int64_t current = -1;
  const double *values = nullptr;
  for (int64_t k = 0; k < length; ++k) {
    int64_t flat = row * length + k;
    if (flat / inputLength != current) {
      current = flat / inputLength;
      values = compute(operand, current);
    }
    out[k] = values[flat % inputLength];
  }
  return out;
}

const double *RowEvaluator::compute(unsigned index, int64_t row) {
  Node &node = nodes[index];
  if (node.cachedRow == row ||
      (node.kind == Kind::Leaf && node.encoding == Encoding::Splat &&
       node.cachedRow >= 0))
    return node.row.data();
  int64_t length = node.rowLength();
  int64_t rank = node.rank();
  double *out = node.row.data();
  const double *result = out;
  switch (node.kind) {
  case Kind::Leaf:
    result = computeLeaf(node, row);
    break;
  case Kind::Range: {
    double start = compute(node.operands[0], 0)[0];
    double delta = compute(node.operands[2], 0)[0];
    for (int64_t k = 0; k < length; ++k)
      out[k] = start + double(k) * delta;
    roundTo(node.rounding, out, length);
    break;
  }
  case Kind::Arithmetic:
  case Kind::Where:
    result = computeArithmetic(node, row);
    break;
  case Kind::Broadcast: {
    const Node &input = nodes[node.operands[0]];
    if (input.rowLength() == length)
      return compute(
          node.operands[0],
          broadcastRow(input.shape, rowIndex(node.shape, row), rank));
    result = computeArithmetic(node, row);
    break;
  }
  case Kind::View:
    result = computeView(node, row);
    if (result != out)
      return result;
    break;
  case Kind::Transpose: {
    unsigned operand = node.operands[0];
    const Node &input = nodes[operand];
    SmallVector<int64_t, 6> index = rowIndex(node.shape, row);
    if (rank == 0 || node.permutation.back() == rank - 1) {
      SmallVector<int64_t, 6> inputIndex(index.size());
      for (int64_t axis = 0; axis + 1 < rank; ++axis)
        inputIndex[node.permutation[axis]] = index[axis];
      return compute(operand, rowAt(input.shape, inputIndex));
    }
    // The last axis moves: element by element from the constant.
    SmallVector<int64_t, 6> inputIndex(rank);
    SmallVector<int64_t, 6> strides(rank, 1);
    for (int64_t axis = rank - 2; axis >= 0; --axis)
      strides[axis] = strides[axis + 1] * input.shape[axis + 1];
    for (int64_t k = 0; k < length; ++k) {
      int64_t flat = 0;
      for (int64_t axis = 0; axis < rank; ++axis)
        flat += (axis + 1 < rank ? index[axis] : k) *
                strides[node.permutation[axis]];
      out[k] = leafElement(input, flat);
    }
    break;
  }
  case Kind::Slice: {
    unsigned operand = node.operands[0];
    const Node &input = nodes[operand];
    SmallVector<int64_t, 6> index = rowIndex(node.shape, row);
    for (int64_t axis = 0; axis + 1 < rank; ++axis)
      index[axis] = node.starts[axis] + index[axis] * node.steps[axis];
    const double *values = compute(operand, rowAt(input.shape, index));
    int64_t start = rank ? node.starts.back() : 0;
    int64_t step = rank ? node.steps.back() : 1;
    if (start == 0 && step == 1 && input.rowLength() == length)
      return values;
    for (int64_t k = 0; k < length; ++k)
      out[k] = values[start + k * step];
    break;
  }
  case Kind::Concat: {
    SmallVector<int64_t, 6> index = rowIndex(node.shape, row);
    int64_t offset = 0;
    for (unsigned operand : node.operands) {
      const Node &input = nodes[operand];
      int64_t size = input.shape[node.axis];
      if (node.axis + 1 < rank) {
        if (index[node.axis] < offset + size) {
          index[node.axis] -= offset;
          return compute(operand, rowAt(input.shape, index));
        }
      } else {
        const double *values = compute(operand, row);
        std::copy(values, values + size, out + offset);
      }
      offset += size;
    }
    break;
  }
  case Kind::CumSum: {
    const double *values = compute(node.operands[0], row);
    double sum = 0;
    for (int64_t step = 0; step < length; ++step) {
      int64_t k = node.reverse ? length - 1 - step : step;
      if (node.exclusive) {
        out[k] = sum;
        sum += values[k];
      } else {
        sum += values[k];
        out[k] = sum;
      }
    }
    roundTo(node.rounding, out, length);
    break;
  }
  }
  if (result == out)
    node.cachedRow = row;
  return result;
}
