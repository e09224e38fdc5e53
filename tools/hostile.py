"""The slow hostile cases of graphfix: signals in the middle of a run on a large model, a killed
run's leftovers, two runs writing one output, progress without a terminal.

    python tools/hostile.py              # a model of about 0.5 GiB of weights
    python tools/hostile.py --gb 1 --keep

Builds, in a temporary folder, a chain of MatMuls whose weights (float32, ``--gb`` GiB in all) lie
in an external data file, written one matrix at a time with numpy. Each case runs ``graphfix
optimize`` as a child process (``python -m graphfix``, with its own TMPDIR so that its temporary
folders are told apart from anyone else's) and checks what graphfix promises:

- sigint-group: SIGINT to the whole process group (a Ctrl-C: graphfix and its onnxsim worker)
  while onnxsim works; exit code 130, one line ("interrupted"), no traceback;
- sigint-pid / sigterm-pid: SIGINT / SIGTERM to graphfix alone while onnxsim works; exit code
  130 / 143; the worker must follow;
- sighup-group / sighup-writing: SIGHUP (a dropped ssh session) to the process group while
  onnxsim works, and to graphfix while it writes: exit code 129, handled as SIGTERM is;
- sigterm-writing: SIGTERM while the output is being written (temporary files in the output
  folder must go);
- sigterm-parity: SIGTERM while the parity check runs;
- sigkill: SIGKILL while onnxsim works (no cleanup can run): the worker must exit within a few
  seconds (its parent-death signal), and the next run must sweep the dead run's ``graphfix-*``
  folders (their marker's lock is free once their owner is dead);
- sigkill-writing: SIGKILL while the output is written: the next run into the same folder
  must sweep the dead run's staging folder (``.graphfix-*``) there;
- concurrent: two runs on two models (as many bytes of weights, in matrices of another size)
  write one output path at once, three times: each exits 0 or refuses with one line, and what
  is left loads, passes the full checker and computes what one of the two inputs computes (a
  model from one run with the data file of the other would not);
- dev-zero-input / fifo-input: ``graphfix inspect`` on /dev/zero (a file without end; run
  under a 6 GiB address-space limit) and on a FIFO nobody writes to: one clear refusal within
  20 s is expected;
- no-terminal: stderr is a pipe: progress lines must arrive while the run works, not all at the
  end.

For every case: the input model and its data file are unchanged (SHA-256 before and after), no
temporary folder is left in the temp dir (the run's TMPDIR, and /tmp for names with the run's
pid), no new file is left in the output folder (only a complete output after a success), and no
child process of the run is alive a few seconds after it ends (found through /proc).

Prints a table (case, exit code, one line?, traceback?, inputs intact?, leftovers?, seconds)
and exits 1 when a case broke a promise.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

_PROGRESS = re.compile(r"^graphfix: (\[\d+/\d+\] |parity \d+/\d+|writing)")
_WORKER_EXIT_SECONDS = 5.0
# ONNX Runtime 1.31 keeps a session-id file in the temp dir, shared by all its processes.
_NOT_OURS = {".ses"}


# ------------------------------------------------------------------------------ the model
def build_chain(folder: Path, gib: float, *, seed: int = 0, name: str = "big.onnx",
                size: int = 4096) -> Path:
    """``folder/name``: y = x @ W1 @ ... @ Wk (Relu between), x float32 [1, size], the weights
    (about ``gib`` GiB, each size x size, scaled to keep values near 1) in ``name.data``, written
    one matrix at a time."""
    from onnx import TensorProto, helper

    matrix_bytes = size * size * 4
    count = max(1, round(gib * 2**30 / matrix_bytes))
    rng = np.random.default_rng(seed)
    data_name = f"{name}.data"
    initializers, nodes, offset = [], [], 0
    current = "x"
    with open(folder / data_name, "wb") as data:
        for index in range(count):
            weight = rng.standard_normal((size, size), dtype=np.float32)
            weight *= np.float32(1 / math.sqrt(size))
            data.write(weight.tobytes())
            tensor = TensorProto(name=f"w{index}", data_type=TensorProto.FLOAT,
                                 dims=[size, size], data_location=TensorProto.EXTERNAL)
            for key, value in (("location", data_name), ("offset", str(offset)),
                               ("length", str(matrix_bytes))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
            initializers.append(tensor)
            offset += matrix_bytes
            out = "y" if index == count - 1 else f"h{index}"
            product = out if index == count - 1 else f"m{index}"
            nodes.append(helper.make_node("MatMul", [current, f"w{index}"], [product]))
            if index < count - 1:
                nodes.append(helper.make_node("Relu", [product], [out]))
            current = out
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, size])], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    (folder / name).write_bytes(model.SerializeToString())
    return folder / name


# ------------------------------------------------------------------------------ processes
def _children(pid: int) -> list[int]:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as f:
                found += [int(p) for p in f.read().split()]
        except OSError:
            pass
    return found


def descendants(pid: int) -> set[int]:
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in _children(todo.pop()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(2**24), b""):
            digest.update(block)
    return digest.hexdigest()


def _listing(folder: Path) -> set[str]:
    try:
        return {p.name for p in folder.iterdir()}
    except OSError:
        return set()


@dataclasses.dataclass
class Run:
    """One ``graphfix optimize`` child process, its stderr read line by line as it comes."""

    proc: subprocess.Popen
    started: float
    lines: list[tuple[float, str]] = dataclasses.field(default_factory=list)
    seen_children: set[int] = dataclasses.field(default_factory=set)
    ended: float | None = None
    stdout: str = ""

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.lines.append((time.perf_counter(), raw.rstrip("\n")))

    def wait_for(self, pattern: str, timeout: float) -> bool:
        """Poll until a stderr line matches ``pattern`` (children are noted meanwhile)."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            self.seen_children |= descendants(self.proc.pid)
            if any(re.search(pattern, line) for _, line in self.lines):
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.05)
        return False

    def finish(self, timeout: float = 600) -> int:
        while self.proc.poll() is None and time.perf_counter() - self.started < timeout:
            self.seen_children |= descendants(self.proc.pid)
            time.sleep(0.05)
        if self.proc.poll() is None:
            self.proc.kill()
        code = self.proc.wait()
        self.ended = time.perf_counter()
        self.reader.join(timeout=10)
        assert self.proc.stdout is not None
        self.stdout = self.proc.stdout.read()
        return code

    @property
    def stderr(self) -> str:
        return "\n".join(line for _, line in self.lines)


