"""How tune's two ways of comparing medians judge the same recorded rounds.

    python tools/tune_statistics.py MODEL... [--rounds 80] [--window 10] [--json out.json]

Per model, one recording the way ``graphfix tune`` measures on the CPU: ``--rounds`` rounds,
each opening ONNX Runtime's default session, an identical copy of it (the A/A) and one
intra-op thread in turn (order rotating), warming each up and timing a block of ten calls,
with no other session alive. Then, over windows of ``--window`` consecutive rounds (half
overlapping; tune's confirmation judges ten), both statistics of
:func:`graphfix.validate.stats.bootstrap_speedup` are taken on each window:

- ``pooled``: the median of every call of the window's rounds on each side (resampled by
  round);
- ``per-round``: the geometric mean of each round's ratio of block medians (what tune uses).

Printed per model and statistic: each window's verdict against the default (``F`` faster,
``S`` slower, ``-`` no significant difference) for the A/A copy and for one thread, the mean
width of the intervals (high/low), how often the A/A copy came out apart (a false alarm: about
5% of windows for a sound method) and how strongly the block medians of one round correlate
(why a round-by-round comparison helps). A window's verdict on one thread is what the machine
said then; only the whole recording's estimate says whether one thread is faster.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from graphfix import model_io
from graphfix.validate.bench import feeds_by_model
from graphfix.validate.stats import FASTER, SLOWER, bootstrap_speedup
from graphfix.validate.timing import Arm, Settings, measure
from graphfix.validate.tune import Candidate, _Configs

__all__ = ["record", "judge", "main"]

ARMS = ("default", "copy", "one thread")
CALLS = 10  # tune's block for a median on the CPU


def record(path: Path, rounds: int) -> dict[str, np.ndarray]:
    """``rounds`` rounds of the three arms of the module docstring: ``{arm: (rounds, calls)}``."""
    model = model_io.load(path, load_external_data=False)
    feed = feeds_by_model(model, None, None, 0, None)["candidate"]
    configs = _Configs(model, feed, rewrite=True)
    base = Settings.ort_defaults("cpu")
    settings = {"default": base, "copy": base, "one thread": base.replace(threads=1)}
    arms = [Arm(name, configs(Candidate(name, settings[name])), settings[name], feed)
            for name in ARMS]
    measured = measure(arms, warmup=3, rounds=rounds, calls=CALLS, together=False,
                       memory=False)
    return {name: np.asarray(measured.times[name]) for name in ARMS}


def _mark(verdict: str) -> str:
    return {FASTER: "F", SLOWER: "S"}.get(verdict, "-")


def judge(times: dict[str, np.ndarray], window: int) -> dict[str, Any]:
    """Both statistics on every window, for the A/A copy and one thread."""
    total = len(times["default"])
    starts = range(0, total - window + 1, max(1, window // 2))
    out: dict[str, Any] = {}
    for per_round, label in ((False, "pooled"), (True, "per-round")):
        row: dict[str, Any] = {}
        for arm in ARMS[1:]:
            found = [bootstrap_speedup(times["default"][s:s + window], times[arm][s:s + window],
                                       per_round=per_round) for s in starts]
            whole = bootstrap_speedup(times["default"], times[arm], per_round=per_round)
            row[arm] = {"verdicts": "".join(_mark(c.verdict) for c in found),
                        "width": float(np.mean([c.ci_high / c.ci_low for c in found])),
                        "whole": whole.to_dict()}
        out[label] = row
    logs = {arm: np.log(np.median(times[arm], axis=1)) for arm in ARMS}
    out["round_correlation"] = float(np.corrcoef(logs["default"], logs["copy"])[0, 1])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=80)
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    alarms = {"pooled": [0, 0], "per-round": [0, 0]}
    for path in args.models:
        judged = judge(record(path, args.rounds), args.window)
        results[path.name] = judged
        print(f"{path.name}: block medians of one round correlate "
              f"{judged['round_correlation']:.2f} (default against its copy)")
        for label in ("pooled", "per-round"):
            for arm in ARMS[1:]:
                row = judged[label][arm]
                whole = row["whole"]
                print(f"  {label:9s} {arm:10s} windows {row['verdicts']:<16s} width "
                      f"{row['width']:.3f}; all {args.rounds} rounds {whole['speedup']:.3f}x "
                      f"[{whole['ci_low']:.3f}, {whole['ci_high']:.3f}]")
            aa = judged[label]["copy"]["verdicts"]
            alarms[label][0] += len(aa) - aa.count("-")
            alarms[label][1] += len(aa)
    for label, (apart, windows) in alarms.items():
        print(f"{label}: the A/A copy apart from the default in {apart} of {windows} windows")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
