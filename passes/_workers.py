"""What the passes that run part of their work in a worker interpreter share (simplify's
onnxsim, convert-precision's ONNX Runtime): the worker a pass keeps while it is entered, and
the block in which every run's pass uses the caller's worker instead.

A worker here is any object with ``start()`` and ``close()``; its life has an owner: the
caller that gives it (``worker=``, or :func:`worker_block`), or the pass, which starts its own
when entered as a context manager (a pipeline enters every pass, so that the worker imports
while the passes before run) and stops it when left."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from types import TracebackType
from typing import Any, TypeVar

from graphfix.errors import PassError

__all__ = ["KeepsWorker", "worker_block"]

_K = TypeVar("_K", bound="KeepsWorker")
_W = TypeVar("_W")


class KeepsWorker:
    """Mixin (before :class:`~graphfix.registry.Pass`) for a pass with a worker: ``_shared``
    is the caller's, kept across passes and runs; ``_own`` the one the pass starts when
    entered (:meth:`_new_worker`) and stops when left; :attr:`_worker` the one to use."""

    _shared: Any = None
    _own: Any = None

    def _new_worker(self) -> Any:
        """A worker of the pass's own, not started; None where this configuration needs
        none."""
        raise NotImplementedError

    def __enter__(self: _K) -> _K:
        if self._shared is None and self._own is None:
            own = self._new_worker()
            if own is not None:
                own.start()
                self._own = own
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        own, self._own = self._own, None
        if own is not None:
            own.close()

    @property
    def _worker(self) -> Any:
        return self._shared or self._own


@contextlib.contextmanager
def worker_block(runs: ContextVar[_W | None], worker: _W, kind: type, where: str
                 ) -> Iterator[_W]:
    """Within the block, ``runs`` holds ``worker`` (a ``kind``), which the pass of every run
    takes (its ``configured``); blocks nest, the innermost wins. ``where`` names the pass in
    the refusal of anything else."""
    if not isinstance(worker, kind):
        article = "an" if kind.__name__[0] in "AEIOU" else "a"
        raise PassError(f"{where}: shared_worker takes {article} {kind.__name__}, got "
                        f"{worker!r}")
    token = runs.set(worker)
    try:
        yield worker
    finally:
        runs.reset(token)
