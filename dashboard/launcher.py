"""Start the dashboard: ``streamlit run`` on the app file, headless, pointed at a collector service.

Used by ``inferensics dashboard``, ``inferensics serve --with-dashboard``, the browser tests and the
benchmark. The service URL and token travel as environment variables of the child process, so the token
never appears in a process listing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import httpx

from inferensics.collector.service_url import SERVICE_URL_ENV, TOKEN_ENV

STORM_FLOOR_ENV: Final = {
    "min_recompiles": "INFERENSICS_STORM_MIN_RECOMPILES",
    "min_compile_seconds": "INFERENSICS_STORM_MIN_COMPILE_SECONDS",
}
"""The storm rule's floors a dashboard starts with (``inferensics dashboard --min-recompiles``), by field of
:class:`~inferensics.analytics.storms.StormRule`: the environment variable of each."""
APP_FILE: Final = Path(__file__).resolve().parent / "app.py"
"""The Streamlit entry script."""
DEFAULT_PORT: Final = 8501


def streamlit_argv(port: int = DEFAULT_PORT, address: str = "127.0.0.1") -> list[str]:
    """The ``streamlit run`` command line: headless, no usage statistics, no file watcher, no "magic" (a bare
    string in a page script is never drawn). ``-P`` keeps the working directory off the app's sys.path."""
    return [
        sys.executable, "-P", "-m", "streamlit", "run", str(APP_FILE),
        "--server.headless", "true",
        "--server.port", str(port),
        "--server.address", address,
        "--server.fileWatcherType", "none",
        "--server.runOnSave", "false",
        "--runner.magicEnabled", "false",
        "--browser.gatherUsageStats", "false",
        "--global.developmentMode", "false",
        "--client.toolbarMode", "minimal",
        "--theme.base", "light",
    ]  # fmt: skip


def dashboard_env(
    service_url: str | None,
    token: str | None,
    base: Mapping[str, str] | None = None,
    storm_floors: Mapping[str, float] | None = None,
) -> dict[str, str]:
    """The child's environment: ``base`` (default: this process's) plus the service URL, the token and the
    storm rule's floors (by field, :data:`STORM_FLOOR_ENV`)."""
    env = dict(os.environ if base is None else base)
    if service_url:
        env[SERVICE_URL_ENV] = service_url
    if token:
        env[TOKEN_ENV] = token
    for name, value in (storm_floors or {}).items():
        env[STORM_FLOOR_ENV[name]] = f"{value:g}"
    env.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")
    return env


def start_dashboard(
    *,
    port: int = DEFAULT_PORT,
    address: str = "127.0.0.1",
    service_url: str | None = None,
    token: str | None = None,
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
    storm_floors: Mapping[str, float] | None = None,
) -> subprocess.Popen[bytes]:
    """Start the dashboard as a child process; the caller stops it (``terminate``) when done. ``storm_floors``
    (by field of the storm rule) are the floors its pages start with."""
    argv = streamlit_argv(port, address)
    environment = dashboard_env(service_url, token, env, storm_floors)
    if log is None:
        return subprocess.Popen(argv, env=environment)
    with log.open("ab") as out:
        return subprocess.Popen(argv, env=environment, stdout=out, stderr=subprocess.STDOUT)


def wait_until_up(url: str, proc: subprocess.Popen[bytes] | None = None, timeout: float = 60.0) -> None:
    """Wait until Streamlit's health endpoint answers at ``url``.

    Raises:
        RuntimeError: the process exited, or the dashboard did not come up in time.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the dashboard exited with status {proc.returncode} before it was up")
        try:
            if httpx.get(f"{url.rstrip('/')}/_stcore/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the dashboard at {url} did not answer within {timeout:.0f} s")
