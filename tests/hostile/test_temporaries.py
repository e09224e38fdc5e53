"""Temporary and staging folders: swept only when graphfix can prove it made them and their
owner is gone; nothing left behind by a run that was killed, nor by a worker its owner closed.

Cases: in TMPDIR, a user's ``graphfix-results-2024-06`` folder (every test of this suite holds
one in its TMPDIR), folders named like graphfix's with a dead pid but no marker, with a marker
that is not graphfix's, with a marker that is a link, owned by another user, a file and a link
named like them, a folder whose owner is alive under a pid that is not (another pid namespace),
an abandoned folder (its owner killed) that the next run sweeps, for each command that sweeps;
in the output folder, an abandoned staging folder (a write killed half-way) that the next write
sweeps, a live one it leaves, and an old-style ``.graphfix-*.tmp`` file it leaves; a worker
started behind a closed OnnxsimWorker and one its owner never closed leave nothing at exit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# The marker file of graphfix's folders (graphfix.model_io.folders.MARKER), spelled out so that
# this file also runs against a graphfix without it (tools/hostile_tally.py --checkout).
MARKER = ".graphfix-owner"

_MAKE_AND_DIE = """
import os, signal, sys
from pathlib import Path
from graphfix.model_io.folders import owned_folder
folder = owned_folder(Path(sys.argv[1]), sys.argv[2])
(folder / "model.onnx").write_bytes(b"partial")
print(folder, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""

_MAKE_AND_WAIT = """
import sys
from pathlib import Path
from graphfix.model_io.folders import owned_folder
folder = owned_folder(Path(sys.argv[1]), sys.argv[2])
print(folder, flush=True)
sys.stdin.read()
"""


def _python(code: str, *args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args],
                            stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True, **kwargs)


def _abandoned(parent: Path, prefix: str) -> Path:
    """A folder graphfix made in ``parent`` whose owner was killed (SIGKILL)."""
    proc = _python(_MAKE_AND_DIE, str(parent), prefix)
    folder = Path(proc.stdout.readline().strip())
    proc.wait()
    assert proc.returncode == -signal.SIGKILL and folder.is_dir()
    return folder


def _commands(gf) -> dict[str, list[str]]:
    gf.model()
    return {"optimize": ["optimize", "m.onnx", "out.onnx"],
            "optimize-no-verify": ["optimize", "m.onnx", "out.onnx", "--no-verify"]}


@pytest.mark.parametrize("command", ["optimize", "optimize-no-verify"])
def test_an_abandoned_temporary_folder_is_swept(gf, command):
    folder = _abandoned(gf.tmpdir, f"graphfix-onnxsim-{os.getpid()}-")
    args = _commands(gf)[command]
    outcome = gf.invoke(*args)
    assert outcome.code == 0, outcome.describe()
    assert not folder.exists()


@pytest.mark.parametrize("command", ["optimize", "optimize-no-verify"])
def test_a_folder_whose_owner_lives_is_kept_whatever_its_pid(gf, command):
    """Its name holds a pid no process has (another pid namespace's), its lock is held."""
    proc = _python(_MAKE_AND_WAIT, str(gf.tmpdir), "graphfix-onnxsim-999999999-")
    try:
        folder = Path(proc.stdout.readline().strip())
        outcome = gf.invoke(*_commands(gf)[command])
        assert outcome.code == 0, outcome.describe()
        assert (folder / MARKER).exists()
    finally:
        proc.communicate("")


def _no_marker(folder: Path) -> None:
    folder.mkdir()
    (folder / "data.bin").write_bytes(b"a user's")


def _foreign_marker(folder: Path) -> None:
    folder.mkdir()
    (folder / MARKER).write_bytes(b"not ours\n")


def _marker_link(folder: Path) -> None:
    folder.mkdir()
    target = folder.parent / "elsewhere-marker"
    target.write_bytes(b"graphfix pid 1\n")
    os.symlink(target, folder / MARKER)


def _a_file(folder: Path) -> None:
    folder.write_bytes(b"a file, not a folder")


def _a_link(folder: Path) -> None:
    real = folder.parent / "real-folder"
    real.mkdir()
    (real / MARKER).write_bytes(b"graphfix pid 1\n")
    os.symlink(real, folder)


def _other_user(folder: Path) -> None:
    folder.mkdir()
    (folder / MARKER).write_bytes(b"graphfix pid 1\n")
    os.chown(folder, 65534, 65534)


NOT_OURS = {"no-marker": _no_marker, "foreign-marker": _foreign_marker,
            "marker-link": _marker_link, "file": _a_file, "link": _a_link,
            "other-user": _other_user}


