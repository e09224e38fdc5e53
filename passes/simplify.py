"""simplify: onnxsim's shape inference, constant folding and dead-code elimination, bounded.

    y = Add(Constant(a), Constant(b)) * x   =>   y = Mul(c, x), c = a + b   (onnxsim)

Decisions:
1. onnxsim runs with its own check off (``check_n=0``); graphfix validates separately.
2. Crash isolation. onnxsim is a C++ extension: it runs in a worker interpreter (a subprocess of
   ``sys.executable``; multiprocessing's spawn was dropped because it re-imports the caller's
   ``__main__``), the model passed through a temporary folder: graphfix writes it with its
   weights in a data file beside it (written as they are, never serialized into one message),
   and onnxsim reads that file and writes its output in C++ (``simplify(path,
   output_path=...)``): on the 138 MB U-Net that takes the pass from 2.8 s to 1.3 s, and on a
   415 MB transformer encoder onnxsim's own time from 5-7 s to 1.6-2.5 s against its in-memory
   entry point, which serializes the model for C++ and parses its result back. An exception,
   abort or segfault there becomes ``PassResult(skipped=reason)`` with the model unchanged and
   the run goes on.
   Starting the worker costs an interpreter start plus importing onnx and onnxsim.
   ``import onnxsim`` also pulls in torch and sympy when they are installed (for PPQ
   quantization and for printing symbolic MAC counts, neither of which simplification uses;
   both imports are optional in onnxsim): the worker blocks them (``_UNUSED_BY_ONNXSIM``), which
   takes its start from about 2.3 s to 0.4 s on a 2-core CPU where torch is installed. The
   worker then stays for the next run in the same process (an exporter optimizing many models,
   the guilty-pass search), so the start is paid once; it is started when the pipeline starts
   (``prepare``), so that it imports while the passes before simplify run; it is replaced after
   a crash, and after a model over 64 MiB (so that its memory goes back). The bounded re-runs
   of rule 3 are one job.
3. Growth policy. Folding can replicate data (Tile, Expand, broadcasts of constants to a batch,
   Range tables, ConstantOfShape) and grow a model 5-10x. The output's tensors (initializers
   and Constant values) may hold at most ``max(max_growth * original, original +
   GROWTH_ALLOWANCE)`` bytes (default ``max_growth=1.5``, allowance 64 KiB so tiny models may
   gain a few folded constants). Tensor bytes rather than file size: onnxsim also records the
   inferred shape of every tensor (``value_info``), which on a large graph with small weights
   (10k nodes, 0.5 MB) adds more than half the file without replicating any data. When
   onnxsim's output holds more, the pass re-runs it with ``tensor_size_threshold`` set to the growth budget and then a
   quarter of it, so that only folds producing small tensors are kept, and last without constant
   folding (many small folds can add up past the budget; dead code, Dropout and the other
   optimizer rewrites are still worth having); the refused folds (new initializers of the
   bloated output that the kept output lacks) are reported with the bytes each would have added
   (``refused_fold_bytes``, warnings). If no bounded run fits, the pass skips.
   ``max_growth=None`` turns the policy off (folding still never crosses 2 GB: onnxsim's own
   threshold is capped below the protobuf limit).
4. ConstantOfShape feeding a Conv (the weights of onnx's "light" models are computed at load time
   that way) is refused by default under the same policy: the computation at load time is cheap
   and file size matters (folding grows those files from about 0.1 MB to 25-100 MB). Pass
   ``max_growth=None`` (or a large factor) to materialise them.
5. Dynamic dimensions stay dynamic. ``input_shapes={"x": [1, 3, 224, 224]}`` fixes them
   (onnxsim's ``overwrite_input_shapes``); every dimension that became static is listed in the
   warnings and counted in ``dims_fixed``.
6. ``modified`` compares nodes and initializers canonically (onnxsim renames and reorders); when
   nothing changed the input model is returned untouched. Graph input/output names are kept, or
   the pass skips; so are the names of their symbolic dimensions (onnxsim's shape inference
   can rename one, ``N`` -> ``unk__0``, when a rewritten graph no longer ties it to another).
7. Models over 2 GB are skipped (onnxsim holds the whole model as one message). Weights that
   stay in their files are copied file to file into the worker's data file; an external tensor
   graphfix never checked makes the pass skip.
8. Never more nodes. onnxsim 0.8 opts into ``fuse_matmul_add_bias_into_gemm_batched`` by
   default: every ``MatMul(x[B,S,K], W) + b`` becomes ``Reshape -> Gemm -> Reshape`` with a
   ``Shape -> Slice -> Concat`` chain computing the output shape, and the reshapes are only
   cancelled between element-wise ops. On a transformer encoder that took 84 nodes to 113
   (12 MatMul+Add pairs became 12 Gemm, 20 Reshape, 8 Shape, 8 Slice, 8 Concat). It is a
   layout rewrite rather than a simplification (ORT runs batched MatMul natively), so it is
   skipped (``SKIPPED_OPTIMIZERS``; onnxsim ignores unknown names there, so older versions are
   unaffected). Whatever the cause, an output with more nodes than the input (subgraphs
   counted) is not taken: the pass skips with the reason and the ops that grew.
9. Memory. The worker needs at most about five times the model at its peak
   (``_WORKER_MEMORY_FACTOR``, measured when it still parsed the model in Python: the model read
   in, onnxsim's C++ copy, its output, and that output serialized); when the system does not
   have that much available, the pass skips with the figures rather than let the system kill a
   process. The parent writes the model to the job's folder without serializing it.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import onnx

from graphfix import layout
from graphfix.errors import PassError
from graphfix.model_io import (
    PROTOBUF_LIMIT,
    has_value,
    iter_tensors,
    load,
    temporary_folder,
    tensor_digest,
    weight_bytes,
    write_scratch,
)
from graphfix.passes._graphs import count_nodes, same_graph
from graphfix.registry import Pass, PassResult, register

__all__ = [
    "Simplify",
    "simplify",
    "DEFAULT_MAX_GROWTH",
    "GROWTH_ALLOWANCE",
    "SKIPPED_OPTIMIZERS",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_GROWTH = 1.5
GROWTH_ALLOWANCE = 64 * 1024
_FOLD_CAP = PROTOBUF_LIMIT // 2  # onnxsim's per-tensor folding threshold, never near 2 GB
_FAILURES = ("raise", "abort")
# Rule 8: onnxsim optimizers that add nodes.
SKIPPED_OPTIMIZERS: tuple[str, ...] = ("fuse_matmul_add_bias_into_gemm_batched",)
# Rule 9: the onnxsim worker's peak memory, in multiples of the serialized model.
_WORKER_MEMORY_FACTOR = 5
# Rule 2: the worker is stopped after a model larger than this, to give its memory back.
_KEEP_WORKER_BELOW = 64 * 2**20
_WORKER_CODE = "from graphfix.passes.simplify import _worker_main; _worker_main()"
# Rule 2: optional imports of onnxsim that simplification never uses (about 1.9 s of its 2.1 s
# import when they are installed); the worker makes them fail at once.
_UNUSED_BY_ONNXSIM = ("torch", "sympy")


def _simplify_job(
    in_path: str,
    out_paths: list[str],
    err_path: str,
    attempts: list[dict[str, Any]],
    limit: int,
    fail: str | None,
) -> None:
    """Runs in the worker: onnxsim on the model file with each option set of ``attempts`` in
    turn until an output's tensors hold at most ``limit`` bytes and it fits in one protobuf
    message. onnxsim reads the file (external data included) and writes its output in C++
    (rule 2), attempt ``i`` to ``out_paths[i]`` in a folder of its own; the first output and
    the last one tried are kept. An exception is written to ``err_path`` as text."""
    try:
        if fail == "abort":
            os.abort()
        if fail == "raise":
            raise RuntimeError("failure injected for testing")
        import onnxsim

        for index, kwargs in enumerate(attempts):
            out = Path(out_paths[index])
            out.parent.mkdir()
            # Structure only: the weights stay in the files onnxsim wrote.
            simplified, _ = onnxsim.simplify(in_path, check_n=0, output_path=str(out), **kwargs)
            fits = _fits(simplified, _folder_bytes(out.parent), limit)
            if not (index == 0 or fits or index == len(attempts) - 1):
                shutil.rmtree(out.parent)
            if fits:
                break
    except Exception:  # noqa: BLE001 - everything goes back to the parent as text
        with open(err_path, "w", encoding="utf-8") as err:
            err.write(traceback.format_exc())


def _folder_bytes(folder: Path) -> int:
    """The bytes of the files in ``folder``: a model and its external data."""
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def _worker_main() -> None:
    """Entry point of the worker interpreter: one job (a JSON document) per line of stdin,
    answered with a line on the original stdout once its files are written; ends when stdin
    closes. What onnxsim and ONNX print goes to the job's log file (fd 1 and 2), so that a
    crash message reaches the parent and nothing printed can garble the answers."""
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
        _simplify_job(job["in"], job["outs"], job["err"], job["attempts"], job["limit"], job["fail"])
        sys.stdout.flush()
        sys.stderr.flush()
        answers.write("done\n")
        answers.flush()


class _Worker:
    """A child interpreter with onnxsim imported, kept between runs (rule 2)."""

    def __init__(self) -> None:
        # It starts in a folder of its own: ``-c`` puts the working directory first on
        # sys.path, and a source checkout there would shadow the installed package.
        self.owner = os.getpid()  # a forked process must not share the pipes: it starts its own
        self.folder = Path(tempfile.mkdtemp(prefix="graphfix-onnxsim-"))
        with open(self.folder / "start.log", "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER_CODE],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=self.folder,
            )

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

    def close(self) -> int | None:
        """Stop the worker (it ends when its stdin closes); its exit code."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            code = self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            code = self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)
        return code


