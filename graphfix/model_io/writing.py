"""Writing files atomically: a temporary file in the target folder, then a rename."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import onnx

from graphfix.errors import ModelSaveError
from graphfix.model_io.encoding import PROTOBUF_LIMIT, _write_model
from graphfix.model_io.tensors import _lazy_tensors, weight_bytes

__all__ = ["WrittenModel", "save", "write_text", "temporary_folder"]

logger = logging.getLogger(__name__)

_EXTERNAL_MARGIN = 64 * 2**20


@dataclasses.dataclass
class WrittenModel:
    """Where :func:`save` wrote a model: the file, its external data file (if any), total size."""

    path: Path
    data_path: Path | None
    size_bytes: int


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
