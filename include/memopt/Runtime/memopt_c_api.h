/*===- memopt_c_api.h - C API of a compiled memopt model -----------*- C -*-===*
 *
 * A compiled model built as a shared library exports these functions. The
 * buffers passed to memopt_model_run are host memory in the dtypes and shapes
 * the program declares (query them with the info functions).
 *
 *===----------------------------------------------------------------------===*/

#ifndef MEMOPT_RUNTIME_MEMOPT_C_API_H
#define MEMOPT_RUNTIME_MEMOPT_C_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct memopt_model memopt_model;

/* Creates the model: allocates the arena and weight region once and loads
 * weights from `weights_path` (raw weight-region image), or fills them from
 * `random_seed` when weights_path is NULL. Returns NULL on failure and, when
 * `error` is non-NULL, a message in a buffer of `error_size` bytes. */
memopt_model *memopt_model_create(const char *weights_path,
                                  uint64_t random_seed, char *error,
                                  size_t error_size);

/* Runs the model: copies inputs in, runs (CUDA graph after the first run),
 * copies outputs out. Returns 0 on success; otherwise non-zero and the
 * message is available from memopt_model_error. */
int memopt_model_run(memopt_model *model, const void *const *inputs,
                     void *const *outputs);

/* Training programs: one micro-batch on `inputs` (host buffers in table
 * order, one batch) with learning rate `lr` (a negative `lr` takes the
 * compiled one); the step number continues from the weights' step count.
 * Without gradient accumulation every call is an optimizer step; a program
 * compiled with --accumulate K updates on every K-th call (the calls in
 * between sum gradients). Writes the micro-batch's loss (NaN or inf
 * included: stopping is the caller's choice) and returns 0, or non-zero with
 * the message in memopt_model_error (also for an inference program). */
int memopt_model_train_step(memopt_model *model, const void *const *inputs,
                            float lr, float *loss);
/* Micro-batches per optimizer step (1 unless compiled with --accumulate). */
int64_t memopt_model_accumulation_steps(const memopt_model *model);
/* Copies the weight region (the weight file's format, memopt_model_weight_bytes
 * bytes) into `buffer`, e.g. to save trained weights. Returns 0 on success. */
int memopt_model_read_weights(memopt_model *model, void *buffer);
size_t memopt_model_weight_bytes(const memopt_model *model);

const char *memopt_model_error(const memopt_model *model);
int memopt_model_num_inputs(const memopt_model *model);
int memopt_model_num_outputs(const memopt_model *model);
/* Name / byte size of input or output `index` (is_output selects). */
const char *memopt_model_tensor_name(const memopt_model *model, int is_output,
                                     int index);
size_t memopt_model_tensor_bytes(const memopt_model *model, int is_output,
                                 int index);

void memopt_model_destroy(memopt_model *model);

#ifdef __cplusplus
}
#endif

#endif /* MEMOPT_RUNTIME_MEMOPT_C_API_H */
