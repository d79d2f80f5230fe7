//===- EmitProgram.cpp - planned memopt IR -> generated C++ program -------===//
//
// A direct emitter: `ProgramEmitter` walks the planned function once, in
// block order (the scheduler's order), and writes one runtime call per op.
// Every tensor becomes a `TensorRef` local whose pointer comes from where its
// storage lives (BufferLiveness): the arena at the op's `memopt.offsets`, the
// weight region at the constant's `memopt.weight_offset`, or the caller's
// input / output buffer. View ops only declare a new TensorRef over the same
// bytes. Returned values that do not already live in their output buffer are
// copied there at the end.
//
// This file is the driver: the checks, the weights and host-state tables,
// ProgramInfo, the TensorRef declarations, the dispatch (emitCall) and the
// program's skeleton. The runtime calls of each op family live in their own
// files (EmitProgramInternal.h lists them and holds the shared state).
//
// Taken from: TVM's AOT executor (one generated `run` function calling
// operator entry points with pointers into a pre-planned workspace), IREE's
// HAL (the executable table describing inputs, outputs and constants next to
// the code), onnx-mlir (node names carried into the generated calls for
// error messages). Different: offsets are compile-time constants from the
// planner, including convolution workspaces, and the runtime allocates
// nothing. Why not EmitC: see docs/lowering.md.
//
//===----------------------------------------------------------------------===//

#include "EmitProgramInternal.h"

#include "mlir/IR/DialectResourceBlobManager.h"

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::emit_program;

void ProgramEmitter::emitTf32(Operation *op) {
  if (allowTf32 &&
      cast<ShapedType>(op->getOperand(0).getType()).getElementType().isF32())
    os << "    params.allowTf32 = true;\n";
}

std::string ProgramEmitter::nodeName(Operation *op) {
  if (auto name = findNodeName(op->getLoc()))
    return *name;
  return (op->getName().stripDialect() + "_" + Twine(nextOp)).str();
}

InFlightDiagnostic ProgramEmitter::error(Operation *op) {
  InFlightDiagnostic diag = op->emitError();
  diag << "'" << op->getName() << "' (ONNX node '" << nodeName(op) << "') ";
  return diag;
}

LogicalResult ProgramEmitter::checkPlanned() {
  auto arena = function->getAttrOfType<IntegerAttr>("memopt.arena_size");
  auto weightRegion =
      function->getAttrOfType<IntegerAttr>("memopt.weights_size");
  if (!arena || !weightRegion)
    return function.emitError("function @")
           << function.getName()
           << " is not planned (no memopt.arena_size / memopt.weights_size): "
              "run --memopt-plan-memory before lowering";
  arenaSize = arena.getInt();
  weightsSize = weightRegion.getInt();
  if (!function.getBody().hasOneBlock())
    return function.emitError("lowering expects a single-block function");
  for (Operation &op : function.getBody().front().without_terminator()) {
    if (isWeightRegionOp(&op)) {
      bool host = isHostPlaced(op.getResult(0));
      if (!op.getAttrOfType<IntegerAttr>(host ? "memopt.host_offset"
                                              : "memopt.weight_offset"))
        return error(&op) << "has no "
                          << (host ? "memopt.host_offset"
                                   : "memopt.weight_offset")
                          << ": the function is not planned; run "
                             "--memopt-plan-memory first";
      continue;
    }
    if (offloadedMaster(&op) &&
        !op.getAttrOfType<IntegerAttr>("memopt.staging_offset"))
      return error(&op) << "has a host master but no memopt.staging_offset: "
                           "run --memopt-plan-memory first";
    auto offsets = op.getAttrOfType<DenseI64ArrayAttr>("memopt.offsets");
    if (!offsets)
      return error(&op) << "has no memopt.offsets: the function is not "
                           "planned; run --memopt-plan-memory first";
    if (offsets.size() != int64_t(op.getNumResults()))
      return error(&op) << "has " << offsets.size() << " memopt.offsets for "
                        << op.getNumResults() << " results";
    for (Value result : op.getResults()) {
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type || !type.hasStaticShape())
        return error(&op) << "has a result that is not a static tensor";
      if (type.getRank() > kMaxRank)
        return error(&op) << "has a result of rank " << type.getRank()
                          << "; the runtime supports rank <= " << kMaxRank;
      if (!getDTypeName(type.getElementType()))
        return error(&op) << "has a result of element type "
                          << type.getElementType()
                          << " that the runtime does not support";
    }
  }
  for (BlockArgument argument : function.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(argument.getType());
    if (!type || !type.hasStaticShape() || type.getRank() > kMaxRank ||
        !getDTypeName(type.getElementType()))
      return function.emitError("input #")
             << argument.getArgNumber() << " has type " << argument.getType()
             << ", which the runtime does not support";
  }
  return success();
}

