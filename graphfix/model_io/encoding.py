"""Writing a model as pieces: protobuf's wire format by hand, so that no weight is copied.

A model is written as a list of pieces whose sizes are known before any is written: encoded
bytes, messages serialized only when written, and ranges of a data file copied as they are.
Protobuf concatenates what it parses, so a message can be written as its small fields followed
by its large repeated fields one by one; the model in memory is never changed, and at most one
tensor is held twice at a time.
"""

from __future__ import annotations

import dataclasses
import errno
import os
from pathlib import Path
from typing import BinaryIO, Union

import google.protobuf.message
import numpy as np
import onnx
from onnx import numpy_helper

from graphfix.errors import ModelSaveError, shown
from graphfix.graph import copy_without
from graphfix.model_io.files import os_failure
from graphfix.model_io.runtime import ir_capped
from graphfix.model_io.tensors import (
    _DATA_FIELDS,
    _LITTLE_ENDIAN,
    MEASURED_SIZE_LIMIT,
    inline_bytes,
    lazy_source,
    lazy_tensors,
    weight_bytes,
    _nbytes,
    _plain_dtype,
    _point_at,
    _read_range,
)

__all__ = ["PROTOBUF_LIMIT", "skeleton", "stored_size", "write_scratch"]


# Protobuf cannot serialize a message of 2 GiB or more; keep a margin for the graph itself.
PROTOBUF_LIMIT = 2**31 - 1
# Tensors at least this large go to the external data file (onnx's own default threshold).
_EXTERNAL_THRESHOLD = 1024
# Large weights start at a multiple of the page size in the data file (ONNX Runtime maps such a
# weight from the file instead of reading it: its own saver aligns weights over 1 MiB to 4 KiB
# when asked). Only where the source's large weights were aligned: padding a file that was not
# makes the output larger than the input (a 7 MB model's data grew by 62 KB).
_ALIGNMENT = 4096
_ALIGN_FROM = 2**20
# Weights copied file to file (or read) this much at a time when the kernel cannot copy them.
_CHUNK_BYTES = 16 * 2**20

# The location recorded for weights lent to ORT from memory (never a file ORT reads).
_LENT_LOCATION = "graphfix-lent-from-memory"


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


_SKELETON_LOCATION = "graphfix-skeleton"


def skeleton(model: onnx.ModelProto, *, keep_below: int = _EXTERNAL_THRESHOLD) -> onnx.ModelProto:
    """A copy of ``model`` without its weights, for type and shape inference: main-graph
    initializers of ``keep_below`` bytes or more become references to external data that is
    never read (name, type and shape kept); smaller ones (shape constants) are copied. Nothing
    large is copied or serialized."""
    copy = copy_without(model, frozenset({"graph"}))
    copy.graph.CopyFrom(copy_without(model.graph, frozenset({"initializer"})))
    for tensor in model.graph.initializer:
        if tensor.data_location != onnx.TensorProto.EXTERNAL and _nbytes(tensor) < keep_below:
            copy.graph.initializer.add().CopyFrom(tensor)
        else:
            shell = copy_without(tensor, _DATA_FIELDS | {"external_data", "data_location"})
            _point_at(shell, _SKELETON_LOCATION, 0, _nbytes(tensor))
            copy.graph.initializer.append(shell)
    return copy


def stored_size(model: onnx.ModelProto) -> int:
    """The bytes ``model`` takes written, its weights left in their data files included. Past
    :data:`MEASURED_SIZE_LIMIT` of weights it is measured on its :func:`skeleton` (the main
    graph's initializers not copied; Constants and bodies are), the weights counted by their
    types and shapes: some 60 bytes over per large weight, and every node, annotation and
    name counted."""
    weights = weight_bytes(model)
    try:
        measured = model if weights < MEASURED_SIZE_LIMIT else skeleton(model)
        return measured.ByteSize() + weights - inline_bytes(measured)
    except (ValueError, google.protobuf.message.EncodeError):  # past 2 GB outside the main
        return weights  # graph's initializers (Constants, bodies): the weights alone


