"""Compare graphfix with its peers on every .onnx model of a folder, side by side.

    python tools/compare_peers.py CORPUS_DIR [--json out.json] [--runs 50] [--threads 2]
                                             [--only NAME ...]

Tools: the original, onnxsim, onnxslim, onnxoptimizer, ORT offline basic, ORT offline extended,
graphfix's default pipeline (``graphfix.optimize(model, verify=False)``) and graphfix with
``--ort-level all`` (``graphfix-all``, tied to this CPU type). Per model and tool:
success or the error, tool time, nodes, Transposes, nodes outside the standard ONNX domains,
the symbolic dimensions of the inputs, serialized size, whether it loads in ORT (defaults /
optimizations off), max abs error against the original on the same seeded inputs (graphfix's
own input generator: embedding ids inside their table, 0/1 masks, dynamic dims at size > 1),
median ORT CPU latency with defaults and with optimizations off (runs interleaved across tools
in rounds, after warm-up), and session-creation time. ``--runs 0`` measures no latency and keeps
no session open (structure only; less memory on large models). Peers that are not installed are
skipped with a note.

Tool time is measured twice. ``time_s`` is the library call in this process, on a model already
in memory, with every library imported and onnxsim's worker started (graphfix's pipeline then
includes ONNX Runtime's offline pass and a worker process round trip that onnxsim's in-process
call does not pay); with ``--time-repeats N`` it is the best of N calls of onnxsim's and
graphfix's, taken in turns (``time_runs`` keeps each). ``cli_s`` (unless ``--no-cli``) is the tool as a user runs it, each in a fresh
process, best of ``--cli-repeats``: ``onnxsim IN OUT 0`` (no check) against ``graphfix optimize IN
OUT --no-verify``, and ``graphfix optimize IN OUT`` with its parity check (``cli_verify_s``).

After the table, one line per model checks graphfix against the peers: nodes no more than the
best of onnxsim, onnxslim, onnxoptimizer and ORT offline basic; Transposes no more than any
peer; only standard-domain ops; input dimensions as symbolic as the original's; tool time at
most twice onnxsim's (on the command line when measured; the library ratio is shown beside
it); and, when latency is measured, a median under ORT defaults at most 1.02x
the fastest peer's, with ORT's optimizations off at most 1.02x ORT offline basic's, and
graphfix-all with optimizations off within 5% of its own median under defaults.
"""

from __future__ import annotations

import argparse
import copy
import functools
import importlib.util
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx

import graphfix
from graphfix.model_io import ort_session

__all__ = ["main", "compare_model", "TOOLS"]


_STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")
_NODE_PEERS = ("onnxsim", "onnxslim", "onnxoptimizer", "ort-basic")
_TRANSPOSE_PEERS = ("onnxsim", "onnxslim", "onnxoptimizer", "ort-basic", "ort-extended")
MAX_TIME_RATIO = 2.0
MAX_LATENCY_RATIO = 1.02


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


@functools.cache
def _shared_worker() -> Any:
    """One onnxsim worker for every graphfix call of the run, as a caller that optimizes many
    models keeps one (started before the first model; the library timing leaves its start
    out)."""
    from graphfix.passes.simplify import OnnxsimWorker

    worker = OnnxsimWorker()
    worker.start()
    return worker


def _graphfix(m: onnx.ModelProto) -> onnx.ModelProto:
    from graphfix.passes.simplify import shared_worker

    with shared_worker(_shared_worker()):
        return graphfix.optimize(m, verify=False).model


def _graphfix_all(m: onnx.ModelProto) -> onnx.ModelProto:
    # `graphfix optimize --ort-level all`: tied to this CPU type, for deployments that run with
    # ORT's optimizations off.
    from graphfix.passes.simplify import shared_worker

    with shared_worker(_shared_worker()):
        return graphfix.optimize(m, verify=False, ort_level="all").model


TOOLS: dict[str, tuple[str | None, Callable[[onnx.ModelProto], onnx.ModelProto]]] = {
    "original": (None, lambda m: m),
    "onnxsim": ("onnxsim", _onnxsim),
    "onnxslim": ("onnxslim", _onnxslim),
    "onnxoptimizer": ("onnxoptimizer", _onnxoptimizer),
    "ort-basic": (None, _ort("basic")),
    "ort-extended": (None, _ort("extended")),
    "graphfix": (None, _graphfix),
    "graphfix-all": (None, _graphfix_all),
}


def _feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    from graphfix.feeds import make_feeds

    return dict(make_feeds(model, seed=seed, runs=1)[0])


