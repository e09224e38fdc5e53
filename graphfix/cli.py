"""The graphfix command line: each command is one library call plus formatting.

Options default to None and are dropped when unset, so every default lives in the library.
A :class:`GraphfixError` becomes one line on stderr and exit code 1; usage errors exit 2.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import math
import os
import shlex
import signal
import sys
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import click

import graphfix
from graphfix import model_io, pipeline, registry, startup
from graphfix.doctor import diagnose
from graphfix.errors import GraphfixError, ParityError, UnknownPassError, shown
from graphfix.options import (
    BenchOptions,
    ConflictingOptionsError,
    OptionError,
    ParityOptions,
    Tolerance,
    parse_tolerance,
)
from graphfix.feeds import check_inputs_agree
from graphfix.validate.tune import KNOBS
from graphfix.doctor import format_doctor
from graphfix.inspection import format_inspection
from graphfix.report import format_summary
from graphfix.validate.bench import format_bench
from graphfix.validate.parity import format_parity
from graphfix.validate.profile import format_profile
from graphfix.validate.timing import thread_limit
from graphfix.validate.tune import format_tune

__all__ = ["main", "cli"]

logger = logging.getLogger("graphfix")


class _Terminated(BaseException):
    """SIGTERM or SIGHUP (a dropped ssh session), turned into an exception so that every
    cleanup runs as for Ctrl-C. A BaseException, as KeyboardInterrupt is: no ``except
    Exception`` (a pass that failed, a session ONNX Runtime refused) may take it for an error
    of its own."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


# The signals that end a run as SIGTERM does, with the line each prints.
_ENDING = {signal.SIGTERM: "terminated"}
if hasattr(signal, "SIGHUP"):
    _ENDING[signal.SIGHUP] = "hung up"

# The longest error line printed; the whole message goes to the report (--report) and to -v.
ERROR_LINE_LIMIT = 300


