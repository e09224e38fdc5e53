"""Inputs for checking a model: generated from its signature, or read from real data.

Generated inputs follow what the model does with each input rather than its dtype alone:

- floats are drawn from a seeded uniform distribution (``float_range``, default [-1, 1]);
- an integer input that indexes a ``Gather``/``GatherElements`` or an embedding (directly or
  through Cast, Unsqueeze, Reshape, Squeeze, Flatten, Identity, Expand, Transpose, Slice, Concat)
  stays inside the indexed table's rows, so a BERT ``input_ids`` is a real vocabulary id;
- mask-like inputs (the name contains "mask") are mostly 1 with some 0 (the first position of
  each row always 1), booleans are 0/1, other integers small and positive (1..4);
- strings come from a small vocabulary; a sequence of tensors gets two elements.

Dynamic dimensions (a ``dim_param`` or an unknown size) are checked at two sizes: the first set
of inputs uses one size ladder, the second another (:data:`BATCH_SIZES` for a leading batch axis,
:data:`OTHER_SIZES` for the rest). When the original model rejects a size (a UNet needs spatial
sizes divisible by 32, a convolution needs at least its kernel), the caller retries the set with
the next ``attempt`` — see :func:`graphfix.validate.parity.check_parity`. Dimensions with the same
``dim_param`` share a size; unnamed dynamic dimensions share one per axis position. A
``dim_param`` that is arithmetic on others (``past_sequence_length + 1``, as Hugging Face
Optimum names a decoder's attention mask) is computed from them. Where the first sizes do not
run, one named dimension is tried as the sum of two others before any larger size (a decoder's
cache: the attention mask spans the past and the new tokens, whatever its exporter named them),
and a larger size is not run where it would compute a tensor too large (:class:`TensorSizes`).

Real data: :func:`load_feeds` reads a ``.npz`` file (input names to arrays), a folder of ONNX
``input_N.pb`` tensors, or a folder of ``test_data_set_*`` folders (one set of inputs each), and
:func:`check_feeds` says exactly which arrays are missing, extra, mis-typed or mis-shaped.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import logging
import math
import time
import re
import zipfile
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Union

import numpy as np
import numpy.random  # noqa: F401 - imported here, never lazily by a parity thread
import onnx
from onnx import numpy_helper

from graphfix import graph as graph_layer
from graphfix.errors import ValidationInputError, first_line, shown
from graphfix.options import ConflictingOptionsError
from graphfix.graph import graphs
from graphfix.model_io import note_read, skeleton, tensor_value, typed_bytes
from graphfix.shapes import infer_shapes
from graphfix.pinned import SAME_SHAPE, baked_sizes, pinned_sizes

logger = logging.getLogger(__name__)

Feeds = dict[str, Any]  # input name -> numpy array (a list of arrays for a sequence, a dict for a map)

BATCH_SIZES: tuple[tuple[int, ...], tuple[int, ...]] = ((1, 2, 4), (2, 3, 1))
"""Size ladders of a leading (batch) dynamic axis, for the first and second set of inputs."""
OTHER_SIZES: tuple[tuple[int, ...], tuple[int, ...]] = (
    (8, 16, 32, 64, 128, 224, 512, 1024, 2048, 4096, 8192, 16384, 1),
    (37, 24, 48, 96, 160, 256, 640, 1280, 2560, 5120, 10240, 20480, 2),
)
"""Size ladders of any other dynamic axis (sequence length, height, width, ...): small sizes
first, then growing geometrically for models that need long inputs (an audio front end of
strided convolutions needs about 400 samples), and last 1 or 2. The second set starts past 32,
so that what a model does only for longer inputs is checked too (T5's relative positions go
into logarithmic buckets from 8 or 16 tokens apart, where a rewrite that rounds otherwise moves
one position into the next bucket); a model that refuses it goes on with 24."""
_STEPS = max(len(ladder) for ladder in BATCH_SIZES + OTHER_SIZES)
SUMS = 12
"""The most sums tried (:func:`dim_sums`): every way of four named dimensions."""
SUMMANDS = (3, 5)
"""The size of the second term of a sum, per set (the first is the ladder's first size)."""
ATTEMPTS = 2 * _STEPS + SUMS + 2
"""Attempts per input set (:func:`dynamic_sizes`): the ladders' first sizes; one named dimension
as the sum of two others at those sizes (:func:`dim_sums`); the first sizes with each named
dimension that one input alone has (not a batch) at 1, where that input shares a length with
another; every dynamic dimension but those
named as a batch at the first size of the ladder of lengths (two inputs may name one size
differently: a LoRA pair's A[16, r_a] and B[r_b, 16]); the ladders' further sizes, each
unnamed dimension sized on its own; then the ladders again with every unnamed dimension of the
set at one size (an LSTM's state must have the batch of its input, and nothing in the
signature says so)."""

DEFAULT_FLOAT_RANGE = (-1.0, 1.0)
MAX_INPUT_BYTES = 2**31
"""The largest input graphfix generates: a bigger one is refused before it is allocated."""
_INT_RANGE = (1, 5)
_WORDS = np.array(["graph", "Monday", "tensor", "a", "ONNX", "hello world"], dtype=object)

# Ops whose output carries the values of input 0 unchanged (up to layout or dtype): an index
# that flows through them is still an index.
_PASS_THROUGH = {
    "Cast", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Identity", "Expand", "Transpose",
    "Slice", "Concat", "CastLike", "Tile", "Gather", "GatherElements", "Split",
}
# (op, input position of the indices) -> input position of the table, axis attribute, default
# axis; the attribute _EVERY_AXIS: the indices address leading axes together (bounded by the
# smallest).
_EVERY_AXIS = "*"
_INDEXERS: dict[tuple[str, int], tuple[int, str | None, int]] = {
    ("Gather", 1): (0, "axis", 0),
    ("GatherElements", 1): (0, "axis", 0),
    ("ScatterElements", 1): (0, "axis", 0),
    ("ScatterND", 1): (0, _EVERY_AXIS, 0),
    ("GatherND", 1): (0, _EVERY_AXIS, 0),
    ("EmbedLayerNormalization", 0): (2, None, 0),  # com.microsoft: input_ids -> word_embedding
    ("EmbedLayerNormalization", 1): (4, None, 0),  # segment_ids -> segment_embedding
    ("EmbedLayerNormalization", 9): (3, None, 0),  # position_ids -> position_embedding
}


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """What the model declares about one input, and how graphfix will fill it."""

    name: str
    kind: str  # "tensor", "sequence" or "map" (one map: a DictVectorizer's features)
    dtype: np.dtype | None  # None for element types numpy cannot hold (bfloat16, float8)
    elem_type: int
    dims: tuple[int | str | None, ...] | None  # None: rank unknown
    index_rows: int | None = None  # an index into a table with this many rows
    # compared with these constants (an enum, a flag), or the categories a one-hot encoder
    # knows (strings too)
    choices: tuple[int | str, ...] | None = None
    # Sizes the model's weights fix for dynamic axes (graphfix.pinned): (axis, size).
    pinned: tuple[tuple[int, int], ...] = ()
    # An index into a table a dynamic dimension of the signature sizes (segment ids into a
    # table of graphs): the values stay below the size that dimension gets.
    index_of: str | None = None
    # A map's keys: the vocabulary of the DictVectorizer that reads it, else a few of the key
    # type; the values are of ``dtype``.
    map_keys: tuple[int | str, ...] = ()
    # Sizes the model's Reshapes hold as constants (graphfix.pinned.baked_sizes), the same for
    # every dynamic input: a size an exporter baked in, tried when no ladder size runs.
    baked: tuple[int, ...] = ()

    @property
    def dynamic(self) -> bool:
        return self.dims is None or any(not isinstance(d, int) for d in self.dims)


# What to do about an input graphfix cannot make values for, in every command that feeds one.
NO_VALUES_HINT = "give real inputs with --inputs; with optimize, --no-verify skips the check"


def input_specs(model: onnx.ModelProto, *, values: bool = True) -> list[InputSpec]:
    """The inputs a caller must feed (initializers listed as inputs are left out), in order.

    ``values=False`` reads the signature only (names, kinds, types, dimensions): what a check of
    given arrays needs, without the graph walks that bound the values graphfix generates (index
    rows, compared constants, pinned sizes)."""
    graph = model.graph
    initializers = {init.name for init in graph.initializer}
    rows = index_bounds(model) if values else {}
    choices = compared_constants(model) if values else {}
    pins = pinned_sizes(model) if values else {}
    baked = baked_sizes(model) if values else ()
    specs = []
    for value in graph.input:
        if value.name in initializers:
            continue
        # An optional input is fed present: a value of its element's type.
        declared = value.type.optional_type.elem_type if value.type.HasField(
            "optional_type") else value.type
        kind, tensor_type = "tensor", declared.tensor_type
        if declared.HasField("sequence_type"):
            kind, tensor_type = "sequence", declared.sequence_type.elem_type.tensor_type
        elif declared.HasField("map_type") and declared.map_type.value_type.HasField(
                "tensor_type") and declared is value.type:
            specs.append(_map_spec(model, value))
            continue
        elif not declared.HasField("tensor_type"):
            raise ValidationInputError(
                f"input {value.name!r} is of a type graphfix cannot generate "
                f"({value.type.WhichOneof('value')})",
                hint=NO_VALUES_HINT,
            )
        dims = graph_layer.dims(declared.sequence_type.elem_type if kind == "sequence"
                                else declared)
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
        except (KeyError, TypeError, ValueError):
            dtype = None
        if dtype is not None and dtype.kind == "V":  # bfloat16, float8 stored as raw bytes
            dtype = None
        bound = rows.get(value.name)
        specs.append(InputSpec(
            value.name, kind, dtype, tensor_type.elem_type, dims,
            bound if isinstance(bound, int) else None, choices.get(value.name),
            tuple(sorted(pins.get(value.name, {}).items())),
            bound if isinstance(bound, str) else None,
            baked=baked if dims is None or any(not isinstance(d, int) for d in dims) else ()))
    return _tie_export_symbols(specs)


_EXPORT_SYMBOL = re.compile(r"s\d+")


def _tie_export_symbols(specs: list[InputSpec]) -> list[InputSpec]:
    """torch.export's own size symbols (``s0``, ``s1``, ...; ``Dim.DYNAMIC``) give each input
    its own even where the sizes must agree: a decoder's cache tensors, one per layer, key and
    value, each with a length of its own name. Inputs of one structure (kind, element type,
    rank, the same fixed sizes, at least one of them above 1) take one name per axis where every
    one of them has such a symbol there, so that their sizes agree; named sizes are the user's
    and stay apart."""
    groups: dict[tuple[Any, ...], list[InputSpec]] = {}
    for spec in specs:
        if spec.kind == "map" or not spec.dims or not any(
                isinstance(d, int) and d > 1 for d in spec.dims):
            continue
        key = (spec.kind, spec.elem_type,
               tuple(d if isinstance(d, int) else None for d in spec.dims))
        groups.setdefault(key, []).append(spec)
    parent: dict[str, str] = {}  # symbols that must agree, as a union-find forest

    def root(name: str) -> str:
        while parent.get(name, name) != name:
            name = parent[name]
        return name

    for members in groups.values():
        if len(members) < 2:
            continue
        for axis in range(len(members[0].dims or ())):
            names = [m.dims[axis] for m in members]  # type: ignore[index]
            if all(isinstance(n, str) and _EXPORT_SYMBOL.fullmatch(n) for n in names):
                first = root(names[0])  # type: ignore[arg-type]
                for name in names[1:]:
                    other = root(name)  # type: ignore[arg-type]
                    if other != first:
                        parent[other] = first
    if not parent:
        return specs
    alias = {name: root(name) for name in parent}
    return [dataclasses.replace(
        spec, dims=tuple(alias.get(d, d) if isinstance(d, str) else d for d in spec.dims),
        index_of=alias.get(spec.index_of, spec.index_of) if spec.index_of else None)
        if spec.dims else spec for spec in specs]


_MAP_KEYS = 8  # keys of a map whose reader names none


def _map_spec(model: onnx.ModelProto, value: onnx.ValueInfoProto) -> InputSpec:
    """A map input: its keys from the vocabulary of the ``DictVectorizer`` that reads it (the
    only standard op that takes a map), else a few keys of its key type."""
    map_type = value.type.map_type
    elem_type = map_type.value_type.tensor_type.elem_type
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    text_keys = map_type.key_type == onnx.TensorProto.STRING
    keys: tuple[int | str, ...] = ()
    for node in model.graph.node:
        if node.op_type == "DictVectorizer" and value.name in node.input:
            for attr in node.attribute:
                if attr.name in ("string_vocabulary", "int64_vocabulary"):
                    vocabulary = onnx.helper.get_attribute_value(attr)
                    keys = tuple(k.decode() if isinstance(k, bytes) else int(k)
                                 for k in vocabulary)
            break
    if not keys:
        keys = tuple(_WORDS[:_MAP_KEYS]) if text_keys else tuple(range(_MAP_KEYS))
    return InputSpec(value.name, "map", dtype, elem_type, (), map_keys=keys)


Bound = Union[int, str]  # a row count, or a dynamic dimension of the signature, by name


def index_bounds(model: onnx.ModelProto) -> dict[str, Bound]:
    """Graph inputs used as indices into a table, with the table's row count (the smallest when
    an input indexes several), or the name of the signature's dynamic dimension that sizes the
    table (segment ids into a tensor of graphs that ``ConstantOfShape(Shape(graph_slots))``
    makes). Follows the input through value-preserving ops and into subgraphs that read it
    from the outer scope."""
    graph = model.graph
    shapes: dict[str, list[int | str | None]] = {}
    for g in graphs(graph):
        for init in g.initializer:
            shapes[init.name] = list(init.dims)
        for value in list(g.value_info) + list(g.input) + list(g.output):
            sizes = graph_layer.dims(value)
            if sizes:
                shapes.setdefault(value.name, list(sizes))
        for node in g.node:
            if node.op_type == "Constant" and node.output:
                for attr in node.attribute:
                    if attr.name == "value":
                        shapes[node.output[0]] = list(attr.t.dims)
    for name, sizes in _inferred_shapes(model).items():
        known = shapes.get(name)
        if known is None or sum(isinstance(d, int) for d in sizes) > sum(
                isinstance(d, int) for d in known):
            shapes[name] = sizes
    named = {d for value in graph.input for d in (graph_layer.dims(value) or ())
             if isinstance(d, str)}
    consumers = _readers(model)
    arithmetic = _IndexArithmetic(model)
    bounds: dict[str, Bound] = {}
    for value in graph.input:
        rows = _rows_indexed(value.name, consumers, shapes, named, seen={},
                             arithmetic=arithmetic)
        if rows is not None:
            bounds[value.name] = rows
    return bounds


def _inferred_shapes(model: onnx.ModelProto) -> dict[str, list[int | str | None]]:
    """Shapes of the main graph's tensors as ONNX's inference proves them from the inputs
    (with data propagation: ``ConstantOfShape(Shape(x))`` has ``x``'s dimensions)."""
    try:
        inferred = infer_shapes(skeleton(model), data_prop=True).graph
    except Exception as error:  # noqa: BLE001 - onnx raises several types
        logger.debug("shape inference failed (%s): index bounds from declarations", error)
        return {}
    return {value.name: list(sizes) for value in inferred.value_info
            if (sizes := graph_layer.dims(value))}


def _readers(model: onnx.ModelProto) -> dict[str, list[tuple[onnx.NodeProto, int]]]:
    """Tensor name -> (node, input position) of every node that reads it, in every graph."""
    readers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for g in graphs(model.graph):
        for node in g.node:
            for position, name in enumerate(node.input):
                if name:
                    readers.setdefault(name, []).append((node, position))
    return readers


_COMPARISONS = frozenset({"Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"})


def compared_constants(model: onnx.ModelProto) -> dict[str, tuple[int | str, ...]]:
    """Integer graph inputs that the model compares with constants (a sample rate checked by
    ``Equal`` against the rates it supports, a mode selecting a branch), with those constants:
    random values would take a branch no real input takes, or none; and integer or string
    inputs that a one-hot encoder reads, with its categories (scikit-learn's, which refuses a
    category it does not know: ``Unknown Category``)."""
    constants: dict[str, np.ndarray] = {}
    for g in graphs(model.graph):
        for init in g.initializer:
            if init.data_type not in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16) and (
                sum(1 for _ in init.dims) <= 1
            ):
                value = tensor_value(init)
                if value is not None and value.size <= 64 and value.dtype.kind in "iu":
                    constants[init.name] = value
        for node in g.node:
            if node.op_type == "Constant" and node.output:
                for attr in node.attribute:
                    if attr.name == "value" and attr.t.data_type != onnx.TensorProto.FLOAT:
                        value = numpy_helper.to_array(attr.t)
                        if value.size <= 64 and value.dtype.kind in "iu":
                            constants[node.output[0]] = value

    consumers = _readers(model)

    def compared(name: str, seen: set[str]) -> list[int | str]:
        if name in seen:
            return []
        seen.add(name)
        found: list[int | str] = []
        for node, position in consumers.get(name, ()):
            if node.op_type == "OneHotEncoder" and node.domain == "ai.onnx.ml":
                for attr in node.attribute:
                    if attr.name == "cats_int64s":
                        found += [int(v) for v in attr.ints]
                    elif attr.name == "cats_strings":
                        found += [v.decode("utf-8", "replace") for v in attr.strings]
            elif node.op_type in _COMPARISONS and len(node.input) == 2:
                other = constants.get(node.input[1 - position])
                if other is not None:
                    found += [int(v) for v in other.reshape(-1)]
            elif node.op_type in _PASS_THROUGH and position == 0 and node.op_type != "Concat":
                for output in node.output:
                    found += compared(output, seen)
        return found

    choices: dict[str, tuple[int | str, ...]] = {}
    for value in model.graph.input:
        if value.type.tensor_type.elem_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16,
                                                onnx.TensorProto.DOUBLE, onnx.TensorProto.BOOL):
            continue
        found = sorted(set(compared(value.name, set())), key=lambda v: (isinstance(v, str), v))
        if found:
            choices[value.name] = tuple(found)
    return choices


