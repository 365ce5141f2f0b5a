"""One short ``inferensics demo`` run for the whole test session, shared by the end-to-end and story tests.

The run is the short form the issue names (60 s at 2 requests/s, seed 1, no dashboard, exit when done),
sent to a collector service of the session's own (``--service``), which stays up afterwards so the tests
can run the commands the demo printed and browse its pages. It takes 3-5 minutes on a 2-core machine, most
of it compiling; every test that needs a demo run uses this one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inferensics.demo import processes

DEMO_ARGS = ["--duration", "60", "--rate", "2", "--seed", "1", "--no-dashboard", "--exit-when-done"]
"""The short demo run (the README's short form), without the service and data-directory options."""
DEMO_TIMEOUT_S = 1200


@pytest.fixture(scope="session")
def demo_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A collector service of the session's own, on loopback, with an embedded store; its URL."""
    data_dir = tmp_path_factory.mktemp("demo-service")
    child, url = processes.start_service(data_dir, processes.free_port(4460))
    try:
        yield url
    finally:
        child.stop()


@pytest.fixture(scope="session")
def demo_run(demo_service: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run the short demo against :func:`demo_service`; its summary JSON plus ``stdout`` and ``data_dir``."""
    out: Path = tmp_path_factory.mktemp("demo-run")
    summary = out / "summary.json"
    command = [sys.executable, "-m", "inferensics.cli", "demo", *DEMO_ARGS, "--service", demo_service]
    command += ["--data-dir", str(out), "--summary-json", str(summary)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=DEMO_TIMEOUT_S, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    data: dict[str, Any] = json.loads(summary.read_text())
    data["stdout"] = result.stdout
    data["data_dir"] = str(out)
    return data
