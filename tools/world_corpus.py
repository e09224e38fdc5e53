"""Build a corpus of the models users bring to an ONNX optimizer, exported as users export them.

    python tools/world_corpus.py OUT_DIR [--only NAME ...] [--small] [--list]

Every model is built from code with random weights (``torch.manual_seed``; nothing is downloaded)
and written to ``OUT_DIR/NAME.onnx``; a model whose file already exists is not built again.
Normalization layers get random affine weights and statistics (random initialisation leaves
them at the identity, where a rewrite that drops one would go unseen), and a weight matrix
initialized to zero (the ViT's classifier head) random values (its output would be zeros
whatever the layers before it compute).

Families (small configurations: a few MB to ~45 MB of weights each):

- torchvision: ``resnet18``, ``mobilenet_v3_small``, ``efficientnet_b0``, a reduced ConvNeXt
  (``convnext``), a reduced Swin transformer (``swin``), a two-layer ViT (``vit_tv``) and the
  LR-ASPP MobileNetV3 segmentation model (``lraspp``, dynamic height and width);
- transformers (2 layers, hidden 64-128, vocabulary 1000, eager attention, no cache): ``bert``
  (input_ids, attention_mask, token_type_ids), ``distilbert``, ``gpt2`` (LM head), ``t5_encoder``,
  ``bart_encoder``, ``vit_hf``, ``whisper_encoder`` (input_features), ``wav2vec2`` (raw audio),
  ``llama`` and ``qwen2`` (causal LMs, input_ids and attention_mask);
- torch's own ``nn.TransformerEncoder`` (``transformer_encoder``, 2 layers, batch first), whose
  legacy export runs at the sequence length it traced only (10 tokens, baked into its Reshapes).

Each family is exported by both torch.onnx exporters: ``NAME_legacy`` (TorchScript,
``dynamo=False``, opset 17, ``dynamic_axes`` on batch and sequence) and ``NAME_dynamo``
(``dynamo=True``, ``dynamic_shapes`` with named ``torch.export.Dim``; when the named dimensions
are refused the export is retried with ``Dim.DYNAMIC``; weights in a ``.onnx.data`` file beside
the model, as the exporter writes them). Besides those:

- float16 (``model.half()`` on CPU): ``resnet18``, ``mobilenet_v3_small``, ``bert`` and ``llama``,
  ``*_legacy_fp16`` and ``*_dynamo_fp16``, and again with the exporter's own graph optimizer
  off (``*_fp16_raw``: the legacy exporter without constant folding, the dynamo exporter with
  ``optimize=False``), as the models reach a tool when a user turned it off;
- local functions: ``blocks_legacy_functions`` (a CNN of repeated residual blocks) and
  ``bert_legacy_functions`` (every ``BertLayer``), ``export_modules_as_functions``, opset 17;
- opsets: the dynamo exports carry the exporter's default opset (20 with torch 2.14);
  ``resnet18_legacy_opset20`` is the legacy exporter at its highest opset and
  ``bert_dynamo_opset18`` the dynamo exporter asked for opset 18;
- dynamic height and width: ``resnet18_legacy_dynhw`` (and the segmentation model);
- PaddlePaddle-style unknown dimensions: ``resnet18_paddle_dims`` and ``bert_paddle_dims`` are
  copies of ``resnet18_legacy_dynhw`` and ``bert_legacy`` whose dynamic input and output
  dimensions are written as ``dim_value: -1``, as paddle2onnx and old tf2onnx write them;
- decoders with their cache, as a generation loop runs them (legacy exporter):
  ``gpt2_legacy_cache`` and ``llama_legacy_cache`` take ``past_key_values.N.key``/``.value``
  and an attention mask over the past and the new tokens, and return the grown cache;
- ``project``: the project's own comparison corpus (``models.corpus.build_corpus``) in
  ``OUT_DIR/project/``, at full size (BERT-base-sized encoders of ~420 MB among them) or, with
  ``--small``, its shrunken version.

One model failing to export does not stop the others: its error is printed and recorded. The
run ends with a table of every model in the folder (nodes at the top level, nodes with local
functions expanded and subgraphs included, opset, float type, dynamic input dimensions, size
on disk) and writes ``OUT_DIR/world_corpus.json`` with each model's status and error.
``--small`` also shrinks the families (one layer, fewer channels). ``--list`` prints the names.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx


from world_compare import dynamic_dims, float_types, node_counts

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = ["Case", "Variant", "build", "main", "paddle_dims", "variants"]

SEED = 0
PROJECT = "project"
STATUS_FILE = "world_corpus.json"
LEGACY_OPSET = 17
VOCAB = 1000
BATCH, SEQUENCE = 2, 8  # example sizes for the exports: neither is 0 or 1
# The plain attention every exporter writes the same way (no SDPA or flash kernels); passed as
# keyword arguments, which every transformers config accepts.
EAGER: dict[str, Any] = {"attn_implementation": "eager"}


@dataclasses.dataclass
class Case:
    """A module with example inputs and names, ready for either exporter.

    ``axes`` gives the dynamic axes of inputs and outputs by name (``dynamic_axes`` of the
    legacy exporter); the dynamo exporter gets those of the inputs as ``torch.export.Dim``.
    """

    module: nn.Module
    args: tuple[torch.Tensor, ...]
    input_names: list[str]
    output_names: list[str]
    axes: dict[str, dict[int, str]]
    # The classes export_modules_as_functions turns into local functions (legacy only).
    functions: tuple[type[nn.Module], ...] = ()


@dataclasses.dataclass(frozen=True)
class Variant:
    """One file of the corpus: a family exported one way."""

    name: str
    family: str
    exporter: str  # "legacy" or "dynamo"
    opset: int | None = None
    half: bool = False
    dynamic_hw: bool = False
    functions: bool = False
    paddle_from: str | None = None  # a copy of that variant with -1 dimensions
    raw: bool = False  # the exporter's own graph optimizer off

    @property
    def description(self) -> str:
        if self.paddle_from:
            return f"{self.paddle_from} with dynamic dimensions written as -1"
        opset = self.opset or (LEGACY_OPSET if self.exporter == "legacy" else "default")
        parts = [self.family, f"{self.exporter} exporter", f"opset {opset}"]
        parts += ["float16"] * self.half + ["dynamic H/W"] * self.dynamic_hw
        parts += ["local functions"] * self.functions
        parts += ["the exporter's optimizer off"] * self.raw
        return ", ".join(parts)


# --------------------------------------------------------------------------- families


def _image_axes(dynamic_hw: bool) -> dict[int, str]:
    return {0: "batch", 2: "height", 3: "width"} if dynamic_hw else {0: "batch"}


def _vision(module: nn.Module, size: int, dynamic_hw: bool, *, dense: bool = False) -> Case:
    """An image model taking ``input`` [batch, 3, size, size]; ``dense``: its output is a map
    of the input's size (segmentation), else [batch, classes]."""
    import torch

    x = torch.randn(BATCH, 3, size, size)
    out_axes = _image_axes(dynamic_hw) if dense else {0: "batch"}
    return Case(module.eval(), (x,), ["input"], ["output"],
                {"input": _image_axes(dynamic_hw), "output": out_axes})


