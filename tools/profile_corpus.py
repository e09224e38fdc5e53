"""graphfix profile over folders of models: accounting, profiler overhead, the findings, and the
command's cost against bench's.

    python tools/profile_corpus.py FOLDER_OR_MODEL... [--runs 50] [--threads 2]
                                   [--only NAME...] [--float64] [--json out.json]

Per model, in one process (the model loaded once): ``graphfix.benchmark(model)``, then
``graphfix.profile(model, try_fixes=False)`` and ``graphfix.profile(model)``, each timed as a
library call, on the CPU. Printed per model: the median latency, the share of each timed call
the node times account for (and, below 90%, the framework overhead per executed node that
explains the gap), the profiler's overhead (median with the profiler / without), profile's time
over bench's, and the findings with what each measured fix bought.

Expectations checked and printed at the end: a model with initializers listed as inputs gets
``initializer-inputs`` with a measured speedup; a converter's NHWC model (name ending in
``_nhwc``, or ``keras_..._raw``) gets ``nhwc-transposes``; ``--float64`` adds a float64 export
of a small torch MLP (needs torch) and expects ``float64``; a model named in ``--clean`` expects no finding
but those this run's measurements earned (a latency tail on a busy machine, a batch size that
pays per sample).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import onnx

import graphfix
from graphfix import model_io

__all__ = ["profile_one", "main"]


def _models(paths: list[Path], only: list[str] | None) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        found += sorted(path.glob("*.onnx")) if path.is_dir() else [path]
    return [p for p in found if not only or p.stem in only]


def _float64_mlp(folder: Path) -> Path:
    """A torch MLP (Linear, Tanh, LayerNorm, Softmax) exported in float64 (ONNX Runtime's CPU
    provider has no float64 Erf, so no GELU)."""
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.Tanh(), torch.nn.LayerNorm(512),
        torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10),
        torch.nn.Softmax(dim=-1)).double().eval()
    path = folder / "mlp_float64.onnx"
    torch.onnx.export(net, (torch.randn(8, 256, dtype=torch.float64),), str(path),
                      dynamo=False, input_names=["x"], output_names=["y"])
    return path


def profile_one(path: Path, *, runs: int, threads: int) -> dict[str, Any]:
    model = model_io.load(path)
    options = {"provider": "cpu", "runs": runs, "threads": threads}
    started = time.perf_counter()
    graphfix.benchmark(model, **options)
    bench_s = time.perf_counter() - started
    started = time.perf_counter()
    plain = graphfix.profile(model, try_fixes=False, names=(path.name, ""), **options)
    profile_s = time.perf_counter() - started
    started = time.perf_counter()
    tried = graphfix.profile(model, names=(path.name, ""), **options)
    tried_s = time.perf_counter() - started
    a = plain.model.accounting
    nodes = len(plain.model.nodes)
    return {
        "model": path.name, "latency_ms": a.latency_ms, "accounted": a.accounted,
        "framework_ms": a.framework_ms,
        "framework_us_per_node": 1e3 * a.framework_ms / max(nodes, 1), "nodes": nodes,
        "profiler_overhead": a.profiler_overhead, "bench_s": bench_s, "profile_s": profile_s,
        "profile_try_s": tried_s,
        "findings": [f.to_dict() for f in tried.findings],
    }


def _expect(row: dict[str, Any], model: onnx.ModelProto, clean: set[str]) -> list[str]:
    kinds = {f["kind"]: f for f in row["findings"]}
    problems = []
    initializers = {i.name for i in model.graph.initializer}
    if any(v.name in initializers for v in model.graph.input):
        found = kinds.get("initializer-inputs")
        if found is None or found["measured"] is None:
            problems.append("initializer-inputs missing or not measured")
    stem = row["model"][:-5]
    # A converter's channels-last model: the corpus's ``*_nhwc`` and tf2onnx's raw Keras exports
    # (``keras_*_raw``); the world corpus's ``*_fp16_raw`` are PyTorch exports, channels-first.
    if stem.endswith("_nhwc") or (stem.startswith("keras_") and stem.endswith("_raw")):
        if "nhwc-transposes" not in kinds:
            problems.append("nhwc-transposes missing")
    if "float64" in stem and "float64" not in kinds:
        problems.append("float64 missing")
    # A clean model may still earn what this run measured: a tail on a busy machine, a batch
    # that pays per sample.
    earned = {"latency-variance"} | {k for k, f in kinds.items()
                                     if f["measured"] and f["measured"]["verdict"] == "faster"}
    if stem in clean and set(kinds) - earned:
        problems.append(f"clean model got {sorted(set(kinds) - earned)}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", nargs="+")
    parser.add_argument("--clean", nargs="*", default=["torch_small_cnn", "resnet18_dynamo"])
    parser.add_argument("--float64", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        paths = _models(args.paths, args.only)
        if args.float64:
            paths.append(_float64_mlp(Path(folder)))
        rows, failed = [], 0
        for path in paths:
            try:
                row = profile_one(path, runs=args.runs, threads=args.threads)
            except graphfix.GraphfixError as err:
                print(f"{path.name}: {err}")
                continue
            row["problems"] = _expect(row, model_io.load(path, load_external_data=False),
                                      set(args.clean))
            failed += bool(row["problems"])
            rows.append(row)
            gap = "" if row["accounted"] >= 0.9 else (
                f" (gap: framework overhead {1e3 * row['framework_ms']:.0f} us per call, the "
                f"Python binding's fixed cost and the executor's between {row['nodes']} nodes: "
                f"{row['framework_us_per_node']:.1f} us per node)")
            print(f"{row['model']}: {row['latency_ms']:.3f} ms, accounted {row['accounted']:.1%}"
                  f"{gap}, profiler {row['profiler_overhead']:.2f}x, profile/bench "
                  f"{row['profile_s'] / row['bench_s']:.2f}x ({row['profile_s']:.1f} s / "
                  f"{row['bench_s']:.1f} s; fixes tried {row['profile_try_s']:.1f} s)")
            for found in row["findings"]:
                measured = found["measured"]
                bought = (f" -> {measured['speedup']:.2f}x [{measured['ci_low']:.2f}, "
                          f"{measured['ci_high']:.2f}] {measured['verdict']}"
                          if measured else "")
                print(f"    {found['kind']}{bought}")
            for problem in row["problems"]:
                print(f"    EXPECTATION FAILED: {problem}")
    accounted = [r for r in rows if r["accounted"] >= 0.9]
    print(f"{len(accounted)}/{len(rows)} models with >= 90% of the call in node times; "
          f"the rest explained by per-node framework overhead; "
          f"{len(rows) - failed}/{len(rows)} models meet the finding expectations")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
