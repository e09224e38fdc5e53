"""The look-ahead: what moving a Transpose past its consumers costs, in Transposes and nodes.

``push_cost(name, perm)`` is the change in the number of Transposes, and in the number of nodes
(Transposes included), from moving ``T(perm)`` on ``name`` past all of its consumers, the
Transpose itself not counted, with the plan for each consumer; the driver pushes when the
Transposes go down and the nodes do not go up. It counts the compensations added (none when an
operand already has that Transpose, or when another Transpose is on its way to it through
elementwise ops) and, looking ahead within a budget, whether each new output Transpose will
itself cancel further down.

Nodes are counted as the edits (:mod:`.rewrite`, :mod:`.edits`) make them, rule by rule: the
Transposes placed and the compensations; a plan's Unsqueezes and Gathers; rule 7a's Gather (and
the one whole ``Shape`` it reads); the ``Identity`` rule 1 leaves at a graph output; a new
constant's ``Constant`` node at IR 3, where every initializer is a graph input; less the
Transposes, constants and shape math nothing reads any more. :attr:`Decision.nodes_now` is the
change the step's own edits make, which the tests hold the edits to.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import NamedTuple

import numpy as np
import onnx

from graphfix.graph import holds_graph
from .facts import CHAIN_DEPTH, GraphFacts, shape_bounds
from .absorb import Absorb, absorber
from .handlers import HANDLERS, Plan
from .nodes import NodeTable
from .ops import STANDARD_DOMAINS, is_transpose
from .perm import (
    Perm,
    compose,
    invert,
    is_identity,
    moves_only_ones,
)

__all__ = ["Decision", "Tally", "Lookahead", "Pushes", "PLANNED", "LOOKAHEAD_BUDGET",
           "MAX_PUSHES_PER_NODE", "keeps_order", "operand_positions", "operand_route",
           "sibling_transpose", "untransposed_constant"]

logger = logging.getLogger(__name__)

# Transposes one node lets through before it becomes a barrier (a cycle breaker: a node sees
# one or two in every graph met so far).
MAX_PUSHES_PER_NODE = 4
# How far the cost check looks ahead, in consumers visited per decision: every rule table, the
# peers' suites and the Keras/TFLite models decide the same at 32 as at 64, and a residual chain
# (each block's output read by the next block and its skip connection) is walked half as far
# at every step.
LOOKAHEAD_BUDGET = 32
# What the look-ahead finds arriving at an operand when the Transpose is not placed yet.
PLANNED = onnx.NodeProto(op_type="Transpose", name="planned")

Step = tuple[onnx.NodeProto, "Plan | Absorb | None"]


@dataclasses.dataclass
class _Group:
    """What the steps of one push share, as the edits carry them out one after the other."""

    # (tensor, reader): reads the edits take away; a producer may go with them. ``read``: the
    # tensors they make nodes read instead.
    released: list[tuple[str, onnx.NodeProto]] = dataclasses.field(default_factory=list)
    read: set[str] = dataclasses.field(default_factory=set)
    # Tensors an earlier step gave T(perm) (read past by a later one) or T(perm^-1) (shared).
    placed: set[str] = dataclasses.field(default_factory=set)
    compensated: set[str] = dataclasses.field(default_factory=set)
    # Whether rule 1 may still give a graph output's name to the untransposed tensor.
    renamable: bool = True
    # Whether a Shape needs rule 7a's Gather (of one whole Shape).
    gathers_shape: bool = False


class Tally(NamedTuple):
    """A change in Transposes and in nodes (Transposes included): ``transposes`` and ``nodes``
    once the Transposes placed have moved on as far as the look-ahead sees, ``now`` the nodes
    the edits of this step alone add (+) or remove (-). A tuple: the look-ahead adds
    hundreds of thousands of them on a large graph."""

    transposes: int = 0
    nodes: int = 0
    now: int = 0

    def __add__(self, other: tuple[int, ...]) -> Tally:  # type: ignore[override]
        return Tally(self[0] + other[0], self[1] + other[1], self[2] + other[2])


def settled(transposes: int, nodes: int | None = None) -> Tally:
    """A change the step makes itself, the look-ahead adding nothing to it (``nodes``: the
    Transposes unless told)."""
    nodes = transposes if nodes is None else nodes
    return Tally(transposes, nodes, nodes)


@dataclasses.dataclass
class Decision:
    """A push: what it changes (the pushed Transpose not counted) and what happens at each
    consumer."""

    tally: Tally
    steps: list[Step]

    @property
    def cost(self) -> int:
        """Transposes added (+) or removed (-), looking ahead."""
        return self.tally.transposes

    @property
    def nodes(self) -> int:
        """Nodes added (+) or removed (-), Transposes included, looking ahead."""
        return self.tally.nodes

    @property
    def nodes_now(self) -> int:
        """Nodes the step's own edits add (+) or remove (-)."""
        return self.tally.now

    @property
    def pays(self) -> bool:
        """With the pushed Transpose gone: fewer Transposes and no more nodes."""
        return self.cost - 1 < 0 and self.nodes - 1 <= 0


