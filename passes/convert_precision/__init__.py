"""convert-precision: float32 compute lowered to float16 or bfloat16, with float32 islands
where measured error demands them.

    MatMul(x: f32, W: f32) -> LayerNorm -> ...   =>
    Cast(x -> f16) -> MatMul(x16, W16) -> Cast(-> f32) -> LayerNorm -> ...   (LayerNorm an island)

Rules:
1. Weights of lowered nodes are converted offline (finite values past float16's range saturate
   at +-65504; infinities stay; non-zero values the type would round to zero, an epsilon, are
   kept at its smallest positive value); a weight that float32 nodes read too keeps a float32
   copy.
2. Which slots of a node follow it comes from the op's schema (:mod:`.ops`): Resize's scales
   stay float32, a node whose schema has no float16 (bfloat16) at the model's opset stays
   float32, a node holding a subgraph or calling a local function stays float32 whole.
3. The float32 islands come from measured error (:mod:`.measure`): the start set of ops known
   to overflow or lose precision shrinks to those whose own error is shown, and grows by the
   nodes where an output's error is traced back to, until every output is within half of
   parity's tolerance for the lowered type on parity's own inputs. What the measurement cannot
   see stays float32 from the start: values near the type's range that inputs can grow, and
   integers (sizes, positions) carried in float into an op that needs them exact. Where the
   lowered model
   then misses the bar on ONNX Runtime (Rule 6) though the estimate held, the error is traced
   on ORT's own run (where it has no single origin, the lowered nodes of largest own error go,
   matrix products last, twice as many at each retry) and the search goes again without those
   nodes (:data:`RUNTIME_RETRIES`).
   Nodes that only move values go to whichever side of a border saves a Cast.
4. A Cast stands only at an island border, one per tensor and type, shared by its readers.
5. The signature stays float32 (``io_types`` lowers its float32 inputs and outputs too). The
   model records in ``graphfix.precision`` (:mod:`graphfix.precision`) which outputs went
   through lowered nodes, so that parity judges them at the lowered type's tolerance.
6. A float16 result is run on ONNX Runtime before it is returned, and its outputs compared with
   the original's: a model that does not load or misses the bar (half the tolerance, as the
   search's) is not returned (the pass skips and says why). Where ONNX Runtime names a
   lowered node it cannot create or run in the lowered type (ScatterElements adding float16
   on the CPU), the lowered nodes of its kind go back to float32 and the search goes again.
   The model is also run in a default
   session (ORT's fusions at level ``all``), which is what a user's code opens: where only
   that session misses the bar, the fused kernel that makes the error (its outputs worse than
   the nodes it replaced compute them, its inputs not) is found in ORT's rewritten model, and
   the lowered nodes that every kernel of its type replaces go back to float32 (a lowered
   Llama's written-out RMSNorm, which ORT fuses into a SimplifiedLayerNormalization that
   computed 2.4x the tolerance where the graph as written computes 0.27x). That session runs
   in a worker interpreter (:mod:`.._runtime_worker`), beside the run here: its optimizations
   crash ONNX Runtime on some lowered graphs (a ViT: a segfault), which must not take graphfix
   down. The pass entered as a context manager (a pipeline does) starts its worker at once and
   keeps it for every call; a caller that converts many models gives it one (``worker=``, or
   :func:`shared_worker` for every run in a block); a call on its own starts and stops one.
   bfloat16 has no
   kernels on ONNX Runtime's CPU provider: its result is checked by onnx's checker and by the
   estimate alone.
7. A model that already carries a ``graphfix.precision`` record that fits it is left alone (a
   second run would measure against the lowered model, not the float32 original); a record
   that does not fit the model (types it does not hold, names it lacks) is not believed.
13. A model that quantizes values it computes (:func:`graphfix.graph.run_time_quantizers`:
   QDQ activations, dynamic quantization, an int4 MatMulNBits computing in int8) is left
   alone, saying why: lower precision before a quantizer moves outputs by whole quantization
   levels on some inputs only (a dynamically quantized BERT came out 1.1x the float16
   tolerance on 1 of 12 further pairs of input sets; most dynamically quantized CNNs ended
   after 13-18 rounds with every node back in float32). Lower the float model, then quantize.
14. A float output that is empty, only zeros or only NaN on every measured input set has no
   error to measure: the model is left alone, saying so (a detector whose score threshold keeps
   nothing of generated inputs measured no error and came out lowered everywhere, its boxes off
   by 300 pixels on inputs that detect something; a head initialized to zero gives zeros
   whatever the layers before it compute; a logarithm of generated values below zero gives NaN,
   and a float16 model 10% off passed as exact). Inputs on which the output is not
   (``inputs``) lift it.
15. Generated inputs are in [-1, 1]; a model's real ones may be far larger (raw pixels,
   audio samples), and a node whose magnitude grows with them overflows float16 where the
   measured ones did not (a MatMul over 256 features at 70 on generated inputs is inf on
   inputs 1000x larger, in true float16; ONNX Runtime's CPU provider, computing in float32
   between its Casts, hides it). Where the ranges were measured on generated inputs and
   float inputs less than 255 x 16 times larger would overflow a lowered node that grows with
   them (not behind a softmax, a normalization, a sigmoid, ...), as the power of their scale
   the graph gives it (a product of two such values grows as the square; an ``Exp`` overflows
   once its argument passes ``ln(65504) = 11.1``, so at the factor that takes its measured
   argument there, not at a power), the pass warns with that node and the factor: real
   inputs (``inputs``) settle it. So does an integer input cast to the lowered type (a count
   read as a scale): its values past the type's largest overflow, and generated integers are
   small.
16. A periodic function (Sin, Cos, Tan) of a value that grows with the float inputs stays float32
   on generated inputs, with the lowered nodes that compute its argument from them: the type's
   rounding of the argument is an absolute error of ``|x| * 2^-11``, which a period turns into
   an error of the result once inputs are larger than the generated ones (a diffusion UNet's
   timestep embedding, ``sin(t * f)``, measured 0.33x the tolerance on t in [-1, 1] and 1.35x
   on timesteps up to 1000). Real inputs (``inputs``) let the measurement decide.
17. A lowered group of nodes that does not pay for the Casts at its borders stays float32
   (:mod:`.economics`): no matrix product, no large weight, and fewer values read and written
   than 3 per Cast it adds (a lone Add between two float32 neighbours). ``weigh_casts=False``
   lowers it anyway.

``may_grow``: the border Casts are nodes the input did not have.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np
import onnx

from graphfix import feeds as feeds_module
from graphfix import precision as precision_record
from graphfix.errors import GraphfixError, PassError, first_line
from graphfix.graph import run_time_quantizers
from graphfix.model_io import new_checker_problem
from graphfix.options import RunOptions
from . import ops
from .analysis import FLOAT, Analysis, weights
from .._measuring import make_feeds, run_outputs, tolerance
from .._runtime_worker import Job, RuntimeCrash, RuntimeWorker
from .._workers import KeepsWorker, worker_block
from .measure import (
    MAX_ROUNDS,
    RANGE_HEADROOM,
    Search,
    SearchResult,
    tensor_types,
)
from .rewrite import LowerStats, expose, largest_value, lower
from graphfix.registry import Pass, PassResult, register

__all__ = ["ConvertPrecision", "convert_precision", "PRECISIONS", "Island", "RuntimeWorker",
           "shared_worker"]

logger = logging.getLogger(__name__)

# The worker that the convert-precision pass of every run in a shared_worker() block uses.
_RUNS_WORKER: ContextVar[RuntimeWorker | None] = ContextVar("graphfix_runtime_worker",
                                                             default=None)


@contextlib.contextmanager
def shared_worker(worker: RuntimeWorker) -> Iterator[RuntimeWorker]:
    """Within the block, the convert-precision pass of every run (:func:`graphfix.optimize`
    and the commands that call it, in this thread) checks its result in ``worker``, which its
    owner opened and closes: ONNX Runtime's interpreter is started once for many models. A
    pass that the caller builds keeps the worker it is given, or its own. Blocks nest; the
    innermost wins.

        with RuntimeWorker() as worker, shared_worker(worker):
            for path in paths:
                graphfix.optimize_file(path, out_path(path), precision="fp16")
    """
    with worker_block(_RUNS_WORKER, worker, RuntimeWorker, "convert-precision"):
        yield worker

# --precision's names -> the element type and the dtype name parity's tolerances use.
PRECISIONS: dict[str, tuple[int, str]] = {
    "fp16": (onnx.TensorProto.FLOAT16, "float16"),
    "bf16": (onnx.TensorProto.BFLOAT16, "bfloat16"),
}
# Searches again after the lowered model missed the bar on ONNX Runtime, each without the
# nodes where the error traced on ORT's own run starts.
RUNTIME_RETRIES = 3


@dataclasses.dataclass
class Island:
    """A connected group of float32 nodes inside a lowered model, and why each is there."""

    nodes: list[str]
    ops: dict[str, int]
    why: list[str]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@register("convert-precision")
class ConvertPrecision(KeepsWorker, Pass):
    """Lower float32 compute to float16/bfloat16, float32 islands chosen by measured error."""

    may_grow = True  # Casts at island borders
    may_change_signature = True  # io_types lowers the signature's float32 inputs and outputs

    def __init__(
        self,
        *,
        precision: str = "fp16",
        io_types: str | None = None,
        keep_float32: Sequence[str] = (),
        feeds: Sequence[Mapping[str, np.ndarray]] | None = None,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        inputs: str | os.PathLike[str] | None = None,
        seed: int = 0,
        max_rounds: int = MAX_ROUNDS,
        nchw_inputs: Sequence[str] = (),
        worker: RuntimeWorker | None = None,
        weigh_casts: bool = True,
    ) -> None:
        """``worker``: the caller's ONNX Runtime worker for the default-session check (rule
        6), kept across its conversions; without one, the pass entered as a context manager (a
        pipeline does) keeps a worker of its own until it is left, and a call on its own
        starts and stops one. ``weigh_casts=False`` lowers every node the measured error
        allows, where the Casts at a group's borders cost more than it saves too (rule 17)."""
        if precision not in PRECISIONS:
            raise PassError(f"convert-precision: precision must be one of "
                            f"{', '.join(PRECISIONS)}, got {precision!r}")
        if io_types not in (None, "fp32", precision):
            raise PassError(f"convert-precision: io_types must be fp32 or the precision "
                            f"({precision}), got {io_types!r}")
        if isinstance(keep_float32, str) or not all(isinstance(k, str) for k in keep_float32):
            raise PassError(f"convert-precision: keep_float32 lists node names or op types, "
                            f"got {keep_float32!r}")
        if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
            raise PassError(f"convert-precision: max_rounds must be >= 1, got {max_rounds!r}")
        if not isinstance(weigh_casts, bool):
            raise PassError(f"convert-precision: weigh_casts must be True or False, got "
                            f"{weigh_casts!r}")
        self.weigh_casts = weigh_casts
        self.precision = precision
        self.io_types = io_types or "fp32"
        self.keep_float32 = tuple(keep_float32)
        self.input_shapes = dict(input_shapes) if input_shapes else None
        self.inputs = inputs
        self.seed = seed
        self.max_rounds = max_rounds
        if feeds is not None and (not isinstance(feeds, Sequence) or isinstance(
                feeds, (str, bytes)) or not len(feeds) or not all(
                isinstance(f, Mapping) for f in feeds)):
            raise PassError("convert-precision: feeds must be a non-empty list of input sets "
                            f"({{input name: array}}), got {type(feeds).__name__}")
        self._feeds = [dict(f) for f in feeds] if feeds is not None else None
        # Inputs an earlier pass made channels-first on request: ``input_shapes`` and
        # ``inputs`` are in the source's layout, and move with them.
        self.nchw_inputs = tuple(nchw_inputs)
        if worker is not None and not isinstance(worker, RuntimeWorker):
            raise PassError(f"convert-precision: worker must be a RuntimeWorker, got {worker!r}")
        self._shared = worker

    def _new_worker(self) -> RuntimeWorker | None:
        # bfloat16 has no kernels to check on ONNX Runtime's CPU provider
        return RuntimeWorker() if self.precision != "bf16" else None

    @classmethod
    def configured(cls, run: RunOptions) -> ConvertPrecision:
        return cls(precision=run.precision or "fp16", io_types=run.io_types,
                   input_shapes=run.input_shapes, inputs=run.inputs,
                   nchw_inputs=run.inputs_as_nchw, worker=_RUNS_WORKER.get())

    def call(self, model: onnx.ModelProto) -> PassResult:
        result = self._convert(model)
        if self.io_types != "fp32" and not result.modified:  # said, not silently dropped
            result.warnings.append(f"io_types {self.io_types} not applied: nothing was "
                                   f"lowered, so the signature stays float32")
        return result

    def _convert(self, model: onnx.ModelProto) -> PassResult:
        low, dtype = PRECISIONS[self.precision]
        if precision_record.read(model) is not None:  # Rule 7
            return PassResult(model, False, skipped="already lowered (the model's "
                              "graphfix.precision record)", stats={"nodes_lowered": 0})
        quantizers = run_time_quantizers(model.graph)
        if quantizers:  # Rule 13
            kinds = sorted({n.op_type for n in quantizers})
            reason = (f"the model quantizes values it computes ({', '.join(kinds[:3])}): "
                      f"{dtype} rounding before a quantizer moves outputs by whole "
                      "quantization levels; lower the float model, then quantize it")
            return PassResult(model, False, warnings=[reason], skipped=reason,
                              stats={"nodes_lowered": 0})
        analysis = Analysis.build(model, tensor_types(model), low=low)
        io_low = self.io_types != "fp32"
        if not analysis.compute_nodes():
            bodies = sum(1 for node in model.graph.node for attr in node.attribute
                         if attr.HasField("g") or len(attr.graphs))
            reason = ("nothing to lower: no float32 node that computes in the main graph"
                      + (f"; the compute sits in {bodies} If/Loop/Scan bodies, which "
                         "convert-precision does not lower" if bodies else ""))
            return PassResult(model, False, warnings=[reason] if bodies else [],
                              skipped=reason, stats={"nodes_lowered": 0})
        if self._feeds is not None:  # the caller's own: a mismatch is theirs, not the pass's
            specs = feeds_module.input_specs(model, values=False)
            for index, feed in enumerate(self._feeds):
                feeds_module.check_feeds(specs, feed, where=f"convert-precision's feeds[{index}]")
        search = Search(analysis, self._feeds or (), tolerance(dtype), io_low=io_low,
                        max_rounds=self.max_rounds, weigh_casts=self.weigh_casts)
        try:
            # a dynamic dimension's sizes are tried on the search's first run, which measures
            feeds = self._feeds if self._feeds is not None else make_feeds(
                model, seed=self.seed, runs=None, input_shapes=self.input_shapes,
                inputs=self.inputs, nchw_inputs=self.nchw_inputs, run=search.try_sizes)
        except (ValueError, GraphfixError) as err:
            reason = f"nothing to measure on: {err}"
            logger.warning("convert-precision: %s", reason)
            return PassResult(model, False, warnings=[reason], skipped=reason)
        search.feeds = list(feeds)
        forced = self._forced(analysis)
        if self._feeds is None and self.inputs is None:  # Rule 16
            for position, why in _periodic_of_inputs(analysis).items():
                forced.setdefault(position, why)
        # ORT's default session is checked in a worker interpreter; one of this call's own
        # starts now and imports while the search runs
        worker = self._worker
        if worker is not None or low == onnx.TensorProto.BFLOAT16:
            return self._search_and_lower(model, analysis, search, feeds, forced, io_low, low,
                                          dtype, worker)
        with RuntimeWorker() as own:
            return self._search_and_lower(model, analysis, search, feeds, forced, io_low, low,
                                          dtype, own)

    def _search_and_lower(self, model: onnx.ModelProto, analysis: Analysis, search: Search,
                          feeds: Sequence[Mapping[str, np.ndarray]], forced: dict[int, str],
                          io_low: bool, low: int, dtype: str, worker: RuntimeWorker | None
                          ) -> PassResult:
        """The search, the lowering and its checks on ONNX Runtime (rules 3 and 6)."""
        outputs = [o.name for o in model.graph.output]
        for attempt in range(RUNTIME_RETRIES + 1):
            # The first assignment is lowered and given to the worker's default session while
            # the search measures it: most searches end there, with the check under way.
            ahead: list[_Ahead] = []

            def check_ahead(assignment: frozenset[int]) -> None:
                if worker is not None and assignment:
                    lowered, stats = self._lowered(analysis, assignment, io_low, dtype)
                    ahead.append(_Ahead(assignment, lowered, stats, _submit_lowered(
                        worker, lowered, feeds, outputs)))

            try:
                result = search.run(forced, first=check_ahead)
                empty = search.unmeasured_outputs()
                if empty:  # Rule 14
                    reason = (f"nothing to measure on: output(s) {', '.join(map(repr, empty))} "
                              f"are empty, only zeros or only NaN on every input set, so their "
                              f"{dtype} error cannot be measured (a detector whose threshold "
                              "keeps nothing of generated inputs, a head initialized to zero, "
                              "a logarithm of values below zero); give inputs on which they are "
                              "not (--inputs)")
                    logger.warning("convert-precision: %s", reason)
                    return PassResult(model, False, warnings=[reason], skipped=reason,
                                      stats={"rounds": result.rounds})
                if result.failed:
                    reason = f"kept float32: {result.failed}"
                    logger.warning("convert-precision: %s", reason)
                    return PassResult(model, False, warnings=[reason], skipped=reason,
                                      stats={"rounds": result.rounds})
                lowered_count = sum(1 for p in result.low if not analysis.plans[p].movement)
                if not lowered_count:
                    unpaid = len(result.unpaid)
                    reason = (f"kept float32: every node that computes needs float32 on the "
                              f"measured inputs ({len(result.kept)} kept, in {result.rounds} "
                              f"round(s) of measuring)" if not unpaid else
                              f"kept float32: lowering pays nowhere here: {unpaid} node(s) "
                              f"could compute in {dtype} but not save what the Casts at their "
                              f"borders cost ({len(result.kept) - unpaid} kept for their "
                              f"error, in {result.rounds} round(s) of measuring)")
                    logger.warning("convert-precision: %s", reason)
                    return PassResult(model, False, warnings=[reason], skipped=reason,
                                      stats={"rounds": result.rounds},
                                      details={"islands": [island.to_dict() for island in
                                                           islands_of(analysis, result)]})
                given = next((a for a in ahead if a.low == result.low), None)
                if given is None:
                    _drain(ahead)  # the worker is free for this assignment's check
                    lowered, stats = self._lowered(analysis, result.low, io_low, dtype)
                else:
                    lowered, stats = given.lowered, given.stats
                problem = new_checker_problem(lowered, model)  # not the input's own: Rule 6
                if problem:
                    invalid = {p: f"the lowered model with it is invalid ({problem})" for p in
                               _invalid_nodes(analysis, problem, result.low) if p not in forced}
                    if not invalid or attempt == RUNTIME_RETRIES:
                        reason = f"the lowered model is invalid ({problem}); model kept"
                        logger.warning("convert-precision: %s", reason)
                        return PassResult(model, False, warnings=[reason], skipped=reason)
                    checked, refusal, runtime_error, fused = None, problem, None, False
                else:
                    invalid = {}
                    checked, refusal, runtime_error, fused = self._check_run(
                        lowered, search, feeds, low, worker, given.job if given else None)
            finally:
                _drain(ahead)
            if refusal is None:
                break
            # ONNX Runtime computed something the emulation did not: trace the error back on
            # what it computed, and search again without those nodes.
            if invalid:  # the checker named the op the lowered type breaks
                blamed = invalid
            elif attempt == RUNTIME_RETRIES:
                blamed = {}
            elif runtime_error is not None:  # ORT refused a node in the lowered type
                blamed = {p: why for p, why in _refused(analysis, runtime_error,
                                                        result.low).items() if p not in forced}
            elif fused:  # only ORT's default session misses the bar: its fused kernels
                blamed = {p: why for p, why in _fused_regions(
                    lowered, analysis, search, feeds, result.low, refusal,
                    products=attempt > 0).items() if p not in forced}
            else:
                blamed = {p: why for p, why in self._traced_on_runtime(
                    lowered, search, feeds, result.low, 2 ** (attempt + 1)).items()
                    if p not in forced}
            if not blamed:
                logger.warning("convert-precision: %s", refusal)
                return PassResult(model, False, warnings=[refusal], skipped=refusal)
            logger.info("convert-precision: %s; %d node(s) go back to float32", refusal,
                        len(blamed))
            forced.update(blamed)
        islands = islands_of(analysis, result)
        estimate = max(result.measured.outputs.values(), default=0.0) if result.measured else 0.0
        pass_stats = {
            "nodes_lowered": len(result.low),
            "compute_nodes_lowered": lowered_count,
            "compute_nodes_float32": len(analysis.compute_nodes()) - lowered_count,
            "islands": len(islands),
            "casts_added": stats.casts,
            "weights_converted": stats.weights_converted + stats.weights_copied,
            # of which stored twice: read in float32 too, a Cast would not keep their values
            "weights_copied": stats.weights_copied,
            # read both in float32 and lowered: stored once, cast where lowered
            "weights_cast": stats.weights_cast,
            "values_saturated": stats.values_saturated,
            # too small for the type, kept at its smallest positive value (an epsilon)
            "values_kept_nonzero": stats.values_raised,
            "rounds": result.rounds,
            "estimated_error_permille": _permille(estimate),
        }
        if checked is not None:
            pass_stats["measured_error_permille"] = _permille(checked)
        warnings = []
        if stats.values_saturated:
            warnings.append(f"{stats.values_saturated} weight value(s) beyond {dtype}'s range "
                            f"saturated at +-{largest_value(low):.5g}")
        if io_low:  # outputs the signature lowers on request: near the range, they overflow
            lowered_io = {o.name for o in lowered.graph.output
                          if o.type.tensor_type.elem_type == low}
            warnings += [(f"output {name!r} {search.reaches(peak)}: --io-types fp16 makes it "
                          f"{dtype}, where larger inputs overflow it") if name in lowered_io
                         else (f"output {name!r} stays float32 in the signature: it "
                               f"{search.reaches(peak)}")
                         for name, peak in search.output_peaks().items()
                         if search.near_range(peak)]
        if self._feeds is None and self.inputs is None and low == onnx.TensorProto.FLOAT16:
            warnings += _input_scale_warning(analysis, search, result.low)
        details = {"precision": dtype, "islands": [island.to_dict() for island in islands],
                   "lowered_outputs": sorted(self._lowered_outputs(analysis, result.low, io_low)),
                   "estimated_error": {k: _round(v) for k, v in result.measured.outputs.items()}
                   if result.measured else {}}
        # the analysis reads the model's nodes by position: the model changes last
        _replace(model, lowered)
        return PassResult(model, True, stats=pass_stats, warnings=warnings, details=details)

    def _forced(self, analysis: Analysis) -> dict[int, str]:
        forced: dict[int, str] = {}
        wanted = set(self.keep_float32)
        for position in analysis.lowerable():
            node = analysis.node(position)
            if node.name in wanted or node.op_type in wanted:
                forced[position] = "kept float32 on request (keep_float32)"
        return forced

    def _lowered_outputs(self, analysis: Analysis, low: frozenset[int], io_low: bool
                         ) -> list[str]:
        return [name for name in analysis.outputs if analysis.types.get(name) == FLOAT and (
            io_low or analysis.ancestors([name]) & low)]

    def _lowered(self, analysis: Analysis, low: frozenset[int], io_low: bool, dtype: str
                 ) -> tuple[onnx.ModelProto, LowerStats]:
        """A copy of the model with ``low`` lowered and its ``graphfix.precision`` record."""
        lowered = _copy(analysis.model)
        stats = lower(dataclasses.replace(
            analysis, model=lowered, initializers=weights(lowered)),
            low, io_low=io_low)
        listed = {value.name for value in lowered.graph.input}
        if 0 < lowered.ir_version < 4 and any(
                t.name not in listed for t in lowered.graph.initializer):
            # IR 3 requires every initializer to be an input; the lowered weights are not
            # (an IR-3 model's weights listed as inputs stay listed, as IR 4 allows)
            lowered.ir_version = 4
        outputs = self._lowered_outputs(analysis, low, io_low)
        precision_record.write(lowered, precision_record.PrecisionRecord(
            dtype=dtype, outputs={name: dtype for name in outputs},
            io_inputs={n: "float32" for n in analysis.inputs
                       if io_low and analysis.types.get(n) == FLOAT},
            io_outputs={n: "float32" for n in analysis.outputs
                        if io_low and analysis.types.get(n) == FLOAT}))
        return lowered, stats

    def _check_run(self, lowered: onnx.ModelProto, search: Search,
                   feeds: Sequence[Mapping[str, np.ndarray]], low: int,
                   worker: RuntimeWorker | None, default: Job | None
                   ) -> tuple[float | None, str | None, str | None, bool]:
        """Rule 6: the worst output's error of the lowered model run on ONNX Runtime (None
        where it cannot run here: bfloat16, or a model ORT refuses), why the model is not
        taken (None when it is), ORT's error where it refused the model, and whether only
        ORT's default session (its fusions) missed the bar. ``default``: its run in a default
        session, given to ``worker`` already."""
        if low == onnx.TensorProto.BFLOAT16 or worker is None:
            return None, None, None, False
        outputs = [o.name for o in lowered.graph.output]
        # A default session fuses what it can (a written-out RMSNorm into one kernel): on a
        # lowered Llama that kernel computed 2.4x the tolerance where the graph as written
        # computes 0.27x. It runs in the worker interpreter, beside the run here: on a
        # lowered ViT the default session's NCHWc layout transformer crashed ONNX Runtime (a
        # segfault).
        if default is None:
            default = _submit_lowered(worker, lowered, feeds, outputs)
        try:
            runs = _run_lowered(lowered, feeds, outputs)
        except Exception as err:  # noqa: BLE001 - ORT refuses in many ways
            _outcome(default, lowered)  # its worker is free again
            error = first_line(err, limit=2000)
            return (None, f"ONNX Runtime cannot run the lowered model ({error}); model kept",
                    error, False)
        worst = max(search.errors_of(runs).outputs.values(), default=0.0)
        runs_default = _outcome(default, lowered)
        # The bar is the search's own: half the tolerance, the other half headroom for inputs
        # parity does not see. A model that meets it in the emulation only, at 0.99x on ONNX
        # Runtime, missed the tolerance on fresh inputs of larger sizes.
        if worst > search.budget:
            return worst, (f"the lowered model's outputs reach {worst:.3g}x the tolerance on "
                           f"ONNX Runtime where the bar is {search.budget:g}x; model kept"), \
                None, False
        if isinstance(runs_default, RuntimeCrash):
            return worst, (f"ONNX Runtime's default session (its graph optimizations at level "
                           f"all) crashes on the lowered model ({runs_default}); model kept"), \
                None, False
        if runs_default is None:  # ORT refuses in many ways: the run above stands
            return worst, None, None, False
        fused = max(search.errors_of(runs_default).outputs.values(), default=0.0)
        if fused > search.budget:
            return fused, (f"ONNX Runtime's default session (its fusions at level all) computes "
                           f"the lowered model's outputs at {fused:.3g}x the tolerance where "
                           f"the bar is {search.budget:g}x; model kept"), None, True
        return max(worst, fused), None, None, False

    @staticmethod
    def _traced_on_runtime(lowered: onnx.ModelProto, search: Search,
                           feeds: Sequence[Mapping[str, np.ndarray]], low: frozenset[int],
                           spread: int) -> dict[int, str]:
        """The nodes where the lowered model's error starts on ONNX Runtime: its tensors (by
        the original's names, integers too) exposed and traced back as the search traces the
        emulation's, or where it has no single origin the ``spread`` lowered nodes of largest
        own error, matrix products last; none when ORT cannot run it so exposed, or it would
        not fit (:meth:`~measure.Search.trace_problem`)."""
        if search.trace_problem() is not None:
            return {}
        exposed = _copy(lowered)
        try:
            runs = _run_lowered(exposed, feeds, expose(exposed, search.tensors))
        except Exception:  # noqa: BLE001 - ORT refuses in many ways: nothing traced
            return {}
        return search.blame_runs(runs, low, spread=spread)


