//===- WeightConversionTest.cpp - weights converted as they are written ---===//
//
// The element casts against LLVM's APFloat (round to nearest even) with the
// converter's clamping and raising rules, over a sweep of f32 bit patterns
// and the special values (NaN, infinities, the f16 / bf16 range's edges,
// subnormals); the permutation window by window against a plain index walk;
// `#memopt.converted` read through `readWeightElements`; and the weight file
// `writeWeightImage` writes from converted weights byte for byte against the
// file written from eagerly converted copies (what the compiler did before).
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/WeightConversion.h"
#include "memopt/Conversion/WeightImage.h"
#include "memopt/Dialect/MemOpt/IR/MemOptAttributes.h"
#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/WeightBlobs.h"
#include "memopt/Runtime/WeightsFile.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace mlir;
using namespace mlir::memopt;

namespace {

uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}

/// The expected 16-bit pattern: APFloat's round to nearest even, then the
/// converter's rules (finite overflow clamped, non-zero underflow raised,
/// NaN made quiet), with what they count.
uint16_t reference(uint32_t bits, const llvm::fltSemantics &semantics,
                   ConversionCounts &counts) {
  float value;
  std::memcpy(&value, &bits, 4);
  uint16_t sign = uint16_t((bits >> 16) & 0x8000);
  bool half = &semantics == &llvm::APFloat::IEEEhalf();
  if (std::isnan(value))
    return half ? sign | 0x7e00 : uint16_t((bits >> 16) | 0x40);
  llvm::APFloat converted(value);
  bool losesInfo = false;
  converted.convert(semantics, llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  uint16_t result = uint16_t(converted.bitcastToAPInt().getZExtValue());
  if (converted.isInfinity() && !std::isinf(value)) {
    ++counts.clamped;
    return sign | (half ? 0x7bff : 0x7f7f);
  }
  if (converted.isZero() && value != 0.0f) {
    ++counts.raised;
    return sign | 1;
  }
  return result;
}

void checkCast(const llvm::fltSemantics &semantics,
               uint16_t (*convert)(uint32_t, ConversionCounts &)) {
  std::vector<uint32_t> patterns = {0x00000000,
                                    0x80000000,
                                    0x7f800000,
                                    0xff800000,
                                    0x7fc00000,
                                    0xffc00001,
                                    0x7f800001,
                                    0x00000001,
                                    0x80000001,
                                    0x007fffff,
                                    0x00800000,
                                    bitsOf(1.0f),
                                    bitsOf(-1.5f),
                                    bitsOf(65504.0f),
                                    bitsOf(65519.99f),
                                    bitsOf(65520.0f),
                                    bitsOf(-70000.0f),
                                    bitsOf(std::ldexp(1.0f, -24)),
                                    bitsOf(std::ldexp(1.0f, -25)),
                                    bitsOf(std::ldexp(1.5f, -25)),
                                    bitsOf(std::ldexp(1.0f, -26)),
                                    bitsOf(std::ldexp(1.0f, -14)),
                                    bitsOf(3.3895314e38f),
                                    bitsOf(3.4028235e38f),
                                    bitsOf(1.0e-40f)};
  // A sweep over every exponent and many mantissas, ties included
  // (a stride coprime with 2^32 visits both rounding directions).
  for (uint64_t bits = 0; bits < (uint64_t(1) << 32); bits += 1000003)
    patterns.push_back(uint32_t(bits));
  for (uint32_t high = 0; high < 0x10000; high += 7)
    for (uint32_t low : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0x1000u, 0x0fffu})
      patterns.push_back((high << 16) | low);
  ConversionCounts got, expected;
  for (uint32_t bits : patterns) {
    uint16_t want = reference(bits, semantics, expected);
    uint16_t have = convert(bits, got);
    ASSERT_EQ(have, want) << "f32 bits 0x" << std::hex << bits;
  }
  EXPECT_EQ(got.clamped, expected.clamped);
  EXPECT_EQ(got.raised, expected.raised);
  EXPECT_GT(got.clamped, 0);
  EXPECT_GT(got.raised, 0);
}

