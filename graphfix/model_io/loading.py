"""Reading a model: from a path, bytes or a ModelProto, external data checked, and its checks."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Union

import google.protobuf.message
import onnx

from graphfix.errors import ModelLoadError, first_line
from graphfix.model_io.sessions import _temporary_model_file, ort_session
from graphfix.model_io.tensors import (
    _VETTED,
    load_external_values,
    _external_tensors,
    _inline_bytes,
    _lazy_tensors,
    _point_at,
)

__all__ = ["ModelSource", "LoadedModel", "load", "load_with_info", "check_model",
           "checker_problem"]

ModelSource = Union[str, os.PathLike, bytes, onnx.ModelProto]

# Above this many bytes of weights in memory, check_model checks a weightless copy on disk.
_CHECK_INLINE_BYTES = 8 * 2**20


@dataclasses.dataclass
class LoadedModel:
    """A model and where it came from: its path (if any) and whether its weights were external."""

    model: onnx.ModelProto
    path: Path | None = None
    external_data: bool = False
    size_bytes: int = 0
    # True when graphfix made this ModelProto (from a path or bytes), so it may rewrite it in place.
    owned: bool = True


def _resolve_location(base_dir: Path, location: str) -> Path:
    """The file an external-data location names, refusing anything outside ``base_dir``."""
    if not location or os.path.isabs(location) or Path(location).drive:
        raise ModelLoadError(
            f"external data location {location!r} is not a relative path",
            hint="external data must live in the model's folder",
        )
    try:
        base = base_dir.resolve()
        target = (base / location).resolve()
    except (OSError, ValueError) as err:
        raise ModelLoadError(f"external data location {location[:80]!r} cannot be used "
                             f"({_reason(err)})", hint="the model file may be damaged") from None
    if target != base and base not in target.parents:
        raise ModelLoadError(
            f"external data location {location!r} escapes the model's folder",
            hint="move the data file next to the model and fix its location",
        )
    return target


def _reason(err: BaseException) -> str:
    return (err.strerror if isinstance(err, OSError) and err.strerror else str(err)) or (
        type(err).__name__)


def _external_info(path: Path, tensor: onnx.TensorProto) -> tuple[str, int, int | None]:
    """(location, offset, length or None) of an external tensor, each field checked."""
    fields = {entry.key: entry.value for entry in tensor.external_data}
    location = fields.get("location", "")
    if "\0" in location:
        raise ModelLoadError(f"{path}: the external data location of tensor {tensor.name!r} "
                             "holds a NUL byte", hint="the model file is damaged")
    numbers: dict[str, int] = {}
    for key in ("offset", "length"):
        if key not in fields:
            continue
        try:
            numbers[key] = int(fields[key])
        except ValueError:
            raise ModelLoadError(
                f"{path}: the external data {key} of tensor {tensor.name!r} is not a number "
                f"({fields[key][:40]!r})", hint="the model file is damaged") from None
        if numbers[key] < 0:
            raise ModelLoadError(
                f"{path}: the external data {key} of tensor {tensor.name!r} is negative "
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
    try:
        if not path.exists():
            raise ModelLoadError(f"{path}: no such file", hint="check the path")
        if path.is_dir():
            raise ModelLoadError(f"{path}: is a directory, not a model file")
        data = path.read_bytes()
    except (OSError, ValueError) as err:
        raise ModelLoadError(f"{path}: cannot read ({_reason(err)})") from None
    model = _parse(data, str(path))
    size = len(data)
    del data
    external = _external_tensors(model)
    # tensor -> (data file, offset, length), every location checked before any is used.
    sources: list[tuple[onnx.TensorProto, Path, int, int]] = []
    file_sizes: dict[Path, int] = {}
    for tensor in external:
        location, offset, length = _external_info(path, tensor)
        target = _resolve_location(path.parent, location)
        try:
            if not target.is_file():
                raise ModelLoadError(
                    f"{path}: external data file {location!r} of tensor {tensor.name!r} is "
                    "missing",
                    hint="keep the data file beside the model, under the name the model records",
                )
            file_size = file_sizes.setdefault(target, target.stat().st_size)
        except OSError as err:
            raise ModelLoadError(
                f"{path}: external data file {location[:80]!r} of tensor {tensor.name!r} cannot be "
                f"read ({_reason(err)})") from None
        length = file_size - offset if length is None else length
        if offset > file_size or offset + length > file_size:
            raise ModelLoadError(
                f"{path}: external data of tensor {tensor.name!r} runs past the end of "
                f"{location!r}",
                hint="the data file is truncated or belongs to another model",
            )
        sources.append((tensor, target, offset, length))
    size += sum(file_sizes.values())
    for tensor, target, offset, length in sources:
        _VETTED.add(str(target))
        _point_at(tensor, str(target), offset, length)
    if external and load_external_data:
        load_external_values(model)
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


def checker_problem(model: onnx.ModelProto, *, full_check: bool = True) -> str | None:
    """What ``onnx.checker`` finds wrong with ``model`` (one line), or None. The weights are not
    read: a model holding little in memory is checked as it is; any other is written to a
    temporary file where every large tensor is a hole of its size in a sparse data file, and
    checked from there (from a file the checker reads no external data), so nothing large is
    copied, serialized or read."""
    try:
        if not _lazy_tensors(model) and _inline_bytes(model) < _CHECK_INLINE_BYTES:
            onnx.checker.check_model(model, full_check=full_check)
        else:
            with _temporary_model_file(model, lazy="hole") as path:
                onnx.checker.check_model(str(path), full_check=full_check)
    except (onnx.checker.ValidationError,
            onnx.onnx_cpp2py_export.shape_inference.InferenceError) as err:
        return " ".join(first_line(err, limit=2000).split("==> Context")[0].split())
    return None


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
    checker_message = checker_problem(model)
    if checker_message is None:
        return []
    try:
        ort_session(model, optimization="disabled")
    except Exception as err:  # noqa: BLE001 - any ORT failure means the model is unusable
        ort_message = first_line(err)
        raise ModelLoadError(
            f"invalid model: {checker_message}",
            hint=f"ONNX Runtime cannot load it either: {ort_message}",
        ) from None
    return [f"onnx.checker rejects the model ({checker_message}); ONNX Runtime loads it"]
