"""Planted bugs: wrong passes in a pipeline with correct ones are caught, and named.

Each planted pass is registered for the test only, runs between real passes, and breaks the
model in one of the ways simplifiers have broken models in the field. With ``strict``,
``optimize`` must refuse the result, name the output and the guilty pass, and write nothing;
without it, the guilty pass (or the part of it that broke the model) is left out, the rest
runs, and the correct model is written, the report saying what was left out and why.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import graphfix
import graphfix.passes  # noqa: F401 - registers the pass library
from graphfix import registry
from graphfix.errors import ParityError
from graphfix.registry import Pass, PassResult

MODEL_TEXT = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 3, 8, 8] x) => (float[N, 4, 8, 8] features, float[N, 4] pooled, float[N, 4] scores,
                            int64[N] label) {
    conv = Conv <pads = [1, 1, 1, 1]> (x, w, b)
    features = Relu (conv)
    pooled = ReduceMean <axes = [2, 3], keepdims = 0> (features)
    scores = Softmax <axis = 1> (pooled)
    label = ArgMax <axis = 1, keepdims = 0> (pooled)
}
"""


def _model() -> onnx.ModelProto:
    model = onnx.parser.parse_model(MODEL_TEXT)
    rng = np.random.default_rng(0)
    model.graph.initializer.extend([
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b"),
    ])
    onnx.checker.check_model(model, full_check=True)
    return model


def _producer(graph: onnx.GraphProto, name: str) -> onnx.NodeProto:
    return next(n for n in graph.node if name in n.output)


def _rename_output(graph: onnx.GraphProto, name: str, new: str) -> onnx.NodeProto:
    """The producer of ``name`` writes ``new`` instead; consumers still read ``name``, which a
    node inserted by the caller then produces."""
    node = _producer(graph, name)
    node.output[list(node.output).index(name)] = new
    return node


def _append(graph: onnx.GraphProto, *nodes: onnx.NodeProto) -> None:
    """Add nodes and keep the graph topologically sorted (they go before their consumers)."""
    existing = list(graph.node)
    del graph.node[:]
    produced = {out for n in nodes for out in n.output}
    placed = False
    for node in existing:
        if not placed and any(i in produced for i in node.input):
            graph.node.extend(nodes)
            placed = True
        graph.node.append(node)
    if not placed:
        graph.node.extend(nodes)


def wrong_permutation(graph: onnx.GraphProto) -> None:
    _rename_output(graph, "conv", "conv_raw")
    _append(graph, helper.make_node("Transpose", ["conv_raw"], ["conv"], perm=[0, 1, 3, 2]))


def dropped_bias(graph: onnx.GraphProto) -> None:
    conv = _producer(graph, "conv")
    del conv.input[2]


def swapped_outputs(graph: onnx.GraphProto) -> None:
    _rename_output(graph, "pooled", "pooled_value")
    for node in graph.node:
        if node.op_type in ("Softmax", "ArgMax"):
            node.input[0] = "pooled_value"
    _rename_output(graph, "scores", "pooled")
    graph.node.append(helper.make_node("Identity", ["pooled_value"], ["scores"]))


def changed_dtype(graph: onnx.GraphProto) -> None:
    _rename_output(graph, "scores", "scores32")
    _append(graph, helper.make_node("Cast", ["scores32"], ["scores"], to=onnx.TensorProto.FLOAT16))
    next(o for o in graph.output if o.name == "scores").type.tensor_type.elem_type = (
        onnx.TensorProto.FLOAT16
    )


def changed_shape(graph: onnx.GraphProto) -> None:
    _producer(graph, "pooled").attribute[1].i = 1  # keepdims=1: [N, 4, 1, 1]
    label = _producer(graph, "label")
    label.input[0] = "pooled_flat"
    scores = _producer(graph, "scores")
    scores.input[0] = "pooled_flat"
    _append(graph, helper.make_node("Flatten", ["pooled"], ["pooled_flat"]))
    del next(o for o in graph.output if o.name == "pooled").type.tensor_type.shape.dim[:]


