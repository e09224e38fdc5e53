"""Reports: facts about a model, per-pass results, and the JSON a CI job reads.

JSON schema ``graphfix.report/1`` (``Report.to_dict()``), stable within a major version:

- ``schema``: "graphfix.report/1"; ``graphfix_version``; ``seconds``: wall time of the whole run;
- ``input`` / ``output``: model facts (see :class:`ModelFacts`): ``ir_version``, ``opsets``
  ({domain: version}, "" is ai.onnx), ``producer``, ``size_bytes``, ``external_data``, ``nodes``
  (all graphs), ``op_histogram`` ({op type: count}), ``transposes``, ``initializers``,
  ``initializer_inputs``, ``subgraphs``, ``inputs`` / ``outputs``
  ([{name, dtype, shape}], a dynamic dimension is its symbol or null), ``dynamic_dims``;
- ``passes``: one entry per pass run, in order: ``name``, ``options``, ``modified``, ``skipped``
  (reason or null), ``seconds``, ``nodes_before``, ``nodes_after``, ``op_delta``
  ({op type: change}), ``stats`` ({name: int}), ``warnings``;
- ``verify``: whether parity was checked; ``parity``: the parity result or null
  (:meth:`graphfix.validate.parity.ParityResult.to_dict`: ``passed``, ``problem``, ``provider``,
  ``seconds``, ``runs`` (input shapes of each run), ``notes``, ``worst`` (an output name),
  ``outputs`` ([{name, dtype, shape, passed, reason, max_abs_error, mean_abs_error,
  p99_abs_error, max_rel_error, cosine, scale, atol, rtol, mismatched, elements,
  tolerance_used, ...}]));
- ``bench``: the benchmark result or null (see :mod:`graphfix.validate.bench`);
- ``warnings``: everything the run warned about, in order; ``written``: output path or null;
- ``left_out``: what the run left out because its output did not load, broke parity or
  failed: [{``pass``, ``position`` (in the pipeline, from 0), ``part`` ("the pass", or what a
  fallback leaves out, such as "onnxsim's graph optimizers"), ``reason``}];
- ``error``: why nothing was written (a refused parity check or speedup), or null.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from typing import Any

import onnx

from graphfix.graph import STANDARD_DOMAINS, count_nodes, dims, graphs, subgraphs
from graphfix.model_io import weight_bytes

__all__ = [
    "SCHEMA",
    "TensorFacts",
    "ModelFacts",
    "PassReport",
    "Report",
    "model_facts",
    "count_nodes",
    "op_histogram",
    "format_summary",
    "format_parity",
    "format_bench",
    "format_doctor",
    "format_profile",
    "format_tune",
    "graphs",
]

SCHEMA = "graphfix.report/1"


@dataclasses.dataclass
class TensorFacts:
    name: str
    dtype: str
    # One entry per dimension: an int, the symbol of a dynamic dimension, or None (unknown).
    shape: list[int | str | None] | None
    # The negative size the model writes for its unknown dimensions (-1, PaddlePaddle's way).
    unknown_written_as: int | None = None


@dataclasses.dataclass
class ModelFacts:
    ir_version: int
    opsets: dict[str, int]
    producer: str
    size_bytes: int
    external_data: bool
    nodes: int
    op_histogram: dict[str, int]
    transposes: int
    initializers: int
    initializer_inputs: int
    subgraphs: int
    inputs: list[TensorFacts]
    outputs: list[TensorFacts]
    dynamic_dims: list[str]
    # Graph inputs that are initializers (the IR 3 way), by name.
    initializer_input_names: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class PassReport:
    name: str
    options: dict[str, Any]
    modified: bool
    skipped: str | None
    seconds: float
    nodes_before: int
    nodes_after: int
    op_delta: dict[str, int]
    stats: dict[str, int]
    warnings: list[str]
    details: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Report:
    graphfix_version: str
    input: ModelFacts | None = None
    output: ModelFacts | None = None
    passes: list[PassReport] = dataclasses.field(default_factory=list)
    verify: bool = True
    parity: dict[str, Any] | None = None
    bench: dict[str, Any] | None = None
    warnings: list[str] = dataclasses.field(default_factory=list)
    # What the run left out because it broke the model: [{pass, position, part, reason}].
    left_out: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # What the speed gate measured and decided for convert-precision / fuse-transformer.
    speed_gate: dict[str, Any] | None = None
    seconds: float = 0.0
    written: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        return {"schema": SCHEMA, **data}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False, default=_json_default)


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


# --------------------------------------------------------------------------------------------
# Model facts


_MEASURED_SIZE_LIMIT = 64 * 1024 * 1024


def _serialized_size(model: onnx.ModelProto) -> int:
    """The model's size in bytes: serialized below 64 MiB of weights; above, the weights' bytes
    alone (measuring a large message serializes, hence copies, all of it)."""
    weights = weight_bytes(model)
    if weights >= _MEASURED_SIZE_LIMIT:
        return weights
    try:
        return model.ByteSize()
    except ValueError:
        return weights


def op_histogram(model: onnx.ModelProto) -> dict[str, int]:
    """Op types of all graphs (subgraphs included) and of local functions' bodies (counted
    once each, as :func:`graphfix.graph.count_nodes` counts), custom domains as ``domain::Op``."""
    counts: collections.Counter[str] = collections.Counter()
    bodies = [model.graph, *(sub for f in model.functions for n in f.node for sub in subgraphs(n))]
    nodes = [n for body in bodies for g in graphs(body) for n in g.node]
    nodes += [n for f in model.functions for n in f.node]
    for node in nodes:
        domain = node.domain if node.domain not in STANDARD_DOMAINS else ""
        counts[f"{domain}::{node.op_type}" if domain else node.op_type] += 1
    return dict(sorted(counts.items()))


def _dtype_name(elem_type: int) -> str:
    """An element type's name ("float", "int64"); one that no onnx names is "type 99"."""
    try:
        return onnx.TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"type {elem_type}"


