"""Errors that graphfix raises. The CLI prints each as one line (plus its hint) and exits 1."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graphfix.report import Report

__all__ = [
    "GraphfixError",
    "ModelLoadError",
    "ModelSaveError",
    "PassError",
    "UnknownPassError",
    "ParityError",
    "ValidationInputError",
    "BenchmarkError",
    "ProviderUnavailableError",
    "first_line",
]


class GraphfixError(Exception):
    """Base class: a failure a user can act on. ``hint`` says what to do about it; ``report``
    is the report of the run it ended, when there was one (the evidence of a refusal: parity
    statistics, benchmark figures)."""

    def __init__(
        self, message: str, *, hint: str | None = None, report: Report | None = None
    ) -> None:
        super().__init__(message)
        self.hint = hint
        self.report = report

    def __str__(self) -> str:
        message = super().__str__()
        return f"{message} (hint: {self.hint})" if self.hint else message


class ModelLoadError(GraphfixError):
    """The model cannot be read: missing, not ONNX, truncated, invalid, or its external data is."""


class ModelSaveError(GraphfixError):
    """The model cannot be written where asked; nothing was left behind."""


class PassError(GraphfixError):
    """A pass failed on this model, or was given invalid options."""


class UnknownPassError(PassError):
    """A pass name that is not registered."""


class ParityError(GraphfixError):
    """The optimized model does not compute what the original computes. ``guilty_pass`` names
    the pass after which parity first fails, when re-running the passes one at a time finds
    it."""

    def __init__(
        self, message: str, *, hint: str | None = None, report: Report | None = None,
        guilty_pass: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint, report=report)
        self.guilty_pass = guilty_pass


class ValidationInputError(GraphfixError):
    """Inputs for validation or benchmarking cannot be made or do not fit the model."""


class BenchmarkError(GraphfixError):
    """A benchmark cannot run, or a required speedup was not reached."""


class ProviderUnavailableError(GraphfixError):
    """An ONNX Runtime execution provider that was asked for cannot be loaded."""


def first_line(err: BaseException | None, limit: int = 300) -> str:
    """The first non-empty line of a foreign exception's message (ONNX Runtime's run over
    several), at most ``limit`` characters; the exception's type when it says nothing."""
    text = str(err).strip() if err is not None else "unknown error"
    lines = [line for line in text.splitlines() if line.strip()]
    line = lines[0].strip() if lines else type(err).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."
