"""The pass pipeline and the main job: optimize, prove parity, optionally measure, write.

    optimize(model)           -> OptimizeResult(model, report)   (the input model is not changed)
    optimize_file(src, dst)   -> the same, reading src and writing dst atomically

Validation is not a pass: the pipeline rewrites, then :func:`optimize` checks the rewritten model
against the original. When parity fails nothing is returned or written; the pipeline is re-run
from the original one pass at a time with a parity check after each, and the error names the
pass that broke which output.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from graphfix.version import __version__
import graphfix.passes  # noqa: F401 - the pass library registers its passes on import
from graphfix import graph as graph_layer
from graphfix.graph import check_input_shapes, fix_input_shapes
from graphfix import layout, model_io, registry
from graphfix import precision as precision_module
from graphfix import speed_gate as gate
from graphfix.errors import (
    GraphfixError,
    ModelSaveError,
    ParityError,
    PassError,
    ResourceError,
    first_line,
    shown,
)
from graphfix.options import (
    DEFAULT_MAX_GROWTH,
    FOLD_ALLOWANCE,
    BenchOptions,
    ConflictingOptionsError,
    OptionError,
    ParityOptions,
    RunOptions,
    check_names,
    check_path,
    check_type,
)
from graphfix.facts import model_facts, model_size, op_histogram
from graphfix.feeds import check_inputs_agree, feed_files
from graphfix.report import PassReport, Report
from graphfix.validate.bench import MIN_COMPARED_RUNS, benchmark
from graphfix.validate.bench import require_speedup as check_speedup
from graphfix.validate.parity import (ParityResult, ReferenceOutputs, ReferenceRun, check_parity,
                                      default_session_problem, original_spread)

__all__ = [
    "DEFAULT_PASSES",
    "OptimizeResult",
    "LeftOut",
    "PipelineRun",
    "build_passes",
    "run_pipeline",
    "optimize",
    "optimize_file",
    "fix_input_shapes",
]

logger = logging.getLogger(__name__)

# The default pipeline, in order. Shape folding and merging run first, so that onnxsim and
# ORT see one tensor where the export had copies (three projections of one input then merge
# into one MatMul). onnxsim comes before ORT: the weights its folding materialises let ORT fuse
# (a Conv's bias Add, a BatchNormalization into a Conv). eliminate-transposes runs again at
# the end because ORT's rewrites and onnxsim's folding can leave new Transpose pairs next to
# each other, and shape folding last, on the Reshapes that pass writes. A Loop's weights are read
# from outside it before onnxsim and ORT, which then fold what its body computes from them. Run
# again on its own output, the pipeline changes nothing.
DEFAULT_PASSES: tuple[str, ...] = (
    "remove-initializer-inputs",
    "eliminate-transposes",
    "fold-shapes",
    "merge-duplicates",
    "hoist-loop-invariants",
    "simplify",
    "ort-offline",
    "fold-shapes",
    "merge-duplicates",
    "eliminate-transposes",
    "fold-shapes",
)


Progress = Callable[[str, int, int], None]

# Above this many bytes of weights the parity check's reference runs after the passes instead
# of beside them: overlapping holds a second copy of the weights (the reference session's)
# while the passes run.
OVERLAP_MAX_WEIGHT_BYTES = 512 * 2**20


@dataclasses.dataclass
class OptimizeResult:
    """The optimized model and the report of the run."""

    model: onnx.ModelProto
    report: Report


def build_passes(
    passes: Sequence[str | registry.Pass] | None = None,
    *,
    skip: Sequence[str] = (),
    run: RunOptions | None = None,
    pass_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[registry.Pass]:
    """Pass instances for a pipeline: ``passes`` (names or instances; None = the default),
    minus ``skip``. Each named pass is configured from the run's options
    (:meth:`~graphfix.registry.Pass.configured`), or built from ``pass_options[name]`` as
    keyword arguments when given (instances are used as they are)."""
    run = run or RunOptions()
    pass_options = dict(pass_options or {})
    names = list(DEFAULT_PASSES if passes is None else passes)
    # Passes asked for by option: fusions first (ONNX Runtime's patterns are written against
    # exporters' graphs), lowered precision last; each once.
    before, after = gate.requested_passes(run)
    names = [n for n in before if n not in names] + names + [n for n in after if n not in names]
    for name in [*skip, *pass_options]:
        registry.get(name)  # an unknown name is an error, not a silent no-op
    built: list[registry.Pass] = []
    for spec in names:
        if isinstance(spec, registry.Pass):
            if spec.name not in skip:
                built.append(spec)
            continue
        cls = registry.get(spec)
        if spec in skip:
            continue
        try:
            built.append(cls(**pass_options[spec]) if spec in pass_options else cls.configured(run))
        except TypeError as err:
            raise PassError(f"pass {spec!r}: bad options ({err})") from None
    return built


def _op_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    delta = {op: after.get(op, 0) - before.get(op, 0) for op in set(before) | set(after)}
    return {op: d for op, d in sorted(delta.items()) if d}


@dataclasses.dataclass
class LeftOut:
    """A part of the pipeline this run left out, and why: ``part`` is "the pass" or what one of
    its fallbacks leaves out (:meth:`graphfix.registry.Pass.fallbacks`); ``reason`` is what the
    pass's output did (did not load, broke an output, failed)."""

    pass_name: str
    position: int  # in the pipeline, from 0
    part: str
    reason: str

    def describe(self, limit: int = 240) -> str:
        """One line for a terminal: the reason cut at ``limit`` characters (the report has it
        whole)."""
        reason = self.reason if len(self.reason) <= limit else self.reason[: limit - 3] + "..."
        what = f"pass {self.pass_name!r}" if self.part == "the pass" else (
            f"{self.part} (pass {self.pass_name!r})")
        return f"left out {what}: {reason}"

    def to_dict(self) -> dict[str, Any]:
        return {"pass": self.pass_name, "position": self.position, "part": self.part,
                "reason": self.reason}


# Why a pass's output cannot be taken (it does not load, it breaks parity), or None.
Judge = Callable[[onnx.ModelProto], "str | None"]


@dataclasses.dataclass
class PipelineRun:
    """What :func:`run_pipeline` did: the model, a report per pass, the dimensions the run
    made static, and what it left out."""

    model: onnx.ModelProto
    passes: list[PassReport]
    fixed: list[str]
    left_out: list[LeftOut]
    # A copy of the model as it was before the first pass named in ``snapshot_before`` ran
    # (None when none ran): what the passes made of it at its own precision.
    before: onnx.ModelProto | None = None
    # graphs (the main one, bodies) whose nodes were put in topological order first
    sorted_graphs: int = 0
    # graph outputs whose declared shape contradicted the graph, declared as computed
    corrected: list[str] = dataclasses.field(default_factory=list)


