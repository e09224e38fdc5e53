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
- A job given to a closed worker runs in a worker of its own, stopped after it.
- The worker ends when its stdin closes, which its parent's death does too.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from graphfix.model_io import release, temporary_folder_path, write_scratch

__all__ = ["RuntimeWorker", "RuntimeCrash", "Job", "KEEP_WORKER_BELOW"]

# Stopped after a model larger than this (its files), to give its memory back.
KEEP_WORKER_BELOW = 64 * 2**20
# The default wait for one job's outputs, in seconds.
JOB_TIMEOUT = 1800.0


class RuntimeCrash(Exception):
    """ONNX Runtime ended the interpreter that ran a model (a signal: a crash in its C++)."""


# The worker's program: it imports, then takes one job per line of stdin (the job's folder,
# holding the model and the feeds, the optimization level, the output names), writes the
# outputs beside them and answers with a line (a JSON document: {} or {"error": text}).
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
    outputs = {o.name for o in session.get_outputs()}
    wanted = [n for n in names if n in outputs]
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
    try:
        job(*json.loads(line))
        answer = {}
    except Exception as error:
        lines = str(error).strip().splitlines()
        answer = {"error": lines[-1] if lines else type(error).__name__}
    answers.write(json.dumps(answer) + "\\n")
    answers.flush()
"""


# Every worker interpreter not closed yet: those left at exit (a worker whose owner never
# closed it) are closed then, so that no folder of theirs outlives this process. The exit
# handler is registered by the first worker, not at import.
_LIVE: set[_Process] = set()


def _close_left() -> None:
    for process in list(_LIVE):
        with contextlib.suppress(Exception):
            process.close(wait=False)


class _Process:
    """One worker interpreter and its folder (its working directory: ``-c`` puts it first on
    ``sys.path``, where a source checkout would shadow the installed packages; what it prints
    to stderr goes to a log file there)."""

    def __init__(self) -> None:
        self.folder = temporary_folder_path("runtime")
        self.timed_out = False
        try:
            with open(self.folder / "log.txt", "wb") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, "-c", _WORKER], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=log, text=True, cwd=self.folder)
        except BaseException:
            release(self.folder)
            raise
        if not _LIVE:
            atexit.unregister(_close_left)
            atexit.register(_close_left)
        _LIVE.add(self)

    def send(self, line: str) -> bool:
        """Give it a job; False when it died before reading it (a broken pipe)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
            return True
        except OSError:
            return False

    def answer(self, timeout: float) -> dict[str, Any] | None:
        """The job's answer; None when the worker died on the way or ran past ``timeout``
        (then it is killed)."""
        stdout = self.proc.stdout
        assert stdout is not None
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(stdout.readline()),
                                  name="graphfix-runtime-answer", daemon=True)
        reader.start()
        reader.join(timeout)
        if reader.is_alive():
            self.timed_out = True
            self.proc.kill()
            reader.join()
            return None
        try:
            return json.loads(got[0]) if got and got[0].strip() else None
        except ValueError:  # not its answer: it cannot be trusted with another job
            return {"error": f"the worker answered {got[0][:200]!r}", "stop": True}

    def close(self, *, wait: bool = True) -> tuple[int | None, str]:
        """Stop it (it ends when its stdin closes): its exit code (negative: the signal that
        ended it; None when not ``wait``-ing) and the last line it printed to stderr."""
        _LIVE.discard(self)
        code = None
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
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            lines = (self.folder / "log.txt").read_text(errors="replace").strip().splitlines()
        finally:
            release(self.folder)
        return code, lines[-1] if lines else ""


