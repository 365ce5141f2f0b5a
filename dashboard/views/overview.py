"""On-call overview: the fleet slices of the selected range, what is on fire, and where to look next."""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import streamlit as st

from inferensics.analytics import spikes
from inferensics.analytics.host_health import DEFAULT_LOOKBACK_S, HostHealthParams
from inferensics.analytics.storms import StormRule
from inferensics.dashboard._internal import charts, queries
from inferensics.dashboard._internal.filters import (
    PROCESS_LEVEL,
    Filters,
    bucket_unit,
    current_filters,
    describe,
    request_filters,
    time_format,
    with_quiet_buckets,
)
from inferensics.dashboard._internal.links import HOSTS_PATH, KERNELS_PATH
from inferensics.dashboard._internal.service import QueryCall, fetch_queries, service_errors
from inferensics.dashboard._internal.storm_rule import current_storm_rule, floor_inputs, storm_rule
from inferensics.dashboard._internal.tables import count, duration_ms, percent, ratio, show_table, total
from inferensics.dashboard.views.hosts import ago, process_name
from inferensics.dashboard.views.kernels import failures
from inferensics.schema import columns as col

SLICE = (col.MODEL, col.HW_POOL, col.TRAFFIC_CLASS)
# Models with their own colour in the requests chart (the busiest); the others are drawn as one. (A comment,
# not a docstring: Streamlit runs this file as a page script and would draw a bare string on the page.)
TREND_MODELS = 8
NONFINITE_WHY = "non-finite output"  # notable_requests' reason for a NaN/inf output
OTHER = "other models"
REQUEST_RECOMPILES = "Request recompiles"  # the headline's label: what requests triggered, not every record
FLOORS_PAGE = "overview"  # the storm rule's inputs are keyed overview.min_recompiles, overview.min_compile_seconds
FLEET_COLUMNS = (
    *SLICE, col.REQUESTS, "request_rate_per_s", "p50_ms", "p95_ms", "p99_ms", "error_rate", "fallback_rate",
    "recompile_rate", col.COMPILE_SECONDS,
)  # fmt: skip
# No cache hit ratio here: fleet_overview's counts requests whose compiles hit, while the Compile & cache
# health page and the weekly report count cache lookups; one figure under one name (issue 20).


HEADLINE_COLUMNS = 4  # metrics a row: seven in one row were cut at laptop width ("Compile time 10,03…")


def compact_seconds(seconds: float) -> str:
    """A duration in the unit that keeps it short: seconds below a minute, minutes below an hour, then hours.

    >>> compact_seconds(42.25), compact_seconds(754.0), compact_seconds(10_034.8), compact_seconds(3_600_000.0)
    ('42.2 s', '12.6 min', '2.8 h', '1,000.0 h')
    """
    if seconds < 60:
        return f"{seconds:,.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:,.1f} min"
    return f"{seconds / 3600:,.1f} h"


def headline(fleet: pl.DataFrame) -> None:
    """The range's totals as metrics, in two rows so that each value and label is read whole at laptop width."""
    requests = total(fleet, col.REQUESTS)
    cells = [*st.columns(HEADLINE_COLUMNS), *st.columns(HEADLINE_COLUMNS)]
    cells[0].metric("Requests", count(requests))
    cells[1].metric("Error rate", percent(ratio(total(fleet, col.ERRORS), requests)))
    cells[2].metric("Eager fallback rate", percent(ratio(total(fleet, col.FALLBACKS), requests)))
    cells[3].metric(
        REQUEST_RECOMPILES,
        count(total(fleet, col.RECOMPILES)),
        help="Recompiles the range's requests triggered and compiled, their rows' count (the weekly report's "
        '"Recompiles requests triggered"). A request whose recompile failed raised and counts none; the '
        "storm highlights and the Compile & cache health page count every recompile record: failed compiles, "
        "warm-up and imported TORCH_TRACE logs too.",
    )
    worst = fleet.get_column("p95_ms").max() if "p95_ms" in fleet.columns and fleet.height else None
    cells[4].metric("Worst slice p95", duration_ms(None if worst is None else float(worst)))  # type: ignore[arg-type]
    # Short labels and compact units: a cell is a quarter of the page ("Compile time in se…", "10,03…" were cut).
    compile_s = total(fleet, col.COMPILE_SECONDS)
    cells[5].metric("Compile time", compact_seconds(compile_s), help=f"In the serving path: {compile_s:,.1f} s.")
    nonfinite, fingerprinted = total(fleet, col.NONFINITE), total(fleet, col.FINGERPRINTED)
    # The rate is over the fingerprinted requests: the host SDK fingerprints a sample of CPU outputs.
    cells[6].metric(
        "Non-finite",
        count(nonfinite),
        # Short: a longer delta is cut ("0.49 % of 205 fin…").
        delta=f"{percent(ratio(nonfinite, fingerprinted))} of {count(fingerprinted)}",
        delta_color="off",
        delta_arrow="off",
        help="Requests whose output held NaN or inf, and their share of the N requests whose output was "
        "fingerprinted (the host SDK fingerprints one CPU output in 32 by default; unsampled ones are unknown).",
    )


