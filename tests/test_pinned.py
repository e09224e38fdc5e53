"""Feeds from the model's own facts: sizes its weights fix, indices within what they index."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from graphfix.feeds import input_specs, make_feeds
from graphfix.validate.parity import check_parity
from graphfix.pinned import baked_sizes, pinned_sizes


def _with(text: str, **weights: np.ndarray) -> onnx.ModelProto:
    model = onnx.parser.parse_model(text)
    model.graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in weights.items())
    onnx.checker.check_model(model, full_check=True)
    return model


def _weights(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return (rng.standard_normal(shape) * 0.1).astype(np.float32)


@pytest.mark.parametrize("op, gates", [("LSTM", 4), ("GRU", 3), ("RNN", 1)])
def test_an_rnn_is_fed_the_input_size_of_its_weights(op: str, gates: int, rng) -> None:
    # An audio model's features and state: nothing in the signature says 266 or 24.
    state = "float[D, B, H] h0, float[D, B, H] c0" if op == "LSTM" else "float[D, B, H] h0"
    model = onnx.parser.parse_model(f"""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[T, B, F] x, {state}) => (float[T, 1, B, 24] y) {{
        y = {op} <hidden_size = 24> (x, W, R)
    }}""")
    # no bias, no sequence_lens: the initial state(s) after them
    model.graph.node[0].input.extend(["", "", "h0"] + (["c0"] if op == "LSTM" else []))
    model.graph.initializer.extend([
        numpy_helper.from_array(_weights(rng, 1, gates * 24, 266), "W"),
        numpy_helper.from_array(_weights(rng, 1, gates * 24, 24), "R")])
    onnx.checker.check_model(model, full_check=True)
    assert pinned_sizes(model) == {"x": {2: 266}, "h0": {0: 1, 2: 24},
                                   **({"c0": {0: 1, 2: 24}} if op == "LSTM" else {})}
    for feed in make_feeds(model):
        assert feed["x"].shape[2] == 266 and feed["h0"].shape[1] == feed["x"].shape[1]
    assert check_parity(model, model).passed


def test_an_rnn_behind_a_transpose_and_a_cast(rng) -> None:
    # Batch-first features moved to the RNN's layout: the pinned axis moves with them.
    model = _with("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (double[B, T, F] x) => (float[T, 1, B, 16] y) {
        f = Cast <to = 1> (x)
        t = Transpose <perm = [1, 0, 2]> (f)
        y = GRU <hidden_size = 16> (t, W, R)
    }""", W=_weights(rng, 1, 48, 40), R=_weights(rng, 1, 48, 16))
    assert pinned_sizes(model) == {"x": {2: 40}}
    assert check_parity(model, model).passed


def test_conv_channels_matmul_rows_and_layer_norm_widths(rng) -> None:
    model = _with("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, C, H, W] image, float[N, S, D] tokens, float[N, E] vector)
        => (float[N, 8, H, W] a, float[N, S, 12] b, float[N, 6] c) {
        a = Conv <pads = [1, 1, 1, 1], group = 2> (image, w)
        n = LayerNormalization <axis = -1> (tokens, scale, bias)
        b = MatMul (n, m)
        c = Gemm <transB = 1> (vector, g)
    }""", w=_weights(rng, 8, 3, 3, 3), scale=np.ones(20, np.float32),
        bias=np.zeros(20, np.float32), m=_weights(rng, 20, 12), g=_weights(rng, 6, 5))
    assert pinned_sizes(model) == {"image": {1: 6}, "tokens": {2: 20}, "vector": {1: 5}}
    assert check_parity(model, model).passed


def test_sizes_that_disagree_stay_free(rng) -> None:
    model = _with("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, K] x) => (float[N, 3] y, float[N, 4] z) {
        y = MatMul (x, a)
        z = MatMul (x, b)
    }""", a=_weights(rng, 5, 3), b=_weights(rng, 7, 4))
    assert pinned_sizes(model) == {}


