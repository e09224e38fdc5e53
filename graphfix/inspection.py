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
from graphfix.facts import model_facts
from graphfix.report import ModelFacts

__all__ = ["Inspection", "inspect", "STRUCTURAL_PASSES", "format_inspection"]

logger = logging.getLogger(__name__)

# Passes that rewrite the graph from its own structure alone, in pipeline order.
STRUCTURAL_PASSES = ("remove-initializer-inputs", "eliminate-transposes", "fold-shapes",
                     "merge-duplicates", "hoist-loop-invariants")


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


# --------------------------------------------------------------------------------------------
# For a terminal


def format_inspection(found: dict[str, Any]) -> str:
    """``graphfix inspect``'s text, from :meth:`graphfix.inspection.Inspection.to_dict`."""
    lines = [str(found["model"])]
    opsets = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in found["opsets"].items())
    lines.append(f"  IR {found['ir_version']}, opsets: {opsets}, "
                 f"producer: {found['producer'] or '?'}")
    lines.append(f"  size: {found['size_bytes']} bytes"
                 f"{' (external data)' if found['external_data'] else ''}, "
                 f"{found['nodes']} nodes, {found['initializers']} initializers, "
                 f"{found['subgraphs']} subgraphs")
    listed = set(found["initializer_input_names"])
    for kind, tensors in (("input", [t for t in found["inputs"] if t["name"] not in listed]),
                          ("output", found["outputs"])):
        for t in tensors:
            shape = "?" if t["shape"] is None else "[" + ", ".join(
                "?" if d is None else str(d) for d in t["shape"]) + "]"
            note = (f" ({t['unknown_written_as']} read as an unknown size)"
                    if t.get("unknown_written_as") is not None else "")
            lines.append(f"  {kind:6} {t['name']}: {t['dtype']}{shape}{note}")
    ops = ", ".join(f"{op} {n}" for op, n in sorted(found["op_histogram"].items(),
                                                      key=lambda kv: (-kv[1], kv[0])))
    lines.append(f"  ops: {ops or 'none'}")
    lines.append(f"  Transposes: {found['transposes']}")
    lines.append(f"  initializers listed as inputs: {found['initializer_inputs']}")
    if found["dynamic_dims"]:
        lines.append(f"  dynamic dimensions: {', '.join(found['dynamic_dims'])}")
    lines += [f"  warning: {w}" for w in found["warnings"]]
    lines.append("graphfix would (structural passes; run `graphfix optimize` for the rest):")
    lines += [f"  {name}: {change}" for name, change in found["would_change"].items()]
    return "\n".join(lines)
