"""Checking a model: onnx.checker without reading the weights, and what graphfix refuses."""

from __future__ import annotations

import collections
import re
from collections.abc import Collection

import onnx

from graphfix.errors import ModelLoadError, first_line
from graphfix.graph import graphs
from graphfix.graph import copy_without
from graphfix.model_io.encoding import skeleton
from graphfix.model_io.runtime import max_ir_version
from graphfix.model_io.sessions import temporary_model_file, ort_session
from graphfix.model_io.tensors import inline_bytes, lazy_source, lazy_tensors, tensor_bytes

__all__ = ["check_model", "checker_problem", "new_checker_problem", "runtime_problem",
           "weights_as_inputs", "correct_output_shapes"]

# Above this many bytes of weights in memory, check_model checks a weightless copy on disk.
_CHECK_INLINE_BYTES = 8 * 2**20

# What onnx.checker raises: its own types, and ValueError from its C++ side for what it cannot
# even name (a tensor of data type 99).
_CHECKER_ERRORS = (onnx.checker.ValidationError,
                   onnx.onnx_cpp2py_export.shape_inference.InferenceError, ValueError, TypeError)


def checker_problem(model: onnx.ModelProto, *, full_check: bool = True) -> str | None:
    """What ``onnx.checker`` finds wrong with ``model`` (one line), or None. The weights are not
    read: a model holding little in memory is checked as it is; any other is written to a
    temporary file where every large tensor is a hole of its size in a sparse data file, and
    checked from there (from a file the checker reads no external data), so nothing large is
    copied, serialized or read."""
    try:
        if not lazy_tensors(model) and inline_bytes(model) < _CHECK_INLINE_BYTES:
            onnx.checker.check_model(model, full_check=full_check)
        else:
            with temporary_model_file(model, lazy="hole") as path:
                onnx.checker.check_model(str(path), full_check=full_check)
    except _CHECKER_ERRORS as err:
        return " ".join(first_line(err, limit=2000).split("==> Context")[0].split())
    return None


def new_checker_problem(model: onnx.ModelProto, original: onnx.ModelProto, *,
                        full_check: bool = True) -> str | None:
    """What ``onnx.checker`` finds wrong with ``model`` that it does not find with
    ``original``, the model it was made from (checked only when ``model`` has a problem).
    A problem the original already had (ONNX Runtime's fused ops in the default domain, which
    onnx does not know) is no fault of what made ``model``, and neither is one the original
    has at another node: a rewrite that gives a tensor another writer (a Cast at a float16
    border writes the graph output a Reshape wrote) moves the checker's complaint about that
    output's declared shape to the new writer."""
    problem = checker_problem(model, full_check=full_check)
    if problem is None:
        return None
    own = checker_problem(original, full_check=full_check)
    if own is not None and _complaints(problem) <= _complaints(own):
        return None
    return problem


# Where onnx's shape inference says a complaint arose: "(op_type:Cast, node name: x): ", or
# "(op_type:Cast): " for a node without a name.
_PLACE = re.compile(r"\(op_type:[^,()]*(?:, node name: .*?)?\):\s*")


def _complaints(problem: str) -> frozenset[str]:
    """The complaints of a checker problem, without the nodes they arose at."""
    return frozenset(part.strip() for part in _PLACE.split(problem) if part.strip())


# Weights at least this large become graph inputs in a weightless load check: shapes, axes,
# scales and other small constants that kernels read when they are created stay initializers.
_WEIGHTLESS_MIN_BYTES = 1024


def runtime_problem(model: onnx.ModelProto, *, weightless: bool = False) -> str | None:
    """Why ONNX Runtime (CPU, optimizations off) cannot load ``model`` (one line), or None.

    ``weightless``: load the model's structure only, its main graph's weights of 1 KiB or more
    declared as typed graph inputs instead (nothing of them is copied or read), which costs
    about as much as the graph's nodes. ONNX Runtime resolves types, shapes and kernels on that
    the same way; a kernel that needs a large constant weight at creation refuses it, so what
    this load refuses is checked again with the weights before it is reported."""
    try:
        ort_session(weights_as_inputs(model) if weightless else model, optimization="disabled")
    except Exception as err:  # noqa: BLE001 - ORT raises several unrelated types
        return runtime_problem(model) if weightless else first_line(err)
    return None


