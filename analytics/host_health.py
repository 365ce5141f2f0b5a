"""Host SDK health: which serving processes have gone quiet, and what each could not deliver.

Every serving process exports an ``sdk_health`` record every ``health_interval_s`` (60 s by default); its
counters are cumulative since the process started. Each record names its process (``process``:
``<pid>@<start ms>``), so two processes of one host serving the same model in the same pool are two rows, and
a process that replaced another is another row. Records stored before they named a process (``process`` empty)
read as one process per host, model and pool, as before.

Rules:

* **Listed:** a process with a record in the range, or one whose last record lies within ``lookback_s``
  (7 days by default) before the range end: it stopped reporting, and that is what the page is for, so a host
  dead for two days is listed as quiet whatever the range (a one-day lookback dropped it from "last hour"). A
  process silent for longer is taken as retired; widen the range to see it. ``lookback_s`` is at most
  :data:`MAX_LOOKBACK_S`, the records' retention: a longer one would find nothing more.
* **Quiet:** no record for more than its threshold before ``as_of``, the range end or, for a range that
  ends in the future (the dashboard's "last hour" ends at the next minute), the current time, unless its
  last record says it stopped (``stopped``: a clean shutdown, which sends a last record; a crash, a hang or
  a cut network does not). The threshold (``quiet_after_s`` of the row) is three of the process's own health
  intervals (``interval_s`` of its last record), and never less than the parameter ``quiet_after_s``
  (default 180 s: three default intervals), so a process that reports every 5 minutes is not quiet after 3.
* **Replaced:** a later process of the same host, model and pool started after this one's last record: it
  was restarted or replaced (a crash and its restart, a rollout), so it is not quiet. The later process
  counts it in its ``restarts``.
* **Models served** (``models_served``): a record names the tracker's model only (``instrument(model=...)``),
  while a process serving several models labels each compile with the model it served
  (``tracker.compile(model, name=...)``). So a process's models are the labels of its compiles: the rows whose
  process key (``attrs['process']``, :mod:`inferensics.schema.processes`: host, pid and the tracker's start) is
  the process's (host, pid and a start within :data:`SAME_START` of its records' ``started``), up to the range
  end. Empty for a process that compiled nothing; null for records that name no process. A model filter
  lists a process whose tracker's model is that model or whose compiles served it.
* **Bundles refused** (``bundle_refusals``): the release bundles the process would not load, from the
  registrations a host records for a refused bundle (a ``bundles`` row whose ``signature_state`` is the refusal
  cause: ``revoked``, ``quarantined``, ``tampered``, ``untrusted_builder``, ...; the host SDK's
  ``tracker.compile(model, bundle=DIR)`` records it, then raises). Such a row names its host and pool, not its
  process: it belongs to the process of that host and pool that started last before it (within
  :data:`SAME_START`), else, for records that name no process, to every process of that host and pool. Those
  from ``lookback_s`` before the range start to its end are listed, oldest first.
* **Latest counters** (``requests_seen`` ... ``requests_lost``, ``last_error``) are those of the process's
  newest record before the range end: since that process started. ``requests_lost`` is another process's loss: the
  finished requests that processes which died on the host (SIGKILL) never exported, counted by this process from
  their crash journals when it started; so are ``dead_processes`` (those processes) and ``requests_recovered``
  (the requests they had in flight, exported by this process as error rows).
* **Growth in the range** (``<counter>_in_range``): the sum of the increases between consecutive records,
  the first one measured from the process's last record before the range (within ``lookback_s``). A record
  with any counter below its predecessor's is a restart (counted in ``restarts``; only records that name no
  process can show one): its values count whole, as counted from zero. A process's first record counts
  whole too (it started then, or before the lookback). Among records that name no process, a restart whose
  new counters all overtook the old ones before its first record cannot be told apart.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final

import polars as pl
from pydantic import Field

from inferensics.analytics.client import QueryClient
from inferensics.analytics.errors import AnalyticsError
from inferensics.analytics.filters import TIME_TYPE, SliceParams, check_filter_values, slice_where
from inferensics.schema import columns as col
from inferensics.schema.events import SdkHealthEvent
from inferensics.schema.processes import PROCESS_ATTR

TABLE: Final = SdkHealthEvent.TABLE.name
KEYS: Final = (col.HOST, col.MODEL, col.HW_POOL)
"""Where a serving process runs; a restart or a second process there is another ``process``."""
PROCESS_KEYS: Final = (*KEYS, col.PROCESS)
"""What identifies a serving process in the records (one row each)."""
COUNTERS: Final = tuple(
    name
    for name in SdkHealthEvent.model_fields
    if name not in {col.TS, *PROCESS_KEYS, col.QUEUE_DEPTH, col.LAST_ERROR, col.STOPPED, col.INTERVAL_S}
)
"""The cumulative counters of a health record, in the model's order (``queue_depth`` is a gauge)."""
LATEST: Final = (*COUNTERS, col.QUEUE_DEPTH, col.LAST_ERROR, col.STOPPED, col.INTERVAL_S)
INTERVALS_TO_QUIET: Final = 3
"""Health intervals without a record after which a process is quiet (at least the parameter ``quiet_after_s``)."""
"""What the newest record says."""
IN_RANGE: Final = "_in_range"
"""Suffix of a counter's growth within the range."""
MODELS_SERVED: Final = "models_served"
"""Column: the models a process's compiles were labelled with (module docstring)."""
SAME_START: Final = timedelta(seconds=60)
"""How far apart the start in a compile's process key (the tracker's) and the start in the process's health
records (its export pipeline's, taken a moment later) may lie and still name one process: a pid reused on the
host names another process only after this one ended."""
_COMPILE_KEY: Final = r" pid (\d+) at (\S+)$"
"""The end of a live compile's process key, ``<host> pid <pid> at <ISO start>`` (the host SDK's tracker); an
imported log's key has another form and names no health record's process."""
BUNDLE_REFUSALS: Final = "bundle_refusals"
"""Column: the bundles the process refused to load (module docstring), each ``{ts, bundle_id, bundle_name,
cause}``."""
ACCEPTED: Final = ("verified", "unverified", "")
"""A registration's ``signature_state`` that is no refusal: any other value is the cause of one."""
REFUSAL: Final = pl.Struct(
    {col.TS: pl.Datetime("us", "UTC"), col.BUNDLE_ID: pl.String, col.BUNDLE_NAME: pl.String, "cause": pl.String}
)
"""The type of one element of :data:`BUNDLE_REFUSALS`."""
DEFAULT_LOOKBACK_S: Final = 7 * 86_400.0
"""How long a silent process stays listed (as quiet) by default: a host dead over a weekend is still on the page
on Monday, whatever range is chosen."""
MAX_LOOKBACK_S: Final = SdkHealthEvent.TABLE.ttl_days * 86_400.0
"""The longest ``lookback_s``: the health records' retention (a longer lookback finds nothing more, and a huge one
overflowed the date arithmetic into an HTTP 500)."""
COLUMNS: Final = (
    *PROCESS_KEYS, MODELS_SERVED, BUNDLE_REFUSALS, "started", "last_seen", "silent_s", "quiet", "replaced",
    "quiet_after_s", col.INTERVAL_S, col.STOPPED, "records", "restarts",
    *COUNTERS, col.QUEUE_DEPTH,
    "queue_depth_max",
    col.LAST_ERROR, *(c + IN_RANGE for c in COUNTERS),
)  # fmt: skip


