"""Converter-style NHWC CNNs, shaped like tf2onnx output from Keras models without its optimizer.

Keras works in NHWC; ONNX Conv, pooling and BatchNormalization are NCHW. A converter that does not
optimize its output (tf2onnx with its optimizer off, several TFLite/Keras converters) keeps the
graph input in NHWC and wraps every layout-sensitive op in ``Transpose(perm=[0,3,1,2])`` ...
``Transpose(perm=[0,2,3,1])``, leaving the layout-agnostic ops (Pad, Clip, Relu, Add, Mul, Sigmoid,
ReduceMean, Concat, Squeeze, MatMul/Add) in NHWC between them. Those transposes are what
``eliminate-transposes`` exists to cancel, so these builders reproduce the pattern faithfully:

- explicit ``Pad`` in NHWC order before strided convolutions (Keras ``ZeroPadding2D`` /
  ``correct_pad``) and ``pads`` attributes on stride-1 "same" convolutions;
- ``Clip(0, 6)`` for ReLU6, ``Sigmoid``·``Mul`` for Swish;
- BatchNormalization either folded into the Conv (MobileNetV2, EfficientNet: TensorFlow folds a BN
  that follows a Conv when the graph is frozen) or kept as its own NCHW op wrapped in transposes
  (ResNet50, DenseNet: a BN that follows another op or feeds an Add is left alone);
- ``ReduceMean`` over axes [1, 2] for global pooling (keepdims 0, or keepdims 1 then ``Squeeze``)
  and for squeeze-excitation (keepdims 1, then a broadcast ``Mul``);
- ``Concat`` on the NHWC channel axis; ``MatMul`` + ``Add`` (or ``Gemm``) and ``Softmax`` heads;
- ``Resize`` wrapped in transposes (UNet), a layout barrier for transpose passes.

All models use opset 13 (tf2onnx's default) and IR version 8, take a float input ``input``
[N, H, W, 3] (``N`` symbolic when ``dynamic_batch``), and have seeded weights: the same options
give the same bytes. Full-size options mimic the Keras application; ``width`` and the depth options
shrink them for fast tests.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import onnx
from onnx import helper

from ._graph import TO_NCHW, TO_NHWC, GraphBuilder, float_input

__all__ = [
    "NHWC_MODELS",
    "densenet_nhwc",
    "efficientnet_nhwc",
    "mobilenetv2_nhwc",
    "nchw_stray_pair",
    "resnet50_nhwc",
    "unet_nhwc",
]

OPSET = 13
IR_VERSION = 8


def _divisible(value: float, divisor: int = 8) -> int:
    """Keras' ``_make_divisible``: round channels to a multiple of ``divisor``, never below 90%."""
    new = max(divisor, int(value + divisor / 2) // divisor * divisor)
    if new < 0.9 * value:
        new += divisor
    return new


class _NHWC(GraphBuilder):
    """Emits Keras layers the way an unoptimized converter does, tracking NHWC tensors."""

    def transpose(self, x: str, perm: Sequence[int]) -> str:
        return self.op1("Transpose", [x], perm=list(perm))

    def pad(self, x: str, k: int) -> str:
        # Keras correct_pad for even inputs: (k//2 - 1, k//2) top/left and bottom/right; NHWC order.
        before, after = k // 2 - 1, k // 2
        pads = np.array([0, before, before, 0, 0, after, after, 0], dtype=np.int64)
        return self.op1("Pad", [x, self.const("pads", pads)], mode="constant")

    def conv(
        self,
        x: str,
        cin: int,
        cout: int,
        k: int,
        *,
        stride: int = 1,
        group: int = 1,
        bias: bool = True,
        explicit_pad: bool = True,
    ) -> str:
        """Conv2D / DepthwiseConv2D: NHWC in, NHWC out, transposes around the NCHW Conv."""
        pads = [k // 2] * 4
        if stride > 1 and k > 1 and explicit_pad:
            x = self.pad(x, k)
            pads = [0, 0, 0, 0]
        w = self.weight("W", [cout, cin // group, k, k], fan_in=cin // group * k * k)
        inputs = [self.transpose(x, TO_NCHW), w]
        if bias:
            inputs.append(self.const("B", self.rng.uniform(-0.1, 0.1, cout).astype(np.float32)))
        y = self.op1(
            "Conv", inputs, kernel_shape=[k, k], strides=[stride, stride], pads=pads,
            group=group, dilations=[1, 1],
        )
        return self.transpose(y, TO_NHWC)

    def bn(self, x: str, c: int) -> str:
        """An unfolded Keras BatchNormalization: its own NCHW op between two transposes."""
        scale = self.const("bn_scale", self.rng.uniform(0.5, 1.5, c).astype(np.float32))
        shift = self.const("bn_bias", self.rng.uniform(-0.1, 0.1, c).astype(np.float32))
        mean = self.const("bn_mean", self.rng.uniform(-0.1, 0.1, c).astype(np.float32))
        var = self.const("bn_var", self.rng.uniform(0.5, 1.5, c).astype(np.float32))
        y = self.op1(
            "BatchNormalization", [self.transpose(x, TO_NCHW), scale, shift, mean, var],
            epsilon=1e-3,
        )
        return self.transpose(y, TO_NHWC)

    def pool(self, x: str, op_type: str, k: int, stride: int, pads: Sequence[int]) -> str:
        y = self.op1(
            op_type, [self.transpose(x, TO_NCHW)], kernel_shape=[k, k],
            strides=[stride, stride], pads=list(pads),
        )
        return self.transpose(y, TO_NHWC)

    def relu6(self, x: str) -> str:
        lo = self.const("clip_min", np.array(0.0, dtype=np.float32))
        hi = self.const("clip_max", np.array(6.0, dtype=np.float32))
        return self.op1("Clip", [x, lo, hi])

    def swish(self, x: str) -> str:
        return self.op1("Mul", [x, self.op1("Sigmoid", [x])])

    def dense(self, x: str, cin: int, cout: int) -> str:
        w = self.weight("dense_W", [cin, cout], fan_in=cin)
        b = self.const("dense_B", self.rng.uniform(-0.1, 0.1, cout).astype(np.float32))
        return self.op1("Add", [self.op1("MatMul", [x, w]), b])

    def finish(
        self, name: str, out: str, image_size: int, out_shape: list[int | str],
        dynamic_batch: bool,
    ) -> onnx.ModelProto:
        batch: int | str = "N" if dynamic_batch else 1
        out_shape = [batch if d == "N" else d for d in out_shape]
        self.nodes.append(helper.make_node("Identity", [out], ["output"], name="output_identity"))
        model = self.model(
            name,
            [float_input("input", [batch, image_size, image_size, 3])],
            [float_input("output", out_shape)],
            opset=OPSET,
            ir_version=IR_VERSION,
            producer="tf2onnx-style",
        )
        return model


def mobilenetv2_nhwc(
    *,
    image_size: int = 224,
    width: float = 1.0,
    num_classes: int = 1000,
    dynamic_batch: bool = True,
    seed: int = 0,
) -> onnx.ModelProto:
    """Keras MobileNetV2 as an unoptimized converter emits it (BN folded into each Conv).

    Inverted residual blocks: 1x1 expand + ReLU6, explicit Pad before each strided depthwise
    3x3 conv (group = channels) + ReLU6, linear 1x1 projection, residual Add when shapes allow.
    """
    g = _NHWC(seed)
    x = "input"
    c = _divisible(32 * width)
    x = g.relu6(g.conv(x, 3, c, 3, stride=2))
    settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
    for t, ch, n, s in settings:
        out = _divisible(ch * width)
        for i in range(n):
            stride = s if i == 0 else 1
            h = x
            hidden = c * t
            if t != 1:
                h = g.relu6(g.conv(h, c, hidden, 1))
            h = g.relu6(g.conv(h, hidden, hidden, 3, stride=stride, group=hidden))
            h = g.conv(h, hidden, out, 1)
            x = g.op1("Add", [x, h]) if stride == 1 and c == out else h
            c = out
    last = 1280 if width >= 1.0 else _divisible(1280 * width)
    x = g.relu6(g.conv(x, c, last, 1))
    x = g.op1("ReduceMean", [x], axes=[1, 2], keepdims=0)
    x = g.op1("Softmax", [g.dense(x, last, num_classes)], axis=-1)
    return g.finish("mobilenetv2_nhwc", x, image_size, ["N", num_classes], dynamic_batch)


def resnet50_nhwc(
    *,
    image_size: int = 224,
    width: float = 1.0,
    blocks: Sequence[int] = (3, 4, 6, 3),
    num_classes: int = 1000,
    dynamic_batch: bool = True,
    seed: int = 0,
) -> onnx.ModelProto:
    """Keras ResNet50 (v1 bottlenecks) with every BatchNormalization left unfolded.

    Each Conv and each BN sits between its own pair of transposes, as a converter emits them when
    the BN is not folded; residual Add and Relu stay in NHWC. Head: ReduceMean, Gemm, Softmax.
    """
    g = _NHWC(seed)
    base = max(8, int(64 * width))
    x = g.op1("Pad", ["input", g.const("pads", np.array([0, 3, 3, 0, 0, 3, 3, 0], np.int64))])
    x = g.op1("Relu", [g.bn(g.conv(x, 3, base, 7, stride=2, explicit_pad=False), base)])
    x = g.op1("Pad", [x, g.const("pads", np.array([0, 1, 1, 0, 0, 1, 1, 0], np.int64))])
    x = g.pool(x, "MaxPool", 3, 2, [0, 0, 0, 0])
    c = base
    for stage, n in enumerate(blocks):
        filters = base * 2**stage
        for i in range(n):
            stride = 2 if stage > 0 and i == 0 else 1
            out = filters * 4
            h = g.op1("Relu", [g.bn(g.conv(x, c, filters, 1, stride=stride), filters)])
            h = g.op1("Relu", [g.bn(g.conv(h, filters, filters, 3), filters)])
            h = g.bn(g.conv(h, filters, out, 1), out)
            if i == 0:
                x = g.bn(g.conv(x, c, out, 1, stride=stride), out)
            x = g.op1("Relu", [g.op1("Add", [x, h])])
            c = out
    x = g.op1("ReduceMean", [x], axes=[1, 2], keepdims=0)
    w = g.weight("fc_W", [num_classes, c], fan_in=c)
    b = g.const("fc_B", np.zeros(num_classes, np.float32))
    x = g.op1("Softmax", [g.op1("Gemm", [x, w, b], transB=1)], axis=-1)
    return g.finish("resnet50_nhwc", x, image_size, ["N", num_classes], dynamic_batch)


def efficientnet_nhwc(
    *,
    image_size: int = 224,
    width: float = 1.0,
    depth: float = 1.0,
    num_classes: int = 1000,
    dynamic_batch: bool = True,
    seed: int = 0,
) -> onnx.ModelProto:
    """Keras EfficientNet-B0-like: MBConv blocks with depthwise convs, Swish and SE blocks.

    BN is folded into the convs. Input rescaling (Mul, Sub, Div) stays in NHWC. Squeeze-excitation
    is ReduceMean(keepdims=1) -> 1x1 conv + Swish -> 1x1 conv + Sigmoid -> broadcast Mul, each
    1x1 conv on the [N,1,1,C] tensor wrapped in transposes like any other.
    """
    g = _NHWC(seed)
    x = g.op1("Mul", ["input", g.const("rescale", np.array(1 / 255, np.float32))])
    x = g.op1("Sub", [x, g.const("mean", np.array([0.485, 0.456, 0.406], np.float32))])
    x = g.op1("Div", [x, g.const("std", np.array([0.229, 0.224, 0.225], np.float32))])
    c = _divisible(32 * width)
    x = g.swish(g.conv(x, 3, c, 3, stride=2))
    # kernel, stride, expand ratio, output filters, repeats
    settings = [(3, 1, 1, 16, 1), (3, 2, 6, 24, 2), (5, 2, 6, 40, 2), (3, 2, 6, 80, 3),
                (5, 1, 6, 112, 3), (5, 2, 6, 192, 4), (3, 1, 6, 320, 1)]
    for k, s, e, filters, repeats in settings:
        out = _divisible(filters * width)
        for i in range(max(1, int(math.ceil(repeats * depth)))):
            stride = s if i == 0 else 1
            hidden = c * e
            h = x
            if e != 1:
                h = g.swish(g.conv(h, c, hidden, 1))
            h = g.swish(g.conv(h, hidden, hidden, k, stride=stride, group=hidden))
            squeezed = max(1, int(c * 0.25))
            se = g.op1("ReduceMean", [h], axes=[1, 2], keepdims=1)
            se = g.swish(g.conv(se, hidden, squeezed, 1))
            se = g.op1("Sigmoid", [g.conv(se, squeezed, hidden, 1)])
            h = g.op1("Mul", [h, se])
            h = g.conv(h, hidden, out, 1)
            x = g.op1("Add", [h, x]) if stride == 1 and c == out else h
            c = out
    last = _divisible(1280 * width) if width < 1.0 else 1280
    x = g.swish(g.conv(x, c, last, 1))
    x = g.op1("ReduceMean", [x], axes=[1, 2], keepdims=0)
    x = g.op1("Softmax", [g.dense(x, last, num_classes)], axis=-1)
    return g.finish("efficientnet_nhwc", x, image_size, ["N", num_classes], dynamic_batch)


def densenet_nhwc(
    *,
    image_size: int = 224,
    growth: int = 32,
    blocks: Sequence[int] = (6, 12, 24, 16),
    num_classes: int = 1000,
    dynamic_batch: bool = True,
    seed: int = 0,
) -> onnx.ModelProto:
    """Keras DenseNet121-like: pre-activation BN-ReLU-Conv layers joined by NHWC Concat.

    The BNs precede their convs, so none can be folded: every one is wrapped in transposes.
    Each dense layer concatenates its output on the channel axis (3); transitions halve the
    channels and average-pool. Head: ReduceMean(keepdims=1), Squeeze, MatMul + Add, Softmax.
    """
    g = _NHWC(seed)
    c = 2 * growth
    x = g.op1("Pad", ["input", g.const("pads", np.array([0, 3, 3, 0, 0, 3, 3, 0], np.int64))])
    x = g.op1("Relu", [g.bn(g.conv(x, 3, c, 7, stride=2, bias=False, explicit_pad=False), c)])
    x = g.op1("Pad", [x, g.const("pads", np.array([0, 1, 1, 0, 0, 1, 1, 0], np.int64))])
    x = g.pool(x, "MaxPool", 3, 2, [0, 0, 0, 0])
    for b, n in enumerate(blocks):
        for _ in range(n):
            h = g.op1("Relu", [g.bn(x, c)])
            h = g.conv(h, c, 4 * growth, 1, bias=False)
            h = g.op1("Relu", [g.bn(h, 4 * growth)])
            h = g.conv(h, 4 * growth, growth, 3, bias=False)
            x = g.op1("Concat", [x, h], axis=3)
            c += growth
        if b != len(blocks) - 1:
            h = g.op1("Relu", [g.bn(x, c)])
            c = c // 2
            h = g.conv(h, c * 2, c, 1, bias=False)
            x = g.pool(h, "AveragePool", 2, 2, [0, 0, 0, 0])
    x = g.op1("Relu", [g.bn(x, c)])
    x = g.op1("ReduceMean", [x], axes=[1, 2], keepdims=1)
    x = g.op1("Squeeze", [x, g.const("axes", np.array([1, 2], np.int64))])
    x = g.op1("Softmax", [g.dense(x, c, num_classes)], axis=-1)
    return g.finish("densenet_nhwc", x, image_size, ["N", num_classes], dynamic_batch)


def unet_nhwc(
    *,
    image_size: int = 256,
    width: float = 1.0,
    depth: int = 4,
    num_classes: int = 2,
    dynamic_batch: bool = True,
    seed: int = 0,
) -> onnx.ModelProto:
    """A Keras U-Net: conv-ReLU pairs, MaxPool down, nearest Resize up, skip Concat on axis -1.

    The upsampling Resize is emitted NCHW between transposes (as converters handle TF's
    ResizeNearestNeighbor); Resize is a layout barrier for transpose passes. The per-pixel
    Softmax over classes runs in NHWC. ``image_size`` must be divisible by ``2**depth``.
    """
    if image_size % (2**depth):
        raise ValueError(f"image_size {image_size} is not divisible by 2**depth = {2**depth}")
    g = _NHWC(seed)
    base = max(4, int(64 * width))
    x, c = "input", 3
    skips: list[tuple[str, int]] = []
    for level in range(depth):
        f = base * 2**level
        x = g.op1("Relu", [g.conv(x, c, f, 3)])
        x = g.op1("Relu", [g.conv(x, f, f, 3)])
        skips.append((x, f))
        x = g.pool(x, "MaxPool", 2, 2, [0, 0, 0, 0])
        c = f
    f = base * 2**depth
    x = g.op1("Relu", [g.conv(x, c, f, 3)])
    x = g.op1("Relu", [g.conv(x, f, f, 3)])
    c = f
    scales = g.const("scales", np.array([1, 1, 2, 2], np.float32))
    for skip, sf in reversed(skips):
        up = g.op1("Resize", [g.transpose(x, TO_NCHW), "", scales], mode="nearest")
        up = g.op1("Relu", [g.conv(g.transpose(up, TO_NHWC), c, sf, 3)])
        x = g.op1("Concat", [skip, up], axis=-1)
        x = g.op1("Relu", [g.conv(x, 2 * sf, sf, 3)])
        x = g.op1("Relu", [g.conv(x, sf, sf, 3)])
        c = sf
    x = g.op1("Softmax", [g.conv(x, c, num_classes, 1)], axis=-1)
    return g.finish(
        "unet_nhwc", x, image_size, ["N", image_size, image_size, num_classes], dynamic_batch
    )


def nchw_stray_pair(
    *,
    image_size: int = 32,
    channels: int = 16,
    num_classes: int = 10,
    around_op: bool = True,
    dynamic_batch: bool = True,
    seed: int = 0,
) -> onnx.ModelProto:
    """A clean NCHW CNN with a single stray Transpose pair, the leftover of a partial rewrite.

    With ``around_op`` the pair encloses a Relu (``T(0,2,3,1) -> Relu -> T(0,3,1,2)``), otherwise
    the two transposes are adjacent. Input ``input`` is NCHW [N, 3, H, W].
    """
    g = _NHWC(seed)

    def conv(x: str, cin: int, cout: int) -> str:
        w = g.weight("W", [cout, cin, 3, 3], fan_in=cin * 9)
        b = g.const("B", np.zeros(cout, np.float32))
        return g.op1("Conv", [x, w, b], kernel_shape=[3, 3], pads=[1, 1, 1, 1])

    x = g.op1("Relu", [conv("input", 3, channels)])
    x = conv(x, channels, channels)
    t = g.transpose(x, TO_NHWC)
    if around_op:
        t = g.op1("Relu", [t])
    x = g.transpose(t, TO_NCHW)
    x = g.op1("Relu", [conv(x, channels, channels)])
    x = g.op1("ReduceMean", [x], axes=[2, 3], keepdims=0)
    x = g.op1("Softmax", [g.dense(x, channels, num_classes)], axis=-1)
    batch: int | str = "N" if dynamic_batch else 1
    g.nodes.append(helper.make_node("Identity", [x], ["output"], name="output_identity"))
    return g.model(
        "nchw_stray_pair",
        [float_input("input", [batch, 3, image_size, image_size])],
        [float_input("output", [batch, num_classes])],
        opset=OPSET,
        ir_version=IR_VERSION,
    )


NHWC_MODELS: dict[str, Callable[..., onnx.ModelProto]] = {
    "mobilenetv2_nhwc": mobilenetv2_nhwc,
    "resnet50_nhwc": resnet50_nhwc,
    "efficientnet_nhwc": efficientnet_nhwc,
    "densenet_nhwc": densenet_nhwc,
    "unet_nhwc": unet_nhwc,
}
