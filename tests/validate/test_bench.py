"""Tests for graphfix.validate.bench: behaviour and statistics, never a timing claim."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from graphfix.providers import probe_provider
from graphfix.errors import BenchmarkError, ProviderUnavailableError, ValidationInputError
from graphfix.options import OptionError
from graphfix.validate import bench, timing
from graphfix.validate.parity import check_parity
from graphfix.validate.bench import (
    FASTER,
    NO_DIFFERENCE,
    SLOWER,
    BenchResult,
    Comparison,
    LatencyStats,
    benchmark,
    bootstrap_speedup,
    parse_profile,
    require_speedup,
    verdict,
)

TINY = {"runs": 5, "warmup": 1, "threads": 1, "provider": "cpu"}

CUDA_LOADS = probe_provider("cuda").loadable
needs_cuda = pytest.mark.skipif(
    not CUDA_LOADS,
    reason=f"the CUDA provider does not load here: {probe_provider('cuda').error}",
)


def _model(*, dynamic: bool = False) -> onnx.ModelProto:
    dim = "N" if dynamic else "1"
    return onnx.parser.parse_model(f"""
<ir_version: 8, opset_import: ["" : 17]>
g (float[{dim},16] x) => (float[{dim},16] y) {{
    w = Constant <value = float[16,16] {{{", ".join(["0.01"] * 256)}}}> ()
    a = MatMul (x, w)
    r = Relu (a)
    t = Transpose <perm = [1, 0]> (r)
    y = Transpose <perm = [1, 0]> (t)
}}""")


def _with_if() -> onnx.ModelProto:
    return onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[4] x, bool c) => (float[4] y) {
    y = If (c) <
        then_branch = t () => (float[4] a) { a = Relu (x) },
        else_branch = e () => (float[4] b) { b = Neg (x) }
    >
}""")


def _result(comparison: Comparison | None) -> BenchResult:
    stats = LatencyStats("candidate", "all", 1.0, 1.2, 0.9, 1.05, 5, 3.0)
    return BenchResult(
        provider="cpu", session_providers=["CPUExecutionProvider"], threads=1, warmup=1,
        runs=5, seed=0, cuda_graph=False, dynamic_block_base=None, allow_spinning=False,
        input_shapes={},
        candidate=stats, baseline=stats if comparison else None, comparison=comparison,
    )


# -- verdict and bootstrap on constructed samples ------------------------------------------------


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (1.01, 1.3, FASTER),
        (0.7, 0.99, SLOWER),
        (0.9, 1.1, NO_DIFFERENCE),
        (1.0, 1.2, NO_DIFFERENCE),  # touching 1 is not clearing it
        (0.8, 1.0, NO_DIFFERENCE),
    ],
)
def test_verdict_follows_the_interval(low: float, high: float, expected: str) -> None:
    assert verdict(low, high) == expected


def test_verdict_refuses_a_reversed_interval() -> None:
    with pytest.raises(ValueError, match="reversed"):
        verdict(1.2, 1.1)


def test_bootstrap_known_speedup_is_faster() -> None:
    rng = np.random.default_rng(1)
    candidate = rng.uniform(0.95, 1.05, 60)
    baseline = 2.0 * candidate * rng.uniform(0.98, 1.02, 60)
    result = bootstrap_speedup(baseline, candidate, seed=0)
    assert result.verdict == FASTER
    assert result.ci_low <= result.speedup <= result.ci_high
    assert 1.9 < result.ci_low and result.ci_high < 2.1
    assert result.speedup == pytest.approx(np.median(baseline) / np.median(candidate))


def test_bootstrap_known_slowdown_is_slower() -> None:
    rng = np.random.default_rng(2)
    baseline = rng.uniform(0.95, 1.05, 40)
    candidate = 1.5 * baseline
    result = bootstrap_speedup(baseline, candidate)
    assert result.verdict == SLOWER
    assert result.ci_high < 1.0
    assert result.speedup == pytest.approx(1 / 1.5)


def test_bootstrap_identical_samples_is_no_difference() -> None:
    rng = np.random.default_rng(3)
    times = rng.lognormal(0.0, 0.3, 50)
    shuffled = rng.permutation(times)
    result = bootstrap_speedup(times, shuffled)
    assert result.speedup == pytest.approx(1.0)
    assert result.verdict == NO_DIFFERENCE
    assert result.ci_low < 1.0 < result.ci_high


