"""Model I/O: the only module of graphfix that touches files.

- :func:`load` reads a model from a path, bytes or a ModelProto, with its external data resolved
  inside the model's folder (a location that escapes it is refused). With
  ``load_external_data=False`` the weights stay in their data files: each external tensor keeps a
  reference to the checked file (its absolute path), and :func:`tensor_value` reads one tensor on
  demand;
- :func:`save` writes atomically (a temporary file in the target folder, then a rename; nothing
  partial is left behind), with external data beside the model when it is over 2 GB or when asked,
  and ``ir_version`` capped to what the installed ONNX Runtime reads. Tensors still in their
  source files are copied file to file, in chunks; the model in memory is never changed;
- :func:`ort_session` opens an ONNX Runtime session on an in-memory model of any size, weights in
  their source files included, without reading them into Python.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import hashlib
import logging
import math
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Union

import google.protobuf.descriptor
import google.protobuf.message
import numpy as np
import onnx
from onnx import external_data_helper, numpy_helper

from graphfix.errors import ModelLoadError, ModelSaveError

if TYPE_CHECKING:
    import onnxruntime

__all__ = [
    "ModelSource",
    "LoadedModel",
    "WrittenModel",
    "load",
    "load_with_info",
    "save",
    "check_model",
    "max_ir_version",
    "ort_session",
    "iter_tensors",
    "tensor_value",
    "has_value",
    "tensor_digest",
    "load_external_values",
    "weight_bytes",
    "PROTOBUF_LIMIT",
    "write_text",
    "temporary_folder",
    "write_scratch",
    "same_tensor",
    "skeleton",
]

logger = logging.getLogger(__name__)

ModelSource = Union[str, os.PathLike, bytes, onnx.ModelProto]

# Protobuf cannot serialize a message of 2 GiB or more; keep a margin for the graph itself.
PROTOBUF_LIMIT = 2**31 - 1
_EXTERNAL_MARGIN = 64 * 2**20
# Tensors at least this large go to the external data file (onnx's own default threshold).
_EXTERNAL_THRESHOLD = 1024
_ALIGNMENT = 4096
# Weights copied file to file (or read) this much at a time when the kernel cannot copy them.
_CHUNK_BYTES = 16 * 2**20
# ONNX Runtime (1.17 and later) resolves the external data of a model given as bytes in this
# folder, so a session on a model whose weights stay in their files needs no copy of them.
_ORT_EXTERNAL_FOLDER = "session.model_external_initializers_file_folder_path"
# A model holding more than this in memory reaches ONNX Runtime through a temporary file with
# external data rather than as bytes: from bytes, ORT parses its own copy of the message and
# then copies the weights out of it (a 1 GB model peaked at 4.2x its weights, through a file
# at 1.2x before the first run and 2.2x after, the weights then mapped from the file).
_SESSION_BYTES_LIMIT = 256 * 2**20
# Above this many bytes of weights in memory, check_model checks a weightless copy on disk.
_CHECK_INLINE_BYTES = 8 * 2**20

# The location recorded for weights lent to ORT from memory (never a file ORT reads).
_LENT_LOCATION = "graphfix-lent-from-memory"
_LITTLE_ENDIAN = sys.byteorder == "little"

_DATA_FIELDS = frozenset({
    "raw_data", "float_data", "int32_data", "string_data", "int64_data", "double_data",
    "uint64_data",
})


@dataclasses.dataclass
class LoadedModel:
    """A model and where it came from: its path (if any) and whether its weights were external."""

    model: onnx.ModelProto
    path: Path | None = None
    external_data: bool = False
    size_bytes: int = 0
    # True when graphfix made this ModelProto (from a path or bytes), so it may rewrite it in place.
    owned: bool = True


@dataclasses.dataclass
class WrittenModel:
    """Where :func:`save` wrote a model: the file, its external data file (if any), total size."""

    path: Path
    data_path: Path | None
    size_bytes: int


# --------------------------------------------------------------------------------------------
# Loading


def iter_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Every tensor of ``graph`` and its subgraphs: initializers and tensor-valued attributes."""
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                yield attr.t
            elif attr.type == onnx.AttributeProto.TENSORS:
                yield from attr.tensors
            elif attr.type == onnx.AttributeProto.GRAPH:
                yield from iter_tensors(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for subgraph in attr.graphs:
                    yield from iter_tensors(subgraph)


def _external_tensors(model: onnx.ModelProto) -> list[onnx.TensorProto]:
    return [
        t
        for t in iter_tensors(model.graph)
        if t.data_location == onnx.TensorProto.EXTERNAL
    ]


def _resolve_location(base_dir: Path, location: str) -> Path:
    """The file an external-data location names, refusing anything outside ``base_dir``."""
    if not location or os.path.isabs(location) or Path(location).drive:
        raise ModelLoadError(
            f"external data location {location!r} is not a relative path",
            hint="external data must live in the model's folder",
        )
    base = base_dir.resolve()
    target = (base / location).resolve()
    if target != base and base not in target.parents:
        raise ModelLoadError(
            f"external data location {location!r} escapes the model's folder",
            hint="move the data file next to the model and fix its location",
        )
    return target


def _parse(data: bytes, what: str) -> onnx.ModelProto:
    if not data:
        raise ModelLoadError(f"{what} is empty", hint="is this the model file you meant?")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (google.protobuf.message.DecodeError, RuntimeError, ValueError) as err:
        raise ModelLoadError(
            f"{what} is not an ONNX model (protobuf: {err})",
            hint="the file may be truncated or of another format",
        ) from None
    # Random bytes sometimes parse as a protobuf message; a model has a graph and an opset.
    if not model.HasField("graph") or not model.opset_import:
        raise ModelLoadError(
            f"{what} is not an ONNX model (no graph or no opset_import)",
            hint="the file may be truncated or of another format",
        )
    return model


def load_with_info(source: ModelSource, *, load_external_data: bool = True) -> LoadedModel:
    """Load a model and report where it came from. See :func:`load`."""
    if isinstance(source, onnx.ModelProto):
        return LoadedModel(source, external_data=bool(_external_tensors(source)), owned=False)
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        return LoadedModel(_parse(data, "the given bytes"), size_bytes=len(data))

    path = Path(source)
    if not path.exists():
        raise ModelLoadError(f"{path}: no such file", hint="check the path")
    if path.is_dir():
        raise ModelLoadError(f"{path}: is a directory, not a model file")
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ModelLoadError(f"{path}: cannot read ({err.strerror})") from None
    model = _parse(data, str(path))
    size = len(data)
    del data
    external = _external_tensors(model)
    # tensor -> (data file, offset, length), every location checked before any is used.
    sources: list[tuple[onnx.TensorProto, Path, int, int]] = []
    file_sizes: dict[Path, int] = {}
    for tensor in external:
        info = external_data_helper.ExternalDataInfo(tensor)
        target = _resolve_location(path.parent, info.location)
        if not target.is_file():
            raise ModelLoadError(
                f"{path}: external data file {info.location!r} of tensor {tensor.name!r} is missing",
                hint="keep the data file beside the model, under the name the model records",
            )
        file_size = file_sizes.setdefault(target, target.stat().st_size)
        offset = info.offset or 0
        length = file_size - offset if info.length is None else info.length
        if offset > file_size or offset + length > file_size:
            raise ModelLoadError(
                f"{path}: external data of tensor {tensor.name!r} runs past the end of "
                f"{info.location!r}",
                hint="the data file is truncated or belongs to another model",
            )
        sources.append((tensor, target, offset, length))
    size += sum(file_sizes.values())
    if external and load_external_data:
        try:
            external_data_helper.load_external_data_for_model(model, str(path.parent))
        except (OSError, ValueError, onnx.checker.ValidationError) as err:
            raise ModelLoadError(f"{path}: cannot read external data ({err})") from None
    else:
        for tensor, target, offset, length in sources:
            _VETTED.add(str(target))
            _point_at(tensor, str(target), offset, length)
    return LoadedModel(model, path=path, external_data=bool(external), size_bytes=size)


def load(source: ModelSource, *, load_external_data: bool = True) -> onnx.ModelProto:
    """Load an ONNX model from a path, bytes, or a ModelProto (returned as is).

    External data is resolved relative to the model's folder; a location that escapes the
    folder, a missing data file or one too short for its tensors raises :class:`ModelLoadError`,
    as does anything that is not an ONNX model. With ``load_external_data`` false the weights
    are not read: each external tensor then refers to its checked data file by absolute path,
    which :func:`tensor_value`, :func:`save`, :func:`ort_session` and :func:`check_model`
    understand (``onnx.numpy_helper.to_array`` does not: use :func:`tensor_value`, or
    :func:`load_external_values` to read them all in).
    """
    return load_with_info(source, load_external_data=load_external_data).model


# --------------------------------------------------------------------------------------------
# Weights that stay in their files

# Data files that load() checked (inside their model's folder, long enough). A tensor whose
# location is one of these absolute paths is read on demand; any other external tensor (from a
# ModelProto made elsewhere) is treated as not loaded, so a crafted model cannot make graphfix
# read an arbitrary file.
_VETTED: set[str] = set()


def _lazy_source(tensor: onnx.TensorProto) -> tuple[Path, int, int] | None:
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


def _lazy_tensors(model: onnx.ModelProto) -> list[tuple[onnx.TensorProto, Path, int, int]]:
    found = []
    for tensor in iter_tensors(model.graph):
        source = _lazy_source(tensor)
        if source is not None:
            found.append((tensor, *source))
    return found


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
                        f"{path}: external data ends before the {len(buffer)} bytes at offset "
                        f"{offset}",
                        hint="the data file changed after the model was loaded",
                    )
                done += count
    except OSError as err:
        raise ModelLoadError(f"{path}: cannot read external data ({err.strerror or err})") from None


