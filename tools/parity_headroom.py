"""How close each model comes to failing graphfix's parity check, and what the check costs.

    python tools/parity_headroom.py CORPUS_DIR [--json out.json] [--only NAME ...] [--repeat 3]

For every ``.onnx`` model of the folder: ``graphfix.optimize(path)`` with the default pipeline
and parity on (default tolerances). Per model: whether parity passed, the worst output and its
``tolerance_used`` (its worst element's error as a fraction of what the default tolerance allows;
above 1 fails), that output's max abs error and scale, the model's size, the passes that
skipped, and what the check costs. graphfix runs the reference model's side of the check beside
the passes, so the cost is measured as the user sees it: the whole ``optimize`` with the check
(``total s``) minus the same call without it (``no-verify s``, in the same process; the best of
``--repeat`` calls each, alternating), shown as ``verify adds``; ``parity s`` is the part after
the passes and ``ref s`` the reference's own runs. A model that fails parity is optimized again without the check and
compared with ``check_parity`` directly, so its figures are still shown, with the pass the
error names.

Two checks end the table: every model passes with the default tolerances, and for models over
10 MB the check adds less time than the pipeline takes without it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import graphfix

__all__ = ["main", "headroom"]

LARGE_BYTES = 10 * 2**20


def _worst(parity: dict[str, Any]) -> dict[str, Any]:
    outputs = parity.get("outputs") or []
    if not outputs:
        return {}
    worst = max(outputs, key=lambda o: o.get("tolerance_used") or 0.0)
    return {
        "worst_output": worst["name"],
        "tolerance_used": worst.get("tolerance_used"),
        "max_abs_error": worst.get("max_abs_error"),
        "scale": worst.get("scale"),
    }


def headroom(path: Path, repeat: int = 1) -> dict[str, Any]:
    """Optimize ``path`` with parity on; the figures of one row. With ``repeat`` > 1 both
    timed calls run that many times, alternating, and the best of each is kept (this machine's
    noise only ever adds time)."""
    row: dict[str, Any] = {"model": path.name, "bytes": path.stat().st_size}
    for _ in range(max(1, repeat) - 1):
        for verify in (False, True):
            started = time.perf_counter()
            try:
                graphfix.optimize(str(path), verify=verify)
            except graphfix.GraphfixError:
                continue
            key = "best_total_s" if verify else "unverified_s"
            row[key] = min(row.get(key, float("inf")), time.perf_counter() - started)
    started = time.perf_counter()
    try:
        graphfix.optimize(str(path), verify=False)
        row["unverified_s"] = min(row.get("unverified_s", float("inf")),
                                  time.perf_counter() - started)
    except graphfix.GraphfixError:
        pass
    started = time.perf_counter()
    try:
        result = graphfix.optimize(str(path))
    except graphfix.GraphfixError as err:
        row["total_s"] = time.perf_counter() - started
        row["passed"] = False
        row["error"] = str(err).splitlines()[0]
        row["guilty_pass"] = getattr(err, "guilty_pass", None)
        # The figures of the failing comparison, from a run without the check.
        try:
            unchecked = graphfix.optimize(str(path), verify=False)
            parity = graphfix.check_parity(graphfix.load(str(path)), unchecked.model)
        except graphfix.GraphfixError as again:
            row["error"] += f"; re-run: {str(again).splitlines()[0]}"
            return row
        row.update(_worst(parity.to_dict()))
        row["parity_s"] = parity.seconds
        row["pipeline_s"] = sum(p.seconds for p in unchecked.report.passes)
        return row
    report = result.report
    parity = report.parity or {}
    row["total_s"] = min(row.pop("best_total_s", float("inf")), time.perf_counter() - started)
    row["passed"] = bool(parity.get("passed"))
    row.update(_worst(parity))
    row["parity_s"] = float(parity.get("seconds") or 0.0)
    row["reference_s"] = float(parity.get("reference_seconds") or 0.0)
    row["pipeline_s"] = sum(p.seconds for p in report.passes)
    if "unverified_s" in row:
        row["verify_adds_s"] = row["total_s"] - row["unverified_s"]
    row["runs"] = len(parity.get("runs") or [])
    row["skipped"] = ", ".join(p.name for p in report.passes if p.skipped)
    row["pass_s"] = [[p.name, round(p.seconds, 3)] for p in report.passes]
    return row


def _checks(rows: list[dict[str, Any]]) -> list[str]:
    failed = [r["model"] for r in rows if not r.get("passed")]
    lines = [
        f"every model passes parity with default tolerances: "
        f"{'PASS' if not failed else 'FAIL (' + ', '.join(failed) + ')'}"
    ]
    large = [r for r in rows if r["bytes"] > LARGE_BYTES and "verify_adds_s" in r]
    slow = [r["model"] for r in large if r["verify_adds_s"] >= r["unverified_s"]]
    lines.append(
        f"the check adds less than the pipeline's own time for the {len(large)} models over "
        f"10 MB: "
        f"{'PASS' if not slow else 'FAIL (' + ', '.join(slow) + ')'}"
    )
    return lines


def _table(rows: list[dict[str, Any]]) -> str:
    header = ["model", "MB", "passed", "worst output", "tol used", "max abs err", "scale",
              "no-verify s", "total s", "verify adds", "ratio", "parity s", "ref s", "runs",
              "skipped / error"]
    cells = []
    for r in rows:
        ratio = (r["verify_adds_s"] / r["unverified_s"]) if r.get("verify_adds_s") else None

        def num(key: str, fmt: str = ".3g", row: dict[str, Any] = r) -> str:
            value = row.get(key)
            return "" if value is None else format(value, fmt)

        cells.append([
            r["model"], f"{r['bytes'] / 2**20:.1f}", "yes" if r.get("passed") else "NO",
            r.get("worst_output", ""), num("tolerance_used"), num("max_abs_error"),
            num("scale"), num("unverified_s", ".2f"), num("total_s", ".2f"),
            num("verify_adds_s", ".2f"), "" if ratio is None else f"{ratio:.2f}",
            num("parity_s", ".2f"), num("reference_s", ".2f"), str(r.get("runs", "")),
            r.get("error") or r.get("skipped", ""),
        ])
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h)
              for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(cell, widths)) for cell in cells]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--repeat", type=int, default=3,
                        help="timed calls per model, with and without the check; the best of "
                             "each is kept (default 3)")
    parser.add_argument("--only", nargs="+", default=None,
                        help="model file names or stems (default: every .onnx in the folder)")
    args = parser.parse_args(argv)
    rows = []
    for path in sorted(args.corpus.glob("*.onnx")):
        if args.only and path.name not in args.only and path.stem not in args.only:
            continue
        rows.append(headroom(path, args.repeat))
        print(f"done {path.name}", file=sys.stderr, flush=True)
    print(_table(rows))
    checks = _checks(rows)
    for line in checks:
        print(line)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "checks": checks}, indent=1))
    return 0 if all(line.endswith("PASS") for line in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