# Rule 15: ops whose output does not grow with their input's magnitude.
_SCALE_FREE = frozenset({
    "Softmax", "LogSoftmax", "Sigmoid", "Tanh", "Erf", "Sign", "LayerNormalization",
    "SimplifiedLayerNormalization", "SkipLayerNormalization", "RMSNormalization",
    "InstanceNormalization", "GroupNormalization", "LpNormalization", "Shape", "Size",
    "HardSigmoid", "Hardmax", "ArgMax", "ArgMin", "Cos", "Sin", "IsNaN", "IsInf",
})
# Rule 15: how much larger than generated ones float inputs may be before the pass warns: raw
# pixels (0-255) with the range rule's headroom of 16 (one-signed inputs sum without the
# cancelling that inputs in [-1, 1] have: a MatMul over 256 features measured at 15 reaches
# 64 on inputs in [0, 1]).
_INPUT_SCALE_MARGIN = 255.0 * RANGE_HEADROOM
# Rule 15: ops whose output's scale is the product of their first two inputs'.
_PRODUCTS = frozenset({"Mul", "MatMul", "Gemm", "Conv", "ConvTranspose", "FusedMatMul"})


def _input_scale_warning(analysis: Analysis, search: Search, low: frozenset[int]) -> list[str]:
    """Rule 15: where generated inputs in [-1, 1] measured the float16 ranges, the lowered
    node whose magnitude grows with the float inputs' and that inputs the fewest times larger
    would overflow, when fewer than :data:`_INPUT_SCALE_MARGIN` times larger would. A node
    grows as a power of the inputs' scale (:func:`_input_degrees`): ``h * h`` at 3.5 on
    generated inputs overflows at 137x, not at 18,700x."""
    warnings = _integer_input_warnings(analysis, search, low)
    degrees = _input_degrees(analysis)
    if not degrees:
        return warnings
    worst, name, peak = math.inf, None, 0.0
    for position in low:
        node = analysis.node(position)
        degree = max((degrees.get(n, 0.0) for n in node.output if n), default=0.0)
        # a lowered node near the range on generated inputs is one whose magnitude a constant
        # bounds (the range rule keeps the others float32): a mask's fill, not the inputs'
        measured = search.peak.get(position, 0.0)
        if degree > 0 and measured > 0 and not search.near_range(measured):
            factor = (search.largest / measured) ** (1.0 / degree)
            argument = search._value_peak(node.input[0]) if (
                node.op_type == "Exp" and node.input and node.input[0]) else 0.0
            if argument > 0:  # exp(a * s) passes the range once a * s passes its logarithm
                factor = min(factor, (math.log(search.largest) / argument) ** (
                    1.0 / max(degrees.get(node.input[0], degree), 1e-9)))
            scores = search.tensor_peak.get(search.scores.get(position, ""), 0.0)
            inner = sum(degrees.get(n, 0.0) for n in node.input[:2] if n)
            if scores > 0 and inner > 0:  # an Attention's Q K^T grows as both of them
                factor = min(factor, (search.largest / scores) ** (1.0 / inner))
            if factor < worst:
                worst, name, peak = factor, node.name or node.op_type, measured
    if name is None or worst >= _INPUT_SCALE_MARGIN:
        return warnings
    return [f"float16 ranges measured on generated inputs in [-1, 1]: lowered node {name!r} "
            f"reaches {peak:.3g} on them, so float inputs about {worst:.3g}x larger overflow "
            f"it in float16 (raw pixels in 0-255 are 255x, audio samples in +-32768 are "
            f"32768x); if the model's real inputs are that large, give some with --inputs so "
            f"that the islands are chosen on them", *warnings]


