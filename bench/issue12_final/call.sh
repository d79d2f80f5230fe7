#!/bin/bash
# Issue 12's last re-measure on one GPU (run from the repository root on the device, carry
# .dev-i12 from bench/issue12_final/prepare.sh):
#   phase A: torch.compile warm-ups of the four models (gpu_bench_precision.py torch-one
#            --warm-only, in parallel), this tree's runtime and kernel suite (gpu_check.sh),
#            the eight programs linked;
#   phase B, the GPU alone: memopt's programs (--random-weights 1 --bench 30, CUDA-graph
#            replays; GPT-2 fp16 once more with --profile), then PyTorch eager fp32 (default
#            settings), autocast fp16 eager and torch.compile, one model at a time.
# Everything lands in $OUT/issue12.tar.gz.
set -u
D=${CARRY:-.dev-i12}; W=/tmp/i12; O=$W/out; mkdir -p $W $O $OUT
export PYTHONUNBUFFERED=1
CL=$(python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])')/lib
export LD_LIBRARY_PATH=$CL:${LD_LIBRARY_PATH:-}
for m in swin_t gpt2 bert_base llama_small; do
  (cd bench && timeout 280 python3 gpu_bench_precision.py torch-one $m --out $W/warm_$m.json \
     --warm-only > $W/warm_$m.log 2>&1) &
done
for f in $D/*.cu; do n=$(basename $f .cu)
  nvcc -std=c++17 -O1 -arch=sm_90 -c $f -Iinclude -o $W/$n.o > $W/cc_$n.txt 2>&1 &
done
SKIP_PERF=1 SKIP_EXAMPLE=1 CUDA_ARCH=90 JOBS=8 bash scripts/gpu_check.sh /tmp/rt > $O/gpu_check.txt 2>&1
echo "gpu_check rc=$?"; grep -E "^FAIL|gemm_odd|passed, " $O/gpu_check.txt | tail -6
cmake --build /tmp/rt -j 14 --target memopt_runtime_main memopt_runtime_driver memopt_runtime_common memopt_runtime_cuda > $W/rt.txt 2>&1 || tail $W/rt.txt
wait; echo "phase A done $(date +%T)"
B=/tmp/rt
for f in $D/*.cu; do n=$(basename $f .cu)
  nvcc -arch=sm_90 -L$B/cudnn-lib $W/$n.o $B/libmemopt_runtime_main.a $B/libmemopt_runtime_driver.a \
    $B/libmemopt_runtime_cuda.a $B/libmemopt_runtime_common.a -lcublasLt -lcudnn -o $W/$n || tail -5 $W/cc_$n.txt
done
python3 -c "
import numpy as np; r=np.random.default_rng(1)
np.save('$W/x.npy', r.standard_normal((32,3,224,224)).astype(np.float32))
np.save('$W/gpt2.npy', r.integers(0,50257,(8,512)).astype(np.int64))
np.save('$W/bert.npy', r.integers(0,30522,(8,512)).astype(np.int64))
np.save('$W/llama.npy', r.integers(0,32000,(8,512)).astype(np.int64))"
inputs() { case $1 in swin*) echo "--input input=$W/x.npy";; gpt2*) echo "--input input_ids=$W/gpt2.npy";;
  bert*) echo "--input input_ids=$W/bert.npy";; llama*) echo "--input input_ids=$W/llama.npy";; esac; }
for f in $D/*.cu; do n=$(basename $f .cu)
  [ -x $W/$n ] || continue
  timeout 60 $W/$n --random-weights 1 $(inputs $n) --bench 30 > $O/$n.out 2>&1
  echo "$n rc=$? $(grep -E 'bench:|memory:' $O/$n.out | tr '\n' ' ' | cut -c1-200)"
done
timeout 60 $W/gpt2_b8_fp16 --random-weights 1 $(inputs gpt2) --bench 3 --profile > $O/gpt2_b8_fp16.profile 2>&1
grep -E "profile-(kind|op)" $O/gpt2_b8_fp16.profile | head -12
for m in swin_t gpt2 bert_base llama_small; do
  (cd bench && timeout 120 python3 gpu_bench_precision.py torch-one $m --out $O/torch_$m.json --runs 30 \
     > $O/torch_$m.log 2>&1); echo "torch $m rc=$?"; tail -4 $O/torch_$m.log | cut -c1-200
done
(cd $O && tar czf $OUT/issue12.tar.gz .)
