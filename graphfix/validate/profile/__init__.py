"""Where a model's time goes, what to change, and what each change buys on this machine.

    result = profile("model.onnx", provider="cpu")
    result.model.op_types[0], result.model.accounting.accounted
    for finding in result.findings:
        finding.reason, finding.fix, finding.measured     # measured: Speedup or None

Method
------
1. Sessions as ``bench`` makes them (:func:`graphfix.validate.bench.session_settings`: ORT's
   defaults, the physical cores, idle threads not spinning; or a ``graphfix.tune/1``
   configuration), on the same generated or given inputs. Each model gets two sessions: one with
   ORT's profiler on, one without. They run in ``bench``'s interleaved rounds
   (:func:`graphfix.validate.timing.measure`): ``warmup`` untimed calls, then ``runs`` rounds
   of one call each, the order rotating. On CUDA the inputs and outputs are bound on the
   device, so a timed call holds no copies. Where ORT's session does not open the model at its
   default level (all; its own rewrites can make a model it runs invalid), the highest level
   that opens it is profiled, and the first warning says that a deployment's default
   SessionOptions cannot load the model.
2. The profiler's overhead is the ratio of the two sessions' medians.
3. The profiled session's trace is read per timed call (:mod:`.trace`, :mod:`.accounting`):
   per node (ORT's name, op type, provider, mean time and share, shapes, the original nodes a
   fused node stands for where ORT's names say so), per op type, session set-up, Memcpy nodes
   and their bytes, nodes on the CPU provider in a CUDA session, layout and dtype glue against
   compute. The node times of each call are divided by the call's own time: what they miss is
   framework overhead.
4. Findings (:mod:`.findings`): one table of kinds, each firing only on this run's numbers.
5. Fixes tried (unless ``try_fixes=False``): each finding whose fix is a graphfix pass, a session
   setting or a batch size gets a configuration of its own; the model as profiled and every fix
   then run in interleaved rounds (``runs`` of them, or as many as 10 s of calls allow, at
   least 10), with a paired bootstrap interval of each fix's speedup (per sample for a batch
   size, the p99 for tail latency). As in ``bench``
   (:func:`graphfix.validate.timing.measure_runs`): idle threads of the sessions do not spin,
   so they may be open together (an A/A test of this method: ``tools/aa_test.py``); when a
   configuration lets threads spin, an idle session's spinning pool would take the timed
   one's cores, and one session is alive at a time, in rotating blocks. A pass's output
   is checked for parity with the model first (:func:`graphfix.validate.parity.check_parity`).
6. ``vs``: the other model is profiled the same way, in the same rounds; op types are matched
   and the speedup of the model over the other comes with its interval.

``ProfileResult.to_dict()`` (schema ``graphfix.profile/1``, JSON-safe)::

    {
      "schema": "graphfix.profile/1",
      "provider": "cpu"|"cuda", "settings": Settings (graphfix.tune/1's "settings"),
      "warmup": int, "runs": int, "seed": int, "method": "together"|"alone",
      "model": ModelProfile, "other": ModelProfile|null,
      "comparison": {"speedup", "ci_low", "ci_high", "confidence", "verdict"}|null,
                                     # the model's speedup over the other (other / model)
      "moved": [{"op_type", "model_ms", "other_ms", "delta_ms", "model_count",
                 "other_count"}],   # op types matched, largest change first
      "findings": [Finding], "other_findings": [Finding],
      "seconds": float, "warnings": [str]
    }
    ModelProfile = {"label", "name", "stats": LatencyStats, "profiled": LatencyStats (profiler on),
      "accounting": {"latency_ms", "p99_ms", "profiled_ms", "profiler_overhead", "run_ms",
                     "nodes_ms", "accounted", "framework_ms", "glue_ms", "glue_share",
                     "compute_share", "memcpy_nodes", "memcpy_bytes", "cpu_nodes", "cpu_ms",
                     "session_create_ms", "session_init_ms"},
      "op_types": [{"op_type", "count", "ms", "share", "providers"}],
      "nodes": [{"name", "op_type", "provider", "ms", "share", "input_shapes",
                 "output_shapes", "output_bytes", "stands_for"}],
      "placement": Placement, "input_shapes": {name: [int]}}
    Finding = {"kind", "reason", "evidence": {...}, "fix", "tried": str|null, "note": str|null,
               "measured": {"speedup", "ci_low", "ci_high", "confidence", "verdict",
                            "statistic", "baseline_ms", "candidate_ms"}|null}

Times are in milliseconds; node and op-type times are means per timed call, shares are of the
mean profiled call.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

import graphfix.passes  # noqa: F401 - the pass library registers its passes on import
from graphfix import model_io, registry
from graphfix.graph import check_input_shapes
from graphfix.providers import probe_provider
from graphfix.errors import BenchmarkError, GraphfixError, first_line
from graphfix.options import check_pair_of_names, check_path
from graphfix.validate.bench import (batch_not_applied, check_arguments, check_compared_runs, feeds_by_model,
                                     check_one_source, load_config, not_a_batch, read_feeds,
                                     session_settings, tuned_elsewhere)
from graphfix.feeds import fed_shape, feed_files, input_specs
from graphfix.validate.parity import check_parity
from graphfix.validate.profile.accounting import Accounting, ModelProfile, account
from graphfix.validate.profile.findings import (
    KINDS,
    Environment,
    Finding,
    Observed,
    Trial,
    find,
    tail_text,
    rank,
)
from graphfix.validate.profile.page import render_page
from graphfix.validate.session_config import SessionConfig
from graphfix.validate.stats import SLOWER, Comparison, Speedup, bootstrap_speedup
from graphfix.validate.timing import (
    Arm,
    Config,
    Progress,
    Settings,
    default_threads,
    measure_runs,
)
from graphfix.report import shapes_text, size_text, table

__all__ = ["SCHEMA", "ProfileResult", "ModelProfile", "Accounting", "Finding", "KINDS",
           "profile", "files_read", "format_profile"]

logger = logging.getLogger(__name__)

SCHEMA = "graphfix.profile/1"
TRY_SECONDS = 10.0   # timed calls the fix trials may take, when that is fewer than ``runs``
TRY_MIN_ROUNDS = 10


@dataclasses.dataclass
class ProfileResult:
    """What :func:`profile` found. See the module docstring for ``to_dict()``."""

    provider: str
    settings: Settings
    warmup: int
    runs: int
    seed: int
    method: str
    model: ModelProfile
    other: ModelProfile | None
    comparison: Comparison | None
    moved: list[dict[str, Any]]
    findings: list[Finding]
    other_findings: list[Finding]
    seconds: float
    warnings: list[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "provider": self.provider,
            "settings": self.settings.to_dict(),
            "warmup": self.warmup,
            "runs": self.runs,
            "seed": self.seed,
            "method": self.method,
            "model": self.model.to_dict(),
            "other": self.other.to_dict() if self.other else None,
            "comparison": self.comparison.to_dict() if self.comparison else None,
            "moved": [dict(row) for row in self.moved],
            "findings": [f.to_dict() for f in self.findings],
            "other_findings": [f.to_dict() for f in self.other_findings],
            "seconds": self.seconds,
            "warnings": list(self.warnings),
        }

    def trace(self) -> list[dict[str, Any]]:
        """ORT's trace events (Chrome trace format: Perfetto, chrome://tracing), one process
        per model, the traces of successive sessions one after another."""
        events: list[dict[str, Any]] = []
        for pid, profiled in enumerate(p for p in (self.model, self.other) if p is not None):
            events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                           "args": {"name": f"{profiled.label}: {profiled.name}"}})
            offset = 0.0
            for trace in profiled.traces:
                end = 0.0
                for event in trace:
                    moved = dict(event, pid=pid, ts=float(event.get("ts", 0)) + offset)
                    events.append(moved)
                    end = max(end, moved["ts"] + float(event.get("dur", 0)))
                offset = end
        return events

    def write_trace(self, path: str | os.PathLike[str], *,
                    protect: Sequence[str | os.PathLike[str]] = ()) -> None:
        """Write :meth:`trace` as JSON, atomically; never over a file in ``protect``."""
        model_io.write_text(path, json.dumps(self.trace()), protect=protect)

    def write_html(self, path: str | os.PathLike[str], *,
                   protect: Sequence[str | os.PathLike[str]] = ()) -> None:
        """Write the page (:mod:`.page`), atomically; never over a file in ``protect``."""
        model_io.write_text(path, render_page(self.to_dict()), protect=protect)


def profile(
    model: onnx.ModelProto | str | os.PathLike[str],
    *,
    vs: onnx.ModelProto | str | os.PathLike[str] | None = None,
    provider: str = "auto",
    threads: int | None = None,
    warmup: int = 10,
    runs: int = 50,
    feeds: Mapping[str, np.ndarray] | None = None,
    inputs: str | os.PathLike[str] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dynamic_block_base: int | None = None,
    config: SessionConfig | str | os.PathLike[str] | None = None,
    try_fixes: bool = True,
    seed: int = 0,
    confidence: float = 0.95,
    resamples: int = 2000,
    trace: str | os.PathLike[str] | None = None,
    html: str | os.PathLike[str] | None = None,
    names: tuple[str, str] = ("model.onnx", "other.onnx"),
    progress: Progress | None = None,
) -> ProfileResult:
    """Profile ``model`` (a ModelProto or a path) and, with ``vs``, another model beside it.
    See the module docstring for the method and the result.

    ``provider``, ``threads``, ``warmup``, ``runs``, ``feeds``, ``inputs``, ``input_shapes``,
    ``dynamic_block_base`` and ``config`` are :func:`graphfix.validate.bench.benchmark`'s.
    ``try_fixes=False`` skips measuring the fixes. ``trace`` and ``html``: also write ORT's
    trace and the page there (refused up front when either is a file this call reads).
    ``names``: the models' file names, when they are given in memory.
    """
    started = time.perf_counter()
    names = tuple(names or ("model.onnx", "other.onnx"))
    check_pair_of_names("profile", "names", names)
    input_shapes = check_arguments(
        "profile", runs=runs, warmup=warmup, threads=threads,
        dynamic_block_base=dynamic_block_base, feeds=feeds, input_shapes=input_shapes,
        seed=seed, confidence=confidence, resamples=resamples,
        inputs=inputs, progress=progress)
    if vs is not None:
        check_compared_runs("profile", runs)
    for role, path in (("trace", trace), ("html", html)):
        check_path("profile", role, path, optional=True)
    main, main_name = model_io.named_model(model, "model", "profile", names[0])
    check_input_shapes(main, input_shapes, "input shapes (--input-shape)")
    other, other_name = (model_io.named_model(vs, "vs", "profile", names[1]) if vs is not None
                         else (None, ""))
    # Files to write are checked before anything is measured: never one graphfix reads.
    reads = files_read((model, main), (vs, other), inputs, config)
    model_io.check_outputs({role: path for role, path in (("the trace", trace),
                                                          ("the page", html)) if path}, reads)
    check_one_source("profile", feeds, inputs)
    if inputs is not None:
        feeds = read_feeds(inputs, main)
    loaded = load_config(config) if config is not None else None  # read once
    settings = session_settings(provider=provider, threads=threads,
                                dynamic_block_base=dynamic_block_base, config=loaded)
    by_model = feeds_by_model(main, other, feeds, seed, input_shapes)
    models = {"model": (main, main_name)}
    if other is not None:
        models["other"] = (other, other_name)
    closed: list[tuple[str, str]] = []  # (level, why) where the session did not open
    with model_io.temporary_folder("profile") as folder:
        # ONNX Runtime's own rewrites can make a model it runs invalid (a tf2onnx bicubic
        # Resize); where the session at its default level does not open, the highest level
        # that does is profiled, and the report says so first: that is the model's problem.
        levels = [settings.optimization, *(
            _LOWER_LEVELS if loaded is None and settings.optimization == "all" else ())]
        for level in levels:
            settings = dataclasses.replace(settings, optimization=level)
            arms = []
            for label, (proto, _) in models.items():
                feed = by_model["candidate" if label == "model" else "baseline"]
                config_ = Config(label, proto, settings.optimization)
                arms.append(Arm(label, config_, settings, feed))
                arms.append(Arm(f"{label}_profiled", Config(f"{label}_profiled", proto,
                                                            settings.optimization),
                                settings, feed, profile_prefix=str(folder / label)))
            try:
                measured = measure_runs(arms, warmup=warmup, runs=runs, progress=progress,
                                        step="profile")
                break
            except BenchmarkError as err:
                if level == levels[-1] or not str(err).startswith(_CANNOT_OPEN):
                    raise
                closed.append((level, first_line(err)))
        profiles = {
            label: account(label, name, proto, measured, label, f"{label}_profiled",
                           optimization=settings.optimization, provider=settings.provider,
                           input_shapes={k: fed_shape(v) for k, v in by_model[
                               "candidate" if label == "model" else "baseline"].items()})
            for label, (proto, name) in models.items()
        }
    environment = Environment.here(
        physical_cores=default_threads(),
        cuda=probe_provider("cuda") if provider == "auto" else None,
        driver=provider == "auto" and "libcuda.so.1" not in probe_provider(
            "cuda").missing_libraries)
    found = {label: find(Observed(name, proto, profiles[label], settings, provider,
                                  environment, tuple(level for level, _ in closed)))
             for label, (proto, name) in models.items()}
    warnings: list[str] = [w for w in (tuned_elsewhere(loaded, main), batch_not_applied(loaded),
                                       measured.busy) if w]
    if closed:
        warnings.insert(0, (
            f"ONNX Runtime's session does not open the model at level {levels[0]}, its "
            f"default ({closed[0][1]}); profiled at level "
            f"{settings.optimization}, the highest that opens it: a deployment with the "
            f"default SessionOptions cannot load this model (set graph_optimization_level to "
            f"{settings.optimization} in its SessionOptions)"))
    if try_fixes:
        _try(found["model"], main, by_model["candidate"], settings, warmup, runs,
             profiles["model"].stats.median_ms, confidence, resamples, seed, warnings,
             progress)
    comparison = None
    if other is not None:
        comparison = bootstrap_speedup(measured.times["other"], measured.times["model"],
                                       confidence=confidence, resamples=resamples, seed=seed)
    result = ProfileResult(
        provider=settings.provider, settings=settings, warmup=warmup, runs=runs, seed=seed,
        method="together" if measured.together else "alone", model=profiles["model"],
        other=profiles.get("other"), comparison=comparison,
        moved=_moved(profiles["model"], profiles.get("other")),
        findings=rank(found["model"]), other_findings=rank(found.get("other", [])),
        seconds=0.0, warnings=warnings,
    )
    if trace is not None:
        result.write_trace(trace, protect=reads)
    result.seconds = time.perf_counter() - started
    if html is not None:
        result.write_html(html, protect=reads)
    return result


# The levels below ONNX Runtime's default tried, in order, where it does not open the model.
_LOWER_LEVELS = ("extended", "basic", "disabled")
_CANNOT_OPEN = "ONNX Runtime cannot open the"


def files_read(*sources: Any) -> list[Path]:
    """The files a command reads: models given as paths (``(what was given, the loaded
    model)`` pairs) with their external data, and the other paths given (inputs, a
    configuration); a folder of inputs stands for its ``input_N.pb`` files."""
    found: list[Path] = []
    for source in sources:
        if isinstance(source, tuple):
            given, loaded = source
            if isinstance(given, (str, os.PathLike)):
                found.append(Path(given))
            if loaded is not None:
                found += [Path(p) for p in model_io.data_files(loaded)]
        elif isinstance(source, (str, os.PathLike)):
            path = Path(source)
            found += feed_files(path) if path.is_dir() else [path]
    return found


def _moved(model: ModelProfile, other: ModelProfile | None) -> list[dict[str, Any]]:
    """Op types of both models matched: where the time moved, largest change first."""
    if other is None:
        return []
    mine = {row.op_type: row for row in model.op_types}
    theirs = {row.op_type: row for row in other.op_types}
    rows = []
    for op_type in sorted(set(mine) | set(theirs)):
        a, b = mine.get(op_type), theirs.get(op_type)
        model_ms = a.ms if a else 0.0
        other_ms = b.ms if b else 0.0
        rows.append({"op_type": op_type, "model_ms": model_ms, "other_ms": other_ms,
                     "delta_ms": model_ms - other_ms, "model_count": a.count if a else 0,
                     "other_count": b.count if b else 0})
    rows.sort(key=lambda row: (-abs(row["delta_ms"]), row["op_type"]))
    return rows


# --------------------------------------------------------------------------------------------
# Trying the fixes


@dataclasses.dataclass
class _Candidate:
    finding: Finding
    arm: Arm
    batch: int


def _try(findings: list[Finding], model: onnx.ModelProto, feeds: Mapping[str, np.ndarray],
         settings: Settings, warmup: int, runs: int, latency_ms: float, confidence: float,
         resamples: int, seed: int, warnings: list[str], progress: Progress | None) -> None:
    """Measure each finding's trial against the model as profiled, in rounds taken as the
    profile's are (:func:`graphfix.validate.timing.measure_runs`): ``runs`` of them, or as many
    as :data:`TRY_SECONDS` of timed calls allow, at least :data:`TRY_MIN_ROUNDS`; each
    finding's ``measured`` (or ``note``) is set."""
    candidates = []
    for index, found in enumerate(findings):
        if found.trial is None:
            continue
        label = f"fix{index}"
        try:
            arm, batch = _trial_arm(label, found.trial, model, feeds, settings)
        except GraphfixError as err:
            found.note = f"not tried: {err}"
            continue
        if arm is None:
            found.note = "not tried: the pass changes nothing in this model"
            continue
        candidates.append(_Candidate(found, arm, batch))
    if not candidates:
        return
    base = Arm("as profiled", Config("as profiled", model, settings.optimization), settings,
               feeds)
    arms = [base] + [c.arm for c in candidates]
    per_round = latency_ms / 1e3 * sum(c.batch for c in candidates) + latency_ms / 1e3
    rounds = max(TRY_MIN_ROUNDS, min(runs, int(TRY_SECONDS / max(per_round, 1e-6))))
    try:
        trials = measure_runs(arms, warmup=min(warmup, rounds), runs=rounds,
                              progress=progress, step="try fixes")
    except Exception as err:  # noqa: BLE001 - ONNX Runtime's own errors too: findings stand
        warnings.append(f"the fixes could not be measured: {first_line(err)}")
        return
    for candidate in candidates:
        statistic = candidate.finding.trial.statistic if candidate.finding.trial else "median"
        baseline = trials.times["as profiled"]
        fixed = [[t / candidate.batch for t in block] for block in trials.times[candidate.arm.label]]
        comparison = bootstrap_speedup(
            baseline, fixed, confidence=confidence, resamples=resamples, seed=seed,
            statistic=statistic)
        quantile = {"median": 0.5, "p90": 0.9, "p99": 0.99}[statistic]
        candidate.finding.measured = Speedup.of(
            comparison, "throughput" if candidate.batch > 1 else statistic,
            float(np.quantile(np.ravel(baseline), quantile)),
            float(np.quantile(np.ravel(fixed), quantile)))
        if candidate.finding.measured.verdict == SLOWER:  # the evidence stands, not the fix
            candidate.finding.note = ("the fix above measured slower here: do not apply it on "
                                      "this machine" + (f"; {candidate.finding.note}"
                                                        if candidate.finding.note else ""))


