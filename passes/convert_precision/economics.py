"""Whether a lowered group of nodes pays for the Casts at its borders.

The search (:mod:`.measure`) decides which nodes *may* compute in the lowered type; this
decides which of them are worth it. A group of lowered nodes joined by lowered tensors saves
memory traffic (half the bytes of every value it reads and writes) and, where it holds a
matrix product, tensor-core arithmetic. Its borders cost Casts, each reading a float32 value
and writing a lowered one (or back): 6 bytes per element. A lone Add between two float32
neighbours (``Cast, Add, Cast``) moves 12 bytes per element for the Add it saves 6 on,
slower on every provider than the float32 Add alone.

Rules:
1. A group that holds a matrix product (:data:`~ops.MATRIX_OPS`), or reads a weight of
   :data:`TABLE_ELEMENTS` elements or more in the lowered type (an embedding table, a
   depthwise kernel: half its bytes in the file and in memory), pays.
2. Otherwise the values it reads and writes are counted, one per activation slot of each node
   (weights and values only reshaped in place not counted), each saving 2 bytes per element
   lowered, against the Casts the group adds, counted as the difference in border Casts
   between the assignment with the group and without it. Elements per value are taken as
   equal (an element-wise group's are). A group whose saving is not larger than its Casts'
   6 bytes per element stays float32, with that reason.
3. Groups are weighed one after another, each on the assignment the previous ones left, and
   again once one of them went back (a Cast that three groups share is charged to none while
   the other two stay lowered), until none goes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from . import ops
from .analysis import FLOAT, Analysis

__all__ = ["TABLE_ELEMENTS", "unpaid", "border_casts"]

# A weight this large (elements) read in the lowered type pays for its group on its own.
TABLE_ELEMENTS = 4096
# Ops that hand their input's buffer on (ONNX Runtime reuses it): no traffic to save.
_IN_PLACE = frozenset({"Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Dropout",
                       "Shape", "Size"})
_CAST_BYTES = 6  # a Cast reads a float32 element and writes a lowered one, or back
_SAVED_BYTES = 2  # per element of a value read or written in the lowered type


def border_casts(analysis: Analysis, low: frozenset[int], *, io_low: bool = False) -> int:
    """The Casts between float types that lowering ``low`` inserts (as :func:`~rewrite.lower`
    places them: one per tensor and target type, one per float32 output computed lowered)."""
    return _casts_over(analysis, {*analysis.uses, *analysis.outputs}, low, io_low)


def _casts_over(analysis: Analysis, names: Iterable[str], low: frozenset[int] | set[int],
                io_low: bool) -> int:
    """:func:`border_casts`, of the tensors ``names`` only."""
    count = 0
    outputs = set(analysis.outputs)
    for name in names:
        if analysis.types.get(name) != FLOAT:
            continue
        have_low = analysis.is_low(name, low, io_low=io_low)
        targets = {want for want in (analysis.wants(use, low)
                                     for use in analysis.uses.get(name, ())) if want != "any"}
        if name in outputs and name in analysis.producer and have_low != io_low:
            count += 1  # a float32 output computed lowered, or the reverse: its Cast
            targets.discard("low" if io_low else "float")  # serves its readers of that type
        if name in analysis.initializers:
            continue  # weights are converted offline
        count += sum(1 for want in targets if (want == "low") != have_low)
    return count


def _groups(analysis: Analysis, low: frozenset[int]) -> list[list[int]]:
    """The lowered nodes, grouped by the lowered tensors that join them."""
    def joins(reader: int, name: str) -> bool:
        node = analysis.node(reader)
        return analysis.is_low(name, low) and any(
            node.input[slot] == name for slot in analysis.plans[reader].low_inputs
            if slot < len(node.input))

    return analysis.groups(sorted(low), joins)


def _pays_outright(analysis: Analysis, group: list[int], weights: set[str]) -> bool:
    """Rule 1."""
    for p in group:
        node = analysis.node(p)
        if node.op_type in ops.MATRIX_OPS:
            return True
        for slot in analysis.plans[p].low_inputs:
            name = node.input[slot] if slot < len(node.input) else ""
            tensor = analysis.initializers.get(name)
            if tensor is not None and name in weights and \
                    int(np.prod(tensor.dims, dtype=np.int64)) >= TABLE_ELEMENTS:
                return True
    return False


def _traffic(analysis: Analysis, group: list[int], weights: set[str]) -> int:
    """Rule 2's count: activation slots the group's nodes read and write lowered."""
    slots = 0
    for p in group:
        node = analysis.node(p)
        if node.op_type in _IN_PLACE:
            continue
        plan = analysis.plans[p]
        slots += sum(1 for slot in plan.low_inputs
                     if slot < len(node.input) and node.input[slot]
                     and node.input[slot] not in weights)
        slots += sum(1 for slot in plan.low_outputs
                     if slot < len(node.output) and node.output[slot])
    return slots


def unpaid(analysis: Analysis, compute_low: frozenset[int],
           resolve: Callable[[frozenset[int]], frozenset[int]], *, io_low: bool = False
           ) -> tuple[frozenset[int], dict[int, str]]:
    """The assignment of ``compute_low`` (lowered compute nodes, ``resolve`` placing the
    movement nodes) without the groups that do not pay, and why each of their compute nodes
    stays float32. A group's Casts are counted on the tensors its nodes read and write, with
    the group lowered and with it float32 (its movement nodes follow its compute nodes:
    everything it reads lowered comes from within it). A Cast that several groups share is
    charged to none of them while the others stay lowered; once one goes back, the rest are
    weighed again, until none goes (rule 3)."""
    low = resolve(compute_low)
    weights = analysis.weightlike()
    current = set(low)
    kept: dict[int, str] = {}
    weighed = []
    for group in _groups(analysis, low):
        compute = frozenset(p for p in group if not analysis.plans[p].movement)
        if compute and compute <= compute_low and not _pays_outright(analysis, group, weights):
            touched = {name for p in group for name in (*analysis.node(p).input,
                                                         *analysis.node(p).output) if name}
            weighed.append((group, compute, touched,
                            _SAVED_BYTES * _traffic(analysis, group, weights)))
    dropped = True
    while dropped:
        dropped = False
        for entry in list(weighed):
            group, compute, touched, saved = entry
            with_group = _casts_over(analysis, touched, current, io_low)
            current.difference_update(group)
            added = with_group - _casts_over(analysis, touched, current, io_low)
            if saved > _CAST_BYTES * added:
                current.update(group)
                continue
            op_types = sorted({analysis.node(p).op_type for p in compute})
            why = (f"lowering its group of {len(compute)} node(s) ({', '.join(op_types)}) "
                   f"adds {added} Cast(s), which move more bytes than the lowered type saves "
                   f"there")
            kept.update((p, why) for p in compute)
            compute_low = compute_low - compute
            weighed.remove(entry)
            dropped = True
    return (resolve(compute_low) if kept else low), kept
