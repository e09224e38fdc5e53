"""graphfix's CUDA paths measured on a GPU: one script, every step, results as JSON.

    python tools/gpu_check.py OUT_DIR [--models DIR] [--build] [--provider cuda|cpu]
                                      [--tune-budget S] [--only NAME ...] [--small]

Each step runs the ``graphfix`` command line as a user would (``python -m graphfix``), with a
time limit, and every result lands in ``OUT_DIR/gpu_check.json`` as soon as it is measured (a
step that fails or overruns is recorded and the next one runs). The log of every command goes to
``OUT_DIR/gpu_check.log``.

Models: the ``.onnx`` files of ``--models`` (a world corpus, ``python tools/world_corpus.py``)
among ``--only``, and with ``--build`` three exported here with torch: ``resnet18_legacy`` (the
world corpus's), ``bert_base`` and ``bert_base_dynamo`` (BERT-base's shape: 12 layers, hidden
768, 12 heads, random weights; the first by the legacy exporter at opset 17, the second by the
dynamo exporter, whose attention graphfix fuses itself; ``--small``: 2 layers), and asked for
by ``--only llama_base``, a Llama-style decoder (hidden 1024, 16 heads, 4 key/value heads,
4 layers, random weights, legacy exporter), timed at batch 1 and 128 tokens.

Steps, per model:

1. ``doctor --provider cuda`` (once);
2. ``optimize`` for the provider, then ``bench`` of the result against the original with IO
   binding (``bench`` on CUDA binds inputs and outputs), and again replayed as a CUDA graph;
3. ``profile``: placement, Memcpy nodes, CPU fallback, findings; beside it ONNX Runtime's own
   verbose log of the same session (its "Node(s) placed on" lines), to compare;
4. ``tune --budget S --out cfg.json``, then ``bench --config cfg.json --vs-config ort-defaults``
   (the re-check of tune's claim);
5. lower precision and fusion: ``optimize --precision fp16`` (and for transformers ``--fuse
   transformer`` with and without fp16), each timed against the float32 original and graphfix's
   float32 output, and the anchors beside them: onnxconverter-common's
   ``convert_float_to_float16(keep_io_types=True)`` and ONNX Runtime's transformers optimizer
   given the heads by hand (``optimize_model(..., use_gpu=True)``, float32 and then float16).
   Each result's worst output error against the float32 original run on the CPU, in units of
   parity's float16 tolerance (``|d| / (1e-2 * RMS(ref) + 1e-2 * |ref|)``); the ``*_forced``
   variants keep float16 whatever the speed gate says (``--no-speed-gate``), so that a true
   float16 run on the GPU checks convert-precision's estimate (``estimates`` beside them);
   the ``*_batch32`` variants have the speed gate judge at batch 32 (``--bench-shape``).

``--provider cpu`` runs the same steps on the CPU (a dry run of the script: CUDA-only steps are
skipped).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BATCH, TOKENS = 1, 128
BIG_BATCH = 32  # where float16's tensor cores have work enough to pay
TRANSFORMER_HEADS = {"bert_base": (12, 768), "bert_base_dynamo": (12, 768),
                     "bert_legacy": (4, 128),
                     "distilbert_legacy": (4, 128), "gpt2_legacy": (4, 128),
                     "llama_base": (16, 1024), "llama_legacy": (4, 128),
                     "llama_dynamo": (4, 128), "qwen2_dynamo": (4, 128),
                     # the world corpus's other exports graphfix fuses itself (--models WORLD)
                     "bert_dynamo": (4, 128), "gpt2_dynamo": (4, 128), "vit_hf_dynamo": (4, 128),
                     "t5_encoder_dynamo": (4, 128), "whisper_encoder_legacy": (4, 64)}
RESULTS: dict[str, Any] = {}


def _write(out: Path) -> None:
    (out / "gpu_check.json").write_text(json.dumps(RESULTS, indent=1, default=str))


def _log(out: Path, text: str) -> None:
    print(text, flush=True)
    with (out / "gpu_check.log").open("a") as handle:
        handle.write(text + "\n")


def _cli(out: Path, args: list[str], timeout: float) -> dict[str, Any]:
    """``python -m graphfix ARGS``: exit code, seconds, stdout parsed as JSON where it is."""
    command = [sys.executable, "-m", "graphfix", *args]
    _log(out, "$ graphfix " + " ".join(args))
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              env=_env())
    except subprocess.TimeoutExpired as err:
        _log(out, f"  timed out after {timeout:.0f} s\n{(err.stderr or '')[-2000:]}")
        return {"rc": "timeout", "seconds": timeout}
    seconds = time.perf_counter() - started
    _log(out, f"  rc {done.returncode} in {seconds:.1f} s")
    if done.stderr.strip():
        _log(out, "  stderr: " + done.stderr.strip()[-3000:])
    result: dict[str, Any] = {"rc": done.returncode, "seconds": round(seconds, 2)}
    try:
        result["json"] = json.loads(done.stdout)
    except ValueError:
        result["stdout"] = done.stdout[-3000:]
        if done.stdout.strip():
            _log(out, "  stdout: " + done.stdout.strip()[-3000:])
    return result


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def _shapes(model: Path) -> list[str]:
    """``--shape`` arguments fixing every dynamic dimension: batch 1, and 128 tokens for a
    text model's token inputs (int64, rank 2)."""
    import onnx

    graph = onnx.load(model, load_external_data=False).graph
    initializers = {t.name for t in graph.initializer}
    args: list[str] = []
    for value in graph.input:
        if value.name in initializers:
            continue
        dims = value.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            continue
        if value.type.tensor_type.elem_type == onnx.TensorProto.INT64 and len(dims) == 2:
            sizes = [BATCH, TOKENS]
        else:
            sizes = [d.dim_value if d.HasField("dim_value") else BATCH for d in dims]
        args += ["--shape", f"{value.name}:" + "x".join(map(str, sizes))]
    return args