def resnet18(small: bool, dynamic_hw: bool) -> Case:
    import torchvision
    from torchvision.models.resnet import BasicBlock, ResNet

    model = (ResNet(BasicBlock, [1, 1, 1, 1], num_classes=100) if small
             else torchvision.models.resnet18(weights=None))
    return _vision(model, 224, dynamic_hw)


def mobilenet_v3_small(small: bool, dynamic_hw: bool) -> Case:
    import torchvision

    model = torchvision.models.mobilenet_v3_small(weights=None, width_mult=0.5 if small else 1.0)
    return _vision(model, 224, dynamic_hw)


def efficientnet_b0(small: bool, dynamic_hw: bool) -> Case:
    import torchvision

    model = torchvision.models.efficientnet_b0(weights=None, num_classes=100 if small else 1000)
    return _vision(model, 224, dynamic_hw)


def convnext(small: bool, dynamic_hw: bool) -> Case:
    """ConvNeXt-T's blocks at a quarter of its widths (ConvNeXt-T itself is 110 MB)."""
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt

    w = 24 if small else 48
    settings = [CNBlockConfig(w, 2 * w, 1), CNBlockConfig(2 * w, 4 * w, 1),
                CNBlockConfig(4 * w, 8 * w, 1 if small else 3), CNBlockConfig(8 * w, None, 1)]
    return _vision(ConvNeXt(settings, num_classes=100), 224, dynamic_hw)


def swin(small: bool, dynamic_hw: bool) -> Case:
    """Swin-T's structure (patch 4, window 7, shifted windows) at a third of its width."""
    from torchvision.models.swin_transformer import SwinTransformer

    depths = [1, 1, 1, 1] if small else [2, 2, 2, 2]
    model = SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=depths,
                            num_heads=[2, 4, 8, 16], window_size=[7, 7], num_classes=100)
    return _vision(model, 224, dynamic_hw)


def vit_tv(small: bool, dynamic_hw: bool) -> Case:
    from torchvision.models.vision_transformer import VisionTransformer

    model = VisionTransformer(image_size=224, patch_size=32, num_layers=1 if small else 2,
                              num_heads=4, hidden_dim=128, mlp_dim=256, num_classes=100)
    return _vision(model, 224, dynamic_hw)


def transformer_encoder(small: bool, dynamic_hw: bool) -> Case:
    """torch's own nn.TransformerEncoder, batch first: its nn.MultiheadAttention reshapes the
    key and value by the length it traced, which the legacy exporter bakes in (the model runs
    at that sequence length only, whatever its signature says)."""
    import torch
    from torch import nn

    layer = nn.TransformerEncoderLayer(128, 4, 256, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, 1 if small else 2, enable_nested_tensor=False)
    x = torch.randn(2, 10, 128)
    return Case(model, (x,), ["x"], ["y"], {"x": {0: "batch", 1: "seq"},
                                             "y": {0: "batch", 1: "seq"}})


