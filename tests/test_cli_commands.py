"""check, bench, doctor, inspect's plan, and optimize's pass, parity and bench options."""

from __future__ import annotations

import json
import os
import shlex

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

from graphfix import registry
from graphfix.cli import cli
from graphfix.providers import probe_provider
from graphfix.models.sample import SAMPLE_PATH
from tests.test_guilty_pass import _model as planted_model
from tests.test_guilty_pass import _planted, dropped_bias

RELU = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[N, 4] y) { y = Relu (x) }
"""


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _save(tmp_path, name: str, text: str):
    path = tmp_path / name
    onnx.save(onnx.parser.parse_model(text), str(path))
    return path


def test_check_passes_fails_and_speaks_json(tmp_path) -> None:
    ref = _save(tmp_path, "ref.onnx", RELU)
    same = _save(tmp_path, "same.onnx", RELU.replace("Relu (x)", "Max (x, zero)").replace(
        "{ y", "<float zero = {0.0}> { y"))
    other = _save(tmp_path, "other.onnx", RELU.replace("Relu", "Sigmoid"))
    ok = invoke("check", ref, same)
    assert ok.exit_code == 0 and "parity holds" in ok.output and "run 1: x float32" in ok.output
    bad = invoke("check", ref, other)
    assert bad.exit_code == 1 and "parity FAILED" in bad.output and "FAIL" in bad.output
    data = json.loads(invoke("check", ref, other, "--json", "--runs", "3").output)
    assert data["passed"] is False and len(data["runs"]) == 3
    assert data["outputs"][0]["name"] == "y"
    loose = invoke("check", ref, other, "--atol", "10")
    assert loose.exit_code == 0
    assert invoke("check", ref, other, "--tol", "y:10:0").exit_code == 0
    assert invoke("check", ref, other, "--tol", "y:10").exit_code == 2


@pytest.mark.parametrize("command", ["check", "bench", "profile", "tune", "inspect"])
def test_json_is_printed_when_the_command_fails_too(tmp_path, command: str) -> None:
    """A script reading --json's standard output gets JSON whatever happened: the error and its
    hint, the exit code 1 (before, nothing, and a JSON decode error in the script)."""
    ref = _save(tmp_path, "ref.onnx", RELU)
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    models = [ref, broken] if command == "check" else [broken]
    result = CliRunner().invoke(cli, [command, *map(str, models), "--json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert "not an ONNX model" in data["error"] and data["hint"]
    assert "error: " in result.stderr


def test_check_with_real_inputs_and_shapes(tmp_path) -> None:
    ref = _save(tmp_path, "ref.onnx", RELU)
    np.savez(tmp_path / "in.npz", x=np.ones((5, 4), np.float32))
    result = invoke("check", ref, ref, "--inputs", tmp_path / "in.npz")
    assert result.exit_code == 0 and "x float32[5, 4]" in result.output
    result = invoke("check", ref, ref, "--input-shape", "x:3x4")
    assert "x float32[3, 4]" in result.output
    np.savez(tmp_path / "bad.npz", z=np.ones(2))
    bad = invoke("check", ref, ref, "--inputs", tmp_path / "bad.npz")
    assert bad.exit_code == 1 and "missing 'x'" in bad.output


def test_a_guilty_pass_is_named_with_the_command_to_run(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register("planted-dropped-bias")(_planted("dropped-bias", dropped_bias))
    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(planted_model(), str(src))
    args = ["optimize", src, dst, "--passes", "eliminate-transposes,planted-dropped-bias",
            "--strict"]
    result = invoke(*args)
    assert result.exit_code == 1 and not dst.exists()
    assert "pass 'planted-dropped-bias' broke" in result.output
    # The command to run, or (when the paths make it too long for one line) the option to add.
    line = next(line for line in result.output.splitlines() if line.startswith("error:"))
    assert len(line) <= 300, line
    if "to leave it out: " in line:
        command = shlex.split(line.split("to leave it out: ", 1)[1].rstrip(")"))[1:]
    else:
        assert "run again with --skip planted-dropped-bias" in line, line
        command = [*map(str, args), "--skip", "planted-dropped-bias"]
    assert command[-2:] == ["--skip", "planted-dropped-bias"]
    assert invoke(*command).exit_code == 0 and dst.exists()


def test_without_strict_the_guilty_pass_is_left_out_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register("planted-dropped-bias")(_planted("dropped-bias", dropped_bias))
    src, dst, report = tmp_path / "in.onnx", tmp_path / "out.onnx", tmp_path / "r.json"
    onnx.save(planted_model(), str(src))
    result = invoke("optimize", src, dst, "--passes", "eliminate-transposes,planted-dropped-bias",
                    "--report", report)
    assert result.exit_code == 0 and dst.exists()
    [line] = [x for x in result.output.splitlines() if x.startswith("warning: left out")]
    assert line.startswith("warning: left out pass 'planted-dropped-bias': broke output")
    assert len(line) <= 300
    data = json.loads(report.read_text())
    assert data["left_out"][0]["pass"] == "planted-dropped-bias" and data["parity"]["passed"]


def test_pass_options_reach_the_passes(tmp_path) -> None:
    out = tmp_path / "out.onnx"
    report = tmp_path / "r.json"
    result = invoke("optimize", SAMPLE_PATH, out, "--skip", "simplify", "--ort-level", "all",
                    "--max-growth", "0", "--report", report)
    assert result.exit_code == 0, result.output
    written = onnx.load(str(out))
    props = {p.key: p.value for p in written.metadata_props}
    assert props["graphfix.ort_level"] == "all"
    passes = {p["name"]: p for p in json.loads(report.read_text())["passes"]}
    assert passes["ort-offline"]["options"]["max_growth"] is None
    assert "tied to" in result.output


def test_input_shape_fixes_dims_in_simplify_and_parity(tmp_path) -> None:
    src = _save(tmp_path, "ref.onnx", RELU)
    out = tmp_path / "out.onnx"
    result = invoke("optimize", src, out, "--input-shape", "x:3x4", "--report", tmp_path / "r.json")
    assert result.exit_code == 0, result.output
    dims = [d.dim_value for d in onnx.load(str(out)).graph.input[0].type.tensor_type.shape.dim]
    assert dims == [3, 4]
    parity = json.loads((tmp_path / "r.json").read_text())["parity"]
    assert parity["runs"] == [{"x": "float32[3, 4]"}]


def test_no_verify_is_reported_and_verification_options_conflict_cleanly(tmp_path) -> None:
    src = _save(tmp_path, "ref.onnx", RELU)
    result = invoke("optimize", src, tmp_path / "o.onnx", "--passes", "eliminate-transposes",
                    "--no-verify")
    assert result.exit_code == 0 and "parity: not checked" in result.output


def test_require_speedup_refuses_a_model_that_gained_nothing(tmp_path) -> None:
    src = _save(tmp_path, "ref.onnx", RELU)
    out = tmp_path / "out.onnx"
    result = invoke("optimize", src, out, "--passes", "eliminate-transposes",
                    "--require-speedup", "1.05", "--report", tmp_path / "r.json")
    assert result.exit_code == 1, result.output
    assert "speedup" in result.output and not out.exists()
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["bench"]["ci_low"] < 1.05 and "required speedup" in data["error"]


def test_bench_table_and_json(tmp_path) -> None:
    src = _save(tmp_path, "ref.onnx", RELU)
    result = invoke("bench", src, "--vs", src, "--runs", "10", "--warmup", "2", "--offline",
                    "--shape", "x:8x4")
    assert result.exit_code == 0, result.output
    assert "median ms" in result.output and "speedup" in result.output
    assert "inputs: x 8x4" in result.output  # the sizes chosen for the dynamic dimensions
    # Two models of one file name in two folders are told apart.
    (tmp_path / "out").mkdir()
    twin = _save(tmp_path / "out", "ref.onnx", RELU)
    result = invoke("bench", twin, "--vs", src, "--runs", "5", "--warmup", "1")
    assert result.exit_code == 0, result.output
    assert f"out{os.sep}ref.onnx" in result.output and f"{tmp_path.name}{os.sep}ref.onnx" in \
        result.output
    data = json.loads(invoke("bench", src, "--runs", "5", "--warmup", "1", "--json").output)
    assert data["candidate"]["runs"] == 5 and data["speedup"] is None
    assert data["dynamic_block_base"] is None
    data = json.loads(invoke("bench", src, "--runs", "5", "--warmup", "1", "--json",
                             "--dynamic-block-base", "4").output)
    assert data["dynamic_block_base"] == 4


@pytest.mark.skipif(probe_provider("cuda").loadable, reason="CUDA loads here")
def test_cuda_requests_fail_cleanly_without_cuda(tmp_path) -> None:
    src = _save(tmp_path, "ref.onnx", RELU)
    doctor = invoke("doctor", "--provider", "cuda")
    assert doctor.exit_code == 1 and "fix:" in doctor.output
    bench = invoke("bench", src, "--provider", "cuda")
    assert bench.exit_code == 1 and "error:" in bench.output and "Traceback" not in bench.output


def test_doctor_json(tmp_path) -> None:
    result = invoke("doctor", "--json")
    data = json.loads(result.output)
    assert result.exit_code == (0 if data["ok"] else 1)
    assert data["providers"]["cpu"]["loadable"] is True


def test_inspect_says_what_would_change() -> None:
    result = invoke("inspect", SAMPLE_PATH)
    assert "remove-initializer-inputs: drop 20 initializer(s)" in result.output
    assert "eliminate-transposes: Transposes 18 -> 1" in result.output
    data = json.loads(invoke("inspect", SAMPLE_PATH, "--json").output)
    assert data["transposes"] == 18 and "eliminate-transposes" in data["would_change"]


def test_a_refused_run_still_writes_its_report(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register("planted-dropped-bias")(_planted("dropped-bias", dropped_bias))
    src, report = tmp_path / "in.onnx", tmp_path / "r.json"
    onnx.save(planted_model(), str(src))
    result = invoke("optimize", src, tmp_path / "out.onnx", "--passes", "planted-dropped-bias",
                    "--report", report, "--strict")
    assert result.exit_code == 1
    data = json.loads(report.read_text())
    assert data["parity"]["passed"] is False and data["written"] is None
    assert "planted-dropped-bias" in data["error"]


def test_keep_reduction_order_keeps_the_transpose_before_the_pool(tmp_path) -> None:
    pool = _save(tmp_path, "pool.onnx", """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 3, 4, 4] x) => (float[1, 3] y) {
        t = Transpose <perm = [0, 2, 3, 1]> (x)
        r = Relu (t)
        y = ReduceMean <axes = [1, 2], keepdims = 0> (r)
    }""")
    for flag, transposes in ((), 0), (("--keep-reduction-order",), 1):
        out, report = tmp_path / f"out{len(flag)}.onnx", tmp_path / f"r{len(flag)}.json"
        result = invoke("optimize", pool, out, "-q", "--skip", "simplify", "--report", report,
                        *flag)
        assert result.exit_code == 0, result.output
        ops = [n.op_type for n in onnx.load(str(out)).graph.node]
        assert ops.count("Transpose") == transposes, ops
        options = [p["options"] for p in json.loads(report.read_text())["passes"]
                   if p["name"] == "eliminate-transposes"]
        assert all(o["keep_reduction_order"] is bool(flag) for o in options)


def _nhwc_conv(tmp_path):
    """A converter-style NHWC convolution saved as in.onnx: Transposes at both ends."""
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 8, 8, 3] x) => (float[N, 8, 8, 4] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        c = Conv <pads = [1, 1, 1, 1]> (t, w)
        r = Relu (c)
        y = Transpose <perm = [0, 2, 3, 1]> (r)
    }""")
    model.graph.initializer.append(onnx.numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32), "w"))
    src = tmp_path / "in.onnx"
    onnx.save(model, str(src))
    return src


