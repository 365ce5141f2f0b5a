"""Graph breaks, guard failures and recompile reasons: what breaks or invalidates graphs, where, how often.

"Requests touched" counts distinct non-empty request ids recorded with the events (a break met while
compiling for a request, a guard that failed on a request's frame entry). Events recorded outside a
request (for example imported from a trace log) count as events but touch no request.
"""

from __future__ import annotations

import polars as pl

from inferensics.analytics._requests import BucketUnit
from inferensics.analytics.client import QueryClient
from inferensics.analytics.filters import SliceParams, check_filter_values, slice_where
from inferensics.analytics.overview import check_bucket_unit
from inferensics.analytics.reasons import LAST_SEEN, PATTERN, as_reason, pattern_columns, reason_pattern_sql
from inferensics.analytics.recompile_counts import LIMIT_HIT, RECOMPILED, recompile_records
from inferensics.schema import columns as col


def _touched() -> str:
    return f"toUInt64(uniqExactIf({col.REQUEST_ID}, {col.REQUEST_ID} != ''))"


def _touched_state() -> str:
    """:func:`_touched` as an aggregate state, merged across the texts of one reason pattern (of 64-bit hashes:
    a set of integers merges at a fraction of a set of strings' cost, and two ids that collide are 1 in 2^64)."""
    return f"uniqExactStateIf(cityHash64({col.REQUEST_ID}), {col.REQUEST_ID} != '')"


def _top(
    client: QueryClient, where_sql: str, params: dict[str, object], keys: list[str], *, value: str, k: int
) -> pl.DataFrame:
    """The ``k`` most frequent ``value``s per ``keys`` (ties broken by value), as a list column ``value``.
    A key or the value may be an SQL expression ``expr AS name``: the frame names it ``name``."""
    names = [_alias(key) for key in keys]
    counts = client.query_frame(
        f"SELECT {', '.join(keys)}, {value}, count() AS n FROM {client.database}.graph_breaks "
        f"WHERE {where_sql} GROUP BY {', '.join(names)}, {_alias(value)}",
        params,
    )
    return (
        counts.sort([*names, "n", _alias(value)], descending=[*([False] * len(names)), True, False])
        .group_by(names, maintain_order=True)
        .agg(pl.col(_alias(value)).head(k))
    )


def _alias(expression: str) -> str:
    """The name ``expr AS name`` gives its column (a bare column names itself)."""
    return expression.rsplit(" AS ", 1)[-1]


_UNNAMED = f"{col.REGISTRY_ID} = '' AND {col.BREAK_TYPE} = ''"
"""SQL: a break whose message named no registry id and no type (older logs): its reason text is all it says."""


def _first_line(column: str) -> str:
    """SQL: the first line of ``column``'s text, trimmed."""
    return f"trimBoth(splitByChar('\\n', {column})[1])"


_FIRST_LINE = _first_line(col.REASON)
_SHOWN = "shown_reason"
"""Column of :func:`graph_breaks`' query: the ``reason`` it shows (read here, not returned)."""
BREAK_REASON = f"if({_UNNAMED}, {reason_pattern_sql(_FIRST_LINE)}, '')"
"""SQL: what groups a break with neither registry id nor type: its reason's first line as a pattern (values read
N, as :mod:`~inferensics.analytics.reasons` groups them); empty for a break that names an id or a type."""


