"""graphfix: ONNX graph optimization before deployment.

    import graphfix
    result = graphfix.optimize_file("model.onnx", "model.opt.onnx")   # rewrite, verify, write
    print(result.report.to_json())

    model = graphfix.load("model.onnx")
    result = graphfix.optimize(model, passes=["remove-initializer-inputs"], verify=False)
    graphfix.save(result.model, "out.onnx")

Each pass is also a function for exporters: ``graphfix.passes.remove_initializer_inputs(model)``.
"""

from __future__ import annotations

__version__ = "0.1.0"

from graphfix.errors import GraphfixError
from graphfix.model_io import load, save
from graphfix.pipeline import DEFAULT_PASSES, OptimizeResult, optimize, optimize_file


def check_parity(reference, candidate, **options):  # type: ignore[no-untyped-def]
    """Numerical parity of two models; see :func:`graphfix.validate.parity.check_parity`."""
    from graphfix.validate.parity import check_parity as _check_parity

    return _check_parity(reference, candidate, **options)


def benchmark(model, **options):  # type: ignore[no-untyped-def]
    """Latency and speedup; see :func:`graphfix.validate.bench.benchmark`."""
    from graphfix.validate.bench import benchmark as _benchmark

    return _benchmark(model, **options)


__all__ = [
    "__version__",
    "GraphfixError",
    "DEFAULT_PASSES",
    "OptimizeResult",
    "load",
    "save",
    "optimize",
    "optimize_file",
    "check_parity",
    "benchmark",
]
