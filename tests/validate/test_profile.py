"""Tests for graphfix.validate.profile: accounting, each kind of finding (a positive and a
negative case on a real model), the measured fixes, --vs, the trace and the HTML page.
Behaviour only: no test claims a time."""

from __future__ import annotations

import dataclasses
import html.parser
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import pytest

from graphfix.providers import ProviderStatus, probe_provider
from graphfix.options import OptionError
from graphfix.errors import BenchmarkError, ValidationInputError
from graphfix.passes import eliminate_transposes
from graphfix.validate.profile import SCHEMA, profile
from graphfix.validate.profile.findings import (
    KINDS,
    THREAD_VARIABLES,
    Environment,
    Observed,
    find,
    latency_variance,
    provider_missing,
    unfused_attention,
)
from graphfix.validate.profile.trace import original_names
from graphfix.validate.session_config import SessionConfig
from graphfix.validate.stats import FASTER
from graphfix.validate.timing import Settings, default_threads
from graphfix.models.light import load_light
from graphfix.models.nhwc import mobilenetv2_nhwc
from graphfix.models.transformer import transformer_encoder

TINY = {"provider": "cpu", "runs": 6, "warmup": 1, "threads": 1}
ROOT = Path(__file__).resolve().parents[2]

CUDA_LOADS = probe_provider("cuda").loadable
needs_cuda = pytest.mark.skipif(
    not CUDA_LOADS, reason=f"the CUDA provider does not load here: {probe_provider('cuda').error}")


@pytest.fixture(autouse=True)
def no_thread_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment's OMP/MKL variables would be findings of their own."""
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _mlp(dtype: str = "float32", batch: str | int = 4) -> onnx.ModelProto:
    """A small MLP in ``dtype``: MatMul, Add, Relu, MatMul, Softmax (weights seeded)."""
    rng = np.random.default_rng(0)
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    weights = {"w1": rng.uniform(-0.5, 0.5, (64, 64)), "b1": np.full(64, 0.1),
               "w2": rng.uniform(-0.5, 0.5, (64, 16))}
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("MatMul", ["x", "w1"], ["h"]),
         onnx.helper.make_node("Add", ["h", "b1"], ["a"]),
         onnx.helper.make_node("Relu", ["a"], ["r"]),
         onnx.helper.make_node("MatMul", ["r", "w2"], ["o"]),
         onnx.helper.make_node("Softmax", ["o"], ["y"], axis=-1)],
        "mlp",
        [onnx.helper.make_tensor_value_info("x", elem, [batch, 64])],
        [onnx.helper.make_tensor_value_info("y", elem, [batch, 16])],
        [onnx.numpy_helper.from_array(w.astype(dtype), name) for name, w in weights.items()],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)],
                                  ir_version=8)


def _small_mobilenet(**options: object) -> onnx.ModelProto:
    return mobilenetv2_nhwc(image_size=32, width=0.35, num_classes=10, **options)


def _kinds(result) -> set[str]:
    return {f.kind for f in result.findings}


# -- accounting and the result -----------------------------------------------------------------


def test_profile_accounts_for_every_node_and_op_type() -> None:
    result = profile(_small_mobilenet(dynamic_batch=False), try_fixes=False, **TINY)
    model = result.model
    a = model.accounting
    assert a.latency_ms > 0 and a.profiled_ms > 0 and a.profiler_overhead > 0
    assert 0 < a.accounted <= 1.05 and a.framework_ms >= 0
    assert a.nodes_ms <= a.run_ms * 1.05
    assert len(model.nodes) == sum(row.count for row in model.op_types)
    assert sum(row.ms for row in model.op_types) == pytest.approx(sum(n.ms for n in model.nodes))
    assert [n.ms for n in model.nodes] == sorted((n.ms for n in model.nodes), reverse=True)
    assert a.glue_share + a.compute_share == pytest.approx(sum(n.share for n in model.nodes))
    assert all(n.provider == "CPUExecutionProvider" for n in model.nodes)
    assert all(n.output_shapes for n in model.nodes)
    assert model.stats.runs == 6 and model.profiled.runs == 6
    assert a.session_create_ms > 0 and a.memcpy_nodes == 0 and a.cpu_nodes == 0


