"""The ``graphfix.tune/1`` configuration file: the session settings ``graphfix tune`` chose, which
``graphfix bench --config`` and ``graphfix profile --config`` read back, so that the claim can
be re-checked on its own.

Schema (``SessionConfig.to_dict()``; stable within the major version)::

    {
      "schema": "graphfix.tune/1",
      "settings": {                                   # timing.Settings.to_dict()
        "provider": "cpu"|"cuda",
        "session_options": {"intra_op_num_threads": int (0: ORT's choice),
                            "inter_op_num_threads": int, "execution_mode": "sequential"|"parallel",
                            "graph_optimization_level": "disabled"|"basic"|"extended"|"all",
                            "enable_mem_pattern": bool, "enable_cpu_mem_arena": bool},
        "session_config_entries": {"session.intra_op.allow_spinning": "0"|"1",
                                   "session.dynamic_block_base": str (when set)},
        "provider_options": {option: str},           # CUDA only
        "io_binding": bool                            # CUDA: inputs/outputs bound on the device
      },
      "batch_size": int|null,       # the batch the winner was measured at (throughput), or null
      "objective": "latency"|"p99"|"throughput"|"memory",
      "model": {"name": str, "sha256": str},         # the model it was tuned for
      "measured": {"speedup": float, "ci_low": float, "ci_high": float, "statistic": str,
                   "default_ms": float, "winner_ms": float} | null,
                                    # the confirmation's rounds and statistic: a median is the
                                    # median of its rounds' block medians, per sample
      "versions": {"graphfix": str, "onnxruntime": str}
    }
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx

from graphfix.errors import BenchmarkError, first_line, shown
from graphfix.model_io import write_text
from graphfix.validate.timing import Settings

__all__ = ["SCHEMA", "OBJECTIVES", "SessionConfig", "read_config", "model_digest",
           "python_snippet"]

SCHEMA = "graphfix.tune/1"
# What tune minimizes; a configuration names the one its winner was chosen for.
OBJECTIVES = ("latency", "p99", "throughput", "memory")


# The fields of a file (the schema above).
_FIELDS = frozenset({"schema", "settings", "batch_size", "objective", "model", "measured",
                     "versions"})


@dataclasses.dataclass
class SessionConfig:
    """Session settings chosen for a model, with what they were measured to buy."""

    settings: Settings
    batch_size: int | None = None
    objective: str = "latency"
    model: dict[str, str] = dataclasses.field(default_factory=dict)
    measured: dict[str, Any] | None = None
    versions: dict[str, str] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "settings": self.settings.to_dict(),
            "batch_size": self.batch_size,
            "objective": self.objective,
            "model": dict(self.model),
            "measured": dict(self.measured) if self.measured is not None else None,
            "versions": dict(self.versions),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "the configuration") -> SessionConfig:
        if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
            found = data.get("schema") if isinstance(data, Mapping) else type(data).__name__
            newer = isinstance(found, str) and found.startswith("graphfix.tune/")
            raise BenchmarkError(
                f"{source} is not a {SCHEMA} file (schema: {found!r})"
                + (f": written by another graphfix; this one reads {SCHEMA}" if newer else ""),
                hint="write one with this graphfix: `graphfix tune MODEL --out FILE`")
        unknown = sorted(set(data) - _FIELDS)
        if unknown:  # a misspelt field would be ignored, and the file not do what it says
            raise BenchmarkError(f"{source}: unknown field(s) {', '.join(map(repr, unknown))}",
                                 hint=f"a {SCHEMA} file has {', '.join(sorted(_FIELDS))}")
        settings = data.get("settings")
        if not isinstance(settings, Mapping):
            raise BenchmarkError(f"{source} has no settings")
        objective = data.get("objective", "latency")
        if objective not in OBJECTIVES:
            raise BenchmarkError(f"{source}: unknown objective {objective!r}",
                                 hint=f"one of {', '.join(OBJECTIVES)}")
        batch = data.get("batch_size")
        if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int)
                                  or batch < 1):
            raise BenchmarkError(f"{source}: batch_size must be an integer >= 1, got {batch!r}")
        fields = {}
        for field in ("model", "measured", "versions"):
            value = data.get(field)
            if value is not None and not isinstance(value, Mapping):
                raise BenchmarkError(f"{source}: {field} must be an object, got "
                                     f"{type(value).__name__}")
            fields[field] = value or {}
        try:
            chosen = Settings.from_dict(settings)
        except BenchmarkError as err:
            raise BenchmarkError(f"{source}: {err.args[0]}", hint=err.hint) from None
        return cls(
            settings=chosen,
            batch_size=batch,
            objective=objective,
            model={str(k): str(v) for k, v in fields["model"].items()},
            measured=dict(fields["measured"]) or None,
            versions={str(k): str(v) for k, v in fields["versions"].items()},
        )

    def write(self, path: str | os.PathLike[str], *,
              protect: Sequence[str | os.PathLike[str]] = ()) -> None:
        """Write the file atomically; never over a file in ``protect`` (files read)."""
        write_text(path, json.dumps(self.to_dict(), indent=2) + "\n", protect=protect)

    def snippet(self, model_path: str = "model.onnx") -> str:
        return python_snippet(self.settings, model_path)


def read_config(path: str | os.PathLike[str]) -> SessionConfig:
    """A ``graphfix.tune/1`` file; a missing, unreadable or malformed one raises
    :class:`BenchmarkError` in one line."""
    where = shown(Path(path))
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as err:
        raise BenchmarkError(f"{where}: cannot read the configuration ({err.strerror or err})",
                             hint="write one with `graphfix tune MODEL --out FILE`") from None
    except ValueError as err:  # not JSON, not UTF-8, or a number past Python's digit limit
        raise BenchmarkError(f"{where} is not JSON: {first_line(err, limit=300)}") from None
    except RecursionError:
        raise BenchmarkError(f"{where} is not a configuration: JSON nested too deeply to "
                             "read") from None
    return SessionConfig.from_dict(data, source=where)


def model_digest(model: onnx.ModelProto) -> str:
    """SHA-256 of the model's graph as serialized (weights in external files not read)."""
    return hashlib.sha256(model.graph.SerializeToString(deterministic=True)).hexdigest()


