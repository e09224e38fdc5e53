"""ONNX Runtime sessions on in-memory models of any size, weights in their files included."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from graphfix.graph import graphs
from graphfix.model_io.encoding import DECLARED_SHAPES, Encoder, write_model
from graphfix.model_io.runtime import ir_capped
from graphfix.model_io.tensors import external_tensors, inline_bytes, lazy_tensors
from graphfix.model_io.files import os_failure
from graphfix.model_io.folders import release, temporary_folder, temporary_folder_path

if TYPE_CHECKING:
    import onnxruntime

__all__ = ["LentModel", "lent_model", "ort_session", "ort_log_level", "ort_rewritten",
           "temporary_model_file"]


def ort_log_level() -> int:
    """ONNX Runtime's log severity for graphfix's sessions: its own lines only when graphfix
    logs at DEBUG (``-vv``); otherwise fatal only, since every failure ORT reports comes back
    as an exception that graphfix turns into one line."""
    return 1 if logging.getLogger("graphfix").isEnabledFor(logging.DEBUG) else 4

# ONNX Runtime (1.17 and later) resolves the external data of a model given as bytes in this
# folder, so a session on a model whose weights stay in their files needs no copy of them.
_ORT_EXTERNAL_FOLDER = "session.model_external_initializers_file_folder_path"
# A model holding more than this in memory reaches ONNX Runtime through a temporary file with
# external data rather than as bytes: from bytes, ORT parses its own copy of the message and
# then copies the weights out of it (a 1 GB model peaked at 4.2x its weights, through a file
# at 1.2x before the first run and 2.2x after, the weights then mapped from the file).
_SESSION_BYTES_LIMIT = 256 * 2**20
# Where ONNX Runtime writes the weights of the rewritten model it saves, and from what size.
_ORT_WRITTEN_DATA = "session.optimized_model_external_initializers_file_name"
_ORT_WRITTEN_DATA_MIN_BYTES = "session.optimized_model_external_initializers_min_size_in_bytes"

_LEVELS = {
    "disabled": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "layout": "ORT_ENABLE_LAYOUT",
    "all": "ORT_ENABLE_ALL",
}


def ort_session(
    model: onnx.ModelProto | bytes | LentModel,
    *,
    optimization: str = "disabled",
    providers: Sequence[str | tuple[str, dict]] = ("CPUExecutionProvider",),
    options: onnxruntime.SessionOptions | None = None,
    disabled_optimizers: Sequence[str] = (),
    declared_shapes: bool = True,
) -> onnxruntime.InferenceSession:
    """An ONNX Runtime session on an in-memory model, whatever its size.

    ``optimization`` is one of disabled, basic, extended, layout, all, less the graph
    transformers named in ``disabled_optimizers`` (ORT's names: ``ConstantFolding``).
    ``declared_shapes=False`` leaves out the shapes the model only declares (``value_info``):
    ORT's rewrites fold ``Shape`` from them, stale or not. The graph is passed as
    bytes; large weights held in memory are lent to ONNX Runtime over their own bytes (kept
    alive with the session) and weights that stay in their files are read there by ONNX Runtime
    (the folder is set in ``options``). A model holding more than ``_SESSION_BYTES_LIMIT`` of
    weights in memory, or weights in several folders, goes through a temporary folder with
    external data, which ONNX Runtime maps instead of copying. ``bytes`` are a whole model
    as ONNX Runtime reads it (weights inline, as :func:`ort_rewritten` gives them) and go to
    ONNX Runtime as they are; a :class:`LentModel` goes as its graph and lent weights.
    """
    import onnxruntime as ort

    if optimization not in _LEVELS:
        raise ValueError(f"optimization must be one of {', '.join(_LEVELS)}, got {optimization!r}")
    if options is None:
        options = ort.SessionOptions()
    options.log_severity_level = ort_log_level()
    level_name = _LEVELS[optimization]
    options.graph_optimization_level = getattr(
        ort.GraphOptimizationLevel, level_name, ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    )
    if isinstance(model, bytes):
        return ort.InferenceSession(model, options, providers=list(providers),
                                    disabled_optimizers=list(disabled_optimizers))
    if isinstance(model, LentModel):
        return _open_lent(model, options, providers, disabled_optimizers)
    with ir_capped(model):
        size = inline_bytes(model)
        external = external_tensors(model)
        lazy = lazy_tensors(model)
        folders = {path.parent for _, path, _, _ in lazy}
        if size < _SESSION_BYTES_LIMIT and len(lazy) == len(external) and len(folders) <= 1:
            # The graph goes as bytes; the main graph's large weights held in memory are lent
            # to ORT as OrtValues over their own bytes (serializing them, then ORT parsing its
            # copy and copying them out of it, cost 3 copies and most of the session's start),
            # and weights that stay in their files are read there by ORT.
            lent = _lend(model, folder=next(iter(folders), None),
                         declared_shapes=declared_shapes)
            return _open_lent(lent, options, providers, disabled_optimizers)
        with temporary_model_file(model, lazy="copy", declared_shapes=declared_shapes) as path:
            return ort.InferenceSession(str(path), options, providers=list(providers),
                                        disabled_optimizers=list(disabled_optimizers))


@dataclasses.dataclass(frozen=True, eq=False)
class LentModel:
    """A model encoded once for many sessions: its graph as bytes and the main graph's large
    weights as ONNX Runtime values each session reads where they are (:func:`lent_model`);
    weights that stay in their files are read there by ORT, in ``folder``. ORT parsing a
    44 MB model from bytes took 115 ms a session, from the graph with lent weights 24 ms."""

    payload: bytes = dataclasses.field(repr=False)
    names: tuple[str, ...]
    # OrtValues over the weights' arrays (an OrtValue made from a CPU array holds the array)
    values: tuple[Any, ...] = dataclasses.field(repr=False)
    folder: Path | None = None


def lent_model(data: bytes) -> LentModel:
    """``data`` (a whole model as ONNX Runtime reads it, as :func:`ort_rewritten` gives it)
    as a :class:`LentModel`."""
    return _lend(onnx.load_from_string(data), folder=None, declared_shapes=True)


def _lend(model: onnx.ModelProto, *, folder: Path | None, declared_shapes: bool
          ) -> LentModel:
    import onnxruntime as ort

    memory: list[tuple[str, np.ndarray]] = []
    # Only weights some node reads are lent: ORT drops an initializer nothing reads when it
    # resolves the graph, then fails to find it to put a lent weight in ("Failed to find
    # existing initializer"); such a tensor goes inline instead.
    payload = Encoder(lazy="refer", folder=folder, memory=memory, lendable=_read_names(model),
                      without=frozenset() if declared_shapes else DECLARED_SHAPES
                      ).serialize(model)
    return LentModel(payload, tuple(name for name, _ in memory),
                     tuple(ort.OrtValue.ortvalue_from_numpy(value) for _, value in memory),
                     folder)


def _open_lent(lent: LentModel, options: onnxruntime.SessionOptions,
               providers: Sequence[str | tuple[str, dict]],
               disabled_optimizers: Sequence[str]) -> onnxruntime.InferenceSession:
    import onnxruntime as ort

    if lent.folder is not None:
        options.add_session_config_entry(_ORT_EXTERNAL_FOLDER, str(lent.folder))
    if lent.names:
        options.add_external_initializers(list(lent.names), list(lent.values))
    session = ort.InferenceSession(lent.payload, options, providers=list(providers),
                                   disabled_optimizers=list(disabled_optimizers))
    # ORT reads the lent weights where they are for the session's whole life.
    session._graphfix_lent_weights = lent  # type: ignore[attr-defined]
    return session


def ort_rewritten(model: onnx.ModelProto, *, optimization: str,
                  providers: Sequence[str | tuple[str, dict]] = ("CPUExecutionProvider",),
                  ) -> tuple[bytes, onnxruntime.InferenceSession]:
    """``model`` as ONNX Runtime rewrites it at ``optimization`` for ``providers``, serialized
    with its weights inline (those read from files too), and the session that rewrote it. A
    session opened on these bytes with the optimizations off holds the same kernels and opens
    in about half the time (ORT's rewrites are not redone, and the model is not encoded
    again): for a model opened many times (:func:`lent_model` encodes it once for all). The
    rewritten model may hold kernels for this machine's CPU only (NCHWc), so it is for this
    process, never for a file a user keeps. Weights must fit one protobuf message (2 GiB)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    # ORT writes a weight that stays in its file as a reference to that file, relative to the
    # folder it read it from, which bytes opened elsewhere cannot resolve: such a model has
    # every weight written beside the copy and read back into it.
    weights_in_files = bool(lazy_tensors(model))
    if weights_in_files:
        options.add_session_config_entry(_ORT_WRITTEN_DATA, "model.onnx.data")
        options.add_session_config_entry(_ORT_WRITTEN_DATA_MIN_BYTES, "0")
    with temporary_folder("rewritten") as folder:
        path = folder / "model.onnx"
        options.optimized_model_filepath = str(path)
        session = ort_session(model, optimization=optimization, providers=providers,
                              options=options)
        if weights_in_files:
            return onnx.load(str(path)).SerializeToString(), session
        return path.read_bytes(), session


def _read_names(model: onnx.ModelProto) -> frozenset[str]:
    """Names some node of ``model`` reads (in any graph), and the main graph's outputs."""
    names = {o.name for o in model.graph.output}
    for graph in graphs(model.graph):
        for node in graph.node:
            names.update(node.input)
    return frozenset(names)


@contextlib.contextmanager
def temporary_model_file(model: onnx.ModelProto, *, lazy: str,
                          declared_shapes: bool = True) -> Iterator[Path]:
    """``model`` written to a file of a temporary folder (its weights in a data file beside
    it), for a reader that wants a path (ONNX Runtime, a child interpreter); the folder is
    removed when the block ends."""
    # ONNX Runtime may map the data file for the session's life: where an open file cannot be
    # removed (Windows), the folder is left to the system's temporary-file cleanup.
    folder = temporary_folder_path("session")
    try:
        path = folder / "model.onnx"
        try:
            write_model(model, path, data_path=path.parent / "model.onnx.data",
                         data_name="model.onnx.data", external=True, lazy=lazy, durable=False,
                         without=frozenset() if declared_shapes else DECLARED_SHAPES)
        except OSError as err:
            raise os_failure(err, path, "temporary files") from None
        yield path
    finally:
        release(folder)
