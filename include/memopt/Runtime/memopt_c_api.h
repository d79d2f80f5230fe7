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
 * weights from `weights_path` (a weight file, checked against the program
 * before the device is touched, then streamed to the device in chunks), or
 * fills them on the device from `random_seed` when weights_path is NULL
 * (MEMOPT_VERBOSE=1 prints the load time on stderr). Returns NULL on failure
 * and, when `error` is non-NULL, a message in a buffer of `error_size` bytes.
 */
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
/* A program compiled with --data-parallel N runs its N ranks as threads of
 * this process: memopt_model_create starts them (each with its own arena
 * and weight region), and each memopt_model_train_step call takes N
 * micro-batches per input back to back (rank r reads the r-th; the global
 * batch split along axis 0) and writes the mean of the ranks' losses. The
 * other calls read rank 0 (write_weights / load_weights write every rank,
 * and are refused when the ranks hold different optimizer-state shards).
 * Returns the number of ranks (1 for any other program). */
int memopt_model_ranks(const memopt_model *model);
/* The global rank of this process's first rank: 0 when the ranks are
 * threads of this process (the host backend); RANK of the launcher's
 * environment when each rank is a process (the CUDA backend, launched
 * torchrun-style: RANK, WORLD_SIZE, LOCAL_RANK), whose
 * memopt_model_train_step then trains on the RANK-th slice of the global
 * batch. */
int memopt_model_rank(const memopt_model *model);
/* Micro-batches per optimizer step (1 unless compiled with --accumulate). */
int64_t memopt_model_accumulation_steps(const memopt_model *model);
/* Copies the weight region (the weight file's format, memopt_model_weight_bytes
 * bytes) into `buffer`, e.g. to save trained weights. Returns 0 on success. */
int memopt_model_read_weights(memopt_model *model, void *buffer);
size_t memopt_model_weight_bytes(const memopt_model *model);

/* Replaces the weight region with `buffer` (memopt_model_weight_bytes
 * bytes, as memopt_model_read_weights gives it). Returns 0 on success. */
int memopt_model_write_weights(memopt_model *model, const void *buffer);
/* Loads a weight file (OUT.weights, or a region saved by
 * memopt_model_save_weights or the executable's --save-weights), checked
 * against the program's weight table as memopt_model_create checks it,
 * then streamed in. Returns 0 on success; a file refused by the checks
 * changes nothing. */
int memopt_model_load_weights(memopt_model *model, const char *path);
/* Writes the weight region to `path` as a weight file (with its trailer,
 * so that only this program's layout loads it again). Atomic. */
int memopt_model_save_weights(memopt_model *model, const char *path);
/* Training programs: writes the trained ONNX model to `output_path`: the
 * template memopt-compile --train wrote (OUT.onnx-template) plus the
 * trained parameters (the executable's --save). Atomic. */
int memopt_model_save_onnx(memopt_model *model, const char *template_path,
                           const char *output_path);
/* memopt_model_save_onnx with the initializers' place chosen: external_data
 * 1 writes them as ONNX external data in `output_path`.data beside the
 * model, -1 inline, 0 (what memopt_model_save_onnx does) inline unless the
 * model would pass 1.5 GiB (protobuf cannot read a file of 2 GiB). The
 * tensors are read from the device one at a time. */
int memopt_model_save_onnx_external(memopt_model *model,
                                    const char *template_path,
                                    const char *output_path, int external_data);

/* One run on caller-owned buffers, each in host or device memory (CUDA:
 * device pointers of the model's GPU, or host pointers), ordered on the
 * caller's CUDA `stream` (a cudaStream_t; NULL = the legacy default stream):
 * the run starts after the work queued on `stream` so far and later work on
 * `stream` starts after the outputs are written, with no host
 * synchronization and no copy through the host. The host backend ignores
 * `stream`. Returns 0 on success (the error may only show at a later call
 * for asynchronous CUDA failures). */
int memopt_model_run_buffers(memopt_model *model, const void *const *inputs,
                             void *const *outputs, void *stream);

/* Waits until the work the model queued has finished (after a
 * memopt_model_run_buffers into host memory). Returns 0 on success. */
int memopt_model_synchronize(memopt_model *model);

/* What a program's input, output or weight is. `dtype` takes the runtime's
 * DType values: 0 f32, 1 f16, 2 bf16, 3 f64, 4 i64, 5 i32, 6 i8, 7 u8,
 * 8 bool (one byte per element). */
enum {
  MEMOPT_TENSOR_INPUT = 0,
  MEMOPT_TENSOR_OUTPUT = 1,
  MEMOPT_TENSOR_WEIGHT = 2
};
typedef struct memopt_tensor_info {
  const char *name;
  int32_t dtype;
  int32_t rank;
  const int64_t *shape; /* rank entries, owned by the program */
  size_t bytes;
  /* Inputs and outputs: byte offset in the arena, or -1 for a buffer of its
   * own. Weights: byte offset in the weight region. */
  int64_t offset;
  /* Weights: 0 constant, 1 parameter, 2 optimizer state, 3 learning rate,
   * 4 step count, 5 statistic, 6 gradient accumulator, 7 micro-step,
   * 8 random key (WeightRole in include/memopt/Runtime/Program.h). */
  int32_t role;
} memopt_tensor_info;
/* Fills `info` for tensor `index` of `kind` (MEMOPT_TENSOR_*). Returns 0, or
 * non-zero for an index out of range. */
int memopt_model_tensor_info(const memopt_model *model, int kind, int index,
                             memopt_tensor_info *info);
int memopt_model_num_weights(const memopt_model *model);
/* The program as compiled: "host" or "cuda", its name, arena bytes, and
 * whether it is a training step (and its compiled learning rate). */
const char *memopt_model_backend(const memopt_model *model);
const char *memopt_model_name(const memopt_model *model);
int64_t memopt_model_arena_bytes(const memopt_model *model);
int memopt_model_is_training(const memopt_model *model);
float memopt_model_compiled_learning_rate(const memopt_model *model);

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
