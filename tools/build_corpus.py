"""Write the comparison corpus and list it: name, nodes, Transposes, size.

    python tools/build_corpus.py OUT_DIR [--small] [--no-torch]
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import onnx


from graphfix.models.corpus import build_corpus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--small", action="store_true", help="shrunken models that build fast")
    parser.add_argument("--no-torch", action="store_true", help="skip the torch exports")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    paths = build_corpus(args.out_dir, full_size=not args.small, include_torch=not args.no_torch)
    print(f"{'model':<32} {'nodes':>6} {'Transposes':>10} {'size':>10}")
    for path in paths:
        model = onnx.load(path, load_external_data=False)
        transposes = sum(node.op_type == "Transpose" for node in model.graph.node)
        size = path.stat().st_size
        print(f"{path.stem:<32} {len(model.graph.node):>6} {transposes:>10} {size / 2**20:>8.1f}MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
