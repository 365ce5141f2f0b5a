"""A canary comparison short of requests says why and what to do: the raw requests expired (the window reaches back
past the days the store keeps them, while the rollups behind the pool counts still count them), a side had none in
its window, or too few. Real chDB; the expired rows are dropped by the ``requests`` table's own TTL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from inferensics.analytics import CanaryParams, canary_compare
from inferensics.analytics.canary import canary_compare_pools
from inferensics.analytics.canary_pools import correct_for_pools
from inferensics.analytics.canary_shortfall import RAW_DAYS, short_of_requests, shortfall_rule
from inferensics.analytics.filters import SliceParams
from inferensics.analytics.overview import fleet_overview
from inferensics.cli.app import app
from inferensics.schema import columns as col
from inferensics.schema.events import RequestEvent
from inferensics.schema.store import Store
from tests.analytics.canary_requests import MODEL, POOL, insert_requests, request_frame
from tests.analytics.counting_store import CountingStore
from tests.seeding import scratch_store

T = datetime(2026, 1, 5, tzinfo=UTC)
DAY = dict(start=T, end=T + timedelta(days=1))
LATER = T + timedelta(days=60)
"""The comparisons' clock: the seeded day lies past the raw requests the store keeps."""
SERVED = {"base": 300, "cand": 200}
EXPIRED_RULE = (
    "raw requests expired: the window 2026-01-05 00:00 – 2026-01-06 00:00 UTC reaches back past the 30 days of raw "
    "requests the store keeps (baseline 0 of {base:,}, candidate 0 of {cand:,} left; the rollups keep their counts "
    "longer, but a canary judges each request): compare a window within the last 30 days"
)


@pytest.fixture(scope="module")
def expired_store(chdb_dir: Path) -> Iterator[Store]:
    """Two bundles' requests on one day, long past: the rollups count them, the raw rows are gone."""
    with scratch_store(chdb_dir, "canary_expired") as store:
        insert_requests(store, *(request_frame(b, n, T, {col.LATENCY_MS: 10.0}) for b, n in SERVED.items()))
        # The table's TTL drops them as the store does (whole daily parts, on a merge; the rollups keep theirs).
        store.client.command(f"SYSTEM START TTL MERGES {store.database}.{RequestEvent.TABLE.name}")
        store.client.command(f"OPTIMIZE TABLE {store.database}.{RequestEvent.TABLE.name} FINAL")
        raw = store.query_frame(f"SELECT count() AS n FROM {store.database}.requests").item()
        counted = store.query_frame(f"SELECT sum(requests) AS n FROM {store.database}.requests_1h").item()
        assert (raw, counted) == (0, sum(SERVED.values()))
        yield store


def _pool_counts(store: Store) -> dict[str, int]:
    """Each bundle's requests in the day as the pool note counts them (``fleet_overview`` narrowed to it)."""
    return {
        bundle: int(
            fleet_overview(store, SliceParams(model=MODEL, bundle=bundle, **DAY)).get_column(col.REQUESTS).sum()
        )
        for bundle in SERVED
    }


def test_expired_raw_requests_are_named_with_the_counts_the_pools_show(expired_store: Store) -> None:
    """Walk 44: the pool note said "baseline 300" from the rollups, the verdict "fewer than 100" over 0 raw rows."""
    params = CanaryParams(model=MODEL, baseline="base", candidate="cand", **DAY)
    counts = _pool_counts(expired_store)
    assert counts == SERVED
    result = canary_compare(expired_store, params, now=LATER)
    assert (result.verdict, result.baseline_requests, result.candidate_requests) == ("inconclusive", 0, 0)
    assert result.rule == EXPIRED_RULE.format(**counts)
    (pooled,) = canary_compare_pools(expired_store, params, [POOL], now=LATER).values()
    assert pooled.rule == result.rule
    assert short_of_requests(result.rule)
    # Judged beside another pool, a rule no check decided is left uncorrected.
    frames = correct_for_pools({"p": result.to_frame(), "q": result.to_frame()})
    assert frames["p"].filter(pl.col("check") == "verdict").item(0, "rule") == result.rule


