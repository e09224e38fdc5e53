"""Input generation and real-data loading."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from graphfix.errors import ValidationInputError
from graphfix import feeds
from graphfix.models.transformer import transformer_encoder


def _model(text: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(text)


EMBED = _model("""
<ir_version: 8, opset_import: ["" : 17]>
g (int32[batch, seq] ids, int64[batch, seq] attention_mask, bool[3] flags, float[batch, 4] x)
  => (float[batch, seq, 8] y, float[batch, 4] z) <float[50, 8] table = {0.0}> {
    ids64 = Cast <to = 7> (ids)
    flat = Unsqueeze (ids64, axes)
    y0 = Gather (table, flat)
    y = Squeeze (y0, axes)
    z = Relu (x)
}
""")


def test_index_inputs_stay_inside_the_table_through_cast_and_unsqueeze() -> None:
    model = onnx.parser.parse_model(
        onnx.printer.to_text(EMBED).replace("Unsqueeze (ids64, axes)", "Identity (ids64)")
        .replace("Squeeze (y0, axes)", "Identity (y0)")
    )
    model.graph.initializer[0].CopyFrom(
        numpy_helper.from_array(np.zeros((50, 8), np.float32), "table")
    )
    assert feeds.index_bounds(model) == {"ids": 50}
    sets = feeds.make_feeds(model, runs=4)
    for feed in sets:
        assert feed["ids"].dtype == np.int32
        assert feed["ids"].min() >= 0 and feed["ids"].max() < 50
        assert set(np.unique(feed["attention_mask"])) <= {0, 1}
        assert np.all(feed["attention_mask"][..., 0] == 1)
        assert feed["flags"].dtype == np.bool_


def test_bert_like_model_gets_ids_inside_its_vocabulary() -> None:
    model = transformer_encoder(vocab=300)
    assert feeds.index_bounds(model)["input_ids"] == 300
    ids = np.concatenate([f["input_ids"].ravel() for f in feeds.make_feeds(model, runs=6)])
    assert ids.min() >= 0 and ids.max() < 300
    assert ids.max() > 100  # the whole range is used, not just 0/1


def test_dynamic_dims_get_two_sizes_and_shared_names_agree() -> None:
    sets = feeds.make_feeds(transformer_encoder())
    assert len(sets) == 2
    shapes = [f["input_ids"].shape for f in sets]
    assert shapes[0] != shapes[1]
    for f in sets:
        assert f["input_ids"].shape == f["attention_mask"].shape


def test_static_model_gets_one_set_and_seed_is_deterministic() -> None:
    model = _model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3] x) => (float[2, 3] y) { y = Relu (x) }
    """)
    a, b = feeds.make_feeds(model, seed=3), feeds.make_feeds(model, seed=3)
    assert len(a) == 1 and np.array_equal(a[0]["x"], b[0]["x"])
    assert not np.array_equal(a[0]["x"], feeds.make_feeds(model, seed=4)[0]["x"])
    low, high = -0.25, 0.5
    x = feeds.make_feeds(model, float_range=(low, high))[0]["x"]
    assert x.min() >= low and x.max() <= high


def test_input_shapes_fix_dims_and_unknown_names_are_refused() -> None:
    model = transformer_encoder()
    sets = feeds.make_feeds(model, input_shapes={"input_ids": [3, 5], "attention_mask": [3, 5]})
    assert len(sets) == 1 and sets[0]["input_ids"].shape == (3, 5)
    with pytest.raises(ValidationInputError, match="not take"):
        feeds.make_feeds(model, input_shapes={"nope": [1]})


def test_a_size_given_for_one_input_holds_for_its_named_dimensions_everywhere() -> None:
    """--input-shape input_ids:1x128 on a BERT: the mask and the token types share the batch
    and sequence names, so they take 1 and 128 too (they were generated at the ladder's 8, and
    the model refused every set)."""
    sets = feeds.make_feeds(transformer_encoder(), input_shapes={"input_ids": [1, 12]})
    assert {s["attention_mask"].shape for s in sets} == {(1, 12)}
    mixed = feeds.make_feeds(EMBED, input_shapes={"ids": [3, 5]}, runs=2)
    for feed in mixed:  # the batch is named on every input; flags stay fixed
        assert feed["attention_mask"].shape == (3, 5) and feed["x"].shape == (3, 4)


def test_initializer_inputs_are_not_fed() -> None:
    model = _model("""
    <ir_version: 3, opset_import: ["" : 9]>
    g (float[2] x, float[2] w) => (float[2] y) <float[2] w = {1.0, 2.0}> { y = Add (x, w) }
    """)
    assert [s.name for s in feeds.input_specs(model)] == ["x"]


