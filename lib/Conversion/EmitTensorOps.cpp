//===- EmitTensorOps.cpp - reductions, layout, indexing -------------------===//
//
// The tensor family of the program emitter (EmitProgramInternal.h):
// reductions and cumsum, layout ops (transpose, concat, split, slice,
// expand, pad, resize), indexing (gather, gather_elements, scatter_nd) and
// constant_of_shape. View ops (reshape, flatten, squeeze, ...) need no
// call: the driver declares them over their operand's bytes.
//
// Taken from: onnx-mlir's Conversion/ONNXToKrnl/Tensor/ and Math/Reduction
// groups. Different: axes are normalized and shapes fixed here, so the
// runtime's entry points take plain integers.
//
//===----------------------------------------------------------------------===//

#include "EmitProgramInternal.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::emit_program;

std::optional<LogicalResult>
ProgramEmitter::emitTensorOp(Operation *op, const std::string &node) {
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](ReduceMeanOp reduce) {
        return emitReduce(op, "Mean", reduce.getAxes());
      })
      .Case([&](ReduceSumOp reduce) {
        return emitReduce(op, "Sum", reduce.getAxes());
      })
      .Case([&](ReduceMaxOp reduce) {
        return emitReduce(op, "Max", reduce.getAxes());
      })
      .Case([&](CumSumOp cumSum) {
        os << "  cumSum(ctx, " << node << ", " << cumSum.getAxis() << ", "
           << (cumSum.getExclusive() ? "true" : "false") << ", "
           << (cumSum.getReverse() ? "true" : "false") << ", "
           << ref(cumSum.getX()) << ", " << ref(cumSum.getY()) << ");\n";
        return success();
      })
      .Case([&](TransposeOp transpose) {
        int64_t rank =
            cast<RankedTensorType>(transpose.getData().getType()).getRank();
        SmallVector<int64_t> perm;
        if (auto given = transpose.getPerm())
          perm.assign(given->begin(), given->end());
        else
          for (int64_t i = rank - 1; i >= 0; --i)
            perm.push_back(i);
        os << "  {\n    const int perm[] = " << shapeList(perm)
           << ";\n    transpose(ctx, " << node << ", perm, "
           << ref(transpose.getData()) << ", " << ref(op->getResult(0))
           << ");\n  }\n";
        return success();
      })
      .Case([&](ConcatOp concat) {
        int64_t rank =
            cast<RankedTensorType>(concat.getResult().getType()).getRank();
        os << "  {\n    const TensorRef inputs[] = {";
        llvm::interleaveComma(concat.getInputs(), os,
                              [&](Value input) { os << ref(input); });
        os << "};\n    concat(ctx, " << node << ", "
           << normalizeAxis(concat.getAxis(), rank) << ", inputs, "
           << concat.getInputs().size() << ", " << ref(concat.getResult())
           << ");\n  }\n";
        return success();
      })
      .Case([&](SplitOp split) {
        int64_t rank =
            cast<RankedTensorType>(split.getInput().getType()).getRank();
        os << "  {\n    const TensorRef outputs[] = {";
        llvm::interleaveComma(split.getResults(), os,
                              [&](Value result) { os << ref(result); });
        os << "};\n    split(ctx, " << node << ", "
           << normalizeAxis(split.getAxis(), rank) << ", "
           << ref(split.getInput()) << ", outputs, " << split.getNumResults()
           << ");\n  }\n";
        return success();
      })
      .Case([&](SliceOp slice) { return emitSlice(slice); })
      .Case([&](GatherOp gather) {
        int64_t rank =
            cast<RankedTensorType>(gather.getData().getType()).getRank();
        os << "  gather(ctx, " << node << ", "
           << normalizeAxis(gather.getAxis(), rank) << ", "
           << ref(gather.getData()) << ", " << ref(gather.getIndices()) << ", "
           << ref(op->getResult(0)) << ");\n";
        return success();
      })
      .Case([&](GatherElementsOp gather) {
        int64_t rank =
            cast<RankedTensorType>(gather.getData().getType()).getRank();
        os << "  gatherElements(ctx, " << node << ", "
           << normalizeAxis(gather.getAxis(), rank) << ", "
           << ref(gather.getData()) << ", " << ref(gather.getIndices()) << ", "
           << ref(op->getResult(0)) << ");\n";
        return success();
      })
      .Case([&](ScatterNDOp scatter) -> LogicalResult {
        StringRef reduction =
            llvm::StringSwitch<StringRef>(scatter.getReduction())
                .Case("none", "None")
                .Case("add", "Add")
                .Case("mul", "Mul")
                .Case("max", "Max")
                .Case("min", "Min")
                .Default("");
        if (reduction.empty())
          return error(op) << "has reduction '" << scatter.getReduction()
                           << "', which the runtime does not support";
        os << "  scatterND(ctx, " << node << ", ScatterReduction::" << reduction
           << ", " << ref(scatter.getData()) << ", "
           << ref(scatter.getIndices()) << ", " << ref(scatter.getUpdates())
           << ", " << ref(scatter.getResult()) << ");\n";
        return success();
      })
      .Case([&](ExpandOp) {
        os << "  expand(ctx, " << node << ", " << ref(op->getOperand(0)) << ", "
           << ref(op->getResult(0)) << ");\n";
        return success();
      })
      .Case([&](PadOp pad) { return emitPad(pad); })
      .Case([&](ResizeOp resize) { return emitResize(resize); })
      .Case([&](ConstantOfShapeOp constant) {
        return emitConstantOfShape(constant);
      })
      .Default([](Operation *) { return std::nullopt; });
}

