"""Release state of each bundle: who signed it and whether hosts verified it, its promotion, revocation or
quarantine, the compiles served outside it (bundle misses), and traffic it still served after it was
revoked or quarantined (the dashboard lights those up).

Added by the release-bundles issue (21); registered as the ``bundle_release`` named query. Reads the
``bundles`` registrations, the ``bundle_states`` events, the ``bundle_misses`` rows in the range and the
hourly request rollup (traffic after a refusal, counted from the hour of the refusal on).
"""

from __future__ import annotations

import polars as pl

from inferensics.analytics.client import QueryClient
from inferensics.analytics.filters import SliceParams
from inferensics.schema import columns as col

COLUMNS = (
    col.BUNDLE_ID, col.BUNDLE_NAME, col.MODEL, "pushed_at", col.SIGNATURE_STATE, col.BUILDER_KEYID, col.STATE,
    col.CHANNEL, "pack_blob", "refused_at",
    "misses", "misses_eager", "misses_refused", "miss_hosts", col.REQUESTS, "requests_after_refusal",
    "revoked_serving",
)  # fmt: skip


def bundle_release(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """One row per bundle registered or with a state change before the range end.

    Columns: bundle_id, bundle_name (latest registration, else the latest push; empty when neither names it),
    model (latest registration, else the latest state change that names one), pushed_at (latest ``bundle
    push``, null when never pushed), signature_state and builder_keyid (latest registration), state (latest of promoted,
    demoted, revoked, quarantined, released; empty when none), channel (latest promotion), pack_blob
    (sha256 of the pushed bundle), refused_at (latest revocation or quarantine, null when none), misses,
    misses_eager, misses_refused and miss_hosts (bundle misses in the range), requests (in the range),
    requests_after_refusal, revoked_serving (revoked or quarantined and still serving after it).
    """
    db = client.database
    p = {"t_start": params.start, "t_end": params.end}
    end = "{t_end:DateTime64(6, 'UTC')}"
    start = "{t_start:DateTime64(6, 'UTC')}"
    reg = client.query_frame(
        f"SELECT toString({col.BUNDLE_ID}) AS {col.BUNDLE_ID}, "
        f"toString(argMax({col.SIGNATURE_STATE}, {col.TS})) AS {col.SIGNATURE_STATE}, "
        f"toString(argMax({col.BUILDER_KEYID}, {col.TS})) AS {col.BUILDER_KEYID}, "
        f"toString(argMaxIf({col.BUNDLE_NAME}, {col.TS}, {col.BUNDLE_NAME} != '')) AS {col.BUNDLE_NAME}, "
        f"toString(argMaxIf({col.MODEL}, {col.TS}, {col.MODEL} != '')) AS registered_model "
        f"FROM {db}.bundles FINAL WHERE {col.TS} < {end} GROUP BY {col.BUNDLE_ID}",
        p,
    )
    states = client.query_frame(
        f"SELECT toString({col.BUNDLE_ID}) AS {col.BUNDLE_ID}, "
        f"toString(argMaxIf({col.STATE}, {col.TS}, {col.STATE} != 'pushed')) AS latest_state, "
        f"toString(argMaxIf({col.CHANNEL}, {col.TS}, {col.STATE} = 'promoted')) AS promoted_on, "
        f"toString(argMaxIf({col.ATTRS}['pack_blob'], {col.TS}, {col.STATE} = 'pushed')) AS pack_blob, "
        f"maxIf({col.TS}, {col.STATE} IN ('revoked', 'quarantined')) AS refused_at, "
        f"maxIf({col.TS}, {col.STATE} = 'pushed') AS pushed_at, "
        f"toString(argMaxIf({col.MODEL}, {col.TS}, {col.MODEL} != '')) AS state_model, "
        f"toString(argMaxIf({col.ATTRS}['bundle_name'], {col.TS}, {col.STATE} = 'pushed')) AS pushed_name "
        f"FROM {db}.bundle_states WHERE {col.TS} < {end} GROUP BY {col.BUNDLE_ID}",
        p,
    ).rename({"latest_state": col.STATE, "promoted_on": col.CHANNEL})  # SQL aliases must not shadow columns
    misses = client.query_frame(
        f"SELECT toString({col.BUNDLE_ID}) AS {col.BUNDLE_ID}, count() AS misses, "
        f"countIf({col.ACTION} = 'eager') AS misses_eager, countIf({col.ACTION} = 'refused') AS misses_refused, "
        f"uniqExact({col.HOST}) AS miss_hosts FROM {db}.bundle_misses "
        f"WHERE {col.TS} >= {start} AND {col.TS} < {end} GROUP BY {col.BUNDLE_ID}",
        p,
    )
    traffic = client.query_frame(
        f"SELECT toString({col.BUNDLE_ID}) AS {col.BUNDLE_ID}, {col.BUCKET}, sum({col.REQUESTS}) AS {col.REQUESTS} "
        f"FROM {db}.requests_1h WHERE {col.BUCKET} >= toStartOfHour({start}) AND {col.BUCKET} < {end} "
        f"AND {col.BUNDLE_ID} != '' GROUP BY {col.BUNDLE_ID}, {col.BUCKET}",
        p,
    )
    ids = pl.concat([f.select(col.BUNDLE_ID) for f in (reg, states, misses)]).unique()
    out = ids.join(reg, on=col.BUNDLE_ID, how="left").join(states, on=col.BUNDLE_ID, how="left")
    out = out.join(misses, on=col.BUNDLE_ID, how="left")
    refused = out.select(col.BUNDLE_ID, "refused_at").filter(pl.col("refused_at").dt.year() > 1970)
    after = (
        traffic.join(refused, on=col.BUNDLE_ID, how="inner")
        .filter(
            pl.col(col.BUCKET).dt.replace_time_zone(None)
            >= pl.col("refused_at").dt.replace_time_zone(None).dt.truncate("1h")
        )
        .group_by(col.BUNDLE_ID)
        .agg(pl.col(col.REQUESTS).sum().alias("requests_after_refusal"))
    )
    total = traffic.group_by(col.BUNDLE_ID).agg(pl.col(col.REQUESTS).sum())
    out = out.join(total, on=col.BUNDLE_ID, how="left").join(after, on=col.BUNDLE_ID, how="left")
    texts = (col.SIGNATURE_STATE, col.BUILDER_KEYID, col.STATE, col.CHANNEL, "pack_blob")
    counts = ("misses", "misses_eager", "misses_refused", "miss_hosts", col.REQUESTS, "requests_after_refusal")
    out = out.with_columns(
        *(
            pl.when(pl.col(t).dt.year() > 1970).then(pl.col(t)).otherwise(None).alias(t)
            for t in ("refused_at", "pushed_at")
        ),
        # A pushed bundle no host registered yet has its name and model from the push (model: the factory).
        pl.when(pl.col("registered_model").fill_null("") != "")
        .then(pl.col("registered_model"))
        .otherwise(pl.col("state_model").fill_null(""))
        .alias(col.MODEL),
        pl.when(pl.col(col.BUNDLE_NAME).fill_null("") != "")
        .then(pl.col(col.BUNDLE_NAME))
        .otherwise(pl.col("pushed_name").fill_null(""))
        .alias(col.BUNDLE_NAME),
        *(pl.col(c).fill_null("") for c in texts),
        *(pl.col(c).fill_null(0).cast(pl.UInt64) for c in counts),
    )
    out = out.with_columns(
        ((pl.col(col.STATE).is_in(["revoked", "quarantined"])) & (pl.col("requests_after_refusal") > 0)).alias(
            "revoked_serving"
        ),
    )
    return out.select(COLUMNS).sort(["revoked_serving", col.REQUESTS], descending=True)