def lraspp(small: bool, dynamic_hw: bool) -> Case:
    import torch
    import torchvision

    class _Segmenter(torch.nn.Module):
        """The ``out`` map of torchvision's segmentation dictionary."""

        def __init__(self) -> None:
            super().__init__()
            self.net = torchvision.models.segmentation.lraspp_mobilenet_v3_large(
                weights=None, weights_backbone=None, num_classes=21)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)["out"]

    return _vision(_Segmenter(), 128 if small else 224, dynamic_hw, dense=True)


def blocks(small: bool, dynamic_hw: bool) -> Case:
    """A CNN of repeated residual blocks, each a local function in the export."""
    import torch
    from torch import nn

    class ResidualBlock(nn.Module):
        def __init__(self, channels: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(channels)
            self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(channels)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(x + self.bn2(self.conv2(y)))

    channels = 16 if small else 32
    model = nn.Sequential(
        nn.Conv2d(3, channels, 3, stride=2, padding=1), nn.ReLU(),
        *[ResidualBlock(channels) for _ in range(2 if small else 4)],
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, 10),
    )
    case = _vision(model, 64, dynamic_hw)
    case.functions = (ResidualBlock,)
    return case


# transformers --------------------------------------------------------------


def _token_case(model: nn.Module, names: Sequence[str], outputs: Sequence[str]) -> Case:
    """A text model taking ``names`` (ids, masks) [batch, sequence]; the outputs are
    [batch, sequence, ...] except a pooler output ([batch, hidden])."""
    import torch

    generator = torch.Generator().manual_seed(SEED)
    args = []
    for name in names:
        if name == "input_ids":
            args.append(torch.randint(0, VOCAB, (BATCH, SEQUENCE), generator=generator))
        elif name == "attention_mask":
            mask = torch.ones(BATCH, SEQUENCE, dtype=torch.int64)
            mask[1, SEQUENCE - 3:] = 0  # one padded row
            args.append(mask)
        else:
            args.append(torch.zeros(BATCH, SEQUENCE, dtype=torch.int64))
    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    for name in outputs:
        axes[name] = {0: "batch"} if name == "pooler_output" else {0: "batch", 1: "sequence"}
    return Case(model.eval(), tuple(args), list(names), list(outputs), axes)


def _wrap(model: nn.Module, names: Sequence[str], outputs: Sequence[str]) -> nn.Module:
    """``model`` called with keyword arguments named ``names`` (the wrapper's own positional
    parameters, so both exporters see them by name), returning the tuple of ``outputs``."""
    import torch

    keys = tuple(outputs)

    def result(out: Any) -> tuple[torch.Tensor, ...]:
        return tuple(out[key] for key in keys)

    class _Ids(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return result(self.model(input_ids=input_ids, return_dict=True))

    class _IdsMask(_Ids):
        def forward(  # type: ignore[override]
            self, input_ids: torch.Tensor, attention_mask: torch.Tensor
        ) -> tuple[torch.Tensor, ...]:
            return result(self.model(input_ids=input_ids, attention_mask=attention_mask,
                                     return_dict=True))

    class _IdsMaskTypes(_Ids):
        def forward(  # type: ignore[override]
            self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
            token_type_ids: torch.Tensor,
        ) -> tuple[torch.Tensor, ...]:
            return result(self.model(input_ids=input_ids, attention_mask=attention_mask,
                                     token_type_ids=token_type_ids, return_dict=True))

    class _Pixels(_Ids):
        def forward(self, pixel_values: torch.Tensor) -> tuple[torch.Tensor, ...]:  # type: ignore[override]
            return result(self.model(pixel_values=pixel_values, return_dict=True))

    class _Audio(_Ids):
        def forward(self, input_values: torch.Tensor) -> tuple[torch.Tensor, ...]:  # type: ignore[override]
            return result(self.model(input_values=input_values, return_dict=True))

    class _Features(_Ids):
        def forward(self, input_features: torch.Tensor) -> tuple[torch.Tensor, ...]:  # type: ignore[override]
            return result(self.model(input_features=input_features, return_dict=True))

    wrappers: dict[tuple[str, ...], type[torch.nn.Module]] = {
        ("input_ids",): _Ids,
        ("input_ids", "attention_mask"): _IdsMask,
        ("input_ids", "attention_mask", "token_type_ids"): _IdsMaskTypes,
        ("pixel_values",): _Pixels,
        ("input_values",): _Audio,
        ("input_features",): _Features,
    }
    return wrappers[tuple(names)]()


def _text(model: nn.Module, names: Sequence[str], outputs: Sequence[str]) -> Case:
    return _token_case(_wrap(model, names, outputs), names, outputs)


def _layers(small: bool) -> int:
    return 1 if small else 2


def bert(small: bool, dynamic_hw: bool) -> Case:
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=_layers(small),
                        num_attention_heads=4, intermediate_size=512,
                        max_position_embeddings=512, **EAGER)
    names = ("input_ids", "attention_mask", "token_type_ids")
    return _text(BertModel(config), names, ("last_hidden_state", "pooler_output"))


