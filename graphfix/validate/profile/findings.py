"""What to change: findings read from one profiled run.

A finding is a reason with its evidence, the way a rewrite rule's failed condition is: each kind
is a small function of what the run observed (:class:`Observed`) that returns a
:class:`Finding` or None, and :data:`KINDS` is the one table of them. A kind fires only on
numbers from this run (counts from the model and the trace, time shares, percentiles), and its
fix is a graphfix command or an ONNX Runtime setting with its code. Where the fix is a graphfix
pass, a session setting or a batch size, the finding carries a :class:`Trial`, which
``graphfix.profile`` measures (interleaved rounds as ``bench`` takes them, one session alive
at a time when threads spin, a bootstrap interval) and records as the finding's ``measured`` speedup. A trial marked ``required``
carries the finding's whole support: when it is not significantly faster, the finding is
dropped.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnx

from graphfix.providers import CUDA_FIX, ProviderStatus
from graphfix.graph import all_nodes, graphs
from graphfix.feeds import input_specs
from graphfix.validate.profile.accounting import ModelProfile
from graphfix.validate.profile.trace import GLUE_OPS
from graphfix.validate.stats import FASTER, SLOWER, Speedup
from graphfix.validate.timing import Settings

__all__ = ["Trial", "Finding", "Environment", "Observed", "KINDS", "find", "rank",
           "LAYOUT_PERMS", "LAYOUT_SENSITIVE", "THREAD_VARIABLES"]

# Thresholds: below them the numbers do not support a finding.
MIN_SHARE = 0.01            # a dtype's compute share worth a finding (float64, float32 islands)
ISLAND_SHARE = 0.05         # float32 compute in a float16 model
TAIL_RATIO = 1.5            # p99 / median
TAIL_RUNS = 50              # timed calls needed before a p99 says anything
TRIAL_BATCH = 4             # the batch a dynamic-batch model is tried at

LAYOUT_PERMS = frozenset({(0, 2, 3, 1), (0, 3, 1, 2), (0, 2, 1), (0, 2, 3, 4, 1),
                          (0, 4, 1, 2, 3)})
"""Transposes between channels-last and channels-first (1-D, 2-D and 3-D images)."""

LAYOUT_SENSITIVE = frozenset({
    "Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "MaxPool", "AveragePool",
    "LpPool", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "BatchNormalization",
    "InstanceNormalization", "LRN", "Resize", "Upsample", "DepthToSpace", "SpaceToDepth",
    "MaxRoiPool", "RoiAlign", "GridSample", "Col2Im",
})
"""Ops that read a fixed axis as the channels (NCHW in ONNX)."""

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "OMP_PROC_BIND", "MKL_NUM_THREADS",
                    "OPENBLAS_NUM_THREADS", "KMP_AFFINITY", "KMP_BLOCKTIME")
"""Environment variables of other thread pools; ONNX Runtime's own pool reads none of them."""

_FLOAT_KEYS = {"float": "float32", "double": "float64", "float16": "float16",
               "bfloat16": "bfloat16"}
_NOT_COMPUTE = GLUE_OPS | {"Shape", "Size", "Identity", "Constant", "ConstantOfShape"}


@dataclasses.dataclass(frozen=True)
class Trial:
    """How to measure a finding's fix: graphfix passes on the model, changed session settings,
    or another batch size (compared per sample), under ``statistic``."""

    passes: tuple[str, ...] = ()
    settings: tuple[tuple[str, Any], ...] = ()
    batch: int | None = None
    statistic: str = "median"
    required: bool = False

    def describe(self) -> str:
        parts = []
        if self.passes:
            parts.append("passes " + ", ".join(self.passes))
        if self.settings:
            parts.append(", ".join(f"{k}={v}" for k, v in self.settings))
        if self.batch is not None:
            parts.append(f"batch {self.batch}")
        return "; ".join(parts)


@dataclasses.dataclass
class Finding:
    """A reason with its evidence (numbers from this run), the fix, and what the fix bought
    here when it was tried."""

    kind: str
    reason: str
    evidence: dict[str, Any]
    fix: str
    measured: Speedup | None = None
    trial: Trial | None = None
    note: str | None = None  # why a trial was not measured, or what it found instead

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "reason": self.reason,
            "evidence": dict(self.evidence),
            "fix": self.fix,
            "measured": dataclasses.asdict(self.measured) if self.measured else None,
            "tried": self.trial.describe() if self.trial else None,
            "note": self.note,
        }


