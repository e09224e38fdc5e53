"""Build a corpus of detectors, recurrent, video and dense-prediction nets and Keras models as
users export them, to test graphfix on.

    python tools/vision_families_corpus.py OUT_DIR [--only NAME ...] [--list]

Every model is built from code with random weights after ``torch.manual_seed(0)`` (Keras:
``keras.utils.set_random_seed(0)``; nothing is downloaded) and written to
``OUT_DIR/NAME.onnx``; a model whose file already exists is not built again. Families:

- torchvision detectors, an image list in, boxes, labels and scores out (Loop,
  NonMaxSuppression, RoiAlign, TopK, data-dependent shapes): ``ssdlite320``,
  ``fasterrcnn_mbv3_320`` (box head shrunk), and on a MobileNetV3 FPN ``retinanet_small``,
  ``fcos_small``, ``maskrcnn_small``, ``keypointrcnn_small``; ``*_t0`` with a score threshold
  of 0 (random weights still detect), ``*_dynhw`` with dynamic image height and width;
- recurrent: two-layer bidirectional ``lstm_bi2`` and ``gru_bi2``, ``*_state`` with the initial
  state as inputs, and ``lstm_textcls`` (embedding, LSTM, softmax);
- video: ``conv3d_small`` (Conv3d, BatchNorm3d, MaxPool3d), ``r2plus1d_tiny`` (VideoResNet with
  R(2+1)D blocks);
- dense prediction and single ops: ``deeplabv3_mbv3``, ``unet_small`` (three norms,
  ConvTranspose, bilinear, nearest and bicubic Resize, dynamic size), ``pixelshuffle_sr``
  (PixelUnshuffle, PixelShuffle, PReLU), ``gridsample_stn`` (affine_grid, grid_sample),
  ``gridsample_flow`` (grid_sample's three modes), ``norms_net`` (GroupNorm, InstanceNorm with
  and without affine, LayerNorm), ``detr_tiny`` (``nn.Transformer`` over CNN features);
- Keras through tf2onnx at opsets 13 and 17 (``k_NAME_op13``, ``k_NAME_op17``): ``k_lstm``,
  ``k_conv1d`` (SeparableConv1D), ``k_dwbn`` (depthwise convolutions, BatchNormalization,
  ReLU6), ``k_unet`` (Conv2DTranspose, UpSampling2D, padding and cropping), ``k_flatten``,
  ``k_misc`` (LayerNormalization, split, Permute, argmax), ``k_mha`` (MultiHeadAttention as
  Einsum), ``k_lstm_mask`` and ``k_gru_mask`` (masked recurrences).

The torch models are exported by the TorchScript exporter (``dynamo=False``, opset 17,
``dynamic_axes``) as ``NAME``; all but the detector variants also by the dynamo exporter
(``dynamo=True``, opset 17, weights inside the file) as ``NAME_dyn``. Known failures, recorded
as such: the detectors' dynamo exports (torch.export cannot trace torchvision's detection code)
and ``gridsample_stn``'s TorchScript export (no ``affine_grid`` before opset 20). Keras models
go through ``tf2onnx.convert.from_keras``, or ``from_function`` when that fails (noted).

Each model is built in a process of its own (at most 10 minutes), through a scratch folder, and
kept once ``onnx.checker`` accepts it (whether ONNX Runtime loads it is noted). One model
failing does not stop the others. The run writes ``OUT_DIR/vision_families_corpus.json`` (per
model: status, exporter, opset, nodes, bytes, seconds, notes or error) and ends with how many
were built, already there and failed. The whole corpus takes about 8 minutes on 2 cores.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from text_families_corpus import attempt, first_line, run_cli  # the same driver

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = ["Case", "Entry", "build", "entries", "main"]

SEED = 0
STATUS_FILE = "vision_families_corpus.json"
TORCH_OPSET = 17
KERAS_OPSETS = (13, 17)
TIMEOUT_S = 600  # per model


@dataclasses.dataclass
class Case:
    """A module with example inputs, their names and dynamic axes as ``torch.onnx.export``
    takes them (``None``: the exporter's defaults)."""

    module: nn.Module
    args: tuple[Any, ...]
    input_names: list[str]
    output_names: list[str] | None = None
    axes: dict[str, dict[int, str]] | None = None


@dataclasses.dataclass(frozen=True)
class Entry:
    """One file of the corpus: a family exported one way."""

    name: str
    family: str
    exporter: str  # "legacy" (TorchScript), "dynamo" or "tf2onnx"
    opset: int


# --------------------------------------------------------------------------- detectors


def _fpn_backbone(out_channels: int = 64) -> nn.Module:
    """MobileNetV3-small's features with an FPN over its last two stages."""
    from torchvision.models import mobilenet_v3_small
    from torchvision.models.detection.backbone_utils import BackboneWithFPN
    from torchvision.ops.feature_pyramid_network import LastLevelMaxPool

    features = mobilenet_v3_small(weights=None).features
    stages = [0] + [i for i, block in enumerate(features) if getattr(block, "_is_cn", False)]
    stages.append(len(features) - 1)
    returned = [len(stages) - 2, len(stages) - 1]
    return_layers = {f"{stages[k]}": str(v) for v, k in enumerate(returned)}
    in_channels = [features[stages[i]].out_channels for i in returned]
    return BackboneWithFPN(features, return_layers, in_channels, out_channels,
                           extra_blocks=LastLevelMaxPool())


def _detector(model: nn.Module, height: int, width: int) -> Case:
    import torch

    return Case(model, ([torch.rand(3, height, width)],), ["image"])


def ssdlite320() -> Case:
    from torchvision.models.detection import ssdlite320_mobilenet_v3_large

    model = ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=21)
    return _detector(model, 320, 320)


