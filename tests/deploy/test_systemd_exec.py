"""The units' command lines run by hand, as systemd would run them.

Each unit's ``ExecStartPre`` lines, in order, then its ``ExecStart``, with ``${VAR}`` expanded from its
``Environment=`` lines overlaid by the example environment file (the file wins, as in systemd; an unset variable
becomes an empty word) and by what a test writes into that file, the installed binary pointed at this checkout's
command. No ClickHouse server runs here: the collector's DSNs name an embedded store in a scratch directory
(real chDB), and the dashboard's collector is a closed port (it starts with a warning).
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from inferensics.schema.migrations import LATEST_VERSION
from tests.collector.service.harness import free_port
from tests.deploy.layout import SYSTEMD
from tests.polling import poll

INSTALLED = "/opt/inferensics/venv/bin/inferensics"
COLLECTOR = SYSTEMD / "inferensics-collector.service"
DASHBOARD = SYSTEMD / "inferensics-dashboard.service"
HERE = str(Path(sys.executable).parent / "inferensics")


def _pairs(lines: list[str]) -> dict[str, str]:
    return dict(line.split("=", 1) for line in lines)


def _unit_run(unit: Path, drop: str = "", **edits: str) -> tuple[list[list[str]], dict[str, str]]:
    """The unit's start commands (each ``ExecStartPre``, then ``ExecStart``) and environment, with ``drop``
    left out of the environment file and ``edits`` written into it."""
    text = unit.read_text(encoding="utf-8").splitlines()
    example = (SYSTEMD / "inferensics.env.example").read_text(encoding="utf-8").splitlines()
    env = _pairs([ln.removeprefix("Environment=") for ln in text if ln.startswith("Environment=")])
    env.update(_pairs([ln for ln in example if ln and not ln.startswith("#") and not ln.startswith(f"{drop}=")]))
    env.update(edits)
    commands: list[list[str]] = []
    for line in [ln for ln in text if ln.startswith("ExecStartPre=")] + [
        next(ln for ln in text if ln.startswith("ExecStart="))
    ]:
        words = shlex.split(line.split("=", 1)[1])
        argv = [re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), w) for w in words]
        assert argv[0] == INSTALLED
        commands.append([HERE, *argv[1:]])
    return commands, env


def _process_env(env: dict[str, str], home: Path) -> dict[str, str]:
    process_env = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}
    process_env.update(env, HOME=str(home))
    return process_env


def _start(unit: Path, tmp_path: Path, drop: str = "", **edits: str) -> tuple[subprocess.Popen[bytes], Path, str]:
    """Run the unit's ExecStartPre commands (each must succeed, as systemd requires) and start its ExecStart;
    return the process, its log and what the pre-start commands printed."""
    commands, env = _unit_run(unit, drop, **edits)
    pre_output = ""
    for argv in commands[:-1]:
        done = subprocess.run(
            argv, env=_process_env(env, tmp_path), capture_output=True, text=True, timeout=300, check=False
        )
        pre_output += done.stdout + done.stderr
        assert done.returncode == 0, f"ExecStartPre {argv[1:]} failed, so systemd would not start:\n{pre_output}"
    log = tmp_path / "unit.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(commands[-1], env=_process_env(env, tmp_path), stdout=out, stderr=subprocess.STDOUT)
    return proc, log, pre_output


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def _wait_started(proc: subprocess.Popen[bytes], log: Path, started: str) -> str:
    up = poll(lambda: proc.poll() is not None or started in log.read_text(), bool, timeout=120, interval=0.1)
    assert up, log.read_text()
    assert proc.poll() is None, log.read_text()
    return log.read_text()


def _embedded(tmp_path: Path) -> dict[str, str]:
    """The environment file's store lines for an embedded store (both DSNs the same, as the example says)."""
    store = f"chdb://{tmp_path / 'store'}"
    return {"INFERENSICS_MIGRATE_DSN": store, "INFERENSICS_DSN": store}


