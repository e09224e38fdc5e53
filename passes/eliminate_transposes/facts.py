"""Facts about one graph's tensors: constant values, ranks, static shapes, computed Reshape
targets. Read-only with respect to the graph: they follow the live :class:`graphfix.graph.Index`
the rewrite keeps up to date, and learn the shapes of the tensors the rewrite creates."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Union

import numpy as np
import onnx
from onnx import numpy_helper

from graphfix import graph as graph_layer
from graphfix import model_io
from graphfix.graph import Index, before_steps, dim_of, subgraphs
from .nodes import NodeTable
from .ops import (
    BROADCAST_BINARY,
    STANDARD_DOMAINS,
    ELEMENTWISE_UNARY,
    KEEPS_FIRST_DIM,
    SAME_RANK,
    SHAPE_MATH,
    SHAPE_ONLY,
    attr,
    is_transpose,
)
from .perm import Perm, normalize_axes
from graphfix.shapes import infer_shapes

__all__ = ["GraphFacts", "ShapeFacts", "infer", "before_steps", "fold_shape_only", "squeeze_axes",
           "shape_bounds", "Entry"]

logger = logging.getLogger(__name__)

# How far up the graph a fact is looked for (ranks, batch roots, Shape computations).
CHAIN_DEPTH = 8

Shape = tuple[Union[int, None], ...]
# An entry of a computed shape: an int, or (tensor, axis) for a dimension of a tensor.
Entry = Union[int, tuple[str, int]]


def _cast(value: np.ndarray, to: int | None) -> np.ndarray | None:
    """``Cast(to)`` of a constant where numpy's conversion is ONNX's: integers and booleans to
    any number, floats to floats (float to integer rounds by implementation: not folded)."""
    try:
        target = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(to)) if to else None
    except (KeyError, TypeError, ValueError):
        return None
    if target is None or target.kind not in "biuf" or value.dtype.kind not in "biuf":
        return None
    if value.dtype.kind == "f" and target.kind != "f" or to == onnx.TensorProto.BFLOAT16:
        return None
    return value.astype(target)


def shape_bounds(node: onnx.NodeProto, rank: int) -> tuple[int, int]:
    """``Shape``'s ``start`` and ``end`` for an input of ``rank``, normalized and clamped."""
    bounds = (attr(node, "start", 0), attr(node, "end", rank))
    start, end = (min(max(i + rank if i < 0 else i, 0), rank) for i in bounds)
    return start, end


def squeeze_axes(
    node: onnx.NodeProto, opset: int, value_of: Callable[[str], np.ndarray | None]
) -> list[int] | None | str:
    """Squeeze/Unsqueeze axes: attribute before opset 13, input from 13; None when absent, a
    reason when computed at run time."""
    if opset < 13:
        axes = attr(node, "axes")
        return None if axes is None else list(axes)
    if len(node.input) < 2 or not node.input[1]:
        return None
    value = value_of(node.input[1])
    if value is None:
        return "axes input is not a constant"
    return value.reshape(-1).tolist()


def fold_shape_only(
    node: onnx.NodeProto, opset: int, value_of: Callable[[str], np.ndarray | None]
) -> np.ndarray | None:
    """The value of a shape-only op (:data:`SHAPE_ONLY`) whose inputs ``value_of`` knows; None
    when an input is not constant or the op cannot apply."""
    if not node.input or len(node.output) != 1:
        return None
    data = value_of(node.input[0])
    if data is None:
        return None
    if node.op_type == "Identity":
        return data
    if node.op_type == "Cast":
        return _cast(data, attr(node, "to"))
    if node.op_type == "Reshape":
        second = value_of(node.input[1]) if len(node.input) > 1 and node.input[1] else None
        shape = attr(node, "shape") if opset < 5 else (
            None if second is None else second.reshape(-1).tolist())
        if shape is None:
            return None
        allow_zero = bool(attr(node, "allowzero", 0))
        target = [data.shape[i] if d == 0 and not allow_zero and i < data.ndim else int(d)
                  for i, d in enumerate(shape)]
        try:
            return data.reshape(target)
        except ValueError:
            return None
    axes = squeeze_axes(node, opset, value_of)
    if isinstance(axes, str):
        return None
    if node.op_type == "Squeeze":
        if axes is None:
            return data.reshape([d for d in data.shape if d != 1])
        normalized = normalize_axes(axes, data.ndim)
        if normalized is None or any(data.shape[a] != 1 for a in normalized):
            return None
        return data.reshape([d for i, d in enumerate(data.shape) if i not in normalized])
    if axes is None:  # Unsqueeze needs its axes
        return None
    normalized = normalize_axes(axes, data.ndim + len(axes))
    if normalized is None:
        return None
    return np.expand_dims(data, tuple(normalized))