def _read_range(path: Path, offset: int, length: int) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(length)
    except OSError as err:
        raise ModelLoadError(f"{path}: cannot read external data ({err.strerror or err})") from None
    if len(data) != length:
        raise ModelLoadError(
            f"{path}: external data ends before the {length} bytes at offset {offset}",
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
    source = _lazy_source(tensor)
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
    value = tensor_value(tensor)
    if value is None:
        digest.update(b"at:" + str(sorted((e.key, e.value) for e in tensor.external_data)).encode())
    elif value.dtype == object:
        digest.update(b"strings:" + b"\0".join(bytes(v) for v in value.reshape(-1)))
    else:
        digest.update(b"raw:" + np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<"),
                                                                  copy=False).tobytes())
    return digest.digest()


def same_tensor(a: onnx.TensorProto, b: onnx.TensorProto) -> bool:
    """Whether two tensors hold the same type, shape and bytes (names aside). Raw bytes held in
    memory are compared as they are; a tensor whose weights stay in a file is read, unless both
    refer to the same range of one file."""
    if a.data_type != b.data_type or list(a.dims) != list(b.dims):
        return False
    inline = onnx.TensorProto.EXTERNAL not in (a.data_location, b.data_location)
    if inline and a.HasField("raw_data") and b.HasField("raw_data"):
        return a.raw_data == b.raw_data
    source_a, source_b = _lazy_source(a), _lazy_source(b)
    if source_a is not None and source_a == source_b:
        return True
    return tensor_digest(a) == tensor_digest(b)


