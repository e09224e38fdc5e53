"""Shared fixtures. Tests run against the installed graphfix (its model builders included:
``graphfix.models``); nothing is added to sys.path."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import pytest

OrtRun = Callable[[onnx.ModelProto, dict[str, np.ndarray]], dict[str, np.ndarray]]


def _ort_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``model`` on ORT's CPU provider with every graph optimization off; outputs by name."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    proto = onnx.ModelProto()
    proto.CopyFrom(model)
    # onnx may stamp a newer IR version than the installed ORT reads.
    proto.ir_version = min(proto.ir_version, 10)
    session = ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


@pytest.fixture
def ort_run() -> OrtRun:
    """``ort_run(model, feeds) -> {output name: array}`` on ORT CPU, optimizations off."""
    return _ort_run


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture(autouse=True, scope="session")
def one_onnxsim_worker():
    """One onnxsim worker for every pipeline the tests run (a run otherwise starts its own, and
    an interpreter start per test would double the suite's time). Tests of the worker's own
    life build their Simplify passes themselves and get workers of their own. A graphfix
    without shared workers (an older tree that tools/hostile_tally.py measures) runs each
    pipeline with its own."""
    try:
        from graphfix.passes.simplify import OnnxsimWorker, shared_worker
    except ImportError:
        yield None
        return
    with OnnxsimWorker() as worker, shared_worker(worker):
        yield worker


@pytest.fixture
def sigint_raises():
    """SIGINT raises KeyboardInterrupt during the test, as in a terminal, also where the suite
    runs in the background (a shell starts background jobs with SIGINT ignored)."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
