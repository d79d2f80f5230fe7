//===- RuntimeModule.cpp - memopt._runtime: load and run compiled programs ===//
//
// A compiled program is a shared library built by `memopt-compile --emit
// lib` (OUT.so, with its weights in OUT.weights): the generated program, the
// runtime and one backend, exporting the C API of memopt_c_api.h. This module
// loads such a library with dlopen (RTLD_LOCAL: every program keeps its own
// copy of the runtime, so programs for both backends and of several models
// live in one process) and drives it through that C API only. It links no
// MLIR and no runtime, so it also builds alone (cmake -S python) on a machine
// that only runs programs.
//
// Tensors come in as nanobind ndarrays: NumPy arrays (buffer protocol) and
// any DLPack producer (PyTorch, CuPy, JAX, NumPy's __dlpack__). Each is
// checked against the program's table (dtype, shape, row-major contiguity,
// device) before its pointer reaches the runtime, and a mismatch raises
// memopt.InputError naming the tensor.
//
// Shaped after onnxruntime's Python binding (a session object over the C++
// core, inputs checked by name, type and shape, IOBinding for device
// buffers) and TensorRT's execution context (device pointers and the
// caller's CUDA stream). Different: the program's arena and weights are
// allocated once when it loads, so a run allocates nothing.
//
//===----------------------------------------------------------------------===//

#include "Errors.h"
#include "memopt/Runtime/memopt_c_api.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <dlfcn.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace nb = nanobind;
using memopt::python::raise;

namespace {

/// The C API of one loaded program library.
struct CApi {
  decltype(&memopt_model_create) create;
  decltype(&memopt_model_destroy) destroy;
  decltype(&memopt_model_error) error;
  decltype(&memopt_model_run) run;
  decltype(&memopt_model_run_buffers) runBuffers;
  decltype(&memopt_model_synchronize) synchronize;
  decltype(&memopt_model_train_step) trainStep;
  decltype(&memopt_model_read_weights) readWeights;
  decltype(&memopt_model_write_weights) writeWeights;
  decltype(&memopt_model_load_weights) loadWeights;
  decltype(&memopt_model_save_weights) saveWeights;
  decltype(&memopt_model_save_onnx_external) saveOnnx;
  decltype(&memopt_model_weight_bytes) weightBytes;
  decltype(&memopt_model_num_inputs) numInputs;
  decltype(&memopt_model_num_outputs) numOutputs;
  decltype(&memopt_model_num_weights) numWeights;
  decltype(&memopt_model_tensor_info) tensorInfo;
  decltype(&memopt_model_backend) backend;
  decltype(&memopt_model_name) name;
  decltype(&memopt_model_arena_bytes) arenaBytes;
  decltype(&memopt_model_is_training) isTraining;
  decltype(&memopt_model_compiled_learning_rate) compiledLearningRate;
  decltype(&memopt_model_ranks) ranks;
  decltype(&memopt_model_rank) rank;
};

/// Loads `path` once per process; libraries stay loaded (a CUDA program's
/// runtime state must outlive every model made from it). The Python side
/// loads a rebuilt library under a new path (memopt/_program.py).
std::shared_ptr<const CApi> loadLibrary(const std::string &path) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const CApi>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = loaded.find(path);
  if (found != loaded.end())
    return found->second;
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *message = dlerror();
    raise("LoadError", "cannot load program library '" + path +
                           "': " + (message ? message : "dlopen failed"));
  }
  auto api = std::make_shared<CApi>();
  auto bind = [&](auto &function, const char *symbol) {
    void *address = dlsym(handle, symbol);
    if (!address)
      raise("LoadError", "'" + path +
                             "' is not a memopt program library of this "
                             "version: it does not export " +
                             symbol + " (compile the model again)");
    function =
        reinterpret_cast<std::remove_reference_t<decltype(function)>>(address);
  };
  bind(api->create, "memopt_model_create");
  bind(api->destroy, "memopt_model_destroy");
  bind(api->error, "memopt_model_error");
  bind(api->run, "memopt_model_run");
  bind(api->runBuffers, "memopt_model_run_buffers");
  bind(api->synchronize, "memopt_model_synchronize");
  bind(api->trainStep, "memopt_model_train_step");
  bind(api->readWeights, "memopt_model_read_weights");
  bind(api->writeWeights, "memopt_model_write_weights");
  bind(api->loadWeights, "memopt_model_load_weights");
  bind(api->saveWeights, "memopt_model_save_weights");
  bind(api->saveOnnx, "memopt_model_save_onnx_external");
  bind(api->weightBytes, "memopt_model_weight_bytes");
  bind(api->numInputs, "memopt_model_num_inputs");
  bind(api->numOutputs, "memopt_model_num_outputs");
  bind(api->numWeights, "memopt_model_num_weights");
  bind(api->tensorInfo, "memopt_model_tensor_info");
  bind(api->backend, "memopt_model_backend");
  bind(api->name, "memopt_model_name");
  bind(api->arenaBytes, "memopt_model_arena_bytes");
  bind(api->isTraining, "memopt_model_is_training");
  bind(api->compiledLearningRate, "memopt_model_compiled_learning_rate");
  bind(api->ranks, "memopt_model_ranks");
  bind(api->rank, "memopt_model_rank");
  loaded[path] = api;
  return api;
}