LogicalResult ProgramEmitter::collectWeights() {
  weights.size = weightsSize;
  llvm::raw_string_ostream table(tables);
  std::string initData;
  llvm::raw_string_ostream init(initData);
  std::string entries, wholeEntries;
  llvm::raw_string_ostream entry(entries), wholeEntry(wholeEntries);
  bool anySharded = false;
  unsigned count = 0;
  // The low working parameters of offloaded updates (HostUpdates.h).
  function.walk([&](Operation *op) {
    if (hasLowWorkingParameter(op))
      lowParameters.insert(getHostUpdateOperands(op).param.getDefiningOp());
  });
  for (Operation &op : function.getBody().front().without_terminator()) {
    if (!isWeightRegionOp(&op) || isHostPlaced(op.getResult(0)))
      continue;
    auto variable = dyn_cast<VariableOp>(op);
    Attribute value = variable ? Attribute(variable.getInitialValueAttr())
                               : cast<ConstantOp>(op).getValue();
    auto type = cast<RankedTensorType>(op.getResult(0).getType());
    int64_t offset =
        op.getAttrOfType<IntegerAttr>("memopt.weight_offset").getInt();
    std::optional<StringRef> dtype = getDTypeName(type.getElementType());
    if (!dtype || type.getRank() > kMaxRank)
      return error(&op) << "has type " << type
                        << ", which the runtime does not support";
    int64_t bytes = getBytes(type);
    if (offset < 0 || offset + bytes > weightsSize)
      return error(&op) << "has memopt.weight_offset " << offset << " and "
                        << bytes << " bytes, outside the weight region of "
                        << weightsSize << " bytes";
    // The bytes are written later, straight from the value's storage
    // (WeightImage.h): the region is never built in memory.
    // ZeRO-3: a sharded parameter's initial value is the whole parameter;
    // the weight file holds rank r's shard of it in region r.
    auto shards = variable
                      ? variable->getAttrOfType<IntegerAttr>("memopt.shards")
                      : IntegerAttr();
    weights.entries.push_back(
        {offset, type, value, &op, shards ? shards.getInt() : 0});
    // Non-float constants (indices, shapes) and scalars keep their bytes in
    // the program too, so a run with random weights stays meaningful.
    std::string initPointer = "nullptr";
    // (Not a sharded parameter's: its bytes differ from rank to rank.)
    if (!shards && (!isa<FloatType>(type.getElementType()) ||
                    type.getNumElements() <= 1)) {
      FailureOr<std::vector<char>> data = getConstantBytes(value, type);
      if (failed(data))
        return error(&op) << "has a value whose bytes cannot be read (expected "
                             "a dense or dense_resource attribute of "
                          << bytes << " bytes)";
      initPointer = "kInit" + std::to_string(count);
      init << "alignas(8) const unsigned char " << initPointer << "[] = {";
      for (int64_t i = 0; i < std::max<int64_t>(bytes, 1); ++i)
        init << (i ? "," : "")
             << (i < bytes ? unsigned((unsigned char)(*data)[i]) : 0u);
      init << "};\n";
    }
    std::string name = variable
                           ? variable.getName().str()
                           : findNodeName(op.getLoc())
                                 .value_or("weight" + std::to_string(count));
    StringRef role = "Constant";
    if (variable)
      role = StringSwitch<StringRef>(variable.getRole())
                 .Case("parameter", "Parameter")
                 .Case("optimizer_state", "OptimizerState")
                 .Case("statistic", "Statistic")
                 .Case("learning_rate", "LearningRate")
                 .Case("step", "StepCount")
                 .Case("gradient_accumulator", "GradientAccumulator")
                 .Case("micro_step", "MicroStep")
                 .Case("random_key", "RandomKey")
                 .Case("loss_scale", "LossScale")
                 .Case("loss_scale_state", "LossScaleState")
                 .Default("Constant");
    if (variable && variable.getRole() == "master")
      return error(&op) << "is a master weight outside the host state region "
                           "(memopt.placement = \"host\" expected)";
    weightIndex[&op] = count;
    weightsFingerprint.addWeight(name.c_str(), type.getRank(),
                                 type.getShape().data(), offset, bytes);
    entry << "    {" << cppString(name) << ", " << *dtype << ", "
          << type.getRank() << ", " << shapeList(type.getShape()) << ", "
          << offset << ", " << initPointer << ", WeightRole::" << role
          << "},\n";
    auto whole = shards
                     ? cast<RankedTensorType>(cast<TypedAttr>(value).getType())
                     : type;
    if (whole.getRank() > kMaxRank)
      return error(&op) << "shards a parameter of type " << whole
                        << ", which the runtime does not support";
    // A low working parameter (--offload optimizer) is saved as its f32
    // master (Program.h, wholeWeights).
    bool low = lowParameters.contains(&op);
    wholeEntry << "    {" << cppString(name) << ", "
               << (low ? StringRef("DType::F32") : *dtype) << ", "
               << whole.getRank() << ", " << shapeList(whole.getShape()) << ", "
               << (shards || low ? -1 : offset) << ", " << initPointer
               << ", WeightRole::" << role << "},\n";
    anySharded |= bool(shards) || low;
    ++count;
  }
  table << initData;
  if (count)
    table << "const TensorInfo kWeights[] = {\n" << entries << "};\n";
  if (anySharded)
    wholeWeightsTable =
        "const TensorInfo kWholeWeights[] = {\n" + wholeEntries + "};\n";
  if (count == 0)
    table << "const TensorInfo *const kWeights = nullptr;\n";
  return success();
}

