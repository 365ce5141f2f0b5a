"""``inferensics demo --exit-when-done`` with its own collector service: the service stops when the demo exits,
so every command the demo printed must work afterwards, run exactly as printed.

The session's other demo run (tests/demo/conftest.py) sends to a service that outlives it (``--service``);
this one lets the demo start and stop its own, as a user's short run does: the README's short form at 20 s.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inferensics.collector.client import ServiceClient, ServiceError
from inferensics.demo import processes
from inferensics.schema.dsn import REPORT_DIR_ENV
from tests.demo.conftest import DEMO_TIMEOUT_S
from tests.polling import poll

pytestmark = pytest.mark.slow

SHORT_RUN = ["--duration", "20", "--rate", "2", "--seed", "1", "--no-dashboard", "--exit-when-done"]
CANARY_EXIT = {0: "pass", 1: "fail", 3: "inconclusive"}
"""``inferensics canary compare``'s exit status per verdict (2 is a usage or connection error)."""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}


def _argv(command: str) -> tuple[dict[str, str], list[str]]:
    """A printed command as the shell runs it: its leading ``NAME=value`` words and this checkout's CLI."""
    words = shlex.split(command)
    env = _env()
    while "=" in words[0]:
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    assert words[0] == "inferensics", command
    return env, [sys.executable, "-m", "inferensics.cli", *words[1:]]


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A printed command, with the report folder (``$INFERENSICS_REPORT_DIR``) in ``cwd/reports``."""
    env, argv = _argv(command)
    env = {**env, "COLUMNS": "250", REPORT_DIR_ENV: str(cwd / "reports")}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def own_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The short demo with its own service (no ``--service``); its stdout and data directory."""
    out = tmp_path_factory.mktemp("demo-exit")
    port = processes.free_port(4480)
    command = [sys.executable, "-m", "inferensics.cli", "demo", *SHORT_RUN, "--port", str(port), "--data-dir", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=DEMO_TIMEOUT_S, check=False, env=_env())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {"stdout": result.stdout, "data_dir": out, "url": f"http://127.0.0.1:{port}"}


@pytest.fixture(scope="module")
def printed(own_run: dict[str, Any]) -> dict[str, str]:
    """The commands printed after the summary, by subcommand (``report``, ``canary``, ``serve``, ...)."""
    lines = own_run["stdout"].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("try"))
    found = {}
    for line in lines[start + 1 :]:
        if line.startswith("  ") and "inferensics " in line:
            words = [w for w in shlex.split(line) if "=" not in w]
            found[words[1]] = line.strip()
    return found


@pytest.fixture(scope="module")
def restarted(printed: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The service started with the printed ``serve`` command (after the store-reading commands ran); its URL."""
    env, argv = _argv(printed["serve"])
    root = tmp_path_factory.mktemp("restarted")
    port = argv[argv.index("--port") + 1]
    with (root / "serve.log").open("wb") as log:
        proc = subprocess.Popen(argv, cwd=root, env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            with ServiceClient(url, timeout=5) as client:
                return bool(client.health().get("ready"))
        except ServiceError:
            return proc.poll() is not None

    try:
        assert poll(ready, bool, timeout=120, interval=0.5), (root / "serve.log").read_text()[-2000:]
        assert proc.poll() is None, (root / "serve.log").read_text()[-2000:]
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_the_demos_own_service_is_gone_after_it_exits(own_run: dict[str, Any], printed: dict[str, str]) -> None:
    assert set(printed) == {"requests", "report", "canary", "status", "serve", "replay", "dashboard"}, own_run[
        "stdout"
    ][-2500:]
    with pytest.raises(ServiceError, match="cannot reach"), ServiceClient(own_run["url"], timeout=5) as client:
        client.health()
    # Nothing printed sends the reader to a service that no longer runs, but for the lines that start one first.
    store_commands = [printed[name] for name in ("requests", "report", "canary", "status")]
    assert all("--service" not in c and "--dsn chdb://" in c for c in store_commands), store_commands


def test_the_printed_store_commands_work_after_the_demo_exited(
    own_run: dict[str, Any], printed: dict[str, str], tmp_path: Path
) -> None:
    status = _run(printed["status"], tmp_path)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "requests" in status.stdout
    opened = _run(printed["requests"], tmp_path)  # the last requests command printed: requests --id of the NaN one
    assert opened.returncode == 0, opened.stdout + opened.stderr
    assert opened.stdout.startswith(f"request {shlex.split(printed['requests'])[3]}"), opened.stdout
    report = _run(printed["report"], tmp_path)
    assert report.returncode == 0, report.stdout + report.stderr
    assert list((tmp_path / "reports").glob("store-*/weekly-*.html")), report.stdout
    canary = _run(printed["canary"], tmp_path)
    verdict = re.search(r"canary verdict for \w+: (\w+)", own_run["stdout"])
    assert verdict, own_run["stdout"][-2000:]
    assert CANARY_EXIT.get(canary.returncode) == verdict.group(1), canary.stdout + canary.stderr


def test_the_printed_replay_works_through_the_printed_service(
    printed: dict[str, str], restarted: str, tmp_path: Path
) -> None:
    assert f"--service {restarted}" in printed["replay"]
    replay = _run(f"{printed['replay']} --out {tmp_path / 'verdict'}", tmp_path)
    assert replay.returncode == 0, replay.stdout[-2000:] + replay.stderr[-2000:]
    assert re.search(r"^replay [0-9a-f]{32} recorded in replay_results$", replay.stdout, re.M), replay.stdout
    assert json.loads((tmp_path / "verdict" / "verdict.json").read_text())["category"] == "inputs"  # the NaN request
    assert f"--service {restarted}" in printed["dashboard"]
