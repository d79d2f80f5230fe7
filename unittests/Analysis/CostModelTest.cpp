//===- CostModelTest.cpp - The roofline cost model ------------------------===//
//
// Op times on the H100 roofline (CostModel.h): a memory-bound op pays its
// bytes, a compute-bound one its FLOPs at the f32, TF32 or f16 peak, views are
// free, and measured kernel times replace the estimate by ONNX node name.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/CostModel.h"
#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::memopt;

namespace {

constexpr const char *kFunction = R"mlir(
func.func @f(%x: tensor<1024x1024xf32>, %h: tensor<1024x1024xf16>) -> (tensor<1024x1024xf32>, tensor<1024x1024xf32>, tensor<1048576xf32>, tensor<1024x1024xf16>) {
  %r = memopt.relu %x : tensor<1024x1024xf32> loc("relu_node")
  %m = memopt.matmul %x, %x : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32> loc("matmul_node")
  %v = memopt.reshape %x : (tensor<1024x1024xf32>) -> tensor<1048576xf32>
  %l = memopt.matmul %h, %h : (tensor<1024x1024xf16>, tensor<1024x1024xf16>) -> tensor<1024x1024xf16>
  return %r, %m, %v, %l : tensor<1024x1024xf32>, tensor<1024x1024xf32>, tensor<1048576xf32>, tensor<1024x1024xf16>
}
)mlir";

class CostModelTest : public ::testing::Test {
protected:
  void SetUp() override {
    context.loadDialect<func::FuncDialect, MemOptDialect>();
    module = parseSourceString<ModuleOp>(kFunction, &context);
    ASSERT_TRUE(module);
    for (Operation &op : (*module->getOps<func::FuncOp>().begin())
                             .getBody()
                             .front()
                             .without_terminator())
      ops.push_back(&op);
    ASSERT_EQ(ops.size(), 4u);
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::vector<Operation *> ops;
  Roofline h100 = Roofline::h100();
};

TEST_F(CostModelTest, MemoryBoundOpPaysItsBytes) {
  // relu: 4 MiB read + 4 MiB written at 3.35 TB/s, plus the kernel.
  double expected = 2.0 * 4 * 1048576 / 3.35e12 + 2e-6;
  EXPECT_NEAR(estimateOpSeconds(ops[0], h100), expected, 1e-12);
}

TEST_F(CostModelTest, ComputeBoundOpPaysItsFlopsAtThePeakOfItsType) {
  // 2 * 1024^3 FLOPs: f32 on the CUDA cores, f16 on the tensor cores (there
  // the 6 MiB it moves cost more than its FLOPs).
  double flops = 2.0 * 1024 * 1024 * 1024;
  EXPECT_EQ(getOpFlops(ops[1]), int64_t(flops));
  EXPECT_NEAR(estimateOpSeconds(ops[1], h100), flops / 67e12 + 2e-6, 1e-12);
  double f16 = std::max(flops / 989e12, 3.0 * 2 * 1048576 / 3.35e12) + 2e-6;
  EXPECT_NEAR(estimateOpSeconds(ops[3], h100), f16, 1e-12);
}

TEST_F(CostModelTest, Tf32FunctionsPriceF32ContractionsAtTheTf32Peak) {
  // --precision tf32 keeps every tensor f32 and marks the function; its f32
  // matmul runs on TF32 tensor cores, the relu is unchanged.
  double flops = 2.0 * 1024 * 1024 * 1024;
  double relu = estimateOpSeconds(ops[0], h100);
  (*module->getOps<func::FuncOp>().begin())
      ->setAttr("memopt.precision", StringAttr::get(&context, "tf32"));
  EXPECT_NEAR(estimateOpSeconds(ops[1], h100), flops / 494.7e12 + 2e-6, 1e-12);
  EXPECT_NEAR(estimateOpSeconds(ops[0], h100), relu, 1e-15);
}

TEST_F(CostModelTest, ViewsAreFree) {
  EXPECT_EQ(estimateOpSeconds(ops[2], h100), 0.0);
}

TEST_F(CostModelTest, MeasuredTimesReplaceTheEstimateByNodeName) {
  SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("times", "json", path));
  {
    std::error_code error;
    llvm::raw_fd_ostream os(path, error);
    os << R"({"matmul_node": 0.00125})";
  }
  std::string message;
  FailureOr<KernelTimes> times = readKernelTimes(path, message);
  ASSERT_TRUE(succeeded(times)) << message;
  EXPECT_EQ(estimateOpSeconds(ops[1], h100, &*times), 0.00125);
  EXPECT_NEAR(estimateOpSeconds(ops[0], h100, &*times),
              estimateOpSeconds(ops[0], h100), 1e-15);
  {
    std::error_code error;
    llvm::raw_fd_ostream os(path, error);
    os << R"({"matmul_node": -1})";
  }
  EXPECT_TRUE(failed(readKernelTimes(path, message)));
  EXPECT_NE(message.find("the time of 'matmul_node' must be a number of "
                         "seconds >= 0"),
            std::string::npos)
      << message;
  llvm::sys::fs::remove(path);
  EXPECT_TRUE(failed(readKernelTimes(path, message)));
  EXPECT_NE(message.find("cannot read kernel times"), std::string::npos)
      << message;
}

} // namespace
