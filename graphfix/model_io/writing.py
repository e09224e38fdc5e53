"""Writing files atomically: a temporary file in the target folder, then a rename."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from typing import Union

import onnx

from graphfix.errors import ModelLoadError, ModelSaveError, shown
from graphfix.model_io.encoding import PROTOBUF_LIMIT, write_model
from graphfix.model_io.files import note_committed, open_logs, os_failure
from graphfix.model_io.folders import STAGING_PREFIX, one_step, owned_folder, release, sweep
from graphfix.model_io.references import referrers, refers
from graphfix.model_io.tensors import lazy_tensors, vetted_record, weight_bytes
from graphfix.options import OptionError, check_path, check_type

__all__ = ["WrittenModel", "save", "write_text", "check_outputs", "check_data_file",
           "data_path_of", "output_path", "may_write_data"]

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
        example = {"the configuration": "tuned.json", "the report": "report.json",
                   "the page": "profile.html", "the trace": "trace.json"}.get(what, "out.onnx")
        raise ModelSaveError(f"no path given for {what} (an empty name)",
                             hint=f"give a file path such as {example}")
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
    # Every file the open read logs hold, however the run reached it (real inputs included).
    for log in open_logs():
        for record in log.records.values():
            read.setdefault(record.identity, f"{record.what} {shown(record.path)}")
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
        blocking = next((p for p in (folder, *folder.parents)
                         if os.path.lexists(p) and not p.is_dir()), None)
        if blocking is not None:
            within = "" if blocking == folder else f" in {shown(folder)}"
            raise ModelSaveError(f"{shown(blocking)}: a file, not a folder (for {what}"
                                 f"{within})", hint="give a path in a folder")
        raise ModelSaveError(f"{shown(folder)}: no such folder (for {what})",
                             hint="create it first")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ModelSaveError(f"{shown(folder)}: cannot write {what} in this folder "
                             "(permission denied or a read-only file system)",
                             hint="write it to a folder you can write to")
    _probe(folder, path, what)
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


def _probe(folder: Path, path: Path, what: str) -> None:
    """Make and remove a staging folder in ``folder``: a folder that the permission bits
    call writable may still refuse (a read-only mount seen by root, /proc), and that must be
    said before the work, not after it."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=folder))
    except OSError as err:
        raise os_failure(err, path, what) from None


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


def check_data_file(data: Path, model: Path) -> None:
    """Refuse to write ``data`` as the external data of the model at ``model`` when another
    model beside it refers to the file there now (a copy of the model kept under another name):
    replacing it would change that model too."""
    if not data.exists():
        return
    others = referrers(data, besides=[model])
    if not others.none:
        raise ModelSaveError(
            f"{shown(data)}: graphfix would replace this data file, and {others.describe()}",
            hint="write the model to another path, or move that model and its data away")


def _stale_data(target: Path, data: Path, keep: set[tuple[int, int]]) -> Path | None:
    """The data file an older model at ``target`` kept beside it (``data``, when that model
    names it), which the new model no longer uses; None when there is none, or when it is one
    of the files in ``keep`` (read or written by this run)."""
    try:
        if not data.is_file() or not target.is_file() or _identity(data) in keep:
            return None
    except OSError:
        return None
    return data if refers(target, data) else None


def _remove_stale(stale: Path, target: Path) -> None:
    """Remove ``stale``, the data file of the model ``target`` replaced, unless another model
    beside it still refers to it (then it stays, with a warning)."""
    others = referrers(stale, besides=[target])
    if not others.none:
        logger.warning("%s, the data file of the model %s replaced, stays: %s",
                       shown(stale), shown(target), others.describe())
        return
    with contextlib.suppress(OSError):
        stale.unlink()
        logger.debug("removed %s, the data file of the model %s replaced", stale, target)


