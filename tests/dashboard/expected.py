"""Answers the pages must show, computed in plain Python from the seeded events (not from the store)."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime

from inferensics.analytics import spikes as highlights
from inferensics.schema import CacheEvent, CompileEvent, RequestEvent
from tests.dashboard.seed import SeedFacts


def window_start(ts: datetime) -> datetime:
    """The 5-minute window holding ``ts``."""
    step = int(highlights.WINDOW.total_seconds() // 60)
    return ts.replace(minute=ts.minute - ts.minute % step, second=0, microsecond=0)


def spikes(requests: list[RequestEvent], counted: str) -> list[tuple[str, datetime, int, int]]:
    """(model, window start, events, requests) of each spike window under the page's stated rule."""
    per_model: dict[str, list[RequestEvent]] = defaultdict(list)
    for r in requests:
        per_model[r.model].append(r)
    out = []
    for model, rows in per_model.items():
        hit = [r for r in rows if (r.status == "error" if counted == "errors" else r.outcome == "fallback")]
        model_rate = len(hit) / len(rows)
        totals = Counter(window_start(r.ts) for r in rows)
        events = Counter(window_start(r.ts) for r in hit)
        for window, n in events.items():
            rate = n / totals[window]
            if n >= highlights.MIN_EVENTS and rate >= max(highlights.FLOOR_RATE, highlights.FACTOR * model_rate):
                out.append((model, window, n, totals[window]))
    return sorted(out)


def storm_hours(requests: list[RequestEvent], floor: int = 10) -> dict[tuple[str, str, datetime], int]:
    """Recompiles per (model, pool, hour) that reach the storm floor (the 24 hours before hold none)."""
    per_hour = Counter(
        (r.model, r.hw_pool, r.ts.replace(minute=0, second=0, microsecond=0))
        for r in requests
        for _ in range(r.recompiles)
    )
    return {k: n for k, n in per_hour.items() if n >= floor}


def graph_keys_per_pool(facts: SeedFacts) -> dict[tuple[str, str], int]:
    """Distinct compiled graph keys per (model, pool)."""
    keys: dict[tuple[str, str], set[str]] = defaultdict(set)
    for e in facts.others:
        if isinstance(e, CompileEvent) and e.graph_key:
            keys[(e.model, e.hw_pool)].add(e.graph_key)
    return {k: len(v) for k, v in keys.items()}


def cache_lookups(facts: SeedFacts) -> Counter[str]:
    """Cache lookups by result."""
    return Counter(e.result for e in facts.others if isinstance(e, CacheEvent))