@pytest.mark.parametrize("kind", list(NOT_OURS))
def test_what_graphfix_cannot_prove_it_made_is_left_alone(gf, kind):
    if kind == "other-user" and os.geteuid() != 0:
        pytest.skip("only root can give a folder to another user")
    target = gf.tmpdir / "graphfix-onnxsim-1-abcdefgh"
    NOT_OURS[kind](target)
    gf.model()
    before = gf.tmpdir / "graphfix-onnxsim-1-abcdefgh"
    outcome = gf.invoke("optimize", "m.onnx", "out.onnx",
                        watch=[gf.tmpdir / n for n in os.listdir(gf.tmpdir)
                               if not n.startswith("graphfix-results")])
    assert outcome.code == 0, outcome.describe()
    assert before.exists() or before.is_symlink()


def test_an_abandoned_staging_folder_is_swept_by_the_next_write(gf):
    gf.model()
    out = gf.folder / "out"
    out.mkdir()
    staging = _abandoned(out, ".graphfix-")
    outcome = gf.invoke("optimize", "m.onnx", "out/out.onnx")
    assert outcome.code == 0, outcome.describe()
    assert sorted(os.listdir(out)) == ["out.onnx"]
    assert not staging.exists()


def test_an_abandoned_staging_folder_is_swept_by_a_report_write(gf):
    gf.model()
    (gf.folder / "reports").mkdir()
    staging = _abandoned(gf.folder / "reports", ".graphfix-")
    outcome = gf.invoke("optimize", "m.onnx", "out.onnx", "--report", "reports/r.json")
    assert outcome.code == 0, outcome.describe()
    assert sorted(os.listdir(gf.folder / "reports")) == ["r.json"]
    assert not staging.exists()


def test_a_live_staging_folder_is_left_alone(gf):
    gf.model()
    proc = _python(_MAKE_AND_WAIT, str(gf.folder), ".graphfix-")
    try:
        staging = Path(proc.stdout.readline().strip())
        outcome = gf.invoke("optimize", "m.onnx", "out.onnx")
        assert outcome.code == 0, outcome.describe()
        assert (staging / MARKER).exists()
    finally:
        proc.communicate("")


def test_an_old_temporary_file_is_not_taken_for_graphfix_s(gf):
    gf.model()
    (gf.folder / ".graphfix-abc123.tmp").write_bytes(b"someone's")
    gf.optimized("m.onnx", "out.onnx")


def test_the_library_sweeps_too(gf):
    import graphfix

    folder = _abandoned(gf.tmpdir, "graphfix-session-1-")
    graphfix.optimize(gf.models.matmul(), verify=False)
    assert not folder.exists()


_CLOSED_WORKER = """
import onnx
from graphfix.passes.simplify import OnnxsimWorker, Simplify
model = onnx.load({path!r})
worker = OnnxsimWorker()
worker.start()
worker.close()
result = Simplify(worker=worker)(model)
print("done", result.modified, flush=True)
"""

_UNCLOSED_WORKER = """
from graphfix.passes.simplify import OnnxsimWorker
worker = OnnxsimWorker()
worker.start()
print("done", flush=True)
"""


@pytest.mark.parametrize("code", [_CLOSED_WORKER, _UNCLOSED_WORKER], ids=["closed", "unclosed"])
def test_a_worker_leaves_nothing_when_the_process_exits(gf, code):
    path = gf.model()
    env = dict(os.environ, TMPDIR=str(gf.tmpdir))
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code.format(path=str(path)))],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0 and "done" in result.stdout, result.stderr
    assert [n for n in os.listdir(gf.tmpdir) if n.startswith("graphfix-onnxsim")] == []


def _worker_folder(gf, proc: subprocess.Popen) -> None:
    """Return once graphfix's onnxsim worker folder exists (the run is in its passes)."""
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if any(n.startswith("graphfix-onnxsim") for n in os.listdir(gf.tmpdir)):
            return
        time.sleep(0.01)


def test_a_killed_run_is_swept_by_the_next(gf):
    gf.model(gf.models.matmul(256))
    outcome = gf.process("optimize", "m.onnx", "out.onnx",
                         send=(signal.SIGKILL, lambda proc: _worker_folder(gf, proc)))
    assert outcome.code == -signal.SIGKILL, outcome.describe()
    gf.optimized("m.onnx", "out.onnx")  # checks that nothing of graphfix's is left in TMPDIR
    assert sorted(os.listdir(gf.folder)) == ["m.onnx", "out.onnx"]
