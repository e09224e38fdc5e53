"""Writing files atomically: a temporary file in the target folder, then a rename."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from typing import Union

import onnx

from graphfix.errors import ModelSaveError, shown
from graphfix.model_io.encoding import PROTOBUF_LIMIT, _write_model
from graphfix.model_io.tensors import _lazy_tensors, weight_bytes

__all__ = ["WrittenModel", "save", "write_text", "temporary_folder", "temporary_folder_path",
           "sweep_temporaries", "check_outputs", "data_path_of", "output_path",
           "may_write_data"]

logger = logging.getLogger(__name__)

_EXTERNAL_MARGIN = 64 * 2**20


@dataclasses.dataclass
class WrittenModel:
    """Where :func:`save` wrote a model: the file, its external data file (if any), total size."""

    path: Path
    data_path: Path | None
    size_bytes: int


# A temporary file in the target folder: short, whatever the target's name (a 250-byte name
# plus a prefix and a suffix would pass NAME_MAX).
_TEMPORARY_FILE = {"prefix": ".graphfix-", "suffix": ".tmp"}


def _needs_external(model: onnx.ModelProto) -> bool:
    return weight_bytes(model) >= PROTOBUF_LIMIT - _EXTERNAL_MARGIN


def may_write_data(model: onnx.ModelProto, external_data: bool | None) -> bool:
    """Whether :func:`save` may write a data file for ``model`` once rewritten: always when
    ``external_data`` is true, never when false, else only for a model whose weights, grown as
    much as the passes allow by default (1.5 times), would reach the 2 GB limit."""
    if external_data is not None:
        return external_data
    return weight_bytes(model) * 1.5 >= PROTOBUF_LIMIT - _EXTERNAL_MARGIN


def output_path(raw: str | os.PathLike, what: str = "the model") -> Path:
    """``raw`` as the path of a file to write ``what`` to, refused when it names no file: an
    empty path, ``.``/``..``, or a trailing slash (a folder, which pathlib would drop)."""
    text = os.fspath(raw)
    text = os.fsdecode(text) if isinstance(text, bytes) else text
    if not text:
        raise ModelSaveError(f"no path given for {what} (an empty name)",
                             hint="give a file path such as out.onnx")
    separators = os.sep + (os.altsep or "")
    if text[-1] in separators or os.path.basename(text) in (".", ".."):
        folder = text.rstrip(separators) or text
        raise ModelSaveError(
            f"{shown(text)}: names a folder; graphfix writes {what} as a file",
            hint=f"give a file path, such as {shown(os.path.join(folder, 'model.onnx'))}")
    return Path(text)


def data_path_of(path: str | os.PathLike) -> Path:
    """Where :func:`save` puts the external data of a model written to ``path``."""
    path = output_path(path)
    return path.with_name(f"{path.name}.data")


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file ``path`` names, links followed; None if there is none."""
    try:
        info = path.stat()
    except (OSError, ValueError):
        return None
    return info.st_dev, info.st_ino


Reads = Union[Sequence[Union[str, os.PathLike]], Mapping[Union[str, os.PathLike], str]]


def check_outputs(outputs: Mapping[str, str | os.PathLike], reads: Reads) -> None:
    """Refuse, before anything is written, an output that is not a regular file, lies in no
    folder, names another output, or is one of the files graphfix reads (the same file by
    device and inode, whatever links lead to it). ``outputs`` maps what each output is
    ("the optimized model", "the report") to its path; ``reads`` lists the files read, or maps
    each to what it is ("the input", the default)."""
    described = reads if isinstance(reads, Mapping) else dict.fromkeys(reads, "the input")
    read: dict[tuple[int, int], str] = {}
    for path, what_it_is in described.items():
        identity = _identity(Path(path))
        if identity is not None:
            read.setdefault(identity, f"{what_it_is} {shown(Path(path))}")
    seen: dict[Path, str] = {}
    for what, raw in outputs.items():
        path = output_path(raw, what)
        try:
            _check_output(path, what, read)
            key = path.resolve()
        except OSError as err:  # a name or path too long, a link loop on the way
            raise ModelSaveError(f"{shown(path)}: cannot write {what} "
                                 f"({err.strerror or err})") from None
        except RuntimeError:  # a link loop (pathlib's resolve on Python 3.11)
            raise ModelSaveError(f"{shown(path)}: cannot write {what} (a loop of symbolic "
                                 "links)") from None
        if key in seen:
            raise ModelSaveError(f"{shown(path)}: {seen[key]} and {what} would be the same "
                                 "file", hint="give each output its own path")
        seen[key] = what


