"""Hostile option values: out of range, not numbers, NaN and infinities, unknown names, malformed
shapes and tolerances, --inputs that are corrupt or do not fit, a provider that does not load.

Cases (65): 31 usage errors (exit 2, click's message): --seed -1, --atol -1, --atol nan, --rtol
inf, 6 malformed --tol, 6 malformed --input-shape, --input-shape zero and negative, --passes
unknown, --passes with an unknown name among known ones, --skip unknown, --max-growth 0.5, -1
and nan, --require-speedup nan and -1, --ort-level bogus, --provider bogus, --runs 0, --inputs
missing, an unknown option; bench --threads 0 and --warmup -1 (2); 26 refusals (exit 1, one
line): --tol naming an unknown output (optimize, check; the error lists the outputs),
--input-shape huge (static and dynamic input), unknown name, wrong rank, against a static size,
--inputs: a corrupt .npz, a truncated .npz, an .npz with wrong names, dtypes, shapes, an object
(pickled) array, an empty .npz, an empty folder, a folder with a garbage input_0.pb, a .txt
file, a FIFO, a FIFO named input_0.pb; --inputs-as-nchw and --outputs-as-nchw naming nothing,
--require-speedup 1e9, --provider cuda without CUDA (optimize, check, bench; skipped where CUDA
works); --report that is a folder (exit 2); 6 that must work: a seed above 2**64, --atol/--rtol
1e300, a pass named twice, --inputs that fit, ONNX Runtime's log silent without -vv and shown
with -vv. """

from __future__ import annotations

import io
import json
import os
import re
import zipfile

import numpy as np
import pytest
from onnx import numpy_helper


@pytest.fixture
def model(gf):
    """m.onnx: y = Relu(x @ w + b), x float32 [1, 16]."""
    return gf.model()


def _optimize(*extra: str) -> list[str]:
    return ["optimize", "m.onnx", "out.onnx", *extra]


# --------------------------------------------------------------------------- usage errors
USAGE = {
    "seed-negative": ["--seed", "-1"],
    "atol-negative": ["--atol", "-1"],
    "atol-nan": ["--atol", "nan"],
    "rtol-inf": ["--rtol", "inf"],
    "tol-one-part": ["--tol", "y"],
    "tol-two-parts": ["--tol", "y:1e-3"],
    "tol-words": ["--tol", "y:a:b"],
    "tol-no-name": ["--tol", ":1e-3:1e-3"],
    "tol-nan": ["--tol", "y:nan:1e-3"],
    "tol-negative": ["--tol", "y:-1:0"],
    "shape-no-sizes": ["--input-shape", "x"],
    "shape-empty-sizes": ["--input-shape", "x:"],
    "shape-letters": ["--input-shape", "x:1xa"],
    "shape-no-name": ["--input-shape", ":1x16"],
    "shape-trailing-x": ["--input-shape", "x:1x"],
    "shape-commas": ["--input-shape", "x:1,16"],
    "shape-zero": ["--input-shape", "x:0x16"],
    "shape-negative": ["--input-shape", "x:-1x16"],
    "passes-unknown": ["--passes", "frobnicate"],
    "passes-one-unknown": ["--passes", "simplify,frobnicate"],
    "skip-unknown": ["--skip", "frobnicate"],
    "max-growth-half": ["--max-growth", "0.5"],
    "max-growth-negative": ["--max-growth", "-1"],
    "max-growth-nan": ["--max-growth", "nan"],
    "require-speedup-nan": ["--require-speedup", "nan"],
    "require-speedup-negative": ["--require-speedup", "-1"],
    "ort-level-bogus": ["--ort-level", "bogus"],
    "provider-bogus": ["--provider", "tpu"],
    "runs-zero": ["--runs", "0"],
    "inputs-missing": ["--inputs", "missing.npz"],
    "unknown-option": ["--frobnicate"],
}


