"""convert-precision with and without weighing each lowered group's Casts, side by side.

    python tools/precision_economics.py FOLDER [FOLDER ...] [--precision fp16|bf16]
                                        [--json out.json] [--timeout SECONDS]

For every ``*.onnx`` of the folders (not their subfolders), the convert-precision pass runs
twice on the model as it is, on parity's own inputs: as it does by default, where a lowered
group that does not pay for the Casts at its borders stays float32 (rule 17,
``passes/convert_precision/economics.py``), and with ``weigh_casts=False``, which lowers every
node the measured error allows. Printed for each model where the two differ: the Casts between
float types and the compute nodes lowered, each way, and the worst output's error on ONNX
Runtime in permille of the tolerance; then the totals over the models both ways wrote. One ONNX
Runtime worker serves every conversion. A model that takes longer than ``--timeout`` seconds
either way is listed as such.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import onnx

from graphfix.passes.convert_precision import ConvertPrecision, RuntimeWorker


class _TimedOut(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _TimedOut()


def convert(path: Path, precision: str, weigh: bool, worker: RuntimeWorker | None,
            timeout: int) -> dict[str, Any]:
    model = onnx.load(str(path))
    signal.alarm(timeout)
    started = time.perf_counter()
    try:
        result = ConvertPrecision(precision=precision, worker=worker, weigh_casts=weigh)(model)
    except _TimedOut:
        return {"timed_out": timeout}
    finally:
        signal.alarm(0)
    stats = result.stats
    return {"written": result.modified, "skipped": result.skipped,
            "seconds": round(time.perf_counter() - started, 2),
            "casts": stats.get("casts_added"), "lowered": stats.get("compute_nodes_lowered"),
            "float32": stats.get("compute_nodes_float32"),
            "error_permille": stats.get("measured_error_permille",
                                        stats.get("estimated_error_permille"))}


def _cell(row: dict[str, Any]) -> str:
    if "timed_out" in row:
        return f"over {row['timed_out']} s"
    if not row["written"]:
        return f"not written ({(row['skipped'] or '')[:48]})"
    return f"{row['casts']} Casts, {row['lowered']} lowered, {row['error_permille']}‰"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--precision", choices=("fp16", "bf16"), default="fp16")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--timeout", type=int, default=300)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGALRM, _alarm)
    paths = [p for folder in args.folders for p in sorted(folder.glob("*.onnx"))]
    rows: dict[str, dict[str, Any]] = {}
    worker = RuntimeWorker() if args.precision == "fp16" else None
    with worker if worker is not None else contextlib.nullcontext():
        for path in paths:
            key = f"{path.parent.name}/{path.name}"
            try:
                pair = {"weighed": convert(path, args.precision, True, worker, args.timeout),
                        "unweighed": convert(path, args.precision, False, worker,
                                             args.timeout)}
            except Exception as error:  # noqa: BLE001 - a model the pass refuses is reported
                pair = {"error": f"{type(error).__name__}: {str(error)[:200]}"}
            rows[key] = pair
            if "error" in pair:
                print(f"{key}: {pair['error']}", flush=True)
            elif _cell(pair["weighed"]) != _cell(pair["unweighed"]):
                print(f"{key}: {_cell(pair['weighed'])}  |  weigh_casts=False: "
                      f"{_cell(pair['unweighed'])}", flush=True)
            if args.json:
                args.json.write_text(json.dumps(rows, indent=1))
    both = [p for p in rows.values() if "error" not in p
            and p["weighed"].get("written") and p["unweighed"].get("written")]
    changed = sum(1 for p in rows.values() if "error" not in p
                  and _cell(p["weighed"]) != _cell(p["unweighed"]))
    total = {side: (sum(p[side]["casts"] for p in both), sum(p[side]["lowered"] for p in both))
             for side in ("weighed", "unweighed")}
    print(f"{len(rows)} models, {changed} differ; over the {len(both)} written both ways: "
          f"{total['weighed'][0]} Casts and {total['weighed'][1]} compute nodes lowered, "
          f"against {total['unweighed'][0]} and {total['unweighed'][1]} with weigh_casts=False "
          f"({total['weighed'][0] / max(total['unweighed'][0], 1):.2f}x the Casts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
