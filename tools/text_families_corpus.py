"""Build a corpus of transformer families as users export them, to test graphfix on.

    python tools/text_families_corpus.py OUT_DIR [--only NAME ...] [--list]

Every model is a small transformers 5 configuration with random weights (two layers, hidden 64,
vocabulary 1000; nothing is downloaded) built after ``torch.manual_seed(0)``; its 1-D weights
and biases and batch-norm statistics are then drawn away from their initial values, so that a
rewrite dropping a normalization or a bias changes the outputs. Each is written to
``OUT_DIR/NAME.onnx``; a model whose file already exists is not built again. Families:

- encoder-decoder halves, the decoder over given encoder states: ``t5_decoder`` (relative
  position bias), ``bart_decoder``, ``marian_decoder`` (sinusoidal positions), ``whisper_decoder``
  (no encoder mask, encoder length fixed at 50). ``*_first``: the first step, no cache in, logits
  and both attentions' caches out; ``*_past``: one token after 5, ``past_key_values.N.decoder.key``
  ... ``.encoder.value`` in, the grown self-attention cache out;
- towers: ``clip_text``, ``siglip_text`` (no mask), ``clip_vision``, ``siglip_vision``, ``deit``
  (distillation head), ``beit`` (relative position bias), ``segformer`` (1, 2, 4, 8 heads per
  stage, dynamic height and width), ``detr`` (ResNet backbone, encoder-decoder, boxes);
- encoders: ``roberta``, ``xlmr`` (classification, 8 heads), ``albert`` (factorized embeddings,
  shared layers), ``deberta_v2`` (disentangled relative attention), ``electra``;
- decoder LMs, one step of 8 tokens after a cache of 5, a left-padded mask over both
  (``past_key_values.N.key``/``.value`` in, ``present.N.*`` out): ``mistral_past`` (sliding
  window 6), ``phi3_past`` (fused qkv), ``gemma_past`` (multi-query, head size 32 against
  hidden/heads 16), ``gemma2_past`` (soft-capping), ``falcon_past`` (multi-query, parallel
  attention), ``falcon_gqa_past`` (Falcon-40B layout; transformers caches all 4 heads),
  ``gptneox_past`` (partial rotary), ``opt_past``, ``bloom_past`` and ``mpt_past`` (ALiBi),
  ``llama_past``, ``qwen2_past`` (grouped-query attention, qkv bias);
- SDPA attention (transformers' default; the others are eager): ``roberta_sdpa``,
  ``bert_sdpa``, ``mistral_sdpa_past``, ``gpt2_sdpa_past``.

All are exported by the TorchScript exporter (``dynamo=False``, opset 17, ``dynamic_axes``)
except ``*_dynamo`` (``dynamo=True``, its default opset, weights in ``.onnx.data``,
``Dim.DYNAMIC``; ``clip_text`` and ``mistral`` with SDPA, Mistral without cache) and
``*_dynamo_named`` (named ``torch.export.Dim`` shared between inputs, ``Dim.AUTO`` for the total
length). Each export goes through a scratch folder and is kept once ONNX Runtime loads it; one
model failing does not stop the others. ``OUT_DIR/text_families_corpus.json`` records per model
its status, exporter, true attention heads and key/value heads (what a fusion should find),
notes, nodes, bytes and seconds, or its error; the run ends with how many were built, already
there and failed. The whole corpus takes about a minute on 2 cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
import os
import re
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = ["Case", "Model", "attempt", "build", "first_line", "main", "models", "randomize",
           "report"]

SEED = 0
STATUS_FILE = "text_families_corpus.json"
LEGACY_OPSET = 17
VOCAB = 1000
BATCH, SEQUENCE, PAST = 2, 8, 5  # example sizes: 5 cached tokens, 8 new ones
EAGER: dict[str, Any] = {"attn_implementation": "eager"}
SDPA: dict[str, Any] = {"attn_implementation": "sdpa"}


@dataclasses.dataclass
class Case:
    """A module with example inputs, their names and dynamic axes (inputs and outputs by name),
    and the attention heads the model really has."""

    module: nn.Module
    args: tuple[torch.Tensor, ...]
    input_names: list[str]
    output_names: list[str]
    axes: dict[str, dict[int, str]]
    heads: int | list[int]
    kv_heads: int | None = None
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Model:
    """One file of the corpus: a builder and the exporter that writes it."""

    name: str
    build: Callable[[], Case]
    exporter: str  # "legacy", "dynamo" (Dim.DYNAMIC) or "dynamo_named" (named Dims)


def randomize(module: nn.Module) -> None:
    """Draw every 1-D weight and bias (norm scales, biases) and batch-norm statistics away from
    their initial values, in place."""
    import torch

    generator = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
            if not tensor.is_floating_point():
                continue
            leaf = name.rsplit(".", 1)[-1]
            scale = (tensor.dim() == 1 and leaf == "weight") or leaf == "running_var"
            shift = (tensor.dim() == 1 and leaf == "bias") or leaf == "running_mean"
            if scale:
                tensor.copy_(torch.rand(tensor.shape, generator=generator) + 0.5)
            elif shift:
                tensor.copy_(torch.randn(tensor.shape, generator=generator) * 0.1)


def _generator() -> torch.Generator:
    import torch

    return torch.Generator().manual_seed(SEED)


# --------------------------------------------------------------------------- encoders and towers


def _outputs_of(model: nn.Module, names: Sequence[str], outs: Sequence[str]) -> nn.Module:
    """``model`` called with its inputs named ``names`` (positionally), returning ``outs``."""
    from torch import nn

    class Outputs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model, self.names, self.outs = model, list(names), list(outs)

        def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
            out = self.model(**dict(zip(self.names, args)), return_dict=True)
            return tuple(out[key] for key in self.outs)

    return Outputs()


def text_case(model: nn.Module, heads: int,
              names: Sequence[str] = ("input_ids", "attention_mask"),
              outs: Sequence[str] = ("last_hidden_state",)) -> Case:
    """Token inputs [batch, sequence], the second row padded at the end."""
    import torch

    ids = torch.randint(3, VOCAB, (BATCH, SEQUENCE), generator=_generator())
    mask = torch.ones(BATCH, SEQUENCE, dtype=torch.int64)
    mask[1, -2:] = 0
    values = {"input_ids": ids, "attention_mask": mask,
              "token_type_ids": torch.zeros(BATCH, SEQUENCE, dtype=torch.int64)}
    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    for name in outs:
        per_token = name in ("last_hidden_state", "logits")
        axes[name] = {0: "batch", 1: "sequence"} if per_token else {0: "batch"}
    return Case(_outputs_of(model, names, outs).eval(), tuple(values[n] for n in names),
                list(names), list(outs), axes, heads)


def pixel_case(model: nn.Module, heads: int | list[int], outs: Sequence[str],
               dynamic_hw: bool = False) -> Case:
    """An image [batch, 3, 64, 64] as ``pixel_values``."""
    import torch

    x = torch.randn(BATCH, 3, 64, 64, generator=_generator())
    axes = {"pixel_values": {0: "batch", 2: "height", 3: "width"} if dynamic_hw else {0: "batch"}}
    axes.update({name: {0: "batch"} for name in outs})
    return Case(_outputs_of(model, ["pixel_values"], outs).eval(), (x,), ["pixel_values"],
                list(outs), axes, heads)


def _hf(model_class: str, attention: dict[str, Any] = EAGER, **config: Any) -> nn.Module:
    """The transformers model ``model_class`` with random weights, from its config class."""
    import transformers

    cls = getattr(transformers, model_class)
    return cls(cls.config_class(**config, **attention))


_ENCODER: dict[str, Any] = {"vocab_size": VOCAB, "hidden_size": 64, "num_hidden_layers": 2,
                            "num_attention_heads": 4, "intermediate_size": 128}
_WITH_TYPES = ("input_ids", "attention_mask", "token_type_ids")
_POOLED = ("last_hidden_state", "pooler_output")


def roberta(attention: dict[str, Any] = EAGER) -> Case:
    model = _hf("RobertaModel", attention, **_ENCODER, max_position_embeddings=130,
                pad_token_id=1)
    return text_case(model, 4, outs=_POOLED)


def xlmr() -> Case:
    model = _hf("XLMRobertaForSequenceClassification", **{**_ENCODER, "num_attention_heads": 8},
                max_position_embeddings=130, pad_token_id=1, num_labels=3)
    return text_case(model, 8, outs=("logits",))


def albert() -> Case:
    model = _hf("AlbertModel", vocab_size=VOCAB, embedding_size=32, hidden_size=64,
                num_hidden_layers=3, num_attention_heads=2, intermediate_size=128)
    return text_case(model, 2, names=_WITH_TYPES, outs=_POOLED)


def deberta_v2() -> Case:
    model = _hf("DebertaV2Model", **_ENCODER, max_position_embeddings=128,
                relative_attention=True, position_buckets=32, pos_att_type=["p2c", "c2p"],
                norm_rel_ebd="layer_norm", share_att_key=True, position_biased_input=False,
                max_relative_positions=-1, type_vocab_size=0)
    return text_case(model, 4)


def electra() -> Case:
    model = _hf("ElectraForPreTraining", **_ENCODER, embedding_size=32)
    return text_case(model, 4, names=_WITH_TYPES, outs=("logits",))


def bert_sdpa() -> Case:
    return text_case(_hf("BertModel", SDPA, **_ENCODER), 4, names=_WITH_TYPES, outs=_POOLED)


def clip_text(attention: dict[str, Any] = EAGER) -> Case:
    model = _hf("CLIPTextModel", attention, **_ENCODER, max_position_embeddings=32,
                eos_token_id=2)
    return text_case(model, 4, outs=_POOLED)


def siglip_text() -> Case:
    """SigLIP's text tower runs without an attention mask (its inputs are padded to length)."""
    model = _hf("SiglipTextModel", **_ENCODER, max_position_embeddings=32)
    return text_case(model, 4, names=("input_ids",), outs=_POOLED)


