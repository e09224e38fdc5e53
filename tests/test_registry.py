"""The pass contract and the registry: names, summaries, configuration, the growth guard."""

from __future__ import annotations

import onnx
import pytest

import graphfix.passes  # noqa: F401 - registers the passes
from graphfix import registry
from graphfix.errors import PassError, UnknownPassError
from graphfix.graph import count_nodes
from graphfix.options import RunOptions
from graphfix.registry import Pass, PassResult

RELU = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x) => (float[2,3] y) { y = Relu (x) }"""


def _model() -> onnx.ModelProto:
    return onnx.parser.parse_model(RELU)


class GrowsInPlace(Pass):
    """Adds a Neg pair in place (a wrong pass)."""

    name = "grows-in-place"

    def call(self, model: onnx.ModelProto) -> PassResult:
        (out,) = model.graph.output
        model.graph.node[-1].output[0] = "pre"
        model.graph.node.extend([onnx.helper.make_node("Neg", ["pre"], ["neg"]),
                                 onnx.helper.make_node("Neg", ["neg"], [out.name])])
        model.graph.initializer.add(name="unused", data_type=onnx.TensorProto.FLOAT, dims=[0])
        return PassResult(model, modified=True, stats={"pairs_added": 1},
                          warnings=["signature changed: output 'y' is now negated twice"])


class GrowsACopy(Pass):
    """Returns a bigger copy (a wrong pass that leaves its input alone)."""

    name = "grows-a-copy"

    def call(self, model: onnx.ModelProto) -> PassResult:
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        GrowsInPlace().call(copy)
        return PassResult(copy, modified=True)


def test_registry_rejects_bad_names_and_missing_docstrings():
    with pytest.raises(ValueError, match="kebab-case"):
        registry.register("Bad_Name")
    with pytest.raises(ValueError, match="docstring"):
        registry.register("no-doc")(type("NoDoc", (Pass,), {}))


def test_unknown_names_list_the_known_ones():
    with pytest.raises(UnknownPassError, match="eliminate-transposes"):
        registry.get("nope")


def test_every_registered_pass_has_a_one_line_summary_and_is_configured_from_a_run():
    for name in registry.names():
        assert registry.summary(name) and "\n" not in registry.summary(name)
        built = registry.get(name).configured(RunOptions())
        assert built.name == name


@pytest.mark.parametrize("wrong", [GrowsInPlace, GrowsACopy])
def test_a_result_with_more_nodes_is_taken_back(wrong):
    model = _model()
    before = model.SerializeToString()
    result = wrong()(model)
    assert result.skipped and "more nodes" in result.skipped and not result.modified
    assert result.model is model
    assert model.SerializeToString() == before  # undone, initializers included
    assert count_nodes(result.model) == 1
    # what the pass said of the result it returned is not true of the model kept
    assert result.warnings == [result.skipped] and not result.stats


def test_growth_is_kept_where_it_is_the_purpose():
    grows = type("Planted", (GrowsInPlace,), {"may_grow": True, "__doc__": "Grows on purpose."})
    result = grows()(_model())
    assert result.modified and count_nodes(result.model) == 3


class ChangesSignature(Pass):
    """Changes one part of the signature in place (a wrong pass)."""

    name = "changes-signature"

    def __init__(self, change: str) -> None:
        self.change = change

    def call(self, model: onnx.ModelProto) -> PassResult:
        graph = model.graph
        if self.change == "drops an input with a default value":
            graph.node[0].input[0] = "scale"
            del graph.input[0]
        elif self.change == "renames an output":
            graph.output[0].name = graph.node[-1].output[0] = "z"
        elif self.change == "retypes an input":
            graph.input[0].type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
        else:  # reorders the inputs
            graph.input.extend([graph.input[0]])
            del graph.input[0]
        return PassResult(model, modified=True)


@pytest.mark.parametrize("change", ["drops an input with a default value", "renames an output",
                                    "retypes an input", "reorders the inputs"])
def test_a_result_with_another_signature_is_taken_back(change):
    model = onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[3] x, float[3] scale) => (float[3] y) <float[3] scale = {1.0, 2.0, 3.0}> {
  y = Mul (x, scale) }""")
    before = model.SerializeToString()
    result = ChangesSignature(change)(model)
    assert result.skipped and "changed the graph's" in result.skipped and not result.modified
    assert model.SerializeToString() == before
    # where changing it is the purpose, the change stands
    allowed = type("Allowed", (ChangesSignature,), {"may_change_signature": True,
                                                    "__doc__": "On purpose."})
    assert allowed(change)(model).modified


def test_a_skip_and_a_change_at_once_is_a_contract_error():
    class Both(Pass):
        """Both at once."""

        name = "both"

        def call(self, model):
            return PassResult(model, modified=True, skipped="why")

    with pytest.raises(PassError, match="skip and a change"):
        Both()(_model())


def test_every_registered_pass_is_idempotent_on_a_small_cnn():
    from graphfix.models.sample import build_sample

    for name in registry.names():
        pass_ = registry.get(name)()
        with pass_:
            first = pass_(build_sample()).model
            assert not pass_(first).modified, name