def test_inputs_as_nchw_parity_and_bench_feed_each_model_its_layout(tmp_path) -> None:
    src, out, report = _nhwc_conv(tmp_path), tmp_path / "out.onnx", tmp_path / "r.json"
    result = invoke("optimize", src, out, "-q", "--inputs-as-nchw", "x", "--report", report,
                    "--bench", "--input-shape", "x:2x8x8x3")
    assert result.exit_code == 0, result.output
    optimized = onnx.load(str(out))
    assert [d.dim_value or d.dim_param for d in optimized.graph.input[0].type.tensor_type.shape
            .dim][1] == 3
    assert [n.op_type for n in optimized.graph.node].count("Transpose") == 1  # the output's
    data = json.loads(report.read_text())
    assert data["parity"]["passed"] and data["bench"]["speedup"] > 0
    assert any("signature changed" in w for p in data["passes"] for w in p["warnings"])
    assert invoke("check", src, out, "--input-shape", "x:2x8x8x3").exit_code == 0
    # Without the record of the change, the optimized model does not fit the original's inputs.
    del optimized.metadata_props[:]
    onnx.save(optimized, str(tmp_path / "unrecorded.onnx"))
    assert invoke("check", src, tmp_path / "unrecorded.onnx", "--input-shape", "x:2x8x8x3"
                  ).exit_code == 1


