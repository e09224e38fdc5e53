"""The statistics of graphfix's measurements: per-session summaries, verdicts, and the paired
bootstrap interval of a speedup. ``bench``, ``profile`` and ``tune`` all read their times
through these functions.

Samples come in rounds. A round holds one call of each session (``bench``'s interleaved calls)
or a block of calls of each (``profile``'s and ``tune``'s one-session-at-a-time blocks); the
sessions of one round ran at nearly the same time, so what slowed the machine during a round
slowed all of them. The bootstrap resamples whole rounds, which keeps that pairing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from graphfix.errors import BenchmarkError

__all__ = [
    "FASTER",
    "SLOWER",
    "NO_DIFFERENCE",
    "STATISTICS",
    "LatencyStats",
    "Comparison",
    "Speedup",
    "summarize",
    "verdict",
    "bootstrap_speedup",
]

FASTER = "faster"
SLOWER = "slower"
NO_DIFFERENCE = "no significant difference"

STATISTICS: dict[str, float] = {"median": 0.5, "p90": 0.9, "p99": 0.99}
"""The statistics a speedup can compare, as quantiles of the per-call times."""


@dataclasses.dataclass
class LatencyStats:
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
    """Speedup of a candidate over a baseline (baseline statistic / candidate statistic)."""

    speedup: float
    ci_low: float
    ci_high: float
    confidence: float
    verdict: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Speedup(Comparison):
    """What a change bought: a :class:`Comparison` of ``statistic`` ("median", "p90", "p99",
    or "throughput": per-sample time at another batch size), with both sides' figures in ms
    (per sample for throughput)."""

    statistic: str
    baseline_ms: float
    candidate_ms: float

    @classmethod
    def of(cls, comparison: Comparison, statistic: str, baseline_ms: float,
           candidate_ms: float) -> Speedup:
        return cls(**dataclasses.asdict(comparison), statistic=statistic,
                   baseline_ms=baseline_ms, candidate_ms=candidate_ms)

    def describe(self) -> str:
        """``1.41x [1.38, 1.44] faster`` (with what was compared when it is not the median)."""
        what = "" if self.statistic == "median" else f" ({self.statistic})"
        return (f"{self.speedup:.2f}x [{self.ci_low:.2f}, {self.ci_high:.2f}]{what}: "
                f"{self.verdict}")


def summarize(label: str, optimization: str, times_ms: Sequence[float], create_ms: float) -> LatencyStats:
    """Median, p90, min and mean of one session's per-call times."""
    times = np.asarray(times_ms, dtype=np.float64).ravel()
    if times.size == 0:
        raise BenchmarkError(f"no timed runs for {label}", hint="use runs >= 1")
    return LatencyStats(
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


def _rounds(samples: Any, name: str) -> np.ndarray:
    """Samples as a (rounds, calls per round) array."""
    array = np.asarray(samples, dtype=np.float64)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2 or array.size == 0:
        raise ValueError(f"{name} needs a non-empty sequence of rounds")
    return array


def _statistic(values: np.ndarray, quantile: float) -> np.ndarray:
    """The statistic of each row (the median exactly, other quantiles interpolated)."""
    if quantile == 0.5:
        return np.median(values, axis=-1)
    return np.quantile(values, quantile, axis=-1)


def bootstrap_speedup(
    baseline_ms: Sequence[float] | Sequence[Sequence[float]],
    candidate_ms: Sequence[float] | Sequence[Sequence[float]],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    statistic: str = "median",
    per_round: bool = False,
) -> Comparison:
    """Speedup (baseline statistic / candidate statistic) and its paired percentile bootstrap
    interval.

    ``baseline_ms[i]`` and ``candidate_ms[i]`` must come from the same round: one time each, or
    a block of times each (a sequence per round; both sides the same number of rounds). Rounds,
    not single samples, are resampled, and the statistic (``median``, ``p90`` or ``p99`` of the
    per-call times) is recomputed over every call of the resampled rounds; what slowed a round
    for both sides cancels in the ratio.

    ``per_round``: for blocks that each come from their own opening of a session (``tune``'s),
    the speedup is instead the geometric mean over rounds of each round's ratio (the
    baseline's block statistic over the candidate's), resampled by round. A session's speed
    can depend on its opening (where the scheduler put its pinned threads: block medians of
    0.19 and 0.30 ms for one setting), and the median of the pooled calls of such a mixture
    jumps between its modes as the resampled mix changes; the mean of per-round log ratios
    moves smoothly with it, and estimates what an opening is expected to give.
    """
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}, got {statistic!r}")
    a = _rounds(baseline_ms, "baseline")
    b = _rounds(candidate_ms, "candidate")
    if a.shape[0] != b.shape[0]:
        raise ValueError("baseline and candidate need the same, non-zero number of rounds")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if np.any(a <= 0) or np.any(b <= 0):
        raise ValueError("times must be positive")
    quantile = STATISTICS[statistic]
    if per_round:
        return _per_round(a, b, quantile, confidence, np.random.default_rng(seed), resamples)
    point = float(_statistic(a.ravel(), quantile) / _statistic(b.ravel(), quantile))
    rng = np.random.default_rng(seed)
    rounds = a.shape[0]
    ratios = np.empty(resamples, dtype=np.float64)
    chunk = max(1, 2_000_000 // (rounds * max(a.shape[1], b.shape[1])))  # bounds memory
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        picked = rng.integers(0, rounds, size=(stop - start, rounds))
        ratios[start:stop] = (
            _statistic(a[picked].reshape(stop - start, -1), quantile)
            / _statistic(b[picked].reshape(stop - start, -1), quantile)
        )
    return _interval(point, ratios, confidence)


def _per_round(a: np.ndarray, b: np.ndarray, quantile: float, confidence: float,
               rng: np.random.Generator, resamples: int) -> Comparison:
    """The ``per_round`` speedup of :func:`bootstrap_speedup` and its interval."""
    logs = np.log(_statistic(a, quantile) / _statistic(b, quantile))
    picked = rng.integers(0, logs.size, size=(resamples, logs.size))
    return _interval(float(np.exp(logs.mean())), np.exp(logs[picked].mean(axis=1)), confidence)


def _interval(point: float, ratios: np.ndarray, confidence: float) -> Comparison:
    """The percentile interval of the resampled ``ratios`` around ``point``."""
    tail = (1.0 - confidence) / 2.0
    low, high = (float(v) for v in np.quantile(ratios, [tail, 1.0 - tail]))
    # With very few rounds a percentile interval can miss its own point estimate.
    low, high = min(low, point), max(high, point)
    return Comparison(point, low, high, confidence, verdict(low, high))
