"""Run graphfix on real models nobody here wrote: the onnx package's backend test models
(:mod:`graphfix.models.onnx_backend` says what is checked and what each outcome means).

    python tools/onnx_backend_models.py [--suites simple,light] [--json out.json] [-v]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

from graphfix.models.onnx_backend import SUITES, cases, check


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suites", default=",".join(SUITES))
    parser.add_argument("--json", dest="json_path", default=None)
    parser.add_argument("-v", "--verbose", action="store_true", help="print every model")
    args = parser.parse_args(argv)
    outcomes = []
    with tempfile.TemporaryDirectory() as folder:
        for suite, name, path, sets in cases(tuple(args.suites.split(","))):
            outcome = check(suite, name, path, sets, Path(folder))
            outcomes.append(outcome)
            if args.verbose or outcome.status in ("wrong", "crash"):
                print(f"{outcome.status:8} {suite}/{name}: {outcome.detail}", flush=True)
    counts = {s: sum(o.status == s for o in outcomes) for s in ("pass", "refused", "wrong", "crash")}
    print(f"{len(outcomes)} models: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    for o in outcomes:
        if o.status == "refused":
            print(f"  refused {o.suite}/{o.name}: {o.detail}")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps([dataclasses.asdict(o) for o in outcomes],
                                                   indent=2))
    return 1 if counts["wrong"] or counts["crash"] else 0


if __name__ == "__main__":
    sys.exit(main())