@pytest.mark.parametrize("name", list(USAGE))
def test_usage_errors(gf, model, name):
    gf.usage_error(*_optimize(*USAGE[name]))


@pytest.mark.parametrize("extra", [["--threads", "0"], ["--warmup", "-1"]],
                         ids=["threads-zero", "warmup-negative"])
def test_bench_usage_errors(gf, model, extra):
    gf.usage_error("bench", "m.onnx", *extra)


# --------------------------------------------------------------------------- refusals
def test_tol_naming_an_unknown_output(gf, model):
    out = gf.refused(*_optimize("--tol", "logits:1e-3:1e-2"), match="logits")
    assert "'y'" in out.error_lines[0] or " y" in out.error_lines[0], out.describe()


def test_check_tol_naming_an_unknown_output(gf, model):
    out = gf.refused("check", "m.onnx", "m.onnx", "--tol", "logits:1e-3:1e-2", match="logits")
    assert "'y'" in out.error_lines[0] or " y" in out.error_lines[0], out.describe()


@pytest.mark.parametrize("shape, match", [
    ("x:99999999999x64", None),
    ("nope:1x16", "nope"),
    ("x:1x16x1", "dimensions"),
    ("x:2x16", "axis 0"),
], ids=["huge", "unknown-name", "wrong-rank", "against-static"])
def test_input_shape_refusals(gf, model, shape, match):
    gf.refused(*_optimize("--input-shape", shape), match=match)


def test_huge_input_shape_on_a_dynamic_input(gf):
    gf.model(gf.models.matmul(dims=["batch", 16]))
    gf.refused(*_optimize("--input-shape", "x:99999999999x16"))


def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


GOOD = {"x": np.ones((1, 16), np.float32)}


@pytest.mark.parametrize("kind", [
    "corrupt", "truncated", "wrong-names", "wrong-dtype", "wrong-shape", "object-array",
    "empty-npz"])
def test_inputs_npz_that_does_not_fit(gf, model, kind):
    path = gf.folder / "in.npz"
    if kind == "corrupt":
        path.write_bytes(np.random.default_rng(0).integers(0, 256, 2048, np.uint8).tobytes())
    elif kind == "truncated":
        path.write_bytes(_npz(**GOOD)[:200])
    elif kind == "wrong-names":
        path.write_bytes(_npz(input=GOOD["x"]))
    elif kind == "wrong-dtype":
        path.write_bytes(_npz(x=GOOD["x"].astype(np.float64)))
    elif kind == "wrong-shape":
        path.write_bytes(_npz(x=np.ones((2, 8), np.float32)))
    elif kind == "object-array":  # an array numpy could only read by unpickling
        path.write_bytes(_npz(x=np.array([{"a": 1}], dtype=object)))
    else:
        with zipfile.ZipFile(path, "w"):
            pass
    gf.refused(*_optimize("--inputs", "in.npz"), match="in.npz")


@pytest.mark.parametrize("kind", ["empty-folder", "garbage-pb", "txt-file", "fifo",
                                  "fifo-pb"])
def test_inputs_folder_or_file_that_does_not_fit(gf, model, kind):
    """Files that are not inputs; a FIFO nobody writes to must not block the run."""
    if kind == "txt-file":
        (gf.folder / "inputs.txt").write_text("1 2 3\n")
        target = "inputs.txt"
    elif kind == "fifo":
        os.mkfifo(gf.folder / "inputs")
        target = "inputs"
    elif kind == "fifo-pb":
        (gf.folder / "inputs").mkdir()
        os.mkfifo(gf.folder / "inputs" / "input_0.pb")
        target = "inputs"
    else:
        (gf.folder / "inputs").mkdir()
        if kind == "garbage-pb":
            (gf.folder / "inputs" / "input_0.pb").write_bytes(b"\xff\xfe not a tensor" * 10)
        target = "inputs"
    gf.refused(*_optimize("--inputs", target), match="inputs")


