"""The newest requests of a slice, each with what went wrong: the on-call list of ``inferensics requests``.

A request failed when it errored (``status`` ``error``), produced non-finite output (NaN or inf counted by its
output fingerprint), fell back to eager (``outcome`` ``fallback``) or was replayed (``inferensics replay``) with a
verdict that named a fault (an attribution other than ``none``: an output that was wrong but finite). Each request is
listed once, under the first of those that applies in that order, so the counts per kind add up to the requests
listed; its newest replay verdict is listed beside it whatever its kind. Reads raw ``requests`` rows (the rollups
count errors and fallbacks, not which request they were), narrowed by the slice's filters and range.

A verdict is a request's when it names the request's id, host and start (``request_host``, ``request_ts``: verdicts
recorded since schema version 24). A verdict stored before names the id only: it is the request's when the inputs it
replayed (their sha256, in its evidence) are the request's captured inputs, or when it names no inputs (nothing then
tells apart requests that share the id: the request drill-down marks such a verdict).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

import polars as pl
from pydantic import Field

from inferensics.analytics.client import QueryClient
from inferensics.analytics.filters import SliceParams, check_filter_values, slice_where
from inferensics.schema import columns as col

ERRORED: Final = f"{col.STATUS} = 'error'"
"""SQL over raw ``requests`` rows: the request failed (its ``status`` is ``error``)."""
NONFINITE: Final = f"({col.FP_NAN} + {col.FP_INF}) > 0"
"""SQL over raw ``requests`` rows: its output fingerprint counted NaN or inf values (only a fingerprinted output
can: a rate of these is taken over :data:`~inferensics.schema.rollups.FINGERPRINTED_SQL` rows)."""
FELL_BACK: Final = f"{col.OUTCOME} = 'fallback'"
"""SQL over raw ``requests`` rows: the request ran eagerly (a graph break, the recompile limit or an error)."""

KIND_ERROR: Final = "error"
"""``kind`` of a request whose ``status`` is ``error``; its detail is the error's first line."""
KIND_NON_FINITE: Final = "non-finite output"
"""``kind`` of a request whose output fingerprint counted NaN or inf values; its detail gives both counts."""
KIND_FALLBACK: Final = "eager fallback"
"""``kind`` of a request that ran eagerly after a graph break, the recompile limit or an error; its detail is
the reason."""
KIND_REPLAYED_FAULT: Final = "replayed fault"
"""``kind`` of a request whose replay verdict named a fault (its output was wrong, though finite); its detail is that
verdict: attribution, op, FX node, source line."""
KIND_OK: Final = "ok"
"""``kind`` of any other request (listed only when not asking for failing requests)."""
KINDS: Final = (KIND_ERROR, KIND_NON_FINITE, KIND_FALLBACK, KIND_REPLAYED_FAULT, KIND_OK)
"""Every kind, in the order a request is tested for them (the first that applies is its kind)."""

NO_FAULT: Final = ("none", "")
"""Replay attributions that name no fault (``none``: the replay found the compiled output right; empty: none
recorded)."""
VERDICT: Final = "verdict"
"""Column: the request's newest replay verdict that named a fault, else its newest verdict (``none``), as one line:
attribution · op · FX node · source line; empty for a request never replayed."""

Outcome = Literal["hit", "compile", "recompile", "fallback", "eager", "error"]
"""A request's ``outcome`` (:data:`~inferensics.schema.events.OUTCOMES`; a test keeps them equal)."""

INPUTS_CAPTURED: Final = "inputs_captured"
"""Column: whether the request's inputs were captured (its ``capture_blob`` is set), which replay needs."""

RAN_COMPILED: Final = "ran_compiled"
"""Column: whether the request entered a compiled frame (its ``guard_outcome`` is not ``none``, or a compiled graph
ran for it). An error of a request that entered none was raised before any compiled code ran (by the server's
validation of its inputs, most often): replay has no compiled fault to find in it."""

DEFAULT_LIMIT: Final = 50
"""Requests :func:`request_list` returns unless told otherwise."""
MAX_LIMIT: Final = 10_000
"""Requests :func:`request_list` returns at most."""


