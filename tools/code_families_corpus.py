"""Build a corpus of model families exported from code that the other corpora lack, to test
graphfix on.

    python tools/code_families_corpus.py OUT_DIR [--only NAME ...] [--list]

The world, text, vision, Keras and classic corpora hold the common families (CNNs,
transformers, detectors, recurrent nets, Keras and classical models), mostly as torchvision,
transformers, Keras and scikit-learn define them. Users also bring models they wrote themselves
or took from other libraries: audio front ends, scripted control flow, recommenders, generators,
point clouds and graphs, new sequence mixers, hand-written ONNX at the newest opsets, quantized
models and models whose inputs or outputs are unusual. Every model here is built from code with
random weights (nothing is downloaded) after ``torch.manual_seed(0)``; NumPy draws use fixed
seeds of their own. Families:

- diffusion (needs ``diffusers``, skipped when it does not import): ``unet_tiny_ts`` and
  ``unet_tiny_dynamo`` (UNet2DConditionModel with cross-attention), ``vae_decoder_ts``;
- audio: ``logmel_stft_ts`` (STFT, power, mel matrix, log), ``logmel_stft_dynamo`` (complex STFT
  and ``rfft``), ``conformer_ts``, ``conformer_dynamo`` and ``conformer_dynamo_op23`` (a Conformer
  block with a padding mask), ``convtasnet_ts`` (Conv-TasNet separation), ``wav2vec2_tiny_ts``
  and ``hifigan_dynamo`` (transformers' Wav2Vec2 encoder and SpeechT5 HiFi-GAN vocoder);
- control flow from ``torch.jit.script``: ``script_loop_if_ts`` (a Loop over a count input with
  an If inside, a while loop), ``greedy_decode_ts`` (GRU-cell greedy decoding with ``break``),
  ``seq_list_script_ts`` (a list appended in a loop: Sequence ops);
- recommenders: ``dlrm_embbag_ts`` and ``dlrm_embbag_dynamo`` (DLRM, EmbeddingBag with offsets);
- image generation: ``gan_generator_ts`` (ConvTranspose, InstanceNorm, PixelShuffle, Resize),
  ``esrgan_lite_ts`` (residual dense blocks, bicubic), ``fp16_native_cnn_ts`` (the same network
  exported in float16), ``style_transfer_ts`` and ``style_transfer_dynamo`` (reflection padding,
  InstanceNorm, nearest upsampling);
- point clouds and graphs: ``dgcnn_pointcloud_ts`` (k-nearest neighbours by TopK, gathers,
  max-pooling), ``gnn_scatter_ts`` and ``gnn_scatter_dynamo`` (message passing by
  ScatterElements add and max, ScatterND add);
- sequence mixers: ``mamba_like_ts``, ``mamba_like_dynamo``, ``mamba_like_dynamo_op21`` (a
  selective scan by cumsum, exp, tril and einsum), ``rwkv_unrolled_ts`` (an RWKV time-mix
  recurrence unrolled over 8 steps, with its state in and out), ``rope_alibi_ts`` and
  ``rope_alibi_dynamo`` (attention with partial rotary embeddings, ALiBi and RMSNorm);
- functions and newer opsets: ``local_functions_ts`` (``export_modules_as_functions``),
  ``onnxscript_functions`` (nested onnxscript local functions), ``opset23_helper`` (hand-built:
  GroupNormalization-21, Gelu-20, DFT-20, RMSNormalization-23, Attention-23),
  ``spatial_transformer_ts`` (``affine_grid`` and GridSample at opset 20);
- quantized: ``qdq_static_cnn`` (ONNX Runtime static quantization, QDQ, int8 per channel),
  ``dynquant_mlp`` (dynamic quantization: MatMulInteger, DynamicQuantizeLinear);
- unusual inputs and outputs: ``mixed_dtypes_ts`` (uint8 NHWC, bool and int8 in; int64, bool
  and uint8 out), ``data_dependent_ts`` (NonZero, masked select, argsort, Unique),
  ``roialign_nms_ts`` (torchvision's ``nms`` and ``roi_align``), ``edge_outputs_ts`` and
  ``edge_outputs_helper`` (duplicate outputs, an input or an initializer as an output,
  shape-derived outputs), ``init_as_inputs_ts`` (``keep_initializers_as_inputs``),
  ``misnamed_dims_ts`` (an output axis named like an input axis of another length),
  ``nan_rows_ts`` (softmax over fully masked rows: NaN outputs), ``align_small_weights_ext``
  (64 weights of 1032 bytes, just over the 1 KiB external-data threshold, in a ``.data`` file).

``*_ts`` models (and the quantized ones, before quantization) are exported by the TorchScript
exporter (``dynamo=False``, ``dynamic_axes``), at opset 17 except ``gnn_scatter_ts`` and
``rope_alibi_ts`` (18) and ``spatial_transformer_ts`` (20); ``*_dynamo*`` ones by the dynamo
exporter (``torch.export.Dim``, weights in ``OUT_DIR/NAME.onnx.data``) at opset 18, or at the
opset their name ends with. ``--list`` gives each model's exporter, opset and family.

Each model goes through a scratch folder to ``OUT_DIR/NAME.onnx`` and is kept once
``onnx.checker`` accepts it (whether ONNX Runtime loads it is noted); a model whose file already
exists is not built again, and one failing does not stop the others. Beside each model but
``align_small_weights_ext`` three input sets are written, drawn with fixed seeds:
``NAME.inputs.npz`` at the export's sizes with valid values (indices in range, offsets
increasing, loop counts small) and ``NAME.inputs_a.npz`` and ``NAME.inputs_b.npz`` at other
batch, sequence and image sizes. The models marked "needs inputs" take index, offset or count
inputs that generated data cannot be trusted to fill; the others' sets hold values like a
user's (a diffusion timestep up to 1000, audio, images in [0, 1]) for checking outputs on them.

``OUT_DIR/code_families_corpus.json`` records per model its status (built, existing, skipped,
failed), family, exporter, opset, whether it needs inputs, its input files, nodes, bytes,
notes and seconds, or the error or the reason it was skipped; the run ends with a table of the
models and exits 1 when one failed. The whole corpus takes about 2 minutes on 2 cores.

Run graphfix's default pipeline over the corpus with ``python tools/pipeline_digest.py
OUT_DIR``, or over one model with its inputs::

    graphfix optimize OUT_DIR/NAME.onnx NAME.opt.onnx --inputs OUT_DIR/NAME.inputs.npz
    graphfix check OUT_DIR/NAME.onnx NAME.opt.onnx --inputs OUT_DIR/NAME.inputs_b.npz
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import math
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from text_families_corpus import attempt, first_line  # the same driver

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = ["Model", "build", "main", "models"]

SEED = 0
STATUS_FILE = "code_families_corpus.json"
# The input sets written beside each model: file suffix and NumPy seed. The first is at the
# export's sizes, the other two at other sizes; a generator picks its sizes by the set's index.
INPUT_SETS = (("inputs", 100), ("inputs_a", 201), ("inputs_b", 302))

Arrays = dict[str, np.ndarray]
Inputs = Callable[[np.random.Generator, int], Arrays]


@dataclasses.dataclass(frozen=True)
class Model:
    """One file of the corpus: a builder that writes it at ``opset``, and its input sets."""

    name: str
    family: str
    exporter: str
    opset: int
    build: Callable[[Path, int], None]
    inputs: Inputs | None
    needs_inputs: bool = False  # index, offset or count inputs: run graphfix with --inputs
    package: str | None = None  # needed beyond the project's tools extra


# --------------------------------------------------------------------------- shared helpers


def f32(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    """Standard normal float32 values of ``shape``, times ``scale``."""
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _example(inputs: Inputs) -> dict[str, torch.Tensor]:
    """The set ``inputs`` draws at the export's sizes (seed 0), as tensors, for an export."""
    import torch

    return {k: torch.from_numpy(v) for k, v in inputs(np.random.default_rng(0), 0).items()}


def _torchscript(module: nn.Module, args: tuple[Any, ...], path: Path, opset: int,
                 names: list[str], outputs: list[str], axes: dict[str, dict[int, str]],
                 **options: Any) -> None:
    """Export ``module`` to ``path`` with the TorchScript exporter, constants folded."""
    import torch

    module.eval()
    torch.onnx.export(module, args, str(path), dynamo=False, opset_version=opset,
                      input_names=names, output_names=outputs, dynamic_axes=axes,
                      do_constant_folding=True, **options)


def _dynamo(module: nn.Module, args: tuple[Any, ...], path: Path, opset: int, names: list[str],
            outputs: list[str], shapes: tuple[Any, ...]) -> None:
    """Export ``module`` with the dynamo exporter to ``path``, its weights in ``path.data``."""
    import torch

    module.eval()
    program = torch.onnx.export(module, args, dynamo=True, opset_version=opset,
                                input_names=names, output_names=outputs, dynamic_shapes=shapes,
                                verbose=False)
    program.save(str(path), external_data=True)


def _batch_norm_stats(*norms: nn.Module) -> None:
    """Draw batch-norm running statistics away from 0 and 1."""
    import torch

    with torch.no_grad():
        for bn in norms:
            bn.running_mean.normal_(0, 0.1)
            bn.running_var.uniform_(0.5, 1.5)


def _save_helper_model(graph: Any, path: Path, opset: int, ir_version: int,
                       full_check: bool = False, **save: Any) -> None:
    """Check a hand-built ``graph`` as a model at ``opset`` and save it (``save``: how)."""
    import onnx
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              ir_version=ir_version)
    onnx.checker.check_model(model, full_check=full_check)
    onnx.save(model, str(path), **save)


# --------------------------------------------------------------------------- diffusion


def unet_inputs(rng: np.random.Generator, k: int) -> Arrays:
    b, s = ((1, 7), (2, 5), (3, 9))[k]
    return {"sample": f32(rng, b, 4, 16, 16),
            "timestep": rng.uniform(0, 1000, (b,)).astype(np.float32),
            "encoder_hidden_states": f32(rng, b, s, 32)}


