"""Reports: facts about a model, per-pass results, and the JSON a CI job reads. The types here
are plain data and import nothing of graphfix (errors carry a report); reading facts off a model
is :mod:`graphfix.facts`'s work.

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
  tolerance_used, ...}]), ``original_spread`` (null unless parity failed by value: how far
  ONNX Runtime's default optimizations move the original itself where each output failed,
  ``{optimization, runs: {name: input set}, outputs: {name: tolerance used}}``));
- ``bench``: the benchmark result or null (see :mod:`graphfix.validate.bench`);
- ``warnings``: everything the run warned about, in order; ``written``: output path or null;
- ``left_out``: what the run left out because its output did not load, broke parity or
  failed: [{``pass``, ``position`` (in the pipeline, from 0), ``part`` ("the pass", or what a
  fallback leaves out, such as "onnxsim's graph optimizers"), ``reason``}];
- ``error``: why nothing was written (a refused parity check or speedup), or null.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

__all__ = [
    "SCHEMA",
    "TensorFacts",
    "ModelFacts",
    "PassReport",
    "Report",
    "format_summary",
    "table",
    "num",
    "percent",
    "size_text",
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
# Terminal summary


def size_text(n: int) -> str:
    if n < 0:
        return "?"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def shapes_text(shapes: dict[str, Any]) -> str:
    """Input shapes by name (a list of sizes; anything else as it is), for a terminal line:
    ``image 1x3x8x8, mask 1x8``."""
    return ", ".join(f"{name} " + ("x".join(map(str, dims)) if isinstance(dims, (list, tuple))
                                   and dims else str(dims) if dims != [] else "scalar")
                     for name, dims in shapes.items())


def table(rows: list[list[str]], header: list[str]) -> list[str]:
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
        lines += table(rows, ["pass", "nodes", "time", "result", "stats"])
    if report.input and report.output:
        i, o = report.input, report.output
        lines.append("")
        lines += table(
            [
                ["nodes", str(i.nodes), str(o.nodes)],
                ["Transposes", str(i.transposes), str(o.transposes)],
                ["initializer inputs", str(i.initializer_inputs), str(o.initializer_inputs)],
                ["size", size_text(i.size_bytes), size_text(o.size_bytes)],
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
        elif worst and worst.get("max_abs_error") is None:  # strings, booleans: exact
            detail = f" (worst output {worst['name']!r}: equal, compared exactly)"
        elif worst:
            detail = (
                f" (worst output {worst['name']!r}: max abs error "
                f"{num(worst.get('max_abs_error'))}, {percent(worst.get('tolerance_used'))} "
                "of tolerance)"
            )
        runs = len(parity.get("runs", []))
        lines.append(
            f"parity: {verdict} on {runs} input set(s) in {parity.get('seconds', 0):.1f}s{detail}"
        )
        # what the check could not do as asked (sizes the original rejects, inputs checked at
        # their defaults only, ...): a pass verdict means only what was checked
        lines += [f"  note: {note}" for note in parity.get("notes", []) if note]
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
            f"speedup: {num(b.get('speedup'))}x "
            f"[{num(b.get('ci_low'))}, {num(b.get('ci_high'))}] {b.get('verdict', '')}"
        )
    for warning in report.warnings:
        lines.append(f"warning: {warning}")
    if report.written:
        lines.append(f"wrote {report.written} in {report.seconds:.1f}s")
    return "\n".join(lines)


def percent(value: Any) -> str:
    """A share as a percentage; past ten times the whole as a multiple (2.14e+04x, not
    2139411.1%), which reads at a glance."""
    if not isinstance(value, (int, float)):
        return str(value)
    return f"{value:.3g}x" if value >= 10 else f"{value:.1%}"


def num(value: Any) -> str:
    if isinstance(value, (int, float)):
        return f"{value:.3g}"
    return str(value)