def _integer_input_warnings(analysis: Analysis, search: Search, low: frozenset[int]
                            ) -> list[str]:
    """Rule 15: each integer graph input a lowered Cast turns into the lowered type, whose
    values past that type's largest overflow (generated integers are small)."""
    found = []
    inputs = set(analysis.inputs)
    for position in sorted(low):
        node = analysis.node(position)
        if node.op_type != "Cast" or not node.input or node.input[0] not in inputs:
            continue
        kind = analysis.types.get(node.input[0])
        if kind is None or kind in (FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
                                    onnx.TensorProto.BFLOAT16, onnx.TensorProto.BOOL):
            continue
        found.append(
            f"{onnx.helper.tensor_dtype_to_np_dtype(kind)} input {node.input[0]!r} is cast to "
            f"float16 by {node.name or node.op_type!r}: its values past {search.largest:.6g} "
            f"overflow (and integers past 2048 are rounded), where the generated inputs were "
            f"small; if its real values are that large, give some with --inputs, or keep the "
            f"node float32 (keep_float32)")
    return found


# Rule 16: functions whose result repeats with a period of their argument.
_PERIODIC = frozenset({"Sin", "Cos", "Tan"})


def _periodic_of_inputs(analysis: Analysis) -> dict[int, str]:
    """Rule 16: each lowerable periodic function of a value that grows with the float inputs,
    and the lowerable nodes between those inputs and its argument, with why they stay
    float32."""
    degrees = _input_degrees(analysis)
    lowerable = set(analysis.lowerable())
    kept: dict[int, str] = {}
    for position in analysis.order:
        node = analysis.node(position)
        if node.op_type not in _PERIODIC or not node.input or (
                degrees.get(node.input[0], 0.0) <= 0):
            continue
        why = (f"{node.op_type} of a value that grows with the inputs (and what computes it): "
               "the lowered type's rounding of its argument is an absolute error that grows "
               "with the inputs' magnitude, which generated inputs in [-1, 1] do not show (a "
               "timestep of 1000); give real inputs with --inputs to measure it")
        if position in lowerable:  # a Sin the type has no kernel for (bfloat16 before opset
            kept[position] = why   # 22) stays float32 anyway: its argument still must
        for ancestor in analysis.ancestors([node.input[0]]):
            if ancestor in lowerable and any(degrees.get(n, 0.0) > 0
                                             for n in analysis.node(ancestor).output if n):
                kept.setdefault(ancestor, why)
    return kept


