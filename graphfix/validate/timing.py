"""The one timing core of ``bench``, ``profile`` and ``tune``: how sessions are made
(:class:`Settings`), where each node runs (ORT's profile into :class:`Placement`), one timed call
(:class:`Timer`: IO binding on CUDA, a CUDA graph on request), and the rounds that interleave
several configurations (:func:`measure`).

Two ways to interleave, one function:

- *together* (``bench``'s way): every session is open for the whole measurement; after warm-up,
  each round times one call of each, the order rotating from round to round (A B C, B C A,
  C A B, ...; with two, A B then B A), so that every configuration takes every place equally
  and none always follows the same one (a middle place under plain alternation A B C, C B A
  never follows itself, the ends do half the time). Idle sessions
  must not spin (``session.intra_op.allow_spinning`` = 0): a thread pool that just finished keeps
  spinning on the cores the next session's call needs.
- *alone*: one session alive at a time. Each round opens each configuration in turn (the order
  rotating), warms it up, times a block of calls and closes it before the next one opens, so
  no idle thread pool competes with the timed one, whatever its spinning setting. Used whenever
  a configuration lets its threads spin, and by ``profile``'s fix trials and ``tune``. Each
  opening's peak memory (resident set above what it was before the session opened) is read
  from the kernel on Linux.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import gc
import json
import logging
import os
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from graphfix import model_io
from graphfix.providers import CUDA_FIX
from graphfix.errors import (
    BenchmarkError,
    ProviderUnavailableError,
    ValidationInputError,
    first_line,
)
from graphfix.graph import all_nodes
from graphfix.options import DEVICES, PROVIDERS, check_provider
from graphfix.validate.stats import LatencyStats, summarize

if TYPE_CHECKING:
    import onnxruntime

__all__ = ["Placement", "Config", "Settings", "Arm", "Measurement", "EXECUTION_MODES",
           "OPTIMIZATION_LEVELS", "ALONE_ROUNDS", "open_session", "profile", "parse_profile",
           "Timer", "measure", "measure_runs",
           "check_cuda_graph", "check_feeds", "graph_inputs", "default_threads", "thread_limit",
           "ort_version", "Progress", "RunFailed", "RUN_HINT"]

logger = logging.getLogger(__name__)

# What to do about a model that does not run on the inputs it was given or generated.
RUN_HINT = ("check the input shapes (--input-shape, input_shapes=) or give real inputs "
            "(--inputs, feeds=)")

Progress = Callable[[str, int, int], None]

_CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})
_MEMCPY = frozenset({"MemcpyToHost", "MemcpyFromHost"})
# ORT keeps shape arithmetic on the CPU on purpose; these are not fallbacks worth a warning.
_CPU_BY_DESIGN = frozenset({"Shape", "Size"}) | _MEMCPY
_PROFILE_RUNS = 2

EXECUTION_MODES = ("sequential", "parallel")
OPTIMIZATION_LEVELS = ("disabled", "basic", "extended", "all")
# CUDA provider options graphfix sets unless a configuration says otherwise (ORT's defaults,
# named so that a configuration file shows them).
_CUDA_DEFAULTS: dict[str, str] = {"device_id": "0", "cudnn_conv_use_max_workspace": "1"}


def _ort() -> Any:
    # onnxruntime is imported when a session is made, so that importing graphfix stays fast.
    import onnxruntime

    return onnxruntime


def ort_version() -> str:
    """The installed ONNX Runtime's version."""
    return str(_ort().__version__)


