"""The pass contract and the registry of passes.

A pass is a class registered under a kebab-case name::

    @register("eliminate-transposes")
    class EliminateTransposes(Pass):
        \"\"\"Cancel, compose, fold and push Transposes through layout-agnostic ops (NHWC clean-up).\"\"\"

        def __init__(self, *, keep_reduction_order: bool = False) -> None: ...
        def call(self, model: onnx.ModelProto) -> PassResult: ...

Contract:
- options are keyword-only and checked in ``__init__`` (raise :class:`PassError`);
  :meth:`Pass.configured` builds the pass from a run's :class:`~graphfix.options.RunOptions`,
  taking the fields that concern it;
- ``call`` may rewrite ``model`` in place and returns ``PassResult(model, modified, stats)``;
  ``modified`` is true only when the graph really changed, so a second run reports ``False``;
- graph inputs and outputs keep their names, order, dtypes and shapes unless changing them is the
  pass's documented purpose (``may_change_signature``); the graph is valid (toposorted) after
  the pass. ``__call__`` checks the names, their order and the element types of every input
  (those with a default value too: a caller may feed them) and output, and takes back a
  result that changed them, with the reason as the pass's skip;
- a pass never makes the model bigger (nodes of every graph and local function) unless that is
  its documented purpose (``may_grow``): ``__call__`` takes back a result that grows, with the
  reason as the pass's skip (a pass that rewrote in place is undone from a :class:`Snapshot`);
- a pass that holds a resource (a worker process) is a context manager: a pipeline enters its
  passes when the run starts and leaves them when it ends, and a pass used on its own opens and
  closes what it needs around each call;
- the first line of the class docstring is the summary that ``graphfix passes`` shows;
- :meth:`Pass.fallbacks` names the finer ways to leave part of a pass out (a rewrite kind, a
  risky option): when the pass's output does not load or breaks parity, the pipeline tries them
  before it leaves the whole pass out.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import onnx

from graphfix.errors import PassError, UnknownPassError
from graphfix.graph import Snapshot, count_nodes, default_inputs
from graphfix.model_io import stored_size
from graphfix.options import FOLD_ALLOWANCE

if TYPE_CHECKING:
    from graphfix.options import RunOptions

__all__ = ["Pass", "PassResult", "Fallback", "register", "get", "names", "summary"]

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
    # Structured facts worth reporting that are not integers (convert-precision's islands).
    details: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Fallback:
    """A pass configured to leave one part of its work out: ``leaves_out`` says which, in words
    ("onnxsim's graph optimizers"), for the report."""

    leaves_out: str
    pass_: Pass


class Pass:
    """Base class of every pass. Subclasses implement :meth:`call`."""

    name: ClassVar[str] = ""
    # True only where making the model bigger is the pass's documented purpose; any other
    # pass whose result has more nodes than its input is taken back.
    may_grow: ClassVar[bool] = False
    # True only where changing the signature (an input's or output's name, place or element
    # type) is the pass's documented purpose; any other pass that changes it is taken back.
    may_change_signature: ClassVar[bool] = False

    @classmethod
    def configured(cls: type[_P], run: RunOptions) -> _P:
        """The pass as a run with options ``run`` uses it (by default: its own defaults)."""
        return cls()

    def call(self, model: onnx.ModelProto) -> PassResult:
        raise NotImplementedError

    def fallbacks(self) -> list[Fallback]:
        """This pass with less of it, finest first: each :class:`Fallback` names what it leaves
        out. None by default: the pipeline then leaves the whole pass out."""
        return []

    def options(self) -> dict[str, Any]:
        """The options this instance runs with, for the report (public attributes by default)."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def __enter__(self: _P) -> _P:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        return None

    def __call__(self, model: onnx.ModelProto) -> PassResult:
        before = count_nodes(model)
        signature = None if self.may_change_signature else _signature(model)
        snapshot = None if self.may_grow and signature is None else Snapshot(model)
        result = self.call(model)
        if not isinstance(result, PassResult):
            raise PassError(f"pass {self.name!r} returned {type(result).__name__}, not PassResult")
        if result.skipped and result.modified:
            raise PassError(f"pass {self.name!r} reported a skip and a change at once")
        after = count_nodes(result.model)
        reason = None
        if not self.may_grow and after > before:
            reason = f"its result has more nodes ({before} -> {after}); model kept"
        elif signature is not None and result.modified:
            reason = _signature_change(signature, _signature(result.model))
        if reason is not None:
            logger.warning("%s: %s", self.name, reason)
            if result.model is model:
                snapshot.restore(model)
            # What the pass said of its result (a signature it changed, what it removed) is
            # not true of the model kept: the reason alone stands.
            return PassResult(model, False, warnings=[reason], skipped=reason)
        return result

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options().items())
        return f"{type(self).__name__}({opts})"


