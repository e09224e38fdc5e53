"""ort-offline: basic is standard ops only, extended labelled, CUDA refused here, cleanup."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnx.parser
from onnx import numpy_helper
import pytest

from graphfix.errors import PassError, ProviderUnavailableError
from graphfix.passes._measuring import run_outputs
from graphfix.passes.ort_offline import OrtOffline, nonstandard_ops, ort_offline

CONV = onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,3,8,8] x) => (float[1,4,8,8] y) {
    w = Constant <value = float[4,3,1,1] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}> ()
    s = Constant <value = float[1] {2}> ()
    s2 = Add (s, s)
    i = Identity (x)
    c = Conv (i, w)
    y0 = Mul (c, s2)
    y = Relu (y0)
}""")


def ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def test_basic_standard_ops_parity_idempotent(ort_run, rng) -> None:
    result = OrtOffline()(_copy(CONV))
    assert result.modified and not result.warnings
    assert [n.op_type for n in result.model.graph.node] == ["Conv", "Mul", "Relu"]
    assert nonstandard_ops(result.model.graph) == []
    assert result.stats["nodes_before"] == 7 and result.stats["nodes_after"] == 3
    assert result.stats["contrib_ops"] == 0
    assert [o.domain for o in result.model.opset_import] == [""]
    assert not any(p.key.startswith("graphfix.") for p in result.model.metadata_props)
    assert [i.name for i in result.model.graph.input] == ["x"]
    assert result.model.graph.output[0] == CONV.graph.output[0]
    onnx.checker.check_model(result.model, full_check=True)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(
        ort_run(result.model, {"x": x})["y"], ort_run(CONV, {"x": x})["y"], rtol=1e-5, atol=1e-5
    )
    again = OrtOffline()(result.model)
    assert not again.modified and again.model is result.model


@pytest.mark.parametrize("level", ["extended", "all"])
def test_extended_labelled_and_warned(level: str, ort_run, rng) -> None:
    result = OrtOffline(level=level)(_copy(CONV))
    assert result.modified
    props = {p.key: p.value for p in result.model.metadata_props}
    assert props["graphfix.ort_level"] == level
    assert props["graphfix.ort_provider"] == "CPUExecutionProvider"
    assert "graphfix.ort_version" in props
    assert result.warnings and "tied to" in result.warnings[0]
    if level == "all":
        assert result.stats["contrib_ops"] > 0
        assert nonstandard_ops(result.model.graph)


def test_cuda_unavailable_is_an_error() -> None:
    import onnxruntime as ort

    try:
        result = OrtOffline(provider="cuda")(_copy(CONV))
    except ProviderUnavailableError as exc:
        assert "CUDAExecutionProvider" in str(exc)
    else:  # CUDA really loads on this machine
        assert result.modified
        assert "CUDAExecutionProvider" in ort.get_available_providers()


def test_temporary_folder_removed(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    OrtOffline()(_copy(CONV))
    with pytest.raises(ProviderUnavailableError) if _cuda_missing() else _nothing():
        OrtOffline(provider="cuda")(_copy(CONV))
    assert list(tmp_path.iterdir()) == []


def _cuda_missing() -> bool:
    try:
        OrtOffline(provider="cuda")(_copy(CONV))
    except ProviderUnavailableError:
        return True
    return False


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


@pytest.mark.parametrize(
    "options", [{"level": "max"}, {"provider": "rocm"}, {"level": 1}, {"max_growth": 0.9}]
)
def test_bad_options(options: dict) -> None:
    with pytest.raises(PassError):
        OrtOffline(**options)


def test_external_data_read_back() -> None:
    rng = np.random.default_rng(1)
    w = onnx.numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), "w")
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2,64] x) => (float[2,64] y) {
        i = Identity (x)
        y = MatMul (i, w)
    }""")
    model.graph.initializer.append(w)
    result = ort_offline(model)
    inits = list(result.graph.initializer)
    assert inits and all(t.data_location == onnx.TensorProto.DEFAULT for t in inits)
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(inits[0]),
                                  onnx.numpy_helper.to_array(w))


def test_folded_initializer_inputs_do_not_become_required(ort_run, rng) -> None:
    model = onnx.parser.parse_model("""
    <ir_version: 3, opset_import: ["" : 9]>
    g (float[1,2] x, int64[2] shape) => (float[1,2] y) {
        c = ConstantOfShape <value = float[1] {3}> (shape)
        y = Mul (x, c)
    }""")
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array([1, 2], np.int64), "shape"))
    result = OrtOffline()(_copy(model))
    assert result.modified
    assert [i.name for i in result.model.graph.input] == ["x"]
    x = rng.standard_normal((1, 2)).astype(np.float32)
    np.testing.assert_allclose(ort_run(result.model, {"x": x})["y"], 3 * x, rtol=1e-6)


def test_an_unread_input_with_a_default_value_stays(ort_run, rng) -> None:
    # From IR 4 an initializer listed as an input is a default a caller may feed: ORT drops it
    # where nothing reads it, and a caller feeding it would be refused.
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1,2] x, float[2] unread) => (float[1,2] y) <float[2] unread = {1.0, 2.0}> {
        c = Constant <value = float[2] {1.0, 2.0}> ()
        d = Add (c, c)
        y = Mul (x, d)
    }""")
    result = OrtOffline()(_copy(model))
    assert result.modified and result.skipped is None
    assert [i.name for i in result.model.graph.input] == ["x", "unread"]
    assert "unread" in {t.name for t in result.model.graph.initializer}
    x = rng.standard_normal((1, 2)).astype(np.float32)
    unread = np.zeros(2, np.float32)
    np.testing.assert_allclose(ort_run(result.model, {"x": x, "unread": unread})["y"],
                               x * np.array([2.0, 4.0], np.float32), rtol=1e-6)


