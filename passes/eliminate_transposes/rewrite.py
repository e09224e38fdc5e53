"""The driver: rules 1-7 on one graph.

A worklist of Transposes, upstream first; each is composed with the Transpose feeding it, dropped
when it is the identity or unread, absorbed into an Unsqueeze or a constant, or pushed past its
consumers when the look-ahead (:mod:`.cost`) says the count of Transposes goes down. The edits
(:mod:`.edits`) keep the live :class:`graphfix.graph.Index` up to date; the graph itself is
written back once, at the end, in topological order.

The state of one graph's rewrite is in objects of its own, each living as long as the rewrite:
the nodes under keys that never change, the dead among them and the worklist (:mod:`.nodes`),
the index, initializers and facts (:class:`.edits.Edits`), the pushes made in all and through
each node (:class:`.cost.Pushes`), the compensating Transposes (:class:`Compensations`), rule
7a's whole Shapes (:class:`WholeShapes`) and the tensors renamed to a graph output's name.
Each push is logged at DEBUG with the change in nodes the look-ahead counted for its own edits
and the change they made (``nodes_counted``, ``nodes_made`` on the record).
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import onnx
from onnx import numpy_helper

from graphfix.graph import Index, Names
from .cost import (
    PLANNED,
    Decision,
    Lookahead,
    Pushes,
    keeps_order,
    operand_positions,
    operand_route,
    sibling_transpose,
    untransposed_constant,
)
from .edits import Edits, RewriteCounts
from .facts import ShapeFacts, shape_bounds
from .absorb import Absorb
from .handlers import Plan
from .nodes import NodeTable
from .ops import (
    SHAPE_ONLY,
    STANDARD_DOMAINS,
    attr,
    is_transpose,
    set_attr,
)
from .perm import (
    Perm,
    compose,
    invert,
    is_identity,
    moves_only_ones,
    normalize_axes,
    transposed_shape,
    untransposed_shape,
)

__all__ = ["Rewriter", "Compensations", "WholeShapes"]

logger = logging.getLogger(__name__)

# Full re-scans of the remaining Transposes after the worklist runs dry (a fixed point is reached
# in one or two in practice; the bound keeps a pathological graph linear).
_MAX_SWEEPS = 4


@dataclasses.dataclass
class _Push:
    """The push in progress: the tensor the Transpose wrote, its input, the consumer."""

    transposed: str
    source: str
    reader: onnx.NodeProto


class Compensations:
    """The compensating Transposes of one graph's rewrite (case 4b: ``T(p^-1)`` on an operand a
    push brings back to the untransposed layout): the node each was made for, and those that
    wait for a Transpose on its way to cancel them. Lifetime: one graph's rewrite; nodes are
    kept under their keys."""

    def __init__(self, nodes: NodeTable) -> None:
        self.nodes = nodes
        self._made_for: dict[int, int] = {}  # compensation -> the node it feeds
        self._waiting: set[int] = set()

    def add(self, compensation: onnx.NodeProto, reader: onnx.NodeProto) -> None:
        self._made_for[self.nodes.key(compensation)] = self.nodes.key(reader)

    def made_for(self, node: onnx.NodeProto) -> onnx.NodeProto | None:
        """The node the compensation ``node`` was made for (None: no compensation)."""
        key = self._made_for.get(self.nodes.key(node))
        return None if key is None else self.nodes[key]

    def wait(self, compensation: onnx.NodeProto) -> None:
        """``compensation`` stays until the Transpose on its way arrives."""
        self._waiting.add(self.nodes.key(compensation))

    def waits(self, node: onnx.NodeProto) -> bool:
        return self.nodes.key(node) in self._waiting


class WholeShapes:
    """Rule 7a: the whole ``Shape`` of each source tensor (by name) that the Gathers of its
    Transposes' Shapes read. Lifetime: one graph's rewrite."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self._of: dict[str, str] = {}

    def get(self, source: str) -> str | None:
        """The whole ``Shape(source)``, while it is there (shape math nothing reads goes)."""
        whole = self._of.get(source)
        return whole if whole is not None and whole in self.index.producer else None

    def set(self, source: str, whole: str) -> None:
        self._of[source] = whole

    def renamed(self, old: str, new: str) -> None:
        """The source ``old`` is called ``new`` now (rule 1 at a graph output)."""
        if old in self._of:
            self._of[new] = self._of.pop(old)

    def sources(self) -> frozenset[str]:
        """The sources whose whole Shape is there."""
        return frozenset(source for source in self._of if self.get(source))