def run_pipeline(
    model: onnx.ModelProto,
    passes: Sequence[registry.Pass],
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    progress: Progress | None = None,
    judge: Judge | None = None,
    strict: bool = False,
    snapshot_before: Collection[str] = (),
    hold_size: bool = False,
    fold_allowance: int = FOLD_ALLOWANCE,
) -> PipelineRun:
    """Run ``passes`` in order on ``model`` (rewritten in place), after fixing the sizes of
    ``input_shapes`` and putting its nodes in topological order where they are not (ONNX
    requires it; onnxsim refuses a graph out of order, ONNX Runtime sorts it itself), and
    declaring what the graph computes for each graph output whose declared shape contradicts
    it (:func:`graphfix.model_io.correct_output_shapes`).

    Each pass's output that changed the model is judged (``judge``: does it load, does it keep
    parity); one that fails, or a pass that fails with an error of its own, is taken back and
    its fallbacks are tried, finest first; when none is taken the pass is left out, and the run
    goes on (:class:`LeftOut` records each). ``strict`` refuses instead: a failing pass raises
    :class:`ParityError` naming it (an error, :class:`PassError`). ``snapshot_before``:
    pass names before the first of which a copy of the model is kept (:attr:`PipelineRun.before`).
    ``hold_size`` (the default growth policy's second run, where the first output was larger
    than the input): the passes that fold constants add tensor bytes only where the passes
    before them saved as many (:func:`graphfix.registry.room`, against ``model``'s size less
    its annotations), or ``fold_allowance`` bytes whatever they saved.
    """
    reports: list[PassReport] = []
    left_out: list[LeftOut] = []
    before: onnx.ModelProto | None = None
    fixed = fix_input_shapes(model, input_shapes)
    sorted_graphs = 0
    with contextlib.suppress(graph_layer.CycleError):  # ONNX Runtime refuses a cycle itself
        sorted_graphs = graph_layer.sort_nodes(model.graph)
    corrected = model_io.correct_output_shapes(model)  # inferred in order
    # -1 as a size is unknown to every pass; the signature says it again at the end.
    unknown_dims = graph_layer.clear_unknown_dims(model)
    # measured as room() measures the model: without annotations on either side, so that the
    # input's own (which the output keeps) are not counted as bytes a fold may take
    with registry.size_limit(registry.plain_size(model) if hold_size else None,
                             allowance=fold_allowance):
        for index, pass_ in enumerate(passes):
            if progress:
                progress(pass_.name, index, len(passes))
            if before is None and pass_.name in snapshot_before:
                before = _copy(model)
            taken = _run_judged(pass_, model, judge, strict)
            if taken.problem is None:
                model = taken.model
                reports.append(taken.report)
                continue
            for fallback in pass_.fallbacks():
                logger.info("%s: %s; trying it without %s", pass_.name, taken.problem,
                            fallback.leaves_out)
                lighter = _run_judged(fallback.pass_, model, judge, strict)
                if lighter.problem is None:
                    model = lighter.model
                    reports.append(lighter.report)
                    left_out.append(LeftOut(pass_.name, index, fallback.leaves_out,
                                            taken.problem))
                    break
            else:
                reports.append(dataclasses.replace(
                    taken.report, modified=False, skipped=f"left out: {taken.problem}",
                    nodes_after=taken.report.nodes_before, op_delta={}))
                left_out.append(LeftOut(pass_.name, index, "the pass", taken.problem))
            logger.info("%s", left_out[-1].describe())  # a warning of the run's report
    if progress:
        progress("", len(passes), len(passes))
    # a rewriter's copy of an exporter's varint index (ORT, onnxsim) is stored raw: 8 bytes a
    # value where the input took one or two
    model_io.compact_integers(model)
    unknown_dims.restore(model)
    if before is not None:
        unknown_dims.restore(before)
    return PipelineRun(model, reports, fixed, left_out, before, sorted_graphs, corrected)


@dataclasses.dataclass
class _Judged:
    model: onnx.ModelProto
    report: PassReport
    problem: str | None  # why the output is not taken (the model was restored), or None


def _run_judged(pass_: registry.Pass, model: onnx.ModelProto, judge: Judge | None,
                strict: bool) -> _Judged:
    """``pass_`` on ``model``, timed and reported, and its output judged; an output that is
    not taken, or a pass that failed, leaves ``model`` as it was."""
    snapshot = graph_layer.Snapshot(model)
    histogram_before = op_histogram(model)
    started = time.perf_counter()
    try:
        result = pass_(model)
    except GraphfixError:
        raise  # the user's options or environment: not a fault of this model's rewrite
    except Exception as err:  # a bug in a pass must not cost the user the model
        # The system running out (no room, ulimit -f, a path too long) is no pass's fault.
        resource = model_io.os_failure_in(str(err), getattr(err, "filename", None) or (
            model_io.temporary_root() / "x"), "temporary files") if isinstance(
            err, OSError) else None
        if resource is not None:
            raise resource from None
        logger.debug("pass %s failed", pass_.name, exc_info=True)
        if strict:
            raise PassError(
                f"pass {pass_.name!r} failed: {type(err).__name__}: {err}",
                hint=f"skip it with --skip {pass_.name} and report the model that broke it",
            ) from err
        snapshot.restore(model)
        problem = f"failed: {type(err).__name__}: {first_line(err)}"
        return _Judged(model, _pass_report(pass_, model, histogram_before, histogram_before,
                                           time.perf_counter() - started, None), problem)
    seconds = time.perf_counter() - started
    histogram_after = op_histogram(result.model)
    report = _pass_report(pass_, result.model, histogram_before, histogram_after, seconds, result)
    problem = judge(result.model) if judge is not None and result.modified else None
    if problem is not None:
        if strict:
            raise ParityError(f"pass {pass_.name!r} {problem}",
                              hint=f"run again with --skip {pass_.name}",
                              guilty_pass=pass_.name)
        snapshot.restore(model)
        return _Judged(model, report, problem)
    logger.info("%s: %s in %.2fs", pass_.name,
                "skipped" if result.skipped else ("changed" if result.modified else "no change"),
                seconds)
    return _Judged(result.model, report, None)


def _pass_report(pass_: registry.Pass, model: onnx.ModelProto, before: dict[str, int],
                 after: dict[str, int], seconds: float,
                 result: registry.PassResult | None) -> PassReport:
    return PassReport(
        name=pass_.name,
        options=_jsonable(pass_.options()),
        modified=result.modified if result else False,
        skipped=result.skipped if result else None,
        seconds=seconds,
        nodes_before=sum(before.values()),
        nodes_after=sum(after.values()),
        op_delta=_op_delta(before, after),
        stats=dict(result.stats) if result else {},
        warnings=list(result.warnings) if result else [],
        details=_jsonable(result.details) if result else {},
    )