def _signature(model: onnx.ModelProto) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The main graph's inputs and outputs: each one's name and type (a tensor's element
    type; else its kind). An input with a default value (an initializer) is one a caller may
    feed, from IR 4; before, every initializer is listed as an input, and none is one."""
    def typed(value: onnx.ValueInfoProto) -> tuple[str, str]:
        kind = value.type.WhichOneof("value") or "untyped"
        if kind == "tensor_type":
            return value.name, onnx.TensorProto.DataType.Name(value.type.tensor_type.elem_type)
        return value.name, kind

    weights = {t.name for t in model.graph.initializer} - set(default_inputs(model))
    return ([typed(v) for v in model.graph.input if v.name not in weights],
            [typed(v) for v in model.graph.output])


def _signature_change(before: tuple[list[tuple[str, str]], list[tuple[str, str]]],
                      after: tuple[list[tuple[str, str]], list[tuple[str, str]]]) -> str | None:
    """Why the signature ``after`` is not ``before`` (None when it is)."""
    for side, was, now in (("input", *(s[0] for s in (before, after))),
                           ("output", *(s[1] for s in (before, after)))):
        if was == now:
            continue
        gone = [name for name, _ in was if name not in dict(now)]
        added = [name for name, _ in now if name not in dict(was)]
        if gone or added:
            change = ", ".join([*(f"{n!r} removed" for n in gone[:3]),
                                *(f"{n!r} added" for n in added[:3])])
        elif [n for n, _ in was] != [n for n, _ in now]:
            change = "their order changed"
        else:
            change = ", ".join(f"{n!r} {t} -> {dict(now)[n]}" for n, t in was
                               if dict(now)[n] != t)
        return f"it changed the graph's {side}s ({change}); model kept"
    return None


# The most bytes (:func:`plain_size`) a run's model may take: the pipeline's input's, under the
# default growth policy (never bigger). None outside such a run.
_SIZE_LIMIT: ContextVar[int | None] = ContextVar("graphfix_size_limit", default=None)
_ALLOWANCE: ContextVar[int] = ContextVar("graphfix_fold_allowance", default=FOLD_ALLOWANCE)


@contextlib.contextmanager
def size_limit(limit: int | None, *, allowance: int = FOLD_ALLOWANCE) -> Iterator[None]:
    """Within the block, :func:`room` measures against ``limit`` bytes (None: no limit), and
    a fold may add ``allowance`` tensor bytes whatever the room (:func:`fold_allowance`)."""
    token, allowed = _SIZE_LIMIT.set(limit), _ALLOWANCE.set(allowance)
    try:
        yield
    finally:
        _SIZE_LIMIT.reset(token)
        _ALLOWANCE.reset(allowed)


def fold_allowance() -> int:
    """The tensor bytes a fold may add in a run held to its size whatever the passes before
    saved (:data:`graphfix.options.FOLD_ALLOWANCE`; 0 in the run that follows one whose
    output was still larger than its input)."""
    return _ALLOWANCE.get()


def room(model: onnx.ModelProto) -> int | None:
    """The bytes ``model`` may still grow by within the run's size limit: what the passes
    before saved; None outside a block with a limit (the growth policy's ratio applies)."""
    limit = _SIZE_LIMIT.get()
    if limit is None:
        return None
    return max(0, limit - plain_size(model))


def plain_size(model: onnx.ModelProto) -> int:
    """:func:`stored_size` less the main graph's shape annotations (``value_info``) and
    graphfix's own records in the metadata (a layout or a precision asked for): what the
    folds of a run held to its size are measured by. The annotations are optional, and the
    pipeline leaves the new ones out where the model would be larger than its input."""
    size = stored_size(model)
    annotations = 0
    for value in [*model.graph.value_info,
                  *(p for p in model.metadata_props if p.key.startswith("graphfix."))]:
        length = value.ByteSize()
        annotations += 1 + length + _varint_length(length)  # the field's tag, length, bytes
    return size - annotations


def _varint_length(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)



_P = TypeVar("_P", bound=Pass)
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


def get(name: str) -> type[Pass]:
    """The pass class registered under ``name``; :class:`UnknownPassError` lists the known ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise UnknownPassError(
            f"unknown pass {name!r}", hint=f"known passes: {known} (see `graphfix passes`)"
        ) from None


def names() -> list[str]:
    """Registered pass names, in registration order."""
    return list(_REGISTRY)


def summary(name: str) -> str:
    """The one-line summary of a pass: the first line of its docstring."""
    return (get(name).__doc__ or "").strip().splitlines()[0]
