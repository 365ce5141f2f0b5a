"""The ``host_health`` query over health records in a real embedded store (:mod:`tests.analytics.hosts`)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from pydantic import ValidationError

from inferensics.analytics import AnalyticsError, LocalRunner, UnknownFilterValue, UnsupportedFilter
from inferensics.analytics.host_health import COLUMNS, HostHealthParams, host_health
from inferensics.schema.store import Store
from tests.analytics.hosts import (
    AUTH,
    AUTH_ERROR,
    BUSY,
    GONE,
    OK,
    OK_MISTRAL,
    QUIET,
    RANGE,
    RESTART,
    RETIRED,
    health_events,
)
from tests.seeding import scratch_store

NOW = datetime.now(UTC).replace(second=0, microsecond=0)
"""The range end: recent, as the table keeps 30 days (a fixed date would expire)."""
HOUR = HostHealthParams(start=NOW - RANGE, end=NOW)


@pytest.fixture(scope="module")
def health_store(chdb_dir: Path) -> Iterator[Store]:
    """A migrated store holding the health records, read by every test of the module."""
    with scratch_store(chdb_dir, "hosts") as store:
        store.insert_events(health_events(NOW))
        yield store


def _rows(frame: pl.DataFrame) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(r["host"], r["model"], r["hw_pool"]): r for r in frame.iter_rows(named=True)}


def test_every_process_reporting_or_recently_quiet_is_one_row(health_store: Store) -> None:
    frame = host_health(health_store, HOUR)
    assert frame.columns == list(COLUMNS)
    rows = _rows(frame)
    assert sorted(rows) == sorted([OK, OK_MISTRAL, QUIET, GONE, AUTH, BUSY, RESTART])  # not RETIRED (8 days)
    assert RETIRED not in rows
    assert {k: r["records"] for k, r in rows.items()} == {
        OK: 60, OK_MISTRAL: 10, QUIET: 20, GONE: 0, AUTH: 30, BUSY: 5, RESTART: 60,
    }  # fmt: skip


def test_a_host_that_stopped_reporting_is_quiet(health_store: Store) -> None:
    frame = host_health(health_store, HOUR)
    rows = _rows(frame)
    assert {k for k, r in rows.items() if r["quiet"]} == {QUIET, GONE}
    assert rows[QUIET]["silent_s"] == pytest.approx(40.5 * 60)
    assert rows[GONE]["silent_s"] == pytest.approx(3 * 3600)
    assert rows[OK]["silent_s"] == pytest.approx(30)
    assert rows[QUIET]["last_seen"] == NOW - timedelta(minutes=40, seconds=30)
    assert rows[GONE]["last_seen"] == NOW - timedelta(hours=3)
    # Quiet ones first, longest silent first.
    keys = list(zip(frame["host"], frame["model"], frame["hw_pool"], strict=True))
    assert keys[:2] == [GONE, QUIET]


def test_the_quiet_threshold_is_a_parameter(health_store: Store) -> None:
    rows = _rows(host_health(health_store, HOUR.model_copy(update={"quiet_after_s": 3 * 3600.0})))
    assert not any(r["quiet"] for r in rows.values())  # 3 hours of silence is not more than 3 hours
    rows = _rows(host_health(health_store, HOUR.model_copy(update={"quiet_after_s": 20.0})))
    assert {k for k, r in rows.items() if r["quiet"]} == set(rows)  # everyone is 30 s or more behind
    rows = _rows(host_health(health_store, HOUR.model_copy(update={"lookback_s": 2 * 3600.0})))
    assert GONE not in rows  # silent 3 hours: past a 2-hour lookback, taken as retired


def test_silence_is_measured_to_now_when_the_range_ends_later(health_store: Store) -> None:
    later = HostHealthParams(start=NOW - RANGE, end=NOW + timedelta(minutes=1))
    rows = _rows(host_health(health_store, later, now=NOW + timedelta(seconds=10)))
    assert rows[OK]["silent_s"] == pytest.approx(40)  # to now, not to the range end 90 s after the record
    rows = _rows(host_health(health_store, later, now=NOW + timedelta(hours=2)))
    assert rows[OK]["silent_s"] == pytest.approx(90)  # a range that ended: to its end


def test_latest_counters_are_since_the_process_started(health_store: Store) -> None:
    rows = _rows(host_health(health_store, HOUR))
    auth, busy, ok = rows[AUTH], rows[BUSY], rows[OK]
    assert (auth["refused_auth"], auth["spans_refused"], auth["kernel_failures"], auth["kernel_fallbacks"]) == (
        95, 95, 2, 1,
    )  # fmt: skip
    assert auth["last_error"] == AUTH_ERROR
    assert (busy["refused_back_pressure"], busy["refused_down"], busy["spans_refused"]) == (16, 2, 18)
    assert (busy["queue_depth"], busy["queue_depth_max"]) == (904, 904)
    assert (ok["requests_seen"], ok["queue_depth"], ok["queue_depth_max"], ok["last_error"]) == (4450, 5, 6, "")
    assert rows[GONE]["requests_seen"] == 4  # its newest record, before the range


def test_growth_in_the_range_starts_from_the_record_before_it(health_store: Store) -> None:
    rows = _rows(host_health(health_store, HOUR))
    assert rows[OK]["requests_seen_in_range"] == 50 * 89 - 50 * 29  # from the last record before the range
    assert rows[OK_MISTRAL]["requests_seen_in_range"] == 70  # started in the range: all of it
    assert rows[QUIET]["requests_seen_in_range"] == 20 * 50 - 20 * 30
    assert rows[AUTH]["refused_auth_in_range"] == 95 - 5  # 5 refused two hours ago are not this range's
    assert (rows[AUTH]["kernel_failures_in_range"], rows[AUTH]["kernel_fallbacks_in_range"]) == (2, 1)
    assert rows[GONE]["requests_seen_in_range"] == 0
    assert rows[OK]["refused_auth_in_range"] == 0


def test_a_restart_counts_its_values_whole(health_store: Store) -> None:
    row = _rows(host_health(health_store, HOUR))[RESTART]
    assert row["restarts"] == 1
    assert (row["requests_seen"], row["sdk_errors"], row["records_dropped"]) == (300, 2, 3)  # since the restart
    # 1,000 → 4,000 before the restart, then 10 counted from zero, then 10 → 300 after it.
    assert row["requests_seen_in_range"] == (4000 - 1000) + 10 + (300 - 10)
    assert row["sdk_errors_in_range"] == 0 + 1 + 1  # 4 → 4, restart at 1, then 2
    assert row["records_dropped_in_range"] == 3
    assert all(r["restarts"] == 0 for k, r in _rows(host_health(health_store, HOUR)).items() if k != RESTART)


def test_filters_select_processes(health_store: Store) -> None:
    rows = _rows(host_health(health_store, HOUR.model_copy(update={"model": "mistral"})))
    assert sorted(rows) == sorted([OK_MISTRAL, RESTART])
    rows = _rows(host_health(health_store, HOUR.model_copy(update={"hw_pool": "h100", "host": "h-quiet"})))
    assert sorted(rows) == [QUIET]


def test_bad_parameters_say_what_to_change(health_store: Store) -> None:
    with pytest.raises(UnknownFilterValue, match="unknown model 'lama'"):
        host_health(health_store, HOUR.model_copy(update={"model": "lama"}))
    with pytest.raises(UnsupportedFilter, match="traffic_class filter does not apply to host health records"):
        host_health(health_store, HOUR.model_copy(update={"traffic_class": "batch"}))
    with pytest.raises(AnalyticsError, match=r"quiet_after_s \(7200\) must be shorter than lookback_s \(3600\)"):
        host_health(health_store, HOUR.model_copy(update={"quiet_after_s": 7200.0, "lookback_s": 3600.0}))
    with pytest.raises(ValidationError):
        HostHealthParams(start=NOW - RANGE, end=NOW, quiet_after_s=0)


def test_the_named_query_runs_and_an_empty_range_is_an_empty_frame(health_store: Store) -> None:
    runner = LocalRunner(health_store)
    frame = runner.query("host_health", start=(NOW - RANGE).isoformat(), end=NOW.isoformat(), quiet_after_s=600)
    assert {k for k, r in _rows(frame).items() if r["quiet"]} == {QUIET, GONE}
    with pytest.raises(ValidationError, match="quiet_after"):
        runner.query("host_health", start=NOW.isoformat(), end=NOW.isoformat(), quiet_after=600)  # a typo
    empty = runner.query("host_health", start="2020-01-01", end="2020-01-02")
    assert empty.is_empty()
    assert empty.columns == list(COLUMNS)


def test_a_host_silent_for_days_stays_listed_as_quiet_whatever_the_range(store: Store) -> None:
    """Walk 42 (fleet D3): a host that stopped exporting 2 days before was left out of "last hour" and "last 24
    hours" (a one-day lookback took it as retired): the host the page exists to show was simply absent. It stays
    listed as quiet for 7 days after its last record; a process silent 8 days is taken as retired."""
    from inferensics.schema.events import SdkHealthEvent

    dead = NOW - timedelta(days=2, hours=6)
    events = [
        SdkHealthEvent(ts=dead - i * timedelta(minutes=1), host="h200-b-07", model="llama-70b", hw_pool="h200-b",
                       requests_seen=100 - i)
        for i in range(5)
    ]  # fmt: skip
    events.append(SdkHealthEvent(ts=NOW - timedelta(days=8), host="h-retired", model="llama-70b", hw_pool="h200-b"))
    events.append(SdkHealthEvent(ts=NOW - timedelta(seconds=30), host="h-live", model="llama-70b", hw_pool="h200-b"))
    store.insert_events(events)
    for span in (timedelta(hours=1), timedelta(hours=24), timedelta(days=3)):
        frame = host_health(store, HostHealthParams(start=NOW - span, end=NOW))
        rows = {r["host"]: r for r in frame.iter_rows(named=True)}
        assert list(rows) == ["h200-b-07", "h-live"], span  # quiet first
        dead_row = rows["h200-b-07"]
        assert (dead_row["quiet"], dead_row["silent_s"], dead_row["requests_seen"]) == (True, (2 * 24 + 6) * 3600, 100)
        assert dead_row["last_seen"] == dead
    assert HostHealthParams.model_fields["lookback_s"].default == 7 * 86_400


@pytest.mark.parametrize(
    ("lookback_s", "message"),
    [
        (1e300, "less than or equal to 2592000"),  # walk 42 fuzz #3: an HTTP 500 "Python int too large ..."
        (31 * 86_400.0, "less than or equal to 2592000"),
        (float("inf"), "finite number"),
        (float("nan"), "finite number"),
    ],
)
def test_the_lookback_is_at_most_the_records_retention(health_store: Store, lookback_s: float, message: str) -> None:
    """A lookback past the 30 days the health records are kept finds nothing more; a huge one overflowed the date
    arithmetic (a 500 from the service). The parameters refuse it, naming the bound (the service answers 400)."""
    runner = LocalRunner(health_store)
    with pytest.raises(ValidationError, match=rf"lookback_s\n  Input should be (a )?{message}"):
        runner.query("host_health", start=(NOW - RANGE).isoformat(), end=NOW.isoformat(), lookback_s=lookback_s)
    month = runner.query("host_health", start=(NOW - RANGE).isoformat(), end=NOW.isoformat(), lookback_s=30 * 86_400)
    assert RETIRED in _rows(month)  # 8 days silent: listed by a 30-day lookback


def test_a_process_that_shut_down_cleanly_is_stopped_not_quiet(store: Store) -> None:
    from inferensics.schema.events import SdkHealthEvent

    minute = timedelta(minutes=1)
    events = [
        SdkHealthEvent(ts=NOW - 40 * minute + i * minute, host=host, model="m", requests_seen=i, stopped=stop)
        for host, last_stops in (("h-stopped", True), ("h-crashed", False))
        for i in range(10)
        for stop in [last_stops and i == 9]
    ]
    # A process that stopped cleanly, then started again on the same host: running, neither quiet nor stopped.
    events += [
        SdkHealthEvent(ts=NOW - 50 * minute, host="h-back", model="m", requests_seen=90, stopped=True),
        SdkHealthEvent(ts=NOW - 30 * minute + 15 * minute, host="h-back", model="m", requests_seen=2),
        SdkHealthEvent(ts=NOW - minute, host="h-back", model="m", requests_seen=20),
    ]
    store.insert_events(events)
    rows = {r["host"]: r for r in host_health(store, HOUR).iter_rows(named=True)}
    assert (rows["h-stopped"]["quiet"], rows["h-stopped"]["stopped"]) == (False, True)
    assert (rows["h-crashed"]["quiet"], rows["h-crashed"]["stopped"]) == (True, False)
    assert (rows["h-back"]["quiet"], rows["h-back"]["stopped"], rows["h-back"]["restarts"]) == (False, False, 1)


def test_a_process_with_a_longer_health_interval_is_quiet_after_three_of_its_own(store: Store) -> None:
    from inferensics.schema.events import SdkHealthEvent

    minute = timedelta(minutes=1)

    def every_5_min(host: str, newest: timedelta, interval_s: float) -> list[SdkHealthEvent]:
        return [
            SdkHealthEvent(ts=NOW - newest - i * 5 * minute, host=host, model="m", requests_seen=10 - i,
                           interval_s=interval_s)
            for i in range(8)
        ]  # fmt: skip

    store.insert_events(
        every_5_min("h-slow", 7 * minute, 300.0)  # 7 min silent, reports every 5: not quiet (quiet after 15)
        + every_5_min("h-slow-gone", 20 * minute, 300.0)  # 20 min silent: quiet
        + every_5_min("h-old-rows", 7 * minute, 0.0)  # rows stored before the interval was kept: the parameter
        + every_5_min("h-fast", 4 * minute, 10.0)  # a short interval never lowers the threshold
    )
    rows = {r["host"]: r for r in host_health(store, HOUR).iter_rows(named=True)}
    assert {h: (rows[h]["quiet"], rows[h]["quiet_after_s"], rows[h]["interval_s"]) for h in rows} == {
        "h-slow": (False, 900.0, 300.0),
        "h-slow-gone": (True, 900.0, 300.0),
        "h-old-rows": (True, 180.0, 0.0),
        "h-fast": (True, 180.0, 10.0),
    }
    wide = {r["host"]: r["quiet"] for r in host_health(store, HOUR.model_copy(update={"quiet_after_s": 1800.0}))
            .iter_rows(named=True)}  # fmt: skip
    assert wide == {"h-slow": False, "h-slow-gone": False, "h-old-rows": False, "h-fast": False}


def test_processes_named_in_their_records_are_rows_of_their_own(store: Store) -> None:
    from inferensics.schema.events import SdkHealthEvent

    minute = timedelta(minutes=1)

    def process(host: str, pid: int, started: datetime, span: tuple[timedelta, timedelta], per: int) -> list[Any]:
        name, (first, last) = f"{pid}@{int(started.timestamp() * 1000)}", span
        n = int((first - last) / minute) + 1
        return [
            SdkHealthEvent(ts=NOW - first + i * minute, host=host, model="m", process=name, requests_seen=per * i,
                           interval_s=60.0)
            for i in range(n)
        ]  # fmt: skip

    store.insert_events(
        # Two processes serving the same model in the same pool of one host, side by side: read as one, their
        # interleaved counters made a restart of nearly every record.
        process("h-two", 100, NOW - 50 * minute, (45 * minute, minute), 10)
        + process("h-two", 200, NOW - 40 * minute, (35 * minute, 2 * minute), 3)
        # A crash 30 minutes ago and the process that replaced it: the old one is not quiet, the new one restarted.
        + process("h-crash", 300, NOW - 55 * minute, (50 * minute, 30 * minute), 5)
        + process("h-crash", 400, NOW - 29 * minute, (28 * minute, minute), 5)
        # A crash with nothing after it: quiet.
        + process("h-dead", 500, NOW - 55 * minute, (50 * minute, 20 * minute), 5)
        # Two crashes in a row: each successor counts the one it replaced, not every earlier one.
        + process("h-twice", 601, NOW - 55 * minute, (50 * minute, 40 * minute), 1)
        + process("h-twice", 602, NOW - 39 * minute, (38 * minute, 20 * minute), 1)
        + process("h-twice", 603, NOW - 19 * minute, (18 * minute, minute), 1)
    )
    rows = {(r["host"], r["process"].split("@")[0]): r for r in host_health(store, HOUR).iter_rows(named=True)}
    assert sorted(rows) == [("h-crash", "300"), ("h-crash", "400"), ("h-dead", "500"), ("h-twice", "601"),
                            ("h-twice", "602"), ("h-twice", "603"), ("h-two", "100"), ("h-two", "200")]  # fmt: skip
    view = {k: (r["quiet"], r["replaced"], r["restarts"], r["requests_seen_in_range"]) for k, r in rows.items()}
    assert view == {
        ("h-two", "100"): (False, False, 0, 440),  # 45 records, 10 a record, the first counted whole (0)
        ("h-two", "200"): (False, False, 0, 99),
        ("h-crash", "300"): (False, True, 0, 100),
        ("h-crash", "400"): (False, False, 1, 135),
        ("h-dead", "500"): (True, False, 0, 150),
        ("h-twice", "601"): (False, True, 0, 10),
        ("h-twice", "602"): (False, True, 1, 18),
        ("h-twice", "603"): (False, False, 1, 17),
    }
    assert rows[("h-crash", "400")]["started"] == NOW - 29 * minute


def test_a_process_lists_every_model_its_compiles_served(store: Store) -> None:
    """A process's health records carry the tracker's model only, so a process serving two models was listed
    under one. Its models are the labels of its compiles, matched by process key (host, pid and start): a pid
    the host reused later is another process, a key of another form (an imported log's) names none, records
    that name no process say nothing of it, and a model filter lists the processes that served that model."""
    from inferensics.schema.events import CompileEvent, SdkHealthEvent
    from inferensics.schema.processes import PROCESS_ATTR

    minute = timedelta(minutes=1)
    first, second = NOW - 50 * minute, NOW - 20 * minute  # pid 7 ran twice on h-reuse
    records = [
        SdkHealthEvent(ts=started + i * minute, host=host, model="decoder", hw_pool="p", requests_seen=i,
                       process=f"{pid}@{int(started.timestamp() * 1000)}", interval_s=60.0)
        for host, pid, started in (("h-reuse", 7, first), ("h-reuse", 7, second), ("h-solo", 9, first))
        for i in range(10)
    ] + [SdkHealthEvent(ts=NOW - 5 * minute, host="h-old", model="decoder", hw_pool="p")]  # fmt: skip

    def compiled(host: str, key: str, model: str) -> CompileEvent:
        return CompileEvent(ts=NOW - 10 * minute, host=host, model=model, hw_pool="p", attrs={PROCESS_ATTR: key})

    def tracker_key(host: str, pid: int, started: datetime) -> str:  # the host SDK's, a moment before its records'
        return f"{host} pid {pid} at {(started - timedelta(milliseconds=3)).isoformat(timespec='microseconds')}"

    compiles = [
        compiled("h-reuse", tracker_key("h-reuse", 7, first), "decoder"),
        compiled("h-reuse", tracker_key("h-reuse", 7, first), "hf-lm"),
        compiled("h-reuse", tracker_key("h-reuse", 7, second), "scorer"),
        compiled("h-reuse", "h-reuse.log pid 7 first record 2026-12-01T00:00:00", "imported"),  # an imported log
        compiled("h-reuse", tracker_key("h-reuse", 7, first), ""),  # a plain torch.compile: no model of ours
        compiled("h-old", tracker_key("h-old", 5, NOW - 30 * minute), "hf-lm"),
    ]
    store.insert_events(records)
    store.insert_events(compiles)
    rows = {(r["host"], r["process"]): r["models_served"] for r in host_health(store, HOUR).iter_rows(named=True)}
    ms = int(first.timestamp() * 1000), int(second.timestamp() * 1000)
    assert rows == {
        ("h-reuse", f"7@{ms[0]}"): ["decoder", "hf-lm"],
        ("h-reuse", f"7@{ms[1]}"): ["scorer"],
        ("h-solo", f"9@{ms[0]}"): [],  # compiled nothing
        ("h-old", ""): None,  # its records name no process: unknown
    }
    served_hf = host_health(store, HOUR.model_copy(update={"model": "hf-lm"}))
    assert served_hf.select("host", "process", "model").rows() == [("h-reuse", f"7@{ms[0]}", "decoder")]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_a_real_process_serving_two_models_lists_both(store: Store) -> None:
    """The host SDK itself: a tracker labelled ``decoder`` compiles a second model under its own name, and its
    health record (sent at shutdown) lists both. The compile's process key and the record's process are made by
    different parts of the SDK; this ties them as they are written."""
    import torch
    import torch._dynamo

    from inferensics.collector.host import instrument

    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    def shift(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    torch._dynamo.reset()
    tracker = instrument(store=store, host="h-two", hw_pool="p", model="decoder")
    try:
        decoder, scorer = tracker.compile(double, name="decoder"), tracker.compile(shift, name="scorer")
        with tracker.request("r-decoder"):
            decoder(torch.randn(8))
        with tracker.request("r-scorer", model="scorer"):
            scorer(torch.randn(8))
    finally:
        tracker.shutdown()
        torch._dynamo.reset()
    now = datetime.now(UTC)
    params = HostHealthParams(start=now - RANGE, end=now + timedelta(minutes=1))
    (row,) = host_health(store, params).rows(named=True)
    assert (row["host"], row["model"], row["models_served"]) == ("h-two", "decoder", ["decoder", "scorer"])
    assert row["process"]
    scorers = host_health(store, params.model_copy(update={"model": "scorer"}))
    assert scorers.get_column("process").to_list() == [row["process"]]
