"""Request drill-down: everything the store knows about one request id.

Reads raw tables (the only place per-request facts live), always narrowed by the request's model so the
primary keys and the request-id bloom filter keep each read small.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from inferensics.analytics.client import QueryClient
from inferensics.analytics.errors import NotFound
from inferensics.analytics.filters import TIME_TYPE, SliceParams, check_filter_values, slice_where
from inferensics.analytics.kernel_fleet import SHAPE_BUCKET
from inferensics.analytics.request_list import (
    ERRORED,
    FAULT,
    FELL_BACK,
    KIND_REPLAYED_FAULT,
    NONFINITE,
    verdicts_sql,
)
from inferensics.schema import columns as col
from inferensics.schema.events import RequestEvent
from inferensics.schema.graph_calls import GRAPH_CALL_PREFIX, GRAPH_CALL_SUFFIX, graph_call_key
from inferensics.schema.request_attrs import BUNDLE_STATUS, BUNDLE_UNQUALIFIED_CALLS, BUNDLE_UNQUALIFIED_SHAPE
from inferensics.schema.shape_text import stored_sizes_text


class RequestParams(BaseModel):
    """Parameters of the drill-down queries."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request_id: str = Field(min_length=1)
    """The request id to look up."""
    occurrence: int | None = Field(None, ge=1)
    """Which of the requests that share the id (a client re-run reuses its ids), 1 for the earliest, in start
    order; ``None`` for the earliest."""


@dataclass(frozen=True)
class RequestDrillDown:
    """The four frames of a drill-down (see :func:`request_detail`, :func:`request_graphs`,
    :func:`request_kernels`, :func:`request_graph_calls`)."""

    detail: pl.DataFrame
    graphs: pl.DataFrame
    kernels: pl.DataFrame
    graph_calls: pl.DataFrame


BUNDLE_ATTRS: Final = (BUNDLE_STATUS, BUNDLE_UNQUALIFIED_SHAPE, BUNDLE_UNQUALIFIED_CALLS)
"""The request attributes (:mod:`inferensics.schema.request_attrs`, as the host SDK records them) that
:func:`request_detail` returns as columns of their own (empty when not recorded)."""
BUNDLE_MISS_COLUMNS: Final = (
    "bundle_miss_actions", "bundle_miss_factors", "bundle_miss_reasons", "bundle_miss_this_request",
)  # fmt: skip
"""The list columns :func:`request_detail` adds about the bundle misses behind the request, one entry per miss:
what the host did (``compiled``, ``eager``, ``refused``), the factors that differ from the bundle (a list each),
why that action, and whether the miss happened in this request (else in an earlier request's compile of a
graph that served it, on its host)."""


MAX_OCCURRENCES: Final = 100
"""Requests sharing one id that the drill-down tells apart at most (the earliest ones)."""


def _request(client: QueryClient, params: RequestParams) -> pl.DataFrame:
    """The request row ``params`` pick, with ``occurrences`` (requests sharing its id), ``occurrence`` (which
    one, 1 for the earliest) and ``occurrence_starts`` (their start times, in order)."""
    names = ", ".join(f"`{n}`" for n in RequestEvent.model_fields if n != col.ATTRS)
    bundle_attrs = ", ".join(f"{col.ATTRS}[{{{name}:String}}] AS `{name}`" for name in BUNDLE_ATTRS)
    rows = client.query_frame(
        f"SELECT {names}, {bundle_attrs} FROM {client.database}.requests WHERE {col.REQUEST_ID} = {{rid:String}} "
        f"ORDER BY {col.TS}, {col.HOST} LIMIT {MAX_OCCURRENCES}",
        {"rid": params.request_id, **{name: name for name in BUNDLE_ATTRS}},
    )
    if rows.is_empty():
        raise NotFound(f"no request {params.request_id!r} in the store (requests are kept 30 days); check the id")
    k = params.occurrence or 1
    if k > rows.height:
        raise NotFound(
            f"request {params.request_id!r} names {rows.height} request{'s' if rows.height > 1 else ''} in the "
            f"store; there is no occurrence {k} (1 is the earliest)"
        )
    starts = rows.get_column(col.TS).to_list()
    return rows.slice(k - 1, 1).with_columns(
        pl.lit(rows.height, pl.UInt32).alias("occurrences"),
        pl.lit(k, pl.UInt32).alias("occurrence"),
        pl.Series("occurrence_starts", [starts]),
    )


def _children(row: pl.DataFrame, table: str = "") -> tuple[str, dict[str, object]]:
    """The condition and parameters that tie a table's rows to the request ``row`` (from :func:`_request`): its
    model and id, and when other requests share the id, its host and the time from its start to the next one's,
    so that two requests' recompiles, guard failures and timings are never mixed."""
    where = f"{col.MODEL} = {{m:String}} AND {col.REQUEST_ID} = {{rid:String}}"
    values: dict[str, object] = {"m": row.item(0, col.MODEL), "rid": row.item(0, col.REQUEST_ID)}
    if int(row.item(0, "occurrences")) > 1:
        k = int(row.item(0, "occurrence"))
        starts = row.item(0, "occurrence_starts")
        ts = f"{table}.{col.TS}" if table else col.TS
        where += f" AND {col.HOST} = {{h:String}} AND {ts} >= {{c_start:{TIME_TYPE}}}"
        values |= {"h": row.item(0, col.HOST), "c_start": starts[k - 1]}
        if k < len(starts):
            where += f" AND {ts} < {{c_end:{TIME_TYPE}}}"
            values["c_end"] = starts[k]
    return where, values


def _request_end(row: pl.DataFrame) -> datetime:
    """When the request ``row`` ended: a compile inside it starts after it did, so its end bounds its host's."""
    start: datetime = row.item(0, col.TS)
    return start + timedelta(milliseconds=float(row.item(0, col.LATENCY_MS) or 0.0))


