"""ort-offline: ONNX Runtime's graph rewrites, run once offline.

    SessionOptions.optimized_model_filepath = tmp/optimized.onnx   =>   model := load(tmp/…)

ORT applies its graph transformers when a session is created; with ``optimized_model_filepath``
set it also writes the rewritten graph, so a deployment can load it and skip the work.

Decisions:
1. Level ``basic`` on the CPU provider is the default: its rewrites (constant folding, redundant
   node elimination, semantics-preserving fusions) emit standard ONNX ops only. This is verified
   on every run: if the output holds an op outside the standard domains that the input did not
   have (a quantized model's own DynamicQuantizeLSTM is not ORT's doing), the pass skips with a
   warning instead of returning a non-portable model.
2. ``extended``/``all``, or the CUDA provider, emit contrib ops (com.microsoft, NCHWc, Memcpy,
   Fused*). The output is then labelled in ``metadata_props`` (``graphfix.ort_version``,
   ``graphfix.ort_provider``, ``graphfix.ort_level``) and a warning says it is tied to that
   provider and CPU type.
3. Initializers go to an external data file in the temporary folder
   (``session.optimized_model_external_initializers_*``) so outputs over 2 GB can be written; the
   model is read back fully, external data included, before the folder is removed.
4. ``provider="cuda"`` where the CUDA provider cannot load raises ProviderUnavailableError:
   onnxruntime-gpu lists CUDAExecutionProvider as available even without the CUDA libraries and
   then silently falls back to CPU, so the session's own provider list is checked.
5. ``modified`` compares nodes and initializers canonically (order, value_info and metadata
   ignored); when nothing changed the input model is returned untouched, so a second run on
   ORT's own output reports ``modified=False``.
6. Growth: ORT's constant folding materialises weights a model computes at load time
   (ConstantOfShape feeding a Conv grows onnx's light models from ~0.1 MB to several MB). As in
   simplify, an output whose tensors hold over ``max(max_growth * original, original + 64 KiB)``
   bytes is refused (``max_growth=None`` allows it; in a run held to its input's size,
   simplify's rule 3 says what the limit is). ORT offers no per-fold threshold: its rewrites are then
   run again without its ``ConstantFolding`` transformer, and that output taken if it passes
   every check (fusions kept, no weight materialised); otherwise the pass skips with the sizes.
7. Graph inputs and outputs are restored from the original (names, order, dtypes, shapes); the IR
   version is capped to what the installed ORT reads, and raised to 4 when an IR-3 model gains
   initializers that are not inputs (IR 3 requires every initializer to be an input). What ORT
   writes out that the original left to its default goes: attributes at their schema's default
   on the nodes it rewrote (Conv's ``auto_pad``, Gemm's ``transA``), the opset imports' spelled-out
   default domain, an empty graph doc string.
8. ORT's output is checked before it is returned (ONNX's checker, structure only), because ORT
   (1.31) can write a model that no longer loads:
   a. When initializers go to an external file, a Constant node of an If body nested in another
      If body is written twice, as an initializer of that body and as the node (two definitions
      of one name). Such a Constant node is dropped when the initializer holds the same tensor.
   b. A lossless Cast pair (float -> double -> float) whose result a subgraph reads is removed
      from the graph while the subgraph still reads its name. ORT does this even with its
      optimizations off, so no option avoids it; the pass skips.
   Any structural fault the checker finds makes the pass skip with the checker's reason.
9. Portable means portable: no op type and no element type the model does not have.
   ORT's QDQ rewrites (propagating a DequantizeLinear through Gather, Reshape and the like with
   new QuantizeLinear/DequantizeLinear pairs: a requantization nobody asked for) are for
   providers that run quantized kernels, and are off (``session.disable_quant_qdq``).
   At session set-up ORT also decides things for the kernels of the
   CPU provider: float32 islands between inserted Casts where a float16 kernel is missing,
   function ops (HardSwish, a float16 Softmax, local functions) inlined, ``Shape`` of a
   Transpose turned into a ``Gather`` of its permutation. At the portable level (basic, CPU)
   those decisions are taken back (:mod:`graphfix.passes._portable`): the casts go, and each
   original node ORT expanded is put back when that lowers the node count or removes an op type
   the model did not have. An output that still changes a float tensor's element type, or has
   an op type or an element type the model does not have, is refused whole, after one more
   try without the fusions known to write such op types (``MatMul + Add -> Gemm``,
   ``Gather -> Split``: ``_MAKERS``).
10. Never more nodes: an output with more nodes than the input (subgraphs and local functions
   counted) is refused, with the ops that grew, after one more try without the rewrite known
   to grow them (ORT's transpose optimizer, for Transposes: ``_MAKERS``). Nor more Transposes,
   the project's measure of layout work, though the nodes are fewer: ORT's transpose optimizer
   splits a Transpose per reader where it cannot push it (a Swin export held to its size: 6
   more, 60 in the output where the input has 56); the same try without it.
11. ``disabled`` names ORT graph transformers to leave out. The fallbacks
   (:meth:`OrtOffline.fallbacks`) the pipeline tries when the pass's output breaks parity,
   before it leaves the whole pass out: without ``ConstantFolding``; without ``DivMulFusion``
   (``Mul(Div(1, x), y) -> Div(y, x)`` rounds otherwise, and where a Cast to an integer
   follows, as in T5's relative position buckets, one rounding moves a position into the next
   bucket); without every rewrite that computes a float otherwise (``_ROUNDING``: those two,
   and folding Add, Mul and BatchNormalization into Conv weights).
12. On a model that quantizes or rounds values it computes (a dynamically quantized model, an
   int4 model whose MatMulNBits computes in int8, a QDQ model's activation quantizers:
   :func:`graphfix.graph.run_time_steps`), the fusions of ``_REORDERING`` (those of Rule 11
   but constant folding, which computes what the graph computes) are off from the start:
   there a last-bit change moves outputs by whole quantization levels on some inputs only
   (an int4 Llama: 30% of input sets at batch 2 off by 50-270x the tolerance after the Div/Mul
   fusion, while parity's own sets passed), which parity sees only by chance.
13. A model whose bodies (If, Loop, Scan) hold Casts goes through ORT a second time when the
   first changed it: ORT writes the types of what a body reads from outside, and only reading them
   back removes the Casts in the bodies that its first pass could not see were to the same
   type (an EmbeddingBag's Loop, dynamo exporter: 7 of 9 Casts). The second output is kept
   where it has fewer nodes and passes the same checks.
14. On a model that draws random numbers (:func:`graphfix.graph.is_random`), ORT's common
   subexpression elimination is off: it takes two Bernoulli draws of one input for one value
   (``Sub(Bernoulli(p), Bernoulli(p))`` became 0), and no check sees it under ``--no-verify``.
15. eliminate-transposes decides where Transposes go; ORT's transpose optimizer pushes them
   through nodes that pass keeps them before. It is off where that matters: with
   ``keep_reduction_order`` (a ReduceMean over NHWC's axes sums in another order, 1.2e-7 off
   the bit-identical result the option promises), on a model that quantizes values it computes
   (a ReduceMean before an int16 QuantizeLinear came out one level off on 1 input of 200; not
   on one that only rounds them, rule 12's other case: there ORT's optimizer takes away
   Transposes graphfix's pass keeps, 72 of a Piper voice's 138, and parity checks such a
   model on three times the input sets), and where a Hardmax of opset 12 or older flattens
   its input (the first maximum in memory order wins a tie: another element got the 1).
16. Rule 9's setting also lets ORT's constant folding fold a weight's DequantizeLinear (and the
   QuantizeLinear before it, where the graph fake-quantizes a float weight) into a float32
   weight, which ORT otherwise never does: a QDQ model's int8 weights would come out four
   times larger (rule 6 then ran the pass without constant folding at all), a fake-quantized
   one lost the quantized kernels a runtime picks for it. Those weights go to ORT listed as
   inputs, which it does not fold (:func:`_quantized_weights`), and come back as weights.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import onnx

from graphfix.errors import PassError, ProviderUnavailableError
from graphfix.options import (
    DEFAULT_MAX_GROWTH,
    ORT_LEVELS,
    DEVICES,
    PROVIDERS,
    OptionError,
    RunOptions,
    check_max_growth,
    check_provider,
    growth_limit,
)
from graphfix.model_io import (
    max_ir_version,
    new_checker_problem,
    ort_session,
    temporary_folder,
    tensor_digest,
    weight_bytes,
)
from graphfix.graph import (ONNX_DOMAINS, STANDARD_DOMAINS, all_nodes, count_nodes,
                            default_inputs, graphs, holds_graph, is_random, keep_only,
                            run_time_quantizers, run_time_steps, subgraphs)
from ._compare import at_default, grown_ops, same_graph
from ._portable import (
    Unportable,
    element_types,
    op_types,
    undo_provider_decisions,
)
from ._zeros import inexact_zero_nops
from graphfix.registry import Fallback, Pass, PassResult, fold_allowance, register, room

__all__ = ["OrtOffline", "ort_offline", "nonstandard_ops"]

logger = logging.getLogger(__name__)

_MODEL_NAME = "optimized.onnx"
_DATA_NAME = "optimized.onnx.data"
_EXTERNAL_MIN_BYTES = 1024
_CONSTANT_FOLDING = "ConstantFolding"
# Rule 11: ORT's basic rewrites whose result rounds otherwise than the nodes they replace.
_ROUNDING = (_CONSTANT_FOLDING, "DivMulFusion", "ConvAddFusion", "ConvMulFusion",
             "ConvBNFusion")
# Rule 12: the rewrites of _ROUNDING that reorder a computation (folding computes it as is).
_REORDERING = tuple(name for name in _ROUNDING if name != _CONSTANT_FOLDING)
# Rule 15: ORT's transpose optimizer, which pushes Transposes where eliminate-transposes keeps them.
_TRANSPOSES = "TransposeOptimizer"
# Rules 9 and 10: the graph transformers of ORT's basic level that write a standard op type
# their input may not have, or more nodes of it, by the op type they write.
_MAKERS: dict[str, tuple[str, ...]] = {
    "ai.onnx::Gemm": ("MatMulAddFusion",),
    "ai.onnx::Split": ("GatherToSplitFusion", "GatherSliceToSplitFusion"),
    # ORT's transpose optimizer, which splits a Transpose per reader where it cannot push it
    "ai.onnx::Transpose": (_TRANSPOSES,),
}


def nonstandard_ops(
    graph: onnx.GraphProto, functions: Sequence[onnx.FunctionProto] = ()
) -> list[str]:
    """Ops of ``graph`` outside the standard ONNX domains or unknown to the onnx schemas, other
    than calls of the model's own local ``functions``."""
    local = {(f.domain, f.name) for f in functions}
    found = set()
    for node in graph.node:
        if (node.domain, node.op_type) in local:
            continue
        if node.domain not in ONNX_DOMAINS or not onnx.defs.has(node.op_type, node.domain):
            found.add(f"{node.domain or 'ai.onnx'}::{node.op_type}")
    return sorted(found)