class HostHealthParams(SliceParams):
    """A slice (filters: model, hw_pool, host) and the quiet rule's knobs."""

    quiet_after_s: float = Field(180.0, gt=0, allow_inf_nan=False)
    """Seconds without a health record after which a process is quiet (three default health intervals); a
    process whose records say a longer interval gets three of its own."""
    lookback_s: float = Field(DEFAULT_LOOKBACK_S, gt=0, le=MAX_LOOKBACK_S, allow_inf_nan=False)
    """How long before the range end a process that sent nothing in the range is still listed (as quiet); at
    most :data:`MAX_LOOKBACK_S`."""


def host_health(client: QueryClient, params: HostHealthParams, *, now: datetime | None = None) -> pl.DataFrame:
    """One row per serving process (host × model × hw_pool × process) listed by the rules of the module docstring.

    Columns: host, model (the tracker's), hw_pool, process (empty for records that name none), models_served
    (every model its compiles served, sorted; empty when it compiled nothing, null when its records name no
    process), bundle_refusals (the bundles it refused to load: ts, bundle_id, bundle_name, cause; empty when
    none), started (from the process id; null without one), last_seen (newest record before the range
    end), silent_s (seconds from it to ``as_of``), quiet, replaced (a later process took its place),
    quiet_after_s (the threshold applied to it), interval_s (its health interval, 0 when its records predate
    it), stopped (its last record was a clean shutdown's), records (in the range), restarts (in the range), the
    latest counters since the process started (requests_seen, records_dropped,
    spans_sent, spans_refused, refused_auth, refused_down, refused_back_pressure, sdk_errors, kernel_failures,
    kernel_fallbacks, kernel_unproven, kernel_untraceable, requests_lost, dead_processes, requests_recovered),
    queue_depth (latest), queue_depth_max (in the range),
    last_error (latest), and each counter's growth in the range (``<counter>_in_range``). Quiet processes first, longest
    silent first, then by host, model, pool, process.

    Raises:
        AnalyticsError: ``quiet_after_s`` is not shorter than ``lookback_s``, or a filter does not apply
            (traffic_class, bundle: health records carry neither).
    """
    if params.quiet_after_s >= params.lookback_s:
        raise AnalyticsError(
            f"quiet_after_s ({params.quiet_after_s:g}) must be shorter than lookback_s ({params.lookback_s:g}): "
            "a process silent for lookback_s is no longer listed, so it could never show as quiet"
        )
    # A model a process served beside its tracker's is known by its compiles only.
    check_filter_values(client, params, (TABLE, "compiles"))
    # A record names the tracker's model only: a model filter is applied after the models served are known.
    unfiltered = params.model_copy(update={"model": None})
    in_range = slice_where(unfiltered, TABLE, what="host health records")
    lookback = timedelta(seconds=params.lookback_s)
    as_of = min(params.end, now or datetime.now(UTC))
    frame = client.query_frame(
        _sql(client.database, in_range.sql, slice_where(unfiltered, TABLE, time_column=None).sql),
        {**in_range.params, "b_start": params.start - lookback, "listed_from": params.end - lookback},
    ).rename({**{f"l_{v}": v for v in LATEST}, **{f"g_{c}": c + IN_RANGE for c in COUNTERS}})
    silent = (pl.lit(as_of) - pl.col("last_seen")).dt.total_microseconds() / 1e6
    frame = _models_served(
        client,
        _replacements(
            frame.with_columns(pl.col("last_seen").dt.cast_time_unit("us").dt.convert_time_zone("UTC")), params
        ),
        params.end,
    )
    frame = _bundle_refusals(client, frame, params.start - lookback, params.end)
    if params.model is not None:
        frame = frame.filter(
            (pl.col(col.MODEL) == params.model) | pl.col(MODELS_SERVED).list.contains(params.model).fill_null(False)
        )
    return (
        frame.with_columns(silent.clip(lower_bound=0.0).alias("silent_s"))
        .with_columns(
            pl.max_horizontal(pl.lit(params.quiet_after_s), INTERVALS_TO_QUIET * pl.col(col.INTERVAL_S)).alias(
                "quiet_after_s"
            )
        )
        .with_columns(
            ((pl.col("silent_s") > pl.col("quiet_after_s")) & ~pl.col(col.STOPPED) & ~pl.col("replaced")).alias("quiet")
        )
        .select(COLUMNS)
        .sort(["quiet", "silent_s", *PROCESS_KEYS], descending=[True, True, False, False, False, False])
    )


