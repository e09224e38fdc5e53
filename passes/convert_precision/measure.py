"""Choosing the float32 islands by measured error.

How the error is estimated
--------------------------
ONNX Runtime's CPU provider has few float16 kernels: it computes most float16 ops through
Casts it inserts (float16 -> float32, the op, float32 -> float16), so on the CPU a float16
model's error is the rounding of every tensor to float16, not float16 arithmetic. The estimate
here is that same quantity, measured on float32 graphs with ONNX Runtime (optimizations off):

- the error of an assignment: :func:`~rewrite.emulate` rounds every tensor the lowered nodes
  read or write (``Cast`` to the lowered type and back) and computes each op in float32;
  every float32 tensor of the graph is exposed as an output and compared with the float32
  original's, so each tensor's error is known, not only the outputs';
- each node's own error: :func:`~rewrite.shadow` runs a copy of every node that computes on
  its inputs rounded from the original's exact values, its outputs rounded.

Errors are in units of the lowered type's parity tolerance, as parity measures an output
(``|cand - ref| / (atol * RMS(ref) + rtol * |ref|)``, worst element; NaN or Inf appearing is
infinite). What this leaves out is arithmetic inside an op done in float16 (sums of float16
products, a float16 exponent); on GPUs matrix products and convolutions accumulate in float32
(cuBLAS and cuDNN's default for float16), and ``tools/precision_estimate.py`` checks the
estimate against a true float16 run (onnx's reference evaluator, which computes each op in
numpy float16). bfloat16 has no ONNX Runtime CPU kernels at all: its error is only known
through this estimate on a CPU.

The search
----------
1. Start: nodes that cannot be lowered stay float32 (their schema, a subgraph); of the ops
   known to overflow or lose precision (:data:`~ops.RISKY_OPS`; not a Div by constants of
   magnitude one or more, which only scales down), those whose own error exceeds a quarter of
   the tolerance stay float32: the start set shrinks to where its risk is
   measured. So do the compute nodes of any type whose output comes within
   :data:`RANGE_HEADROOM` of the lowered type's largest value on the measured inputs
   (float16's 65504: a softmax written without its max subtracted sums to 2e4 on inputs in
   [-1, 1] and overflows at 1; a MatMul at 4e4 overflows on inputs 1.6x larger), whatever
   their own error, with what would read that output, or a graph input given near the range,
   in the lowered type (nodes that move it, and nodes that compute with it, on until their own
   output is away from the range), since a Cast at an island's border overflows as surely.
   The magnitudes come from the first run: read as one scalar per node that sums, multiplies
   or exponentiates, bounded from the inputs' for element-wise ops (and read whole where that
   bound comes near the range). A
   magnitude that inputs do not grow is no such risk: a value computed element by element
   from constants and integer inputs (an attention mask's fill, an embedding's rows; not a
   sum over them, which a longer sequence makes larger, nor sizes), or the sum or selection
   of such a value at least half as large as its output (scores plus the fill).
   Integers carried in float into an op that needs them exact
   (:attr:`~analysis.Analysis.from_integers`: positions times frequencies into a Sin or Cos,
   half a length cast back to an integer) stay float32, the whole way, where those integers
   exceed one and change between the measured input sets (each gives every dynamic dimension
   another size) or come from an integer input's values: the lowered type holds integers
   exactly only up to 2048 (bfloat16: 256), far past parity's sizes and generated integers. A
   size the model fixes (a head size read through Shape) is a constant and is lowered.
   A node's own error alone does not keep it: an attention mask's -3.4e38 saturates
   at -65504, an error without consequence downstream where a row keeps one position (the
   inputs generated for parity always do); the outputs decide (step 2).
2. Measure the assignment. While an output's error exceeds half its tolerance (the other half
   is headroom for inputs the measurement did not see), follow the error back from each such
   output through the tensors whose error exceeds that bar, to the nodes where it starts
   (inputs within the bar, output beyond it). A lowered node there goes back to float32; a
   float32 node there (it amplifies the rounding of its inputs) sends the nearest lowered
   nodes that compute its inputs back instead. Measure again.
   When an error builds up over many nodes it has no single origin: while a round does not
   lower the worst output's error by a tenth, or tracing finds no origin not already float32,
   the lowered ancestors of the failing outputs with the largest own error go back too, two,
   then four, eight, ... at each such round, matrix products last (:data:`~ops.MATRIX_OPS`):
   an error that a residual stream builds, rounded at every layer, is held by keeping the
   additions and normalizations that carry it, while the products, where the lowered type
   pays, stay lowered (BERT-base: 93 of 96 MatMuls lowered, where the largest own errors first
   kept 84 of them in float32); the count does not start again at two when a
   round makes progress, so that an error spread over hundreds of nodes (an OCR recognizer's
   long sequence of convolutions) is contained within the rounds. Once a round has failed,
   the next ones are measured with every tensor exposed (one session each).
   The error is traced through integer tensors too: indices computed from floats (T5's
   relative-position buckets) move when a rounding crosses an integer, and the lowered nodes
   that compute those floats go back together. A lowered node that only moves values (an
   embedding's Gather) where an error starts goes back with its weights.
3. Every assignment measured is first rid of the lowered groups that do not pay for the
   Casts at their borders (:mod:`.economics`: a lone Add between two float32 neighbours);
   their nodes stay float32, with that reason.
4. Give back. The nodes step 2b kept on their own error alone, twice as many each time, can
   be more than the outputs need: those with the smallest own error are lowered again while
   every output stays within the bar, the largest such share searched by halves in
   :data:`GIVE_BACK_ROUNDS` measurements at most (each assignment taken measured within it).
5. After :data:`MAX_ROUNDS` rounds, or when no node is left to blame, the search gives up;
   so it does at once when tracing would hold more than :data:`MAX_TRACE_BYTES` of tensors.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx

from graphfix import feeds as feeds_module
from graphfix import graph as graph_layer
from graphfix.errors import PassError
from graphfix.model_io import skeleton, tensor_value
from .._measuring import Feeds, Runner, run_outputs, session, tolerance_used
from . import economics, ops
from .analysis import FLOAT, Analysis
from .rewrite import Shadow, emulate, expose, expose_peaks, shadow

__all__ = ["Measured", "Search", "SearchResult", "tensor_types", "OUTPUT_BUDGET", "LOCAL_RISKY",
           "MAX_ROUNDS"]

logger = logging.getLogger(__name__)

OUTPUT_BUDGET = 0.5  # of the tolerance, for every output on the measured inputs
LOCAL_RISKY = 0.25  # own error above which a node of a risky op type stays float32
# A compute node whose output comes within this factor of the lowered type's largest
# value on the measured inputs stays float32: inputs the measurement did not see (an image in
# 0-255, a longer sequence) overflow it where these did not.
RANGE_HEADROOM = 16.0
MAX_ROUNDS = 24
GIVE_BACK_ROUNDS = 8  # measurements spent lowering again what step 2b kept on rank alone
# The most bytes of tensors tracing an error back may hold: every float tensor of the model on
# each input set, the original's and the assignment's (a U-Net on 1024 x 1024 images held 24
# GB, and the system killed the process). Past it the search does not trace (step 5).
MAX_TRACE_BYTES = 4 * 2**30
_BOOL = onnx.TensorProto.BOOL
# Element-wise ops whose output's magnitude is bounded by their inputs': the sum of theirs, the
# product, the largest, or one. Their magnitudes are bounded, not read (read where the bound
# comes near the range).
_BOUNDED: dict[str, str] = {
    **dict.fromkeys(("Add", "Sub", "Sum"), "sum"),
    "Mul": "product",
    **dict.fromkeys(("Sigmoid", "Tanh", "Erf", "Sin", "Cos", "Softsign", "HardSigmoid"), "one"),
    **dict.fromkeys(("Relu", "LeakyRelu", "Abs", "Neg", "Max", "Min", "Clip", "Where",
                     "Identity", "Cast", "Gelu", "HardSwish", "Mish", "Elu", "Floor", "Ceil",
                     "Round"), "largest"),
}
# Ops that add or select a value: where one input is as large as the output, the output's
# magnitude is that input's.
_OFFSETS = frozenset({"Add", "Sub", "Where", "Max", "Min", "Sum"})

class TraceTooLarge(PassError):
    """Tracing an error back would hold more tensors than :data:`MAX_TRACE_BYTES`."""


@dataclasses.dataclass
class Measured:
    """One assignment's errors: per tensor (in tolerance units, worst feed set)."""

    errors: dict[str, float]
    outputs: dict[str, float]

    def failing(self, budget: float) -> list[str]:
        return [name for name, error in self.outputs.items() if error > budget]