def _trim_opset_imports(optimized: onnx.ModelProto, original: onnx.ModelProto) -> None:
    """ORT stamps every domain it knows; keep the original imports (as the original writes
    them: ORT spells out the default domain's empty name) and the domains now used, by the
    bodies of Loop, If and Scan too (a FusedMatMul in a Loop body lost its import, and the
    model did not load) and by local functions."""
    used = {n.domain for n in all_nodes(optimized.graph)} | {
        n.domain for f in optimized.functions for n in f.node} | {
        f.domain for f in optimized.functions} | {o.domain for o in original.opset_import}
    written = {(o.domain, o.version): o for o in original.opset_import}
    kept = [written.get((o.domain, o.version), o) for o in optimized.opset_import
            if o.domain in used]
    del optimized.opset_import[:]
    optimized.opset_import.extend(kept)


def _drop_duplicate_constants(graph: onnx.GraphProto) -> int:
    """Rule 8: drop a Constant node whose output is also an initializer of the same graph
    holding the same tensor; returns how many were dropped (in subgraphs too)."""
    initializers = {t.name: t for t in graph.initializer}
    kept: list[onnx.NodeProto] = []
    dropped = 0
    for node in graph.node:
        for sub in subgraphs(node):
            dropped += _drop_duplicate_constants(sub)
        init = initializers.get(node.output[0]) if len(node.output) == 1 else None
        if init is not None and node.op_type == "Constant" and node.domain in ONNX_DOMAINS:
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None and tensor_digest(value) == tensor_digest(init):
                dropped += 1
                continue
        kept.append(node)
    if dropped and len(kept) != len(graph.node):
        del graph.node[:]
        graph.node.extend(kept)
    return dropped