@dataclasses.dataclass
class Placement:
    """Which provider ran which nodes, from ORT's profile of one session."""

    nodes: dict[str, int] = dataclasses.field(default_factory=dict)
    op_types: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    memcpy_nodes: int = 0
    # Compute nodes on the CPU provider in a CUDA session (op type -> count), and their names.
    cpu_fallback: dict[str, int] = dataclasses.field(default_factory=dict)
    cpu_fallback_nodes: list[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Config:
    """A model and the graph optimization level its sessions open at. ``model`` may be
    ONNX Runtime's own rewritten copy (:func:`graphfix.model_io.ort_rewritten`), serialized or
    encoded once with its weights lent (:func:`graphfix.model_io.lent_model`), then opened at
    "disabled"."""

    label: str
    model: onnx.ModelProto | bytes | model_io.LentModel
    optimization: str

    @property
    def model_label(self) -> str:
        """"candidate" or "baseline", whatever the optimization level."""
        return self.label.split("_")[0]


@dataclasses.dataclass(frozen=True)
class Settings:
    """How a session is made: ONNX Runtime's session options, session configuration entries
    and provider options, and how a call is timed. ``bench`` uses one for all its sessions;
    ``tune`` searches over them (:mod:`graphfix.validate.tune`'s knob table).

    - ``threads``: intra-op threads (0: ONNX Runtime's own choice);
    - ``dynamic_block_base``: ``session.dynamic_block_base`` (None: not set);
    - ``allow_spinning``: ``session.intra_op.allow_spinning``;
    - ``cuda_graph``: the CUDA provider's ``enable_cuda_graph`` (replayed with IO binding);
    - ``execution_mode``: "sequential" or "parallel" (``inter_op_threads`` run branches; 0:
      ONNX Runtime's choice);
    - ``optimization``: the graph optimization level, one of :data:`OPTIMIZATION_LEVELS`;
    - ``memory_pattern``, ``cpu_arena``: ``enable_mem_pattern``, ``enable_cpu_mem_arena``;
    - ``io_binding``: on CUDA, inputs and outputs stay on the device (bound once), so a timed
      call holds no host-device copy; off, every call copies them as ``session.run`` does;
    - ``cuda_options``: CUDA provider options over graphfix's (``device_id`` 0,
      ``cudnn_conv_use_max_workspace`` 1), as sorted (name, value) pairs.
    """

    provider: str
    threads: int
    dynamic_block_base: int | None
    allow_spinning: bool
    cuda_graph: bool
    execution_mode: str = "sequential"
    inter_op_threads: int = 1
    optimization: str = "all"
    memory_pattern: bool = True
    cpu_arena: bool = True
    io_binding: bool = True
    cuda_options: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        check_provider(self.provider, allowed=DEVICES, what="the settings' provider")
        if self.execution_mode not in EXECUTION_MODES:
            raise BenchmarkError(f"execution mode must be sequential or parallel, got "
                                 f"{self.execution_mode!r}")
        if self.optimization not in OPTIMIZATION_LEVELS:
            raise BenchmarkError(f"optimization level must be one of "
                                 f"{', '.join(OPTIMIZATION_LEVELS)}, got {self.optimization!r}")
        if self.provider != "cuda" and (self.cuda_options or self.cuda_graph):
            named = sorted(dict(self.cuda_options)) + (["cuda_graph"] if self.cuda_graph else [])
            raise BenchmarkError(f"{', '.join(named)}: CUDA provider settings, in settings for "
                                 f"the {self.provider} provider")
        if self.cuda_graph and not self.io_binding:
            raise BenchmarkError("CUDA graphs replay on bound device buffers: they need "
                                 "io_binding")
        if self.threads < 0 or self.inter_op_threads < 0 or (
            self.dynamic_block_base is not None and not 1 <= self.dynamic_block_base < 2**31
        ):
            raise BenchmarkError("threads must be >= 0 and dynamic_block_base from 1 to "
                                 f"{2**31 - 1} (ONNX Runtime reads it as an int)")
        most = thread_limit()
        if max(self.threads, self.inter_op_threads) > most:
            raise BenchmarkError(
                f"{max(self.threads, self.inter_op_threads)} threads: at most {most} here (four "
                "per logical core; ONNX Runtime would start them all)")
        options = {str(k): str(v) for k, v in dict(self.cuda_options).items()}
        if "enable_cuda_graph" in options:
            raise BenchmarkError("CUDA graphs are the cuda_graph setting, not a CUDA option")
        object.__setattr__(self, "cuda_options", tuple(sorted(
            (k, v) for k, v in options.items() if _CUDA_DEFAULTS.get(k) != v)))

    @classmethod
    def ort_defaults(cls, provider: str) -> Settings:
        """What ``onnxruntime.InferenceSession(model)`` gets when nothing is set, called with
        ``session.run`` (no IO binding)."""
        return cls(provider, threads=0, dynamic_block_base=None, allow_spinning=True,
                   cuda_graph=False, inter_op_threads=0, io_binding=False)

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    def provider_options(self) -> dict[str, str]:
        """The CUDA provider's options (empty on the CPU)."""
        if self.provider != "cuda":
            return {}
        options = dict(_CUDA_DEFAULTS)
        options["enable_cuda_graph"] = "1" if self.cuda_graph else "0"
        options.update(dict(self.cuda_options))
        return options

    def to_dict(self) -> dict[str, Any]:
        """ONNX Runtime's vocabulary: session options, configuration entries, provider options
        (the ``graphfix.tune/1`` file's ``settings``)."""
        entries = {"session.intra_op.allow_spinning": "1" if self.allow_spinning else "0"}
        if self.dynamic_block_base is not None:
            entries["session.dynamic_block_base"] = str(self.dynamic_block_base)
        return {
            "provider": self.provider,
            "session_options": {
                "intra_op_num_threads": self.threads,
                "inter_op_num_threads": self.inter_op_threads,
                "execution_mode": self.execution_mode,
                "graph_optimization_level": self.optimization,
                "enable_mem_pattern": self.memory_pattern,
                "enable_cpu_mem_arena": self.cpu_arena,
            },
            "session_config_entries": entries,
            "provider_options": self.provider_options(),
            "io_binding": self.io_binding,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Settings:
        """The inverse of :meth:`to_dict`; an unknown or malformed field raises BenchmarkError."""
        unknown_fields = sorted(set(data) - _SETTINGS_FIELDS)
        if unknown_fields:  # a misspelt "session_options" would leave ORT's defaults
            raise BenchmarkError(
                f"unknown settings field(s): {', '.join(map(repr, unknown_fields))}",
                hint=f"settings has {', '.join(sorted(_SETTINGS_FIELDS))}")
        if "provider" not in data:
            raise BenchmarkError("settings: the provider is missing",
                                 hint=f"settings.provider is one of {', '.join(DEVICES)}")
        for field in ("session_options", "session_config_entries", "provider_options"):
            if field in data and not isinstance(data[field], Mapping):
                raise BenchmarkError(f"settings: {field} must be an object, got "
                                     f"{type(data[field]).__name__}")
        try:
            options = dict(data.get("session_options", {}))
            entries = dict(data.get("session_config_entries", {}))
            provider_options = {str(k): str(v) for k, v in
                                dict(data.get("provider_options", {})).items()}
            known_options = {"intra_op_num_threads", "inter_op_num_threads", "execution_mode",
                             "graph_optimization_level", "enable_mem_pattern",
                             "enable_cpu_mem_arena"}
            known_entries = {"session.intra_op.allow_spinning", "session.dynamic_block_base"}
            unknown = sorted((set(options) - known_options) | (set(entries) - known_entries))
            if unknown:
                raise BenchmarkError(
                    f"unknown session setting(s): {', '.join(unknown)}",
                    hint=f"session_options takes {', '.join(sorted(known_options))}; "
                    f"session_config_entries takes {', '.join(sorted(known_entries))} "
                    "(tune --out writes such a file)")
            dbb = entries.get("session.dynamic_block_base")
            cuda_graph = provider_options.pop("enable_cuda_graph", "0") == "1"
            return cls(
                provider=str(data["provider"]),
                threads=_count(options.get("intra_op_num_threads", 0)),
                dynamic_block_base=_count(int(dbb) if isinstance(dbb, str) else dbb)
                if dbb is not None else None,
                allow_spinning=_switch(entries.get("session.intra_op.allow_spinning", "1")),
                cuda_graph=cuda_graph,
                execution_mode=str(options.get("execution_mode", "sequential")),
                inter_op_threads=_count(options.get("inter_op_num_threads", 0)),
                optimization=str(options.get("graph_optimization_level", "all")),
                memory_pattern=_flag(options.get("enable_mem_pattern", True)),
                cpu_arena=_flag(options.get("enable_cpu_mem_arena", True)),
                io_binding=_flag(data.get("io_binding", True)),
                cuda_options=tuple(provider_options.items()),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise BenchmarkError(f"malformed session settings: {err}") from None


# The fields of Settings.to_dict().
_SETTINGS_FIELDS = frozenset({"provider", "session_options", "session_config_entries",
                              "provider_options", "io_binding"})


def _count(value: Any) -> int:
    """A whole number of 0 or more, as JSON holds one (not 1.5, not true)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a whole number of 0 or more, got {value!r}")
    return value


def _switch(value: Any) -> bool:
    """A session configuration entry's "0" or "1"."""
    if value not in ("0", "1"):
        raise ValueError(f"expected \"0\" or \"1\", got {value!r}")
    return value == "1"


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _session_options(
    settings: Settings, *, profile_prefix: str | None = None
) -> onnxruntime.SessionOptions:
    ort = _ort()
    options = ort.SessionOptions()
    options.intra_op_num_threads = settings.threads
    options.inter_op_num_threads = settings.inter_op_threads
    options.execution_mode = (ort.ExecutionMode.ORT_PARALLEL if settings.execution_mode ==
                              "parallel" else ort.ExecutionMode.ORT_SEQUENTIAL)
    options.enable_mem_pattern = settings.memory_pattern
    options.enable_cpu_mem_arena = settings.cpu_arena
    options.add_session_config_entry(
        "session.intra_op.allow_spinning", "1" if settings.allow_spinning else "0"
    )
    if settings.dynamic_block_base is not None:
        options.add_session_config_entry(
            "session.dynamic_block_base", str(settings.dynamic_block_base)
        )
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    return options


def _providers(settings: Settings, *, cuda_graph: bool) -> list[str | tuple[str, dict[str, str]]]:
    if settings.provider == "cpu":
        return [PROVIDERS["cpu"]]
    cuda_options = settings.provider_options()
    cuda_options["enable_cuda_graph"] = "1" if cuda_graph else "0"
    return [(PROVIDERS["cuda"], cuda_options), PROVIDERS["cpu"]]


def open_session(
    config: Config, settings: Settings, *, profile_prefix: str | None = None
) -> tuple[onnxruntime.InferenceSession, float]:
    """A session for ``config`` and its creation time in ms; profiling sessions never use CUDA
    graphs (they only count nodes)."""
    options = _session_options(settings, profile_prefix=profile_prefix)
    cuda_graph = settings.cuda_graph and profile_prefix is None
    started = time.perf_counter()
    try:
        session = model_io.ort_session(
            config.model,
            optimization=config.optimization,
            providers=_providers(settings, cuda_graph=cuda_graph),
            options=options,
        )
    except Exception as err:  # noqa: BLE001 - ORT raises its own exception types
        raise BenchmarkError(
            f"ONNX Runtime cannot open the "
            f"{'model' if config.label == 'model' else config.label + ' model'} on "
            f"{settings.provider} with these settings: "
            f"{first_line(err)}", model=config.model_label,
        ) from None
    return session, (time.perf_counter() - started) * 1e3


def parse_profile(events: Sequence[Mapping[str, Any]], *, provider: str = "cpu") -> Placement:
    """Placement from ORT profile events: each node's ``*_kernel_time`` event names its op
    type and provider; a node is counted once however many runs the profile covers."""
    seen: dict[str, tuple[str, str]] = {}
    for event in events:
        if event.get("cat") != "Node":
            continue
        name = str(event.get("name", ""))
        if not name.endswith("_kernel_time"):
            continue
        args = event.get("args") or {}
        node_provider = args.get("provider")
        if not node_provider:
            continue
        seen[name[: -len("_kernel_time")]] = (str(args.get("op_name", "?")), str(node_provider))
    placement = Placement()
    op_types: dict[str, Counter[str]] = {}
    for node_name, (op_type, node_provider) in seen.items():
        placement.nodes[node_provider] = placement.nodes.get(node_provider, 0) + 1
        op_types.setdefault(node_provider, Counter())[op_type] += 1
        if op_type in _MEMCPY:
            placement.memcpy_nodes += 1
        elif (
            provider == "cuda"
            and node_provider == "CPUExecutionProvider"
            and op_type not in _CPU_BY_DESIGN
        ):
            placement.cpu_fallback[op_type] = placement.cpu_fallback.get(op_type, 0) + 1
            placement.cpu_fallback_nodes.append(node_name)
    placement.op_types = {p: dict(sorted(c.items())) for p, c in sorted(op_types.items())}
    placement.nodes = dict(sorted(placement.nodes.items()))
    return placement


def profile(
    config: Config, settings: Settings, feeds: Mapping[str, np.ndarray]
) -> tuple[Placement, dict[str, np.ndarray]]:
    """Placement of ``config``, and the outputs of one run (for their shapes)."""
    with model_io.temporary_folder("profile") as folder:
        session, _ = open_session(config, settings, profile_prefix=str(folder / "profile"))
        feed = check_feeds(config.label, session, feeds)
        names = [o.name for o in session.get_outputs()]
        try:
            for _ in range(_PROFILE_RUNS):
                values = session.run(names, feed)
        except Exception as err:  # noqa: BLE001
            raise ValidationInputError(
                f"the {config.label} model does not run on the given inputs: {first_line(err)}",
                hint=RUN_HINT,
                model=config.model_label,
            ) from None
        path = session.end_profiling()
        with open(path, encoding="utf-8") as handle:
            events = json.load(handle)
    return parse_profile(events, provider=settings.provider), dict(zip(names, values))


# What a timed call is about, by its arm's label: bench's two models and profile's.
_TIMED = {"candidate": ("the candidate model", "candidate"),
          "baseline": ("the baseline model", "baseline"),
          "model": ("the model", None), "other": ("the other model", None)}


class RunFailed(ValidationInputError, BenchmarkError):
    """A timed call ONNX Runtime refused: the inputs' fault for bench and profile, a
    candidate's to drop for tune (it catches :class:`BenchmarkError`)."""


class Timer:
    """Times one call of one session, in milliseconds. On CUDA with ``io_binding`` the inputs
    are copied to the device once and the outputs pre-allocated there (at the shapes of
    ``outputs``, or of one untimed run when not given), so the timed call moves no data between
    host and device; the clock stops after the device synchronizes."""

    def __init__(
        self,
        session: onnxruntime.InferenceSession,
        feeds: Mapping[str, np.ndarray],
        provider: str,
        outputs: Mapping[str, np.ndarray] | None = None,
        *,
        io_binding: bool = True,
        config: Config | None = None,
    ) -> None:
        self.session = session
        self.config = config  # what a failed call is about
        self.names = [o.name for o in session.get_outputs()]
        self.feeds = dict(feeds)
        self.binding: Any = None
        self._keep: list[Any] = []
        # A sequence or a map (a list, a dict) has no device buffer to bind: run per call.
        if provider == "cuda" and io_binding and all(
                isinstance(v, np.ndarray) for v in self.feeds.values()):
            if outputs is None:
                try:
                    outputs = dict(zip(self.names, session.run(self.names, self.feeds)))
                except Exception as err:  # noqa: BLE001 - ORT raises several unrelated types
                    raise self._failed(err) from None
            if all(isinstance(v, np.ndarray) for v in outputs.values()):
                self._bind(outputs)

    def _bind(self, outputs: Mapping[str, np.ndarray]) -> None:
        # Outputs are bound at the shapes one run produced, so a CUDA graph sees the same
        # addresses every replay.
        ort = _ort()
        binding = self.session.io_binding()
        for name, array in self.feeds.items():
            value = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), "cuda", 0)
            binding.bind_ortvalue_input(name, value)
            self._keep.append(value)
        for name in self.names:
            array = np.asarray(outputs[name])
            value = ort.OrtValue.ortvalue_from_shape_and_type(
                list(array.shape), array.dtype, "cuda", 0
            )
            binding.bind_ortvalue_output(name, value)
            self._keep.append(value)
        self.binding = binding

    def __call__(self) -> float:
        try:
            if self.binding is not None:
                started = time.perf_counter_ns()
                self.session.run_with_iobinding(self.binding)
                self.binding.synchronize_outputs()
                return (time.perf_counter_ns() - started) / 1e6
            started = time.perf_counter_ns()
            self.session.run(self.names, self.feeds)
            return (time.perf_counter_ns() - started) / 1e6
        except Exception as err:  # noqa: BLE001 - ORT raises several unrelated types
            raise self._failed(err) from None

    def _failed(self, err: Exception) -> RunFailed:
        """ONNX Runtime's failure of a call, as one line naming what was timed."""
        label = self.config.label.removesuffix("_profiled") if self.config else ""
        what, model = _TIMED.get(label, (f"the session {label!r}" if label else "the session",
                                         None))
        return RunFailed(f"{what} does not run on the given inputs: {first_line(err)}",
                         hint=RUN_HINT, model=model)

    def close(self) -> None:
        """Let go of the session and its device buffers (its thread pool ends with it)."""
        self.binding = None
        self._keep.clear()
        self.session = None  # type: ignore[assignment]


# --------------------------------------------------------------------------------------------
# Interleaved measurement


@dataclasses.dataclass
class Arm:
    """One configuration to time: a model at an optimization level, its session settings and
    its inputs; ``profile_prefix`` turns ORT's profiler on (its files are in the result)."""

    label: str
    config: Config
    settings: Settings
    feeds: Mapping[str, np.ndarray]
    outputs: Mapping[str, np.ndarray] | None = None
    profile_prefix: str | None = None


@dataclasses.dataclass
class Measurement:
    """What :func:`measure` timed, by arm label. ``times[label][round]`` holds that round's
    calls (one together, a block alone); ``created_ms`` each session opening's time;
    ``peak_bytes`` the median over openings of the resident memory a session added at its peak
    (alone, on Linux; else None); ``traces`` the profile files written."""

    together: bool
    times: dict[str, list[list[float]]]
    created_ms: dict[str, list[float]]
    session_providers: dict[str, list[str]]
    peak_bytes: dict[str, int | None]
    traces: dict[str, list[str]]
    # the cores other processes kept busy on average while it ran (Linux; else None)
    others_cores: float | None = None

    @property
    def busy(self) -> str | None:
        """Why the machine was too busy for its figures to be trusted, or None."""
        return busy_warning(self.others_cores)

    def calls(self, label: str) -> list[float]:
        """Every timed call of ``label``, in order."""
        return [t for block in self.times[label] for t in block]

    def stats(self, label: str, optimization: str, *, scale: float = 1.0) -> LatencyStats:
        """Median, p90, min and mean of ``label``'s calls (each divided by ``scale``)."""
        created = self.created_ms[label]
        return summarize(label, optimization, [t / scale for t in self.calls(label)],
                         float(np.median(created)) if created else 0.0)


def measure(
    arms: Sequence[Arm],
    *,
    warmup: int,
    rounds: int,
    calls: int = 1,
    together: bool | None = None,
    progress: Progress | None = None,
    step: str = "bench",
    memory: bool = True,
) -> Measurement:
    """Time ``arms`` in interleaved rounds (see the module docstring). ``together`` (default:
    unless an arm lets its threads spin) keeps every session open; else one is alive at a time
    and each round opens, warms up (``warmup`` calls), times ``calls`` calls of, and closes each
    arm, reading its peak memory unless ``memory`` is false (trimming the heap and reading the
    kernel's counters cost about a millisecond an opening). ``progress(step, done, total)`` is
    called after each warm-up step and each round."""
    if rounds < 1 or warmup < 0 or calls < 1:
        raise BenchmarkError(f"rounds and calls must be >= 1 and warm-up >= 0 (got {rounds}, "
                             f"{calls}, {warmup})")
    labels = [arm.label for arm in arms]
    if len(set(labels)) != len(labels):
        raise ValueError(f"arm labels must differ: {labels}")
    if together is None:
        together = not any(arm.settings.allow_spinning for arm in arms)
    result = Measurement(together, {label: [] for label in labels},
                         {label: [] for label in labels}, {}, {label: None for label in labels},
                         {label: [] for label in labels})
    with others_watched() as others:
        if together:
            _measure_together(arms, result, warmup, rounds, calls, progress, step)
        else:
            _measure_alone(arms, result, warmup, rounds, calls, progress, step, memory)
    result.others_cores = others()
    return result


ALONE_ROUNDS = 10


def measure_runs(
    arms: Sequence[Arm], *, warmup: int, runs: int, progress: Progress | None = None,
    step: str = "bench",
) -> Measurement:
    """``runs`` timed calls of each arm, the way ``bench`` takes them: every session open
    together, ``warmup`` calls then ``runs`` rounds of one call, when no arm lets its threads
    spin; else one session alive at a time, in :data:`ALONE_ROUNDS` rounds of ``runs /
    ALONE_ROUNDS`` calls, each opening warmed up by ``warmup // 5`` calls."""
    if any(arm.settings.allow_spinning for arm in arms):
        rounds = min(runs, ALONE_ROUNDS)
        return measure(arms, warmup=max(1, warmup // 5) if warmup else 0, rounds=rounds,
                       calls=-(-runs // rounds), together=False, progress=progress, step=step)
    return measure(arms, warmup=warmup, rounds=runs, together=True, progress=progress,
                   step=step)


def _rotated(items: list[Any], index: int) -> list[Any]:
    """Round ``index``'s order: ``items`` rotated by ``index`` places."""
    shift = index % len(items)
    return items[shift:] + items[:shift]


def _open(arm: Arm, result: Measurement) -> Timer:
    session, created = open_session(arm.config, arm.settings, profile_prefix=arm.profile_prefix)
    result.created_ms[arm.label].append(created)
    providers = list(session.get_providers())
    result.session_providers[arm.label] = providers
    if arm.settings.provider == "cuda" and PROVIDERS["cuda"] not in providers:
        raise ProviderUnavailableError(
            "the CUDA provider loaded once but not for the measurement", hint=CUDA_FIX)
    feed = check_feeds(arm.config.label, session, arm.feeds)
    return Timer(session, feed, arm.settings.provider, arm.outputs,
                 io_binding=arm.settings.io_binding, config=arm.config)


def _close(arm: Arm, timer: Timer, result: Measurement) -> None:
    if arm.profile_prefix is not None:
        result.traces[arm.label].append(timer.session.end_profiling())
    timer.close()


def _measure_together(arms: Sequence[Arm], result: Measurement, warmup: int, rounds: int,
                      calls: int, progress: Progress | None, step: str) -> None:
    timers = {arm.label: _open(arm, result) for arm in arms}
    order = [arm.label for arm in arms]
    total = warmup + rounds
    for index in range(warmup):
        for label in order:
            timers[label]()
        if progress is not None:
            progress(step, index + 1, total)
    for index in range(rounds):
        for label in _rotated(order, index):
            timer = timers[label]
            result.times[label].append([timer() for _ in range(calls)])
        if progress is not None:
            progress(step, warmup + index + 1, total)
    for arm in arms:
        _close(arm, timers[arm.label], result)


def _measure_alone(arms: Sequence[Arm], result: Measurement, warmup: int, rounds: int,
                   calls: int, progress: Progress | None, step: str, memory: bool) -> None:
    peaks: dict[str, list[int]] = {arm.label: [] for arm in arms}
    watch = functools.partial(_peak_memory, collect=False) if memory else _no_peak
    for index in range(rounds):
        for arm in _rotated(list(arms), index):
            with watch() as peak:
                timer = _open(arm, result)
                session = weakref.ref(timer.session)
                for _ in range(warmup):
                    timer()
                result.times[arm.label].append([timer() for _ in range(calls)])
                used = peak()
            _close(arm, timer, result)
            del timer
            if session() is not None:  # held by a cycle: collect it before the next opens
                gc.collect()
            if used is not None:
                peaks[arm.label].append(used)
        if progress is not None:
            progress(step, index + 1, rounds)
    for label, values in peaks.items():
        result.peak_bytes[label] = int(np.median(values)) if values else None


# --------------------------------------------------------------------------------------------
# Memory


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _release_freed_memory(*, collect: bool = True) -> None:
    """Collect garbage (unless ``collect`` is false: a full collection of a large heap costs
    milliseconds, and a caller that saw its session freed has nothing to collect) and hand
    freed heap back to the kernel (glibc keeps it otherwise, and a later session reusing it
    would look as if it needed nothing)."""
    if collect:
        gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        _libc().malloc_trim(0)


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL("libc.so.6")


@contextlib.contextmanager
def _no_peak() -> Iterator[Callable[[], int | None]]:
    yield lambda: None


@contextlib.contextmanager
def _peak_memory(*, collect: bool = True) -> Iterator[Callable[[], int | None]]:
    """Yields a function that returns the bytes the resident set grew to above its size at
    the start (Linux: the high-water mark reset through ``/proc/self/clear_refs``); None where
    the kernel does not tell. ``collect``: collect garbage first."""
    _release_freed_memory(collect=collect)
    start = _status_kib("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")
        reset = True
    except OSError:
        reset = False

    def peak() -> int | None:
        high = _status_kib("VmHWM")
        if not reset or start is None or high is None:
            return None
        return max(0, high - start) * 1024

    yield peak


# --------------------------------------------------------------------------------------------
# Environment

# The share of the cores other processes may keep busy during a measurement before its figures
# are flagged: on a 2-core machine loaded by other jobs (load average 3.2), two identical
# files measured 1.26x apart with an interval clear of 1, in 5 of 6 runs; quiet, 0 of 12.
BUSY_SHARE = 0.25


# The shortest measurement the counters judge: they tick every 10 ms, and over a few ms one
# tick reads as cores (a 5-call bench of a tiny model read 4.1 of 2 cores busy).
_SHORTEST_WATCH = 0.5


def _cpu_busy_seconds() -> float | None:
    """Seconds every core of the machine has been busy (``/proc/stat``: all but idle and
    I/O wait, steal included: a hypervisor's other guests), None where it cannot be read."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = stat.readline().split()
        ticks = [int(v) for v in fields[1:]]
        return (sum(ticks) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)) / os.sysconf(
            "SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _own_seconds() -> float:
    """CPU seconds this process (every thread) and its reaped children have used."""
    import resource

    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                          resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@contextlib.contextmanager
def others_watched() -> Iterator[Callable[[], float | None]]:
    """Yields what gives, once the block is left, how many cores other processes kept busy on
    average during it (the machine's busy time less this process's), None where the kernel's
    counters cannot be read or the block was shorter than :data:`_SHORTEST_WATCH`."""
    busy, own, started = _cpu_busy_seconds(), _own_seconds(), time.perf_counter()
    result: list[float | None] = [None]

    def others() -> float | None:
        return result[0]

    try:
        yield others
    finally:
        now, wall = _cpu_busy_seconds(), time.perf_counter() - started
        if busy is not None and now is not None and wall >= _SHORTEST_WATCH:
            result[0] = min(float(os.cpu_count() or _usable_cores()), max(
                0.0, (now - busy) - (_own_seconds() - own)) / wall)


def _usable_cores() -> int:
    """The logical cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)


def busy_warning(others_cores: float | None) -> str | None:
    """The warning a measurement gets when other processes kept more than
    :data:`BUSY_SHARE` of the cores busy during it (at least half a core)."""
    cores = _usable_cores()
    if others_cores is None or others_cores <= max(0.5, BUSY_SHARE * cores):
        return None
    return (f"other processes kept {others_cores:.1f} of this machine's {cores} core(s) busy "
            f"during the measurement: they take the cores the sessions need, and two "
            f"identical models can then time apart; measure again on a quiet machine")


def thread_limit() -> int:
    """The most threads a session may be given here: four per logical core (at least 16)."""
    return max(16, 4 * (os.cpu_count() or 1))


def default_threads() -> int:
    """The physical cores this process may run on (hyper-threads of one core count once)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return max(1, (os.cpu_count() or 2) // 2)
    cores: set[tuple[str, str]] = set()
    for cpu in cpus:
        topology = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        try:
            with open(f"{topology}/physical_package_id", encoding="ascii") as package, \
                    open(f"{topology}/core_id", encoding="ascii") as core:
                cores.add((package.read().strip(), core.read().strip()))
        except OSError:
            return max(1, len(cpus))
    return max(1, len(cores))


def check_cuda_graph(
    models: Mapping[str, onnx.ModelProto], input_shapes: Mapping[str, Sequence[int]] | None,
    feeds_given: bool,
) -> None:
    """CUDA graphs replay a fixed sequence of kernels on fixed addresses: refuse models whose
    control flow or input shapes would change it (ORT's documented constraints)."""
    pinned = set(input_shapes or {})
    for label, model in models.items():
        flow = sorted({n.op_type for n in all_nodes(model.graph)} & _CONTROL_FLOW)
        if flow:
            raise BenchmarkError(
                f"cuda_graph: the {label} model has control-flow ops ({', '.join(flow)})",
                hint="CUDA graphs cannot capture If/Loop/Scan; benchmark without cuda_graph",
            )
        if feeds_given:
            continue
        dynamic = [
            value.name
            for value in graph_inputs(model)
            if value.name not in pinned
            and any(not d.HasField("dim_value") for d in value.type.tensor_type.shape.dim)
        ]
        if dynamic:
            raise BenchmarkError(
                f"cuda_graph: the {label} model's input(s) {', '.join(map(repr, dynamic))} have "
                "dynamic shapes",
                hint="fix their shapes with input_shapes=... (CUDA graphs need static shapes)",
            )


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    initializers = {init.name for init in model.graph.initializer}
    return [value for value in model.graph.input if value.name not in initializers]


def check_feeds(
    label: str, session: onnxruntime.InferenceSession, feeds: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The feeds ``session`` needs, by name; a missing one raises ValidationInputError."""
    needed = [i.name for i in session.get_inputs()]
    missing = [name for name in needed if name not in feeds]
    if missing:
        raise ValidationInputError(
            f"the {label} model needs input(s) {', '.join(map(repr, missing))} that the feeds "
            "lack",
            hint="give feeds for every input of both models",
        )
    return {name: feeds[name] for name in needed}