def _bench_summary(result: dict[str, Any]) -> dict[str, Any]:
    data = result.get("json")
    if not isinstance(data, dict):
        return result
    keep = {k: data.get(k) for k in ("provider", "session_providers", "speedup", "ci_low",
                                     "ci_high", "verdict", "cuda_graph", "warnings")}
    for label in ("candidate", "baseline"):
        stats = data.get(label) or {}
        keep[f"{label}_ms"] = stats.get("median_ms")
    keep["placement"] = {k: (v or {}).get("nodes") for k, v in (data.get("placement") or {}).items()}
    return {"rc": result["rc"], "seconds": result["seconds"], **keep}


def _ort_verbose_placement(model: Path, provider: str, out: Path, name: str) -> dict[str, Any]:
    """ONNX Runtime's own account of placement: its verbose log's "placed on" lines."""
    code = (
        "import onnxruntime as ort, sys\n"
        "try:\n    ort.preload_dlls()\nexcept Exception:\n    pass\n"
        "o = ort.SessionOptions(); o.log_severity_level = 0; o.log_verbosity_level = 1\n"
        f"p = {['CUDAExecutionProvider', 'CPUExecutionProvider'] if provider == 'cuda' else ['CPUExecutionProvider']!r}\n"
        f"s = ort.InferenceSession({str(model)!r}, o, providers=p)\n"
        "print('providers', s.get_providers())\n")
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=300, env=_env())
    except subprocess.TimeoutExpired:
        return {"rc": "timeout"}
    text = done.stdout + done.stderr
    placed = {m.group(1): int(m.group(2)) for m in re.finditer(
        r"placed on \[(\w+)\]\. Number of nodes: (\d+)", text)}
    lines = [line for line in text.splitlines()
             if "placed on" in line or "Memcpy" in line or "fallback" in line.lower()
             or "might be a performance" in line or "not supported" in line.lower()]
    with (out / "ort_verbose_placement.txt").open("a") as handle:
        handle.write(f"=== {name}\n" + "\n".join(lines[:400]) + "\n")
    return {"rc": done.returncode, "placed": placed, "lines": len(lines)}