// DLPack device types (dlpack.h's DLDeviceType).
constexpr int kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13;

/// The DLPack (code, bits) of a runtime DType value (memopt_tensor_info).
bool dlpackTypeOf(int32_t dtype, nb::dlpack::dtype_code &code, int &bits) {
  using Code = nb::dlpack::dtype_code;
  static const struct {
    Code code;
    int bits;
  } table[] = {{Code::Float, 32}, {Code::Float, 16}, {Code::Bfloat, 16},
               {Code::Float, 64}, {Code::Int, 64},   {Code::Int, 32},
               {Code::Int, 8},    {Code::UInt, 8},   {Code::Bool, 8}};
  if (dtype < 0 || dtype >= int32_t(std::size(table)))
    return false;
  code = table[dtype].code;
  bits = table[dtype].bits;
  return true;
}

std::string dtypeText(nb::dlpack::dtype dtype) {
  using Code = nb::dlpack::dtype_code;
  std::string kind;
  switch (Code(dtype.code)) {
  case Code::Int:
    kind = "int";
    break;
  case Code::UInt:
    kind = "uint";
    break;
  case Code::Float:
    kind = "float";
    break;
  case Code::Bfloat:
    kind = "bfloat";
    break;
  case Code::Bool:
    return "bool";
  default:
    kind = "type" + std::to_string(int(dtype.code)) + "_";
  }
  return kind + std::to_string(int(dtype.bits));
}

std::string runtimeDtypeText(int32_t dtype) {
  static const char *names[] = {"float32", "float16", "bfloat16",
                                "float64", "int64",   "int32",
                                "int8",    "uint8",   "bool"};
  return dtype >= 0 && dtype < int32_t(std::size(names)) ? names[dtype] : "?";
}

