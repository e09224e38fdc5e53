"""The look-ahead: what moving a Transpose past its consumers costs, in Transposes and nodes.

``push_cost(name, perm)`` is the change in the number of Transposes from moving ``T(perm)`` on
``name`` past all of its consumers, the Transpose itself not counted, with the plan for each
consumer; the driver pushes when the count goes down. It counts the compensations added (none
when an operand already has that Transpose, or when another Transpose is on its way to it
through elementwise ops) and, looking ahead within a budget, whether each new output Transpose
will itself cancel further down. Nodes a plan adds besides Transposes (an Unsqueeze, a Gather)
are counted apart (``Decision.new_nodes``), so that a push never makes the model bigger.
"""

from __future__ import annotations

import dataclasses
import logging

import onnx

from graphfix.graph import subgraphs
from graphfix.passes.eliminate_transposes.facts import CHAIN_DEPTH, Facts
from graphfix.passes.eliminate_transposes.handlers import HANDLERS, Absorb, Plan, absorber
from graphfix.passes.eliminate_transposes.ops import DEFAULT_DOMAINS, is_transpose
from graphfix.passes.eliminate_transposes.perm import (
    Perm,
    compose,
    invert,
    is_identity,
    moves_only_ones,
)

__all__ = ["Decision", "Lookahead", "PLANNED", "LOOKAHEAD_BUDGET", "MAX_PUSHES_PER_NODE",
           "keeps_order", "operand_positions", "sibling_transpose"]

logger = logging.getLogger(__name__)

# Transposes one node lets through before it becomes a barrier (a cycle breaker: a node sees
# one or two in every graph met so far).
MAX_PUSHES_PER_NODE = 4
# How far the cost check looks ahead, in consumers visited per decision.
LOOKAHEAD_BUDGET = 64
# What the look-ahead finds arriving at an operand when the Transpose is not placed yet.
PLANNED = onnx.NodeProto(op_type="Transpose", name="planned")

Step = tuple[onnx.NodeProto, "Plan | Absorb | None"]


@dataclasses.dataclass
class Decision:
    """The change in Transposes of a push (the pushed one not counted), the nodes it adds
    besides Transposes, and what happens at each consumer."""

    cost: int
    new_nodes: int
    steps: list[Step]