def test_an_input_added_to_a_computed_tensor_takes_the_size_inference_proves(rng) -> None:
    """A class prior [N, C] added to a classifier's logits [N, 5]: C must be 5 (or 1). The
    search went up the ladder with the image's sizes to 16384 x 16384 (9 GB, over a minute)
    before it reached 1 at the ladder's end."""
    model = _with("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 3, H, W] image, float[N, K] prior) => (float[N, K2] y) {
        pooled = GlobalAveragePool (image)
        flat = Flatten (pooled)
        logits = Gemm <transB = 1> (flat, w)
        s = Add (logits, prior)
        y = LogSoftmax (s)
    }""", w=_weights(rng, 5, 3))
    assert pinned_sizes(model) == {"prior": {1: 5}}
    for feed in make_feeds(model, runs=2):
        assert feed["prior"].shape[1] == 5 and feed["image"].shape[2] <= 64


def test_a_declared_size_of_a_computed_tensor_pins_nothing(rng) -> None:
    """An exporter may declare the sizes it traced (value_info): only what inference proves
    pins an input's size."""
    model = _with("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, D] x, float[N, E] y) => (float[N, E] z) {
        t = Relu (x)
        z = Add (t, y)
    }""")
    model.graph.value_info.append(onnx.helper.make_tensor_value_info(
        "t", onnx.TensorProto.FLOAT, ["N", 7]))
    assert pinned_sizes(model) == {}


def test_a_named_dimension_pinned_once_holds_for_every_input(rng) -> None:
    model = _with("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, D] x, float[N, D] y) => (float[N, 3] z) {
        s = Add (x, y)
        z = MatMul (s, w)
    }""", w=_weights(rng, 9, 3))
    [feed] = make_feeds(model, runs=1)
    assert feed["x"].shape[1] == feed["y"].shape[1] == 9


def test_segment_ids_stay_inside_the_graphs_they_index(rng) -> None:
    # A graph net's batch vector scatters node features into a tensor of graphs whose count is
    # an input's dynamic axis: the ids must stay below the size that axis gets.
    model = _with("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[G, 4] graph_slots, float[M, 4] x, int64[M] batch) => (float[G, 4] y) {
        axis = Constant <value = int64[1] {1}> ()
        u = Unsqueeze (batch, axis)
        shape = Shape (x)
        ids = Expand (u, shape)
        y = ScatterElements <axis = 0, reduction = "add"> (graph_slots, ids, x)
    }""")
    [spec] = [s for s in input_specs(model) if s.name == "batch"]
    assert spec.index_of == "G"
    for feed in make_feeds(model, runs=2):
        assert feed["batch"].max() < feed["graph_slots"].shape[0]
    assert check_parity(model, model).passed


def test_segment_ids_into_a_table_made_from_an_inputs_shape(rng) -> None:
    # A graph net exported by torch: the table is ConstantOfShape(Shape(graph_slots)), and
    # the node ids of edge_index reach a scatter through a Gather of one row.
    model = _with("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[num_graphs] graph_slots, int64[num_nodes] batch, float[num_nodes, 4] x,
       int64[2, num_edges] edge_index) => (float[num_graphs] y, float[num_nodes, 4] z) {
        shape = Shape (graph_slots)
        zeros = ConstantOfShape (shape)
        ones = Shape (batch)
        weight = ConstantOfShape <value = float[1] {1}> (ones)
        y = ScatterElements <axis = 0, reduction = "add"> (zeros, batch, weight)
        row = Constant <value = int64 {0}> ()
        source = Gather <axis = 0> (edge_index, row)
        z = Gather <axis = 0> (x, source)
    }""")
    specs = {s.name: s for s in input_specs(model)}
    assert specs["batch"].index_of == "num_graphs"
    assert specs["edge_index"].index_of == "num_nodes"
    for feed in make_feeds(model, runs=2):
        assert feed["batch"].max() < feed["graph_slots"].shape[0]
        assert feed["edge_index"].max() < feed["x"].shape[0]
    assert check_parity(model, model).passed