def weights_as_inputs(model: onnx.ModelProto,
                      names: Collection[str] | None = None) -> onnx.ModelProto:
    """A copy of ``model`` whose main-graph initializers ``names`` are typed graph inputs of
    their name, type and shape (and their value infos dropped); the other initializers are
    copied. By default those of 1 KiB or more, and those whose values stay in their files: a
    model's structure without its weights, which ONNX Runtime loads (the weightless load check)
    and onnxsim simplifies (simplify's rule 10) as it would the model."""
    hidden = (set(names) if names is not None else {
        t.name for t in model.graph.initializer
        if lazy_source(t) is not None or tensor_bytes(t) >= _WEIGHTLESS_MIN_BYTES})
    copy = copy_without(model, frozenset({"graph"}))
    copy.graph.CopyFrom(copy_without(model.graph, frozenset({"initializer", "value_info"})))
    copy.graph.value_info.extend(v for v in model.graph.value_info if v.name not in hidden)
    listed = {value.name for value in copy.graph.input}
    for tensor in model.graph.initializer:
        if tensor.name not in hidden:
            copy.graph.initializer.append(tensor)
        elif tensor.name not in listed:
            copy.graph.input.append(onnx.helper.make_tensor_value_info(
                tensor.name, tensor.data_type, list(tensor.dims)))
    return copy


def check_model(model: onnx.ModelProto, *, rewrite: bool = False) -> list[str]:
    """Check a model structurally; returns warnings, raises if it is broken beyond use.

    A model that fails ``onnx.checker`` but that ONNX Runtime loads (contrib ops in
    ``com.microsoft``, say) is usable: the checker's complaint becomes a warning. A model that
    both reject raises :class:`ModelLoadError` with the checker's message. Weights that stay in
    their files are not read: the checker sees a file of the right size in their place.
    A size below -1 in the signature is refused (-1 is PaddlePaddle's way to write an unknown
    size; graphfix reads it so), and so is an ``ir_version`` newer than both onnx and ONNX
    Runtime read (graphfix would otherwise stamp the model with another version).

    ``rewrite``: the model is to be rewritten and written. What the checker finds that would
    carry into the written model is then refused even where ONNX Runtime runs the model:
    initializers sharing a name (which one is meant is ambiguous) and graph outputs whose
    declared type contradicts what the graph computes. A declared output shape that does is
    no refusal: ONNX Runtime runs such a model (PaddlePaddle's exporter declares some outputs
    rank 0), and the rewrite declares what the graph computes (:func:`correct_output_shapes`).
    """
    _check_signature_sizes(model)
    if rewrite and not model.graph.output:
        raise ModelLoadError("the model declares no outputs: it computes nothing to run or "
                             "compare",
                             hint="list the tensors it should return in graph.output")
    newest = max(onnx.IR_VERSION, max_ir_version())
    if model.ir_version > newest:
        raise ModelLoadError(
            f"invalid model: IR version {model.ir_version} is newer than any this onnx "
            f"({onnx.IR_VERSION}) or ONNX Runtime ({max_ir_version()}) reads",
            hint="the exporter wrote a version that does not exist yet; re-export the model, "
                 "or upgrade onnx and onnxruntime")
    checker_message = checker_problem(model)
    if checker_message is None:
        return []
    ort_message = runtime_problem(model)
    if ort_message is not None:
        raise ModelLoadError(
            f"invalid model: {checker_message}",
            hint=f"ONNX Runtime cannot load it either: {ort_message}",
        )
    if rewrite:
        _refuse_what_would_be_written(model)
    return [f"onnx.checker rejects the model ({checker_message}); ONNX Runtime loads it"]


def _check_signature_sizes(model: onnx.ModelProto) -> None:
    for kind, values in (("input", model.graph.input), ("output", model.graph.output)):
        for value in values:
            if not value.type.HasField("tensor_type"):
                continue
            for axis, dim in enumerate(value.type.tensor_type.shape.dim):
                if dim.HasField("dim_value") and dim.dim_value < -1:
                    raise ModelLoadError(
                        f"{kind} {value.name!r} declares a size of {dim.dim_value} for its "
                        f"dimension {axis}",
                        hint="a size is 0 or more; -1 or a name marks an unknown size",
                    )


