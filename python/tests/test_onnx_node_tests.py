"""Compiles and runs the ONNX backend node tests whose ops memopt supports, on the host backend.

The cases come from the installed `onnx` package: the shipped files
onnx/backend/test/data/node/*/ (model.onnx, test_data_set_0/input_N.pb, output_N.pb) when the
wheel has them, else the same cases generated in memory by
onnx.backend.test.case.node.collect_testcases (recent wheels ship only the generators). A case is
selected when every node's op type is in supported_ops and the model's opset is 13..28; cases
generated at a newer opset are moved to opset 28 when none of their ops changed between 28 and
that opset (same schema since_version), which keeps the semantics, or when the change does not
touch the node (COMPATIBLE_CHANGES: Mod-28 only added fmod = 0 for floats).

Preprocessing: graph inputs that decide shapes (Reshape's shape, Slice's starts, reduction
axes, Pad's pads, ..., directly or through the nodes computing them) become initializers holding
the case's own input values (the importer folds only constants into attributes); every remaining
input gets an exact --input-shape from the case's input data.

Selected cases run in batches (node_test_batches.py: ~40 cases merged into one model, compiled
and run once, a failing case dropped or bisected away so it hides no other). Each batch is a test:
every case in it must import and match its expected outputs (rtol 1e-3, atol 1e-7; exact for
integers and booleans), except the cases node_test_exclusions.py excludes (with a reason), which
are only imported (memopt-translate, merged likewise) and must end cleanly (a message on failure,
never a crash).

The share: of the cases of opsets 13..23 with float, int64 and bool values only (SCOPE: the ops'
versions at the case's opset all exist at opset 23), at least MIN_SHARE must import and match;
test_share computes it from the selection and the exclusions (each batch test holds every other
selected case to matching). <build>/node_tests_report.md lists every case of the scope or the
selection that does not pass, with its reason, and counts what the batches measured.
"""

import os
import tempfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, defs, numpy_helper

import memopt_tools
import node_test_batches
import node_test_exclusions
import supported_ops
from conftest import _tool, count, report

NODE_REPORT = report("node_tests_report", "ONNX backend node tests compiled and run by memopt",
                     ["case", "status", "detail"])
for _key in ("selected imported", "selected matched", "scope imported", "scope matched",
             "excluded", "failed"):
    count(NODE_REPORT, _key, 0)

BATCH_SIZE = 40
MIN_SHARE = 0.90
SCOPE_OPSETS = (13, 23)
SCOPE_TYPES = {TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL}

# op type -> input positions whose values decide shapes (memopt keeps them as attributes)
SHAPE_INPUTS = {"Reshape": [1], "Expand": [1], "Slice": [1, 2, 3, 4], "Squeeze": [1],
                "Unsqueeze": [1], "Split": [1], "ReduceMean": [1], "ReduceSum": [1],
                "ReduceMax": [1], "ReduceMin": [1], "Pad": [1, 2, 3], "Clip": [1, 2], "Resize": [1, 2, 3],
                "ConstantOfShape": [0], "Range": [0, 1, 2], "CumSum": [1], "Tile": [1],
                "ReduceL1": [1], "ReduceL2": [1], "ReduceSumSquare": [1], "ReduceLogSum": [1],
                "ReduceLogSumExp": [1], "SplitToSequence": [1], "SequenceAt": [1],
                "ReduceProd": [1], "Trilu": [1], "CenterCropPad": [1], "Dropout": [1, 2],
                "AffineGrid": [1], "MaxUnpool": [2], "DFT": [1, 2], "RNN": [4], "GRU": [4],
                "LSTM": [4], "Col2Im": [1, 2], "TopK": [1],
                "STFT": [1, 3]}


def _read_tensors(folder, prefix):
    values = []
    while os.path.isfile(os.path.join(folder, f"{prefix}_{len(values)}.pb")):
        tensor = onnx.TensorProto()
        with open(os.path.join(folder, f"{prefix}_{len(values)}.pb"), "rb") as stream:
            tensor.ParseFromString(stream.read())
        values.append(numpy_helper.to_array(tensor))
    return values


def _load_cases():
    """[(name, model, inputs, expected outputs)], source."""
    node_dir = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    cases = []
    if os.path.isdir(node_dir):
        for name in sorted(os.listdir(node_dir)):
            model_path = os.path.join(node_dir, name, "model.onnx")
            data_dir = os.path.join(node_dir, name, "test_data_set_0")
            if not (os.path.isfile(model_path) and os.path.isdir(data_dir)):
                continue
            cases.append((name, onnx.load(model_path), _read_tensors(data_dir, "input"),
                          _read_tensors(data_dir, "output")))
        return cases, "shipped files"
    import warnings

    from onnx.backend.test.case import node

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for case in node.collect_testcases(None):
            if case.model is None or not case.data_sets:
                continue
            # Values numpy cannot hold (bfloat16, float8) come as TensorProtos.
            inputs = [numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto)
                      else value for value in case.data_sets[0][0]]
            cases.append((case.name, case.model, inputs,
                          node_test_batches.expected_outputs(case.data_sets[0][1])))
    return cases, "generated by collect_testcases"