def _slice_name(row: dict[str, object]) -> str:
    """``model / pool`` of an alert's row, naming an empty label (an imported log's records may have none)."""
    return f"{row[col.MODEL] or '(no model)'} / {row[col.HW_POOL] or '(no pool)'}"


def storm_alerts(storms: pl.DataFrame, rule: StormRule) -> int:
    """One alert per storm hour, with the ``rule`` that found it; returns how many."""
    for row in storms.iter_rows(named=True):
        reasons = row.get("top_reasons") or []
        top = f" Top reason: `{reasons[0]}`." if reasons else ""
        st.error(
            f"**Recompile storm** · {_slice_name(row)} · "
            f"hour of {row['bucket']:%Y-%m-%d %H:%M} UTC: "
            f"{row[col.RECOMPILES]:,} recompiles (records, failed compiles too), "
            f"{row[col.COMPILE_SECONDS]:,.1f} compile s "
            f"(baseline {row['baseline_recompiles'] or 0:,.0f} recompiles; a storm: {rule.thresholds()}).{top}",
            icon=":material/cyclone:",
        )
    return storms.height


def slow_compile_cause(row: dict[str, object]) -> str:
    """What a slow hour's compile-cache lookups say of it (analytics ``slow_compiles`` counts them as the Compile
    & cache health page's hit ratio does): a cold cache only where lookups missed, never beside lookups that all
    hit.

    >>> slow_compile_cause({"cache_lookups": 4, "cache_hits": 4, "cache_misses": 0, "cache_bypasses": 0})
    "not a cold cache: all 4 of that hour's compile-cache lookups hit (first compiles)"
    >>> slow_compile_cause({"cache_lookups": 3, "cache_hits": 1, "cache_misses": 1, "cache_bypasses": 1})
    "a cold compile cache: of that hour's 3 compile-cache lookups, 1 missed and 1 bypassed the cache"
    """
    lookups = row.get("cache_lookups")
    # An hour listed with a few recompiles (under the storm floor) compiled more than first compiles.
    first = "first compiles" if not row.get(col.RECOMPILES) else "first compiles and recompiles"
    if lookups is None:
        return (
            f"{first} or a cold compile cache: cache lookups carry no traffic class, so this filter leaves "
            "them uncounted"
        )
    if not lookups:
        return f"{first}: no compile-cache lookup was recorded in that hour"
    missed = [
        f"{n:,} {what}"
        for n, what in ((row["cache_misses"], "missed"), (row["cache_bypasses"], "bypassed the cache"))
        if n
    ]
    if not missed:
        return f"not a cold cache: all {lookups:,} of that hour's compile-cache lookups hit ({first})"
    return f"a cold compile cache: of that hour's {lookups:,} compile-cache lookups, {' and '.join(missed)}"


def slow_compile_alerts(slow: pl.DataFrame) -> int:
    """One note per hour of slow compiles with fewer recompiles than a storm needs (none, or a few: analytics
    ``slow_compiles``), saying why it is listed (its ``why``: the threshold reached and its recompiles) and what its
    compile-cache lookups say of it (:func:`slow_compile_cause`)."""
    for row in slow.iter_rows(named=True):
        st.warning(
            f"**Slow compiles** · {_slice_name(row)} · hour of {row['bucket']:%Y-%m-%d %H:%M} UTC: "
            f"{_escaped_why(row)}; {slow_compile_cause(row)}.",
            icon=":material/hourglass_top:",
        )
    return slow.height


