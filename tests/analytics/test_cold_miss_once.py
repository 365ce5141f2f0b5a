"""A compile's cold miss is priced once.

One compile misses AOTAutograd's cache and the FX graph cache inside it; a warm AOTAutograd cache would have
saved both, so the compile is charged the priciest of its missed caches, not each miss (the weekly report read
"cold misses cost about 27.5 s" beside 24.6 s of every compile).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from inferensics.analytics import LocalRunner, SliceParams, build_weekly_report, cache_health
from inferensics.analytics.report.weekly import summary_lines
from inferensics.schema import columns as col
from inferensics.schema.events import CacheEvent, CompileEvent
from inferensics.schema.store import Store
from tests.seeding import stop_ttl

T0 = datetime(2026, 3, 4, 10, tzinfo=UTC)  # a Wednesday of 2026-W10
WHERE = dict(host="h1", model="m", hw_pool="p")


def _lookup(
    minute: int, process: str, compile_id: str, cache: str, result: str, *, saved_ms: float = 0.0
) -> CacheEvent:
    return CacheEvent(
        ts=T0 + timedelta(minutes=minute),
        compile_id=compile_id,
        request_id=f"r-{process}-{compile_id}",
        cache=cache,
        result=result,
        time_saved_ms=saved_ms,
        attrs={col.PROCESS: process},
        **WHERE,
    )


def _seed(store: Store) -> None:
    stop_ttl(store)
    store.insert_events(
        [
            # Process a, compile 0/0: cold, both caches miss (one compile).
            _lookup(0, "a", "0/0", "aot_autograd", "miss"),
            _lookup(0, "a", "0/0", "fx_graph", "miss"),
            # Process b, compile 0/0: both caches hit; AOTAutograd's saving holds the FX graph's within it.
            _lookup(1, "b", "0/0", "aot_autograd", "hit", saved_ms=10_000.0),
            _lookup(1, "b", "0/0", "fx_graph", "hit", saved_ms=4_000.0),
            # Process c, compile 0/0 (the same id, another process): only the FX graph cache misses.
            _lookup(2, "c", "0/0", "aot_autograd", "hit", saved_ms=10_000.0),
            _lookup(2, "c", "0/0", "fx_graph", "miss"),
            # Process c, compile 0/1: Triton's cache misses, and no Triton hit prices it.
            _lookup(3, "c", "0/1", "triton", "miss"),
        ]
    )
    # Process a's cold compile took 6 s in all: a warm cache could not have saved more than that.
    store.insert_events(
        [
            CompileEvent(
                ts=T0,
                compile_id="0/0",
                request_id="r-a-0/0",
                entire_frame_s=6.0,
                attrs={col.PROCESS: "a"},
                **WHERE,
            )
        ]
    )


def test_each_compile_is_charged_its_cold_miss_once(store: Store) -> None:
    _seed(store)
    health = cache_health(store, SliceParams(start=T0, end=T0 + timedelta(hours=1)))
    cost = dict(health.select(col.CACHE, "cold_miss_cost_s").iter_rows())
    # Compile a/0/0 is charged AOTAutograd's price (10 s) once, capped at its own 6 s; compile c/0/0 the FX
    # graph's (4 s): 10 s in all, not 10 + 4 + 4 = 18 s.
    assert cost == {"aot_autograd": 6.0, "fx_graph": 4.0, "triton": None}
    assert health.get_column("misses").sum() == 4
    assert health.get_column("cold_miss_cost_s").sum() == 10.0

    report = build_weekly_report(LocalRunner(store), "2026-W10", now=T0 + timedelta(days=7))
    line = next(s for s in summary_lines(report) if s.startswith("Compile-cache hit ratio"))
    assert "cold misses cost about 10.0 s" in line, line
    assert "1 miss not priced" in line, line
    assert pl.Series(health.get_column("cold_miss_cost_s")).null_count() == 1
