//===- MemOptAttributes.td - memopt attributes -------------*- tablegen -*-===//
//
// Attributes of the memopt dialect: a weight converted lazily
// (include/memopt/Dialect/MemOpt/IR/MemOptAttributes.h says why).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTATTRIBUTES_TD
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTATTRIBUTES_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "memopt/Dialect/MemOpt/IR/MemOptDialect.td"

class MemOpt_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<MemOpt_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def MemOpt_ConvertedWeightAttr
    : MemOpt_Attr<"ConvertedWeight", "converted", [ElementsAttrInterface]> {
  let summary = "A weight converted when it is read, not when it is made";
  let description = [{
    The value `cast(transpose(source, permutation))` of a `dense_resource`
    weight: the element type of the attribute's type is the source's (a
    permutation alone) or f16 / bf16 from an f32 source (round to nearest
    even; values beyond the range clamped to the largest finite value,
    non-zero values that would round to zero raised to the smallest
    subnormal). Result axis k is source axis `permutation[k]`; no
    permutation is the identity. The converted bytes are never stored: the
    weight-file writer and the passes that read values produce them window
    by window from the source (`readElements`), so a model's weights stay
    in their mapped file and `--emit mlir` prints the source's handle.

    ```mlir
    memopt.constant #memopt.converted<dense_resource<w> : tensor<64x3x7x7xf32>,
                                      permutation = [0, 2, 3, 1]>
        : tensor<64x7x7x3xbf16>
    ```
  }];
  let parameters = (ins
    AttributeSelfTypeParameter<"", "::mlir::ShapedType">:$type,
    "::mlir::DenseResourceElementsAttr":$source,
    OptionalArrayRefParameter<"int64_t">:$permutation
  );
  let assemblyFormat =
      "`<` $source (`,` `permutation` `=` `[` $permutation^ `]`)? `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The conversion from the source's elements to this attribute's.
    WeightConversion getConversion() const;
    /// The source's stored bytes; empty when its blob is gone (a module
    /// printed with its weights elided).
    ArrayRef<char> getSourceData() const;
    /// Writes elements [first, first + count) as the runtime stores them
    /// into `out` (at least count x the element size); fails when the
    /// source's bytes cannot be read.
    LogicalResult readElements(int64_t first, int64_t count,
                               MutableArrayRef<char> out,
                               ConversionCounts &counts) const;
  }];
}

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTATTRIBUTES_TD
