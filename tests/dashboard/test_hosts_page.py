"""The Hosts page over health records exported through a real service (:mod:`tests.analytics.hosts`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

from inferensics.collector.host.otlp_exporter import OtlpExporter
from inferensics.dashboard._internal.filters import MODEL_KEY, TRAFFIC_KEY
from inferensics.dashboard.navigation import BY_URL
from inferensics.dashboard.views.hosts import QUIET_KEY
from inferensics.schema import BundleEvent, Event, SdkHealthEvent
from tests.analytics.hosts import AUTH_ERROR, health_events
from tests.collector.service.harness import INGEST, READ, RunningService, new_service
from tests.dashboard.apptest import TIMEOUT_S, assert_clean, metric, open_page, texts
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


REFUSING = ("h-refusing", "llama", "h100")
"""Tried to load the revoked canary bundle (``tracker.compile(model, bundle=DIR)`` raised) and left records unsent."""
REFUSED_ID = "c0ffee" * 10 + "abcd"
SERVING = ("h-serving", "llama", "h100")
"""Loaded the same bundle while it was not revoked yet: verified, no refusal."""
PID = 4242


def _export(service: RunningService, events: Sequence[Event], table: str) -> None:
    """Export ``events`` over OTLP, as hosts do, until ``table`` holds them."""
    exporter = OtlpExporter(service.url, host="seeder", token=INGEST)
    exporter.export_records(list(events))
    exporter.flush()
    exporter.shutdown()
    client = service.client()
    rows = f"SELECT count() FROM {table}"
    assert poll(lambda: client.sql(rows).item(), lambda n: n >= len(events), timeout=60) >= len(events)


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededService]:
    """A service holding what the host SDK exports for a process that refused a revoked bundle: its registration
    of the bundle with the cause (``bundles``: ``signature_state`` revoked) and its health records, whose records
    dropped grew as it raised; and a process of another host that loaded the bundle (verified)."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    started = now - timedelta(minutes=20)
    process = f"{PID}@{int(started.timestamp() * 1000)}"
    service = new_service(tmp_path_factory.mktemp("refusing-service")).start()
    try:
        health = [
            SdkHealthEvent(ts=started + timedelta(minutes=i, seconds=30), host=host, model=model, hw_pool=pool,
                           process=process, interval_s=60.0, requests_seen=0,
                           records_dropped=3 * i if (host, model, pool) == REFUSING else 0)
            for i in range(19)
            for host, model, pool in (REFUSING, SERVING)
        ]  # fmt: skip
        registered = [
            BundleEvent(ts=started + timedelta(seconds=2), bundle_id=REFUSED_ID, bundle_name="canary", model=model,
                        host=host, hw_pool=pool, signature_state=state)
            for (host, model, pool), state in ((REFUSING, "revoked"), (SERVING, "verified"))
        ]  # fmt: skip
        _export(service, health, SdkHealthEvent.TABLE.name)
        _export(service, registered, BundleEvent.TABLE.name)
        yield SeededService(service, READ, SeedFacts(now=now - timedelta(minutes=1)))  # pages end at `now`
    finally:
        service.stop()


def test_a_process_that_refused_a_revoked_bundle_names_the_refusal_as_its_cause(refusing: SeededService) -> None:
    """A process refused the revoked canary bundle and left records unsent as it raised: the page named "records
    dropped" as what went wrong, and nothing of the refusal. It names the refused bundle and the cause first."""
    at = open_page(refusing, PAGE)
    assert_clean(at)
    assert (metric(at, "Processes"), metric(at, "With problems")) == ("2", "1")
    (warning,) = [str(w.value) for w in at.warning]
    refused = f"refused bundle `{REFUSED_ID[:16]}` (canary): **revoked**, "
    assert warning.startswith(f"**`{REFUSING[0]}` · llama · h100 · pid {PID}**: {refused}"), warning
    assert warning.index("revoked") < warning.index("records dropped"), warning  # the cause, then what followed
    assert "Then, in this range: **54** records dropped before export" in warning
    assert SERVING[0] not in texts(at).replace(warning, "")  # loaded it verified: nothing to say
    table = next(d.value for d in at.dataframe if "silent_s" in d.value.columns)
    shown = dict(zip(table["host"], table["bundles_refused"], strict=True))
    assert shown == {REFUSING[0]: f"revoked {REFUSED_ID[:16]}", SERVING[0]: ""}


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
    assert list(table.columns[:6]) == ["requests", "host", "model", "models_served", "hw_pool", "quiet"]
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


def _page_over(answer: str) -> None:
    """The Hosts page drawn over ``answer`` (a parquet file) as its service's ``host_health`` answer."""
    import polars as pl

    from inferensics.dashboard.views import hosts

    health = pl.read_parquet(answer)
    asked = getattr(hosts, "section_query")  # noqa: B009 (the page's import, replaced while it draws)
    setattr(hosts, "section_query", lambda *_, **__: health)  # noqa: B010
    try:
        hosts.render()
    finally:
        setattr(hosts, "section_query", asked)  # noqa: B010


