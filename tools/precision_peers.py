"""float16 by graphfix and by its anchors, side by side on the same models, same machine.

    python tools/precision_peers.py WORLD [--only NAME ...] [--json out.json] [--bench-runs N]
                                          [--repeat N]

For each model of the world corpus (``python tools/world_corpus.py WORLD``), each tool lowers
the float32 original to float16 with float32 inputs and outputs:

- ``graphfix``: convert-precision alone (islands chosen by measured error), with one ONNX
  Runtime worker (its default-session check) kept across the conversions, as a pipeline or a
  caller converting many models keeps it (``ConvertPrecision(worker=...)``);
- ``graphfix-cold``: the same, each conversion starting and stopping a worker of its own (its
  interpreter's import, about 0.1 s, overlapped with the search);
- ``graphfix-1set``: graphfix measuring on the one input set cc-auto validates on (parity's
  first) instead of parity's two: the two searches' costs on equal inputs (each result is
  still judged on both sets below);
- ``cc-fp16``: onnxconverter-common's ``convert_float_to_float16`` with its defaults;
- ``cc-auto``: onnxconverter-common's ``auto_convert_mixed_precision`` (bisection on a
  validation callback), validated by the same bar graphfix aims at (every output within half
  of parity's float16 tolerance on the first set of parity's inputs);
- ``onnxslim``: ``onnxslim.slim(model, dtype="fp16")``;
- ``olive``: Olive's ``OnnxFloatToFloat16`` pass (``keep_io_types``);
- ``ort``: ONNX Runtime's transformers converter (``OnnxModel.convert_float_to_float16``,
  ``keep_io_types``).

Each result runs on ONNX Runtime's CPU provider (optimizations off) on parity's generated inputs
(two sizes of the dynamic dimensions), and each output is compared with the original's in
units of parity's float16 tolerance (``|d| / (1e-2 * RMS(ref) + 1e-2 * |ref|)``, worst element;
``nan``/``inf`` when NaN or Inf appears). Printed per model and tool: the worst output's
error, whether every output is within tolerance, the Casts between float types in the result
(island borders and the signature's; the exporter's Casts of integers are not counted), the
tool's wall time (with ``--repeat N``, the median of N runs, the tools in rotating order).
The last lines compare graphfix with ``auto_convert_mixed_precision`` where both are within
tolerance: Casts (and the signature's Casts, one per float32 input and output, which any
fully lowered model with a float32 signature needs) and time.
graphfix's bfloat16 is reported as its estimate (ONNX Runtime's CPU provider has no bfloat16
kernels). With ``--bench-runs N`` each model's graphfix float16 result is timed against the
original under ONNX Runtime's defaults on the CPU (interleaved rounds, bootstrap interval).
Needs the ``tools`` extra (onnxconverter-common, onnxslim, olive-ai).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx

import graphfix
from graphfix.model_io import load_external_values
from graphfix.passes._measuring import make_feeds, run_outputs, tolerance_used
from graphfix.validate.stats import bootstrap_speedup
from graphfix.passes.convert_precision import ConvertPrecision
from graphfix.passes.convert_precision.measure import tensor_types
from graphfix.passes._runtime_worker import RuntimeWorker

TRANSFORMERS = ["bert_legacy", "bert_dynamo", "distilbert_legacy", "gpt2_legacy", "gpt2_dynamo",
                "vit_hf_legacy", "vit_tv_legacy", "llama_legacy", "llama_dynamo",
                "t5_encoder_legacy", "bart_encoder_legacy", "whisper_encoder_legacy",
                "wav2vec2_legacy", "qwen2_legacy"]
CNNS = ["resnet18_legacy", "resnet18_dynamo", "mobilenet_v3_small_legacy",
        "efficientnet_b0_legacy", "convnext_legacy", "swin_legacy", "lraspp_legacy_dynhw"]
BAR = 0.5  # of parity's float16 tolerance: the bar graphfix aims at, given to cc-auto too


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


# graphfix's ONNX Runtime worker, kept across the conversions (opened by main)
_WORKER = RuntimeWorker()


def _graphfix(model: onnx.ModelProto, feeds: list[dict[str, Any]]) -> onnx.ModelProto:
    return ConvertPrecision(feeds=feeds, worker=_WORKER)(model).model


def _graphfix_cold(model: onnx.ModelProto, feeds: list[dict[str, Any]]) -> onnx.ModelProto:
    return ConvertPrecision(feeds=feeds)(model).model


def _graphfix_one_set(model: onnx.ModelProto, feeds: list[dict[str, Any]]) -> onnx.ModelProto:
    return ConvertPrecision(feeds=feeds[:1], worker=_WORKER)(model).model


def _cc_fp16(model: onnx.ModelProto, feeds: list[dict[str, Any]]) -> onnx.ModelProto:
    from onnxconverter_common import float16

    return float16.convert_float_to_float16(model, keep_io_types=True)


def _cc_auto(model: onnx.ModelProto, feeds: list[dict[str, Any]]) -> onnx.ModelProto:
    from onnxconverter_common import auto_mixed_precision

    def validate(reference: list[np.ndarray], candidate: list[np.ndarray]) -> bool:
        return all(tolerance_used(r, c, 1e-2, 1e-2) <= BAR for r, c in zip(reference, candidate))

    return auto_mixed_precision.auto_convert_mixed_precision(
        model, feeds[0], validate_fn=validate, keep_io_types=True)


def _onnxslim(model: onnx.ModelProto, feeds: list[dict[str, Any]]) -> onnx.ModelProto:
    import onnxslim

    return onnxslim.slim(model, dtype="fp16")


def run_olive(model: onnx.ModelProto, passes: dict[str, Any]) -> onnx.ModelProto:
    """``model`` through Olive's ``passes`` (its workflow config's ``passes``) on the CPU."""
    from olive.workflows import run as olive_run

    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "model.onnx"
        onnx.save(model, source)
        olive_run({
            "input_model": {"type": "ONNXModel", "model_path": str(source)},
            "systems": {"local": {"type": "LocalSystem", "accelerators": [
                {"device": "cpu", "execution_providers": ["CPUExecutionProvider"]}]}},
            "passes": passes,
            "host": "local", "target": "local", "log_severity_level": 3,
            "output_dir": str(Path(folder) / "out"), "cache_dir": str(Path(folder) / "cache"),
        })
        found = sorted((Path(folder) / "out").rglob("*.onnx"))
        if not found:
            raise RuntimeError("Olive wrote no model")
        return onnx.load(found[0])


def _olive(model: onnx.ModelProto, feeds: list[dict[str, Any]]) -> onnx.ModelProto:
    return run_olive(model, {"fp16": {"type": "OnnxFloatToFloat16", "keep_io_types": True}})


def _ort(model: onnx.ModelProto, feeds: list[dict[str, Any]]) -> onnx.ModelProto:
    from onnxruntime.transformers.onnx_model import OnnxModel

    wrapped = OnnxModel(model)
    wrapped.convert_float_to_float16(keep_io_types=True)
    return wrapped.model


TOOLS: dict[str, Callable[[onnx.ModelProto, list[dict[str, Any]]], onnx.ModelProto]] = {
    "graphfix": _graphfix, "graphfix-cold": _graphfix_cold,
    "graphfix-1set": _graphfix_one_set, "cc-fp16": _cc_fp16,
    "cc-auto": _cc_auto, "onnxslim": _onnxslim,
    "olive": _olive, "ort": _ort,
}


def _error(reference: list[dict[str, np.ndarray]], model: onnx.ModelProto,
           feeds: list[dict[str, Any]]) -> tuple[float, str]:
    """The worst output's error in float16 tolerance units, and a note (NaN/Inf, a failure)."""
    names = list(reference[0])
    try:
        inputs = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
        cast = [{k: (v.astype(np.float16) if inputs.get(k) == onnx.TensorProto.FLOAT16 else v)
                 for k, v in feed.items()} for feed in feeds]
        runs = run_outputs(model, cast, names)
    except Exception as err:  # noqa: BLE001 - a tool's output that does not run
        return math.inf, f"does not run: {str(err).splitlines()[0][:80]}"
    worst, note = 0.0, ""
    for ref, run in zip(reference, runs):
        for name, value in ref.items():
            cand = np.asarray(run[name]).astype(value.dtype)
            if np.isnan(cand).any() and not np.isnan(value).any():
                note = "NaN"
            elif np.isinf(cand).any() and not np.isinf(value).any():
                note = note or "Inf"
            worst = max(worst, tolerance_used(value, cand, 1e-2, 1e-2))
    return worst, note