LogicalResult ProgramEmitter::collectHostWeights() {
  if (auto size = function->getAttrOfType<IntegerAttr>("memopt.host_size"))
    hostStateSize = size.getInt();
  // The parameter each master belongs to, from the updates.
  llvm::DenseMap<Operation *, Operation *> paramOfMaster;
  function.walk([&](Operation *op) {
    Value master = offloadedMaster(op);
    if (master && master.getDefiningOp())
      paramOfMaster[master.getDefiningOp()] = op->getOperand(0).getDefiningOp();
  });
  std::string entries, masterOf;
  llvm::raw_string_ostream entry(entries), masters(masterOf);
  for (Operation &op : function.getBody().front().without_terminator()) {
    if (!isWeightRegionOp(&op) || !isHostPlaced(op.getResult(0)))
      continue;
    auto variable = cast<VariableOp>(op);
    auto type = cast<RankedTensorType>(variable.getType());
    int64_t offset =
        op.getAttrOfType<IntegerAttr>("memopt.host_offset").getInt();
    if (offset < 0 || offset + getBytes(type) > hostStateSize)
      return error(&op) << "has memopt.host_offset " << offset << " and "
                        << getBytes(type)
                        << " bytes, outside the host state region of "
                        << hostStateSize << " bytes";
    StringRef role = StringSwitch<StringRef>(variable.getRole())
                         .Case("master", "Master")
                         .Case("optimizer_state", "OptimizerState")
                         .Case("gradient_accumulator", "GradientAccumulator")
                         .Default("");
    if (role.empty())
      return error(&op) << "is a '" << variable.getRole()
                        << "' variable placed on the host; only masters, "
                           "optimizer state and gradient accumulators may be";
    int64_t param = -1;
    if (Operation *owner = paramOfMaster.lookup(&op))
      param = weightIndex.lookup(owner);
    else if (role == "Master")
      return error(&op) << "is a master that no update writes";
    entry << "    {" << cppString(variable.getName()) << ", "
          << *getDTypeName(type.getElementType()) << ", " << type.getRank()
          << ", " << shapeList(type.getShape()) << ", " << offset
          << ", nullptr, WeightRole::" << role << "},\n";
    masters << (hostWeightCount ? ", " : "") << param;
    ++hostWeightCount;
    // A low working parameter's master starts in the weight file, after
    // the region (WeightsFile.h): the runtime rounds it into the device
    // parameter at load.
    Operation *owner = paramOfMaster.lookup(&op);
    if (owner && lowParameters.contains(owner)) {
      int64_t fileOffset = weightsSize + lowMasterBytes;
      weights.entries.push_back(
          {fileOffset, type, variable.getInitialValueAttr(), &op});
      weightsFingerprint.addWeight(variable.getName().str().c_str(),
                                   type.getRank(), type.getShape().data(),
                                   fileOffset, getBytes(type));
      lowMasterBytes += getBytes(type);
    }
  }
  weights.size = weightsSize + lowMasterBytes;
  if (hostWeightCount)
    tables += "const TensorInfo kHostWeights[] = {\n" + entries +
              "};\nconst int32_t kMasterOf[] = {" + masterOf + "};\n";
  return success();
}

