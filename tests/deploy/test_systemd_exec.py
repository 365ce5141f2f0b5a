"""The units' command lines run by hand, as systemd would run them.

Each unit's ``ExecStart`` with ``${VAR}`` expanded from its ``Environment=`` lines overlaid by the example
environment file (the file wins, as in systemd; an unset variable becomes an empty word), the installed
binary pointed at this checkout's command, and a free port and a scratch spool in place of the unit's. No
ClickHouse server runs here: the collector's DSN names a closed port, so it serves ``/healthz`` while it
retries the store, and the dashboard starts with a warning that the collector is not there.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.collector.service.harness import free_port
from tests.deploy.layout import SYSTEMD
from tests.polling import poll

INSTALLED = "/opt/inferensics/venv/bin/inferensics"
COLLECTOR = SYSTEMD / "inferensics-collector.service"
DASHBOARD = SYSTEMD / "inferensics-dashboard.service"


def _pairs(lines: list[str]) -> dict[str, str]:
    return dict(line.split("=", 1) for line in lines)


def _unit_run(unit: Path, drop: str) -> tuple[list[str], dict[str, str]]:
    """The unit's argv and environment, with ``drop`` left out of the environment file."""
    text = unit.read_text(encoding="utf-8").splitlines()
    example = (SYSTEMD / "inferensics.env.example").read_text(encoding="utf-8").splitlines()
    env = _pairs([ln.removeprefix("Environment=") for ln in text if ln.startswith("Environment=")])
    env.update(_pairs([ln for ln in example if ln and not ln.startswith("#") and not ln.startswith(f"{drop}=")]))
    line = next(ln for ln in text if ln.startswith("ExecStart="))
    words = shlex.split(line.removeprefix("ExecStart="))
    argv = [re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), w) for w in words]
    assert argv[0] == INSTALLED
    argv[0] = str(Path(sys.executable).parent / "inferensics")
    return argv, env


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
    argv, env = _unit_run(unit, drop)
    port = free_port()
    argv[argv.index("--port") + 1] = str(port)
    if "--spool-dir" in argv:
        argv[argv.index("--spool-dir") + 1] = str(tmp_path / "spool")
    closed = free_port()
    env["INFERENSICS_DSN"] = f"http://inferensics_ingest:pw@127.0.0.1:{closed}/inferensics"  # nothing there
    process_env = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}
    process_env.update(env, HOME=str(tmp_path))
    log = tmp_path / "unit.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=process_env, stdout=out, stderr=subprocess.STDOUT)
    try:
        up = poll(lambda: proc.poll() is not None or started in log.read_text(), bool, timeout=90, interval=0.1)
        assert up, log.read_text()
        assert proc.poll() is None, log.read_text()
        assert f"{started}{listening}:{port}" in log.read_text()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
