"""Why a canary comparison has no verdict for want of requests, in words that say what to do.

Rule 1 of the verdict (:mod:`~inferensics.analytics.canary`) leaves a comparison inconclusive when a side served
fewer than ``min_requests`` requests. Three causes call for different fixes, and the rule names the one found:

* **The raw requests expired.** A canary judges each request, so it reads raw ``requests`` rows, which the store
  keeps :data:`RAW_DAYS` days (that table's TTL); the rollups behind the overview and the pool counts keep their
  counts far longer. A window reaching back further can then hold requests the rollups count and the canary no
  longer sees: compare a window within the kept days. Told apart by counting the side in the rollups through the
  planner the overview reads (:func:`~inferensics.analytics._requests.aggregate_sql`), so the counts named are the
  pool note's. Only a side whose window reaches back past the kept days is counted there (rows younger than the
  TTL cannot have expired): a recent comparison runs no query more. A side that still served enough requests is
  judged over those left, and the verdict's rule says so (:func:`partly_expired_note`): the checks read fewer
  requests than the window held, and the oldest not at all.
* **No request of a side in its window:** widen the window, or check the bundle id.
* **Fewer than ``min_requests``:** the rule says so (lower it to what was served, or widen the window).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final

from inferensics.analytics._requests import aggregate_sql
from inferensics.analytics.client import QueryClient
from inferensics.analytics.filters import FILTER_COLUMNS, Filters
from inferensics.schema import columns as col
from inferensics.schema.events import RequestEvent

if TYPE_CHECKING:
    from inferensics.analytics.canary import CanaryParams

SIDES: Final = ("baseline", "candidate")
RAW_DAYS: Final = RequestEvent.TABLE.ttl_days
"""Days the store keeps raw requests (the ``requests`` table's TTL): all a canary can read."""
TOO_FEW: Final = "fewer than"
"""How the rule of a verdict left inconclusive for too few requests begins (no check decided it)."""
NO_REQUESTS: Final = "no requests of the"
"""How the rule begins when a side had no request in its window."""
EXPIRED: Final = "raw requests expired"
"""How the rule begins when a side's raw requests are past the store's TTL while the rollups still count them."""
PARTLY_EXPIRED: Final = "; judged over the raw requests left:"
"""How the note begins that follows the rule of a verdict judged over a window partly past the raw requests kept
(:func:`partly_expired_note`)."""
SHORT_OF_REQUESTS: Final = (TOO_FEW, NO_REQUESTS, EXPIRED)
"""The beginnings of every rule of rule 1 (see :func:`short_of_requests`)."""


def short_of_requests(rule: str) -> bool:
    """Whether a verdict's ``rule`` is rule 1's (a side short of requests), which no check decided."""
    return rule.startswith(SHORT_OF_REQUESTS)


def _horizon(now: datetime | None) -> datetime:
    """The oldest time whose raw requests the store still keeps at ``now``."""
    return (now or datetime.now(UTC)) - timedelta(days=RAW_DAYS)


def may_have_expired(params: CanaryParams, side: str, now: datetime | None) -> bool:
    """Whether ``side``'s window reaches back past the raw requests kept at ``now`` (so some may be gone)."""
    return params.window(side)[0] < _horizon(now)


def rollup_counts(
    client: QueryClient, params: CanaryParams, side: str, pools: Sequence[str | None], *, now: datetime | None = None
) -> dict[str | None, int]:
    """``side``'s requests per pool of ``pools`` (``None``: every pool) as the rollups count them, over its window
    and bundle, in one query."""
    lo, hi = params.window(side)
    filters = Filters(**params.model_dump(include=set(FILTER_COLUMNS)) | {"bundle": _bundle(params, side)})
    sql, values = aggregate_sql(
        client.database, filters, lo, hi, keys={"pool": col.HW_POOL}, sums=(col.REQUESTS,), quantiles=False, now=now
    )
    frame = client.query_frame(sql, values)
    per_pool = {str(p): int(n) for p, n in frame.select("pool", col.REQUESTS).iter_rows()}
    return {pool: sum(per_pool.values()) if pool is None else per_pool.get(pool, 0) for pool in pools}


def _bundle(params: CanaryParams, side: str) -> str | None:
    return params.baseline if side == "baseline" else params.candidate


def _at(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S}" if moment.second or moment.microsecond else f"{moment:%Y-%m-%d %H:%M}"


def _window(params: CanaryParams, sides: Sequence[str]) -> str:
    """The window(s) of ``sides`` in words (``the window 2026-03-02 00:00 – 06:00 UTC``)."""
    spans = {side: "{} – {} UTC".format(*map(_at, params.window(side))) for side in sides}
    if params.window("baseline") == params.window("candidate"):
        return f"the window {spans[sides[0]]}"
    if len(sides) == 1:
        return f"the {sides[0]}'s window {spans[sides[0]]}"
    return "their windows (" + ", ".join(f"{side} {span}" for side, span in spans.items()) + ")"


def partly_expired_note(params: CanaryParams, served: Mapping[str, int], counted: Mapping[str, int]) -> str:
    """What follows the rule of a verdict the checks decided when a side's window reaches back past the raw requests
    the store keeps and the rollups count more of its requests than are left (``served`` and ``counted`` as
    :func:`shortfall_rule` takes them); empty when nothing expired.

    >>> from inferensics.analytics.canary import CanaryParams
    >>> from datetime import datetime, UTC
    >>> p = CanaryParams(model="m", baseline="b", candidate="c", start=datetime(2026, 1, 5, tzinfo=UTC),
    ...                  end=datetime(2026, 1, 7, tzinfo=UTC))
    >>> partly_expired_note(p, {"baseline": 150, "candidate": 200}, {"baseline": 300})[:72]
    '; judged over the raw requests left: the window 2026-01-05 00:00 – 2026-'
    """
    expired = [side for side in SIDES if counted.get(side, 0) > served[side]]
    if not expired:
        return ""
    left = ", ".join(f"{side} {served[side]:,} of {counted[side]:,}" for side in expired)
    return (
        f"{PARTLY_EXPIRED} {_window(params, expired)} reaches back past the {RAW_DAYS} days of raw requests the store "
        f"keeps ({left} left): its oldest requests were not judged; compare a window within the last {RAW_DAYS} "
        "days to judge them all"
    )


def shortfall_rule(params: CanaryParams, served: Mapping[str, int], counted: Mapping[str, int]) -> str:
    """The rule of a verdict left inconclusive because a side served fewer than ``min_requests`` requests.

    ``served`` is each side's requests compared (raw rows), ``counted`` each side's requests as the rollups count
    them where :func:`rollup_counts` was asked (a side absent: not asked). The causes, in this order: raw requests
    expired (the rollups count more than is left), no request of a side, fewer than ``min_requests``.
    """
    short = [side for side in SIDES if served[side] < params.min_requests]
    expired = [side for side in short if counted.get(side, 0) > served[side]]
    if expired:
        left = ", ".join(f"{side} {served[side]:,} of {counted[side]:,}" for side in expired)
        return (
            f"{EXPIRED}: {_window(params, expired)} reaches back past the {RAW_DAYS} days of raw requests the store "
            f"keeps ({left} left; the rollups keep their counts longer, but a canary judges each request): compare a "
            f"window within the last {RAW_DAYS} days"
        )
    empty = [side for side in short if served[side] == 0]
    if empty:
        others = [side for side in SIDES if side not in empty]
        beside = f" ({others[0]} {served[others[0]]:,})" if others else ""
        bundles = [side for side in empty if _bundle(params, side)]
        check = (
            f"check the {bundles[0]} bundle id"
            if len(bundles) == 1
            else ("check the bundle ids" if bundles else "check the model and traffic class")
        )
        where = _window(params, empty)
        return f"{NO_REQUESTS} {' or the '.join(empty)} in {where}{beside}: widen the window, or {check}"
    return f"{TOO_FEW} {params.min_requests} requests on a side"