def _trial_arm(label: str, trial: Trial, model: onnx.ModelProto,
               feeds: Mapping[str, np.ndarray], settings: Settings
               ) -> tuple[Arm | None, int]:
    """The configuration a trial measures: the passes' output (checked for parity), changed
    settings, or the inputs at another batch size."""
    fixed = model
    if trial.passes:
        fixed = onnx.ModelProto()
        fixed.CopyFrom(model)
        modified = False
        for name in trial.passes:
            step = registry.get(name)()
            result = step(fixed)
            fixed, modified = result.model, modified or result.modified
        if not modified:
            return None, 1
        parity = check_parity(model, fixed, feeds=[dict(feeds)])
        if not parity.passed:
            raise BenchmarkError(f"the fixed model fails parity: {parity.describe()}")
    changed = settings.replace(**dict(trial.settings)) if trial.settings else settings
    batch = trial.batch or 1
    feed = dict(feeds)
    if trial.batch is not None:
        dynamic = {spec.name for spec in input_specs(model, values=False)
                   if spec.dims and not isinstance(spec.dims[0], int)}
        feed = {name: (np.concatenate([value] * batch, axis=0) if name in dynamic else value)
                for name, value in feeds.items()}
        # A leading dynamic axis is not always a batch (a graph net's node list, a segment
        # vector, a sequence a state runs over): a size the model refuses is no trial, nor
        # one whose outputs are not the outputs of one input set repeated.
        try:
            session = model_io.ort_session(fixed)
            names = [o.name for o in session.get_outputs()]
            single = dict(zip(names, session.run(names, dict(feeds))))
            batched = dict(zip(names, session.run(names, feed)))
        except Exception as err:  # noqa: BLE001 - ONNX Runtime raises several types
            raise BenchmarkError(f"the model does not run at {batch}x its leading dynamic "
                                 f"axis: {first_line(err)}") from None
        unbatched = not_a_batch(single, batched, batch)
        if unbatched is not None:
            raise BenchmarkError(unbatched)
    try:
        return Arm(label, Config(label, fixed, changed.optimization), changed, feed), batch
    except (TypeError, ValueError) as err:
        raise BenchmarkError(first_line(err)) from None


