"""The Bundles page in a real browser (service + ``streamlit run`` headless + Chromium): a revoked bundle
still serving is lit up, release states show, and a pushed bundle's manifest and qualification report
render."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from inferensics import bundle as b
from inferensics.dashboard.launcher import start_dashboard, wait_until_up
from tests.collector.service.harness import READ, free_port, new_service
from tests.dashboard.browser import CHROMIUM, CHROMIUM_ARGS, LAPTOP, PAGE_TIMEOUT_MS, screenshot, settle

pytestmark = [pytest.mark.slow, pytest.mark.browser]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def dashboard(built: b.BuildResult, tmp_path: Path) -> Iterator[tuple[str, datetime]]:
    """A service seeded with release states and the packed bundle, and a dashboard on it."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    packed = b.pack(built.directory, tmp_path / "tiny.bundle")
    (tmp_path / "service").mkdir()
    service = new_service(tmp_path / "service")
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}
    subprocess.run(
        [sys.executable, "-m", "tests.bundle.dashboard_seed", service.dsn, now.isoformat(), str(packed),
         built.bundle_id],
        cwd=ROOT, env=env, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    service.start()
    port = free_port()
    proc = start_dashboard(port=port, service_url=service.url, token=READ, env=env, log=tmp_path / "dashboard.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, proc, timeout=120)
        yield url, now
    finally:
        proc.terminate()
        proc.wait(30)
        service.stop()


def test_bundles_page_lights_up_a_revoked_bundle_still_serving(
    dashboard: tuple[str, datetime], built: b.BuildResult, tmp_path: Path
) -> None:
    url, now = dashboard
    end = (now + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%MZ")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = chromium.new_page(viewport=LAPTOP)
            page.set_default_timeout(PAGE_TIMEOUT_MS)
            page.goto(f"{url}/bundles?end={end}")
            page.get_by_role("heading", name="Release state").wait_for()
            settle(page)
            alert = page.locator('[data-testid="stAlert"]').filter(has_text="Revoked bundle still serving")
            alert.first.wait_for()  # the release query answers after the heading is drawn (slow under load)
            assert alert.count() == 1
            assert built.bundle_id[:12] in alert.inner_text()
            assert "5 requests" in alert.inner_text()
            page.get_by_role("heading", name="Manifest and qualification report").wait_for()
            page.get_by_role("heading", name="Qualification report: tiny").wait_for()
            body = page.locator("body").inner_text()
            assert "signature state on hosts: verified" in body
            assert "Recommended shape policy" in body or "Shape policy: no clear winner" in body
            assert "Shape-policy advice" in body
            screenshot(page, tmp_path, "bundles-release")
        finally:
            chromium.close()