def test_npz_and_pb_folders_load_and_are_checked(tmp_path) -> None:
    model = EMBED
    good = {
        "ids": np.zeros((1, 4), np.int32), "attention_mask": np.ones((1, 4), np.int64),
        "flags": np.zeros(3, bool), "x": np.zeros((1, 4), np.float32),
    }
    np.savez(tmp_path / "in.npz", **good)
    (loaded,) = feeds.load_feeds(tmp_path / "in.npz", model)
    assert sorted(loaded) == sorted(good)

    folder = tmp_path / "pb"
    for index in range(2):
        data_set = folder / f"test_data_set_{index}"
        data_set.mkdir(parents=True)
        for position, (name, array) in enumerate(good.items()):
            tensor = numpy_helper.from_array(array, name if index else "")
            (data_set / f"input_{position}.pb").write_bytes(tensor.SerializeToString())
    sets = feeds.load_feeds(folder, model)
    assert len(sets) == 2 and all(sorted(s) == sorted(good) for s in sets)

    bad = dict(good, x=np.zeros((1, 5), np.float64), extra=np.zeros(1))
    del bad["ids"]
    np.savez(tmp_path / "bad.npz", **bad)
    with pytest.raises(ValidationInputError) as info:
        feeds.load_feeds(tmp_path / "bad.npz", model)
    message = str(info.value)
    assert "missing 'ids'" in message and "'extra'" in message and "float64" in message

    np.savez(tmp_path / "shape.npz", **dict(good, x=np.zeros((1, 5), np.float32)))
    with pytest.raises(ValidationInputError, match=r"\[1, 5\]"):
        feeds.load_feeds(tmp_path / "shape.npz", model)
    with pytest.raises(ValidationInputError, match="no such"):
        feeds.load_feeds(tmp_path / "missing.npz", model)
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(ValidationInputError, match=".npz"):
        feeds.load_feeds(tmp_path / "x.txt", model)


def test_types_numpy_cannot_hold_are_refused_with_a_hint() -> None:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.BFLOAT16, [2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.BFLOAT16, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ValidationInputError) as info:
        feeds.make_feeds(model)
    assert "BFLOAT16" in str(info.value) and "--no-verify" in info.value.hint


