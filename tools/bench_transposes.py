"""eliminate-transposes: how its run time scales, and what it buys under ONNX Runtime.

1. Scaling: converter-style NHWC graphs (every Conv wrapped in Transpose(0,3,1,2) ...
   Transpose(0,2,3,1), with Relu, residual Add, Mul by a per-channel constant) of about 1k, 10k
   and 100k nodes; the pass is timed on each (the best of --repeat runs, each on a fresh copy:
   the machine's own noise is one-sided) and the growth factors are printed (linear time means
   about 10x per step).
2. Latency: ORT CPU median latency of the original and the optimized model, under ORT's
   defaults and with ORT's graph optimizations off, measured by ``graphfix.benchmark``
   (interleaved rounds in one process, idle threads not spinning, a bootstrap interval on each
   speedup). The model is the one given with --model, or a built NHWC CNN.

    python tools/bench_transposes.py [--sizes 1000,10000,100000] [--repeat 3] [--model m.onnx]
                                     [--runs 50] [--threads 1] [--skip-scaling] [--skip-latency]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from graphfix.passes.eliminate_transposes import EliminateTransposes


def build_nhwc_graph(
    blocks: int, *, channels: int = 4, size: int = 4, kernel: int = 1, seed: int = 0
) -> onnx.ModelProto:
    """A converter-style NHWC network of ``blocks`` blocks, 8 nodes each:
    Transpose, Conv, Transpose, Relu, Mul (per-channel constant), Add (residual), and a
    Transpose pair around a second Conv every block."""
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    h = "x"
    for b in range(blocks):
        w1 = numpy_helper.from_array(
            (rng.standard_normal((channels, channels, kernel, kernel)) * 0.2).astype(np.float32),
            f"w{b}")
        gamma = numpy_helper.from_array(
            rng.uniform(0.5, 1.0, channels).astype(np.float32), f"g{b}")
        inits.extend([w1, gamma])
        pad = kernel // 2
        nodes.extend([
            helper.make_node("Transpose", [h], [f"a{b}"], perm=[0, 3, 1, 2]),
            helper.make_node("Conv", [f"a{b}", f"w{b}"], [f"c{b}"], pads=[pad] * 4),
            helper.make_node("Transpose", [f"c{b}"], [f"d{b}"], perm=[0, 2, 3, 1]),
            helper.make_node("Relu", [f"d{b}"], [f"r{b}"]),
            helper.make_node("Mul", [f"r{b}", f"g{b}"], [f"m{b}"]),
            helper.make_node("Transpose", [f"m{b}"], [f"e{b}"], perm=[0, 3, 1, 2]),
            helper.make_node("Transpose", [f"e{b}"], [f"f{b}"], perm=[0, 2, 3, 1]),
            helper.make_node("Add", [f"f{b}", h], [f"o{b}"]),
        ])
        h = f"o{b}"
    nodes.append(helper.make_node("ReduceMean", [h], ["y"], axes=[1, 2], keepdims=0))
    graph = helper.make_graph(
        nodes, "nhwc",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, size, size, channels])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def scaling(sizes: list[int], repeat: int = 3) -> None:
    print("scaling: eliminate-transposes on converter-style NHWC graphs")
    header = ("nodes", 8), ("transposes", 11), ("after", 6), ("seconds", 9), ("x nodes", 8), (
        "x time", 7)
    print(" ".join(f"{title:>{width}}" for title, width in header))
    previous: tuple[int, float] | None = None
    for target in sizes:
        elapsed = float("inf")
        for _ in range(max(1, repeat)):
            model = build_nhwc_graph(max(1, target // 8))
            nodes = len(model.graph.node)
            started = time.perf_counter()
            result = EliminateTransposes()(model)
            elapsed = min(elapsed, time.perf_counter() - started)
        growth = ""
        if previous:
            growth = f"{nodes / previous[0]:8.1f} {elapsed / previous[1]:7.1f}"
        print(f"{nodes:>8} {result.stats['transposes_before']:>11} "
              f"{result.stats['transposes_after']:>6} {elapsed:>9.3f} {growth}")
        previous = (nodes, elapsed)


def latency(model: onnx.ModelProto, runs: int, threads: int) -> None:
    """Both models under ORT's defaults and with its optimizations off, through
    :func:`graphfix.benchmark` (interleaved rounds, idle threads not spinning, a bootstrap
    interval on each speedup)."""
    import graphfix

    optimized = onnx.ModelProto()
    optimized.CopyFrom(model)
    result = EliminateTransposes()(optimized)
    print(f"latency: transposes {result.stats['transposes_before']} -> "
          f"{result.stats['transposes_after']}, nodes {len(model.graph.node)} -> "
          f"{len(optimized.graph.node)}; {runs} interleaved rounds, {threads} thread(s)")
    bench = graphfix.benchmark(optimized, baseline=model, provider="cpu", threads=threads,
                               runs=runs, offline=True)
    rows = (("ORT defaults", bench.baseline, bench.candidate, bench.comparison),
            ("ORT optimizations off", bench.baseline_offline, bench.candidate_offline,
             bench.both_offline_comparison))
    for label, before, after, comparison in rows:
        assert before is not None and after is not None and comparison is not None
        print(f"  {label:<22} original {before.median_ms:8.3f} ms   optimized "
              f"{after.median_ms:8.3f} ms   speedup x{comparison.speedup:.3f} "
              f"[{comparison.ci_low:.3f}, {comparison.ci_high:.3f}] {comparison.verdict}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000",
                        help="approximate node counts for the scaling run")
    parser.add_argument("--model", help="ONNX model for the latency run (default: a built CNN)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="timed runs per size for the scaling run; the best is printed")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    args = parser.parse_args(argv)
    if not args.skip_scaling:
        scaling([int(s) for s in args.sizes.split(",")], args.repeat)
    if not args.skip_latency:
        if args.model:
            model = onnx.load(args.model)
        else:
            model = build_nhwc_graph(12, channels=32, size=56, kernel=3)
        latency(model, args.runs, args.threads)


if __name__ == "__main__":
    main()
