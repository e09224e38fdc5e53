"""The graphfix pass library: each pass as a registered class and as a function for exporters.

Importing this package registers every pass below with :mod:`graphfix.registry`. Each function
twin rewrites the model it is given in place and returns it::

    import graphfix.passes
    model = graphfix.passes.remove_initializer_inputs(model)
"""

from __future__ import annotations

from graphfix.passes.convert_precision import ConvertPrecision, convert_precision
from graphfix.passes.eliminate_transposes import EliminateTransposes, eliminate_transposes
from graphfix.passes.fold_shapes import FoldShapes, fold_shapes
from graphfix.passes.fuse_transformer import FuseTransformer, fuse_transformer
from graphfix.passes.merge_duplicates import MergeDuplicates, merge_duplicates
from graphfix.passes.ort_offline import OrtOffline, ort_offline
from graphfix.passes.remove_initializer_inputs import (
    RemoveInitializerInputs,
    remove_initializer_inputs,
)
from graphfix.passes.simplify import Simplify, simplify

__all__ = [
    "ConvertPrecision",
    "convert_precision",
    "EliminateTransposes",
    "eliminate_transposes",
    "FoldShapes",
    "fold_shapes",
    "FuseTransformer",
    "fuse_transformer",
    "MergeDuplicates",
    "merge_duplicates",
    "OrtOffline",
    "ort_offline",
    "RemoveInitializerInputs",
    "remove_initializer_inputs",
    "Simplify",
    "simplify",
]