BUNDLE_MISSES_SHOWN: Final = 20
"""Bundle misses :func:`request_detail` lists at most for one request."""


def _bundle_misses(client: QueryClient, row: pl.DataFrame) -> list[tuple[list[Any], pl.DataType]]:
    """:data:`BUNDLE_MISS_COLUMNS` of the request ``row`` (values and element type of each): the misses it triggered
    itself, then, of the graphs that served it, those its host recorded before it ended (a later request served by
    a graph compiled on a miss records none of its own; a miss names the graph by its FX-graph-cache key, which the
    graph's compile record holds), once per graph."""
    found: list[tuple[list[Any], pl.DataType]] = [([], pl.String()), ([], pl.List(pl.String)), ([], pl.String()),
                                                   ([], pl.Boolean())]  # fmt: skip
    bundle = str(row.item(0, col.BUNDLE_ID) or "")
    if not bundle:
        return found
    db = client.database
    mine, values = _children(row)
    artifacts = [str(a) for a in row.item(0, col.GRAPH_ARTIFACTS) if a]
    served = (
        f"{col.MODEL} = {{m:String}} AND {col.HOST} = {{req_host:String}} AND {col.TS} <= {{ended:{TIME_TYPE}}} "
        f"AND {col.GRAPH_KEY} != '' AND {col.GRAPH_KEY} IN (SELECT {col.FX_CACHE_KEY} FROM {db}.compiles "
        f"WHERE {col.MODEL} = {{m:String}} AND {col.ARTIFACT_ID} IN {{ids:Array(String)}} AND {col.FX_CACHE_KEY} != '')"
        if artifacts
        else "0"
    )
    misses = client.query_frame(
        f"SELECT toBool({mine}) AS this_request, toString({col.ACTION}) AS action, "
        f"{col.FACTORS} AS factors, {col.REASON} FROM {db}.bundle_misses "
        f"WHERE {col.BUNDLE_ID} = {{b:String}} AND (({mine}) OR ({served})) "
        f"ORDER BY this_request DESC, {col.TS} LIMIT 1 BY this_request, {col.GRAPH_SIGNATURE} "
        f"LIMIT {BUNDLE_MISSES_SHOWN}",
        {**values, "b": bundle, "req_host": row.item(0, col.HOST), "ended": _request_end(row), "ids": artifacts},
    )
    names = ("action", "factors", col.REASON, "this_request")
    return [(misses.get_column(n).to_list(), dtype) for n, (_, dtype) in zip(names, found, strict=True)]


def request_detail(client: QueryClient, params: RequestParams) -> pl.DataFrame:
    """One row: every request column (but ``attrs``) plus what other tables add.

    Added columns: occurrences (requests that share the id: a re-run client reuses its ids), occurrence (which
    of them this row is, 1 for the earliest: ``params.occurrence``), occurrence_starts (their start times, in
    order), guard_failure_reasons (list, in time order), recompile_reasons (list), bundle_name,
    bundle_torch_version, bundle_device_name, bundle_signature_state (the registration of the request's host first,
    else the latest; ``verified`` where that host checked the bundle's signature; empty when the bundle is not
    registered), bundle_status, bundle_unqualified_shape and bundle_unqualified_calls (:data:`BUNDLE_ATTRS`: the
    request's attributes; empty when not recorded), bundle_miss_actions, bundle_miss_factors, bundle_miss_reasons,
    bundle_miss_this_request (:data:`BUNDLE_MISS_COLUMNS`: up to :data:`BUNDLE_MISSES_SHOWN` misses, the request's
    own first), inputs_captured (bool), capture_bytes (null when not captured or the blob is missing),
    kernel_timings_sampled (rows in ``kernel_timings``), graph_break_type, graph_break_reason (its first line),
    graph_break_frame (the user frame, else the compiled frame) of the graph break its ``fallback_reason`` names
    (``graph_break:<registry id>``: this request's record of that break, else the model's latest; empty when it
    names none or none is stored). The reasons and timings are this request's own: where requests share the id,
    those of its host from its start to the next one's.
    """
    row = _request(client, params)
    mine, rid = _children(row)
    db = client.database
    extra = client.query_frame(
        f"SELECT (SELECT groupArray({col.REASON}) FROM (SELECT {col.REASON} FROM {db}.guard_failures "
        f"WHERE {mine} ORDER BY {col.TS})) "
        f"AS guard_failure_reasons, "
        f"(SELECT groupArray({col.REASON}) FROM (SELECT {col.REASON} FROM {db}.recompiles "
        f"WHERE {mine} ORDER BY {col.TS})) "
        f"AS recompile_reasons, "
        f"(SELECT toUInt64(count()) FROM {db}.kernel_timings WHERE {mine}) AS kernel_timings_sampled",
        rid,
    )
    # The registration of the request's own host first: its signature_state is what that host verified.
    bundle = client.query_frame(
        f"SELECT {col.BUNDLE_NAME}, {col.TORCH_VERSION}, {col.DEVICE_NAME}, toString({col.SIGNATURE_STATE}) "
        f"FROM {db}.bundles WHERE {col.BUNDLE_ID} = {{b:String}} "
        f"ORDER BY {col.HOST} = {{h:String}} DESC, {col.TS} DESC LIMIT 1",
        {"b": row.item(0, col.BUNDLE_ID), "h": row.item(0, col.HOST)},
    )
    capture = row.item(0, col.CAPTURE_BLOB)
    size = client.query_frame(
        f"SELECT toUInt64(any({col.SIZE_BYTES})) AS s, count() AS n FROM {db}.blobs WHERE {col.SHA256} = {{h:String}}",
        {"h": capture},
    )
    broke = _graph_break(client, row)
    return row.hstack(extra).with_columns(
        *(pl.lit(value, pl.String).alias(name) for name, value in broke.items()),
        pl.lit(str(bundle.item(0, 0)) if bundle.height else "").alias("bundle_name"),
        pl.lit(str(bundle.item(0, 1)) if bundle.height else "").alias("bundle_torch_version"),
        pl.lit(str(bundle.item(0, 2)) if bundle.height else "").alias("bundle_device_name"),
        pl.lit(str(bundle.item(0, 3)) if bundle.height else "").alias("bundle_signature_state"),
        *(
            pl.Series(name, [values], dtype=pl.List(dtype))
            for name, (values, dtype) in zip(BUNDLE_MISS_COLUMNS, _bundle_misses(client, row), strict=True)
        ),
        pl.lit(bool(capture)).alias("inputs_captured"),
        pl.lit(int(size.item(0, "s")) if capture and size.item(0, "n") else None, pl.UInt64).alias("capture_bytes"),
    )


