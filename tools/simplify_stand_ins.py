"""The default pipeline with and without simplify's rules 10 and 11, on every model of folders.

    python tools/simplify_stand_ins.py WORLD WORLD/project [CORPUS ...]

Rule 10 keeps the weights onnxsim can neither fold nor rewrite in graphfix's process (they cross
to the worker as typed inputs); rule 11 folds Conv -> BatchNormalization there first. Both are
meant to change nothing in the output; the pass's options ``keep_weights_here`` and
``fold_batch_norms_here`` turn them off. Per model: ``same`` (the same graph and tensors, names
aside), ``same ops`` (the same op counts and initializer count; only values differ, as where
rule 11's float64 fusion rounds differently from onnxsim's float32 one), or the difference;
the pipeline's time each way and how many weights stood in. Exits 1 when a model differs.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections import Counter
from pathlib import Path

import onnx

import graphfix
from graphfix.passes._compare import same_graph
from graphfix.passes.simplify import OnnxsimWorker, Simplify, stand_in_names


def _optimize(model: onnx.ModelProto, worker: OnnxsimWorker,
              rules: bool) -> tuple[onnx.ModelProto, float]:
    """The default pipeline, its simplify pass with rules 10 and 11 on or off."""
    passes = [Simplify(worker=worker, keep_weights_here=rules, fold_batch_norms_here=rules)
              if name == "simplify" else name for name in graphfix.DEFAULT_PASSES]
    start = time.perf_counter()
    result = graphfix.optimize(copy.deepcopy(model), passes=passes, verify=False)
    return result.model, time.perf_counter() - start


def _verdict(a: onnx.ModelProto, b: onnx.ModelProto) -> str:
    if same_graph(a.graph, b.graph, names=False):
        return "same"
    ops_a = Counter(n.op_type for n in a.graph.node)
    ops_b = Counter(n.op_type for n in b.graph.node)
    if ops_a == ops_b and len(a.graph.initializer) == len(b.graph.initializer):
        return "same ops"
    return (f"DIFFERS: {len(a.graph.node)} nodes without, {len(b.graph.node)} with "
            f"(without only: {dict(ops_a - ops_b)}, with only: {dict(ops_b - ops_a)})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args(argv)
    counts: Counter[str] = Counter()
    totals = [0.0, 0.0]
    with OnnxsimWorker() as worker:
        for path in sorted(p for folder in args.folders for p in folder.glob("*.onnx")):
            model = graphfix.load(path)
            without, t_without = _optimize(model, worker, False)
            with_rules, t_with = _optimize(model, worker, True)
            stood_in = len(stand_in_names(model.graph))
            verdict = _verdict(without, with_rules)
            counts[verdict.split(":")[0]] += 1
            totals[0] += t_without
            totals[1] += t_with
            print(f"{path.name:40s} {verdict:12s} without {t_without:6.2f}s  with {t_with:6.2f}s"
                  f"  weights kept here {stood_in}", flush=True)
    print(f"\n{sum(counts.values())} models: " + ", ".join(f"{v} {k}" for k, v in counts.items())
          + f"; pipeline {totals[0]:.1f}s without the rules, {totals[1]:.1f}s with them")
    return 1 if counts["DIFFERS"] else 0


if __name__ == "__main__":
    sys.exit(main())
