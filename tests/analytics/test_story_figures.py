"""Figures the demo's story showed wrong, each with one definition (issue 20): a storm is recompiles and a
slow first compile is a finding of its own; recompiles that hit the limit are counted apart; the weekly
report's current week ends now and its per-model cache hit ratio is the cache-events ratio the summary
uses; non-finite outputs are notable requests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from inferensics.analytics import (
    LocalRunner,
    SliceParams,
    StormParams,
    build_weekly_report,
    cache_health,
    compile_timeseries,
    current_week,
    notable_requests,
    parse_week,
    recompile_reasons,
    recompile_storms,
    recompile_timeseries,
    slow_compiles,
    specializations,
)
from inferensics.schema import columns as col
from inferensics.schema.events import CacheEvent, CompileEvent, RecompileEvent, RequestEvent
from inferensics.schema.store import Store

NOW = datetime.now(UTC).replace(microsecond=0)
HOST = "h-0"


def _request(rid: str, model: str, at: datetime, **fields: object) -> RequestEvent:
    return RequestEvent(request_id=rid, ts=at, host=HOST, model=model, hw_pool="p", traffic_class="c", **fields)


@pytest.fixture
def story(store: Store) -> Store:
    """A first compile of 90 s (model ``slow``), three recompiles and one limit hit (model ``storm``), cache
    lookups 1 hit of 4, one request with NaN logits, a few plain hits; all in the last minutes."""
    t = max(NOW - timedelta(minutes=5), parse_week(current_week(NOW)))  # inside this week and this hour's range
    store.insert_events(
        [
            _request("r-slow", "slow", t, outcome="compile", compile_ms=90_000.0, cache_status="miss"),
            *(
                _request(f"r-re{i}", "storm", t, outcome="recompile", recompiles=1, compile_ms=30_000.0)
                for i in range(3)
            ),
            _request("r-fb", "storm", t, outcome="fallback", fallback_reason="recompile_limit"),
            _request("r-nan", "storm", t, fp_nan=768),
            *(_request(f"r-hit{i}", "slow", t) for i in range(4)),
        ]
    )
    store.insert_events(
        [
            *(
                RecompileEvent(ts=t, host=HOST, model="storm", hw_pool="p", request_id=f"r-re{i}", reason=f"size {i}")
                for i in range(3)
            ),
            RecompileEvent(
                ts=t, host=HOST, model="storm", hw_pool="p", request_id="r-fb", reason="dtype Half",
                attrs={col.OUTCOME: "recompile_limit"},
            ),
        ]
    )  # fmt: skip
    store.insert_events(
        [
            CacheEvent(ts=t, host=HOST, model="slow", hw_pool="p", cache="fx_graph", result=result)
            for result in ("hit", "miss", "miss", "miss")
        ]
    )
    return store


def _slice() -> SliceParams:
    return SliceParams(start=NOW - timedelta(hours=1), end=NOW + timedelta(minutes=1))


def test_a_slow_first_compile_is_not_a_storm(story: Store) -> None:
    """On main, 90 compile seconds without a recompile made a 'Recompile storm' of model ``slow``."""
    params = StormParams(**_slice().model_dump())
    storms = recompile_storms(story, params)
    assert "slow" not in storms.get_column(col.MODEL).to_list()
    assert (storms.get_column(col.RECOMPILES) > 0).all()
    slow = slow_compiles(story, params).sort(col.MODEL)
    # Model storm's 3 recompiles (90 compile s) are too few for a storm: a slow compile hour (it was in neither list).
    assert slow.select(col.MODEL, col.RECOMPILES, col.COMPILE_SECONDS).rows() == [("slow", 0, 90.0), ("storm", 3, 90.0)]


def test_recompiles_that_hit_the_limit_are_counted_apart(story: Store) -> None:
    """On main, the reasons table counted 4 recompiles where the requests (and the KPI) count 3."""
    reasons = recompile_reasons(story, _slice())
    requests = story.client.query_df(f"SELECT sum(recompiles) AS n FROM {story.database}.requests")
    assert int(reasons.get_column("recompiles").sum()) == int(requests["n"].iloc[0]) == 3
    assert reasons.filter(pl.col("limit_hits") > 0).get_column(col.REASON).to_list() == ["dtype Half"]
    sizes = reasons.filter(pl.col(col.REASON) == "size N").row(0, named=True)  # size 0, 1, 2: one cause
    assert (sizes["recompiles"], sizes["variants"], sizes["example_reason"]) == (3, 3, "size 2")


def test_recompiles_over_time_count_what_the_headline_counts(story: Store) -> None:
    """The compile health page charted recompiles from requests only, so those of no request (warm-up,
    imported logs) were in its headline and reasons table but not over time. The series counts the same
    set: every recompile event but the limit's hits, inside requests or not."""
    t = story.client.query(f"SELECT max(ts) FROM {story.database}.recompiles").result_rows[0][0]
    story.insert_events([RecompileEvent(ts=t, host=HOST, model="storm", hw_pool="p", reason="size 3")])
    series = recompile_timeseries(story, _slice(), unit="minute")
    assert series.columns == [col.BUCKET, col.MODEL, col.HW_POOL, col.RECOMPILES]
    assert series.drop(col.BUCKET).rows() == [("storm", "p", 4)]
    assert int(recompile_reasons(story, _slice()).get_column(col.RECOMPILES).sum()) == 4
    assert int(specializations(story, _slice()).get_column(col.RECOMPILES).sum()) == 4