@dataclasses.dataclass
class Environment:
    """The machine as it bears on the findings."""

    physical_cores: int
    cpu_quota: float | None                 # cgroup CPU limit, in CPUs
    thread_variables: dict[str, str]        # THREAD_VARIABLES that are set
    cuda: ProviderStatus | None             # the CUDA provider, when it was probed
    driver: bool                            # the NVIDIA driver library loads

    @classmethod
    def here(cls, *, physical_cores: int, cuda: ProviderStatus | None,
             driver: bool) -> Environment:
        variables = {name: os.environ[name] for name in THREAD_VARIABLES if name in os.environ}
        return cls(physical_cores, _cpu_quota(), variables, cuda, driver)


@dataclasses.dataclass
class Observed:
    """Everything a kind may read: the model, its profile, how its session was made."""

    name: str
    model: onnx.ModelProto
    profile: ModelProfile
    settings: Settings
    requested_provider: str
    environment: Environment
    # the levels above ``settings.optimization`` at which ONNX Runtime does not open the model
    closed_levels: tuple[str, ...] = ()


Kind = Callable[[Observed], "Finding | None"]


def _cpu_quota() -> float | None:
    """The cgroup v2 CPU limit of this process in CPUs, or None when it has none."""
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as handle:
            quota, period = handle.read().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None


def _optimize(observed: Observed, passes: str | None = None, options: str = "") -> str:
    """The command that writes ``observed``'s model fixed: ``passes`` or other ``options``."""
    stem = observed.name[:-5] if observed.name.endswith(".onnx") else observed.name
    chosen = f" --passes {passes}" if passes else ""
    return f"graphfix optimize {observed.name} {stem}.opt.onnx{chosen}{options}"


def _share(profile: ModelProfile, keep: Callable[[Any], bool]) -> tuple[int, float]:
    chosen = [n for n in profile.nodes if keep(n)]
    return len(chosen), sum(n.share for n in chosen)


def _float_type(node: Any) -> str | None:
    for shape in node.output_shapes:
        for key in shape:
            if key in _FLOAT_KEYS:
                return _FLOAT_KEYS[key]
    return None


# --------------------------------------------------------------------------------------------
# The kinds


def initializer_inputs(observed: Observed) -> Finding | None:
    """Initializers listed as graph inputs: from IR 4 on ORT treats them as inputs a caller may
    override, so constant folding and the fusions that need constant weights skip them."""
    model = observed.model
    initializers = {init.name for init in model.graph.initializer}
    listed = [value.name for value in model.graph.input if value.name in initializers]
    if not listed:
        return None
    overridable = model.ir_version >= 4
    reason = (f"{len(listed)} initializer(s) are listed as graph inputs; at IR "
              f"{model.ir_version} ONNX Runtime "
              + ("treats them as overridable inputs, so constant folding and fusions skip them"
                 if overridable else
                 "still folds them, but any tool that raises the IR version makes them "
                 "overridable inputs"))
    return Finding(
        "initializer-inputs", reason,
        {"initializer_inputs": len(listed), "ir_version": model.ir_version,
         "examples": listed[:3], "nodes_executed": len(observed.profile.nodes)},
        _optimize(observed, "remove-initializer-inputs"),
        trial=Trial(passes=("remove-initializer-inputs",)),
    )


def _layout_transposes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """Transposes between channels-last and channels-first right before or after a
    layout-sensitive op (a Conv, a pool, a normalization over channels): a converter's glue.
    The same permutation elsewhere (an attention head split) is not layout glue."""
    found = []
    for graph in graphs(model.graph):
        producer = {out: node for node in graph.node for out in node.output}
        readers: dict[str, list[onnx.NodeProto]] = {}
        for node in graph.node:
            for name in node.input:
                readers.setdefault(name, []).append(node)
        for node in graph.node:
            perm = tuple(next((a.ints for a in node.attribute if a.name == "perm"), ()))
            if node.op_type != "Transpose" or perm not in LAYOUT_PERMS:
                continue
            before = producer.get(node.input[0]) if node.input else None
            after = readers.get(node.output[0], []) if node.output else []
            if (before is not None and before.op_type in LAYOUT_SENSITIVE) or any(
                    reader.op_type in LAYOUT_SENSITIVE for reader in after):
                found.append(node)
    return found


