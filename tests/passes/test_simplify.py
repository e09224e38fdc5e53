"""simplify: folding, dead code, bounded growth, dynamic dims, crash isolation, idempotence."""

from __future__ import annotations

import os
import signal
import sys
from collections import Counter

import numpy as np
import onnx
import onnx.parser
import pytest

from graphfix.errors import PassError
from graphfix.passes.simplify import (
    FOLD_THRESHOLDS,
    KEEP_WORKER_BELOW,
    SKIPPED_OPTIMIZERS,
    WORKER_CODE,
    OnnxsimWorker,
    Simplify,
    simplify,
    stand_in_names,
)

FOLD = onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[N,3] x) => (float[N,3] y) {
    a = Constant <value = float[3] {1, 2, 3}> ()
    b = Add (a, a)
    dead = Neg (x)
    y = Mul (x, b)
}""")

# Expand of a 3-element constant to a 256x1024 table: folding adds 1 MiB to a tiny model.
EXPAND = onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[N,256,1024] x) => (float[N,256,1024] y) {
    a = Constant <value = float[1] {2}> ()
    one = Constant <value = float[1] {1}> ()
    two = Add (one, one)
    s = Constant <value = int64[2] {256, 1024}> ()
    e = Expand (a, s)
    m = Mul (x, e)
    y = Mul (m, two)
}""")


# A Conv weight computed at load time by ConstantOfShape (as in onnx's light models).
COS_CONV = onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,64,8,8] x) => (float[1,64,8,8] y) {
    shape = Constant <value = int64[4] {64, 64, 3, 3}> ()
    w = ConstantOfShape <value = float[1] {0.01}> (shape)
    y = Conv <pads = [1, 1, 1, 1]> (x, w)
}""")


# Forty 4 KiB ConstantOfShape folds: each under every bounded threshold, 160 KiB together.
MANY_SMALL_FOLDS = onnx.parser.parse_model(
    """
<ir_version: 8, opset_import: ["" : 17]>
g (float[N,1024] x) => (float[N,1024] y) {
    s = Constant <value = int64[1] {1024}> ()
    dead = Neg (x)
"""
    + "".join(
        f"    c{i} = ConstantOfShape <value = float[1] {{{i + 1}}}> (s)\n"
        f"    a{i} = Add ({'x' if i == 0 else f'a{i - 1}'}, c{i})\n"
        for i in range(40)
    )
    + "    y = Identity (a39)\n}"
)


def _ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def test_folds_constants_and_drops_dead_code(ort_run, rng) -> None:
    result = Simplify()(_copy(FOLD))
    assert result.modified and result.skipped is None
    assert sorted(_ops(result.model)) in (["Mul"], ["Constant", "Mul"])
    assert result.stats["nodes_before"] == 4
    onnx.checker.check_model(result.model, full_check=True)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(
        ort_run(result.model, {"x": x})["y"], ort_run(FOLD, {"x": x})["y"], rtol=1e-6, atol=1e-6
    )
    # Dynamic dims stay dynamic.
    assert result.model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
    assert result.stats["dims_fixed"] == 0
    # Idempotence.
    again = Simplify()(result.model)
    assert not again.modified and again.model is result.model


def test_an_input_with_a_default_value_stays_an_input(ort_run) -> None:
    # ``scale`` has a default (an initializer) and is an input: a caller may override it.
    # onnxsim alone folds ``scale + 1`` into one constant and drops the input.
    model = onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[N,3] x, float[3] scale) => (float[N,3] y)
  <float[3] scale = {1.0, 2.0, 3.0}, float[1] one = {1.0}> {
    shifted = Add (scale, one)
    big = Mul (x, shifted)
    y = Relu (big)
}""")
    result = Simplify()(_copy(model))
    assert result.skipped is None
    out = result.model
    assert [i.name for i in out.graph.input] == ["x", "scale"]
    assert "scale" in {t.name for t in out.graph.initializer}
    x = np.ones((2, 3), np.float32)
    for feed in ({"x": x}, {"x": x, "scale": np.full(3, 5.0, np.float32)}):
        np.testing.assert_array_equal(ort_run(out, feed)["y"], ort_run(model, feed)["y"])
    # before IR 4 every initializer is listed as an input and is a weight: it folds
    old = _copy(model)
    old.ir_version = 3
    old.graph.input.add().CopyFrom(onnx.helper.make_tensor_value_info(
        "one", onnx.TensorProto.FLOAT, [1]))
    assert Simplify()(old).modified


