"""The demo's child processes: the embedded collector service, the dashboard, the bundle builds and the
serving workers.

Each is started with the interpreter running the demo (``python -m inferensics.cli ...``), logs to a file in
the demo's data directory, and is stopped with SIGINT, then SIGTERM, then SIGKILL. :func:`stop_all` stops
several at once and cannot be cut short: a Ctrl-C while it waits sends SIGKILL to what is left instead of
leaving children running (they run in their own sessions, so the terminal's Ctrl-C never reaches them).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from inferensics.collector.client import ServiceClient, ServiceError
from inferensics.dashboard._internal.replay_command import KEYRING_ENV
from inferensics.schema.install_hint import pip_install_hint

SERVICE_READY_TIMEOUT_S = 90.0
"""How long the service may take to open its store and answer ``/readyz``."""


def free_port(preferred: int, host: str = "127.0.0.1") -> int:
    """``preferred`` when it is free on ``host``, else the next free port above it (within 50)."""
    for port in range(preferred, preferred + 50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free TCP port in {preferred}..{preferred + 49} on {host}; pass --port")


@dataclass
class Child:
    """A started child process and its log file."""

    name: str
    proc: subprocess.Popen[str]
    log_path: Path
    _log: IO[str] | None = field(default=None, repr=False)

    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.proc.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` unless the process has already exited."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):  # it exited between the check and the signal
                self.proc.send_signal(sig)

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGINT, then SIGTERM, then SIGKILL, waiting ``timeout_s`` between them (see :func:`stop_all`)."""
        stop_all([self], timeout_s)

    def close_log(self) -> None:
        """Close the parent's handle on the log file."""
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of the child's log, for error messages."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)


def stop_all(children: list[Child], timeout_s: float = 15.0) -> None:
    """Stop every child, all at once: SIGINT, then SIGTERM, then SIGKILL, ``timeout_s`` between them.

    A ``KeyboardInterrupt`` (a second Ctrl-C) while waiting kills the children still alive with SIGKILL,
    waits for them, and is then raised again; no child outlives this call either way.
    """
    try:
        for sig in STOP_SIGNALS:
            alive = [c for c in children if c.alive()]
            if not alive:
                break
            for child in alive:
                child.signal(sig)
            deadline = time.monotonic() + timeout_s
            while any(c.alive() for c in alive) and time.monotonic() < deadline:
                time.sleep(0.05)
    except KeyboardInterrupt:
        for child in children:
            if child.alive():
                child.signal(signal.SIGKILL)
        for child in children:
            child.proc.wait()
        raise
    finally:
        for child in children:
            child.close_log()


def _start(name: str, args: list[str], log_path: Path, env: dict[str, str], stdout_pipe: bool = False) -> Child:
    log = log_path.open("w")
    proc = subprocess.Popen(
        # -P: the working directory stays off the child's sys.path, so a folder there (a checkout's kernels/,
        # say) cannot shadow an installed module of that name (Hugging Face's `kernels`, imported by transformers).
        [sys.executable, "-P", *args],
        stdout=subprocess.PIPE if stdout_pipe else log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        env=env,
        text=True,
        start_new_session=True,  # Ctrl-C in the terminal reaches the demo only; it stops the children in order
    )
    return Child(name, proc, log_path, log)


def store_dsn(data_dir: Path) -> str:
    """The DSN of the embedded store the demo's service keeps in ``data_dir``."""
    return f"chdb://{data_dir.resolve() / 'store'}"


def spool_dir(data_dir: Path) -> Path:
    """The spool the demo's service keeps in ``data_dir``."""
    return data_dir.resolve() / "spool"


SERVICE_ENV: Final = {"INFERENSICS_AUTH": "false"}
"""The demo's service runs without tokens: it listens on 127.0.0.1 only (the service's loopback development mode)."""


def serve_args(data_dir: Path, port: int) -> list[str]:
    """``inferensics serve``'s arguments for the demo's service on the store in ``data_dir``, on loopback."""
    spool = spool_dir(data_dir)
    return [
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dsn",
        store_dsn(data_dir),
        "--spool-dir",
        str(spool),
    ]


