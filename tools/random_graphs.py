"""Random graphs through the pipeline, at scale: how many pass, how many break parity (and which
pass broke it), how many crash.

    python tools/random_graphs.py --examples 5000
    python tools/random_graphs.py --examples 200 --full --save-failures failures/

Each example is a random valid model from the strategy of ``models/random_models.py``, run
through ``graphfix.optimize`` (which checks parity itself) and then checked for the contract:
same graph inputs and outputs (names, dtypes, shapes), accepted by ONNX's checker. Without
``--full`` the pipeline is the default one without ``simplify`` (onnxsim costs an interpreter
start, about 0.4 s, per call); with ``--full`` it is ``graphfix.DEFAULT_PASSES``.

Outcomes: ``passed``; ``parity`` (ParityError; the guilty pass when one pass alone reproduces
it); ``contract`` (the optimized model changed the signature or fails ONNX's checker); ``crash``
(anything else raised); ``unrunnable`` (ONNX Runtime cannot load or run the original model
itself, so there is nothing to compare with). Passes that skipped themselves are counted by
reason. Failing models are written to ``--save-failures DIR`` as ``NNNNN-<outcome>.onnx`` with
the error beside them in ``NNNNN-<outcome>.txt``, and models on which a pass skipped itself as
``NNNNN-skip.onnx``. Exit status 1 when anything failed.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import logging
import sys
import time
import traceback
from pathlib import Path

import onnx
from hypothesis import HealthCheck, Phase, given, seed, settings

import graphfix
from graphfix.errors import ParityError, ValidationInputError



def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=1000, help="how many random models")
    parser.add_argument("--full", action="store_true",
                        help="the whole default pipeline, simplify included (slow)")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed")
    parser.add_argument("--max-steps", type=int, default=14, help="random nodes per graph, at most")
    parser.add_argument("--save-failures", type=Path, metavar="DIR",
                        help="write each failing model and its error here")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.ERROR)  # pass skips are counted below, not printed
    from graphfix.models import random_models as strategy
    passes = None if args.full else strategy.FAST_PASSES
    # With simplify, one onnxsim worker for every example (a run otherwise starts its own).
    from graphfix.passes.simplify import OnnxsimWorker, shared_worker
    if args.save_failures:
        args.save_failures.mkdir(parents=True, exist_ok=True)

    counts: collections.Counter[str] = collections.Counter()
    guilty: collections.Counter[str] = collections.Counter()
    reasons: collections.Counter[str] = collections.Counter()
    skips: collections.Counter[str] = collections.Counter()
    changed: collections.Counter[str] = collections.Counter()  # models each pass changed
    removed: collections.Counter[str] = collections.Counter()  # nodes each pass removed
    failures: list[tuple[int, str, str]] = []
    started = time.perf_counter()

    def record(index: int, model: onnx.ModelProto, outcome: str, detail: str) -> None:
        counts[outcome] += 1
        reasons[f"{outcome}: {detail[:160]}"] += 1
        failures.append((index, outcome, detail))
        if args.save_failures:
            stem = args.save_failures / f"{index:05d}-{outcome}"
            onnx.save(model, f"{stem}.onnx")
            Path(f"{stem}.txt").write_text(
                f"{detail}\n\n{onnx.printer.to_text(model)}\n", encoding="utf-8"
            )

    @seed(args.seed)
    @settings(max_examples=args.examples, deadline=None, database=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(strategy.random_models(max_steps=args.max_steps))
    def run(model: onnx.ModelProto) -> None:
        index = counts["examples"]
        counts["examples"] += 1
        original = onnx.ModelProto()
        original.CopyFrom(model)
        try:
            result = graphfix.optimize(model, passes=passes)
        except ParityError as error:
            name = getattr(error, "guilty_pass", None) or "no single pass"
            guilty[name] += 1
            record(index, original, "parity", f"[{name}] {error}")
            return
        except ValidationInputError as error:
            # ORT cannot load or run the original itself: nothing to prove, no pass to blame.
            record(index, original, "unrunnable", _first_line(error))
            return
        except Exception as error:  # noqa: BLE001 - every failure is counted, the run goes on
            record(index, original, "crash", _first_line(error) + "\n" + traceback.format_exc())
            return
        for report in result.report.passes:
            changed[report.name] += bool(report.modified)
            removed[report.name] += max(report.nodes_before - report.nodes_after, 0)
        skipped = [f"{r.name}: {r.skipped}" for r in result.report.passes if r.skipped]
        for reason in skipped:
            skips[reason[:160]] += 1
        if skipped and args.save_failures:  # not failures, but worth a look
            stem = args.save_failures / f"{index:05d}-skip"
            onnx.save(original, f"{stem}.onnx")
            Path(f"{stem}.txt").write_text("\n".join(skipped) + "\n", encoding="utf-8")
        optimized = result.model
        if strategy.signature(optimized) != strategy.signature(original):
            record(index, original, "contract",
                   f"signature changed: {strategy.signature(original)} -> "
                   f"{strategy.signature(optimized)}")
            return
        try:
            onnx.checker.check_model(optimized, full_check=True)
        except Exception as error:  # noqa: BLE001
            record(index, original, "contract", f"checker: {_first_line(error)}")
            return
        counts["passed"] += 1
        if counts["examples"] % max(1, min(500, args.examples // 10)) == 0:
            print(f"  {counts['examples']} examples, {time.perf_counter() - started:.0f} s",
                  file=sys.stderr, flush=True)

    with contextlib.ExitStack() as resources:
        if args.full:
            resources.enter_context(shared_worker(resources.enter_context(OnnxsimWorker())))
        run()
    seconds = time.perf_counter() - started
    pipeline = ", ".join(passes or graphfix.DEFAULT_PASSES)
    print(f"pipeline: {pipeline}")
    print(f"examples: {counts['examples']}  ({seconds:.0f} s, seed {args.seed})")
    print(f"passed: {counts['passed']}")
    print(f"parity failures: {counts['parity']}"
          + (f"  ({', '.join(f'{k}: {v}' for k, v in guilty.most_common())})" if guilty else ""))
    print(f"contract failures: {counts['contract']}")
    print(f"crashes: {counts['crash']}")
    if counts["unrunnable"]:
        print(f"originals ONNX Runtime cannot run: {counts['unrunnable']}")
    if changed:
        print("models each pass changed (nodes it removed):  "
              + ", ".join(f"{name}: {count} ({removed[name]})" for name, count in changed.items()))
    if skips:
        print("passes that skipped themselves:")
        for reason, count in skips.most_common():
            print(f"  {count:6d}  {reason}")
    if failures:
        print("failures:")
        for reason, count in reasons.most_common():
            print(f"  {count:6d}  {reason}")
        where = f" (saved in {args.save_failures})" if args.save_failures else ""
        print(f"failing examples{where}: {', '.join(str(i) for i, _, _ in failures[:50])}"
              + (" ..." if len(failures) > 50 else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