def test_a_branch_is_counted_once() -> None:
    """An If's time is its branch's nodes' time, and ORT traces both: a real Silero VAD was
    accounted at 207% of its call before the If's own event was left out."""
    rng = np.random.default_rng(0)
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[64, 256] x) => (float[64, 256] y) <float one = {1.0}> {
        s = ReduceSum <keepdims = 0> (x)
        c = Less (s, one)
        y = If (c) <then_branch = t () => (float[64, 256] a) {
                        m = MatMul (x, w)
                        n = MatMul (m, w)
                        a = Relu (n) },
                    else_branch = f () => (float[64, 256] b) {
                        m2 = MatMul (x, w)
                        b = Tanh (m2) }>
    }""")
    model.graph.initializer.append(onnx.numpy_helper.from_array(
        rng.uniform(-0.1, 0.1, (256, 256)).astype(np.float32), "w"))
    result = profile(model, try_fixes=False, feeds={"x": -np.ones((64, 256), np.float32)},
                     **TINY)
    a = result.model.accounting
    assert 0 < a.accounted <= 1.05, a
    assert {n.op_type for n in result.model.nodes} >= {"MatMul", "Relu"}
    assert "If" not in {n.op_type for n in result.model.nodes}


def test_result_is_json_with_the_documented_keys() -> None:
    data = json.loads(json.dumps(profile(_mlp(), try_fixes=False, **TINY).to_dict()))
    assert data["schema"] == SCHEMA
    assert {"schema", "provider", "settings", "warmup", "runs", "seed", "method", "model",
            "other", "comparison", "moved", "findings", "other_findings", "seconds",
            "warnings"} == set(data)
    assert {"label", "name", "stats", "profiled", "accounting", "op_types", "nodes",
            "placement", "input_shapes"} == set(data["model"])
    assert {"name", "op_type", "provider", "ms", "share", "input_shapes", "output_shapes",
            "output_bytes", "stands_for"} == set(data["model"]["nodes"][0])
    assert data["other"] is None and data["comparison"] is None


def test_fused_nodes_name_the_original_nodes_they_stand_for() -> None:
    model = _small_mobilenet(dynamic_batch=False)
    result = profile(model, try_fixes=False, **TINY)
    names = {n.name for n in model.graph.node}
    fused = [n for n in result.model.nodes if n.stands_for]
    assert fused, "ORT fuses Conv and Clip in this model and names the result after them"
    for node in fused:
        assert set(node.stands_for) <= names


def test_original_names_reads_ort_decorations() -> None:
    model = onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,3,8,8] x, float[4,3,3,3] w) => (float[1,4,6,6] y) {
    c = Conv <pads = [0, 0, 0, 0]> (x, w)
    y = Relu (c)
}""")
    model.graph.node[0].name, model.graph.node[1].name = "conv", "relu"
    found = original_names(model, [("y_nchwc", "Conv"), ("conv/MatMulScaleFusion/", "Conv"),
                                   ("fused relu", "Relu"), ("relu", "FusedRelu"),
                                   ("conv", "Conv"), ("unknown_token_3", "Conv")])
    assert found["y_nchwc"] == ["conv", "relu"]       # named after Relu's output: Conv+Relu
    assert found["conv/MatMulScaleFusion/"] == ["conv"]
    assert found["fused relu"] == ["relu"]
    assert found["relu"] == ["relu"]                  # same name, fused op type
    assert "conv" not in found and "unknown_token_3" not in found


def test_bad_options_raise(tmp_path) -> None:
    with pytest.raises(BenchmarkError):
        profile(_mlp(), **{**TINY, "runs": 0})
    # a model that does not run on its inputs: one error naming the model, not ORT's exception
    with pytest.raises(ValidationInputError, match="^the model does not run on the given"):
        profile(_mlp(), **TINY, feeds={"x": np.zeros((4, 3), np.float32)})
    with pytest.raises(ValidationInputError, match="^the other model does not run"):
        profile(_mlp(), **TINY, vs=_mlp(dtype="float64"), try_fixes=False)
    with pytest.raises(BenchmarkError, match="config must be"):
        profile(_mlp(), **TINY, config=3)
    with pytest.raises(BenchmarkError, match="not a graphfix.tune/1"):
        profile(_mlp(), **TINY, config={"schema": "other"})
    with pytest.raises(OptionError, match="the provider must be one of auto, cpu, cuda"):
        profile(_mlp(), **{**TINY, "provider": "tpu"})