std::string shapeText(const int64_t *shape, size_t rank) {
  std::string text = "(";
  for (size_t i = 0; i < rank; ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (rank == 1 ? ",)" : ")");
}

/// Where a tensor may live for a run.
enum class Placement { Host, HostOrDevice };

/// Checks `array` against the program's `info`; raises InputError naming
/// the tensor. Returns its data pointer. `ranks` > 1: a data-parallel
/// training step's input, the global batch of `ranks` ranks (the program's
/// shape with axis 0 `ranks` times as long; rank r reads the r-th slice).
template <typename Array>
void *checkTensor(const char *kind, const memopt_tensor_info &info,
                  const Array &array, Placement placement, int ranks = 1) {
  std::string what = std::string(kind) + " '" + info.name + "'";
  nb::dlpack::dtype_code code;
  int bits = 0;
  if (!dlpackTypeOf(info.dtype, code, bits))
    raise("InputError", what + " has a dtype this module does not know");
  nb::dlpack::dtype dtype = array.dtype();
  // NumPy's bfloat16 (ml_dtypes) exports neither DLPack nor a buffer:
  // memopt.Program passes such an array as its uint16 view, the same bits.
  bool bfloatBits = code == nb::dlpack::dtype_code::Bfloat &&
                    dtype.code == uint8_t(nb::dlpack::dtype_code::UInt) &&
                    dtype.bits == 16 && dtype.lanes == 1;
  if (!bfloatBits &&
      (dtype.code != uint8_t(code) || dtype.bits != bits || dtype.lanes != 1))
    raise("InputError", what + " is " + dtypeText(dtype) +
                            "; the program expects " +
                            runtimeDtypeText(info.dtype));
  std::vector<int64_t> wanted(info.shape, info.shape + info.rank);
  if (ranks > 1) {
    if (wanted.empty())
      raise("InputError",
            what + " is a scalar: a data-parallel step of " +
                std::to_string(ranks) +
                " ranks splits every input along axis 0 (compile the model "
                "with a batch axis on it)");
    wanted[0] *= ranks;
  }
  bool shapeOk = array.ndim() == wanted.size();
  for (size_t i = 0; shapeOk && i < array.ndim(); ++i)
    shapeOk = int64_t(array.shape(i)) == wanted[i];
  if (!shapeOk) {
    std::vector<int64_t> shape;
    for (size_t i = 0; i < array.ndim(); ++i)
      shape.push_back(int64_t(array.shape(i)));
    std::string why;
    if (ranks > 1)
      why = ": the global batch of " + std::to_string(ranks) +
            " data-parallel ranks of " + std::to_string(info.shape[0]) +
            " each (rank r trains on rows [" + std::to_string(info.shape[0]) +
            "r, " + std::to_string(info.shape[0]) + "(r + 1)) of axis 0)";
    raise("InputError", what + " has shape " +
                            shapeText(shape.data(), shape.size()) +
                            "; the program expects " +
                            shapeText(wanted.data(), wanted.size()) + why);
  }
  // Row-major and dense (sizes of 1 may carry any stride).
  int64_t expected = 1;
  for (size_t i = array.ndim(); i-- > 0;) {
    if (array.shape(i) != 1 && array.stride(i) != expected)
      raise("InputError",
            what + " is not contiguous (row-major): make it so first "
                   "(numpy.ascontiguousarray, torch.Tensor.contiguous)");
    expected *= int64_t(array.shape(i));
  }
  int device = array.device_type();
  bool host = device == kDLCPU || device == kDLCUDAHost;
  bool gpu = device == kDLCUDA || device == kDLCUDAManaged;
  if (!host && !(gpu && placement == Placement::HostOrDevice))
    raise(
        "InputError",
        what + " lives on " +
            (gpu ? "a CUDA device" : "device type " + std::to_string(device)) +
            (placement == Placement::Host
                 ? "; this call takes host memory (a host program, or a "
                   "training step): copy it to the host first"
                 : "; the program runs on CUDA device 0"));
  if (gpu && array.device_id() != 0)
    raise("InputError", what + " lives on CUDA device " +
                            std::to_string(array.device_id()) +
                            "; the program runs on device 0");
  return const_cast<void *>(static_cast<const void *>(array.data()));
}

using InputArray = nb::ndarray<nb::ro>;
using OutputArray = nb::ndarray<>;

/// A loaded program: its arena, weights and (CUDA) context live as long as
/// this object. Calls on one program are serialized (the runtime's context
/// runs one program at a time); the GIL is released while it runs.
class Program {
public:
  Program(const std::string &library, const std::string &weights)
      : api(loadLibrary(library)) {
    char message[1024] = "";
    model = api->create(weights.c_str(), 0, message, sizeof message);
    if (!model)
      raise("LoadError", std::string("cannot create the program from '") +
                             library + "': " + message);
  }
  ~Program() {
    if (model)
      api->destroy(model);
  }
  Program(const Program &) = delete;
  Program &operator=(const Program &) = delete;

  /// (name, dtype, shape, bytes, offset, role) of every tensor of `kind`.
  std::vector<nb::tuple> tensors(int kind) const {
    std::vector<nb::tuple> result;
    int count = kind == MEMOPT_TENSOR_INPUT    ? api->numInputs(model)
                : kind == MEMOPT_TENSOR_OUTPUT ? api->numOutputs(model)
                                               : api->numWeights(model);
    for (int i = 0; i < count; ++i) {
      memopt_tensor_info info = getInfo(kind, i);
      nb::list shape;
      for (int d = 0; d < info.rank; ++d)
        shape.append(info.shape[d]);
      result.push_back(nb::make_tuple(info.name, info.dtype, nb::tuple(shape),
                                      info.bytes, info.offset, info.role));
    }
    return result;
  }

  /// Host buffers in, host buffers out (any backend: the runtime copies).
  void run(const std::vector<InputArray> &inputs,
           const std::vector<OutputArray> &outputs) {
    std::vector<const void *> in = bindInputs(inputs, Placement::Host);
    std::vector<void *> out = bindOutputs(outputs, Placement::Host);
    int status;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex);
      status = api->run(model, in.data(), out.data());
    }
    check(status);
  }

  /// Host or device buffers, ordered on the caller's CUDA `stream`.
  void runBuffers(const std::vector<InputArray> &inputs,
                  const std::vector<OutputArray> &outputs, uintptr_t stream) {
    std::vector<const void *> in = bindInputs(inputs, Placement::HostOrDevice);
    std::vector<void *> out = bindOutputs(outputs, Placement::HostOrDevice);
    int status;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex);
      status = api->runBuffers(model, in.data(), out.data(),
                               reinterpret_cast<void *>(stream));
    }
    check(status);
  }

  void synchronize() {
    int status;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex);
      status = api->synchronize(model);
    }
    check(status);
  }

  float trainStep(const std::vector<InputArray> &inputs, float lr) {
    // A data-parallel step takes the global batch (memopt_model_ranks).
    std::vector<const void *> in =
        bindInputs(inputs, Placement::Host, api->ranks(model));
    float loss = 0;
    int status;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex);
      status = api->trainStep(model, in.data(), lr, &loss);
    }
    check(status);
    return loss;
  }

  void readWeights(
      nb::ndarray<uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> buffer) {
    checkRegion(buffer.shape(0));
    std::lock_guard<std::mutex> lock(mutex);
    check(api->readWeights(model, buffer.data()));
  }

  void writeWeights(
      nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>
          buffer) {
    checkRegion(buffer.shape(0));
    std::lock_guard<std::mutex> lock(mutex);
    check(api->writeWeights(model, buffer.data()));
  }

  void loadWeights(const std::string &path) {
    std::lock_guard<std::mutex> lock(mutex);
    check(api->loadWeights(model, path.c_str()), "LoadError");
  }

  void saveWeights(const std::string &path) {
    std::lock_guard<std::mutex> lock(mutex);
    check(api->saveWeights(model, path.c_str()));
  }

  void saveOnnx(const std::string &templatePath, const std::string &output,
                int externalData) {
    std::lock_guard<std::mutex> lock(mutex);
    check(api->saveOnnx(model, templatePath.c_str(), output.c_str(),
                        externalData));
  }

  std::string backend() const { return api->backend(model); }
  std::string name() const { return api->name(model); }
  int64_t arenaBytes() const { return api->arenaBytes(model); }
  size_t weightBytes() const { return api->weightBytes(model); }
  bool isTraining() const { return api->isTraining(model) != 0; }
  float compiledLearningRate() const {
    return api->compiledLearningRate(model);
  }
  int ranks() const { return api->ranks(model); }
  int rank() const { return api->rank(model); }

