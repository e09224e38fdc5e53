"""The graphfix pass library: each pass as a registered class and as a function for exporters.

Importing this package registers every pass below with :mod:`graphfix.registry`. Each function
twin rewrites the model it is given in place and returns it::

    import graphfix.passes
    model = graphfix.passes.remove_initializer_inputs(model)
"""

from __future__ import annotations

from .convert_precision import ConvertPrecision, convert_precision
from .eliminate_transposes import EliminateTransposes, eliminate_transposes
from .fold_shapes import FoldShapes, fold_shapes
from .fuse_transformer import FuseTransformer, fuse_transformer
from .hoist_loop_invariants import HoistLoopInvariants, hoist_loop_invariants
from .merge_duplicates import MergeDuplicates, merge_duplicates
from .ort_offline import OrtOffline, ort_offline
from .remove_initializer_inputs import (
    RemoveInitializerInputs,
    remove_initializer_inputs,
)
from .simplify import Simplify, simplify

__all__ = [
    "ConvertPrecision",
    "convert_precision",
    "EliminateTransposes",
    "eliminate_transposes",
    "FoldShapes",
    "fold_shapes",
    "FuseTransformer",
    "fuse_transformer",
    "HoistLoopInvariants",
    "hoist_loop_invariants",
    "MergeDuplicates",
    "merge_duplicates",
    "OrtOffline",
    "ort_offline",
    "RemoveInitializerInputs",
    "remove_initializer_inputs",
    "Simplify",
    "simplify",
]