class _CannotLoad(Exception):
    """ORT refused the model itself (not an option or a provider problem)."""


@register("ort-offline")
class OrtOffline(Pass):
    """Run ONNX Runtime's graph rewrites offline (basic on CPU: standard ops only)."""

    def __init__(
        self, *, level: str = "basic", provider: str = "cpu",
        max_growth: float | None = DEFAULT_MAX_GROWTH,
        disabled: Sequence[str] = (),
        keep_reduction_order: bool = False,
    ) -> None:
        if not isinstance(keep_reduction_order, bool):
            raise PassError(f"ort-offline: keep_reduction_order must be a bool, got "
                            f"{type(keep_reduction_order).__name__}")
        self.keep_reduction_order = keep_reduction_order
        if isinstance(disabled, str) or not all(isinstance(n, str) and n for n in disabled):
            raise PassError(f"ort-offline: disabled names ORT graph transformers, got "
                            f"{disabled!r}")
        self.disabled = tuple(dict.fromkeys(disabled))
        try:
            self.max_growth = check_max_growth(max_growth)
        except OptionError as error:
            raise PassError(f"ort-offline: {error}") from None
        if level not in ORT_LEVELS:
            raise PassError(f"ort-offline: level must be one of {', '.join(ORT_LEVELS)}, "
                            f"got {level!r}")
        try:
            check_provider(provider, allowed=DEVICES, what="the provider")
        except OptionError as error:
            raise PassError(f"ort-offline: {error}") from None
        self.level = level
        self.provider = provider

    @classmethod
    def configured(cls, run: RunOptions) -> OrtOffline:
        # "auto" means the portable CPU rewrites; a model for CUDA asks for them by name.
        provider = "cpu" if run.provider == "auto" else run.provider
        return cls(level=run.ort_level, provider=provider, max_growth=run.max_growth,
                   keep_reduction_order=run.keep_reduction_order)

    def fallbacks(self) -> list[Fallback]:
        # Rule 11: the rewrites that compute a float otherwise, the likeliest first.
        found = []
        for label, names in (("ONNX Runtime's constant folding", (_CONSTANT_FOLDING,)),
                             ("ONNX Runtime's Div/Mul fusion", ("DivMulFusion",)),
                             ("ONNX Runtime's rewrites that round otherwise", _ROUNDING)):
            if not set(names) <= set(self.disabled):
                found.append(Fallback(label, OrtOffline(
                    level=self.level, provider=self.provider, max_growth=self.max_growth,
                    disabled=(*self.disabled, *names),
                    keep_reduction_order=self.keep_reduction_order)))
        return found

    @property
    def _portable(self) -> bool:
        return self.level == "basic" and self.provider == "cpu"

    def _optimize(self, model: onnx.ModelProto, disabled: Sequence[str] = ()) -> onnx.ModelProto:
        import onnxruntime as ort

        providers: list[str] = [PROVIDERS[self.provider]]
        if self.provider != "cpu":
            providers.append(PROVIDERS["cpu"])
        with temporary_folder("ort") as folder:
            path = folder / _MODEL_NAME
            options = ort.SessionOptions()
            options.optimized_model_filepath = str(path)
            options.add_session_config_entry(
                "session.optimized_model_external_initializers_file_name", _DATA_NAME
            )
            options.add_session_config_entry(
                "session.optimized_model_external_initializers_min_size_in_bytes",
                str(_EXTERNAL_MIN_BYTES),
            )
            protected: list[str] = []
            if self._portable:  # rule 9: no requantization
                options.add_session_config_entry("session.disable_quant_qdq", "1")
                protected = _quantized_weights(model.graph)  # rule 16
            if inexact_zero_nops(model):  # x + 0.0 is no no-op when x is -0.0 (._zeros)
                disabled = (*disabled, "NoopElimination")
            added = _list_as_inputs(model.graph, protected)
            try:
                # Declared shapes left out: ORT folds Shape from them, stale or not.
                session = ort_session(model, optimization=self.level, providers=providers,
                                      options=options, disabled_optimizers=disabled,
                                      declared_shapes=False)
            except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types
                raise _CannotLoad(str(exc).strip().splitlines()[0] if str(exc).strip() else
                                  type(exc).__name__) from exc
            finally:
                _unlist(model.graph, added)
            if PROVIDERS[self.provider] not in session.get_providers():
                raise ProviderUnavailableError(
                    f"ort-offline: {PROVIDERS[self.provider]} cannot load in onnxruntime "
                    f"{ort.__version__} (the session fell back to {session.get_providers()})",
                    hint="install the CUDA and cuDNN libraries onnxruntime-gpu needs, "
                    "or use provider='cpu'",
                )
            del session
            # onnx.load reads the external data and marks every tensor as inline again.
            optimized = onnx.load(str(path), load_external_data=True)
            _unlist(optimized.graph, added)
            return optimized

    def call(self, model: onnx.ModelProto) -> PassResult:
        stats: dict[str, Any] = {
            "nodes_before": count_nodes(model),
            "initializers_before": len(model.graph.initializer),
        }
        disabled = self.disabled
        if run_time_steps(model.graph):  # rule 12
            disabled = tuple(dict.fromkeys((*disabled, *_REORDERING)))
            stats["order_kept"] = 1
        if _TRANSPOSES not in disabled and (
                self.keep_reduction_order or run_time_quantizers(model.graph)
                or _layout_decides_ties(model)):  # rule 15
            disabled = (*disabled, _TRANSPOSES)
            stats["layout_kept"] = 1
        if any(is_random(node) for node in all_nodes(model.graph)):  # rule 14
            disabled = tuple(dict.fromkeys((*disabled, "CommonSubexpressionElimination")))
            stats["draws_kept_apart"] = 1
        try:
            try:
                optimized, used = self._attempt_portable(model, stats, disabled=disabled)
            except _Grows as growth:
                if _CONSTANT_FOLDING in disabled:
                    raise
                # Rule 6: the fusions without the folding that grew the model.
                logger.debug("ort-offline: %s; again without ConstantFolding", _reason(growth))
                optimized, used = self._attempt_portable(
                    model, stats, disabled=(*disabled, _CONSTANT_FOLDING))
                stats["constant_folding_off"] = 1
        except (_CannotLoad, Unportable, _Refused) as refusal:
            reason = _reason(refusal)
            logger.warning("ort-offline: %s", reason)
            return PassResult(model, False, warnings=[reason], skipped=reason)
        if _casts_in_bodies(optimized) and not same_graph(optimized.graph, model.graph,
                                                          names=True):  # rule 13
            try:
                again = self._attempt(optimized, {}, used)
                if count_nodes(again) < count_nodes(optimized):
                    self._check(again, model, nonstandard_ops(again.graph, again.functions))
                    stats["second_pass_nodes"] = count_nodes(optimized) - count_nodes(again)
                    optimized = again
            except (_CannotLoad, Unportable, _Refused) as refusal:
                logger.debug("ort-offline: second pass not kept (%s)", _reason(refusal))
        return self._finish(model, optimized, stats)

    def _finish(self, model: onnx.ModelProto, optimized: onnx.ModelProto,
                stats: dict[str, Any]) -> PassResult:
        """The pass's result from ORT's checked output (rules 2, 5, 7, 8)."""
        contrib = nonstandard_ops(optimized.graph, optimized.functions)
        if same_graph(optimized.graph, model.graph, names=True):
            stats.update(nodes_after=stats["nodes_before"],
                         initializers_after=stats["initializers_before"], contrib_ops=0)
            return PassResult(model, False, stats=stats)
        _restore_signature(optimized, model)
        warnings = [] if self._portable else self._label(optimized, contrib)
        invalid = new_checker_problem(optimized, model, full_check=False)
        if invalid:
            reason = f"ONNX Runtime wrote an invalid model ({invalid}); model kept"
            logger.warning("ort-offline: %s", reason)
            return PassResult(model, False, warnings=[reason], skipped=reason)
        stats.update(
            nodes_after=count_nodes(optimized),
            initializers_after=len(optimized.graph.initializer),
            contrib_ops=sum(1 for n in optimized.graph.node
                            if f"{n.domain or 'ai.onnx'}::{n.op_type}" in contrib),
        )
        return PassResult(optimized, True, stats=stats, warnings=warnings)

    def _attempt_portable(self, model: onnx.ModelProto, stats: dict[str, Any],
                          disabled: Sequence[str]) -> tuple[onnx.ModelProto, Sequence[str]]:
        """:meth:`_attempt`, again without the rewrites that wrote op types the model does not
        have (rule 9) or more nodes of a type (rule 10) when there are such; and the
        rewrites left out."""
        try:
            return self._attempt(model, stats, disabled), disabled
        except _Reworked as reworked:
            makers = sorted({name for op in reworked.ops for name in _MAKERS.get(op, ())}
                            - set(disabled))
            if not makers:
                raise
            logger.debug("ort-offline: %s; again without %s", reworked, ", ".join(makers))
            stats["fusions_off"] = len(makers)
            again = [*disabled, *makers]
            return self._attempt(model, stats, again), again

    def _attempt(self, model: onnx.ModelProto, stats: dict[str, Any],
                 disabled: Sequence[str]) -> onnx.ModelProto:
        """ORT's output for ``model``, its provider decisions taken back at the portable level,
        checked (rules 6, 9, 10); raises :class:`_Refused` (or :class:`_Grows`)."""
        optimized = self._optimize(model, disabled)
        duplicates = _drop_duplicate_constants(optimized.graph)
        if duplicates:
            logger.debug("ort-offline: %d Constant nodes ORT also wrote as initializers "
                         "dropped", duplicates)
        if self._portable:
            # Rule 9: what ORT decided for its CPU kernels does not stay in a portable model.
            undone = undo_provider_decisions(optimized, model)
            stats.update(precision_casts_removed=undone.casts, nodes_put_back=undone.restored)
        self._check(optimized, model, nonstandard_ops(optimized.graph, optimized.functions))
        return optimized

    def _check(self, optimized: onnx.ModelProto, model: onnx.ModelProto,
               contrib: list[str]) -> None:
        """Refuse ORT's output when it changed the signature, is not portable at the portable
        level, grows the tensors past the growth policy (rule 6) or the nodes (rule 10)."""
        in_names = {i.name for i in model.graph.input}
        out_names = [o.name for o in model.graph.output]
        if [o.name for o in optimized.graph.output] != out_names or not {
            i.name for i in optimized.graph.input
        } <= in_names:
            raise _Refused("ORT changed the graph's inputs or outputs")
        new_contrib = sorted(set(contrib) - set(nonstandard_ops(model.graph, model.functions)))
        if self._portable and new_contrib:
            raise _Refused(f"ORT basic emitted non-standard ops ({', '.join(new_contrib)})")
        if self._portable:
            new_ops = sorted(f"{d}::{o}" for d, o in op_types(optimized) - op_types(model))
            new_types = sorted(onnx.TensorProto.DataType.Name(t)
                               for t in element_types(optimized) - element_types(model))
            if new_ops or new_types:
                raise _Foreign(new_ops, new_types)
        # Sizes from tensor shapes: serializing a model to measure it copies every weight and
        # fails past 2 GB.
        size, new_size = weight_bytes(model), weight_bytes(optimized)
        if new_size > growth_limit(size, self.max_growth, new_size, room(model),
                                   fold_allowance()):
            raise _Grows(f"ORT's constant folding grows the model from {size} to {new_size} "
                         f"bytes (max_growth={self.max_growth})")
        nodes_before, nodes_out = count_nodes(model), count_nodes(optimized)
        transposes_before, transposes_out = _transposes(model), _transposes(optimized)
        if transposes_out > transposes_before and nodes_out <= nodes_before:
            raise _Reworked(f"ORT's output has more Transposes ({transposes_before} -> "
                            f"{transposes_out})", ["ai.onnx::Transpose"])
        if nodes_out > nodes_before:
            grown = grown_ops(optimized, model)
            raise _Reworked(f"ORT's output has more nodes ({nodes_before} -> {nodes_out}: "
                            f"{grown})", [f"ai.onnx::{part.split(' ')[0]}"
                                         for part in grown.split(", ")])

    def _label(self, optimized: onnx.ModelProto, contrib: list[str]) -> list[str]:
        """Rule 2: a model tied to a provider says so in its metadata and in a warning."""
        import onnxruntime as ort

        labels = {
            "graphfix.ort_version": ort.__version__,
            "graphfix.ort_provider": PROVIDERS[self.provider],
            "graphfix.ort_level": self.level,
        }
        kept = [p for p in optimized.metadata_props if p.key not in labels]
        del optimized.metadata_props[:]
        optimized.metadata_props.extend(kept)
        for key, value in labels.items():
            optimized.metadata_props.add(key=key, value=value)
        return [f"ort-offline level={self.level} provider={self.provider}: the model is tied to "
                f"{PROVIDERS[self.provider]} on this CPU type and onnxruntime {ort.__version__}"
                + (f" (contrib ops: {', '.join(contrib)})" if contrib else "")]


