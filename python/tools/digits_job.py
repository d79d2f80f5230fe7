#!/usr/bin/env python3
"""The main job's data and check (scripts/main.sh): the bundled model trained on digits.

`prepare OUT`: scikit-learn's 8x8 digits (shipped inside the package, no download) as the
bundled network's input (3 channels, 8 x 8: its convolutions and global average pool take any
size), shuffled with seed 0, 1,408 training samples and 389 held out; and a copy of
models/tiny_convnet.onnx whose batch is 32 (the bundled file fixes it at 1) with `logits` (the
input of its Softmax) as a second output, which the cross-entropy loss reads.

`check OUT TRAINED.onnx`: onnxruntime scores the model memopt trained and saved on the held-out
samples (argmax of `output`) and exits non-zero below --min-accuracy.
"""

import argparse
import os
import sys

import numpy as np

BATCH = 32


def prepare(out, model):
    import onnx
    from onnx import TensorProto, helper
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    x = ((x - 0.5) / 0.5)[:, None].repeat(3, axis=1)
    split = (int(0.8 * len(x)) // BATCH) * BATCH
    for name, value in [("train_x", x[:split]), ("train_y", y[:split]),
                        ("test_x", x[split:]), ("test_y", y[split:])]:
        np.save(os.path.join(out, name + ".npy"), value)
    graph = onnx.load(model)
    (image,) = graph.graph.input
    dims = image.type.tensor_type.shape.dim
    dims[0].dim_value, dims[2].dim_value, dims[3].dim_value = BATCH, 8, 8
    graph.graph.output[0].type.tensor_type.shape.dim[0].dim_value = BATCH
    softmax = [n for n in graph.graph.node if n.op_type == "Softmax"]
    if len(softmax) != 1:
        sys.exit(f"digits_job: {model} has {len(softmax)} Softmax nodes, expected one")
    logits = softmax[0].input[0]
    graph.graph.output.append(helper.make_tensor_value_info(logits, TensorProto.FLOAT,
                                                            [BATCH, 10]))
    onnx.checker.check_model(graph)
    onnx.save(graph, os.path.join(out, "digits_model.onnx"))
    print(f"digits: {split} training samples, {len(x) - split} held out; model batch {BATCH}, "
          f"8 x 8 input, loss on '{logits}'")


def check(out, trained, minimum):
    import onnxruntime as ort

    session = ort.InferenceSession(trained, providers=["CPUExecutionProvider"])
    x, y = np.load(os.path.join(out, "test_x.npy")), np.load(os.path.join(out, "test_y.npy"))
    correct = scored = 0
    for start in range(0, len(x) - BATCH + 1, BATCH):
        probabilities = session.run(["output"], {session.get_inputs()[0].name:
                                                 x[start:start + BATCH]})[0]
        correct += int((probabilities.argmax(1) == y[start:start + BATCH]).sum())
        scored += BATCH
    accuracy = correct / scored
    print(f"onnxruntime on the saved model: held-out accuracy {accuracy:.3f} "
          f"({correct} of {scored})")
    if accuracy < minimum:
        sys.exit(f"digits_job: accuracy {accuracy:.3f} is below {minimum}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("out")
    p.add_argument("--model", default="models/tiny_convnet.onnx")
    c = sub.add_parser("check")
    c.add_argument("out")
    c.add_argument("trained")
    c.add_argument("--min-accuracy", type=float, default=0.9)
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.out, args.model)
    else:
        check(args.out, args.trained, args.min_accuracy)


if __name__ == "__main__":
    main()
