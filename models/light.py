"""The nine "light" models shipped inside the onnx package, as IR 3 exports with initializer inputs.

``onnx/backend/test/data/light/light_*.onnx`` are shrunken versions of classic model-zoo CNNs
(AlexNet, DenseNet121, Inception v1/v2, ResNet50, ShuffleNet, SqueezeNet, VGG19, ZFNet512): IR
version 3, opset 9, every initializer also listed in ``graph.input`` as the Caffe2-era exporters
wrote them. Their weights are not stored: each is a ``ConstantOfShape`` fill whose shape is an
int64 initializer, which keeps the files small. They are the field's real examples of the
initializer-input problem; :func:`load_light` with ``ir_version=7`` re-declares one as a newer
model while keeping the initializer inputs, which is when ONNX Runtime starts treating those
initializers as overridable inputs and skips constant folding and fusions on them.

Expected outputs. Each model has ``light_<name>_output_0.pb`` beside it but no ``input_0.pb``.
Because every weight is a constant fill, the output does not depend on the data input: zeros,
ones and uniform random inputs all reproduce the shipped output exactly (max abs error 0.0 on
ONNX Runtime's CPU provider). Eight of the outputs are a uniform softmax (every class 0.001);
DenseNet121's is a constant 0.46095502 map of shape [1, 1000, 1, 1]. :func:`light_input` therefore
returns zeros for the data input. The output cannot tell a correct rewrite from a wrong one that
keeps it constant, so parity checks on these models should also use other models.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

__all__ = [
    "LIGHT_NAMES",
    "light_data_inputs",
    "light_dir",
    "light_expected_output",
    "light_input",
    "light_path",
    "load_light",
]

LIGHT_NAMES: tuple[str, ...] = (
    "light_bvlc_alexnet",
    "light_densenet121",
    "light_inception_v1",
    "light_inception_v2",
    "light_resnet50",
    "light_shufflenet",
    "light_squeezenet",
    "light_vgg19",
    "light_zfnet512",
)

_NP_DTYPES: dict[int, type[np.generic]] = {
    onnx.TensorProto.FLOAT: np.float32,
    onnx.TensorProto.INT64: np.int64,
    onnx.TensorProto.INT32: np.int32,
}


def light_dir() -> Path:
    """The folder of the installed onnx package that holds the light models."""
    return Path(onnx.__file__).resolve().parent / "backend" / "test" / "data" / "light"


def _stem(name: str) -> str:
    stem = name if name.startswith("light_") else f"light_{name}"
    stem = stem.removesuffix(".onnx")
    if stem not in LIGHT_NAMES:
        raise KeyError(f"unknown light model {name!r}; expected one of {', '.join(LIGHT_NAMES)}")
    return stem


def light_path(name: str) -> Path:
    """Path of ``light_<name>.onnx``; ``name`` may omit the ``light_`` prefix."""
    return light_dir() / f"{_stem(name)}.onnx"


def load_light(name: str, *, ir_version: int | None = None) -> onnx.ModelProto:
    """Load a light model; ``ir_version`` re-declares it, keeping the initializers as inputs."""
    model = onnx.load(light_path(name))
    if ir_version is not None:
        model.ir_version = ir_version
    return model


def light_expected_output(name: str) -> np.ndarray:
    """The shipped expected output ``light_<name>_output_0.pb``."""
    stem = _stem(name)
    return numpy_helper.to_array(onnx.load_tensor(str(light_dir() / f"{stem}_output_0.pb")))


def light_data_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The graph inputs that are not initializers (the real data inputs)."""
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def light_input(name: str) -> dict[str, np.ndarray]:
    """A feed that reproduces the shipped output exactly: zeros for the data input.

    No ``input_0.pb`` is shipped; any input gives the same output (see the module docstring).
    """
    feeds: dict[str, np.ndarray] = {}
    for info in light_data_inputs(load_light(name)):
        tensor_type = info.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tensor_type.shape.dim]
        feeds[info.name] = np.zeros(shape, dtype=_NP_DTYPES[tensor_type.elem_type])
    return feeds