def nhwc_transposes(observed: Observed) -> Finding | None:
    """Channels-last/channels-first Transposes a converter wrapped around layout-sensitive ops."""
    layout = _layout_transposes(observed.model)
    if len(layout) < 2:
        return None
    executed, share = _share(observed.profile, lambda n: n.op_type == "Transpose")
    return Finding(
        "nhwc-transposes",
        f"{len(layout)} NHWC<->NCHW Transposes around layout-sensitive ops in the model (a "
        "converter's layout glue); "
        f"ONNX Runtime still ran {executed} Transpose(s), {share:.1%} of the run",
        {"layout_transposes": len(layout), "transposes_executed": executed,
         "transpose_share": round(share, 4)},
        _optimize(observed, "eliminate-transposes")
        + " (add --inputs-as-nchw NAME to make a channels-last input channels-first)",
        trial=Trial(passes=("eliminate-transposes",)),
    )


def shape_arithmetic(model: onnx.ModelProto) -> set[str]:
    """The names of the main graph's nodes that compute on tensor shapes alone: from Shape or
    Size, through any node whose inputs are such values or constants."""
    constants = {t.name for t in model.graph.initializer}
    shaped: set[str] = set()
    names: set[str] = set()
    for node in model.graph.node:  # in order: ONNX graphs are topologically sorted
        inputs = [i for i in node.input if i]
        if node.op_type == "Constant":
            constants.update(node.output)
            continue
        if node.op_type in ("Shape", "Size") or (
                inputs and any(i in shaped for i in inputs)
                and all(i in shaped or i in constants for i in inputs)):
            shaped.update(node.output)
            names.add(node.name)
    return names


def cpu_fallback(observed: Observed) -> Finding | None:
    """Nodes left on the CPU provider in a CUDA session, and the copies around them: shape
    arithmetic ONNX Runtime keeps there on purpose, and compute ops without a CUDA kernel."""
    accounting = observed.profile.accounting
    placement = observed.profile.placement
    if observed.settings.provider != "cuda" or not (placement.cpu_fallback
                                                    or accounting.memcpy_nodes):
        return None
    _, memcpy_share = _share(observed.profile,
                             lambda n: n.op_type in ("MemcpyToHost", "MemcpyFromHost"))
    ops = ", ".join(f"{op} x{n}" for op, n in sorted(placement.cpu_fallback.items()))
    on_shapes = shape_arithmetic(observed.model) & set(placement.cpu_fallback_nodes)
    by_name = {n.name: n.op_type for n in observed.model.graph.node}
    compute: dict[str, int] = {}
    for name in placement.cpu_fallback_nodes:
        if name not in on_shapes:
            op = by_name.get(name, "?")
            compute[op] = compute.get(op, 0) + 1
    fixes = []
    if on_shapes:
        fixes.append(
            f"{len(on_shapes)} of them compute on tensor shapes, which ONNX Runtime keeps on "
            "the CPU on purpose (cheaper than a kernel launch, but they stop CUDA graphs and "
            f"can cost copies): `{_optimize(observed, 'fold-shapes,simplify')}` folds what the "
            "shapes allow (all of it with --input-shape at the sizes you deploy)")
    if compute:
        fixes.append(", ".join(f"{op} x{n}" for op, n in sorted(compute.items()))
                     + ": no CUDA kernel at these dtypes in this onnxruntime; export them as "
                     "ops the CUDA provider implements")
    if not placement.cpu_fallback_nodes:
        fixes.append("the copies move inputs or outputs kept on the host: bind them on the "
                     "device (onnxruntime's IO binding)")
    return Finding(
        "cpu-fallback",
        f"{accounting.cpu_nodes} node(s) ran on the CPU provider in a CUDA session "
        f"({ops or 'none'}), {accounting.cpu_ms / accounting.latency_ms:.1%} of the run, with "
        f"{accounting.memcpy_nodes} Memcpy node(s) moving {accounting.memcpy_bytes} bytes per "
        f"run ({memcpy_share:.1%})",
        {"cpu_nodes": accounting.cpu_nodes, "cpu_op_types": dict(placement.cpu_fallback),
         "cpu_ms": round(accounting.cpu_ms, 4), "memcpy_nodes": accounting.memcpy_nodes,
         "memcpy_bytes": accounting.memcpy_bytes, "memcpy_share": round(memcpy_share, 4),
         "shape_nodes": len(on_shapes), "compute_op_types": compute},
        "; ".join(fixes),
    )