def test_input_shape_follows_the_layout_only_when_it_changes(tmp_path) -> None:
    src = _nhwc_conv(tmp_path)
    # The pass that would change the layout is skipped: the shapes stay SRC's.
    skipped = invoke("optimize", src, tmp_path / "a.onnx", "-q", "--skip", "eliminate-transposes",
                     "--inputs-as-nchw", "x", "--input-shape", "x:2x8x8x3")
    assert skipped.exit_code == 0, skipped.output
    # Converted once, then again: the second run changes nothing, and its shapes are NCHW.
    first = invoke("optimize", src, tmp_path / "b.onnx", "-q", "--inputs-as-nchw", "x")
    assert first.exit_code == 0, first.output
    second = invoke("optimize", tmp_path / "b.onnx", tmp_path / "c.onnx", "-q", "--inputs-as-nchw",
                    "x", "--input-shape", "x:2x3x8x8", "--bench")
    assert second.exit_code == 0, second.output
    dims = onnx.load(str(tmp_path / "c.onnx")).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims] == [2, 3, 8, 8]


def test_bench_shape_contradicting_a_fixed_input_shape_is_a_usage_error(tmp_path) -> None:
    from click.testing import CliRunner

    from graphfix.cli import cli

    done = CliRunner().invoke(cli, ["optimize", "in.onnx", str(tmp_path / "out.onnx"),
                                    "--input-shape", "x:1x8", "--bench-shape", "x:4x8"])
    assert done.exit_code == 2
    assert "--input-shape x:1x8 fixes that input in the model" in done.output
    done = CliRunner().invoke(cli, ["optimize", "in.onnx", str(tmp_path / "out.onnx"),
                                    "--bench-shape", "x:4x8", "--bench-shape", "x:2x8"])
    assert done.exit_code == 2 and "contradict" in done.output


