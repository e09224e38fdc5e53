"""ONNX Runtime in a worker interpreter, for the runs of a model that may crash it.

ONNX Runtime's graph optimizations at level ``all`` crash it on some float16 graphs (a
segfault in its NCHWc layout transformer on a lowered ViT); such a run must not take graphfix
down. :class:`RuntimeWorker` owns one child interpreter (``sys.executable``) with ONNX Runtime
imported, as :class:`~graphfix.passes._onnxsim_worker.OnnxsimWorker` owns onnxsim's: its life
has an owner. :meth:`~RuntimeWorker.start` launches it and returns at once (it imports, about
0.1 s, while the caller goes on); :meth:`~RuntimeWorker.submit` gives it a job and returns at
once, :meth:`Job.result` waits for the outputs (the caller computes in between);
:meth:`~RuntimeWorker.close` stops it; it is a context manager. Nothing starts at import time.

- The model and its feeds cross as files in a job folder; the outputs come back the same way.
- A worker that dies in a job (a signal: :class:`RuntimeCrash`) is replaced at the next one;
  ONNX Runtime's refusal of a model is an error (RuntimeError), and the worker stays. One that
  ran a model over :data:`KEEP_WORKER_BELOW` is stopped after it, so that its memory goes
  back, and started again when next needed.
- A job given to a closed worker, or while another is on, runs in a worker of its own,
  stopped after it. Closing a worker stops a job still on in it (its result is then an error).
- The worker acknowledges each job before it starts it: one that died before (between jobs, or
  killed) is replaced and the job given again, not taken for a crash on the model.
- It runs in a session of its own (POSIX), so that a terminal's Ctrl-C reaches graphfix, not
  it; an interrupt while waiting for a job stops the job's interpreter and settles the job.
- Its answers are read as they come: a finished job's result is there without a wait. One
  with no answer within the worker's ``timeout`` (a hung or stopped interpreter) is an error,
  and its interpreter is stopped.
- It ends when its stdin closes, which its parent's death does too; at exit, what is left
  (a worker whose owner never closed it, a job never collected) is stopped and its files go;
  a forked copy of the process leaves its parent's alone.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from graphfix.errors import PassError
from graphfix.model_io import release, temporary_folder_path, write_scratch

__all__ = ["RuntimeWorker", "RuntimeCrash", "Job", "KEEP_WORKER_BELOW"]

# Stopped after a model larger than this (its files), to give its memory back.
KEEP_WORKER_BELOW = 64 * 2**20
# The default wait for one job's outputs, in seconds.
JOB_TIMEOUT = 1800.0


class RuntimeCrash(Exception):
    """ONNX Runtime ended the interpreter that ran a model (a signal: a crash in its C++)."""


# The worker's program: it imports, then takes one job per line of stdin (the job's folder,
# holding the model and the feeds, the optimization level, the output names), acknowledges it
# with a line, writes the outputs beside the feeds and answers with a line (a JSON document:
# {} or {"error": text}). Outputs numpy cannot hold as an array of numbers (strings,
# sequences, maps, bfloat16) are left out, as a run here leaves them out.
_WORKER = """
import json, os, sys
import numpy as np
import onnxruntime as ort
levels = {"disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
          "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
          "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
          "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}

def job(folder, optimization, names):
    options = ort.SessionOptions()
    options.graph_optimization_level = levels[optimization]
    options.log_severity_level = 4
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(folder + "/model.onnx", options,
                                   providers=["CPUExecutionProvider"])
    with open(folder + "/feeds.json") as listed:
        keys = json.load(listed)
    inputs = {i.name for i in session.get_inputs()}
    kinds = {o.name: o.type for o in session.get_outputs()}
    wanted = [n for n in names if kinds.get(n, "").startswith("tensor(")
              and kinds[n] not in ("tensor(string)", "tensor(bfloat16)")]
    written = {}
    with np.load(folder + "/feeds.npz") as stored:
        for index, feed in enumerate(keys):
            values = session.run(wanted, {name: stored[key] for name, key in feed.items()
                                          if name in inputs})
            for number, value in enumerate(values):
                written[f"r{index}_{number}"] = value
    np.savez(folder + "/outputs.npz", **written)
    with open(folder + "/outputs.json", "w") as listed:
        json.dump(wanted, listed)

# the answers go out on a copy of stdout; what ONNX Runtime or numpy print goes to the log
answers = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
for line in sys.stdin:
    answers.write("{}\\n")  # taken
    answers.flush()
    try:
        job(*json.loads(line))
        answer = {}
    except Exception as error:
        answer = {"error": str(error).strip()[:2000] or type(error).__name__}
    answers.write(json.dumps(answer) + "\\n")
    answers.flush()
"""

LEVELS = ("disabled", "basic", "extended", "all")

# Every worker interpreter not closed yet, and every job folder not given back: at exit (a
# worker whose owner never closed it, a job never collected) the interpreters are stopped,
# a job still on in one with it, and the folders go. The exit handler is registered by the
# first worker, not at import.
_LIVE: set[_Process] = set()
_JOB_FOLDERS: dict[Path, int] = {}  # each with the process that made it


def _close_left() -> None:
    # a forked copy of the process (exiting through sys.exit) leaves its parent's alone
    for process in [p for p in _LIVE if p.mine]:
        with contextlib.suppress(Exception):
            if process.busy:
                process.proc.kill()
            process.close(wait=False)
    for folder, owner in list(_JOB_FOLDERS.items()):
        if owner == os.getpid():
            _release_job(folder)


def _release_job(folder: Path) -> None:
    """Remove a job's folder, unless a forked copy of the process that made it asks."""
    if _JOB_FOLDERS.pop(folder, os.getpid()) == os.getpid():
        release(folder)


def _drop_job(worker: RuntimeWorker, process: _Process, folder: Path) -> None:
    """A job garbage-collected uncollected: its interpreter stopped if still on it."""
    worker._forget(process)
    if process.busy and process.mine:
        with contextlib.suppress(OSError):
            process.proc.kill()
        process.close()
    _release_job(folder)


class _Process:
    """One worker interpreter and its folder (its working directory: ``-c`` puts it first on
    ``sys.path``, where a source checkout would shadow the installed packages; what it prints
    to stderr goes to a log file there)."""

    def __init__(self) -> None:
        self.folder = temporary_folder_path("runtime")
        self.owner = os.getpid()  # a forked copy of this process does not own it
        self.busy = False  # a job on, its answer not read
        try:
            with open(self.folder / "log.txt", "wb") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, "-c", _WORKER], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=log, text=True, cwd=self.folder,
                    start_new_session=os.name == "posix")
        except BaseException as error:
            release(self.folder)
            if isinstance(error, OSError) and not isinstance(error, InterruptedError):
                raise PassError(f"ONNX Runtime's worker: cannot run {sys.executable!r} "
                                f"({error.strerror or error})",
                                hint="run graphfix with a Python interpreter it can start "
                                     "again (sys.executable)") from None
            raise
        # its lines, read as they come (a finished job's answer waits here, read or not)
        self._lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._reader = threading.Thread(target=self._read_lines, daemon=True,
                                        name="graphfix-runtime-answers")
        self._reader.start()
        if not _LIVE and not _JOB_FOLDERS:
            atexit.unregister(_close_left)
            atexit.register(_close_left)
        _LIVE.add(self)

    @property
    def mine(self) -> bool:
        return self.owner == os.getpid()

    def send(self, line: str) -> bool:
        """Give it a job; False when it died before reading it (a broken pipe)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
            self.busy = True
            return True
        except (OSError, ValueError):
            return False

    def _read_lines(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        line = "x"
        while line:
            try:
                line = stdout.readline()
            except (OSError, ValueError):
                line = ""
            self._lines.put(line)

    def read(self, timeout: float) -> str | None:
        """Its next line ('' once it ended); None when none came in ``timeout`` seconds
        (then it is killed)."""
        try:
            return self._lines.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            self.proc.kill()
            return None

    def close(self, *, wait: bool = True) -> tuple[int | None, str]:
        """Stop it (it ends when its stdin closes): its exit code (negative: the signal that
        ended it; None when not ``wait``-ing) and the last line it printed to stderr. A
        forked copy of the process that started it leaves it alone."""
        _LIVE.discard(self)
        if not self.mine:
            return None, ""
        code, lines = None, []
        try:
            with contextlib.suppress(OSError, ValueError):
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
            try:
                if wait:
                    code = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                code = self.proc.wait()
            self._reader.join(10 if wait else 0)  # it ends with the interpreter's stdout
            with contextlib.suppress(OSError, ValueError):
                if self.proc.stdout is not None and not self._reader.is_alive():
                    self.proc.stdout.close()
            with contextlib.suppress(OSError):
                lines = (self.folder / "log.txt").read_text(errors="replace").strip(
                    ).splitlines()
        finally:
            release(self.folder)
        return code, lines[-1] if lines else ""


class Job:
    """A job given to a worker (:meth:`RuntimeWorker.submit`); :meth:`result` waits for its
    outputs and frees its files."""

    def __init__(self, worker: RuntimeWorker, process: _Process, folder: Path, line: str, *,
                 count: int, keep: bool) -> None:
        self._worker, self._process, self._folder, self._line = worker, process, folder, line
        self._count, self._keep = count, keep
        self._outcome: list[dict[str, np.ndarray]] | Exception | None = None
        # a job dropped uncollected (an interrupt between submit and its caller keeping it)
        # frees its worker and its files
        self._dropped = weakref.finalize(self, _drop_job, worker, process, folder)

    def result(self, timeout: float | None = None) -> list[dict[str, np.ndarray]]:
        """The outputs on each feed set (outputs numpy cannot hold as numbers are left out).
        Raises :class:`RuntimeCrash` where the worker died of a signal in the job,
        RuntimeError where ONNX Runtime refused the model, no answer came in ``timeout``
        seconds (None: the worker's ``timeout``), or the worker was closed with the job on.
        """
        if timeout is None:
            timeout = self._worker.timeout
        if self._outcome is None:
            try:
                self._outcome = self._collect(timeout)
            except (RuntimeCrash, RuntimeError) as error:
                self._outcome = error
            except BaseException:  # an interrupt while waiting: the job's answer is lost
                self._outcome = RuntimeError("interrupted while waiting for the job")
                self._abandon()
                raise
            finally:
                self._dropped.detach()
                _release_job(self._folder)
        if isinstance(self._outcome, Exception):
            raise self._outcome
        return self._outcome

    def _abandon(self) -> None:
        """Stop the job's interpreter if the job is still on in it."""
        process = self._process
        if process.busy:
            self._worker._forget(process)
            with contextlib.suppress(OSError):
                process.proc.kill()
            process.close()

    def _collect(self, timeout: float) -> list[dict[str, np.ndarray]]:
        process = self._process
        if self._worker._closing(process):
            raise RuntimeError("the worker was closed with the job on")
        # its acknowledgement: a line once it took the job, '' where it ended before (killed
        # between jobs: not the model's doing), None where none came in time
        taken = process.read(timeout) if process.busy else ""
        if taken == "":
            self._stop(process)
            process = self._process = self._worker._replacement(self._keep)
            if not process.send(self._line):
                self._stop(process)
                raise RuntimeError("ONNX Runtime's worker interpreter could not take the job")
            taken = process.read(timeout)
        answer = process.read(timeout) if taken else taken
        if answer is None:
            self._stop(process)
            raise RuntimeError(f"no result in {timeout:g} s")
        process.busy = False
        if answer == "":  # it ended in the job
            code, last = self._stop(process)
            if code is not None and code < 0:
                raise RuntimeCrash(f"signal {-code}")
            raise RuntimeError(last or f"exit status {code}")
        try:
            parsed = json.loads(answer)
        except ValueError:  # not its answer: it cannot be trusted with another job
            self._stop(process)
            raise RuntimeError(f"the worker answered {answer[:200]!r}") from None
        if not (self._keep and self._worker._give_back(process)):
            self._stop(process)
        if "error" in parsed:
            raise RuntimeError(parsed["error"])
        try:
            wanted = json.loads((self._folder / "outputs.json").read_text())
            with np.load(self._folder / "outputs.npz") as stored:
                return [{name: stored[f"r{index}_{number}"]
                         for number, name in enumerate(wanted)} for index in range(self._count)]
        except (OSError, ValueError) as error:
            raise RuntimeError(f"the job's outputs cannot be read ({error})") from None

    def _stop(self, process: _Process) -> tuple[int | None, str]:
        """Stop ``process``, no longer the worker's: its exit code and last line; raises
        where close() stopped it with this job on."""
        self._worker._forget(process)
        outcome = process.close()
        if self._worker._closing(process):
            raise RuntimeError("the worker was closed with the job on")
        return outcome


class RuntimeWorker:
    """ONNX Runtime's CPU provider in a child interpreter, kept for many jobs (see the
    module's docstring). ``stop_above``: the bytes of a job's files after which the worker
    is stopped, to give its memory back (None: never); ``timeout``: the seconds a job's
    :meth:`Job.result` waits for its outputs by default (then its interpreter is stopped)."""

    def __init__(self, *, stop_above: int | None = KEEP_WORKER_BELOW,
                 timeout: float = JOB_TIMEOUT) -> None:
        if not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.stop_above = stop_above
        self.timeout = timeout
        self._idle: _Process | None = None  # started, no job
        self._busy: _Process | None = None  # its job not collected yet
        self._closed: set[_Process] = set()  # stopped by close() with a job on
        self._open = False
        self._lock = threading.Lock()
        self.jobs = 0  # given to it so far

    def __enter__(self) -> RuntimeWorker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The process id of its interpreter, None when none is running."""
        process = self._idle or self._busy
        return process.proc.pid if process is not None else None

    def start(self) -> None:
        """Launch the interpreter, unless one is running; it imports while the caller goes
        on. A closed worker opens again."""
        with self._lock:
            self._open = True
            self._drop_foreign()
            if self._idle is None and self._busy is None:
                self._idle = _Process()

    def close(self) -> None:
        """Stop the interpreter, with a job still on in it (that job's result is then an
        error); a job given later runs in a worker of its own."""
        with self._lock:
            idle, busy = self._idle, self._busy
            self._idle = self._busy = None
            self._open = False
            if busy is not None:
                self._closed.add(busy)
        if busy is not None and busy.mine:
            with contextlib.suppress(OSError):
                busy.proc.kill()
            busy.close()
        if idle is not None:
            idle.close()

    def submit(self, model: onnx.ModelProto, feeds: Sequence[Mapping[str, Any]],
               names: Sequence[str], *, optimization: str) -> Job:
        """Run ``names`` of ``model`` on each feed set in a session at ``optimization``
        (disabled, basic, extended, all), once; returns at once. A job given while another
        is on, or to a closed worker, runs in a worker of its own."""
        if optimization not in LEVELS:
            raise ValueError(f"optimization must be one of {', '.join(LEVELS)}, got "
                             f"{optimization!r}")
        dead = process = None
        with self._lock:
            self.jobs += 1
            self._drop_foreign()
            keep = self._open and self._busy is None
            if keep:  # its interpreter, or a new one in place of one that ended meanwhile
                if self._idle is not None and self._idle.proc.poll() is not None:
                    dead, self._idle = self._idle, None
                process = self._idle or _Process()
                self._idle, self._busy = None, process
        if dead is not None:
            dead.close()
        try:
            if process is None:  # a job of its own
                process = _Process()
            folder = temporary_folder_path("runtime-job")
            _JOB_FOLDERS[folder] = os.getpid()
            try:
                write_scratch(model, folder / "model.onnx")
                keys = [{name: f"f{index}_{number}" for number, name in enumerate(feed)}
                        for index, feed in enumerate(feeds)]
                np.savez(folder / "feeds.npz", **{key: np.asarray(feed[name])
                                                  for feed, named in zip(feeds, keys)
                                                  for name, key in named.items()})
                (folder / "feeds.json").write_text(json.dumps(keys))
                size = sum(f.stat().st_size for f in folder.iterdir())
                line = json.dumps([str(folder), optimization, list(names)]) + "\n"
                process.send(line)  # one that died before reading it is replaced by result()
            except BaseException:
                _release_job(folder)
                raise
        except BaseException:
            if process is not None:
                self._forget(process)
                process.close()
            raise
        keep = keep and (self.stop_above is None or size <= self.stop_above)
        return Job(self, process, folder, line, count=len(feeds), keep=keep)

    def run(self, model: onnx.ModelProto, feeds: Sequence[Mapping[str, Any]],
            names: Sequence[str], *, optimization: str, timeout: float | None = None
            ) -> list[dict[str, np.ndarray]]:
        """:meth:`submit`, then its :meth:`Job.result`."""
        return self.submit(model, feeds, names, optimization=optimization).result(timeout)

    def _drop_foreign(self) -> None:
        """In a forked copy of the process that started them, forget the interpreters (they
        are not its children; their owner closes them). Under the lock."""
        for attribute in ("_idle", "_busy"):
            process = getattr(self, attribute)
            if process is not None and not process.mine:
                _LIVE.discard(process)
                setattr(self, attribute, None)

    def _replacement(self, keep: bool) -> _Process:
        """A new interpreter for a job, the worker's own where ``keep``."""
        process = _Process()
        if keep:
            with self._lock:
                if self._busy is None and self._open:
                    self._busy = process
        return process

    def _closing(self, process: _Process) -> bool:
        """Whether close() stopped ``process`` with a job on (once)."""
        with self._lock:
            if process in self._closed:
                self._closed.discard(process)
                return True
            return False

    def _give_back(self, process: _Process) -> bool:
        """``process`` finished its job: kept for the next (True) while the worker is open."""
        with self._lock:
            if self._busy is process and self._open and self._idle is None:
                self._busy, self._idle = None, process
                return True
            return False

    def _forget(self, process: _Process) -> None:
        with self._lock:
            if self._busy is process:
                self._busy = None