def _element_type(model, name):
    graph = model.graph
    for value in list(graph.input) + list(graph.value_info) + list(graph.output):
        if value.name == name and value.type.HasField("tensor_type"):
            return value.type.tensor_type.elem_type
    for tensor in graph.initializer:
        if tensor.name == name:
            return tensor.data_type
    return None


_FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
                onnx.TensorProto.DOUBLE}


def _mod_means_the_same(node, model):
    """Mod-28 only added fmod = 0 for floats (invalid before); every other Mod node computes
    what Mod-13 computes. onnx 1.23 generates all its Mod cases at opset 28."""
    fmod = next((a.i for a in node.attribute if a.name == "fmod"), 0)
    element = _element_type(model, node.input[0])
    return fmod == 1 or (element is not None and element not in _FLOAT_TYPES)


# op type -> predicate(node, model): the node means the same at MAX_OPSET although the op's
# schema changed after it.
COMPATIBLE_CHANGES = {"Mod": _mod_means_the_same}


def _normalized_opset(model):
    """The opset to import at (<= 21 when that keeps every node's meaning), or the original."""
    opset = memopt_tools.default_opset(model)
    if opset is None or opset <= supported_ops.MAX_OPSET:
        return opset
    for node in model.graph.node:
        try:
            new = defs.get_schema(node.op_type, opset, node.domain).since_version
            old = defs.get_schema(node.op_type, supported_ops.MAX_OPSET, node.domain).since_version
        except Exception:
            return opset
        compatible = COMPATIBLE_CHANGES.get(node.op_type)
        if new != old and not (compatible and compatible(node, model)):
            return opset
    return supported_ops.MAX_OPSET


def _uses_subgraphs(model):
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
               for n in model.graph.node for a in n.attribute)


def _preprocess(model, inputs, opset):
    """Returns (model, {input name: value}): shape-deciding inputs become initializers; the
    inputs left are the program's."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            entry.version = opset
    graph = model.graph
    initializer_names = {t.name for t in graph.initializer}
    real_inputs = [v for v in graph.input if v.name not in initializer_names]
    values = {v.name: inputs[i] for i, v in enumerate(real_inputs) if i < len(inputs)}
    shape_names = {n.input[i] for n in graph.node for i in SHAPE_INPUTS.get(n.op_type, [])
                   if i < len(n.input) and n.input[i]}
    # Walk back through the nodes that compute them (expanded functions derive sizes from an
    # input through Cast, Sub, ...), so the graph inputs they start from become constants too.
    producers = {out: n for n in graph.node for out in n.output}
    pending = list(shape_names)
    while pending:
        producer = producers.get(pending.pop())
        if producer is None or producer.op_type == "Shape":  # static shapes fold already
            continue
        for name in producer.input:
            if name and name not in shape_names:
                shape_names.add(name)
                pending.append(name)
    keep = []
    for value in real_inputs:
        if value.name in shape_names and value.name in values:
            graph.initializer.append(numpy_helper.from_array(np.asarray(values[value.name]),
                                                             value.name))
        else:
            keep.append(value)
    del graph.input[:]
    graph.input.extend(keep)
    return model, {value.name: values[value.name] for value in keep if value.name in values}


def _in_scope(model):
    """Whether the case belongs to the share's scope: opset 13..23 (every op's version at the
    case's opset exists at opset 23) and float, int64 and bool values only."""
    opset = memopt_tools.default_opset(model)
    if opset is None or opset < SCOPE_OPSETS[0]:
        return False
    for node in model.graph.node:
        try:
            since = defs.get_schema(node.op_type, opset, node.domain).since_version
        except Exception:  # an op of another domain or a model-local function
            since = opset
        if since > SCOPE_OPSETS[1]:
            return False
    graph = model.graph
    types = [v.type.tensor_type.elem_type if v.type.HasField("tensor_type") else None
             for v in list(graph.input) + list(graph.output)]
    return all(t in SCOPE_TYPES for t in types + [t.data_type for t in graph.initializer])


def _lacking(model):
    if _uses_subgraphs(model):
        return "control flow (If / Loop / Scan sub-graphs) is not in memopt"
    lacking = sorted({n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
                      for n in model.graph.node
                      if not supported_ops.is_supported(n.op_type, n.domain)})
    return f"uses ops memopt lacks: {', '.join(lacking)}" if lacking else None