@dataclasses.dataclass
class SearchResult:
    """The chosen assignment: ``low`` the lowered nodes, ``kept`` each float32 node's reason,
    ``measured`` its errors; ``rounds`` measured assignments; ``failed`` why the search gave
    up (``low`` is then empty)."""

    low: frozenset[int]
    kept: dict[int, str]
    measured: Measured | None
    rounds: int
    local: dict[int, float]
    failed: str | None = None
    unpaid: frozenset[int] = frozenset()  # of ``kept``, those kept where lowering did not pay


@dataclasses.dataclass
class _Measuring:
    """A run of the original that measures: ``todo`` the nodes whose own error it measures
    (``built``: the original with their shadows), ``peaks`` the magnitudes it reads (tensor ->
    its scalar output), ``carried`` the integers carried in float, ``names`` what it fetches.
    Each feed set runs once: the run made for a set (a size search's) is kept for it."""

    todo: list[int]
    built: Shadow
    peaks: dict[str, str]
    carried: set[str]
    names: list[str]
    _made: list[tuple[Feeds, dict[str, np.ndarray]]] = dataclasses.field(default_factory=list)
    _runner: Runner | None = None

    def run(self, feed: Feeds) -> dict[str, np.ndarray]:
        for given, made in self._made:
            if given is feed:
                return made
        if self._runner is None:
            self._runner = Runner(self.built.model, self.names)
        made = self._runner(feed)
        self._made.append((feed, made))
        return made


