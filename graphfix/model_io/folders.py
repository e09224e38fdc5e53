"""Folders graphfix owns for a while: temporary folders, and the staging folder of a write.

Each folder graphfix makes holds a marker file (:data:`MARKER`, whose first word is
``graphfix``) on which its owner holds an exclusive lock (``flock``) for as long as it lives.
The kernel drops the lock when the owner exits, however it exits (SIGKILL included), so a later
run proves a folder abandoned by taking the lock: :func:`sweep` removes a folder only when it
has the marker *and* its lock is free. A folder without the marker (a user's
``graphfix-results-2024-06``, a folder an older graphfix left) is never touched, nor is one whose
owner lives, whatever its pid says: the lock, not the pid, is the proof, so processes in other
containers or pid namespaces that share the folder are told apart. Where the system has no
``flock``, nothing is swept.

The marker is locked before it gets its name (it is written under a temporary name, locked,
then renamed), so no sweep can find the marker of a live folder unlocked.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any
from pathlib import Path

from graphfix.errors import ResourceError, shown
from graphfix.model_io.files import os_failure

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: nothing is swept
    fcntl = None  # type: ignore[assignment]

__all__ = ["MARKER", "TEMPORARY_PREFIX", "STAGING_PREFIX", "temporary_root", "owned_folder",
           "release", "owns", "sweep", "temporary_folder_path", "temporary_folder", "sweep_temporaries",
           "one_step"]

logger = logging.getLogger(__name__)

MARKER = ".graphfix-owner"
_MARKER_TEXT = b"graphfix"
TEMPORARY_PREFIX = "graphfix-"
STAGING_PREFIX = ".graphfix-"
# The longest path graphfix builds inside a temporary folder, beyond the folder's own name
# (an onnxsim attempt's data file: "out5/model.onnx.data", ORT's optimized model's data).
_LONGEST_INSIDE = 64

_HELD: dict[Path, int] = {}  # folder -> the descriptor holding its marker's lock
_HELD_LOCK = threading.Lock()


def _path_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_PATH_MAX")
    except (OSError, ValueError, AttributeError):
        return 4096


def _unusable(folder: Path) -> str | None:
    """Why ``folder`` cannot hold graphfix's temporary folders, or None."""
    try:
        if not folder.is_dir():
            return "no such folder" if not folder.exists() else "not a folder"
    except OSError as err:
        return err.strerror or str(err)
    if not os.access(folder, os.W_OK | os.X_OK):
        return "not writable"
    depth = len(os.fsencode(os.path.abspath(folder)))
    if depth + len(TEMPORARY_PREFIX) + 40 + _LONGEST_INSIDE >= _path_max(folder):
        return (f"too deep: its path has {depth} characters, and the system allows "
                f"{_path_max(folder)} in a path")
    return None


def temporary_root() -> Path:
    """The folder graphfix's temporary folders go in: ``TMPDIR`` when it is set (refused in
    one line when it cannot be used: graphfix does not fall back to another folder the user
    did not choose), else the system's temporary folder."""
    wanted = os.environ.get("TMPDIR")
    if wanted:
        reason = _unusable(Path(wanted))
        if reason is not None:  # the reason first: a path of thousands of characters is cut
            raise ResourceError(f"TMPDIR cannot hold graphfix's temporary files ({reason}): "
                                f"TMPDIR={shown(wanted)}",
                                hint="point TMPDIR at a writable folder with room, or unset it")
        # Absolute and normalized: the onnxsim worker runs in a folder of its own, and the
        # folders made here are told from the files a run reads by their paths.
        return Path(os.path.abspath(wanted))
    return Path(tempfile.gettempdir())


def owned_folder(parent: Path, prefix: str, what: str = "temporary files", *,
                 named: Path | None = None) -> Path:
    """A new folder in ``parent`` named ``prefix`` + random characters, with its marker locked
    by this process until :func:`release`. An error names ``named`` (the file the folder is
    made for) where given, else the folder's pattern."""
    shown_as = named if named is not None else Path(parent) / f"{prefix}XXXXXXXX"
    try:
        folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    except OSError as err:
        raise os_failure(err, shown_as, what) from None
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".lock-")
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.write(fd, _MARKER_TEXT + f" pid {os.getpid()} since {time.time():.0f}\n".encode())
            os.rename(name, folder / MARKER)
        except BaseException:
            os.close(fd)
            raise
    except OSError as err:
        shutil.rmtree(folder, ignore_errors=True)
        raise os_failure(err, shown_as, what) from None
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    with _HELD_LOCK:
        _HELD[folder] = fd
    return folder