def test_refuses_folding_that_bloats() -> None:
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1,64,8,8] x) => (float[1,64,8,8] y) {
        shape = Constant <value = int64[4] {64, 64, 3, 3}> ()
        w = ConstantOfShape <value = float[1] {0.01}> (shape)
        y = Conv <pads = [1, 1, 1, 1]> (x, w)
    }""")
    result = OrtOffline()(_copy(model))
    # Run again without ConstantFolding, ORT only makes the Constant node an initializer.
    assert result.stats["constant_folding_off"] == 1
    assert "ConstantOfShape" in ops(result.model) and result.model.ByteSize() < 4096
    allowed = OrtOffline(max_growth=None)(_copy(model))
    assert allowed.modified and allowed.model.ByteSize() > 64 * 64 * 9 * 4


def test_fusions_are_kept_when_folding_is_refused(ort_run, rng) -> None:
    # The Conv+BatchNormalization fusion stays; the 256 KiB weight the ConstantOfShape computes
    # is not materialised.
    weights = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1,3,8,8] x, float[8,3,3,3] w, float[8] s, float[8] b, float[8] m, float[8] v)
        => (float[1,8192,8,8] y) {
        c = Conv <pads = [1, 1, 1, 1]> (x, w)
        n = BatchNormalization (c, s, b, m, v)
        shape = Constant <value = int64[4] {8192, 8, 1, 1}> ()
        w2 = ConstantOfShape <value = float[1] {0.01}> (shape)
        y = Conv (n, w2)
    }""")
    del model.graph.input[1:]
    for name, value in {"w": weights, "s": np.full(8, 1.5), "b": np.full(8, 0.1),
                        "m": np.full(8, 0.2), "v": np.full(8, 2.0)}.items():
        model.graph.initializer.append(
            onnx.numpy_helper.from_array(np.asarray(value, np.float32), name))
    result = OrtOffline()(_copy(model))
    assert result.modified and result.stats["constant_folding_off"] == 1
    assert sorted(ops(result.model)) == ["ConstantOfShape", "Conv", "Conv"]
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(ort_run(result.model, {"x": x})["y"],
                               ort_run(model, {"x": x})["y"], rtol=1e-4, atol=1e-5)


def test_a_model_ort_cannot_load_is_skipped_not_fatal() -> None:
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17, "my.domain" : 1]>
    g (float[2] x) => (float[2] y) { t = Relu (x)  y = my.domain.Custom (t) }
    """)
    result = OrtOffline()(model)
    assert result.skipped and not result.modified and result.model is model
    assert "cannot load" in result.skipped and "my.domain" in result.skipped
    assert result.warnings


def cast_pair_read_by_a_branch() -> onnx.ModelProto:
    """A lossless float -> double -> float Cast pair whose result If branches read by name:
    ORT (1.31) removes the pair and writes a model that no longer loads."""
    h = onnx.helper
    then = h.make_graph([h.make_node("Neg", ["c"], ["t"])], "then", [],
                        [h.make_tensor_value_info("t", onnx.TensorProto.FLOAT, [2])])
    other = h.make_graph([h.make_node("Abs", ["c"], ["e"])], "else", [],
                         [h.make_tensor_value_info("e", onnx.TensorProto.FLOAT, [2])])
    graph = h.make_graph(
        [h.make_node("Cast", ["x"], ["d"], to=onnx.TensorProto.DOUBLE),
         h.make_node("Cast", ["d"], ["c"], to=onnx.TensorProto.FLOAT),
         h.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)],
        "g",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2]),
         h.make_tensor_value_info("cond", onnx.TensorProto.BOOL, [])],
        [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])],
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def test_invalid_output_from_ort_is_refused() -> None:
    # ORT removes the lossless float -> double -> float Cast pair while the If branches still
    # read its result by name: the model it writes no longer loads, so the pass steps aside.
    model = cast_pair_read_by_a_branch()
    result = OrtOffline()(model)
    if result.skipped is None:  # a later ORT may keep the pair: then the output must be valid
        onnx.checker.check_model(result.model)
    else:
        assert "invalid model" in result.skipped and "'c'" in result.skipped
        assert result.model is model and not result.modified


# ------------------------------------------------------------------ rules 9 and 10: portable
FP16_BLOCK = onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 17]>
g (float16[1,3,8,8] x) => (float16[1,4,8,8] y) {
    w = Constant <value = float16[4,3,1,1] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}> ()
    i = Identity (x)
    c = Conv (i, w)
    r = Relu (c)
    y = Softmax <axis = 1> (r)
}""")