class Search:
    """The search of the module docstring, for ``analysis`` on ``feeds``."""

    def __init__(self, analysis: Analysis, feeds: Sequence[Feeds], tolerance: tuple[float, float],
                 *, io_low: bool = False, budget: float = OUTPUT_BUDGET,
                 max_rounds: int = MAX_ROUNDS, weigh_casts: bool = True) -> None:
        self.analysis, self.feeds = analysis, list(feeds)
        self.weigh_casts = weigh_casts
        self.atol, self.rtol = tolerance
        self.io_low, self.budget, self.max_rounds = io_low, budget, max_rounds
        # What an error is traced through: float tensors, and integer ones (indices a float16
        # rounding moved) to follow back to the floats they come from.
        self.tensors = analysis.tensors()
        # The original's values on each input set: its outputs, and every float tensor once
        # an assignment fails and its error is traced (``_full``).
        self.reference: list[dict[str, np.ndarray]] = []
        self._full = False
        self.local: dict[int, float] = {}
        self.peak: dict[int, float] = {}  # largest finite magnitude of a node's outputs
        self._data: set[str] | None = None  # tensors whose magnitude can grow
        # the largest constant each tensor that does not grow is computed from
        self._bounds = _Bounds(self)
        self.tensor_peak: dict[str, float] = {}  # each tensor's largest finite magnitude
        # position -> the tensor the first run reads an Attention's inner scores from
        self.scores: dict[int, str] = {}
        self._dynamic: bool | None = None  # whether the model has a dynamic dimension
        self._first: _Measuring | None = None  # the first run, once built
        self._plain: Runner | None = None  # the original, where the first run fails
        self._trace: str | None | bool = False  # why tracing is too large (False: not asked)
        self.largest = float(np.finfo(onnx.helper.tensor_dtype_to_np_dtype(
            analysis.low)).max) if analysis.low == onnx.TensorProto.FLOAT16 else math.inf

    def measure_local(self, positions: Sequence[int]) -> None:
        """The own error of each node of ``positions`` (one run of the original with their
        shadows); the first run also reads the original's outputs (the reference), the
        integers carried in float, and the magnitude each compute node reaches."""
        todo = [p for p in positions if p not in self.local]
        if not todo and self.reference:
            return
        first = not self.reference
        measuring = self._first if first and self._first is not None and (
            self._first.todo == todo) else self._measuring(todo, first=first)
        todo, built, peaks, carried = (measuring.todo, measuring.built, measuring.peaks,
                                       measuring.carried)
        runs = [measuring.run(feed) for feed in self.feeds]
        self._first = None  # its runs are read below, and let go with this call's
        if first:
            exact = []  # read whole: an infinity among the values, or a bound near the range
            for run in runs:
                for name in set(self.analysis.outputs) & run.keys():
                    self.tensor_peak[name] = max(self.tensor_peak.get(name, 0.0),
                                                 _peak(run[name]))
                for name, scalar in peaks.items():
                    value = float(run[scalar]) if scalar in run else 0.0
                    if not math.isfinite(value):
                        exact.append(name)  # an infinity (a mask's fill): the finite peak
                    self.tensor_peak[name] = max(self.tensor_peak.get(name, 0.0), value)
            for position in self.analysis.compute_nodes():
                node = self.analysis.node(position)
                rule = self._bound_rule(node)
                if rule is None or any(n in self.tensor_peak for n in node.output if n):
                    continue
                bound = rule([self._value_peak(n) if n and self.analysis.types.get(n) == FLOAT
                              else 0.0 for n in node.input])
                for name in node.output:
                    if name and name not in self.tensor_peak:
                        self.tensor_peak[name] = bound
                        if self.near_range(bound):
                            exact.append(name)
            if exact:
                again = emulate(self.analysis, frozenset())
                for name in exact:
                    self.tensor_peak[name] = 0.0
                for run in run_outputs(again, self.feeds, expose(again, exact)):
                    for name in set(exact) & run.keys():
                        self.tensor_peak[name] = max(self.tensor_peak[name], _peak(run[name]))
            kept = {*self.analysis.outputs, *carried}
            self.reference = [{k: v for k, v in run.items() if k in kept} for run in runs]
            for position in self.analysis.compute_nodes():
                self.peak[position] = max((self.tensor_peak.get(name, 0.0)
                                           for name in self.analysis.node(position).output),
                                          default=0.0)
            for position, scores in self.scores.items():  # what an Attention holds inside
                self.peak[position] = max(self.peak.get(position, 0.0),
                                          self.tensor_peak.get(scores, 0.0))
        for position in todo:
            worst = peak = 0.0
            for run in runs:
                for exposed, original in built.outputs[position]:
                    if exposed in run and original in run:
                        worst = max(worst, tolerance_used(run[original], run[exposed],
                                                          self.atol, self.rtol))
                        peak = max(peak, _peak(run[original]))
            self.local[position] = worst
            self.peak[position] = max(peak, self.tensor_peak.get(
                self.scores.get(position, ""), 0.0))

    def _measuring(self, todo: list[int], *, first: bool) -> _Measuring:
        """The run that measures the own error of each node of ``todo``; the first one also
        reads the outputs, the integers carried in float, and the magnitudes."""
        built = shadow(self.analysis, todo)
        pairs = [pair for position in todo for pair in built.outputs[position]]
        shadows = {name for name, _ in pairs}
        carried = {name for origin in self.analysis.from_integers.values() for name in origin}
        # The magnitudes of the nodes a bound from their inputs' cannot give (a sum over many
        # terms, an exponential) are read in this run, as scalars; the others are bounded.
        read: set[str] = set()
        if first:
            # a bound from a large constant (a mask's fill) would come near the range: read
            data, big = self._data_dependent(), self.largest / RANGE_HEADROOM / 2
            for position in self.analysis.compute_nodes():
                node = self.analysis.node(position)
                if self._bound_rule(node) is None or any(
                        n and n not in data and self._bounds[n] >= big for n in node.input):
                    read.update(n for n in node.output
                                if n and self.analysis.types.get(n) == FLOAT)
            read.update(self._expose_scores(built.model))
        peaks = expose_peaks(built.model, sorted(read - set(self.analysis.outputs)))
        names = expose(built.model, [*self.analysis.outputs, *carried,
                                     *(original for _, original in pairs), *shadows])
        return _Measuring(todo, built, peaks, carried, [*names, *peaks.values()])

    def _expose_scores(self, model: onnx.ModelProto) -> list[str]:
        """The scores ``Q K^T`` inside each opset-23 ``Attention`` of ``model`` (the
        measuring copy: its main-graph nodes at the analysis's positions) made an output of
        their own (``qk_matmul_output``), so that the first run reads their magnitude as the
        node's: a node's outputs are measured, and an Attention's scores are not one (they
        overflow float16 while its output, a weighted mean of V, stays small)."""
        fresh = graph_layer.Names(graph_layer.all_names(model.graph))
        for position in self.analysis.compute_nodes():
            node = self.analysis.node(position)
            if node.op_type != "Attention" or node.domain not in ("", "ai.onnx") or any(
                    a.name == "qk_matmul_output_mode" and a.i != 0 for a in node.attribute):
                continue
            copy = model.graph.node[position]
            if len(copy.output) > 3 and copy.output[3]:
                self.scores[position] = copy.output[3]
                continue
            name = fresh.fresh(f"{node.name or 'attention'}_scores")
            copy.output.extend([""] * (3 - len(copy.output)) + [name])
            self.scores[position] = name
        return list(self.scores.values())

    def _first_measuring(self) -> _Measuring:
        """The search's first run (the risky nodes' own errors, the reference, the
        magnitudes; :meth:`run`'s first call of :meth:`measure_local`), built once."""
        if self._first is None:
            self._first = self._measuring(self._risky(), first=True)
        return self._first

    def _risky(self) -> list[int]:
        return [p for p in self.analysis.compute_nodes() if self.analysis.risk(p)]

    def try_sizes(self, feed: Feeds) -> None:
        """``feed`` through the search's first run, for :func:`~.._measuring.make_feeds`'s
        search of the sizes a dynamic dimension takes (it raises where the model rejects
        them): the run that finds a set's sizes is its first measurement. Where only that run
        fails, the original decides, so that the sets are parity's."""
        try:
            self._first_measuring().run(feed)
        except Exception:  # noqa: BLE001 - ORT refuses in many ways: the original decides
            if self._plain is None:
                self._plain = Runner(self.analysis.model, list(self.analysis.outputs))
            self._plain(feed)

    def trace_problem(self) -> str | None:
        """Why the error cannot be traced back here: the tensors it would hold at once are
        over :data:`MAX_TRACE_BYTES` (by ONNX's shape inference at the input sets' shapes;
        None where it cannot tell, or they are not)."""
        if self._trace is False:
            sizes = feeds_module.TensorSizes(self.analysis.model)
            total: int | None = 0
            for feed in self.feeds:
                shapes = {k: v.shape for k, v in feed.items() if isinstance(v, np.ndarray)}
                size = sizes.total(shapes, self.tensors) if shapes else None
                total = None if size is None or total is None else total + 2 * size
            self._trace = None if total is None or total <= MAX_TRACE_BYTES else (
                f"tracing the error back would hold {total / 2**30:.3g} GiB of tensors (every "
                f"float tensor of the original and of the lowered model on "
                f"{len(self.feeds)} input set(s)), over the {MAX_TRACE_BYTES / 2**30:g} GiB "
                f"graphfix lets it take")
        return self._trace if isinstance(self._trace, str) else None

    def _guard_trace(self) -> None:
        problem = self.trace_problem()
        if problem is not None:
            raise TraceTooLarge(problem)

    def _reference_tensors(self) -> None:
        """Every float tensor of the original, for tracing an error back (once)."""
        if self._full:
            return
        self._guard_trace()
        model = emulate(self.analysis, frozenset())
        runs = run_outputs(model, self.feeds, expose(model, self.tensors))
        self.reference = [{**run, **ref} for run, ref in zip(runs, self.reference)]
        self._full = True

    def tensor_errors(self, runs: Sequence[Mapping[str, np.ndarray]]) -> dict[str, float]:
        """Each tensor's error in ``runs`` (computed elsewhere, by the original's names)
        against the original's values, every float tensor of it read once for that."""
        self._reference_tensors()
        return self.errors_of(runs).errors

    def measure(self, low: frozenset[int], *, tensors: bool = False) -> Measured:
        """The errors of assignment ``low``: of the outputs, and with ``tensors`` of every
        float tensor."""
        if tensors:
            self._reference_tensors()  # raises TraceTooLarge first where it would not fit
        model = emulate(self.analysis, low, io_low=self.io_low)
        names = expose(model, self.tensors if tensors else [])
        return self.errors_of(run_outputs(model, self.feeds, names))

    def errors_of(self, runs: Sequence[Mapping[str, np.ndarray]]) -> Measured:
        """Each tensor's error in ``runs`` (one per input set; worst set) against the
        original's values."""
        errors: dict[str, float] = {}
        for reference, run in zip(self.reference, runs):
            for name, value in run.items():
                if name in reference:
                    error = tolerance_used(reference[name], value, self.atol, self.rtol)
                    errors[name] = max(errors.get(name, 0.0), error)
        return Measured(errors, {name: errors.get(name, 0.0) for name in self.analysis.outputs})

    def start(self) -> dict[int, str]:
        """Step 1: the nodes of risky op types that stay float32 on their own error, the
        compute nodes whose output comes near the lowered type's range, and what would read
        such an output, or a graph input near the range, in the lowered type."""
        kept: dict[int, str] = {}
        near: list[str] = []
        for position in self.analysis.compute_nodes():
            risky = self.analysis.risk(position)
            reasons = []
            error = self.local.get(position, 0.0)
            if risky and error > LOCAL_RISKY:
                reasons.append(f"its own error {_fmt(error)} of the tolerance")
            if self.near_range(self.peak.get(position, 0.0)) and not self._fixed_magnitude(
                    position, self.peak[position]):
                what = ("its scores (Q K^T, inside it)" if self.tensor_peak.get(
                    self.scores.get(position, ""), -1.0) >= self.peak[position] else "its output")
                reasons.append(f"{what} {self.reaches(self.peak[position])}")
                near += [n for n in self.analysis.node(position).output if n]
            if reasons:
                op = self.analysis.node(position).op_type
                kept[position] = (f"{op} {risky}; " if risky else f"{op}: ") + "; ".join(reasons)
        exact = 2048 if self.analysis.low == onnx.TensorProto.FLOAT16 else 256
        for position, origin in self.analysis.from_integers.items():
            if position not in kept and self._integers_change(origin):
                kept[position] = (f"carries integers (sizes, positions) to an op that needs "
                                  f"them exact; they change from one call to the next, and the "
                                  f"lowered type holds integers exactly only up to {exact}")
        if not self.io_low:  # a float32 input read lowered goes through a Cast at the border
            near += [name for name in sorted(self.analysis.inputs)
                     if self.analysis.types.get(name) == FLOAT and self.near_range(max(
                         (_peak(np.asarray(feed[name])) for feed in self.feeds
                          if name in feed), default=0.0))]
        if near:
            self._keep_readers(near, kept)
        return kept

    def _bound_rule(self, node: onnx.NodeProto) -> Callable[[list[float]], float] | None:
        """How the magnitude of ``node``'s output is bounded by its inputs' (given in input
        order, 0 for what is not a float), or None where it is not: element-wise ops
        (:data:`_BOUNDED`), a mean, largest or smallest element, a square root, a power by a
        constant exponent of 0 or more, a division by constants."""
        rule = _BOUNDED.get(node.op_type)
        if rule is not None:
            return {"one": lambda p: 1.0, "sum": sum, "product": math.prod,
                    "largest": lambda p: max(p, default=0.0)}[rule]
        if node.op_type in ("ReduceMean", "ReduceMax", "ReduceMin"):
            return lambda p: p[0]
        if node.op_type == "Sqrt":
            return lambda p: math.sqrt(p[0])
        constant = self.analysis._small_constant(node.input[1]) if len(node.input) > 1 else None
        if constant is None or not constant.size or not np.all(np.isfinite(constant)):
            return None
        if node.op_type == "Pow" and constant.size == 1 and float(constant.reshape(-1)[0]) >= 0:
            exponent = float(constant.reshape(-1)[0])
            return lambda p: _power(p[0], exponent)
        smallest = float(np.min(np.abs(constant.astype(np.float64))))
        if node.op_type == "Div" and smallest > 0:
            return lambda p: p[0] / smallest
        return None

    def _integers_change(self, origin: frozenset[str]) -> bool:
        """Whether the integers carried in float by ``origin`` can go past what was measured:
        taken from an integer input's values (but a 0/1 mask's), or different between the
        measured input sets (each gives every dynamic dimension another size), or, measured on
        one set (real inputs), in a model with a dynamic dimension. A size the model fixes (a
        head size read through Shape) is the same on every set: a constant read the long
        way."""
        if self._dynamic is None:
            self._dynamic = any(not isinstance(d, int) for spec in feeds_module.input_specs(
                self.analysis.model, values=False) for d in (spec.dims or [None]))
        dynamic = self._dynamic
        for name in origin:
            values = [np.asarray(run[name]) for run in self.reference if name in run]
            if not values:
                return True  # not measured: assume the worst
            if name in self.analysis.fed_by_inputs:
                if not all(np.isin(v, (0.0, 1.0)).all() for v in values):
                    return True
            elif (len(values) < 2 and dynamic) or any(
                    not np.array_equal(values[0], v) for v in values[1:]):
                return True
        return False

    def _fixed_magnitude(self, position: int, peak: float) -> bool:
        """Whether the node at ``position`` reaches ``peak`` by a constant's magnitude, which
        inputs do not grow (:meth:`_data_dependent`): its output is computed element by
        element from a constant at least half that large (an attention mask's fill from an
        integer mask, an embedding's rows; not an integer input's own values, a count cast to
        float), or it adds or selects such a value at least half as large as its output
        (scores plus that fill, which saturates in the lowered type and weighs nothing after
        the Softmax, as in the original)."""
        node = self.analysis.node(position)
        data = self._data_dependent()

        def fixed(name: str, size: float) -> bool:
            return bool(name) and name not in data and 2 * self._bounds[name] >= size

        if all(fixed(name, peak) for name in node.output if name):
            return True
        return node.op_type in _OFFSETS and any(
            fixed(name, peak) and 2 * self._value_peak(name) >= peak for name in node.input)

    def _data_dependent(self) -> set[str]:
        """Tensors whose magnitude can grow past what was measured: a float graph input's
        values, sizes (Shape, Size), what is computed element by element from those, and
        what a sum, product or convolution computes from anything but constants (a sum over
        a longer sequence is larger). Not the values of integer inputs picked or combined with
        constants element by element: an embedding's rows, a mask's fill."""
        if self._data is None:
            analysis = self.analysis
            data = {n for n in analysis.inputs if analysis.types.get(n) == FLOAT}
            constants = set(analysis.initializers)
            bounds = self._bounds  # filled here for what nodes compute (0 for an integer
            # input's own values), read lazily for weights
            for position in analysis.order:
                node = analysis.node(position)
                outputs = [n for n in node.output if n]
                names = [n for n in node.input if n]
                bodies = graph_layer.holds_graph(node)
                if node.op_type in ("Shape", "Size") or bodies:
                    data.update(outputs)  # sizes grow; a body's values are not followed
                    continue
                if names and all(n in constants for n in names) or node.op_type == "Constant":
                    constants.update(outputs)
                    for name in outputs:
                        bounds[name] = self._value_peak(name)
                    continue
                values = ops.value_inputs(node)
                if any(n in data for n in values) or node.op_type in ops.ACCUMULATING:
                    # a condition is true or false, whatever its inputs
                    data.update(n for n in outputs if analysis.types.get(n) != _BOOL)
                else:
                    bound = max((bounds[n] for n in values), default=0.0)
                    for name in outputs:
                        bounds[name] = bound
            self._data = data
        return self._data

    def _value_peak(self, name: str) -> float:
        """The largest finite magnitude of tensor ``name`` on the measured inputs, or of the
        weight or Constant it is; a node that only moves values (read in the first run only
        where a node computes) reaches at most what it reads."""
        if name in self.tensor_peak:
            return self.tensor_peak[name]
        analysis = self.analysis
        node = analysis.node(analysis.producer[name][0]) if name in analysis.producer else None
        constant = analysis.initializers.get(name) if node is None else (
            graph_layer.constant_tensor(node) if node.op_type == "Constant" else None)
        peak = 0.0
        if constant is not None:
            value = tensor_value(constant)
            peak = _peak(np.asarray(value)) if value is not None else 0.0
        elif node is not None and node.op_type != "Constant":
            self.tensor_peak[name] = 0.0  # a cycle guard; graphs have none
            peak = max((self._value_peak(n) for n in node.input
                        if n and analysis.types.get(n) == FLOAT), default=0.0)
        elif node is None:  # a graph input: the values fed
            peak = max((_peak(np.asarray(feed[name])) for feed in self.feeds if name in feed),
                       default=0.0)
        self.tensor_peak[name] = peak
        return peak

    def near_range(self, peak: float) -> bool:
        """Whether a magnitude comes within :data:`RANGE_HEADROOM` of the lowered type's
        largest value."""
        return peak * RANGE_HEADROOM > self.largest

    def output_peaks(self) -> dict[str, float]:
        """The largest finite magnitude of each float output of the original."""
        return {name: max(_peak(run[name]) for run in self.reference)
                for name in self.analysis.outputs
                if self.analysis.types.get(name) == FLOAT and self.reference
                and all(name in run for run in self.reference)}

    def unmeasured_outputs(self) -> list[str]:
        """The float outputs of the original that are empty (no element), only zeros or only
        NaN, in every input set: their error is not measured (a detector whose score threshold
        keeps nothing of generated inputs returns no box, in float32 or not; a head initialized
        to zero gives zeros; a logarithm of values below zero, NaN)."""
        floats = [name for name in self.analysis.outputs
                  if self.analysis.types.get(name) == FLOAT]
        return feeds_module.nothing_to_compare(self.reference, floats)

    def reaches(self, peak: float) -> str:
        where = ("past" if peak > self.largest else f"within {RANGE_HEADROOM:g}x of")
        return (f"reaches {peak:.3g} on the measured inputs, {where} the lowered type's "
                f"largest value ({self.largest:g})")

    def _keep_readers(self, near: Sequence[str], kept: dict[int, str]) -> None:
        """Keep float32 what would read the tensors ``near`` in the lowered type: a value near
        the type's range overflows in the Cast at an island's border as surely as in the
        node. The walk goes on from each reader whose own output is still near the range (a
        Reshape or Concat that moves the value, an Add that keeps its magnitude), judged on
        the original's magnitudes (read in the first run)."""

        peak = self._value_peak

        todo = list(near)
        seen: set[str] = set()
        while todo:
            name = todo.pop()
            if not name or name in seen or not self.near_range(peak(name)):
                continue  # values away from the range: lowered as the search decides
            seen.add(name)
            for use in self.analysis.uses.get(name, []):
                plan = self.analysis.plans[use.node]
                if plan.kind != "lowerable" or use.slot not in plan.low_inputs:
                    continue
                if use.node not in kept:
                    kept[use.node] = f"reads {name!r}, which {self.reaches(peak(name))}"
                todo += [n for n in self.analysis.node(use.node).output if n]

    def run(self, forced: Mapping[int, str] | None = None, *,
            first: Callable[[frozenset[int]], None] | None = None) -> SearchResult:
        """The search; ``forced`` nodes stay float32 from the start, with their reason.
        ``first`` is given the first assignment before it is measured (most searches end
        there: a caller starts what it will do with the result meanwhile)."""
        self.measure_local(self._risky())
        kept = {**self.start(), **(forced or {})}
        compute = set(self.analysis.compute_nodes())
        pinned = frozenset(kept) - compute  # movement nodes kept on request
        try:
            return self._search(kept, compute, pinned, first)
        except TraceTooLarge as error:
            return SearchResult(frozenset(), kept, None, 0, self.local,
                                failed=f"the first assignment misses the bar, and {error}")

    def _search(self, kept: dict[int, str], compute: set[int], pinned: frozenset[int],
                first: Callable[[frozenset[int]], None] | None) -> SearchResult:
        """Steps 2 to 5 of :meth:`run`."""
        measured = None
        previous: float | None = None
        stalls = 0
        by_rank: list[int] = []  # kept by step 2b, on their own error alone
        for round_index in range(1, self.max_rounds + 1):
            low, unpaid = self._assign(compute, kept, pinned)
            if round_index == 1 and first is not None:
                first(low)
            # Once an assignment failed, the next ones are measured with every tensor
            # exposed: one session gives both the verdict and what tracing needs.
            measured = self.measure(low, tensors=previous is not None)
            failing = measured.failing(self.budget)
            worst = max((measured.outputs[name] for name in failing), default=0.0)
            logger.debug("convert-precision round %d: %d nodes lowered, %d kept; failing: %s "
                         "(worst %s)", round_index, len(low), len(kept), failing, _fmt(worst))
            if not failing:
                return self._give_back(SearchResult(low, {**kept, **unpaid}, measured,
                                                    round_index, self.local,
                                                    unpaid=frozenset(unpaid)), kept, by_rank,
                                       pinned)
            if previous is None:
                measured = self.measure(low, tensors=True)  # to trace the error back
            # Step 2b: an error that builds up over many nodes has no single origin; while
            # tracing it back does not lower it by a tenth, the lowered ancestors with the
            # largest own error go back too, matrix products last, twice as many at each such
            # round of the search.
            stalled = previous is not None and not worst < 0.9 * previous  # inf stays inf
            stalls += stalled
            previous = worst
            blamed = {p: why for p, why in self.blame(measured, failing, low).items()
                      if p not in kept}
            if stalled or not blamed:  # no single origin left to trace: by own error
                self.measure_local(self.analysis.compute_nodes())
                ranked = self.ranked(failing, low, 2 ** max(stalls, 1), measured)
                by_rank += [p for p in ranked if p not in blamed]
                blamed.update(ranked)
            if not blamed:
                break
            kept.update(blamed)
        worst = max(measured.outputs.items(), key=lambda item: item[1]) if measured else None
        reason = (f"no assignment found within {self.max_rounds} rounds: output {worst[0]!r} "
                  f"stays at {_fmt(worst[1])} of the tolerance" if worst else "nothing measured")
        return SearchResult(frozenset(), kept, measured, self.max_rounds, self.local,
                            failed=reason)

    def _assign(self, compute: set[int], kept: Mapping[int, str], pinned: frozenset[int]
                ) -> tuple[frozenset[int], dict[int, str]]:
        """The assignment lowering the compute nodes not ``kept`` (the movement nodes placed
        by :meth:`~analysis.Analysis.resolve`), less the groups that do not pay for their
        Casts (:mod:`.economics`), and why those stay float32."""
        def resolve(compute_low: frozenset[int]) -> frozenset[int]:
            return self.analysis.resolve(compute_low, io_low=self.io_low, pinned=pinned)

        compute_low = frozenset(compute - set(kept))
        if not self.weigh_casts:
            return resolve(compute_low), {}
        return economics.unpaid(self.analysis, compute_low, resolve, io_low=self.io_low)

    def _give_back(self, found: SearchResult, kept_for_error: Mapping[int, str],
                   by_rank: Sequence[int], pinned: frozenset[int]) -> SearchResult:
        """Step 4 of the module docstring, on the passing assignment ``found``
        (``kept_for_error``: the nodes it keeps float32 for their error)."""
        # smallest own error first, whatever the op: products first (the mirror of step 2b)
        # gave back far fewer nodes (layout_cdla: 23 lowered where this gives 205, six models
        # none), since the halving stops at the first share that misses the bar
        order = sorted(by_rank, key=lambda p: (self.local.get(p, 0.0), p))
        compute = set(self.analysis.compute_nodes())
        best, rounds = found, found.rounds
        given, most = 0, len(order)  # given back and within the bar; at most that many
        for _ in range(GIVE_BACK_ROUNDS):
            if given >= most:
                break
            trial = (given + most + 1) // 2
            returned = set(order[:trial])
            kept = {p: why for p, why in kept_for_error.items() if p not in returned}
            low, unpaid = self._assign(compute, kept, pinned)
            kept.update(unpaid)
            measured = self.measure(low)
            rounds += 1
            over = bool(measured.failing(self.budget))
            logger.debug("convert-precision give-back: %d of %d lowered again: %s", trial,
                         len(order), "over" if over else "within the bar")
            if over:
                most = trial - 1
            else:
                given, best = trial, SearchResult(low, kept, measured, rounds, self.local,
                                                  unpaid=frozenset(unpaid))
        return dataclasses.replace(best, rounds=rounds)

    def blame_runs(self, runs: Sequence[Mapping[str, np.ndarray]], low: frozenset[int],
                   *, spread: int = 0) -> dict[int, str]:
        """Step 2 on values computed elsewhere: ``runs`` holds, per input set, the tensors
        (:meth:`Analysis.tensors`, integers too) of the model lowered by ``low`` as ONNX
        Runtime computed them, by the original's names; the nodes where their error starts go
        back to float32. An integer tensor that differs (a float16 rounding moved an index
        across an integer) is followed back to the float values it came from. Where tracing
        finds no origin (an error built up over many nodes), step 2b: the ``spread`` lowered
        nodes of largest own error, matrix products last."""
        self._reference_tensors()
        measured = self.errors_of(runs)
        failing = measured.failing(self.budget)
        blamed = self.blame(measured, failing, low)
        if not blamed and failing and spread:
            self.measure_local(self.analysis.compute_nodes())
            blamed = self.ranked(failing, low, spread, measured)
        return {position: f"on ONNX Runtime's run: {why}" for position, why in blamed.items()}

    def blame(self, measured: Measured, failing: Sequence[str], low: frozenset[int]
              ) -> dict[int, str]:
        """Step 2: the nodes to put back in float32, with why."""
        blamed: dict[int, str] = {}
        compute = set(self.analysis.compute_nodes())
        for output in failing:
            for origin in self._origins(output, measured):
                error = measured.errors.get(output, math.inf)
                if origin in low and origin in compute:
                    blamed.setdefault(origin, f"output {output!r} was {_fmt(error)} of the "
                                              f"tolerance; its error starts here")
                    continue
                node = self.analysis.node(origin)
                floats = [n for n in node.input if n and self.analysis.types.get(n) == FLOAT]
                if origin in low and self._moves_weights(origin):
                    # A lowered node that only moves values (an embedding's Gather): the error
                    # starts at its rounded weights, which stay float32 with it.
                    blamed.setdefault(origin, f"output {output!r} was {_fmt(error)} of the "
                                              f"tolerance; its error starts at the rounded "
                                              f"weights this node reads")
                    continue
                if floats and not any(self.analysis.types.get(n) == FLOAT
                                      for n in node.output if n):
                    # Discrete values (indices, a mask) computed from floats: a rounding moves
                    # them across an integer, so what computes those floats stays exact.
                    for position in sorted(self.analysis.ancestors(floats) & low & compute):
                        blamed.setdefault(position, f"output {output!r} was {_fmt(error)} of "
                                                    f"the tolerance; float16 rounding here "
                                                    f"changes the discrete values "
                                                    f"{self._label(origin)} computes")
                    continue
                for position in self._lowered_sources(origin, low, compute):
                    blamed.setdefault(position, f"output {output!r} was {_fmt(error)} of the "
                                                f"tolerance; rounding this node's output is "
                                                f"amplified by {self._label(origin)}")
        return blamed

    def ranked(self, failing: Sequence[str], low: frozenset[int], count: int,
               measured: Measured) -> dict[int, str]:
        """Step 2b: the ``count`` lowered computing ancestors of the failing outputs with the
        largest own error, matrix products last (:data:`~ops.MATRIX_OPS`)."""
        compute = set(self.analysis.compute_nodes())
        ancestors = self.analysis.ancestors(list(failing)) & low & compute
        def product(position: int) -> bool:
            return self.analysis.node(position).op_type in ops.MATRIX_OPS

        ranked = sorted(ancestors, key=lambda p: (product(p), -self.local.get(p, 0.0), p))[:count]
        # the largest own error of a product left lowered, for the nodes chosen before it
        passed_over = max((self.local.get(p, 0.0) for p in ancestors - set(ranked)
                           if product(p)), default=0.0)
        worst = max(failing, key=lambda name: measured.outputs[name])

        def why(position: int) -> str:
            own = self.local.get(position, 0.0)
            rank = ("among the largest of the ops that carry it (matrix products go back "
                    "last)" if own < passed_over else "among the largest upstream")
            return (f"output {worst!r} reached {_fmt(measured.outputs[worst])} of the "
                    f"tolerance as errors built up; this node's own error ({_fmt(own)}) is "
                    f"{rank}")

        return {p: why(p) for p in ranked}

    def _origins(self, output: str, measured: Measured) -> set[int]:
        """The nodes where the error of ``output`` starts (module docstring, step 2)."""
        analysis = self.analysis
        origins: set[int] = set()
        seen: set[str] = set()
        stack = [output]
        while stack:
            name = stack.pop()
            if name in seen or name not in analysis.producer:
                continue
            seen.add(name)
            position = analysis.producer[name][0]
            node = analysis.node(position)
            bad = [n for n in node.input if n and measured.errors.get(n, 0.0) > self.budget]
            if bad:
                stack += bad
            else:
                origins.add(position)
        return origins

    def _lowered_sources(self, position: int, low: frozenset[int], compute: set[int]
                         ) -> set[int]:
        """The nearest lowered computing nodes upstream of ``position``'s float inputs."""
        analysis = self.analysis
        found: set[int] = set()
        seen: set[int] = set()
        stack = [analysis.producer[n][0] for n in analysis.node(position).input
                 if n in analysis.producer and analysis.types.get(n) == FLOAT]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            if current in low and current in compute:
                found.add(current)
            elif current in low:  # a lowered movement node: look through it
                if self._moves_weights(current):
                    found.add(current)  # and it goes back itself with its weights
                stack += [analysis.producer[n][0] for n in analysis.node(current).input
                          if n in analysis.producer and analysis.types.get(n) == FLOAT]
        return found

    def _moves_weights(self, position: int) -> bool:
        """Whether the node reads a float weight (an embedding's Gather): lowered, it moves
        rounded values that only its going back to float32 restores."""
        return any(self.analysis.types.get(n) == FLOAT and n in self.analysis.initializers
                   for n in self.analysis.node(position).input if n)

    def _label(self, position: int) -> str:
        node = self.analysis.node(position)
        return f"{node.op_type} {node.name!r}" if node.name else f"{node.op_type} #{position}"


