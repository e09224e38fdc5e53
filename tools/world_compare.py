"""Run graphfix and its peers on every model of a folder and check every output independently.

    python tools/world_compare.py CORPUS_DIR [--only NAME ...]
        [--tools graphfix,onnxsim,onnxslim,ort-basic] [--json out.json] [--timeout S]

Tools: ``graphfix`` (``graphfix.optimize(graphfix.load(path), verify=False)``, then a second run
on its own output: a fixed point changes nothing), ``graphfix-cli`` (``graphfix optimize SRC
DST --report R`` in a process of its own, as a user runs it, parity check on: its refusals are
recorded with the whole error line; not in the default ``--tools``), ``onnxsim``
(``onnxsim.simplify(model)``), ``onnxslim`` (``onnxslim.slim(model)``) and ``ort-basic`` (an
ONNX Runtime CPU session at ``ORT_ENABLE_BASIC`` writing ``optimized_model_filepath``, then that
file loaded).

Every model (``*.onnx`` under CORPUS_DIR, sub-folders included) runs in a child process of its
own that imports the tools afresh and runs them one after the other, saving its state after
each step (a tool, a check). The parent kills a step that runs past ``--timeout`` seconds; a
step killed so, or a child that dies, is recorded (timeout, crash) and a new child goes on with
the steps left. A tool error is recorded with its message; for graphfix an exception that is
not a ``graphfix.GraphfixError`` is a *traceback*, counted apart (and a GraphfixError raised
for an internal exception of a pass is marked as wrapping one).

Correctness is checked here, independently of any tool: the original and each output run on
ONNX Runtime's CPU provider with every optimization off (``ORT_DISABLE_ALL``) on the same seeded
inputs, at three sizes of the dynamic dimensions (batch 1/2/3, sequence 7/20/33, height x width
64x96, 96x64, 160x128, audio samples 1600/2000/3200; a size the original cannot run is replaced
by the next candidate). Ids stay below the embedding table they index (and below 100), masks are
0/1 with the first position 1, token types 0/1; ``-1`` dimensions are dynamic. Outputs are
compared by name: float32 within 1e-3 x rms(ref) + 1e-3 x |ref| per element, float16 within
2e-2 of both, integers exactly, the rms term never below 4 ulps of the float type at 1.0 (a
sigmoid map of background pixels, nearly all 0, has an rms near 0, and an equivalent rewrite
moves its elements by a rounding of 6e-8); a changed output dtype or shape, a missing output, a
model ONNX Runtime refuses or a run that fails is WRONG.

Per model and tool one row: nodes at the top level, nodes with local functions expanded and
subgraphs included (``all``), Transposes, Casts, float dtypes (``kept``, or how many tensors
found by shape inference in both changed their float type; for float16 models also the Casts
added and the tensors turned from float16 to float32), dynamic input dimensions still dynamic,
ops outside the standard domains, the verdict (ok, WRONG, could-not-check, failed: reason) and
the tool's time (the library call alone, on a model already read). Then a summary per tool
with the models it got wrong or failed on; graphfix against its input and against the best
correct peer (``all`` nodes, Transposes); and the models a second graphfix run changes.
``--json`` writes every row, every error, each step's seconds and the summary.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

__all__ = [
    "TOOLS",
    "compare_outputs",
    "dynamic_dims",
    "expanded_nodes",
    "float_types",
    "main",
    "make_feeds",
    "node_counts",
]

TOOLS = ("graphfix", "onnxsim", "onnxslim", "ort-basic")
PEERS = ("onnxsim", "onnxslim", "ort-basic")
STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")
FLOAT_TYPES: dict[int, str] = {
    onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.FLOAT16: "float16",
    onnx.TensorProto.DOUBLE: "float64", onnx.TensorProto.BFLOAT16: "bfloat16",
}
# Candidate sizes of the dynamic dimensions, tried in order until three run on the original.
SIZES: tuple[dict[str, int], ...] = (
    {"batch": 1, "sequence": 7, "height": 64, "width": 96, "samples": 1600},
    {"batch": 2, "sequence": 20, "height": 96, "width": 64, "samples": 2000},
    {"batch": 3, "sequence": 33, "height": 160, "width": 128, "samples": 3200},
    {"batch": 2, "sequence": 12, "height": 128, "width": 128, "samples": 2400},
    {"batch": 1, "sequence": 64, "height": 224, "width": 224, "samples": 4000},
)
CHECKED_SIZES = 3
MAX_ID = 100
# Relative tolerance per float type: |got - ref| <= max(t * rms(ref), ROUNDING[type]) + t * |ref|
# element by element; ROUNDING is 4 ulps at 1.0 (bfloat16's ulp at 1.0 is 2**-7).
TOLERANCE: dict[int, float] = {
    onnx.TensorProto.FLOAT: 1e-3, onnx.TensorProto.FLOAT16: 2e-2,
    onnx.TensorProto.BFLOAT16: 2e-2, onnx.TensorProto.DOUBLE: 1e-6,
}
ROUNDING: dict[int, float] = {
    onnx.TensorProto.FLOAT: 4 * float(np.finfo(np.float32).eps),
    onnx.TensorProto.FLOAT16: 4 * float(np.finfo(np.float16).eps),
    onnx.TensorProto.BFLOAT16: 4 * 2.0**-7,
    onnx.TensorProto.DOUBLE: 4 * float(np.finfo(np.float64).eps),
}
_AUDIO_NAMES = re.compile(r"audio|wav|speech|input_values|samples", re.IGNORECASE)


# --------------------------------------------------------------------------- graph facts


def expanded_nodes(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    """Every node that runs: a call of a local function is replaced by the function's body
    (recursively), and the nodes of subgraphs (If, Loop, Scan bodies) are included."""
    functions = {(f.domain, f.name): f for f in model.functions}

    def walk(nodes: Sequence[onnx.NodeProto], depth: int) -> Iterator[onnx.NodeProto]:
        for node in nodes:
            body = functions.get((node.domain, node.op_type))
            if body is not None and depth < 32:
                yield from walk(body.node, depth + 1)
            else:
                yield node
            for attr in node.attribute:
                if attr.HasField("g"):
                    yield from walk(attr.g.node, depth + 1)
                for graph in attr.graphs:
                    yield from walk(graph.node, depth + 1)

    yield from walk(model.graph.node, 0)


def node_counts(model: onnx.ModelProto) -> tuple[int, int]:
    """Nodes at the top level, and nodes with functions expanded and subgraphs included."""
    return len(model.graph.node), sum(1 for _ in expanded_nodes(model))


def _dim(dim: onnx.TensorShapeProto.Dimension) -> int | str | None:
    """A dimension's size, its name, or None when unknown (nothing, or a negative size)."""
    if dim.HasField("dim_value"):
        return dim.dim_value if dim.dim_value >= 0 else None
    return dim.dim_param or None


