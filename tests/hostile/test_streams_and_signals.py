"""The real process: output streams that fail or are closed, and signals from the first instant.

Cases (each a ``python -m graphfix`` process): stdout on a full device (optimize: exit 0 and a
warning; inspect, check, passes: exit 1 and one line), stdout closed (optimize, inspect), stderr
closed (optimize runs without progress, exit 0; a refusal still exits 1), stderr on a full
device, both closed, a reader that goes away (``| head``: optimize, inspect --json, passes,
--help); SIGINT, SIGTERM and SIGHUP while graphfix imports (exit 130, 143, 129, one line) and
while it works (the same codes, nothing left behind).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest


def _full() -> int:
    return os.open("/dev/full", os.O_WRONLY)


needs_dev_full = pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")


def _closed_fd(fd: int):
    def close() -> None:
        os.close(fd)
    return close


def _assert_clean(gf, outcome, code: int, produces=()) -> None:
    text = outcome.describe()
    assert outcome.code == code, text
    assert "Traceback" not in outcome.stdout + outcome.stderr, text
    assert outcome.tmp_left == [] and outcome.tmp_touched == [], text
    assert outcome.removed == outcome.changed == [], text
    assert set(outcome.added) == {str(gf.folder / p) for p in produces}, text
    for name in produces:
        if name.endswith(".onnx"):
            gf.assert_same_function(gf.folder / "m.onnx", gf.folder / name)


@needs_dev_full
def test_optimize_with_stdout_on_a_full_device_succeeds(gf):
    gf.model()
    full = _full()
    try:
        outcome = gf.process("optimize", "m.onnx", "out.onnx", stdout=full)
    finally:
        os.close(full)
    _assert_clean(gf, outcome, 0, ["out.onnx"])
    assert "warning: the summary was not printed" in outcome.stderr, outcome.describe()


@needs_dev_full
@pytest.mark.parametrize("args", [["inspect", "m.onnx"], ["check", "m.onnx", "m.onnx"],
                                  ["passes"]], ids=["inspect", "check", "passes"])
def test_a_result_that_cannot_be_printed_is_one_error_line(gf, args):
    gf.model()
    full = _full()
    try:
        outcome = gf.process(*args, stdout=full)
    finally:
        os.close(full)
    _assert_clean(gf, outcome, 1)
    errors = [line for line in outcome.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "standard output" in errors[0], outcome.describe()


@pytest.mark.parametrize("args, code, produces", [
    (["optimize", "m.onnx", "out.onnx"], 0, ["out.onnx"]),
    # inspect's result is what it prints: a closed stdout is a failure, as a full one is
    (["inspect", "m.onnx"], 1, []),
], ids=["optimize", "inspect"])
def test_stdout_closed(gf, args, code, produces):
    gf.model()
    outcome = gf.process(*args, stdout=None, preexec=_closed_fd(1))
    _assert_clean(gf, outcome, code, produces)


def test_optimize_with_stderr_closed_runs_without_progress(gf):
    gf.model()
    outcome = gf.process("optimize", "m.onnx", "out.onnx", stderr=None, preexec=_closed_fd(2))
    _assert_clean(gf, outcome, 0, ["out.onnx"])
    assert "wrote out.onnx" in outcome.stdout


def test_a_refusal_with_stderr_closed_still_exits_1(gf):
    outcome = gf.process("optimize", "missing.onnx", "out.onnx", stderr=None,
                         preexec=_closed_fd(2))
    _assert_clean(gf, outcome, 1)


@needs_dev_full
def test_optimize_with_stderr_on_a_full_device_succeeds(gf):
    gf.model()
    full = _full()
    try:
        outcome = gf.process("optimize", "m.onnx", "out.onnx", stderr=full)
    finally:
        os.close(full)
    _assert_clean(gf, outcome, 0, ["out.onnx"])


def test_optimize_with_both_streams_closed_succeeds(gf):
    gf.model()

    def close_both() -> None:
        os.close(1)
        os.close(2)

    outcome = gf.process("optimize", "m.onnx", "out.onnx", stdout=None, stderr=None,
                         preexec=close_both)
    _assert_clean(gf, outcome, 0, ["out.onnx"])


@pytest.mark.parametrize("args, produces", [
    (["optimize", "m.onnx", "out.onnx"], ["out.onnx"]),
    (["inspect", "m.onnx", "--json"], []),
    (["passes"], []),
    (["--help"], []),
], ids=["optimize", "inspect-json", "passes", "help"])
@pytest.mark.parametrize("read", [0, 1], ids=["true", "head-c1"])
def test_a_reader_that_goes_away_is_no_error(gf, args, produces, read):
    """``graphfix ... | true`` (the reader goes at once) and ``| head -c 1`` (after a byte)."""
    gf.model()
    outcome = gf.process(*args, read_bytes=read)
    _assert_clean(gf, outcome, 0, produces)


# --------------------------------------------------------------------------- signals
def _handlers_installed(proc: subprocess.Popen) -> None:
    """Return once the process has its own SIGTERM handler (graphfix's start-up installs it
    before importing anything heavy), or when it ended."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except OSError:
            return
        caught = int(next(line.split()[1] for line in status.splitlines()
                          if line.startswith("SigCgt:")), 16)
        if caught & (1 << (signal.SIGTERM - 1)):
            return
        time.sleep(0.002)