HARDSWISH = onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 14]>
g (float[2,3,4,4] x) => (float[2,3,4,4] y) {
    i = Identity (x)
    h = HardSwish (i)
    y = HardSwish (h)
}""")

LOCAL_FUNCTION = onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
g (float[2,4] x) => (float[2,4] y) {
    a = local.Swish (x)
    b = local.Swish (a)
    y = Relu (b)
}
<domain: "local", opset_import: ["" : 17]>
Swish (x) => (y) {
    t = Sigmoid (x)
    y = Mul (t, x)
}""")


def _types(model: onnx.ModelProto) -> dict[str, int]:
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    return {v.name: v.type.tensor_type.elem_type
            for v in [*graph.input, *graph.output, *graph.value_info]}


def test_float16_stays_float16_without_inserted_casts(ort_run, rng) -> None:
    # ORT's CPU provider has no float16 Conv or Softmax: it runs them in float32 between Casts
    # and expands the Softmax; neither belongs in a portable model.
    result = OrtOffline()(_copy(FP16_BLOCK))
    ops = [n.op_type for n in result.model.graph.node]
    assert ops == ["Conv", "Relu", "Softmax"]
    assert result.stats["precision_casts_removed"] > 0
    assert result.stats["nodes_put_back"] == 1
    before, after = _types(FP16_BLOCK), _types(result.model)
    assert all(after[name] == onnx.TensorProto.FLOAT16 for name in after)
    assert {name: before[name] for name in after if name in before} == {
        name: after[name] for name in after if name in before}
    onnx.checker.check_model(result.model, full_check=True)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float16)
    np.testing.assert_allclose(ort_run(result.model, {"x": x})["y"].astype(np.float32),
                               ort_run(FP16_BLOCK, {"x": x})["y"].astype(np.float32),
                               rtol=1e-2, atol=1e-2)
    assert not OrtOffline()(result.model).modified


def test_function_op_is_not_expanded(ort_run, rng) -> None:
    result = OrtOffline()(_copy(HARDSWISH))
    assert [n.op_type for n in result.model.graph.node] == ["HardSwish", "HardSwish"]
    assert result.stats["nodes_put_back"] == 2
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    np.testing.assert_array_equal(ort_run(result.model, {"x": x})["y"],
                                  ort_run(HARDSWISH, {"x": x})["y"])


def test_local_functions_stay_functions(ort_run, rng) -> None:
    result = OrtOffline()(_copy(LOCAL_FUNCTION))
    assert not result.skipped
    assert [n.op_type for n in result.model.graph.node] == ["Swish", "Swish", "Relu"]
    assert [f.name for f in result.model.functions] == ["Swish"]
    onnx.checker.check_model(result.model, full_check=True)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_array_equal(ort_run(result.model, {"x": x})["y"],
                                  ort_run(LOCAL_FUNCTION, {"x": x})["y"])


SHARED_CONSTANT = onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
g (float[2,4] x) => (float[2,4] z) {
    a = local.Scale (x)
    b = local.Scale (a)
    s = Add (b, a)
    k = Constant <value = float {2}> ()
    z = Mul (s, k)
}
<domain: "local", opset_import: ["" : 17]>
Scale (x) => (y) {
    k = Constant <value = float {2}> ()
    c = Constant <value = float[4] {1, 2, 3, 4}> ()
    m = Mul (x, k)
    a = Add (m, c)
    y = Relu (a)
}""")


def test_inlined_names_do_not_collide_when_functions_are_inlined_again(ort_run, rng) -> None:
    # ORT shares the graph's constant 2 with the one it inlined from Scale, under the name
    # _inlfunc_Scale_...; the calls put back are inlined again at load under the same names.
    result = OrtOffline()(_copy(SHARED_CONSTANT))
    assert [n.op_type for n in result.model.graph.node] == ["Scale", "Scale", "Add", "Mul"]
    assert not any(i.name.startswith("_inlfunc_") for i in result.model.graph.initializer)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_array_equal(ort_run(result.model, {"x": x})["z"],
                                  ort_run(SHARED_CONSTANT, {"x": x})["z"])


def test_shape_of_a_kept_transpose_is_not_rewritten() -> None:
    # ORT's transpose optimizer reads Shape(Transpose(x)) as Gather(Shape(x), perm) and keeps
    # the Transpose for its other reader: one node more.
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N,3,4] x) => (float[4,3,N] y, int64[3] s) {
        y = Transpose <perm = [2, 1, 0]> (x)
        s = Shape (y)
    }""")
    result = OrtOffline()(_copy(model))
    assert sorted(n.op_type for n in result.model.graph.node) == ["Shape", "Transpose"]


def test_output_with_more_nodes_is_refused() -> None:
    # Whatever ORT does, a portable output never has more nodes than its input.
    for model in (FP16_BLOCK, HARDSWISH, LOCAL_FUNCTION, CONV):
        result = OrtOffline()(_copy(model))
        from graphfix.graph import count_nodes

        assert count_nodes(result.model) <= count_nodes(model)


# --------------------------------------------------------------- rule 9: no new types
def _op_set(model: onnx.ModelProto) -> set[str]:
    return {n.op_type for n in model.graph.node}