def float64_compute(observed: Observed) -> Finding | None:
    """Compute in double precision where single would do."""
    count, share = _share(observed.profile, lambda n: n.op_type not in _NOT_COMPUTE
                          and _float_type(n) == "float64")
    if count == 0 or share < MIN_SHARE:
        return None
    return Finding(
        "float64",
        f"{count} node(s) compute in float64, {share:.1%} of the run: double precision runs "
        "at half the vector width and misses most of ONNX Runtime's fused kernels",
        {"float64_nodes": count, "float64_share": round(share, 4)},
        "export the model in float32 (torch: model.float() before exporting; "
        "numpy inputs: astype(np.float32)), unless the outputs need double precision",
    )


def _declared(model: onnx.ModelProto) -> dict[int, int]:
    """How many initializers and graph inputs the model declares of each element type."""
    counts: dict[int, int] = {}
    for init in model.graph.initializer:
        counts[init.data_type] = counts.get(init.data_type, 0) + 1
    for value in model.graph.input:
        elem = value.type.tensor_type.elem_type
        counts[elem] = counts.get(elem, 0) + 1
    return counts


def float16_islands(observed: Observed) -> Finding | None:
    """Float32 compute and Casts inside a float16 model (declared so: its weights and inputs
    are mostly float16)."""
    declared = _declared(observed.model)
    half_declared = declared.get(onnx.TensorProto.FLOAT16, 0)
    if half_declared == 0 or half_declared < declared.get(onnx.TensorProto.FLOAT, 0):
        return None
    profile = observed.profile
    half, _ = _share(profile, lambda n: n.op_type not in _NOT_COMPUTE
                     and _float_type(n) == "float16")
    single, single_share = _share(profile, lambda n: n.op_type not in _NOT_COMPUTE
                                  and _float_type(n) == "float32")
    casts, cast_share = _share(profile, lambda n: n.op_type == "Cast")
    if single_share < ISLAND_SHARE and cast_share < MIN_SHARE:
        return None
    in_model = sum(1 for n in all_nodes(observed.model.graph) if n.op_type == "Cast")
    on_cpu = observed.settings.provider == "cpu"
    fix = ("on the CPU run the float32 model: ONNX Runtime's CPU provider lacks float16 "
           "kernels for most ops, computes them in float32 and casts around them" if on_cpu
           else "convert with the islands' ops kept in float16 (onnxconverter_common.float16: "
           "a smaller op_block_list, keep_io_types=True) or cast once at the model's edges")
    return Finding(
        "float16-islands",
        f"a float16 model ran {single} float32 compute node(s), {single_share:.1%} of the run "
        f"({half} in float16), and {casts} Cast(s) ({in_model} in the model), {cast_share:.1%}",
        {"float16_nodes": half, "float32_nodes": single,
         "float32_share": round(single_share, 4), "casts_executed": casts,
         "casts_in_model": in_model, "cast_share": round(cast_share, 4)},
        fix,
    )


def batch_one(observed: Observed) -> Finding | None:
    """Batch 1 on a model whose batch is dynamic: throughput is left on the table."""
    specs = [spec for spec in input_specs(observed.model, values=False)
             if spec.dims and not isinstance(spec.dims[0], int)
             and observed.profile.input_shapes.get(spec.name, [0])[:1] == [1]]
    if not specs:
        return None
    dynamic = [spec.name for spec in specs]
    # a first dimension no name calls a batch may be a length (a streaming model's frames)
    named = all(str(spec.dims[0]).lower().startswith("batch")
                or str(spec.dims[0]).lower() in ("b", "n", "bs") for spec in specs)
    what, unit = ("batch dimension", "sample") if named else (
        "first dimension (a batch, or a length)", "item")
    return Finding(
        "batch-one",
        f"the {what} of {', '.join(map(repr, dynamic))} is dynamic, but it was fed 1 "
        f"{unit} per call",
        {"inputs": dynamic, "batch": 1, "tried_batch": TRIAL_BATCH},
        f"batch requests: feed several samples per call (the speedup is per sample, at batch "
        f"{TRIAL_BATCH}); `graphfix tune --objective throughput` measures the batch sizes",
        trial=Trial(batch=TRIAL_BATCH, required=True),
    )


