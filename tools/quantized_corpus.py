"""Quantize float models the way users do before deployment, with ONNX Runtime's own tools.

    python tools/quantized_corpus.py OUT_DIR MODEL... [--formats qdq_pc qdq_pt_u8 qop dyn]

Each MODEL (a float32 export: the world corpus's and the project corpus's CNNs and transformers)
goes through ``onnxruntime.quantization``: ``quant_pre_process`` (shape inference and ORT's
basic optimizations, as its documentation asks), then

- ``qdq_pc``: ``quantize_static`` in QDQ format, int8, per-channel weights;
- ``qdq_pt_u8``: the same, per-tensor, uint8 activations and weights;
- ``qop``: ``quantize_static`` in QOperator format (QLinearConv, QLinearMatMul, ...);
- ``dyn``: ``quantize_dynamic`` (DynamicQuantizeLinear, MatMulInteger, ConvInteger);
- ``int4`` (asked for by ``--formats``): ``MatMulNBitsQuantizer``, the weight-only int4
  quantization of language models (``MatMulNBits``, blocks of 32, accuracy level 4: the float
  input quantized to int8 at run time, as ONNX Runtime's GenAI builder writes for the CPU).

The calibration data are graphfix's generated inputs at the model's first size (four sets, as a
short calibration run would give; random weights, random inputs: the quantized arithmetic is
what matters here, not accuracy). Written: ``NAME_FORMAT.onnx``; a format that fails for a
model is printed with ONNX Runtime's message and the run goes on (exit 1 when any failed).
Run graphfix over the folder as over any corpus, e.g. ``python tools/pipeline_digest.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

from graphfix.feeds import make_feeds

FORMATS = ("qdq_pc", "qdq_pt_u8", "qop", "dyn", "int4")
DEFAULT_FORMATS = FORMATS[:4]


def _calibration(model: onnx.ModelProto, count: int = 4) -> list[dict[str, np.ndarray]]:
    """``count`` input sets at the first size graphfix generates for ``model``."""
    feeds = make_feeds(model, seed=0, runs=None, input_shapes=None)
    first = {name: np.asarray(value).shape for name, value in feeds[0].items()}
    same = [f for f in feeds if {n: np.asarray(v).shape for n, v in f.items()} == first]
    rng = np.random.default_rng(0)
    out = []
    for index in range(count):
        feed = dict(same[index % len(same)])
        for name, value in feed.items():  # another draw of the same float values' range
            value = np.asarray(value)
            if value.dtype.kind == "f" and value.size:
                low, high = float(value.min()), float(value.max())
                feed[name] = rng.uniform(low, high, value.shape).astype(value.dtype)
        out.append(feed)
    return out


def quantize(source: Path, out_dir: Path, formats: list[str]) -> list[str]:
    """Write ``source`` in each of ``formats``; the failures, one line each."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
            self.feeds = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    failures = []
    feeds = _calibration(onnx.load(source))
    static = {
        "qdq_pc": dict(quant_format=QuantFormat.QDQ, per_channel=True),
        "qdq_pt_u8": dict(quant_format=QuantFormat.QDQ, per_channel=False,
                          activation_type=QuantType.QUInt8, weight_type=QuantType.QUInt8),
        "qop": dict(quant_format=QuantFormat.QOperator, per_channel=False),
    }
    source, out_dir = source.resolve(), out_dir.resolve()
    # ORT's quantizer leaves files in the working folder (its shape inference's model, its
    # calibration's external data): it works in a folder of its own
    with tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder):
        prepared = Path(folder) / "prepared.onnx"
        try:
            quant_pre_process(str(source), str(prepared))
        except Exception as error:  # noqa: BLE001 - its symbolic shape inference fails on some
            print(f"{source.stem}: quant_pre_process failed ({str(error)[:120]}); "
                  "quantizing the model as it is")
            prepared = source
        for name in formats:
            target = out_dir / f"{source.stem}_{name}.onnx"
            try:
                if name == "dyn":
                    quantize_dynamic(str(prepared), str(target))
                elif name == "int4":
                    _int4(source, target)
                else:
                    quantize_static(str(prepared), str(target), Reader(feeds), **static[name])
                print(f"{target.name}: {target.stat().st_size / 2**20:.1f} MB")
            except Exception as error:  # noqa: BLE001 - ORT's quantizer raises many types
                failures.append(f"{source.stem} {name}: {str(error).splitlines()[0][:200]}")
                print(f"{source.stem} {name}: FAILED {failures[-1]}")
    return failures


def _int4(source: Path, target: Path) -> None:
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    quantizer = MatMulNBitsQuantizer(onnx.load(source), block_size=32, is_symmetric=True,
                                     accuracy_level=4)
    quantizer.process()
    if not any(n.op_type == "MatMulNBits" for n in quantizer.model.model.graph.node):
        raise ValueError("no MatMul with a constant weight to quantize")
    onnx.save(quantizer.model.model, target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--formats", nargs="+", choices=FORMATS, default=list(DEFAULT_FORMATS))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    failures = []
    for source in args.models:
        failures += quantize(source, args.out_dir, args.formats)
    for line in failures:
        print("failed:", line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