def _vetted_changes(sources: Sequence[Path]) -> None:
    """Raise when a data file the model's weights are still read from changed since it was
    loaded: the output would mix its old and new bytes."""
    for source in sources:
        record = vetted_record(source)
        change = record.change() if record is not None else None
        if change is not None:
            raise ModelLoadError(
                f"{shown(source)} (external data of the model) changed while graphfix ran: "
                f"{change}; nothing was written",
                hint="run again once whatever writes it has finished")


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
    one of them, nor a data file the model's weights are read from, nor a file an open
    :func:`~graphfix.model_io.files.read_log` holds (:func:`check_outputs`). ``companions`` are
    text files (a report) written with the model, each made by its function from where the model
    goes and its size: every file is written in a staging folder beside its target first, and
    renamed into place only when all are written and no file read has changed since.

    The data file is a file graphfix names itself, so it takes care of it: it is not written
    over while another model beside it refers to it (a copy of the old model, say), and a data
    file the old model at ``path`` kept beside it is removed when the new model keeps none,
    unless another model beside it refers to it or this run read or wrote it. New files get the
    umask's permissions, a replaced file keeps its own. The model's ``ir_version`` is capped in
    the written file to what the installed ONNX Runtime reads; the model in memory is left
    unchanged. On any failure nothing is left behind.
    """
    check_type("save", "model", model, onnx.ModelProto, "an onnx.ModelProto")
    check_path("save", "path", path)
    if external_data is not None:
        check_type("save", "external_data", external_data, bool, "True, False or None")
    if isinstance(protect, (str, bytes, os.PathLike)) or not isinstance(protect, Iterable):
        raise OptionError(f"save(): protect must be a list of paths, got "
                          f"{type(protect).__name__}")
    for index, item in enumerate(protect):
        check_path("save", f"protect[{index}]", item)
    if companions is not None:
        if not isinstance(companions, Mapping):
            raise OptionError("save(): companions must map paths to functions of the written "
                              f"model, got {type(companions).__name__}")
        for companion, make in companions.items():
            check_path("save", "a companion's path", companion)
            if not callable(make):
                raise OptionError(f"save(): the companion {shown(str(companion))} must be made "
                                  f"by a function of the written model, got "
                                  f"{type(make).__name__}")
    target = output_path(path, "the model")
    folder = target.parent
    data_path = folder / f"{target.name}.data"
    sources = sorted({p for _, p, _, _ in lazy_tensors(model)})
    external = _needs_external(model) if external_data is None else external_data
    if external_data is False and _needs_external(model):
        raise ModelSaveError(
            f"{shown(target)}: the model is over 2 GB and cannot be written as a single file",
            hint="save it with external data",
        )
    outputs = {"the model": target}
    if external:  # a data file is checked only when one will be written (a name of 250 bytes
        # is legal for the model; its data file's name would not be)
        outputs["the model's external data"] = data_path
    for companion in companions or {}:
        outputs[f"the file {Path(companion).name}"] = Path(companion)
    check_outputs(outputs, {
        **{p: "the external data the model's weights are read from" for p in sources},
        **dict.fromkeys(protect, "the input")})
    if external:
        check_data_file(data_path, target)
    keep = {i for i in map(_identity, [Path(p) for p in [*protect, *sources]]) if i}
    keep |= {record.identity for log in open_logs() for record in log.records.values()}
    keep |= {i for i in map(_identity, map(Path, companions or {})) if i}
    stale = _stale_data(target, data_path, keep)
    stages: dict[Path, Path] = {}
    pending: list[tuple[Path, Path]] = []  # (staged, final), renamed in this order
    try:
        written = _write_pending(model, target, external, companions or {}, pending, stages)
        if written.data_path is not None:
            check_data_file(data_path, target)
            stale = None
        for staged, final in pending:
            os.chmod(staged, _mode_for(final))
        # Nothing read may have changed while the run worked: the output would mix both.
        _vetted_changes(sources)
        for log in open_logs():
            log.check_unchanged()
        # The renames are one step: a Ctrl-C between the data file's and the model's would
        # leave the old model beside the new data, and another run writing the same model
        # waits for this one's renames to end.
        with one_step(folder):
            for staged, final in pending:
                os.replace(staged, final)
                note_committed(final)
    except OSError as err:
        raise os_failure(err, target, "the model") from None
    finally:
        for stage in stages.values():
            release(stage)
    if stale is not None:
        _remove_stale(stale, target)
    logger.debug("wrote %s (external data: %s)", target, written.data_path is not None)
    return written


def _stage(target: Path, stages: dict[Path, Path], what: str) -> Path:
    """The staging folder of this write in ``target``'s folder (made on first use, after
    sweeping the staging folders of writes that were killed there); where it cannot be made,
    the error names ``target``, the file the user asked for."""
    folder = target.parent
    if folder not in stages:
        sweep(folder, STAGING_PREFIX)
        stages[folder] = owned_folder(folder, STAGING_PREFIX, what, named=target)
    return stages[folder]


def _write_pending(
    model: onnx.ModelProto, target: Path, external: bool,
    companions: Mapping[str | os.PathLike, Callable[[WrittenModel], str]],
    pending: list[tuple[Path, Path]], stages: dict[Path, Path],
) -> WrittenModel:
    """Write the model, its data file and the companions in staging folders beside their
    targets, each recorded in ``pending`` with its final name."""
    folder, data_name = target.parent, f"{target.name}.data"
    stage = _stage(target, stages, "the model")
    staged_model, staged_data = stage / "model.onnx", stage / "model.onnx.data"
    # The model records the data file's final name.
    wrote_data = write_model(model, staged_model, data_path=staged_data, data_name=data_name,
                              external=external)
    if wrote_data:
        pending.append((staged_data, folder / data_name))
    pending.append((staged_model, target))
    written = WrittenModel(
        target, folder / data_name if wrote_data else None,
        staged_model.stat().st_size + (staged_data.stat().st_size if wrote_data else 0))
    for index, (companion, make) in enumerate(companions.items()):
        staged = _stage(Path(companion), stages, "the output") / f"companion-{index}"
        text = make(written)
        if not isinstance(text, str):
            raise OptionError(f"save(): the companion {shown(str(companion))}'s function "
                              f"returned {type(text).__name__}, not the text to write")
        staged.write_text(text, encoding="utf-8")
        pending.append((staged, Path(companion)))
    return written


def write_text(
    path: str | os.PathLike, text: str, *, protect: Sequence[str | os.PathLike] = ()
) -> None:
    """Write a text file (a report, say) atomically: staged beside it, then renamed.
    ``protect`` are files graphfix read, which it must not be (:func:`check_outputs`)."""
    path = output_path(path, "the file")
    check_outputs({f"the file {shown(path.name)}": path}, protect)
    stages: dict[Path, Path] = {}
    try:
        staged = _stage(path, stages, f"the file {shown(path.name)}") / "text"
        staged.write_text(text, encoding="utf-8")
        os.chmod(staged, _mode_for(path))
        with one_step(path.parent):
            os.replace(staged, path)
            note_committed(path)
    except OSError as err:
        raise os_failure(err, path, f"the file {shown(path.name)}") from None
    finally:
        for stage in stages.values():
            release(stage)
