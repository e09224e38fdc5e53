from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

import graphfix
from graphfix.cli import cli

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
RESNET = LIGHT / "light_resnet50.onnx"
FAST = ["--passes", "remove-initializer-inputs"]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def invoke(runner: CliRunner, *args: str):
    return runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_version(runner):
    result = invoke(runner, "--version")
    assert result.exit_code == 0
    assert graphfix.__version__ in result.output


def test_help_teaches(runner):
    result = invoke(runner, "optimize", "--help")
    assert result.exit_code == 0
    assert "Examples:" in result.output and "--skip" in result.output


def test_the_top_level_help_shows_every_command_at_work(runner):
    """Each command has its line of example in ``graphfix --help``, not only in the list."""
    result = invoke(runner, "--help")
    assert result.exit_code == 0
    examples = result.output.split("Options:")[0]
    for name in cli.commands:
        assert f"graphfix {name}" in examples, (name, result.output)


def test_passes_lists_default_order(runner):
    result = invoke(runner, "passes")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0].startswith("default pipeline: remove-initializer-inputs")
    assert any(line.strip().startswith("remove-initializer-inputs") for line in lines[1:])


def test_inspect_text_and_json(runner):
    text = invoke(runner, "inspect", RESNET)
    assert text.exit_code == 0
    assert "IR 3" in text.output and "initializers listed as inputs: 269" in text.output
    data = json.loads(invoke(runner, "inspect", RESNET, "--json").output)
    assert data["ir_version"] == 3
    assert data["initializer_inputs"] == 269
    assert data["op_histogram"]["Conv"] == 53
    assert data["external_data"] is False


def test_optimize_writes_and_reports(runner, tmp_path):
    out, report = tmp_path / "out.onnx", tmp_path / "report.json"
    result = invoke(runner, "optimize", RESNET, out, *FAST, "--report", report, "--no-verify")
    assert result.exit_code == 0, result.output
    model = onnx.load(str(out))
    assert [i.name for i in model.graph.input] == ["gpu_0/data_0"]
    data = json.loads(report.read_text())
    assert data["schema"] == "graphfix.report/1"
    assert data["input"]["initializer_inputs"] == 269
    assert data["output"]["initializer_inputs"] == 0
    (entry,) = data["passes"]
    assert entry["name"] == "remove-initializer-inputs" and entry["modified"] is True
    assert entry["stats"]["initializer_inputs_removed"] == 269
    assert data["written"] == str(out)
    assert "remove-initializer-inputs" in result.output  # the summary table


def test_parity_progress_counts_the_input_sets_the_summary_names(runner, tmp_path):
    """Off a terminal, parity's progress names input sets, as the summary does (it counts the
    reference's and the candidate's runs, which read as twice the sets)."""
    result = invoke(runner, "optimize", RESNET, tmp_path / "out.onnx", *FAST)
    assert result.exit_code == 0, result.output
    sets = int(result.output.split("parity: passed on ")[1].split(" input set")[0])
    shown = [line for line in result.stderr.splitlines() if "parity, input set" in line]
    assert shown and shown[-1].startswith(f"graphfix: parity, input set {sets}/{sets} ")
    assert f"/{2 * sets}" not in "".join(shown)
    # check shows the reference's runs too, named so that the count does not restart
    checked = invoke(runner, "check", RESNET, RESNET)
    lines = [line.split(" (")[0] for line in checked.stderr.splitlines() if "parity, " in line]
    assert lines == ["graphfix: parity, reference on input set 1/1",
                     "graphfix: parity, input set 1/1"], lines


def test_input_file_is_never_modified(runner, tmp_path):
    src = tmp_path / "in.onnx"
    src.write_bytes(RESNET.read_bytes())
    before = src.read_bytes()
    invoke(runner, "optimize", src, tmp_path / "out.onnx", *FAST, "--no-verify")
    assert src.read_bytes() == before
    same = invoke(runner, "optimize", src, src, *FAST, "--no-verify")
    assert same.exit_code == 1
    assert "refusing to overwrite the input" in same.output
    assert src.read_bytes() == before


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: None, "no such file"),
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: p.write_bytes(b""), "is empty"),
        (lambda p: p.write_bytes(os.urandom(2048)), "not an ONNX model"),
        (lambda p: p.write_bytes(RESNET.read_bytes()[:5000]), "not an ONNX model"),
    ],
    ids=["missing", "directory", "empty", "random-bytes", "truncated"],
)
def test_bad_input_is_one_line_exit_1_and_no_output(runner, tmp_path, make, message):
    src, out = tmp_path / "bad.onnx", tmp_path / "out.onnx"
    make(src)
    result = invoke(runner, "optimize", src, out, *FAST)
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == (["bad.onnx"] if src.exists() else [])


