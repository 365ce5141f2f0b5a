"""The backup and restore procedures of deploy/README.md, run for real on a store with rows.

Embedded store (chDB): stop the service, archive the data directory and its spool, unpack them somewhere
else, serve from there: the rows are there. ClickHouse server: ``BACKUP DATABASE inferensics TO Disk('backups',
NAME)`` and ``RESTORE ... FROM`` with the two elements ``deploy/clickhouse/config.d/inferensics.xml`` adds (its
backup disk moved into a scratch folder), on the engine the server runs (chDB, given that config), into a fresh
data directory that `inferensics status` then reads.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import httpx
import pytest

from inferensics.collector.service.testing import encode_request
from inferensics.schema.migrations import LATEST_VERSION
from tests.collector.service.harness import ADMIN, INGEST, new_service
from tests.collector.service.otel import request
from tests.deploy.layout import SERVER_CONFIG
from tests.polling import poll

ROWS = 12


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}
    env.update(HOME=str(home), COLUMNS="200")
    argv = [sys.executable, "-m", "inferensics.cli", *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)


def _requests_in(status_output: str) -> int:
    line = next(ln for ln in status_output.splitlines() if "│ requests " in ln)
    return int(line.split("│")[2].strip().replace(",", ""))


@pytest.fixture(scope="module")
def stopped_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A service's folder after it took ROWS requests and was stopped: ``db`` (the store) and ``spool``."""
    root = tmp_path_factory.mktemp("origin")
    with new_service(root) as svc:
        body = encode_request([request(i, run="backup") for i in range(ROWS)])
        headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {INGEST}"}
        assert httpx.post(f"{svc.url}/v1/traces", content=body, headers=headers, timeout=30).status_code == 200
        client = svc.client(ADMIN)
        rows = lambda: client.status()["store"]["row_counts"].get("requests", 0)  # noqa: E731
        assert poll(rows, lambda n: n >= ROWS, timeout=90, interval=0.2) == ROWS
    return root


def test_an_embedded_store_copied_while_stopped_restores_elsewhere(stopped_store: Path, tmp_path: Path) -> None:
    """deploy/README.md: stop, `tar -C DIR -czf FILE store spool`, unpack into a fresh folder, serve."""
    archive = tmp_path / "inferensics-backup.tar.gz"
    subprocess.run(["tar", "-C", str(stopped_store), "-czf", str(archive), "db", "spool"], check=True)
    fresh = tmp_path / "restored"
    fresh.mkdir()
    subprocess.run(["tar", "-C", str(fresh), "-xzf", str(archive)], check=True)
    svc = new_service(fresh)  # another path than the one the store was written at
    with svc:
        done = _cli("status", "--service", svc.url, "--token", ADMIN, home=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"store        chdb://{fresh / 'db'} (ok)" in done.stdout
    assert f"version {LATEST_VERSION} (latest {LATEST_VERSION}: current)" in done.stdout
    assert _requests_in(done.stdout) == ROWS


def _engine_config(tmp_path: Path, backups: Path) -> Path:
    """The deploy config's backup elements, their folder moved to ``backups``, as a config file for chDB."""
    shipped = ET.parse(SERVER_CONFIG).getroot()
    config = ET.Element("clickhouse")
    for name in ("storage_configuration", "backups"):
        element = shipped.find(name)
        assert element is not None, f"{SERVER_CONFIG.name} has no <{name}>"
        config.append(element)
    for node in config.iter():
        if node.text and node.text.strip() == "/var/lib/clickhouse/backups/":
            node.text = f"{backups}/"
    path = tmp_path / "engine.xml"
    ET.ElementTree(config).write(path)
    return path


def _engine(data: Path, config: Path, sql: str) -> str:
    """Run one statement on the engine over ``data`` with ``config`` (its own process: one store a process)."""
    script = "import sys, chdb\nprint(chdb.connect(sys.argv[1]).query(sys.argv[2], 'CSV'))"
    argv = [sys.executable, "-c", script, f"file:{data}?config-file={config}", sql]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_server_backup_restores_into_a_fresh_store(stopped_store: Path, tmp_path: Path) -> None:
    """deploy/README.md: BACKUP DATABASE inferensics TO Disk('backups', NAME), then RESTORE on a fresh server."""
    backups = tmp_path / "backups"
    config = _engine_config(tmp_path, backups)
    made = _engine(stopped_store / "db", config, "BACKUP DATABASE inferensics TO Disk('backups', 'nightly-1')")
    assert "BACKUP_CREATED" in made
    assert (backups / "nightly-1" / ".backup").is_file()
    fresh = tmp_path / "fresh-server"
    restored = _engine(fresh, config, "RESTORE DATABASE inferensics FROM Disk('backups', 'nightly-1')")
    assert "RESTORED" in restored
    done = _cli("status", "--dsn", f"chdb://{fresh}", home=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"version {LATEST_VERSION} (latest {LATEST_VERSION}: current)" in done.stdout
    assert _requests_in(done.stdout) == ROWS
