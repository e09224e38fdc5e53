"""Reading a model: from a path, bytes or a ModelProto, its external data checked."""

from __future__ import annotations

import dataclasses
import errno
import io
import logging
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Union

import google.protobuf.descriptor
import google.protobuf.message
import onnx

from graphfix.errors import ModelLoadError, first_line, shown
from graphfix.model_io.encoding import PROTOBUF_LIMIT
from graphfix.model_io.files import FileRecord, note_read
from graphfix.model_io.folders import owns
from graphfix.options import OptionError, check_type
from graphfix.model_io.tensors import (
    load_external_values,
    vet,
    _declared_nbytes,
    external_tensors,
    _point_at,
)

__all__ = ["ModelSource", "LoadedModel", "load", "load_with_info", "model_argument",
           "named_model"]

logger = logging.getLogger(__name__)

ModelSource = Union[str, os.PathLike, bytes, onnx.ModelProto]


@dataclasses.dataclass
class LoadedModel:
    """A model and where it came from: its path (if any) and whether its weights were external."""

    model: onnx.ModelProto
    path: Path | None = None
    external_data: bool = False
    size_bytes: int = 0
    # True when graphfix made this ModelProto (from a path or bytes), so it may rewrite it in place.
    owned: bool = True


def _resolve_location(base_dir: Path, location: str, allowed: Sequence[Path] = ()) -> Path:
    """The file an external-data location names, relative to ``base_dir``, refusing anything
    outside ``base_dir`` and the ``allowed`` folders (links resolved)."""
    if not location or os.path.isabs(location) or Path(location).drive:
        raise ModelLoadError(
            f"external data location {location!r} is not a relative path",
            hint="external data must live in the model's folder",
        )
    try:
        base = base_dir.resolve()
        target = (base / location).resolve()
    except (OSError, RuntimeError, ValueError) as err:  # RuntimeError: a link loop (3.11)
        raise ModelLoadError(f"external data location {location[:80]!r} cannot be used "
                             f"({_reason(err)})", hint="the model file may be damaged") from None
    if not any(target == folder or folder in target.parents for folder in {base, *allowed}):
        raise ModelLoadError(
            f"external data location {location!r} escapes the model's folder",
            hint="move the data file next to the model and fix its location",
        )
    return target


