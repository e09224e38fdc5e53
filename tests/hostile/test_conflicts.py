"""Options that contradict each other are usage errors (exit 2), named as such; none silently
wins.

Cases: one input given two shapes, one output two tolerances, a single-valued option given two
values (--seed, --runs, --ort-level, --max-growth, --provider; ``--x=1 --x 2`` spelled both
ways), a flag and its negation, -q with -v (also as -qv), a parity option with --no-verify
(each of them), --tol '*:...' with --atol, --skip of a pass --passes does not list; --inputs
arrays (a .npz, a folder of input_N.pb) against --input-shape for optimize, check and bench;
the library's verify=False with parity options and inputs against input_shapes. And what
repeats without contradiction is accepted.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper

import graphfix


@pytest.fixture
def dynamic(gf):
    """m.onnx: y = Relu(x @ w + b), x float32 [N, 16]."""
    gf.model(gf.models.matmul(16, dims=["N", 16]))


USAGE = {
    "two-shapes": ["--input-shape", "x:1x16", "--input-shape", "x:2x16"],
    "two-tolerances": ["--tol", "y:1e-3:1e-3", "--tol", "y:1e-2:1e-2"],
    "two-seeds": ["--seed", "1", "--seed", "2"],
    "two-runs": ["--runs", "1", "--runs", "3"],
    "two-levels": ["--ort-level", "basic", "--ort-level", "all"],
    "two-growths": ["--max-growth", "2", "--max-growth", "3"],
    "two-providers": ["--provider", "cpu", "--provider", "cuda"],
    "equals-and-space": ["--seed=1", "--seed", "2"],
    "flag-and-negation": ["--external-data", "--no-external-data"],
    "quiet-verbose": ["-q", "-v"],
    "quiet-verbose-joined": ["-qv"],
    "no-verify-inputs": ["--no-verify", "--inputs", "in.npz"],
    "no-verify-runs": ["--no-verify", "--runs", "2"],
    "no-verify-seed": ["--no-verify", "--seed", "3"],
    "no-verify-atol": ["--no-verify", "--atol", "1e-3"],
    "no-verify-rtol": ["--no-verify", "--rtol", "1e-3"],
    "no-verify-tol": ["--no-verify", "--tol", "y:1e-3:1e-3"],
    "star-tol-and-atol": ["--tol", "*:1e-3:1e-3", "--atol", "1e-2"],
    "skip-not-listed": ["--passes", "simplify,fold-shapes", "--skip", "merge-duplicates"],
}


@pytest.mark.parametrize("case", list(USAGE))
def test_contradicting_options_are_a_usage_error(gf, dynamic, case):
    np.savez(gf.folder / "in.npz", x=np.ones((1, 16), np.float32))
    gf.usage_error("optimize", "m.onnx", "out.onnx", *USAGE[case],
                   match="contradict|give one|not among")


@pytest.mark.parametrize("case", ["two-shapes", "two-seeds", "two-tolerances", "quiet-verbose"])
def test_check_and_bench_refuse_them_too(gf, dynamic, case):
    args = [a for a in USAGE[case]]
    if case == "quiet-verbose":
        args = ["--json", "--json"]  # repeats of one meaning are fine
        gf.succeeded("check", "m.onnx", "m.onnx", *args)
        return
    gf.usage_error("check", "m.onnx", "m.onnx", *args, match="contradict")
    if case not in ("two-tolerances", "two-seeds"):  # bench has neither option
        gf.usage_error("bench", "m.onnx", *args, "--runs", "1", "--warmup", "0",
                       match="contradict")


def _pb_inputs(gf) -> str:
    (gf.folder / "td").mkdir()
    tensor = numpy_helper.from_array(np.ones((3, 16), np.float32), "x")
    (gf.folder / "td" / "input_0.pb").write_bytes(tensor.SerializeToString())
    return "td"


def _npz_inputs(gf) -> str:
    np.savez(gf.folder / "in.npz", x=np.ones((3, 16), np.float32))
    return "in.npz"


@pytest.mark.parametrize("inputs", [_npz_inputs, _pb_inputs], ids=["npz", "pb"])
@pytest.mark.parametrize("command", ["optimize", "check", "bench"])
def test_inputs_that_contradict_the_input_shape_are_a_usage_error(gf, dynamic, inputs, command):
    path = inputs(gf)
    args = {"optimize": ["optimize", "m.onnx", "out.onnx"], "check": ["check", "m.onnx", "m.onnx"],
            "bench": ["bench", "m.onnx", "--runs", "1", "--warmup", "0"]}[command]
    gf.usage_error(*args, "--inputs", path, "--input-shape", "x:2x16", match=r"\[3, 16\]")


@pytest.mark.parametrize("inputs", [_npz_inputs, _pb_inputs], ids=["npz", "pb"])
def test_inputs_that_agree_with_the_input_shape_work(gf, dynamic, inputs):
    path = inputs(gf)
    gf.optimized("m.onnx", "out.onnx", "--inputs", path, "--input-shape", "x:3x16")


def test_repeats_that_agree_are_accepted(gf, dynamic):
    gf.optimized("m.onnx", "out.onnx", "--seed", "1", "--seed", "1", "--input-shape", "x:2x16",
                 "--input-shape", "x:2x16", "--skip", "simplify", "--skip", "simplify")


def test_the_library_names_its_conflicts(gf, dynamic):
    model = graphfix.load(gf.folder / "m.onnx")
    with pytest.raises(graphfix.GraphfixError, match="verify=False") as info:
        graphfix.optimize(model, verify=False, parity=graphfix.ParityOptions(runs=2))
    assert type(info.value).__name__ == "ConflictingOptionsError"
    path = _npz_inputs(gf)
    with pytest.raises(graphfix.GraphfixError, match=r"\[3, 16\]") as info:
        graphfix.optimize(model, input_shapes={"x": [2, 16]},
                          parity=graphfix.ParityOptions(inputs=gf.folder / path))
    assert type(info.value).__name__ == "ConflictingOptionsError"


def test_an_option_no_pass_uses_is_said(gf, dynamic):
    outcome = gf.invoke("optimize", "m.onnx", "out.onnx", "--skip", "ort-offline",
                        "--ort-level", "all")
    assert outcome.code == 0, outcome.describe()
    # said once: in the summary, not also as the run went
    said = outcome.stdout + outcome.stderr
    assert said.count("ort_level (--ort-level) has no effect") == 1, outcome.describe()


# Found by a hostile round on cases this suite had not seen: option values and combinations
# the library refuses are usage errors on the command line too (exit 2), for every command.
MORE_USAGE = {
    "require-speedup-zero": (["optimize", "m.onnx", "out.onnx", "--require-speedup", "0"],
                             "> 0"),
    "io-types-without-precision": (["optimize", "m.onnx", "out.onnx", "--io-types", "fp16"],
                                   "needs --precision"),
    "io-types-of-another-precision": (["optimize", "m.onnx", "out.onnx", "--precision", "fp16",
                                       "--io-types", "bf16"], "the --precision's own type"),
    "empty-passes": (["optimize", "m.onnx", "out.onnx", "--passes", ""], "names no pass"),
    "comma-passes": (["optimize", "m.onnx", "out.onnx", "--passes", ","], "names no pass"),
    "cuda-graph-on-cpu": (["bench", "m.onnx", "--provider", "cpu", "--cuda-graph"],
                          "needs --provider cuda"),
    "threads-past-the-limit": (["bench", "m.onnx", "--threads", "99999"], "range"),
    "profile-threads-past-the-limit": (["profile", "m.onnx", "--threads", "99999"], "range"),
    "thread-knob-past-the-limit": (["tune", "m.onnx", "--knob", "intra_op_threads=99999"],
                                   "99999 threads"),
    "profile-two-threads": (["profile", "m.onnx", "--threads", "1", "--threads", "2"],
                            "contradict"),
    "tune-two-budgets": (["tune", "m.onnx", "--budget", "1", "--budget", "2"], "contradict"),
    "bench-config-and-threads": (["bench", "m.onnx", "--config", "cfg.json", "--threads", "1"],
                                 "--config sets the session"),
    "bench-config-and-block-base": (["bench", "m.onnx", "--config", "cfg.json",
                                     "--dynamic-block-base", "4"], "--config sets the session"),
    "profile-config-and-threads": (["profile", "m.onnx", "--config", "cfg.json", "--threads",
                                    "1"], "--config sets the session"),
}


@pytest.mark.parametrize("case", list(MORE_USAGE))
def test_values_and_combinations_the_library_refuses_are_usage_errors(gf, dynamic, case):
    # Imported here: tools/hostile_tally.py runs this module against older trees too.
    from graphfix.validate.session_config import SessionConfig
    from graphfix.validate.timing import Settings

    SessionConfig(Settings.ort_defaults("cpu")).write(gf.folder / "cfg.json")
    args, match = MORE_USAGE[case]
    gf.usage_error(*args, match=match)
