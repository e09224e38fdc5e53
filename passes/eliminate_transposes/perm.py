"""Permutation algebra: pure functions on axis permutations, no graph.

``T(p)`` is ``Transpose`` with ``perm = p``; ``y = T(p)(x)`` means ``y.shape[i] == x.shape[p[i]]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from graphfix.layout import invert

__all__ = [
    "Perm",
    "invert",
    "compose",
    "is_identity",
    "shrink",
    "grow",
    "normalize_axes",
    "per_axis",
    "permute_pads",
    "untransposed_shape",
    "transposed_shape",
    "moves_only_ones",
]

Perm = tuple[int, ...]
T = TypeVar("T")


def is_identity(perm: Sequence[int]) -> bool:
    return all(i == a for i, a in enumerate(perm))


def compose(inner: Perm, outer: Perm) -> Perm:
    """``T(outer)(T(inner)(x)) == T(result)(x)``."""
    return tuple(inner[o] for o in outer)


def shrink(perm: Perm, removed: set[int]) -> Perm:
    """The permutation left on the output of a node that drops the ``removed`` axes of its
    transposed input (axes numbered in the transposed layout)."""
    kept = sorted(perm[i] for i in range(len(perm)) if i not in removed)
    position = {axis: k for k, axis in enumerate(kept)}
    return tuple(position[perm[i]] for i in range(len(perm)) if i not in removed)


def grow(perm: Perm, inserted: set[int]) -> Perm:
    """The permutation on the output of a node that inserts size-1 axes at ``inserted`` (output
    positions) into its transposed input: the new axes stay in place, the others keep ``perm``
    among themselves."""
    kept = [i for i in range(len(perm) + len(inserted)) if i not in inserted]
    grown = list(range(len(kept) + len(inserted)))
    for i, position in enumerate(kept):
        grown[position] = kept[perm[i]]
    return tuple(grown)


def normalize_axes(axes: Sequence[int], rank: int) -> list[int] | None:
    """``axes`` in ``0..rank-1`` (negative ones counted from the end), or None when one is out
    of range or repeated."""
    out = [int(a) + rank if int(a) < 0 else int(a) for a in axes]
    if any(a < 0 or a >= rank for a in out) or len(set(out)) != len(out):
        return None
    return out


def per_axis(values: Sequence[T], perm: Perm, runs: int = 1) -> list[T]:
    """Values given per axis of ``T(perm)(x)`` (``runs`` runs of one value per axis: Tile's
    repeats, Resize's scales, a begin and an end half for pads and roi), in ``x``'s axis order:
    value ``i`` of each run goes to axis ``perm[i]``. Of ``range(runs * rank)`` it gives the
    indices of the Gather that reorders such values at run time."""
    rank = len(perm)
    out: list[T] = list(values)
    for run in range(runs):
        for i, axis in enumerate(perm):
            out[run * rank + axis] = values[run * rank + i]
    return out


def permute_pads(pads: Sequence[int], perm: Perm) -> list[int]:
    """Pad's ``[begin..., end...]`` for the transposed tensor, in the untransposed order."""
    return per_axis(pads, perm, 2)


def transposed_shape(shape: Sequence[int | None], perm: Perm) -> tuple[int | None, ...]:
    """The shape of ``T(perm)(x)`` for ``x`` of ``shape``."""
    return tuple(shape[axis] for axis in perm)


def untransposed_shape(shape: Sequence[int | None], perm: Perm) -> tuple[int | None, ...]:
    """The shape of ``x`` for ``T(perm)(x)`` of ``shape``."""
    moved: list[int | None] = [None] * len(perm)
    for i, axis in enumerate(perm):
        moved[axis] = shape[i]
    return tuple(moved)


def moves_only_ones(shape: Sequence[int | None], perm: Perm) -> bool:
    """Whether ``T(perm)`` on a tensor whose result has ``shape`` only moves size-1 axes (the
    other axes keep their relative order), so that it is a Reshape."""
    moved = [perm[i] for i, d in enumerate(shape) if d != 1]
    return moved == sorted(moved)