def bert_layers(small: bool, dynamic_hw: bool) -> Case:
    """BERT with each ``BertLayer`` a local function. The legacy exporter records the typed
    attributes of every module it traces, and a ``PreTrainedModel``'s (its config) are not
    recordable, so BertModel's parts are called here by a plain module of their own."""
    import torch
    from transformers import BertConfig, BertModel
    from transformers.models.bert.modeling_bert import BertLayer

    config = BertConfig(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=_layers(small),
                        num_attention_heads=4, intermediate_size=512,
                        max_position_embeddings=512, **EAGER)
    bert_model = BertModel(config)

    class _BertParts(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embeddings = bert_model.embeddings
            self.encoder = bert_model.encoder
            self.pooler = bert_model.pooler

        def forward(
            self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
            token_type_ids: torch.Tensor,
        ) -> tuple[torch.Tensor, torch.Tensor]:
            hidden = self.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
            keep = attention_mask[:, None, None, :].to(hidden.dtype)
            additive = (1.0 - keep) * torch.finfo(hidden.dtype).min
            sequence = self.encoder(hidden, attention_mask=additive)[0]
            assert self.pooler is not None  # BertModel's default: a pooling layer
            return sequence, self.pooler(sequence)

    names = ("input_ids", "attention_mask", "token_type_ids")
    case = _token_case(_BertParts(), names, ("last_hidden_state", "pooler_output"))
    case.functions = (BertLayer,)
    return case


def distilbert(small: bool, dynamic_hw: bool) -> Case:
    from transformers import DistilBertConfig, DistilBertModel

    config = DistilBertConfig(vocab_size=VOCAB, dim=128, n_layers=_layers(small), n_heads=4,
                              hidden_dim=512, max_position_embeddings=512,
                              **EAGER)
    return _text(DistilBertModel(config), ("input_ids", "attention_mask"),
                 ("last_hidden_state",))


def gpt2(small: bool, dynamic_hw: bool) -> Case:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=VOCAB, n_embd=128, n_layer=_layers(small), n_head=4,
                        n_positions=512, use_cache=False, **EAGER)
    return _text(GPT2LMHeadModel(config), ("input_ids", "attention_mask"), ("logits",))


def t5_encoder(small: bool, dynamic_hw: bool) -> Case:
    from transformers import T5Config, T5EncoderModel

    config = T5Config(vocab_size=VOCAB, d_model=128, d_kv=32, d_ff=256,
                      num_layers=_layers(small), num_heads=4, use_cache=False,
                      **EAGER)
    return _text(T5EncoderModel(config), ("input_ids", "attention_mask"),
                 ("last_hidden_state",))


def bart_encoder(small: bool, dynamic_hw: bool) -> Case:
    from transformers import BartConfig, BartModel

    config = BartConfig(vocab_size=VOCAB, d_model=128, encoder_layers=_layers(small),
                        decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
                        encoder_ffn_dim=256, decoder_ffn_dim=256, max_position_embeddings=512,
                        use_cache=False, **EAGER)
    return _text(BartModel(config).get_encoder(), ("input_ids", "attention_mask"),
                 ("last_hidden_state",))


def llama(small: bool, dynamic_hw: bool) -> Case:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=256,
                         num_hidden_layers=_layers(small), num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=512, use_cache=False,
                         **EAGER)
    return _text(LlamaForCausalLM(config), ("input_ids", "attention_mask"), ("logits",))



def cache_step(model: nn.Module, layers: int) -> nn.Module:
    """``model`` (a transformers causal LM) as one generation step with its cache:
    ``forward(input_ids, attention_mask, *past)``, ``past`` the first ``layers`` layers' keys and
    values in turn; returns the logits and the grown cache, in the same order."""
    import torch
    from transformers.cache_utils import DynamicCache

    class _Step(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
            cache = DynamicCache()
            for layer in range(layers):
                cache.update(past[2 * layer], past[2 * layer + 1], layer)
            out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             past_key_values=cache, use_cache=True, return_dict=True)
            grown = out.past_key_values.layers
            return (out.logits, *(t for layer in grown[:layers]
                                  for t in (layer.keys, layer.values)))

    return _Step().eval()

