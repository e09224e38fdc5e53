"""The graphfix command line: each command is one library call plus formatting.

Options default to None and are dropped when unset, so every default lives in the library.
A :class:`GraphfixError` becomes one line on stderr and exit code 1; usage errors exit 2.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

import graphfix
from graphfix import model_io, pipeline, registry
from graphfix.errors import GraphfixError, UnknownPassError
from graphfix.report import format_summary, model_facts

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
    graphfix passes                       the passes, in default order
    """


@cli.command()
@click.argument("src", type=click.Path(dir_okay=True, path_type=Path))
@click.argument("dst", type=click.Path(path_type=Path))
@click.option("--passes", "passes_", metavar="A,B", help="Run exactly these passes, in this order.")
@click.option("--skip", multiple=True, metavar="NAME", help="Leave out a pass (repeatable).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the full report as JSON.")
@click.option("--external-data/--no-external-data", default=None,
              help="Write weights to DST.data beside the model (default: when the input had "
                   "external data or the model is over 2 GB).")
@click.option("--no-verify", is_flag=True,
              help="Do not check numerical parity (the report says it was off).")
@_verbosity
def optimize(
    src: Path,
    dst: Path,
    passes_: str | None,
    skip: tuple[str, ...],
    report_path: str | None,
    external_data: bool | None,
    no_verify: bool,
    verbose: int,
    quiet: bool,
) -> None:
    """Optimize SRC and write the result to DST.

    Runs the default pass pipeline (see `graphfix passes`), checks that the result computes the
    same outputs as SRC, and writes DST atomically. SRC is never modified; nothing is written
    when a pass or the parity check fails.

    \b
    Examples:
      graphfix optimize model.onnx model.opt.onnx
      graphfix optimize model.onnx out.onnx --skip simplify --report report.json
      graphfix optimize model.onnx out.onnx --passes remove-initializer-inputs
    """
    _configure_logging(verbose, quiet)
    kwargs: dict[str, Any] = {"skip": _split_names(skip), "progress": _progress(not quiet)}
    if passes_ is not None:
        kwargs["passes"] = _split_names(passes_)
    if no_verify:
        kwargs["verify"] = False
    result = pipeline.optimize_file(src, dst, external_data=external_data, **kwargs)
    if report_path:
        _write_json(report_path, result.report.to_dict())
    if not quiet:
        click.echo(format_summary(result.report))


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
    if as_json:
        data = {"model": str(model), **facts.__dict__, "warnings": warnings}
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
    initializer_names = {init.name for init in loaded.model.graph.initializer}
    real_inputs = [t for t in facts.inputs if t.name not in initializer_names]
    for kind, tensors in (("input", real_inputs), ("output", facts.outputs)):
        for t in tensors:
            shape = "?" if t.shape is None else "[" + ", ".join(
                "?" if d is None else str(d) for d in t.shape) + "]"
            click.echo(f"  {kind:6} {t.name}: {t.dtype}{shape}")
    ops = ", ".join(f"{op} {n}" for op, n in sorted(facts.op_histogram.items(),
                                                      key=lambda kv: (-kv[1], kv[0])))
    click.echo(f"  ops: {ops or 'none'}")
    click.echo(f"  Transposes: {facts.transposes}")
    click.echo(f"  initializers listed as inputs: {facts.initializer_inputs}"
               + ("  -> remove-initializer-inputs would drop them"
                  if facts.initializer_inputs else ""))
    if facts.dynamic_dims:
        click.echo(f"  dynamic dimensions: {', '.join(facts.dynamic_dims)}")
    for warning in warnings:
        click.echo(f"  warning: {warning}")


def main() -> None:
    cli(prog_name="graphfix")


if __name__ == "__main__":
    main()