def _shape(value: onnx.ValueInfoProto) -> list[int | str | None] | None:
    if not value.type.HasField("tensor_type") or not value.type.tensor_type.HasField("shape"):
        return None
    return [_dim(d) for d in value.type.tensor_type.shape.dim]


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The inputs that are not initializers."""
    initializers = {t.name for t in model.graph.initializer}
    return [v for v in model.graph.input if v.name not in initializers]


def dynamic_dims(model: onnx.ModelProto) -> dict[str, list[int | str]]:
    """The inputs with a dynamic dimension: their shapes, ``?`` for an unnamed dimension."""
    out: dict[str, list[int | str]] = {}
    for value in graph_inputs(model):
        shape = _shape(value)
        if shape and any(not isinstance(d, int) for d in shape):
            out[value.name] = ["?" if d is None else d for d in shape]
    return out


def float_types(model: onnx.ModelProto) -> str:
    """The float types of the inputs and weights: one name, or each with its count."""
    counts: Counter[str] = Counter()
    for tensor in model.graph.initializer:
        if tensor.data_type in FLOAT_TYPES:
            counts[FLOAT_TYPES[tensor.data_type]] += 1
    for value in graph_inputs(model):
        elem = value.type.tensor_type.elem_type
        if elem in FLOAT_TYPES:
            counts[FLOAT_TYPES[elem]] += 1
    if len(counts) <= 1:
        return next(iter(counts), "-")
    return " ".join(f"{name}:{n}" for name, n in counts.most_common())


def _elem_types(model: onnx.ModelProto) -> dict[str, int]:
    """Element type of every tensor of the main graph, after shape inference."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - a model inference rejects: what is declared
        inferred = model
    graph = inferred.graph
    types = {t.name: t.data_type for t in graph.initializer}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type:
            types[value.name] = value.type.tensor_type.elem_type
    return types


def _standard(node: onnx.NodeProto) -> bool:
    return node.domain in STANDARD_DOMAINS


def facts(model: onnx.ModelProto) -> dict[str, Any]:
    """The numbers of one row that depend on one model only."""
    top, expanded = node_counts(model)
    ops = Counter(n.op_type for n in expanded_nodes(model))
    nonstandard = Counter(f"{n.domain}:{n.op_type}" for n in expanded_nodes(model)
                          if not _standard(n))
    return {
        "nodes": top,
        "nodes_all": expanded,
        "transposes": ops["Transpose"],
        "casts": ops["Cast"],
        "ops": dict(sorted(ops.items())),
        "nonstandard": dict(sorted(nonstandard.items())),
        "float": float_types(model),
    }


def _is_half(model: onnx.ModelProto) -> bool:
    return float_types(model).startswith("float16")


def compare_structure(original: onnx.ModelProto, output: onnx.ModelProto) -> dict[str, Any]:
    """An output's facts, with what changed against the original: float types of the tensors
    both name, Casts added, dynamic input dimensions made static."""
    row = facts(output)
    before, after = _elem_types(original), _elem_types(output)
    changed = [name for name in before.keys() & after.keys()
               if before[name] in FLOAT_TYPES and after[name] != before[name]]
    row["dtype_changed"] = len(changed)
    row["dtype_changed_examples"] = sorted(changed)[:5]
    if _is_half(original):
        row["casts_added"] = row["casts"] - facts(original)["casts"]
        row["f16_to_f32"] = sum(before[n] == onnx.TensorProto.FLOAT16
                                and after[n] == onnx.TensorProto.FLOAT for n in changed)
    inputs = {v.name: _shape(v) for v in graph_inputs(output)}
    total, static = 0, []
    for value in graph_inputs(original):
        shape = _shape(value) or []
        for axis, dim in enumerate(shape):
            if isinstance(dim, int):
                continue
            total += 1
            now = inputs.get(value.name)
            if now is None:
                static.append(f"{value.name} removed")
            elif axis >= len(now) or isinstance(now[axis], int):
                size = now[axis] if axis < len(now) else "?"
                static.append(f"{value.name}[{axis}]={size}")
    row["dynamic_total"] = total
    row["made_static"] = static
    return row


