"""The canary comparison as it ran before several pools shared its queries: one pool alone, its own scans.

Kept only to prove that :func:`~inferensics.analytics.canary.canary_compare_pools` gives each pool the numbers
and verdict this gives it (``tests/analytics/test_canary_grouped.py``). The scans, the pairing and the verdict
are the session-43 code of ``analytics/canary.py`` (``_common_where``, ``_both_rows``, ``_sides``, ``_pairs``,
``canary_compare``); the parts the grouping left as they were are imported.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from inferensics.analytics import canary as c
from inferensics.analytics.canary_shortfall import shortfall_rule
from inferensics.analytics.client import QueryClient
from inferensics.schema import columns as col
from inferensics.schema.rollups import FINGERPRINTED_SQL, LATENCY_CODE_MAX, latency_code_sql


def _common_where(params: c.CanaryParams, values: dict[str, Any]) -> str:
    where = [f"{col.MODEL} = {{m:String}}"]
    values["m"] = params.model
    for key, column, value in (
        ("tc", col.TRAFFIC_CLASS, params.traffic_class),
        ("hp", col.HW_POOL, params.hw_pool),
        ("h", col.HOST, params.host),
    ):
        if value is not None:
            where.append(f"{column} = {{{key}:String}}")
            values[key] = value
    return " AND ".join(where)


def _both_rows(client: QueryClient, params: c.CanaryParams, values: dict[str, Any]) -> str:
    b, cand = c._own_where(params, "baseline", values), c._own_where(params, "candidate", values)
    side = (
        f"if({b}, 'b', 'c')"
        if c._disjoint(params)
        else f"arrayJoin(arrayFilter(s -> s != '', [if({b}, 'b', ''), if({cand}, 'c', '')]))"
    )
    return (
        f"SELECT *, {side} AS side FROM {client.database}.requests "
        f"WHERE {_common_where(params, values)} AND (({b}) OR ({cand}))"
    )


def _sides(client: QueryClient, params: c.CanaryParams) -> tuple[c._Side, c._Side, str, dict[str, Any]]:
    values: dict[str, Any] = {}
    both = _both_rows(client, params, values)
    cap = params.max_rows + 1
    code = latency_code_sql(col.LATENCY_MS)
    arrays = ", ".join(f"groupArrayIf({cap})({d}, {FINGERPRINTED_SQL}) AS {d}" for d in c._DRIFT_COLUMNS)
    frame = client.query_frame(
        f"SELECT side, count() AS n, {c._COUNTS}, groupArrayIf({cap})({code}, NOT {c.COMPILED_SQL}) AS codes, "
        f"{arrays} FROM ({both}) GROUP BY side",
        values,
    )
    at = {str(side): i for i, side in enumerate(frame.get_column("side").to_list())}
    sides = []
    for side in ("baseline", "candidate"):
        i = at.get(side[0])
        n = int(frame.item(i, "n")) if i is not None else 0
        if n > params.max_rows:
            sides.append(c._truncated_side(client, params, side))
            continue
        hist = np.zeros(LATENCY_CODE_MAX + 1, dtype=np.int64)
        drift = {d: np.zeros(0, dtype=np.float64) for d in c._DRIFT_COLUMNS}
        rates = dict.fromkeys((m for m, _, _ in c._RATE_SQL), 0)
        fingerprinted = 0
        if i is not None:
            codes = frame.get_column("codes")[i].to_numpy().astype(np.int64)
            hist += np.bincount(codes, minlength=LATENCY_CODE_MAX + 1)
            drift = {d: frame.get_column(d)[i].cast(pl.Float64).to_numpy() for d in c._DRIFT_COLUMNS}
            rates = {m: int(frame.item(i, f"r{j}")) for j, (m, _, _) in enumerate(c._RATE_SQL)}
            fingerprinted = int(frame.item(i, "fp_n"))
        own: dict[str, Any] = {}
        rows = c._side_rows(client, params, side, own)
        sides.append(c._Side(n, False, hist, rates, fingerprinted, drift, rows, own))
    return sides[0], sides[1], both, values


def _pairs(client: QueryClient, base: c._Side, cand: c._Side, both: str, values: dict[str, Any]) -> tuple[int, int]:
    matched = f"WHERE {col.INPUT_DIGEST} != '' AND {col.FP_ARGMAX_DIGEST} != '' AND {FINGERPRINTED_SQL} "
    if not (base.truncated or cand.truncated):
        pairs = client.query_frame(
            f"SELECT count() AS n, countIf(ab = ac) AS agree FROM ("
            f"SELECT {c._first_argmax('b')} AS ab, {c._first_argmax('c')} AS ac FROM ({both}) {matched}"
            f"GROUP BY {col.INPUT_DIGEST} HAVING countIf(side = 'b') > 0 AND countIf(side = 'c') > 0)",
            values,
        )
    else:

        def first(rows: str, also: str = "") -> str:
            return (
                f"SELECT {col.INPUT_DIGEST}, {c._first_argmax()} AS a FROM ({rows}) {matched}{also}"
                f"GROUP BY {col.INPUT_DIGEST}"
            )

        narrowed = f"AND {col.INPUT_DIGEST} IN (SELECT {col.INPUT_DIGEST} FROM ({cand.rows_sql})) "
        pairs = client.query_frame(
            f"SELECT count() AS n, countIf(b.a = c.a) AS agree FROM ({first(base.rows_sql, also=narrowed)}) AS b "
            f"INNER JOIN ({first(cand.rows_sql)}) AS c ON b.{col.INPUT_DIGEST} = c.{col.INPUT_DIGEST}",
            base.values | cand.values,
        )
    return int(pairs.item(0, "n")), int(pairs.item(0, "agree"))


def canary_compare_alone(client: QueryClient, params: c.CanaryParams) -> c.CanaryResult:
    """One comparison (``params.hw_pool``'s pool, or every pool) from its own scans, as before the grouping."""
    base, cand, both, values = _sides(client, params)
    rows = [
        *c._latency_rows(base, cand, params),
        *c._rate_rows(base, cand, params),
        c._agreement_row(*_pairs(client, base, cand, both, values), params),
        *c._drift_rows(base, cand, params),
    ]
    evidence = pl.DataFrame(rows, schema=c.EVIDENCE_SCHEMA)
    if min(base.requests, cand.requests) < params.min_requests:
        # The rule of a short side is not the grouping's: shared (this store's raw rows are all kept).
        served = {"baseline": base.requests, "candidate": cand.requests}
        verdict, rule = "inconclusive", shortfall_rule(params, served, {})
    else:
        verdict, rule = c.decide(evidence)
    truncated = base.truncated or cand.truncated
    return c.CanaryResult(verdict, rule, evidence, base.requests, cand.requests, truncated)  # type: ignore[arg-type]
