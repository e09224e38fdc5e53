"""Decoders with their cache, as a generation loop runs them (``tools/world_corpus.py``'s
``*_legacy_cache``): graphfix feeds them by itself (the attention mask spans the past and the
new tokens, which the signature does not say) and writes them optimized and correct."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import graphfix
from graphfix import feeds

pytestmark = pytest.mark.tools
ROOT = Path(__file__).resolve().parents[1]


def _export(tmp_path: Path, name: str) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    subprocess.run([sys.executable, str(ROOT / "tools" / "world_corpus.py"), str(tmp_path),
                    "--only", name, "--small"], check=True, capture_output=True)
    return tmp_path / f"{name}.onnx"


@pytest.mark.parametrize("name", ["gpt2_legacy_cache", "llama_legacy_cache",
                                  "mistral_legacy_cache"])
def test_a_decoder_step_with_its_cache_comes_out_optimized_and_correct(tmp_path, name) -> None:
    path = _export(tmp_path, name)
    original = graphfix.load(path)
    result = graphfix.optimize_file(path, tmp_path / "out.onnx")
    assert result.report.parity["passed"] and not result.report.left_out
    for run in graphfix.check_parity(original, graphfix.load(tmp_path / "out.onnx"),
                                     seed=7).runs:
        past = int(run["past_key_values.0.key"].split(", ")[2])
        new = int(run["input_ids"].split(", ")[1].rstrip("]"))
        assert run["attention_mask"].endswith(f", {past + new}]"), run
    assert len(graphfix.load(tmp_path / "out.onnx").graph.node) < len(original.graph.node) / 2
    assert np.all([spec.dynamic for spec in feeds.input_specs(original)])


def test_rotary_embeddings_the_fused_step_cannot_run_are_left_out_not_the_attention(
        tmp_path) -> None:
    # ORT's RotaryEmbedding fusion of Mistral's step takes position ids of a batch of one, and
    # the fused model does not run at batch 2: the attention is fused without it. (With
    # transformers 5.24's export ORT's optimizer matches no rotary embedding at all: then
    # there is nothing to leave out, and the attention is fused all the same.)
    path = _export(tmp_path, "mistral_legacy_cache")
    result = graphfix.optimize_file(path, tmp_path / "out.onnx", fuse="transformer",
                                    speed_gate=False)
    fused = next(p for p in result.report.passes if p.name == "fuse-transformer")
    assert fused.details["fused"].get("MultiHeadAttention", 0) >= 1, fused.details
    assert "RotaryEmbedding" not in fused.details["fused"]
    notes = fused.details["notes"]
    if any("RotaryEmbedding" in note for note in notes):
        assert any(note.startswith("without rotary embeddings:") for note in notes), notes
    assert graphfix.check_parity(graphfix.load(path), graphfix.load(tmp_path / "out.onnx"),
                                 seed=7).passed