# --------------------------------------------------------------------------- inputs


_NP_TYPES: dict[int, type[np.generic]] = {
    onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.FLOAT16: np.float16,
    onnx.TensorProto.DOUBLE: np.float64, onnx.TensorProto.INT64: np.int64,
    onnx.TensorProto.INT32: np.int32, onnx.TensorProto.INT8: np.int8,
    onnx.TensorProto.UINT8: np.uint8, onnx.TensorProto.BOOL: np.bool_,
}
_PASS_THROUGH = ("Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity")


def _id_limit(model: onnx.ModelProto, name: str) -> int:
    """The exclusive upper bound for the values of an integer input: the rows of the smallest
    table it indexes (through Gather, after casts and reshapes), and at most MAX_ID."""
    rows = {t.name: t.dims[0] for t in model.graph.initializer if t.dims}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for tensor in node.input:
            consumers.setdefault(tensor, []).append(node)
    limit, seen, todo = MAX_ID, {name}, [name]
    while todo:
        tensor = todo.pop()
        for node in consumers.get(tensor, []):
            if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == tensor:
                limit = min(limit, rows.get(node.input[0], limit))
            elif node.op_type in _PASS_THROUGH and node.input[0] == tensor:
                for out in node.output:
                    if out not in seen:
                        seen.add(out)
                        todo.append(out)
    return max(limit, 1)


def _role(value_name: str, elem: int, rank: int, axis: int, spatial_index: int) -> str:
    """Which size a dynamic dimension takes: batch, sequence, height, width or samples."""
    if axis == 0:
        return "batch"
    if rank >= 4 and elem in FLOAT_TYPES:
        return "height" if spatial_index == 0 else "width"
    if rank == 2 and elem in FLOAT_TYPES and _AUDIO_NAMES.search(value_name):
        return "samples"
    return "sequence"


def input_shapes(model: onnx.ModelProto, sizes: Mapping[str, int]) -> dict[str, list[int]]:
    """The shape of every input at ``sizes``; a named dimension takes one size everywhere."""
    named: dict[str, int] = {}
    shapes = {}
    for value in graph_inputs(model):
        elem = value.type.tensor_type.elem_type
        shape = _shape(value) or []
        out, spatial = [], 0
        for axis, dim in enumerate(shape):
            if isinstance(dim, int):
                out.append(dim)
                continue
            role = _role(value.name, elem, len(shape), axis, spatial)
            spatial += role in ("height", "width")
            size = sizes[role]
            if isinstance(dim, str):
                size = named.setdefault(dim, size)
            out.append(size)
        shapes[value.name] = out
    return shapes