def _answer(hosts: SeededService, **params: object) -> pl.DataFrame:
    """The service's ``host_health`` answer over the seed's hour."""
    end = hosts.facts.now + timedelta(minutes=1)
    return hosts.service.client(READ).query(
        "host_health", start=(end - timedelta(hours=1)).isoformat(), end=end.isoformat(), **params
    )


def test_a_service_older_than_the_dashboard_is_said_not_a_traceback(hosts: SeededService, tmp_path: Path) -> None:
    """Walk 42 (fleet D5): a dashboard upgraded before its service drew a ``KeyError: 'kernel_untraceable_in_range'``
    traceback for the whole page. The counter it lacks reads as unknown, in one caption line."""
    answer = tmp_path / "host_health.parquet"
    _answer(hosts).drop("kernel_untraceable", "kernel_untraceable_in_range").write_parquet(answer)
    at = AppTest.from_function(_page_over, args=(str(answer),), default_timeout=TIMEOUT_S).run()
    assert_clean(at)
    older = [str(c.value) for c in at.caption if "older than this dashboard" in str(c.value)]
    assert older == [
        "The service is older than this dashboard: it does not report kernel_untraceable (shown empty, and not "
        "warned about); upgrade the service to see them."
    ]
    assert (metric(at, "Processes"), metric(at, "Quiet"), metric(at, "With problems")) == ("7", "2", "3")
    table = next(d.value for d in at.dataframe if "silent_s" in d.value.columns)
    assert table["kernel_untraceable_in_range"].isna().all()


def test_a_host_silent_for_days_is_asked_whether_it_was_retired(hosts: SeededService, tmp_path: Path) -> None:
    """Walk 42 (fleet D3): a process silent for days is listed as quiet (up to 7 days); its banner asks whether it
    was retired and says until when it stays listed, and the page says what is not listed."""
    answer = tmp_path / "host_health.parquet"
    _answer(hosts, lookback_s=10 * 86_400).write_parquet(answer)  # the seed's retired host: 8 days
    at = AppTest.from_function(_page_over, args=(str(answer),), default_timeout=TIMEOUT_S).run()
    assert_clean(at)
    (retired,) = [str(e.value) for e in at.error if "h-retired" in str(e.value)]
    assert "8 d 0 h ago (quiet after 3 min). Silent for more than a day: retired? It is listed until 7 d 0 h" in retired
    assert not [e for e in at.error if "h-gone" in str(e.value) and "retired?" in str(e.value)]  # 3 h: not asked
    assert any("stays listed, as quiet, for 7 d 0 h after its last record" in str(c.value) for c in at.caption)


def test_requests_a_killed_process_lost_are_warned_with_what_to_do(hosts: SeededService, tmp_path: Path) -> None:
    """A process that counted, at its start, the finished requests a SIGKILLed process of its host never exported
    (``requests_lost`` in its health records) is warned about, not only logged on the host."""
    answer = tmp_path / "host_health.parquet"
    frame = _answer(hosts)
    assert "requests_lost_in_range" in frame.columns  # the service's query reads the health records' column
    lost = (pl.col("host") == "h-ok") & (pl.col("model") == "llama")
    frame.with_columns(
        pl.when(lost).then(pl.lit(5, pl.UInt64)).otherwise(pl.col(c)).alias(c)
        for c in ("requests_lost", "requests_lost_in_range")
    ).write_parquet(answer)
    at = AppTest.from_function(_page_over, args=(str(answer),), default_timeout=TIMEOUT_S).run()
    assert_clean(at)
    (warning,) = [str(w.value) for w in at.warning if "h-ok" in str(w.value)]
    assert "**5** finished requests lost by a process of this host that died before exporting them" in warning
    assert "`dmesg` names the out-of-memory killer" in warning
    assert metric(at, "With problems") == "4"


def test_processes_of_the_host_that_died_are_warned_and_their_recovered_requests_shown(
    hosts: SeededService, tmp_path: Path
) -> None:
    """A process that read, at its start, the crash journals of processes of its host that died (``dead_processes``)
    and exported their requests in flight as error rows (``requests_recovered``): warned about, both in the table."""
    answer = tmp_path / "host_health.parquet"
    frame = _answer(hosts)
    assert {"dead_processes_in_range", "requests_recovered_in_range"} <= set(frame.columns)  # the service reads them
    died = (pl.col("host") == "h-ok") & (pl.col("model") == "llama")
    counts = {
        "dead_processes": 1,
        "dead_processes_in_range": 1,
        "requests_recovered": 2,
        "requests_recovered_in_range": 2,
    }
    frame.with_columns(
        pl.when(died).then(pl.lit(n, pl.UInt64)).otherwise(pl.col(c)).alias(c) for c, n in counts.items()
    ).write_parquet(answer)
    at = AppTest.from_function(_page_over, args=(str(answer),), default_timeout=TIMEOUT_S).run()
    assert_clean(at)
    (warning,) = [str(w.value) for w in at.warning if "h-ok" in str(w.value)]
    assert "**1** processes of this host that died (a fatal error, SIGKILL, the out-of-memory killer)" in warning
    assert "open this host's requests with status error" in warning
    table = next(d.value for d in at.dataframe if "silent_s" in d.value.columns)
    assert sorted(table["requests_recovered"].dropna().tolist())[-1] == 2
    assert metric(at, "With problems") == "4"
