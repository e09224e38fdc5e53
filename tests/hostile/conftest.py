"""Shared helpers of the hostile-input tests (tests/hostile only).

Each case runs graphfix's command line in-process (click's CliRunner, for speed) through the
``gf`` fixture, which checks what graphfix promises for every input, good or bad:

- a refusal is exit code 1 with exactly one line starting with ``error:`` on stderr (progress
  lines aside), a usage error exit code 2 with click's ``Usage:``/``Error:`` text;
- never a Python traceback (an exception escaping the command counts as one: the real
  ``graphfix`` would print it);
- no file in the watched folders changed, none appeared after a refusal, no temporary file is
  left after a success (only the outputs asked for appear);
- no temporary folder of this process (``graphfix-<role>-<pid>-*``) is left in the system temp
  dir, nor any ``graphfix-*`` folder in the test's own TMPDIR (set for every test, outside its
  folder, holding files and a ``graphfix-results-2024-06`` folder that are not graphfix's: they
  must come out unchanged);
- nothing reaches the process's own stderr (file descriptor 2, captured with ``capfd``):
  ONNX Runtime's log lines must not be printed unless ``-vv``;
- a model graphfix writes loads in ONNX Runtime (CPU), passes
  ``onnx.checker.check_model(full_check=True)`` and computes what the input computes on seeded
  inputs.

Models are small and built in code (``onnx.helper`` / ``onnx.parser``); helpers that build them
live here too. Import nothing from this file: the suite runs with ``--import-mode=importlib``,
so everything is reached through the ``gf`` fixture (``gf.models.matmul()``, ``gf.write(...)``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import stat
import subprocess
import sys
import tempfile
import time
import traceback
import types
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from graphfix.cli import cli

# Progress lines graphfix prints on a stderr that is not a terminal.
_PROGRESS = re.compile(
    r"^graphfix: (\[\d+/\d+\] |parity, (reference on )?input set \d+/\d+|writing)")
# ONNX Runtime's own log lines ("2025-01-01 ... [W:onnxruntime:, ...]" or "[E:onnxruntime:...").
_ORT_LOG = re.compile(r"\[[VIWEF]:onnxruntime")


# ------------------------------------------------------------------------------ models
def _finish(graph: onnx.GraphProto, opset: int = 17, ir: int = 8) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="hostile")
    model.ir_version = ir
    return model


def matmul(n: int = 16, *, dims: Sequence[Any] | None = None, ir: int = 8,
           opset: int = 17) -> onnx.ModelProto:
    """y = Relu(x @ w + b), x [1, n] (or ``dims``), w [n, n] float32 weights."""
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((n, n)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "b")
    dims = [1, n] if dims is None else list(dims)
    out_dims = dims[:-1] + [n]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["t"]),
         helper.make_node("Add", ["t", "b"], ["u"]),
         helper.make_node("Relu", ["u"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_dims)], [w, b])
    return _finish(graph, opset, ir)


def two_weights(n: int = 16) -> onnx.ModelProto:
    """y = (x @ w1) @ w2: two weight tensors (to share one data file)."""
    rng = np.random.default_rng(2)
    w1 = numpy_helper.from_array(rng.standard_normal((n, n)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((n, n)).astype(np.float32), "w2")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["t"]),
         helper.make_node("MatMul", ["t", "w2"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])], [w1, w2])
    return _finish(graph)


def nhwc(elem_type: int = TensorProto.FLOAT, dims: Sequence[Any] = (1, 4, 4, 3),
         middle: str | None = "Relu", opset: int = 17) -> onnx.ModelProto:
    """Transpose(NHWC->NCHW) -> middle -> Transpose back: the shape eliminate-transposes
    removes. ``middle`` None: the two Transposes meet directly."""
    perm_in, perm_out = [0, 3, 1, 2], [0, 2, 3, 1]
    if len(dims) != 4:
        perm_in = perm_out = list(reversed(range(len(dims))))
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=perm_in)]
    last = "t"
    if middle:
        nodes.append(helper.make_node(middle, ["t"], ["m"]))
        last = "m"
    nodes.append(helper.make_node("Transpose", [last], ["y"], perm=perm_out))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", elem_type, list(dims))],
        [helper.make_tensor_value_info("y", elem_type, list(dims))])
    return _finish(graph, opset)


def parse(text: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(text)


MODELS = types.SimpleNamespace(matmul=matmul, two_weights=two_weights, nhwc=nhwc, parse=parse,
                               finish=_finish)


# ------------------------------------------------------------------------------ files
def write(folder: Path, model: onnx.ModelProto, name: str = "m.onnx", *,
          location: str | None = None) -> Path:
    """Write ``model`` to ``folder/name``; with ``location``, every tensor's data goes to that
    file (relative to ``folder``). Returns the model's path."""
    path = folder / name
    if location is None:
        path.write_bytes(model.SerializeToString())
    else:
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        onnx.save(copy, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                  location=location, size_threshold=0)
    return path


