"""What the installed ONNX Runtime reads: the highest IR version, probed once."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import onnx

__all__ = ["max_ir_version", "ir_capped"]


@functools.cache
def max_ir_version() -> int:
    """The highest ``ir_version`` the installed ONNX Runtime loads (probed once, then cached)."""
    import onnxruntime as ort

    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["y"])],
        "probe",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
    )
    options = ort.SessionOptions()
    options.log_severity_level = 4
    for ir_version in range(onnx.IR_VERSION, 3, -1):
        probe = onnx.helper.make_model(
            graph, opset_imports=[onnx.helper.make_opsetid("", 13)], ir_version=ir_version
        )
        try:
            ort.InferenceSession(
                probe.SerializeToString(), options, providers=["CPUExecutionProvider"]
            )
        except Exception:  # noqa: BLE001 - ORT raises its own Fail type for unsupported IR
            continue
        return ir_version
    return 3


@contextlib.contextmanager
def ir_capped(model: onnx.ModelProto) -> Iterator[onnx.ModelProto]:
    """Temporarily lower ``model.ir_version`` to what ORT reads; restores it afterwards."""
    original = model.ir_version
    model.ir_version = min(original, max_ir_version())
    try:
        yield model
    finally:
        model.ir_version = original
