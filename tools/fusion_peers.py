"""fuse-transformer against ONNX Runtime's transformers optimizer with the heads typed by hand.

    python tools/fusion_peers.py WORLD [--only NAME ...] [--json out.json] [--bench-runs N]

For the world corpus's transformers (``python tools/world_corpus.py WORLD``; each built with
4 heads, hidden size 128, or 64 for the audio encoders), on the exported original:

- ``heads``: what graphfix reads from the graph (heads x head size), against the config;
- ``ort-0``: ``optimize_model(model_type, num_heads=0, hidden_size=0)``, ORT finding the heads
  itself; ``ort-hand``: the same with the config's heads and hidden size typed in;
- ``olive``: Olive's ``OrtTransformersOptimization`` given the model type and the heads;
- ``graphfix``: the fuse-transformer pass (model type and heads read from the graph) on parity's
  generated inputs, whose attention masks have holes; ``graphfix-pad``: the same on inputs
  whose masks are padding (ones, then zeros), as tokenizers make them.

For each: the fused contrib ops, and whether the result computes the original's outputs within
parity's float32 tolerance on the padding inputs (ORT CPU, optimizations off): a fusion that
is not exact there is marked ``WRONG``. ``--bench-runs N`` times graphfix-pad's model against
the original under ORT's defaults on the CPU. Needs the ``tools`` extra (olive-ai).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import onnx

import graphfix
from graphfix.model_io import load_external_values
from graphfix.passes._measuring import make_feeds, run_outputs, tolerance_used
from graphfix.passes.fuse_transformer import FuseTransformer
from graphfix.passes.fuse_transformer.heads import model_type, read_heads
from precision_peers import run_olive

MODELS = {"bert_legacy": 128, "bert_dynamo": 128, "distilbert_legacy": 128,
          "distilbert_dynamo": 128, "gpt2_legacy": 128, "gpt2_dynamo": 128,
          "vit_hf_legacy": 128, "vit_hf_dynamo": 128, "llama_legacy": 128,
          "llama_dynamo": 128, "bart_encoder_legacy": 128, "bart_encoder_dynamo": 128,
          "t5_encoder_legacy": 128, "t5_encoder_dynamo": 128, "whisper_encoder_legacy": 64,
          "whisper_encoder_dynamo": 64, "wav2vec2_legacy": 64, "wav2vec2_dynamo": 64}
HEADS = 4


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def _padding(feeds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    padded = []
    for feed in feeds:
        feed = dict(feed)
        for name, value in feed.items():
            if "mask" in name.lower() and np.asarray(value).dtype.kind in "iub":
                mask = np.ones_like(value)
                mask[..., -2:] = 0
                feed[name] = mask
        padded.append(feed)
    return padded


def _fused(model: onnx.ModelProto) -> dict[str, int]:
    return dict(sorted(Counter(n.op_type for n in model.graph.node
                               if n.domain == "com.microsoft").items()))


def _exact(original: onnx.ModelProto, model: onnx.ModelProto, feeds: list[dict[str, Any]]
           ) -> str:
    names = [o.name for o in original.graph.output]
    try:
        ref, cand = run_outputs(original, feeds, names), run_outputs(model, feeds, names)
    except Exception as err:  # noqa: BLE001
        return f"does not run ({str(err).splitlines()[0][:60]})"
    worst = max(tolerance_used(r[n], c[n], 1e-4, 1e-3) for r, c in zip(ref, cand) for n in r)
    return "exact" if worst <= 1.0 else f"WRONG ({worst:.3g}x)"


def _ort(model: onnx.ModelProto, kind: str, heads: int, hidden: int) -> onnx.ModelProto:
    from onnxruntime.transformers.optimizer import optimize_model

    return optimize_model(model, model_type=kind, num_heads=heads, hidden_size=hidden,
                          opt_level=0).model


def _olive(model: onnx.ModelProto, kind: str, heads: int, hidden: int) -> onnx.ModelProto:
    return run_olive(model, {"fuse": {"type": "OrtTransformersOptimization", "model_type": kind,
                                      "num_heads": heads, "hidden_size": hidden,
                                      "opt_level": 0}})


def _run(tool: str, model: onnx.ModelProto, kind: str, hidden: int,
         feeds: list[dict[str, Any]], padded: list[dict[str, Any]]) -> onnx.ModelProto:
    if tool == "ort-0":
        return _ort(model, kind, 0, 0)
    if tool == "ort-hand":
        return _ort(model, kind, HEADS, hidden)
    if tool == "olive":
        return _olive(model, kind, HEADS, hidden)
    return FuseTransformer(feeds=feeds if tool == "graphfix" else padded)(model).model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("world", type=Path)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--bench-runs", type=int, default=0)
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    rows = []
    for name in args.only or list(MODELS):
        path = args.world / f"{name}.onnx"
        if not path.exists():
            print(f"{name}: missing")
            continue
        hidden = MODELS.get(name, 128)
        original = graphfix.load(path)
        load_external_values(original)
        feeds = make_feeds(original, seed=0, runs=None, input_shapes=None)
        padded = _padding(feeds)
        kind = model_type(original)[0]
        read = read_heads(original)
        heads = (f"{read.num_heads}x{read.head_size}" if not isinstance(read, str) else
                 f"unread: {read[:60]}")
        print(f"{name}: type {kind}, heads read {heads} (config {HEADS}x{hidden // HEADS})",
              flush=True)
        row: dict[str, Any] = {"model": name, "model_type": kind, "heads": heads}
        for tool in ("ort-0", "ort-hand", "olive", "graphfix", "graphfix-pad"):
            started = time.perf_counter()
            try:
                fused = _run(tool, _copy(original), kind, hidden, feeds, padded)
                seconds = time.perf_counter() - started
                counts, exact = _fused(fused), _exact(original, fused, padded)
            except Exception as err:  # noqa: BLE001
                seconds, counts = time.perf_counter() - started, {}
                exact, fused = f"failed: {str(err).splitlines()[0][:60]}", None
            row[tool] = {"fused": counts, "check": exact, "seconds": round(seconds, 2),
                         "nodes": len(fused.graph.node) if fused is not None else None}
            extra = ""
            if tool == "graphfix-pad" and fused is not None and args.bench_runs and counts:
                result = graphfix.benchmark(fused, baseline=original, provider="cpu",
                                            runs=args.bench_runs,
                                            warmup=max(2, args.bench_runs // 5),
                                            feeds=padded[-1])
                c = result.comparison
                extra = f" cpu {c.speedup:.2f}x [{c.ci_low:.2f}, {c.ci_high:.2f}]"
                row[tool]["cpu"] = extra.strip()
            print(f"  {tool:13} {len(original.graph.node):4d} -> "
                  f"{row[tool]['nodes'] if row[tool]['nodes'] is not None else '-':>4} "
                  f"{exact:12} {seconds:6.2f}s {counts}{extra}", flush=True)
        rows.append(row)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
