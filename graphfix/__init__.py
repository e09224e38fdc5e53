"""graphfix: ONNX graph optimization before deployment.

    import graphfix
    result = graphfix.optimize_file("model.onnx", "model.opt.onnx")   # rewrite, verify, write
    print(result.report.to_json())

    model = graphfix.load("model.onnx")
    result = graphfix.optimize(model, input_shapes={"x": [1, 3, 224, 224]},
                               parity=graphfix.ParityOptions(runs=3))
    graphfix.save(result.model, "out.onnx")

Each pass is also a function for exporters: ``graphfix.passes.remove_initializer_inputs(model)``.
"""

from __future__ import annotations

from graphfix.version import __version__

from typing import TYPE_CHECKING

# The public names are imported on first use (PEP 562), so that ``python -m graphfix`` can
# take Ctrl-C and termination signals before the heavy imports (onnx, ONNX Runtime) begin.
_PUBLIC = {
    "GraphfixError": "graphfix.errors",
    "Inspection": "graphfix.inspection",
    "inspect": "graphfix.inspection",
    "load": "graphfix.model_io",
    "save": "graphfix.model_io",
    "BenchOptions": "graphfix.options",
    "ParityOptions": "graphfix.options",
    "RunOptions": "graphfix.options",
    "DEFAULT_PASSES": "graphfix.pipeline",
    "OptimizeResult": "graphfix.pipeline",
    "optimize": "graphfix.pipeline",
    "optimize_file": "graphfix.pipeline",
    "benchmark": "graphfix.validate.bench",
    "check_parity": "graphfix.validate.parity",
    "profile": "graphfix.validate.profile",
    "tune": "graphfix.validate.tune",
}

if TYPE_CHECKING:  # what static tools follow
    from graphfix.errors import GraphfixError
    from graphfix.inspection import Inspection, inspect
    from graphfix.model_io import load, save
    from graphfix.options import BenchOptions, ParityOptions, RunOptions
    from graphfix.pipeline import DEFAULT_PASSES, OptimizeResult, optimize, optimize_file
    from graphfix.validate.bench import benchmark
    from graphfix.validate.parity import check_parity
    from graphfix.validate.profile import profile
    from graphfix.validate.tune import tune


def __getattr__(name: str) -> object:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'graphfix' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))

__all__ = [
    "__version__",
    "GraphfixError",
    "DEFAULT_PASSES",
    "OptimizeResult",
    "RunOptions",
    "ParityOptions",
    "BenchOptions",
    "Inspection",
    "load",
    "save",
    "inspect",
    "optimize",
    "optimize_file",
    "check_parity",
    "benchmark",
    "profile",
    "tune",
]