private:
  memopt_tensor_info getInfo(int kind, int index) const {
    memopt_tensor_info info{};
    if (api->tensorInfo(model, kind, index, &info) != 0)
      raise("LoadError", "the program has no tensor " + std::to_string(index) +
                             " of kind " + std::to_string(kind));
    return info;
  }

  std::vector<const void *> bindInputs(const std::vector<InputArray> &arrays,
                                       Placement placement,
                                       int ranks = 1) const {
    int count = api->numInputs(model);
    if (int(arrays.size()) != count)
      raise("InputError", "the program takes " + std::to_string(count) +
                              " inputs, got " + std::to_string(arrays.size()));
    std::vector<const void *> pointers;
    for (int i = 0; i < count; ++i)
      pointers.push_back(checkTensor("input", getInfo(MEMOPT_TENSOR_INPUT, i),
                                     arrays[size_t(i)], placement, ranks));
    return pointers;
  }

  std::vector<void *> bindOutputs(const std::vector<OutputArray> &arrays,
                                  Placement placement) const {
    int count = api->numOutputs(model);
    if (int(arrays.size()) != count)
      raise("InputError", "the program has " + std::to_string(count) +
                              " outputs, got " + std::to_string(arrays.size()) +
                              " buffers");
    std::vector<void *> pointers;
    for (int i = 0; i < count; ++i)
      pointers.push_back(checkTensor("output", getInfo(MEMOPT_TENSOR_OUTPUT, i),
                                     arrays[size_t(i)], placement));
    return pointers;
  }

  void checkRegion(size_t bytes) const {
    if (bytes != api->weightBytes(model))
      raise("InputError",
            "the weight region has " + std::to_string(api->weightBytes(model)) +
                " bytes, got a buffer of " + std::to_string(bytes));
  }

  void check(int status, const char *kind = "ExecutionError") const {
    if (status != 0)
      raise(kind, api->error(model));
  }

  std::shared_ptr<const CApi> api;
  memopt_model *model = nullptr;
  std::mutex mutex;
};

} // namespace