def _worker_started(gf):
    def wait(proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if any(n.startswith("graphfix-onnxsim") for n in os.listdir(gf.tmpdir)):
                time.sleep(0.05)
                return
            time.sleep(0.01)
    return wait


SIGNALS = {"SIGINT": (signal.SIGINT, 130, "interrupted"),
           "SIGTERM": (signal.SIGTERM, 143, "terminated"),
           "SIGHUP": (signal.SIGHUP, 129, "hung up")}


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's /proc")
@pytest.mark.parametrize("name", list(SIGNALS))
def test_a_signal_while_graphfix_imports(gf, name):
    signum, code, line = SIGNALS[name]
    gf.model()
    outcome = gf.process("optimize", "m.onnx", "out.onnx", send=(signum, _handlers_installed))
    text = outcome.describe()
    assert outcome.code == code, text
    assert outcome.stderr.strip().splitlines() == [line], text
    assert outcome.added == outcome.removed == outcome.changed == [], text
    assert outcome.tmp_left == [], text


@pytest.mark.parametrize("name", list(SIGNALS))
def test_a_signal_while_graphfix_works(gf, name):
    signum, code, line = SIGNALS[name]
    gf.model(gf.models.matmul(256))
    outcome = gf.process("optimize", "m.onnx", "out.onnx", send=(signum, _worker_started(gf)))
    text = outcome.describe()
    assert outcome.code == code, text
    lines = [ln for ln in outcome.stderr.splitlines() if not ln.startswith("graphfix:")]
    assert lines == [line], text
    assert outcome.added == outcome.removed == outcome.changed == [], text
    assert outcome.tmp_left == [], text


@needs_dev_full
def test_tune_that_wrote_its_configuration_succeeds_with_stdout_full(gf):
    """The configuration written is tune's result: a print that fails cannot undo it."""
    gf.model()
    full = _full()
    try:
        outcome = gf.process("tune", "m.onnx", "--budget", "1", "--out", "t.json", stdout=full)
    finally:
        os.close(full)
    assert outcome.code == 0 and (gf.folder / "t.json").exists(), outcome.describe()
    assert "warning: the summary was not printed" in outcome.stderr, outcome.describe()


def _stopped_once_written(path: Path):
    """A ``send`` moment: the process is stopped (SIGSTOP) as soon as ``path`` exists, so the
    signal sent next arrives after the commit; a timer lets it go on 0.3 s later."""
    def wait(proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if path.exists():
                os.kill(proc.pid, signal.SIGSTOP)
                threading.Timer(0.3, os.kill, (proc.pid, signal.SIGCONT)).start()
                return
            time.sleep(0.001)
    return wait


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_signal_after_the_files_are_written_names_them(gf, name):
    """A signal that ends the run after its files were committed: the exit code is the
    signal's, and the line says which files were written in full (before, "interrupted"
    alone let the user think nothing was)."""
    signum, code, line = SIGNALS[name]
    gf.model()
    for _ in range(8):  # the run may end between the rename and the stop, or the signal land
        # as the interpreter exits, past any handler (killed by it: -signum): try again
        for leftover in ("out.onnx", "r.json"):
            (gf.folder / leftover).unlink(missing_ok=True)
        outcome = gf.process("optimize", "m.onnx", "out.onnx", "--report", "r.json",
                             send=(signum, _stopped_once_written(gf.folder / "out.onnx")))
        if outcome.code not in (0, -signum):
            break
    else:
        pytest.skip("the run ended each time before it could be stopped")
    text = outcome.describe()
    assert outcome.code == code, text
    lines = [ln for ln in outcome.stderr.splitlines() if not ln.startswith("graphfix:")]
    assert lines == [f"{line} after writing out.onnx, r.json (complete, kept)"], text
    assert gf.assert_same_function(gf.folder / "m.onnx", gf.folder / "out.onnx") is None
    assert json.loads((gf.folder / "r.json").read_text())["written"] is not None
