from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest

from graphfix import model_io
from onnx import helper, numpy_helper
from graphfix.errors import ModelLoadError, ModelSaveError

LINEAR = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,64] x) => (float[1,64] y) {
    y = MatMul (x, w)
}
"""


def linear_model() -> onnx.ModelProto:
    model = onnx.parser.parse_model(LINEAR)
    w = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    model.graph.initializer.append(onnx.numpy_helper.from_array(w, "w"))
    return model


def run(model: onnx.ModelProto) -> np.ndarray:
    session = model_io.ort_session(model)
    return session.run(None, {"x": np.ones((1, 64), np.float32)})[0]


def test_save_and_load_round_trip(tmp_path):
    model = linear_model()
    written = model_io.save(model, tmp_path / "m.onnx")
    assert written.path == tmp_path / "m.onnx" and written.data_path is None
    assert sorted(os.listdir(tmp_path)) == ["m.onnx"]
    loaded = model_io.load(tmp_path / "m.onnx")
    np.testing.assert_array_equal(run(loaded), run(model))


def test_ir_version_is_capped_in_the_file_not_in_memory(tmp_path):
    model = linear_model()
    model.ir_version = onnx.IR_VERSION
    model_io.save(model, tmp_path / "m.onnx")
    assert model.ir_version == onnx.IR_VERSION
    on_disk = onnx.load(str(tmp_path / "m.onnx"))
    assert on_disk.ir_version == model_io.max_ir_version() <= onnx.IR_VERSION
    import onnxruntime as ort

    ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])


def test_external_data_written_beside_and_model_unchanged(tmp_path):
    model = linear_model()
    before = model.SerializeToString()
    written = model_io.save(model, tmp_path / "m.onnx", external_data=True)
    assert model.SerializeToString() == before  # saving never changes the model in memory
    assert written.data_path == tmp_path / "m.onnx.data"
    assert sorted(os.listdir(tmp_path)) == ["m.onnx", "m.onnx.data"]
    raw = onnx.load(str(tmp_path / "m.onnx"), load_external_data=False)
    (location,) = {e.value for e in raw.graph.initializer[0].external_data if e.key == "location"}
    assert location == "m.onnx.data"
    info = model_io.load_with_info(tmp_path / "m.onnx")
    assert info.external_data
    np.testing.assert_array_equal(run(info.model), run(model))


def test_refuses_to_overwrite_the_input(tmp_path):
    path = tmp_path / "m.onnx"
    model_io.save(linear_model(), path)
    before = path.read_bytes()
    with pytest.raises(ModelSaveError, match="overwrite the input"):
        model_io.save(linear_model(), path, protect=[path])
    assert path.read_bytes() == before


def test_failed_write_leaves_nothing(tmp_path, monkeypatch):
    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(ModelSaveError, match="No space left"):
        model_io.save(linear_model(), tmp_path / "m.onnx", external_data=True)
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into read-only folders")
def test_read_only_folder(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(ModelSaveError):
            model_io.save(linear_model(), folder / "m.onnx")
    finally:
        folder.chmod(0o700)


def test_permission_denied_is_one_clear_error(tmp_path, monkeypatch):
    # What a read-only folder does for a non-root user, simulated so it holds as root too.
    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    with pytest.raises(ModelSaveError, match="Permission denied"):
        model_io.save(linear_model(), tmp_path / "m.onnx")
    assert os.listdir(tmp_path) == []


def test_missing_folder(tmp_path):
    with pytest.raises(ModelSaveError, match="no such folder"):
        model_io.save(linear_model(), tmp_path / "nope" / "m.onnx")


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: None, "no such file"),
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: p.write_bytes(b""), "is empty"),
        (lambda p: p.write_bytes(os.urandom(4096)), "not an ONNX model"),
    ],
    ids=["missing", "directory", "empty", "random-bytes"],
)
def test_load_errors(tmp_path, make, message):
    path = tmp_path / "bad.onnx"
    make(path)
    with pytest.raises(ModelLoadError, match=message):
        model_io.load(path)


def test_truncated_model(tmp_path):
    path = tmp_path / "m.onnx"
    model_io.save(linear_model(), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError):
        model_io.load(path)


def test_missing_external_data_file(tmp_path):
    model_io.save(linear_model(), tmp_path / "m.onnx", external_data=True)
    (tmp_path / "m.onnx.data").unlink()
    with pytest.raises(ModelLoadError, match="is missing"):
        model_io.load(tmp_path / "m.onnx")


@pytest.mark.parametrize("location", ["../outside.data", "/etc/passwd", "sub/../../x.data"])
def test_external_data_escaping_the_folder_is_refused(tmp_path, location):
    model = linear_model()
    tensor = model.graph.initializer[0]
    onnx.external_data_helper.set_external_data(tensor, location, 0, 64 * 64 * 4)
    tensor.ClearField("raw_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "m.onnx").write_bytes(model.SerializeToString())
    with pytest.raises(ModelLoadError, match="(escapes|not a relative path)"):
        model_io.load(folder / "m.onnx")


def test_structurally_broken_model_is_refused():
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2] x) => (float[2] y) { y = Add (x, missing) }
    """)
    with pytest.raises(ModelLoadError, match="invalid model"):
        model_io.check_model(model)