_TOWER: dict[str, Any] = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                          "intermediate_size": 128, "image_size": 64, "patch_size": 16}


def clip_vision() -> Case:
    return pixel_case(_hf("CLIPVisionModel", **_TOWER), 4, _POOLED)


def siglip_vision() -> Case:
    return pixel_case(_hf("SiglipVisionModel", **_TOWER), 4, _POOLED)


def deit() -> Case:
    model = _hf("DeiTForImageClassificationWithTeacher", **_TOWER, num_labels=10)
    return pixel_case(model, 4, ("logits",))


def beit() -> Case:
    model = _hf("BeitModel", **_TOWER, use_relative_position_bias=True, use_mean_pooling=True)
    return pixel_case(model, 4, _POOLED)


def segformer() -> Case:
    model = _hf("SegformerForSemanticSegmentation", num_encoder_blocks=4, depths=[1, 1, 1, 1],
                sr_ratios=[8, 4, 2, 1], hidden_sizes=[16, 32, 64, 128],
                num_attention_heads=[1, 2, 4, 8], decoder_hidden_size=64, num_labels=5)
    return pixel_case(model, [1, 2, 4, 8], ("logits",), dynamic_hw=True)


def detr() -> Case:
    from transformers import ResNetConfig

    backbone = ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                            out_features=["stage1", "stage2", "stage3", "stage4"])
    model = _hf("DetrForObjectDetection", backbone_config=backbone, d_model=64, encoder_layers=2,
                decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                encoder_ffn_dim=128, decoder_ffn_dim=128, num_queries=10, num_labels=5)
    return pixel_case(model, 4, ("logits", "pred_boxes"))


