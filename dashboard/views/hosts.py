"""Hosts: every serving process's own health as its host SDK reports it (``sdk_health``), so that a host that
has gone quiet, or one that cannot deliver what it records, is seen (rules: ``inferensics.analytics.host_health``).

A red banner per quiet process, a warning per process that refused a release bundle (the bundle and the cause:
revoked, quarantined, tampered, ...) or lost or could not deliver records in the range (refused exports by cause,
dropped records, SDK errors, kernel-registry trouble, processes of its host that died and the requests they lost),
then every process. A refused bundle is named first: it is
the cause, and what the process then failed to deliver (records it left unsent as it raised) follows from it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import polars as pl
import streamlit as st

from inferensics.analytics.host_health import (
    BUNDLE_REFUSALS,
    COUNTERS,
    DEFAULT_LOOKBACK_S,
    IN_RANGE,
    MODELS_SERVED,
    REFUSAL,
    HostHealthParams,
)
from inferensics.collector.service_url import SERVICE_URL_ENV, TOKEN_ENV
from inferensics.dashboard._internal import queries
from inferensics.dashboard._internal.filters import PROCESS_LEVEL, Filters, current_filters, describe
from inferensics.dashboard._internal.links import END_PARAM, requests_link
from inferensics.dashboard._internal.service import section_query, service_errors
from inferensics.dashboard._internal.tables import count, show_table
from inferensics.schema import columns as col

QUIET_KEY: Final = "hosts.quiet_after_s"
TROUBLE: Final[Mapping[str, str]] = {
    col.REFUSED_AUTH: f"spans refused for the token: check the token (`${TOKEN_ENV}`) against the service's tokens",
    col.REFUSED_DOWN: f"spans not delivered, service unreachable: check `${SERVICE_URL_ENV}` and the service",
    col.REFUSED_BACK_PRESSURE: "spans refused by back-pressure: the service is shedding load",
    col.RECORDS_DROPPED: "records dropped before export (an SDK queue was full, or spans were still unsent when "
    "counted)",
    col.SDK_ERRORS: "errors caught by the SDK",
    col.KERNEL_FAILURES: "kernel-registry provider failures (each took its provider out for that signature; the "
    "Kernels page names the provider, the op and what it raised)",
    col.KERNEL_UNPROVEN: "kernel-registry providers compiled in without the run that proves them",
    col.KERNEL_UNTRACEABLE: "kernel-registry providers a compiler could not trace (left out of compiled graphs for "
    "that signature, eager calls keep them: declare `Requirements(compiled='eager')` or give the kernel a fake "
    "implementation)",
    col.REQUESTS_LOST: "finished requests lost by a process of this host that died before exporting them (killed: "
    "SIGKILL, the out-of-memory killer; counted from its crash journal as this process started): find why it was "
    "killed (`dmesg` names the out-of-memory killer); a process stopped with SIGTERM exports them first",
    col.DEAD_PROCESSES: "processes of this host that died (a fatal error, SIGKILL, the out-of-memory killer), read "
    "from their crash journals as this process started: the requests they had in flight are error rows "
    "(requests_recovered) that say how each died; open this host's requests with status error",
}
"""Counters whose growth in the range gets a warning, and what each says. Kernel-registry fallbacks to the
reference are in the table, not warned about: a CPU host falls back on every signature by design (the Triton
providers need a GPU), and a warning on every such host would hide the ones that matter."""
REFUSED: Final = "bundles_refused"
"""Table column: each bundle the process refused, as ``<cause> <bundle id's first 16 digits>``."""
BUNDLE_ID_SHOWN: Final = 16
"""Digits of a bundle id shown (``inferensics bundle`` commands take such a prefix)."""
REQUESTS_LINK: Final = "requests"
"""Table column: the request list of the row's host over the page's range and filters (:func:`with_request_links`)."""
TABLE_COLUMNS: Final = (
    REQUESTS_LINK, col.HOST, col.MODEL, MODELS_SERVED, col.HW_POOL, "quiet", REFUSED, col.STOPPED, "replaced",
    "last_seen", "silent_s", "quiet_after_s", col.INTERVAL_S, col.PROCESS, "started", "records", "restarts",
    *(c + IN_RANGE for c in COUNTERS),
    col.QUEUE_DEPTH, "queue_depth_max", *COUNTERS, col.LAST_ERROR,
)  # fmt: skip


