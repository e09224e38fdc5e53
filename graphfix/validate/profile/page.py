"""The profile as one self-contained HTML page: no network, no external file.

It holds a summary per model, the findings, an op-type time chart drawn as inline SVG (one bar
per op type and model, on one scale, so two models compare at a glance) and a per-node table
that sorts on a click of its header (a few lines of inline script). Every bar carries its
figures as ``data-`` attributes (``data-model``, ``data-op``, ``data-ms``), so the page can be
checked against the JSON it was drawn from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from graphfix.validate.profile.findings import tail_text
from typing import Any

__all__ = ["render_page"]

_BAR_WIDTH = 560.0   # pixels of the longest bar
_ROW = 18            # pixels per bar
_LABEL = 190         # pixels for the op type's name
_COLOURS = {"model": "#3b6fb6", "other": "#d9822b"}

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;font-size:12px}th,td{padding:3px 8px;text-align:right}
th{cursor:pointer;background:#eee;position:sticky;top:0}td.l,th.l{text-align:left}
tr:nth-child(even){background:#f7f7f7}.finding{margin:8px 0;padding:8px;border-left:4px solid #3b6fb6;background:#f4f7fb}
.fix{font-family:monospace;font-size:12px}.muted{color:#777}svg text{font-size:11px}
"""

_SCRIPT = """
document.querySelectorAll('table.sortable th').forEach(function (th) {
  th.addEventListener('click', function () {
    var column = th.cellIndex;
    var body = th.closest('table').tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var descending = th.dataset.order !== 'desc';
    th.dataset.order = descending ? 'desc' : 'asc';
    rows.sort(function (a, b) {
      var x = a.cells[column].dataset.value, y = b.cells[column].dataset.value;
      var nx = parseFloat(x), ny = parseFloat(y);
      var order = (isNaN(nx) || isNaN(ny)) ? x.localeCompare(y) : nx - ny;
      return descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
"""


def _fmt(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}f}"


def render_page(data: Mapping[str, Any]) -> str:
    """The page for a ``graphfix.profile/1`` result (``ProfileResult.to_dict()``)."""
    profiles = [(key, data[key]) for key in ("model", "other") if data.get(key)]
    title = " vs ".join(p["name"] for _, p in profiles)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>graphfix profile: {escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>graphfix profile: {escape(title)}</h1>",
        f'<p class="muted">provider {escape(str(data["provider"]))}, {data["runs"]} timed calls '
        f'after {data["warmup"]} warm-up, sessions {escape(str(data["method"]))}</p>',
    ]
    for key, profile in profiles:
        parts.append(_summary(key, profile))
    if data.get("comparison"):
        c = data["comparison"]
        parts.append(f'<p id="comparison">{escape(profiles[0][1]["name"])} is '
                     f'{_fmt(c["speedup"], 2)}x [{_fmt(c["ci_low"], 2)}, {_fmt(c["ci_high"], 2)}]'
                     f' the speed of {escape(profiles[1][1]["name"])}: {escape(c["verdict"])}</p>')
    parts.append(_findings("Findings", data.get("findings", [])))
    if data.get("other"):
        parts.append(_findings(f"Findings for {data['other']['name']}",
                               data.get("other_findings", [])))
    parts.append("<h2>Time per op type</h2>")
    parts.append(_chart(profiles))
    for key, profile in profiles:
        parts.append(f"<h2>Nodes of {escape(profile['name'])}</h2>")
        parts.append(_node_table(key, profile["nodes"]))
    parts.append(f"<script>{_SCRIPT}</script></body></html>")
    return "\n".join(parts) + "\n"


def _summary(key: str, profile: Mapping[str, Any]) -> str:
    a = profile["accounting"]
    return (
        f'<p class="summary" data-model="{key}"><b>{escape(profile["name"])}</b>: median '
        f'{_fmt(a["latency_ms"])} ms, {escape(tail_text(a))}; profiler on '
        f'{_fmt(a["profiled_ms"])} ms ({_fmt(a["profiler_overhead"], 2)}x); node times account '
        f'for {a["accounted"]:.1%} of a call, framework overhead {_fmt(a["framework_ms"])} ms; '
        f'glue (Transpose, Reshape, Cast, Memcpy, ...) {a["glue_share"]:.1%}; session set-up '
        f'{_fmt(a["session_create_ms"], 1)} ms</p>'
    )