class Job:
    """A job given to a worker (:meth:`RuntimeWorker.submit`); :meth:`result` waits for its
    outputs and frees its files."""

    def __init__(self, worker: RuntimeWorker, process: _Process, folder: Path, *, count: int,
                 sent: bool, keep: bool) -> None:
        self._worker, self._process, self._folder = worker, process, folder
        self._count, self._sent, self._keep = count, sent, keep
        self._outcome: list[dict[str, np.ndarray]] | Exception | None = None

    def result(self, timeout: float = JOB_TIMEOUT) -> list[dict[str, np.ndarray]]:
        """The outputs on each feed set (names ONNX Runtime cannot give are left out).
        Raises :class:`RuntimeCrash` where the worker died of a signal, RuntimeError where
        ONNX Runtime refused the model or no answer came in ``timeout`` seconds."""
        if self._outcome is None:
            try:
                self._outcome = self._collect(timeout)
            except (RuntimeCrash, RuntimeError) as error:
                self._outcome = error
            except BaseException:  # an interrupt while waiting: its answer is lost to it
                self._outcome = RuntimeError("interrupted")
                self._worker._forget(self._process)
                with contextlib.suppress(OSError):
                    self._process.proc.kill()
                self._process.close()
                raise
            finally:
                release(self._folder)
        if isinstance(self._outcome, Exception):
            raise self._outcome
        return self._outcome

    def _collect(self, timeout: float) -> list[dict[str, np.ndarray]]:
        if not self._sent:
            self._worker._forget(self._process)
            self._process.close()
            raise RuntimeError("ONNX Runtime's worker interpreter could not take the job")
        answer = self._process.answer(timeout)
        kept = answer is not None and "stop" not in answer and self._keep and \
            self._worker._give_back(self._process)
        if not kept:
            self._worker._forget(self._process)
            code, last = self._process.close()
            if answer is None:
                if self._process.timed_out:
                    raise RuntimeError(f"no result in {timeout:.0f} s")
                if code is not None and code < 0:
                    raise RuntimeCrash(f"signal {-code}")
                raise RuntimeError(last or f"exit status {code}")
        if "error" in answer:
            raise RuntimeError(answer["error"])
        wanted = json.loads((self._folder / "outputs.json").read_text())
        with np.load(self._folder / "outputs.npz") as stored:
            return [{name: stored[f"r{index}_{number}"] for number, name in enumerate(wanted)}
                    for index in range(self._count)]


class RuntimeWorker:
    """ONNX Runtime's CPU provider in a child interpreter, kept for many jobs (see the
    module's docstring). ``stop_above``: the bytes of a job's files after which the worker
    is stopped, to give its memory back (None: never)."""

    def __init__(self, *, stop_above: int | None = KEEP_WORKER_BELOW) -> None:
        self.stop_above = stop_above
        self._idle: _Process | None = None  # started, no job
        self._busy: _Process | None = None  # its job not collected yet
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
            if self._idle is None and self._busy is None:
                self._idle = _Process()

    def close(self) -> None:
        """Stop the interpreter (one with a job on: once the job is collected); a job given
        later runs in a worker of its own."""
        with self._lock:
            idle, self._idle, self._open = self._idle, None, False
        if idle is not None:
            idle.close()

    def submit(self, model: onnx.ModelProto, feeds: Sequence[Mapping[str, Any]],
               names: Sequence[str], *, optimization: str) -> Job:
        """Run ``names`` of ``model`` on each feed set in a session at ``optimization``
        (disabled, basic, extended, all), once; returns at once. A job given while another
        is on, or to a closed worker, runs in a worker of its own."""
        dead = None
        with self._lock:
            self.jobs += 1
            keep = self._open and self._busy is None
            if keep:  # its interpreter, or a new one in place of one that died meanwhile
                if self._idle is not None and self._idle.proc.poll() is not None:
                    dead, self._idle = self._idle, None
                process = self._idle or _Process()
                self._idle, self._busy = None, process
        if not keep:
            process = _Process()
        if dead is not None:
            dead.close()
        folder = temporary_folder_path("runtime-job")
        try:
            write_scratch(model, folder / "model.onnx")
            keys = [{name: f"f{index}_{number}" for number, name in enumerate(feed)}
                    for index, feed in enumerate(feeds)]
            np.savez(folder / "feeds.npz", **{key: np.asarray(feed[name])
                                              for feed, named in zip(feeds, keys)
                                              for name, key in named.items()})
            (folder / "feeds.json").write_text(json.dumps(keys))
            size = sum(f.stat().st_size for f in folder.iterdir())
        except BaseException:
            release(folder)
            self._forget(process)
            process.close()
            raise
        line = json.dumps([str(folder), optimization, list(names)]) + "\n"
        sent = process.send(line)
        if not sent:  # it died before the job (not of it): once more, in a new interpreter
            self._forget(process)
            process.close()
            process = self._replacement(keep)
            sent = process.send(line)
        keep = keep and (self.stop_above is None or size <= self.stop_above)
        return Job(self, process, folder, count=len(feeds), sent=sent, keep=keep)

    def run(self, model: onnx.ModelProto, feeds: Sequence[Mapping[str, Any]],
            names: Sequence[str], *, optimization: str, timeout: float = JOB_TIMEOUT
            ) -> list[dict[str, np.ndarray]]:
        """:meth:`submit`, then its :meth:`Job.result`."""
        return self.submit(model, feeds, names, optimization=optimization).result(timeout)

    def _replacement(self, keep: bool) -> _Process:
        """A new interpreter for a job, the worker's own where ``keep``."""
        process = _Process()
        if keep:
            with self._lock:
                if self._busy is None and self._open:
                    self._busy = process
        return process

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
