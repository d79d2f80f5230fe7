"""Which members of a zoo-wide sweep the fast test tier keeps.

A sweep repeats one check (compile and match onnxruntime, train, fuse attention, fit a budget)
over every model of a zoo. The fast tier (scripts/test.sh, CI) keeps a few members that
together reach each sweep's code paths: both exporters (TorchScript and dynamo), a
convolutional network, a transformer encoder and a decoder. The others carry the `sweep`
marker: scripts/test.sh --all (MEMOPT_TEST_TIER=all) runs them, conftest.py deselects them
otherwise. Each choice is a set of ids below, next to the others, so the tiers read in one place.
"""

import pytest

# The foundation zoo (python/models/zoo.py: real-size torchvision / transformers networks).
ZOO = {"dynamo/mobilenet_v3_large", "torchscript/bert_nn", "dynamo/hf_llama"}
ZOO_NO_HF = {"dynamo/mobilenet_v3_large", "torchscript/bert_nn"}  # sweeps without hf_*
ZOO_TRAINING = {"dynamo/mobilenet_v3_large", "dynamo/gpt2_nn"}  # dynamo exports only
ZOO_MIXED_TRAINING = {"dynamo/gpt2_nn"}  # a CNN in f16: the conv / batch-norm emulation test
ZOO_LAYOUT = {"dynamo/mobilenet_v3_large"}
# The import check keeps every zoo file but the largest (ViT-B/16, ConvNeXt-T, ResNet-50 and
# TorchScript's Swin-T: 6-25 s each, fill_weights writing 100-350 MB of weights).
LARGE_IMPORTS = {"torchscript/vit_b_16", "dynamo/vit_b_16", "torchscript/convnext_tiny",
                 "dynamo/convnext_tiny", "torchscript/resnet50", "dynamo/resnet50",
                 "torchscript/swin_t"}
# Today's zoo (models/today: small configs of 45 architectures): a decoder with grouped-query
# attention, rotary embeddings and a padding mask, one with learned positions, an encoder, an
# encoder-decoder speech model, a vision transformer and a timm convolutional network.
# torchvision's ResNet-18 (its training check alone was the fast tier's second-slowest test)
# is a sweep member: torchvision's convolutions and batch norms are the foundation zoo's
# mobilenet_v3_large above, trained and differentiated in the fast tier.
TODAY = {"llama_mask", "gpt2", "bert_mask", "whisper", "vit", "timm_convnextv2_atto"}
# Long-sequence masks built by ops (test_long_attention_masks.py: family-mask), host numerics:
# one case per mask, both families between them.
LONG_MASKS = {"llama-causal", "llama-window", "gpt2-padding", "gpt2-buffer"}


def params(items, keep, id=str, failures=None):
    """pytest params of `items` with ids id(item): those whose id is not in `keep` are marked
    `sweep`; those in `failures` (id -> reason) are strict expected failures in either tier."""
    failures = failures or {}
    ids = [id(item) for item in items]
    unknown = set(keep) - set(ids)
    assert not unknown, f"the fast tier keeps members the sweep lacks: {sorted(unknown)}"
    result = []
    for item, name in zip(items, ids):
        marks = []
        if name in failures:
            marks.append(pytest.mark.xfail(strict=True, reason=failures[name]))
        if name not in keep:
            marks.append(pytest.mark.sweep)
        result.append(pytest.param(item, id=name, marks=marks))
    return result
