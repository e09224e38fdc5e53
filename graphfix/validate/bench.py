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
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from graphfix import layout, model_io
from graphfix import precision
from graphfix.doctor import CUDA_FIX, probe_provider
from graphfix.validate.timing import (
    Config,
    Placement,
    Settings,
    Timer,
    check_cuda_graph,
    check_feeds,
    open_session,
    parse_profile,
    profile,
)
from graphfix.errors import (
    BenchmarkError,
    ProviderUnavailableError,
    first_line,
)

if TYPE_CHECKING:
    pass

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
        f"the CUDA execution provider cannot be loaded: "
        f"{first_line(RuntimeError(status.error))}{missing}",
        hint=f"{CUDA_FIX}; `graphfix doctor --provider cuda` shows the details",
    )


# --------------------------------------------------------------------------------------------
# Inputs


def _make_feeds(
    model: onnx.ModelProto, *, seed: int, input_shapes: Mapping[str, Sequence[int]] | None
) -> dict[str, np.ndarray]:
    """One set of generated inputs (see :mod:`graphfix.validate.feeds`): dynamic dimensions at
    their first size unless ``input_shapes`` fixes them."""
    from graphfix.validate.feeds import make_feeds

    return make_feeds(model, seed=seed, runs=1, input_shapes=input_shapes)[0]


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
    # A path or bytes is a model, as graphfix.load takes it.
    model = model_io.model_argument(model, "model", "benchmark")
    if baseline is not None:
        baseline = model_io.model_argument(baseline, "baseline", "benchmark")
    if runs < 1 or warmup < 0:
        raise BenchmarkError(f"runs must be >= 1 and warmup >= 0 (got {runs}, {warmup})")
    if (threads is not None and threads < 1) or (
        dynamic_block_base is not None and dynamic_block_base < 1
    ):
        raise BenchmarkError(f"threads and dynamic_block_base must be >= 1, got {threads} "
                             f"and {dynamic_block_base}")
    if inputs is not None and feeds is None:
        feeds = _read_feeds(inputs, model)
    settings = _settings(provider, threads, dynamic_block_base, allow_spinning, cuda_graph)
    used = settings.provider
    models = {"candidate": model} | ({"baseline": baseline} if baseline is not None else {})
    if cuda_graph:
        check_cuda_graph(models, input_shapes, feeds is not None)
    by_model = _feeds_by_model(model, baseline, feeds, seed, input_shapes)
    configs = [Config(label, m, "all") for label, m in models.items()]
    if offline:
        configs += [Config(f"{label}_offline", m, "disabled") for label, m in models.items()]
    placements, outputs, warnings = _placements(configs, settings, by_model)
    times, created, session_providers = _rounds(
        configs, settings, by_model, outputs, warmup, runs, progress)
    stats = {
        config.label: summarize(config.label, config.optimization, times[config.label],
                                created[config.label])
        for config in configs
    }
    speedups = {} if baseline is None else _speedups(times, offline, confidence=confidence,
                                                       resamples=resamples, seed=seed)
    result = BenchResult(
        provider=used, session_providers=session_providers, threads=settings.threads,
        warmup=warmup, runs=runs, seed=seed, cuda_graph=cuda_graph,
        dynamic_block_base=dynamic_block_base, allow_spinning=allow_spinning,
        input_shapes={name: [int(d) for d in value.shape]
                      for name, value in by_model["candidate"].items()},
        candidate=stats["candidate"], baseline=stats.get("baseline"),
        candidate_offline=stats.get("candidate_offline"),
        baseline_offline=stats.get("baseline_offline"),
        comparison=speedups.get("comparison"),
        offline_comparison=speedups.get("offline_comparison"),
        both_offline_comparison=speedups.get("both_offline_comparison"),
        placement=placements, warnings=warnings,
    )
    if result.comparison is not None:
        logger.info("speedup %.3fx [%.3f, %.3f] %s on %s (%d rounds)",
                    result.comparison.speedup, result.comparison.ci_low,
                    result.comparison.ci_high, result.comparison.verdict, used, runs)
    return result


def _settings(provider: str, threads: int | None, dynamic_block_base: int | None,
              allow_spinning: bool, cuda_graph: bool) -> Settings:
    used = resolve_provider(provider)
    if cuda_graph and used != "cuda":
        raise BenchmarkError(
            "cuda_graph needs the CUDA provider", hint="use provider='cuda' or drop cuda_graph"
        )
    return Settings(used, threads or default_threads(), dynamic_block_base, allow_spinning,
                    cuda_graph)