def _profile_summary(result: dict[str, Any]) -> dict[str, Any]:
    data = result.get("json")
    if not isinstance(data, dict):
        return result
    model = data.get("model") or {}
    accounting = model.get("accounting") or {}
    return {"rc": result["rc"], "seconds": result["seconds"], "provider": data.get("provider"),
            "placement": (model.get("placement") or {}).get("nodes"),
            "accounting": {k: accounting.get(k) for k in (
                "latency_ms", "profiled_ms", "nodes_ms", "accounted", "glue_share",
                "compute_share", "memcpy_nodes", "memcpy_bytes", "cpu_nodes", "cpu_ms")},
            "top_op_types": [(o["op_type"], o["count"], round(o["ms"], 4), o["providers"])
                             for o in (model.get("op_types") or [])[:8]],
            "findings": [{k: f.get(k) for k in ("kind", "title", "fix", "measured", "speedup")
                          if k in f} for f in data.get("findings") or []],
            "warnings": data.get("warnings")}


def _tune_summary(result: dict[str, Any]) -> dict[str, Any]:
    data = result.get("json")
    if not isinstance(data, dict):
        return result
    return {"rc": result["rc"], "seconds": result["seconds"], "winner": data.get("winner"),
            "kept_default": data.get("kept_default"), "reason": data.get("reason"),
            "aa": data.get("aa"), "calls_per_block": data.get("calls_per_block"),
            "candidates": [{k: c.get(k) for k in ("name", "status", "median_ms", "speedup",
                                                   "reason")}
                           for c in data.get("candidates") or []],
            "warnings": data.get("warnings")}


def _optimize_summary(result: dict[str, Any], report: Path) -> dict[str, Any]:
    summary = {"rc": result["rc"], "seconds": result["seconds"]}
    if report.exists():
        data = json.loads(report.read_text())
        summary["nodes"] = [(data.get("input") or {}).get("nodes"),
                            (data.get("output") or {}).get("nodes")]
        summary["ops_after"] = (data.get("output") or {}).get("op_histogram")
        summary["passes"] = [{k: p.get(k) for k in ("name", "modified", "skipped", "seconds",
                                                     "nodes_before", "nodes_after")}
                             for p in data.get("passes") or []]
        for entry in data.get("passes") or []:
            if entry.get("name") == "convert-precision" and entry.get("stats"):
                summary["precision_stats"] = entry["stats"]
        parity = data.get("parity") or {}
        summary["parity"] = {k: parity.get(k) for k in ("passed", "problem", "provider", "worst")}
        for key in ("speed_gate", "left_out", "warnings", "error", "written"):
            summary[key] = data.get(key)
    return summary


