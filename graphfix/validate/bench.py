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
   Both sessions always get the same setting. With spinning on, the sessions are not open
   together: see 4.
   CUDA: inputs are copied to the device once and outputs pre-allocated there, both bound with
   IO binding, so a timed call holds no host-device copy; the clock is read after
   ``run_with_iobinding`` and a device synchronization. ``cudnn_conv_use_max_workspace`` is on;
   ``cuda_graph=True`` turns on CUDA graphs after checking their constraints up front (no
   If/Loop/Scan, static input shapes, every node on the CUDA provider).
3. Warm-up: ``warmup`` untimed calls of every session.
4. Rounds: ``runs`` rounds, each timing one call of every session. The order rotates from
   round to round (A B, B A, ...; with four sessions A B C D, B C D A, ...), so that drift
   (thermal, other processes, frequency scaling) and any advantage of a place in the round or
   of following a given session fall on every model alike. When idle threads may
   spin (``allow_spinning``, or a configuration that says so), one session is alive at a time
   instead (method ``"alone"``): ten rounds, each opening every configuration in turn, warming
   it up (``warmup // 5`` calls), timing a block of ``runs / 10`` calls and closing it.
   The rounds and the statistics are :mod:`graphfix.validate.timing`'s and
   :mod:`graphfix.validate.stats`'s, which ``profile`` and ``tune`` use too.
5. Per session: median, p90, min and mean of its per-call times.
6. Speedup = baseline median / candidate median, with a paired percentile bootstrap interval:
   round indices (with their blocks, alone) are resampled with replacement (seeded, 2000 resamples), both medians are
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

Settings: ``config`` (a ``graphfix.tune/1`` file, :mod:`graphfix.validate.session_config`)
gives both models the session settings ``graphfix tune`` chose, so that its claim is re-checked
apart from the search.

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
      "candidate": LatencyStats, "baseline": LatencyStats|null,
      "candidate_offline": LatencyStats|null, "baseline_offline": LatencyStats|null,   # offline=True
      "speedup": float|null, "ci_low": float|null, "ci_high": float|null,
      "confidence": float, "verdict": "faster"|"slower"|"no significant difference"|null,
      "offline_speedup": Comparison|null,       # baseline (ORT defaults) vs candidate_offline
      "both_offline_speedup": Comparison|null,  # baseline_offline vs candidate_offline
      "placement": {"candidate"|"baseline"|...: Placement},
      "warnings": [str],
      "method": "together"|"alone",             # how the sessions were interleaved (step 4)
      "settings": Settings,                     # the sessions' settings (graphfix.tune/1's)
      "baseline_settings": Settings|null,       # the baseline's, when a baseline ran
      "model_nodes": {"candidate": int, "baseline": int}  # each model's nodes as given
    }
    LatencyStats = {"label": str, "optimization": "all"|"disabled", "median_ms": float,
             "p90_ms": float, "min_ms": float, "mean_ms": float, "runs": int,
             "session_create_ms": float}
    Comparison = {"speedup": float, "ci_low": float, "ci_high": float,
                  "confidence": float, "verdict": str}
    Placement = {"nodes": {provider: int}, "op_types": {provider: {op type: int}},
                 "memcpy_nodes": int, "cpu_fallback": {op type: int},
                 "cpu_fallback_nodes": [node name]}
    Settings = graphfix.validate.session_config's "settings" (session options, session
               configuration entries, provider options, io_binding)
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from graphfix import layout, model_io, precision
from graphfix.graph import check_input_shapes, count_nodes
from graphfix.providers import resolve_provider
from graphfix.errors import BenchmarkError, ValidationInputError
from graphfix.options import (ConflictingOptionsError, OptionError, check_count, check_feeds,
                              check_fraction, check_path, check_progress, check_shapes)