QUANTIZED_TABLE = onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 17]>
g (int64[N, 5] ids, float[N, 5, 8] h) => (float[N, 5, 8] y) {
    table = DequantizeLinear (q, scale, zero)
    rows = Gather (table, ids)
    y = Add (rows, h)
}""")
QUANTIZED_TABLE.graph.initializer.extend([
    onnx.numpy_helper.from_array(np.arange(-64, 64, dtype=np.int8).reshape(16, 8), "q"),
    onnx.numpy_helper.from_array(np.array(0.05, np.float32), "scale"),
    onnx.numpy_helper.from_array(np.array(0, np.int8), "zero"),
])


def test_no_quantize_pairs_are_added_to_a_quantized_table(ort_run, rng) -> None:
    # ORT's QDQ propagation moves the DequantizeLinear past the Gather with a new
    # QuantizeLinear/DequantizeLinear pair: a requantization nobody asked for.
    result = OrtOffline()(_copy(QUANTIZED_TABLE))
    assert _op_set(result.model) <= _op_set(QUANTIZED_TABLE)
    assert "QuantizeLinear" not in _op_set(result.model)
    feeds = {"ids": rng.integers(0, 16, (2, 5)), "h": rng.standard_normal((2, 5, 8)).astype(
        np.float32)}
    np.testing.assert_array_equal(ort_run(result.model, feeds)["y"],
                                  ort_run(QUANTIZED_TABLE, feeds)["y"])


FAKE_QUANTIZED = onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[N, 3] y) {
    xq = QuantizeLinear (x, sx, zx)
    xd = DequantizeLinear (xq, sx, zx)
    wq = QuantizeLinear (w, sw, zw)
    wd = DequantizeLinear (wq, sw, zw)
    h = MatMul (xd, wd)
    vd = DequantizeLinear (v, sw, zw)
    t = MatMul (h, vd)
    a = Add (t, b)
    y = Relu (a)
}""")
FAKE_QUANTIZED.graph.initializer.extend([
    onnx.numpy_helper.from_array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), "w"),
    onnx.numpy_helper.from_array(np.arange(-4, 5, dtype=np.int8).reshape(3, 3), "v"),
    onnx.numpy_helper.from_array(np.ones(3, np.float32), "b"),
    onnx.numpy_helper.from_array(np.array(0.02, np.float32), "sx"),
    onnx.numpy_helper.from_array(np.array(0, np.int8), "zx"),
    onnx.numpy_helper.from_array(np.array(0.05, np.float32), "sw"),
    onnx.numpy_helper.from_array(np.array(0, np.int8), "zw"),
])


def test_a_weights_quantizers_are_not_folded_into_a_float_weight(ort_run, rng) -> None:
    # With ORT's QDQ handling off, its constant folding turned Q(w) -> DQ, and DQ of an int8
    # weight, into float32 weights: the integer kernels a runtime picks for them were lost,
    # and ORT's own session computed the original another way (a QAT export's Linear one
    # quantization level off). They stay, as the model has them; the rest is still folded.
    model = _copy(FAKE_QUANTIZED)
    model.graph.node.append(onnx.helper.make_node("Identity", ["y"], ["unused"]))
    result = OrtOffline()(model)
    assert result.modified and "Identity" not in ops(result.model)  # ORT still ran
    assert ops(result.model).count("DequantizeLinear") == 3
    assert ops(result.model).count("QuantizeLinear") == 2
    weights = {t.name: t for t in result.model.graph.initializer}
    assert weights["v"].data_type == onnx.TensorProto.INT8 and "w" in weights
    assert [i.name for i in result.model.graph.input] == ["x"]
    x = rng.uniform(-1, 1, (5, 4)).astype(np.float32)
    np.testing.assert_array_equal(ort_run(result.model, {"x": x})["y"],
                                  ort_run(FAKE_QUANTIZED, {"x": x})["y"])


DENSE_HEAD = onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[N, 3] y) {
    h = MatMul (x, w)
    z = Add (h, b)
    i = Identity (z)
    y = Relu (i)
}""")
DENSE_HEAD.graph.initializer.extend([
    onnx.numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "w"),
    onnx.numpy_helper.from_array(np.ones(3, np.float32), "b"),
])


def test_a_fusion_into_an_op_type_the_model_lacks_is_left_out(ort_run, rng) -> None:
    # MatMul + Add -> Gemm: the rest of ORT's rewrites (the Identity) still happen.
    result = OrtOffline()(_copy(DENSE_HEAD))
    assert ops(result.model) == ["MatMul", "Add", "Relu"]
    assert result.stats["fusions_off"] == 1
    x = rng.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_array_equal(ort_run(result.model, {"x": x})["y"],
                                  ort_run(DENSE_HEAD, {"x": x})["y"])
    with_gemm = _copy(DENSE_HEAD)
    with_gemm.graph.node.append(onnx.helper.make_node("Gemm", ["x", "w"], ["unused"]))
    assert "Gemm" in ops(OrtOffline()(with_gemm).model)  # a model that has Gemm keeps the fusion


def test_cast_like_stays_cast_like(ort_run, rng) -> None:
    # ORT inlines CastLike (a function op) as Cast: one node for one, but an op type the model
    # does not have; the original node is put back.
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3] x, float16[2, 3] h) => (float16[2, 3] y) {
        c = CastLike (x, h)
        y = Add (c, h)
    }""")
    result = OrtOffline()(_copy(model))
    assert "Cast" not in ops(result.model)
    feeds = {"x": rng.standard_normal((2, 3)).astype(np.float32),
             "h": rng.standard_normal((2, 3)).astype(np.float16)}
    np.testing.assert_array_equal(ort_run(result.model, feeds)["y"], ort_run(model, feeds)["y"])


