"""Every command run without its extra: one line that names the extra, exit 2, no traceback.

The extra's packages are hidden from this process (``sys.modules[name] = None`` makes both ``import name``
and ``importlib.util.find_spec(name)`` fail as for a package that is not installed); the slim-install test
(tests/test_slim_install.py) runs the same commands where the packages really are absent.
"""

from __future__ import annotations

import re
import sys

import pytest
import typer
from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.cli.extras import EXTRAS, missing_modules, needs_extra
from inferensics.schema.install_hint import pip_install_hint

runner = CliRunner()

COMMANDS: dict[str, tuple[list[str], str]] = {
    "init": (["init"], "service"),
    "status": (["status"], "service"),
    "import-trace": (["import-trace", "some.log"], "service"),
    "serve": (["serve"], "service"),
    "dashboard": (["dashboard"], "dashboard"),
    "report weekly": (["report", "weekly"], "dashboard"),
    "canary compare": (["canary", "compare", "--baseline", "a", "--candidate", "b"], "dashboard"),
    "requests": (["requests", "--failing"], "service"),
    "demo": (["demo"], "demo"),
    "replay": (["replay", "req-1"], "service"),
    **{
        f"bundle {name}": (["bundle", name, *args], "service")
        for name, args in {
            "promote": ["0abc", "--channel", "prod"],
            "revoke": ["0abc"],
            "quarantine": ["0abc"],
            "release": ["0abc"],
            "states": ["--out", "states.json"],
            "push": ["some-bundle"],
            "pull": ["0abc", "--out", "some-dir"],
        }.items()
    },
}
"""Each command of the app, a valid command line for it, and the extra it needs."""
BASE_COMMANDS: frozenset[str] = frozenset(
    {f"bundle {c}" for c in ("keygen", "build", "verify", "show", "diff", "pack", "unpack")}
    | {"kernels list", "kernels qualify"}
)
"""Commands that need only the slim install (tests/test_slim_install.py runs them there)."""


def command_paths(group: object, prefix: str = "") -> set[str]:
    """The full names (``report weekly``) of the app's leaf commands."""
    out: set[str] = set()
    for name, cmd in getattr(group, "commands", {}).items():
        path = f"{prefix}{name}"
        if hasattr(cmd, "commands"):
            out |= command_paths(cmd, f"{path} ")
        else:
            out.add(path)
    return out


def hide(monkeypatch: pytest.MonkeyPatch, modules: tuple[str, ...]) -> None:
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


def test_every_command_declares_what_it_needs() -> None:
    assert command_paths(typer.main.get_command(app)) == set(COMMANDS) | BASE_COMMANDS


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_without_its_extra_says_which_in_one_line(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    args, extra = COMMANDS[name]
    below = EXTRAS["service"] if extra != "service" else ()
    hidden = tuple(m for m in EXTRAS[extra] if m not in below) or EXTRAS[extra]  # what the extra adds
    hide(monkeypatch, hidden)
    res = runner.invoke(app, args, env={"COLUMNS": "300"})
    assert res.exit_code == 2, res.output
    assert not isinstance(res.exception, Exception) or isinstance(res.exception, SystemExit), res.exception
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    hint = re.escape(pip_install_hint(extra))  # this environment's checkout (tests/schema/test_install_hint.py)
    assert re.fullmatch(rf"error: `inferensics {name}` needs the {extra} extra \(.+ not installed\): {hint}", lines[0])
    assert "Traceback" not in res.output


def test_a_dashboard_command_without_the_service_packages_names_its_own_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    hide(monkeypatch, ("chdb", "httpx"))
    res = runner.invoke(app, ["report", "weekly"], env={"COLUMNS": "300"})
    assert res.exit_code == 2
    assert res.stderr.strip() == (
        "error: `inferensics report weekly` needs the dashboard extra (chdb, httpx not installed): "
        f"{pip_install_hint('dashboard')}"
    )


def test_serve_with_dashboard_needs_the_dashboard_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    hide(monkeypatch, ("streamlit",))
    res = runner.invoke(
        app,
        ["serve", "--port", "0", "--with-dashboard", "--dsn", f"chdb://{tmp_path}/db"],
        env={"COLUMNS": "300", "INFERENSICS_AUTH": "false"},
    )
    assert res.exit_code == 2
    assert res.stderr.strip() == (
        "error: `inferensics serve --with-dashboard` needs the dashboard extra (streamlit not installed): "
        f"{pip_install_hint('dashboard')}"
    )


def test_installed_extras_are_not_reported_missing() -> None:
    assert {extra: missing_modules(extra) for extra in EXTRAS} == {extra: [] for extra in EXTRAS}


def test_unknown_extra_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown extra 'gpu'; known: service, dashboard, demo"):
        needs_extra("gpu", "x")
