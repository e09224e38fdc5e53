"""simplify: onnxsim's shape inference, constant folding and dead-code elimination, bounded.

    y = Add(Constant(a), Constant(b)) * x   =>   y = Mul(c, x), c = a + b   (onnxsim)

Decisions:
1. onnxsim runs with its own check off (``check_n=0``); graphfix validates separately.
2. Crash isolation. onnxsim is a C++ extension: it runs in a child interpreter (subprocess of
   ``sys.executable``; multiprocessing's spawn was dropped because it re-imports the caller's
   ``__main__``), the model passed through a temporary folder. An exception, abort or segfault there
   becomes ``PassResult(skipped=reason)`` with the model unchanged and the run goes on. The cost
   is one interpreter start plus importing onnxsim there: about 2.3 s per run on a 2-core CPU,
   almost all of it ``import onnxsim`` (2.1 s), against 0.05 s of folding for a small ResNet-50;
   a run that refuses growth pays it up to three times.
3. Growth policy. Folding can replicate data (Tile, Expand, broadcasts of constants to a batch,
   Range tables, ConstantOfShape) and grow a model 5-10x. The output may be at most
   ``max(max_growth * original, original + GROWTH_ALLOWANCE)`` bytes (default ``max_growth=1.5``,
   allowance 64 KiB so tiny models may gain a few folded constants). When onnxsim's output is
   larger, the pass re-runs it with ``tensor_size_threshold`` set to the growth budget and then a
   quarter of it, so that only folds producing small tensors are kept; the refused folds (new
   initializers of the bloated output that the kept output lacks) are reported with the bytes each
   would have added (``refused_fold_bytes``, warnings). If no bounded run fits, the pass skips.
   ``max_growth=None`` turns the policy off (folding still never crosses 2 GB: onnxsim's own
   threshold is capped below the protobuf limit).
4. ConstantOfShape feeding a Conv (the weights of onnx's "light" models are computed at load time
   that way) is refused by default under the same policy: the computation at load time is cheap
   and file size matters (folding grows those files from about 0.1 MB to 25-100 MB). Pass
   ``max_growth=None`` (or a large factor) to materialise them.
5. Dynamic dimensions stay dynamic. ``input_shapes={"x": [1, 3, 224, 224]}`` fixes them
   (onnxsim's ``overwrite_input_shapes``); every dimension that became static is listed in the
   warnings and counted in ``dims_fixed``.
6. ``modified`` compares nodes and initializers canonically (onnxsim renames and reorders); when
   nothing changed the input model is returned untouched. Graph input/output names are kept, or
   the pass skips.
7. Models over 2 GB or with external data are skipped: onnxsim serializes the whole model.
"""

from __future__ import annotations

import hashlib
import logging
import json
import os
import subprocess
import sys
import traceback
from typing import Any

import onnx

from graphfix.errors import PassError
from graphfix.model_io import PROTOBUF_LIMIT, iter_tensors, temporary_folder
from graphfix.registry import Pass, PassResult, register