def external_entries(model: onnx.ModelProto, name: str | None = None) -> dict[str, Any]:
    """The external_data entries of initializer ``name`` (the first when None), by key, as the
    protobuf entries themselves (set ``.value`` to change one)."""
    tensor = next(t for t in model.graph.initializer if name is None or t.name == name)
    return {entry.key: entry for entry in tensor.external_data}


def set_external(model: onnx.ModelProto, name: str | None = None, **fields: str) -> None:
    """Set (or add) external_data fields of initializer ``name``."""
    tensor = next(t for t in model.graph.initializer if name is None or t.name == name)
    existing = {entry.key: entry for entry in tensor.external_data}
    for key, value in fields.items():
        if key in existing:
            existing[key].value = value
        else:
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value


def snapshot(*folders: Path) -> dict[str, tuple]:
    """Every entry under ``folders`` (links not followed): a file by its content hash and mode,
    a link by its target, a folder by its mode."""
    found: dict[str, tuple] = {}
    for folder in folders:
        if not folder.exists():
            continue
        for root, dirs, files in os.walk(folder, followlinks=False):
            for name in dirs + files:
                path = Path(root) / name
                try:
                    info = path.lstat()
                except OSError:
                    continue
                if stat.S_ISLNK(info.st_mode):
                    found[str(path)] = ("link", os.readlink(path))
                elif stat.S_ISREG(info.st_mode):
                    try:
                        digest = hashlib.sha256(path.read_bytes()).hexdigest()
                    except OSError:  # unreadable (chmod 000): size and time stand in
                        digest = f"unreadable {info.st_size} {info.st_mtime_ns}"
                    found[str(path)] = ("file", digest, stat.S_IMODE(info.st_mode))
                elif stat.S_ISDIR(info.st_mode):
                    found[str(path)] = ("dir", stat.S_IMODE(info.st_mode))
                else:
                    found[str(path)] = ("special", stat.S_IFMT(info.st_mode))
    return found


def own_temporaries() -> set[str]:
    """graphfix's temporary folders of this process in the system temp dir."""
    prefix = f"-{os.getpid()}-"
    try:
        return {p.name for p in Path(tempfile.gettempdir()).iterdir()
                if p.name.startswith("graphfix-") and prefix in p.name}
    except OSError:
        return set()


# ------------------------------------------------------------------------------ checks
def _feed_for(value: onnx.ValueInfoProto, rng: np.random.Generator, size: int) -> Any:
    kind = value.type.WhichOneof("value")
    if kind == "sequence_type":
        elem = value.type.sequence_type.elem_type.tensor_type
        return [_tensor(elem, rng, size) for _ in range(2)]
    return _tensor(value.type.tensor_type, rng, size)


def _tensor(tensor_type: onnx.TypeProto.Tensor, rng: np.random.Generator, size: int) -> Any:
    dims = [d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else size
            for d in tensor_type.shape.dim]
    dtype = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
    if tensor_type.elem_type == TensorProto.STRING:
        return rng.choice(np.array(["a", "bb", "ccc"], dtype=object), size=dims)
    if tensor_type.elem_type == TensorProto.BOOL:
        return rng.random(dims) < 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 5, size=dims).astype(dtype)
    return rng.uniform(-1, 1, size=dims).astype(dtype)


def seeded_feeds(model: onnx.ModelProto, seed: int = 0, size: int = 3) -> dict[str, Any]:
    """Seeded inputs for ``model``: dynamic dimensions (names, -1, unknown) get ``size``."""
    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    return {v.name: _feed_for(v, rng, size) for v in model.graph.input
            if v.name not in initializers}


