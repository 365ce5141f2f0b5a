"""``dimension_values``: what the filter pickers offer, hosts included (the dashboard's Host box read the heavier
``host_health`` on every page for them)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from inferensics.analytics import LocalRunner
from inferensics.schema.events import RequestEvent, SdkHealthEvent
from inferensics.schema.store import Store
from tests.seeding import seed

T = datetime(2026, 3, 3, 12, tzinfo=UTC)


def test_hosts_are_listed_with_the_requests_their_processes_saw(store: Store) -> None:
    health = [
        SdkHealthEvent(ts=T + timedelta(minutes=m), host=host, model="m", hw_pool="p", process=process,
                       requests_seen=seen * (m + 1))
        for host, process, seen in (("h1", "1@h1", 10), ("h1", "2@h1", 5), ("h2", "3@h2", 40))
        for m in range(3)
    ]  # fmt: skip
    request = RequestEvent(request_id="r", ts=T, host="h1", model="m", hw_pool="p", traffic_class="interactive")
    seed(store, events=[*health, request])
    values = LocalRunner(store).query("dimension_values")
    hosts = values.filter(values["dimension"] == "host").select("value", "requests").rows()
    assert hosts == [("h2", 120), ("h1", 45)]
    assert sorted(set(values.get_column("dimension").to_list())) == ["bundle", "host", "hw_pool", "model",
                                                                     "traffic_class"]  # fmt: skip
    later = LocalRunner(store).query("dimension_values", start=T + timedelta(days=1), end=T + timedelta(days=2))
    assert later.filter(later["dimension"] == "host").is_empty()