NEWER_COLUMNS: Final[Mapping[str, pl.DataType]] = {
    col.PROCESS: pl.String(), MODELS_SERVED: pl.List(pl.String()), BUNDLE_REFUSALS: pl.List(REFUSAL),
    "started": pl.Datetime("us", "UTC"), col.STOPPED: pl.Boolean(), "replaced": pl.Boolean(),
    "quiet_after_s": pl.Float64(), col.INTERVAL_S: pl.Float64(), "restarts": pl.UInt64(),
    col.QUEUE_DEPTH: pl.UInt32(), "queue_depth_max": pl.UInt32(), col.LAST_ERROR: pl.String(),
    **{c: pl.UInt64() for c in COUNTERS}, **{c + IN_RANGE: pl.UInt64() for c in COUNTERS},
}  # fmt: skip
"""The columns of ``host_health`` the page reads beyond those every service answered with (host, model, hw_pool,
quiet, last_seen, silent_s, records), each with its type: a service older than the dashboard may lack some (a
counter added later), and the page reads a missing one as unknown (null) rather than failing."""
LONG_SILENCE_S: Final = 86_400.0
"""A quiet process silent longer than this may have been retired without a clean shutdown: its banner says so."""

STOPPED_HELP: Final = (
    "Processes whose last health record was a clean shutdown's (tracker.shutdown(), or the process exiting): "
    "they stopped on purpose and are not called quiet."
)
REPLACED_HELP: Final = (
    "Processes another process of the same host, model and pool started after (a crash and its restart, a "
    "rollout): not called quiet; the new one counts it as a restart."
)


def ago(seconds: float) -> str:
    """A silence as people say it: ``45 s``, ``40 min``, ``3 h 5 min``, ``2 d 4 h``.

    >>> ago(45), ago(2430), ago(11100), ago(187200)
    ('45 s', '40 min', '3 h 5 min', '2 d 4 h')
    """
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def served(row: Mapping[str, Any]) -> str:
    """The models a process served as one label: the tracker's model, then the other models its compiles
    served (``tracker.compile(..., name=...)``), joined by ``+``; the tracker's alone when its records name no
    process (what it compiled is then unknown).

    >>> served({"model": "decoder", "models_served": ["decoder", "hf-lm"]})
    'decoder + hf-lm'
    >>> served({"model": "decoder", "models_served": None})
    'decoder'
    """
    models = [str(row[col.MODEL])] if row[col.MODEL] else []
    models += [m for m in row.get(MODELS_SERVED) or () if m not in models]
    return " + ".join(models)


def process_name(row: Mapping[str, Any]) -> str:
    """``host`` · models · pool · pid (the parts that are set; every model it served, :func:`served`; the pid
    when the records name their process).

    >>> process_name({"host": "h1", "model": "llama", "hw_pool": "", "process": "4242@1764950400000"})
    '`h1` · llama · pid 4242'
    >>> process_name({"host": "h1", "model": "llama", "hw_pool": "a100", "process": "", "models_served": ["qwen"]})
    '`h1` · llama + qwen · a100'
    """
    pid = str(row.get(col.PROCESS) or "").partition("@")[0]
    parts = [p for p in (served(row), str(row[col.HW_POOL])) if p]
    return " · ".join([f"`{row[col.HOST]}`", *parts, *([f"pid {pid}"] if pid else [])])


def problems(row: Mapping[str, Any]) -> list[str]:
    """What went wrong in the range for one process, one phrase per counter that grew."""
    return [f"**{row[c + IN_RANGE]:,}** {what}" for c, what in TROUBLE.items() if row[c + IN_RANGE]]


