"""Numerical parity: does the candidate model compute what the reference computes?

Both models run on ONNX Runtime with its graph optimizations off (so ORT's own rewrites cannot
hide a broken graph, or break a right one), on the same inputs (:mod:`graphfix.feeds`),
and their outputs are matched by name. Per output graphfix records dtype and shape equality,
max / mean / 99th-percentile absolute error, max relative error, cosine similarity, NaN and Inf
appearing or disappearing, and for integers, booleans and strings the number of differing
elements.

Tolerances. A float element passes when
``|cand - ref| <= max(atol * scale, 4 * eps) + rtol * |ref|``, where ``scale`` is the root mean
square of the reference output's finite values (1 when they are all zero) and ``eps`` the
spacing of the output's float type at 1.0. The ``atol`` term is relative to the output's own
magnitude: logits that all sit around 1e-3 get the same scrutiny as activations around 1, where
a fixed atol of 1e-5 would wave through a 1% error. The ``eps`` floor is rounding: an output
near 0 (a sigmoid map of background pixels, 0 or 1.2e-7 almost everywhere) was computed
through values near 1, where one rounding is 1.2e-7 in float32. Defaults per dtype
(:data:`graphfix.options.DEFAULT_TOLERANCES`):

=========  ======  =====  =================================================================
dtype      atol    rtol   why
=========  ======  =====  =================================================================
float32    1e-4    1e-3   legal rewrites reassociate sums (Conv+BatchNorm folding, fused
                          MatMul+Add, reordered reductions): errors of ~1e-6 of the scale per
                          layer, accumulating over deep nets; a real bug is orders larger
float64    1e-9    1e-7   the same rewrites at double precision
float16    1e-2    1e-2   10 mantissa bits: one rounding is ~5e-4 relative
bfloat16   5e-2    5e-2   7 mantissa bits
integers   exact          indices, counts and argmax results have no rounding to forgive
=========  ======  =====  =================================================================

Override them for all outputs (``tolerances={"*": (atol, rtol)}``) or per output name; a part
given as None keeps the default.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from graphfix import layout as layout_module
from graphfix import model_io
from graphfix import precision as precision_module
from graphfix.errors import ProviderUnavailableError, ValidationInputError, first_line
from graphfix.graph import all_nodes, is_random, run_time_steps
from graphfix.options import (DEVICES, PROVIDERS, OptionError, Tolerance, check_count,
                              check_feeds, check_pair_of_names, check_path, check_progress,
                              check_provider,
                              check_shapes, check_tolerances, default_tolerance)
from graphfix.providers import resolve_provider, session_providers
from graphfix import feeds as feeds_module
from graphfix.feeds import Feeds
from graphfix.report import num, percent, table

__all__ = [
    "OutputParity",
    "ParityResult",
    "ReferenceOutputs",
    "ReferenceRun",
    "check_parity",
    "generated_feeds",
    "compare_output", "default_session_problem", "format_parity", "identical",
    "original_spread"]

logger = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]



@dataclasses.dataclass
class OutputParity:
    """How one output of the candidate compares with the reference (worst run)."""

    name: str
    dtype: str
    shape: list[int] | None
    passed: bool = True
    reason: str = ""
    candidate_dtype: str | None = None
    candidate_shape: list[int] | None = None
    max_abs_error: float | None = None
    mean_abs_error: float | None = None
    p99_abs_error: float | None = None
    max_rel_error: float | None = None
    cosine: float | None = None
    scale: float | None = None
    atol: float | None = None
    rtol: float | None = None
    mismatched: int = 0
    elements: int = 0
    tolerance_used: float = 0.0  # worst element's error / its allowance; > 1 fails
    run: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {k: _json_number(v) for k, v in dataclasses.asdict(self).items()}

    @property
    def severity(self) -> float:
        return self.tolerance_used


@dataclasses.dataclass
class ParityResult:
    """The verdict of :func:`check_parity`, with per-output statistics."""

    passed: bool
    outputs: list[OutputParity]
    problem: str | None = None  # a failure that is not one output's (load error, signature)
    runs: list[dict[str, str]] = dataclasses.field(default_factory=list)  # inputs of each run
    notes: list[str] = dataclasses.field(default_factory=list)
    provider: str = "cpu"
    # Wall time of the check from when it was asked for (after the passes, in optimize).
    seconds: float = 0.0
    # The reference's own runs; when they overlapped the passes, part of them is not in seconds.
    reference_seconds: float = 0.0
    reference_overlapped: bool = False
    # On a failure by value: how far ONNX Runtime's own default optimizations move the
    # reference (:func:`original_spread`): per failing output, the input set and the
    # tolerance used (infinite for an output compared exactly whose values change).
    original_spread: dict[str, Any] | None = None
    # Outputs the reference returned empty (no element), or float and only zeros or only NaN,
    # on every input set: nothing the model computes was compared through them (a detector
    # whose score threshold keeps nothing of generated inputs; a head initialized to zero; a
    # logarithm of generated values below zero).
    empty: list[str] = dataclasses.field(default_factory=list)

    @property
    def vacuous(self) -> bool:
        """Every output was empty, only zeros or only NaN on every input set: the check compared
        nothing the model computes."""
        return bool(self.outputs) and len(self.empty) == len(self.outputs)

    def empty_note(self) -> str | None:
        """What the check could not see, and how to let it, where outputs were empty."""
        if not self.empty:
            return None
        what = "every output" if self.vacuous else \
            f"output(s) {', '.join(map(repr, self.empty))}"
        return (f"parity compared nothing the model computes through {what}: empty, only "
                "zeros or only NaN on every input set; give inputs on which they are not "
                "(--inputs) to check them")

    @property
    def worst(self) -> OutputParity | None:
        """The failing output with the largest error, else the one closest to its tolerance."""
        if not self.outputs:
            return None
        failing = [o for o in self.outputs if not o.passed]
        return max(failing or self.outputs, key=lambda o: o.severity)

    def describe(self) -> str:
        """One line: what is wrong (or how close the worst output came)."""
        if self.problem:
            return self.problem
        worst = self.worst
        if worst is None:
            return "no outputs to compare"
        text = f"output {worst.name!r}: {worst.reason}"
        others = [o.name for o in self.outputs if not o.passed and o is not worst]
        if others:
            text += f" (also wrong: {', '.join(map(repr, others))})"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "problem": self.problem,
            "provider": self.provider,
            "seconds": round(self.seconds, 4),
            "reference_seconds": round(self.reference_seconds, 4),
            "reference_overlapped": self.reference_overlapped,
            "runs": self.runs,
            "notes": self.notes,
            "worst": self.worst.name if self.worst else None,
            "empty_outputs": self.empty,
            "outputs": [o.to_dict() for o in self.outputs],
            "original_spread": self.original_spread and {
                **self.original_spread, "outputs": {
                    k: _json_number(v) for k, v in self.original_spread["outputs"].items()}},
        }


def _json_number(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


# --------------------------------------------------------------------------------------------
# Comparison of one output


def compare_output(
    name: str, reference: Any, candidate: Any, tolerance: Tolerance | None = None, run: int = 0
) -> OutputParity:
    """Statistics and verdict for one output of one run."""
    if isinstance(reference, list) or isinstance(candidate, list):
        return _compare_sequence(name, reference, candidate, tolerance, run)
    if isinstance(reference, dict) or isinstance(candidate, dict):
        return _compare_map(name, reference, candidate, tolerance, run)
    ref, cand = np.asarray(reference), np.asarray(candidate)
    result = OutputParity(
        name, str(ref.dtype), list(ref.shape), candidate_dtype=str(cand.dtype),
        candidate_shape=list(cand.shape), elements=int(ref.size), run=run,
    )
    if ref.dtype != cand.dtype:
        return _fail(result, f"dtype {cand.dtype} where the reference has {ref.dtype}")
    if ref.shape != cand.shape:
        return _fail(result, f"shape {list(cand.shape)} where the reference has {list(ref.shape)}")
    default_atol, default_rtol = default_tolerance(ref.dtype)
    atol, rtol = tolerance if tolerance is not None else (None, None)
    atol = default_atol if atol is None else atol
    rtol = default_rtol if rtol is None else rtol
    result.atol, result.rtol = atol, rtol
    if ref.dtype.kind in "fc":
        return _compare_floats(result, ref, cand, atol, rtol)
    if ref.dtype.kind in "iub" and (atol or rtol):
        return _compare_floats(result, ref.astype(np.float64), cand.astype(np.float64), atol, rtol)
    differ = int(np.count_nonzero(ref != cand))
    result.mismatched = differ
    if ref.dtype.kind in "iub" and ref.size:
        diff = np.abs(ref.astype(np.float64) - cand.astype(np.float64))
        result.max_abs_error = float(diff.max())
        result.mean_abs_error = float(diff.mean())
    result.tolerance_used = math.inf if differ else 0.0
    if differ:
        return _fail(result, f"{differ} of {ref.size} values differ (compared exactly)")
    return result


# A difference of a few units in the last place of 1.0 is rounding, whatever the output's own
# magnitude: an output near 0 (a sigmoid map of a background) was computed through values near 1.
_ROUNDING_ULPS = 4
# Sets of generated inputs one check may ask for: each is a run of both models.
MAX_PARITY_RUNS = 10_000


def _rounding_floor(dtype: np.dtype) -> float:
    """The smallest absolute allowance of a float output: a few ulps of 1.0 in its type."""
    try:
        return _ROUNDING_ULPS * float(np.finfo(dtype).eps)
    except ValueError:
        return 0.0


def _compare_floats(
    result: OutputParity, ref: np.ndarray, cand: np.ndarray, atol: float, rtol: float
) -> OutputParity:
    ref64 = ref.astype(np.complex128 if ref.dtype.kind == "c" else np.float64)
    cand64 = cand.astype(ref64.dtype)
    problems = []
    for label, test in (("NaN", np.isnan), ("Inf", np.isinf)):
        r, c = test(ref64), test(cand64)
        if np.any(r != c):
            appear, vanish = int(np.count_nonzero(c & ~r)), int(np.count_nonzero(r & ~c))
            problems.append(
                ", ".join(
                    part for part in (
                        f"{label} appears in {appear} element(s)" if appear else "",
                        f"{label} disappears from {vanish} element(s)" if vanish else "",
                    ) if part
                )
            )
    both_inf = np.isinf(ref64) & np.isinf(cand64)
    if np.any(both_inf & (ref64 != cand64)):
        problems.append("an Inf changes sign")
    finite = np.isfinite(ref64) & np.isfinite(cand64)
    r, c = ref64[finite], cand64[finite]
    scale = float(np.sqrt(np.mean(np.abs(r) ** 2))) if r.size else 0.0
    scale = scale if scale > 0 else 1.0
    result.scale = scale
    if r.size:
        diff = np.abs(c - r)
        allowance = max(atol * scale, _rounding_floor(ref.dtype)) + rtol * np.abs(r)
        ratio = np.divide(diff, allowance, out=np.full(diff.shape, np.inf), where=allowance > 0)
        ratio[(diff == 0)] = 0.0
        result.max_abs_error = float(diff.max())
        result.mean_abs_error = float(diff.mean())
        result.p99_abs_error = float(np.percentile(diff, 99))
        result.max_rel_error = float(np.max(diff / np.maximum(np.abs(r), 1e-3 * scale)))
        result.tolerance_used = float(ratio.max())
        result.mismatched = int(np.count_nonzero(ratio > 1))
        norm = float(np.linalg.norm(r) * np.linalg.norm(c))
        if norm > 0:
            result.cosine = float(np.real(np.vdot(r, c)) / norm)
        elif not np.any(r) and not np.any(c):
            result.cosine = 1.0
    else:
        result.max_abs_error = result.mean_abs_error = result.p99_abs_error = 0.0
    if result.mismatched:
        problems.insert(
            0,
            f"max abs error {result.max_abs_error:.3g} ({result.mismatched} of {ref.size} "
            f"element(s) beyond {atol:g} x scale {scale:.3g} + {rtol:g} x |ref|)",
        )
    if problems:
        return _fail(result, "; ".join(problems))
    result.reason = (
        f"max abs error {result.max_abs_error:.3g}, {result.tolerance_used:.2%} of tolerance"
    )
    return result


def _compare_sequence(
    name: str, reference: Any, candidate: Any, tolerance: Tolerance | None, run: int
) -> OutputParity:
    result = OutputParity(name, "sequence", None, run=run)
    if not (isinstance(reference, list) and isinstance(candidate, list)):
        return _fail(result, "one model returns a sequence, the other a tensor")
    if len(reference) != len(candidate):
        return _fail(result, f"sequence of {len(candidate)} where the reference has {len(reference)}")
    worst = result
    for index, (r, c) in enumerate(zip(reference, candidate)):
        item = compare_output(f"{name}[{index}]", r, c, tolerance, run)
        if not item.passed or item.tolerance_used > worst.tolerance_used:
            worst = item
        if not item.passed:
            break
    worst.name = name
    return worst


def _compare_map(
    name: str, reference: Any, candidate: Any, tolerance: Tolerance | None, run: int
) -> OutputParity:
    """A map (a classifier's ZipMap probabilities): the same keys, and the values compared as
    one tensor of their type, floats within tolerance."""
    if not (isinstance(reference, dict) and isinstance(candidate, dict)):
        return _fail(OutputParity(name, "map", None, run=run),
                     "one model returns a map, the other does not")
    if reference.keys() != candidate.keys():
        extra = [k for k in candidate if k not in reference]
        missing = [k for k in reference if k not in candidate]
        detail = "; ".join(part for part in (
            f"keys {extra[:3]!r} added" if extra else "",
            f"keys {missing[:3]!r} missing" if missing else "") if part)
        return _fail(OutputParity(name, "map", None, run=run), f"map keys differ: {detail}")
    keys = list(reference)
    ref, cand = _map_values([reference[k] for k in keys]), _map_values([candidate[k] for k in keys])
    if ref.dtype == np.float64 and cand.dtype == np.float64 and _float32_values(ref, cand):
        ref, cand = ref.astype(np.float32), cand.astype(np.float32)
    result = compare_output(name, ref, cand, tolerance, run)
    result.dtype = result.candidate_dtype = f"map of {ref.dtype}"
    return result


def _map_values(values: list[Any]) -> np.ndarray:
    return np.asarray(values) if values else np.zeros(0, np.float32)


def _float32_values(*arrays: np.ndarray) -> bool:
    """Whether float64 values are float32 ones widened: ONNX Runtime hands a map(…, float)'s
    values to Python as floats, and their tolerance is float32's, not float64's."""
    return all(np.array_equal(a.astype(np.float32).astype(np.float64), a, equal_nan=True)
               for a in arrays)


def _fail(result: OutputParity, reason: str) -> OutputParity:
    result.passed = False
    result.reason = reason
    if not result.mismatched:  # structural: dtype, shape, NaN, a missing output
        result.tolerance_used = math.inf
    return result


# --------------------------------------------------------------------------------------------
# Running both models


@dataclasses.dataclass
class ReferenceOutputs:
    """The reference model's side of a parity check: its signature and its outputs on every
    input set. Plain values only: ORT's NodeArg objects would keep the session (and its
    weights) alive."""

    names: list[str]  # output names, in order
    inputs: dict[str, str]  # input name -> ORT type
    runs: list[tuple[Feeds, list[Any]]]
    notes: list[str]
    seconds: float
    # The first set again with other values fed to the inputs that have a default value (an
    # initializer listed as an input), and its outputs: a rewrite that took a default for a
    # constant computes otherwise there.
    overridden: tuple[Feeds, list[Any]] | None = None
    # Why those inputs were not fed other values (too many bytes, or the reference refused
    # them), said only where the candidate takes them too.
    unchecked: str | None = None
    # The random draws of the reference (its random nodes' outputs) in each run's feed: both
    # models are given the same (:func:`_pinned`).
    draws: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)


class ReferenceRun:
    """The reference side of a parity check, prepared from the model now and run now or in the
    background.

    The constructor reads everything it needs of ``reference`` (its ORT session, which holds
    its own copy of the graph and weights, its input signature, given inputs), so the model may
    be rewritten in place afterwards: :func:`graphfix.optimize` starts the reference's runs
    when the pipeline starts and they overlap the passes (ORT releases the GIL while it runs).
    Options are those of :func:`check_parity`.
    """

    def __init__(
        self,
        reference: onnx.ModelProto,
        *,
        feeds: Sequence[Feeds] | Feeds | None = None,
        inputs: str | None = None,
        runs: int | None = None,
        seed: int = 0,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        provider: str = "cpu",
        name: str = "original",
    ) -> None:
        check_provider(provider, allowed=DEVICES, what="parity's provider")
        check_count("check_parity", "runs", runs, high=MAX_PARITY_RUNS)
        check_path("check_parity", "inputs", inputs, optional=True)
        check_count("check_parity", "seed", seed, low=0, optional=False)
        check_feeds("check_parity", feeds, sets=True)
        if feeds is not None and inputs is not None:
            raise OptionError("check_parity(): feeds and inputs both give the inputs",
                              hint="give one of them")
        input_shapes = check_shapes("check_parity", input_shapes)
        if feeds is not None and not isinstance(feeds, Mapping) and len(feeds) == 0:
            raise OptionError("check_parity(): feeds is an empty list: nothing would be compared")
        if provider == "cuda":  # refused, naming what is missing, when CUDA does not load
            resolve_provider("cuda")
        self.name = name
        self.provider = provider
        self.providers = session_providers(provider)
        self._seed, self._input_shapes = seed, input_shapes
        # Random ops that draw from a shape alone (RandomNormalLike in a VITS voice's
        # decoder): the reference's draws are read in each run and fed to both models (the
        # candidate's random nodes read them: :func:`_pinned`), so that parity compares what
        # the two compute from the same draws. Other random ops (a Dropout in training mode,
        # Bernoulli), and draws inside a body, cannot be fed: the original is run twice on the
        # first inputs instead, and parity is refused when the two runs differ.
        self._random = sorted({n.op_type for n in all_nodes(reference.graph) if is_random(n)})
        self.draws = _draws(reference) if self._random else {}
        outputs = {o.name for o in reference.graph.output}
        # the draws the session gives as outputs of their own, after the graph's (a draw that
        # is a graph output already is among those)
        self._exposed = [name for name in self.draws if name not in outputs]
        self._session = _session_exposing(reference, self.draws, self.providers, name)
        if provider == "cuda" and PROVIDERS["cuda"] not in self._session.get_providers():
            # ONNX Runtime falls back to the CPU on its own: parity "on CUDA" would be a lie.
            raise ProviderUnavailableError(
                f"ONNX Runtime did not keep the CUDA provider for the {name}",
                hint="`graphfix doctor --provider cuda` shows why")
        self.layout = layout_module.read(reference)
        self.reference = reference  # its graphfix.precision record: a signature lowered
        self._specs = feeds_module.input_specs(reference)
        self._defaults = _other_defaults(reference, self._session, seed)
        self._given: list[Feeds] | None = None
        if feeds is not None:
            given = [feeds] if isinstance(feeds, Mapping) else list(feeds)
            self._given = [feeds_module.text_as_str(f, where="feeds") for f in given]
        elif inputs is not None:
            self._given = feeds_module.load_feeds(inputs, reference)
        if self._given is not None:
            for index, feed in enumerate(self._given):
                feeds_module.check_feeds(self._specs, feed, where=f"inputs (set {index})")
            self.total = len(self._given)
        self._sizes: feeds_module.TensorSizes | None = None
        self._step_note: str | None = None
        if self._given is None:
            dynamic = any(s.dynamic for s in self._specs if s.name not in (input_shapes or {}))
            self.total = runs if runs is not None else (2 if dynamic else 1)
            steps = run_time_steps(reference.graph) if runs is None else []
            if steps:  # a last bit moves a level on some inputs: more sets to see it
                kinds = sorted({n.op_type for n in steps})
                self._step_note = (
                    f"{self.total * STEPPED_SETS} input sets, not {self.total}: the {name} "
                    f"quantizes or rounds values it computes ({', '.join(kinds[:4])}), where a "
                    "last-bit change moves some outputs by a whole level on some inputs only")
                self.total *= STEPPED_SETS
            if dynamic:  # the sizes tried past the first are checked against the memory
                self._sizes = feeds_module.TensorSizes(reference)
        self._future: concurrent.futures.Future[ReferenceOutputs] | None = None
        self._outputs: ReferenceOutputs | None = None
        self._cancelled = threading.Event()

    def start(self) -> None:
        """Run the reference in a background thread; :meth:`result` waits for it."""
        if self._future is None:
            executor = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix="graphfix-parity-reference"
            )
            self._future = executor.submit(self._run, None)
            executor.shutdown(wait=False)

    @property
    def started(self) -> bool:
        return self._future is not None

    def cancel(self) -> None:
        """Stop a background run after the input set it is on (its result is not wanted)."""
        self._cancelled.set()

    def result(self, progress: Progress | None = None) -> ReferenceOutputs:
        """The reference's outputs (run here unless :meth:`start` ran them), the same on every
        call; re-raises what the run raised (:class:`ValidationInputError` when the reference
        cannot run)."""
        if self._outputs is None:
            self._outputs = self._run(progress) if self._future is None else (
                self._future.result())
        return self._outputs

    def _run(self, progress: Progress | None) -> ReferenceOutputs:
        started = time.perf_counter()
        session, self._session = self._session, None
        if session is None:
            raise RuntimeError("a ReferenceRun runs once")
        notes: list[str] = [self._step_note] if self._step_note else []
        names = [o.name for o in session.get_outputs()][:len(session.get_outputs()) - len(
            self._exposed)]
        inputs = {i.name: i.type for i in session.get_inputs()}
        done: list[tuple[Feeds, list[Any]]] = []
        for run in range(self.total):
            if self._cancelled.is_set():
                raise ValidationInputError("the reference's runs were cancelled")
            if progress is not None:
                progress("parity", run, 2 * self.total)
            if self._given is not None:
                done.append((self._given[run], _run_reference(session, self._given[run], None)))
            else:
                try:
                    done.append(_generated_run(
                        session, self._specs, run, self._seed, self._input_shapes, notes,
                        self.name, self._sizes))
                except ValidationInputError:
                    if not done:
                        raise
                    # An export that fixed a size it declares dynamic (T5's decoder step
                    # exported by torch.export takes one new token): the set's own values,
                    # at the sizes of a set that ran.
                    again = _at_sizes_of(session, self._specs, run, self._seed, done[0][0])
                    if again is None:
                        raise
                    notes.append(f"run {run}: the {self.name} runs at no size of this set's "
                                 f"ladder; checked at run 0's sizes, {_shapes(again[0])}, "
                                 "with its own values")
                    done.append(again)
        done = [self._with_draws(names, feed, outputs) for feed, outputs in done]
        if self.draws:
            notes.append(f"the {self.name} draws random numbers ({', '.join(self._random)}): "
                         f"both models were given its draws ({len(self.draws)} tensor(s)) in "
                         "each run")
        elif self._random and done:
            _check_repeatable(session, done[0], self._random, self.name)
        overridden, unchecked = None, None
        if self._defaults is None:
            unchecked = (f"the {self.name}'s inputs that have a default value hold over "
                         f"{OVERRIDDEN_MAX_BYTES // 2**20} MiB: they were checked at their "
                         "defaults only")
        elif self._defaults and done:
            feed = {**done[0][0], **self._defaults}
            try:
                overridden = self._with_draws(names, feed, session.run(None, _for(session, feed)))
            except Exception as err:  # noqa: BLE001 - ORT refuses in many ways
                unchecked = (f"the {self.name} does not run with other values fed to its "
                             f"inputs that have a default value ({first_line(err)}): they "
                             "were checked at their defaults only")
        # Released before the candidate's session is built: one model's weights in ONNX
        # Runtime at a time (a large model's weights are most of the run's memory).
        del session
        return ReferenceOutputs(names, inputs, done, notes, time.perf_counter() - started,
                                overridden, unchecked, dict(self.draws))

    def _with_draws(self, names: list[str], feed: Feeds, outputs: list[Any]
                    ) -> tuple[Feeds, list[Any]]:
        """A run of the reference's session as parity keeps it: the feed with the run's draws
        added, and the graph's outputs alone."""
        if not self.draws:
            return feed, outputs
        by_name = {**dict(zip(names, outputs)),
                   **dict(zip(self._exposed, outputs[len(names):]))}
        return {**feed, **{name: by_name[name] for name in self.draws}}, outputs[:len(names)]


