"""The model zoo: every real model memopt is tested and benchmarked on.

Each entry names a graph-only ONNX file committed under models/<exporter>/ (weights stripped;
python/models/fill_weights.py writes deterministic ones) and its inputs. Tests and benchmarks
iterate over MODELS instead of globbing, so a missing file is an error, not a silent skip.

exporters:
  torchscript - torch.onnx.export of PyTorch 1.13 (TorchScript tracer), opset 17
                (python/models/export_torchscript.py)
  dynamo      - torch.onnx.export(..., dynamo=True) of PyTorch 2.11, opset 20
                (python/models/export_dynamo.py; run on the device machine); the
                transformers models (hf_*) take input_ids and a left-padded attention_mask
"""

import os
from dataclasses import dataclass, field

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS_DIR = os.path.join(REPO, "models")

IMAGE = {"input": ((1, 3, 224, 224), "float32")}
TOKENS = {"input_ids": ((1, 128), "int64")}
# transformers exports: a batch of two, the second sequence left-padded (attention_mask).
HF_INPUTS = {"input_ids": ((2, 128), "int64"), "attention_mask": ((2, 128), "int64")}


def left_padded_mask(shape):
    """attention_mask whose sequence b starts with 13 b padding tokens (zeros): with a causal
    mask, the first query rows of a padded sequence see no key at all (fully masked rows)."""
    import numpy as np
    mask = np.ones(shape, dtype=np.int64)
    for b in range(shape[0]):
        mask[b, :13 * b] = 0
    return mask


@dataclass(frozen=True)
class ZooModel:
    name: str
    exporter: str
    family: str  # "vision" or "text"
    inputs: dict = field(hash=False)  # input name -> (shape, numpy dtype name)
    opset: int = 0
    # input name -> function(shape) giving its value, for inputs that random values would not
    # exercise (masks); other inputs are random.
    values: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def id(self):
        return f"{self.exporter}/{self.name}"

    @property
    def path(self):
        return os.path.join(MODELS_DIR, self.exporter, f"{self.name}.onnx")

    def input_shape_args(self):
        """memopt-translate --input-shape arguments (NAME=D0xD1x...) fixing every input."""
        args = []
        for name, (shape, _) in self.inputs.items():
            args += ["--input-shape", f"{name}={'x'.join(str(d) for d in shape)}"]
        return args


VISION = ["resnet50", "mobilenet_v3_large", "efficientnet_b0", "vit_b_16", "swin_t",
          "convnext_tiny"]
TEXT = ["gpt2_nn", "bert_nn"]
HF_TEXT = ["hf_gpt2", "hf_bert", "hf_llama"]


def _entries():
    entries = []
    for exporter, opset, text in (("torchscript", 17, TEXT), ("dynamo", 20, TEXT + HF_TEXT)):
        for name in VISION:
            entries.append(ZooModel(name, exporter, "vision", IMAGE, opset))
        for name in text:
            if name in HF_TEXT:
                entries.append(ZooModel(name, exporter, "text", HF_INPUTS, opset,
                                        {"attention_mask": left_padded_mask}))
            else:
                entries.append(ZooModel(name, exporter, "text", TOKENS, opset))
    return entries


MODELS = _entries()
BUNDLED = ZooModel("tiny_convnet", "bundled", "vision",
                   {"input": ((1, 3, 32, 32), "float32")}, 17)
BUNDLED_PATH = os.path.join(MODELS_DIR, "tiny_convnet.onnx")


def by_id(model_id):
    for model in MODELS:
        if model.id == model_id:
            return model
    raise KeyError(model_id)