def test_bootstrap_pairing_cancels_shared_drift() -> None:
    """A drift that slows both models in the same rounds leaves the paired interval narrow."""
    drift = np.linspace(1.0, 3.0, 50)
    baseline = 1.2 * drift
    candidate = 1.0 * drift
    result = bootstrap_speedup(baseline, candidate)
    assert result.ci_low == pytest.approx(1.2) and result.ci_high == pytest.approx(1.2)
    assert result.verdict == FASTER


def test_bootstrap_is_seeded_and_contains_its_point() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.lognormal(0, 0.5, 3), rng.lognormal(0, 0.5, 3)
    first = bootstrap_speedup(a, b, seed=7)
    assert first == bootstrap_speedup(a, b, seed=7)
    for seed in range(20):
        c = bootstrap_speedup(a, b, seed=seed, resamples=50)
        assert c.ci_low <= c.speedup <= c.ci_high


def test_per_round_speedup_follows_openings_that_come_out_fast_or_slow() -> None:
    """Half the baseline's openings are slow (0.30 against 0.19 ms, as a sub-millisecond
    session's pinned threads make them), the candidate is 1.15x faster than its fast ones, and
    a slow stretch of the machine slows every session of a round. The pooled median sits
    between the modes and jumps as the resampled mix changes; the per-round ratios do not."""
    rng = np.random.default_rng(5)
    rounds = 20
    machine = rng.choice([1.0, 1.4], size=rounds, p=[0.8, 0.2])[:, None]
    slow = np.where(np.arange(rounds) % 2 == 0, 0.30, 0.19)[:, None]
    baseline = machine * slow * rng.uniform(0.98, 1.02, (rounds, 10))
    candidate = machine * (0.19 / 1.15) * rng.uniform(0.98, 1.02, (rounds, 10))
    pooled = bootstrap_speedup(baseline, candidate, seed=0)
    per_round = bootstrap_speedup(baseline, candidate, seed=0, per_round=True)
    expected = np.exp(np.mean(np.log([0.30 * 1.15 / 0.19, 1.15])))
    assert per_round.speedup == pytest.approx(expected, rel=0.02)
    assert per_round.verdict == FASTER
    assert per_round.ci_high / per_round.ci_low < pooled.ci_high / pooled.ci_low
    # the default against itself, openings shuffled between the two sides: no difference
    shuffled = rng.permutation(rounds)
    other = baseline[shuffled] / machine[shuffled] * machine
    same = bootstrap_speedup(baseline, other, seed=0, per_round=True)
    assert same.verdict == NO_DIFFERENCE


@pytest.mark.parametrize(
    ("a", "b", "options"),
    [
        ([1.0, 2.0], [1.0], {}),
        ([], [], {}),
        ([1.0], [0.0], {}),
        ([1.0], [1.0], {"confidence": 1.0}),
    ],
)
def test_bootstrap_rejects_bad_samples(a: list[float], b: list[float], options: dict) -> None:
    with pytest.raises(ValueError):
        bootstrap_speedup(a, b, **options)


# -- require_speedup ---------------------------------------------------------------------------


def test_require_speedup_passes_when_the_lower_bound_clears() -> None:
    require_speedup(_result(Comparison(1.3, 1.2, 1.4, 0.95, FASTER)), 1.1)


def test_require_speedup_raises_when_the_lower_bound_does_not_clear() -> None:
    # The point estimate clears 1.1; the interval does not.
    with pytest.raises(BenchmarkError, match=r"1\.1x not shown.*\[1\.050, 1\.400\]"):
        require_speedup(_result(Comparison(1.2, 1.05, 1.4, 0.95, FASTER)), 1.1)


def test_require_speedup_without_a_baseline_raises() -> None:
    with pytest.raises(BenchmarkError, match="no baseline"):
        require_speedup(_result(None), 1.0)


# -- placement ---------------------------------------------------------------------------------


