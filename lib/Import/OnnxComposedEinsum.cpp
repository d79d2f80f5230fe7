//===- OnnxComposedEinsum.cpp - Einsum as transposes and matmuls ----------===//
//
// Handler of GraphImporter (GraphImporter.h) for ONNX Einsum: the equation
// is parsed (explicit `->` or the implicit output: the letters seen once,
// in alphabetical order; `...` stands for the leading dimensions, named by
// upper-case placeholders, so an equation mixing `...` with upper-case
// letters is not supported), letters
// only one operand has and the output lacks are summed first (reduce_sum),
// then operands are contracted left to right as one batched matmul each:
// [batch, kept of A, contracted] x [batch, contracted, kept of B], the
// shape of numpy's and opt_einsum's pairwise contraction (onnxruntime's
// Einsum kernel works the same way). A single operand is a reduce_sum and
// a transpose. A letter repeated within one operand (a diagonal) is
// refused with a message.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

#include <cctype>
#include <map>

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::onnx_import;

namespace {
/// An operand during the contraction: its value and one letter per axis.
struct Term {
  Value value;
  std::string letters;
};
} // namespace

FailureOr<SmallVector<Value>> GraphImporter::importEinsum(const Node &node) {
  std::string equation = stringAttr(node, "equation", "");
  equation.erase(llvm::remove_if(equation, ::isspace), equation.end());
  SmallVector<Term> terms;
  for (int i = 0; i < node.proto.input_size(); ++i) {
    auto value = lookup(node, i);
    if (failed(value) || !*value)
      return emitError(node.loc)
             << node.describe() << ": input " << i << " is missing";
    terms.push_back({*value, ""});
  }
  auto fail = [&](const Twine &why) {
    return emitError(node.loc)
           << node.describe() << ": equation '" << equation << "': " << why;
  };
  size_t arrow = equation.find("->");
  std::string lhs = equation.substr(0, arrow);
  SmallVector<StringRef> pieces;
  StringRef(lhs).split(pieces, ',');
  SmallVector<std::string> specs;
  for (StringRef spec : pieces)
    specs.push_back(spec.str());
  if (specs.size() != terms.size())
    return fail(Twine(specs.size()) + " operand specs for " +
                Twine(terms.size()) + " inputs");
  // `...` becomes upper-case letters, one per leading dimension (aligned to
  // the right, as broadcasting does).
  int64_t ellipsisRank = 0;
  for (auto [spec, term] : llvm::zip(specs, terms)) {
    size_t dots = spec.find("...");
    if (dots != std::string::npos)
      ellipsisRank = std::max<int64_t>(
          ellipsisRank,
          typeOf(term.value).getRank() - static_cast<int64_t>(spec.size() - 3));
  }
  auto expand = [&](std::string spec, int64_t rank) -> std::string {
    size_t dots = spec.find("...");
    if (dots == std::string::npos)
      return spec;
    int64_t count = rank - static_cast<int64_t>(spec.size() - 3);
    std::string filler;
    for (int64_t i = ellipsisRank - count; i < ellipsisRank; ++i)
      filler.push_back(static_cast<char>('A' + i));
    return spec.substr(0, dots) + filler + spec.substr(dots + 3);
  };
  std::map<char, int64_t> counts, sizes;
  for (auto [spec, term] : llvm::zip(specs, terms)) {
    RankedTensorType type = typeOf(term.value);
    term.letters = expand(spec, type.getRank());
    if (static_cast<int64_t>(term.letters.size()) != type.getRank())
      return fail("operand spec '" + spec + "' does not match " +
                  formatShape(type.getShape()));
    for (auto [i, letter] : llvm::enumerate(term.letters)) {
      if (!std::isalpha(static_cast<unsigned char>(letter)))
        return fail(Twine("'") + Twine(letter) + "' is not a letter");
      if (term.letters.find(letter) != i)
        return fail(Twine("letter '") + Twine(letter) +
                    "' repeats within an operand (a diagonal), which is "
                    "not supported");
      ++counts[letter];
      int64_t dim = type.getDimSize(i);
      int64_t &known = sizes[letter];
      if (known > 1 && dim > 1 && known != dim)
        return fail(Twine("letter '") + Twine(letter) + "' has sizes " +
                    Twine(known) + " and " + Twine(dim));
      known = std::max(known, dim);
    }
  }
  std::string ellipsis;
  for (int64_t i = 0; i < ellipsisRank; ++i)
    ellipsis.push_back(static_cast<char>('A' + i));
  std::string output;
  if (arrow != std::string::npos) {
    output = equation.substr(arrow + 2);
    size_t dots = output.find("...");
    if (dots != std::string::npos)
      output = output.substr(0, dots) + ellipsis + output.substr(dots + 3);
  } else {
    output = ellipsis;
    for (auto [letter, count] : counts)
      if (count == 1 && ellipsis.find(letter) == std::string::npos)
        output.push_back(letter);
  }
  for (char letter : output)
    if (!counts.count(letter))
      return fail(Twine("output letter '") + Twine(letter) +
                  "' is in no operand");

  // Broadcast size-1 axes to the letter's size, then sum the letters no
  // other operand and not the output has.
  auto needed = [&](char letter, size_t except) {
    if (output.find(letter) != std::string::npos)
      return true;
    for (size_t t = 0; t < terms.size(); ++t)
      if (t != except && terms[t].letters.find(letter) != std::string::npos)
        return true;
    return false;
  };
  for (auto [index, term] : llvm::enumerate(terms)) {
    RankedTensorType type = typeOf(term.value);
    SmallVector<int64_t> full;
    for (char letter : term.letters)
      full.push_back(sizes[letter]);
    if (type.getShape() != ArrayRef(full))
      term.value = build(node, "memopt.expand", {term.value}, {},
                         {RankedTensorType::get(full, type.getElementType())});
    SmallVector<int64_t> summed;
    std::string kept;
    for (auto [i, letter] : llvm::enumerate(term.letters)) {
      if (needed(letter, index))
        kept.push_back(letter);
      else
        summed.push_back(i);
    }
    if (!summed.empty()) {
      term.value = build(node, "memopt.reduce_sum", {term.value},
                         reduceAttrs(summed, 0));
      term.letters = kept;
    }
    if (!term.value)
      return failure();
  }

  auto transposeTo = [&](Term &term, StringRef order) {
    if (term.letters == order)
      return;
    SmallVector<int64_t> perm;
    for (char letter : order)
      perm.push_back(term.letters.find(letter));
    term.value = transposeBy(node, term.value, perm);
    term.letters = order.str();
  };
  auto product = [&](StringRef letters) {
    int64_t n = 1;
    for (char letter : letters)
      n *= sizes[letter];
    return n;
  };
  Term result = terms.front();
  for (size_t t = 1; t < terms.size(); ++t) {
    Term &other = terms[t];
    // Letters needed after this contraction: the output's and later terms'.
    auto later = [&](char letter) {
      if (output.find(letter) != std::string::npos)
        return true;
      for (size_t u = t + 1; u < terms.size(); ++u)
        if (terms[u].letters.find(letter) != std::string::npos)
          return true;
      return false;
    };
    std::string batch, left, right, contracted;
    for (char letter : result.letters) {
      bool shared = other.letters.find(letter) != std::string::npos;
      if (shared && later(letter))
        batch.push_back(letter);
      else if (shared)
        contracted.push_back(letter);
      else
        left.push_back(letter);
    }
    for (char letter : other.letters)
      if (result.letters.find(letter) == std::string::npos)
        right.push_back(letter);
    transposeTo(result, batch + left + contracted);
    transposeTo(other, batch + contracted + right);
    int64_t b = product(batch), m = product(left), k = product(contracted),
            n = product(right);
    auto lhsRows = reshapeTo(node, result.value, {b, m, k});
    auto rhsRows = reshapeTo(node, other.value, {b, k, n});
    if (failed(lhsRows) || failed(rhsRows))
      return failure();
    Value multiplied = build(node, "memopt.matmul", {*lhsRows, *rhsRows});
    if (!multiplied)
      return failure();
    std::string letters = batch + left + right;
    SmallVector<int64_t> shape;
    for (char letter : letters)
      shape.push_back(sizes[letter]);
    auto reshaped = reshapeTo(node, multiplied, shape);
    if (failed(reshaped))
      return failure();
    result = {*reshaped, letters};
  }
  // Every letter left is the output's (the others were summed or
  // contracted); put them in its order.
  transposeTo(result, output);
  if (!result.value)
    return failure();
  return SmallVector<Value>{result.value};
}