# --------------------------------------------------------------------------- decoder LMs with cache


def cached_lm(model: nn.Module, heads: int, kv_heads: int, head_size: int, note: str,
              layers: int = 2) -> Case:
    """One generation step: ``input_ids`` [batch, sequence] after a cache of ``PAST`` tokens,
    ``attention_mask`` [batch, past + sequence] (the second row left-padded); returns the
    logits and the grown cache."""
    import torch

    from world_corpus import cache_step  # the same step, as the world corpus exports it

    generator = _generator()
    ids = torch.randint(3, VOCAB, (BATCH, SEQUENCE), generator=generator)
    mask = torch.ones(BATCH, PAST + SEQUENCE, dtype=torch.int64)
    mask[1, :2] = 0
    past = [torch.randn(BATCH, kv_heads, PAST, head_size, generator=generator)
            for _ in range(2 * layers)]
    past_names = [f"past_key_values.{i}.{k}" for i in range(layers) for k in ("key", "value")]
    present = [f"present.{i}.{k}" for i in range(layers) for k in ("key", "value")]
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "total"},
            "logits": {0: "batch", 1: "sequence"}}
    axes.update({name: {0: "batch", 2: "past"} for name in past_names})
    axes.update({name: {0: "batch", 2: "total"} for name in present})
    return Case(cache_step(model, layers), (ids, mask, *past), ["input_ids", "attention_mask", *past_names],
                ["logits", *present], axes, heads, kv_heads, note)