def _jsonable(options: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in options.items():
        if isinstance(value, (str, int, float, bool)) or value is None:
            out[key] = value
        elif isinstance(value, (list, tuple)):
            out[key] = list(value)
        elif isinstance(value, Mapping):
            out[key] = _jsonable(value)
        else:
            out[key] = repr(value)
    return out


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy


def optimize(
    model: onnx.ModelProto | str | os.PathLike | model_io.LoadedModel,
    *,
    passes: Sequence[str | registry.Pass] | None = None,
    skip: Sequence[str] = (),
    ort_level: str = "basic",
    provider: str = "auto",
    max_growth: float | None = DEFAULT_MAX_GROWTH,
    keep_reduction_order: bool = False,
    inputs_as_nchw: Sequence[str] = (),
    outputs_as_nchw: Sequence[str] = (),
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    verify: bool = True,
    strict: bool = False,
    parity: ParityOptions | None = None,
    bench: bool | BenchOptions = False,
    require_speedup: float | None = None,
    pass_options: Mapping[str, Mapping[str, Any]] | None = None,
    progress: Progress | None = None,
    precision: str | None = None,
    io_types: str | None = None,
    fuse: str | None = None,
    speed_gate: bool = True,
) -> OptimizeResult:
    """Optimize a model: run the pass pipeline, check parity against the original, and
    optionally benchmark. The given model is not modified.

    ``passes``: pass names or instances (default :data:`DEFAULT_PASSES`); ``skip``: names to
    leave out. ``ort_level``, ``provider``, ``max_growth``, ``keep_reduction_order``,
    ``inputs_as_nchw``, ``outputs_as_nchw`` and ``input_shapes`` configure the passes (see
    :class:`~graphfix.options.RunOptions`); ``input_shapes`` also fixes the sizes parity and the
    benchmark use. ``pass_options`` (``{pass name: {option: value}}``) builds a pass from its
    own options instead. ``verify`` checks numerical parity (``parity``: how).

    A pass whose output does not load in ONNX Runtime (checked after each pass), that fails
    with an error of its own, or after which parity fails, is left out, or only the part of it
    that broke the model (:meth:`~graphfix.registry.Pass.fallbacks`); the rest runs and the
    result is correct. The report's ``left_out`` and its warnings say what and why.
    ``strict`` refuses instead: :class:`ParityError` names the pass and the output it broke.
    ``bench`` (True, or :class:`BenchOptions`) measures the speedup; ``require_speedup``
    raises :class:`BenchmarkError` when it is not reached. ``progress(step, done, total)`` is
    called as passes and parity input sets start.

    ``precision`` ("fp16", "bf16") adds convert-precision and ``fuse`` ("transformer")
    fuse-transformer after the other passes; ``io_types`` (the precision's name) lowers the
    signature's float32 inputs and outputs too. Both are judged by the speed gate
    (:mod:`graphfix.speed_gate`) on ``provider`` unless ``speed_gate`` is False: slower there,
    the model is written without them, and the report says so.
    """
    _check_arguments(model, passes, skip, verify, parity, bench, require_speedup, pass_options,
                     progress, inputs_as_nchw, outputs_as_nchw, strict, speed_gate)
    model_io.temporary_root()  # a TMPDIR that cannot be used is refused before anything runs
    # A run killed before it could clean up (SIGKILL, a power cut) left its folders behind.
    model_io.sweep_temporaries()
    run = RunOptions(
        ort_level=ort_level, provider=provider, max_growth=max_growth,
        keep_reduction_order=keep_reduction_order, inputs_as_nchw=inputs_as_nchw,
        outputs_as_nchw=outputs_as_nchw, input_shapes=input_shapes,  # a str is one name
        precision=precision, io_types=io_types, fuse=fuse,
        inputs=parity.inputs if parity is not None else None,
    )
    if not verify and parity is not None and parity != ParityOptions():
        raise ConflictingOptionsError(
            "parity options are given and parity is not checked (verify=False / --no-verify)",
            hint="drop one of them")
    parity = parity or ParityOptions()
    if parity.inputs is not None and run.input_shapes:

        check_inputs_agree(parity.inputs, run.input_shapes)
    bench_options = bench if isinstance(bench, BenchOptions) else (
        BenchOptions() if bench or require_speedup is not None else None)
    loaded = (
        model if isinstance(model, model_io.LoadedModel)
        else model_io.load_with_info(model, load_external_data=False)
    )
    if bench_options is not None and bench_options.input_shapes:  # refused before any pass
        check_input_shapes(loaded.model, bench_options.input_shapes,  # runs, naming the option
                           "bench shapes (--bench-shape)")
        for name, sizes in bench_options.input_shapes.items():
            fixed = (run.input_shapes or {}).get(name)
            if fixed is not None and list(fixed) != list(sizes):
                raise OptionError(
                    f"bench shapes (--bench-shape) time {name!r} at {list(sizes)}, which "
                    f"input_shapes (--input-shape) fixes at {list(fixed)} in the model",
                    hint="give one of them")
    pipeline = build_passes(passes, skip=skip, run=run, pass_options=pass_options)
    unused = _unused_options(pipeline, passes, skip, run, pass_options)
    for warning in unused:
        logger.warning("%s", warning)
    job = _Job(loaded, pipeline, run, verify=verify, strict=strict,
               parity={**parity.arguments(), "input_shapes": run.input_shapes},
               bench=bench_options, require_speedup=require_speedup, progress=progress,
               judge_speed=speed_gate)
    job.report.warnings += unused
    return job.optimize()


_OPTIMIZE_KEYWORDS = frozenset({
    "passes", "skip", "ort_level", "provider", "max_growth", "keep_reduction_order",
    "inputs_as_nchw", "outputs_as_nchw", "input_shapes", "verify", "parity", "bench",
    "require_speedup", "pass_options", "progress", "strict", "precision", "io_types", "fuse",
    "speed_gate"})


def _check_arguments(model: Any, passes: Any, skip: Any, verify: Any, parity: Any, bench: Any,
                     require_speedup: Any, pass_options: Any, progress: Any,
                     inputs_as_nchw: Any, outputs_as_nchw: Any, strict: Any,
                     speed_gate: Any) -> None:
    """Refuse, naming the argument, what :func:`optimize` cannot use (before anything runs)."""
    check_type("optimize", "model", model,
               (onnx.ModelProto, str, os.PathLike, bytes, bytearray, model_io.LoadedModel),
               "an onnx.ModelProto, a path or the bytes of a model")
    if passes is not None:
        if isinstance(passes, (str, bytes)) or not isinstance(passes, Sequence) or not all(
                isinstance(p, (str, registry.Pass)) for p in passes):
            raise OptionError(f"optimize(): passes must be a list of pass names or passes, got "
                              f"{type(passes).__name__} {passes!r:.60}",
                              hint=f"write passes=[{passes!r}]" if isinstance(passes, str)
                              else None)
    check_names("optimize", "skip", skip, optional=False)
    for name, value in (("inputs_as_nchw", inputs_as_nchw), ("outputs_as_nchw",
                                                             outputs_as_nchw)):
        if not isinstance(value, str):
            check_names("optimize", name, value, optional=False)
    check_type("optimize", "verify", verify, bool, "True or False")
    check_type("optimize", "strict", strict, bool, "True or False")
    check_type("optimize", "speed_gate", speed_gate, bool, "True or False")
    if parity is not None:
        check_type("optimize", "parity", parity, ParityOptions,
                   "a graphfix.ParityOptions (or None)")
    check_type("optimize", "bench", bench, (bool, BenchOptions),
               "True, False or a graphfix.BenchOptions")
    if isinstance(bench, BenchOptions) and bench.runs is not None and (
            bench.runs < MIN_COMPARED_RUNS):  # every speedup it measures is a comparison
        raise OptionError(f"optimize(): bench.runs must be >= {MIN_COMPARED_RUNS} for a "
                          f"speedup's interval, got {bench.runs}")
    if require_speedup is not None:
        check_type("optimize", "require_speedup", require_speedup, (int, float),
                   "a number > 0 (or None)")
        if not require_speedup > 0 or require_speedup != require_speedup:
            raise OptionError(f"optimize(): require_speedup must be a number > 0, got "
                              f"{require_speedup!r}")
    if pass_options is not None and not (isinstance(pass_options, Mapping) and all(
            isinstance(k, str) and isinstance(v, Mapping) for k, v in pass_options.items())):
        raise OptionError("optimize(): pass_options must map pass names to option "
                          f"mappings, got {type(pass_options).__name__}")
    if progress is not None and not callable(progress):
        raise OptionError(f"optimize(): progress must be callable, got "
                          f"{type(progress).__name__}")


# Options of a run that only passes use, and how the command line spells them.
_PASS_OPTIONS = {"ort_level": "--ort-level", "max_growth": "--max-growth",
                 "keep_reduction_order": "--keep-reduction-order",
                 "inputs_as_nchw": "--inputs-as-nchw", "outputs_as_nchw": "--outputs-as-nchw"}


def _unused_options(pipeline: Sequence[registry.Pass],
                    passes: Sequence[str | registry.Pass] | None, skip: Sequence[str],
                    run: RunOptions, pass_options: Mapping[str, Any] | None) -> list[str]:
    """A warning for each option that no pass of this run uses (``ort_level`` with ort-offline
    left out, say), which would otherwise be ignored without a word. Each pass is built again
    without the option; an option none of them reads differently is unused."""
    warnings = []
    default = RunOptions()
    for field, flag in _PASS_OPTIONS.items():
        if getattr(run, field) == getattr(default, field):
            continue
        without = dataclasses.replace(run, **{field: getattr(default, field)})
        others = build_passes(passes, skip=skip, run=without, pass_options=pass_options)
        if all(a.options() == b.options() for a, b in zip(pipeline, others)):
            warnings.append(f"{field} ({flag}) has no effect: no pass of this run uses it")
    return warnings


class _LoadCheck:
    """Does ONNX Runtime (CPU, optimizations off) load a pass's output? Checked on the
    output's structure, its large weights declared as inputs
    (:func:`graphfix.model_io.runtime_problem`): about as costly as the graph's nodes. Off
    when ONNX Runtime cannot load the original either (a custom op it lacks): nothing would
    load then."""

    def __init__(self, original: onnx.ModelProto) -> None:
        self.enabled = model_io.runtime_problem(original, weightless=True) is None

    def __call__(self, model: onnx.ModelProto) -> str | None:
        if not self.enabled:
            return None
        record = precision_module.read(model)
        if record is not None and record.dtype == "bfloat16":  # no bfloat16 kernels on the CPU
            model = precision_module.float16_stand_in(model_io.weights_as_inputs(model))
        found = model_io.runtime_problem(model, weightless=True)
        return None if found is None else (
            f"broke the model: ONNX Runtime cannot load its output ({found})")


def _declare_observed_sizes(model: onnx.ModelProto, outputs: ReferenceOutputs | None,
                            declared: Mapping[str, onnx.TypeProto] | None = None,
                            warnings: list[str] | None = None) -> list[str]:
    """A graph output's static size that the original itself did not compute on parity's
    inputs (an exporter's traced constant: ``[batch, 54, 4]`` where the model gives 8 or 37
    rows) is declared dynamic (unnamed), in place; one line per output. ONNX Runtime runs
    such a model and warns on every call; the declaration misleads whatever reads the
    signature. An output whose declaration in the input (``declared``) the run corrected to
    what ONNX's inference computes, where the input's holds on every run and the inferred one
    does not (inference rounds a Resize's scale down: 24 x 0.8333 gave 19 where ONNX Runtime
    computes the declared 20), gets the input's declaration back, and the correction's line
    goes from ``warnings``."""
    if outputs is None:
        return []
    seen: dict[str, list[tuple[int, ...]]] = {}
    for _, values in outputs.runs:
        for name, value in zip(outputs.names, values):
            if isinstance(value, np.ndarray):
                seen.setdefault(name, []).append(value.shape)
    lines = []
    for value in model.graph.output:
        before = (declared or {}).get(value.name)
        shapes = seen.get(value.name, [])
        if (before is not None and shapes and before != value.type
                and _holds(before, shapes) and not _holds(value.type, shapes)):
            value.type.CopyFrom(before)
            corrected = f"output {value.name!r} is declared "
            if warnings is not None:
                warnings[:] = [w for w in warnings if not w.startswith(corrected)]
            lines.append(f"output {value.name!r}: the input's declared shape holds on ONNX "
                         "Runtime's runs, where ONNX's shape inference computes another "
                         "(it rounds a Resize's scale down, say): the declaration is kept")
    for value in model.graph.output:
        dims = value.type.tensor_type.shape.dim
        shapes = [shape for shape in seen.get(value.name, []) if len(shape) == len(dims)]
        changed = []
        for axis, dim in enumerate(dims):
            if not dim.HasField("dim_value"):
                continue
            found = sorted({shape[axis] for shape in shapes})
            if found and found != [dim.dim_value]:
                changed.append(f"axis {axis}: {dim.dim_value}, computed "
                               f"{', '.join(map(str, found))}")
                # unnamed: a name would make the file larger than the size it replaces (a
                # one-node SVM's two outputs came out 44 bytes larger with three)
                dim.Clear()
        if changed:
            lines.append(f"output {value.name!r} declared sizes the original does not compute "
                         f"on parity's inputs ({'; '.join(changed)}): now declared dynamic "
                         f"(ONNX Runtime warned on each run)")
    return lines


def _copy_type(kind: onnx.TypeProto) -> onnx.TypeProto:
    copy = onnx.TypeProto()
    copy.CopyFrom(kind)
    return copy


def _holds(declared: onnx.TypeProto, shapes: Sequence[tuple[int, ...]]) -> bool:
    """Whether a tensor type's shape agrees with every observed shape (its rank, its static
    sizes; a named or unknown size takes any)."""
    if not declared.HasField("tensor_type") or not declared.tensor_type.HasField("shape"):
        return True
    dims = declared.tensor_type.shape.dim
    return all(len(shape) == len(dims) and all(
        not d.HasField("dim_value") or d.dim_value == size for d, size in zip(dims, shape))
        for shape in shapes)


class _Job:
    """One run of :func:`optimize`: the passes, then the check and the benchmark, with the
    report that records them (and travels with an error that refuses the result)."""

    def __init__(self, loaded: model_io.LoadedModel, pipeline: list[registry.Pass],
                 run: RunOptions, *, verify: bool, strict: bool, parity: dict[str, Any],
                 bench: BenchOptions | None, require_speedup: float | None,
                 progress: Progress | None, judge_speed: bool = True) -> None:
        self.loaded, self.pipeline, self.run = loaded, pipeline, run
        self.verify, self.strict, self.bench = verify, strict, bench
        self.tolerances = parity.get("tolerances")
        self.reference_arguments = {k: v for k, v in parity.items() if k != "tolerances"}
        self.require_speedup, self.progress = require_speedup, progress
        self.judge_speed = judge_speed
        # The default growth policy: the output is never larger than the input.
        self.never_bigger = run.max_growth is not None and run.max_growth <= 1.0
        self.held = False  # whether the passes ran held to the input's size
        # what a held fold may add whatever the passes before saved (0 where that made the
        # held output larger than the input still)
        self.allowance = FOLD_ALLOWANCE
        self.size: int | None = None  # the input's stored bytes, where never bigger holds
        self._recorded: list[str] = []  # the warnings the last run of the passes gave
        # where the passes ran held: what was larger than the input, and by how many bytes
        self._grown: tuple[str, int] | None = None
        self.started = time.perf_counter()
        self.report = Report(graphfix_version=__version__, verify=verify)
        self.report.input = model_facts(loaded.model, size_bytes=loaded.size_bytes or None,
                                        external_data=loaded.external_data)
        self.report.warnings += model_io.check_model(loaded.model, rewrite=True)
        self.declared = {value.name for value in loaded.model.graph.value_info}
        # the outputs' types as the input declares them (a run may correct them: Parity)
        self.output_types = {value.name: _copy_type(value.type)
                             for value in loaded.model.graph.output}
        self.names = graph_layer.all_names(loaded.model.graph)  # the input's own names
        # A model graphfix loaded itself is rewritten in place when the original can be read
        # again from its file for the parity check and the benchmark's baseline (or is not
        # needed again); a caller's model is never touched.
        self.needs_original = verify or bench is not None
        self.in_place = loaded.owned and (not self.needs_original or loaded.path is not None)
        # The original's side of the parity check, when it runs beside the passes.
        self.reference: ReferenceRun | None = None

    def optimize(self) -> OptimizeResult:
        with contextlib.ExitStack() as resources:
            for pass_ in self.pipeline:  # passes that hold a worker start it now
                resources.enter_context(pass_)
            optimized, original, before = self._rewrite()
            try:
                if self.verify:
                    optimized = self._verify(original, optimized, before)
                    self.report.warnings += _declare_observed_sizes(
                        optimized, self.reference.result() if self.reference else None,
                        self.output_types, self.report.warnings)
                del before
                optimized = self._gate(optimized, original)
                if self.bench is not None:
                    _bench(original(), optimized, self.report, self.bench, self.run,
                           self.require_speedup)
            except GraphfixError as error:
                # The refusal's evidence (parity statistics, bench figures) travels with it.
                raise self._with_report(error, optimized) from None
        # after parity: the annotations only (names are shortened before it, where checked)
        _within(optimized, self.declared, None, self.report.input.size_bytes)
        self._finish(optimized)
        return OptimizeResult(optimized, self.report)

    def _rewrite(self) -> tuple[onnx.ModelProto, Callable[[], onnx.ModelProto],
                                onnx.ModelProto | None]:
        """The passes, with the reference side of parity running beside them; returns the
        optimized model, the original (read again on demand when the passes rewrote it) and,
        where the precision is lowered and parity checked, the model before the gated passes
        (:func:`run_pipeline`'s snapshot, for :meth:`_verify`)."""
        original = self.loaded.model
        try:
            # Read before the passes rewrite the model in place.
            self.reference = (_start_reference(original, self.reference_arguments)
                              if self.verify else None)
            self.loads = _LoadCheck(original)
        except GraphfixError as error:
            raise self._with_report(error, None) from None
        # Never bigger: where the output would be larger than the input, the passes run again
        # on the original, held to its size. A model rewritten in place is read again from
        # its file for that; one that cannot be is copied first.
        size = self.size = model_io.stored_size(original) if self.never_bigger else None
        keep = (_copy(original) if size is not None and self.in_place
                and self.loaded.path is None else None)
        working = original if self.in_place else _copy(original)
        try:
            done = self._passes(working, held=False)
            if size is not None:
                _within(done.model, self.declared, self.names, size)
            grown = model_io.stored_size(done.model) if size is not None else 0
            if size is not None and grown > size:
                logger.info("the passes' output is larger than the input (%d > %d bytes): "
                            "again, each fold held to the bytes saved before it", grown, size)
                self.held = True
                done = self._passes(self._fresh_original(keep), held=True)
                _within(done.model, self.declared, self.names, size)
                done = self._without_allowance(done, keep, size)
        except BaseException:
            if self.reference is not None:
                self.reference.cancel()
            raise
        if self.held:
            self._grown = ("the passes' first output", grown)
        self._record(done)
        # The passes rewrote the loaded model in place: the original is read again from its
        # file, once and only if something asks for it (a parity check whose reference did not
        # run beside the passes, the search for a pass that broke parity, the benchmark's
        # baseline).
        path = self.loaded.path if self.in_place and self.needs_original else None
        return done.model, _reader(original, path), done.before

    def _fresh_original(self, keep: onnx.ModelProto | None) -> onnx.ModelProto:
        """The original as loaded, for the passes to rewrite again: a copy of ``keep`` (the
        copy taken of a model rewritten in place that has no file), of the loaded model
        where the passes worked on a copy, or read again from its file."""
        if keep is not None:
            return _copy(keep)
        if not self.in_place:
            return _copy(self.loaded.model)
        return model_io.load(self.loaded.path, load_external_data=False)

    def _without_allowance(self, done: PipelineRun, keep: onnx.ModelProto | None,
                           size: int) -> PipelineRun:
        """Where the held run's output is still larger than the input, the passes once more,
        no fold adding bytes the passes before it did not save (a float8 or int4 weight of a
        few hundred bytes cast to a float32 constant fitted the allowance a folded shape
        gets): that run's output where it is smaller."""
        held_size = model_io.stored_size(done.model)
        if held_size <= size:
            return done
        strict = self._passes(self._fresh_original(keep), held=True, allowance=0)
        _within(strict.model, self.declared, self.names, size)
        if model_io.stored_size(strict.model) >= held_size:
            return done
        self.allowance = 0
        return strict

    def _held_warning(self, model: onnx.ModelProto, passes: Sequence[PassReport] = ()
                      ) -> str | None:
        """The warning of a run held to the input's size (None where none was), said of
        ``model``, the output of the passes' last run (``passes``: its reports)."""
        if self._grown is None:
            return None
        what, grown = self._grown
        size = self.size or 0
        final = model_io.stored_size(model)
        if final <= size:
            outcome = "so the output is not larger"
        elif registry.plain_size(model) <= size:
            outcome = (f"and their output is {final - size} bytes larger only by graphfix's "
                       "records in its metadata (the ONNX Runtime it is bound to, a layout or "
                       "precision asked for) and its shape annotations")
        else:
            copies = next((p for p in passes if p.name == "convert-precision" and p.modified
                           and p.stats.get("weights_copied")), None)
            copied = "" if copies is None else (
                f"convert-precision stores a {copies.details.get('precision', 'lowered')} "
                f"copy of {copies.stats['weights_copied']} weight(s) also read in float32 "
                "whose values a Cast would not keep (too small for it, or past its range), and ")
            outcome = (f"and their output is still {final - size} bytes larger ({copied}what "
                       "the rewrites need beyond the input's bytes: names, attributes)")
        return (
            f"{what} was larger than the input ({grown} > {size} bytes: constant folds that "
            "store new tensors, new names); they ran again, each fold held to the bytes the "
            f"passes before it saved, {outcome} (--max-growth 1.5 trades a larger file for "
            "fewer nodes)")

    def _passes(self, working: onnx.ModelProto, *, held: bool,
                allowance: int = FOLD_ALLOWANCE) -> PipelineRun:
        """The passes on ``working``, ``held`` to its size or not (:func:`run_pipeline`)."""
        # A lowered model is judged at the lowered type's looser tolerance; what the other
        # passes made of it before the gated passes is checked at its own (_verify), so that
        # the looser one lets no other pass's error through.
        lowers = any(p.name == "convert-precision" for p in self.pipeline)
        return run_pipeline(working, self.pipeline, input_shapes=self.run.input_shapes,
                            progress=self.progress, judge=self.loads, strict=self.strict,
                            snapshot_before=gate.GATED_PASSES if self.verify and lowers else (),
                            hold_size=held, fold_allowance=allowance)

    def _record(self, done: PipelineRun) -> None:
        """The report's passes, warnings and what was left out, from a run of the pipeline;
        a later run's (the passes again, a pass left out) replace an earlier one's, so that
        nothing it says twice is printed twice."""
        self.report.passes = done.passes
        self.report.left_out = [item.to_dict() for item in done.left_out]
        lines: list[str] = []
        if done.sorted_graphs:
            lines.append(
                "the input's nodes were not in topological order, as ONNX requires (onnx.checker "
                "and onnxsim refuse such a model; ONNX Runtime sorts it when it loads it): "
                "sorted first, so the output is in order")
        lines += done.fixed
        lines += done.corrected
        for entry in done.passes:
            if entry.skipped and entry.skipped.startswith("left out: "):
                continue  # said once, below
            lines += [f"{entry.name}: {w}" for w in entry.warnings]
            if entry.skipped and entry.skipped not in entry.warnings:
                lines.append(f"{entry.name} skipped: {entry.skipped}")
        lines += [item.describe() for item in done.left_out]
        held = self._held_warning(done.model, done.passes)
        if held is not None:
            lines.append(held)
        moved = layout.read(done.model)
        for kind, flag, asked in (("inputs", "--inputs-as-nchw", self.run.inputs_as_nchw),
                                  ("outputs", "--outputs-as-nchw", self.run.outputs_as_nchw)):
            missed = [name for name in asked if name not in moved[kind]]
            if missed:  # asked for by name: the run says it was not done
                line = (f"{flag} {', '.join(missed)}: not applied (the signature is the "
                        f"original's; see eliminate-transposes above)")
                logger.warning("%s", line)
                lines.append(line)
        for line in self._recorded:
            if line in self.report.warnings:
                self.report.warnings.remove(line)
        self.report.warnings += lines
        self._recorded = lines

    def _verify(self, original: Callable[[], onnx.ModelProto], optimized: onnx.ModelProto,
                before: onnx.ModelProto | None) -> onnx.ModelProto:
        """Parity of ``optimized`` with the original, and of ``before`` (the model before the
        gated passes) where ``optimized`` was lowered; when either fails, the pipeline again
        from the original with each pass judged by parity, what broke it left out (or,
        ``strict``, a :class:`ParityError` naming the pass). Returns the model to write."""

        reference = self.reference = self.reference or ReferenceRun(
            original(), **self.reference_arguments)
        result = check_parity(None, optimized, reference_run=reference, progress=self.progress,
                              tolerances=self.tolerances)
        self.report.parity = result.to_dict()
        empty = result.empty_note()
        if empty is not None:
            logger.warning("%s", empty)
            self.report.warnings.append(empty)
        failed = result
        if result.passed and before is not None and precision_module.read(optimized) is not None:
            # Judged at the lowered type's tolerance, the model would let through an error of
            # a float32 pass that its own tolerance refuses (ORT's Div/Mul fusion moving a T5
            # bucket): the model before the lowering is checked at the original's tolerance.
            base = check_parity(None, before, reference_run=reference,
                                tolerances=self.tolerances)
            if not base.passed:
                failed = base
        del before
        if failed.passed:
            # Parity runs with ONNX Runtime's optimizations off; a deployment runs with them on.
            first = default_session_problem(optimized, original, reference)
            if first is None:
                return optimized
        elif failed is result:
            first = result.describe()
        else:
            first = f"before {', '.join(gate.GATED_PASSES)}: {failed.describe()}"
        # Whether ORT's own optimizations move the original itself as far: an output that
        # ill-conditioned is no pass's fault, and the user judges the tolerance.
        note = original_spread(original(), reference, failed)
        if failed is result:
            self.report.parity = result.to_dict()
        spread = [note] if note else []
        moved = _ill_conditioned(failed)
        also = "" if moved is None else (
            ", nor does the original under ONNX Runtime's default optimizations (" + (
                f"{moved:.3g}x the tolerance)" if math.isfinite(moved) else "values change)"))
        self.report.warnings += spread if moved is not None else []
        logger.info("parity fails (%s); running the passes again, each checked", first)
        judged: list[ParityResult] = []

        def judge(model: onnx.ModelProto) -> str | None:
            problem = self.loads(model)
            if problem is not None:
                return problem
            check = check_parity(None, model, reference_run=reference,
                                 tolerances=self.tolerances)
            if not check.passed:  # an output it broke, or why the check could not run
                return (f"failed the check: {check.problem}" if check.problem
                        else f"broke {check.describe()}")
            broken = default_session_problem(model, original, reference)
            if broken is not None:
                return f"broke the model: {broken}"
            judged.append(check)
            return None

        try:
            done = run_pipeline(_copy(original()), self.pipeline,
                                input_shapes=self.run.input_shapes, progress=_checking(
                                    self.progress), judge=judge, strict=self.strict,
                                hold_size=self.held, fold_allowance=self.allowance)
        except ParityError as error:  # strict: the pass after which parity first fails
            raise ParityError(
                f"the optimized model does not match the original{also}; {error.args[0]}",
                hint=f"run again with --skip {error.guilty_pass}",
                guilty_pass=error.guilty_pass) from None
        if not done.left_out:
            raise ParityError(
                f"the optimized model does not match the original{also} ({first})",
                hint="no single pass reproduces it alone; try --passes with fewer passes")
        if self.size is not None:
            _within(done.model, self.declared, self.names, self.size)
        grown = model_io.stored_size(done.model) if self.size is not None else 0
        if self.size is not None and not self.held and grown > self.size:
            # Never bigger, without the pass left out too: what it took away (ORT's node
            # names, a fold) the others now write (a 576-byte model came out 648 bytes).
            self.held = True
            judged.clear()
            done = run_pipeline(_copy(original()), self.pipeline,
                                input_shapes=self.run.input_shapes, progress=_checking(
                                    self.progress), judge=judge, strict=self.strict,
                                hold_size=True)
            _within(done.model, self.declared, self.names, self.size)
            self._grown = ("the output without what broke parity", grown)
        self._record(done)
        final = judged[-1] if judged else check_parity(
            None, done.model, reference_run=reference, tolerances=self.tolerances)
        final.notes[:0] = [f"the first output of the passes failed parity ({first}); "
                           "each pass was then checked and what broke it left out", *spread]
        final.original_spread = failed.original_spread  # where the first output failed
        self.report.parity = final.to_dict()
        return done.model

    def _gate(self, optimized: onnx.ModelProto, original: Callable[[], onnx.ModelProto]
              ) -> onnx.ModelProto:
        """The speed gate (:mod:`graphfix.speed_gate`) for the passes that changed the model
        for a provider; the model to write."""
        gated = [e.name for e in self.report.passes if e.name in gate.GATED_PASSES and e.modified]
        if not gated:
            return optimized
        if not self.judge_speed:
            verdict = gate.unmeasured(gated)
            self.report.speed_gate = {"verdicts": [verdict.to_dict()], "note": verdict.note}
            return optimized

        runs: list[PipelineRun] = []

        def without(left_out: frozenset[str]) -> onnx.ModelProto:
            rest = [p for p in self.pipeline if p.name not in left_out]
            runs.append(run_pipeline(_copy(original()), rest, input_shapes=self.run.input_shapes,
                                     judge=self.loads, hold_size=self.held,
                                     fold_allowance=self.allowance))
            return runs[-1].model

        verdicts, replacement = gate.judge(optimized, without, gated, self.run, self.bench,
                                           progress=self.progress)
        self.report.speed_gate = {"verdicts": [v.to_dict() for v in verdicts],
                                  "note": "; ".join(v.note for v in verdicts)}
        if replacement is None:
            return optimized
        # The report tells of the run written: its passes, its warnings (a gated pass's own,
        # and a size said of the model with it, no longer stand), the gated passes left out.
        done = next(r for r in runs if r.model is replacement)
        dropped = {name: v.verdict for v in verdicts if not v.kept for name in v.passes}
        rows = iter(done.passes)
        passes: list[PassReport] = []
        for entry in self.report.passes:
            if entry.name in dropped:
                nodes = passes[-1].nodes_after if passes else entry.nodes_before
                passes.append(dataclasses.replace(
                    entry, modified=False,
                    skipped=f"left out by the speed gate: {dropped[entry.name]} (below)",
                    nodes_before=nodes, nodes_after=nodes, op_delta={}, stats={},
                    warnings=[], details={}))
            else:
                passes.append(next(rows))
        self._record(dataclasses.replace(done, passes=passes))
        for verdict in verdicts:
            if not verdict.kept:
                logger.warning("%s", verdict.note)
                self.report.warnings.append(verdict.note)
        if self.verify:

            reference = self.reference or ReferenceRun(original(), **self.reference_arguments)
            result = check_parity(None, replacement, reference_run=reference,
                                  progress=self.progress, tolerances=self.tolerances)
            self.report.parity = result.to_dict()
            if not result.passed:
                raise ParityError(f"the model without the slower rewrites does not match the "
                                  f"original ({result.describe()})")
        return replacement

    def _finish(self, optimized: onnx.ModelProto | None) -> None:
        if optimized is not None:
            self.report.output = model_facts(optimized)
        self.report.seconds = time.perf_counter() - self.started

    def _with_report(self, error: GraphfixError, optimized: onnx.ModelProto | None
                     ) -> GraphfixError:
        self._finish(optimized)
        error.report = self.report
        return error


def _within(model: onnx.ModelProto, declared: set[str], names: set[str] | None,
            size_before: int) -> None:
    """Never a bigger file for shapes or names alone: where the optimized model is larger than
    the input, the shape annotations (main-graph ``value_info``) the input did not have go
    (onnxsim writes one per tensor it inferred: a 10-node scikit-learn pipeline went from 1297
    to 1489 bytes with 9 nodes), and then the names the rewrites made are shortened
    (:func:`graphfix.graph.shorten_new_names`: a 2 KB model whose tensors had one-letter
    names came out 42% larger of ``_untransposed`` suffixes and node names alone). Both are
    optional; ONNX Runtime infers shapes itself, and names compute nothing. ``names``: the
    input's own (None: names are left as they are)."""
    if model_size(model) <= size_before:
        return
    if any(v.name not in declared for v in model.graph.value_info):
        graph_layer.keep_only(model.graph.value_info, lambda value: value.name in declared)
        if model_size(model) <= size_before:
            return
    if names is not None:
        graph_layer.shorten_new_names(model.graph, names)


def _bench(
    baseline: onnx.ModelProto,
    optimized: onnx.ModelProto,
    report: Report,
    options: BenchOptions,
    run: RunOptions,
    require_speedup: float | None,
) -> None:

    arguments = options.arguments()
    if "provider" not in arguments and run.provider != "auto":
        arguments["provider"] = run.provider  # the model is for that provider: time it there
    gate.place_shapes(arguments, run, baseline, optimized)
    result = benchmark(optimized, baseline=baseline, **arguments)
    report.bench = result.to_dict()
    report.warnings += list(result.warnings)
    if require_speedup is not None:
        check_speedup(result, require_speedup)


def _reader(model: onnx.ModelProto, path: Path | None) -> Callable[[], onnx.ModelProto]:
    """``model`` on demand, or the model at ``path`` read once, when first asked for."""
    read: list[onnx.ModelProto] = [] if path is not None else [model]

    def get() -> onnx.ModelProto:
        if not read:
            read.append(model_io.load(path, load_external_data=False))
        return read[0]

    return get


def _checking(progress: Progress | None) -> Progress | None:
    """``progress`` for the passes run again, each checked by parity."""
    if progress is None:
        return None
    return lambda step, done, total: progress(f"checking {step}" if step else step, done, total)


def _ill_conditioned(result: ParityResult) -> float | None:
    """How far, in tolerances, ORT's own optimizations move the original where ``result``
    failed (:func:`graphfix.validate.parity.original_spread`), when beyond; else None."""
    values = list((result.original_spread or {}).get("outputs", {}).values())
    return max(values) if values and max(values) > 1.0 else None


def _start_reference(
    original: onnx.ModelProto, arguments: Mapping[str, Any]
) -> ReferenceRun | None:
    """The reference side of the parity check, running in the background while the passes
    run (they are mostly one core of Python and a worker process waiting on each other), or
    None for a model whose weights are too large to hold twice (its reference session is then
    built after the passes, as the only copy of the weights in ONNX Runtime)."""

    if model_io.weight_bytes(original) > OVERLAP_MAX_WEIGHT_BYTES:
        return None
    reference_run = ReferenceRun(original, **arguments)
    reference_run.start()
    return reference_run


def optimize_file(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    *,
    external_data: bool | None = None,
    report: str | os.PathLike | None = None,
    **kwargs: Any,
) -> OptimizeResult:
    """Optimize the model at ``src`` and write it to ``dst`` (atomically; ``src`` is never
    changed). Weights go to an external data file beside ``dst`` when ``src`` had external data,
    when the model is over 2 GB, or when ``external_data`` is true. ``report``: also write the
    JSON report there, with the model (a refused run writes it too, with the error). Keyword
    arguments are those of :func:`optimize`.

    Every file the run reads (the model, its data files, every file of ``parity.inputs``) is
    checked against every file it writes before the passes run, and again when writing: each
    file read is recorded as it is read, however the run reached it. When one of them changed
    while the run worked, nothing is written. Nothing is written when optimization or parity
    fails."""
    check_path("optimize_file", "src", src)
    check_path("optimize_file", "dst", dst)
    check_path("optimize_file", "report", report, optional=True)
    if external_data is not None:
        check_type("optimize_file", "external_data", external_data, bool, "True, False or None")
    unknown = sorted(set(kwargs) - _OPTIMIZE_KEYWORDS)
    if unknown:
        raise OptionError(f"optimize_file(): unknown argument {unknown[0]!r}",
                          hint="its arguments are external_data, report and those of "
                               "graphfix.optimize (help(graphfix.optimize))")
    with model_io.read_log() as log:
        try:
            return _optimize_file(src, dst, external_data, report, kwargs)
        except GraphfixError as error:
            # A file read that changed since explains the failure better than what it caused
            # (a parity failure, a data file that ends too soon).
            try:
                log.check_unchanged()
            except GraphfixError as changed:
                changed.report = error.report
                raise changed from None
            raise


def _empty_report(kwargs: Mapping[str, Any], loaded: model_io.LoadedModel | None) -> Report:
    """The report of a run refused before any pass ran: the input's facts where it was read."""
    report = Report(graphfix_version=__version__, verify=kwargs.get("verify") is not False)
    if loaded is not None:
        report.input = model_facts(loaded.model, size_bytes=loaded.size_bytes or None,
                                   external_data=loaded.external_data)
    return report


def _write_refusal(report: str | os.PathLike, error: GraphfixError,
                   reads: Mapping[Path, str], dst: Path | None = None) -> None:
    """The report of a refused run, with its error, at ``report`` (never over a file read,
    nor where the model was to go)."""
    assert error.report is not None
    error.report.error = str(error)
    try:
        if dst is not None and Path(report).resolve() == dst.resolve():
            raise ModelSaveError(f"{shown(Path(report))}: the optimized model's path")
        model_io.check_outputs({"the report": report}, reads)
        model_io.write_text(report, error.report.to_json() + "\n", protect=list(reads))
    except GraphfixError as unwritten:
        logger.warning("the report of the refused run was not written: %s", unwritten)


def _optimize_file(src: str | os.PathLike, dst: str | os.PathLike, external_data: bool | None,
                   report: str | os.PathLike | None, kwargs: dict[str, Any]) -> OptimizeResult:
    dst_path = model_io.output_path(dst, "the optimized model")
    if report is not None:
        report = model_io.output_path(report, "the report")
    src_path = Path(src)
    try:
        loaded = model_io.load_with_info(src_path, load_external_data=False)
    except GraphfixError as error:
        if report is not None:  # the report says why nothing was read
            error.report = _empty_report(kwargs, None)
            _write_refusal(report, error, {src_path: "the input model"})
        raise
    reads: dict[Path, str] = {src_path: "the input model"}
    reads.update(dict.fromkeys(model_io.data_files(loaded.model), "the input's external data"))
    parity = kwargs.get("parity")
    inputs = parity.inputs if isinstance(parity, ParityOptions) else None
    if inputs is not None:
        reads.update(dict.fromkeys(feed_files(inputs), "the inputs file"))
    try:
        outputs: dict[str, str | os.PathLike] = {"the optimized model": dst_path}
        if external_data is None and loaded.external_data:
            external_data = True  # the output keeps its weights outside, as the input did
        data_path = model_io.data_path_of(dst_path)
        if model_io.may_write_data(loaded.model, external_data):
            outputs["the optimized model's external data"] = data_path
        if report is not None:
            outputs["the report"] = report
        model_io.check_outputs(outputs, reads)
        if "the optimized model's external data" in outputs:
            model_io.check_data_file(data_path, dst_path)
        _check_file_size_limit(loaded)
        result = optimize(loaded, **kwargs)
    except GraphfixError as error:
        if report is not None:
            if error.report is None:  # refused before any pass ran (an option that does not
                # fit the model): the report says what was read, and why nothing was done
                error.report = _empty_report(kwargs, loaded)
            _write_refusal(report, error, reads, dst_path)
        raise
    progress = kwargs.get("progress")
    if progress is not None:
        progress("writing", 0, 1)

    def report_text(written: model_io.WrittenModel) -> str:
        _record_written(result.report, result.model, written)
        return result.report.to_json() + "\n"

    written = model_io.save(
        result.model, dst_path, external_data=external_data, protect=list(reads),
        companions={report: report_text} if report is not None else None,
    )
    _record_written(result.report, result.model, written)
    return result


def _check_file_size_limit(loaded: model_io.LoadedModel) -> None:
    """Refuse up front a run whose files the file-size limit (``ulimit -f``) rules out: the
    written model holds about what the input holds, and so do the files the passes write for
    their tools."""
    limit = model_io.file_size_limit()
    largest = max([loaded.size_bytes, *(p.stat().st_size for p in
                                        model_io.data_files(loaded.model) if p.exists())])
    if limit is not None and largest > limit:
        raise ResourceError(
            f"the file-size limit (ulimit -f) is {limit} bytes, and this model's files are up "
            f"to {largest} bytes: graphfix could not write the result",
            hint="raise the limit (ulimit -f unlimited)")


def _record_written(report: Report, model: onnx.ModelProto, written: model_io.WrittenModel) -> None:
    report.written = str(written.path)
    report.output = model_facts(
        model, size_bytes=written.size_bytes, external_data=written.data_path is not None
    )