__all__ = ["Simplify", "simplify", "DEFAULT_MAX_GROWTH", "GROWTH_ALLOWANCE"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_GROWTH = 1.5
GROWTH_ALLOWANCE = 64 * 1024
_FOLD_CAP = PROTOBUF_LIMIT // 2  # onnxsim's per-tensor folding threshold, never near 2 GB
_FAILURES = ("raise", "abort")


def _child(
    in_path: str, out_path: str, err_path: str, kwargs: dict[str, Any], fail: str | None
) -> None:
    """Runs in the spawned child: onnxsim on the model file, result or traceback to files."""
    try:
        if fail == "abort":
            os.abort()
        if fail == "raise":
            raise RuntimeError("failure injected for testing")
        import onnxsim

        model = onnx.load(in_path)
        simplified, _ = onnxsim.simplify(model, check_n=0, **kwargs)
        onnx.save(simplified, out_path)
    except BaseException:  # noqa: BLE001 - everything goes back to the parent as text
        with open(err_path, "w", encoding="utf-8") as err:
            err.write(traceback.format_exc())
        raise SystemExit(1) from None


def _child_main() -> None:
    """Entry point of the child interpreter: arguments as one JSON document in argv[1]."""
    args = json.loads(sys.argv[1])
    _child(args["in"], args["out"], args["err"], args["kwargs"], args["fail"])


def _run_isolated(
    model_bytes: bytes, kwargs: dict[str, Any], fail: str | None
) -> onnx.ModelProto | str:
    """onnxsim in a child process: the simplified model, or a one-line reason it failed."""
    with temporary_folder(prefix="graphfix-simplify-") as folder:
        in_path, out_path, err_path = (str(folder / n) for n in ("in.onnx", "out.onnx", "err.txt"))
        with open(in_path, "wb") as f:
            f.write(model_bytes)
        # A fresh interpreter rather than multiprocessing's spawn, which re-imports the caller's
        # __main__ (fails from stdin, re-runs unguarded scripts). It starts in the temporary
        # folder: ``-c`` puts the working directory first on sys.path, and a source checkout
        # there would shadow the installed package.
        payload = json.dumps(
            {"in": in_path, "out": out_path, "err": err_path, "kwargs": kwargs, "fail": fail}
        )
        code = "from graphfix.passes.simplify import _child_main; _child_main()"
        proc = subprocess.run(
            [sys.executable, "-c", code, payload],
            capture_output=True,
            check=False,
            cwd=folder,
        )
        if proc.returncode != 0 or not os.path.exists(out_path):
            if os.path.exists(err_path):
                with open(err_path, encoding="utf-8") as err:
                    lines = [ln for ln in err.read().strip().splitlines() if ln.strip()]
                return f"onnxsim failed: {lines[-1] if lines else 'unknown error'}"
            stderr = proc.stderr.decode(errors="replace").strip()
            logger.debug("simplify child stderr: %s", stderr[-2000:])
            last = stderr.splitlines()[-1] if stderr else ""
            return f"onnxsim crashed (child exit code {proc.returncode})" + (
                f": {last}" if last else ""
            )
        return onnx.load(out_path)


def _signature(graph: onnx.GraphProto) -> str:
    """Nodes and initializers, independent of order and of tensor/node names."""
    digest = hashlib.sha256()
    nodes = sorted(
        n.domain.encode() + b"\0" + n.op_type.encode() + b"\0"
        + b"\0".join(sorted(a.SerializeToString(deterministic=True) for a in n.attribute))
        for n in graph.node
    )
    inits = sorted(
        bytes(t.data_type.to_bytes(2, "little")) + str(list(t.dims)).encode()
        + hashlib.sha256(onnx.numpy_helper.to_array(t).tobytes()).digest()
        for t in graph.initializer
    )
    for key in nodes + [b"|"] + inits:
        digest.update(key)
    return digest.hexdigest()


def _static_dims(graph: onnx.GraphProto) -> dict[str, list[str]]:
    out = {}
    for vi in list(graph.input) + list(graph.output):
        out[vi.name] = [
            str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
            for d in vi.type.tensor_type.shape.dim
        ]
    return out


def _new_initializers(model: onnx.ModelProto, reference: onnx.ModelProto) -> dict[str, int]:
    """Initializers of ``model`` whose contents are not in ``reference``: name -> bytes."""
    known = {
        hashlib.sha256(onnx.numpy_helper.to_array(t).tobytes()).digest()
        for t in iter_tensors(reference.graph)
    }
    return {
        t.name: t.ByteSize()
        for t in model.graph.initializer
        if hashlib.sha256(onnx.numpy_helper.to_array(t).tobytes()).digest() not in known
    }


@register("simplify")
class Simplify(Pass):
    """Fold constants, infer shapes, drop dead code with onnxsim, refusing folds that bloat."""

    def __init__(
        self,
        *,
        max_growth: float | None = DEFAULT_MAX_GROWTH,
        input_shapes: dict[str, list[int]] | None = None,
        fail_for_testing: str | None = None,
    ) -> None:
        if max_growth is not None and (
            isinstance(max_growth, bool) or not isinstance(max_growth, (int, float))
            or max_growth < 1.0
        ):
            raise PassError(
                f"simplify: max_growth must be a number >= 1.0 or None, got {max_growth!r}"
            )
        if input_shapes is not None:
            if not isinstance(input_shapes, dict) or not all(
                isinstance(k, str) and isinstance(v, (list, tuple))
                and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in v)
                for k, v in input_shapes.items()
            ):
                raise PassError(
                    "simplify: input_shapes must map input names to lists of positive ints, "
                    f"got {input_shapes!r}"
                )
            input_shapes = {k: list(v) for k, v in input_shapes.items()}
        if fail_for_testing not in (None, *_FAILURES):
            raise PassError(
                f"simplify: fail_for_testing must be one of {_FAILURES}, got {fail_for_testing!r}"
            )
        self.max_growth = None if max_growth is None else float(max_growth)
        self.input_shapes = input_shapes
        self._fail = fail_for_testing

    def _limit(self, size: int) -> int:
        if self.max_growth is None:
            return PROTOBUF_LIMIT
        return min(PROTOBUF_LIMIT, max(int(size * self.max_growth), size + GROWTH_ALLOWANCE))

    def call(self, model: onnx.ModelProto) -> PassResult:
        if any(t.data_location == onnx.TensorProto.EXTERNAL for t in iter_tensors(model.graph)):
            reason = "external data not loaded; onnxsim needs it inline"
            return PassResult(model, False, skipped=reason)
        size = model.ByteSize()
        if size >= PROTOBUF_LIMIT:
            return PassResult(model, False, skipped="model over 2 GB: onnxsim cannot serialize it")
        if self.input_shapes:
            names = {i.name for i in model.graph.input}
            unknown = sorted(set(self.input_shapes) - names)
            if unknown:
                raise PassError(f"simplify: input_shapes names unknown inputs {unknown}")
        stats: dict[str, int] = {
            "nodes_before": len(model.graph.node),
            "initializers_before": len(model.graph.initializer),
            "bytes_before": size,
        }
        base: dict[str, Any] = {"tensor_size_threshold": f"{_FOLD_CAP}B"}
        if self.input_shapes:
            base["overwrite_input_shapes"] = self.input_shapes
        data = model.SerializeToString()
        result = _run_isolated(data, base, self._fail)
        if isinstance(result, str):
            logger.warning("simplify skipped: %s", result)
            return PassResult(model, False, warnings=[result], skipped=result)
        warnings: list[str] = []
        limit = self._limit(size)
        if result.ByteSize() > limit:
            bloated = result
            budget = max(limit - size, 1)
            for threshold in (budget, budget // 4):
                bounded = {**base, "tensor_size_threshold": f"{max(threshold, 1)}B"}
                retry = _run_isolated(data, bounded, None)
                if isinstance(retry, str):
                    return PassResult(model, False, warnings=[retry], skipped=retry)
                if retry.ByteSize() <= limit:
                    result = retry
                    break
            else:
                reason = (
                    f"every simplification grows the model past {limit} bytes "
                    f"(max_growth={self.max_growth})"
                )
                return PassResult(model, False, warnings=[reason], skipped=reason)
            kept = _new_initializers(result, model)
            refused = {k: v for k, v in _new_initializers(bloated, model).items() if k not in kept}
            stats["refused_folds"] = len(refused)
            stats["refused_fold_bytes"] = sum(refused.values())
            for name, nbytes in sorted(refused.items(), key=lambda kv: -kv[1])[:10]:
                warnings.append(
                    f"refused fold {name!r}: would add {nbytes} bytes "
                    f"(max_growth={self.max_growth})"
                )
        # Rule 6: names of graph outputs.
        if [o.name for o in result.graph.output] != [o.name for o in model.graph.output]:
            reason = "onnxsim renamed graph outputs; model kept"
            return PassResult(model, False, warnings=[reason], skipped=reason)
        before_dims, after_dims = _static_dims(model.graph), _static_dims(result.graph)
        fixed = 0
        for name, dims in before_dims.items():
            new = after_dims.get(name, dims)
            for axis, (a, b) in enumerate(zip(dims, new)):
                if not a.isdigit() and b.isdigit():
                    fixed += 1
                    warnings.append(f"dimension {axis} of {name!r} ({a}) is now static: {b}")
        stats["dims_fixed"] = fixed
        if _signature(result.graph) == _signature(model.graph) and not fixed:
            stats.update(
                nodes_after=stats["nodes_before"],
                initializers_after=stats["initializers_before"],
                bytes_after=size,
            )
            return PassResult(model, False, stats=stats, warnings=warnings)
        stats.update(
            nodes_after=len(result.graph.node),
            initializers_after=len(result.graph.initializer),
            bytes_after=result.ByteSize(),
        )
        return PassResult(result, True, stats=stats, warnings=warnings)


def simplify(model: onnx.ModelProto, **options: Any) -> onnx.ModelProto:
    """Function twin of :class:`Simplify`: returns the simplified model."""
    return Simplify(**options)(model).model
