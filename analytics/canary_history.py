"""The canary verdicts that were recorded (``inferensics canary compare`` records each one it gives), newest
first: what a release's canary said, when, over which window, by which rule."""

from __future__ import annotations

from datetime import datetime

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from inferensics.analytics.client import QueryClient
from inferensics.analytics.filters import TIME_TYPE
from inferensics.schema import columns as col
from inferensics.schema.events import CanaryVerdictEvent
from inferensics.schema.types import as_utc

_COLUMNS = (col.TS, col.MODEL, col.TRAFFIC_CLASS, f"{col.ATTRS}['{col.HW_POOL}'] AS {col.HW_POOL}", col.BASELINE,
            col.CANDIDATE, col.WINDOW_START, col.WINDOW_END, col.VERDICT, col.RULE)  # fmt: skip
"""The columns read; the pool a verdict compared is an attribute (``verdict_event``), empty for every pool."""


class VerdictHistoryParams(BaseModel):
    """Which recorded verdicts: one model (empty: every model), when they were recorded, how many."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = ""
    """The model compared (empty: all)."""
    candidate: str = ""
    """The candidate bundle id (empty: all)."""
    start: datetime | None = None
    """Recorded at or after (UTC; ``None``: all time)."""
    end: datetime | None = None
    """Recorded before (UTC; ``None``: now)."""
    limit: int = Field(default=50, ge=1, le=1000)
    """At most this many, the newest."""


def recorded_verdicts(client: QueryClient, params: VerdictHistoryParams) -> pl.DataFrame:
    """Recorded canary verdicts, newest first.

    Columns: ts (when recorded), model, traffic_class, hw_pool (the pool compared, empty for every pool),
    baseline, candidate, window_start, window_end, verdict (``pass``, ``fail``, ``inconclusive``), rule (what
    decided it). Empty when none was recorded.
    """
    conditions: list[str] = ["1"]
    values: dict[str, object] = {}
    for name, value in ((col.MODEL, params.model), (col.CANDIDATE, params.candidate)):
        if value:
            conditions.append(f"{name} = {{{name}:String}}")
            values[name] = value
    for name, op, when in (("start", ">=", params.start), ("end", "<", params.end)):
        if when is not None:
            conditions.append(f"{col.TS} {op} {{{name}:{TIME_TYPE}}}")
            values[name] = as_utc(when)
    return client.query_frame(
        f"SELECT {', '.join(_COLUMNS)} FROM {client.database}.{CanaryVerdictEvent.TABLE.name} "
        f"WHERE {' AND '.join(conditions)} ORDER BY {col.TS} DESC, {col.CANDIDATE} LIMIT {params.limit}",
        values,
    )