def _layout_decides_ties(model: onnx.ModelProto) -> bool:
    """Rule 15: whether a Hardmax flattens its input (opset 12 or older), where the memory
    order of the values decides which of equal maxima wins."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    return opset < 13 and any(node.op_type == "Hardmax" and node.domain in STANDARD_DOMAINS
                              for node in all_nodes(model.graph))


def _casts_in_bodies(model: onnx.ModelProto) -> bool:
    """Whether a body (If, Loop, Scan) holds a Cast: what ORT's second pass may remove."""
    return any(n.op_type == "Cast" for node in model.graph.node if holds_graph(node)
               for sub in subgraphs(node) for n in all_nodes(sub))


class _Refused(Exception):
    """ORT's output is not taken (the reason)."""


class _Reworked(_Refused):
    """ORT's output has ops (``domain::op``) that a rewrite of ``_MAKERS`` may have written."""

    def __init__(self, message: str, ops: list[str]) -> None:
        super().__init__(message)
        self.ops = ops


class _Foreign(_Reworked):
    """Rule 9: ORT's output has op types or element types the model does not have."""

    def __init__(self, ops: list[str], types: list[str]) -> None:
        parts = [f"op types the model does not ({', '.join(ops)})" if ops else "",
                 f"element types the model does not ({', '.join(types)})" if types else ""]
        super().__init__("ORT's output is not portable: it has "
                         + "; ".join(part for part in parts if part), ops)