def check_parity(
    reference: onnx.ModelProto | None,
    candidate: onnx.ModelProto,
    *,
    feeds: Sequence[Feeds] | Feeds | None = None,
    inputs: str | None = None,
    runs: int | None = None,
    seed: int = 0,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    tolerances: Mapping[str, Tolerance] | None = None,
    provider: str = "cpu",
    progress: Progress | None = None,
    reference_run: ReferenceRun | None = None,
    names: tuple[str, str] = ("original", "optimized model"),
    spread: bool = False,
) -> ParityResult:
    """Compare ``candidate`` with ``reference`` on the same inputs.

    Inputs are ``feeds`` (one dict or a list of them), else read from ``inputs`` (a ``.npz``
    file or a folder of ``input_N.pb``), else generated: ``runs`` sets (default two when the
    model has dynamic dimensions, at two sizes; one otherwise; :data:`STEPPED_SETS` times that
    when the reference quantizes or rounds values it computes), seeded by ``seed``, with
    ``input_shapes`` fixing named inputs. ``tolerances`` maps output names (``*`` for all) to
    ``(atol, rtol)``. ``provider`` is ``cpu`` or ``cuda``. ``reference_run`` is the reference's
    side prepared (and perhaps started) earlier with those options; ``reference`` is then not
    read and may be None.

    With ``spread``, a failure by value also says how far ONNX Runtime's default
    optimizations move ``reference`` itself there (:func:`original_spread`).

    Raises :class:`ValidationInputError` when the reference itself cannot be loaded or run on
    the inputs (nothing can be proven then); a candidate that fails to load or run fails parity.
    """
    started = time.perf_counter()
    if reference is not None:  # a path or bytes is a model, as graphfix.load takes it
        reference = model_io.model_argument(reference, "reference", "check_parity")
    candidate = model_io.model_argument(candidate, "candidate", "check_parity")
    check_tolerances("check_parity", tolerances)
    check_progress("check_parity", progress)
    check_pair_of_names("check_parity", "names", names)
    if reference_run is not None and not isinstance(reference_run, ReferenceRun):
        raise OptionError(f"check_parity(): reference_run must be a ReferenceRun, got "
                          f"{type(reference_run).__name__}")
    if reference_run is None:
        if reference is None:
            raise OptionError("check_parity(): reference is None, and no reference_run is "
                              "given: there is nothing to compare with")
        reference_run = ReferenceRun(
            reference, feeds=feeds, inputs=inputs, runs=runs, seed=seed,
            input_shapes=input_shapes, provider=provider, name=names[0],
        )
    overlapped = reference_run.started
    ref = reference_run.result(progress)
    total = reference_run.total
    result = ParityResult(True, [], provider=reference_run.provider, notes=list(ref.notes))
    result.reference_seconds = ref.seconds
    result.reference_overlapped = overlapped
    pinned, unpinned = _pinned(candidate, ref) if ref.draws else (candidate, None)
    if pinned is None:
        result.passed = False
        result.problem = f"the {names[1]} {unpinned}: parity cannot give it the {names[0]}'s draws"
        result.seconds = time.perf_counter() - started
        return result
    try:
        cand_session = _session(pinned, reference_run.providers, names[1])
    except ValidationInputError as err:
        result.passed = False
        result.problem = str(err)
        lowered = precision_module.read(candidate)
        if lowered is not None and lowered.dtype == "bfloat16" and \
                reference_run.provider == "cpu":
            result.problem = (
                f"the {names[1]} computes in bfloat16, which ONNX Runtime's CPU provider has "
                "no kernels for: check it on CUDA (--provider cuda), or skip the check "
                f"(--no-verify) ({err.args[0]})")
        result.seconds = time.perf_counter() - started
        return result
    output_names = ref.names
    # Inputs either model lowered on request (its graphfix.precision record) differ in type.
    retyped = {name for model in (candidate, reference_run.reference)
               for name in getattr(precision_module.read(model), "io_inputs", {})}
    # the draws a pinned candidate takes are the reference's too
    ref_inputs = {**ref.inputs, **{i.name: i.type for i in cand_session.get_inputs()
                                   if i.name.endswith(".draw") and i.name[:-5] in ref.draws}}
    problems = _signature_problems(ref.names, ref_inputs, cand_session, names, retyped=retyped)
    _check_tolerance_names(tolerances, ref.names)
    tolerances = _lowered_tolerances(candidate, tolerances)
    # A signature the passes changed on request (graphfix.layout): each model gets its inputs
    # in its own layout, and outputs are compared in the reference's.
    moved = layout_module.relative(reference_run.layout, layout_module.read(candidate))
    result.notes.extend(layout_module.describe(moved))

    by_name = _compare_runs(ref, cand_session, moved, tolerances, names[1], result, problems,
                            progress, total, candidate, reference_run.reference)
    if ref.overridden is not None and not problems:
        _compare_overridden(ref, cand_session, moved, tolerances, names, result, problems,
                            candidate, reference_run.reference)
    elif ref.unchecked and cand_session.get_overridable_initializers():
        result.notes.append(ref.unchecked)
    if progress is not None:
        progress("parity", 2 * total, 2 * total)
    result.outputs = [by_name[name] for name in output_names if name in by_name]
    result.empty = feeds_module.nothing_to_compare(
        [dict(zip(ref.names, out)) for _, out in ref.runs],
        [name for name in output_names if name in by_name])
    if result.empty:
        result.notes.append(result.empty_note() or "")
    result.problem = "; ".join(problems) or None
    result.passed = not problems and all(o.passed for o in result.outputs)
    if spread and not result.passed and reference is not None:
        del cand_session  # one model's weights in ONNX Runtime at a time
        original_spread(reference, reference_run, result)
    result.seconds = time.perf_counter() - started
    return result