TEST(WeightConversion, HalfRoundsToNearestEvenAndClamps) {
  checkCast(llvm::APFloat::IEEEhalf(), convertF32ToHalfBits);
  ConversionCounts counts;
  EXPECT_EQ(convertF32ToHalfBits(bitsOf(65520.0f), counts), 0x7bff);
  EXPECT_EQ(convertF32ToHalfBits(bitsOf(-INFINITY), counts), 0xfc00);
  EXPECT_EQ(convertF32ToHalfBits(bitsOf(std::ldexp(1.0f, -24)), counts), 1);
  EXPECT_EQ(convertF32ToHalfBits(bitsOf(-std::ldexp(1.0f, -30)), counts),
            0x8001);
  EXPECT_EQ(counts.clamped, 1);
  EXPECT_EQ(counts.raised, 1);
}

TEST(WeightConversion, BFloat16RoundsToNearestEvenAndClamps) {
  checkCast(llvm::APFloat::BFloat(), convertF32ToBFloat16Bits);
  ConversionCounts counts;
  EXPECT_EQ(convertF32ToBFloat16Bits(0x3f808000, counts), 0x3f80); // tie
  EXPECT_EQ(convertF32ToBFloat16Bits(0x3f818000, counts), 0x3f82); // tie
  EXPECT_EQ(convertF32ToBFloat16Bits(0x7fc00000, counts), 0x7fc0);
  EXPECT_EQ(convertF32ToBFloat16Bits(0x00000001, counts), 0x0001);
  EXPECT_EQ(counts.raised, 1);
}

/// Row-major strides of `shape`.
std::vector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t axis = int64_t(shape.size()) - 2; axis >= 0; --axis)
    strides[axis] = strides[axis + 1] * shape[axis + 1];
  return strides;
}

/// transpose(source, perm) by the definition: result[i] = source[j] where
/// result index i's axis k is source axis perm[k].
std::vector<float> transposeReference(const std::vector<float> &source,
                                      ArrayRef<int64_t> shape,
                                      ArrayRef<int64_t> perm) {
  std::vector<int64_t> resultShape;
  for (int64_t axis : perm)
    resultShape.push_back(shape[axis]);
  std::vector<int64_t> sourceStrides = stridesOf(shape);
  std::vector<int64_t> resultStrides = stridesOf(resultShape);
  std::vector<float> result(source.size());
  for (int64_t i = 0; i < int64_t(source.size()); ++i) {
    int64_t j = 0;
    for (size_t k = 0; k < perm.size(); ++k)
      j += (i / resultStrides[k]) % resultShape[k] * sourceStrides[perm[k]];
    result[i] = source[j];
  }
  return result;
}

std::vector<float> randomValues(int64_t count, unsigned seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> values(count);
  for (float &value : values)
    value = normal(generator);
  return values;
}

ArrayRef<char> bytesOf(const std::vector<float> &values) {
  return ArrayRef<char>(reinterpret_cast<const char *>(values.data()),
                        values.size() * sizeof(float));
}

TEST(WeightConversion, PermutationWindowByWindow) {
  std::vector<int64_t> shape = {5, 3, 4, 6};
  std::vector<int64_t> perm = {0, 2, 3, 1}; // NCHW -> NHWC
  std::vector<float> source = randomValues(5 * 3 * 4 * 6, 1);
  std::vector<float> expected = transposeReference(source, shape, perm);
  WeightConversion conversion(shape, perm, 4, ElementCast::None);
  ASSERT_TRUE(conversion.isPermuted());
  for (int64_t window : {1, 7, 13, 72, 360}) {
    std::vector<float> got(source.size(), -1.0f);
    ConversionCounts counts;
    for (int64_t first = 0; first < int64_t(source.size()); first += window) {
      int64_t count = std::min<int64_t>(window, source.size() - first);
      conversion.convert(bytesOf(source), first, count,
                         reinterpret_cast<char *>(got.data() + first), counts);
    }
    EXPECT_EQ(got, expected) << "window " << window;
  }
  // The identity is no permutation; a cast window reads its own elements.
  WeightConversion identity(shape, {0, 1, 2, 3}, 4, ElementCast::F32ToBF16);
  EXPECT_FALSE(identity.isPermuted());
  EXPECT_EQ(identity.getSourceBytesRead(bytesOf(source), 10, 5).data(),
            bytesOf(source).data() + 40);
  EXPECT_EQ(conversion.getSourceBytesRead(bytesOf(source), 10, 5).size(),
            source.size() * 4);
}