def _input_degrees(analysis: Analysis) -> dict[str, float]:
    """Rule 15: each float tensor whose magnitude grows with the float inputs', and the power
    of their scale it grows as (inputs 1; a product sums its operands', a quotient takes the
    divisor's away, a square root halves, a constant power multiplies; other ops keep their
    inputs' largest; :data:`_SCALE_FREE` ops do not grow)."""
    defaults = {t.name for t in analysis.model.graph.initializer}  # parameters, not data
    degrees = {n: 1.0 for n in analysis.inputs
               if analysis.types.get(n) == FLOAT and n not in defaults}
    if not degrees:
        return {}
    for position in analysis.order:
        node = analysis.node(position)
        if node.op_type in _SCALE_FREE:
            continue
        ins = [degrees.get(n, 0.0) if n else 0.0 for n in node.input]
        if not any(ins):
            continue
        op = node.op_type
        if op == "Einsum":
            degree = sum(ins)
        elif op in _PRODUCTS and len(ins) >= 2:  # a bias (Gemm's C, Conv's B) is added
            degree = max([ins[0] + ins[1], *ins[2:]])
        elif op == "Div" and len(ins) == 2:
            degree = ins[0] - ins[1]
        elif op == "Sqrt":
            degree = ins[0] / 2
        elif op == "Reciprocal":
            degree = 0.0
        elif op == "Pow" and len(ins) == 2 and not ins[1]:
            exponent = analysis._small_constant(node.input[1], limit=1)
            degree = ins[0] * float(exponent.reshape(-1)[0]) if (
                exponent is not None and exponent.size == 1) else ins[0]
        else:
            degree = max(ins)
        if degree > 0:
            degrees.update((n, degree) for n in node.output if n)
    return degrees


