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

__version__ = "0.1.0"

import os as _os

# Installed, the pass library is the subpackage graphfix.passes (pyproject maps the repository's
# passes/ folder there). In a source checkout, where this folder shadows an installed graphfix
# (Python puts the working directory first on sys.path), passes/ lies beside it: the package
# looks there too, so that the checkout imports graphfix.passes as the installed package does.
_here = _os.path.dirname(_os.path.abspath(__file__))
if not _os.path.isdir(_os.path.join(_here, "passes")) and _os.path.isfile(
    _os.path.join(_os.path.dirname(_here), "passes", "__init__.py")
):
    __path__.append(_os.path.dirname(_here))  # noqa: F821 - a package's __path__
del _here

from graphfix.errors import GraphfixError
from graphfix.inspection import Inspection, inspect
from graphfix.model_io import load, save
from graphfix.options import BenchOptions, ParityOptions, RunOptions
from graphfix.pipeline import DEFAULT_PASSES, OptimizeResult, optimize, optimize_file
from graphfix.validate.bench import benchmark
from graphfix.validate.parity import check_parity
from graphfix.validate.profile import profile
from graphfix.validate.tune import tune

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