def test_metadata_stays_the_originals() -> None:
    model = _copy(FOLD)
    model.producer_name, model.producer_version = "exporter", "1.0"
    onnx.helper.set_model_props(model, {"author": "someone"})
    result = Simplify()(model)
    assert result.modified
    assert {p.key: p.value for p in result.model.metadata_props} == {"author": "someone"}
    assert (result.model.producer_name, result.model.producer_version) == ("exporter", "1.0")


def test_input_shapes_fix_dims_and_are_reported() -> None:
    result = Simplify(input_shapes={"x": [2, 3]})(_copy(FOLD))
    assert result.modified
    assert result.stats["dims_fixed"] == 2
    assert any("'x'" in w and "static" in w for w in result.warnings)
    assert result.model.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 2


def test_refuses_expand_bloat_and_keeps_small_folds(ort_run, rng) -> None:
    size = EXPAND.ByteSize()
    result = Simplify()(_copy(EXPAND))
    assert result.skipped is None and result.modified
    assert result.model.ByteSize() <= size + 64 * 1024
    assert result.stats["refused_fold_bytes"] >= 256 * 1024 * 4
    assert any("refused fold" in w for w in result.warnings)
    assert "Add" not in _ops(result.model)  # the small fold was kept
    x = rng.standard_normal((2, 256, 1024)).astype(np.float32)
    np.testing.assert_allclose(
        ort_run(result.model, {"x": x})["y"], ort_run(EXPAND, {"x": x})["y"], rtol=1e-5, atol=1e-5
    )


def test_bounded_attempts_stop_at_the_one_taken(tmp_path) -> None:
    # Folding everything grows EXPAND by 1 MiB; folding no tensor over 64 KiB fits and is
    # stable: the worker stops there instead of running the 16, 4 and 1 KiB and no-folding
    # attempts too.
    from graphfix.model_io import weight_bytes, write_scratch
    from graphfix.options import DEFAULT_MAX_GROWTH, growth_limit
    from graphfix.passes._onnxsim_worker import Budget, stable_choice

    write_scratch(_copy(EXPAND), tmp_path / "in.onnx")
    base = {"skipped_optimizers": list(SKIPPED_OPTIMIZERS)}
    attempts = [base, *({**base, "tensor_size_threshold": f"{t}B"}
                        for t in FOLD_THRESHOLDS), {**base, "skip_constant_folding": True}]
    limit = growth_limit(weight_bytes(EXPAND), DEFAULT_MAX_GROWTH, 2**31 - 1)
    budget = Budget(limit, 0, DEFAULT_MAX_GROWTH)
    with OnnxsimWorker() as worker:
        outputs = worker.simplify(tmp_path, attempts, budget)
    assert not isinstance(outputs, str) and len(outputs) == 2
    assert not outputs[0].fits(limit) and stable_choice(outputs, budget, len(attempts)) == outputs[1]


def test_constant_of_shape_conv_weight_not_materialised_by_default() -> None:
    result = Simplify()(_copy(COS_CONV))
    out = result.model
    assert out.ByteSize() < 64 * 1024 + COS_CONV.ByteSize()
    assert "ConstantOfShape" in _ops(out)
    allowed = Simplify(max_growth=None)(_copy(COS_CONV))
    assert allowed.modified and "ConstantOfShape" not in _ops(allowed.model)
    assert allowed.model.ByteSize() > 64 * 64 * 9 * 4


_FAILING_WORKERS = {
    # onnxsim raises inside the worker: the exception comes back as text.
    "raise": "import sys; sys.modules['torch'] = sys.modules['sympy'] = None\n"
             "import onnxsim\n"
             "def _fail(*args, **kwargs): raise RuntimeError('failure injected for testing')\n"
             "onnxsim.simplify = _fail\n" + WORKER_CODE,
    # the worker dies (as a segfault in onnxsim's C++ would take it).
    "abort": "import os; os.abort()",
}


@pytest.mark.parametrize("failure", ["raise", "abort"])
def test_onnxsim_failure_or_crash_skips(failure: str) -> None:
    model = _copy(FOLD)
    # A worker program that fails the given way, in place of the worker's own.
    with OnnxsimWorker(command=[sys.executable, "-c", _FAILING_WORKERS[failure]]) as worker:
        result = Simplify(worker=worker)(model)
    assert result.skipped and not result.modified
    assert result.model is model
    assert ("failed" if failure == "raise" else "crashed") in result.skipped


def test_invalid_model_makes_onnxsim_fail_and_skips() -> None:
    broken = _copy(FOLD)
    broken.graph.node[3].input[0] = "nowhere"
    result = Simplify()(broken)
    assert result.skipped and not result.modified and result.model is broken