def ort_outputs(path: Path, feeds: dict[str, Any]) -> dict[str, Any]:
    """Outputs of the model file at ``path`` on ONNX Runtime's CPU provider, optimizations
    off, by name."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, {k: v for k, v in feeds.items() if k in wanted})))


def ort_session(path: Path) -> Any:
    """An ONNX Runtime CPU session of the model file at ``path`` (raises when ORT refuses it)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def assert_same_function(original: Path, written: Path, seeds: Iterable[int] = (0, 1),
                         sizes: Iterable[int] = (3,), *, full_check: bool | None = True) -> None:
    """``written`` loads in ORT, passes the full checker, and computes what ``original``
    computes on seeded inputs. ``full_check=None``: the full checker only when ``original``
    passes it (onnx's shape inference refuses sparse initializers that ONNX Runtime runs)."""
    if full_check is None:
        try:
            onnx.checker.check_model(str(original), full_check=True)
            full_check = True
        except Exception:  # noqa: BLE001 - the checker raises several types
            full_check = False
    onnx.checker.check_model(str(written), full_check=full_check)
    # Inputs from the written model's signature: sizes it fixed (--input-shape) are honoured.
    model = onnx.load(str(written), load_external_data=False)
    for size in sizes:
        for seed in seeds:
            feeds = seeded_feeds(model, seed, size)
            want, got = ort_outputs(original, feeds), ort_outputs(written, feeds)
            assert list(got) == list(want), (list(got), list(want))
            for name in want:
                a, b = np.asarray(want[name]), np.asarray(got[name])
                assert a.dtype == b.dtype and a.shape == b.shape, (name, a.dtype, b.dtype,
                                                                    a.shape, b.shape)
                if a.dtype.kind in "fc":
                    np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5, err_msg=name)
                else:
                    np.testing.assert_array_equal(b, a, err_msg=name)


@dataclasses.dataclass
class Outcome:
    """One command line run and what it did."""

    args: list[str]
    code: int
    stdout: str
    stderr: str
    fd_err: str  # what reached file descriptors 1 and 2 directly (C++ code: ORT's log)
    traceback: str | None  # an exception that escaped the command
    added: list[str]
    removed: list[str]
    changed: list[str]
    temporaries: list[str]
    tmp_left: list[str] = dataclasses.field(default_factory=list)  # graphfix-* in TMPDIR
    tmp_touched: list[str] = dataclasses.field(default_factory=list)  # others' files there

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("error:")]

    @property
    def other_lines(self) -> list[str]:
        """stderr lines that are neither the error, nor progress, nor a warning."""
        return [line for line in self.stderr.splitlines()
                if line.strip() and not line.startswith(("error:", "warning:"))
                and not _PROGRESS.match(line)]

    def describe(self) -> str:
        args = " ".join(a if len(a) < 80 else a[:40] + "..." + a[-20:] for a in self.args)
        return (f"graphfix {args} -> exit {self.code}\nstdout: {self.stdout[-3000:]}\n"
                f"stderr: {self.stderr}\nfd: {self.fd_err}\nadded {self.added} removed "
                f"{self.removed} changed {self.changed} temporaries {self.temporaries} "
                f"TMPDIR left {self.tmp_left} touched {self.tmp_touched}\n"
                f"{self.traceback or ''}")


# Files in the test's TMPDIR that are not graphfix's (a user's results folder named like
# graphfix's temporary folders, a file of another program).
_OTHERS_IN_TMPDIR = {"graphfix-results-2024-06/summary.txt": b"a user's results",
                     "graphfix-x-1-y/notes.txt": b"not graphfix's either",
                     "someone-else.txt": b"another program's file"}


def _fill_tmpdir(tmpdir: Path) -> None:
    for name, data in _OTHERS_IN_TMPDIR.items():
        (tmpdir / name).parent.mkdir(parents=True, exist_ok=True)
        (tmpdir / name).write_bytes(data)


