"""The cost of initializers listed as graph inputs, measured under ONNX Runtime's defaults.

For each of the onnx package's "light" models, re-declared at IR 7 with every initializer still
listed as a graph input (so ORT must treat them as overridable inputs), compare against the same
model after graphfix's remove-initializer-inputs: nodes left after ORT's own optimization,
session-creation time, and median latency. Both variants are measured side by side in one process,
in interleaved rounds, so machine noise hits both alike.

    python tools/bench_initializer_inputs.py [--runs 30] [--threads 2] [--models resnet50,vgg19]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

import graphfix.passes
from graphfix import model_io

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _options(threads: int, optimized_path: str | None = None) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    if optimized_path:
        options.optimized_model_filepath = optimized_path
    return options


def _nodes_after_ort(data: bytes, threads: int) -> int:
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "opt.onnx")
        ort.InferenceSession(data, _options(threads, path), providers=["CPUExecutionProvider"])
        return len(onnx.load(path, load_external_data=False).graph.node)


def _session(data: bytes, threads: int) -> tuple[ort.InferenceSession, float]:
    started = time.perf_counter()
    session = ort.InferenceSession(data, _options(threads), providers=["CPUExecutionProvider"])
    return session, time.perf_counter() - started


def measure(name: str, runs: int, threads: int) -> dict[str, float]:
    model = onnx.load(str(LIGHT / f"light_{name}.onnx"))
    model.ir_version = 7
    before = model.SerializeToString()
    after_model = graphfix.passes.remove_initializer_inputs(model)
    after_model.ir_version = min(after_model.ir_version, model_io.max_ir_version())
    after = after_model.SerializeToString()

    initializers = {i.name for i in after_model.graph.initializer}
    (data_input,) = [i for i in after_model.graph.input if i.name not in initializers]
    shape = [d.dim_value for d in data_input.type.tensor_type.shape.dim]
    feed = {data_input.name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}

    create = {"before": [], "after": []}
    for _ in range(3):
        for key, data in (("before", before), ("after", after)):
            create[key].append(_session(data, threads)[1])
    sessions = {"before": _session(before, threads)[0], "after": _session(after, threads)[0]}
    for session in sessions.values():
        for _ in range(3):
            session.run(None, feed)
    times: dict[str, list[float]] = {"before": [], "after": []}
    for round_ in range(runs):
        order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
        for key in order:
            started = time.perf_counter()
            sessions[key].run(None, feed)
            times[key].append(time.perf_counter() - started)
    return {
        "nodes_before": _nodes_after_ort(before, threads),
        "nodes_after": _nodes_after_ort(after, threads),
        "create_before_ms": 1e3 * statistics.median(create["before"]),
        "create_after_ms": 1e3 * statistics.median(create["after"]),
        "latency_before_ms": 1e3 * statistics.median(times["before"]),
        "latency_after_ms": 1e3 * statistics.median(times["after"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="interleaved timed rounds per model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--models", default=None, help="comma-separated names (default: all 9)")
    args = parser.parse_args()
    names = (args.models.split(",") if args.models else
             sorted(p.stem.removeprefix("light_") for p in LIGHT.glob("light_*.onnx")))
    header = (f"{'model':18} {'ORT nodes':>14} {'create ms':>17} {'latency ms':>19} "
              f"{'speedup':>8}")
    print(header)
    print("-" * len(header))
    for name in names:
        r = measure(name, args.runs, args.threads)
        print(
            f"{name:18} {r['nodes_before']:>6.0f} -> {r['nodes_after']:<5.0f} "
            f"{r['create_before_ms']:>7.1f} -> {r['create_after_ms']:<7.1f} "
            f"{r['latency_before_ms']:>8.2f} -> {r['latency_after_ms']:<8.2f} "
            f"{r['latency_before_ms'] / r['latency_after_ms']:>7.2f}x"
        )


if __name__ == "__main__":
    main()
