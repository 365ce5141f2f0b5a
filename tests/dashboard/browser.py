"""Drive the running dashboard in Debian's headless Chromium (Playwright) and read what a person sees."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Final

from playwright.sync_api import Page, ViewportSize

CHROMIUM: Final = "/usr/bin/chromium"
CHROMIUM_ARGS: Final = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
LAPTOP: Final[ViewportSize] = {"width": 1440, "height": 900}
SCREENS: Final = Path("/tmp/inferensics-screens")
"""Where the screenshots are copied for people to look at."""
PAGE_TIMEOUT_MS: Final = 120_000


def settle(page: Page, charts: int = 0) -> None:
    """Wait until the script run has finished and ``charts`` Vega-Lite charts have drawn."""
    page.locator('[data-testid="stMainBlockContainer"] h1').first.wait_for(timeout=PAGE_TIMEOUT_MS)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=PAGE_TIMEOUT_MS)
    if charts:
        page.wait_for_function(
            'n => document.querySelectorAll(\'[data-testid="stVegaLiteChart"] canvas, '
            '[data-testid="stVegaLiteChart"] svg.marks\').length >= n',
            arg=charts,
            timeout=PAGE_TIMEOUT_MS,
        )
    assert page.locator('[data-testid="stException"]').count() == 0


def metric(page: Page, label: str) -> str:
    """The shown value of the metric labelled ``label``."""
    box = page.locator('[data-testid="stMetric"]').filter(
        has=page.locator('[data-testid="stMetricLabel"]', has_text=label)
    )
    return box.first.locator('[data-testid="stMetricValue"]').inner_text().strip()


def screenshot(page: Page, folder: Path, name: str) -> Path:
    """The whole page (the main area scrolls inside the window, so the window is stretched to it)."""
    height = page.evaluate(
        '() => Math.max(...[...document.querySelectorAll(\'[data-testid="stMain"], '
        '[data-testid="stSidebarContent"]\')].map(e => e.scrollHeight), 900)'
    )
    page.set_viewport_size({"width": LAPTOP["width"], "height": min(int(height), 6000)})
    page.wait_for_timeout(300)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path))
    page.set_viewport_size(LAPTOP)
    SCREENS.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, SCREENS / path.name)
    return path