def _select():
    """(selected cases, {scope case name: reason it is not selected, or None})."""
    cases, source = _load_cases()
    selected, scope, unsupported_ops, out_of_range = [], {}, 0, 0
    for name, model, inputs, outputs in cases:
        in_scope = _in_scope(model)
        lacking = _lacking(model)
        if lacking:
            unsupported_ops += 1
            if in_scope:
                scope[name] = lacking
            continue
        opset = _normalized_opset(model)
        if opset is None or not supported_ops.MIN_OPSET <= opset <= supported_ops.MAX_OPSET:
            out_of_range += 1
            if in_scope:
                scope[name] = f"opset {opset} (memopt imports opsets " \
                              f"{supported_ops.MIN_OPSET}..{supported_ops.MAX_OPSET})"
            continue
        model, program_inputs = _preprocess(model, inputs, opset)
        reason = node_test_exclusions.EXCLUSIONS.get(name) \
            or node_test_exclusions.rule_reason(model)
        if in_scope:
            scope[name] = None
        selected.append((node_test_batches.Case(name, model, program_inputs, outputs, opset),
                         reason))
    NODE_REPORT["footer"] += [
        f"Source: {source} of onnx {onnx.__version__}: {len(cases)} cases; "
        f"{unsupported_ops} use an op memopt lacks, {out_of_range} have an opset outside "
        f"{supported_ops.MIN_OPSET}..{supported_ops.MAX_OPSET} (after normalization); "
        f"{len(selected)} selected, compiled and run in batches of {BATCH_SIZE}."]
    return selected, scope


SELECTED, SCOPE = _select()


def _batches():
    by_opset = {}
    for entry in SELECTED:
        by_opset.setdefault(entry[0].opset, []).append(entry)
    batches = []
    for opset in sorted(by_opset):
        group = by_opset[opset]
        for start in range(0, len(group), BATCH_SIZE):
            batches.append(group[start:start + BATCH_SIZE])
    return batches


BATCHES = _batches()


@pytest.fixture(scope="session")
def compiler():
    return _tool("memopt-compile")


def test_selection_is_not_empty():
    assert len(SELECTED) > 100, f"only {len(SELECTED)} node tests selected"


@pytest.mark.parametrize("batch", BATCHES, ids=[
    f"opset{b[0][0].opset}-{b[0][0].name}..{b[-1][0].name}" for b in BATCHES])
def test_node_batch(batch, compiler, tools, tmp_path):
    runner = node_test_batches.BatchRunner(compiler, tools.translate, str(tmp_path))
    outcomes = runner.run([case for case, reason in batch if not reason]).outcomes
    outcomes.update(runner.import_only([case for case, reason in batch if reason]).outcomes)
    failures = []
    for case, reason in batch:
        outcome = outcomes[case.name]
        in_scope = case.name in SCOPE
        for key, flag in (("imported", outcome.imported), ("matched", outcome.matched)):
            if flag:
                count(NODE_REPORT, f"selected {key}")
                if in_scope:
                    count(NODE_REPORT, f"scope {key}")
        if reason:
            count(NODE_REPORT, "excluded")
            NODE_REPORT["rows"].append({"case": case.name, "status": "excluded",
                                        "detail": reason.replace("|", "/")})
            if outcome.crashed:
                failures.append(f"{case.name} (excluded: {reason}) crashed: {outcome.detail}")
            continue
        if not outcome.matched:
            count(NODE_REPORT, "failed")
            status = "MISMATCH" if outcome.imported else "IMPORT FAILED"
            NODE_REPORT["rows"].append({"case": case.name, "status": status,
                                        "detail": outcome.detail.replace("|", "/")[:300]})
            failures.append(f"{case.name}: {status}: {outcome.detail}")
    assert not failures, (f"{len(failures)} of {len(batch)} cases fail "
                          f"({runner.count} compiles):\n" + "\n".join(failures))


def test_share():
    """At least MIN_SHARE of the scope's cases import and match: those selected and not
    excluded (each held to it by its batch test) over all."""
    excluded = {case.name for case, reason in SELECTED if reason}
    passing = [name for name, reason in SCOPE.items() if reason is None and name not in excluded]
    for name, reason in SCOPE.items():
        if reason is not None:
            NODE_REPORT["rows"].append({"case": name, "status": "not selected",
                                        "detail": reason.replace("|", "/")})
    share = len(passing) / len(SCOPE)
    NODE_REPORT["footer"].append(
        f"Scope (opsets {SCOPE_OPSETS[0]}..{SCOPE_OPSETS[1]}, float / int64 / bool values "
        f"only): {len(SCOPE)} cases; {sum(r is None for r in SCOPE.values())} selected, "
        f"{len(passing)} held to import and match ({share:.1%}; required {MIN_SHARE:.0%}); "
        f"the counts below ('scope imported', 'scope matched') are what the batches measured.")
    assert share >= MIN_SHARE, (f"{len(passing)} of {len(SCOPE)} cases of the scope import "
                                f"and match ({share:.1%} < {MIN_SHARE:.0%})")
