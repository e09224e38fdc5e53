"""Latency of a model, and its speedup over a baseline, on ONNX Runtime (CPU or CUDA).

    result = benchmark(optimized, baseline=original, provider="cpu", runs=50)
    result.speedup, (result.ci_low, result.ci_high), result.verdict
    require_speedup(result, 1.05)     # BenchmarkError unless the interval clears 1.05

Method
------
1. Sessions. Baseline and candidate each get a session under ORT's defaults (all graph
   optimizations on) on the same provider: ORT already runs its own rewrites online, so that is
   what an optimized model has to beat. ``offline=True`` adds a session of each with ORT's
   optimizations off: what a deployment sees that pre-optimized its model and turned the online
   rewrites off to load faster. Every session's creation time is reported.
2. CPU: ``threads`` intra-op threads (default: the physical cores this process may run on),
   sequential execution, optionally ``session.dynamic_block_base``. Idle intra-op threads do not
   spin (``session.intra_op.allow_spinning`` = 0) unless ``allow_spinning=True``: with two
   sessions' thread pools in one process, the pool that just finished keeps spinning on the cores
   the other session's call needs, which made per-call times bimodal (median and p90 two to three
   times apart for the same model) in A/A tests; without spinning an identical copy times alike.
   Both sessions always get the same setting.
   CUDA: inputs are copied to the device once and outputs pre-allocated there, both bound with
   IO binding, so a timed call holds no host-device copy; the clock is read after
   ``run_with_iobinding`` and a device synchronization. ``cudnn_conv_use_max_workspace`` is on;
   ``cuda_graph=True`` turns on CUDA graphs after checking their constraints up front (no
   If/Loop/Scan, static input shapes, every node on the CUDA provider).
3. Warm-up: ``warmup`` untimed calls of every session.
4. Rounds: ``runs`` rounds, each timing one call of every session. The order alternates from
   round to round (A B, B A, ...), so that drift (thermal, other processes, frequency scaling)
   and any advantage of going first or second fall on both models alike.
5. Per session: median, p90, min and mean of its per-call times.
6. Speedup = baseline median / candidate median, with a paired percentile bootstrap interval:
   round indices are resampled with replacement (seeded, 2000 resamples), both medians are
   recomputed on the same resampled rounds, and the interval is the 2.5 and 97.5 percentiles of
   their ratio (``confidence`` = 0.95). Resampling rounds rather than each sample on its own keeps
   the pairing that interleaving created: a slow round slows both models and cancels in the
   ratio, as it did in the measurement. The median of the per-round ratios would be a different
   estimate (the typical pairwise ratio) from the one reported, so it is not the statistic
   bootstrapped. With very few rounds a percentile interval can miss its own point estimate;
   it is then widened to include it.
7. Verdict from the interval, never from the point estimate alone: ``"faster"`` when its lower
   bound is above 1, ``"slower"`` when its upper bound is below 1, else
   ``"no significant difference"``.

Placement: a separate short session per configuration with ORT profiling on reports how many
nodes (and of which op types) each provider ran, and how many Memcpy nodes ORT inserted; on
CUDA, compute nodes left on the CPU provider give a warning.

``BenchResult.to_dict()`` (JSON-safe)::

    {
      "provider": "cpu"|"cuda",                 # what ran, after "auto" was resolved
      "session_providers": [str],               # the candidate session's get_providers()
      "threads": int, "warmup": int, "runs": int, "seed": int,
      "cuda_graph": bool, "dynamic_block_base": int|null, "allow_spinning": bool,
      "input_shapes": {input name: [int]},      # the shapes that were fed
      "candidate": Stats, "baseline": Stats|null,
      "candidate_offline": Stats|null, "baseline_offline": Stats|null,   # offline=True
      "speedup": float|null, "ci_low": float|null, "ci_high": float|null,
      "confidence": float, "verdict": "faster"|"slower"|"no significant difference"|null,
      "offline_speedup": Comparison|null,       # baseline (ORT defaults) vs candidate_offline
      "both_offline_speedup": Comparison|null,  # baseline_offline vs candidate_offline
      "placement": {"candidate"|"baseline"|...: Placement},
      "warnings": [str]
    }
    Stats = {"label": str, "optimization": "all"|"disabled", "median_ms": float,
             "p90_ms": float, "min_ms": float, "mean_ms": float, "runs": int,
             "session_create_ms": float}
    Comparison = {"speedup": float, "ci_low": float, "ci_high": float,
                  "confidence": float, "verdict": str}
    Placement = {"nodes": {provider: int}, "op_types": {provider: {op type: int}},
                 "memcpy_nodes": int, "cpu_fallback": {op type: int}}
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from graphfix import layout, model_io
from graphfix.doctor import CUDA_FIX, probe_provider
from graphfix.errors import (
    BenchmarkError,
    ProviderUnavailableError,
    ValidationInputError,
    first_line,
)

if TYPE_CHECKING:
    import onnxruntime

__all__ = [
    "FASTER",
    "SLOWER",
    "NO_DIFFERENCE",
    "Stats",
    "Comparison",
    "Placement",
    "BenchResult",
    "benchmark",
    "require_speedup",
    "bootstrap_speedup",
    "verdict",
    "summarize",
    "resolve_provider",
    "default_threads",
    "parse_profile",
]

logger = logging.getLogger(__name__)

FASTER = "faster"
SLOWER = "slower"
NO_DIFFERENCE = "no significant difference"

Progress = Callable[[str, int, int], None]

_CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})
_MEMCPY = frozenset({"MemcpyToHost", "MemcpyFromHost"})
# ORT keeps shape arithmetic on the CPU on purpose; these are not fallbacks worth a warning.
_CPU_BY_DESIGN = frozenset({"Shape", "Size"}) | _MEMCPY
_PROFILE_RUNS = 2


# --------------------------------------------------------------------------------------------
# Results


@dataclasses.dataclass
class Stats:
    """Per-call latency of one session, in milliseconds."""

    label: str
    optimization: str
    median_ms: float
    p90_ms: float
    min_ms: float
    mean_ms: float
    runs: int
    session_create_ms: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Comparison:
    """Speedup of a candidate over a baseline (baseline median / candidate median)."""

    speedup: float
    ci_low: float
    ci_high: float
    confidence: float
    verdict: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Placement:
    """Which provider ran which nodes, from ORT's profile of one session."""

    nodes: dict[str, int] = dataclasses.field(default_factory=dict)
    op_types: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    memcpy_nodes: int = 0
    # Compute nodes on the CPU provider in a CUDA session (op type -> count).
    cpu_fallback: dict[str, int] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class BenchResult:
    """What :func:`benchmark` measured. See the module docstring for ``to_dict()``."""

    provider: str
    session_providers: list[str]
    threads: int
    warmup: int
    runs: int
    seed: int
    cuda_graph: bool
    dynamic_block_base: int | None
    allow_spinning: bool
    input_shapes: dict[str, list[int]]
    candidate: Stats
    baseline: Stats | None = None
    candidate_offline: Stats | None = None
    baseline_offline: Stats | None = None
    comparison: Comparison | None = None
    offline_comparison: Comparison | None = None
    # Both models with ORT's optimizations off (deployments that load pre-optimized models).
    both_offline_comparison: Comparison | None = None
    placement: dict[str, Placement] = dataclasses.field(default_factory=dict)
    warnings: list[str] = dataclasses.field(default_factory=list)

    @property
    def speedup(self) -> float | None:
        return self.comparison.speedup if self.comparison else None

    @property
    def ci_low(self) -> float | None:
        return self.comparison.ci_low if self.comparison else None

    @property
    def ci_high(self) -> float | None:
        return self.comparison.ci_high if self.comparison else None

    @property
    def verdict(self) -> str | None:
        return self.comparison.verdict if self.comparison else None

    def to_dict(self) -> dict[str, Any]:
        def stats(value: Stats | None) -> dict[str, Any] | None:
            return value.to_dict() if value is not None else None

        return {
            "provider": self.provider,
            "session_providers": list(self.session_providers),
            "threads": self.threads,
            "warmup": self.warmup,
            "runs": self.runs,
            "seed": self.seed,
            "cuda_graph": self.cuda_graph,
            "dynamic_block_base": self.dynamic_block_base,
            "allow_spinning": self.allow_spinning,
            "input_shapes": {name: list(shape) for name, shape in self.input_shapes.items()},
            "candidate": self.candidate.to_dict(),
            "baseline": stats(self.baseline),
            "candidate_offline": stats(self.candidate_offline),
            "baseline_offline": stats(self.baseline_offline),
            "speedup": self.speedup,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "confidence": self.comparison.confidence if self.comparison else None,
            "verdict": self.verdict,
            "both_offline_speedup": (
                self.both_offline_comparison.to_dict() if self.both_offline_comparison else None
            ),
            "offline_speedup": (
                self.offline_comparison.to_dict() if self.offline_comparison else None
            ),
            "placement": {label: p.to_dict() for label, p in self.placement.items()},
            "warnings": list(self.warnings),
        }