def make_feeds(model: onnx.ModelProto, sizes: Mapping[str, int], seed: int) -> dict[str, Any]:
    """Seeded inputs for ``model`` at ``sizes``: normal floats, ids below their table, 0/1
    masks with the first position 1, 0/1 token types, positions 0..n-1."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, Any] = {}
    shapes = input_shapes(model, sizes)
    for value in graph_inputs(model):
        elem = value.type.tensor_type.elem_type
        dtype = _NP_TYPES.get(elem)
        if dtype is None:
            raise ValueError(f"input {value.name!r} has element type "
                             f"{onnx.TensorProto.DataType.Name(elem)}, which is not generated")
        shape = shapes[value.name]
        lower = value.name.lower()
        if elem in FLOAT_TYPES:
            data = rng.standard_normal(shape).astype(dtype)
        elif "mask" in lower:
            data = (rng.random(shape) < 0.8).astype(dtype)
            if data.ndim:
                data[..., 0] = 1
        elif "type" in lower or "segment" in lower:
            data = rng.integers(0, 2, shape).astype(dtype)
        elif "position" in lower and shape:
            data = np.broadcast_to(np.arange(shape[-1]), shape).astype(dtype)
        elif elem == onnx.TensorProto.BOOL:
            data = rng.random(shape) < 0.5
        else:
            data = rng.integers(0, _id_limit(model, value.name), shape).astype(dtype)
        feeds[value.name] = np.ascontiguousarray(data)
    return feeds


# --------------------------------------------------------------------------- checking


def _session(path: Path) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def compare_outputs(
    reference: Mapping[str, np.ndarray], reference_types: Mapping[str, int],
    got: Mapping[str, np.ndarray], got_types: Mapping[str, int],
) -> tuple[str | None, float]:
    """The first difference that makes ``got`` wrong (None when it is right), and the largest
    share of the tolerance any float element used."""
    worst = 0.0
    for name, ref in reference.items():
        if name not in got:
            return f"output {name!r} is missing", worst
        if got_types.get(name) != reference_types[name]:
            return (f"output {name!r} is {_type_name(got_types.get(name))}, was "
                    f"{_type_name(reference_types[name])}"), worst
        out = got[name]
        if out.shape != ref.shape:
            return f"output {name!r} has shape {list(out.shape)}, expected {list(ref.shape)}", worst
        elem = reference_types[name]
        if elem not in TOLERANCE:
            if not np.array_equal(ref, out):
                return f"output {name!r}: {int(np.sum(ref != out))} elements differ", worst
            continue
        a, b = ref.astype(np.float64), out.astype(np.float64)
        nan = np.isnan(a)
        if not np.array_equal(nan, np.isnan(b)):
            return f"output {name!r}: NaN where the original has none (or the reverse)", worst
        finite = np.isfinite(a) & np.isfinite(b)
        if not np.array_equal(a[~finite & ~nan], b[~finite & ~nan]):
            return f"output {name!r}: infinities differ", worst
        a, b = a[finite], b[finite]
        if not a.size:
            continue
        rel = TOLERANCE[elem]
        tol = max(rel * float(np.sqrt(np.mean(a * a))), ROUNDING[elem]) + rel * np.abs(a)
        ratio = np.abs(a - b) / np.maximum(tol, np.finfo(np.float64).tiny)
        share = float(np.max(ratio))
        worst = max(worst, share)
        if share > 1.0:
            index = int(np.argmax(ratio))
            return (f"output {name!r}: max |diff| {float(np.max(np.abs(a - b))):.3g} "
                    f"({share:.1f}x the tolerance; ref {a[index]:.4g}, got {b[index]:.4g})"), worst
    return None, worst


def _type_name(elem: int | None) -> str:
    return onnx.TensorProto.DataType.Name(elem) if elem else "absent"


def _output_types(model_path: Path) -> dict[str, int]:
    model = onnx.load(model_path, load_external_data=False)
    return {v.name: v.type.tensor_type.elem_type for v in model.graph.output}


def _reference(model_path: Path, work: Path) -> dict[str, Any]:
    """Run the original at candidate sizes until CHECKED_SIZES succeed; save feeds and
    outputs to ``work/reference_K.npz``."""
    model = onnx.load(model_path, load_external_data=False)
    session = _session(model_path)
    names = [o.name for o in session.get_outputs()]
    done: list[dict[str, Any]] = []
    errors: list[str] = []
    for index, sizes in enumerate(SIZES):
        if len(done) == CHECKED_SIZES:
            break
        try:
            feeds = make_feeds(model, sizes, seed=1000 + index)
            outputs = session.run(names, feeds)
        except Exception as err:  # noqa: BLE001 - this size does not run: the next one
            errors.append(f"sizes {index}: {_one_line(err)}")
            continue
        arrays = {f"in{i}": v for i, v in enumerate(feeds.values())}
        arrays |= {f"out{i}": v for i, v in enumerate(outputs)}
        np.savez(work / f"reference_{len(done)}.npz", **arrays)
        done.append({"sizes": index, "shapes": {k: list(v.shape) for k, v in feeds.items()},
                     "inputs": list(feeds), "outputs": names})
    return {"runs": done, "errors": errors}


def _check(output_path: Path, original_path: Path, work: Path,
           reference: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict on one output: ``ok``, ``WRONG: why`` or ``could-not-check: why``."""
    runs = reference.get("runs") or []
    if not runs:
        why = "; ".join(reference.get("errors", [])) or reference.get("error", "no reference")
        return {"correct": f"could-not-check: {why}"}
    ref_types = _output_types(original_path)
    try:
        got_types = _output_types(output_path)
        session = _session(output_path)
    except Exception as err:  # noqa: BLE001 - the output itself is broken
        return {"correct": f"WRONG: ONNX Runtime refuses it: {_one_line(err)}"}
    worst = 0.0
    for number, run in enumerate(runs):
        with np.load(work / f"reference_{number}.npz") as data:
            feeds = {name: data[f"in{i}"] for i, name in enumerate(run["inputs"])}
            expected = {name: data[f"out{i}"] for i, name in enumerate(run["outputs"])}
        accepted = {i.name for i in session.get_inputs()}
        missing = sorted(set(accepted) - set(feeds))
        if missing:
            listed = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3
                                               else "")
            return {"correct": f"WRONG: needs inputs the original does not: {listed}"}
        names = [o.name for o in session.get_outputs()]
        try:
            values = session.run(names, {k: v for k, v in feeds.items() if k in accepted})
        except Exception as err:  # noqa: BLE001 - runs on the original, fails here
            return {"correct": f"WRONG: fails at {run['shapes']}: {_one_line(err)}"}
        got = dict(zip(names, values, strict=True))
        problem, share = compare_outputs(expected, ref_types, got, got_types)
        worst = max(worst, share)
        if problem:
            return {"correct": f"WRONG: at {run['shapes']}: {problem}", "tolerance_used": worst}
    return {"correct": "ok", "tolerance_used": round(worst, 4), "sizes_checked": len(runs)}


# --------------------------------------------------------------------------- the tools


def _one_line(err: BaseException | str) -> str:
    text = str(err).strip()
    if isinstance(err, BaseException):
        text = f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"
    return text.splitlines()[0][:400] if text else ""


def _run_graphfix(path: Path, out: Path) -> dict[str, Any]:
    import graphfix

    loaded = graphfix.load(path)
    started = time.perf_counter()
    try:
        result = graphfix.optimize(loaded, verify=False)
    except graphfix.GraphfixError as err:
        cause = err.__cause__
        wrapped = f" (wraps {type(cause).__name__})" if cause and not isinstance(
            cause, graphfix.GraphfixError) else ""
        return {"status": "failed", "error": _one_line(err) + wrapped,
                "wraps_exception": bool(wrapped), "seconds": time.perf_counter() - started}
    except Exception as err:  # noqa: BLE001 - graphfix must not raise these: a traceback
        return {"status": "traceback", "error": _one_line(err),
                "traceback": traceback.format_exc(limit=-8),
                "seconds": time.perf_counter() - started}
    seconds = time.perf_counter() - started
    graphfix.save(result.model, out)
    return {"status": "ok", "seconds": seconds}


