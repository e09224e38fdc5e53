"""Signature changes on request: channels-last graph inputs and outputs declared
channels-first (``inputs_as_nchw`` / ``outputs_as_nchw``).

    x[N,H,W,C] -> T(0,3,1,2) -> ...   =>   x[N,C,H,W] -> T(0,2,3,1) -> T(0,3,1,2) -> ...

A Transpose inside keeps what the graph computes, and the converter's own Transpose then cancels
against it. The change is recorded in the model's metadata (:mod:`graphfix.layout`).
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx

from graphfix import layout
from graphfix.errors import PassError
from graphfix.graph import Names, all_names, outer_refs, subgraphs
from .perm import Perm, invert

__all__ = ["channels_first"]


def channels_first(
    model: onnx.ModelProto, inputs: Sequence[str], outputs: Sequence[str]
) -> list[str]:
    """Declare the named graph inputs and outputs channels-first, with a Transpose inside that
    keeps what the graph computes; one line per change (none for a tensor already changed)."""
    if not inputs and not outputs:
        return []
    graph = model.graph
    done = layout.read(model)
    initializers = {i.name for i in graph.initializer}
    declared = {
        "input": {i.name: i for i in graph.input if i.name not in initializers},
        "output": {o.name: o for o in graph.output},
    }
    for kind, names in (("input", inputs), ("output", outputs)):
        unknown = [n for n in names if n not in declared[kind]]
        if unknown:
            raise PassError(
                f"{kind}s_as_nchw: no graph {kind} named {', '.join(map(repr, unknown))}",
                hint=f"the model's {kind}s are {', '.join(map(repr, declared[kind])) or 'none'}",
            )
    read_inside: set[str] = set()
    for node in graph.node:
        for sub in subgraphs(node):
            read_inside |= outer_refs(sub)
    produced = {name for node in graph.node for name in node.output}
    output_names = [o.name for o in graph.output]
    todo = [(kind, name) for kind, wanted in (("input", inputs), ("output", outputs))
            for name in wanted if name not in done[f"{kind}s"]]
    for kind, name in todo:  # every refusal before the first edit: nothing half-done
        info = declared[kind][name]
        dims = info.type.tensor_type.shape.dim if info.type.HasField("tensor_type") else []
        if not info.type.tensor_type.HasField("shape") or len(dims) < 3:
            raise PassError(
                f"{kind}s_as_nchw: {kind} {name!r} is not a tensor of known rank 3 or more",
                hint="only channels-last tensors [N, ..., C] can be declared [N, C, ...]",
            )
        if name in read_inside:
            raise PassError(f"{kind}s_as_nchw: {kind} {name!r} is read inside a subgraph")
        if kind == "input" and name in output_names:
            raise PassError(f"inputs_as_nchw: input {name!r} is also a graph output")
        if kind == "output" and (name not in produced or output_names.count(name) > 1):
            raise PassError(f"outputs_as_nchw: output {name!r} is not computed by a node of "
                            "the graph (or is listed twice)")
    names = Names(all_names(graph))
    changes: dict[str, dict[str, Perm]] = {"inputs": {}, "outputs": {}}
    lines = []
    for kind, name in todo:
        info = declared[kind][name]
        dims = info.type.tensor_type.shape.dim
        rank = len(dims)
        to_first: Perm = layout.to_channels_first(rank)
        inner = names.fresh(f"{name}_channels_last")
        for node in graph.node:
            for slot, used in enumerate(node.input):
                if used == name:
                    node.input[slot] = inner  # the readers read the old layout under a new name
        if kind == "input":
            graph.node.insert(0, onnx.helper.make_node(
                "Transpose", [name], [inner], perm=list(invert(to_first)),
                name=names.fresh(f"{name}_to_channels_last")))
        else:
            producer = next(n for n in graph.node if name in n.output)
            producer.output[list(producer.output).index(name)] = inner
            graph.node.append(onnx.helper.make_node(
                "Transpose", [inner], [name], perm=list(to_first),
                name=names.fresh(f"{name}_to_channels_first")))
        moved = [onnx.TensorShapeProto.Dimension() for _ in dims]
        for i, axis in enumerate(to_first):
            moved[i].CopyFrom(dims[axis])
        del dims[:]
        dims.extend(moved)
        changes[f"{kind}s"][name] = to_first
        shape = [d.dim_value if d.HasField("dim_value") else d.dim_param or "?" for d in dims]
        lines.append(f"signature changed: {kind} {name!r} is now channels-first {shape} "
                     f"(the original's transposed by {list(to_first)})")
    layout.record(model, inputs=changes["inputs"], outputs=changes["outputs"])
    return lines