GRAPH_BREAK_PREFIX: Final = "graph_break:"
"""What a ``fallback_reason`` naming a graph break starts with (``graph_break:<registry id>``,
:mod:`inferensics.collector.host.classify`)."""
BREAK_COLUMNS: Final = ("graph_break_type", "graph_break_reason", "graph_break_frame")
"""The columns :func:`request_detail` adds about the graph break its ``fallback_reason`` names."""


def graph_break_id(fallback_reason: object) -> str | None:
    """The registry id a ``fallback_reason`` names (``unknown`` when the break named none); ``None`` when the reason
    is not a graph break.

    >>> graph_break_id("graph_break:GB0124"), graph_break_id("recompile_limit")
    ('GB0124', None)
    """
    text = str(fallback_reason or "")
    return (text.removeprefix(GRAPH_BREAK_PREFIX) or "unknown") if text.startswith(GRAPH_BREAK_PREFIX) else None


def _graph_break(client: QueryClient, row: pl.DataFrame) -> dict[str, str]:
    """:data:`BREAK_COLUMNS` of the request ``row``: the break its fallback reason names, the request's own record
    of it first (a request served by cached graphs compiled nothing: it has none), else the model's latest."""
    found = dict.fromkeys(BREAK_COLUMNS, "")
    registry_id = graph_break_id(row.item(0, col.FALLBACK_REASON))
    if registry_id is None or registry_id == "unknown":
        return found
    frame = f"if({col.USER_FRAME} != '', {col.USER_FRAME}, {col.CODE_LOCATION})"
    breaks = client.query_frame(
        f"SELECT {col.BREAK_TYPE}, trimBoth(splitByChar('\\n', trimLeft({col.REASON}))[1]) AS first_line, "
        f"{frame} AS frame FROM {client.database}.graph_breaks "
        f"WHERE {col.MODEL} = {{m:String}} AND {col.REGISTRY_ID} = {{gb:String}} "
        f"ORDER BY {col.REQUEST_ID} = {{rid:String}} DESC, {col.TS} DESC LIMIT 1",
        {"m": row.item(0, col.MODEL), "gb": registry_id, "rid": row.item(0, col.REQUEST_ID)},
    )
    if breaks.height:
        found |= dict(zip(BREAK_COLUMNS, (str(v or "") for v in breaks.row(0)), strict=True))
    return found


def uncaptured_text(detail: Mapping[str, Any]) -> str:
    """Why a request's inputs were not captured, as far as its row tells: it passed none (no ``input_digest``), or
    its host took none of them: capture off there (the default), its rules leaving the request out, or a skipped
    capture. The row does not record the host's rules, so a failing request names each; a request that completed
    fine was, at most, not chosen by the sampling ``rate``. The request page says it (the page read "capture is on for
    failing or sampled requests" of a request served with capture off) and so does ``inferensics requests --id``.

    >>> uncaptured_text({"input_digest": ""})[:61]
    'it passed no inputs to the tracker (tracker.request(inputs=..'
    >>> uncaptured_text({"input_digest": "ab" * 32, "status": "ok", "fp_nan": 3})[:58]
    'its host did not capture them: capture is off on that host'
    >>> uncaptured_text({"input_digest": "ab" * 32, "status": "ok"})[:47]
    'not chosen: it completed without a fault, which'
    """
    if not str(detail.get(col.INPUT_DIGEST) or ""):
        return (
            "it passed no inputs to the tracker (tracker.request(inputs=...)), or they could not be read (counted in "
            "its host's stats() as capture_errors): there was nothing to capture"
        )
    nonfinite = int(detail.get(col.FP_NAN) or 0) + int(detail.get(col.FP_INF) or 0) > 0
    if detail.get(col.STATUS) == "error" or nonfinite:
        return (
            "its host did not capture them: capture is off on that host (the default; SdkConfig(capture=CaptureRules("
            "enabled=True)) turns it on), its CaptureRules leave out this model, traffic class or kind of failure, or "
            "the capture was skipped (over max_bytes, a redaction hook or upload that failed: its stats() count them)"
        )
    return (
        "not chosen: it completed without a fault, which capture takes only at its sampling rate "
        "(CaptureRules(rate=...)), and only where capture is on on its host (it is off by default)"
    )


def shown_status(detail: Mapping[str, Any]) -> str:
    """A request's status as the drill-downs show it: ``non-finite`` for a request that returned (``ok``) an output
    whose fingerprint counted NaN or inf values, else its ``status``.

    >>> shown_status({"status": "ok", "fp_nan": 3, "fp_inf": 0}), shown_status({"status": "error", "fp_nan": 3})
    ('non-finite', 'error')
    """
    nonfinite = int(detail.get(col.FP_NAN) or 0) + int(detail.get(col.FP_INF) or 0)
    return "non-finite" if nonfinite and detail[col.STATUS] == "ok" else str(detail[col.STATUS])