def serve_command(data_dir: Path, port: int) -> str:
    """The shell line that starts the demo's service again on the store in ``data_dir`` (as the demo ran it)."""
    env = " ".join(f"{k}={v}" for k, v in SERVICE_ENV.items())
    return f"{env} inferensics {shlex.join(serve_args(data_dir, port))}"


def start_service(data_dir: Path, port: int) -> tuple[Child, str]:
    """Start ``inferensics serve`` on loopback with an embedded store in ``data_dir``; wait until ready.

    Authentication is off: the service listens on 127.0.0.1 only (the service's loopback development
    mode). Returns the child and the service URL.

    Raises:
        RuntimeError: the service exited or did not become ready in time; the message carries its log.
    """
    env = dict(os.environ, **SERVICE_ENV)
    child = _start("service", ["-m", "inferensics.cli", *serve_args(data_dir, port)], data_dir / "service.log", env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVICE_READY_TIMEOUT_S
    with ServiceClient(url, timeout=5) as client:
        while time.monotonic() < deadline:
            if not child.alive():
                raise RuntimeError(f"the collector service exited (code {child.proc.returncode}):\n{child.log_tail()}")
            try:
                if client.health().get("ready"):
                    return child, url
            except ServiceError:
                pass
            time.sleep(0.5)
    child.stop()
    raise RuntimeError(
        f"the collector service was not ready after {SERVICE_READY_TIMEOUT_S:.0f} s:\n{child.log_tail()}"
    )


def dashboard_available() -> str:
    """``""`` when ``inferensics dashboard`` can start here, else why not."""
    try:
        import streamlit  # noqa: F401

        from inferensics.dashboard import launcher  # noqa: F401
    except ImportError as exc:
        return f"the dashboard is not available ({exc}): {pip_install_hint('dashboard')}"
    return ""


def start_dashboard(
    data_dir: Path,
    service_url: str,
    port: int,
    token: str | None,
    *,
    min_recompiles: int | None = None,
    keyring: Path | None = None,
) -> Child:
    """Start ``inferensics dashboard --service URL`` on loopback (with the storm rule's ``--min-recompiles``);
    with ``keyring`` (``$INFERENSICS_BUNDLE_KEYRING`` in its environment) its request page's replay command
    names the builders' keys and runs as shown."""
    args = ["-m", "inferensics.cli", "dashboard", "--service", service_url, "--port", str(port)]
    if min_recompiles is not None:
        args += ["--min-recompiles", str(min_recompiles)]
    if token:
        args += ["--token", token]
    env = dict(os.environ, **({KEYRING_ENV: str(keyring)} if keyring is not None else {}))
    return _start("dashboard", args, data_dir / "dashboard.log", env)


def start_child(name: str, args: list[str], log_path: Path) -> Child:
    """Start ``python ARGS`` (e.g. a release-bundle build) logging stdout and stderr to ``log_path``."""
    return _start(name, args, log_path, dict(os.environ, PYTHONUNBUFFERED="1"))


WorkerMessage = tuple[str, dict[str, Any]]
"""``(worker name, one JSON line it printed)``."""


def start_worker(name: str, data_dir: Path, args: list[str], messages: queue.Queue[WorkerMessage]) -> Child:
    """Start ``python -m inferensics.demo.worker ARGS``; its JSON stdout lines go to ``messages``."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    child = _start(name, ["-m", "inferensics.demo.worker", *args], data_dir / f"{name}.log", env, stdout_pipe=True)

    def pump() -> None:
        assert child.proc.stdout is not None
        for line in child.proc.stdout:
            try:
                messages.put((name, json.loads(line)))
            except ValueError:
                continue
        messages.put((name, {"event": "exit", "code": child.proc.wait()}))

    threading.Thread(target=pump, name=f"demo-{name}", daemon=True).start()
    return child