def _findings(heading: str, findings: Sequence[Mapping[str, Any]]) -> str:
    rows = [f"<h2>{escape(heading)}</h2>"]
    if not findings:
        rows.append('<p class="muted">none: nothing in this run supports a finding</p>')
    for found in findings:
        measured = found.get("measured")
        bought = ""
        if measured:
            bought = (f" &rarr; <b>{_fmt(measured['speedup'], 2)}x</b> "
                      f"[{_fmt(measured['ci_low'], 2)}, {_fmt(measured['ci_high'], 2)}] "
                      f"{escape(measured['verdict'])}")
        note = f'<div class="muted">{escape(found["note"])}</div>' if found.get("note") else ""
        rows.append(
            f'<div class="finding" data-kind="{escape(found["kind"])}"><b>'
            f'{escape(found["kind"])}</b>: {escape(found["reason"])}{bought}'
            f'<div class="fix">fix: {escape(found["fix"])}</div>{note}</div>')
    return "\n".join(rows)


def _chart(profiles: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """Horizontal bars, one per (op type, model), every op type of either model."""
    order: list[str] = []
    for _, profile in profiles:
        for row in profile["op_types"]:
            if row["op_type"] not in order:
                order.append(row["op_type"])
    times = {(key, row["op_type"]): row for key, profile in profiles
             for row in profile["op_types"]}
    largest = max((row["ms"] for row in times.values()), default=0.0) or 1.0
    per_op = len(profiles) * _ROW + 6
    height = len(order) * per_op + 30
    width = _LABEL + _BAR_WIDTH + 150
    parts = [f'<svg id="op-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{height}" role="img" aria-label="time per op type">']
    y = 4
    for op_type in order:
        parts.append(f'<text x="{_LABEL - 6}" y="{y + _ROW - 5}" text-anchor="end">'
                     f"{escape(op_type)}</text>")
        for key, profile in profiles:
            row = times.get((key, op_type))
            ms = row["ms"] if row else 0.0
            share = row["share"] if row else 0.0
            bar = _BAR_WIDTH * ms / largest
            parts.append(
                f'<rect class="bar" data-model="{key}" data-op="{escape(op_type)}" '
                f'data-ms="{ms!r}" x="{_LABEL}" y="{y}" width="{bar:.2f}" height="{_ROW - 3}" '
                f'fill="{_COLOURS[key]}"><title>{escape(profile["name"])}: {escape(op_type)} '
                f"{_fmt(ms)} ms ({share:.1%})</title></rect>")
            parts.append(f'<text x="{_LABEL + bar + 4:.2f}" y="{y + _ROW - 5}">{_fmt(ms)} ms '
                         f"({share:.1%})</text>")
            y += _ROW
        y += 6
    legend_y = y + 14
    x = _LABEL
    for key, profile in profiles:
        parts.append(f'<rect x="{x}" y="{legend_y - 10}" width="12" height="12" '
                     f'fill="{_COLOURS[key]}"></rect><text x="{x + 16}" y="{legend_y}">'
                     f"{escape(profile['name'])}</text>")
        x += 260
    parts.append("</svg>")
    return "\n".join(parts)


def _shape_text(shapes: Sequence[Mapping[str, Sequence[int]]]) -> str:
    return ", ".join(f"{dtype}{list(dims)}" for shape in shapes for dtype, dims in shape.items())


def _node_table(key: str, nodes: Sequence[Mapping[str, Any]]) -> str:
    header = [("node", "l"), ("op type", "l"), ("provider", "l"), ("ms", ""), ("share", ""),
              ("inputs", "l"), ("outputs", "l"), ("stands for", "l")]
    rows = [f'<table class="sortable" data-model="{key}"><thead><tr>'
            + "".join(f'<th class="{cls}">{name}</th>' for name, cls in header)
            + "</tr></thead><tbody>"]
    for node in nodes:
        cells = [
            (node["name"], node["name"], "l"),
            (node["op_type"], node["op_type"], "l"),
            (node["provider"].replace("ExecutionProvider", ""), node["provider"], "l"),
            (_fmt(node["ms"], 4), repr(node["ms"]), ""),
            (f"{node['share']:.2%}", repr(node["share"]), ""),
            (_shape_text(node["input_shapes"]), _shape_text(node["input_shapes"]), "l"),
            (_shape_text(node["output_shapes"]), _shape_text(node["output_shapes"]), "l"),
            (", ".join(node["stands_for"]), ", ".join(node["stands_for"]), "l"),
        ]
        rows.append("<tr>" + "".join(
            f'<td class="{cls}" data-value="{escape(value)}">{escape(text)}</td>'
            for text, value, cls in cells) + "</tr>")
    rows.append("</tbody></table>")
    return "\n".join(rows)