LogicalResult ProgramEmitter::emitTables() {
  llvm::raw_string_ostream table(tables);
  auto outputOffsets =
      function->getAttrOfType<DenseI64ArrayAttr>("memopt.output_offsets");
  if (outputOffsets &&
      outputOffsets.size() != int64_t(function.getNumResults()))
    return function.emitError("memopt.output_offsets has ")
           << outputOffsets.size() << " entries for "
           << function.getNumResults() << " results";
  for (auto [index, type] : llvm::enumerate(function.getResultTypes())) {
    int64_t offset = outputOffsets ? outputOffsets[index] : -1;
    if (offset >= 0 &&
        offset + getBytes(cast<RankedTensorType>(type)) > arenaSize)
      return function.emitError("output #")
             << index << " at arena offset " << offset
             << " lies outside the arena of " << arenaSize << " bytes";
  }
  // Inputs are the caller's buffers (-1); outputs may live in the arena.
  auto emitIo = [&](StringRef tableName, StringRef prefix, ArrayRef<Type> types,
                    auto getName, auto getOffset) {
    if (types.empty()) {
      table << "const TensorInfo *const " << tableName << " = nullptr;\n";
      return;
    }
    table << "const TensorInfo " << tableName << "[] = {\n";
    for (auto [index, type] : llvm::enumerate(types)) {
      auto tensor = cast<RankedTensorType>(type);
      std::string name = getName(index);
      if (name.empty())
        name = (prefix + Twine(index)).str();
      table << "    {" << cppString(name) << ", "
            << *getDTypeName(tensor.getElementType()) << ", "
            << tensor.getRank() << ", " << shapeList(tensor.getShape()) << ", "
            << getOffset(index) << ", nullptr, WeightRole::Constant},\n";
    }
    table << "};\n";
  };
  emitIo(
      "kInputs", "input", function.getArgumentTypes(),
      [&](size_t i) {
        auto name = function.getArgAttrOfType<StringAttr>(i, "memopt.name");
        return name ? name.str() : std::string();
      },
      [](size_t) { return int64_t(-1); });
  for (Type type : function.getResultTypes()) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape() || tensor.getRank() > kMaxRank ||
        !getDTypeName(tensor.getElementType()))
      return function.emitError("result type ")
             << type << " is not supported by the runtime";
  }
  emitIo(
      "kOutputs", "output", function.getResultTypes(),
      [&](size_t i) {
        auto name = function.getResultAttrOfType<StringAttr>(i, "memopt.name");
        return name ? name.str() : std::string();
      },
      [&](size_t i) { return outputOffsets ? outputOffsets[i] : int64_t(-1); });
  return success();
}

LogicalResult ProgramEmitter::declare(Value value, StringRef pointer) {
  auto type = cast<RankedTensorType>(value.getType());
  localOf[value] = nextLocal;
  std::string name = "t" + std::to_string(nextLocal++);
  std::string line = "  TensorRef " + name + " = ref(" + pointer.str() + ", " +
                     getDTypeName(type.getElementType())->str() + ", " +
                     shapeList(type.getShape()) + ");\n";
  os << line;
  declarations.push_back(std::move(line));
  declaredIn.push_back(segments.size());
  names[value] = name;
  pointers[value] = pointer.str();
  return success();
}