# --------------------------------------------------------------------------------------------
# For a terminal


def _profile_head(profile: dict[str, Any]) -> list[str]:
    a = profile["accounting"]
    setup = f"session set-up {a['session_create_ms']:.1f} ms"
    return [
        f"{profile['name']}: median {a['latency_ms']:.3f} ms, {tail_text(a)}; "
        f"with ORT's profiler {a['profiled_ms']:.3f} ms ({a['profiler_overhead']:.2f}x); {setup}",
        f"  node times account for {a['accounted']:.1%} of a call (framework overhead "
        f"{a['framework_ms']:.3f} ms); layout/dtype glue {a['glue_share']:.1%}, compute "
        f"{a['compute_share']:.1%}"
        + (f"; Memcpy {a['memcpy_nodes']} node(s), {size_text(a['memcpy_bytes'])}/call"
           if a["memcpy_nodes"] else "")
        + (f"; {a['cpu_nodes']} node(s) on the CPU provider ({a['cpu_ms']:.3f} ms)"
           if a["cpu_nodes"] else ""),
        *([f"  inputs: {shapes_text(profile['input_shapes'])}"]
          if profile.get("input_shapes") else []),
    ]


def _findings_lines(findings: list[dict[str, Any]]) -> list[str]:
    if not findings:
        return ["  none: nothing in this run supports a finding"]
    lines = []
    for index, found in enumerate(findings, 1):
        lines.append(f"  {index}. {found['kind']}: {found['reason']}")
        lines.append(f"     fix: {found['fix']}")
        measured = found.get("measured")
        if measured:
            what = "" if measured["statistic"] == "median" else f" {measured['statistic']}"
            lines.append(
                f"     measured here: {measured['speedup']:.2f}x [{measured['ci_low']:.2f}, "
                f"{measured['ci_high']:.2f}] {measured['verdict']} ({what.strip() or 'median'} "
                f"{measured['baseline_ms']:.3f} -> {measured['candidate_ms']:.3f} ms)")
        if found.get("note"):
            lines.append(f"     note: {found['note']}")
    return lines