def test_parse_profile_counts_nodes_once_and_flags_cpu_fallback() -> None:
    def event(name: str, op: str, provider: str) -> dict:
        return {"cat": "Node", "name": f"{name}_kernel_time",
                "args": {"op_name": op, "provider": provider}}

    events = [
        {"cat": "Session", "name": "model_run"},
        event("conv", "Conv", "CUDAExecutionProvider"),
        event("conv", "Conv", "CUDAExecutionProvider"),  # a second run
        event("copy", "MemcpyToHost", "CUDAExecutionProvider"),
        event("shape", "Shape", "CPUExecutionProvider"),
        event("nz", "NonZero", "CPUExecutionProvider"),
        {"cat": "Node", "name": "conv_fence_before", "args": {"op_name": "Conv"}},
    ]
    placement = parse_profile(events, provider="cuda")
    assert placement.nodes == {"CPUExecutionProvider": 2, "CUDAExecutionProvider": 2}
    assert placement.op_types["CUDAExecutionProvider"] == {"Conv": 1, "MemcpyToHost": 1}
    assert placement.memcpy_nodes == 1
    assert placement.cpu_fallback == {"NonZero": 1} and placement.cpu_fallback_nodes == ["nz"]
    assert parse_profile(events, provider="cpu").cpu_fallback == {}


def test_cpu_placement_puts_every_node_on_the_cpu_provider() -> None:
    result = benchmark(_model(), **TINY)
    placement = result.placement["candidate"]
    assert set(placement.nodes) == {"CPUExecutionProvider"}
    assert sum(placement.nodes.values()) >= 1
    assert placement.memcpy_nodes == 0 and placement.cpu_fallback == {}
    # no placement warning (a busy machine's, about the timing, is the machine's doing)
    assert not [w for w in result.warnings if "busy during the measurement" not in w]


# -- benchmark on the CPU ----------------------------------------------------------------------


def test_benchmark_against_a_baseline_has_the_full_structure() -> None:
    model = _model()
    result = benchmark(model, baseline=_model(), seed=3, **TINY)
    assert result.provider == "cpu"
    assert result.session_providers == ["CPUExecutionProvider"]
    assert result.threads == 1 and result.runs == 5 and result.warmup == 1
    assert result.input_shapes == {"x": [1, 16]}
    for stats in (result.candidate, result.baseline):
        assert stats is not None
        assert stats.optimization == "all" and stats.runs == 5
        assert 0 < stats.min_ms <= stats.median_ms <= stats.p90_ms
        assert stats.session_create_ms > 0
    assert result.ci_low <= result.speedup <= result.ci_high
    assert result.verdict == verdict(result.ci_low, result.ci_high)
    assert result.candidate_offline is None and result.offline_comparison is None
    assert set(result.placement) == {"candidate", "baseline"}


def test_benchmark_without_baseline_has_no_speedup() -> None:
    result = benchmark(_model(), **TINY)
    assert result.baseline is None and result.comparison is None
    assert result.speedup is None and result.verdict is None
    data = result.to_dict()
    assert data["speedup"] is None and data["verdict"] is None


def test_offline_adds_the_optimizations_off_figures() -> None:
    result = benchmark(_model(), baseline=_model(), offline=True, **TINY)
    assert result.candidate_offline is not None and result.baseline_offline is not None
    assert result.candidate_offline.optimization == "disabled"
    assert result.baseline_offline.optimization == "disabled"
    assert result.candidate_offline.session_create_ms > 0
    offline = result.offline_comparison
    assert offline is not None and offline.ci_low <= offline.speedup <= offline.ci_high
    both = result.both_offline_comparison
    assert both is not None and both.ci_low <= both.speedup <= both.ci_high
    assert set(result.placement) == {"candidate", "baseline", "candidate_offline",
                                     "baseline_offline"}


def test_to_dict_is_json_serializable_with_the_documented_keys() -> None:
    result = benchmark(_model(), baseline=_model(), offline=True, **TINY)
    data = json.loads(json.dumps(result.to_dict()))
    assert {
        "provider", "session_providers", "threads", "warmup", "runs", "seed", "cuda_graph",
        "dynamic_block_base", "allow_spinning", "input_shapes", "candidate", "baseline",
        "candidate_offline", "baseline_offline", "speedup", "ci_low", "ci_high", "confidence",
        "verdict", "offline_speedup", "both_offline_speedup", "placement", "warnings",
        "method", "settings", "baseline_settings", "model_nodes",
    } == set(data)
    assert set(data["candidate"]) == {"label", "optimization", "median_ms", "p90_ms", "min_ms",
                                      "mean_ms", "runs", "session_create_ms"}
    assert set(data["placement"]["candidate"]) == {"nodes", "op_types", "memcpy_nodes",
                                                   "cpu_fallback", "cpu_fallback_nodes"}
    assert data["verdict"] in (FASTER, SLOWER, NO_DIFFERENCE)