@contextlib.contextmanager
def one_step(folder: Path | None = None) -> Iterator[None]:
    """Run the block as one step: a Ctrl-C or SIGTERM that arrives meanwhile takes effect when
    it ends (called from the main thread, whose Python handlers they run: the handlers wait,
    whichever thread of the process the signal reached), so that a write's renames, or a
    folder's removal, are never left half done; with ``folder``, another graphfix process
    doing the same in that folder waits for this one (an advisory lock on the folder), so that
    two writes of one model never pair one's data file with the other's model."""
    deferred: list[int] = []
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError, OSError):
                previous[signum] = signal.signal(signum, lambda n, _: deferred.append(n))
    fd = None
    try:
        if folder is not None and fcntl is not None:
            try:
                fd = os.open(folder, os.O_RDONLY)
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:  # a folder that cannot be locked: written unlocked, as before
                if fd is not None:
                    os.close(fd)
                fd = None
        yield
    finally:
        if fd is not None:
            os.close(fd)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if deferred:
            _deliver(deferred[0], previous.get(deferred[0]))


def _deliver(signum: int, handler: Any) -> None:
    """What the signal ``signum`` would have done under ``handler``."""
    if callable(handler):
        handler(signum, None)
    elif handler != signal.SIG_IGN:  # the default action (SIGTERM ends the process)
        os.kill(os.getpid(), signum)


def release(folder: Path) -> None:
    """Remove a folder made by :func:`owned_folder`, with everything in it, and drop its lock
    (once removed: a sweep cannot take it in between). A signal waits until the folder is gone:
    one that stopped the removal after its marker went would leave a folder no sweep removes."""
    with one_step():
        shutil.rmtree(folder, ignore_errors=True)
    with _HELD_LOCK:
        fd = _HELD.pop(Path(folder), None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def owns(path: str | os.PathLike) -> bool:
    """Whether ``path`` lies in a folder this process made and holds (its own scratch files,
    which no run counts among the files it read)."""
    with _HELD_LOCK:
        if not _HELD:
            return False
        held = list(_HELD)
    absolute = Path(os.path.abspath(path))
    return any(folder in absolute.parents for folder in held)


def _abandoned(folder: Path) -> int | None:
    """A descriptor holding the lock of ``folder``'s marker when the folder is graphfix's and
    its owner is gone; None otherwise (not graphfix's, alive, or cannot tell)."""
    if fcntl is None:
        return None
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(folder / MARKER, flags)
    except OSError:
        return None  # no marker: not graphfix's (or a link, or unreadable)
    try:
        if os.read(fd, len(_MARKER_TEXT)) != _MARKER_TEXT:
            os.close(fd)
            return None
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        os.close(fd)
        if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            logger.debug("cannot judge %s: %s", folder, err)
        return None  # its owner holds the lock: alive
    return fd


def sweep(parent: Path, prefix: str) -> int:
    """Remove the folders of ``parent`` named ``prefix``... that graphfix made and whose owner
    is gone (see the module's docstring); returns how many went."""
    removed = 0
    try:
        entries = [e for e in os.scandir(parent) if e.name.startswith(prefix)]
    except OSError:
        return 0
    uid = os.getuid() if hasattr(os, "getuid") else None
    for entry in entries:
        try:
            if not entry.is_dir(follow_symlinks=False) or (
                    uid is not None and entry.stat(follow_symlinks=False).st_uid != uid):
                continue
        except OSError:
            continue
        folder = Path(entry.path)
        with _HELD_LOCK:
            if folder in _HELD:
                continue  # this process's own
        fd = _abandoned(folder)
        if fd is None:
            continue
        try:
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
            logger.debug("removed %s: graphfix left it and its owner is gone", folder)
        finally:
            os.close(fd)
    return removed


def temporary_folder_path(role: str) -> Path:
    """A new temporary folder for ``role`` in :func:`temporary_root`, named
    ``graphfix-<role>-<pid>-<random>`` for people to read, owned by this process (see the
    module's docstring); the caller gives it back with :func:`release`."""
    return owned_folder(temporary_root(), f"{TEMPORARY_PREFIX}{role}-{os.getpid()}-",
                        "temporary files")


@contextlib.contextmanager
def temporary_folder(role: str = "scratch") -> Iterator[Path]:
    """A temporary folder for tools that write files (ORT's optimized model, onnxsim's child
    process); removed with everything in it when the block ends, on error too."""
    folder = temporary_folder_path(role)
    try:
        yield folder
    finally:
        release(folder)


def sweep_temporaries() -> int:
    """Remove graphfix's temporary folders that their owner abandoned (a run killed before it
    could clean up) from the temporary root; returns how many went."""
    try:
        root = temporary_root()
    except ResourceError:
        return 0
    return sweep(root, TEMPORARY_PREFIX)