def nan_source(graph: onnx.GraphProto) -> None:
    _producer(graph, "features").op_type = "Sqrt"  # Relu -> Sqrt: NaN for negatives


def off_by_one(graph: onnx.GraphProto) -> None:
    _rename_output(graph, "label", "label0")
    graph.initializer.append(numpy_helper.from_array(np.array(1, np.int64), "one"))
    _append(graph, helper.make_node("Add", ["label0", "one"], ["label"]))


def batch_one_assumed(graph: onnx.GraphProto) -> None:
    """Right at batch 1, wrong at any other size: every row becomes the first one."""
    _rename_output(graph, "pooled", "pooled_all")
    graph.initializer.extend([
        numpy_helper.from_array(np.array([0], np.int64), "zero"),
        numpy_helper.from_array(np.array([1], np.int64), "one"),
    ])
    _append(
        graph,
        helper.make_node("Slice", ["pooled_all", "zero", "one", "zero"], ["first"]),
        helper.make_node("Shape", ["pooled_all"], ["pooled_shape"]),
        helper.make_node("Expand", ["first", "pooled_shape"], ["pooled"]),
    )


ALL = {"features", "pooled", "scores", "label"}
# each bug, and the outputs it breaks (the error names the worst of them)
BUGS = {
    "wrong-permutation": (wrong_permutation, {"features"}),
    "dropped-bias": (dropped_bias, ALL),
    "swapped-outputs": (swapped_outputs, {"pooled", "scores"}),
    "changed-dtype": (changed_dtype, {"scores"}),
    "changed-shape": (changed_shape, {"pooled"}),
    "nan-source": (nan_source, ALL),
    "off-by-one": (off_by_one, {"label"}),
    "batch-one-assumed": (batch_one_assumed, {"pooled", "scores", "label"}),
}


def _planted(name: str, edit) -> type[Pass]:
    def call(self, model: onnx.ModelProto) -> PassResult:
        edit(model.graph)
        return PassResult(model, modified=True)

    # Planting a bug may add nodes or retype an output: that is what such a pass is for (a
    # pass that does not say so is taken back before parity sees it: tests/test_registry.py).
    return type(name.title().replace("-", ""), (Pass,), {"__doc__": f"Planted bug: {name}.",
                                                         "call": call, "may_grow": True,
                                                         "may_change_signature": True})