# Generated input sets per size on a model that quantizes or rounds what it computes
# (graphfix.graph.run_time_steps): one set shows a rewrite's level moves only by chance.
STEPPED_SETS = 3
# The level ONNX Runtime's sessions run at unless told otherwise: what a deployment computes.
SPREAD_LEVEL = "all"
# The diagnosis holds the reference's weights in one more session: not past this.
SPREAD_MAX_WEIGHT_BYTES = 512 * 2**20


def default_session_problem(candidate: onnx.ModelProto,
                            reference: Callable[[], onnx.ModelProto],
                            reference_run: ReferenceRun) -> str | None:
    """Why ONNX Runtime's default session (its optimizations at level all, parity's provider)
    cannot run ``candidate`` on parity's first input set where it runs the model ``reference``
    gives (read only then); None
    where it runs it, where it cannot run the reference either, and past
    :data:`SPREAD_MAX_WEIGHT_BYTES` of weights. Parity runs with the optimizations off; a
    deployment runs with them on, and ORT's own rewrites can break a valid model it otherwise
    runs (a tf2onnx diag_part whose sizes were folded: ORT folded the If of its Reshape target
    and every call failed, "Shape mismatch attempting to re-use buffer")."""
    record = precision_module.read(candidate)
    if record is not None and record.dtype == "bfloat16" and "CUDAExecutionProvider" not in [
            p if isinstance(p, str) else p[0] for p in reference_run.providers]:
        return None  # no bfloat16 kernels on the CPU: nothing to learn from a refusal
    if model_io.weight_bytes(candidate) > SPREAD_MAX_WEIGHT_BYTES:
        return None
    ref = reference_run.result()
    if not ref.runs:
        return None
    feed = ref.runs[0][0]
    moved = layout_module.relative(reference_run.layout, layout_module.read(candidate))

    def failure(model: onnx.ModelProto, given: Feeds) -> str | None:
        try:
            session = model_io.ort_session(model, optimization=SPREAD_LEVEL,
                                           providers=reference_run.providers,
                                           options=_session_options())
            session.run(None, _for(session, given))
        except Exception as err:  # noqa: BLE001 - ORT refuses in many ways
            return first_line(err)
        return None

    problem = failure(candidate, _candidate_feed(feed, ref, moved, candidate, None))
    if problem is None or failure(reference(), feed) is not None:
        return None
    return (f"ONNX Runtime's default session (optimizations at level {SPREAD_LEVEL}) cannot run "
            f"it, where it runs the original: {problem}")


