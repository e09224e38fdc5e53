"""The temporary folder and the system's limits: each refusal is one line that names the folder
or the limit, never a pass or the model.

Cases: TMPDIR too deep for the paths graphfix makes, missing, a file, not writable (skipped
where permissions do not bind), for optimize with and without parity and for ort-offline
alone, while inspect (which needs no temporary folder) works; TMPDIR on a full file system; the
output folder and the report's folder full; the file-size limit (``ulimit -f``) below the
model's files (refused before the passes run), below the written model only (refused when
writing), and above everything (the run works).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest


def _deep(root: Path) -> Path:
    """A folder whose path leaves no room for the paths graphfix makes in it."""
    limit = os.pathconf(root, "PC_PATH_MAX")
    folder = root
    while len(os.fsencode(folder)) < limit - 60:
        step = min(200, limit - 60 - len(os.fsencode(folder)) - 1)
        if step < 1:
            break
        folder = folder / ("d" * step)
    folder.mkdir(parents=True)
    return folder


def _tmpdir(gf, kind: str) -> Path:
    if kind == "too-deep":  # outside the test's folder: ONNX Runtime keeps a file in TMPDIR
        return _deep(gf.folder.parent / f"{gf.folder.name}-deep")
    if kind == "missing":
        return gf.folder / "no-such-folder"
    if kind == "a-file":
        (gf.folder / "a-file").write_text("not a folder")
        return gf.folder / "a-file"
    folder = gf.folder / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    return folder


RUNS = {"optimize": [], "no-verify": ["--no-verify"], "ort-offline": ["--passes", "ort-offline"]}


@pytest.mark.parametrize("kind", ["too-deep", "missing", "a-file", "read-only"])
@pytest.mark.parametrize("run", list(RUNS))
def test_an_unusable_tmpdir_is_one_line_naming_it(gf, monkeypatch, is_root, kind, run):
    if kind == "read-only" and is_root:
        pytest.skip("root writes into a read-only folder")
    gf.model()
    monkeypatch.setenv("TMPDIR", str(_tmpdir(gf, kind)))
    try:
        line = gf.refused("optimize", "m.onnx", "out.onnx", *RUNS[run],
                          match="TMPDIR cannot hold").error_lines[0]
        assert {"too-deep": "too deep", "missing": "no such folder", "a-file": "not a folder",
                "read-only": "not writable"}[kind] in line, line
    finally:
        if kind == "read-only":
            (gf.folder / "read-only").chmod(0o700)


def test_inspect_needs_no_temporary_folder(gf, monkeypatch):
    gf.model()
    monkeypatch.setenv("TMPDIR", str(gf.folder / "no-such-folder"))
    gf.succeeded("inspect", "m.onnx")


@pytest.fixture
def small_disk(tmp_path: Path, is_root: bool):
    """A 160 KiB file system (tmpfs), where the system lets this process mount one."""
    folder = tmp_path.parent / f"{tmp_path.name}-small"
    folder.mkdir()
    if not is_root or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs",
                                      str(folder)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small file system here")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def _big(gf, n: int = 512):
    """m.onnx: a MatMul whose weight (n x n float32, 1 MiB at 512) is more than the small disk
    holds."""
    return gf.model(gf.models.matmul(n))


def _folded_weights(gf):
    """m.onnx: y = x @ (w1 + w2), 512 x 512 float32 weights that simplify folds (they cross to
    onnxsim through TMPDIR: 2 MiB)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    weights = [numpy_helper.from_array(rng.standard_normal((512, 512)).astype(np.float32), n)
               for n in ("w1", "w2")]
    graph = helper.make_graph(
        [helper.make_node("Add", ["w1", "w2"], ["s"]), helper.make_node("MatMul", ["x", "s"],
                                                                         ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 512])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 512])], weights)
    return gf.model(gf.models.finish(graph))


@pytest.mark.parametrize("run", ["optimize", "no-verify", "simplify"])
def test_a_full_tmpdir_is_one_line_naming_it(gf, monkeypatch, small_disk, run):
    _folded_weights(gf)
    (small_disk / "filler").write_bytes(b"\0" * 100 * 1024)
    monkeypatch.setenv("TMPDIR", str(small_disk))
    extra = {"optimize": [], "no-verify": ["--no-verify"], "simplify": ["--passes", "simplify"]}
    line = gf.refused("optimize", "m.onnx", "out.onnx", *extra[run],
                      match=f"{small_disk}: no room left").error_lines[0]
    assert "report the model" not in line and "pass '" not in line, line
    assert sorted(p.name for p in small_disk.iterdir() if p.name != ".ses") == ["filler"]


