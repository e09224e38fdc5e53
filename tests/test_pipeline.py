from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

import graphfix
from graphfix import model_io, pipeline, registry
from graphfix.errors import PassError, UnknownPassError
from graphfix.registry import Pass, PassResult

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"

RELU = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x) => (float[2,3] y) { r = Relu (x)  y = Identity (r) }
"""


class Explodes(Pass):
    """Raise, as a buggy pass would."""

    name = "explodes"

    def call(self, model: onnx.ModelProto) -> PassResult:
        raise IndexError("list index out of range")


class Counts(Pass):
    """Count calls; change nothing."""

    name = "counts"

    def __init__(self) -> None:
        self.calls = 0

    def call(self, model: onnx.ModelProto) -> PassResult:
        self.calls += 1
        return PassResult(model, modified=False, stats={"calls": self.calls})


def test_default_pipeline_names_are_registered():
    for name in pipeline.DEFAULT_PASSES:
        assert registry.get(name).name == name


def test_build_passes_skip_and_options():
    built = pipeline.build_passes(["remove-initializer-inputs"], skip=["remove-initializer-inputs"])
    assert built == []
    with pytest.raises(UnknownPassError):
        pipeline.build_passes(["remove-initializer-inputs"], skip=["nope"])
    with pytest.raises(PassError, match="bad options"):
        pipeline.build_passes(
            ["remove-initializer-inputs"],
            pass_options={"remove-initializer-inputs": {"bogus": 1}},
        )


def test_report_has_per_pass_timings_and_op_delta():
    model = onnx.load(str(LIGHT / "light_squeezenet.onnx"))
    result = graphfix.optimize(model, passes=["remove-initializer-inputs"], verify=False)
    (entry,) = result.report.passes
    assert entry.name == "remove-initializer-inputs"
    assert entry.modified and entry.seconds >= 0
    assert entry.nodes_before == entry.nodes_after and entry.op_delta == {}
    assert result.report.input.initializer_inputs > 0
    assert result.report.output.initializer_inputs == 0
    assert result.report.verify is False and result.report.parity is None
    # The caller's model is not touched.
    assert len(model.graph.input) == result.report.input.initializer_inputs + 1


def test_a_crashing_pass_becomes_a_pass_error_naming_it():
    model = onnx.parser.parse_model(RELU)
    with pytest.raises(PassError, match="'explodes' failed: IndexError") as info:
        graphfix.optimize(model, passes=[Explodes()], verify=False, strict=True)
    assert "--skip explodes" in str(info.value)


def test_progress_is_reported():
    seen = []
    model = onnx.parser.parse_model(RELU)
    counter = Counts()
    graphfix.optimize(
        model, passes=[counter, "remove-initializer-inputs"], verify=False,
        progress=lambda name, i, n: seen.append((name, i, n)),
    )
    assert seen == [("counts", 0, 2), ("remove-initializer-inputs", 1, 2), ("", 2, 2)]
    assert counter.calls == 1


def test_optimize_file_is_deterministic(tmp_path):
    src = LIGHT / "light_inception_v1.onnx"
    for name in ("a.onnx", "b.onnx"):
        graphfix.optimize_file(
            src, tmp_path / name, passes=["remove-initializer-inputs"], verify=False
        )
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()


def test_benchmark_baseline_is_the_original_even_without_parity(tmp_path) -> None:
    # With verify=False the loaded model is rewritten in place; the benchmark must still get
    # the original as its baseline, not the model the passes rewrote.
    from graphfix.models.sample import SAMPLE_PATH

    original_nodes = len(onnx.load(str(SAMPLE_PATH)).graph.node)
    result = graphfix.optimize_file(SAMPLE_PATH, tmp_path / "out.onnx", verify=False,
                                    bench=graphfix.BenchOptions(runs=5, warmup=1))
    compared = result.report.bench["model_nodes"]
    assert compared["baseline"] == original_nodes and compared["candidate"] < original_nodes


class NegatesInPlace(Pass):
    """Rewrite the model in place so that it computes -y: a wrong pass that also mutates."""

    name = "negates-in-place"
    may_grow = True  # the Neg it adds is the wrong it is for

    def call(self, model: onnx.ModelProto) -> PassResult:
        (out,) = model.graph.output
        model.graph.node[-1].output[0] = "pre_neg"
        model.graph.node.append(onnx.helper.make_node("Neg", ["pre_neg"], [out.name]))
        return PassResult(model, modified=True)


@pytest.mark.parametrize("overlap", [True, False])
def test_reference_runs_beside_the_passes_and_sees_the_original(tmp_path, monkeypatch, overlap):
    # The reference side of parity is read from the model before the passes rewrite it in
    # place (optimize_file's own loaded model), and runs beside them unless the weights are too
    # large to hold twice; either way a wrong pass is caught and nothing is written.
    src = tmp_path / "relu.onnx"
    onnx.save(onnx.parser.parse_model(RELU), str(src))
    if not overlap:
        monkeypatch.setattr(pipeline, "OVERLAP_MAX_WEIGHT_BYTES", -1)
    result = graphfix.optimize_file(src, tmp_path / "ok.onnx", passes=["remove-initializer-inputs"])
    assert result.report.parity["passed"]
    assert result.report.parity["reference_overlapped"] is overlap
    assert result.report.parity["reference_seconds"] > 0
    with pytest.raises(graphfix.GraphfixError, match="negates-in-place"):
        graphfix.optimize_file(src, tmp_path / "bad.onnx", passes=[NegatesInPlace()],
                               strict=True)
    assert not (tmp_path / "bad.onnx").exists()


def test_a_failing_pass_cancels_the_reference_runs():
    model = onnx.parser.parse_model(RELU)
    with pytest.raises(PassError, match="explodes"):
        graphfix.optimize(model, passes=[Explodes()], strict=True)


def test_a_model_ort_cannot_load_is_refused_before_the_passes_with_a_report():
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17, "custom.domain" : 1]>
    g (float[2] x) => (float[2] y) { y = custom.domain.Mystery (x) }
    """)
    counter = Counts()
    with pytest.raises(graphfix.GraphfixError, match="cannot load the original") as info:
        graphfix.optimize(model, passes=[counter])
    assert counter.calls == 0
    assert info.value.report.verify is True