@pytest.mark.parametrize(
    "options",
    [{"max_growth": 0.5}, {"max_growth": "2"}, {"input_shapes": {"x": [0, 3]}},
     {"input_shapes": ["x"]}],
)
def test_bad_options(options: dict) -> None:
    with pytest.raises(PassError):
        Simplify(**options)


def test_unknown_input_in_shapes() -> None:
    with pytest.raises(PassError):
        Simplify(input_shapes={"nope": [1, 3]})(_copy(FOLD))


def test_function_twin() -> None:
    assert "Add" not in _ops(simplify(_copy(FOLD)))


def _encoder_feeds(rng: np.random.Generator) -> dict[str, np.ndarray]:
    mask = np.ones((2, 7), np.int64)
    mask[1, 5:] = 0
    return {"input_ids": rng.integers(0, 1000, (2, 7), dtype=np.int64), "attention_mask": mask}


def test_transformer_encoder_does_not_gain_nodes(ort_run, rng) -> None:
    # Regression: onnxsim 0.8's default batched MatMul+Add -> Reshape/Gemm/Reshape rewrite (with a
    # Shape/Slice/Concat chain per linear layer) took this encoder from 84 to 113 nodes.
    from graphfix.models.transformer import transformer_encoder

    model = transformer_encoder()
    before = Counter(_ops(model))
    result = Simplify()(_copy(model))
    assert result.skipped is None and result.modified
    after = Counter(_ops(result.model))
    assert sum(after.values()) < sum(before.values())
    assert result.stats["nodes_after"] == sum(after.values())
    for op in ("Gemm", "Slice", "Concat"):
        assert after[op] == 0, op
    for op in ("MatMul", "Reshape", "Shape", "Add"):
        assert after[op] == before[op], op
    assert after["Transpose"] == before["Transpose"] - 2  # the adjacent inverse pair
    onnx.checker.check_model(result.model, full_check=True)
    for vi in result.model.graph.input:
        assert [d.dim_param for d in vi.type.tensor_type.shape.dim] == ["batch", "seq"]
    feeds = _encoder_feeds(rng)
    np.testing.assert_allclose(
        ort_run(result.model, feeds)["last_hidden_state"],
        ort_run(model, feeds)["last_hidden_state"],
        rtol=1e-4, atol=1e-5,
    )
    again = Simplify()(result.model)
    assert not again.modified and again.model is result.model


def test_output_with_more_nodes_is_refused() -> None:
    # Rule 8's guard on onnxsim's real output: with nothing skipped, onnxsim grows the encoder.
    import onnxsim

    from graphfix.models.transformer import transformer_encoder

    model = transformer_encoder()
    grown, _ = onnxsim.simplify(_copy(model), check_n=0)
    if len(grown.graph.node) <= len(model.graph.node):
        pytest.skip(f"onnxsim {onnxsim.__version__} does not add nodes to the encoder")
    result = Simplify(skipped_optimizers=())(model)
    assert result.skipped is not None and not result.modified
    assert result.model is model
    assert f"{len(model.graph.node)} -> {len(grown.graph.node)}" in result.skipped
    assert "Gemm +12" in result.skipped and result.skipped in result.warnings
    assert result.stats["refused_nodes_after"] == len(grown.graph.node)


def test_many_small_folds_over_budget_fall_back_to_no_folding(ort_run, rng) -> None:
    result = Simplify()(_copy(MANY_SMALL_FOLDS))
    assert result.skipped is None and result.modified
    ops = Counter(_ops(result.model))
    assert ops["ConstantOfShape"] == 40 and ops["Add"] == 40
    assert "Neg" not in ops  # dead code still goes
    assert result.model.ByteSize() <= MANY_SMALL_FOLDS.ByteSize() + 64 * 1024
    assert result.stats["refused_folds"] == 40
    assert result.stats["refused_fold_bytes"] >= 40 * 4096
    onnx.checker.check_model(result.model, full_check=True)
    x = rng.standard_normal((3, 1024)).astype(np.float32)
    np.testing.assert_allclose(
        ort_run(result.model, {"x": x})["y"], ort_run(MANY_SMALL_FOLDS, {"x": x})["y"],
        rtol=1e-6, atol=1e-6,
    )
    unbounded = Simplify(max_growth=None)(_copy(MANY_SMALL_FOLDS))
    assert "ConstantOfShape" not in _ops(unbounded.model)


def test_skips_when_memory_for_onnxsim_is_not_available() -> None:
    model = _copy(FOLD)
    result = Simplify(memory_limit=16)(model)
    assert result.model is model and not result.modified
    assert result.skipped is not None and "GiB are available" in result.skipped