@pytest.mark.parametrize(
    ("unit", "drop", "started", "listening"),
    [
        (COLLECTOR, "", "inferensics collector on http://", "0.0.0.0"),  # the example's INFERENSICS_HOST
        (COLLECTOR, "INFERENSICS_HOST", "inferensics collector on http://", "127.0.0.1"),
        (DASHBOARD, "INFERENSICS_DASHBOARD_ADDRESS", "URL: http://", "127.0.0.1"),
    ],
    ids=["collector", "collector-without-host", "dashboard-without-address"],
)
def test_unit_listens_where_the_environment_file_says(
    tmp_path: Path, unit: Path, drop: str, started: str, listening: str
) -> None:
    """The port (and the collector's spool) come from the environment file: before, `--port 4318` and
    `--spool-dir` on the command line overrode what the operator wrote there."""
    port = free_port()
    if unit == COLLECTOR:
        edits = {"INFERENSICS_PORT": str(port), "INFERENSICS_SPOOL_DIR": str(tmp_path / "spool"), **_embedded(tmp_path)}
    else:
        closed = free_port()  # nothing there: the dashboard starts with a warning
        edits = {"INFERENSICS_DASHBOARD_PORT": str(port), "INFERENSICS_SERVICE_URL": f"http://127.0.0.1:{closed}"}
    proc, log, _ = _start(unit, tmp_path, drop, **edits)
    try:
        assert f"{started}{listening}:{port}" in _wait_started(proc, log, started)
        if unit == COLLECTOR:
            assert (tmp_path / "spool").is_dir()
    finally:
        _stop(proc)


@pytest.mark.parametrize("unit", [COLLECTOR, DASHBOARD], ids=["collector", "dashboard"])
def test_no_command_line_overrides_the_environment_file(unit: Path) -> None:
    """A flag with a value of its own on ExecStart wins over the file: every value is the file's ${VAR}."""
    commands, _ = _unit_run(unit)
    raw = [shlex.split(ln.split("=", 1)[1]) for ln in unit.read_text(encoding="utf-8").splitlines()
           if ln.startswith(("ExecStart=", "ExecStartPre="))]  # fmt: skip
    assert len(raw) == len(commands)
    for words in raw:
        for flag, value in itertools.pairwise(words):
            if flag.startswith("--"):
                assert re.fullmatch(r"\$\{\w+\}", value), f"{unit.name}: {flag} {value} overrides the environment file"


def _store_one_release_behind(path: Path) -> None:
    """A store the release before the latest migration made (its migrations less the last one)."""
    script = (
        "import sys; import inferensics.schema.migrator as m; m.MIGRATIONS = m.MIGRATIONS[:-1]\n"
        "from inferensics.schema.store import Store\n"
        "with Store.open(sys.argv[1]) as st: print(st.migrate())"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, f"chdb://{path}"], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == str(LATEST_VERSION - 1)


def test_a_restart_after_an_upgrade_migrates_the_store_before_serving(tmp_path: Path) -> None:
    """An upgrade restarts the collector (install.sh does): its start runs `inferensics init` with the
    migrating user's DSN first. Before, migrations ran in a oneshot unit that stayed 'active' after boot, so
    a restart ran none and a collector with the ingest user's DSN waited on a store it may not migrate."""
    _store_one_release_behind(tmp_path / "store")
    port = free_port()
    edits = {"INFERENSICS_PORT": str(port), "INFERENSICS_SPOOL_DIR": str(tmp_path / "spool"), **_embedded(tmp_path)}
    commands, _ = _unit_run(COLLECTOR, **edits)
    assert [argv[1] for argv in commands] == ["init", "serve"]
    proc, log, pre_output = _start(COLLECTOR, tmp_path, **edits)
    try:
        assert f"migrated, schema version {LATEST_VERSION}" in pre_output
        _wait_started(proc, log, "inferensics collector on http://")
        status = subprocess.run(
            [HERE, "status", "--service", f"http://127.0.0.1:{port}", "--token", "admin-token"],
            env=_process_env({}, tmp_path) | {"COLUMNS": "200"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert status.returncode == 0, status.stdout + status.stderr
        assert f"version {LATEST_VERSION} (latest {LATEST_VERSION}: current)" in status.stdout
    finally:
        _stop(proc)


def test_an_unset_migrate_dsn_stops_the_start_in_one_line(tmp_path: Path) -> None:
    """`init --dsn ${INFERENSICS_MIGRATE_DSN}` with the line missing gets an empty --dsn: it would have
    created an embedded store under $HOME and reported success, leaving the real store behind."""
    commands, env = _unit_run(COLLECTOR, "INFERENSICS_MIGRATE_DSN")
    done = subprocess.run(
        commands[0], env=_process_env(env, tmp_path), capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--dsn: empty" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / ".local").exists()
