"""The options of a graphfix run, typed and checked, with their defaults: one home for each.

:class:`RunOptions` configures the passes of a run (each pass takes what concerns it, see
:meth:`graphfix.registry.Pass.configured`); :class:`ParityOptions` and :class:`BenchOptions`
say how the result is checked and measured. A field left at None takes the default of the
function it goes to (:func:`graphfix.validate.parity.check_parity`,
:func:`graphfix.validate.bench.benchmark`), so every default lives in one place.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Optional

from graphfix.errors import GraphfixError

__all__ = [
    "PROVIDERS",
    "DEVICES",
    "PROVIDER_CHOICES",
    "check_provider",
    "ORT_LEVELS",
    "PRECISIONS",
    "FUSIONS",
    "DEFAULT_MAX_GROWTH",
    "GROWTH_ALLOWANCE",
    "FOLD_ALLOWANCE",
    "OptionError",
    "ConflictingOptionsError",
    "check_max_growth",
    "check_type",
    "check_count",
    "check_path",
    "check_names",
    "check_tolerances",
    "growth_limit",
    "RunOptions",
    "ParityOptions",
    "BenchOptions",
    "Tolerance",
    "DEFAULT_TOLERANCES",
    "default_tolerance",
    "parse_tolerance",
]

# Short names of ONNX Runtime's execution providers, as graphfix spells them: the one home of
# the names (graphfix.providers probes them).
PROVIDERS: dict[str, str] = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
}
# Where a model is run or rewritten for; and a run's choice, where "auto" is CUDA when it
# really loads, else the CPU.
DEVICES: tuple[str, ...] = ("cpu", "cuda")
PROVIDER_CHOICES: tuple[str, ...] = ("auto", *DEVICES)
ORT_LEVELS = ("basic", "extended", "all")
# Lowered precisions (convert-precision) and fusions (fuse-transformer) a run can ask for.
PRECISIONS = ("fp16", "bf16")
FUSIONS = ("transformer",)

# The growth policy of constant folding (ort-offline, simplify). The default, 1: never bigger:
# the pipeline's output is never larger than its input. The passes fold as at RATIO_FIRST;
# where the output would be larger than the input, the pipeline runs them again, each fold
# adding tensor bytes only where the passes before it saved as many (or FOLD_ALLOWANCE: a
# shape folded into a constant). Above 1: the tensors of a rewritten model may hold at most
# max(max_growth x the original's bytes, the original's + allowance).
DEFAULT_MAX_GROWTH = 1.0
GROWTH_ALLOWANCE = 64 * 1024
RATIO_FIRST = 1.5
# Never bigger, in tensors: a fold of a shape or a small table into a constant adds bytes its
# node took; up to this many tensor bytes are not counted against the policy.
FOLD_ALLOWANCE = 1024

# (atol relative to the output's scale, rtol); None keeps the dtype's default for that part.
Tolerance = tuple[Optional[float], Optional[float]]

# Parity's default tolerance of each float type (graphfix.validate.parity says why each).
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float32": (1e-4, 1e-3),
    "float64": (1e-9, 1e-7),
    "float16": (1e-2, 1e-2),
    "bfloat16": (5e-2, 5e-2),
    "complex64": (1e-4, 1e-3),
    "complex128": (1e-9, 1e-7),
}
_EXACT: Tolerance = (0.0, 0.0)


def default_tolerance(dtype: object) -> Tolerance:
    """The default (atol, rtol) of a dtype (a numpy dtype or its name); integers, booleans and
    strings compare exactly."""
    return DEFAULT_TOLERANCES.get(str(dtype), _EXACT)


def parse_tolerance(text: str) -> tuple[str, Tolerance]:
    """``name:atol:rtol`` (name ``*`` for every output; a name may hold colons) ->
    (name, (atol, rtol)); an :class:`OptionError` (a ValueError) says what is wrong."""
    rest, sep, rtol = str(text).rpartition(":")
    name, sep2, atol = rest.rpartition(":")
    if not sep or not sep2 or not name:
        raise OptionError(f"{text!r}: expected NAME:ATOL:RTOL such as logits:1e-3:1e-2")
    try:
        parts = (float(atol), float(rtol))
    except ValueError:
        raise OptionError(f"{text!r}: expected NAME:ATOL:RTOL such as logits:1e-3:1e-2, "
                          "atol and rtol numbers") from None
    if not all(math.isfinite(p) and p >= 0 for p in parts):
        raise OptionError(f"{text!r}: expected NAME:ATOL:RTOL with finite numbers >= 0")
    return name, parts


class OptionError(GraphfixError, ValueError):
    """An option out of its range, of the wrong type, or unknown."""


def check_provider(value: object, *, allowed: Sequence[str] = PROVIDER_CHOICES,
                   what: str = "the provider") -> str:
    """``value`` when it is one of ``allowed``; else an :class:`OptionError` naming them (the
    one error a provider graphfix does not know raises, wherever it is given)."""
    if not isinstance(value, str) or value not in allowed:
        raise OptionError(f"{what} must be one of {', '.join(allowed)}, got {value!r}")
    return value


class ConflictingOptionsError(OptionError):
    """Two options that contradict each other (the command line's usage error, exit 2)."""


def _brief(value: object) -> str:
    """``value`` as an error message shows it: its type, and a short repr."""
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{type(value).__name__} {text}"


def check_type(function: str, name: str, value: object, kinds: type | tuple[type, ...],
               expected: str) -> None:
    """Raise :class:`OptionError` naming ``function``'s argument ``name`` unless ``value`` is
    one of ``kinds`` (a bool is no number)."""
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds and (
            int in kinds or float in kinds)):
        raise OptionError(f"{function}(): {name} must be {expected}, got {_brief(value)}")