# How ONNX Runtime names the node it cannot create or run: "Could not find an implementation
# for ScatterElements(18) node with name 'x'", "... while running ScatterElements node.
# Name:'x' Status Message: MLFloat16 data type is not supported ..." (the name empty for a
# node without one).
_REFUSED_NODE = re.compile(r"implementation for (\w+)\(\d+\) node with name '([^']*)'"
                           r"|running (\w+) node\. Name:'([^']*)'")


def _refused(analysis: Analysis, error: str, low: frozenset[int]) -> dict[int, str]:
    """The lowered nodes ONNX Runtime's ``error`` is about, with why they go back to
    float32: the node it names (where it has no name, the lowered nodes of its type), and
    every lowered node of the same type and attributes, which the same kernel would run."""
    found = _REFUSED_NODE.search(error)
    if not found:
        return {}
    op_type, name = (found.group(1), found.group(2)) if found.group(1) else (
        found.group(3), found.group(4))
    named = [p for p in low if (analysis.node(p).name == name if name else
                                analysis.node(p).op_type == op_type)]
    kinds = {_kind(analysis.node(p)) for p in named}
    cause = error.split("Status Message:")[-1].strip()
    return {p: f"ONNX Runtime cannot run it in the lowered type ({cause})" for p in low
            if _kind(analysis.node(p)) in kinds}