def _error_units(original: Path, candidate: Path, provider: str,
                 shapes: dict[str, list[int]]) -> dict[str, Any]:
    """The candidate's worst output error against the float32 original run on the CPU, in
    parity's float16 tolerance units, the candidate run on ``provider``, on parity's inputs at
    the timed ``shapes`` with attention masks of padding (ones, then zeros), as tokenizers make
    them."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    from graphfix.passes._measuring import make_feeds, tolerance_used

    model = onnx.load(original)
    feeds = make_feeds(model, seed=0, runs=None, input_shapes=shapes or None)
    for feed in feeds:
        for key, value in feed.items():
            if "mask" in key and value.ndim == 2:
                padded = np.ones_like(value)
                padded[:, value.shape[1] * 3 // 4:] = 0
                feed[key] = padded
    reference = ort.InferenceSession(str(original), providers=["CPUExecutionProvider"])
    providers = (["CUDAExecutionProvider", "CPUExecutionProvider"] if provider == "cuda"
                 else ["CPUExecutionProvider"])
    session = ort.InferenceSession(str(candidate), providers=providers)
    types = {i.name: i.type for i in session.get_inputs()}
    worst = 0.0
    for feed in feeds:
        expected = reference.run(None, feed)
        cast = {k: (v.astype(np.float16) if types.get(k) == "tensor(float16)" else v)
                for k, v in feed.items()}
        got = session.run(None, cast)
        for ref, cand in zip(expected, got):
            ref = np.asarray(ref)
            if ref.dtype.kind != "f":
                continue
            cand = np.asarray(cand).astype(ref.dtype)
            if np.isnan(cand).any() and not np.isnan(ref).any():
                return {"error": float("inf"), "note": "NaN"}
            worst = max(worst, float(tolerance_used(ref, cand, 1e-2, 1e-2)))
    return {"error": round(worst, 4), "ok": worst <= 1.0}


def _anchors(name: str, model: Path, work: Path, which: list[str] | None) -> dict[str, Path]:
    """The anchors' float16 and fused models (``which``: these only), written to ``work``."""
    import onnx

    made: dict[str, Path] = {}
    if which is None or "cc-fp16" in which:
        try:
            from onnxconverter_common import float16

            lowered = float16.convert_float_to_float16(onnx.load(model), keep_io_types=True)
            made["cc-fp16"] = work / f"{name}.cc_fp16.onnx"
            onnx.save(lowered, made["cc-fp16"], save_as_external_data=True,
                      location=made["cc-fp16"].name + ".data")
        except Exception as err:  # noqa: BLE001 - an anchor that fails is recorded, not fatal
            RESULTS.setdefault(name, {})["cc-fp16 failed"] = f"{type(err).__name__}: {err}"[:300]
    if name in TRANSFORMER_HEADS and (which is None or "ort-fused" in which):
        heads, hidden = TRANSFORMER_HEADS[name]
        kind = "gpt2" if name.startswith("gpt2") else "bert"
        try:
            from onnxruntime.transformers.optimizer import optimize_model

            fused = optimize_model(str(model), model_type=kind, num_heads=heads,
                                   hidden_size=hidden, use_gpu=True)
            made["ort-fused"] = work / f"{name}.ort_fused.onnx"
            fused.save_model_to_file(str(made["ort-fused"]))
            fused.convert_float_to_float16(keep_io_types=True)
            made["ort-fused-fp16"] = work / f"{name}.ort_fused_fp16.onnx"
            fused.save_model_to_file(str(made["ort-fused-fp16"]))
        except Exception as err:  # noqa: BLE001
            RESULTS.setdefault(name, {})["ort-fused failed"] = f"{type(err).__name__}: {err}"[:300]
    return made


def _build(models: Path, small: bool, out: Path, only: list[str] | None) -> None:
    """resnet18_legacy (the world corpus's), bert_base and bert_base_dynamo, exported here."""
    started = time.perf_counter()
    if only is None or "resnet18_legacy" in only:
        done = subprocess.run([sys.executable, str(ROOT / "tools" / "world_corpus.py"), str(models),
                               "--only", "resnet18_legacy"], capture_output=True,
                              text=True, timeout=600, env=_env())
        _log(out, f"built resnet18_legacy: rc {done.returncode} in "
                  f"{time.perf_counter() - started:.1f} s {done.stderr[-1500:]}")
    for name, dynamo in (("bert_base", False), ("bert_base_dynamo", True)):
        if only is not None and name not in only:
            continue
        started = time.perf_counter()
        try:
            _export_bert(models / f"{name}.onnx", layers=2 if small else 12, dynamo=dynamo)
            _log(out, f"built {name} in {time.perf_counter() - started:.1f} s")
        except Exception as err:  # noqa: BLE001
            _log(out, f"{name} failed: {type(err).__name__}: {err}")
    if only is not None and "llama_base" in only:
        started = time.perf_counter()
        try:
            _export_llama(models / "llama_base.onnx", layers=2 if small else 4)
            _log(out, f"built llama_base in {time.perf_counter() - started:.1f} s")
        except Exception as err:  # noqa: BLE001
            _log(out, f"llama_base failed: {type(err).__name__}: {err}")


