"""The engine's boundaries as checked contracts (import-linter, ``[tool.importlinter]`` in
pyproject.toml), and what import-linter cannot say: no private name crosses into the passes."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")

pytestmark = pytest.mark.skipif(not Path(LINT).exists(),
                                reason="import-linter (the test extra) is not installed")


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    # import-linter reads the package where it stands (it puts the working folder first on
    # the path): the checkout's, not an installed copy.
    return subprocess.run([LINT, "--no-cache"], cwd=root, capture_output=True, text=True,
                          timeout=300)


def test_the_contracts_hold() -> None:
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


@pytest.mark.parametrize("module, line, contract", [
    ("passes/fold_shapes.py", "from graphfix import pipeline", "Layers"),
    ("passes/fold_shapes.py", "from graphfix.model_io import tensors", "the engine's face"),
    ("graphfix/graph.py", "from graphfix import registry", "No cycles"),
])
def test_a_broken_contract_is_caught(tmp_path, module, line, contract) -> None:
    # A copy of the package with one import that breaks one contract.
    copy = tmp_path / "tree"
    for name in ("graphfix", "passes", "models"):
        shutil.copytree(ROOT / name, copy / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    target = copy / module
    target.write_text(target.read_text() + f"\n{line}  # noqa: E402\n")
    done = _lint(copy)
    assert done.returncode != 0
    broken = [block for block in done.stdout.split("\n\n") if "BROKEN" in block]
    assert any(contract in block for block in broken), done.stdout[-3000:]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _imports(path: Path) -> list[ast.ImportFrom]:
    return [node for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom)]


def test_passes_import_no_private_name_of_the_engine() -> None:
    found = []
    for path in sorted((ROOT / "passes").rglob("*.py")):
        for node in _imports(path):
            if node.level or not (node.module or "").startswith("graphfix"):
                continue  # the pass library's own modules, or a third party's
            private = [a.name for a in node.names if _private(a.name)]
            private += [part for part in (node.module or "").split(".") if _private(part)]
            if private:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {private}")
    assert not found, found


def test_the_engine_imports_no_private_name_across_packages() -> None:
    # Within one package (model_io's files) a module may use its siblings' private helpers;
    # across packages only public names.
    found = []
    for path in sorted((ROOT / "graphfix").rglob("*.py")):
        if path.is_symlink() or any(p.is_symlink() for p in path.parents):
            continue
        package = ".".join(path.relative_to(ROOT).parent.parts)
        for node in _imports(path):
            module = node.module or ""
            if node.level or not module.startswith("graphfix") or (
                    package != "graphfix" and module.startswith(package + ".")):
                continue
            private = [a.name for a in node.names if _private(a.name)]
            if private:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {module} {private}")
    assert not found, found
