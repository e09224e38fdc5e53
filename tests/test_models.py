"""The model builders: valid, runnable on ORT, converter-shaped, deterministic."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest

from graphfix.models.corpus import SMALL_OPTIONS
from graphfix.models.light import (
    LIGHT_NAMES,
    light_data_inputs,
    light_expected_output,
    light_input,
    light_path,
    load_light,
)
from graphfix.models.nhwc import NHWC_MODELS, nchw_stray_pair
from graphfix.models.sample import SAMPLE_PATH, build_sample, sample_input
from graphfix.models.transformer import transformer_encoder, write_large_transformer

TINY: dict[str, dict[str, object]] = {
    name: {**options, "image_size": 32} for name, options in SMALL_OPTIONS.items()
}


def _ops(model: onnx.ModelProto) -> list[str]:
    return [node.op_type for node in model.graph.node]


def _image(model: onnx.ModelProto, batch: int = 2) -> dict[str, np.ndarray]:
    dims = model.graph.input[0].type.tensor_type.shape.dim
    shape = [batch] + [d.dim_value for d in dims[1:]]
    return {"input": np.random.default_rng(0).random(shape, dtype=np.float32)}


@pytest.mark.parametrize("name", sorted(NHWC_MODELS))
def test_nhwc_builder_valid_and_runs(name: str, ort_run: Callable) -> None:
    model = NHWC_MODELS[name](**TINY[name])
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version == 8 and model.opset_import[0].version == 13
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "N" and dims[3].dim_value == 3
    out = ort_run(model, _image(model))["output"]
    assert out.shape[0] == 2 and np.isfinite(out).all()


@pytest.mark.parametrize("name", sorted(NHWC_MODELS))
def test_nhwc_transposes_around_every_conv(name: str) -> None:
    model = NHWC_MODELS[name](**TINY[name])
    producer = {out: node for node in model.graph.node for out in node.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for i in node.input:
            consumers.setdefault(i, []).append(node)
    layout_ops = {"Conv", "BatchNormalization", "MaxPool", "AveragePool", "Resize"}
    wrapped = [n for n in model.graph.node if n.op_type in layout_ops]
    assert any(n.op_type == "Conv" for n in wrapped)
    for node in wrapped:
        before = producer[node.input[0]]
        assert before.op_type == "Transpose"
        assert list(before.attribute[0].ints) == [0, 3, 1, 2]
        (after,) = consumers[node.output[0]]
        assert after.op_type == "Transpose"
        assert list(after.attribute[0].ints) == [0, 2, 3, 1]


def test_nhwc_static_batch() -> None:
    model = NHWC_MODELS["mobilenetv2_nhwc"](**TINY["mobilenetv2_nhwc"], dynamic_batch=False)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 1


def test_nhwc_model_features() -> None:
    ops = {name: set(_ops(NHWC_MODELS[name](**TINY[name]))) for name in NHWC_MODELS}
    assert {"Pad", "Clip", "Add", "ReduceMean", "MatMul", "Softmax"} <= ops["mobilenetv2_nhwc"]
    assert {"BatchNormalization", "Gemm", "MaxPool"} <= ops["resnet50_nhwc"]
    assert {"Sigmoid", "Mul"} <= ops["efficientnet_nhwc"]
    assert {"Concat", "Squeeze", "AveragePool"} <= ops["densenet_nhwc"]
    assert {"Resize", "Concat"} <= ops["unet_nhwc"]


def test_efficientnet_depthwise_and_se() -> None:
    model = NHWC_MODELS["efficientnet_nhwc"](**TINY["efficientnet_nhwc"])
    groups = [a.i for n in model.graph.node if n.op_type == "Conv"
              for a in n.attribute if a.name == "group"]
    assert max(groups) > 1
    keepdims = [a.i for n in model.graph.node if n.op_type == "ReduceMean"
                for a in n.attribute if a.name == "keepdims"]
    assert 1 in keepdims and 0 in keepdims


@pytest.mark.parametrize("name", sorted(NHWC_MODELS))
def test_nhwc_deterministic(name: str) -> None:
    a = NHWC_MODELS[name](**TINY[name]).SerializeToString()
    assert a == NHWC_MODELS[name](**TINY[name]).SerializeToString()
    other = NHWC_MODELS[name](**TINY[name], seed=1).SerializeToString()
    assert a != other


def test_unet_rejects_bad_size() -> None:
    with pytest.raises(ValueError, match="divisible"):
        NHWC_MODELS["unet_nhwc"](image_size=36, depth=3)


@pytest.mark.parametrize("around_op", [True, False])
def test_nchw_stray_pair(around_op: bool, ort_run: Callable) -> None:
    model = nchw_stray_pair(around_op=around_op)
    onnx.checker.check_model(model, full_check=True)
    assert _ops(model).count("Transpose") == 2
    feeds = {"input": np.random.default_rng(0).random((2, 3, 32, 32), dtype=np.float32)}
    assert ort_run(model, feeds)["output"].shape == (2, 10)
    assert model.SerializeToString() == nchw_stray_pair(around_op=around_op).SerializeToString()


@pytest.mark.parametrize("name", LIGHT_NAMES)
def test_light_loaders(name: str, ort_run: Callable) -> None:
    model = load_light(name)
    assert light_path(name).is_file() and model.ir_version == 3
    inits = {t.name for t in model.graph.initializer}
    assert inits <= {i.name for i in model.graph.input}
    assert [i.name for i in light_data_inputs(model)] == list(light_input(name))
    redeclared = load_light(name, ir_version=7)
    assert redeclared.ir_version == 7 and len(redeclared.graph.input) == len(model.graph.input)
    (out,) = ort_run(model, light_input(name)).values()
    np.testing.assert_allclose(out, light_expected_output(name), rtol=1e-5, atol=1e-6)


def test_light_accepts_short_names() -> None:
    assert light_path("vgg19") == light_path("light_vgg19")
    with pytest.raises(KeyError):
        light_path("alexnet")


def test_sample_shipped_matches_builder(ort_run: Callable) -> None:
    shipped = onnx.load(SAMPLE_PATH)
    assert SAMPLE_PATH.stat().st_size < 300_000
    assert shipped.SerializeToString() == build_sample().SerializeToString()
    onnx.checker.check_model(shipped, full_check=True)
    assert shipped.ir_version == 3
    assert {t.name for t in shipped.graph.initializer} <= {i.name for i in shipped.graph.input}
    assert _ops(shipped).count("Transpose") == 2 * _ops(shipped).count("Conv")
    out = ort_run(shipped, sample_input())["output"]
    np.testing.assert_allclose(out.sum(), 1.0, rtol=1e-5)


def test_sample_loads_from_path() -> None:
    import onnxruntime as ort

    session = ort.InferenceSession(str(SAMPLE_PATH), providers=["CPUExecutionProvider"])
    assert session.run(None, sample_input())[0].shape == (1, 10)


@pytest.mark.parametrize("opset", [17, 20])
def test_transformer_encoder(opset: int, ort_run: Callable) -> None:
    model = transformer_encoder(opset=opset)
    onnx.checker.check_model(model, full_check=True)
    ops = _ops(model)
    assert ("Gelu" in ops) == (opset >= 20) and ("Erf" in ops) == (opset < 20)
    assert {"Gather", "LayerNormalization", "Softmax", "MatMul", "Reshape"} <= set(ops)
    rng = np.random.default_rng(0)
    for batch, seq in [(1, 5), (3, 11)]:
        feeds = {"input_ids": rng.integers(0, 1000, (batch, seq)),
                 "attention_mask": np.ones((batch, seq), np.int64)}
        out = ort_run(model, feeds)["last_hidden_state"]
        assert out.shape == (batch, seq, 64) and np.isfinite(out).all()
    assert model.SerializeToString() == transformer_encoder(opset=opset).SerializeToString()


def test_transformer_stray_transposes_compute_nothing(ort_run: Callable) -> None:
    with_pairs = transformer_encoder(attention_mask=False)
    without = transformer_encoder(attention_mask=False, stray_transposes=False)
    assert _ops(with_pairs).count("Transpose") == _ops(without).count("Transpose") + 4
    feeds = {"input_ids": np.random.default_rng(0).integers(0, 1000, (2, 6))}
    np.testing.assert_allclose(
        ort_run(with_pairs, feeds)["last_hidden_state"],
        ort_run(without, feeds)["last_hidden_state"], rtol=1e-5, atol=1e-5,
    )


def test_write_large_transformer(tmp_path: Path) -> None:
    import onnxruntime as ort

    path = tmp_path / "big.onnx"
    written = write_large_transformer(path, target_bytes=20 * 2**20, layers=4)
    data = tmp_path / "big.data"
    assert data.stat().st_size == written > 15 * 2**20
    assert path.stat().st_size < 1 * 2**20
    model = onnx.load(path, load_external_data=False)
    assert model.ir_version == 7
    external = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    assert external
    assert {e.value for t in external for e in t.external_data if e.key == "location"} == {
        "big.data"
    }
    assert {t.name for t in model.graph.initializer} <= {i.name for i in model.graph.input}
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    hidden = session.get_inputs()[0].shape[2]
    out = session.run(None, {"x": np.ones((1, 3, hidden), np.float32)})[0]
    assert out.shape == (1, 3, hidden) and np.isfinite(out).all()
    again = tmp_path / "again.onnx"
    write_large_transformer(again, target_bytes=20 * 2**20, layers=4)
    assert (tmp_path / "again.data").read_bytes() == data.read_bytes()


@pytest.mark.tools
def test_export_bert_like(tmp_path: Path, ort_run: Callable) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from graphfix.models.torch_models import export_bert_like

    model = onnx.load(export_bert_like(tmp_path / "bert.onnx"))
    onnx.checker.check_model(model, full_check=True)
    feeds = {"input_ids": np.ones((3, 9), np.int64), "attention_mask": np.ones((3, 9), np.int64),
             "token_type_ids": np.zeros((3, 9), np.int64)}
    out = ort_run(model, feeds)
    assert out["last_hidden_state"].shape == (3, 9, 128) and out["pooler_output"].shape == (3, 128)


@pytest.mark.tools
def test_export_small_cnn(tmp_path: Path, ort_run: Callable) -> None:
    pytest.importorskip("torch")
    from graphfix.models.torch_models import export_small_cnn

    model = onnx.load(export_small_cnn(tmp_path / "cnn.onnx"))
    onnx.checker.check_model(model, full_check=True)
    feeds = {"input": np.ones((2, 3, 32, 32), np.float32)}
    assert ort_run(model, feeds)["logits"].shape == (2, 10)
