"""What is in a model, as the report states it: versions, size, op histogram, Transposes,
signature and dynamic dimensions (:class:`graphfix.report.ModelFacts`). The report's types are
plain data; reading them off a model is this module's work, which needs the graph layer and
the weights' sizes."""

from __future__ import annotations

import collections

import onnx

from graphfix.graph import STANDARD_DOMAINS, dims, graphs, subgraphs
from graphfix.model_io import stored_size as model_size  # its size as written
from graphfix.report import ModelFacts, TensorFacts

__all__ = ["model_facts", "op_histogram", "model_size"]

def op_histogram(model: onnx.ModelProto) -> dict[str, int]:
    """Op types of all graphs (subgraphs included) and of local functions' bodies (counted
    once each, as :func:`graphfix.graph.count_nodes` counts), custom domains as ``domain::Op``."""
    counts: collections.Counter[str] = collections.Counter()
    bodies = [model.graph, *(sub for f in model.functions for n in f.node for sub in subgraphs(n))]
    nodes = [n for body in bodies for g in graphs(body) for n in g.node]
    nodes += [n for f in model.functions for n in f.node]
    for node in nodes:
        domain = node.domain if node.domain not in STANDARD_DOMAINS else ""
        counts[f"{domain}::{node.op_type}" if domain else node.op_type] += 1
    return dict(sorted(counts.items()))


def _dtype_name(elem_type: int) -> str:
    """An element type's name ("float", "int64"); one that no onnx names is "type 99"."""
    try:
        return onnx.TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"type {elem_type}"


def _tensor_facts(value: onnx.ValueInfoProto, dynamic: set[str]) -> TensorFacts:
    vtype = value.type
    if vtype.HasField("tensor_type"):
        ttype = vtype.tensor_type
        dtype = _dtype_name(ttype.elem_type)
        sizes = dims(value)
        shape = None if sizes is None else list(sizes)
        dynamic.update(d for d in shape or () if isinstance(d, str))
        written = [d.dim_value for d in ttype.shape.dim if d.HasField("dim_value")]
        return TensorFacts(value.name, dtype, shape,
                           unknown_written_as=min(written) if written and min(written) < 0 else None)
    kind = vtype.WhichOneof("value") or "unknown"
    return TensorFacts(value.name, kind.removesuffix("_type"), None)


def model_facts(
    model: onnx.ModelProto, *, size_bytes: int | None = None, external_data: bool = False
) -> ModelFacts:
    """What is in a model: versions, size, op histogram, Transposes, signature, dynamic dims."""
    histogram = op_histogram(model)
    initializer_names = {init.name for init in model.graph.initializer}
    dynamic: set[str] = set()
    inputs = [_tensor_facts(v, dynamic) for v in model.graph.input]
    outputs = [_tensor_facts(v, dynamic) for v in model.graph.output]
    every = list(graphs(model.graph))
    if size_bytes is None:
        size_bytes = model_size(model)
    return ModelFacts(
        ir_version=model.ir_version,
        opsets={imp.domain or "": imp.version for imp in model.opset_import},
        producer=" ".join(p for p in (model.producer_name, model.producer_version) if p),
        size_bytes=size_bytes,
        external_data=external_data,
        nodes=sum(histogram.values()),
        op_histogram=histogram,
        transposes=histogram.get("Transpose", 0),
        initializers=sum(len(g.initializer) for g in every),
        initializer_inputs=sum(1 for v in model.graph.input if v.name in initializer_names),
        initializer_input_names=[v.name for v in model.graph.input if v.name in initializer_names],
        subgraphs=len(every) - 1,
        inputs=inputs,
        outputs=outputs,
        dynamic_dims=sorted(dynamic),
    )