from graphfix.feeds import fed_shape, load_feeds, make_feeds, text_as_str
from graphfix.validate.parity import compare_output, generated_feeds
from graphfix.validate.session_config import SessionConfig, model_digest, read_config
from graphfix.validate.stats import (
    FASTER,
    NO_DIFFERENCE,
    SLOWER,
    Comparison,
    LatencyStats,
    bootstrap_speedup,
    summarize,
    verdict,
)
from graphfix.validate.timing import (
    Arm,
    Config,
    Placement,
    Progress,
    Settings,
    check_cuda_graph,
    default_threads,
    measure_runs,
    parse_profile,
    profile,
)
from graphfix.report import num, shapes_text, table

__all__ = [
    "FASTER",
    "SLOWER",
    "NO_DIFFERENCE",
    "LatencyStats",
    "Comparison",
    "Placement",
    "BenchResult",
    "benchmark",
    "require_speedup",
    "bootstrap_speedup",
    "verdict",
    "summarize",
    "default_threads",
    "parse_profile",
    "session_settings",
    "settings_from_config",
    "feeds_by_model",
    "read_feeds", "format_bench"]

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# Results


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
    candidate: LatencyStats
    baseline: LatencyStats | None = None
    candidate_offline: LatencyStats | None = None
    baseline_offline: LatencyStats | None = None
    comparison: Comparison | None = None
    offline_comparison: Comparison | None = None
    # Both models with ORT's optimizations off (deployments that load pre-optimized models).
    both_offline_comparison: Comparison | None = None
    placement: dict[str, Placement] = dataclasses.field(default_factory=dict)
    warnings: list[str] = dataclasses.field(default_factory=list)
    # "together" (every session open, one call each per round) or "alone" (one session alive
    # at a time, a block of calls each per round: when threads spin).
    method: str = "together"
    settings: Settings | None = None
    baseline_settings: Settings | None = None
    # The nodes of each model as given (subgraphs and local functions counted), before ONNX
    # Runtime's own rewrites: what was compared.
    model_nodes: dict[str, int] = dataclasses.field(default_factory=dict)

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
        def stats(value: LatencyStats | None) -> dict[str, Any] | None:
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
            "method": self.method,
            "settings": self.settings.to_dict() if self.settings is not None else None,
            "baseline_settings": (self.baseline_settings.to_dict()
                                  if self.baseline_settings is not None else None),
            "model_nodes": dict(self.model_nodes),
        }


# --------------------------------------------------------------------------------------------
# Statistics


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
# Inputs


