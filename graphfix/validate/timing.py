"""Sessions and clocks of a benchmark: ONNX Runtime's options for timing, the provider list,
where each node runs (from ORT's profile), one timed call (IO binding on CUDA, a CUDA graph on
request), and what CUDA graphs need."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from graphfix import model_io
from graphfix.errors import BenchmarkError, ValidationInputError, first_line
from graphfix.graph import all_nodes

if TYPE_CHECKING:
    import onnxruntime

__all__ = ["Placement", "Config", "Settings", "open_session", "profile", "parse_profile",
           "Timer", "check_cuda_graph", "check_feeds", "graph_inputs"]

logger = logging.getLogger(__name__)

_CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})
_MEMCPY = frozenset({"MemcpyToHost", "MemcpyFromHost"})
# ORT keeps shape arithmetic on the CPU on purpose; these are not fallbacks worth a warning.
_CPU_BY_DESIGN = frozenset({"Shape", "Size"}) | _MEMCPY
_PROFILE_RUNS = 2


@dataclasses.dataclass
class Placement:
    """Which provider ran which nodes, from ORT's profile of one session."""

    nodes: dict[str, int] = dataclasses.field(default_factory=dict)
    op_types: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    memcpy_nodes: int = 0
    # Compute nodes on the CPU provider in a CUDA session (op type -> count).
    cpu_fallback: dict[str, int] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Config:
    label: str
    model: onnx.ModelProto
    optimization: str

    @property
    def model_label(self) -> str:
        """"candidate" or "baseline", whatever the optimization level."""
        return self.label.split("_")[0]


@dataclasses.dataclass(frozen=True)
class Settings:
    """How every session of one benchmark is made (the same for baseline and candidate)."""

    provider: str
    threads: int
    dynamic_block_base: int | None
    allow_spinning: bool
    cuda_graph: bool


def _session_options(
    settings: Settings, *, profile_prefix: str | None = None
) -> onnxruntime.SessionOptions:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = settings.threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.add_session_config_entry(
        "session.intra_op.allow_spinning", "1" if settings.allow_spinning else "0"
    )
    if settings.dynamic_block_base is not None:
        options.add_session_config_entry(
            "session.dynamic_block_base", str(settings.dynamic_block_base)
        )
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    return options


def _providers(settings: Settings, *, cuda_graph: bool) -> list[str | tuple[str, dict[str, str]]]:
    if settings.provider == "cpu":
        return ["CPUExecutionProvider"]
    cuda_options = {
        "device_id": "0",
        "cudnn_conv_use_max_workspace": "1",
        "enable_cuda_graph": "1" if cuda_graph else "0",
    }
    return [("CUDAExecutionProvider", cuda_options), "CPUExecutionProvider"]


def open_session(
    config: Config, settings: Settings, *, profile_prefix: str | None = None
) -> tuple[onnxruntime.InferenceSession, float]:
    """A session for ``config`` and its creation time in ms; profiling sessions never use CUDA
    graphs (they only count nodes)."""
    options = _session_options(settings, profile_prefix=profile_prefix)
    cuda_graph = settings.cuda_graph and profile_prefix is None
    started = time.perf_counter()
    try:
        session = model_io.ort_session(
            config.model,
            optimization=config.optimization,
            providers=_providers(settings, cuda_graph=cuda_graph),
            options=options,
        )
    except Exception as err:  # noqa: BLE001 - ORT raises its own exception types
        raise BenchmarkError(
            f"ONNX Runtime cannot open the {config.label} model on {settings.provider}: "
            f"{first_line(err)}"
        ) from None
    return session, (time.perf_counter() - started) * 1e3


def parse_profile(events: Sequence[Mapping[str, Any]], *, provider: str = "cpu") -> Placement:
    """Placement from ORT profile events: each node's ``*_kernel_time`` event names its op
    type and provider; a node is counted once however many runs the profile covers."""
    seen: dict[str, tuple[str, str]] = {}
    for event in events:
        if event.get("cat") != "Node":
            continue
        name = str(event.get("name", ""))
        if not name.endswith("_kernel_time"):
            continue
        args = event.get("args") or {}
        node_provider = args.get("provider")
        if not node_provider:
            continue
        seen[name[: -len("_kernel_time")]] = (str(args.get("op_name", "?")), str(node_provider))
    placement = Placement()
    op_types: dict[str, Counter[str]] = {}
    for op_type, node_provider in seen.values():
        placement.nodes[node_provider] = placement.nodes.get(node_provider, 0) + 1
        op_types.setdefault(node_provider, Counter())[op_type] += 1
        if op_type in _MEMCPY:
            placement.memcpy_nodes += 1
        elif (
            provider == "cuda"
            and node_provider == "CPUExecutionProvider"
            and op_type not in _CPU_BY_DESIGN
        ):
            placement.cpu_fallback[op_type] = placement.cpu_fallback.get(op_type, 0) + 1
    placement.op_types = {p: dict(sorted(c.items())) for p, c in sorted(op_types.items())}
    placement.nodes = dict(sorted(placement.nodes.items()))
    return placement