def _power(base: float, exponent: float) -> float:
    try:
        return base ** exponent
    except OverflowError:
        return math.inf


def _peak(value: np.ndarray) -> float:
    """The largest finite magnitude in ``value`` (0 for none, or for an integer tensor)."""
    if value.dtype.kind != "f" or not value.size:
        return 0.0
    largest = max(float(value.max()), -float(value.min()))  # no |value| array made
    if math.isfinite(largest):
        return largest
    finite = np.abs(value[np.isfinite(value)])
    return float(finite.max()) if finite.size else 0.0


def _fmt(error: float) -> str:
    return "inf (NaN or Inf appears)" if math.isinf(error) else f"{error:.3g}x"




_ELEMENT_TYPES = {
    f"tensor({name})": value for name, value in (
        ("float", onnx.TensorProto.FLOAT), ("float16", onnx.TensorProto.FLOAT16),
        ("bfloat16", onnx.TensorProto.BFLOAT16), ("double", onnx.TensorProto.DOUBLE),
        ("int64", onnx.TensorProto.INT64), ("int32", onnx.TensorProto.INT32),
        ("int16", onnx.TensorProto.INT16), ("int8", onnx.TensorProto.INT8),
        ("uint64", onnx.TensorProto.UINT64), ("uint32", onnx.TensorProto.UINT32),
        ("uint16", onnx.TensorProto.UINT16), ("uint8", onnx.TensorProto.UINT8),
        ("bool", onnx.TensorProto.BOOL), ("string", onnx.TensorProto.STRING),
    )
}