def _rows_indexed(
    name: str,
    consumers: Mapping[str, list[tuple[onnx.NodeProto, int]]],
    shapes: Mapping[str, list[int | str | None]],
    named: set[str],
    seen: dict[str, Bound | None],
    arithmetic: _IndexArithmetic | None = None,
) -> Bound | None:
    """The bound of the index ``name`` (see :func:`index_bounds`); ``seen``: the bounds of the
    tensors walked so far (None while a tensor's own walk is on: a loop), for the paths that
    meet again (a select's two branches)."""
    if name in seen:
        return seen[name]
    seen[name] = None
    found: list[int] = []
    referred: list[str] = []
    for node, position in consumers.get(name, ()):
        indexer = _INDEXERS.get((node.op_type, position))
        if indexer is not None:
            table_position, axis_name, axis = indexer
            for attr in node.attribute:
                if attr.name == axis_name:
                    axis = attr.i
            shape = shapes.get(node.input[table_position]) if table_position < len(
                node.input) else None
            if not shape:
                continue
            # ScatterND, GatherND: a tuple indexes leading axes, bounded by the smallest
            sizes = shape if axis_name == _EVERY_AXIS else (
                [shape[axis]] if -len(shape) <= axis < len(shape) else [])
            if sizes and all(isinstance(d, int) and d > 0 for d in sizes):
                found.append(min(sizes))  # type: ignore[type-var]
            elif len(sizes) == 1 and sizes[0] in named:
                referred.append(sizes[0])  # type: ignore[arg-type]
        elif node.op_type in _PASS_THROUGH and (position == 0 or node.op_type == "Concat"):
            for output in node.output:
                rows = _rows_indexed(output, consumers, shapes, named, seen, arithmetic)
                if isinstance(rows, int):
                    found.append(rows)
                elif rows is not None:
                    referred.append(rows)
        elif arithmetic is not None and (
                offset := arithmetic.offset(node, position)) is not None and node.output:
            rows = _rows_indexed(node.output[0], consumers, shapes, named, seen, arithmetic)
            if isinstance(rows, int):
                if rows - offset > 0:  # else a branch no index in range takes (a wrap)
                    found.append(rows - offset)
            elif rows is not None and not offset:
                referred.append(rows)
    seen[name] = min(found) if found else (referred[0] if referred else None)
    return seen[name]


