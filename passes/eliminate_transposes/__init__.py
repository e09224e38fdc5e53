"""eliminate-transposes: push Transposes through layout-agnostic ops until they cancel.

Converters from NHWC frameworks wrap every Conv in ``Transpose(0,3,1,2)`` ...
``Transpose(0,2,3,1)``. This pass moves each Transpose downstream, swapping it with its consumer,
until it meets its inverse, a constant it can be folded into, or a barrier. Notation: ``T(p)`` is
``Transpose`` with ``perm = p``; ``y = T(p)(x)`` means ``y.shape[i] == x.shape[p[i]]``.

Rules:
1. Identity: ``T(0,1,...,r-1)(x)  =>  x``; a Transpose nothing reads is dropped. At a graph
   output the producer's output takes the output's name; where that is impossible (the source is
   a graph input or another graph output, or a subgraph reads it) the node becomes an
   ``Identity``.
2. Compose: ``T(q)(T(p)(x))  =>  T(r)(x)`` with ``r[i] = p[q[i]]``; the inner Transpose goes when
   nothing else reads it. An inverse pair composes to the identity and disappears by rule 1.
3. Fold: ``T(p)(constant)  =>  constant'`` (a new initializer; an initializer that other nodes
   still read is never modified). A constant is an initializer, a Constant node, or a
   shape-only op (Identity, Reshape, Squeeze, Unsqueeze, and Cast where numpy converts as ONNX
   does) of constants. Such a chain goes once nothing reads it. A constant that other nodes
   read too (or a tensor of its chain) is not folded where its values take more bytes than
   the Transpose: they would be stored twice (a tied embedding read by the LM head through a
   Transpose); ONNX Runtime folds that Transpose when it loads the model.
   b. ``T(p)(DequantizeLinear(q, scale, zero))`` of constant quantized weights ``q`` that only
   the Transpose reads: ``q`` is stored transposed and a per-axis ``axis -> p^-1[axis]``; the
   Transpose goes (blocked quantization, and IR 3's Constant nodes, stay as they are).
4. Push: ``N(T(p)(x), ...)  =>  T(p')(N'(x, ...))`` for ``N`` in the handler table
   (:mod:`.handlers`), which remaps what depends on the axis order:
   a. elementwise unary ops (Relu, Clip, Cast, Sigmoid, ...): ``p' = p``;
   b. broadcasting ops (Add, Mul, Where, PRelu, comparisons, ...): every other operand is
      brought to the untransposed layout: constants are rewritten, non-constant operands get a
      compensating ``T(p^-1)``, and one of lower rank an Unsqueeze that puts its axes where
      the untransposed layout has them (and the Transpose only when ``p`` reorders its axes);
      ``p' = p``;
   c. Concat and Split: ``axis -> p[axis]``; Concat's other inputs as in 4b;
   d. Pad: pads (attribute, or input from opset 11) permuted, pads computed at run time
      reordered by a Gather, or the ``axes`` input (opset 18) remapped;
   e. Slice: ``axes -> p[axes]`` (an absent ``axes`` means ``0..len(starts)-1`` and is made
      explicit);
   f. Reduce* and ArgMax/ArgMin: ``axes -> p[axes]`` (attribute, or input from opset 18 and for
      ReduceSum from 13); with ``keepdims=0`` the permutation shrinks to the kept axes;
   g. Softmax, LogSoftmax, Hardmax: ``axis -> p[axis]`` from opset 13; before 13 the input is
      flattened to 2-D at ``axis``, so the push needs ``p`` to keep the axes before ``axis``
      among themselves (a row then holds the same elements; reordered within the row when
      ``p`` moves the trailing axes of more than one element, a sum-like reduction, and a
      barrier for Hardmax, whose first maximum in the row wins a tie);
   h. Squeeze (``p'`` shrinks) and Unsqueeze (``p'`` grows, new axes stay in place);
   i. QuantizeLinear / DequantizeLinear: per-axis ``axis -> p[axis]`` (blocked: barrier);
   j. Reshape that only splits and merges whole axes (GroupNormalization's
      ``[N,H,W,C] -> [N,H,W,G,C/G]``), each merged group from consecutive axes in order: the
      target is rewritten in the untransposed order and ``p'`` moves the groups as ``p`` did. A
      Reshape that only drops and adds size-1 axes (TFLite's Squeeze and ExpandDims) is a
      Squeeze then an Unsqueeze (4h). The target may be computed from ``Shape`` (the batch read
      at run time); every other dimension must be static, and not 1 when axes split or merge;
   k. Tile (constant repeats permuted), CumSum (``axis -> p[axis]``), Gather with 0-D or 1-D
      indices (``axis -> p[axis]``; 0-D indices drop the axis as ``keepdims=0`` does);
   l. Resize and Upsample in ``nearest`` mode: scales, sizes and roi's begin and end halves
      permuted (constants rewritten, values computed at run time reordered by a Gather), or
      the ``axes`` attribute (opset 18) remapped. ``linear`` and ``cubic`` are barriers: ONNX
      Runtime's kernels take them only with the resized axes in set places.
   A push happens only when it lowers the number of Transposes and adds no more nodes than it
   removes (:mod:`.cost`): the look-ahead counts the Transposes removed, the compensations
   added (none when an operand already has that Transpose, or when another Transpose is on its
   way to it through elementwise ops), whether each new output Transpose will itself cancel
   further down, and every other node the edits add or leave unread (Unsqueezes, Gathers, the
   Identity of rule 1, a Constant node per new constant at IR 3). A Transpose with several
   consumers is pushed into all of them or none. Where the look-ahead runs out on a long
   chain, a step into a single elementwise consumer (which keeps both counts) is taken.
   ``N(x, T(x))`` (``x + x^T``) is a barrier.
5. Size-1 moves: a Transpose left that only moves size-1 dimensions becomes a ``Reshape`` whose
   target ONNX Runtime loads: an unknown size that stays in place is copied (0), at most one
   other is inferred (-1); otherwise the Transpose stays. The Reshape's target is a constant
   more: in a run held to its input's size (:func:`graphfix.registry.room`), only within the
   bytes left (a VAD model came out 19 bytes larger of it, its only change).
6. Unsqueeze: ``T(p)(Unsqueeze(x, axes))`` where ``p`` moves only the inserted axes  =>
   ``Unsqueeze(x, axes')`` with the axes where ``p`` puts them (tf2onnx's Conv1D).
7. Absorb: a consumer that ends the layout takes the Transpose in:
   a. ``Shape(T(p)(x))  =>  Gather(Shape(x), p[start:end])`` (one ``Shape(x)`` for all of a
      Transpose's Shapes); ``Size(T(p)(x))  =>  Size(x)``;
   b. ``MatMul(Flatten(T(p)(x)), W)`` (a Flatten, or a Reshape to ``[batch, features]``, with
      ``p`` keeping the batch axis first and every other dimension static; Gemm too)  =>
      ``MatMul(Flatten(x), W')`` where ``W'`` has its rows in the untransposed order. Each dot
      product then adds in another order: a sum-like reduction;
   c. ``CastLike(y, T(p)(x))  =>  CastLike(y, x)``: only the type of the second input counts.
8. Loops: a Transpose on a scan output of a Loop or Scan body (stacked along the first axis)
   moves out of the loop as ``T(0, 1+p)`` on the stacked output (``T(0, 1, 2+p)`` for Scan
   before opset 9, whose outputs are ``[batch, steps, ...]``) (:mod:`.loops`), where it meets
   the outer graph's Transposes; inside the body, a push towards such an output counts it as
   gone from the body (a node all the same: it moves out).

Boundaries and barriers: graph inputs and outputs keep their names, types, shapes and layout,
unless asked otherwise: ``inputs_as_nchw`` / ``outputs_as_nchw`` (:mod:`.boundary`). Ops outside
the handler table, ops in other domains, and nodes holding subgraphs are barriers; the reason is
logged at DEBUG. If/Loop/Scan bodies are optimized as graphs of their own; a value read from an
enclosing scope is never rewired or removed under the body that reads it.

Sum-like reductions (ReduceSum, ReduceMean, ReduceL2, ..., rules 4g and 7b) add in memory order,
so after a push the float result can differ in the last bits; ``keep_reduction_order=True``
makes them barriers and keeps every output bit-identical. Every other rewrite only moves data.
A reduction whose result a quantizer or a rounding reads, through any ops
(:func:`.facts.before_steps`), is a barrier always: there a last bit becomes a whole
quantization level on some elements.

Layers, each importing only those before it: :mod:`.perm` (permutation algebra), :mod:`.ops`
(op families as data), :mod:`.nodes` (a rewrite's nodes under keys that never change, and its
worklist), :mod:`.facts` (constants, ranks, shapes), :mod:`.handlers` (one function per op
family, the table of records), :mod:`.cost` (the look-ahead and the pushes made),
:mod:`.edits` (the edits of one graph's rewrite), :mod:`.rewrite` (the driver), :mod:`.loops`
(rule 8), :mod:`.boundary` (signature changes on request).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx

from graphfix import graph as graph_layer
from graphfix.errors import PassError
from graphfix.options import RunOptions
from .boundary import channels_first
from .facts import infer
from .loops import lift_scan_transposes, scan_outputs
from .ops import STANDARD_DOMAINS, is_transpose
from .edits import RewriteCounts
from .rewrite import Budget, Rewriter
from graphfix.registry import Fallback, Pass, PassResult, register, room

__all__ = ["EliminateTransposes", "eliminate_transposes"]


def _count_transposes(graph: onnx.GraphProto) -> int:
    return sum(1 for node in graph_layer.all_nodes(graph) if is_transpose(node))


def _names_option(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise PassError(f"{key} must be a list of tensor names, got {value!r}")
    return tuple(dict.fromkeys(value))


@register("eliminate-transposes")
class EliminateTransposes(Pass):
    """Cancel, compose, fold and push Transposes through layout-agnostic ops (NHWC clean-up).

    Options:
        keep_reduction_order: do not push through sum-like reductions (ReduceSum, ReduceMean,
            ReduceL2, ...), whose float results would then differ in the last bits because
            elements are added in another order: every output stays bit-identical, at the cost
            of the Transposes those reductions hold (``--keep-reduction-order``).
        inputs_as_nchw: names of channels-last graph inputs (``[N, ..., C]``, rank 3 or more) to
            declare channels-first (``[N, C, ...]``): a signature change, made on request only.
            The converter's Transpose after such an input then cancels. Recorded in the model's
            metadata (:mod:`graphfix.layout`), so that parity feeds each model its own layout
            and a second run leaves the input alone.
        outputs_as_nchw: the same for graph outputs.
    """

    def __init__(
        self,
        *,
        keep_reduction_order: bool = False,
        inputs_as_nchw: Sequence[str] = (),
        outputs_as_nchw: Sequence[str] = (),
    ) -> None:
        if not isinstance(keep_reduction_order, bool):
            raise PassError(
                f"keep_reduction_order must be a bool, got {type(keep_reduction_order).__name__}"
            )
        self.keep_reduction_order = keep_reduction_order
        self.inputs_as_nchw = _names_option("inputs_as_nchw", inputs_as_nchw)
        self.outputs_as_nchw = _names_option("outputs_as_nchw", outputs_as_nchw)

    @classmethod
    def configured(cls, run: RunOptions) -> EliminateTransposes:
        return cls(keep_reduction_order=run.keep_reduction_order,
                   inputs_as_nchw=run.inputs_as_nchw, outputs_as_nchw=run.outputs_as_nchw)

    def fallbacks(self) -> list[Fallback]:
        # Pushing a Transpose through a sum-like reduction reorders a float sum: the one rewrite
        # of this pass whose result is not bit-identical.
        if self.keep_reduction_order:
            return []
        return [Fallback("reordering reductions", EliminateTransposes(
            keep_reduction_order=True, inputs_as_nchw=self.inputs_as_nchw,
            outputs_as_nchw=self.outputs_as_nchw))]

    def call(self, model: onnx.ModelProto) -> PassResult:
        opset = next((o.version for o in model.opset_import if o.domain in STANDARD_DOMAINS), 0)
        before = _count_transposes(model.graph)
        stats = RewriteCounts()
        warnings = channels_first(model, self.inputs_as_nchw, self.outputs_as_nchw)
        modified = bool(warnings)
        if _count_transposes(model.graph):
            names = graph_layer.Names(graph_layer.all_names(model.graph))
            inferred = infer(model)
            left = room(model)  # rule 5's bytes in a run held to its input's size
            budget = Budget(left) if left is not None else None

            def optimize(graph: onnx.GraphProto, liftable: frozenset[str]) -> bool:
                """Bodies first (rule 8 lifts their scan outputs' Transposes), then ``graph``."""
                changed = False
                for node in graph.node:
                    lifts = scan_outputs(node, opset)
                    for sub in graph_layer.subgraphs(node):
                        outputs = frozenset(sub.output[i].name for i in lifts
                                            if i < len(sub.output))
                        changed = optimize(sub, outputs if lifts else frozenset()) or changed
                lifted = lift_scan_transposes(graph, names, opset)
                stats.lifted_out_of_loops += lifted
                rewriter = Rewriter(graph, opset=opset, ir_version=model.ir_version,
                                    names=names, inferred=inferred, stats=stats,
                                    keep_reduction_order=self.keep_reduction_order,
                                    liftable=liftable, budget=budget)
                rewriter.run()
                return changed or bool(lifted) or rewriter.modified

            modified = optimize(model.graph, frozenset()) or modified
        after = _count_transposes(model.graph)
        return PassResult(model, modified=modified, warnings=warnings, stats={
            "transposes_before": before,
            "transposes_after": after,
            "transposes_removed": before - after,
            "folded_into_constants": stats.folded_into_constants,
            "pushed_through": stats.pushed_through,
            "converted_to_reshape": stats.converted_to_reshape,
            "identity_dropped": stats.identity_dropped,
            "absorbed_by_consumers": stats.absorbed_by_consumers,
            "lifted_out_of_loops": stats.lifted_out_of_loops,
            "signature_changes": len(warnings),
        })


def eliminate_transposes(
    model: onnx.ModelProto,
    *,
    keep_reduction_order: bool = False,
    inputs_as_nchw: Sequence[str] = (),
    outputs_as_nchw: Sequence[str] = (),
) -> onnx.ModelProto:
    """Function twin of :class:`EliminateTransposes`: rewrites ``model`` in place, returns it."""
    return EliminateTransposes(
        keep_reduction_order=keep_reduction_order, inputs_as_nchw=inputs_as_nchw,
        outputs_as_nchw=outputs_as_nchw,
    )(model).model
