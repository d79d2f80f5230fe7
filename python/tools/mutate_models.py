"""Structural mutations of ONNX models: the inputs a new user's tooling produces by mistake.

Each mutation changes one thing of a valid model the way issue 13 lists them: a node's type
changed, an input renamed, emptied, dropped or added, an attribute's value, type or name altered,
an initializer's dims altered, a node deleted, the opset changed, a graph input's shape altered.
`mutations(model, count, seed)` yields (description, mutated ModelProto) pairs, deterministic for
a seed; `classify(returncode, stderr)` says whether memopt-compile handled one cleanly.

Run by hand for a long campaign (every model of the zoo, thousands of mutations):

    python3 python/tools/mutate_models.py --build build --count 2000 --seed 7 MODEL.onnx ...

Crashing inputs are written to --crash-dir (default ./mutation-crashes) for a regression test.
"""

import argparse
import concurrent.futures
import copy
import os
import random
import subprocess
import sys
import tempfile

import onnx
from onnx import AttributeProto, TensorProto

# Op types a node's type is changed to: memopt's common ops with other arities and attributes.
OP_TYPES = ["Add", "Gemm", "MatMul", "Conv", "Relu", "Reshape", "Transpose", "Concat", "Softmax",
            "Gather", "Slice", "ReduceMean", "Split", "Where", "LayerNormalization", "MaxPool",
            "BatchNormalization", "Unsqueeze", "Cast", "Pad", "Resize", "Clip", "Expand", "Mul",
            "Erf", "Identity", "Flatten", "Squeeze", "ConstantOfShape", "Range", "Sum", "TopK"]

# Signals of a crash in a tool's stderr, besides death by a signal.
CRASH_MARKERS = ("Stack dump", "PLEASE submit a bug report", "LLVM ERROR", "Assertion",
                 "terminate called", "AddressSanitizer", "runtime error:", "Segmentation fault")


def _node_name(graph, index):
    node = graph.node[index]
    return node.name or f"{node.op_type}_{index}"


def _values(graph):
    names = [v.name for v in graph.input] + [t.name for t in graph.initializer]
    for node in graph.node:
        names += [o for o in node.output if o]
    return names


def _mutate_attribute(attr, rng):
    kind = rng.randrange(6)
    if kind == 0 and attr.type == AttributeProto.INT:
        attr.i = rng.choice([-(2**62), -7, -1, 0, 3, 1000, 2**40])
    elif kind == 1 and attr.type == AttributeProto.INTS:
        values = list(attr.ints) or [1]
        choice = rng.randrange(3)
        if choice == 0:
            values.append(rng.choice([-1, 0, 99]))
        elif choice == 1:
            values = values[:-1]
        else:
            values[rng.randrange(len(values))] = rng.choice([-(2**40), -5, 0, 77, 2**33])
        del attr.ints[:]
        attr.ints.extend(values)
    elif kind == 2 and attr.type == AttributeProto.FLOAT:
        attr.f = rng.choice([float("nan"), float("inf"), -1e30, 0.0])
    elif kind == 3:
        # Same name, another kind: an INT where a list is expected and so on.
        value = attr.i if attr.type == AttributeProto.INT else 3
        attr.Clear()
        attr.name = attr.name or "axis"
        attr.type = rng.choice([AttributeProto.INTS, AttributeProto.FLOAT, AttributeProto.STRING])
        if attr.type == AttributeProto.INTS:
            attr.ints.extend([value, value])
        elif attr.type == AttributeProto.FLOAT:
            attr.f = float(value)
        else:
            attr.s = b"bogus"
    elif kind == 4:
        attr.name = rng.choice(["axis", "perm", "kernel_shape", "bogus_attribute", ""])
    else:
        attr.type = rng.choice([AttributeProto.UNDEFINED, AttributeProto.GRAPH,
                                AttributeProto.TENSOR])
    return f"attribute '{attr.name}' altered"


