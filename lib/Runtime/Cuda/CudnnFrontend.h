//===- CudnnFrontend.h - shared cudnn-frontend graph helpers ---*- C++ -*-===//
//
// The pieces of cudnn-frontend's graph API that the files built on it share
// (CudnnAttention.cpp: the fused attention; CudnnConvFusion.cpp: the
// normalization-ReLU convolutions): the frontend's data types for memopt's,
// a tensor with a uid, building a graph's plan (validate, operation graph,
// heuristics, support check, plans) and running it, with cuDNN's messages
// turned into memopt's errors and refusals. Only files compiled with
// MEMOPT_HAVE_CUDNN_FRONTEND (lib/Runtime/CMakeLists.txt) include it; each
// costs about a minute of compile time, so keep the list short.
//
// Taken from: cudnn-frontend's samples (samples/cpp: graph, uids, variant
// packs keyed by uid, the workspace the plan states).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_RUNTIME_CUDA_CUDNNFRONTEND_H
#define MEMOPT_LIB_RUNTIME_CUDA_CUDNNFRONTEND_H

#include "CudaInternal.h"

#if MEMOPT_HAVE_CUDNN_FRONTEND
#include <cudnn_frontend.h>
#endif

#include <exception>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace memopt::rt {

#if MEMOPT_HAVE_CUDNN_FRONTEND
namespace fe = cudnn_frontend;
using FrontendGraph = fe::graph::Graph;
using FrontendTensor = std::shared_ptr<fe::graph::Tensor_attributes>;

/// cudnn-frontend's type of a float dtype.
inline fe::DataType_t frontendType(DType dtype) {
  return dtype == DType::BF16  ? fe::DataType_t::BFLOAT16
         : dtype == DType::F16 ? fe::DataType_t::HALF
                               : fe::DataType_t::FLOAT;
}

/// A graph input (or an output's description) with its uid, dims and
/// element strides; its data type is the graph's io type unless set.
inline FrontendTensor addFrontendTensor(FrontendGraph &graph, const char *name,
                                        int64_t uid, std::vector<int64_t> dims,
                                        std::vector<int64_t> strides) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim(std::move(dims))
                          .set_stride(std::move(strides)));
}

/// Builds the plan of `graph` for the context's handle with the heuristics
/// `modes` (Graph::build's steps: validate, operation graph, execution
/// plans, support check, plans), leaving out the engines with a numerical
/// note in `deselect` (TENSOR_CORE: no TF32 for f32 that must stay exact),
/// and reads the workspace it states. Returns "" or the first line of
/// cuDNN's message (an exception's too).
inline std::string
buildFrontendPlan(Context &ctx, FrontendGraph &graph,
                  const std::vector<fe::HeurMode_t> &modes,
                  size_t &workspaceBytes,
                  const std::vector<fe::NumericalNote_t> &deselect = {}) {
  std::string message;
  try {
    fe::error_t status = graph.validate();
    if (status.is_good())
      status = graph.build_operation_graph(ctx.dnn);
    if (status.is_good())
      status = graph.create_execution_plans(modes);
    if (status.is_good() && !deselect.empty())
      graph.deselect_numeric_notes(deselect);
    if (status.is_good())
      status = graph.check_support();
    if (status.is_good())
      status = graph.build_plans();
    int64_t bytes = 0;
    if (status.is_good())
      status = graph.get_workspace_size(bytes);
    if (status.is_good()) {
      workspaceBytes = size_t(bytes);
      return "";
    }
    message = status.get_message();
  } catch (const std::exception &error) {
    message = error.what();
  }
  size_t end = message.find('\n');
  if (end != std::string::npos)
    message.resize(end);
  return message.empty() ? "refused without a message" : message;
}

/// Runs a built plan with the variant pack (uid -> device pointer) and the
/// workspace; false after recording "`what` execution failed: ..." for
/// `node`.
inline bool executeFrontendPlan(Context &ctx, const char *node,
                                const char *what, FrontendGraph &graph,
                                std::unordered_map<int64_t, void *> &pack,
                                void *workspace) {
  try {
    fe::error_t status = graph.execute(ctx.dnn, pack, workspace);
    if (status.is_good())
      return true;
    failf(ctx, node, "%s execution failed: %s", what,
          status.get_message().c_str());
  } catch (const std::exception &error) {
    failf(ctx, node, "%s execution failed: %s", what, error.what());
  }
  return false;
}
#else
/// Stands in for the graph where the runtime is built without the frontend
/// (nothing builds one then).
struct FrontendGraph {};
#endif

} // namespace memopt::rt

#endif // MEMOPT_LIB_RUNTIME_CUDA_CUDNNFRONTEND_H
