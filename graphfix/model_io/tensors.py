"""Tensors of a model: walking them, and weights that stay in their data files.

:func:`graphfix.model_io.load` with ``load_external_data=False`` leaves each external tensor
pointing at its checked data file (by absolute path); :func:`tensor_value` reads one tensor on
demand, :func:`weight_bytes` sizes them all without reading any.
"""

from __future__ import annotations

import hashlib
import math
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from graphfix.errors import ModelLoadError, shown
from graphfix.model_io.files import FileRecord

__all__ = [
    "iter_tensors",
    "compact_integers",
    "typed_bytes",
    "tensor_value",
    "tensor_digest",
    "tensor_bytes",
    "tensor_sample",
    "same_tensor",
    "has_value",
    "load_external_values",
    "weight_bytes",
    "data_files",
]

_LITTLE_ENDIAN = sys.byteorder == "little"

_DATA_FIELDS = frozenset({
    "raw_data", "float_data", "int32_data", "string_data", "int64_data", "double_data",
    "uint64_data",
})


def iter_tensors(graph: onnx.GraphProto | onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every tensor of ``graph`` and its subgraphs: initializers, the values and indices of
    sparse initializers, and tensor-valued attributes (sparse ones included). Given a model,
    the tensors of its local functions' bodies too: every place a tensor's data can live."""
    if isinstance(graph, onnx.ModelProto):
        yield from iter_tensors(graph.graph)
        for function in graph.functions:
            yield from _node_tensors(function.node)
        return
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    yield from _node_tensors(graph.node)


def _node_tensors(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.TensorProto]:
    for node in nodes:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                yield attr.t
            elif attr.type == onnx.AttributeProto.TENSORS:
                yield from attr.tensors
            elif attr.type == onnx.AttributeProto.SPARSE_TENSOR:
                yield attr.sparse_tensor.values
                yield attr.sparse_tensor.indices
            elif attr.type == onnx.AttributeProto.SPARSE_TENSORS:
                for sparse in attr.sparse_tensors:
                    yield sparse.values
                    yield sparse.indices
            elif attr.type == onnx.AttributeProto.GRAPH:
                yield from iter_tensors(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for subgraph in attr.graphs:
                    yield from iter_tensors(subgraph)


# Integer types whose values ONNX may store as varints (TensorProto's typed fields), and the
# field: small values take a byte or two there where raw_data takes the type's whole width.
_VARINT_FIELDS = {
    onnx.TensorProto.INT64: "int64_data", onnx.TensorProto.INT32: "int32_data",
    onnx.TensorProto.INT16: "int32_data", onnx.TensorProto.UINT16: "int32_data",
    onnx.TensorProto.UINT32: "uint64_data", onnx.TensorProto.UINT64: "uint64_data",
}
# Tensors larger than this stay as they are: parsing varints costs more than reading raw bytes.
_COMPACT_LIMIT = 1 << 20


def compact_integers(model: onnx.ModelProto) -> int:
    """Store each integer tensor held in ``raw_data`` as varints where that takes fewer bytes
    (indices, sizes, class ids: a 300-value int64 index of small numbers takes 2400 bytes raw
    and about 300 as varints, which is how the exporter wrote it before a rewriter copied it
    raw). The values are unchanged; returns the bytes saved."""
    saved = 0
    for tensor in iter_tensors(model):
        field = _VARINT_FIELDS.get(tensor.data_type)
        raw = len(tensor.raw_data) if tensor.HasField("raw_data") else 0
        if (field is None or not raw or raw > _COMPACT_LIMIT
                or tensor.data_location == onnx.TensorProto.EXTERNAL):
            continue
        values = numpy_helper.to_array(tensor).reshape(-1)
        # varint bytes: two's complement for signed values in int64_data and int32_data
        bits = values.astype(np.int64).view(np.uint64) if field != "uint64_data" else \
            values.astype(np.uint64)
        varints = int(values.size + sum(int(np.count_nonzero(bits >= (1 << (7 * k))))
                                        for k in range(1, 10)))
        if varints + 4 >= raw:
            continue
        tensor.ClearField("raw_data")
        getattr(tensor, field).extend(
            values.astype(np.uint64 if field == "uint64_data" else np.int64).tolist())
        saved += raw - varints
    return saved


def external_tensors(model: onnx.ModelProto) -> list[onnx.TensorProto]:
    return [t for t in iter_tensors(model) if t.data_location == onnx.TensorProto.EXTERNAL]


# Data files that load() checked (inside their model's folder, long enough), with their state
# when checked. A tensor whose location is one of these absolute paths is read on demand; any
# other external tensor (from a ModelProto made elsewhere) is treated as not loaded, so a crafted
# model cannot make graphfix read an arbitrary file.
_VETTED: dict[str, FileRecord] = {}


def vet(path: Path, record: FileRecord) -> None:
    """Let tensors that refer to ``path`` by its absolute path be read from it on demand."""
    _VETTED[str(path)] = record


def vetted_record(path: Path) -> FileRecord | None:
    """The state of the data file at ``path`` when :func:`load` last checked it."""
    return _VETTED.get(str(path))


def lazy_source(tensor: onnx.TensorProto) -> tuple[Path, int, int] | None:
    """(file, offset, length) of a tensor whose weights stay in a file :func:`load` checked."""
    if tensor.data_location != onnx.TensorProto.EXTERNAL:
        return None
    location, offset, length = "", 0, -1
    for entry in tensor.external_data:
        if entry.key == "location":
            location = entry.value
        elif entry.key == "offset":
            offset = int(entry.value)
        elif entry.key == "length":
            length = int(entry.value)
    if location not in _VETTED or length < 0:
        return None
    return Path(location), offset, length


def lazy_tensors(model: onnx.ModelProto) -> list[tuple[onnx.TensorProto, Path, int, int]]:
    found = []
    for tensor in iter_tensors(model):
        source = lazy_source(tensor)
        if source is not None:
            found.append((tensor, *source))
    return found


def data_files(model: onnx.ModelProto) -> list[Path]:
    """The data files the weights of ``model`` are read from (those :func:`load` checked)."""
    return sorted({path for _, path, _, _ in lazy_tensors(model)})


def _read_into(path: Path, offset: int, buffer: memoryview) -> None:
    """Fill ``buffer`` with the bytes of ``path`` from ``offset``."""
    try:
        with open(path, "rb", buffering=0) as f:
            f.seek(offset)
            done = 0
            while done < len(buffer):
                count = f.readinto(buffer[done:])
                if not count:
                    raise ModelLoadError(
                        f"{shown(path)}: external data ends before the {len(buffer)} bytes "
                        f"at offset {offset}",
                        hint="the data file changed after the model was loaded",
                    )
                done += count
    except OSError as err:
        raise ModelLoadError(f"{shown(path)}: cannot read external data "
                             f"({err.strerror or err})") from None


def _read_range(path: Path, offset: int, length: int) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(length)
    except OSError as err:
        raise ModelLoadError(f"{shown(path)}: cannot read external data "
                             f"({err.strerror or err})") from None
    if len(data) != length:
        raise ModelLoadError(
            f"{shown(path)}: external data ends before the {length} bytes at offset {offset}",
            hint="the data file changed after the model was loaded",
        )
    return data


def _plain_dtype(data_type: int) -> np.dtype | None:
    """The little-endian numpy type of an ONNX type whose raw data is a plain numpy buffer."""
    if data_type in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED):
        return None
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(data_type))
    except (KeyError, TypeError, ValueError):
        return None
    if dtype.kind not in "biuf" or dtype.itemsize not in (1, 2, 4, 8):
        return None  # bfloat16, float8, int4 and friends are unpacked by numpy_helper
    if dtype.kind == "f" and data_type not in (
        onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE
    ):
        return None
    return dtype.newbyteorder("<")


def tensor_value(tensor: onnx.TensorProto) -> np.ndarray | None:
    """The value of ``tensor`` as a numpy array; a tensor whose weights stay in a data file that
    :func:`load` checked is read from it (that tensor alone). None for an external tensor that
    was never loaded (its location is not one graphfix checked)."""
    if tensor.data_location != onnx.TensorProto.EXTERNAL:
        return numpy_helper.to_array(tensor)
    source = lazy_source(tensor)
    if source is None:
        return None
    path, offset, length = source
    dims = tuple(int(d) for d in tensor.dims)
    dtype = _plain_dtype(tensor.data_type)
    if dtype is not None and length == math.prod(dims) * dtype.itemsize:
        value = np.empty(dims, dtype)
        _read_into(path, offset, memoryview(value.reshape(-1).view(np.uint8)))
        return value.astype(dtype.newbyteorder("="), copy=False)
    if tensor.data_type == onnx.TensorProto.STRING:
        return None  # onnx keeps strings inline; nothing to read
    inline = onnx.TensorProto(name=tensor.name, data_type=tensor.data_type, dims=dims)
    inline.raw_data = _read_range(path, offset, length)
    return numpy_helper.to_array(inline)


def tensor_digest(tensor: onnx.TensorProto) -> bytes:
    """A digest of ``tensor``'s type, shape and data, not of its name. Raw bytes held in memory
    are hashed as they are (no array is built); two tensors with the same digest hold the same
    value. An external tensor that was never loaded is digested by where it lives."""
    digest = hashlib.sha256(f"{tensor.data_type}:{list(tensor.dims)}:".encode())
    if tensor.data_location != onnx.TensorProto.EXTERNAL and tensor.HasField("raw_data"):
        digest.update(b"raw:" + tensor.raw_data)
        return digest.digest()
    if tensor.data_type == onnx.TensorProto.STRING:  # bytes as the model holds them
        digest.update(b"strings:")
        for item in tensor.string_data:
            digest.update(len(item).to_bytes(8, "little") + item)
        return digest.digest()
    value = tensor_value(tensor)
    if value is None:
        digest.update(b"at:" + str(sorted((e.key, e.value) for e in tensor.external_data)).encode())
    else:
        digest.update(b"raw:" + np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<"),
                                                                  copy=False).tobytes())
    return digest.digest()


def tensor_sample(tensor: onnx.TensorProto, stretches: int = 16, width: int = 64) -> bytes | None:
    """``stretches`` runs of ``width`` bytes spread evenly over ``tensor``'s data, first and last
    included, from memory or from the checked file its weights stay in (only those bytes are
    read there): tensors whose samples differ hold different values. None for values held in
    typed fields or never loaded."""
    source = lazy_source(tensor)
    if source is None:
        if tensor.data_location == onnx.TensorProto.EXTERNAL or not tensor.HasField("raw_data"):
            return None
        raw = tensor.raw_data
        return b"".join(raw[start:start + width]
                        for start in _sample_starts(len(raw), stretches, width))
    path, offset, length = source
    parts = []
    try:
        with open(path, "rb", buffering=0) as f:
            for start in _sample_starts(length, stretches, width):
                f.seek(offset + start)
                parts.append(f.read(min(width, length - start)))
    except OSError as err:
        raise ModelLoadError(f"{shown(path)}: cannot read external data "
                             f"({err.strerror or err})") from None
    return b"".join(parts)


def _sample_starts(length: int, stretches: int, width: int) -> list[int]:
    if length <= width * stretches:
        return [0] if length <= width else list(range(0, length, width))
    last = length - width
    return [last * i // (stretches - 1) for i in range(stretches)]


def same_tensor(a: onnx.TensorProto, b: onnx.TensorProto) -> bool:
    """Whether two tensors hold the same type, shape and bytes (names aside). Raw bytes held in
    memory are compared as they are; a tensor whose weights stay in a file is read, unless both
    refer to the same range of one file."""
    if a.data_type != b.data_type or list(a.dims) != list(b.dims):
        return False
    inline = onnx.TensorProto.EXTERNAL not in (a.data_location, b.data_location)
    if inline and a.HasField("raw_data") and b.HasField("raw_data"):
        return a.raw_data == b.raw_data
    source_a, source_b = lazy_source(a), lazy_source(b)
    if source_a is not None and source_a == source_b:
        return True
    # Raw bytes in memory against a file's: compared directly, nothing hashed.
    for held, source in ((a, source_b), (b, source_a)):
        if source is not None and held.data_location != onnx.TensorProto.EXTERNAL and (
                held.HasField("raw_data")):
            return held.raw_data == _read_range(*source)
    return tensor_digest(a) == tensor_digest(b)


def has_value(tensor: onnx.TensorProto) -> bool:
    """Whether :func:`tensor_value` can give ``tensor``'s value (inline, or in a checked file)."""
    return tensor.data_location != onnx.TensorProto.EXTERNAL or lazy_source(tensor) is not None


def load_external_values(model: onnx.ModelProto) -> int:
    """Read every tensor whose weights stay in a checked data file into ``model`` (in place);
    returns how many were read. For code that needs every weight in memory (onnxsim, say)."""
    lazy = lazy_tensors(model)
    for tensor, path, offset, length in lazy:
        data = _read_range(path, offset, length)
        del tensor.external_data[:]
        tensor.ClearField("data_location")
        tensor.raw_data = data
        del data
    return len(lazy)


_BITS = {
    onnx.TensorProto.FLOAT: 32, onnx.TensorProto.UINT8: 8, onnx.TensorProto.INT8: 8,
    onnx.TensorProto.UINT16: 16, onnx.TensorProto.INT16: 16, onnx.TensorProto.INT32: 32,
    onnx.TensorProto.INT64: 64, onnx.TensorProto.BOOL: 8, onnx.TensorProto.FLOAT16: 16,
    onnx.TensorProto.DOUBLE: 64, onnx.TensorProto.UINT32: 32, onnx.TensorProto.UINT64: 64,
    onnx.TensorProto.COMPLEX64: 64, onnx.TensorProto.COMPLEX128: 128,
    onnx.TensorProto.BFLOAT16: 16,
    **{getattr(onnx.TensorProto, name): bits for name, bits in (
        ("FLOAT8E4M3FN", 8), ("FLOAT8E4M3FNUZ", 8), ("FLOAT8E5M2", 8), ("FLOAT8E5M2FNUZ", 8),
        ("UINT4", 4), ("INT4", 4), ("FLOAT4E2M1", 4), ("FLOAT8E8M0", 8), ("UINT2", 2), ("INT2", 2),
    ) if hasattr(onnx.TensorProto, name)},
}


def typed_bytes(data_type: int, dims: Sequence[int]) -> int | None:
    """The bytes a tensor of element type ``data_type`` and shape ``dims`` takes (sub-byte
    types packed, as ONNX Runtime counts them); None for strings and types this onnx does not
    size."""
    bits = _BITS.get(data_type)
    if bits is None:
        return None
    return (math.prod(dims) * bits + 7) // 8


def _declared_nbytes(tensor: onnx.TensorProto) -> int | None:
    """The bytes ``tensor``'s type and shape take (:func:`typed_bytes`)."""
    return typed_bytes(tensor.data_type, tensor.dims)


def _nbytes(tensor: onnx.TensorProto) -> int:
    """The bytes of ``tensor``'s data, from its shape and type. Neither ``len(raw_data)`` nor
    ``ByteSize()`` is used: with protobuf's upb backend both copy the data (ByteSize serializes
    the message to measure it)."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        source = lazy_source(tensor)
        if source is not None:
            return source[2]
    size = _declared_nbytes(tensor)
    if size is None:  # strings, or a type this onnx does not name: small in practice
        return tensor.ByteSize()
    return size


def tensor_bytes(tensor: onnx.TensorProto) -> int:
    """The bytes of ``tensor``'s data, from its type and shape: nothing is copied or read."""
    return _nbytes(tensor)


def weight_bytes(model: onnx.ModelProto) -> int:
    """The bytes of ``model``'s tensors, held in memory or left in their files, from their shapes
    and types: cheap at any size (nothing is serialized, copied or read)."""
    return sum(_nbytes(t) for t in iter_tensors(model))


# Past this many bytes of weights, a model is measured on its skeleton (the weights' bytes
# counted, not serialized): serializing it to measure would copy every weight.
MEASURED_SIZE_LIMIT = 64 * 1024 * 1024


def inline_bytes(model: onnx.ModelProto) -> int:
    """The bytes of the tensors ``model`` holds in memory."""
    return sum(
        _nbytes(t) for t in iter_tensors(model)
        if t.data_location != onnx.TensorProto.EXTERNAL
    )


def _point_at(tensor: onnx.TensorProto, location: str, offset: int, length: int) -> None:
    """Make ``tensor`` refer to ``length`` bytes at ``offset`` of the external file ``location``."""
    del tensor.external_data[:]
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    tensor.data_location = onnx.TensorProto.EXTERNAL