def test_shape_annotations_on_a_large_graph_are_not_growth() -> None:
    # 2,000 nodes and almost no weights: onnxsim records the shape of every tensor
    # (value_info), which more than doubles the file without replicating any data.
    h = onnx.helper
    nodes = [h.make_node("Neg", [f"t{i}"], [f"t{i + 1}"]) for i in range(2000)]
    nodes[0].input[0] = "x"
    nodes.append(h.make_node("Abs", ["x"], ["dead"]))
    graph = h.make_graph(
        nodes, "chain", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 4])],
        [h.make_tensor_value_info("t2000", onnx.TensorProto.FLOAT, ["N", 4])],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    result = Simplify()(model)
    assert result.skipped is None and result.modified
    assert "Abs" not in _ops(result.model)
    assert result.stats["bytes_after"] > 1.5 * result.stats["bytes_before"]
    assert result.stats["tensor_bytes_after"] <= result.stats["tensor_bytes_before"]


def test_worker_is_reused_and_replaced_after_a_crash() -> None:
    with Simplify() as pass_:
        worker = pass_._worker
        assert worker is not None
        assert pass_(_copy(FOLD)).modified
        process = worker._process
        assert process is not None and process.proc.poll() is None
        assert pass_(_copy(FOLD)).modified
        assert worker._process is process  # one interpreter start for both runs
        os.kill(process.proc.pid, signal.SIGKILL)  # as a segfault in onnxsim would
        crashed = pass_(_copy(FOLD))
        assert crashed.skipped and "crashed" in crashed.skipped
        assert worker._process is None and process.proc.poll() is not None
        assert not process.folder.exists()
        again = pass_(_copy(FOLD))  # a new worker takes over
        assert again.modified and again.skipped is None
        assert worker._process is not None and worker._process is not process
    assert pass_._worker is None  # leaving the pass stops its worker


def _large_model() -> onnx.ModelProto:
    """FOLD with an initializer no node reads, just over the size of a model after which a
    worker is stopped (KEEP_WORKER_BELOW): onnxsim drops it at once."""
    model = _copy(FOLD)
    size = KEEP_WORKER_BELOW // 4 + 2**16
    model.graph.initializer.append(
        onnx.numpy_helper.from_array(np.full(size, 0.5, np.float32), "unused"))
    return model


def test_a_shared_worker_stopped_for_its_memory_starts_again() -> None:
    # Every job counts as large: the worker is stopped after it, and a shared one (the caller
    # optimizes more models) is started again at once rather than at the next model.
    with OnnxsimWorker(stop_above=0) as worker:
        first = worker._process
        assert Simplify(worker=worker)(_copy(FOLD)).modified
        assert first is not None and first.proc.wait(timeout=10) == 0
        second = worker._process
        assert second is not None and second is not first and second.proc.poll() is None
        assert Simplify(worker=worker)(_copy(FOLD)).modified
    # A pass's own worker is not started again: the pass stops it when the run ends. Its
    # worker stops after a model over KEEP_WORKER_BELOW bytes (the default of stop_above);
    # every weight crosses to it (rule 10 off), the large one included.
    with Simplify(keep_weights_here=False) as pass_:
        own = pass_._worker
        assert pass_(_large_model()).modified and own is not None and own._process is None


def test_entering_starts_the_worker_that_the_run_then_uses() -> None:
    with Simplify() as pass_:
        worker = pass_._worker
        assert worker is not None and worker._process is not None
        process = worker._process
        assert process.proc.poll() is None
        assert pass_(_copy(FOLD)).modified
        assert worker._process is process
    assert process.proc.poll() is not None and not process.folder.exists()

def _weights_computed_at_load(kib: list[int]) -> onnx.ModelProto:
    """A model adding to each of its inputs a ConstantOfShape vector of the size given (KiB)."""
    inputs = ", ".join(f"float[N,{size * 256}] x{i}" for i, size in enumerate(kib))
    outputs = ", ".join(f"float[N,{size * 256}] y{i}" for i, size in enumerate(kib))
    body = "".join(f"    s{i} = Constant <value = int64[1] {{{size * 256}}}> ()\n"
                   f"    c{i} = ConstantOfShape <value = float[1] {{{i + 1}}}> (s{i})\n"
                   f"    y{i} = Add (x{i}, c{i})\n" for i, size in enumerate(kib))
    return onnx.parser.parse_model(f'<ir_version: 8, opset_import: ["" : 17]>\n'
                                   f"g ({inputs}) => ({outputs}) {{\n{body}}}")