def test_the_command_prints_pool_counts_and_a_verdict_that_agree(expired_store: Store, chdb_dir: Path) -> None:
    out = CliRunner().invoke(
        app,
        [
            "canary", "compare", "--baseline", "base", "--candidate", "cand", "--model", MODEL,
            "--start", "2026-01-05T00:00:00", "--end", "2026-01-06T00:00:00",
            "--dsn", f"chdb://{chdb_dir}?database={expired_store.database}",
        ],
    )  # fmt: skip
    assert out.exit_code == 3, out.output
    assert f"hardware pool {POOL}: where both bundles served (baseline 300, candidate 200 requests)" in out.output
    assert f"verdict: INCONCLUSIVE ({EXPIRED_RULE.format(**SERVED)})" in out.output
    assert "Traceback" not in out.output


def test_a_window_without_requests_says_so_and_what_to_do(expired_store: Store) -> None:
    """Nothing was served that day, kept or expired; the rollups are asked only of a window past the kept days."""
    empty = dict(start=T + timedelta(days=10), end=T + timedelta(days=11))
    params = CanaryParams(model=MODEL, baseline="base", candidate="cand", **empty)
    rule = (
        "no requests of the baseline or the candidate in the window 2026-01-15 00:00 – 2026-01-16 00:00 UTC: widen "
        "the window, or check the bundle ids"
    )
    recent, late = CountingStore(expired_store), CountingStore(expired_store)
    assert canary_compare(recent, params, now=empty["end"]).rule == rule
    assert canary_compare(late, params, now=LATER).rule == rule
    assert (recent.queries, late.queries) == (3, 5)  # one rollup count per short side past the kept days


TWO_WINDOWS = dict(
    start=datetime(2026, 3, 2, tzinfo=UTC),
    end=datetime(2026, 3, 2, 6, tzinfo=UTC),
    baseline_start=datetime(2026, 2, 23, tzinfo=UTC),
    baseline_end=datetime(2026, 2, 23, 6, 30, 15, tzinfo=UTC),
)


@pytest.mark.parametrize(
    ("params", "served", "counted", "rule"),
    [
        (
            dict(baseline="b", candidate="c", **DAY), {"baseline": 250, "candidate": 0}, {},
            "no requests of the candidate in the window 2026-01-05 00:00 – 2026-01-06 00:00 UTC (baseline 250): "
            "widen the window, or check the candidate bundle id",
        ),
        (
            dict(**TWO_WINDOWS), {"baseline": 0, "candidate": 0}, {"baseline": 0},
            "no requests of the baseline or the candidate in their windows (baseline 2026-02-23 00:00 – "
            "2026-02-23 06:30:15 UTC, candidate 2026-03-02 00:00 – 2026-03-02 06:00 UTC): widen the window, or "
            "check the model and traffic class",
        ),
        (
            dict(candidate="c", **TWO_WINDOWS), {"baseline": 60, "candidate": 40}, {"baseline": 300},
            f"raw requests expired: the baseline's window 2026-02-23 00:00 – 2026-02-23 06:30:15 UTC reaches back "
            f"past the {RAW_DAYS} days of raw requests the store keeps (baseline 60 of 300 left; the rollups keep "
            f"their counts longer, but a canary judges each request): compare a window within the last {RAW_DAYS} "
            "days",
        ),
        (
            dict(baseline="b", candidate="c", **DAY), {"baseline": 120, "candidate": 40}, {"candidate": 40},
            "fewer than 100 requests on a side",
        ),
    ],
)  # fmt: skip
def test_the_rule_names_the_short_side_and_its_cause(
    params: dict[str, Any], served: dict[str, int], counted: dict[str, int], rule: str
) -> None:
    assert shortfall_rule(CanaryParams(model=MODEL, **params), served, counted) == rule
    assert short_of_requests(rule)