def _cached(model: nn.Module, layers: int, kv_heads: int, head_size: int) -> Case:
    """A causal LM's step with its cache, as a generation loop runs it: ``input_ids`` [batch,
    sequence] (the new tokens), ``attention_mask`` [batch, past + sequence] and
    ``past_key_values.N.key``/``.value`` [batch, kv_heads, past, head_size] in; ``logits`` and
    ``present.N.key``/``.value`` (the cache grown by the new tokens) out. The lengths are named
    ``sequence``, ``total`` and ``past``: the signature does not say that total is their sum."""
    import torch

    generator = torch.Generator().manual_seed(SEED)
    past_length = 5
    ids = torch.randint(0, VOCAB, (BATCH, SEQUENCE), generator=generator)
    mask = torch.ones(BATCH, past_length + SEQUENCE, dtype=torch.int64)
    mask[1, :2] = 0  # one row padded on the left, as batched generation pads
    cache = [torch.randn(BATCH, kv_heads, past_length, head_size, generator=generator)
             for _ in range(2 * layers)]
    past_names = [f"past_key_values.{i}.{kind}" for i in range(layers)
                  for kind in ("key", "value")]
    present = [f"present.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "total"},
            "logits": {0: "batch", 1: "sequence"}}
    axes.update({name: {0: "batch", 2: "past"} for name in past_names})
    axes.update({name: {0: "batch", 2: "total"} for name in present})
    return Case(cache_step(model, layers), (ids, mask, *cache),
                ["input_ids", "attention_mask", *past_names], ["logits", *present], axes)


def gpt2_cache(small: bool, dynamic_hw: bool) -> Case:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=VOCAB, n_embd=128, n_layer=_layers(small), n_head=4,
                        n_positions=512, **EAGER)
    return _cached(GPT2LMHeadModel(config), _layers(small), 4, 32)


def llama_cache(small: bool, dynamic_hw: bool) -> Case:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=256,
                         num_hidden_layers=_layers(small), num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=512, **EAGER)
    return _cached(LlamaForCausalLM(config), _layers(small), 2, 32)


def mistral_cache(small: bool, dynamic_hw: bool) -> Case:
    """Mistral's step with its cache: sliding-window attention (a window shorter than the past
    and the new tokens), grouped key/value heads, rotary embeddings that ONNX Runtime's
    RotaryEmbedding fusion matches."""
    from transformers import MistralConfig, MistralForCausalLM

    config = MistralConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                           num_hidden_layers=_layers(small), num_attention_heads=4,
                           num_key_value_heads=2, sliding_window=6,
                           max_position_embeddings=512, **EAGER)
    return _cached(MistralForCausalLM(config), _layers(small), 2, 16)


def qwen2(small: bool, dynamic_hw: bool) -> Case:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=VOCAB, hidden_size=128, intermediate_size=256,
                         num_hidden_layers=_layers(small), num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=512, use_cache=False,
                         **EAGER)
    return _text(Qwen2ForCausalLM(config), ("input_ids", "attention_mask"), ("logits",))


def vit_hf(small: bool, dynamic_hw: bool) -> Case:
    import torch
    from transformers import ViTConfig, ViTModel

    config = ViTConfig(hidden_size=128, num_hidden_layers=_layers(small), num_attention_heads=4,
                       intermediate_size=256, image_size=96, patch_size=16,
                       **EAGER)
    outputs = ("last_hidden_state", "pooler_output")
    module = _wrap(ViTModel(config), ("pixel_values",), outputs).eval()
    x = torch.randn(BATCH, 3, 96, 96)
    return Case(module, (x,), ["pixel_values"], list(outputs),
                {"pixel_values": {0: "batch"}, "last_hidden_state": {0: "batch"},
                 "pooler_output": {0: "batch"}})


def whisper_encoder(small: bool, dynamic_hw: bool) -> Case:
    """Whisper's audio encoder: input_features [batch, 80 mel bins, 2 x max_source_positions]
    (the encoder accepts that length only, so the frames are not a dynamic axis)."""
    import torch
    from transformers import WhisperConfig, WhisperModel

    config = WhisperConfig(vocab_size=VOCAB, d_model=64, encoder_layers=_layers(small),
                           decoder_layers=1, encoder_attention_heads=4,
                           decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256,
                           num_mel_bins=80, max_source_positions=100, max_target_positions=64,
                           pad_token_id=1, bos_token_id=2, eos_token_id=2,
                           decoder_start_token_id=3, use_cache=False,
                           **EAGER)
    encoder = WhisperModel(config).get_encoder()
    module = _wrap(encoder, ("input_features",), ("last_hidden_state",)).eval()
    x = torch.randn(BATCH, 80, 200)
    return Case(module, (x,), ["input_features"], ["last_hidden_state"],
                {"input_features": {0: "batch"}, "last_hidden_state": {0: "batch"}})


def wav2vec2(small: bool, dynamic_hw: bool) -> Case:
    """Wav2Vec2 on raw audio: input_values [batch, samples] (the feature encoder needs 400+)."""
    import torch
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    config = Wav2Vec2Config(vocab_size=32, hidden_size=64, num_hidden_layers=_layers(small),
                            num_attention_heads=4, intermediate_size=128,
                            conv_dim=(32,) * 7, num_conv_pos_embeddings=16,
                            num_conv_pos_embedding_groups=4, **EAGER)
    module = _wrap(Wav2Vec2Model(config), ("input_values",), ("last_hidden_state",)).eval()
    x = torch.randn(BATCH, 2000)
    return Case(module, (x,), ["input_values"], ["last_hidden_state"],
                {"input_values": {0: "batch", 1: "samples"},
                 "last_hidden_state": {0: "batch", 1: "frames"}})