def _replacements(frame: pl.DataFrame, params: HostHealthParams) -> pl.DataFrame:
    """``started`` (from the process id; null when the records name none), ``replaced`` (a later process of the
    same host, model and pool started after this one's last record), and ``restarts`` grown by the processes of
    its host, model and pool that a process started in the range replaced."""
    started_ms = pl.col(col.PROCESS).str.split("@").list.get(1, null_on_oob=True).cast(pl.Int64, strict=False)
    frame = frame.with_columns(
        pl.from_epoch(started_ms, time_unit="ms").dt.cast_time_unit("us").dt.replace_time_zone("UTC").alias("started")
    )
    frame = frame.with_columns(
        (pl.col("started").max().over(list(KEYS)) > pl.col("last_seen")).fill_null(False).alias("replaced")
    )
    # Each replaced process is counted by the first process of its host, model and pool that started after it.
    gone = frame.filter(pl.col("replaced")).select(*KEYS, pl.col(col.PROCESS).alias("gone"), pl.col("last_seen"))
    successors = frame.filter(pl.col("started").is_not_null()).select(*PROCESS_KEYS, "started")
    took_over = (
        gone.join(successors, on=list(KEYS))
        .filter(pl.col("started") > pl.col("last_seen"))
        .group_by([*KEYS, "gone"])
        .agg(pl.col(col.PROCESS).sort_by("started").first(), pl.col("started").min())
        .filter(pl.col("started") >= params.start)
        .group_by(list(PROCESS_KEYS))
        .agg(pl.len().cast(pl.UInt64).alias("replacing"))
    )
    return (
        frame.join(took_over, on=list(PROCESS_KEYS), how="left")
        .with_columns((pl.col("restarts") + pl.col("replacing").fill_null(0)).alias("restarts"))
        .drop("replacing")
    )