def test_gather_nd_indices_stay_inside_every_leading_axis(rng) -> None:
    model = _with("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (int64[K, 2] idx) => (float[K] y) {
        y = GatherND (table, idx)
    }""", table=_weights(rng, 3, 7))
    [feed] = make_feeds(model, runs=1)
    assert feed["idx"].max() < 3
    assert check_parity(model, model).passed


def _baked_length(length: int) -> onnx.ModelProto:
    """What torch's legacy exporter writes for nn.MultiheadAttention's key: the sequence
    length it traced, baked into the Reshape's target beside the batch read from the shape."""
    return _with(f"""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[batch, seq, 8] x) => (float[{length}, batch, 8] y) {{
        t = Transpose <perm = [1, 0, 2]> (x)
        shape = Shape (t)
        index = Constant <value = int64[1] {{1}}> ()
        b = Gather <axis = 0> (shape, index)
        traced = Constant <value = int64[1] {{{length}}}> ()
        width = Constant <value = int64[1] {{8}}> ()
        target = Concat <axis = 0> (traced, b, width)
        y = Reshape (t, target)
    }}""")


def test_a_sequence_length_baked_into_a_reshape_is_tried_when_no_ladder_size_runs() -> None:
    model = _baked_length(10)
    assert baked_sizes(model) == (10, 8, 80)  # each size, then their product
    result = check_parity(model, model)
    assert result.passed
    assert result.runs == [{"x": "float32[1, 10, 8]"}, {"x": "float32[2, 10, 8]"}]  # batch varies


def test_a_benchmark_feeds_sizes_both_models_take() -> None:
    """A candidate that runs at any length (its attention fused, say) against a baseline that
    runs only at the length baked into its Reshape: the benchmark's inputs fit both."""
    import graphfix

    baseline = _baked_length(10)
    candidate = _with("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[batch, seq, 8] x) => (float[seq, batch, 8] y) {
        y = Transpose <perm = [1, 0, 2]> (x)
    }""")
    result = graphfix.benchmark(candidate, baseline=baseline, warmup=1, runs=5)
    assert result.input_shapes["x"][1] == 10


def test_ids_compared_with_a_padding_id_are_the_tables_ids_some_of_them_the_padding(rng) -> None:
    """input_ids != pad, as sequence classifiers and masked pooling write it: the ids were all
    the padding id, and a model whose other embedding rows are doubled passed as the same."""
    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (int64[batch, seq] input_ids) => (float[batch, 4] y) {
        pad = Constant <value = int64 {0}> ()
        is_pad = Equal (input_ids, pad)
        keep = Not (is_pad)
        weight = Cast <to = 1> (keep)
        rows = Gather (table, input_ids)
        axes = Constant <value = int64[1] {2}> ()
        weights = Unsqueeze (weight, axes)
        kept = Mul (rows, weights)
        one = Constant <value = int64[1] {1}> ()
        y = ReduceSum <keepdims = 0> (kept, one)
    }"""
    table = _weights(rng, 50, 4)
    model = _with(text, table=table)
    [spec] = input_specs(model)
    assert spec.index_rows == 50 and spec.choices == (0,)
    for feed in make_feeds(model, runs=2):
        ids = feed["input_ids"]
        assert ids.min() >= 0 and ids.max() < 50 and (ids != 0).mean() > 0.5
        assert (ids == 0).any(axis=-1).any() or ids.size < 8  # some padding too
    doubled = table.copy()
    doubled[1:] *= 2
    assert not check_parity(model, _with(text, table=doubled)).passed


