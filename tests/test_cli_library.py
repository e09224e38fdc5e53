"""Every option of `graphfix optimize` is a library option with the same default: the command
line and the library call, for the same arguments, give the same report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import graphfix
from graphfix.cli import cli
from graphfix.models.sample import SAMPLE_PATH

_TIMES = {"seconds", "reference_seconds", "reference_overlapped"}


def _without_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if k not in _TIMES}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


CASES = [
    pytest.param([], {}, id="defaults"),
    pytest.param(["--skip", "simplify", "--max-growth", "0"],
                 {"skip": ["simplify"], "max_growth": 0}, id="skip-growth"),
    pytest.param(["--passes", "remove-initializer-inputs,eliminate-transposes",
                  "--keep-reduction-order"],
                 {"passes": ["remove-initializer-inputs", "eliminate-transposes"],
                  "keep_reduction_order": True}, id="passes-reduction-order"),
    pytest.param(["--ort-level", "extended", "--provider", "cpu", "--no-verify"],
                 {"ort_level": "extended", "provider": "cpu", "verify": False}, id="ort-level"),
    pytest.param(["--input-shape", "input:1x64x64x3", "--runs", "2", "--seed", "3",
                  "--atol", "1e-3", "--tol", "output:1e-3:1e-2"],
                 {"input_shapes": {"input": [1, 64, 64, 3]},
                  "parity": graphfix.ParityOptions(runs=2, seed=3, tolerances={
                      "*": (1e-3, None), "output": (1e-3, 1e-2)})}, id="parity"),
    pytest.param(["--inputs-as-nchw", "input"], {"inputs_as_nchw": ["input"]}, id="nchw"),
]


@pytest.mark.parametrize("flags, arguments", CASES)
def test_the_cli_is_the_library_call(tmp_path: Path, flags: list[str],
                                     arguments: dict[str, Any]) -> None:
    from graphfix.feeds import input_specs

    name = input_specs(graphfix.load(SAMPLE_PATH))[0].name
    flags = [f.replace("input:", f"{name}:") if f.startswith("input:") else
             (name if f == "input" else f) for f in flags]
    if "input_shapes" in arguments:
        arguments = {**arguments, "input_shapes": {name: arguments["input_shapes"]["input"]}}
    if "inputs_as_nchw" in arguments:
        arguments = {**arguments, "inputs_as_nchw": [name]}
    cli_report, lib_report = tmp_path / "cli.json", tmp_path / "lib.json"
    result = CliRunner().invoke(cli, ["optimize", str(SAMPLE_PATH), str(tmp_path / "cli.onnx"),
                                      "--report", str(cli_report), "-q", *flags])
    assert result.exit_code == 0, result.output
    graphfix.optimize_file(SAMPLE_PATH, tmp_path / "lib.onnx", report=lib_report, **arguments)
    cli_data = _without_times(json.loads(cli_report.read_text()))
    lib_data = _without_times(json.loads(lib_report.read_text()))
    for data in (cli_data, lib_data):
        data["written"] = Path(data["written"]).name.replace("cli", "x").replace("lib", "x")
    assert cli_data == lib_data
    assert (tmp_path / "cli.onnx").read_bytes() == (tmp_path / "lib.onnx").read_bytes()