def _check_output(path: Path, what: str, read: Mapping[tuple[int, int], str]) -> None:
    """Refuse ``path`` as the output ``what`` (see :func:`check_outputs`); OSError when the
    path cannot even be looked at."""
    folder = path.parent
    if not folder.is_dir():
        if _link_loop(folder):
            raise ModelSaveError(f"{shown(folder)}: a loop of symbolic links (for {what})",
                                 hint="point the link at a folder")
        raise ModelSaveError(f"{shown(folder)}: no such folder (for {what})",
                             hint="create it first")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ModelSaveError(f"{shown(folder)}: cannot write {what} in this folder "
                             "(permission denied or a read-only file system)",
                             hint="write it to a folder you can write to")
    try:
        info = path.stat()
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise ModelSaveError(f"{shown(path)}: is {kind}; graphfix writes {what} as a regular "
                             "file", hint="give a file path")
    identity = _identity(path)
    if identity in read:
        raise ModelSaveError(
            f"{shown(path)}: refusing to overwrite {read[identity]} with {what}",
            hint="write it to another path",
        )


def _link_loop(path: Path) -> bool:
    try:
        os.stat(path)
    except OSError as err:
        return err.errno == errno.ELOOP
    return False


def _mode_for(target: Path) -> int:
    """The permissions a new file gets from the umask, or those of the file it replaces."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def _stale_data(target: Path, data: Path, reads: set[tuple[int, int]]) -> Path | None:
    """The data file an older model at ``target`` kept beside it, when the new one keeps none:
    ``data`` when that model names it as its external data (and nothing graphfix reads is it)."""
    try:
        if not data.is_file() or not target.is_file() or _identity(data) in reads:
            return None
        if target.stat().st_size > 64 * 2**20:
            return None  # a model with its weights inside; its data file is not ours to judge
        old = onnx.load(str(target), load_external_data=False)
    except Exception:  # noqa: BLE001 - not a model: leave the file alone
        return None
    from graphfix.model_io.tensors import iter_tensors

    for tensor in iter_tensors(old.graph):
        for entry in tensor.external_data:
            if entry.key == "location" and entry.value == data.name:
                return data
    return None


def save(
    model: onnx.ModelProto,
    path: str | os.PathLike,
    *,
    external_data: bool | None = None,
    protect: Sequence[str | os.PathLike] = (),
    companions: Mapping[str | os.PathLike, Callable[[WrittenModel], str]] | None = None,
) -> WrittenModel:
    """Write ``model`` to ``path`` atomically; returns where it went and how large it is.

    ``external_data``: None writes weights beside the model (``<name>.data``) only when the model
    is over the 2 GB protobuf limit; True always; False never (a model too large then raises).
    Weights that stay in their source files (see :func:`load`) are copied from them in chunks.
    ``protect`` lists files graphfix read (the input model, its data files): no output may be
    one of them (:func:`check_outputs`), nor may it be a data file the model's weights are read
    from. ``companions`` are text files (a report) written with the model, each made by its
    function from where the model goes and its size: every file is written under a temporary
    name first and renamed only when all are written. A data file an
    older model at ``path`` kept beside it goes when the new model keeps none. New files get the
    umask's permissions, a replaced file keeps its own. The model's ``ir_version`` is capped in
    the written file to what the installed ONNX Runtime reads; the model in memory is left
    unchanged. On any failure nothing is left behind.
    """
    target = output_path(path, "the model")
    folder = target.parent
    data_name = f"{target.name}.data"
    sources = [p for _, p, _, _ in _lazy_tensors(model)]
    external = _needs_external(model) if external_data is None else external_data
    if external_data is False and _needs_external(model):
        raise ModelSaveError(
            f"{shown(target)}: the model is over 2 GB and cannot be written as a single file",
            hint="save it with external data",
        )
    outputs = {"the model": target}
    if external:  # a data file is checked only when one will be written (a name of 250 bytes
        # is legal for the model; its data file's name would not be)
        outputs["the model's external data"] = folder / data_name
    for companion in companions or {}:
        outputs[f"the file {Path(companion).name}"] = Path(companion)
    check_outputs(outputs, {
        **{p: "the external data the model's weights are read from" for p in sources},
        **dict.fromkeys(protect, "the input")})
    read_ids = {i for i in map(_identity, [Path(p) for p in [*protect, *sources]]) if i}
    stale = None if external else _stale_data(target, folder / data_name, read_ids)
    pending: list[tuple[Path, Path]] = []  # (temporary, final), renamed in this order
    try:
        written = _write_pending(model, target, external, companions or {}, pending)
        for temporary, final in pending:
            os.chmod(temporary, _mode_for(final))
        for temporary, final in pending:
            os.replace(temporary, final)
    except OSError as err:
        _remove_quietly([t for t, _ in pending])
        raise ModelSaveError(
            f"{shown(target)}: cannot write ({err.strerror or err})",
            hint="check that the folder is writable and the disk has room",
        ) from None
    except BaseException:
        _remove_quietly([t for t, _ in pending])
        raise
    if stale is not None:
        with contextlib.suppress(OSError):
            stale.unlink()
            logger.debug("removed %s, the data file of the model %s replaced", stale, target)
    logger.debug("wrote %s (external data: %s)", target, written.data_path is not None)
    return written


def _write_pending(
    model: onnx.ModelProto, target: Path, external: bool,
    companions: Mapping[str | os.PathLike, Callable[[WrittenModel], str]],
    pending: list[tuple[Path, Path]],
) -> WrittenModel:
    """Write the model, its data file and the companions under temporary names in the target
    folder, each recorded in ``pending`` with its final name as soon as it exists."""
    folder, data_name = target.parent, f"{target.name}.data"
    fd, tmp = tempfile.mkstemp(dir=folder, **_TEMPORARY_FILE)
    os.close(fd)
    tmp_model = Path(tmp)
    # Weights go under a temporary name too, then are renamed with the model; the model
    # records their final name.
    tmp_data = folder / f"{tmp_model.name}.data"
    pending += [(tmp_model, target), (tmp_data, folder / data_name)]
    wrote_data = _write_model(model, tmp_model, data_path=tmp_data, data_name=data_name,
                              external=external)
    pending.pop()
    if wrote_data:
        pending.insert(0, (tmp_data, folder / data_name))
    written = WrittenModel(
        target, folder / data_name if wrote_data else None,
        tmp_model.stat().st_size + (tmp_data.stat().st_size if wrote_data else 0))
    for companion, make in companions.items():
        pending.append((_write_temporary_text(Path(companion), make(written)),
                        Path(companion)))
    return written


def _remove_quietly(paths: Sequence[Path]) -> None:
    for leftover in paths:
        with contextlib.suppress(OSError):
            leftover.unlink()


def _write_temporary_text(path: Path, text: str) -> Path:
    fd, name = tempfile.mkstemp(dir=path.parent, **_TEMPORARY_FILE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except BaseException:
        _remove_quietly([Path(name)])
        raise
    return Path(name)


def write_text(
    path: str | os.PathLike, text: str, *, protect: Sequence[str | os.PathLike] = ()
) -> None:
    """Write a text file (a report, say) atomically: a temporary file beside it, then a rename.
    ``protect`` are files graphfix read, which it must not be (:func:`check_outputs`)."""
    path = output_path(path, "the file")
    check_outputs({f"the file {shown(path.name)}": path}, protect)
    tmp: Path | None = None
    try:
        tmp = _write_temporary_text(path, text)
        os.chmod(tmp, _mode_for(path))
        os.replace(tmp, path)
    except OSError as err:
        _remove_quietly([tmp] if tmp else [])
        raise ModelSaveError(f"{shown(path)}: cannot write ({err.strerror or err})") from None


_TEMPORARY_PREFIX = "graphfix-"


def temporary_folder_path(role: str) -> Path:
    """A new temporary folder for ``role``, named after this process
    (``graphfix-<role>-<pid>-<random>``) so that :func:`sweep_temporaries` can tell when its
    owner is gone; the caller removes it."""
    return Path(tempfile.mkdtemp(prefix=f"{_TEMPORARY_PREFIX}{role}-{os.getpid()}-"))


@contextlib.contextmanager
def temporary_folder(role: str = "scratch") -> Iterator[Path]:
    """A temporary folder for tools that write files (ORT's optimized model, onnxsim's child
    process); removed with everything in it when the block ends, on error too."""
    folder = temporary_folder_path(role)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, owned by someone else
    return True


def sweep_temporaries() -> int:
    """Remove graphfix's temporary folders whose owner process is gone (a run killed before
    it could clean up); returns how many went. Folders of live processes, of other users and
    of other tools are left alone."""
    removed = 0
    root = Path(tempfile.gettempdir())
    try:
        entries = list(root.iterdir())
    except OSError:
        return 0
    for entry in entries:
        parts = entry.name[len(_TEMPORARY_PREFIX):].split("-") if entry.name.startswith(
            _TEMPORARY_PREFIX) else []
        if len(parts) < 3 or not parts[1].isdigit():
            continue
        try:
            if not entry.is_dir() or entry.is_symlink() or entry.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        if not _alive(int(parts[1])):
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed
