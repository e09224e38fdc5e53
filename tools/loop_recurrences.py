"""Keras recurrences written as ONNX ``Loop``s, and what hoist-loop-invariants does to their speed.

    python tools/loop_recurrences.py OUT_DIR [--only NAME ...] [--runs N] [--json out.json]
    python tools/loop_recurrences.py OUT_DIR --models MODEL.onnx ...   (models of your own)

tf2onnx rewrites a plain Keras LSTM into ONNX's ``LSTM`` op, but writes a GRU, and an LSTM or GRU
behind a masking Embedding, as a ``Loop`` whose weights are carried values the body passes
through unchanged. The script builds such models from code with random weights (TensorFlow
and tf2onnx, the ``tools`` extra; each in a process of its own, opset 17, into OUT_DIR), then
writes each through the default pipeline twice: as it is, and with hoist-loop-invariants'
threshold at 0 (every constant pass-through weight read from outside its Loop), and once
without the pass (``--skip``). Each is timed against the one without the pass by
:func:`graphfix.benchmark` (interleaved rounds, bootstrap interval, ONNX Runtime's defaults on
the CPU). Printed per model: the weights read from outside and the speedup with its interval,
for the shipped threshold and for threshold 0, and parity's verdict for each output.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import onnx

import graphfix
from graphfix.pipeline import DEFAULT_PASSES

# name: (kind, units, bidirectional, masked embedding width or 0, stacked layers, features)
MODELS: dict[str, tuple[str, int, bool, int, int, int]] = {
    "gru128": ("gru", 128, False, 0, 1, 64),
    "gru512": ("gru", 512, False, 0, 1, 512),
    "bigru384": ("gru", 384, True, 0, 1, 128),
    "mgru256": ("gru", 256, False, 128, 1, 0),
    "mbigru512": ("gru", 512, True, 512, 1, 0),
    "mlstm128": ("lstm", 128, False, 64, 1, 0),
    "mlstm384": ("lstm", 384, False, 256, 1, 0),
    "mbilstm512": ("lstm", 512, True, 256, 1, 0),
}

_BUILD = """
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf, tf2onnx, keras
kind, units, bidi, emb, stack, feat, out = sys.argv[1:]
units, emb, stack, feat, bidi = int(units), int(emb), int(stack), int(feat), bidi == "1"
L = keras.layers
if emb:
    i = keras.Input((None,), dtype="int32", name="ids")
    x = L.Embedding(1000, emb, mask_zero=True)(i)
    spec = (tf.TensorSpec((None, None), tf.int32, name="ids"),)
else:
    i = keras.Input((None, feat), name="x")
    x = i
    spec = (tf.TensorSpec((None, None, feat), tf.float32, name="x"),)
for s in range(stack):
    layer = (L.LSTM if kind == "lstm" else L.GRU)(units, return_sequences=s < stack - 1)
    x = L.Bidirectional(layer)(x) if bidi else layer(x)
keras.utils.set_random_seed(0)
model = keras.Model(i, L.Dense(10)(x))
tf2onnx.convert.from_keras(model, input_signature=spec, opset=17, output_path=out)
"""


def build(name: str, out_dir: Path) -> Path:
    """The model ``name`` of :data:`MODELS` in ``out_dir`` (built unless already there)."""
    path = out_dir / f"{name}.onnx"
    if not path.exists():
        kind, units, bidi, emb, stack, feat = MODELS[name]
        subprocess.run([sys.executable, "-c", _BUILD, kind, str(units), "1" if bidi else "0",
                        str(emb), str(stack), str(feat), str(path)], check=True, timeout=600,
                       capture_output=True)
    return path


def _optimized(path: Path, threshold: int | None) -> tuple[onnx.ModelProto, int, bool]:
    """The default pipeline's output (``threshold`` None: without the pass), the weights it
    read from outside their Loops, and whether parity passed."""
    module = sys.modules["graphfix.passes.hoist_loop_invariants"]
    shipped = module.MIN_BYTES
    passes = [p for p in DEFAULT_PASSES if threshold is not None or p != "hoist-loop-invariants"]
    try:
        if threshold is not None:
            module.MIN_BYTES = threshold
        result = graphfix.optimize(graphfix.load(path), passes=passes)
    finally:
        module.MIN_BYTES = shipped
    entry = next((p for p in result.report.passes if p.name == "hoist-loop-invariants"), None)
    dropped = entry.stats["carried_values_dropped"] if entry else 0
    return result.model, dropped, bool(result.report.parity and result.report.parity["passed"])


def measure(path: Path, runs: int) -> dict[str, Any]:
    import graphfix.passes  # noqa: F401 - registers the pass module read above

    module = sys.modules["graphfix.passes.hoist_loop_invariants"]
    without, _, parity_without = _optimized(path, None)
    row: dict[str, Any] = {"model": path.stem, "parity_without": parity_without}
    for label, threshold in (("shipped", module.MIN_BYTES), ("all", 0)):
        model, dropped, parity = _optimized(path, threshold)
        row[label] = {"weights_read_outside": dropped, "parity": parity}
        if dropped:
            comparison = graphfix.benchmark(model, baseline=without, provider="cpu",
                                            runs=runs).comparison
            row[label].update(speedup=round(comparison.speedup, 3),
                              interval=[round(comparison.ci_low, 3), round(comparison.ci_high, 3)],
                              verdict=comparison.verdict)
    return row


def _cell(entry: dict[str, Any]) -> str:
    if not entry["weights_read_outside"]:
        return "none read outside"
    low, high = entry["interval"]
    return (f"{entry['weights_read_outside']} read outside: {entry['speedup']:.2f}x "
            f"[{low:.2f}, {high:.2f}] {entry['verdict']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--only", nargs="*", choices=list(MODELS))
    parser.add_argument("--models", nargs="*", type=Path, help="ONNX files of your own instead")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    paths = args.models or [build(name, args.out_dir) for name in (args.only or MODELS)]
    rows = []
    for path in paths:
        row = measure(path, args.runs)
        rows.append(row)
        parity = all((row["parity_without"], row["shipped"]["parity"], row["all"]["parity"]))
        print(f"{row['model']:12} shipped: {_cell(row['shipped']):58} threshold 0: "
              f"{_cell(row['all'])}; parity {'passed' if parity else 'FAILED'}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    slower = [r["model"] for r in rows if r["shipped"].get("verdict") == "slower"]
    faster = [r["model"] for r in rows if r["shipped"].get("verdict") == "faster"]
    print(f"shipped threshold: faster on {len(faster)}, slower on {len(slower)} of {len(rows)}"
          + (f" ({', '.join(slower)})" if slower else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