LogicalResult ProgramEmitter::emitReduce(Operation *op, StringRef kind,
                                         ArrayRef<int64_t> axes) {
  int64_t rank = cast<RankedTensorType>(op->getOperand(0).getType()).getRank();
  SmallVector<int64_t> normalized;
  for (int64_t axis : axes)
    normalized.push_back(normalizeAxis(axis, rank));
  if (normalized.empty())
    for (int64_t axis = 0; axis < rank; ++axis)
      normalized.push_back(axis);
  llvm::sort(normalized);
  normalized.erase(llvm::unique(normalized), normalized.end());
  FailureOr<std::string> workspace = workspaceArguments(op);
  if (failed(workspace))
    return failure();
  os << "  {\n    const int axes[] = " << shapeList(normalized) << ";\n"
     << "    reduce(ctx, " << nodeLiteral(op) << ", ReduceOp::" << kind
     << ", axes, " << normalized.size() << ", " << ref(op->getOperand(0))
     << ", " << ref(op->getResult(0)) << ", " << *workspace << ");\n  }\n";
  return success();
}

LogicalResult ProgramEmitter::emitSlice(SliceOp op) {
  ArrayRef<int64_t> shape =
      cast<RankedTensorType>(op.getData().getType()).getShape();
  int64_t rank = shape.size();
  SmallVector<int64_t> starts(rank, 0), steps(rank, 1);
  ArrayRef<int64_t> axes = op.getAxes();
  for (auto [i, axisValue] : llvm::enumerate(axes)) {
    int64_t axis = normalizeAxis(axisValue, rank);
    if (axis < 0 || axis >= rank || i >= op.getStarts().size() ||
        i >= op.getSteps().size())
      return error(op) << "has an invalid axis " << axisValue;
    int64_t dim = shape[axis];
    int64_t step = op.getSteps()[i];
    int64_t start = op.getStarts()[i];
    if (start < 0)
      start += dim;
    // ONNX clamping: [0, dim] for positive steps, [0, dim - 1] otherwise.
    start = step > 0 ? std::clamp<int64_t>(start, 0, dim)
                     : std::clamp<int64_t>(start, 0, dim - 1);
    starts[axis] = std::min<int64_t>(start, std::max<int64_t>(dim - 1, 0));
    steps[axis] = step;
  }
  os << "  {\n    const int64_t starts[] = " << shapeList(starts) << ";\n"
     << "    const int64_t steps[] = " << shapeList(steps) << ";\n"
     << "    slice(ctx, " << nodeLiteral(op) << ", starts, steps, "
     << ref(op.getData()) << ", " << ref(op.getResult()) << ");\n  }\n";
  return success();
}