_INTEGER_TYPES = frozenset({
    onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
    onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32,
    onnx.TensorProto.UINT64})
# Ops whose output is a condition (a bool tensor).
_CONDITIONS = frozenset({*_COMPARISONS, "Not", "And", "Or", "Xor", "IsNaN", "IsInf"})


class _IndexArithmetic:
    """Arithmetic through which an index keeps its meaning, for :func:`_rows_indexed`:

    - a select: ``Where(c, a, b)``'s ``a`` and ``b``, and a select written as arithmetic,
      ``m * a + n * b`` with ``m`` and ``n`` conditions cast to numbers (tf2onnx's ``SelectV2``
      on integers, which wraps a negative id into a Keras ``Embedding``'s table);
    - a constant offset, ``a + c``: the index is ``c`` past the table's row (positions offset
      into a table of positions), so its bound is ``c`` less.
    """

    def __init__(self, model: onnx.ModelProto) -> None:
        self._made: dict[str, onnx.NodeProto] = {}
        self._scalars: dict[str, int] = {}
        self._bools = {value.name for value in model.graph.input
                       if value.type.tensor_type.elem_type == onnx.TensorProto.BOOL}
        for g in graphs(model.graph):
            for init in g.initializer:
                self._scalar(init.name, init)
            for node in g.node:
                for output in node.output:
                    self._made[output] = node
                if node.op_type == "Constant" and node.output:
                    for attr in node.attribute:
                        if attr.name == "value":
                            self._scalar(node.output[0], attr.t)

    def _scalar(self, name: str, tensor: onnx.TensorProto) -> None:
        """Note ``tensor`` under ``name`` where it is one integer (its data read only then,
        wherever it is held)."""
        if tensor.data_type in _INTEGER_TYPES and not any(d != 1 for d in tensor.dims):
            value = tensor_value(tensor)
            if value is not None and value.size == 1:
                self._scalars[name] = int(value.reshape(-1)[0])

    def offset(self, node: onnx.NodeProto, position: int) -> int | None:
        """What ``node`` adds to the index it reads at ``position`` (0 for a select), or None
        where its output is not that index."""
        if node.op_type == "Where":
            return 0 if position in (1, 2) else None
        if len(node.input) != 2 or position not in (0, 1):
            return None
        other = node.input[1 - position]
        if node.op_type == "Mul":
            return 0 if self._condition(other) else None
        if node.op_type == "Add":
            if other in self._scalars:
                return self._scalars[other]
            return 0 if self._masked(other) else None
        return None

    def _condition(self, name: str) -> bool:
        """A condition cast to a number (0 or 1)."""
        node = self._made.get(name)
        if node is None or node.op_type != "Cast" or not node.input:
            return False
        source = self._made.get(node.input[0])
        return node.input[0] in self._bools or (source is not None and
                                                source.op_type in _CONDITIONS)

    def _masked(self, name: str) -> bool:
        """A value multiplied by a condition cast to a number: one term of a select."""
        node = self._made.get(name)
        return node is not None and node.op_type == "Mul" and len(node.input) == 2 and any(
            self._condition(n) for n in node.input)


MAX_TENSOR_BYTES = MAX_INPUT_BYTES
"""The largest tensor a size the ladders try may make the model compute: a larger size is not
run (an attention model's scores grow with the square of the length: a two-layer Llama's are
32 GiB at 4 x 16384 tokens)."""


# Ops whose first output has as many elements as their first input: those that keep its shape,
# and those that only rearrange it. A tensor inference cannot size after one of them is as
# large as the one before it.
_SAME_COUNT = SAME_SHAPE | {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
                            "DepthToSpace", "SpaceToDepth", "PRelu", "GroupNormalization"}


@dataclasses.dataclass(frozen=True)
class _Sized:
    """A tensor as :class:`TensorSizes` sizes it: ``guessed`` where its bytes count each
    unknown size as the inputs' largest."""

    name: str
    dims: list[int | None]
    size: int | None
    guessed: bool