def _tensor_facts(value: onnx.ValueInfoProto, dynamic: set[str]) -> TensorFacts:
    vtype = value.type
    if vtype.HasField("tensor_type"):
        ttype = vtype.tensor_type
        dtype = _dtype_name(ttype.elem_type)
        sizes = dims(value)
        shape = None if sizes is None else list(sizes)
        dynamic.update(d for d in shape or () if isinstance(d, str))
        written = [d.dim_value for d in ttype.shape.dim if d.HasField("dim_value")]
        return TensorFacts(value.name, dtype, shape,
                           unknown_written_as=min(written) if written and min(written) < 0 else None)
    kind = vtype.WhichOneof("value") or "unknown"
    return TensorFacts(value.name, kind.removesuffix("_type"), None)


def model_facts(
    model: onnx.ModelProto, *, size_bytes: int | None = None, external_data: bool = False
) -> ModelFacts:
    """What is in a model: versions, size, op histogram, Transposes, signature, dynamic dims."""
    histogram = op_histogram(model)
    initializer_names = {init.name for init in model.graph.initializer}
    dynamic: set[str] = set()
    inputs = [_tensor_facts(v, dynamic) for v in model.graph.input]
    outputs = [_tensor_facts(v, dynamic) for v in model.graph.output]
    every = list(graphs(model.graph))
    if size_bytes is None:
        size_bytes = _serialized_size(model)
    return ModelFacts(
        ir_version=model.ir_version,
        opsets={imp.domain or "": imp.version for imp in model.opset_import},
        producer=" ".join(p for p in (model.producer_name, model.producer_version) if p),
        size_bytes=size_bytes,
        external_data=external_data,
        nodes=sum(histogram.values()),
        op_histogram=histogram,
        transposes=histogram.get("Transpose", 0),
        initializers=sum(len(g.initializer) for g in every),
        initializer_inputs=sum(1 for v in model.graph.input if v.name in initializer_names),
        initializer_input_names=[v.name for v in model.graph.input if v.name in initializer_names],
        subgraphs=len(every) - 1,
        inputs=inputs,
        outputs=outputs,
        dynamic_dims=sorted(dynamic),
    )


# --------------------------------------------------------------------------------------------
# Terminal summary