# -- findings: each kind fires on the model that has the problem, not on one without -----------


def test_initializer_inputs_found_and_its_fix_measured() -> None:
    result = profile(load_light("squeezenet", ir_version=7), **TINY)
    found = next(f for f in result.findings if f.kind == "initializer-inputs")
    assert found.evidence["initializer_inputs"] > 0 and found.evidence["ir_version"] == 7
    assert "--passes remove-initializer-inputs" in found.fix
    assert found.measured is not None and found.measured.statistic == "median"
    assert found.measured.ci_low <= found.measured.speedup <= found.measured.ci_high


def test_initializer_inputs_at_ir3_is_found_too() -> None:
    result = profile(load_light("squeezenet"), try_fixes=False, **TINY)
    found = next(f for f in result.findings if f.kind == "initializer-inputs")
    assert found.evidence["ir_version"] == 3 and "still folds them" in found.reason


def test_nhwc_transposes_found_on_a_converter_model() -> None:
    result = profile(_small_mobilenet(dynamic_batch=False), **TINY)
    found = next(f for f in result.findings if f.kind == "nhwc-transposes")
    assert found.evidence["layout_transposes"] >= 2
    assert found.measured is not None  # eliminate-transposes ran, passed parity, was timed


def test_no_nhwc_finding_for_attention_transposes() -> None:
    model = transformer_encoder(layers=1, hidden=32, heads=2, ffn=64, seq=16, batch=1)
    assert any(n.op_type == "Transpose" for n in model.graph.node)
    assert "nhwc-transposes" not in _kinds(profile(model, try_fixes=False, **TINY))


def test_float64_found_on_a_double_model_only() -> None:
    found = next(f for f in profile(_mlp("float64"), try_fixes=False, **TINY).findings
                 if f.kind == "float64")
    assert found.evidence["float64_nodes"] >= 3 and found.evidence["float64_share"] > 0.01
    assert "float64" not in _kinds(profile(_mlp("float32"), try_fixes=False, **TINY))


def test_float16_model_on_the_cpu_gets_the_islands_finding() -> None:
    result = profile(_mlp("float16"), try_fixes=False, **TINY)
    found = next(f for f in result.findings if f.kind == "float16-islands")
    assert found.evidence["casts_executed"] > found.evidence["casts_in_model"] == 0
    assert "float32 model" in found.fix
    assert "float16-islands" not in _kinds(profile(_mlp("float32"), try_fixes=False, **TINY))


def test_batch_one_on_a_dynamic_batch_is_measured_per_sample() -> None:
    result = profile(_mlp(batch="N"), input_shapes={"x": [1, 64]}, **TINY)
    found = next(f for f in result.findings if f.kind == "batch-one")
    assert found.evidence["inputs"] == ["x"]
    assert found.measured is not None and found.measured.statistic == "throughput"
    assert found.measured.verdict == FASTER  # kept only when the interval clears 1
    assert "batch dimension" in found.reason
    # a first dimension no name calls a batch may be a length (a streaming model's frames)
    result = profile(_mlp(batch="input_dim_0"), input_shapes={"x": [1, 64]}, **TINY)
    found = next(f for f in result.findings if f.kind == "batch-one")
    assert "a batch, or a length" in found.reason


def test_no_batch_finding_for_a_fixed_batch_or_without_measuring() -> None:
    assert "batch-one" not in _kinds(profile(_mlp(batch=1), **TINY))
    # With --no-try nothing in the run supports the claim: the finding is not printed.
    result = profile(_mlp(batch="N"), input_shapes={"x": [1, 64]}, try_fixes=False, **TINY)
    assert "batch-one" not in _kinds(result)


