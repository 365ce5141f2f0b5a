"""Fixtures: one collector service per test session over a data directory seeded with known events, and what the
browser tests share (the dashboard process over a service, headless Chromium, a tab).

The store is seeded in a subprocess before the service starts: chDB lets one process open one data
directory, and the service must own it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import pytest
from playwright.sync_api import Browser, Page

from inferensics.dashboard.launcher import start_dashboard, wait_until_up
from inferensics.schema.dsn import REPORT_DIR_ENV
from tests.collector.service.harness import READ, RunningService, free_port, new_service
from tests.dashboard.browser import headless_chromium, laptop_tab
from tests.dashboard.seed import SeedFacts, build
from tests.dashboard.small_storm import build_small_storm

REPO = Path(__file__).resolve().parents[2]
F = TypeVar("F")


@dataclass(frozen=True)
class SeededService:
    """A running service, the token the dashboard uses and the facts of its seeded data."""

    service: RunningService
    token: str
    facts: SeedFacts

    @property
    def url(self) -> str:
        """The service's base URL."""
        return self.service.url


@pytest.fixture(autouse=True)
def _keep_main_module() -> Iterator[None]:
    """Put back ``sys.modules["__main__"]`` after each test: Streamlit's script runner leaves the page
    script there, and a later test that spawns processes (the collector's decode workers) would make each
    child run the dashboard's app file as its main module."""
    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main


def seed_store(dsn: str, now: datetime, module: str = "tests.dashboard.seed") -> None:
    """Write the seed events of ``module`` (run as ``python -m MODULE DSN NOW_ISO``) into ``dsn`` from a child
    process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}
    subprocess.run(
        [sys.executable, "-m", module, dsn, now.isoformat()],
        cwd=REPO, env=env, check=True, capture_output=True, timeout=300,
    )  # fmt: skip


@contextmanager
def seeded_service(root: Path, module: str, facts: Callable[[datetime], F]) -> Iterator[tuple[RunningService, F]]:
    """A service in ``root`` over the events of the seed ``module`` (:func:`seed_store`) written for the current
    minute, and ``facts`` of that minute (what was seeded); stopped after."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    service = new_service(root)
    seed_store(service.dsn, now, module)
    service.start()
    try:
        yield service, facts(now)
    finally:
        service.stop()


@pytest.fixture(scope="session")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededService]:
    """The seeded, running service for the whole session."""
    root = tmp_path_factory.mktemp("dashboard-service")
    with seeded_service(root, "tests.dashboard.seed", build) as (service, facts):
        yield SeededService(service=service, token=READ, facts=facts)


@pytest.fixture(scope="session")
def small_storm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededService]:
    """A service over the seed with its storm cut below the storm rule's default floors (the demo's case), for
    the pages that find storms (the on-call overview, the Weekly report)."""
    root = tmp_path_factory.mktemp("small-storm-service")
    with seeded_service(root, "tests.dashboard.small_storm", build_small_storm) as (service, facts):
        yield SeededService(service=service, token=READ, facts=facts)


@contextmanager
def running_dashboard(service_url: str, token: str, root: Path, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """The dashboard process (``streamlit run`` headless) over the service at ``service_url``, its reports in
    ``root/reports`` and its log in ``root``, with ``env`` added to a clean environment (no ``INFERENSICS_*`` of
    the test run); its base URL. Stopped after."""
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}
    clean.update({REPORT_DIR_ENV: str(root / "reports"), **(env or {})})
    proc = start_dashboard(port=port, service_url=service_url, token=token, env=clean, log=root / "dashboard.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, proc, timeout=120)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Headless Chromium (Debian's package; Playwright never downloads a browser here), one per test module."""
    with headless_chromium() as chromium:
        yield chromium


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh laptop-sized tab."""
    with laptop_tab(browser) as tab:
        yield tab