def latency_variance(observed: Observed) -> Finding | None:
    """A long tail: p99 far above the median."""
    accounting = observed.profile.accounting
    runs = observed.profile.stats.runs
    ratio = accounting.p99_ms / accounting.latency_ms
    if runs < TAIL_RUNS or ratio < TAIL_RATIO:
        return None
    settings = observed.settings
    threaded = settings.provider == "cpu" and settings.threads != 1 and (
        settings.dynamic_block_base is None)
    return Finding(
        "latency-variance",
        f"p99 is {ratio:.2f}x the median ({accounting.p99_ms:.3f} ms against "
        f"{accounting.latency_ms:.3f} ms over {runs} calls)",
        {"p50_ms": round(accounting.latency_ms, 4), "p99_ms": round(accounting.p99_ms, 4),
         "ratio": round(ratio, 3), "runs": runs},
        "options.add_session_config_entry('session.dynamic_block_base', '4') (smaller blocks "
        "of work per thread, steadier on a busy machine); "
        f"`graphfix tune {observed.name} --objective p99` measures it with the other settings",
        trial=Trial(settings=(("dynamic_block_base", 4),), statistic="p99") if threaded
        else None,
        note=None if threaded else "one thread: dynamic_block_base changes nothing to try",
    )


def threads(observed: Observed) -> Finding | None:
    """More intra-op threads than the cores this process may use, or other pools' variables."""
    environment = observed.environment
    used = observed.settings.threads
    cores = environment.physical_cores
    quota = environment.cpu_quota
    allowed = min(cores, max(1, int(quota))) if quota is not None else cores
    over = observed.settings.provider == "cpu" and used > allowed
    if not over and not environment.thread_variables:
        return None
    parts = []
    if over:
        parts.append(f"{used} intra-op threads for {cores} physical core(s)"
                     + (f" and a CPU quota of {quota:g}" if quota is not None else ""))
    if environment.thread_variables:
        parts.append(f"{', '.join(sorted(environment.thread_variables))} set: ONNX Runtime's "
                     "own thread pool ignores them (they size other libraries' pools, which "
                     "then compete for the same cores)")
    return Finding(
        "threads", "; ".join(parts),
        {"threads": used, "physical_cores": cores, "cpu_quota": quota,
         "variables": dict(environment.thread_variables)},
        f"options.intra_op_num_threads = {allowed}; `graphfix tune {observed.name}` measures "
        "the thread counts",
        trial=Trial(settings=(("threads", allowed),)) if over else None,
    )


_FUSED_ATTENTION = frozenset({"Attention", "MultiHeadAttention", "GroupQueryAttention",
                              "PackedAttention", "PackedMultiHeadAttention"})


def _attention_op(node: Any) -> bool:
    """A node of an attention block computed op by op: the Softmax, or a MatMul of rank-4
    tensors (heads), q @ k^T or the probabilities @ v; projections are rank 3."""
    if node.op_type == "Softmax":
        return True
    return node.op_type in ("MatMul", "FusedMatMul") and any(
        len(dims) == 4 for shape in node.output_shapes for dims in shape.values())


def unfused_attention(observed: Observed) -> Finding | None:
    """Attention blocks run op by op (MatMul, Softmax, MatMul per block) where ONNX Runtime
    has fused attention kernels, and the heads to fuse them with are readable."""
    from graphfix.passes.fuse_transformer.heads import read_heads

    if any(n.op_type in _FUSED_ATTENTION for n in observed.profile.nodes):
        return None
    heads = read_heads(observed.model)
    if isinstance(heads, str):
        return None
    count, share = _share(observed.profile, _attention_op)
    if count == 0:
        return None
    target = " --provider cuda" if observed.settings.provider == "cuda" else ""
    return Finding(
        "unfused-attention",
        f"{heads.describe()} ran op by op: {count} MatMul and Softmax node(s) of the heads, "
        f"{share:.1%} of the run, where ONNX Runtime has fused attention kernels",
        {"blocks": heads.blocks, "num_heads": heads.num_heads, "head_size": heads.head_size,
         "attention_nodes": count, "attention_share": round(share, 4)},
        _optimize(observed, options=f" --fuse transformer{target}")
        + " (the heads are read from the graph; the result is tied to ONNX Runtime, checked "
        "by parity and judged by the speed gate)",
        trial=Trial(passes=("fuse-transformer",), required=True),
    )