def _models_served(client: QueryClient, frame: pl.DataFrame, end: datetime) -> pl.DataFrame:
    """``frame`` with :data:`MODELS_SERVED`: the models of the compiles whose process key names each process
    (module docstring), from the earliest start among them to ``end``."""
    named = frame.filter(pl.col("started").is_not_null())
    if named.is_empty():
        return frame.with_columns(pl.lit(None, pl.List(pl.String)).alias(MODELS_SERVED))
    key = f"{col.ATTRS}['{PROCESS_ATTR}']"
    compiled = client.query_frame(
        f"SELECT toString({col.HOST}) AS {col.HOST}, {key} AS process_key, "
        f"groupUniqArray(toString({col.MODEL})) AS models FROM {client.database}.compiles "
        f"WHERE {col.HOST} IN {{hosts:Array(String)}} AND {col.TS} >= {{since:{TIME_TYPE}}} "
        f"AND {col.TS} < {{until:{TIME_TYPE}}} AND {key} != '' AND {col.MODEL} != '' "
        f"GROUP BY {col.HOST}, process_key",
        {
            "hosts": named.get_column(col.HOST).unique().sort().to_list(),
            "since": min(named.get_column("started").to_list()) - SAME_START,
            "until": end,
        },
    )
    when = "%Y-%m-%dT%H:%M:%S%.f%:z"  # datetime.isoformat() with an offset, as the tracker writes its start
    keyed = (
        compiled.with_columns(
            pl.col("process_key").str.extract(_COMPILE_KEY, 1).alias("pid"),
            pl.col("process_key")
            .str.extract(_COMPILE_KEY, 2)
            .str.to_datetime(when, time_unit="us", strict=False)
            .dt.convert_time_zone("UTC")
            .alias("started"),
        )
        .drop_nulls(["pid", "started"])
        .sort("started")
    )
    processes = named.select(
        *PROCESS_KEYS, pl.col(col.PROCESS).str.split("@").list.first().alias("pid"), pl.col("started")
    ).sort("started")
    served = (
        # Both sides are sorted by start, so within each host and pid too (which polars cannot check itself).
        keyed.join_asof(
            processes,
            on="started",
            by=[col.HOST, "pid"],
            strategy="nearest",
            tolerance=SAME_START,
            check_sortedness=False,
        )
        .drop_nulls(col.PROCESS)
        .explode("models")
        .group_by(list(PROCESS_KEYS))
        .agg(pl.col("models").unique().sort().alias(MODELS_SERVED))
    )
    return frame.join(served, on=list(PROCESS_KEYS), how="left").with_columns(
        pl.when(pl.col("started").is_not_null())
        .then(pl.col(MODELS_SERVED).fill_null(pl.lit([], pl.List(pl.String))))
        .alias(MODELS_SERVED)
    )