NB_MODULE(_runtime, m) {
  m.doc() = "Loads and runs programs built by memopt-compile --emit lib "
            "(internal: use memopt.Program).";
  m.attr("TENSOR_INPUT") = int(MEMOPT_TENSOR_INPUT);
  m.attr("TENSOR_OUTPUT") = int(MEMOPT_TENSOR_OUTPUT);
  m.attr("TENSOR_WEIGHT") = int(MEMOPT_TENSOR_WEIGHT);
  nb::class_<Program>(m, "Program",
                      "One loaded program: its arena, weights and context.")
      .def(nb::init<const std::string &, const std::string &>(),
           nb::arg("library"), nb::arg("weights"),
           "Loads `library` (OUT.so) and its weight file (OUT.weights).")
      .def("tensors", &Program::tensors, nb::arg("kind"),
           "(name, dtype, shape, bytes, offset, role) of every input (kind "
           "0), output (1) or weight (2); dtype is the runtime's DType.")
      .def("run", &Program::run, nb::arg("inputs"), nb::arg("outputs"),
           "One run on host arrays, in table order.")
      .def("run_buffers", &Program::runBuffers, nb::arg("inputs"),
           nb::arg("outputs"), nb::arg("stream"),
           "One run on host or CUDA buffers, ordered on the CUDA stream "
           "`stream` (an address; 0 = the legacy default stream).")
      .def("synchronize", &Program::synchronize,
           "Waits until the program's queued work has finished.")
      .def("train_step", &Program::trainStep, nb::arg("inputs"), nb::arg("lr"),
           "One training step on host arrays; lr < 0 takes the compiled "
           "learning rate. Returns the loss.")
      .def("read_weights", &Program::readWeights, nb::arg("buffer"),
           "Copies the weight region into `buffer` (uint8, weight_bytes).")
      .def("write_weights", &Program::writeWeights, nb::arg("buffer"),
           "Replaces the weight region with `buffer`.")
      .def("load_weights", &Program::loadWeights, nb::arg("path"),
           "Loads a weight file written for this program.")
      .def("save_weights", &Program::saveWeights, nb::arg("path"),
           "Writes the weight region as a weight file.")
      .def("save_onnx", &Program::saveOnnx, nb::arg("template"),
           nb::arg("output"), nb::arg("external_data") = 0,
           "Training programs: writes the trained ONNX model (external_data "
           "1: initializers in OUTPUT.data, -1: inline, 0: inline unless "
           "the model would pass 1.5 GiB).")
      .def_prop_ro("backend", &Program::backend)
      .def_prop_ro("name", &Program::name)
      .def_prop_ro("arena_bytes", &Program::arenaBytes)
      .def_prop_ro("weight_bytes", &Program::weightBytes)
      .def_prop_ro("is_training", &Program::isTraining)
      .def_prop_ro("compiled_learning_rate", &Program::compiledLearningRate)
      .def_prop_ro("ranks", &Program::ranks,
                   "Data-parallel ranks of the program (1 for any other).")
      .def_prop_ro("rank", &Program::rank,
                   "The global rank of this process's first rank.");
}
