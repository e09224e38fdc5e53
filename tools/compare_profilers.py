"""graphfix profile beside the field's profilers, on the same models and machine.

    python tools/compare_profilers.py MODEL... [--runs 50] [--threads N] [--json out.json]

Per model, each tool runs as a user would run it (a fresh process, wall time measured here):

- ``graphfix profile MODEL --no-try --json`` and ``graphfix profile MODEL --json`` (fixes tried);
- ``graphfix bench MODEL`` (the cost profile is meant to stay near);
- ONNX Runtime's transformers profiler (``python -m onnxruntime.transformers.profiler -m MODEL
  --dummy_inputs default --samples RUNS --kernel_time_only``): per node and per op type,
  shares of the summed kernel time;
- Polygraphy: ``polygraphy inspect model MODEL --show layers`` (layers and shapes, no time);
- ``onnxruntime_perf_test`` when it is on PATH (the onnxruntime wheels do not ship it).

Printed per model: each tool's wall time and its ratio to graphfix's, and how far apart
graphfix's op-type shares (normalized to the node total, as ORT's profiler reports them) and
ORT's profiler's are (the largest absolute difference of any op type's share). What each tool
reports is listed at the end: only graphfix accounts the node time against the measured call,
names findings, measures what a fix buys and compares two models.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["compare", "main"]


def _timed(command: list[str], cwd: str | None = None) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=cwd, check=False,
                          timeout=3600)
    return time.perf_counter() - started, done


def _ort_op_shares(output: str) -> dict[str, float]:
    """Op type -> share of kernel time, from the profiler's "Grouped by operator" table."""
    section = output.split("Grouped by operator", 1)[-1].split("Grouped by provider", 1)[0]
    shares: dict[str, float] = {}
    for line in section.splitlines():
        fields = line.split()
        if len(fields) == 8 and re.fullmatch(r"[\d.]+", fields[1]):
            shares[fields[-1]] = float(fields[1]) / 100.0
    return shares


def compare(model: Path, *, runs: int, threads: int) -> dict[str, Any]:
    fixed = ["--provider", "cpu", "--runs", str(runs), "--threads", str(threads)]
    row: dict[str, Any] = {"model": model.name}
    seconds, done = _timed(["graphfix", "profile", str(model), *fixed, "--no-try", "--json"])
    if done.returncode != 0:
        return {**row, "error": done.stderr.strip().splitlines()[-1:]}
    data = json.loads(done.stdout)
    row["graphfix_profile_s"] = seconds
    row["graphfix_profile_try_s"], _ = _timed(["graphfix", "profile", str(model), *fixed,
                                               "--json"])
    row["graphfix_bench_s"], _ = _timed(["graphfix", "bench", str(model), *fixed[:4],
                                         "--threads", str(threads), "--json"])
    accounting = data["model"]["accounting"]
    row.update(latency_ms=accounting["latency_ms"], accounted=accounting["accounted"],
               profiler_overhead=accounting["profiler_overhead"],
               findings=[f["kind"] for f in data["findings"]])
    total = sum(r["ms"] for r in data["model"]["op_types"]) or 1.0
    ours = {r["op_type"]: r["ms"] / total for r in data["model"]["op_types"]}
    with tempfile.TemporaryDirectory() as folder:  # ORT's profiler writes its trace to cwd
        seconds, done = _timed([sys.executable, "-m", "onnxruntime.transformers.profiler",
                                "-m", str(model.resolve()), "--dummy_inputs", "default",
                                "--samples", str(runs), "--thread_num", str(threads),
                                "--provider", "cpu", "--kernel_time_only"], cwd=folder)
    theirs = _ort_op_shares(done.stdout) if done.returncode == 0 else {}
    row["ort_profiler_s"] = seconds if theirs else None
    row["ort_profiler_error"] = None if theirs else (done.stderr.strip().splitlines() or
                                                     ["no op-type table"])[-1]
    if theirs:
        row["share_gap"] = max(abs(ours.get(op, 0.0) - theirs.get(op, 0.0))
                               for op in set(ours) | set(theirs))
        row["same_top_op"] = max(ours, key=ours.get) == max(theirs, key=theirs.get)
    polygraphy = shutil.which("polygraphy")
    if polygraphy:
        seconds, done = _timed([polygraphy, "inspect", "model", str(model), "--show", "layers"])
        row["polygraphy_inspect_s"] = seconds if done.returncode == 0 else None
    perf_test = shutil.which("onnxruntime_perf_test")
    if perf_test:
        seconds, done = _timed([perf_test, "-e", "cpu", "-r", str(runs), "-x", str(threads),
                                str(model)])
        found = re.search(r"Average inference time cost: ([\d.]+) ms", done.stdout)
        row["perf_test_s"] = seconds
        row["perf_test_ms"] = float(found.group(1)) if found else None
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = [compare(model, runs=args.runs, threads=args.threads) for model in args.models]
    for row in rows:
        if "error" in row:
            print(f"{row['model']}: graphfix failed: {row['error']}")
            continue
        base = row["graphfix_profile_s"]
        ort = row.get("ort_profiler_s")
        print(f"{row['model']}: median {row['latency_ms']:.3f} ms, node times account for "
              f"{row['accounted']:.1%}, profiler overhead {row['profiler_overhead']:.2f}x; "
              f"findings: {', '.join(row['findings']) or 'none'}")
        print(f"  wall s: graphfix profile {base:.1f} (fixes tried "
              f"{row['graphfix_profile_try_s']:.1f}, {row['graphfix_profile_try_s'] / base:.2f}x),"
              f" graphfix bench {row['graphfix_bench_s']:.1f} "
              f"(profile/bench {base / row['graphfix_bench_s']:.2f}x), ORT profiler "
              + (f"{ort:.1f} (graphfix/ORT {base / ort:.2f}x)" if ort else
                 f"failed: {row['ort_profiler_error']}")
              + (f", polygraphy inspect {row['polygraphy_inspect_s']:.1f}"
                 if row.get("polygraphy_inspect_s") else ""))
        if ort:
            print(f"  op-type shares, graphfix vs ORT's profiler: largest gap "
                  f"{row['share_gap']:.1%}, same top op type: {row['same_top_op']}")
        if "perf_test_s" in row:
            print(f"  onnxruntime_perf_test: {row['perf_test_s']:.1f} s, average "
                  f"{row['perf_test_ms']} ms")
    if not shutil.which("onnxruntime_perf_test"):
        print("onnxruntime_perf_test: not on PATH (the onnxruntime wheels do not ship it; it "
              "comes from a source build)")
    print("reports: graphfix = per node/op type/provider, accounting against the measured call, "
          "profiler overhead, ranked findings with measured fixes, --vs; ORT profiler = per "
          "node/op type/provider shares of kernel time; polygraphy inspect = layers and shapes, "
          "no time; none of the others measures a fix or compares two models")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