@dataclasses.dataclass
class Budget:
    """The bytes rule 5's new constants may still take, shared by a pass's graphs: in a run
    held to its input's size, what the passes before saved."""

    left: int

    def take(self, cost: int) -> bool:
        """Whether ``cost`` bytes fit; they are taken if so."""
        if cost > self.left:
            return False
        self.left -= cost
        return True


class Rewriter:
    """Rules 1-7 on one graph: the rules' decisions; the state is in the objects it holds.
    ``budget``: rule 5's bytes (None: no limit)."""

    def __init__(self, graph: onnx.GraphProto, *, opset: int, ir_version: int, names: Names,
                 inferred: ShapeFacts, stats: RewriteCounts, keep_reduction_order: bool,
                 liftable: frozenset[str] = frozenset(), budget: Budget | None = None) -> None:
        self.edits = Edits(graph, opset=opset, ir_version=ir_version, names=names,
                           inferred=inferred, stats=stats,
                           keep_reduction_order=keep_reduction_order)
        # What the rules read, as the edits keep it.
        self.index, self.facts, self.stats = self.edits.index, self.edits.facts, stats
        self.opset, self.ir_version = opset, ir_version
        self.liftable = liftable  # scan outputs whose Transpose moves out of the loop (rule 8)
        nodes = self.edits.nodes
        self.pushes = Pushes(nodes, limit=8 * len(nodes) + 64)
        self.compensations = Compensations(nodes)
        self.whole_shapes = WholeShapes(self.index)
        self.renamed: dict[str, str] = {}  # tensors renamed to a graph output's name (rule 1)
        self.budget = budget

    @property
    def modified(self) -> bool:
        return self.edits.modified

    # ------------------------------------------------------------ the worklist
    def run(self) -> None:
        edits = self.edits
        edits.worklist.add_every_transpose()
        for _ in range(_MAX_SWEEPS):
            changed = False
            while (key := edits.worklist.pop()) is not None:
                if not edits.nodes.is_dead(key) and self._visit(edits.nodes[key]):
                    changed = True
            if not changed:
                break
            edits.worklist.add_every_transpose()
        self._size_one_moves()
        edits.write_back()

    def _visit(self, node: onnx.NodeProto) -> bool:
        perm = self.facts.transpose_perm(node)
        if perm is None:
            logger.debug("keep %s: rank unknown and no perm", node.name)
            return False
        perm, changed = self._compose_chain(node, perm)
        if not self.index.is_read(node.output[0]):
            self.edits.remove_node(node)  # Rule 1: nothing reads it
            return True
        if is_identity(perm) or self._moves_ones_in_place(node, perm):  # Rule 1.
            self._drop_identity(node)
            return True
        if self._absorb_into_unsqueeze(node, perm) or self._fold(node, perm) or (
            self._fold_into_dequantize(node, perm)
        ):  # Rules 6, 3, 3b
            return True
        return self._push(node, perm) or changed  # Rule 4.

    def _moves_ones_in_place(self, node: onnx.NodeProto, perm: Perm) -> bool:
        """A Transpose of a tensor whose shape it leaves as it is, moving only size-1 axes
        (``[1, 1, 1, 1]``), is the identity."""
        shape = self.facts.shape(node.input[0])
        return shape is not None and len(shape) == len(perm) and None not in shape and (
            transposed_shape(shape, perm) == tuple(shape) and moves_only_ones(shape, perm))

    def _compose_chain(self, node: onnx.NodeProto, perm: Perm) -> tuple[Perm, bool]:
        """Rule 2: compose with the Transposes that feed this one."""
        changed = False
        while True:
            producer = self.index.producer.get(node.input[0])
            if not is_transpose(producer):
                return perm, changed
            inner = self.facts.transpose_perm(producer)  # type: ignore[arg-type]
            if inner is None or len(inner) != len(perm):
                return perm, changed
            perm = compose(inner, perm)
            self.edits.set_perm(node, perm)
            self.edits.set_input(node, 0, producer.input[0])  # type: ignore[union-attr]
            self.edits.modified = changed = True

    def _fold(self, node: onnx.NodeProto, perm: Perm) -> bool:
        """Rule 3: ``T(p)(constant)`` is a constant (at a graph output too, where it becomes a
        Constant node unless an initializer may name it)."""
        source, output = node.input[0], node.output[0]
        value = self.facts.const_value(source)
        if value is None or value.ndim != len(perm):
            return False
        if value.nbytes > node.ByteSize() and self._read_elsewhere(source, node):
            # The constant stays for its other readers, so the fold would store its values
            # twice, for one node: never a bigger file for fewer nodes (a tied embedding's
            # Transpose for the LM head: +12% on GPT-2). ONNX Runtime folds a constant's
            # Transpose itself when it loads the model.
            return False
        tensor = numpy_helper.from_array(np.ascontiguousarray(value.transpose(perm)), output)
        self.edits.remove_node(node)
        self.edits.add_constant(tensor, self.edits.nodes.order(node),
                                as_node=output in self.index.outputs)
        self.stats.folded_into_constants += 1
        for user in self.index.readers(output):
            if is_transpose(user):
                self.edits.enqueue(user)
        return True

    def _read_elsewhere(self, source: str, node: onnx.NodeProto) -> bool:
        """Whether a node other than ``node`` (or the graph's outputs, or a subgraph) reads
        the constant ``source`` or a tensor of the chain of shape-only ops it comes from."""
        name, reader = source, node
        while True:
            if not self.index.only_reader(name, reader) or name in self.index.implicit:
                return True
            producer = self.index.producer.get(name)
            if producer is None or producer.op_type not in SHAPE_ONLY or (
                    producer.domain not in STANDARD_DOMAINS):
                return False
            name, reader = producer.input[0], producer

    def _fold_into_dequantize(self, node: onnx.NodeProto, perm: Perm) -> bool:
        """Rule 3b: ``T(p)(DequantizeLinear(q, scale, zero))`` of constant ``q`` (quantized
        weights) that only this Transpose reads: ``q`` is stored transposed and a per-axis
        ``axis`` moves to where ``p`` puts it; the Transpose goes."""
        dq = self.index.producer.get(node.input[0])
        if dq is None or dq.op_type != "DequantizeLinear" or dq.domain not in STANDARD_DOMAINS:
            return False
        out = dq.output[0]
        if attr(dq, "block_size", 0) or self.facts.constant_nodes or (
            self.index.readers(out) != [node] or out in self.index.outputs
            or out in self.index.implicit
        ):
            return False
        quantized = self.facts.const_value(dq.input[0])
        if quantized is None or quantized.ndim != len(perm):
            return False
        scale_rank = self.facts.rank(dq.input[1]) if len(dq.input) > 1 else None
        if scale_rank is None or scale_rank > 1:
            return False
        if scale_rank == 1 and self.facts.opset >= 13:  # per-axis: the axis moves with p
            axes = normalize_axes([attr(dq, "axis", 1)], len(perm))
            if axes is None:
                return False
            set_attr(dq, "axis", invert(perm)[axes[0]])
        moved = self.edits.new_initializer(np.ascontiguousarray(quantized.transpose(perm)),
                                           f"{dq.input[0]}_transposed",
                                           self.edits.nodes.order(dq))
        self.edits.set_input(dq, 0, moved)
        self.facts.learn_shape(out, transposed_shape(quantized.shape, perm))
        self.stats.folded_into_constants += 1
        self._drop_identity(node)  # T(p) of the stored-transposed weights is the identity
        return True

    def _push(self, node: onnx.NodeProto, perm: Perm) -> bool:
        """Rule 4: move ``node`` past its consumers when that lowers the count of Transposes
        (and adds no more nodes than it removes)."""
        source, output = node.input[0], node.output[0]
        if self.compensations.waits(node):
            logger.debug("keep %s: waits for the Transpose arriving at %s", node.name, source)
            return False
        reader = self.compensations.made_for(node)
        if reader is not None and any(user is reader for user in self.index.readers(output)) and (
            self.pushes.through(reader) >= 2
        ):
            # Pushed back through the node it compensates for, it would undo that push; once
            # the node has seen a second push, the two Transposes are trading places round it.
            logger.debug("keep %s: would undo the push it compensates for", node.name)
            return False
        look = Lookahead(self.facts, self.pushes, source, self.liftable,
                         self.whole_shapes.sources())
        decision = look.push_cost(output, perm, source)
        if look.exhausted and (decision is None or not decision.pays):
            # The look-ahead ran out before it saw where the Transpose ends up: a step into a
            # single elementwise consumer keeps both counts, so long chains go a step at a time.
            decision = look.free_step(output, perm)
        elif decision is not None and not decision.pays:
            logger.debug("keep %s: pushing would not lower the Transpose count (%+d) or would "
                         "add nodes (%+d)", node.name, decision.cost - 1, decision.nodes - 1)
            return False
        if decision is None:
            return False
        if not self.pushes.take():
            logger.debug("keep %s: push limit of %d reached", node.name, self.pushes.limit)
            return False
        self._carry_out(node, perm, decision)
        return True

    def _carry_out(self, node: onnx.NodeProto, perm: Perm, decision: Decision) -> None:
        before = self.edits.nodes.live_count
        name, source, output = node.name, node.input[0], node.output[0]
        for user, plan in decision.steps:
            # A cancellation settled on the way may have renamed the source (rule 1).
            source = self.renamed.get(source, source)
            if plan is None:
                self._compose_into(user, source, perm)
            elif isinstance(plan, Absorb):
                self._absorb(user, plan, output, source, perm)
            else:
                self._apply(user, plan, _Push(output, source, user), perm)
        if not self.edits.is_dead(node):
            self.edits.remove_node(node)
        # The look-ahead's count of the push's own edits beside what they made: the record the
        # tests hold the look-ahead to.
        counted, made = decision.nodes_now - 1, self.edits.nodes.live_count - before
        logger.debug("push %s (perm %s) into %s: %+d Transposes, %+d nodes looking ahead; "
                     "its own edits %+d nodes as counted, %+d as made", name, perm,
                     [user.op_type for user, _ in decision.steps], decision.cost - 1,
                     decision.nodes - 1, counted, made,
                     extra={"nodes_counted": counted, "nodes_made": made})

    # ------------------------------------------------------------ rules 1, 2, 6
    def _compose_into(self, user: onnx.NodeProto, source: str, perm: Perm) -> None:
        outer = self.facts.transpose_perm(user)
        assert outer is not None
        composed = compose(perm, outer)
        self.edits.set_perm(user, composed)
        self.edits.set_input(user, 0, source)
        # Settle the cancellation now, as the cost check counted it: left for later, a pending
        # identity could be composed back into a real permutation by the next push.
        if not self.index.is_read(user.output[0]):
            self.edits.remove_node(user)
        elif is_identity(composed):
            self._drop_identity(user)
        else:
            self.edits.enqueue(user)

    def _absorb_into_unsqueeze(self, node: onnx.NodeProto, perm: Perm) -> bool:
        """Rule 6: ``T(p)(Unsqueeze(x, axes))`` where ``p`` only moves the inserted axes is an
        Unsqueeze that inserts them where ``p`` puts them."""
        source = node.input[0]
        unsqueeze = self.index.producer.get(source)
        if unsqueeze is None or unsqueeze.op_type != "Unsqueeze" or (
            unsqueeze.domain not in STANDARD_DOMAINS
        ) or not self.index.only_reader(source, node) or source in self.index.implicit:
            return False
        axes = self.facts.axes_of(unsqueeze)
        inserted = normalize_axes(axes, len(perm)) if isinstance(axes, list) else None
        if inserted is None:
            return False
        kept = [axis for axis in perm if axis not in inserted]
        if kept != sorted(kept):
            return False
        moved = [i for i, axis in enumerate(perm) if axis in inserted]
        if self.opset < 13:
            set_attr(unsqueeze, "axes", moved)
        else:
            name = self.edits.new_initializer(np.array(moved, np.int64),
                                              f"{unsqueeze.name or 'Unsqueeze'}_axes",
                                              self.edits.nodes.order(unsqueeze))
            self.edits.set_input(unsqueeze, 1, name)
        shape = self.facts.shape(source)
        self.facts.learn_shape(source, transposed_shape(shape, perm) if shape is not None and (
            len(shape) == len(perm)) else None)
        logger.debug("absorb %s into %s: axes %s -> %s", node.name, unsqueeze.name, axes, moved)
        self.edits.set_perm(node, tuple(range(len(perm))))
        self._drop_identity(node)
        return True

    def _drop_identity(self, node: onnx.NodeProto) -> None:
        source, output = node.input[0], node.output[0]
        self.stats.identity_dropped += 1
        if output not in self.index.outputs and output not in self.index.implicit:
            for user in self.index.readers(output):
                self.edits.replace_reads(user, output, source)
            self.edits.remove_node(node)
            return
        producer = self.index.producer.get(source)
        if (producer is not None and source not in self.index.outputs
                and source not in self.index.implicit and output not in self.index.implicit):
            # The graph output keeps its name: the producer writes it directly and the other
            # readers of the source read it under that name.
            self.edits.set_output(producer, list(producer.output).index(source), output)
            self.renamed[source] = output
            self.whole_shapes.renamed(source, output)  # rule 7a's whole Shape reads it so
            self.edits.remove_node(node)
            for user in self.index.readers(source):
                self.edits.replace_reads(user, source, output)
            return
        self.edits.no_transpose(node, "Identity")

    # ------------------------------------------------------------ rule 4: a consumer changes
    def _apply(self, user: onnx.NodeProto, plan: Plan, push: _Push, perm: Perm) -> None:
        edits = self.edits
        order = edits.nodes.order(user)
        done: dict[str, str] = {push.transposed: push.source}
        for slot in plan.data_slots:
            name = user.input[slot]
            if name not in done:
                done[name] = self._untranspose_operand(
                    name, perm, order, push, plan.unsqueeze.get(slot))
            if done[name] != name:
                edits.set_input(user, slot, done[name])
        for key, value in plan.attrs.items():
            set_attr(user, key, value)
        for slot, value in plan.const_inputs.items():
            while len(user.input) <= slot:
                user.input.append("")
            new = edits.new_initializer(value, f"{user.name or user.op_type}_{slot}", order)
            edits.set_input(user, slot, new)
        for slot, indices in plan.gather.items():
            edits.set_input(user, slot, edits.gathered(user.input[slot], indices, order))
        for position, out_perm in enumerate(plan.out_perms):
            out = user.output[position] if position < len(user.output) else ""
            if not out or out_perm is None or is_identity(out_perm):
                continue  # a result whose layout does not change (a full reduction) keeps its name
            moved = edits.names.fresh(f"{out}_untransposed")
            shape = self.facts.shape(out)
            if shape is not None and len(shape) == len(out_perm):
                self.facts.learn_shape(moved, untransposed_shape(shape, out_perm))
            edits.set_output(user, position, moved)
            if self.index.is_read(out):
                edits.new_transpose(moved, out_perm, out, order)
        self.stats.pushed_through += 1
        self.pushes.passed(user)
        edits.modified = True
        for name in user.input:
            if is_transpose(self.index.producer.get(name)):
                edits.enqueue(self.index.producer[name])

    def _untranspose_operand(self, name: str, perm: Perm, order: int, push: _Push,
                             lower_rank: list[int] | None) -> str:
        """``name`` (an operand in the transposed layout) in the untransposed one (case 4b), by
        the route the look-ahead counted (:func:`.cost.operand_route`)."""
        route = operand_route(self.facts, name, perm, push.transposed, lower_rank is not None)
        if route == "scalar":
            return name
        producer = self.index.producer.get(name)
        if route == "producer":
            return producer.input[0]  # type: ignore[union-attr]  # T(p^-1)(T(p)(z)) is z
        inverse = invert(perm)
        if route == "sibling":
            sibling = sibling_transpose(self.facts, name, inverse, push.transposed)
            assert sibling is not None
            return sibling.output[0]
        value = self.facts.const_value(name) if route == "constant" else None
        if value is not None:
            moved = untransposed_constant(value, inverse)
            if moved is None:
                return name
            self.stats.folded_into_constants += 1
            return self.edits.new_initializer(moved, f"{name}_transposed", order)
        operand_rank = self.facts.rank(name)
        if route == "unsqueeze" and operand_rank is not None:
            return self._untranspose_lower_rank(name, perm, operand_rank, order, push)
        arriving = Lookahead(self.facts, self.pushes, push.source).arriving_transpose(
            name, push.reader, perm, push.transposed)
        new = self._compensate(name, inverse, order, push)
        if arriving is not None and arriving is not PLANNED:
            # The compensation waits for the Transpose on its way to cancel it; pushed on first,
            # the two would chase each other round the node.
            self.compensations.wait(self.index.producer[new])
            self.edits.enqueue(arriving)
        return new

    def _untranspose_lower_rank(self, name: str, perm: Perm, operand_rank: int, order: int,
                                push: _Push) -> str:
        """Case 4b: a non-constant operand of lower rank gets an Unsqueeze that puts its axes
        where the untransposed layout has them, and a Transpose only when the permutation
        reorders its own axes."""
        rank = len(perm)
        if keeps_order(perm, operand_rank):
            positions = set(operand_positions(perm, operand_rank))
            return self.edits.unsqueezed(name, [a for a in range(rank) if a not in positions],
                                         order)
        leading = self.edits.unsqueezed(name, list(range(rank - operand_rank)), order)
        return self._compensate(leading, invert(perm), order, push)

    def _compensate(self, name: str, inverse: Perm, order: int, push: _Push) -> str:
        new = self.edits.names.fresh(f"{name}_transposed")
        shape = self.facts.shape(name)
        if shape is not None and len(shape) == len(inverse):
            self.facts.learn_shape(new, transposed_shape(shape, inverse))
        compensation = self.edits.new_transpose(name, inverse, new, order)
        self.compensations.add(compensation, push.reader)
        return new

    # ------------------------------------------------------------ rule 7
    def _absorb(self, user: onnx.NodeProto, plan: Absorb, transposed: str, source: str,
                perm: Perm) -> None:
        """Rule 7: ``user`` reads ``source`` instead of ``T(perm)(source)``."""
        self.stats.absorbed_by_consumers += 1
        self.edits.modified = True
        if plan.kind == "type":
            self.edits.replace_reads(user, transposed, source)
            return
        if plan.kind == "shape" and self._absorb_shape(user, source, perm):
            return
        if plan.kind == "flatten":
            self._reorder_weights(user, transposed, perm)
        self.edits.set_input(user, 0, source)

    def _absorb_shape(self, user: onnx.NodeProto, source: str, perm: Perm) -> bool:
        """Rule 7a: ``Shape(T(p)(x))`` is ``Gather(Shape(x), p[start:end])``; every Shape of
        the Transpose reads one whole Shape of the source. True when ``user`` is gone."""
        edits = self.edits
        order = edits.nodes.order(user)
        label = user.name or user.op_type
        rank = len(perm)
        start, end = shape_bounds(user, rank)
        picked = list(perm[start:end])
        if picked == list(range(start, end)):
            return False
        out = user.output[0]
        whole = self.whole_shapes.get(source)
        gone = whole is not None
        if whole is None:
            del user.attribute[:]
            whole = edits.names.fresh(f"{out}_untransposed")
            self.whole_shapes.set(source, whole)
            self.facts.learn_shape(whole, (rank,))
            edits.set_output(user, 0, whole)
        else:
            edits.remove_node(user)
        indices = edits.new_initializer(np.array(picked, np.int64), f"{label}_perm", order)
        edits.add_node(onnx.helper.make_node(
            "Gather", [whole, indices], [out], axis=0, name=edits.names.fresh(f"{label}_gather")),
            order)
        return gone

    def _reorder_weights(self, user: onnx.NodeProto, transposed: str, perm: Perm) -> None:
        """Rule 7b: the weights after a Flatten read their rows in the untransposed order."""
        shape = self.facts.shape(transposed)
        assert shape is not None
        untransposed = [0] * len(perm)  # dims 1.. of the source (the batch stays first)
        for i, axis in enumerate(perm[1:], 1):
            untransposed[axis] = int(shape[i])  # type: ignore[arg-type]
        positions = np.arange(int(np.prod(untransposed[1:]))).reshape(untransposed[1:])
        # positions[j] of the transposed flattening is row j's place in the untransposed one
        positions = positions.transpose([axis - 1 for axis in perm[1:]]).reshape(-1)
        rows = np.argsort(positions)
        for reader in self.index.readers(user.output[0]):
            weights = reader.input[1]
            value = self.facts.const_value(weights)
            assert value is not None
            side = 1 if reader.op_type == "Gemm" and attr(reader, "transB", 0) else 0
            moved = np.ascontiguousarray(np.take(value, rows, axis=side))
            name = self.edits.new_initializer(moved, f"{weights}_reordered",
                                              self.edits.nodes.order(reader))
            self.edits.set_input(reader, 1, name)
            self.stats.folded_into_constants += 1

    # ------------------------------------------------------------ rule 5
    def _size_one_moves(self) -> None:
        """Rule 5: a Transpose left that only moves size-1 axes becomes a Reshape, when its
        target is a valid constant (at most one unknown size, inferred; unknown sizes that stay
        in place copied with 0)."""
        if self.opset < 5 or self.ir_version < 4:
            return  # no shape input before opset 5; at IR 3 the shape would be one node more
        nodes = self.edits.nodes
        for key in range(len(nodes)):
            node = nodes[key]
            if nodes.is_dead(key) or not is_transpose(node):
                continue
            target = self._size_one_target(node)
            if target is None:
                continue
            if self.budget is not None and not self.budget.take(self._reshape_cost(node, target)):
                continue
            shape_name = self.edits.new_initializer(
                np.array(target, np.int64), f"{node.output[0]}_shape", nodes.order(node))
            self.edits.no_transpose(node, "Reshape")
            node.input.append("")
            self.edits.set_input(node, len(node.input) - 1, shape_name)
            self.stats.converted_to_reshape += 1

    def _reshape_cost(self, node: onnx.NodeProto, target: list[int]) -> int:
        """The bytes rule 5 adds to the stored model for ``node``: the target constant (an
        initializer, or a Constant node at IR 3) and its name read, less the ``perm``
        attribute and the shorter op type. A name made unique may be a few bytes longer."""
        name = f"{node.output[0]}_shape_00"
        tensor = numpy_helper.from_array(np.array(target, np.int64), name)
        stored = (onnx.helper.make_node("Constant", [], [name], value=tensor).ByteSize()
                  if self.facts.constant_nodes else tensor.ByteSize())
        perm = sum(a.ByteSize() + 2 for a in node.attribute if a.name == "perm")
        return stored + 3 + len(name) + 2 - perm + len("Reshape") - len(node.op_type)

    def _size_one_target(self, node: onnx.NodeProto) -> list[int] | None:
        perm = self.facts.transpose_perm(node)
        if perm is None:
            return None
        shape = self.facts.shape(node.output[0])
        source_shape = self.facts.shape(node.input[0])
        if (shape is None or len(shape) != len(perm)) and source_shape is not None and (
            len(source_shape) == len(perm)
        ):
            shape = transposed_shape(source_shape, perm)
        if shape is None or len(shape) != len(perm) or not moves_only_ones(shape, perm):
            return None
        # An unknown size is copied (0) where the axis stays in place; at most one other is
        # inferred (-1). ONNX Runtime refuses a target with two -1s; a literal 0 copies a size.
        unknown = [i for i, d in enumerate(shape) if d is None and perm[i] != i]
        if len(unknown) > 1 or 0 in shape:
            return None
        return [d if d is not None else (0 if perm[i] == i else -1) for i, d in enumerate(shape)]