@pytest.mark.parametrize("option", ["--inputs-as-nchw", "--outputs-as-nchw"])
def test_layout_option_naming_nothing(gf, option):
    gf.model(gf.models.nhwc())
    gf.refused(*_optimize(option, "nope"), match="nope")


def test_report_that_is_a_folder(gf, model):
    (gf.folder / "r.json").mkdir()
    gf.usage_error(*_optimize("--report", "r.json"), match="directory")


def test_a_speedup_that_cannot_be_reached(gf, model):
    gf.refused(*_optimize("--require-speedup", "1e9"), match="speedup")


@pytest.mark.parametrize("command", ["optimize", "check", "bench"])
def test_provider_cuda_without_cuda(gf, model, command, cuda_works):
    if cuda_works:
        pytest.skip("CUDA works here")
    args = {"optimize": _optimize("--provider", "cuda"),
            "check": ["check", "m.onnx", "m.onnx", "--provider", "cuda"],
            "bench": ["bench", "m.onnx", "--provider", "cuda", "--runs", "1"]}[command]
    gf.refused(*args, match="(?i)cuda")


# --------------------------------------------------------------------------- must work
def test_a_seed_above_two_to_the_64(gf, model):
    gf.optimized("m.onnx", "out.onnx", "--seed", str(2**64 + 1))


def test_a_huge_tolerance(gf, model):
    gf.optimized("m.onnx", "out.onnx", "--atol", "1e300", "--rtol", "1e300")


def test_a_pass_named_twice(gf):
    gf.model(gf.models.nhwc())
    gf.optimized("m.onnx", "out.onnx", "--passes", "eliminate-transposes,eliminate-transposes")


def test_inputs_that_fit(gf, model):
    (gf.folder / "in.npz").write_bytes(_npz(**GOOD))
    gf.optimized("m.onnx", "out.onnx", "--inputs", "in.npz")


# --------------------------------------------------------------------------- ONNX Runtime's log
def _noisy(gf):
    """Weights listed as graph inputs (IR 4): ONNX Runtime warns about each when it loads the
    original ('Initializer w appears in graph inputs ...')."""
    model = gf.models.matmul(ir=4)
    for tensor in model.graph.initializer:
        model.graph.input.append(
            __import__("onnx").helper.make_tensor_value_info(tensor.name, tensor.data_type,
                                                             list(tensor.dims)))
    gf.model(model)


def test_ort_log_stays_quiet_without_vv(gf):
    _noisy(gf)
    gf.optimized("m.onnx", "out.onnx")  # the helper asserts nothing reached fd 1 or 2


def test_ort_log_appears_with_vv(gf):
    _noisy(gf)
    outcome = gf.invoke(*_optimize("-vv"))
    assert outcome.code == 0 and outcome.traceback is None, outcome.describe()
    assert "onnxruntime" in outcome.fd_err + outcome.stderr, outcome.describe()


# --------------------------------------------------------------------------- reports, knobs
@pytest.mark.parametrize("extra, match", [
    (["--input-shape", "nope:1x16"], "nope"),
    (["--input-shape", "x:1x16x1"], "dimensions"),
    (["--inputs-as-nchw", "x"], "inputs_as_nchw"),
], ids=["shape-unknown-name", "shape-wrong-rank", "nchw-on-rank-2"])
def test_a_refusal_before_any_pass_still_writes_the_report(gf, model, extra, match):
    """--report is written for every refusal, with the error, also those of an option that
    does not fit the model (refused before any pass ran)."""
    out = gf.invoke(*_optimize("--report", "r.json", *extra))
    assert out.code == 1 and len(out.error_lines) == 1, out.describe()
    assert out.added == [str(gf.folder / "r.json")], out.describe()
    report = json.loads((gf.folder / "r.json").read_text())
    assert re.search(match, report["error"]) and report["input"]["nodes"] > 0, report