def _escaped_why(row: dict[str, object]) -> str:
    """Why a slow hour is listed (analytics ``slow_compiles``' ``why``), its ``×`` and ``*`` shown as written; worded
    from its recompiles where the service gave none."""
    why = str(row.get("why") or "")
    if not why:
        recompiles = int(row.get(col.RECOMPILES) or 0)  # type: ignore[call-overload]
        some = f"with {recompiles} recompile{'s' if recompiles > 1 else ''}" if recompiles else "without a recompile"
        why = f"{float(row[col.COMPILE_SECONDS]):,.1f} compile s {some}"  # type: ignore[arg-type]
    return why.replace("*", "\\*")


def nonfinite_alert(notable: pl.DataFrame) -> int:
    """One alert naming the requests whose outputs held NaN or inf; returns how many there are."""
    bad = notable.filter(pl.col("why") == NONFINITE_WHY) if notable.height else notable
    if bad.height:
        ids = ", ".join(f"[`{r}`](request?request_id={r})" for r in bad.get_column(col.REQUEST_ID).to_list()[:5])
        more = f" and {bad.height - 5} more" if bad.height > 5 else ""
        st.error(
            f"**Non-finite outputs** · {bad.height:,} request(s) returned NaN or inf: {ids}{more}.",
            icon=":material/error:",
        )
    return bad.height


def quiet_hosts_alert(hosts: pl.DataFrame) -> int:
    """One alert naming the serving processes that stopped sending health records (each on the Hosts page);
    returns how many."""
    quiet = hosts.filter(pl.col("quiet")) if hosts.height else hosts
    if quiet.height:
        names = ", ".join(f"{process_name(r)} ({ago(r['silent_s'])} ago)" for r in quiet.head(5).iter_rows(named=True))
        more = f" and {quiet.height - 5} more" if quiet.height > 5 else ""
        st.error(
            f"**Hosts gone quiet** · {quiet.height:,} serving process(es) stopped sending health records: "
            f"{names}{more}. See the [Hosts page]({HOSTS_PATH}).",
            icon=":material/cloud_off:",
        )
    return quiet.height


def provider_failure_alert(skips: pl.DataFrame) -> int:
    """One alert naming the kernel-registry providers that raised (each taken out for that op signature, the
    call served by the next provider; the Kernels page has the details); returns how many raised."""
    raised = failures(skips)
    if raised:
        names = ", ".join(
            f"{r['skipped_provider']} for `{r[col.OP]}` ({', '.join(r['models']) or 'no model'})" for r in raised[:5]
        )
        more = f" and {len(raised) - 5} more" if len(raised) > 5 else ""
        st.warning(
            f"**Kernel provider failures** · {len(raised):,} kernel provider(s) raised and were taken out for the "
            f"signatures they failed on: {names}{more}. See the [Kernels page]({KERNELS_PATH}).",
            icon=":material/memory:",
        )
    return len(raised)


def spike_alerts(spikes: pl.DataFrame, kind: spikes.SpikeKind, window: timedelta, icon: str) -> int:
    """One alert per spike window; returns how many."""
    for row in spikes.iter_rows(named=True):
        start, end = row["window_start"], row["window_start"] + window
        span = f"{start:%H:%M}–{end:%H:%M}" if window < timedelta(hours=1) else f"{start:%Y-%m-%d %H:%M}–{end:%H:%M}"
        st.warning(
            f"**{kind.label.capitalize()} spike** · {row[col.MODEL]} · {span} UTC: "
            f"{row[kind.column]:,} {kind.label}s in {row[col.REQUESTS]:,} requests ({percent(row['rate'])}, "
            f"against {percent(row['model_rate'])} over the range).",
            icon=icon,
        )
    return spikes.height


def storm_requests(storms: pl.DataFrame) -> pl.DataFrame:
    """The requests that triggered each storm, one row each, with a link to their drill-down."""
    if storms.is_empty():
        return pl.DataFrame(
            schema={"bucket": pl.Datetime("ms", "UTC"), col.MODEL: pl.String, col.REQUEST_ID: pl.String}
        )
    rows = storms.select("bucket", col.MODEL, col.HW_POOL, pl.col("request_ids").alias(col.REQUEST_ID)).explode(
        col.REQUEST_ID
    )
    # The link first, where a person (and the browser test) finds it whatever the other columns' widths.
    return rows.drop_nulls(col.REQUEST_ID).select(
        ("request?request_id=" + pl.col(col.REQUEST_ID)).alias("drill_down"), col.REQUEST_ID, col.MODEL, col.HW_POOL,
        "bucket",
    )  # fmt: skip


