"""fuse-transformer over every model with a Softmax in some folders: what it fuses, and that it
never raises.

    python tools/fusion_sweep.py FOLDER [FOLDER ...]

For each ``.onnx`` file holding a Softmax: the pass on parity's generated inputs (the fused
model checked against the input within float32's tolerance, by the pass itself), and one line:
seconds, the fused ops, the attention blocks fused, and why nothing was kept where nothing was.
A pass that raises is printed as ``TRACEBACK``; the last line counts models, fused attention
and tracebacks.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from pathlib import Path

import graphfix
from graphfix.model_io import load_external_values
from graphfix.passes.fuse_transformer import FuseTransformer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    seen = attention = raised = 0
    for path in sorted(p for folder in args.folders for p in folder.glob("*.onnx")):
        try:
            model = graphfix.load(path)
        except graphfix.GraphfixError as err:
            print(f"{path.name:40} does not load: {str(err).splitlines()[0][:100]}")
            continue
        if not any(n.op_type == "Softmax" for n in model.graph.node):
            continue
        seen += 1
        started = time.perf_counter()
        try:
            load_external_values(model)
            result = FuseTransformer()(model)
        except Exception as err:  # noqa: BLE001 - what the sweep is for
            raised += 1
            print(f"{path.name:40} TRACEBACK {type(err).__name__}: {str(err)[:200]}")
            continue
        fused = result.details.get("fused") if result.details else None
        blocks = result.stats.get("attention_fused") or 0
        attention += bool(blocks)
        print(f"{path.name:40} {time.perf_counter() - started:6.1f}s fused={fused} "
              f"attention={blocks} {(result.skipped or '')[:140]}", flush=True)
    print(f"{seen} models with a Softmax: attention fused on {attention}, {raised} raised")
    return 1 if raised else 0


if __name__ == "__main__":
    sys.exit(main())