def test_a_full_output_folder_is_one_line_naming_it(gf, small_disk):
    _big(gf)
    gf.refused("optimize", "m.onnx", str(small_disk / "out.onnx"), watch=[small_disk],
               match=f"{small_disk}.*no room")
    assert list(small_disk.iterdir()) == []


def test_a_report_in_a_full_folder_writes_nothing(gf, small_disk):
    _big(gf)
    (small_disk / "filler").write_bytes(b"\0" * 150 * 1024)
    outcome = gf.invoke("optimize", "m.onnx", "out.onnx", "--report",
                        str(small_disk / "r.json"), watch=[small_disk])
    text = outcome.describe()
    assert outcome.code == 1 and len(outcome.error_lines) == 1, text
    assert "no room" in outcome.error_lines[0], text
    assert outcome.added == [], text
    assert [p.name for p in small_disk.iterdir()] == ["filler"], text


def _limit_blocks(nbytes: int) -> int:
    return max(nbytes // 1024, 1)  # the shell's ulimit -f counts 1024-byte blocks


def test_a_file_size_limit_below_the_model_is_refused_before_the_passes(gf):
    path = _big(gf)
    size = path.stat().st_size
    outcome = gf.process("optimize", "m.onnx", "out.onnx",
                         shell_prefix=f"ulimit -f {_limit_blocks(size // 2)};")
    text = outcome.describe()
    assert outcome.code == 1, text
    errors = [ln for ln in outcome.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "ulimit -f" in errors[0], text
    assert "graphfix: [1/" not in outcome.stderr, text  # before any pass
    assert outcome.added == outcome.changed == outcome.removed == [] and not outcome.tmp_left


def test_a_file_size_limit_below_the_written_model_names_the_limit(gf):
    """The input is small; folding makes the output larger than the limit."""
    gf.model(gf.models.parse("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[256,256] x) => (float[256,256] y) {
        s = Constant <value = int64[2] {256, 256}> ()
        c = ConstantOfShape <value = float[1] {0.5}> (s)
        y = Add (x, c)
    }"""))
    outcome = gf.process("optimize", "m.onnx", "out.onnx", "--max-growth", "0",
                         shell_prefix=f"ulimit -f {_limit_blocks(128 * 1024)};")
    text = outcome.describe()
    errors = [ln for ln in outcome.stderr.splitlines() if ln.startswith("error:")]
    if outcome.code == 0:  # the fold was not taken: what was written must be right
        gf.assert_same_function(gf.folder / "m.onnx", gf.folder / "out.onnx")
        return
    assert outcome.code == 1 and len(errors) == 1, text
    assert "ulimit -f" in errors[0] and "report the model" not in errors[0], text
    assert outcome.added == outcome.changed == outcome.removed == [] and not outcome.tmp_left


def test_a_file_size_limit_above_everything_is_no_problem(gf):
    _big(gf, 64)
    outcome = gf.process("optimize", "m.onnx", "out.onnx",
                         shell_prefix=f"ulimit -f {_limit_blocks(64 * 2**20)};")
    assert outcome.code == 0, outcome.describe()
    gf.assert_same_function(gf.folder / "m.onnx", gf.folder / "out.onnx")
    x = np.ones((1, 64), np.float32)
    assert gf.ort_outputs(gf.folder / "out.onnx", {"x": x})["y"].shape == (1, 64)


@pytest.mark.parametrize("relative", ["tmp", ".", "./sub/../tmp"])
def test_a_relative_tmpdir_is_taken_from_the_working_folder(gf, relative):
    """Found by a hostile round: the onnxsim worker runs in a folder of its own, and a relative
    TMPDIR named another folder there (simplify was left out as "onnxsim crashed")."""
    gf.model()
    (gf.folder / "tmp").mkdir()
    (gf.folder / "sub").mkdir()
    outcome = gf.process("optimize", "m.onnx", "out.onnx", env={"TMPDIR": relative})
    text = outcome.describe()
    assert outcome.code == 0 and "warning" not in outcome.stderr, text
    assert "Traceback" not in outcome.stderr, text
    assert str(gf.folder / "out.onnx") in outcome.added, text
    left = [p for p in outcome.added if "graphfix-" in p or ".graphfix" in p]
    assert left == [], text