def original_spread(reference: onnx.ModelProto, reference_run: ReferenceRun,
                    result: ParityResult) -> str | None:
    """How far ONNX Runtime's default optimizations move ``reference`` itself, on the input set
    where each output of ``result`` failed by value, in the tolerance ``result`` used (an
    output compared exactly: whether any value changes); recorded in ``result``
    (``original_spread`` and a note, which is returned).

    An output that the reference's own optimized session moves beyond its tolerance is
    ill-conditioned on those inputs (an argmax or a loop's decision near a tie): any rewrite's
    roundings move it as far, and the failure says more about the inputs or the tolerance than
    about the candidate. None when nothing failed by value, the reference holds more than
    :data:`SPREAD_MAX_WEIGHT_BYTES` of weights, or its optimized session does not run."""
    failing = [o for o in result.outputs if not o.passed and o.mismatched]
    if not failing or model_io.weight_bytes(reference) > SPREAD_MAX_WEIGHT_BYTES:
        return None
    ref = reference_run.result()
    by_run: dict[int, list[OutputParity]] = {}
    for output in failing:
        if output.run < len(ref.runs):
            by_run.setdefault(output.run, []).append(output)
    moved: dict[str, OutputParity] = {}
    try:
        session = model_io.ort_session(reference, optimization=SPREAD_LEVEL,
                                       providers=reference_run.providers,
                                       options=_session_options())
        names = [o.name for o in session.get_outputs()]
        for run, outputs in sorted(by_run.items()):
            feed, values = ref.runs[run]
            again = dict(zip(names, session.run(None, _for(session, feed))))
            before = dict(zip(ref.names, values))
            for output in outputs:
                if output.name in before and output.name in again:
                    moved[output.name] = compare_output(
                        output.name, before[output.name], again[output.name],
                        (output.atol, output.rtol), run)
    except Exception:  # noqa: BLE001 - a diagnosis only: ORT refusing it is not the check's
        logger.debug("the reference's optimized session did not run", exc_info=True)
        return None
    if not moved:
        return None
    result.original_spread = {
        "optimization": SPREAD_LEVEL,
        "runs": {name: o.run for name, o in moved.items()},
        "outputs": {name: o.severity for name, o in moved.items()}}
    worst = max(moved.values(), key=lambda o: o.severity)
    how_far = (f"{worst.mismatched} of its {worst.elements} values"
               if math.isinf(worst.severity) else f"{worst.severity:.3g}x the tolerance")
    if worst.severity > 1.0:
        note = (f"ONNX Runtime's default optimizations change the {reference_run.name} itself "
                f"by {how_far} on output {worst.name!r} (input set {worst.run}): the output is "
                "ill-conditioned on these inputs (an argmax, a rounding or a decision near a "
                "tie), so any rewrite's rounding moves it as far; real inputs (--inputs) or "
                "that output's own tolerance (--tol NAME:ATOL:RTOL) judge it better")
    else:
        note = (f"ONNX Runtime's default optimizations keep the {reference_run.name} within "
                f"{worst.severity:.2%} of the tolerance on the failing output(s): the "
                f"difference is not the {reference_run.name}'s own spread")
    result.notes.append(note)
    return note