class Pushes:
    """The pushes of one graph's rewrite, a cycle breaker both ways: ``limit`` in all (the
    driver's), :data:`MAX_PUSHES_PER_NODE` through any one node (the look-ahead's barrier).
    Lifetime: one graph's rewrite; a node is counted under its key."""

    def __init__(self, nodes: NodeTable, limit: int) -> None:
        self.nodes = nodes
        self.limit = limit
        self.made = 0
        self._through: dict[int, int] = {}  # node key -> Transposes pushed past it

    def take(self) -> bool:
        """Count one more push; False once the pushes are past the limit."""
        self.made += 1
        return self.made <= self.limit

    def through(self, node: onnx.NodeProto) -> int:
        """Transposes pushed past ``node`` so far."""
        return self._through.get(self.nodes.key(node), 0)

    def passed(self, node: onnx.NodeProto) -> None:
        """A Transpose was pushed past ``node``."""
        key = self.nodes.key(node)
        self._through[key] = self._through.get(key, 0) + 1


class Lookahead:
    """The cost check of one push decision: ``origin`` is the input of the Transpose being
    pushed, ``pushes`` counts the pushes each node has seen, ``liftable`` names the scan
    outputs whose Transpose moves out of the loop (rule 8), ``whole_shapes`` the tensors whose
    whole ``Shape`` rule 7a already reads. Lifetime: one decision."""

    def __init__(self, facts: GraphFacts, pushes: Pushes, origin: str,
                 liftable: frozenset[str] = frozenset(),
                 whole_shapes: frozenset[str] = frozenset()) -> None:
        self.facts = facts
        self.liftable = liftable
        self.whole_shapes = whole_shapes
        self.index = facts.index
        self.nodes = facts.nodes
        self.pushes = pushes
        self.origin = origin
        self.budget = LOOKAHEAD_BUDGET
        self.constant = facts.constant_nodes  # nodes a new constant takes

    @property
    def exhausted(self) -> bool:
        return self.budget < 0

    # ------------------------------------------------------------ operands
    def operand_cost(self, name: str, node: onnx.NodeProto, perm: Perm, source: str,
                     lower_rank: bool, group: _Group) -> Tally:
        """What bringing operand ``name`` of ``node`` from the transposed layout ``perm`` back to
        the untransposed one changes, taken as the edits take it (:func:`operand_route`, after
        the push's earlier steps); a constant rewritten releases the old one."""
        if name in group.placed:  # T(p^-1)(T(p)(z)) is z: the Transpose goes with its last reader
            return settled(-1) if self.index.only_reader(name, node) else Tally()
        if name in group.compensated:
            return Tally()  # the compensation an earlier step made serves
        route = operand_route(self.facts, name, perm, source, lower_rank)
        if route in ("scalar", "sibling"):
            return Tally()
        if route == "producer":  # z is read instead; the Transpose goes with its last reader
            group.released.append((name, node))
            group.read.add(self.index.producer[name].input[0])
            return Tally()
        if route == "constant":
            if not self.constant and name not in self.index.producer:
                return Tally()  # an initializer for an initializer
            value = self.facts.const_value(name)
            if value is None or untransposed_constant(value, invert(perm)) is None:
                return Tally()
            group.released.append((name, node))
            return settled(0, self.constant)
        if route == "unsqueeze":
            # An Unsqueeze (its axes a constant from opset 13), then a Transpose when the
            # permutation reorders the operand's own axes.
            rank = self.facts.rank(name)
            transposes = 0 if keeps_order(perm, rank) else 1  # type: ignore[arg-type]
            axes = self.constant if self.facts.opset >= 13 else 0
            return settled(transposes, 1 + axes + transposes)
        group.compensated.add(name)
        if self.arriving_transpose(name, node, perm, source) is not None:
            # The compensation stays until the Transpose arrives; then both go.
            return Tally(-1, -1, 1)
        return settled(1)

    def arriving_transpose(self, name: str, node: onnx.NodeProto, perm: Perm,
                           pushed: str) -> onnx.NodeProto | None:
        """The ``T(perm)`` that ``name``, read by ``node`` alone, comes from through a chain of
        single-reader elementwise ops it will be pushed through. It will reach ``node`` and
        cancel the compensation, so the operand costs what a direct ``T(perm)`` operand costs.
        The chain may end at ``pushed``, the transposed tensor being pushed now, whatever else
        reads it: that push moves the Transpose past all of its readers (``N(t, f(t))``, as in
        Swish ``t * Sigmoid(t)``)."""
        current, reader = name, node
        for _ in range(CHAIN_DEPTH):
            if current == pushed and current != name:
                producer = self.index.producer.get(current)
                if is_transpose(producer):
                    same = self.facts.transpose_perm(producer) == perm  # type: ignore[arg-type]
                    return producer if same else None
                # Looking ahead, ``pushed`` is the output of a node the Transpose was planned
                # into: it will carry T(perm) and be pushed past all of its readers the same way
                # (Swish after a Squeeze, as Keras's Conv1D converts).
                return PLANNED
            if not self.index.only_reader(current, reader) or current in self.index.implicit:
                return None
            producer = self.index.producer.get(current)
            if producer is None or producer.domain not in STANDARD_DOMAINS:
                return None
            if is_transpose(producer):
                return producer if self.facts.transpose_perm(producer) == perm else None
            step = self._elementwise_step(producer, perm)
            if step is None:
                return None
            current, reader = step, producer
        return None

    def _elementwise_step(self, producer: onnx.NodeProto, perm: Perm) -> str | None:
        """The one data input of an elementwise ``producer`` that a Transpose arriving there
        would come through, or None."""
        info = HANDLERS.get(producer.op_type)
        if info is None or not info.elementwise or sum(1 for o in producer.output if o) != 1:
            return None
        inputs = producer.input if info.variadic else producer.input[:1]
        data = [i for i in inputs if i and not (self.facts.rank(i) == 0
                                                or self.facts.is_constant(i))]
        if len(data) != 1:
            return None
        plan = info.handle(self.facts, producer, perm, data[0])
        if isinstance(plan, str) or plan.out_perms[0] != perm:
            return None
        return data[0]

    # ------------------------------------------------------------ consumers
    def consumer_cost(self, node: onnx.NodeProto, source: str, perm: Perm, group: _Group
                      ) -> tuple[Tally, Plan | Absorb] | None:
        """What moving ``T(perm)`` on tensor ``source`` past ``node`` (no Transpose) changes,
        and the plan; None: it cannot."""
        absorb = absorber(self.facts, node, source, perm)
        if absorb is not None:
            return self._absorb_cost(node, absorb, perm, group), absorb
        plan = self._plan(node, source, perm)
        if plan is None:
            return None
        tally = Tally()
        seen: set[str] = {source}
        for slot in plan.data_slots:
            name = node.input[slot]
            if self._chases(node, name, source):
                return None
            if name not in seen:
                seen.add(name)
                tally += self.operand_cost(name, node, perm, source, slot in plan.unsqueeze,
                                           group)
        for slot in plan.const_inputs:  # a new constant each; the old one released
            old = node.input[slot] if slot < len(node.input) else ""
            if old and list(node.input).count(old) == 1:
                group.released.append((old, node))
        if plan.const_inputs or plan.gather:
            tally += settled(0, self.constant * len(plan.const_inputs)
                             + (1 + self.constant) * len(plan.gather))
        for out, out_perm in zip(node.output, plan.out_perms):
            if out and out_perm is not None and not is_identity(out_perm) and (
                self.index.is_read(out)
            ):
                transposes, nodes = self.place_cost(out, out_perm)
                tally += Tally(transposes, nodes, 1)
                if out_perm == perm:
                    group.placed.add(out)
        return tally, plan

    def _absorb_cost(self, node: onnx.NodeProto, absorb: Absorb, perm: Perm,
                     group: _Group) -> Tally:
        """Rule 7: a Shape that picks dimensions the permutation moves becomes a Gather (of
        the one whole Shape, counted by :meth:`push_cost`), its indices a constant; a Flatten
        gets new weights for each product it feeds."""
        if absorb.kind == "shape" and _gathers(node, perm):
            group.gathers_shape = True
            return settled(0, self.constant)
        if absorb.kind == "flatten":
            readers = self.index.readers(node.output[0])
            group.released.extend((reader.input[1], reader) for reader in readers)
            return settled(0, self.constant * len(readers))
        return Tally()

    def _compose_cost(self, node: onnx.NodeProto, perm: Perm, group: _Group) -> Tally | None:
        """Rules 2 and 1: ``T(perm)`` composed into the Transpose ``node``; when the result is
        the identity, it goes, unless it writes a graph output the untransposed tensor cannot
        take the name of (it is a graph input or output, a subgraph reads it, or an earlier
        step renamed it): then rule 1 leaves an Identity."""
        outer = self.facts.transpose_perm(node)
        if outer is None or len(outer) != len(perm):
            return None
        out = node.output[0]
        if not self.index.is_read(out):
            return settled(-1)
        if not is_identity(compose(perm, outer)):
            return Tally()
        if out not in self.index.outputs and out not in self.index.implicit:
            return settled(-1)
        if group.renamable and out not in self.index.implicit:
            group.renamable = False
            return settled(-1)
        return settled(-1, 0)

    def _renamable(self, untransposed: str | None) -> bool:
        """Whether rule 1 can give a graph output's name to ``untransposed`` (None: the new
        output of a node a Transpose moved past, which can)."""
        return untransposed is None or untransposed in self.index.producer and (
            untransposed not in self.index.outputs and untransposed not in self.index.implicit)

    def freed(self, group: _Group) -> Tally:
        """The nodes (and Transposes) the edits drop once the reads the push releases are gone:
        a producer nothing reads any more goes when :meth:`GraphFacts.droppable` says so, and so
        on up the graph."""
        if not group.released:
            return Tally()
        key = self.nodes.key
        leaving: dict[str, set[int]] = {}  # tensor -> keys of the readers that let go of it
        todo: list[str] = []
        for name, reader in group.released:
            leaving.setdefault(name, set()).add(key(reader))
            todo.append(name)
        gone: dict[int, onnx.NodeProto] = {}
        while todo:
            name = todo.pop()
            node = self.index.producer.get(name)
            if node is None or key(node) in gone or name in self.index.outputs or (
                name in group.read
                or any(key(user) not in leaving[name] for user in self.index.readers(name))
            ) or not self.facts.droppable(node, name):
                continue
            gone[key(node)] = node
            for upstream in set(node.input) - {""}:
                leaving.setdefault(upstream, set()).add(key(node))
                todo.append(upstream)
        return settled(-sum(1 for node in gone.values() if is_transpose(node)), -len(gone))

    def _plan(self, node: onnx.NodeProto, source: str, perm: Perm) -> Plan | None:
        info = HANDLERS.get(node.op_type) if node.domain in STANDARD_DOMAINS else None
        if info is None:
            logger.debug("barrier %s (%s): no handler for %s::%s", node.name, source,
                         node.domain or "ai.onnx", node.op_type)
            return None
        if holds_graph(node):
            return None
        if self.pushes.through(node) >= MAX_PUSHES_PER_NODE:
            # Two Transposes that keep trading places round a node (each move looks like a
            # gain to the look-ahead) would otherwise spin until the global push limit.
            logger.debug("barrier %s (%s): pushed through %d times already", node.name,
                         node.op_type, MAX_PUSHES_PER_NODE)
            return None
        plan = info.handle(self.facts, node, perm, source)
        if isinstance(plan, str):
            logger.debug("barrier %s (%s): %s", node.name, node.op_type, plan)
            return None
        return plan

    def _chases(self, node: onnx.NodeProto, operand: str, source: str) -> bool:
        """``N(x, T(x))`` or ``N(t, T(t))``: the push would only trade places with the
        operand's own Transpose (``x + x^T``), and the two could chase each other."""
        if operand == self.origin:
            logger.debug("barrier %s (%s): reads the untransposed %s too", node.name,
                         node.op_type, operand)
            return True
        producer = self.index.producer.get(operand)
        if producer is not None and producer.op_type == "Transpose" and (
            producer.input[0] == source
        ):
            logger.debug("barrier %s (%s): reads %s through another Transpose too",
                         node.name, node.op_type, source)
            return True
        return False

    def place_cost(self, name: str, perm: Perm) -> tuple[int, int]:
        """Transposes and nodes that remain from putting ``T(perm)`` on ``name`` (read) and
        pushing it on: one of each when it stays where it is (the driver pushes it on only
        when that pays, as :attr:`Decision.pays` says), less when it can travel on and cancel."""
        if name in self.liftable and not self.index.readers(name):
            return 0, 1  # it moves out of the loop (rule 8): gone from the body, a node outside
        shape = self.facts.shape(name)
        if shape is not None and len(shape) == len(perm) and None not in shape and (
            tuple(shape[a] for a in perm) == tuple(shape)
            and moves_only_ones(shape, perm)
        ):
            # It moves only size-1 axes in place: the identity (rule 1), an Identity node where
            # a subgraph reads it.
            return 0, int(name in self.index.implicit)
        decision = self.push_cost(name, perm)
        if decision is None or not decision.pays:
            return 1, 1
        return decision.cost, decision.nodes

    def push_cost(self, name: str, perm: Perm, untransposed: str | None = None
                  ) -> Decision | None:
        """The decision to move ``T(perm)`` on ``name`` past all of its consumers; None when
        one of them refuses. ``untransposed`` is the Transpose's input (None: the new output of
        a node it is planned past)."""
        if name in self.index.outputs or name in self.index.implicit:
            return None
        users = self.index.readers(name)
        if not users:
            return None
        self.budget -= len(users)
        if self.budget < 0:
            return None
        total = Decision(Tally(), [])
        group = _Group(renamable=self._renamable(untransposed))
        for user in users:
            if is_transpose(user):
                step: Tally | None = self._compose_cost(user, perm, group)
                plan: Plan | Absorb | None = None
            else:
                result = self.consumer_cost(user, name, perm, group)
                step, plan = (None, None) if result is None else result
            if step is None:
                return None
            total.tally += step
            total.steps.append((user, plan))
        if group.gathers_shape and (untransposed is None or untransposed not in self.whole_shapes):
            total.tally += settled(0, 1)  # the whole Shape the Gathers read (rule 7a)
        if untransposed is not None and all(
            is_transpose(user) and not self.index.is_read(user.output[0]) for user in users
        ):  # nothing reads the untransposed tensor once the Transposes go
            group.released.append((untransposed, self.index.producer[name]))
        total.tally += self.freed(group)
        return total

    def free_step(self, name: str, perm: Perm) -> Decision | None:
        """A step into a single elementwise consumer with one data input: one Transpose out,
        one in, the same elements and nodes (taken where the look-ahead ran out on a long
        chain, though it does not pay)."""
        users = self.index.readers(name)
        if len(users) != 1 or name in self.index.outputs or name in self.index.implicit:
            return None
        (user,) = users
        info = HANDLERS.get(user.op_type) if user.domain in STANDARD_DOMAINS else None
        if info is None or not info.elementwise or info.variadic:
            return None
        if len(user.output) != 1 or holds_graph(user):
            return None
        plan = info.handle(self.facts, user, perm, name)
        if isinstance(plan, str):
            return None
        return Decision(settled(int(self.index.is_read(user.output[0]))), [(user, plan)])