def has_value(tensor: onnx.TensorProto) -> bool:
    """Whether :func:`tensor_value` can give ``tensor``'s value (inline, or in a checked file)."""
    return tensor.data_location != onnx.TensorProto.EXTERNAL or _lazy_source(tensor) is not None


def load_external_values(model: onnx.ModelProto) -> int:
    """Read every tensor whose weights stay in a checked data file into ``model`` (in place);
    returns how many were read. For code that needs every weight in memory (onnxsim, say)."""
    lazy = _lazy_tensors(model)
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


def _nbytes(tensor: onnx.TensorProto) -> int:
    """The bytes of ``tensor``'s data, from its shape and type. Neither ``len(raw_data)`` nor
    ``ByteSize()`` is used: with protobuf's upb backend both copy the data (ByteSize serializes
    the message to measure it)."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        source = _lazy_source(tensor)
        if source is not None:
            return source[2]
    bits = _BITS.get(tensor.data_type)
    if bits is None:  # strings, or a type this onnx does not name: small in practice
        return tensor.ByteSize()
    return (math.prod(tensor.dims) * bits + 7) // 8


def weight_bytes(model: onnx.ModelProto) -> int:
    """The bytes of ``model``'s tensors, held in memory or left in their files, from their shapes
    and types: cheap at any size (nothing is serialized, copied or read)."""
    return sum(_nbytes(t) for t in iter_tensors(model.graph))


def _inline_bytes(model: onnx.ModelProto) -> int:
    """The bytes of the tensors ``model`` holds in memory."""
    return sum(
        _nbytes(t) for t in iter_tensors(model.graph)
        if t.data_location != onnx.TensorProto.EXTERNAL
    )


# --------------------------------------------------------------------------------------------
# Checking


def check_model(model: onnx.ModelProto) -> list[str]:
    """Check a model structurally; returns warnings, raises if it is broken beyond use.

    A model that fails ``onnx.checker`` but that ONNX Runtime loads (contrib ops in
    ``com.microsoft``, say) is usable: the checker's complaint becomes a warning. A model that
    both reject raises :class:`ModelLoadError` with the checker's message. Weights that stay in
    their files are not read: the checker sees a file of the right size in their place.
    A size below -1 in the signature is refused (-1 is PaddlePaddle's way to write an unknown
    size; graphfix reads it so).
    """
    for kind, values in (("input", model.graph.input), ("output", model.graph.output)):
        for value in values:
            if not value.type.HasField("tensor_type"):
                continue
            for axis, dim in enumerate(value.type.tensor_type.shape.dim):
                if dim.HasField("dim_value") and dim.dim_value < -1:
                    raise ModelLoadError(
                        f"{kind} {value.name!r} declares a size of {dim.dim_value} for its "
                        f"dimension {axis}",
                        hint="a size is 0 or more; -1 or a name marks an unknown size",
                    )
    try:
        lazy = bool(_lazy_tensors(model))
        if not lazy and _inline_bytes(model) < _CHECK_INLINE_BYTES:
            onnx.checker.check_model(model, full_check=True)
        else:
            # onnx.checker would serialize the whole message and parse a copy of it (0.3 s for
            # 138 MB of weights); from a file it reads no external data, so every large tensor
            # becomes a hole of its size in a sparse data file: nothing is copied, written or
            # read.
            with _temporary_model_file(model, lazy="hole") as path:
                onnx.checker.check_model(str(path), full_check=True)
        return []
    except (onnx.checker.ValidationError, onnx.onnx_cpp2py_export.shape_inference.InferenceError) as err:
        checker_message = str(err).strip().splitlines()[0] if str(err).strip() else repr(err)
    try:
        ort_session(model, optimization="disabled")
    except Exception as err:  # noqa: BLE001 - any ORT failure means the model is unusable
        ort_message = str(err).strip().splitlines()[0] if str(err).strip() else repr(err)
        raise ModelLoadError(
            f"invalid model: {checker_message}",
            hint=f"ONNX Runtime cannot load it either: {ort_message}",
        ) from None
    return [f"onnx.checker rejects the model ({checker_message}); ONNX Runtime loads it"]


def _point_at(tensor: onnx.TensorProto, location: str, offset: int, length: int) -> None:
    """Make ``tensor`` refer to ``length`` bytes at ``offset`` of the external file ``location``."""
    del tensor.external_data[:]
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    tensor.data_location = onnx.TensorProto.EXTERNAL


# --------------------------------------------------------------------------------------------
# ONNX Runtime


@functools.cache
def max_ir_version() -> int:
    """The highest ``ir_version`` the installed ONNX Runtime loads (probed once, then cached)."""
    import onnxruntime as ort

    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["y"])],
        "probe",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
    )
    options = ort.SessionOptions()
    options.log_severity_level = 4
    for ir_version in range(onnx.IR_VERSION, 3, -1):
        probe = onnx.helper.make_model(
            graph, opset_imports=[onnx.helper.make_opsetid("", 13)], ir_version=ir_version
        )
        try:
            ort.InferenceSession(
                probe.SerializeToString(), options, providers=["CPUExecutionProvider"]
            )
        except Exception:  # noqa: BLE001 - ORT raises its own Fail type for unsupported IR
            continue
        return ir_version
    return 3


@contextlib.contextmanager
def _ir_capped(model: onnx.ModelProto) -> Iterator[onnx.ModelProto]:
    """Temporarily lower ``model.ir_version`` to what ORT reads; restores it afterwards."""
    original = model.ir_version
    model.ir_version = min(original, max_ir_version())
    try:
        yield model
    finally:
        model.ir_version = original


_LEVELS = {
    "disabled": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "layout": "ORT_ENABLE_LAYOUT",
    "all": "ORT_ENABLE_ALL",
}


def ort_session(
    model: onnx.ModelProto,
    *,
    optimization: str = "disabled",
    providers: Sequence[str | tuple[str, dict]] = ("CPUExecutionProvider",),
    options: onnxruntime.SessionOptions | None = None,
) -> onnxruntime.InferenceSession:
    """An ONNX Runtime session on an in-memory model, whatever its size.

    ``optimization`` is one of disabled, basic, extended, layout, all. The graph is passed as
    bytes; large weights held in memory are lent to ONNX Runtime over their own bytes (kept
    alive with the session) and weights that stay in their files are read there by ONNX Runtime
    (the folder is set in ``options``). A model holding more than ``_SESSION_BYTES_LIMIT`` of
    weights in memory, or weights in several folders, goes through a temporary folder with
    external data, which ONNX Runtime maps instead of copying.
    """
    import onnxruntime as ort

    if optimization not in _LEVELS:
        raise ValueError(f"optimization must be one of {', '.join(_LEVELS)}, got {optimization!r}")
    if options is None:
        options = ort.SessionOptions()
    level_name = _LEVELS[optimization]
    options.graph_optimization_level = getattr(
        ort.GraphOptimizationLevel, level_name, ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    )
    with _ir_capped(model):
        size = _inline_bytes(model)
        external = _external_tensors(model)
        lazy = _lazy_tensors(model)
        folders = {path.parent for _, path, _, _ in lazy}
        if size < _SESSION_BYTES_LIMIT and len(lazy) == len(external) and len(folders) <= 1:
            # The graph goes as bytes; the main graph's large weights held in memory are lent
            # to ORT as OrtValues over their own bytes (serializing them, then ORT parsing its
            # copy and copying them out of it, cost 3 copies and most of the session's start),
            # and weights that stay in their files are read there by ORT.
            memory: list[tuple[str, np.ndarray]] = []
            encoder = _Encoder(lazy="refer", folder=next(iter(folders), None), memory=memory)
            payload = encoder.serialize(model)
            if folders:
                options.add_session_config_entry(_ORT_EXTERNAL_FOLDER, str(encoder.folder))
            values = [ort.OrtValue.ortvalue_from_numpy(value) for _, value in memory]
            if memory:
                options.add_external_initializers([name for name, _ in memory], values)
            session = ort.InferenceSession(payload, options, providers=list(providers))
            # ORT reads those weights where they are for the session's whole life.
            session._graphfix_lent_weights = (memory, values)  # type: ignore[attr-defined]
            return session
        with _temporary_model_file(model, lazy="copy") as path:
            return ort.InferenceSession(str(path), options, providers=list(providers))


@contextlib.contextmanager
def _temporary_model_file(model: onnx.ModelProto, *, lazy: str) -> Iterator[Path]:
    # ONNX Runtime may map the data file for the session's life: where an open file cannot be
    # removed (Windows), the folder is left to the system's temporary-file cleanup.
    with tempfile.TemporaryDirectory(prefix="graphfix-", ignore_cleanup_errors=True) as folder:
        path = Path(folder) / "model.onnx"
        _write_model(model, path, data_path=path.parent / "model.onnx.data",
                     data_name="model.onnx.data", external=True, lazy=lazy, durable=False)
        yield path


# --------------------------------------------------------------------------------------------
# Saving
#
# A model is written as a list of pieces whose sizes are known before any is written: encoded
# bytes, messages serialized only when written, and ranges of a data file copied as they are.
# Protobuf concatenates what it parses, so a message can be written as its small fields followed
# by its large repeated fields one by one; the model in memory is never changed, and at most one
# tensor is held twice at a time.


@dataclasses.dataclass
class _FileRange:
    path: Path
    offset: int
    length: int


_Piece = Union[bytes, google.protobuf.message.Message, _FileRange]


def _piece_size(piece: _Piece) -> int:
    if isinstance(piece, bytes):
        return len(piece)
    if isinstance(piece, _FileRange):
        return piece.length
    return piece.ByteSize()


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(message: type[google.protobuf.message.Message], name: str, pieces: list[_Piece]) -> list[_Piece]:
    """``pieces`` as the length-delimited field ``name`` of ``message``."""
    number = message.DESCRIPTOR.fields_by_name[name].number
    size = sum(_piece_size(p) for p in pieces)
    return [_varint(number << 3 | 2) + _varint(size), *pieces]


def _is_repeated(field: google.protobuf.descriptor.FieldDescriptor) -> bool:
    repeated = getattr(field, "is_repeated", None)
    if repeated is not None:
        return bool(repeated)
    return field.label == field.LABEL_REPEATED


def _shell(message: google.protobuf.message.Message, without: frozenset[str]):
    """A copy of ``message`` without the fields named in ``without``. Those are never read:
    reading ``raw_data`` copies it."""
    shell = type(message)()
    for field in message.DESCRIPTOR.fields:
        name = field.name
        if name in without:
            continue
        if _is_repeated(field):
            values = getattr(message, name)
            if len(values):
                getattr(shell, name).extend(values)
        elif message.HasField(name):  # ONNX is proto2: every singular field has presence
            if field.message_type is not None:
                getattr(shell, name).CopyFrom(getattr(message, name))
            else:
                setattr(shell, name, getattr(message, name))
    return shell


_SKELETON_LOCATION = "graphfix-skeleton"


def skeleton(model: onnx.ModelProto, *, keep_below: int = _EXTERNAL_THRESHOLD) -> onnx.ModelProto:
    """A copy of ``model`` without its weights, for type and shape inference: main-graph
    initializers of ``keep_below`` bytes or more become references to external data that is
    never read (name, type and shape kept); smaller ones (shape constants) are copied. Nothing
    large is copied or serialized."""
    copy = _shell(model, frozenset({"graph"}))
    copy.graph.CopyFrom(_shell(model.graph, frozenset({"initializer"})))
    for tensor in model.graph.initializer:
        if tensor.data_location != onnx.TensorProto.EXTERNAL and _nbytes(tensor) < keep_below:
            copy.graph.initializer.add().CopyFrom(tensor)
        else:
            shell = _shell(tensor, _DATA_FIELDS | {"external_data", "data_location"})
            _point_at(shell, _SKELETON_LOCATION, 0, _nbytes(tensor))
            copy.graph.initializer.append(shell)
    return copy


_TENSOR_ATTRIBUTES = frozenset({
    onnx.AttributeProto.TENSOR, onnx.AttributeProto.TENSORS,
    onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS,
})


@dataclasses.dataclass
class _Encoder:
    """Encodes a model into pieces; large inline tensors go to ``data_file`` when there is one.

    ``lazy`` says what becomes of tensors whose weights stay in a checked source file:
    "copy" into ``data_file``; "refer": references to the source file, relative to ``folder``;
    "inline": their bytes in the model (a range copied from the source file); "hole": their
    space in ``data_file`` is reserved but not written, and so is that of large inline tensors
    (a file for onnx.checker, which checks that the data file exists and never reads it).
    """

    lazy: str
    data_file: BinaryIO | None = None
    data_name: str = ""
    folder: Path | None = None
    # When a list: large inline initializers of the main graph are not encoded but appended
    # here as (name, array over their bytes), the tensor left as a reference ORT resolves from
    # ``SessionOptions.add_external_initializers``.
    memory: list[tuple[str, np.ndarray]] | None = None
    end: int = 0  # bytes of data_file used

    def serialize(self, model: onnx.ModelProto) -> bytes:
        """The encoded model as bytes (for a model under the protobuf limit)."""
        return b"".join(_piece_bytes(p) for p in self.model(model))

    def model(self, model: onnx.ModelProto) -> list[_Piece]:
        pieces: list[_Piece] = [_shell(model, frozenset({"graph"})).SerializeToString()]
        if model.HasField("graph"):
            pieces += _field(onnx.ModelProto, "graph", self.graph(model.graph, main=True))
        return pieces

    def graph(self, graph: onnx.GraphProto, *, main: bool = False) -> list[_Piece]:
        pieces: list[_Piece] = [_shell(graph, frozenset({"node", "initializer"})).SerializeToString()]
        for node in graph.node:
            pieces += _field(onnx.GraphProto, "node", self.node(node))
        for tensor in graph.initializer:
            lent = self._lend(tensor) if main and self.memory is not None else None
            pieces += _field(onnx.GraphProto, "initializer", lent or self.tensor(tensor))
        return pieces

    def _lend(self, tensor: onnx.TensorProto) -> list[_Piece] | None:
        """A large inline initializer as a reference to ``memory`` (see the field), or None."""
        assert self.memory is not None
        dtype = _plain_dtype(tensor.data_type)
        size = _nbytes(tensor)
        if (tensor.data_location == onnx.TensorProto.EXTERNAL or dtype is None
                or size < _EXTERNAL_THRESHOLD or not _LITTLE_ENDIAN):
            return None
        if tensor.HasField("raw_data"):
            value = np.frombuffer(tensor.raw_data, dtype).reshape(tuple(tensor.dims))
        else:
            value = numpy_helper.to_array(tensor)
        self.memory.append((tensor.name, value))
        return [_reference(tensor, _LENT_LOCATION, 0, size)]

    def node(self, node: onnx.NodeProto) -> list[_Piece]:
        if not any(a.type in _TENSOR_ATTRIBUTES for a in node.attribute):
            return [node]
        pieces: list[_Piece] = [_shell(node, frozenset({"attribute"})).SerializeToString()]
        for attr in node.attribute:
            pieces += _field(onnx.NodeProto, "attribute", self.attribute(attr))
        return pieces

    def attribute(self, attr: onnx.AttributeProto) -> list[_Piece]:
        if attr.type not in _TENSOR_ATTRIBUTES:
            return [attr]
        pieces: list[_Piece] = [
            _shell(attr, frozenset({"t", "tensors", "g", "graphs"})).SerializeToString()
        ]
        if attr.HasField("t"):
            pieces += _field(onnx.AttributeProto, "t", self.tensor(attr.t))
        if attr.HasField("g"):
            pieces += _field(onnx.AttributeProto, "g", self.graph(attr.g))
        for tensor in attr.tensors:
            pieces += _field(onnx.AttributeProto, "tensors", self.tensor(tensor))
        for graph in attr.graphs:
            pieces += _field(onnx.AttributeProto, "graphs", self.graph(graph))
        return pieces

    def tensor(self, tensor: onnx.TensorProto) -> list[_Piece]:
        source = _lazy_source(tensor)
        if source is None and tensor.data_location == onnx.TensorProto.EXTERNAL:
            raise ModelSaveError(
                f"tensor {tensor.name!r} still refers to external data that was never loaded",
                hint="load the model with graphfix (or with its external data) before saving it",
            )
        if source is not None:
            path, offset, length = source
            if self.lazy == "refer" and self.folder is not None:
                return [_reference(tensor, path.relative_to(self.folder).as_posix(), offset, length)]
            if self.lazy == "inline" or self.data_file is None:
                shell = _shell(tensor, _DATA_FIELDS | {"external_data", "data_location"})
                return [shell.SerializeToString(), *_field(onnx.TensorProto, "raw_data", [
                    _FileRange(path, offset, length)])]
            start = self._place(length)
            if self.lazy == "copy":
                _copy_range(path, offset, length, self.data_file, start)
            return [_reference(tensor, self.data_name, start, length)]
        size = _nbytes(tensor)
        if self.data_file is None or size < _EXTERNAL_THRESHOLD:
            return [tensor]
        if self.lazy == "hole":  # the checker reads no data: any length inside the file will do
            return [_reference(tensor, self.data_name, self._place(size), size)]
        if tensor.HasField("raw_data"):
            raw = tensor.raw_data
        else:  # typed fields: the file holds the little-endian bytes
            raw = numpy_helper.to_array(tensor).tobytes()
        start = self._place(len(raw))
        self.data_file.seek(start)
        self.data_file.write(raw)
        return [_reference(tensor, self.data_name, start, len(raw))]

    def _place(self, length: int) -> int:
        """Where the next ``length`` bytes go in ``data_file``: aligned after what is there."""
        start = self.end + (-self.end) % _ALIGNMENT
        self.end = start + length
        return start

    def finish(self) -> bool:
        """Give ``data_file`` its full size (holes included); returns whether it holds anything."""
        if self.data_file is None:
            return False
        self.data_file.truncate(self.end)
        return self.end > 0


def _reference(tensor: onnx.TensorProto, location: str, offset: int, length: int) -> bytes:
    shell = _shell(tensor, _DATA_FIELDS | {"external_data", "data_location"})
    _point_at(shell, location, offset, length)
    return shell.SerializeToString()


def _piece_bytes(piece: _Piece) -> bytes:
    if isinstance(piece, bytes):
        return piece
    if isinstance(piece, _FileRange):
        return _read_range(piece.path, piece.offset, piece.length)
    return piece.SerializeToString()


# errno values with which copy_file_range declines a pair of files (another filesystem on an old
# kernel, a filesystem without it); the copy then goes through a buffer.
_NO_KERNEL_COPY = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM}


def _copy_range(source: Path, offset: int, length: int, target: BinaryIO, start: int) -> None:
    """Copy ``length`` bytes at ``offset`` of ``source`` to ``start`` of ``target``, in chunks
    (in the kernel where it can), never holding the whole range in memory."""
    copied = 0
    try:
        with open(source, "rb", buffering=0) as src:
            if hasattr(os, "copy_file_range"):
                try:
                    while copied < length:
                        count = os.copy_file_range(
                            src.fileno(), target.fileno(), min(length - copied, 2**30),
                            offset + copied, start + copied,
                        )
                        if not count:
                            break
                        copied += count
                except OSError as err:
                    if err.errno not in _NO_KERNEL_COPY:
                        raise
            if copied < length:
                src.seek(offset + copied)
                target.seek(start + copied)
                buffer = bytearray(min(_CHUNK_BYTES, length - copied))
                view = memoryview(buffer)
                while copied < length:
                    count = src.readinto(view[: min(len(buffer), length - copied)])
                    if not count:
                        break
                    target.write(view[:count])
                    copied += count
    except OSError as err:
        raise ModelSaveError(
            f"cannot copy external data from {source} ({err.strerror or err})",
            hint="check that the source data file is readable and the disk has room",
        ) from None
    if copied < length:
        raise ModelSaveError(
            f"{source}: external data ends before the {length} bytes at offset {offset}",
            hint="the data file changed after the model was loaded",
        )


def _write_pieces(f: BinaryIO, pieces: list[_Piece]) -> None:
    for piece in pieces:
        if isinstance(piece, _FileRange):
            f.flush()
            _copy_range(piece.path, piece.offset, piece.length, f, f.tell())
            f.seek(0, os.SEEK_END)
        else:
            f.write(_piece_bytes(piece))


def _write_model(
    model: onnx.ModelProto,
    path: Path,
    *,
    data_path: Path,
    data_name: str,
    external: bool,
    lazy: str = "copy",
    durable: bool = True,
) -> bool:
    """Write ``model`` to ``path``, and its large weights to ``data_path`` (recorded in the model
    as ``data_name``) when ``external``; returns whether a data file was written (no tensor may be
    large enough). Weights that stay in their source files are copied (``lazy="copy"``), left as
    holes (``"hole"``), or inlined when not ``external``. ``durable`` syncs both files to disk
    (scratch files for another process need not wait for that)."""
    with _ir_capped(model):
        wrote_data = False
        if external:
            with open(data_path, "w+b", buffering=0) as data_file:
                encoder = _Encoder(lazy=lazy, data_file=data_file, data_name=data_name)
                pieces = encoder.model(model)
                wrote_data = encoder.finish()
                if durable:
                    os.fsync(data_file.fileno())
            if not wrote_data:
                data_path.unlink()
        else:
            pieces = _Encoder(lazy="inline").model(model)
        if sum(_piece_size(p) for p in pieces) > PROTOBUF_LIMIT:
            raise ModelSaveError(
                f"{path.name}: the model is over 2 GB and cannot be written as a single file",
                hint="save it with external data",
            )
        with open(path, "wb") as f:
            _write_pieces(f, pieces)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        return wrote_data


def write_scratch(model: onnx.ModelProto, path: str | os.PathLike) -> int:
    """Write ``model`` to ``path`` for another process or tool to read: its large weights in
    ``<path>.data`` beside it (written from memory, or copied file to file when they stay in
    their own files), nothing synced to disk, nothing atomic. Returns the bytes written."""
    path = Path(path)
    data_path = path.with_name(path.name + ".data")
    _write_model(model, path, data_path=data_path, data_name=data_path.name, external=True,
                 durable=False)
    return path.stat().st_size + (data_path.stat().st_size if data_path.exists() else 0)


def _needs_external(model: onnx.ModelProto) -> bool:
    return weight_bytes(model) >= PROTOBUF_LIMIT - _EXTERNAL_MARGIN


def save(
    model: onnx.ModelProto,
    path: str | os.PathLike,
    *,
    external_data: bool | None = None,
    protect: Sequence[str | os.PathLike] = (),
) -> WrittenModel:
    """Write ``model`` to ``path`` atomically; returns where it went and how large it is.

    ``external_data``: None writes weights beside the model (``<name>.data``) only when the model
    is over the 2 GB protobuf limit; True always; False never (a model too large then raises).
    Weights that stay in their source files (see :func:`load`) are copied from them in chunks.
    ``protect`` lists paths that must not be overwritten (the input model, say); the data files
    the model's weights are read from are never overwritten either. The model's ``ir_version``
    is capped in the written file to what the installed ONNX Runtime reads; the model in memory
    is left unchanged. On any failure nothing is left behind.
    """
    target = Path(path)
    for protected in protect:
        if target.resolve() == Path(protected).resolve():
            raise ModelSaveError(
                f"{target}: refusing to overwrite the input model",
                hint="write the optimized model to another path",
            )
    if target.is_dir():
        raise ModelSaveError(f"{target}: is a directory", hint="give a file name ending in .onnx")
    folder = target.parent
    if not folder.is_dir():
        raise ModelSaveError(f"{folder}: no such folder", hint="create it first")
    data_name = f"{target.name}.data"
    sources = {path.resolve() for _, path, _, _ in _lazy_tensors(model)}
    for written in (target, folder / data_name):
        if written.resolve() in sources:
            raise ModelSaveError(
                f"{written}: refusing to overwrite the external data the model's weights are "
                "read from",
                hint="write the optimized model to another folder or under another name",
            )
    external = _needs_external(model) if external_data is None else external_data
    if external_data is False and _needs_external(model):
        raise ModelSaveError(
            f"{target}: the model is over 2 GB and cannot be written as a single file",
            hint="save it with external data",
        )
    tmp_model: Path | None = None
    tmp_data_name = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
        os.close(fd)
        tmp_model = Path(tmp)
        # Weights go under a temporary name too, then are renamed with the model; the model
        # records their final name.
        tmp_data_name = f"{tmp_model.name}.data"
        wrote_data = _write_model(
            model, tmp_model, data_path=folder / tmp_data_name, data_name=data_name,
            external=external,
        )
        if wrote_data:
            os.replace(folder / tmp_data_name, folder / data_name)
        os.replace(tmp_model, target)
    except ModelSaveError:
        _remove_quietly(tmp_model, folder, tmp_data_name)
        raise
    except OSError as err:
        _remove_quietly(tmp_model, folder, tmp_data_name)
        raise ModelSaveError(
            f"{target}: cannot write ({err.strerror or err})",
            hint="check that the folder is writable and the disk has room",
        ) from None
    except BaseException:
        _remove_quietly(tmp_model, folder, tmp_data_name)
        raise
    logger.debug("wrote %s (external data: %s)", target, wrote_data)
    data_path = folder / data_name if wrote_data else None
    size = target.stat().st_size + (data_path.stat().st_size if data_path else 0)
    return WrittenModel(target, data_path, size)


def _remove_quietly(tmp_model: Path | None, folder: Path, tmp_data_name: str | None) -> None:
    for leftover in (tmp_model, folder / tmp_data_name if tmp_data_name else None):
        if leftover is not None:
            with contextlib.suppress(OSError):
                leftover.unlink()


def write_text(path: Path, text: str) -> None:
    """Write a text file (a report, say) atomically: a temporary file beside it, then a rename."""
    path = Path(path)
    tmp: Path | None = None
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        tmp = Path(name)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as err:
        _remove_quietly(tmp, path.parent, None)
        raise ModelSaveError(f"{path}: cannot write ({err.strerror or err})") from None


@contextlib.contextmanager
def temporary_folder(prefix: str = "graphfix-") -> Iterator[Path]:
    """A temporary folder for tools that write files (ORT's optimized model, onnxsim's child
    process); removed with everything in it when the block ends, on error too."""
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        yield Path(folder)