def format_profile(data: dict[str, Any], top: int = 10) -> str:
    """A profile (``ProfileResult.to_dict()``) for a terminal: accounting, the op types and
    the slowest nodes, the comparison with the other model, and the ranked findings."""
    settings = data["settings"]["session_options"]
    threads = settings["intra_op_num_threads"] or "ORT's default"
    lines = [f"provider {data['provider']}, {threads} thread(s), {data['warmup']} warm-up + "
             f"{data['runs']} timed calls"]
    model, other = data["model"], data.get("other")
    lines += _profile_head(model)
    if other:
        lines += _profile_head(other)
        c = data.get("comparison")
        if c:
            lines.append(f"{model['name']} vs {other['name']}: {c['speedup']:.3f}x "
                         f"[{c['ci_low']:.3f}, {c['ci_high']:.3f}]: {c['verdict']}")
        rows = [[row["op_type"], str(row["model_count"]), f"{row['model_ms']:.3f}",
                 str(row["other_count"]), f"{row['other_ms']:.3f}", f"{row['delta_ms']:+.3f}"]
                for row in data["moved"][:top]]
        lines += ["", "where the time moved (ms per call):"]
        lines += table(rows, ["op type", "nodes", model["name"][:24], "nodes",
                               other["name"][:24], "change"])
    else:
        rows = [[row["op_type"], str(row["count"]), f"{row['ms']:.3f}", f"{row['share']:.1%}",
                 ",".join(p.replace("ExecutionProvider", "") for p in row["providers"])]
                for row in model["op_types"][:top]]
        lines += ["", "op types (ms per call):"]
        lines += table(rows, ["op type", "nodes", "ms", "share", "provider"])
    rows = []
    for node in model["nodes"][:top]:
        shapes = ", ".join(f"{t}{d}" for s in node["output_shapes"] for t, d in s.items())
        rows.append([node["name"][:40], node["op_type"], f"{node['ms']:.3f}",
                     f"{node['share']:.1%}", shapes[:36],
                     ", ".join(node["stands_for"])[:40]])
    lines += ["", f"slowest nodes of {model['name']}:"]
    lines += table(rows, ["node", "op type", "ms", "share", "output", "stands for"])
    lines += ["", "findings, most worth doing first:"]
    lines += _findings_lines(data["findings"])
    if other:
        lines += [f"findings for {other['name']}:"]
        lines += _findings_lines(data.get("other_findings", []))
    lines += [f"warning: {w}" for w in data.get("warnings", [])]
    lines.append(f"({data['seconds']:.1f}s)")
    return "\n".join(lines)