class ShapeFacts:
    """What ONNX's shape inference says: static shapes (None for unknown dims), element types,
    and the symbol of a symbolic first dimension (the batch, as inference names it); and the
    tensors whose last bits can move an output by a step (:func:`before_steps`)."""

    def __init__(self) -> None:
        self.shapes: dict[str, Shape] = {}
        self.types: dict[str, int] = {}
        self.leading: dict[str, str] = {}
        self.before_steps: frozenset[str] = frozenset()

    def collect(self, graph: onnx.GraphProto) -> None:
        for info in (*graph.input, *graph.output, *graph.value_info):
            if not info.type.HasField("tensor_type"):
                continue
            tensor_type = info.type.tensor_type
            self.types[info.name] = tensor_type.elem_type
            if tensor_type.HasField("shape"):
                dims = tensor_type.shape.dim
                self.shapes[info.name] = tuple(
                    size if isinstance(size := dim_of(d), int) else None for d in dims)
                if dims and dims[0].HasField("dim_param") and dims[0].dim_param:
                    self.leading[info.name] = dims[0].dim_param
        for node in graph.node:
            for sub in subgraphs(node):
                self.collect(sub)


def infer(model: onnx.ModelProto) -> ShapeFacts:
    """ONNX's shape inference (with data propagation) on a copy that carries only the small
    initializers' data; axes and shapes a converter computes from constants (tf2onnx's TFLite
    front end writes ``Unsqueeze(x, Reshape(axes, [1]))``) are given to it as constants."""
    light = onnx.ModelProto()
    light.ir_version = model.ir_version
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    graph = light.graph
    graph.name = model.graph.name
    graph.input.extend(model.graph.input)
    graph.output.extend(model.graph.output)
    graph_layer.forget_declared_shapes(graph)  # shapes proved from the inputs, not declared
    small: dict[str, np.ndarray] = {}
    overridable = {i.name for i in model.graph.input}  # an initializer listed as an input
    for init in model.graph.initializer:
        # Sized from type and shape: reading raw_data would copy every weight.
        if init.data_location != onnx.TensorProto.EXTERNAL and (
            model_io.tensor_bytes(init) <= 4096 if init.HasField("raw_data") else
            sum(len(f) for f in (init.float_data, init.int64_data, init.int32_data)) <= 1024
        ):
            graph.initializer.append(init)
            if init.data_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32) and (
                init.name not in overridable
            ):
                small[init.name] = numpy_helper.to_array(init)
        else:
            graph.initializer.add(name=init.name, data_type=init.data_type, dims=init.dims)
    outputs = {o.name for o in model.graph.output}
    opset = next((o.version for o in model.opset_import if o.domain in STANDARD_DOMAINS), 0)
    for node in model.graph.node:
        if node.op_type in SHAPE_ONLY and node.domain in STANDARD_DOMAINS and (
            node.output and node.output[0] not in outputs
        ):
            value = fold_shape_only(node, opset, small.get)
            if value is not None and value.size <= 1024 and value.dtype.kind in "iu":
                small[node.output[0]] = value
                graph.initializer.append(numpy_helper.from_array(value, node.output[0]))
                continue
        graph.node.append(node)
    try:
        inferred = infer_shapes(light, data_prop=True)
    except Exception as error:  # noqa: BLE001 - onnx raises several types
        logger.debug("shape inference failed, going on with the inputs' shapes only: %s", error)
        inferred = light
    facts = ShapeFacts()
    facts.collect(inferred.graph)
    facts.before_steps = before_steps(model.graph)
    return facts


