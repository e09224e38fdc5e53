"""Float16 models as both torch.onnx exporters write them, with and without their own graph
optimizer: every one comes out optimized, correct, with no op type or element type it lacked."""

from __future__ import annotations

import warnings
from pathlib import Path

import onnx
import pytest

import graphfix
from graphfix.graph import all_nodes

pytestmark = pytest.mark.tools


def _export(tmp_path: Path, exporter: str, optimized: bool) -> Path:
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    module = torchvision.models.resnet18(num_classes=10).eval().half()
    x = torch.randn(1, 3, 64, 64).half()
    path = tmp_path / f"resnet18_{exporter}_{'opt' if optimized else 'raw'}.onnx"
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            torch.onnx.export(module, (x,), str(path), dynamo=True, optimize=optimized)
        else:
            torch.onnx.export(module, (x,), str(path), dynamo=False, opset_version=17,
                              do_constant_folding=optimized)
    return path


def _op_types(model: onnx.ModelProto) -> set[str]:
    return {f"{n.domain}::{n.op_type}" for n in all_nodes(model.graph)}


def _float_types(model: onnx.ModelProto) -> set[int]:
    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE,
              onnx.TensorProto.BFLOAT16}
    found = {t.data_type for t in model.graph.initializer}
    found |= {a.i for n in all_nodes(model.graph) for a in n.attribute
              if n.op_type == "Cast" and a.name == "to"}
    return found & floats


@pytest.mark.parametrize("exporter", ["legacy", "dynamo"])
@pytest.mark.parametrize("optimized", [True, False], ids=["exporter-optimized", "raw"])
def test_a_float16_export_comes_out_optimized(tmp_path, exporter, optimized) -> None:
    path = _export(tmp_path, exporter, optimized)
    original = graphfix.load(path)
    result = graphfix.optimize_file(path, tmp_path / "out.onnx")
    assert result.report.parity["passed"] and not result.report.left_out
    written = graphfix.load(tmp_path / "out.onnx")
    assert _op_types(written) <= _op_types(original)
    assert _float_types(written) <= _float_types(original)
    # the exporter's own optimizer gets resnet18 to 49 nodes: so does graphfix from either
    assert len(written.graph.node) <= 49


def test_a_lowered_llama_holds_in_onnx_runtime_s_default_session(tmp_path) -> None:
    # ONNX Runtime's default session (level all) fuses a lowered Llama's written-out RMSNorm
    # into a SimplifiedLayerNormalization kernel that computed its outputs at 2.4x float16's
    # tolerance, where the graph as written computes 0.27x: the pass checks that session too,
    # finds the kernel that makes the error, and keeps what it fuses in float32.
    import subprocess
    import sys

    import numpy as np
    import onnxruntime as ort

    from graphfix.passes._measuring import make_feeds, tolerance_used
    from graphfix.passes.convert_precision import ConvertPrecision

    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, str(root / "tools" / "world_corpus.py"), str(tmp_path),
                    "--only", "llama_legacy"], check=True, capture_output=True)
    path = tmp_path / "llama_legacy.onnx"
    original = onnx.load(path)
    result = ConvertPrecision(precision="fp16")(onnx.load(path))
    assert result.modified, result.warnings
    assert any("SimplifiedLayerNormalization" in why for island in result.details["islands"]
               for why in island["why"])
    feeds = make_feeds(original, seed=0, runs=None, input_shapes=None)
    exact = ort.SessionOptions()
    exact.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    reference = ort.InferenceSession(original.SerializeToString(), exact,
                                     providers=["CPUExecutionProvider"])
    default = ort.InferenceSession(result.model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    for feed in feeds:
        for expected, got in zip(reference.run(None, feed), default.run(None, feed)):
            assert tolerance_used(expected, np.asarray(got, np.float32), 1e-2, 1e-2) <= 0.5


def test_a_lowered_model_that_crashes_onnx_runtime_s_default_session_is_not_written(
        tmp_path) -> None:
    # ONNX Runtime 1.31's NCHWc layout transformer (default session, level all) segfaults on
    # torchvision's ViT lowered to float16. The pass checks that session in a child
    # interpreter: graphfix survives, and no model that crashes it is returned.
    import subprocess
    import sys

    pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    from graphfix.passes.convert_precision import ConvertPrecision

    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, str(root / "tools" / "world_corpus.py"), str(tmp_path),
                    "--only", "vit_tv_dynamo"], check=True, capture_output=True)
    result = ConvertPrecision(precision="fp16")(onnx.load(tmp_path / "vit_tv_dynamo.onnx"))
    if result.modified:  # a later ONNX Runtime may not crash: then the session must open
        path = tmp_path / "lowered.onnx"
        onnx.save(result.model, path)
        opened = subprocess.run([sys.executable, "-c", (
            "import onnxruntime as ort, sys\n"
            "ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])"),
            str(path)], capture_output=True)
        assert opened.returncode == 0, opened.stderr[-500:]
    else:
        assert "crashes" in result.warnings[0], result.warnings
