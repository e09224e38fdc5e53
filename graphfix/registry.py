"""The pass contract and the registry of passes.

A pass is a class registered under a kebab-case name::

    @register("eliminate-transposes")
    class EliminateTransposes(Pass):
        \"\"\"Push NHWC transposes through layout-agnostic ops until they cancel.\"\"\"

        def __init__(self, *, max_iterations: int = 8) -> None: ...
        def call(self, model: onnx.ModelProto) -> PassResult: ...

Contract:
- options are keyword-only and validated in ``__init__`` (raise :class:`PassError`);
- ``call`` may rewrite ``model`` in place and returns ``PassResult(model, modified, stats)``;
  ``modified`` is true only when the graph really changed, so a second run reports ``False``;
- graph inputs and outputs keep their names, order, dtypes and shapes unless changing them is the
  pass's documented purpose; the graph is valid (toposorted) after the pass;
- the first line of the class docstring is the summary that ``graphfix passes`` shows.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import onnx

from graphfix.errors import PassError, UnknownPassError

__all__ = ["Pass", "PassResult", "register", "get", "names", "summary"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class PassResult:
    """What a pass returns. ``stats`` are integers worth reporting; ``warnings`` reach the report."""

    model: onnx.ModelProto
    modified: bool
    stats: dict[str, int] = dataclasses.field(default_factory=dict)
    warnings: list[str] = dataclasses.field(default_factory=list)
    # Set when the pass gave up on this model without changing it; the pipeline goes on.
    skipped: str | None = None


class Pass:
    """Base class of every pass. Subclasses implement :meth:`call`."""

    name: ClassVar[str] = ""

    def call(self, model: onnx.ModelProto) -> PassResult:
        raise NotImplementedError

    def prepare(self) -> None:
        """Called once when a pipeline holding this pass starts, before any pass runs: a pass
        that needs a slow helper (a worker process) starts it here, so that it gets ready while
        the passes before it run. Nothing by default."""

    def follow_layout(self, moved: Any) -> None:
        """Called by the pipeline before this pass runs when an earlier pass of the run changed
        the model's signature on request (``moved``: a :mod:`graphfix.layout` layout, from the
        model the run started with to the one this pass gets). A pass whose options name input
        dimensions moves them here. Nothing by default."""

    def options(self) -> dict[str, Any]:
        """The options this instance runs with, for the report (public attributes by default)."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def __call__(self, model: onnx.ModelProto) -> PassResult:
        result = self.call(model)
        if not isinstance(result, PassResult):
            raise PassError(f"pass {self.name!r} returned {type(result).__name__}, not PassResult")
        if result.skipped and result.modified:
            raise PassError(f"pass {self.name!r} reported a skip and a change at once")
        return result

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options().items())
        return f"{type(self).__name__}({opts})"


_PassT = TypeVar("_PassT", bound=type[Pass])
_REGISTRY: dict[str, type[Pass]] = {}


def register(name: str) -> Callable[[_PassT], _PassT]:
    """Class decorator: register a pass under ``name`` (kebab-case, unique)."""
    if not name or name != name.lower() or " " in name or "_" in name:
        raise ValueError(f"pass names are kebab-case, got {name!r}")

    def decorate(cls: _PassT) -> _PassT:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"pass {name!r} is already registered by {_REGISTRY[name].__qualname__}")
        if not (cls.__doc__ or "").strip():
            raise ValueError(f"pass {name!r} needs a docstring: its first line is the summary")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return decorate


def _ensure_loaded() -> None:
    # The pass library registers itself on import; import it here so that get() and names()
    # work no matter which module the caller imported first.
    import graphfix.passes  # noqa: F401


def get(name: str) -> type[Pass]:
    """The pass class registered under ``name``; :class:`UnknownPassError` lists the known ones."""
    _ensure_loaded()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise UnknownPassError(
            f"unknown pass {name!r}", hint=f"known passes: {known} (see `graphfix passes`)"
        ) from None


def names() -> list[str]:
    """Registered pass names, in registration order."""
    _ensure_loaded()
    return list(_REGISTRY)


def summary(name: str) -> str:
    """The one-line summary of a pass: the first line of its docstring."""
    return (get(name).__doc__ or "").strip().splitlines()[0]
