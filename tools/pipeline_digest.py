"""The default pipeline's output on folders of models, as digests: does a change of the code
change what graphfix writes?

    python tools/pipeline_digest.py FOLDER [FOLDER ...] --json before.json
    python tools/pipeline_digest.py FOLDER [FOLDER ...] --compare before.json

For every ``*.onnx`` file of the folders (not their subfolders): the pipeline's output without
the parity check (``graphfix.optimize(..., verify=False)``, so that only the passes are
measured), its node and Transpose counts (subgraphs and local functions included) and the
SHA-256 of the output's bytes (the pipeline is deterministic: the same input gives the same
bytes). ``--compare`` prints every model whose digest differs from the file's and exits 1 when
one does; a restructuring that keeps every behaviour keeps every digest. Each output's bytes
(weights included) are recorded beside its input's, and the outputs larger than their inputs
are listed.

``--precision fp16|bf16`` digests the ``convert-precision`` pass alone on each model as it
is (on parity's own inputs), not the pipeline: does a change of the float16 search or of its
measuring change which nodes it lowers? Models too large for ``--max-mb`` are left out.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from pathlib import Path
from typing import Any


import graphfix
from graphfix.graph import all_nodes
from graphfix.model_io import load_external_values, load_with_info
from graphfix.passes.convert_precision import ConvertPrecision


def digest(path: Path, precision: str | None = None) -> dict[str, Any]:
    """The pipeline's output of the model at ``path`` (with ``precision``, the
    convert-precision pass's alone), summarized."""
    started = time.perf_counter()
    extra: dict[str, Any] = {}
    try:
        if precision is None:
            result = graphfix.optimize(path, verify=False)
            model = result.model
            load_external_values(model)
            extra["left_out"] = [item["pass"] for item in result.report.left_out]
        else:
            model = graphfix.load(path)
            load_external_values(model)
            outcome = ConvertPrecision(precision=precision)(model)
            model = outcome.model
            extra["changed"] = outcome.modified
            extra["skipped"] = outcome.skipped
            extra["lowered"] = outcome.stats.get("compute_nodes_lowered")
    except graphfix.GraphfixError as error:
        return {"error": str(error).splitlines()[0][:300]}
    nodes = list(all_nodes(model.graph)) + [n for f in model.functions for n in f.node]
    return {
        "nodes": len(nodes),
        "transposes": sum(n.op_type == "Transpose" for n in nodes),
        "sha256": hashlib.sha256(model.SerializeToString(deterministic=True)).hexdigest(),
        # the file's bytes with its external data, against the input's
        "bytes_in": _size(path), "bytes_out": model.ByteSize(),
        **extra,
        "seconds": round(time.perf_counter() - started, 2),
    }


def _size(path: Path) -> int:
    """The bytes of the model file and of the data files its weights are read from (whatever
    their names: ``model.onnx.data`` beside ``khmersm.onnx``), as graphfix's report counts
    them."""
    return load_with_info(path, load_external_data=False).size_bytes


def _size_mb(path: Path) -> float:
    return _size(path) / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--json", type=Path, help="write the digests to this file")
    parser.add_argument("--compare", type=Path, help="compare with digests written before")
    parser.add_argument("--precision", choices=["fp16", "bf16"],
                        help="digest the convert-precision pass alone, at this precision")
    parser.add_argument("--max-mb", type=float, default=300.0,
                        help="with --precision, leave out models larger than this (MiB)")
    args = parser.parse_args(argv)
    results: dict[str, dict[str, Any]] = {}
    for folder in args.folders:
        for path in sorted(folder.glob("*.onnx")):
            if args.precision and _size_mb(path) > args.max_mb:
                continue
            key = f"{folder.name}/{path.name}"
            results[key] = digest(path, args.precision)
            row = results[key]
            print(f"{key:60s} {row.get('nodes', '-'):>6} {row.get('transposes', '-'):>4} "
                  f"{row.get('sha256', row.get('error', ''))[:16]}", flush=True)
    _growth(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    if args.compare:
        before = json.loads(args.compare.read_text())
        differ = [key for key in sorted(set(before) | set(results))
                  if _compared(before.get(key, {})) != _compared(results.get(key, {}))]
        for key in differ:
            print(f"differs: {key}: {before.get(key)} -> {results.get(key)}")
        print(f"{len(results)} models, {len(differ)} differ from {args.compare}")
        return 1 if differ else 0
    print(f"{len(results)} models")
    return 0


def _growth(results: dict[str, dict[str, Any]]) -> None:
    """The outputs larger than their inputs, by how much."""
    grown = {key: row for key, row in results.items()
             if row.get("bytes_out", 0) > row.get("bytes_in", math.inf)}
    for key, row in sorted(grown.items()):
        print(f"larger than its input: {key}: {row['bytes_in']} -> {row['bytes_out']} bytes "
              f"({row['bytes_out'] / row['bytes_in'] - 1:+.2%})")
    print(f"{len(grown)} of {len(results)} outputs larger than their input")


def _compared(row: dict[str, Any]) -> dict[str, Any]:
    """What --compare compares: the output (its time left out; its size follows from its
    digest, and digests written before sizes were recorded lack it)."""
    return {k: v for k, v in row.items() if k not in ("seconds", "bytes_in", "bytes_out")}


if __name__ == "__main__":
    sys.exit(main())
