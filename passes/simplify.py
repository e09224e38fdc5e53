"""simplify: onnxsim's shape inference, constant folding and dead-code elimination, bounded.

    y = Add(Constant(a), Constant(b)) * x   =>   y = Mul(c, x), c = a + b   (onnxsim)

Rules:
1. onnxsim runs with its own check off (``check_n=0``); graphfix validates separately.
2. Crash isolation: onnxsim runs in a worker interpreter (:mod:`._onnxsim_worker`), the model
   crossing as files. An exception, abort or segfault there skips the pass with the reason;
   the run goes on. Entered as a context manager (a pipeline does), the pass starts its worker
   at once, so that it imports while the passes before it run, and keeps it for every call
   until it is left; used on its own, a call starts and stops a worker of its own. A caller
   that simplifies many models can own one worker and give it to the pass (``worker=``), or to
   the simplify pass of every run in a block (``with shared_worker(worker):``, which keeps the
   run's other options: :func:`shared_worker`): it then lives as long as the caller keeps it
   open, and one that was stopped after a large model (to give its memory back) starts again
   at once, importing while the caller goes on. How the worker starts and when it gives its
   memory back are its own options (:class:`OnnxsimWorker`: ``command``, ``stop_above``).
3. Growth policy (:func:`graphfix.options.growth_limit`): folding can replicate data (Tile,
   Expand, broadcasts, Range tables, ConstantOfShape). The output's tensors (initializers and
   Constant values) may hold at most ``max(max_growth * original, original + 64 KiB)`` bytes
   (the default ``max_growth``, 1, folds as 1.5 here); in a run held to its input's size
   (the pipeline's second run, where its first output was larger than its input:
   :func:`graphfix.registry.room`), ``original`` + the bytes the passes before saved, or
   + 1 KiB.
   When onnxsim's output holds more, onnxsim runs again folding no tensor over 64, 16, 4 and
   1 KiB (``FOLD_THRESHOLDS``), and without constant folding, stopping at the first taken:
   the largest threshold that fits, if it is *stable* (the output, taken as a model of its
   own, would still refuse the larger folds: its own budget is larger, since it grew), so that
   a second run on the pass's output changes nothing. The refused folds are reported with the
   bytes each would have added (``refused_fold_bytes``, warnings; told apart by name, type and
   shape, so that a rejected output's gigabytes are never read). ``max_growth=None`` turns the
   policy off. What crosses to onnxsim never reaches 2 GB, the weights kept here (rule 10)
   aside.
4. Dynamic dimensions stay dynamic. ``input_shapes={"x": [1, 3, 224, 224]}`` fixes them
   (:func:`graphfix.graph.fix_input_shapes`, as a run fixes them); every dimension that became static is listed in the
   warnings and counted in ``dims_fixed``.
5. ``modified`` compares nodes and initializers canonically (onnxsim renames and reorders); when
   nothing changed the input model is returned untouched. Graph output names are kept, or the
   pass skips; so are the names of the signature's symbolic dimensions (onnxsim can rename
   ``N`` to ``unk__0``), and an unnamed one stays unnamed (onnxsim names it ``unk__0``).
6. A model whose tensors, less the weights that stay here (rule 10), hold 2 GB or more is
   skipped (onnxsim holds what crosses as one message). Weights that stay in their files are
   copied file to file into the worker's data file; an external tensor graphfix never checked
   makes the pass skip.
7. Never more nodes, never a runtime's own ops: onnxsim's
   ``fuse_matmul_add_bias_into_gemm_batched`` (which turns every batched ``MatMul + Add`` into
   ``Reshape -> Gemm -> Reshape`` with a shape computation) and its fusions into ONNX Runtime's
   contrib ops (``fuse_attention``, ``fuse_gqa``: ``com.microsoft`` Attention and
   GroupQueryAttention) are skipped, and so are the two whose rewrite computes something else
   on inputs past parity's (``eliminate_nop_monotone_argmax``: ArgMax(Exp(x)) -> ArgMax(x),
   wrong where Exp overflows to a tie; ``fuse_consecutive_log_softmax``: Log(Softmax(x)) ->
   LogSoftmax(x), finite where the original's softmax underflows to a -inf)
   and, on a model where a Pad feeds a MaxPool, ``fuse_pad_into_pool`` (ONNX Runtime's MaxPool
   starts a padded window from -3.4e38, so a window of only -inf, a masked feature map, gives
   -3.4e38 where the padded input gives -inf)
   (``SKIPPED_OPTIMIZERS``, the default of
   ``skipped_optimizers``: a caller may leave out more of onnxsim's optimizers by their names,
   or fewer; onnxsim ignores a name it does not know). Whatever is skipped, an output with
   more nodes than the input, or with ops of a domain outside the standard ones that the input
   did not use, is not taken.
8. onnxsim writes some folds as ``Constant`` nodes; they become initializers (from IR 4, where
   an initializer need not be an input), as ONNX Runtime makes them at load: one node each.
9. Memory: when the system has less memory available than about five times the model (the
   worker's peak), the pass skips with the figures rather than let the system kill a process.
   What is available is Linux's ``MemAvailable``, read at each call, unless ``memory_limit``
   gives it in bytes (where that figure is not this process's: a container's memory limit
   does not show in it).
10. Weights onnxsim can neither fold nor rewrite stay in this process. A main-graph
    initializer of 64 KiB or more (``STAND_IN_MIN_BYTES``) read only as the weight of a
    product or a lookup whose other operand is computed from the graph's inputs (MatMul and
    Gemm of a tensor no other product reads, Conv and ConvTranspose not followed by
    BatchNormalization or by a Mul, Add, Sub or Div by a constant, Gather's table, RNN weights)
    crosses as a typed graph input of its
    name, type and shape, and the pass puts the tensor back where it is still read. Such a
    reader never becomes a constant and none of onnxsim's fusions reads such a weight, so the
    output is the same (pipeline output identical on every corpus model); a weight that another
    could equal crosses as it is (onnxsim merges equal initializers). On a transformer this is
    most of the model's bytes: they are never written, parsed or read back.
    A weight that crossed and came back unchanged, and that stays in the model's data file,
    points at that file again (the copy read back from onnxsim's files is dropped).
    :func:`stand_in_names` lists the weights that stay. ``keep_weights_here=False`` sends every
    weight to onnxsim, as onnxsim alone sees the model: the output is meant to be the same,
    and ``tools/simplify_stand_ins.py`` compares the two on folders of models.
11. A BatchNormalization after a Conv is folded into the Conv's weights here (:mod:`._batchnorm`,
    the conditions of onnxsim's own fusion, float64 arithmetic rounded once), before onnxsim
    runs: the fused weights then stay here by rule 10 instead of crossing to be fused there.
    ``fold_batch_norms_here=False`` leaves the fusion to onnxsim (in float32, as onnxsim alone
    rounds it; the weights it fuses then cross).
12. What onnxsim is shown is what the graph proves: the shapes a model only declares
    (``value_info``, in every graph), which exporters leave stale, do not cross (onnxsim folds
    ``Shape`` from them). And two float constants equal as numbers but not in bytes (the same
    but for the sign of a zero: ``x / 0.0`` is +inf, ``x / -0.0`` is -inf) make onnxsim run
    without its merging of equal constants (``eliminate_duplicate_initializer``,
    ``eliminate_common_subexpression``), which would make them one; an ``Add`` of 0.0 (or a
    ``Sub`` of -0.0), which turns -0.0 into 0.0, makes it run without
    ``eliminate_nop_with_unit``, which would drop it (:mod:`._zeros`). A random op (a Dropout
    in training mode, RandomNormal, ...) makes it run without
    ``eliminate_common_subexpression``: two draws with the same inputs are not one value.
13. Parts that can be left out (:meth:`Simplify.fallbacks`): onnxsim's graph optimizers
    (``optimizers=False``: shape inference, constant folding and dead-code elimination only)
    and its constant folding (``constant_folding=False``). When the pass's output breaks parity
    (onnxsim refolds ``((x * 2) * pi) * 300`` into ``x * 1884.9557``, which rounds differently,
    and a ``Sin`` of a phase near 4e4 turns one ulp into 0.12), the pipeline tries each before
    it leaves the whole pass out.
14. An initializer listed as a graph input (from IR 4) is a default value the caller may
    override at run time, as ONNX Runtime allows: it crosses as a typed input without its
    value (onnxsim would fold the value in and drop the input), and the pass puts the value
    back (:func:`graphfix.graph.default_inputs`).
15. An op in ONNX's domain that ONNX does not define at the model's opset, but ONNX Runtime
    runs (ONNX Runtime's transformers optimizer writes a plain ``LayerNormalization`` into
    opset 16 models, an op ONNX defines from 17; ``SimplifiedLayerNormalization``, an RMS norm
    ONNX never defined), crosses in a domain of its own (:data:`RUNTIME_OP_DOMAIN`), as any
    runtime's op does, and comes back in ONNX's: onnxsim refused the whole model for it (``No
    Op registered for LayerNormalization with domain_version of 16``). It is not folded nor
    inferred there; the rest of the model is simplified.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import onnx

from graphfix.errors import PassError, ValidationInputError
from graphfix import graph as graph_layer
from graphfix.graph import (
    STANDARD_DOMAINS,
    all_nodes,
    count_nodes,
    fix_input_shapes,
    graphs,
    is_random,
)
from graphfix.model_io import (
    PROTOBUF_LIMIT,
    has_value,
    iter_tensors,
    load,
    os_failure_in,
    same_tensor,
    temporary_folder,
    tensor_bytes,
    tensor_sample,
    weight_bytes,
    weights_as_inputs,
    write_scratch,
)
from graphfix.options import (
    DEFAULT_MAX_GROWTH,
    GROWTH_ALLOWANCE,
    OptionError,
    RunOptions,
    check_max_growth,
)
from ._batchnorm import fold_batch_norms
from ._compare import grown_ops, same_graph
from ._workers import KeepsWorker, worker_block
from ._onnxsim_worker import (
    KEEP_WORKER_BELOW,
    WORKER_CODE,
    Budget,
    OnnxsimWorker,
    stable_choice,
)
from ._zeros import inexact_zero_nops, signed_zero_twins
from graphfix.registry import Fallback, Pass, PassResult, fold_allowance, register, room

__all__ = [
    "Simplify",
    "simplify",
    "shared_worker",
    "stand_in_names",
    "SKIPPED_OPTIMIZERS",
    "FOLD_THRESHOLDS",
    "STAND_IN_MIN_BYTES",
    "OnnxsimWorker",
    "KEEP_WORKER_BELOW",
    "WORKER_CODE",
]

logger = logging.getLogger(__name__)

_FOLD_CAP = PROTOBUF_LIMIT // 2  # onnxsim's per-tensor folding threshold, never near 2 GB
# Rule 7: onnxsim optimizers that add nodes.
_BATCHED_GEMM = "fuse_matmul_add_bias_into_gemm_batched"
# Rule 7: onnxsim optimizers whose rewrite computes something else on inputs parity's do not
# reach: ArgMax(Exp(x)) -> ArgMax(x) (Exp overflows to ties past 88.7, and the first
# infinity wins; Log and Sqrt of negatives give NaN), Log(Softmax(x)) -> LogSoftmax(x) (a
# -inf where the softmax underflows becomes finite).
_UNFAITHFUL = ("eliminate_nop_monotone_argmax", "fuse_consecutive_log_softmax")
# Rule 7: Pad -> MaxPool as MaxPool's pads, which ONNX Runtime's kernel starts from -FLT_MAX: a
# window of only -inf (a masked feature map) gives -3.4e38 where the padded input gives -inf.
_PAD_INTO_POOL = "fuse_pad_into_pool"
SKIPPED_OPTIMIZERS: tuple[str, ...] = (_BATCHED_GEMM, "fuse_attention", "fuse_gqa", *_UNFAITHFUL)
# Rule 12: onnxsim's optimizers that merge constants equal as numbers (0.0 == -0.0), and the
# one that drops x + 0 (wrong for x = -0.0: -0.0 + 0.0 is 0.0).
_MERGING_OPTIMIZERS = ("eliminate_duplicate_initializer", "eliminate_common_subexpression")
_UNIT_OPTIMIZER = "eliminate_nop_with_unit"
_CSE_OPTIMIZER = "eliminate_common_subexpression"
# Rule 3: the per-tensor folding thresholds tried when folding everything grows too much.
FOLD_THRESHOLDS = (GROWTH_ALLOWANCE, GROWTH_ALLOWANCE // 4, GROWTH_ALLOWANCE // 16, 1024)
# Rule 9: the onnxsim worker's peak memory, in multiples of the serialized model.
_WORKER_MEMORY_FACTOR = 5
# Rule 10: weights at least this large cross as typed inputs where onnxsim cannot use their values.
STAND_IN_MIN_BYTES = 64 * 2**10
# Rule 10: a Conv's output read by one of these with a constant, onnxsim may fold into its weights.
_FOLDED_INTO_CONV = frozenset({"Mul", "Add", "Sub", "Div"})
# Rule 10: the input positions at which an op reads a weight onnxsim neither folds nor rewrites
# once another input is computed from the graph's inputs.
_OPAQUE_WEIGHTS: dict[str, tuple[int, ...]] = {
    "MatMul": (0, 1), "Gemm": (0, 1), "Conv": (1,), "ConvTranspose": (1,), "Gather": (0,),
    "LSTM": (1, 2), "GRU": (1, 2), "RNN": (1, 2),
}
# Rule 10: bytes sampled from each large weight to tell equal weights from different ones.
_FINGERPRINT_SAMPLES = 64
# Ops whose output onnxsim computes from shapes alone, even of a tensor the inputs compute.
_SHAPE_OPS = frozenset({"Shape", "Size", "EyeLike"})
# Rule 2: the worker that the simplify pass of every run in a shared_worker() block uses.
_RUNS_WORKER: ContextVar[OnnxsimWorker | None] = ContextVar("graphfix_onnxsim_worker",
                                                             default=None)


@contextlib.contextmanager
def shared_worker(worker: OnnxsimWorker) -> Iterator[OnnxsimWorker]:
    """Within the block, the simplify pass of every run (:func:`graphfix.optimize`,
    :func:`graphfix.optimize_file` and the commands that call them, in this thread) uses
    ``worker``, which its owner opened and closes (rule 2): onnxsim is imported once for many
    models, and each run still configures its pass from its own options (``max_growth``),
    which ``pass_options={"simplify": {"worker": worker}}`` would replace. A pass that the
    caller builds (``Simplify()``, ``passes=[...]``, ``pass_options``) keeps the worker it is
    given, or its own. Blocks nest; the innermost wins.

        with OnnxsimWorker() as worker, shared_worker(worker):
            for path in paths:
                graphfix.optimize_file(path, out_path(path))
    """
    with worker_block(_RUNS_WORKER, worker, OnnxsimWorker, "simplify"):
        yield worker


def _available_memory() -> int | None:
    """Bytes of memory available to a new process (Linux's MemAvailable), or None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _keep_dim_names(graph: onnx.GraphProto, original: onnx.GraphProto) -> None:
    """Give every graph input and output of ``graph`` the symbolic dimension names it had in
    ``original`` where it is still symbolic (rule 5); static dimensions are left as they are."""
    declared = {v.name: v for v in list(original.input) + list(original.output)}
    for value in list(graph.input) + list(graph.output):
        before = declared.get(value.name)
        if before is None or not value.type.HasField("tensor_type") or not (
            before.type.HasField("tensor_type")
        ):
            continue
        old_dims = before.type.tensor_type.shape.dim
        new_dims = value.type.tensor_type.shape.dim
        if len(old_dims) != len(new_dims):
            continue
        for old, new in zip(old_dims, new_dims):
            if old.HasField("dim_param") and not new.HasField("dim_value"):
                new.dim_param = old.dim_param
            elif not old.HasField("dim_value") and not old.HasField("dim_param") and \
                    new.HasField("dim_param"):
                new.ClearField("dim_param")  # an unnamed dimension stays unnamed (unk__0)


def _static_dims(graph: onnx.GraphProto) -> dict[str, list[str]]:
    out = {}
    for vi in list(graph.input) + list(graph.output):
        out[vi.name] = [
            str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
            for d in vi.type.tensor_type.shape.dim
        ]
    return out


def _new_initializers(model: onnx.ModelProto, reference: onnx.ModelProto) -> dict[str, int]:
    """Initializers of ``model`` that ``reference`` holds under no name of that type and shape
    (a fold is named after the node output it replaces): name -> bytes, from type and shape.
    No weight is read or hashed: a rejected output can hold gigabytes."""
    def kind(name: str, tensor: onnx.TensorProto) -> tuple[str, int, tuple[int, ...]]:
        return name, tensor.data_type, tuple(tensor.dims)

    known = {kind(t.name, t) for t in reference.graph.initializer}
    known |= {kind(n.output[0], a.t) for n in all_nodes(reference.graph)
              if n.op_type == "Constant" and n.output for a in n.attribute if a.name == "value"}
    return {t.name: tensor_bytes(t) for t in model.graph.initializer
            if kind(t.name, t) not in known}


@register("simplify")
class Simplify(KeepsWorker, Pass):
    """Fold constants, infer shapes, drop dead code with onnxsim, refusing folds that bloat."""

    def __init__(
        self,
        *,
        max_growth: float | None = DEFAULT_MAX_GROWTH,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        worker: OnnxsimWorker | None = None,
        optimizers: bool = True,
        constant_folding: bool = True,
        skipped_optimizers: Sequence[str] = SKIPPED_OPTIMIZERS,
        memory_limit: int | None = None,
        keep_weights_here: bool = True,
        fold_batch_norms_here: bool = True,
    ) -> None:
        """``max_growth``: the growth policy (rule 3); ``input_shapes``: dimensions to fix
        (rule 4); ``worker``: the caller's onnxsim worker (rule 2); ``optimizers`` and
        ``constant_folding``: onnxsim's parts (rule 13); ``skipped_optimizers``: onnxsim's
        optimizers left out, by name (rule 7); ``memory_limit``: the bytes of memory onnxsim
        may use, instead of what the system says is available (rule 9);
        ``keep_weights_here`` and ``fold_batch_norms_here``: rules 10 and 11."""
        for name, value in (("optimizers", optimizers), ("constant_folding", constant_folding),
                            ("keep_weights_here", keep_weights_here),
                            ("fold_batch_norms_here", fold_batch_norms_here)):
            if not isinstance(value, bool):
                raise PassError(f"simplify: {name} must be a bool, got {value!r}")
        self.optimizers, self.constant_folding = optimizers, constant_folding
        try:
            self.max_growth = check_max_growth(max_growth)
            shapes = RunOptions(input_shapes=input_shapes).input_shapes
        except OptionError as error:
            raise PassError(f"simplify: {error}") from None
        if worker is not None and not isinstance(worker, OnnxsimWorker):
            raise PassError(f"simplify: worker must be an OnnxsimWorker, got {worker!r}")
        self.input_shapes = {k: list(v) for k, v in shapes.items()} if shapes else None
        if isinstance(skipped_optimizers, (str, bytes)) or not isinstance(
                skipped_optimizers, Sequence) or not all(
                isinstance(name, str) and name for name in skipped_optimizers):
            raise PassError(f"simplify: skipped_optimizers names onnxsim's optimizers, got "
                            f"{skipped_optimizers!r}")
        self.skipped_optimizers = tuple(dict.fromkeys(skipped_optimizers))
        if memory_limit is not None and (isinstance(memory_limit, bool) or not isinstance(
                memory_limit, int) or memory_limit <= 0):
            raise PassError(f"simplify: memory_limit must be a number of bytes or None, got "
                            f"{memory_limit!r}")
        self.memory_limit = memory_limit
        self.keep_weights_here = keep_weights_here
        self.fold_batch_norms_here = fold_batch_norms_here
        self._shared = worker  # the caller's, kept across passes and runs
        self._zero_signs = (False, False)  # rule 12, for the model being simplified
        self._random = False  # rule 12: random ops are never merged
        self._padded_max_pools = False  # rule 7: a Pad read by a MaxPool

    @classmethod
    def configured(cls, run: RunOptions) -> Simplify:
        # The run fixes input shapes itself, before any pass (graphfix.pipeline); its worker is
        # the one shared with the runs of a shared_worker() block, if any (rule 2).
        return cls(max_growth=run.max_growth, worker=_RUNS_WORKER.get())

    def fallbacks(self) -> list[Fallback]:
        # Rule 13: onnxsim's graph optimizers (its fusions and algebraic rewrites: a chain of
        # Muls by constants refolded into one product, which rounds differently) and its
        # constant folding, each left out on its own.
        found = []
        if self.optimizers:
            found.append(Fallback("onnxsim's graph optimizers", self._with_parts(
                optimizers=False, constant_folding=self.constant_folding)))
        if self.constant_folding:
            found.append(Fallback("onnxsim's constant folding", self._with_parts(
                optimizers=self.optimizers, constant_folding=False)))
        return found

    def _with_parts(self, *, optimizers: bool, constant_folding: bool) -> Simplify:
        """This pass with onnxsim's parts (rule 13) as given, its worker and its other options
        kept."""
        return Simplify(max_growth=self.max_growth, input_shapes=self.input_shapes,
                        worker=self._worker, optimizers=optimizers,
                        constant_folding=constant_folding,
                        skipped_optimizers=self.skipped_optimizers,
                        memory_limit=self.memory_limit, keep_weights_here=self.keep_weights_here,
                        fold_batch_norms_here=self.fold_batch_norms_here)

    def _new_worker(self) -> OnnxsimWorker:
        # Rule 2: entered, the pass starts it at once; it imports while the passes before run.
        return OnnxsimWorker()

    def call(self, model: onnx.ModelProto) -> PassResult:
        if not all(has_value(t) for t in iter_tensors(model.graph)):
            reason = "external data not loaded; onnxsim needs the weights"
            return PassResult(model, False, skipped=reason)
        # Rule 11, then rule 10.
        prepared = _with_batch_norms_folded(model) if self.fold_batch_norms_here else model
        stand_ins = (stand_in_names(prepared.graph, skipped_optimizers=self.skipped_optimizers)
                     if self.keep_weights_here else [])
        stand_in_bytes = _bytes_of(prepared.graph, stand_ins)
        # Measured from tensor shapes first: ByteSize() serializes the model and fails past 2 GB.
        if weight_bytes(prepared) - stand_in_bytes >= PROTOBUF_LIMIT:
            return PassResult(model, False, skipped="model over 2 GB: onnxsim cannot serialize it")
        with temporary_folder("simplify") as folder:
            return self._simplify(model, prepared, folder, stand_ins, stand_in_bytes)

    def _simplify(self, model: onnx.ModelProto, prepared: onnx.ModelProto, folder: Path,
                  stand_ins: list[str], stand_in_bytes: int) -> PassResult:
        """onnxsim on ``prepared`` (``model`` with rule 11 applied), the ``stand_ins`` of rule 10
        (``stand_in_bytes`` in all) crossing as typed inputs."""
        # Rule 14: an initializer listed as an input is a default the caller may override;
        # onnxsim would fold its value in and drop the input. It crosses without its value.
        overridable = graph_layer.default_inputs(prepared)
        crossing = (weights_as_inputs(prepared, [*stand_ins, *overridable])
                    if stand_ins or overridable or self.input_shapes else prepared)
        if self.input_shapes:  # rule 4: the engine's one way to fix an input's sizes
            try:
                fix_input_shapes(crossing, self.input_shapes)
            except ValidationInputError as error:
                raise PassError(f"simplify: {error}") from None
        # What the model only declares (value_info) does not cross: onnxsim would fold Shape
        # from a stale declaration. graphfix builds on proven shapes only.
        with _runtime_ops_apart(crossing) as apart:  # rule 15
            size = write_scratch(crossing, folder / "in.onnx", declared_shapes=False)
        # Rule 12: onnxsim merges constants that compare equal as numbers (0.0 and -0.0 are
        # two tensors: x / 0.0 is +inf, x / -0.0 is -inf) and drops x + 0.0 (which turns -0.0
        # into 0.0): the optimizers that would do it here do not run.
        self._zero_signs = (signed_zero_twins(crossing), inexact_zero_nops(crossing))
        # Two random ops with the same inputs are two draws: onnxsim's common-subexpression
        # elimination would make them one.
        self._random = any(is_random(node) for node in all_nodes(crossing.graph))
        self._padded_max_pools = _pads_into_max_pool(crossing)
        stats: dict[str, int] = {
            "nodes_before": count_nodes(model),
            "initializers_before": len(model.graph.initializer),
            "tensor_bytes_before": weight_bytes(model),
            "stand_ins": len(stand_ins),
        }
        if apart:
            stats["runtime_ops_apart"] = sum(apart.values())
        stats["bytes_before"] = size + stand_in_bytes
        warnings: list[str] = []
        try:
            result, result_size = self._run(model, folder, size, stats, warnings, stand_in_bytes)
            _runtime_ops_back(result)
            result_size += _put_back(result, prepared, stand_ins, overridable)
            # Rule 7: never more nodes.
            nodes_before, nodes_out = count_nodes(model), count_nodes(result)
            if nodes_out > nodes_before:
                stats["refused_nodes_after"] = nodes_out
                raise _Skip(f"onnxsim's output has more nodes ({nodes_before} -> {nodes_out}: "
                            f"{grown_ops(result, model)}); model kept")
            foreign = _foreign_ops(result, model)
            if foreign:
                raise _Skip(f"onnxsim wrote ops outside the standard domains "
                            f"({', '.join(foreign)}); model kept")
            # Rule 5: names of graph outputs.
            if [o.name for o in result.graph.output] != [o.name for o in model.graph.output]:
                raise _Skip("onnxsim renamed graph outputs; model kept")
        except _Skip as skip:
            logger.warning("simplify skipped: %s", skip)
            return PassResult(model, False, stats=stats, warnings=[*warnings, str(skip)],
                              skipped=str(skip))
        _keep_dim_names(result.graph, model.graph)
        if result.ir_version >= 4:
            _constants_to_initializers(result.graph)
        stats["dims_fixed"] = _dims_fixed(result.graph, model.graph, warnings)
        if not stats["dims_fixed"] and same_graph(result.graph, model.graph, names=False):
            stats.update(nodes_after=stats["nodes_before"],
                         initializers_after=stats["initializers_before"], bytes_after=size,
                         tensor_bytes_after=stats["tensor_bytes_before"])
            return PassResult(model, False, stats=stats, warnings=warnings)
        # onnxsim stamps its own name and version into the model's metadata; what the model
        # says about itself stays the original's.
        del result.metadata_props[:]
        result.metadata_props.extend(model.metadata_props)
        stats.update(nodes_after=count_nodes(result),
                     initializers_after=len(result.graph.initializer), bytes_after=result_size,
                     tensor_bytes_after=weight_bytes(result))
        return PassResult(result, True, stats=stats, warnings=warnings)

    def _run(self, model: onnx.ModelProto, folder: Path, size: int, stats: dict[str, int],
             warnings: list[str], stand_in_bytes: int) -> tuple[onnx.ModelProto, int]:
        """onnxsim's output within the growth policy (rule 3), and its size in bytes, both
        without the ``stand_in_bytes`` of weights that stayed here (rule 10)."""
        if size >= PROTOBUF_LIMIT:
            raise _Skip("model over 2 GB: onnxsim cannot serialize it")
        needed = _WORKER_MEMORY_FACTOR * size
        available = _available_memory() if self.memory_limit is None else self.memory_limit
        if available is not None and needed > available:
            limit_given = "" if self.memory_limit is None else " (memory_limit)"
            raise _Skip(f"onnxsim would need about {needed / 2**30:.1f} GiB of memory for this "
                        f"model and {available / 2**30:.1f} GiB are available{limit_given}; "
                        f"model kept")
        twins, nops = self._zero_signs
        skipped = [*self.skipped_optimizers, *(_MERGING_OPTIMIZERS if twins else ()),
                   *((_UNIT_OPTIMIZER,) if nops else ()),
                   *((_CSE_OPTIMIZER,) if self._random and not twins else ()),
                   *((_PAD_INTO_POOL,) if self._padded_max_pools else ())]
        base: dict[str, Any] = {"tensor_size_threshold": f"{_FOLD_CAP}B",
                                "skipped_optimizers": skipped}
        if not self.optimizers:  # rule 13
            base["perform_optimization"] = False
        if not self.constant_folding:
            base["skip_constant_folding"] = True
        tensors = stats["tensor_bytes_before"]
        budget = Budget.of(tensors, stand_in_bytes, self.max_growth, room(model),
                           fold_allowance())
        limit = budget.limit
        # Rule 3: the bounded re-runs are one job of the worker, tried only when the first
        # output is too big, and only until one is chosen.
        attempts = [base] if not self.constant_folding else [
            base, *({**base, "tensor_size_threshold": f"{threshold}B"}
                    for threshold in FOLD_THRESHOLDS),
            {**base, "skip_constant_folding": True}]
        # The weights that stayed here (rule 10) come back as they are: the worker counts them.
        if self._shared is not None:
            outputs = self._shared.simplify(folder, attempts, budget)
            # Rule 2: one stopped to give its memory back starts again, ready for the next
            # model (one its owner closed stays closed: nothing would stop it).
            self._shared.resume()
        elif self._own is not None:
            outputs = self._own.simplify(folder, attempts, budget)
        else:  # used on its own: a worker for this call
            with OnnxsimWorker() as worker:
                outputs = worker.simplify(folder, attempts, budget)
        if isinstance(outputs, str):
            # The worker ran out of room or past a limit in the temporary folder: that is the
            # system's doing, not the model's, and skipping the pass would hide it.
            resource = os_failure_in(outputs, folder / "out0" / "model.onnx", "temporary files")
            if resource is not None:
                raise resource
            raise _Skip(outputs)
        first = outputs[0]
        if first.fits(limit):
            return load(first.path), first.file_bytes
        chosen = stable_choice(outputs, budget, len(attempts))
        if chosen is None:
            raise _Skip(f"every simplification grows the model's tensors past {limit} bytes "
                        f"(max_growth={self.max_growth})")
        result = load(chosen.path)
        kept = _new_initializers(result, model)
        # The rejected output's structure only: its weights stay in its files.
        refused = {k: v for k, v in _new_initializers(
            load(first.path, load_external_data=False), model).items() if k not in kept}
        stats["refused_folds"] = len(refused)
        stats["refused_fold_bytes"] = sum(refused.values())
        for name, nbytes in sorted(refused.items(), key=lambda kv: -kv[1])[:10]:
            warnings.append(f"refused fold {name!r}: would add {nbytes} bytes "
                            f"(max_growth={self.max_growth})")
        return result, chosen.file_bytes


def _with_batch_norms_folded(model: onnx.ModelProto) -> onnx.ModelProto:
    """Rule 11: a copy of ``model`` with its Conv -> BatchNormalization pairs folded, or
    ``model`` itself when it has none."""
    convs = {n.output[0] for n in model.graph.node if n.op_type == "Conv" and n.output}
    if not any(n.op_type == "BatchNormalization" and n.input and n.input[0] in convs
               for n in model.graph.node):
        return model
    prepared = onnx.ModelProto()
    prepared.CopyFrom(model)
    return prepared if fold_batch_norms(prepared) else model


# Rule 15: the domain in which ops of ONNX's domain that ONNX does not define at the model's
# opset cross to onnxsim; the op's own domain ("" or "ai.onnx") follows, after a colon.
RUNTIME_OP_DOMAIN = "graphfix.runtime_op"


def _undefined(node: onnx.NodeProto, opset: int) -> bool:
    """Whether ``node`` is in ONNX's domain but ONNX defines no such op at ``opset``."""
    if node.domain not in STANDARD_DOMAINS:
        return False
    try:
        onnx.defs.get_schema(node.op_type, opset, "")
    except onnx.defs.SchemaError:
        return True
    return False


@contextlib.contextmanager
def _runtime_ops_apart(model: onnx.ModelProto) -> Iterator[Counter[str]]:
    """Rule 15: inside the block, the nodes of ``model`` in ONNX's domain that ONNX does not
    define at its opset are in :data:`RUNTIME_OP_DOMAIN` (yields how many of each op); after
    it, ``model`` is as it was."""
    opset = next((o.version for o in model.opset_import if o.domain in STANDARD_DOMAINS), 0)
    moved = [node for node in all_nodes(model.graph) if opset and _undefined(node, opset)]
    if not moved:
        yield Counter()
        return
    domains = {node.domain for node in moved}
    for node in moved:
        node.domain = f"{RUNTIME_OP_DOMAIN}:{node.domain}"
    added = [model.opset_import.add(domain=f"{RUNTIME_OP_DOMAIN}:{d}", version=1)
             for d in sorted(domains)]
    try:
        yield Counter(node.op_type for node in moved)
    finally:
        for node in moved:
            node.domain = node.domain.split(":", 1)[1]
        for entry in added:
            model.opset_import.remove(entry)


def _runtime_ops_back(model: onnx.ModelProto) -> None:
    """Rule 15: the ops that crossed in :data:`RUNTIME_OP_DOMAIN` back in ONNX's domain."""
    prefix = RUNTIME_OP_DOMAIN + ":"
    for node in all_nodes(model.graph):
        if node.domain.startswith(prefix):
            node.domain = node.domain[len(prefix):]
    for entry in [o for o in model.opset_import if o.domain.startswith(prefix)]:
        model.opset_import.remove(entry)


def stand_in_names(graph: onnx.GraphProto, *,
                   skipped_optimizers: Sequence[str] = SKIPPED_OPTIMIZERS) -> list[str]:
    """Rule 10: the main-graph initializers of ``graph`` that stay in this process and cross to
    onnxsim as typed inputs, when onnxsim runs without ``skipped_optimizers`` (the pass's
    option of that name): the weights whose values onnxsim would never use."""
    fixed = {i.name for i in graph.input} | {o.name for o in graph.output}
    for node in graph.node:
        for sub in graph_layer.subgraphs(node):
            fixed |= graph_layer.outer_refs(sub)
    sizable = [t for t in graph.initializer if tensor_bytes(t) >= STAND_IN_MIN_BYTES]
    large = [t.name for t in sizable if t.name not in fixed]
    if not large:
        return []
    computed = _computed(graph)
    # Tensors onnxsim may fold into the weights of the Conv that writes them: a
    # BatchNormalization's input, an operand of a Mul or Add by a constant.
    normalized = {n.input[0] for n in graph.node if n.op_type == "BatchNormalization" and n.input}
    normalized |= {name for n in graph.node if n.op_type in _FOLDED_INTO_CONV
                   and n.domain in STANDARD_DOMAINS and len(n.input) == 2
                   and any(other not in computed for other in n.input)
                   for name in n.input if name in computed}
    # onnxsim's fuse_qkv concatenates the weights of products of one tensor.
    products = Counter(name for n in graph.node if n.op_type in ("MatMul", "Gemm")
                       for name in set(n.input[:2]))
    shared = {name for name, count in products.items() if count > 1}
    batched_gemm = _BATCHED_GEMM not in skipped_optimizers
    opaque = dict.fromkeys(large, True)
    for node in graph.node:
        for position, name in enumerate(node.input):
            if name in opaque and not _opaque_read(node, position, computed, normalized, shared,
                                                   batched_gemm=batched_gemm):
                opaque[name] = False
    # A weight that another could equal crosses as it is: onnxsim merges equal initializers.
    # Type and shape first; the bytes are sampled only where those are shared.
    kinds = Counter((t.data_type, tuple(t.dims)) for t in sizable)
    prints = {t.name: _fingerprint(t) for t in sizable if kinds[(t.data_type, tuple(t.dims))] > 1}
    twins = Counter(prints.values())
    return [name for name in large if opaque[name] and (
        name not in prints or twins[prints[name]] == 1)]


def _fingerprint(tensor: onnx.TensorProto) -> tuple[object, ...]:
    """Type, shape and a sample of the bytes: tensors with different fingerprints differ."""
    return (tensor.data_type, tuple(tensor.dims), tensor_sample(tensor, _FINGERPRINT_SAMPLES))


def _computed(graph: onnx.GraphProto) -> set[str]:
    """Names whose values the graph's inputs provably flow into (onnxsim cannot fold them): an
    initializer listed as an input is not one, nor what an op computes from shapes alone."""
    initializers = {t.name for t in graph.initializer}
    computed = {i.name for i in graph.input if i.name not in initializers}
    for node in graph.node:
        if node.op_type in _SHAPE_OPS and node.domain in STANDARD_DOMAINS:
            continue
        if any(name in computed for name in graph_layer.reads(node)):
            computed.update(name for name in node.output if name)
    return computed


def _opaque_read(node: onnx.NodeProto, position: int, computed: set[str],
                 normalized: set[str], shared: set[str], *, batched_gemm: bool) -> bool:
    """Whether ``node`` reads its input ``position`` as a weight whose values onnxsim never uses
    (rule 10): another input is computed, and no fusion rewrites the weight. ``normalized``:
    the tensors a BatchNormalization reads; ``shared``: the tensors several products read;
    ``batched_gemm``: whether onnxsim runs its batched MatMul + Add fusion."""
    if node.domain not in STANDARD_DOMAINS or position not in _OPAQUE_WEIGHTS.get(
            node.op_type, ()):
        return False
    if node.op_type in ("Conv", "ConvTranspose") and node.output and (
            node.output[0] in normalized):
        return False  # onnxsim folds the normalization or the scale into the weights
    if node.op_type in ("MatMul", "Gemm") and any(name in shared for name in node.input[:2]):
        return False  # onnxsim concatenates those products' weights (fuse_qkv)
    if node.op_type == "MatMul" and batched_gemm:
        return False  # that fusion reshapes constant weights only
    return any(name in computed for index, name in enumerate(node.input) if index != position)


def _bytes_of(graph: onnx.GraphProto, names: list[str]) -> int:
    wanted = set(names)
    return sum(tensor_bytes(t) for t in graph.initializer if t.name in wanted)


def _put_back(result: onnx.ModelProto, model: onnx.ModelProto, names: list[str],
              overridable: Sequence[str] = ()) -> int:
    """Rule 10: the stand-in inputs of ``result`` become ``model``'s initializers again where
    they are still read, and weights that crossed and came back unchanged point at ``model``'s
    data files again where they stay there (the copy read back from onnxsim's files is
    dropped; what comes after reads them where they are). Rule 14: the ``overridable`` inputs
    that crossed without their values stay inputs and get them back. Returns the bytes put
    back."""
    hidden, defaults = set(names), set(overridable)
    graph = result.graph
    graph_layer.keep_only(graph.input, lambda value: value.name not in hidden)
    read = {name for node in graph.node for name in graph_layer.reads(node)}
    read |= defaults & {value.name for value in graph.input}
    in_files = {}
    put = 0
    for tensor in model.graph.initializer:
        if tensor.name in hidden or tensor.name in defaults:
            if tensor.name in read:
                graph.initializer.add().CopyFrom(tensor)
                put += tensor_bytes(tensor)
        elif tensor.data_location == onnx.TensorProto.EXTERNAL and has_value(tensor):
            in_files[tensor.name] = tensor
    for tensor in graph.initializer if in_files else ():
        source = in_files.get(tensor.name)
        if source is not None and tensor.data_location != onnx.TensorProto.EXTERNAL and (
                same_tensor(tensor, source)):
            tensor.CopyFrom(source)
    return put


def _constants_to_initializers(graph: onnx.GraphProto) -> None:
    """Rule 8: ``Constant`` nodes holding a tensor become initializers of their graph (bodies
    too); a graph output stays produced by its node."""
    for body in graphs(graph):
        outputs = {o.name for o in body.output}
        kept = []
        for node in body.node:
            value = node.attribute[0] if len(node.attribute) == 1 else None
            if (node.op_type != "Constant" or node.domain not in STANDARD_DOMAINS
                    or value is None or value.name != "value" or node.output[0] in outputs):
                kept.append(node)
                continue
            tensor = body.initializer.add()
            tensor.CopyFrom(value.t)
            tensor.name = node.output[0]
        if len(kept) != len(body.node):
            del body.node[:]
            body.node.extend(kept)


def _foreign_ops(result: onnx.ModelProto, model: onnx.ModelProto) -> list[str]:
    """Rule 7: ops of ``result`` in a non-standard domain that ``model`` does not use."""
    def used(m: onnx.ModelProto) -> set[tuple[str, str]]:
        nodes = [*all_nodes(m.graph), *(n for f in m.functions for n in f.node)]
        return {(n.domain, n.op_type) for n in nodes if n.domain not in STANDARD_DOMAINS}

    local = {(f.domain, f.name) for f in result.functions}
    return sorted(f"{domain}::{op}" for domain, op in used(result) - used(model) - local)


class _Skip(Exception):
    """The pass gives up on this model (the reason)."""


def _dims_fixed(result: onnx.GraphProto, model: onnx.GraphProto, warnings: list[str]) -> int:
    """Rule 4: the signature's dimensions that became static, each with a warning."""
    before_dims, after_dims = _static_dims(model), _static_dims(result)
    fixed = 0
    for name, dims in before_dims.items():
        new = after_dims.get(name, dims)
        axes = [axis for axis, (a, b) in enumerate(zip(dims, new))
                if not a.isdigit() and b.isdigit()]
        if axes:  # one line per tensor, however many of its dimensions
            fixed += len(axes)
            which = (f"dimension {axes[0]}" if len(axes) == 1
                     else f"dimensions {', '.join(map(str, axes))}")
            warnings.append(f"{which} of {name!r} [{', '.join(dims)}] now static: "
                            f"[{', '.join(new)}]")
    return fixed


def simplify(
    model: onnx.ModelProto,
    *,
    max_growth: float | None = DEFAULT_MAX_GROWTH,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    worker: OnnxsimWorker | None = None,
    optimizers: bool = True,
    constant_folding: bool = True,
    skipped_optimizers: Sequence[str] = SKIPPED_OPTIMIZERS,
    memory_limit: int | None = None,
    keep_weights_here: bool = True,
    fold_batch_norms_here: bool = True,
) -> onnx.ModelProto:
    """Function twin of :class:`Simplify`: returns the simplified model."""
    return Simplify(max_growth=max_growth, input_shapes=input_shapes, worker=worker,
                    optimizers=optimizers, constant_folding=constant_folding,
                    skipped_optimizers=skipped_optimizers, memory_limit=memory_limit,
                    keep_weights_here=keep_weights_here,
                    fold_batch_norms_here=fold_batch_norms_here)(model).model


def _pads_into_max_pool(model: onnx.ModelProto) -> bool:
    """Rule 7: whether a Pad of some graph feeds a MaxPool."""
    for graph in graphs(model.graph):
        padded = {node.output[0] for node in graph.node
                  if node.op_type == "Pad" and node.domain in STANDARD_DOMAINS and node.output}
        if any(node.op_type == "MaxPool" and node.domain in STANDARD_DOMAINS and node.input
               and node.input[0] in padded for node in graph.node):
            return True
    return False