def mutate(model, rng):
    """Applies one random structural mutation to `model` (in place); returns its description."""
    graph = model.graph
    kind = rng.choice(["op_type", "rename_input", "empty_input", "drop_input", "add_input",
                       "attribute", "drop_attribute", "add_attribute", "initializer_dims",
                       "delete_node", "opset", "input_shape", "duplicate_output"])
    if kind == "opset":
        entry = next((o for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
        if entry is None:
            return "no default opset"
        entry.version = rng.choice([1, 7, 11, 12, 13, 15, 16, 18, 19, 21, 22, 99])
        return f"opset changed to {entry.version}"
    if kind == "initializer_dims" and graph.initializer:
        tensor = rng.choice(graph.initializer)
        dims = list(tensor.dims)
        choice = rng.randrange(4)
        if choice == 0 and dims:
            dims[rng.randrange(len(dims))] += rng.choice([-1, 1, 7])
        elif choice == 1:
            dims.append(rng.choice([0, 1, 2]))
        elif choice == 2 and dims:
            dims.pop()
        else:
            dims = [rng.choice([-1, 0, 2**31])] + dims
        del tensor.dims[:]
        tensor.dims.extend(dims)
        return f"initializer '{tensor.name}' dims -> {dims}"
    if kind == "input_shape" and graph.input:
        value = rng.choice(graph.input)
        shape = value.type.tensor_type.shape
        if shape.dim:
            dim = shape.dim[rng.randrange(len(shape.dim))]
            dim.dim_value = rng.choice([0, 1, 3, 10**12])
        else:
            shape.dim.add().dim_value = 5
        return f"graph input '{value.name}' shape altered"
    if not graph.node:
        return "no nodes"
    index = rng.randrange(len(graph.node))
    node = graph.node[index]
    where = f"node '{_node_name(graph, index)}'"
    if kind == "op_type":
        node.op_type = rng.choice(OP_TYPES)
        return f"{where} type -> {node.op_type}"
    if kind == "rename_input" and node.input:
        i = rng.randrange(len(node.input))
        node.input[i] = rng.choice(["no_such_value"] + _values(graph))
        return f"{where} input {i} -> '{node.input[i]}'"
    if kind == "empty_input" and node.input:
        i = rng.randrange(len(node.input))
        node.input[i] = ""
        return f"{where} input {i} emptied"
    if kind == "drop_input" and node.input:
        i = rng.randrange(len(node.input))
        del node.input[i]
        return f"{where} input {i} dropped"
    if kind == "add_input":
        node.input.append(rng.choice(_values(graph) or ["x"]))
        return f"{where} extra input"
    if kind == "attribute" and node.attribute:
        return f"{where} " + _mutate_attribute(rng.choice(node.attribute), rng)
    if kind == "drop_attribute" and node.attribute:
        attr = rng.choice(node.attribute)
        node.attribute.remove(attr)
        return f"{where} attribute '{attr.name}' dropped"
    if kind == "add_attribute":
        attr = node.attribute.add()
        attr.name = rng.choice(["axis", "axes", "perm", "to", "alpha", "mode", "bogus"])
        attr.type = AttributeProto.INT
        attr.i = rng.choice([-3, 0, 1, 5, 2**40])
        return f"{where} attribute '{attr.name}' added"
    if kind == "duplicate_output" and node.output:
        node.output[0] = rng.choice(_values(graph) or ["x"])
        return f"{where} output 0 -> '{node.output[0]}'"
    del graph.node[index]
    return f"{where} deleted"


def mutations(model, count, seed):
    """`count` mutated copies of `model`; some carry two mutations."""
    rng = random.Random(seed)
    for _ in range(count):
        mutated = copy.deepcopy(model)
        descriptions = [mutate(mutated, rng)]
        if rng.random() < 0.25:
            descriptions.append(mutate(mutated, rng))
        yield "; ".join(descriptions), mutated


def classify(returncode, stderr):
    """'ok' (compiled), 'clean' (one clear error, non-zero exit) or 'crash'."""
    if returncode < 0 or returncode > 1 or any(m in stderr for m in CRASH_MARKERS):
        return "crash"
    if returncode == 0:
        return "ok"
    return "clean" if "error:" in stderr else "crash"


def names_culprit(stderr):
    """Whether an error message names a node, value, tensor, attribute or the opset."""
    return any(key in stderr for key in ("node '", "input '", "output '", "tensor '",
                                         "initializer '", "opset", "attribute '", "value '"))


def compile_plan(compiler, model_path, out_dir, timeout=120):
    proc = subprocess.run([compiler, model_path, "-o", os.path.join(out_dir, "plan.mlir"),
                           "--emit", "plan", "--quiet"],
                          capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stderr


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="valid .onnx models (external data beside them)")
    parser.add_argument("--build", default="build", help="memopt build folder")
    parser.add_argument("--count", type=int, default=200, help="mutations per model")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--crash-dir", default="mutation-crashes")
    args = parser.parse_args(argv)
    compiler = os.path.join(args.build, "bin", "memopt-compile")
    totals = {"ok": 0, "clean": 0, "crash": 0, "unnamed": 0}

    def run_one(job):
        model_path, number, description, mutated = job
        folder = os.path.dirname(os.path.abspath(model_path))
        with tempfile.TemporaryDirectory() as out_dir:
            path = os.path.join(folder, f".mutant-{os.getpid()}-{number}.onnx")
            onnx.save(mutated, path)
            try:
                code, stderr = compile_plan(compiler, path, out_dir)
            finally:
                os.remove(path)
        return model_path, number, description, mutated, code, stderr

    jobs = []
    for model_path in args.models:
        model = onnx.load(model_path, load_external_data=False)
        for number, (description, mutated) in enumerate(
                mutations(model, args.count, args.seed)):
            jobs.append((model_path, number, description, mutated))
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for model_path, number, description, mutated, code, stderr in pool.map(run_one, jobs):
            verdict = classify(code, stderr)
            totals[verdict] += 1
            if verdict == "clean" and not names_culprit(stderr):
                totals["unnamed"] += 1
                print(f"unnamed: {model_path} #{number} ({description}): {stderr.strip()}")
            if verdict == "crash":
                os.makedirs(args.crash_dir, exist_ok=True)
                name = f"{os.path.basename(model_path)[:-5]}-{args.seed}-{number}.onnx"
                onnx.save(mutated, os.path.join(args.crash_dir, name))
                print(f"CRASH: {model_path} #{number} ({description}) -> {name}\n{stderr[-2000:]}")
    print(f"{sum(totals[k] for k in ('ok', 'clean', 'crash'))} mutations: {totals['ok']} "
          f"compiled, {totals['clean']} refused cleanly ({totals['unnamed']} without a name), "
          f"{totals['crash']} crashed")
    return 1 if totals["crash"] else 0


if __name__ == "__main__":
    sys.exit(main())