def test_model_only_the_strict_checker_rejects_is_usable_with_a_warning():
    # A declared output shape that contradicts inference: the strict checker refuses it,
    # ORT merges leniently and runs it.
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2,4] x) => (float[2,5] y) { y = Relu (x) }
    """)
    warnings = model_io.check_model(model)
    assert len(warnings) == 1 and "ONNX Runtime loads it" in warnings[0]


def test_contrib_ops_are_accepted():
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
    g (float[2,4] x) => (float[2,4] y) { y = com.microsoft.FastGelu (x) }
    """)
    assert model_io.check_model(model) == []


def test_max_ir_version_is_loadable():
    import onnxruntime as ort

    version = model_io.max_ir_version()
    assert 7 <= version <= onnx.IR_VERSION
    model = linear_model()
    model.ir_version = version
    ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_load_from_bytes_and_proto():
    model = linear_model()
    assert model_io.load(model) is model
    assert model_io.load(model.SerializeToString()).graph.node[0].op_type == "MatMul"


# --------------------------------------------------------------------------------------------
# Weights that stay in their files

# Transpose of a constant weight (folded by eliminate-transposes, reading that weight alone)
# next to a weight no pass needs the value of.
FOLDABLE = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,512] x) => (float[2,2048] y) {
    wt = Transpose <perm = [1, 0]> (w1)
    h = MatMul (x, wt)
    a = Relu (h)
    y = MatMul (a, w2)
}
"""


def write_external(folder: Path, name: str = "src.onnx", location: str = "weights.bin"):
    """A model with 5 MB of weights in ``location`` (written by onnx, not graphfix)."""
    rng = np.random.default_rng(1)
    model = onnx.parser.parse_model(FOLDABLE)
    weights = {
        "w1": rng.standard_normal((512, 512)).astype(np.float32),
        "w2": rng.standard_normal((512, 2048)).astype(np.float32),
    }
    model.graph.initializer.extend(onnx.numpy_helper.from_array(v, k) for k, v in weights.items())
    folder.mkdir(exist_ok=True)
    onnx.save_model(model, str(folder / name), save_as_external_data=True,
                    all_tensors_to_one_file=True, location=location, size_threshold=1024)
    return folder / name, weights


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_lazy_load_reads_no_weights(tmp_path):
    src, weights = write_external(tmp_path / "src")
    info = model_io.load_with_info(src, load_external_data=False)
    tensors = {t.name: t for t in info.model.graph.initializer}
    assert all(t.data_location == onnx.TensorProto.EXTERNAL for t in tensors.values())
    assert not any(t.HasField("raw_data") for t in tensors.values())
    assert info.model.ByteSize() < 4096
    assert info.size_bytes == src.stat().st_size + (src.parent / "weights.bin").stat().st_size
    for name, value in weights.items():
        assert model_io.has_value(tensors[name])
        np.testing.assert_array_equal(model_io.tensor_value(tensors[name]), value)
    assert model_io.weight_bytes(info.model) == sum(v.nbytes for v in weights.values())
    model_io.load_external_values(info.model)
    assert model_io.weight_bytes(info.model) == sum(v.nbytes for v in weights.values())
    assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in info.model.graph.initializer)


def test_tensor_sample_is_the_same_from_memory_and_from_the_file(tmp_path):
    src, weights = write_external(tmp_path / "src")
    lazy = model_io.load_with_info(src, load_external_data=False).model
    loaded = model_io.load(src)
    for lazy_tensor, tensor in zip(lazy.graph.initializer, loaded.graph.initializer):
        sample = model_io.tensor_sample(lazy_tensor, 16, 64)
        assert sample == model_io.tensor_sample(tensor, 16, 64)
        raw = weights[tensor.name].tobytes()
        assert len(sample) == 16 * 64 and sample[:64] == raw[:64] and sample[-64:] == raw[-64:]
    # Different values, different samples; values not held in raw bytes give none.
    w1, w2 = loaded.graph.initializer
    assert model_io.tensor_sample(w1) != model_io.tensor_sample(w2)
    typed = onnx.helper.make_tensor("t", onnx.TensorProto.FLOAT, [2], [1.0, 2.0])
    assert model_io.tensor_sample(typed) is None


def test_external_data_graphfix_did_not_check_is_never_read(tmp_path):
    src, _ = write_external(tmp_path / "src")
    # Loaded by onnx without its data: a location relative to a folder graphfix never saw.
    raw = onnx.load(str(src), load_external_data=False)
    tensor = raw.graph.initializer[0]
    assert not model_io.has_value(tensor) and model_io.tensor_value(tensor) is None
    # A crafted absolute location is not read either, even when the file exists.
    entry = next(e for e in tensor.external_data if e.key == "location")
    entry.value = str((src.parent / "weights.bin").resolve())
    assert not model_io.has_value(tensor) and model_io.tensor_value(tensor) is None
    with pytest.raises(ModelSaveError, match="never loaded"):
        model_io.save(raw, tmp_path / "out.onnx", external_data=True)
    assert sorted(os.listdir(tmp_path)) == ["src"]


def test_optimize_file_leaves_weights_in_files_and_copies_them(tmp_path):
    from graphfix.pipeline import optimize_file

    src, weights = write_external(tmp_path / "src")
    before = files_of(src.parent)
    out = tmp_path / "out" / "model.onnx"
    out.parent.mkdir()
    result = optimize_file(src, out, passes=["remove-initializer-inputs", "eliminate-transposes"],
                           verify=False)
    assert result.report.passes[1].stats["folded_into_constants"] == 1
    # In memory: the weight no pass needed was never read; only the folded one is inline.
    tensors = {t.name: t for t in result.model.graph.initializer}
    assert tensors["w2"].data_location == onnx.TensorProto.EXTERNAL
    assert not tensors["w2"].HasField("raw_data")
    assert "w1" not in tensors and result.model.ByteSize() < weights["w1"].nbytes + 4096
    # On disk: every weight in the new data file, byte for byte; the input untouched.
    assert sorted(os.listdir(out.parent)) == ["model.onnx", "model.onnx.data"]
    written = onnx.load(str(out))
    values = {t.name: onnx.numpy_helper.to_array(t) for t in written.graph.initializer}
    assert values["w2"].tobytes() == weights["w2"].tobytes()
    (folded,) = (v for k, v in values.items() if k != "w2")
    np.testing.assert_array_equal(folded, weights["w1"].T)
    assert files_of(src.parent) == before
    x = np.random.default_rng(2).standard_normal((2, 512)).astype(np.float32)
    expected = np.maximum(x @ weights["w1"].T, 0) @ weights["w2"]
    got = run_feeds(model_io.load(out), {"x": x})
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-3)


def run_feeds(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    return model_io.ort_session(model).run(None, feeds)[0]


def test_optimize_with_parity_keeps_weights_in_files(tmp_path):
    from graphfix.pipeline import optimize

    src, _ = write_external(tmp_path / "src")
    result = optimize(src, passes=["remove-initializer-inputs", "eliminate-transposes"])
    assert result.report.parity["passed"]
    (w2,) = (t for t in result.model.graph.initializer if t.name == "w2")
    assert w2.data_location == onnx.TensorProto.EXTERNAL and not w2.HasField("raw_data")


@pytest.mark.parametrize("name", ["ort-offline", "simplify"])
def test_passes_that_take_the_whole_model_get_its_weights(tmp_path, name):
    from graphfix.pipeline import optimize

    src, _ = write_external(tmp_path / "src")
    result = optimize(src, passes=[name])
    (report,) = result.report.passes
    assert report.skipped is None and report.modified, report
    assert result.report.parity["passed"]


def test_ort_session_reads_weights_where_they_are(tmp_path, monkeypatch):
    src, weights = write_external(tmp_path / "src")
    lazy = model_io.load(src, load_external_data=False)
    before = lazy.SerializeToString()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    x = np.random.default_rng(3).standard_normal((2, 512)).astype(np.float32)
    got = run_feeds(lazy, {"x": x})
    assert os.listdir(scratch) == []  # no copy of the weights was written anywhere
    np.testing.assert_array_equal(got, run_feeds(model_io.load(src), {"x": x}))
    assert lazy.SerializeToString() == before


def test_ort_session_borrows_weights_held_in_memory():
    # Large inline weights are lent to ORT over their own bytes; the session keeps them alive
    # after the model is gone, and the model itself is not changed. Typed-field and float16
    # weights take the same path; bfloat16 (no numpy type) stays in the graph's bytes.
    import gc

    model = onnx.parser.parse_model("""
    <ir_version: 9, opset_import: ["" : 17]>
    g (float[2,64] x) => (float[2,64] y) {
        a = MatMul (x, w_raw)
        b = MatMul (a, w_typed)
        h = Cast <to = 1> (w_half)
        c = MatMul (b, h)
        bf = Cast <to = 1> (w_bf16)
        y = MatMul (c, bf)
    }""")
    rng = np.random.default_rng(5)
    w = [rng.standard_normal((64, 64)).astype(np.float32) / 8 for _ in range(4)]
    model.graph.initializer.extend([
        onnx.numpy_helper.from_array(w[0], "w_raw"),
        onnx.helper.make_tensor("w_typed", onnx.TensorProto.FLOAT, (64, 64), w[1].ravel().tolist()),
        onnx.numpy_helper.from_array(w[2].astype(np.float16), "w_half"),
        onnx.helper.make_tensor("w_bf16", onnx.TensorProto.BFLOAT16, (64, 64),
                                w[3].ravel().tolist()),
    ])
    before = model.SerializeToString()
    session = model_io.ort_session(model)
    assert model.SerializeToString() == before
    lent = list(session._graphfix_lent_weights.names)
    assert lent == ["w_raw", "w_typed", "w_half"]
    bf16 = onnx.numpy_helper.to_array(model.graph.initializer[3]).astype(np.float32)
    del model
    gc.collect()
    x = rng.standard_normal((2, 64)).astype(np.float32)
    expected = x @ w[0] @ w[1] @ w[2].astype(np.float16).astype(np.float32) @ bf16
    np.testing.assert_allclose(session.run(None, {"x": x})[0], expected, rtol=1e-4, atol=1e-5)


def test_ort_rewritten_is_onnx_runtimes_own_copy_opened_without_rewriting(tmp_path, monkeypatch):
    # ORT's rewritten copy, opened with its rewrites off, computes bit for bit what the model
    # computes at that level (the same kernels), and the rewriting leaves no file behind.
    from graphfix.models.nhwc import mobilenetv2_nhwc

    model = mobilenetv2_nhwc(image_size=32, width=0.35, num_classes=10, dynamic_batch=False)
    before = model.SerializeToString()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    data, session = model_io.ort_rewritten(model, optimization="all")
    assert os.listdir(tmp_path) == [] and model.SerializeToString() == before
    rewritten = onnx.load_from_string(data)
    assert len(rewritten.graph.node) < len(model.graph.node)  # ORT's fusions are in the copy
    x = np.random.default_rng(0).standard_normal((1, 32, 32, 3)).astype(np.float32)
    name = model.graph.input[0].name
    copy = model_io.ort_session(data, optimization="disabled")
    np.testing.assert_array_equal(copy.run(None, {name: x})[0], session.run(None, {name: x})[0])
    fresh = model_io.ort_session(model, optimization="all")
    np.testing.assert_array_equal(copy.run(None, {name: x})[0], fresh.run(None, {name: x})[0])


def test_ort_rewritten_holds_the_weights_of_a_model_whose_weights_stay_in_files(tmp_path,
                                                                              monkeypatch):
    # ORT writes a weight it read from a file as a reference to that file; the copy is bytes
    # opened from anywhere, so it must hold every weight itself.
    src, weights = write_external(tmp_path / "src")
    lazy = model_io.load(src, load_external_data=False)
    data, session = model_io.ort_rewritten(lazy, optimization="all")
    rewritten = onnx.load_from_string(data)
    assert not any(t.data_location == onnx.TensorProto.EXTERNAL
                   for t in rewritten.graph.initializer)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    x = np.random.default_rng(0).standard_normal((2, 512)).astype(np.float32)
    copy = model_io.ort_session(data, optimization="disabled")
    np.testing.assert_array_equal(copy.run(None, {"x": x})[0], session.run(None, {"x": x})[0])


def test_a_lent_model_opens_with_its_weights_read_where_they_are(tmp_path):
    # Encoded once: the graph as bytes, the large weights lent; each session computes what a
    # session on the whole bytes computes.
    src, weights = write_external(tmp_path / "src")
    data, session = model_io.ort_rewritten(model_io.load(src), optimization="all")
    lent = model_io.lent_model(data)
    assert set(lent.names) and len(lent.payload) < len(data) // 10
    x = np.random.default_rng(0).standard_normal((2, 512)).astype(np.float32)
    expected = model_io.ort_session(data).run(None, {"x": x})[0]
    for _ in range(2):
        np.testing.assert_array_equal(model_io.ort_session(lent).run(None, {"x": x})[0],
                                      expected)


def test_check_model_on_weights_left_in_files(tmp_path):
    src, _ = write_external(tmp_path / "src")
    lazy = model_io.load(src, load_external_data=False)
    assert model_io.check_model(lazy) == []
    lazy.graph.node[1].input[1] = "missing"
    with pytest.raises(ModelLoadError, match="invalid model"):
        model_io.check_model(lazy)


def test_save_copies_weights_from_their_files(tmp_path):
    src, weights = write_external(tmp_path / "src")
    lazy = model_io.load(src, load_external_data=False)
    before = lazy.SerializeToString()
    (tmp_path / "a").mkdir()
    first = model_io.save(lazy, tmp_path / "a" / "m.onnx", external_data=True)
    assert lazy.SerializeToString() == before
    assert first.data_path is not None and first.size_bytes > sum(v.nbytes for v in weights.values())
    loaded = onnx.load(str(first.path))
    for tensor in loaded.graph.initializer:
        assert onnx.numpy_helper.to_array(tensor).tobytes() == weights[tensor.name].tobytes()
    (tmp_path / "b").mkdir()
    second = model_io.save(lazy, tmp_path / "b" / "m.onnx", external_data=True)
    assert files_of(tmp_path / "a") == files_of(tmp_path / "b")  # same model, same bytes
    # One file: the weights are copied into the model itself.
    single = model_io.save(lazy, tmp_path / "single.onnx", external_data=False)
    assert single.data_path is None
    inline = onnx.load(str(single.path))
    assert all(t.data_location != onnx.TensorProto.EXTERNAL for t in inline.graph.initializer)
    for tensor in inline.graph.initializer:
        assert onnx.numpy_helper.to_array(tensor).tobytes() == weights[tensor.name].tobytes()
    assert second.path.read_bytes() == first.path.read_bytes()


def test_save_never_overwrites_the_data_file_weights_are_read_from(tmp_path):
    # The source's data file is named as graphfix would name the data of "b.onnx".
    src, _ = write_external(tmp_path / "src", name="a.onnx", location="b.onnx.data")
    lazy = model_io.load(src, load_external_data=False)
    before = files_of(src.parent)
    with pytest.raises(ModelSaveError, match="external data the model's weights are read from"):
        model_io.save(lazy, src.parent / "b.onnx", external_data=True)
    assert files_of(src.parent) == before


def test_failed_save_of_weights_left_in_files_leaves_nothing(tmp_path, monkeypatch):
    src, _ = write_external(tmp_path / "src")
    lazy = model_io.load(src, load_external_data=False)
    out = tmp_path / "out"
    out.mkdir()

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(ModelSaveError, match="No space left"):
        model_io.save(lazy, out / "m.onnx", external_data=True)
    assert os.listdir(out) == []


@pytest.mark.parametrize("dtype", [
    onnx.TensorProto.FLOAT16, onnx.TensorProto.INT64, onnx.TensorProto.BOOL,
    onnx.TensorProto.UINT8, onnx.TensorProto.BFLOAT16, onnx.TensorProto.INT4,
])
def test_tensor_value_of_every_type(tmp_path, dtype):
    values = np.random.default_rng(4).integers(-7, 8, size=(40, 50))
    if dtype == onnx.TensorProto.BOOL:
        values = values > 0
    elif dtype == onnx.TensorProto.UINT8:
        values = np.abs(values)
    typed = onnx.helper.make_tensor("t", dtype, values.shape, values.flatten().tolist())
    tensor = onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(typed), "t")  # raw data
    model = onnx.parser.parse_model("""
    <ir_version: 10, opset_import: ["" : 21]>
    g (float[1] x) => (float[1] y) { y = Identity (x) }
    """)
    model.graph.initializer.append(tensor)
    onnx.save_model(model, str(tmp_path / "m.onnx"), save_as_external_data=True,
                    location="m.bin", size_threshold=0)
    lazy = model_io.load(tmp_path / "m.onnx", load_external_data=False).graph.initializer[0]
    eager = model_io.load(tmp_path / "m.onnx").graph.initializer[0]
    assert lazy.data_location == onnx.TensorProto.EXTERNAL
    expected = onnx.numpy_helper.to_array(eager)
    got = model_io.tensor_value(lazy)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.tobytes() == expected.tobytes()


def test_tensor_in_typed_fields_goes_to_external_data(tmp_path):
    model = linear_model()
    w = onnx.numpy_helper.to_array(model.graph.initializer[0])
    typed = onnx.helper.make_tensor("w", onnx.TensorProto.FLOAT, w.shape, w.flatten().tolist())
    assert not typed.HasField("raw_data")
    model.graph.initializer[0].CopyFrom(typed)
    before = model.SerializeToString()
    written = model_io.save(model, tmp_path / "m.onnx", external_data=True)
    assert model.SerializeToString() == before and written.data_path is not None
    np.testing.assert_array_equal(
        onnx.numpy_helper.to_array(onnx.load(str(written.path)).graph.initializer[0]), w)


@pytest.mark.slow
def test_large_model_memory_stays_below_the_weights(tmp_path):
    # tools/large_model.py as a user runs it: a 0.5 GiB model through the structural passes.
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "tools/large_model.py", "--gb", "0.5", "--folder", str(tmp_path),
         "--json", str(tmp_path / "m.json"), "--", "--passes",
         "remove-initializer-inputs,eliminate-transposes", "--no-verify"],
        cwd=root, capture_output=True, text=True, timeout=1800)
    m = json.loads((tmp_path / "m.json").read_text())
    assert m["returncode"] == 0 and done.returncode == 0, m["stderr"][-2000:]
    assert m["written"]["large.opt.onnx.data"] >= m["weight_bytes"]
    assert m["written"]["large.opt.onnx"] < 2**20
    assert m["ratio"] <= 1.2, f"peak RSS {m['ratio']:.2f}x the weight bytes"


def test_nodes_are_written_in_runs_that_keep_their_order_and_content():
    # Plain nodes are written together; a subgraph or a large tensor attribute (which the
    # encoder may send to a data file) breaks the run: the model read back is the same.
    from graphfix.model_io.encoding import Encoder

    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[4] x, bool c) => (float[4] y) {
        a = Relu (x)
        k = Constant <value = float[4] {1, 2, 3, 4}> ()
        b = Add (a, k)
        d = If (c) <then_branch = t () => (float[4] o) { o = Neg (b) },
                    else_branch = e () => (float[4] o) { o = Abs (b) }>
        big = Constant <value = float[512] {""" + ", ".join(["0.5"] * 512) + """}> ()
        s = Slice (big, start, end)
        y = Mul (d, s)
    }""")
    model.graph.initializer.extend([onnx.numpy_helper.from_array(np.array([0], np.int64), "start"),
                                    onnx.numpy_helper.from_array(np.array([4], np.int64), "end")])
    for lazy in ("inline", "refer"):
        read = onnx.ModelProto.FromString(Encoder(lazy=lazy).serialize(model))
        assert read == model
    x = np.array([-1, 2, -3, 4], np.float32)
    out = model_io.ort_session(model).run(None, {"x": x, "c": np.array(True)})[0]
    np.testing.assert_allclose(out, -(np.maximum(x, 0) + [1, 2, 3, 4]) * 0.5)