# --------------------------------------------------------------------------------------------
# Statistics


def summarize(label: str, optimization: str, times_ms: Sequence[float], create_ms: float) -> Stats:
    """Median, p90, min and mean of one session's per-call times."""
    times = np.asarray(times_ms, dtype=np.float64)
    if times.size == 0:
        raise BenchmarkError(f"no timed runs for {label}", hint="use runs >= 1")
    return Stats(
        label=label,
        optimization=optimization,
        median_ms=float(np.median(times)),
        p90_ms=float(np.percentile(times, 90)),
        min_ms=float(times.min()),
        mean_ms=float(times.mean()),
        runs=int(times.size),
        session_create_ms=float(create_ms),
    )


def verdict(ci_low: float, ci_high: float) -> str:
    """"faster" when the whole interval is above 1, "slower" when it is below, else
    "no significant difference"."""
    if ci_low > ci_high:
        raise ValueError(f"interval [{ci_low}, {ci_high}] is reversed")
    if ci_low > 1.0:
        return FASTER
    if ci_high < 1.0:
        return SLOWER
    return NO_DIFFERENCE


def bootstrap_speedup(
    baseline_ms: Sequence[float],
    candidate_ms: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Comparison:
    """Speedup (baseline median / candidate median) and its paired percentile bootstrap interval.

    ``baseline_ms[i]`` and ``candidate_ms[i]`` must come from the same round: rounds, not single
    samples, are resampled, so what slowed a round for both models cancels in the ratio.
    """
    a = np.asarray(baseline_ms, dtype=np.float64)
    b = np.asarray(candidate_ms, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError("baseline and candidate need the same, non-zero number of rounds")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if np.any(a <= 0) or np.any(b <= 0):
        raise ValueError("times must be positive")
    point = float(np.median(a) / np.median(b))
    rng = np.random.default_rng(seed)
    ratios = np.empty(resamples, dtype=np.float64)
    chunk = max(1, 2_000_000 // a.size)  # bounds memory for long runs
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        rounds = rng.integers(0, a.size, size=(stop - start, a.size))
        ratios[start:stop] = np.median(a[rounds], axis=1) / np.median(b[rounds], axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = (float(v) for v in np.quantile(ratios, [tail, 1.0 - tail]))
    low, high = min(low, point), max(high, point)
    return Comparison(point, low, high, confidence, verdict(low, high))


def require_speedup(result: BenchResult, ratio: float) -> None:
    """Raise :class:`BenchmarkError` unless the interval's lower bound is above ``ratio``."""
    comparison = result.comparison
    if comparison is None:
        raise BenchmarkError(
            "no speedup was measured: the benchmark had no baseline",
            hint="benchmark against the original model (baseline=...)",
        )
    if comparison.ci_low > ratio:
        return
    raise BenchmarkError(
        f"required speedup {ratio:g}x not shown: measured {comparison.speedup:.3f}x, "
        f"{comparison.confidence:.0%} interval [{comparison.ci_low:.3f}, "
        f"{comparison.ci_high:.3f}] ({comparison.verdict}) on {result.provider}",
        hint="the interval's lower bound must clear the ratio; more runs narrow it",
    )


# --------------------------------------------------------------------------------------------
# Environment


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


def resolve_provider(provider: str) -> str:
    """"cpu" or "cuda": "auto" is cuda when the CUDA provider really loads, else cpu; "cuda"
    that does not load raises :class:`ProviderUnavailableError` naming what is missing."""
    if provider not in ("auto", "cpu", "cuda"):
        raise BenchmarkError(f"unknown provider {provider!r}", hint="use auto, cpu or cuda")
    if provider == "cpu":
        return "cpu"
    status = probe_provider("cuda")
    if status.loadable:
        return "cuda"
    if provider == "auto":
        logger.info("CUDA provider does not load (%s); benchmarking on the CPU", status.error)
        return "cpu"
    missing = ", ".join(status.missing_libraries)
    missing = f"; missing: {missing}" if missing else ""
    raise ProviderUnavailableError(
        f"the CUDA execution provider cannot be loaded: {status.error}{missing}",
        hint=f"{CUDA_FIX}; `graphfix doctor --provider cuda` shows the details",
    )


# --------------------------------------------------------------------------------------------
# Inputs


def _graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    initializers = {init.name for init in model.graph.initializer}
    return [value for value in model.graph.input if value.name not in initializers]


def _make_feeds(
    model: onnx.ModelProto, *, seed: int, input_shapes: Mapping[str, Sequence[int]] | None
) -> dict[str, np.ndarray]:
    """One set of generated inputs (see :mod:`graphfix.validate.feeds`): dynamic dimensions at
    their first size unless ``input_shapes`` fixes them."""
    from graphfix.validate.feeds import make_feeds

    return make_feeds(model, seed=seed, runs=1, input_shapes=input_shapes)[0]


def _check_feeds(
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


# --------------------------------------------------------------------------------------------
# Sessions


@dataclasses.dataclass
class _Config:
    label: str
    model: onnx.ModelProto
    optimization: str

    @property
    def model_label(self) -> str:
        """"candidate" or "baseline", whatever the optimization level."""
        return self.label.split("_")[0]


@dataclasses.dataclass(frozen=True)
class _Settings:
    """How every session of one benchmark is made (the same for baseline and candidate)."""

    provider: str
    threads: int
    dynamic_block_base: int | None
    allow_spinning: bool
    cuda_graph: bool


def _session_options(
    settings: _Settings, *, profile_prefix: str | None = None
) -> onnxruntime.SessionOptions:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = settings.threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
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


def _providers(settings: _Settings, *, cuda_graph: bool) -> list[str | tuple[str, dict[str, str]]]:
    if settings.provider == "cpu":
        return ["CPUExecutionProvider"]
    cuda_options = {
        "device_id": "0",
        "cudnn_conv_use_max_workspace": "1",
        "enable_cuda_graph": "1" if cuda_graph else "0",
    }
    return [("CUDAExecutionProvider", cuda_options), "CPUExecutionProvider"]


def _open(
    config: _Config, settings: _Settings, *, profile_prefix: str | None = None
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
            f"ONNX Runtime cannot open the {config.label} model on {settings.provider}: "
            f"{first_line(err)}"
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
    for op_type, node_provider in seen.values():
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
    placement.op_types = {p: dict(sorted(c.items())) for p, c in sorted(op_types.items())}
    placement.nodes = dict(sorted(placement.nodes.items()))
    return placement


def _profile(
    config: _Config, settings: _Settings, feeds: Mapping[str, np.ndarray]
) -> tuple[Placement, dict[str, np.ndarray]]:
    """Placement of ``config``, and the outputs of one run (for their shapes)."""
    with model_io.temporary_folder("profile") as folder:
        session, _ = _open(config, settings, profile_prefix=str(folder / "profile"))
        feed = _check_feeds(config.label, session, feeds)
        names = [o.name for o in session.get_outputs()]
        try:
            for _ in range(_PROFILE_RUNS):
                values = session.run(names, feed)
        except Exception as err:  # noqa: BLE001
            raise ValidationInputError(
                f"the {config.label} model does not run on the given inputs: {first_line(err)}",
                hint="check the input shapes (input_shapes=...) or pass feeds=...",
            ) from None
        path = session.end_profiling()
        with open(path, encoding="utf-8") as handle:
            events = json.load(handle)
    return parse_profile(events, provider=settings.provider), dict(zip(names, values))


class _Timer:
    """Times one call of one session, in milliseconds."""

    def __init__(
        self,
        session: onnxruntime.InferenceSession,
        feeds: Mapping[str, np.ndarray],
        provider: str,
        outputs: Mapping[str, np.ndarray],
    ) -> None:
        self.session = session
        self.names = [o.name for o in session.get_outputs()]
        self.feeds = dict(feeds)
        self.binding: Any = None
        self._keep: list[Any] = []
        if provider == "cuda":
            self._bind(outputs)

    def _bind(self, outputs: Mapping[str, np.ndarray]) -> None:
        # Inputs copied to the device once; outputs pre-allocated there at the shapes one run
        # produced, so the timed call moves no data between host and device (and a CUDA graph
        # sees the same addresses every replay).
        import onnxruntime as ort

        binding = self.session.io_binding()
        for name, array in self.feeds.items():
            value = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), "cuda", 0)
            binding.bind_ortvalue_input(name, value)
            self._keep.append(value)
        for name in self.names:
            array = outputs[name]
            value = ort.OrtValue.ortvalue_from_shape_and_type(
                list(array.shape), array.dtype, "cuda", 0
            )
            binding.bind_ortvalue_output(name, value)
            self._keep.append(value)
        self.binding = binding

    def __call__(self) -> float:
        if self.binding is not None:
            started = time.perf_counter_ns()
            self.session.run_with_iobinding(self.binding)
            self.binding.synchronize_outputs()
            return (time.perf_counter_ns() - started) / 1e6
        started = time.perf_counter_ns()
        self.session.run(self.names, self.feeds)
        return (time.perf_counter_ns() - started) / 1e6


def _check_cuda_graph(
    models: Mapping[str, onnx.ModelProto], input_shapes: Mapping[str, Sequence[int]] | None,
    feeds_given: bool,
) -> None:
    """CUDA graphs replay a fixed sequence of kernels on fixed addresses: refuse models whose
    control flow or input shapes would change it (ORT's documented constraints)."""
    pinned = set(input_shapes or {})
    for label, model in models.items():
        flow = sorted({n.op_type for n in _all_nodes(model.graph)} & _CONTROL_FLOW)
        if flow:
            raise BenchmarkError(
                f"cuda_graph: the {label} model has control-flow ops ({', '.join(flow)})",
                hint="CUDA graphs cannot capture If/Loop/Scan; benchmark without cuda_graph",
            )
        if feeds_given:
            continue
        dynamic = [
            value.name
            for value in _graph_inputs(model)
            if value.name not in pinned
            and any(not d.HasField("dim_value") for d in value.type.tensor_type.shape.dim)
        ]
        if dynamic:
            raise BenchmarkError(
                f"cuda_graph: the {label} model's input(s) {', '.join(map(repr, dynamic))} have "
                "dynamic shapes",
                hint="fix their shapes with input_shapes=... (CUDA graphs need static shapes)",
            )


def _all_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    nodes = list(graph.node)
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                nodes += _all_nodes(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for subgraph in attr.graphs:
                    nodes += _all_nodes(subgraph)
    return nodes


# --------------------------------------------------------------------------------------------
# The benchmark


def benchmark(
    model: onnx.ModelProto,
    *,
    baseline: onnx.ModelProto | None = None,
    provider: str = "auto",
    threads: int | None = None,
    warmup: int = 10,
    runs: int = 50,
    feeds: Mapping[str, np.ndarray] | None = None,
    inputs: str | os.PathLike[str] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    cuda_graph: bool = False,
    offline: bool = False,
    dynamic_block_base: int | None = None,
    allow_spinning: bool = False,
    seed: int = 0,
    confidence: float = 0.95,
    resamples: int = 2000,
    progress: Progress | None = None,
) -> BenchResult:
    """Latency of ``model`` and, with a ``baseline``, its speedup over it. See the module
    docstring for the method.

    ``provider``: "auto" (CUDA when it really loads, else CPU), "cpu" or "cuda" (raises
    :class:`ProviderUnavailableError` when it does not load). ``feeds``: one set of inputs by
    name (read from ``inputs``, a ``.npz`` or a folder of ``input_N.pb``, the first set, when
    given; made from ``seed`` and ``input_shapes`` otherwise). ``offline`` adds both models
    with ORT's optimizations off. ``allow_spinning`` lets idle ORT threads spin (off by
    default, see the module docstring). ``progress(label, done, total)`` is called as rounds finish.
    """
    if runs < 1 or warmup < 0:
        raise BenchmarkError(f"runs must be >= 1 and warmup >= 0 (got {runs}, {warmup})")
    if inputs is not None and feeds is None:
        from graphfix.validate.feeds import load_feeds

        feeds = load_feeds(inputs, model)[0]
    if threads is not None and threads < 1:
        raise BenchmarkError(f"threads must be >= 1, got {threads}")
    if dynamic_block_base is not None and dynamic_block_base < 1:
        raise BenchmarkError(f"dynamic_block_base must be >= 1, got {dynamic_block_base}")
    used = resolve_provider(provider)
    if cuda_graph and used != "cuda":
        raise BenchmarkError(
            "cuda_graph needs the CUDA provider", hint="use provider='cuda' or drop cuda_graph"
        )
    settings = _Settings(
        used, threads or default_threads(), dynamic_block_base, allow_spinning, cuda_graph
    )
    models = {"candidate": model} | ({"baseline": baseline} if baseline is not None else {})
    if cuda_graph:
        _check_cuda_graph(models, input_shapes, feeds is not None)
    if feeds is None:
        feeds = _make_feeds(model, seed=seed, input_shapes=input_shapes)
        if baseline is not None:
            # The baseline may list more inputs (an IR-3 model's initializers, say).
            extra = _make_feeds(baseline, seed=seed, input_shapes=input_shapes)
            feeds = {**extra, **feeds}
    feeds = {name: np.asarray(value) for name, value in feeds.items()}
    # The feeds are the candidate's; a baseline whose signature the passes changed on request
    # (graphfix.layout) takes them in its own layout.
    by_model = {"candidate": feeds}
    if baseline is not None:
        by_model["baseline"] = layout.from_candidate(
            feeds, layout.relative(layout.read(baseline), layout.read(model)))

    configs = [_Config(label, m, "all") for label, m in models.items()]
    if offline:
        configs += [_Config(f"{label}_offline", m, "disabled") for label, m in models.items()]

    warnings: list[str] = []
    placements: dict[str, Placement] = {}
    outputs: dict[str, dict[str, np.ndarray]] = {}
    for config in configs:
        placements[config.label], outputs[config.label] = _profile(
            config, settings, by_model[config.model_label])
        fallback = placements[config.label].cpu_fallback
        if fallback:
            ops = ", ".join(f"{op} x{n}" for op, n in sorted(fallback.items()))
            warnings.append(
                f"{config.label}: {sum(fallback.values())} compute node(s) fell back to the CPU "
                f"provider ({ops}); Memcpy nodes: {placements[config.label].memcpy_nodes}"
            )
    if cuda_graph:
        off_cuda = {
            label: {p: n for p, n in placement.nodes.items() if p != "CUDAExecutionProvider"}
            for label, placement in placements.items()
        }
        off_cuda = {label: nodes for label, nodes in off_cuda.items() if nodes}
        if off_cuda:
            detail = "; ".join(f"{label}: {nodes}" for label, nodes in off_cuda.items())
            raise BenchmarkError(
                f"cuda_graph: not every node runs on the CUDA provider ({detail})",
                hint="CUDA graphs need the whole model on CUDA; benchmark without cuda_graph",
            )

    timers: dict[str, _Timer] = {}
    created: dict[str, float] = {}
    session_providers: list[str] = []
    for config in configs:
        session, created[config.label] = _open(config, settings)
        if config.label == "candidate":
            session_providers = list(session.get_providers())
        feed = _check_feeds(config.label, session, by_model[config.model_label])
        timers[config.label] = _Timer(session, feed, used, outputs[config.label])
    if used == "cuda" and "CUDAExecutionProvider" not in session_providers:
        raise ProviderUnavailableError("the CUDA provider loaded once but not for the benchmark")

    order = [config.label for config in configs]
    total = warmup + runs
    for step in range(warmup):
        for label in order:
            timers[label]()
        if progress is not None:
            progress("bench", step + 1, total)
    times: dict[str, list[float]] = {label: [] for label in order}
    for round_index in range(runs):
        for label in order if round_index % 2 == 0 else reversed(order):
            times[label].append(timers[label]())
        if progress is not None:
            progress("bench", warmup + round_index + 1, total)

    stats = {
        config.label: summarize(config.label, config.optimization, times[config.label],
                                created[config.label])
        for config in configs
    }
    comparison = offline_comparison = both_offline = None
    if baseline is not None:
        comparison = bootstrap_speedup(
            times["baseline"], times["candidate"],
            confidence=confidence, resamples=resamples, seed=seed,
        )
        if offline:
            offline_comparison = bootstrap_speedup(
                times["baseline"], times["candidate_offline"],
                confidence=confidence, resamples=resamples, seed=seed,
            )
            both_offline = bootstrap_speedup(
                times["baseline_offline"], times["candidate_offline"],
                confidence=confidence, resamples=resamples, seed=seed,
            )
    result = BenchResult(
        provider=used,
        session_providers=session_providers,
        threads=settings.threads,
        warmup=warmup,
        runs=runs,
        seed=seed,
        cuda_graph=cuda_graph,
        dynamic_block_base=dynamic_block_base,
        allow_spinning=allow_spinning,
        input_shapes={name: [int(d) for d in value.shape] for name, value in feeds.items()},
        candidate=stats["candidate"],
        baseline=stats.get("baseline"),
        candidate_offline=stats.get("candidate_offline"),
        baseline_offline=stats.get("baseline_offline"),
        comparison=comparison,
        offline_comparison=offline_comparison,
        both_offline_comparison=both_offline,
        placement=placements,
        warnings=warnings,
    )
    if comparison is not None:
        logger.info(
            "speedup %.3fx [%.3f, %.3f] %s on %s (%d rounds)",
            comparison.speedup, comparison.ci_low, comparison.ci_high, comparison.verdict,
            used, runs,
        )
    return result