def tensor_types(model: onnx.ModelProto) -> dict[str, int]:
    """The element type of every tensor the main graph's nodes write: from onnx's type
    inference on the model's skeleton (no weights read), or, where it leaves one unknown (ONNX
    Runtime's contrib ops, which onnx does not know), as ONNX Runtime types them; a tensor that
    is no tensor (a sequence) is left out."""
    written = [name for node in model.graph.node for name in node.output if name]
    try:
        inferred = onnx.shape_inference.infer_shapes(skeleton(model))
        types = {v.name: v.type.tensor_type.elem_type for v in
                 [*inferred.graph.value_info, *inferred.graph.output]
                 if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type}
    except Exception:  # noqa: BLE001 - onnx refuses what it cannot infer: ask ORT
        types = {}
    if all(name in types for name in written):
        return {name: types[name] for name in written}
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    expose(exposed, written)
    return {o.name: _ELEMENT_TYPES[o.type] for o in session(exposed).get_outputs()
            if o.type in _ELEMENT_TYPES}


class _Bounds(dict):
    """Tensor -> the largest constant its values are computed from (:meth:`Search._data_dependent`);
    a weight's is its own largest magnitude, read when first asked for."""

    def __init__(self, search: Search) -> None:
        super().__init__()
        self.search = search

    def __missing__(self, name: str) -> float:
        bound = self.search._value_peak(name) if name in self.search.analysis.initializers \
            else 0.0
        self[name] = bound
        return bound