FAMILIES: dict[str, Callable[[bool, bool], Case]] = {
    "resnet18": resnet18,
    "mobilenet_v3_small": mobilenet_v3_small,
    "efficientnet_b0": efficientnet_b0,
    "convnext": convnext,
    "swin": swin,
    "vit_tv": vit_tv,
    "lraspp": lraspp,
    "bert": bert,
    "distilbert": distilbert,
    "gpt2": gpt2,
    "t5_encoder": t5_encoder,
    "bart_encoder": bart_encoder,
    "vit_hf": vit_hf,
    "whisper_encoder": whisper_encoder,
    "wav2vec2": wav2vec2,
    "llama": llama,
    "qwen2": qwen2,
    "transformer_encoder": transformer_encoder,
}
# Families exported by one variant only (see variants()).
SINGLE_FAMILIES: dict[str, Callable[[bool, bool], Case]] = {
    "blocks": blocks,
    "bert_layers": bert_layers,
    "gpt2_cache": gpt2_cache,
    "llama_cache": llama_cache,
    "mistral_cache": mistral_cache,
}
# Exported with dynamic height and width by both exporters.
DYNAMIC_HW_FAMILIES = ("lraspp",)
HALF_FAMILIES = ("resnet18", "mobilenet_v3_small", "bert", "llama")


def variants() -> list[Variant]:
    """Every file the corpus holds, in build order."""
    out: list[Variant] = []
    for family in FAMILIES:
        hw = family in DYNAMIC_HW_FAMILIES
        suffix = "_dynhw" if hw else ""
        for exporter in ("legacy", "dynamo"):
            out.append(Variant(f"{family}_{exporter}{suffix}", family, exporter, dynamic_hw=hw))
    for family in HALF_FAMILIES:
        for exporter in ("legacy", "dynamo"):
            out.append(Variant(f"{family}_{exporter}_fp16", family, exporter, half=True))
    for family in HALF_FAMILIES:
        for exporter in ("legacy", "dynamo"):
            out.append(Variant(f"{family}_{exporter}_fp16_raw", family, exporter, half=True,
                               raw=True))
    out += [
        Variant("blocks_legacy_functions", "blocks", "legacy", functions=True),
        Variant("bert_legacy_functions", "bert_layers", "legacy", functions=True),
        Variant("resnet18_legacy_opset20", "resnet18", "legacy", opset=20),
        Variant("bert_dynamo_opset18", "bert", "dynamo", opset=18),
        Variant("resnet18_legacy_dynhw", "resnet18", "legacy", dynamic_hw=True),
        Variant("resnet18_paddle_dims", "resnet18", "legacy", paddle_from="resnet18_legacy_dynhw"),
        Variant("bert_paddle_dims", "bert", "legacy", paddle_from="bert_legacy"),
        Variant("gpt2_legacy_cache", "gpt2_cache", "legacy"),
        Variant("llama_legacy_cache", "llama_cache", "legacy"),
        Variant("mistral_legacy_cache", "mistral_cache", "legacy"),
    ]
    return out


# --------------------------------------------------------------------------- export


def _randomize_zero_weights(module: nn.Module) -> None:
    """Give a weight matrix initialized to zero (torchvision's ViT's classifier head) random
    values: an output computed through zeros is zeros whatever the layers before it compute,
    and no check on it can see a rewrite of theirs."""
    import torch

    with torch.no_grad():
        for tensor in module.parameters():
            if tensor.is_floating_point() and tensor.dim() >= 2 and not tensor.any():
                tensor.normal_(0.0, 0.02)


def _randomize_norms(module: nn.Module) -> None:
    """Give every normalization layer affine weights and statistics far from the identity
    (random initialisation leaves BatchNorm at mean 0, variance 1, LayerNorm at 1 and 0), so
    that a rewrite that drops or misplaces one changes the outputs."""
    import torch
    from torch import nn

    norms = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.LayerNorm, nn.GroupNorm)
    with torch.no_grad():
        for layer in module.modules():
            is_norm = isinstance(layer, norms) or type(layer).__name__.endswith(
                ("LayerNorm", "RMSNorm"))
            if not is_norm:
                continue
            for name, tensor in [*layer.named_parameters(recurse=False),
                                 *layer.named_buffers(recurse=False)]:
                if not tensor.is_floating_point():
                    continue
                if name in ("weight", "running_var"):
                    tensor.uniform_(0.5, 1.5)
                elif name in ("bias", "running_mean"):
                    tensor.uniform_(-0.2, 0.2)


def _half(case: Case) -> Case:
    args = tuple(a.half() if a.is_floating_point() else a for a in case.args)
    return dataclasses.replace(case, module=case.module.half(), args=args)


