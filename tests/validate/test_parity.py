"""Parity: per-output statistics, scale-aware tolerances, and verdicts on real ORT runs."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from graphfix.errors import ValidationInputError
from graphfix.options import DEFAULT_TOLERANCES, parse_tolerance
from graphfix.validate.parity import check_parity, compare_output, format_parity


def _model(text: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(text)


def test_scale_aware_tolerance_catches_a_one_percent_error_on_small_outputs(rng) -> None:
    for magnitude in (1e-3, 1.0, 1e3):
        ref = (rng.standard_normal(1000) * magnitude).astype(np.float32)
        off = compare_output("y", ref, ref * np.float32(1.01))
        assert not off.passed, magnitude
        # a legal reassociation: errors of a few float32 ulps of the scale
        noise = rng.standard_normal(1000).astype(np.float32) * np.float32(magnitude * 1e-6)
        close = compare_output("y", ref, ref + noise)
        assert close.passed, (magnitude, close.reason)
        assert close.tolerance_used < 0.1


def test_statistics_are_reported() -> None:
    ref = np.array([1.0, -2.0, 3.0, 4.0], np.float32)
    cand = ref + np.array([0, 0, 0, 1e-2], np.float32)
    stats = compare_output("y", ref, cand)
    assert not stats.passed and stats.mismatched == 1 and stats.elements == 4
    assert math.isclose(stats.max_abs_error, 1e-2, rel_tol=1e-3)
    assert math.isclose(stats.mean_abs_error, 2.5e-3, rel_tol=1e-3)
    assert math.isclose(stats.max_rel_error, 2.5e-3, rel_tol=1e-3)
    assert 0.99 < stats.cosine <= 1.0
    assert "max abs error 0.01" in stats.reason
    as_dict = stats.to_dict()
    assert as_dict["name"] == "y" and as_dict["passed"] is False


@pytest.mark.parametrize(
    "cand, words",
    [
        (np.array([1.0, np.nan, 3.0], np.float32), "NaN appears in 1"),
        (np.array([1.0, np.inf, 3.0], np.float32), "Inf appears in 1"),
        (np.array([1.0, 2.0, 3.0], np.float16), "dtype float16"),
        (np.array([[1.0, 2.0, 3.0]], np.float32), "shape [1, 3]"),
    ],
)
def test_structural_differences_fail(cand, words) -> None:
    stats = compare_output("y", np.array([1.0, 2.0, 3.0], np.float32), cand)
    assert not stats.passed and words in stats.reason
    assert stats.tolerance_used == math.inf


def test_nan_in_both_at_the_same_place_passes() -> None:
    ref = np.array([1.0, np.nan, -np.inf], np.float32)
    assert compare_output("y", ref, ref.copy()).passed


def test_integers_compare_exactly_unless_told_otherwise() -> None:
    ref = np.array([3, 4, 5], np.int64)
    stats = compare_output("label", ref, ref + np.array([0, 0, 1]))
    assert not stats.passed and "1 of 3 values differ" in stats.reason
    assert compare_output("label", ref, ref + np.array([0, 0, 1]), (1.0, 0.0)).passed
    assert compare_output("flag", np.array([True]), np.array([True])).passed


def test_defaults_are_looser_for_half_precision() -> None:
    assert DEFAULT_TOLERANCES["float16"][1] > DEFAULT_TOLERANCES["float32"][1]
    ref = np.linspace(-1, 1, 100).astype(np.float16)
    assert compare_output("y", ref, (ref * np.float16(1.003)).astype(np.float16)).passed
    assert not compare_output("y", ref, (ref * np.float16(1.05)).astype(np.float16)).passed


def test_parse_tolerance() -> None:
    assert parse_tolerance("logits:1e-3:1e-2") == ("logits", (1e-3, 1e-2))
    assert parse_tolerance("a:b:0:0.1") == ("a:b", (0.0, 0.1))
    for bad in ("logits", "logits:1", "x:a:b"):
        with pytest.raises(ValueError):
            parse_tolerance(bad)


RELU = _model("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[N, 4] y, float[N] s) {
    y = Relu (x)
    axes = Constant <value = int64[1] {1}> ()
    s = ReduceSum <keepdims = 0> (y, axes)
}
""")


def _edit(model: onnx.ModelProto, old: str, new: str) -> onnx.ModelProto:
    return _model(onnx.printer.to_text(model).replace(old, new))


