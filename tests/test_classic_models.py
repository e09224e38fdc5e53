"""Classical models as their converters write them (``tools/classic_corpus.py``: skl2onnx,
onnxmltools): graphfix optimizes them, float16 included, and its parity reads their ZipMap
probabilities and map inputs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import graphfix

pytestmark = pytest.mark.tools
ROOT = Path(__file__).resolve().parents[1]
MODELS = ["scaler_pca_svc", "dict_vectorizer", "random_forest", "lightgbm_classifier",
          "mixed_columns"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    for package in ("sklearn", "skl2onnx", "onnxmltools", "lightgbm"):
        pytest.importorskip(package)
    folder = tmp_path_factory.mktemp("classic")
    subprocess.run([sys.executable, str(ROOT / "tools" / "classic_corpus.py"), str(folder),
                    "--only", *MODELS], check=True, capture_output=True)
    return folder


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("precision", [None, "fp16"])
def test_a_classical_model_comes_out_optimized_and_correct(corpus, tmp_path, name,
                                                           precision) -> None:
    path, out = corpus / f"{name}.onnx", tmp_path / "out.onnx"
    options = {"precision": precision, "speed_gate": False} if precision else {}
    result = graphfix.optimize_file(path, out, **options)
    assert result.report.parity["passed"], result.report.parity
    assert not result.report.left_out, result.report.left_out
    again = graphfix.check_parity(graphfix.load(path), graphfix.load(out), seed=7)
    assert again.passed, again.describe()
    assert len(graphfix.load(out).graph.node) <= len(graphfix.load(path).graph.node)