def _size(n: int) -> str:
    if n < 0:
        return "?"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _table(rows: list[list[str]], header: list[str]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda cells: "  ".join(  # noqa: E731
        c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
    )
    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def format_summary(report: Report) -> str:
    """A short table of the run for a terminal."""
    lines: list[str] = []
    rows = []
    for p in report.passes:
        status = f"skipped: {p.skipped}" if p.skipped else ("changed" if p.modified else "no change")
        # Before/after figures are in the nodes column and the model table; show what changed.
        highlights = ", ".join(
            f"{k}={v}" for k, v in p.stats.items()
            if v and not k.endswith(("_before", "_after"))
        )
        rows.append(
            [p.name, f"{p.nodes_before} -> {p.nodes_after}", f"{p.seconds:.2f}s", status, highlights]
        )
    if rows:
        lines += _table(rows, ["pass", "nodes", "time", "result", "stats"])
    if report.input and report.output:
        i, o = report.input, report.output
        lines.append("")
        lines += _table(
            [
                ["nodes", str(i.nodes), str(o.nodes)],
                ["Transposes", str(i.transposes), str(o.transposes)],
                ["initializer inputs", str(i.initializer_inputs), str(o.initializer_inputs)],
                ["size", _size(i.size_bytes), _size(o.size_bytes)],
            ],
            ["model", "before", "after"],
        )
    if report.parity is not None:
        lines.append("")
        parity = report.parity
        verdict = "passed" if parity.get("passed") else "FAILED"
        worst = next(
            (o for o in parity.get("outputs", []) if o.get("name") == parity.get("worst")), None
        )
        detail = ""
        if parity.get("problem"):
            detail = f" ({parity['problem']})"
        elif worst:
            detail = (
                f" (worst output {worst['name']!r}: max abs error "
                f"{_num(worst.get('max_abs_error'))}, {_percent(worst.get('tolerance_used'))} "
                "of tolerance)"
            )
        runs = len(parity.get("runs", []))
        lines.append(
            f"parity: {verdict} on {runs} input set(s) in {parity.get('seconds', 0):.1f}s{detail}"
        )
    elif not report.verify:
        lines.append("")
        lines.append("parity: not checked (--no-verify)")
    if report.speed_gate is not None:
        for verdict in report.speed_gate.get("verdicts", []):
            if verdict.get("note") not in report.warnings:
                lines.append(f"speed gate: {verdict.get('note', '')}")
    if report.bench is not None:
        b = report.bench
        lines.append(
            f"speedup: {_num(b.get('speedup'))}x "
            f"[{_num(b.get('ci_low'))}, {_num(b.get('ci_high'))}] {b.get('verdict', '')}"
        )
    for warning in report.warnings:
        lines.append(f"warning: {warning}")
    if report.written:
        lines.append(f"wrote {report.written} in {report.seconds:.1f}s")
    return "\n".join(lines)


def _percent(value: Any) -> str:
    return f"{value:.1%}" if isinstance(value, (int, float)) else str(value)


def _num(value: Any) -> str:
    if isinstance(value, (int, float)):
        return f"{value:.3g}"
    return str(value)


def format_parity(parity: dict[str, Any]) -> str:
    """The outputs of a parity check (``ParityResult.to_dict()``) as a table, then the verdict."""
    rows = []
    for o in parity.get("outputs", []):
        rows.append([
            o["name"],
            f"{o['dtype']}{o['shape'] if o.get('shape') is not None else ''}",
            _num(o.get("max_abs_error")),
            _num(o.get("max_rel_error")),
            _num(o.get("cosine")) if o.get("cosine") is not None else "-",
            _percent(o.get("tolerance_used")),
            "ok" if o["passed"] else "FAIL",
        ])
    lines = _table(rows, ["output", "type", "max abs", "max rel", "cosine", "of tol", ""]) if rows else []
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
    lines.append(f"{verdict} ({parity.get('seconds', 0):.1f}s on {parity.get('provider')})")
    return "\n".join(lines)


def format_bench(bench: dict[str, Any], name: str, other: str | None) -> str:
    """A benchmark (``BenchResult.to_dict()``) as a latency table and the speedup line."""
    labels = {"candidate": name, "baseline": other or "baseline",
              "candidate_offline": f"{name} (ORT opt off)",
              "baseline_offline": f"{other or 'baseline'} (ORT opt off)"}
    rows = []
    for key, label in labels.items():
        stats = bench.get(key)
        if stats:
            rows.append([label, f"{stats['median_ms']:.3f}", f"{stats['p90_ms']:.3f}",
                         f"{stats['min_ms']:.3f}", f"{stats['session_create_ms']:.0f}"])
    lines = _table(rows, ["model", "median ms", "p90 ms", "min ms", "session ms"])
    lines.append(
        f"provider {bench['provider']} ({', '.join(bench['session_providers'])}), "
        f"{bench['threads']} thread(s), {bench['warmup']} warm-up + {bench['runs']} rounds"
        + (" (one session alive at a time: threads spin)"
           if bench.get("method") == "alone" else "")
    )
    if bench.get("speedup") is not None:
        lines.append(
            f"speedup {_num(bench['speedup'])}x, {bench['confidence']:.0%} interval "
            f"[{_num(bench['ci_low'])}, {_num(bench['ci_high'])}]: {bench['verdict']}"
        )
    offline = bench.get("offline_speedup")
    if offline:
        lines.append(
            f"{name} with ORT optimizations off vs {other or 'baseline'} under ORT defaults: "
            f"{_num(offline['speedup'])}x [{_num(offline['ci_low'])}, "
            f"{_num(offline['ci_high'])}]: {offline['verdict']}"
        )
    both = bench.get("both_offline_speedup")
    if both:
        lines.append(
            f"both with ORT optimizations off: {_num(both['speedup'])}x "
            f"[{_num(both['ci_low'])}, {_num(both['ci_high'])}]: {both['verdict']}"
        )
    for label, placement in bench.get("placement", {}).items():
        nodes = ", ".join(f"{p.replace('ExecutionProvider', '')} {n}"
                          for p, n in placement.get("nodes", {}).items())
        if nodes:
            lines.append(f"placement {labels.get(label, label)}: {nodes}, "
                         f"Memcpy {placement.get('memcpy_nodes', 0)}")
    lines += [f"warning: {w}" for w in bench.get("warnings", [])]
    return "\n".join(lines)


def format_doctor(found: dict[str, Any]) -> str:
    """The environment check (``DoctorReport.to_dict()``) for a terminal."""
    lines = ["versions: " + ", ".join(
        f"{k} {v or 'missing'}" for k, v in found["versions"].items())]
    lines.append(f"onnxruntime from: {found.get('onnxruntime_distribution') or '?'}"
                 + (f" (built for CUDA {found['onnxruntime_cuda_version']})"
                    if found.get("onnxruntime_cuda_version") else ""))
    lines.append(f"highest IR version ORT loads: {found.get('max_ir_version')}")
    for key, status in found["providers"].items():
        state = "loads" if status["loadable"] else (
            "listed but does not load" if status["available"] else "not available")
        lines.append(f"provider {key}: {state}"
                     + (f" ({status['error']})" if status.get("error") and not status["loadable"]
                        else ""))
    for library in found.get("libraries", []):
        lines.append(f"library {library['name']} ({library['role']}): "
                     + (library.get("path") or "found" if library["found"] else "missing"))
    for gpu in found.get("gpus", []):
        lines.append(f"GPU {gpu['name']}, {gpu.get('memory_total_mib')} MiB, "
                     f"driver {gpu.get('driver_version')}")
    for problem in found.get("problems", []):
        lines.append(f"problem ({problem['provider']}): {problem['what']}\n  fix: {problem['fix']}")
    lines.append("ok" if found.get("ok") else f"not usable: {found.get('requested') or 'cpu'}")
    return "\n".join(lines)


def format_inspection(found: dict[str, Any]) -> str:
    """``graphfix inspect``'s text, from :meth:`graphfix.inspection.Inspection.to_dict`."""
    lines = [str(found["model"])]
    opsets = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in found["opsets"].items())
    lines.append(f"  IR {found['ir_version']}, opsets: {opsets}, "
                 f"producer: {found['producer'] or '?'}")
    lines.append(f"  size: {found['size_bytes']} bytes"
                 f"{' (external data)' if found['external_data'] else ''}, "
                 f"{found['nodes']} nodes, {found['initializers']} initializers, "
                 f"{found['subgraphs']} subgraphs")
    listed = set(found["initializer_input_names"])
    for kind, tensors in (("input", [t for t in found["inputs"] if t["name"] not in listed]),
                          ("output", found["outputs"])):
        for t in tensors:
            shape = "?" if t["shape"] is None else "[" + ", ".join(
                "?" if d is None else str(d) for d in t["shape"]) + "]"
            note = (f" ({t['unknown_written_as']} read as an unknown size)"
                    if t.get("unknown_written_as") is not None else "")
            lines.append(f"  {kind:6} {t['name']}: {t['dtype']}{shape}{note}")
    ops = ", ".join(f"{op} {n}" for op, n in sorted(found["op_histogram"].items(),
                                                      key=lambda kv: (-kv[1], kv[0])))
    lines.append(f"  ops: {ops or 'none'}")
    lines.append(f"  Transposes: {found['transposes']}")
    lines.append(f"  initializers listed as inputs: {found['initializer_inputs']}")
    if found["dynamic_dims"]:
        lines.append(f"  dynamic dimensions: {', '.join(found['dynamic_dims'])}")
    lines += [f"  warning: {w}" for w in found["warnings"]]
    lines.append("graphfix would (structural passes; run `graphfix optimize` for the rest):")
    lines += [f"  {name}: {change}" for name, change in found["would_change"].items()]
    return "\n".join(lines)


