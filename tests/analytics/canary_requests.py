"""Request rows for canary tests: one bundle's requests of one model, traffic class, host and pool."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from inferensics.schema import columns as col
from inferensics.schema.events import RequestEvent
from inferensics.schema.store import Store
from tests.analytics.fleet import _complete
from tests.seeding import stop_ttl

MODEL, TRAFFIC_CLASS, HOST, POOL = "m", "t", "h", "p"


def request_frame(
    bundle: str, n: int, start: datetime, columns: Mapping[str, Any] | None = None, *, pool: str = POOL
) -> pl.DataFrame:
    """``n`` requests of model ``m`` (traffic class ``t``, host ``h``) that ``bundle`` served on ``pool``, one a
    second from ``start``, ids ``<bundle>-<pool>-<i>``; ``columns`` adds or overrides columns (a value or one per
    request)."""
    return pl.DataFrame(
        {
            col.REQUEST_ID: [f"{bundle}-{pool}-{i}" for i in range(n)],
            col.TS: [start + timedelta(seconds=i) for i in range(n)],
            col.HOST: HOST,
            col.MODEL: MODEL,
            col.HW_POOL: pool,
            col.TRAFFIC_CLASS: TRAFFIC_CLASS,
            col.BUNDLE_ID: bundle,
            **(columns or {}),
        }
    )


def insert_requests(store: Store, *frames: pl.DataFrame) -> None:
    """Insert ``frames`` as request events (TTL merges stopped: the requests may lie in the past)."""
    stop_ttl(store)
    store.insert_frame(RequestEvent, _complete(RequestEvent, pl.concat(frames, how="diagonal_relaxed")))
