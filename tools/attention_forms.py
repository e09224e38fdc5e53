"""The two forms of graphfix's own attention fusion, timed against each other.

    python tools/attention_forms.py MODEL.onnx ... [--provider cpu|cuda] [--runs N]
                                    [--shape NAME:DIMS ...] [--json out.json]

For each model, the fuse-transformer pass (heads read from the graph) is run twice: as it is,
where self-attention blocks with q, k and v projected from one input become ``Attention`` with
the three projections packed into one weight, and with that packing off, where every block
becomes ``MultiHeadAttention`` over the three projections. Both are checked against the
original on parity's inputs (float32 tolerance), then timed against each other interleaved in
one process (``graphfix.bench``: the packed form as the candidate, its speedup over the
unpacked form with a 95% interval). Models where nothing is packed are listed as such.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import onnx

from graphfix.model_io import load_external_values
from graphfix.passes._measuring import make_feeds, run_outputs, tolerance_used
from graphfix.passes.fuse_transformer import FuseTransformer
from graphfix.validate.bench import benchmark


def _fused(model: onnx.ModelProto, provider: str, packed: bool) -> onnx.ModelProto:
    work = onnx.ModelProto()
    work.CopyFrom(model)
    return FuseTransformer(provider=provider, packed_attention=packed)(work).model


def _ops(model: onnx.ModelProto) -> dict[str, int]:
    return dict(sorted(Counter(n.op_type for n in model.graph.node
                               if n.domain == "com.microsoft").items()))


def _error(model: onnx.ModelProto, fused: onnx.ModelProto) -> float:
    feeds = make_feeds(model, seed=0, runs=None, input_shapes=None)
    names = [o.name for o in model.graph.output]
    expected, got = run_outputs(model, feeds, names), run_outputs(fused, feeds, names)
    return max(float(tolerance_used(e[n], g[n], 1e-4, 1e-4))
               for e, g in zip(expected, got) for n in names if e[n].dtype.kind == "f")


def measure(path: Path, provider: str, runs: int, shapes: dict[str, list[int]]
            ) -> dict[str, Any]:
    model = onnx.load(path)
    load_external_values(model)
    row: dict[str, Any] = {"model": path.stem}
    forms = {"packed": _fused(model, provider, True), "unpacked": _fused(model, provider, False)}
    for label, fused in forms.items():
        row[label] = {"ops": _ops(fused), "error": round(_error(model, fused), 4)}
    if row["packed"]["ops"].get("Attention", 0) == row["unpacked"]["ops"].get("Attention", 0):
        row["note"] = "nothing packed"
        return row
    result = benchmark(forms["packed"], baseline=forms["unpacked"], provider=provider,
                       runs=runs, warmup=max(5, runs // 10), input_shapes=shapes or None)
    row.update(speedup=round(result.speedup, 3), ci=[round(result.ci_low, 3),
                                                     round(result.ci_high, 3)],
               packed_ms=round(result.candidate.median_ms, 4),
               unpacked_ms=round(result.baseline.median_ms, 4))
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--provider", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--shape", action="append", default=[],
                        help="NAME:DIMS, e.g. input_ids:1x128 (the timing sizes)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    shapes = {s.split(":")[0]: [int(d) for d in s.split(":")[1].split("x")] for s in args.shape}
    rows = []
    for path in args.models:
        try:
            row = measure(path, args.provider, args.runs, shapes)
        except Exception as err:  # noqa: BLE001 - one model's failure is reported, not fatal
            row = {"model": path.stem, "failed": f"{type(err).__name__}: {err}"[:300]}
        rows.append(row)
        if "speedup" in row:
            print(f"{row['model']:28s} packed {row['packed']['ops']}  {row['speedup']:.3f}x "
                  f"[{row['ci'][0]:.3f}, {row['ci'][1]:.3f}] the unpacked form "
                  f"({row['unpacked_ms']:.3f} -> {row['packed_ms']:.3f} ms), errors "
                  f"{row['packed']['error']} / {row['unpacked']['error']} of tolerance",
                  flush=True)
        else:
            print(f"{row['model']:28s} {row.get('note') or row.get('failed')}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