def graph_breaks(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """Graph breaks by registry id and break type, most frequent first; a break whose message names neither
    (older logs) is grouped by its reason instead, so two different unnamed breaks are two rows.

    Columns: registry_id (empty when the message names none), break_type, reason (the first line of the reason
    text as a pattern, values read N: for a break with neither id nor type, the one its row groups; else its latest
    text's, what the break said beside its id and type), events, requests (touched), models (sorted list),
    example_reason (the latest reason text), top_user_frames (up to 3 most frequent ``file:line in function``
    frames, else compiled frames ``file:line:function`` for breaks that recorded no user frame; ties in name order).
    """
    check_filter_values(client, params, ("graph_breaks",))
    where = slice_where(params, "graph_breaks", what="graph breaks")
    keys = [col.REGISTRY_ID, col.BREAK_TYPE, col.REASON]
    frame = client.query_frame(
        f"SELECT {col.REGISTRY_ID}, {col.BREAK_TYPE}, {BREAK_REASON} AS {PATTERN}, toUInt64(count()) AS events, "
        f"{_touched()} AS requests, arraySort(groupUniqArray(toString({col.MODEL}))) AS models, "
        f"argMax({col.REASON}, ({col.TS}, {col.REASON})) AS example_reason, "
        f"if({PATTERN} = '', {reason_pattern_sql(_first_line('example_reason'))}, {PATTERN}) AS {_SHOWN} "
        f"FROM {client.database}.graph_breaks WHERE {where.sql} GROUP BY {col.REGISTRY_ID}, {col.BREAK_TYPE}, "
        f"{PATTERN}",
        where.params,
    ).pipe(as_reason)
    frames = f"if({col.USER_FRAME} != '', {col.USER_FRAME}, {col.CODE_LOCATION})"
    top = _top(
        client, where.sql, where.params, [col.REGISTRY_ID, col.BREAK_TYPE, f"{BREAK_REASON} AS {PATTERN}"],
        value=f"{frames} AS top_user_frames", k=3,
    ).pipe(as_reason)  # fmt: skip
    # Grouped by the pattern (empty for a named break), shown with the named break's own words.
    shown = frame.join(top, on=keys, how="left").with_columns(pl.col(_SHOWN).alias(col.REASON)).drop(_SHOWN)
    return shown.sort(["events", "requests", *keys], descending=[True, True, False, False, False])


def graph_break_sites(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """Where in user code graph breaks happen: one row per registry id × user frame, most frequent first. A
    break that recorded no user frame (older logs) is placed by its compiled frame instead: breaks at two
    frames stay two rows.

    Columns: registry_id, user_frame (empty when the break recorded none), code_location (the compiled frame
    of a break without a user frame; else the most frequent compiled frame, ties: the first by name), events,
    requests.
    """
    check_filter_values(client, params, ("graph_breaks",))
    where = slice_where(params, "graph_breaks", what="graph breaks")
    keys = [col.REGISTRY_ID, col.USER_FRAME]
    site = f"if({col.USER_FRAME} = '', {col.CODE_LOCATION}, '') AS site"
    frame = client.query_frame(
        f"SELECT {col.REGISTRY_ID}, {col.USER_FRAME}, {site}, toUInt64(count()) AS events, {_touched()} AS requests "
        f"FROM {client.database}.graph_breaks WHERE {where.sql} GROUP BY {col.REGISTRY_ID}, {col.USER_FRAME}, site",
        where.params,
    )
    top = _top(client, where.sql, where.params, [*keys, site], value=col.CODE_LOCATION, k=1).with_columns(
        pl.col(col.CODE_LOCATION).list.first()
    )
    return (
        frame.join(top, on=[*keys, "site"], how="left")
        .select(*keys, col.CODE_LOCATION, "events", "requests")
        .sort(["events", "requests", *keys, col.CODE_LOCATION], descending=[True, True, False, False, False])
    )


def guard_failures(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """Guard failures by reason pattern (:mod:`~inferensics.analytics.reasons`) and frame, most frequent first.

    Columns: reason (the pattern), code_location, failures, requests (touched), hosts (distinct), models
    (sorted list), example_reason (the latest text), variants (distinct texts).
    """
    check_filter_values(client, params, ("guard_failures",))
    where = slice_where(params, "guard_failures", what="guard failures")
    by_text = (
        f"SELECT {col.REASON}, {col.CODE_LOCATION}, {LAST_SEEN}, count() AS n, {_touched_state()} AS touched, "
        f"uniqExactState(cityHash64({col.HOST})) AS host_state, "
        f"groupUniqArrayState(toString({col.MODEL})) AS model_state "
        f"FROM {client.database}.guard_failures WHERE {where.sql} GROUP BY {col.REASON}, {col.CODE_LOCATION}"
    )
    return as_reason(
        client.query_frame(
            f"SELECT {pattern_columns()}, {col.CODE_LOCATION}, toUInt64(sum(n)) AS failures, "
            "toUInt64(uniqExactMerge(touched)) AS requests, toUInt64(uniqExactMerge(host_state)) AS hosts, "
            f"arraySort(groupUniqArrayMerge(model_state)) AS models FROM ({by_text}) "
            f"GROUP BY {PATTERN}, {col.CODE_LOCATION} ORDER BY failures DESC, requests DESC, {PATTERN}, "
            f"{col.CODE_LOCATION}",
            where.params,
        ).select(PATTERN, col.CODE_LOCATION, "failures", "requests", "hosts", "models", "example_reason", "variants")
    )


def recompile_reasons(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """Recompiles by model, hardware pool and primary reason's pattern (:mod:`~inferensics.analytics.reasons`),
    most frequent first.

    A guard failure that found the recompile limit reached compiled nothing (the frame ran eagerly): it is
    counted in ``limit_hits``, not in ``recompiles``, so the recompiles here add up to the recompile records
    (:mod:`~inferensics.analytics.recompile_counts`), inside requests or not.

    Columns: model, hw_pool, reason (the pattern), recompiles, limit_hits (fell back to eager at the
    recompile limit), requests (touched), code_locations (distinct frames), example_reason (the latest
    text), variants (distinct texts).
    """
    check_filter_values(client, params, ("recompiles",))
    where = slice_where(params, "recompiles", what="recompile reasons")
    by_text = (
        f"SELECT {col.MODEL}, {col.HW_POOL}, {col.REASON}, {LAST_SEEN}, {RECOMPILED} AS n, "
        f"countIf({LIMIT_HIT}) AS n_limit, {_touched_state()} AS touched, "
        f"uniqExactState(cityHash64({col.CODE_LOCATION})) AS location_state FROM {client.database}.recompiles "
        f"WHERE {where.sql} GROUP BY {col.MODEL}, {col.HW_POOL}, {col.REASON}"
    )
    return as_reason(
        client.query_frame(
            f"SELECT {col.MODEL}, {col.HW_POOL}, {pattern_columns()}, toUInt64(sum(n)) AS recompiles, "
            "toUInt64(sum(n_limit)) AS limit_hits, toUInt64(uniqExactMerge(touched)) AS requests, "
            f"toUInt64(uniqExactMerge(location_state)) AS code_locations FROM ({by_text}) "
            f"GROUP BY {col.MODEL}, {col.HW_POOL}, {PATTERN} "
            f"ORDER BY recompiles + limit_hits DESC, {col.MODEL}, {col.HW_POOL}, {PATTERN}",
            where.params,
        ).select(
            col.MODEL,
            col.HW_POOL,
            PATTERN,
            "recompiles",
            "limit_hits",
            "requests",
            "code_locations",
            "example_reason",
            "variants",
        )
    )


def recompile_timeseries(client: QueryClient, params: SliceParams, *, unit: BucketUnit = "hour") -> pl.DataFrame:
    """Recompile records (:func:`~inferensics.analytics.recompile_counts.recompile_records`: every recompile event
    but the recompile limit's hits, inside requests or not) per time bucket, model and hardware pool, the count
    :func:`recompile_reasons` and :func:`~inferensics.analytics.storms.specializations` give too. Buckets without
    one are absent.

    Columns: bucket, model, hw_pool, recompiles. Sorted by bucket, model, hw_pool.

    Raises:
        AnalyticsError: minute buckets over a range longer than
            :data:`~inferensics.analytics.overview.MAX_MINUTE_RANGE`.
    """
    check_bucket_unit(params, unit)
    check_filter_values(client, params, ("recompiles",))
    every = recompile_records(client, params, params.start, params.end, unit=unit, what="recompiles over time")
    return every.filter(pl.col(col.RECOMPILES) > 0)
