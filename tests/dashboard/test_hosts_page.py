"""The Hosts page over health records exported through a real service (:mod:`tests.analytics.hosts`)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from inferensics.collector.host.otlp_exporter import OtlpExporter
from inferensics.dashboard._internal.filters import MODEL_KEY, TRAFFIC_KEY
from inferensics.dashboard.navigation import BY_URL
from inferensics.dashboard.views.hosts import QUIET_KEY
from inferensics.schema import SdkHealthEvent
from tests.analytics.hosts import AUTH_ERROR, health_events
from tests.collector.service.harness import INGEST, READ, new_service
from tests.dashboard.apptest import assert_clean, metric, open_page
from tests.dashboard.conftest import SeededService
from tests.dashboard.seed import SeedFacts
from tests.polling import poll

pytestmark = pytest.mark.slow
PAGE = "views/hosts.py"


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededService]:
    """A service holding the health records, exported over OTLP as hosts do; the pages' range ends at the seed's
    clock (already past), so silences are measured to it exactly."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    service = new_service(tmp_path_factory.mktemp("hosts-service")).start()
    try:
        events = health_events(now)
        exporter = OtlpExporter(service.url, host="seeder", token=INGEST)
        exporter.export_records(events)
        exporter.flush()
        exporter.shutdown()
        client = service.client()
        rows = f"SELECT count() FROM {SdkHealthEvent.TABLE.name}"
        assert poll(lambda: client.sql(rows).item(), lambda n: n == len(events), timeout=60) == len(events)
        yield SeededService(service, READ, SeedFacts(now=now - timedelta(minutes=1)))  # pages end at `now`
    finally:
        service.stop()


def test_the_page_is_in_the_on_call_section() -> None:
    assert BY_URL["hosts"].file == PAGE
    assert BY_URL["hosts"].section == "On call"


def test_quiet_hosts_are_red_and_troubled_ones_warned(hosts: SeededService) -> None:
    at = open_page(hosts, PAGE)
    assert_clean(at)
    assert (metric(at, "Processes"), metric(at, "Hosts"), metric(at, "Quiet"), metric(at, "With problems")) == (
        "7", "6", "2", "3",
    )  # fmt: skip
    assert metric(at, "Replaced") == "0"  # the seed's records name no process (as before they did)
    errors = [str(e.value) for e in at.error]
    assert len(errors) == 2
    assert errors[0].startswith("**Quiet:** `h-gone` · llama · a100 last reported ")
    assert "3 h 0 min ago" in errors[0]
    assert errors[1].startswith("**Quiet:** `h-quiet` · llama · h100 last reported ")
    assert "40 min ago (quiet after 3 min)" in errors[1]
    warnings = {str(w.value).split("**")[1]: str(w.value) for w in at.warning}
    assert sorted(warnings) == ["`h-auth` · llama · h100", "`h-busy` · qwen · h100", "`h-restart` · mistral · h100"]
    auth = warnings["`h-auth` · llama · h100"]
    assert "**90** spans refused for the token: check the token (`$INFERENSICS_TOKEN`)" in auth
    assert "**2** kernel-registry provider failures" in auth
    assert "fell back" not in auth  # fallbacks are in the table (a CPU host falls back on every signature)
    assert "without the run that proves them" not in auth  # none unproven
    assert auth.endswith(f"Last error: `{AUTH_ERROR}`")
    busy = warnings["`h-busy` · qwen · h100"]
    assert "**16** spans refused by back-pressure" in busy
    assert "**2** spans not delivered, service unreachable" in busy
    restart = warnings["`h-restart` · mistral · h100"]
    assert "**2** errors caught by the SDK" in restart
    assert "**3** records dropped before export" in restart
    table = next(d.value for d in at.dataframe if "silent_s" in d.value.columns)
    assert list(table.columns[:5]) == ["host", "model", "models_served", "hw_pool", "quiet"]
    assert table["models_served"].isna().all()  # the seed's records name no process: what each served is unknown
    assert len(table) == 7
    assert table["quiet"].tolist()[:2] == [True, True]
    assert dict(zip(table["host"] + "/" + table["model"], table["restarts"], strict=True))["h-restart/mistral"] == 1


def test_the_quiet_threshold_and_the_filters_apply(hosts: SeededService) -> None:
    at = open_page(hosts, PAGE, **{MODEL_KEY: "mistral", TRAFFIC_KEY: "batch"})
    assert_clean(at)
    assert metric(at, "Processes") == "2"  # h-ok's second process and h-restart; the traffic class is not applied
    assert any("carry no traffic class or bundle" in str(c.value) for c in at.caption)
    assert not at.error
    at = open_page(hosts, PAGE)
    at.number_input(key=QUIET_KEY).set_value(4 * 3600.0).run()
    assert_clean(at)
    assert metric(at, "Quiet") == "0"
    assert not at.error


def test_a_range_without_health_records_says_so(hosts: SeededService) -> None:
    past = SeededService(hosts.service, READ, SeedFacts(now=hosts.facts.now - timedelta(days=10)))
    at = open_page(past, PAGE)
    assert_clean(at)
    assert next(str(i.value) for i in at.info).startswith("No serving process sent a health record in this range")
    assert not at.error
    assert not at.metric
