"""The graphfix command line: each command is one library call plus formatting.

Options default to None and are dropped when unset, so every default lives in the library.
A :class:`GraphfixError` becomes one line on stderr and exit code 1; usage errors exit 2.
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import onnx

import graphfix
from graphfix import model_io, pipeline, registry
from graphfix.errors import GraphfixError, ParityError, UnknownPassError
from graphfix.report import format_bench, format_doctor, format_parity, format_summary, model_facts

__all__ = ["main", "cli"]

logger = logging.getLogger("graphfix")


class _Group(click.Group):
    """Turns graphfix errors into one clear line and exit code 1 (no traceback)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except UnknownPassError as err:
            raise click.UsageError(str(err), ctx) from None
        except GraphfixError as err:
            click.secho(f"error: {err}", fg="red", err=True)
            ctx.exit(1)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)


class _WarningFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        level = record.levelname.lower()
        return f"{level}: {record.getMessage()}" if record.levelno >= logging.WARNING else (
            f"{record.name}: {record.getMessage()}"
        )


def _configure_logging(verbose: int, quiet: bool) -> None:
    level = logging.ERROR if quiet else (logging.DEBUG if verbose > 1 else
                                         logging.INFO if verbose == 1 else logging.WARNING)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_WarningFormatter())
    root = logging.getLogger("graphfix")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def _verbosity(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("-q", "--quiet", is_flag=True, help="Print errors only.")(func)
    func = click.option(
        "-v", "--verbose", count=True, help="More detail: -v shows each pass, -vv debug logs."
    )(func)
    return func


def _split_names(values: tuple[str, ...] | str | None) -> list[str]:
    if not values:
        return []
    if isinstance(values, str):
        values = (values,)
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


def _parse_shape(value: str) -> tuple[str, list[int]]:
    """``name:1x3x224x224`` -> ("name", [1, 3, 224, 224])."""
    name, sep, dims = value.rpartition(":")
    try:
        if not sep or not name:
            raise ValueError
        return name, [int(d) for d in dims.lower().split("x")]
    except ValueError:
        raise click.BadParameter(
            f"{value!r}: expected NAME:DIMS such as input:1x3x224x224"
        ) from None


def _progress(enabled: bool) -> pipeline.Progress | None:
    if not enabled or not sys.stderr.isatty():
        return None

    def show(name: str, index: int, total: int) -> None:
        if name:
            click.echo(f"\r[{index + 1}/{total}] {name} ...".ljust(60), err=True, nl=False)
        else:
            click.echo("\r".ljust(61) + "\r", err=True, nl=False)

    return show


def _write_json(path: str, data: dict[str, Any]) -> None:
    model_io.write_text(Path(path), json.dumps(data, indent=2, default=str) + "\n")


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(graphfix.__version__, "--version", prog_name="graphfix")
def cli() -> None:
    """graphfix: make ONNX models faster before deployment, and prove they still compute the same.

    \b
    graphfix optimize in.onnx out.onnx    rewrite, check parity, write
    graphfix inspect model.onnx           what is in a model, what graphfix would change
    graphfix check ref.onnx cand.onnx     numerical parity of two models
    graphfix bench model.onnx --vs other  latency and speedup under ORT defaults
    graphfix doctor                       which providers really load, and why not
    graphfix passes                       the passes, in default order
    """


def _parity_options(
    inputs: str | None,
    runs: int | None,
    seed: int | None,
    shapes: dict[str, list[int]],
    atol: float | None,
    rtol: float | None,
    tol: tuple[str, ...],
    progress: bool,
) -> dict[str, Any]:
    """check_parity keyword arguments from the shared command-line options (unset ones left out)."""
    from graphfix.validate.parity import parse_tolerance

    options: dict[str, Any] = {}
    tolerances: dict[str, tuple[float | None, float | None]] = {}
    if atol is not None or rtol is not None:
        tolerances["*"] = (atol, rtol)
    for text in tol:
        try:
            name, value = parse_tolerance(text)
        except ValueError as err:
            raise click.BadParameter(str(err), param_hint="--tol") from None
        tolerances[name] = value
    for key, value in (("inputs", inputs), ("runs", runs), ("seed", seed),
                       ("input_shapes", shapes or None), ("tolerances", tolerances or None),
                       ("progress", _bar("parity") if progress else None)):
        if value is not None:
            options[key] = value
    return options


def _parity_flags(func: Callable[..., Any]) -> Callable[..., Any]:
    """--inputs, --runs, --seed, --atol, --rtol, --tol: how parity is checked."""
    for decorator in reversed([
        click.option("--inputs", type=click.Path(exists=True), metavar="PATH",
                     help="Real inputs: a .npz of arrays by input name, or a folder of "
                          "input_N.pb files (or of test_data_set_* folders)."),
        click.option("--runs", "parity_runs", type=click.IntRange(min=1), metavar="N",
                     help="Sets of generated inputs (default: 2 when the model has dynamic "
                          "dimensions, at two sizes; else 1)."),
        click.option("--seed", type=int, help="Seed of the generated inputs (default 0)."),
        click.option("--atol", type=float, metavar="X",
                     help="Absolute tolerance, as a fraction of each output's RMS "
                          "(default per dtype: float32 1e-4)."),
        click.option("--rtol", type=float, metavar="X",
                     help="Relative tolerance (default per dtype: float32 1e-3)."),
        click.option("--tol", multiple=True, metavar="NAME:ATOL:RTOL",
                     help="Tolerance of one output (repeatable)."),
    ]):
        func = decorator(func)
    return func


def _shape_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--input-shape", "--shape", "input_shape", multiple=True, metavar="NAME:DIMS",
        help="Fix an input's shape, e.g. input_ids:1x128 (repeatable).",
    )(func)


