"""Bundles: every bundle the fleet has seen, where it is registered, and the traffic it served; its release
state (signature state, promotion, revocation, quarantine, bundle misses) with revoked or quarantined
bundles still serving lit up; and, for a pushed bundle, its manifest and qualification report."""

from __future__ import annotations

import base64
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl
import streamlit as st

from inferensics.dashboard._internal import charts, queries
from inferensics.dashboard._internal.filters import (
    bucket_unit,
    current_filters,
    describe,
    request_filters,
    time_format,
)
from inferensics.dashboard._internal.links import BUNDLE_ID_PARAM
from inferensics.dashboard._internal.service import fetch_blob, run_query, section_query, service_errors
from inferensics.dashboard._internal.tables import count, show_table, total
from inferensics.schema import columns as col

COLUMNS = (
    col.BUNDLE_NAME, col.BUNDLE_ID, "models", "hosts", "hw_pools", col.REQUESTS, "error_rate", "fallback_rate",
    col.RECOMPILES, "traffic_classes", "serving_pools", col.TORCH_VERSION, col.DEVICE_NAME, "first_registered",
    "last_registered",
)  # fmt: skip


def headline(bundles: pl.DataFrame) -> None:
    """How many bundles, hosts and requests."""
    hosts = {h for hs in bundles.get_column("hosts").to_list() for h in hs} if bundles.height else set()
    pools = {p for ps in bundles.get_column("hw_pools").to_list() for p in ps} if bundles.height else set()
    cells = st.columns(4)
    cells[0].metric("Bundles seen", count(bundles.height))
    cells[1].metric("Hosts registered", count(len(hosts)))
    cells[2].metric("Pools", count(len(pools)))
    cells[3].metric("Requests served", count(total(bundles, col.REQUESTS)))


def traffic_chart(series: pl.DataFrame, names: dict[str, str], unit: str) -> None:
    """Requests per bundle over time."""
    if series.is_empty():
        return
    labelled = series.with_columns(
        pl.col("group").replace_strict(names, default=pl.col("group")).alias(col.BUNDLE_NAME)
    )
    charts.draw(
        st,
        charts.stacked_bars_over_time(
            labelled,
            col.BUCKET,
            col.REQUESTS,
            col.BUNDLE_NAME,
            "Requests per bundle",
            value_title="requests",
            time_format=time_format(unit),
        ),
    )


RELEASE_COLUMNS = (
    col.BUNDLE_NAME, col.MODEL, col.BUNDLE_ID, "pushed_at", col.SIGNATURE_STATE, col.BUILDER_KEYID, col.STATE,
    col.CHANNEL, col.REQUESTS,
    "requests_after_refusal", "misses", "misses_eager", "misses_refused", "miss_hosts", "refused_at",
)  # fmt: skip
RELEASE_QUERY = "bundle_release"
# A manifest's files with each size twice: ``size_bytes`` shown as a size by the tables' convention for a
# ``*bytes`` column ("4.2MB", sorting by size), and the exact ``size`` the manifest records.
FILE_COLUMNS = ("name", "size_bytes", "size", "algorithm", "digest")


def release_state(release: pl.DataFrame) -> None:
    """Revoked or quarantined bundles still serving (one red banner each), then every bundle's release state."""
    st.subheader("Release state")
    for row in release.filter(pl.col("revoked_serving")).iter_rows(named=True):
        st.error(
            f"**{row[col.STATE].capitalize()} bundle still serving:** {row[col.BUNDLE_ID][:12]} served "
            f"{row['requests_after_refusal']:,} requests since it was {row[col.STATE]} ({row['refused_at']}).",
            icon=":material/block:",
        )
    show_table(release, columns=RELEASE_COLUMNS, key="bundle_release_table",
               empty="No bundle registered, pushed or changed state before the range end.")  # fmt: skip