class GraphFacts:
    """Constants, ranks and shapes of one graph's tensors, as the rewrite leaves the graph, and
    the permutation of each Transpose (by node key). Lifetime: one graph's rewrite."""

    def __init__(self, index: Index, nodes: NodeTable, initializers: dict[str, onnx.TensorProto],
                 opset: int, inferred: ShapeFacts, *, keep_reduction_order: bool = False,
                 ir_version: int = onnx.IR_VERSION) -> None:
        self.index = index
        self.nodes = nodes
        # The pass's option the handlers read: sum-like reductions keep their order.
        self.keep_reduction_order = keep_reduction_order
        self.initializers = initializers  # the rewrite adds and drops entries
        self.opset = opset
        # IR 3 lists every initializer as a graph input: a new constant is a Constant node.
        self.constant_nodes = 1 if ir_version < 4 else 0
        self.before_steps = inferred.before_steps
        self.shapes = inferred.shapes
        self.types = inferred.types
        self.leading = inferred.leading
        self._folded: dict[str, np.ndarray | None] = {}
        self._perms: dict[int, Perm | None] = {}  # node key -> its permutation

    def keeps_order(self, node: onnx.NodeProto) -> bool:
        """Whether ``node`` adds its elements in their order: on request, and where a step
        reads what it computes (:func:`before_steps`: a quantizer turns a last-bit change
        into a whole quantization level)."""
        return self.keep_reduction_order or any(o in self.before_steps for o in node.output)

    # ------------------------------------------------------------ constants
    def const_value(self, name: str) -> np.ndarray | None:
        if name in self.initializers:
            # Weights left in their data file are read here, this tensor alone, when a rule
            # needs the value; None when the external data was never loaded.
            return model_io.tensor_value(self.initializers[name])
        node = self.index.producer.get(name)
        if node is None or node.domain not in STANDARD_DOMAINS:
            return None
        if node.op_type in SHAPE_ONLY:
            if name not in self._folded:
                self._folded[name] = fold_shape_only(node, self.opset, self.const_value)
            return self._folded[name]
        if node.op_type == "Constant":
            for item in node.attribute:
                if item.name == "value":
                    return numpy_helper.to_array(item.t)
                if item.name in ("value_float", "value_int", "value_floats", "value_ints"):
                    dtype = np.float32 if "float" in item.name else np.int64
                    return np.array(onnx.helper.get_attribute_value(item), dtype=dtype)
        return None

    def is_constant(self, name: str) -> bool:
        if name in self.initializers:
            return model_io.has_value(self.initializers[name])
        return self.const_value(name) is not None

    def droppable(self, node: onnx.NodeProto, name: str) -> bool:
        """Whether ``node``, the producer of ``name``, goes once nothing reads ``name``: a
        Transpose, a Constant, a shape-only op of constants, or shape math (what a rewrite
        leaves unread of a computed Reshape target)."""
        return node.domain in STANDARD_DOMAINS and (
            node.op_type in ("Transpose", "Constant")
            or node.op_type in SHAPE_ONLY and self.const_value(name) is not None
            or node.op_type in SHAPE_MATH and len(node.output) == 1
        )

    # ------------------------------------------------------------ Transposes
    def transpose_perm(self, node: onnx.NodeProto) -> Perm | None:
        key = self.nodes.key(node)
        if key not in self._perms:
            perm = attr(node, "perm")
            if perm is None:
                rank = self.rank(node.input[0])
                self._perms[key] = None if rank is None else tuple(reversed(range(rank)))
            else:
                self._perms[key] = tuple(int(a) for a in perm)
        return self._perms[key]

    def perm_changed(self, node: onnx.NodeProto, perm: Perm | None) -> None:
        """The rewrite gave ``node`` another permutation (None: it is no Transpose now)."""
        self._perms[self.nodes.key(node)] = perm

    # ------------------------------------------------------------ ranks and shapes
    def rank(self, name: str, depth: int = CHAIN_DEPTH) -> int | None:
        node = self.index.producer.get(name)
        if is_transpose(node):
            perm = self.transpose_perm(node)  # type: ignore[arg-type]
            if perm is not None:
                return len(perm)
        if name in self.initializers:
            return len(self.initializers[name].dims)
        if name in self.shapes:
            return len(self.shapes[name])
        value = self.const_value(name)
        if value is not None:
            return value.ndim
        # Shape inference left it blank (an axes input a converter computed): derived from the
        # producer's inputs, ``depth`` producers up at most.
        if node is None or node.domain not in STANDARD_DOMAINS or depth <= 0:
            return None
        if node.op_type in SAME_RANK and node.input and node.input[0]:
            return self.rank(node.input[0], depth - 1)
        if node.op_type in BROADCAST_BINARY:
            ranks = [self.rank(i, depth - 1) for i in node.input if i]
            known = [r for r in ranks if r is not None]
            return max(known) if known and len(known) == len(ranks) else None
        if node.op_type in ("Squeeze", "Unsqueeze") and node.input:
            axes = self.axes_of(node)
            base = self.rank(node.input[0], depth - 1)
            if base is None or not isinstance(axes, list):
                return None
            return base - len(axes) if node.op_type == "Squeeze" else base + len(axes)
        return None

    def shape(self, name: str) -> Shape | None:
        if name in self.initializers:
            return tuple(self.initializers[name].dims)
        return self.shapes.get(name)

    def learn_shape(self, name: str, shape: Shape | None) -> None:
        """The shape of a tensor the rewrite creates (or of one whose layout it changed)."""
        if shape is None:
            self.shapes.pop(name, None)
        else:
            self.shapes[name] = shape

    def static_length(self, name: str) -> int | None:
        value = self.const_value(name)
        if value is not None:
            return int(value.size)
        shape = self.shape(name)
        if shape is not None and len(shape) == 1 and shape[0] is not None:
            return shape[0]
        return None

    def index_dtype(self, name: str) -> type:
        value = self.const_value(name)
        if value is not None:
            return value.dtype.type
        return np.int32 if self.types.get(name) == onnx.TensorProto.INT32 else np.int64

    def axes_of(self, node: onnx.NodeProto) -> list[int] | None | str:
        """Squeeze/Unsqueeze axes: attribute before opset 13, input from 13."""
        return squeeze_axes(node, self.opset, self.const_value)

    # ------------------------------------------------------------ the batch
    def same_batch(self, tensor: str, source: str) -> bool:
        """Whether ``tensor``'s first dimension is ``source``'s (a converter reads the batch off
        another tensor than the one it reshapes)."""
        if tensor == source:
            return True
        producer = self.index.producer.get(source)
        if is_transpose(producer) and producer.input[0] == tensor and (  # type: ignore[union-attr]
            (self.transpose_perm(producer) or (1,))[0] == 0  # type: ignore[arg-type]
        ):
            return True
        symbol = self.leading.get(source)
        if symbol is not None and self.leading.get(tensor) == symbol:
            return True
        return self._batch_root(tensor) == self._batch_root(source)

    def _batch_root(self, name: str) -> str:
        """The furthest tensor up a chain of ops that keep a dynamic first dimension as it is
        (shape inference names it afresh after a Reshape)."""
        for _ in range(4 * CHAIN_DEPTH):
            shape = self.shape(name)
            node = self.index.producer.get(name)
            if not shape or shape[0] is not None or node is None or not node.input or (
                node.domain not in STANDARD_DOMAINS
            ):
                return name
            upstream = self._keeps_batch_from(node, shape)
            if upstream is None:
                return name
            name = upstream
        return name

    def _keeps_batch_from(self, node: onnx.NodeProto, shape: Shape) -> str | None:
        """The input whose dynamic first dimension ``node`` passes on as it is, if any."""
        op = node.op_type
        if op in ELEMENTWISE_UNARY or op in KEEPS_FIRST_DIM or op == "Transpose" and (
            self.transpose_perm(node) or (1,)
        )[0] == 0:
            return node.input[0]
        if op in BROADCAST_BINARY:
            # Followed only when one operand alone can set the first dimension: every other
            # one has a lower rank or a static 1 there.
            ranks = [(i, self.shape(i)) for i in node.input if i]
            if all(dims is not None for _, dims in ranks):
                setting = [i for i, dims in ranks if len(dims) == len(shape)  # type: ignore
                           and dims[0] != 1]  # type: ignore[index]
                if len(setting) == 1 and self.shape(setting[0])[0] is None:  # type: ignore
                    return setting[0]
            return None
        if op == "Reshape" and len(node.input) > 1:
            entries = self.shape_entries(node.input[1])
            rest = [e for e in entries[1:] if isinstance(e, int)] if entries else []
            source_shape = self.shape(node.input[0])
            if entries and entries[0] in (0, -1) and len(rest) == len(entries) - 1 and (
                source_shape and None not in source_shape[1:] and source_shape[0] is None
                and int(np.prod(source_shape[1:])) == int(np.prod(rest))
            ):
                return node.input[0]
        return None

    # ------------------------------------------------------------ computed Reshape targets
    def reshape_target(self, node: onnx.NodeProto, shape: Shape) -> list[int | None] | str:
        """Reshape ``node``'s output shape for an input of ``shape`` (None: the input's dynamic
        batch, copied), or why it is not known."""
        if self.opset < 5:
            entries: list[Entry] | None = list(attr(node, "shape") or [])
        else:
            entries = self.shape_entries(node.input[1]) if len(node.input) > 1 else None
        if not entries:
            return "target shape not known"
        target = self._resolve_entries(entries, node.input[0], shape)
        if isinstance(target, str):
            return target
        if target.count(-1) > 1 or shape.count(None) > 1 or target.count(None) > 1:
            return "target shape not known"
        if -1 in target:
            total = int(np.prod([d for d in shape if d is not None]))
            known = int(np.prod([d for d in target if d is not None and d != -1]))
            if known == 0 or total % known:
                return "invalid target shape"
            # With a dynamic batch, -1 is the batch when the other entries take the rest.
            inferred = None if None in shape and None not in target and total == known else (
                total // known)
            target[target.index(-1)] = inferred
        if target.count(None) != shape.count(None):
            return "the dynamic dimension is merged or split"
        return target

    def _resolve_entries(self, entries: list[Entry], source: str,
                         shape: Shape) -> list[int | None] | str:
        target: list[int | None] = []
        for k, entry in enumerate(entries):
            if isinstance(entry, tuple):
                tensor, axis = entry
                dims = self.shape(tensor)
                if axis == 0 and shape[0] is None and self.same_batch(tensor, source):
                    target.append(None)
                    continue
                if dims is None or axis >= len(dims) or dims[axis] is None:
                    return "target shape computed from an unknown dimension"
                entry = int(dims[axis])  # type: ignore[arg-type]
            if entry == 0:
                if k >= len(shape):
                    return "target copies a dimension the input lacks"
                target.append(shape[k])
            elif entry == -1 or entry > 0:
                target.append(int(entry))
            else:
                return "invalid target shape"
        return target

    def shape_entries(self, name: str, depth: int = CHAIN_DEPTH) -> list[Entry] | None:
        """The value of a 1-D int64 tensor a converter computes from ``Shape`` (tf2onnx's and
        PyTorch's ``Reshape(x, Concat(Shape(x)[0:1], [-1]))``): each entry an int, or
        ``(tensor, axis)`` for a dimension of a tensor; None when it is not such a tensor."""
        value = self.const_value(name)
        if value is not None:
            if value.ndim > 1 or not np.issubdtype(value.dtype, np.integer):
                return None
            return [int(v) for v in value.reshape(-1)]
        node = self.index.producer.get(name)
        if node is None or depth <= 0 or node.domain not in STANDARD_DOMAINS or not node.input:
            return None
        op = node.op_type
        if op == "Shape":
            rank = self.rank(node.input[0])
            if rank is None:
                return None
            start, end = shape_bounds(node, rank)
            return [(node.input[0], axis) for axis in range(start, end)]
        if op in ("Identity", "Squeeze", "Unsqueeze") or op == "Cast" and attr(node, "to") in (
            onnx.TensorProto.INT32, onnx.TensorProto.INT64
        ):
            return self.shape_entries(node.input[0], depth - 1)
        if op == "Concat":
            parts = [self.shape_entries(i, depth - 1) for i in node.input]
            if any(part is None for part in parts):
                return None
            return [entry for part in parts for entry in part]  # type: ignore[union-attr]
        data = self.shape_entries(node.input[0], depth - 1)
        if data is None:
            return None
        if op == "Gather" and len(node.input) > 1 and attr(node, "axis", 0) == 0:
            return self._gathered(data, node.input[1])
        if op == "Slice" and self.opset >= 10:
            return self._sliced(data, node)
        return None

    def _gathered(self, data: list[Entry], indices_name: str) -> list[Entry] | None:
        indices = self.const_value(indices_name)
        if indices is None or indices.ndim > 1:
            return None
        picked = [int(i) + len(data) if int(i) < 0 else int(i) for i in indices.reshape(-1)]
        if any(i < 0 or i >= len(data) for i in picked):
            return None
        return [data[i] for i in picked]

    def _sliced(self, data: list[Entry], node: onnx.NodeProto) -> list[Entry] | None:
        bounds = [self.const_value(i) if i else None for i in node.input[1:5]]
        if bounds[0] is None or bounds[1] is None or bounds[0].size != 1 or bounds[1].size != 1:
            return None
        if len(bounds) > 2 and bounds[2] is not None and int(bounds[2].reshape(-1)[0]) not in (
            0, -1
        ):
            return None
        step = 1 if len(bounds) < 4 or bounds[3] is None else int(bounds[3].reshape(-1)[0])
        if step != 1:
            return None
        start, end = (int(np.clip(int(b.reshape(-1)[0]), -2**62, 2**62)) for b in bounds[:2])
        return data[slice(start, end)]