def _candidate_feed(feed: Feeds, ref: ReferenceOutputs, moved: layout_module.Layout,
                    model: onnx.ModelProto | None, ref_model: onnx.ModelProto | None) -> Feeds:
    """A reference's input set as the candidate ``model`` takes it: inputs made channels-first
    on request (``moved``), the reference's random draws, inputs either side lowered on
    request (:mod:`graphfix.precision`)."""
    cand_feed = layout_module.to_candidate(feed, moved)
    cand_feed.update({f"{name}.draw": feed[name] for name in ref.draws if name in feed})
    if model is not None:
        cand_feed = precision_module.for_model(cand_feed, model, ref_model)
    return cand_feed


def _compare_runs(
    ref: ReferenceOutputs, cand_session: Any, moved: layout_module.Layout,
    tolerances: Mapping[str, Tolerance] | None, candidate: str, result: ParityResult,
    problems: list[str], progress: Progress | None, total: int,
    model: onnx.ModelProto | None = None, ref_model: onnx.ModelProto | None = None,
) -> dict[str, OutputParity]:
    """The candidate on each of the reference's input sets, each output compared; per output
    the worst run (a failing one first)."""
    cand_names = [o.name for o in cand_session.get_outputs()]
    by_name: dict[str, OutputParity] = {}
    for run, (feed, ref_out) in enumerate(ref.runs):
        if progress is not None:
            progress("parity", total + run, 2 * total)
        result.runs.append(feeds_module.describe(
            {k: v for k, v in feed.items() if k not in ref.draws}))
        try:
            cand_feed = _candidate_feed(feed, ref, moved, model, ref_model)
            cand_out = cand_session.run(None, _for(cand_session, cand_feed))
        except Exception as err:  # noqa: BLE001 - any ORT failure is the candidate's failure
            problems.append(f"the {candidate} fails to run on {_shapes(feed)}: "
                            f"{first_line(err)}")
            break
        cand_by_name = layout_module.to_reference(dict(zip(cand_names, cand_out)), moved)
        if model is not None:
            cand_by_name = precision_module.to_reference(cand_by_name, model,
                                                         dict(zip(ref.names, ref_out)),
                                                         ref_model)
        for name, ref_value in zip(ref.names, ref_out):
            if name not in cand_by_name:
                stats = OutputParity(name, _dtype_name(ref_value), None, run=run)
                _fail(stats, f"missing from the {candidate}")
            else:
                stats = compare_output(
                    name, ref_value, cand_by_name[name], _tolerance(tolerances, name), run
                )
            previous = by_name.get(name)
            if previous is None or (previous.passed and stats.severity > previous.severity):
                by_name[name] = stats
    return by_name


