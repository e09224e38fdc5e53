"""Real converter output: Keras models through tf2onnx, then through graphfix.

    python tools/keras_corpus.py FOLDER [--models MobileNetV2 conv1d ...] [--styles raw tflite]
                                        [--skip-convert]

Builds Keras models with random weights (``keras.applications`` with ``weights=None``, and small
models for the layer families the applications lack: Conv1D, Conv3D, separable and depthwise
convolutions with LayerNormalization, cropping and padding, a U-Net with Conv2DTranspose and skip
Concatenate, and a mix of GroupNormalization, PReLU, bilinear UpSampling2D, channel Softmax,
global max pooling, Permute and MultiHeadAttention over the spatial tokens) and converts each
with tf2onnx (opset 17, dynamic batch) in four styles: ``raw`` (tf2onnx's graph optimizers all
off: what its converter alone writes), ``notranspose`` (every optimizer but its transpose
optimizer), ``tf2onnx`` (all of them, tf2onnx's own answer, for reference) and ``tflite`` (the
model converted to TensorFlow Lite first, then by tf2onnx's TFLite front end with its optimizers
off: a second converter's raw output, where ExpandDims and Squeeze are Reshapes). Then, per
model in every style but ``tf2onnx``: Transposes and nodes before, after graphfix's
``eliminate-transposes`` alone (and with every image input and output declared channels-first,
``as_nchw``), and after ``graphfix.optimize`` (default pipeline, parity checked on ONNX Runtime
with optimizations off); the Transposes tf2onnx's own optimizer leaves; parity's verdict and
the share of its tolerance the worst output used.

Needs the ``tools`` extra (TensorFlow and tf2onnx).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

import onnx

__all__ = ["main", "convert", "evaluate", "CUSTOM"]

APPLICATIONS = ("MobileNetV2", "MobileNetV3Small", "ResNet50", "EfficientNetB0", "DenseNet121",
                "InceptionV3", "Xception", "NASNetMobile")
STYLES = ("raw", "notranspose", "tf2onnx", "tflite")


def _unet(keras: Any) -> Any:
    layers = keras.layers
    x = keras.Input((128, 128, 3))
    skips, h = [], x
    for filters in (16, 32, 64):
        h = layers.Conv2D(filters, 3, padding="same", activation="relu")(h)
        skips.append(h)
        h = layers.MaxPooling2D()(h)
    h = layers.Conv2D(128, 3, padding="same", activation="relu")(h)
    for filters, skip in zip((64, 32, 16), reversed(skips)):
        h = layers.Conv2DTranspose(filters, 2, strides=2, padding="same")(h)
        h = layers.Concatenate()([h, skip])
        h = layers.Conv2D(filters, 3, padding="same", activation="relu")(h)
    return keras.Model(x, layers.Conv2D(2, 1, activation="softmax")(h))


def _conv1d(keras: Any) -> Any:
    layers = keras.layers
    x = keras.Input((200, 16))
    h = layers.Conv1D(32, 5, padding="same", activation="relu")(x)
    h = layers.BatchNormalization()(h)
    h = layers.MaxPooling1D(2)(h)
    h = layers.Conv1D(64, 3, padding="same", activation="swish")(h)
    h = layers.GlobalAveragePooling1D()(h)
    return keras.Model(x, layers.Dense(10)(h))


def _conv3d(keras: Any) -> Any:
    layers = keras.layers
    x = keras.Input((8, 32, 32, 4))
    h = layers.Conv3D(8, 3, padding="same", activation="relu")(x)
    h = layers.MaxPooling3D(2)(h)
    h = layers.LeakyReLU()(layers.Conv3D(16, 3, padding="same")(h))
    return keras.Model(x, layers.Dense(5)(layers.GlobalMaxPooling3D()(h)))


def _sepconv(keras: Any) -> Any:
    layers = keras.layers
    x = keras.Input((64, 64, 3))
    h = layers.SeparableConv2D(16, 3, padding="same")(x)
    h = layers.LayerNormalization(axis=-1)(h)
    h = layers.ReLU(6.0)(layers.DepthwiseConv2D(3, padding="same")(h))
    h = layers.Cropping2D(((1, 0), (0, 1)))(layers.ZeroPadding2D(((1, 2), (0, 1)))(h))
    h = layers.AveragePooling2D(2)(h)
    h = layers.Add()([layers.Conv2D(8, 1)(h), layers.Conv2D(8, 3, padding="same")(h)])
    h = layers.Multiply()([h, layers.Activation("sigmoid")(h)])
    return keras.Model(x, layers.Dense(4)(layers.Reshape((-1, 8))(h)))


def _mixed(keras: Any) -> Any:
    layers = keras.layers
    x = keras.Input((32, 32, 8))
    h = layers.Conv2D(16, 3, padding="same", dilation_rate=2)(x)
    h = layers.GroupNormalization(groups=4)(h)
    h = layers.PReLU(shared_axes=[1, 2])(h)
    h = layers.UpSampling2D(interpolation="bilinear")(layers.MaxPooling2D()(h))
    h = layers.Softmax(axis=-1)(layers.DepthwiseConv2D(3, strides=1, padding="same")(h))
    g = layers.Reshape((1, 1, 16))(layers.GlobalMaxPooling2D()(h))
    h = layers.ELU()(layers.Multiply()([h, g]))
    tokens = layers.Reshape((-1, 16))(layers.Conv2D(16, 2, strides=2)(h))
    tokens = layers.MultiHeadAttention(num_heads=2, key_dim=8)(tokens, tokens)
    pooled = layers.GlobalAveragePooling1D()(tokens)
    side = layers.Flatten()(layers.Permute((3, 1, 2))(layers.AveragePooling2D(8)(h)))
    return keras.Model(x, layers.Concatenate()([pooled, side]))


CUSTOM: dict[str, Callable[[Any], Any]] = {
    "unet": _unet, "conv1d": _conv1d, "conv3d": _conv3d, "sepconv": _sepconv, "mixed": _mixed,
}


def convert(folder: Path, names: list[str], styles: list[str]) -> list[Path]:
    """Build and convert each model in each style; the written files."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    import tf2onnx
    import tf2onnx.optimizer

    every = tf2onnx.optimizer._get_optimizers().copy()
    chosen = {
        "raw": OrderedDict(),
        "tflite": OrderedDict(),
        "notranspose": OrderedDict((k, v) for k, v in every.items() if k != "optimize_transpose"),
        "tf2onnx": every,
    }
    written = []
    for name in names:
        model = CUSTOM[name](tf.keras) if name in CUSTOM else getattr(
            tf.keras.applications, name)(weights=None)
        spec = (tf.TensorSpec([None, *model.inputs[0].shape[1:]], tf.float32, name="input"),)
        for style in styles:
            path = folder / f"keras_{name}_{style}.onnx"
            tf2onnx.optimizer._optimizers = chosen[style]
            try:
                if style == "tflite":
                    tflite = folder / f"keras_{name}.tflite"
                    tflite.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
                    tf2onnx.convert.from_tflite(str(tflite), opset=17, output_path=str(path))
                else:
                    tf2onnx.convert.from_keras(model, input_signature=spec, opset=17,
                                               output_path=str(path))
            except Exception as error:  # noqa: BLE001 - a converter's failure, reported
                print(f"not converted {path.name}: {str(error).splitlines()[0][:160]}",
                      file=sys.stderr, flush=True)
                continue
            finally:
                tf2onnx.optimizer._optimizers = every
            written.append(path)
            print(f"converted {path.name}", file=sys.stderr, flush=True)
    return written


