"""Which pass order is best? Runs candidate orders of the default passes on every model in a
folder and prints nodes, Transposes and tool time for each, then the totals per order; with
``--runs N`` (N > 0) also ORT CPU latency (defaults and optimizations off, interleaved in one
process, order of sessions rotated every round).

    python tools/pipeline_order.py CORPUS_DIR [--runs 0] [--threads 2] [--json out.json]
                                              [--only NAME ...]

Orders run one after another for each model, starting with a different one for each model, so
that a load that drifts over the run does not always favour the same order.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

import graphfix
from graphfix import model_io
from graphfix.facts import op_histogram

__all__ = ["ORDERS", "main", "run_orders"]

ORDERS: dict[str, tuple[str, ...]] = {
    "default": tuple(graphfix.DEFAULT_PASSES),
    "simplify-before-ort": ("remove-initializer-inputs", "eliminate-transposes", "simplify",
                            "ort-offline", "eliminate-transposes"),
    "simplify-first": ("remove-initializer-inputs", "simplify", "eliminate-transposes",
                       "ort-offline", "eliminate-transposes"),
    "no-second-transposes": ("remove-initializer-inputs", "eliminate-transposes",
                             "ort-offline", "simplify"),
    "ort-offline-alone": ("ort-offline",),
}


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    from graphfix.feeds import make_feeds

    return dict(make_feeds(model, runs=1)[0])


def _latency(
    models: dict[str, onnx.ModelProto], feeds: dict[str, np.ndarray], runs: int, threads: int,
    level: str,
) -> dict[str, float]:
    import onnxruntime as ort

    sessions = {}
    for key, model in models.items():
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.log_severity_level = 3
        try:
            sessions[key] = model_io.ort_session(model, optimization=level, options=options)
        except Exception:  # noqa: BLE001 - a model ORT cannot load has no latency
            continue
        wanted = {i.name for i in sessions[key].get_inputs()}
        for _ in range(3):
            sessions[key].run(None, {k: v for k, v in feeds.items() if k in wanted})
    times: dict[str, list[float]] = {k: [] for k in sessions}
    keys = list(sessions)
    for round_ in range(runs):
        for key in keys[round_ % len(keys):] + keys[: round_ % len(keys)]:
            wanted = {i.name for i in sessions[key].get_inputs()}
            feed = {k: v for k, v in feeds.items() if k in wanted}
            started = time.perf_counter()
            sessions[key].run(None, feed)
            times[key].append(time.perf_counter() - started)
    return {k: 1e3 * statistics.median(v) for k, v in times.items() if v}


def run_orders(path: Path, orders: dict[str, tuple[str, ...]], shift: int) -> list[dict[str, Any]]:
    """Every order on one model: a row per order (and one for the original)."""
    original = model_io.load(path)
    hist = op_histogram(original)
    rows = [{"model": path.name, "order": "original", "nodes": sum(hist.values()),
             "transposes": hist.get("Transpose", 0), "tool_s": 0.0}]
    names = list(orders)
    names = names[shift % len(names):] + names[: shift % len(names)]
    by_name: dict[str, dict[str, Any]] = {}
    for name in names:
        row: dict[str, Any] = {"model": path.name, "order": name}
        by_name[name] = row
        started = time.perf_counter()
        try:
            result = graphfix.optimize(original, passes=orders[name], verify=False)
        except graphfix.GraphfixError as err:
            row["error"] = str(err).splitlines()[0]
            continue
        row["tool_s"] = time.perf_counter() - started
        hist = op_histogram(result.model)
        row["nodes"] = sum(hist.values())
        row["transposes"] = hist.get("Transpose", 0)
        row["skipped"] = [p.name for p in result.report.passes if p.skipped]
        row["pass_s"] = {p.name: round(p.seconds, 3) for p in result.report.passes}
        row["_model"] = result.model
    rows += [by_name[name] for name in orders]
    return rows


def _print_model(rows: list[dict[str, Any]]) -> None:
    print(f"\n{rows[0]['model']}")
    print(f"  {'order':22} {'nodes':>6} {'Transp':>6} {'tool s':>7} {'ORT ms':>8} {'off ms':>8}"
          "  skipped / error")
    for row in rows:
        if "error" in row:
            print(f"  {row['order']:22} {'':>6} {'':>6} {'':>7} {'':>8} {'':>8}  {row['error']}")
            continue
        on, off = row.get("latency_ms_default"), row.get("latency_ms_opt_off")
        print(f"  {row['order']:22} {row['nodes']:>6} {row['transposes']:>6} "
              f"{row['tool_s']:>7.2f} {'' if on is None else f'{on:.2f}':>8} "
              f"{'' if off is None else f'{off:.2f}':>8}  {', '.join(row.get('skipped', []))}")


def _summary(all_rows: list[dict[str, Any]], orders: Sequence[str]) -> list[dict[str, Any]]:
    """Per order: totals over the models every order ran on, and models better/worse than
    the default order on nodes and Transposes."""
    models = sorted({r["model"] for r in all_rows})
    ok = [m for m in models
          if all("nodes" in r for r in all_rows if r["model"] == m)]
    index = {(r["model"], r["order"]): r for r in all_rows}
    out = []
    for name in orders:
        rows = [index[(m, name)] for m in ok]
        base = [index[(m, "default")] for m in ok]
        out.append({
            "order": name,
            "models": len(rows),
            "nodes": sum(r["nodes"] for r in rows),
            "transposes": sum(r["transposes"] for r in rows),
            "tool_s": sum(r["tool_s"] for r in rows),
            "fewer_nodes": [r["model"] for r, b in zip(rows, base) if r["nodes"] < b["nodes"]],
            "more_nodes": [r["model"] for r, b in zip(rows, base) if r["nodes"] > b["nodes"]],
            "more_transposes": [r["model"] for r, b in zip(rows, base)
                                if r["transposes"] > b["transposes"]],
            "fewer_transposes": [r["model"] for r, b in zip(rows, base)
                                 if r["transposes"] < b["transposes"]],
        })
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--runs", type=int, default=0,
                        help="latency rounds per model (0: structure and tool time only)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", nargs="+", default=None,
                        help="model file names or stems (default: every .onnx in the folder)")
    args = parser.parse_args(argv)
    all_rows: list[dict[str, Any]] = []
    paths = [p for p in sorted(args.corpus.glob("*.onnx"))
             if not args.only or p.name in args.only or p.stem in args.only]
    for shift, path in enumerate(paths):
        rows = run_orders(path, ORDERS, shift)
        if args.runs > 0:
            models = {r["order"]: r["_model"] for r in rows if "_model" in r}
            models["original"] = model_io.load(path)
            feeds = _feeds(models["original"])
            for level, key in (("all", "default"), ("disabled", "opt_off")):
                for order, ms in _latency(models, feeds, args.runs, args.threads, level).items():
                    next(r for r in rows if r["order"] == order)[f"latency_ms_{key}"] = ms
        for row in rows:
            row.pop("_model", None)
        _print_model(rows)
        sys.stdout.flush()
        all_rows += rows
    summary = _summary(all_rows, list(ORDERS))
    print(f"\n{'order':22} {'models':>6} {'nodes':>7} {'Transp':>6} {'tool s':>8}  "
          "vs default: fewer / more nodes, more Transposes")
    for s in summary:
        print(f"{s['order']:22} {s['models']:>6} {s['nodes']:>7} {s['transposes']:>6} "
              f"{s['tool_s']:>8.1f}  {len(s['fewer_nodes'])} / {len(s['more_nodes'])}, "
              f"{len(s['more_transposes'])}")
    if args.json:
        args.json.write_text(json.dumps({"rows": all_rows, "summary": summary,
                                         "runs": args.runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