def _run_onnxsim(path: Path, out: Path) -> dict[str, Any]:
    import onnxsim

    model = onnx.load(path)
    started = time.perf_counter()
    simplified, check = onnxsim.simplify(model)
    seconds = time.perf_counter() - started
    if not check:
        return {"status": "failed", "error": "onnxsim's own check failed", "seconds": seconds}
    onnx.save(simplified, out)
    return {"status": "ok", "seconds": seconds}


def _run_onnxslim(path: Path, out: Path) -> dict[str, Any]:
    import onnxslim

    model = onnx.load(path)
    started = time.perf_counter()
    slimmed = onnxslim.slim(model)
    seconds = time.perf_counter() - started
    if slimmed is None:
        return {"status": "failed", "error": "onnxslim returned nothing", "seconds": seconds}
    onnx.save(slimmed, out)
    return {"status": "ok", "seconds": seconds}


def _run_ort_basic(path: Path, out: Path) -> dict[str, Any]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(out)
    options.log_severity_level = 3
    started = time.perf_counter()
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    optimized = onnx.load(out, load_external_data=False)
    seconds = time.perf_counter() - started
    if _load_external(optimized, (out.parent, path.parent)):
        onnx.save(optimized, out)  # weights inline: the file stands on its own
    return {"status": "ok", "seconds": seconds}


def _load_external(model: onnx.ModelProto, folders: Sequence[Path]) -> bool:
    """Read the initializers of ``model`` kept in data files, each from the first of
    ``folders`` that holds its file (ONNX Runtime's optimized model refers to the source
    model's data file by a path relative to the source); returns whether there were any."""
    from onnx.external_data_helper import load_external_data_for_tensor, uses_external_data

    tensors = [t for t in model.graph.initializer if uses_external_data(t)]
    for tensor in tensors:
        location = next(e.value for e in tensor.external_data if e.key == "location")
        folder = next((f for f in folders if (f / location).is_file()), folders[-1])
        load_external_data_for_tensor(tensor, str(folder))
        tensor.data_location = onnx.TensorProto.DEFAULT
        del tensor.external_data[:]
    return bool(tensors)


