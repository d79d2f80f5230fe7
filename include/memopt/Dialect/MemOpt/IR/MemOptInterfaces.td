//===- MemOptInterfaces.td - what memory passes ask of ops -*- tablegen -*-===//
//
// Passes never switch on operation names: they ask these interfaces.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTINTERFACES_TD
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTINTERFACES_TD

include "mlir/IR/OpBase.td"

def MemOpt_BufferBehaviorOpInterface
    : OpInterface<"BufferBehaviorOpInterface"> {
  let cppNamespace = "::mlir::memopt";
  let description = [{
    How an operation's result may share storage with its operands. Used by
    bufferization (in-place reuse and aliasing views) and by liveness.
  }];
  let methods = [
    InterfaceMethod<
      "True if result 0 is a view of operand 0: same bytes, new shape. Such "
      "an op costs no memory and no time.",
      "bool", "isAliasingView", (ins), [{}], [{ return false; }]>,
    InterfaceMethod<
      "True if every result element depends only on the operand elements at "
      "the same (broadcast) index.",
      "bool", "isElementwise", (ins), [{}], [{ return false; }]>,
    InterfaceMethod<
      "True if result 0 may be written into the storage of operand "
      "`operandIndex` when that operand dies at this op and has the same "
      "byte size and layout.",
      "bool", "canWriteInPlace", (ins "unsigned":$operandIndex), [{}],
      [{ return false; }]>,
  ];
}

def MemOpt_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::memopt";
  let description = [{
    A first-order cost model: floating-point operations and the fewest bytes
    the op must move through device memory. Rematerialization and
    scheduling use it to rank candidates.
  }];
  let methods = [
    InterfaceMethod<"Floating-point operations (multiply-add counts as 2).",
      "int64_t", "getFlops", (ins), [{}], [{
        return ::mlir::memopt::detail::defaultFlops($_op);
      }]>,
    InterfaceMethod<"Bytes read plus bytes written, each tensor once.",
      "int64_t", "getBytesMoved", (ins), [{}], [{
        return ::mlir::memopt::detail::defaultBytesMoved($_op);
      }]>,
    InterfaceMethod<
      "Scratch bytes the op's kernel may use while it runs (e.g. a cuDNN "
      "convolution's workspace). The planner gives it arena space live at "
      "this op only; the runtime picks the fastest algorithm that fits.",
      "int64_t", "getWorkspaceBytes", (ins), [{}], [{ return 0; }]>,
    InterfaceMethod<
      "True if the kernel also runs without any workspace (a slower path): "
      "the planner then promises none and only grows it into bytes that are "
      "free anyway, so the op never raises the arena for its scratch.",
      "bool", "isWorkspaceOptional", (ins), [{}], [{ return false; }]>,
    InterfaceMethod<
      "The workspace bytes the planner must promise (the kernel's least "
      "usable scratch), or -1 for the planner's rule (none for an optional "
      "workspace, else up to kWorkspaceFloorBytes); the rest up to "
      "getWorkspaceBytes grows into bytes free anyway.",
      "int64_t", "getWorkspaceFloor", (ins), [{}], [{ return -1; }]>,
  ];
}

def MemOpt_PrecisionOpInterface : OpInterface<"PrecisionOpInterface"> {
  let cppNamespace = "::mlir::memopt";
  let description = [{
    In which float type an op may run when the model is compiled for f16 or
    bf16 (memopt-mixed-precision). Ops without this interface follow
    `PrecisionPolicy::Promote`: they run in the widest float type of their
    operands, as PyTorch's ops outside autocast's lists do. The policies and
    the reasons for each op are listed in docs/mixed-precision.md.
  }];
  let methods = [
    InterfaceMethod<
      "The precision policy of this op (see PrecisionPolicy).",
      "::mlir::memopt::PrecisionPolicy", "getPrecisionPolicy", (ins)>,
    InterfaceMethod<
      "True if, with f16 / bf16 operands, the op may store its f32 "
      "accumulator as an f32 result (the verifier accepts it and the runtime "
      "kernel writes it). Mixed precision then gives a result that leaves "
      "the function its f32 type directly, instead of a low result in the "
      "arena plus a cast into the output.",
      "bool", "acceptsF32Result", (ins), [{}], [{ return false; }]>,
    InterfaceMethod<
      "True if operand `index` may stay f32 when the op runs in f16 / bf16 "
      "(the kernel reads it in f32: the scale and bias of a normalization). "
      "A training compilation keeps a parameter (a memopt.variable) there in "
      "f32 instead of casting it, so its gradient is f32 too.",
      "bool", "acceptsF32Operand", (ins "unsigned":$index), [{}],
      [{ return false; }]>,
    InterfaceMethod<
      "True if result `index` is f32 whatever type the op runs in (the "
      "saved statistics of a training-mode normalization).",
      "bool", "hasF32Result", (ins "unsigned":$index), [{}],
      [{ return false; }]>,
    InterfaceMethod<
      "False if the op's gradient has no f16 / bf16 form: a training "
      "compilation then runs the op in f32 and says so.",
      "bool", "hasLowPrecisionGradient", (ins), [{}], [{ return true; }]>,
  ];
}


def MemOpt_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::mlir::memopt";
  let description = [{
    Reverse-mode differentiation (memopt-autodiff): an op builds its own
    vector-Jacobian product out of memopt ops. The rules are attached as
    external models (lib/Dialect/MemOpt/IR/Gradients.cpp) so that one file
    holds them side by side, like PyTorch's derivatives.yaml; the pass only
    asks this interface. A rule chooses what it reads from the forward pass:
    whatever it reads stays alive until the backward op that reads it, and
    that is all that is "saved for backward".
  }];
  let methods = [
    InterfaceMethod<
      "Called by memopt-autodiff, before the backward sweep, on every op "
      "that will be differentiated: an op whose rule needs more of the "
      "forward than its results (JAX's custom_vjp `fwd` returning "
      "residuals) replaces itself by a form that also returns them, its "
      "leading results replacing the op's results, and returns that op "
      "(attention: the row log-sum-exp). The default keeps the op.",
      "::mlir::Operation *", "prepareForGradient",
      (ins "::mlir::OpBuilder &":$builder), [{}],
      [{ return $_op.getOperation(); }]>,
    InterfaceMethod<
      "Builds the gradients of the operands at the builder's insertion "
      "point, given the gradients of the results (`resultGradients[i]` is "
      "null when nothing flows back into result i: treat it as zero; at "
      "least one is set). Fills `operandGradients` (one entry per operand, "
      "null where the operand gets no gradient: integer operands, running "
      "statistics, shapes). Fails with an error on the op when the "
      "gradient is not defined for the op's attributes.",
      "::mlir::LogicalResult", "buildGradient",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ArrayRef<::mlir::Value>":$resultGradients,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGradients)>,
  ];
}

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTINTERFACES_TD