class TensorSizes:
    """The largest tensor a model computes at given input shapes, as ONNX's shape inference (data
    propagation on) proves it, from a copy of the model without its weights taken now. Lifetime:
    one search for sizes the model runs at."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self._skeleton = skeleton(model)
        graph_layer.forget_declared_shapes(self._skeleton.graph)

    def total(self, shapes: Mapping[str, Sequence[int]], names: Iterable[str]) -> int | None:
        """The bytes of the tensors ``names`` at ``shapes`` together (sized as :meth:`largest`
        sizes them, a tensor it cannot type as nothing); None where inference cannot tell."""
        sized = self._sized(shapes)
        if sized is None:
            return None
        wanted = set(names)
        return sum(item.size or 0 for item in sized if item.name in wanted)

    def largest(self, shapes: Mapping[str, Sequence[int]]
                ) -> tuple[str, list[int | None], int] | None:
        """(name, shape, bytes) of the largest tensor at ``shapes`` (the inputs' shapes); None
        where inference cannot tell. A tensor with sizes inference leaves unknown (None in the
        shape) has the elements of the tensor it reshapes, transposes or maps element by
        element where that one's are known (a Reshape to sizes computed by a Div, which ONNX's
        data propagation does not follow); otherwise each unknown size counts as the largest
        size of ``shapes``: an exporter's attention scores that inference cannot size grow with
        the square of the length all the same."""
        found = self._largest(shapes)
        return None if found is None else (found.name, found.dims, found.size)

    def _largest(self, shapes: Mapping[str, Sequence[int]]) -> _Sized | None:
        return max((item for item in self._sized(shapes) or () if item.size is not None),
                   key=lambda item: item.size, default=None)

    def _sized(self, shapes: Mapping[str, Sequence[int]]) -> list[_Sized] | None:
        """Each tensor inference types at ``shapes``, sized as :meth:`largest` says; None
        where inference cannot tell."""
        inferred = self._inferred(shapes)
        if inferred is None:
            return None
        longest = max(_sizes(shapes))
        graph = inferred.graph
        typed = {value.name: value.type.tensor_type for value in (
            *graph.input, *graph.value_info, *graph.output)
            if value.type.HasField("tensor_type") and value.type.tensor_type.HasField("shape")}
        counts = {name: math.prod(d.dim_value for d in kind.shape.dim)
                  for name, kind in typed.items()
                  if all(d.HasField("dim_value") for d in kind.shape.dim)}
        for node in graph.node:  # in order: a chain of such ops carries the count along
            if (node.op_type in _SAME_COUNT and node.domain in graph_layer.STANDARD_DOMAINS
                    and node.input and node.input[0] in counts and node.output
                    and node.output[0]):
                counts.setdefault(node.output[0], counts[node.input[0]])
        inputs = {value.name for value in graph.input}
        found = []
        for name, kind in typed.items():
            if name in inputs:
                continue
            dims = [d.dim_value if d.HasField("dim_value") else None for d in kind.shape.dim]
            count = counts.get(name)
            guessed = count is None
            found.append(_Sized(name, dims, typed_bytes(
                kind.elem_type, [longest if d is None else d for d in dims] if guessed
                else [count]), guessed and None in dims))
        return found

    def _inferred(self, shapes: Mapping[str, Sequence[int]]) -> onnx.ModelProto | None:
        model = onnx.ModelProto()
        model.CopyFrom(self._skeleton)
        for value in model.graph.input:
            shape = shapes.get(value.name)
            if shape is None or not value.type.HasField("tensor_type"):
                continue
            value.type.tensor_type.ClearField("shape")
            for size in shape:
                value.type.tensor_type.shape.dim.add().dim_value = int(size)
        try:
            inferred = infer_shapes(model, data_prop=True)
            for _ in range(_IF_ROUNDS):  # an If decided can decide the next one's condition
                if not _decide_ifs(model, inferred):
                    break
                inferred = infer_shapes(model, data_prop=True)
            return inferred
        except Exception:  # noqa: BLE001 - onnx raises several types: no guard then
            return None

    def too_large(self, shapes: Mapping[str, Sequence[int]]) -> str | None:
        """Why the model is not run at ``shapes``: a tensor over :data:`MAX_TENSOR_BYTES`."""
        largest = self._largest(shapes)
        if largest is None or largest.size <= MAX_TENSOR_BYTES:
            return None
        name, dims, size = largest.name, largest.dims, largest.size
        shown = "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
        unknown = "" if not largest.guessed else \
            f", each unknown size taken as the inputs' largest, {max(_sizes(shapes))}"
        return (f"not run: {name!r} would be {size / 2**30:.3g} GiB at {shown}{unknown}, over "
                f"the {MAX_TENSOR_BYTES / 2**30:g} GiB graphfix lets a size it tries compute")


# How many rounds of deciding Ifs (and inferring again) a size estimate takes at most.
_IF_ROUNDS = 4
# The ops a condition computed from sizes is evaluated through (with the sizes inference
# gives each Shape's input): what exporters compute such a condition with.
_SIZE_OPS = frozenset({
    "Constant", "Gather", "Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Not",
    "And", "Or", "Xor", "Cast", "Squeeze", "Unsqueeze", "Slice", "Concat", "Add", "Sub", "Mul",
    "Div", "Mod", "ReduceProd", "ReduceSum", "ReduceMin", "ReduceMax", "Identity", "Reshape",
})


def _decide_ifs(model: onnx.ModelProto, inferred: onnx.ModelProto) -> int:
    """Each If of the main graph whose condition is computed from sizes alone (a Shape of a
    tensor ``inferred`` gives every size of, or a Size of it) takes the branch it takes at
    those sizes for both: ONNX's inference then gives its outputs the shapes of that branch,
    where two branches of different ranks leave them without any (pyannote's front end picks
    its Conv by the channel count: everything after it was unsized, then guessed at 4 GiB).
    Returns how many were decided."""
    graph = model.graph
    if not any(node.op_type == "If" for node in graph.node):
        return 0
    from onnx.reference import ReferenceEvaluator

    dims = {value.name: [d.dim_value if d.HasField("dim_value") else None
                         for d in value.type.tensor_type.shape.dim]
            for value in (*inferred.graph.input, *inferred.graph.value_info)
            if value.type.tensor_type.HasField("shape")}
    made = {name: node for node in graph.node for name in node.output if name}
    constants = {t.name: t for t in graph.initializer
                 if t.data_location != onnx.TensorProto.EXTERNAL}
    decided = 0
    for node in graph.node:
        if node.op_type != "If" or node.domain not in graph_layer.STANDARD_DOMAINS:
            continue
        then_branch = graph_layer.attribute(node, "then_branch")
        else_branch = graph_layer.attribute(node, "else_branch")
        if then_branch is None or else_branch is None or then_branch == else_branch:
            continue
        nodes = _size_computation(node.input[0], made, constants, dims)
        if nodes is None:
            continue
        used = {name for n in nodes for name in n.input}
        condition = onnx.helper.make_model(onnx.helper.make_graph(
            nodes, "condition", [], [onnx.helper.make_tensor_value_info(
                node.input[0], onnx.TensorProto.UNDEFINED, None)],
            [constants[name] for name in sorted(used & constants.keys())]),
            opset_imports=list(model.opset_import))
        try:
            value = np.asarray(ReferenceEvaluator(condition).run(None, {})[0])
        except Exception:  # noqa: BLE001 - the reference evaluator raises many types
            continue
        if value.size != 1:
            continue
        chosen = then_branch if bool(value.reshape(-1)[0]) else else_branch
        for attribute in node.attribute:
            if attribute.name in ("then_branch", "else_branch"):
                attribute.g.CopyFrom(chosen)
        decided += 1
    return decided


def _size_computation(name: str, made: Mapping[str, onnx.NodeProto],
                      constants: Mapping[str, onnx.TensorProto],
                      dims: Mapping[str, list[int | None]]) -> list[onnx.NodeProto] | None:
    """The nodes computing ``name`` from sizes alone, in order, each Shape or Size of a tensor
    of known sizes replaced by the Constant it computes; None where a value is read."""
    order: list[onnx.NodeProto] = []
    done: set[str] = set()

    def visit(tensor: str, depth: int) -> bool:
        if not tensor or tensor in done or tensor in constants:
            return True
        node = made.get(tensor)
        if node is None or node.domain not in graph_layer.STANDARD_DOMAINS or depth > 64:
            return False
        if node.op_type in ("Shape", "Size"):
            sizes = dims.get(node.input[0]) if node.input else None
            if sizes is None or None in sizes:
                return False
            if node.op_type == "Size":
                value = np.array(math.prod(sizes), np.int64)
            else:
                rank = len(sizes)
                start = graph_layer.attribute(node, "start", 0)
                end = graph_layer.attribute(node, "end", rank)
                value = np.array(sizes[slice(start, end)], np.int64)
            order.append(onnx.helper.make_node("Constant", [], [tensor],
                                               value=numpy_helper.from_array(value)))
        else:
            if node.op_type not in _SIZE_OPS or any(
                    a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                    for a in node.attribute):
                return False
            if not all(visit(i, depth + 1) for i in node.input):
                return False
            order.append(node)
        done.update(n for n in node.output if n)
        return True

    return order if visit(name, 0) else None


def _sizes(shapes: Mapping[str, Sequence[int]]) -> list[int]:
    return [int(d) for shape in shapes.values() for d in shape] or [1]


@dataclasses.dataclass
class SizeSearch:
    """What :func:`search_sizes` found for one input set: the first generated set the model
    ran on and what that run returned (None, None when none ran), each set it rejected or was
    not run on (described, with why), the last error, how the sweep (:func:`_sweep`)
    found the sizes where it did, and how many sizes were not run as too large."""

    feed: Feeds | None
    outputs: Any
    rejected: list[str]
    error: BaseException | None
    swept: str | None = None
    too_large: int = 0


def search_sizes(specs: Sequence[InputSpec], index: int, run: Callable[[Feeds], Any], *,
                 seed: int, input_shapes: Mapping[str, Sequence[int]] | None = None,
                 sizes: TensorSizes | None = None) -> SizeSearch:
    """Input set ``index`` (seed ``seed + index``) at the sizes of :func:`dynamic_sizes`,
    attempt after attempt, each size once, until ``run`` (the model on ONNX Runtime) takes one
    without raising: a size the model rejects fails fast, at its first node that cannot take
    it. Past the first attempt, a size ``sizes`` says is too large is not run. Parity and the
    passes that measure on parity's inputs search alike, so they get the same sets."""
    dynamic = any(s.dynamic for s in specs if s.name not in (input_shapes or {}))
    rejected: list[str] = []
    seen: set[str] = set()
    error: BaseException | None = None
    too_large = 0
    for attempt in range(attempts(specs, input_shapes) if dynamic else 1):
        try:
            feed = make_feed_set(specs, index, seed=seed + index, attempt=attempt,
                                 input_shapes=input_shapes)
        except ValidationInputError as err:  # past the memory budget: no larger size will do
            error = err
            continue
        except MemoryError as err:  # the system's budget (a ulimit, a container's) is smaller
            error = err
            rejected.append(f"attempt {attempt} (out of memory generating its inputs)")
            continue
        shapes = describe_shapes(feed)
        if shapes in seen:
            continue
        seen.add(shapes)
        why = sizes.too_large({n: np.shape(v) for n, v in feed.items()}) if (
            sizes is not None and attempt) else None
        if why is not None:  # the first sizes are small: later ones are checked first
            rejected.append(f"{shapes} ({why})")
            too_large += 1
            continue
        try:
            outputs = run(feed)
        except Exception as err:  # noqa: BLE001 - a size the model rejects: the next one
            error = err
            rejected.append(shapes)
            continue
        return SizeSearch(feed, outputs, rejected, error)
    if dynamic:
        swept = _sweep(specs, index, run, seed=seed, input_shapes=input_shapes, sizes=sizes)
        if swept is not None:
            feed, outputs, note = swept
            return SizeSearch(feed, outputs, rejected, error, swept=note, too_large=too_large)
        rejected.append(f"every size from 1 to {SWEEP_LARGEST} of each dynamic dimension "
                        "alone")
    return SizeSearch(None, None, rejected, error, too_large=too_large)


SWEEP_LARGEST = 512
"""The largest size :func:`_sweep` tries for one dimension."""
SWEEP_SECONDS = 5.0
"""The longest a sweep of one input set runs."""
SWEEP_OTHERS = 32
"""The size of the other dynamic dimensions in a sweep's second round."""


def _sweep(specs: Sequence[InputSpec], index: int, run: Callable[[Feeds], Any], *, seed: int,
           input_shapes: Mapping[str, Sequence[int]] | None, sizes: TensorSizes | None
           ) -> tuple[Feeds, Any, str] | None:
    """The size search's last resort, where no ladder size ran: one dynamic dimension at a
    time (a named one on every input that has it; the last axes first: features before
    lengths), every size from 1 up, the others at the ladders' first sizes, then (all but a
    batch by its name) at :data:`SWEEP_OTHERS`. A size that convolutions and pools must bring to exactly
    what a later node takes (madmom's beat tracker takes 81 spectrogram bins, its note model
    144) is found there, where the weights alone do not say it. Dimensions the weights fix
    (``pinned``), formulas of others, and names an input sized by ``input_shapes`` has are
    left as they are. Returns the set, its outputs and a note; None when no size ran within
    :data:`SWEEP_SECONDS`."""
    fixed = {name: [int(d) for d in dims] for name, dims in (input_shapes or {}).items()}
    try:
        first = make_feed_set(specs, index, seed=seed + index, input_shapes=input_shapes)
    except (ValidationInputError, MemoryError):
        return None
    shapes = {name: list(np.shape(value)) for name, value in first.items()
              if isinstance(value, np.ndarray)}
    held = {d for spec in specs if spec.name in fixed for d in spec.dims or ()
            if isinstance(d, str) and d}
    swept = [spec for spec in specs
             if spec.name not in fixed and spec.dims and spec.name in shapes]
    targets: list[tuple[str, int, str | None]] = []
    seen: set[object] = set()
    for spec in swept:
        pinned = {axis for axis, _ in spec.pinned}
        for axis in reversed(range(len(spec.dims or ()))):
            dim = (spec.dims or ())[axis]
            key: object = dim if isinstance(dim, str) and dim else (spec.name, axis)
            if isinstance(dim, int) or axis in pinned or dim in held or key in seen or (
                    isinstance(dim, str) and _formula(dim) is not None and not dim.isidentifier()):
                continue
            seen.add(key)
            targets.append((spec.name, axis, dim))
    # the others at the ladders' first sizes, then at SWEEP_OTHERS but a batch by its name
    # and what an input sized by input_shapes names (a first axis of frames the first sizes
    # give 1, which no 3-wide convolution takes)
    wide = {spec.name: [SWEEP_OTHERS if isinstance(d, str | None) and d not in held
                        and not (d and _BATCH_NAMES.match(d))
                        else shapes[spec.name][axis]
                        for axis, d in enumerate(spec.dims or ())]
            for spec in swept}
    bases = [("", shapes), (f", the others at {SWEEP_OTHERS}", {**shapes, **wide})]
    def at(base: Mapping[str, list[int]], name: str, axis: int, dim: str | None,
           size: int) -> dict[str, list[int]]:
        trial = {n: list(v) for n, v in base.items()}
        for spec in swept:  # a named dimension takes the size on every input that has it
            for other, named in enumerate(spec.dims or ()):
                if (spec.name, other) == (name, axis) or (
                        isinstance(dim, str) and dim and named == dim):
                    trial[spec.name][other] = size
        return trial

    deadline = time.perf_counter() + SWEEP_SECONDS
    for (name, axis, dim), (said, base) in itertools.product(targets, bases):
        last = SWEEP_LARGEST
        for size in range(1, SWEEP_LARGEST + 1):
            if time.perf_counter() > deadline:
                return None
            if size > last:
                break
            trial = at(base, name, axis, dim, size)
            # the memory guard (shape inference) once per doubling, for the sizes up to the
            # next: a tensor grows with the size
            if sizes is not None and size & (size - 1) == 0 and sizes.too_large(
                    {n: tuple(v) for n, v in at(base, name, axis, dim, 2 * size).items()}):
                last = size if not sizes.too_large({n: tuple(v) for n, v in trial.items()}) \
                    else 0
                if not last:
                    break
            try:
                feed = make_feed_set(specs, index, seed=seed + index,
                                     input_shapes={**trial, **fixed})
                outputs = run(feed)
            except Exception:  # noqa: BLE001 - a size the model rejects: the next one
                continue
            tried = f" at every size below {size}" if size > 1 else ""
            return feed, outputs, f"{name}'s axis {axis}{tried}{said} (it ran at {size})"
    return None


