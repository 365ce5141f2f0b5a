"""The backup and restore procedures of deploy/README.md, run for real on a store with rows.

Embedded store (chDB): stop the service, archive the data directory and its spool, unpack them somewhere
else, serve from there: the rows are there. ClickHouse server: ``BACKUP DATABASE inferensics TO Disk('backups',
NAME)`` and ``RESTORE ... FROM`` with the two elements ``deploy/clickhouse/config.d/inferensics.xml`` adds (its
backup disk moved into a scratch folder), on the engine the server runs (chDB, given that config), into a fresh
data directory that `inferensics status` then reads.
"""

from __future__ import annotations

import json
import os
import re
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
from tests.deploy.layout import DEPLOY, SERVER_CONFIG
from tests.polling import poll

ROWS = 12
README = DEPLOY / "README.md"


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


def _listed(name: str) -> list[str]:
    """A shell variable's words in deploy/README.md's move to a cluster (``VIEWS="..."``, ``TABLES="..."``)."""
    found = re.search(rf'^{name}="([^"]*)"', README.read_text(encoding="utf-8"), flags=re.MULTILINE)
    assert found, f"deploy/README.md sets no {name}"
    return found.group(1).split()


COPY = """
import json, sys, chdb
c = chdb.connect(sys.argv[1])
views, tables = json.loads(sys.argv[2]), json.loads(sys.argv[3])
one = lambda sql: c.query(sql, "CSV").data().strip()
c.query("RESTORE DATABASE inferensics AS inferensics_import FROM Disk('backups', 'move-1')")
for v in views:
    c.query(f"DETACH TABLE inferensics.{v}")
for t in tables:
    c.query(f"INSERT INTO inferensics.{t} SELECT * FROM inferensics_import.{t} SETTINGS insert_deduplicate = 0")
for v in views:
    c.query(f"ATTACH TABLE inferensics.{v}")
counts = {t: [one(f"SELECT count() FROM {db}.{t}") for db in ("inferensics_import", "inferensics")] for t in tables}
sums = {t: [one(f"SELECT sum(requests) FROM {db}.{t}") for db in ("inferensics_import", "inferensics")]
        for t in ("requests_1m", "requests_1h", "requests_1d")}
kinds = one("SELECT groupArray((name, engine)) FROM system.tables WHERE database = 'inferensics' FORMAT JSONEachRow")
print(json.dumps({"counts": counts, "sums": sums, "tables": json.loads(kinds)}))
"""


def test_the_documented_copy_to_a_cluster_keeps_every_row_and_counts_rollups_once(
    stopped_store: Path, tmp_path: Path
) -> None:
    """deploy/README.md, "Moving ... to a cluster": views detached, every table copied as it is, views attached.
    Run on the embedded engine with a restored copy as the source (no cluster here): no table left out, no rollup
    counted twice (a copy with the views attached doubles them), the views fed again after the copy."""
    views, tables = _listed("VIEWS"), _listed("TABLES")
    backups = tmp_path / "backups"
    config = _engine_config(tmp_path, backups)
    assert "BACKUP_CREATED" in _engine(
        stopped_store / "db", config, "BACKUP DATABASE inferensics TO Disk('backups', 'move-1')"
    )
    target = tmp_path / "cluster-stand-in"
    assert _cli("init", "--dsn", f"chdb://{target}", home=tmp_path).returncode == 0
    argv = [sys.executable, "-c", COPY, f"file:{target}?config-file={config}", json.dumps(views), json.dumps(tables)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert all(a == b for a, b in result["counts"].values()), result["counts"]
    assert int(result["counts"]["requests"][1]) == ROWS
    assert all(a == b == str(ROWS) for a, b in result["sums"].values()), result["sums"]
    engines = dict(result["tables"]["groupArray((name, engine))"])
    assert {n for n, e in engines.items() if e == "MaterializedView"} == set(views)
    stored = {n for n, e in engines.items() if e != "MaterializedView"}
    assert stored - set(tables) == {"schema_migrations", "ingest_seen"}, "a table the move leaves behind"
    assert set(tables) <= stored
