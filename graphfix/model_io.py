"""Model I/O: the only module of graphfix that touches files.

- :func:`load` reads a model from a path, bytes or a ModelProto, with its external data resolved
  inside the model's folder (a location that escapes it is refused);
- :func:`save` writes atomically (a temporary file in the target folder, then a rename; nothing
  partial is left behind), with external data beside the model when it is over 2 GB or when asked,
  and ``ir_version`` capped to what the installed ONNX Runtime reads;
- :func:`ort_session` opens an ONNX Runtime session on an in-memory model of any size.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Union

import google.protobuf.message
import onnx
from onnx import external_data_helper

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
    "PROTOBUF_LIMIT",
    "write_text",
    "temporary_folder",
]

logger = logging.getLogger(__name__)

ModelSource = Union[str, os.PathLike, bytes, onnx.ModelProto]

# Protobuf cannot serialize a message of 2 GiB or more; keep a margin for the graph itself.
PROTOBUF_LIMIT = 2**31 - 1
_EXTERNAL_MARGIN = 64 * 2**20
# Tensors at least this large go to the external data file (onnx's own default threshold).
_EXTERNAL_THRESHOLD = 1024
_ALIGNMENT = 4096


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
    external = _external_tensors(model)
    for tensor in external:
        info = external_data_helper.ExternalDataInfo(tensor)
        target = _resolve_location(path.parent, info.location)
        if not target.is_file():
            raise ModelLoadError(
                f"{path}: external data file {info.location!r} of tensor {tensor.name!r} is missing",
                hint="keep the data file beside the model, under the name the model records",
            )
        file_size = target.stat().st_size
        if info.length and info.offset + info.length > file_size:
            raise ModelLoadError(
                f"{path}: external data of tensor {tensor.name!r} runs past the end of "
                f"{info.location!r}",
                hint="the data file is truncated or belongs to another model",
            )
    if external and load_external_data:
        sizes = {}
        for tensor in external:
            location = external_data_helper.ExternalDataInfo(tensor).location
            sizes[location] = _resolve_location(path.parent, location).stat().st_size
        size += sum(sizes.values())
        try:
            external_data_helper.load_external_data_for_model(model, str(path.parent))
        except (OSError, ValueError, onnx.checker.ValidationError) as err:
            raise ModelLoadError(f"{path}: cannot read external data ({err})") from None
    return LoadedModel(model, path=path, external_data=bool(external), size_bytes=size)


def load(source: ModelSource, *, load_external_data: bool = True) -> onnx.ModelProto:
    """Load an ONNX model from a path, bytes, or a ModelProto (returned as is).

    External data is resolved relative to the model's folder and read into memory unless
    ``load_external_data`` is false; a location that escapes the folder, a missing data file or
    one too short for its tensors raises :class:`ModelLoadError`, as does anything that is not an
    ONNX model.
    """
    return load_with_info(source, load_external_data=load_external_data).model


def check_model(model: onnx.ModelProto) -> list[str]:
    """Check a model structurally; returns warnings, raises if it is broken beyond use.

    A model that fails ``onnx.checker`` but that ONNX Runtime loads (contrib ops in
    ``com.microsoft``, say) is usable: the checker's complaint becomes a warning. A model that
    both reject raises :class:`ModelLoadError` with the checker's message.
    """
    try:
        if _size_or_limit(model) < PROTOBUF_LIMIT - _EXTERNAL_MARGIN:
            onnx.checker.check_model(model, full_check=True)
        else:
            with _temporary_model_file(model) as path:
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


def _size_or_limit(model: onnx.ModelProto) -> int:
    try:
        return model.ByteSize()
    except ValueError:  # some protobuf builds refuse to size messages over 2 GB
        return PROTOBUF_LIMIT


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

    ``optimization`` is one of disabled, basic, extended, layout, all. Models under the protobuf
    limit are passed as bytes; larger ones go through a temporary folder with external data.
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
        if model.ByteSize() < PROTOBUF_LIMIT - _EXTERNAL_MARGIN and not _external_tensors(model):
            return ort.InferenceSession(model.SerializeToString(), options, providers=list(providers))
        with _temporary_model_file(model) as path:
            return ort.InferenceSession(str(path), options, providers=list(providers))


@contextlib.contextmanager
def _temporary_model_file(model: onnx.ModelProto) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="graphfix-") as folder:
        path = Path(folder) / "model.onnx"
        _write_model(model, path, data_name="model.onnx.data", external=True)
        yield path


# --------------------------------------------------------------------------------------------
# Saving


def _tensor_bytes(tensor: onnx.TensorProto) -> int:
    if tensor.HasField("raw_data"):
        return len(tensor.raw_data)
    return tensor.ByteSize()


@contextlib.contextmanager
def _weights_moved_out(
    model: onnx.ModelProto, data_file, data_name: str
) -> Iterator[None]:
    """Write large tensors to ``data_file`` and point the model at it, for the duration only.

    The caller's model is restored afterwards: its tensors get their data back, so saving never
    changes the model in memory.
    """
    # (tensor, a copy when its data was in typed fields, offset, length). Raw data is restored
    # by reading the file back, so a model's weights are never held twice at once.
    moved: list[tuple[onnx.TensorProto, onnx.TensorProto | None, int, int]] = []
    try:
        for tensor in iter_tensors(model.graph):
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                raise ModelSaveError(
                    f"tensor {tensor.name!r} still refers to external data that was never loaded",
                    hint="load the model with its external data before saving it elsewhere",
                )
            if _tensor_bytes(tensor) < _EXTERNAL_THRESHOLD:
                continue
            original: onnx.TensorProto | None = None
            if tensor.HasField("raw_data"):
                raw = tensor.raw_data
            else:  # typed fields: keep a copy to restore, write the little-endian bytes
                original = onnx.TensorProto()
                original.CopyFrom(tensor)
                raw = onnx.numpy_helper.to_array(tensor).tobytes()
            offset = data_file.tell()
            padding = (-offset) % _ALIGNMENT
            if padding:
                data_file.write(b"\0" * padding)
                offset += padding
            data_file.write(raw)
            length = len(raw)
            del raw
            moved.append((tensor, original, offset, length))
            for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data",
                          "uint64_data", "string_data"):
                tensor.ClearField(field)
            _point_at(tensor, data_name, offset, length)
        yield
    finally:
        data_file.flush()
        for tensor, original, offset, length in moved:
            if original is not None:
                tensor.CopyFrom(original)
                continue
            del tensor.external_data[:]
            tensor.ClearField("data_location")
            data_file.seek(offset)
            tensor.raw_data = data_file.read(length)
        data_file.seek(0, os.SEEK_END)


def _write_model(
    model: onnx.ModelProto, path: Path, *, data_name: str, external: bool
) -> bool:
    """Write ``model`` to ``path``, and its large weights to ``data_name`` beside it when
    ``external``; returns whether a data file was written (no tensor may be large enough)."""
    with _ir_capped(model):
        wrote_data = False
        if external:
            data_path = path.parent / data_name
            with open(data_path, "w+b") as data_file:
                with _weights_moved_out(model, data_file, data_name):
                    payload = model.SerializeToString()
                wrote_data = data_file.tell() > 0
                data_file.flush()
                os.fsync(data_file.fileno())
            if not wrote_data:
                data_path.unlink()
        else:
            payload = model.SerializeToString()
        with open(path, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        return wrote_data


def _needs_external(model: onnx.ModelProto) -> bool:
    return _size_or_limit(model) >= PROTOBUF_LIMIT - _EXTERNAL_MARGIN


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
    ``protect`` lists paths that must not be overwritten (the input model, say). The model's
    ``ir_version`` is capped in the written file to what the installed ONNX Runtime reads; the
    model in memory is left unchanged. On any failure nothing is left behind.
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
    external = _needs_external(model) if external_data is None else external_data
    if external_data is False and _needs_external(model):
        raise ModelSaveError(
            f"{target}: the model is over 2 GB and cannot be written as a single file",
            hint="save it with external data",
        )
    data_name = f"{target.name}.data"
    tmp_model: Path | None = None
    tmp_data_name = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
        os.close(fd)
        tmp_model = Path(tmp)
        # Weights go under a temporary name too, then are renamed with the model.
        tmp_data_name = f"{tmp_model.name}.data"
        wrote_data = _write_model(model, tmp_model, data_name=tmp_data_name, external=external)
        if wrote_data:
            _rename_data_reference(tmp_model, tmp_data_name, data_name)
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


def _rename_data_reference(model_path: Path, old: str, new: str) -> None:
    """Point every external-data location in the written model file at ``new``."""
    written = onnx.ModelProto()
    written.ParseFromString(model_path.read_bytes())
    for tensor in _external_tensors(written):
        for entry in tensor.external_data:
            if entry.key == "location" and entry.value == old:
                entry.value = new
    with open(model_path, "wb") as f:
        f.write(written.SerializeToString())
        f.flush()
        os.fsync(f.fileno())


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
