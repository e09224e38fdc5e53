"""The repository's own commands run from its root, where the checkout's graphfix/ folder
shadows the installed package (Python puts the working directory first on sys.path)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOLS = sorted(p.name for p in (ROOT / "tools").glob("*.py"))


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_the_checkout_imports_its_pass_library() -> None:
    result = _run("-c", "import graphfix, graphfix.passes; "
                        "print(graphfix.passes.eliminate_transposes.__module__)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "graphfix.passes.eliminate_transposes"


def test_a_tool_runs_from_the_root() -> None:
    result = _run("tools/large_model.py", "--help")
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_explains_itself_from_the_root(tool: str) -> None:
    result = _run(f"tools/{tool}", "--help")
    assert result.returncode == 0, result.stderr
    assert "usage" in result.stdout.lower()


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads Linux's /proc")
def test_importing_the_pass_library_starts_nothing() -> None:
    """No thread, child process or exit handler at import: the onnxsim worker is started by the
    run that needs it (its dependencies are imported first, so that only graphfix's own import
    is measured)."""
    result = _run("-c", """
import atexit, os, threading
import numpy, onnx, onnxruntime, click, logging, multiprocessing, concurrent.futures
before = (atexit._ncallbacks(), threading.active_count(), len(os.listdir('/proc/self/task')))
import graphfix, graphfix.passes, graphfix.cli
import graphfix.passes  # loads every pass module
after = (atexit._ncallbacks(), threading.active_count(), len(os.listdir('/proc/self/task')))
children = open(f'/proc/self/task/{os.getpid()}/children').read().split()
print(before == after, children == [], before, after, children)
""")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("True True"), result.stdout
