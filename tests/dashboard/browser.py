"""Drive the running dashboard in Debian's headless Chromium (Playwright) and read what a person sees."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final

from playwright.sync_api import Browser, Locator, Page, ViewportSize, expect, sync_playwright

CHROMIUM: Final = "/usr/bin/chromium"
CHROMIUM_ARGS: Final = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
LAPTOP: Final[ViewportSize] = {"width": 1440, "height": 900}
SCREENS: Final = Path("/tmp/inferensics-screens")
"""Where the screenshots are copied for people to look at."""
PAGE_TIMEOUT_MS: Final = 120_000


@contextmanager
def headless_chromium() -> Iterator[Browser]:
    """Debian's headless Chromium under Playwright (which never downloads a browser here); closed after."""
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@contextmanager
def laptop_tab(browser: Browser) -> Iterator[Page]:
    """A fresh laptop-sized tab with the page timeout; closed after."""
    tab = browser.new_page(viewport=LAPTOP)
    tab.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        yield tab
    finally:
        tab.close()


def range_end(now: datetime) -> str:
    """A page link's ``?end=``: the minute after a seed's clock ``now``, so its events are in the default range."""
    return f"{now + timedelta(minutes=1):%Y-%m-%dT%H:%MZ}"


def open_page(page: Page, base: str, now: datetime, path: str, query: str = "") -> None:
    """Open the dashboard's ``path`` at ``base`` with the range ending just after a seed's clock ``now``."""
    page.goto(f"{base}/{path}?end={range_end(now)}{'&' + query if query else ''}")


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


def metric_value(page: Page, label: str) -> Locator:
    """The value element of the metric labelled ``label``."""
    box = page.locator('[data-testid="stMetric"]').filter(
        has=page.locator('[data-testid="stMetricLabel"]', has_text=label)
    )
    return box.first.locator('[data-testid="stMetricValue"]')


def metric(page: Page, label: str) -> str:
    """The shown value of the metric labelled ``label``."""
    return metric_value(page, label).inner_text().strip()


def wait_for_metric(page: Page, label: str, value: str) -> None:
    """Until the metric labelled ``label`` shows ``value`` (after a click, the old run's values stay on the
    page until the new run redraws them); fails after the page timeout."""
    expect(metric_value(page, label)).to_have_text(value, timeout=PAGE_TIMEOUT_MS)


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


ROW_PX: Final = 35
"""Height of a header or row of an ``st.dataframe`` grid (drawn on a canvas: cells are found by position)."""


def click_cell(page: Page, grid: Locator, row: int, x: float) -> None:
    """Click ``x`` pixels into data row ``row`` (0-based) of the ``st.dataframe`` ``grid``."""
    # The grid acts on a link cell only under the hovering pointer: move there first, then click. A chart
    # above that finishes drawing in between moves the grid down (seen as the click opening a later row), so
    # the click waits until the grid has stayed where the pointer was aimed.
    for _ in range(20):
        grid.scroll_into_view_if_needed()
        box = grid.bounding_box()
        assert box is not None
        at = (box["x"] + x, box["y"] + ROW_PX * (row + 1) + ROW_PX / 2)
        page.mouse.move(*at)
        still = True
        for _ in range(3):  # about a second without the grid moving
            page.wait_for_timeout(300)
            still = still and grid.bounding_box() == box
        if still:
            break
    page.mouse.click(*at)


def truncated_metrics(page: Page) -> list[str]:
    """Metric values cut short with an ellipsis because they do not fit their cell."""
    values: list[str] = page.evaluate(
        """() => [...document.querySelectorAll('[data-testid="stMetricValue"]')]
            .filter(e => [e, ...e.querySelectorAll('*')].some(x => x.scrollWidth > x.clientWidth))
            .map(e => e.innerText)"""
    )
    return values


def record_canvas_text(page: Page) -> None:
    """From the next page load on, keep every text drawn on a canvas (a ``st.dataframe`` grid draws its
    cells there: they are in no DOM node), for :func:`canvas_text`."""
    page.add_init_script(
        """(() => {
            const drawn = (window.__canvasText = []);
            const fillText = CanvasRenderingContext2D.prototype.fillText;
            CanvasRenderingContext2D.prototype.fillText = function (text, ...rest) {
                drawn.push(String(text));
                return fillText.call(this, text, ...rest);
            };
        })()"""
    )


def wait_for_canvas_text(page: Page, text: str) -> None:
    """Until ``text`` has been drawn on a canvas (see :func:`record_canvas_text`); fails after the page timeout."""
    page.wait_for_function("t => window.__canvasText.includes(t)", arg=text, timeout=PAGE_TIMEOUT_MS)


def canvas_text(page: Page) -> list[str]:
    """Every text drawn on a canvas since the page loaded (see :func:`record_canvas_text`)."""
    drawn: list[str] = page.evaluate("() => window.__canvasText")
    return drawn
