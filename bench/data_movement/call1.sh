#!/bin/bash
# Data movement and the f16 attention backward on the GPU, first call (run from the repository
# root on the device machine; docs/gpu-benchmark.md, "Data movement"):
#   - exports the graphs the second call runs (inference: swin_t, gpt2, bert_base, llama_small
#     at their gpu_bench_precision batch; training: gpt2_b8 and vit_b_16_b32 of train_bench,
#     as train_gpt2_b8.onnx and train_vit_b_16_b32.onnx) into $OUT/graphs.tar.gz, in the
#     background (the call behind docs/ lost the inference GPT-2 graph to the training one of
#     the same name; fixed since);
#   - builds this tree's runtime, runs the kernel suite CUDA vs host (scripts/gpu_check.sh);
#   - builds the kernel suite a second time with the runtime files of OLD (a folder holding
#     the previous Kernels.cu and AttentionBackwardKernels.cu) and times the data-movement and
#     attention-backward cases with both (memopt-kernel-suite-cuda --perf).
# Usage: OLD=.dev-dm/old bash bench/data_movement/call1.sh
set -u
R=$PWD; W=/tmp/dm; mkdir -p $W/graphs $OUT
CL=$(python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])')/lib
export LD_LIBRARY_PATH=$CL:${LD_LIBRARY_PATH:-}
( for m in swin_t gpt2 bert_base llama_small; do
    python3 bench/gpu_bench_precision.py export-one $m $W/graphs > $W/export_$m.log 2>&1 &
  done
  # train_bench names its GPT-2 graph gpt2_b8 too: a folder of its own, prefixed in the tar.
  (cd bench && python3 train_bench.py export --out $W/train --only gpt2_b8 vit_b_16_b32 \
     > $W/export_train.log 2>&1)
  for f in $W/train/*.onnx; do cp $f $W/graphs/train_$(basename $f); done
  wait; echo "exports done $(date +%T)" ) &
EXPORTS=$!
start=$(date +%s)
SKIP_PERF=1 SKIP_EXAMPLE=1 CUDA_ARCH=90 JOBS=10 bash scripts/gpu_check.sh /tmp/rt-new > $OUT/gpu_check.txt 2>&1
echo "gpu_check rc=$? ($(( $(date +%s) - start )) s)"; grep -E "^FAIL|cases|passed|failed" $OUT/gpu_check.txt | tail -8
rm -rf /tmp/old-tree && mkdir -p /tmp/old-tree && cp -r lib include unittests test scripts /tmp/old-tree/
cp ${OLD:-.dev-dm/old}/*.cu /tmp/old-tree/lib/Runtime/Cuda/
(cd /tmp/old-tree && cmake -S lib/Runtime -B /tmp/rt-old -G Ninja -DCMAKE_BUILD_TYPE=Release \
   -DMEMOPT_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
   -DMEMOPT_CUDNN_INCLUDE=$(dirname $CL)/include -DMEMOPT_CUDNN_LIBRARY=/tmp/rt-new/cudnn-lib/libcudnn.so \
   > /tmp/old-cfg.txt 2>&1 && cmake --build /tmp/rt-old -j 10 --target memopt-kernel-suite-cuda > /tmp/old-build.txt 2>&1) \
  || { echo "old build failed"; tail -20 /tmp/old-build.txt /tmp/old-cfg.txt; }
for f in transpose slice attention_bwd; do
  for t in new old; do
    [ -x /tmp/rt-$t/memopt-kernel-suite-cuda ] || continue
    /tmp/rt-$t/memopt-kernel-suite-cuda --perf $f > $OUT/perf_${f}_$t.txt 2>&1
  done
done
for f in $OUT/perf_*_new.txt; do o=${f/_new/_old}; echo "== $(basename $f)"; paste -d'|' <(cut -c1-110 $f) <(cut -c40-110 $o 2>/dev/null); done
wait $EXPORTS
for f in $W/export_*.log; do tail -n 2 $f | cut -c1-300; done
(cd $W/graphs && tar czf $OUT/graphs.tar.gz *.onnx && ls -la $W/graphs | head -30)
