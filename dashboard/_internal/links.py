"""Links into the dashboard's pages: the query parameters a page reads from its URL, named once, and the
functions that build such a URL.

Light on purpose (no Streamlit, no Polars): the demo prints these links, and only the page that reads them
needs the UI packages. The page paths are the ``url_path`` of :data:`inferensics.dashboard.navigation.PAGES`;
a test keeps them equal.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final
from urllib.parse import quote, urlencode

CANARY_PATH: Final = "canary"
BUNDLES_PATH: Final = "bundles"
HOSTS_PATH: Final = "hosts"
KERNELS_PATH: Final = "kernels"
BUNDLE_ID_PARAM: Final = "bundle_id"
"""The Bundles page's parameter (``/bundles?bundle_id=...``): the pushed bundle whose manifest and report it
opens on."""
REQUESTS_PATH: Final = "requests"
"""The request list (``/requests?host=h1``): the slice's newest requests, failing ones first of all."""
FILTER_PARAMS: Final = ("model", "hw_pool", "traffic_class", "host", "bundle")
"""Parameters that set the sidebar filters of a filtered page (``?host=h1``), named as the analytics' filters."""
WINDOW_PARAM: Final = "window"
"""Sets a filtered page's time range (``?window=24h``): the shortest of the sidebar's ranges that holds it."""
REQUEST_PATH: Final = "request"
REQUEST_ID_PARAM: Final = "request_id"
"""The request drill-down's parameter (``/request?request_id=...``)."""
END_PARAM: Final = "end"
"""Pins the end of every range (``?end=2026-11-30T19:00Z``); read by every page (``filters.now``)."""

CANARY_PARAMS: Final = (
    "model", "candidate", "baseline", "hw_pool", "traffic_class", "window",
    "min_requests", "min_pairs", "latency_tolerance",
)  # fmt: skip
"""The canary comparison's parameters, in link order: the names of the analytics' ``canary_compare`` (and
of ``inferensics canary compare``'s options), plus ``window``, a duration such as ``15m``, ``6h`` or ``7d``."""

_UNITS: Final = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1)}
_DURATION = re.compile(r"(\d+)\s*([mhd])")


def duration_text(span: timedelta) -> str:
    """``span`` as a link's ``window``: whole days, else whole hours, else minutes (rounded up).

    >>> duration_text(timedelta(hours=6)), duration_text(timedelta(days=7)), duration_text(timedelta(seconds=61))
    ('6h', '7d', '2m')
    """
    for unit in ("d", "h"):
        if span >= _UNITS[unit] and span % _UNITS[unit] == timedelta(0):
            return f"{span // _UNITS[unit]}{unit}"
    return f"{max(1, -(-span // _UNITS['m']))}m"


def parse_duration(text: str) -> timedelta | None:
    """A link's ``window`` (``15m``, ``6h``, ``7d``) as a time span; ``None`` when it is not one.

    >>> parse_duration("90m"), parse_duration("6 weeks")
    (datetime.timedelta(seconds=5400), None)
    """
    found = _DURATION.fullmatch(text.strip().lower())
    if found is None or int(found.group(1)) == 0:
        return None
    return int(found.group(1)) * _UNITS[found.group(2)]


def pinned_end(end: datetime) -> datetime:
    """The end a link pins for ``end``: in UTC, to the minute, rounded up (so that the range still holds it)."""
    utc = end.astimezone(UTC)
    minute = utc.replace(second=0, microsecond=0)
    return minute + timedelta(minutes=1) if minute < utc else minute


def end_text(end: datetime) -> str:
    """``end`` as the links' ``?end=`` (:func:`pinned_end`)."""
    return f"{pinned_end(end):%Y-%m-%dT%H:%MZ}"


def page_link(base_url: str, path: str, params: dict[str, str]) -> str:
    """``base_url/path?params``, the parameters in the given order; ``:`` stays readable (times)."""
    query = urlencode(params, quote_via=quote, safe=":")
    return f"{base_url.rstrip('/')}/{path}" + (f"?{query}" if query else "")


