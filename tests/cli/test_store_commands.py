"""``inferensics init`` and ``status`` on a real embedded store (through typer's runner, in-process)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.schema import RequestEvent
from inferensics.schema.migrations import LATEST_VERSION
from inferensics.schema.store import Store
from tests.schema.samples import sample

runner = CliRunner()


def test_init_creates_then_reports_up_to_date(store_dsn: str) -> None:
    first = runner.invoke(app, ["init", "--dsn", store_dsn])
    assert first.exit_code == 0, first.output
    assert f"created, schema version {LATEST_VERSION}" in first.output
    again = runner.invoke(app, ["init", "--dsn", store_dsn])
    assert again.exit_code == 0
    assert f"up to date, schema version {LATEST_VERSION}" in again.output


def test_status_counts_rows(store: Store) -> None:
    store.insert_events([sample(RequestEvent, "typical")])
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    res = runner.invoke(app, ["status", "--dsn", dsn], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    # The same words as `status --service` (issue 20: "(current)" here, "(latest 8)" there).
    assert f"schema       version {LATEST_VERSION} (latest {LATEST_VERSION}: current)" in res.output
    line = next(ln for ln in res.output.splitlines() if "│ requests " in ln)
    assert line.split("│")[2].strip() == "1"
    assert "data dir" in res.output


def test_status_of_uninitialised_store_says_what_to_run(store_dsn: str) -> None:
    res = runner.invoke(app, ["status", "--dsn", store_dsn], env={"COLUMNS": "300"})
    assert res.exit_code == 1  # a monitoring script reads the code: this store cannot take rows
    assert "not initialised: run `inferensics init`" in res.output
    assert f"schema is version 0, this inferensics needs {LATEST_VERSION}: run `inferensics init`" in res.output


def test_status_of_a_missing_directory_says_so_and_creates_nothing(tmp_path: Path) -> None:
    """A store not initialised: exit 1, as the README says (it was 2, a monitoring check's 'cannot ask')."""
    missing = tmp_path / "typo" / "store"
    res = runner.invoke(app, ["status", "--dsn", f"chdb://{missing}"])
    assert res.exit_code == 1
    assert f"no store at {missing}: the directory does not exist" in res.output
    assert not (tmp_path / "typo").exists()


def test_bad_dsn_is_one_line_and_exit_2() -> None:
    res = runner.invoke(app, ["status", "--dsn", "mysql://nope"])
    assert res.exit_code == 2
    assert "unknown scheme 'mysql'" in res.output


def test_status_of_a_store_it_cannot_reach_exits_1() -> None:
    """A store that is unavailable (nothing listens at the server's port) exits 1 with one line, as the README
    says; 2 is for usage errors and a service that cannot be reached or refuses the token."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    res = runner.invoke(app, ["status", "--dsn", f"http://u:p@127.0.0.1:{port}/db"], env={"COLUMNS": "300"})
    assert res.exit_code == 1, res.output
    assert f"cannot open store http://u:***@127.0.0.1:{port}/db" in res.output
    assert "Traceback" not in res.output


@pytest.mark.slow
def test_status_of_a_store_a_service_holds_exits_1(tmp_path: Path) -> None:
    """The store is unavailable to this process while `serve` owns it: 1, and the line says to ask the service."""
    from tests.collector.service.harness import new_service

    with new_service(tmp_path) as svc:
        done = subprocess.run(
            [sys.executable, "-m", "inferensics.cli", "status", "--dsn", svc.dsn],
            env={**svc.env, "COLUMNS": "300"},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 1, done.stderr
    assert "another process holds the data directory" in done.stderr
    assert "--service URL" in done.stderr
