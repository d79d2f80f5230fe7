//===- OffloadOps.td - activation offload ops ---------------*- tablegen -*-===//
//
// The copy-stream ops of activation offload (docs/offload.md,
// "Activations"): a saved activation goes to the pinned host pool after its
// last forward read and comes back before its first backward read. Kept
// apart from MemOptOps.td (their own generated header, registered by
// MemOptDialect::initialize) so that the many files that include the op
// header do not depend on them.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_OFFLOADOPS_TD
#define MEMOPT_DIALECT_MEMOPT_IR_OFFLOADOPS_TD

include "memopt/Dialect/MemOpt/IR/MemOptDialect.td"
include "memopt/Dialect/MemOpt/IR/MemOptInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// The copy streams: their ops keep their order relative to each other, and
// none is dropped or merged (each slot has events of its own).
def MemOpt_CopyStreamResource : Resource<"::mlir::memopt::CopyStreamResource">;

class MemOpt_CopyStreamOp<string mnemonic, list<Trait> traits = []>
    : Op<MemOpt_Dialect, mnemonic, !listconcat(traits, [
         MemoryEffects<[MemRead<MemOpt_CopyStreamResource>,
                        MemWrite<MemOpt_CopyStreamResource>]>])>;

def MemOpt_OffloadOp : MemOpt_CopyStreamOp<"offload"> {
  let summary = "Starts copying a saved activation to pinned host memory";
  let description = [{
    Issues the device-to-host copy of `input` into the program's pinned host
    pool at `host_offset` (planned like the arena; -1 before planning) on
    the D2H copy stream, after everything the compute stream did so far (the
    producer included), and records the event of `slot`. The input's arena
    bytes stay in use until the `offload_wait` of the same slot.
    torchtune's activation offloading, Capuchin / SwapAdvisor's swap-out.
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, I64Attr:$slot,
                       DefaultValuedAttr<I64Attr, "-1">:$host_offset);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def MemOpt_OffloadWaitOp : MemOpt_CopyStreamOp<"offload_wait"> {
  let summary = "The compute stream waits for an offload to complete";
  let description = [{
    Where the offload solver predicts the copy of `slot` done: the compute
    stream waits on its event; the input's live range ends here, so the
    planner may give its arena bytes to another buffer after it.
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, I64Attr:$slot);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def MemOpt_ReloadOp : MemOpt_CopyStreamOp<"reload"> {
  let summary = "Starts copying an offloaded activation back to the device";
  let description = [{
    Issues, on the H2D copy stream and after everything the compute stream
    did so far, the copy of the bytes the `offload` of the same `slot` wrote
    at `host_offset` into the result's fresh arena buffer (its live range
    starts here). It reads no device value: the copy streams' order (the
    ops' side effects) keeps it after the offload of its slot. The result
    is read only through `reload_wait`.
  }];
  let arguments = (ins I64Attr:$slot,
                       DefaultValuedAttr<I64Attr, "-1">:$host_offset);
  let results = (outs AnyStaticShapeTensor:$output);
  let assemblyFormat = "attr-dict `:` type($output)";
  let hasVerifier = 1;
}

def MemOpt_ReloadWaitOp : MemOpt_CopyStreamOp<"reload_wait", [
    AllTypesMatch<["input", "output"]>,
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["isAliasingView"]>]> {
  let summary = "The compute stream waits for a reload: the reloaded value";
  let description = [{
    A view of the reload's result (no bytes of its own) before which the
    compute stream waits on the reload's event: the backward readers of an
    offloaded activation read this value.
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, I64Attr:$slot);
  let results = (outs AnyStaticShapeTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($output)";
  let hasVerifier = 1;
}

#endif // MEMOPT_DIALECT_MEMOPT_IR_OFFLOADOPS_TD