def _run_graphfix_cli(path: Path, out: Path) -> dict[str, Any]:
    """``graphfix optimize`` as a user runs it (parity check on): ``ok`` with its warning
    lines, ``failed`` (exit 1) with its whole error line, or ``traceback`` (a Python traceback
    on stderr, or an exit code other than 0 and 1). The report is kept beside ``out``."""
    report = out.with_name(out.stem + ".report.json")
    command = [sys.executable, "-m", "graphfix", "optimize", str(path), str(out),
               "--report", str(report)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    row: dict[str, Any] = {"seconds": seconds, "exit": done.returncode,
                           "warnings": [line for line in lines if line.startswith("warning")]}
    if "Traceback (most recent call last)" in done.stderr or done.returncode not in (0, 1):
        tail = lines[-1] if lines else f"exit {done.returncode}"
        return row | {"status": "traceback", "error": tail, "traceback": done.stderr[-6000:]}
    if done.returncode == 1:
        error = next((line for line in lines if line.startswith("error:")), lines[-1] if lines
                     else "exit 1 with nothing on stderr")
        return row | {"status": "failed", "error": error, "error_chars": len(error)}
    return row | {"status": "ok"}


RUNNERS = {"graphfix": _run_graphfix, "graphfix-cli": _run_graphfix_cli,
           "onnxsim": _run_onnxsim, "onnxslim": _run_onnxslim, "ort-basic": _run_ort_basic}


def _second_graphfix(first: Path) -> dict[str, Any]:
    """graphfix on its own output: how many nodes of each op type the second run changes."""
    import graphfix

    started = time.perf_counter()
    before = onnx.load(first)
    try:
        result = graphfix.optimize(graphfix.load(first), verify=False)
    except Exception as err:  # noqa: BLE001 - recorded; a second run must not fail either
        kind = "failed" if isinstance(err, graphfix.GraphfixError) else "traceback"
        return {"status": kind, "error": _one_line(err)}
    old = Counter(n.op_type for n in expanded_nodes(before))
    new = Counter(n.op_type for n in expanded_nodes(result.model))
    delta = {op: new[op] - old[op] for op in sorted(old | new) if new[op] != old[op]}
    return {"status": "ok", "nodes_before": sum(old.values()), "nodes_after": sum(new.values()),
            "changed": sum(abs(d) for d in delta.values()), "op_delta": delta,
            "seconds": round(time.perf_counter() - started, 2)}


# --------------------------------------------------------------------------- the child


def _phases(tools: Sequence[str]) -> list[str]:
    phases = ["reference"]
    for tool in tools:
        phases += [f"{tool}:run", f"{tool}:check"]
        if tool == "graphfix":
            phases.append("graphfix:second")
    return phases


def _read_state(work: Path) -> dict[str, Any]:
    path = work / "state.json"
    return json.loads(path.read_text()) if path.exists() else {"done": [], "tools": {}}


def _write_state(work: Path, state: Mapping[str, Any]) -> None:
    scratch = work / "state.json.tmp"
    scratch.write_text(json.dumps(state, indent=1, default=str))
    os.replace(scratch, work / "state.json")


def child(model_path: Path, work: Path, tools: Sequence[str]) -> int:
    """Run the steps of one model that are not done yet, saving the state after each."""
    state = _read_state(work)
    original = onnx.load(model_path)
    state.setdefault("original", facts(original) | {"dynamic": dynamic_dims(original)})
    for phase in _phases(tools):
        if phase in state["done"]:
            continue
        state["current"] = phase
        state["current_since"] = time.time()
        _write_state(work, state)
        tool, _, step = phase.partition(":")
        started = time.perf_counter()
        if phase == "reference":
            try:
                state["reference"] = _reference(model_path, work)
            except Exception as err:  # noqa: BLE001 - the original does not load in ORT
                state["reference"] = {"runs": [], "error": f"the original: {_one_line(err)}"}
        elif step == "run":
            out = work / f"{tool}.onnx"
            try:
                row = RUNNERS[tool](model_path, out)
            except Exception as err:  # noqa: BLE001 - a peer's failure, recorded
                row = {"status": "failed", "error": _one_line(err)}
            if row["status"] == "ok":
                row |= compare_structure(original, onnx.load(out))
            row["seconds"] = round(row.get("seconds", 0.0), 2)
            state["tools"][tool] = row
        elif step == "check":
            row = state["tools"][tool]
            if row["status"] == "ok":
                row |= _check(work / f"{tool}.onnx", model_path, work, state["reference"])
            else:
                row["correct"] = f"failed: {row.get('error', row['status'])}"
        elif step == "second" and state["tools"]["graphfix"]["status"] == "ok":
            state["tools"]["graphfix"]["second"] = _second_graphfix(work / "graphfix.onnx")
        state.setdefault("phase_seconds", {})[phase] = round(time.perf_counter() - started, 2)
        state["done"].append(phase)
        state.pop("current", None)
        _write_state(work, state)
    return 0


# --------------------------------------------------------------------------- the parent


def _record_stop(state: dict[str, Any], phase: str, why: str) -> None:
    """Record that ``phase`` was stopped (a crash or the timeout) and mark it done."""
    tool, _, step = phase.partition(":")
    if phase == "reference":
        state["reference"] = {"runs": [], "error": f"the original on ORT: {why}"}
    elif step == "run":
        status = "timeout" if why.startswith("timeout") else "crashed"
        state["tools"][tool] = {"status": status, "error": why, "seconds": None}
    elif step == "check":
        row = state["tools"][tool]
        row["correct"] = (f"could-not-check: {why}" if "timeout" in why
                          else f"WRONG: ONNX Runtime {why} on the output")
    elif step == "second":
        status = "timeout" if why.startswith("timeout") else "crashed"
        state["tools"]["graphfix"]["second"] = {"status": status, "error": why}
    state["done"].append(phase)
    state.pop("current", None)


def run_model(model_path: Path, tools: Sequence[str], timeout: float,
              work: Path | None = None) -> dict[str, Any]:
    """Every step for one model in child processes; a step past ``timeout`` seconds or a
    child that dies is recorded, and a new child goes on with the steps left. The outputs
    (``TOOL.onnx``) and the state stay in ``work`` when it is given (steps already done there
    are not run again), else in a temporary folder removed at the end."""
    with contextlib.ExitStack() as stack:
        if work is None:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="world-compare-")))
        work.mkdir(parents=True, exist_ok=True)
        while True:
            state = _read_state(work)
            if all(p in state["done"] for p in _phases(tools)):
                return state
            command = [sys.executable, str(Path(__file__).resolve()), str(model_path),
                       "--child", str(work), "--tools", ",".join(tools)]
            process = subprocess.Popen(command, start_new_session=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            why = _wait(process, work, timeout)
            if why is None:
                continue
            state = _read_state(work)
            phase = state.get("current") or next(
                p for p in _phases(tools) if p not in state["done"])
            _record_stop(state, phase, why)
            _write_state(work, state)


def _wait(process: subprocess.Popen[bytes], work: Path, timeout: float) -> str | None:
    """Wait for the child; None when it ended well, else why it was stopped."""
    import threading

    chunks: list[bytes] = []
    stdout = process.stdout
    assert stdout is not None  # started with stdout=PIPE
    reader = threading.Thread(target=lambda: chunks.append(stdout.read()), daemon=True)
    reader.start()
    phase, since = None, time.time()
    while process.poll() is None:
        time.sleep(0.2)
        current = _read_state(work).get("current") if (work / "state.json").exists() else None
        if current != phase:
            phase, since = current, time.time()
        if time.time() - since > timeout:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            reader.join(5)
            return f"timeout after {timeout:g}s"
    reader.join(5)
    if process.returncode == 0:
        return None
    tail = b"".join(chunks).decode(errors="replace").strip().splitlines()[-1:] or [""]
    if process.returncode < 0:
        return f"crashed ({signal.Signals(-process.returncode).name}) {tail[0][:200]}".strip()
    return f"crashed (exit {process.returncode}) {tail[0][:200]}".strip()


# --------------------------------------------------------------------------- the report


def _dtype_cell(row: Mapping[str, Any]) -> str:
    text = "kept" if not row.get("dtype_changed") else f"{row['dtype_changed']} chg"
    if "casts_added" in row:
        text += f" c{row['casts_added']:+d} h>f{row['f16_to_f32']}"
    return text


def _dyn_cell(row: Mapping[str, Any]) -> str:
    total = row.get("dynamic_total", 0)
    return f"{total - len(row.get('made_static', []))}/{total}"


def _notes(row: Mapping[str, Any]) -> str:
    notes = []
    if row.get("made_static"):
        notes.append("static: " + " ".join(row["made_static"]))
    if row.get("nonstandard"):
        notes.append("ops: " + " ".join(f"{k}x{v}" for k, v in row["nonstandard"].items()))
    second = row.get("second")
    if second:
        if second.get("status") != "ok":
            notes.append(f"2nd run {second['status']}: {second.get('error', '')}")
        elif second["changed"]:
            delta = " ".join(f"{op}{d:+d}" for op, d in second["op_delta"].items())
            notes.append(f"2nd run: {second['nodes_before']}->{second['nodes_after']} ({delta})")
    return "; ".join(notes)


HEADER = (f"{'model':<34} {'tool':<9} {'nodes':>5} {'all':>5} {'Tr':>3} {'Cast':>4} "
          f"{'dtype':<16} {'dyn':>5} {'time':>6}  correct / notes")


def format_rows(name: str, state: Mapping[str, Any], tools: Sequence[str]) -> list[str]:
    """The printed rows of one model: its input, then each tool."""
    original = state["original"]
    dyn = sum(1 for shape in original["dynamic"].values() for d in shape if not isinstance(d, int))
    nonstd = " ".join(f"{k}x{v}" for k, v in original["nonstandard"].items())
    first = (f"{name:<34} {'input':<9} {original['nodes']:>5} {original['nodes_all']:>5} "
             f"{original['transposes']:>3} {original['casts']:>4} {original['float']:<16} "
             f"{dyn:>5} {'':>6}  ")
    lines = [first + _clip(f"{_reference_note(state)}{'; ops: ' + nonstd if nonstd else ''}")]
    for tool in tools:
        row = state["tools"].get(tool, {})
        seconds = row.get("seconds")
        time_cell = f"{seconds:.2f}" if isinstance(seconds, (int, float)) else "-"
        if row.get("status") == "ok":
            cells = (f"{row['nodes']:>5} {row['nodes_all']:>5} {row['transposes']:>3} "
                     f"{row['casts']:>4} {_dtype_cell(row):<16} {_dyn_cell(row):>5}")
        else:
            cells = f"{'-':>5} {'-':>5} {'-':>3} {'-':>4} {'-':<16} {'-':>5}"
        verdict = row.get("correct", f"failed: {row.get('error', 'not run')}")
        if row.get("status") == "traceback":
            verdict = f"TRACEBACK: {row.get('error', '')}"
        notes = _notes(row)
        lines.append(f"{'':<34} {tool:<9} {cells} {time_cell:>6}  "
                     + _clip(f"{verdict}{'; ' + notes if notes else ''}"))
    return lines


def _reference_note(state: Mapping[str, Any]) -> str:
    reference = state.get("reference", {})
    runs = reference.get("runs") or []
    if not runs:
        return "CANNOT CHECK: " + ("; ".join(reference.get("errors", []))
                                   or reference.get("error", "?"))
    first = next(iter(runs[0]["shapes"]), None)
    if first is None:
        return "checked (no inputs)"
    shapes = " ".join(str(run["shapes"][first]).replace(" ", "") for run in runs)
    return f"checked {first} {shapes}"


def _verdict_kind(row: Mapping[str, Any]) -> str:
    if row.get("status") == "traceback":
        return "traceback"
    if row.get("status") != "ok":
        return "failed"
    correct = row.get("correct", "")
    if correct == "ok":
        return "correct"
    if correct.startswith("WRONG"):
        return "wrong"
    return "could-not-check"


def _peer_counts(state: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``key`` (nodes_all, transposes) of the input and of every tool that wrote a model; a
    tool whose output is not correct is marked."""
    counts: dict[str, Any] = {"input": state["original"][key]}
    for tool, row in state["tools"].items():
        if row.get("status") == "ok":
            mark = "" if _verdict_kind(row) == "correct" else " (not correct)"
            counts[tool] = f"{row[key]}{mark}" if mark else row[key]
    return counts


def summarize(results: Mapping[str, Mapping[str, Any]], tools: Sequence[str]) -> dict[str, Any]:
    """Counts per tool (and the models each peer got wrong), and graphfix against its input,
    the best correct peer (all nodes, Transposes) and a second run of itself."""
    per_tool: dict[str, dict[str, Any]] = {}
    for tool in tools:
        counts: Counter[str] = Counter()
        not_correct = {}
        for name, state in results.items():
            row = state["tools"].get(tool)
            if row is None:
                continue
            kind = _verdict_kind(row)
            counts[kind] += 1
            counts["crashed"] += row.get("status") in ("crashed", "timeout")
            counts["wraps_exception"] += bool(row.get("wraps_exception"))
            if kind in ("wrong", "could-not-check"):
                not_correct[name] = row["correct"]
            elif kind != "correct":
                not_correct[name] = f"{kind}: {row.get('error')}"
        per_tool[tool] = dict(counts) | {"not_correct": not_correct}
    summary: dict[str, Any] = {"tools": per_tool}
    if "graphfix" not in tools:
        return summary
    above_input, above_peer, more_transposes, second = {}, {}, {}, {}
    for name, state in results.items():
        row = state["tools"].get("graphfix", {})
        if row.get("status") != "ok":
            continue
        if row["nodes_all"] > state["original"]["nodes_all"]:
            above_input[name] = {"input": state["original"]["nodes_all"],
                                 "graphfix": row["nodes_all"]}
        correct = [state["tools"][p] for p in PEERS
                   if p in state["tools"] and _verdict_kind(state["tools"][p]) == "correct"]
        if correct and row["nodes_all"] > min(peer["nodes_all"] for peer in correct):
            above_peer[name] = _peer_counts(state, "nodes_all")
        if correct and row["transposes"] > min(peer["transposes"] for peer in correct):
            more_transposes[name] = _peer_counts(state, "transposes")
        if row.get("second", {}).get("status") != "ok" or row["second"]["changed"]:
            second[name] = row.get("second")
    summary["graphfix"] = {"above_input": above_input, "above_best_peer": above_peer,
                           "more_transposes_than_best_peer": more_transposes,
                           "second_run_changes": second}
    return summary


def _clip(text: str, width: int = 240) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def print_summary(summary: Mapping[str, Any], models: int) -> None:
    print(f"\nSummary over {models} models")
    print(f"{'tool':<10} {'correct':>7} {'WRONG':>6} {'failed':>6} {'tracebacks':>10} "
          f"{'unchecked':>9} {'crashed/timeout':>15}")
    for tool, counts in summary["tools"].items():
        wrapped = counts.get("wraps_exception")
        print(f"{tool:<10} {counts.get('correct', 0):>7} {counts.get('wrong', 0):>6} "
              f"{counts.get('failed', 0):>6} {counts.get('traceback', 0):>10} "
              f"{counts.get('could-not-check', 0):>9} {counts.get('crashed', 0):>15}"
              + (f"   ({wrapped} failures wrap an internal exception)" if wrapped else ""))
    for tool, counts in summary["tools"].items():
        if counts["not_correct"]:
            print(f"\n{tool}: not correct on {len(counts['not_correct'])} models")
            for name, why in counts["not_correct"].items():
                print(f"  {name}: {_clip(why)}")
    graphfix = summary.get("graphfix")
    if not graphfix:
        return
    sections = (("above_input", "more nodes (all) than its input"),
                ("above_best_peer", "more nodes (all) than the best correct peer"),
                ("more_transposes_than_best_peer", "more Transposes than the best correct peer"))
    for key, title in sections:
        print(f"\ngraphfix: {title} on {len(graphfix[key])} models")
        for name, counts in graphfix[key].items():
            print(f"  {name}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    print(f"\ngraphfix: a second run changes {len(graphfix['second_run_changes'])} models")
    for name, second in graphfix["second_run_changes"].items():
        if second and second.get("status") == "ok":
            delta = " ".join(f"{op}{d:+d}" for op, d in second["op_delta"].items())
            print(f"  {name}: {second['nodes_before']} -> {second['nodes_after']} ({delta})")
        else:
            status = (second or {}).get("status", "not run")
            print(f"  {name}: second run {status}: {_clip(str((second or {}).get('error')))}")


def _models(corpus: Path, only: Sequence[str]) -> list[tuple[str, Path]]:
    found = []
    for path in sorted(corpus.rglob("*.onnx")):
        relative = path.relative_to(corpus)
        if any(part.startswith(".") for part in relative.parts):
            continue  # a builder's scratch folder
        name = str(relative.with_suffix(""))
        if only and name not in only and path.stem not in only:
            continue
        found.append((name, path))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--only", nargs="+", default=[], metavar="NAME")
    parser.add_argument("--tools", default=",".join(TOOLS),
                        help=f"comma-separated, of {', '.join(RUNNERS)} (default "
                             f"{', '.join(TOOLS)})")
    parser.add_argument("--json", type=Path, help="write every result to this file")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds one step (a tool, a check) may run (default 600)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # CORPUS is the model
    args = parser.parse_args(argv)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = sorted(set(tools) - set(RUNNERS))
    if unknown:
        parser.error(f"unknown tool(s): {', '.join(unknown)}; known: {', '.join(RUNNERS)}")
    if args.child:
        return child(args.corpus, args.child, tools)
    models = _models(args.corpus, args.only)
    if not models:
        parser.error(f"no .onnx model in {args.corpus}" + (" matches --only" if args.only else ""))
    started = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    print(HEADER, flush=True)
    for name, path in models:
        model_started = time.perf_counter()
        state = run_model(path, tools, args.timeout)
        state["seconds"] = round(time.perf_counter() - model_started, 1)
        results[name] = state
        print("\n".join(format_rows(name, state, tools)), flush=True)
    summary = summarize(results, tools)
    print_summary(summary, len(results))
    status_file = args.corpus / "world_corpus.json"
    failures = {}
    if status_file.exists():
        failures = {name: entry.get("error") for name, entry in
                    json.loads(status_file.read_text()).items() if entry["status"] == "failed"}
        if failures:
            print(f"\nmodels the corpus builder failed to export ({len(failures)}):")
            for name, error in failures.items():
                print(f"  {name}: {error}")
    elapsed = time.perf_counter() - started
    print(f"\n{len(results)} models, {elapsed:.0f}s")
    if args.json:
        args.json.write_text(json.dumps(
            {"tools": tools, "models": results, "summary": summary,
             "export_failures": failures, "seconds": round(elapsed, 1)},
            indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
