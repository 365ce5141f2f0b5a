"""The kernel registry across the fleet: which provider serves each op, why the others were skipped, and what
qualification measured (``kernel_decisions`` and ``kernel_qualifications``; ``inferensics.kernels`` records them).

Rules:

* **Providers serving each op** (:func:`kernel_providers`): one row per model, pool, op, chosen provider and
  whether the decision was made compiling a graph or in eager, over the decisions recorded in the range. A host
  records a decision once per op signature in each process (a compile's trace, or the first eager call of a
  signature), so ``decisions`` counts signatures served, not calls. ``fallback`` decisions are those where no
  provider but the reference (or, compiled, Inductor's code) could serve the call.
* **Why providers were skipped** (:func:`kernel_skips`): each decision keeps the providers tried before the one
  chosen as ``provider: reason``; one row per op, skipped provider and reason.
* **Qualification evidence** (:func:`kernel_qualifications`): the newest record in the range for each device,
  op, shape bucket, dtype, shape and provider, with ``vs_best``: its median over the fastest measured median of
  the same device, op, bucket, dtype and shape (1.0 for the fastest). Several shapes can share a bucket (tokens 3
  and 4 both fall in ``t4``): each keeps its records, and a median is only ever compared with one measured at the
  same shape. Qualification records name the host they ran on but no model or pool: those filters do not apply.
"""

from __future__ import annotations

from typing import Final

import polars as pl

from inferensics.analytics.client import QueryClient
from inferensics.analytics.filters import SliceParams, check_filter_values, slice_where
from inferensics.schema import columns as col
from inferensics.schema.events import KernelDecisionEvent, KernelQualificationEvent

DECISIONS: Final = KernelDecisionEvent.TABLE.name
QUALIFICATIONS: Final = KernelQualificationEvent.TABLE.name
SHAPE_BUCKET: Final = "bucket"
"""The shape bucket whose priority list applied (a column of both tables; not the rollups' time ``bucket``)."""
PROVIDER_KEYS: Final = (col.MODEL, col.HW_POOL, col.OP, col.PROVIDER, col.COMPILED)
PROVIDER_COLUMNS: Final = (
    *PROVIDER_KEYS, "decisions", "fallbacks", "signatures", "hosts", "graphs", "first_seen", "last_seen",
    "example_signature", "example_request", "skipped_before",
)  # fmt: skip
SKIP_COLUMNS: Final = (col.OP, "skipped_provider", "reason", "decisions", "chosen", "models", "pools", "hosts")
QUALIFICATION_KEYS: Final = (col.DEVICE_NAME, col.OP, SHAPE_BUCKET, col.DTYPE, col.SHAPE, col.PROVIDER)
"""One qualification row each: the shape too, since the records of one run share their time and a bucket can
hold several shapes (keyed without it, one shape of the bucket was kept at random and the others dropped)."""
COMPARED: Final = (col.DEVICE_NAME, col.OP, SHAPE_BUCKET, col.DTYPE, col.SHAPE)
"""What ``vs_best`` compares a median within: medians of one shape only."""
TIMES: Final = (col.MEDIAN_US, col.CI_LOW_US, col.CI_HIGH_US, col.TB_S)
"""What only a measured record has (null otherwise: an unsupported or refused provider was not timed)."""
QUALIFICATION_COLUMNS: Final = (
    *QUALIFICATION_KEYS, col.STATUS, col.DECISION, col.MEDIAN_US, col.CI_LOW_US, col.CI_HIGH_US,
    "vs_best", col.TB_S, col.TIMING, col.ACCURACY_PASSED, col.MAX_ABS_ERR, col.RULE, col.TRIALS, col.DETAIL,
    col.HOST, col.TS, col.EVIDENCE_DIGEST,
)  # fmt: skip