TEST(WeightConversion, CastAndPermutationCompose) {
  std::vector<int64_t> shape = {4, 3, 2, 5};
  std::vector<int64_t> perm = {0, 2, 3, 1};
  std::vector<float> source = randomValues(4 * 3 * 2 * 5, 2);
  source[7] = 1.0e6f;  // clamped in f16
  source[9] = 1.0e-9f; // raised in f16
  std::vector<float> permuted = transposeReference(source, shape, perm);
  WeightConversion conversion(shape, perm, 4, ElementCast::F32ToF16);
  std::vector<uint16_t> got(source.size());
  ConversionCounts counts, expectedCounts;
  conversion.convert(bytesOf(source), 0, int64_t(source.size()),
                     reinterpret_cast<char *>(got.data()), counts);
  for (size_t i = 0; i < permuted.size(); ++i)
    EXPECT_EQ(got[i], convertF32ToHalfBits(bitsOf(permuted[i]), expectedCounts))
        << i;
  EXPECT_EQ(counts.clamped, 1);
  EXPECT_EQ(counts.raised, 1);
}

/// A context with the dialect and a module of constants to hang entries on.
struct ConvertedWeightTest : ::testing::Test {
  ConvertedWeightTest() {
    context.loadDialect<MemOptDialect>();
    module = ModuleOp::create(UnknownLoc::get(&context));
  }
  ~ConvertedWeightTest() override { module->erase(); }

  DenseResourceElementsAttr resource(StringRef key, ArrayRef<int64_t> shape,
                                     const std::vector<float> &values) {
    auto type = RankedTensorType::get(shape, Float32Type::get(&context));
    return DenseResourceElementsAttr::get(
        type, key,
        HeapAsmResourceBlob::allocateAndCopyWithAlign(bytesOf(values), 8));
  }
  DenseResourceElementsAttr resource(StringRef key, RankedTensorType type,
                                     ArrayRef<char> bytes) {
    return DenseResourceElementsAttr::get(
        type, key, HeapAsmResourceBlob::allocateAndCopyWithAlign(bytes, 8));
  }
  Operation *constant(ElementsAttr value) {
    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    return ConstantOp::create(builder, UnknownLoc::get(&context), value);
  }
  std::string readFile(StringRef path) {
    auto buffer = llvm::MemoryBuffer::getFile(path);
    EXPECT_TRUE(bool(buffer));
    return buffer ? (*buffer)->getBuffer().str() : std::string();
  }

  MLIRContext context;
  ModuleOp module;
};

TEST_F(ConvertedWeightTest, ConvertedWeightReadsThroughTheAccessor) {
  std::vector<int64_t> shape = {6, 3, 2, 2};
  std::vector<float> values = randomValues(72, 3);
  DenseResourceElementsAttr source = resource("w", shape, values);
  auto bf16 = RankedTensorType::get({6, 2, 2, 3}, BFloat16Type::get(&context));
  auto converted =
      ConvertedWeightAttr::get(&context, bf16, source, {0, 2, 3, 1});
  EXPECT_TRUE(getWeightData(converted).empty());
  EXPECT_EQ(getWeightSourceData(converted).data(),
            getWeightData(source).data());
  std::vector<float> permuted =
      transposeReference(values, shape, ArrayRef<int64_t>{0, 2, 3, 1});
  std::vector<uint16_t> got(72);
  ConversionCounts counts;
  for (int64_t first = 0; first < 72; first += 10) {
    int64_t count = std::min<int64_t>(10, 72 - first);
    ASSERT_TRUE(succeeded(readWeightElements(
        converted, first, count,
        MutableArrayRef<char>(reinterpret_cast<char *>(got.data() + first),
                              size_t(count) * 2),
        counts)));
  }
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i], convertF32ToBFloat16Bits(bitsOf(permuted[i]), counts));
  // Outside the tensor, or a buffer too small: failure, nothing read.
  std::vector<char> small(4);
  EXPECT_TRUE(failed(readWeightElements(converted, 70, 3, small, counts)));
  EXPECT_TRUE(failed(readWeightElements(converted, 0, 3, small, counts)));
  // The plain resource and a splat read through the same accessor.
  std::vector<float> window(4);
  MutableArrayRef<char> windowBytes(reinterpret_cast<char *>(window.data()),
                                    16);
  ASSERT_TRUE(succeeded(readWeightElements(source, 5, 4, windowBytes, counts)));
  EXPECT_EQ(window, std::vector<float>(values.begin() + 5, values.begin() + 9));
  auto splat = DenseElementsAttr::get(
      RankedTensorType::get({8}, Float32Type::get(&context)), 2.5f);
  ASSERT_TRUE(succeeded(readWeightElements(splat, 3, 4, windowBytes, counts)));
  EXPECT_EQ(window, std::vector<float>(4, 2.5f));
}

