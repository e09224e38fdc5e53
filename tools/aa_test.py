"""A/A test of graphfix's benchmark: each model against an identical copy of itself.

    python tools/aa_test.py MODEL... [--repeats 10] [--runs 50] [--warmup 10] [--threads N]
                            [--provider cpu|cuda|auto] [--allow-spinning] [--json out.json]

MODEL is an .onnx file or one of the built-in models: mobilenetv2 (NHWC, 160x160, width 1.0),
resnet (NHWC ResNet-style, 96x96, width 0.5), transformer (BERT-style encoder, 4 layers,
hidden 256, sequence 128). Each repeat is a fresh :func:`graphfix.validate.bench.benchmark`
(new sessions, seed = repeat index). Since both sides compute the same graph, a sound method
says "no significant difference" in about 95% of repeats (its confidence level), with ratios
close to 1; the script prints every ratio and interval and how many repeats said "no
significant difference" with a ratio in [0.95, 1.05].
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx

from graphfix import model_io
from graphfix.validate.bench import NO_DIFFERENCE, benchmark

__all__ = ["main", "aa_test", "BUILTIN"]



def _mobilenetv2() -> onnx.ModelProto:
    from graphfix.models.nhwc import mobilenetv2_nhwc

    return mobilenetv2_nhwc(image_size=160, width=1.0, dynamic_batch=False)


def _resnet() -> onnx.ModelProto:
    from graphfix.models.nhwc import resnet50_nhwc

    return resnet50_nhwc(image_size=96, width=0.5, dynamic_batch=False)


def _transformer() -> onnx.ModelProto:
    from graphfix.models.transformer import transformer_encoder

    return transformer_encoder(layers=4, hidden=256, heads=4, ffn=1024, seq=128, batch=1)


BUILTIN: dict[str, Callable[[], onnx.ModelProto]] = {
    "mobilenetv2": _mobilenetv2,
    "resnet": _resnet,
    "transformer": _transformer,
}


def _load(spec: str) -> onnx.ModelProto:
    if spec in BUILTIN:
        return BUILTIN[spec]()
    return model_io.load(spec)


def aa_test(
    model: onnx.ModelProto,
    *,
    repeats: int = 10,
    runs: int = 50,
    warmup: int = 10,
    threads: int | None = None,
    provider: str = "cpu",
    allow_spinning: bool = False,
    band: tuple[float, float] = (0.95, 1.05),
) -> dict[str, Any]:
    """Benchmark ``model`` against a copy ``repeats`` times; every ratio, interval and verdict."""
    twin = copy.deepcopy(model)
    rows = []
    for repeat in range(repeats):
        result = benchmark(
            model, baseline=twin, provider=provider, threads=threads, warmup=warmup, runs=runs,
            seed=repeat, allow_spinning=allow_spinning,
        )
        rows.append({
            "repeat": repeat,
            "speedup": result.speedup,
            "ci_low": result.ci_low,
            "ci_high": result.ci_high,
            "verdict": result.verdict,
            "candidate_median_ms": result.candidate.median_ms,
            "baseline_median_ms": result.baseline.median_ms if result.baseline else None,
            "provider": result.provider,
            "threads": result.threads,
        })
    agreeing = sum(
        1 for row in rows
        if row["verdict"] == NO_DIFFERENCE and band[0] <= row["speedup"] <= band[1]
    )
    return {"repeats": repeats, "runs": runs, "warmup": warmup, "rows": rows,
            "no_difference_in_band": agreeing,
            "no_difference": sum(1 for row in rows if row["verdict"] == NO_DIFFERENCE)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help=f".onnx files or {', '.join(BUILTIN)}")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--provider", default="cpu", choices=["cpu", "cuda", "auto"])
    parser.add_argument("--allow-spinning", action="store_true",
                        help="let idle ORT threads spin (ORT's default; off in graphfix's bench)")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    args = parser.parse_args(argv)

    results: dict[str, Any] = {}
    for spec in args.models:
        model = _load(spec)
        started = time.perf_counter()
        summary = aa_test(
            model, repeats=args.repeats, runs=args.runs, warmup=args.warmup,
            threads=args.threads, provider=args.provider, allow_spinning=args.allow_spinning,
        )
        summary["seconds"] = time.perf_counter() - started
        results[spec] = summary
        print(f"{spec}: {len(model.graph.node)} nodes, {args.repeats} repeats of {args.runs} "
              f"rounds ({summary['seconds']:.0f} s)")
        for row in summary["rows"]:
            print(f"  #{row['repeat']:<2} ratio {row['speedup']:.3f}  "
                  f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}]  {row['verdict']:<26} "
                  f"median A {row['baseline_median_ms']:.3f} ms  B "
                  f"{row['candidate_median_ms']:.3f} ms")
        print(f"  no significant difference: {summary['no_difference']}/{args.repeats}; "
              f"with a ratio in [0.95, 1.05]: {summary['no_difference_in_band']}/{args.repeats}")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
