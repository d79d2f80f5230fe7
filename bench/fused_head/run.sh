#!/bin/bash
# Device side of bench/fused_head/prepare.sh (from the repository root on the GPU machine):
# the kernel suite CUDA vs host (its linear_cross_entropy_* cases check the CUDA kernels), the
# fused head's perf case at GPT-2's shape, GPT-2's training step with the head fused and
# separate (fp16, tf32) and under 25% / 50% budgets at C = 3, and the tied LM's first three
# steps on CUDA against the host backend.
# Usage: CARRY=.dev-head bash bench/fused_head/run.sh
set -u
D=${CARRY:-.dev-head}; W=/tmp/head; mkdir -p $W $OUT
CL=$(python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])')/lib
export LD_LIBRARY_PATH=$CL:${LD_LIBRARY_PATH:-}
for f in $D/*.cu; do n=$(basename $f .cu)
  nvcc -std=c++17 -O1 -arch=sm_90 -c $f -Iinclude -o $W/$n.o > $W/cc_$n.txt 2>&1 &
done
SKIP_PERF=1 SKIP_EXAMPLE=1 CUDA_ARCH=90 JOBS=12 bash scripts/gpu_check.sh /tmp/rt > $OUT/gpu_check.txt 2>&1
echo "gpu_check rc=$?"; grep -E "^FAIL|linear_cross|passed, " $OUT/gpu_check.txt | tail -12
cmake --build /tmp/rt -j 14 --target memopt_runtime_main memopt_runtime_driver memopt_runtime_common memopt_runtime_cuda > $W/rt.txt 2>&1 || tail $W/rt.txt
cmake -S lib/Runtime -B /tmp/rt-host -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMOPT_ENABLE_CUDA=OFF > /dev/null && \
  cmake --build /tmp/rt-host -j 14 --target memopt_runtime_main memopt_runtime_driver memopt_runtime_common memopt_runtime_host > $W/rth.txt 2>&1 || tail $W/rth.txt
wait; B=/tmp/rt; H=/tmp/rt-host
for f in $D/*.cu; do n=$(basename $f .cu)
  nvcc -arch=sm_90 -L$B/cudnn-lib $W/$n.o $B/libmemopt_runtime_main.a $B/libmemopt_runtime_driver.a \
    $B/libmemopt_runtime_cuda.a $B/libmemopt_runtime_common.a -lcublasLt -lcudnn -o $W/$n || tail -5 $W/cc_$n.txt
done
for f in $D/*_host.cpp; do n=$(basename $f .cpp)
  g++ -std=c++17 -O1 $f -Iinclude $H/libmemopt_runtime_main.a $H/libmemopt_runtime_driver.a \
    $H/libmemopt_runtime_host.a $H/libmemopt_runtime_common.a -lpthread -o $W/$n || echo "host build $n failed"
done
$B/memopt-kernel-suite-cuda --perf linear_cross_entropy 2>&1 | tail -2
python3 -c "
import numpy as np; r=np.random.default_rng(1)
np.save('$W/i.npy', r.integers(0,50257,(8,512)).astype(np.int64)); np.save('$W/l.npy', r.integers(0,50257,(8,512)).astype(np.int64))
y = r.integers(0,4099,(4,32)).astype(np.int64); y[0,1] = -100
np.save('$W/ti.npy', r.integers(0,4099,(4,32)).astype(np.int64)); np.save('$W/tl.npy', y)"
for n in head_on_fp16 head_off_fp16 head_on_tf32 head_off_tf32 remat50_c3_tf32 remat25_c3_tf32; do
  [ -x $W/$n ] || continue
  timeout 60 $W/$n --random-weights 1 --input input_ids=$W/i.npy --input labels=$W/l.npy --steps 0 --bench 10 > $W/$n.out 2>&1
  echo "$n rc=$? $(grep -E 'bench:|memory:' $W/$n.out | tr '\n' ' ' | cut -c1-220)"
done
[ -x $W/head_on_fp16 ] && timeout 60 $W/head_on_fp16 --random-weights 1 --input input_ids=$W/i.npy \
  --input labels=$W/l.npy --steps 2 --profile 2>&1 | grep -E "profile-kind" | head -8
for p in fp32 fp16; do for h in on off; do for t in cuda host; do
  n=tiny_${h}_${p}_$t; x=$W/$n; [ $t = host ] && x=$W/${n}
  [ -x $x ] && $x --random-weights 7 --input ids=$W/ti.npy --input labels=$W/tl.npy --steps 3 | grep "^step" | tr '\n' ' ' | sed "s/^/$n: /"; echo
done; done; done
(cd $W && tar czf $OUT/head_runs.tar.gz *.out)