def test_shape_annotations_never_make_the_file_bigger() -> None:
    # onnxsim removes the Identity and annotates every tensor it inferred: more bytes of
    # shapes than the node it removed. The input's own annotations stay.
    body = "\n".join(f"    r{i} = Sigmoid (r{i - 1})" for i in range(1, 9))
    text = f"""
<ir_version: 8, opset_import: ["" : 17]>
g (float[N,3,4,5,6,7] r0) => (float[N,3,4,5,6,7] y) {{
{body}
    i = Identity (r8)
    y = Relu (i)
}}"""

    def parsed() -> onnx.ModelProto:
        model = onnx.parser.parse_model(text)
        for index, node in enumerate(model.graph.node):
            node.name = f"n{index}"
        return model

    model = parsed()
    result = graphfix.optimize(parsed())
    assert result.model.ByteSize() <= model.ByteSize()
    assert not result.model.graph.value_info
    assert result.report.output.size_bytes <= result.report.input.size_bytes
    declared = parsed()
    declared.graph.value_info.extend([onnx.helper.make_tensor_value_info(
        "r1", onnx.TensorProto.FLOAT, ["N", 3, 4, 5, 6, 7])])
    kept = graphfix.optimize(declared).model
    assert [v.name for v in kept.graph.value_info] == ["r1"]