def check_count(function: str, name: str, value: object, *, low: int = 1,
                optional: bool = True, high: int | None = None) -> None:
    """An integer >= ``low`` and, where ``high`` is given, <= ``high`` (None allowed when
    ``optional``): a float is refused, not truncated, a bool is no count."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (
            high is not None and value > high):
        bounds = f">= {low}" if high is None else f"from {low} to {high:,}".replace(",", " ")
        raise OptionError(f"{function}(): {name} must be an integer {bounds}, "
                          f"got {_brief(value)}")


def check_pair_of_names(function: str, name: str, value: object) -> None:
    """Two names (a tuple or list of two strings), as reports show two models."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 2 \
            or not all(isinstance(item, str) for item in value):
        raise OptionError(f"{function}(): {name} must be two names, got {_brief(value)}")


def check_progress(function: str, value: object) -> None:
    """A progress callback: None, or callable as ``progress(step, done, total)``."""
    if value is not None and not callable(value):
        raise OptionError(f"{function}(): progress must be callable as progress(step, done, "
                          f"total), or None, got {_brief(value)}")


def check_path(function: str, name: str, value: object, *, optional: bool = False) -> None:
    """A path: a str or an os.PathLike, not bytes (graphfix reads bytes as a model's
    contents, never as a path), not empty."""
    if value is None and optional:
        return
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise OptionError(f"{function}(): {name} must be a path (str or os.PathLike), got bytes",
                          hint="decode the path with os.fsdecode(); a model held in memory "
                               "goes to graphfix.optimize() or graphfix.save()")
    if not isinstance(value, (str, os.PathLike)):
        raise OptionError(f"{function}(): {name} must be a path (str or os.PathLike), "
                          f"got {_brief(value)}")
    text = os.fspath(value)
    if isinstance(text, bytes):
        raise OptionError(f"{function}(): {name} must be a path whose os.fspath() is a str, "
                          "got one that gives bytes")
    if "\0" in text:
        raise OptionError(f"{function}(): {name} holds a NUL character, which no file name "
                          f"can hold: {text!r}")


def check_names(function: str, name: str, value: object, *, optional: bool = True) -> None:
    """A list (any sequence but a string) of names: a single string is refused, so that
    ``skip="simplify"`` does not become the names s, i, m, ..."""
    if value is None and optional:
        return
    if isinstance(value, (str, bytes)):
        raise OptionError(f"{function}(): {name} must be a list of names, got the string "
                          f"{value!r}", hint=f"write {name}=[{value!r}]")
    if not isinstance(value, Collection) or isinstance(value, Mapping) or not all(
            isinstance(item, str) and item for item in value):
        raise OptionError(f"{function}(): {name} must be a list of names (non-empty "
                          f"strings), got {_brief(value)}")