def _external_offsets(path):
    model = onnx.load(path, load_external_data=False)
    return {t.name: int(next(e.value for e in t.external_data if e.key == "offset"))
            for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL}


def test_a_packed_data_file_is_written_packed_and_an_aligned_one_aligned(tmp_path):
    """Weights are written as tightly as their source held them: padding a packed data file
    to page boundaries made outputs larger than their inputs (a 7 MB model's by 62 KB); a
    source whose large weights start at page boundaries (ONNX Runtime maps them from the
    file) keeps them there."""
    rng = np.random.default_rng(0)
    big = (rng.standard_normal(2**18 + 3).astype(np.float32),  # over 1 MiB
           rng.standard_normal(2**18 + 5).astype(np.float32))
    small = rng.standard_normal(700).astype(np.float32)
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None])
    nodes = [helper.make_node("Add", ["x", "s"], ["a"]),
             helper.make_node("ReduceSum", ["b0"], ["r0"], keepdims=1),
             helper.make_node("ReduceSum", ["b1"], ["r1"], keepdims=1),
             helper.make_node("Add", ["r0", "r1"], ["r"]), helper.make_node("Add", ["a", "r"], ["y"])]
    inits = [numpy_helper.from_array(small, "s"), numpy_helper.from_array(big[0], "b0"),
             numpy_helper.from_array(big[1], "b1")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    packed = tmp_path / "packed.onnx"
    onnx.save(onnx.ModelProto.FromString(model.SerializeToString()), packed, save_as_external_data=True, location="packed.onnx.data",
              size_threshold=1024)
    assert any(o % 4096 for o in _external_offsets(packed).values())
    model_io.save(model_io.load(packed, load_external_data=False), tmp_path / "out.onnx",
                  external_data=True)
    assert (tmp_path / "out.onnx.data").stat().st_size == sum(a.nbytes for a in (small, *big))
    # a source whose large weights start at page boundaries keeps them there
    aligned, offset = onnx.ModelProto(), 0
    aligned.CopyFrom(model)
    with open(tmp_path / "aligned.onnx.data", "wb") as f:
        for tensor in aligned.graph.initializer:
            offset += -offset % 4096
            f.seek(offset)
            f.write(tensor.raw_data)
            length = len(tensor.raw_data)
            tensor.ClearField("raw_data")
            tensor.data_location = onnx.TensorProto.EXTERNAL
            for key, value in (("location", "aligned.onnx.data"), ("offset", str(offset)),
                               ("length", str(length))):
                tensor.external_data.add(key=key, value=value)
            offset += length
    onnx.save(aligned, tmp_path / "aligned.onnx")
    model_io.save(model_io.load(tmp_path / "aligned.onnx", load_external_data=False),
                  tmp_path / "again.onnx", external_data=True)
    offsets = _external_offsets(tmp_path / "again.onnx")
    assert offsets["b0"] % 4096 == 0 and offsets["b1"] % 4096 == 0
    # a file per weight (every one at offset 0) is no padded file: written packed
    apart = tmp_path / "apart" / "apart.onnx"
    apart.parent.mkdir()
    onnx.save(onnx.ModelProto.FromString(model_io.load(packed).SerializeToString()), apart,
              save_as_external_data=True, all_tensors_to_one_file=False, size_threshold=1024)
    model_io.save(model_io.load(apart, load_external_data=False), tmp_path / "one.onnx",
                  external_data=True)
    assert (tmp_path / "one.onnx.data").stat().st_size == sum(a.nbytes for a in (small, *big))


def test_a_signal_during_a_commit_takes_effect_when_it_ends(sigint_raises) -> None:
    # a Ctrl-C between a data file's rename and its model's paired the old model with the new
    # data (a hostile round): the renames are one step
    import signal
    import time

    from graphfix.model_io.folders import one_step

    done = []
    with pytest.raises(KeyboardInterrupt):
        with one_step():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # where the handler would have raised
            done.append("renamed")
    assert done == ["renamed"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_two_commits_in_one_folder_take_turns(tmp_path) -> None:
    # two runs writing one model at once paired one's data file with the other's model
    import threading
    import time

    from graphfix.model_io.folders import one_step

    events, started = [], threading.Event()

    def first() -> None:
        with one_step(tmp_path):
            started.set()
            time.sleep(0.2)
            events.append("first done")

    thread = threading.Thread(target=first)
    thread.start()
    started.wait()
    with one_step(tmp_path):
        events.append("second")
    thread.join()
    assert events == ["first done", "second"]


def test_small_integers_stored_raw_go_back_to_varints() -> None:
    # An exporter's int64 index of 300 small values takes about 300 bytes as varints; a
    # rewriter's copy of it, raw, took 2400 (a scikit-learn stacking model came out 1246 bytes
    # larger than its input). Negative values, 10 bytes as varints, stay raw.
    small = numpy_helper.from_array(np.arange(300, dtype=np.int64) % 100, "index")
    negative = numpy_helper.from_array(-np.arange(1, 301, dtype=np.int64), "negative")
    floats = numpy_helper.from_array(np.ones(300, np.float32), "floats")
    node = helper.make_node("Constant", [], ["shape"],
                            value=numpy_helper.from_array(np.array([1, 2, 3], np.int32)))
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info(
        "shape", onnx.TensorProto.INT32, [3])], [small, negative, floats])
    model = helper.make_model(graph)
    before = model.ByteSize()
    saved = model_io.compact_integers(model)
    assert saved > 2000 and model.ByteSize() == before - saved
    index, left, kept = model.graph.initializer
    assert not index.raw_data and len(index.int64_data) == 300
    np.testing.assert_array_equal(numpy_helper.to_array(index), np.arange(300) % 100)
    assert left.raw_data and kept.raw_data
    constant = model.graph.node[0].attribute[0].t
    assert list(constant.int32_data) == [1, 2, 3] and not constant.raw_data
    assert model_io.compact_integers(model) == 0