def test_identical_models_pass_at_two_dynamic_sizes() -> None:
    result = check_parity(RELU, RELU)
    assert result.passed and result.problem is None
    assert [o.name for o in result.outputs] == ["y", "s"]
    assert len(result.runs) == 2 and result.runs[0]["x"] != result.runs[1]["x"]
    assert result.to_dict()["passed"] is True


def test_a_wrong_candidate_fails_and_names_the_output() -> None:
    wrong = _edit(RELU, "y = Relu (x)", "y = Sigmoid (x)")
    result = check_parity(RELU, wrong)
    assert not result.passed
    assert result.worst.name == "y" and "y" in result.describe()


def test_tolerances_override_globally_and_per_output() -> None:
    shifted = _edit(
        RELU, "y = Relu (x)", "r = Relu (x)\n eps = Constant <value = float {0.01}> ()\n y = Add (r, eps)"
    )
    assert not check_parity(RELU, shifted).passed
    assert check_parity(RELU, shifted, tolerances={"*": (1.0, 0.0)}).passed
    result = check_parity(RELU, shifted, tolerances={"y": (1.0, 0.0)})
    assert not result.passed and result.worst.name == "s"


def test_signature_changes_fail() -> None:
    extra = _edit(RELU, "=> (float[N,4] y, float[N] s)", "=> (float[N,4] y, float[N] s, float[N,4] x2)")
    extra = _edit(extra, "y = Relu (x)", "y = Relu (x)\n x2 = Identity (x)")
    result = check_parity(RELU, extra)
    assert not result.passed and "only in the optimized model" in result.problem
    swapped = _edit(RELU, "=> (float[N,4] y, float[N] s)", "=> (float[N] s, float[N,4] y)")
    assert "another order" in check_parity(RELU, swapped).problem
    # An input the reference takes, read or not, is one its callers feed.
    unread = _edit(RELU, "(float[N,4] x) =>", "(float[N,4] x, float[N,8] mask) =>")
    result = check_parity(unread, RELU)
    assert not result.passed and "lacks an input the original takes: 'mask'" in result.problem
    assert check_parity(unread, unread).passed


def test_a_candidate_that_does_not_load_fails_parity_and_a_bad_original_is_an_error() -> None:
    broken = _edit(RELU, "y = Relu (x)", "y = Relu (x, x)")
    result = check_parity(RELU, broken)
    assert not result.passed and "cannot load the optimized model" in result.problem
    with pytest.raises(ValidationInputError) as info:
        check_parity(broken, RELU)
    assert "original" in str(info.value) and "--no-verify" in info.value.hint


def test_sizes_the_original_rejects_are_retried_and_noted() -> None:
    model = _model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1, S] x) => (float[R, 16] y) {
        shape = Constant <value = int64[2] {-1, 16}> ()
        y = Reshape (x, shape)
    }
    """)
    result = check_parity(model, model)
    assert result.passed
    assert all(int(run["x"].split(", ")[1].rstrip("]")) % 16 == 0 for run in result.runs)
    assert result.notes and "rejects" in result.notes[0]
    # the summary a command prints says so too: a pass means only what was checked
    import graphfix
    from graphfix.report import format_summary

    summary = format_summary(graphfix.optimize(model).report)
    assert "note: run 0: the original rejects" in summary and "only" in summary


def test_given_feeds_and_npz_inputs(tmp_path) -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 4) - 4
    result = check_parity(RELU, RELU, feeds={"x": x})
    assert result.passed and result.runs == [{"x": "float32[2, 4]"}]
    np.savez(tmp_path / "in.npz", x=x)
    assert check_parity(RELU, RELU, inputs=str(tmp_path / "in.npz")).passed
    with pytest.raises(ValidationInputError, match="float64"):
        check_parity(RELU, RELU, feeds={"x": x.astype(np.float64)})


def test_progress_is_reported() -> None:
    seen = []
    check_parity(RELU, RELU, runs=3, progress=lambda label, done, total: seen.append((done, total)))
    # Three runs of each model, the reference's first.
    assert seen[0] == (0, 6) and seen[-1] == (6, 6)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


# ------------------------------------------------------------------ models the check must feed
AUDIO_FRONT_END = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[batch, samples] audio) => (float[batch, 4, frames] features) {
    axes = Constant <value = int64[1] {1}> ()
    x = Unsqueeze (audio, axes)
    c0 = Conv <strides = [5]> (x, w0)
    c1 = Conv <strides = [2]> (c0, w1)
    c2 = Conv <strides = [2]> (c1, w2)
    c3 = Conv <strides = [2]> (c2, w3)
    c4 = Conv <strides = [2]> (c3, w4)
    c5 = Conv <strides = [2]> (c4, w5)
    features = Conv <strides = [2]> (c5, w6)
}"""


