"""Graph helpers shared by the passes: subgraphs, node counts, structural equality."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from graphfix.model_io import tensor_digest

__all__ = ["subgraphs", "count_nodes", "same_graph"]


def subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The graphs held by ``node``'s attributes (If branches, Loop/Scan bodies)."""
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def count_nodes(graph: onnx.GraphProto) -> int:
    """Nodes of ``graph`` and of every subgraph in it."""
    return sum(1 + sum(count_nodes(sub) for sub in subgraphs(node)) for node in graph.node)


def _node_key(node: onnx.NodeProto, names: bool) -> bytes:
    parts = [node.domain.encode(), node.op_type.encode()]
    if names:
        parts += ["|".join(node.input).encode(), "|".join(node.output).encode()]
    parts += sorted(a.SerializeToString(deterministic=True) for a in node.attribute)
    return b"\0".join(parts)


def _initializer_keys(graph: onnx.GraphProto, names: bool) -> list[bytes]:
    return sorted(
        (t.name.encode() if names else b"") + b"\0" + tensor_digest(t) for t in graph.initializer
    )


def same_graph(a: onnx.GraphProto, b: onnx.GraphProto, *, names: bool = True) -> bool:
    """Whether two graphs hold the same nodes and initializers, in any order. ``names=False``
    ignores tensor names (and with them the wiring), for rewriters that rename everything: a
    graph that differs only in how it is wired then counts as the same, which only ever keeps
    the input model. Nodes are compared first; weights are hashed only when they match."""
    if len(a.node) != len(b.node) or len(a.initializer) != len(b.initializer):
        return False
    if sorted(_node_key(n, names) for n in a.node) != sorted(_node_key(n, names) for n in b.node):
        return False
    return _initializer_keys(a, names) == _initializer_keys(b, names)