def test_a_second_run_refuses_the_same_folds() -> None:
    # 50 + 10 + 10 KiB of weights computed at load: no bounded run fits 64 KiB of growth, and
    # a second run (its model a little bigger) must not find room for more.
    model = _weights_computed_at_load([50, 10, 10])
    onnx.checker.check_model(model, full_check=True)
    first = Simplify()(_copy(model))
    assert Counter(_ops(first.model))["ConstantOfShape"] == 3
    again = Simplify()(_copy(first.model))
    assert not again.modified, _ops(again.model)


def _attention_block() -> onnx.ModelProto:
    """Self-attention written out (MatMul, Reshape, Transpose, Softmax): what onnxsim's
    ``fuse_attention`` turns into ONNX Runtime's com.microsoft Attention."""
    rng = np.random.default_rng(0)
    b, s, heads, d = 2, 5, 2, 4
    e = heads * d
    h = onnx.helper
    weights = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in
               [("wq", (e, e)), ("wk", (e, e)), ("wv", (e, e)), ("bq", (e,)), ("bk", (e,)),
                ("bv", (e,)), ("wo", (e, e)), ("bo", (e,))]}
    weights.update(split=np.array([b, s, heads, d], np.int64), merge=np.array([b, s, e], np.int64),
                   scale=np.array(np.sqrt(d), np.float32))
    nodes = []
    for p, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        nodes += [h.make_node("MatMul", ["x", f"w{p}"], [f"{p}m"]),
                  h.make_node("Add", [f"{p}m", f"b{p}"], [f"{p}a"]),
                  h.make_node("Reshape", [f"{p}a", "split"], [f"{p}r"]),
                  h.make_node("Transpose", [f"{p}r"], [f"{p}t"], perm=perm)]
    nodes += [h.make_node("MatMul", ["qt", "kt"], ["scores"]),
              h.make_node("Div", ["scores", "scale"], ["scaled"]),
              h.make_node("Softmax", ["scaled"], ["probs"], axis=-1),
              h.make_node("MatMul", ["probs", "vt"], ["context"]),
              h.make_node("Transpose", ["context"], ["ct"], perm=[0, 2, 1, 3]),
              h.make_node("Reshape", ["ct", "merge"], ["merged"]),
              h.make_node("MatMul", ["merged", "wo"], ["om"]),
              h.make_node("Add", ["om", "bo"], ["y"])]
    graph = h.make_graph(
        nodes, "attention", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [b, s, e])],
        [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [b, s, e])],
        [onnx.numpy_helper.from_array(v, k) for k, v in weights.items()])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def test_no_fusion_into_onnx_runtime_contrib_ops(ort_run, rng) -> None:
    model = _attention_block()
    result = Simplify()(_copy(model))
    assert {n.domain for n in result.model.graph.node} <= {""}
    x = rng.standard_normal((2, 5, 8)).astype(np.float32)
    np.testing.assert_allclose(ort_run(result.model, {"x": x})["y"],
                               ort_run(model, {"x": x})["y"], rtol=1e-4, atol=1e-5)
    # The guard behind the skipped optimizers: an output with a runtime's own op is not taken.
    guarded = Simplify(skipped_optimizers=())(_copy(model))
    if guarded.skipped is None:
        pytest.skip("this onnxsim does not fuse the block into com.microsoft Attention")
    assert "com.microsoft::Attention" in guarded.skipped and not guarded.modified


@pytest.mark.parametrize("output, body, feed", [
    # Exp overflows to a tie at inf past 88.7: the first maximum wins, not the largest input
    ("int64[N] y", "e = Exp (x)\n        y = ArgMax <axis = 1, keepdims = 0> (e)",
     [[100.0, 200.0, 1.0, 2.0]]),
    # the softmax underflows to 0, its log to -inf; LogSoftmax computes -120
    ("float[N, 4] y", "s = Softmax <axis = 1> (x)\n        y = Log (s)",
     [[0.0, 120.0, 1.0, 2.0]]),
])
def test_rewrites_that_compute_otherwise_past_parity_s_inputs_are_not_made(
        output: str, body: str, feed: list[list[float]], ort_run) -> None:
    model = onnx.parser.parse_model(f"""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4] x) => ({output}) {{
        {body}
    }}""")
    result = Simplify()(_copy(model))
    assert result.skipped is None
    x = np.array(feed, np.float32)
    np.testing.assert_array_equal(ort_run(result.model, {"x": x})["y"],
                                  ort_run(model, {"x": x})["y"])


