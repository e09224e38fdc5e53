"""onnxsim in a worker interpreter: a crash in its C++ cannot take graphfix down.

:class:`OnnxsimWorker` owns one child interpreter (``sys.executable``) with onnxsim imported.
Its life has an owner: :meth:`~OnnxsimWorker.start` launches it and returns at once (it imports
while the caller goes on), :meth:`~OnnxsimWorker.run` gives it one job, :meth:`~OnnxsimWorker.close`
stops it; it is a context manager. Nothing starts at import time. The model crosses as files in
a job folder: the parent writes it with its weights in a data file beside it, onnxsim reads the
file and writes its output in C++ (``simplify(path, output_path=...)``), so the model is never
serialized into one message on either side.

- A worker that dies (an exception is not a death: it comes back as text) is replaced at the
  next job; one that simplified a model over 64 MiB (the files that crossed to it:
  ``stop_above``) is stopped, so that its memory goes back, and started again when next
  needed.
- The worker's command line is this interpreter running :data:`WORKER_CODE`; another
  (``command``) can run it: the interpreter of an environment with another onnxsim, or a
  wrapper that bounds the worker's resources (``prlimit --as=...``).
- The worker exits when its parent dies, even in the middle of a job: on Linux the kernel
  kills it (``PR_SET_PDEATHSIG``), elsewhere a thread of its own sees it lose its parent.
- ``import onnxsim`` pulls in torch and sympy when they are installed, for features
  simplification never uses (about 1.9 s of its 2.1 s import): the worker makes those imports
  fail at once.
- The worker starts in a folder of its own: ``-c`` puts the working directory first on
  ``sys.path``, where a source checkout would shadow the installed package.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, Union

from graphfix.errors import PassError, first_line
from graphfix.model_io import PROTOBUF_LIMIT, release, temporary_folder_path, weight_bytes
from graphfix.options import FOLD_ALLOWANCE, growth_limit

__all__ = ["OnnxsimWorker", "Outcome", "Output", "Budget", "stable_choice", "KEEP_WORKER_BELOW",
           "WORKER_CODE"]

logger = logging.getLogger(__name__)

# Stopped after a model larger than this, to give its memory back (the default of
# OnnxsimWorker's ``stop_above``).
KEEP_WORKER_BELOW = 64 * 2**20
# What the worker's interpreter runs (``python -c WORKER_CODE``): its entry point.
WORKER_CODE = "from graphfix.passes._onnxsim_worker import worker_main; worker_main()"
_UNUSED_BY_ONNXSIM = ("torch", "sympy")
_PR_SET_PDEATHSIG = 1

# The output of each attempt run, or why there is none.
Outcome = Union[list["Output"], str]


def _folder_bytes(folder: Path) -> int:
    """The bytes of the files in ``folder``: a model and its external data."""
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


class Output(NamedTuple):
    """One attempt's model file, the bytes its tensors hold and the bytes of its files."""

    path: Path
    tensor_bytes: int
    file_bytes: int

    def fits(self, limit: int) -> bool:
        """Its tensors within ``limit`` bytes, the whole in one protobuf message."""
        return self.tensor_bytes <= limit and self.file_bytes < PROTOBUF_LIMIT


class Budget(NamedTuple):
    """The growth policy an output is held to: its tensors within ``limit`` bytes, counting
    ``extra`` bytes of tensors that did not cross (they come back as they are); ``max_growth``
    gives the limit of a model of any size (:func:`graphfix.options.growth_limit`), never more
    than what can cross in one protobuf message besides those; ``room``: the bytes the run
    saved before (:func:`graphfix.registry.room`), which a fold may spend under the default
    policy (never bigger; None: not held to a size). A second run would have none:
    :meth:`limit_of` counts none."""

    limit: int
    extra: int = 0
    max_growth: float | None = None
    held: bool = False  # to the run's size (a room was given)
    allowance: int = FOLD_ALLOWANCE  # what a held fold may add whatever the room

    @classmethod
    def of(cls, size: int, extra: int, max_growth: float | None,
           room: int | None = None, allowance: int = FOLD_ALLOWANCE) -> Budget:
        """The budget of a model whose tensors hold ``size`` bytes, ``extra`` of them kept."""
        return cls(growth_limit(size, max_growth, PROTOBUF_LIMIT + extra, room, allowance),
                   extra, max_growth, room is not None, allowance)

    def limit_of(self, size: int) -> int:
        return growth_limit(size, self.max_growth, PROTOBUF_LIMIT + self.extra,
                            0 if self.held else None, self.allowance)