class _Grows(_Refused):
    """ORT's constant folding grows the model past the growth policy."""


def _transposes(model: onnx.ModelProto) -> int:
    """The model's Transposes, in every graph and local function."""
    nodes = [*all_nodes(model.graph), *(n for f in model.functions for n in f.node)]
    return sum(1 for n in nodes if n.op_type == "Transpose" and n.domain in ONNX_DOMAINS)


def _reason(refusal: Exception) -> str:
    if isinstance(refusal, _CannotLoad):
        # A custom op ORT lacks, an opset it does not implement: the other passes can still do
        # their work, so this one steps aside.
        return f"ONNX Runtime cannot load the model ({refusal}); model kept"
    if isinstance(refusal, Unportable):
        return f"ORT's output is tied to its CPU provider ({refusal}); model kept"
    return f"{refusal}; model kept"


def _quantized_weights(graph: onnx.GraphProto) -> list[str]:
    """Rule 16: the weights a DequantizeLinear reads, directly (a QDQ model's int8 weights) or
    through a QuantizeLinear (a weight fake-quantized in the graph, as a QAT export writes it).
    With its QDQ handling off (rule 9) ONNX Runtime's constant folding folds such a pair into a
    float32 weight: the same values, but the quantized kernels a runtime picks for a
    DequantizeLinear before a Conv or MatMul are lost, and ORT's own session, which fuses the
    pair into an integer kernel, computes the original another way (a fake-quantized Linear's
    outputs moved by one quantization level, 35x the tolerance). Listed as graph inputs for ORT,
    those weights are defaults a caller may override, which ORT never folds."""
    weights = {t.name for t in graph.initializer}
    listed = {i.name for i in graph.input}
    made = {name: node for node in graph.node for name in node.output if name}
    found: dict[str, None] = {}
    for node in all_nodes(graph):  # a body's DequantizeLinear reads the main graph's weights
        if node.op_type != "DequantizeLinear" or not node.input:
            continue
        data = node.input[0]
        quantizer = made.get(data)
        if (data not in weights and quantizer is not None
                and quantizer.op_type == "QuantizeLinear" and quantizer.input):
            data = quantizer.input[0]
        if data in weights and data not in listed:
            found[data] = None
    return list(found)