std::string ProgramEmitter::refWithShape(Value value, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(value.getType());
  return "ref(" + pointers.lookup(value) + ", " +
         getDTypeName(type.getElementType())->str() + ", " + shapeList(shape) +
         ")";
}

/// Declares the results of `op` at the places the plan gave them.
LogicalResult ProgramEmitter::declareResults(Operation *op) {
  ArrayRef<int64_t> offsets =
      op->getAttrOfType<DenseI64ArrayAttr>("memopt.offsets").asArrayRef();
  for (auto [result, offset] : llvm::zip_equal(op->getResults(), offsets)) {
    const Storage &storage = liveness.getStorage(result);
    auto type = cast<RankedTensorType>(result.getType());
    std::string pointer;
    switch (storage.kind) {
    case StorageKind::Arena:
      if (offset < 0 || offset + getBytes(type) > arenaSize)
        return error(op) << "has arena offset " << offset << " for "
                         << getBytes(type) << " bytes, outside the arena of "
                         << arenaSize << " bytes";
      pointer = "arena + " + std::to_string(offset);
      break;
    case StorageKind::Output:
      pointer = "outputs[" + std::to_string(storage.ioIndex) + "]";
      break;
    case StorageKind::Input:
    case StorageKind::Weight:
      // Only views reach here: a view of an input or a weight.
      pointer = pointers.lookup(storage.values.front());
      break;
    }
    if (failed(declare(result, pointer)))
      return failure();
  }
  return success();
}

std::string ProgramEmitter::arenaPointer(Operation *op, StringRef attr) {
  auto offset = op->getAttrOfType<IntegerAttr>(attr);
  return offset ? "arena + " + std::to_string(offset.getInt()) : "nullptr";
}

LogicalResult ProgramEmitter::emitOp(Operation *op) {
  for (Value operand : op->getOperands())
    if (!names.count(operand))
      return error(op) << "uses a value defined after it";
  if (isa<OffloadOp, OffloadWaitOp, ReloadOp, ReloadWaitOp>(op))
    return emitCopyStreamOp(op);
  // Views: a new TensorRef over the operand's bytes, no call.
  if (isa<ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp, IdentityOp>(op)) {
    os << "  // " << nodeName(op) << " (" << op->getName()
       << "): view, no call\n";
    return declare(op->getResult(0), pointers.lookup(op->getOperand(0)));
  }
  // Shapes are static, so shape always folds (--canonicalize, which the
  // compile driver runs before planning).
  if (isa<ShapeOp>(op))
    return error(op) << "has no runtime kernel: it folds to a constant; run "
                        "--canonicalize before lowering";
  if (failed(declareResults(op)))
    return failure();
  std::string node = nodeLiteral(op);
  if (failed(emitCall(op, node)))
    return failure();
  // Per-op instrumentation (the executable's --profile and --dump-ops); a
  // no-op otherwise, and outside the CUDA graph's replays altogether.
  os << "  {\n    const TensorRef results[] = {";
  llvm::interleaveComma(op->getResults(), os,
                        [&](Value result) { os << ref(result); });
  os << (op->getNumResults() ? "" : "TensorRef()") << "};\n    opDone(ctx, "
     << nextOp << ", " << node << ", "
     << cppString(op->getName().getStringRef()) << ", results, "
     << op->getNumResults() << ");\n  }\n";
  return success();
}

LogicalResult ProgramEmitter::emitCall(Operation *op, const std::string &node) {
  // Each family claims its ops (EmitProgramInternal.h lists the files).
  for (auto family :
       {&ProgramEmitter::emitElementwiseOp, &ProgramEmitter::emitNeuralNetOp,
        &ProgramEmitter::emitTensorOp, &ProgramEmitter::emitTrainingOp,
        &ProgramEmitter::emitCollectiveOp})
    if (std::optional<LogicalResult> result = (this->*family)(op, node))
      return *result;
  return error(op) << "has no runtime kernel yet";
}