def test_fallbacks_leave_out_the_rewrites_that_round_otherwise() -> None:
    # Mul(Div(1, x), y) -> Div(y, x) rounds otherwise: where a Cast to an integer follows (T5's
    # relative position buckets), one rounding moves a position into the next bucket.
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[4] x, float[4] y) => (float[4] z) {
        one = Constant <value = float {1.0}> ()
        inverse = Div (one, x)
        z = Mul (inverse, y)
    }""")
    assert ops(OrtOffline()(_copy(model)).model) == ["Div"]
    fallbacks = OrtOffline().fallbacks()
    assert [f.leaves_out for f in fallbacks] == [
        "ONNX Runtime's constant folding", "ONNX Runtime's Div/Mul fusion",
        "ONNX Runtime's rewrites that round otherwise"]
    assert ops(fallbacks[1].pass_(_copy(model)).model) == ["Div", "Mul"]
    assert fallbacks[2].pass_.fallbacks() == []


def test_contrib_ops_the_model_has_are_not_a_reason_to_refuse(ort_run, rng) -> None:
    # A quantized model keeps its own com.microsoft ops; ORT's other rewrites still apply.
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
    g (float[2, 8] x) => (float[2, 8] y) {
        i = Identity (x)
        y = com.microsoft.Gelu (i)
    }""")
    result = OrtOffline()(_copy(model))
    assert result.modified and not result.skipped
    assert ops(result.model) == ["Gelu"]
    x = rng.standard_normal((2, 8)).astype(np.float32)
    np.testing.assert_array_equal(ort_run(result.model, {"x": x})["y"], ort_run(model, {"x": x})["y"])


def test_an_input_onnx_already_calls_invalid_is_no_reason_to_refuse(ort_run, rng) -> None:
    # ONNX Runtime's transformers optimizer writes SimplifiedLayerNormalization (RMSNorm) in
    # the default domain: onnx's checker rejects the input itself; ORT's rewrite of it, no
    # worse, is taken.
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 8] x, float[8] s) => (float[2, 8] y) {
        i = Identity (x)
        y = SimplifiedLayerNormalization <axis = -1, epsilon = 0.00001> (i, s)
    }""")
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model)
    result = OrtOffline()(_copy(model))
    assert result.modified and not result.skipped
    assert ops(result.model) == ["SimplifiedLayerNormalization"]
    feed = {"x": rng.standard_normal((2, 8)).astype(np.float32),
            "s": rng.standard_normal(8).astype(np.float32)}
    np.testing.assert_array_equal(ort_run(result.model, feed)["y"], ort_run(model, feed)["y"])


def test_no_node_is_put_back_reading_a_constant_ort_rewrote_in_place() -> None:
    # ORT's transpose optimizer pushes t = Transpose(x) through Mul(t, c): Mul(x, c') then a
    # Transpose, c' the constant transposed under c's own name (rotary tables, q * cos).
    # Putting the original Mul back would read c' as if it were c.
    from graphfix.passes._portable import undo_provider_decisions

    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4,2,6] x) => (float[1,2,4,6] y, float[1,2,4,6] z) {{
    t = Transpose<perm = [0, 2, 1, 3]>(x)
    {body}
    y = Sigmoid(m)
    z = Neg(t)
}}"""
    original = onnx.parser.parse_model(text.format(body="m = Mul(t, c)"))
    optimized = onnx.parser.parse_model(text.format(
        body="pushed = Mul(x, c)\n    m = Transpose<perm = [0, 2, 1, 3]>(pushed)"))
    table = np.random.default_rng(0).standard_normal((1, 1, 4, 6)).astype(np.float32)
    original.graph.initializer.append(numpy_helper.from_array(table, "c"))
    optimized.graph.initializer.append(
        numpy_helper.from_array(table.transpose(0, 2, 1, 3).copy(), "c"))
    undone = undo_provider_decisions(optimized, original)
    assert undone.restored == 0
    assert [n.op_type for n in optimized.graph.node] == ["Transpose", "Mul", "Transpose",
                                                         "Sigmoid", "Neg"]
    x = np.random.default_rng(1).standard_normal((1, 4, 2, 6)).astype(np.float32)
    expected = run_outputs(original, [{"x": x}], ["y", "z"])[0]
    got = run_outputs(optimized, [{"x": x}], ["y", "z"])[0]
    for name in ("y", "z"):
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-6)