def request_link(base_url: str, request_id: str) -> str:
    """The request drill-down of ``request_id``.

    >>> request_link("http://127.0.0.1:8501", "req-0042")
    'http://127.0.0.1:8501/request?request_id=req-0042'
    """
    return page_link(base_url, REQUEST_PATH, {REQUEST_ID_PARAM: request_id})


def bundle_link(base_url: str, bundle_id: str) -> str:
    """The Bundles page opened on ``bundle_id``'s manifest and qualification report; with ``base_url`` ``"."``
    a link relative to the page that shows it.

    >>> bundle_link(".", "f28cc12a")
    './bundles?bundle_id=f28cc12a'
    """
    return page_link(base_url, BUNDLES_PATH, {BUNDLE_ID_PARAM: bundle_id})


def canary_link(
    base_url: str,
    *,
    model: str | None = None,
    candidate: str | None = None,
    baseline: str | None = None,
    hw_pool: str | None = None,
    traffic_class: str | None = None,
    window: timedelta | None = None,
    end: datetime | None = None,
    min_requests: int | None = None,
    min_pairs: int | None = None,
    latency_tolerance: float | None = None,
) -> str:
    """The canary comparison page with its form filled in; with both ``candidate`` and ``baseline`` it opens on
    their verdict. A field left ``None`` keeps the page's default.

    Args:
        base_url: The dashboard, e.g. ``http://127.0.0.1:8501``.
        model: The model whose bundles are compared.
        candidate: The candidate bundle id, or a prefix of it that names one bundle of ``model``.
        baseline: The baseline bundle id, or such a prefix.
        hw_pool: Compare the requests of this hardware pool only.
        traffic_class: Compare the requests of this traffic class only.
        window: How far back the comparison reaches: the page takes the shortest of its windows that holds it.
        end: The end of the window (default: now, when the page opens).
        min_requests: Requests each side needs for a verdict.
        min_pairs: Input-matched pairs argmax agreement needs.
        latency_tolerance: The candidate's allowed latency increase, as a share (0.1 is 10 %).

    >>> canary_link("http://127.0.0.1:8501", model="m", candidate="c0ffee", baseline="b0a7", min_pairs=12)
    'http://127.0.0.1:8501/canary?model=m&candidate=c0ffee&baseline=b0a7&min_pairs=12'
    """
    fields: dict[str, object] = {
        "model": model, "candidate": candidate, "baseline": baseline, "hw_pool": hw_pool,
        "traffic_class": traffic_class, "window": None if window is None else duration_text(window),
        "min_requests": min_requests, "min_pairs": min_pairs, "latency_tolerance": latency_tolerance,
    }  # fmt: skip
    params = {name: str(fields[name]) for name in CANARY_PARAMS if fields[name] is not None}
    if end is not None:
        params[END_PARAM] = end_text(end)
    return page_link(base_url, CANARY_PATH, params)


def requests_link(
    base_url: str,
    *,
    window: timedelta | None = None,
    end: datetime | None = None,
    **filters: str | None,
) -> str:
    """The request list narrowed to ``filters`` (keys of :data:`FILTER_PARAMS`; ``None`` means all), over the
    ``window`` before ``end`` (default: the page's range, ending now); with ``base_url`` ``"."`` a link relative to
    the page that shows it.

    >>> requests_link(".", host="h200-b-07", window=timedelta(hours=6))
    './requests?host=h200-b-07&window=6h'
    """
    unknown = set(filters) - set(FILTER_PARAMS)
    if unknown:
        raise TypeError(f"not a filter of the request list: {', '.join(sorted(unknown))}")
    params = {name: str(filters[name]) for name in FILTER_PARAMS if filters.get(name) is not None}
    if window is not None:
        params[WINDOW_PARAM] = duration_text(window)
    if end is not None:
        params[END_PARAM] = end_text(end)
    return page_link(base_url, REQUESTS_PATH, params)