LogicalResult ProgramEmitter::emitReturn(func::ReturnOp returnOp) {
  for (auto [index, value] : llvm::enumerate(returnOp.getOperands())) {
    const Storage &storage = liveness.getStorage(value);
    if (storage.kind == StorageKind::Output &&
        storage.ioIndex == int64_t(index))
      continue;
    // The value lives in another output, an input, a weight or the arena
    // (a returned value shares its storage): copy it into its own buffer.
    auto type = cast<RankedTensorType>(value.getType());
    os << "  copy(ctx, " << cppString(("output #" + Twine(index)).str()) << ", "
       << ref(value) << ", ref(outputs[" << index << "], "
       << *getDTypeName(type.getElementType()) << ", "
       << shapeList(type.getShape()) << "));\n";
  }
  return success();
}

FailureOr<EmittedProgram> ProgramEmitter::run() {
  if (auto precision = function->getAttrOfType<StringAttr>("memopt.precision"))
    allowTf32 = precision.getValue() == "tf32";
  if (failed(checkPlanned()) || failed(emitTables()) ||
      failed(collectWeights()) || failed(collectHostWeights()))
    return failure();
  os << "  uint8_t *W = const_cast<uint8_t *>(weights);\n"
     << "  (void)W;\n  (void)arena;\n  (void)inputs;\n";
  if (hostStateSize > 0)
    os << "  uint8_t *H = hostState(ctx);\n";
  // The body in segments, one per op (EmitSplit.cpp cuts it into chunks).
  segmentBegin = body.size();
  for (BlockArgument argument : function.getArguments())
    if (failed(declare(argument, ("static_cast<uint8_t *>(inputs[" +
                                  Twine(argument.getArgNumber()) + "])")
                                     .str())))
      return failure();
  endSegment(/*declarationsOnly=*/true);
  for (Operation &op : function.getBody().front()) {
    if (isWeightRegionOp(&op) && isHostPlaced(op.getResult(0))) {
      if (failed(declare(op.getResult(0),
                         ("H + " + Twine(op.getAttrOfType<IntegerAttr>(
                                               "memopt.host_offset")
                                             .getInt()))
                             .str())))
        return failure();
      endSegment(/*declarationsOnly=*/true);
      continue;
    }
    if (isWeightRegionOp(&op)) {
      if (failed(declare(op.getResult(0),
                         ("W + " + Twine(op.getAttrOfType<IntegerAttr>(
                                               "memopt.weight_offset")
                                             .getInt()))
                             .str())))
        return failure();
      endSegment(/*declarationsOnly=*/true);
      continue;
    }
    if (failed(emitBucketBoundary(&op)))
      return failure();
    if (auto returnOp = dyn_cast<func::ReturnOp>(op)) {
      // The step ends when every offloaded update's master is back on the
      // device (the next step's forward reads it).
      if (offloadSites > 0)
        os << "  offloadFinish(ctx);\n";
      if (failed(emitReturn(returnOp)))
        return failure();
      endSegment(/*declarationsOnly=*/false);
      continue;
    }
    if (failed(emitOp(&op)))
      return failure();
    endSegment(/*declarationsOnly=*/false);
    ++nextOp;
  }

  // Data parallel: the ranks, the sharding and which weights are shards of
  // which parameter (the driver gathers them for --save-state).
  int64_t dataParallelSize = 0, shardMode = 0;
  if (auto attr =
          function->getAttrOfType<DictionaryAttr>("memopt.data_parallel")) {
    auto ranks = attr.getAs<IntegerAttr>("ranks");
    auto shard = attr.getAs<StringAttr>("shard");
    if (!ranks || !shard || ranks.getInt() < 1) {
      function.emitError("memopt.data_parallel needs ranks >= 1 and a shard "
                         "mode");
      return failure();
    }
    dataParallelSize = ranks.getInt();
    shardMode = shard.getValue() == "optimizer"    ? 1
                : shard.getValue() == "gradients"  ? 2
                : shard.getValue() == "parameters" ? 3
                                                   : 0;
  }
  std::string shardOfTable;
  {
    SmallVector<int64_t> shardOf(weightIndex.size(), -1);
    bool any = false;
    function.walk([&](Operation *op) {
      Value param;
      SmallVector<Value> sharded;
      if (auto sgd = dyn_cast<SGDUpdateOp>(op); sgd && sgd.getShards() > 1) {
        param = sgd.getParam();
        sharded = {sgd.getMomentumBuffer(), sgd.getAccumulator()};
      } else if (auto adamw = dyn_cast<AdamWUpdateOp>(op);
                 adamw && adamw.getShards() > 1) {
        param = adamw.getParam();
        sharded = {adamw.getExpAvg(), adamw.getExpAvgSq(),
                   adamw.getAccumulator()};
      }
      // ZeRO-3: a plain update of a sharded parameter, itself a shard.
      if (!param) {
        if (auto sgd = dyn_cast<SGDUpdateOp>(op)) {
          param = sgd.getParam();
          sharded = {sgd.getMomentumBuffer(), sgd.getAccumulator(), param};
        } else if (auto adamw = dyn_cast<AdamWUpdateOp>(op)) {
          param = adamw.getParam();
          sharded = {adamw.getExpAvg(), adamw.getExpAvgSq(),
                     adamw.getAccumulator(), param};
        }
        auto variable = param ? param.getDefiningOp<VariableOp>() : nullptr;
        if (!variable || !variable->hasAttr("memopt.shards"))
          return;
      }
      for (Value value : sharded)
        if (value && value.getDefiningOp())
          if (auto it = weightIndex.find(value.getDefiningOp());
              it != weightIndex.end()) {
            shardOf[it->second] = weightIndex.lookup(param.getDefiningOp());
            any = true;
          }
    });
    if (any) {
      llvm::raw_string_ostream table(shardOfTable);
      table << "const int32_t kShardOf[] = {";
      llvm::interleaveComma(shardOf, table);
      table << "};\n";
    }
  }
  tables += shardOfTable;
  tables += wholeWeightsTable;
  // ZeRO-3: one region per rank in the weight file.
  if (!wholeWeightsTable.empty() && dataParallelSize > 1) {
    std::vector<WeightImageEntry> perRank;
    for (int64_t r = 0; r < dataParallelSize; ++r)
      for (WeightImageEntry entry : weights.entries) {
        entry.offset += r * weightsSize;
        entry.shardRank = r;
        perRank.push_back(entry);
      }
    weights.entries = std::move(perRank);
    weights.size = dataParallelSize * weightsSize;
  }

  std::string programName = options.programName.empty()
                                ? function.getName().str()
                                : options.programName;
  auto hostPoolAttr =
      function->getAttrOfType<IntegerAttr>("memopt.host_pool_size");
  int64_t hostPoolBytes = hostPoolAttr ? hostPoolAttr.getInt() : 0;
  std::string banner, includes, programInfo;
  llvm::raw_string_ostream bannerOs(banner), includesOs(includes),
      info(programInfo);
  bannerOs << "// Generated by memopt-compile from @" << function.getName()
           << ". Do not edit.\n"
           << "// Arena: " << arenaSize
           << " bytes; weight region: " << weightsSize << " bytes"
           << (hostStateSize ? "; host state region: " : "")
           << (hostStateSize ? std::to_string(hostStateSize) + " bytes" : "")
           << ".\n";
  includesOs << "#include \"memopt/Runtime/Program.h\"\n";
  if (!kernels.empty())
    includesOs
        << "#ifdef __CUDACC__\n#include \"memopt/Runtime/FusedKernel.cuh\"\n"
        << "#endif\n";
  // Buckets of collectives (beginCollectives, ...; Communicator.h).
  if (!issuedBuckets.empty())
    includesOs << "#include \"memopt/Runtime/Communicator.h\"\n";
  includesOs << "\n#include <cmath>\n#include <initializer_list>\n\n"
             << "using namespace memopt::rt;\n\n";
  info << "const ProgramInfo kProgram = {kProgramAbiVersion, "
       << cppString(programName) << ", " << arenaSize << ", " << weightsSize
       << ", " << function.getNumArguments() << ", " << function.getNumResults()
       << ", "
       << llvm::count_if(function.getBody().front(),
                         [](Operation &op) {
                           return isWeightRegionOp(&op) &&
                                  !isHostPlaced(op.getResult(0));
                         })
       << ", kInputs, kOutputs, kWeights, run, "
       << (llvm::any_of(function.getBody().front(),
                        [](Operation &op) { return isa<VariableOp>(op); })
               ? 1
               : 0)
       << ", " << accumulationSteps() << ", " << dataParallelSize << ", "
       << shardMode << ", " << (shardOfTable.empty() ? "nullptr" : "kShardOf")
       << ", " << hostPoolBytes << ", " << hostStateSize << ", "
       << hostWeightCount << ", "
       << (hostWeightCount ? "kHostWeights, kMasterOf" : "nullptr, nullptr")
       << ", " << (wholeWeightsTable.empty() ? "nullptr" : "kWholeWeights")
       << "};\n\n";
  EmittedProgram program;
  if (!splitProgram(program, banner, includes, programInfo)) {
    llvm::raw_string_ostream out(program.source);
    out << banner << includes << "namespace {\n\n" << tables << "\n";
    if (!kernels.empty())
      out << "#ifdef __CUDACC__\n" << kernels << "#endif\n\n";
    out << refFunction(/*inlined=*/false)
        << "void run(Context &ctx, uint8_t *arena, "
        << "const uint8_t *weights,\n"
        << "         void *const *inputs, void *const *outputs) {\n"
        << body << "}\n\n"
        << programInfo << "} // namespace\n\n"
        << "extern \"C\" const ProgramInfo *memopt_program(void) {\n"
        << "  return &kProgram;\n}\n";
  }
  weights.fingerprint = weightsFingerprint.finish(weightsSize + lowMasterBytes);
  program.weights = std::move(weights);
  return program;
}