def _transposes(model: onnx.ModelProto) -> int:
    return sum(n.op_type == "Transpose" for n in model.graph.node)


def evaluate(path: Path) -> dict[str, Any]:
    """graphfix on one converted model: the figures of one row."""
    import graphfix
    from graphfix.passes import eliminate_transposes

    original = graphfix.load(str(path))
    row: dict[str, Any] = {"model": path.stem, "nodes": len(original.graph.node),
                           "transposes": _transposes(original)}
    row["pass_alone"] = _transposes(eliminate_transposes(graphfix.load(str(path))))
    images = [i.name for i in original.graph.input if len(i.type.tensor_type.shape.dim) >= 3]
    row["as_nchw"] = _transposes(eliminate_transposes(
        graphfix.load(str(path)), inputs_as_nchw=images, outputs_as_nchw=[
            o.name for o in original.graph.output if len(o.type.tensor_type.shape.dim) >= 3]))
    reference = path.with_name(path.name.rsplit("_", 1)[0] + "_tf2onnx.onnx")
    if reference.exists():
        row["tf2onnx_optimizer"] = _transposes(onnx.load(str(reference)))
    try:
        result = graphfix.optimize(str(path))
    except graphfix.GraphfixError as err:
        row["error"] = str(err).splitlines()[0][:160]
        return row
    parity = result.report.parity or {}
    row.update(pipeline_nodes=len(result.model.graph.node),
               pipeline_transposes=_transposes(result.model),
               parity=parity.get("passed"),
               tolerance_used=max((o.get("tolerance_used") or 0.0)
                                  for o in parity.get("outputs", [{}])))
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--models", nargs="+", default=[*APPLICATIONS, *CUSTOM])
    parser.add_argument("--styles", nargs="+", default=list(STYLES), choices=STYLES)
    parser.add_argument("--skip-convert", action="store_true",
                        help="evaluate the keras_*.onnx files already in FOLDER")
    args = parser.parse_args(argv)
    args.folder.mkdir(parents=True, exist_ok=True)
    if not args.skip_convert:
        convert(args.folder, args.models, args.styles)
    rows = [evaluate(path) for path in sorted(args.folder.glob("keras_*.onnx"))
            if not path.stem.endswith("_tf2onnx")]
    header = ["model", "nodes", "transposes", "pass_alone", "as_nchw", "pipeline_transposes",
              "tf2onnx_optimizer", "pipeline_nodes", "parity", "tolerance_used", "error"]
    cells = [[format(r[h], ".3g") if isinstance(r.get(h), float) else str(r.get(h, ""))
              for h in header] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for cell in cells:
        print("  ".join(c.ljust(w) for c, w in zip(cell, widths)))
    failed = [r["model"] for r in rows if r.get("error") or not r.get("parity")]
    print(f"parity on every model: {'PASS' if not failed else 'FAIL (' + ', '.join(failed) + ')'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
