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


def test_a_model_onnx_runtime_s_default_session_cannot_run_after_a_pass_loses_that_pass(
        tmp_path) -> None:
    # tf.linalg.diag_part through tf2onnx: with its static sizes folded (fold-shapes), ONNX
    # Runtime's own optimizations break the model ("Shape mismatch attempting to re-use
    # buffer" at every batch size) though it runs with them off, where parity checks. A
    # deployment's default session must run what graphfix writes: the pass is left out.
    tf = pytest.importorskip("tensorflow")
    tf2onnx = pytest.importorskip("tf2onnx")
    import numpy as np
    import onnxruntime as ort

    def matrices(a):
        diagonal = tf.linalg.diag_part(a)
        return (tf.identity(diagonal, name="d"), tf.identity(tf.linalg.trace(a), name="t"),
                tf.identity(tf.linalg.set_diag(a, tf.ones_like(diagonal)), name="sd"))

    source = tmp_path / "matrices.onnx"
    tf2onnx.convert.from_function(tf.function(matrices), input_signature=[
        tf.TensorSpec([None, 5, 5], tf.float32, "a")], opset=17, output_path=str(source))
    result = graphfix.optimize_file(source, tmp_path / "out.onnx")
    assert result.report.parity["passed"]
    feed = {"a": np.random.default_rng(3).standard_normal((2, 5, 5)).astype(np.float32)}
    original = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    written = ort.InferenceSession(str(tmp_path / "out.onnx"),
                                   providers=["CPUExecutionProvider"])  # level all
    for expected, got in zip(original.run(None, feed), written.run(None, feed)):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def _resizes(tmp_path: Path) -> Path:
    """tf.image.resize (bilinear, nearest, bicubic) and crop_and_resize through tf2onnx: ONNX
    Runtime runs it with its optimizations off or at basic, and its default session refuses
    it at load (its rewrites make the cubic Resize's scales invalid)."""
    tf = pytest.importorskip("tensorflow")
    tf2onnx = pytest.importorskip("tf2onnx")

    def resized(img):
        boxes = tf.constant([[0.1, 0.1, 0.8, 0.9], [0.0, 0.2, 0.5, 0.6]], tf.float32)
        return (tf.identity(tf.image.resize(img, [24, 20], method="bilinear"), name="a"),
                tf.identity(tf.image.resize(img, [8, 8], method="nearest"), name="b"),
                tf.identity(tf.image.resize(img, [31, 9], method="bicubic"), name="c"),
                tf.identity(tf.image.crop_and_resize(img, boxes, tf.zeros([2], tf.int32),
                                                     [7, 7]), name="d"))

    source = tmp_path / "resize.onnx"
    tf2onnx.convert.from_function(tf.function(resized), input_signature=[
        tf.TensorSpec([None, 16, 16, 3], tf.float32, "img")], opset=17, output_path=str(source))
    return source


def test_float16_of_a_model_the_default_session_cannot_open_is_written_unmeasured(
        tmp_path) -> None:
    # The speed gate cannot time the float16 model against the float32 one in the default
    # session: --precision fp16 refused the whole model; it is written, unmeasured.
    source = _resizes(tmp_path)
    result = graphfix.optimize_file(source, tmp_path / "out.onnx", precision="fp16")
    assert result.report.parity["passed"]
    [verdict] = result.report.speed_gate["verdicts"]
    assert verdict["kept"] and "kept without measuring speed" in result.report.speed_gate["note"]


def test_profile_of_a_model_the_default_session_cannot_open_says_so_first(tmp_path) -> None:
    # profile refused it; it profiles at the highest level that opens it, says first that the
    # default SessionOptions cannot load it, and does not advise raising the level.
    source = _resizes(tmp_path)
    result = graphfix.profile(source, runs=10, try_fixes=False)
    assert result.settings.optimization in ("extended", "basic")
    assert "does not open the model at level all" in result.warnings[0]
    assert all(f.kind != "optimization-level" for f in result.findings)