def test_integer_inputs_compared_with_constants_take_those_values() -> None:
    # A sample rate checked against the rates the model supports.
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 4] x, int64[1] sr) => (float[1, 4] y) {
        rate = Squeeze (sr)
        k16 = Constant <value = int64 {16000}> ()
        k8 = Constant <value = int64 {8000}> ()
        is16 = Equal (rate, k16)
        is8 = Equal (rate, k8)
        either = Or (is16, is8)
        y = If (either) <
            then_branch = t () => (float[1, 4] a) { a = Identity (x) },
            else_branch = e () => (float[1, 4] b) { b = Neg (x) }
        >
    }""")
    (_, spec) = feeds.input_specs(model)
    assert spec.choices == (8000, 16000)
    for values in feeds.make_feeds(model, runs=4):
        assert int(values["sr"][0]) in (8000, 16000)


def _cached_decoder(past: str, new: str, mask: str) -> onnx.ModelProto:
    """A decoder step's shape: the past and the new tokens concatenated, their sums added to
    the attention mask, which spans both (dims named as the exporter chose)."""
    nodes = [helper.make_node("Concat", ["past", "x"], ["cat"], axis=1),
             helper.make_node("ReduceSum", ["cat", "axes"], ["s"], keepdims=0),
             helper.make_node("Cast", ["mask"], ["maskf"], to=onnx.TensorProto.FLOAT),
             helper.make_node("Add", ["s", "maskf"], ["y"])]
    graph = helper.make_graph(nodes, "step", [
        helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", new, 4]),
        helper.make_tensor_value_info("mask", onnx.TensorProto.INT64, ["batch", mask]),
        helper.make_tensor_value_info("past", onnx.TensorProto.FLOAT, ["batch", past, 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", mask])],
        [numpy_helper.from_array(np.array([2], np.int64), "axes")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("names", [("pl", "sl", "tl"), ("cache", "tokens", "attended")])
def test_a_decoder_s_cache_is_fed_with_a_mask_over_the_past_and_the_new_tokens(names) -> None:
    # Three named lengths, one the sum of the other two, whatever they are called: a size
    # where they are all equal does not run; the sums are tried before any larger size.
    from graphfix.validate.parity import check_parity

    model = _cached_decoder(*names)
    specs = feeds.input_specs(model)
    assert len(feeds.dim_sums(specs)) == 3
    result = check_parity(model, model)
    assert result.passed, result.describe()
    for run in result.runs:
        x, mask, past = (run[n] for n in ("x", "mask", "past"))
        sizes = [int(s.split(", ")[1].rstrip("]")) for s in (x, mask, past)]
        assert sizes[1] == sizes[0] + sizes[2], run


def test_a_dim_written_as_arithmetic_on_others_is_computed() -> None:
    # Hugging Face Optimum names a decoder's mask "past_sequence_length + sequence_length".
    model = _cached_decoder("past_sequence_length", "sequence_length",
                            "past_sequence_length + sequence_length")
    specs = feeds.input_specs(model)
    assert feeds.dim_sums(specs) == []  # nothing to guess: the first attempt runs
    feed = feeds.make_feed_set(specs, 0)
    assert feed["mask"].shape[1] == feed["x"].shape[1] + feed["past"].shape[1]
    one = _cached_decoder("past_sequence_length", "one", "past_sequence_length + 1")
    one.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 1
    feed = feeds.make_feed_set(feeds.input_specs(one), 1)
    assert feed["mask"].shape[1] == feed["past"].shape[1] + 1
    for text in ("a + ", "__import__('os')", "a ** 2", "a + 1.5", "sequence", "seq-len",
                 "a -1"):
        assert feeds._formula(text) is None, text


def test_a_size_whose_tensors_would_not_fit_is_not_run() -> None:
    # A model that runs at no size (its Reshape always fails) and squares its length on the
    # way: the ladders' larger sizes are checked against the memory first (4 GiB at 16384),
    # not run, and the error says so.
    from graphfix.errors import ValidationInputError
    from graphfix.validate.parity import check_parity

    nodes = [helper.make_node("Unsqueeze", ["x", "one"], ["column"]),
             helper.make_node("Unsqueeze", ["x", "two"], ["row"]),
             helper.make_node("Mul", ["column", "row"], ["square"]),
             helper.make_node("ReduceSum", ["square"], ["total"], keepdims=0),
             helper.make_node("Reshape", ["total", "seven"], ["y"])]
    graph = helper.make_graph(
        nodes, "square",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", "length"])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([2], np.int64), "one"),
         numpy_helper.from_array(np.array([1], np.int64), "two"),
         numpy_helper.from_array(np.array([7], np.int64), "seven")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sizes = feeds.TensorSizes(model)
    assert sizes.largest({"x": [4, 16384]})[1:] == ([4, 16384, 16384], 4 * 16384**2 * 4)
    assert sizes.too_large({"x": [4, 8]}) is None
    with pytest.raises(ValidationInputError, match="cannot run the original") as caught:
        check_parity(model, model)
    assert "'square' would be 4 GiB at [4, 16384, 16384]" in str(caught.value)


def test_a_tensor_inference_cannot_size_counts_at_the_inputs_largest_size() -> None:
    # A dynamo export's attention scores over a cache whose length ONNX's inference loses
    # (every cache tensor its own symbol): unguarded, a 4 x 16384 attempt took 24 GiB and the
    # kernel killed the run. An unknown size is taken as the largest size of the attempt.
    nodes = [helper.make_node("ReduceMax", ["x"], ["top"], keepdims=0),
             helper.make_node("Cast", ["top"], ["end"], to=onnx.TensorProto.INT64),
             helper.make_node("Range", ["zero", "end", "step"], ["positions"]),
             helper.make_node("Cast", ["positions"], ["p"], to=onnx.TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["p", "one"], ["column"]),
             helper.make_node("Unsqueeze", ["p", "zero_axis"], ["row"]),
             helper.make_node("Mul", ["column", "row"], ["scores"]),
             helper.make_node("ReduceSum", ["scores"], ["y"], keepdims=0)]
    graph = helper.make_graph(
        nodes, "unknown",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", "length"])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(0, np.int64), "zero"),
         numpy_helper.from_array(np.array(1, np.int64), "step"),
         numpy_helper.from_array(np.array([1], np.int64), "one"),
         numpy_helper.from_array(np.array([0], np.int64), "zero_axis")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sizes = feeds.TensorSizes(model)
    name, dims, size = sizes.largest({"x": [4, 32768]})
    assert name == "scores" and dims == [None, None] and size == 32768**2 * 4
    why = sizes.too_large({"x": [4, 32768]})
    assert why is not None and "'scores' would be 4 GiB at [?, ?]" in why
    assert "unknown size taken as the inputs' largest, 32768" in why
    assert sizes.too_large({"x": [4, 16]}) is None


def test_a_reshape_inference_cannot_size_has_the_elements_it_reshapes() -> None:
    # A Reshape to sizes computed by a Div (pyannote's SincNet front end: frames = length / 3),
    # which ONNX's data propagation does not follow: its output is [?, ?, ?]. Counting each
    # unknown size as the attempt's largest made a few KB 4 GiB at 1024 samples, and every
    # size the model runs at was skipped. A Reshape keeps its input's elements, and so does
    # what maps them one to one after it.
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["length"]),
             helper.make_node("Div", ["length", "two"], ["half"]),
             helper.make_node("Unsqueeze", ["half", "axes"], ["half1"]),
             helper.make_node("Concat", ["minus", "two1", "half1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["frames"]),
             helper.make_node("Transpose", ["frames"], ["swapped"], perm=[0, 2, 1]),
             helper.make_node("Relu", ["swapped"], ["y"])]
    graph = helper.make_graph(
        nodes, "frames",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", "length"])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(1, np.int64), "one"),
         numpy_helper.from_array(np.array(2, np.int64), "two"),
         numpy_helper.from_array(np.array([0], np.int64), "axes"),
         numpy_helper.from_array(np.array([-1], np.int64), "minus"),
         numpy_helper.from_array(np.array([2], np.int64), "two1")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sizes = feeds.TensorSizes(model)
    name, dims, size = sizes.largest({"x": [4, 16384]})
    assert None in dims and size == 4 * 16384 * 4
    assert sizes.too_large({"x": [4, 16384]}) is None


def test_an_if_on_sizes_takes_its_branch_for_the_size_estimate() -> None:
    # pyannote's front end picks its Conv by the channel count (an If on Shape): the two
    # branches have different ranks, so ONNX's inference leaves everything after the If
    # unsized. At given sizes the condition is known, and so is the branch.
    then_branch = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["picked"])], "then", [],
        [helper.make_tensor_value_info("picked", onnx.TensorProto.FLOAT, None)])
    else_branch = helper.make_graph(
        [helper.make_node("Constant", [], ["axes"],
                          value=numpy_helper.from_array(np.array([0], np.int64))),
         helper.make_node("Unsqueeze", ["x", "axes"], ["spread"])], "else", [],
        [helper.make_tensor_value_info("spread", onnx.TensorProto.FLOAT, None)])
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["channels"]),
             helper.make_node("Equal", ["channels", "one"], ["mono"]),
             helper.make_node("If", ["mono"], ["y"], then_branch=then_branch,
                              else_branch=else_branch),
             helper.make_node("Mul", ["y", "y"], ["z"])]
    graph = helper.make_graph(
        nodes, "picks",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["b", "c", "t"])],
        [helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(1, np.int64), "one")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sizes = feeds.TensorSizes(model)
    assert sizes.largest({"x": [4, 1, 64]})[1:] == ([4, 1, 64], 4 * 64 * 4)
    assert sizes.largest({"x": [4, 2, 64]})[1:] == ([1, 4, 2, 64], 8 * 64 * 4)
    # the model itself is not changed
    assert sorted(len(a.g.node) for a in model.graph.node[3].attribute) == [1, 2]


def test_torch_export_symbols_of_cache_tensors_take_one_size() -> None:
    # Dim.DYNAMIC: each cache tensor's length is a symbol of its own (s12, s7), though the
    # layers' caches must agree; and the mask spans the past and the new tokens.
    from graphfix.validate.parity import check_parity

    nodes = [helper.make_node("Add", ["past0", "past1"], ["both"]),  # the layers agree
             helper.make_node("ReduceSum", ["both", "heads"], ["per_token"], keepdims=0),
             helper.make_node("Concat", ["per_token", "x"], ["cat"], axis=1),
             helper.make_node("Cast", ["mask"], ["maskf"], to=onnx.TensorProto.FLOAT),
             helper.make_node("Add", ["cat", "maskf"], ["y"])]
    graph = helper.make_graph(nodes, "step", [
        helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["s3", "s70"]),
        helper.make_tensor_value_info("mask", onnx.TensorProto.INT64, ["s4", "s53"]),
        helper.make_tensor_value_info("past0", onnx.TensorProto.FLOAT, ["s3", 2, "s12", 4]),
        helper.make_tensor_value_info("past1", onnx.TensorProto.FLOAT, ["s3", 2, "s7", 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([1, 3], np.int64), "heads")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    specs = {s.name: s for s in feeds.input_specs(model)}
    assert specs["past0"].dims == specs["past1"].dims == ("s3", 2, "s12", 4)
    assert specs["x"].dims == ("s3", "s70") and specs["mask"].dims == ("s4", "s53")
    result = check_parity(model, model)
    assert result.passed, result.describe()
    # Names a user chose say which sizes differ: they stay apart.
    for value, name in zip(model.graph.input[2:], ("cache_a", "cache_b")):
        value.type.tensor_type.shape.dim[2].dim_param = name
    assert [s.dims[2] for s in feeds.input_specs(model)[2:]] == ["cache_a", "cache_b"]
