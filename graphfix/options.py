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
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from graphfix.errors import GraphfixError

__all__ = [
    "PROVIDERS",
    "ORT_LEVELS",
    "PRECISIONS",
    "FUSIONS",
    "DEFAULT_MAX_GROWTH",
    "GROWTH_ALLOWANCE",
    "OptionError",
    "check_max_growth",
    "growth_limit",
    "RunOptions",
    "ParityOptions",
    "BenchOptions",
    "Tolerance",
]

# Short names of ONNX Runtime's execution providers, as graphfix spells them.
PROVIDERS: dict[str, str] = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
}
ORT_LEVELS = ("basic", "extended", "all")
# Lowered precisions (convert-precision) and fusions (fuse-transformer) a run can ask for.
PRECISIONS = ("fp16", "bf16")
FUSIONS = ("transformer",)

# The growth policy of constant folding (ort-offline, simplify): the tensors of a rewritten
# model may hold at most max(max_growth x the original's bytes, the original's + allowance).
DEFAULT_MAX_GROWTH = 1.5
GROWTH_ALLOWANCE = 64 * 1024

# (atol relative to the output's scale, rtol); None keeps the dtype's default for that part.
Tolerance = tuple[Optional[float], Optional[float]]


class OptionError(GraphfixError, ValueError):
    """An option out of its range, of the wrong type, or unknown."""


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


def growth_limit(size: int, max_growth: float | None, ceiling: int) -> int:
    """The most bytes a model's tensors may hold after folding a model of ``size`` bytes."""
    if max_growth is None:
        return ceiling
    return min(ceiling, max(int(size * max_growth), size + GROWTH_ALLOWANCE))


def _check_shapes(shapes: Mapping[str, Sequence[int]] | None) -> dict[str, tuple[int, ...]] | None:
    if shapes is None:
        return None
    if not isinstance(shapes, Mapping):
        raise OptionError(f"input shapes map input names to sizes, got {shapes!r}")
    checked = {}
    for name, dims in shapes.items():
        if not isinstance(name, str) or isinstance(dims, (str, bytes)) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims
        ):
            raise OptionError(f"the shape of input {name!r} must be sizes > 0, got {dims!r}")
        checked[name] = tuple(int(d) for d in dims)
    return checked


def _names(value: Sequence[str] | str) -> tuple[str, ...]:
    names = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(n, str) and n for n in names):
        raise OptionError(f"expected input or output names, got {value!r}")
    return names


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """What the passes of a run are configured from (each takes the fields it uses).

    - ``ort_level``: ort-offline's level: "basic" keeps standard ONNX ops, portable to every
      provider; "extended" and "all" add ONNX Runtime's contrib ops, tied to ``provider``.
    - ``provider``: the provider the model is for: "auto" (ort-offline on the CPU, the
      benchmark on CUDA when it loads), "cpu" or "cuda".
    - ``max_growth``: the largest ratio of tensor bytes constant folding may reach
      (None or 0: any).
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
        if self.ort_level not in ORT_LEVELS:
            raise OptionError(f"the ort-offline level must be one of {', '.join(ORT_LEVELS)}, "
                              f"got {self.ort_level!r}")
        if self.provider not in ("auto", "cpu", "cuda"):
            raise OptionError(f"the provider must be auto, cpu or cuda, got {self.provider!r}")
        object.__setattr__(self, "max_growth", check_max_growth(self.max_growth))
        object.__setattr__(self, "inputs_as_nchw", _names(self.inputs_as_nchw))
        object.__setattr__(self, "outputs_as_nchw", _names(self.outputs_as_nchw))
        object.__setattr__(self, "input_shapes", _check_shapes(self.input_shapes))
        if self.precision not in (None, *PRECISIONS):
            raise OptionError(f"the precision must be one of {', '.join(PRECISIONS)}, "
                              f"got {self.precision!r}")
        if self.io_types not in (None, "fp32", self.precision):
            raise OptionError(f"io types must be fp32 or the precision ({self.precision}), "
                              f"got {self.io_types!r}", hint="--io-types needs --precision")
        if self.fuse not in (None, *FUSIONS):
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
        if self.runs is not None and (isinstance(self.runs, bool) or self.runs < 1):
            raise OptionError(f"the number of input sets must be >= 1, got {self.runs!r}")
        if self.seed is not None and (not isinstance(self.seed, int) or self.seed < 0):
            raise OptionError(f"the seed must be an integer >= 0, got {self.seed!r}")
        if self.provider is not None and self.provider not in ("cpu", "cuda"):
            raise OptionError(f"parity runs on cpu or cuda, got {self.provider!r}")
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
    - ``dynamic_block_base``: ORT's ``session.dynamic_block_base`` on the CPU.
    """

    provider: Optional[str] = None
    threads: Optional[int] = None
    warmup: Optional[int] = None
    runs: Optional[int] = None
    cuda_graph: Optional[bool] = None
    offline: Optional[bool] = None
    dynamic_block_base: Optional[int] = None

    def __post_init__(self) -> None:
        if self.provider is not None and self.provider not in ("auto", "cpu", "cuda"):
            raise OptionError(f"the benchmark runs on auto, cpu or cuda, got {self.provider!r}")
        for name in ("threads", "runs", "dynamic_block_base"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value < 1):
                raise OptionError(f"{name.replace('_', ' ')} must be >= 1, got {value!r}")
        if self.warmup is not None and self.warmup < 0:
            raise OptionError(f"warm-up rounds must be >= 0, got {self.warmup!r}")

    def arguments(self) -> dict[str, Any]:
        """Keyword arguments for :func:`graphfix.validate.bench.benchmark`."""
        return _given(self)
