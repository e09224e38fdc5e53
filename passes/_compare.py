"""Comparing a rewritten model with its input: the same graph (names aside), the ops that grew."""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from collections.abc import Sequence

import onnx

from graphfix.graph import all_nodes

from graphfix.model_io import same_tensor, tensor_digest

__all__ = ["same_graph", "grown_ops"]


def grown_ops(model: onnx.ModelProto, reference: onnx.ModelProto) -> str:
    """The op types ``model`` has more of than ``reference`` (every graph and local function),
    as ``"Reshape +20, Gemm +12"``."""
    def histogram(m: onnx.ModelProto) -> Counter[str]:
        nodes = list(all_nodes(m.graph)) + [n for f in m.functions for n in f.node]
        return Counter(n.op_type for n in nodes)

    before, after = histogram(reference), histogram(model)
    grown = sorted(((op, after[op] - before[op]) for op in after if after[op] > before[op]),
                   key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{op} +{d}" for op, d in grown) or "subgraph nodes"


def _node_key(node: onnx.NodeProto, names: bool) -> bytes:
    parts = [node.domain.encode(), node.op_type.encode()]
    if names:
        parts += ["|".join(node.input).encode(), "|".join(node.output).encode()]
    parts += sorted(_attribute_key(a) for a in node.attribute
                    if not at_default(node.domain, node.op_type, a))
    return b"\0".join(parts)


def at_default(domain: str, op_type: str, attribute: onnx.AttributeProto,
               version: int | None = None) -> bool:
    """Whether ``attribute`` holds its default in the op's schema at opset ``version`` (None:
    the latest): written out at its default, it means what leaving it out means (ONNX Runtime
    writes ``allowzero=0`` into a Reshape it rewrites)."""
    default = _defaults("" if domain == "ai.onnx" else domain, op_type, version).get(
        attribute.name)
    return default is not None and default == _value_key(attribute)


@functools.lru_cache(maxsize=None)
def _defaults(domain: str, op_type: str, version: int | None) -> dict[str, bytes]:
    """The default value of each attribute of the op's schema at ``version`` (None: latest),
    as :func:`_value_key` gives it."""
    try:
        schema = (onnx.defs.get_schema(op_type, domain=domain) if version is None else
                  onnx.defs.get_schema(op_type, version, domain))
    except Exception:  # noqa: BLE001 - an op onnx does not know (a custom domain's)
        return {}
    return {name: _value_key(attribute.default_value)
            for name, attribute in schema.attributes.items()
            if attribute.default_value.type != onnx.AttributeProto.UNDEFINED}


def _value_key(attribute: onnx.AttributeProto) -> bytes:
    """An attribute's type and value (or the function attribute it refers to), without its
    name and documentation."""
    copy = onnx.AttributeProto()
    copy.CopyFrom(attribute)
    copy.name = ""
    copy.doc_string = ""
    return copy.SerializeToString(deterministic=True)


def _attribute_key(attribute: onnx.AttributeProto) -> bytes:
    """An attribute's bytes; a subgraph's nodes in any order and with its own tensors named
    anyhow (ONNX Runtime renames and reorders what it writes into If and Loop bodies), so that
    a body that changed only that way counts as the same and the input model is kept."""
    graphs = [attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else \
        list(attribute.graphs) if attribute.type == onnx.AttributeProto.GRAPHS else []
    if not graphs:
        return attribute.SerializeToString(deterministic=True)
    keys = [attribute.name.encode()]
    for graph in graphs:
        keys.append(b"\2".join(sorted(_node_key(n, False) for n in graph.node)))
        keys.append(b"\2".join(sorted(
            t.SerializeToString(deterministic=True) for t in _unnamed(graph.initializer))))
        keys.append(f"{len(graph.input)}:{len(graph.output)}".encode())
    return b"\1".join(keys)


def _unnamed(tensors: Sequence[onnx.TensorProto]) -> list[onnx.TensorProto]:
    out = []
    for tensor in tensors:
        copy = onnx.TensorProto()
        copy.CopyFrom(tensor)
        copy.name = ""
        out.append(copy)
    return out


def _shape_key(tensor: onnx.TensorProto) -> tuple[int, tuple[int, ...]]:
    return tensor.data_type, tuple(tensor.dims)


def _same_initializers(a: onnx.GraphProto, b: onnx.GraphProto, names: bool) -> bool:
    """Whether ``a`` and ``b`` hold the same initializers: paired by name, or (``names=False``)
    by name where that pairs equal tensors and otherwise by type and shape, comparing values
    directly when a pairing is unambiguous and through digests only among tensors of one type
    and shape (hashing every weight cost more than the whole rewrite on large models)."""
    if names:
        by_name = {t.name: t for t in b.initializer}
        return len(by_name) == len(a.initializer) and all(
            t.name in by_name and same_tensor(t, by_name[t.name]) for t in a.initializer
        )
    # Rewriters rename some tensors, not most: pair the names both sides have first.
    by_name = {t.name: t for t in b.initializer}
    paired = {t.name for t in a.initializer if t.name in by_name and same_tensor(t, by_name[t.name])}
    if len(by_name) != len(b.initializer) or len({t.name for t in a.initializer}) != len(a.initializer):
        paired = set()  # names repeat (an invalid graph): no pairing by name
    groups: dict[tuple[int, tuple[int, ...]], tuple[list, list]] = defaultdict(lambda: ([], []))
    for t in a.initializer:
        if t.name not in paired:
            groups[_shape_key(t)][0].append(t)
    for t in b.initializer:
        if t.name not in paired:
            groups[_shape_key(t)][1].append(t)
    for left, right in groups.values():
        if len(left) != len(right):
            return False
        if len(left) == 1:
            if not same_tensor(left[0], right[0]):
                return False
        elif sorted(map(tensor_digest, left)) != sorted(map(tensor_digest, right)):
            return False
    return True


def same_graph(a: onnx.GraphProto, b: onnx.GraphProto, *, names: bool = True) -> bool:
    """Whether two graphs hold the same nodes and initializers, in any order. ``names=False``
    ignores tensor names (and with them the wiring), for rewriters that rename everything: a
    graph that differs only in how it is wired then counts as the same, which only ever keeps
    the input model. Nodes are compared first; weights only when they match."""
    if len(a.node) != len(b.node) or len(a.initializer) != len(b.initializer):
        return False
    if sorted(_node_key(n, names) for n in a.node) != sorted(_node_key(n, names) for n in b.node):
        return False
    return _same_initializers(a, b, names)