_FLOATS = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)


def _casts(model: onnx.ModelProto) -> int:
    """Casts from one float type to another (island borders and the signature's), not the
    exporter's Casts of integers and masks."""
    types = tensor_types(model)
    types.update({t.name: t.data_type for t in model.graph.initializer})
    types.update({i.name: i.type.tensor_type.elem_type for i in model.graph.input})
    return sum(1 for n in model.graph.node if n.op_type == "Cast"
               and types.get(n.input[0]) in _FLOATS
               and next((a.i for a in n.attribute if a.name == "to"), None) in _FLOATS
               and next((a.i for a in n.attribute if a.name == "to"), None)
               != types.get(n.input[0]))


def signature_casts(model: onnx.ModelProto) -> int:
    """The Casts a fully lowered model with a float32 signature needs at least: one per float32
    input some node reads, one per float32 output."""
    read = {name for node in model.graph.node for name in node.input}
    floats = [i for i in model.graph.input if i.type.tensor_type.elem_type
              == onnx.TensorProto.FLOAT and i.name in read]
    return len(floats) + sum(1 for o in model.graph.output
                             if o.type.tensor_type.elem_type == onnx.TensorProto.FLOAT)


def _timed(tool: str, original: onnx.ModelProto, feeds: list[dict[str, Any]]
           ) -> tuple[onnx.ModelProto, float]:
    started = time.perf_counter()
    lowered = TOOLS[tool](_copy(original), feeds)
    return lowered, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("world", type=Path)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--tools", nargs="*", default=list(TOOLS), choices=list(TOOLS))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--bench-runs", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1,
                        help="run the tools this many times per model, in rotating order, and "
                             "report the median time (the tools interleaved in one process)")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    names = args.only or TRANSFORMERS + CNNS
    with _WORKER:
        rows = _compare(args, names)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    _summary(rows)
    return 0


