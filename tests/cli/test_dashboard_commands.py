"""``inferensics dashboard`` and ``inferensics serve --with-dashboard`` as a person runs them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.dashboard.launcher import STORM_FLOOR_ENV, dashboard_env
from tests.collector.service.harness import TOKENS, free_port
from tests.polling import poll

pytestmark = pytest.mark.slow


def wait_for(url: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    """Until ``url`` answers 200 (or the process died)."""

    def answers() -> bool:
        assert proc.poll() is None, f"exited with {proc.returncode}"
        try:
            return httpx.get(url, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    assert poll(answers, bool, timeout=timeout, interval=0.2), f"{url} did not answer in {timeout} s"


@pytest.mark.parametrize("service", ["notaurl", "ftp://host:1", "http://", "http://[::1"])
def test_a_service_url_that_cannot_work_is_a_usage_error(service: str) -> None:
    """It started the dashboard, whose every page then failed; now it stops at once and says why."""
    result = CliRunner().invoke(app, ["dashboard", "--service", service], env={"COLUMNS": "300"})
    assert result.exit_code == 2, result.output
    assert f"--service {service!r}:" in result.output
    assert "expected http(s)://host:port" in result.output


def test_dashboard_help_names_its_options() -> None:
    result = CliRunner().invoke(app, ["dashboard", "--help"], env={"COLUMNS": "300"})
    assert result.exit_code == 0
    for option in ("--port", "--service", "--token", "INFERENSICS_SERVICE_URL", "INFERENSICS_TOKEN"):
        assert option in result.output
    assert "--min-recompiles" in result.output
    assert "--min-compile-seconds" in result.output


@pytest.mark.parametrize(("option", "value"), [("--min-recompiles", "0"), ("--min-compile-seconds", "0")])
def test_a_storm_floor_the_rule_refuses_is_a_usage_error(option: str, value: str) -> None:
    result = CliRunner().invoke(app, ["dashboard", option, value], env={"COLUMNS": "300"})
    assert result.exit_code == 2, result.output
    assert option in result.output


def test_the_storm_floors_reach_the_dashboard_process() -> None:
    env = dashboard_env("http://127.0.0.1:1", None, {}, {"min_recompiles": 3, "min_compile_seconds": 2.5})
    assert env[STORM_FLOOR_ENV["min_recompiles"]] == "3"
    assert env[STORM_FLOOR_ENV["min_compile_seconds"]] == "2.5"
    assert not set(STORM_FLOOR_ENV.values()) & set(dashboard_env("http://127.0.0.1:1", None, {}))


def test_serve_with_dashboard_starts_both_and_stops_both(tmp_path: Path) -> None:
    service_port, dashboard_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}
    env["INFERENSICS_TOKENS"] = TOKENS
    cmd = [
        sys.executable, "-m", "inferensics.cli", "serve", "--port", str(service_port),
        "--dsn", f"chdb://{tmp_path / 'db'}", "--spool-dir", str(tmp_path / "spool"),
        "--with-dashboard", "--dashboard-port", str(dashboard_port),
    ]  # fmt: skip
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(f"http://127.0.0.1:{service_port}/readyz", proc)
        wait_for(f"http://127.0.0.1:{dashboard_port}/_stcore/health", proc)
        assert f"dashboard on http://127.0.0.1:{dashboard_port}" in log.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(90)
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{dashboard_port}/_stcore/health", timeout=2)


def test_sigterm_stops_the_dashboard_child_too(tmp_path: Path) -> None:
    """``kill`` of ``inferensics dashboard`` ended it alone: its Streamlit child kept serving the port."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}
    cmd = [sys.executable, "-m", "inferensics.cli", "dashboard", "--port", str(port), "--service", "http://127.0.0.1:9"]
    log = tmp_path / "dashboard.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(f"http://127.0.0.1:{port}/_stcore/health", proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0, log.read_text()
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