_LM: dict[str, Any] = {"vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 128,
                       "num_hidden_layers": 2, "num_attention_heads": 4,
                       "max_position_embeddings": 256}


def mistral(attention: dict[str, Any] = EAGER, cache: bool = True) -> Case:
    model = _hf("MistralForCausalLM", attention, **_LM, num_key_value_heads=2, sliding_window=6)
    if not cache:
        return text_case(model, 4, outs=("logits",))
    return cached_lm(model, 4, 2, 16, note="sliding_window=6 (< past+seq=13)")


def phi3() -> Case:
    model = _hf("Phi3ForCausalLM", **_LM, num_key_value_heads=2, pad_token_id=0, bos_token_id=1,
                eos_token_id=2)
    return cached_lm(model, 4, 2, 16, note="fused qkv_proj, GQA")


def gemma() -> Case:
    model = _hf("GemmaForCausalLM", **_LM, num_key_value_heads=1, head_dim=32)
    return cached_lm(model, 4, 1, 32, note="MQA, head_dim 32 != hidden/heads 16")


def gemma2() -> Case:
    model = _hf("Gemma2ForCausalLM", **_LM, num_key_value_heads=2, head_dim=16, sliding_window=6,
                attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                query_pre_attn_scalar=16)
    return cached_lm(model, 4, 2, 16, note="softcap 50/30, sliding 6")


def falcon() -> Case:
    model = _hf("FalconForCausalLM", vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                num_attention_heads=4, multi_query=True, new_decoder_architecture=False,
                parallel_attn=True, alibi=False, bias=False)
    return cached_lm(model, 4, 1, 16, note="multi_query, parallel attn, rotary")


def falcon_gqa() -> Case:
    model = _hf("FalconForCausalLM", vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_kv_heads=2, new_decoder_architecture=True,
                alibi=False, bias=False)
    return cached_lm(model, 4, 4, 16, note="falcon-40b style GQA (num_kv_heads=2; transformers "
                                           "caches 4 heads: export with 2 failed)")


def gptneox() -> Case:
    model = _hf("GPTNeoXForCausalLM", **_LM, rotary_pct=0.25, use_parallel_residual=True)
    return cached_lm(model, 4, 4, 16, note="partial rotary 0.25")


def opt() -> Case:
    model = _hf("OPTForCausalLM", vocab_size=VOCAB, hidden_size=64, ffn_dim=128,
                num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=256,
                word_embed_proj_dim=64)
    return cached_lm(model, 4, 4, 16, note="learned positions from mask cumsum")


