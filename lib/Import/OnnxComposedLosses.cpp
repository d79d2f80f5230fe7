//===- OnnxComposedLosses.cpp - LogSoftmax and the ONNX losses ------------===//
//
// Handlers of GraphImporter (GraphImporter.h) for ONNX ops imported as a few
// memopt ops:
//   LogSoftmax                  x - max - log(sum(exp(x - max))) along
//                               `axis` (finite where log(softmax(x)) would
//                               underflow to -inf)
//   NegativeLogLikelihoodLoss   -input[n, target[n, d...], d...], weighted by
//                               weight[target], zero where target is
//                               `ignore_index`; reduction none / sum / mean
//                               (the weighted mean: sum / sum of weights)
//   SoftmaxCrossEntropyLoss     LogSoftmax over axis 1, then the same loss;
//                               its optional second output is the log
//                               probabilities
// The definitions follow the ONNX reference implementation
// (onnx/reference/ops/op_negative_log_likelihood_loss.py and
// op_softmax_cross_entropy_loss.py): ignored targets are replaced by class 0
// before the gathers (the reference clips them) and their terms are zeroed.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::onnx_import;

FailureOr<Value> GraphImporter::logSoftmax(const Node &node, Value x,
                                           int64_t axis) {
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "axes", builder.getDenseI64ArrayAttr({axis}));
  setAttr(attrs, "keepdims", builder.getI64IntegerAttr(1));
  auto maximum = createOne(node, "memopt.reduce_max", {x}, attrs);
  if (failed(maximum))
    return failure();
  auto shifted = createOne(node, "memopt.sub", {x, *maximum}, {});
  if (failed(shifted))
    return failure();
  auto exponent = createOne(node, "memopt.exp", {*shifted}, {});
  if (failed(exponent))
    return failure();
  auto sum = createOne(node, "memopt.reduce_sum", {*exponent}, attrs);
  if (failed(sum))
    return failure();
  auto logSum = createOne(node, "memopt.log", {*sum}, {});
  if (failed(logSum))
    return failure();
  return createOne(node, "memopt.sub", {*shifted, *logSum}, {});
}

