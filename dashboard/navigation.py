"""The pages of the app: file, title, URL path and whether the sidebar filters apply to them.

It sits above `_internal` and `views` because it names the views, which build on `_internal`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from inferensics.dashboard._internal.filters import Filters
from inferensics.dashboard._internal.links import (
    BUNDLES_PATH,
    CANARY_PATH,
    HOSTS_PATH,
    KERNELS_PATH,
    REQUEST_PATH,
    REQUESTS_PATH,
)
from inferensics.dashboard._internal.service import QueryCall
from inferensics.dashboard.views import overview


@dataclass(frozen=True, slots=True)
class PageSpec:
    """One page of the dashboard."""

    file: str
    """Script path relative to the app file."""
    title: str
    url_path: str
    icon: str
    section: str
    filtered: bool
    """Whether the sidebar slice filters (model, pool, traffic class, host, bundle) apply."""
    queries: Callable[[Filters], Mapping[str, QueryCall]] | None = None
    """The page's named queries for the selected filters, when they are known before it runs: the app asks
    for them together with the service check and the filter values, in one round."""


PAGES: Final[tuple[PageSpec, ...]] = (
    PageSpec(
        "views/overview.py",
        "On-call overview",
        "overview",
        ":material/monitor_heart:",
        "On call",
        True,
        overview.page_queries,
    ),
    PageSpec("views/requests.py", "Requests", REQUESTS_PATH, ":material/list_alt:", "On call", True),
    PageSpec("views/request.py", "Request drill-down", REQUEST_PATH, ":material/search:", "On call", False),
    PageSpec("views/hosts.py", "Hosts", HOSTS_PATH, ":material/dns:", "On call", True),
    PageSpec("views/canary.py", "Canary comparison", CANARY_PATH, ":material/compare_arrows:", "Releases", False),
    PageSpec("views/bundles.py", "Bundles", BUNDLES_PATH, ":material/inventory_2:", "Releases", True),
    PageSpec("views/compile_health.py", "Compile & cache health", "compile", ":material/build:", "Compilation", True),
    PageSpec("views/kernels.py", "Kernels", KERNELS_PATH, ":material/memory:", "Compilation", True),
    PageSpec("views/weekly_report.py", "Weekly report", "report", ":material/summarize:", "Compilation", False),
)
BY_URL: Final = {p.url_path: p for p in PAGES}
