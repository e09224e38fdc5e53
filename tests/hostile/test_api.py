"""The Python API with odd arguments: each public function checks its arguments before it does
anything and raises graphfix's own error naming the argument (or takes it as documented).

Cases: optimize with a dict for parity or bench, a string for passes or skip, a float count, an
int or a string for a shape, a bool for a count, a string for verify, a non-callable progress, a
bad pass_options and require_speedup; optimize_file with bytes or an int for a path, an unknown
keyword; save with a path for a model, an int path, a string for external_data; load of an int,
None, a list; inspect of an int; check_parity and benchmark with paths (taken, as load takes
them) and with an int; ParityOptions, BenchOptions and RunOptions with floats, strings and bools
where counts, numbers and flags go.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import graphfix
from graphfix.errors import GraphfixError
from graphfix.options import OptionError


@pytest.fixture
def model(gf):
    gf.model()
    return graphfix.load(gf.folder / "m.onnx")


def _refused(gf, call, *names: str, kind: type[Exception] = GraphfixError) -> None:
    before = sorted(p.name for p in gf.folder.iterdir())
    with pytest.raises(kind) as info:
        call()
    message = str(info.value)
    assert "\n" not in message and len(message) <= 300, message
    for name in names:
        assert name in message, message
    assert sorted(p.name for p in gf.folder.iterdir()) == before


OPTIMIZE = {
    "parity-dict": ({"parity": {"runs": 2}}, "parity"),
    "bench-dict": ({"bench": {"runs": 2}}, "bench"),
    "passes-string": ({"passes": "simplify"}, "passes"),
    "skip-string": ({"skip": "simplify"}, "skip"),
    "skip-int": ({"skip": 3}, "skip"),
    "shape-int": ({"input_shapes": {"x": 16}}, "'x'"),
    "shape-string": ({"input_shapes": {"x": "1x16"}}, "'x'"),
    "shapes-list": ({"input_shapes": [1, 16]}, "input shapes"),
    "verify-string": ({"verify": "no"}, "verify"),
    "progress-int": ({"progress": 3}, "progress"),
    "pass-options-list": ({"pass_options": ["simplify"]}, "pass_options"),
    "require-speedup-string": ({"require_speedup": "fast"}, "require_speedup"),
    "require-speedup-negative": ({"require_speedup": -1.0}, "require_speedup"),
    "max-growth-string": ({"max_growth": "2"}, "growth"),
    "keep-reduction-order-string": ({"keep_reduction_order": "yes"}, "keep_reduction_order"),
    "ort-level-list": ({"ort_level": ["basic"]}, "level"),
    "nchw-int": ({"inputs_as_nchw": 3}, "inputs_as_nchw"),
}


@pytest.mark.parametrize("case", list(OPTIMIZE))
def test_optimize_names_the_argument(gf, model, case):
    kwargs, name = OPTIMIZE[case]
    _refused(gf, lambda: graphfix.optimize(model, **kwargs), name, kind=OptionError)


OPTIONS = {
    "parity-runs-float": (lambda: graphfix.ParityOptions(runs=2.5), "runs"),
    "parity-runs-bool": (lambda: graphfix.ParityOptions(runs=True), "runs"),
    "parity-seed-float": (lambda: graphfix.ParityOptions(seed=1.5), "seed"),
    "parity-inputs-int": (lambda: graphfix.ParityOptions(inputs=3), "inputs"),
    "parity-inputs-bytes": (lambda: graphfix.ParityOptions(inputs=b"in.npz"), "inputs"),
    "parity-tolerance-number": (lambda: graphfix.ParityOptions(tolerances={"y": 1e-3}),
                                "tolerances"),
    "parity-tolerance-strings": (lambda: graphfix.ParityOptions(tolerances={"y": ("a", "b")}),
                                 "tolerances"),
    "bench-runs-float": (lambda: graphfix.BenchOptions(runs=2.0), "runs"),
    "bench-threads-string": (lambda: graphfix.BenchOptions(threads="4"), "threads"),
    "bench-warmup-float": (lambda: graphfix.BenchOptions(warmup=0.5), "warmup"),
    "bench-offline-string": (lambda: graphfix.BenchOptions(offline="yes"), "offline"),
    "run-growth-string": (lambda: graphfix.RunOptions(max_growth="2"), "growth"),
}


@pytest.mark.parametrize("case", list(OPTIONS))
def test_options_name_the_field(gf, case):
    call, name = OPTIONS[case]
    _refused(gf, call, name, kind=OptionError)


def test_optimize_file_refuses_bytes_paths(gf):
    gf.model()
    _refused(gf, lambda: graphfix.optimize_file(b"m.onnx", gf.folder / "out.onnx"), "src")
    _refused(gf, lambda: graphfix.optimize_file(gf.folder / "m.onnx", b"out.onnx"), "dst")


def test_optimize_file_refuses_a_number_for_a_path(gf):
    gf.model()
    _refused(gf, lambda: graphfix.optimize_file(gf.folder / "m.onnx", 3), "dst")
    _refused(gf, lambda: graphfix.optimize_file(gf.folder / "m.onnx", gf.folder / "o.onnx",
                                                report=3), "report")


def test_optimize_file_refuses_an_unknown_keyword(gf):
    gf.model()
    _refused(gf, lambda: graphfix.optimize_file(gf.folder / "m.onnx", gf.folder / "o.onnx",
                                                tolerance=1e-3), "tolerance")


def test_optimize_file_refuses_a_string_for_external_data(gf):
    gf.model()
    _refused(gf, lambda: graphfix.optimize_file(gf.folder / "m.onnx", gf.folder / "o.onnx",
                                                external_data="yes"), "external_data")


def test_save_names_its_arguments(gf, model):
    _refused(gf, lambda: graphfix.save(str(gf.folder / "m.onnx"), gf.folder / "o.onnx"), "model")
    _refused(gf, lambda: graphfix.save(model, 3), "path")
    _refused(gf, lambda: graphfix.save(model, b"o.onnx"), "path")
    _refused(gf, lambda: graphfix.save(model, gf.folder / "o.onnx", external_data="no"),
             "external_data")


@pytest.mark.parametrize("source", [3, None, ["m.onnx"], 2.5], ids=["int", "none", "list",
                                                                     "float"])
def test_load_and_inspect_refuse_what_is_no_model(gf, source):
    _refused(gf, lambda: graphfix.load(source), "model")
    _refused(gf, lambda: graphfix.inspect(source), "model")


def test_optimize_refuses_what_is_no_model(gf):
    _refused(gf, lambda: graphfix.optimize(3), "model", kind=OptionError)


def test_check_parity_takes_paths_as_load_does(gf):
    gf.model()
    result = graphfix.check_parity(str(gf.folder / "m.onnx"), gf.folder / "m.onnx")
    assert result.passed


def test_check_parity_and_benchmark_refuse_what_is_no_model(gf, model):
    _refused(gf, lambda: graphfix.check_parity(3, model), "reference")
    _refused(gf, lambda: graphfix.check_parity(model, 3), "candidate")
    _refused(gf, lambda: graphfix.benchmark(3), "model")
    _refused(gf, lambda: graphfix.benchmark(model, baseline=3), "baseline")


def test_benchmark_takes_a_path(gf):
    gf.model()
    result = graphfix.benchmark(str(gf.folder / "m.onnx"), provider="cpu", warmup=0, runs=2)
    assert result.to_dict()


def test_a_mixed_path_and_bytes_model_pair_works(gf):
    """A model as bytes and one as a Path: both are models."""
    gf.model()
    data = (gf.folder / "m.onnx").read_bytes()
    assert graphfix.check_parity(data, Path(gf.folder / "m.onnx")).passed


@pytest.mark.parametrize("options", [{"runs": 0}, {"runs": -1}, {"runs": 1.5}, {"feeds": []}],
                         ids=["no-runs", "negative-runs", "float-runs", "no-feeds"])
def test_check_parity_refuses_to_compare_nothing(gf, model, options):
    """A check that compares no input set would pass whatever the candidate computes."""
    wrong = graphfix.load(gf.folder / "m.onnx")
    wrong.graph.node[1].op_type = "Sub"
    _refused(gf, lambda: graphfix.check_parity(model, wrong, **options),
             "feeds" if "feeds" in options else "runs")


def test_tune_drops_a_thread_count_past_the_limit(gf):
    gf.model()
    result = graphfix.tune(gf.folder / "m.onnx", budget=1, space={"intra_op_threads": [99999]})
    dropped = [c for c in result.candidates if c.name == "intra_op_threads=99999"]
    assert dropped and dropped[0].status == "dropped" and "at most" in dropped[0].reason
    assert result.kept_default


ARRAY = __import__("numpy").zeros(3)
CALLS = {
    "optimize-precision-array": (lambda m: graphfix.optimize(m, precision=ARRAY), "precision"),
    "optimize-io-types-array": (lambda m: graphfix.optimize(m, precision="fp16", io_types=ARRAY),
                                "io types"),
    "check-feeds-array": (lambda m: graphfix.check_parity(m, m, feeds=ARRAY), "feeds"),
    "check-tolerances-array": (lambda m: graphfix.check_parity(m, m, tolerances=ARRAY),
                               "tolerances"),
    "check-shapes-array": (lambda m: graphfix.check_parity(m, m, input_shapes=ARRAY), "shapes"),
    "check-no-reference": (lambda m: graphfix.check_parity(None, m), "reference"),
    "bench-feeds-array": (lambda m: graphfix.benchmark(m, feeds=ARRAY), "feeds"),
    "bench-threads-string": (lambda m: graphfix.benchmark(m, threads="2"), "threads"),
    "bench-shapes-array": (lambda m: graphfix.benchmark(m, input_shapes=ARRAY), "shapes"),
    "bench-confidence": (lambda m: graphfix.benchmark(m, baseline=m, confidence=1.5),
                         "confidence"),
    "bench-resamples": (lambda m: graphfix.benchmark(m, baseline=m, resamples=0), "resamples"),
    "profile-trace-array": (lambda m: graphfix.profile(m, trace=ARRAY), "trace"),
    "profile-runs-string": (lambda m: graphfix.profile(m, runs="5"), "runs"),
    "tune-space-array": (lambda m: graphfix.tune(m, space=ARRAY), "space"),
    "tune-out-array": (lambda m: graphfix.tune(m, out=ARRAY), "out"),
    "tune-inputs-int": (lambda m: graphfix.tune(m, inputs=3), "inputs"),
    "tune-progress-int": (lambda m: graphfix.tune(m, progress=3), "progress"),
    "tune-resamples-huge": (lambda m: graphfix.tune(m, resamples=2**70), "resamples"),
    "tune-out-nul": (lambda m: graphfix.tune(m, out="a\0b"), "NUL"),
    "tune-unknown-knob-long": (lambda m: graphfix.tune(m, space={"nope" * 200: [1]}), "knob"),
    "tune-knob-value-long": (lambda m: graphfix.tune(m, space={"intra_op_threads": "x" * 500}),
                             "intra_op_threads"),
    "check-progress-int": (lambda m: graphfix.check_parity(m, m, progress=3), "progress"),
    "check-runs-huge": (lambda m: graphfix.check_parity(m, m, runs=2**70), "runs"),
    "bench-progress-string": (lambda m: graphfix.benchmark(m, progress="x"), "progress"),
    "bench-runs-huge": (lambda m: graphfix.benchmark(m, runs=10**12), "runs"),
    "profile-html-nul": (lambda m: graphfix.profile(m, html="a\0b"), "NUL"),
    "profile-inputs-int": (lambda m: graphfix.profile(m, inputs=3), "inputs"),
    "save-nul": (lambda m: graphfix.save(m, "a\0b.onnx"), "NUL"),
    "save-protect-int": (lambda m: graphfix.save(m, "o.onnx", protect=3), "protect"),
    "optimize-ort-level-array": (lambda m: graphfix.optimize(m, ort_level=ARRAY), "level"),
    "optimize-fuse-array": (lambda m: graphfix.optimize(m, fuse=ARRAY), "fusion"),
    "check-names-one": (lambda m: graphfix.check_parity(m, m, names=("a",)), "names"),
    "check-reference-run-int": (lambda m: graphfix.check_parity(None, m, reference_run=3),
                                "reference_run"),
    "check-feeds-and-inputs": (lambda m: graphfix.check_parity(
        m, m, feeds={"x": ARRAY}, inputs="in.npz"), "feeds and inputs"),
    "profile-names-one": (lambda m: graphfix.profile(m, vs=m, names=("a",)), "names"),
    "save-companion-text": (lambda m: graphfix.save(m, "o.onnx", companions={"c.txt": "text"}),
                            "companion"),
    "save-companion-int": (lambda m: graphfix.save(m, "o.onnx",
                                                   companions={"c.txt": lambda w: 3}),
                           "companion"),
    "save-companions-list": (lambda m: graphfix.save(m, "o.onnx", companions=[1]),
                             "companions"),
    "tune-space-float": (lambda m: graphfix.tune(m, space={"intra_op_threads": [1.5]}),
                         "intra_op_threads"),
    "tune-space-none": (lambda m: graphfix.tune(m, space={"intra_op_threads": [None]}),
                        "intra_op_threads"),
}


@pytest.mark.parametrize("case", list(CALLS))
def test_arrays_and_strings_where_options_go_are_refused_before_anything_runs(gf, model, case):
    """A numpy array where a name, a mapping or a path goes, or a string where a count goes:
    graphfix's own error naming the argument, raised before any session opens (a confidence
    out of range used to surface only after the whole benchmark had run)."""
    call, name = CALLS[case]
    _refused(gf, lambda: call(model), name)


def test_a_model_as_a_bytearray_and_a_layout_name_as_a_string_are_taken(gf, model):
    """optimize takes the bytes of a model in a bytearray, as load does; a single name given
    as a string for inputs_as_nchw is that name, not its letters."""
    result = graphfix.optimize(bytearray(model.SerializeToString()), speed_gate=False)
    assert result.report.parity["passed"]
    with pytest.raises(GraphfixError, match="no graph input named 'xy'"):
        graphfix.optimize(model, inputs_as_nchw="xy")
