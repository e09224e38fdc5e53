"""Lowered precision: what a model computed in float16 or bfloat16 says about itself.

A pass that lowers a model's precision (convert-precision) records it in the model's
``metadata_props`` under ``graphfix.precision``::

    {"dtype": "float16",                       # the lowered element type
     "outputs": {"logits": "float16"},         # outputs whose value went through lowered nodes
     "io": {"inputs": {"x": "float32"},        # signature entries whose type was changed on
            "outputs": {"logits": "float32"}}} # request, with their type in the original

The record travels with the written model. Parity reads it (:func:`tolerance_dtypes`): an
output whose computation was lowered is judged at the lowered type's default tolerance although
its own type is still float32, so ``graphfix check original.onnx lowered.onnx`` applies the
same bar as the run that wrote it. An output the record does not name (computed entirely in
float32) keeps float32's tolerance. Parity and the benchmark also read ``io``: each model gets
its inputs in its own type, and outputs are compared in the original's
(:func:`for_model`, :func:`to_reference`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

__all__ = ["KEY", "PrecisionRecord", "read", "write", "tolerance_dtypes", "for_model",
           "to_reference", "numpy_dtype", "float16_stand_in"]

KEY = "graphfix.precision"

_NUMPY: dict[str, Any] = {"float16": np.float16, "float32": np.float32, "float64": np.float64}


def numpy_dtype(name: str) -> Any:
    """The numpy type of an element type name (bfloat16 through ml_dtypes, which onnx needs)."""
    if name == "bfloat16":
        import ml_dtypes  # onnx depends on it; imported only where bfloat16 values are made

        return ml_dtypes.bfloat16
    return _NUMPY[name]


@dataclasses.dataclass(frozen=True)
class PrecisionRecord:
    """A lowered model's record: its lowered type, the outputs computed through it, and the
    inputs and outputs whose declared type changed (name -> the original's type)."""

    dtype: str
    outputs: Mapping[str, str] = dataclasses.field(default_factory=dict)
    io_inputs: Mapping[str, str] = dataclasses.field(default_factory=dict)
    io_outputs: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def to_json(self) -> str:
        data: dict[str, Any] = {"dtype": self.dtype, "outputs": dict(self.outputs)}
        if self.io_inputs or self.io_outputs:
            data["io"] = {"inputs": dict(self.io_inputs), "outputs": dict(self.io_outputs)}
        return json.dumps(data, sort_keys=True)


_LOWERED = {"float16": onnx.TensorProto.FLOAT16, "bfloat16": onnx.TensorProto.BFLOAT16}


def read(model: onnx.ModelProto) -> PrecisionRecord | None:
    """The record of ``model``, or None: none, unreadable (a type it does not know, names
    the model does not have) or stale (the model holds nothing of the lowered type). A
    record loosens parity's tolerance, so only one that fits the model is believed."""
    for prop in model.metadata_props:
        if prop.key != KEY:
            continue
        try:
            data = json.loads(prop.value)
            io = data.get("io") or {}
            record = PrecisionRecord(
                dtype=str(data["dtype"]),
                outputs={str(k): str(v) for k, v in (data.get("outputs") or {}).items()},
                io_inputs={str(k): str(v) for k, v in (io.get("inputs") or {}).items()},
                io_outputs={str(k): str(v) for k, v in (io.get("outputs") or {}).items()},
            )
        except (ValueError, TypeError, AttributeError, KeyError, RecursionError):
            return None
        if not _fits(record, model):
            return None
        # an output the record calls lowered is judged so only where it is computed so
        computed = _computed_in(model, _LOWERED[record.dtype]) if record.outputs else set()
        return dataclasses.replace(record, outputs={
            name: dtype for name, dtype in record.outputs.items() if name in computed})
    return None


def _fits(record: PrecisionRecord, model: onnx.ModelProto) -> bool:
    """Whether ``record`` describes ``model``: known types, names the model has, and the
    lowered type present in it."""
    if record.dtype not in _LOWERED or any(
            t != record.dtype for t in record.outputs.values()) or any(
            t not in _NUMPY for t in (*record.io_inputs.values(), *record.io_outputs.values())):
        return False
    inputs = {v.name for v in model.graph.input}
    outputs = {v.name for v in model.graph.output}
    if not (set(record.outputs) | set(record.io_outputs)) <= outputs or \
            not set(record.io_inputs) <= inputs:
        return False
    return _holds(model, _LOWERED[record.dtype])


def _computed_in(model: onnx.ModelProto, element_type: int) -> set[str]:
    """The names of ``model``'s outputs computed from values of ``element_type``: from its
    initializers, Constants, Casts to it or inputs of it, through the nodes that compute with
    them. A shape read off such a value (Shape, Size) does not count, nor a declared type
    (``value_info``), nor a body's value that its outputs are not computed from."""
    return _lowered_values(model.graph, element_type, set()) & {
        output.name for output in model.graph.output}


_SHAPE_ONLY = frozenset({"Shape", "Size"})


def _lowered_values(graph: onnx.GraphProto, element_type: int, outer: set[str]) -> set[str]:
    """The names in ``graph`` whose values are computed from values of ``element_type``
    (``outer``: such names of the enclosing graphs)."""
    lowered = set(outer)
    lowered |= {t.name for t in graph.initializer if t.data_type == element_type}
    for value in graph.input:
        if value.type.tensor_type.elem_type == element_type:
            lowered.add(value.name)
        else:
            lowered.discard(value.name)  # a body's own input hides the outer name
    for node in graph.node:
        if node.op_type in _SHAPE_ONLY and node.domain in ("", "ai.onnx"):
            lowered.difference_update(node.output)
            continue
        made = _holds_node(node, element_type) or any(n in lowered for n in node.input if n)
        for attr in node.attribute:
            for body in (*([attr.g] if attr.HasField("g") else []), *attr.graphs):
                inner = _lowered_values(body, element_type, lowered)
                made = made or any(o.name in inner for o in body.output)
        for name in node.output:
            if name and made:
                lowered.add(name)
            elif name:
                lowered.discard(name)
    return lowered


def _holds(model: onnx.ModelProto, element_type: int) -> bool:
    """Whether some tensor, declared value, Cast or Constant of ``model``'s main graph is of
    ``element_type``."""
    return _holds_graph(model.graph, element_type)


def _holds_graph(graph: onnx.GraphProto, element_type: int) -> bool:
    if any(t.data_type == element_type for t in graph.initializer):
        return True
    if any(v.type.tensor_type.elem_type == element_type
           for v in (*graph.input, *graph.output, *graph.value_info)):
        return True
    return any(_holds_node(node, element_type) for node in graph.node)


def _holds_node(node: onnx.NodeProto, element_type: int) -> bool:
    """Whether ``node`` casts to ``element_type`` or holds a tensor of it (a Constant)."""
    return any((attr.name == "to" and attr.i == element_type) or (
        attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == element_type)
        for attr in node.attribute)


def write(model: onnx.ModelProto, record: PrecisionRecord | None) -> None:
    """Replace ``model``'s record with ``record`` (None removes it)."""
    kept = [p for p in model.metadata_props if p.key != KEY]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    if record is not None:
        model.metadata_props.add(key=KEY, value=record.to_json())


def tolerance_dtypes(model: onnx.ModelProto) -> dict[str, str]:
    """Output name -> the element type whose default tolerance judges it, for the outputs of
    ``model`` whose computation was lowered (empty for a model without a record)."""
    record = read(model)
    return dict(record.outputs) if record is not None else {}


def for_model(feed: Mapping[str, Any], model: onnx.ModelProto,
              other: onnx.ModelProto | None = None) -> dict[str, Any]:
    """``feed``, made for ``other`` (or for the original), as ``model`` takes it: the inputs
    either of them lowered on request (``io``) in ``model``'s own declared types. One function
    for every direction: the original's inputs to a lowered candidate, a lowered candidate's
    to its baseline, a lowered reference's to a float32 candidate."""
    names = {name for each in (model, other) if each is not None
             for name in getattr(read(each), "io_inputs", {})}
    declared = _declared(model.graph.input)
    return _in_types(feed, {name: declared[name] for name in names if name in declared})


def to_reference(outputs: Mapping[str, Any], candidate: onnx.ModelProto,
                 like: Mapping[str, Any] | None = None,
                 reference: onnx.ModelProto | None = None) -> dict[str, Any]:
    """The candidate's outputs in the original's types, or in those of the reference's
    values ``like`` where given (a reference lowered as the candidate was, or lowered on
    request where the candidate was not: ``reference``'s own record)."""
    record = read(candidate)
    types: dict[str, Any] = dict(record.io_outputs) if record is not None else {}
    own = read(reference) if reference is not None else None
    types.update(own.io_outputs if own is not None else {})
    for name in types:
        if like is not None and name in like:
            types[name] = np.asarray(like[name]).dtype
    return _in_types(outputs, types)


def _declared(values: Any) -> dict[str, str]:
    """Name -> element type name of the declared float tensors in ``values``."""
    names = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.FLOAT16: "float16",
             onnx.TensorProto.DOUBLE: "float64", onnx.TensorProto.BFLOAT16: "bfloat16"}
    return {v.name: names[v.type.tensor_type.elem_type] for v in values
            if v.type.tensor_type.elem_type in names}