def manifest_and_report(release: pl.DataFrame) -> None:
    """The manifest (identity factors, signer, files) and the qualification report of a pushed bundle."""
    pushed = release.filter(pl.col("pack_blob") != "")
    if pushed.is_empty():
        st.caption("No bundle was pushed (`inferensics bundle push`): manifests and reports appear once one is.")
        return
    st.subheader("Manifest and qualification report")
    ids = pushed.get_column(col.BUNDLE_ID).to_list()
    linked = st.query_params.get(BUNDLE_ID_PARAM)
    if linked and linked not in ids:
        st.warning(
            f"Bundle `{linked}` was not pushed to this service (`inferensics bundle push`), so its manifest "
            "and qualification report are not here; its release state is in the table above.",
            icon=":material/search:",
        )
    elif linked and st.session_state.get("bundles.linked") != linked:
        # A request's page links here with the bundle it ran (``?bundle_id=``): open on that one, once, so that
        # picking another afterwards sticks.
        st.session_state["bundles.linked"] = linked
        st.session_state["bundles.pushed"] = linked
    labels = {str(r[col.BUNDLE_ID]): pushed_label(r) for r in pushed.iter_rows(named=True)}
    chosen = st.selectbox("Pushed bundle", ids, format_func=lambda i: labels.get(str(i), str(i)), key="bundles.pushed")
    row = pushed.filter(pl.col(col.BUNDLE_ID) == chosen).row(0, named=True)
    data = fetch_blob(row["pack_blob"], "the pushed bundle")
    try:
        members = read_packed(data)
        predicate = json.loads(base64.b64decode(json.loads(members["manifest.json"])["payload"]))["predicate"]
    except (KeyError, ValueError, TypeError, tarfile.TarError):
        st.error("The pushed bundle cannot be read: it is not a packed bundle (push it again).")
        return
    signature = row[col.SIGNATURE_STATE] or "not registered by any host yet"
    st.markdown(
        f"**{predicate['name']}** `{chosen}` · signed by `{predicate['build'].get('builder_keyid', '')[:16]}` · "
        f"signature state on hosts: **{signature}** · state: **{row[col.STATE] or 'none'}**"
        + (f" on {row[col.CHANNEL]}" if row[col.CHANNEL] else "")
    )
    with st.expander("Manifest: identity factors"):
        st.json(predicate["identity"], expanded=1)
    with st.expander(f"Files ({len(predicate['resources'])})"):
        show_table(
            files_table(predicate["resources"]),
            columns=FILE_COLUMNS,
            key="bundles.files",
            empty="The manifest lists no files.",
            overrides={
                "size": st.column_config.NumberColumn(
                    "exact bytes", format="localized", help="The file's size in bytes, as the manifest records it."
                )
            },
        )
    report = members.get("report/qualification.md")
    if report is not None:
        st.markdown(report.decode())
        html = members.get("report/qualification.html", b"")
        st.download_button("Download the report (HTML)", html, file_name=f"{predicate['name']}.html",
                           mime="text/html", key="bundles.report_html")  # fmt: skip


def pushed_label(row: Mapping[str, Any]) -> str:
    """How the pushed-bundle picker names a bundle: its name and model (as hosts registered it, else the model
    the push recorded), when it was pushed, then the start of its id (the picker listed bare 16-character ids).
    """
    name = str(row.get(col.BUNDLE_NAME) or "") or "not registered by a host yet"
    parts = [name]
    if row.get(col.MODEL):
        parts.append(str(row[col.MODEL]))
    pushed_at = row.get("pushed_at")
    if pushed_at is not None:
        parts.append(f"pushed {pushed_at:%Y-%m-%d %H:%M} UTC")
    parts.append(str(row[col.BUNDLE_ID])[:16])
    return " · ".join(parts)


def files_table(resources: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """A manifest's ``resources``, one row per file, its ``size`` (bytes) also as ``size_bytes``, which the
    table shows as a size."""
    files = pl.DataFrame(list(resources))
    return files.with_columns(pl.col("size").alias("size_bytes")) if "size" in files.columns else files


def read_packed(data: bytes) -> dict[str, bytes]:
    """The manifest and report members of a packed bundle (``inferensics bundle pack``), read in memory.

    The page only shows them: verification is the hosts' (and ``inferensics bundle verify``'s) job.
    """
    wanted = {"manifest.json", "report/qualification.md", "report/qualification.html"}
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        for member in tar.getmembers():
            if member.name in wanted and member.isfile():
                f = tar.extractfile(member)
                if f is not None:
                    out[member.name] = f.read()
    return out


def render() -> None:
    """Draw the page."""
    st.title("Bundles")
    filters = current_filters()
    st.caption(describe(filters) + " · a bundle is listed when registered before the range end or serving in it")
    with service_errors():
        bundles = run_query(queries.BUNDLES_SEEN, "bundles", **filters.params())
        headline(bundles)
        selected = show_table(
            bundles,
            columns=COLUMNS,
            key="bundles_table",
            selectable=True,
            empty="No bundle registered or serving in this range.",
        )
        if selected:
            row = bundles.row(selected[0], named=True)
            if st.button(f"Filter the dashboard to {row[col.BUNDLE_NAME] or row[col.BUNDLE_ID]}", key="filter_bundle"):
                request_filters(bundle=row[col.BUNDLE_ID])
                st.switch_page("views/overview.py")
        names = {
            str(r[col.BUNDLE_ID]): f"{r[col.BUNDLE_NAME] or 'unnamed'} ({str(r[col.BUNDLE_ID])[:8]})"
            for r in bundles.iter_rows(named=True)
        }
        series = section_query(queries.FLEET_TIMESERIES, "traffic per bundle", unit=bucket_unit(filters), by="bundle",
                               **filters.params())  # fmt: skip
        if series is not None:
            traffic_chart(series.filter(pl.col("group") != ""), names, bucket_unit(filters))
        release = section_query(RELEASE_QUERY, "bundle release state", **filters.params())
        if release is not None:
            release_state(release)
            manifest_and_report(release)


if __name__ == "__main__":
    render()