class RequestKindParams(SliceParams):
    """A slice, whether only failing requests count, and which outcomes and latencies."""

    failing: bool = False
    """Only requests that errored, produced non-finite output, fell back to eager or whose replay named a fault."""
    outcome: tuple[Outcome, ...] | None = None
    """Only requests served this way (``hit``, ``compile``, ``recompile``, ``fallback``, ``eager``, ``error``: how
    the compiled program served it); ``None`` for every outcome."""
    min_latency_ms: float | None = Field(None, ge=0)
    """Only requests that took at least this long (ms); ``None`` for any latency."""


class RequestListParams(RequestKindParams):
    """A slice, whether only failing requests are listed, and how many at most."""

    limit: int = Field(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)
    """The newest this many requests are listed."""


FAULT: Final = "replayed_fault"
"""Column of :func:`verdicts_sql`' rows: whether a verdict of the request named a fault (read here and by the
drill-down's notable requests, not returned)."""
_KIND_SQL = (
    f"multiIf({ERRORED}, {{k_error:String}}, {NONFINITE}, {{k_non_finite:String}}, "
    f"{FELL_BACK}, {{k_fallback:String}}, {FAULT}, {{k_replayed:String}}, {{k_ok:String}})"
)
_KIND_VALUES = {"k_error": KIND_ERROR, "k_non_finite": KIND_NON_FINITE, "k_fallback": KIND_FALLBACK,
                "k_replayed": KIND_REPLAYED_FAULT, "k_ok": KIND_OK}  # fmt: skip
_DETAIL_SQL = (
    f"multiIf(kind = {{k_error:String}}, "
    f"if(trimBoth({col.ERROR}) = '', '(no error message recorded)', "
    f"trimBoth(splitByChar('\\n', trimLeft({col.ERROR}))[1])), "
    f"kind = {{k_non_finite:String}}, concat('NaN ', toString({col.FP_NAN}), ', inf ', toString({col.FP_INF})), "
    f"kind = {{k_fallback:String}}, if({col.FALLBACK_REASON} = '', '(no reason recorded)', {col.FALLBACK_REASON}), "
    f"kind = {{k_replayed:String}}, {VERDICT}, "
    f"'')"
)
_VERDICT_TEXT = (
    f"arrayStringConcat(arrayFilter(x -> x != '', [toString({col.ATTRIBUTION}), "
    f"if({col.OP} = '', '', concat('op ', toString({col.OP}))), "
    f"if({col.FX_NODE} = '', '', concat('node ', {col.FX_NODE})), "
    f"if({col.SOURCE_FILE} = '', '', concat({col.SOURCE_FILE}, ':', toString({col.SOURCE_LINE})))]), ' · ')"
)
_REPLAYED_INPUTS = f"lower(JSONExtractString({col.VERDICT_JSON}, 'evidence', 'captured_inputs', 'sha256'))"
_LISTED = (col.TS, col.REQUEST_ID, col.MODEL, col.HW_POOL, col.HOST, col.TRAFFIC_CLASS, col.STATUS, col.ERROR,
           col.FP_NAN, col.FP_INF, col.OUTCOME, col.FALLBACK_REASON, col.LATENCY_MS, col.BUNDLE_ID,
           col.CAPTURE_BLOB, col.GUARD_OUTCOME, col.GRAPH_KEYS)  # fmt: skip
"""The ``requests`` columns the list reads."""