def refusals(row: Mapping[str, Any]) -> list[str]:
    """The bundles the process refused to load, one phrase each: the bundle, the cause, when.

    >>> from datetime import datetime, UTC
    >>> refusals({"bundle_refusals": [{"ts": datetime(2026, 12, 1, 9, 30, tzinfo=UTC), "bundle_id": "ab" * 32,
    ...           "bundle_name": "canary", "cause": "revoked"}]})
    ['refused bundle `abababababababab` (canary): **revoked**, 2026-12-01 09:30:00 UTC']
    """
    return [
        f"refused bundle `{r[col.BUNDLE_ID][:BUNDLE_ID_SHOWN]}`"
        + (f" ({r[col.BUNDLE_NAME]})" if r[col.BUNDLE_NAME] else "")
        + f": **{r['cause']}**, {r[col.TS]:%Y-%m-%d %H:%M:%S} UTC"
        for r in row.get(BUNDLE_REFUSALS) or ()
    ]


def troubles(row: Mapping[str, Any]) -> str:
    """What the warning of a process says: the bundles it refused (the cause), then the counters that grew."""
    refused, grew = refusals(row), problems(row)
    if refused and grew:
        return f"{'; '.join(refused)}. Then, in this range: {'; '.join(grew)}"
    return "; ".join(refused or grew)


def long_silence(silent_s: float) -> str:
    """What a banner adds for a process silent more than :data:`LONG_SILENCE_S`: it may have been retired, and
    until when it stays listed.

    >>> long_silence(600)
    ''
    >>> long_silence(2 * 86_400)[:70]
    ' Silent for more than a day: retired? It is listed until 7 d 0 h after'
    """
    if silent_s <= LONG_SILENCE_S:
        return ""
    return (
        f" Silent for more than a day: retired? It is listed until {ago(DEFAULT_LOOKBACK_S)} after its last record; "
        "a process that shuts down cleanly (`tracker.shutdown()`) is listed as stopped instead."
    )


def alerts(health: pl.DataFrame) -> None:
    """A red banner per quiet process (with the threshold it crossed: three of its own health intervals, at
    least the page's), then a warning per process with problems in the range."""
    for row in health.filter(pl.col("quiet")).iter_rows(named=True):
        error = f" Last error: `{row[col.LAST_ERROR]}`" if row[col.LAST_ERROR] else ""
        refused = "".join(f" It {r}." for r in refusals(row))
        after = f" (quiet after {ago(row['quiet_after_s'])})" if row["quiet_after_s"] is not None else ""
        st.error(
            f"**Quiet:** {process_name(row)} last reported {row['last_seen']:%Y-%m-%d %H:%M:%S} UTC, "
            f"{ago(row['silent_s'])} ago{after}.{refused}{error}{long_silence(row['silent_s'])}",
            icon=":material/cloud_off:",
        )
    for row in health.iter_rows(named=True):
        said = troubles(row)
        if said:
            error = f" Last error: `{row[col.LAST_ERROR]}`" if row[col.LAST_ERROR] else ""
            where = "" if refusals(row) else " in this range"
            st.warning(f"**{process_name(row)}**{where}: {said}.{error}", icon=":material/warning:")


