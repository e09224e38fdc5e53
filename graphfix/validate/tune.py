"""The session and provider settings that make a model fastest on this machine, measured.

    result = tune("model.onnx", provider="cpu", objective="latency", budget=60)
    result.winner.name, result.winner.speedup, result.kept_default, result.reason
    result.config.write("config.json")      # graphfix.tune/1: bench --config re-checks it

The search space is :data:`KNOBS`, one table: each knob names its values, the provider it
applies to, whether it changes numerics, and when it does not apply to a model (parallel
execution on a chain, cuDNN options without a convolution, batch sizes without a dynamic
batch). A candidate is ONNX Runtime's default session with one knob changed, or one pair
(:data:`CROSSED`: one intra-op thread at each other optimization level); the default is
always a candidate, and so is an identical copy of it (the A/A check). One knob is a way of
using the threads rather than a single option: ``branch_parallel`` runs independent nodes
side by side (parallel execution, one inter-op thread per core, one intra-op thread each)
instead of splitting each node across the cores, which sub-millisecond transformers on few
cores can prefer.

Method
------
1. Numerics. A candidate whose knob changes numerics (graph optimization level, TF32, cuDNN's
   algorithm choice, NHWC kernels) runs once beside the default session on the same inputs;
   when an output differs beyond parity's tolerances
   (:func:`graphfix.validate.parity.compare_output`), it is dropped with the reason, unless it
   is no farther from the model's float32 arithmetic (the CPU provider, optimizations off) than
   the default session is, or farther by at most one tolerance or a quarter of the default's
   own distance: the CUDA provider's default multiplies in TF32, ``use_tf32=0`` differs from it by
   computing closer to float32, and other kernels rounding in TF32 land about as far. A candidate
   whose session does not open or run is dropped with ORT's error. On a model that quantizes
   or rounds what it computes (:func:`graphfix.graph.run_time_steps`) the comparison runs on
   three input sets, not one: there another order of sums moves an output by a whole level on
   some inputs only.
2. One session alive at a time. ONNX Runtime sessions in one process interfere (an idle
   session's spinning threads take the cores the timed one needs), and spinning is one of the
   knobs, so every candidate is measured alone (:func:`graphfix.validate.timing.measure`): each
   round opens each candidate in turn (the order rotating), warms it up, times a block of
   calls (about 150 ms; on the CPU, at most ten calls for the objectives judged on a
   median: an idle pool spins for tens of milliseconds, so a session cannot be kept waiting,
   and between openings is where the spread lies) and closes it; its peak memory is read for
   that opening. On the CPU provider, the sessions open ONNX Runtime's own rewritten copy of
   the model at the candidate's optimization level, with the rewrites off and its weights
   lent: the same kernels (the copy is used only where it computes bit for bit what the
   model does), in about half the opening time, which is most of a round's cost on a
   sub-millisecond model. The memory objective opens the model itself, since a deployment's
   peak includes the rewriting.
3. Successive halving. Every candidate gets a first rung of three rounds whatever the budget,
   and up to six where rounds are cheap (six fit in a twentieth of the budget, as judged
   before they start), so that none is ranked, or screened as behind, on three rounds alone
   (three rounds give a bootstrap ten distinct resamples: too few to call anything
   significantly slower). Then, rung after rung, the half whose objective statistic compares
   worst with the default's (the point estimate over the rounds they shared) is eliminated
   and the rest get three more rounds, while the budget (``budget`` seconds, from the start)
   allows, judged from the last rung's seconds per candidate and round, until one is left.
   After every rung, a challenger that can no longer be picked is eliminated whatever its
   rank: for the speed objectives one behind the default (its point estimate at or under
   1.0), for ``memory`` one significantly slower; when none is left, the search ends there
   (on a model where ONNX Runtime's defaults are best, after the first rung). The default
   runs in every rung, the A/A copy in the first (the table's check of the method) and in
   the confirmation, whose A/A is the one a decision rests on. The search's intervals, which
   only rank and screen, are bootstrapped with :data:`SEARCH_RESAMPLES` resamples; the
   decision's with all.
4. Combination. When knobs of different names each have a value significantly faster than the
   default, their best values together are one more candidate, measured (budget allowing) in
   a last rung with the default and the best single change.
5. The decision. The winner is the candidate with the best point estimate among those whose
   interval against the default clears 1.0 (``latency``: median; ``p99``: 99th percentile;
   ``throughput``: median time per sample); when none does, the default is kept, and the
   result says so. ``memory`` picks the candidate with the smallest peak memory (at least 5%
   under the default's) whose median is not significantly slower. A winner also needs the A/A
   copy to show no significant difference from the default; where it does show one, a ratio
   may carry that much bias, and a speed winner's whole interval must clear the A/A's
   farthest end (``max(high, 1/low)``), else the machine is too noisy to trust the ratio and
   the default is kept (keeping the default needs no A/A). A median is compared round by
   round: the speedup is the geometric mean of each round's ratio of block medians, and the
   bootstrap resamples those ratios (:func:`graphfix.validate.stats.bootstrap_speedup`'s
   ``per_round``). One opening of a session can come out 1.5x slower than the next, and
   what slows the machine slows every session of a round (their block medians correlate
   0.45 to 0.8); the median of the pooled calls jumps between such modes, the per-round
   ratios do not. The 99th percentile is taken over the pooled calls of its long blocks.
6. Confirmation. Picking the best of many intervals flatters the pick (the winner's curse), and
   the search's rounds, a dozen sessions each, are wide; so the leader of the search (the
   winner of step 5 whatever the A/A, else the candidate furthest ahead of the default), the
   default and the A/A copy get ten fresh rounds (whatever the budget), and the decision of
   step 5, A/A included, is taken again on those rounds alone: a winner that does not hold
   there is not recommended. A speed winner still ahead of the default with its interval
   left open gets one second look, budget allowing: ten more rounds, all twenty judged at
   a stricter confidence (the error rate halved). The reported speedup is the
   confirmation's.
7. On top of the winner. Settings interact (one intra-op thread can make another
   optimization level or parallel execution pay), which one knob at a time from the default
   cannot see. For the latency and p99 objectives, every other knob's values (but those
   that do nothing there, as spinning with one intra-op thread, and settings the search
   already measured) are applied to a confirmed winner's settings and measured in one rung
   beside the default and the winner (budget allowing; numerics checked as in step 1); of
   those whose interval against the winner clears 1.0 in that rung, the one with the highest
   lower end gets ten fresh rounds beside the default, the A/A copy and the winner, and
   replaces the winner only when those rounds show it significantly faster than the winner
   and step 5 takes it against the default.

``TuneResult.to_dict()`` (schema ``graphfix.tune-result/1``)::

    {"schema", "provider", "objective", "budget_s", "seconds", "calls_per_block",
     "warmup_per_block", "aa": Comparison|null, "method_ok": bool,
     "candidates": [{"name", "knob", "value", "changes": {...}, "batch_size",
                     "status": "default"|"measured"|"eliminated"|"dropped"|"not applicable",
                     "reason", "rounds", "median_ms", "p90_ms", "p99_ms", "cv", "peak_bytes",
                     "speedup": Comparison|null}],
     "winner": str, "kept_default": bool, "reason": str,
     "config": graphfix.tune/1, "snippet": str, "warnings": [str]}
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from graphfix import model_io
from graphfix.providers import resolve_provider
from graphfix.errors import BenchmarkError, GraphfixError, first_line
from graphfix.graph import all_nodes, check_input_shapes, run_time_steps
from graphfix.options import check_path
from graphfix.validate.bench import (ConflictingBenchOptions, check_arguments, check_one_source,
                                     feeds_by_model, not_a_batch, read_feeds)
from graphfix.feeds import MAX_INPUT_BYTES, input_specs, make_feeds
from graphfix.validate.parity import STEPPED_SETS, compare_output, identical
from graphfix.validate.profile import files_read
from graphfix.validate.session_config import (
    OBJECTIVES,
    SessionConfig,
    model_digest,
    python_snippet,
)
from graphfix.validate.stats import (
    FASTER,
    NO_DIFFERENCE,
    SLOWER,
    Comparison,
    bootstrap_speedup,
)
from graphfix.validate.timing import (
    RUN_HINT,
    Arm,
    busy_warning,
    Config,
    EXECUTION_MODES,
    Progress,
    Settings,
    check_feeds,
    default_threads,
    measure,
    open_session,
    ort_version,
    thread_limit,
)
from graphfix.report import size_text, table

__all__ = ["OBJECTIVES", "Knob", "KNOBS", "Workload", "Candidate", "TuneResult", "tune",
           "choose", "facts_of", "format_tune"]

logger = logging.getLogger(__name__)

SCHEMA = "graphfix.tune-result/1"
_STATISTIC = {"latency": "median", "p99": "p99", "throughput": "median", "memory": "median"}
_QUANTILE = {"median": 0.5, "p99": 0.99}
BLOCK_SECONDS = 0.15
MEDIAN_BLOCK_CALLS = 10  # the most calls in a block judged on its median (see _block_size)
RUNG_ROUNDS = 3
FINAL_ROUNDS = 10
MOST_FIRST_ROUNDS = 6
SEARCH_RESAMPLES = 500  # the bootstrap's resamples for the search's ranking (the decision: all)
FIRST_RUNG_SHARE = 0.05  # of the budget, that a cheap model's first rung may use
BLOCK_WARMUP = 3
LEANER = 0.95  # a memory winner's peak is at most this share of the default's
REWRITE_LIMIT = 256 * 2**20  # weight bytes up to which the timed sessions open ORT's own copy
_CONV = frozenset({"Conv", "ConvTranspose", "FusedConv", "NhwcConv", "QLinearConv"})
_CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})
_COMPUTE = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm", "Attention", "LSTM", "GRU",
                      "RNN", "Einsum", "MatMulInteger", "QLinearConv", "QLinearMatMul"})


# --------------------------------------------------------------------------------------------
# The search space


@dataclasses.dataclass(frozen=True)
class Workload:
    """What the knobs' applicability reads: the model's shape and the machine."""

    provider: str
    objective: str
    cores: int
    width: int                 # the most compute nodes that could run at once
    has_conv: bool
    has_conv1d: bool
    control_flow: bool
    static_inputs: bool        # every input's shape fixed (given or declared)
    dynamic_batch: bool


def _always(facts: Workload) -> str | None:
    return None


def _positive(text: str) -> int:
    count = int(text)
    if count < 1:
        raise ValueError(f"{count}: expected 1 or more")
    return count


def _block_base(text: str) -> int:
    """``session.dynamic_block_base``: ONNX Runtime reads it as a 32-bit int."""
    base = _positive(text)
    if base > 2**31 - 1:
        raise ValueError(f"{base}: dynamic_block_base from 1 to {2**31 - 1} (ONNX Runtime "
                         "reads it as an int)")
    return base


def _batch_size(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise BenchmarkError(f"a batch size is a whole number of 1 or more, not {value!r}")
    return int(value)


def _level(text: str) -> str:
    """An optimization level by ONNX Runtime's name or graphfix's, any case."""
    level = text.strip().lower().removeprefix("ort_").removeprefix("enable_")
    level = {"disable_all": "disabled"}.get(level, level)
    if level not in _LEVELS:
        raise ValueError(f"expected one of {', '.join(_LEVELS)}, got {text!r}")
    return level


_LEVELS = ("disabled", "basic", "extended", "all")


def _mode(text: str) -> str:
    mode = text.strip().lower()
    if mode not in EXECUTION_MODES:
        raise ValueError(f"expected one of {', '.join(EXECUTION_MODES)}, got {text!r}")
    return mode


def _flag(text: str) -> bool:
    if text.lower() in ("1", "true", "on", "yes"):
        return True
    if text.lower() in ("0", "false", "off", "no"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


@dataclasses.dataclass(frozen=True)
class Knob:
    """One setting tune may change: the values it tries (besides ONNX Runtime's default), the
    provider it belongs to ("cpu", "cuda" or "any"), whether it changes numerics, how it
    changes a candidate, and when it does not apply (a reason, or None)."""

    name: str
    provider: str
    changes_numerics: bool
    values: Callable[[Workload], tuple[Any, ...]]
    apply: Callable[[Settings, int, Any], tuple[Settings, int]]
    applies: Callable[[Workload], str | None] = _always
    parse: Callable[[str], Any] = str
    moot: Callable[[Settings], str | None] = lambda settings: None  # no effect from there


def _one_thread(settings: Settings) -> str | None:
    """Intra-op pool knobs do nothing where there is no pool."""
    return ("no effect with one intra-op thread (there is no intra-op pool)"
            if settings.threads == 1 else None)


def _thread_count(text: str) -> int:
    count = int(text)
    if not 1 <= count <= thread_limit():
        raise ValueError(f"{count} threads: expected at least 1 and at most {thread_limit()} "
                         "here")
    return count


def _setting(field: str, **also: Any) -> Callable[[Settings, int, Any], tuple[Settings, int]]:
    return lambda settings, batch, value: (settings.replace(**{field: value}, **also), batch)


def _cuda_option(name: str) -> Callable[[Settings, int, Any], tuple[Settings, int]]:
    def apply(settings: Settings, batch: int, value: Any) -> tuple[Settings, int]:
        options = dict(settings.cuda_options) | {name: str(value)}
        return settings.replace(cuda_options=tuple(options.items())), batch

    return apply


def _branchy(facts: Workload) -> str | None:
    return None if facts.width >= 2 else "the graph is a chain: no branches to run in parallel"


def _threaded(facts: Workload) -> str | None:
    return None if facts.cores > 1 else "one core: no thread pool to split work for"


def _branches_side_by_side(facts: Workload) -> str | None:
    return _branchy(facts) or _threaded(facts)


def _branch_parallel(settings: Settings, batch: int, value: Any) -> tuple[Settings, int]:
    """Parallel execution with ``value`` inter-op threads and one intra-op thread each:
    independent nodes (attention's q, k and v projections) run side by side, none split."""
    return settings.replace(execution_mode="parallel", inter_op_threads=value, threads=1), batch


def _conv(facts: Workload) -> str | None:
    return None if facts.has_conv else "no convolution in the model"


def _conv1d(facts: Workload) -> str | None:
    return None if facts.has_conv1d else "no 1-D convolution in the model"


def _graphable(facts: Workload) -> str | None:
    if facts.control_flow:
        return "control flow (If/Loop/Scan) cannot be captured"
    return None if facts.static_inputs else "dynamic input shapes (fix them with input_shapes)"


def _batched(facts: Workload) -> str | None:
    if facts.objective != "throughput":
        return "batch sizes are tried for the throughput objective"
    return None if facts.dynamic_batch else "the batch dimension is fixed"


KNOBS: tuple[Knob, ...] = (
    Knob("intra_op_threads", "cpu", False, lambda f: tuple(range(1, f.cores + 1)),
         _setting("threads"), parse=_thread_count),
    Knob("execution_mode", "cpu", False, lambda f: ("parallel",),
         _setting("execution_mode", inter_op_threads=0), _branchy, parse=_mode),
    Knob("branch_parallel", "cpu", False, lambda f: (f.cores,), _branch_parallel,
         _branches_side_by_side, parse=_thread_count),
    Knob("allow_spinning", "cpu", False, lambda f: (False,), _setting("allow_spinning"),
         parse=_flag, moot=_one_thread),
    Knob("dynamic_block_base", "cpu", False, lambda f: (4,), _setting("dynamic_block_base"),
         _threaded, parse=_block_base, moot=_one_thread),
    Knob("optimization", "any", True, lambda f: ("extended", "basic"),
         _setting("optimization"), parse=_level),
    Knob("memory_pattern", "any", False, lambda f: (False,), _setting("memory_pattern"),
         parse=_flag),
    Knob("cpu_arena", "cpu", False, lambda f: (False,), _setting("cpu_arena"), parse=_flag),
    Knob("cudnn_conv_algo_search", "cuda", True, lambda f: ("HEURISTIC", "DEFAULT"),
         _cuda_option("cudnn_conv_algo_search"), _conv),
    Knob("cudnn_conv_use_max_workspace", "cuda", False, lambda f: ("0",),
         _cuda_option("cudnn_conv_use_max_workspace"), _conv),
    Knob("cudnn_conv1d_pad_to_nc1d", "cuda", False, lambda f: ("1",),
         _cuda_option("cudnn_conv1d_pad_to_nc1d"), _conv1d),
    Knob("do_copy_in_default_stream", "cuda", False, lambda f: ("0",),
         _cuda_option("do_copy_in_default_stream")),
    Knob("use_tf32", "cuda", True, lambda f: ("0",), _cuda_option("use_tf32")),
    Knob("prefer_nhwc", "cuda", True, lambda f: ("1",), _cuda_option("prefer_nhwc"), _conv),
    Knob("cuda_graph", "cuda", False, lambda f: (True,),
         _setting("cuda_graph", io_binding=True), _graphable, parse=_flag),
    Knob("io_binding", "cuda", False, lambda f: (True,), _setting("io_binding"), parse=_flag),
    Knob("batch_size", "any", False, lambda f: (2, 4, 8, 16),
         lambda settings, batch, value: (settings, _batch_size(value)), _batched,
         parse=_positive),
)
"""Every knob tune knows; adding one is a row here (and a test)."""

_BY_NAME = {knob.name: knob for knob in KNOBS}


def facts_of(model: onnx.ModelProto, *, provider: str, objective: str,
             input_shapes: Mapping[str, Sequence[int]] | None) -> Workload:
    nodes = list(all_nodes(model.graph))
    conv1d = False
    shapes = {init.name: len(init.dims) for init in model.graph.initializer}
    for node in nodes:
        if node.op_type == "Conv" and len(node.input) > 1 and shapes.get(node.input[1]) == 3:
            conv1d = True
    specs = input_specs(model)
    pinned = set(input_shapes or {})
    return Workload(
        provider=provider, objective=objective, cores=default_threads(),
        width=_width(model.graph), has_conv=any(n.op_type in _CONV for n in nodes),
        has_conv1d=conv1d, control_flow=any(n.op_type in _CONTROL_FLOW for n in nodes),
        static_inputs=all(not spec.dynamic or spec.name in pinned for spec in specs),
        dynamic_batch=any(spec.dims and not isinstance(spec.dims[0], int) for spec in specs),
    )


def _width(graph: onnx.GraphProto) -> int:
    """The most compute nodes (Conv, MatMul, Gemm, ...) at one depth of the graph: what
    parallel execution could run at once."""
    producer = {out: index for index, node in enumerate(graph.node) for out in node.output}
    depth: list[int] = []
    for node in graph.node:  # ONNX graphs are topologically sorted
        before = [depth[producer[name]] for name in node.input if name in producer]
        depth.append(1 + max(before, default=0))
    levels: dict[int, int] = {}
    for node, level in zip(graph.node, depth):
        if node.op_type in _COMPUTE:
            levels[level] = levels.get(level, 0) + 1
    return max(levels.values(), default=0)


# --------------------------------------------------------------------------------------------
# Candidates


@dataclasses.dataclass
class Candidate:
    """One configuration: ONNX Runtime's default with some knobs changed."""

    name: str
    settings: Settings
    batch: int = 1
    changes: dict[str, Any] = dataclasses.field(default_factory=dict)
    numerics: bool = False
    status: str = "measured"
    reason: str = ""
    times: dict[tuple[int, int], list[float]] = dataclasses.field(default_factory=dict)
    peaks: list[int] = dataclasses.field(default_factory=list)
    speedup: Comparison | None = None
    rungs: tuple[int, ...] | None = None  # the rungs ``speedup`` was judged on; None: all

    @property
    def alive(self) -> bool:
        return self.status in ("default", "measured")

    def calls(self) -> np.ndarray:
        """Every timed call, per sample (divided by the batch)."""
        return np.asarray([t / self.batch for block in self.times.values() for t in block])

    def to_dict(self) -> dict[str, Any]:
        calls = self.calls()
        stats: dict[str, Any] = {"median_ms": None, "p90_ms": None, "p99_ms": None, "cv": None}
        if calls.size:
            stats = {"median_ms": float(np.median(calls)),
                     "p90_ms": float(np.quantile(calls, 0.9)),
                     "p99_ms": float(np.quantile(calls, 0.99)),
                     "cv": float(np.std(calls) / np.mean(calls))}
        knob, value = next(iter(self.changes.items()), (None, None))
        return {
            "name": self.name, "knob": knob if len(self.changes) == 1 else None,
            "value": value if len(self.changes) == 1 else None,
            "changes": dict(self.changes), "batch_size": self.batch, "status": self.status,
            "reason": self.reason, "rounds": len(self.times), **stats,
            "peak_bytes": int(np.median(self.peaks)) if self.peaks else None,
            "speedup": self.speedup.to_dict() if self.speedup else None,
        }


def _given_values(knob: Knob, values: Sequence[Any]) -> tuple[Any, ...]:
    """``values`` of ``knob`` given by the caller, once each; text read as ``--knob`` reads it
    (a number of threads, a flag; values apart by commas). A value ONNX Runtime refuses is dropped later, with its
    reason."""
    if isinstance(values, str):  # as --knob reads it: "1,2" is two values
        values = [part.strip() for part in values.split(",")]
    elif isinstance(values, bytes) or not isinstance(values, Iterable):
        values = [values]
    parsed: list[Any] = []
    for value in values:
        if isinstance(value, np.generic):
            value = value.item()
        if not isinstance(value, (str, bool, int)) or (  # a float or None: read as text,
                isinstance(value, bool) and knob.parse is not _flag):  # to be refused so
            value = str(value)
        if isinstance(value, str):
            try:
                value = knob.parse(value)
            except ValueError as err:
                raise BenchmarkError(f"knob {knob.name}: {first_line(err, 120)}") from None
        if not any(type(v) is type(value) and v == value for v in parsed):  # True is not 1
            parsed.append(value)
    if not parsed:
        raise BenchmarkError(f"knob {knob.name}: no value given")
    return tuple(parsed)


def _candidates(facts: Workload, default: Settings,
                space: Mapping[str, Sequence[Any]] | None) -> list[Candidate]:
    """The default, its A/A copy, and one candidate per applicable knob value (``space``
    restricts the knobs and their values; a knob named there is tried whatever the model)."""
    found = [Candidate("default", default, status="default"),
             Candidate("default (A/A copy)", default, status="default")]
    if space is not None:
        unknown = sorted(set(space) - set(_BY_NAME))
        if unknown:
            named = ", ".join(unknown)
            named = named if len(named) <= 120 else named[:117] + "..."
            raise BenchmarkError(f"unknown knob(s): {named}",
                                 hint="graphfix tune --help lists the knobs "
                                      "(graphfix.validate.tune.KNOBS)")
    for knob in KNOBS:
        if space is not None and knob.name not in space:
            continue
        if knob.provider not in ("any", facts.provider):
            if space is not None:
                raise BenchmarkError(f"knob {knob.name} is for the {knob.provider} provider, "
                                     f"not {facts.provider}")
            continue
        if space is not None and knob.name == "batch_size" and facts.objective != "throughput":
            raise ConflictingBenchOptions("batch sizes are judged per sample, for the throughput "
                                          "objective only", hint="add --objective throughput")
        why_not = None if space is not None else (knob.applies(facts)
                                                  or knob.moot(default))
        values = _given_values(knob, space[knob.name]) if space is not None else \
            knob.values(facts)
        for value in values:
            name = f"{knob.name}={value}"
            if why_not is not None:
                found.append(Candidate(name, default, changes={knob.name: value},
                                       status="not applicable", reason=why_not))
                continue
            try:
                if type(value) is int and knob.parse is not str:  # in the range --knob takes
                    knob.parse(str(value))
                settings, batch = knob.apply(default, 1, value)
            except (GraphfixError, ValueError) as err:
                found.append(Candidate(name, default, changes={knob.name: value},
                                       status="dropped", reason=str(err)))
                continue
            found.append(Candidate(name, settings, batch, {knob.name: value},
                                   numerics=knob.changes_numerics))
    return found + _crossed(found)


CROSSED = (("intra_op_threads", 1), "optimization")
"""A pair tried together from the start: one intra-op thread at each other optimization
level. The level decides which kernels and layouts run, and those decide what one thread
costs: on sub-millisecond transformers one thread at ``all`` measured no faster than the
default while one thread at ``basic`` or ``extended`` ran 1.2-1.3x faster, a pair that one
knob at a time never reaches (step 7 tries it only on top of a confirmed one thread)."""


def _crossed(found: list[Candidate]) -> list[Candidate]:
    """The :data:`CROSSED` candidates, where both of their knobs have measured candidates."""
    (threads, count), other = CROSSED
    first = next((c for c in found if c.changes == {threads: count} and c.alive), None)
    if first is None:
        return []
    crossed = []
    for c in found:
        if c.alive and len(c.changes) == 1 and other in c.changes:
            settings, batch = _BY_NAME[other].apply(first.settings, 1, c.changes[other])
            changes = {threads: count, other: c.changes[other]}
            crossed.append(Candidate(", ".join(f"{k}={v}" for k, v in changes.items()),
                                     settings, batch, changes,
                                     numerics=first.numerics or c.numerics))
    return crossed


def _batched_feeds(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray],
                   batch: int) -> dict[str, np.ndarray]:
    if batch == 1:
        return dict(feeds)
    dynamic = {spec.name for spec in input_specs(model, values=False)
               if spec.dims and not isinstance(spec.dims[0], int)}
    for name in dynamic & set(feeds):
        size = np.asarray(feeds[name]).nbytes * batch
        if size > MAX_INPUT_BYTES:  # the limit graphfix holds every generated input to
            raise BenchmarkError(f"batch {batch}: input {name!r} would take "
                                 f"{size / 2**30:.3g} GiB, over the "
                                 f"{MAX_INPUT_BYTES / 2**30:g} GiB of one input")
    return {name: np.tile(value, (batch,) + (1,) * (np.ndim(value) - 1)) if name in dynamic
            else value for name, value in feeds.items()}


def _run_once(model: onnx.ModelProto | model_io.LentModel, candidate: Candidate,
              feeds: Mapping[str, np.ndarray]) -> dict[str, Any]:
    session, _ = open_session(Config(candidate.name, model, candidate.settings.optimization),
                              candidate.settings)
    feed = check_feeds(candidate.name, session, feeds)
    names = [o.name for o in session.get_outputs()]
    try:
        return dict(zip(names, session.run(names, feed)))
    except Exception as err:  # noqa: BLE001 - ORT raises its own exception types
        what = "the model" if candidate.name == "default" else f"the session {candidate.name!r}"
        raise BenchmarkError(f"{what} does not run on the given inputs: {first_line(err)}",
                             hint=RUN_HINT) from None


def _check_numerics(model: onnx.ModelProto, candidates: list[Candidate],
                    feeds: Sequence[Mapping[str, np.ndarray]], *, every: bool = False) -> None:
    """Drop each numerics-changing candidate whose outputs differ from the default session's
    beyond parity's tolerances on any of ``feeds`` (one set; more on a model that quantizes
    what it computes: :func:`_numerics_feeds`), unless it is no farther from float32 than the
    default is (:func:`no_farther_than_the_default`), and each candidate that does not open or
    run. Only those that may not (numerics, batch sizes, the CUDA provider's options) are
    opened unless ``every``: a CPU session option is opened by the first rung, and should one
    fail there, tune checks them all and measures the rung again."""
    checked = [c for c in candidates[2:] if c.alive and (
        every or c.numerics or c.batch != 1 or c.settings.provider != "cpu")]
    if not checked:
        return
    compared = any(c.numerics and c.batch == 1 for c in checked)
    references = [_run_once(model, candidates[0], f) for f in feeds] if (
        compared or any(c.batch != 1 for c in checked)) else []
    exact: dict[int, dict[str, Any]] = {}
    for candidate in checked:
        try:
            outputs = _run_once(model, candidate, _batched_feeds(model, feeds[0],
                                                                 candidate.batch))
        except GraphfixError as err:
            candidate.status, candidate.reason = "dropped", first_line(err) + _hint(
                candidate, str(err))
            continue
        if candidate.batch != 1:
            unbatched = not_a_batch(references[0], outputs, candidate.batch)
            if unbatched is not None:
                candidate.status, candidate.reason = "dropped", unbatched
            continue
        if not candidate.numerics:
            continue
        for index, (feed, reference) in enumerate(zip(feeds, references)):
            if index:
                outputs = _run_once(model, candidate, feed)
            if _numerics_verdict(model, candidate, reference, outputs, feed, exact, index):
                break


def _numerics_verdict(model: onnx.ModelProto, candidate: Candidate,
                      reference: Mapping[str, Any], outputs: Mapping[str, Any],
                      feed: Mapping[str, np.ndarray], exact: dict[int, dict[str, Any]],
                      index: int) -> bool:
    """Judge ``candidate``'s outputs on one input set against the default's (``reference``);
    whether that settles it (dropped, or kept no farther from float32 than the default)."""
    for name, value in reference.items():
        parity = compare_output(name, value, outputs.get(name))
        if parity.passed:
            continue
        if index not in exact:
            exact[index] = _run_once(model, Candidate("float32 on the CPU", EXACT), feed)
        kept, how = no_farther_than_the_default(exact[index], reference, outputs)
        if kept:
            candidate.reason = (f"differs from the default ({name!r}: {parity.reason}), "
                                f"and is no farther from float32: {how}")
            return False  # the next input set may still drop it
        candidate.status = "dropped"
        candidate.reason = f"changes numerics: output {name!r}: {parity.reason}; {how}"
        return True
    return False


# Input sets a numerics check compares on, for a model that quantizes or rounds what it
# computes (graphfix.graph.run_time_steps): there a setting that adds in another order moves
# an output by a whole level on some inputs only (parity's STEPPED_SETS, for the same reason).
NUMERICS_SETS_STEPPED = STEPPED_SETS


def _numerics_feeds(model: onnx.ModelProto, feed: Mapping[str, np.ndarray], given: bool,
                    seed: int, input_shapes: Mapping[str, Sequence[int]] | None
                    ) -> list[Mapping[str, np.ndarray]]:
    """The input sets numerics are checked on: ``feed``, and on a model with run-time steps
    (inputs not given) more drawn at its sizes."""
    if given or not run_time_steps(model.graph):
        return [feed]
    shapes = {name: list(np.shape(value)) for name, value in feed.items()
              if isinstance(value, np.ndarray)}
    more = []
    for index in range(1, NUMERICS_SETS_STEPPED):
        drawn = make_feeds(model, seed=seed + index, runs=1,
                           input_shapes={**shapes, **(input_shapes or {})})[0]
        more.append(feeds_by_model(model, None, drawn, seed, input_shapes)["candidate"])
    return [feed, *more]


def _hint(candidate: Candidate, message: str) -> str:
    """What to do about a candidate ONNX Runtime refused, where graphfix can say."""
    if candidate.settings.cuda_graph and "partitioned" in message:
        # ORT keeps shape arithmetic (Shape, Gather, Concat, Unsqueeze) on the CPU provider,
        # and a session holding a CPU node cannot be captured.
        return (" (CUDA graphs need every node on the CUDA provider: `graphfix optimize "
                "--provider cuda` folds the shape arithmetic ONNX Runtime keeps on the CPU; "
                "tune its output)")
    return ""


# The float32 arithmetic a numerics check measures distances from: the CPU provider with the
# graph as written (no fusion, no TF32, no algorithm choice).
EXACT = Settings.ort_defaults("cpu").replace(optimization="disabled")


# How much farther from float32 than the default a candidate may be, as a share of the
# default's own distance (and at least one tolerance): the worst element of two sets of
# kernels rounding the same arithmetic differs (12.9x against 11.8x on BERT-base, TF32 on an
# H200: 9%); a quarter leaves room for that and still drops what strays.
SAME_DISTANCE = 0.25


def no_farther_than_the_default(exact: Mapping[str, Any], default: Mapping[str, Any],
                                candidate: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether a candidate that differs from the default session is still as faithful to the
    model's float32 arithmetic (``exact``) as the default is: on every output, its distance
    from ``exact`` in units of parity's tolerance is at most the default's plus one, or plus a
    quarter of the default's own, whichever is more (:data:`SAME_DISTANCE`).

    The default is not float32 itself everywhere: ONNX Runtime's CUDA provider multiplies in
    TF32 unless told not to, so ``use_tf32=0`` differs from the default by TF32's own error
    while it computes closer to float32 than the default does. Dropping it for that would
    drop the more exact setting; a candidate that strays farther than the default does is
    still dropped. Where the default itself is far from float32, another set of kernels
    rounding in TF32 lands as far, but not at the same distance: on BERT-base on an H200 the
    default was 11.8x parity's tolerance from float32 and ``optimization=basic`` 12.9x, the
    same arithmetic. Hence the relative share. Returns the verdict and the worst output's
    distances."""
    worst, words = -math.inf, ""
    for name, value in exact.items():
        ours = compare_output(name, value, candidate.get(name)).tolerance_used
        theirs = compare_output(name, value, default.get(name)).tolerance_used
        allowed = theirs + max(1.0, SAME_DISTANCE * theirs)
        if math.isnan(ours) or (math.isinf(ours) and not math.isinf(theirs)):
            margin = math.inf  # a NaN or an infinity the default does not have
        elif math.isnan(theirs) or math.isinf(theirs):
            margin = -math.inf  # the default itself is not finite: anything is no farther
        else:
            margin = (ours - theirs) / max(1.0, SAME_DISTANCE * theirs)
        if margin > worst or not words:
            worst = margin
            words = (f"{name!r} is {ours:.3g}x parity's tolerance from float32 on the CPU, "
                     f"the default {theirs:.3g}x (allowed: {allowed:.3g}x)")
    return worst <= 1.0, words


class _Configs:
    """What a candidate's timed sessions open: with ``rewrite``, for a model whose weights fit
    :data:`REWRITE_LIMIT`, ONNX Runtime's own rewritten copy of the model at the candidate's
    optimization level (:func:`graphfix.model_io.ort_rewritten`), opened with the rewrites
    off. Its sessions hold the same kernels and open in about half the time, and on a
    sub-millisecond model opening is most of a round's cost. Each level's copy is made once
    and used only when it computes bit for bit what the model computes at that level (one
    run each on the search's inputs); otherwise, and for a batch size other than 1, the
    model itself is opened at the level. Without ``rewrite`` (the CUDA provider; the memory
    objective, whose peaks include the opening's own work), or for an IR-3 model, the model
    itself, always."""

    def __init__(self, model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], *,
                 rewrite: bool) -> None:
        self.model, self.feeds = model, feeds
        # An IR-3 model lists its weights as graph inputs: ORT's copy keeps the inputs of
        # those it folds away, now without a value, so it could never stand in.
        self.rewrite = (rewrite and model.ir_version >= 4
                        and model_io.weight_bytes(model) <= REWRITE_LIMIT)
        self.copies: dict[str, model_io.LentModel | None] = {}

    def __call__(self, candidate: Candidate) -> Config:
        level = candidate.settings.optimization
        if self.rewrite and candidate.batch == 1:
            if level not in self.copies:
                self.copies[level] = self._copy(level)
            if self.copies[level] is not None:
                return Config(candidate.name, self.copies[level], "disabled")
        return Config(candidate.name, self.model, level)

    def _copy(self, level: str) -> model_io.LentModel | None:
        rewritten = Candidate("the rewritten model",
                              Settings.ort_defaults("cpu").replace(optimization="disabled"))
        try:
            data, session = model_io.ort_rewritten(self.model, optimization=level)
            names = [o.name for o in session.get_outputs()]
            expected = session.run(names, check_feeds("the model", session, self.feeds))
            del session
            # Encoded once, its weights lent to every session (a 44 MB copy opened in 24 ms
            # rather than 115): the form checked is the form timed.
            lent = model_io.lent_model(data)
            got = _run_once(lent, rewritten, self.feeds)
        except Exception as err:  # noqa: BLE001 - ORT raises its own exception types
            logger.debug("tune: no rewritten copy at %s: %s", level, first_line(err))
            return None
        if all(identical(value, got.get(name)) for name, value in zip(names, expected)):
            return lent
        logger.debug("tune: the rewritten copy at %s computes otherwise; not used", level)
        return None


# --------------------------------------------------------------------------------------------
# The search


@dataclasses.dataclass
class TuneResult:
    """What :func:`tune` measured and chose. See the module docstring for ``to_dict()``."""

    provider: str
    objective: str
    budget_s: float
    seconds: float
    calls_per_block: int
    warmup_per_block: int
    aa: Comparison | None
    candidates: list[Candidate]
    winner: Candidate
    kept_default: bool
    reason: str
    config: SessionConfig
    snippet: str
    warnings: list[str] = dataclasses.field(default_factory=list)

    @property
    def method_ok(self) -> bool:
        return self.aa is not None and self.aa.verdict == NO_DIFFERENCE

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "provider": self.provider, "objective": self.objective,
            "budget_s": self.budget_s, "seconds": self.seconds,
            "calls_per_block": self.calls_per_block, "warmup_per_block": self.warmup_per_block,
            "aa": self.aa.to_dict() if self.aa else None, "method_ok": self.method_ok,
            "candidates": [c.to_dict() for c in self.candidates],
            "winner": self.winner.name, "kept_default": self.kept_default,
            "reason": self.reason, "config": self.config.to_dict(), "snippet": self.snippet,
            "warnings": list(self.warnings),
        }


def _compare(default: Candidate, candidate: Candidate, statistic: str, *, confidence: float,
             resamples: int, seed: int, rungs: Collection[int] | None = None
             ) -> Comparison | None:
    """The candidate against the default over the rounds both ran (per sample); only those of
    ``rungs`` when they are given. Every round opened each session anew, so a median is
    compared round by round (``per_round``: the spread between openings sets the interval);
    a tail quantile needs the pooled calls of the long blocks it is measured on."""
    shared = sorted(key for key in set(default.times) & set(candidate.times)
                    if rungs is None or key[0] in rungs)
    if not shared:
        return None
    a = np.asarray([default.times[key] for key in shared]) / default.batch
    b = np.asarray([candidate.times[key] for key in shared]) / candidate.batch
    return bootstrap_speedup(a, b, confidence=confidence, resamples=resamples, seed=seed,
                             statistic=statistic, per_round=statistic == "median")


def choose(default: Candidate, aa: Comparison | None, candidates: Sequence[Candidate],
           objective: str, *, check_aa: bool = True) -> tuple[Candidate, str]:
    """The winner and why (see the module docstring, step 5): a candidate only when its
    interval against the default clears 1.0 (memory: leaner and not slower) and the A/A check
    held. Keeping the default needs no A/A check: it is what the user has already.
    ``check_aa=False`` names the candidate the rounds point to, for a confirmation to judge."""
    # a candidate whose session is the default's own (ONNX Runtime's intra_op_threads=0, asked
    # for by name) can be ahead of it only by chance: it is never a winner
    measured = [c for c in candidates if c.status == "measured" and c.speedup is not None
                and not _is_default(c, default)]
    if objective == "memory":
        base = np.median(default.peaks) if default.peaks else None
        found = [c for c in measured if c.peaks and base and c.speedup.verdict != SLOWER
                 and np.median(c.peaks) <= LEANER * base]
        if not found:
            return default, ("no candidate used 5% less memory than the default without being "
                             "significantly slower; the default is kept")
    else:
        found = [c for c in measured if c.speedup.verdict == FASTER]
        if not found:
            noisy = ""
            if check_aa and aa is not None and aa.verdict != NO_DIFFERENCE:
                noisy = (f"; the A/A check failed too (the default against itself: "
                         f"{aa.speedup:.3f}x [{aa.ci_low:.3f}, {aa.ci_high:.3f}]): the machine "
                         "was noisy")
            return default, ("no candidate was significantly faster than the default (no "
                             f"interval cleared 1.0){noisy}; the default is kept")
    spread = ""
    if check_aa and (aa is None or aa.verdict != NO_DIFFERENCE):
        shown = f"{aa.speedup:.3f}x [{aa.ci_low:.3f}, {aa.ci_high:.3f}]" if aa else "not measured"
        # The default against itself came out apart: a ratio may carry that much bias, so a
        # speed winner must clear it (its whole interval beyond the A/A's farthest end).
        band = max(aa.ci_high, 1.0 / aa.ci_low) if aa is not None and aa.ci_low > 0 else None
        clear = [c for c in found if band is not None and objective != "memory"
                 and c.speedup.ci_low > band]
        if not clear:
            return default, (f"the A/A check failed (the default against itself: {shown}): "
                             "the machine is too noisy for this budget to tell settings "
                             "apart; the default is kept")
        found = clear
        spread = (f", clearing the spread of the default against itself ({shown}, up to "
                  f"{band:.3f}x)")
    if objective == "memory":
        best = min(found, key=lambda c: (np.median(c.peaks), -c.speedup.speedup))
        return best, (f"{best.name} peaks at {np.median(best.peaks) / 2**20:.1f} MiB against the "
                      f"default's {base / 2**20:.1f} MiB, at {best.speedup.speedup:.3f}x the speed")
    best = max(found, key=lambda c: c.speedup.speedup)
    s = best.speedup
    return best, (f"{best.name} is {s.speedup:.3f}x the default [{s.ci_low:.3f}, "
                  f"{s.ci_high:.3f}] on the {_STATISTIC[objective]}"
                  + (" per sample" if objective == "throughput" else "") + spread)


def tune(
    model: onnx.ModelProto | str | os.PathLike[str],
    *,
    provider: str = "auto",
    objective: str = "latency",
    budget: float = 60.0,
    feeds: Mapping[str, np.ndarray] | None = None,
    inputs: str | os.PathLike[str] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    space: Mapping[str, Sequence[Any]] | None = None,
    seed: int = 0,
    confidence: float = 0.95,
    resamples: int = 2000,
    out: str | os.PathLike[str] | None = None,
    name: str = "model.onnx",
    progress: Progress | None = None,
) -> TuneResult:
    """Search :data:`KNOBS` for ``model`` (a ModelProto or a path) on this machine. See the
    module docstring for the method.

    ``objective``: "latency", "p99", "throughput" or "memory". ``budget``: seconds the search
    may spend, counted from the start (every candidate's first rung and the winner's
    confirmation run regardless).
    ``feeds``/``inputs``/``input_shapes``: the inputs, as ``bench`` takes them. ``space``:
    ``{knob name: values}`` to try instead of the table's (e.g. ``{"intra_op_threads": [1]}``).
    ``out``: write the winner's ``graphfix.tune/1`` configuration there.
    """
    started = time.perf_counter()
    if objective not in OBJECTIVES:
        raise BenchmarkError(f"unknown objective {objective!r}",
                             hint=f"use one of {', '.join(OBJECTIVES)}")
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or \
            not 0 < budget < math.inf:
        raise BenchmarkError(f"the budget must be a number of seconds > 0, got {budget!r}")
    input_shapes = check_arguments("tune", feeds=feeds, input_shapes=input_shapes, seed=seed,
                                   confidence=confidence, resamples=resamples,
                                   inputs=inputs, progress=progress)
    check_path("tune", "out", out, optional=True)
    if space is not None and not isinstance(space, Mapping):
        raise BenchmarkError("tune(): space must map knob names to values or lists of values, "
                             f"got {type(space).__name__}",
                             hint="e.g. space={'intra_op_threads': [1, 2]}")
    for knob, values in (space or {}).items():
        if not isinstance(knob, str) or isinstance(values, Mapping):
            raise BenchmarkError(f"tune(): space[{knob!r}] must be a value or a list of "
                                 f"values, got {type(values).__name__}",
                                 hint="e.g. space={'intra_op_threads': [1, 2]}")
    proto, model_name = model_io.named_model(model, "model", "tune", name)
    check_input_shapes(proto, input_shapes, "input shapes (--input-shape)")
    reads = files_read((model, proto), inputs)
    if out is not None:
        model_io.check_outputs({"the configuration": out}, reads)
    used = resolve_provider(provider)
    check_one_source("tune", feeds, inputs)
    if inputs is not None:
        feeds = read_feeds(inputs, proto)
    feed = feeds_by_model(proto, None, feeds, seed, input_shapes)["candidate"]
    facts = facts_of(proto, provider=used, objective=objective, input_shapes=input_shapes)
    default_settings = Settings.ort_defaults(used)
    candidates = _candidates(facts, default_settings, space)
    numerics_feeds = _numerics_feeds(proto, feed, feeds is not None, seed, input_shapes)
    default, copy = candidates[0], candidates[1]
    configs = _Configs(proto, feed, rewrite=used == "cpu" and objective != "memory")
    try:
        _check_numerics(proto, candidates, numerics_feeds)
        calls, warmup, round_cost = _block_size(configs, default, feed, objective)
    except BenchmarkError as err:
        if not str(err).startswith("ONNX Runtime cannot open the default"):
            raise
        # ORT's own rewrites can make a model it runs invalid (a tf2onnx bicubic Resize):
        # every setting is measured against the default session, which does not load it
        raise BenchmarkError(
            f"{err.args[0]}: tune measures every setting against ONNX Runtime's default "
            "session, which does not load this model",
            hint="`graphfix profile MODEL` finds the highest optimization level that opens it; "
                 "a deployment must set that level in its SessionOptions") from None
    statistic = _STATISTIC[objective]
    # The search's intervals rank and screen; the decision's come from the confirmation's
    # rounds, with every resample asked for.
    compare = lambda c: _compare(default, c, statistic, confidence=confidence,  # noqa: E731
                                 resamples=min(resamples, SEARCH_RESAMPLES), seed=seed)
    rung = 0

    def run_rung(alive: list[Candidate], rounds: int) -> float:
        """Measure ``alive`` for ``rounds`` more rounds; the seconds per arm and round."""
        nonlocal rung
        began = time.perf_counter()
        arms = [Arm(c.name, configs(c), c.settings, _batched_feeds(proto, feed, c.batch))
                for c in alive]
        # Every candidate's peak memory is read in the first rung; later rungs read it only
        # for the memory objective.
        measured = measure(arms, warmup=warmup, rounds=rounds, calls=calls, together=False,
                           progress=progress, step=f"tune rung {rung + 1}",
                           memory=rung == 0 or objective == "memory")
        if measured.others_cores is not None:
            others.append(measured.others_cores)
        for c in alive:
            for index, block in enumerate(measured.times[c.name]):
                c.times[(rung, index)] = block
            if measured.peak_bytes[c.name] is not None:
                c.peaks.append(measured.peak_bytes[c.name])
        for c in alive[1:]:
            c.speedup, c.rungs = compare(c), None
        rung += 1
        return (time.perf_counter() - began) / (len(alive) * rounds)

    challengers = [c for c in candidates[2:] if c.alive]
    deadline = started + budget
    warnings: list[str] = []
    others: list[float] = []  # the cores other processes kept busy, per rung
    first = _first_rounds(len(challengers) + 2, round_cost, budget)
    floor = round_cost * ((len(challengers) + 2) * first + 3 * FINAL_ROUNDS)
    if floor > 1.5 * budget:  # said before the wait, not only after it
        logger.warning("tune: every candidate's first rung and the confirmation take about "
                       "%.3g s on this model (%d candidates, %.3g s a session's round), over "
                       "the %g s budget", floor, len(challengers) + 2, round_cost, budget)
    try:
        cost = run_rung([default, copy, *challengers], first)  # s per arm and round
    except BenchmarkError:  # a CPU session option that does not open or run: drop it, again
        _check_numerics(proto, candidates, numerics_feeds, every=True)
        challengers = [c for c in challengers if c.alive]
        cost = run_rung([default, copy, *challengers], first)
    while challengers:
        challengers = _screen(challengers, rung, objective)
        if not challengers:
            break
        if len(challengers) > 1:
            # By the point estimate: the rounds of a rung mix a dozen sessions, and a
            # sub-millisecond session comes out fast or slow by where the scheduler put its
            # threads (block medians 0.18 and 0.30 ms of one setting), so a real gain's
            # interval is as wide as a chance one's; the confirmation's fresh rounds of three
            # sessions, not the ranking, hold a winner to its claim.
            ranked = sorted(challengers, key=lambda c: -(c.speedup.speedup if c.speedup else 0.0))
            keep = ranked[: max(1, len(challengers) // 2)]
            for c in ranked[len(keep):]:
                c.status = "eliminated"
                c.reason = (f"halving after rung {rung}: "
                            + (f"{c.speedup.speedup:.3f}x the default [{c.speedup.ci_low:.3f}, "
                               f"{c.speedup.ci_high:.3f}]" if c.speedup else ""))
            challengers = keep
        if len(challengers) == 1:  # the confirmation's fresh rounds judge it
            break
        arms = len(challengers) + 1
        rounds = min(RUNG_ROUNDS, int((deadline - time.perf_counter()) / (cost * arms)))
        if rounds < 1:
            warnings.append(f"the budget ran out with {len(challengers)} candidates still in "
                            f"the running after {len(challengers[0].times)} rounds each; the "
                            "one furthest ahead went to the confirmation, a larger budget "
                            "narrows them down")
            break
        cost = run_rung([default, *challengers], rounds)
    combined = _combination(default, [c for c in candidates if c.status == "measured"])
    if combined is not None:
        best = max((c for c in challengers if c.speedup), key=lambda c: c.speedup.speedup,
                   default=None)
        arms = 2 + (best is not None)
        affordable = int((deadline - time.perf_counter()) / (cost * arms))
        candidates.append(combined)
        if affordable < RUNG_ROUNDS:
            combined.status = "dropped"
            combined.reason = "the budget ran out before the combination could be measured"
        else:
            _check_numerics(proto, [default, copy, combined], numerics_feeds)
            if combined.alive:
                run_rung([default, combined, *([best] if best else [])],
                         min(FINAL_ROUNDS, affordable))
    aa = _compare(default, copy, statistic, confidence=confidence, resamples=resamples,
                  seed=seed)
    leader = _leader(default, aa, candidates[2:], objective)
    if leader is None:  # the default is kept, and choose says why
        winner, reason = choose(default, aa, candidates[2:], objective)
    else:
        # The fresh rounds, with an A/A of their own, decide: a noisy stretch of the search
        # neither makes a winner nor hides a real gain.
        winner, reason, aa = _confirm(leader, default, copy, run_rung, rung, objective,
                                      statistic, confidence, resamples, seed,
                                      lambda: deadline - time.perf_counter())
        if winner is not default and objective in ("latency", "p99") and winner.batch == 1:
            searched = [c.settings for c in candidates if c.times]
            on_top = [c for c in _candidates(facts, winner.settings, space)[2:]
                      if c.alive and c.batch == 1 and not set(c.changes) & set(winner.changes)
                      and c.settings not in searched]
            refined = _refine(winner, default, copy, on_top, run_rung=run_rung,
                              rung=lambda: rung, cost=cost,
                              seconds_left=lambda: deadline - time.perf_counter(),
                              check=lambda found: _check_numerics(
                                  proto, [default, copy, *found], numerics_feeds),
                              compare=lambda base, c, rungs: _compare(
                                  base, c, statistic, confidence=confidence,
                                  resamples=resamples, seed=seed, rungs=rungs),
                              objective=objective)
            candidates += refined.tried
            if refined.winner is not None:
                winner, reason, aa = refined.winner, refined.reason, refined.aa
            elif refined.note:
                warnings.append(refined.note)
    busy = busy_warning(max(others)) if others else None
    if busy:
        warnings.append(busy)
    if time.perf_counter() - started > 1.2 * budget:
        warnings.append(f"the search took {time.perf_counter() - started:.0f} s for a budget of "
                        f"{budget:g} s (every candidate's first rung and the winner's "
                        "confirmation always run)")
    config = SessionConfig(
        settings=winner.settings, batch_size=winner.batch if objective == "throughput" else None,
        objective=objective, model={"name": model_name, "sha256": model_digest(proto)},
        measured=_measured(default, winner, statistic),
        versions=_versions(),
    )
    result = TuneResult(
        provider=used, objective=objective, budget_s=float(budget),
        seconds=time.perf_counter() - started, calls_per_block=calls, warmup_per_block=warmup,
        aa=aa, candidates=candidates, winner=winner, kept_default=winner is default,
        reason=reason, config=config, snippet=python_snippet(winner.settings, model_name),
        warnings=warnings,
    )
    if out is not None:
        config.write(out, protect=reads)
    logger.info("tune: %s (%s)", winner.name, reason)
    return result


def _leader(default: Candidate, aa: Comparison | None, candidates: Sequence[Candidate],
            objective: str) -> Candidate | None:
    """The candidate the search points to, for the confirmation to judge: the winner
    :func:`choose` would take whatever the A/A; else, for the speed objectives, the measured
    candidate furthest ahead of the default (a point estimate over 1.0) whose interval the
    search's rounds left open. The search's rounds mix up to a dozen sessions each, so their
    intervals are wide; the confirmation's rounds time three, back to back."""
    found, _ = choose(default, aa, candidates, objective, check_aa=False)
    if found is not default:
        return found
    if objective == "memory":
        return None
    ahead = [c for c in candidates if c.status == "measured" and c.speedup is not None
             and c.speedup.speedup > 1.0 and c.speedup.verdict != SLOWER
             and not _is_default(c, default)]
    return max(ahead, key=lambda c: c.speedup.speedup, default=None)


def _is_default(candidate: Candidate, default: Candidate) -> bool:
    """Whether ``candidate`` opens the default's own session (its settings and batch)."""
    return candidate.settings == default.settings and candidate.batch == default.batch


def _screen(challengers: list[Candidate], rung: int, objective: str) -> list[Candidate]:
    """Eliminate each challenger that can no longer be picked, whatever its rank: for the
    speed objectives, one behind the default (a point estimate at or under 1.0: a winner must
    clear 1.0 with its whole interval); for ``memory``, one whose interval lies wholly below
    1.0 (significantly slower). Like the halving's ranking this is a screen after as few as
    three rounds, not the evidence a winner needs: a winner is held to ten fresh rounds."""
    kept = []
    for c in challengers:
        s = c.speedup
        out = s is not None and (s.verdict == SLOWER if objective == "memory"
                                 else s.speedup <= 1.0)
        if out:
            c.status = "eliminated"
            c.reason = (f"{'slower than' if s.verdict == SLOWER else 'behind'} the default "
                        f"after rung {rung} ({len(c.times)} rounds): {s.speedup:.3f}x "
                        f"[{s.ci_low:.3f}, {s.ci_high:.3f}]")
        else:
            kept.append(c)
    return kept


def _confirm(winner: Candidate, default: Candidate, copy: Candidate,
             run_rung: Callable[[list[Candidate], int], float], rung: int, objective: str,
             statistic: str, confidence: float, resamples: int, seed: int,
             seconds_left: Callable[[], float]) -> tuple[Candidate, str, Comparison | None]:
    """Fresh rounds of the winner, the default and the A/A copy: the search picked the best of
    many intervals, which flatters it (the winner's curse); the claim stands only when these
    rounds alone support it too. Returns the decision and the A/A comparison it rests on.

    A speed winner ahead of the default whose interval these rounds left open gets a second
    look when the budget (``seconds_left()``) still holds as many rounds again: a slow stretch
    of the machine widens ten rounds' interval, and the search has often used a fraction of
    its budget. The second look judges all the fresh rounds at a stricter confidence (its
    error rate halved), so that two looks together risk no more than 1.5 times one look's
    false alarms, not twice."""
    cost = run_rung([default, copy, winner], FINAL_ROUNDS)
    rungs, rounds, level = [rung], FINAL_ROUNDS, confidence
    while True:
        fresh = lambda c: _compare(default, c, statistic, confidence=level,  # noqa: E731
                                   resamples=resamples, seed=seed, rungs=rungs)
        aa, confirmed = fresh(copy), fresh(winner)
        winner.speedup, winner.rungs = confirmed, tuple(rungs)
        found, reason = choose(default, aa, [winner], objective)
        if found is winner:
            second = f", a second look at {level:.1%} confidence" if len(rungs) > 1 else ""
            return winner, reason + f" (confirmed on {rounds} fresh rounds{second})", aa
        open_ahead = (objective != "memory" and confirmed is not None
                      and confirmed.speedup > 1.0 and confirmed.verdict != SLOWER)
        if len(rungs) > 1 or not open_ahead or seconds_left() < cost * 3 * FINAL_ROUNDS:
            break
        run_rung([default, copy, winner], FINAL_ROUNDS)
        rungs, rounds = [rung, rung + 1], 2 * FINAL_ROUNDS
        level = 1.0 - (1.0 - confidence) / 2
    shown = (f"{confirmed.speedup:.3f}x [{confirmed.ci_low:.3f}, {confirmed.ci_high:.3f}]"
             if confirmed else "not measured")
    why = reason.removesuffix("; the default is kept")
    return default, (f"{winner.name} led the search but did not hold on {rounds} fresh "
                     f"rounds ({shown}: {why}); the default is kept"), aa


@dataclasses.dataclass
class _Refined:
    """What step 7 tried on top of the winner, and the new winner (None: the winner stands)."""

    tried: list[Candidate]
    winner: Candidate | None = None
    reason: str = ""
    aa: Comparison | None = None
    note: str = ""


def _refine(winner: Candidate, default: Candidate, copy: Candidate, on_top: list[Candidate], *,
            run_rung: Callable[[list[Candidate], int], float], rung: Callable[[], int],
            cost: float, seconds_left: Callable[[], float],
            check: Callable[[list[Candidate]], None],
            compare: Callable[[Candidate, Candidate, Collection[int]], Comparison | None],
            objective: str) -> _Refined:
    """Step 7: every other knob's values on top of the confirmed winner (``on_top``, whose
    settings already hold the winner's change), one rung beside the default and the winner;
    the one whose interval against the winner has the highest lower end, if that clears 1.0,
    gets fresh rounds beside the default, its A/A copy and the winner, and replaces the winner
    only when those rounds show it significantly faster than the winner and :func:`choose` takes it
    against the default. Settings interact (one intra-op thread can favour another
    optimization level), which one knob at a time from the default cannot see."""
    tried = [dataclasses.replace(
        c, name=", ".join(f"{k}={v}" for k, v in {**winner.changes, **c.changes}.items()),
        changes={**winner.changes, **c.changes}, numerics=c.numerics or winner.numerics)
        for c in on_top]
    if not tried:
        return _Refined([])
    needed = cost * ((len(tried) + 2) * RUNG_ROUNDS + 4 * FINAL_ROUNDS)
    if seconds_left() < needed:
        for c in tried:
            c.status, c.reason = "dropped", "the budget ran out before it could be measured"
        return _Refined(tried, note=f"other knobs on top of {winner.name} were not tried: the "
                                    f"budget left was under the {needed:.0f} s they need")
    check(tried)
    alive = [c for c in tried if c.alive]
    if not alive:
        return _Refined(tried)
    confirmed = winner.speedup, winner.rungs
    at = rung()
    try:
        run_rung([default, winner, *alive], RUNG_ROUNDS)
    except BenchmarkError as err:  # a session that does not open or run: the winner stands
        for c in alive:
            c.status, c.reason = "dropped", first_line(err)
        winner.speedup, winner.rungs = confirmed
        return _Refined(tried, note=f"other knobs on top of {winner.name} could not be "
                                    f"measured: {first_line(err)}")
    winner.speedup, winner.rungs = confirmed  # the winner's figure stays its confirmation's
    ahead: list[tuple[Candidate, Comparison]] = []
    for c in alive:
        # Ten fresh rounds of four sessions go only to a change that came out clear of the
        # winner in its rung: one that did not rarely holds on them (a winner replaced on top
        # of it was never one the first rung's candidates had not already covered), and they
        # were a third of a search that found a winner.
        against = compare(winner, c, [at])
        if against is None or against.verdict != FASTER:
            c.status = "eliminated"
            c.reason = (f"{'not clear of' if against and against.speedup > 1.0 else 'behind'} "
                        f"{winner.name} on top of it: " + (
                            f"{against.speedup:.3f}x [{against.ci_low:.3f}, "
                            f"{against.ci_high:.3f}]" if against else "not measured"))
        else:
            ahead.append((c, against))
    if not ahead:
        return _Refined(tried)
    best, _ = max(ahead, key=lambda pair: pair[1].ci_low)
    for c, against in ahead:
        if c is not best:
            c.status = "eliminated"
            c.reason = (f"on top of {winner.name}, behind {best.name}: {against.speedup:.3f}x "
                        f"{winner.name} [{against.ci_low:.3f}, {against.ci_high:.3f}]")
    at = rung()
    run_rung([default, copy, winner, best], FINAL_ROUNDS)
    winner.speedup, winner.rungs = confirmed
    aa, fresh = compare(default, copy, [at]), compare(default, best, [at])
    over = compare(winner, best, [at])
    best.speedup, best.rungs = fresh, (at,)
    found, reason = choose(default, aa, [best], objective)
    shown = (f"{over.speedup:.3f}x {winner.name} [{over.ci_low:.3f}, {over.ci_high:.3f}]"
             if over else "not measured")
    if found is best and over is not None and over.verdict == FASTER:
        return _Refined(tried, best, f"{reason}; on top of {winner.name}: {shown} (confirmed "
                                     f"on {FINAL_ROUNDS} fresh rounds)", aa)
    best.status = "eliminated"
    best.reason = f"on top of {winner.name}, did not hold on {FINAL_ROUNDS} fresh rounds: {shown}"
    return _Refined(tried)


def _block_size(configs: _Configs, default: Candidate, feeds: Mapping[str, np.ndarray],
                objective: str) -> tuple[int, int, float]:
    """Calls per block from a short run of the default, and what one arm's round will cost,
    in seconds (opening the session and the calls).

    A block is about :data:`BLOCK_SECONDS` of calls (3 to 50); on the CPU provider, for the
    objectives judged on a median, at most :data:`MEDIAN_BLOCK_CALLS`. The rounds are what
    the bootstrap resamples, and one opening's session differs from the next (its memory,
    its threads' placement) more than the calls of one block differ: on sub-millisecond
    transformers the spread of block medians was the same within a tenth over 10 calls as
    over 50, and weighing that spread against the spread within a block and the cost of
    opening (a few to 15 ms) puts the calls that narrow the interval most per second at 3 to
    6. Ten keep a block's median steady, and a round costs half of what 50 did. The p99
    objective keeps the long blocks its tail needs, and so does CUDA, where opening a
    session costs far more than the calls and the spread between its sessions was not
    measured."""
    config = dataclasses.replace(configs(default), label="probe")
    probe = measure([Arm("probe", config, default.settings, feeds)], warmup=BLOCK_WARMUP,
                    rounds=1, calls=3, together=False)
    median = max(float(np.median(probe.calls("probe"))) / 1e3, 1e-5)
    opening = float(np.median(probe.created_ms["probe"])) / 1e3
    calls = int(min(50, max(3, round(BLOCK_SECONDS / median))))
    if _STATISTIC[objective] == "median" and default.settings.provider == "cpu":
        calls = min(calls, MEDIAN_BLOCK_CALLS)
    return calls, BLOCK_WARMUP, opening + (calls + BLOCK_WARMUP) * median


def _first_rounds(arms: int, cost: float, budget: float) -> int:
    """The first rung's rounds: :data:`RUNG_ROUNDS`, or up to :data:`MOST_FIRST_ROUNDS` where
    the rung's ``arms`` cost little (``cost``: seconds per arm and round) next to the budget.
    On a sub-millisecond model opening the session is most of a round's cost, and its blocks
    vary most from one opening to the next (a core slowed for a moment slows a one-thread
    session twice over): three rounds rank such candidates by chance, and more are cheap."""
    affordable = int(FIRST_RUNG_SHARE * budget / (arms * max(cost, 1e-6)))
    return max(RUNG_ROUNDS, min(MOST_FIRST_ROUNDS, affordable))


def _combination(default: Candidate, measured: list[Candidate]) -> Candidate | None:
    """The best significantly-faster value of each knob, together, when there are two knobs
    or more."""
    best: dict[str, Candidate] = {}
    for c in measured:
        if c.speedup is None or c.speedup.verdict != FASTER or len(c.changes) != 1:
            continue
        knob = next(iter(c.changes))
        if knob not in best or c.speedup.speedup > best[knob].speedup.speedup:
            best[knob] = c
    if len(best) < 2:
        return None
    settings, batch, changes, numerics = default.settings, 1, {}, False
    for knob, c in best.items():
        settings, batch = _BY_NAME[knob].apply(settings, batch, c.changes[knob])
        changes[knob] = c.changes[knob]
        numerics |= c.numerics
    name = ", ".join(f"{k}={v}" for k, v in changes.items())
    return Candidate(name, settings, batch, changes, numerics=numerics)


def _measured(default: Candidate, winner: Candidate, statistic: str) -> dict[str, Any] | None:
    """The winner's speedup with the default's and the winner's times it was judged on: the
    same rounds (the confirmation's, not the search's too) and the same statistic (a median
    is compared round by round, so each time is the median of the rounds' block medians; a
    tail quantile is the pooled calls'), per sample."""
    if winner is default or winner.speedup is None:
        return None
    keys = sorted(key for key in set(default.times) & set(winner.times)
                  if winner.rungs is None or key[0] in winner.rungs)

    def time_of(c: Candidate) -> float:
        blocks = [np.asarray(c.times[key]) / c.batch for key in keys]
        if statistic == "median":
            return float(np.median([np.median(block) for block in blocks]))
        return float(np.quantile(np.concatenate(blocks), _QUANTILE[statistic]))

    return {**winner.speedup.to_dict(), "statistic": statistic,
            "default_ms": time_of(default), "winner_ms": time_of(winner)}


def _versions() -> dict[str, str]:
    """The runtime the settings were measured on (they may not carry over to another)."""
    from graphfix.version import __version__

    return {"graphfix": __version__, "onnxruntime": ort_version()}


# --------------------------------------------------------------------------------------------
# For a terminal


def format_tune(data: dict[str, Any]) -> str:
    """A tuning run (``TuneResult.to_dict()``): the candidates' table, the decision, the
    configuration and the Python snippet."""
    per = " per sample" if data["objective"] == "throughput" else ""
    rows = []
    for c in data["candidates"]:
        s = c.get("speedup")
        measured = c["median_ms"] is not None
        rows.append([
            c["name"], c["status"],
            f"{c['median_ms']:.3f}" if measured else "-",
            f"{c['p90_ms']:.3f}" if measured else "-",
            f"{c['p99_ms']:.3f}" if measured else "-",
            f"{c['cv']:.2f}" if measured else "-",
            size_text(c["peak_bytes"]) if c.get("peak_bytes") is not None else "-",
            f"{s['speedup']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]" if s else "-",
            str(c["rounds"]),
        ])
    lines = [f"provider {data['provider']}, objective {data['objective']}, "
             f"{data['calls_per_block']} calls per block after {data['warmup_per_block']} "
             f"warm-up, one session alive at a time ({data['seconds']:.1f} s of a "
             f"{data['budget_s']:g} s budget)"]
    lines += table(rows, ["candidate", "status", f"median ms{per}", "p90", "p99", "cv",
                           "peak mem", "speedup vs default", "rounds"])
    for c in data["candidates"]:
        if c["reason"] and c["status"] in ("dropped", "not applicable", "eliminated"):
            lines.append(f"  {c['name']}: {c['status']}: {c['reason']}")
    aa = data.get("aa")
    if aa:
        lines.append(f"A/A (the default against itself): {aa['speedup']:.3f}x "
                     f"[{aa['ci_low']:.3f}, {aa['ci_high']:.3f}]: {aa['verdict']} (on the "
                     "rounds that decided; the table's A/A row spans the whole search)")
    lines.append(f"winner: {data['winner']}: {data['reason']}")
    lines += [f"warning: {w}" for w in data.get("warnings", [])]
    lines += ["", "in your code:", data["snippet"].rstrip()]
    return "\n".join(lines)