def optimization_level(observed: Observed) -> Finding | None:
    """Graph optimizations below ALL (not where ONNX Runtime does not open the model at
    ALL: the profile's warning says that first)."""
    level = observed.settings.optimization
    if level == "all" or observed.closed_levels:
        return None
    return Finding(
        "optimization-level",
        f"the session's graph optimization level is {level}, below all: ONNX Runtime's "
        "fusions and layout optimizations are off",
        {"level": level, "nodes_executed": len(observed.profile.nodes)},
        "options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL "
        "(or run `graphfix optimize --ort-level all` once and load the result with it off)",
        trial=Trial(settings=(("optimization", "all"),)),
    )


def provider_missing(observed: Observed) -> Finding | None:
    """A GPU build of ONNX Runtime whose CUDA provider does not load on a machine with a
    driver: the run fell back to the CPU."""
    status = observed.environment.cuda
    if (observed.requested_provider != "auto" or observed.settings.provider != "cpu"
            or status is None or not status.available or status.loadable
            or not observed.environment.driver):
        return None
    missing = ", ".join(status.missing_libraries) or "see `graphfix doctor --provider cuda`"
    return Finding(
        "provider-missing",
        f"the CUDA provider does not load ({status.error}); the model ran on the CPU",
        {"provider": status.name, "error": status.error,
         "missing_libraries": list(status.missing_libraries)},
        f"{CUDA_FIX}; missing: {missing}",
    )


KINDS: dict[str, Kind] = {
    "initializer-inputs": initializer_inputs,
    "nhwc-transposes": nhwc_transposes,
    "cpu-fallback": cpu_fallback,
    "float64": float64_compute,
    "float16-islands": float16_islands,
    "batch-one": batch_one,
    "latency-variance": latency_variance,
    "threads": threads,
    "unfused-attention": unfused_attention,
    "optimization-level": optimization_level,
    "provider-missing": provider_missing,
}
"""Every kind of finding, by name; :func:`find` asks each in turn."""


def find(observed: Observed, kinds: Mapping[str, Kind] = KINDS) -> list[Finding]:
    """The findings this run supports, in table order (see :func:`rank`)."""
    return [found for kind in kinds.values() if (found := kind(observed)) is not None]


def rank(findings: list[Finding]) -> list[Finding]:
    """Measured gains first (significant ones by their speedup), then by the share of the run
    the evidence names, then the rest, and last a finding whose fix measured slower here;
    required trials that did not pay are dropped."""
    kept = [f for f in findings if not (f.trial and f.trial.required and
                                        (f.measured is None or f.measured.verdict != FASTER))]

    def key(found: Finding) -> tuple[int, float]:
        if found.measured is not None and found.measured.verdict == FASTER:
            return (0, -found.measured.speedup)
        if found.measured is not None and found.measured.verdict == SLOWER:
            return (3, 0.0)  # its fix measured slower here: last
        shares = [v for k, v in found.evidence.items()
                  if k.endswith("share") and isinstance(v, (int, float))]
        if shares:
            return (1, -float(np.max(shares)))
        return (2, 0.0)

    return sorted(kept, key=key)


def tail_text(accounting: Mapping[str, Any]) -> str:
    """The p99 as a headline gives it: from fewer than :data:`TAIL_RUNS` calls it is about
    the slowest call, and said so."""
    calls = accounting.get("calls") or 0
    if calls >= TAIL_RUNS:
        return f"p99 {accounting['p99_ms']:.3f} ms"
    return (f"slowest {accounting['p99_ms']:.3f} ms of {calls} call(s) (a p99 needs "
            f"{TAIL_RUNS} or more)")