def nothing_to_compare(runs: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[str]:
    """Those of ``names`` (outputs) that show nothing of what the model computes in any of
    ``runs`` (one mapping of outputs by name per input set): outputs that hold no element (an
    empty tensor or sequence: a detector whose score threshold keeps nothing of generated
    inputs), and float outputs that hold only zeros (a classifier head initialized to zero,
    as torchvision's ViT's is: whatever the layers before it compute, it gives zeros) or only
    NaN (a logarithm of generated values below zero: a NaN equals a NaN, whatever computed
    it). A rewrite's error cannot show in them."""
    def nothing(value: Any) -> bool:
        if isinstance(value, (list, tuple)):
            return not value
        # the common output (a first element that is a number) is told at once, unscanned
        return isinstance(value, np.ndarray) and (value.size == 0 or value.dtype.kind == "f" and (
            not value.any() or bool(np.isnan(value.flat[0]) and np.isnan(value).all())))
    return [name for name in names
            if runs and all(name in run and nothing(run[name]) for run in runs)]


def has_dynamic_dims(model: onnx.ModelProto) -> bool:
    return any(spec.dynamic for spec in input_specs(model, values=False))


def make_feeds(
    model: onnx.ModelProto,
    *,
    seed: int = 0,
    runs: int | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    float_range: tuple[float, float] = DEFAULT_FLOAT_RANGE,
) -> list[Feeds]:
    """``runs`` sets of inputs for ``model`` (default: two when it has dynamic dimensions, one
    otherwise), set ``i`` drawn with seed ``seed + i`` at the ``i % 2``-th dynamic size.
    ``input_shapes`` fixes the shape of named inputs."""
    specs = input_specs(model)
    if runs is None:
        runs = 2 if any(s.dynamic for s in specs if s.name not in (input_shapes or {})) else 1
    return [
        make_feed_set(
            specs, index, seed=seed + index, input_shapes=input_shapes, float_range=float_range
        )
        for index in range(runs)
    ]


def make_feed_set(
    specs: Sequence[InputSpec],
    index: int,
    *,
    seed: int = 0,
    attempt: int = 0,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    float_range: tuple[float, float] = DEFAULT_FLOAT_RANGE,
) -> Feeds:
    """One set of inputs: dynamic sizes from ladder ``index % 2`` at step ``attempt``."""
    rng = np.random.default_rng(seed)
    shapes = {name: [int(d) for d in dims] for name, dims in (input_shapes or {}).items()}
    unknown = set(shapes) - {spec.name for spec in specs}
    if unknown:
        raise ValidationInputError(
            f"--input-shape names {', '.join(map(repr, sorted(unknown)))}, which the model does "
            "not take",
            hint=f"the model's inputs are {', '.join(repr(s.name) for s in specs) or 'none'}",
        )
    sizes = dynamic_sizes(specs, index, attempt, fixed=shapes)
    shaped = {spec.name: shapes.get(spec.name) or _shape(spec, sizes) for spec in specs}
    feeds: Feeds = {}
    for spec in specs:
        shape = shaped[spec.name]
        _check_budget(spec, shape)
        if spec.dtype is None:
            raise ValidationInputError(
                f"cannot generate values of type {_type_name(spec.elem_type)} "
                f"for input {spec.name!r}",
                hint=NO_VALUES_HINT,
            )
        rows = _size_of(spec.index_of, specs, shaped) if spec.index_of else None
        if rows is not None:  # segment ids below the size their table got
            spec = dataclasses.replace(spec, index_rows=rows)
        if spec.kind == "sequence":
            feeds[spec.name] = [_values(spec, shape, rng, float_range) for _ in range(2)]
        elif spec.kind == "map":  # ONNX Runtime takes a map as a dict of scalars
            values = _values(spec, [len(spec.map_keys)], rng, float_range)
            feeds[spec.name] = dict(zip(spec.map_keys, values.tolist()))
        else:
            feeds[spec.name] = _values(spec, shape, rng, float_range)
    return feeds


def _size_of(name: str, specs: Sequence[InputSpec],
             shaped: Mapping[str, Sequence[int]]) -> int | None:
    """The size a set of inputs gives the dynamic dimension ``name``."""
    for spec in specs:
        for axis, dim in enumerate(spec.dims or ()):
            if dim == name and spec.name in shaped:
                return int(shaped[spec.name][axis])
    return None


def _check_budget(spec: InputSpec, shape: Sequence[int]) -> None:
    """Refuse, before anything is allocated, an input larger than :data:`MAX_INPUT_BYTES`."""
    itemsize = spec.dtype.itemsize if spec.dtype is not None and spec.dtype.kind not in "OUS" else 8
    elements = math.prod(int(d) for d in shape)
    if elements * itemsize > MAX_INPUT_BYTES:
        raise ValidationInputError(
            f"input {spec.name!r} of shape {list(shape)} would take "
            f"{elements * itemsize / 2**30:.3g} GiB, over the {MAX_INPUT_BYTES / 2**30:g} GiB "
            "graphfix generates for one input",
            hint=("give smaller sizes with --input-shape, or real inputs with --inputs"
                  if spec.dims is None or not all(isinstance(d, int) for d in spec.dims) else
                  "the model fixes these sizes; give real inputs with --inputs") +
            "; with optimize, --no-verify skips the check",
        )


def dynamic_sizes(
    specs: Sequence[InputSpec],
    index: int,
    attempt: int,
    *,
    fixed: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, int]:
    """The size of each dynamic dimension key (``dim_param`` or ``?<axis>``) for one set, at
    ``attempt`` of :data:`ATTEMPTS`: the ladders' first sizes; then the sums of
    :func:`dim_sums` at those sizes (before any larger size: a decoder's cache at the ladders'
    large sizes takes tens of GiB); then the first sizes with each named dimension that one
    input alone has (not a batch) at 1, where that input shares a length with another (an
    attention bias's heads: an axis that broadcasts, 1 or a size nothing names); then every
    dimension but a named batch at the first size of the ladder of lengths (two inputs may
    name one size differently); then the ladders' further sizes; then all again with the
    unnamed dimensions tied (all take the one size of the step); past :data:`ATTEMPTS`, each
    size a Reshape's target holds (:func:`graphfix.pinned.baked_sizes`), then each size given
    in ``fixed``, for every dynamic dimension but the batch-like ones, then for all of them
    (:func:`attempts` counts them). A ``dim_param`` that is arithmetic on others is
    computed."""
    baked = _candidates(specs, fixed)
    extra = attempt - ATTEMPTS
    override = baked[extra // 2] if 0 <= extra < 2 * len(baked) else None
    summed = attempt - 1 if 1 <= attempt <= SUMS else None
    alone, together = attempt == SUMS + 1, attempt == SUMS + 2
    rest = attempt - SUMS - 2 if SUMS + 2 < attempt < ATTEMPTS else 0
    if together:
        override = OTHER_SIZES[index % 2][0]
    owners: dict[str, set[str]] = {}
    for spec in specs:
        for dim in spec.dims or ():
            if isinstance(dim, str) and dim:
                owners.setdefault(dim, set()).add(spec.name)
    # Inputs that share a length with another input (not a batch): an attention bias beside
    # its query. Their own dimensions are the ones that broadcast; an image's height and
    # width, its own too, are not tried at 1 (a detector on a 1 x 1 image measures nothing).
    beside = {name for dim, names in owners.items() if len(names) > 1
              and not _BATCH_NAMES.match(dim) for name in names}
    tied = together or rest >= _STEPS or (extra >= 0 and override is not None and extra % 2 == 1)
    step = rest % _STEPS
    sizes: dict[str, int] = {}
    for spec in specs:  # a name the caller sized on one input holds for every input
        given = (fixed or {}).get(spec.name)
        if given is not None and spec.dims is not None:
            for dim, size in zip(spec.dims, given):
                if isinstance(dim, str) and dim:
                    sizes.setdefault(dim, int(size))
    for spec in specs:  # sizes the weights fix come next: a named one holds for every input
        if spec.dims is not None and not (fixed and spec.name in fixed):
            for axis, size in spec.pinned:
                sizes.setdefault(_key(spec, axis, tied), size)
    formulas: dict[str, ast.expr] = {}
    for spec in specs:
        if spec.dims is None or (fixed and spec.name in fixed):
            continue
        for axis, dim in enumerate(spec.dims):
            if isinstance(dim, int):
                continue
            key = _key(spec, axis, tied)
            if key in sizes or key in formulas:
                continue
            formula = _formula(dim) if isinstance(dim, str) else None
            if formula is not None:
                formulas[key] = formula
                continue
            batch = _batch_like(dim, axis, len(spec.dims)) and not (tied and not dim)
            ladder = (BATCH_SIZES if batch else OTHER_SIZES)[index % 2]
            if alone and not batch and isinstance(dim, str) and spec.name in beside and len(
                    owners.get(dim, ())) == 1:
                sizes[key] = 1
            elif together and isinstance(dim, str) and _BATCH_NAMES.match(dim):
                sizes[key] = ladder[0]  # a batch by its name keeps its size
            else:
                sizes[key] = override if override is not None and (tied or not batch) else (
                    ladder[min(step, len(ladder) - 1)])
    if summed is not None:
        sums = dim_sums(specs, fixed=fixed)
        if summed < len(sums):
            total, first, second = sums[summed]
            sizes[second] = SUMMANDS[index % 2]
            sizes[total] = sizes[first] + sizes[second]
    for key, formula in formulas.items():
        for name in _names(formula):  # a term no input has on its own: a size of its own
            sizes.setdefault(name, override or OTHER_SIZES[index % 2][
                min(step, len(OTHER_SIZES[0]) - 1)])
        sizes[key] = max(_evaluate(formula, sizes), 0)
    return sizes


def attempts(specs: Sequence[InputSpec],
             fixed: Mapping[str, Sequence[int]] | None = None) -> int:
    """How many attempts :func:`dynamic_sizes` makes for one set: :data:`ATTEMPTS`, and two for
    each size baked into the model's Reshapes or given for an input (``fixed``)."""
    return ATTEMPTS + 2 * len(_candidates(specs, fixed))


def _candidates(specs: Sequence[InputSpec],
                fixed: Mapping[str, Sequence[int]] | None) -> tuple[int, ...]:
    """The sizes tried last for every dynamic dimension: those baked into the model's
    Reshapes, then those given for inputs (a size given for one input that another input's
    differently named dimension must match: a query's width and a memory's rows)."""
    baked = _baked(specs)
    given = [int(size) for dims in (fixed or {}).values() for size in dims if int(size) >= 2]
    return tuple(dict.fromkeys((*baked, *given)))


def with_baked(specs: Sequence[InputSpec], model: onnx.ModelProto) -> list[InputSpec]:
    """``specs`` with the sizes baked into ``model``'s Reshapes tried too, after their own: the
    sets of a search that another model (an original whose attention was fused since) must
    take as well."""
    extra = [size for size in baked_sizes(model) if size not in _baked(specs)]
    return [dataclasses.replace(spec, baked=(*spec.baked, *extra)) if spec.dynamic else spec
            for spec in specs]


def _baked(specs: Sequence[InputSpec]) -> tuple[int, ...]:
    return next((spec.baked for spec in specs if spec.baked), ())


def dim_sums(specs: Sequence[InputSpec], *,
             fixed: Mapping[str, Sequence[int]] | None = None) -> list[tuple[str, str, str]]:
    """The ways one named dynamic dimension can be the sum of two others, (sum, first,
    second), at most :data:`SUMS`: a decoder with a cache takes the past (``past_len``), the new
    tokens (``seq``) and an attention mask over both (``total``), and nothing in the signature
    says which is which. Batch-like and computed dimensions take no part."""
    names: list[str] = []
    for spec in specs:
        if spec.dims is None or (fixed and spec.name in fixed):
            continue
        pinned = {axis for axis, _ in spec.pinned}
        for axis, dim in enumerate(spec.dims):
            if (isinstance(dim, str) and dim and dim not in names and axis not in pinned
                    and not _batch_like(dim, axis, len(spec.dims)) and _formula(dim) is None):
                names.append(dim)
    sums = [(total, first, second) for total in names for first, second in
            itertools.combinations([n for n in names if n != total], 2)]
    return sums[:SUMS]


_OPERATORS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
              ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b if b else 0}


def _formula(dim: str) -> ast.expr | None:
    """``dim`` as arithmetic (+, -, *, //) on names and integers when it is such and not a
    single name: ``past_sequence_length + 1``; None otherwise. A minus sign between spaces only:
    ``seq-len`` is a name."""
    if not any(op in dim for op in "+-*/") or re.search(r"(?<! )-|-(?! )", dim):
        return None
    try:
        tree = ast.parse(dim.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp):
            if type(node.op) not in _OPERATORS:
                return None
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, int) or isinstance(node.value, bool):
                return None
        elif not isinstance(node, (ast.Name, ast.Load, *_OPERATORS)):
            return None
    return None if isinstance(tree, ast.Name) else tree


