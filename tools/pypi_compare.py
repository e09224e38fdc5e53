"""graphfix and its peers on the PyPI corpus: does every model ONNX Runtime runs come out optimized?

    python tools/pypi_compare.py CORPUS_DIR [--only NAME ...] [--json FILE] [--timeout S]
        [--work DIR] [--tools graphfix-cli,onnxsim,onnxslim]

CORPUS_DIR is what ``tools/pypi_corpus.py`` wrote (its ``manifest.json`` gives each model's
package, kind and the inputs its package feeds it). Per model, in child processes with a
timeout per step (``tools/world_compare.py``'s ``run_model``):

- the original on ONNX Runtime's CPU provider (optimizations off) on world_compare's seeded
  inputs at three sizes, then ``graphfix check ORIGINAL ORIGINAL`` (can graphfix feed it?), and,
  when neither runs it, the inputs its package feeds it (from the manifest): whether ONNX
  Runtime runs the original at all is the first column;
- ``graphfix optimize SRC DST`` as a user runs it (parity check on), ``onnxsim.simplify`` and
  ``onnxslim.slim``;
- every output checked twice: world_compare's independent check against the original's
  outputs, and ``graphfix check ORIGINAL OUTPUT`` (with the package's inputs when graphfix
  cannot generate them). An output passes when neither check finds it wrong.

graphfix's outcome: ``ok``, ``refused`` (exit 1; the whole error line is kept), ``WRONG`` (it
wrote a model that does not compute the original's outputs), ``traceback``, ``timeout`` or
``crashed``; an output that gained an op type or a float type its input did not have is listed
(a portable output gains neither). Node counts include subgraphs and expanded local functions.
graphfix is compared
with the best correct peer, except where that peer's file is more than ``SIZE_RATIO`` times
graphfix's (constant folding that trades size for nodes): those are listed apart. The run
prints one row per model, the refusals grouped by message, and a summary line; ``--json``
writes every row.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx


from world_compare import (
    _NP_TYPES,
    _models,
    _output_types,
    _verdict_kind,
    compare_outputs,
    graph_inputs,
    run_model,
)

__all__ = ["SIZE_RATIO", "TOOLS", "classify", "compare_model", "main", "package_feeds"]

TOOLS = ("graphfix-cli", "onnxsim", "onnxslim")
PEERS = ("onnxsim", "onnxslim")
SIZE_RATIO = 1.5
SEED = 7


# --------------------------------------------------------------------------- inputs


def package_feeds(model: onnx.ModelProto, spec: Mapping[str, Any],
                  seed: int = SEED) -> dict[str, np.ndarray]:
    """The inputs a package feeds its model, from the manifest's ``feeds``: a list is a shape
    (floats standard normal, integers zero, booleans true), a number fills the input's declared
    shape (unknown dimensions 1), ``{"values": ...}`` is the data itself."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in graph_inputs(model):
        elem = value.type.tensor_type.elem_type
        dtype = _NP_TYPES[elem]
        given = spec.get(value.name)
        declared = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1
                    for d in value.type.tensor_type.shape.dim]
        if isinstance(given, Mapping):
            data = np.array(given["values"], dtype=dtype)
        elif isinstance(given, (int, float)):
            data = np.full(declared, given, dtype=dtype)
        else:
            shape = list(given) if given is not None else declared
            if np.issubdtype(dtype, np.floating):
                data = rng.standard_normal(shape).astype(dtype)
            elif dtype is np.bool_:
                data = np.ones(shape, dtype=dtype)
            else:
                data = np.zeros(shape, dtype=dtype)
        feeds[value.name] = np.ascontiguousarray(data)
    return feeds


