"""Model I/O: the only package of graphfix that touches files.

- :func:`load` reads a model from a path, bytes or a ModelProto, with its external data resolved
  inside the model's folder (a location that escapes it is refused). With
  ``load_external_data=False`` the weights stay in their data files: each external tensor keeps a
  reference to the checked file (its absolute path), and :func:`tensor_value` reads one tensor on
  demand (:mod:`.loading`, :mod:`.tensors`);
- :func:`save` writes atomically (a temporary file in the target folder, then a rename; nothing
  partial is left behind), with external data beside the model when it is over 2 GB or when asked,
  and ``ir_version`` capped to what the installed ONNX Runtime reads. Tensors still in their
  source files are copied file to file, in chunks; the model in memory is never changed
  (:mod:`.writing`, :mod:`.encoding`);
- :func:`ort_session` opens an ONNX Runtime session on an in-memory model of any size, weights in
  their source files included, without reading them into Python, and :func:`ort_rewritten`
  gives ONNX Runtime's own rewritten copy of a model, for sessions opened many times
  (:mod:`.sessions`);
- :func:`check_model` runs onnx.checker without reading the weights and refuses what neither
  onnx nor ONNX Runtime can use (:mod:`.checking`).

A model file is read only when it is a regular file under protobuf's 2 GiB limit (a FIFO or a
device is refused before a byte is read, without blocking); an output path is checked before
anything runs: a folder (``.``, a trailing slash), a folder graphfix cannot write to, a file it
reads.

The package's face is the names below. A submodule's ``__all__`` lists what it gives this face;
its other public names (``lazy_tensors``, ``write_model``, ...) are shared between the
submodules only, and a leading underscore keeps a name inside its own file.
"""

from __future__ import annotations

from graphfix.model_io.encoding import PROTOBUF_LIMIT, skeleton, stored_size, write_scratch
from graphfix.model_io.checking import (
    check_model,
    checker_problem,
    correct_output_shapes,
    new_checker_problem,
    runtime_problem,
    weights_as_inputs,
)
from graphfix.model_io.loading import (
    LoadedModel,
    ModelSource,
    load,
    load_with_info,
    model_argument,
    named_model,
)
from graphfix.model_io.runtime import max_ir_version
from graphfix.model_io.sessions import (
    LentModel,
    lent_model,
    ort_rewritten,
    ort_session,
    temporary_model_file,
)
from graphfix.model_io.tensors import (
    compact_integers,
    data_files,
    MEASURED_SIZE_LIMIT,
    has_value,
    iter_tensors,
    load_external_values,
    same_tensor,
    tensor_bytes,
    tensor_digest,
    tensor_sample,
    tensor_value,
    typed_bytes,
    weight_bytes,
)
from graphfix.model_io.files import (
    FileRecord,
    ReadLog,
    committed_mark,
    committed_since,
    file_size_limit,
    note_read,
    os_failure,
    os_failure_in,
    read_log,
)
from graphfix.model_io.folders import (
    release,
    sweep_temporaries,
    temporary_folder,
    temporary_folder_path,
    temporary_root,
)
from graphfix.model_io.references import referrers
from graphfix.model_io.writing import (
    WrittenModel,
    check_data_file,
    check_outputs,
    data_path_of,
    may_write_data,
    output_path,
    save,
    write_text,
)

__all__ = [
    "committed_mark",
    "committed_since",
    "ModelSource",
    "LoadedModel",
    "WrittenModel",
    "load",
    "load_with_info",
    "model_argument",
    "named_model",
    "save",
    "check_model",
    "checker_problem",
    "correct_output_shapes",
    "new_checker_problem",
    "runtime_problem",
    "weights_as_inputs",
    "max_ir_version",
    "ort_session",
    "temporary_model_file",
    "ort_rewritten",
    "LentModel",
    "lent_model",
    "iter_tensors",
    "compact_integers",
    "tensor_value",
    "has_value",
    "tensor_bytes",
    "typed_bytes",
    "tensor_digest",
    "tensor_sample",
    "load_external_values",
    "weight_bytes",
    "MEASURED_SIZE_LIMIT",
    "stored_size",
    "PROTOBUF_LIMIT",
    "write_text",
    "temporary_folder",
    "temporary_folder_path",
    "temporary_root",
    "release",
    "sweep_temporaries",
    "FileRecord",
    "ReadLog",
    "read_log",
    "note_read",
    "os_failure",
    "os_failure_in",
    "file_size_limit",
    "referrers",
    "check_data_file",
    "write_scratch",
    "same_tensor",
    "skeleton",
    "data_files",
    "check_outputs",
    "data_path_of",
    "may_write_data",
    "output_path",
]
