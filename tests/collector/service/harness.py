"""Start the collector service as its own process (chDB allows one data directory per process)."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from inferensics.collector.client import ServiceClient

INGEST = "ingest-token"
READ = "read-token"
ADMIN = "admin-token"
TOKENS = f"{INGEST}=ingest,{READ}=read,{ADMIN}=admin"


def free_port() -> int:
    """A free loopback TCP port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RunningService:
    """A service process started by a test; ``restart`` keeps its data and spool directories."""

    root: Path
    port: int
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    via_cli: bool = True
    """Start ``inferensics serve`` (which hands the service its named queries), else the bare
    ``python -m inferensics.collector.service`` (ingest, SQL and blobs; no named queries)."""
    ca: str = ""
    dsn_override: str = ""
    log: Path = field(init=False)
    clients: list[ServiceClient] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.log = self.root / "service.log"

    @property
    def url(self) -> str:
        """The base URL."""
        return f"{'https' if self.ca else 'http'}://127.0.0.1:{self.port}"

    @property
    def dsn(self) -> str:
        """The store DSN the service owns."""
        return self.dsn_override or f"chdb://{self.root / 'db'}"

    @property
    def spool_dir(self) -> Path:
        """The spool directory."""
        return self.root / "spool"

    def start(self, timeout: float = 90.0, *, ready: str = "/readyz") -> RunningService:
        """Start the process and wait until ``ready`` (``/readyz``, or ``/healthz``) answers 200."""
        entry = ["inferensics.cli", "serve"] if self.via_cli else ["inferensics.collector.service"]
        cmd = [
            sys.executable, "-m", *entry,
            "--port", str(self.port), "--dsn", self.dsn, "--spool-dir", str(self.spool_dir),
        ]  # fmt: skip
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        try:
            self._wait_ready(timeout, ready)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> RunningService:
        """Started (``with new_service(root) as svc:``) and stopped on leaving the block."""
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _wait_ready(self, timeout: float, path: str) -> None:
        assert self.proc is not None
        verify: bool | ssl.SSLContext = ssl.create_default_context(cafile=self.ca) if self.ca else True
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"service exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}{path}", timeout=1, verify=verify).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"service not ready after {timeout} s:\n{self.log.read_text()[-3000:]}")

    def client(self, token: str | None = ADMIN) -> ServiceClient:
        """A client with the given token (admin by default); closed by :meth:`stop`."""
        client = ServiceClient(self.url, token=token, timeout=30, verify=self.ca or True)
        self.clients.append(client)
        return client

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        """SIGTERM and wait (the service drains and seals its spool); close the test's clients."""
        for client in self.clients:
            client.close()
        self.clients.clear()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


def new_service(root: Path, *, via_cli: bool = True, ca: str = "", **settings: str) -> RunningService:
    """A service (not started) in ``root`` with the test tokens and the given ``INFERENSICS_*`` settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}
    env.update({"INFERENSICS_TOKENS": TOKENS, "INFERENSICS_BATCH_MAX_AGE_S": "0.2"})
    env.update({f"INFERENSICS_{k.upper()}": v for k, v in settings.items()})
    return RunningService(root=root, port=free_port(), env=env, via_cli=via_cli, ca=ca)