@pytest.mark.parametrize("source", ["missing.onnx", "empty.onnx"])
def test_a_source_that_cannot_be_read_still_writes_the_report(gf, source):
    (gf.folder / "empty.onnx").write_bytes(b"")
    out = gf.invoke("optimize", source, "out.onnx", "--report", "r.json")
    assert out.code == 1 and len(out.error_lines) == 1, out.describe()
    report = json.loads((gf.folder / "r.json").read_text())
    assert source in report["error"] and report["input"] is None, report
    assert not (gf.folder / "out.onnx").exists()


def test_a_report_is_never_written_over_the_source_it_could_not_read(gf):
    (gf.folder / "empty.onnx").write_bytes(b"")
    out = gf.invoke("optimize", "empty.onnx", "out.onnx", "--report", "empty.onnx")
    assert out.code == 1, out.describe()
    assert (gf.folder / "empty.onnx").read_bytes() == b""


def test_a_model_with_no_outputs_is_refused_saying_so(gf):
    model = gf.models.matmul(dims=["N", 16])
    del model.graph.output[:]
    gf.model(model)
    gf.refused(*_optimize(), match="declares no outputs")
    gf.refused("bench", "m.onnx", "--runs", "2", match="declares no outputs")


def test_an_unknown_execution_mode_is_a_usage_error(gf, model):
    gf.usage_error("tune", "m.onnx", "--budget", "1", "--knob", "execution_mode=bogus",
                   match="sequential, parallel")


def test_a_batch_past_the_input_limit_is_dropped_not_built(gf):
    """tune --objective throughput with a batch whose inputs would pass the 2 GiB graphfix
    generates for one input: that candidate is dropped saying so, in a second, not built."""
    gf.model(gf.models.matmul(dims=["N", 16]))
    out = gf.invoke("tune", "m.onnx", "--objective", "throughput", "--budget", "1",
                    "--knob", "batch_size=100000000", "--json")
    assert out.code == 0, out.describe()
    rows = {c["name"]: c for c in json.loads(out.stdout)["candidates"]}
    dropped = rows["batch_size=100000000"]
    assert dropped["status"] == "dropped" and "GiB" in dropped["reason"], dropped


def test_a_configuration_without_a_provider_says_so(gf, model):
    (gf.folder / "c.json").write_text(json.dumps(
        {"schema": "graphfix.tune/1", "settings": {"session_options": {}}}))
    gf.refused("bench", "m.onnx", "--config", "c.json", "--runs", "2",
               match="provider is missing")


def test_an_unnamed_tensor_past_the_inputs_says_its_position_names_none(gf, model):
    (gf.folder / "pb").mkdir()
    (gf.folder / "pb" / "input_5.pb").write_bytes(
        numpy_helper.from_array(np.ones((1, 16), np.float32)).SerializeToString())
    gf.refused("check", "m.onnx", "m.onnx", "--inputs", "pb", match="position names no input")


def test_a_fixed_input_too_large_to_generate_does_not_point_to_input_shape(gf):
    gf.model(gf.models.matmul(dims=[1 << 20, 1 << 20]))
    out = gf.refused("bench", "m.onnx", "--runs", "2", match="GiB")
    assert "--input-shape" not in out.error_lines[0] and "--inputs" in out.error_lines[0]


@pytest.mark.parametrize("dst", ["m.onnx", "afile/out.onnx"], ids=["dst-is-src", "dst-under-a-file"])
def test_an_output_refused_before_the_passes_still_writes_the_report(gf, model, dst):
    (gf.folder / "afile").write_text("x")
    out = gf.invoke("optimize", "m.onnx", dst, "--report", "r.json")
    assert out.code == 1 and len(out.error_lines) == 1, out.describe()
    assert json.loads((gf.folder / "r.json").read_text())["error"], out.describe()


def test_a_report_is_never_written_where_the_model_was_to_go(gf, model):
    out = gf.invoke("optimize", "m.onnx", "o.onnx", "--report", "o.onnx")
    assert out.code == 1 and not (gf.folder / "o.onnx").exists(), out.describe()