@pytest.mark.parametrize("args", [
    ["tune", "{m}", "--budget", "1", "--knob", "batch_size=4"],  # needs --objective throughput
    ["bench", "{m}", "--vs", "{m}", "--runs", "4"],  # a comparison needs 5 rounds
    ["profile", "{m}", "--vs", "{m}", "--runs", "4"],
    ["tune", "{m}", "--budget", "1", "--knob", "dynamic_block_base=99999999999"],  # an int
])
def test_options_a_measurement_cannot_take_together_are_usage_errors(tmp_path, args) -> None:
    model = _save(tmp_path, "m.onnx", RELU)
    result = CliRunner().invoke(cli, [a.format(m=model) for a in args])
    assert result.exit_code == 2, result.output


def test_feeds_and_inputs_together_are_refused_by_the_library(tmp_path) -> None:
    import graphfix
    from graphfix.errors import BenchmarkError
    from graphfix.options import ConflictingOptionsError

    model = onnx.parser.parse_model(RELU)
    np.savez(tmp_path / "in.npz", x=np.ones((2, 4), np.float32))
    feeds = {"x": np.ones((2, 4), np.float32)}
    for call in (lambda: graphfix.benchmark(model, feeds=feeds, inputs=tmp_path / "in.npz"),
                 lambda: graphfix.profile(model, feeds=feeds, inputs=tmp_path / "in.npz"),
                 lambda: graphfix.tune(model, feeds=feeds, inputs=tmp_path / "in.npz")):
        with pytest.raises(ConflictingOptionsError, match="feeds and inputs") as caught:
            call()
        assert isinstance(caught.value, BenchmarkError)


def test_a_configuration_tuned_for_another_model_is_said_wherever_it_is_read(tmp_path) -> None:
    import graphfix

    other = _save(tmp_path, "other.onnx", RELU.replace("Relu", "Sigmoid"))
    model = _save(tmp_path, "m.onnx", RELU)
    config = tmp_path / "tuned.json"
    graphfix.tune(other, provider="cpu", budget=0.05, space={"intra_op_threads": [1]},
                  out=config)
    said = "the configuration was tuned for 'other.onnx'"
    for args in (["bench", model, "--config", config, "--runs", "5"],
                 ["bench", model, "--vs-config", config, "--runs", "5"],
                 ["profile", model, "--config", config, "--runs", "5", "--no-try"]):
        result = invoke(*args)
        assert result.exit_code == 0 and said in result.output, (args, result.output)