TEST_F(ConvertedWeightTest, VerifierNamesTheMismatch) {
  DenseResourceElementsAttr source =
      resource("v", {2, 3}, std::vector<float>(6, 1.0f));
  auto emit = [&] { return mlir::emitError(UnknownLoc::get(&context)); };
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
    message = diagnostic.str();
    return success();
  });
  auto f16 = Float16Type::get(&context);
  EXPECT_FALSE(ConvertedWeightAttr::getChecked(
      emit, &context, RankedTensorType::get({2, 3}, f16), source, {1, 0}));
  EXPECT_NE(message.find("permuted has shape [3, 2]"), std::string::npos)
      << message;
  EXPECT_FALSE(ConvertedWeightAttr::getChecked(
      emit, &context, RankedTensorType::get({2, 3}, f16), source, {0, 0}));
  EXPECT_NE(message.find("not one of the 2 source axes"), std::string::npos)
      << message;
  EXPECT_FALSE(ConvertedWeightAttr::getChecked(
      emit, &context,
      RankedTensorType::get({2, 3}, IntegerType::get(&context, 32)), source,
      {}));
  EXPECT_NE(message.find("only f32 to f16 or bf16"), std::string::npos)
      << message;
}

/// The weight file of converted weights is the file of their eagerly
/// converted copies (a heap blob each, as mixed precision and the layout
/// pass made before), byte for byte, also where a weight spans several of
/// the writer's 16 MiB windows.
TEST_F(ConvertedWeightTest, WeightFileEqualsTheEagerlyConvertedOne) {
  auto f32 = Float32Type::get(&context);
  auto bf16 = BFloat16Type::get(&context);
  auto f16 = Float16Type::get(&context);
  // 9 Mi elements: 18 MiB in bf16, two windows and a part.
  int64_t large = int64_t(9) << 20;
  std::vector<float> big = randomValues(large, 4);
  big[123] = 1.0e30f;
  big[456] = std::nanf("");
  std::vector<int64_t> filterShape = {8, 3, 5, 5};
  std::vector<float> filter = randomValues(8 * 3 * 5 * 5, 5);
  filter[11] = 1.0e-30f;
  std::vector<int64_t> nhwc = {0, 2, 3, 1};

  DenseResourceElementsAttr bigSource = resource("big", {large}, big);
  DenseResourceElementsAttr filterSource =
      resource("filter", filterShape, filter);
  auto bigType = RankedTensorType::get({large}, bf16);
  auto filterType = RankedTensorType::get({8, 5, 5, 3}, f16);
  auto filterF32Type = RankedTensorType::get({8, 5, 5, 3}, f32);
  ElementsAttr lazy[] = {
      ConvertedWeightAttr::get(&context, bigType, bigSource, {}),
      ConvertedWeightAttr::get(&context, filterType, filterSource, nhwc),
      ConvertedWeightAttr::get(&context, filterF32Type, filterSource, nhwc)};

  // The eager copies, converted whole.
  ConversionCounts counts;
  std::vector<uint16_t> bigBits(large);
  for (int64_t i = 0; i < large; ++i)
    bigBits[i] = convertF32ToBFloat16Bits(bitsOf(big[i]), counts);
  std::vector<float> filterNhwc = transposeReference(filter, filterShape, nhwc);
  std::vector<uint16_t> filterBits(filterNhwc.size());
  for (size_t i = 0; i < filterNhwc.size(); ++i)
    filterBits[i] = convertF32ToHalfBits(bitsOf(filterNhwc[i]), counts);
  auto asBytes = [](const auto &vector) {
    return ArrayRef<char>(reinterpret_cast<const char *>(vector.data()),
                          vector.size() * sizeof(vector[0]));
  };
  ElementsAttr eager[] = {
      resource("big_bf16", bigType, asBytes(bigBits)),
      resource("filter_f16", filterType, asBytes(filterBits)),
      resource("filter_nhwc", filterF32Type, asBytes(filterNhwc))};

  SmallString<128> folder;
  ASSERT_FALSE(
      llvm::sys::fs::createUniqueDirectory("weight-conversion", folder));
  std::string files[2];
  for (int variant = 0; variant < 2; ++variant) {
    WeightImage image;
    int64_t offset = 64;
    for (ElementsAttr value : variant ? ArrayRef<ElementsAttr>(lazy)
                                      : ArrayRef<ElementsAttr>(eager)) {
      auto type = cast<RankedTensorType>(value.getType());
      image.entries.push_back({offset, type, value, constant(value)});
      offset += (type.getNumElements() *
                     getRuntimeElementBytes(type.getElementType()) +
                 255) /
                256 * 256;
    }
    image.size = offset;
    image.fingerprint = 42;
    std::string path = (folder + "/" + std::to_string(variant)).str();
    ASSERT_TRUE(succeeded(writeWeightImage(image, path)));
    files[variant] = readFile(path);
    // The small tables the program embeds read the same bytes.
    FailureOr<std::vector<char>> embedded = getConstantBytes(
        image.entries[1].value, cast<RankedTensorType>(image.entries[1].type));
    ASSERT_TRUE(succeeded(embedded));
    EXPECT_EQ(std::string(embedded->begin(), embedded->end()),
              files[variant].substr(image.entries[1].offset, embedded->size()));
  }
  ASSERT_EQ(files[0].size(), files[1].size());
  EXPECT_TRUE(files[0] == files[1]);
  EXPECT_EQ(files[1].substr(64, 2 * size_t(large)),
            std::string(asBytes(bigBits).begin(), asBytes(bigBits).end()));
  llvm::sys::fs::remove_directories(folder);
}

