"""graphfix on a large model with external data: does it finish, keep the weights external,
and how much memory does it take?

Builds a transformer-like model of about ``--gb`` GiB with external data (weights written in
chunks, never all in memory), then runs ``graphfix optimize`` on it in a child process and reports

- the largest peak resident memory of one process: graphfix, or one of its children such as
  the onnxsim worker (``ru_maxrss`` from ``wait4``, which Linux takes over the process and its
  waited-for descendants), and
- on Linux, the peak of the whole process tree's resident memory summed (graphfix and its
  onnxsim worker at the same moment), sampled from ``/proc`` every 20 ms,

each as a multiple of the weight bytes, with the wall time and what was written.

    python tools/large_model.py --gb 1                       # default pipeline, parity on
    python tools/large_model.py --gb 3 --folder /scratch -- --no-verify \\
        --passes remove-initializer-inputs,eliminate-transposes
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path


from graphfix.models.transformer import write_large_transformer

ROOT = Path(__file__).resolve().parent.parent

_SAMPLE_SECONDS = 0.02


@dataclasses.dataclass
class Measurement:
    """One run of ``graphfix optimize`` on a large model."""

    weight_bytes: int
    build_seconds: float
    seconds: float
    returncode: int
    peak_rss: int  # the largest of graphfix and each of its children (ru_maxrss from wait4)
    peak_tree_rss: int | None  # graphfix and its children summed, sampled; None off Linux
    written: dict[str, int]  # file name -> size in bytes
    stdout: str
    stderr: str

    @property
    def ratio(self) -> float:
        return self.peak_rss / self.weight_bytes

    @property
    def tree_ratio(self) -> float | None:
        return None if self.peak_tree_rss is None else self.peak_tree_rss / self.weight_bytes


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            with open(f"/proc/{current}/task/{current}/children", encoding="ascii") as f:
                todo.extend(int(child) for child in f.read().split())
        except OSError:
            continue
    return found


class _TreeSampler(threading.Thread):
    """Samples the summed resident memory of a process and its descendants until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(_SAMPLE_SECONDS):
            self.peak = max(self.peak, sum(_rss(p) for p in _descendants(self.pid)))


def measure(
    gb: float,
    graphfix_args: Sequence[str] = (),
    *,
    folder: str | os.PathLike | None = None,
    layers: int = 24,
) -> Measurement:
    """Build a model of ``gb`` GiB of weights in a temporary folder under ``folder`` and run
    ``graphfix optimize`` on it with ``graphfix_args``; the folder is removed afterwards."""
    with tempfile.TemporaryDirectory(dir=folder, prefix="graphfix-large-") as tmp:
        src = Path(tmp) / "large.onnx"
        started = time.perf_counter()
        weight_bytes = write_large_transformer(src, target_bytes=int(gb * 2**30), layers=layers)
        built = time.perf_counter() - started
        out_dir = Path(tmp) / "out"
        out_dir.mkdir()
        command = [sys.executable, "-m", "graphfix", "optimize", str(src),
                   str(out_dir / "large.opt.onnx"), *graphfix_args]
        log = Path(tmp) / "log"
        log.mkdir()
        with open(log / "stdout", "w+") as out, open(log / "stderr", "w+") as err:
            started = time.perf_counter()
            child = subprocess.Popen(command, stdout=out, stderr=err, text=True, cwd=ROOT)
            sampler = _TreeSampler(child.pid) if sys.platform == "linux" else None
            if sampler:
                sampler.start()
            # wait4 gives this child's own peak, whatever other children this process had.
            _, status, usage = os.wait4(child.pid, 0)
            child.returncode = os.waitstatus_to_exitcode(status)
            seconds = time.perf_counter() - started
            if sampler:
                sampler.stopped.set()
                sampler.join()
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        peak = usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
        written = {p.name: p.stat().st_size for p in sorted(out_dir.iterdir())}
        return Measurement(
            weight_bytes=weight_bytes, build_seconds=built, seconds=seconds,
            returncode=child.returncode, peak_rss=peak,
            peak_tree_rss=sampler.peak if sampler else None, written=written,
            stdout=stdout, stderr=stderr,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gb", type=float, default=1.0, help="weight size in GiB")
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--folder", default=None, help="where to build (default: a temp folder)")
    parser.add_argument("--json", default=None, help="also write the measurement here")
    parser.add_argument("graphfix_args", nargs="*", help="extra arguments for graphfix optimize")
    args, extra = parser.parse_known_args()
    graphfix_args = [*args.graphfix_args, *extra]
    print(f"building {args.gb:g} GiB, then: graphfix optimize large.onnx out/large.opt.onnx",
          *graphfix_args, flush=True)
    m = measure(args.gb, graphfix_args, folder=args.folder, layers=args.layers)
    print(f"built: {m.weight_bytes / 2**30:.2f} GiB of weights in {m.build_seconds:.0f}s")
    print(m.stdout[-3000:], m.stderr[-3000:], sep="\n")
    print(f"exit code {m.returncode}, {m.seconds:.0f}s")
    if m.peak_rss:
        print(f"peak RSS {m.peak_rss / 2**30:.2f} GiB = {m.ratio:.2f}x the weight bytes "
              "(the largest single process: graphfix or its onnxsim worker)")
    if m.peak_tree_rss is not None:
        print(f"peak RSS of the process tree {m.peak_tree_rss / 2**30:.2f} GiB = "
              f"{m.tree_ratio:.2f}x the weight bytes (sampled)")
    for name, size in m.written.items():
        print(f"wrote {name}: {size / 2**20:.1f} MiB")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {**dataclasses.asdict(m), "ratio": m.ratio, "tree_ratio": m.tree_ratio}, indent=2))
    return m.returncode


if __name__ == "__main__":
    sys.exit(main())
