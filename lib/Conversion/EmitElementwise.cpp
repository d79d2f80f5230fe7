//===- EmitElementwise.cpp - elementwise ops -> runtime calls -------------===//
//
// The elementwise family of the program emitter (EmitProgramInternal.h):
// unary ops with their alpha / beta, binary / compare / logical ops on
// broadcast operands, cast, is_nan, where, range, and the fused elementwise
// chains, which become one generated kernel type per distinct chain for
// the CUDA build (shared by every op with the same chain).
//
// Taken from: onnx-mlir's Conversion/ONNXToKrnl/Math/Elementwise.cpp (one
// file for the elementwise family); the fused chains follow XLA's loop
// fusion (one kernel per fused elementwise cluster). Different: a chain's
// kernel is emitted as source once per distinct body, not per op.
//
//===----------------------------------------------------------------------===//

#include "EmitProgramInternal.h"

#include "llvm/ADT/TypeSwitch.h"

#include <limits>

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::emit_program;

std::optional<LogicalResult>
ProgramEmitter::emitElementwiseOp(Operation *op, const std::string &node) {
  auto binary = [&](StringRef function, StringRef kind) {
    os << "  " << function << "(ctx, " << node << ", " << kind << ", "
       << ref(op->getOperand(0)) << ", " << ref(op->getOperand(1)) << ", "
       << ref(op->getResult(0)) << ");\n";
    return success();
  };
  constexpr double kFloatMax = std::numeric_limits<float>::infinity();
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](ReluOp) { return emitUnary(op, "Relu"); })
      .Case([&](ExpOp) { return emitUnary(op, "Exp"); })
      .Case([&](LogOp) { return emitUnary(op, "Log"); })
      .Case([&](SqrtOp) { return emitUnary(op, "Sqrt"); })
      .Case([&](ReciprocalOp) { return emitUnary(op, "Reciprocal"); })
      .Case([&](NegOp) { return emitUnary(op, "Neg"); })
      .Case([&](AbsOp) { return emitUnary(op, "Abs"); })
      .Case([&](SigmoidOp) { return emitUnary(op, "Sigmoid"); })
      .Case([&](TanhOp) { return emitUnary(op, "Tanh"); })
      .Case([&](ErfOp) { return emitUnary(op, "Erf"); })
      .Case([&](SinOp) { return emitUnary(op, "Sin"); })
      .Case([&](CosOp) { return emitUnary(op, "Cos"); })
      .Case([&](NotOp) { return emitUnary(op, "Not"); })
      .Case([&](HardSwishOp) { return emitUnary(op, "HardSwish"); })
      .Case([&](LeakyReluOp leaky) {
        return emitUnary(op, "LeakyRelu", toDouble(leaky.getAlpha()));
      })
      .Case([&](HardSigmoidOp hard) {
        return emitUnary(op, "HardSigmoid", toDouble(hard.getAlpha()),
                         toDouble(hard.getBeta()));
      })
      .Case([&](GeluOp gelu) {
        return emitUnary(op,
                         gelu.getApproximate() == "tanh" ? "GeluTanh" : "Gelu");
      })
      .Case([&](ClipOp clip) {
        std::optional<APFloat> low = clip.getMin(), high = clip.getMax();
        return emitUnary(op, "Clip", low ? toDouble(*low) : -kFloatMax,
                         high ? toDouble(*high) : kFloatMax);
      })
      .Case(
          [&](FusedElementwiseOp fused) { return emitFusedElementwise(fused); })
      .Case([&](CastOp) {
        os << "  cast(ctx, " << node << ", " << ref(op->getOperand(0)) << ", "
           << ref(op->getResult(0)) << ");\n";
        return success();
      })
      .Case([&](AddOp) { return binary("binary", "BinaryOp::Add"); })
      .Case([&](SubOp) { return binary("binary", "BinaryOp::Sub"); })
      .Case([&](MulOp) { return binary("binary", "BinaryOp::Mul"); })
      .Case([&](DivOp) { return binary("binary", "BinaryOp::Div"); })
      .Case([&](PowOp) { return binary("binary", "BinaryOp::Pow"); })
      .Case([&](ModOp mod) {
        // fmod = 1 truncates (C fmod / %); fmod = 0 (integers only) floors.
        return binary("binary",
                      mod.getFmod() ? "BinaryOp::FMod" : "BinaryOp::Mod");
      })
      .Case([&](MinOp) { return binary("binary", "BinaryOp::Min"); })
      .Case([&](MaxOp) { return binary("binary", "BinaryOp::Max"); })
      .Case([&](ReluGradOp) { return binary("binary", "BinaryOp::ReluGrad"); })
      .Case([&](EqualOp) { return binary("compare", "CompareOp::Equal"); })
      .Case([&](LessOp) { return binary("compare", "CompareOp::Less"); })
      .Case([&](GreaterOp) { return binary("compare", "CompareOp::Greater"); })
      .Case([&](AndOp) { return binary("logical", "LogicalOp::And"); })
      .Case([&](OrOp) { return binary("logical", "LogicalOp::Or"); })
      .Case([&](IsNaNOp) {
        os << "  isNaN(ctx, " << node << ", " << ref(op->getOperand(0)) << ", "
           << ref(op->getResult(0)) << ");\n";
        return success();
      })
      .Case([&](RangeOp range) {
        os << "  range(ctx, " << node << ", " << ref(range.getStart()) << ", "
           << ref(range.getDelta()) << ", " << ref(range.getResult()) << ");\n";
        return success();
      })
      .Case([&](WhereOp) {
        os << "  where(ctx, " << node << ", " << ref(op->getOperand(0)) << ", "
           << ref(op->getOperand(1)) << ", " << ref(op->getOperand(2)) << ", "
           << ref(op->getResult(0)) << ");\n";
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}

LogicalResult ProgramEmitter::emitUnary(Operation *op, StringRef kind,
                                        double alpha, double beta) {
  os << "  unary(ctx, " << nodeLiteral(op) << ", UnaryOp::" << kind << ", "
     << cppFloat(alpha) << ", " << cppFloat(beta) << ", "
     << ref(op->getOperand(0)) << ", " << ref(op->getResult(0)) << ");\n";
  return success();
}

LogicalResult ProgramEmitter::emitFusedElementwise(FusedElementwiseOp op) {
  // Step names (the op's verifier knows them) -> the runtime's enumerators.
  auto runtimeStep = [](StringRef name) {
    return StringSwitch<const char *>(name)
        .Case("add", "BinaryOp::Add")
        .Case("sub", "BinaryOp::Sub")
        .Case("mul", "BinaryOp::Mul")
        .Case("div", "BinaryOp::Div")
        .Case("pow", "BinaryOp::Pow")
        .Case("min", "BinaryOp::Min")
        .Case("max", "BinaryOp::Max")
        .Case("relu_grad", "BinaryOp::ReluGrad")
        .Case("relu", "UnaryOp::Relu")
        .Case("exp", "UnaryOp::Exp")
        .Case("log", "UnaryOp::Log")
        .Case("sqrt", "UnaryOp::Sqrt")
        .Case("reciprocal", "UnaryOp::Reciprocal")
        .Case("neg", "UnaryOp::Neg")
        .Case("abs", "UnaryOp::Abs")
        .Case("sigmoid", "UnaryOp::Sigmoid")
        .Case("tanh", "UnaryOp::Tanh")
        .Case("erf", "UnaryOp::Erf")
        .Case("sin", "UnaryOp::Sin")
        .Case("cos", "UnaryOp::Cos")
        .Case("hard_swish", "UnaryOp::HardSwish")
        .Case("leaky_relu", "UnaryOp::LeakyRelu")
        .Case("hard_sigmoid", "UnaryOp::HardSigmoid")
        .Case("gelu", "UnaryOp::Gelu")
        .Case("gelu_tanh", "UnaryOp::GeluTanh")
        .Case("clip", "UnaryOp::Clip")
        .Default(nullptr);
  };
  ArrayRef<int64_t> registers = op.getRegisters();
  int64_t numInputs = op.getInputs().size();
  // The CUDA build gets the steps as code (FusedKernel.cuh): one kernel per
  // distinct chain, the chain inlined on registers.
  std::string apply;
  llvm::raw_string_ostream kernel(apply);
  auto operand = [&](int64_t reg) {
    return reg < numInputs ? "x[" + std::to_string(reg) + "]"
                           : "r" + std::to_string(reg);
  };
  // The interpreter's table, for the host build and the layouts the kernel
  // does not address.
  os << "  {\n    static const ElementwiseStep steps[] = {\n";
  for (auto [index, attr] : llvm::enumerate(op.getOps())) {
    StringRef name = cast<StringAttr>(attr).getValue();
    const char *step = runtimeStep(name);
    if (!step)
      return error(op) << "has an unknown fused step '" << name << "'";
    bool binary = FusedElementwiseOp::isBinaryStep(name);
    int64_t a = registers[2 * index], b = registers[2 * index + 1];
    std::string alpha = cppFloat(op.getAlphas()[index]);
    std::string beta = cppFloat(op.getBetas()[index]);
    os << "        {ElementwiseStep::" << (binary ? "kBinary" : "kUnary")
       << ", int32_t(" << step << "), " << a << ", " << b << ", " << alpha
       << ", " << beta << "},\n";
    kernel << "    const float r" << numInputs + int64_t(index) << " = ";
    if (binary)
      kernel << "binaryStep(" << step << ", " << operand(a) << ", "
             << operand(b) << ");\n";
    else
      kernel << "unaryStep(" << step << ", " << operand(a) << ", " << alpha
             << ", " << beta << ");\n";
  }
  kernel << "    return r" << numInputs + int64_t(op.getOps().size()) - 1
         << ";\n";
  std::string key = std::to_string(numInputs) + "\n" + apply;
  auto [entry, inserted] = fusedPrograms.try_emplace(
      key, "FusedProgram" + std::to_string(fusedPrograms.size()));
  std::string program = entry->second;
  if (inserted)
    kernels += "struct " + program + " {\n  static constexpr int kInputs = " +
               std::to_string(numInputs) +
               ";\n  __device__ __forceinline__ static float apply(const "
               "float *x) {\n" +
               apply + "  }\n};\n\n";
  std::optional<StringRef> type = getCudaElementType(op.getType()),
                           inputType =
                               getCudaElementType(op.getInputs()[0].getType());
  if (!type || !inputType)
    return error(op) << "has an element type generated kernels do not support";
  os << "    };\n    const TensorRef inputs[] = {";
  for (auto [index, input] : llvm::enumerate(op.getInputs()))
    os << (index ? ", " : "") << ref(input);
  std::string arguments = "(ctx, " + nodeLiteral(op) + ", steps, " +
                          std::to_string(op.getOps().size()) + ", inputs, " +
                          std::to_string(numInputs) + ", " +
                          ref(op.getResult()) + ");\n";
  std::string instance = program + ", " + inputType->str() + ", " + type->str();
  auto [slot, first] =
      fusedInstanceIndex.try_emplace(instance, fusedInstances.size());
  if (first)
    fusedInstances.push_back(instance);
  segmentKernels.push_back(slot->second);
  os << "};\n#ifdef __CUDACC__\n    fusedElementwiseProgram<" << instance << ">"
     << arguments << "#else\n    fusedElementwise" << arguments
     << "#endif\n  }\n";
  return success();
}