def _export_llama(path: Path, layers: int) -> None:
    """A Llama-style decoder of a small deployed size (hidden 1024, 16 heads, 4 key/value
    heads, rotary embeddings), random weights, by the legacy exporter at opset 17."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816,
                         num_hidden_layers=layers, num_attention_heads=16,
                         num_key_value_heads=4, max_position_embeddings=2048, use_cache=False,
                         attn_implementation="eager")
    model = LlamaForCausalLM(config).eval()

    class Wrapped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):  # noqa: ANN001
            return self.model(input_ids=input_ids, attention_mask=attention_mask).logits

    ids = torch.randint(0, config.vocab_size, (BATCH, TOKENS))
    axes = {n: {0: "batch", 1: "sequence"} for n in ("input_ids", "attention_mask", "logits")}
    with torch.no_grad():
        torch.onnx.export(Wrapped(), (ids, torch.ones_like(ids)), str(path),
                          input_names=["input_ids", "attention_mask"], output_names=["logits"],
                          dynamic_axes=axes, opset_version=17, dynamo=False)


def _export_bert(path: Path, layers: int, dynamo: bool = False) -> None:
    """BERT-base's shape, random weights; ``dynamo``: torch.onnx's dynamo exporter (whose
    attention ORT's optimizer does not match and graphfix fuses itself)."""
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(num_hidden_layers=layers, attn_implementation="eager")
    model = BertModel(config).eval()

    class Wrapped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: ANN001
            out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids)
            return out.last_hidden_state, out.pooler_output

    ids = torch.randint(0, config.vocab_size, (BATCH, TOKENS))
    mask = torch.ones_like(ids)
    axes = {n: {0: "batch", 1: "sequence"} for n in ("input_ids", "attention_mask",
                                                      "token_type_ids")}
    axes["last_hidden_state"] = {0: "batch", 1: "sequence"}
    axes["pooler_output"] = {0: "batch"}
    with torch.no_grad():
        torch.onnx.export(Wrapped(), (ids, mask, torch.zeros_like(ids)), str(path),
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["last_hidden_state", "pooler_output"],
                          dynamic_axes=axes, opset_version=None if dynamo else 17,
                          dynamo=dynamo)


def _context(name: str, model: Path, work: Path, provider: str, variants: list[str] | None,
             anchors: list[str] | None) -> dict[str, Any]:
    return {"variants": variants, "anchors": anchors, "name": name, "model": model, "work": work, "provider": provider,
            "row": RESULTS.setdefault(name, {}), "shapes": _shapes(model),
            "base": ["--provider", provider], "optimized": work / f"{name}.gf.onnx",
            "shape_map": {a.split(":")[0]: [int(d) for d in a.split(":")[1].split("x")]
                          for a in _shapes(model)[1::2]}}


BENCH = ["--runs", "200", "--warmup", "20", "--json"]


def step_optimize(c: dict[str, Any], out: Path, budget: float) -> None:
    """optimize for the provider; bench the result against the original (IO binding on CUDA),
    and replayed as a CUDA graph."""
    name, model, row, optimized = c["name"], c["model"], c["row"], c["optimized"]
    report = c["work"] / f"{name}.gf.json"
    row["optimize"] = _optimize_summary(_cli(out, ["optimize", str(model), str(optimized),
                                                   *c["base"], *c["shapes"], "--report",
                                                   str(report)], 900), report)
    _write(out)
    if not optimized.exists():
        return
    row["bench_optimized"] = _bench_summary(_cli(out, ["bench", str(optimized), "--vs",
                                                       str(model), *c["base"], *c["shapes"],
                                                       *BENCH], 600))
    if c["provider"] == "cuda":
        # graphfix's output replayed as a CUDA graph, against itself under ORT's defaults
        row["bench_optimized_cuda_graph"] = _bench_summary(_cli(
            out, ["bench", str(optimized), *c["base"], *c["shapes"], *BENCH, "--cuda-graph",
                  "--vs-config", "ort-defaults"], 600))


