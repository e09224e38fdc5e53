"""``python -m graphfix`` and the ``graphfix`` command: the command line, safe from its first
instant.

Before the heavy imports (onnx, ONNX Runtime: a second or more) a Ctrl-C, SIGTERM or SIGHUP
ends the process with one line and the signal's exit code (128 + its number); nothing exists
yet that would need cleaning up. Standard streams the caller closed (``2>&-``) are opened on
the null device, so that no file graphfix opens takes their place and receives what ONNX
Runtime or a child process prints.
"""

from __future__ import annotations

import os
import signal
import sys

from graphfix import startup

__all__ = ["main"]

_WORDS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}
if hasattr(signal, "SIGHUP"):
    _WORDS[signal.SIGHUP] = "hung up"


def _early_exit(signum: int, frame: object) -> None:
    line = _WORDS.get(signum, "stopped")
    model_io = sys.modules.get("graphfix.model_io")  # past the command's own handlers:
    written = model_io.committed_since(0) if model_io is not None else []  # its files are whole
    if written:
        line += f" after writing {', '.join(str(p) for p in written[:4])} (complete, kept)"
    try:
        os.write(2, f"{line}\n".encode())
    except OSError:
        pass
    os._exit(128 + signum)


def _guard_streams() -> None:
    """Open the null device on each of fds 0, 1 and 2 that is closed, and give Python a
    stream for each it found closed at start-up."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:
            startup.CLOSED.add(name)
            setattr(sys, name, open(os.devnull, mode, encoding="utf-8"))


def main() -> None:
    """The ``graphfix`` command."""
    for signum in _WORDS:
        signal.signal(signum, _early_exit)
    _guard_streams()
    from graphfix.cli import main as run  # the heavy imports

    run()


if __name__ == "__main__":
    main()
