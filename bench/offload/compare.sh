#!/usr/bin/env bash
# --offload optimizer on a GPU: the plain and the offloaded program of one model, their losses
# (must agree to the last printed digit in fp32: the CPU update is the host backend's
# arithmetic, the plain step's is the CUDA kernel's, so they may differ in the last bits of
# the weights after a few steps), their step times and device memory.
#   bench/offload/compare.sh [BUILD_DIR] [WIDTH] [LAYERS] [PRECISION]
# Defaults: build, an MLP of 8 layers of 4096 x 4096 (134M parameters: AdamW's state is
# 1.07 GB), bf16. The report's weights_bytes drops by the moments, host_state_bytes holds them.
set -euo pipefail
BUILD=${1:-build}
WIDTH=${2:-4096}
LAYERS=${3:-8}
PRECISION=${4:-bf16}
WORK=$(mktemp -d /tmp/offload.XXXXXX)
python3 - "$WORK" "$WIDTH" "$LAYERS" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
work, width, layers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
inits, nodes, x = [], [], "x"
for i in range(layers):
    w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
    inits.append(numpy_helper.from_array(w, f"fc{i}.weight"))
    nodes.append(helper.make_node("Gemm", [x, f"fc{i}.weight"], [f"h{i}"], transB=1,
                                  name=f"fc{i}"))
    nodes.append(helper.make_node("Relu", [f"h{i}"], [f"r{i}"], name=f"relu{i}"))
    x = f"r{i}"
head = (rng.standard_normal((16, width)) / np.sqrt(width)).astype(np.float32)
inits.append(numpy_helper.from_array(head, "head.weight"))
nodes.append(helper.make_node("Gemm", [x, "head.weight"], ["logits"], transB=1, name="head"))
graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info(
    "x", TensorProto.FLOAT, [256, width])], [helper.make_tensor_value_info(
    "logits", TensorProto.FLOAT, [256, 16])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
onnx.save(model, f"{work}/mlp.onnx", save_as_external_data=True)
np.save(f"{work}/x.npy", rng.standard_normal((1024, width)).astype(np.float32))
np.save(f"{work}/y.npy", rng.integers(0, 16, 1024).astype(np.int64))
PY
for OFFLOAD in none optimizer; do
  "$BUILD/bin/memopt-compile" "$WORK/mlp.onnx" --train --optimizer adamw --lr 1e-4 \
      --precision "$PRECISION" --target cuda --offload "$OFFLOAD" -o "$WORK/$OFFLOAD" \
      --report "$WORK/$OFFLOAD.json" --quiet
  echo "== --offload $OFFLOAD"
  "$WORK/$OFFLOAD" --input "x=$WORK/x.npy" --input "labels=$WORK/y.npy" --steps 5 | grep '^step'
  "$WORK/$OFFLOAD" --input "x=$WORK/x.npy" --input "labels=$WORK/y.npy" --steps 0 --bench 20 \
      | tail -3
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('weights_bytes', \
r['weights_bytes'], 'host_state_bytes', r.get('host_state_bytes', 0), 'arena_bytes', \
r['arena_bytes'])" "$WORK/$OFFLOAD.json"
done
echo "(files in $WORK)"