def _read_feeds(inputs: str | os.PathLike[str], model: onnx.ModelProto) -> dict[str, Any]:
    from graphfix.validate.feeds import load_feeds

    return load_feeds(inputs, model)[0]


def _speedups(times: Mapping[str, list[float]], offline: bool, *, confidence: float,
              resamples: int, seed: int) -> dict[str, Comparison]:
    """The candidate's speedup over the baseline, and with ``offline`` the same with the
    candidate's optimizations off and with both models' off."""
    pairs = {"comparison": ("baseline", "candidate")}
    if offline:
        pairs.update(offline_comparison=("baseline", "candidate_offline"),
                     both_offline_comparison=("baseline_offline", "candidate_offline"))
    return {key: bootstrap_speedup(times[slow], times[fast], confidence=confidence,
                                   resamples=resamples, seed=seed)
            for key, (slow, fast) in pairs.items()}


def _feeds_by_model(
    model: onnx.ModelProto, baseline: onnx.ModelProto | None,
    feeds: Mapping[str, np.ndarray] | None, seed: int,
    input_shapes: Mapping[str, Sequence[int]] | None,
) -> dict[str, dict[str, np.ndarray]]:
    """Each model's inputs: the candidate's given or generated, the baseline's in its own
    layout when the passes changed the signature on request (graphfix.layout)."""
    if feeds is None:
        feeds = _make_feeds(model, seed=seed, input_shapes=input_shapes)
        if baseline is not None:
            # The baseline may list more inputs (an IR-3 model's initializers, say).
            extra = _make_feeds(baseline, seed=seed, input_shapes=input_shapes)
            feeds = {**extra, **feeds}
    arrays = {name: np.asarray(value) for name, value in feeds.items()}
    by_model = {"candidate": arrays}
    if baseline is not None:
        by_model["baseline"] = layout.from_candidate(
            arrays, layout.relative(layout.read(baseline), layout.read(model)))
        # Inputs the candidate lowered on request (graphfix.precision): the same values in the
        # baseline's own type.
        by_model["baseline"] = precision.from_candidate(by_model["baseline"], model)
    return by_model


def _placements(
    configs: Sequence[Config], settings: Settings, by_model: Mapping[str, Mapping[str, Any]]
) -> tuple[dict[str, Placement], dict[str, dict[str, np.ndarray]], list[str]]:
    """Where each model's nodes run (ORT's profile), the outputs of that run, and a warning per
    model whose compute nodes fell back to the CPU provider."""
    warnings: list[str] = []
    placements: dict[str, Placement] = {}
    outputs: dict[str, dict[str, np.ndarray]] = {}
    for config in configs:
        placements[config.label], outputs[config.label] = profile(
            config, settings, by_model[config.model_label])
        fallback = placements[config.label].cpu_fallback
        if fallback:
            ops = ", ".join(f"{op} x{n}" for op, n in sorted(fallback.items()))
            warnings.append(
                f"{config.label}: {sum(fallback.values())} compute node(s) fell back to the CPU "
                f"provider ({ops}); Memcpy nodes: {placements[config.label].memcpy_nodes}"
            )
    if settings.cuda_graph:
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
    return placements, outputs, warnings


def _rounds(
    configs: Sequence[Config], settings: Settings, by_model: Mapping[str, Mapping[str, Any]],
    outputs: Mapping[str, dict[str, np.ndarray]], warmup: int, runs: int,
    progress: Progress | None,
) -> tuple[dict[str, list[float]], dict[str, float], list[str]]:
    """Interleaved rounds (alternating the order) after warm-up: each model's times, its
    session's creation time, and the candidate session's providers."""
    timers: dict[str, Timer] = {}
    created: dict[str, float] = {}
    session_providers: list[str] = []
    for config in configs:
        session, created[config.label] = open_session(config, settings)
        if config.label == "candidate":
            session_providers = list(session.get_providers())
        feed = check_feeds(config.label, session, by_model[config.model_label])
        timers[config.label] = Timer(session, feed, settings.provider, outputs[config.label])
    if settings.provider == "cuda" and "CUDAExecutionProvider" not in session_providers:
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
    return times, created, session_providers