def _weights_model(rng: np.random.Generator) -> onnx.ModelProto:
    """Rule 10's cases in one graph: ``w`` is only multiplied by the input (crosses as a typed
    input), ``t`` is transposed (folded: must cross), ``d1``/``d2`` are equal (merged: must
    cross), the convolution's weight feeds a BatchNormalization (fused: must cross), and the
    embedding table ``e`` is looked up at computed indices (crosses)."""
    from onnx import helper, numpy_helper

    def init(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    d = init("d1", (128, 128))
    inits = [init("w", (128, 128)), init("t", (128, 128)), d,
             numpy_helper.from_array(numpy_helper.to_array(d), "d2"),
             init("cw", (64, 8, 3, 3)), init("e", (300, 64)),
             *(numpy_helper.from_array(v, n) for n, v in (
                 ("scale", rng.uniform(0.5, 1.5, 64).astype(np.float32)),
                 ("bias", rng.standard_normal(64).astype(np.float32)),
                 ("mean", rng.standard_normal(64).astype(np.float32)),
                 ("var", rng.uniform(0.5, 1.5, 64).astype(np.float32))))]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["a"]),
        helper.make_node("Transpose", ["t"], ["tt"]),
        helper.make_node("MatMul", ["a", "tt"], ["b"]),
        helper.make_node("MatMul", ["b", "d1"], ["c1"]),
        helper.make_node("MatMul", ["b", "d2"], ["c2"]),
        helper.make_node("Add", ["c1", "c2"], ["y"]),
        helper.make_node("Conv", ["img", "cw"], ["conv"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["conv", "scale", "bias", "mean", "var"], ["z"]),
        helper.make_node("Gather", ["e", "ids"], ["g"]),
    ]
    graph = helper.make_graph(
        nodes, "weights",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 128]),
         helper.make_tensor_value_info("img", onnx.TensorProto.FLOAT, [1, 8, 6, 6]),
         helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, ["N", 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 128]),
         helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [1, 64, 6, 6]),
         helper.make_tensor_value_info("g", onnx.TensorProto.FLOAT, ["N", 4, 64])],
        inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_weights_onnxsim_cannot_use_stay_in_this_process(ort_run, rng) -> None:
    model = _weights_model(rng)
    assert stand_in_names(model.graph) == ["w", "e"]
    result = Simplify()(_copy(model))
    assert result.modified and result.stats["stand_ins"] == 2
    ops = Counter(_ops(result.model))
    # Everything onnxsim does with the weights still happens: the transpose is folded, the
    # equal weights are merged, the normalization is fused into the convolution.
    assert ops["Transpose"] == 0 and ops["BatchNormalization"] == 0
    names = [t.name for t in result.model.graph.initializer]
    assert not {"d1", "d2"} <= set(names)
    # The weights that stayed here come back byte for byte, as initializers, not inputs.
    before = {t.name: t.raw_data for t in model.graph.initializer}
    after = {t.name: t for t in result.model.graph.initializer}
    assert after["w"].raw_data == before["w"] and after["e"].raw_data == before["e"]
    assert [i.name for i in result.model.graph.input] == ["x", "img", "ids"]
    onnx.checker.check_model(result.model, full_check=True)
    feeds = {"x": rng.standard_normal((3, 128)).astype(np.float32),
             "img": rng.standard_normal((1, 8, 6, 6)).astype(np.float32),
             "ids": rng.integers(0, 300, (3, 4)).astype(np.int64)}
    want, got = ort_run(model, feeds), ort_run(result.model, feeds)
    for name in ("y", "z", "g"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-3)


def test_stand_ins_change_nothing_onnxsim_writes(rng) -> None:
    # The same model with rule 10 off: onnxsim's output is the same graph and tensors.
    from graphfix.passes._compare import same_graph

    model = _weights_model(rng)
    with_stand_ins = Simplify()(_copy(model)).model
    without = Simplify(keep_weights_here=False)(_copy(model)).model
    assert same_graph(with_stand_ins.graph, without.graph, names=False)


def _conv_norm(rng: np.random.Generator, *, bias: bool, shared: bool) -> onnx.ModelProto:
    """Conv (64 KiB of weights or more) -> BatchNormalization; with ``shared`` the convolution's
    output is also a graph output, so the normalization cannot be folded."""
    from onnx import helper, numpy_helper

    def arr(*shape: int, low: float = -1.0) -> np.ndarray:
        return rng.uniform(low, 1.0, shape).astype(np.float32)

    inits = [numpy_helper.from_array(arr(64, 32, 3, 3), "w"),
             *(numpy_helper.from_array(v, n) for n, v in (
                 ("scale", arr(64, low=0.5)), ("shift", arr(64)), ("mean", arr(64)),
                 ("var", arr(64, low=0.5))))]
    conv_inputs = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(arr(64), "b"))
        conv_inputs.append("b")
    outputs = [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, 64, 8, 8])]
    if shared:
        outputs.append(helper.make_tensor_value_info("c", onnx.TensorProto.FLOAT, None))
    graph = helper.make_graph(
        [helper.make_node("Conv", conv_inputs, ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["y"],
                          epsilon=1e-3)],
        "conv_norm",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 32, 8, 8])],
        outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("bias", [True, False])
