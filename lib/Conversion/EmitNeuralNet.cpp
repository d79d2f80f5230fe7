//===- EmitNeuralNet.cpp - matmul, conv, norms, attention -----------------===//
//
// The neural-network family of the program emitter
// (EmitProgramInternal.h): matmul and gemm (with their planned cuBLAS
// workspace and fused activation), convolutions (plain, residual,
// transposed), pooling, batch / layer normalization, softmax and attention
// (with its planned workspace and log-sum-exp output).
//
// Taken from: onnx-mlir's Conversion/ONNXToKrnl/NN/ (conv, pooling,
// normalization in one group) and IREE's workspace-carrying dispatches.
// Different: the workspaces are arena offsets from the planner, so the
// runtime allocates nothing.
//
//===----------------------------------------------------------------------===//

#include "EmitProgramInternal.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::emit_program;

std::optional<LogicalResult>
ProgramEmitter::emitNeuralNetOp(Operation *op, const std::string &node) {
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](MatMulOp matmul) { return emitMatMul(matmul); })
      .Case([&](GemmOp gemm) {
        if (failed(emitMatmulWorkspace(op)))
          return failure();
        os << "  {\n    MatmulParams params;\n    params.transA = "
           << (gemm.getTransA() ? "true" : "false")
           << ";\n    params.transB = " << (gemm.getTransB() ? "true" : "false")
           << ";\n    params.alpha = " << cppFloat(toDouble(gemm.getAlpha()))
           << ";\n    params.beta = " << cppFloat(toDouble(gemm.getBeta()))
           << ";\n";
        emitTf32(op);
        if (gemm.getActivation() != "none")
          os << "    params.activation = "
             << runtimeActivation(gemm.getActivation()) << ";\n";
        os << "    matmul(ctx, " << node << ", params, " << ref(gemm.getA())
           << ", " << ref(gemm.getB()) << ", "
           << (gemm.getC() ? "&" + ref(gemm.getC()) : std::string("nullptr"))
           << ", " << ref(gemm.getResult()) << ");\n  }\n";
        return success();
      })
      .Case([&](ConvOp conv) {
        return emitConv(op, conv.getKernelShape(), conv.getStrides(),
                        conv.getPads(), conv.getDilations(), conv.getGroup(),
                        {}, conv.getB(), "conv", conv.getActivation(),
                        conv.getChannelsLast());
      })
      .Case([&](ConvResidualOp conv) {
        return emitConv(op, conv.getKernelShape(), conv.getStrides(),
                        conv.getPads(), conv.getDilations(), conv.getGroup(),
                        {}, conv.getB(), "convResidual", conv.getActivation(),
                        conv.getChannelsLast());
      })
      .Case([&](ConvTransposeOp conv) {
        return emitConv(op, conv.getKernelShape(), conv.getStrides(),
                        conv.getPads(), conv.getDilations(), conv.getGroup(),
                        conv.getOutputPadding(), conv.getB(), "convTranspose",
                        "none", conv.getChannelsLast());
      })
      .Case([&](MaxPoolOp pool) {
        return emitPool(op, "Max", pool.getKernelShape(), pool.getStrides(),
                        pool.getPads(), pool.getDilations(),
                        pool.getCeilMode() != 0, false, pool.getChannelsLast());
      })
      .Case([&](AveragePoolOp pool) {
        return emitPool(op, "Avg", pool.getKernelShape(), pool.getStrides(),
                        pool.getPads(), pool.getDilations(),
                        pool.getCeilMode() != 0, pool.getCountIncludePad() != 0,
                        pool.getChannelsLast());
      })
      .Case([&](GlobalAveragePoolOp pool) {
        os << "  globalAvgPool(ctx, " << node << ", " << ref(op->getOperand(0))
           << ", " << ref(op->getResult(0))
           << (pool.getChannelsLast() ? ", true" : "") << ");\n";
        return success();
      })
      .Case([&](BatchNormalizationOp norm) {
        os << "  batchNorm(ctx, " << node << ", "
           << cppFloat(toDouble(norm.getEpsilon()));
        for (Value operand : op->getOperands())
          os << ", " << ref(operand);
        os << ", " << ref(op->getResult(0))
           << (norm.getChannelsLast() ? ", true" : "") << ");\n";
        return success();
      })
      .Case([&](LayerNormalizationOp norm) {
        int64_t rank = cast<RankedTensorType>(norm.getX().getType()).getRank();
        os << "  layerNorm(ctx, " << node << ", "
           << normalizeAxis(norm.getAxis(), rank) << ", "
           << cppFloat(toDouble(norm.getEpsilon())) << ", " << ref(norm.getX())
           << ", " << ref(norm.getScale()) << ", "
           << (norm.getB() ? "&" + ref(norm.getB()) : std::string("nullptr"))
           << ", " << ref(op->getResult(0)) << ");\n";
        return success();
      })
      .Case([&](SoftmaxOp softmax) {
        int64_t rank =
            cast<RankedTensorType>(op->getOperand(0).getType()).getRank();
        os << "  softmax(ctx, " << node << ", "
           << normalizeAxis(softmax.getAxis(), rank) << ", false, "
           << ref(op->getOperand(0)) << ", " << ref(op->getResult(0)) << ");\n";
        return success();
      })
      .Case([&](AttentionOp attention) -> LogicalResult {
        FailureOr<std::string> workspace = workspaceArguments(op);
        if (failed(workspace))
          return failure();
        os << "  {\n    AttentionParams params;\n    params.scale = "
           << cppFloat(toDouble(attention.getScale()))
           << ";\n    params.causal = "
           << (attention.getCausal() ? "true" : "false")
           << ";\n    params.keyTransposed = "
           << (attention.getKeyTransposed() ? "true" : "false") << ";\n";
        if (attention.getSafeSoftmax())
          os << "    params.safeSoftmax = true;\n";
        emitAttentionDropout(attention.getDropoutRatio().convertToFloat(),
                             attention.getDropoutStream(),
                             attention.getDropoutKey(),
                             attention.getDropoutCudnnRng());
        emitTf32(op);
        if (attention.getLse())
          os << "    TensorRef lse = " << ref(attention.getLse()) << ";\n";
        os << "    attention(ctx, " << node << ", params, "
           << ref(attention.getQ()) << ", " << ref(attention.getK()) << ", "
           << ref(attention.getV()) << ", "
           << (attention.getBias() ? "&" + ref(attention.getBias())
                                   : std::string("nullptr"))
           << ", " << ref(attention.getY()) << ", " << *workspace
           << (attention.getLse() ? ", &lse" : "") << ");\n  }\n";
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}

void ProgramEmitter::emitAttentionDropout(float ratio, uint64_t stream,
                                          Value key, bool cudnnRng) {
  if (ratio == 0.0f || !key)
    return;
  // The key is the program's random_key tensor ([seed, micro-batch]), read
  // by the kernels where they run (a device pointer on CUDA), as dropout()
  // reads it.
  os << "    params.dropoutRatio = " << cppFloat(ratio)
     << ";\n    params.dropoutStream = " << uint32_t(stream)
     << "u;\n    params.dropoutKey = static_cast<const int64_t *>(" << ref(key)
     << ".data);\n";
  if (cudnnRng)
    os << "    params.dropoutCudnnRng = true;\n";
}

LogicalResult ProgramEmitter::emitMatmulWorkspace(Operation *op) {
  auto size = op->getAttrOfType<IntegerAttr>("memopt.workspace_size");
  auto offset = op->getAttrOfType<IntegerAttr>("memopt.workspace_offset");
  if (!size || !offset || size.getInt() <= 0)
    return success();
  if (offset.getInt() < 0 || offset.getInt() + size.getInt() > arenaSize)
    return error(op) << "has a workspace outside the arena of " << arenaSize
                     << " bytes";
  os << "  setMatmulWorkspace(ctx, arena + " << offset.getInt() << ", size_t("
     << size.getInt() << "));\n";
  return success();
}

LogicalResult ProgramEmitter::emitMatMul(MatMulOp op) {
  // The runtime takes operands of rank >= 2: ONNX's 1-D operands become a
  // row (A) or a column (B) and the result gets the dropped unit dimension.
  auto aType = cast<RankedTensorType>(op.getA().getType());
  auto bType = cast<RankedTensorType>(op.getB().getType());
  auto cType = cast<RankedTensorType>(op.getResult().getType());
  SmallVector<int64_t> aShape(aType.getShape()), bShape(bType.getShape()),
      cShape(cType.getShape());
  if (aShape.size() == 1) {
    aShape.insert(aShape.begin(), 1);
    cShape.insert(cShape.end() - (bShape.size() == 1 ? 0 : 1), 1);
  }
  if (bShape.size() == 1) {
    bShape.push_back(1);
    cShape.push_back(1);
  }
  if (failed(emitMatmulWorkspace(op)))
    return failure();
  os << "  {\n    MatmulParams params;\n";
  emitTf32(op);
  os << "    matmul(ctx, " << nodeLiteral(op) << ", params, "
     << refWithShape(op.getA(), aShape) << ", "
     << refWithShape(op.getB(), bShape) << ", nullptr, "
     << refWithShape(op.getResult(), cShape) << ");\n  }\n";
  return success();
}

LogicalResult ProgramEmitter::emitConv(
    Operation *op, ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
    ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations, int64_t group,
    ArrayRef<int64_t> outputPadding, Value bias, StringRef callee,
    StringRef activation, bool channelsLast) {
  size_t spatial = kernel.size();
  if (spatial < 1 || spatial > 3)
    return error(op) << "has " << spatial
                     << " spatial dimensions; the runtime supports 1 to 3";
  os << "  {\n    ConvParams params;\n    params.spatialRank = " << spatial
     << ";\n";
  for (size_t i = 0; i < spatial; ++i) {
    os << "    params.padsBegin[" << i << "] = " << pads[i] << ";\n"
       << "    params.padsEnd[" << i << "] = " << pads[spatial + i] << ";\n"
       << "    params.strides[" << i << "] = " << strides[i] << ";\n"
       << "    params.dilations[" << i << "] = " << dilations[i] << ";\n";
    if (i < outputPadding.size())
      os << "    params.outputPadding[" << i << "] = " << outputPadding[i]
         << ";\n";
  }
  os << "    params.group = " << group << ";\n";
  emitTf32(op);
  if (channelsLast)
    os << "    params.channelsLast = true;\n";
  if (activation != "none")
    os << "    params.activation = " << runtimeActivation(activation) << ";\n";
  FailureOr<std::string> workspace = workspaceArguments(op);
  if (failed(workspace))
    return failure();
  // The filter gradients take (x, dy, dw): no bias operand; the residual
  // conv takes (x, w, bias, residual, y); the normalizing ones (x, w or dy,
  // scale, shift, then bias and y, or dw).
  bool normalizing =
      callee == "normReluConv" || callee == "normReluConvBackwardFilter";
  bool hasBiasArgument =
      callee != "convBackwardFilter" && callee != "normReluConvBackwardFilter";
  os << "    " << callee << "(ctx, " << nodeLiteral(op) << ", params, "
     << ref(op->getOperand(0)) << ", " << ref(op->getOperand(1)) << ", "
     << (normalizing
             ? ref(op->getOperand(2)) + ", " + ref(op->getOperand(3)) + ", "
             : std::string())
     << (!hasBiasArgument ? std::string()
         : bias           ? "&" + ref(bias) + ", "
                          : std::string("nullptr, "))
     << (callee == "convResidual" ? ref(op->getOperand(3)) + ", " : "")
     << ref(op->getResult(0)) << ", " << *workspace << ");\n  }\n";
  return success();
}

FailureOr<std::string> ProgramEmitter::workspaceArguments(Operation *op) {
  auto workspaceSize = op->getAttrOfType<IntegerAttr>("memopt.workspace_size");
  std::string workspace = arenaPointer(op, "memopt.workspace_offset");
  if (!workspaceSize || workspaceSize.getInt() == 0 || workspace == "nullptr")
    return std::string("nullptr, size_t(0)");
  if (op->getAttrOfType<IntegerAttr>("memopt.workspace_offset").getInt() +
          workspaceSize.getInt() >
      arenaSize)
    return error(op) << "has a workspace outside the arena of " << arenaSize
                     << " bytes";
  return workspace + ", size_t(" + std::to_string(workspaceSize.getInt()) + ")";
}

LogicalResult ProgramEmitter::emitPool(Operation *op, StringRef kind,
                                       ArrayRef<int64_t> kernel,
                                       ArrayRef<int64_t> strides,
                                       ArrayRef<int64_t> pads,
                                       ArrayRef<int64_t> dilations,
                                       bool ceilMode, bool countIncludePad,
                                       bool channelsLast) {
  size_t spatial = kernel.size();
  if (spatial < 1 || spatial > 3)
    return error(op) << "has " << spatial
                     << " spatial dimensions; the runtime supports 1 to 3";
  os << "  {\n    PoolParams params;\n    params.kind = PoolKind::" << kind
     << ";\n    params.spatialRank = " << spatial << ";\n";
  for (size_t i = 0; i < spatial; ++i)
    os << "    params.kernel[" << i << "] = " << kernel[i] << ";\n"
       << "    params.padsBegin[" << i << "] = " << pads[i] << ";\n"
       << "    params.padsEnd[" << i << "] = " << pads[spatial + i] << ";\n"
       << "    params.strides[" << i << "] = " << strides[i] << ";\n"
       << "    params.dilations[" << i
       << "] = " << (i < dilations.size() ? dilations[i] : 1) << ";\n";
  os << "    params.ceilMode = " << (ceilMode ? "true" : "false") << ";\n"
     << "    params.countIncludePad = " << (countIncludePad ? "true" : "false")
     << ";\n";
  if (channelsLast)
    os << "    params.channelsLast = true;\n";
  // The gradient reads (x, dy) and writes dx; the forward reads x.
  if (isa<PoolGradOp>(op))
    os << "    poolGrad(ctx, " << nodeLiteral(op) << ", params, "
       << ref(op->getOperand(0)) << ", " << ref(op->getOperand(1)) << ", "
       << ref(op->getResult(0)) << ");\n  }\n";
  else
    os << "    pool(ctx, " << nodeLiteral(op) << ", params, "
       << ref(op->getOperand(0)) << ", " << ref(op->getResult(0))
       << ");\n  }\n";
  return success();
}
