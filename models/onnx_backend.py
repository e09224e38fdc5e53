"""graphfix on real models nobody here wrote: the onnx package's backend test models.

Each test case (``onnx/backend/test/data/{pytorch-converted,pytorch-operator,simple,light}``)
ships a model and one or more data sets of inputs with the expected outputs. For each model:
``graphfix.optimize_file`` (default pipeline, parity on), then the written model runs on ONNX
Runtime (optimizations off) on the shipped inputs and is compared with the shipped outputs.

Outcomes:
- pass: optimized and matching the expected outputs (or the original does not match them either,
  and the optimized model matches the original — ORT's own deviation, not graphfix's);
- refused: graphfix declined with a clear error (GraphfixError), nothing written;
- wrong: written, but its outputs differ from what the original computes;
- crash: anything else (an exception that is not a GraphfixError).

``tools/onnx_backend_models.py`` runs them all; the tests run the ``simple`` suite.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

import graphfix
from graphfix import model_io

__all__ = ["DATA", "SUITES", "Outcome", "cases", "check"]

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
SUITES = ("pytorch-converted", "pytorch-operator", "simple", "light")


@dataclasses.dataclass
class Outcome:
    suite: str
    name: str
    status: str  # pass | refused | wrong | crash
    detail: str = ""
    seconds: float = 0.0
    nodes_before: int = 0
    nodes_after: int = 0


def cases(suites: tuple[str, ...] = SUITES) -> list[tuple[str, str, Path, list[Path]]]:
    """(suite, name, model path, data-set folders) for every shipped test case."""
    found = []
    for suite in suites:
        folder = DATA / suite
        if suite == "light":
            for model in sorted(folder.glob("light_*.onnx")):
                found.append((suite, model.stem, model, []))
            continue
        for case in sorted(p for p in folder.iterdir() if (p / "model.onnx").is_file()):
            sets = sorted(case.glob("test_data_set_*"))
            found.append((suite, case.name, case / "model.onnx", sets))
    return found


def _read(files: list[Path]) -> list[np.ndarray]:
    arrays = []
    for file in files:
        tensor = onnx.TensorProto()
        tensor.ParseFromString(file.read_bytes())
        arrays.append(numpy_helper.to_array(tensor))
    return arrays


def _data_sets(model: onnx.ModelProto, path: Path, sets: list[Path]):
    """(inputs by name, expected outputs in order) for each shipped data set."""
    initializers = {i.name for i in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in initializers]
    if not sets:  # light models: zero input, expected output beside the model
        shapes = [
            [d.dim_value for d in i.type.tensor_type.shape.dim]
            for i in model.graph.input if i.name not in initializers
        ]
        expected = _read([path.with_name(path.stem + "_output_0.pb")])
        yield {n: np.zeros(s, np.float32) for n, s in zip(inputs, shapes)}, expected
        return
    for folder in sets:
        feeds = _read(sorted(folder.glob("input_*.pb"), key=lambda p: int(p.stem.split("_")[1])))
        expected = _read(sorted(folder.glob("output_*.pb"),
                                key=lambda p: int(p.stem.split("_")[1])))
        yield dict(zip(inputs, feeds)), expected


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = model_io.ort_session(model, optimization="disabled")
    return session.run(None, feeds)


def _close(got: list[np.ndarray], want: list[np.ndarray]) -> tuple[bool, float]:
    worst = 0.0
    if len(got) != len(want):
        return False, float("inf")
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return False, float("inf")
        if g.dtype.kind in "fc":
            err = float(np.max(np.abs(g.astype(np.float64) - w), initial=0.0))
            worst = max(worst, err)
            if not np.allclose(g, w, rtol=1e-3, atol=1e-5, equal_nan=True):
                return False, worst
        elif not np.array_equal(g, w):
            return False, float("inf")
    return True, worst


def check(suite: str, name: str, path: Path, sets: list[Path], out_dir: Path) -> Outcome:
    started = time.perf_counter()
    outcome = Outcome(suite, name, "pass")
    try:
        out = out_dir / f"{suite}-{name}.onnx"
        result = graphfix.optimize_file(path, out)
        outcome.nodes_before = result.report.input.nodes
        outcome.nodes_after = result.report.output.nodes
        original = onnx.load(str(path))
        optimized = model_io.load(out)
        worst = 0.0
        for feeds, expected in _data_sets(original, path, sets):
            got = _run(optimized, feeds)
            ok, err = _close(got, expected)
            worst = max(worst, err)
            if not ok:
                # The shipped outputs may disagree with ORT itself; judge graphfix against
                # what the original computes on the same runtime.
                ok, err = _close(got, _run(original, feeds))
                if not ok:
                    outcome.status = "wrong"
                    outcome.detail = f"max abs error {err:.3g} vs the original"
                    break
                outcome.detail = "original differs from the shipped outputs on ORT too"
        if outcome.status == "pass" and not outcome.detail:
            outcome.detail = f"max abs error {worst:.3g} vs shipped outputs"
    except graphfix.GraphfixError as err:
        outcome.status = "refused"
        outcome.detail = str(err).splitlines()[0]
    except Exception as err:  # noqa: BLE001 - the point is to count crashes
        outcome.status = "crash"
        outcome.detail = f"{type(err).__name__}: {err}".splitlines()[0]
        outcome.detail += "\n" + traceback.format_exc(limit=-3)
    outcome.seconds = time.perf_counter() - started
    return outcome
