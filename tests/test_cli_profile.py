"""The profile and tune commands, and bench --config: one library call plus formatting."""

from __future__ import annotations

import json

import onnx
from click.testing import CliRunner

from graphfix.cli import cli
from graphfix.passes import eliminate_transposes
from graphfix.validate.session_config import SessionConfig
from graphfix.validate.timing import Settings
from graphfix.models.sample import SAMPLE_PATH

FAST = ("--provider", "cpu", "--runs", "4", "--warmup", "1", "--threads", "1")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_profile_prints_the_accounting_and_findings() -> None:
    result = invoke("profile", SAMPLE_PATH, *FAST, "--no-try")
    assert result.exit_code == 0, result.output
    assert "node times account for" in result.output
    assert "op types (ms per call):" in result.output
    # The sample is an IR-3 NHWC export: both of its problems are findings.
    assert "initializer-inputs" in result.output and "nhwc-transposes" in result.output


def test_profile_progress_off_a_terminal_is_a_line_per_step_counted_in_rounds() -> None:
    result = CliRunner().invoke(cli, ["profile", str(SAMPLE_PATH), *FAST, "--no-try"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("graphfix: ")]
    # 1 warm-up + 4 timed calls: one line for the step, not one per round, and no "[1/5]",
    # which reads as the first of five steps
    assert len(lines) == 1 and lines[0].startswith("graphfix: profile, 5 rounds"), lines
    assert "[1/" not in result.stderr


def test_profile_json_html_and_trace(tmp_path) -> None:
    page, trace = tmp_path / "p.html", tmp_path / "t.json"
    result = invoke("profile", SAMPLE_PATH, *FAST, "--json", "--html", page, "--trace", trace)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["schema"] == "graphfix.profile/1"
    measured = [f for f in data["findings"] if f["measured"]]
    assert measured, "the passes' fixes are measured unless --no-try"
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert any(e.get("name") == "model_run" for e in json.loads(trace.read_text()))


def test_profile_vs_shows_where_the_time_moved(tmp_path) -> None:
    fixed = onnx.load(str(SAMPLE_PATH))
    eliminate_transposes(fixed)
    path = tmp_path / "fixed.onnx"
    onnx.save(fixed, str(path))
    # a comparison takes five rounds at least
    result = invoke("profile", path, "--vs", SAMPLE_PATH, *FAST[:2], "--runs", "5", *FAST[4:],
                    "--no-try")
    assert result.exit_code == 0, result.output
    assert "where the time moved" in result.output
    assert "fixed.onnx vs sample_nhwc.onnx" in result.output


def test_profile_errors_are_one_line(tmp_path) -> None:
    missing = invoke("profile", tmp_path / "missing.onnx", *FAST)
    assert missing.exit_code == 1 and len(missing.output.strip().splitlines()) == 1
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    refused = invoke("profile", SAMPLE_PATH, "--config", bad, "--runs", "2")
    assert refused.exit_code == 1 and "graphfix.tune/1" in refused.output
    assert invoke("profile", SAMPLE_PATH, "--runs", "0").exit_code == 2


def test_bench_config_applies_the_settings(tmp_path) -> None:
    path = tmp_path / "config.json"
    SessionConfig(Settings("cpu", 1, 4, False, False)).write(path)
    result = invoke("bench", SAMPLE_PATH, "--config", path, "--runs", "3", "--warmup", "1",
                    "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["dynamic_block_base"] == 4 and data["threads"] == 1
    clash = invoke("bench", SAMPLE_PATH, "--config", path, "--threads", "2", "--runs", "2")
    # Two options that set the session: a usage error (exit 2), as every contradiction is.
    assert clash.exit_code == 2 and "--config sets the session" in clash.output


def test_tune_prints_the_table_writes_the_config_and_bench_rechecks_it(tmp_path) -> None:
    out = tmp_path / "tuned.json"
    result = invoke("tune", SAMPLE_PATH, "--provider", "cpu", "--budget", "3",
                    "--knob", "intra_op_threads=1", "--out", out)
    assert result.exit_code == 0, result.output
    assert "A/A (the default against itself)" in result.output
    assert "winner:" in result.output and "import onnxruntime as ort" in result.output
    assert json.loads(out.read_text())["schema"] == "graphfix.tune/1"
    recheck = invoke("bench", SAMPLE_PATH, "--config", out, "--vs-config", "ort-defaults",
                     "--runs", "5", "--warmup", "1", "--json")
    assert recheck.exit_code == 0, recheck.output
    data = json.loads(recheck.output)
    assert data["baseline_settings"]["session_options"]["intra_op_num_threads"] == 0


def test_tune_json_and_usage_errors(tmp_path) -> None:
    result = invoke("tune", SAMPLE_PATH, "--provider", "cpu", "--budget", "2",
                    "--knob", "allow_spinning=false", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["schema"] == "graphfix.tune-result/1"
    assert invoke("tune", SAMPLE_PATH, "--knob", "warp=1").exit_code == 2
    assert invoke("tune", SAMPLE_PATH, "--knob", "intra_op_threads=two").exit_code == 2
    assert invoke("tune", SAMPLE_PATH, "--knob", "threads").exit_code == 2
    # a level is checked up front as every other knob's value (it was dropped in the table)
    assert invoke("tune", SAMPLE_PATH, "--knob", "optimization=bogus").exit_code == 2
    refused = invoke("tune", SAMPLE_PATH, "--provider", "cpu", "--knob", "use_tf32=0")
    assert refused.exit_code == 1 and "cuda" in refused.output


def test_outputs_never_overwrite_what_is_read(tmp_path) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(SAMPLE_PATH.read_bytes())
    before = model.read_bytes()
    for args in (("profile", model, *FAST, "--html", model),
                 ("profile", model, *FAST, "--trace", model),
                 ("tune", model, "--provider", "cpu", "--budget", "1", "--out", model)):
        result = invoke(*args)
        assert result.exit_code == 1 and "refusing to overwrite the input" in result.output
    assert model.read_bytes() == before


def test_profile_figures_add_up_and_a_p99_from_few_calls_is_called_what_it_is() -> None:
    """The node times' share was a median of per-call ratios beside shares of mean times
    (11.7% accounted, 15.8% compute); a p99 from four calls is the slowest of them."""
    result = invoke("profile", SAMPLE_PATH, *FAST, "--no-try", "--json")
    assert result.exit_code == 0, result.output
    a = json.loads(result.output)["model"]["accounting"]
    assert abs(a["accounted"] - (a["glue_share"] + a["compute_share"])) < 0.01
    assert a["calls"] == 4
    text = invoke("profile", SAMPLE_PATH, *FAST, "--no-try").output
    assert "slowest" in text and "a p99 needs 50" in text and ", p99 " not in text


def test_profile_and_tune_refuse_inputs_and_sizes_that_disagree(tmp_path) -> None:
    import numpy as np

    model = onnx.load(str(SAMPLE_PATH))
    [value] = [v for v in model.graph.input if v.name not in
               {t.name for t in model.graph.initializer}]
    dims = [d.dim_value or 1 for d in value.type.tensor_type.shape.dim]
    inputs = tmp_path / "in.npz"
    np.savez(inputs, **{value.name: np.zeros([2, *dims[1:]], np.float32)})
    shape = "x".join(str(d) for d in [1, *dims[1:]])
    for command in ("profile", "tune"):
        result = invoke(command, SAMPLE_PATH, "--inputs", inputs, "--input-shape",
                        f"{value.name}:{shape}")
        assert result.exit_code == 2 and "--input-shape fixes it" in result.output, command