def unet(path: Path, opset: int, dynamo: bool) -> None:
    """A two-level UNet2DConditionModel: a cross-attention down and up block."""
    import torch
    from diffusers import UNet2DConditionModel
    from torch import nn

    class UNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.u = UNet2DConditionModel(
                sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
                block_out_channels=(32, 64),
                down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
                attention_head_dim=8, norm_num_groups=8)

        def forward(self, sample: torch.Tensor, timestep: torch.Tensor,
                    encoder_hidden_states: torch.Tensor) -> torch.Tensor:
            return self.u(sample, timestep, encoder_hidden_states, return_dict=False)[0]

    module = UNet()
    names = ["sample", "timestep", "encoder_hidden_states"]
    if dynamo:
        args = (torch.randn(2, 4, 16, 16), torch.tensor([500.0, 20.0]), torch.randn(2, 7, 32))
        b, s = torch.export.Dim("b", min=1, max=64), torch.export.Dim("s", min=2, max=256)
        _dynamo(module, args, path, opset, names, ["out"], ({0: b}, {0: b}, {0: b, 1: s}))
    else:
        args = (torch.randn(1, 4, 16, 16), torch.tensor([500.0]), torch.randn(1, 7, 32))
        _torchscript(module, args, path, opset, names, ["out"],
                     {"sample": {0: "b"}, "timestep": {0: "b"},
                      "encoder_hidden_states": {0: "b", 1: "s"}, "out": {0: "b"}})


def vae_decoder(path: Path, opset: int) -> None:
    """AutoencoderKL's decoder, latents of any height and width."""
    import torch
    from diffusers import AutoencoderKL
    from torch import nn

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.v = AutoencoderKL(in_channels=3, out_channels=3,
                                   down_block_types=("DownEncoderBlock2D",) * 2,
                                   up_block_types=("UpDecoderBlock2D",) * 2,
                                   block_out_channels=(32, 64), latent_channels=4,
                                   norm_num_groups=8, layers_per_block=1)

        def forward(self, z: torch.Tensor) -> torch.Tensor:
            return self.v.decode(z, return_dict=False)[0]

    _torchscript(Decoder(), (torch.randn(1, 4, 8, 8),), path, opset, ["z"], ["image"],
                 {"z": {0: "b", 2: "h", 3: "w"}, "image": {0: "b", 2: "H", 3: "W"}})


def vae_inputs(rng: np.random.Generator, k: int) -> Arrays:
    return {"z": f32(rng, *((1, 4, 8, 8), (2, 4, 6, 10), (1, 4, 12, 4))[k])}


# --------------------------------------------------------------------------- audio


def _mel_filters(n_freq: int, n_mels: int, rate: int = 16000) -> torch.Tensor:
    """Triangular mel filters [n_freq, n_mels] up to the Nyquist frequency."""
    import torch

    top = rate / 2
    mels = np.linspace(0, 2595 * np.log10(1 + top / 700), n_mels + 2)
    hz = 700 * (10 ** (mels / 2595) - 1)
    freqs = np.linspace(0, top, n_freq)
    bank = np.zeros((n_freq, n_mels), np.float32)
    for i in range(n_mels):
        low, centre, high = hz[i], hz[i + 1], hz[i + 2]
        bank[:, i] = np.maximum(0, np.minimum((freqs - low) / (centre - low),
                                              (high - freqs) / (high - centre)))
    return torch.tensor(bank)


def _wave_inputs(shapes: tuple[tuple[int, int], ...], rng: np.random.Generator,
                 k: int) -> Arrays:
    return {"wav": f32(rng, *shapes[k], scale=0.3)}


def wave_inputs(*shapes: tuple[int, int]) -> Inputs:
    """Waveforms ``wav`` [batch, samples] of the three sets' ``shapes``."""
    return functools.partial(_wave_inputs, shapes)