@pytest.fixture()
def isolated_registry(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_planted_bug_is_caught_and_its_pass_named(bug, isolated_registry, tmp_path) -> None:
    edit, broken = BUGS[bug]
    registry.register(f"planted-{bug}")(_planted(bug, edit))
    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(_model(), str(src))
    passes = ["remove-initializer-inputs", "eliminate-transposes", f"planted-{bug}",
              "eliminate-transposes"]
    with pytest.raises(ParityError) as info:
        graphfix.optimize_file(src, dst, passes=passes, strict=True)
    message = str(info.value)
    assert info.value.guilty_pass == f"planted-{bug}"
    assert f"pass 'planted-{bug}' broke" in message
    named = message.split("broke output ", 1)[1].split(":", 1)[0].strip("'")
    assert named in broken, message
    assert f"--skip planted-{bug}" in info.value.hint
    assert not dst.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx"]
    # dropping the guilty pass, as the hint says, gives a model that passes
    graphfix.optimize_file(src, dst, passes=passes, skip=[f"planted-{bug}"])
    assert dst.exists()


def test_batch_bug_is_only_visible_at_the_second_size(isolated_registry) -> None:
    from graphfix.validate.parity import check_parity

    model = _model()
    broken = _model()
    batch_one_assumed(broken.graph)
    first = check_parity(model, broken, feeds={"x": np.ones((1, 3, 8, 8), np.float32)})
    assert first.passed
    assert not check_parity(model, broken).passed


# --------------------------------------------------------------------------------------------
# Without --strict, what broke the model is left out and the rest is written.


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_planted_bug_is_left_out_and_the_rest_written(bug, isolated_registry, tmp_path) -> None:
    edit, broken = BUGS[bug]
    registry.register(f"planted-{bug}")(_planted(bug, edit))
    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(_model(), str(src))
    passes = ["remove-initializer-inputs", f"planted-{bug}", "eliminate-transposes"]
    result = graphfix.optimize_file(src, dst, passes=passes)
    [left_out] = result.report.left_out
    assert (left_out["pass"], left_out["position"], left_out["part"]) == (
        f"planted-{bug}", 1, "the pass")
    named = left_out["reason"].split("broke output ", 1)[1].split(":", 1)[0].strip("'")
    assert named in broken, left_out["reason"]
    assert any(w.startswith(f"left out pass 'planted-{bug}'") for w in result.report.warnings)
    assert [p.name for p in result.report.passes] == [
        "remove-initializer-inputs", f"planted-{bug}", "eliminate-transposes"]
    assert result.report.passes[1].skipped.startswith("left out: broke output")
    assert result.report.parity["passed"]
    from graphfix.validate.parity import check_parity

    assert check_parity(_model(), graphfix.load(dst)).passed


class _Explodes(Pass):
    """Fails on every model, as a pass with a bug does."""

    name = "explodes"

    def call(self, model: onnx.ModelProto) -> PassResult:
        return [][0]


class _MixesDtypes(Pass):
    """Writes a Max of a float16 and a float32 tensor: a model ONNX Runtime cannot load (the
    mistake ort-offline's float16 undo once made)."""

    name = "mixes-dtypes"
    may_grow = True

    def call(self, model: onnx.ModelProto) -> PassResult:
        graph = model.graph
        _rename_output(graph, "scores", "scores_raw")
        graph.initializer.append(numpy_helper.from_array(np.zeros(1, np.float16), "zero16"))
        _append(graph, helper.make_node("Max", ["scores_raw", "zero16"], ["scores"]))
        return PassResult(model, modified=True)


class _Coarse(_MixesDtypes):
    """Breaks the model, but knows a lighter version of itself that does not."""

    name = "coarse"

    def fallbacks(self) -> list[registry.Fallback]:
        return [registry.Fallback("the Max it writes", _Fine())]


class _Fine(Pass):
    """The lighter version: leaves the model as it is."""

    name = "coarse"

    def call(self, model: onnx.ModelProto) -> PassResult:
        return PassResult(model, modified=False)


def test_a_pass_whose_output_does_not_load_is_left_out_right_after_it() -> None:
    # Checked after the pass itself, even without parity: the next passes never see it.
    seen = []

    class Watches(Pass):
        """Records the op types it is given."""

        name = "watches"

        def call(self, model: onnx.ModelProto) -> PassResult:
            seen.append(sorted({n.op_type for n in model.graph.node}))
            return PassResult(model, modified=False)

    result = graphfix.optimize(_model(), passes=[_MixesDtypes(), Watches()], verify=False)
    [left_out] = result.report.left_out
    assert left_out["pass"] == "mixes-dtypes" and left_out["part"] == "the pass"
    assert "ONNX Runtime cannot load its output" in left_out["reason"]
    assert "Max" not in seen[0]
    assert all(n.op_type != "Max" for n in result.model.graph.node)


def test_a_failing_pass_is_left_out_and_the_others_run() -> None:
    result = graphfix.optimize(_model(), passes=[_Explodes(), "eliminate-transposes"])
    [left_out] = result.report.left_out
    assert left_out["pass"] == "explodes" and left_out["reason"].startswith("failed: IndexError")
    assert result.report.passes[1].name == "eliminate-transposes"


def test_strict_refuses_a_pass_whose_output_does_not_load() -> None:
    with pytest.raises(ParityError, match="pass 'mixes-dtypes' broke the model: ONNX Runtime "
                                          "cannot load its output") as info:
        graphfix.optimize(_model(), passes=[_MixesDtypes()], strict=True)
    assert info.value.guilty_pass == "mixes-dtypes"


def test_a_fallback_that_keeps_the_model_right_is_taken() -> None:
    result = graphfix.optimize(_model(), passes=[_Coarse()], verify=False)
    [left_out] = result.report.left_out
    assert left_out["part"] == "the Max it writes"
    assert result.report.passes[0].name == "coarse"
    assert "left out the Max it writes (pass 'coarse')" in result.report.warnings[-1]


SIN_OF_A_PHASE = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 4000] f) => (float[1, 4000] y) {
    axis = Constant <value = int64[1] {1}> ()
    c = CumSum (f, axis)
    two = Constant <value = float {2.0}> ()
    pi = Constant <value = float {3.14159265}> ()
    rate = Constant <value = float {300.0}> ()
    a = Mul (c, two)
    b = Mul (a, pi)
    phase = Mul (b, rate)
    y = Sin (phase)
}"""


def test_simplify_loses_only_its_optimizers_when_they_break_a_phase() -> None:
    # A vocoder's phase ((cumsum * 2) * pi) * 300: onnxsim refolds the three products into one,
    # which rounds otherwise; Sin of a phase near 4e4 turns one ulp into an error of 1e-2.
    model = onnx.parser.parse_model(SIN_OF_A_PHASE)
    result = graphfix.optimize(model)
    [left_out] = result.report.left_out
    assert (left_out["pass"], left_out["part"]) == ("simplify", "onnxsim's graph optimizers")
    assert "broke output 'y'" in left_out["reason"]
    assert result.report.parity["passed"]
    assert [n.op_type for n in result.model.graph.node] == ["CumSum", "Mul", "Mul", "Mul", "Sin"]
    with pytest.raises(ParityError, match="pass 'simplify' broke output 'y'"):
        graphfix.optimize(model, strict=True)


def test_a_pass_left_out_on_an_ill_conditioned_output_says_the_original_moves_as_far(
        tmp_path) -> None:
    """ORT's own default optimizations fold the BatchNorm of a fractional-part output as
    ort-offline and simplify do: the passes are left out (parity keeps its strength), and the
    run says the original itself moves as far, so the user can judge the tolerance."""
    from tests.validate.test_parity import _fractional

    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(_fractional(), str(src))
    result = graphfix.optimize_file(src, dst)
    assert result.report.left_out, "folding the BatchNorm moves the output"
    assert result.report.parity["passed"]
    [said] = [w for w in result.report.warnings if "change the original itself" in w]
    assert "ill-conditioned" in said and "'y'" in said
    assert any("change the original itself" in n for n in result.report.parity["notes"])
    assert result.report.parity["original_spread"]["outputs"]["y"] > 1.0
    with pytest.raises(ParityError, match="nor does the original under ONNX Runtime's default"):
        graphfix.optimize_file(src, tmp_path / "strict.onnx", strict=True)
    assert not (tmp_path / "strict.onnx").exists()


class _Annotates(Pass):
    """Grows the model by a note, as a pass's new names and static sizes do."""

    name = "annotates"
    may_grow = True

    def call(self, model: onnx.ModelProto) -> PassResult:
        model.graph.node[0].doc_string = "n" * 100
        return PassResult(model, modified=True, warnings=["a note of 100 bytes"])


class _TrimsAndBreaks(Pass):
    """Saves more bytes than ``annotates`` adds, and breaks an output."""

    name = "trims-and-breaks"

    def call(self, model: onnx.ModelProto) -> PassResult:
        model.graph.doc_string = ""
        nan_source(model.graph)
        return PassResult(model, modified=True)


def test_growth_without_the_pass_left_out_is_held_and_said(isolated_registry) -> None:
    # The first output is smaller than the input; without the pass that broke parity, the
    # others' output is larger: the run is held to the input's size again, and says so.
    registry.register("annotates")(_Annotates)
    registry.register("trims-and-breaks")(_TrimsAndBreaks)
    model = _model()
    model.graph.doc_string = "d" * 300
    result = graphfix.optimize(model, passes=["annotates", "trims-and-breaks"])
    assert [entry["pass"] for entry in result.report.left_out] == ["trims-and-breaks"]
    assert any(w.startswith("the output without what broke parity was larger than the input")
               for w in result.report.warnings), result.report.warnings
    # said once, though the passes ran three times
    assert result.report.warnings.count("annotates: a note of 100 bytes") == 1
