"""graphfix on a large model with external data: does it finish, keep the weights external,
and how much memory does it take?

Builds a transformer-like model of about ``--gb`` GB with external data (weights written in
chunks, never all in memory), then runs ``graphfix optimize`` on it in a child process and reports
the child's peak resident memory (``ru_maxrss``) as a multiple of the weight bytes, the wall time,
and what was written.

    python tools/large_model.py --gb 1                       # default pipeline, parity on
    python tools/large_model.py --gb 3 --no-verify --passes remove-initializer-inputs,eliminate-transposes
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))

from models.transformer import write_large_transformer  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gb", type=float, default=1.0, help="weight size in GiB")
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--folder", default=None, help="where to build (default: a temp folder)")
    parser.add_argument("graphfix_args", nargs="*", help="extra arguments for graphfix optimize")
    args, extra = parser.parse_known_args()
    with tempfile.TemporaryDirectory(dir=args.folder) as folder:
        src = Path(folder) / "large.onnx"
        started = time.perf_counter()
        weight_bytes = write_large_transformer(
            src, target_bytes=int(args.gb * 2**30), layers=args.layers
        )
        built = time.perf_counter() - started
        print(f"built {src.name}: {weight_bytes / 2**30:.2f} GiB of weights in {built:.0f}s")
        out_dir = Path(folder) / "out"
        out_dir.mkdir()
        command = [sys.executable, "-m", "graphfix", "optimize", str(src),
                   str(out_dir / "large.opt.onnx"), *args.graphfix_args, *extra]
        print("running:", " ".join(["graphfix", *command[3:]]))
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
        print(f"exit code {done.returncode}, {seconds:.0f}s")
        print(f"peak RSS {peak / 2**30:.2f} GiB = {peak / weight_bytes:.2f}x the weight bytes")
        for path in sorted(out_dir.iterdir()):
            print(f"wrote {path.name}: {path.stat().st_size / 2**20:.1f} MiB")
        return done.returncode


if __name__ == "__main__":
    sys.exit(main())
