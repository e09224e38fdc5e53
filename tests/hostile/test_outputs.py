"""Hostile output paths: no file graphfix reads is ever written, nothing partial is left, and
every refusal is one line with exit code 1."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import helper, numpy_helper

from graphfix.cli import cli


def _model() -> onnx.ModelProto:
    weight = numpy_helper.from_array(np.arange(64 * 64, dtype=np.float32).reshape(64, 64), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 64])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """m.onnx with its weights in w.data, and plain.onnx with them inside."""
    onnx.save(_model(), str(tmp_path / "m.onnx"), save_as_external_data=True, location="w.data",
              size_threshold=0)
    onnx.save(_model(), str(tmp_path / "plain.onnx"))
    return tmp_path


def _snapshot(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in folder.iterdir() if p.is_file() and not p.is_symlink()}


def _run(folder: Path, *args: str) -> tuple[int, str]:
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(cli, ["optimize", *args, "-q"], catch_exceptions=False)
    finally:
        os.chdir(cwd)
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def _refused(folder: Path, *args: str) -> str:
    """The run is refused with one error line; no file changed, none was added."""
    before = _snapshot(folder)
    code, output = _run(folder, *args)
    assert code == 1, output
    assert [line for line in output.splitlines() if line.strip()] == [
        line for line in output.splitlines() if line.startswith("error:")] and output.count(
        "error:") == 1, output
    assert _snapshot(folder) == before
    return output


def test_report_naming_the_input_is_refused(folder):
    assert "refusing to overwrite the input model" in _refused(
        folder, "plain.onnx", "out.onnx", "--report", "plain.onnx")


def test_report_naming_the_output_is_refused(folder):
    assert "would be the same file" in _refused(
        folder, "plain.onnx", "out.onnx", "--report", "out.onnx")


def test_output_that_is_the_inputs_data_file_is_refused(folder):
    assert "external data" in _refused(folder, "m.onnx", "w.data")


def test_output_whose_data_file_would_be_the_inputs_is_refused(folder):
    os.rename(folder / "w.data", folder / "w.onnx.data")
    model = onnx.load(str(folder / "m.onnx"), load_external_data=False)
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "w.onnx.data"
    onnx.save(model, str(folder / "m.onnx"))
    assert "external data" in _refused(folder, "m.onnx", "w.onnx")


@pytest.mark.parametrize("link", ["symbolic", "hard"])
def test_links_to_the_input_are_the_input(folder, link):
    if link == "symbolic":
        os.symlink("plain.onnx", folder / "link.onnx")
    else:
        os.link(folder / "plain.onnx", folder / "link.onnx")
    _refused(folder, "plain.onnx", "link.onnx")
    _refused(folder, "plain.onnx", "out.onnx", "--report", "link.onnx")


def test_report_into_a_missing_folder_writes_nothing(folder):
    assert "no such folder" in _refused(folder, "plain.onnx", "out.onnx", "--report",
                                        "missing/r.json")


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_output_that_is_not_a_regular_file_is_refused(folder, kind):
    if kind == "fifo":
        os.mkfifo(folder / "out.onnx")
        target = "out.onnx"
    else:
        target = os.devnull
    _refused(folder, "plain.onnx", target)
    if kind == "fifo":
        assert stat.S_ISFIFO((folder / "out.onnx").stat().st_mode)


def test_rewriting_without_external_data_removes_the_stale_data_file(folder):
    assert _run(folder, "m.onnx", "out.onnx")[0] == 0
    assert (folder / "out.onnx.data").exists()
    assert _run(folder, "m.onnx", "out.onnx", "--no-external-data")[0] == 0
    assert not (folder / "out.onnx.data").exists()
    onnx.checker.check_model(str(folder / "out.onnx"), full_check=True)


def test_a_data_file_another_model_uses_is_left_alone(folder):
    (folder / "out.onnx.data").write_bytes(b"someone else's")
    (folder / "out.onnx").write_bytes(b"not a model")
    assert _run(folder, "plain.onnx", "out.onnx", "--no-external-data")[0] == 0
    assert (folder / "out.onnx.data").read_bytes() == b"someone else's"


def test_written_files_get_the_umasks_permissions(folder):
    mask = os.umask(0o022)
    try:
        assert _run(folder, "m.onnx", "out.onnx", "--report", "r.json")[0] == 0
    finally:
        os.umask(mask)
    for name in ("out.onnx", "out.onnx.data", "r.json"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o644, name


def test_the_report_is_written_with_the_model(folder):
    assert _run(folder, "m.onnx", "out.onnx", "--report", "r.json")[0] == 0
    report = json.loads((folder / "r.json").read_text())
    assert report["written"] == "out.onnx"
    assert report["output"]["size_bytes"] == sum(
        (folder / n).stat().st_size for n in ("out.onnx", "out.onnx.data"))
