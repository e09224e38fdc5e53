"""The whole pipeline on ever larger graphs: time and peak memory, and how they grow.

Converter-style NHWC graphs (the builder of ``tools/bench_transposes.py``) of about 1k, 10k and
100k nodes go through ``graphfix.optimize`` (default pipeline, parity on), each in a fresh child
process so that its peak resident memory (``ru_maxrss``) is its own. Printed per size: seconds
per pass, parity seconds, total, peak RSS, and the growth factor of each from the previous size
(linear growth is about 10x per step).

    python tools/scaling.py [--sizes 1000,10000,100000] [--no-verify] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _child(nodes: int, verify: bool) -> dict:
    import graphfix
    from bench_transposes import build_nhwc_graph

    model = build_nhwc_graph(max(1, nodes // 8))
    built = len(model.graph.node)
    started = time.perf_counter()
    result = graphfix.optimize(model, verify=verify)
    total = time.perf_counter() - started
    report = result.report
    return {
        "nodes": built,
        "nodes_after": report.output.nodes,
        "passes": {p.name + ("#2" if i == 4 else ""): round(p.seconds, 3)
                   for i, p in enumerate(report.passes)},
        "skipped": {p.name: p.skipped for p in report.passes if p.skipped},
        "parity_seconds": round(report.parity["seconds"], 3) if report.parity else None,
        "total_seconds": round(total, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--no-verify", action="store_true", help="leave parity out")
    parser.add_argument("--json", dest="json_path")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(_child(args.child, not args.no_verify)))
        return 0
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        command = [sys.executable, __file__, "--child", str(size)]
        if args.no_verify:
            command.append("--no-verify")
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(f"{size}: failed\n{proc.stderr[-2000:]}")
            return 1
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(row)
        passes = ", ".join(f"{k} {v:.2f}s" for k, v in row["passes"].items())
        print(f"{row['nodes']:>7} nodes -> {row['nodes_after']:>6}: total {row['total_seconds']:.2f}s "
              f"(parity {row['parity_seconds']}s; {passes}), peak RSS {row['peak_rss_mb']} MB"
              + (f", skipped: {row['skipped']}" if row["skipped"] else ""), flush=True)
    for before, after in zip(rows, rows[1:]):
        factor = after["nodes"] / before["nodes"]
        print(f"x{factor:.0f} nodes: time x{after['total_seconds'] / before['total_seconds']:.1f}, "
              f"peak RSS x{after['peak_rss_mb'] / before['peak_rss_mb']:.1f}")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