FailureOr<SmallVector<Value>>
GraphImporter::importLogSoftmax(const Node &node) {
  auto x = lookup(node, 0);
  if (failed(x))
    return failure();
  int64_t rank = typeOf(*x).getRank();
  int64_t axisAttr = intAttr(node, "axis", -1);
  int64_t axis = axisAttr < 0 ? axisAttr + rank : axisAttr;
  if (axis < 0 || axis >= rank)
    return emitError(node.loc) << node.describe() << ": axis " << axisAttr
                               << " is out of range for rank " << rank;
  auto result = logSoftmax(node, *x, axis);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<Value> GraphImporter::negativeLogLikelihood(const Node &node,
                                                      Value logProb,
                                                      Value target,
                                                      Value weight) {
  RankedTensorType type = typeOf(logProb);
  RankedTensorType targetType = typeOf(target);
  Type elementType = type.getElementType();
  SmallVector<int64_t> expectedTarget(type.getShape());
  if (type.getRank() >= 2)
    expectedTarget.erase(expectedTarget.begin() + 1);
  if (type.getRank() < 2 ||
      targetType.getShape() != ArrayRef<int64_t>(expectedTarget))
    return emitError(node.loc)
           << node.describe() << ": expected input [N, C, d...] and target "
           << "[N, d...], got " << formatShape(type.getShape()) << " and "
           << formatShape(targetType.getShape());
  std::string reduction = stringAttr(node, "reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return emitError(node.loc)
           << node.describe() << ": unknown reduction '" << reduction << "'";

  // Ignored targets: class 0 for the gathers, their terms zeroed after.
  Value ignored;
  Value safeTarget = target;
  if (const onnx::AttributeProto *attr = node.attribute("ignore_index")) {
    Value ignoreIndex = scalarConstant(node.loc, targetType.getElementType(),
                                       double(attr->i()));
    auto equal = createOne(node, "memopt.equal", {target, ignoreIndex}, {});
    if (failed(equal))
      return failure();
    ignored = *equal;
    Value zero = scalarConstant(node.loc, targetType.getElementType(), 0);
    auto safe = createOne(node, "memopt.where", {ignored, zero, target}, {});
    if (failed(safe))
      return failure();
    safeTarget = *safe;
  }
  // -logProb[n, target[n, d...], d...] through gather_elements on axis 1.
  SmallVector<int64_t> columnShape(targetType.getShape());
  columnShape.insert(columnShape.begin() + 1, 1);
  auto column = reshapeTo(node, safeTarget, columnShape);
  if (failed(column))
    return failure();
  SmallVector<NamedAttribute> axisOne;
  setAttr(axisOne, "axis", builder.getI64IntegerAttr(1));
  auto picked =
      createOne(node, "memopt.gather_elements", {logProb, *column}, axisOne);
  if (failed(picked))
    return failure();
  auto flat = reshapeTo(node, *picked, targetType.getShape());
  if (failed(flat))
    return failure();
  auto loss = createOne(node, "memopt.neg", {*flat}, {});
  if (failed(loss))
    return failure();

  // The per-element weights: weight[target], zero where ignored.
  Value weights;
  if (weight) {
    SmallVector<NamedAttribute> axisZero;
    setAttr(axisZero, "axis", builder.getI64IntegerAttr(0));
    auto gathered =
        createOne(node, "memopt.gather", {weight, safeTarget}, axisZero);
    if (failed(gathered))
      return failure();
    weights = *gathered;
  }
  if (ignored) {
    Value zero = scalarConstant(node.loc, elementType, 0);
    Value base = weights ? weights : scalarConstant(node.loc, elementType, 1);
    auto masked = createOne(node, "memopt.where", {ignored, zero, base}, {});
    if (failed(masked))
      return failure();
    weights = *masked;
  }
  if (weights) {
    auto weighted = createOne(node, "memopt.mul", {*loss, weights}, {});
    if (failed(weighted))
      return failure();
    loss = weighted;
    // A scalar weight (ignore_index without `weight`) broadcasts only in
    // the product; the mean's denominator needs one per element.
    if (typeOf(weights).getShape() != targetType.getShape()) {
      auto spread = createOne(
          node, "memopt.expand", {weights}, {},
          {RankedTensorType::get(targetType.getShape(), elementType)});
      if (failed(spread))
        return failure();
      weights = *spread;
    }
  }
  if (reduction == "none")
    return loss;

  SmallVector<int64_t> allAxes;
  for (int64_t i = 0; i < targetType.getRank(); ++i)
    allAxes.push_back(i);
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "axes", builder.getDenseI64ArrayAttr(allAxes));
  setAttr(attrs, "keepdims", builder.getI64IntegerAttr(0));
  if (reduction == "mean" && !weights)
    return createOne(node, "memopt.reduce_mean", {*loss}, attrs);
  auto total = createOne(node, "memopt.reduce_sum", {*loss}, attrs);
  if (failed(total) || reduction == "sum")
    return total;
  auto weightTotal = createOne(node, "memopt.reduce_sum", {weights}, attrs);
  if (failed(weightTotal))
    return failure();
  return createOne(node, "memopt.div", {*total, *weightTotal}, {});
}

FailureOr<SmallVector<Value>> GraphImporter::importLoss(const Node &node) {
  auto input = lookup(node, 0);
  auto target = lookup(node, 1);
  auto weight = lookup(node, 2);
  if (failed(input) || failed(target) || failed(weight))
    return failure();
  if (!*target)
    return emitError(node.loc) << node.describe() << ": input 1 is missing";
  Value logProb = *input;
  if (node.type() == "SoftmaxCrossEntropyLoss") {
    if (typeOf(*input).getRank() < 2)
      return emitError(node.loc)
             << node.describe() << ": expected scores [N, C, d...]";
    auto normalized = logSoftmax(node, *input, 1);
    if (failed(normalized))
      return failure();
    logProb = *normalized;
  }
  auto loss = negativeLogLikelihood(node, logProb, *target, *weight);
  if (failed(loss))
    return failure();
  SmallVector<Value> results{*loss};
  if (node.type() == "SoftmaxCrossEntropyLoss")
    results.push_back(logProb);
  return results;
}
