"""SIGHUP rotates tokens without a restart: the config file's ``[tokens]`` are read again, the service keeps
serving. It used to end the process (the signal's default action), without the graceful stop."""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from inferensics.collector.service.config import load_config
from inferensics.collector.service.server import reload_auth
from tests.collector.service.harness import READ, RunningService, new_service
from tests.polling import poll

pytestmark = pytest.mark.slow


def _answer(svc: RunningService, token: str) -> int:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.get(f"{svc.url}/metrics", headers=headers, timeout=10).status_code


def _hup(svc: RunningService, log_line: str) -> None:
    assert svc.proc is not None
    seen = svc.log.read_text().count(log_line)
    svc.proc.send_signal(signal.SIGHUP)
    poll(lambda: svc.log.read_text().count(log_line), lambda n: n > seen, timeout=20, interval=0.1)
    assert svc.proc.poll() is None, svc.log.read_text()[-2000:]


def test_sighup_reads_the_config_files_tokens_again_and_keeps_serving(tmp_path: Path) -> None:
    cfg = tmp_path / "collector.toml"
    cfg.write_text('[tokens]\n"old-read-token" = ["read"]\n')
    with new_service(tmp_path, config=str(cfg)) as svc:
        assert (_answer(svc, "old-read-token"), _answer(svc, "new-read-token")) == (200, 401)
        cfg.write_text('[tokens]\n"new-read-token" = ["read"]\n')
        _hup(svc, "SIGHUP: 4 tokens in use")
        assert (_answer(svc, "old-read-token"), _answer(svc, "new-read-token")) == (401, 200)
        assert _answer(svc, READ) == 200  # $INFERENSICS_TOKENS, as the process started with it, still counts
        # a file that does not parse keeps the tokens in use
        cfg.write_text('[tokens]\n"new-read-token" = ["read"\n')
        _hup(svc, "SIGHUP: tokens not reloaded, the previous ones stay in use: config file")
        assert _answer(svc, "new-read-token") == 200


def test_sighup_without_a_config_file_says_how_to_rotate(tmp_path: Path) -> None:
    with new_service(tmp_path) as svc:
        _hup(svc, "SIGHUP: tokens not reloaded: they come from $INFERENSICS_TOKENS")
        assert _answer(svc, READ) == 200
    assert "restart the collector to rotate them" in svc.log.read_text()


def test_sighup_names_where_the_tokens_were_read_from(tmp_path: Path) -> None:
    """Tokens from the config file alone: the line named $INFERENSICS_TOKENS all the same."""
    cfg = tmp_path / "collector.toml"
    cfg.write_text('[tokens]\n"file-read-token" = ["read"]\n"file-admin-token" = ["admin"]\n')
    svc = new_service(tmp_path, config=str(cfg))
    del svc.env["INFERENSICS_TOKENS"]
    with svc:
        cfg.write_text('[tokens]\n"file-read-token" = ["read"]\n')
        _hup(svc, "SIGHUP: 1 token in use")
        assert (_answer(svc, "file-read-token"), _answer(svc, READ)) == (200, 401)
    lines = [ln for ln in svc.log.read_text().splitlines() if "SIGHUP" in ln]
    assert len(lines) == 1, lines
    assert lines[0].endswith(f"SIGHUP: 1 token in use, the config file read again: 1 from config file {cfg}")
    assert "INFERENSICS_TOKENS" not in lines[0]


def test_sighup_without_a_config_file_names_the_arguments(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tokens handed as an argument (no config file, no $INFERENSICS_TOKENS): the line said they came from
    $INFERENSICS_TOKENS."""
    monkeypatch.delenv("INFERENSICS_TOKENS", raising=False)
    config = load_config({"tokens": "arg-token=read"}, environ={})
    state = SimpleNamespace(config=config, auth=None)
    with caplog.at_level(logging.WARNING, logger="inferensics.collector.service"):
        assert reload_auth(state) is False  # type: ignore[arg-type]
    (line,) = [r.getMessage() for r in caplog.records if "SIGHUP" in r.getMessage()]
    assert line.startswith("SIGHUP: tokens not reloaded: they come from the arguments the service started with, ")
    assert "INFERENSICS_TOKENS" not in line
    assert state.auth is None
