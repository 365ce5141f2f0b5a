"""What the install script and the image install holds every command their units and services run.

pip installs an extra the package does not declare as no extra at all (one warning line, exit 0), so a
misnamed extra leaves the slim install and every unit fails on its first command; this reads the extras from
``pyproject.toml`` and the commands from the systemd units.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests.deploy.layout import DEPLOY, SYSTEMD

PYPROJECT = DEPLOY.parent / "pyproject.toml"
INSTALLERS = (SYSTEMD / "install.sh", DEPLOY / "docker" / "Dockerfile")
NEEDS = {"serve": "service", "init": "service", "dashboard": "dashboard"}
"""The extra each command the units run needs (cli/extras.py's ``needs_extra`` on each command)."""


def _declared() -> dict[str, list[str]]:
    extras: dict[str, list[str]] = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    return extras


def _closure(names: set[str], declared: dict[str, list[str]]) -> set[str]:
    """The extras ``names`` install, following ``inferensics[...]`` inside an extra."""
    done: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in done or name not in declared:
            continue
        done.add(name)
        for requirement in declared[name]:
            if inner := re.fullmatch(r"inferensics\[([\w,]+)\]", requirement):
                todo.extend(inner.group(1).split(","))
    return done


def _installed_extras(installer: Path) -> set[str]:
    lines = [ln for ln in installer.read_text(encoding="utf-8").splitlines() if "pip install" in ln]
    found = {e for ln in lines for group in re.findall(r"\[([\w,]+)\]'", ln) for e in group.split(",")}
    assert found, f"{installer.name} installs the package without an extra"
    return found


@pytest.mark.parametrize("installer", INSTALLERS, ids=lambda p: p.name)
def test_installers_name_declared_extras_that_cover_the_units_commands(installer: Path) -> None:
    declared = _declared()
    named = _installed_extras(installer)
    assert named <= set(declared), f"{installer.name} names extras {sorted(named - set(declared))} pyproject lacks"
    units = "\n".join(u.read_text(encoding="utf-8") for u in SYSTEMD.glob("*.service"))
    commands = set(re.findall(r"^ExecStart(?:Pre)?=\S+/bin/inferensics ([\w-]+)", units, flags=re.MULTILINE))
    assert commands == set(NEEDS)
    assert {NEEDS[c] for c in commands} <= _closure(named, declared)