_FUNCTION_FIELDS = frozenset(f.name for f in onnx.FunctionProto.DESCRIPTOR.fields)

# What a model declares about shapes without proving them: left out for tools that trust it.
DECLARED_SHAPES = frozenset({"value_info"})

_TENSOR_ATTRIBUTES = frozenset({
    onnx.AttributeProto.TENSOR, onnx.AttributeProto.TENSORS,
    onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS,
    onnx.AttributeProto.SPARSE_TENSOR, onnx.AttributeProto.SPARSE_TENSORS,
})


@dataclasses.dataclass
class Encoder:
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
    # When a set: only initializers of these names are lent to ``memory``.
    lendable: frozenset[str] | None = None
    end: int = 0  # bytes of data_file used
    # weights of _ALIGN_FROM bytes or more start at a multiple of this (1: packed)
    alignment: int = 1
    # Fields left out of every graph and function (``value_info``: the shapes a file only
    # declares, which a tool that trusts them can build on when they are stale).
    without: frozenset[str] = frozenset()

    def serialize(self, model: onnx.ModelProto) -> bytes:
        """The encoded model as bytes (for a model under the protobuf limit)."""
        return b"".join(_piece_bytes(p) for p in self.model(model))

    def model(self, model: onnx.ModelProto) -> list[_Piece]:
        pieces: list[_Piece] = [
            copy_without(model, frozenset({"graph", "functions"})).SerializeToString()]
        if model.HasField("graph"):
            pieces += _field(onnx.ModelProto, "graph", self.graph(model.graph, main=True))
        for function in model.functions:  # a Constant in a body may hold any tensor
            left_out = frozenset({"node"}) | (self.without & _FUNCTION_FIELDS)
            body: list[_Piece] = [copy_without(function, left_out).SerializeToString()]
            for node in function.node:
                body += _field(onnx.FunctionProto, "node", self.node(node))
            pieces += _field(onnx.ModelProto, "functions", body)
        return pieces

    def graph(self, graph: onnx.GraphProto, *, main: bool = False) -> list[_Piece]:
        pieces: list[_Piece] = [copy_without(
            graph, frozenset({"node", "initializer", "sparse_initializer"}) | self.without
        ).SerializeToString()]
        run: list[onnx.NodeProto] = []  # nodes written as they are, in one serialization
        for node in graph.node:
            if self._as_is(node):
                run.append(node)
                continue
            pieces += _nodes(run)
            run = []
            pieces += _field(onnx.GraphProto, "node", self.node(node))
        pieces += _nodes(run)
        for tensor in graph.initializer:
            lent = self._lend(tensor) if main and self.memory is not None else None
            pieces += _field(onnx.GraphProto, "initializer", lent or self.tensor(tensor))
        for sparse in graph.sparse_initializer:
            pieces += _field(onnx.GraphProto, "sparse_initializer", self.sparse(sparse))
        return pieces

    def sparse(self, sparse: onnx.SparseTensorProto) -> list[_Piece]:
        """A sparse tensor: its values and indices are written inside the model (from their
        files when they stay there), never as external data, which onnx's checker and shape
        inference cannot read for sparse tensors."""
        pieces: list[_Piece] = [
            copy_without(sparse, frozenset({"values", "indices"})).SerializeToString()]
        for name in ("values", "indices"):
            if sparse.HasField(name):
                pieces += _field(onnx.SparseTensorProto, name,
                                 self._inline(getattr(sparse, name)))
        return pieces

    def _inline(self, tensor: onnx.TensorProto) -> list[_Piece]:
        """``tensor`` with its bytes in the model."""
        source = lazy_source(tensor)
        if source is None:
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                return self.tensor(tensor)  # never loaded: refused there
            return [tensor]
        path, offset, length = source
        shell = copy_without(tensor, _DATA_FIELDS | {"external_data", "data_location"})
        return [shell.SerializeToString(), *_field(onnx.TensorProto, "raw_data", [
            _FileRange(path, offset, length)])]

    def _lend(self, tensor: onnx.TensorProto) -> list[_Piece] | None:
        """A large inline initializer as a reference to ``memory`` (see the field), or None."""
        assert self.memory is not None
        dtype = _plain_dtype(tensor.data_type)
        size = _nbytes(tensor)
        if self.lendable is not None and tensor.name not in self.lendable:
            return None
        if (tensor.data_location == onnx.TensorProto.EXTERNAL or dtype is None
                or size < _EXTERNAL_THRESHOLD or not _LITTLE_ENDIAN):
            return None
        if tensor.HasField("raw_data"):
            value = np.frombuffer(tensor.raw_data, dtype).reshape(tuple(tensor.dims))
        else:
            value = numpy_helper.to_array(tensor)
        self.memory.append((tensor.name, value))
        return [_reference(tensor, _LENT_LOCATION, 0, size)]

    def _as_is(self, node: onnx.NodeProto) -> bool:
        """Whether :meth:`node` would write ``node`` unchanged: no subgraph or sparse tensor,
        and every tensor attribute held in memory and small enough to stay inline."""
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                tensors = [attr.t]
            elif attr.type == onnx.AttributeProto.TENSORS:
                tensors = list(attr.tensors)
            elif attr.type in _TENSOR_ATTRIBUTES:
                return False
            else:
                continue
            for tensor in tensors:
                if tensor.data_location == onnx.TensorProto.EXTERNAL or (
                        self.data_file is not None and _nbytes(tensor) >= _EXTERNAL_THRESHOLD):
                    return False
        return True

    def node(self, node: onnx.NodeProto) -> list[_Piece]:
        if self._as_is(node):
            return [node]
        pieces: list[_Piece] = [copy_without(node, frozenset({"attribute"})).SerializeToString()]
        for attr in node.attribute:
            pieces += _field(onnx.NodeProto, "attribute", self.attribute(attr))
        return pieces

    def attribute(self, attr: onnx.AttributeProto) -> list[_Piece]:
        if attr.type not in _TENSOR_ATTRIBUTES:
            return [attr]
        pieces: list[_Piece] = [copy_without(attr, frozenset(
            {"t", "tensors", "g", "graphs", "sparse_tensor", "sparse_tensors"})).SerializeToString()]
        if attr.HasField("t"):
            pieces += _field(onnx.AttributeProto, "t", self.tensor(attr.t))
        if attr.HasField("g"):
            pieces += _field(onnx.AttributeProto, "g", self.graph(attr.g))
        if attr.HasField("sparse_tensor"):
            pieces += _field(onnx.AttributeProto, "sparse_tensor", self.sparse(attr.sparse_tensor))
        for tensor in attr.tensors:
            pieces += _field(onnx.AttributeProto, "tensors", self.tensor(tensor))
        for graph in attr.graphs:
            pieces += _field(onnx.AttributeProto, "graphs", self.graph(graph))
        for sparse in attr.sparse_tensors:
            pieces += _field(onnx.AttributeProto, "sparse_tensors", self.sparse(sparse))
        return pieces

    def tensor(self, tensor: onnx.TensorProto) -> list[_Piece]:
        source = lazy_source(tensor)
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
                shell = copy_without(tensor, _DATA_FIELDS | {"external_data", "data_location"})
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
        """Where the next ``length`` bytes go in ``data_file``: after what is there, aligned
        where large (``alignment``)."""
        start = self.end + ((-self.end) % self.alignment if length >= _ALIGN_FROM else 0)
        self.end = start + length
        return start

    def finish(self) -> bool:
        """Give ``data_file`` its full size (holes included); returns whether it holds anything."""
        if self.data_file is None:
            return False
        self.data_file.truncate(self.end)
        return self.end > 0