def step_profile(c: dict[str, Any], out: Path, budget: float) -> None:
    """profile, and ORT's verbose log of the same session beside it."""
    c["row"]["profile"] = _profile_summary(_cli(out, ["profile", str(c["model"]), *c["base"],
                                                      *c["shapes"], "--json", "--runs", "50"],
                                                600))
    c["row"]["ort_verbose"] = _ort_verbose_placement(c["model"], c["provider"], out, c["name"])


def step_tune(c: dict[str, Any], out: Path, budget: float) -> None:
    """tune, then the re-check of its claim with bench --config."""
    config = c["work"] / f"{c['name']}.tune.json"
    c["row"]["tune"] = _tune_summary(_cli(out, ["tune", str(c["model"]), *c["base"],
                                                *c["shapes"], "--budget", str(budget), "--out",
                                                str(config), "--json"], budget * 3 + 120))
    if config.exists():
        c["row"]["tune_recheck"] = _bench_summary(_cli(
            out, ["bench", str(c["model"]), *c["base"], *c["shapes"], "--config", str(config),
                  "--vs-config", "ort-defaults", *BENCH], 600))


def step_lower(c: dict[str, Any], out: Path, budget: float) -> None:
    """float16 and fusion by graphfix and by the anchors, each timed and its error measured."""
    name, model, row, work = c["name"], c["model"], c["row"], c["work"]
    # *_forced: float16 kept whatever the gate says, so that its error on the GPU (a true
    # float16 run) can be set against convert-precision's estimate
    variants = [("fp16", ["--precision", "fp16"]),
                ("fp16_forced", ["--precision", "fp16", "--no-speed-gate"])]
    if name in TRANSFORMER_HEADS:
        variants += [("fuse", ["--fuse", "transformer"]),
                     ("fuse_fp16", ["--fuse", "transformer", "--precision", "fp16"]),
                     ("fuse_fp16_forced", ["--fuse", "transformer", "--precision", "fp16",
                                           "--no-speed-gate"])]
    # the gate judged at batch 32 (--bench-shape), the written model's sizes left dynamic
    batched = [arg for tensor, dims in c["shape_map"].items()
               for arg in ("--bench-shape", f"{tensor}:" + "x".join(
                   map(str, [BIG_BATCH, *dims[1:]])))]
    c["batched"] = ["--shape" if arg == "--bench-shape" else arg for arg in batched]
    variants += [(f"{label}_batch{BIG_BATCH}", flags + batched) for label, flags in variants
                 if label in ("fp16", "fuse", "fuse_fp16")]
    variants = [v for v in variants if not c["variants"] or v[0] in c["variants"]]
    made: dict[str, Path] = {}
    for label, flags in variants:
        target = work / f"{name}.{label}.onnx"
        rep = work / f"{name}.{label}.json"
        pinned = [] if "--bench-shape" in flags else c["shapes"]
        row[f"optimize_{label}"] = _optimize_summary(_cli(
            out, ["optimize", str(model), str(target), *c["base"], *pinned, *flags,
                  "--report", str(rep)], 900), rep)
        if target.exists():
            made[f"graphfix-{label}"] = target
            stats = row[f"optimize_{label}"].get("precision_stats") or {}
            if "estimated_error_permille" in stats:
                row.setdefault("estimates", {})[f"graphfix-{label}"] = \
                    stats["estimated_error_permille"] / 1000
        _write(out)
    made.update(_anchors(name, model, work, c["anchors"]))
    for label, path in made.items():
        entry: dict[str, Any] = {}
        try:
            entry.update(_error_units(model, path, c["provider"], c["shape_map"]))
        except Exception as err:  # noqa: BLE001
            entry["error_failed"] = f"{type(err).__name__}: {err}"[:300]
        sizes = c["batched"] if "_batch" in label else c["shapes"]
        entry["vs_original"] = _bench_summary(_cli(out, ["bench", str(path), "--vs", str(model),
                                                         *c["base"], *sizes, *BENCH], 600))
        if c["optimized"].exists() and "_batch" not in label:  # (its sizes are fixed)
            entry["vs_graphfix_fp32"] = _bench_summary(_cli(
                out, ["bench", str(path), "--vs", str(c["optimized"]), *c["base"],
                      *sizes, *BENCH], 600))
        row.setdefault("lowered", {})[label] = entry
        _write(out)
    for ours, theirs in (("graphfix-fuse", "ort-fused"), ("graphfix-fuse_fp16", "ort-fused-fp16")):
        if ours in made and theirs in made:
            row.setdefault("head_to_head", {})[f"{ours} vs {theirs}"] = _bench_summary(_cli(
                out, ["bench", str(made[ours]), "--vs", str(made[theirs]), *c["base"],
                      *c["shapes"], *BENCH], 600))
            _write(out)
    if c["provider"] == "cuda":
        for label in ("graphfix-fuse_fp16", "graphfix-fuse"):
            if label in made:
                row.setdefault("cuda_graph", {})[label] = _bench_summary(_cli(
                    out, ["bench", str(made[label]), *c["base"], *c["shapes"], *BENCH,
                          "--cuda-graph", "--vs-config", "ort-defaults"], 600))
                _write(out)


