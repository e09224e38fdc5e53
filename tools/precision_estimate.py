"""Does convert-precision's error estimate hold against a true float16 run?

    python tools/precision_estimate.py WORLD [--only NAME ...]

ONNX Runtime's CPU provider computes most float16 ops in float32 between Casts it inserts, so a
float16 model's error on the CPU is that of rounding every tensor, not of float16 arithmetic;
convert-precision's estimate measures exactly that (see graphfix/passes/convert_precision/
measure.py). onnx's reference evaluator (``onnx.reference.ReferenceEvaluator``) computes each
op of the lowered model in numpy float16. For each model this prints, per output and input set,
in units of parity's float16 tolerance: the estimate, the lowered model on ONNX Runtime's CPU
provider, and the reference evaluator's true float16 run, and the ratio true / estimate.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import onnx

import graphfix
from graphfix.model_io import load_external_values
from graphfix.passes._measuring import make_feeds, run_outputs, tolerance_used
from graphfix.passes.convert_precision import ConvertPrecision

MODELS = ["bert_legacy", "distilbert_legacy", "gpt2_legacy", "vit_hf_legacy", "llama_legacy",
          "t5_encoder_legacy", "bart_encoder_legacy", "whisper_encoder_legacy",
          "mobilenet_v3_small_legacy", "resnet18_legacy"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("world", type=Path)
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    from onnx.reference import ReferenceEvaluator

    print(f"{'model':26} {'output':20} {'set':>3} {'estimate':>9} {'ort-cpu':>8} "
          f"{'true fp16':>9} {'true/est':>8}")
    ratios = []
    for name in args.only or MODELS:
        path = args.world / f"{name}.onnx"
        if not path.exists():
            continue
        original = graphfix.load(path)
        load_external_values(original)
        copy = onnx.ModelProto()
        copy.CopyFrom(original)
        feeds = make_feeds(original, seed=0, runs=None, input_shapes=None)
        result = ConvertPrecision(feeds=feeds)(copy)
        if not result.modified:
            print(f"{name:26} not lowered: {result.skipped}")
            continue
        outputs = [o.name for o in original.graph.output]
        reference = run_outputs(original, feeds, outputs)
        cpu = run_outputs(result.model, feeds, outputs)
        started = time.perf_counter()
        evaluator = ReferenceEvaluator(result.model)
        for index, feed in enumerate(feeds):
            try:
                true = dict(zip(outputs, evaluator.run(None, feed)))
            except Exception as err:  # noqa: BLE001 - an op the evaluator lacks
                print(f"{name:26} the reference evaluator fails: {str(err).splitlines()[0]}")
                break
            for output in outputs:
                ref = reference[index][output]
                estimate = float(result.details["estimated_error"][output])
                on_cpu = tolerance_used(ref, cpu[index][output], 1e-2, 1e-2)
                exact = tolerance_used(ref, np.asarray(true[output]).astype(ref.dtype),
                                       1e-2, 1e-2)
                ratio = exact / estimate if estimate else float("nan")
                ratios.append(ratio)
                print(f"{name:26} {output[:20]:20} {index:3d} {estimate:9.3f} {on_cpu:8.3f} "
                      f"{exact:9.3f} {ratio:8.2f}", flush=True)
        print(f"{'':26} (reference evaluator: {time.perf_counter() - started:.1f}s)")
    finite = [r for r in ratios if np.isfinite(r)]
    if finite:
        print(f"true float16 / estimate: median {np.median(finite):.2f}, max {max(finite):.2f} "
              f"over {len(finite)} outputs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
