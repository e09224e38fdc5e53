"""Exports of common families (``tools/text_families_corpus.py``,
``tools/vision_families_corpus.py``) that once broke graphfix: each comes out optimized and
correct now."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import graphfix

pytestmark = pytest.mark.tools
ROOT = Path(__file__).resolve().parents[1]


def _export(tmp_path: Path, tool: str, name: str) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    subprocess.run([sys.executable, str(ROOT / "tools" / tool), str(tmp_path), "--only", name],
                   check=True, capture_output=True)
    return tmp_path / f"{name}.onnx"


def test_a_torch_export_decoder_step_with_a_symbol_per_cache_tensor_is_optimized(
        tmp_path) -> None:
    # Dim.DYNAMIC names every cache tensor's length apart (s15, s69, ...): generated inputs
    # ran at no size before, and the size search's largest attempt took 24 GiB.
    path = _export(tmp_path, "text_families_corpus.py", "phi3_past_dynamo")
    result = graphfix.optimize_file(path, tmp_path / "out.onnx")
    assert result.report.parity["passed"]
    assert graphfix.check_parity(graphfix.load(path), graphfix.load(tmp_path / "out.onnx"),
                                 seed=7).passed


def test_an_unread_input_survives_the_fusion(tmp_path) -> None:
    path = _export(tmp_path, "text_families_corpus.py", "whisper_decoder_past_dynamo_named")
    result = graphfix.optimize_file(path, tmp_path / "out.onnx", fuse="transformer",
                                    speed_gate=False)
    fused = next(p for p in result.report.passes if p.name == "fuse-transformer")
    assert fused.modified
    names = [i.name for i in graphfix.load(path).graph.input]
    assert [i.name for i in graphfix.load(tmp_path / "out.onnx").graph.input] == names
    assert "encoder_hidden_states" in names