def test_progress_is_reported_for_every_round() -> None:
    calls: list[tuple[str, int, int]] = []
    benchmark(_model(), progress=lambda *args: calls.append(args), **TINY)
    assert calls[-1] == ("bench", 6, 6) and len(calls) == 6


def test_input_shapes_fix_dynamic_dimensions() -> None:
    result = benchmark(_model(dynamic=True), input_shapes={"x": [3, 16]}, **TINY)
    assert result.input_shapes == {"x": [3, 16]}


def test_given_feeds_are_used_and_checked() -> None:
    feeds = {"x": np.ones((2, 16), dtype=np.float32)}
    result = benchmark(_model(dynamic=True), feeds=feeds, **TINY)
    assert result.input_shapes == {"x": [2, 16]}
    with pytest.raises(ValidationInputError, match="'x'"):
        benchmark(_model(), feeds={"other": np.ones((1, 16), np.float32)}, **TINY)


def test_session_settings_are_applied_and_reported() -> None:
    result = benchmark(_model(), dynamic_block_base=4, allow_spinning=True, **TINY)
    assert result.dynamic_block_base == 4 and result.allow_spinning
    settings = timing.Settings("cpu", 2, 4, False, False)
    entries = timing._session_options(settings)
    assert entries.get_session_config_entry("session.dynamic_block_base") == "4"
    assert entries.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert entries.intra_op_num_threads == 2


@pytest.mark.parametrize(
    "options",
    [{"runs": 0}, {"warmup": -1}, {"threads": 0}, {"dynamic_block_base": 0}],
)
def test_bad_options_raise(options: dict) -> None:
    with pytest.raises(BenchmarkError):
        benchmark(_model(), **{**TINY, **options})


def test_an_unknown_provider_is_the_one_option_error_every_command_raises() -> None:
    with pytest.raises(OptionError, match="the provider must be one of auto, cpu, cuda, got 'tpu'"):
        benchmark(_model(), **{**TINY, "provider": "tpu"})
    with pytest.raises(OptionError, match="parity's provider must be one of cpu, cuda"):
        check_parity(_model(), _model(), provider="tpu")


def test_cuda_graph_needs_the_cuda_provider() -> None:
    with pytest.raises(BenchmarkError, match="cuda_graph needs the CUDA provider"):
        benchmark(_model(), cuda_graph=True, **TINY)


def test_default_threads_is_at_least_one() -> None:
    assert bench.default_threads() >= 1


# -- providers ---------------------------------------------------------------------------------


def test_cuda_that_does_not_load_is_a_clear_error() -> None:
    if CUDA_LOADS:
        pytest.skip("the CUDA provider loads here")
    with pytest.raises(ProviderUnavailableError, match="CUDA execution provider") as caught:
        benchmark(_model(), **{**TINY, "provider": "cuda"})
    # The fix fits what is missing: the driver alone is no pip install.
    from graphfix.providers import probe_provider

    driver_only = list(probe_provider("cuda").missing_libraries) == ["libcuda.so.1"]
    assert ("NVIDIA driver" if driver_only else "graphfix[cuda]") in (caught.value.hint or "")


def test_auto_falls_back_to_cpu_without_cuda() -> None:
    if CUDA_LOADS:
        pytest.skip("the CUDA provider loads here")
    result = benchmark(_model(), **{**TINY, "provider": "auto"})
    assert result.provider == "cpu"


@pytest.mark.cuda
@needs_cuda
def test_cuda_benchmark_binds_on_the_device() -> None:
    result = benchmark(_model(), baseline=_model(), **{**TINY, "provider": "cuda"})
    assert result.provider == "cuda"
    assert result.session_providers[0] == "CUDAExecutionProvider"
    assert "CUDAExecutionProvider" in result.placement["candidate"].nodes
    assert result.ci_low <= result.speedup <= result.ci_high


@pytest.mark.cuda
@needs_cuda
def test_cuda_graph_runs_a_static_model() -> None:
    result = benchmark(_model(), baseline=_model(), cuda_graph=True,
                       **{**TINY, "provider": "cuda"})
    assert result.cuda_graph and result.provider == "cuda"