FailureOr<EmittedProgram>
mlir::memopt::emitProgram(func::FuncOp function,
                          const EmitProgramOptions &options) {
  ProgramEmitter emitter(function, options);
  return emitter.run();
}

func::FuncOp mlir::memopt::getProgramFunction(ModuleOp module) {
  SmallVector<func::FuncOp> functions;
  for (auto function : module.getOps<func::FuncOp>())
    if (!function.isExternal())
      functions.push_back(function);
  if (functions.size() == 1)
    return functions.front();
  for (func::FuncOp function : functions)
    if (function.getName() == "main")
      return function;
  module.emitError("expected one function to lower (or one named @main), "
                   "found ")
      << functions.size();
  return nullptr;
}

LogicalResult mlir::memopt::assignNaiveOffsets(func::FuncOp function,
                                               int64_t alignment) {
  if (!function->hasAttr("memopt.arena_size"))
    return function.emitError("assignNaiveOffsets expects a planned function");
  // Reuse-free twin: outputs go back to the caller's buffers.
  function->removeAttr("memopt.output_offsets");
  function->removeAttr(kOutputsInArenaAttrName);
  BufferLiveness liveness(function);
  auto alignUp = [&](int64_t value) {
    return (value + alignment - 1) / alignment * alignment;
  };
  int64_t arenaSize = 0;
  llvm::DenseMap<unsigned, int64_t> storageOffset;
  for (const Storage &storage : liveness.getStorages()) {
    if (storage.kind != StorageKind::Arena || storage.values.empty())
      continue;
    storageOffset[storage.id] = arenaSize;
    arenaSize = alignUp(arenaSize + storage.size);
  }
  Builder builder(function.getContext());
  for (Operation &op : function.getBody().front().without_terminator()) {
    if (isWeightRegionOp(&op))
      continue;
    SmallVector<int64_t> offsets;
    for (Value result : op.getResults()) {
      const Storage &storage = liveness.getStorage(result);
      offsets.push_back(storage.kind == StorageKind::Arena
                            ? storageOffset.lookup(storage.id)
                            : -1);
    }
    op.setAttr("memopt.offsets", builder.getDenseI64ArrayAttr(offsets));
    if (auto size = op.getAttrOfType<IntegerAttr>("memopt.workspace_size")) {
      op.setAttr("memopt.workspace_offset",
                 builder.getI64IntegerAttr(arenaSize));
      arenaSize = alignUp(arenaSize + size.getInt());
    }
  }
  function->setAttr("memopt.arena_size", builder.getI64IntegerAttr(arenaSize));
  return success();
}
