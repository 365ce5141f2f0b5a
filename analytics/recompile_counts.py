"""The two recompile counts the pages and the weekly report show, each defined once, here.

**Recompile records** (:func:`recompile_records`): rows of the ``recompiles`` table
(:class:`~inferensics.schema.events.RecompileEvent`, one per recompile of a frame whose cached entries all failed
their guards), wherever they were recorded: inside a request, outside any (a server's warm-up) or imported from a
TORCH_TRACE log; a recompile whose compile then failed counts too (the record was written before the compile).
Left out: the rows whose ``attrs['outcome']`` is ``recompile_limit`` (:data:`LIMIT_HIT`): the guard failure found
the recompile limit reached, the frame ran eagerly and nothing was compiled. Recompile records carry no bundle.
The storm hours' recompiles, the Compile & cache health page (its Recompile records headline, Recompiles chart,
reasons table and Specializations table) and the weekly report's ``recompile_records`` are this count.

**Request recompiles** (:func:`request_recompiles`): the sum of the request rows' ``recompiles`` column, which the
host SDK sets to the number of the request's compiles that were recompiles and succeeded (not the number of
requests whose outcome is ``recompile``: one request may recompile two frames). A request whose recompile failed
raised and counts none; a recompile outside any request counts none. Read from the request rollups like every
request sum. The Overview's Request recompiles headline and trend, every ``recompile_rate`` and the weekly report's
``request_recompiles`` are this count, and, under a bundle filter (which recompile records cannot take), the storm
hours' recompiles and the Compile & cache health page's headline.

Two stores where they differ: a request whose recompile failed (one record, no request recompile), a warm-up
recompile (one record, none), a recompile-limit hit (neither).
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

import polars as pl

from inferensics.analytics._requests import BucketUnit, aggregate_sql, time_bucket
from inferensics.analytics.client import QueryClient
from inferensics.analytics.filters import Filters, slice_where
from inferensics.schema import columns as col

RECOMPILE_LIMIT: Final = "recompile_limit"
"""The ``outcome`` attribute of a recompile event whose frame hit the recompile limit (and ran eagerly)."""
LIMIT_HIT: Final = f"{col.ATTRS}['{col.OUTCOME}'] = '{RECOMPILE_LIMIT}'"
"""SQL: the recompile event is a recompile limit hit (it compiled nothing)."""
IS_RECORD: Final = f"NOT ({LIMIT_HIT})"
"""SQL: the row of the ``recompiles`` table is a recompile record (every row but the recompile limit's hits)."""
RECOMPILED: Final = f"toUInt64(countIf({IS_RECORD}))"
"""SQL aggregate over ``recompiles`` rows: how many are recompile records. The one count of records; a query
that splits them otherwise (by reason, say) uses it too."""
_KEYS: Final = (col.MODEL, col.HW_POOL)


def recompile_rate() -> pl.Expr:
    """``recompile_rate``: request recompiles per request (``recompiles / requests`` over a frame of request sums;
    may exceed 1), the one rate the overview and the weekly report give."""
    return (pl.col(col.RECOMPILES) / pl.col(col.REQUESTS)).alias("recompile_rate")


def recompile_records(
    client: QueryClient,
    params: Filters,
    start: datetime,
    end: datetime,
    *,
    unit: BucketUnit | None = None,
    what: str = "recompile records",
) -> pl.DataFrame:
    """Recompile records (module docstring) in ``[start, end)`` of ``params``' slice, per model and hardware pool
    (and per ``unit`` time bucket when given). A group whose rows are all recompile-limit hits reads 0.

    Columns: bucket (when ``unit`` is given; UTC, ms), model, hw_pool, recompiles. Sorted by those keys.

    Raises:
        UnsupportedFilter: a filter the ``recompiles`` table has no column for (the bundle, say); ``what`` names
            the figure in the message. Callers that fall back to :func:`request_recompiles` check
            :func:`~inferensics.analytics.filters.filters_apply` first.
    """
    where = slice_where(params, "recompiles", start=start, end=end, what=what)
    keys = [*([col.BUCKET] if unit else []), *_KEYS]
    bucket = f"{time_bucket(col.TS, unit)} AS {col.BUCKET}, " if unit else ""
    frame = client.query_frame(
        f"SELECT {bucket}{', '.join(_KEYS)}, {RECOMPILED} AS {col.RECOMPILES} FROM {client.database}.recompiles "
        f"WHERE {where.sql} GROUP BY {', '.join(keys)} ORDER BY {', '.join(keys)}",
        where.params,
    )
    return _typed(frame, unit)


def request_recompiles(
    client: QueryClient, params: Filters, start: datetime, end: datetime, *, unit: BucketUnit | None = None
) -> pl.DataFrame:
    """Request recompiles (module docstring) in ``[start, end)`` of ``params``' slice, per model and hardware pool
    (and per ``unit`` time bucket when given), from the same rollup pieces and the same sum as
    :func:`~inferensics.analytics.overview.fleet_overview`'s ``recompiles``. Groups with requests and no
    recompile read 0.

    Columns: bucket (when ``unit`` is given; UTC, ms), model, hw_pool, recompiles. Sorted by those keys.
    """
    keys = [*([col.BUCKET] if unit else []), *_KEYS]
    inner, values = aggregate_sql(
        client.database, params, start, end, keys={k: k for k in _KEYS}, unit=unit, sums=(col.RECOMPILES,),
        quantiles=False,
    )  # fmt: skip
    return _typed(client.query_frame(f"SELECT * FROM ({inner}) ORDER BY {', '.join(keys)}", values), unit)


def _typed(frame: pl.DataFrame, unit: BucketUnit | None) -> pl.DataFrame:
    schema: dict[str, pl.DataType] = {
        **({col.BUCKET: pl.Datetime("ms", "UTC")} if unit else {}),
        col.MODEL: pl.String(),
        col.HW_POOL: pl.String(),
        col.RECOMPILES: pl.UInt64(),
    }
    if frame.is_empty():
        return pl.DataFrame(schema=schema)
    return frame.select(pl.col(name).cast(dtype) for name, dtype in schema.items())