def _with_weights(text: str, rng, **shapes: tuple[int, ...]) -> onnx.ModelProto:
    model = _model(text)
    for name, shape in shapes.items():
        value = rng.standard_normal(shape).astype(np.float32)
        model.graph.initializer.append(onnx.numpy_helper.from_array(value, name))
    return model


def test_inputs_as_long_as_a_strided_front_end_needs(rng) -> None:
    # A Wav2Vec2-style feature encoder (kernel 10 stride 5, then strides of 2) needs about 400
    # samples: the sizes grow until the original runs.
    model = _with_weights(AUDIO_FRONT_END, rng, w0=(4, 1, 10), w1=(4, 4, 3), w2=(4, 4, 3),
                          w3=(4, 4, 3), w4=(4, 4, 3), w5=(4, 4, 2), w6=(4, 4, 2))
    result = check_parity(model, model)
    assert result.passed, result.describe()
    assert any("rejects" in note for note in result.notes)
    assert all(int(run["audio"].split("[")[1].split(",")[1].rstrip("]")) >= 400
               for run in result.runs)


def test_unnamed_dimensions_that_must_agree_are_tied(rng) -> None:
    # An LSTM's initial state must have the batch of its input; the signature leaves both
    # unnamed (a voice-activity model's input [?, ?] and state [?, ?, 8]).
    model = _with_weights("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[?, 4] x, float[1, ?, 8] state) => (float[1, 1, ?, 8] y) {
        axes = Constant <value = int64[1] {0}> ()
        seq = Unsqueeze (x, axes)
        y, h = LSTM <hidden_size = 8> (seq, w, r, , , state)
    }""", rng, w=(1, 32, 4), r=(1, 32, 8))
    result = check_parity(model, model)
    assert result.passed, result.describe()


def test_rounding_near_zero_is_not_a_failure() -> None:
    # 1 - Sigmoid(z) for large z: 0 or one ulp of 1.0 (1.2e-7) almost everywhere, an RMS of
    # about 1e-7; the same map computed as Sigmoid(-z) differs by that ulp.
    z = np.linspace(16, 20, 4096, dtype=np.float32)
    reference = (np.float32(1) - 1 / (1 + np.exp(-z))).astype(np.float32)
    candidate = (1 / (1 + np.exp(z))).astype(np.float32)
    assert np.abs(reference - candidate).max() > 5e-8
    assert compare_output("map", reference, candidate).passed


def test_a_tenth_of_a_percent_error_is_still_caught(rng) -> None:
    ref = rng.random(1000).astype(np.float32)
    assert not compare_output("p", ref, ref * np.float32(1.001) + np.float32(1e-3)).passed


def test_every_size_tried_is_named_when_none_runs() -> None:
    # 14 values: no size of n gives them (the sizes baked into the target, 7 and 2, are tried
    # too; a target of {5, 3} runs at n = 5, found there)
    model = _model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[n, 3] x) => (float[7, 2] y) {
        shape = Constant <value = int64[2] {7, 2}> ()
        y = Reshape (x, shape)
    }""")
    with pytest.raises(ValidationInputError) as info:
        check_parity(model, model)
    message = str(info.value)
    assert "at any size tried" in message
    assert "x float32[1, 3]" in message and "x float32[2, 3]" in message
    assert "x float32[7, 3]" in message