def fasterrcnn_mbv3_320() -> Case:
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead

    model = fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=91, rpn_post_nms_top_n_test=100,
        box_detections_per_img=50)
    # The stock box head has 12.8M parameters; a smaller one keeps the file small.
    model.roi_heads.box_head = TwoMLPHead(256 * 7 * 7, 128)
    model.roi_heads.box_predictor = FastRCNNPredictor(128, 91)
    return _detector(model, 240, 320)


def retinanet_small() -> Case:
    from torchvision.models.detection import RetinaNet
    from torchvision.models.detection.anchor_utils import AnchorGenerator

    backbone = _fpn_backbone()
    sizes = tuple((x, int(x * 2 ** (1.0 / 3)), int(x * 2 ** (2.0 / 3))) for x in [32, 64, 128])
    anchors = AnchorGenerator(sizes, ((0.5, 1.0, 2.0),) * 3)
    model = RetinaNet(backbone, num_classes=21, anchor_generator=anchors, min_size=224,
                      max_size=320, detections_per_img=50, topk_candidates=200)
    return _detector(model, 224, 224)


def fcos_small() -> Case:
    from torchvision.models.detection import FCOS
    from torchvision.models.detection.anchor_utils import AnchorGenerator

    backbone = _fpn_backbone()
    anchors = AnchorGenerator(((16,), (32,), (64,)), ((1.0,),) * 3)
    model = FCOS(backbone, num_classes=21, anchor_generator=anchors, min_size=224, max_size=320,
                 detections_per_img=50, topk_candidates=200)
    return _detector(model, 224, 224)


def _rcnn_parts(classes: int) -> dict[str, Any]:
    """A region-proposal anchor generator and a small box head for the FPN backbone."""
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead

    return {"num_classes": None, "min_size": 224, "max_size": 320,
            "rpn_anchor_generator": AnchorGenerator(((32, 64, 128),) * 3, ((0.5, 1.0, 2.0),) * 3),
            "box_head": TwoMLPHead(64 * 7 * 7, 128),
            "box_predictor": FastRCNNPredictor(128, classes),
            "rpn_post_nms_top_n_test": 100, "box_detections_per_img": 20}


def maskrcnn_small() -> Case:
    from torchvision.models.detection import MaskRCNN
    from torchvision.models.detection.mask_rcnn import MaskRCNNHeads, MaskRCNNPredictor

    backbone = _fpn_backbone()
    parts = _rcnn_parts(11)
    model = MaskRCNN(backbone, mask_head=MaskRCNNHeads(64, (64, 64), 1),
                     mask_predictor=MaskRCNNPredictor(64, 64, 11), **parts)
    return _detector(model, 224, 224)