class Hostile:
    """Runs graphfix's command line in ``folder`` and checks its promises."""

    def __init__(self, folder: Path, capfd: pytest.CaptureFixture[str],
                 tmpdir: Path | None = None) -> None:
        self.folder = folder
        self.capfd = capfd
        self.tmpdir = tmpdir
        self.models = MODELS
        self.write = write
        self.set_external = set_external
        self.external_entries = external_entries
        self.assert_same_function = assert_same_function
        self.seeded_feeds = seeded_feeds
        self.ort_outputs = ort_outputs
        self.ort_session = ort_session

    def model(self, model: onnx.ModelProto | None = None, name: str = "m.onnx", *,
              location: str | None = None) -> Path:
        """Write a model (default: :func:`matmul`) into the test's folder."""
        return write(self.folder, model if model is not None else matmul(), name,
                     location=location)

    def invoke(self, *args: str | os.PathLike, cwd: Path | None = None,
               watch: Sequence[Path] = ()) -> Outcome:
        """Run ``graphfix ARGS`` in-process (in ``cwd``, default the test's folder); what it
        did to the test's folder and the ``watch`` folders is recorded."""
        argv = [str(a) for a in args]
        folders = [self.folder, *watch]
        before, temporaries = snapshot(*folders), own_temporaries()
        tmp_before = snapshot(self.tmpdir) if self.tmpdir else {}
        self.capfd.readouterr()
        previous = os.getcwd()
        os.chdir(cwd or self.folder)
        try:
            result = CliRunner().invoke(cli, argv, catch_exceptions=True)
        finally:
            os.chdir(previous)
        captured = self.capfd.readouterr()
        after = snapshot(*folders)
        escaped = None
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            escaped = "".join(traceback.format_exception(
                type(result.exception), result.exception, result.exception.__traceback__))
        return Outcome(
            argv, result.exit_code, result.stdout, result.stderr, captured.out + captured.err,
            escaped,
            added=sorted(set(after) - set(before)), removed=sorted(set(before) - set(after)),
            changed=sorted(k for k in set(before) & set(after) if before[k] != after[k]),
            temporaries=sorted(own_temporaries() - temporaries),
            **self._tmpdir_verdict(tmp_before))

    def _tmpdir_verdict(self, before: dict[str, tuple]) -> dict[str, list[str]]:
        """graphfix folders left in the test's TMPDIR, and others' files there that changed."""
        if self.tmpdir is None:
            return {}
        after = snapshot(self.tmpdir)
        left = sorted(p for p in set(after) - set(before)
                      if Path(p).relative_to(self.tmpdir).parts[0].startswith("graphfix-"))
        # Folders that held graphfix's marker are graphfix's to sweep; the rest must stay.
        marked = {Path(p).parent for p in before if Path(p).name == ".graphfix-owner"
                  and Path(p).parent.parent == self.tmpdir}
        touched = sorted(p for p in before if after.get(p) != before[p] and not any(
            folder == Path(p) or folder in Path(p).parents for folder in marked))
        return {"tmp_left": left, "tmp_touched": touched}

    def process(self, *args: str | os.PathLike, cwd: Path | None = None,
                watch: Sequence[Path] = (), env: dict[str, str] | None = None,
                stdout: Any = subprocess.PIPE, stderr: Any = subprocess.PIPE,
                send: tuple[int, Any] | None = None, timeout: float = 120,
                preexec: Any = None, shell_prefix: str | None = None,
                read_bytes: int | None = None) -> Outcome:
        """Run ``python -m graphfix ARGS`` as a real process (in ``cwd``, default the test's
        folder), with the test's TMPDIR; ``send`` is (signal, when): when is a number of
        seconds, or a callable given the Popen object that returns once it is time.
        ``shell_prefix`` runs the command through ``sh -c`` after that text (``ulimit -f 8;``),
        with stdout and stderr redirections of its own when it says so. ``read_bytes``: read
        that many bytes of stdout, then close it (a reader that goes away: ``| head -c 1``)."""
        argv = [str(a) for a in args]
        folders = [self.folder, *watch]
        before = snapshot(*folders)
        tmp_before = snapshot(self.tmpdir) if self.tmpdir else {}
        environment = dict(os.environ)
        environment.update(env or {})
        command: Any = [sys.executable, "-m", "graphfix", *argv]
        if shell_prefix is not None:
            import shlex

            command = f"{shell_prefix} {shlex.join(command)}"
        proc = subprocess.Popen(command, cwd=cwd or self.folder, env=environment,
                                stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE if read_bytes is not None else stdout,
                                stderr=stderr, preexec_fn=preexec,
                                shell=shell_prefix is not None)
        if read_bytes is not None:
            assert proc.stdout is not None
            proc.stdout.read(read_bytes)
            proc.stdout.close()
            proc.stdout = None
        if send is not None:
            signum, when = send
            if callable(when):
                when(proc)
            else:
                time.sleep(when)
            if proc.poll() is None:
                proc.send_signal(signum)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"graphfix {argv} did not end within {timeout} s: {err!r}")
        after = snapshot(*folders)
        text_out = out.decode(errors="replace") if isinstance(out, bytes) else ""
        text_err = err.decode(errors="replace") if isinstance(err, bytes) else ""
        return Outcome(
            argv, proc.returncode, text_out, text_err, "",
            "Traceback" if "Traceback (most recent call last)" in text_out + text_err else None,
            added=sorted(set(after) - set(before)), removed=sorted(set(before) - set(after)),
            changed=sorted(k for k in set(before) & set(after) if before[k] != after[k]),
            temporaries=[], **self._tmpdir_verdict(tmp_before))

    # -------------------------------------------------------------------- verdicts
    def _common(self, outcome: Outcome) -> None:
        text = outcome.describe()
        assert outcome.traceback is None, text
        assert "Traceback" not in outcome.stdout + outcome.stderr + outcome.fd_err, text
        assert not _ORT_LOG.search(outcome.stdout + outcome.stderr + outcome.fd_err), text
        assert outcome.fd_err.strip() == "", text
        assert outcome.temporaries == [], text
        assert outcome.tmp_left == [] and outcome.tmp_touched == [], text
        for line in outcome.error_lines:
            assert len(line) <= 300, f"an error line of {len(line)} characters\n{text}"

    def refused(self, *args: str | os.PathLike, match: str | None = None,
                cwd: Path | None = None, watch: Sequence[Path] = ()) -> Outcome:
        """graphfix refuses: exit 1, one ``error:`` line (``match``, a regular expression,
        found in it), nothing changed, nothing added, nothing left."""
        outcome = self.invoke(*args, cwd=cwd, watch=watch)
        text = outcome.describe()
        self._common(outcome)
        assert outcome.code == 1, text
        assert len(outcome.error_lines) == 1, text
        assert outcome.other_lines == [], text
        assert outcome.added == outcome.removed == outcome.changed == [], text
        if match is not None:
            assert re.search(match, outcome.error_lines[0]), text
        return outcome

    def usage_error(self, *args: str | os.PathLike, match: str | None = None,
                    cwd: Path | None = None) -> Outcome:
        """click's usage error: exit 2, ``Usage:`` and one ``Error:`` line, nothing written."""
        outcome = self.invoke(*args, cwd=cwd)
        text = outcome.describe()
        self._common(outcome)
        assert outcome.code == 2, text
        assert "Usage:" in outcome.stderr, text
        errors = [line for line in outcome.stderr.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1, text
        assert outcome.added == outcome.removed == outcome.changed == [], text
        if match is not None:
            assert re.search(match, errors[0]), text
        return outcome

    def succeeded(self, *args: str | os.PathLike, produces: Sequence[str | Path] = (),
                  cwd: Path | None = None, watch: Sequence[Path] = ()) -> Outcome:
        """Exit 0, no error line; exactly the files ``produces`` (relative to the test's
        folder, or absolute) appeared, nothing else changed."""
        outcome = self.invoke(*args, cwd=cwd, watch=watch)
        text = outcome.describe()
        self._common(outcome)
        assert outcome.code == 0, text
        assert outcome.error_lines == [], text
        expected = {str(p if Path(p).is_absolute() else self.folder / p) for p in produces}
        assert set(outcome.added) == expected, text
        assert outcome.removed == [] and outcome.changed == [], text
        return outcome

    def refused_or_correct(self, *args: str | os.PathLike) -> Outcome:
        """A model graphfix may take or leave: ``inspect SRC``, ``check SRC SRC`` or
        ``optimize SRC DST ...`` either refuse it (exit 1, one error line, nothing written) or
        succeed correctly: inspect warns about it or ONNX Runtime loads it, check finds the model
        equal to itself, optimize writes a DST that passes the full checker, loads in ORT and
        computes what SRC computes."""
        outcome = self.invoke(*args)
        text = outcome.describe()
        self._common(outcome)
        if outcome.code != 0:
            assert outcome.code == 1, text
            assert len(outcome.error_lines) == 1 and outcome.other_lines == [], text
            assert outcome.added == outcome.removed == outcome.changed == [], text
            return outcome
        assert outcome.error_lines == [] and outcome.removed == outcome.changed == [], text
        command, src = str(args[0]), self.folder / args[1]
        if command == "optimize":
            dst = self.folder / args[2]
            assert set(outcome.added) <= {str(dst), str(dst) + ".data"}, text
            try:
                assert_same_function(src, dst)
            except Exception as err:  # noqa: BLE001 - any failure: the model is broken
                raise AssertionError(f"graphfix wrote a broken model: {err}\n{text}") from None
        else:
            assert outcome.added == [], text
        if command == "inspect" and "warning" not in outcome.stdout:
            try:
                ort_session(src)
            except Exception as err:  # noqa: BLE001 - ORT raises several types
                raise AssertionError(f"inspect says nothing of a model ONNX Runtime cannot "
                                     f"load ({err})\n{text}") from None
        return outcome

    def optimized(self, src: str | os.PathLike, dst: str | os.PathLike = "out.onnx",
                  *extra: str | os.PathLike, produces: Sequence[str | Path] | None = None,
                  cwd: Path | None = None, watch: Sequence[Path] = (),
                  compare: bool = True) -> Outcome:
        """``graphfix optimize SRC DST EXTRA`` succeeds, writes DST (and what ``produces``
        adds), and DST computes what SRC computes."""
        base = cwd or self.folder
        dst_path = Path(dst) if Path(dst).is_absolute() else base / dst
        src_path = Path(src) if Path(src).is_absolute() else base / src
        outcome = self.succeeded("optimize", src, dst, *extra,
                                 produces=[dst_path] if produces is None else produces,
                                 cwd=cwd, watch=watch)
        if compare:
            assert_same_function(src_path, dst_path)
        return outcome


@pytest.fixture
def gf(tmp_path: Path, capfd: pytest.CaptureFixture[str],
       monkeypatch: pytest.MonkeyPatch) -> Hostile:
    """The hostile-test helper, working in a fresh ``tmp_path``, with a TMPDIR of its own
    (beside it) that holds files that are not graphfix's."""
    tmpdir = tmp_path.parent / f"{tmp_path.name}-tmpdir"
    tmpdir.mkdir()
    _fill_tmpdir(tmpdir)
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    return Hostile(tmp_path, capfd, tmpdir)


@pytest.fixture(scope="session")
def cuda_works() -> bool:
    """Whether ONNX Runtime really runs on CUDA here (a session that keeps the provider)."""
    try:
        import onnxruntime as ort

        if "CUDAExecutionProvider" not in ort.get_available_providers():
            return False
        options = ort.SessionOptions()
        options.log_severity_level = 4
        session = ort.InferenceSession(matmul().SerializeToString(), options,
                                       providers=["CUDAExecutionProvider"])
        return "CUDAExecutionProvider" in session.get_providers()
    except Exception:  # noqa: BLE001 - no CUDA
        return False


@pytest.fixture(scope="session")
def is_root(tmp_path_factory: pytest.TempPathFactory) -> bool:
    """Whether file permissions do not stop this process: root (``os.geteuid() == 0``) reads a
    chmod 000 file and writes into a read-only folder, unless its capabilities were dropped
    (``setpriv --bounding-set=-dac_override,-dac_read_search``), which the probe finds out."""
    if not (hasattr(os, "geteuid") and os.geteuid() == 0):
        return False
    probe = tmp_path_factory.mktemp("permissions") / "locked"
    probe.write_bytes(b"x")
    probe.chmod(0)
    try:
        probe.read_bytes()
        return True
    except OSError:
        return False
    finally:
        probe.chmod(0o644)