def with_missing_columns(health: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """``health`` with every column of :data:`NEWER_COLUMNS` it lacks added as null (unknown), and what the service
    does not report, each counter once (``kernel_untraceable`` for it and its ``_in_range`` growth).

    >>> frame, missing = with_missing_columns(pl.DataFrame({"host": ["h1"]}).with_columns(
    ...     pl.lit(0, pl.UInt64).alias(c) for c in NEWER_COLUMNS if "untraceable" not in c))
    >>> missing, frame.get_column("kernel_untraceable_in_range").to_list()
    (['kernel_untraceable'], [None])
    """
    missing = [c for c in NEWER_COLUMNS if c not in health.columns]
    filled = health.with_columns(pl.lit(None, NEWER_COLUMNS[c]).alias(c) for c in missing)
    return filled, list(dict.fromkeys(c.removesuffix(IN_RANGE) for c in missing))


def with_refusals_shown(health: pl.DataFrame) -> pl.DataFrame:
    """``health`` with the table's :data:`REFUSED` column (``revoked 0123456789abcdef, ...``; empty for none)."""
    refusal = pl.element().struct
    shown = refusal.field("cause") + " " + refusal.field(col.BUNDLE_ID).str.head(BUNDLE_ID_SHOWN)
    return health.with_columns(pl.col(BUNDLE_REFUSALS).list.eval(shown).list.join(", ").alias(REFUSED))


def with_request_links(health: pl.DataFrame, filters: Filters) -> pl.DataFrame:
    """``health`` with :data:`REQUESTS_LINK`: each row's host's requests, over the page's range (its end pinned
    where the page's is) and the sidebar's other filters, which a link opened in a new tab would otherwise lose."""
    pinned = filters.end if st.query_params.get(END_PARAM) else None
    links = [
        requests_link(
            ".", **{**filters.dimensions(), "host": str(host)}, window=filters.end - filters.start, end=pinned
        )
        for host in health.get_column(col.HOST).to_list()
    ]
    return health.with_columns(pl.Series(REQUESTS_LINK, links, dtype=pl.String))


def headline(health: pl.DataFrame) -> None:
    """Processes, hosts, quiet ones, stopped ones, replaced ones and ones with problems."""
    cells = st.columns(6)
    cells[0].metric("Processes", count(health.height))
    cells[1].metric("Hosts", count(health.get_column(col.HOST).n_unique()))
    cells[2].metric("Quiet", count(int(health.get_column("quiet").sum())))
    cells[3].metric("Stopped", count(int(health.get_column(col.STOPPED).sum())), help=STOPPED_HELP)
    cells[4].metric("Replaced", count(int(health.get_column("replaced").sum())), help=REPLACED_HELP)
    cells[5].metric("With problems", count(sum(bool(troubles(r)) for r in health.iter_rows(named=True))))


def render() -> None:
    """Draw the page."""
    st.title("Hosts")
    filters = current_filters()
    st.caption(
        describe(filters) + " · each serving process reports its SDK's health every `health_interval_s` (60 s by "
        "default); counters `…_in_range` grew in the range, the others count since the process started"
    )
    st.caption(
        "model is the tracker's label (`instrument(model=...)`); models_served, every model the process's "
        "compiles served (`tracker.compile(..., name=...)`): empty when it compiled nothing, – when its records "
        "predate naming their process. A model filter lists the processes that served that model."
    )
    st.caption(
        f"A process that stopped reporting stays listed, as quiet, for {ago(DEFAULT_LOOKBACK_S)} after its last "
        "record, whatever the range; one silent for longer is taken as retired and not listed."
    )
    if filters.any_set(PROCESS_LEVEL):
        st.caption("Health records carry no traffic class or bundle: those filters are not applied here.")
    default = HostHealthParams.model_fields["quiet_after_s"].default
    quiet_after_s = st.number_input(
        "Quiet after (seconds without a health record)", min_value=1.0, value=float(default), step=60.0,
        key=QUIET_KEY, help="A process whose records say a longer health interval is quiet after three of its own.",
    )  # fmt: skip
    with service_errors():
        health = section_query(
            queries.HOST_HEALTH, "host health", quiet_after_s=quiet_after_s, **filters.params(without=PROCESS_LEVEL)
        )
        if health is None:
            return
        if health.is_empty():
            st.info(
                f"No serving process sent a health record in this range or the {ago(DEFAULT_LOOKBACK_S)} before its "
                "end. "
                "A process sends one every `health_interval_s` once the host SDK exports to this service "
                f"(`${SERVICE_URL_ENV}`).",
                icon=":material/info:",
            )
            return
        health, missing = with_missing_columns(health)
        if missing:
            st.caption(
                f"The service is older than this dashboard: it does not report {', '.join(missing)} (shown empty, "
                "and not warned about); upgrade the service to see them."
            )
        headline(health)
        alerts(health)
        show_table(
            with_request_links(with_refusals_shown(health), filters),
            columns=TABLE_COLUMNS,
            key="hosts_table",
            overrides={
                REQUESTS_LINK: st.column_config.LinkColumn(
                    "requests", display_text="requests ›", width="small",
                    help="This host's requests over the page's range and filters, failing ones first of all",
                )
            },
        )  # fmt: skip


if __name__ == "__main__":
    render()
