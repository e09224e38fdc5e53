"""Runs the hostile suite (tests/hostile) and counts its failures by the kind of harm: data
loss, a wrong model, a traceback, leftovers, a misleading message.

    python tools/hostile_tally.py                       # this checkout's graphfix
    python tools/hostile_tally.py --checkout OLD_TREE   # the same tests against another tree

``--checkout`` runs this checkout's tests with another tree's graphfix first on the path (a
tree from ``git archive``, say), to measure what the suite finds there. Cases that build
graphfix's own marker folders (to play a killed run) need the tree to have them; on a tree
without, they are counted apart as not measurable. Prints one line per kind and exits 1 when a
case failed.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Test module -> kind of harm (None: decided per test below).
KINDS = {
    "test_reads_and_writes": "data loss", "test_changing_sources": "wrong",
    "test_no_verify": "wrong", "test_streams_and_signals": "traceback",
    "test_resources": "traceback", "test_lying_inputs": "traceback", "test_names": "traceback",
    "test_api": "traceback", "test_conflicts": "misleading", "test_model_folder": None,
    "test_temporaries": None,
}
# The suite's earlier modules (paths, protobuf, external data, options, outputs, messages).
EARLIER = "earlier modules"
_MARKER_CASES = re.compile(r"abandoned|owner_lives|staging|library_sweeps")


def kind_of(module: str, name: str) -> str:
    if module == "test_model_folder":
        return "wrong" if name.startswith("test_optimize") else "misleading"
    if module == "test_temporaries":
        return "data loss" if ("cannot_prove" in name or "owner_lives" in name) else "leftovers"
    return KINDS.get(module) or EARLIER


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, default=None,
                        help="a tree whose graphfix the tests run against (default: this one)")
    options = parser.parse_args()
    tree = (options.checkout or ROOT).resolve()
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "junit.xml"
        env = {**os.environ, "PYTHONPATH": str(tree)}
        # Run from elsewhere: ``python -m`` puts the working folder first on the path, and
        # this checkout's graphfix must not shadow the tree's.
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT),
                        str(ROOT / "tests" / "hostile"), f"--junitxml={report}"],
                       cwd=folder, env=env, stdout=subprocess.DEVNULL, check=False)
        cases = list(ET.parse(report).iter("testcase"))
    failed: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    unmeasurable = 0
    has_markers = (tree / "graphfix" / "model_io" / "folders.py").exists()
    for case in cases:
        if case.find("skipped") is not None:
            continue
        module, name = case.get("classname", "").split(".")[-1], case.get("name", "")
        broke = case.find("failure") is not None or case.find("error") is not None
        if module == "test_temporaries" and not has_markers and _MARKER_CASES.search(name):
            unmeasurable += 1
            continue
        kind = kind_of(module, name)
        total[kind] += 1
        failed[kind] += broke
    print(f"graphfix from {tree}")
    for kind in ("data loss", "wrong", "traceback", "leftovers", "misleading", EARLIER):
        print(f"  {kind:16s} {failed[kind]:4d} failing of {total[kind]:4d}")
    if unmeasurable:
        print(f"  not measurable   {unmeasurable:4d} (they play a killed run with graphfix's "
              "marker folders, which this tree lacks)")
    return 1 if sum(failed.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