def kernel_providers(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """Which provider served each op, per model and pool, compiled or eager (rules in the module docstring).

    Columns: model, hw_pool, op, provider, compiled, decisions, fallbacks, signatures (distinct), hosts
    (distinct), graphs (distinct compiled graphs), first_seen, last_seen, example_signature, example_request
    (a request whose compile made such a decision; empty when none did), skipped_before (the distinct
    ``provider: reason`` entries of the providers tried first). Sorted by fallbacks, then decisions, descending,
    then by model, pool, op and provider.

    Raises:
        UnsupportedFilter: traffic_class or bundle is set (decisions carry neither).
        UnknownFilterValue: a filter names a value the decisions do not hold.
    """
    where = slice_where(params, DECISIONS, what="kernel-registry decisions")
    check_filter_values(client, params, (DECISIONS,))
    keys = ", ".join(PROVIDER_KEYS)
    sql = (
        f"SELECT {', '.join(f'toString({k}) AS {k}' for k in PROVIDER_KEYS[:-1])}, {col.COMPILED}, "
        f"toUInt64(count()) AS decisions, toUInt64(countIf({col.FALLBACK})) AS fallbacks, "
        f"toUInt64(uniqExact({col.SIGNATURE})) AS signatures, toUInt64(uniqExact({col.HOST})) AS hosts, "
        f"toUInt64(uniqExactIf({col.GRAPH_KEY}, {col.GRAPH_KEY} != '')) AS graphs, "
        f"min({col.TS}) AS first_seen, max({col.TS}) AS last_seen, any({col.SIGNATURE}) AS example_signature, "
        f"anyIf({col.REQUEST_ID}, {col.REQUEST_ID} != '') AS example_request, "
        f"arraySort(groupUniqArrayArray(100)({col.SKIPPED})) AS skipped_before "
        f"FROM {client.database}.{DECISIONS} WHERE {where.sql} GROUP BY {keys} "
        f"ORDER BY fallbacks DESC, decisions DESC, {col.MODEL}, {col.HW_POOL}, {col.OP}, {col.PROVIDER}, "
        f"{col.COMPILED} DESC"
    )
    frame = client.query_frame(sql, where.params)
    return frame.with_columns(
        pl.col("first_seen", "last_seen").dt.cast_time_unit("us").dt.convert_time_zone("UTC")
    ).select(PROVIDER_COLUMNS)


def kernel_skips(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """Why providers were skipped: one row per op, skipped provider and reason over the decisions in the range.

    Columns: op, skipped_provider, reason, decisions (that skipped it for that reason), chosen (the distinct
    providers that served instead), models, pools (distinct values), hosts (distinct count). Sorted by decisions
    descending, then op, provider and reason.

    Raises:
        UnsupportedFilter: traffic_class or bundle is set (decisions carry neither).
        UnknownFilterValue: a filter names a value the decisions do not hold.
    """
    where = slice_where(params, DECISIONS, what="kernel-registry decisions")
    check_filter_values(client, params, (DECISIONS,))
    sql = (
        f"SELECT toString({col.OP}) AS {col.OP}, "
        "if(position(entry, ': ') > 0, substring(entry, 1, position(entry, ': ') - 1), entry) AS skipped_provider, "
        "if(position(entry, ': ') > 0, substring(entry, position(entry, ': ') + 2), '') AS reason, "
        f"toUInt64(count()) AS decisions, arraySort(groupUniqArray(toString({col.PROVIDER}))) AS chosen, "
        f"arraySort(groupUniqArray(toString({col.MODEL}))) AS models, "
        f"arraySort(groupUniqArray(toString({col.HW_POOL}))) AS pools, toUInt64(uniqExact({col.HOST})) AS hosts "
        f"FROM {client.database}.{DECISIONS} ARRAY JOIN {col.SKIPPED} AS entry WHERE {where.sql} "
        f"GROUP BY {col.OP}, skipped_provider, reason ORDER BY decisions DESC, {col.OP}, skipped_provider, reason"
    )
    return client.query_frame(sql, where.params).select(SKIP_COLUMNS)


def kernel_qualifications(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """The newest qualification record in the range per device, op, shape bucket, dtype, shape and provider.

    Columns: device_name, op, bucket, dtype, shape, provider, status (``measured``, ``unsupported``,
    ``refused`` by the accuracy gate, ``error``), decision (``incumbent``, ``promoted``, ``kept``, ``refused``),
    median_us, ci_low_us, ci_high_us, vs_best (median over the fastest measured median of its device, op, bucket,
    dtype and shape), tb_s (these five null unless measured), timing, accuracy_passed, max_abs_err, rule, trials,
    detail, host, ts, evidence_digest. Sorted by device, op, bucket, dtype, shape, then measured ones fastest
    first, then provider.

    Raises:
        UnsupportedFilter: model, hw_pool, traffic_class or bundle is set (qualification records name only the
            host they ran on).
        UnknownFilterValue: the host filter names a host with no record.
    """
    where = slice_where(params, QUALIFICATIONS, what="kernel qualification records")
    check_filter_values(client, params, (QUALIFICATIONS,))
    keys = ", ".join(QUALIFICATION_KEYS)
    text = {*QUALIFICATION_KEYS, col.STATUS, col.DECISION, col.TIMING, col.HOST}  # LowCardinality: plain strings
    stored = ", ".join(f"toString({c}) AS {c}" if c in text else c for c in QUALIFICATION_COLUMNS if c != "vs_best")
    sql = (
        f"SELECT {stored} FROM {client.database}.{QUALIFICATIONS} WHERE {where.sql} "
        f"ORDER BY {col.TS} DESC LIMIT 1 BY {keys}"
    )
    frame = client.query_frame(sql, where.params)
    measured = pl.col(col.STATUS) == "measured"
    timed = measured & (pl.col(col.MEDIAN_US) > 0)
    group = list(COMPARED)
    best = pl.col(col.MEDIAN_US).filter(timed).min().over(group)
    return (
        frame.with_columns(
            pl.when(timed).then(pl.col(col.MEDIAN_US) / best).alias("vs_best"),
            pl.col(col.TS).dt.cast_time_unit("us").dt.convert_time_zone("UTC"),
            *(pl.when(measured).then(pl.col(c)).alias(c) for c in TIMES),
        )
        .sort([*group, "vs_best", col.PROVIDER], nulls_last=True)
        .select(QUALIFICATION_COLUMNS)
    )