def _list_as_inputs(graph: onnx.GraphProto, names: Sequence[str]) -> list[str]:
    """Rule 16: ``names`` (initializers) appended to the graph's inputs; the names added."""
    weights = {t.name: t for t in graph.initializer}
    for name in names:
        tensor = weights[name]
        graph.input.append(onnx.helper.make_tensor_value_info(
            name, tensor.data_type, list(tensor.dims)))
    return list(names)


def _unlist(graph: onnx.GraphProto, names: Sequence[str]) -> None:
    """Rule 16 undone: the inputs :func:`_list_as_inputs` added go again."""
    if names:
        gone = set(names)
        keep_only(graph.input, lambda value: value.name not in gone)


def _restore_signature(optimized: onnx.ModelProto, model: onnx.ModelProto) -> None:
    """Rule 7: the original signature, exactly, and what the model says about itself."""
    # An IR-3 style input that only carried an initializer ORT folded away is not a real
    # input: restoring it would turn it into a required feed. From IR 4 such an input is a
    # default a caller may override, which ORT never folds but drops where nothing reads it:
    # it stays, with its default.
    was_init = {t.name: t for t in model.graph.initializer}
    now_init = {t.name for t in optimized.graph.initializer}
    used = {name for n in optimized.graph.node for name in n.input}
    defaults = set(default_inputs(model))
    kept_inputs = [
        i for i in model.graph.input
        if i.name not in was_init or i.name in defaults or (i.name in now_init and i.name in used)
    ]
    optimized.graph.initializer.extend(was_init[name] for name in defaults
                                       if name not in now_init)
    del optimized.graph.input[:]
    optimized.graph.input.extend(kept_inputs)
    del optimized.graph.output[:]
    optimized.graph.output.extend(model.graph.output)
    optimized.ir_version = min(optimized.ir_version, max(model.ir_version, max_ir_version()))
    listed = {i.name for i in optimized.graph.input}
    if optimized.ir_version < 4 and any(t.name not in listed for t in optimized.graph.initializer):
        optimized.ir_version = 4  # IR 3 requires every initializer to be an input
    for field in ("producer_name", "producer_version"):
        if model.HasField(field):
            setattr(optimized, field, getattr(model, field))
        else:  # ORT writes them empty: bytes that say nothing
            optimized.ClearField(field)
    _clear_empty_tensor_fields(optimized.graph)
    del optimized.metadata_props[:]
    optimized.metadata_props.extend(model.metadata_props)
    if not model.graph.HasField("doc_string"):
        optimized.graph.ClearField("doc_string")
    _trim_opset_imports(optimized, model)
    _drop_default_attributes(optimized, model)
    _drop_added_doc_strings(optimized, model)