def start(args: list[str], cwd: Path, env: dict[str, str]) -> Run:
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphfix", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    run = Run(proc, time.perf_counter())
    run.reader = threading.Thread(target=run._read, daemon=True)  # type: ignore[attr-defined]
    run.reader.start()  # type: ignore[attr-defined]
    return run


# ------------------------------------------------------------------------------ cases
@dataclasses.dataclass
class Row:
    case: str
    code: int | None
    one_line: bool | None
    traceback: bool
    intact: bool
    leftovers: list[str]
    seconds: float
    notes: list[str] = dataclasses.field(default_factory=list)
    expected_code: int | tuple[int, ...] | None = None

    @property
    def ok(self) -> bool:
        expected = self.expected_code
        code_ok = expected is None or self.code == expected or (
            isinstance(expected, tuple) and self.code in expected)
        return (code_ok and self.one_line is not False and not self.traceback and self.intact
                and not self.leftovers and not any(n.startswith("FAIL") for n in self.notes))


class Bench:
    """The models, the folders and the environment the cases share."""

    def __init__(self, root: Path, gib: float) -> None:
        self.root = root
        self.models = root / "models"
        self.models.mkdir()
        self.tmp = root / "tmp"
        self.tmp.mkdir()
        started = time.perf_counter()
        self.big = build_chain(self.models, gib)
        self.small_a = build_chain(self.models, max(gib / 8, 0.02), seed=1, name="a.onnx",
                                   size=1024)
        # Same bytes of weights, another shape: a model from one run with the data file of the
        # other loads, but computes neither model's function.
        self.small_b = build_chain(self.models, max(gib / 8, 0.02), seed=2, name="b.onnx",
                                   size=512)
        self.build_seconds = time.perf_counter() - started
        self.hashes = self._hashes()
        # The runs use this checkout's graphfix (not an installed copy that may be older).
        self.env = {**os.environ, "TMPDIR": str(self.tmp), "PYTHONUNBUFFERED": "1",
                    "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}

    def _hashes(self) -> dict[str, str]:
        return {p.name: sha256(p) for p in sorted(self.models.iterdir())}

    def intact(self) -> bool:
        return self._hashes() == self.hashes

    def output_folder(self, case: str) -> Path:
        folder = self.root / case
        folder.mkdir()
        return folder

    def leftovers(self, run: Run, out: Path, allowed: set[str]) -> list[str]:
        found = [f"{out.name}/{name}" for name in sorted(_listing(out) - allowed)]
        found += [f"TMPDIR/{name}" for name in sorted(_listing(self.tmp) - _NOT_OURS)]
        pid = f"-{run.proc.pid}-"
        found += [f"/tmp/{name}" for name in sorted(_listing(Path("/tmp")))
                  if name.startswith("graphfix-") and pid in name]
        deadline = time.perf_counter() + _WORKER_EXIT_SECONDS
        living = {p for p in run.seen_children if alive(p)}
        while living and time.perf_counter() < deadline:
            time.sleep(0.1)
            living = {p for p in living if alive(p)}
        found += [f"process {p} still running" for p in sorted(living)]
        return found

    def row(self, case: str, run: Run, code: int, out: Path, *, allowed: set[str] = frozenset(),
            expected_code: int | tuple[int, ...] | None = None,
            notes: list[str] | None = None) -> Row:
        other = [line for _, line in run.lines if line.strip() and not _PROGRESS.match(line)]
        return Row(case, code, len(other) == 1 if code != 0 else not other,
                   "Traceback" in run.stderr + run.stdout, self.intact(),
                   self.leftovers(run, out, set(allowed)), (run.ended or 0) - run.started,
                   list(notes or []) + ([f"stderr: {other[-1][:150]}"] if other else []),
                   expected_code)

    # ------------------------------------------------------------------ signal cases
    def signal_case(self, case: str, signum: int, *, group: bool, when: str,
                    expected: int) -> Row:
        out = self.output_folder(case)
        run = start(["optimize", str(self.big), str(out / "out.onnx")], out, self.env)
        notes = []
        sent = None
        if run.wait_for(when, timeout=600):
            # The passes take seconds; writing and the parity runs after the passes (the
            # original's ran beside them) take a fraction of one.
            time.sleep(0.05 if "writing" in when or "parity" in when else 0.5)
            run.seen_children |= descendants(run.proc.pid)
            sent = time.perf_counter()
            if group:
                os.killpg(run.proc.pid, signum)
            else:
                os.kill(run.proc.pid, signum)
        else:
            notes.append(f"FAIL: never reached {when!r}")
        code = run.finish()
        if sent is not None and run.ended is not None:
            notes.append(f"exited {run.ended - sent:.1f}s after the signal")
        if not run.seen_children and "simplify" in when:
            notes.append("no child process was seen")
        return self.row(case, run, code, out, expected_code=expected, notes=notes)

    def sigkill_case(self, case: str = "sigkill", when: str = r"\] simplify") -> Row:
        out = self.output_folder(case)
        run = start(["optimize", str(self.big), str(out / "out.onnx")], out, self.env)
        notes = []
        if not run.wait_for(when, timeout=600):
            notes.append(f"FAIL: never reached {when!r}")
        time.sleep(0.05 if "writing" in when else 0.5)
        run.seen_children |= descendants(run.proc.pid)
        os.kill(run.proc.pid, signal.SIGKILL)
        code = run.finish()
        dead_pid = f"-{run.proc.pid}-"
        # The worker must die with its parent (PR_SET_PDEATHSIG), within a few seconds.
        deadline = time.perf_counter() + _WORKER_EXIT_SECONDS
        while any(alive(p) for p in run.seen_children) and time.perf_counter() < deadline:
            time.sleep(0.1)
        stuck = sorted(p for p in run.seen_children if alive(p))
        if stuck:
            notes.append(f"FAIL: worker(s) {stuck} alive {_WORKER_EXIT_SECONDS:g}s after SIGKILL")
        left_by_kill = sorted(n for n in _listing(self.tmp) if dead_pid in n)
        notes.append(f"killed run left {len(left_by_kill)} temp folder(s)")
        partial = sorted(_listing(out))
        # The next run (a small model, quick) must sweep the dead run's folders.
        # Into the same folder: it sweeps the dead run's staging folder there too.
        second = start(["optimize", str(self.small_a), str(out / "next.onnx"), "-q"], out,
                       self.env)
        second_code = second.finish()
        remaining = sorted(n for n in _listing(self.tmp) if dead_pid in n)
        remaining += sorted(n for n in _listing(out) if n.startswith(".graphfix-"))
        partial = [n for n in partial if not n.startswith(".graphfix-")]
        if second_code != 0:
            notes.append(f"FAIL: the next run exited {second_code}: {second.stderr[-200:]}")
        if remaining:
            notes.append(f"FAIL: the next run did not sweep {remaining}")
        if partial:
            notes.append(f"FAIL: the killed run left {partial} in the output folder")
        row = self.row(case, run, code, out, allowed={"next.onnx", "next.onnx.data", *partial},
                       expected_code=-signal.SIGKILL, notes=notes)
        row.one_line = None  # nothing can print after SIGKILL
        return row

    # ------------------------------------------------------------------ endless inputs
    def endless_input_case(self, case: str, source: str) -> Row:
        """``graphfix inspect`` on a file that never ends (/dev/zero, under a 6 GiB address-space
        limit so that it cannot take the machine's memory) or never starts (a FIFO nobody writes
        to): one clear refusal at once is expected, within 20 s."""
        out = self.output_folder(case)
        if source == "fifo":
            path = out / "pipe.onnx"
            os.mkfifo(path)
        else:
            path = Path(source)

        # The limit is set in the child itself (no preexec_fn: this process runs threads).
        limited = ("import resource, runpy, sys; "
                   f"resource.setrlimit(resource.RLIMIT_AS, ({6 * 2**30}, {6 * 2**30})); "
                   "sys.argv = ['graphfix', 'inspect', sys.argv[1]]; "
                   "runpy.run_module('graphfix', run_name='__main__')")
        command = ([sys.executable, "-c", limited, str(path)] if source != "fifo" else
                   [sys.executable, "-m", "graphfix", "inspect", str(path)])
        proc = subprocess.Popen(
            command, cwd=out, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True)
        run = Run(proc, time.perf_counter())
        run.reader = threading.Thread(target=run._read, daemon=True)  # type: ignore[attr-defined]
        run.reader.start()  # type: ignore[attr-defined]
        code = run.finish(timeout=20)
        notes = ["FAIL: still running after 20 s (killed)"] if code == -signal.SIGKILL else []
        return self.row(case, run, code, out, allowed={"pipe.onnx"}, expected_code=1,
                        notes=notes)

    # ------------------------------------------------------------------ concurrent writers
    def concurrent_case(self, rounds: int = 3) -> Row:
        case = "concurrent"
        out = self.output_folder(case)
        notes, codes_seen, one_line, traceback, leftovers = [], [], True, False, set()
        started = time.perf_counter()
        for _ in range(rounds):
            runs = [start(["optimize", str(src), str(out / "out.onnx"), "-q"], out, self.env)
                    for src in (self.small_a, self.small_b)]
            codes = [run.finish() for run in runs]
            codes_seen += codes
            verdict = self._which_model(out / "out.onnx") if (out / "out.onnx").exists() else (
                "no output")
            notes.append(f"exit codes {codes}, out.onnx computes {verdict}")
            if verdict not in ("a.onnx", "b.onnx"):
                notes.append("FAIL: the output is not one of the two inputs' models")
            one_line &= all(c == 0 or len([ln for _, ln in r.lines if ln.strip()]) == 1
                            for c, r in zip(codes, runs))
            traceback |= any("Traceback" in r.stderr for r in runs)
            for run in runs:
                leftovers |= set(self.leftovers(run, out, {"out.onnx", "out.onnx.data"}))
        if not all(c in (0, 1) for c in codes_seen):
            notes.append(f"FAIL: unexpected exit codes {codes_seen}")
        return Row(case, max(codes_seen), one_line, traceback, self.intact(), sorted(leftovers),
                   time.perf_counter() - started, notes)

    def _which_model(self, path: Path) -> str:
        import onnx
        import onnxruntime as ort

        try:
            onnx.checker.check_model(str(path), full_check=True)
        except Exception as err:  # noqa: BLE001
            return f"fails the checker ({str(err).splitlines()[0][:80]})"
        options = ort.SessionOptions()
        options.log_severity_level = 4
        try:
            written = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            width = written.get_inputs()[0].shape[1]
            feeds = {"x": np.random.default_rng(5).uniform(-1, 1, (1, width)).astype(np.float32)}
            got = written.run(None, feeds)[0]
        except Exception as err:  # noqa: BLE001
            return f"does not load in ORT ({str(err).splitlines()[0][:80]})"
        for src in (self.small_a, self.small_b):
            session = ort.InferenceSession(str(src), options, providers=["CPUExecutionProvider"])
            if session.get_inputs()[0].shape != [1, feeds["x"].shape[1]]:
                continue
            if np.allclose(got, session.run(None, feeds)[0], rtol=1e-4, atol=1e-5):
                return src.name
        return "neither input (a model from one run with the other's data?)"

    # ------------------------------------------------------------------ no terminal
    def no_terminal_case(self) -> Row:
        case = "no-terminal"
        out = self.output_folder(case)
        run = start(["optimize", str(self.big), str(out / "out.onnx")], out, self.env)
        code = run.finish()
        assert run.ended is not None
        progress = [(t, line) for t, line in run.lines if _PROGRESS.match(line)]
        notes = [f"{len(progress)} progress line(s)"]
        if progress:
            first = progress[0][0] - run.started
            before_end = run.ended - progress[0][0]
            spread = progress[-1][0] - progress[0][0]
            notes.append(f"first after {first:.1f}s, {before_end:.1f}s before the end, "
                         f"spread over {spread:.1f}s")
            if before_end < 1.0 or spread < 1.0:
                notes.append("FAIL: progress lines arrive only at the end")
        else:
            notes.append("FAIL: no progress line on a piped stderr")
        return self.row(case, run, code, out, allowed={"out.onnx", "out.onnx.data"},
                        expected_code=0, notes=notes)


# ------------------------------------------------------------------------------ report
def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    return str(value)


def print_table(rows: list[Row]) -> None:
    header = ["case", "exit", "one line?", "traceback?", "inputs intact?", "leftovers?",
              "seconds", "verdict"]
    table = [[r.case, _cell(r.code), _cell(r.one_line), "YES" if r.traceback else "no",
              _cell(r.intact), ", ".join(r.leftovers) or "none", f"{r.seconds:.1f}",
              "ok" if r.ok else "BROKEN"] for r in rows]
    widths = [max(len(str(x)) for x in column) for column in zip(header, *table)]
    for line in [header, ["-" * w for w in widths], *table]:
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip())
    print()
    for r in rows:
        expected = f" (expected exit {r.expected_code})" if r.expected_code is not None else ""
        print(f"{r.case}{expected}: " + "; ".join(r.notes))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gb", type=float, default=0.5, help="weights of the large model, GiB")
    parser.add_argument("--folder", default=None, help="where to build (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the folder afterwards")
    parser.add_argument("--cases", default=None,
                        help="comma-separated subset of: sigint-group, sigint-pid, sigterm-pid, "
                             "sighup-group, sighup-writing, sigterm-writing, sigterm-parity, "
                             "sigkill, sigkill-writing, concurrent, dev-zero-input, fifo-input, "
                             "no-terminal")
    options = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="hostile-", dir=options.folder))
    try:
        bench = Bench(root, options.gb)
        weight_gib = sum(p.stat().st_size for p in bench.models.glob("big.onnx*")) / 2**30
        print(f"models built in {bench.build_seconds:.1f}s in {root} (large model: "
              f"{weight_gib:.2f} GiB)\n", flush=True)
        cases = {
            "sigint-group": lambda: bench.signal_case(
                "sigint-group", signal.SIGINT, group=True, when=r"\] simplify", expected=130),
            "sigint-pid": lambda: bench.signal_case(
                "sigint-pid", signal.SIGINT, group=False, when=r"\] simplify", expected=130),
            "sigterm-pid": lambda: bench.signal_case(
                "sigterm-pid", signal.SIGTERM, group=False, when=r"\] simplify", expected=143),
            "sighup-group": lambda: bench.signal_case(
                "sighup-group", signal.SIGHUP, group=True, when=r"\] simplify", expected=129),
            "sighup-writing": lambda: bench.signal_case(
                "sighup-writing", signal.SIGHUP, group=False, when=r"\] writing",
                expected=129),
            "sigterm-writing": lambda: bench.signal_case(
                "sigterm-writing", signal.SIGTERM, group=False, when=r"\] writing",
                expected=143),
            "sigterm-parity": lambda: bench.signal_case(
                "sigterm-parity", signal.SIGTERM, group=False, when=r"parity \d", expected=143),
            "sigkill": bench.sigkill_case,
            "sigkill-writing": lambda: bench.sigkill_case("sigkill-writing", r"\] writing"),
            "concurrent": bench.concurrent_case,
            "dev-zero-input": lambda: bench.endless_input_case("dev-zero-input", "/dev/zero"),
            "fifo-input": lambda: bench.endless_input_case("fifo-input", "fifo"),
            "no-terminal": bench.no_terminal_case,
        }
        chosen = options.cases.split(",") if options.cases else list(cases)
        rows = []
        for name in chosen:
            print(f"running {name} ...", file=sys.stderr, flush=True)
            rows.append(cases[name]())
            for leftover in list(bench.tmp.iterdir()):  # each case starts from a clean TMPDIR
                if leftover.is_dir():
                    shutil.rmtree(leftover, ignore_errors=True)
                else:
                    leftover.unlink()
        print_table(rows)
        return 0 if all(r.ok for r in rows) else 1
    finally:
        if options.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