def test_a_model_with_a_weight_no_node_reads_is_checked() -> None:
    # ONNX Runtime drops an initializer nothing reads when it resolves the graph, then cannot
    # find it to put a weight lent from memory in (a silero VAD export keeps such weights).
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 18]>
    g (float[2, 64] x) => (float[2, 64] y) { y = MatMul (x, w) }""")
    model.graph.initializer.extend([
        numpy_helper.from_array(np.eye(64, dtype=np.float32), "w"),
        numpy_helper.from_array(np.ones((64, 64), np.float32), "unused"),
    ])
    assert check_parity(model, model).passed


def _fractional(batchnorm: bool = True) -> onnx.ModelProto:
    """An ill-conditioned output: the fractional part of 1e4 times a Conv and a BatchNorm,
    which ONNX Runtime's default optimizations fold into one Conv (rounded otherwise); with
    ``batchnorm=False`` the fold done by hand, as a rewrite would."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3
    scale, bias = rng.uniform(0.5, 2, 8), rng.standard_normal(8)
    mean, var = rng.standard_normal(8), rng.uniform(0.5, 2, 8)
    factor = scale / np.sqrt(var + 1e-5)
    if batchnorm:
        weights = {"w": w, "s": scale, "b": bias, "m": mean, "v": var}
        body = "c = Conv <pads = [1, 1, 1, 1]> (x, w)\n n = BatchNormalization (c, s, b, m, v)"
    else:
        weights = {"w": w * factor[:, None, None, None], "b": bias - mean * factor}
        body = "n = Conv <pads = [1, 1, 1, 1]> (x, w, b)"
    model = _model(f"""
<ir_version: 8, opset_import: ["" : 13]>
g (float[1, 3, 16, 16] x) => (float[1, 8, 16, 16] y) {{
    {body}
    k = Constant <value = float {{10000.0}}> ()
    big = Mul (n, k)
    whole = Floor (big)
    y = Sub (big, whole)
}}
""")
    model.graph.initializer.extend(numpy_helper.from_array(np.asarray(v, np.float32), k)
                                   for k, v in weights.items())
    return model


def test_a_failure_says_whether_ort_moves_the_original_itself_as_far() -> None:
    original = _fractional()
    result = check_parity(original, _fractional(batchnorm=False), spread=True)
    assert not result.passed
    spread = result.original_spread
    assert spread["optimization"] == "all" and spread["outputs"]["y"] > 1.0
    assert spread["runs"] == {"y": result.worst.run}
    assert any("change the original itself" in note and "ill-conditioned" in note
               for note in result.notes), result.notes
    assert result.to_dict()["original_spread"] == spread
    assert check_parity(original, _fractional(batchnorm=False)).original_spread is None  # asked

    # A real mistake on a well-conditioned output: the original stays within its tolerance
    wrong = _edit(RELU, "y = Relu (x)", "y = Sigmoid (x)")
    result = check_parity(RELU, wrong, spread=True)
    assert result.original_spread["outputs"]["y"] <= 1.0
    assert any("not the original's own spread" in note for note in result.notes)
    assert check_parity(RELU, RELU, spread=True).original_spread is None  # failures only


def test_the_spread_of_an_output_compared_exactly_counts_its_changed_values() -> None:
    """An argmax of the ill-conditioned output: ORT's defaults change some of its indices."""
    original = _fractional()
    for model in (original, candidate := _fractional(batchnorm=False)):
        model.graph.node.append(onnx.helper.make_node("ArgMax", ["y"], ["i"], axis=1))
        model.graph.output.append(onnx.helper.make_tensor_value_info(
            "i", onnx.TensorProto.INT64, [1, 1, 16, 16]))
    result = check_parity(original, candidate, spread=True)
    assert result.original_spread["outputs"]["i"] == math.inf
    assert result.to_dict()["original_spread"]["outputs"]["i"] == "inf"


def test_an_output_empty_on_every_input_set_is_said_not_compared() -> None:
    """A detector's boxes on generated inputs: parity compares nothing there, and says so."""
    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4] x) => (float[M] kept OUTPUTS) {
        big = Constant <value = float {1000000.0}> ()
        above = Greater (x, big)
        flat = Flatten <axis = 0> (x)
        flags = Flatten <axis = 0> (above)
        row = Squeeze (flat)
        keep = Squeeze (flags)
        kept = Compress (row, keep)
        RELU
    }
    """
    model = _model(text.replace("OUTPUTS", ", float[N, 4] y").replace("RELU", "y = Relu (x)"))
    result = check_parity(model, model)
    assert result.passed and result.empty == ["kept"] and not result.vacuous
    assert "nothing the model computes through output(s) 'kept'" in result.empty_note()
    assert result.to_dict()["empty_outputs"] == ["kept"]
    alone = _model(text.replace("OUTPUTS", "").replace("RELU", ""))
    vacuous = check_parity(alone, alone)
    assert vacuous.passed and vacuous.vacuous
    assert "only vacuously" in format_parity(vacuous.to_dict())
    assert check_parity(RELU, RELU).empty == []


def test_a_float_output_of_only_zeros_on_every_input_set_is_said_not_compared() -> None:
    """A head initialized to zero gives zeros whatever the layers before it compute: parity
    sees no error of theirs there. An integer output of zeros (a label) is compared."""
    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4] x) => (float[N, 4] head, int64[N] label, float[N, 4] y) {
        zero = Constant <value = float {0.0}> ()
        y = Relu (x)
        head = Mul (y, zero)
        label = ArgMax <axis = 1, keepdims = 0> (head)
    }
    """
    model = _model(text)
    result = check_parity(model, model)
    assert result.passed and result.empty == ["head"] and not result.vacuous
    assert "only zeros" in result.empty_note()


