"""``inferensics serve`` as a real process, and ``inferensics status --service`` against it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.collector.service.testing import encode_request
from inferensics.schema.events import RequestEvent
from inferensics.schema.migrations import LATEST_VERSION
from tests.collector.service.harness import ADMIN, INGEST, new_service
from tests.collector.service.otel import request
from tests.polling import poll

runner = CliRunner()


@pytest.mark.slow
def test_serve_then_status_through_the_service(tmp_path: Path) -> None:
    svc = new_service(tmp_path, via_cli=True).start()
    try:
        body = encode_request([request(i, run="cli") for i in range(12)])
        headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {INGEST}"}
        r = httpx.post(f"{svc.url}/v1/traces", content=body, headers=headers)
        assert r.status_code == 200
        client = svc.client()
        rows = lambda: client.status()["store"]["row_counts"][RequestEvent.TABLE.name]  # noqa: E731
        poll(rows, lambda n: n >= 12, timeout=60, interval=0.1)
        res = runner.invoke(app, ["status", "--service", svc.url, "--token", ADMIN], env={"COLUMNS": "200"})
        assert res.exit_code == 0, res.output
        assert f"service      {svc.url}" in res.output
        assert f"store        {svc.dsn} (ok)" in res.output
        assert f"spool        {svc.spool_dir}:" in res.output
        assert f"schema       version {LATEST_VERSION} (latest {LATEST_VERSION}: current)" in res.output
        line = next(ln for ln in res.output.splitlines() if "│ requests " in ln)
        assert line.split("│")[2].strip() == "12"
        assert "rejected     " not in res.output  # nothing refused yet
        env = {"INFERENSICS_SERVICE_URL": svc.url, "INFERENSICS_TOKEN": "wrong", "COLUMNS": "200"}
        bad = runner.invoke(app, ["status"], env=env)
        assert bad.exit_code == 2
        assert "refused the token" in bad.output
        # A refused export says why in `status`, not only in /metrics.
        refused = httpx.post(f"{svc.url}/v1/traces", content=body, headers={**headers, "Authorization": "Bearer no"})
        assert refused.status_code == 401
        res = runner.invoke(app, ["status", "--service", svc.url, "--token", ADMIN], env={"COLUMNS": "200"})
        assert res.exit_code == 0, res.output
        assert "rejected     unauthorized 2" in res.output, res.output
    finally:
        svc.stop()


def test_status_of_an_unreachable_service_says_so() -> None:
    res = runner.invoke(app, ["status", "--service", "http://127.0.0.1:9", "--token", "x"])
    assert res.exit_code == 2
    assert "cannot reach the inferensics service at http://127.0.0.1:9" in res.output
    assert "is it running (`inferensics serve`)? Pass its URL with --service or $INFERENSICS_SERVICE_URL" in res.output


def test_serve_refuses_bad_settings(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('port = "many"\n')
    res = runner.invoke(app, ["serve", "--config", str(cfg)], env={"INFERENSICS_TOKENS": "t=admin"})
    assert res.exit_code == 2
    assert "setting port" in res.output
    res = runner.invoke(app, ["serve", "--port", "0"], env={"INFERENSICS_TOKENS": "", "COLUMNS": "300"})
    assert res.exit_code == 2
    assert "no tokens configured" in res.output
    assert "a [tokens] table in --config" in res.output  # plain text, not a markup tag that vanishes


def test_serve_help_keeps_its_bracketed_text() -> None:
    res = runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0
    for text in ("[default: 127.0.0.1]", "[default: 4318]", "(settings and [tokens])", "config file's [tokens] table"):
        assert text in res.output, text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "--port", "99999"], "setting port (argument): at most 65535, got 99999"),
        (["dashboard", "--port", "70000"], "Invalid value for '--port'"),
        (["demo", "--port", "65536"], "Invalid value for '--port'"),
        (["demo", "--dashboard-port", "0"], "Invalid value for '--dashboard-port'"),
    ],
)
def test_a_port_out_of_range_is_a_usage_error(args: list[str], message: str) -> None:
    """The socket's bind() used to end these in an OverflowError traceback, after the store was opened."""
    res = runner.invoke(app, args, env={"INFERENSICS_TOKENS": "t=admin", "INFERENSICS_AUTH": "false", "COLUMNS": "300"})
    assert res.exit_code == 2, res.output
    assert message in res.output


def test_serve_on_a_port_in_use_says_so_before_opening_anything(tmp_path: Path) -> None:
    """A taken port is a one-line usage error, before the store, the spool or a dashboard is started (it
    used to log 'collector on http://...', open the store and spool, then end in uvicorn's bind error)."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    store = tmp_path / "store"
    env = {"INFERENSICS_TOKENS": "t=admin+read", "COLUMNS": "300"}
    try:
        args = ["serve", "--port", str(port), "--dsn", f"chdb://{store}", "--with-dashboard", "--dashboard-port", "1"]
        res = runner.invoke(app, args, env=env)
        assert res.exit_code == 2, res.output
        assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in res.output
        assert "choose another --port" in res.output
        assert "dashboard on" not in res.output
        assert not store.exists()
        assert not (tmp_path / "store-spool").exists()
        assert not (tmp_path / "spool").exists()
        module = subprocess.run(
            [sys.executable, "-m", "inferensics.collector.service", "--port", str(port), "--dsn", f"chdb://{store}"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert module.returncode == 2, module.stderr
        assert f"error: cannot listen on 127.0.0.1:{port}: the port is in use" in module.stderr
        assert not store.exists()
    finally:
        taken.close()
    res = runner.invoke(app, ["serve", "--host", "no-such-host.invalid", "--dsn", f"chdb://{store}"], env=env)
    assert res.exit_code == 2, res.output
    assert "cannot listen on no-such-host.invalid:4318: the host does not resolve" in res.output
    assert not store.exists()


@pytest.mark.slow
def test_a_service_that_crashes_prints_its_stacks_and_ends(tmp_path: Path) -> None:
    """A fatal signal in the service (a crash in chDB's or another library's native code): Python's fatal-error
    report with every thread's stack is in its log, and the process ends by that signal. Before, nothing was
    printed (no handler of the service's own), and chDB's handlers held the process for minutes."""
    svc = new_service(tmp_path, via_cli=True).start()
    assert svc.proc is not None
    svc.proc.send_signal(signal.SIGSEGV)
    assert svc.proc.wait(60) == -signal.SIGSEGV  # a hang guard, not a timing: the old code was alive at it
    log = svc.log.read_text(errors="replace")
    assert "Fatal Python error: Segmentation fault" in log
    assert "most recent call first" in log