def check_tolerances(function: str, value: object) -> None:
    """``{output name or "*": (atol, rtol)}``, each part a number >= 0 or None."""
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise OptionError(f"{function}(): tolerances must map output names to (atol, rtol), "
                          f"got {_brief(value)}")
    for key, pair in value.items():
        if not isinstance(key, str) or isinstance(pair, (str, bytes)) or not (
                isinstance(pair, Sequence) and len(pair) == 2) or not all(
                part is None or (isinstance(part, (int, float)) and not isinstance(part, bool))
                for part in pair):
            raise OptionError(f"{function}(): tolerances[{key!r}] must be (atol, rtol), each a "
                              f"number or None, got {_brief(pair)}")


def check_fraction(function: str, name: str, value: object) -> None:
    """A number strictly between 0 and 1 (a confidence level)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise OptionError(f"{function}(): {name} must be a number between 0 and 1, got "
                          f"{_brief(value)}")


def check_feeds(function: str, value: object, *, sets: bool = False) -> None:
    """Inputs given as arrays: ``{input name: array}`` (or, with ``sets``, a list of such
    dicts), or None."""
    if value is None or isinstance(value, Mapping):
        return
    if sets and isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and all(
            isinstance(feed, Mapping) for feed in value):
        return
    raise OptionError(f"{function}(): feeds must map input names to arrays"
                      f"{' (or be a list of such dicts)' if sets else ''}, got {_brief(value)}")


def check_shapes(function: str, value: object) -> dict[str, tuple[int, ...]] | None:
    """``{input name: [sizes]}``, or None; the shapes as tuples."""
    try:
        return _check_shapes(value)  # type: ignore[arg-type]
    except OptionError as err:
        raise OptionError(f"{function}(): {err.args[0]}", hint=err.hint) from None


def check_max_growth(value: object) -> float | None:
    """A growth factor >= 1, or None (any growth; 0 means the same)."""
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                         and value == 0):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
        math.isfinite(value) and value >= 1.0
    ):
        raise OptionError(f"the largest growth of constant folding must be a number >= 1 "
                          f"(0 for any growth), got {value!r}")
    return float(value)


def growth_limit(size: int, max_growth: float | None, ceiling: int,
                 room: int | None = None, allowance: int = FOLD_ALLOWANCE) -> int:
    """The most bytes a model's tensors may hold after folding a model whose tensors hold
    ``size`` bytes. Where the pipeline holds its run to its input's size (``room``: the
    bytes the passes before saved, :func:`graphfix.registry.room`), ``room`` more at most, or
    ``allowance`` (:data:`FOLD_ALLOWANCE`; 0 where even that made the output larger than its
    input); otherwise ``max_growth`` times ``size`` (at the default, 1,
    :data:`RATIO_FIRST`), or ``size`` + :data:`GROWTH_ALLOWANCE` if more."""
    if max_growth is None:
        return ceiling
    if max_growth <= 1.0 and room is not None:
        return min(ceiling, size + max(room, allowance))
    ratio = RATIO_FIRST if max_growth <= 1.0 else max_growth
    return min(ceiling, max(int(size * ratio), size + GROWTH_ALLOWANCE))


def _check_shapes(shapes: Mapping[str, Sequence[int]] | None) -> dict[str, tuple[int, ...]] | None:
    if shapes is None:
        return None
    if not isinstance(shapes, Mapping):
        raise OptionError(f"input shapes map input names to lists of sizes, got {_brief(shapes)}")
    checked = {}
    for name, dims in shapes.items():
        if not isinstance(name, str) or not isinstance(dims, Sequence) or isinstance(
                dims, (str, bytes)) or not all(
            isinstance(d, int) and not isinstance(d, bool) and 0 < d < 2 ** 63 for d in dims
        ):
            raise OptionError(f"the shape of input {name!r} must be a list of sizes > 0 (and "
                              f"below 2**63, ONNX's int64), got {_brief(dims)}",
                              hint="write, say, {'x': [1, 3, 224, 224]}")
        checked[name] = tuple(int(d) for d in dims)
    return checked


def _names(value: Sequence[str] | str) -> tuple[str, ...]:
    if not isinstance(value, (str, Collection)) or isinstance(value, Mapping):
        raise OptionError(f"expected input or output names, got {_brief(value)}")
    names = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(n, str) and n for n in names):
        raise OptionError(f"expected input or output names, got {_brief(value)}")
    return names


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """What the passes of a run are configured from (each takes the fields it uses).

    - ``ort_level``: ort-offline's level: "basic" keeps standard ONNX ops, portable to every
      provider; "extended" and "all" add ONNX Runtime's contrib ops, tied to ``provider``.
    - ``provider``: the provider the model is for: "auto" (ort-offline on the CPU, the
      benchmark on CUDA when it loads), "cpu" or "cuda".
    - ``max_growth``: the largest ratio of tensor bytes constant folding may reach
      (None or 0: any); 1, the default, is never bigger: where the output would be larger
      than the input, the passes run again, their folds adding tensor bytes only where the
      passes before saved as many (and a KiB for shapes folded into constants).
    - ``keep_reduction_order``: eliminate-transposes keeps a Transpose before each sum-like
      reduction, so outputs stay bit-identical.
    - ``inputs_as_nchw`` / ``outputs_as_nchw``: channels-last inputs and outputs declared
      channels-first (a signature change, recorded in the model).
    - ``input_shapes``: fixed sizes of named inputs, in the layout of the model as given.
    - ``precision``: "fp16" or "bf16" adds convert-precision to the pipeline (None: float32
      stays); ``io_types``: "fp32" (default) keeps the signature's float32 inputs and outputs,
      the precision's name lowers them too.
    - ``fuse``: "transformer" adds fuse-transformer (ONNX Runtime's transformer fusions).
    - ``inputs``: real inputs (parity's ``inputs``: a ``.npz`` or a folder of ``.pb``) for the
      passes that measure their rewrite (convert-precision, fuse-transformer); None: parity's
      generated inputs.
    """

    ort_level: str = "basic"
    provider: str = "auto"
    max_growth: Optional[float] = DEFAULT_MAX_GROWTH
    keep_reduction_order: bool = False
    inputs_as_nchw: tuple[str, ...] = ()
    outputs_as_nchw: tuple[str, ...] = ()
    input_shapes: Optional[Mapping[str, tuple[int, ...]]] = None
    precision: Optional[str] = None
    io_types: Optional[str] = None
    fuse: Optional[str] = None
    inputs: Optional[str | os.PathLike[str]] = None

    def __post_init__(self) -> None:
        check_type("RunOptions", "keep_reduction_order", self.keep_reduction_order, bool,
                   "True or False")
        if not isinstance(self.ort_level, str) or self.ort_level not in ORT_LEVELS:
            raise OptionError(f"the ort-offline level must be one of {', '.join(ORT_LEVELS)}, "
                              f"got {self.ort_level!r}")
        check_provider(self.provider)
        object.__setattr__(self, "max_growth", check_max_growth(self.max_growth))
        object.__setattr__(self, "inputs_as_nchw", _names(self.inputs_as_nchw))
        object.__setattr__(self, "outputs_as_nchw", _names(self.outputs_as_nchw))
        object.__setattr__(self, "input_shapes", _check_shapes(self.input_shapes))
        if self.precision is not None and (not isinstance(self.precision, str)
                                           or self.precision not in PRECISIONS):
            raise OptionError(f"the precision must be one of {', '.join(PRECISIONS)}, "
                              f"got {_brief(self.precision)}")
        if self.io_types is not None and (not isinstance(self.io_types, str) or
                                          self.io_types not in ("fp32", self.precision)):
            raise OptionError(f"io types must be fp32 or the precision ({self.precision}), "
                              f"got {_brief(self.io_types)}",
                              hint="--io-types needs --precision" if self.precision is None
                              else f"--io-types fp32 or --io-types {self.precision}")
        if self.fuse is not None and (not isinstance(self.fuse, str)
                                      or self.fuse not in FUSIONS):
            raise OptionError(f"the fusion must be one of {', '.join(FUSIONS)}, "
                              f"got {self.fuse!r}")


def _given(options: Any) -> dict[str, Any]:
    """The fields of ``options`` that are set (not None), as keyword arguments."""
    return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)
            if getattr(options, f.name) is not None}


@dataclasses.dataclass(frozen=True)
class ParityOptions:
    """How parity is checked (fields left None take :func:`check_parity`'s defaults).

    - ``inputs``: real inputs: a ``.npz`` of arrays by input name, or a folder of
      ``input_N.pb`` files (or of ``test_data_set_*`` folders);
    - ``runs``: sets of generated inputs (default: two when the model has dynamic dimensions,
      at two sizes; else one);
    - ``seed``: seed of the generated inputs (default 0);
    - ``tolerances``: ``{output name or "*": (atol, rtol)}``, a part None keeping the dtype's
      default (float32: 1e-4 of the output's RMS, and 1e-3);
    - ``provider``: "cpu" (default) or "cuda", both models with ORT's optimizations off.
    """

    inputs: Optional[str | os.PathLike[str]] = None
    runs: Optional[int] = None
    seed: Optional[int] = None
    tolerances: Optional[Mapping[str, Tolerance]] = None
    provider: Optional[str] = None

    def __post_init__(self) -> None:
        check_path("ParityOptions", "inputs", self.inputs, optional=True)
        check_count("ParityOptions", "runs", self.runs)
        check_count("ParityOptions", "seed", self.seed, low=0)
        if self.provider is not None:
            check_provider(self.provider, allowed=DEVICES, what="parity's provider")
        check_tolerances("ParityOptions", self.tolerances)
        for name, (atol, rtol) in (self.tolerances or {}).items():
            for label, value in (("atol", atol), ("rtol", rtol)):
                if value is not None and not (math.isfinite(value) and value >= 0):
                    raise OptionError(f"the {label} of {name!r} must be a finite number >= 0, "
                                      f"got {value!r}")

    def arguments(self) -> dict[str, Any]:
        """Keyword arguments for :func:`graphfix.validate.parity.check_parity`."""
        return _given(self)


@dataclasses.dataclass(frozen=True)
class BenchOptions:
    """How the speedup is measured (fields left None take :func:`benchmark`'s defaults).

    - ``provider``: "auto" (default: CUDA when it really loads), "cpu" or "cuda";
    - ``threads``: intra-op threads (default: physical cores); ``warmup`` (default 10) and
      ``runs`` (default 50): rounds before and while timing;
    - ``cuda_graph``: replay the model as a CUDA graph; ``offline``: also time both models
      with ORT's optimizations off, and session creation;
    - ``dynamic_block_base``: ORT's ``session.dynamic_block_base`` on the CPU;
    - ``input_shapes``: the sizes to time at (named inputs, in the layout of the model as
      given), for ``optimize``'s speed gate and benchmark: float16 that loses at batch 1 can
      win at the batch a deployment runs, and these sizes are not fixed in the written model
      (``RunOptions.input_shapes`` fixes them).
    """

    provider: Optional[str] = None
    threads: Optional[int] = None
    warmup: Optional[int] = None
    runs: Optional[int] = None
    cuda_graph: Optional[bool] = None
    offline: Optional[bool] = None
    dynamic_block_base: Optional[int] = None
    input_shapes: Optional[Mapping[str, tuple[int, ...]]] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "input_shapes", _check_shapes(self.input_shapes))
        if self.provider is not None:
            check_provider(self.provider, what="the benchmark's provider")
        for name in ("threads", "runs", "dynamic_block_base"):
            check_count("BenchOptions", name, getattr(self, name))
        check_count("BenchOptions", "warmup", self.warmup, low=0)
        for name in ("cuda_graph", "offline"):
            if getattr(self, name) is not None:
                check_type("BenchOptions", name, getattr(self, name), bool, "True or False")

    def arguments(self) -> dict[str, Any]:
        """Keyword arguments for :func:`graphfix.validate.bench.benchmark`."""
        return _given(self)
