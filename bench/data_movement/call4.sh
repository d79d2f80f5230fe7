#!/bin/bash
# Fourth call (docs/gpu-benchmark.md, "Data movement and the f16 attention backward"): the
# kernel suite CUDA vs host with the balanced found_inf kernel, then the GPT-2 fp16 training
# step of PROGRAMS (train_gpt2_b8_fp16.cu) timed (--steps 0 --bench 10) and profiled
# (--steps 2 --profile), and the transpose timings.
# Usage: bash bench/data_movement/call4.sh   (PROGRAMS defaults to .dev-dm/programs)
set -u; R=$PWD; W=/tmp/w3; mkdir -p $W
CL=$(python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])')/lib
export LD_LIBRARY_PATH=$CL:${LD_LIBRARY_PATH:-}
nvcc -std=c++17 -O1 -arch=sm_90 -c ${PROGRAMS:-.dev-dm/programs}/train_gpt2_b8_fp16.cu -I$R/include -o $W/g.o > $W/cc.txt 2>&1 &
SKIP_PERF=1 SKIP_EXAMPLE=1 CUDA_ARCH=90 JOBS=14 bash scripts/gpu_check.sh /tmp/rt > $OUT/gpu_check.txt 2>&1; echo "gpu_check rc=$?"
grep -E "^FAIL|passed, " $OUT/gpu_check.txt | tail -5
cmake --build /tmp/rt -j 14 --target memopt_runtime_main memopt_runtime_driver memopt_runtime_common memopt_runtime_cuda > $W/b.txt 2>&1 || tail $W/b.txt
wait; B=/tmp/rt
nvcc -arch=sm_90 -L$B/cudnn-lib $W/g.o $B/libmemopt_runtime_main.a $B/libmemopt_runtime_driver.a $B/libmemopt_runtime_cuda.a $B/libmemopt_runtime_common.a -lcublasLt -lcudnn -o $W/g || tail $W/cc.txt
python3 -c "
import numpy as np; r=np.random.default_rng(1)
np.save('$W/i.npy', r.integers(0,50257,(8,512)).astype(np.int64)); np.save('$W/l.npy', r.integers(0,50257,(8,512)).astype(np.int64))"
timeout 40 $W/g --random-weights 1 --input input_ids=$W/i.npy --input labels=$W/l.npy --steps 0 --bench 10 | grep -E "bench:|memory:" | cut -c1-200
timeout 40 $W/g --random-weights 1 --input input_ids=$W/i.npy --input labels=$W/l.npy --steps 2 --profile 2>&1 | grep -E "^step|profile:|profile-kind" | head -8
$B/memopt-kernel-suite-cuda --perf transpose 2>&1 | tail -4
