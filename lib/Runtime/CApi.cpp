//===- CApi.cpp - C API of a compiled model (shared library) --------------===//
//
// A thin C face over Driver.h's Model: what embedders (and the Python
// package, python/memopt) call through dlopen. Shaped after onnxruntime's C
// API (opaque handle, status returns, the message kept on the handle) and
// TensorRT's I/O tensor queries (name, dtype, shape per index).
//
//===----------------------------------------------------------------------===//

#include "Driver.h"
#include "memopt/Runtime/memopt_c_api.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace memopt::rt;

// A data-parallel program (--data-parallel N) runs its N ranks as threads
// (RankGroup); every other call works on rank 0 (whose weight region the
// others mirror, except for sharded optimizer state).
struct memopt_model {
  RankGroup group;
  std::string error;
  Model &primary() { return group.rank(0); }
  const Model &primary() const { return group.rank(0); }
  /// Whether one weight region may be written into every rank (not when
  /// the ranks hold different shards of the optimizer state).
  bool oneRegionForAll() {
    if (group.worldSize() > 1 && group.program().shardMode != 0) {
      error = "the ranks of this program hold different shards of the "
              "optimizer state: one weight region cannot be loaded into all";
      return false;
    }
    return true;
  }
};

extern "C" {

memopt_model *memopt_model_create(const char *weights_path,
                                  uint64_t random_seed, char *error,
                                  size_t error_size) {
  memopt_model *handle = new memopt_model();
  std::string message;
  if (!handle->group.init(memopt_program(), 0, weights_path ? weights_path : "",
                          weights_path == nullptr, random_seed, message)) {
    if (error && error_size)
      std::snprintf(error, error_size, "%s", message.c_str());
    delete handle;
    return nullptr;
  }
  if (verboseFromEnvironment())
    std::fprintf(stderr, "%s\n",
                 handle->primary().loadReport().describe().c_str());
  return handle;
}

int memopt_model_run(memopt_model *model, const void *const *inputs,
                     void *const *outputs) {
  if (!model)
    return 1;
  if (!model->primary().setInputs(inputs, model->error) ||
      !model->primary().execute(model->error) ||
      !model->primary().getOutputs(outputs, model->error))
    return 1;
  return 0;
}

int memopt_model_train_step(memopt_model *model, const void *const *inputs,
                            float lr, float *loss) {
  if (!model || !loss)
    return 1;
  float rate = lr < 0 ? model->primary().compiledLearningRate() : lr;
  return model->group.trainStep(inputs, rate, *loss, model->error) ? 0 : 1;
}

int memopt_model_read_weights(memopt_model *model, void *buffer) {
  if (!model || !buffer)
    return 1;
  return model->primary().readRegion(buffer, model->error) ? 0 : 1;
}

int memopt_model_write_weights(memopt_model *model, const void *buffer) {
  if (!model || !buffer || !model->oneRegionForAll())
    return 1;
  for (int r = 0; r < model->group.size(); ++r)
    if (!model->group.rank(r).writeRegion(buffer, model->error))
      return 1;
  return 0;
}

int memopt_model_load_weights(memopt_model *model, const char *path) {
  if (!model || !path || !model->oneRegionForAll())
    return 1;
  // Checked before anything is read; then streamed into every rank.
  WeightsFile file;
  if (!file.open(model->primary().program(), path, model->error))
    return 1;
  for (int r = 0; r < model->group.size(); ++r)
    if (!model->group.rank(r).loadWeights(file, model->error))
      return 1;
  return 0;
}

int memopt_model_save_weights(memopt_model *model, const char *path) {
  if (!model || !path)
    return 1;
  // ZeRO-3: the weight file holds every rank's region; rank 0's alone is
  // neither that nor the model (memopt_model_save_onnx gathers it).
  if (weightFileRegions(model->group.program()) > 1) {
    model->error = "the ranks of this program hold different shards of the "
                   "parameters: save the model with memopt_model_save_onnx";
    return 1;
  }
  return model->primary().saveWeights(path, /*withTrailer=*/true, model->error)
             ? 0
             : 1;
}

int memopt_model_save_onnx(memopt_model *model, const char *template_path,
                           const char *output_path) {
  return memopt_model_save_onnx_external(model, template_path, output_path, 0);
}

int memopt_model_save_onnx_external(memopt_model *model,
                                    const char *template_path,
                                    const char *output_path,
                                    int external_data) {
  if (!model || !template_path || !output_path)
    return 1;
  const ProgramInfo &program = model->primary().program();
  if (!program.isTraining) {
    model->error = "the program is not a training step: it has no trained "
                   "parameters to save";
    return 1;
  }
  auto read = [&](int w, std::vector<uint8_t> &bytes, std::string &error) {
    return model->group.readTensor(w, bytes, error);
  };
  ExternalData external = external_data > 0   ? ExternalData::Always
                          : external_data < 0 ? ExternalData::Never
                                              : ExternalData::Auto;
  return writeTrainedOnnx(program, read, template_path, output_path, external,
                          model->error)
             ? 0
             : 1;
}

int memopt_model_run_buffers(memopt_model *model, const void *const *inputs,
                             void *const *outputs, void *stream) {
  if (!model || (!inputs && model->primary().program().numInputs) ||
      (!outputs && model->primary().program().numOutputs))
    return 1;
  return model->primary().runOnBuffers(inputs, outputs, stream, model->error)
             ? 0
             : 1;
}

int memopt_model_synchronize(memopt_model *model) {
  if (!model)
    return 1;
  return model->primary().waitUntilDone(model->error) ? 0 : 1;
}

int memopt_model_ranks(const memopt_model *model) {
  return model ? model->group.worldSize() : 0;
}

int memopt_model_rank(const memopt_model *model) {
  return model ? model->group.firstRank() : 0;
}

int64_t memopt_model_accumulation_steps(const memopt_model *model) {
  return model ? model->primary().accumulationSteps() : 0;
}

size_t memopt_model_weight_bytes(const memopt_model *model) {
  return model ? size_t(model->primary().program().weightBytes) : 0;
}

const char *memopt_model_error(const memopt_model *model) {
  return model ? model->error.c_str() : "null model";
}

int memopt_model_num_inputs(const memopt_model *model) {
  return model->primary().program().numInputs;
}

int memopt_model_num_outputs(const memopt_model *model) {
  return model->primary().program().numOutputs;
}

/// Tensor `index` of `kind` (MEMOPT_TENSOR_*; the older functions pass
/// is_output, 0 or 1), or nullptr.
static const TensorInfo *tensorAt(const memopt_model *model, int kind,
                                  int index) {
  if (!model)
    return nullptr;
  const ProgramInfo &program = model->primary().program();
  const TensorInfo *table = kind == MEMOPT_TENSOR_INPUT    ? program.inputs
                            : kind == MEMOPT_TENSOR_OUTPUT ? program.outputs
                            : kind == MEMOPT_TENSOR_WEIGHT ? program.weights
                                                           : nullptr;
  int count = kind == MEMOPT_TENSOR_INPUT    ? program.numInputs
              : kind == MEMOPT_TENSOR_OUTPUT ? program.numOutputs
                                             : program.numWeights;
  if (!table || index < 0 || index >= count)
    return nullptr;
  return &table[index];
}

int memopt_model_tensor_info(const memopt_model *model, int kind, int index,
                             memopt_tensor_info *info) {
  const TensorInfo *tensor = tensorAt(model, kind, index);
  if (!tensor || !info)
    return 1;
  info->name = tensor->name;
  info->dtype = int32_t(tensor->dtype);
  info->rank = tensor->rank;
  info->shape = tensor->shape;
  info->bytes = tensorBytes(*tensor);
  info->offset = tensor->offset;
  info->role = kind == MEMOPT_TENSOR_WEIGHT ? int32_t(tensor->role) : 0;
  return 0;
}

int memopt_model_num_weights(const memopt_model *model) {
  return model ? model->primary().program().numWeights : 0;
}

const char *memopt_model_backend(const memopt_model *) { return backendName(); }

const char *memopt_model_name(const memopt_model *model) {
  return model ? model->primary().program().name : nullptr;
}

int64_t memopt_model_arena_bytes(const memopt_model *model) {
  return model ? model->primary().program().arenaBytes : 0;
}

int memopt_model_is_training(const memopt_model *model) {
  return model && model->primary().program().isTraining ? 1 : 0;
}

float memopt_model_compiled_learning_rate(const memopt_model *model) {
  return model ? model->primary().compiledLearningRate() : 0.0f;
}

const char *memopt_model_tensor_name(const memopt_model *model, int is_output,
                                     int index) {
  const TensorInfo *info = tensorAt(model, is_output, index);
  return info ? info->name : nullptr;
}

size_t memopt_model_tensor_bytes(const memopt_model *model, int is_output,
                                 int index) {
  const TensorInfo *info = tensorAt(model, is_output, index);
  return info ? tensorBytes(*info) : 0;
}

void memopt_model_destroy(memopt_model *model) { delete model; }

} // extern "C"
