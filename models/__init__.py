"""Builders of realistic ONNX models for graphfix's tests, benchmarks and peer comparison,
installed as ``graphfix.models`` (the repository's ``models/`` folder), with the sample model the
README's first command optimizes.

Pure onnx + numpy except :mod:`.torch_models`, which imports torch and transformers lazily, and
:mod:`.random_models`, hypothesis strategies of random graphs (the test extra).
"""

from __future__ import annotations

__all__: list[str] = []