def _make_feeds(
    model: onnx.ModelProto, *, seed: int, input_shapes: Mapping[str, Sequence[int]] | None
) -> dict[str, np.ndarray]:
    """One set of generated inputs (see :mod:`graphfix.feeds`): dynamic dimensions at the
    first sizes of parity's ladders the model runs at, unless ``input_shapes`` fixes them."""
    return generated_feeds(model, seed=seed, input_shapes=input_shapes)


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
    config: SessionConfig | str | os.PathLike[str] | None = None,
    baseline_config: SessionConfig | str | os.PathLike[str] | None = None,
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
    default, see the module docstring). ``config``: a ``graphfix.tune/1`` configuration (or its
    file) whose session settings both models get instead (``threads``, ``dynamic_block_base``,
    ``allow_spinning`` and ``cuda_graph`` are then its to set). ``baseline_config``: other
    settings for the baseline (a configuration, or ``"ort-defaults"``: ONNX Runtime's default
    session, called without IO binding); without a ``baseline`` model the baseline is ``model``
    itself, so ``config=tuned, baseline_config="ort-defaults"`` re-checks what ``tune``
    claimed. ``progress(label, done, total)`` is called as rounds finish.
    """
    # A path or bytes is a model, as graphfix.load takes it.
    model = model_io.model_argument(model, "model", "benchmark")
    if baseline is not None:
        baseline = model_io.model_argument(baseline, "baseline", "benchmark")
    input_shapes = check_arguments(
        "benchmark", runs=runs, warmup=warmup, threads=threads,
        dynamic_block_base=dynamic_block_base, feeds=feeds, input_shapes=input_shapes,
        seed=seed, confidence=confidence, resamples=resamples,
        inputs=inputs, progress=progress)
    if baseline is not None or baseline_config is not None:
        check_compared_runs("benchmark", runs)
    check_input_shapes(model, input_shapes, "input shapes (--input-shape)")
    check_one_source("benchmark", feeds, inputs)
    if inputs is not None:
        feeds = read_feeds(inputs, model)
    config = load_config(config) if config is not None else None  # read once
    settings = session_settings(provider=provider, threads=threads,
                                dynamic_block_base=dynamic_block_base,
                                allow_spinning=allow_spinning, cuda_graph=cuda_graph,
                                config=config)
    used = settings.provider
    other = settings
    elsewhere = [tuned_elsewhere(config, model)]
    if baseline_config is not None:
        baseline = model if baseline is None else baseline
        if baseline_config != "ort-defaults":
            baseline_config = load_config(baseline_config)
            elsewhere.append(tuned_elsewhere(baseline_config, baseline))
        other = (Settings.ort_defaults(used) if baseline_config == "ort-defaults" else
                 settings_from_config(baseline_config, provider=used))
    models = {"candidate": model} | ({"baseline": baseline} if baseline is not None else {})
    by_label = {"candidate": settings, "baseline": other}
    if settings.cuda_graph or other.cuda_graph:
        check_cuda_graph(models, input_shapes, feeds is not None)
    by_model = feeds_by_model(model, baseline, feeds, seed, input_shapes)
    configs = [Config(label, m, by_label[label].optimization) for label, m in models.items()]
    if offline:
        configs += [Config(f"{label}_offline", m, "disabled") for label, m in models.items()]
    placements, outputs, warnings = _placements(configs, by_label, by_model)
    warnings += [w for w in (*elsewhere, batch_not_applied(config)) if w]
    arms = [Arm(c.label, c, by_label[c.model_label], by_model[c.model_label], outputs[c.label])
            for c in configs]
    measured = measure_runs(arms, warmup=warmup, runs=runs, progress=progress)
    if measured.busy:
        warnings.append(measured.busy)
    stats = {c.label: measured.stats(c.label, c.optimization) for c in configs}
    times = {c.label: measured.times[c.label] for c in configs}
    speedups = {} if baseline is None else _speedups(times, offline, confidence=confidence,
                                                       resamples=resamples, seed=seed)
    result = BenchResult(
        provider=used, session_providers=measured.session_providers["candidate"],
        threads=settings.threads, warmup=warmup, runs=runs, seed=seed,
        cuda_graph=settings.cuda_graph, dynamic_block_base=settings.dynamic_block_base,
        allow_spinning=settings.allow_spinning,
        input_shapes={name: fed_shape(value) for name, value in by_model["candidate"].items()},
        candidate=stats["candidate"], baseline=stats.get("baseline"),
        candidate_offline=stats.get("candidate_offline"),
        baseline_offline=stats.get("baseline_offline"),
        comparison=speedups.get("comparison"),
        offline_comparison=speedups.get("offline_comparison"),
        both_offline_comparison=speedups.get("both_offline_comparison"),
        placement=placements, warnings=warnings,
        method="together" if measured.together else "alone", settings=settings,
        baseline_settings=other if baseline is not None else None,
        model_nodes={"candidate": count_nodes(model),
                     **({"baseline": count_nodes(baseline)} if baseline is not None else {})},
    )
    if result.comparison is not None:
        logger.info("speedup %.3fx [%.3f, %.3f] %s on %s (%d rounds)",
                    result.comparison.speedup, result.comparison.ci_low,
                    result.comparison.ci_high, result.comparison.verdict, used, runs)
    return result


def session_settings(
    *, provider: str = "auto", threads: int | None = None,
    dynamic_block_base: int | None = None, allow_spinning: bool = False,
    cuda_graph: bool = False, config: SessionConfig | str | os.PathLike[str] | None = None,
) -> Settings:
    """The settings of a benchmark's sessions (``profile`` makes its sessions the same way):
    the configuration's when one is given, else these options on top of graphfix's timing
    defaults (the physical cores, sequential, idle threads not spinning)."""
    if config is not None:
        return settings_from_config(config, provider=provider, threads=threads,
                                    dynamic_block_base=dynamic_block_base,
                                    allow_spinning=allow_spinning, cuda_graph=cuda_graph)
    used = resolve_provider(provider)
    if cuda_graph and used != "cuda":
        raise BenchmarkError(
            "cuda_graph needs the CUDA provider", hint="use --provider cuda (provider='cuda'), or drop --cuda-graph"
        )
    return Settings(used, threads or default_threads(), dynamic_block_base, allow_spinning,
                    cuda_graph)


def settings_from_config(
    config: SessionConfig | str | os.PathLike[str], *, provider: str = "auto",
    threads: int | None = None, dynamic_block_base: int | None = None,
    allow_spinning: bool = False, cuda_graph: bool = False,
) -> Settings:
    """The session settings of a ``graphfix.tune/1`` configuration, checked against the
    provider that loads here; options that the configuration sets too are refused rather than
    silently mixed."""
    settings = load_config(config).settings
    clashes = [name for name, given in (("threads", threads is not None),
                                        ("dynamic_block_base", dynamic_block_base is not None),
                                        ("allow_spinning", allow_spinning),
                                        ("cuda_graph", cuda_graph)) if given]
    if clashes:
        raise BenchmarkError(
            f"{', '.join(clashes)} given with a configuration that sets the session",
            hint="edit the configuration file, or drop it",
        )
    if provider not in ("auto", settings.provider):
        raise BenchmarkError(
            f"the configuration is for the {settings.provider} provider, not {provider}",
            hint=f"use provider {settings.provider!r} (or auto) with this configuration",
        )
    resolve_provider(settings.provider)
    return settings


def load_config(config: SessionConfig | str | os.PathLike[str] | Mapping[str, Any]
                ) -> SessionConfig:
    """A ``graphfix.tune/1`` configuration given as itself, its file or its JSON as a dict."""
    if isinstance(config, SessionConfig):
        return config
    if isinstance(config, Mapping):  # a configuration's JSON, already read
        return SessionConfig.from_dict(config)
    if isinstance(config, (str, os.PathLike)):
        return read_config(config)
    raise BenchmarkError(f"config must be a graphfix.tune/1 file, its JSON as a dict, or a "
                         f"SessionConfig, not {type(config).__name__}")


def tuned_elsewhere(loaded: SessionConfig | None, model: onnx.ModelProto) -> str | None:
    """Why ``loaded`` may not be ``model``'s fastest: it was tuned for another graph."""
    if loaded is None:
        return None
    digest = loaded.model.get("sha256")
    if not digest or digest == model_digest(model):
        return None
    return (f"the configuration was tuned for {loaded.model.get('name', 'another model')!r}, "
            "whose graph differs from this model's: its settings are not measured for it")