def highlight_section(
    storms: pl.DataFrame,
    slow: pl.DataFrame,
    notable: pl.DataFrame,
    series: pl.DataFrame,
    unit: str,
    *,
    hosts: pl.DataFrame,
    skips: pl.DataFrame,
    rule: StormRule,
) -> None:
    """Non-finite outputs, hosts gone quiet, storms and slow compiles (found with the storm ``rule``), error
    spikes and fallback spikes, with the rules that find them and the storm rule's floors as inputs."""
    st.subheader("Highlights")
    window = spikes.WINDOWS[unit]
    errors = spikes.find_spikes(series, spikes.ERRORS, window)
    fallbacks = spikes.find_spikes(series, spikes.FALLBACKS, window)
    found = nonfinite_alert(notable) + quiet_hosts_alert(hosts) + provider_failure_alert(skips)
    found += storm_alerts(storms, rule) + slow_compile_alerts(slow)
    found += spike_alerts(errors, spikes.ERRORS, window, ":material/local_fire_department:")
    found += spike_alerts(fallbacks, spikes.FALLBACKS, window, ":material/slow_motion_video:")
    if not found:
        st.success(
            "No non-finite outputs, hosts gone quiet, kernel provider failures, recompile storms, slow compiles, "
            "error spikes or fallback spikes in this range.",
            icon=":material/check_circle:",
        )
    with st.expander("How highlights are found"):
        st.markdown(
            "**Non-finite outputs:** requests whose output fingerprint counted a NaN or inf "
            "(analytics `notable_requests`).\n\n"
            "**Hosts gone quiet:** serving processes whose host SDK sent no health record for "
            f"{ago(HostHealthParams.model_fields['quiet_after_s'].default)}, up to {ago(DEFAULT_LOOKBACK_S)} after "
            "their last record whatever the range (analytics `host_health`, as the Hosts page lists them; the Hosts "
            "page sets its own threshold).\n\n"
            "**Kernel provider failures:** kernel-registry providers that raised for an op signature; each was "
            "taken out for that signature and the next provider served the call (analytics `kernel_skips`; the "
            "Kernels page).\n\n"
            "**Recompile storm** (analytics `recompile_storms` with the session's storm rule, which the Weekly "
            "report page applies too; a small fleet or a short demo lowers its floors below): an hour of one model "
            "and pool with recompiles, inside requests or not (warm-up, imported TORCH_TRACE logs), counted as "
            "recompile records: a recompile whose compile failed (its request raised) counts, though its request's "
            "row counts none, so a storm may count more than the Request recompiles above. "
            f"{rule.describe()} The range's first and last hours count only their minutes inside the range "
            "(a storm is listed under its hour's start).\n\n"
            "**Slow compiles:** an hour whose compile seconds reach that threshold without any recompile, not a "
            "storm (analytics `slow_compiles`). Each names that hour's compile-cache lookups of its model and pool, "
            "every cache, as the Compile & cache health page's hit ratio counts them: a cold cache where lookups "
            "missed or bypassed it; where all hit, first compiles (a hit still traces the frame).\n\n"
            f"**Error / fallback spike:** {spikes.rule(window)}."
        )
        floors = floor_inputs(FLOORS_PAGE, st.columns(2))
        storm_rule(floors, "The highlights keep the rule above until it is changed.")
    triggered = storm_requests(storms)
    if triggered.height:
        st.markdown("**Requests that triggered the storms** — open one to see its graphs and kernels:")
        show_table(
            triggered,
            key="storm_requests",
            overrides={
                "drill_down": st.column_config.LinkColumn("drill-down", display_text="open ›", width="small"),
                "bucket": st.column_config.DatetimeColumn("storm hour", format="YYYY-MM-DD HH:mm [UTC]"),
            },
            height=min(300, 38 + 35 * triggered.height),
        )


