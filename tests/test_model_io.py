from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest

from graphfix import model_io
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

    monkeypatch.setattr(model_io.os, "fsync", full_disk)
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

    monkeypatch.setattr(model_io.tempfile, "mkstemp", denied)
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