def _refuse_what_would_be_written(model: onnx.ModelProto) -> None:
    """Raise for a checker failure that the written model would carry (see check_model)."""
    for graph in graphs(model.graph):
        counts = collections.Counter(t.name for t in graph.initializer)
        repeated = [name for name, count in counts.items() if count > 1]
        if repeated:
            raise ModelLoadError(
                f"invalid model: initializer {repeated[0]!r} is defined "
                f"{counts[repeated[0]]} times" + (f" (and {len(repeated) - 1} more name(s))"
                                                  if len(repeated) > 1 else ""),
                hint="ONNX requires unique names and ONNX Runtime silently uses the last "
                     "one; remove the copies that are not meant")
    for message, _ in _output_contradictions(model):
        if message.startswith("type: "):
            raise ModelLoadError(
                f"invalid model: {message[len('type: '):]}",
                hint="graphfix keeps declared output types and does not write a model that "
                     "contradicts them: correct the declaration")


def correct_output_shapes(model: onnx.ModelProto) -> list[str]:
    """Declare, in place, the shape the graph computes for each graph output whose declared
    shape contradicts it (another rank, or another static size; sizes inference only numbers
    are left unnamed); returns one line per output corrected. ONNX Runtime runs such a model
    and warns; onnx's checker refuses it, and the declaration misleads whatever reads the
    signature."""
    lines = []
    outputs = {value.name: value for value in model.graph.output}
    for message, computed in _output_contradictions(model):
        if message.startswith("type: "):
            continue
        shape = computed.type.tensor_type.shape
        for dim in shape.dim:
            if dim.HasField("dim_param") and dim.dim_param.startswith("unk__"):
                dim.ClearField("dim_param")
        target = outputs[computed.name].type.tensor_type
        if computed.type.tensor_type.HasField("shape"):
            target.shape.CopyFrom(shape)
        else:
            target.ClearField("shape")
        lines.append(f"{message}: the output now declares what the graph computes (ONNX "
                     f"Runtime ran the model, warning; onnx's checker refuses it)")
    return lines


def _output_contradictions(model: onnx.ModelProto) -> list[tuple[str, onnx.ValueInfoProto]]:
    """Graph outputs whose declared element type (message ``type: ...``) or shape (another
    rank, another static size) differs from what shape inference computes for them
    (declarations that only name or leave out a size are not contradictions), with the
    output as inferred."""
    copy = skeleton(model)
    for value in copy.graph.output:
        if value.type.HasField("tensor_type"):
            value.type.tensor_type.ClearField("shape")
    try:
        inferred = onnx.shape_inference.infer_shapes(copy, strict_mode=False)
    except _CHECKER_ERRORS:
        return []
    found = []
    for declared, computed in zip(model.graph.output, inferred.graph.output):
        if not (declared.type.HasField("tensor_type") and computed.type.HasField("tensor_type")):
            continue
        want, got = declared.type.tensor_type, computed.type.tensor_type
        if want.elem_type and got.elem_type and want.elem_type != got.elem_type:
            found.append((f"type: output {declared.name!r} is declared "
                          f"{_type_name(want.elem_type)} but the graph computes "
                          f"{_type_name(got.elem_type)}", computed))
            continue
        if not (want.HasField("shape") and got.HasField("shape")):
            continue
        sizes = [[d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None
                  for d in t.shape.dim] for t in (want, got)]
        if len(sizes[0]) != len(sizes[1]) or any(
                a is not None and b is not None and a != b for a, b in zip(*sizes)):
            found.append((f"output {declared.name!r} is declared {_dims(sizes[0])} but the "
                          f"graph computes {_dims(sizes[1])}", computed))
    return found


def _type_name(elem_type: int) -> str:
    try:
        return onnx.TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"type {elem_type}"


def _dims(sizes: list[int | None]) -> str:
    return "[" + ", ".join("?" if s is None else str(s) for s in sizes) + "]"
