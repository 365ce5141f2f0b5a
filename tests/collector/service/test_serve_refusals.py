"""``inferensics serve`` refuses settings it cannot serve with in one line naming the setting, before it
binds: an empty address (what an unset ``--host ${VAR}`` in a unit becomes) and TLS files it cannot load; and,
before it opens the store, a spool folder it cannot make or that another service holds, and an embedded store
another process holds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from inferensics.collector.service.spool import SUFFIX, Spool
from tests.collector.service.harness import TOKENS, free_port, new_service
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


@pytest.mark.parametrize("where", ["a file", "under a file", "not creatable", "config file"])
def test_a_spool_dir_that_cannot_be_a_folder_is_refused_in_one_line(tmp_path: Path, where: str) -> None:
    """An existing file, or a folder that cannot be made, ended in a FileExistsError / FileNotFoundError
    traceback from the spool's mkdir."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    spool = {"a file": a_file, "under a file": a_file / "spool", "not creatable": Path("/proc/nope")}.get(where, a_file)
    if where == "config file":
        cfg = tmp_path / "c.toml"
        cfg.write_text(f'spool_dir = "{a_file}"\n')
        argv = [sys.executable, "-m", "inferensics.cli", "serve", "--port", str(free_port()),
                "--dsn", f"chdb://{tmp_path / 'db'}", "--config", str(cfg)]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}
        env.update({"INFERENSICS_TOKENS": TOKENS, "HOME": str(tmp_path)})
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    else:
        done = _serve(tmp_path, "--spool-dir", str(spool))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"error: spool directory {spool}: "), done.stderr
    assert "--spool-dir" in done.stderr
    assert not (tmp_path / "db").exists()  # refused before the store is opened


@pytest.mark.slow
def test_a_second_serve_on_a_held_store_or_spool_refuses_to_start(tmp_path: Path) -> None:
    """A second `serve` on the store a running one owns used to start anyway: /readyz 503, yet every export
    acknowledged, into the first service's spool folder (no lock between processes), where it waited for that
    service's next start. Now it refuses in one line, on the same spool and on a spool of its own; a service
    that waits for a server store that is down still starts (test_faults.py)."""
    (tmp_path / "first").mkdir()
    with new_service(tmp_path / "first") as first:
        same = _serve(tmp_path, "--dsn", first.dsn, "--spool-dir", str(first.spool_dir))
        own = _serve(tmp_path, "--dsn", first.dsn, "--spool-dir", str(tmp_path / "own-spool"))
        assert first.proc is not None
        for done in (same, own):
            assert done.returncode == 2, done.stderr
            assert "Traceback" not in done.stderr, done.stderr
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert f"spool directory {first.spool_dir} is in use by another process (pid {first.proc.pid})" in same.stderr
        assert "give this service its own --spool-dir" in same.stderr
        assert f"another process holds the embedded store {tmp_path / 'first' / 'db'}" in own.stderr
        assert "serve another store with --dsn" in own.stderr
        assert not list(first.spool_dir.glob(f"*{SUFFIX}"))  # nothing of the second went into the first's spool
        assert httpx.get(f"{first.url}/readyz").status_code == 200
    # The lock goes with its service: the folder is free again.
    Spool(first.spool_dir, max_bytes=1 << 20, seal_rows=10, seal_bytes=1 << 20, seal_age_s=1, exclusive=True).close()


@pytest.mark.parametrize("line", ["retry_after_s = inf", "decode_workers = 1e9"])
def test_an_int_setting_it_cannot_use_is_refused_in_one_line_before_starting(tmp_path: Path, line: str) -> None:
    """``inf`` for an int setting ended in an OverflowError traceback; ``decode_workers = 1e9`` hung silently."""
    cfg = tmp_path / "serve.toml"
    cfg.write_text(line + "\n")
    done = _serve(tmp_path, "--config", str(cfg))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"setting {line.split(' ', 1)[0]} (config file {cfg}): " in lines[0]