STEPS = [step_optimize, step_profile, step_tune, step_lower]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--models", type=Path)
    parser.add_argument("--build", action="store_true")
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--provider", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--tune-budget", type=float, default=45.0)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--steps", nargs="*", choices=[s.__name__[5:] for s in STEPS],
                        help="run only these steps (default: all, in order)")
    parser.add_argument("--variants", nargs="*",
                        choices=["fp16", "fp16_forced", "fuse", "fuse_fp16", "fuse_fp16_forced",
                                 f"fp16_batch{BIG_BATCH}", f"fuse_batch{BIG_BATCH}",
                                 f"fuse_fp16_batch{BIG_BATCH}"],
                        help="graphfix's lowered variants to make (default: all)")
    parser.add_argument("--anchors", nargs="*", choices=["cc-fp16", "ort-fused"],
                        help="the anchors to make (default: all)")
    parser.add_argument("--work", type=Path, help="folder for the models written on the way "
                        "(default: OUT_DIR's sibling OUT_DIR_work)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or args.out.parent / (args.out.name + "_work")
    work.mkdir(parents=True, exist_ok=True)
    models = args.models or work
    started = time.perf_counter()
    import onnxruntime as ort

    RESULTS["environment"] = {"onnxruntime": ort.__version__,
                              "providers": ort.get_available_providers(),
                              "python": sys.version.split()[0]}
    try:
        import torch

        RESULTS["environment"]["torch"] = torch.__version__
        if torch.cuda.is_available():
            RESULTS["environment"]["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    RESULTS["doctor"] = _cli(args.out, ["doctor", "--provider", args.provider, "--json"], 300)
    _write(args.out)
    if args.build:
        _build(work, args.small, args.out, args.only)
    names = args.only or ["resnet18_legacy", "bert_base", "bert_base_dynamo", "bert_legacy"]
    contexts = []
    for name in names:
        path = next((p for p in (work / f"{name}.onnx", models / f"{name}.onnx") if p.exists()),
                    None)
        if path is None:
            _log(args.out, f"{name}: missing")
            continue
        contexts.append(_context(name, path, work, args.provider, args.variants, args.anchors))
    for step in [s for s in STEPS if not args.steps or s.__name__[5:] in args.steps]:
        for context in contexts:
            _log(args.out, f"=== {step.__name__} {context['name']} "
                           f"({time.perf_counter() - started:.0f} s in)")
            try:
                step(context, args.out, args.tune_budget)
            except Exception as err:  # noqa: BLE001 - the next step still runs
                context["row"][step.__name__ + " failed"] = f"{type(err).__name__}: {err}"[:500]
            _write(args.out)
    RESULTS["seconds"] = round(time.perf_counter() - started, 1)
    _write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