def test_structurally_broken_model(runner, tmp_path):
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2] x) => (float[2] y) { y = Add (x, missing) }
    """)
    src = tmp_path / "broken.onnx"
    src.write_bytes(model.SerializeToString())
    result = invoke(runner, "optimize", src, tmp_path / "out.onnx", *FAST)
    assert result.exit_code == 1
    assert "invalid model" in result.output
    assert not (tmp_path / "out.onnx").exists()


def big_weight_model() -> onnx.ModelProto:
    model = onnx.parser.parse_model("""
    <ir_version: 3, opset_import: ["" : 9]>
    g (float[1,64] x, float[64,64] w) => (float[1,64] y) { y = MatMul (x, w) }
    """)
    w = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    model.graph.initializer.append(onnx.numpy_helper.from_array(w, "w"))
    return model


def test_missing_external_data(runner, tmp_path):
    model = big_weight_model()
    graphfix.save(model, tmp_path / "ext.onnx", external_data=True)
    (tmp_path / "ext.onnx.data").unlink()
    result = invoke(runner, "optimize", tmp_path / "ext.onnx", tmp_path / "out.onnx", *FAST)
    assert result.exit_code == 1
    assert "is missing" in result.output


def test_external_data_stays_external(runner, tmp_path):
    model = big_weight_model()
    graphfix.save(model, tmp_path / "ext.onnx", external_data=True)
    out = tmp_path / "out" / "model.onnx"
    out.parent.mkdir()
    result = invoke(runner, "optimize", tmp_path / "ext.onnx", out, *FAST, "--no-verify")
    assert result.exit_code == 0, result.output
    assert sorted(os.listdir(out.parent)) == ["model.onnx", "model.onnx.data"]


def test_unknown_pass_is_a_usage_error(runner, tmp_path):
    result = invoke(runner, "optimize", RESNET, tmp_path / "o.onnx", "--passes", "no-such-pass")
    assert result.exit_code == 2
    assert "unknown pass 'no-such-pass'" in result.output
    result = invoke(runner, "optimize", RESNET, tmp_path / "o.onnx", "--skip", "nope")
    assert result.exit_code == 2


def test_console_script_and_module_entry_point(tmp_path):
    # Run from an empty folder so that the installed package, not the source tree, is imported.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    exe = Path(sys.executable).with_name("graphfix")
    for command in ([str(exe), "--version"], [sys.executable, "-m", "graphfix", "--version"]):
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert graphfix.__version__ in done.stdout
    done = subprocess.run(
        [sys.executable, "-c", "import graphfix.passes, graphfix.registry as r; print(r.names())"],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )
    assert "remove-initializer-inputs" in done.stdout, done.stderr


def test_ctrl_c_inside_a_native_import_is_an_interrupt(runner, monkeypatch):
    """Ctrl-C while ONNX Runtime's module initializes: its import raises ImportError
    ("initialization failed") from the KeyboardInterrupt, which printed a traceback, exit 1."""
    import graphfix.cli as cli_module

    def interrupted(*args, **kwargs):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as err:
            raise ImportError("initialization failed") from err

    monkeypatch.setattr(cli_module, "_configure_logging", interrupted)
    result = runner.invoke(cli, ["inspect", "m.onnx"])
    assert result.exit_code == 130 and "interrupted" in result.output
    assert "Traceback" not in result.output

    def broken(*args, **kwargs):
        raise ImportError("a module that is not there")

    monkeypatch.setattr(cli_module, "_configure_logging", broken)
    assert isinstance(runner.invoke(cli, ["inspect", "m.onnx"]).exception, ImportError)


def test_a_warning_is_said_once_in_the_summary_and_before_a_refusal(tmp_path):
    """The run's warnings are said once: in the summary on success (not also on stderr as the
    run went); on stderr, before the error line, when the run is refused."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              tmp_path / "m.onnx")
    said = "ort_level (--ort-level) has no effect"
    base = [sys.executable, "-m", "graphfix", "optimize", "m.onnx", "out.onnx",
            "--passes", "remove-initializer-inputs", "--ort-level", "all"]
    done = subprocess.run(base, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(said) == 1 and said not in done.stderr, (done.stdout, done.stderr)
    (tmp_path / "out.onnx").unlink()
    refused = subprocess.run(base + ["--require-speedup", "100"], cwd=tmp_path,
                             capture_output=True, text=True)
    assert refused.returncode == 1 and not (tmp_path / "out.onnx").exists()
    assert not refused.stdout
    lines = [line for line in refused.stderr.splitlines() if not line.startswith("graphfix:")]
    assert [said in line for line in lines] == [True, False], lines
    assert lines[-1].startswith("error: required speedup 100x"), lines
