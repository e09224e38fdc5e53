"""The driver: rules 1-7 on one graph, and the edits that carry them out.

A worklist of Transposes, upstream first; each is composed with the Transpose feeding it, dropped
when it is the identity or unread, absorbed into an Unsqueeze or a constant, or pushed past its
consumers when the look-ahead (:mod:`.cost`) says the count of Transposes goes down. Edits keep
the live :class:`graphfix.graph.Index` up to date; the graph itself is written back once, at
the end, in topological order. Each push is logged at DEBUG with the change in nodes the
look-ahead counted for its own edits and the change they made (``nodes_counted``,
``nodes_made`` on the record).
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import onnx
from onnx import numpy_helper

from graphfix.graph import Names
from graphfix.passes.eliminate_transposes.cost import (
    PLANNED,
    Decision,
    Lookahead,
    keeps_order,
    operand_positions,
    operand_route,
    sibling_transpose,
    untransposed_constant,
)
from graphfix.passes.eliminate_transposes.edits import Edits, Stats
from graphfix.passes.eliminate_transposes.facts import ShapeFacts, shape_bounds
from graphfix.passes.eliminate_transposes.absorb import Absorb
from graphfix.passes.eliminate_transposes.handlers import Plan
from graphfix.passes.eliminate_transposes.ops import (
    DEFAULT_DOMAINS,
    attr,
    is_transpose,
    set_attr,
)
from graphfix.passes.eliminate_transposes.perm import (
    Perm,
    compose,
    invert,
    is_identity,
    moves_only_ones,
    normalize_axes,
    transposed_shape,
    untransposed_shape,
)

__all__ = ["Rewriter"]

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


class Rewriter(Edits):
    """Rules 1-7 on one graph."""

    def __init__(self, graph: onnx.GraphProto, *, opset: int, ir_version: int, names: Names,
                 inferred: ShapeFacts, stats: Stats, keep_reduction_order: bool,
                 liftable: frozenset[str] = frozenset()) -> None:
        super().__init__(graph, opset=opset, ir_version=ir_version, names=names,
                         inferred=inferred, stats=stats,
                         keep_reduction_order=keep_reduction_order)
        self.renamed: dict[str, str] = {}  # tensors renamed to a graph output's name
        self.pinned: set[int] = set()  # compensations waiting for an arriving Transpose
        self.pushes = 0
        self.max_pushes = 8 * len(self.nodes) + 64
        self.pushed: dict[int, int] = {}  # node -> Transposes pushed through it so far
        self.compensates: dict[int, int] = {}  # compensating Transpose -> the node it feeds
        self.whole_shapes: dict[str, str] = {}  # source -> its whole Shape (rule 7a)
        self.liftable = liftable  # scan outputs whose Transpose moves out of the loop (rule 8)

    # ------------------------------------------------------------ the worklist
    def run(self) -> None:
        self._enqueue_all()
        for _ in range(_MAX_SWEEPS):
            changed = False
            while self.worklist:
                node = self.worklist.pop()
                self.queued.discard(id(node))
                if id(node) not in self.dead and self._visit(node):
                    changed = True
            if not changed:
                break
            self._enqueue_all()
        self._size_one_moves()
        self._write_back()

    def _enqueue_all(self) -> None:
        for node in self.nodes:
            if is_transpose(node):
                self._enqueue(node)
        self.worklist.reverse()  # pop in graph order: upstream Transposes move first

    def _visit(self, node: onnx.NodeProto) -> bool:
        perm = self.facts.transpose_perm(node)
        if perm is None:
            logger.debug("keep %s: rank unknown and no perm", node.name)
            return False
        perm, changed = self._compose_chain(node, perm)
        if not self.index.is_read(node.output[0]):
            self._remove_node(node)  # Rule 1: nothing reads it
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
            self._set_perm(node, perm)
            self._set_input(node, 0, producer.input[0])  # type: ignore[union-attr]
            self.modified = changed = True

    def _fold(self, node: onnx.NodeProto, perm: Perm) -> bool:
        """Rule 3: ``T(p)(constant)`` is a constant (at a graph output too, where it becomes a
        Constant node unless an initializer may name it)."""
        source, output = node.input[0], node.output[0]
        value = self.facts.const_value(source)
        if value is None or value.ndim != len(perm):
            return False
        tensor = numpy_helper.from_array(np.ascontiguousarray(value.transpose(perm)), output)
        self._remove_node(node)
        self._add_constant(tensor, self.order[id(node)], as_node=output in self.index.outputs)
        self.stats.folded_into_constants += 1
        for user in self.index.readers(output):
            if is_transpose(user):
                self._enqueue(user)
        return True

    def _fold_into_dequantize(self, node: onnx.NodeProto, perm: Perm) -> bool:
        """Rule 3b: ``T(p)(DequantizeLinear(q, scale, zero))`` of constant ``q`` (quantized
        weights) that only this Transpose reads: ``q`` is stored transposed and a per-axis
        ``axis`` moves to where ``p`` puts it; the Transpose goes."""
        dq = self.index.producer.get(node.input[0])
        if dq is None or dq.op_type != "DequantizeLinear" or dq.domain not in DEFAULT_DOMAINS:
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
        moved = self._new_initializer(np.ascontiguousarray(quantized.transpose(perm)),
                                      f"{dq.input[0]}_transposed", self.order[id(dq)])
        self._set_input(dq, 0, moved)
        self.facts.learn_shape(out, transposed_shape(quantized.shape, perm))
        self.stats.folded_into_constants += 1
        self._drop_identity(node)  # T(p) of the stored-transposed weights is the identity
        return True

    def _push(self, node: onnx.NodeProto, perm: Perm) -> bool:
        """Rule 4: move ``node`` past its consumers when that lowers the count of Transposes
        (and adds no more nodes than it removes)."""
        source, output = node.input[0], node.output[0]
        if id(node) in self.pinned:
            logger.debug("keep %s: waits for the Transpose arriving at %s", node.name, source)
            return False
        reader = self.compensates.get(id(node))
        if reader in self.index.consumers.get(output, {}) and self.pushed.get(reader, 0) >= 2:
            # Pushed back through the node it compensates for, it would undo that push; once
            # the node has seen a second push, the two Transposes are trading places round it.
            logger.debug("keep %s: would undo the push it compensates for", node.name)
            return False
        look = Lookahead(self.facts, self.pushed, source, self.liftable,
                         frozenset(s for s in self.whole_shapes if self._whole_shape(s)))
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
        self.pushes += 1
        if self.pushes > self.max_pushes:
            logger.debug("keep %s: push limit of %d reached", node.name, self.max_pushes)
            return False
        self._carry_out(node, perm, decision)
        return True

    def _carry_out(self, node: onnx.NodeProto, perm: Perm, decision: Decision) -> None:
        before = self.node_count
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
        if id(node) not in self.dead:
            self._remove_node(node)
        # The look-ahead's count of the push's own edits beside what they made: the record the
        # tests hold the look-ahead to.
        counted, made = decision.nodes_now - 1, self.node_count - before
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
        self._set_perm(user, composed)
        self._set_input(user, 0, source)
        # Settle the cancellation now, as the cost check counted it: left for later, a pending
        # identity could be composed back into a real permutation by the next push.
        if not self.index.is_read(user.output[0]):
            self._remove_node(user)
        elif is_identity(composed):
            self._drop_identity(user)
        else:
            self._enqueue(user)

    def _absorb_into_unsqueeze(self, node: onnx.NodeProto, perm: Perm) -> bool:
        """Rule 6: ``T(p)(Unsqueeze(x, axes))`` where ``p`` only moves the inserted axes is an
        Unsqueeze that inserts them where ``p`` puts them."""
        source = node.input[0]
        unsqueeze = self.index.producer.get(source)
        if unsqueeze is None or unsqueeze.op_type != "Unsqueeze" or (
            unsqueeze.domain not in DEFAULT_DOMAINS
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
            order = self.order[id(unsqueeze)]
            name = self._new_initializer(np.array(moved, np.int64),
                                         f"{unsqueeze.name or 'Unsqueeze'}_axes", order)
            self._set_input(unsqueeze, 1, name)
        shape = self.facts.shape(source)
        self.facts.learn_shape(source, transposed_shape(shape, perm) if shape is not None and (
            len(shape) == len(perm)) else None)
        logger.debug("absorb %s into %s: axes %s -> %s", node.name, unsqueeze.name, axes, moved)
        self._set_perm(node, tuple(range(len(perm))))
        self._drop_identity(node)
        return True

    def _drop_identity(self, node: onnx.NodeProto) -> None:
        source, output = node.input[0], node.output[0]
        self.stats.identity_dropped += 1
        if output not in self.index.outputs and output not in self.index.implicit:
            for user in self.index.readers(output):
                self._replace_reads(user, output, source)
            self._remove_node(node)
            return
        producer = self.index.producer.get(source)
        if (producer is not None and source not in self.index.outputs
                and source not in self.index.implicit and output not in self.index.implicit):
            # The graph output keeps its name: the producer writes it directly and the other
            # readers of the source read it under that name.
            self.index.set_output(producer, list(producer.output).index(source), output)
            self.renamed[source] = output
            if source in self.whole_shapes:  # rule 7a's whole Shape reads it under that name
                self.whole_shapes[output] = self.whole_shapes.pop(source)
            self._remove_node(node)
            for user in self.index.readers(source):
                self._replace_reads(user, source, output)
            return
        node.op_type = "Identity"
        del node.attribute[:]
        self.facts.perm_changed(node, None)
        self.modified = True

    # ------------------------------------------------------------ rule 4: a consumer changes
    def _apply(self, user: onnx.NodeProto, plan: Plan, push: _Push, perm: Perm) -> None:
        order = self.order[id(user)]
        done: dict[str, str] = {push.transposed: push.source}
        for slot in plan.data_slots:
            name = user.input[slot]
            if name not in done:
                done[name] = self._untranspose_operand(
                    name, perm, order, push, plan.unsqueeze.get(slot))
            if done[name] != name:
                self._set_input(user, slot, done[name])
        for key, value in plan.attrs.items():
            set_attr(user, key, value)
        for slot, value in plan.const_inputs.items():
            while len(user.input) <= slot:
                user.input.append("")
            new = self._new_initializer(value, f"{user.name or user.op_type}_{slot}", order)
            self._set_input(user, slot, new)
        for slot, indices in plan.gather.items():
            self._set_input(user, slot, self._gathered(user.input[slot], indices, order))
        for position, out_perm in enumerate(plan.out_perms):
            out = user.output[position] if position < len(user.output) else ""
            if not out or out_perm is None or is_identity(out_perm):
                continue  # a result whose layout does not change (a full reduction) keeps its name
            moved = self.names.fresh(f"{out}_untransposed")
            shape = self.facts.shape(out)
            if shape is not None and len(shape) == len(out_perm):
                self.facts.learn_shape(moved, untransposed_shape(shape, out_perm))
            self.index.set_output(user, position, moved)
            if self.index.is_read(out):
                self._new_transpose(moved, out_perm, out, order)
        self.stats.pushed_through += 1
        self.pushed[id(user)] = self.pushed.get(id(user), 0) + 1
        self.modified = True
        for name in user.input:
            if is_transpose(self.index.producer.get(name)):
                self._enqueue(self.index.producer[name])

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
            return self._new_initializer(moved, f"{name}_transposed", order)
        operand_rank = self.facts.rank(name)
        if route == "unsqueeze" and operand_rank is not None:
            return self._untranspose_lower_rank(name, perm, operand_rank, order, push)
        arriving = Lookahead(self.facts, self.pushed, push.source).arriving_transpose(
            name, push.reader, perm, push.transposed)
        new = self._compensate(name, inverse, order, push)
        if arriving is not None and arriving is not PLANNED:
            # The compensation waits for the Transpose on its way to cancel it; pushed on first,
            # the two would chase each other round the node.
            self.pinned.add(id(self.index.producer[new]))
            self._enqueue(arriving)
        return new

    def _untranspose_lower_rank(self, name: str, perm: Perm, operand_rank: int, order: int,
                                push: _Push) -> str:
        """Case 4b: a non-constant operand of lower rank gets an Unsqueeze that puts its axes
        where the untransposed layout has them, and a Transpose only when the permutation
        reorders its own axes."""
        rank = len(perm)
        if keeps_order(perm, operand_rank):
            positions = set(operand_positions(perm, operand_rank))
            return self._unsqueezed(name, [a for a in range(rank) if a not in positions], order)
        leading = self._unsqueezed(name, list(range(rank - operand_rank)), order)
        return self._compensate(leading, invert(perm), order, push)

    def _compensate(self, name: str, inverse: Perm, order: int, push: _Push) -> str:
        new = self.names.fresh(f"{name}_transposed")
        shape = self.facts.shape(name)
        if shape is not None and len(shape) == len(inverse):
            self.facts.learn_shape(new, transposed_shape(shape, inverse))
        compensation = self._new_transpose(name, inverse, new, order)
        self.compensates[id(compensation)] = id(push.reader)
        return new

    # ------------------------------------------------------------ rule 7
    def _absorb(self, user: onnx.NodeProto, plan: Absorb, transposed: str, source: str,
                perm: Perm) -> None:
        """Rule 7: ``user`` reads ``source`` instead of ``T(perm)(source)``."""
        self.stats.absorbed_by_consumers += 1
        self.modified = True
        if plan.kind == "type":
            self._replace_reads(user, transposed, source)
            return
        if plan.kind == "shape" and self._absorb_shape(user, source, perm):
            return
        if plan.kind == "flatten":
            self._reorder_weights(user, transposed, perm)
        self._set_input(user, 0, source)

    def _absorb_shape(self, user: onnx.NodeProto, source: str, perm: Perm) -> bool:
        """Rule 7a: ``Shape(T(p)(x))`` is ``Gather(Shape(x), p[start:end])``; every Shape of
        the Transpose reads one whole Shape of the source. True when ``user`` is gone."""
        order = self.order[id(user)]
        label = user.name or user.op_type
        rank = len(perm)
        start, end = shape_bounds(user, rank)
        picked = list(perm[start:end])
        if picked == list(range(start, end)):
            return False
        out = user.output[0]
        whole = self._whole_shape(source)
        gone = whole is not None
        if whole is None:
            del user.attribute[:]
            whole = self.names.fresh(f"{out}_untransposed")
            self.whole_shapes[source] = whole
            self.facts.learn_shape(whole, (rank,))
            self.index.set_output(user, 0, whole)
        else:
            self._remove_node(user)
        indices = self._new_initializer(np.array(picked, np.int64), f"{label}_perm", order)
        self._add_node(onnx.helper.make_node(
            "Gather", [whole, indices], [out], axis=0, name=self.names.fresh(f"{label}_gather")),
            order)
        return gone

    def _whole_shape(self, source: str) -> str | None:
        """Rule 7a's whole ``Shape(source)``, while it is there (shape math nothing reads goes)."""
        whole = self.whole_shapes.get(source)
        return whole if whole is not None and whole in self.index.producer else None

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
            name = self._new_initializer(moved, f"{weights}_reordered", self.order[id(reader)])
            self._set_input(reader, 1, name)
            self.stats.folded_into_constants += 1

    # ------------------------------------------------------------ rule 5 and write-back
    def _size_one_moves(self) -> None:
        """Rule 5: a Transpose left that only moves size-1 axes becomes a Reshape, when its
        target is a valid constant (at most one unknown size, inferred; unknown sizes that stay
        in place copied with 0)."""
        if self.opset < 5 or self.ir_version < 4:
            return  # no shape input before opset 5; at IR 3 the shape would be one node more
        for node in list(self.nodes):
            if id(node) in self.dead or not is_transpose(node):
                continue
            target = self._size_one_target(node)
            if target is None:
                continue
            shape_name = self._new_initializer(np.array(target, np.int64),
                                               f"{node.output[0]}_shape", self.order[id(node)])
            node.op_type = "Reshape"
            del node.attribute[:]
            self.facts.perm_changed(node, None)
            node.input.append(shape_name)
            self.index.consumers.setdefault(shape_name, {})[id(node)] = node
            self.stats.converted_to_reshape += 1
            self.modified = True

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

