"""A source that changes while graphfix runs (a model re-exported to the same path) refuses the
write: the output would mix what was read before with what is there now.

Cases: while the passes run, the data file is rewritten in place (same size, other bytes), grown,
truncated, replaced by another file (a rename, the same bytes), touched, removed; the model file
is rewritten with the same bytes, replaced by a rename, removed; each with and without parity;
and the library's save of a model whose weights stay in a data file that changed since load.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest

import graphfix
from graphfix.errors import GraphfixError
from graphfix.registry import Pass, PassResult


class _Meddler(Pass):
    """Does something to a file the run read, then changes nothing."""

    name = "meddle"

    def __init__(self, action: Callable[[], None]) -> None:
        self._action = action

    def call(self, model: onnx.ModelProto) -> PassResult:
        self._action()
        return PassResult(model, False)


def _rewrite_same_size(path: Path) -> None:
    data = path.read_bytes()
    with open(path, "r+b") as f:
        f.write(bytes(255 - b for b in data[:64]))


def _grow(path: Path) -> None:
    with open(path, "ab") as f:
        f.write(b"\0" * 4096)


def _truncate(path: Path) -> None:
    with open(path, "r+b") as f:
        f.truncate(max(path.stat().st_size // 2, 1))


def _replace(path: Path) -> None:
    copy = path.with_name(path.name + ".new")
    copy.write_bytes(path.read_bytes())
    os.replace(copy, path)


def _touch(path: Path) -> None:
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 2_000_000_000))


def _rewrite_same_bytes(path: Path) -> None:
    data = path.read_bytes()
    _touch(path)
    path.write_bytes(data)


def _remove(path: Path) -> None:
    path.unlink()


DATA_CHANGES = {"rewritten": _rewrite_same_size, "grown": _grow, "truncated": _truncate,
                "replaced": _replace, "touched": _touch, "removed": _remove}
MODEL_CHANGES = {"re-exported": _rewrite_same_bytes, "replaced": _replace, "removed": _remove}


def _run(gf, target: Path, action: Callable[[Path], None], verify: bool) -> None:
    src = gf.folder / "m.onnx"
    passes = ["fold-shapes", _Meddler(lambda: action(target)), "simplify"]
    with pytest.raises(GraphfixError, match="changed while graphfix ran|no such file|missing"):
        graphfix.optimize_file(src, gf.folder / "out.onnx", passes=passes, verify=verify)
    leftovers = sorted(p.name for p in gf.folder.iterdir()
                       if p.name not in ("m.onnx", "w.data", "m.onnx.new", "w.data.new"))
    assert leftovers == [], leftovers


@pytest.mark.parametrize("change", list(DATA_CHANGES))
@pytest.mark.parametrize("verify", [True, False], ids=["verify", "no-verify"])
def test_a_data_file_that_changes_during_the_run_refuses_the_write(gf, change, verify):
    gf.model(gf.models.two_weights(64), location="w.data")
    _run(gf, gf.folder / "w.data", DATA_CHANGES[change], verify)


@pytest.mark.parametrize("change", list(MODEL_CHANGES))
@pytest.mark.parametrize("verify", [True, False], ids=["verify", "no-verify"])
def test_a_model_file_that_changes_during_the_run_refuses_the_write(gf, change, verify):
    gf.model(gf.models.two_weights(64), location="w.data")
    _run(gf, gf.folder / "m.onnx", MODEL_CHANGES[change], verify)


def test_the_cli_says_so_in_one_line(gf):
    """The same through the command line (the change made by a process beside it is what a
    user meets; here a pass of the library's makes it at a known moment)."""
    gf.model(gf.models.two_weights(64), location="w.data")
    with pytest.raises(GraphfixError) as info:
        graphfix.optimize_file(gf.folder / "m.onnx", gf.folder / "out.onnx",
                               passes=[_Meddler(lambda: _rewrite_same_size(gf.folder / "w.data"))])
    line = str(info.value)
    assert "w.data" in line and "\n" not in line and len(line) <= 300, line


def test_save_refuses_weights_whose_file_changed_since_load(gf):
    path = gf.model(gf.models.two_weights(64), location="w.data")
    lazy = graphfix.load(path, load_external_data=False)
    _rewrite_same_size(gf.folder / "w.data")
    with pytest.raises(GraphfixError, match="changed while graphfix ran"):
        graphfix.save(lazy, gf.folder / "out.onnx")
    assert not (gf.folder / "out.onnx").exists()


def test_an_unchanged_source_is_written(gf):
    path = gf.model(gf.models.two_weights(64), location="w.data")
    graphfix.optimize_file(path, gf.folder / "out.onnx",
                           passes=["fold-shapes", _Meddler(lambda: None), "simplify"])
    gf.assert_same_function(path, gf.folder / "out.onnx")
    x = np.ones((1, 64), np.float32)
    assert gf.ort_outputs(gf.folder / "out.onnx", {"x": x})["y"].shape == (1, 64)
