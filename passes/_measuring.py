"""Measuring a model inside a pass: parity's inputs, outputs on ONNX Runtime, and parity's
error measure, for the passes that judge their own rewrite by what it computes
(convert-precision, fuse-transformer) before the pipeline's parity check judges the run."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from graphfix import feeds as feeds_module
from graphfix import layout
from graphfix.model_io import ort_session
from graphfix.options import default_tolerance

__all__ = ["Feeds", "tolerance_used", "run_outputs", "Runner", "session", "make_feeds",
           "tolerance", "worst_output"]

_FLOOR = 4 * float(np.finfo(np.float32).eps)  # parity's rounding floor for a float32 output

Feeds = dict[str, Any]


def tolerance_used(reference: np.ndarray, candidate: np.ndarray, atol: float, rtol: float
                   ) -> float:
    """The worst element's error over its allowance, as parity computes it (inf for a NaN or
    Inf that appears or vanishes, a shape change, or differing integers)."""
    ref, cand = np.asarray(reference), np.asarray(candidate)
    if ref.shape != cand.shape:
        return math.inf
    if ref.dtype.kind not in "fc":
        return 0.0 if np.array_equal(ref, cand) else math.inf
    if max(ref.dtype.itemsize, cand.dtype.itemsize) <= 4 and "c" not in (ref.dtype.kind,
                                                                          cand.dtype.kind):
        # float32 arithmetic for float32 values, at half float64's memory traffic (the ratio's
        # rounding, ~1e-7, is far below any bar); float64 where float32 overflows on the way
        with np.errstate(over="ignore", invalid="ignore"):
            used = _used(ref.astype(np.float32), cand.astype(np.float32), atol, rtol)
        if not math.isnan(used):
            return used
    return _used(ref.astype(np.float64), cand.astype(np.float64), atol, rtol)


def _used(r: np.ndarray, c: np.ndarray, atol: float, rtol: float) -> float:
    """:func:`tolerance_used` on two arrays of one float type, owned (changed in place); NaN
    when that type overflows on the way."""
    finite = np.isfinite(r)
    if not (finite.all() and np.isfinite(c).all()):  # the common case needs no masks
        if not np.array_equal(finite, np.isfinite(c)) or not np.array_equal(
                np.isnan(r), np.isnan(c)) or not np.array_equal(r[np.isinf(r)], c[np.isinf(r)]):
            return math.inf
        r, c = r[finite], c[finite]
    if not r.size:
        return 0.0
    flat = r.ravel()
    scale = float(np.sqrt(np.dot(flat, flat) / r.size)) or 1.0
    allowance = np.abs(r)
    allowance *= rtol
    allowance += max(atol * scale, _FLOOR)
    c -= r
    np.abs(c, out=c)
    c /= allowance
    worst = float(c.max())
    if not (math.isfinite(scale) and math.isfinite(worst)):
        return math.nan  # overflow in this type: the caller measures again wider
    return worst


def run_outputs(model: onnx.ModelProto, feeds: Sequence[Feeds], names: Sequence[str]
                ) -> list[dict[str, np.ndarray]]:
    """``names`` of ``model`` on each feed set, on ONNX Runtime's CPU provider with its
    optimizations off (so that no rewrite of ORT's removes a rounding Cast); at another
    level, in a worker interpreter: :class:`~graphfix.passes._runtime_worker.RuntimeWorker`."""
    runner = Runner(model, names)
    return [runner(feed) for feed in feeds]


class Runner:
    """``names`` of ``model`` on one feed set at a time, as :func:`run_outputs` computes them,
    one session for every call (a size search's attempts, then the sets it found)."""

    def __init__(self, model: onnx.ModelProto, names: Sequence[str]) -> None:
        self._session = session(model)
        self._wanted = _fetchable(self._session, names)
        self._inputs = {i.name for i in self._session.get_inputs()}

    def __call__(self, feed: Feeds) -> dict[str, np.ndarray]:
        values = self._session.run(self._wanted,
                                   {k: v for k, v in feed.items() if k in self._inputs})
        return dict(zip(self._wanted, values))


def session(model: onnx.ModelProto) -> Any:
    """A CPU session on ``model`` with ONNX Runtime's optimizations off, for a run or two:
    no weight is prepacked for faster later calls (that costs more than it saves here), and
    no buffer is planned for reuse: ORT's planner takes most of the session's start on a
    graph of Cast pairs whose shapes it only learns at run time (whisper's encoder emulated:
    15 ms of 17), and a run or two on small inputs needs no reuse."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.disable_prepacking", "1")
    options.enable_mem_reuse = False
    return ort_session(model, optimization="disabled", options=options)


def _fetchable(session: Any, names: Sequence[str]) -> list[str]:
    """The outputs numpy can hold (not bfloat16, sequences or optionals)."""
    kinds = {o.name: o.type for o in session.get_outputs()}
    return [n for n in names if kinds.get(n, "").startswith("tensor(")
            and kinds[n] != "tensor(bfloat16)"]


def make_feeds(model: onnx.ModelProto, *, seed: int, runs: int | None,
               input_shapes: Mapping[str, Sequence[int]] | None,
               inputs: str | os.PathLike[str] | None = None,
               nchw_inputs: Sequence[str] = (),
               run: Callable[[Feeds], object] | None = None) -> list[Feeds]:
    """The inputs parity uses for ``model``: real ``inputs`` when given, else those it
    generates (same seeds, same sizes, the same retries up the size ladder when the model
    rejects a size), so that a pass judges its rewrite on the inputs the check will run.
    ``nchw_inputs``: inputs an earlier pass made channels-first on request, whose
    ``input_shapes`` and ``inputs`` are given in the source's channels-last layout. ``run``:
    what tries a generated set on the model where a dimension is dynamic (raising where the
    model rejects its sizes; by default a session on ``model``): a pass that measures on the
    sets gives its first measuring run, so that the run which finds a size is not repeated."""
    # Inputs are validation's (graphfix.feeds, which itself depends only on the graph
    # layer and tensor access); the pass measures on exactly parity's inputs.

    # Only inputs an earlier pass did make channels-first (its graphfix.layout record says
    # so): an option no pass applied moves nothing.
    moved_here = layout.read(model)["inputs"]
    nchw_inputs = [name for name in nchw_inputs if name in moved_here]

    def first(dims: Sequence[int]) -> list[int]:
        return [dims[a] for a in layout.to_channels_first(len(dims))] if len(dims) >= 3 \
            else list(dims)

    if input_shapes and nchw_inputs:
        input_shapes = {name: first(dims) if name in nchw_inputs else dims
                        for name, dims in input_shapes.items()}
    if inputs is not None and nchw_inputs:
        specs = feeds_module.input_specs(model, values=False)
        found = []
        for index, feed in enumerate(feeds_module.load_feeds(inputs)):
            feed = {name: np.transpose(value, first(list(range(np.ndim(value)))))
                    if name in nchw_inputs else value for name, value in feed.items()}
            feeds_module.check_feeds(specs, feed, where=f"input set {index}")
            found.append(feed)
        return found
    if inputs is not None:
        return [dict(feed) for feed in feeds_module.load_feeds(inputs, model)]

    specs = feeds_module.input_specs(model)
    dynamic = any(s.dynamic for s in specs if s.name not in (input_shapes or {}))
    total = runs if runs is not None else (2 if dynamic else 1)
    if not dynamic:  # one size: nothing to try
        return [feeds_module.make_feed_set(specs, index, seed=seed + index,
                                           input_shapes=input_shapes)
                for index in range(total)]
    if run is None:
        runner = session(model)
        run = lambda feed: runner.run(None, feed)  # noqa: E731
    sizes = feeds_module.TensorSizes(model)  # a size past the first: run where it fits
    chosen: list[Feeds] = []
    for index in range(total):
        found = feeds_module.search_sizes(specs, index, run, seed=seed,
                                          input_shapes=input_shapes, sizes=sizes)
        if found.feed is None:
            raise ValueError(f"ONNX Runtime cannot run the model on generated inputs "
                             f"({found.error})")
        chosen.append(found.feed)
    return chosen


def tolerance(dtype: str) -> tuple[float, float]:
    """Parity's default (atol, rtol) for ``dtype``, so that a pass aims at the bar parity will
    apply."""
    # Tolerances are validation's (graphfix.validate.parity); one home for the figures.

    atol, rtol = default_tolerance(dtype)
    return float(atol or 0.0), float(rtol or 0.0)


def worst_output(reference: Sequence[Mapping[str, np.ndarray]],
                 candidate: Sequence[Mapping[str, np.ndarray]],
                 tolerances: Mapping[str, tuple[float, float]]) -> tuple[str | None, float]:
    """The output of ``candidate`` furthest from ``reference`` in tolerance units, over every
    input set (``tolerances`` by output name), and its error."""
    worst: tuple[str | None, float] = (None, 0.0)
    for ref, cand in zip(reference, candidate):
        for name, value in ref.items():
            if name not in cand:
                return name, math.inf
            error = tolerance_used(value, cand[name], *tolerances[name])
            if error > worst[1]:
                worst = (name, error)
    return worst