def _tiled_table_beside_a_weight() -> onnx.ModelProto:
    """A 256 KiB weight, and a 100 KiB table that Tile builds from a 1 KiB row: folding the
    Tile stores the table (within 1.5x the tensors' bytes, the old default growth)."""
    import numpy as np
    from onnx import helper, numpy_helper

    floats = onnx.TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]),
         helper.make_node("Tile", ["row", "repeats"], ["table"]),
         helper.make_node("Add", ["z", "table"], ["out"])],
        "g", [helper.make_tensor_value_info("x", floats, [1, 256]),
              helper.make_tensor_value_info("z", floats, [100, 256])],
        [helper.make_tensor_value_info("y", floats, [1, 256]),
         helper.make_tensor_value_info("out", floats, [100, 256])],
        [numpy_helper.from_array(np.random.default_rng(0).standard_normal(
            (256, 256)).astype(np.float32), "w"),
         numpy_helper.from_array(np.arange(256, dtype=np.float32).reshape(1, 256), "row"),
         numpy_helper.from_array(np.array([100, 1], np.int64), "repeats")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_the_output_is_never_larger_than_the_input_by_default() -> None:
    """The default growth policy is never bigger: the Tile stays rather than store its 100 KiB
    table; a growth the user allows (--max-growth 1.5) folds it, into a larger file."""
    model = _tiled_table_beside_a_weight()
    size = registry.plain_size(model)
    result = graphfix.optimize(model)
    assert registry.plain_size(result.model) <= size
    assert "Tile" in [n.op_type for n in result.model.graph.node]
    assert result.report.parity["passed"]
    assert any("first output was larger than the input" in w for w in result.report.warnings)
    grown = graphfix.optimize(_tiled_table_beside_a_weight(), max_growth=1.5)
    assert "Tile" not in [n.op_type for n in grown.model.graph.node]
    assert registry.plain_size(grown.model) > size + 90 * 1024


@pytest.mark.parametrize("stored", [onnx.TensorProto.FLOAT8E4M3FN, onnx.TensorProto.BFLOAT16,
                                    onnx.TensorProto.FLOAT16])
def test_a_small_low_precision_weight_is_not_folded_into_a_larger_file(stored) -> None:
    """A weight of 128 values stored in float8, bfloat16 or float16 and cast to float32 where
    it is read: ONNX Runtime folds the Cast into a float32 constant, which the allowance a
    folded shape gets let through the run held to the input's size (247 -> 606 bytes for
    float8). The passes run once more with no such allowance, and that output is kept."""
    import numpy as np
    from onnx import helper

    values = np.random.default_rng(0).standard_normal(128).astype(np.float32) * 3
    graph = helper.make_graph(
        [helper.make_node("Cast", ["w"], ["wf"], to=onnx.TensorProto.FLOAT),
         helper.make_node("MatMul", ["x", "wf"], ["y"])], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor("w", stored, [16, 8], values.tolist())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    size = model_io.stored_size(model)
    result = graphfix.optimize(model)
    assert model_io.stored_size(result.model) <= size
    assert [t.data_type for t in result.model.graph.initializer] == [stored]
    assert result.report.parity["passed"]


def test_a_fold_may_spend_what_the_passes_before_it_saved() -> None:
    """Two copies of a 100 KiB table merge into one (merge-duplicates); the Tile's fold then
    stores about as much again (simplify): taken, and the file is still not larger."""
    import numpy as np
    from onnx import helper, numpy_helper

    model = _tiled_table_beside_a_weight()
    table = numpy_helper.from_array(
        np.random.default_rng(1).standard_normal((100, 256)).astype(np.float32))
    model.graph.node.extend([
        helper.make_node("Constant", [], ["c1"], value=table),
        helper.make_node("Constant", [], ["c2"], value=table),
        helper.make_node("Add", ["z", "c1"], ["s1"]),
        helper.make_node("Add", ["s1", "c2"], ["s2"])])
    model.graph.output.append(
        helper.make_tensor_value_info("s2", onnx.TensorProto.FLOAT, [100, 256]))
    size = registry.plain_size(model)
    result = graphfix.optimize(model)
    assert "Tile" not in [n.op_type for n in result.model.graph.node]
    assert registry.plain_size(result.model) <= size


def test_the_input_s_own_annotations_are_no_room_for_a_rewrite() -> None:
    """The output keeps the shape annotations the input declared: they are not bytes a
    rewrite held to the input's size may spend. A fold that stores a new constant (a Range of
    30 positions: 120 bytes for a node and three scalars) made a model larger than its input by
    fewer bytes than its annotation of that tensor takes; the Range stays. (A size-1 Transpose
    as a Reshape made a VAD model 19 bytes larger this way, before the Reshape's int64 shape
    was stored as varints: it now takes fewer bytes than the Transpose.)"""
    from onnx import helper, numpy_helper

    positions = "positions_of_the_first_block"

    def model() -> onnx.ModelProto:
        graph = helper.make_graph(
            [helper.make_node("Range", ["start", "limit", "delta"], [positions]),
             helper.make_node("Add", ["x", positions], ["y"])], "g",
            [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [30])],
            [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [30])],
            [numpy_helper.from_array(np.array(value, np.float32), name)
             for name, value in (("start", 0), ("limit", 30), ("delta", 1))],
            value_info=[helper.make_tensor_value_info(positions, onnx.TensorProto.FLOAT, [30])])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                 ir_version=8)

    result = graphfix.optimize(model())
    assert model_io.stored_size(result.model) <= model_io.stored_size(model())
    assert [n.op_type for n in result.model.graph.node] == ["Range", "Add"]
    assert any("so the output is not larger" in w for w in result.report.warnings)
    grown = graphfix.optimize(model(), max_growth=1.5).model
    assert [n.op_type for n in grown.graph.node] == ["Add"]