def stable_choice(outputs: list[Output], budget: Budget, attempts: int) -> Output | None:
    """The bounded output to take (outputs after the first, of ``attempts`` in all), the one
    folding the most within the budget, and stable: taken as a model of its own, the larger
    folds it refused would still not fit its own limit, so that a second run refuses them
    again. Without constant folding (the last attempt) the output is stable by construction.
    Each output is judged on those before it alone, so attempts can stop at the first one
    chosen."""
    for position, output in enumerate(outputs[1:], start=1):
        if not output.fits(budget.limit):
            continue
        own = budget.limit_of(output.tensor_bytes)
        if position == attempts - 1 or not any(bigger.fits(own) for bigger in outputs[:position]):
            return output
    return None


def _simplify_job(in_path: str, out_paths: list[str], err_path: str,
                  attempts: list[dict[str, Any]], budget: Budget) -> None:
    """Runs in the worker: onnxsim on the model file with each option set of ``attempts`` in
    turn, until the first output fits the budget or a later one is the :func:`stable_choice`.
    Attempt ``i`` writes to ``out_paths[i]`` in a folder of its own, beside it ``sizes.json``:
    its tensor bytes (the budget's extra included) and file bytes. An exception is written to
    ``err_path`` as text."""
    try:
        import onnxsim

        outputs: list[Output] = []
        for index, kwargs in enumerate(attempts):
            out = Path(out_paths[index])
            out.parent.mkdir()
            # Structure only: the weights stay in the files onnxsim wrote.
            simplified, _ = onnxsim.simplify(in_path, check_n=0, output_path=str(out), **kwargs)
            output = Output(out, weight_bytes(simplified) + budget.extra,
                            _folder_bytes(out.parent))
            (out.parent / "sizes.json").write_text(json.dumps(output[1:]))
            outputs.append(output)
            if outputs[0].fits(budget.limit) or (
                    index and stable_choice(outputs, budget, len(attempts))):
                break
    except Exception as error:  # noqa: BLE001 - everything goes back to the parent as text
        traceback.print_exc()  # the whole trace to the worker's log
        with open(err_path, "w", encoding="utf-8") as err:  # what failed, for its message
            err.write("".join(traceback.format_exception_only(type(error), error)))


def _die_with_parent() -> None:
    """Exit when the parent dies: the kernel's signal on Linux, a watching thread anywhere."""
    parent = os.getppid()
    with contextlib.suppress(Exception):
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it died before the signal was asked for
        os._exit(1)

    def watch() -> None:
        while True:
            threading.Event().wait(0.5)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="graphfix-parent-watch", daemon=True).start()


def worker_main() -> None:
    """Entry point of the worker interpreter: one job (a JSON document) per line of stdin,
    answered with a line on the original stdout once its files are written; ends when stdin
    closes. What onnxsim and ONNX print goes to the job's log file (fd 1 and 2), so that a
    crash message reaches the parent and nothing printed can garble the answers."""
    _die_with_parent()
    for name in _UNUSED_BY_ONNXSIM:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # import fails fast
    import onnxsim  # noqa: F401 - paid once per worker, before the first job

    answers = os.fdopen(os.dup(1), "w", encoding="ascii")
    for line in sys.stdin:
        job = json.loads(line)
        log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        _simplify_job(job["in"], job["outs"], job["err"], job["attempts"], Budget(*job["budget"]))
        sys.stdout.flush()
        sys.stderr.flush()
        answers.write("done\n")
        answers.flush()


