//===- CompileOptionsTest.cpp - the option table's bindings ---------------===//
//
// CompileOptions.def through each binding: the struct's defaults, the
// command line (CompileCommandLine on an argv), setCompileOption (Python's
// options=), the pass pipeline's options (assign, parseFromString) and the
// option list the docs are printed from.
//
//===----------------------------------------------------------------------===//

#include "memopt/Conversion/CompileOptions.h"
#include "memopt/Conversion/CompileCommandLine.h"
#include "memopt/Dialect/MemOpt/Transforms/CompilePipeline.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::memopt;

namespace {

TEST(CompileOptions, DefaultsAreTheTables) {
  CompileOptions options;
  EXPECT_EQ(options.target, CompileTarget::Host);
  EXPECT_EQ(options.precision, CompilePrecision::FP32);
  EXPECT_EQ(options.emit, EmitKind::Exe);
  EXPECT_EQ(options.memoryBudget, 0);
  EXPECT_EQ(options.rematMaxComputations, 2);
  EXPECT_TRUE(options.fuseAttention);
  EXPECT_TRUE(options.outputsInArena);
  EXPECT_EQ(options.cudaArch, "sm_90");
  EXPECT_FALSE(options.training.enabled);
  EXPECT_TRUE(options.training.fuseHead);
  EXPECT_EQ(options.training.loss, "cross-entropy");
  EXPECT_EQ(options.training.ignoreIndex, -100);
  EXPECT_EQ(options.training.lossScaleInterval, 2000);
  EXPECT_EQ(options.training.shard, "");
}

TEST(CompileOptions, SetByNameParsesAsTheCommandLine) {
  CompileOptions options;
  std::string message;
  ASSERT_TRUE(succeeded(
      setCompileOption(options, "--memory-budget", "512MiB", message)));
  EXPECT_EQ(options.memoryBudget, 512 << 20);
  // A Negated option: the flag's sense by its flag, the field's otherwise.
  ASSERT_TRUE(succeeded(
      setCompileOption(options, "no-fuse-attention", "true", message)));
  EXPECT_FALSE(options.fuseAttention);
  ASSERT_TRUE(
      succeeded(setCompileOption(options, "fuse_attention", "true", message)));
  EXPECT_TRUE(options.fuseAttention);
  ASSERT_TRUE(succeeded(
      setCompileOption(options, "outputs-in-arena", "false", message)));
  EXPECT_FALSE(options.outputsInArena);
  ASSERT_TRUE(succeeded(setCompileOption(options, "target", "cuda", message)));
  EXPECT_EQ(options.target, CompileTarget::Cuda);
  ASSERT_TRUE(succeeded(
      setCompileOption(options, "remat-allow", "relu,gemm", message)));
  EXPECT_EQ(options.rematAllow, (std::vector<std::string>{"relu", "gemm"}));
  ASSERT_TRUE(
      succeeded(setCompileOption(options, "fuse-head", "off", message)));
  EXPECT_FALSE(options.training.fuseHead);
  ASSERT_TRUE(succeeded(setCompileOption(options, "lr", "0.5", message)));
  EXPECT_EQ(options.training.learningRate, 0.5);
  ASSERT_TRUE(
      succeeded(setCompileOption(options, "data_parallel", "4", message)));
  EXPECT_EQ(options.training.dataParallel, 4);
  EXPECT_TRUE(options.training.dataParallelGiven);

  EXPECT_TRUE(
      failed(setCompileOption(options, "--memory-budget", "lots", message)));
  EXPECT_EQ(message, "--memory-budget 'lots' is not a size (e.g. 2GiB, "
                     "512MiB, 4096)");
  EXPECT_TRUE(failed(setCompileOption(options, "precision", "fp8", message)));
  EXPECT_EQ(message, "precision 'fp8' is not one of fp32, tf32, fp16, bf16");
  EXPECT_TRUE(failed(setCompileOption(options, "fuse-head", "yes", message)));
  EXPECT_EQ(message, "fuse-head 'yes' is not one of on, off");
  EXPECT_TRUE(failed(setCompileOption(options, "accumulate", "x", message)));
  EXPECT_EQ(message, "accumulate 'x' is not a whole number");
  EXPECT_TRUE(failed(setCompileOption(options, "colour", "red", message)));
  EXPECT_EQ(message, "'colour' is not a memopt-compile option");
}

// One command line per process: llvm::cl's registry is global.
TEST(CompileOptions, CommandLineFillsTheStruct) {
  CompileOptions options;
  CompileCommandLine commandLine(options);
  const char *argv[] = {"memopt-compile",
                        "model.onnx",
                        "-o",
                        "out/model",
                        "--target",
                        "cuda",
                        "--precision",
                        "bf16",
                        "--memory-budget",
                        "2GiB",
                        "--no-fuse-attention",
                        "--separate-outputs",
                        "--remat-allow",
                        "relu,gemm",
                        "--input-shape",
                        "x=1x3",
                        "--input-shape",
                        "y=2",
                        "--train",
                        "--fuse-head",
                        "off",
                        "--lr",
                        "0.25",
                        "--data-parallel",
                        "2",
                        "--shard",
                        "optimizer"};
  ASSERT_TRUE(llvm::cl::ParseCommandLineOptions(std::size(argv), argv, "",
                                                &llvm::errs()));
  std::string message;
  ASSERT_TRUE(succeeded(commandLine.apply(message))) << message;
  EXPECT_EQ(options.inputPath, "model.onnx");
  EXPECT_EQ(options.outputPath, "out/model");
  EXPECT_EQ(options.target, CompileTarget::Cuda);
  EXPECT_EQ(options.precision, CompilePrecision::BF16);
  EXPECT_EQ(options.memoryBudget, int64_t(2) << 30);
  EXPECT_FALSE(options.fuseAttention);
  EXPECT_TRUE(options.fuseEpilogues);
  EXPECT_FALSE(options.outputsInArena);
  EXPECT_EQ(options.rematAllow, (std::vector<std::string>{"relu", "gemm"}));
  EXPECT_EQ(options.inputShapes, (std::vector<std::string>{"x=1x3", "y=2"}));
  EXPECT_TRUE(options.training.enabled);
  EXPECT_FALSE(options.training.fuseHead);
  EXPECT_EQ(options.training.learningRate, 0.25);
  EXPECT_EQ(options.training.dataParallel, 2);
  EXPECT_TRUE(options.training.dataParallelGiven);
  EXPECT_EQ(options.training.shard, "optimizer");
  // Not given: the table's defaults.
  EXPECT_EQ(options.rematMaxComputations, 2);
  EXPECT_EQ(options.training.optimizer, "sgd");
  EXPECT_EQ(options.cudaArch, "sm_90");

  // The pipeline gets the same values under its names.
  CompilePipelineOptions pipeline;
  pipeline.assign(options);
  EXPECT_EQ(pipeline.precision, "bf16");
  EXPECT_EQ(pipeline.target, "cuda");
  EXPECT_EQ(pipeline.memoryBudget, int64_t(2) << 30);
  EXPECT_FALSE(pipeline.fuseAttention);
  EXPECT_FALSE(pipeline.outputsInArena);
  EXPECT_TRUE(pipeline.enabled);
  EXPECT_FALSE(pipeline.fuseHead);
  EXPECT_EQ(pipeline.getShard(), "optimizer");
  EXPECT_EQ(pipeline.getReduceDtype(), "f32");
  EXPECT_EQ(std::vector<std::string>(pipeline.rematAllow.begin(),
                                     pipeline.rematAllow.end()),
            options.rematAllow);
}

TEST(CompileOptions, PipelineOptionsAreTheTables) {
  CompilePipelineOptions pipeline;
  ASSERT_TRUE(succeeded(pipeline.parseFromString(
      "memory-budget=4096 fuse-attention=false train=true lr=0.5 "
      "precision=fp16 remat-allow=relu,gemm")));
  EXPECT_EQ(pipeline.memoryBudget, 4096);
  EXPECT_FALSE(pipeline.fuseAttention);
  EXPECT_TRUE(pipeline.enabled);
  EXPECT_EQ(pipeline.getLearningRate(), 0.5);
  EXPECT_EQ(pipeline.getLowType(), "f16");
  // Defaults: the struct's.
  CompilePipelineOptions defaults;
  CompileOptions options;
  EXPECT_EQ(defaults.rematTimeLimit, options.rematTimeLimit);
  EXPECT_EQ(defaults.lossScaleInit, options.training.lossScaleInit);
  EXPECT_EQ(defaults.precision, "fp32");
  EXPECT_EQ(defaults.getShard(), "none");
  // Every pipeline option of the table is an option of the pipeline.
  std::string printed;
  llvm::raw_string_ostream os(printed);
  defaults.print(os);
  // (Lists print nothing while empty.)
  for (const CompileOptionInfo &info : getCompileOptionInfos()) {
    if (!info.pipeline.empty() && info.kind != OptionKind::List) {
      EXPECT_NE(printed.find((info.pipeline + "=").str()), std::string::npos)
          << info.pipeline.str();
    }
  }
}

TEST(CompileOptions, InfosAreWhole) {
  llvm::StringSet<> flags, pipelines, pythons;
  for (const CompileOptionInfo &info : getCompileOptionInfos()) {
    EXPECT_FALSE(info.help.empty()) << info.field.str();
    if (!info.flag.empty()) {
      EXPECT_TRUE(flags.insert(info.flag).second) << info.flag.str();
    }
    if (!info.pipeline.empty()) {
      EXPECT_TRUE(pipelines.insert(info.pipeline).second)
          << info.pipeline.str();
    }
    if (!info.python.empty()) {
      EXPECT_TRUE(pythons.insert(info.python).second) << info.python.str();
    }
    if (info.kind == OptionKind::Enum) {
      EXPECT_FALSE(info.enumNames.empty()) << info.field.str();
    }
  }
  EXPECT_TRUE(flags.contains("memory-budget"));
  EXPECT_TRUE(pipelines.contains("outputs-in-arena"));
  std::string markdown;
  llvm::raw_string_ostream os(markdown);
  printCompileOptionsMarkdown(os);
  EXPECT_NE(markdown.find("### Memory budget"), std::string::npos);
  EXPECT_NE(markdown.find("| `--memory-budget SIZE` | `(none)` | "
                          "`memory-budget` | `memory_budget` |"),
            std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("`--target host\\|cuda`"), std::string::npos);
}

} // namespace