def graph_break_text(detail: Mapping[str, Any]) -> str | None:
    """What the graph break a request's ``fallback_reason`` names did to it, in one sentence (plain text); ``None``
    when the reason names no graph break.

    A request that compiled graphs served (outcome ``hit``, ``compile``, ``recompile``) ran its frame split at the
    break: compiled graphs, with the code at the break run eagerly between them. That is not an eager fallback
    (the overview's rate leaves it out); only a break that left nothing to compile (outcome ``fallback``) ran the
    whole frame eagerly.

    >>> print(graph_break_text({"outcome": "hit", "fallback_reason": "graph_break:GB0124", "graph_break_type":
    ...                         "Unsupported Tensor.item() call", "graph_break_frame": "model.py:34"}))
    ... # doctest: +NORMALIZE_WHITESPACE
    split at graph break GB0124 (Unsupported Tensor.item() call; at model.py:34): compiled graphs ran, with the code
    at the break run eagerly between them; not an eager fallback
    """
    registry_id = graph_break_id(detail.get(col.FALLBACK_REASON))
    if registry_id is None:
        return None
    said = [str(detail.get(k) or "").strip() for k in BREAK_COLUMNS]
    kind, reason, frame = said
    what = "; ".join(filter(None, [kind, reason if reason != kind else ""]))
    where = f"at {frame}" if frame else ""
    named = f"graph break {registry_id}" + (f" ({'; '.join(filter(None, [what, where]))})" if what or where else "")
    if detail.get(col.OUTCOME) == "fallback":
        return f"ran eagerly: {named} left nothing to compile, so the whole frame ran eagerly (an eager fallback)"
    return (f"split at {named}: compiled graphs ran, with the code at the break run eagerly between them; not an "
            "eager fallback")  # fmt: skip


COMPILED_OUTCOMES: Final = ("hit", "compile", "recompile")
"""Outcomes of a request that compiled graphs served (``fallback``, ``eager`` and ``error`` ran none or raised)."""
VERIFIED: Final = "verified"
"""``signature_state`` of a bundle whose host checked its signature, keyring, hashes and compatibility."""


FACTOR_SHOWN: Final = 280
"""Characters of a bundle miss's differing factor :func:`bundle_lines` shows: a shape factor with its advice whole
(the differing input, the parameters counted, and a static bundle's ``--dynamic``), while a factor naming every input of
a graph (over a thousand characters) is cut; the request's stored row keeps it whole."""


def _shortened(text: str) -> str:
    """``text`` cut to :data:`FACTOR_SHOWN` characters, saying how many more there are."""
    return text if len(text) <= FACTOR_SHOWN else f"{text[:FACTOR_SHOWN]}… ({len(text) - FACTOR_SHOWN:,} more)"


