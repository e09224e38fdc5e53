"""Reading ONNX Runtime's profile (a Chrome trace) into per-node and per-op-type times.

ORT's profiler writes, per run, a ``model_run`` event (cat ``Session``) and per executed node a
``<node name>_kernel_time`` event (cat ``Node``) whose ``args`` carry the op type, provider,
input and output types and shapes, and the output size in bytes. The runs a caller timed are
the last ones of each trace (the others are warm-up); node events belong to the run whose span
holds them.

ORT names the nodes it creates after what they replace, and those names are the only record of
a fusion in the profile:

- ``<name>/MatMulScaleFusion/`` and other ``/<Kind>Fusion/`` suffixes, ``fused <name>``
  (FusedGemm), ``<name>_token_<n>`` (a unique-name counter);
- ``<output tensor>_nchwc``: the NCHWc layout transformer names a node after the tensor it
  produces (a Conv with its BatchNormalization and activation fused in, named after the
  activation's output).

A node that keeps an original node's name but not its op type (a Conv that became a FusedConv)
stands for that node. A node whose name, stripped of those decorations, is an original node's name or an original
tensor's name stands for that original node; when its op type differs (a Conv named after a
Relu's output), the original nodes between the one named and the nearest earlier node of its
op type, along single-consumer edges, are the ones it fused.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

__all__ = ["NodeTime", "OpTypeTime", "TracedRuns", "GLUE_OPS", "read_runs", "node_times",
           "op_type_times", "per_run_node_ms", "original_names"]

GLUE_OPS = frozenset({
    "Transpose", "Reshape", "Cast", "MemcpyToHost", "MemcpyFromHost",  # the classic four
    "Squeeze", "Unsqueeze", "Flatten",                                  # reshapes by another name
    "ReorderInput", "ReorderOutput",                                    # ORT's NCHWc layout glue
})
"""Op types that move or re-type data without computing: layout and dtype glue."""

_DECORATIONS = (
    re.compile(r"^fused "),
    re.compile(r"/[A-Za-z0-9]*Fusion/?$"),
    re.compile(r"_nchwc$"),
    re.compile(r"_token_\d+$"),
)
_FUSION_DEPTH = 4  # original nodes walked back from the one a fused node is named after


@dataclasses.dataclass
class NodeTime:
    """One node ORT executed: its mean time per timed run and its share of the run."""

    name: str
    op_type: str
    provider: str
    ms: float
    share: float
    input_shapes: list[dict[str, list[int]]]
    output_shapes: list[dict[str, list[int]]]
    output_bytes: int
    stands_for: list[str]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class OpTypeTime:
    """One op type: how many nodes ran it, their mean time per run and its share."""

    op_type: str
    count: int
    ms: float
    share: float
    providers: list[str]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class TracedRuns:
    """The timed runs of one trace: ORT's own duration of each, and each run's node events."""

    run_ms: list[float]
    nodes: list[list[Mapping[str, Any]]]
    session_init_ms: float | None


def read_runs(events: Sequence[Mapping[str, Any]], timed: int) -> TracedRuns:
    """The last ``timed`` runs of one trace and their node events (by time span)."""
    runs = sorted((e for e in events if e.get("cat") == "Session"
                   and e.get("name") == "model_run"), key=lambda e: float(e["ts"]))
    runs = runs[-timed:] if timed > 0 else []
    starts = [float(e["ts"]) for e in runs]
    nodes: list[list[Mapping[str, Any]]] = [[] for _ in runs]
    for event in events:
        if event.get("cat") != "Node" or not str(event.get("name", "")).endswith("_kernel_time"):
            continue
        at = float(event.get("ts", 0))
        index = bisect.bisect_right(starts, at) - 1
        if index >= 0 and at <= starts[index] + float(runs[index].get("dur", 0)):
            nodes[index].append(event)
    init = [float(e.get("dur", 0)) / 1e3 for e in events
            if e.get("cat") == "Session" and e.get("name") == "session_initialization"]
    return TracedRuns([float(e.get("dur", 0)) / 1e3 for e in runs],
                      [_without_containers(run) for run in nodes], init[0] if init else None)


_CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})


def _within(inner: Mapping[str, Any], outer: Mapping[str, Any]) -> bool:
    start, end = float(outer.get("ts", 0)), float(outer.get("ts", 0)) + float(outer.get("dur", 0))
    return inner is not outer and start <= float(inner.get("ts", 0)) <= end


def _without_containers(run: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """A run's node events less each If, Loop or Scan whose subgraph's nodes are events of
    their own within its span: its time is theirs, and counting both would count it twice."""
    return [event for event in run
            if (event.get("args") or {}).get("op_name") not in _CONTROL_FLOW
            or not any(_within(other, event) for other in run)]


def _shapes(value: Any) -> list[dict[str, list[int]]]:
    if not isinstance(value, list):
        return []
    return [{str(k): [int(d) for d in v] for k, v in item.items()}
            for item in value if isinstance(item, dict)]


def node_times(runs: Sequence[TracedRuns], call_ms: float,
               originals: Mapping[str, list[str]]) -> list[NodeTime]:
    """Per node, its mean time over every timed run of ``runs`` and its share of ``call_ms``
    (the mean timed call), slowest first. ``originals`` maps an ORT node name to the original
    nodes it stands for (:func:`original_names`)."""
    total = sum(len(traced.nodes) for traced in runs)
    if total == 0:
        return []
    sums: dict[str, float] = defaultdict(float)
    first: dict[str, Mapping[str, Any]] = {}
    for traced in runs:
        for events in traced.nodes:
            for event in events:
                name = str(event["name"])[: -len("_kernel_time")]
                sums[name] += float(event.get("dur", 0)) / 1e3
                first.setdefault(name, event)
    rows = []
    for name, summed in sums.items():
        args = first[name].get("args") or {}
        ms = summed / total
        rows.append(NodeTime(
            name=name,
            op_type=str(args.get("op_name", "?")),
            provider=str(args.get("provider", "?")),
            ms=ms,
            share=ms / call_ms if call_ms > 0 else 0.0,
            input_shapes=_shapes(args.get("input_type_shape")),
            output_shapes=_shapes(args.get("output_type_shape")),
            output_bytes=int(args.get("output_size", 0) or 0),
            stands_for=list(originals.get(name, [])),
        ))
    rows.sort(key=lambda row: (-row.ms, row.name))
    return rows


def op_type_times(nodes: Sequence[NodeTime]) -> list[OpTypeTime]:
    """Nodes grouped by op type, slowest first."""
    groups: dict[str, list[NodeTime]] = defaultdict(list)
    for node in nodes:
        groups[node.op_type].append(node)
    rows = [OpTypeTime(op_type, len(members), sum(n.ms for n in members),
                       sum(n.share for n in members),
                       sorted({n.provider for n in members}))
            for op_type, members in groups.items()]
    rows.sort(key=lambda row: (-row.ms, row.op_type))
    return rows


def per_run_node_ms(traced: TracedRuns) -> np.ndarray:
    """The sum of node times of each run of one trace, in ms."""
    return np.asarray([sum(float(e.get("dur", 0)) for e in events) / 1e3
                       for events in traced.nodes], dtype=np.float64)


def original_names(model: onnx.ModelProto, ort_names: Sequence[tuple[str, str]]
                   ) -> dict[str, list[str]]:
    """For each (ORT node name, op type) that is not an original node's name, the original
    nodes its name says it stands for (see the module docstring); names that say nothing are
    left out."""
    graph = model.graph
    nodes = {node.name: node for node in graph.node if node.name}
    producer = {out: node for node in graph.node for out in node.output if out}
    consumers: dict[str, int] = defaultdict(int)
    for node in graph.node:
        for name in node.input:
            consumers[name] += 1
    found: dict[str, list[str]] = {}
    for ort_name, op_type in ort_names:
        if ort_name in nodes:
            if nodes[ort_name].op_type != op_type:  # fused in place, keeping the node's name
                found[ort_name] = [ort_name]
            continue
        stripped = _strip(ort_name)
        named = nodes.get(stripped) or producer.get(stripped)
        if named is None:
            continue
        found[ort_name] = _fused_chain(named, op_type, producer, consumers)
    return found


def _strip(name: str) -> str:
    previous = None
    while previous != name:
        previous = name
        for pattern in _DECORATIONS:
            name = pattern.sub("", name)
    return name


def _fused_chain(named: onnx.NodeProto, op_type: str, producer: Mapping[str, onnx.NodeProto],
                 consumers: Mapping[str, int]) -> list[str]:
    """``named``, and when its op type is not ``op_type``, the single-consumer chain back to the
    nearest node of ``op_type`` (a Conv -> BatchNormalization -> Relu fused into one Conv)."""
    label = lambda node: node.name or f"{node.op_type}({node.output[0]})"  # noqa: E731
    if named.op_type == op_type:
        return [label(named)]
    chain = [named]
    node = named
    for _ in range(_FUSION_DEPTH):
        data = [name for name in node.input if name in producer]
        if not data:
            break
        earlier = producer[data[0]]
        if consumers.get(data[0], 0) != 1:
            break
        chain.append(earlier)
        if earlier.op_type == op_type:
            return [label(n) for n in reversed(chain)]
        node = earlier
    return [label(named)]
