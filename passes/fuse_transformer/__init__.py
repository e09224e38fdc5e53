"""fuse-transformer: ONNX Runtime's transformer fusions, with the heads read from the graph.

    MatMul/Add q,k,v -> Reshape -> Transpose -> MatMul -> Softmax -> MatMul ...   =>
    com.microsoft::Attention(num_heads=H)        (and SkipLayerNormalization, BiasGelu, ...)

ONNX Runtime's transformers optimizer (``onnxruntime.transformers.optimizer.optimize_model``)
fuses attention, layer norms with their residual Add, GELUs and embeddings into its contrib ops,
if it is told the model type and, where it cannot find them itself, the number of heads and the
hidden size. A wrong head count gives a model that computes something else.

Rules:
1. The model type and the heads come from the graph (:mod:`.heads`): the Reshape that splits q
   into heads, in every attention block, read and cross-checked with q's projection width.
   ``num_heads``/``hidden_size`` given by hand override the reading (and the report says when
   they contradict it). After ORT's fusion every attention node carries the heads chosen.
2. Verified before it is returned: the fused model and the input run on the same inputs
   (parity's, ONNX Runtime's CPU provider, optimizations off) and every output must be within
   parity's float32 tolerance. When the heads cannot be read, attention is not fused (the other
   fusions still are); when the fused model fails the check or does not run, it is fused
   again without rotary embeddings (ORT's RotaryEmbedding fusion of a decoder step with its
   cache takes the position ids of a batch of one), with graphfix's attention fusion in place
   of ORT's (Rule 7; ORT's BERT pattern matched CLIP's text encoder and read its padding mask
   only, not the causal one: 8e3x the tolerance), without attention, without both, and if
   that fails too the model is kept. Each fallback says why. A model with an output empty on
   every input set (a detector's boxes on generated inputs) is kept: there is nothing to
   compare. The signature stays: an input nothing reads any more (or never
   read: a decoder's ``encoder_hidden_states`` in a dynamo export with cache), which ORT's
   optimizer prunes, is put back, since callers still feed it.
3. Labelled ORT-bound, as ort-offline labels its extended/all levels: ``metadata_props``
   ``graphfix.ort_version``, ``graphfix.ort_provider`` and ``graphfix.ort_fusion`` (the
   model type and heads), and a warning says the model is tied to ONNX Runtime.
4. ORT's fusion patterns are written against exporters' graphs: the pipeline runs this pass
   before its own rewrites (``--fuse transformer``), which then step aside from the contrib
   ops they cannot read.
5. A model that already holds ORT's fused ops is left alone.
6. The fused attention reads the attention mask as it is (a 0/1 mask per key), never reduced
   to key lengths: ORT's optimizer does that by default for BERT, which is exact only when
   every mask is ones then zeros, and a tokenizer's mask need not be (packed sequences, masked
   tokens). Exact on every mask, and the check runs on masks with holes.
7. Where ORT's optimizer fuses no attention (its patterns match the legacy exporter's graphs;
   the dynamo exporter's attention matches none of them), graphfix fuses the blocks itself
   (:mod:`.attention`): self-attention into ``Attention`` with q, k and v packed into one
   projection (``packed_attention=False``: none is), the others into
   ``MultiHeadAttention``, after ORT's other fusions or, where ORT's optimizer fails on the
   model, alone. The check of Rule 2 covers it like ORT's own.
8. No fused op may feed a quantizer of computed values (a dynamically quantized or int4 model
   whose MatMulNBits computes in int8: :func:`graphfix.graph.run_time_steps`): the fused
   kernels add in another order, and there a last bit moves an output by a whole quantization
   level on some inputs only, which the check of Rule 2 sees only by chance. Such a model is
   kept unfused, saying why. QOperator models (integer kernels end to end) are fused.
9. Blocks whose heads differ (a Swin's or a SegFormer's stages: 3, 6, 12, 24 heads) have one
   count for none of them: ORT's optimizer, which takes one, fuses everything but attention,
   and graphfix's attention fusion fuses each block with the heads its own q split reads
   (:func:`.heads.heads_per_block`), under the same check.
10. Heads a Reshape target computed at run time hides (``nn.MultiheadAttention`` in
   TorchScript's export: ``Concat(Shape(x)[0] * heads, ...)``) are read once fold-shapes has
   folded the target; the folded model is then the one fused (the pipeline folds it later
   anyway), under the same check.
11. A model with no attention block to fuse and none of the ops ONNX Runtime's other fusions
   start from (:data:`_FUSION_STARTS`: layer norms written out or not, Gelu's Erf or Tanh, a
   QuickGelu's Sigmoid of a product) is left alone at once, saying so: ORT's optimizer, run on
   a Faster R-CNN for nothing, spent 6 minutes in its symbolic shape inference.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import onnx

from graphfix.errors import PassError
from graphfix.graph import before_steps, count_nodes, is_quantizer, run_time_steps
from graphfix.feeds import nothing_to_compare
from graphfix.model_io import load_external_values
from graphfix.options import PROVIDERS, RunOptions
from .._measuring import (
    make_feeds,
    run_outputs,
    tolerance,
    worst_output,
)
from .attention import fuse_attention, tensor_info
from .heads import (Heads, blocks_disagree, heads_per_block, model_type, read_heads,
                    target_computed)
from graphfix.registry import Pass, PassResult, register

__all__ = ["FuseTransformer", "fuse_transformer", "FUSED_OPS", "MODEL_TYPES"]

logger = logging.getLogger(__name__)

MODEL_TYPES = ("bert", "gpt2", "vit")
# ORT's fused ops, as the report counts them.
FUSED_OPS = ("Attention", "MultiHeadAttention", "GroupQueryAttention", "EmbedLayerNormalization",
             "SkipLayerNormalization", "SkipSimplifiedLayerNormalization",
             "SimplifiedLayerNormalization", "BiasGelu", "FastGelu", "Gelu", "QuickGelu",
             "BiasSplitGelu", "BiasAdd", "RotaryEmbedding")
_ATTENTION = ("Attention", "MultiHeadAttention", "GroupQueryAttention", "PackedAttention")
# The ops ONNX Runtime's fusions other than attention start from (Rule 11): layer norms,
# written out (ReduceMean, Pow) or not, and Gelu's Erf or Tanh; a QuickGelu's Sigmoid is one
# of a product (:func:`_fusable`).
_FUSION_STARTS = frozenset({"ReduceMean", "Pow", "LayerNormalization",
                            "SimplifiedLayerNormalization", "RMSNormalization", "Erf", "Tanh",
                            "Gelu"})
_CONTRIB = "com.microsoft"
# ORT's transformers package logs under its module names (fusion_attention, onnx_model, ...).
_ORT_LOGGERS = ("fusion", "onnx_model", "optimizer", "shape_infer", "float16", "bert",
                "onnxruntime.transformers")


@register("fuse-transformer")
class FuseTransformer(Pass):
    """Fuse attention, layer norms and GELUs into ORT contrib ops, heads read from the graph."""

    def __init__(
        self,
        *,
        model_type: str | None = None,
        num_heads: int | None = None,
        hidden_size: int | None = None,
        provider: str = "cpu",
        feeds: Sequence[Mapping[str, np.ndarray]] | None = None,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        inputs: str | os.PathLike[str] | None = None,
        seed: int = 0,
        packed_attention: bool = True,
        nchw_inputs: Sequence[str] = (),
    ) -> None:
        if model_type is not None and model_type not in MODEL_TYPES:
            raise PassError(f"fuse-transformer: model_type must be one of "
                            f"{', '.join(MODEL_TYPES)}, got {model_type!r}")
        for label, value in (("num_heads", num_heads), ("hidden_size", hidden_size)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise PassError(f"fuse-transformer: {label} must be an integer >= 1, "
                                f"got {value!r}")
        if provider not in ("cpu", "cuda"):
            raise PassError(f"fuse-transformer: provider must be cpu or cuda, got {provider!r}")
        self.model_type = model_type
        self.num_heads = num_heads
        self.hidden_size = hidden_size
        self.provider = provider
        self.input_shapes = dict(input_shapes) if input_shapes else None
        self.inputs = inputs
        self.nchw_inputs = tuple(nchw_inputs)  # as convert-precision's
        self.seed = seed
        self.packed_attention = packed_attention
        self._feeds = [dict(f) for f in feeds] if feeds is not None else None

    @classmethod
    def configured(cls, run: RunOptions) -> FuseTransformer:
        return cls(provider="cuda" if run.provider == "cuda" else "cpu",
                   input_shapes=run.input_shapes, inputs=run.inputs,
                   nchw_inputs=run.inputs_as_nchw)

    def call(self, model: onnx.ModelProto) -> PassResult:
        if any(n.domain == _CONTRIB and n.op_type in FUSED_OPS for n in model.graph.node):
            return PassResult(model, False, stats={"fused_nodes": 0})  # Rule 5
        kind, evidence = (self.model_type, "given") if self.model_type else model_type(model)
        read = read_heads(model)
        notes: list[str] = [f"model type {kind}: {evidence}"]
        source = model
        if isinstance(read, str) and target_computed(read):  # Rule 10
            folded = _folded(model)
            again = read_heads(folded) if folded is not None else read
            if not isinstance(again, str) or blocks_disagree(again):
                notes.append("heads read once fold-shapes folded the Reshape targets computed "
                             "at run time; the folded model is fused")
                read, source = again, folded
        heads, hidden = self._choose(read, notes)
        per_block: dict[str, int] = {}
        if heads is None and isinstance(read, str) and blocks_disagree(read):
            per_block = heads_per_block(source)  # Rule 9: each block its own heads
            notes.append(f"each of {len(per_block)} attention block(s) fused with its own "
                         "heads, by graphfix's attention fusion")
        if not (heads or per_block) and not _fusable(model):  # Rule 11
            reason = ("nothing to fuse: " + "; ".join(notes[1:]) + "; and none of the ops "
                      "ONNX Runtime's other fusions start from (layer norms, Gelu)")
            logger.warning("fuse-transformer: %s", reason)
            return PassResult(model, False, warnings=[reason], skipped=reason,
                              details={"model_type": kind, "notes": notes})
        # ORT fuses with the graph's own geometry where it was read; the heads chosen (a value
        # given by hand wins) are then written into every attention node, and checked.
        ort_heads = read.num_heads if isinstance(read, Heads) else heads
        ort_hidden = read.hidden_size if isinstance(read, Heads) else hidden
        try:
            feeds = self._feeds if self._feeds is not None else make_feeds(
                model, seed=self.seed, runs=None, input_shapes=self.input_shapes,
                inputs=self.inputs, nchw_inputs=self.nchw_inputs)
            names = [o.name for o in model.graph.output]
            reference = run_outputs(model, feeds, names)
        except Exception as err:  # noqa: BLE001 - ORT cannot run the input: nothing to check
            reason = f"the model cannot be checked here ({_first_line(err)}); model kept"
            return PassResult(model, False, warnings=[reason], skipped=reason)
        empty = nothing_to_compare(reference, names)
        if empty:  # Rule 2: nothing compared is nothing checked
            reason = (f"the model cannot be checked here (output(s) "
                      f"{', '.join(map(repr, empty))} empty, only zeros or only NaN on every "
                      "input set: no error of a fusion shows in them; give inputs on which they "
                      "are not); model kept")
            return PassResult(model, False, warnings=[reason], skipped=reason)
        bars = {name: tolerance(str(value.dtype)) for name, value in reference[0].items()}
        # (label, attention fused, by ORT's patterns too, rotary embeddings fused)
        attempts = [("all fusions", True, True, True),
                    ("without rotary embeddings", True, True, False),
                    ("graphfix's attention fusion instead of ORT's", True, False, True),
                    ("without attention", False, False, True),
                    ("without attention or rotary embeddings", False, False, False)]
        rotary_seen, ort_attention_seen = True, False
        for label, attention, by_ort, rotary in (
                attempts if heads or per_block else attempts[3:]):
            if not rotary and not rotary_seen:
                continue  # the attempt before fused no rotary embedding: the same again
            if attention and not by_ort and not ort_attention_seen:
                continue  # ORT's patterns fused no attention: graphfix's fusion ran already
            try:
                fused, ort_attention = self._fuse(
                    source, kind, ort_heads or 0, ort_hidden or 0, attention,
                    heads or per_block or 0, rotary=rotary, by_ort=by_ort)
            except Exception as err:  # noqa: BLE001 - ORT's optimizer fails in many ways
                notes.append(f"{label}: ONNX Runtime's optimizer failed ({_first_line(err)})")
                continue
            ort_attention_seen = ort_attention_seen or ort_attention
            # what this fusion added: contrib ops the input already held (a CNN saved by an
            # ORT session, with its FusedConv) are no fusion of this pass's
            counts = _fused_counts(fused) - _fused_counts(model)
            rotary_seen = bool(counts.get("RotaryEmbedding"))
            if not counts:
                notes.append(f"{label}: ONNX Runtime's optimizer fused nothing")
                continue
            problem = _signature_problem(fused, model) or _before_steps_problem(fused)
            if problem is None:
                try:
                    candidate = run_outputs(fused, feeds, names)
                    worst, error = worst_output(reference, candidate, bars)
                    if error > 1.0:
                        problem = (f"output {worst!r} reaches {error:.3g}x parity's float32 "
                                   f"tolerance")
                except Exception as err:  # noqa: BLE001
                    problem = f"the fused model does not run ({_first_line(err)})"
            if problem is not None:
                notes.append(f"{label} refused: {problem}")
                logger.info("fuse-transformer: %s refused: %s", label, problem)
                continue
            if attention and not any(counts.get(op) for op in _ATTENTION):
                notes.append("attention: none fused: neither ONNX Runtime's patterns nor "
                             "graphfix's match this graph's attention blocks")
            return self._accept(model, fused, counts, kind, heads, hidden, label, notes)
        reason = "no fusion kept: " + "; ".join(notes[1:])
        logger.warning("fuse-transformer: %s", reason)
        return PassResult(model, False, warnings=[reason], skipped=reason,
                          details={"model_type": kind, "notes": notes})

    def _choose(self, read: Heads | str, notes: list[str]) -> tuple[int | None, int | None]:
        """Rule 1: the heads and hidden size to fuse with (None: attention is not fused)."""
        if isinstance(read, Heads):
            notes.append(f"heads read from the graph: {read.describe()}")
            heads, hidden = read.num_heads, read.hidden_size
        else:
            notes.append(f"heads not read: {read}")
            heads, hidden = None, None
        if self.num_heads is not None:
            if heads is not None and heads != self.num_heads:
                notes.append(f"num_heads={self.num_heads} given by hand contradicts the "
                             f"graph's {heads}; the given value is tried")
            heads = self.num_heads
        if self.hidden_size is not None:
            hidden = self.hidden_size
        if heads is not None and hidden is not None and hidden % heads:
            notes.append(f"hidden size {hidden} is not a multiple of {heads} heads")
            return None, None
        return heads, hidden

    def _fuse(self, model: onnx.ModelProto, kind: str, heads: int, hidden: int,
              attention: bool, chosen: int | Mapping[str, int], *,
              rotary: bool = True, by_ort: bool = True) -> tuple[onnx.ModelProto, bool]:
        """``model`` through ORT's optimizer, then graphfix's attention fusion where ORT's
        fused no attention (``by_ort=False``: ORT's attention patterns are not tried); and
        whether the attention fused is ORT's."""
        from onnxruntime.transformers.fusion_options import AttentionMaskFormat, FusionOptions
        from onnxruntime.transformers.optimizer import optimize_model

        work = onnx.ModelProto()
        work.CopyFrom(model)
        load_external_values(work)  # ORT's optimizer reads every weight from the proto
        options = FusionOptions(kind)
        # Heads per block (Rule 9): ORT's optimizer takes one count, graphfix's fusion each.
        options.enable_attention = attention and by_ort and isinstance(chosen, int)
        options.enable_rotary_embeddings = rotary
        if options.attention_mask_format == AttentionMaskFormat.MaskIndexEnd:
            # Rule 6: the fused attention reads the mask itself, not key lengths.
            options.attention_mask_format = AttentionMaskFormat.AttentionMask
        shapes, types = tensor_info(work) if attention and chosen else ({}, {})
        try:
            with _quiet_ort():
                fused = optimize_model(work, model_type=kind, num_heads=heads,
                                       hidden_size=hidden, optimization_options=options,
                                       opt_level=0, use_gpu=self.provider == "cuda").model
        except Exception:  # noqa: BLE001 - Rule 7: graphfix's attention fusion alone
            if not shapes:
                raise
            fused = work
        ort_attention = any(n.domain == _CONTRIB and n.op_type in _ATTENTION
                            for n in fused.graph.node)
        if shapes and not ort_attention:
            before = onnx.ModelProto()
            before.CopyFrom(fused)
            try:
                fuse_attention(fused, chosen, shapes, types,  # Rule 7
                               float16_packed=self.provider == "cuda",
                               pack=self.packed_attention)
            except Exception as err:  # noqa: BLE001 - a graph it misreads: ORT's fusions stand
                logger.warning("fuse-transformer: graphfix's attention fusion failed (%s)",
                               _first_line(err))
                fused = before
        for node in fused.graph.node:  # Rule 1: the heads chosen, whatever ORT detected
            if node.domain == _CONTRIB and node.op_type in _ATTENTION and \
                    isinstance(chosen, int) and chosen:
                for attr in node.attribute:
                    if attr.name == "num_heads":
                        attr.i = chosen
        if not any(o.domain == _CONTRIB for o in fused.opset_import):
            fused.opset_import.add(domain=_CONTRIB, version=1)
        _keep_inputs(fused, model)
        return fused, ort_attention

    def _accept(self, model: onnx.ModelProto, fused: onnx.ModelProto, counts: Counter[str],
                kind: str, heads: int | None, hidden: int | None, label: str,
                notes: list[str]) -> PassResult:
        import onnxruntime as ort

        before = count_nodes(model)
        described = f"{kind}" + (f", {heads} heads, hidden size {hidden}"
                                 if heads and counts.get("Attention") or
                                 counts.get("MultiHeadAttention") else "")
        labels = {"graphfix.ort_version": ort.__version__,
                  "graphfix.ort_provider": PROVIDERS[self.provider],
                  "graphfix.ort_fusion": f"transformer ({described})"}
        kept = [p for p in fused.metadata_props if p.key not in labels]
        del fused.metadata_props[:]
        fused.metadata_props.extend(kept)
        for key, value in labels.items():
            fused.metadata_props.add(key=key, value=value)
        fused.producer_name, fused.producer_version = model.producer_name, model.producer_version
        model.CopyFrom(fused)
        notes.append(f"{label}: {', '.join(f'{op} x{n}' for op, n in sorted(counts.items()))}")
        warning = (f"the model is tied to ONNX Runtime {ort.__version__} "
                   f"({PROVIDERS[self.provider]}): contrib ops "
                   f"{', '.join(sorted(counts))}")
        stats = {"nodes_before": before, "nodes_after": count_nodes(model),
                 "fused_nodes": sum(counts.values()),
                 "attention_fused": sum(counts.get(op, 0) for op in _ATTENTION),
                 "num_heads": heads or 0, "hidden_size": hidden or 0}
        missed = [n for n in notes if n.startswith("attention: none fused")]
        refused = [n for n in notes if " refused: " in n]
        if refused:  # what was kept is a fallback: say what the fuller fusions did
            missed.append(f"kept {label}: " + "; ".join(refused))
        return PassResult(model, True, stats=stats, warnings=[warning, *missed],
                          details={"model_type": kind, "fused": dict(sorted(counts.items())),
                                   "notes": notes})


def _fused_counts(model: onnx.ModelProto) -> Counter[str]:
    return Counter(n.op_type for n in model.graph.node if n.domain == _CONTRIB)


def _before_steps_problem(fused: onnx.ModelProto) -> str | None:
    """Why fused ops may not feed a step that runs on computed values (a quantizer of
    activations: DynamicQuantizeLinear, QuantizeLinear, MatMulNBits computing in int8): the
    fused kernels add in another order, and a last-bit change there moves some outputs by a
    whole quantization level on some inputs only, which no set of inputs shows reliably (on
    BERT, GPT-2 and Llama quantized dynamically or to int4, up to 260x the tolerance on 1 to 7
    of 12 input sets, while parity's sets passed)."""
    steps = run_time_steps(fused.graph)
    if not steps:
        return None
    before = before_steps(fused.graph)
    feeding = sorted({n.op_type for n in fused.graph.node if n.domain == _CONTRIB
                      and n.op_type in FUSED_OPS and any(o in before for o in n.output)})
    if not feeding:
        return None
    named = [n for n in steps if is_quantizer(n)] or steps
    kinds = sorted({n.op_type + (" (int8 compute)" if n.op_type == "MatMulNBits" else "")
                    for n in named})
    return (f"the fused {', '.join(feeding)} feed a quantizer of computed values "
            f"({', '.join(kinds[:3])}): their other order of sums moves outputs by whole "
            "quantization levels on some inputs")


def _folded(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """``model`` with its shape arithmetic folded (fold-shapes, which the pipeline runs later
    anyway), or None where that changes nothing or fails."""
    from graphfix.passes.fold_shapes import FoldShapes

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    try:
        result = FoldShapes()(copy)
    except Exception:  # noqa: BLE001 - the heads stay unread, as before
        logger.debug("fuse-transformer: fold-shapes failed", exc_info=True)
        return None
    return result.model if result.modified else None


def _keep_inputs(fused: onnx.ModelProto, model: onnx.ModelProto) -> None:
    """Rule 2: every input ``model`` takes, in its order, in ``fused`` too (ORT's optimizer
    prunes those nothing reads); an input that only carried a weight stays gone if it went."""
    weights = {t.name for t in model.graph.initializer}
    have = {i.name: i for i in fused.graph.input}
    known = {i.name for i in model.graph.input}
    inputs = [have.get(i.name, i) for i in model.graph.input
              if i.name in have or i.name not in weights]
    inputs += [i for i in fused.graph.input if i.name not in known]
    del fused.graph.input[:]
    fused.graph.input.extend(inputs)


def _signature_problem(fused: onnx.ModelProto, model: onnx.ModelProto) -> str | None:
    if [o.name for o in fused.graph.output] != [o.name for o in model.graph.output]:
        return "ONNX Runtime's optimizer changed the outputs"
    if not {i.name for i in fused.graph.input} <= {i.name for i in model.graph.input}:
        return "ONNX Runtime's optimizer changed the inputs"
    return None


def _fusable(model: onnx.ModelProto) -> bool:
    """Whether the main graph holds an op ONNX Runtime's fusions other than attention start
    from (:data:`_FUSION_STARTS`, or a Sigmoid of a Mul: QuickGelu's ``x * sigmoid(1.702 x)``)."""
    producers = {o: n for n in model.graph.node for o in n.output}
    for node in model.graph.node:
        if node.op_type in _FUSION_STARTS:
            return True
        if node.op_type == "Sigmoid" and getattr(producers.get(node.input[0]), "op_type",
                                                 None) == "Mul":
            return True
    return False


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


@contextlib.contextmanager
def _quiet_ort() -> Iterator[None]:
    """ORT's transformers modules log to the root logger under their own names, and print
    some of what fails ("failed in shape inference" on every legacy export of
    nn.MultiheadAttention, on standard output, where a command's JSON goes); while they run,
    both go to this module's logger at DEBUG instead (the library never prints)."""
    class _Forward(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            logger.debug("onnxruntime.transformers %s: %s", record.name, record.getMessage())

    handler = _Forward()
    touched: list[tuple[logging.Logger, bool, list[logging.Handler]]] = []
    for name in list(logging.root.manager.loggerDict):
        if name.startswith(_ORT_LOGGERS):
            target = logging.getLogger(name)
            touched.append((target, target.propagate, list(target.handlers)))
            target.propagate = False
            target.handlers[:] = [handler]
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            yield
    finally:
        for target, propagate, handlers in touched:
            target.propagate = propagate
            target.handlers[:] = handlers
        for line in printed.getvalue().splitlines():
            logger.debug("onnxruntime.transformers printed: %s", line)


def fuse_transformer(
    model: onnx.ModelProto,
    *,
    model_type: str | None = None,
    num_heads: int | None = None,
    hidden_size: int | None = None,
    provider: str = "cpu",
    feeds: Sequence[Mapping[str, np.ndarray]] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    inputs: str | os.PathLike[str] | None = None,
    seed: int = 0,
    packed_attention: bool = True,
    nchw_inputs: Sequence[str] = (),
) -> onnx.ModelProto:
    """Function twin of :class:`FuseTransformer`: rewrites ``model`` in place, returns it."""
    return FuseTransformer(model_type=model_type, num_heads=num_heads, hidden_size=hidden_size,
                           provider=provider, feeds=feeds, input_shapes=input_shapes,
                           inputs=inputs, seed=seed, packed_attention=packed_attention,
                           nchw_inputs=nchw_inputs)(model).model

