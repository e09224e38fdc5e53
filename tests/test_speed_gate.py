"""The speed gate's rule for a ratio its interval cannot tell from 1."""

from __future__ import annotations

import numpy as np

from graphfix.speed_gate import unclear
from graphfix.validate.stats import bootstrap_speedup


def _compared(ratio: float, noise: float, rounds: int = 12):
    rng = np.random.default_rng(0)
    baseline = rng.normal(1.0, noise, rounds).clip(0.05)
    candidate = rng.normal(1.0 / ratio, noise, rounds).clip(0.05)
    return bootstrap_speedup(baseline.tolist(), candidate.tolist())


def test_a_ratio_below_the_bar_that_its_interval_cannot_tell_from_one_is_measured_again():
    noisy = _compared(0.8, 0.5)
    assert noisy.verdict != "slower" and noisy.speedup < 0.95
    assert unclear(noisy)
    clear = _compared(0.7, 0.01)
    assert clear.verdict == "slower" and not unclear(clear)  # slower: written without it
    even = _compared(1.0, 0.05)
    assert not unclear(even)  # not shown slower, and no reason to think so
    assert not unclear(None)