NOW = datetime.now(UTC)
"""The clock of the partly expired comparison: the table's TTL drops rows by the real clock, so its days are counted
back from it (whole days, far from the TTL's edge)."""
MIDNIGHT = NOW.replace(hour=0, minute=0, second=0, microsecond=0)
PARTLY = dict(start=MIDNIGHT - timedelta(days=33), end=MIDNIGHT - timedelta(days=27))
"""A window whose first days lie past the raw requests the store keeps."""


@pytest.fixture(scope="module")
def partly_expired_store(chdb_dir: Path) -> Iterator[Store]:
    """The baseline's requests on a day past the kept raw requests (200, dropped by the TTL) and on a kept day (300);
    the candidate's on the kept day only."""
    gone, kept = MIDNIGHT - timedelta(days=32, hours=-1), MIDNIGHT - timedelta(days=28, hours=-1)
    with scratch_store(chdb_dir, "canary_partly_expired") as store:
        insert_requests(
            store,
            request_frame("base", 200, gone, {col.LATENCY_MS: 10.0, col.REQUEST_ID: [f"old-{i}" for i in range(200)]}),
            *(request_frame(b, 300, kept, {col.LATENCY_MS: 10.0}) for b in SERVED),
        )
        store.client.command(f"SYSTEM START TTL MERGES {store.database}.{RequestEvent.TABLE.name}")
        store.client.command(f"OPTIMIZE TABLE {store.database}.{RequestEvent.TABLE.name} FINAL")
        raw = store.query_frame(f"SELECT count() AS n FROM {store.database}.requests").item()
        assert raw == 600
        yield store


def test_a_window_partly_past_the_kept_raw_requests_says_its_oldest_were_not_judged(
    partly_expired_store: Store, chdb_dir: Path
) -> None:
    """Walk (failing): a window partly past the 30 days of raw requests was judged over the rows left and said
    nothing (the fully expired case says so); the rule now names the side, its requests left and how many the rollups
    count, through a correction for several pools and in the command's verdict."""
    params = CanaryParams(model=MODEL, baseline="base", candidate="cand", **PARTLY)
    result = canary_compare(partly_expired_store, params, now=NOW)
    assert (result.baseline_requests, result.candidate_requests) == (300, 300)
    window = f"{PARTLY['start']:%Y-%m-%d %H:%M} – {PARTLY['end']:%Y-%m-%d %H:%M} UTC"
    note = (
        f"; judged over the raw requests left: the window {window} reaches back past the 30 days of raw requests the "
        "store keeps (baseline 300 of 500 left): its oldest requests were not judged; compare a window within the "
        "last 30 days to judge them all"
    )
    assert result.rule.endswith(note), result.rule
    assert not short_of_requests(result.rule)
    frames = correct_for_pools({"p": result.to_frame(), "q": result.to_frame()})
    assert frames["p"].filter(pl.col("check") == "verdict").item(0, "rule").endswith(note)
    out = CliRunner().invoke(
        app,
        [
            "canary", "compare", "--baseline", "base", "--candidate", "cand", "--model", MODEL,
            "--start", f"{PARTLY['start']:%Y-%m-%dT%H:%M:%S}", "--end", f"{PARTLY['end']:%Y-%m-%dT%H:%M:%S}",
            "--dsn", f"chdb://{chdb_dir}?database={partly_expired_store.database}",
        ],
    )  # fmt: skip
    assert note in out.output, out.output
    within = dict(start=MIDNIGHT - timedelta(days=29), end=PARTLY["end"])
    kept = canary_compare(partly_expired_store, CanaryParams(model=MODEL, baseline="base", candidate="cand", **within),
                          now=NOW)  # fmt: skip
    assert "judged over the raw requests left" not in kept.rule
