"""Run options: their checks, their defaults, and the growth policy's one home."""

from __future__ import annotations

import math

import pytest

from graphfix.options import (
    DEFAULT_MAX_GROWTH,
    GROWTH_ALLOWANCE,
    BenchOptions,
    OptionError,
    ParityOptions,
    RunOptions,
    check_max_growth,
    growth_limit,
)


def test_defaults() -> None:
    run = RunOptions()
    assert (run.ort_level, run.provider, run.max_growth) == ("basic", "auto", DEFAULT_MAX_GROWTH)
    assert ParityOptions().arguments() == {} and BenchOptions().arguments() == {}


@pytest.mark.parametrize("value, expected", [(0, None), (None, None), (2, 2.0), (1.0, 1.0)])
def test_max_growth_zero_means_any(value, expected) -> None:
    assert check_max_growth(value) == expected


@pytest.mark.parametrize("value", [0.5, -1, math.nan, math.inf, "2", True])
def test_bad_growth_is_refused(value) -> None:
    with pytest.raises(OptionError):
        check_max_growth(value)


def test_the_growth_limit() -> None:
    assert growth_limit(1000, 1.5, 10**9) == 1000 + GROWTH_ALLOWANCE
    assert growth_limit(10**6, 1.5, 10**9) == 1_500_000
    assert growth_limit(10**6, None, 123) == 123
    assert growth_limit(10**9, 1.5, 10**9) == 10**9


@pytest.mark.parametrize("options", [
    {"ort_level": "fast"}, {"provider": "tpu"}, {"input_shapes": {"x": [0, 3]}},
    {"input_shapes": {"x": "1x3"}}, {"inputs_as_nchw": [""]},
    {"input_shapes": {"x": [2 ** 63, 3]}},  # past ONNX's int64: a traceback deep inside before
])
def test_bad_run_options(options) -> None:
    with pytest.raises(OptionError):
        RunOptions(**options)


@pytest.mark.parametrize("options", [
    {"runs": 0}, {"seed": -1}, {"provider": "tpu"}, {"tolerances": {"*": (-1.0, None)}},
    {"tolerances": {"y": (None, math.nan)}},
])
def test_bad_parity_options(options) -> None:
    with pytest.raises(OptionError):
        ParityOptions(**options)


@pytest.mark.parametrize("options", [{"runs": 0}, {"warmup": -1}, {"threads": 0},
                                     {"provider": "tpu"}])
def test_bad_bench_options(options) -> None:
    with pytest.raises(OptionError):
        BenchOptions(**options)


def test_arguments_are_the_fields_set() -> None:
    assert ParityOptions(runs=3, seed=2).arguments() == {"runs": 3, "seed": 2}
    assert BenchOptions(runs=5, offline=True).arguments() == {"runs": 5, "offline": True}
    assert RunOptions(input_shapes={"x": [1, 3]}).input_shapes == {"x": (1, 3)}