def test_ids_that_reach_their_table_through_a_select_written_as_arithmetic_are_its_ids(
        rng) -> None:
    """tf2onnx writes a Keras Embedding's wrap of negative ids as arithmetic on integers
    (c * (ids + rows) + (1 - c) * ids, with c a condition cast to a number), and mask_zero as
    ids == 0: the walk stopped at the first Add, the ids were all the compared 0, and parity
    held only vacuously on an output of zeros."""
    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (int32[batch, seq] ids) => (float[batch, seq, 4] y) {
        rows = Constant <value = int32 {50}> ()
        zero = Constant <value = float {0}> ()
        pad = Constant <value = int32 {0}> ()
        real = Cast <to = 1> (ids)
        negative = Less (real, zero)
        wrap = Cast <to = 6> (negative)
        positive = Not (negative)
        keep = Cast <to = 6> (positive)
        shifted = Add (ids, rows)
        wrapped = Mul (wrap, shifted)
        kept = Mul (ids, keep)
        index = Add (wrapped, kept)
        vectors = Gather (table, index)
        is_pad = Equal (ids, pad)
        valid = Not (is_pad)
        weight = Cast <to = 1> (valid)
        axes = Constant <value = int64[1] {2}> ()
        weights = Unsqueeze (weight, axes)
        y = Mul (vectors, weights)
    }"""
    table = _weights(rng, 50, 4)
    model = _with(text, table=table)
    [spec] = input_specs(model)
    assert spec.index_rows == 50 and spec.choices == (0,)
    for feed in make_feeds(model, runs=2):
        ids = feed["ids"]
        assert ids.min() >= 0 and ids.max() < 50 and (ids != 0).mean() > 0.5
    doubled = table.copy()
    doubled[1:] *= 2
    assert not check_parity(model, _with(text, table=doubled)).passed


@pytest.mark.parametrize("offset, rows", [(2, 8), (0, 10)])
def test_an_index_offset_by_a_constant_is_bounded_by_the_rows_left(offset: int, rows: int
                                                                   ) -> None:
    """Positions offset into a table of positions (BART's learned positions start at 2):
    ids up to the table's last row would index past it; a Where's branches keep the index."""
    text = f"""
    <ir_version: 8, opset_import: ["" : 17]>
    g (int64[batch, seq] pos) => (float[batch, seq, 4] y) {{
        offset = Constant <value = int64 {{{offset}}}> ()
        zero = Constant <value = int64 {{0}}> ()
        shifted = Add (pos, offset)
        negative = Less (pos, zero)
        picked = Where (negative, zero, shifted)
        y = Gather (table, picked)
    }}"""
    model = _with(text, table=np.ones((10, 4), np.float32))
    [spec] = input_specs(model)
    assert spec.index_rows == rows
    for feed in make_feeds(model, runs=2):
        assert feed["pos"].max() < rows


def test_an_index_scaled_by_a_number_that_is_not_a_condition_is_not_bounded() -> None:
    """ids * 4 into a table of 12 rows: the table's rows say nothing of the ids' range."""
    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (int64[batch] ids, int64[batch] step) => (float[batch, 4] y) {
        scaled = Mul (ids, step)
        y = Gather (table, scaled)
    }"""
    model = _with(text, table=np.ones((12, 4), np.float32))
    assert all(spec.index_rows is None for spec in input_specs(model))


@pytest.mark.parametrize("kind", ["strings", "int64s"])
def test_a_one_hot_encoders_input_takes_its_categories(kind: str) -> None:
    """scikit-learn's OneHotEncoder (handle_unknown="error", its default) refuses a category it
    does not know: ONNX Runtime's 'Unknown Category' on every generated input, and a refusal
    that blamed sizes."""
    from onnx import TensorProto, helper

    strings = kind == "strings"
    cats = ["red", "green", "blue"] if strings else [3, 7, 11]
    encoder = helper.make_node("OneHotEncoder", ["column"], ["hot"], domain="ai.onnx.ml",
                               zeros=0, **{f"cats_{kind}": cats})
    pick = helper.make_node("Gather", ["x", "index"], ["column"], axis=1)
    model = helper.make_model(helper.make_graph(
        [pick, encoder], "g",
        [helper.make_tensor_value_info("x", TensorProto.STRING if strings else TensorProto.INT64,
                                       ["N", 2])],
        [helper.make_tensor_value_info("hot", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([0], np.int64), "index")]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])
    model.ir_version = 8
    [spec] = input_specs(model)
    assert spec.choices == tuple(sorted(cats))
    assert check_parity(model, model).passed


def test_a_dimension_one_input_alone_has_is_tried_at_one_before_the_ladder_grows() -> None:
    """An attention bias of its own heads dimension (broadcast over the scores' heads: 1 or
    the heads, a size nothing names): the search ended at the ladder's last size, 1 for every
    dimension, the sequence included, where attention is trivial. The heads are read from a
    shape at run time here, so that no inference proves them."""
    model = _with("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[b, s, 8] x, float[b, h, s, s] bias) => (float[b, 2, s, s] y) {
        t = Transpose <perm = [0, 2, 1]> (x)
        scores = MatMul (x, t)
        axes = Constant <value = int64[1] {1}> ()
        one = Unsqueeze (scores, axes)
        shape = Shape <start = 2, end = 3> (x)
        four = Constant <value = int64[1] {4}> ()
        count = Div (shape, four)
        unit = Constant <value = int64[1] {1}> ()
        reps = Concat <axis = 0> (unit, count, unit, unit)
        heads = Tile (one, reps)
        y = Add (heads, bias)
    }""")
    result = check_parity(model, model)
    assert result.passed
    assert [run["bias"] for run in result.runs] == ["float32[1, 1, 8, 8]", "float32[2, 1, 37, 37]"]


def test_sizes_given_for_one_input_are_tried_for_the_others_dimensions() -> None:
    # a query's width that a memory's rows must match, under another name
    model = _with("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[b, s, d] q, float[m, k] memory) => (float[b, s, k] y) {
        y = MatMul (q, memory)
    }""")
    result = check_parity(model, model, input_shapes={"q": [2, 5, 16]})
    assert result.passed and result.runs[0]["memory"].startswith("float32[16, ")