def verdicts_sql(database: str, where: str) -> str:
    """One row per request of the slice that has replay verdicts (module docstring: which are its): its id, host
    and start (``v_id``, ``v_host``, ``v_ts``), :data:`VERDICT` and whether one named a fault."""
    replays = f"{database}.replay_results"
    fault = f"{col.ATTRIBUTION} NOT IN ({', '.join(repr(a) for a in NO_FAULT)})"
    return (
        f"SELECT r.{col.REQUEST_ID} AS v_id, r.{col.HOST} AS v_host, r.{col.TS} AS v_ts, "
        f"argMax(v.text, (v.fault, v.{col.TS})) AS {VERDICT}, max(v.fault) AS {FAULT} "
        f"FROM (SELECT {col.REQUEST_ID}, {col.HOST}, {col.TS}, lower({col.CAPTURE_BLOB}) AS blob "
        f"FROM {database}.requests WHERE ({where}) "
        f"AND {col.REQUEST_ID} IN (SELECT {col.REQUEST_ID} FROM {replays})) AS r "
        f"INNER JOIN (SELECT {col.REQUEST_ID}, {col.REQUEST_HOST}, {col.REQUEST_TS}, {col.TS}, {fault} AS fault, "
        f"{_VERDICT_TEXT} AS text, {_REPLAYED_INPUTS} AS inputs FROM {replays}) AS v "
        f"ON r.{col.REQUEST_ID} = v.{col.REQUEST_ID} "
        f"WHERE if(v.{col.REQUEST_HOST} != '', "
        f"v.{col.REQUEST_HOST} = r.{col.HOST} AND v.{col.REQUEST_TS} = r.{col.TS}, "
        f"v.inputs = '' OR v.inputs = r.blob) "
        f"GROUP BY v_id, v_host, v_ts"
    )


def _rows(client: QueryClient, params: RequestKindParams) -> tuple[str, dict[str, object]]:
    """SQL of the slice's requests (only failing ones when ``params.failing``), each with its kind, detail and
    verdict, and its parameter values."""
    check_filter_values(client, params, ("requests_1h", "requests"))
    where = slice_where(params, "requests", what="the request list")
    db = client.database
    narrow, values = where.sql, dict(where.params)
    if params.outcome is not None:
        narrow += f" AND {col.OUTCOME} IN {{outcomes:Array(String)}}"
        values["outcomes"] = list(params.outcome)
    if params.min_latency_ms is not None:
        narrow += f" AND {col.LATENCY_MS} >= {{min_latency:Float64}}"
        values["min_latency"] = float(params.min_latency_ms)
    rows = (
        f"SELECT {col.TS}, {col.REQUEST_ID}, toString({col.MODEL}) AS {col.MODEL}, "
        f"toString({col.HW_POOL}) AS {col.HW_POOL}, toString({col.HOST}) AS {col.HOST}, "
        f"toString({col.TRAFFIC_CLASS}) AS {col.TRAFFIC_CLASS}, {_KIND_SQL} AS kind, {_DETAIL_SQL} AS detail, "
        f"{VERDICT}, toString({col.OUTCOME}) AS {col.OUTCOME}, toFloat64({col.LATENCY_MS}) AS {col.LATENCY_MS}, "
        f"toString({col.BUNDLE_ID}) AS {col.BUNDLE_ID}, toBool({col.CAPTURE_BLOB} != '') AS {INPUTS_CAPTURED}, "
        f"toBool(toString({col.GUARD_OUTCOME}) != 'none' OR notEmpty({col.GRAPH_KEYS})) AS {RAN_COMPILED} "
        f"FROM (SELECT {', '.join(_LISTED)} FROM {db}.requests WHERE {narrow}) AS q "
        f"LEFT JOIN ({verdicts_sql(db, narrow)}) AS m "
        f"ON q.{col.REQUEST_ID} = m.v_id AND q.{col.HOST} = m.v_host AND q.{col.TS} = m.v_ts"
    )
    failing = " WHERE kind != {k_ok:String}" if params.failing else ""
    return f"SELECT * FROM ({rows}){failing}", {**values, **_KIND_VALUES}