def _in_types(values: Mapping[str, Any], types: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with those named in ``types`` cast to the element type given there (a
    name, or a numpy dtype)."""
    return {name: np.asarray(value).astype(
        numpy_dtype(types[name]) if isinstance(types[name], str) else types[name])
        if name in types else value for name, value in values.items()}


def float16_stand_in(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` with every bfloat16 tensor, type and type attribute made float16:
    what ONNX Runtime's CPU provider, which has no bfloat16 kernels (and no Casts it inserts
    around them, as it does for float16), loads in a bfloat16 model's place, so that a
    lowered model's structure is checked where it cannot run. Values beyond float16's range
    become infinities: the stand-in is loaded, never run for its values."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for graph in _graphs(out.graph):
        for value in [*graph.input, *graph.output, *graph.value_info]:
            _retype(value.type)
        for index, tensor in enumerate(graph.initializer):
            if tensor.data_type == onnx.TensorProto.BFLOAT16:
                graph.initializer[index].CopyFrom(_as_float16(tensor))
        for node in graph.node:
            _retype_node(node)
    for function in out.functions:
        for node in function.node:
            _retype_node(node)
            for attribute in node.attribute:
                for graph in [attribute.g, *attribute.graphs]:
                    for inner in _graphs(graph):
                        for n in inner.node:
                            _retype_node(n)
    return out


def _graphs(graph: onnx.GraphProto) -> list[onnx.GraphProto]:
    found = [graph]
    for node in graph.node:
        for attribute in node.attribute:
            for sub in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
                found += _graphs(sub)
    return found


def _retype(value_type: onnx.TypeProto) -> None:
    kind = value_type.WhichOneof("value")
    if kind == "tensor_type" and value_type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16:
        value_type.tensor_type.elem_type = onnx.TensorProto.FLOAT16
    elif kind == "sequence_type":
        _retype(value_type.sequence_type.elem_type)
    elif kind == "optional_type":
        _retype(value_type.optional_type.elem_type)


def _retype_node(node: onnx.NodeProto) -> None:
    for attribute in node.attribute:
        if attribute.type == onnx.AttributeProto.INT and attribute.name in ("to", "dtype") \
                and attribute.i == onnx.TensorProto.BFLOAT16:
            attribute.i = onnx.TensorProto.FLOAT16
        elif attribute.type == onnx.AttributeProto.TENSOR and \
                attribute.t.data_type == onnx.TensorProto.BFLOAT16:
            attribute.t.CopyFrom(_as_float16(attribute.t))


def _as_float16(tensor: onnx.TensorProto) -> onnx.TensorProto:
    values = onnx.numpy_helper.to_array(tensor).astype(np.float32)
    with np.errstate(over="ignore"):
        return onnx.numpy_helper.from_array(values.astype(np.float16), tensor.name)
