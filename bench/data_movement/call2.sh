#!/bin/bash
# Second call (docs/gpu-benchmark.md, "Data movement"): builds this tree's runtime and one
# with OLD's Kernels.cu and AttentionBackwardKernels.cu (the previous commit's), links every
# program of PROGRAMS (memopt-compile --emit source outputs) against both and times them
# (inference: --random-weights 1 --bench 30, CUDA-graph replays; training: --steps 0 --bench
# 10), then profiles the GPT-2 training step with the new runtime (--steps 2 --profile).
# Usage: OLD=.dev-dm/old PROGRAMS=.dev-dm/programs bash bench/data_movement/call2.sh
set -u
R=$PWD; W=/tmp/dm2; mkdir -p $W $OUT
P=${PROGRAMS:-.dev-dm/programs}
CL=$(python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])')/lib
export LD_LIBRARY_PATH=$CL:${LD_LIBRARY_PATH:-}
mkdir -p $W/cudnn && ln -sf $(ls $CL/libcudnn.so* | head -1) $W/cudnn/libcudnn.so
rm -rf /tmp/old-tree && mkdir -p /tmp/old-tree && cp -r lib include unittests test scripts /tmp/old-tree/
cp ${OLD:-.dev-dm/old}/*.cu /tmp/old-tree/lib/Runtime/Cuda/
T="memopt_runtime_main memopt_runtime_driver memopt_runtime_common memopt_runtime_cuda"
for t in new old; do
  src=$R; [ $t = old ] && src=/tmp/old-tree
  ( cmake -S $src/lib/Runtime -B $W/rt-$t -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMOPT_ENABLE_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DMEMOPT_CUDNN_INCLUDE=$(dirname $CL)/include \
      -DMEMOPT_CUDNN_LIBRARY=$W/cudnn/libcudnn.so > $W/cfg-$t.txt 2>&1 &&
    cmake --build $W/rt-$t -j 7 --target $T > $W/build-$t.txt 2>&1 || { echo "runtime $t failed"; tail -20 $W/build-$t.txt; } ) &
done
for f in $P/*.cu; do n=$(basename $f .cu)
  nvcc -std=c++17 -O1 -arch=sm_90 -c $f -I$R/include -o $W/$n.o > $W/cc_$n.txt 2>&1 &
done
wait; echo "built $(date +%T)"
for t in new old; do B=$W/rt-$t
  for f in $P/*.cu; do n=$(basename $f .cu)
    nvcc -arch=sm_90 -L$W/cudnn $W/$n.o $B/libmemopt_runtime_main.a $B/libmemopt_runtime_driver.a \
      $B/libmemopt_runtime_cuda.a $B/libmemopt_runtime_common.a -lcublasLt -lcudnn -o $W/$n.$t > $W/ld_$n.$t.txt 2>&1 || tail -5 $W/ld_$n.$t.txt &
  done
done
wait
python3 -c "
import numpy as np; r=np.random.default_rng(1)
np.save('$W/x32.npy', r.standard_normal((32,3,224,224)).astype(np.float32))
np.save('$W/y32.npy', r.integers(0,1000,(32,)).astype(np.int64))
np.save('$W/ids_gpt2.npy', r.integers(0,50257,(8,512)).astype(np.int64))
np.save('$W/lab_gpt2.npy', r.integers(0,50257,(8,512)).astype(np.int64))
np.save('$W/ids_bert.npy', r.integers(0,30522,(8,512)).astype(np.int64))
np.save('$W/ids_llama.npy', r.integers(0,32000,(8,512)).astype(np.int64))"
args() { case $1 in
  train_gpt2*) echo "--input input_ids=$W/ids_gpt2.npy --input labels=$W/lab_gpt2.npy --steps 0 --bench 10";;
  train_vit*) echo "--input input=$W/x32.npy --input labels=$W/y32.npy --steps 0 --bench 10";;
  bert*) echo "--input input_ids=$W/ids_bert.npy --bench 30";;
  llama*) echo "--input input_ids=$W/ids_llama.npy --bench 30";;
  *) echo "--input input=$W/x32.npy --bench 30";; esac; }
for f in $P/*.cu; do n=$(basename $f .cu)
  for t in new old; do
    timeout 100 $W/$n.$t --random-weights 1 $(args $n) > $OUT/$n.$t.out 2>&1
    echo "$n $t rc=$? $(grep -E 'bench:|memory:' $OUT/$n.$t.out | tr '\n' ' ' | cut -c1-300)"
  done
done
n=train_gpt2_b8_fp16
[ -x $W/$n.new ] && timeout 90 $W/$n.new --random-weights 1 --input input_ids=$W/ids_gpt2.npy \
  --input labels=$W/lab_gpt2.npy --steps 2 --profile > $OUT/$n.profile 2>&1
grep -E "profile" $OUT/$n.profile | head -30
