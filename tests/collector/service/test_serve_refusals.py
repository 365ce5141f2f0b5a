"""``inferensics serve`` refuses settings it cannot serve with in one line naming the setting, before it
binds: an empty address (what an unset ``--host ${VAR}`` in a unit becomes) and TLS files it cannot load."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.collector.service.harness import TOKENS, free_port
from tests.collector.service.test_tls import self_signed


def _serve(tmp_path: Path, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}
    env.update({"INFERENSICS_TOKENS": TOKENS, "HOME": str(tmp_path)})
    env.update({f"INFERENSICS_{k.upper()}": v for k, v in settings.items()})
    argv = [sys.executable, "-m", "inferensics.cli", "serve", "--port", str(free_port()),
            "--dsn", f"chdb://{tmp_path / 'db'}", "--spool-dir", str(tmp_path / "spool"), *args]  # fmt: skip
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_an_empty_host_is_refused_not_bound_to_every_interface(tmp_path: Path) -> None:
    done = _serve(tmp_path, "--host", "")
    assert done.returncode == 2, done.stderr
    assert "setting host: empty" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("broken", ["missing cert", "missing key", "key of another certificate", "not PEM"])
def test_tls_files_it_cannot_load_are_refused_in_one_line(tmp_path: Path, broken: str) -> None:
    cert, key = self_signed(tmp_path)
    if broken == "missing cert":
        cert = tmp_path / "nope.pem"
    elif broken == "missing key":
        key = tmp_path / "nope.key"
    elif broken == "key of another certificate":
        other = tmp_path / "other"
        other.mkdir()
        _, key = self_signed(other)
    else:
        cert.write_text("not a certificate\n")
    done = _serve(tmp_path, tls_cert=str(cert), tls_key=str(key))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "tls_" in done.stderr
    assert not (tmp_path / "db").exists()  # refused before the store is opened
