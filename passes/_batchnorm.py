"""BatchNormalization folded into the convolution before it, as onnxsim's optimizer does.

    z = BatchNormalization(Conv(x, W, B), scale, bias, mean, var)
        =>   z = Conv(x, W * s, (B - mean) * s + bias),   s = scale / sqrt(var + epsilon)

simplify does this itself, in this process, so that the fused weights are computed from the
weights where they are and can stay here (its rule 10) rather than cross to onnxsim's worker to
be fused there. The same conditions as onnxsim's ``fuse_bn_into_conv``: inference mode, one
output, float or double throughout, every parameter an initializer that no caller can feed, and
the convolution's output read by the normalization alone. The arithmetic is done in float64 and
rounded once.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from graphfix import graph as graph_layer
from graphfix.graph import STANDARD_DOMAINS
from graphfix.model_io import tensor_value

__all__ = ["fold_batch_norms"]

_FLOATS = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE)


def fold_batch_norms(model: onnx.ModelProto) -> int:
    """Fold every Conv -> BatchNormalization pair of ``model``'s main graph, in place; returns
    how many were folded."""
    graph = model.graph
    fed = {i.name for i in graph.input}
    tensors = {t.name: t for t in graph.initializer if t.name not in fed}
    index = graph_layer.Index(graph)
    names = graph_layer.Names(graph_layer.all_names(graph))
    outputs = {o.name for o in graph.output}
    folded: list[int] = []  # positions of the normalizations folded away
    for position, norm in enumerate(list(graph.node)):
        conv = _foldable(norm, index, tensors, outputs)
        if conv is None:
            continue
        weight, bias = _fused(conv, norm, tensors)
        for value, base, slot in ((weight, conv.input[1], 1), (bias, norm.input[2], 2)):
            tensor = numpy_helper.from_array(value, names.fresh(f"{base}_bn"))
            graph.initializer.append(tensor)
            tensors[tensor.name] = tensor
            if slot < len(conv.input):
                index.set_input(conv, slot, tensor.name)
            else:
                conv.input.append(tensor.name)
                index.remove(conv)
                index.add(conv)
        index.remove(norm)
        index.set_output(conv, 0, norm.output[0])
        folded.append(position)
    if folded:
        graph_layer.delete_positions(graph.node, folded)
        graph_layer.drop_unread_initializers(graph)
    return len(folded)


def _foldable(norm: onnx.NodeProto, index: graph_layer.Index,
              tensors: dict[str, onnx.TensorProto], outputs: set[str]) -> onnx.NodeProto | None:
    """The Conv that ``norm`` can be folded into, or None."""
    if norm.op_type != "BatchNormalization" or norm.domain not in STANDARD_DOMAINS:
        return None
    attrs = {a.name: a for a in norm.attribute}
    if any(name for name in norm.output[1:]) or len(norm.input) != 5:
        return None
    if ("training_mode" in attrs and attrs["training_mode"].i) or (
            "spatial" in attrs and attrs["spatial"].i != 1):
        return None
    conv = index.producer.get(norm.input[0])
    if conv is None or conv.op_type != "Conv" or conv.domain not in STANDARD_DOMAINS:
        return None
    if conv.output[0] in outputs or len(index.readers(conv.output[0])) != 1:
        return None
    params = [*conv.input[1:3], *norm.input[1:]]
    if any(name and name not in tensors for name in params):
        return None
    weight = tensors[conv.input[1]]
    if weight.data_type not in _FLOATS or len(weight.dims) < 3 or any(
            tensors[name].data_type != weight.data_type for name in params if name):
        return None
    channels = weight.dims[0]
    return conv if all(list(tensors[name].dims) == [channels]
                       for name in params[1:] if name) else None


def _fused(conv: onnx.NodeProto, norm: onnx.NodeProto,
           tensors: dict[str, onnx.TensorProto]) -> tuple[np.ndarray, np.ndarray]:
    """The folded weight and bias, computed in float64 and rounded once."""
    def value(name: str) -> np.ndarray:
        array = tensor_value(tensors[name])
        assert array is not None
        return array

    weight = value(conv.input[1])
    dtype = weight.dtype
    weight = weight.astype(np.float64)
    has_bias = len(conv.input) > 2 and conv.input[2]
    bias = value(conv.input[2]).astype(np.float64) if has_bias else np.zeros(weight.shape[0])
    scale, shift, mean, var = (value(name).astype(np.float64) for name in norm.input[1:])
    epsilon = next((a.f for a in norm.attribute if a.name == "epsilon"), 1e-5)
    factor = scale / np.sqrt(var + epsilon)
    folded = weight * factor.reshape((-1,) + (1,) * (weight.ndim - 1))
    return folded.astype(dtype), ((bias - mean) * factor + shift).astype(dtype)