def _profile_head(profile: dict[str, Any]) -> list[str]:
    a = profile["accounting"]
    setup = f"session set-up {a['session_create_ms']:.1f} ms"
    return [
        f"{profile['name']}: median {a['latency_ms']:.3f} ms, p99 {a['p99_ms']:.3f} ms; "
        f"with ORT's profiler {a['profiled_ms']:.3f} ms ({a['profiler_overhead']:.2f}x); {setup}",
        f"  node times account for {a['accounted']:.1%} of a call (framework overhead "
        f"{a['framework_ms']:.3f} ms); layout/dtype glue {a['glue_share']:.1%}, compute "
        f"{a['compute_share']:.1%}"
        + (f"; Memcpy {a['memcpy_nodes']} node(s), {_size(a['memcpy_bytes'])}/call"
           if a["memcpy_nodes"] else "")
        + (f"; {a['cpu_nodes']} node(s) on the CPU provider ({a['cpu_ms']:.3f} ms)"
           if a["cpu_nodes"] else ""),
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
        lines += _table(rows, ["op type", "nodes", model["name"][:24], "nodes",
                               other["name"][:24], "change"])
    else:
        rows = [[row["op_type"], str(row["count"]), f"{row['ms']:.3f}", f"{row['share']:.1%}",
                 ",".join(p.replace("ExecutionProvider", "") for p in row["providers"])]
                for row in model["op_types"][:top]]
        lines += ["", "op types (ms per call):"]
        lines += _table(rows, ["op type", "nodes", "ms", "share", "provider"])
    rows = []
    for node in model["nodes"][:top]:
        shapes = ", ".join(f"{t}{d}" for s in node["output_shapes"] for t, d in s.items())
        rows.append([node["name"][:40], node["op_type"], f"{node['ms']:.3f}",
                     f"{node['share']:.1%}", shapes[:36],
                     ", ".join(node["stands_for"])[:40]])
    lines += ["", f"slowest nodes of {model['name']}:"]
    lines += _table(rows, ["node", "op type", "ms", "share", "output", "stands for"])
    lines += ["", "findings, most worth doing first:"]
    lines += _findings_lines(data["findings"])
    if other:
        lines += [f"findings for {other['name']}:"]
        lines += _findings_lines(data.get("other_findings", []))
    lines += [f"warning: {w}" for w in data.get("warnings", [])]
    lines.append(f"({data['seconds']:.1f}s)")
    return "\n".join(lines)


def format_tune(data: dict[str, Any]) -> str:
    """A tuning run (``TuneResult.to_dict()``): the candidates' table, the decision, the
    configuration and the Python snippet."""
    per = " per sample" if data["objective"] == "throughput" else ""
    rows = []
    for c in data["candidates"]:
        s = c.get("speedup")
        measured = c["median_ms"] is not None
        rows.append([
            c["name"][:40], c["status"],
            f"{c['median_ms']:.3f}" if measured else "-",
            f"{c['p90_ms']:.3f}" if measured else "-",
            f"{c['p99_ms']:.3f}" if measured else "-",
            f"{c['cv']:.2f}" if measured else "-",
            _size(c["peak_bytes"]) if c.get("peak_bytes") is not None else "-",
            f"{s['speedup']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]" if s else "-",
            str(c["rounds"]),
        ])
    lines = [f"provider {data['provider']}, objective {data['objective']}, "
             f"{data['calls_per_block']} calls per block after {data['warmup_per_block']} "
             f"warm-up, one session alive at a time ({data['seconds']:.1f} s of a "
             f"{data['budget_s']:g} s budget)"]
    lines += _table(rows, ["candidate", "status", f"median ms{per}", "p90", "p99", "cv",
                           "peak mem", "speedup vs default", "rounds"])
    for c in data["candidates"]:
        if c["reason"] and c["status"] in ("dropped", "not applicable"):
            lines.append(f"  {c['name']}: {c['status']}: {c['reason']}")
    aa = data.get("aa")
    if aa:
        lines.append(f"A/A (the default against itself): {aa['speedup']:.3f}x "
                     f"[{aa['ci_low']:.3f}, {aa['ci_high']:.3f}]: {aa['verdict']}")
    lines.append(f"winner: {data['winner']}: {data['reason']}")
    lines += [f"warning: {w}" for w in data.get("warnings", [])]
    lines += ["", "in your code:", data["snippet"].rstrip()]
    return "\n".join(lines)