/// ZeRO-3: rank r's shard of a converted weight (its chunk, then the tail)
/// is the same shard of the eagerly converted one.
TEST_F(ConvertedWeightTest, ShardOfAConvertedWeight) {
  auto bf16 = BFloat16Type::get(&context);
  std::vector<float> values = randomValues(1000, 6);
  auto wholeType = RankedTensorType::get({1000}, bf16);
  std::vector<uint16_t> bits(1000);
  ConversionCounts counts;
  for (size_t i = 0; i < bits.size(); ++i)
    bits[i] = convertF32ToBFloat16Bits(bitsOf(values[i]), counts);
  ElementsAttr lazy = ConvertedWeightAttr::get(
      &context, wholeType, resource("whole", {1000}, values), {});
  ElementsAttr eager = resource(
      "whole_bf16", wholeType,
      ArrayRef<char>(reinterpret_cast<const char *>(bits.data()), 2000));
  auto shardType = RankedTensorType::get({333 + 1}, bf16);
  SmallString<128> folder;
  ASSERT_FALSE(
      llvm::sys::fs::createUniqueDirectory("weight-conversion", folder));
  std::string files[2];
  for (int variant = 0; variant < 2; ++variant) {
    ElementsAttr value = variant ? lazy : eager;
    WeightImage image;
    image.size = 1024;
    image.entries.push_back({0, shardType, value, constant(value), 3, 1});
    std::string path = (folder + "/" + std::to_string(variant)).str();
    ASSERT_TRUE(succeeded(writeWeightImage(image, path)));
    files[variant] = readFile(path);
  }
  EXPECT_TRUE(files[0] == files[1]);
  std::string expected(reinterpret_cast<const char *>(bits.data() + 333), 666);
  expected.append(reinterpret_cast<const char *>(bits.data() + 999), 2);
  EXPECT_EQ(files[1].substr(0, 668), expected);
  llvm::sys::fs::remove_directories(folder);
}

TEST_F(ConvertedWeightTest, ElidedSourceIsAnError) {
  auto type = RankedTensorType::get({2048}, Float32Type::get(&context));
  auto &blobs = DenseResourceElementsHandle::getManagerInterface(&context);
  auto elided = DenseResourceElementsAttr::get(type, blobs.insert("w_elided"));
  auto converted = ConvertedWeightAttr::get(
      &context, RankedTensorType::get({2048}, BFloat16Type::get(&context)),
      elided, {});
  WeightImage image;
  image.size = 4096;
  image.entries.push_back({0, cast<RankedTensorType>(converted.getType()),
                           converted, constant(converted)});
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
    message = diagnostic.str();
    return success();
  });
  SmallString<128> folder;
  ASSERT_FALSE(
      llvm::sys::fs::createUniqueDirectory("weight-conversion", folder));
  std::string path = (folder + "/w").str();
  EXPECT_TRUE(failed(writeWeightImage(image, path)));
  EXPECT_NE(message.find("cannot be read"), std::string::npos) << message;
  EXPECT_FALSE(llvm::sys::fs::exists(path));
  llvm::sys::fs::remove_directories(folder);
}

} // namespace
