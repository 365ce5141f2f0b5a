"""What a first-time operator types wrong in the environment file, refused in one line before anything binds
or opens; and ``status --service`` exits non-zero while what it checks is down, so a monitoring script sees it.

Each command runs as its own process, as a unit or a shell runs it (real service, real chDB where one opens).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from inferensics.collector.service.config import load_config
from tests.collector.service.harness import ADMIN, TOKENS, free_port, new_service

CLI = [sys.executable, "-m", "inferensics.cli"]


def _run(tmp_path: Path, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}
    env.update({"INFERENSICS_TOKENS": TOKENS, "HOME": str(tmp_path), "COLUMNS": "300"})
    env.update({f"INFERENSICS_{k.upper()}": v for k, v in settings.items()})
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=120, check=False)


def _serve(tmp_path: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    store, spool = f"chdb://{tmp_path / 'db'}", str(tmp_path / "spool")
    return _run(tmp_path, "serve", "--port", str(free_port()), "--dsn", store, "--spool-dir", spool, **settings)


def _one_line(done: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert done.returncode == code, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("tokens", "said"),
    [
        # the walk's case: "b " was kept as a token no client can send (the service strips the header)
        (
            "ingest-token=ingest, b =read",
            "entry 2 (token '…' (1 character, a space after it), roles 'read'): the token has spaces around it",
        ),
        (
            "ingest-token=ingest,ingest-token=read",
            "entry 2 (token 'in…' (12 characters), roles 'read'): the token is listed twice",
        ),
        (
            "ingest-token=ingest,s3cret-admin=admn",
            "entry 2 (token 's3…' (12 characters), roles 'admn'): unknown roles ['admn']",
        ),
        ("ingest-token=ingest,read-token= read", "unknown roles [' read']"),
        ("ingest-token", "entry 1 (token 'in…' (12 characters), roles ''): expected token=role+role"),
        ("a token=read", "a character a bearer token cannot carry"),
    ],
    ids=["space-in-token", "duplicate", "unknown-role", "space-before-role", "no-roles", "space-inside"],
)
def test_a_token_list_is_parsed_strictly(tmp_path: Path, tokens: str, said: str) -> None:
    line = _one_line(_serve(tmp_path, tokens=tokens))
    assert "tokens ($INFERENSICS_TOKENS): entry " in line, line
    assert said in line, line
    assert "token=role+role,token=role" in line  # the expected form
    assert "s3cret-admin" not in line  # the secret itself is never printed
    assert not (tmp_path / "db").exists()  # refused before the store is opened


def test_a_token_list_with_spaces_after_its_commas_is_fine() -> None:
    """Spaces between entries are layout, not part of a token: `a=ingest, b=read` keeps serving."""
    config = load_config(environ={"INFERENSICS_TOKENS": "ingest-token=ingest, read-token=read+replay ,"})
    assert config.tokens == {"ingest-token": frozenset({"ingest"}), "read-token": frozenset({"read", "replay"})}


def test_a_token_with_base64_padding_keeps_it() -> None:
    """A base64 token ends in '=' padding: the list split each entry at its first '=', so 'dG9rZW4==' became
    the token 'dG9rZW4' with the roles '==ingest' (refused as unknown roles). Roles never hold '='."""
    config = load_config(environ={"INFERENSICS_TOKENS": "dG9rZW4===ingest,cmVhZA==read+replay"})
    assert config.tokens == {"dG9rZW4==": frozenset({"ingest"}), "cmVhZA=": frozenset({"read", "replay"})}


def test_a_token_of_the_config_file_with_spaces_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[tokens]\n"admin-token " = ["admin"]\n')
    line = _one_line(_run(tmp_path, "serve", "--port", str(free_port()), "--config", str(config), tokens=""))
    assert f"tokens (config file {config}): token 'ad…' (11 characters, a space after it)" in line


@pytest.mark.parametrize("cap", ["0", "-1", "lots", "65535"])
def test_a_spool_cap_outside_its_range_is_refused(tmp_path: Path, cap: str) -> None:
    """A cap of 0 was taken: every request then answered 429/503 while the service looked configured."""
    line = _one_line(_serve(tmp_path, spool_max_bytes=cap))
    assert "setting spool_max_bytes ($INFERENSICS_SPOOL_MAX_BYTES)" in line
    assert "(valid: 65536 or more)" in line
    assert not (tmp_path / "db").exists()


@pytest.mark.parametrize(("args", "settings"), [(["--address", ""], {}), ([], {"dashboard_address": " "})])
def test_the_dashboard_refuses_an_empty_address(tmp_path: Path, args: list[str], settings: dict[str, str]) -> None:
    """Streamlit listens on every interface for an empty address, as `serve --host ""` would have."""
    line = _one_line(_run(tmp_path, "dashboard", "--port", str(free_port()), *args, **settings))
    assert "--address: empty; give an address to listen on (127.0.0.1: this machine only" in line
    assert "$INFERENSICS_DASHBOARD_ADDRESS" in line


def test_status_of_a_service_whose_store_is_down_exits_1_and_says_what_to_do(tmp_path: Path) -> None:
    """It printed the store as '? (UNAVAILABLE)' and exited 0: a monitoring script saw a healthy service."""
    closed = free_port()
    svc = new_service(tmp_path)
    svc.dsn_override = f"http://inferensics_ingest:pw@127.0.0.1:{closed}/inferensics"  # no server there
    svc.start(ready="/healthz")
    try:
        done = _run(tmp_path, "status", "--service", svc.url, "--token", ADMIN)
    finally:
        svc.stop()
    line = _one_line(done, code=1)
    assert "store        (the service could not open it) (UNAVAILABLE)" in done.stdout
    assert "last error" in done.stdout
    assert "the store is unavailable: the service acknowledges into its spool until the spool is full" in line
    assert "spool        " in done.stdout  # the rest of the status is still printed


def test_status_of_a_healthy_service_exits_0(tmp_path: Path) -> None:
    with new_service(tmp_path) as svc:
        done = _run(tmp_path, "status", "--service", svc.url, "--token", ADMIN)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"store        {svc.dsn} (ok)" in done.stdout
    assert not done.stderr.strip()