@pytest.mark.cuda
@needs_cuda
def test_cuda_graph_refuses_control_flow_and_dynamic_shapes() -> None:
    cuda = {**TINY, "provider": "cuda"}
    with pytest.raises(BenchmarkError, match="control-flow"):
        benchmark(_with_if(), cuda_graph=True, **cuda)
    with pytest.raises(BenchmarkError, match="dynamic shapes"):
        benchmark(_model(dynamic=True), cuda_graph=True, **cuda)


def test_cuda_graph_constraints_are_checked_before_any_session() -> None:
    """The model checks need no GPU: they run on the model alone."""
    with pytest.raises(BenchmarkError, match=r"control-flow ops \(If\)"):
        timing.check_cuda_graph({"candidate": _with_if()}, None, feeds_given=False)
    with pytest.raises(BenchmarkError, match="'x' have dynamic shapes"):
        timing.check_cuda_graph({"candidate": _model(dynamic=True)}, None, feeds_given=False)
    timing.check_cuda_graph({"candidate": _model(dynamic=True)}, {"x": [1, 16]},
                            feeds_given=False)


def test_generated_inputs_are_sized_as_the_model_needs() -> None:
    """An audio front end (a 1-D convolution of kernel 400) rejects the first sizes of the
    ladders; bench (and profile and tune, which share its inputs) feed the first size it runs
    at, as parity does, instead of failing on the first try."""
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 1, T] x) => (float[1, 1, U] y) <float[1, 1, 400] w = {0.1}> {
        y = Conv <strides = [160]> (x, w)
    }""")
    model.graph.initializer[0].CopyFrom(onnx.numpy_helper.from_array(
        np.full((1, 1, 400), 0.01, np.float32), "w"))
    result = bench.benchmark(model, runs=2, warmup=0, provider="cpu")
    assert result.candidate.median_ms > 0


def test_a_throughput_configurations_batch_is_said_not_applied() -> None:
    """tune's throughput winner carries a batch size that a per-call timing does not apply:
    the run says so rather than re-checking another claim silently."""
    from graphfix.validate.bench import batch_not_applied
    from graphfix.validate.session_config import SessionConfig

    settings = timing.Settings.ort_defaults("cpu")
    assert batch_not_applied(SessionConfig(settings=settings)) is None
    note = batch_not_applied(SessionConfig(settings=settings, batch_size=16))
    assert note is not None and "batch_size=16" in note and "--input-shape" in note


def test_two_models_that_take_different_inputs_are_not_compared() -> None:
    """Their times say nothing of one another (bench --vs and profile --vs share this)."""
    other = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1,16] z) => (float[1,16] y) {
        y = Relu (z)
    }""")
    with pytest.raises(BenchmarkError, match="take different inputs") as caught:
        benchmark(_model(), baseline=other, **TINY)
    assert "the model only: x" in str(caught.value) and "the other only: z" in str(caught.value)


def test_input_shapes_the_model_refuses_are_said_before_onnx_runtime_runs() -> None:
    """Another rank, or a size where the signature fixes one: one clear line (ONNX Runtime's
    own said only that no size ran, or cut its message short)."""
    with pytest.raises(ValidationInputError, match="has 3 dimensions; the input has 2"):
        benchmark(_model(dynamic=True), input_shapes={"x": [1, 16, 3]}, **TINY)
    with pytest.raises(ValidationInputError, match="has 8 on axis 1, where the input's size"):
        benchmark(_model(), input_shapes={"x": [1, 8]}, **TINY)


def test_a_comparison_needs_five_rounds() -> None:
    """From one round an identical copy came out "0.562x, 95% interval [0.562, 0.562]:
    slower": a comparison from fewer than five rounds is refused, a latency alone is not."""
    import graphfix

    model = _model()
    with pytest.raises(BenchmarkError, match="runs >= 5"):
        bench.benchmark(model, baseline=model, runs=1, warmup=0, provider="cpu")
    with pytest.raises(BenchmarkError, match="runs >= 5"):
        graphfix.profile(model, vs=model, runs=4, warmup=0, provider="cpu")
    with pytest.raises(OptionError, match="bench.runs must be >= 5"):
        graphfix.optimize(model, bench=graphfix.BenchOptions(runs=3))
    assert bench.benchmark(model, runs=1, warmup=0, provider="cpu").comparison is None