def _gathers(shape: onnx.NodeProto, perm: Perm) -> bool:
    """Rule 7a: whether ``Shape`` of ``T(perm)(x)`` picks x's dimensions in another order than
    ``Shape(x)`` does (then a Gather picks them)."""
    start, end = shape_bounds(shape, len(perm))
    return list(perm[start:end]) != list(range(start, end))


def operand_route(facts: GraphFacts, name: str, perm: Perm, pushed: str, lower_rank: bool) -> str:
    """How operand ``name`` of a node that ``T(perm)`` (written as ``pushed``) moves past is
    brought into the untransposed layout (case 4b), for the look-ahead and the edits alike:
    ``scalar`` (as it is), ``producer`` (it is ``T(perm)(z)``: z), ``sibling`` (an existing
    ``T(perm^-1)`` of it), ``constant`` (rewritten), ``unsqueeze`` (of lower rank, ``lower_rank``
    in the plan: an Unsqueeze, and a Transpose where ``perm`` reorders its axes), or
    ``compensate`` (a new ``T(perm^-1)``)."""
    rank = facts.rank(name)
    if rank == 0:
        return "scalar"
    if rank == len(perm):
        producer = facts.index.producer.get(name)
        if is_transpose(producer) and facts.transpose_perm(producer) == perm:  # type: ignore
            return "producer"
        if sibling_transpose(facts, name, invert(perm), pushed) is not None:
            return "sibling"
    if facts.is_constant(name):
        return "constant"
    if lower_rank and rank is not None:
        return "unsqueeze"
    return "compensate"