class _Process:
    """One worker interpreter (``command``) and its folder."""

    def __init__(self, command: Sequence[str]) -> None:
        self.folder = temporary_folder_path("onnxsim")
        # onnxsim's own temporary folders go inside the worker's: a signal that kills the
        # worker before onnxsim removes one leaves it where graphfix's sweep finds it, not
        # loose in TMPDIR (an absolute path: the worker runs in its folder).
        env = {**os.environ, "TMPDIR": os.path.abspath(self.folder / "tmp")}
        try:
            (self.folder / "tmp").mkdir()
            with open(self.folder / "start.log", "wb") as log:
                self.proc = subprocess.Popen(
                    list(command), env=env,
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=self.folder,
                )
        except BaseException as error:  # a signal while starting too: the folder goes
            release(self.folder)
            if isinstance(error, (FileNotFoundError, PermissionError)) and (
                    error.filename == command[0]):  # the program itself
                raise PassError(f"onnxsim worker: cannot run {command[0]!r} ({error.strerror})",
                                hint="give OnnxsimWorker a command that runs WORKER_CODE"
                                ) from None
            raise
        _track(self)

    def run(self, job: dict[str, Any]) -> bool:
        """Send ``job``; True once it is done, False when the worker died on the way."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(job).encode() + b"\n")
            self.proc.stdin.flush()
            return self.proc.stdout.readline() == b"done\n"
        except OSError:  # a broken pipe: it died before reading the job
            return False

    def start_log(self) -> str:
        return (self.folder / "start.log").read_text(errors="replace")

    def close(self, *, wait: bool = True) -> int | None:
        """Stop the worker (it ends when its stdin closes); its exit code, or None when not
        ``wait``-ing for it (it is then reaped by :meth:`reaped`)."""
        code = None
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            if wait:
                code = self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            code = self.proc.wait()
        finally:  # a signal while waiting too: the folder goes, the worker dies with its parent
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            release(self.folder)
            _LIVE.discard(self)
        return code

    def reaped(self, *, wait: bool) -> bool:
        """Whether a worker stopped without waiting has exited (``wait``: wait for it)."""
        try:
            return self.proc.wait(timeout=10 if wait else 0) is not None
        except subprocess.TimeoutExpired:
            if wait:
                self.proc.kill()
                self.proc.wait()
            return wait


# Every worker process not closed yet: those left at exit (a worker whose owner never closed
# it) are closed then, so that no folder of theirs outlives this process. The exit handler is
# registered by the first worker, not at import.
_LIVE: set[_Process] = set()
_AT_EXIT: list[bool] = []


def _close_left_workers() -> None:
    for process in list(_LIVE):
        with contextlib.suppress(Exception):
            process.close(wait=False)


def _track(process: _Process) -> None:
    if not _AT_EXIT:
        atexit.register(_close_left_workers)
        _AT_EXIT.append(True)
    _LIVE.add(process)


class OnnxsimWorker:
    """A child interpreter with onnxsim imported, started and stopped by its owner.

    Once closed, a worker starts again only when its owner says so (:meth:`start`); a job given
    to a closed worker runs in a worker of its own, stopped when the job ends, so that nothing
    outlives a close.

    ``command``: the worker's command line; by default this interpreter running
    :data:`WORKER_CODE` (``[sys.executable, "-c", WORKER_CODE]``). Another must run
    :data:`WORKER_CODE` with this graphfix importable: the interpreter of an environment with
    another onnxsim, or a wrapper that bounds the worker's memory or CPU time (``["prlimit",
    "--as=8000000000", sys.executable, "-c", WORKER_CODE]``). A worker that dies, however it
    dies, makes the pass skip with the reason.

    ``stop_above``: after a model whose files (the model and its data file, as they crossed
    to the worker) hold more bytes than this, the worker is stopped so that its memory goes back to the system, and started
    again when next needed (:meth:`resume`); lower it where memory is short, raise it (or
    ``None``: never stopped) where many large models are simplified in turn and the
    interpreter's start is the cost."""

    def __init__(self, *, command: Sequence[str] | None = None,
                 stop_above: int | None = KEEP_WORKER_BELOW) -> None:
        if command is not None and (isinstance(command, (str, bytes)) or not isinstance(
                command, Sequence) or not command or not all(
                isinstance(part, str) and part for part in command)):
            raise PassError(f"onnxsim worker: command must be a list of strings (the program "
                            f"and its arguments), got {command!r}")
        if stop_above is not None and (isinstance(stop_above, bool) or not isinstance(
                stop_above, int) or stop_above < 0):
            raise PassError(f"onnxsim worker: stop_above must be a number of bytes (0 or more) "
                            f"or None, got {stop_above!r}")
        self.command: tuple[str, ...] = (
            (sys.executable, "-c", WORKER_CODE) if command is None else tuple(command))
        self.stop_above = stop_above
        self._process: _Process | None = None
        self._stopping: list[_Process] = []  # stopped without waiting for them to exit
        self._lock = threading.Lock()
        self._closed = False

    def start(self) -> None:
        """Launch the worker if none runs; returns at once (it imports in the background)."""
        with self._lock:
            self._closed = False
            if self._process is None:
                self._process = _Process(self.command)

    def resume(self) -> None:
        """Start the worker again when it was stopped to give its memory back, so that it
        imports while its owner goes on; a worker its owner closed stays closed."""
        with self._lock:
            if self._closed or self._process is not None:
                return
            self._process = _Process(self.command)

    def close(self) -> None:
        """Stop the worker, if one runs, and wait for every one stopped before."""
        with self._lock:
            self._closed = True
            process, self._process = self._process, None
            stopping, self._stopping = self._stopping, []
        if process is not None:
            process.close()
        for old in stopping:
            old.reaped(wait=True)

    def __enter__(self) -> OnnxsimWorker:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def simplify(self, folder: Path, attempts: list[dict[str, Any]], budget: Budget) -> Outcome:
        """onnxsim on ``folder/in.onnx`` with each option set of ``attempts`` in turn, until
        the first output fits the budget or a later one is its :func:`stable_choice`: the
        :class:`Output` of each attempt run (files in ``folder``), or a one-line reason it
        failed."""
        err_path, log_path = folder / "err.txt", folder / "log.txt"
        out_paths = [str(folder / f"out{i}" / "model.onnx") for i in range(len(attempts))]
        job = {"in": str(folder / "in.onnx"), "outs": out_paths, "err": str(err_path),
               "log": str(log_path), "attempts": attempts, "budget": list(budget)}
        if self._closed:  # its owner closed it: a worker for this job alone
            with OnnxsimWorker(command=self.command, stop_above=self.stop_above) as worker:
                return worker.simplify(folder, attempts, budget)
        self.start()
        with self._lock:
            process = self._process
            assert process is not None
            done = process.run(job)
            if not done or (self.stop_above is not None
                            and _folder_bytes(folder) > self.stop_above):
                self._process = None  # replaced, or started again when next needed
        if not done:
            text = log_path.read_text(errors="replace") if log_path.exists() else (
                process.start_log())
            code = process.close()
            lines = [ln for ln in text.strip().splitlines() if ln.strip()]
            logger.debug("simplify worker output: %s", text[-2000:])
            return f"onnxsim crashed (worker exit code {code})" + (
                f": {lines[-1]}" if lines else "")
        if self._process is None:
            process.close(wait=False)  # its memory goes back as it exits; nobody waits for that
            with self._lock:
                self._stopping = [p for p in self._stopping if not p.reaped(wait=False)]
                self._stopping.append(process)
        if err_path.exists():
            # the exception's message, its lines joined (onnx's checker writes one sentence
            # over three lines: the node it names in the middle one)
            text = " ".join(err_path.read_text(errors="replace").split())
            text = text.split(": ", 1)[1] if ": " in text[:80] else text  # its type goes
            return f"onnxsim failed: {first_line(RuntimeError(text)) if text else 'unknown error'}"
        if not os.path.exists(out_paths[0]):
            return "onnxsim wrote no model"
        outputs = []
        for path in map(Path, out_paths):
            sizes = path.parent / "sizes.json"
            if sizes.exists():
                outputs.append(Output(path, *json.loads(sizes.read_text())))
        return outputs
