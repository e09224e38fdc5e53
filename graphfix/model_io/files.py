"""The files a run reads, and what the system says when it refuses a write.

- :class:`ReadLog`: every file a run reads (the model, its data files, real inputs), recorded by
  identity (device and inode, links resolved) with its size and modification time as read.
  While a log is open (:func:`read_log`), every reader of graphfix notes what it reads
  (:func:`note_read`), however it reached the file; :mod:`.writing` refuses an output that is
  one of them, and refuses to commit when one changed since it was read.
- :func:`os_failure`: an ``OSError`` met while writing, as one line that names what ran out: the
  folder with no room left, the file-size limit (``ulimit -f``), a path too long for the system.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

from graphfix.errors import ModelLoadError, ModelSaveError, ResourceError, shown

__all__ = ["FileRecord", "ReadLog", "read_log", "note_read", "open_logs", "os_failure",
           "os_failure_in", "file_size_limit", "note_committed", "committed_since",
           "committed_mark"]


@dataclasses.dataclass(frozen=True)
class FileRecord:
    """A file as graphfix read it: where, what it is to the run, and its identity and state."""

    path: Path
    what: str
    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: str | os.PathLike, what: str,
           info: os.stat_result | None = None) -> FileRecord | None:
        """The record of the file at ``path`` now (``info``: its stat, when already taken);
        None when there is no such file."""
        try:
            info = info or os.stat(path)
        except (OSError, ValueError):
            return None
        return cls(Path(os.path.abspath(path)), what, info.st_dev, info.st_ino, info.st_size,
                   info.st_mtime_ns)

    @property
    def identity(self) -> tuple[int, int]:
        return self.device, self.inode

    def change(self) -> str | None:
        """How the file at :attr:`path` differs from what was read (replaced, resized,
        rewritten), or None when it looks the same."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return "it was removed"
        except OSError as err:
            return f"it cannot be looked at any more ({err.strerror or err})"
        if (info.st_dev, info.st_ino) != self.identity:
            return "it was replaced by another file"
        if info.st_size != self.size:
            return f"its size went from {self.size} to {info.st_size} bytes"
        if info.st_mtime_ns != self.mtime_ns:
            return "it was rewritten"
        return None


class ReadLog:
    """The files one run read, by identity (the first record of each is kept)."""

    def __init__(self) -> None:
        self.records: dict[tuple[int, int], FileRecord] = {}

    def add(self, record: FileRecord) -> None:
        self.records.setdefault(record.identity, record)

    def check_unchanged(self) -> None:
        """Raise :class:`ModelLoadError` when a file read has changed since: the output would
        mix what was read before with what is there now."""
        for record in self.records.values():
            change = record.change()
            if change is not None:
                raise ModelLoadError(
                    f"{shown(record.path)} ({record.what}) changed while graphfix ran: {change}; "
                    "nothing was written",
                    hint="run again once whatever writes it has finished")


_OPEN: list[ReadLog] = []
_LOCK = threading.Lock()


@contextlib.contextmanager
def read_log() -> Iterator[ReadLog]:
    """A log of every file graphfix reads until the block ends (threads included)."""
    log = ReadLog()
    with _LOCK:
        _OPEN.append(log)
    try:
        yield log
    finally:
        with _LOCK:
            _OPEN.remove(log)


def note_read(path: str | os.PathLike, what: str, info: os.stat_result | None = None) -> None:
    """Record, in every open :func:`read_log`, that ``path`` (``what`` it is) was read."""
    if not _OPEN:
        return
    record = FileRecord.of(path, what, info)
    if record is None:
        return
    with _LOCK:
        for log in _OPEN:
            log.add(record)


_COMMITTED: list[Path] = []  # every file this process's writes committed, in order


# No lock around it: a signal handler reads it, in the thread that may be appending (a list's
# append and slice are atomic in CPython).
def note_committed(path: Path) -> None:
    """Record that ``path`` was written in full (its rename done): a run a signal ends after
    that says so, rather than leave the user to think nothing was written."""
    _COMMITTED.append(path)


def committed_since(mark: int) -> list[Path]:
    """The files committed since :func:`committed_mark` returned ``mark``."""
    return list(dict.fromkeys(_COMMITTED[mark:]))


def committed_mark() -> int:
    return len(_COMMITTED)


def open_logs() -> list[ReadLog]:
    """The read logs open now."""
    with _LOCK:
        return list(_OPEN)


def file_size_limit() -> int | None:
    """The largest file this process may write (``ulimit -f``), or None when unlimited."""
    try:
        import resource
    except ImportError:  # not on this system
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else soft


_REPORTED_ERRNO = re.compile(r"\[Errno (\d+)\]")
_RESOURCE_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.ENAMETOOLONG,
                    getattr(errno, "EDQUOT", errno.ENOSPC)}


def os_failure_in(text: str, path: str | os.PathLike,
                  what: str) -> ResourceError | None:
    """The :func:`os_failure` an error reported as text (by a worker process: ``OSError:
    [Errno 28] No space left on device``) stands for, when it is one of the system running out
    (no room, the file-size limit, a path too long); None otherwise."""
    found = _REPORTED_ERRNO.search(text)
    if found is None or int(found.group(1)) not in _RESOURCE_ERRNOS:
        return None
    code = int(found.group(1))
    failure = os_failure(OSError(code, os.strerror(code)), path, what)
    return failure if isinstance(failure, ResourceError) else None


_ROOM = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


def os_failure(err: OSError, path: str | os.PathLike, what: str) -> ResourceError | ModelSaveError:
    """``err``, met while writing ``what`` at ``path``, as one line that names the cause: the
    folder without room, the file-size limit, a path too long, a read-only folder."""
    path = Path(path)
    folder = path.parent
    # In a temporary folder of graphfix's, the folder the user chose is TMPDIR, its parent.
    for parent in [folder, *folder.parents][:3]:
        if what.startswith("temporary") and parent.name.startswith("graphfix-"):
            folder = parent.parent
            break
    reason = err.strerror or str(err)
    if err.errno in _ROOM:
        return ResourceError(
            f"{shown(folder)}: no room left to write {what} ({reason})",
            hint="free some space there" + (
                ", or point TMPDIR at a folder with room" if what.startswith("temporary") else ""))
    if err.errno == errno.EFBIG:
        limit = file_size_limit()
        shown_limit = f"{limit} bytes" if limit is not None else "the system's"
        return ResourceError(
            f"{shown(path)}: {what} would pass the file-size limit (ulimit -f: {shown_limit})",
            hint="raise the limit (ulimit -f unlimited) or write smaller files")
    if err.errno == errno.ENAMETOOLONG:
        return ResourceError(
            f"{shown(folder)}: too deep to write {what} ({len(os.fsdecode(folder))} characters; "
            f"{reason})",
            hint="use a shorter folder" + (" for TMPDIR" if what.startswith("temporary") else ""))
    if err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return ResourceError(f"{shown(folder)}: cannot write {what} there ({reason})",
                             hint="write it to a folder you can write to")
    return ModelSaveError(f"{shown(path)}: cannot write {what} ({reason})",
                          hint="check that the folder is writable and the disk has room")