def trend_section(series: pl.DataFrame, unit: str) -> None:
    """Traffic and trouble per bucket, side by side."""
    if series.is_empty():
        return
    totals = (
        series.group_by(col.BUCKET)
        .agg(pl.col(col.REQUESTS, col.ERRORS, col.FALLBACKS, col.RECOMPILES, col.NONFINITE).sum())
        .sort(col.BUCKET)
    )
    totals = with_quiet_buckets(totals, col.BUCKET, unit)
    left, right = st.columns(2)
    fmt = time_format(unit)
    # The browser draws every bar: twenty models stacked per minute is 1,200 marks and twenty colours
    # nobody tells apart. The busiest models keep their own colour; the rest are one "other" layer.
    busiest = (
        series.group_by("group").agg(pl.col(col.REQUESTS).sum()).sort([col.REQUESTS, "group"], descending=[True, False])
    )
    shown = set(busiest.get_column("group").head(TREND_MODELS).to_list())
    series = (
        series.with_columns(
            pl.when(pl.col("group").is_in(list(shown))).then(pl.col("group")).otherwise(pl.lit(OTHER)).alias("group")
        )
        .group_by(col.BUCKET, "group")
        .agg(pl.col(col.REQUESTS).sum())
        .sort(col.BUCKET, "group")
    )
    charts.draw(
        left,
        charts.stacked_bars_over_time(
            series.rename({"group": col.MODEL}),
            col.BUCKET,
            col.REQUESTS,
            col.MODEL,
            f"Requests per {unit} by model",
            value_title="requests",
            time_format=fmt,
        ),
    )
    charts.draw(
        right,
        charts.time_series(
            totals,
            col.BUCKET,
            (col.ERRORS, col.FALLBACKS, col.RECOMPILES, col.NONFINITE),  # a NaN output is trouble too
            f"Trouble per {unit}",
            value_title="count",
            time_format=fmt,
        ),
    )


def fleet_section(fleet: pl.DataFrame) -> None:
    """The slice table; selecting a row offers the next pages for that slice."""
    st.subheader("Fleet slices")
    st.caption("Select a row to narrow the dashboard to that slice or open its compile and cache health.")
    empty = (
        "No requests in this range. Requests are recorded by the host SDK in a serving process (the README's "
        "Instrumenting your own serving process); compiles imported from TORCH_TRACE logs are on Compile & "
        "cache health."
    )
    selected = show_table(fleet, columns=FLEET_COLUMNS, key="fleet_table", selectable=True, empty=empty)
    if not selected:
        return
    row = fleet.row(selected[0], named=True)
    label = " / ".join(str(row[c]) for c in SLICE)
    # One row sized to the labels: in fixed columns a quarter of the page wide, they were cut or wrapped.
    buttons = st.container(horizontal=True)
    if buttons.button(f"Filter to {label}", key="filter_slice", width="content"):
        request_filters(**{c: row[c] for c in SLICE})
        st.rerun()
    health = f"Compile & cache health of {row[col.MODEL]} / {row[col.HW_POOL]}"
    if buttons.button(health, key="open_compile", width="content"):
        request_filters(model=row[col.MODEL], hw_pool=row[col.HW_POOL], traffic_class=None)
        st.switch_page("views/compile_health.py")


def page_queries(filters: Filters) -> dict[str, QueryCall]:
    """The page's named queries for ``filters``, asked for at once (the app starts them before it draws the
    sidebar, so they overlap the service check; fallback reasons too: a fleet without fallbacks is rare, and
    the answer is small)."""
    params = filters.params()
    storm_params = {**params, **current_storm_rule().model_dump()}
    return {
        "fleet": (queries.FLEET, params),
        "series": (queries.FLEET_TIMESERIES, {"unit": bucket_unit(filters), "by": "model", **params}),
        "storms": (queries.STORMS, storm_params),
        "slow": (queries.SLOW_COMPILES, storm_params),
        "notable": (queries.NOTABLE_REQUESTS, params),
        "reasons": (queries.FALLBACK_REASONS, params),
        "hosts": (queries.HOST_HEALTH, filters.params(without=PROCESS_LEVEL)),
        "skips": (queries.KERNEL_SKIPS, filters.params(without=PROCESS_LEVEL)),
    }


def render() -> None:
    """Draw the page."""
    st.title("On-call overview")
    filters = current_filters()
    st.caption(describe(filters))
    unit = bucket_unit(filters)
    with service_errors():
        answers = fetch_queries("the fleet", page_queries(filters))
        fleet = answers["fleet"]
        headline(fleet)
        highlight_section(
            answers["storms"],
            answers["slow"],
            answers["notable"],
            answers["series"],
            unit,
            hosts=answers["hosts"],
            skips=answers["skips"],
            rule=current_storm_rule(),
        )
        trend_section(answers["series"], unit)
        fleet_section(fleet)
        st.subheader("Eager fallbacks by reason")
        if total(fleet, col.FALLBACKS) == 0:
            st.info("No eager fallbacks in this range.", icon=":material/info:")
        else:
            show_table(answers["reasons"], empty="No eager fallbacks in this range.", key="fallback_reasons")


if __name__ == "__main__":
    render()