def _clear_empty_tensor_fields(graph: onnx.GraphProto) -> None:
    """Rule 7: an initializer's ``doc_string`` ORT writes empty and its ``data_location``
    written DEFAULT say what an absent field says; they are cleared (bytes, not meaning)."""
    for inner in graphs(graph):
        for tensor in inner.initializer:
            if tensor.HasField("doc_string") and not tensor.doc_string:
                tensor.ClearField("doc_string")
            if tensor.HasField("data_location") and \
                    tensor.data_location == onnx.TensorProto.DEFAULT:
                tensor.ClearField("data_location")


def _drop_added_doc_strings(optimized: onnx.ModelProto, model: onnx.ModelProto) -> None:
    """Rule 7: a doc string ORT writes on a node it made or moved ("Added in transpose
    optimizer") is not the input's: dropped (bytes that say nothing about the model); a node
    writing the same outputs as one of the input keeps that node's own."""
    own = {tuple(n.output): n.doc_string for n in all_nodes(model.graph)}
    for node in all_nodes(optimized.graph):
        if node.HasField("doc_string") and node.doc_string != own.get(tuple(node.output)):
            node.ClearField("doc_string")


def _drop_default_attributes(optimized: onnx.ModelProto, model: onnx.ModelProto) -> int:
    """Rule 7: attributes ORT writes out at their schema's default (Conv's ``auto_pad``,
    Gemm's ``transA``) where the input's node, the one writing the same outputs, did not state
    them, dropped: an absent attribute means its default, and each costs bytes (an image
    descriptor came out 824 bytes larger than its input of them alone). Returns how many."""
    opsets = {"" if o.domain in STANDARD_DOMAINS else o.domain: o.version
              for o in optimized.opset_import}
    stated = {tuple(n.output): {a.name for a in n.attribute} for n in all_nodes(model.graph)}
    dropped = 0
    for node in all_nodes(optimized.graph):
        if node.domain not in ONNX_DOMAINS or not node.attribute:
            continue
        version = opsets.get("" if node.domain in STANDARD_DOMAINS else node.domain, 1)
        own = stated.get(tuple(node.output), set())
        keep = [a for a in node.attribute if a.name in own
                or not at_default(node.domain, node.op_type, a, version)]
        if len(keep) != len(node.attribute):
            dropped += len(node.attribute) - len(keep)
            del node.attribute[:]
            node.attribute.extend(keep)
    return dropped


def ort_offline(
    model: onnx.ModelProto,
    *,
    level: str = "basic",
    provider: str = "cpu",
    max_growth: float | None = DEFAULT_MAX_GROWTH,
    disabled: Sequence[str] = (),
    keep_reduction_order: bool = False,
) -> onnx.ModelProto:
    """Function twin of :class:`OrtOffline`: returns the rewritten model."""
    return OrtOffline(level=level, provider=provider, max_growth=max_growth,
                      disabled=disabled, keep_reduction_order=keep_reduction_order)(model).model