def test_compile_seconds_over_time_count_what_the_headline_counts(story: Store) -> None:
    """The compile health page charted the compile time requests paid, while its headline sums every compile:
    a warm-up compile of no request, or a store of imported logs alone, was in the headline and not over time.
    The series sums the same set as the specializations' compile_seconds: every compile event, failed ones too,
    inside requests or not."""
    t = story.client.query(f"SELECT max(ts) FROM {story.database}.requests").result_rows[0][0]
    story.insert_events(
        [
            CompileEvent(ts=t, host=HOST, model="slow", hw_pool="p", request_id="r-slow", entire_frame_s=90.0),
            CompileEvent(ts=t, host=HOST, model="slow", hw_pool="p", trigger="first", entire_frame_s=12.5),  # warm-up
            CompileEvent(ts=t, host=HOST, model="m", trigger="import", entire_frame_s=4.0),  # imported, no pool
            CompileEvent(ts=t, host=HOST, model="m", outcome="failed", fail_type="Unsupported", entire_frame_s=0.5),
        ]
    )
    series = compile_timeseries(story, _slice(), unit="minute")
    assert series.columns == [col.BUCKET, col.MODEL, col.HW_POOL, col.COMPILES, col.COMPILE_SECONDS]
    assert series.drop(col.BUCKET).rows() == [("m", "", 2, 4.5), ("slow", "p", 2, 102.5)]
    headline = specializations(story, _slice()).get_column(col.COMPILE_SECONDS).sum()
    assert series.get_column(col.COMPILE_SECONDS).sum() == pytest.approx(headline) == 107.0
    assert compile_timeseries(story, _slice().model_copy(update={"model": "slow"}), unit="hour").rows() == [
        (series.get_column(col.BUCKET)[0].replace(minute=0), "slow", "p", 2, 102.5)
    ]


def test_the_weekly_report_of_the_current_week_ends_now_with_one_cache_ratio(story: Store) -> None:
    """On main, the report's per-model cache ratio counted requests (1.0) while its summary counted lookups
    (25 %), and a week in progress was compared with a whole one."""
    report = build_weekly_report(LocalRunner(story), current_week(NOW), NOW)
    assert report.end == NOW
    row = report.by_model_pool.filter(pl.col(col.MODEL) == "slow").row(0, named=True)
    health = cache_health(story, _slice()).filter(pl.col(col.MODEL) == "slow")
    assert row["cache_hit_ratio"] == pytest.approx(int(health["hits"].sum()) / int(health["lookups"].sum())) == 0.25
    assert row[col.REQUESTS] == 5


def test_non_finite_outputs_are_notable_requests(story: Store) -> None:
    notable = notable_requests(story, _slice())
    why = dict(zip(notable.get_column(col.REQUEST_ID).to_list(), notable.get_column("why").to_list(), strict=True))
    assert why["r-nan"] == "non-finite output"
    assert why["r-fb"] == "eager fallback"
    assert why["r-slow"] == "first compile"
    assert not any(rid.startswith("r-hit") for rid in why)


def test_a_slow_hour_says_what_its_compile_cache_lookups_were(story: Store) -> None:
    """A slow hour was called "first compiles or a cold compile cache" beside a 100 % hit ratio: the highlight
    guessed from compile seconds while the ratio counts cache lookups. Each slow hour now carries its model and
    pool's lookups of that hour, every cache, as ``cache_health`` counts them: ``slow`` missed 3 of 4, ``warm``
    (a first compile whose lookups all hit) none, ``quiet`` recorded no lookup."""
    t = story.client.query(f"SELECT max(ts) FROM {story.database}.requests").result_rows[0][0]
    story.insert_events(
        [
            _request("r-warm", "warm", t, outcome="compile", compile_ms=75_000.0, cache_status="hit"),
            _request("r-quiet", "quiet", t, outcome="compile", compile_ms=61_000.0, cache_status="miss"),
        ]
    )
    story.insert_events(
        [
            CacheEvent(ts=t, host=HOST, model="warm", hw_pool="p", cache=cache, result="hit")
            for cache in ("fx_graph", "aot_autograd", "triton")
        ]
    )
    params = StormParams(**_slice().model_dump())
    lookups = ["cache_lookups", "cache_hits", "cache_misses", "cache_bypasses"]
    slow = slow_compiles(story, params).sort(col.MODEL)
    want = [("quiet", 0, 0, 0, 0), ("slow", 4, 1, 3, 0), ("storm", 0, 0, 0, 0), ("warm", 3, 3, 0, 0)]
    assert slow.select(col.MODEL, *lookups).rows() == want
    health = cache_health(story, _slice()).group_by(col.MODEL).agg(pl.col("hits", "lookups").sum()).sort(col.MODEL)
    assert health.rows() == [("slow", 1, 4), ("warm", 3, 3)]  # the ratio counts the same lookups
    by_host = slow_compiles(story, params.model_copy(update={"host": HOST})).sort(col.MODEL)  # raw rows, not rollup
    assert by_host.select(col.MODEL, *lookups).rows() == slow.select(col.MODEL, *lookups).rows()
    by_class = slow_compiles(story, params.model_copy(update={"traffic_class": "c"}))  # cache events carry none
    by_class = by_class.filter(pl.col(col.MODEL).is_in(["quiet", "slow", "warm"]))  # the module's store is shared
    assert by_class.height == 3
    assert by_class.select(lookups).null_count().row(0) == (3, 3, 3, 3)
