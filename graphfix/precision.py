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
(:func:`to_candidate`, :func:`to_reference`, :func:`from_candidate`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

__all__ = ["KEY", "PrecisionRecord", "read", "write", "tolerance_dtypes", "to_candidate",
           "from_candidate", "to_reference", "numpy_dtype", "float16_stand_in"]

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


def read(model: onnx.ModelProto) -> PrecisionRecord | None:
    """The record of ``model``, or None (none, or unreadable)."""
    for prop in model.metadata_props:
        if prop.key != KEY:
            continue
        try:
            data = json.loads(prop.value)
            io = data.get("io") or {}
            return PrecisionRecord(
                dtype=str(data["dtype"]),
                outputs={str(k): str(v) for k, v in (data.get("outputs") or {}).items()},
                io_inputs={str(k): str(v) for k, v in (io.get("inputs") or {}).items()},
                io_outputs={str(k): str(v) for k, v in (io.get("outputs") or {}).items()},
            )
        except (ValueError, TypeError, AttributeError, KeyError):
            return None
    return None


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


def to_candidate(feed: Mapping[str, Any], candidate: onnx.ModelProto) -> dict[str, Any]:
    """The original's inputs in the candidate's types (inputs it lowered on request)."""
    record = read(candidate)
    if record is None or not record.io_inputs:
        return dict(feed)
    low = numpy_dtype(record.dtype)
    return {name: np.asarray(value).astype(low) if name in record.io_inputs else value
            for name, value in feed.items()}


def from_candidate(feed: Mapping[str, Any], candidate: onnx.ModelProto) -> dict[str, Any]:
    """The candidate's inputs in the original's types (for a baseline fed the same values)."""
    record = read(candidate)
    return _in_types(feed, record.io_inputs if record is not None else {})


def to_reference(outputs: Mapping[str, Any], candidate: onnx.ModelProto) -> dict[str, Any]:
    """The candidate's outputs in the original's types."""
    record = read(candidate)
    return _in_types(outputs, record.io_outputs if record is not None else {})


def _in_types(values: Mapping[str, Any], types: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with those named in ``types`` cast to the element type given there."""
    return {name: np.asarray(value).astype(numpy_dtype(types[name])) if name in types else value
            for name, value in values.items()}


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
