//===- CApi.cpp - C API of a compiled model (shared library) --------------===//

#include "Driver.h"
#include "memopt/Runtime/memopt_c_api.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace memopt::rt;

struct memopt_model {
  Model model;
  std::string error;
};

extern "C" {

memopt_model *memopt_model_create(const char *weights_path,
                                  uint64_t random_seed, char *error,
                                  size_t error_size) {
  memopt_model *handle = new memopt_model();
  std::string message;
  if (!handle->model.init(memopt_program(), weights_path ? weights_path : "",
                          weights_path == nullptr, random_seed, message)) {
    if (error && error_size)
      std::snprintf(error, error_size, "%s", message.c_str());
    delete handle;
    return nullptr;
  }
  return handle;
}

int memopt_model_run(memopt_model *model, const void *const *inputs,
                     void *const *outputs) {
  if (!model)
    return 1;
  if (!model->model.setInputs(inputs, model->error) ||
      !model->model.execute(model->error) ||
      !model->model.getOutputs(outputs, model->error))
    return 1;
  return 0;
}

int memopt_model_train_step(memopt_model *model, const void *const *inputs,
                            float lr, float *loss) {
  if (!model || !loss)
    return 1;
  float rate = lr < 0 ? model->model.compiledLearningRate() : lr;
  return model->model.trainStep(inputs, rate, *loss, model->error) ? 0 : 1;
}

int memopt_model_read_weights(memopt_model *model, void *buffer) {
  if (!model || !buffer)
    return 1;
  std::vector<uint8_t> region;
  if (!model->model.readWeights(region, model->error))
    return 1;
  std::memcpy(buffer, region.data(), region.size());
  return 0;
}

int64_t memopt_model_accumulation_steps(const memopt_model *model) {
  return model ? model->model.accumulationSteps() : 0;
}

size_t memopt_model_weight_bytes(const memopt_model *model) {
  return model ? size_t(model->model.program().weightBytes) : 0;
}

const char *memopt_model_error(const memopt_model *model) {
  return model ? model->error.c_str() : "null model";
}

int memopt_model_num_inputs(const memopt_model *model) {
  return model->model.program().numInputs;
}

int memopt_model_num_outputs(const memopt_model *model) {
  return model->model.program().numOutputs;
}

static const TensorInfo *tensorAt(const memopt_model *model, int is_output,
                                  int index) {
  const ProgramInfo &program = model->model.program();
  int count = is_output ? program.numOutputs : program.numInputs;
  if (index < 0 || index >= count)
    return nullptr;
  return is_output ? &program.outputs[index] : &program.inputs[index];
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
