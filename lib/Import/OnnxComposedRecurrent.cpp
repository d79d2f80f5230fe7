//===- OnnxComposedRecurrent.cpp - RNN, GRU and LSTM unrolled -------------===//
//
// Handler of GraphImporter (GraphImporter.h) for ONNX's recurrent layers,
// RNN, GRU and LSTM, unrolled over the (static) sequence at import: the
// input projection of every step at once (one matmul), then per step a gemm
// with the recurrence weights, the gates' slices and their activations, the
// equations of the ONNX operator definitions (onnx/defs/rnn/defs.cc; the
// reference implementation onnx/backend/test/case/node/{rnn,gru,lstm}.py).
// onnx-mlir lowers these ops to a loop over time in the same shape
// (src/Conversion/ONNXToKrnl/RNN); memopt unrolls because its shapes and its
// memory plan are static, which suits the short sequences these layers see
// in today's models (speech front ends, small classifiers). Both directions,
// both layouts, initial states, biases, peepholes, clip and GRU's
// linear_before_reset are supported; activations Tanh, Sigmoid and Relu; a
// sequence_lens other than the full length and LSTM's input_forget are
// refused with a message.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::onnx_import;

FailureOr<SmallVector<Value>> GraphImporter::importRecurrent(const Node &node) {
  StringRef kind = node.type();
  int64_t gates = kind == "RNN" ? 1 : kind == "GRU" ? 3 : 4;
  int64_t activationsPerDirection = kind == "RNN" ? 1 : kind == "GRU" ? 2 : 3;
  SmallVector<Value> inputs;
  for (int i = 0; i < 8; ++i) {
    auto value = lookup(node, i);
    if (failed(value))
      return failure();
    inputs.push_back(*value);
  }
  Value x = inputs[0], w = inputs[1], r = inputs[2], b = inputs[3];
  Value initialH = inputs[5];
  Value initialC = kind == "LSTM" ? inputs[6] : Value();
  Value peepholes = kind == "LSTM" ? inputs[7] : Value();
  if (!w || !r)
    return emitError(node.loc) << node.describe() << ": W and R are required";
  int64_t layout = intAttr(node, "layout", 0);
  std::string direction = stringAttr(node, "direction", "forward");
  int64_t directions = direction == "bidirectional" ? 2 : 1;
  if (direction != "forward" && direction != "reverse" && directions != 2)
    return emitError(node.loc)
           << node.describe() << ": unknown direction '" << direction << "'";
  if (intAttr(node, "input_forget", 0) != 0)
    return emitError(node.loc)
           << node.describe() << ": input_forget is not supported";
  RankedTensorType xType = typeOf(x);
  Type elementType = xType.getElementType();
  if (xType.getRank() != 3 || !isa<FloatType>(elementType))
    return emitError(node.loc)
           << node.describe() << ": expected a floating-point X of rank 3";
  int64_t hidden = typeOf(r).getDimSize(2);
  if (typeOf(w).getDimSize(0) != directions ||
      typeOf(w).getDimSize(1) != gates * hidden ||
      intAttr(node, "hidden_size", hidden) != hidden)
    return emitError(node.loc)
           << node.describe() << ": W " << typeOf(w) << " and R " << typeOf(r)
           << " do not match " << directions << " direction(s) of " << gates
           << " gate(s) of hidden size " << hidden;

  auto transpose = [&](Value value, ArrayRef<int64_t> perm) {
    return transposeBy(node, value, perm);
  };
  auto concat = [&](ArrayRef<Value> values, int64_t axis) {
    return concatAlong(node, values, axis);
  };
  // value[index] along axis 0, that axis dropped.
  auto row = [&](Value value, int64_t index) -> Value {
    Value slice = sliceAlong(node, value, 0, index, index + 1);
    if (!slice)
      return {};
    auto shape = typeOf(slice).getShape().drop_front();
    return build(node, "memopt.reshape", {slice}, {},
                 {RankedTensorType::get(shape, elementType)});
  };
  auto gate = [&](Value value, int64_t index) {
    return sliceAlong(node, value, 1, index * hidden, (index + 1) * hidden);
  };
  auto add = [&](Value a, Value c) {
    return build(node, "memopt.add", {a, c});
  };
  auto mul = [&](Value a, Value c) {
    return build(node, "memopt.mul", {a, c});
  };

  // Sequence-major [seq, batch, input]; states [directions, batch, hidden].
  if (layout == 1) {
    x = transpose(x, {1, 0, 2});
    if (initialH)
      initialH = transpose(initialH, {1, 0, 2});
    if (initialC)
      initialC = transpose(initialC, {1, 0, 2});
  }
  if (!x)
    return failure();
  int64_t steps = typeOf(x).getDimSize(0), batch = typeOf(x).getDimSize(1);
  if (inputs[4]) {
    auto lengths = constantInts(node, 4);
    if (failed(lengths))
      return failure();
    if (llvm::any_of(*lengths, [&](int64_t n) { return n != steps; }))
      return emitError(node.loc)
             << node.describe() << ": sequence_lens shorter than the " << steps
             << " steps are not supported";
  }

  // Activations by name, per direction.
  SmallVector<std::string> activations;
  if (const onnx::AttributeProto *attr = node.attribute("activations"))
    for (const std::string &name : attr->strings())
      activations.push_back(name);
  if (activations.empty())
    for (int64_t d = 0; d < directions; ++d) {
      if (kind == "RNN")
        activations.push_back("Tanh");
      else
        activations.append({"Sigmoid", "Tanh"});
      if (kind == "LSTM")
        activations.push_back("Tanh");
    }
  if (static_cast<int64_t>(activations.size()) !=
      activationsPerDirection * directions)
    return emitError(node.loc)
           << node.describe() << ": " << activations.size()
           << " activations for " << directions << " direction(s)";
  for (const std::string &name : activations)
    if (name != "Tanh" && name != "Sigmoid" && name != "Relu")
      return emitError(node.loc) << node.describe() << ": activation '" << name
                                 << "' is not supported (Tanh, "
                                 << "Sigmoid and Relu are)";
  const onnx::AttributeProto *clipAttr = node.attribute("clip");
  auto activate = [&](StringRef name, Value value) {
    if (clipAttr) {
      SmallVector<NamedAttribute> attrs;
      setAttr(attrs, "min", builder.getF64FloatAttr(-clipAttr->f()));
      setAttr(attrs, "max", builder.getF64FloatAttr(clipAttr->f()));
      value = build(node, "memopt.clip", {value}, attrs);
    }
    std::string opName = "memopt." + StringRef(name).lower();
    return build(node, opName, {value});
  };
  bool linearBeforeReset = intAttr(node, "linear_before_reset", 0) != 0;

  auto stateType = RankedTensorType::get({batch, hidden}, elementType);
  Value zeros = createConstant(
      node.loc,
      DenseElementsAttr::get(stateType, builder.getFloatAttr(elementType, 0)));
  SmallVector<Value> outputs, finalH, finalC;
  for (int64_t d = 0; d < directions; ++d) {
    bool reverse = direction == "reverse" || d == 1;
    ArrayRef<std::string> act =
        ArrayRef(activations)
            .slice(d * activationsPerDirection, activationsPerDirection);
    Value weights = row(w, d), recurrence = row(r, d);
    Value inputBias, recurrenceBias;
    if (b) {
      Value biases = row(b, d);
      inputBias = sliceAlong(node, biases, 0, 0, gates * hidden);
      recurrenceBias =
          sliceAlong(node, biases, 0, gates * hidden, 2 * gates * hidden);
    }
    // Every step's input projection at once: [seq, batch, gates * hidden].
    Value projected =
        build(node, "memopt.matmul", {x, transpose(weights, {1, 0})});
    if (inputBias)
      projected = add(projected, inputBias);
    Value h = initialH ? row(initialH, d) : zeros;
    Value c = initialC ? row(initialC, d) : zeros;
    Value peephole = peepholes ? row(peepholes, d) : Value();
    auto peep = [&](int64_t index) {
      return sliceAlong(node, peephole, 0, index * hidden,
                        (index + 1) * hidden);
    };
    auto recur = [&](Value state, Value weightRows, Value bias) {
      SmallVector<NamedAttribute> attrs;
      setAttr(attrs, "transB", builder.getI64IntegerAttr(1));
      SmallVector<Value> operands = {state, weightRows};
      if (bias)
        operands.push_back(bias);
      return build(node, "memopt.gemm", operands, attrs);
    };
    SmallVector<Value> perStep(steps);
    for (int64_t i = 0; i < steps; ++i) {
      int64_t t = reverse ? steps - 1 - i : i;
      Value input = row(projected, t);
      Value fromState = recur(h, recurrence, recurrenceBias);
      Value sum = add(input, fromState);
      if (kind == "RNN") {
        h = activate(act[0], sum);
      } else if (kind == "GRU") {
        Value update = activate(act[0], gate(sum, 0));
        Value reset = activate(act[0], gate(sum, 1));
        Value candidate;
        if (linearBeforeReset) {
          candidate = add(gate(input, 2), mul(reset, gate(fromState, 2)));
        } else {
          Value candidateRows =
              sliceAlong(node, recurrence, 0, 2 * hidden, 3 * hidden);
          Value candidateBias =
              recurrenceBias
                  ? sliceAlong(node, recurrenceBias, 0, 2 * hidden, 3 * hidden)
                  : Value();
          candidate = add(gate(input, 2),
                          recur(mul(reset, h), candidateRows, candidateBias));
        }
        candidate = activate(act[1], candidate);
        // (1 - z) * candidate + z * h.
        h = add(candidate,
                mul(update, build(node, "memopt.sub", {h, candidate})));
      } else {
        // Gates i, o, f, c; peepholes i, o, f.
        Value inputGate = gate(sum, 0), outputGate = gate(sum, 1);
        Value forgetGate = gate(sum, 2);
        if (peephole) {
          inputGate = add(inputGate, mul(peep(0), c));
          forgetGate = add(forgetGate, mul(peep(2), c));
        }
        Value cell = activate(act[1], gate(sum, 3));
        c = add(mul(activate(act[0], forgetGate), c),
                mul(activate(act[0], inputGate), cell));
        if (peephole)
          outputGate = add(outputGate, mul(peep(1), c));
        h = mul(activate(act[0], outputGate), activate(act[2], c));
      }
      if (!h)
        return failure();
      perStep[t] = h;
    }
    // [seq, 1, batch, hidden] for this direction.
    SmallVector<Value> expanded;
    for (Value state : perStep)
      expanded.push_back(
          build(node, "memopt.reshape", {state}, {},
                {RankedTensorType::get({1, 1, batch, hidden}, elementType)}));
    outputs.push_back(concat(expanded, 0));
    auto finalType = RankedTensorType::get({1, batch, hidden}, elementType);
    finalH.push_back(build(node, "memopt.reshape", {h}, {}, {finalType}));
    finalC.push_back(kind == "LSTM"
                         ? build(node, "memopt.reshape", {c}, {}, {finalType})
                         : Value());
  }
  Value y = concat(outputs, 1);
  Value yH = concat(finalH, 0);
  Value yC = kind == "LSTM" ? concat(finalC, 0) : Value();
  if (layout == 1) {
    y = transpose(y, {2, 0, 1, 3});
    yH = transpose(yH, {1, 0, 2});
    if (yC)
      yC = transpose(yC, {1, 0, 2});
  }
  if (!y || !yH || (kind == "LSTM" && !yC))
    return failure();
  SmallVector<Value> results = {y, yH};
  if (yC)
    results.push_back(yC);
  return results;
}