def test_no_batch_finding_where_the_first_axis_is_a_sequence() -> None:
    # a running sum over the first axis: copies of the inputs along it are one longer
    # sequence, and the speed per sample such a trial claims is no speed of the model's
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[batch, 64] x) => (float[batch, 64] y) {
        axis = Constant <value = int64[1] {0}> ()
        y = CumSum (x, axis)
    }""")
    assert "batch-one" not in _kinds(profile(model, input_shapes={"x": [1, 64]}, **TINY))


def test_threads_beyond_the_cores_are_found_and_the_fix_tried() -> None:
    cores = default_threads()
    result = profile(_mlp(), **{**TINY, "threads": cores + 2})
    found = next(f for f in result.findings if f.kind == "threads")
    assert found.evidence["threads"] == cores + 2
    assert found.trial is not None and found.measured is not None
    assert "threads" not in _kinds(profile(_mlp(), try_fixes=False, **TINY))


def test_thread_variables_are_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    found = next(f for f in profile(_mlp(), try_fixes=False, **TINY).findings
                 if f.kind == "threads")
    assert found.evidence["variables"] == {"OMP_NUM_THREADS": "4"}


def test_optimization_below_all_is_found_through_a_configuration(tmp_path) -> None:
    path = tmp_path / "config.json"
    SessionConfig(Settings("cpu", 1, None, False, False, optimization="basic")).write(path)
    result = profile(_small_mobilenet(dynamic_batch=False), provider="cpu", runs=6, warmup=1,
                     config=path)
    found = next(f for f in result.findings if f.kind == "optimization-level")
    assert found.evidence["level"] == "basic" and found.measured is not None
    assert result.settings.optimization == "basic"
    assert "optimization-level" not in _kinds(
        profile(_small_mobilenet(dynamic_batch=False), try_fixes=False, **TINY))


def test_a_spinning_configuration_is_profiled_one_session_at_a_time(tmp_path) -> None:
    path = tmp_path / "config.json"
    SessionConfig(Settings("cpu", 1, None, True, False)).write(path)
    result = profile(_mlp(), provider="cpu", runs=20, warmup=5, config=path, try_fixes=False)
    assert result.method == "alone" and result.settings.allow_spinning
    assert len(result.model.traces) == 10  # one trace per opening of the profiled session
    assert result.model.profiled.runs == 20 and 0 < result.model.accounting.accounted <= 1.05


def _observed(**changes: object) -> Observed:
    result = profile(_mlp(), try_fixes=False, **TINY)
    environment = Environment(default_threads(), None, {}, None, False)
    observed = Observed("mlp.onnx", _mlp(), result.model, result.settings, "cpu", environment)
    return dataclasses.replace(observed, **changes)


def test_latency_tail_is_found_from_the_run_percentiles() -> None:
    observed = _observed()
    accounting = observed.profile.accounting
    runs = dataclasses.replace(observed.profile.stats, runs=50)
    tail = dataclasses.replace(observed.profile, stats=runs, accounting=dataclasses.replace(
        accounting, p99_ms=2.0 * accounting.latency_ms))
    found = latency_variance(dataclasses.replace(
        observed, profile=tail, settings=observed.settings.replace(threads=2)))
    assert found is not None and found.evidence["ratio"] == pytest.approx(2.0)
    assert found.trial is not None and found.trial.statistic == "p99"
    steady = dataclasses.replace(observed.profile, stats=runs, accounting=dataclasses.replace(
        accounting, p99_ms=1.1 * accounting.latency_ms))
    assert latency_variance(dataclasses.replace(observed, profile=steady)) is None


def test_attention_run_op_by_op_is_found_and_its_fusion_tried() -> None:
    model = transformer_encoder(layers=2, hidden=32, heads=2, ffn=64, seq=16, batch=1)
    result = profile(model, try_fixes=False, **TINY)
    environment = Environment(default_threads(), None, {}, None, False)
    observed = Observed("encoder.onnx", model, result.model, result.settings, "cpu",
                        environment)
    found = unfused_attention(observed)
    assert found is not None
    assert (found.evidence["blocks"], found.evidence["num_heads"]) == (2, 2)
    assert found.evidence["attention_nodes"] >= 6  # q @ k^T, Softmax, @ v per block
    assert 0 < found.evidence["attention_share"] < 1
    assert "--fuse transformer" in found.fix and "--provider cuda" not in found.fix
    assert found.trial is not None and found.trial.passes == ("fuse-transformer",)
    assert found.trial.required  # reported only where the fused model ran faster here
    cuda = unfused_attention(dataclasses.replace(
        observed, settings=observed.settings.replace(provider="cuda")))
    assert cuda is not None and "--fuse transformer --provider cuda" in cuda.fix
    # Once fused, nothing is left to find; nor on a model without attention.
    from graphfix.passes.fuse_transformer import fuse_transformer
    fused = fuse_transformer(onnx.load_from_string(model.SerializeToString()))
    ran = profile(fused, try_fixes=False, **TINY)
    assert unfused_attention(dataclasses.replace(observed, model=fused, profile=ran.model)) \
        is None
    assert unfused_attention(_observed()) is None


def test_missing_provider_libraries_are_found_when_a_driver_is_there() -> None:
    failing = ProviderStatus("CUDAExecutionProvider", True, False,
                             error="libcudnn.so.9: cannot open shared object file",
                             missing_libraries=["libcudnn.so.9"])
    observed = _observed(requested_provider="auto", environment=Environment(
        default_threads(), None, {}, failing, True))
    found = provider_missing(observed)
    assert found is not None and "libcudnn.so.9" in found.fix
    assert provider_missing(_observed()) is None  # cpu asked for
    no_driver = dataclasses.replace(observed, environment=dataclasses.replace(
        observed.environment, driver=False))
    assert provider_missing(no_driver) is None


def test_a_clean_model_gets_no_finding() -> None:
    # Six calls are too few for a p99: the tail finding cannot fire either.
    assert profile(_mlp(), **TINY).findings == []


def test_every_kind_is_a_function_of_the_observed_run() -> None:
    observed = _observed()
    assert set(KINDS) == {"initializer-inputs", "nhwc-transposes", "cpu-fallback", "float64",
                          "float16-islands", "batch-one", "latency-variance", "threads",
                          "unfused-attention", "optimization-level", "provider-missing"}
    assert all(found.kind in KINDS for found in find(observed))


# -- --vs, the trace and the page --------------------------------------------------------------


class _Page(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.bars: list[dict[str, str]] = []
        self.tables: dict[str, int] = {}
        self._table: str | None = None
        self.findings: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attributes = dict(attrs)
        if tag == "rect" and attributes.get("class") == "bar":
            self.bars.append(attributes)
        if tag == "table":
            self._table = attributes.get("data-model")
            self.tables[self._table] = 0
        if tag == "tr" and self._table is not None:
            self.tables[self._table] += 1
        if tag == "div" and attributes.get("class") == "finding":
            self.findings.append(attributes["data-kind"])
        for key in ("src", "href"):
            if key in attributes:
                self.external.append(attributes[key])

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None


def test_vs_and_the_html_page_and_trace(tmp_path) -> None:
    original = _small_mobilenet(dynamic_batch=False)
    fixed = onnx.ModelProto()
    fixed.CopyFrom(original)
    eliminate_transposes(fixed)
    page, trace = tmp_path / "p.html", tmp_path / "t.json"
    result = profile(fixed, vs=original, try_fixes=False, html=page, trace=trace,
                     names=("fixed.onnx", "original.onnx"), **TINY)
    data = result.to_dict()
    assert result.comparison is not None and data["other"]["name"] == "original.onnx"
    ops = {r["op_type"] for r in data["model"]["op_types"]} | {
        r["op_type"] for r in data["other"]["op_types"]}
    assert {row["op_type"] for row in data["moved"]} == ops

    parser = _Page()
    parser.feed(page.read_text(encoding="utf-8"))
    assert parser.external == []  # self-contained
    for key in ("model", "other"):
        shown = {bar["data-op"]: bar for bar in parser.bars if bar["data-model"] == key}
        assert set(shown) == ops  # every op type of either model, for both models
        for row in data[key]["op_types"]:
            assert float(shown[row["op_type"]]["data-ms"]) == pytest.approx(row["ms"])
        assert parser.tables[key] == len(data[key]["nodes"]) + 1  # header row
    widths = {(b["data-model"], b["data-op"]): float(b["width"]) for b in parser.bars}
    largest = max(float(b["data-ms"]) for b in parser.bars)
    for bar in parser.bars:
        assert float(bar["width"]) == pytest.approx(560 * float(bar["data-ms"]) / largest,
                                                     abs=0.01)
    assert widths

    events = json.loads(trace.read_text())
    names = {e["args"]["name"] for e in events if e.get("ph") == "M"}
    assert names == {"model: fixed.onnx", "other: original.onnx"}
    runs = [e for e in events if e.get("name") == "model_run"]
    assert {e["pid"] for e in runs} == {0, 1} and len(runs) == 2 * (6 + 1)


def test_the_page_lists_the_findings(tmp_path) -> None:
    page = tmp_path / "p.html"
    result = profile(load_light("squeezenet", ir_version=7), try_fixes=False, html=page,
                     **TINY)
    parser = _Page()
    parser.feed(page.read_text(encoding="utf-8"))
    assert parser.findings == [f.kind for f in result.findings]


def test_shape_arithmetic_is_told_from_compute() -> None:
    # ONNX Runtime keeps shape arithmetic on the CPU on purpose; the cpu-fallback finding
    # says so for these nodes rather than "no CUDA kernel"
    from graphfix.validate.profile.findings import shape_arithmetic

    model = onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[M] y) {
    s = Shape (x)
    i = Constant <value = int64[1] {0}> ()
    n = Gather <axis = 0> (s, i)
    two = Constant <value = int64[1] {2}> ()
    m = Mul (n, two)
    f = Flatten <axis = 0> (x)
    r = Reshape (f, m)
    u = Unique (r)
    y = Identity (u)
}""")
    for node in model.graph.node:
        node.name = node.output[0]
    assert shape_arithmetic(model) == {"s", "n", "m"}