# How onnx's checker names the node whose types it refuses: "(op_type:RMSNormalization, node
# name: n): Y has inconsistent type tensor(float16)" (the name left out where there is none).
_INVALID_NODE = re.compile(r"\(op_type:(\w+)(?:, node name: ([^)]*))?\)")


def _invalid_nodes(analysis: Analysis, problem: str, low: frozenset[int]) -> list[int]:
    """The lowered nodes onnx's checker refused the lowered model for (``problem``): the node
    it names (where it names none, the nodes of its op type) where lowered, else the lowered
    nodes that compute its float inputs (a float32 node fed a lowered value it cannot read)."""
    found = _INVALID_NODE.search(problem)
    if not found:
        return []
    op_type, name = found.group(1), (found.group(2) or "").strip()
    named = [p for p in analysis.order if analysis.node(p).op_type == op_type and (
        not name or analysis.node(p).name == name)]
    blamed = {p for p in named if p in low}
    for position in named:
        if position not in low:
            blamed.update(analysis.producer[n][0] for n in analysis.node(position).input
                          if n in analysis.producer and analysis.producer[n][0] in low)
    return sorted(blamed)


def _kind(node: onnx.NodeProto) -> tuple[str, str, bytes]:
    """A node's op and attributes: what picks its kernel."""
    return node.domain, node.op_type, b"".join(
        a.SerializeToString() for a in sorted(node.attribute, key=lambda a: a.name))


