"""Whether the default pipeline is a fixed point: run it on each model, again on its output, and
compare the two outputs.

    python tools/fixed_point.py OUT_DIR MODEL.onnx [MODEL.onnx ...] [--loops-only]

Each model is written to ``OUT_DIR/a/NAME/m.onnx`` and its output to ``OUT_DIR/b/NAME/m.onnx``:
the same file name, so that a data file's name, which the model records, is the same in both.
Per model one line: ``IDENTICAL`` (every file byte for byte), ``ORDER-ONLY`` (the same nodes,
attributes, initializers and signature in every graph, in another order), or ``CHANGED`` with
the node counts and the op types that differ; ``FAILED`` where a run exits non-zero.
``--loops-only`` keeps the models that have a Loop, If or Scan. The last line counts each kind.
"""

from __future__ import annotations

import argparse
import collections
import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

import onnx

from graphfix import graph as graph_layer


def _canonical(graph: onnx.GraphProto) -> tuple[object, ...]:
    """A graph's nodes (bodies within), initializers and signature, in no order."""
    nodes = []
    for node in graph.node:
        attributes = []
        for attribute in sorted(node.attribute, key=lambda a: a.name):
            value = (_canonical(attribute.g) if attribute.type == onnx.AttributeProto.GRAPH
                     else attribute.SerializeToString(deterministic=True))
            attributes.append((attribute.name, value))
        nodes.append((node.domain, node.op_type, tuple(node.input), tuple(node.output),
                      tuple(attributes)))
    initializers = sorted((t.name, t.SerializeToString(deterministic=True))
                          for t in graph.initializer)
    return (tuple(sorted(nodes, key=repr)), tuple(initializers),
            tuple(i.name for i in graph.input), tuple(o.name for o in graph.output))


def _ops(model: onnx.ModelProto) -> collections.Counter[str]:
    return collections.Counter(n.op_type for n in graph_layer.all_nodes(model.graph))


def _has_bodies(path: Path) -> bool:
    model = onnx.load(str(path), load_external_data=False)
    return any(n.op_type in ("Loop", "If", "Scan") for n in graph_layer.all_nodes(model.graph))


def _optimize(source: Path, target: Path) -> str | None:
    shutil.rmtree(target.parent, ignore_errors=True)
    target.parent.mkdir(parents=True)
    run = subprocess.run([sys.executable, "-m", "graphfix", "optimize", str(source), str(target),
                          "-q"], capture_output=True, text=True)
    return None if run.returncode == 0 else (run.stderr.strip().splitlines() or ["?"])[-1]


def check(source: Path, out: Path) -> str:
    first, second = out / "a" / source.stem / "m.onnx", out / "b" / source.stem / "m.onnx"
    for src, dst in ((source, first), (first, second)):
        error = _optimize(src, dst)
        if error is not None:
            return f"FAILED {source.name}: {error}"
    names = sorted(p.name for p in first.parent.iterdir())
    if names == sorted(p.name for p in second.parent.iterdir()) and all(
            filecmp.cmp(first.parent / n, second.parent / n, shallow=False) for n in names):
        return f"IDENTICAL {source.name}"
    a, b = onnx.load(str(first)), onnx.load(str(second))
    if _canonical(a.graph) == _canonical(b.graph):
        return f"ORDER-ONLY {source.name}"
    ops_a, ops_b = _ops(a), _ops(b)
    return (f"CHANGED {source.name}: {sum(ops_a.values())} -> {sum(ops_b.values())} nodes, "
            f"fewer {dict(ops_a - ops_b)}, more {dict(ops_b - ops_a)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("models", type=Path, nargs="+")
    parser.add_argument("--loops-only", action="store_true")
    args = parser.parse_args()
    models = [m for m in args.models if not args.loops_only or _has_bodies(m)]
    kinds: collections.Counter[str] = collections.Counter()
    for model in models:
        line = check(model, args.out)
        kinds[line.split()[0]] += 1
        print(line, flush=True)
    print(", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items())),
          f"of {len(models)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