def _dynamic_shapes(case: Case, named: bool) -> tuple[dict[int, Any], ...]:
    """The inputs' dynamic axes as ``torch.export.Dim``, in the order of the arguments: one
    named Dim per axis name (shared between inputs), or ``Dim.DYNAMIC`` everywhere."""
    from torch.export import Dim

    dims: dict[str, Any] = {}
    shapes = []
    for name in case.input_names:
        axes = case.axes.get(name, {})
        if named:
            shapes.append({axis: dims.setdefault(label, Dim(label, min=1, max=4096))
                           for axis, label in axes.items()})
        else:
            shapes.append({axis: Dim.DYNAMIC for axis in axes})
    return tuple(shapes)


def export(case: Case, variant: Variant, path: Path) -> list[str]:
    """Export ``case`` as ``variant`` says to ``path``; returns notes on fallbacks taken."""
    import torch

    # nn.MultiheadAttention's inference fast path is one fused op the legacy exporter cannot
    # write; both exporters get the same unfused module.
    torch.backends.mha.set_fastpath_enabled(False)
    notes: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporters' deprecation and tracer warnings
        if variant.exporter == "legacy":
            _export_legacy(case, variant, path)
        else:
            notes += _export_dynamo(case, variant, path)
    return notes


def _export_legacy(case: Case, variant: Variant, path: Path) -> None:
    import torch

    with torch.no_grad():
        torch.onnx.export(
            case.module, case.args, str(path), dynamo=False,
            opset_version=variant.opset or LEGACY_OPSET, input_names=case.input_names,
            output_names=case.output_names, dynamic_axes=case.axes,
            do_constant_folding=not variant.raw,
            export_modules_as_functions=set(case.functions) if variant.functions else False,
        )


def _export_dynamo(case: Case, variant: Variant, path: Path) -> list[str]:
    """The dynamo export with named Dims, or with ``Dim.DYNAMIC`` when those are refused."""
    import torch

    notes: list[str] = []
    errors: list[Exception] = []
    for named in (True, False):
        try:
            with torch.no_grad():
                torch.onnx.export(
                    case.module, case.args, str(path), dynamo=True, opset_version=variant.opset,
                    input_names=case.input_names, output_names=case.output_names,
                    dynamic_shapes=_dynamic_shapes(case, named), verbose=False,
                    optimize=not variant.raw,
                )
            if not named:
                notes.append(f"named Dims refused ({_first_line(errors[0])}); "
                             "exported with Dim.DYNAMIC")
            return notes
        except Exception as err:  # noqa: BLE001 - the retry, then the recorded failure
            errors.append(err)
    raise errors[-1]


def paddle_dims(model: onnx.ModelProto) -> int:
    """Write every dynamic dimension of the inputs and outputs (a name, or nothing) as
    ``dim_value: -1``, in place; returns how many were rewritten."""
    count = 0
    for value in [*model.graph.input, *model.graph.output]:
        if not value.type.HasField("tensor_type") or not value.type.tensor_type.HasField("shape"):
            continue
        for dim in value.type.tensor_type.shape.dim:
            if not dim.HasField("dim_value"):
                dim.Clear()
                dim.dim_value = -1
                count += 1
    return count


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"[:300]


def _build_one(variant: Variant, out: Path, small: bool) -> list[str]:
    """Write ``out/NAME.onnx`` (and its data file) through a scratch folder, so that a failed
    or interrupted export leaves nothing that looks like a built model."""
    import torch

    target = out / f"{variant.name}.onnx"
    with tempfile.TemporaryDirectory(prefix=f".{variant.name}-", dir=out) as scratch:
        path = Path(scratch) / target.name
        if variant.paddle_from:
            source = out / f"{variant.paddle_from}.onnx"
            if not source.exists():
                raise FileNotFoundError(f"{source.name} was not built")
            model = onnx.load(source)
            rewritten = paddle_dims(model)
            onnx.save(model, path)
            notes = [f"{rewritten} dimensions written as -1"]
        else:
            torch.manual_seed(SEED)
            family = FAMILIES.get(variant.family) or SINGLE_FAMILIES[variant.family]
            case = family(small, variant.dynamic_hw)
            _randomize_norms(case.module)
            _randomize_zero_weights(case.module)
            if variant.half:
                case = _half(case)
            notes = export(case, variant, path)
        onnx.checker.check_model(str(path))
        for file in sorted(Path(scratch).iterdir()):
            os.replace(file, out / file.name)
    return notes


