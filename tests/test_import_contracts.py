"""The import contracts ([tool.importlinter] in pyproject.toml, run by `make imports`) hold on this tree, and
each kind of violation fails them: the checker runs on a copy of the source with one import planted."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("schema", "collector", "analytics", "dashboard", "bundle", "replay", "kernels", "demo", "cli")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def copy_tree(dest: Path) -> Path:
    """The parts' Python sources under ``dest/inferensics`` and the project's pyproject.toml; ``dest``."""
    pkg = dest / "inferensics"
    for part in PARTS:
        shutil.copytree(ROOT / part, pkg / part, ignore=shutil.ignore_patterns("__pycache__", "*.sql", "*.css"))
    # no inferensics/__init__.py: a namespace package, as the editable install makes it
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}  # the copy's inferensics.* comes before the editable install
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],  # reads the pyproject.toml in cwd
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_tree(tmp_path_factory.mktemp("pristine"))


def test_the_tree_keeps_every_contract(pristine: Path) -> None:
    res = lint_imports(pristine)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 broken" in res.stdout
    assert "BROKEN" not in res.stdout


PLANTED = {
    # the service reaching into analytics, even lazily inside a function
    "collector/service/planted.py": (
        "def queries():\n    from inferensics.analytics.registry import NAMED_QUERIES\n    return NAMED_QUERIES\n",
        "the collector does not import analytics",
    ),
    # a GPU-host path pulling a store package on first use
    "kernels/planted.py": ("def frame():\n    import polars\n    return polars\n", "GPU-host paths"),
    # the host SDK importing the service's client
    "collector/host/planted.py": ("from inferensics.collector import client\n", "the host SDK never imports"),
    # the host SDK reaching Arrow through the schema package
    "collector/host/planted_arrow.py": ("from inferensics.schema import arrow\n", "the host SDK needs only the slim"),
    # a part importing one above it
    "schema/planted.py": ("from inferensics.collector import service_url\n", "the parts form one stack"),
    # a loop inside a part: client -> local_runner -> client
    "analytics/planted.py": ("from inferensics.analytics.local_runner import LocalRunner\n", "no import cycles"),
}


@pytest.mark.parametrize("path", sorted(PLANTED))
def test_a_planted_violation_breaks_its_contract(path: str, pristine: Path, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(pristine, tree)
    source, contract = PLANTED[path]
    (tree / "inferensics" / path).write_text(source)
    if path == "analytics/planted.py":  # close the loop: client imports the planted module
        client = tree / "inferensics/analytics/client.py"
        client.write_text(client.read_text() + "\nfrom inferensics.analytics import planted  # noqa\n")
    res = lint_imports(tree)
    assert res.returncode == 1, res.stdout + res.stderr
    broken = [line for line in res.stdout.splitlines() if "BROKEN" in line or line.startswith(contract)]
    assert any(contract in line for line in broken), res.stdout
    assert "1 broken" in res.stdout or "2 broken" in res.stdout, res.stdout
