"""``bundles_seen`` (added for the dashboard's Bundles page) against answers computed from the events."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from inferensics.analytics.bundles import bundles_seen
from inferensics.analytics.errors import UnknownFilterValue
from inferensics.analytics.filters import SliceParams
from inferensics.schema import BundleEvent
from inferensics.schema.store import Store
from tests.dashboard.seed import BASELINE, CANDIDATE, SeedFacts, build, write_events

NOW = datetime(2026, 11, 30, 19, 0, tzinfo=UTC)


@pytest.fixture
def seeded(store: Store) -> tuple[SliceParams, SeedFacts]:
    """The dashboard's seed events in the test's store, and the hour that holds them."""
    facts = build(NOW)
    write_events(store, facts)
    return SliceParams(start=NOW - timedelta(hours=1), end=NOW + timedelta(minutes=1)), facts


def test_bundles_seen_lists_registrations_and_traffic(store: Store, seeded: tuple[SliceParams, SeedFacts]) -> None:
    params, facts = seeded
    frame = bundles_seen(store, params)
    assert frame.get_column("bundle_id").to_list() == [BASELINE, CANDIDATE]  # most requests first
    registrations = [e for e in facts.others if isinstance(e, BundleEvent)]
    hosts: dict[str, set[str]] = defaultdict(set)
    pools: dict[str, set[str]] = defaultdict(set)
    for e in registrations:
        hosts[e.bundle_id].add(e.host)
        pools[e.bundle_id].add(e.hw_pool)
    for row in frame.iter_rows(named=True):
        bundle = row["bundle_id"]
        served = [r for r in facts.requests if r.bundle_id == bundle]
        assert row["hosts"] == sorted(hosts[bundle])
        assert row["hw_pools"] == sorted(pools[bundle])
        assert row["requests"] == len(served)
        assert row["errors"] == sum(r.status == "error" for r in served)
        assert row["fallbacks"] == sum(r.outcome == "fallback" for r in served)
        assert row["traffic_classes"] == sorted({r.traffic_class for r in served})
        assert row["serving_pools"] == sorted({r.hw_pool for r in served})
        assert row["error_rate"] == pytest.approx(row["errors"] / len(served))
    names = dict(zip(frame.get_column("bundle_id"), frame.get_column("bundle_name"), strict=True))
    assert names == {BASELINE: "baseline", CANDIDATE: "canary-2026-11-30"}


def test_bundles_seen_filters_and_unknown_values(store: Store, seeded: tuple[SliceParams, SeedFacts]) -> None:
    params, facts = seeded
    batch = bundles_seen(store, params.model_copy(update={"traffic_class": "batch"}))
    assert batch.get_column("bundle_id").to_list() == [BASELINE]
    assert batch.item(0, "requests") == sum(
        r.traffic_class == "batch" and r.bundle_id == BASELINE for r in facts.requests
    )
    pool_b = bundles_seen(store, params.model_copy(update={"hw_pool": "h100-b"}))
    assert pool_b.get_column("hosts").to_list() == [["host-4"]]
    with pytest.raises(UnknownFilterValue, match="no-such-model"):
        bundles_seen(store, params.model_copy(update={"model": "no-such-model"}))


def test_bundles_seen_of_a_range_before_any_registration_is_empty(
    store: Store, seeded: tuple[SliceParams, SeedFacts]
) -> None:
    params, _ = seeded
    long_ago = params.model_copy(
        update={"start": params.start - timedelta(days=3), "end": params.start - timedelta(days=2)}
    )
    assert bundles_seen(store, long_ago).is_empty()  # registered after it ended, and no traffic in it