def test_a_float_output_of_only_nan_on_every_input_set_is_said_not_compared() -> None:
    """A logarithm of generated values below zero: NaN equals NaN, whatever computed it, so
    two models that compute different things passed as exact. An output NaN in part is
    compared where it is not."""
    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4] x) => (float[N, 4] y, float[N, 4] z) {
        low = Constant <value = float {-5.0}> ()
        scale = Constant <value = float {SCALE}> ()
        shifted = Add (x, low)
        wide = Mul (x, scale)
        y = Log (shifted)
        z = Log (wide)
    }
    """
    model, other = _model(text.replace("SCALE", "2.0")), _model(text.replace("SCALE", "3.0"))
    result = check_parity(model, model)
    assert result.passed and result.empty == ["y"] and not result.vacuous
    assert "only NaN" in result.empty_note()
    assert not check_parity(model, other).passed  # z is compared where x > 0


def test_a_second_set_no_size_of_its_ladder_runs_is_drawn_at_the_first_sets_sizes() -> None:
    # An export that fixed a size it declares dynamic (a decoder step that takes one new
    # token): the second ladder never tries 1; its set is drawn at the first set's sizes. (S
    # is shared by two inputs: a size one input alone has is tried at 1 for each set.)
    model = _model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, S] x, float[N, S] z) => (float[N] y) {
        both = Add (x, z)
        axes = Constant <value = int64[1] {1}> ()
        y = Squeeze (both, axes)
    }
    """)
    result = check_parity(model, model)
    assert result.passed and len(result.runs) == 2
    assert result.runs[1]["x"].endswith(", 1]")
    # the size search's last resort finds the size for the set itself (at its own batch)
    assert any("it ran at 1" in note for note in result.notes), result.notes
    # where it does not (no time left for it), the set is drawn at the first set's sizes
    import graphfix.feeds

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(graphfix.feeds, "SWEEP_SECONDS", 0.0)
        result = check_parity(model, model)
    assert result.passed and len(result.runs) == 2
    assert result.runs[0]["x"] == result.runs[1]["x"] and result.runs[1]["x"].endswith(", 1]")
    assert any("runs at no size of this set's ladder" in note for note in result.notes)


def test_inputs_with_a_default_value_are_fed_other_values_too(monkeypatch) -> None:
    # ``scale`` has a default (an initializer) and is an input a caller may override: a
    # candidate that took the default for a constant computes the same on the default only.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[N,3] x, float[3] scale) => (float[N,3] y) <float[3] scale = {1.0, 2.0, 3.0}> {
    y = Mul (x, scale)
}"""
    reference = onnx.parser.parse_model(text)
    folded = onnx.parser.parse_model(text.replace("Mul (x, scale)", "Mul (x, fixed)").replace(
        "<float[3] scale", "<float[3] fixed = {1.0, 2.0, 3.0}, float[3] scale"))
    result = check_parity(reference, folded)
    assert not result.passed
    assert "other values fed to the inputs that have a default value ('scale')" in result.problem
    kept = check_parity(reference, onnx.parser.parse_model(text))
    assert kept.passed and any("fed other values too" in note for note in kept.notes)
    # a candidate without the input (its signature changed on purpose) is judged on the
    # defaults alone
    removed = onnx.parser.parse_model(text.replace(", float[3] scale)", ")"))
    assert check_parity(reference, removed).passed
    # past the bytes parity feeds them, they are checked at their defaults only, and said
    from graphfix.validate import parity

    monkeypatch.setattr(parity, "OVERRIDDEN_MAX_BYTES", 8)
    capped = check_parity(reference, folded)
    assert capped.passed and any("defaults only" in note for note in capped.notes)
    # said only where the candidate still takes them
    assert not any("defaults only" in note for note in check_parity(reference, removed).notes)


def test_a_size_only_a_sweep_finds_is_found() -> None:
    """A spectrogram model whose convolutions must bring the bins to exactly 1 (madmom's beat
    tracker takes 81): no ladder size runs, and no weight says the size; the search's last
    resort tries each dynamic dimension at every size, the others at a length the
    convolutions take."""
    model = _model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[T, F] x) => (float[1, 1, R] y) {
        axes = Constant <value = int64[2] {0, 1}> ()
        x4 = Unsqueeze (x, axes)
        c = Conv (x4, w)
        last = Constant <value = int64[1] {3}> ()
        y = Squeeze (c, last)
    }
    """)
    model.graph.initializer.append(onnx.numpy_helper.from_array(
        np.full((1, 1, 3, 20), 0.05, np.float32), "w"))
    result = check_parity(model, model)
    assert result.passed
    assert all(run["x"].endswith(", 20]") for run in result.runs), result.runs


