"""Signature layout changes: graph inputs and outputs a pass moved to another axis order.

A pass that changes the model's signature on request (eliminate-transposes' ``inputs_as_nchw``
and ``outputs_as_nchw``) records it in the model's ``metadata_props`` under ``graphfix.layout``:
for each changed input or output, the permutation ``p`` with ``new = numpy.transpose(old, p)``.
The record travels with the written model, so the user (and any tool) can see it; parity and the
benchmark read it to give each model inputs in its own layout and to compare outputs in the
original's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

__all__ = ["KEY", "Layout", "read", "record", "relative", "to_candidate", "from_candidate",
           "to_reference", "move_shapes", "describe", "invert", "to_channels_first"]

KEY = "graphfix.layout"

logger = logging.getLogger(__name__)

Perm = tuple[int, ...]
# {"inputs": {name: perm}, "outputs": {name: perm}}
Layout = dict[str, dict[str, Perm]]


def _empty() -> Layout:
    return {"inputs": {}, "outputs": {}}


def read(model: onnx.ModelProto) -> Layout:
    """The layout changes recorded in ``model`` (empty when none, or when unreadable: not JSON
    of that form, or an entry that is not a permutation of its axes)."""
    layout = _empty()
    for prop in model.metadata_props:
        if prop.key != KEY:
            continue
        try:
            data = json.loads(prop.value)
            for side in ("inputs", "outputs"):
                for name, perm in (data.get(side) or {}).items():
                    axes = tuple(int(a) for a in perm)
                    if sorted(axes) != list(range(len(axes))):
                        raise ValueError(f"{side[:-1]} {name!r}: {list(perm)} is not a "
                                         "permutation of its axes")
                    layout[side][str(name)] = axes
        except (ValueError, TypeError, AttributeError) as error:
            logger.warning("the model's %s record is unreadable (%s); ignored", KEY, error)
            return _empty()
    return layout


def record(
    model: onnx.ModelProto,
    *,
    inputs: Mapping[str, Perm] | None = None,
    outputs: Mapping[str, Perm] | None = None,
) -> None:
    """Add layout changes to ``model``'s record, composed with those already there."""
    layout = read(model)
    for side, changes in (("inputs", inputs or {}), ("outputs", outputs or {})):
        for name, perm in changes.items():
            before = layout[side].get(name)
            composed = tuple(perm) if before is None else tuple(before[a] for a in perm)
            layout[side][name] = composed
            if composed == tuple(range(len(composed))):
                del layout[side][name]  # changed back: no change
    kept = [p for p in model.metadata_props if p.key != KEY]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    if layout["inputs"] or layout["outputs"]:
        entry = model.metadata_props.add()
        entry.key = KEY
        entry.value = json.dumps({side: {k: list(v) for k, v in changes.items()}
                                  for side, changes in layout.items() if changes},
                                 sort_keys=True)


def invert(perm: Perm) -> Perm:
    """The permutation that undoes ``perm``."""
    inverse = [0] * len(perm)
    for i, a in enumerate(perm):
        inverse[a] = i
    return tuple(inverse)


def relative(reference: Layout, candidate: Layout) -> Layout:
    """How the candidate's tensors lie against the reference's: ``cand = transpose(ref, p)``."""
    result = _empty()
    for side in ("inputs", "outputs"):
        for name in set(reference[side]) | set(candidate[side]):
            ref = reference[side].get(name)
            cand = candidate[side].get(name)
            rank = len(ref if ref is not None else cand)  # type: ignore[arg-type]
            ref = ref or tuple(range(rank))
            cand = cand or tuple(range(rank))
            if len(ref) != len(cand):
                continue
            inverse = invert(ref)
            perm = tuple(inverse[a] for a in cand)
            if perm != tuple(range(rank)):
                result[side][name] = perm
    return result


def _moved(values: Mapping[str, Any], perms: Mapping[str, Perm], *, inverse: bool
           ) -> dict[str, Any]:
    out = dict(values)
    for name, perm in perms.items():
        value = out.get(name)
        if isinstance(value, np.ndarray) and value.ndim == len(perm):
            out[name] = np.ascontiguousarray(value.transpose(invert(perm) if inverse else perm))
    return out


def to_candidate(feed: Mapping[str, Any], layout: Layout) -> dict[str, Any]:
    """Inputs by name, made for the reference, in the candidate's layout."""
    return _moved(feed, layout["inputs"], inverse=False)


def from_candidate(feed: Mapping[str, Any], layout: Layout) -> dict[str, Any]:
    """Inputs by name, made for the candidate, in the reference's layout."""
    return _moved(feed, layout["inputs"], inverse=True)


def to_reference(outputs: Mapping[str, Any], layout: Layout) -> dict[str, Any]:
    """The candidate's outputs by name, in the reference's layout."""
    return _moved(outputs, layout["outputs"], inverse=True)


def to_channels_first(rank: int) -> Perm:
    """The permutation that makes a channels-last tensor of ``rank`` channels-first
    ([N, H, W, C] -> [N, C, H, W]): what ``inputs_as_nchw`` applies."""
    return (0, rank - 1, *range(1, rank - 1))


def move_shapes(shapes: Mapping[str, Any], layout: Layout) -> dict[str, list[int]]:
    """Input shapes given for the reference (``name -> dims``), as the candidate takes them."""
    moved = {name: list(dims) for name, dims in shapes.items()}
    for name, perm in layout["inputs"].items():
        dims = moved.get(name)
        if dims is not None and len(dims) == len(perm):
            moved[name] = [dims[a] for a in perm]
    return moved


def describe(layout: Layout) -> list[str]:
    """One line per changed input or output."""
    return [f"{side[:-1]} {name!r} is transposed by {list(perm)} in the optimized model"
            for side in ("inputs", "outputs") for name, perm in sorted(layout[side].items())]
