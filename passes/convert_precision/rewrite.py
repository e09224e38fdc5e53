"""The graphs the precision search builds from an assignment: the lowered model itself, and
the float32 graphs it measures with.

- :func:`lower` rewrites the model: lowered nodes compute in float16 (bfloat16), their weights
  are converted offline, and a Cast stands at each island border, one per tensor and type,
  shared by every reader that needs it.
- :func:`emulate` is the float32 model computing what the lowered one computes on ONNX
  Runtime's CPU provider: every tensor a lowered node writes, and every float32 tensor a
  lowered node reads, is rounded to the lowered type (``Cast`` there and back), while each op
  computes in float32 on the rounded values.
- :func:`shadow` adds to the float32 model, for each node that computes, a copy that reads the
  rounded float32 values of its inputs and rounds what it writes: its own error, with exact
  inputs.

Weights and constants are rounded by numpy as :func:`lower` converts them: finite values past
float16's range saturate at +-65504 (as onnxconverter-common and ONNX Runtime's converter do),
infinities stay infinite. The measuring graphs hold a small rounded weight as a float32 copy,
and a large one as the lowered model stores it with a Cast back to float32, which ONNX Runtime
runs (exact either way).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

import numpy as np
import onnx
from onnx import numpy_helper

from graphfix import graph as graph_layer
from graphfix.model_io import tensor_value
from .analysis import FLOAT, Analysis, Use

__all__ = ["lower", "emulate", "shadow", "LowerStats", "round_array", "expose", "expose_peaks",
           "Shadow",
           "largest_value"]

_SHORT = {onnx.TensorProto.FLOAT16: "fp16", onnx.TensorProto.BFLOAT16: "bf16", FLOAT: "fp32"}
_FP16_MAX = float(np.finfo(np.float16).max)
# From how many values a rounded weight is emulated as stored (lowered) and Cast back by ORT
# rather than as a float32 copy: a node more to open (~40 us) against ~2.5 ns a value.
_CAST_WEIGHTS_FROM = 1 << 14
# A weight read in both types is stored once and Cast where lowered when at most one of its
# values in this many is too small for float16 (:func:`_cast_at_load`).
_FLUSHED_SHARE = 1000


def largest_value(low: int) -> float:
    """The largest finite value of element type ``low`` (float16 or bfloat16)."""
    if low == onnx.TensorProto.FLOAT16:
        return _FP16_MAX
    import ml_dtypes  # onnx's own dependency, for bfloat16 values

    return float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)


def smallest_value(low: int) -> float:
    """The smallest positive value of element type ``low`` (float16's is a subnormal)."""
    if low == onnx.TensorProto.FLOAT16:
        return float(np.finfo(np.float16).smallest_subnormal)
    import ml_dtypes

    return float(ml_dtypes.finfo(ml_dtypes.bfloat16).smallest_subnormal)


def round_array(value: np.ndarray, low: int) -> tuple[np.ndarray, int, int]:
    """``value`` converted to element type ``low``; returns it, how many finite values
    saturated at the type's largest finite value, and how many non-zero values the type would
    make zero were kept non-zero at its smallest positive value (with their sign)."""
    value = np.asarray(value, dtype=np.float32)
    dtype = onnx.helper.tensor_dtype_to_np_dtype(low)
    # bfloat16's largest is just below float32's: float32's lowest (an attention mask's fill)
    # would round to -inf, and a fully masked row to NaN.
    largest = largest_value(low)
    saturated = raised = 0
    # Most weights are within range: two reductions tell, without a mask (NaN fails <=).
    if value.size and not max(-float(value.min()), float(value.max())) <= largest:
        over = np.isfinite(value) & (np.abs(value) > largest)
        saturated = int(np.count_nonzero(over))
        if saturated:
            value = np.where(over, np.sign(value) * np.float32(largest), value)
    # A non-zero value the type rounds to zero (BERT's LayerNorm epsilon, 1e-12, in float16)
    # keeps its reason to exist: sqrt(variance + epsilon) of a constant row (padding, a blank
    # frame) is 0 in float16 and the row NaN, where the original computes 0.
    # Those are the values the conversion makes zero (those between the smallest and half of
    # it round up to it anyway): found on the converted array's bits (both types are 16 bits,
    # a zero of either sign is its sign bit alone; numpy compares float16 slowly), and
    # looked at only where it holds a zero.
    converted = value.astype(dtype)
    zeros = (converted.view(np.uint16) & 0x7FFF) == 0
    if zeros.any():
        tiny = zeros & (value != 0)
        raised = int(np.count_nonzero(tiny))
        if raised:
            smallest = np.float32(smallest_value(low))
            converted[tiny] = np.where(value[tiny] < 0, -smallest, smallest).astype(dtype)
    return converted, saturated, raised


def _tensor(name: str, value: np.ndarray, low: int) -> onnx.TensorProto:
    if low == onnx.TensorProto.BFLOAT16:
        # numpy_helper reads ml_dtypes' bfloat16 as raw bits
        tensor = onnx.TensorProto(name=name, data_type=low, dims=list(value.shape))
        tensor.raw_data = np.ascontiguousarray(value).tobytes()
        return tensor
    return numpy_helper.from_array(value, name)


def _rounded(analysis: Analysis, tensor: onnx.TensorProto) -> tuple[np.ndarray, int, int]:
    """Weight ``tensor``'s values in the analysis's lowered type, how many saturated and how
    many were kept non-zero (:func:`round_array`), rounded once (``analysis.rounded``)."""
    if tensor.name not in analysis.rounded:
        value = tensor_value(tensor)
        if value is None:
            raise ValueError(f"the weights of {tensor.name!r} cannot be read")
        analysis.rounded[tensor.name] = round_array(value, analysis.low)
    return analysis.rounded[tensor.name]


def _rounded_tensor(analysis: Analysis, tensor: onnx.TensorProto, name: str
                    ) -> tuple[onnx.TensorProto, int, int]:
    """Weight ``tensor`` rounded to the analysis's lowered type and stored in it, named
    ``name``."""
    rounded, saturated, raised = _rounded(analysis, tensor)
    return _tensor(name, rounded, analysis.low), saturated, raised


def _cast(source: str, target: str, to: int, name: str) -> onnx.NodeProto:
    return onnx.helper.make_node("Cast", [source], [target], name=name, to=to)


@dataclasses.dataclass
class LowerStats:
    casts: int = 0
    weights_converted: int = 0
    weights_copied: int = 0
    weights_cast: int = 0  # read in both types: stored once, cast where lowered
    values_saturated: int = 0
    values_raised: int = 0  # non-zero values the type would make zero, kept non-zero


class _Inserts:
    """Nodes to place after a position (-1: before every node), then the graph rebuilt."""

    def __init__(self) -> None:
        self.after: dict[int, list[onnx.NodeProto]] = {}

    def add(self, position: int, node: onnx.NodeProto) -> None:
        self.after.setdefault(position, []).append(node)

    def apply(self, graph: onnx.GraphProto, tail: Iterable[onnx.NodeProto] = ()) -> None:
        nodes = list(self.after.get(-1, []))
        for position, node in enumerate(graph.node):
            nodes.append(node)
            nodes += self.after.get(position, [])
        nodes += list(tail)
        rebuilt = [onnx.NodeProto() for _ in nodes]
        for target, node in zip(rebuilt, nodes):
            target.CopyFrom(node)
        del graph.node[:]
        graph.node.extend(rebuilt)


def _place(analysis: Analysis, name: str) -> int:
    """Where a node reading ``name`` may stand first: after its producer, or at the start."""
    return analysis.producer[name][0] if name in analysis.producer else -1


def lower(analysis: Analysis, low: frozenset[int], *, io_low: bool = False) -> LowerStats:
    """Rewrite ``analysis.model`` in place so that the nodes ``low`` compute in the lowered
    type (``io_low``: the float32 inputs and outputs of the signature too)."""
    graph = analysis.model.graph
    low_type = analysis.low
    names = graph_layer.Names(graph_layer.all_names(graph))
    inserts = _Inserts()
    stats = LowerStats()

    def actual(name: str) -> int:
        return low_type if analysis.is_low(name, low, io_low=io_low) else analysis.types[name]

    # The tensor holding each name's value in its actual type, where a graph output keeps the
    # name for its declared type.
    carrier: dict[str, str] = {}
    for output in graph.output:
        name = output.name
        produced = name in analysis.producer
        if analysis.types.get(name) != FLOAT or not (produced or name in analysis.inputs):
            continue  # a weight listed as an output keeps its declared type
        declared = low_type if io_low else FLOAT
        if io_low:  # an input listed as an output too: one tensor, of the input's type
            output.type.tensor_type.elem_type = low_type
        if not produced or name in carrier or actual(name) == declared:
            continue  # an output listed twice has one carrier
        position, slot = analysis.producer[name]
        carrier[name] = names.fresh(f"{name}_{_SHORT[actual(name)]}")
        graph.node[position].output[slot] = carrier[name]
        inserts.add(position, _cast(carrier[name], name, declared, names.fresh(f"{name}_cast")))
        stats.casts += 1
    converted: dict[tuple[str, int], str] = {}
    if io_low:
        for value in graph.input:
            if value.name in analysis.inputs and analysis.types.get(value.name) == FLOAT:
                value.type.tensor_type.elem_type = low_type
                if _read_by_bodies(analysis, value.name):
                    # Bodies are not rewritten and read float32 (ops rule 5): they read a
                    # Cast of the lowered input, which the main graph's float32 readers share.
                    wide = converted[(value.name, FLOAT)] = names.fresh(
                        f"{value.name}_{_SHORT[FLOAT]}")
                    inserts.add(-1, _cast(value.name, wide, FLOAT,
                                          names.fresh(f"{value.name}_to_{_SHORT[FLOAT]}")))
                    stats.casts += 1
                    for node in graph.node:
                        graph_layer.rename_reads(node, {value.name: wide}, bodies_only=True)

    for position in sorted(low):  # ops rule 4: attribute-typed outputs follow the node
        node = graph.node[position]
        if node.op_type == "Cast":
            for attr in node.attribute:
                if attr.name == "to":
                    attr.i = low_type
        elif node.op_type in ("Constant", "ConstantOfShape"):
            saturated, raised = _lower_constant(node, low_type)
            stats.values_saturated += saturated
            stats.values_raised += raised

    listed = {value.name for value in graph.input}  # an IR-3 model's weights are inputs too
    for name, uses in analysis.uses.items():
        if analysis.types.get(name) != FLOAT:
            continue
        have = actual(name)
        wanted = {use: analysis.wants(use, low) for use in uses}
        in_place = name in analysis.initializers and name not in analysis.outputs and \
            name not in listed and all(
            want != "float" for want in wanted.values()) and any(
            want == "low" for want in wanted.values()) and not _read_by_bodies(analysis, name)
        for use, want in wanted.items():
            node = graph.node[use.node]
            if want == "any":
                node.input[use.slot] = carrier.get(name, name)
                continue
            target = low_type if want == "low" else FLOAT
            if target == have:
                node.input[use.slot] = carrier.get(name, name)
                continue
            if name in carrier and target == (low_type if io_low else FLOAT):
                node.input[use.slot] = name  # the output's own Cast gives it that type
                continue
            key = (name, target)
            if key not in converted:
                if name in analysis.initializers and not in_place and _cast_at_load(
                        analysis, name, target):
                    # read in both types: stored once, in float32, and cast where lowered
                    # (ONNX Runtime folds the Cast when it loads the model): a second copy
                    # made the float16 model of an unrolled recurrence larger than its input
                    converted[key] = names.fresh(f"{name}_{_SHORT[target]}")
                    inserts.add(-1, _cast(name, converted[key], target,
                                          names.fresh(f"{name}_to_{_SHORT[target]}")))
                    stats.weights_cast += 1
                elif name in analysis.initializers:
                    converted[key] = _convert_initializer(analysis, name, target, in_place,
                                                          names, stats)
                else:
                    converted[key] = names.fresh(f"{name}_{_SHORT[target]}")
                    inserts.add(_place(analysis, name), _cast(
                        carrier.get(name, name), converted[key], target,
                        names.fresh(f"{name}_to_{_SHORT[target]}")))
                    stats.casts += 1
            node.input[use.slot] = converted[key]
    _retype_value_info(analysis, graph, low, io_low)
    inserts.apply(graph)
    graph_layer.drop_unread_initializers(graph)
    return stats


def _read_by_bodies(analysis: Analysis, name: str) -> bool:
    return name in analysis.read_by_bodies


# A weight read both in float32 and lowered is cast where lowered, not copied, from this size.
_CAST_WEIGHTS_FROM = 1024


def _cast_at_load(analysis: Analysis, name: str, target: int) -> bool:
    """Whether the lowered readers of weight ``name`` read a Cast of it rather than a rounded
    copy: float16 (a Cast rounds as the copy does, to nearest even; ONNX Runtime's bfloat16
    Cast need not), a weight of :data:`_CAST_WEIGHTS_FROM` bytes or more whose values round as
    they are: none saturated, and at most one in :data:`_FLUSHED_SHARE` too small for the type
    (the Cast makes those zero, where the copy keeps them at its smallest value: a weight's
    values under 6e-8 compute nothing, and one such value of 295,000 in a GRU's recurrent
    weight had it stored twice, the float16 model 14% larger than its input; the lowered
    model's own run on ONNX Runtime checks it as written)."""
    tensor = analysis.initializers[name]
    count = math.prod(tensor.dims)
    if target != onnx.TensorProto.FLOAT16 or tensor.data_type != FLOAT or (
            4 * count < _CAST_WEIGHTS_FROM):
        return False
    _, saturated, raised = _rounded(analysis, tensor)
    return not saturated and raised * _FLUSHED_SHARE <= count


def _convert_initializer(analysis: Analysis, name: str, target: int, in_place: bool,
                         names: graph_layer.Names, stats: LowerStats) -> str:
    tensor = analysis.initializers[name]
    if in_place:
        rounded, saturated, raised = _rounded_tensor(analysis, tensor, name)
        tensor.CopyFrom(rounded)
        stats.weights_converted += 1
        stats.values_saturated += saturated
        stats.values_raised += raised
        return name
    copy_name = names.fresh(f"{name}_{_SHORT[target]}")
    rounded, saturated, raised = _rounded_tensor(analysis, tensor, copy_name)
    analysis.model.graph.initializer.append(rounded)
    stats.weights_copied += 1
    stats.values_saturated += saturated
    stats.values_raised += raised
    return copy_name


def _lower_constant(node: onnx.NodeProto, low: int) -> tuple[int, int]:
    """A float Constant or ConstantOfShape's value in the lowered type; returns the values
    that saturated and those kept non-zero (:func:`round_array`)."""
    saturated = raised = 0
    for attr in list(node.attribute):
        if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
            if attr.t.data_type == FLOAT:
                value, saturated, raised = round_array(numpy_helper.to_array(attr.t), low)
                attr.t.CopyFrom(_tensor(attr.t.name, value, low))
            return saturated, raised
        if attr.name in ("value_float", "value_floats"):
            raw = np.array(attr.f if attr.name == "value_float" else list(attr.floats),
                           dtype=np.float32)
            node.attribute.remove(attr)
            value, saturated, raised = round_array(raw, low)
            node.attribute.append(onnx.helper.make_attribute("value", _tensor("", value, low)))
            return saturated, raised
    if node.op_type == "ConstantOfShape":  # no value: a float32 zero
        zero = round_array(np.zeros(1, np.float32), low)[0]
        node.attribute.append(onnx.helper.make_attribute("value", _tensor("", zero, low)))
    return saturated, raised


def _retype_value_info(analysis: Analysis, graph: onnx.GraphProto, low: frozenset[int],
                       io_low: bool) -> None:
    """Declared types follow: lowered activations, and weights converted in place."""
    weights = {t.name: t.data_type for t in graph.initializer}
    for value in graph.value_info:
        if analysis.types.get(value.name) != FLOAT or not value.type.HasField("tensor_type"):
            continue
        if value.name in weights:
            value.type.tensor_type.elem_type = weights[value.name]
        elif analysis.is_low(value.name, low, io_low=io_low):
            value.type.tensor_type.elem_type = analysis.low


# --------------------------------------------------------------------------------------------
# Measuring graphs


class _Rounder:
    """Rounded copies of float32 tensors, made once per tensor: weights by numpy, activations
    by a Cast to the lowered type and back."""

    def __init__(self, analysis: Analysis, graph: onnx.GraphProto, names: graph_layer.Names,
                 inserts: _Inserts | None, tail: list[onnx.NodeProto] | None) -> None:
        self.analysis, self.graph, self.names = analysis, graph, names
        self.inserts, self.tail = inserts, tail
        self.made: dict[str, str] = {}

    def __call__(self, name: str) -> str:
        if name not in self.made:
            weight = self.analysis.initializers.get(name)
            if weight is not None and math.prod(weight.dims) < _CAST_WEIGHTS_FROM:
                target = self.names.fresh(f"{name}_r")
                rounded = _rounded(self.analysis, weight)[0].astype(np.float32)
                self.graph.initializer.append(numpy_helper.from_array(rounded, target))
            elif weight is not None:
                # The weight as the lowered model stores it, and a Cast back to float32 that
                # ORT runs: exact, and cheaper than numpy making and encoding a float32 copy
                # (resnet18's emulation: 0.79x the time), but a node more to open.
                middle = self.names.fresh(f"{name}_q")
                tensor = _rounded_tensor(self.analysis, weight, middle)[0]
                self.graph.initializer.append(tensor)
                target = self.names.fresh(f"{name}_r")
                self._place(_cast(middle, target, FLOAT, self.names.fresh(f"{name}_r")), -1)
            else:
                target = self.round_trip(name, _place(self.analysis, name))
            self.made[name] = target
        return self.made[name]

    def round_trip(self, source: str, position: int, target: str | None = None) -> str:
        middle = self.names.fresh(f"{source}_q")
        target = target or self.names.fresh(f"{source}_r")
        self._place(_cast(source, middle, self.analysis.low, self.names.fresh(f"{source}_q")),
                    position)
        self._place(_cast(middle, target, FLOAT, self.names.fresh(f"{source}_r")), position)
        return target

    def _place(self, node: onnx.NodeProto, position: int) -> None:
        if self.tail is not None:
            self.tail.append(node)
        else:
            assert self.inserts is not None
            self.inserts.add(position, node)


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy to measure with: initializers are weights there, not overridable inputs (an
    IR-3 model lists them as inputs), so that the rounded copies are the ones read."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    weights = {t.name for t in copy.graph.initializer}
    if any(i.name in weights for i in copy.graph.input):
        graph_layer.keep_only(copy.graph.input, lambda i: i.name not in weights)
        copy.ir_version = max(copy.ir_version, 4)
    return copy


def emulate(analysis: Analysis, low: frozenset[int], *, io_low: bool = False
            ) -> onnx.ModelProto:
    """The float32 model computing what the model lowered by ``low`` computes with float32
    arithmetic on lowered values."""
    model = _copy(analysis.model)
    graph = model.graph
    names = graph_layer.Names(graph_layer.all_names(graph))
    inserts = _Inserts()
    rounder = _Rounder(analysis, graph, names, inserts, None)
    for position in sorted(low):
        node = graph.node[position]
        plan = analysis.plans[position]
        if node.op_type in ("Constant", "ConstantOfShape") and node.domain in graph_layer.STANDARD_DOMAINS:
            _round_constant(node, analysis.low)
            continue
        if _selects_rounded(analysis, position):
            continue  # what it writes was rounded where it was read
        for slot in plan.low_outputs:
            name = node.output[slot]
            raw = names.fresh(f"{name}_raw")
            node.output[slot] = raw
            rounder.round_trip(raw, position, target=name)
    if io_low:
        for name in analysis.inputs:
            if analysis.types.get(name) == FLOAT:
                _redirect(graph, analysis.uses.get(name, []), rounder(name))
                if _read_by_bodies(analysis, name):  # as lower(): bodies read it rounded
                    for node in graph.node:
                        graph_layer.rename_reads(node, {name: rounder(name)}, bodies_only=True)
    for name, uses in analysis.uses.items():
        if analysis.types.get(name) != FLOAT or analysis.is_low(name, low, io_low=io_low):
            continue
        lowered = [u for u in uses if analysis.wants(u, low) == "low"]
        if lowered:
            _redirect(graph, lowered, rounder(name))
    inserts.apply(graph)
    graph_layer.drop_unread_initializers(graph)
    return model


def _selects_rounded(analysis: Analysis, position: int) -> bool:
    """Whether a lowered node only moves or selects values it reads rounded (a Reshape, a
    Concat, a Relu, a MaxPool on lowered values): every value it writes is one of them, so
    rounding its outputs again changes nothing, and the emulation leaves that Cast pair out.
    A Cast to float of another type computes new values: it is rounded."""
    plan = analysis.plans[position]
    node = analysis.node(position)
    floats = [slot for slot, name in enumerate(node.input)
              if name and analysis.types.get(name) == FLOAT]
    return plan.movement and bool(floats) and set(floats) <= set(plan.low_inputs)


def _redirect(graph: onnx.GraphProto, uses: Iterable[Use], name: str) -> None:
    for use in uses:
        graph.node[use.node].input[use.slot] = name


def _round_constant(node: onnx.NodeProto, low: int) -> None:
    """A Constant's or ConstantOfShape's float32 value, rounded as :func:`lower` converts it."""
    for attr in list(node.attribute):
        if attr.name == "value" and attr.t.data_type == FLOAT:
            rounded = round_array(numpy_helper.to_array(attr.t), low)[0]
            attr.t.CopyFrom(numpy_helper.from_array(rounded.astype(np.float32), attr.t.name))
        elif attr.name in ("value_float", "value_floats"):
            raw = np.array(attr.f if attr.name == "value_float" else list(attr.floats),
                           dtype=np.float32)
            rounded = round_array(raw, low)[0].astype(np.float32)
            if attr.name == "value_float":
                attr.f = float(rounded)
            else:
                del attr.floats[:]
                attr.floats.extend(float(v) for v in rounded)


@dataclasses.dataclass
class Shadow:
    """The float32 model with a shadow copy of each measured node, and, per node position,
    (exposed shadow output, the original tensor it shadows)."""

    model: onnx.ModelProto
    outputs: dict[int, list[tuple[str, str]]]


def shadow(analysis: Analysis, positions: Iterable[int]) -> Shadow:
    """The float32 model plus, for each node of ``positions``, a copy computing in float32 on
    its inputs rounded to the lowered type, its outputs rounded too (see the module)."""
    model = _copy(analysis.model)
    graph = model.graph
    names = graph_layer.Names(graph_layer.all_names(graph))
    tail: list[onnx.NodeProto] = []
    rounder = _Rounder(analysis, graph, names, None, tail)
    exposed: dict[int, list[tuple[str, str]]] = {}
    for position in positions:
        plan = analysis.plans[position]
        copy = onnx.NodeProto()
        copy.CopyFrom(graph.node[position])
        copy.name = names.fresh(f"{copy.name or copy.op_type}_shadow")
        for slot in plan.low_inputs:
            if copy.input[slot]:
                copy.input[slot] = rounder(copy.input[slot])
        outputs = []
        for slot, name in enumerate(list(copy.output)):
            if not name:
                continue
            copy.output[slot] = names.fresh(f"{name}_shadow")
            if slot in plan.low_outputs:
                outputs.append((copy.output[slot], name))
        tail.append(copy)
        exposed[position] = []
        for raw, original in outputs:
            exposed[position].append((rounder.round_trip(raw, -1), original))
    _Inserts().apply(graph, tail)
    graph_layer.drop_unread_initializers(graph)
    return Shadow(model, exposed)


def expose(model: onnx.ModelProto, names: Iterable[str]) -> list[str]:
    """Make ``names`` outputs of ``model`` too (in place); returns every output's name."""
    present = {o.name for o in model.graph.output}
    inputs = {i.name for i in model.graph.input}
    for name in names:
        if name and name not in present and name not in inputs:
            model.graph.output.append(onnx.ValueInfoProto(name=name))
            present.add(name)
    return [o.name for o in model.graph.output]


def expose_peaks(model: onnx.ModelProto, names: Iterable[str]) -> dict[str, str]:
    """Add to ``model`` (in place) the largest magnitude of each float tensor of ``names``
    (``ReduceMax(Abs(t))``, a scalar) as an output; returns tensor -> the output holding it.
    A scalar per tensor leaves ONNX Runtime free to reuse the tensors' memory, where exposing
    them whole does not. An infinity there is any infinity in the tensor."""
    fresh = graph_layer.Names(graph_layer.all_names(model.graph))
    found: dict[str, str] = {}
    for name in names:
        absolute, peak = fresh.fresh(f"{name}_abs"), fresh.fresh(f"{name}_peak")
        model.graph.node.extend([
            onnx.helper.make_node("Abs", [name], [absolute]),
            onnx.helper.make_node("ReduceMax", [absolute], [peak], keepdims=0)])
        model.graph.output.append(onnx.ValueInfoProto(name=peak))
        found[name] = peak
    return found