def _run_lowered(lowered: onnx.ModelProto, feeds: Sequence[Mapping[str, np.ndarray]],
                 names: Sequence[str]) -> list[dict[str, np.ndarray]]:
    """``names`` of the lowered model on ONNX Runtime, its optimizations off, its float16
    signature (``io_types``) fed and read in the original's types."""
    if not _io_lowered(lowered):  # the signature is the original's: nothing to convert
        return run_outputs(lowered, feeds, names)
    fed = [precision_record.for_model(f, lowered) for f in feeds]
    return [precision_record.to_reference(run, lowered)
            for run in run_outputs(lowered, fed, names)]


def _io_lowered(lowered: onnx.ModelProto) -> bool:
    """Whether ``lowered``'s record lowers its signature (``io_types``): its inputs are then
    fed, and its outputs read, in the original's types. Read once per model: the record's
    reading walks the graph (a tenth of the checks' Python time on a ConvNeXt)."""
    record = precision_record.read(lowered)
    return record is not None and bool(record.io_inputs or record.io_outputs)


def _submit_lowered(worker: RuntimeWorker, lowered: onnx.ModelProto,
                    feeds: Sequence[Mapping[str, np.ndarray]], names: Sequence[str]
                    ) -> Job | None:
    """:func:`_run_lowered` in a default session (level all) in ``worker``, given now
    (:func:`_outcome` collects it); None where it cannot be given (its files)."""
    fed = [precision_record.for_model(f, lowered) for f in feeds] if _io_lowered(
        lowered) else list(feeds)
    try:
        return worker.submit(lowered, fed, names, optimization="all")
    except Exception:  # noqa: BLE001 - no check is better than no model: the run here stands
        return None


@dataclasses.dataclass(frozen=True)
class _Ahead:
    """An assignment lowered, and its default-session run given to the worker while the
    search measured it."""

    low: frozenset[int]
    lowered: onnx.ModelProto
    stats: LowerStats
    job: Job | None


def _drain(ahead: list[_Ahead]) -> None:
    """Wait for the runs given ahead (their worker is free again), and forget them."""
    while ahead:
        given = ahead.pop()
        _outcome(given.job, given.lowered)


def _outcome(job: Job | None, lowered: onnx.ModelProto
             ) -> list[dict[str, np.ndarray]] | RuntimeCrash | None:
    """A submitted run's outputs in the original's types, the crash that ended it, or None
    where ONNX Runtime refused the model."""
    if job is None:
        return None
    try:
        runs = job.result()
        if not _io_lowered(lowered):
            return runs
        return [precision_record.to_reference(run, lowered) for run in runs]
    except RuntimeCrash as crash:
        return crash
    except Exception:  # noqa: BLE001 - ORT refuses in many ways
        return None


# The prefix of the Casts ONNX Runtime inserts around a kernel it runs in float32.
_ORT_CAST_PREFIX = "InsertedPrecisionFreeCast_"


def _fused_regions(lowered: onnx.ModelProto, analysis: Analysis, search: Search,
                   feeds: Sequence[Mapping[str, np.ndarray]], low: frozenset[int],
                   refusal: str, *, products: bool) -> dict[int, str]:
    """The lowered nodes that ONNX Runtime's default session replaces with a kernel that
    computes worse than they do, with why they go back to float32.

    The kernels are those of op types the lowered model does not have (its fusions); each
    one's region is the lowered nodes between its inputs and its outputs, by the original's
    names. Each kernel's outputs are read in ORT's rewritten model and, under the same names,
    in the lowered model as written: a kernel whose outputs carry more than twice the error
    of the nodes it replaced (and a tenth of the tolerance at least) is guilty. Where none
    is, every region goes, those holding a matrix product only with ``products``."""
    from graphfix.model_io import ort_rewritten

    if search.trace_problem() is not None:
        return {}
    try:
        data, _ = ort_rewritten(lowered, optimization="all")
    except Exception:  # noqa: BLE001 - nothing to map: the model is kept
        return {}
    rewritten = onnx.ModelProto.FromString(data)
    had = {(n.domain or "", n.op_type) for n in lowered.graph.node}
    made = {name: node for node in lowered.graph.node for name in node.output}

    def original(name: str) -> str | None:
        """The original's tensor a name of ORT's rewritten model stands for: past ORT's
        own Casts and the Casts the lowering inserted."""
        seen = set()
        while name not in analysis.producer and name not in analysis.inputs:
            if name.startswith(_ORT_CAST_PREFIX):
                name = name[len(_ORT_CAST_PREFIX):]
            elif name in made and made[name].op_type == "Cast" and name not in seen:
                seen.add(name)
                name = made[name].input[0]
            else:
                return None
        return name

    kernels: list[tuple[onnx.NodeProto, set[int], dict[str, str], dict[str, str]]] = []
    for node in rewritten.graph.node:
        if (node.domain or "", node.op_type) in had:
            continue
        outputs = _floats({o: original(o) for o in node.output if o}, analysis)
        inputs = _floats({i: original(i) for i in node.input if i}, analysis)
        region = (analysis.ancestors(list(outputs.values()))
                  - analysis.ancestors(list(inputs.values()))) & low
        if region:
            kernels.append((node, region, outputs, inputs))
    # the kernel that makes the error, and every kernel of its type (the same code runs)
    guilty = {(n.domain, n.op_type): why for n, *_ in kernels
              for name, why in _guilty(kernels, rewritten, lowered, search, feeds).items()
              if n.name == name}
    chosen = [k for k in kernels if (k[0].domain, k[0].op_type) in guilty] if guilty else [
        k for k in kernels if products or not any(
            analysis.node(p).op_type in ops.MATRIX_OPS for p in k[1])]
    blamed: dict[int, str] = {}
    for node, region, _, _ in chosen:
        kind = (node.domain, node.op_type)
        for position in region:
            blamed.setdefault(position, f"{refusal.split('; model kept')[0]}: ONNX Runtime "
                                        f"fuses it into {node.op_type}"
                                        + (f", a kernel that computes worse ({guilty[kind]})"
                                           if kind in guilty else ""))
    return blamed