def _session_options() -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    # Fatal only: a run ORT refuses (a dynamic size the model cannot take, retried with the next)
    # raises with ORT's message, which graphfix reports; ORT's own log would print it again.
    # The original's runs overlap the passes: idle ORT threads that spin would take their CPU.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def _session(model: onnx.ModelProto, providers: list[str], label: str, *,
             reference: bool = False) -> Any:
    try:
        return model_io.ort_session(
            model, optimization="disabled", providers=providers, options=_session_options()
        )
    except Exception as err:  # noqa: BLE001 - ORT raises several unrelated types
        raise ValidationInputError(
            f"ONNX Runtime cannot load the {label}: {first_line(err)}",
            hint="parity needs both models to run on ONNX Runtime (optimize skips it with "
            "--no-verify)" if reference else None,
        ) from None


# Random ops whose draw depends on nothing but a shape, a type and their attributes: their
# outputs can be fed to both models. A Dropout in training mode, Bernoulli and Multinomial
# compute from their input's values, which feeding their output would leave unchecked.
_PURE_DRAWS = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike",
                         "RandomUniformLike"})


def _draw_key(node: onnx.NodeProto) -> tuple[str, ...]:
    """What a draw is besides its seed: its op and its attributes (a rewrite that changed its
    mean, scale or shape is not given the reference's draws)."""
    return (node.domain or "ai.onnx", node.op_type, *sorted(
        a.SerializeToString(deterministic=True).hex() for a in node.attribute
        if a.name != "seed"))


def _draws(model: onnx.ModelProto) -> dict[str, tuple[str, ...]]:
    """The outputs of the main graph's random nodes, which parity feeds both models alike, and
    what each draw is (:func:`_draw_key`); none where a random node is inside a body (its draws
    cannot be fed) or computes from its input's values (:data:`_PURE_DRAWS`)."""
    top = [n for n in model.graph.node if is_random(n)]
    if len(top) != sum(1 for n in all_nodes(model.graph) if is_random(n)) or any(
            n.domain not in ("", "ai.onnx") or n.op_type not in _PURE_DRAWS for n in top):
        return {}
    return {name: _draw_key(node) for node in top for name in node.output if name}


def _session_exposing(model: onnx.ModelProto, draws: Sequence[str], providers: list[str],
                      label: str) -> Any:
    """The reference's session, its ``draws`` given as outputs after the graph's own (added
    for the session's creation only: the model is given back as it was)."""
    present = {o.name for o in model.graph.output}
    added = [name for name in draws if name not in present]
    model.graph.output.extend(onnx.ValueInfoProto(name=name) for name in added)
    try:
        return _session(model, providers, label, reference=True)
    finally:
        for _ in added:
            del model.graph.output[-1]


def _pinned(candidate: onnx.ModelProto, ref: ReferenceOutputs
            ) -> tuple[onnx.ModelProto | None, str | None]:
    """A copy of ``candidate`` given the reference's draws: each of its random nodes, which
    must be one of the reference's (same output name, op and attributes), reads an input of
    its output's name instead, through ``Reshape(draw, Shape(x))`` where it drew in the shape
    of ``x`` (so that a draw of another shape fails, or moves the outputs); None, and why,
    where its random nodes are not the reference's."""
    top = [n for n in candidate.graph.node if is_random(n)]
    if len(top) != sum(1 for n in all_nodes(candidate.graph) if is_random(n)):
        return None, "draws random numbers inside a body"
    strays = sorted({name for n in top for name in n.output
                     if name and ref.draws.get(name) != _draw_key(n)})
    if strays:
        return None, (f"draws random numbers the original's random nodes do not draw (or not "
                      f"under those names: {', '.join(map(repr, strays[:3]))})")
    sample = ref.runs[0][0] if ref.runs else {}
    pinned = onnx.ModelProto()
    pinned.CopyFrom(candidate)
    nodes: list[onnx.NodeProto] = []
    fed: list[str] = []
    taken = {*ref.draws, *(name for n in pinned.graph.node for name in n.output)}
    for node in pinned.graph.node:
        if not is_random(node):
            nodes.append(node)
            continue
        draw = node.output[0]
        fed.append(f"{draw}.draw")
        if node.op_type.endswith("Like"):
            shape = f"{draw}.shape"
            nodes.append(onnx.helper.make_node("Shape", [node.input[0]], [shape]))
            nodes.append(onnx.helper.make_node("Reshape", [fed[-1], shape], [draw]))
        else:
            nodes.append(onnx.helper.make_node("Identity", [fed[-1]], [draw]))
    if any(name in taken for name in fed) or any(
            f"{name[:-5]}.shape" in taken for name in fed):
        return None, "has tensors named as parity would name the draws it feeds"
    del pinned.graph.node[:]
    pinned.graph.node.extend(nodes)
    for name in fed:
        elem = onnx.helper.np_dtype_to_tensor_dtype(np.asarray(sample[name[:-5]]).dtype)
        pinned.graph.input.append(onnx.helper.make_tensor_value_info(name, elem, None))
    return pinned, None


