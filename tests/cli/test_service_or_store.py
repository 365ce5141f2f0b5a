"""``--service`` or the store (``--dsn``, ``--data-dir``): the commands that take both go to one of them.

Typed together, ``--service`` won and the store the user named was ignored without a word; now that is
refused in one line (exit 2, a usage error). ``$INFERENSICS_SERVICE_URL`` yields to a typed ``--dsn`` or
``--data-dir``, as every environment variable yields to an argument. Nothing here opens a store in this
process (one chDB directory per process, tests/conftest.py): the stores named do not exist.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics.cli.app import app
from tests.cli.test_data_dir_option import COMMANDS

runner = CliRunner()
UNREACHABLE = "http://127.0.0.1:1"
WITH_SERVICE = {name: args for name, args in COMMANDS.items() if name not in ("init", "serve")}


@pytest.mark.parametrize("store_flag", ["--dsn", "--data-dir"])
@pytest.mark.parametrize("command", WITH_SERVICE.values(), ids=list(WITH_SERVICE))
def test_service_beside_the_store_is_refused_in_one_line(command: list[str], store_flag: str, tmp_path: Path) -> None:
    where = f"chdb://{tmp_path / 'store'}" if store_flag == "--dsn" else str(tmp_path / "store")
    res = runner.invoke(
        app, [*command, "--service", UNREACHABLE, store_flag, where], env={"COLUMNS": "300", "INFERENSICS_DSN": None}
    )
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines() == [
        f"error: --service and {store_flag} both name where the records are: pass one of them (--service while "
        f"`inferensics serve` owns the store, else {store_flag})"
    ]
    assert not (tmp_path / "store").exists()


READ_COMMANDS = {name: WITH_SERVICE[name] for name in ("status", "report weekly", "canary compare", "bundle states")}


@pytest.mark.parametrize("command", READ_COMMANDS.values(), ids=list(READ_COMMANDS))
def test_a_typed_dsn_beats_the_service_url_variable(command: list[str], tmp_path: Path) -> None:
    """The store typed is the one used (here: refused for not existing), not the service in the environment."""
    store = tmp_path / "store"
    env = {"COLUMNS": "300", "INFERENSICS_SERVICE_URL": UNREACHABLE, "INFERENSICS_DSN": None}
    res = runner.invoke(app, [*command, "--dsn", f"chdb://{store}"], env=env)
    assert res.exit_code != 0, res.output
    text = " ".join(res.output.split())
    assert f"no store at {store}" in text, text
    assert "127.0.0.1:1" not in text, text
    assert not store.exists()


def test_a_typed_service_beats_the_dsn_variable(tmp_path: Path) -> None:
    """The other way round, unchanged: ``--service`` typed is used though ``$INFERENSICS_DSN`` is set."""
    env = {"COLUMNS": "300", "INFERENSICS_DSN": f"chdb://{tmp_path / 'store'}", "INFERENSICS_SERVICE_URL": None}
    res = runner.invoke(app, ["status", "--service", UNREACHABLE], env=env)
    assert res.exit_code == 2, res.output
    assert "127.0.0.1:1" in res.output
    assert not (tmp_path / "store").exists()
