"""Why graphfix has its own graph layer: the work every pass needs before and after it rewrites
(who produces and reads each tensor, dead-code removal, topological order), timed with
onnx-graphsurgeon and with ``graphfix.graph`` on the same converter-style NHWC graphs.

onnx-graphsurgeon: ``import_onnx`` (its graph of Node/Variable objects), ``cleanup()`` and
``toposort()``, ``export_onnx``. graphfix: ``Index`` (producers and readers), ``live_nodes``
(dead code) and ``toposort``, working on the protobuf nodes themselves. Each step is the best of
--repeat runs on a fresh copy; the last line prints the ratio of the totals.

    python tools/bench_graph_layer.py [--sizes 1000,10000,100000] [--repeat 3]

Needs the ``tools`` extra (onnx-graphsurgeon is not a graphfix dependency).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import onnx

from bench_transposes import build_nhwc_graph

from graphfix import graph as gl


def _best(step: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return min(times)


def _surgeon(model: onnx.ModelProto, repeat: int) -> dict[str, float]:
    import onnx_graphsurgeon as gs

    imported = gs.import_onnx(model)
    return {
        "import": _best(lambda: gs.import_onnx(model), repeat),
        "clean+sort": _best(lambda: gs.import_onnx(model).cleanup().toposort(), repeat)
        - _best(lambda: gs.import_onnx(model), 1),
        "export": _best(lambda: gs.export_onnx(imported), repeat),
    }


def _own(model: onnx.ModelProto, repeat: int) -> dict[str, float]:
    graph = model.graph
    outputs = [o.name for o in graph.output]
    return {
        "index": _best(lambda: gl.Index(graph), repeat),
        "clean+sort": _best(lambda: gl.toposort(gl.live_nodes(graph.node, outputs)), repeat),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'nodes':>7}  {'graphsurgeon (s)':<40}  {'graphfix.graph (s)':<30}  ratio")
    for size in (int(s) for s in args.sizes.split(",")):
        model = build_nhwc_graph(max(1, size // 8))
        surgeon = _surgeon(model, args.repeat)
        own = _own(model, args.repeat)
        left = "  ".join(f"{k} {v:.3f}" for k, v in surgeon.items())
        right = "  ".join(f"{k} {v:.3f}" for k, v in own.items())
        ratio = sum(surgeon.values()) / sum(own.values())
        print(f"{len(model.graph.node):>7}  {left:<40}  {right:<30}  {ratio:.1f}x")


if __name__ == "__main__":
    main()