def _run_ort(model_path: Path, inputs: Path, save: Path | None) -> int:
    """Child: run the model on ONNX Runtime's CPU provider on ``inputs`` (a .npz); prints the
    outputs' shapes, or the error, as one JSON line; the outputs go to ``save`` by name."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(str(model_path), options,
                                       providers=["CPUExecutionProvider"])
        accepted = {i.name for i in session.get_inputs()}
        with np.load(inputs) as data:
            outputs = session.run(None, {k: data[k] for k in data.files if k in accepted})
    except Exception as err:  # noqa: BLE001 - the answer is whether it runs
        print(json.dumps({"ok": False, "error": f"{type(err).__name__}: {err}"[:1000]}))
        return 1
    if save is not None:
        np.savez(save, **{o.name: v for o, v in zip(session.get_outputs(), outputs, strict=True)})
    print(json.dumps({"ok": True, "shapes": [list(np.shape(o)) for o in outputs]}))
    return 0


def _child(command: Sequence[str], timeout: float) -> tuple[int | None, str, str]:
    """Run a command with a timeout; (exit code or None on timeout, stdout, stderr)."""
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        return None, "", f"timeout after {timeout:g}s"
    return done.returncode, done.stdout, done.stderr


def ort_run(model_path: Path, inputs: Path, save: Path | None,
            timeout: float) -> dict[str, Any]:
    """Run ``model_path`` on ``inputs`` in a child process: ``{"ok": True, ...}`` or the error."""
    command = [sys.executable, str(Path(__file__).resolve()), str(model_path),
               "--ort-run", str(inputs)] + (["--save", str(save)] if save else [])
    code, out, err = _child(command, timeout)
    if code is not None and out.strip():
        return json.loads(out.strip().splitlines()[-1])
    lines = err.strip().splitlines()
    return {"ok": False, "error": lines[-1] if lines else f"no answer (exit {code})"}


def package_check(original: Path, output: Path, work: Path, timeout: float) -> dict[str, Any]:
    """The output against the original on the inputs its package feeds it (``work`` holds
    them and the original's outputs): world_compare's comparison, by output name."""
    got = work / f"{output.stem}.package_outputs.npz"
    answer = ort_run(output, work / "package_feeds.npz", got, timeout)
    if not answer["ok"]:
        return {"passed": False, "problem": f"fails on the package's inputs: {answer['error']}"}
    with np.load(work / "package_reference.npz") as ref, np.load(got) as out:
        problem, _ = compare_outputs({k: ref[k] for k in ref.files}, _output_types(original),
                                     {k: out[k] for k in out.files}, _output_types(output))
    return {"passed": problem is None, "problem": problem}


def graphfix_check(reference: Path, candidate: Path, inputs: Path | None,
                   timeout: float) -> dict[str, Any]:
    """``graphfix check REFERENCE CANDIDATE --json``: ``passed`` True/False, or None with
    ``error`` when graphfix could not compare them (it cannot feed them, ORT refuses one)."""
    command = [sys.executable, "-m", "graphfix", "check", str(reference), str(candidate),
               "--json"]
    if inputs is not None:
        command += ["--inputs", str(inputs)]
    code, out, err = _child(command, timeout)
    try:
        result = json.loads(out)
    except json.JSONDecodeError:
        lines = [line for line in err.splitlines() if line.strip()]
        error = next((line for line in lines if line.startswith("error:")),
                     lines[-1] if lines else f"exit {code}")
        return {"passed": None, "error": error, "traceback": "Traceback" in err}
    return {"passed": bool(result.get("passed")) and code == 0,
            "problem": result.get("problem"), "worst": result.get("worst")}


# --------------------------------------------------------------------------- one model


def _size(path: Path) -> int:
    """The model file's bytes and those of the data files its weights are read from."""
    from graphfix.model_io import load_with_info

    return load_with_info(path, load_external_data=False).size_bytes


def compare_model(path: Path, entry: Mapping[str, Any], tools: Sequence[str], timeout: float,
                  work: Path) -> dict[str, Any]:
    """Every tool and every check on one model; the state of world_compare's run, with the
    feeds, graphfix's checks of each output, sizes and graphfix's outcome added."""
    state = run_model(path, tools, timeout, work)
    state["size"] = _size(path)
    original = onnx.load(path, load_external_data=False)
    # Can ONNX Runtime run the original, and can graphfix feed it?
    feeds = state["feeds"] = {"generic": bool(state["reference"].get("runs"))}
    own = graphfix_check(path, path, None, timeout)
    feeds["graphfix"] = True if own["passed"] else own.get("error") or own.get("problem")
    hand: Path | None = None
    if entry.get("feeds"):
        hand = work / "package_feeds.npz"
        np.savez(hand, **package_feeds(original, entry["feeds"]))
        answer = ort_run(path, hand, work / "package_reference.npz", timeout)
        feeds["package"] = True if answer["ok"] else answer["error"]
        if not answer["ok"]:
            hand = None
    runs_on = [kind for kind in ("generic", "graphfix", "package") if feeds.get(kind) is True]
    state["ort_runs_original"] = runs_on
    check_inputs = hand if feeds["graphfix"] is not True else None
    for tool, row in state["tools"].items():
        out_path = work / f"{tool}.onnx"
        if row.get("status") != "ok" or not out_path.exists():
            continue
        row["size"] = _size(out_path)
        # What a portable output must not gain: op types and float types the input did not have.
        row["new_ops"] = sorted(set(row.get("ops", {})) - set(state["original"]["ops"]))
        if feeds["graphfix"] is True or check_inputs is not None:
            row["graphfix_check"] = graphfix_check(path, out_path, check_inputs, timeout)
        if (hand is not None and _verdict_kind(row) != "correct"
                and row.get("graphfix_check", {}).get("passed") is None):
            row["package_check"] = package_check(path, out_path, work, timeout)
        row["verdict"] = verdict(row)
    return state


def verdict(row: Mapping[str, Any]) -> str:
    """``ok`` when no check finds the output wrong (and one of them ran), ``WRONG``, or
    ``unchecked``. The checks: world_compare's, graphfix check's, and (when neither could
    run the original) the one on the package's inputs."""
    independent = _verdict_kind(row)
    checks = [row.get("graphfix_check", {}).get("passed"),
              row.get("package_check", {}).get("passed")]
    if independent == "wrong" or False in checks:
        return "WRONG"
    if independent == "correct" or True in checks:
        return "ok"
    return "unchecked"


def classify(state: Mapping[str, Any]) -> str:
    """graphfix's outcome on one model."""
    row = state["tools"].get("graphfix-cli", {})
    status = row.get("status")
    if status == "failed":
        return "refused"
    if status in ("traceback", "timeout", "crashed"):
        return status
    if status != "ok":
        return "not run"
    return {"ok": "ok", "WRONG": "WRONG"}.get(row.get("verdict", ""), "unchecked")


# --------------------------------------------------------------------------- the report


def _nodes(state: Mapping[str, Any], tool: str) -> str:
    row = state["tools"].get(tool, {})
    if row.get("status") != "ok":
        return {"failed": "fail", "timeout": "t/o", "crashed": "crash",
                "traceback": "tb"}.get(row.get("status", ""), "-")
    mark = "" if row.get("verdict") == "ok" else ("!" if row.get("verdict") == "WRONG" else "?")
    return f"{row['nodes_all']}{mark}"


def best_peer(state: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    """The correct peer with the fewest nodes (``all``), fewest bytes on a tie."""
    correct = [(tool, row) for tool, row in state["tools"].items()
               if tool in PEERS and row.get("status") == "ok" and row.get("verdict") == "ok"]
    if not correct:
        return None
    return min(correct, key=lambda item: (item[1]["nodes_all"], item[1]["size"]))


def against_peers(state: Mapping[str, Any]) -> str:
    """graphfix against the best correct peer: ``at/below``, ``above``, ``above, excepted``
    (the peer's file is more than SIZE_RATIO times graphfix's) or ``-``."""
    row = state["tools"].get("graphfix-cli", {})
    peer = best_peer(state)
    if classify(state) != "ok" or peer is None:
        return "-"
    if row["nodes_all"] <= peer[1]["nodes_all"]:
        return "at/below"
    # A correct peer with no more nodes than graphfix whose file is not much larger counts.
    for tool, other in state["tools"].items():
        if (tool in PEERS and other.get("verdict") == "ok"
                and other["nodes_all"] < row["nodes_all"]
                and other["size"] <= SIZE_RATIO * row["size"]):
            return f"above ({tool} {other['nodes_all']})"
    return f"above, excepted ({peer[0]} file {peer[1]['size'] / row['size']:.2f}x)"


def _ort_cell(state: Mapping[str, Any]) -> str:
    runs_on = state["ort_runs_original"]
    if not runs_on:
        return "NO"
    return "yes" if "generic" in runs_on or "graphfix" in runs_on else "pkg-feeds"


def _message(state: Mapping[str, Any]) -> str:
    row = state["tools"].get("graphfix-cli", {})
    notes = []
    if row.get("status") != "ok":
        notes.append(str(row.get("error", "")))
    elif row.get("verdict") == "WRONG":
        check = row.get("graphfix_check", {})
        notes.append(row.get("correct", "") if _verdict_kind(row) == "wrong"
                     else f"graphfix check: {check.get('problem')}")
    if row.get("new_ops"):
        notes.append(f"new op types: {' '.join(row['new_ops'])}")
    if row.get("dtype_changed"):
        notes.append(f"{row['dtype_changed']} tensors changed float type "
                     f"(e.g. {', '.join(row.get('dtype_changed_examples', [])[:3])})")
    if row.get("warnings"):
        notes.append(" | ".join(row["warnings"]))
    if state["feeds"].get("graphfix") is not True:
        notes.append(f"graphfix cannot feed the original: {state['feeds']['graphfix']}")
    for tool in PEERS:
        peer = state["tools"].get(tool, {})
        if peer.get("status") == "ok" and peer.get("verdict") != "ok":
            why = (peer.get("graphfix_check", {}).get("problem")
                   or peer.get("package_check", {}).get("problem") or peer.get("correct", ""))
            notes.append(f"{tool} {peer.get('verdict')}: {why}")
    return "; ".join(n for n in notes if n)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


HEADER = (f"{'model':<26} {'ORT':<9} {'graphfix':<10} {'in':>5} {'gfx':>6} {'sim':>6} "
          f"{'slim':>6} {'vs best peer':<28} message")


def format_row(name: str, state: Mapping[str, Any]) -> str:
    return (f"{name:<26} {_ort_cell(state):<9} {classify(state):<10} "
            f"{state['original']['nodes_all']:>5} {_nodes(state, 'graphfix-cli'):>6} "
            f"{_nodes(state, 'onnxsim'):>6} {_nodes(state, 'onnxslim'):>6} "
            f"{_clip(against_peers(state), 28):<28} {_clip(_message(state), 300)}")


def _pattern(message: str) -> str:
    """A refusal message with its names and numbers blotted out, to group alike ones."""
    text = re.sub(r"'[^']*'", "'…'", message)
    text = re.sub(r"\b[\w./-]*\d[\w./-]*\b", "#", text)
    return _clip(text, 160)


def summarize(results: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    outcomes: dict[str, list[str]] = defaultdict(list)
    peers: dict[str, list[str]] = defaultdict(list)
    groups: dict[str, list[str]] = defaultdict(list)
    for name, state in results.items():
        outcome = classify(state)
        outcomes[outcome].append(name)
        if outcome == "refused":
            groups[_pattern(state["tools"]["graphfix-cli"]["error"])].append(name)
        standing = against_peers(state)
        peers[standing.split(" (")[0]].append(name)
    gained = [name for name, state in results.items()
              if state["tools"].get("graphfix-cli", {}).get("new_ops")
              or state["tools"].get("graphfix-cli", {}).get("dtype_changed")]
    return {"models": len(results), "new_op_or_dtype": gained,
            "ort_runs": sum(bool(s["ort_runs_original"]) for s in results.values()),
            "graphfix_feeds": sum(s["feeds"].get("graphfix") is True for s in results.values()),
            "outcomes": dict(outcomes), "vs_best_peer": dict(peers),
            "refusals_by_pattern": dict(groups)}


def print_summary(summary: Mapping[str, Any], results: Mapping[str, Mapping[str, Any]]) -> None:
    outcomes = summary["outcomes"]
    if summary["refusals_by_pattern"]:
        print("\nrefusals, grouped by message:")
        for pattern, names in summary["refusals_by_pattern"].items():
            print(f"  {len(names)}x {pattern}\n      {', '.join(names)}")
    for title, key in (("WRONG", "WRONG"), ("tracebacks", "traceback"),
                       ("timeouts", "timeout"), ("crashed", "crashed")):
        for name in outcomes.get(key, []):
            row = results[name]["tools"]["graphfix-cli"]
            why = str(row.get("error") or _message(results[name]))
            print(f"\n{title}: {name}: {_clip(why, 600)}")
    if summary["new_op_or_dtype"]:
        print("\ngraphfix output has an op type or float type its input did not have: "
              + ", ".join(summary["new_op_or_dtype"]))
    above = summary["vs_best_peer"]
    for key in ("above", "above, excepted"):
        if above.get(key):
            print(f"\ngraphfix {key}: " + ", ".join(
                f"{n} [{against_peers(results[n])}]" for n in above[key]))
    counts = ", ".join(f"{len(outcomes.get(k, []))} {k}" for k in
                       ("ok", "refused", "WRONG", "traceback", "timeout", "crashed", "unchecked"))
    print(f"\nSUMMARY {summary['models']} models: ONNX Runtime runs {summary['ort_runs']} "
          f"originals, graphfix feeds {summary['graphfix_feeds']}; graphfix {counts}; "
          f"vs best correct peer: {len(above.get('at/below', []))} at/below, "
          f"{len(above.get('above', []))} above, {len(above.get('above, excepted', []))} above "
          f"but excepted (peer file > {SIZE_RATIO}x), {len(above.get('-', []))} not compared; "
          f"{len(summary['new_op_or_dtype'])} graphfix outputs with a new op type or float type")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--only", nargs="+", default=[], metavar="NAME")
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--json", type=Path, help="write every result to this file")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds one step (a tool, a check) may run (default 900)")
    parser.add_argument("--work", type=Path,
                        help="keep every output here (WORK/MODEL/TOOL.onnx); steps already "
                             "done there are not run again")
    parser.add_argument("--ort-run", type=Path, help=argparse.SUPPRESS)  # child: CORPUS is a model
    parser.add_argument("--save", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.ort_run:
        return _run_ort(args.corpus, args.ort_run, args.save)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    manifest_path = args.corpus / "manifest.json"
    manifest = json.loads(manifest_path.read_text())["models"] if manifest_path.exists() else {}
    models = _models(args.corpus, args.only)
    if not models:
        parser.error(f"no .onnx model in {args.corpus}" + (" matches --only" if args.only else ""))
    started = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="pypi-compare-") as scratch:
        root = args.work or Path(scratch)
        print(HEADER, flush=True)
        for name, path in models:
            model_started = time.perf_counter()
            state = compare_model(path, manifest.get(name, {}), tools, args.timeout, root / name)
            state["seconds"] = round(time.perf_counter() - model_started, 1)
            state["manifest"] = {k: manifest.get(name, {}).get(k)
                                 for k in ("package", "version", "kind", "path", "license")}
            state["outcome"] = classify(state)
            results[name] = state
            print(format_row(name, state), flush=True)
    summary = summarize(results)
    print_summary(summary, results)
    elapsed = time.perf_counter() - started
    print(f"{len(results)} models, {elapsed:.0f}s")
    if args.json:
        args.json.write_text(json.dumps({"tools": tools, "models": results, "summary": summary,
                                         "seconds": round(elapsed, 1)}, indent=1, default=str)
                             + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
