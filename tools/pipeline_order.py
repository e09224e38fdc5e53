"""Which pass order is best? Runs candidate orders of the default passes on every model in a
folder and prints nodes, Transposes, tool time and ORT CPU latency (defaults and optimizations
off, interleaved in one process) for each.

    python tools/pipeline_order.py CORPUS_DIR [--runs 30] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx

import graphfix
from graphfix import model_io

ORDERS: dict[str, tuple[str, ...]] = {
    "default": graphfix.DEFAULT_PASSES,
    "simplify-first": ("remove-initializer-inputs", "simplify", "eliminate-transposes",
                       "ort-offline", "eliminate-transposes"),
    "ort-last": ("remove-initializer-inputs", "eliminate-transposes", "simplify",
                 "ort-offline", "eliminate-transposes"),
    "no-second-transposes": ("remove-initializer-inputs", "eliminate-transposes",
                             "ort-offline", "simplify"),
}


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    from graphfix.validate.feeds import make_feeds

    first = make_feeds(model)[0]
    return getattr(first, "arrays", first)


def _latency(models: dict[str, onnx.ModelProto], feeds, runs: int, threads: int, level: str):
    import onnxruntime as ort

    sessions = {}
    for key, model in models.items():
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.log_severity_level = 3
        sessions[key] = model_io.ort_session(model, optimization=level, options=options)
        for _ in range(3):
            sessions[key].run(None, feeds)
    times: dict[str, list[float]] = {k: [] for k in sessions}
    keys = list(sessions)
    for round_ in range(runs):
        for key in keys[round_ % len(keys):] + keys[: round_ % len(keys)]:
            started = time.perf_counter()
            sessions[key].run(None, feeds)
            times[key].append(time.perf_counter() - started)
    return {k: 1e3 * statistics.median(v) for k, v in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    for path in sorted(args.corpus.glob("*.onnx")):
        original = model_io.load(path)
        results = {"original": (original, 0.0)}
        for name, order in ORDERS.items():
            started = time.perf_counter()
            try:
                out = graphfix.optimize(original, passes=order, verify=False).model
            except graphfix.GraphfixError as err:
                print(f"{path.name} {name}: {err}")
                continue
            results[name] = (out, time.perf_counter() - started)
        feeds = _feeds(original)
        models = {k: m for k, (m, _) in results.items()}
        on = _latency(models, feeds, args.runs, args.threads, "all")
        off = _latency(models, feeds, args.runs, args.threads, "disabled")
        print(f"\n{path.name}")
        print(f"  {'order':22} {'nodes':>6} {'Transp':>6} {'tool s':>7} {'ORT ms':>8} {'off ms':>8}")
        for key, (model, seconds) in results.items():
            hist = graphfix.report.op_histogram(model)
            print(f"  {key:22} {sum(hist.values()):>6} {hist.get('Transpose', 0):>6} "
                  f"{seconds:>7.2f} {on[key]:>8.2f} {off[key]:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