class Lookahead:
    """The cost check of one push decision: ``origin`` is the input of the Transpose being
    pushed, ``pushed`` counts the pushes each node has seen."""

    def __init__(self, facts: Facts, pushed: dict[int, int], origin: str,
                 liftable: frozenset[str] = frozenset()) -> None:
        self.facts = facts
        self.liftable = liftable
        self.index = facts.index
        self.pushed = pushed
        self.origin = origin
        self.budget = LOOKAHEAD_BUDGET

    @property
    def exhausted(self) -> bool:
        return self.budget < 0

    # ------------------------------------------------------------ operands
    def operand_cost(self, name: str, node: onnx.NodeProto, perm: Perm, source: str) -> int:
        """Transposes added (+) or removed (-) by bringing operand ``name`` of ``node`` from the
        transposed layout ``perm`` back to the untransposed one."""
        rank = self.facts.rank(name)
        if rank == 0 or self.facts.is_constant(name):
            return 0
        if rank is not None and rank < len(perm) and keeps_order(perm, rank):
            return 0  # an Unsqueeze aligns it: no Transpose
        inverse = invert(perm)
        producer = self.index.producer.get(name)
        if is_transpose(producer) and rank == len(perm):
            inner = self.facts.transpose_perm(producer)  # type: ignore[arg-type]
            if inner is not None and len(inner) == len(perm):
                identity = is_identity(compose(inner, inverse))
                if self.index.only_reader(name, node):
                    return -1 if identity else 0
                return 0 if identity else 1
        if self.arriving_transpose(name, node, perm, source) is not None:
            return -1
        if sibling_transpose(self.facts, name, inverse, source) is not None:
            return 0
        return 1

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
            if producer is None or producer.domain not in DEFAULT_DOMAINS:
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
    def consumer_cost(self, node: onnx.NodeProto, source: str, perm: Perm
                      ) -> tuple[int, int, Plan | Absorb | None] | None:
        """(Transposes, other nodes added, plan) of moving ``T(perm)`` on tensor ``source``
        past ``node``; None: it cannot."""
        absorb = absorber(self.facts, node, source, perm)
        if absorb is not None:
            return 0, 0, absorb
        if is_transpose(node):
            outer = self.facts.transpose_perm(node)
            if outer is None or len(outer) != len(perm):
                return None
            dead = not self.index.is_read(node.output[0])
            return (-1 if dead or is_identity(compose(perm, outer)) else 0), 0, None
        plan = self._plan(node, source, perm)
        if plan is None:
            return None
        cost = 0
        seen: set[str] = {source}
        for slot in plan.data_slots:
            name = node.input[slot]
            if self._chases(node, name, source):
                return None
            if name not in seen:
                seen.add(name)
                cost += self.operand_cost(name, node, perm, source)
        new_nodes = plan.new_nodes
        for out, out_perm in zip(node.output, plan.out_perms):
            if out and out_perm is not None:
                placed = self.place_cost(out, out_perm)
                cost += placed[0]
                new_nodes += placed[1]
        return cost, new_nodes, plan

    def _plan(self, node: onnx.NodeProto, source: str, perm: Perm) -> Plan | None:
        info = HANDLERS.get(node.op_type) if node.domain in DEFAULT_DOMAINS else None
        if info is None:
            logger.debug("barrier %s (%s): no handler for %s::%s", node.name, source,
                         node.domain or "ai.onnx", node.op_type)
            return None
        if any(True for _ in subgraphs(node)):
            return None
        if self.pushed.get(id(node), 0) >= MAX_PUSHES_PER_NODE:
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
        """Transposes (and other nodes) that remain from putting ``T(perm)`` on ``name`` and
        pushing it on: at most one Transpose (it stays where it is), less when it can travel
        on and cancel."""
        if is_identity(perm) or not self.index.is_read(name) or name in self.liftable:
            return 0, 0  # no Transpose, or one that moves out of the loop (rule 8)
        shape = self.facts.shape(name)
        if shape is not None and len(shape) == len(perm) and None not in shape and (
            tuple(shape[a] for a in perm) == tuple(shape)
            and moves_only_ones(shape, perm)
        ):
            return 0, 0  # it moves only size-1 axes in place: the identity (rule 1)
        decision = self.push_cost(name, perm)
        if decision is None or decision.cost >= 1:
            return 1, 0
        return decision.cost, decision.new_nodes

    def push_cost(self, name: str, perm: Perm) -> Decision | None:
        """The decision to move ``T(perm)`` on ``name`` past all of its consumers; None when
        one of them refuses."""
        if name in self.index.outputs or name in self.index.implicit:
            return None
        users = self.index.readers(name)
        if not users:
            return None
        self.budget -= len(users)
        if self.budget < 0:
            return None
        total = Decision(0, 0, [])
        for user in users:
            result = self.consumer_cost(user, name, perm)
            if result is None:
                return None
            total.cost += result[0]
            total.new_nodes += result[1]
            total.steps.append((user, result[2]))
        return total

    def free_step(self, name: str, perm: Perm) -> Decision | None:
        """A step into a single elementwise consumer with one data input: one Transpose out,
        one in, the same elements (taken where the look-ahead ran out on a long chain)."""
        users = self.index.readers(name)
        if len(users) != 1 or name in self.index.outputs or name in self.index.implicit:
            return None
        (user,) = users
        info = HANDLERS.get(user.op_type) if user.domain in DEFAULT_DOMAINS else None
        if info is None or not info.elementwise or info.variadic:
            return None
        if len(user.output) != 1 or any(True for _ in subgraphs(user)):
            return None
        plan = info.handle(self.facts, user, perm, name)
        return None if isinstance(plan, str) else Decision(0, 0, [(user, plan)])


def operand_positions(perm: Perm, rank: int) -> list[int]:
    """Where the axes of a broadcast operand of ``rank`` (aligned with the trailing axes of a
    tensor transposed by ``perm``) lie in the untransposed layout."""
    return [perm[axis] for axis in range(len(perm) - rank, len(perm))]


def keeps_order(perm: Perm, rank: int) -> bool:
    """Whether such an operand's axes keep their relative order in the untransposed layout: an
    Unsqueeze then puts them in place, no Transpose needed."""
    positions = operand_positions(perm, rank)
    return positions == sorted(positions)


def sibling_transpose(facts: Facts, name: str, perm: Perm, exclude: str) -> onnx.NodeProto | None:
    """A Transpose(perm) that already reads ``name`` (its output can be shared)."""
    for user in facts.index.readers(name):
        if is_transpose(user) and user.output[0] != exclude and (
            facts.transpose_perm(user) == perm
        ):
            return user
    return None
