"""Errors that graphfix raises. The CLI prints each as one line (plus its hint) and exits 1."""

from __future__ import annotations

import os
import re
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
    "ResourceError",
    "first_line",
    "shown",
]


class GraphfixError(Exception):
    """Base class: a failure a user can act on. ``hint`` says what to do about it; ``report``
    is the report of the run it ended, when there was one (the evidence of a refusal: parity
    statistics, benchmark figures); ``model``, where several models are timed together, which
    of them it is about ("candidate" or "baseline")."""

    def __init__(
        self, message: str, *, hint: str | None = None, report: Report | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__(message)
        self.hint = hint
        self.report = report
        self.model = model

    def __str__(self) -> str:
        message = super().__str__()
        text = f"{message} (hint: {self.hint})" if self.hint else message
        # One line, whatever a name or a foreign message held (a path is quoted by shown();
        # this is the safety net for anything that was not).
        return _LINE_BREAKS.sub(lambda m: repr(m.group())[1:-1], text)


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


class ResourceError(ModelSaveError):
    """The system refused what graphfix needs: room in a folder, a file larger than the
    file-size limit, a path longer than it allows, a temporary folder it cannot use."""


_LINE_BREAKS = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")

# ONNX Runtime's status prefix ("[ONNXRuntimeError] : 1 : FAIL : ") and the C++ source location
# its messages start with ("/onnxruntime_src/.../graph.cc:1234 void onnxruntime::Graph::f(...)").
_ORT_PREFIX = re.compile(r"^\[ONNXRuntimeError\] : \d+ : [A-Z_]+ : ")
_SOURCE_LOCATION = re.compile(r"(?:^|(?<=\s))\S+\.(?:cc|cpp|cxx|cu|h|hpp):\d+ ")


def _strip_signature(text: str) -> str:
    """``text`` without the C++ source locations and function signatures ORT puts before its
    sentence: from ``file.cc:123`` up to the end of the parameter list that follows."""
    while (found := _SOURCE_LOCATION.search(text)) is not None:
        rest = text[found.end():]
        opening = rest.find("(")
        # A signature names a C++ function ("void onnxruntime::f(", "Status Graph::g(");
        # anything else after the location is already the sentence.
        if opening < 0 or "::" not in rest[:opening] or ". " in rest[:opening]:
            text = text[: found.start()] + rest
            continue
        depth, end = 0, len(rest)
        for index in range(opening, len(rest)):
            depth += {"(": 1, ")": -1}.get(rest[index], 0)
            if depth == 0:
                end = index + 1
                break
        text = text[: found.start()] + rest[end:].removeprefix(" const").lstrip()
    return text


def first_line(err: BaseException | None, limit: int = 500) -> str:
    """The first non-empty line of a foreign exception's message (ONNX Runtime's run over
    several), without ONNX Runtime's status prefix and C++ function signature, at most
    ``limit`` characters (cut at a word); the exception's type when it says nothing."""
    text = str(err).strip() if err is not None else "unknown error"
    lines = [line for line in text.splitlines() if line.strip()]
    line = lines[0].strip() if lines else type(err).__name__
    # a sentence that goes on over the next lines (onnx's checker: "... input 'f' of node:",
    # then the node, then the rest) is read whole
    for more in lines[1:4] if line.endswith(":") else ():
        line += " " + " ".join(more.split())
    line = _strip_signature(_ORT_PREFIX.sub("", line)).strip() or line
    if len(line) <= limit:
        return line
    cut = line[: limit - 3]
    return (cut.rsplit(" ", 1)[0] if " " in cut[limit // 2:] else cut) + "..."


def shown(path: str | os.PathLike | None) -> str:
    """A path as a message shows it: as it is when it prints plainly on one line, else quoted
    and escaped like a Python string (a newline in a name cannot split the message)."""
    text = os.fsdecode(path) if path is not None else ""
    if text and text.isprintable() and text == text.strip():
        return text
    return repr(text)
