"""graphfix tune beside Olive's session-parameter tuning, on the same models and machine.

    python tools/compare_olive_tune.py MODEL... [--budget 60] [--rounds 10] [--skip-olive]
                                       [--input-shape NAME:DIMS ...] [--json out.json]
    python tools/compare_olive_tune.py --from-json out.json...   (the table of earlier runs)

A folder given as MODEL stands for its ``*.onnx`` files; a model that fails is reported and
the run goes on; the JSON is written after every model.

Per model, in this one process:

1. ``graphfix.tune(model, budget=BUDGET)`` (objective latency), timed; its table is printed.
2. Olive's ``OrtSessionParamsTuning`` pass (``olive-ai``, the ``tools`` extra) through
   ``olive.workflows.run``: an exhaustive search of intra-op threads (1 to the physical cores),
   inter-op threads (1 to the cores), execution mode (sequential, parallel) and graph
   optimization level (basic, extended, all), scored by Olive's own latency metric (average of
   20 runs after 10 warm-up) on dummy inputs of the model's shapes; the search is timed (Olive's
   import is not counted).
3. The re-check, apart from the search: ``graphfix.benchmark(model, config=tuned,
   baseline_config="ort-defaults")``, the ``bench --config`` library call: tune's winner against
   ONNX Runtime's default session.
4. The side by side: the default, tune's winner and Olive's choice, one session alive at a time,
   in ``--rounds`` interleaved rounds of blocks (graphfix's timing core), with bootstrap
   intervals of tune's winner against Olive's choice and of each against the default.

Printed per model: both tuning times and their ratio, both choices, the re-check's verdict, and
the three medians with the ratios. A line at the end says on how many models tune's winner was
never slower than the default, and at least as fast as Olive's choice. Olive's failures are
printed with Olive's message (its import or its run), never hidden.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx

import graphfix
from graphfix import model_io
from graphfix.validate.tune import format_tune
from graphfix.validate.bench import feeds_by_model
from graphfix.validate.session_config import SessionConfig
from graphfix.validate.stats import NO_DIFFERENCE, SLOWER, bootstrap_speedup
from graphfix.validate.timing import Arm, Config, Settings, default_threads, measure

__all__ = ["olive_tune", "side_by_side", "main"]

_LEVELS = {0: "disabled", 1: "basic", 2: "extended", 99: "all"}
_NUMPY_TO_OLIVE = {"float32": "float32", "float16": "float16", "float64": "float64",
                   "int64": "int64", "int32": "int32", "bool": "bool"}


def _categorical(values: list[int]) -> dict[str, Any]:
    return {"olive_parameter_type": "SearchParameter", "type": "Categorical", "support": values}


def olive_tune(path: Path, feeds: dict[str, np.ndarray], cores: int) -> tuple[Settings, float]:
    """Olive's choice (as graphfix Settings) and the seconds its search took."""
    from olive.workflows import run as olive_run  # the tools extra: imported when it is used

    names = list(feeds)
    shapes = [list(feeds[name].shape) for name in names]
    types = [_NUMPY_TO_OLIVE.get(str(feeds[name].dtype), "float32") for name in names]
    with tempfile.TemporaryDirectory() as folder:
        config = {
            "input_model": {"type": "ONNXModel", "model_path": str(path.resolve())},
            "systems": {"local_system": {"type": "LocalSystem", "accelerators": [
                {"device": "cpu", "execution_providers": ["CPUExecutionProvider"]}]}},
            "data_configs": [{"name": "dummy", "type": "dummydatacontainer",
                              "load_dataset_config": {"type": "dummy_dataset",
                                                      "input_shapes": shapes,
                                                      "input_names": names,
                                                      "input_types": types,
                                                      "max_samples": 32}}],
            "evaluators": {"latency": {"type": "OnnxEvaluator", "metrics": [
                {"name": "latency", "type": "latency",
                 "sub_types": [{"name": "avg", "priority": 1}], "data_config": "dummy"}]}},
            "evaluator": "latency",
            "passes": {"tune": {
                "type": "OrtSessionParamsTuning", "data_config": "dummy",
                "intra_thread_num_list": _categorical(list(range(1, cores + 1))),
                "inter_thread_num_list": _categorical(list(range(1, cores + 1))),
                "execution_mode_list": _categorical([0, 1]),
                "opt_level_list": _categorical([1, 2, 99]),
            }},
            "search_strategy": {"execution_order": "joint", "sampler": "sequential"},
            "host": "local_system", "target": "local_system",
            "cache_dir": str(Path(folder) / "cache"), "output_dir": str(Path(folder) / "out"),
            "evaluate_input_model": False, "log_severity_level": 3,
        }
        here = os.getcwd()
        os.chdir(folder)
        try:
            started = time.perf_counter()
            output = olive_run(config)
            seconds = time.perf_counter() - started
        finally:
            os.chdir(here)
    chosen = output.get_output_models()
    if not chosen:
        raise RuntimeError("Olive returned no tuned model")
    options = chosen[0].get_inference_config().get("session_options") or {}
    mode = "parallel" if options.get("execution_mode") == 1 else "sequential"
    settings = Settings.ort_defaults("cpu").replace(
        threads=int(options.get("intra_op_num_threads") or 0),
        inter_op_threads=int(options.get("inter_op_num_threads") or 0),
        execution_mode=mode,
        optimization=_LEVELS.get(options.get("graph_optimization_level"), "all"))
    return settings, seconds