def bloom() -> Case:
    model = _hf("BloomForCausalLM", vocab_size=VOCAB, hidden_size=64, n_layer=2, n_head=4)
    return cached_lm(model, 4, 4, 16, note="ALiBi")


def mpt() -> Case:
    model = _hf("MptForCausalLM", vocab_size=VOCAB, d_model=64, n_layers=2, n_heads=4,
                expansion_ratio=2, max_seq_len=256)
    return cached_lm(model, 4, 4, 16, note="ALiBi")


def llama() -> Case:
    return cached_lm(_hf("LlamaForCausalLM", **_LM, num_key_value_heads=2), 4, 2, 16,
                     note="baseline")


def qwen2() -> Case:
    return cached_lm(_hf("Qwen2ForCausalLM", **_LM, num_key_value_heads=2), 4, 2, 16,
                     note="GQA, qkv bias")


def gpt2_sdpa() -> Case:
    model = _hf("GPT2LMHeadModel", SDPA, vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4,
                n_positions=256)
    return cached_lm(model, 4, 4, 16, note="sdpa, cache")


# --------------------------------------------------------------------------- encoder-decoder halves


def _seq2seq_step(model: nn.Module, layers: int, with_past: bool, whisper: bool) -> nn.Module:
    """The decoder over ``encoder_hidden_states``: with the cache of both attentions in and the
    grown self-attention cache out (``with_past``), or no cache in and both caches out. Whisper
    takes no encoder mask."""
    from torch import nn
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache

    class Step(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, encoder_hidden_states: torch.Tensor,
                    encoder_attention_mask: torch.Tensor | None = None,
                    *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
            kwargs: dict[str, Any] = {}
            if with_past:
                self_cache, cross_cache = DynamicCache(), DynamicCache()
                for i in range(layers):
                    self_cache.update(past[4 * i], past[4 * i + 1], i)
                    cross_cache.update(past[4 * i + 2], past[4 * i + 3], i)
                kwargs["past_key_values"] = EncoderDecoderCache(self_cache, cross_cache)
            if encoder_attention_mask is not None:
                kwargs["attention_mask"] = encoder_attention_mask
            out = self.model(decoder_input_ids=input_ids,
                             encoder_outputs=(encoder_hidden_states,), use_cache=True,
                             return_dict=True, **kwargs)
            cache = out.past_key_values
            result = [out.logits]
            for i in range(layers):
                grown = cache.self_attention_cache.layers[i]
                result += [grown.keys, grown.values]
                if not with_past:
                    cross = cache.cross_attention_cache.layers[i]
                    result += [cross.keys, cross.values]
            return tuple(result)

    class W(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.s = Step()

        def forward(self, input_ids: torch.Tensor, encoder_hidden_states: torch.Tensor,
                    *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return self.s(input_ids, encoder_hidden_states, None, *past)

    return (W() if whisper else Step()).eval()


def seq2seq_decoder(model: nn.Module, heads: int, head_size: int, with_past: bool,
                    encoder_length: int = 10, note: str = "", whisper: bool = False,
                    layers: int = 2) -> Case:
    import torch

    generator = _generator()
    ids = torch.randint(3, VOCAB, (BATCH, 1 if with_past else SEQUENCE), generator=generator)
    states = torch.randn(BATCH, encoder_length, model.config.d_model, generator=generator)
    names = ["input_ids", "encoder_hidden_states"]
    args = [ids, states]
    axes = {"input_ids": {0: "batch", 1: "sequence"},
            "encoder_hidden_states": {0: "batch"} if whisper
            else {0: "batch", 1: "encoder_sequence"},
            "logits": {0: "batch", 1: "sequence"}}
    if not whisper:
        mask = torch.ones(BATCH, encoder_length, dtype=torch.int64)
        mask[1, -3:] = 0
        names.append("encoder_attention_mask")
        args.append(mask)
        axes["encoder_attention_mask"] = {0: "batch", 1: "encoder_sequence"}
    outs = ["logits"]
    kinds = ("decoder.key", "decoder.value", "encoder.key", "encoder.value")
    for i in range(layers):
        for kind in kinds if with_past else ():
            name, encoder = f"past_key_values.{i}.{kind}", kind.startswith("encoder")
            length = encoder_length if encoder else PAST
            names.append(name)
            args.append(torch.randn(BATCH, heads, length, head_size, generator=generator))
            axes[name] = ({0: "batch"} if whisper and encoder
                          else {0: "batch", 2: "encoder_sequence" if encoder else "past"})
        for kind in kinds[:2] if with_past else kinds:
            name = f"present.{i}.{kind}"
            outs.append(name)
            length_axis = "encoder_sequence" if kind.startswith("encoder") else "sequence"
            axes[name] = {0: "batch", 2: "total" if with_past else length_axis}
    module = _seq2seq_step(model, layers, with_past, whisper)
    return Case(module, tuple(args), names, outs, axes, heads, note=note)


def t5_decoder(with_past: bool) -> Case:
    model = _hf("T5ForConditionalGeneration", vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128,
                num_layers=2, num_decoder_layers=2, num_heads=4, decoder_start_token_id=0)
    return seq2seq_decoder(model, 4, 16, with_past, note="relative position bias, cross-attention")


_SEQ2SEQ: dict[str, Any] = {"vocab_size": VOCAB, "d_model": 64, "encoder_layers": 1,
                            "decoder_layers": 2, "encoder_attention_heads": 4,
                            "decoder_attention_heads": 4, "encoder_ffn_dim": 128,
                            "decoder_ffn_dim": 128}


def bart_decoder(with_past: bool) -> Case:
    model = _hf("BartForConditionalGeneration", **_SEQ2SEQ, max_position_embeddings=128)
    return seq2seq_decoder(model, 4, 16, with_past)


def marian_decoder(with_past: bool) -> Case:
    model = _hf("MarianMTModel", **_SEQ2SEQ, max_position_embeddings=128, pad_token_id=0,
                decoder_start_token_id=0)
    return seq2seq_decoder(model, 4, 16, with_past, note="sinusoidal positions")


def whisper_decoder(with_past: bool) -> Case:
    model = _hf("WhisperForConditionalGeneration", **_SEQ2SEQ, num_mel_bins=80,
                max_source_positions=50, max_target_positions=64, pad_token_id=1,
                bos_token_id=2, eos_token_id=2, decoder_start_token_id=3)
    return seq2seq_decoder(model, 4, 16, with_past, encoder_length=50, whisper=True,
                           note="encoder length fixed at 50")


# --------------------------------------------------------------------------- the corpus


def models() -> list[Model]:
    """Every file the corpus holds, in build order."""
    partial = functools.partial
    return [
        Model("t5_decoder_past", partial(t5_decoder, True), "legacy"),
        Model("t5_decoder_first", partial(t5_decoder, False), "legacy"),
        Model("bart_decoder_past", partial(bart_decoder, True), "legacy"),
        Model("marian_decoder_first", partial(marian_decoder, False), "legacy"),
        Model("marian_decoder_past", partial(marian_decoder, True), "legacy"),
        Model("whisper_decoder_past", partial(whisper_decoder, True), "legacy"),
        Model("whisper_decoder_first", partial(whisper_decoder, False), "legacy"),
        Model("clip_text", clip_text, "legacy"),
        Model("clip_vision", clip_vision, "legacy"),
        Model("siglip_text", siglip_text, "legacy"),
        Model("siglip_vision", siglip_vision, "legacy"),
        Model("detr", detr, "legacy"),
        Model("segformer", segformer, "legacy"),
        Model("deit", deit, "legacy"),
        Model("beit", beit, "legacy"),
        Model("roberta", roberta, "legacy"),
        Model("roberta_sdpa", partial(roberta, SDPA), "legacy"),
        Model("xlmr", xlmr, "legacy"),
        Model("albert", albert, "legacy"),
        Model("deberta_v2", deberta_v2, "legacy"),
        Model("electra", electra, "legacy"),
        Model("bert_sdpa", bert_sdpa, "legacy"),
        Model("mistral_past", mistral, "legacy"),
        Model("mistral_sdpa_past", partial(mistral, SDPA), "legacy"),
        Model("phi3_past", phi3, "legacy"),
        Model("gemma_past", gemma, "legacy"),
        Model("gemma2_past", gemma2, "legacy"),
        Model("falcon_past", falcon, "legacy"),
        Model("gptneox_past", gptneox, "legacy"),
        Model("opt_past", opt, "legacy"),
        Model("bloom_past", bloom, "legacy"),
        Model("mpt_past", mpt, "legacy"),
        Model("llama_past", llama, "legacy"),
        Model("qwen2_past", qwen2, "legacy"),
        Model("falcon_gqa_past", falcon_gqa, "legacy"),
        Model("gpt2_sdpa_past", gpt2_sdpa, "legacy"),
        Model("roberta_dynamo", roberta, "dynamo"),
        Model("clip_text_dynamo", partial(clip_text, SDPA), "dynamo"),
        Model("mistral_dynamo", partial(mistral, SDPA, cache=False), "dynamo"),
        Model("t5_decoder_past_dynamo", partial(t5_decoder, True), "dynamo"),
        Model("phi3_past_dynamo", phi3, "dynamo"),
        Model("llama_past_dynamo_named", llama, "dynamo_named"),
        Model("whisper_decoder_past_dynamo_named", partial(whisper_decoder, True), "dynamo_named"),
    ]


# --------------------------------------------------------------------------- export


def _dynamic_shapes(case: Case, named: bool) -> tuple[Any, ...]:
    """The inputs' dynamic axes as ``torch.export.Dim``, grouped as the module's ``forward``
    takes them (the ``*args`` of a wrapper as one tuple): one named Dim per axis name, shared
    between inputs, and ``Dim.AUTO`` for the total length (past + new tokens, which the export
    derives); or ``Dim.DYNAMIC`` everywhere."""
    from torch.export import Dim

    dims: dict[str, Any] = {}

    def dim(label: str) -> Any:
        if not named:
            return Dim.DYNAMIC
        if label == "total":
            return Dim.AUTO
        return dims.setdefault(label, Dim(label, min=1, max=4096))

    per_input = [{axis: dim(label) for axis, label in case.axes.get(name, {}).items()} or None
                 for name in case.input_names]
    shapes: list[Any] = []
    for parameter in inspect.signature(case.module.forward).parameters.values():
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            shapes.append(tuple(per_input[len(shapes):]))
            break
        shapes.append(per_input[len(shapes)])
    return tuple(shapes)


def export(case: Case, exporter: str, path: Path) -> None:
    """Write ``case`` to ``path`` with the TorchScript exporter (``"legacy"``) or the dynamo
    exporter (``"dynamo"``, ``"dynamo_named"``)."""
    import torch

    with torch.no_grad():
        if exporter == "legacy":
            torch.onnx.export(case.module, case.args, str(path), dynamo=False,
                              opset_version=LEGACY_OPSET, input_names=case.input_names,
                              output_names=case.output_names, dynamic_axes=case.axes)
        else:
            torch.onnx.export(case.module, case.args, str(path), dynamo=True,
                              input_names=case.input_names, output_names=case.output_names,
                              dynamic_shapes=_dynamic_shapes(case, exporter == "dynamo_named"),
                              verbose=False)


def _build_one(model: Model, out: Path) -> dict[str, Any]:
    """Write ``out/NAME.onnx`` (and its data file) through a scratch folder, so that a failed
    or interrupted export leaves nothing that looks like a built model."""
    import onnx
    import onnxruntime
    import torch

    target = out / f"{model.name}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporters' deprecation and tracer warnings
        torch.manual_seed(SEED)
        case = model.build()
        randomize(case.module)
        with tempfile.TemporaryDirectory(prefix=f".{model.name}-", dir=out) as scratch:
            path = Path(scratch) / target.name
            export(case, model.exporter, path)
            onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            nodes = len(onnx.load(path, load_external_data=False).graph.node)
            files = sorted(Path(scratch).iterdir())
            for file in files:
                os.replace(file, out / file.name)
    return {"heads": case.heads, "kv_heads": case.kv_heads,
            "notes": [case.note] if case.note else [], "nodes": nodes,
            "bytes": sum((out / file.name).stat().st_size for file in files)}


def first_line(err: BaseException) -> str:
    """The error's type and first line, without terminal colour codes."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(err)).strip()
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"[:300]


def attempt(name: str, job: Callable[[], dict[str, Any]], record: dict[str, Any]) -> dict[str, Any]:
    """Run one build, adding the fields it returns to ``record``; its failure is recorded and
    printed, never raised."""
    print(f"building {name} ...", flush=True)
    started = time.perf_counter()
    try:
        record.update(status="built", **job())
    except Exception as err:  # noqa: BLE001 - one model's failure must not stop the rest
        record.update(status="failed", error=first_line(err),
                      traceback=traceback.format_exc(limit=-6))
        print(f"  FAILED {name}: {record['error']}", flush=True)
    record["seconds"] = round(time.perf_counter() - started, 1)
    for note in record.get("notes", []):
        print(f"  note: {note}", flush=True)
    return record


def report(status_file: Path, status: dict[str, dict[str, Any]], started: float) -> int:
    """Merge the models built or failed into the manifest ``status_file`` and print how many
    were built, already there and failed; returns the exit status (1 if any failed)."""
    from world_corpus import save_status, summarize  # the world corpus's own manifest and tally

    save_status(status_file, status)
    return summarize(status, started)


def build(out: Path, names: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """Build the models named (all by default) into ``out``, skipping those whose file exists;
    returns each one's manifest entry."""
    out.mkdir(parents=True, exist_ok=True)
    status: dict[str, dict[str, Any]] = {}
    for model in models():
        if names and model.name not in names:
            continue
        record: dict[str, Any] = {"exporter": model.exporter}
        if (out / f"{model.name}.onnx").exists():
            status[model.name] = {**record, "status": "existing"}
        else:
            job = functools.partial(_build_one, model, out)
            status[model.name] = attempt(model.name, job, record)
    return status


def run_cli(argv: list[str] | None, doc: str, listing: list[tuple[str, str]],
            build_into: Callable[[Path, list[str]], dict[str, dict[str, Any]]],
            status_file: str) -> int:
    """The command line of a corpus builder: ``OUT_DIR [--only NAME ...] [--list]``.
    ``listing``: each model's name and what to say of it."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("out_dir", type=Path, nargs="?")
    parser.add_argument("--only", nargs="+", default=[], metavar="NAME",
                        help="build these models only")
    parser.add_argument("--list", action="store_true", help="list the model names and exit")
    args = parser.parse_args(argv)
    if args.list:
        width = max(len(name) for name, _ in listing) + 2
        for name, about in listing:
            print(f"{name:<{width}}{about}")
        return 0
    if args.out_dir is None:
        parser.error("OUT_DIR is required")
    unknown = sorted(set(args.only) - {name for name, _ in listing})
    if unknown:
        parser.error(f"unknown model(s): {', '.join(unknown)} (see --list)")
    started = time.perf_counter()
    status = build_into(args.out_dir, args.only)
    return report(args.out_dir / status_file, status, started)


def main(argv: list[str] | None = None) -> int:
    return run_cli(argv, __doc__ or "", [(m.name, m.exporter) for m in models()], build,
                   STATUS_FILE)


if __name__ == "__main__":
    sys.exit(main())
