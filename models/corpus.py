"""The comparison corpus: every model graphfix and its peers are measured on, written to a folder.

Contents: the five converter-style NHWC CNNs, the NCHW model with one stray transpose pair, the
pure-onnx transformer encoder, the nine onnx ``light`` models as shipped (IR 3) and re-declared
at IR 7 (``light_*_ir7.onnx``, initializers still listed as inputs), and, when torch and
transformers are importable, the BERT-like encoder and the small torch CNN. ``full_size=False``
writes shrunken versions that build in seconds.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import onnx

from .light import LIGHT_NAMES, light_path, load_light
from .nhwc import NHWC_MODELS, nchw_stray_pair
from .transformer import transformer_encoder

__all__ = ["build_corpus", "SMALL_OPTIONS"]

logger = logging.getLogger(__name__)

# Options that shrink each builder for ``full_size=False``.
SMALL_OPTIONS: dict[str, dict[str, object]] = {
    "mobilenetv2_nhwc": {"image_size": 64, "width": 0.35, "num_classes": 10},
    "resnet50_nhwc": {"image_size": 64, "width": 0.25, "blocks": (1, 1, 1, 1), "num_classes": 10},
    "efficientnet_nhwc": {"image_size": 64, "width": 0.25, "depth": 0.34, "num_classes": 10},
    "densenet_nhwc": {"image_size": 64, "growth": 8, "blocks": (2, 2, 2, 2), "num_classes": 10},
    "unet_nhwc": {"image_size": 64, "width": 0.125, "depth": 3},
}


def _torch_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))


def build_corpus(
    out_dir: str | os.PathLike[str], *, full_size: bool = True, include_torch: bool = True
) -> list[Path]:
    """Write the corpus into ``out_dir`` (created if needed); return the written model paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def save(name: str, model: onnx.ModelProto) -> None:
        path = out / f"{name}.onnx"
        onnx.save(model, path)
        written.append(path)

    builders: dict[str, Callable[..., onnx.ModelProto]] = dict(NHWC_MODELS)
    for name, builder in builders.items():
        save(name, builder(**({} if full_size else SMALL_OPTIONS[name])))
    save("nchw_stray_pair", nchw_stray_pair())
    if full_size:
        save("transformer_encoder", transformer_encoder(layers=12, hidden=768, heads=12,
                                                        ffn=3072, vocab=30522))
    else:
        save("transformer_encoder", transformer_encoder())
    for name in LIGHT_NAMES:
        shipped = out / f"{name}.onnx"
        shutil.copyfile(light_path(name), shipped)
        written.append(shipped)
        save(f"{name}_ir7", load_light(name, ir_version=7))
    if include_torch and _torch_available():
        from .torch_models import export_bert_like, export_small_cnn

        written.append(export_bert_like(out / "bert_like.onnx", bert_base_config=full_size))
        written.append(export_small_cnn(out / "torch_small_cnn.onnx"))
    elif include_torch:
        logger.info("torch or transformers not importable: skipping bert_like and torch_small_cnn")
    return written
