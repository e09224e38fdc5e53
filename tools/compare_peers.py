"""Compare graphfix with its peers on every .onnx model of a folder, side by side.

    python tools/compare_peers.py CORPUS_DIR [--json out.json] [--runs 50] [--threads 2]

Tools: the original, onnxsim, onnxslim, onnxoptimizer, ORT offline basic, ORT offline extended,
graphfix's default pipeline (``graphfix.optimize(model, verify=False)``). Per model and tool:
success or the error, tool time, nodes, Transposes, serialized size, whether it loads in ORT
(defaults / optimizations off), max abs error against the original on the same seeded inputs,
median ORT CPU latency with defaults and with optimizations off (runs interleaved across tools
in rounds, after warm-up), and session-creation time. Peers that are not installed are skipped
with a note.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx

import graphfix
from graphfix.model_io import ort_session

__all__ = ["main", "compare_model", "TOOLS"]

_NP = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64, 9: np.bool_,
       10: np.float16, 11: np.float64}


def _onnxsim(m: onnx.ModelProto) -> onnx.ModelProto:
    import onnxsim

    return onnxsim.simplify(m, check_n=0)[0]


def _onnxslim(m: onnx.ModelProto) -> onnx.ModelProto:
    import onnxslim

    return onnxslim.slim(m)


def _onnxoptimizer(m: onnx.ModelProto) -> onnx.ModelProto:
    import onnxoptimizer

    return onnxoptimizer.optimize(m)


def _ort(level: str) -> Callable[[onnx.ModelProto], onnx.ModelProto]:
    def run(m: onnx.ModelProto) -> onnx.ModelProto:
        from graphfix.passes.ort_offline import OrtOffline

        return OrtOffline(level=level)(m).model

    return run


def _graphfix(m: onnx.ModelProto) -> onnx.ModelProto:
    # Registers the two passes even where the pass package does not import them yet.
    import graphfix.passes.ort_offline  # noqa: F401
    import graphfix.passes.simplify  # noqa: F401

    return graphfix.optimize(m, verify=False).model


TOOLS: dict[str, tuple[str | None, Callable[[onnx.ModelProto], onnx.ModelProto]]] = {
    "original": (None, lambda m: m),
    "onnxsim": ("onnxsim", _onnxsim),
    "onnxslim": ("onnxslim", _onnxslim),
    "onnxoptimizer": ("onnxoptimizer", _onnxoptimizer),
    "ort-basic": (None, _ort("basic")),
    "ort-extended": (None, _ort("extended")),
    "graphfix": (None, _graphfix),
}


def _feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        dtype = _NP.get(tt.elem_type, np.float32)
        if np.issubdtype(dtype, np.floating):
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[vi.name] = np.zeros(shape, dtype=dtype)  # indices stay in any table's range
    return feeds


def _session(model: onnx.ModelProto, level: str, threads: int) -> tuple[Any, float]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    start = time.perf_counter()
    session = ort_session(model, optimization=level, options=options)
    return session, time.perf_counter() - start


def compare_model(path: Path, runs: int, threads: int, notes: list[str]) -> list[dict[str, Any]]:
    original = onnx.load(str(path))
    feeds = _feeds(original)
    rows: list[dict[str, Any]] = []
    sessions: dict[tuple[int, str], Any] = {}
    reference: list[np.ndarray] | None = None
    for name, (module, fn) in TOOLS.items():
        row: dict[str, Any] = {"model": path.name, "tool": name}
        rows.append(row)
        if module is not None:
            try:
                __import__(module)
            except ImportError:
                row["error"] = f"{module} not installed"
                if f"{module} not installed" not in notes:
                    notes.append(f"{module} not installed")
                continue
        start = time.perf_counter()
        try:
            out = fn(copy.deepcopy(original))
        except Exception as exc:  # noqa: BLE001 - a peer's failure is a result
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
            continue
        row["time_s"] = time.perf_counter() - start
        row["nodes"] = len(out.graph.node)
        row["transposes"] = sum(n.op_type == "Transpose" for n in out.graph.node)
        row["bytes"] = out.ByteSize()
        for level, key in (("all", "default"), ("disabled", "opt_off")):
            try:
                session, created = _session(out, level, threads)
                row[f"loads_{key}"] = True
                row[f"session_s_{key}"] = created
                sessions[(len(rows) - 1, key)] = session
            except Exception as exc:  # noqa: BLE001
                row[f"loads_{key}"] = False
                row.setdefault("error", f"ORT {key}: {str(exc).splitlines()[0][:120]}")
        if (len(rows) - 1, "opt_off") in sessions:
            session = sessions[(len(rows) - 1, "opt_off")]
            names = [o.name for o in session.get_outputs()]
            wanted = {i.name for i in session.get_inputs()}
            try:
                outs = session.run(names, {k: v for k, v in feeds.items() if k in wanted})
            except Exception as exc:  # noqa: BLE001 - e.g. required inputs the feeds lack
                row["error"] = f"run: {str(exc).splitlines()[0][:120]}"
                for key in ("default", "opt_off"):
                    sessions.pop((len(rows) - 1, key), None)
                continue
            if reference is None:
                reference = outs
            row["max_abs_err"] = max(
                (float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
                 for a, b in zip(outs, reference)), default=0.0)
    # Latency: interleaved rounds across tools, after warm-up.
    timings: dict[tuple[int, str], list[float]] = {k: [] for k in sessions}
    for key, session in sessions.items():
        wanted = {i.name for i in session.get_inputs()}
        session.run(None, {k: v for k, v in feeds.items() if k in wanted})
    for _ in range(runs):
        for key, session in sessions.items():
            wanted = {i.name for i in session.get_inputs()}
            f = {k: v for k, v in feeds.items() if k in wanted}
            start = time.perf_counter()
            session.run(None, f)
            timings[key].append(time.perf_counter() - start)
    for (index, mode), values in timings.items():
        rows[index][f"latency_ms_{mode}"] = 1000 * statistics.median(values)
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    cols = ["model", "tool", "time_s", "nodes", "transposes", "bytes", "loads_default", "loads_opt_off",
            "max_abs_err", "latency_ms_default", "latency_ms_opt_off", "session_s_default", "error"]

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3g}"
        return "" if v is None else str(v)

    cells = [[fmt(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(x[i]) for x in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines += ["  ".join(x.ljust(w) for x, w in zip(cell, widths)) for cell in cells]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    notes: list[str] = []
    rows: list[dict[str, Any]] = []
    for path in sorted(args.corpus.glob("*.onnx")):
        rows.extend(compare_model(path, args.runs, args.threads, notes))
        print(f"done {path.name}", file=sys.stderr, flush=True)
    print(_table(rows))
    for note in notes:
        print(f"note: {note}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "notes": notes, "runs": args.runs,
                                         "threads": args.threads}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