def _reason(err: BaseException) -> str:
    if isinstance(err, OSError) and err.errno == errno.ELOOP or isinstance(err, RuntimeError):
        return "a loop of symbolic links"
    return (err.strerror if isinstance(err, OSError) and err.strerror else str(err)) or (
        type(err).__name__)


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    """What a file that is not a regular one is ("a directory", "a FIFO (named pipe)", ...)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _open_error(path: Path, err: OSError) -> ModelLoadError:
    """Why the model file at ``path`` cannot be opened, as one line a user can act on."""
    if err.errno == errno.ENOENT:
        if os.path.islink(path):
            return ModelLoadError(
                f"{shown(path)}: a symbolic link to {shown(os.readlink(path))}, which does not "
                "exist", hint="fix or remove the link")
        return ModelLoadError(f"{shown(path)}: no such file", hint="check the path")
    if err.errno == errno.ELOOP:
        return ModelLoadError(f"{shown(path)}: a loop of symbolic links",
                              hint="the link leads back to itself; point it at the model file")
    hint = "check the file's permissions" if err.errno == errno.EACCES else None
    return ModelLoadError(f"{shown(path)}: cannot read ({_reason(err)})", hint=hint)


def _read_model_file(path: Path) -> bytes:
    """The bytes of the model file at ``path``. Anything but a regular file (a folder, a FIFO
    nobody writes to, /dev/zero) and a file over protobuf's 2 GiB limit are refused before a
    byte is read; the file is opened without blocking (a FIFO would wait for a writer)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        raise _open_error(path, err) from None
    except ValueError as err:  # a NUL byte in the path
        raise ModelLoadError(f"{shown(path)}: not a usable path ({err})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            if stat.S_ISDIR(info.st_mode):
                raise ModelLoadError(f"{shown(path)}: is a directory, not a model file",
                                     hint="give the model file inside it")
            raise ModelLoadError(f"{shown(path)}: is {_kind(info.st_mode)}, not a regular file",
                                 hint="give the path of an .onnx file")
        if info.st_size > PROTOBUF_LIMIT:
            raise _too_large(path, info.st_size)
        _note_read(path, "the model", info)
        with io.FileIO(fd, "rb", closefd=False) as f:
            data = f.read(info.st_size + 1)  # one byte more tells a file that grows
    except OSError as err:
        raise ModelLoadError(f"{shown(path)}: cannot read ({_reason(err)})") from None
    finally:
        os.close(fd)
    if len(data) > info.st_size:
        raise ModelLoadError(f"{shown(path)}: the file grew while it was read",
                             hint="wait until whatever writes it has finished")
    return data


def _too_large(path: Path, size: int) -> ModelLoadError:
    return ModelLoadError(
        f"{shown(path)}: {size} bytes, over protobuf's 2 GiB limit for a model file",
        hint="a model this large keeps its weights in external data files; is this the model?")


def _external_info(path: Path, tensor: onnx.TensorProto) -> tuple[str, int, int | None]:
    """(location, offset, length or None) of an external tensor, each field checked."""
    fields = {entry.key: entry.value for entry in tensor.external_data}
    location = fields.get("location", "")
    if "\0" in location:
        raise ModelLoadError(f"{shown(path)}: the external data location of tensor "
                             f"{tensor.name!r} holds a NUL byte", hint="the model file is damaged")
    numbers: dict[str, int] = {}
    for key in ("offset", "length"):
        if key not in fields:
            continue
        try:
            numbers[key] = int(fields[key])
        except ValueError:
            raise ModelLoadError(
                f"{shown(path)}: the external data {key} of tensor {tensor.name!r} is not a "
                f"number ({fields[key][:40]!r})", hint="the model file is damaged") from None
        if numbers[key] < 0:
            raise ModelLoadError(
                f"{shown(path)}: the external data {key} of tensor {tensor.name!r} is negative "
                f"({numbers[key]})", hint="the model file is damaged")
    return location, numbers.get("offset", 0), numbers.get("length")


def _parse(data: bytes, what: str) -> onnx.ModelProto:
    if not data:
        raise ModelLoadError(f"{what} is empty", hint="is this the model file you meant?")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (google.protobuf.message.DecodeError, RuntimeError, ValueError) as err:
        raise ModelLoadError(
            f"{what} is not an ONNX model (protobuf: {first_line(err, limit=200)})",
            hint="the file may be truncated or of another format",
        ) from None
    # Random bytes sometimes parse as a protobuf message; a model has a graph and an opset.
    if not model.HasField("graph") or not model.opset_import:
        raise ModelLoadError(
            f"{what} is not an ONNX model (no graph or no opset_import)",
            hint="the file may be truncated or of another format",
        )
    return model


def _undecodable(message: google.protobuf.message.Message) -> tuple[str, bytes] | None:
    """The first text field of ``message`` (or of a message in it) that is not valid UTF-8:
    (``Type.field``, its bytes), or None. Protobuf hands such a field over as bytes instead of
    text; tensors' data is bytes by design and is not looked at."""
    if isinstance(message, onnx.TensorProto):
        texts = [("name", message.name), ("doc_string", message.doc_string)]
        texts += [("external_data", v) for e in message.external_data for v in (e.key, e.value)]
        for name, value in texts:
            if isinstance(value, bytes):
                return f"TensorProto.{name}", value
        return None
    for field, value in message.ListFields():
        values = value if _repeated(field) else [value]
        if field.type == field.TYPE_STRING:
            for item in values:
                if isinstance(item, bytes):
                    return f"{type(message).__name__}.{field.name}", item
        elif field.type == field.TYPE_MESSAGE:
            for item in values:
                found = _undecodable(item)
                if found is not None:
                    return found
    return None


def _repeated(field: google.protobuf.descriptor.FieldDescriptor) -> bool:
    repeated = getattr(field, "is_repeated", None)
    return bool(repeated) if repeated is not None else field.label == field.LABEL_REPEATED


def _check_text(model: onnx.ModelProto, what: str) -> None:
    """Refuse, once and in one line, a model with a name that is not valid UTF-8: ONNX says
    every name is UTF-8 text, and graphfix works with names as text (ONNX Runtime, which
    compares bytes, may load such a model)."""
    found = _undecodable(model)
    if found is not None:
        field, value = found
        raise ModelLoadError(
            f"{what}: a name is not valid UTF-8 text ({field} {value[:40]!r})",
            hint="ONNX names are UTF-8; rename it (onnx.ModelProto fields hold str)")


def _data_folders(path: Path, external: list[onnx.TensorProto]) -> tuple[Path, list[Path]]:
    """The folder external-data locations are resolved in, and the folders the data may lie
    in. For a link, both the link's folder and the folder of the file it leads to are the
    model's: locations are resolved beside the link, where ONNX Runtime and onnx look (a
    Hugging Face cache links the model and its data file side by side, to files in another
    folder), or beside the file it leads to when the link's folder lacks data files that
    folder holds."""
    folder = path.parent
    if not external or not path.is_symlink():
        return folder, []
    try:
        real = path.resolve(strict=True).parent
        if real == folder.resolve():
            return folder, []
    except (OSError, RuntimeError):
        return folder, []
    locations = {e.value for t in external for e in t.external_data if e.key == "location"}
    if not all(os.path.exists(folder / loc) for loc in locations) and all(
            os.path.exists(real / loc) for loc in locations):
        logger.debug("%s is a link: its external data is read beside %s", path, real)
        return real, [real]
    return folder, [real]


def _data_file_size(path: Path, target: Path, location: str, tensor: onnx.TensorProto) -> int:
    """The size of the data file ``target`` (``location`` in the model at ``path``), which
    must be a regular file; from now on its tensors may be read from it (its state is kept, so
    that a change before the output is written is found)."""
    where = f"{shown(path)}: external data file {location[:80]!r} of tensor {tensor.name!r}"
    try:
        info = target.stat()
    except FileNotFoundError:
        raise ModelLoadError(
            f"{where} is missing",
            hint="keep the data file beside the model, under the name the model records",
        ) from None
    except OSError as err:
        raise ModelLoadError(f"{where} cannot be read ({_reason(err)})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ModelLoadError(f"{where} is {_kind(info.st_mode)}, not a regular file",
                             hint="the data file must be a regular file beside the model")
    record = FileRecord.of(target, "the model's external data", info)
    if record is not None:
        vet(target, record)
    _note_read(target, "the model's external data", info)
    return info.st_size


def _note_read(path: Path, what: str, info: os.stat_result) -> None:
    """Record a file read in the open read logs, unless it is graphfix's own scratch file."""
    if not owns(path):
        note_read(path, what, info)


def _external_sources(
    path: Path, external: list[onnx.TensorProto]
) -> tuple[list[tuple[onnx.TensorProto, Path, int, int]], int]:
    """Each external tensor's (tensor, data file, offset, length), every location checked
    before any is used, and the bytes of the data files. A tensor without a length takes the
    bytes its type and shape need (as ONNX Runtime reads it); a length that disagrees with them
    is refused, as ONNX Runtime refuses it."""
    folder, allowed = _data_folders(path, external)
    sources: list[tuple[onnx.TensorProto, Path, int, int]] = []
    file_sizes: dict[Path, int] = {}
    for tensor in external:
        location, offset, length = _external_info(path, tensor)
        target = _resolve_location(folder, location, allowed)
        if target not in file_sizes:
            file_sizes[target] = _data_file_size(path, target, location, tensor)
        file_size = file_sizes[target]
        needed = _declared_nbytes(tensor)
        if length is None:
            length = needed if needed is not None else file_size - offset
        if offset > file_size or offset + length > file_size:
            raise ModelLoadError(
                f"{shown(path)}: external data of tensor {tensor.name!r} runs past the end of "
                f"{location!r}",
                hint="the data file is truncated or belongs to another model",
            )
        if needed is not None and length != needed:
            raise ModelLoadError(
                f"{shown(path)}: the external data length of tensor {tensor.name!r} is "
                f"{length} bytes; its type and shape take {needed}",
                hint="the model file is damaged (ONNX Runtime refuses it too)",
            )
        sources.append((tensor, target, offset, length))
    return sources, sum(file_sizes.values())


def load_with_info(source: ModelSource, *, load_external_data: bool = True) -> LoadedModel:
    """Load a model and report where it came from. See :func:`load`."""
    if isinstance(source, onnx.ModelProto):
        _check_text(source, "the model")
        return LoadedModel(source, external_data=bool(external_tensors(source)), owned=False)
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        model = _parse(data, "the given bytes")
        _check_text(model, "the given bytes")
        return LoadedModel(model, size_bytes=len(data))
    if not isinstance(source, (str, os.PathLike)):
        raise ModelLoadError(f"a model is a path, bytes or an onnx.ModelProto; got "
                             f"{type(source).__name__}", hint="give the model's path")
    check_type("load", "load_external_data", load_external_data, bool, "True or False")
    if not os.fspath(source):
        raise ModelLoadError("no model path given (an empty name)", hint="give a model file")
    path = Path(os.fsdecode(source))
    data = _read_model_file(path)
    model = _parse(data, shown(path))
    _check_text(model, shown(path))
    size = len(data)
    del data
    external = external_tensors(model)
    sources, data_bytes = _external_sources(path, external)
    for tensor, target, offset, length in sources:
        _point_at(tensor, str(target), offset, length)
    if external and load_external_data:
        load_external_values(model)
    return LoadedModel(model, path=path, external_data=bool(external),
                       size_bytes=size + data_bytes)


def model_argument(value: object, name: str, function: str) -> onnx.ModelProto:
    """The model a public function was given as ``name``: a ModelProto as it is, a path or
    bytes loaded (weights left in their files); anything else is refused naming the
    argument."""
    if isinstance(value, onnx.ModelProto):
        return value
    if isinstance(value, (str, os.PathLike, bytes, bytearray, memoryview)):
        return load(value, load_external_data=False)
    raise OptionError(f"{function}(): {name} must be an onnx.ModelProto, a path or the bytes "
                      f"of a model, got {type(value).__name__}")


def named_model(value: object, name: str, function: str, fallback: str
                ) -> tuple[onnx.ModelProto, str]:
    """:func:`model_argument`, with the name reports show: a path's file name, else
    ``fallback`` (a model given in memory)."""
    model = model_argument(value, name, function)
    return model, (Path(value).name if isinstance(value, (str, os.PathLike)) else fallback)


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