def _signature_problems(
    ref_out: list[str], ref_in: dict[str, str], cand_session: Any, names: tuple[str, str],
    retyped: set[str] | None = None,
) -> list[str]:
    """What the candidate's signature (from its session) changed against the reference's
    output names and input types."""
    reference, candidate = names
    problems = []
    cand_out = [o.name for o in cand_session.get_outputs()]
    extra = [n for n in cand_out if n not in ref_out]
    if extra:
        problems.append(f"outputs only in the {candidate}: {', '.join(map(repr, extra))}")
    common = [n for n in ref_out if n in cand_out]
    if common != [n for n in cand_out if n in ref_out]:
        problems.append(f"the {candidate} lists its outputs in another order")
    cand_in = [item.name for item in cand_session.get_inputs()]
    missing = [n for n in ref_in if n not in cand_in]
    if missing:  # a caller feeding the reference's inputs would be refused
        problems.append(f"the {candidate} lacks an input the {reference} takes: "
                        f"{', '.join(map(repr, missing))}")
    for item in cand_session.get_inputs():
        if item.name not in ref_in:
            problems.append(f"the {candidate} takes an input the {reference} lacks: "
                            f"{item.name!r}")
        elif item.type != ref_in[item.name] and item.name not in (retyped or ()):
            problems.append(
                f"input {item.name!r} is {item.type} in the {candidate}, "
                f"{ref_in[item.name]} in the {reference}"
            )
    return problems


def _lowered_tolerances(candidate: onnx.ModelProto,
                        tolerances: Mapping[str, Tolerance] | None) -> Mapping[str, Tolerance] | None:
    """Outputs the candidate computed through float16 or bfloat16 while their type stayed float32
    (its ``graphfix.precision`` record) are judged at that type's defaults; a tolerance the user
    gave, for the output or for every output, still wins."""
    lowered = precision_module.tolerance_dtypes(candidate)
    if not lowered:
        return tolerances
    merged = dict(tolerances or {})
    every = merged.get("*", (None, None))
    for name, dtype in lowered.items():
        if name not in merged:
            atol, rtol = default_tolerance(dtype)
            merged[name] = (every[0] if every[0] is not None else atol,
                            every[1] if every[1] is not None else rtol)
    return merged


def _check_tolerance_names(tolerances: Mapping[str, Tolerance] | None, outputs: list[str]) -> None:
    unknown = sorted(set(tolerances or {}) - set(outputs) - {"*"})
    if unknown:
        raise ValidationInputError(
            f"a tolerance is given for {', '.join(map(repr, unknown))}, which the model does "
            "not output", hint=f"its outputs are {', '.join(map(repr, outputs))}")


def _generated_run(
    session: Any,
    specs: Sequence[feeds_module.InputSpec],
    run: int,
    seed: int,
    input_shapes: Mapping[str, Sequence[int]] | None,
    notes: list[str],
    name: str = "original",
    sizes: feeds_module.TensorSizes | None = None,
    also: Callable[[Feeds], object] | None = None,
) -> tuple[Feeds, list[Any]]:
    """Generated inputs for ``run`` that the reference accepts (:func:`graphfix.feeds.
    search_sizes`; ``sizes``: the model's tensor sizes, where a size past the first is not run
    when it would compute a tensor over :data:`graphfix.feeds.MAX_TENSOR_BYTES`; ``also``: a
    run of another model that must take the set too), and its outputs; a note says which
    sizes it rejected first."""
    if not session.get_outputs():  # no size would help
        raise ValidationInputError(f"the {name} declares no outputs: it computes nothing to "
                                   "run or compare",
                                   hint="list the tensors it should return in graph.output")

    def attempt(feed: Feeds) -> list[Any]:
        if also is not None:  # first: the model a search has to fit fails fast
            also(feed)
        return session.run(None, _for(session, feed))

    found = feeds_module.search_sizes(specs, run, attempt, seed=seed, input_shapes=input_shapes,
                                      sizes=sizes)
    tried, error = found.rejected, found.error
    if found.feed is not None:
        if tried:
            shown_sizes = "; ".join(tried[:3]) + (
                f"; and {len(tried) - 3} more" if len(tried) > 3 else "") + (
                f"; then {found.swept}" if found.swept else "")
            notes.append(
                f"run {run}: the {name} rejects {shown_sizes} ({first_line(error)}); "
                f"checked at {_shapes(found.feed)} only"
            )
        return found.feed, found.outputs
    if not tried and isinstance(error, ValidationInputError):
        raise error
    not_run = "" if not found.too_large else (
        f"; {found.too_large} larger not run, over "
        f"{feeds_module.MAX_TENSOR_BYTES / 2**30:g} GiB by estimate")
    raise ValidationInputError(
        f"ONNX Runtime cannot run the {name} on generated inputs at any size tried{not_run} "
        f"({'; '.join(tried)}): {first_line(error)}",
        hint="give real inputs with --inputs (sizes stay dynamic) or sizes with "
             "--input-shape (optimize writes them fixed" + (
                 "; --no-verify skips the check)" if name == "original" else ")"),
    )


def _at_sizes_of(session: Any, specs: Sequence[feeds_module.InputSpec], run: int, seed: int,
                 first: Feeds) -> tuple[Feeds, list[Any]] | None:
    """Input set ``run`` drawn at the shapes of ``first`` (a set the model ran on), and its
    outputs; None where the model does not run on it either."""
    shapes = {name: list(np.shape(value)) for name, value in first.items()
              if isinstance(value, np.ndarray)}
    try:
        feed = feeds_module.make_feed_set(specs, run, seed=seed + run, input_shapes=shapes)
        return feed, session.run(None, _for(session, feed))
    except Exception:  # noqa: BLE001 - the search's own error is the one to report
        return None


def generated_feeds(model: onnx.ModelProto, *, seed: int = 0,
                    input_shapes: Mapping[str, Sequence[int]] | None = None,
                    name: str = "model", also: Callable[[Feeds], object] | None = None,
                    also_model: onnx.ModelProto | None = None) -> Feeds:
    """One set of generated inputs that ``model`` accepts: with dynamic sizes, the first sizes
    of parity's ladders that ONNX Runtime runs it at (an audio front end needs hundreds of
    samples, a U-Net multiples of 32), tried on a session with optimizations off. ``also``
    runs ``also_model`` on each set tried, raising where that one refuses its sizes, and the
    sizes baked into its Reshapes are tried too: the set is one both take (a model with its
    attention fused runs at any length, the one it is compared with only at the length an
    exporter baked into its Reshapes)."""
    specs = feeds_module.input_specs(model)
    if not any(s.dynamic for s in specs if s.name not in (input_shapes or {})):
        return feeds_module.make_feed_set(specs, 0, seed=seed, input_shapes=input_shapes)
    if also_model is not None:
        specs = feeds_module.with_baked(specs, also_model)
    session = _session(model, ["CPUExecutionProvider"], name)
    feed, _ = _generated_run(session, specs, 0, seed, input_shapes, [], name,
                             feeds_module.TensorSizes(model), also=also)
    return feed


