"""What is in a model, and what graphfix would change in it.

    found = graphfix.inspect("model.onnx")
    found.facts.transposes, found.would_change["eliminate-transposes"]

The passes that need no runtime (no ONNX Runtime session, no onnxsim) run on a copy of the
model to say what they would change; ``graphfix optimize`` runs the rest.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import onnx

import graphfix.passes  # noqa: F401 - the pass library registers its passes on import
from graphfix import model_io, registry
from graphfix.report import ModelFacts, model_facts

__all__ = ["Inspection", "inspect", "STRUCTURAL_PASSES"]

logger = logging.getLogger(__name__)

# Passes that rewrite the graph from its own structure alone, in pipeline order.
STRUCTURAL_PASSES = ("remove-initializer-inputs", "eliminate-transposes", "fold-shapes",
                     "merge-duplicates")


@dataclasses.dataclass
class Inspection:
    """A model's facts, the checker's warnings, and per structural pass what it would do."""

    path: str | None
    facts: ModelFacts
    warnings: list[str]
    would_change: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.path, **dataclasses.asdict(self.facts), "warnings": self.warnings,
                "would_change": self.would_change}


def _would_change(model: onnx.ModelProto) -> dict[str, str]:
    """What each structural pass would do to ``model`` (rewritten in place), in turn."""
    changes = {}
    for name in STRUCTURAL_PASSES:
        before = model_facts(model, size_bytes=0)
        try:
            result = registry.get(name)()(model)
        except Exception as err:  # noqa: BLE001 - inspect reports, it does not fail
            logger.debug("%s fails on the model", name, exc_info=True)
            changes[name] = f"fails here ({type(err).__name__}: {err})"
            continue
        model = result.model
        after = model_facts(model, size_bytes=0)
        if result.skipped:
            changes[name] = f"skips: {result.skipped}"
        elif not result.modified:
            changes[name] = "nothing to do"
        elif name == "remove-initializer-inputs":
            changes[name] = (f"drop {before.initializer_inputs} initializer(s) from the inputs, "
                             "so ONNX Runtime can fold and fuse them")
        elif before.transposes != after.transposes:
            changes[name] = (f"Transposes {before.transposes} -> {after.transposes}, "
                             f"nodes {before.nodes} -> {after.nodes}")
        else:
            changes[name] = f"nodes {before.nodes} -> {after.nodes}"
    return changes


def inspect(model: model_io.ModelSource) -> Inspection:
    """Facts about ``model`` (a path, bytes or a ModelProto, which is not changed), the
    checker's warnings (and ONNX Runtime's refusal, for a model it cannot load: custom ops
    without their library, an opset it does not know), and what the structural passes would
    change."""
    # Weights stay in their files (read on demand, and by ONNX Runtime where they are).
    loaded = model_io.load_with_info(model, load_external_data=False)
    facts = model_facts(loaded.model, size_bytes=loaded.size_bytes or None,
                        external_data=loaded.external_data)
    warnings = model_io.check_model(loaded.model)
    if not warnings:  # a model the checker rejects has been tried on ONNX Runtime already
        problem = model_io.runtime_problem(loaded.model)
        if problem is not None:
            warnings.append(f"ONNX Runtime cannot load the model: {problem}")
    working = loaded.model
    if not loaded.owned:
        working = onnx.ModelProto()
        working.CopyFrom(loaded.model)
    return Inspection(str(loaded.path) if loaded.path else None, facts, warnings,
                      _would_change(working))