def keypointrcnn_small() -> Case:
    from torchvision.models.detection import KeypointRCNN
    from torchvision.models.detection.keypoint_rcnn import KeypointRCNNHeads, KeypointRCNNPredictor

    backbone = _fpn_backbone()
    parts = _rcnn_parts(2)
    model = KeypointRCNN(backbone, keypoint_head=KeypointRCNNHeads(64, (64, 64, 64)),
                         keypoint_predictor=KeypointRCNNPredictor(64, 17), **parts)
    return _detector(model, 224, 224)


def _threshold_zero(build: Callable[[], Case], attribute: str) -> Case:
    """``build``'s detector with its score threshold (``attribute``, a dotted path) at 0."""
    case = build()
    *path, name = attribute.split(".")
    setattr(functools.reduce(getattr, path, case.module), name, 0.0)
    return case


def _dynamic_image(build: Callable[[], Case]) -> Case:
    """``build``'s detector with the image's height and width dynamic."""
    return dataclasses.replace(build(), axes={"image": {1: "height", 2: "width"}})


# --------------------------------------------------------------------------- recurrent


def _rnn(lstm: bool, initial_state: bool) -> Case:
    """A two-layer bidirectional LSTM or GRU (input 32, hidden 48) over [batch, 10, 32]."""
    import torch
    from torch import nn

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = (nn.LSTM if lstm else nn.GRU)(32, 48, num_layers=2, bidirectional=True,
                                                    batch_first=True)

        def forward(self, x: torch.Tensor, h0: torch.Tensor | None = None,
                    c0: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
            if h0 is None:
                y, state = self.rnn(x)
            else:
                y, state = self.rnn(x, (h0, c0) if lstm else h0)
            return (y, *state) if lstm else (y, state)

    states = ["h", "c"] if lstm else ["h"]
    args: tuple[torch.Tensor, ...] = (torch.randn(2, 10, 32),)
    names = ["x"]
    axes = {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}
    axes.update({name: {1: "batch"} for name in states})
    if initial_state:
        args += tuple(torch.randn(4, 2, 48) for _ in states)
        names += [f"{name}0" for name in states]
        axes.update({f"{name}0": {1: "batch"} for name in states})
    return Case(M(), args, names, ["y", *states], axes)  # the inputs drawn first, then weights


def lstm_textcls() -> Case:
    import torch
    from torch import nn

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(1000, 32, padding_idx=0)
            self.lstm = nn.LSTM(32, 64, num_layers=1, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(128, 5)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            _, (h, _) = self.lstm(self.emb(ids))
            return torch.softmax(self.fc(torch.cat([h[-2], h[-1]], dim=1)), dim=-1)

    ids = torch.randint(0, 1000, (2, 12))  # drawn before the weights
    return Case(M(), (ids,), ["input_ids"], ["probs"],
                {"input_ids": {0: "batch", 1: "seq"}, "probs": {0: "batch"}})


# --------------------------------------------------------------------------- video, dense, ops


def conv3d_small() -> Case:
    import torch
    from torch import nn

    module = nn.Sequential(
        nn.Conv3d(3, 16, (3, 7, 7), stride=(1, 2, 2), padding=(1, 3, 3), bias=False),
        nn.BatchNorm3d(16), nn.ReLU(),
        nn.MaxPool3d((1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1)),
        nn.Conv3d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm3d(32), nn.ReLU(),
        nn.Conv3d(32, 32, (1, 3, 3), padding=(0, 1, 1)), nn.ReLU(),
        nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(32, 10))
    return Case(module, (torch.randn(1, 3, 8, 64, 64),), ["video"], ["logits"],
                {"video": {0: "batch"}, "logits": {0: "batch"}})


def r2plus1d_tiny() -> Case:
    import torch
    from torchvision.models.video.resnet import BasicBlock, Conv2Plus1D, R2Plus1dStem, VideoResNet

    module = VideoResNet(BasicBlock, [Conv2Plus1D] * 4, [1, 1, 1, 1], R2Plus1dStem,
                         num_classes=10)
    return Case(module, (torch.randn(1, 3, 4, 56, 56),), ["video"], ["logits"])


def deeplabv3_mbv3() -> Case:
    import torch
    from torch import nn
    from torchvision.models.segmentation import deeplabv3_mobilenet_v3_large

    net = deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=21,
                                       aux_loss=False)

    class W(nn.Module):
        """The ``out`` map of torchvision's segmentation dictionary."""

        def __init__(self) -> None:
            super().__init__()
            self.m = net

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.m(x)["out"]

    return Case(W(), (torch.randn(1, 3, 128, 128),), ["input"], ["out"],
                {"input": {0: "batch"}, "out": {0: "batch"}})


def unet_small() -> Case:
    import torch
    from torch import nn

    def block(inputs: int, outputs: int, norm: str = "bn") -> nn.Module:
        norms = {"bn": nn.BatchNorm2d(outputs), "gn": nn.GroupNorm(4, outputs),
                 "in": nn.InstanceNorm2d(outputs, affine=True)}
        return nn.Sequential(nn.Conv2d(inputs, outputs, 3, padding=1), norms[norm],
                             nn.ReLU(inplace=True), nn.Conv2d(outputs, outputs, 3, padding=1),
                             nn.ReLU(inplace=True))

    class U(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.e1, self.e2, self.e3 = block(3, 16), block(16, 32, "gn"), block(32, 64, "in")
            self.pool = nn.MaxPool2d(2)
            self.up3 = nn.ConvTranspose2d(64, 32, 2, stride=2)
            self.d3 = block(64, 32)
            self.up2a = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
            self.up2b = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
            self.d2 = block(32 + 32 + 16, 16, "gn")
            self.up1 = nn.Upsample(scale_factor=2, mode="nearest")
            self.out = nn.Conv2d(16, 2, 1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            e1 = self.e1(x)
            e2 = self.e2(self.pool(e1))
            e3 = self.e3(self.pool(e2))
            d3 = self.d3(torch.cat([self.up3(e3), e2], 1))
            d2 = self.d2(torch.cat([self.up2a(d3), self.up2b(d3), e1], 1))
            y = self.out(d2)
            half = nn.functional.interpolate(y, size=(x.shape[2] // 2, x.shape[3] // 2),
                                             mode="bicubic", align_corners=False)
            return torch.sigmoid(y), self.up1(half)

    axes = {"image": {0: "batch", 2: "h", 3: "w"}, "mask": {0: "batch", 2: "h", 3: "w"},
            "mask_lr": {0: "batch", 2: "h2", 3: "w2"}}
    return Case(U(), (torch.randn(1, 3, 64, 64),), ["image"], ["mask", "mask_lr"], axes)


def gridsample_stn() -> Case:
    """A spatial transformer: ``affine_grid`` from a localisation net, then ``grid_sample``."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class STN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.loc = nn.Sequential(nn.Conv2d(1, 8, 5, stride=2), nn.ReLU(),
                                     nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(128, 6))
            self.flow = nn.Conv2d(1, 2, 3, padding=1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            theta = self.loc(x).view(-1, 2, 3)
            grid = F.affine_grid(theta, list(x.size()), align_corners=False)
            a = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
            flow = torch.tanh(self.flow(x)).permute(0, 2, 3, 1)
            b = F.grid_sample(x, flow, mode="nearest", padding_mode="border", align_corners=True)
            c = F.grid_sample(x, flow, mode="bilinear", padding_mode="reflection",
                              align_corners=False)
            return a, b + c

    return Case(STN(), (torch.randn(2, 1, 28, 28),), ["x"], ["warped", "flowed"])


def gridsample_flow() -> Case:
    """``grid_sample`` over a predicted flow, without ``affine_grid``."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class G(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.flow = nn.Conv2d(3, 2, 3, padding=1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            g = torch.tanh(self.flow(x)).permute(0, 2, 3, 1)
            a = F.grid_sample(x, g, mode="bilinear", padding_mode="zeros", align_corners=False)
            b = F.grid_sample(x, g, mode="nearest", padding_mode="border", align_corners=True)
            c = F.grid_sample(x, g, mode="bicubic", padding_mode="reflection", align_corners=False)
            return a + b, c

    return Case(G(), (torch.randn(2, 3, 24, 24),), ["x"], ["ab", "c"],
                {"x": {0: "b", 2: "h", 3: "w"}})


def pixelshuffle_sr() -> Case:
    import torch
    from torch import nn

    class SR(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.unshuf = nn.PixelUnshuffle(2)
            self.body = nn.Sequential(nn.Conv2d(12, 32, 3, padding=1), nn.PReLU(32),
                                      nn.Conv2d(32, 32, 3, padding=1), nn.LeakyReLU(0.1))
            self.up = nn.Sequential(nn.Conv2d(32, 3 * 16, 3, padding=1), nn.PixelShuffle(4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            upscaled = nn.functional.interpolate(x, scale_factor=2, mode="bilinear")
            return self.up(self.body(self.unshuf(x))) + upscaled

    return Case(SR(), (torch.randn(1, 3, 32, 32),), ["lr"], ["hr"],
                {"lr": {0: "b", 2: "h", 3: "w"}, "hr": {0: "b", 2: "H", 3: "W"}})


def norms_net() -> Case:
    import torch
    from torch import nn

    class N(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(3, 32, 3, padding=1)
            self.gn = nn.GroupNorm(8, 32)
            self.c2 = nn.Conv2d(32, 32, 3, padding=1)
            self.inn = nn.InstanceNorm2d(32)
            self.c3 = nn.Conv2d(32, 32, 3, padding=1)
            self.inn2 = nn.InstanceNorm2d(32, affine=True)
            self.ln = nn.LayerNorm([32])
            self.gn1 = nn.GroupNorm(1, 32)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = nn.functional.silu(self.gn(self.c1(x)))
            x = torch.relu(self.inn(self.c2(x)))
            x = self.gn1(self.inn2(self.c3(x)))
            return self.ln(x.permute(0, 2, 3, 1))

    return Case(N(), (torch.randn(2, 3, 32, 32),), ["x"], ["y"], {"x": {0: "b"}, "y": {0: "b"}})


def detr_tiny() -> Case:
    """A DETR-like detector: a small CNN, ``nn.Transformer`` over its features and 10 queries."""
    import torch
    from torch import nn

    class D(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bb = nn.Sequential(nn.Conv2d(3, 32, 7, stride=4, padding=3), nn.ReLU(),
                                    nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU())
            self.tr = nn.Transformer(64, 4, 2, 2, dim_feedforward=128, dropout=0.0,
                                     batch_first=True)
            self.query = nn.Parameter(torch.randn(10, 64))
            self.pos = nn.Parameter(torch.randn(1, 64, 8, 8))
            self.cls = nn.Linear(64, 21)
            self.box = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            features = self.bb(x) + self.pos
            src = features.flatten(2).permute(0, 2, 1)
            tgt = self.query.unsqueeze(0).expand(x.shape[0], -1, -1)
            h = self.tr(src, tgt)
            return self.cls(h), self.box(h).sigmoid()

    return Case(D(), (torch.randn(1, 3, 64, 64),), ["image"], ["logits", "boxes"],
                {"image": {0: "b"}, "logits": {0: "b"}, "boxes": {0: "b"}})


# Exported by both torch exporters.
TORCH_FAMILIES: dict[str, Callable[[], Case]] = {
    **{f.__name__: f for f in (ssdlite320, fasterrcnn_mbv3_320, retinanet_small, fcos_small,
                               maskrcnn_small, keypointrcnn_small)},
    "lstm_bi2": functools.partial(_rnn, True, False),
    "lstm_bi2_state": functools.partial(_rnn, True, True),
    "gru_bi2": functools.partial(_rnn, False, False),
    "gru_bi2_state": functools.partial(_rnn, False, True),
    **{f.__name__: f for f in (lstm_textcls, conv3d_small, r2plus1d_tiny, deeplabv3_mbv3,
                               unet_small, gridsample_stn, gridsample_flow, pixelshuffle_sr,
                               norms_net, detr_tiny)},
}
_FASTERRCNN_T0 = functools.partial(_threshold_zero, fasterrcnn_mbv3_320, "roi_heads.score_thresh")
# Detector variants, exported by the TorchScript exporter only.
DETECTOR_VARIANTS: dict[str, Callable[[], Case]] = {
    "fasterrcnn_mbv3_320_t0": _FASTERRCNN_T0,
    "retinanet_small_t0": functools.partial(_threshold_zero, retinanet_small, "score_thresh"),
    "fcos_small_t0": functools.partial(_threshold_zero, fcos_small, "score_thresh"),
    "ssdlite320_dynhw": functools.partial(_dynamic_image, ssdlite320),
    "fasterrcnn_mbv3_320_t0_dynhw": functools.partial(_dynamic_image, _FASTERRCNN_T0),
    "maskrcnn_small_dynhw": functools.partial(_dynamic_image, maskrcnn_small),
    "keypointrcnn_small_dynhw": functools.partial(_dynamic_image, keypointrcnn_small),
}


# --------------------------------------------------------------------------- Keras


Shapes = list[tuple[int | None, ...]]
# Layers are built in the order written: each initializer draws its seed when constructed.


def k_lstm(keras: Any) -> tuple[Any, Shapes]:
    layers = keras.layers
    i = keras.Input((None, 16), name="seq")
    x = layers.LSTM(32, return_sequences=True)(i)
    x = layers.Bidirectional(layers.LSTM(16))(x)
    return keras.Model(i, layers.Dense(4, activation="softmax")(x)), [(None, None, 16)]


def k_conv1d(keras: Any) -> tuple[Any, Shapes]:
    layers = keras.layers
    i = keras.Input((4000, 1), name="wave")
    x = layers.Conv1D(16, 9, strides=4, padding="same", activation="relu")(i)
    x = layers.BatchNormalization()(x)
    x = layers.MaxPooling1D(4)(x)
    x = layers.Conv1D(32, 5, padding="same", activation="relu")(x)
    x = layers.SeparableConv1D(32, 3, padding="same", activation="relu")(x)
    x = layers.GlobalAveragePooling1D()(x)
    return keras.Model(i, layers.Dense(10)(x)), [(None, 4000, 1)]


def k_dwbn(keras: Any) -> tuple[Any, Shapes]:
    layers = keras.layers
    i = keras.Input((64, 64, 3), name="img")
    x = layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(i)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU(6.0)(x)
    for filters, stride in [(24, 2), (24, 1), (40, 2)]:
        y = layers.DepthwiseConv2D(3, strides=stride, padding="same", use_bias=False)(x)
        y = layers.BatchNormalization()(y)
        y = layers.ReLU(6.0)(y)
        y = layers.Conv2D(filters, 1, use_bias=False)(y)
        y = layers.BatchNormalization()(y)
        x = layers.Add()([x, y]) if (stride == 1 and x.shape[-1] == filters) else y
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(i, layers.Dense(5, activation="softmax")(x)), [(None, 64, 64, 3)]


def k_unet(keras: Any) -> tuple[Any, Shapes]:
    layers = keras.layers
    i = keras.Input((64, 64, 3), name="img")
    c1 = layers.Conv2D(8, 3, padding="same", activation="relu")(i)
    p1 = layers.MaxPooling2D()(c1)
    c2 = layers.Conv2D(16, 3, padding="same", activation="relu")(p1)
    p2 = layers.MaxPooling2D()(c2)
    c3 = layers.Conv2D(32, 3, padding="same", activation="relu")(p2)
    u2 = layers.Conv2DTranspose(16, 2, strides=2, padding="same")(c3)
    m2 = layers.Concatenate(axis=-1)([u2, c2])
    d2 = layers.Conv2D(16, 3, padding="same", activation="relu")(m2)
    u1 = layers.UpSampling2D(2, interpolation="bilinear")(d2)
    z = layers.ZeroPadding2D(((1, 1), (2, 0)))(c1)
    z = layers.Cropping2D(((1, 1), (2, 0)))(z)
    m1 = layers.Concatenate(axis=-1)([u1, z])
    d1 = layers.Conv2D(8, 3, padding="same", activation="relu")(m1)
    o = layers.Conv2D(4, 1)(d1)
    return keras.Model(i, layers.Softmax(axis=-1)(o)), [(None, 64, 64, 3)]


def k_flatten(keras: Any) -> tuple[Any, Shapes]:
    layers = keras.layers
    i = keras.Input((28, 28, 1), name="img")
    x = layers.Conv2D(8, 3, activation="relu")(i)
    x = layers.MaxPooling2D()(x)
    x = layers.Conv2D(16, 3, activation="relu")(x)
    x = layers.MaxPooling2D()(x)
    x = layers.Flatten()(x)
    x = layers.Dense(32, activation="relu")(x)
    x = layers.Dropout(0.5)(x)
    return keras.Model(i, layers.Dense(10, activation="softmax")(x)), [(None, 28, 28, 1)]


def k_misc(keras: Any) -> tuple[Any, Shapes]:
    import tensorflow as tf

    layers, ops = keras.layers, keras.ops
    i = keras.Input((32, 32, 3), name="img")
    x = layers.Conv2D(16, 3, padding="same")(i)
    x = layers.LayerNormalization(axis=-1)(x)
    y = layers.BatchNormalization()(layers.Add()([x, layers.Conv2D(16, 1)(x)]))
    a, b = layers.Lambda(lambda t: ops.split(t, 2, axis=-1))(y)
    g = layers.Lambda(lambda t: ops.mean(t, axis=[1, 2], keepdims=True))(a)
    x = layers.Multiply()([b, layers.Activation("sigmoid")(g)])
    x = layers.Permute((3, 1, 2))(x)
    x = layers.Reshape((8, 32 * 32))(x)
    x = layers.Lambda(lambda t: ops.max(t, axis=-1))(x)
    # tf.math.argmax: keras.ops.argmax converts to a Bitcast.
    argmax = layers.Lambda(lambda t: tf.math.argmax(t, axis=-1))(y)
    o = layers.Dense(3)(x)
    return keras.Model(i, [o, argmax]), [(None, 32, 32, 3)]


def k_mha(keras: Any) -> tuple[Any, Shapes]:
    layers = keras.layers
    i = keras.Input((32, 32, 3), name="img")
    x = layers.Conv2D(32, 4, strides=4)(i)
    x = layers.Reshape((64, 32))(x)
    for _ in range(2):
        h = layers.LayerNormalization(epsilon=1e-6)(x)
        h = layers.MultiHeadAttention(num_heads=4, key_dim=8)(h, h)
        x = layers.Add()([x, h])
        h = layers.LayerNormalization(epsilon=1e-6)(x)
        # The tanh approximation: the exact gelu converts to Erfc, which ONNX lacks.
        h = layers.Dense(64, activation=lambda t: keras.activations.gelu(t, approximate=True))(h)
        h = layers.Dense(32)(h)
        x = layers.Add()([x, h])
    x = layers.GlobalAveragePooling1D()(x)
    return keras.Model(i, layers.Dense(10)(x)), [(None, 32, 32, 3)]


def k_lstm_mask(keras: Any) -> tuple[Any, Shapes]:
    layers = keras.layers
    i = keras.Input((None,), dtype="int32", name="ids")
    x = layers.Embedding(500, 16, mask_zero=True)(i)
    x = layers.LSTM(24)(x)
    return keras.Model(i, layers.Dense(3, activation="softmax")(x)), [(None, None)]


def k_gru_mask(keras: Any) -> tuple[Any, Shapes]:
    layers = keras.layers
    i = keras.Input((None,), dtype="int32", name="ids")
    x = layers.Embedding(500, 16, mask_zero=True)(i)
    x = layers.Bidirectional(layers.GRU(24, return_sequences=True))(x)
    x = layers.GRU(16)(x)
    return keras.Model(i, layers.Dense(3)(x)), [(None, None)]


# Each builds a Keras model and gives its inputs' shapes for the conversion's signature.
KERAS_FAMILIES: dict[str, Callable[[Any], tuple[Any, Shapes]]] = {
    f.__name__: f for f in (k_lstm, k_conv1d, k_dwbn, k_unet, k_flatten, k_misc, k_mha,
                            k_lstm_mask, k_gru_mask)
}


def entries() -> list[Entry]:
    """Every file the corpus holds, in build order."""
    out: list[Entry] = []
    for family in TORCH_FAMILIES:
        out.append(Entry(family, family, "legacy", TORCH_OPSET))
        out.append(Entry(f"{family}_dyn", family, "dynamo", TORCH_OPSET))
    out += [Entry(family, family, "legacy", TORCH_OPSET) for family in DETECTOR_VARIANTS]
    out += [Entry(f"{family}_op{opset}", family, "tf2onnx", opset)
            for family in KERAS_FAMILIES for opset in KERAS_OPSETS]
    return out


# --------------------------------------------------------------------------- export


def export_torch(entry: Entry, path: Path) -> list[str]:
    """Build ``entry``'s torch model, run it once and export it to ``path``."""
    import torch

    # nn.MultiheadAttention's inference fast path is one fused op no exporter can write.
    torch.backends.mha.set_fastpath_enabled(False)
    torch.manual_seed(SEED)
    case = (TORCH_FAMILIES.get(entry.family) or DETECTOR_VARIANTS[entry.family])()
    case.module.eval()
    dynamo = entry.exporter == "dynamo"
    with torch.no_grad():
        case.module(*case.args)
        torch.onnx.export(case.module, case.args, str(path), dynamo=dynamo,
                          opset_version=entry.opset, input_names=case.input_names,
                          output_names=case.output_names, dynamic_axes=case.axes, verbose=False,
                          **({"external_data": False} if dynamo else {}))
    return []


def export_keras(entry: Entry, path: Path) -> list[str]:
    """Build ``entry``'s Keras model and convert it with tf2onnx."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf
    import tf2onnx

    keras.utils.set_random_seed(SEED)
    model, shapes = KERAS_FAMILIES[entry.family](keras)
    spec = [tf.TensorSpec(shape, tf.as_dtype(x.dtype), name=x.name)
            for shape, x in zip(shapes, model.inputs)]
    try:
        tf2onnx.convert.from_keras(model, input_signature=spec, opset=entry.opset,
                                   output_path=str(path))
        return []
    except Exception as err:  # noqa: BLE001 - Keras 3 models tf2onnx cannot read: the fallback
        function = tf.function(lambda *a: model(*a, training=False), input_signature=spec)
        tf2onnx.convert.from_function(function, input_signature=spec, opset=entry.opset,
                                      output_path=str(path))
        return [f"converted by from_function (from_keras failed: {first_line(err)})"]


def _build_one(entry: Entry, out: Path) -> dict[str, Any]:
    """Write ``out/NAME.onnx`` through a scratch folder, so that a failed or interrupted export
    leaves nothing that looks like a built model."""
    import onnx
    import onnxruntime

    target = out / f"{entry.name}.onnx"
    exporter = export_keras if entry.exporter == "tf2onnx" else export_torch
    with tempfile.TemporaryDirectory(prefix=f".{entry.name}-", dir=out) as scratch:
        path = Path(scratch) / target.name
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporters' deprecation and tracer warnings
            notes = exporter(entry, path)
        model = onnx.load(path)
        onnx.checker.check_model(model)
        try:
            onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        except Exception as err:  # noqa: BLE001 - noted, the model is kept
            notes.append(f"ONNX Runtime refuses it: {first_line(err)}")
        os.replace(path, target)
    return {"notes": notes, "nodes": len(model.graph.node), "bytes": target.stat().st_size}


def _child(entry: Entry, out: Path, record: dict[str, Any], sender: Connection) -> None:
    sender.send(attempt(entry.name, functools.partial(_build_one, entry, out), record))


def _attempt_in_fresh_process(entry: Entry, out: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Build ``entry`` in a process of its own, as a user's export runs: torch.export keeps state
    from one export to the next (a bidirectional LSTM's sequence axis turns static after
    another LSTM's export), and TensorFlow and torch never share a process. A process that dies
    or runs past ``TIMEOUT_S`` is recorded as a failure."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(entry, out, record, sender))
    started = time.perf_counter()
    process.start()
    sender.close()  # the child holds the only sending end: the pipe closes when it ends
    try:
        if receiver.poll(TIMEOUT_S):
            result: dict[str, Any] = receiver.recv()
            process.join()
            return result
        error = f"no result after {TIMEOUT_S} s"
    except EOFError:
        error = "its process ended without a result"
    process.kill()  # nothing to do when it has ended
    process.join()
    for scratch in out.glob(f".{entry.name}-*"):  # what a killed export left
        shutil.rmtree(scratch, ignore_errors=True)
    error += f" (exit code {process.exitcode})"
    print(f"  FAILED {entry.name}: {error}", flush=True)
    return {**record, "status": "failed", "error": error,
            "seconds": round(time.perf_counter() - started, 1)}


def build(out: Path, names: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """Build the models named (all by default) into ``out``, skipping those whose file exists;
    returns each one's manifest entry."""
    out.mkdir(parents=True, exist_ok=True)
    status: dict[str, dict[str, Any]] = {}
    for entry in entries():
        if names and entry.name not in names:
            continue
        record: dict[str, Any] = {"exporter": entry.exporter, "opset": entry.opset}
        if (out / f"{entry.name}.onnx").exists():
            status[entry.name] = {**record, "status": "existing"}
        else:
            status[entry.name] = _attempt_in_fresh_process(entry, out, record)
    return status


def main(argv: list[str] | None = None) -> int:
    return run_cli(argv, __doc__ or "",
                   [(e.name, f"{e.exporter}, opset {e.opset}") for e in entries()], build,
                   STATUS_FILE)


if __name__ == "__main__":
    sys.exit(main())