LogicalResult ProgramEmitter::emitResize(ResizeOp op) {
  StringRef mode = op.getMode();
  StringRef resizeMode;
  if (mode == "nearest")
    resizeMode = "Nearest";
  else if (mode == "linear")
    resizeMode = "Linear";
  else
    return error(op) << "uses mode '" << mode
                     << "'; the runtime supports nearest and linear";
  StringRef coordinate =
      llvm::StringSwitch<StringRef>(op.getCoordinateTransformationMode())
          .Case("half_pixel", "HalfPixel")
          .Case("pytorch_half_pixel", "PytorchHalfPixel")
          .Case("align_corners", "AlignCorners")
          .Case("asymmetric", "Asymmetric")
          .Case("tf_half_pixel_for_centers", "TfHalfPixelForCenters")
          .Default("");
  if (coordinate.empty())
    return error(op) << "uses coordinate_transformation_mode '"
                     << op.getCoordinateTransformationMode()
                     << "', which the runtime does not support";
  StringRef nearest = llvm::StringSwitch<StringRef>(op.getNearestMode())
                          .Case("round_prefer_floor", "RoundPreferFloor")
                          .Case("round_prefer_ceil", "RoundPreferCeil")
                          .Case("floor", "Floor")
                          .Case("ceil", "Ceil")
                          .Default("");
  if (nearest.empty())
    return error(op) << "uses nearest_mode '" << op.getNearestMode()
                     << "', which the runtime does not support";
  os << "  {\n    ResizeParams params;\n    params.mode = ResizeMode::"
     << resizeMode
     << ";\n    params.coordinateMode = CoordinateMode::" << coordinate
     << ";\n    params.nearestMode = NearestMode::" << nearest
     << ";\n    resize(ctx, " << nodeLiteral(op) << ", params, "
     << ref(op->getOperand(0)) << ", " << ref(op->getResult(0)) << ");\n  }\n";
  return success();
}

LogicalResult ProgramEmitter::emitPad(PadOp op) {
  StringRef mode = llvm::StringSwitch<StringRef>(op.getMode())
                       .Case("constant", "Constant")
                       .Case("reflect", "Reflect")
                       .Case("edge", "Edge")
                       .Default("");
  if (mode.empty())
    return error(op) << "uses mode '" << op.getMode()
                     << "', which the runtime does not support";
  ArrayRef<int64_t> pads = op.getPads();
  size_t rank = pads.size() / 2;
  os << "  {\n    const int64_t padsBegin[] = "
     << shapeList(pads.take_front(rank))
     << ";\n    const int64_t padsEnd[] = " << shapeList(pads.drop_front(rank))
     << ";\n    pad(ctx, " << nodeLiteral(op) << ", PadMode::" << mode
     << ", padsBegin, padsEnd, " << cppDouble(toDouble(op.getConstantValue()))
     << ", " << ref(op.getData()) << ", " << ref(op.getResult()) << ");\n  }\n";
  return success();
}

LogicalResult ProgramEmitter::emitConstantOfShape(ConstantOfShapeOp op) {
  double value = 0;
  if (auto attr = op.getValueAttr()) {
    auto dense = dyn_cast<DenseElementsAttr>(attr);
    if (!dense || dense.getNumElements() != 1)
      return error(op) << "has a value that is not one dense element";
    Type elementType = dense.getElementType();
    if (isa<FloatType>(elementType))
      value = toDouble(*dense.value_begin<APFloat>());
    else if (elementType.isInteger(1))
      value = *dense.value_begin<bool>() ? 1 : 0;
    else
      value = double((*dense.value_begin<APInt>()).getSExtValue());
  }
  os << "  fill(ctx, " << nodeLiteral(op) << ", " << cppDouble(value) << ", "
     << ref(op.getResult()) << ");\n";
  return success();
}