def _reference(tensor: onnx.TensorProto, location: str, offset: int, length: int) -> bytes:
    shell = copy_without(tensor, _DATA_FIELDS | {"external_data", "data_location"})
    _point_at(shell, location, offset, length)
    return shell.SerializeToString()


def _nodes(run: list[onnx.NodeProto]) -> list[_Piece]:
    """Nodes as repeated ``node`` fields of a graph, serialized together (one call instead of
    two per node: a graph of a thousand nodes is written in a millisecond, not thirty)."""
    if not run:
        return []
    holder = onnx.GraphProto()
    holder.node.extend(run)
    return [holder]


def _piece_bytes(piece: _Piece) -> bytes:
    if isinstance(piece, bytes):
        return piece
    if isinstance(piece, _FileRange):
        return _read_range(piece.path, piece.offset, piece.length)
    return piece.SerializeToString()


# errno values with which copy_file_range declines a pair of files (another filesystem on an old
# kernel, a filesystem without it); the copy then goes through a buffer.
_NO_KERNEL_COPY = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM}


# What a write meets when the target's system runs out (not the source's fault).
_TARGET_ERRORS = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}


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
        if err.errno in _TARGET_ERRORS:  # the target's system ran out: the writer names it
            raise
        raise ModelSaveError(
            f"cannot copy external data from {shown(source)} ({err.strerror or err})",
            hint="check that the source data file is readable and the disk has room",
        ) from None
    if copied < length:
        raise ModelSaveError(
            f"{shown(source)}: external data ends before the {length} bytes at offset {offset}",
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


def _source_alignment(model: onnx.ModelProto) -> int:
    """:data:`_ALIGNMENT` where every large weight ``model`` reads from a data file starts at
    a multiple of it there (ONNX Runtime's saver with alignment on, or graphfix's output),
    else 1: the data file is written packed, as most exporters write theirs."""
    large = [offset for _, _, offset, length in lazy_tensors(model) if length >= _ALIGN_FROM]
    # every one at offset 0 is a file per weight (onnx's all_tensors_to_one_file=False), not
    # a padded file: packed too
    return _ALIGNMENT if large and all(o % _ALIGNMENT == 0 for o in large) and any(
        large) else 1


def write_model(
    model: onnx.ModelProto,
    path: Path,
    *,
    data_path: Path,
    data_name: str,
    external: bool,
    lazy: str = "copy",
    durable: bool = True,
    without: frozenset[str] = frozenset(),
) -> bool:
    """Write ``model`` to ``path``, and its large weights to ``data_path`` (recorded in the model
    as ``data_name``) when ``external``; returns whether a data file was written (no tensor may be
    large enough). Weights that stay in their source files are copied (``lazy="copy"``), left as
    holes (``"hole"``), or inlined when not ``external``. ``durable`` syncs both files to disk
    (scratch files for another process need not wait for that)."""
    with ir_capped(model):
        wrote_data = False
        if external:
            with open(data_path, "w+b", buffering=0) as data_file:
                encoder = Encoder(lazy=lazy, data_file=data_file, data_name=data_name,
                                   without=without, alignment=_source_alignment(model))
                pieces = encoder.model(model)
                wrote_data = encoder.finish()
                if durable:
                    os.fsync(data_file.fileno())
            if not wrote_data:
                data_path.unlink()
        else:
            pieces = Encoder(lazy="inline", without=without).model(model)
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


def write_scratch(model: onnx.ModelProto, path: str | os.PathLike, *,
                  declared_shapes: bool = True) -> int:
    """Write ``model`` to ``path`` for another process or tool to read: its large weights in
    ``<path>.data`` beside it (written from memory, or copied file to file when they stay in
    their own files), nothing synced to disk, nothing atomic. ``declared_shapes=False`` leaves
    out the shapes the model only declares (``value_info``, in every graph): a tool that builds
    on them (onnxsim folds ``Shape`` from them) cannot build on stale ones. Returns the bytes
    written."""
    path = Path(path)
    data_path = path.with_name(path.name + ".data")
    try:
        write_model(model, path, data_path=data_path, data_name=data_path.name, external=True,
                     durable=False,
                     without=frozenset() if declared_shapes else DECLARED_SHAPES)
    except OSError as err:
        raise os_failure(err, path, "temporary files") from None
    return path.stat().st_size + (data_path.stat().st_size if data_path.exists() else 0)