def _names(formula: ast.expr) -> list[str]:
    return [node.id for node in ast.walk(formula) if isinstance(node, ast.Name)]


def _evaluate(formula: ast.expr, sizes: Mapping[str, int]) -> int:
    if isinstance(formula, ast.Constant):
        return int(formula.value)
    if isinstance(formula, ast.Name):
        return int(sizes[formula.id])
    assert isinstance(formula, ast.BinOp)
    return int(_OPERATORS[type(formula.op)](_evaluate(formula.left, sizes),
                                            _evaluate(formula.right, sizes)))


def _key(spec: InputSpec, axis: int, tied: bool) -> str:
    """The key of one dynamic axis's size: its name, or an unnamed axis's position; an unnamed
    axis whose size the weights fix has one of its own (another input's axis at that position
    is not the same size)."""
    dim = spec.dims[axis] if spec.dims is not None and axis < len(spec.dims) else None
    if not dim and any(pinned == axis for pinned, _ in spec.pinned):
        return f"!{spec.name}:{axis}"
    return _dim_key(dim if isinstance(dim, str) else None, axis, tied)


def _dim_key(dim: str | None, axis: int, tied: bool = False) -> str:
    if dim:
        return dim
    return "?" if tied else f"?{axis}"


_BATCH_NAMES = re.compile(r"^(n|b|bs|batch|batch_size|batchsize|unk__\d+_0|N|B)$", re.IGNORECASE)


def _batch_like(dim: str | None, axis: int, rank: int) -> bool:
    if dim and _BATCH_NAMES.match(dim):
        return True
    return axis == 0 and rank >= 2 and not (dim and re.search(r"seq|len|token|time", dim, re.I))


def _shape(spec: InputSpec, sizes: Mapping[str, int]) -> list[int]:
    if spec.dims is None:  # rank unknown: a vector
        return [sizes.get("?0", sizes.get("?", 1))]
    tied = "?" in sizes
    return [d if isinstance(d, int) else sizes[_key(spec, axis, tied)]
            for axis, d in enumerate(spec.dims)]


def _values(
    spec: InputSpec, shape: Sequence[int], rng: np.random.Generator, float_range: tuple[float, float]
) -> np.ndarray:
    dtype = spec.dtype
    assert dtype is not None
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if "mask" in spec.name.lower():
        mask = (rng.random(shape) < 0.8).astype(dtype)
        if mask.ndim >= 1 and mask.size:
            mask[..., 0] = 1  # no row fully masked out
        return mask
    if dtype.kind in "iu":
        inside = [c for c in spec.choices or () if spec.index_rows is not None and
                  isinstance(c, int) and 0 <= c < spec.index_rows]
        if inside:
            # Ids into a table that the model also compares with constants (a padding id:
            # input_ids != pad): the table's ids, a quarter of them the constants, never a whole
            # row of them. Only the constants, and the embedding of every other id went
            # unchecked: a model with those rows doubled passed as the same.
            ids = rng.integers(0, spec.index_rows, shape)
            picked = rng.random(shape) < 0.25
            if picked.ndim >= 1 and picked.size:
                picked[..., 0] = False
            ids[picked] = rng.choice(np.array(inside), size=int(picked.sum()))
            return ids.astype(dtype)
        numbers = [c for c in spec.choices or () if isinstance(c, int)]
        if numbers:
            return rng.choice(np.array(numbers), size=shape).astype(dtype)
        if spec.index_rows is not None:
            return rng.integers(0, spec.index_rows, shape).astype(dtype)
        return rng.integers(*_INT_RANGE, shape).astype(dtype)
    if dtype.kind == "f":
        low, high = float_range
        return rng.uniform(low, high, shape).astype(dtype)
    if dtype.kind == "c":
        low, high = float_range
        return (rng.uniform(low, high, shape) + 1j * rng.uniform(low, high, shape)).astype(dtype)
    if dtype.kind in "OUS":
        words = [c for c in spec.choices or () if isinstance(c, str)]
        return rng.choice(np.array(words, dtype=object) if words else _WORDS,
                          size=shape).astype(object)
    raise ValidationInputError(
        f"cannot generate values of type {dtype} for input {spec.name!r}",
        hint=NO_VALUES_HINT,
    )


def _type_name(elem_type: int) -> str:
    try:
        return onnx.TensorProto.DataType.Name(elem_type)
    except ValueError:  # a type no onnx names
        return str(elem_type)


def describe_shapes(feeds: Feeds) -> str:
    """``name dtype[shape], ...`` for messages."""
    return ", ".join(f"{k} {v}" for k, v in describe(feeds).items()) or "no inputs"


def fed_shape(value: Any) -> list[int]:
    """The shape a report gives one input: an array's; a sequence's length, then its first
    item's shape; a map's number of keys."""
    if isinstance(value, list):
        return [len(value), *(fed_shape(value[0]) if value else [])]
    if isinstance(value, dict):
        return [len(value)]
    return [int(d) for d in np.shape(value)]


def describe(feeds: Feeds) -> dict[str, str]:
    """Input name -> ``dtype[shape]``, for reports."""
    out = {}
    for name, value in feeds.items():
        if isinstance(value, list):
            inner = describe({"": v for v in value[:1]}).get("", "?")
            out[name] = f"seq({len(value)} x {inner})"
        elif isinstance(value, dict):
            kinds = describe({"": np.asarray(list(value.values()))}).get("", "?")
            out[name] = f"map({len(value)} keys, {kinds.split('[')[0]})"
        else:
            array = np.asarray(value)
            out[name] = f"{array.dtype}{list(array.shape)}"
    return out


