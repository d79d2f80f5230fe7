#!/bin/bash
# Convolution algorithm choice on the GPU (docs/gpu-benchmark.md, "Convolution algorithm
# choice"): the kernel suite (CUDA vs host), then ResNet-18/50 inference (b32, fp16 and tf32,
# --layout auto) and ResNet-50 b64 training steps (fp16 and tf32, SGD momentum) timed with
# MEMOPT_CONV_LOG=1, the training steps profiled, and PyTorch's ResNet-50 b64 training step.
#
# The suite conv_algo of bench/suites.toml: `python3 bench/run.py prepare --suite conv_algo
# --step sources` fills the carry (.dev-bench/conv_algo: src/, this folder's scripts; the
# programs, memopt-compile --emit source outputs, go into programs/: flags in
# d9a817f:bench/results/conv_algo_gpu/README.md), then on the device `python3 bench/run.py
# device --suite conv_algo` runs this script with the device set-up (the wheels' cuDNN on
# LD_LIBRARY_PATH: bench/device_env.py). Results: $OUT/logs.tgz and the driver's tee.
D=$PWD/${CARRY:-.dev-conv}; W=/tmp/w; B=/tmp/memopt-runtime-gpu; mkdir -p $W $OUT/logs
for f in $D/programs/*.cu; do n=$(basename $f .cu)
  nvcc -std=c++17 -O1 -arch=sm_90 -c $f -I$D/src/include -o $W/$n.o > $OUT/logs/build_$n.txt 2>&1 &
done
SKIP_PERF=1 SKIP_EXAMPLE=1 CUDA_ARCH=90 JOBS=12 bash $D/src/scripts/gpu_check.sh $B > $OUT/logs/gpu_check.txt 2>&1
echo "gpu_check rc=$?"; grep -E "cases|mismatch|FAIL|passed|failed" $OUT/logs/gpu_check.txt | tail -6
cmake --build $B --target memopt_runtime_main memopt_runtime_cuda memopt_runtime_driver > $OUT/logs/rt.txt 2>&1 || tail -20 $OUT/logs/rt.txt
wait
for f in $D/programs/*.cu; do n=$(basename $f .cu)
  nvcc -arch=sm_90 -L$B/cudnn-lib $W/$n.o $B/libmemopt_runtime_main.a $B/libmemopt_runtime_driver.a \
    $B/libmemopt_runtime_cuda.a $B/libmemopt_runtime_common.a -lcublasLt -lcudnn -o $W/$n >> $OUT/logs/build_$n.txt 2>&1 || tail -5 $OUT/logs/build_$n.txt
done
python3 -c "
import numpy as np; r=np.random.default_rng(1)
np.save('$W/x32.npy', r.standard_normal((32,3,224,224)).astype(np.float32))
np.save('$W/x64.npy', r.standard_normal((64,3,224,224)).astype(np.float32))
np.save('$W/y64.npy', r.integers(0,1000,(64,)).astype(np.int64))"
for n in resnet50_b32_fp16_auto resnet50_b32_tf32_auto resnet18_b32_fp16_auto resnet18_b32_tf32_auto; do
  MEMOPT_CONV_LOG=1 timeout 90 $W/$n --random-weights 1 --input input=$W/x32.npy --bench 30 > $OUT/logs/$n.out 2> $OUT/logs/$n.conv
  echo "$n rc=$? $(grep -E 'bench:|memory:' $OUT/logs/$n.out | tr '\n' ' ')"
done
for n in train_resnet50_b64_fp16 train_resnet50_b64_tf32; do
  MEMOPT_CONV_LOG=1 timeout 150 $W/$n --random-weights 1 --input input=$W/x64.npy --input labels=$W/y64.npy --steps 0 --bench 10 > $OUT/logs/$n.out 2> $OUT/logs/$n.conv
  echo "$n rc=$? $(grep -E 'bench:|memory:' $OUT/logs/$n.out | tr '\n' ' ')"
  timeout 100 $W/$n --random-weights 1 --input input=$W/x64.npy --input labels=$W/y64.npy --steps 3 --profile > $OUT/logs/$n.profile 2>&1
  grep -E "^step|profile:|profile-kind" $OUT/logs/$n.profile | head -16
done
python3 $D/torch_resnet50_train.py 2>&1 | grep torch
python3 $D/summarize.py $OUT/logs/*.conv
cd $OUT && tar czf logs.tgz logs && rm -rf logs