def test_batch_norm_is_folded_here_and_the_fused_weights_stay(ort_run, rng, bias) -> None:
    model = _conv_norm(rng, bias=bias, shared=False)
    result = Simplify()(_copy(model))
    assert _ops(result.model) == ["Conv"] and result.stats["stand_ins"] == 1
    assert len(model.graph.node) == 2  # the caller's model is not changed
    x = rng.standard_normal((2, 32, 8, 8)).astype(np.float32)
    want, got = ort_run(model, {"x": x})["y"], ort_run(result.model, {"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    onnx.checker.check_model(result.model, full_check=True)


def test_batch_norm_after_a_conv_read_elsewhere_stays() -> None:
    from graphfix.passes._batchnorm import fold_batch_norms

    model = _conv_norm(np.random.default_rng(1), bias=True, shared=True)
    assert fold_batch_norms(_copy(model)) == 0


def test_products_of_one_tensor_keep_their_weights_in_view(rng) -> None:
    # onnxsim's fuse_qkv concatenates the weights of products that read one tensor (a
    # transformer's query, key and value projections): those weights must cross.
    from onnx import helper, numpy_helper

    weights = [numpy_helper.from_array(rng.standard_normal((128, 128)).astype(np.float32), n)
               for n in ("q", "k", "o")]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "q"], ["a"]),
         helper.make_node("MatMul", ["x", "k"], ["b"]),
         helper.make_node("Add", ["a", "b"], ["s"]),
         helper.make_node("MatMul", ["s", "o"], ["y"])],
        "qk", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 128])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 128])], weights)
    assert stand_in_names(graph) == ["o"]


def test_weights_that_cross_unchanged_point_at_their_file_again(tmp_path, rng) -> None:
    # ``w`` is added to the input (an Add crosses: onnxsim may read its operand) and comes back
    # unchanged; ``w`` stays in the model's data file, so the result refers to it there again
    # rather than hold the copy read back from onnxsim's files.
    from onnx import helper, numpy_helper

    from graphfix.model_io import load, tensor_value

    w = rng.standard_normal((128, 256)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(
            np.ones(1, np.float32))),
         helper.make_node("Add", ["one", "one"], ["two"]),
         helper.make_node("Add", ["x", "w"], ["a"]),
         helper.make_node("Mul", ["a", "two"], ["y"])],
        "relink", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 128, 256])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 128, 256])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save_model(model, str(tmp_path / "m.onnx"), save_as_external_data=True,
                    location="m.data", size_threshold=1024)
    lazy = load(tmp_path / "m.onnx", load_external_data=False)
    result = Simplify()(lazy)
    assert result.modified and "Add" in _ops(result.model) and len(_ops(result.model)) == 2
    (out,) = [t for t in result.model.graph.initializer if t.name == "w"]
    assert out.data_location == onnx.TensorProto.EXTERNAL
    np.testing.assert_array_equal(tensor_value(out), w)


@pytest.mark.parametrize("options", [
    {"skipped_optimizers": "fuse_qkv"}, {"skipped_optimizers": [""]},
    {"skipped_optimizers": 3}, {"memory_limit": 0},
    {"memory_limit": True}, {"keep_weights_here": 1}, {"fold_batch_norms_here": None}])
def test_bad_options_of_the_rules(options: dict) -> None:
    with pytest.raises(PassError):
        Simplify(**options)


@pytest.mark.parametrize("options", [
    {"command": "python"}, {"command": []}, {"command": ["python", 3]}, {"command": 3},
    {"stop_above": -1},
    {"stop_above": 1.5}])
def test_bad_worker_options(options: dict) -> None:
    with pytest.raises(PassError):
        OnnxsimWorker(**options)


def test_a_worker_command_that_cannot_run_is_one_error(tmp_path) -> None:
    worker = OnnxsimWorker(command=[str(tmp_path / "no-such-python"), "-c", WORKER_CODE])
    with pytest.raises(PassError, match="cannot run"):
        worker.start()


