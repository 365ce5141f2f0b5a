"""Report renderers: the weekly recompilation/cache report and the canary page (Markdown + offline HTML).

Renderers take frames (never a store) and draw with Altair; the HTML pages inline the Vega libraries.
"""

from inferensics.analytics.report.canary import (
    canary_charts,
    render_canary_markdown,
    render_canary_text,
    write_canary_report,
)
from inferensics.analytics.report.folders import STORE_FILE, name_store, store_folder
from inferensics.analytics.report.page import render_page
from inferensics.analytics.report.weekly import (
    render_weekly_html,
    render_weekly_json,
    render_weekly_markdown,
    weekly_charts,
    write_weekly_json,
    write_weekly_report,
)

__all__ = [
    "STORE_FILE",
    "canary_charts",
    "name_store",
    "render_canary_markdown",
    "render_canary_text",
    "render_page",
    "render_weekly_html",
    "render_weekly_json",
    "render_weekly_markdown",
    "store_folder",
    "weekly_charts",
    "write_canary_report",
    "write_weekly_json",
    "write_weekly_report",
]