def batch_not_applied(loaded: SessionConfig | None) -> str | None:
    """Why a throughput configuration's claim is not what this run measures: its batch size is
    not applied (the models are timed on the same inputs, per call)."""
    if loaded is None or not loaded.batch_size or loaded.batch_size == 1:
        return None
    return (f"the configuration's batch_size={loaded.batch_size} (tune's throughput objective) "
            "is not applied: this run times each call on the inputs it is given; to time that "
            f"batch, give its sizes with --input-shape (a batch of {loaded.batch_size})")


def read_feeds(inputs: str | os.PathLike[str], model: onnx.ModelProto) -> dict[str, Any]:
    """The first set of inputs in ``inputs`` (a ``.npz`` or a folder of ``input_N.pb``)."""
    return load_feeds(inputs, model)[0]


def _speedups(times: Mapping[str, list[list[float]]], offline: bool, *, confidence: float,
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


# The fewest rounds a speedup's interval is drawn from: from one round the interval is its own
# point, and an identical copy came out "0.562x, 95% interval [0.562, 0.562]: slower".
MIN_COMPARED_RUNS = 5
# Bounds on counts a caller gives: past them a run would not end, or not fit in memory.
MAX_RUNS = 10**7
MAX_THREADS = 4096
MAX_RESAMPLES = 10**6


class ConflictingBenchOptions(ConflictingOptionsError, BenchmarkError):
    """Options of a measurement that contradict each other: a :class:`BenchmarkError` of the
    library, a usage error on the command line (exit 2)."""


def check_one_source(function: str, feeds: Any, inputs: Any) -> None:
    """``feeds`` and ``inputs`` both give the inputs: one would be ignored."""
    if feeds is not None and inputs is not None:
        raise ConflictingBenchOptions(f"{function}(): feeds and inputs both give the inputs",
                                      hint="give one of them")


def check_compared_runs(function: str, runs: int) -> None:
    """A comparison of two models or settings needs :data:`MIN_COMPARED_RUNS` rounds."""
    if runs < MIN_COMPARED_RUNS:
        raise ConflictingBenchOptions(
            f"{function}: a comparison needs runs >= {MIN_COMPARED_RUNS} (got {runs}): an "
            f"interval drawn from fewer rounds cannot tell a difference from noise",
            hint="--runs 50 (the default) or more")


def check_arguments(function: str, *, runs: Any = 1, warmup: Any = 0, threads: Any = None,
                    dynamic_block_base: Any = None, feeds: Any = None, input_shapes: Any = None,
                    seed: Any = 0, confidence: Any = 0.95, resamples: Any = 1,
                    inputs: Any = None, progress: Any = None,
                    ) -> dict[str, tuple[int, ...]] | None:
    """The arguments ``benchmark``, ``profile`` and ``tune`` share, checked before anything
    runs (:class:`BenchmarkError` naming ``function``); the input shapes, as tuples."""
    try:
        check_count(function, "runs", runs, optional=False, high=MAX_RUNS)
        check_count(function, "warmup", warmup, low=0, optional=False, high=MAX_RUNS)
        check_count(function, "threads", threads, high=MAX_THREADS)
        check_count(function, "dynamic_block_base", dynamic_block_base, high=MAX_THREADS)
        check_count(function, "seed", seed, low=0, optional=False)
        check_count(function, "resamples", resamples, optional=False, high=MAX_RESAMPLES)
        check_fraction(function, "confidence", confidence)
        check_feeds(function, feeds)
        check_path(function, "inputs", inputs, optional=True)
        check_progress(function, progress)
        return check_shapes(function, input_shapes)
    except OptionError as err:
        raise BenchmarkError(err.args[0], hint=err.hint) from None


def feeds_by_model(
    model: onnx.ModelProto, baseline: onnx.ModelProto | None,
    feeds: Mapping[str, np.ndarray] | None, seed: int,
    input_shapes: Mapping[str, Sequence[int]] | None,
) -> dict[str, dict[str, np.ndarray]]:
    """Each model's inputs: the candidate's given or generated, the baseline's in its own
    layout when the passes changed the signature on request (graphfix.layout). Two models
    that take different inputs are refused: their times say nothing of one another."""
    if baseline is not None:
        ours, theirs = _required_inputs(model), _required_inputs(baseline)
        if ours != theirs:
            only = [f"{label} only: {', '.join(sorted(names))}" for label, names in (
                ("the model", ours - theirs), ("the other", theirs - ours)) if names]
            raise BenchmarkError(
                f"the two models take different inputs ({'; '.join(only)})",
                hint="compare a model with its optimized version (the same inputs)")
    if feeds is None and baseline is None:
        feeds = _make_feeds(model, seed=seed, input_shapes=input_shapes)
    elif feeds is None and baseline is not None:
        # The baseline may list more inputs (an IR-3 model's initializers, say, of fixed
        # shapes): generated as they are, with no session to find sizes the model takes.
        extra = make_feeds(baseline, seed=seed, runs=1, input_shapes=input_shapes)[0]
        # The sizes are ones both models take (the baseline may run at sizes baked into its
        # Reshapes only, the candidate at any).
        try:
            feeds = {**extra, **generated_feeds(
                model, seed=seed, input_shapes=input_shapes, also_model=baseline,
                also=_baseline_run(model, baseline, extra))}
        except ValidationInputError as err:  # say that it is the pair that has no size
            raise ValidationInputError(
                f"no generated inputs run on both models: {err.args[0]}",
                hint="the two models may take inputs of different shapes (a comparison feeds "
                "both the same inputs: compare a model with its optimized version); else give "
                "inputs both take with --inputs, or sizes with --input-shape") from None
    # A sequence (a list of arrays) or a map (a dict) is fed as it is, not made one array.
    arrays = text_as_str({name: value if isinstance(value, (list, dict)) else np.asarray(value)
                          for name, value in feeds.items()}, where="feeds")
    by_model = {"candidate": arrays}
    if baseline is not None:
        by_model["baseline"] = layout.from_candidate(
            arrays, layout.relative(layout.read(baseline), layout.read(model)))
        # Inputs the candidate lowered on request (graphfix.precision): the same values in the
        # baseline's own type.
        by_model["baseline"] = precision.for_model(by_model["baseline"], baseline, model)
    return by_model


def _baseline_run(model: onnx.ModelProto, baseline: onnx.ModelProto,
                  extra: Mapping[str, np.ndarray]) -> Callable[[Mapping[str, Any]], object]:
    """A run of ``baseline`` on a set generated for ``model`` (moved to its layout and types,
    its own further inputs added), which raises where the baseline refuses the set's sizes;
    its session opens at the first set it is given. A baseline that does not open on the CPU
    (a kernel only the GPU has) constrains nothing: its own run says what it takes."""
    session: list[Any] = []
    relative = layout.relative(layout.read(baseline), layout.read(model))

    def run(feed: Mapping[str, Any]) -> object:
        if not session:
            try:
                session.append(model_io.ort_session(baseline, optimization="disabled"))
            except Exception:  # noqa: BLE001 - ORT refuses in many ways
                session.append(None)
        if session[0] is None:
            return None
        moved = precision.for_model(layout.from_candidate(dict(feed), relative), baseline,
                                    model)
        wanted = {i.name for i in session[0].get_inputs()}
        return session[0].run(None, {k: v for k, v in {**extra, **moved}.items()
                                     if k in wanted})
    return run


def _required_inputs(model: onnx.ModelProto) -> set[str]:
    weights = {t.name for t in model.graph.initializer}
    return {i.name for i in model.graph.input if i.name not in weights}


def _placements(
    configs: Sequence[Config], by_label: Mapping[str, Settings],
    by_model: Mapping[str, Mapping[str, Any]],
) -> tuple[dict[str, Placement], dict[str, dict[str, np.ndarray]], list[str]]:
    """Where each model's nodes run (ORT's profile), the outputs of that run, and a warning per
    model whose compute nodes fell back to the CPU provider."""
    warnings: list[str] = []
    placements: dict[str, Placement] = {}
    outputs: dict[str, dict[str, np.ndarray]] = {}
    for config in configs:
        placements[config.label], outputs[config.label] = profile(
            config, by_label[config.model_label], by_model[config.model_label])
        fallback = placements[config.label].cpu_fallback
        if fallback:
            ops = ", ".join(f"{op} x{n}" for op, n in sorted(fallback.items()))
            warnings.append(
                f"{config.label}: {sum(fallback.values())} compute node(s) fell back to the CPU "
                f"provider ({ops}); Memcpy nodes: {placements[config.label].memcpy_nodes}"
            )
    if any(settings.cuda_graph for settings in by_label.values()):
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


# --------------------------------------------------------------------------------------------
# For a terminal


def format_bench(bench: dict[str, Any], name: str, other: str | None) -> str:
    """A benchmark (``BenchResult.to_dict()``) as a latency table and the speedup line."""
    labels = {"candidate": name, "baseline": other or "baseline",
              "candidate_offline": f"{name} (ORT opt off)",
              "baseline_offline": f"{other or 'baseline'} (ORT opt off)"}
    rows = []
    for key, label in labels.items():
        stats = bench.get(key)
        if stats:
            rows.append([label, f"{stats['median_ms']:.3f}", f"{stats['p90_ms']:.3f}",
                         f"{stats['min_ms']:.3f}", f"{stats['session_create_ms']:.0f}"])
    lines = table(rows, ["model", "median ms", "p90 ms", "min ms", "session ms"])
    lines.append(
        f"provider {bench['provider']} ({', '.join(bench['session_providers'])}), "
        f"{bench['threads']} thread(s), {bench['warmup']} warm-up + {bench['runs']} rounds"
        + (" (one session alive at a time: threads spin)"
           if bench.get("method") == "alone" else "")
    )
    if bench.get("input_shapes"):
        lines.append(f"inputs: {shapes_text(bench['input_shapes'])}")
    if bench.get("speedup") is not None:
        lines.append(
            f"speedup {num(bench['speedup'])}x, {bench['confidence']:.0%} interval "
            f"[{num(bench['ci_low'])}, {num(bench['ci_high'])}]: {bench['verdict']}"
        )
    offline = bench.get("offline_speedup")
    if offline:
        lines.append(
            f"{name} with ORT optimizations off vs {other or 'baseline'} under ORT defaults: "
            f"{num(offline['speedup'])}x [{num(offline['ci_low'])}, "
            f"{num(offline['ci_high'])}]: {offline['verdict']}"
        )
    both = bench.get("both_offline_speedup")
    if both:
        lines.append(
            f"both with ORT optimizations off: {num(both['speedup'])}x "
            f"[{num(both['ci_low'])}, {num(both['ci_high'])}]: {both['verdict']}"
        )
    for label, placement in bench.get("placement", {}).items():
        nodes = ", ".join(f"{p.replace('ExecutionProvider', '')} {n}"
                          for p, n in placement.get("nodes", {}).items())
        if nodes:
            lines.append(f"placement {labels.get(label, label)}: {nodes}, "
                         f"Memcpy {placement.get('memcpy_nodes', 0)}")
    lines += [f"warning: {w}" for w in bench.get("warnings", [])]
    return "\n".join(lines)


def not_a_batch(single: Mapping[str, Any], batched: Mapping[str, Any], batch: int
                 ) -> str | None:
    """Why the first axis of the inputs is not a batch of independent samples (None where it
    is): ``batched`` holds the outputs on ``batch`` copies of the inputs of ``single`` along
    that axis, and each must be ``single``'s output as many times over (a Scan's sequence
    axis, or two inputs whose first axes are two different sizes, tile into another input,
    and the speed per sample claimed would be no speed of the model's)."""
    for name, value in single.items():
        other = batched.get(name)
        if isinstance(value, list):
            expected: Any = value * batch
        elif isinstance(value, np.ndarray) and value.ndim:
            expected = np.concatenate([value] * batch, axis=0)
        else:
            return (f"the first axis of the inputs is no batch: output {name!r} has none "
                    "to grow with it")
        if not compare_output(name, expected, other).passed:
            shape = list(np.shape(other)) if isinstance(other, np.ndarray) else type(
                other).__name__
            return (f"the first axis of the inputs is no batch: on {batch} copies of the "
                    f"inputs along it, output {name!r} ({shape}) is not the output of one "
                    f"repeated {batch} times")
    return None