def _bundle_refusals(client: QueryClient, frame: pl.DataFrame, since: datetime, until: datetime) -> pl.DataFrame:
    """``frame`` with :data:`BUNDLE_REFUSALS`: the refused registrations from ``since`` to ``until`` of each
    process's host and pool, given to processes by the rule of the module docstring."""
    empty = pl.lit([], pl.List(REFUSAL))
    if frame.is_empty():
        return frame.with_columns(empty.alias(BUNDLE_REFUSALS))
    refused = client.query_frame(
        f"SELECT toString({col.HOST}) AS {col.HOST}, toString({col.HW_POOL}) AS {col.HW_POOL}, {col.TS}, "
        f"toString({col.BUNDLE_ID}) AS {col.BUNDLE_ID}, toString({col.BUNDLE_NAME}) AS {col.BUNDLE_NAME}, "
        f"toString({col.SIGNATURE_STATE}) AS cause FROM {client.database}.bundles "
        f"WHERE {col.HOST} IN {{hosts:Array(String)}} AND {col.SIGNATURE_STATE} NOT IN {{accepted:Array(String)}} "
        f"AND {col.TS} >= {{since:{TIME_TYPE}}} AND {col.TS} < {{until:{TIME_TYPE}}}",
        {
            "hosts": frame.get_column(col.HOST).unique().sort().to_list(),
            "accepted": list(ACCEPTED),
            "since": since,
            "until": until,
        },
    )
    if refused.is_empty():
        return frame.with_columns(empty.alias(BUNDLE_REFUSALS))
    refused = refused.with_columns(pl.col(col.TS).dt.cast_time_unit("us").dt.convert_time_zone("UTC")).sort(col.TS)
    named = frame.filter(pl.col("started").is_not_null()).select(*PROCESS_KEYS, "started").sort("started")
    # The process that started last before the refusal (a tracker starts a moment before its health records say).
    owned = (
        refused.with_columns((pl.col(col.TS) + SAME_START).alias("started"))
        .join_asof(named, on="started", by=[col.HOST, col.HW_POOL], strategy="backward", check_sortedness=False)
        .drop_nulls(col.PROCESS)
        .select(*PROCESS_KEYS, col.TS)
    )
    unnamed = frame.filter(pl.col("started").is_null()).select(PROCESS_KEYS)
    rows = pl.concat([owned, unnamed.join(refused.select(col.HOST, col.HW_POOL, col.TS), on=[col.HOST, col.HW_POOL])])
    listed = (
        rows.join(refused, on=[col.HOST, col.HW_POOL, col.TS])
        .unique()
        .sort(col.TS)
        .group_by(list(PROCESS_KEYS), maintain_order=True)
        .agg(pl.struct(col.TS, col.BUNDLE_ID, col.BUNDLE_NAME, "cause").alias(BUNDLE_REFUSALS))
    )
    frame = frame.join(listed, on=list(PROCESS_KEYS), how="left")
    return frame.with_columns(pl.col(BUNDLE_REFUSALS).fill_null(empty))


def _sql(db: str, in_range: str, dims: str) -> str:
    """One pass: the range's records and each process's last record before it, each record beside its
    predecessor, then one row per process (shadowing aliases are avoided: ClickHouse resolves a name to the
    alias first)."""
    keys = ", ".join(PROCESS_KEYS)
    values = [*COUNTERS, col.QUEUE_DEPTH]
    before = f"({dims}) AND {col.TS} >= {{b_start:{TIME_TYPE}}} AND {col.TS} < {{t_start:{TIME_TYPE}}}"
    latest_before = ", ".join(f"argMax({v}, {col.TS})" for v in LATEST)
    window = f"PARTITION BY {keys} ORDER BY {col.TS} ROWS BETWEEN 1 PRECEDING AND CURRENT ROW"
    lags = ", ".join(f"lagInFrame({c}) OVER w AS p_{c}" for c in COUNTERS)
    went_down = " OR ".join(f"{c} < p_{c}" for c in COUNTERS)
    growth = ", ".join(f"toUInt64(sumIf({c} - if(counted_whole, 0, p_{c}), in_range)) AS g_{c}" for c in COUNTERS)
    latest = ", ".join(f"argMax({v}, {col.TS}) AS l_{v}" for v in LATEST)
    return (
        f"SELECT {', '.join(f'toString({k}) AS {k}' for k in PROCESS_KEYS)}, max({col.TS}) AS last_seen, "
        "toUInt64(countIf(in_range)) AS records, toUInt64(countIf(in_range AND restarted)) AS restarts, "
        f"toUInt32(maxIf({col.QUEUE_DEPTH}, in_range)) AS queue_depth_max, {latest}, {growth} "
        "FROM ("
        f"SELECT *, (row_number() OVER w) > 1 AND ({went_down}) AS restarted, "
        "(row_number() OVER w) = 1 OR restarted AS counted_whole, "
        f"{lags} FROM ("
        f"SELECT {keys}, {col.TS}, true AS in_range, {', '.join(values)}, {col.LAST_ERROR}, {col.STOPPED}, "
        f"{col.INTERVAL_S} "
        f"FROM {db}.{TABLE} WHERE {in_range} "
        f"UNION ALL SELECT {keys}, max({col.TS}) AS seen, false, {latest_before} "
        f"FROM {db}.{TABLE} WHERE {before} GROUP BY {keys}"
        f") WINDOW w AS ({window})"
        f") GROUP BY {keys} HAVING records > 0 OR last_seen >= {{listed_from:{TIME_TYPE}}}"
    )