def profile(
    config: Config, settings: Settings, feeds: Mapping[str, np.ndarray]
) -> tuple[Placement, dict[str, np.ndarray]]:
    """Placement of ``config``, and the outputs of one run (for their shapes)."""
    with model_io.temporary_folder("profile") as folder:
        session, _ = open_session(config, settings, profile_prefix=str(folder / "profile"))
        feed = check_feeds(config.label, session, feeds)
        names = [o.name for o in session.get_outputs()]
        try:
            for _ in range(_PROFILE_RUNS):
                values = session.run(names, feed)
        except Exception as err:  # noqa: BLE001
            raise ValidationInputError(
                f"the {config.label} model does not run on the given inputs: {first_line(err)}",
                hint="check the input shapes (input_shapes=...) or pass feeds=...",
            ) from None
        path = session.end_profiling()
        with open(path, encoding="utf-8") as handle:
            events = json.load(handle)
    return parse_profile(events, provider=settings.provider), dict(zip(names, values))


class Timer:
    """Times one call of one session, in milliseconds."""

    def __init__(
        self,
        session: onnxruntime.InferenceSession,
        feeds: Mapping[str, np.ndarray],
        provider: str,
        outputs: Mapping[str, np.ndarray],
    ) -> None:
        self.session = session
        self.names = [o.name for o in session.get_outputs()]
        self.feeds = dict(feeds)
        self.binding: Any = None
        self._keep: list[Any] = []
        if provider == "cuda":
            self._bind(outputs)

    def _bind(self, outputs: Mapping[str, np.ndarray]) -> None:
        # Inputs copied to the device once; outputs pre-allocated there at the shapes one run
        # produced, so the timed call moves no data between host and device (and a CUDA graph
        # sees the same addresses every replay).
        import onnxruntime as ort

        binding = self.session.io_binding()
        for name, array in self.feeds.items():
            value = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), "cuda", 0)
            binding.bind_ortvalue_input(name, value)
            self._keep.append(value)
        for name in self.names:
            array = outputs[name]
            value = ort.OrtValue.ortvalue_from_shape_and_type(
                list(array.shape), array.dtype, "cuda", 0
            )
            binding.bind_ortvalue_output(name, value)
            self._keep.append(value)
        self.binding = binding

    def __call__(self) -> float:
        if self.binding is not None:
            started = time.perf_counter_ns()
            self.session.run_with_iobinding(self.binding)
            self.binding.synchronize_outputs()
            return (time.perf_counter_ns() - started) / 1e6
        started = time.perf_counter_ns()
        self.session.run(self.names, self.feeds)
        return (time.perf_counter_ns() - started) / 1e6


def check_cuda_graph(
    models: Mapping[str, onnx.ModelProto], input_shapes: Mapping[str, Sequence[int]] | None,
    feeds_given: bool,
) -> None:
    """CUDA graphs replay a fixed sequence of kernels on fixed addresses: refuse models whose
    control flow or input shapes would change it (ORT's documented constraints)."""
    pinned = set(input_shapes or {})
    for label, model in models.items():
        flow = sorted({n.op_type for n in all_nodes(model.graph)} & _CONTROL_FLOW)
        if flow:
            raise BenchmarkError(
                f"cuda_graph: the {label} model has control-flow ops ({', '.join(flow)})",
                hint="CUDA graphs cannot capture If/Loop/Scan; benchmark without cuda_graph",
            )
        if feeds_given:
            continue
        dynamic = [
            value.name
            for value in graph_inputs(model)
            if value.name not in pinned
            and any(not d.HasField("dim_value") for d in value.type.tensor_type.shape.dim)
        ]
        if dynamic:
            raise BenchmarkError(
                f"cuda_graph: the {label} model's input(s) {', '.join(map(repr, dynamic))} have "
                "dynamic shapes",
                hint="fix their shapes with input_shapes=... (CUDA graphs need static shapes)",
            )


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    initializers = {init.name for init in model.graph.initializer}
    return [value for value in model.graph.input if value.name not in initializers]


def check_feeds(
    label: str, session: onnxruntime.InferenceSession, feeds: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The feeds ``session`` needs, by name; a missing one raises ValidationInputError."""
    needed = [i.name for i in session.get_inputs()]
    missing = [name for name in needed if name not in feeds]
    if missing:
        raise ValidationInputError(
            f"the {label} model needs input(s) {', '.join(map(repr, missing))} that the feeds "
            "lack",
            hint="give feeds for every input of both models",
        )
    return {name: feeds[name] for name in needed}
