"""Tests for graphfix.validate.tune: the knob table, the decision rule on constructed samples,
and real searches whose outcome is clear (a setting that is slower for sure, a candidate that
equals the default, batch sizes on a tiny dynamic-batch model). Behaviour only: no timing
claim beyond a difference of several times."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import onnx
import pytest

from graphfix.model_io import LentModel
from graphfix.providers import probe_provider
from graphfix.errors import BenchmarkError
from graphfix.validate.bench import benchmark
from graphfix.validate.session_config import read_config
from graphfix.validate.stats import SLOWER, bootstrap_speedup
from graphfix.validate.timing import Settings
from graphfix.validate.tune import (
    KNOBS,
    OBJECTIVES,
    Candidate,
    RUNG_ROUNDS,
    Workload,
    _candidates,
    choose,
    facts_of,
    tune,
)
from graphfix.models.nhwc import mobilenetv2_nhwc
from tests.passes.test_ort_offline import cast_pair_read_by_a_branch

CUDA_LOADS = probe_provider("cuda").loadable
needs_cuda = pytest.mark.skipif(
    not CUDA_LOADS, reason=f"the CUDA provider does not load here: {probe_provider('cuda').error}")


def _mlp(batch: str | int = 1) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("MatMul", ["x", "w1"], ["h"]),
         onnx.helper.make_node("Relu", ["h"], ["r"]),
         onnx.helper.make_node("MatMul", ["r", "w2"], ["y"])],
        "mlp",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [batch, 32])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [batch, 8])],
        [onnx.numpy_helper.from_array(rng.uniform(-1, 1, (32, 32)).astype(np.float32), "w1"),
         onnx.numpy_helper.from_array(rng.uniform(-1, 1, (32, 8)).astype(np.float32), "w2")],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)],
                                  ir_version=8)


def _mobilenet() -> onnx.ModelProto:
    return mobilenetv2_nhwc(image_size=32, width=0.35, num_classes=10, dynamic_batch=False)


FACTS = Workload(provider="cpu", objective="latency", cores=4, width=1, has_conv=False,
              has_conv1d=False, control_flow=False, static_inputs=True, dynamic_batch=False)


# -- the knob table ----------------------------------------------------------------------------


def test_every_knob_is_one_row_with_a_provider_values_and_an_effect() -> None:
    names = [knob.name for knob in KNOBS]
    assert len(names) == len(set(names))
    default = Settings.ort_defaults("cuda")
    for knob in KNOBS:
        assert knob.provider in ("cpu", "cuda", "any")
        facts = dataclasses.replace(FACTS, provider="cuda" if knob.provider == "cuda" else "cpu")
        values = knob.values(facts)
        assert values, knob.name
        for value in values:
            settings, batch = knob.apply(default, 1, value)
            assert (settings, batch) != (default, 1), f"{knob.name}={value} changes nothing"


@pytest.mark.parametrize(("knob", "facts", "applies"), [
    ("execution_mode", {"width": 1}, False),
    ("execution_mode", {"width": 3}, True),
    ("branch_parallel", {"width": 1}, False),
    ("branch_parallel", {"width": 3, "cores": 1}, False),
    ("branch_parallel", {"width": 3}, True),
    ("dynamic_block_base", {"cores": 1}, False),
    ("cudnn_conv_algo_search", {"has_conv": False}, False),
    ("cudnn_conv1d_pad_to_nc1d", {"has_conv": True, "has_conv1d": True}, True),
    ("cuda_graph", {"control_flow": True}, False),
    ("cuda_graph", {"static_inputs": False}, False),
    ("batch_size", {"dynamic_batch": True}, False),  # latency objective
    ("batch_size", {"dynamic_batch": True, "objective": "throughput"}, True),
])
def test_knobs_apply_only_where_they_can_matter(knob: str, facts: dict, applies: bool) -> None:
    row = next(k for k in KNOBS if k.name == knob)
    assert (row.applies(dataclasses.replace(FACTS, **facts)) is None) == applies


def test_one_thread_is_tried_at_each_other_optimization_level_from_the_start() -> None:
    default = Settings.ort_defaults("cpu")
    found = {c.name: c for c in _candidates(FACTS, default, None)}
    for level in ("extended", "basic"):
        pair = found[f"intra_op_threads=1, optimization={level}"]
        assert pair.alive and pair.numerics  # the level changes numerics: checked first
        assert (pair.settings.threads, pair.settings.optimization) == (1, level)
        assert pair.changes == {"intra_op_threads": 1, "optimization": level}
    only_threads = _candidates(FACTS, default, {"intra_op_threads": [1]})
    assert [c.name for c in only_threads[2:]] == ["intra_op_threads=1"]


def test_intra_op_pool_knobs_are_not_tried_on_top_of_one_thread() -> None:
    # Step 7 builds its candidates on the winner's settings: with one intra-op thread there
    # is no pool to spin or to split in blocks, and a no-op's noise would cost fresh rounds.
    one = Settings.ort_defaults("cpu").replace(threads=1)
    found = {c.name: c for c in _candidates(FACTS, one, None)}
    for name in ("allow_spinning=False", "dynamic_block_base=4"):
        assert found[name].status == "not applicable" and "one intra-op thread" in \
            found[name].reason
    assert found["memory_pattern=False"].alive
    both = {c.name: c for c in _candidates(FACTS, Settings.ort_defaults("cpu"), None)}
    assert both["allow_spinning=False"].alive and both["dynamic_block_base=4"].alive


def test_branch_parallel_runs_nodes_side_by_side_each_on_one_thread() -> None:
    row = next(k for k in KNOBS if k.name == "branch_parallel")
    (cores,) = row.values(FACTS)
    settings, batch = row.apply(Settings.ort_defaults("cpu"), 1, cores)
    assert cores == FACTS.cores and batch == 1
    assert (settings.execution_mode, settings.inter_op_threads, settings.threads) == (
        "parallel", FACTS.cores, 1)


def test_numerics_changing_knobs_are_marked() -> None:
    marked = {knob.name for knob in KNOBS if knob.changes_numerics}
    assert {"optimization", "use_tf32", "cudnn_conv_algo_search", "prefer_nhwc"} <= marked
    assert "intra_op_threads" not in marked


def test_facts_read_branches_convolutions_and_the_batch() -> None:
    facts = facts_of(_mobilenet(), provider="cpu", objective="latency", input_shapes=None)
    assert facts.has_conv and not facts.has_conv1d and facts.static_inputs
    assert facts.width == 1 and not facts.dynamic_batch  # MobileNetV2 is a chain
    branchy = facts_of(_mlp("N"), provider="cpu", objective="throughput", input_shapes=None)
    assert branchy.dynamic_batch and not branchy.static_inputs


# -- the decision ------------------------------------------------------------------------------


def _candidate(name: str, factor: float, rng: np.random.Generator, *, peak: int = 100,
               rounds: int = 12) -> Candidate:
    # a setting of its own (the default's own session is never a winner)
    settings = Settings.ort_defaults("cpu")
    if name != "default":
        settings = settings.replace(dynamic_block_base=len(name))
    candidate = Candidate(name, settings, changes={name: 1})
    candidate.times = {(0, i): list(factor * rng.uniform(0.95, 1.05, 5)) for i in range(rounds)}
    candidate.peaks = [peak]
    return candidate


def _compared(default: Candidate, candidate: Candidate) -> Candidate:
    keys = sorted(default.times)
    candidate.speedup = bootstrap_speedup([default.times[k] for k in keys],
                                          [candidate.times[k] for k in keys])
    return candidate


def test_a_candidate_with_the_defaults_own_session_is_never_the_winner() -> None:
    # intra_op_threads=0 asked for by name is ONNX Runtime's default session: ahead of it by
    # chance only (a noisy stretch of a 0.1 ms model), whatever its interval says
    rng = np.random.default_rng(0)
    default = _candidate("default", 1.0, rng)
    same = _compared(default, _candidate("intra_op_threads=0", 0.5, rng))
    same.settings = default.settings
    aa = _compared(default, _candidate("copy", 1.0, rng)).speedup
    assert same.speedup.verdict == "faster"
    winner, reason = choose(default, aa, [same], "latency")
    assert winner is default and "the default is kept" in reason


def test_choose_takes_the_fastest_candidate_that_clears_one() -> None:
    rng = np.random.default_rng(0)
    default = _candidate("default", 1.0, rng)
    fast = _compared(default, _candidate("fast", 0.5, rng))
    faster = _compared(default, _candidate("faster", 0.4, rng))
    slow = _compared(default, _candidate("slow", 2.0, rng))
    aa = _compared(default, _candidate("copy", 1.0, rng)).speedup
    winner, reason = choose(default, aa, [slow, fast, faster], "latency")
    assert winner is faster and reason.startswith("faster is 2.")


def test_choose_keeps_the_default_when_nothing_clears_one_or_the_aa_fails() -> None:
    rng = np.random.default_rng(1)
    default = _candidate("default", 1.0, rng)
    same = _compared(default, _candidate("same", 1.0, rng))
    aa = _compared(default, _candidate("copy", 1.0, rng)).speedup
    winner, reason = choose(default, aa, [same], "latency")
    assert winner is default and "default is kept" in reason
    fast = _compared(default, _candidate("fast", 0.8, rng))
    broken = _compared(default, _candidate("copy", 0.7, rng)).speedup  # A/A "faster"
    winner, reason = choose(default, broken, [fast], "latency")
    assert winner is default and "A/A check failed" in reason
    # A gain beyond the A/A's spread stands: the ratio's bias cannot exceed what the default
    # against itself showed.
    far = _compared(default, _candidate("far", 0.5, rng))
    winner, reason = choose(default, broken, [fast, far], "latency")
    assert winner is far and "clearing the spread" in reason
    # Keeping the default needs no A/A: the reason names what was measured, not the noise.
    winner, reason = choose(default, broken, [same], "latency")
    assert winner is default and "no candidate was significantly faster" in reason


def test_the_confirmation_judges_the_candidate_furthest_ahead_even_when_undecided() -> None:
    from graphfix.validate.tune import _leader

    rng = np.random.default_rng(3)
    default = _candidate("default", 1.0, rng, rounds=3)
    aa = _compared(default, _candidate("copy", 1.0, rng, rounds=3)).speedup
    behind = _compared(default, _candidate("behind", 1.3, rng, rounds=3))
    ahead = _compared(default, _candidate("ahead", 0.97, rng, rounds=3))
    ahead.speedup = dataclasses.replace(ahead.speedup, ci_low=0.9, ci_high=1.2,
                                        verdict="no significant difference")
    assert choose(default, aa, [behind, ahead], "latency")[0] is default
    assert _leader(default, aa, [behind, ahead], "latency") is ahead
    assert _leader(default, aa, [behind], "latency") is None
    assert _leader(default, aa, [behind, ahead], "memory") is None  # no leaner candidate


def _confirmed(effect: float, seed: int, seconds_left: float) -> tuple[str, str, int]:
    """The confirmation of a candidate ``effect`` times the default's time, on constructed
    rounds where three rounds in ten fall in a slow stretch of the machine (1.5x, every
    session of the round) and each opening of a session comes out a little faster or slower
    (6%, as the scheduler places its threads); returns the decision, its reason and the fresh
    rounds the candidate ran."""
    from graphfix.validate.tune import _confirm

    rng = np.random.default_rng(seed)
    default = Candidate("default", Settings.ort_defaults("cpu"), status="default")
    copy = Candidate("default (A/A copy)", Settings.ort_defaults("cpu"), status="default")
    leader = Candidate("leader", Settings.ort_defaults("cpu").replace(dynamic_block_base=4),
                       changes={"leader": 1})
    rung = [3]

    def run_rung(alive: list[Candidate], rounds: int) -> float:
        for index in range(rounds):
            stretch = rng.choice([1.0, 1.5], p=[0.7, 0.3])
            for c in alive:
                factor = effect if c is leader else 1.0
                opening = np.exp(rng.normal(0.0, 0.06))
                c.times[(rung[0], index)] = list(factor * stretch * opening
                                                 * rng.uniform(0.97, 1.03, 20))
        rung[0] += 1
        return 0.01  # seconds per arm and round

    winner, reason, _ = _confirm(leader, default, copy, run_rung, 3, "latency", "median", 0.95,
                                 2000, 0, lambda: seconds_left)
    return winner.name, reason, len(leader.times)


def test_an_open_confirmation_gets_one_second_look_at_a_stricter_confidence() -> None:
    # 1.06x faster, but ten rounds with slow stretches leave the interval open: ten more,
    # budget allowing, and all twenty judged at 97.5% confidence.
    name, reason, rounds = _confirmed(1 / 1.06, seed=8, seconds_left=100)
    assert name == "leader" and rounds == 20
    assert "confirmed on 20 fresh rounds, a second look at 97.5% confidence" in reason
    # no budget left: the first look decides
    name, reason, rounds = _confirmed(1 / 1.06, seed=8, seconds_left=0)
    assert name == "default" and rounds == 10 and "did not hold on 10 fresh rounds" in reason
    # as fast as the default: one second look at most, and the default is kept
    name, reason, rounds = _confirmed(1.0, seed=3, seconds_left=100)
    assert name == "default" and rounds == 20 and "did not hold on 20 fresh rounds" in reason
    # behind the default after the first look: no second look
    name, reason, rounds = _confirmed(1.0, seed=4, seconds_left=100)
    assert name == "default" and rounds == 10


def _default_copy_and_one_thread() -> tuple[Candidate, Candidate, Candidate]:
    """The default, its A/A copy and one intra-op thread, with no rounds yet."""
    base = Settings.ort_defaults("cpu")
    return (Candidate("default", base, status="default"),
            Candidate("default (A/A copy)", base, status="default"),
            Candidate("intra_op_threads=1", base.replace(threads=1),
                      changes={"intra_op_threads": 1}))


def _refined(factors: dict[str, float], seconds_left: float = 100.0):
    """Step 7 on constructed rounds: the winner (one intra-op thread, 0.8 of the default's
    time, already confirmed) and, on top of it, candidates at ``factors`` of the default's
    time."""
    from graphfix.validate.tune import _compare, _refine

    rng = np.random.default_rng(11)
    base = Settings.ort_defaults("cpu")
    default, copy, winner = _default_copy_and_one_thread()
    on_top = [Candidate(name, base.replace(threads=1, optimization=level),
                        changes={"optimization": level})
              for name, level in (("optimization=basic", "basic"),
                                  ("optimization=extended", "extended"))]
    factor = {"intra_op_threads=1": 0.8} | factors
    rung = [4]

    def run_rung(alive: list[Candidate], rounds: int) -> float:
        for index in range(rounds):
            for c in alive:
                c.times[(rung[0], index)] = list(factor.get(c.name, 1.0)
                                                 * rng.uniform(0.97, 1.03, 20))
        rung[0] += 1
        return 0.01

    def compare(baseline: Candidate, c: Candidate, rungs) -> object:
        return _compare(baseline, c, "median", confidence=0.95, resamples=2000, seed=0,
                        rungs=rungs)

    winner.speedup = compare(default, winner, None) if winner.times else None
    return _refine(winner, default, copy, on_top, run_rung=run_rung, rung=lambda: rung[0],
                   cost=0.01, seconds_left=lambda: seconds_left,
                   check=lambda found: None, compare=compare, objective="latency"), winner


def test_other_knobs_are_tried_on_top_of_the_winner_and_replace_it_only_when_faster() -> None:
    refined, winner = _refined({"intra_op_threads=1, optimization=basic": 0.6,
                                "intra_op_threads=1, optimization=extended": 0.9})
    assert refined.winner is not None
    assert refined.winner.name == "intra_op_threads=1, optimization=basic"
    assert refined.winner.changes == {"intra_op_threads": 1, "optimization": "basic"}
    assert refined.winner.settings.threads == 1 and refined.winner.settings.optimization == "basic"
    assert "on top of intra_op_threads=1" in refined.reason and "confirmed" in refined.reason
    assert refined.winner.speedup.ci_low > 1.5  # against the default, on the fresh rounds
    behind = next(c for c in refined.tried if c.name.endswith("extended"))
    assert behind.status == "eliminated" and "behind intra_op_threads=1" in behind.reason
    # nothing on top beats the winner: it stands
    refined, _ = _refined({"intra_op_threads=1, optimization=basic": 0.8,
                           "intra_op_threads=1, optimization=extended": 0.95})
    assert refined.winner is None
    assert all(c.status == "eliminated" for c in refined.tried)
    # no budget for the rung and its confirmation: not tried, and said
    refined, _ = _refined({"intra_op_threads=1, optimization=basic": 0.6}, seconds_left=0.1)
    assert refined.winner is None and "were not tried" in refined.note
    assert {c.status for c in refined.tried} == {"dropped"}


def test_the_written_figures_are_the_confirmation_s_rounds() -> None:
    # The search's rounds (the winner at half the default's time, on a quiet stretch) and the
    # confirmation's (0.8): the configuration's speedup is the confirmation's, and so must be
    # the times written beside it, not medians pooled over the search too.
    from graphfix.validate.tune import _confirm, _measured

    rng = np.random.default_rng(5)
    default, copy, winner = _default_copy_and_one_thread()
    for index in range(10):
        for c, factor in ((default, 1.0), (copy, 1.0), (winner, 0.5)):
            c.times[(0, index)] = list(factor * rng.uniform(0.97, 1.03, 20))

    def run_rung(alive: list[Candidate], rounds: int) -> float:
        for index in range(rounds):
            for c in alive:
                factor = 0.8 if c is winner else 1.0
                c.times[(1, index)] = list(2.0 * factor * rng.uniform(0.97, 1.03, 20))
        return 0.01

    found, reason, _ = _confirm(winner, default, copy, run_rung, 1, "latency", "median", 0.95,
                                2000, 0, lambda: 0.0)
    assert found is winner, reason
    measured = _measured(default, winner, "median")
    assert 1.2 < measured["speedup"] < 1.3
    assert measured["default_ms"] == pytest.approx(2.0, rel=0.02)
    assert measured["winner_ms"] == pytest.approx(1.6, rel=0.02)
    ratio = measured["default_ms"] / measured["winner_ms"]
    assert measured["ci_low"] * 0.99 <= ratio <= measured["ci_high"] * 1.01


def test_choose_for_memory_takes_the_leanest_that_is_not_slower() -> None:
    rng = np.random.default_rng(2)
    default = _candidate("default", 1.0, rng, peak=1000)
    lean_slow = _compared(default, _candidate("lean but slow", 3.0, rng, peak=100))
    lean = _compared(default, _candidate("lean", 1.0, rng, peak=500))
    aa = _compared(default, _candidate("copy", 1.0, rng, peak=1000)).speedup
    assert lean_slow.speedup.verdict == SLOWER
    winner, _ = choose(default, aa, [lean_slow, lean], "memory")
    assert winner is lean
    heavy = _compared(default, _candidate("heavy", 1.0, rng, peak=990))
    assert choose(default, aa, [heavy], "memory")[0] is default  # not 5% leaner


# -- real searches ------------------------------------------------------------------------------


def test_a_setting_that_is_slower_for_sure_is_not_chosen() -> None:
    # With ORT's graph optimizations off, MobileNetV2 runs its converter's Transposes and no
    # fused or NCHWc convolution: several times slower on any machine.
    # The budget would top it up to ten rounds; being significantly slower ends its search
    # after the first rung, and with no challenger left, the search itself.
    result = tune(_mobilenet(), provider="cpu", budget=60,
                  space={"optimization": ["disabled"]})
    slow = next(c for c in result.candidates if c.name == "optimization=disabled")
    assert slow.status == "eliminated" and slow.speedup is not None
    assert "slower than the default" in slow.reason
    # measured in the first rung only, as the default was (no confirmation)
    assert RUNG_ROUNDS <= len(slow.times) == len(result.candidates[0].times)
    assert slow.speedup.ci_high < 1.0
    assert result.winner.name != slow.name and result.kept_default
    assert result.config.settings == Settings.ort_defaults("cpu")
    assert result.config.measured is None
    assert set(result.config.versions) == {"graphfix", "onnxruntime"}


def test_the_default_is_kept_when_nothing_is_significantly_better() -> None:
    # intra_op_threads=0 is ONNX Runtime's default itself: a second A/A copy.
    result = tune(_mlp(), provider="cpu", budget=5, confidence=0.999,
                  space={"intra_op_threads": [0]})
    assert result.kept_default and "default is kept" in result.reason
    assert result.aa is not None


def test_a_budget_below_what_the_first_rung_needs_is_said_before_and_after(caplog) -> None:
    """The first rung and the confirmation always run: a budget they overrun is said when
    the search starts (what to expect), and in the result (what it took)."""
    with caplog.at_level("WARNING", logger="graphfix"):
        result = tune(_mlp(), provider="cpu", budget=0.001, space={"intra_op_threads": [1]})
    before = [r.getMessage() for r in caplog.records if "take about" in r.getMessage()]
    assert len(before) == 1 and "over the 0.001 s budget" in before[0]
    assert any("for a budget of 0.001 s" in w for w in result.warnings)
    caplog.clear()
    with caplog.at_level("WARNING", logger="graphfix"):
        tune(_mlp(), provider="cpu", budget=60, space={"intra_op_threads": [1]})
    assert not [r for r in caplog.records if "take about" in r.getMessage()]


def test_a_knob_given_one_value_is_that_value() -> None:
    result = tune(_mlp(), provider="cpu", budget=1, space={"intra_op_threads": 1})
    assert "intra_op_threads=1" in [c.name for c in result.candidates]
    with pytest.raises(BenchmarkError, match=r"space\['intra_op_threads'\] must be a value"):
        tune(_mlp(), provider="cpu", budget=1, space={"intra_op_threads": {"a": 1}})
    # text is read as --knob reads it: "1,2" is two values
    result = tune(_mlp(), provider="cpu", budget=1, space={"intra_op_threads": "1, 2"})
    assert {"intra_op_threads=1", "intra_op_threads=2"} <= {c.name for c in result.candidates}


def test_throughput_tries_batch_sizes_per_sample(tmp_path) -> None:
    out = tmp_path / "tuned.json"
    result = tune(_mlp("N"), provider="cpu", objective="throughput", budget=10,
                  input_shapes={"x": [1, 32]}, space={"batch_size": [16]}, out=out)
    batched = next(c for c in result.candidates if c.name == "batch_size=16")
    assert batched.batch == 16 and batched.speedup is not None
    assert batched.speedup.speedup > 2  # sixteen samples per call: far less per sample
    if result.winner is batched:
        assert re.search(r"confirmed on \d+ fresh rounds", result.reason)
        assert read_config(out).batch_size == 16
    else:  # a machine too busy to trust the rounds keeps the default, and says why
        assert "A/A check failed" in result.reason or "did not hold" in result.reason


@pytest.mark.parametrize("body, why", [
    # the first axis is a sequence a state runs over: copies make one longer sequence
    ("s = CumSum (x, axis)\n y = Mul (s, two)", "output 'y'"),
    # a summary over the first axis: it does not grow with it
    ("y = ReduceSum <keepdims = 0> (x, axis)", "output 'y'"),
])
def test_a_first_axis_that_is_no_batch_is_not_tried_as_one(body, why) -> None:
    model = onnx.parser.parse_model(f"""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[S, 32] x) => (float[?] y) {{
        axis = Constant <value = int64[1] {{0}}> ()
        two = Constant <value = float[1] {{2}}> ()
        {body}
    }}""")
    result = tune(model, provider="cpu", objective="throughput", budget=0.05,
                  space={"batch_size": [2, 4]})
    for name in ("batch_size=2", "batch_size=4"):
        candidate = next(c for c in result.candidates if c.name == name)
        assert candidate.status == "dropped", (name, candidate.status, candidate.reason)
        assert "is no batch" in candidate.reason and why in candidate.reason
    assert result.winner.batch == 1
    # a model that computes each row on its own is tried at those batches
    rows = tune(_mlp("N"), provider="cpu", objective="throughput", budget=0.05,
                space={"batch_size": [2]})
    assert next(c for c in rows.candidates if c.name == "batch_size=2").status != "dropped"


def test_a_session_option_value_onnx_runtime_would_refuse_is_dropped_with_the_reason() -> None:
    # A value ONNX Runtime would refuse when the session opens (it reads dynamic_block_base
    # as an int) is dropped with the reason before any rung; the others are measured.
    result = tune(_mlp(), provider="cpu", budget=3,
                  space={"dynamic_block_base": [10**12], "cpu_arena": [False]})
    refused = next(c for c in result.candidates if c.name.startswith("dynamic_block_base"))
    assert refused.status == "dropped" and "dynamic_block_base from 1 to" in refused.reason
    assert not refused.times
    arena = next(c for c in result.candidates if c.name == "cpu_arena=False")
    assert arena.status in ("measured", "eliminated") and arena.speedup is not None


def test_timed_sessions_open_onnx_runtimes_rewritten_copy_only_where_it_computes_the_same(
) -> None:
    from graphfix import model_io
    from graphfix.validate.tune import _Configs

    default = Candidate("default", Settings.ort_defaults("cpu"), status="default")
    basic = Candidate("optimization=basic", Settings.ort_defaults("cpu").replace(
        optimization="basic"))
    model = _mobilenet()
    feeds = {model.graph.input[0].name: np.ones((1, 32, 32, 3), np.float32)}
    configs = _Configs(model, feeds, rewrite=True)
    for candidate in (default, basic):
        config = configs(candidate)
        assert isinstance(config.model, LentModel) and config.optimization == "disabled"
        assert config.label == candidate.name
    assert configs(default).model is configs(default).model  # each level's copy made once
    assert configs(default).model != configs(basic).model
    # the memory objective's peaks include the opening's work: the model itself, always
    kept = _Configs(model, feeds, rewrite=False)(default)
    assert kept.model is model and kept.optimization == "all"
    # an IR-3 model (its weights graph inputs too): ORT's copy could never stand in
    ir3 = onnx.ModelProto()
    ir3.CopyFrom(model)
    ir3.ir_version = 3
    ir3.graph.input.extend(onnx.helper.make_tensor_value_info(
        t.name, t.data_type, list(t.dims)) for t in model.graph.initializer)
    overridable = _Configs(ir3, feeds, rewrite=True)
    assert overridable(default).model is ir3
    assert overridable.copies == {}  # no copy made: it could never stand in
    # a copy ORT writes wrong is not used: the model itself is opened at the level
    odd = cast_pair_read_by_a_branch()  # ORT writes a rewritten copy that does not load
    odd_feeds = {"x": np.array([1.0, -2.0], np.float32), "cond": np.array(True)}
    data, _ = model_io.ort_rewritten(odd, optimization="all")
    try:
        loads = model_io.ort_session(data).run(None, odd_feeds) is not None
    except Exception:  # noqa: BLE001 - ORT's own refusal of its own copy
        loads = False
    config = _Configs(odd, odd_feeds, rewrite=True)(default)
    if loads:  # a later ORT may keep the pair: then its copy computes the same
        assert isinstance(config.model, bytes)
    else:
        assert config.model is odd and config.optimization == "all"


def test_the_table_reports_variance_memory_and_every_drop(tmp_path) -> None:
    result = tune(_mlp(), provider="cpu", budget=5,
                  space={"execution_mode": ["parallel"], "cpu_arena": [False]})
    data = json.loads(json.dumps(result.to_dict()))
    assert data["schema"] == "graphfix.tune-result/1"
    rows = {row["name"]: row for row in data["candidates"]}
    assert {"default", "default (A/A copy)", "execution_mode=parallel",
            "cpu_arena=False"} <= set(rows)
    for row in rows.values():
        assert row["median_ms"] > 0 and row["p99_ms"] >= row["median_ms"] and row["cv"] >= 0
        assert row["peak_bytes"] is None or row["peak_bytes"] >= 0
    assert "import onnxruntime as ort" in data["snippet"]


def test_knobs_that_do_not_apply_are_listed_with_the_reason() -> None:
    result = tune(_mlp(), provider="cpu", budget=5, objective="latency",
                  space={"intra_op_threads": [1]})
    assert [c.name for c in result.candidates][:2] == ["default", "default (A/A copy)"]
    full = tune(_mlp(), provider="cpu", budget=0.001)  # far less than its first rung takes
    reasons = {c.name: c.reason for c in full.candidates if c.status == "not applicable"}
    assert "chain" in reasons["execution_mode=parallel"]
    assert "throughput" in reasons["batch_size=2"]
    assert any("budget" in w for w in full.warnings), (full.warnings, full.seconds)


def test_values_given_twice_are_one_candidate_and_a_batch_below_one_is_dropped() -> None:
    result = tune(_mlp(), provider="cpu", budget=0.05,
                  space={"intra_op_threads": [1, "1", np.int64(1)]})
    assert [c.name for c in result.candidates] == [
        "default", "default (A/A copy)", "intra_op_threads=1"]
    result = tune(_mlp(), provider="cpu", budget=0.05, space={"intra_op_threads": np.array([1, 2])})
    assert [c.name for c in result.candidates][2:] == ["intra_op_threads=1", "intra_op_threads=2"]
    result = tune(_mlp("N"), provider="cpu", budget=0.05, objective="throughput",
                  space={"batch_size": [0, 2]})
    rows = {c.name: c for c in result.candidates}
    assert rows["batch_size=0"].status == "dropped" and "1 or more" in rows["batch_size=0"].reason
    assert rows["batch_size=2"].status != "dropped"
    # a number the command line refuses (0 threads is the default's own, no candidate)
    result = tune(_mlp(), provider="cpu", budget=0.05, space={"intra_op_threads": [0]})
    zero = next(c for c in result.candidates if c.name == "intra_op_threads=0")
    assert zero.status == "dropped" and "at least 1" in zero.reason and not zero.times


def test_a_tuned_configuration_is_rechecked_by_bench(tmp_path) -> None:
    out = tmp_path / "tuned.json"
    tune(_mlp(), provider="cpu", budget=3, space={"intra_op_threads": [1]}, out=out)
    result = benchmark(_mlp(), config=out, baseline_config="ort-defaults", runs=5, warmup=1)
    assert result.baseline is not None and result.method == "alone"
    assert result.baseline_settings == Settings.ort_defaults("cpu")
    assert result.settings == read_config(out).settings
    assert not any("tuned for" in w for w in result.warnings)
    # re-checked on another model: measured all the same, and said
    other = benchmark(_mlp(batch=2), config=out, runs=2, warmup=0)
    assert any("the configuration was tuned for" in w for w in other.warnings), other.warnings


@pytest.mark.parametrize(("options", "match"), [
    ({"objective": "speed"}, "objective"),
    ({"budget": 0}, "budget"),
    ({"space": {"warp_drive": [1]}}, "unknown knob"),
    ({"space": {"use_tf32": ["0"]}}, "cuda provider"),
    ({"budget": float("inf")}, "budget"),
    ({"budget": "5"}, "budget"),
    ({"seed": -1}, "seed"),
    ({"space": {"batch_size": [2]}}, "throughput objective only"),
    ({"space": {"intra_op_threads": ["a"]}}, "intra_op_threads"),
    ({"space": {"dynamic_block_base": []}}, "no value"),
])
def test_bad_options_raise(options: dict, match: str) -> None:
    with pytest.raises(BenchmarkError, match=match):
        tune(_mlp(), provider="cpu", **options)


def test_objectives_are_the_documented_four() -> None:
    assert OBJECTIVES == ("latency", "p99", "throughput", "memory")


# -- CUDA (skipped without a working CUDA provider) --------------------------------------------


@pytest.mark.cuda
@needs_cuda
def test_cuda_knobs_are_searched_with_numerics_checked() -> None:
    result = tune(_mobilenet(), provider="cuda", budget=20,
                  space={"cudnn_conv_algo_search": ["HEURISTIC"], "use_tf32": ["0"],
                         "io_binding": [True], "cuda_graph": [True]})
    names = {c.name: c for c in result.candidates}
    assert {"cudnn_conv_algo_search=HEURISTIC", "use_tf32=0", "io_binding=True",
            "cuda_graph=True"} <= set(names)
    for candidate in names.values():
        assert candidate.status in ("default", "measured", "eliminated", "dropped")
        if candidate.status == "dropped":
            assert candidate.reason


@pytest.mark.cuda
@needs_cuda
def test_cuda_default_is_session_run_without_binding() -> None:
    default = Settings.ort_defaults("cuda")
    assert not default.io_binding and not default.cuda_graph
    result = tune(_mlp(), provider="cuda", budget=5, space={"io_binding": [True]})
    assert result.provider == "cuda"


def test_a_setting_that_differs_from_the_default_by_being_closer_to_float32_is_kept() -> None:
    # The CUDA provider's default multiplies in TF32: use_tf32=0 differs from the default by
    # TF32's own error while computing float32. It must not be dropped for "changing
    # numerics"; a setting that strays farther from float32 than the default does still is.
    from graphfix.validate.tune import no_farther_than_the_default

    rng = np.random.default_rng(0)
    exact = {"y": rng.standard_normal(1000).astype(np.float32)}
    tf32 = {"y": exact["y"] * np.float32(1 + 3e-3)}       # the default: TF32-like rounding
    float32 = {"y": exact["y"].copy()}                       # use_tf32=0
    sloppy = {"y": exact["y"] * np.float32(1 + 3e-2)}     # ten times the default's error
    kept, words = no_farther_than_the_default(exact, tf32, float32)
    assert kept and "'y' is 0x" in words
    kept, words = no_farther_than_the_default(exact, tf32, sloppy)
    assert not kept and "the default" in words
    assert no_farther_than_the_default(exact, tf32, {"y": None})[0] is False
    # far from float32 both (TF32 through 12 layers): as far, give or take a quarter, is kept
    far = {"y": exact["y"] * np.float32(1 + 3e-2)}
    kept, words = no_farther_than_the_default(exact, far, {"y": exact["y"] * np.float32(1.033)})
    assert kept, words
    kept, words = no_farther_than_the_default(exact, far, {"y": exact["y"] * np.float32(1.05)})
    assert not kept, words
    # a default that is not finite (NaN or Inf appears) keeps a finite candidate, whatever the
    # order of the outputs; a candidate with a NaN the default does not have is dropped
    broken = {"y": np.full(1000, np.nan, np.float32)}
    assert no_farther_than_the_default(exact, broken, float32)[0]
    two = {"a": exact["y"], "y": exact["y"]}
    nan_y = {"a": exact["y"].copy(), "y": broken["y"]}
    assert not no_farther_than_the_default(two, two, nan_y)[0]
    assert not no_farther_than_the_default({"y": exact["y"], "a": exact["y"]}, two, nan_y)[0]


def test_a_cuda_graph_refused_for_cpu_nodes_points_to_optimize() -> None:
    # ONNX Runtime's own words when a session with CPU nodes is asked to capture a graph
    from graphfix.validate.tune import Candidate, _hint
    from graphfix.validate.timing import Settings

    refused = ("ONNX Runtime cannot open the cuda_graph=True model on cuda: This session cannot "
               "use the graph capture feature as requested by the user  as all compute graph "
               "nodes have not been partitioned to the CUDAExecutionProvider")
    graph = Candidate("cuda_graph=True", Settings.ort_defaults("cuda").replace(
        cuda_graph=True, io_binding=True))
    assert "graphfix optimize --provider cuda" in _hint(graph, refused)
    plain = Candidate("io_binding=True", Settings.ort_defaults("cuda").replace(io_binding=True))
    assert _hint(plain, refused) == ""
    assert _hint(graph, "out of memory") == ""


def test_numerics_are_compared_on_more_input_sets_where_the_model_quantizes_what_it_computes():
    from graphfix.validate.tune import NUMERICS_SETS_STEPPED, _numerics_feeds
    from graphfix.models.quantized import activation_quantizer
    quantized = activation_quantizer()
    feed = {"x": np.zeros((2, 4), np.float32)}
    sets = _numerics_feeds(quantized, feed, False, 0, None)
    assert len(sets) == NUMERICS_SETS_STEPPED > 1
    assert all(s["x"].shape == (2, 4) for s in sets) and not np.array_equal(sets[1]["x"],
                                                                             sets[2]["x"])
    assert len(_numerics_feeds(quantized, feed, True, 0, None)) == 1  # the user's inputs only
    float_model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N,4] x) => (float[N,4] y) { y = Relu (x) }""")
    assert len(_numerics_feeds(float_model, feed, False, 0, None)) == 1