def error_line(err: GraphfixError, limit: int = ERROR_LINE_LIMIT, *,
               more: str = "-v") -> str:
    """``error: <message> (hint: ...)`` in at most ``limit`` characters. A longer message is
    cut at a word and the line says where the rest is (``more``); the hint, what to do next
    (a command to run), is kept whole while it leaves the message room for a few words."""
    whole = f"error: {err}"
    if len(whole) <= limit:
        return whole
    hint = str(GraphfixError("", hint=err.hint)).removeprefix(" (hint: ").removesuffix(")")
    tail = f" [more: {more}]"
    room = limit - len("error: ...") - len(tail)
    if hint and len(hint) + len(" (hint: )") > room - 20:
        keep = max(room // 2 - len(" (hint: )") - 3, 20)
        hint = hint[:keep].rsplit(" ", 1)[0] + "..."
    tail += f" (hint: {hint})" if hint else ""
    message = str(GraphfixError(str(err.args[0]) if err.args else ""))
    room = limit - len("error: ...") - len(tail)
    cut = message[:room]
    cut = cut.rsplit(" ", 1)[0] if " " in cut[room // 2:] else cut
    return f"error: {cut}...{tail}"


def _signal_behind(err: BaseException) -> BaseException | None:
    """The KeyboardInterrupt or ending signal an exception was raised from, if any."""
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, (KeyboardInterrupt, _Terminated)):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


class _Group(click.Group):
    """Turns graphfix errors into one clear line and exit code 1 (no traceback); conflicting
    options are usage errors (exit 2); signals end the run with their exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        previous = {signum: signal.getsignal(signum) for signum in (*_ENDING, signal.SIGINT)}
        for signum in _ENDING:
            signal.signal(signum, _on_ending_signal)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        ctx.meta["graphfix.committed"] = model_io.committed_mark()
        try:
            return super().invoke(ctx)
        except (UnknownPassError, ConflictingOptionsError) as err:
            raise click.UsageError(str(err), ctx) from None
        except GraphfixError as err:
            more = "--report, -v" if ctx.invoked_subcommand == "optimize" else "-v"
            line = error_line(err, more=more)
            if len(line) < len(f"error: {err}"):
                logger.info("the whole error: %s", err)
            click.secho(line, fg="red", err=True)
            _json_error(ctx, err)
            ctx.exit(1)
        except MemoryError as err:  # a limit below what the model needs (ulimit, container)
            logger.debug("out of memory", exc_info=True)
            detail = str(err).strip().splitlines()[0] if str(err).strip() else ""
            memory = GraphfixError(
                "out of memory" + (f" ({detail})" if detail else ""),
                hint="fix smaller dynamic sizes with --input-shape, give --inputs, or run "
                "where more memory is available")
            click.secho(error_line(memory, more="-v"), fg="red", err=True)
            _json_error(ctx, memory)
            ctx.exit(1)
        except KeyboardInterrupt:
            _end(ctx, "interrupted", 130)
        except _Terminated as ended:
            _end(ctx, _ENDING.get(ended.signum, "terminated"), 128 + ended.signum)
        except ImportError as err:
            # Ctrl-C while a native module initializes: ONNX Runtime's import raises
            # "initialization failed" from the KeyboardInterrupt
            signalled = _signal_behind(err)
            if signalled is None:
                raise
            if isinstance(signalled, _Terminated):
                _end(ctx, _ENDING.get(signalled.signum, "terminated"), 128 + signalled.signum)
            _end(ctx, "interrupted", 130)
        finally:
            try:  # a signal may land while the handlers go back: it ends the run as above
                for signum, handler in previous.items():
                    signal.signal(signum, handler)
            except KeyboardInterrupt:
                _end(ctx, "interrupted", 130)
            except _Terminated as ended:
                _end(ctx, _ENDING.get(ended.signum, "terminated"), 128 + ended.signum)


def _json_error(ctx: click.Context, err: GraphfixError) -> None:
    """Where the command was asked for JSON (``--json``), the error as JSON on standard output
    too (``{"error": message, "hint": hint}``), so that a script reading it gets JSON whatever
    happened; the exit code says it failed."""
    if "--json" not in ctx.meta.get("graphfix.argv", ()):
        return
    message = str(err.args[0]) if err.args else str(err)
    with contextlib.suppress(OSError, ValueError):
        click.echo(json.dumps({"error": message, "hint": err.hint}, indent=2))


# Set by main(): this process is the graphfix command, not a caller's (a test's) process.
_COMMAND: list[bool] = []


def _end(ctx: click.Context, line: str, code: int) -> None:
    """End a run a signal stopped, its cleanup done. The command exits at once: a thread
    still inside ONNX Runtime (the parity check's reference side), or one the signal left
    waiting on an import lock the main thread held, must not keep it alive after its line.
    Files the run had written in full by then are named: they are complete, and kept."""
    written = model_io.committed_since(ctx.meta.get("graphfix.committed", 0))
    if written:
        line += (f" after writing {', '.join(shown(str(p)) for p in written[:4])}"
                 f"{f' and {len(written) - 4} more' if len(written) > 4 else ''}"
                 " (complete, kept)")
    click.echo(line, err=True)
    if _COMMAND:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
    ctx.exit(code)


def _on_ending_signal(signum: int, frame: Any) -> None:
    raise _Terminated(signum)


class _Formatter(logging.Formatter):
    """``warning: ...`` lines of at most :data:`ERROR_LINE_LIMIT` characters (whole with -v),
    ``graphfix.module: ...`` for the rest."""

    def __init__(self, whole: bool) -> None:
        super().__init__()
        self.whole = whole

    def format(self, record: logging.LogRecord) -> str:
        if record.levelno >= logging.WARNING:
            line = " ".join(f"{record.levelname.lower()}: {record.getMessage()}".split("\n"))
            if not self.whole and len(line) > ERROR_LINE_LIMIT:
                line = line[:ERROR_LINE_LIMIT - 24].rsplit(" ", 1)[0] + "... [more: -v]"
            return line
        return f"{record.name}: {record.getMessage()}"


def _configure_logging(verbose: int, quiet: bool) -> None:
    level = logging.ERROR if quiet else (logging.DEBUG if verbose > 1 else
                                         logging.INFO if verbose == 1 else logging.WARNING)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(whole=verbose > 0))
    root = logging.getLogger("graphfix")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
    import onnxruntime

    # ONNX Runtime's own log (its environment's, not a session's) only at -vv.
    onnxruntime.set_default_logger_severity(1 if verbose > 1 else 4)


class _HeldWarnings(logging.Filter):
    """Holds the warnings a run logs while it works: the summary lists those its report
    kept, so each is said once, and a line from a run the pipeline discarded (the passes
    again without what broke parity, a rewrite the speed gate dropped) not at all.
    :meth:`release` says the others (a data file replaced); a run that fails says them all."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING:
            self.held.append(record)
            return False
        return True

    def release(self, handler: logging.Handler, said: Collection[str] = ()) -> None:
        handler.removeFilter(self)
        shown: set[str] = set()
        for record in self.held:
            message = record.getMessage()
            if message not in said and message not in shown:
                shown.add(message)
                handler.handle(record)
        self.held.clear()


@contextlib.contextmanager
def _holding_warnings(hold: bool) -> Any:
    """Hold the warnings logged inside the block (:class:`_HeldWarnings`); yields a list
    the block fills with what its result says itself. An interrupt drops them."""
    said: list[str] = []
    if not hold:
        yield said
        return
    handler, = logging.getLogger("graphfix").handlers or [None]
    if handler is None:
        yield said
        return
    held = _HeldWarnings()
    handler.addFilter(held)
    try:
        yield said
    except Exception:  # a refusal: what the run said explains it, before its error line
        held.release(handler)
        raise
    except BaseException:  # an interrupt: its one line
        handler.removeFilter(held)
        raise
    held.release(handler, said)


# ---------------------------------------------------------------- option types
class _Shape(click.ParamType):
    """``name:1x3x224x224`` -> ("name", [1, 3, 224, 224])."""

    name = "NAME:DIMS"

    def convert(self, value: Any, param: Any, ctx: Any) -> tuple[str, list[int]]:
        if isinstance(value, tuple):
            return value
        name, sep, dims = str(value).rpartition(":")
        try:
            sizes = [int(d) for d in dims.lower().split("x")] if sep and name else []
        except ValueError:
            sizes = []
        if not sizes or any(d < 1 for d in sizes):
            self.fail(f"{value!r}: expected NAME:DIMS with sizes >= 1, such as "
                      "input:1x3x224x224", param, ctx)
        return name, sizes


class _Tolerance(click.ParamType):
    """``name:atol:rtol`` (name ``*`` for every output)."""

    name = "NAME:ATOL:RTOL"

    def convert(self, value: Any, param: Any, ctx: Any) -> tuple[str, Tolerance]:
        if isinstance(value, tuple):
            return value
        try:
            return parse_tolerance(value)
        except OptionError as err:
            self.fail(str(err), param, ctx)


class _Number(click.ParamType):
    """A finite float >= ``low`` (> ``low`` when ``strict``), or exactly 0 when ``zero`` says
    what 0 means."""

    name = "X"

    def __init__(self, low: float, zero: bool = False, *, strict: bool = False) -> None:
        self.low, self.zero, self.strict = low, zero, strict

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        low = number <= self.low if self.strict else number < self.low
        if not math.isfinite(number) or (low and not (self.zero and number == 0)):
            allowed = (f"a number {'>' if self.strict else '>='} {self.low:g}"
                       + (" (or 0)" if self.zero else ""))
            self.fail(f"{value!r}: expected {allowed}", param, ctx)
        return number


def _emit(text: str, *, product: bool) -> None:
    """Print ``text`` on stdout. A reader that went away (a broken pipe: ``| head``) is not an
    error: the rest is dropped. Any other failure (a full disk, a closed stream) is one error
    line when the text is the command's product (``inspect``), and a warning when the command's
    product is elsewhere (the file ``optimize`` wrote): it cannot turn that success into a
    failure."""
    if sys.stdout is None or "stdout" in startup.CLOSED:  # closed before the run (>&-)
        if product:
            raise GraphfixError("cannot print the result: standard output is closed",
                                hint="send it to a file or a pipe")
        return
    try:
        click.echo(text)
        sys.stdout.flush()
    except OSError as err:
        _drop_stdout()
        if err.errno == errno.EPIPE:
            return
        if product:
            raise GraphfixError(f"cannot print the result on standard output "
                                f"({err.strerror or err})",
                                hint="send it to a file or a pipe that has room") from None
        logger.warning("the summary was not printed (standard output: %s)",
                       err.strerror or err)


def _drop_stdout() -> None:
    """Send what is left on stdout to the null device, so that the interpreter's last flush
    cannot fail once more."""
    _drop_stream(sys.stdout)


def _drop_stream(stream: Any) -> None:
    """Point the file descriptor under ``stream`` at the null device."""
    try:
        fd = stream.fileno()
    except (AttributeError, ValueError, OSError):  # not a real file (a test's capture)
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)


def _names(values: tuple[str, ...] | None) -> list[str]:
    return [n.strip() for value in values or () for n in value.split(",") if n.strip()]


def _given(**values: Any) -> dict[str, Any]:
    """The options the user set (None and empty left out: the library's defaults apply)."""
    return {k: v for k, v in values.items() if v is not None and v != () and v != []}


def _parity(flags: dict[str, Any]) -> ParityOptions:
    tolerances: dict[str, Tolerance] = {}
    if flags["atol"] is not None or flags["rtol"] is not None:
        tolerances["*"] = (flags["atol"], flags["rtol"])
    tolerances.update(dict(flags["tol"]))
    return ParityOptions(**_given(inputs=flags["inputs"], runs=flags["parity_runs"],
                                  seed=flags["seed"], tolerances=tolerances or None))


# ---------------------------------------------------------------- progress
def _on_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError, OSError):  # no usable stderr
        return False