DIV_MUL = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[N,8] x, float[N,8] y) => (float[N,8] out) {
    one = Constant <value = float {1}> ()
    inverse = Div (one, x)
    scaled = Mul (inverse, y)
    TAIL
}"""


def test_a_model_that_quantizes_what_it_computes_keeps_its_order() -> None:
    """Rule 12: Mul(Div(1, x), y) -> Div(y, x) rounds otherwise; before a quantizer of computed
    values that moves whole levels, so the fusion stays off there (and only there)."""
    plain = onnx.parser.parse_model(DIV_MUL.replace("TAIL", "out = Relu (scaled)"))
    fused = OrtOffline()(plain)
    assert fused.modified and "Mul" not in ops(fused.model)  # the float model: fused
    quantized = onnx.parser.parse_model(DIV_MUL.replace("TAIL", """
        q, scale, zero = DynamicQuantizeLinear (scaled)
        out = DequantizeLinear (q, scale, zero)"""))
    result = OrtOffline()(quantized)
    assert {"Div", "Mul", "DynamicQuantizeLinear"} <= set(ops(result.model))
    assert result.stats["order_kept"] == 1


IF_BODY = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[4] x, bool c) => (float[4] y) {
    y = If (c) <then_branch = g1 () => (float[4] t) {
        FIRST
        SECOND
    }, else_branch = g2 () => (float[4] e) {
        e = Neg (x)
    }>
}"""


def test_a_body_only_renamed_and_reordered_is_the_same_graph() -> None:
    """ONNX Runtime renames and reorders the nodes it writes into If and Loop bodies: a model
    changed only that way is the input model (a second run on a detector changed nothing
    else, and was reported as changed)."""
    from graphfix.passes._compare import same_graph

    def body(first: str, second: str) -> onnx.ModelProto:
        return onnx.parser.parse_model(IF_BODY.replace("FIRST", first).replace("SECOND", second))
    model = body("a = Relu (x)", "t = Abs (a)")
    renamed = body("_v_3 = Relu (x)", "t = Abs (_v_3)")
    reordered = body("t = Abs (a)", "a = Relu (x)")
    assert same_graph(model.graph, renamed.graph) and same_graph(model.graph, reordered.graph)
    other = body("a = Relu (x)", "t = Neg (a)")
    assert not same_graph(model.graph, other.graph)


def test_an_attribute_written_at_its_default_is_the_attribute_left_out() -> None:
    """ONNX Runtime writes ``allowzero=0`` into a Reshape it rewrites: a model changed only so
    is the input model (a second run on a fused BERT was reported as changed). Another value
    is another node."""
    from graphfix.passes._compare import same_graph

    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 6] x) => (float[3, 4] y) {
        shape = Constant <value = int64[2] {3, 4}> ()
        y = Reshape ATTRS (x, shape)
    }"""
    def model(attributes: str) -> onnx.ModelProto:
        return onnx.parser.parse_model(text.replace("ATTRS", attributes))
    plain = model("")
    assert same_graph(plain.graph, model("<allowzero = 0>").graph)
    assert not same_graph(plain.graph, model("<allowzero = 1>").graph)


def test_no_more_transposes_though_the_nodes_are_fewer(ort_run, rng) -> None:
    """ORT's transpose optimizer pushes the Transpose through the Sigmoid and keeps it for the
    ReduceSum: two Transposes where there was one, while removing the Identity chain makes
    the node count fall. The pass tries again without the transpose optimizer: one."""
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1,3,4,5] x, float[2] z) => (float[1,4,5,3] s, float[1,4,3] r, float[2] zo) {
        t = Transpose <perm = [0, 2, 3, 1]> (x)
        s = Sigmoid (t)
        axes = Constant <value = int64[1] {2}> ()
        r = ReduceSum <keepdims = 0> (t, axes)
        z1 = Identity (z)
        z2 = Identity (z1)
        zo = Identity (z2)
    }""")
    original = onnx.ModelProto()
    original.CopyFrom(model)
    result = OrtOffline()(model)
    assert result.modified and result.stats.get("fusions_off") == 1, result
    transposes = [n for n in result.model.graph.node if n.op_type == "Transpose"]
    assert len(transposes) == 1 and len(result.model.graph.node) < len(original.graph.node)
    feeds = {"x": rng.standard_normal((1, 3, 4, 5)).astype(np.float32),
             "z": rng.standard_normal(2).astype(np.float32)}
    for name, value in ort_run(original, feeds).items():
        np.testing.assert_array_equal(ort_run(result.model, feeds)[name], value)