def side_by_side(model: onnx.ModelProto, feeds: dict[str, np.ndarray],
                 settings: dict[str, Settings], rounds: int) -> dict[str, Any]:
    """The configurations one session alive at a time, in interleaved rounds of blocks."""
    arms = [Arm(label, Config(label, model, s.optimization), s, feeds)
            for label, s in settings.items()]
    probe = measure(arms[:1], warmup=3, rounds=1, calls=3, together=False)
    median_s = float(np.median(probe.calls(arms[0].label))) / 1e3
    calls = int(min(50, max(3, round(0.15 / max(median_s, 1e-5)))))
    measured = measure(arms, warmup=3, rounds=rounds, calls=calls, together=False)
    medians = {label: float(np.median(measured.calls(label))) for label in settings}
    pairs = {}
    for slow, fast in (("default", "tune"), ("default", "olive"), ("olive", "tune")):
        if slow in settings and fast in settings:
            pairs[f"{fast}/{slow}"] = bootstrap_speedup(measured.times[slow],
                                                        measured.times[fast]).to_dict()
    return {"medians_ms": medians, "speedups": pairs, "calls_per_block": calls}


def _row(path: Path, *, budget: float, rounds: int, input_shapes: dict[str, list[int]] | None,
         skip_olive: bool) -> dict[str, Any]:
    model = model_io.load(path)
    feeds = feeds_by_model(model, None, None, 0, input_shapes)["candidate"]
    row: dict[str, Any] = {"model": path.name}
    started = time.perf_counter()
    tuned = graphfix.tune(model, provider="cpu", budget=budget, input_shapes=input_shapes,
                          name=path.name)
    row["tune_s"] = time.perf_counter() - started
    row["tune"] = tuned.to_dict()
    print(format_tune(row["tune"]))
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "tuned.json"
        tuned.config.write(config)
        recheck = graphfix.benchmark(model, config=config, baseline_config="ort-defaults",
                                     input_shapes=input_shapes, provider="cpu")
    row["recheck"] = recheck.comparison.to_dict() if recheck.comparison else None
    settings = {"default": Settings.ort_defaults("cpu"), "tune": tuned.winner.settings}
    if not skip_olive:
        try:
            settings["olive"], row["olive_s"] = olive_tune(path, feeds, default_threads())
            row["olive"] = SessionConfig(settings["olive"]).to_dict()["settings"]
        except Exception as err:  # noqa: BLE001 - Olive's own failure, reported as it is
            row["olive_error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"
    row.update(side_by_side(model, feeds, settings, rounds))
    return row


def _print(row: dict[str, Any]) -> None:
    s = row["speedups"]
    recheck = row["recheck"]
    print(f"{row['model']}: tune chose {row['tune']['winner']} in {row['tune_s']:.1f} s"
          + (f"; Olive chose {row['olive']['session_options']} in {row['olive_s']:.1f} s "
             f"(tune/Olive time {row['tune_s'] / row['olive_s']:.2f}x)" if "olive" in row else
             f"; Olive: {row.get('olive_error', 'skipped')}"))
    print(f"  bench --config re-check, tune's winner vs ORT defaults: "
          f"{recheck['speedup']:.3f}x [{recheck['ci_low']:.3f}, {recheck['ci_high']:.3f}] "
          f"{recheck['verdict']}")
    medians = ", ".join(f"{k} {v:.3f} ms" for k, v in row["medians_ms"].items())
    ratios = "; ".join(f"{k} {v['speedup']:.3f}x [{v['ci_low']:.3f}, {v['ci_high']:.3f}] "
                       f"{v['verdict']}" for k, v in s.items())
    print(f"  side by side ({row['calls_per_block']} calls per block): {medians}; {ratios}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", type=Path)
    parser.add_argument("--budget", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--skip-olive", action="store_true")
    parser.add_argument("--input-shape", action="append", default=[],
                        help="NAME:1x128 (applies to every model that has the input)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--from-json", type=Path, nargs="+",
                        help="print the table and the acceptance lines of earlier runs' JSON "
                             "files (the models are then not measured)")
    args = parser.parse_args(argv)
    if args.from_json:
        rows, failed = [], []
        for path in args.from_json:
            data = json.loads(path.read_text())
            rows += data["rows"]
            failed += data["failed"]
        _table(rows)
        _summary(rows, failed)
        return 0
    shapes = {}
    for spec in args.input_shape:
        name, _, dims = spec.rpartition(":")
        shapes[name] = [int(d) for d in dims.split("x")]
    rows: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    for path in _models(args.models):
        try:
            model_shapes = {k: v for k, v in shapes.items()
                            if k in {i.name for i in onnx.load(
                                str(path), load_external_data=False).graph.input}}
            row = _row(path, budget=args.budget, rounds=args.rounds,
                       input_shapes=model_shapes or None, skip_olive=args.skip_olive)
        except Exception as err:  # noqa: BLE001 - one model's failure is reported, not fatal
            failed.append({"model": path.name, "error": f"{type(err).__name__}: {err}"[:300]})
            print(f"{path.name}: FAILED: {failed[-1]['error']}", flush=True)
        else:
            _print(row)
            rows.append(row)
        if args.json:
            args.json.write_text(json.dumps({"rows": rows, "failed": failed}, indent=2,
                                            default=str))
    _summary(rows, failed)
    return 0


def _models(given: list[Path]) -> list[Path]:
    """The models given, a folder standing for its ``*.onnx`` files."""
    found: list[Path] = []
    for path in given:
        found += sorted(path.glob("*.onnx")) if path.is_dir() else [path]
    return found


def _table(rows: list[dict[str, Any]]) -> None:
    """One markdown row per model: both choices, both search times, the re-check and the side
    by side."""
    def shown(c: dict[str, Any] | None) -> str:
        return f"{c['speedup']:.2f}x [{c['ci_low']:.2f}, {c['ci_high']:.2f}]" if c else "-"

    print("| model | default ms | tune's choice | tune s | Olive's choice | Olive s | re-check "
          "tune/default | side by side tune/Olive |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        olive = r.get("olive")
        if olive:
            o = olive["session_options"]
            choice = (f"intra {o['intra_op_num_threads']}, inter {o['inter_op_num_threads']}, "
                      f"{o['execution_mode']}, {o['graph_optimization_level']}")
        else:
            choice = "no model" if "olive_error" in r else "-"
        print(f"| {r['model'].removesuffix('.onnx')} | {r['medians_ms']['default']:.3f} | "
              f"{r['tune']['winner']} | {r['tune_s']:.1f} | {choice} | " + (
              f"{r['olive_s']:.1f} | " if "olive_s" in r else "- | ") + (
              f"{shown(r['recheck'])} | "
              f"{shown(r['speedups'].get('tune/olive'))} |"))


def _summary(rows: list[dict[str, Any]], failed: list[dict[str, Any]]) -> None:
    """The acceptance lines: never slower, faster wherever a candidate is, against Olive's
    choice and its search time."""
    # A kept default is ORT's defaults themselves: its re-check is an A/A, and a "slower"
    # there is the measurement's own false alarm, counted apart.
    changed = [r for r in rows if r["tune"]["winner"] != "default"]
    never_slower = len(rows) - sum(r["recheck"]["verdict"] == SLOWER for r in changed)
    alarms = sum(r["recheck"]["verdict"] != NO_DIFFERENCE for r in rows if r not in changed)
    with_olive = [r for r in rows if "tune/olive" in r["speedups"]]
    as_fast = sum(r["speedups"]["tune/olive"]["verdict"] != SLOWER for r in with_olive)
    quicker = sum(r["tune_s"] < r["olive_s"] for r in with_olive)
    ratios = [r["tune_s"] / r["olive_s"] for r in with_olive]
    # Where anything was significantly faster than the default: a candidate of tune's search,
    # or Olive's choice side by side.
    room = [r for r in rows
            if any((c.get("speedup") or {}).get("verdict") == "faster"
                   for c in r["tune"]["candidates"][2:])
            or r["speedups"].get("olive/default", {}).get("verdict") == "faster"]
    # The default kept is no gain, whatever its side by side against itself shows.
    won = sum(r["tune"]["winner"] != "default"
              and r["speedups"]["tune/default"]["verdict"] == "faster" for r in room)
    print(f"models: {len(rows)} measured, {len(failed)} failed"
          + "".join(f"\n  {f['model']}: {f['error']}" for f in failed))
    print(f"tune's winner not slower than ORT's defaults (bench --config re-check): "
          f"{never_slower}/{len(rows)} ({len(changed)} changed a setting; the re-check of a "
          f"kept default against itself showed a difference {alarms} time(s) of "
          f"{len(rows) - len(changed)})")
    print(f"where a candidate or Olive's choice was significantly faster than the default: "
          f"{len(room)} models; tune's winner significantly faster side by side on {won}")
    print(f"at least as fast as Olive's choice: {as_fast}/{len(with_olive)}; less tuning time "
          f"than Olive: {quicker}/{len(with_olive)}"
          + (f" (tune/Olive time median {np.median(ratios):.2f}x, at most "
             f"{max(ratios):.2f}x)" if ratios else ""))


if __name__ == "__main__":
    sys.exit(main())