def test_a_length_a_reshape_cuts_into_rows_of_its_constants_is_tried() -> None:
    # x.view(b, -1, 2, 3): a multiple of 6, which the first ladder never reaches
    model = _with("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[b, length] x) => (float[b, m, 2, 3] y) {
        shape = Constant <value = int64[4] {0, -1, 2, 3}> ()
        y = Reshape (x, shape)
    }""")
    result = check_parity(model, model)
    assert result.passed and result.runs[0]["x"] == "float32[1, 6]"


def test_one_size_named_twice_is_found_with_every_dimension_at_one_size() -> None:
    # a LoRA pair as inputs: A's rank and B's rank are one size under two names, one of them
    # where a batch stands (the ladders gave 8 and 1, and the model was refused); the scale
    # names A's rank too, so that rank is no input's own
    model = _with("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[b, 16] x, float[16, r_a] lora_a, float[r_a] scale, float[r_b, 16] lora_b)
      => (float[b, 16] y) {
        down = MatMul (x, lora_a)
        scaled = Mul (down, scale)
        y = MatMul (scaled, lora_b)
    }""")
    result = check_parity(model, model)
    assert result.passed
    assert result.runs[0]["lora_a"] == "float32[16, 8]" and result.runs[0]["x"] == "float32[1, 16]"


def test_a_baseline_that_does_not_open_here_constrains_no_size() -> None:
    """A benchmark's sizes fit both models where the baseline opens on the CPU; one that
    holds a kernel only a GPU has (here: an op ONNX Runtime does not know) constrains
    nothing, and its own timed run says what it takes."""
    from graphfix.validate.bench import _baseline_run

    candidate = _baked_length(10)
    foreign = onnx.ModelProto()
    foreign.CopyFrom(candidate)
    foreign.graph.node.append(onnx.helper.make_node("GpuOnly", ["y"], ["z"], domain="x.gpu"))
    foreign.opset_import.append(onnx.helper.make_opsetid("x.gpu", 1))
    feed = {"x": np.zeros((1, 3, 8), np.float32)}  # a length the Reshape refuses
    assert _baseline_run(candidate, foreign, {})(feed) is None
    with pytest.raises(Exception, match="Reshape"):
        _baseline_run(candidate, candidate, {})(feed)
