"""Tests for the timing core shared by bench, profile and tune: settings, the two ways of
interleaving, the statistics over blocks, and the graphfix.tune/1 file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import onnx
import pytest

from graphfix.errors import BenchmarkError
from graphfix.validate.bench import benchmark
from graphfix.validate.session_config import SCHEMA, SessionConfig, python_snippet, read_config
from graphfix.validate.stats import FASTER, bootstrap_speedup
from graphfix.validate.timing import (Arm, Config, Settings, busy_warning, measure,
                                      open_session, others_watched)

_WEIGHTS = ", ".join(["0.01"] * 256)


def _model() -> onnx.ModelProto:
    return onnx.parser.parse_model(f"""
<ir_version: 8, opset_import: ["" : 17]>
g (float[4,16] x) => (float[4,16] y) {{
    w = Constant <value = float[16,16] {{{_WEIGHTS}}}> ()
    a = MatMul (x, w)
    y = Relu (a)
}}""")


def _arm(label: str, settings: Settings, **extra: object) -> Arm:
    feeds = {"x": np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)}
    return Arm(label, Config(label, _model(), settings.optimization), settings, feeds, **extra)


CPU = Settings("cpu", 1, None, False, False)


# -- Settings and the configuration file -------------------------------------------------------


def test_settings_round_trip_through_the_file_vocabulary() -> None:
    settings = Settings("cpu", 2, 4, True, False, execution_mode="parallel", inter_op_threads=2,
                        optimization="basic", memory_pattern=False, cpu_arena=False)
    data = json.loads(json.dumps(settings.to_dict()))
    assert data["session_options"]["execution_mode"] == "parallel"
    assert data["session_config_entries"] == {"session.intra_op.allow_spinning": "1",
                                              "session.dynamic_block_base": "4"}
    assert Settings.from_dict(data) == settings


def test_cuda_settings_keep_only_what_differs_from_graphfix_defaults() -> None:
    settings = Settings("cuda", 0, None, True, True,
                        cuda_options=(("cudnn_conv_algo_search", "HEURISTIC"),
                                      ("device_id", "0")))
    assert settings.cuda_options == (("cudnn_conv_algo_search", "HEURISTIC"),)
    options = settings.provider_options()
    assert options["enable_cuda_graph"] == "1" and options["device_id"] == "0"
    assert Settings.from_dict(settings.to_dict()) == settings
    with pytest.raises(BenchmarkError, match="io_binding"):
        Settings("cuda", 0, None, True, True, io_binding=False)


@pytest.mark.parametrize("change", [
    {"session_options": {"intra_op_num_threads": "two"}},
    {"session_options": {"intra_op_num_threads": 1.5}},
    {"session_options": {"intra_op_num_threads": True}},
    {"session_options": {"inter_op_num_threads": -1}},
    {"session_config_entries": {"session.dynamic_block_base": "x"}},
    {"session_options": {"enable_mem_pattern": "no"}},
    {"session_options": {"graph_optimization_level": "max"}},
    {"session_config_entries": {"session.unknown": "1"}},
    {"provider": "tpu"},
    {"provider_options": {"gpu_mem_limit": "1073741824"}},  # CUDA's, on the CPU
    {"provider_options": {"enable_cuda_graph": "1"}},
    {"session_config_entries": {"session.intra_op.allow_spinning": "yes"}},
    {"session_config_entries": {"session.dynamic_block_base": str(2**40)}},
])
def test_malformed_settings_are_refused(change: dict) -> None:
    data = {**CPU.to_dict(), **change}
    with pytest.raises(BenchmarkError):
        Settings.from_dict(data)


def test_session_options_follow_the_settings() -> None:
    settings = Settings("cpu", 1, None, True, False, execution_mode="parallel",
                        inter_op_threads=2, optimization="basic", memory_pattern=False,
                        cpu_arena=False)
    session, created = open_session(Config("m", _model(), "basic"), settings)
    assert created > 0
    options = session.get_session_options()
    assert options.intra_op_num_threads == 1 and options.inter_op_num_threads == 2
    assert not options.enable_mem_pattern and not options.enable_cpu_mem_arena
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "1"
    assert str(options.execution_mode).endswith("ORT_PARALLEL")


def test_configuration_file_round_trip_and_errors(tmp_path) -> None:
    config = SessionConfig(CPU.replace(threads=2), objective="p99",
                           model={"name": "m.onnx", "sha256": "0" * 64},
                           measured={"speedup": 1.2, "ci_low": 1.1, "ci_high": 1.3})
    path = tmp_path / "config.json"
    config.write(path)
    data = json.loads(path.read_text())
    assert data["schema"] == SCHEMA and data["objective"] == "p99"
    assert read_config(path) == config
    (tmp_path / "other.json").write_text(json.dumps({"schema": "graphfix.report/1"}))
    with pytest.raises(BenchmarkError, match="not a graphfix.tune/1 file"):
        read_config(tmp_path / "other.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(BenchmarkError, match="not JSON"):
        read_config(tmp_path / "bad.json")
    with pytest.raises(BenchmarkError, match="cannot read"):
        read_config(tmp_path / "missing.json")
    (tmp_path / "bogus.json").write_text(json.dumps({**data, "objective": "bogus"}))
    with pytest.raises(BenchmarkError, match="unknown objective 'bogus'"):
        read_config(tmp_path / "bogus.json")
    for field, value in (("measured", "fast"), ("model", "m.onnx"), ("versions", ["1"]),
                         ("batch_size", True)):
        (tmp_path / "field.json").write_text(json.dumps({**data, field: value}))
        with pytest.raises(BenchmarkError, match=f"field.json: {field} must be"):
            read_config(tmp_path / "field.json")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(BenchmarkError, match="nested too deeply"):
        read_config(tmp_path / "deep.json")
    spinning = {**data["settings"], "session_config_entries": {
        "session.intra_op.allow_spinning": "yes"}}
    (tmp_path / "spin.json").write_text(json.dumps({**data, "settings": spinning}))
    with pytest.raises(BenchmarkError, match=r"spin.json: malformed session settings"):
        read_config(tmp_path / "spin.json")


def test_a_configuration_that_would_not_do_what_it_says_is_refused(tmp_path) -> None:
    """A misspelt field was ignored (ORT's defaults ran, rc 0), a number past Python's digit
    limit raised a traceback, and a newer schema read as some other file."""
    config = SessionConfig(CPU.replace(threads=2))
    path = tmp_path / "config.json"
    config.write(path)
    data = json.loads(path.read_text())
    cases = {
        "typo": ({**data, "settings": {**{k: v for k, v in data["settings"].items()
                                          if k != "session_options"},
                                       "session_option": data["settings"]["session_options"]}},
                 "unknown settings field.*'session_option'"),
        "top": ({**data, "setting": {}}, "unknown field.*'setting'"),
        "null": ({**data, "settings": {**data["settings"], "session_options": None}},
                 "session_options must be an object"),
        "newer": ({**data, "schema": "graphfix.tune/2"}, "written by another graphfix"),
    }
    for name, (content, message) in cases.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(content))
        with pytest.raises(BenchmarkError, match=message):
            read_config(tmp_path / f"{name}.json")
    huge = path.read_text().replace('"intra_op_num_threads": 2',
                                    '"intra_op_num_threads": 1' + "0" * 5000)
    (tmp_path / "huge.json").write_text(huge)
    with pytest.raises(BenchmarkError, match="not JSON"):
        read_config(tmp_path / "huge.json")


def test_python_snippet_makes_the_session_it_describes(tmp_path) -> None:
    settings = Settings("cpu", 1, 4, True, False, optimization="extended", cpu_arena=False)
    path = tmp_path / "m.onnx"
    onnx.save(_model(), path)
    scope: dict = {}
    exec(python_snippet(settings, str(path)), scope)  # noqa: S102 - the snippet under test
    options = scope["session"].get_session_options()
    assert options.intra_op_num_threads == 1 and not options.enable_cpu_mem_arena
    assert options.get_session_config_entry("session.dynamic_block_base") == "4"
    assert str(options.graph_optimization_level).endswith("ORT_ENABLE_EXTENDED")


# -- measure -----------------------------------------------------------------------------------


def test_together_times_one_call_per_round_with_sessions_open_throughout() -> None:
    calls: list[tuple[str, int, int]] = []
    result = measure([_arm("a", CPU), _arm("b", CPU)], warmup=2, rounds=4,
                     progress=lambda *args: calls.append(args))
    assert result.together
    assert [len(block) for block in result.times["a"]] == [1, 1, 1, 1]
    assert len(result.created_ms["a"]) == 1  # opened once
    assert result.peak_bytes == {"a": None, "b": None}
    assert calls[-1] == ("bench", 6, 6)


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="the kernel's counters are Linux's")
def test_a_measurement_on_a_busy_machine_says_so() -> None:
    """Other processes that keep the cores busy take them from the sessions: two identical
    files then timed 1.26x apart with an interval clear of 1. The measurement counts the cores
    they kept busy (the machine's busy time less this process's) and warns."""
    cores = len(os.sched_getaffinity(0))
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(2 * cores)]
    try:
        time.sleep(0.2)
        with others_watched() as others:
            time.sleep(1.0)
        result = measure([_arm("a", CPU), _arm("b", CPU)], warmup=2, rounds=20000)
    finally:
        for process in spinning:
            process.kill()
            process.wait()
    assert others() is not None and others() > 0.5 and busy_warning(others())
    assert result.others_cores is not None and result.others_cores > 0.5
    assert result.busy is not None and "busy" in result.busy
    assert busy_warning(None) is None and busy_warning(0.1) is None


def test_alone_opens_each_arm_per_round_and_measures_its_memory() -> None:
    spinning = CPU.replace(allow_spinning=True)
    result = measure([_arm("a", spinning), _arm("b", CPU)], warmup=1, rounds=3, calls=4,
                     step="tune")
    assert not result.together  # an arm that spins forces one session at a time
    assert [len(block) for block in result.times["b"]] == [4, 4, 4]
    assert len(result.created_ms["a"]) == 3
    assert result.stats("a", "all").runs == 12
    for label in ("a", "b"):
        peak = result.peak_bytes[label]
        assert peak is None or peak >= 0


def test_profiled_arms_leave_one_trace_per_opening(tmp_path) -> None:
    arm = _arm("p", CPU, profile_prefix=str(tmp_path / "trace"))
    result = measure([arm], warmup=1, rounds=2, calls=2, together=False)
    assert len(result.traces["p"]) == 2
    for path in result.traces["p"]:
        with open(path, encoding="utf-8") as handle:
            events = json.load(handle)
        runs = [e for e in events if e.get("name") == "model_run"]
        assert len(runs) == 3  # warm-up + 2 timed calls


def test_measure_refuses_bad_counts_and_duplicate_labels() -> None:
    with pytest.raises(BenchmarkError):
        measure([_arm("a", CPU)], warmup=0, rounds=0)
    with pytest.raises(ValueError, match="differ"):
        measure([_arm("a", CPU), _arm("a", CPU)], warmup=0, rounds=1)


# -- statistics over blocks --------------------------------------------------------------------


def test_bootstrap_over_blocks_matches_single_calls_when_blocks_hold_one() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.lognormal(0, 0.2, 30), rng.lognormal(0, 0.2, 30)
    flat = bootstrap_speedup(a, b, seed=3)
    blocks = bootstrap_speedup(a[:, None], b[:, None], seed=3)
    assert flat == blocks


def test_bootstrap_over_blocks_pairs_rounds() -> None:
    drift = np.linspace(1.0, 3.0, 12)[:, None] * np.ones((12, 5))
    result = bootstrap_speedup(1.5 * drift, drift)
    assert result.ci_low == pytest.approx(1.5) and result.verdict == FASTER


def test_bootstrap_p99_compares_tails() -> None:
    rng = np.random.default_rng(6)
    base = rng.uniform(1.0, 1.1, (20, 10))
    tail = base.copy()
    tail[:, 0] = 3.0  # one slow call in every block: about the same median, a far worse tail
    assert bootstrap_speedup(base, tail).speedup > 0.95
    assert bootstrap_speedup(tail, base, statistic="p99").ci_low > 2.0
    with pytest.raises(ValueError, match="statistic"):
        bootstrap_speedup(base, tail, statistic="p50")


# -- bench with a configuration ----------------------------------------------------------------


def test_bench_reads_a_configuration_and_measures_spinning_sessions_alone(tmp_path) -> None:
    path = tmp_path / "config.json"
    SessionConfig(Settings("cpu", 1, None, True, False, optimization="basic")).write(path)
    result = benchmark(_model(), baseline=_model(), config=path, runs=5, warmup=1)
    assert result.method == "alone" and result.allow_spinning
    assert result.candidate.optimization == "basic"
    assert result.to_dict()["settings"]["session_options"]["graph_optimization_level"] == "basic"
    assert result.candidate.runs >= 4


def test_bench_refuses_options_the_configuration_sets(tmp_path) -> None:
    path = tmp_path / "config.json"
    SessionConfig(CPU).write(path)
    with pytest.raises(BenchmarkError, match="threads given with a configuration"):
        benchmark(_model(), config=path, threads=2, runs=2, warmup=0)
    with pytest.raises(BenchmarkError, match="for the cpu provider"):
        benchmark(_model(), config=path, provider="cuda", runs=2, warmup=0)