def _nonstandard(model: onnx.ModelProto) -> int:
    """Nodes outside the standard ONNX domains (contrib ops tie a model to one runtime)."""
    from graphfix.graph import graphs

    return sum(
        node.domain not in _STANDARD_DOMAINS for graph in graphs(model.graph) for node in graph.node
    )


def _dynamic_dims(model: onnx.ModelProto) -> str:
    """Symbolic input dimensions, ``input:dim,dim;...`` (inputs that are initializers left out)."""
    inits = {t.name for t in model.graph.initializer}
    parts = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = [d.dim_param or "?" for d in vi.type.tensor_type.shape.dim
                if not d.HasField("dim_value")]
        if dims:
            parts.append(f"{vi.name}:{','.join(dims)}")
    return ";".join(parts)


def _session(model: onnx.ModelProto, level: str, threads: int) -> tuple[Any, float]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    start = time.perf_counter()
    session = ort_session(model, optimization=level, options=options)
    return session, time.perf_counter() - start


def _command_seconds(command: list[str], repeats: int) -> float | str:
    """The best wall time of ``command`` over ``repeats`` fresh processes, or its error."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            return f"exit {done.returncode}: {lines[-1][:120] if lines else ''}"
        best = min(best, elapsed)
    return best


def command_line_times(path: Path, repeats: int) -> dict[str, float | str]:
    """onnxsim's and graphfix's command lines on ``path``, each in a fresh process."""
    out: dict[str, float | str] = {}
    with tempfile.TemporaryDirectory(prefix="compare-peers-") as folder:
        target = str(Path(folder) / "out.onnx")
        commands = {
            "onnxsim": [sys.executable, "-m", "onnxsim", str(path), target, "0"],
            "graphfix": [sys.executable, "-m", "graphfix", "optimize", str(path), target,
                         "--no-verify", "--quiet"],
            "graphfix_verify": [sys.executable, "-m", "graphfix", "optimize", str(path), target,
                                "--quiet"],
        }
        for name, command in commands.items():
            if name == "onnxsim" and importlib.util.find_spec("onnxsim") is None:
                continue
            out[name] = _command_seconds(command, repeats)
            for leftover in Path(folder).iterdir():
                leftover.unlink()
    return out


def _abs_error(ref: Any, out: Any) -> float:
    """The largest absolute difference of one output: a tensor's elements, a sequence's items,
    a map's values (ZipMap's probabilities); inf where the structure, the keys or a text
    differ."""
    if isinstance(ref, list) or isinstance(out, list):
        if not (isinstance(ref, list) and isinstance(out, list)) or len(ref) != len(out):
            return math.inf
        return max((_abs_error(a, b) for a, b in zip(ref, out)), default=0.0)
    if isinstance(ref, dict) or isinstance(out, dict):
        if not (isinstance(ref, dict) and isinstance(out, dict)) or ref.keys() != out.keys():
            return math.inf
        return _abs_error(np.asarray(list(ref.values())), np.asarray(list(out.values())))
    ref, out = np.asarray(ref), np.asarray(out)
    if ref.shape != out.shape:
        return math.inf
    if not ref.size:
        return 0.0
    if ref.dtype.kind in "OUS" or out.dtype.kind in "OUS":
        return 0.0 if np.array_equal(ref, out) else math.inf
    return float(np.max(np.abs(out.astype(np.float64) - ref.astype(np.float64))))


def compare_model(path: Path, runs: int, threads: int, notes: list[str]) -> list[dict[str, Any]]:
    original = onnx.load(str(path))
    feeds = _feeds(original)
    rows: list[dict[str, Any]] = []
    sessions: dict[tuple[int, str], Any] = {}
    reference: dict[str, np.ndarray] | None = None
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
            first = str(exc).splitlines()[0][:120] if str(exc) else ""
            row["error"] = f"{type(exc).__name__}: {first}"
            continue
        row["time_s"] = time.perf_counter() - start
        row["nodes"] = len(out.graph.node)
        row["transposes"] = sum(n.op_type == "Transpose" for n in out.graph.node)
        row["bytes"] = out.ByteSize()
        row["nonstd_ops"] = _nonstandard(out)
        row["dynamic"] = _dynamic_dims(out)
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
                if runs <= 0:
                    for key in ("default", "opt_off"):
                        sessions.pop((len(rows) - 1, key), None)
            except Exception as exc:  # noqa: BLE001 - e.g. required inputs the feeds lack
                row["error"] = f"run: {str(exc).splitlines()[0][:120]}"
                for key in ("default", "opt_off"):
                    sessions.pop((len(rows) - 1, key), None)
                continue
            by_name = dict(zip(names, outs))
            if reference is None:
                reference = by_name
            missing = sorted(set(reference) - set(by_name))
            if missing:
                row["error"] = f"outputs missing: {missing}"
            row["max_abs_err"] = max(
                (_abs_error(ref, by_name[k]) for k, ref in reference.items() if k in by_name),
                default=0.0)
    # Latency: interleaved rounds across tools, after warm-up.
    timings: dict[tuple[int, str], list[float]] = {k: [] for k in sessions}
    for key, session in sessions.items():
        wanted = {i.name for i in session.get_inputs()}
        session.run(None, {k: v for k, v in feeds.items() if k in wanted})
    # Each round visits the sessions in a fresh random order: a fixed order gives the tools
    # late in the round a systematic handicap (caches, frequency).
    order = list(sessions.items())
    shuffle = np.random.default_rng(0).shuffle
    for _ in range(runs):
        shuffle(order)
        for key, session in order:
            wanted = {i.name for i in session.get_inputs()}
            f = {k: v for k, v in feeds.items() if k in wanted}
            start = time.perf_counter()
            session.run(None, f)
            timings[key].append(time.perf_counter() - start)
    for (index, mode), values in timings.items():
        rows[index][f"latency_ms_{mode}"] = 1000 * statistics.median(values)
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    cols = ["model", "tool", "time_s", "cli_s", "cli_verify_s", "nodes", "transposes", "nonstd_ops", "dynamic", "bytes",
            "loads_default", "loads_opt_off", "max_abs_err", "latency_ms_default",
            "latency_ms_opt_off", "session_s_default", "error"]
    if not any("latency_ms_default" in r for r in rows):
        cols = [c for c in cols if not c.startswith("latency")]
    if not any("cli_s" in r for r in rows):
        cols = [c for c in cols if not c.startswith("cli")]

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3g}"
        return "" if v is None else str(v)

    cells = [[fmt(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(x[i]) for x in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines += ["  ".join(x.ljust(w) for x, w in zip(cell, widths)) for cell in cells]
    return "\n".join(lines)


def check_model(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """graphfix against the peers on one model: figures and the list of failed criteria."""
    by_tool = {r["tool"]: r for r in rows if "nodes" in r}
    gf, original = by_tool.get("graphfix"), by_tool.get("original")
    out: dict[str, Any] = {"model": rows[0]["model"], "failures": []}
    if gf is None or original is None:
        out["failures"].append("graphfix failed: " + next(
            (r.get("error", "") for r in rows if r["tool"] == "graphfix"), ""))
        return out
    fails: list[str] = out["failures"]
    node_peers = {t: by_tool[t]["nodes"] for t in _NODE_PEERS if t in by_tool}
    if node_peers:
        best = min(node_peers, key=node_peers.__getitem__)
        out.update(nodes=gf["nodes"], best_peer_nodes=node_peers[best], best_peer=best)
        if gf["nodes"] > node_peers[best]:
            fails.append(f"nodes {gf['nodes']} > {best} {node_peers[best]}")
    t_peers = {t: by_tool[t]["transposes"] for t in _TRANSPOSE_PEERS if t in by_tool}
    if t_peers:
        low = min(t_peers, key=t_peers.__getitem__)
        out.update(transposes=gf["transposes"], min_peer_transposes=t_peers[low])
        if gf["transposes"] > t_peers[low]:
            fails.append(f"Transposes {gf['transposes']} > {low} {t_peers[low]}")
    if gf["nonstd_ops"]:
        fails.append(f"{gf['nonstd_ops']} nodes outside the standard domains")
    if gf["dynamic"] != original["dynamic"]:
        fails.append(f"input dims {original['dynamic']!r} -> {gf['dynamic']!r}")
    if not gf.get("loads_default") or not gf.get("loads_opt_off"):
        fails.append("does not load in ORT")
    # Latency (when measured): under ORT defaults no slower than the best peer; with ORT's
    # optimizations off no slower than ORT's own offline basic output; --ort-level all within
    # 5% of its own figure under defaults.
    latency = {t: r["latency_ms_default"] for t, r in by_tool.items()
               if "latency_ms_default" in r and t in _NODE_PEERS + ("ort-extended",)}
    if latency and "latency_ms_default" in gf:
        best = min(latency, key=latency.__getitem__)
        ratio = gf["latency_ms_default"] / latency[best]
        out.update(latency_ratio_vs_best_peer=ratio, best_latency_peer=best)
        if ratio > MAX_LATENCY_RATIO:
            fails.append(f"latency {ratio:.3f}x {best}'s under ORT defaults")
    basic, tied = by_tool.get("ort-basic", {}), by_tool.get("graphfix-all", {})
    for key, (num, den), limit, what in (
        ("offline_ratio_vs_ort_basic", (gf.get("latency_ms_opt_off"),
                                        basic.get("latency_ms_opt_off")),
         MAX_LATENCY_RATIO, "offline latency {:.3f}x ORT basic's"),
        ("all_offline_vs_own_default", (tied.get("latency_ms_opt_off"),
                                        tied.get("latency_ms_default")),
         1.05, "--ort-level all offline {:.3f}x its own latency under defaults"),
    ):
        if num is not None and den:
            out[key] = num / den
            if out[key] > limit:
                fails.append(what.format(out[key]))
    if "onnxsim" in by_tool and by_tool["onnxsim"]["time_s"] > 0:
        out["time_ratio_vs_onnxsim"] = gf["time_s"] / by_tool["onnxsim"]["time_s"]
    cli_gf, cli_sim = gf.get("cli_s"), by_tool.get("onnxsim", {}).get("cli_s")
    if isinstance(cli_gf, float) and isinstance(cli_sim, float):
        out["cli_time_ratio_vs_onnxsim"] = ratio = cli_gf / cli_sim
        if ratio > MAX_TIME_RATIO:
            fails.append(f"command-line time {cli_gf:.2f}s = {ratio:.2f}x onnxsim's "
                         f"{cli_sim:.2f}s")
    elif "time_ratio_vs_onnxsim" in out and out["time_ratio_vs_onnxsim"] > MAX_TIME_RATIO:
        fails.append(f"tool time {gf['time_s']:.2f}s = {out['time_ratio_vs_onnxsim']:.1f}x "
                     f"onnxsim's {by_tool['onnxsim']['time_s']:.2f}s")
    return out


def best_library_times(path: Path, rows: list[dict[str, Any]], repeats: int) -> None:
    """Time onnxsim's and graphfix's library calls ``repeats`` times in all, in turns (the
    first round is the one ``compare_model`` took), and keep the best of each in ``time_s``."""
    original = onnx.load(str(path))
    timed = [row for row in rows if row["tool"] in ("onnxsim", "graphfix") and "time_s" in row]
    for row in timed:
        row["time_runs"] = [row["time_s"]]
    for _ in range(repeats - 1):
        for row in timed:
            fn = TOOLS[row["tool"]][1]
            start = time.perf_counter()  # the copy counted, as in compare_model
            fn(copy.deepcopy(original))
            row["time_runs"].append(time.perf_counter() - start)
    for row in timed:
        row["time_s"] = min(row["time_runs"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", nargs="+", default=None,
                        help="model file names or stems to compare (default: all)")
    parser.add_argument("--no-cli", action="store_true",
                        help="do not time the command lines (onnxsim, graphfix optimize)")
    parser.add_argument("--cli-repeats", type=int, default=2)
    parser.add_argument("--time-repeats", type=int, default=1,
                        help="library calls of onnxsim and graphfix timed in turns, best kept")
    args = parser.parse_args(argv)
    notes: list[str] = []
    rows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    _shared_worker()  # it imports onnxsim now, before the first model is timed
    for path in sorted(args.corpus.glob("*.onnx")):
        if args.only and path.name not in args.only and path.stem not in args.only:
            continue
        model_rows = compare_model(path, args.runs, args.threads, notes)
        if args.time_repeats > 1:
            best_library_times(path, model_rows, args.time_repeats)
        if not args.no_cli:
            cli = command_line_times(path, args.cli_repeats)
            for row in model_rows:
                if row["tool"] in ("onnxsim", "graphfix"):
                    row["cli_s"] = cli.get(row["tool"])
                if row["tool"] == "graphfix":
                    row["cli_verify_s"] = cli.get("graphfix_verify")
        rows.extend(model_rows)
        checks.append(check_model(model_rows))
        print(f"done {path.name}", file=sys.stderr, flush=True)
    print(_table(rows))
    print()
    for check in checks:
        verdict = "; ".join(check["failures"]) or "ok"
        ratios = ", ".join(
            f"{label} {check[key]:.2f}x onnxsim" for key, label in (
                ("cli_time_ratio_vs_onnxsim", "command line"),
                ("time_ratio_vs_onnxsim", "library"),
            ) if key in check
        )
        print(f"check {check['model']}: {verdict}" + (f" (tool time: {ratios})" if ratios else ""))
    for note in notes:
        print(f"note: {note}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "checks": checks, "notes": notes,
                                         "runs": args.runs, "threads": args.threads}, indent=1))
    _shared_worker().close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