@pytest.mark.tools
def test_a_model_with_bodies_reaches_a_fixed_point_in_one_run(tmp_path):
    """Rule 13: ORT removes the Casts to the same type in an EmbeddingBag's Loop (dynamo
    exporter) only once it reads back the types its first pass wrote: the pass goes through
    ORT again, and a second run of the pass finds nothing left to do."""
    torch = pytest.importorskip("torch")
    from torch.export import Dim

    from graphfix.graph import count_nodes

    class Bags(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bag = torch.nn.EmbeddingBag(100, 8, mode="sum")

        def forward(self, idx, off):  # noqa: ANN001, ANN201
            return self.bag(idx, off)

    path = tmp_path / "bags.onnx"
    torch.onnx.export(Bags(), (torch.randint(0, 100, (10,)), torch.tensor([0, 3, 7])), path,
                      input_names=["idx", "off"], output_names=["y"], dynamo=True,
                      dynamic_shapes=({0: Dim("n", min=2, max=1000)},
                                      {0: Dim("b", min=2, max=100)}))
    model = onnx.load(path)
    first = OrtOffline()(model)
    assert first.modified and first.stats.get("second_pass_nodes", 0) > 0, first.stats
    again = OrtOffline()(first.model)
    assert not again.modified and count_nodes(again.model) == count_nodes(first.model)


def test_attributes_ort_writes_at_their_default_are_dropped():
    """ORT writes out attributes at their schema's default on the nodes it rewrites (the Conv
    it folded a BatchNormalization into: auto_pad, group; Gemm's alpha, beta, transA, transB;
    Flatten's axis): they mean nothing an absent attribute does not, and cost bytes. The
    input's own attributes stay, default or not."""
    from onnx import helper

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
               numpy_helper.from_array(rng.standard_normal((256, 5)).astype(np.float32), "g")]
    weights += [numpy_helper.from_array(value.astype(np.float32), name) for name, value in (
        ("s", rng.random(4) + 0.5), ("b", rng.standard_normal(4)),
        ("m", rng.standard_normal(4)), ("v", rng.random(4) + 0.5))]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"]),
         helper.make_node("Flatten", ["y"], ["f"]),
         helper.make_node("Gemm", ["f", "g"], ["z"], beta=1.0)], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [1, 5])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    result = OrtOffline()(onnx.ModelProto.FromString(model.SerializeToString()))
    assert result.modified
    stated = {n.op_type: sorted(a.name for a in n.attribute) for n in result.model.graph.node}
    assert stated == {"Conv": ["pads"], "Flatten": [], "Gemm": ["beta"]}
    feed = [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)}]
    np.testing.assert_allclose(run_outputs(result.model, feed, ["z"])[0]["z"],
                               run_outputs(model, feed, ["z"])[0]["z"], rtol=1e-5, atol=1e-5)
    assert result.model.ByteSize() < model.ByteSize()


def test_two_random_draws_of_one_input_stay_two() -> None:
    # ONNX Runtime's common subexpression elimination took Sub(Bernoulli(p), Bernoulli(p)) for
    # 0 (a hostile round, under --no-verify, where no check sees it)
    model = onnx.parser.parse_model('<ir_version: 8, opset_import: ["" : 17]>' + """
    g (float[64] x) => (float[64] y) {
        p = Sigmoid (x)
        a = Bernoulli (p)
        b = Bernoulli (p)
        y = Sub (a, b)
    }""")
    result = OrtOffline()(model)
    assert [n.op_type for n in result.model.graph.node].count("Bernoulli") == 2