def _build_project(out: Path, small: bool) -> list[str]:
    """The project's corpus, written to a scratch folder and renamed ``project/`` when whole."""
    from graphfix.models.corpus import build_corpus

    folder = out / PROJECT
    scratch = Path(tempfile.mkdtemp(prefix=f".{PROJECT}-", dir=out))
    try:
        written = build_corpus(scratch, full_size=not small, include_torch=True)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(scratch, folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return [f"{len(written)} models in {PROJECT}/ ({'small' if small else 'full'} size)"]


def _attempt(name: str, job: Callable[[], list[str]]) -> dict[str, Any]:
    """Run one build; its failure is recorded and printed, never raised."""
    print(f"building {name} ...", flush=True)
    started = time.perf_counter()
    try:
        entry: dict[str, Any] = {"status": "built", "notes": job()}
    except Exception as err:  # noqa: BLE001 - one model's failure must not stop the rest
        entry = {"status": "failed", "error": _first_line(err),
                 "traceback": traceback.format_exc(limit=-6)}
        print(f"  FAILED {name}: {entry['error']}", flush=True)
    entry["seconds"] = round(time.perf_counter() - started, 1)
    for note in entry.get("notes", []):
        print(f"  note: {note}", flush=True)
    return entry


def build(out: Path, names: Sequence[str] = (), small: bool = False) -> dict[str, dict[str, Any]]:
    """Build the variants named (all by default) and the project corpus into ``out``, skipping
    what exists; returns each one's status ({"status", "seconds", "error", "notes"})."""
    out.mkdir(parents=True, exist_ok=True)
    wanted = set(names)
    status: dict[str, dict[str, Any]] = {}
    for variant in variants():
        if wanted and variant.name not in wanted:
            continue
        if (out / f"{variant.name}.onnx").exists():
            status[variant.name] = {"status": "existing"}
        else:
            status[variant.name] = _attempt(
                variant.name, functools.partial(_build_one, variant, out, small))
    if not wanted or PROJECT in wanted:
        if any((out / PROJECT).glob("*.onnx")):
            status[PROJECT] = {"status": "existing"}
        else:
            status[PROJECT] = _attempt(PROJECT, functools.partial(_build_project, out, small))
    return status


# --------------------------------------------------------------------------- the table


def _models(out: Path) -> Iterator[Path]:
    yield from sorted(out.glob("*.onnx"))
    yield from sorted((out / PROJECT).glob("*.onnx"))


def _size(path: Path) -> int:
    model = onnx.load(path, load_external_data=False)
    locations = {entry.value for tensor in model.graph.initializer
                 for entry in tensor.external_data if entry.key == "location"}
    return path.stat().st_size + sum((path.parent / loc).stat().st_size for loc in locations
                                     if (path.parent / loc).exists())


def table(out: Path) -> list[dict[str, Any]]:
    """One row per model in ``out``: name, nodes, nodes expanded, opset, float types, dynamic
    input dimensions, bytes on disk."""
    rows = []
    for path in _models(out):
        model = onnx.load(path, load_external_data=False)
        top, expanded = node_counts(model)
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
        dims = dynamic_dims(model)
        rows.append({
            "name": str(path.relative_to(out).with_suffix("")),
            "nodes": top,
            "nodes_all": expanded,
            "opset": opset,
            "float": float_types(model),
            "dynamic": " ".join(f"{name}[{','.join(map(str, shape))}]"
                                for name, shape in dims.items()),
            "bytes": _size(path),
        })
    return rows


def print_table(rows: Sequence[Mapping[str, Any]]) -> None:
    print(f"\n{'model':<34} {'nodes':>6} {'all':>6} {'opset':>5} {'float':<16} {'size':>8}  "
          "dynamic inputs")
    for row in rows:
        print(f"{row['name']:<34} {row['nodes']:>6} {row['nodes_all']:>6} {row['opset']!s:>5} "
              f"{row['float']:<16} {row['bytes'] / 2**20:>6.1f}MB  {row['dynamic'] or '-'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path, nargs="?")
    parser.add_argument("--only", nargs="+", default=[], metavar="NAME",
                        help=f"build these models only ({PROJECT!r}: the project corpus)")
    parser.add_argument("--small", action="store_true", help="smaller, faster models")
    parser.add_argument("--list", action="store_true", help="list the model names and exit")
    args = parser.parse_args(argv)
    if args.list:
        for variant in variants():
            print(f"{variant.name:<34} {variant.description}")
        print(f"{PROJECT:<34} models.corpus.build_corpus, in {PROJECT}/")
        return 0
    if args.out_dir is None:
        parser.error("OUT_DIR is required")
    known = {v.name for v in variants()} | {PROJECT}
    unknown = sorted(set(args.only) - known)
    if unknown:
        parser.error(f"unknown model(s): {', '.join(unknown)} (see --list)")
    out: Path = args.out_dir
    started = time.perf_counter()
    status = build(out, args.only, args.small)
    save_status(out / STATUS_FILE, status)
    print_table(table(out))
    return summarize(status, started)


def save_status(status_file: Path, status: dict[str, dict[str, Any]]) -> None:
    """Merge the models built or failed into the manifest ``status_file``."""
    manifest = json.loads(status_file.read_text()) if status_file.exists() else {}
    manifest.update({name: e for name, e in status.items() if e["status"] != "existing"})
    status_file.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def summarize(status: dict[str, dict[str, Any]], started: float) -> int:
    """Print how many models were built, already there and failed (with why); returns the
    exit status (1 if any failed)."""
    failed = {name: e for name, e in status.items() if e["status"] == "failed"}
    built = sum(e["status"] == "built" for e in status.values())
    print(f"\n{built} built, {len(status) - built - len(failed)} existing, {len(failed)} failed "
          f"in {time.perf_counter() - started:.0f}s")
    for name, entry in failed.items():
        print(f"  {name}: {entry['error']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