def _progress(enabled: bool) -> Callable[..., None] | None:
    """Progress on stderr: a line that updates itself on a terminal, a line per step (passes,
    parity input sets, writing) elsewhere; each with the time since the run started."""
    if not enabled:
        return None
    started = time.perf_counter()
    terminal = _on_terminal()
    last: list[str] = ["", ""]  # the text shown last, and its step

    def show(step: str, done: int, total: int, unit: str = "") -> None:
        elapsed = time.perf_counter() - started
        if not step or done >= total:
            if terminal:
                click.echo("\r".ljust(71) + "\r", err=True, nl=False)
            return
        if step == "parity":  # counted in runs: the reference's, then the candidate's
            sets = max(total // 2, 1)
            text = (f"parity, {'reference on ' if done < sets and total > 1 else ''}input set "
                    f"{done % sets + 1}/{sets}")
        elif unit:  # a measurement: its calls counted on a terminal, their number elsewhere
            text = f"{step} {done + 1}/{total} {unit}" if terminal else f"{step}, {total} {unit}"
        else:
            text = f"[{done + 1}/{total}] {step}"
        if terminal:
            click.echo(f"\r{text} ... {elapsed:.1f}s".ljust(70), err=True, nl=False)
        elif text != last[0] and (step == "parity" or unit or step != last[1]):
            # elsewhere a step counted in rounds (the speed gate's timing) is one line
            click.echo(f"graphfix: {text} ({elapsed:.1f}s)", err=True)
        last[0], last[1] = text, step

    return show


def _verbose(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("-v", "--verbose", count=True,
                        help="More detail: whole messages; -vv debug logs.")(func)


def _by_step(show: Callable[..., None] | None) -> Callable[[str, int, int], None] | None:
    """Progress for long measurements, counted in rounds: each update on a terminal, else one
    line per step."""
    if show is None:
        return None
    terminal = _on_terminal()
    last: list[str] = [""]

    def step(name: str, done: int, total: int) -> None:
        if terminal or name != last[0] or done >= total:
            show(name, done if terminal or name == last[0] else 0, total, "rounds")
        last[0] = name

    return step


def _verbosity(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("-q", "--quiet", is_flag=True, help="Print errors only.")(func)
    return click.option("-v", "--verbose", count=True,
                        help="More detail: -v shows each pass, -vv debug logs.")(func)


def _parity_flags(func: Callable[..., Any]) -> Callable[..., Any]:
    """--inputs, --runs, --seed, --atol, --rtol, --tol: how parity is checked."""
    for decorator in reversed([
        click.option("--inputs", type=click.Path(exists=True), metavar="PATH",
                     help="Real inputs: a .npz of arrays by input name, or a folder of "
                          "input_N.pb files (or of test_data_set_* folders)."),
        click.option("--runs", "parity_runs", type=click.IntRange(min=1), metavar="N",
                     help="Sets of generated inputs (default: 2 when the model has dynamic "
                          "dimensions, at two sizes; else 1; three times that when it "
                          "quantizes or rounds values it computes)."),
        click.option("--seed", type=click.IntRange(min=0),
                     help="Seed of the generated inputs (default 0)."),
        click.option("--atol", type=_Number(0.0), metavar="X",
                     help="Absolute tolerance, as a fraction of each output's RMS "
                          "(default per dtype: float32 1e-4)."),
        click.option("--rtol", type=_Number(0.0), metavar="X",
                     help="Relative tolerance (default per dtype: float32 1e-3)."),
        click.option("--tol", type=_Tolerance(), multiple=True,
                     help="Tolerance of one output (repeatable)."),
    ]):
        func = decorator(func)
    return func


def _shape_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--input-shape", "--shape", "input_shape", type=_Shape(), multiple=True,
        help="Fix an input's shape, e.g. input_ids:1x128 (repeatable).",
    )(func)


class _RecordArgs(click.Command):
    """Keeps the command's own arguments so an error can print the command to run next, and
    refuses options that contradict each other (click keeps the last of a repeated option
    without a word)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)  # click consumes ``args``
        ctx.meta["graphfix.argv"] = given
        rest = super().parse_args(ctx, args)
        _check_conflicts(ctx, self, given)
        return rest


# Options given by name more than once, each name with one value (NAME:...): the values given
# to one name must agree.
_NAMED = {"input_shape": "--input-shape", "bench_shape": "--bench-shape", "tol": "--tol"}
# The options that only say how parity is checked.
_PARITY_FLAGS = ("inputs", "parity_runs", "seed", "atol", "rtol", "tol")


def _occurrences(command: click.Command, args: list[str]) -> dict[str, list[str | None]]:
    """Each option parameter given in ``args``: the values given to it, in order (None for a
    flag), a flag pair's off switch as ``"off"``."""
    spelled: dict[str, tuple[click.Option, str | None]] = {}
    for param in command.params:
        if isinstance(param, click.Option):
            for opt in param.opts:
                spelled[opt] = (param, None)
            for opt in param.secondary_opts:
                spelled[opt] = (param, "off")
    found: dict[str, list[str | None]] = {}
    position = 0
    while position < len(args):
        token = args[position]
        position += 1
        if token == "--":
            break
        name, _, inline = token.partition("=") if token.startswith("--") else (token, "", "")
        known = spelled.get(name)
        if known is None:
            if token.startswith("-") and not token.startswith("--") and len(token) > 2:
                for letter in token[1:]:  # -qv
                    if f"-{letter}" in spelled:
                        found.setdefault(spelled[f"-{letter}"][0].name or "", []).append(None)
            continue
        param, switch = known
        if param.is_flag or param.count:
            value = switch
        elif inline or "=" in token:
            value = inline
        else:
            value = args[position] if position < len(args) else None
            position += 1
        found.setdefault(param.name or "", []).append(value)
    return found


def _check_conflicts(ctx: click.Context, command: click.Command, args: list[str]) -> None:
    """Refuse, as a usage error, options that contradict each other."""
    given = _occurrences(command, args)
    by_name = {p.name: p for p in command.params if isinstance(p, click.Option)}

    def flag(name: str) -> str:
        return by_name[name].opts[0] if name in by_name else name

    for name, values in given.items():
        param = by_name.get(name)
        if param is None or param.count:
            continue
        if param.multiple:
            if name in _NAMED:
                seen: dict[str, str] = {}
                for value in values:
                    key = str(value).rpartition(":")[0] if name.endswith("_shape") else (
                        str(value).rsplit(":", 2)[0])
                    if key in seen and seen[key] != value:
                        raise click.UsageError(
                            f"{_NAMED[name]} {seen[key]} and {_NAMED[name]} {value} contradict "
                            "each other; give one", ctx)
                    seen[key] = str(value)
            continue
        if len(set(values)) > 1:
            shown_values = " and ".join(
                (param.secondary_opts[0] if v == "off" else param.opts[0]) if param.is_flag
                else f"{param.opts[0]} {v}" for v in dict.fromkeys(values))
            raise click.UsageError(f"{shown_values} contradict each other; give one", ctx)
    fixed = {str(v).rpartition(":")[0]: str(v) for v in given.get("input_shape", [])}
    for value in given.get("bench_shape", []):
        key = str(value).rpartition(":")[0]
        if key in fixed and fixed[key] != str(value):
            raise click.UsageError(
                f"--input-shape {fixed[key]} fixes that input in the model, so it cannot be "
                f"timed at --bench-shape {value}; give one", ctx)
    if "quiet" in given and "verbose" in given:
        raise click.UsageError("-q/--quiet and -v/--verbose contradict each other; give one",
                               ctx)
    if "no_verify" in given:
        checked = [flag(n) for n in _PARITY_FLAGS if n in given]
        if checked:
            raise click.UsageError(f"{checked[0]} says how parity is checked, and --no-verify "
                                   "turns the check off; give one", ctx)
    tolerances = [str(v) for v in given.get("tol", [])]
    if any(t.startswith("*:") for t in tolerances) and ({"atol", "rtol"} & set(given)):
        raise click.UsageError("--tol '*:...' and --atol/--rtol both set the tolerance of every "
                               "output; give one", ctx)
    if "passes_" in given and not _names(tuple(str(v) for v in given["passes_"])):
        raise click.UsageError("--passes names no pass; give at least one (`graphfix passes` "
                               "lists them), or leave --passes out for the default pipeline", ctx)
    if "io_types" in given and "precision" not in given and any(
            v != "fp32" for v in given["io_types"]):
        raise click.UsageError("--io-types lowers the signature with the compute: it needs "
                               "--precision", ctx)
    if "io_types" in given and "precision" in given and str(given["io_types"][-1]) not in (
            "fp32", str(given["precision"][-1])):  # the last occurrence is the one click keeps
        raise click.UsageError(f"--io-types takes fp32 (the default) or the --precision's own "
                               f"type ({given['precision'][-1]}), got {given['io_types'][-1]}",
                               ctx)
    session_flags = [flag(n) for n in ("threads", "dynamic_block_base", "cuda_graph")
                     if n in given]
    if "config" in given and session_flags:
        raise click.UsageError(f"--config sets the session, and {session_flags[0]} sets it "
                               "too; give one (or edit the configuration)", ctx)
    if "cuda_graph" in given and "cpu" in (given.get("provider") or []):
        raise click.UsageError("--cuda-graph replays on the GPU: it needs --provider cuda", ctx)
    if "passes_" in given and "skip" in given:
        listed = set(_names(tuple(str(v) for v in given["passes_"])))
        for skipped in _names(tuple(str(v) for v in given["skip"])):
            if skipped not in listed:
                raise click.UsageError(f"--skip {skipped}: not among --passes; leave one out",
                                       ctx)


# ---------------------------------------------------------------- commands
@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(graphfix.__version__, "--version", prog_name="graphfix")
def cli() -> None:
    """graphfix: make ONNX models faster before deployment, and prove they still compute the same.

    \b
    graphfix optimize in.onnx out.onnx    rewrite, check parity, write
    graphfix inspect model.onnx           what is in a model, what graphfix would change
    graphfix check ref.onnx cand.onnx     numerical parity of two models
    graphfix bench model.onnx --vs other  latency and speedup under ORT defaults
    graphfix profile model.onnx           where the time goes, and what each fix buys here
    graphfix tune model.onnx --out c.json the session settings fastest here, measured
    graphfix doctor                       which providers really load, and why not
    graphfix passes                       the passes, in default order
    """


def _optimize_arguments(flags: dict[str, Any]) -> dict[str, Any]:
    """:func:`graphfix.optimize_file`'s keyword arguments for the flags the user set."""
    bench = (BenchOptions(input_shapes=dict(flags["bench_shape"]) or None)
             if flags["bench"] or flags["bench_shape"] else None)
    return _given(
        passes=_names((flags["passes_"],)) if flags["passes_"] is not None else None,
        skip=_names(flags["skip"]), report=flags["report_path"],
        external_data=flags["external_data"], ort_level=flags["ort_level"],
        precision=flags["precision"], io_types=flags["io_types"], fuse=flags["fuse"],
        speed_gate=False if flags["no_speed_gate"] else None,
        provider=flags["provider"], max_growth=flags["max_growth"],
        keep_reduction_order=flags["keep_reduction_order"] or None,
        inputs_as_nchw=_names(flags["inputs_as_nchw"]),
        outputs_as_nchw=_names(flags["outputs_as_nchw"]),
        input_shapes=dict(flags["input_shape"]) or None,
        verify=False if flags["no_verify"] else None, strict=flags["strict"] or None,
        parity=None if flags["no_verify"] else _parity(flags), bench=bench,
        require_speedup=flags["require_speedup"],
    )


# Model paths are checked by the library, not by click: a missing, unreadable or odd file is a
# graphfix error (exit 1, one line), as every other problem with a model is.
_MODEL_PATH = click.Path(readable=False, path_type=Path)


@cli.command(cls=_RecordArgs)
@click.argument("src", type=_MODEL_PATH)
# DST as typed: pathlib would drop a trailing slash, which says the user meant a folder.
@click.argument("dst", type=click.Path(readable=False))
@click.option("--passes", "passes_", metavar="A,B", help="Run exactly these passes, in this order.")
@click.option("--skip", multiple=True, metavar="NAME", help="Leave out a pass (repeatable).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the full report as JSON (also when the run is refused; a usage "
                   "error, exit 2, writes none).")
@click.option("--external-data/--no-external-data", default=None,
              help="Write weights to DST.data beside the model (default: when the input had "
                   "external data or the model is over 2 GB).")
@click.option("--ort-level", type=click.Choice(["basic", "extended", "all"]),
              help="ort-offline level. basic (default) keeps standard ONNX ops, portable to "
                   "every provider; extended/all add ORT contrib ops tied to --provider.")
@click.option("--precision", type=click.Choice(["fp16", "bf16"]),
              help="Lower float32 compute to float16/bfloat16 (convert-precision), float32 "
                   "islands where measured error needs them; the signature stays float32. "
                   "Judged by the speed gate on --provider.")
@click.option("--io-types", type=click.Choice(["fp32", "fp16", "bf16"]),
              help="With --precision: fp32 (default) keeps float32 inputs and outputs; the "
                   "precision's name lowers them too (a signature change, recorded in the "
                   "model's graphfix.precision metadata).")
@click.option("--fuse", type=click.Choice(["transformer"]),
              help="ONNX Runtime's transformer fusions (Attention, SkipLayerNormalization, ...), "
                   "heads read from the graph, and graphfix's own attention fusion where ORT's "
                   "patterns match none (the dynamo exporter's, T5's, GPT-2's, Llama's: q, k "
                   "and v packed into one Attention for self-attention); checked by parity; "
                   "tied to ONNX Runtime and --provider. Judged by the speed gate.")
@click.option("--no-speed-gate", is_flag=True,
              help="Keep --precision/--fuse without timing them on --provider (by default a "
                   "model they make slower there is written without them).")
@click.option("--provider", type=click.Choice(["auto", "cpu", "cuda"]),
              help="The provider the model is for: ort-offline's target (cpu unless cuda is "
                   "named), the speed gate's and --bench's (auto: CUDA when it loads).")
@click.option("--max-growth", type=_Number(1.0, zero=True), metavar="X",
              help="Largest output/input ratio of tensor bytes that constant folding may "
                   "reach. Default 1: never bigger (where the output would be larger than "
                   "the input, the passes run again, each fold storing new tensor bytes only "
                   "where the passes before it saved as many); 1.5 trades a larger file for "
                   "fewer nodes; 0 allows any growth.")
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
@click.option("--strict", is_flag=True,
              help="Refuse (exit 1, nothing written) when a pass breaks the model, instead of "
                   "leaving that pass (or the part of it that broke the model) out.")
@_parity_flags
@click.option("--bench", is_flag=True,
              help="Measure the speedup over the original under ORT defaults.")
@click.option("--require-speedup", type=_Number(0.0, strict=True), metavar="R",
              help="Write the model only when the speedup's confidence interval clears R "
                   "(implies --bench).")
@click.option("--bench-shape", "bench_shape", type=_Shape(), multiple=True,
              metavar="NAME:DIMS",
              help="Time at these sizes, e.g. input_ids:32x128 (repeatable): the speed gate "
                   "judges --precision/--fuse at the batch you deploy, and --bench reports "
                   "there; unlike --input-shape, the written model keeps its dynamic sizes "
                   "(implies --bench).")
@_verbosity
@click.pass_context
def optimize(ctx: click.Context, src: Path, dst: str, verbose: int, quiet: bool,
             **flags: Any) -> None:
    """Optimize SRC and write the result to DST.

    Runs the default pass pipeline (see `graphfix passes`), checks that the result computes the
    same outputs as SRC on generated (or --inputs) data, and writes DST atomically. SRC is never
    modified. A pass whose output does not load in ONNX Runtime, or after which parity fails,
    is left out (or only the part of it that broke the model: onnxsim's optimizers, ORT's
    constant folding, ...), the others run, and the correct model is written with a warning
    saying what was left out and why; --strict refuses instead. Nothing is written when ONNX
    Runtime cannot run SRC (parity cannot be proven) or --require-speedup fails.

    \b
    Examples:
      graphfix optimize model.onnx model.opt.onnx
      graphfix optimize model.onnx out.onnx --skip simplify --report report.json
      graphfix optimize bert.onnx out.onnx --input-shape input_ids:1x128 --tol logits:1e-3:1e-2
      graphfix optimize model.onnx out.onnx --bench --require-speedup 1.05
      graphfix optimize keras.onnx out.onnx --inputs-as-nchw input
      graphfix optimize bert.onnx bert.gpu.onnx --fuse transformer --precision fp16 --provider cuda
      graphfix optimize bert.onnx bert.gpu.onnx --precision fp16 --provider cuda \\
          --bench-shape input_ids:32x128 --bench-shape attention_mask:32x128
    """
    _configure_logging(verbose, quiet)
    arguments = _optimize_arguments(flags)
    # the summary says the report's warnings: each once, at the end
    with _holding_warnings(not quiet and not verbose) as said:
        try:
            result = graphfix.optimize_file(src, dst, progress=_progress(not quiet),
                                            **arguments)
        except ParityError as err:
            if err.guilty_pass:
                command = ["graphfix", "optimize", *ctx.meta.get("graphfix.argv", [src, dst])]
                whole = shlex.join(map(str, command + ["--skip", err.guilty_pass]))
                # The command to run when the line has room for it, else the option to add.
                err.hint = (f"to leave it out: {whole}" if len(whole) <= ERROR_LINE_LIMIT // 2
                            else f"to leave it out, run again with --skip {err.guilty_pass}")
            raise
        said += result.report.warnings
    if not quiet:
        _emit(format_summary(result.report), product=False)


@cli.command(cls=_RecordArgs)
@click.argument("reference", type=_MODEL_PATH)
@click.argument("candidate", type=_MODEL_PATH)
@_parity_flags
@_shape_option
@click.option("--provider", type=click.Choice(["cpu", "cuda"]),
              help="Provider both models run on (default cpu, optimizations off).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@_verbose
def check(reference: Path, candidate: Path, input_shape: tuple[tuple[str, list[int]], ...],
          provider: str | None, as_json: bool, verbose: int, **flags: Any) -> None:
    """Check that CANDIDATE computes what REFERENCE computes.

    Both run on ONNX Runtime with its optimizations off, on the same inputs (generated from
    REFERENCE's signature, or --inputs); outputs are compared by name. Exit 0 when every output
    is within tolerance, 1 when not.

    \b
    Tolerance: |cand - ref| <= atol * RMS(ref) + rtol * |ref|, per element. Defaults by dtype:
    float32 1e-4/1e-3, float16 1e-2/1e-2, bfloat16 5e-2/5e-2, float64 1e-9/1e-7;
    integers, booleans and strings exactly.
    """
    _configure_logging(verbose, False)
    options = _parity(flags).arguments() | _given(provider=provider)
    if flags["inputs"] is not None and input_shape:
        check_inputs_agree(flags["inputs"], dict(input_shape))
    models = []
    for path in (reference, candidate):
        loaded = graphfix.load(path)
        for warning in model_io.check_model(loaded):
            logger.warning("%s: %s", shown(path), warning)
        models.append(loaded)
    result = graphfix.check_parity(
        *models, **options,
        input_shapes=dict(input_shape) or None, names=("reference", "candidate"),
        progress=None if as_json else _progress(True), spread=True)
    _emit(json.dumps(result.to_dict(), indent=2, default=str) if as_json
          else format_parity(result.to_dict()), product=True)
    sys.exit(0 if result.passed else 1)


@cli.command(cls=_RecordArgs)
@click.argument("model", type=_MODEL_PATH)
@click.option("--vs", "baseline", type=_MODEL_PATH, metavar="OTHER",
              help="Compare with OTHER (the speedup is OTHER's time over MODEL's).")
@click.option("--provider", type=click.Choice(["auto", "cpu", "cuda"]),
              help="auto (default): CUDA when it really loads, else CPU.")
@click.option("--threads", type=click.IntRange(min=1, max=thread_limit()),
              help="Intra-op threads (default: "
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
@click.option("--config", "config", type=click.Path(dir_okay=False), metavar="FILE",
              help="Session settings from a graphfix.tune/1 file (`graphfix tune --out`), "
                   "for both models.")
@click.option("--vs-config", "baseline_config", metavar="FILE|ort-defaults",
              help="Other settings for the baseline (OTHER, or MODEL itself without --vs): a "
                   "graphfix.tune/1 file, or ort-defaults (ONNX Runtime's default session). "
                   "`--config tuned.json --vs-config ort-defaults` re-checks tune's claim.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@_verbose
def bench(model: Path, baseline: Path | None, input_shape: tuple[tuple[str, list[int]], ...],
          inputs: str | None, config: str | None, baseline_config: str | None, as_json: bool,
          verbose: int, **flags: Any) -> None:
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
    _configure_logging(verbose, False)
    options = BenchOptions(**_given(**{k: (v or None) if isinstance(v, bool) else v
                                       for k, v in flags.items()}))
    if inputs is not None and input_shape:
        check_inputs_agree(inputs, dict(input_shape))
    result = graphfix.benchmark(
        graphfix.load(model), baseline=graphfix.load(baseline) if baseline else None,
        **options.arguments(), inputs=inputs, input_shapes=dict(input_shape) or None,
        **_given(config=config, baseline_config=baseline_config),
        progress=None if as_json else _progress(True))
    name, other = _told_apart(model, baseline) if baseline else (model.name, (
        f"{model.name} ({Path(baseline_config).name})" if baseline_config else None))
    _emit(json.dumps(result.to_dict(), indent=2, default=str) if as_json else
          format_bench(result.to_dict(), name, other), product=True)


def _told_apart(first: Path, second: Path) -> tuple[str, str]:
    """Names for two model paths that tell them apart: the file names, or as much of each
    path as it takes (out/model.onnx against models/model.onnx)."""
    a, b = first.parts, second.parts
    for keep in range(1, max(len(a), len(b)) + 1):
        shown = str(Path(*a[-keep:])), str(Path(*b[-keep:]))
        if shown[0] != shown[1]:
            return shown
    return str(first), f"{second} (again)"


@cli.command(cls=_RecordArgs)
@click.argument("model", type=_MODEL_PATH)
@click.option("--vs", "other", type=_MODEL_PATH, metavar="OTHER",
              help="Profile OTHER beside MODEL: op types matched, where the time moved.")
@click.option("--provider", type=click.Choice(["auto", "cpu", "cuda"]),
              help="auto (default): CUDA when it really loads, else CPU.")
@click.option("--threads", type=click.IntRange(min=1, max=thread_limit()),
              help="Intra-op threads (default: physical cores).")
@click.option("--warmup", type=click.IntRange(min=0), help="Warm-up calls (default 10).")
@click.option("--runs", type=click.IntRange(min=1), help="Timed calls (default 50).")
@_shape_option
@click.option("--inputs", type=click.Path(exists=True), metavar="PATH",
              help="Real inputs (.npz or a folder of input_N.pb); the first set is used.")
@click.option("--dynamic-block-base", type=click.IntRange(min=1), metavar="N",
              help="ORT's session.dynamic_block_base (CPU).")
@click.option("--config", type=click.Path(dir_okay=False), metavar="FILE",
              help="Session settings from a graphfix.tune/1 file (`graphfix tune --out`).")
@click.option("--no-try", is_flag=True,
              help="Do not measure what each fix buys (findings only).")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              help="Op types and nodes shown in the terminal.")
@click.option("--trace", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write ORT's trace (opens in Perfetto or chrome://tracing).")
@click.option("--html", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write one self-contained page: op-type chart, sortable node table.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@_verbose
def profile(model: Path, other: Path | None, input_shape: tuple[tuple[str, list[int]], ...],
            no_try: bool, top: int, as_json: bool, verbose: int, **flags: Any) -> None:
    """Show where MODEL's time goes, what to change, and what each change buys here.

    Runs ONNX Runtime's profiler over the same interleaved rounds as `bench` (a session with
    the profiler and one without, so its overhead is known), accounts the time per node and
    per op type, and ranks findings (initializers listed as inputs, NHWC transposes, CPU
    fallback and copies, float64, float32 islands in a float16 model, batch 1, latency tail,
    threads, attention run op by op, optimization level, missing provider libraries), each
    with its evidence and fix.
    Fixes that are a graphfix pass, a session setting or a batch size are measured in
    interleaved rounds, with a bootstrap interval.

    \b
    Examples:
      graphfix profile model.onnx
      graphfix profile model.opt.onnx --vs model.onnx --html profile.html
      graphfix profile bert.onnx --input-shape input_ids:1x128 --trace trace.json --json
    """
    _configure_logging(verbose, False)
    if flags.get("inputs") is not None and input_shape:
        check_inputs_agree(flags["inputs"], dict(input_shape))
    result = graphfix.profile(
        model, vs=other, **_given(**flags), try_fixes=not no_try,
        input_shapes=dict(input_shape) or None,
        progress=None if as_json else _by_step(_progress(True)))
    # a page written is the result too: then the print cannot turn it into a failure
    _emit(json.dumps(result.to_dict(), indent=2, default=str) if as_json
          else format_profile(result.to_dict(), top=top), product=flags.get("html") is None)


class _Knob(click.ParamType):
    """``name=v1,v2`` -> ("name", ["v1", "v2"]) (values parsed by the library's knob)."""

    name = "KNOB=V1,V2"

    def convert(self, value: Any, param: Any, ctx: Any) -> tuple[str, list[str]]:
        if isinstance(value, tuple):
            return value
        name, sep, values = str(value).partition("=")
        parts = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not name.strip() or not parts:
            self.fail(f"{value!r}: expected KNOB=V1,V2 such as intra_op_threads=1,2", param, ctx)
        return name.strip(), parts


@cli.command(cls=_RecordArgs)
@click.argument("model", type=_MODEL_PATH)
@click.option("--provider", type=click.Choice(["auto", "cpu", "cuda"]),
              help="auto (default): CUDA when it really loads, else CPU.")
@click.option("--objective", type=click.Choice(["latency", "p99", "throughput", "memory"]),
              help="What to minimize (default latency: the median; memory: the leanest "
                   "setting that is not significantly slower).")
@click.option("--budget", type=_Number(1.0), metavar="SECONDS",
              help="Seconds the search may spend (default 60; every candidate's first rung "
                   "and the winner's confirmation always run).")
@_shape_option
@click.option("--inputs", type=click.Path(exists=True), metavar="PATH",
              help="Real inputs (.npz or a folder of input_N.pb); the first set is used.")
@click.option("--knob", "knobs", type=_Knob(), multiple=True,
              help="Try only these knobs and values, e.g. intra_op_threads=1,2 (repeatable).")
@click.option("--out", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the winner as a graphfix.tune/1 configuration (for bench/profile "
                   "--config).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@_verbose
def tune(model: Path, input_shape: tuple[tuple[str, list[int]], ...],
         knobs: tuple[tuple[str, list[str]], ...], as_json: bool, verbose: int,
         **flags: Any) -> None:
    """Find the session and provider settings that make MODEL fastest on this machine.

    Each candidate is ONNX Runtime's default session with one knob changed (threads, parallel
    execution, independent nodes side by side on one thread each (branch_parallel), spinning,
    dynamic_block_base, optimization level, memory pattern and arena; on
    CUDA the cuDNN options, TF32, NHWC, CUDA graphs, IO binding; batch sizes for throughput),
    or one thread at each other optimization level (the level decides what one thread costs).
    Candidates run one session alive at a time in rotating blocks; successive halving spends
    the budget on the contenders. The winner must beat the default with its bootstrap interval
    clearing 1.0 on fresh rounds, else the default is kept; the other knobs are then tried
    on top of it (settings interact), and one replaces it only when significantly faster. Settings that change numerics are checked against
    the default session first. Prints the table, the winner and a Python snippet.

    \b
    Examples:
      graphfix tune model.onnx --out tuned.json
      graphfix bench model.onnx --config tuned.json --vs-config ort-defaults
      graphfix tune model.onnx --objective p99 --budget 120
      graphfix tune model.onnx --knob intra_op_threads=1,2 --knob execution_mode=parallel
    """
    _configure_logging(verbose, False)
    if flags.get("inputs") is not None and input_shape:
        check_inputs_agree(flags["inputs"], dict(input_shape))
    space = _knob_space(knobs) if knobs else None
    result = graphfix.tune(
        model, **_given(**flags), input_shapes=dict(input_shape) or None, space=space,
        progress=None if as_json else _by_step(_progress(True)))
    # a configuration written is the result too: then the print cannot fail the run
    _emit(json.dumps(result.to_dict(), indent=2, default=str) if as_json
          else format_tune(result.to_dict()), product=flags.get("out") is None)


def _knob_space(knobs: tuple[tuple[str, list[str]], ...]) -> dict[str, list[Any]]:
    """``--knob`` values parsed as the library's knob table says."""
    table = {knob.name: knob for knob in KNOBS}
    space: dict[str, list[Any]] = {}
    for name, values in knobs:
        if name not in table:
            raise click.BadParameter(f"unknown knob {name!r}; knobs: {', '.join(table)}",
                                     param_hint="--knob")
        try:
            space.setdefault(name, []).extend(table[name].parse(v) for v in values)
        except ValueError as err:
            raise click.BadParameter(f"{name}: {err}", param_hint="--knob") from None
    return space


@cli.command(cls=_RecordArgs)
@click.option("--provider", type=click.Choice(["cpu", "cuda", "tensorrt"]),
              help="Exit 1 unless this provider is usable.")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
def doctor(provider: str | None, as_json: bool) -> None:
    """Check the environment: versions, which ONNX Runtime providers really load, GPUs,
    CUDA/cuDNN libraries, and each problem with its fix."""
    found = diagnose(provider=provider)
    _emit(json.dumps(found.to_dict(), indent=2, default=str) if as_json
          else format_doctor(found.to_dict()), product=True)
    sys.exit(0 if found.ok else 1)


@cli.command(name="passes")
def list_passes() -> None:
    """List the registered passes, default pipeline first, in order."""
    names = list(dict.fromkeys(pipeline.DEFAULT_PASSES))
    others = [n for n in registry.names() if n not in names]
    width = max(len(n) for n in names + others)
    lines = ["default pipeline: " + " -> ".join(pipeline.DEFAULT_PASSES)]
    for name in names + others:
        marker = "" if name in names else "  (not in the default pipeline)"
        lines.append(f"  {name.ljust(width)}  {registry.summary(name)}{marker}")
    _emit("\n".join(lines), product=True)


@cli.command(cls=_RecordArgs)
@click.argument("model", type=_MODEL_PATH)
@click.option("--json", "as_json", is_flag=True, help="Print the facts as JSON.")
@_verbose
def inspect(model: Path, as_json: bool, verbose: int) -> None:
    """Show what is in MODEL and what graphfix would change.

    IR and opset versions, producer, size, inputs and outputs with dtypes and (dynamic) shapes,
    op histogram, Transposes, initializers listed as inputs, external data, subgraphs.
    """
    _configure_logging(verbose, False)
    found = graphfix.inspect(model).to_dict()
    _emit(json.dumps(found, indent=2) if as_json else format_inspection(found), product=True)


def main() -> None:
    """The ``graphfix`` command (``python -m graphfix`` guards the start-up before this)."""
    sys.stderr = _Tolerant(sys.stderr)
    sys.stdout = _Tolerant(sys.stdout, only=(errno.EPIPE,))
    _COMMAND.append(True)
    try:
        cli(prog_name="graphfix")
    except OSError as err:  # printing --help or --version to a reader that went away
        _drop_stdout()
        sys.exit(0 if err.errno == errno.EPIPE else 1)


class _Tolerant:
    """A stream that does not fail a run: once a write fails (with an errno of ``only``, or any
    for stderr: a full device, a reader gone), what follows goes nowhere. Progress and messages
    are for people; the exit code says the rest. stdout tolerates a reader that went away
    (``| head``) and nothing else: a result that cannot be printed is an error."""

    def __init__(self, stream: Any, only: tuple[int, ...] | None = None) -> None:
        self._stream = stream
        self._only = only

    def _failed(self, err: BaseException) -> None:
        if self._only is not None and getattr(err, "errno", None) not in self._only:
            raise err
        _drop_stream(self._stream)
        self._stream = open(os.devnull, "w", encoding="utf-8")

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except (OSError, ValueError, AttributeError) as err:
            self._failed(err)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError, AttributeError) as err:
            self._failed(err)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


if __name__ == "__main__":
    main()
