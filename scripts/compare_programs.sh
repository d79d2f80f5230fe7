#!/usr/bin/env bash
# Runs the host and CUDA builds of memopt programs with the same random
# weights and inputs on a GPU machine and compares their outputs (max |cuda -
# host| / max |host| per output; with an attention_mask input, also on the
# token and the padding positions apart). For the device machine, which has a
# GPU but no MLIR: build the programs where memopt is built, e.g.
#   memopt-compile MODEL.onnx -o DIR/NAME_host --target host
#   memopt-compile MODEL.onnx -o DIR/NAME_cuda --target cuda --arch sm_90
# (the .weights files are not needed: --random-weights), gzip the CUDA
# executables to carry them, and write DIR/NAME.args with the program's
# arguments, one per line (--input NAME=inputs/FILE.npy).
# Usage: scripts/compare_programs.sh DIR [extra program flags...]
set -uo pipefail
DIR=$(cd "$1" && pwd)
shift
cd "$DIR" || exit 1
CUDNN_DIR=$(python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])' 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${CUDNN_DIR:+$CUDNN_DIR/lib:}${LD_LIBRARY_PATH:-}
for f in *_cuda.gz; do [ -e "$f" ] && gunzip -f "$f"; done
status=0
for args in *.args; do
  name=${args%.args}
  mapfile -t flags < "$args"
  for variant in host cuda cuda_fused; do
    exe=./${name}_${variant%_fused}
    extra=()
    [ "$variant" = cuda_fused ] && extra=(--fused-attention)
    rm -rf "out/$name/$variant" && mkdir -p "out/$name/$variant"
    chmod +x "$exe"
    if ! "$exe" --random-weights 7 "${flags[@]}" "${extra[@]}" "$@" \
        --output-dir "out/$name/$variant" > "out/$name/$variant.log" 2>&1; then
      echo "FAIL $name $variant:"; tail -5 "out/$name/$variant.log"; status=1
    fi
  done
done
python3 - <<'PY' || status=1
import glob, os
import numpy as np
for name in sorted(os.listdir("out")):
    args = open(f"{name}.args").read()
    mask = None
    if "attention_mask=" in args:
        path = args.split("attention_mask=")[1].split()[0]
        mask = np.load(path).astype(bool)
    for path in sorted(glob.glob(f"out/{name}/host/*.npy")):
        out = os.path.basename(path)
        host = np.load(path).astype(np.float64)
        scale = max(float(np.max(np.abs(host))) if host.size else 0.0, 1e-30)
        for variant in ("cuda", "cuda_fused"):
            other = f"out/{name}/{variant}/{out}"
            if not os.path.exists(other):
                continue
            diff = np.abs(np.load(other).astype(np.float64) - host)
            line = f"{name:12s} {variant:10s} {out:24s} rel {np.max(diff) / scale:.2e}"
            if mask is not None and diff.shape[:2] == mask.shape:
                line += (f"  tokens {np.max(diff[mask]) / scale:.2e}"
                         f"  padding {np.max(diff[~mask], initial=0) / scale:.2e}")
            print(line)
PY
exit $status