def untransposed_constant(value: np.ndarray, inverse: Perm) -> np.ndarray | None:
    """A constant operand (aligned to the trailing axes) in the untransposed layout, its leading
    1s dropped (they broadcast anyway); None when that is the value it has."""
    rank = len(inverse)
    aligned = value.reshape((1,) * (rank - value.ndim) + value.shape)
    moved = np.ascontiguousarray(aligned.transpose(inverse))
    while moved.ndim > 0 and moved.shape[0] == 1:
        moved = moved.reshape(moved.shape[1:])
    if moved.shape == value.shape and moved.tobytes() == value.tobytes():
        return None
    return moved


def operand_positions(perm: Perm, rank: int) -> list[int]:
    """Where the axes of a broadcast operand of ``rank`` (aligned with the trailing axes of a
    tensor transposed by ``perm``) lie in the untransposed layout."""
    return [perm[axis] for axis in range(len(perm) - rank, len(perm))]


def keeps_order(perm: Perm, rank: int) -> bool:
    """Whether such an operand's axes keep their relative order in the untransposed layout: an
    Unsqueeze then puts them in place, no Transpose needed."""
    positions = operand_positions(perm, rank)
    return positions == sorted(positions)


def sibling_transpose(facts: GraphFacts, name: str, perm: Perm, exclude: str) -> onnx.NodeProto | None:
    """A Transpose(perm) that already reads ``name`` (its output can be shared)."""
    for user in facts.index.readers(name):
        if is_transpose(user) and user.output[0] != exclude and (
            facts.transpose_perm(user) == perm
        ):
            return user
    return None