_worker: _Worker | None = None
_worker_lock = threading.Lock()


def _start_worker() -> None:
    """Start the worker if this process has none; returns at once (it imports in the
    background)."""
    global _worker
    with _worker_lock:
        if _worker is None or _worker.owner != os.getpid():
            _worker = _Worker()


_retiring: list[threading.Thread] = []


def _retire(worker: _Worker) -> None:
    """Stop ``worker`` without waiting for it (its exit is awaited by a thread)."""
    thread = threading.Thread(target=worker.close, name="graphfix-onnxsim-retire", daemon=True)
    thread.start()
    _retiring.append(thread)


@atexit.register
def _stop_worker() -> None:
    global _worker
    with _worker_lock:
        if _worker is not None and _worker.owner == os.getpid():
            _worker.close()
            _worker = None
        while _retiring:
            _retiring.pop().join()


def _available_memory() -> int | None:
    """Bytes of memory available to a new process (Linux's MemAvailable), or None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _run_isolated(
    folder: Path, attempts: list[dict[str, Any]], limit: int, fail: str | None
) -> list[tuple[onnx.ModelProto, int]] | str:
    """onnxsim in the worker process on ``folder/in.onnx``, trying each option set of
    ``attempts`` until an output's tensors fit in ``limit`` bytes: ``[first output, last output
    tried]`` (one entry when the first fits or only one set was given) with the serialized size
    of each, or a one-line reason it failed. A worker that crashed is replaced at the next run;
    one that simplified a large model is stopped, so that its memory goes back."""
    global _worker
    in_path = folder / "in.onnx"
    err_path, log_path = folder / "err.txt", folder / "log.txt"
    out_paths = [str(folder / f"out{i}" / "model.onnx") for i in range(len(attempts))]
    job = {"in": str(in_path), "outs": out_paths, "err": str(err_path), "log": str(log_path),
           "attempts": attempts, "limit": limit, "fail": fail}
    code: int | None = None
    with _worker_lock:
        if _worker is None or _worker.owner != os.getpid():
            _worker = _Worker()
        worker = _worker
        done = worker.run(job)
        if not done:
            code = worker.close()
            _worker = None
        elif _folder_bytes(folder) > _KEEP_WORKER_BELOW:
            # It exits in the background (nothing waits for its memory to go back), and a
            # fresh one gets ready for the next run.
            _retire(worker)
            _worker = _Worker()
    if not done:
        text = log_path.read_text(errors="replace") if log_path.exists() else worker.start_log()
        lines = [ln for ln in text.strip().splitlines() if ln.strip()]
        logger.debug("simplify worker output: %s", text[-2000:])
        return f"onnxsim crashed (worker exit code {code})" + (f": {lines[-1]}" if lines else "")
    if err_path.exists():
        lines = [ln for ln in err_path.read_text(errors="replace").splitlines() if ln.strip()]
        return f"onnxsim failed: {lines[-1] if lines else 'unknown error'}"
    if not os.path.exists(out_paths[0]):
        return "onnxsim wrote no model"
    written = [Path(p) for p in out_paths if os.path.exists(p)]
    kept = written[:1] + written[1:][-1:]
    # Read whole (weights included) before the folder goes.
    return [(load(p), _folder_bytes(p.parent)) for p in kept]


def _fits(model: onnx.ModelProto, serialized: int, limit: int) -> bool:
    """Rule 3: the tensors of ``model`` within ``limit`` bytes, the whole in one message."""
    return weight_bytes(model) <= limit and serialized < PROTOBUF_LIMIT


def _grown_ops(model: onnx.ModelProto, reference: onnx.ModelProto) -> str:
    """The op types ``model`` has more of than ``reference``, as ``"Reshape +20, Gemm +12"``."""
    before = Counter(n.op_type for n in reference.graph.node)
    after = Counter(n.op_type for n in model.graph.node)
    grown = sorted(((op, after[op] - before[op]) for op in after if after[op] > before[op]),
                   key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{op} +{d}" for op, d in grown) or "subgraph nodes"


def _keep_dim_names(graph: onnx.GraphProto, original: onnx.GraphProto) -> None:
    """Give every graph input and output of ``graph`` the symbolic dimension names it had in
    ``original`` where it is still symbolic (rule 6); static dimensions are left as they are."""
    declared = {v.name: v for v in list(original.input) + list(original.output)}
    for value in list(graph.input) + list(graph.output):
        before = declared.get(value.name)
        if before is None or not value.type.HasField("tensor_type") or not (
            before.type.HasField("tensor_type")
        ):
            continue
        old_dims = before.type.tensor_type.shape.dim
        new_dims = value.type.tensor_type.shape.dim
        if len(old_dims) != len(new_dims):
            continue
        for old, new in zip(old_dims, new_dims):
            if old.HasField("dim_param") and not new.HasField("dim_value"):
                new.dim_param = old.dim_param


def _static_dims(graph: onnx.GraphProto) -> dict[str, list[str]]:
    out = {}
    for vi in list(graph.input) + list(graph.output):
        out[vi.name] = [
            str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
            for d in vi.type.tensor_type.shape.dim
        ]
    return out


def _new_initializers(model: onnx.ModelProto, reference: onnx.ModelProto) -> dict[str, int]:
    """Initializers of ``model`` whose contents are not in ``reference``: name -> bytes."""
    known = {tensor_digest(t) for t in iter_tensors(reference.graph)}
    return {
        t.name: t.ByteSize() for t in model.graph.initializer if tensor_digest(t) not in known
    }


@register("simplify")
class Simplify(Pass):
    """Fold constants, infer shapes, drop dead code with onnxsim, refusing folds that bloat."""

    def __init__(
        self,
        *,
        max_growth: float | None = DEFAULT_MAX_GROWTH,
        input_shapes: dict[str, list[int]] | None = None,
        fail_for_testing: str | None = None,
    ) -> None:
        if max_growth is not None and (
            isinstance(max_growth, bool) or not isinstance(max_growth, (int, float))
            or max_growth < 1.0
        ):
            raise PassError(
                f"simplify: max_growth must be a number >= 1.0 or None, got {max_growth!r}"
            )
        if input_shapes is not None:
            if not isinstance(input_shapes, dict) or not all(
                isinstance(k, str) and isinstance(v, (list, tuple))
                and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in v)
                for k, v in input_shapes.items()
            ):
                raise PassError(
                    "simplify: input_shapes must map input names to lists of positive ints, "
                    f"got {input_shapes!r}"
                )
            input_shapes = {k: list(v) for k, v in input_shapes.items()}
        if fail_for_testing not in (None, *_FAILURES):
            raise PassError(
                f"simplify: fail_for_testing must be one of {_FAILURES}, got {fail_for_testing!r}"
            )
        self.max_growth = None if max_growth is None else float(max_growth)
        self.input_shapes = input_shapes
        self._given_shapes = input_shapes
        self._fail = fail_for_testing

    def follow_layout(self, moved: Any) -> None:
        # input_shapes name the dims of the model the pipeline started with; an input an
        # earlier pass declared channels-first takes them in its new order.
        if self._given_shapes:
            self.input_shapes = layout.move_shapes(self._given_shapes, moved)

    def _limit(self, size: int) -> int:
        if self.max_growth is None:
            return PROTOBUF_LIMIT
        return min(PROTOBUF_LIMIT, max(int(size * self.max_growth), size + GROWTH_ALLOWANCE))

    def prepare(self) -> None:
        _start_worker()

    def call(self, model: onnx.ModelProto) -> PassResult:
        if not all(has_value(t) for t in iter_tensors(model.graph)):
            reason = "external data not loaded; onnxsim needs the weights"
            return PassResult(model, False, skipped=reason)
        # Measured from tensor shapes first: ByteSize() serializes the model and fails past 2 GB.
        if weight_bytes(model) >= PROTOBUF_LIMIT:
            return PassResult(model, False, skipped="model over 2 GB: onnxsim cannot serialize it")
        if self.input_shapes:
            names = {i.name for i in model.graph.input}
            unknown = sorted(set(self.input_shapes) - names)
            if unknown:
                raise PassError(f"simplify: input_shapes names unknown inputs {unknown}")
        with temporary_folder(prefix="graphfix-simplify-") as folder:
            return self._simplify(model, folder)

    def _simplify(self, model: onnx.ModelProto, folder: Path) -> PassResult:
        size = write_scratch(model, folder / "in.onnx")
        if size >= PROTOBUF_LIMIT:
            return PassResult(model, False, skipped="model over 2 GB: onnxsim cannot serialize it")
        needed, available = _WORKER_MEMORY_FACTOR * size, _available_memory()
        if available is not None and needed > available:
            reason = (
                f"onnxsim would need about {needed / 2**30:.1f} GiB of memory for this model "
                f"and {available / 2**30:.1f} GiB are available; model kept"
            )
            logger.warning("simplify skipped: %s", reason)
            return PassResult(model, False, warnings=[reason], skipped=reason)
        stats: dict[str, int] = {
            "nodes_before": len(model.graph.node),
            "initializers_before": len(model.graph.initializer),
            "bytes_before": size,
        }
        base: dict[str, Any] = {
            "tensor_size_threshold": f"{_FOLD_CAP}B",
            "skipped_optimizers": list(SKIPPED_OPTIMIZERS),
        }
        if self.input_shapes:
            base["overwrite_input_shapes"] = self.input_shapes
        tensors = weight_bytes(model)
        stats["tensor_bytes_before"] = tensors
        limit = self._limit(tensors)
        # Rule 3: the bounded re-runs are one job of the worker, tried only when the first is too big.
        budget = max(limit - tensors, 1)
        attempts = [base] + [
            {**base, "tensor_size_threshold": f"{max(threshold, 1)}B"}
            for threshold in (budget, budget // 4)
        ] + [{**base, "skip_constant_folding": True}]
        outputs = _run_isolated(folder, attempts, limit, self._fail)
        if isinstance(outputs, str):
            logger.warning("simplify skipped: %s", outputs)
            return PassResult(model, False, warnings=[outputs], skipped=outputs)
        warnings: list[str] = []
        (result, result_size), (last, last_size) = outputs[0], outputs[-1]
        if not _fits(result, result_size, limit):
            bloated, result, result_size = result, last, last_size
            if result is bloated or not _fits(result, result_size, limit):
                reason = (
                    f"every simplification grows the model's tensors past {limit} bytes "
                    f"(max_growth={self.max_growth})"
                )
                return PassResult(model, False, warnings=[reason], skipped=reason)
            kept = _new_initializers(result, model)
            refused = {k: v for k, v in _new_initializers(bloated, model).items() if k not in kept}
            stats["refused_folds"] = len(refused)
            stats["refused_fold_bytes"] = sum(refused.values())
            for name, nbytes in sorted(refused.items(), key=lambda kv: -kv[1])[:10]:
                warnings.append(
                    f"refused fold {name!r}: would add {nbytes} bytes "
                    f"(max_growth={self.max_growth})"
                )
        # Rule 8: never more nodes.
        nodes_before, nodes_out = count_nodes(model.graph), count_nodes(result.graph)
        if nodes_out > nodes_before:
            reason = (
                f"onnxsim's output has more nodes ({nodes_before} -> {nodes_out}: "
                f"{_grown_ops(result, model)}); model kept"
            )
            logger.warning("simplify skipped: %s", reason)
            stats["refused_nodes_after"] = nodes_out
            return PassResult(model, False, stats=stats, warnings=[*warnings, reason],
                              skipped=reason)
        # Rule 6: names of graph outputs.
        if [o.name for o in result.graph.output] != [o.name for o in model.graph.output]:
            reason = "onnxsim renamed graph outputs; model kept"
            return PassResult(model, False, warnings=[reason], skipped=reason)
        _keep_dim_names(result.graph, model.graph)
        before_dims, after_dims = _static_dims(model.graph), _static_dims(result.graph)
        fixed = 0
        for name, dims in before_dims.items():
            new = after_dims.get(name, dims)
            for axis, (a, b) in enumerate(zip(dims, new)):
                if not a.isdigit() and b.isdigit():
                    fixed += 1
                    warnings.append(f"dimension {axis} of {name!r} ({a}) is now static: {b}")
        stats["dims_fixed"] = fixed
        if not fixed and same_graph(result.graph, model.graph, names=False):
            stats.update(
                nodes_after=stats["nodes_before"],
                initializers_after=stats["initializers_before"],
                bytes_after=size,
                tensor_bytes_after=tensors,
            )
            return PassResult(model, False, stats=stats, warnings=warnings)
        # onnxsim stamps its own name and version into the model's metadata; what the model
        # says about itself stays the original's.
        del result.metadata_props[:]
        result.metadata_props.extend(model.metadata_props)
        stats.update(
            nodes_after=len(result.graph.node),
            initializers_after=len(result.graph.initializer),
            bytes_after=result_size,
            tensor_bytes_after=weight_bytes(result),
        )
        return PassResult(result, True, stats=stats, warnings=warnings)


def simplify(model: onnx.ModelProto, **options: Any) -> onnx.ModelProto:
    """Function twin of :class:`Simplify`: returns the simplified model."""
    return Simplify(**options)(model).model