def test_the_runs_of_a_shared_worker_block_use_its_worker_and_their_own_options() -> None:
    import graphfix
    from graphfix.passes.simplify import shared_worker

    # A worker that dies at once: a run that uses it reports onnxsim's crash.
    dying = OnnxsimWorker(command=[sys.executable, "-c", _FAILING_WORKERS["abort"]])
    with dying, shared_worker(dying):
        crashed = graphfix.optimize(_copy(FOLD), passes=["simplify"], verify=False)
    (report,) = crashed.report.passes
    assert report.skipped is not None and "crashed" in report.skipped
    # Outside the block, the runs use the worker they used before it (blocks nest).
    (report,) = graphfix.optimize(_copy(FOLD), passes=["simplify"], verify=False).report.passes
    assert report.modified and report.skipped is None
    # The run's own options still configure its pass: nothing is refused without max_growth.
    with OnnxsimWorker() as worker, shared_worker(worker):
        result = graphfix.optimize(_copy(EXPAND), passes=["simplify"], verify=False,
                                   max_growth=None)
    (report,) = result.report.passes
    assert report.options["max_growth"] is None and "Expand" not in _ops(result.model)
    with pytest.raises(PassError):
        with shared_worker("worker"):  # type: ignore[arg-type]
            pass


def test_an_unnamed_dimension_stays_unnamed() -> None:
    """onnxsim names an output's unknown batch ``unk__0``; the signature keeps it unnamed."""
    from onnx import TensorProto, helper, numpy_helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 3])
    weights = [numpy_helper.from_array(np.ones((4, 3), np.float32), "w"),
               numpy_helper.from_array(np.ones(3, np.float32), "b")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Identity", ["r"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], weights),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    result = Simplify()(model)
    assert result.modified
    for value in (*result.model.graph.input, *result.model.graph.output):
        batch = value.type.tensor_type.shape.dim[0]
        assert not batch.HasField("dim_param") and not batch.HasField("dim_value"), value.name


def test_a_pad_of_minus_infinity_before_a_max_pool_is_not_fused_into_its_pads():
    """ONNX Runtime's MaxPool starts a padded window from -3.4e38: a window of only -inf (a
    masked feature map) gives -3.4e38 where the Pad's -inf is kept. onnxsim's fuse_pad_into_pool
    is left out where a Pad feeds a MaxPool."""
    from graphfix.passes._measuring import run_outputs

    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 18]>
    g (float[N,2,H,W] x) => (float[N,2,P,Q] y)
      <int64[8] p = {0, 0, 1, 1, 0, 0, 1, 1}, float v = {-inf}> {
        padded = Pad <mode = "constant"> (x, p, v)
        y = MaxPool <kernel_shape = [2, 2]> (padded)
    }""")
    result = Simplify()(_copy(model))
    assert [n.op_type for n in result.model.graph.node] == ["Pad", "MaxPool"]
    x = {"x": np.array([[1.0, -np.inf], [-np.inf, -np.inf]], np.float32)[None, None].repeat(2, 1)}
    [written] = run_outputs(result.model, [x], ["y"])[0].values()
    assert written[0, 0, 2, 2] == -np.inf


@pytest.mark.parametrize("op, opset, extra", [
    # ONNX Runtime's transformers optimizer writes LayerNormalization into opset-16 models
    ("LayerNormalization", 16, ", bias"),
    # an RMS norm ONNX Runtime runs in ONNX's domain, which ONNX never defined
    ("SimplifiedLayerNormalization", 17, ""),
])
def test_an_op_onnx_does_not_define_at_the_opset_but_onnx_runtime_runs_crosses_apart(
        op, opset, extra):
    import onnxruntime as ort

    model = onnx.parser.parse_model(f"""
    <ir_version: 8, opset_import: ["" : {opset}]>
    g (float[N,8] x) => (float[N,8] y) {{
        a = Constant <value = float[8] {{1, 2, 3, 4, 5, 6, 7, 8}}> ()
        b = Add (a, a)
        scale = Constant <value = float[8] {{1, 1, 1, 1, 2, 2, 2, 2}}> ()
        bias = Constant <value = float[8] {{0, 0, 0, 0, 1, 1, 1, 1}}> ()
        m = Mul (x, b)
        y = {op} <axis = -1, epsilon = 0.00001> (m, scale{extra})
    }}""")
    before = model.SerializeToString()
    result = Simplify()(model)
    assert model.SerializeToString() == before  # the input as it was
    assert result.modified and not result.skipped, result.warnings
    assert result.stats["runtime_ops_apart"] == 1
    out = result.model
    assert [n.op_type for n in out.graph.node] == ["Mul", op]  # the Add folded
    assert out.graph.node[-1].domain == ""
    assert [(o.domain, o.version) for o in out.opset_import] == [("", opset)]
    feed = {"x": np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)}

    def run(m: onnx.ModelProto) -> np.ndarray:
        return ort.InferenceSession(m.SerializeToString(), providers=[
            "CPUExecutionProvider"]).run(None, feed)[0]

    np.testing.assert_array_equal(run(out), run(onnx.load_from_string(before)))