# -- CUDA (skipped without a working CUDA provider) --------------------------------------------


def _unique_model() -> onnx.ModelProto:
    """Unique has no CUDA kernel: it stays on the CPU provider between CUDA nodes."""
    return onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[64] x) => (float[N] y) {
    r = Relu (x)
    u = Unique <sorted = 1> (r)
    y = Sigmoid (u)
}""")


@pytest.mark.cuda
@needs_cuda
def test_cuda_profile_binds_on_the_device_and_places_nodes() -> None:
    result = profile(_mlp(), provider="cuda", runs=6, warmup=1, try_fixes=False)
    assert result.provider == "cuda"
    assert "CUDAExecutionProvider" in result.model.placement.nodes
    assert result.model.accounting.memcpy_nodes == 0  # IO binding: no copies in the call
    assert "cpu-fallback" not in _kinds(result)


@pytest.mark.cuda
@needs_cuda
def test_cuda_fallback_and_memcpy_are_found() -> None:
    result = profile(_unique_model(), provider="cuda", runs=6, warmup=1, try_fixes=False)
    found = next(f for f in result.findings if f.kind == "cpu-fallback")
    assert found.evidence["cpu_op_types"].get("Unique") == 1
    assert found.evidence["memcpy_nodes"] >= 1 and found.evidence["memcpy_bytes"] > 0


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None,
                    reason="no chromium here (Debian: apt-get install chromium)")
def test_the_page_sorts_and_draws_in_a_headless_browser(tmp_path) -> None:
    original = _small_mobilenet(dynamic_batch=False)
    page = tmp_path / "page.html"
    profile(_mlp(), vs=_mlp(batch=4), try_fixes=False, html=page, **TINY)
    profile(original, try_fixes=False, html=tmp_path / "one.html", **TINY)
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "check_profile_page.py"),
                           str(page), str(tmp_path / "one.html")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_finding_whose_fix_measured_slower_is_ranked_last() -> None:
    """The evidence of a finding stands when its fix is slower here (a p99 tail is real), but
    its fix is no recommendation: it comes after the findings not measured."""
    from graphfix.validate.profile.findings import Finding, rank
    from graphfix.validate.stats import SLOWER, Speedup

    def measured(speedup: float, verdict: str) -> Speedup:
        return Speedup(speedup, speedup * 0.9, speedup * 1.1, 0.95, verdict, "p99", 1.0, 2.0)

    slower = Finding("latency-variance", "p99 is 3x the median", {"tail_share": 0.5},
                     "dynamic_block_base", measured=measured(0.09, SLOWER))
    unmeasured = Finding("threads", "more threads than cores", {"cpu_share": 0.1}, "threads")
    faster = Finding("batch-one", "batch 1", {}, "batch", measured=measured(2.0, "faster"))
    assert [f.kind for f in rank([slower, unmeasured, faster])] == [
        "batch-one", "threads", "latency-variance"]
