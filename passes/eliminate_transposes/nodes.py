"""The nodes of one graph's rewrite, each under a key that never changes, and the worklist.

A node enters the rewrite once: the graph's own nodes in their order, then each node an edit
makes. Its key is its position in that append-only list. What the rewrite knows of a node
(whether it is dead, where it goes on write-back, whether it waits in the worklist, how many
Transposes moved past it, its permutation) is kept under that key, which means the same node for
the whole rewrite, whatever the edits do to the node's inputs, outputs or attributes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import onnx

from .ops import is_transpose

__all__ = ["NodeTable", "Worklist"]


class NodeTable:
    """The append-only list of one graph's nodes under rewrite, the dead among them, and where
    each goes on write-back (``order``: the position, in the original graph, of the node it
    stands for; a new node stands beside the one it was made for).

    Lifetime: one graph's rewrite. Key: a node's position in the list, given once when it
    enters."""

    def __init__(self, nodes: Iterable[onnx.NodeProto]) -> None:
        self._nodes: list[onnx.NodeProto] = []
        self._order: list[int] = []
        self._dead: set[int] = set()
        # The one lookup by identity, from a node the index hands out to its key. Messages are
        # unhashable; the table holds every node it keys for as long as it lives, so no id is
        # reused while it is asked, and :meth:`key` checks identity before it answers.
        self._keys: dict[int, int] = {}
        for position, node in enumerate(nodes):
            self.add(node, position)

    def add(self, node: onnx.NodeProto, order: int) -> int:
        """Enter ``node``, to be written back at ``order``; returns its key."""
        key = len(self._nodes)
        self._nodes.append(node)
        self._order.append(order)
        self._keys[id(node)] = key
        return key

    def key(self, node: onnx.NodeProto) -> int:
        key = self._keys[id(node)]
        if self._nodes[key] is not node:
            raise KeyError(f"node {node.name!r} is not in the rewrite")
        return key

    def __getitem__(self, key: int) -> onnx.NodeProto:
        return self._nodes[key]

    def __len__(self) -> int:
        """Nodes entered so far, the dead included (the next key)."""
        return len(self._nodes)

    def __iter__(self) -> Iterator[onnx.NodeProto]:
        return iter(self._nodes)

    def order(self, node: onnx.NodeProto) -> int:
        """Where ``node`` is written back, and where a node made for it goes."""
        return self._order[self.key(node)]

    def kill(self, key: int) -> None:
        self._dead.add(key)

    def is_dead(self, key: int) -> bool:
        return key in self._dead

    @property
    def live_count(self) -> int:
        """Nodes of the graph as the edits have left it so far."""
        return len(self._nodes) - len(self._dead)

    def live_in_order(self) -> list[onnx.NodeProto]:
        """The live nodes by ``order`` (entry order among equals)."""
        keys = [key for key in range(len(self._nodes)) if key not in self._dead]
        keys.sort(key=self._order.__getitem__)
        return [self._nodes[key] for key in keys]


class Worklist:
    """The Transposes waiting for a visit, by key, each at most once at a time; dead ones are
    never added. Lifetime: one graph's rewrite."""

    def __init__(self, table: NodeTable) -> None:
        self._table = table
        self._keys: list[int] = []
        self._queued: set[int] = set()

    def add(self, key: int) -> None:
        if key not in self._queued and not self._table.is_dead(key):
            self._queued.add(key)
            self._keys.append(key)

    def add_every_transpose(self) -> None:
        """Every live Transpose, to be popped in graph order: upstream ones move first."""
        for key in range(len(self._table)):
            if is_transpose(self._table[key]):
                self.add(key)
        self._keys.reverse()

    def pop(self) -> int | None:
        """The next key to visit, or None when the list is empty."""
        if not self._keys:
            return None
        key = self._keys.pop()
        self._queued.discard(key)
        return key