def _compare(args: argparse.Namespace, names: list[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    print(f"{'model':28} {'tool':13} {'error':>8} {'ok':>3} {'casts':>5} {'time s':>7}  note")
    for name in names:
        path = args.world / f"{name}.onnx"
        if not path.exists():
            print(f"{name:28} missing")
            continue
        original = graphfix.load(path)
        load_external_values(original)
        feeds = make_feeds(original, seed=0, runs=None, input_shapes=None)
        reference = run_outputs(original, feeds, [o.name for o in original.graph.output])
        floor = signature_casts(original)
        times: dict[str, list[float]] = {tool: [] for tool in args.tools}
        results: dict[str, Any] = {}
        for repeat in range(max(1, args.repeat)):
            shift = repeat % len(args.tools)
            for tool in args.tools[shift:] + args.tools[:shift]:
                if isinstance(results.get(tool), Exception):
                    continue
                started = time.perf_counter()
                try:
                    results[tool], seconds = _timed(tool, original, feeds)
                except Exception as err:  # noqa: BLE001 - a tool that fails on a model
                    results[tool], seconds = err, time.perf_counter() - started
                times[tool].append(seconds)
        for tool in args.tools:
            lowered, seconds = results[tool], float(np.median(times[tool]))
            if isinstance(lowered, Exception):
                error, casts = math.inf, -1
                note = f"failed: {type(lowered).__name__}: {str(lowered).splitlines()[0][:70]}"
                lowered = None
            else:
                error, note = _error(reference, lowered, feeds)
                casts = _casts(lowered)
            row = {"model": name, "tool": tool, "error": error, "ok": error <= 1.0,
                   "casts": casts, "signature_casts": floor, "seconds": round(seconds, 3),
                   "runs": len(times[tool]), "note": note}
            if tool.startswith("graphfix") and len(times.get("cc-auto", ())) == len(
                    times[tool]) > 2:
                # graphfix's time over cc-auto's, the repeats paired, with a 95% interval
                c = bootstrap_speedup(times["cc-auto"], times[tool])
                row["time_ratio"] = [round(1 / c.speedup, 3), round(1 / c.ci_high, 3),
                                     round(1 / c.ci_low, 3)]
                note = (note + " time vs cc-auto {:.2f}x [{:.2f}, {:.2f}]".format(
                    *row["time_ratio"])).strip()
            if tool == "graphfix" and lowered is not None and args.bench_runs:
                row["cpu"] = _bench(lowered, original, args.bench_runs)
                note = (note + f" cpu {row['cpu']}").strip()
            rows.append(row)
            print(f"{name:28} {tool:13} {error:8.3g} {'yes' if error <= 1.0 else 'NO':>3} "
                  f"{casts:5d} {seconds:7.3f}  {note}", flush=True)
        bf16 = ConvertPrecision(precision="bf16", feeds=feeds)(_copy(original))
        estimate = max(bf16.details.get("estimated_error", {"": math.inf}).values(),
                       key=lambda v: math.inf if v == "inf" else v)
        rows.append({"model": name, "tool": "graphfix-bf16", "estimate": estimate,
                     "islands": bf16.stats.get("islands"), "skipped": bf16.skipped})
        print(f"{name:28} {'gf-bf16':13} {float(estimate):8.3g} est  "
              f"{bf16.stats.get('casts_added', 0):5d} islands={bf16.stats.get('islands')}"
              + (f" skipped: {bf16.skipped}" if bf16.skipped else ""), flush=True)
    return rows


def _summary(rows: list[dict[str, Any]]) -> None:
    """graphfix against auto_convert_mixed_precision: Casts at equal error, and time."""
    by = {(r["model"], r["tool"]): r for r in rows if "casts" in r}
    models = sorted({m for m, t in by if t == "graphfix"})
    ours = [by[(m, "graphfix")] for m in models]
    floor = sum(r["ok"] and r["casts"] <= r["signature_casts"] for r in ours)
    print(f"graphfix within tolerance on {sum(r['ok'] for r in ours)}/{len(ours)}; at the "
          f"signature's Casts (one per float32 input and output) or under on {floor}")
    both = [m for m in models if (m, "cc-auto") in by and by[(m, "cc-auto")]["ok"]
            and by[(m, "graphfix")]["ok"]]
    if both:
        fewer = sum(by[(m, "graphfix")]["casts"] < by[(m, "cc-auto")]["casts"] for m in both)
        equal = sum(by[(m, "graphfix")]["casts"] == by[(m, "cc-auto")]["casts"] for m in both)
        at_floor = sum(by[(m, "cc-auto")]["casts"] <= by[(m, "cc-auto")]["signature_casts"]
                       for m in both)
        print(f"where auto_convert_mixed_precision works ({len(both)} models): fewer Casts on "
              f"{fewer}, as many on {equal} (cc-auto at the signature's Casts on {at_floor})")
        for tool in ("graphfix", "graphfix-cold", "graphfix-1set"):
            timed = [m for m in both if (m, tool) in by]
            if timed:
                _time_summary(tool, [by[(m, tool)] for m in timed],
                              [by[(m, "cc-auto")] for m in timed])


def _time_summary(tool: str, ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> None:
    """``tool``'s time against auto_convert_mixed_precision's, model by model."""
    quicker = sum(a["seconds"] <= b["seconds"] for a, b in zip(ours, theirs))
    ratios = [a["seconds"] / b["seconds"] for a, b in zip(ours, theirs)]
    print(f"{tool}: in at most cc-auto's time on {quicker} of {len(ours)} (time ratio median "
          f"{np.median(ratios):.2f}x, at most {max(ratios):.2f}x)")
    paired = [a["time_ratio"] for a in ours if "time_ratio" in a]
    if paired:
        print(f"  paired over the repeats (95% intervals, {len(paired)} models): "
              f"significantly less time on {sum(hi < 1 for _, _, hi in paired)}, "
              f"significantly more on {sum(lo > 1 for _, lo, _ in paired)}")


def _bench(lowered: onnx.ModelProto, original: onnx.ModelProto, runs: int) -> str:
    result = graphfix.benchmark(lowered, baseline=original, provider="cpu", runs=runs,
                                warmup=max(2, runs // 5))
    c = result.comparison
    return f"{c.speedup:.2f}x [{c.ci_low:.2f}, {c.ci_high:.2f}]" if c else "n/a"


if __name__ == "__main__":
    sys.exit(main())
