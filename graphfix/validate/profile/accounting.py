"""Where one model's time goes: its latency with and without ORT's profiler, per node and per
op type, and what the node times leave unexplained.

Each timed call of the profiled session is one ``model_run`` in ORT's trace. The call's node
times add up to less than the call: the rest is framework overhead (the executor between
nodes, the profiler's own bookkeeping, the Python binding converting inputs and outputs).
``accounted`` is the mean over timed calls of the sum of the call's node times, over the mean
call as the timer measured it: the glue and compute shares (each node's mean over the mean
call) add up to it, and the framework overhead is the rest (a median of per-call ratios did
not: 11.7% accounted beside a compute share of 15.8%).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from graphfix.validate.profile.trace import (
    GLUE_OPS,
    NodeTime,
    OpTypeTime,
    node_times,
    op_type_times,
    original_names,
    per_run_node_ms,
    read_runs,
)
from graphfix.validate.stats import LatencyStats
from graphfix.validate.timing import Measurement, Placement, parse_profile

__all__ = ["Accounting", "ModelProfile", "account"]

_MEMCPY = frozenset({"MemcpyToHost", "MemcpyFromHost"})


@dataclasses.dataclass
class Accounting:
    """How the node times add up against the measured call (means and medians in ms)."""

    latency_ms: float           # median call, profiler off
    p99_ms: float               # 99th percentile call, profiler off
    profiled_ms: float          # median call, profiler on
    profiler_overhead: float    # profiled_ms / latency_ms
    run_ms: float               # ORT's own median model_run, profiler on
    nodes_ms: float             # median over calls of the sum of node times
    accounted: float            # mean node sum / mean call (profiler on)
    framework_ms: float         # mean call - mean node sum (profiler on)
    glue_ms: float              # mean per call of the glue op types (trace.GLUE_OPS)
    glue_share: float
    compute_share: float        # share of the call in every other node
    memcpy_nodes: int
    memcpy_bytes: int           # per call
    cpu_nodes: int              # nodes on the CPU provider in a CUDA session
    cpu_ms: float
    session_create_ms: float    # the profiler-off session, as timed here
    session_init_ms: float | None  # ORT's own session_initialization (profiled session)
    calls: int = 0              # timed calls of the profiler-off session (p99's sample)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class ModelProfile:
    """One model, profiled."""

    label: str
    name: str
    stats: LatencyStats                 # profiler off
    profiled: LatencyStats              # profiler on
    accounting: Accounting
    nodes: list[NodeTime]
    op_types: list[OpTypeTime]
    placement: Placement
    input_shapes: dict[str, list[int]]
    traces: list[list[dict[str, Any]]] = dataclasses.field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "name": self.name,
            "stats": self.stats.to_dict(),
            "profiled": self.profiled.to_dict(),
            "accounting": self.accounting.to_dict(),
            "op_types": [row.to_dict() for row in self.op_types],
            "nodes": [row.to_dict() for row in self.nodes],
            "placement": self.placement.to_dict(),
            "input_shapes": {k: list(v) for k, v in self.input_shapes.items()},
        }


def account(
    label: str, name: str, model: onnx.ModelProto, measured: Measurement, plain: str,
    profiled: str, *, optimization: str, provider: str,
    input_shapes: Mapping[str, Sequence[int]],
) -> ModelProfile:
    """The profile of ``model`` from a measurement holding its profiler-off arm ``plain`` and
    its profiler-on arm ``profiled`` (whose traces are read here)."""
    events = [_load(path) for path in measured.traces[profiled]]
    blocks = measured.times[profiled]
    per_trace = _calls_per_trace(blocks, len(events), measured.together)
    traced = [read_runs(trace, count) for trace, count in zip(events, per_trace)]
    calls = np.asarray(measured.calls(profiled), dtype=np.float64)
    plain_calls = np.asarray(measured.calls(plain), dtype=np.float64)
    sums = np.concatenate([per_run_node_ms(t) for t in traced]) if traced else np.zeros(0)
    run_ms = np.asarray([ms for t in traced for ms in t.run_ms], dtype=np.float64)
    ort_names = {(str(e["name"])[: -len("_kernel_time")], str(e["args"].get("op_name", "")))
                 for t in traced for run in t.nodes[:1] for e in run}
    nodes = node_times(traced, float(calls.mean()), original_names(model, sorted(ort_names)))
    placement = parse_profile([e for trace in events for e in trace], provider=provider)
    if sums.size == calls.size and calls.size:
        accounted = float(sums.mean() / calls.mean())
    else:  # the trace lost runs (it should not): compare with ORT's own run times
        accounted = float(np.median(sums) / np.median(run_ms)) if run_ms.size else 0.0
    glue = sum(n.ms for n in nodes if n.op_type in GLUE_OPS)
    memcpy = [n for n in nodes if n.op_type in _MEMCPY]
    on_cpu = [n for n in nodes if provider == "cuda" and n.provider == "CPUExecutionProvider"
              and n.op_type not in _MEMCPY]
    mean_call = float(calls.mean())
    stats = measured.stats(plain, optimization)
    profiled_stats = measured.stats(profiled, optimization)
    accounting = Accounting(
        latency_ms=stats.median_ms,
        p99_ms=float(np.quantile(plain_calls, 0.99)),
        calls=int(plain_calls.size),
        profiled_ms=profiled_stats.median_ms,
        profiler_overhead=profiled_stats.median_ms / stats.median_ms,
        run_ms=float(np.median(run_ms)) if run_ms.size else 0.0,
        nodes_ms=float(np.median(sums)) if sums.size else 0.0,
        accounted=accounted,
        framework_ms=max(0.0, mean_call - float(sums.mean())) if sums.size else mean_call,
        glue_ms=glue,
        glue_share=glue / mean_call,
        compute_share=sum(n.share for n in nodes if n.op_type not in GLUE_OPS),
        memcpy_nodes=len(memcpy),
        memcpy_bytes=sum(n.output_bytes for n in memcpy),
        cpu_nodes=len(on_cpu),
        cpu_ms=sum(n.ms for n in on_cpu),
        session_create_ms=stats.session_create_ms,
        session_init_ms=next((t.session_init_ms for t in traced
                              if t.session_init_ms is not None), None),
    )
    return ModelProfile(label, name, stats, profiled_stats, accounting, nodes,
                        op_type_times(nodes), placement,
                        {k: [int(d) for d in v] for k, v in input_shapes.items()}, events)


def _load(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _calls_per_trace(blocks: Sequence[Sequence[float]], traces: int, together: bool) -> list[int]:
    """How many of each trace's last runs were timed: all rounds in the one trace of sessions
    open together; one block per trace (an opening each) otherwise."""
    if together:
        return [sum(len(block) for block in blocks)] * traces
    return [len(block) for block in blocks][:traces]