def _stft_setup(module: Any, n_fft: int = 256, hop: int = 64, n_mels: int = 40) -> None:
    """An STFT module's sizes, Hann window and mel matrix (buffers: exported as weights)."""
    import torch

    module.n_fft, module.hop = n_fft, hop
    module.register_buffer("win", torch.hann_window(n_fft))
    module.register_buffer("fb", _mel_filters(n_fft // 2 + 1, n_mels))


def logmel_stft(path: Path, opset: int, frames: str = "f") -> None:
    """A real-valued STFT (reflect padding), power, mel matrix, log and mean normalization.
    ``frames``: the name of the output's frame axis (``"t"`` names it like the waveform's
    sample axis, wrongly)."""
    import torch
    from torch import nn

    class LogMel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            _stft_setup(self)

        def forward(self, wav: torch.Tensor) -> torch.Tensor:
            s = torch.stft(wav, self.n_fft, self.hop, self.n_fft, self.win, center=True,
                           pad_mode="reflect", return_complex=False)
            power = s[..., 0] ** 2 + s[..., 1] ** 2  # B, F, T
            logmel = torch.log(torch.matmul(power.transpose(1, 2), self.fb) + 1e-6)
            return logmel - logmel.mean(dim=1, keepdim=True)

    _torchscript(LogMel(), (torch.randn(1, 4000),), path, opset, ["wav"], ["logmel"],
                 {"wav": {0: "b", 1: "t"}, "logmel": {0: "b", 1: frames}})


def logmel_complex_stft(path: Path, opset: int) -> None:
    """A complex STFT's magnitude through a mel matrix, and the mean of a whole-signal
    ``rfft`` magnitude."""
    import torch
    from torch import nn

    class LogMel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            _stft_setup(self)

        def forward(self, wav: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            s = torch.stft(wav, self.n_fft, self.hop, self.n_fft, self.win, center=False,
                           return_complex=True)
            mel = torch.matmul((s.abs() ** 2).transpose(1, 2), self.fb)
            spec = torch.fft.rfft(wav, dim=-1).abs()
            return torch.log(mel + 1e-6), spec.mean(-1, keepdim=True)

    t = torch.export.Dim("t", min=512, max=100000)
    _dynamo(LogMel(), (torch.randn(2, 4000),), path, opset, ["wav"], ["logmel", "spec_mean"],
            ({1: t},))


def conformer_inputs(rng: np.random.Generator, k: int) -> Arrays:
    b, t = ((2, 50), (3, 37), (1, 80))[k]
    mask = rng.random((b, t)) < 0.2
    mask[:, 0] = False
    return {"x": f32(rng, b, t, 64), "pad_mask": mask}


def conformer(path: Path, opset: int, dynamo: bool) -> None:
    """A Conformer block: two half feed-forwards, self-attention with a key padding mask,
    a convolution module (GLU, depthwise convolution, batch norm, SiLU)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d: int = 64, heads: int = 4, kernel: int = 15) -> None:
            super().__init__()
            self.ff1 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(),
                                     nn.Linear(4 * d, d))
            self.ln_att = nn.LayerNorm(d)
            self.att = nn.MultiheadAttention(d, heads, batch_first=True)
            self.ln_conv = nn.LayerNorm(d)
            self.pw1 = nn.Conv1d(d, 2 * d, 1)
            self.dw = nn.Conv1d(d, d, kernel, padding=kernel // 2, groups=d)
            self.bn = nn.BatchNorm1d(d)
            self.pw2 = nn.Conv1d(d, d, 1)
            self.ff2 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(),
                                     nn.Linear(4 * d, d))
            self.ln = nn.LayerNorm(d)
            _batch_norm_stats(self.bn)

        def forward(self, x: torch.Tensor, pad_mask: torch.Tensor) -> torch.Tensor:
            x = x + 0.5 * self.ff1(x)
            y = self.ln_att(x)
            x = x + self.att(y, y, y, key_padding_mask=pad_mask, need_weights=False)[0]
            y = self.ln_conv(x).transpose(1, 2)
            y = F.glu(self.pw1(y), dim=1)
            y = self.pw2(F.silu(self.bn(self.dw(y))))
            x = x + y.transpose(1, 2)
            x = x + 0.5 * self.ff2(x)
            return self.ln(x)

    module = Block()
    mask = torch.zeros(2, 50, dtype=torch.bool)
    mask[1, 40:] = True
    args = (torch.randn(2, 50, 64), mask)
    if dynamo:
        b, t = torch.export.Dim("b", min=1, max=64), torch.export.Dim("t", min=2, max=4096)
        _dynamo(module, args, path, opset, ["x", "pad_mask"], ["y"],
                ({0: b, 1: t}, {0: b, 1: t}))
    else:
        _torchscript(module, args, path, opset, ["x", "pad_mask"], ["y"],
                     {"x": {0: "b", 1: "t"}, "pad_mask": {0: "b", 1: "t"},
                      "y": {0: "b", 1: "t"}})


def conv_tasnet(path: Path, opset: int) -> None:
    """Conv-TasNet: a learned encoder, a temporal convolution network of dilated depthwise
    blocks (PReLU, global layer norm) estimating two masks, and a transposed-convolution
    decoder."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    def gln(channels: int) -> nn.Module:  # global layer norm
        return nn.GroupNorm(1, channels)

    class TasNet(nn.Module):
        def __init__(self, N: int = 32, L: int = 16, B: int = 32, H: int = 64, X: int = 4,
                     C: int = 2) -> None:
            super().__init__()
            self.C, self.N = C, N
            self.enc = nn.Conv1d(1, N, L, stride=L // 2, bias=False)
            self.ln = gln(N)
            self.bott = nn.Conv1d(N, B, 1)
            self.blocks = nn.ModuleList([nn.ModuleDict({
                "c1": nn.Conv1d(B, H, 1), "p1": nn.PReLU(), "n1": gln(H),
                "dw": nn.Conv1d(H, H, 3, dilation=2 ** i, padding=2 ** i, groups=H),
                "p2": nn.PReLU(), "n2": gln(H), "res": nn.Conv1d(H, B, 1),
                "skip": nn.Conv1d(H, B, 1)}) for i in range(X)])
            self.mask = nn.Sequential(nn.PReLU(), nn.Conv1d(B, C * N, 1))
            self.dec = nn.ConvTranspose1d(N, 1, L, stride=L // 2, bias=False)

        def forward(self, wav: torch.Tensor) -> torch.Tensor:
            w = F.relu(self.enc(wav.unsqueeze(1)))
            x = self.bott(self.ln(w))
            skip = 0
            for b in self.blocks:
                y = b["n1"](b["p1"](b["c1"](x)))
                y = b["n2"](b["p2"](b["dw"](y)))
                x = x + b["res"](y)
                skip = skip + b["skip"](y)
            m = torch.sigmoid(self.mask(skip)).view(wav.shape[0], self.C, self.N, -1)
            s = w.unsqueeze(1) * m
            out = self.dec(s.reshape(-1, self.N, s.shape[-1]))
            return out.view(wav.shape[0], self.C, -1)

    _torchscript(TasNet(), (torch.randn(1, 8000),), path, opset, ["wav"], ["sources"],
                 {"wav": {0: "b", 1: "t"}, "sources": {0: "b", 2: "t2"}})


def wav2vec2(path: Path, opset: int) -> None:
    """transformers' Wav2Vec2Model: convolutional feature extractor, positional convolution,
    two encoder layers."""
    import torch
    from torch import nn
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            config = Wav2Vec2Config(
                hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                conv_dim=(16, 16, 16), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
                feat_extract_norm="group", do_stable_layer_norm=False)
            self.m = Wav2Vec2Model(config).eval()

        def forward(self, input_values: torch.Tensor) -> torch.Tensor:
            return self.m(input_values).last_hidden_state

    _torchscript(Encoder(), (torch.randn(1, 4000),), path, opset, ["input_values"], ["hidden"],
                 {"input_values": {0: "b", 1: "t"}, "hidden": {0: "b", 1: "f"}})


def wav2vec2_inputs(rng: np.random.Generator, k: int) -> Arrays:
    return {"input_values": f32(rng, *((1, 4000), (2, 3000), (1, 6001))[k])}


def hifigan(path: Path, opset: int) -> None:
    """transformers' SpeechT5 HiFi-GAN vocoder: mel frames to a waveform."""
    import torch
    from torch import nn
    from transformers import SpeechT5HifiGan, SpeechT5HifiGanConfig

    class Vocoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            config = SpeechT5HifiGanConfig(
                model_in_dim=16, upsample_initial_channel=32, upsample_rates=[4, 4],
                upsample_kernel_sizes=[8, 8], resblock_kernel_sizes=[3, 7],
                resblock_dilation_sizes=[[1, 3], [1, 3]], normalize_before=False)
            self.m = SpeechT5HifiGan(config).eval()

        def forward(self, spectrogram: torch.Tensor) -> torch.Tensor:
            return self.m(spectrogram)

    b, t = torch.export.Dim("b", min=1, max=16), torch.export.Dim("t", min=2, max=2000)
    _dynamo(Vocoder(), (torch.randn(2, 30, 16),), path, opset, ["spectrogram"], ["waveform"],
            ({0: b, 1: t},))


def hifigan_inputs(rng: np.random.Generator, k: int) -> Arrays:
    return {"spectrogram": f32(rng, *((2, 30, 16), (3, 21, 16), (1, 44, 16))[k])}


# --------------------------------------------------------------------------- scripted control flow


def script_loop_if(path: Path, opset: int) -> None:
    """A loop run ``steps`` times with a data-dependent branch inside, then a while loop."""
    import torch
    from torch import nn

    class LoopIf(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(16, 16) * 0.2)

        def forward(self, x: torch.Tensor, steps: torch.Tensor):
            n = int(steps.item())
            for i in range(n):
                x = torch.tanh(x @ self.w) + x
                if float(x.mean()) > 0.0:
                    x = x * 0.5
                else:
                    x = x - 0.1
            k = 0
            while float(x.abs().max()) > 1.0 and k < 20:
                x = x * 0.7
                k += 1
            return x, torch.tensor(k)

    _torchscript(torch.jit.script(LoopIf()), (torch.randn(2, 16), torch.tensor(3)), path, opset,
                 ["x", "steps"], ["y", "iters"], {"x": {0: "b"}, "y": {0: "b"}})


def script_loop_if_inputs(rng: np.random.Generator, k: int) -> Arrays:
    return {"x": f32(rng, (2, 3, 5)[k], 16), "steps": np.array((3, 2, 5)[k], np.int64)}


def greedy_decode(path: Path, opset: int) -> None:
    """Greedy decoding with a GRU cell written out: embedding, argmax, the tokens concatenated
    step by step, ``break`` once every row reached the end token."""
    import torch
    from torch import nn

    class Greedy(nn.Module):
        def __init__(self, V: int = 20, H: int = 32, E: int = 16) -> None:
            super().__init__()
            self.emb = nn.Embedding(V, E)
            self.wi = nn.Linear(E, 3 * H)
            self.wh = nn.Linear(H, 3 * H)
            self.out = nn.Linear(H, V)
            self.eos = 1

        def forward(self, h: torch.Tensor, max_len: torch.Tensor):
            score = h[:, 0] * 0.0
            tok = score.long()
            toks = tok.unsqueeze(1)
            for i in range(int(max_len.item())):
                gi = self.wi(self.emb(tok))
                gh = self.wh(h)
                ir, iz, inn = gi.chunk(3, 1)
                hr, hz, hn = gh.chunk(3, 1)
                r = torch.sigmoid(ir + hr)
                z = torch.sigmoid(iz + hz)
                n = torch.tanh(inn + r * hn)
                h = (1 - z) * n + z * h
                logp = torch.log_softmax(self.out(h), dim=-1)
                s, tok = logp.max(dim=-1)
                score = score + s
                toks = torch.cat([toks, tok.unsqueeze(1)], dim=1)
                if bool((tok == self.eos).all()):
                    break
            return toks, score

    _torchscript(torch.jit.script(Greedy().eval()), (torch.randn(2, 32), torch.tensor(6)), path,
                 opset, ["h0", "max_len"], ["tokens", "score"],
                 {"h0": {0: "b"}, "tokens": {0: "b", 1: "l"}, "score": {0: "b"}})


def greedy_decode_inputs(rng: np.random.Generator, k: int) -> Arrays:
    return {"h0": f32(rng, (2, 3, 1)[k], 32), "max_len": np.array((6, 4, 9)[k], np.int64)}


def seq_list_script(path: Path, opset: int) -> None:
    """A list of tensors appended in a loop and stacked: ONNX Sequence ops."""
    import torch
    from torch import nn

    class SeqList(nn.Module):
        def forward(self, x: torch.Tensor, n: torch.Tensor):
            outs: list[torch.Tensor] = []
            h = x
            for i in range(int(n.item())):
                h = torch.relu(h * 0.9 + 0.1)
                outs.append(h.sum(-1))
            return torch.stack(outs, 0), h

    _torchscript(torch.jit.script(SeqList()), (torch.randn(2, 8), torch.tensor(4)), path, opset,
                 ["x", "n"], ["stacked", "h"],
                 {"x": {0: "b"}, "stacked": {0: "n", 1: "b"}, "h": {0: "b"}})


def seq_list_inputs(rng: np.random.Generator, k: int) -> Arrays:
    return {"x": f32(rng, (2, 3, 1)[k], 8), "n": np.array((4, 3, 6)[k], np.int64)}


# --------------------------------------------------------------------------- recommender

DLRM_INPUTS = ["dense", "idx0", "off0", "idx1", "off1", "idx2"]


def dlrm_inputs(rng: np.random.Generator, k: int) -> Arrays:
    """Dense features, two multi-hot bags (indices and offsets) and a fixed-size bag."""
    b = (4, 3, 7)[k]
    arrays = {"dense": f32(rng, b, 13)}
    for i, rows in ((0, 1000), (1, 500)):
        lengths = rng.integers(1, 5, b)
        arrays[f"idx{i}"] = rng.integers(0, rows, lengths.sum()).astype(np.int64)
        arrays[f"off{i}"] = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    arrays["idx2"] = rng.integers(0, 200, (b, 3)).astype(np.int64)
    return arrays


def dlrm(path: Path, opset: int, dynamo: bool) -> None:
    """DLRM: a bottom MLP, three EmbeddingBags (sum with offsets, mean over fixed bags),
    pairwise dot-product interactions, a top MLP; a probability, a click flag and the top 3
    interactions out."""
    import torch
    from torch import nn

    class DLRM(nn.Module):
        def __init__(self, tables: tuple[int, ...] = (1000, 500, 200), E: int = 16) -> None:
            super().__init__()
            self.bags = nn.ModuleList([nn.EmbeddingBag(n, E, mode="sum") for n in tables[:2]])
            self.emb2 = nn.EmbeddingBag(tables[2], E, mode="mean")
            self.bot = nn.Sequential(nn.Linear(13, 32), nn.ReLU(), nn.Linear(32, E), nn.ReLU())
            nf = 4
            self.top = nn.Sequential(nn.Linear(E + nf * (nf - 1) // 2, 32), nn.ReLU(),
                                     nn.Linear(32, 1))
            self.li, self.lj = torch.tril_indices(nf, nf, offset=-1)

        def forward(self, dense: torch.Tensor, idx0: torch.Tensor, off0: torch.Tensor,
                    idx1: torch.Tensor, off1: torch.Tensor,
                    idx2: torch.Tensor) -> tuple[torch.Tensor, ...]:
            x = self.bot(dense)
            e = [self.bags[0](idx0, off0), self.bags[1](idx1, off1), self.emb2(idx2)]
            T = torch.stack([x] + e, dim=1)
            Z = torch.bmm(T, T.transpose(1, 2))
            p = torch.sigmoid(self.top(torch.cat([x, Z[:, self.li, self.lj]], dim=1)))
            return p, (p > 0.5).to(torch.int64), torch.topk(Z.flatten(1), 3).indices

    example = _example(dlrm_inputs)
    args = tuple(example[name] for name in DLRM_INPUTS)
    outputs = ["prob", "click", "top3"]
    if dynamo:
        Dim = torch.export.Dim
        b = Dim("b", min=2, max=1024)
        n0, n1 = Dim("n0", min=2, max=100000), Dim("n1", min=2, max=100000)
        _dynamo(DLRM(), args, path, opset, DLRM_INPUTS, outputs,
                ({0: b}, {0: n0}, {0: b}, {0: n1}, {0: b}, {0: b}))
    else:
        axes = {"dense": {0: "b"}, "idx0": {0: "n0"}, "off0": {0: "b"}, "idx1": {0: "n1"},
                "off1": {0: "b"}, "idx2": {0: "b"}, "prob": {0: "b"}, "click": {0: "b"},
                "top3": {0: "b"}}
        _torchscript(DLRM(), args, path, opset, DLRM_INPUTS, outputs, axes)


# --------------------------------------------------------------------------- image generation


def gan_generator(path: Path, opset: int) -> None:
    """A DCGAN-like generator from a latent vector to a 48x48 image: ConvTranspose, batch and
    instance norms, nearest and bilinear upsampling, PixelShuffle."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Generator(nn.Module):
        def __init__(self, z: int = 32) -> None:
            super().__init__()
            self.fc = nn.ConvTranspose2d(z, 64, 4, 1, 0)  # 1 -> 4
            self.bn = nn.BatchNorm2d(64)
            self.up1 = nn.ConvTranspose2d(64, 32, 4, 2, 1)  # 4 -> 8
            self.in1 = nn.InstanceNorm2d(32, affine=True)
            self.c2 = nn.Conv2d(32, 32, 3, padding=1)
            self.in2 = nn.InstanceNorm2d(32)
            self.c3 = nn.Conv2d(32, 12, 3, padding=1)
            self.ps = nn.PixelShuffle(2)
            self.c4 = nn.Conv2d(3, 3, 3, padding=1)
            _batch_norm_stats(self.bn)

        def forward(self, z: torch.Tensor) -> torch.Tensor:
            x = F.relu(self.bn(self.fc(z)))
            x = F.leaky_relu(self.in1(self.up1(x)), 0.2)
            x = F.interpolate(x, scale_factor=2.0, mode="nearest")  # 16
            x = F.relu(self.in2(self.c2(x)))
            x = self.ps(self.c3(x))  # 32
            x = F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=False)  # 48
            return torch.tanh(self.c4(x))

    _torchscript(Generator(), (torch.randn(1, 32, 1, 1),), path, opset, ["z"], ["img"],
                 {"z": {0: "b"}, "img": {0: "b"}})


def gan_inputs(rng: np.random.Generator, k: int) -> Arrays:
    return {"z": f32(rng, (1, 3, 2)[k], 32, 1, 1)}


def super_resolution(path: Path, opset: int, half: bool = False) -> None:
    """An ESRGAN-like 2x super-resolution net: residual dense blocks, PixelShuffle, a bicubic
    base, clamped. ``half``: exported in float16, float16 in and out."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class RDB(nn.Module):
        def __init__(self, c: int = 16, g: int = 8) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(c, g, 3, padding=1)
            self.c2 = nn.Conv2d(c + g, g, 3, padding=1)
            self.c3 = nn.Conv2d(c + 2 * g, c, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            a = F.leaky_relu(self.c1(x), 0.2)
            b = F.leaky_relu(self.c2(torch.cat([x, a], 1)), 0.2)
            return x + 0.2 * self.c3(torch.cat([x, a, b], 1))

    class SR(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.head = nn.Conv2d(3, 16, 3, padding=1)
            self.body = nn.Sequential(RDB(), RDB())
            self.up = nn.Conv2d(16, 3 * 4, 3, padding=1)
            self.ps = nn.PixelShuffle(2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            f = self.head(x)
            f = f + self.body(f)
            y = self.ps(self.up(f))
            base = F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=False)
            return (y + base).clamp(0, 1)

    module, image = SR(), torch.rand(1, 3, 24, 24)
    if half:
        module, image = module.half(), image.half()
    _torchscript(module, (image,), path, opset, ["lr"], ["hr"],
                 {"lr": {0: "b", 2: "h", 3: "w"}, "hr": {0: "b", 2: "H", 3: "W"}})


def _image_inputs(name: str, shapes: tuple[tuple[int, ...], ...], dtype: type,
                  rng: np.random.Generator, k: int) -> Arrays:
    return {name: rng.random(shapes[k]).astype(dtype)}


def image_inputs(name: str, *shapes: tuple[int, ...], dtype: type = np.float32) -> Inputs:
    """Images ``name`` in [0, 1) of the three sets' ``shapes``."""
    return functools.partial(_image_inputs, name, shapes, dtype)


def style_transfer(path: Path, opset: int, dynamo: bool) -> None:
    """A fast style-transfer net: reflection padding, instance norms, residual blocks, nearest
    upsampling (height and width multiples of 4)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    def conv(inputs: int, outputs: int, kernel: int, stride: int) -> nn.Module:
        return nn.Sequential(nn.ReflectionPad2d(kernel // 2),
                             nn.Conv2d(inputs, outputs, kernel, stride),
                             nn.InstanceNorm2d(outputs, affine=True))

    class StyleNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.d = nn.Sequential(conv(3, 8, 9, 1), nn.ReLU(), conv(8, 16, 3, 2), nn.ReLU(),
                                   conv(16, 32, 3, 2), nn.ReLU())
            self.res = nn.ModuleList([nn.Sequential(conv(32, 32, 3, 1), nn.ReLU(),
                                                    conv(32, 32, 3, 1)) for _ in range(2)])
            self.u1 = conv(32, 16, 3, 1)
            self.u2 = conv(16, 8, 3, 1)
            self.o = nn.Sequential(nn.ReflectionPad2d(4), nn.Conv2d(8, 3, 9, 1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.d(x)
            for r in self.res:
                y = y + r(y)
            y = F.relu(self.u1(F.interpolate(y, scale_factor=2, mode="nearest")))
            y = F.relu(self.u2(F.interpolate(y, scale_factor=2, mode="nearest")))
            return self.o(y)

    if dynamo:
        Dim = torch.export.Dim
        b, h, w = Dim("b", min=1, max=8), Dim("h", min=4, max=256), Dim("w", min=4, max=256)
        _dynamo(StyleNet(), (torch.rand(2, 3, 32, 48),), path, opset, ["image"], ["stylized"],
                ({0: b, 2: 4 * h, 3: 4 * w},))
    else:
        _torchscript(StyleNet(), (torch.rand(1, 3, 32, 48),), path, opset, ["image"],
                     ["stylized"], {"image": {0: "b", 2: "h", 3: "w"},
                                    "stylized": {0: "b", 2: "h", 3: "w"}})


# --------------------------------------------------------------------------- point clouds, graphs


def dgcnn_pointcloud(path: Path, opset: int) -> None:
    """A DGCNN classifier over points [batch, n, 3]: edge convolutions over k-nearest
    neighbours (TopK, flat gathers), max- and mean-pooling; logits, class and the first
    neighbour indices out."""
    import torch
    from torch import nn

    class DGCNN(nn.Module):
        def __init__(self, k: int = 8, classes: int = 10) -> None:
            super().__init__()
            self.k = k
            self.e1 = nn.Sequential(nn.Conv2d(6, 32, 1), nn.BatchNorm2d(32), nn.LeakyReLU(0.2))
            self.e2 = nn.Sequential(nn.Conv2d(64, 32, 1), nn.BatchNorm2d(32), nn.LeakyReLU(0.2))
            self.c = nn.Sequential(nn.Conv1d(64, 64, 1), nn.ReLU())
            self.head = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, classes))
            _batch_norm_stats(self.e1[1], self.e2[1])

        def edge(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # x: B, C, N
            B, C, N = x.shape
            inner = -2 * torch.matmul(x.transpose(2, 1), x)
            xx = (x ** 2).sum(1, keepdim=True)
            idx = (-xx - inner - xx.transpose(2, 1)).topk(k=self.k, dim=-1).indices  # B, N, k
            flat = (idx + torch.arange(B).view(-1, 1, 1) * N).view(-1)
            feat = x.transpose(2, 1).reshape(B * N, C)[flat].view(B, N, self.k, C)
            xc = x.transpose(2, 1).unsqueeze(2).expand(-1, -1, self.k, -1)
            return torch.cat([feat - xc, xc], 3).permute(0, 3, 1, 2), idx

        def forward(self, pts: torch.Tensor) -> tuple[torch.Tensor, ...]:  # B, N, 3
            f, idx = self.edge(pts.transpose(1, 2))
            x1 = self.e1(f).max(dim=-1)[0]
            f, _ = self.edge(x1)
            x2 = self.e2(f).max(dim=-1)[0]
            x = self.c(torch.cat([x1, x2], 1))
            logits = self.head(torch.cat([x.max(-1)[0], x.mean(-1)], 1))
            return logits, logits.argmax(-1), idx

    _torchscript(DGCNN(), (torch.randn(2, 64, 3),), path, opset, ["points"],
                 ["logits", "cls", "knn_idx"],
                 {"points": {0: "b", 1: "n"}, "logits": {0: "b"}, "cls": {0: "b"},
                  "knn_idx": {0: "b", 1: "n"}})


def points_inputs(rng: np.random.Generator, k: int) -> Arrays:
    return {"points": f32(rng, *((2, 64, 3), (1, 100, 3), (3, 40, 3))[k])}


def gnn_inputs(rng: np.random.Generator, k: int) -> Arrays:
    n, e = ((20, 60), (13, 40), (31, 90))[k]
    return {"x": f32(rng, n, 16), "edge_index": rng.integers(0, n, (2, e)).astype(np.int64)}


def gnn_scatter(path: Path, opset: int, dynamo: bool) -> None:
    """Two rounds of message passing over ``edge_index`` [2, edges]: a mean by scatter_add and
    index_put with accumulation, a max by scatter_reduce; the in-degrees out as int64."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class GNN(nn.Module):
        def __init__(self, f: int = 16, h: int = 32) -> None:
            super().__init__()
            self.l1 = nn.Linear(f, h)
            self.l2 = nn.Linear(h, h)
            self.root = nn.Linear(f, h)
            self.out = nn.Linear(2 * h, 4)

        def forward(self, x: torch.Tensor,
                    edge_index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            src, dst = edge_index[0], edge_index[1]
            N = x.shape[0]
            msg = self.l1(x)[src]  # E, h
            agg = torch.zeros(N, msg.shape[1]).scatter_add(0, dst.unsqueeze(1).expand_as(msg), msg)
            deg = torch.zeros(N).index_put((dst,), torch.ones_like(dst, dtype=torch.float),
                                           accumulate=True)
            h = F.relu(agg / deg.clamp(min=1).unsqueeze(1) + self.root(x))
            m2 = self.l2(h)[src]
            mx = torch.full((N, m2.shape[1]), -1e4).scatter_reduce(
                0, dst.unsqueeze(1).expand_as(m2), m2, reduce="amax", include_self=True)
            return self.out(torch.cat([h, mx], 1)), deg.to(torch.int64)

    example = _example(gnn_inputs)
    args = (example["x"], example["edge_index"])
    if dynamo:
        n, e = torch.export.Dim("n", min=2, max=10000), torch.export.Dim("e", min=2, max=100000)
        _dynamo(GNN(), args, path, opset, ["x", "edge_index"], ["logits", "deg"],
                ({0: n}, {1: e}))
    else:
        _torchscript(GNN(), args, path, opset, ["x", "edge_index"], ["logits", "deg"],
                     {"x": {0: "n"}, "edge_index": {1: "e"}, "logits": {0: "n"},
                      "deg": {0: "n"}})


# --------------------------------------------------------------------------- sequence mixers


def mamba_like(path: Path, opset: int, dynamo: bool) -> None:
    """A Mamba-like block: a gated causal depthwise convolution and a selective scan written as
    a decay matrix (cumsum, exp over a tril mask, einsum)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Mamba(nn.Module):
        def __init__(self, d: int = 32, expand: int = 2, kernel: int = 4) -> None:
            super().__init__()
            di = d * expand
            self.inp = nn.Linear(d, 2 * di)
            self.conv = nn.Conv1d(di, di, kernel, groups=di, padding=kernel - 1)
            self.dt = nn.Linear(di, di)
            self.A_log = nn.Parameter(torch.log(torch.rand(di) + 0.5))
            self.Bp = nn.Linear(di, di)
            self.D = nn.Parameter(torch.ones(di))
            self.outp = nn.Linear(di, d)
            self.norm = nn.LayerNorm(d)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            L = x.shape[1]
            u, z = self.inp(self.norm(x)).chunk(2, dim=-1)
            u = F.silu(self.conv(u.transpose(1, 2))[..., :L].transpose(1, 2))
            dt = F.softplus(self.dt(u))
            cs = torch.cumsum(dt * -torch.exp(self.A_log), dim=1)  # B, L, D
            seg = cs.unsqueeze(2) - cs.unsqueeze(1)  # B, L, L, D  (i - j)
            mask = torch.tril(torch.ones(L, L, dtype=torch.bool)).view(1, L, L, 1)
            decay = torch.exp(torch.where(mask, seg, torch.full_like(seg, -1e9)))
            v = self.Bp(u) * u * dt
            y = torch.einsum("bijd,bjd->bid", decay, v) + self.D * u
            return x + self.outp(y * F.silu(z))

    module, x = Mamba(), torch.randn(2, 24, 32)
    if dynamo:
        b, l = torch.export.Dim("b", min=1, max=64), torch.export.Dim("l", min=2, max=1024)
        _dynamo(module, (x,), path, opset, ["x"], ["y"], ({0: b, 1: l},))
    else:
        _torchscript(module, (x,), path, opset, ["x"], ["y"],
                     {"x": {0: "b", 1: "l"}, "y": {0: "b", 1: "l"}})


def mamba_inputs(rng: np.random.Generator, k: int) -> Arrays:
    return {"x": f32(rng, *((2, 24, 32), (1, 17, 32), (3, 40, 32))[k])}


def rwkv_inputs(rng: np.random.Generator, k: int) -> Arrays:
    b = (1, 2, 4)[k]
    return {"x": f32(rng, b, 8, 32), "state_a": f32(rng, b, 32, scale=0.1),
            "state_b": np.abs(f32(rng, b, 32)) + 0.5, "state_p": f32(rng, b, 32) - 5}


def rwkv_unrolled(path: Path, opset: int) -> None:
    """An RWKV time-mix layer: token shift, then the numerically stable WKV recurrence unrolled
    over 8 steps, its state (a, b, p) in and out."""
    import torch
    from torch import nn

    class TimeMix(nn.Module):
        def __init__(self, d: int = 32, T: int = 8) -> None:
            super().__init__()
            self.T = T
            self.k, self.v, self.r, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
            self.decay = nn.Parameter(torch.randn(d) * 0.5)
            self.first = nn.Parameter(torch.randn(d) * 0.5)
            self.mix = nn.Parameter(torch.rand(d))
            self.ln = nn.LayerNorm(d)

        def forward(self, x: torch.Tensor, state_a: torch.Tensor, state_b: torch.Tensor,
                    state_p: torch.Tensor) -> tuple[torch.Tensor, ...]:
            x = self.ln(x)
            prev = torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], 1)
            xm = x * self.mix + prev * (1 - self.mix)
            k, v, r = self.k(xm), self.v(xm), torch.sigmoid(self.r(xm))
            w = -torch.exp(self.decay)
            a, b, p = state_a, state_b, state_p
            outs = []
            for t in range(self.T):
                kt, vt = k[:, t], v[:, t]
                ww = self.first + kt
                q = torch.maximum(p, ww)
                e1, e2 = torch.exp(p - q), torch.exp(ww - q)
                outs.append((e1 * a + e2 * vt) / (e1 * b + e2))
                ww = p + w
                q = torch.maximum(ww, kt)
                e1, e2 = torch.exp(ww - q), torch.exp(kt - q)
                a, b, p = e1 * a + e2 * vt, e1 * b + e2, q
            return self.o(r * torch.stack(outs, 1)), a, b, p

    example = _example(rwkv_inputs)
    outputs = ["y", "a", "b", "p"]
    _torchscript(TimeMix(), tuple(example.values()), path, opset, list(example), outputs,
                 {name: {0: "b"} for name in [*example, *outputs]})


def rope_inputs(rng: np.random.Generator, k: int) -> Arrays:
    b, t = ((2, 16), (1, 11), (3, 29))[k]
    start = rng.integers(0, 50, (b, 1))
    return {"x": f32(rng, b, t, 64), "position_ids": (start + np.arange(t)).astype(np.int64)}


def rope_alibi(path: Path, opset: int, dynamo: bool) -> None:
    """Causal attention with rotary embeddings on 8 of each head's 16 dimensions, ALiBi slopes
    over relative positions, RMSNorm first (``nn.RMSNorm`` for the dynamo export, written out
    for the TorchScript one)."""
    import torch
    from torch import nn

    class Attention(nn.Module):
        def __init__(self, d: int = 64, h: int = 4, rot: int = 8,
                     manual_norm: bool = False) -> None:
            super().__init__()
            self.manual_norm = manual_norm
            self.h, self.hd, self.rot = h, d // h, rot
            self.qkv = nn.Linear(d, 3 * d)
            self.o = nn.Linear(d, d)
            self.register_buffer(
                "inv_freq", 1.0 / (10000 ** (torch.arange(0, rot, 2).float() / rot)))
            self.register_buffer("slopes",
                                 torch.tensor([2 ** (-8 * (i + 1) / h) for i in range(h)]))
            self.norm = nn.RMSNorm(d)

        def rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
            xr, xp = x[..., :self.rot], x[..., self.rot:]
            x1, x2 = xr[..., : self.rot // 2], xr[..., self.rot // 2:]
            return torch.cat([xr * cos + torch.cat([-x2, x1], -1) * sin, xp], -1)

        def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
            B, T, D = x.shape
            if self.manual_norm:
                xn = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * self.norm.weight
            else:
                xn = self.norm(x)
            q, k, v = self.qkv(xn).view(B, T, 3, self.h, self.hd).permute(2, 0, 3, 1, 4)
            fr = position_ids.float().unsqueeze(-1) * self.inv_freq  # B, T, rot/2
            emb = torch.cat([fr, fr], -1).unsqueeze(1)
            cos, sin = emb.cos(), emb.sin()
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            s = q @ k.transpose(-1, -2) / math.sqrt(self.hd)
            rel = (position_ids.unsqueeze(1) - position_ids.unsqueeze(2)).float()  # j - i
            s = s + self.slopes.view(1, -1, 1, 1) * rel.unsqueeze(1)
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
            a = s.softmax(-1) @ v
            return x + self.o(a.transpose(1, 2).reshape(B, T, D))

    example = _example(rope_inputs)
    args = (example["x"], example["position_ids"])
    if dynamo:
        b, t = torch.export.Dim("b", min=1, max=64), torch.export.Dim("t", min=2, max=2048)
        _dynamo(Attention(), args, path, opset, ["x", "position_ids"], ["y"],
                ({0: b, 1: t}, {0: b, 1: t}))
    else:
        _torchscript(Attention(manual_norm=True), args, path, opset, ["x", "position_ids"],
                     ["y"], {"x": {0: "b", 1: "t"}, "position_ids": {0: "b", 1: "t"},
                             "y": {0: "b", 1: "t"}})


# --------------------------------------------------------------------------- functions, opsets


def _mlp_blocks() -> nn.Module:
    """Three pre-norm MLP blocks (tanh GELU) and a head, [batch, tokens, 32] to 5."""
    import torch.nn.functional as F
    from torch import nn

    class Blk(nn.Module):
        # An exported local function is named by its class: domain the module, name "Blk"
        # (not "_mlp_blocks.<locals>.Blk").
        __qualname__ = "Blk"

        def __init__(self, d: int = 32) -> None:
            super().__init__()
            self.ln = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, 2 * d)
            self.fc2 = nn.Linear(2 * d, d)

        def forward(self, x):
            return x + self.fc2(F.gelu(self.fc1(self.ln(x)), approximate="tanh"))

    class Blocks(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.Sequential(Blk(), Blk(), Blk())
            self.head = nn.Linear(32, 5)

        def forward(self, x):
            return self.head(self.blocks(x))

    return Blocks()


_TOKENS_AXES = {"x": {0: "b", 1: "t"}, "y": {0: "b", 1: "t"}}


def tokens_inputs(rng: np.random.Generator, k: int) -> Arrays:
    return {"x": f32(rng, *((2, 10, 32), (1, 7, 32), (4, 13, 32))[k])}


def local_functions(path: Path, opset: int) -> None:
    """``_mlp_blocks`` with each block exported as an ONNX local function."""
    import torch

    module = _mlp_blocks()
    _torchscript(module, (torch.randn(2, 10, 32),), path, opset, ["x"], ["y"], _TOKENS_AXES,
                 export_modules_as_functions={type(module.blocks[0])})


def onnxscript_functions(path: Path, opset: int) -> None:
    """Two residual MLP steps written in onnxscript: local functions ``rmsnorm`` and ``mlp``,
    ``mlp`` calling ``gelu_tanh``; the weights made initializers."""
    import onnx
    from onnxscript import FLOAT, script
    from onnxscript import opset18 as op
    from onnxscript.values import Opset

    local = Opset("fam.local", 1)
    rng = np.random.default_rng(1)
    weights = {"w1": rng.standard_normal((16, 32)).astype(np.float32) * 0.3,
               "w2": rng.standard_normal((32, 16)).astype(np.float32) * 0.3}

    @script(local)
    def gelu_tanh(x):
        c = op.Constant(value_float=0.7978845608)
        k = op.Constant(value_float=0.044715)
        half = op.Constant(value_float=0.5)
        one = op.Constant(value_float=1.0)
        return half * x * (one + op.Tanh(c * (x + k * x * x * x)))

    @script(local)
    def mlp(x, w1, w2):
        h = gelu_tanh(op.MatMul(x, w1))
        return op.MatMul(h, w2)

    @script(local)
    def rmsnorm(x):
        ms = op.ReduceMean(x * x, op.Constant(value_ints=[-1]), keepdims=1)
        eps = op.Constant(value_float=1e-6)
        return x / op.Sqrt(ms + eps)

    @script(default_opset=op)
    def main(x, w1, w2):
        y = x + mlp(rmsnorm(x), w1, w2)
        z = y + mlp(rmsnorm(y), w1, w2)
        return z

    proto = main.to_model_proto(input_types=[FLOAT["B", "T", 16], FLOAT[16, 32], FLOAT[32, 16]],
                                output_types=[FLOAT["B", "T", 16]])
    graph = proto.graph
    graph.initializer.extend(onnx.numpy_helper.from_array(v, k) for k, v in weights.items())
    x = [i for i in graph.input if i.name == "x"]
    del graph.input[:]
    graph.input.extend(x)
    onnx.checker.check_model(proto)
    onnx.save(proto, str(path))


def onnxscript_inputs(rng: np.random.Generator, k: int) -> Arrays:
    return {"x": f32(rng, *((2, 10, 16), (1, 7, 16), (3, 4, 16))[k])}


def opset23_helper(path: Path, opset: int) -> None:
    """A hand-built graph of recent ops: GroupNormalization, Gelu, a float16 round trip, DFT
    and ReduceL2 on an image; RMSNormalization, Split and causal Attention on a sequence;
    IsNaN and ArgMax outputs."""
    from onnx import TensorProto as TP
    from onnx import helper as H
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(2)
    weights = {"gn_s": rng.standard_normal(4).astype(np.float32),
               "gn_b": rng.standard_normal(4).astype(np.float32),
               "rms_s": rng.standard_normal(16).astype(np.float32),
               "Wqkv": (rng.standard_normal((16, 48)) * 0.2).astype(np.float32),
               "shp_flat": np.array([0, 0, -1, 1], np.int64),
               "ax_m2": np.array(-2, np.int64),
               "ax_last": np.array([-1], np.int64),
               "dft_len": np.array(16, np.int64)}
    nodes = [
        H.make_node("GroupNormalization", ["img", "gn_s", "gn_b"], ["gn"], num_groups=2,
                    epsilon=1e-5),
        H.make_node("Gelu", ["gn"], ["ge"], approximate="tanh"),
        H.make_node("Cast", ["ge"], ["ge16"], to=TP.FLOAT16),
        H.make_node("Cast", ["ge16"], ["ge32"], to=TP.FLOAT),
        H.make_node("Reshape", ["ge32", "shp_flat"], ["flat"]),  # B, 4, H*W, 1
        H.make_node("DFT", ["flat", "dft_len", "ax_m2"], ["spec"], onesided=1),  # B, 4, 9, 2
        H.make_node("ReduceL2", ["spec", "ax_last"], ["mag"], keepdims=0),  # B, 4, 9
        H.make_node("RMSNormalization", ["seq", "rms_s"], ["rn"], axis=-1, epsilon=1e-6),
        H.make_node("MatMul", ["rn", "Wqkv"], ["qkv"]),
        H.make_node("Split", ["qkv"], ["q", "k", "v"], axis=-1, num_outputs=3),
        H.make_node("Attention", ["q", "k", "v"], ["att"], q_num_heads=4, kv_num_heads=4,
                    is_causal=1),
        H.make_node("Add", ["att", "seq"], ["seq_out"]),
        H.make_node("IsNaN", ["seq_out"], ["has_nan_el"]),
        H.make_node("ArgMax", ["mag"], ["peak"], axis=-1, keepdims=0),
    ]
    graph = H.make_graph(
        nodes, "opset23",
        [H.make_tensor_value_info("img", TP.FLOAT, ["B", 4, 4, 4]),
         H.make_tensor_value_info("seq", TP.FLOAT, ["B", "T", 16])],
        [H.make_tensor_value_info("mag", TP.FLOAT, ["B", 4, 9]),
         H.make_tensor_value_info("seq_out", TP.FLOAT, ["B", "T", 16]),
         H.make_tensor_value_info("has_nan_el", TP.BOOL, ["B", "T", 16]),
         H.make_tensor_value_info("peak", TP.INT64, ["B", 4])],
        [nh.from_array(value, name) for name, value in weights.items()])
    _save_helper_model(graph, path, opset, ir_version=10, full_check=True)


def opset23_inputs(rng: np.random.Generator, k: int) -> Arrays:
    b = (2, 1, 3)[k]
    return {"img": f32(rng, b, 4, 4, 4), "seq": f32(rng, b, (6, 9, 3)[k], 16)}


def spatial_transformer(path: Path, opset: int) -> None:
    """A spatial transformer: a localisation net predicting an affine ``theta`` (started at
    the identity), ``affine_grid`` and ``grid_sample``, then a classifier."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class STN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.loc = nn.Sequential(nn.Conv2d(1, 8, 5, 2), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                     nn.Flatten(), nn.Linear(8, 6))
            with torch.no_grad():
                self.loc[-1].weight.mul_(0.1)
                self.loc[-1].bias.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))
            self.cls = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                     nn.Flatten(1), nn.LazyLinear(10))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            theta = self.loc(x).view(-1, 2, 3)
            grid = F.affine_grid(theta, list(x.shape), align_corners=False)
            xt = F.grid_sample(x, grid, mode="bilinear", padding_mode="border",
                               align_corners=False)
            return self.cls(xt), theta

    module = STN()
    module(torch.randn(1, 1, 28, 28))  # sizes the LazyLinear
    _torchscript(module, (torch.randn(1, 1, 28, 28),), path, opset, ["x"], ["logits", "theta"],
                 {"x": {0: "b"}, "logits": {0: "b"}, "theta": {0: "b"}})


def digits_inputs(rng: np.random.Generator, k: int) -> Arrays:
    return {"x": f32(rng, (1, 3, 2)[k], 1, 28, 28)}


# --------------------------------------------------------------------------- quantized


def _quantize(path: Path, quantize: Callable[[str, str], None], module: nn.Module,
              example: torch.Tensor, opset: int, names: list[str], outputs: list[str],
              axes: dict[str, dict[int, str]]) -> None:
    """Export ``module`` in float32 beside ``path``, then ``quantize(float_path, path)``."""
    floating = path.with_name(path.stem + ".fp32.onnx")
    _torchscript(module, (example,), floating, opset, names, outputs, axes)
    quantize(str(floating), str(path))
    floating.unlink()


def qdq_static_cnn(path: Path, opset: int) -> None:
    """A small CNN (a depthwise convolution, pooling, a linear head) statically quantized by
    ONNX Runtime to int8 QDQ, per channel, calibrated on 8 random images."""
    import torch
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from torch import nn

    class CNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.f = nn.Sequential(
                nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(),
                nn.Conv2d(32, 32, 3, padding=1, groups=32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                nn.Flatten(), nn.Linear(32, 10))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.f(x)

    class Calibration(CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter([{"x": f32(np.random.default_rng(i), 1, 3, 32, 32)}
                                 for i in range(8)])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.batches, None)

    def quantize(floating: str, target: str) -> None:
        quantize_static(floating, target, Calibration(), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        per_channel=True)

    _quantize(path, quantize, CNN(), torch.randn(1, 3, 32, 32), opset, ["x"], ["logits"],
              {"x": {0: "b"}, "logits": {0: "b"}})


def dynquant_mlp(path: Path, opset: int) -> None:
    """``_mlp_blocks`` dynamically quantized by ONNX Runtime (int8 weights)."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    def quantize(floating: str, target: str) -> None:
        quantize_dynamic(floating, target, weight_type=QuantType.QInt8)

    _quantize(path, quantize, _mlp_blocks(), torch.randn(2, 10, 32), opset, ["x"], ["y"],
              _TOKENS_AXES)


def cnn_inputs(rng: np.random.Generator, k: int) -> Arrays:
    return {"x": f32(rng, (1, 2, 3)[k], 3, 32, 32)}


# --------------------------------------------------------------------------- edge cases


def mixed_inputs(rng: np.random.Generator, k: int) -> Arrays:
    b, h, w = ((1, 16, 16), (2, 12, 20), (1, 24, 8))[k]
    return {"image_u8": rng.integers(0, 256, (b, h, w, 3)).astype(np.uint8),
            "valid": rng.random((b, h, w)) < 0.8,
            "bias_i8": rng.integers(-128, 128, (b,)).astype(np.int8)}


def mixed_dtypes(path: Path, opset: int) -> None:
    """A uint8 NHWC image, a bool mask and an int8 bias in; float logits, an int64 class map,
    a bool foreground map and a uint8 NHWC visualization out."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Mixed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.c2 = nn.Conv2d(8, 5, 1)

        def forward(self, image_u8: torch.Tensor, valid: torch.Tensor,
                    bias_i8: torch.Tensor) -> tuple[torch.Tensor, ...]:
            x = image_u8.permute(0, 3, 1, 2).float() / 255.0
            x = F.relu(self.c1(x))
            logits = self.c2(x) + bias_i8.float().view(-1, 1, 1, 1) / 16
            logits = torch.where(valid.unsqueeze(1), logits, torch.zeros_like(logits))
            cls = logits.argmax(1)
            fg = logits.max(1).values > 0
            vis = (torch.sigmoid(logits[:, :3]) * 255).to(torch.uint8).permute(0, 2, 3, 1)
            return logits, cls, fg, vis

    example = _example(mixed_inputs)
    _torchscript(Mixed(), tuple(example.values()), path, opset, list(example),
                 ["logits", "cls", "fg", "vis"],
                 {"image_u8": {0: "b", 1: "h", 2: "w"}, "valid": {0: "b", 1: "h", 2: "w"},
                  "bias_i8": {0: "b"}})


def data_dependent(path: Path, opset: int) -> None:
    """Outputs whose shapes depend on the values: NonZero, a masked select, Unique; and
    argsort, cumsum."""
    import torch
    from torch import nn

    class DataDependent(nn.Module):
        def forward(self, x: torch.Tensor, thresh: torch.Tensor) -> tuple[torch.Tensor, ...]:
            keep = torch.nonzero(x > thresh)  # N, 2 int64
            values = x[x > thresh]
            order = torch.argsort(x, dim=-1, descending=True)
            unique = torch.unique(torch.round(x * 2), sorted=True)
            return keep, values, order, unique, torch.cumsum(x, -1)

    _torchscript(DataDependent(), (torch.randn(3, 10), torch.tensor(0.5)), path, opset,
                 ["x", "thresh"], ["keep", "vals", "order", "uniq", "cs"], {"x": {0: "b", 1: "n"}})


def data_dependent_inputs(rng: np.random.Generator, k: int) -> Arrays:
    return {"x": f32(rng, *((3, 10), (2, 7), (5, 13))[k]), "thresh": np.array(0.3, np.float32)}


def detection_inputs(rng: np.random.Generator, k: int) -> Arrays:
    n, hw = ((20, 32), (13, 40), (31, 24))[k]
    xy = rng.uniform(0, hw * 0.7, (n, 2))
    wh = rng.uniform(2, hw * 0.3, (n, 2))
    return {"img": f32(rng, 1, 3, hw, hw),
            "boxes": np.concatenate([xy, xy + wh], 1).astype(np.float32),
            "scores": rng.random(n).astype(np.float32)}


def roialign_nms(path: Path, opset: int) -> None:
    """Detection post-processing: torchvision's ``nms`` over given boxes, then ``roi_align``
    of the kept ones on a feature map and a classifier."""
    import torch
    import torch.nn.functional as F
    import torchvision
    from torch import nn

    class PostProcess(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.fc = nn.Linear(8 * 4 * 4, 3)

        def forward(self, img: torch.Tensor, boxes: torch.Tensor,
                    scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            f = F.relu(self.conv(img))
            keep = torchvision.ops.nms(boxes, scores, 0.5)
            kept = boxes[keep]
            rois = torch.cat([torch.zeros(kept.shape[0], 1), kept], 1)
            pooled = torchvision.ops.roi_align(f, rois, (4, 4), spatial_scale=0.5,
                                               sampling_ratio=2, aligned=True)
            return self.fc(pooled.flatten(1)), keep

    example = _example(detection_inputs)
    _torchscript(PostProcess(), tuple(example.values()), path, opset, list(example),
                 ["cls_logits", "keep"],
                 {"img": {2: "h", 3: "w"}, "boxes": {0: "n"}, "scores": {0: "n"}})


def edge_outputs(path: Path, opset: int) -> None:
    """The same computation twice as two outputs, the input passed through, a constant buffer
    and a batch-size-derived int64 as outputs."""
    import torch
    from torch import nn

    class EdgeOutputs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("table", torch.arange(6, dtype=torch.float32).view(2, 3))
            self.lin = nn.Linear(3, 3)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            a = self.lin(x) * 2
            b = self.lin(x) * 2
            nrows = x.shape[0] * torch.ones(1, dtype=torch.int64)
            return a, b, x, self.table, nrows, (a > 0).sum(-1)

    _torchscript(EdgeOutputs(), (torch.randn(4, 3),), path, opset, ["x"],
                 ["a", "b", "x_out", "table", "nrows", "npos"],
                 {"x": {0: "n"}, "a": {0: "n"}, "b": {0: "n"}, "x_out": {0: "n"},
                  "npos": {0: "n"}})


def edge_outputs_helper(path: Path, opset: int) -> None:
    """Hand-built: an output named like the input, two outputs of one computation, an
    initializer and a constant's copy as outputs."""
    from onnx import TensorProto as TP
    from onnx import helper as H
    from onnx import numpy_helper as nh

    nodes = [H.make_node("Mul", ["x", "c"], ["y1"]), H.make_node("Mul", ["x", "c"], ["y2"]),
             H.make_node("Identity", ["y1"], ["y3"]), H.make_node("Shape", ["x"], ["shp"]),
             H.make_node("Identity", ["k_const"], ["k_out"])]
    rows = H.make_tensor_value_info
    graph = H.make_graph(
        nodes, "edge", [rows("x", TP.FLOAT, ["N", 3])],
        [rows("y1", TP.FLOAT, ["N", 3]), rows("y2", TP.FLOAT, ["N", 3]),
         rows("y3", TP.FLOAT, ["N", 3]), rows("x", TP.FLOAT, ["N", 3]),
         rows("shp", TP.INT64, [2]), rows("k_out", TP.INT64, [1, 3]), rows("c", TP.FLOAT, [3])],
        [nh.from_array(np.array([1.5, -2.0, 0.25], np.float32), "c"),
         nh.from_array(np.array([[1, 2, 3]], np.int64), "k_const")])
    _save_helper_model(graph, path, opset, ir_version=8)


def rows3_inputs(rng: np.random.Generator, k: int) -> Arrays:
    return {"x": f32(rng, (4, 3, 9)[k], 3)}


def init_as_inputs(path: Path, opset: int) -> None:
    """A linear layer and softmax exported with ``keep_initializers_as_inputs=True``: the
    weights are also inputs, with defaults."""
    import torch
    from torch import nn

    class Classifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(8, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.softmax(self.lin(x), -1)

    _torchscript(Classifier(), (torch.randn(2, 8),), path, opset, ["x"], ["p"],
                 {"x": {0: "b"}, "p": {0: "b"}}, keep_initializers_as_inputs=True)


def init_as_inputs_inputs(rng: np.random.Generator, k: int) -> Arrays:
    return {"x": f32(rng, (2, 3, 5)[k], 8)}


def nan_rows(path: Path, opset: int) -> None:
    """Self-attention scores with padded keys masked to -inf: rows fully masked give NaN; an
    ``isnan`` bool output."""
    import torch
    from torch import nn

    class NaNRows(nn.Module):
        def forward(self, x: torch.Tensor,
                    pad_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            s = (x @ x.transpose(1, 2)).masked_fill(pad_mask.unsqueeze(1), float("-inf"))
            p = s.softmax(-1)
            return p @ x, torch.isnan(p).any(-1)

    mask = torch.zeros(2, 6, dtype=torch.bool)
    mask[1, :] = True
    _torchscript(NaNRows(), (torch.randn(2, 6, 8), mask), path, opset, ["x", "pad_mask"],
                 ["y", "nan_row"], {"x": {0: "b", 1: "t"}, "pad_mask": {0: "b", 1: "t"}})


def nan_rows_inputs(rng: np.random.Generator, k: int) -> Arrays:
    b, t = ((2, 6), (3, 5), (2, 9))[k]
    mask = rng.random((b, t)) < 0.3
    mask[0, :] = True
    return {"x": f32(rng, b, t, 8), "pad_mask": mask}


def align_small_weights(path: Path, opset: int) -> None:
    """64 chained Adds of 258-float weights (1032 bytes each, just over the 1 KiB threshold),
    every weight in ``NAME.onnx.data``."""
    from onnx import TensorProto as TP
    from onnx import helper as H
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(0)
    weights, nodes, previous = [], [], "x"
    for i in range(64):
        weights.append(nh.from_array(rng.standard_normal(258).astype(np.float32), f"w{i}"))
        nodes.append(H.make_node("Add", [previous, f"w{i}"], [f"h{i}"]))
        previous = f"h{i}"
    nodes.append(H.make_node("Identity", [previous], ["y"]))
    graph = H.make_graph(nodes, "align", [H.make_tensor_value_info("x", TP.FLOAT, ["B", 258])],
                         [H.make_tensor_value_info("y", TP.FLOAT, ["B", 258])], weights)
    _save_helper_model(graph, path, opset, ir_version=8, save_as_external_data=True,
                       all_tensors_to_one_file=True, location=f"{path.name}.data",
                       size_threshold=1024)


# --------------------------------------------------------------------------- the corpus


def models() -> list[Model]:
    """Every file the corpus holds, in build order."""
    p = functools.partial
    ts, dyn, script = "torchscript", "dynamo", "torchscript(jit.script)"
    quantized = "torchscript + onnxruntime.quantization"
    mel_inputs = wave_inputs((1, 4000), (2, 3200), (1, 5003))
    conformer_family = "speech Conformer block"
    dlrm_family = "recommender DLRM (EmbeddingBag+offsets)"
    style_family = "style transfer (ReflectionPad, InstanceNorm, nearest up)"
    gnn_family = "GNN message passing (ScatterElements add/max, ScatterND add)"
    mamba_family = "state-space / Mamba-like selective scan (cumsum, exp, einsum, tril)"
    rope_family = "attention with partial RoPE + ALiBi + RMSNorm"
    sr_shapes = ((1, 3, 24, 24), (2, 3, 17, 30), (1, 3, 40, 12))
    style_shapes = ((1, 3, 40, 24), (3, 3, 16, 64))
    return [
        Model("unet_tiny_ts", "diffusion UNet2DConditionModel", ts, 17, p(unet, dynamo=False),
              unet_inputs, package="diffusers"),
        Model("unet_tiny_dynamo", "diffusion UNet2DConditionModel", dyn, 18,
              p(unet, dynamo=True), unet_inputs, package="diffusers"),
        Model("vae_decoder_ts", "diffusion VAE decoder", ts, 17, vae_decoder, vae_inputs,
              package="diffusers"),
        Model("logmel_stft_ts", "audio front end (STFT + mel)", ts, 17, logmel_stft, mel_inputs),
        Model("logmel_stft_dynamo", "audio front end (STFT complex + rfft)", dyn, 18,
              logmel_complex_stft, wave_inputs((2, 4000), (2, 3200), (2, 5003))),
        Model("conformer_ts", conformer_family, ts, 17, p(conformer, dynamo=False),
              conformer_inputs),
        Model("conformer_dynamo", conformer_family, dyn, 18, p(conformer, dynamo=True),
              conformer_inputs),
        Model("convtasnet_ts", "speech separation Conv-TasNet", ts, 17, conv_tasnet,
              wave_inputs((1, 8000), (2, 4008), (1, 12000))),
        Model("wav2vec2_tiny_ts", "HF Wav2Vec2 (audio encoder)", ts, 17, wav2vec2,
              wav2vec2_inputs),
        Model("hifigan_dynamo", "HF SpeechT5 HiFi-GAN vocoder", dyn, 18, hifigan,
              hifigan_inputs),
        Model("script_loop_if_ts", "torch.jit.script data-dependent Loop/If", script, 17,
              script_loop_if, script_loop_if_inputs, needs_inputs=True),
        Model("greedy_decode_ts",
              "torch.jit.script greedy decoding loop (GRU cell, argmax, cat, break)", script, 17,
              greedy_decode, greedy_decode_inputs, needs_inputs=True),
        Model("dlrm_embbag_ts", dlrm_family, ts, 17, p(dlrm, dynamo=False), dlrm_inputs,
              needs_inputs=True),
        Model("dlrm_embbag_dynamo", dlrm_family, dyn, 18, p(dlrm, dynamo=True), dlrm_inputs,
              needs_inputs=True),
        Model("gan_generator_ts", "GAN generator (ConvT, InstanceNorm, Upsample, PixelShuffle)",
              ts, 17, gan_generator, gan_inputs),
        Model("esrgan_lite_ts", "super-resolution (RDB, PixelShuffle, bicubic)", ts, 17,
              super_resolution, image_inputs("lr", *sr_shapes)),
        Model("style_transfer_dynamo", style_family, dyn, 18, p(style_transfer, dynamo=True),
              image_inputs("image", (2, 3, 32, 48), *style_shapes)),
        Model("style_transfer_ts", style_family, ts, 17, p(style_transfer, dynamo=False),
              image_inputs("image", (1, 3, 32, 48), *style_shapes)),
        Model("dgcnn_pointcloud_ts", "point cloud DGCNN/PointNet (TopK, gather, max-pool)", ts,
              17, dgcnn_pointcloud, points_inputs),
        Model("gnn_scatter_ts", gnn_family, ts, 18, p(gnn_scatter, dynamo=False), gnn_inputs,
              needs_inputs=True),
        Model("gnn_scatter_dynamo", gnn_family, dyn, 18, p(gnn_scatter, dynamo=True),
              gnn_inputs, needs_inputs=True),
        Model("mamba_like_ts", mamba_family, ts, 17, p(mamba_like, dynamo=False), mamba_inputs),
        Model("mamba_like_dynamo", mamba_family, dyn, 18, p(mamba_like, dynamo=True),
              mamba_inputs),
        Model("rwkv_unrolled_ts", "RWKV-like time-mix recurrence, unrolled (8 steps)", ts, 17,
              rwkv_unrolled, rwkv_inputs),
        Model("rope_alibi_dynamo", rope_family, dyn, 18, p(rope_alibi, dynamo=True),
              rope_inputs),
        Model("rope_alibi_ts", rope_family, ts, 18, p(rope_alibi, dynamo=False), rope_inputs),
        Model("local_functions_ts", "ONNX local functions (export_modules_as_functions)", ts,
              17, local_functions, tokens_inputs),
        Model("onnxscript_functions",
              "onnxscript-authored model with nested local functions (opset 18)", "onnxscript",
              18, onnxscript_functions, onnxscript_inputs),
        Model("opset23_helper", "hand-built opset 23 graph (GroupNorm-21, Gelu-20, DFT-20, "
              "RMSNorm-23, Attention-23, Cast fp16)", "onnx.helper", 23, opset23_helper,
              opset23_inputs),
        Model("mixed_dtypes_ts",
              "uint8 NHWC / bool / int8 inputs; int64, bool, uint8 outputs", ts, 17,
              mixed_dtypes, mixed_inputs),
        Model("data_dependent_ts",
              "data-dependent shapes (NonZero, masked_select, argsort, Unique)", ts, 17,
              data_dependent, data_dependent_inputs),
        Model("spatial_transformer_ts", "spatial transformer (affine_grid + GridSample)", ts, 20,
              spatial_transformer, digits_inputs),
        Model("roialign_nms_ts", "detection post-processing (torchvision nms + roi_align)", ts,
              17, roialign_nms, detection_inputs, needs_inputs=True),
        Model("qdq_static_cnn", "ORT static-quantized QDQ CNN (int8)", quantized, 17,
              qdq_static_cnn, cnn_inputs),
        Model("dynquant_mlp", "ORT dynamic-quantized transformer MLP "
              "(MatMulInteger/DynamicQuantizeLinear)", quantized, 17, dynquant_mlp,
              tokens_inputs),
        Model("seq_list_script_ts", "torch.jit.script list append in loop (Sequence ops)",
              script, 17, seq_list_script, seq_list_inputs, needs_inputs=True),
        Model("edge_outputs_ts", "duplicate outputs, input passthrough, constant output, "
              "shape-derived int output", ts, 17, edge_outputs, rows3_inputs),
        Model("edge_outputs_helper",
              "hand-built: output==input name, two outputs one tensor, initializer output",
              "onnx.helper", 17, edge_outputs_helper, rows3_inputs),
        Model("init_as_inputs_ts", "keep_initializers_as_inputs=True (overridable weights)", ts,
              17, init_as_inputs, init_as_inputs_inputs),
        Model("fp16_native_cnn_ts", "model exported in float16 (native half I/O)", ts, 17,
              p(super_resolution, half=True),
              image_inputs("lr", *sr_shapes, dtype=np.float16)),
        Model("mamba_like_dynamo_op21", "state-space / Mamba-like, dynamo at opset 21", dyn, 21,
              p(mamba_like, dynamo=True), mamba_inputs),
        Model("conformer_dynamo_op23", "speech Conformer block, dynamo at opset 23", dyn, 23,
              p(conformer, dynamo=True), conformer_inputs),
        Model("misnamed_dims_ts", "STFT front end whose output frame axis is (wrongly) named "
              "like the input's sample axis", ts, 17, p(logmel_stft, frames="t"), mel_inputs),
        Model("nan_rows_ts", "softmax over fully -inf-masked rows (NaN outputs) + isnan bool "
              "output", ts, 17, nan_rows, nan_rows_inputs),
        Model("align_small_weights_ext", "synthetic: 64 chained Adds, 64 external weights of "
              "1032 B (just over the 1 KiB threshold)", "onnx.helper (external data)", 17,
              align_small_weights, None),
    ]


# --------------------------------------------------------------------------- build


@functools.cache
def _missing(package: str) -> str | None:
    """Why ``package`` cannot be used (``None`` when it imports)."""
    try:
        importlib.import_module(package)
    except Exception as err:  # noqa: BLE001 - any import failure makes the models skipped
        return f"needs {package}, which does not import ({first_line(err)})"
    return None


def _build_one(model: Model, out: Path) -> dict[str, Any]:
    """Write ``out/NAME.onnx`` (its data file, its input sets) through a scratch folder, so that
    a failed or interrupted build leaves nothing that looks like a built model."""
    import onnx
    import onnxruntime
    import torch

    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix=f".{model.name}-", dir=out) as scratch:
        path = Path(scratch) / f"{model.name}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporters' deprecation and tracer warnings
            torch.manual_seed(SEED)
            model.build(path, model.opset)
        onnx.checker.check_model(str(path))
        try:
            onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        except Exception as err:  # noqa: BLE001 - noted, the model is kept
            notes.append(f"ONNX Runtime refuses it: {first_line(err)}")
        nodes = len(onnx.load(path, load_external_data=False).graph.node)
        inputs: list[str] = []
        if model.inputs:
            for k, (suffix, seed) in enumerate(INPUT_SETS):
                inputs.append(f"{model.name}.{suffix}.npz")
                arrays = model.inputs(np.random.default_rng(seed), k)
                np.savez(Path(scratch) / inputs[-1], **arrays)
        files = sorted(Path(scratch).iterdir())
        for file in files:
            os.replace(file, out / file.name)
    model_files = [f for f in files if not f.name.endswith(".npz")]
    return {"notes": notes, "nodes": nodes, "inputs": inputs,
            "bytes": sum((out / f.name).stat().st_size for f in model_files)}


def build(out: Path, names: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """Build the models named (all by default) into ``out``, skipping those whose file exists
    or whose package does not import; returns each one's manifest entry."""
    out.mkdir(parents=True, exist_ok=True)
    status: dict[str, dict[str, Any]] = {}
    for model in models():
        if names and model.name not in names:
            continue
        record: dict[str, Any] = {"family": model.family, "exporter": model.exporter,
                                  "opset": model.opset, "needs_inputs": model.needs_inputs}
        if (out / f"{model.name}.onnx").exists():
            status[model.name] = {**record, "status": "existing"}
        elif model.package and (reason := _missing(model.package)):
            print(f"skipping {model.name}: {reason}", flush=True)
            status[model.name] = {**record, "status": "skipped", "reason": reason}
        else:
            job = functools.partial(_build_one, model, out)
            status[model.name] = attempt(model.name, job, record)
    return status


def report(status_file: Path, status: dict[str, dict[str, Any]], started: float) -> int:
    """Merge the models built, skipped or failed into the manifest ``status_file``, print a
    table of them and the tally; returns the exit status (1 if any failed)."""
    from world_corpus import save_status  # the world corpus's own manifest

    save_status(status_file, status)
    width = max(len(name) for name in status) + 2
    print(f"\n{'model':<{width}}{'status':<10}{'opset':>5}{'nodes':>7}{'bytes':>10}  "
          f"{'seconds':>7}  inputs / why")
    for name, entry in status.items():
        why = entry.get("error") or entry.get("reason") or ""
        inputs = "needs inputs" if entry["needs_inputs"] else ""
        print(f"{name:<{width}}{entry['status']:<10}{entry['opset']:>5}"
              f"{entry.get('nodes', ''):>7}{entry.get('bytes', ''):>10}  "
              f"{entry.get('seconds', ''):>7}  {why or inputs}")
    counts = {kind: sum(e["status"] == kind for e in status.values())
              for kind in ("built", "existing", "skipped", "failed")}
    print(f"\n{', '.join(f'{n} {kind}' for kind, n in counts.items())} "
          f"in {time.perf_counter() - started:.0f}s")
    return 1 if counts["failed"] else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("out_dir", type=Path, nargs="?")
    parser.add_argument("--only", nargs="+", default=[], metavar="NAME",
                        help="build these models only")
    parser.add_argument("--list", action="store_true", help="list the model names and exit")
    args = parser.parse_args(argv)
    listing = models()
    if args.list:
        width = max(len(m.name) for m in listing) + 2
        for m in listing:
            extra = f", needs {m.package}" if m.package else ""
            print(f"{m.name:<{width}}{m.exporter}, opset {m.opset}{extra}: {m.family}")
        return 0
    if args.out_dir is None:
        parser.error("OUT_DIR is required")
    unknown = sorted(set(args.only) - {m.name for m in listing})
    if unknown:
        parser.error(f"unknown model(s): {', '.join(unknown)} (see --list)")
    started = time.perf_counter()
    status = build(args.out_dir, args.only)
    return report(args.out_dir / STATUS_FILE, status, started)


if __name__ == "__main__":
    sys.exit(main())
