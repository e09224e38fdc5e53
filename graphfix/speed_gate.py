"""The speed gate: a rewrite made for speed on one provider is kept only where it is not slower
there.

Lowered precision (convert-precision) and ONNX Runtime's transformer fusions (fuse-transformer)
trade portability or precision for speed on a provider; on another they can be slower (float16
on ONNX Runtime's CPU provider runs through Casts it inserts around most ops). After the parity
check, :func:`judge` times the optimized model against the same pipeline without those passes,
on the provider the model is for (``--provider``; "auto" is CUDA where it really loads, else
the CPU), both under ONNX Runtime's defaults, rounds interleaved
(:func:`graphfix.validate.bench.benchmark`).

The choice when they are slower: the run writes the model without them, checked by parity like
any result, and says so (a warning naming the passes, the measured ratio and its interval, and
how to ask for the provider they are for). It does not refuse: the passes before them did work
that holds on every provider, and graphfix degrades a run by leaving out what failed rather
than losing it all (as it leaves out a pass that broke parity). "Slower" is the benchmark's
verdict: the interval's upper bound below 1. A ratio the interval cannot tell from 1 keeps the
rewrite (a smaller or fused model that is not shown slower); where that ratio is below
:data:`UNCLEAR_BELOW`, the two are timed again with four times the rounds first, and the second
measurement decides. ``speed_gate=False`` keeps the
rewrites unmeasured, and the report says they were not judged. So does a model that ONNX
Runtime's default session cannot open without the rewrites either (the original fails there
too): there is nothing to time them against.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import onnx

from graphfix import layout
from graphfix.errors import GraphfixError, first_line
from graphfix.options import BenchOptions, RunOptions
from graphfix.validate.bench import benchmark

__all__ = ["GATED_PASSES", "Verdict", "requested_passes", "judge", "place_shapes", "unmeasured",
           "unclear"]

# The passes a run asks for by option (RunOptions.fuse, RunOptions.precision).
GATED_PASSES: tuple[str, ...] = ("fuse-transformer", "convert-precision")


def requested_passes(run: RunOptions) -> tuple[list[str], list[str]]:
    """The gated passes ``run`` asks for: those that run before the rest of the pipeline
    (ONNX Runtime's fusions, whose patterns are written against exporters' graphs) and those
    that run after it (lowered precision, on the finished float32 graph)."""
    return (["fuse-transformer"] if run.fuse is not None else [],
            ["convert-precision"] if run.precision is not None else [])


@dataclasses.dataclass
class Verdict:
    """What the gate decided: ``kept`` (the rewrites stay), with the measured comparison."""

    passes: list[str]
    kept: bool
    provider: str
    speedup: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str | None
    note: str
    input_shapes: dict[str, list[int]] | None = None  # the sizes it was timed at

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def judge(
    optimized: onnx.ModelProto,
    without: Callable[[frozenset[str]], onnx.ModelProto],
    passes: Sequence[str],
    run: RunOptions,
    options: BenchOptions | None = None,
    progress: Callable[..., None] | None = None,
) -> tuple[list[Verdict], onnx.ModelProto | None]:
    """Judge each of ``passes`` (in pipeline order) by its own effect, the last one first: the
    model with it against ``without(left out)``, the same pipeline without it (and without those
    already left out), on the run's provider. Returns a verdict per pass and, when any was
    slower, the model to write instead (else None). ``progress(step, done, total)`` hears of
    each step ("speed gate, PASS: ...") as it goes: the timing takes seconds to a minute."""
    candidate, replaced = optimized, False
    left_out: frozenset[str] = frozenset()
    verdicts: list[Verdict] = []
    for name in reversed(list(passes)):
        if progress is not None:
            progress(f"speed gate, {name}: the pipeline without it", 0, 1)
        baseline = without(left_out | {name})
        timed = None if progress is None else (
            lambda _step, done, total, *rest, _name=name: progress(
                f"speed gate, {_name}: timing", done, total, *rest))
        verdict = _compare(candidate, baseline, name, run, options, timed)
        verdicts.insert(0, verdict)
        if not verdict.kept:
            candidate, replaced = baseline, True
            left_out |= {name}
    return verdicts, (candidate if replaced else None)


def _compare(candidate: onnx.ModelProto, baseline: onnx.ModelProto, name: str, run: RunOptions,
             options: BenchOptions | None, progress: Callable[..., None] | None = None
             ) -> Verdict:
    arguments = (options or BenchOptions()).arguments()
    if "provider" not in arguments:
        arguments["provider"] = run.provider
    place_shapes(arguments, run, baseline, candidate)
    try:
        result = benchmark(candidate, baseline=baseline, progress=progress, **arguments)
        if unclear(result.comparison) and "runs" not in arguments:
            # slower by its ratio, not by its interval: measured again, longer, before the
            # rewrite is kept as "not shown slower" (a GRU's float16 read 0.82x [0.64, 1.06])
            result = benchmark(candidate, baseline=baseline, progress=progress,
                               **{**arguments, "runs": AGAIN_RUNS})
    except GraphfixError as err:
        provider = arguments.get("provider") or run.provider
        if err.model == "baseline":
            # Nor does the model without it open in ONNX Runtime's default session there (a
            # Resize that ORT's layout rewrites make invalid: the original fails there too):
            # nothing to time against, and the pass is no more at fault than the model.
            return Verdict([name], True, provider, None, None, None, "unmeasured",
                           f"{name}: kept without measuring speed: the model without it does "
                           f"not open in ONNX Runtime's default session either "
                           f"({first_line(err)})")
        # The model with the pass does not open or run on the provider it is for (a fused
        # op whose kernel there refuses the shapes, say): written without it, never refused.
        if err.model != "candidate":
            raise
        return Verdict([name], False, provider, None, None, None, "does not run",
                       f"{name}: the model with it does not run on {provider} "
                       f"({first_line(err)}); written without it")
    comparison = result.comparison
    assert comparison is not None  # a baseline was given
    figures = (f"{comparison.speedup:.2f}x [{comparison.ci_low:.2f}, {comparison.ci_high:.2f}] "
               f"against the same pipeline without it on {result.provider}")
    slower = comparison.verdict == "slower"
    if slower:
        note = (f"{name} made the model slower ({figures}); written without it"
                + ("" if result.provider == "cuda" else
                   f": {_FOR_GPUS.get(name, name)}, where it runs natively; ask for "
                   "--provider cuda on a machine where CUDA loads, or --no-speed-gate to write "
                   "it unmeasured"))
    else:
        note = f"{name}: {figures}, {comparison.verdict}"
    return Verdict([name], not slower, result.provider, comparison.speedup,
                   comparison.ci_low, comparison.ci_high, comparison.verdict, note,
                   {k: list(v) for k, v in result.input_shapes.items()})


# A ratio below this whose interval still reaches 1 is measured again, with AGAIN_RUNS rounds
# (four times the benchmark's default), before the rewrite is kept as not shown slower.
UNCLEAR_BELOW = 0.95
AGAIN_RUNS = 200

def unclear(comparison: Any) -> bool:
    """Whether a comparison is slower by its ratio (below :data:`UNCLEAR_BELOW`) but not by
    its interval: the gate measures it again, longer."""
    return comparison is not None and comparison.verdict != "slower" and (
        comparison.speedup < UNCLEAR_BELOW)


# Why a gated pass slower on the CPU may still pay where the model is deployed.
_FOR_GPUS = {"convert-precision": "lower precision is for GPUs (tensor cores)",
             "fuse-transformer": "ONNX Runtime's fused attention kernels are for GPUs"}


def place_shapes(arguments: dict[str, Any], run: RunOptions, original: onnx.ModelProto,
                 optimized: onnx.ModelProto) -> None:
    """The sizes a benchmark of ``optimized`` against ``original`` feeds, in ``arguments``
    (in place): the bench options' own (``BenchOptions.input_shapes``), else the run's fixed
    ones, both given for the original and moved to the optimized model's layout."""
    shapes = arguments.pop("input_shapes", None) or run.input_shapes
    if shapes:
        arguments["input_shapes"] = layout.move_shapes(
            shapes, layout.relative(layout.read(original), layout.read(optimized)))



def unmeasured(passes: Sequence[str]) -> Verdict:
    """The verdict when the gate is off."""
    return Verdict(list(passes), True, "", None, None, None, None,
                   f"{' and '.join(passes)}: kept without measuring speed (speed gate off)")