def _floats(names: Mapping[str, str | None], analysis: Analysis) -> dict[str, str]:
    """The names (ORT's, to the original's) that stand for a float tensor of the original."""
    return {ours: theirs for ours, theirs in names.items()
            if theirs and analysis.types.get(theirs) == FLOAT}


def _guilty(kernels: Sequence[tuple[onnx.NodeProto, set[int], dict[str, str], dict[str, str]]],
            rewritten: onnx.ModelProto, lowered: onnx.ModelProto, search: Search,
            feeds: Sequence[Mapping[str, np.ndarray]]) -> dict[str, str]:
    """The kernels (by node name) that make an error themselves: an output carries more than
    twice the error of the same tensor in the lowered model as written (and a tenth of the
    tolerance at least) while no input does (a kernel downstream of a guilty one inherits
    its error), with both errors."""
    wanted = {ours: theirs for kernel in kernels for ours, theirs in
              (*kernel[2].items(), *kernel[3].items())}
    if not wanted:
        return {}
    try:  # ORT's rewritten model is this function's own: exposed in place
        fused_runs = _run_lowered(rewritten, feeds, expose(rewritten, list(wanted)))
        plain = _copy(lowered)
        plain_runs = _run_lowered(plain, feeds, expose(plain, list(wanted.values())))
    except Exception:  # noqa: BLE001 - ORT refuses in many ways: no kernel singled out
        return {}
    as_written = search.tensor_errors([{n: np.asarray(v, np.float32) for n, v in run.items()}
                                       for run in plain_runs])
    in_kernels = search.tensor_errors([{wanted[n]: np.asarray(v, np.float32)
                                        for n, v in run.items() if n in wanted}
                                       for run in fused_runs])

    def worse(name: str) -> bool:
        return in_kernels.get(name, 0.0) > max(2 * as_written.get(name, 0.0), 0.1)

    guilty: dict[str, str] = {}
    for node, _, outputs, inputs in kernels:
        if any(worse(name) for name in inputs.values()):
            continue
        for name in outputs.values():
            if worse(name):
                guilty[node.name] = (f"{name!r} at {in_kernels[name]:.3g}x the tolerance, "
                                     f"{as_written.get(name, 0.0):.3g}x as written")
                break
    return guilty


def islands_of(analysis: Analysis, result: SearchResult) -> list[Island]:
    """The float32 nodes of the lowered model (those with a float32 slot that stayed), grouped
    by the tensors that join them, each with its reasons."""
    float32 = [p for p, plan in enumerate(analysis.plans)
               if plan.kind in ("fixed", "lowerable") and p not in result.low]
    islands = []
    for positions in analysis.groups(float32, lambda _, name: analysis.types.get(name) == FLOAT):
        if all(analysis.plans[p].movement for p in positions) and not any(
                _read_lowered(analysis, p, result.low) for p in positions):
            continue  # values moved in float32 that no lowered node reads: no border there
        nodes = [analysis.node(p) for p in positions]
        why: list[str] = []
        for p, node in zip(positions, nodes):
            plan = analysis.plans[p]
            reason = result.kept.get(p) or plan.reason or (
                ("moves values between float32 nodes" if _typed_readers(analysis, p) else
                 "moves values read only where any type is taken (a Cast, a Pow exponent)")
                if plan.movement else "no lowered node reads or writes it")
            label = node.name or f"{node.op_type}#{p}"
            line = f"{label} ({node.op_type}): {reason}"
            if line not in why:
                why.append(line)
        ops_count: dict[str, int] = {}
        for node in nodes:
            ops_count[node.op_type] = ops_count.get(node.op_type, 0) + 1
        islands.append(Island([n.name or f"{n.op_type}#{p}" for n, p in zip(nodes, positions)],
                              dict(sorted(ops_count.items())), why))
    return islands


def _read_lowered(analysis: Analysis, position: int, low: frozenset[int]) -> bool:
    """Whether a lowered node reads an output of ``position`` in the lowered type."""
    return any(analysis.wants(use, low) == "low"
               for name in analysis.node(position).output for use in analysis.uses.get(name, []))


def _typed_readers(analysis: Analysis, position: int) -> bool:
    """Whether a node reads an output of ``position`` at a slot with a fixed type."""
    node = analysis.node(position)
    return any(use.slot not in analysis.plans[use.node].free_inputs
               and analysis.plans[use.node].kind != "neutral"
               for name in node.output for use in analysis.uses.get(name, [])) or any(
        name in analysis.outputs for name in node.output)


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy


def _replace(model: onnx.ModelProto, lowered: onnx.ModelProto) -> None:
    model.CopyFrom(lowered)


def _permille(value: float) -> int:
    return 10**9 if math.isinf(value) else int(round(value * 1000))


def _round(value: float) -> float | str:
    return "inf" if math.isinf(value) else round(value, 4)


def convert_precision(
    model: onnx.ModelProto,
    *,
    precision: str = "fp16",
    io_types: str | None = None,
    keep_float32: Sequence[str] = (),
    feeds: Sequence[Mapping[str, np.ndarray]] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    inputs: str | os.PathLike[str] | None = None,
    seed: int = 0,
    max_rounds: int = MAX_ROUNDS,
    nchw_inputs: Sequence[str] = (),
    worker: RuntimeWorker | None = None,
    weigh_casts: bool = True,
) -> onnx.ModelProto:
    """Function twin of :class:`ConvertPrecision`: rewrites ``model`` in place, returns it."""
    return ConvertPrecision(precision=precision, io_types=io_types, keep_float32=keep_float32,
                            feeds=feeds, input_shapes=input_shapes, inputs=inputs, seed=seed,
                            max_rounds=max_rounds, nchw_inputs=nchw_inputs,
                            worker=worker, weigh_casts=weigh_casts)(model).model