# --------------------------------------------------------------------------------------------
# Real data
#
# Real inputs are read as the files say, and every file says what it holds before its data:
# an .npy member of an .npz starts with a header (dtype and shape), a TensorProto carries its
# type and dims. Both are read first and held against the model's inputs and against the bytes
# the file really holds, so that a file that lies (a 4 TiB shape in a 1 KiB file, raw data
# shorter than its dims) is refused, with what is wrong, before anything is allocated.

PathLike = Union[str, Path]


def feed_files(path: PathLike) -> list[Path]:
    """The files :func:`load_feeds` reads for ``path``: the ``.npz`` itself, or the
    ``input_N.pb`` files of the folder (or of its ``test_data_set_*`` folders). Nothing is read;
    anything but a regular file is refused."""
    path = Path(path)
    if not path.exists():
        raise ValidationInputError(f"{shown(path)}: no such file or folder",
                                   hint="check the --inputs path")
    if path.is_file():
        if path.suffix != ".npz":
            raise ValidationInputError(
                f"{shown(path)}: inputs must be a .npz file or a folder of input_N.pb files",
                hint="numpy.savez('inputs.npz', input_name=array, ...) writes one",
            )
        return [path]
    if not path.is_dir():
        raise ValidationInputError(f"{shown(path)}: not a regular file or a folder",
                                   hint="give a .npz file or a folder of input_N.pb files")
    return [file for folder in _pb_folders(path) for file in _pb_files(folder)]


def _pb_folders(path: Path) -> list[Path]:
    try:
        subsets = sorted(p for p in path.iterdir() if p.is_dir() and p.name.startswith(
            "test_data"))
    except OSError as err:
        raise ValidationInputError(f"{shown(path)}: cannot list ({err.strerror or err})") from None
    return subsets or [path]


def _pb_files(folder: Path) -> list[Path]:
    """The ``input_N.pb`` files of ``folder`` in the order of N, each N once."""
    files = sorted(folder.glob("input_*.pb"), key=_pb_index)
    if not files:
        raise ValidationInputError(
            f"{shown(folder)}: no input_N.pb files",
            hint="give a .npz file or a folder of input_N.pb")
    indices = [_pb_index(f) for f in files]
    if len(set(indices)) != len(indices):
        repeated = next(i for i in indices if indices.count(i) > 1)
        raise ValidationInputError(
            f"{shown(folder)}: several files hold input {repeated} "
            f"({', '.join(f.name for f in files if _pb_index(f) == repeated)})",
            hint="keep one input_N.pb per input")
    for file in files:
        if not file.is_file():  # a FIFO would block the read
            raise ValidationInputError(f"{shown(file)}: not a regular file")
    return files


def load_feeds(path: PathLike, model: onnx.ModelProto | None = None) -> list[Feeds]:
    """Sets of real inputs from ``path``: a ``.npz`` file (one set, arrays by input name), a
    folder of ``input_N.pb`` TensorProtos (one set, matched to the model's inputs by the
    tensors' own names, else by N), or a folder of ``test_data_set_*`` folders (one set each).
    With ``model``, every array's declared type and shape is checked against its input
    (:func:`check_feeds`) before its data is read; every file is checked against the bytes it
    holds."""
    path = Path(path)
    feed_files(path)  # refuses what cannot be read before anything is
    specs = input_specs(model, values=False) if model is not None else None
    if path.is_file():
        sets = [_read_npz(path, specs)]
    else:
        folders = _pb_folders(path)
        sets = [_read_pb_folder(folder, specs,
                                shown(folder) if len(folders) > 1 else shown(path))
                for folder in folders]
    sets = [text_as_str(feeds, where=shown(path)) for feeds in sets]
    if specs is not None:
        for index, feeds in enumerate(sets):
            where = shown(path) + (f" (set {index})" if len(sets) > 1 else "")
            check_feeds(specs, feeds, where=where)
    return sets


def text_as_str(feeds: Feeds, *, where: str = "inputs") -> dict[str, Any]:
    """``feeds`` with text held as bytes (numpy's ``S`` arrays, object arrays of bytes) decoded
    as UTF-8 into strings: ONNX Runtime's Python binding reads a string tensor from ``str``
    items only (it fails on ``S`` arrays and feeds ``b'a'`` as the text "b'a'")."""
    out = dict(feeds)
    for name, value in feeds.items():
        array = value if isinstance(value, np.ndarray) else None
        if array is None or not (array.dtype.kind == "S" or (
                array.dtype == object and any(isinstance(v, bytes) for v in array.flat))):
            continue
        try:
            out[name] = np.array([v.decode("utf-8") if isinstance(v, bytes) else v
                                  for v in array.flat], dtype=object).reshape(array.shape)
        except UnicodeDecodeError as err:
            raise ValidationInputError(
                f"{where}: {name!r} holds bytes that are not UTF-8 text ({err.reason} at byte "
                f"{err.start}); ONNX Runtime takes string inputs as text") from None
    return out


@dataclasses.dataclass(frozen=True)
class _Declared:
    """What a file says of one array before its data: name, dtype and shape."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def _check_declared(declared: Sequence[_Declared], specs: Sequence[InputSpec] | None,
                    where: str, *, complete: bool = False) -> None:
    """Refuse, before any data is read, arrays over graphfix's budget and arrays whose declared
    dtype or shape the model's inputs rule out (:func:`check_feeds` on the declarations; with
    ``complete``, the declarations are the whole set: missing and extra names too)."""
    for item in declared:
        if item.nbytes > MAX_INPUT_BYTES:
            raise ValidationInputError(
                f"{where}: {item.name!r} declares shape {list(item.shape)} ({item.dtype}), "
                f"{item.nbytes / 2**30:.3g} GiB, over the {MAX_INPUT_BYTES / 2**30:g} GiB "
                "graphfix reads for one input",
                hint="give smaller inputs")
    if specs is None:
        return
    # Arrays of the declared dtype and shape that hold one element: nothing is allocated.
    shells = {item.name: np.lib.stride_tricks.as_strided(np.zeros(1, item.dtype),
                                                         item.shape, [0] * len(item.shape))
              for item in declared}
    _problems_or_raise(specs, shells, where, only_given=not complete)


def _read_npz(path: Path, specs: Sequence[InputSpec] | None) -> Feeds:
    """The arrays of an ``.npz``, each member's header checked (against the model and against
    the member's size) before its data is read."""
    where = shown(path)
    try:
        with zipfile.ZipFile(path) as archive:
            members = [info for info in archive.infolist() if not info.is_dir()]
            declared, headers = [], []
            for info in members:
                with archive.open(info) as member:
                    version = np.lib.format.read_magic(member)
                    if version == (1, 0):
                        shape, fortran, dtype = np.lib.format.read_array_header_1_0(member)
                    else:
                        shape, fortran, dtype = np.lib.format.read_array_header_2_0(member)
                    header_end = member.tell()
                name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                if dtype.hasobject:
                    raise ValidationInputError(
                        f"{where}: {name!r} is an array of Python objects, which graphfix does "
                        "not unpickle", hint="save plain numeric or string arrays")
                item = _Declared(name, dtype, tuple(int(d) for d in shape))
                declared.append(item)
                headers.append((info, header_end))
                if info.file_size - header_end < item.nbytes:
                    raise ValidationInputError(
                        f"{where}: {name!r} declares shape {list(item.shape)} ({dtype}, "
                        f"{item.nbytes} bytes) and holds {max(info.file_size - header_end, 0)}",
                        hint="the file is damaged or was not written by numpy")
            note_read(path, "the inputs file")
            _check_declared(declared, specs, where, complete=True)
            feeds: Feeds = {}
            for item, (info, _) in zip(declared, headers):
                with archive.open(info) as member:
                    feeds[item.name] = np.lib.format.read_array(member, allow_pickle=False)
            return feeds
    except ValidationInputError:
        raise
    # A damaged zip fails in zipfile (BadZipFile), zlib or at the end of a member (EOFError);
    # an encrypted member in zipfile too (RuntimeError: a password is required).
    except (OSError, ValueError, EOFError, KeyError, RuntimeError, zipfile.BadZipFile,
            zlib.error, NotImplementedError) as err:
        raise ValidationInputError(f"{where}: not a readable .npz file "
                                   f"({first_line(err, limit=200)})") from None


def _read_pb_folder(folder: Path, specs: Sequence[InputSpec] | None, where: str) -> Feeds:
    feeds: Feeds = {}
    names = [spec.name for spec in specs] if specs is not None else []
    for file in _pb_files(folder):
        index = _pb_index(file)
        name, value = _read_pb(file, specs)
        if name not in names and index < len(names):
            name = names[index]  # an unnamed (or misnamed) tensor goes by its position
        if not name and specs is None:
            raise ValidationInputError(
                f"{shown(file)}: the tensor has no name and no model was given to name it"
            )
        if not name:
            raise ValidationInputError(
                f"{shown(file)}: the tensor has no name, and its position names no input: "
                + (f"the model takes {len(names)} (input_0.pb to input_{len(names) - 1}.pb)"
                   if names else "the model takes none"),
                hint="number the files from input_0.pb in the order of the model's inputs, "
                     "or name each tensor")
        if name in feeds:
            raise ValidationInputError(f"{where}: two files hold input {name!r}",
                                       hint="keep one input_N.pb per input")
        feeds[name] = value
    return feeds


def _pb_index(path: Path) -> int:
    try:
        index = int(path.stem.split("_", 1)[1])
    except (IndexError, ValueError):
        raise ValidationInputError(f"{shown(path)}: expected a name like input_0.pb") from None
    if index < 0:
        raise ValidationInputError(f"{shown(path)}: expected a name like input_0.pb")
    return index