# Random draws (a VITS voice's RandomNormalLike): both models are given the reference's draws.
def _noisy(body: str) -> onnx.ModelProto:
    return onnx.parser.parse_model('<ir_version: 8, opset_import: ["" : 17]>' + f"""
    g (float[B,16] x) => (float[B,16] y) {{
        two = Constant <value = float {{2}}> ()
        {body}
    }}""")


NOISY = """
        r = RandomNormalLike <scale = 0.5> (x)
        s = Mul (x, two)
        y = Add (s, r)"""


def test_models_that_draw_random_numbers_are_compared_on_the_same_draws() -> None:
    result = check_parity(_noisy(NOISY), _noisy(NOISY))
    assert result.passed, result.describe()
    assert any("draws random numbers (RandomNormalLike)" in note for note in result.notes)
    assert all("r" not in run for run in result.runs)  # the draws are not shown as inputs


@pytest.mark.parametrize("candidate, words", [
    # computes something else beside the draw
    (NOISY.replace("Mul (x, two)", "Add (x, two)"), "max abs error"),
    # draws with another scale
    (NOISY.replace("scale = 0.5", "scale = 2.0"), "draws random numbers the original"),
    # draws in another shape, of as many elements
    ("""
        t = Transpose (x)
        d = RandomNormalLike <scale = 0.5> (t)
        r = Transpose (d)
        s = Mul (x, two)
        y = Add (s, r)""", "draws random numbers the original"),
    # one draw where the original has two
    ("""
        r = RandomNormalLike <scale = 0.5> (x)
        s = Mul (r, two)
        y = Sub (s, r)""", ""),
])
def test_a_candidate_given_the_draws_is_still_judged(candidate, words) -> None:
    reference = _noisy(NOISY) if words != "" else _noisy("""
        r = RandomNormalLike <scale = 0.5> (x)
        q = RandomNormalLike <scale = 0.5> (x)
        s = Mul (q, two)
        y = Sub (s, r)""")
    result = check_parity(reference, _noisy(candidate))
    assert not result.passed
    assert words in result.describe() + (result.problem or "")


def test_a_draw_renamed_but_of_the_same_shape_moves_the_outputs() -> None:
    # the candidate draws under the reference's name, from a tensor of another shape with as
    # many elements: Reshape(draw, Shape(t)) gives it the draw laid out otherwise
    reference = _noisy("""
        r = RandomNormalLike <scale = 0.5> (x)
        y = Add (x, r)""")
    candidate = _noisy("""
        t = Transpose (x)
        r = RandomNormalLike <scale = 0.5> (t)
        u = Transpose (r)
        y = Add (x, u)""")
    result = check_parity(reference, candidate, input_shapes={"x": [4, 16]})
    assert not result.passed


def test_the_table_marks_figures_taken_over_finite_elements_where_an_infinity_moved():
    # max abs reads 0 when the only difference is an infinity that became finite: the row
    # says its figures leave those elements out, the line below says what moved.
    ref = np.array([1.0, -np.inf, 2.0], np.float32)
    cand = np.array([1.0, -3.4e38, 2.0], np.float32)
    out = compare_output("y", ref, cand)
    parity = {"outputs": [out.to_dict()], "passed": False, "provider": "cpu"}
    text = format_parity(parity)
    assert "0*" in text and "* over the elements finite in both models" in text
    assert "Inf disappears from 1 element(s)" in text
