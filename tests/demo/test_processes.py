"""The demo's child processes: the embedded service starts, answers, and stops cleanly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from inferensics.collector.client import ServiceClient
from inferensics.dashboard._internal.replay_command import KEYRING_ENV
from inferensics.demo import processes, release


def test_free_port_skips_a_taken_port() -> None:
    """A port in use is passed over for the next one."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        assert processes.free_port(port) != port


def test_embedded_service_starts_ready_and_stops(tmp_path: Path) -> None:
    """``inferensics serve`` on loopback with a store in the data directory; SIGINT ends it."""
    child, url = processes.start_service(tmp_path, processes.free_port(4480))
    try:
        with ServiceClient(url) as client:
            assert client.health()["ready"]
            assert "requests" in client.status()["store"]["row_counts"]
    finally:
        child.stop()
    assert not child.alive()
    assert (tmp_path / "store").is_dir()
    assert (tmp_path / "service.log").is_file()


_STUBBORN = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(600)\n"
)


def _stubborn_children(tmp_path: Path, n: int) -> list[processes.Child]:
    """Real child processes that ignore SIGINT and SIGTERM (only SIGKILL ends them)."""
    children = [
        processes._start(f"stubborn-{i}", ["-c", _STUBBORN], tmp_path / f"{i}.log", {}, stdout_pipe=True)
        for i in range(n)
    ]
    for child in children:
        assert child.proc.stdout is not None
        assert child.proc.stdout.readline().strip() == "ready"  # handlers installed before we signal
        child.proc.stdout.close()
    return children


def test_stop_all_escalates_to_sigkill(tmp_path: Path) -> None:
    """Children that ignore SIGINT and SIGTERM are killed once both grace periods pass."""
    children = _stubborn_children(tmp_path, 2)
    processes.stop_all(children, timeout_s=0.3)
    assert [c.alive() for c in children] == [False, False]
    assert [c.proc.returncode for c in children] == [-signal.SIGKILL, -signal.SIGKILL]


def test_second_ctrl_c_kills_what_is_left(tmp_path: Path) -> None:
    """A Ctrl-C while waiting for the children kills them at once and is raised again: no orphans.

    Python's own Ctrl-C handler is put in place for the test: a shell starting the test run in the
    background without job control starts it with SIGINT ignored, and a Ctrl-C then never arrives."""
    children = _stubborn_children(tmp_path, 2)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    try:
        timer.start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            processes.stop_all(children, timeout_s=60)
        timer.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started < 30  # far less than the 2 x 60 s grace it would otherwise wait
    assert [c.proc.returncode for c in children] == [-signal.SIGKILL, -signal.SIGKILL]


def test_a_folder_in_the_working_directory_shadows_nothing_in_a_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child started from a directory holding a folder named like an installed module (a checkout's kernels/
    beside Hugging Face's `kernels`) imports the installed one: the working directory is not on its sys.path."""
    work = tmp_path / "work"
    (work / "json").mkdir(parents=True)
    (work / "json" / "__init__.py").write_text("raise ImportError('the working directory shadowed json')\n")
    monkeypatch.chdir(work)
    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)  # a caller's own setting would hide what is checked
    log = tmp_path / "probe.log"
    child = processes.start_child("probe", ["-c", "import json; print(json.__file__)"], log)
    assert child.proc.wait(timeout=60) == 0, log.read_text()
    child.close_log()
    imported = Path(log.read_text().strip())
    assert imported.name == "__init__.py"
    assert not imported.is_relative_to(work)


def test_the_demos_dashboard_is_given_the_builders_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Walk 39: the request page said a bare ``inferensics replay ID``, which stops without a keyring. The demo's
    dashboard gets the run's builder key (``$INFERENSICS_BUNDLE_KEYRING``), so the page's command names it; the
    key's path is known before the build makes it, as the dashboard starts first.

    The environment is read where the real child is started (``subprocess.Popen``'s ``env``): read back from
    ``/proc/PID/environ`` it lacked the key once in CI (session 41, not reproduced here; a child that has already
    exited reads empty there)."""
    cache = tmp_path / "cache"
    keyring = release.keyring_path(tmp_path, cache)
    assert keyring == cache / f"{release.BUILDER_KEY}.pub"  # where the build makes it (_make_key)
    assert release.keyring_path(tmp_path, None) == tmp_path / "bundles" / "builder-key.pub"
    given: list[dict[str, str]] = []
    real_popen = subprocess.Popen

    def popen(*args: Any, **kwargs: Any) -> Any:
        given.append(dict(kwargs["env"]))
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)  # the module demo.processes starts its children with
    child = processes.start_dashboard(tmp_path, "http://127.0.0.1:9", processes.free_port(8650), None, keyring=keyring)
    try:
        assert [env[KEYRING_ENV] for env in given] == [str(keyring)]
        assert child.proc.pid > 0
    finally:
        processes.stop_all([child])