# The typed field of each TensorProto element type (raw_data aside).
_TYPED_FIELDS = {
    onnx.TensorProto.FLOAT: "float_data", onnx.TensorProto.COMPLEX64: "float_data",
    onnx.TensorProto.DOUBLE: "double_data", onnx.TensorProto.COMPLEX128: "double_data",
    onnx.TensorProto.INT64: "int64_data", onnx.TensorProto.UINT32: "uint64_data",
    onnx.TensorProto.UINT64: "uint64_data", onnx.TensorProto.STRING: "string_data",
}


def _tensor_problem(tensor: onnx.TensorProto) -> str | None:
    """What is wrong with an input tensor read from a file (its data against its dims), or
    None."""
    if any(d < 0 for d in tensor.dims):
        return f"its dims {list(tensor.dims)} hold a negative size"
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return "its data is in another file (external data); keep it inside the tensor"
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))
    except (KeyError, TypeError, ValueError):
        return f"its element type {tensor.data_type} is not one graphfix can read"
    count = math.prod(tensor.dims)
    type_name = _type_name(tensor.data_type).lower()
    if count * max(dtype.itemsize, 1) > MAX_INPUT_BYTES:
        return (f"its dims {list(tensor.dims)} ({type_name}) take "
                f"{count * dtype.itemsize / 2**30:.3g} GiB, over the "
                f"{MAX_INPUT_BYTES / 2**30:g} GiB graphfix reads for one input")
    if tensor.HasField("raw_data"):
        needed = _declared_bytes(tensor.data_type, count, dtype)
        if needed is not None and len(tensor.raw_data) != needed:
            return (f"its raw data holds {len(tensor.raw_data)} bytes; {type_name} "
                    f"{list(tensor.dims)} takes {needed}")
        return None
    field = _TYPED_FIELDS.get(tensor.data_type, "int32_data")
    held = len(getattr(tensor, field))
    wanted = count * (2 if tensor.data_type in (onnx.TensorProto.COMPLEX64,
                                                onnx.TensorProto.COMPLEX128) else 1)
    if held != wanted and not (held == 0 and count == 0):
        return f"it holds {held} values in {field}; {type_name} {list(tensor.dims)} takes {wanted}"
    return None


def _declared_bytes(data_type: int, count: int, dtype: np.dtype) -> int | None:
    """The raw bytes ``count`` elements take (sub-byte types packed), None for strings."""
    if data_type == onnx.TensorProto.STRING:
        return None
    bits = {getattr(onnx.TensorProto, n, -1): 4 for n in ("INT4", "UINT4", "FLOAT4E2M1")}
    if data_type in bits:
        return (count + 1) // 2
    return count * dtype.itemsize


def _read_pb(path: Path, specs: Sequence[InputSpec] | None = None) -> tuple[str, Any]:
    try:
        if not path.is_file():  # a FIFO would block the read
            raise ValidationInputError(f"{shown(path)}: not a regular file")
        if path.stat().st_size > MAX_INPUT_BYTES + 2**20:
            raise ValidationInputError(
                f"{shown(path)}: {path.stat().st_size} bytes, over the "
                f"{MAX_INPUT_BYTES / 2**30:g} GiB graphfix reads for one input")
        data = path.read_bytes()
    except OSError as err:
        raise ValidationInputError(f"{shown(path)}: cannot read ({err.strerror or err})") from None
    note_read(path, "an input tensor file")
    tensor = onnx.TensorProto()
    problem = None
    try:
        tensor.ParseFromString(data)
        if tensor.data_type:
            problem = _tensor_problem(tensor)
            if problem is None:
                dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))
                _check_declared([_Declared(tensor.name, dtype, tuple(tensor.dims))],
                                specs, shown(path))
                return tensor.name, numpy_helper.to_array(tensor)
    except ValidationInputError:
        raise
    except Exception as err:  # noqa: BLE001 - protobuf and numpy raise several types
        problem = problem or f"not an ONNX TensorProto ({first_line(err, limit=120)})"
    sequence = onnx.SequenceProto()
    try:
        sequence.ParseFromString(data)
        if sequence.elem_type == onnx.SequenceProto.TENSOR and sequence.tensor_values:
            for element in sequence.tensor_values:
                inner = _tensor_problem(element)
                if inner is not None:
                    raise ValueError(inner)
            return sequence.name, numpy_helper.to_list(sequence)
    except Exception:  # noqa: BLE001 - not a sequence either: the tensor's problem is the news
        pass
    raise ValidationInputError(
        f"{shown(path)}: " + (f"the tensor {tensor.name!r} is damaged: {problem}" if problem
                              else "not an ONNX TensorProto or SequenceProto"),
        hint="write it with onnx.numpy_helper.from_array(array, name).SerializeToString()")


def check_feeds(specs: Sequence[InputSpec], feeds: Mapping[str, Any], *, where: str = "inputs") -> None:
    """Raise ValidationInputError listing every missing, extra, mis-typed or mis-shaped array."""
    _problems_or_raise(specs, feeds, where, only_given=False)


def _problems_or_raise(specs: Sequence[InputSpec], feeds: Mapping[str, Any], where: str, *,
                       only_given: bool) -> None:
    """:func:`check_feeds`; ``only_given`` leaves out missing and extra names (the arrays'
    declarations are checked one file at a time)."""
    problems = []
    names = {spec.name for spec in specs}
    missing = [spec.name for spec in specs if spec.name not in feeds]
    if missing and not only_given:
        problems.append(f"missing {', '.join(map(repr, missing))}")
    extra = sorted(set(feeds) - names)
    if extra and not only_given:
        problems.append(f"not inputs of the model: {', '.join(map(repr, extra))}")
    for spec in specs:
        if spec.name in feeds and spec.kind == "map" and not isinstance(feeds[spec.name], dict):
            problems.append(f"{spec.name!r} takes a {_spec_text(spec)}, which a file of "
                            "arrays cannot hold: give no inputs file (graphfix then generates "
                            "every input, the map's keys from the model's DictVectorizer), "
                            "or pass feeds= a dict in Python")
            continue
        if spec.name not in feeds or spec.kind != "tensor":
            continue
        array = feeds[spec.name]
        if not isinstance(array, np.ndarray):
            try:
                array = np.asarray(array)
            except (TypeError, ValueError) as err:  # ragged lists
                problems.append(f"{spec.name!r} is not an array ({first_line(err, 80)})")
                continue
        if spec.dtype is not None and array.dtype != spec.dtype:
            if not (spec.dtype.kind in "OUS" and array.dtype.kind in "OUS"):
                problems.append(f"{spec.name!r} is {array.dtype}, the model takes {spec.dtype}")
                continue
        if spec.dims is not None:
            if array.ndim != len(spec.dims):
                problems.append(
                    f"{spec.name!r} has shape {list(array.shape)}, the model takes rank "
                    f"{len(spec.dims)} {_format_dims(spec.dims)}"
                )
            elif any(isinstance(d, int) and d != s for d, s in zip(spec.dims, array.shape)):
                problems.append(
                    f"{spec.name!r} has shape {list(array.shape)}, the model takes "
                    f"{_format_dims(spec.dims)}"
                )
    if problems:
        raise ValidationInputError(
            f"{where}: " + "; ".join(problems),
            hint="the model's inputs are " + ", ".join(
                f"{s.name} {_spec_text(s)}" for s in specs),
        )


def _spec_text(spec: InputSpec) -> str:
    """An input's type as a hint names it: ``float32[N, 3]``, ``seq(float32[N])``,
    ``map(str -> float32)``."""
    if spec.kind == "map":
        keys = type(spec.map_keys[0]).__name__ if spec.map_keys else "?"
        return f"map({keys} -> {spec.dtype})"
    tensor = f"{spec.dtype}{_format_dims(spec.dims)}"
    return f"seq({tensor})" if spec.kind == "sequence" else tensor


def check_inputs_agree(inputs: PathLike, shapes: Mapping[str, Sequence[int]] | None) -> None:
    """Refuse real inputs whose arrays contradict the shapes a run fixes (``--input-shape``):
    :class:`~graphfix.options.ConflictingOptionsError`, a usage error on the command line."""
    if not shapes:
        return
    for declared in feed_shapes(inputs):
        for name, sizes in shapes.items():
            found = declared.get(name)
            if found is not None and tuple(found) != tuple(sizes):
                raise ConflictingOptionsError(
                    f"--inputs gives {name!r} the shape {list(found)}, and --input-shape fixes "
                    f"it to {'x'.join(map(str, sizes))}",
                    hint="drop --input-shape, or give inputs of that shape")


def feed_shapes(path: PathLike) -> list[dict[str, tuple[int, ...]]]:
    """The shape each set of real inputs at ``path`` declares for each array, read from the
    files' headers (no array data is read)."""
    path = Path(path)
    feed_files(path)
    if path.is_file():
        try:
            with zipfile.ZipFile(path) as archive:
                shapes = {}
                for info in archive.infolist():
                    with archive.open(info) as member:
                        version = np.lib.format.read_magic(member)
                        reader = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                                  else np.lib.format.read_array_header_2_0)
                        name = info.filename[:-4] if info.filename.endswith(".npy") else (
                            info.filename)
                        shapes[name] = tuple(int(d) for d in reader(member)[0])
                return [shapes]
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as err:
            raise ValidationInputError(f"{shown(path)}: not a readable .npz file "
                                       f"({first_line(err, limit=200)})") from None
    sets = []
    for folder in _pb_folders(path):
        shapes = {}
        for file in _pb_files(folder):
            tensor = onnx.TensorProto()
            try:
                tensor.ParseFromString(file.read_bytes())
            except Exception:  # noqa: BLE001 - damaged: load_feeds says what is wrong
                continue
            shapes[tensor.name or f"#{_pb_index(file)}"] = tuple(int(d) for d in tensor.dims)
        sets.append(shapes)
    return sets


def _format_dims(dims: Sequence[int | str | None] | None) -> str:
    if dims is None:
        return "[?]"
    return "[" + ", ".join(str(d) if d is not None else "?" for d in dims) + "]"