def bundle_lines(detail: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What a request's bundle did for it, one ``(level, sentence)`` per fact (plain text; level ``ok``, ``warn`` or
    ``info``): whether it ran from its verified bundle, a bundle miss (each miss's action, differing factors and
    why), or at sizes the bundle never qualified; none for a request served without a bundle.

    >>> bundle_lines({"bundle_id": "ab" * 32, "bundle_name": "baseline", "bundle_signature_state": "verified",
    ...               "bundle_status": "hit", "shape": "7x120", "bundle_unqualified_calls": "6",
    ...               "bundle_unqualified_shape": "[8,128], [8,1];[2,8,4,128,16]"})  # doctest: +NORMALIZE_WHITESPACE
    [('ok', 'ran from bundle baseline, verified on its host: every graph that served it came from the bundle'),
     ('warn', 'a graph of bundle baseline served 6 of its calls at graph sizes [8,128], ([8,1], [2,8,4,128,16])
       (request 7x120), which the bundle never qualified that graph at (its qualification checked neither accuracy
       nor latency there); rebuild the bundle with the request shape 7x120 in its shape distribution')]
    """
    bundle_id = str(detail.get(col.BUNDLE_ID) or "")
    if not bundle_id:
        return []
    name = str(detail.get("bundle_name") or "") or bundle_id[:16]
    state = str(detail.get("bundle_signature_state") or "")
    checked = (
        "verified on its host" if state == VERIFIED
        else f"registered {state} on its host, not verified" if state
        else "no registration of it stored"
    )  # fmt: skip
    status = str(detail.get(BUNDLE_STATUS) or "")
    lines: list[tuple[str, str]] = []
    if status == "hit":
        ran = f"ran from bundle {name}, {checked}: every graph that served it came from the bundle"
        lines.append(("ok" if state == VERIFIED else "warn", ran))
    elif status == "miss":
        misses = list(zip(*(detail.get(c) or [] for c in BUNDLE_MISS_COLUMNS), strict=True))
        said = [
            f"{action}" + (f" ({'; '.join(map(_shortened, factors))})" if factors else "")
            + (f": {reason}" if reason else "")
            + ("" if own else " (in an earlier request's compile on its host)")
            for action, factors, reason, own in misses
        ]  # fmt: skip
        why = "; ".join(said) if said else "no bundle_misses row of it is stored"
        lines.append(("warn", f"bundle miss: a graph that served it is not in bundle {name} ({checked}): {why}"))
    elif detail.get(col.GRAPH_KEYS) or detail.get(col.OUTCOME) in COMPILED_OUTCOMES:
        lines.append(("info", f"no bundle status recorded (bundle {name}, {checked}): whether the compiled graphs that "
                              "served it came from the bundle is not known (its host's SDK records none)"))  # fmt: skip
    else:
        lines.append(("info", f"no graph of bundle {name} served it ({checked}): it raised or ran eagerly before "
                              "calling one"))  # fmt: skip
    sizes = str(detail.get(BUNDLE_UNQUALIFIED_SHAPE) or "")
    if sizes:
        calls = str(detail.get(BUNDLE_UNQUALIFIED_CALLS) or "")
        which = f"{int(calls):,} of its calls" if calls.isdigit() else "it"  # an older SDK recorded no count
        # Graph sizes are what the graph saw after the model padded the request, so they are not the request's
        # shape; what qualifies them is the request's shape in the build's shape distribution, which the line names.
        request = str(detail.get(col.SHAPE) or "")
        lines.append(("warn", f"a graph of bundle {name} served {which} at graph sizes {stored_sizes_text(sizes)} "
                              f"(request {request or 'shape not recorded'}), which the bundle never qualified that "
                              "graph at (its qualification checked neither accuracy nor latency there); rebuild the "
                              f"bundle with {f'the request shape {request}' if request else 'the request shapes'} in "
                              "its shape distribution"))  # fmt: skip
    return lines


COMPILE_ORIGIN_HERE: Final = "request's host"
"""``compile_origin`` of a graph whose compile is its own host's: the latest compile of the artifact that the
request's host started before the request ended (the compile its process did, or loaded from a cache)."""
COMPILE_ORIGIN_LATER: Final = "request's host, after the request (none before it stored)"
"""``compile_origin`` of a graph whose host has a compile of the artifact stored only after the request ended
(a later process's): the compile that served it is not in the store."""
COMPILE_ORIGIN_ELSEWHERE: Final = "another host (none of the request's host stored)"
"""``compile_origin`` of a graph whose host has no compile of the artifact stored: another host's is shown."""


def request_graphs(client: QueryClient, params: RequestParams) -> pl.DataFrame:
    """The compiled graphs that served the request, in first-call order, with their compiles.

    Columns: position, graph_key, artifact_id, calls, graph_us, code_location, compile_host, compile_origin,
    compile_ts, compile_seconds (entire frame), compile_cache_status, compile_id, kernel_providers (the kernel
    registry's ``op=provider`` decisions traced into the graph).

    The compile of a graph is the one its own host did: the latest compile of that artifact, for the request's
    model, that the request's host started before the request ended. Where that host has none stored, the
    compile shown is its later one if any, else another host's latest, and ``compile_origin`` says which
    (:data:`COMPILE_ORIGIN_HERE`, :data:`COMPILE_ORIGIN_LATER`, :data:`COMPILE_ORIGIN_ELSEWHERE`); the compile
    columns are null when no host's compile of the artifact was recorded.
    """
    row = _request(client, params)
    graphs = pl.DataFrame(
        {
            "position": pl.Series(range(len(row.item(0, col.GRAPH_KEYS))), dtype=pl.UInt32),
            col.GRAPH_KEY: pl.Series(row.item(0, col.GRAPH_KEYS), dtype=pl.String),
            col.ARTIFACT_ID: pl.Series(row.item(0, col.GRAPH_ARTIFACTS), dtype=pl.String),
            "calls": pl.Series(row.item(0, col.GRAPH_CALLS), dtype=pl.UInt32),
            "graph_us": pl.Series(row.item(0, col.GRAPH_US), dtype=pl.UInt32),
        }
    )
    host = str(row.item(0, col.HOST))
    # A compile inside the request starts after the request did: the request's end bounds its own host's.
    ended = _request_end(row)
    mine = f"{col.HOST} = {{h:String}}"
    compiles = client.query_frame(
        f"SELECT {col.ARTIFACT_ID}, {col.CODE_LOCATION}, toString({col.HOST}) AS compile_host, "
        f"multiIf({mine} AND {col.TS} <= {{ended:{TIME_TYPE}}}, {{here:String}}, {mine}, {{later:String}}, "
        f"{{elsewhere:String}}) AS compile_origin, {col.TS} AS compile_ts, "
        f"toFloat64({col.ENTIRE_FRAME_S}) AS compile_seconds, toString({col.CACHE_STATUS}) AS compile_cache_status, "
        f"toString({col.COMPILE_ID}) AS {col.COMPILE_ID}, {col.KERNEL_PROVIDERS} "
        f"FROM {client.database}.compiles WHERE {col.MODEL} = {{m:String}} "
        f"AND {col.ARTIFACT_ID} IN {{ids:Array(String)}} "
        f"ORDER BY compile_origin = {{here:String}} DESC, {mine} DESC, {col.TS} DESC LIMIT 1 BY {col.ARTIFACT_ID}",
        {
            "m": row.item(0, col.MODEL),
            "ids": graphs.get_column(col.ARTIFACT_ID).to_list(),
            "h": host,
            "ended": ended,
            "here": COMPILE_ORIGIN_HERE,
            "later": COMPILE_ORIGIN_LATER,
            "elsewhere": COMPILE_ORIGIN_ELSEWHERE,
        },
    )
    return graphs.join(compiles, on=col.ARTIFACT_ID, how="left").sort("position")


RAISED: Final = ": raised "
"""What a skipped entry (``provider: reason``) of a provider that raised holds (``inferensics.kernels.op``): the
provider was taken out for that signature."""
DECISION_COLUMNS: Final = (
    "this_request", col.COMPILED, "position", col.OP, col.PROVIDER, col.SIGNATURE, SHAPE_BUCKET, col.SKIPPED,
    "raised", col.FALLBACK, col.GRAPH_KEY, col.TS,
)  # fmt: skip
"""The columns of :func:`request_kernel_decisions`, in order."""


def request_kernel_decisions(client: QueryClient, params: RequestParams) -> pl.DataFrame:
    """The kernel-registry decisions behind the request: which provider computed each registry op it called, and
    why the providers before it were skipped (a provider that raised was taken out for that signature).

    Two kinds of ``kernel_decisions`` rows: the request's own (``this_request``: the eager calls whose signature
    its process met first in it, and the traces of the compiles it triggered; where requests share the id, its
    host's from its start to the next one's), and the compiled decisions of the graphs that served it that its host
    recorded before it ended, in another request's compile (a cache hit decides nothing anew). A process records
    an eager decision once per op signature, with the request that made it first: a later request served by it
    has none of its own.

    Columns: this_request, compiled, position (the graph's place in :func:`request_graphs`; null for an eager
    decision), op, provider, signature, bucket, skipped (``provider: reason`` in priority order), raised (the
    skipped entries whose provider raised), fallback, graph_key, ts. One row per graph, op, signature and provider
    (the newest); sorted by compiled first, position, op, signature.
    """
    row = _request(client, params)
    mine, values = _children(row)
    keys = [str(k) for k in row.item(0, col.GRAPH_KEYS) if k]
    ended = _request_end(row)
    served = (
        f"{col.MODEL} = {{m:String}} AND {col.HOST} = {{req_host:String}} AND {col.COMPILED} "
        f"AND {col.GRAPH_KEY} IN {{keys:Array(String)}} AND {col.TS} <= {{ended:{TIME_TYPE}}}"
    )
    frame = client.query_frame(
        f"SELECT {mine} AS this_request, {col.COMPILED}, {col.GRAPH_KEY}, toString({col.OP}) AS {col.OP}, "
        f"toString({col.PROVIDER}) AS {col.PROVIDER}, {col.SIGNATURE}, toString({SHAPE_BUCKET}) AS {SHAPE_BUCKET}, "
        f"{col.SKIPPED}, {col.FALLBACK}, {col.TS} FROM {client.database}.kernel_decisions "
        f"WHERE ({mine}) OR ({served}) ORDER BY this_request DESC, {col.TS} DESC "
        f"LIMIT 1 BY {col.COMPILED}, {col.GRAPH_KEY}, {col.OP}, {col.SIGNATURE}, {col.PROVIDER}",
        {**values, "req_host": row.item(0, col.HOST), "keys": keys, "ended": ended},
    )
    position = {k: i for i, k in reversed(list(enumerate(row.item(0, col.GRAPH_KEYS))))}
    return (
        frame.with_columns(
            pl.col("this_request").cast(pl.Boolean),
            pl.col(col.GRAPH_KEY).replace_strict(position, default=None, return_dtype=pl.UInt32).alias("position"),
            pl.col(col.SKIPPED).list.eval(pl.element().filter(pl.element().str.contains(RAISED, literal=True)))
            .alias("raised"),
            pl.col(col.TS).dt.cast_time_unit("us").dt.convert_time_zone("UTC"),
        )
        .sort([col.COMPILED, "position", col.OP, col.SIGNATURE], descending=[True, False, False, False],
              nulls_last=True)
        .select(DECISION_COLUMNS)
    )  # fmt: skip


_GRAPH_CALL_SQL = f"(startsWith({col.KERNEL_NAME}, {{gp:String}}) AND endsWith({col.KERNEL_NAME}, {{gs:String}}))"
"""A ``kernel_timings`` row that is a whole compiled-graph call range (:mod:`inferensics.schema.graph_calls`)."""


def _timings(client: QueryClient, row: pl.DataFrame, *, graph_calls: bool) -> pl.DataFrame:
    """The request's profiler timings per artifact and name: the whole compiled-graph call ranges
    (``graph_calls``) or everything else. Columns: artifact_id, kernel_name, device, calls, total_us."""
    which = _GRAPH_CALL_SQL if graph_calls else f"NOT {_GRAPH_CALL_SQL}"
    mine, values = _children(row, "kernel_timings")
    return client.query_frame(
        f"SELECT {col.ARTIFACT_ID}, {col.KERNEL_NAME}, toString(any({col.DEVICE})) AS {col.DEVICE}, "
        f"toUInt64(sum({col.CALLS})) AS {col.CALLS}, toFloat64(sum({col.TOTAL_US})) AS {col.TOTAL_US} "
        f"FROM {client.database}.kernel_timings WHERE {mine} "
        f"AND {which} GROUP BY {col.ARTIFACT_ID}, {col.KERNEL_NAME}",
        {**values, "gp": GRAPH_CALL_PREFIX, "gs": GRAPH_CALL_SUFFIX},
    )


def request_kernels(client: QueryClient, params: RequestParams) -> pl.DataFrame:
    """The kernels of the request's artifacts with their source lines, and its sampled timings.

    One row per artifact × kernel from the kernel inventory, joined with the request's profiler timings
    (``calls``/``total_us`` null when not sampled). Timings of kernels the inventory does not hold (or not
    tied to an artifact) are kept with empty provenance. The profiler's ranges around whole compiled-graph
    calls (``## Call CompiledFxGraph <key> ##``) are not kernels and are left out: :func:`request_graph_calls`
    has them. Columns: artifact_id, graph_key, kernel_name, kernel_backend, post_grad_nodes, source_lines,
    device, calls, total_us. Sorted by total_us descending (unsampled last), then artifact and kernel name.
    """
    row = _request(client, params)
    db = client.database
    artifacts = [a for a in row.item(0, col.GRAPH_ARTIFACTS) if a]
    inventory = client.query_frame(
        f"SELECT {col.ARTIFACT_ID}, {col.GRAPH_KEY}, {col.KERNEL_NAME}, toString({col.KERNEL_BACKEND}) AS "
        f"{col.KERNEL_BACKEND}, {col.POST_GRAD_NODES}, {col.SOURCE_LINES} FROM {db}.kernels "
        f"WHERE {col.ARTIFACT_ID} IN {{ids:Array(String)}} ORDER BY {col.TS} DESC "
        f"LIMIT 1 BY {col.ARTIFACT_ID}, {col.KERNEL_NAME}",
        {"ids": artifacts},
    )
    timings = _timings(client, row, graph_calls=False)
    keys = [col.ARTIFACT_ID, col.KERNEL_NAME]
    out = inventory.join(timings, on=keys, how="full", coalesce=True).with_columns(
        pl.col(col.GRAPH_KEY).fill_null(""),
        pl.col(col.KERNEL_BACKEND).fill_null(""),
        pl.col(col.POST_GRAD_NODES).fill_null(pl.lit([], pl.List(pl.String))),
        pl.col(col.SOURCE_LINES).fill_null(pl.lit([], pl.List(pl.String))),
    )
    return out.select(
        col.ARTIFACT_ID,
        col.GRAPH_KEY,
        col.KERNEL_NAME,
        col.KERNEL_BACKEND,
        col.POST_GRAD_NODES,
        col.SOURCE_LINES,
        col.DEVICE,
        col.CALLS,
        col.TOTAL_US,
    ).sort([col.TOTAL_US, col.ARTIFACT_ID, col.KERNEL_NAME], descending=[True, False, False], nulls_last=True)


def request_graph_calls(client: QueryClient, params: RequestParams) -> pl.DataFrame:
    """The profiled request's whole compiled-graph calls: the time of each compiled graph's calls as the
    profiler measured them (Inductor's ``## Call CompiledFxGraph <key> ##`` range around a whole call, which
    holds every kernel of the call and the code between them), one row per graph.

    Each range is tied to its artifact by the host when it saw the compile, else here by its key: the
    FX-graph-cache key, matched to the latest stored compile with that ``fx_cache_key`` (of any model or
    host: the key is a content hash of the graph, its inputs and the compiler's settings).

    Columns: position (the graph's place in :func:`request_graphs`; null when the request is not recorded as
    calling that graph: one compiled outside ``tracker.compile`` or before the host was instrumented),
    graph_key, artifact_id (empty when not tied: the graph had no FX-graph-cache key, or no compile with it
    is stored), fx_cache_key (empty when the graph had none: the cache was bypassed), device, calls,
    total_us (µs, over all its calls in the request). Empty when the request was not profiled. Sorted by
    position (nulls last), then total_us descending.
    """
    row = _request(client, params)
    db = client.database
    ranges = _timings(client, row, graph_calls=True)
    keys = [graph_call_key(str(name)) or "" for name in ranges.get_column(col.KERNEL_NAME).to_list()]
    ranges = ranges.with_columns(pl.Series(col.FX_CACHE_KEY, keys, dtype=pl.String))
    untied = sorted({k for k, a in zip(keys, ranges.get_column(col.ARTIFACT_ID).to_list(), strict=True) if k and not a})
    stored = pl.DataFrame(
        schema={col.FX_CACHE_KEY: pl.String, "stored_artifact": pl.String, "stored_graph_key": pl.String}
    )
    if untied:  # not narrowed by model: the key names the graph's content; its compile may carry another label
        stored = client.query_frame(
            f"SELECT {col.FX_CACHE_KEY}, {col.ARTIFACT_ID} AS stored_artifact, {col.GRAPH_KEY} AS stored_graph_key "
            f"FROM {db}.compiles WHERE {col.FX_CACHE_KEY} IN {{keys:Array(String)}} AND {col.ARTIFACT_ID} != '' "
            f"ORDER BY {col.TS} DESC LIMIT 1 BY {col.FX_CACHE_KEY}",
            {"keys": untied},
        )
    served = pl.DataFrame(
        {
            col.ARTIFACT_ID: pl.Series(row.item(0, col.GRAPH_ARTIFACTS), dtype=pl.String),
            "served_graph_key": pl.Series(row.item(0, col.GRAPH_KEYS), dtype=pl.String),
        }
    ).with_row_index("position")
    served = served.filter(pl.col(col.ARTIFACT_ID) != "").unique(col.ARTIFACT_ID, keep="first", maintain_order=True)
    tied = (
        ranges.join(stored, on=col.FX_CACHE_KEY, how="left")
        .with_columns(
            pl.when(pl.col(col.ARTIFACT_ID) != "")
            .then(pl.col(col.ARTIFACT_ID))
            .otherwise(pl.col("stored_artifact").fill_null(""))
            .alias(col.ARTIFACT_ID)
        )
        .group_by(col.ARTIFACT_ID, col.FX_CACHE_KEY)
        .agg(
            pl.col(col.DEVICE).first(),
            pl.col(col.CALLS).sum(),
            pl.col(col.TOTAL_US).sum(),
            pl.col("stored_graph_key").drop_nulls().first(),
        )
        .join(served, on=col.ARTIFACT_ID, how="left")
    )
    return tied.select(
        pl.col("position").cast(pl.UInt32),
        pl.coalesce("served_graph_key", "stored_graph_key", pl.lit("")).alias(col.GRAPH_KEY),
        col.ARTIFACT_ID,
        col.FX_CACHE_KEY,
        col.DEVICE,
        pl.col(col.CALLS).cast(pl.UInt64),
        pl.col(col.TOTAL_US).cast(pl.Float64),
    ).sort(["position", col.TOTAL_US], descending=[False, True], nulls_last=True)


def drill_down(client: QueryClient, request_id: str, occurrence: int | None = None) -> RequestDrillDown:
    """All four drill-down frames for ``request_id`` (its ``occurrence``-th request where several share it).

    Raises:
        NotFound: no such request in the store.
    """
    params = RequestParams(request_id=request_id, occurrence=occurrence)
    return RequestDrillDown(
        request_detail(client, params),
        request_graphs(client, params),
        request_kernels(client, params),
        request_graph_calls(client, params),
    )


NOTABLE_LIMIT = 50
"""Requests :func:`notable_requests` returns at most."""


def notable_requests(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """The slice's requests worth opening, newest first (at most 50): failed, non-finite outputs (NaN or
    inf), eager fallbacks, requests whose replay verdict named a fault (``inferensics replay``: an output wrong
    though finite; which verdicts are a request's: :mod:`~inferensics.analytics.request_list`), recompiles and
    first compiles.

    Columns: ts, request_id, model, hw_pool, traffic_class, why (``failed``, ``non-finite output``,
    ``eager fallback``, ``replayed fault``, ``recompile``, ``first compile``: the first that applies, in that
    order), outcome, status, latency_ms.
    """
    check_filter_values(client, params, ("requests_1h", "requests"))
    where = slice_where(params, "requests", what="notable requests")
    why = (
        f"multiIf({ERRORED}, 'failed', {NONFINITE}, 'non-finite output', "
        f"{FELL_BACK}, 'eager fallback', m.{FAULT} = 1, {{replayed:String}}, {col.OUTCOME} = 'recompile', "
        f"'recompile', {col.OUTCOME} = 'compile', 'first compile', '')"
    )
    db = client.database
    return client.query_frame(
        f"SELECT {col.TS}, {col.REQUEST_ID}, {col.MODEL}, {col.HW_POOL}, {col.TRAFFIC_CLASS}, {why} AS why, "
        f"{col.OUTCOME}, {col.STATUS}, {col.LATENCY_MS} FROM {db}.requests AS q "
        f"LEFT JOIN ({verdicts_sql(db, where.sql)}) AS m "
        f"ON q.{col.REQUEST_ID} = m.v_id AND q.{col.HOST} = m.v_host AND q.{col.TS} = m.v_ts "
        f"WHERE {where.sql} AND why != '' ORDER BY {col.TS} DESC, {col.REQUEST_ID} LIMIT {NOTABLE_LIMIT}",
        {**where.params, "replayed": KIND_REPLAYED_FAULT},
    )


NONFINITE_BY_PATH: Final = "nonfinite_by_path"
"""Column of :func:`request_replays`: the verdict's non-finite counts per path, as JSON text."""


REPLAYED_INPUTS: Final = "replayed_inputs"
"""Column of :func:`request_replays`: the sha256 of the inputs the verdict's replay ran (its evidence's
``captured_inputs``), the ``capture_blob`` of the request it replayed."""
SAME_REQUEST: Final = "same_request"
"""Column of :func:`request_replays`: whether the verdict is the request's own (true), or cannot be told apart
from another request's of the same id (null: it names no inputs digest)."""


def request_replays(client: QueryClient, params: RequestParams) -> pl.DataFrame:
    """Replay verdicts recorded for the request (``inferensics replay``), newest first.

    A client re-run reuses its ids. Where requests share the id, a verdict is this request's when it names this
    request's host and start time (``request_host``, ``request_ts``: verdicts recorded since schema version 24); a
    verdict stored before, which names neither, is this request's when the inputs it replayed (their sha256, in its
    evidence) are this request's captured inputs and its bundle is this request's. Verdicts of the others are left
    out. A verdict that names neither the request nor an inputs digest is kept with ``same_request`` null: nothing
    in its row tells which request it replayed.

    Columns: ts, replay_id, bundle_id, device_name, attribution, op, fx_node, kernel, source_file,
    source_line, source_text, error_ratio, detail, summary (the verdict's sentence for people, from its JSON),
    nonfinite_by_path (the non-finite elements of each path's output the verdict counted, as the JSON object of
    its evidence: ``{"fp64": {"nan": 8, "inf": 0, "total": 8}, "eager float32": ..., "served": ...}``; empty
    when it counted none), replayed_inputs (:data:`REPLAYED_INPUTS`), same_request (:data:`SAME_REQUEST`). Empty
    when it was never replayed.
    """
    names = (col.TS, col.REPLAY_ID, col.BUNDLE_ID, col.DEVICE_NAME, col.ATTRIBUTION, col.OP, col.FX_NODE, col.KERNEL,
             col.SOURCE_FILE, col.SOURCE_LINE, col.SOURCE_TEXT, col.ERROR_RATIO, col.DETAIL)  # fmt: skip
    summary = f"JSONExtractString({col.VERDICT_JSON}, 'summary') AS summary"
    nonfinite = f"JSONExtractRaw({col.VERDICT_JSON}, 'evidence', 'nonfinite') AS {NONFINITE_BY_PATH}"
    digest = f"JSONExtractString({col.VERDICT_JSON}, 'evidence', 'captured_inputs', 'sha256')"
    inputs = f"lower({digest}) AS {REPLAYED_INPUTS}"
    which = (col.REQUEST_HOST, col.REQUEST_TS)  # the request a verdict replayed; read here, not returned
    verdicts = client.query_frame(
        f"SELECT {', '.join(f'`{n}`' for n in (*names, *which))}, {summary}, {nonfinite}, {inputs} "
        f"FROM {client.database}.replay_results "
        f"WHERE {col.REQUEST_ID} = {{rid:String}} ORDER BY {col.TS} DESC LIMIT 20",
        {"rid": params.request_id},
    )
    try:
        row = _request(client, params) if verdicts.height else None
    except NotFound:  # verdicts of an id whose requests have expired: nothing to tell them apart by
        row = None
    if row is None or int(row.item(0, "occurrences")) < 2:
        return verdicts.drop(which).with_columns(pl.lit(True).alias(SAME_REQUEST))
    blob, bundle = str(row.item(0, col.CAPTURE_BLOB) or "").lower(), str(row.item(0, col.BUNDLE_ID) or "")
    placed = pl.col(col.REQUEST_HOST) != ""  # stored before version 24: '' and the epoch
    start = row.get_column(col.TS).dt.epoch("us").item()
    here = (pl.col(col.REQUEST_HOST) == str(row.item(0, col.HOST))) & (pl.col(col.REQUEST_TS).dt.epoch("us") == start)
    named = pl.col(REPLAYED_INPUTS) != ""
    own = (pl.col(REPLAYED_INPUTS) == blob) & (pl.lit(not bundle) | (pl.col(col.BUNDLE_ID) == bundle))
    keep = pl.when(placed).then(here).otherwise(~named | (own & pl.lit(bool(blob))))
    return (
        verdicts.filter(keep)
        .with_columns(
            pl.when(placed | named).then(pl.lit(True)).otherwise(pl.lit(None, pl.Boolean)).alias(SAME_REQUEST)
        )
        .drop(which)
    )