def _run_reference(session: Any, feed: Feeds, _: Any) -> list[Any]:
    try:
        return session.run(None, _for(session, feed))
    except Exception as err:  # noqa: BLE001
        raise ValidationInputError(
            f"ONNX Runtime cannot run the original model on the given inputs: {first_line(err)}",
            hint="check the inputs against `graphfix inspect`",
        ) from None


def _check_repeatable(session: Any, first: tuple[Feeds, list[Any]], random: list[str],
                      name: str) -> None:
    """Run the model with random ops again on its first inputs; refuse when an output changed
    (no rewrite can be judged against a model that does not repeat itself)."""
    feed, outputs = first
    again = _run_reference(session, feed, None)
    for before, after in zip(outputs, again):
        if not identical(before, after):
            raise ValidationInputError(
                f"the {name}'s outputs change from run to run on the same inputs (random ops: "
                f"{', '.join(random)}): parity cannot judge a rewrite of it",
                hint="optimize it without the check (--no-verify, verify=False), or export it "
                     "in inference mode")


def identical(a: Any, b: Any) -> bool:
    """Whether two outputs hold the same values bit for bit: dtype, shape and every element,
    NaN equal to NaN."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


def _for(session: Any, feed: Feeds) -> Feeds:
    """The part of ``feed`` this session takes (an optimized model may need fewer inputs), its
    inputs with a default value included."""
    wanted = _takes(session)
    return {name: value for name, value in feed.items() if name in wanted}


def _takes(session: Any) -> set[str]:
    """The names a session takes: its inputs, those with a default value included."""
    return {i.name for i in (*session.get_inputs(), *session.get_overridable_initializers())}


# The most bytes of other values parity feeds to a model's inputs that have a default value.
OVERRIDDEN_MAX_BYTES = 64 * 2**20


def _other_defaults(model: onnx.ModelProto, session: Any, seed: int
                    ) -> dict[str, np.ndarray] | None:
    """Other values for the float inputs of ``model`` that have a default value (those ONNX
    Runtime lets a caller override): each default moved by a quarter to a half of its
    magnitude (at least 0.25), so that a rewrite that took the default for a constant shows.
    None past :data:`OVERRIDDEN_MAX_BYTES` in all (they are then checked at their defaults
    only, and a note says so)."""
    names = {i.name for i in session.get_overridable_initializers()}
    if not names:
        return {}
    floats = [t for t in model.graph.initializer if t.name in names and t.data_type in (
        onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16)]
    if sum(model_io.tensor_bytes(t) for t in floats) > OVERRIDDEN_MAX_BYTES:
        return None
    rng = np.random.default_rng(seed + 7919)
    moved: dict[str, np.ndarray] = {}
    for tensor in floats:
        value = model_io.tensor_value(tensor)
        if value is None:
            continue
        step = rng.uniform(0.25, 0.5, value.shape) * np.maximum(np.abs(value), 1.0)
        moved[tensor.name] = (value + step).astype(value.dtype)
    return moved


def _compare_overridden(ref: ReferenceOutputs, cand_session: Any, moved: layout_module.Layout,
                        tolerances: Mapping[str, Tolerance] | None, names: tuple[str, str],
                        result: ParityResult, problems: list[str], candidate: onnx.ModelProto,
                        reference: onnx.ModelProto) -> None:
    """The candidate on the reference's set with other values for its inputs that have a
    default value, where it still takes them all (``remove-initializer-inputs`` drops them
    on purpose): a problem where an output differs, a note where none does."""
    assert ref.overridden is not None
    given = sorted(set(ref.overridden[0]) - set(ref.inputs) - set(ref.draws))
    if not set(given) <= _takes(cand_session):
        return
    scratch, failures = ParityResult(True, []), []
    by_name = _compare_runs(dataclasses.replace(ref, runs=[ref.overridden]), cand_session,
                            moved, tolerances, names[1], scratch, failures, None, 0, candidate,
                            reference)
    named = ", ".join(map(repr, given[:5])) + (f" and {len(given) - 5} more"
                                              if len(given) > 5 else "")
    failed = [o for o in by_name.values() if not o.passed]
    if failures or failed:
        problems.append(f"with other values fed to the inputs that have a default value "
                        f"({named}), " + ("; ".join(failures) or (
                            f"output {failed[0].name!r} of the {names[1]} differs from the "
                            f"{names[0]}'s ({failed[0].reason})")))
    else:
        result.notes.append(f"the inputs that have a default value ({named}) were fed other "
                            "values too: the outputs match")


def _tolerance(tolerances: Mapping[str, Tolerance] | None, name: str) -> Tolerance | None:
    """The output's own tolerance, with parts it leaves unset taken from ``*``."""
    if not tolerances:
        return None
    own, every = tolerances.get(name), tolerances.get("*")
    if own is None or every is None:
        return own if own is not None else every
    return (own[0] if own[0] is not None else every[0], own[1] if own[1] is not None else every[1])


_shapes = feeds_module.describe_shapes


def _dtype_name(value: Any) -> str:
    return "sequence" if isinstance(value, list) else str(np.asarray(value).dtype)


# --------------------------------------------------------------------------------------------
# For a terminal


def format_parity(parity: dict[str, Any]) -> str:
    """The outputs of a parity check (``ParityResult.to_dict()``) as a table, then the verdict."""
    rows = []
    marked = False  # figures over the finite elements only, where NaN or Inf moved
    for o in parity.get("outputs", []):
        mark = "*" if not o["passed"] and re.search(r"\b(NaN|Inf)\b", o.get("reason") or "") \
            else ""
        marked = marked or bool(mark)
        rows.append([
            o["name"],
            f"{o['dtype']}{o['shape'] if o.get('shape') is not None else ''}",
            num(o.get("max_abs_error")) + mark,
            num(o.get("max_rel_error")) + mark,
            num(o.get("cosine")) if o.get("cosine") is not None else "-",
            percent(o.get("tolerance_used")),
            "ok" if o["passed"] else "FAIL",
        ])
    lines = table(rows, ["output", "type", "max abs", "max rel", "cosine", "of tol", ""]) if rows else []
    if marked:
        lines.append("* over the elements finite in both models; NaN or Inf moved (below)")
    for index, run in enumerate(parity.get("runs", [])):
        shapes = ", ".join(f"{name} {desc}" for name, desc in run.items())
        lines.append(f"run {index}: {shapes or 'no inputs'}")
    lines += [f"note: {note}" for note in parity.get("notes", [])]
    if parity.get("problem"):
        lines.append(f"problem: {parity['problem']}")
    for o in parity.get("outputs", []):
        if not o["passed"]:
            lines.append(f"{o['name']}: {o['reason']}")
    verdict = "parity holds" if parity.get("passed") else "parity FAILED"
    if parity.get("passed") and parity.get("outputs") and \
            len(parity.get("empty_outputs") or ()) == len(parity["outputs"]):
        verdict = "parity holds only vacuously (every output empty, only zeros or only NaN)"
    lines.append(f"{verdict} ({parity.get('seconds', 0):.1f}s on {parity.get('provider')})")
    return "\n".join(lines)
