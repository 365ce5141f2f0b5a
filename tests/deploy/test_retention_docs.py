"""deploy/README.md's TTL change on an embedded store, run as printed (the interpreter and folder moved here).

What was missing: the top-level README's `ALTER TABLE ... MODIFY TTL` had no way to run on an embedded store: the
collector owns the folder (chDB lets one process open it) and its SQL endpoint runs read statements only. The
documented way is to stop the collector and alter the table with chDB; the unit's `inferensics init` at the next
start must leave the new TTL in place.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.deploy.layout import DEPLOY

README = (DEPLOY / "README.md").read_text(encoding="utf-8")
VENV_PYTHON = "/opt/inferensics/venv/bin/python"
STORE = "/var/lib/inferensics/store"


def _run(argv: list[str], home: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}
    env["HOME"] = str(home)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _create_table(store: Path, home: Path) -> str:
    probe = (
        "import chdb, sys; print(chdb.connect('file:' + sys.argv[1]).query("
        "'SHOW CREATE TABLE inferensics.blob_contents', 'TSVRaw').data())"
    )
    return _run([sys.executable, "-c", probe, str(store)], home)


def test_the_documented_ttl_change_on_an_embedded_store_runs_and_survives_init(tmp_path: Path) -> None:
    (line,) = [ln for ln in README.splitlines() if ln.startswith(VENV_PYTHON) and "MODIFY TTL" in ln]
    store = tmp_path / "store"
    init = [sys.executable, "-m", "inferensics.cli", "init", "--dsn", f"chdb://{store}"]
    _run(init, tmp_path)
    assert " TTL " not in _create_table(store, tmp_path)  # blob_contents keeps its rows until deleted
    _run(["bash", "-c", line.replace(VENV_PYTHON, sys.executable).replace(STORE, str(store))], tmp_path)
    ttl = "TTL toDateTime(ts) + toIntervalDay(180)"
    assert ttl in _create_table(store, tmp_path)
    assert "up to date" in _run(init, tmp_path)  # what the collector unit runs before each start
    assert ttl in _create_table(store, tmp_path)
