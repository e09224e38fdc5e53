"""The facts the precision search works on: each tensor's element type, each node's plan, who
reads what, and which nodes an assignment lowers.

Nodes are keyed by their position in the main graph, tensors by name. An assignment is the set
of compute nodes chosen to run in the lowered type; :meth:`Analysis.resolve` completes it with
the nodes that only move values (Reshape, Transpose, Concat, Cast to float, Constant...), each
put on the side of its neighbours so that a border needs one Cast, not two.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from graphfix import graph as graph_layer
from graphfix.model_io import tensor_value
from . import ops

__all__ = ["Analysis", "Use", "FLOAT", "weights"]

FLOAT = onnx.TensorProto.FLOAT


@dataclasses.dataclass(frozen=True)
class Use:
    """A node's input slot reading a tensor."""

    node: int
    slot: int


def weights(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    """The main graph's initializers that are weights, by name: not those listed as inputs
    from IR 4, a default value a caller may override (an input, which stays float32 and is
    read through a Cast like any other); before IR 4 every initializer is listed, and each
    is a weight."""
    defaults = set(graph_layer.default_inputs(model))
    return {t.name: t for t in model.graph.initializer if t.name not in defaults}


@dataclasses.dataclass
class Analysis:
    """The main graph of ``model`` as the precision search sees it.

    ``types``: element type of every main-graph tensor whose type is known (graph inputs,
    initializers, node outputs as ONNX Runtime typed them); ``plans``: each node's
    :class:`~ops.NodePlan`; ``producer``: tensor -> (node, output slot); ``uses``: tensor -> the
    input slots reading it."""

    model: onnx.ModelProto
    low: int
    types: dict[str, int]
    plans: list[ops.NodePlan]
    producer: dict[str, tuple[int, int]]
    uses: dict[str, list[Use]]
    inputs: set[str]
    outputs: list[str]
    initializers: dict[str, onnx.TensorProto]
    order: list[int]  # positions, in topological order
    read_by_bodies: frozenset[str] = frozenset()  # tensors If/Loop/Scan bodies read
    # A weight's values in the lowered type and how many saturated, by name: every round's
    # emulation and the lowering read them (a copy of the analysis shares the dict).
    rounded: dict[str, tuple[np.ndarray, int]] = dataclasses.field(default_factory=dict)
    # Nodes that compute in float on integers (sizes, positions) up to an op that needs them
    # exact, with the float tensors that carry those integers (:func:`_exact_integers`); the
    # search keeps them float32 where those values can pass the lowered type's exact range.
    from_integers: dict[int, frozenset[str]] = dataclasses.field(default_factory=dict)
    # Of those carriers, the ones whose values are an integer graph input's (a mask, ids; not a
    # count over them, which changes with the sequence as sizes do).
    fed_by_inputs: frozenset[str] = frozenset()

    @classmethod
    def build(cls, model: onnx.ModelProto, types: Mapping[str, int], *, low: int) -> Analysis:
        graph = model.graph
        initializers = weights(model)
        known = dict(types)
        known.update({t.name: t.data_type for t in graph.initializer})
        for value in graph.input:
            if value.type.HasField("tensor_type"):
                known.setdefault(value.name, value.type.tensor_type.elem_type)
        local = frozenset((f.domain, f.name) for f in model.functions)
        opsets = ops.opsets(model)
        # Tensors a body reads from this scope: their producers stay float32, so bodies,
        # which are not rewritten, keep reading float32 (ops rule 5).
        read_by_bodies: set[str] = set()
        producer: dict[str, tuple[int, int]] = {}
        uses: dict[str, list[Use]] = {}
        plans: list[ops.NodePlan] = []
        for position, node in enumerate(graph.node):
            for sub in graph_layer.subgraphs(node):
                read_by_bodies |= graph_layer.outer_refs(sub)
            for slot, name in enumerate(node.output):
                if name:
                    producer[name] = (position, slot)
            for slot, name in enumerate(node.input):
                if name:
                    uses.setdefault(name, []).append(Use(position, slot))
        for node in graph.node:
            float_in = [i for i, n in enumerate(node.input) if n and known.get(n) == FLOAT]
            float_out = [i for i, n in enumerate(node.output) if n and known.get(n) == FLOAT]
            unknown = [n for n in node.output if n and n not in known]
            if unknown:
                plans.append(ops.NodePlan("fixed", reason=f"the type of {unknown[0]!r} is unknown"))
                continue
            node_plan = ops.plan(node, float_in, float_out, low=low, opsets=opsets,
                                 local_functions=local)
            if node_plan.kind == "lowerable" and any(node.output[i] in read_by_bodies
                                                     for i in node_plan.low_outputs):
                node_plan = ops.NodePlan("fixed", free_inputs=node_plan.free_inputs,
                                         reason="its output is read inside a subgraph")
            plans.append(node_plan)
        # ONNX keeps a graph's nodes in topological order, and every pass leaves them so.
        order = list(range(len(graph.node)))
        from_integers, fed_by_inputs = _exact_integers(graph, known, plans, set(initializers))
        return cls(model, low, known, plans, producer, uses,
                   {v.name for v in graph.input if v.name not in initializers},
                   [v.name for v in graph.output], initializers, order,
                   frozenset(read_by_bodies), from_integers=from_integers,
                   fed_by_inputs=fed_by_inputs)

    def lowerable(self) -> list[int]:
        return [p for p, plan in enumerate(self.plans) if plan.kind == "lowerable"]

    def compute_nodes(self) -> list[int]:
        """Lowerable nodes that compute (not only move values): the search's choices."""
        return [p for p, plan in enumerate(self.plans)
                if plan.kind == "lowerable" and not plan.movement]

    def node(self, position: int) -> onnx.NodeProto:
        return self.model.graph.node[position]

    def risk(self, position: int) -> str | None:
        """Why the node at ``position`` may overflow or lose precision in the lowered type
        (:data:`~ops.RISKY_OPS`), None where it cannot: a Div by constants of magnitude one
        or more only scales its numerator down, one rounding like a Mul's."""
        node = self.node(position)
        reason = ops.RISKY_OPS.get(node.op_type)
        if reason and node.op_type == "Div" and len(node.input) > 1:
            divisor = self._small_constant(node.input[1])
            if divisor is not None and divisor.size and bool(
                    np.all(np.abs(divisor.astype(np.float64)) >= 1.0)):
                return None
        return reason

    def _small_constant(self, name: str, limit: int = 4096) -> np.ndarray | None:
        """The value of ``name`` where it is a weight or a Constant of at most ``limit``
        values; None otherwise (NaN counts as no value: it fails every comparison)."""
        if name in self.initializers:
            tensor = self.initializers[name]
            if int(np.prod(tensor.dims, dtype=np.int64)) > limit:
                return None
            return tensor_value(tensor)
        if name not in self.producer:
            return None
        node = self.node(self.producer[name][0])
        if node.op_type != "Constant" or node.domain not in graph_layer.STANDARD_DOMAINS:
            return None
        tensor = graph_layer.constant_tensor(node)
        if tensor is None or int(np.prod(tensor.dims, dtype=np.int64)) > limit:
            return None
        return numpy_helper.to_array(tensor)

    # ----------------------------------------------------------------------------------------
    # An assignment and the types it gives

    def resolve(self, compute_low: Sequence[int] | frozenset[int], *, io_low: bool = False,
                pinned: frozenset[int] = frozenset()) -> frozenset[int]:
        """Every lowered node when the compute nodes ``compute_low`` are. A movement node
        follows the activations it reads (low when one of them is); one that reads only
        weights (a Constant, an embedding table's Gather, a Cast to float of an integer
        input) follows its readers (low when all of them read it lowered). ``pinned``
        movement nodes stay float32."""
        low = set(compute_low)
        movement = [p for p in self.order if self.plans[p].kind == "lowerable"
                    and self.plans[p].movement and p not in pinned]
        weights = self.weightlike()
        indifferent = self._indifferent(movement)
        for _ in range(4):  # alternating forward and backward sweeps settle in a few rounds
            changed = False
            for position in [*movement, *reversed(movement)]:
                plan = self.plans[position]
                node = self.node(position)
                sources = [node.input[i] for i in plan.low_inputs if node.input[i]]
                definite = [s for s in sources if s not in weights]
                if position in indifferent:  # its readers take any type: no Cast either way
                    want = any(self.is_low(s, low, io_low=io_low) for s in sources)
                elif definite:
                    want = any(self.is_low(s, low, io_low=io_low) for s in definite)
                else:
                    readers = [u for u in self._typed_readers(position) if u.node not in indifferent]
                    want = bool(readers) and all(
                        u.node in low and u.slot in self.plans[u.node].low_inputs
                        for u in readers) and not any(
                        node.output[out] in self.outputs for out in plan.low_outputs)
                if want != (position in low):
                    changed = True
                    (low.add if want else low.discard)(position)
            if not changed:
                break
        return frozenset(low)

    def _typed_readers(self, position: int) -> list[Use]:
        """The input slots reading ``position``'s float outputs that care about their type."""
        plan = self.plans[position]
        node = self.node(position)
        return [u for out in plan.low_outputs for u in self.uses.get(node.output[out], [])
                if self.plans[u.node].kind != "neutral"
                and u.slot not in self.plans[u.node].free_inputs]

    def _indifferent(self, movement: Sequence[int]) -> set[int]:
        """Movement nodes whose values reach only readers that take any type (a Shape, a
        Cast), directly or through other such nodes, and no graph output."""
        found: set[int] = set()
        for position in reversed(movement):  # readers come after their producers
            node = self.node(position)
            plan = self.plans[position]
            if any(node.output[out] in self.outputs for out in plan.low_outputs):
                continue
            if all(u.node in found for u in self._typed_readers(position)):
                found.add(position)
        return found

    def weightlike(self) -> set[str]:
        """Float tensors computed from weights alone through movement nodes (and weights)."""
        weights = set(self.initializers)
        for position in self.order:
            plan = self.plans[position]
            node = self.node(position)
            if plan.kind != "lowerable" or not plan.movement:
                continue
            sources = [node.input[i] for i in plan.low_inputs if node.input[i]]
            if all(s in weights for s in sources):
                weights.update(node.output[i] for i in plan.low_outputs)
        return weights

    def is_low(self, name: str, low: set[int] | frozenset[int], *, io_low: bool = False) -> bool:
        """Whether tensor ``name`` is of the lowered type under assignment ``low``."""
        if name in self.producer:
            position, slot = self.producer[name]
            return position in low and slot in self.plans[position].low_outputs
        return io_low and name in self.inputs and self.types.get(name) == FLOAT

    def wants(self, use: Use, low: frozenset[int]) -> str:
        """What input slot ``use`` needs: "low", "float" or "any"."""
        plan = self.plans[use.node]
        if use.slot in plan.free_inputs or plan.kind == "neutral":
            return "any"
        if use.node in low and use.slot in plan.low_inputs:
            return "low"
        return "float"

    def groups(self, members: Sequence[int], joins: Callable[[int, str], bool]
               ) -> list[list[int]]:
        """``members`` (positions, in order) grouped by the tensors that join them: a member
        reading ``name`` that another member writes joins it where ``joins(reader, name)``."""
        inside = set(members)
        parent = {p: p for p in members}

        def root(p: int) -> int:
            while parent[p] != p:
                parent[p] = parent[parent[p]]
                p = parent[p]
            return p

        for p in members:
            for name in self.node(p).input:
                if name in self.producer and self.producer[name][0] in inside and joins(p, name):
                    parent[root(p)] = root(self.producer[name][0])
        found: dict[int, list[int]] = {}
        for p in members:
            found.setdefault(root(p), []).append(p)
        return list(found.values())

    def tensors(self) -> list[str]:
        """Main-graph tensors of any known tensor type that nodes write, in topological
        order (integer indices too: a float16 rounding can move them)."""
        return [name for position in self.order for name in self.node(position).output
                if name and name in self.types]

    def ancestors(self, names: Sequence[str]) -> set[int]:
        """Nodes whose outputs ``names`` depend on."""
        seen: set[int] = set()
        stack = [self.producer[n][0] for n in names if n in self.producer]
        while stack:
            position = stack.pop()
            if position in seen:
                continue
            seen.add(position)
            stack += [self.producer[n][0] for n in graph_layer.reads(self.node(position))
                      if n in self.producer]
        return seen


_INTEGERS = frozenset({onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.INT16,
                       onnx.TensorProto.UINT16, onnx.TensorProto.INT32, onnx.TensorProto.UINT32,
                       onnx.TensorProto.INT64, onnx.TensorProto.UINT64})


def _exact_integers(graph: onnx.GraphProto, types: Mapping[str, int],
                    plans: list[ops.NodePlan], constants: set[str]
                    ) -> tuple[dict[int, frozenset[str]], frozenset[str]]:
    """The lowerable nodes that carry integers in float into an op that needs them exact
    (:data:`~ops.EXACTNESS_SENSITIVE`: a Sin or Cos of positions times frequencies, a Floor
    or a Cast back to an integer of half a length), each with the float tensors that carry
    those integers; and the carriers whose values are an integer graph input's (not a count
    over it).

    A carrier is a Cast to float of integers that are not constants (sizes read from shapes,
    positions from a Range, a CumSum or a NonZero, an input's position ids), or a float sum
    or Range over a tensor whose shape changes (CumSum of ones). The lowered type holds every
    integer exactly only up to 2048 (float16) or 256 (bfloat16), and parity's sizes and
    generated integers are far smaller than a deployment's: past them a slice comes out a
    step too long and a rotary angle radians off, which no measurement here can see."""
    constants = set(constants)
    shaped: set[str] = set()  # constant values, in a shape that is not constant
    integer_inputs = {v.name for v in graph.input if types.get(v.name) in _INTEGERS}
    fed: set[str] = set(integer_inputs)  # tensors whose values come from an integer input's
    counted: set[str] = set()  # tensors computed by a sum or a Range (positions, counts)
    carriers: dict[str, frozenset[str]] = {}  # float tensor -> the carriers it computes on
    chains: dict[str, set[int]] = {}  # float tensor -> the lowerable nodes that computed it
    found: dict[int, frozenset[str]] = {}
    for position, node in enumerate(graph.node):
        names = [n for n in node.input if n]
        outputs = [n for n in node.output if n]
        standard = node.domain in graph_layer.STANDARD_DOMAINS
        values = ops.value_inputs(node)
        if standard and node.op_type in ("Shape", "Size"):
            continue  # sizes: integers, not constants, not an input's values
        if any(n in fed for n in values):
            fed.update(outputs)
        if (standard and node.op_type in ops.ACCUMULATING) or any(n in counted for n in values):
            counted.update(outputs)  # counts and positions: sums of what came before
        bodies = graph_layer.holds_graph(node)  # read outer values
        if standard and node.op_type == "ConstantOfShape":  # its value, in the shape given
            (constants if all(n in constants for n in names) else shaped).update(outputs)
            continue
        if (standard and node.op_type == "Constant") or (
                names and not bodies and all(n in constants for n in names)):
            constants.update(outputs)
            continue
        if values and not bodies and all(n in constants or n in shaped for n in values) and (
                standard and node.op_type not in ops.ACCUMULATING):
            shaped.update(o for o in outputs if types.get(o) == FLOAT)  # ConstantOfShape...
            continue
        floats_in = [n for n in values if types.get(n) == FLOAT]
        cast = standard and node.op_type in ("Cast", "CastLike") and \
            types.get(names[0]) in _INTEGERS
        summed = standard and node.op_type in ops.ACCUMULATING and floats_in and \
            all(n in shaped or n in constants for n in floats_in)
        if cast or summed:  # a carrier: integers in float
            origin = frozenset(o for o in outputs if types.get(o) == FLOAT)
            chain: set[int] = set()
        elif floats_in and any(n in carriers for n in floats_in) and all(
                n in carriers or n in constants or n in shaped for n in floats_in):
            origin = frozenset().union(*(carriers[n] for n in floats_in if n in carriers))
            chain = set().union(*(chains[n] for n in floats_in if n in chains))
        else:
            continue  # no integers in float here, or they meet activations: measured
        if plans[position].kind == "lowerable":
            chain = chain | {position}
        if standard and (node.op_type in ops.EXACTNESS_SENSITIVE or (
                node.op_type == "Cast" and types.get(outputs[0]) in _INTEGERS)):
            for member in chain:  # the whole way from the carriers to the op needing them
                found[member] = found.get(member, frozenset()) | origin
            continue
        for name in outputs:
            if types.get(name) == FLOAT:
                carriers[name], chains[name] = origin, chain
    # An integer input's values cast to float, counted by nothing: a mask (0/1) or ids; a
    # count over a mask (its positions) changes with the sequence, as sizes do.
    return found, frozenset(name for name in fed - counted
                            if name in set().union(*carriers.values(), *found.values()))