def request_list(client: QueryClient, params: RequestListParams) -> pl.DataFrame:
    """The slice's newest requests (only failing ones when ``failing``), newest first, at most ``limit``.

    Columns: ts, request_id, model, hw_pool, host, traffic_class, kind (``error``, ``non-finite output``,
    ``eager fallback``, ``replayed fault``: the first that applies, in that order; else ``ok``), detail (the error's
    first line, the NaN and inf counts, the fallback reason or the verdict; empty for ``ok``), verdict
    (:data:`VERDICT`), outcome (how it was served: ``hit``, ``compile``, ``recompile``...), latency_ms, bundle_id
    (empty when served without a bundle), inputs_captured (:data:`INPUTS_CAPTURED`), ran_compiled
    (:data:`RAN_COMPILED`). ``outcome`` and
    ``min_latency_ms`` narrow the list (a recompile storm's requests, the slow ones). Ties in time are ordered by
    request id, then host.
    """
    rows, values = _rows(client, params)
    return client.query_frame(
        f"{rows} ORDER BY {col.TS} DESC, {col.REQUEST_ID}, {col.HOST} LIMIT {int(params.limit)}", values
    )


def request_kinds(client: QueryClient, params: RequestKindParams) -> pl.DataFrame:
    """How many of the slice's requests (only failing ones when ``failing``) are of each kind, over the whole
    slice (not only the newest that :func:`request_list` returns).

    Columns: kind, requests. One row per kind that occurs, in :data:`KINDS` order.
    """
    rows, values = _rows(client, params)
    counts = client.query_frame(f"SELECT kind, toUInt64(count()) AS requests FROM ({rows}) GROUP BY kind", values)
    order = {kind: i for i, kind in enumerate(KINDS)}
    return (
        counts.with_columns(pl.col("kind").replace_strict(order, return_dtype=pl.UInt8).alias("_order"))
        .sort("_order")
        .drop("_order")
    )


NUMERIC_FAULT: Final = 0
"""Replay worth (:func:`replay_worth`) of a listed request whose output the compiled code got wrong: non-finite,
or a replay verdict named a fault: what replay attributes to an op, a decomposition, the schedule."""
COMPILED_ERROR: Final = 1
"""Replay worth of a request that errored while compiled code ran."""
EAGER_RUN: Final = 2
"""Replay worth of a request that ran eagerly (a fallback, or non-finite output with no compiled graph run)."""
INPUT_FAULT: Final = 3
"""Replay worth of a request whose fault lies in its inputs: it errored before any compiled graph ran (the
server's validation of its inputs, most often), or a replay verdict already blamed its inputs."""


def replay_worth(row: Mapping[str, Any]) -> tuple[int, str]:
    """How worth replaying a listed failing request is (a :func:`request_list` row): its rank, lower first
    (:data:`NUMERIC_FAULT` to :data:`INPUT_FAULT`), and why, in words that follow its id.

    >>> replay_worth({"kind": KIND_NON_FINITE, "detail": "NaN 12, inf 0", "verdict": "", RAN_COMPILED: True})
    (0, 'produced non-finite output (NaN 12, inf 0) where compiled code ran')
    >>> replay_worth({"kind": KIND_ERROR, "detail": "ValueError: x", "verdict": "", RAN_COMPILED: False})[0]
    3
    """
    kind, detail = str(row.get("kind") or ""), " ".join(str(row.get("detail") or "").split())
    verdict = str(row.get(VERDICT) or "")
    attribution = verdict.split(" · ", 1)[0]
    ran = bool(row.get(RAN_COMPILED, True))
    if attribution == col.INPUTS:
        return INPUT_FAULT, f"was replayed already, and the verdict blamed its inputs ({verdict})"
    if kind == KIND_REPLAYED_FAULT or (attribution and attribution not in NO_FAULT):
        return NUMERIC_FAULT, f"has a replay verdict that named a fault ({verdict})"
    if kind == KIND_NON_FINITE:
        if ran:
            return NUMERIC_FAULT, f"produced non-finite output ({detail}) where compiled code ran"
        return EAGER_RUN, f"produced non-finite output ({detail}) though no compiled graph ran"
    if kind == KIND_ERROR:
        if ran:
            return COMPILED_ERROR, f"errored while compiled code ran: {detail}"
        return (
            INPUT_FAULT,
            f"errored before any compiled graph ran (its inputs failed validation, most likely): {detail}",
        )
    return EAGER_RUN, f"fell back to eager ({detail})" if detail else "fell back to eager"