def python_snippet(settings: Settings, model_path: str = "model.onnx") -> str:
    """Python that makes a session with ``settings`` (what a user pastes into their code)."""
    mode = "ORT_PARALLEL" if settings.execution_mode == "parallel" else "ORT_SEQUENTIAL"
    level = {"disabled": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC",
             "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}[settings.optimization]
    data = settings.to_dict()
    lines = [
        "import onnxruntime as ort",
        "",
        "options = ort.SessionOptions()",
        f"options.intra_op_num_threads = {settings.threads}",
        f"options.inter_op_num_threads = {settings.inter_op_threads}",
        f"options.execution_mode = ort.ExecutionMode.{mode}",
        f"options.graph_optimization_level = ort.GraphOptimizationLevel.{level}",
        f"options.enable_mem_pattern = {settings.memory_pattern}",
        f"options.enable_cpu_mem_arena = {settings.cpu_arena}",
    ]
    for key, value in data["session_config_entries"].items():
        lines.append(f"options.add_session_config_entry({key!r}, {value!r})")
    if settings.provider == "cuda":
        lines.append(f"providers = [('CUDAExecutionProvider', {data['provider_options']!r}), "
                     "'CPUExecutionProvider']")
    else:
        lines.append("providers = ['CPUExecutionProvider']")
    lines.append(f"session = ort.InferenceSession({model_path!r}, options, providers=providers)")
    if settings.provider == "cuda" and settings.io_binding:
        lines += [
            "# Keep inputs and outputs on the device: bind them once, run with the binding.",
            "binding = session.io_binding()",
            "# binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(array, "
            "'cuda', 0))",
            "# binding.bind_output(name, 'cuda')",
            "session.run_with_iobinding(binding)",
        ]
    return "\n".join(lines) + "\n"
