"""graphfix's version: one home, read by the package, the report and ``graphfix --version``."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
