"""Every path the deployment files name (``deploy/...``, ``tests/deploy/...``) exists: a comment or a README
that points an operator at a file that is not there sends them nowhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.deploy.layout import DEPLOY

ROOT = DEPLOY.parent
NAMED = re.compile(r"(?<![\w/.-])((?:tests/)?deploy/[\w./-]*[\w/])")
"""A repository path under deploy/ or tests/deploy/, as the files write them (not part of a longer path)."""


def _referring_files() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*") if p.is_file() and p.suffix != ".proto")


def _missing(text: str) -> list[str]:
    missing = []
    for name in sorted(set(NAMED.findall(text))):
        path = ROOT / name
        # an operator's copy of an example file (deploy/compose/.env from .env.example) exists only on their side
        if not path.exists() and not path.with_name(path.name + ".example").exists():
            missing.append(name)
    return missing


@pytest.mark.parametrize("path", _referring_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_path_a_deployment_file_names_exists(path: Path) -> None:
    missing = _missing(path.read_text(encoding="utf-8"))
    assert not missing, f"{path.relative_to(ROOT)} names {missing}, which do not exist"


def test_a_missing_path_is_caught() -> None:
    assert _missing("see deploy/systemd/README.md and deploy/README.md") == ["deploy/systemd/README.md"]
    assert _missing("cp deploy/compose/.env.example deploy/compose/.env") == []