def _bar(label: str) -> Callable[[str, int, int], None] | None:
    """A one-line progress display on an interactive stderr."""
    if not sys.stderr.isatty():
        return None

    def show(_: str, done: int, total: int) -> None:
        if done >= total:
            click.echo("\r".ljust(61) + "\r", err=True, nl=False)
        else:
            click.echo(f"\r{label} {done}/{total} ...".ljust(60), err=True, nl=False)

    return show


class _RecordArgs(click.Command):
    """Keeps the command's own arguments so an error can print the command to run next."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["graphfix.argv"] = list(args)
        return super().parse_args(ctx, args)


@cli.command(cls=_RecordArgs)
@click.argument("src", type=click.Path(dir_okay=True, path_type=Path))
@click.argument("dst", type=click.Path(path_type=Path))
@click.option("--passes", "passes_", metavar="A,B", help="Run exactly these passes, in this order.")
@click.option("--skip", multiple=True, metavar="NAME", help="Leave out a pass (repeatable).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the full report as JSON.")
@click.option("--external-data/--no-external-data", default=None,
              help="Write weights to DST.data beside the model (default: when the input had "
                   "external data or the model is over 2 GB).")
@click.option("--ort-level", type=click.Choice(["basic", "extended", "all"]),
              help="ort-offline level. basic (default) keeps standard ONNX ops, portable to "
                   "every provider; extended/all add ORT contrib ops tied to --provider.")
@click.option("--provider", type=click.Choice(["auto", "cpu", "cuda"]),
              help="Target provider of ort-offline (cpu by default) and of --bench "
                   "(auto: CUDA when it loads).")
@click.option("--max-growth", type=float, metavar="X",
              help="Largest output/input ratio of tensor bytes that constant folding may "
                   "reach (default 1.5); "
                   "0 allows any growth.")
@click.option("--keep-reduction-order", is_flag=True,
              help="eliminate-transposes keeps one Transpose before each sum-like reduction "
                   "(a global pool, a Flatten before a Dense layer) so outputs stay "
                   "bit-identical; by default it is pushed through, which reorders the float "
                   "sum (last-bit differences).")
@click.option("--inputs-as-nchw", multiple=True, metavar="A,B",
              help="Declare these channels-last graph inputs ([N,H,W,C]) channels-first "
                   "([N,C,H,W]), so the Transpose after them goes too. Changes the model's "
                   "signature: callers must feed NCHW. Recorded in the model's metadata "
                   "(graphfix.layout); parity feeds each model its own layout.")
@click.option("--outputs-as-nchw", multiple=True, metavar="A,B",
              help="The same for graph outputs.")
@_shape_option
@click.option("--no-verify", is_flag=True,
              help="Do not check numerical parity (the report says it was off).")
@_parity_flags
@click.option("--bench", is_flag=True,
              help="Measure the speedup over the original under ORT defaults.")
@click.option("--require-speedup", type=float, metavar="R",
              help="Write the model only when the speedup's confidence interval clears R "
                   "(implies --bench).")
@_verbosity
@click.pass_context
def optimize(
    ctx: click.Context,
    src: Path,
    dst: Path,
    passes_: str | None,
    skip: tuple[str, ...],
    report_path: str | None,
    external_data: bool | None,
    ort_level: str | None,
    provider: str | None,
    max_growth: float | None,
    keep_reduction_order: bool,
    inputs_as_nchw: tuple[str, ...],
    outputs_as_nchw: tuple[str, ...],
    input_shape: tuple[str, ...],
    no_verify: bool,
    inputs: str | None,
    parity_runs: int | None,
    seed: int | None,
    atol: float | None,
    rtol: float | None,
    tol: tuple[str, ...],
    bench: bool,
    require_speedup: float | None,
    verbose: int,
    quiet: bool,
) -> None:
    """Optimize SRC and write the result to DST.

    Runs the default pass pipeline (see `graphfix passes`), checks that the result computes the
    same outputs as SRC on generated (or --inputs) data, and writes DST atomically. SRC is never
    modified; nothing is written when a pass, the parity check or --require-speedup fails. When
    parity fails, graphfix re-runs the passes one at a time and names the one that broke it.

    \b
    Examples:
      graphfix optimize model.onnx model.opt.onnx
      graphfix optimize model.onnx out.onnx --skip simplify --report report.json
      graphfix optimize bert.onnx out.onnx --input-shape input_ids:1x128 --tol logits:1e-3:1e-2
      graphfix optimize model.onnx out.onnx --bench --require-speedup 1.05
      graphfix optimize keras.onnx out.onnx --inputs-as-nchw input
    """
    _configure_logging(verbose, quiet)
    shapes = dict(_parse_shape(value) for value in input_shape)
    kwargs: dict[str, Any] = {"skip": _split_names(skip), "progress": _progress(not quiet)}
    if passes_ is not None:
        kwargs["passes"] = _split_names(passes_)
    options: dict[str, dict[str, Any]] = {}
    wanted = kwargs.get("passes", list(pipeline.DEFAULT_PASSES))

    def set_option(pass_name: str, key: str, value: Any) -> None:
        if pass_name in wanted and pass_name not in kwargs["skip"]:
            options.setdefault(pass_name, {})[key] = value

    if ort_level is not None:
        set_option("ort-offline", "level", ort_level)
    if provider in ("cpu", "cuda"):
        set_option("ort-offline", "provider", provider)
    if max_growth is not None:
        for name in ("ort-offline", "simplify"):
            set_option(name, "max_growth", max_growth or None)
    if keep_reduction_order:
        set_option("eliminate-transposes", "reorder_reductions", False)
    for key, names in (("inputs_as_nchw", _split_names(inputs_as_nchw)),
                       ("outputs_as_nchw", _split_names(outputs_as_nchw))):
        if names:
            set_option("eliminate-transposes", key, names)
    if shapes:
        # Shapes of SRC's inputs; the pipeline moves them for an input a pass declares NCHW.
        set_option("simplify", "input_shapes", shapes)
    if options:
        kwargs["options"] = options
    if no_verify:
        kwargs["verify"] = False
    else:
        parity = _parity_options(inputs, parity_runs, seed, shapes, atol, rtol, tol, not quiet)
        if parity:
            kwargs["parity_options"] = parity
    if bench or require_speedup is not None:
        kwargs["bench"] = True
        bench_options: dict[str, Any] = {"progress": _bar("bench") if not quiet else None}
        if provider is not None:
            bench_options["provider"] = provider
        if shapes:
            bench_options["input_shapes"] = shapes
        kwargs["bench_options"] = {k: v for k, v in bench_options.items() if v is not None}
        if require_speedup is not None:
            kwargs["require_speedup"] = require_speedup
    try:
        result = pipeline.optimize_file(src, dst, external_data=external_data,
                                        report=report_path, **kwargs)
    except ParityError as err:
        if err.guilty_pass:
            command = ["graphfix", "optimize", *ctx.meta.get("graphfix.argv", [src, dst])]
            err.hint = ("to leave it out: "
                        f"{shlex.join(map(str, command + ['--skip', err.guilty_pass]))}")
        raise
    if not quiet:
        click.echo(format_summary(result.report))


@cli.command()
@click.argument("reference", type=click.Path(path_type=Path))
@click.argument("candidate", type=click.Path(path_type=Path))
@_parity_flags
@_shape_option
@click.option("--provider", type=click.Choice(["cpu", "cuda"]),
              help="Provider both models run on (default cpu, optimizations off).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def check(
    reference: Path,
    candidate: Path,
    inputs: str | None,
    parity_runs: int | None,
    seed: int | None,
    atol: float | None,
    rtol: float | None,
    tol: tuple[str, ...],
    input_shape: tuple[str, ...],
    provider: str | None,
    as_json: bool,
) -> None:
    """Check that CANDIDATE computes what REFERENCE computes.

    Both run on ONNX Runtime with its optimizations off, on the same inputs (generated from
    REFERENCE's signature, or --inputs); outputs are compared by name. Exit 0 when every output
    is within tolerance, 1 when not.

    \b
    Tolerance: |cand - ref| <= atol * RMS(ref) + rtol * |ref|, per element. Defaults by dtype:
    float32 1e-4/1e-3, float16 1e-2/1e-2, bfloat16 5e-2/5e-2, float64 1e-9/1e-7;
    integers, booleans and strings exactly.
    """
    shapes = dict(_parse_shape(value) for value in input_shape)
    options = _parity_options(inputs, parity_runs, seed, shapes, atol, rtol, tol, not as_json)
    if provider is not None:
        options["provider"] = provider
    result = graphfix.check_parity(model_io.load(reference), model_io.load(candidate), **options)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        click.echo(format_parity(result.to_dict()))
    sys.exit(0 if result.passed else 1)


@cli.command(cls=_RecordArgs)
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--vs", "baseline", type=click.Path(path_type=Path), metavar="OTHER",
              help="Compare with OTHER (the speedup is OTHER's time over MODEL's).")
@click.option("--provider", type=click.Choice(["auto", "cpu", "cuda"]),
              help="auto (default): CUDA when it really loads, else CPU.")
@click.option("--threads", type=click.IntRange(min=1), help="Intra-op threads (default: "
              "physical cores).")
@click.option("--warmup", type=click.IntRange(min=0), help="Warm-up rounds (default 10).")
@click.option("--runs", type=click.IntRange(min=1), help="Timed rounds (default 50).")
@_shape_option
@click.option("--inputs", type=click.Path(exists=True), metavar="PATH",
              help="Real inputs (.npz or a folder of input_N.pb); the first set is used.")
@click.option("--cuda-graph", is_flag=True, help="Replay the model as a CUDA graph.")
@click.option("--offline", is_flag=True,
              help="Also time the models with ORT's optimizations off, and session creation.")
@click.option("--dynamic-block-base", type=click.IntRange(min=1), metavar="N",
              help="ORT's session.dynamic_block_base (CPU): smaller work blocks, steadier "
              "latency on a busy machine (ORT suggests 4).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench(
    model: Path,
    baseline: Path | None,
    provider: str | None,
    threads: int | None,
    warmup: int | None,
    runs: int | None,
    input_shape: tuple[str, ...],
    inputs: str | None,
    cuda_graph: bool,
    offline: bool,
    dynamic_block_base: int | None,
    as_json: bool,
) -> None:
    """Measure MODEL's latency under ONNX Runtime's defaults, and its speedup over OTHER.

    Rounds of the models alternate after warm-up; the speedup comes with a bootstrap
    confidence interval, and the verdict (faster, slower, no significant difference) follows
    from the interval. On CUDA inputs and outputs stay on the device (IO binding), so the timed
    call holds no copies; nodes that fell back to the CPU provider are reported.

    \b
    Examples:
      graphfix bench model.opt.onnx --vs model.onnx
      graphfix bench model.onnx --provider cuda --cuda-graph --json
    """
    from graphfix.validate.feeds import load_feeds

    target = model_io.load(model)
    other = model_io.load(baseline) if baseline is not None else None
    options: dict[str, Any] = {
        "provider": provider, "threads": threads, "warmup": warmup, "runs": runs,
        "cuda_graph": cuda_graph or None, "offline": offline or None,
        "dynamic_block_base": dynamic_block_base,
        "input_shapes": dict(_parse_shape(v) for v in input_shape) or None,
        "feeds": load_feeds(inputs, target)[0] if inputs else None,
        "progress": None if as_json else _bar("bench"),
    }
    result = graphfix.benchmark(
        target, baseline=other, **{k: v for k, v in options.items() if v is not None}
    )
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        click.echo(format_bench(result.to_dict(), model.name, baseline.name if baseline else None))


@cli.command()
@click.option("--provider", type=click.Choice(["cpu", "cuda", "tensorrt"]),
              help="Exit 1 unless this provider is usable.")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
def doctor(provider: str | None, as_json: bool) -> None:
    """Check the environment: versions, which ONNX Runtime providers really load, GPUs,
    CUDA/cuDNN libraries, and each problem with its fix."""
    from graphfix.doctor import diagnose

    found = diagnose(provider=provider)
    if as_json:
        click.echo(json.dumps(found.to_dict(), indent=2, default=str))
    else:
        click.echo(format_doctor(found.to_dict()))
    sys.exit(0 if found.ok else 1)


@cli.command(name="passes")
def list_passes() -> None:
    """List the registered passes, default pipeline first, in order."""
    names = list(dict.fromkeys(pipeline.DEFAULT_PASSES))
    others = [n for n in registry.names() if n not in names]
    width = max(len(n) for n in names + others)
    click.echo("default pipeline: " + " -> ".join(pipeline.DEFAULT_PASSES))
    for name in names + others:
        marker = "" if name in names else "  (not in the default pipeline)"
        click.echo(f"  {name.ljust(width)}  {registry.summary(name)}{marker}")


@cli.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the facts as JSON.")
def inspect(model: Path, as_json: bool) -> None:
    """Show what is in MODEL and what graphfix would change.

    IR and opset versions, producer, size, inputs and outputs with dtypes and (dynamic) shapes,
    op histogram, Transposes, initializers listed as inputs, external data, subgraphs.
    """
    loaded = model_io.load_with_info(model)
    facts = model_facts(loaded.model, size_bytes=loaded.size_bytes,
                        external_data=loaded.external_data)
    warnings = model_io.check_model(loaded.model)
    initializer_names = {init.name for init in loaded.model.graph.initializer}
    would = _would_change(loaded.model)
    if as_json:
        data = {"model": str(model), **facts.__dict__, "warnings": warnings,
                "would_change": would}
        data["inputs"] = [t.__dict__ for t in facts.inputs]
        data["outputs"] = [t.__dict__ for t in facts.outputs]
        click.echo(json.dumps(data, indent=2))
        return
    opsets = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in facts.opsets.items())
    click.echo(f"{model}")
    click.echo(f"  IR {facts.ir_version}, opsets: {opsets}, producer: {facts.producer or '?'}")
    click.echo(f"  size: {facts.size_bytes} bytes"
               f"{' (external data)' if facts.external_data else ''}, "
               f"{facts.nodes} nodes, {facts.initializers} initializers, "
               f"{facts.subgraphs} subgraphs")
    real_inputs = [t for t in facts.inputs if t.name not in initializer_names]
    for kind, tensors in (("input", real_inputs), ("output", facts.outputs)):
        for t in tensors:
            shape = "?" if t.shape is None else "[" + ", ".join(
                "?" if d is None else str(d) for d in t.shape) + "]"
            note = (f" ({t.unknown_written_as} read as an unknown size)"
                    if t.unknown_written_as is not None else "")
            click.echo(f"  {kind:6} {t.name}: {t.dtype}{shape}{note}")
    ops = ", ".join(f"{op} {n}" for op, n in sorted(facts.op_histogram.items(),
                                                      key=lambda kv: (-kv[1], kv[0])))
    click.echo(f"  ops: {ops or 'none'}")
    click.echo(f"  Transposes: {facts.transposes}")
    click.echo(f"  initializers listed as inputs: {facts.initializer_inputs}")
    if facts.dynamic_dims:
        click.echo(f"  dynamic dimensions: {', '.join(facts.dynamic_dims)}")
    for warning in warnings:
        click.echo(f"  warning: {warning}")
    click.echo("graphfix would (structural passes; run `graphfix optimize` for the rest):")
    for name, change in would.items():
        click.echo(f"  {name}: {change}")


def _would_change(model: onnx.ModelProto) -> dict[str, str]:
    """What the passes that need no runtime would do to ``model`` (rewritten in place)."""
    changes = {}
    for name in ("remove-initializer-inputs", "eliminate-transposes"):
        before = model_facts(model)
        try:
            result = registry.get(name)()(model)
        except Exception as err:  # noqa: BLE001 - inspect reports, it does not fail
            changes[name] = f"fails here ({type(err).__name__}: {err})"
            continue
        model = result.model
        after = model_facts(model)
        if result.skipped:
            changes[name] = f"skips: {result.skipped}"
        elif not result.modified:
            changes[name] = "nothing to do"
        elif name == "remove-initializer-inputs":
            changes[name] = (f"drop {before.initializer_inputs} initializer(s) from the inputs, "
                             "so ORT can fold and fuse them")
        else:
            changes[name] = (f"Transposes {before.transposes} -> {after.transposes}, "
                             f"nodes {before.nodes} -> {after.nodes}")
    return changes


def main() -> None:
    cli(prog_name="graphfix")


if __name__ == "__main__":
    main()
