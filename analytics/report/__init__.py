"""Report renderers: the weekly recompilation/cache report and the canary page (Markdown + offline HTML).

Renderers take frames (never a store) and draw with Altair; the HTML pages inline the Vega libraries.

The names below are imported on first use: Altair takes about half a second to import, and a command that
prints a canary verdict as text (``inferensics canary compare`` without ``--out``) draws nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_MODULE_OF = {
    "STORE_FILE": "folders",
    "canary_charts": "canary",
    "name_store": "folders",
    "render_canary_markdown": "canary",
    "render_canary_text": "canary",
    "render_page": "page",
    "render_weekly_html": "weekly",
    "render_weekly_json": "weekly",
    "render_weekly_markdown": "weekly",
    "store_folder": "folders",
    "weekly_charts": "weekly",
    "write_canary_report": "canary",
    "write_weekly_json": "weekly",
    "write_weekly_report": "weekly",
}

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


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_MODULE_OF[name]}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