def test_what_ort_writes_that_says_nothing_is_not_kept(ort_run):
    """ORT marks a Transpose it moved with a doc string ("Added in transpose optimizer") and
    writes empty producer fields and DEFAULT data locations: none of it is the input's, all of
    it costs bytes; a node's own doc string stays."""
    from onnx import helper

    value = lambda name: helper.make_tensor_value_info(  # noqa: E731
        name, onnx.TensorProto.FLOAT, ["N", 4, 4, 2])
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 3, 1, 2]),
         helper.make_node("Relu", ["xt"], ["rt"], doc_string="the input's own"),
         helper.make_node("LRN", ["rt"], ["r"], size=3), helper.make_node("Add", ["rt", "r"], ["a"]),
         helper.make_node("Transpose", ["a"], ["y"], perm=[0, 2, 3, 1])], "g",
        [value("x")], [value("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    result = OrtOffline()(onnx.ModelProto.FromString(model.SerializeToString()))
    docs = {n.doc_string for n in result.model.graph.node if n.HasField("doc_string")}
    assert docs <= {"the input's own"}, docs
    assert not result.model.HasField("producer_name")
    import graphfix

    assert graphfix.optimize(model).model.ByteSize() <= model.ByteSize()  # 239 B before
    feed = {"x": np.random.default_rng(0).standard_normal((2, 4, 4, 2)).astype(np.float32)}
    np.testing.assert_allclose(ort_run(result.model, feed)["y"], ort_run(model, feed)["y"],
                               rtol=1e-6, atol=1e-6)


# --- rule 15: ORT's transpose optimizer off where eliminate-transposes keeps a Transpose ---

def _nhwc_pool(*, opset: int = 13, quantized: bool = False) -> onnx.ModelProto:
    """An NHWC input made NCHW and pooled over H and W (ReduceMean), quantized to int16 after
    on request."""
    tail = """
        q = QuantizeLinear (y0, s, z)
        y = DequantizeLinear (q, s, z)""" if quantized else """
        y = Identity (y0)"""
    weights = ["float s = {1e-5}", "int16 z = {0}"] if quantized else []
    if opset >= 18:  # axes as an input
        weights.append("int64[2] axes = {2, 3}")
        pool = "ReduceMean <keepdims = 0> (t, axes)"
    else:
        pool = "ReduceMean <axes = [2, 3], keepdims = 0> (t)"
    listed = f"<{', '.join(weights)}>" if weights else ""
    return onnx.parser.parse_model(f"""
    <ir_version: 8, opset_import: ["" : {opset}]>
    g (float[N,H,W,3] x) => (float[N,3] y) {listed} {{
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        y0 = {pool}{tail}
    }}""")


def test_keep_reduction_order_keeps_ort_from_pushing_the_transpose_through_a_sum():
    # Without the option ORT's transpose optimizer pools the NHWC input directly (another
    # summation order, last bits off); with it the Transpose stays and the sum is the same.
    pushed = OrtOffline()(_copy(_nhwc_pool()))
    assert "Transpose" not in ops(pushed.model)
    kept = OrtOffline(keep_reduction_order=True)(_copy(_nhwc_pool()))
    assert "Transpose" in ops(kept.model) and kept.stats.get("layout_kept") == 1
    x = {"x": (np.random.default_rng(1).standard_normal((2, 7, 9, 3)) * 10).astype(np.float32)}
    [reference], [got] = (run_outputs(m, [x], ["y"])[0].values()
                          for m in (_nhwc_pool(), kept.model))
    assert np.array_equal(reference, got)


def test_a_quantized_model_keeps_its_transposes_before_a_reduction_ort_would_push_through():
    # A last bit of the pooled value is a whole int16 level after the QuantizeLinear.
    result = OrtOffline()(_copy(_nhwc_pool(opset=21, quantized=True)))
    assert "Transpose" in ops(result.model) and result.stats.get("layout_kept") == 1


def test_an_opset_11_hardmax_keeps_its_layout_where_ties_are_decided_by_memory_order():
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 11]>
    g (float[N,H,W,3] x) => (float[N,H,W,3] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        s = Hardmax <axis = 1> (t)
        y = Transpose <perm = [0, 2, 3, 1]> (s)
    }""")
    result = OrtOffline()(_copy(model))
    assert ops(result.model).count("Transpose") == 2
    x = {"x": np.array([0, 0, 1, 1, 0, 0], np.float32).reshape(1, 1, 2, 3)}
    [reference], [got] = (run_outputs(m, [x], ["y"])[0].values() for m in (model, result.model))
    assert np.array_equal(reference, got) and reference.ravel().tolist() == [0, 0, 0, 1, 0, 0]


def test_what_ort_expanded_is_put_back_in_the_same_branch_of_an_if() -> None:
    """ONNX Runtime writes an If's else_branch before its then_branch. Pairing the bodies by
    position put the then branch's node back into the else branch where both name their
    output alike: a wrong model on the branch parity's sizes never take (S > 64), exit 0."""
    model = onnx.parser.parse_model("""
    <ir_version: 10, opset_import: ["" : 17]>
    g (float[N,S] x) => (float[N,S] y) <int64 lim = {64}, int64[1] one = {1}> {
        shp = Shape (x)
        s = Gather <axis = 0> (shp, one)
        ss = Squeeze (s)
        short = LessOrEqual (ss, lim)
        y = If (short) <then_branch = th () => (float[N,S] o) { o = Tanh (x) },
                        else_branch = el () => (float[N,S] o) { a = Sigmoid (x)  o = Mul (a, x) }>
    }""")
    result = OrtOffline()(onnx.ModelProto.FromString(model.SerializeToString()))
    [node] = [n for n in result.model.graph.node if n.op_type == "If"]
    branches = {a.name: [n.op_type for n in a.g.node] for a in node.attribute}
    assert branches == {"then_branch": ["Tanh"], "else_branch": ["Sigmoid", "Mul"]}, branches
    feeds = [{"x": np.random.default_rng(0).standard_normal((2, size)).astype(np.float32)}
             for size in (8, 100)]
    for ours, theirs in zip(run_outputs(result.model, feeds, ["y"]),
                            run_outputs(model, feeds, ["y"])):
        np.testing.assert_array_equal(ours["y"], theirs["y"])


def test_a_contrib_op_in_a_body_keeps_its_domain_import(ort_run, rng) -> None:
    # At level all ORT fuses Transpose + MatMul inside an If body into com.microsoft's
    # FusedMatMul; the imports were trimmed to the main graph's domains, and the output did
    # not load ("No opset import for domain 'com.microsoft'"): the pass was skipped whole.
    from onnx import helper

    def body(name: str, transposed: bool) -> onnx.GraphProto:
        nodes = [helper.make_node("Transpose", ["a"], [f"{name}_t"], perm=[1, 0])] \
            if transposed else []
        nodes.append(helper.make_node("MatMul", [f"{name}_t" if transposed else "a", "b"],
                                      [f"{name}_y"]))
        return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(
            f"{name}_y", onnx.TensorProto.FLOAT, [4, 4])])

    graph = helper.make_graph(
        [helper.make_node("If", ["flag"], ["y"], then_branch=body("then", True),
                          else_branch=body("other", False))], "g",
        [helper.make_tensor_value_info("flag", onnx.TensorProto.BOOL, []),
         helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, [4, 4]),
         helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    result = OrtOffline(level="all")(_copy(model))
    assert result.modified and not result.skipped
    assert "com.microsoft" in {o.domain for o in result.model.opset_import}
    feeds = {"flag": np.array(True), "a": rng.standard_normal((4, 4)).astype(np.float32),
             "b": rng.standard_normal((4, 4)).astype(np.float32)}
    np.testing.assert_allclose(ort_run(result.model, feeds)["y"], ort_run(model, feeds)["y"],
                               rtol=1e-6, atol=1e-6)