def _nhwc_chain(length: int) -> onnx.ModelProto:
    """An NHWC input read through a Transpose, a chain of element-wise ops, a Transpose back:
    one-letter tensor names, no node names (as tf2onnx's minified exports have them)."""
    from onnx import helper

    names = [chr(ord("a") + i) for i in range(length + 1)]
    nodes = [helper.make_node("Transpose", ["x"], [names[0]], perm=[0, 3, 1, 2])]
    nodes += [helper.make_node("Sin" if i % 2 else "Cos", [names[i]], [names[i + 1]])
              for i in range(length)]
    nodes.append(helper.make_node("Transpose", [names[-1]], ["y"], perm=[0, 2, 3, 1]))
    for node in nodes:
        node.ClearField("name")
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4, 4, 3])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4, 4, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_names_the_rewrites_make_never_make_the_file_larger(tmp_path) -> None:
    """Rewrites name what they make (``a_untransposed``, ``Transpose_0``): on a model whose
    tensors have one-letter names that alone made the output larger than its input; those
    names are shortened (and empty fields written out dropped) where it is, the rewrite kept."""
    source = tmp_path / "chain.onnx"
    onnx.save(_nhwc_chain(12), source)
    result = graphfix.optimize_file(source, tmp_path / "out.onnx")
    assert (tmp_path / "out.onnx").stat().st_size <= source.stat().st_size
    written = onnx.load(tmp_path / "out.onnx")
    assert "Transpose" not in [n.op_type for n in written.graph.node]
    assert not any("so the output is not larger" in w for w in result.report.warnings)


def test_nodes_out_of_order_are_sorted_first() -> None:
    """ONNX requires topological order and ONNX Runtime does not: a model out of order runs,
    while onnx.checker and onnxsim refuse it. It is sorted before the passes: simplify runs,
    and the output is in order."""
    from onnx import helper

    nodes = [helper.make_node("Add", ["r", "r"], ["y"]), helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Mul", ["x", "x"], ["m"]), helper.make_node("Sub", ["y", "m"], ["z"])]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [2, 3])]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model)
    result = graphfix.optimize(model)
    onnx.checker.check_model(result.model, full_check=True)
    assert any("not in topological order" in w for w in result.report.warnings)
    simplify = next(p for p in result.report.passes if p.name == "simplify")
    assert simplify.skipped is None, simplify.skipped


def test_an_output_declaration_inference_contradicts_but_the_runs_keep_stays() -> None:
    # Keras Resizing(20, 20) of a 32 x 24 image through tf2onnx: scales 0.625 and 0.8333333.
    # ONNX's inference floors 24 x 0.8333333 to 19; ONNX Runtime computes the declared 20.
    # The output was "corrected" to 19, then declared dynamic on that axis when the runs gave
    # 20, with two warnings contradicting each other; the input's declaration holds: kept.
    from onnx import helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3, 32, 24])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 3, 20, 20])],
        [numpy_helper.from_array(np.array([1, 1, 0.625, 0.8333333], np.float32), "scales")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              ir_version=8)
    result = graphfix.optimize(model)
    dims = result.model.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in dims] == ["N", 3, 20, 20]
    assert not any("is declared" in w for w in result.report.warnings)
    assert any("the declaration is kept" in w for w in result.report.warnings)
