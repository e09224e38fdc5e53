"""Builders of realistic ONNX models for graphfix's tests, benchmarks and peer comparison.

Not installed with graphfix. Pure onnx + numpy except :mod:`models.torch_models`, which imports
torch and transformers lazily.
"""

from __future__ import annotations

__all__: list[str] = []
