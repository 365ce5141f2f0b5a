"""inferensics.collector.testing: SDK tests without a store, with exact timestamps and latencies."""

from __future__ import annotations

import doctest
from datetime import UTC, datetime

import pytest

import inferensics.collector.testing as testing_module
from inferensics.collector.host import SdkConfig, instrument
from inferensics.collector.host import request_tracker as request_tracker_module
from inferensics.collector.testing import FixedClock, InMemoryExporter
from inferensics.schema.events import RequestEvent


def test_public_names() -> None:
    assert testing_module.__all__ == ["Blob", "FixedClock", "InMemoryExporter"]


def test_module_example_runs() -> None:
    result = doctest.testmod(testing_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 4
    assert result.failed == 0


def test_requests_arrive_with_fixed_times_and_labels() -> None:
    exporter = InMemoryExporter()
    start = datetime(2026, 3, 2, 12, tzinfo=UTC).timestamp()
    with FixedClock(start=start, step_ns=5_000_000):
        tracker = instrument(exporter=exporter, host="h1", hw_pool="pool-a", model="m", config=SdkConfig())
        try:
            for i in range(3):
                with tracker.request(f"r{i}", traffic_class="batch", tenant="t", shape=(2, 8)):
                    pass
            tracker.flush()
        finally:
            tracker.shutdown()
    assert [r.request_id for r in exporter.requests] == ["r0", "r1", "r2"]
    # each request reads the clock three times: ts, scope entry, scope exit
    assert [r.ts for r in exporter.requests] == [datetime.fromtimestamp(start + 0.015 * i, UTC) for i in range(3)]
    assert {r.latency_ms for r in exporter.requests} == {5.0}
    first = exporter.request("r0")
    assert (first.host, first.hw_pool, first.model, first.traffic_class) == ("h1", "pool-a", "m", "batch")
    assert exporter.events(RequestEvent) == exporter.requests
    assert exporter.shut_down
    assert exporter.flushes >= 1


def test_clock_is_restored_on_exit() -> None:
    original = getattr(request_tracker_module, "time")  # noqa: B009 - not an exported name
    with FixedClock():
        assert getattr(request_tracker_module, "time") is not original  # noqa: B009
    assert getattr(request_tracker_module, "time") is original  # noqa: B009


def test_blobs_kept_by_digest_and_clear() -> None:
    exporter = InMemoryExporter()
    digest = exporter.put_blob(b"abc", "output_code", {"graph": "g"})
    assert digest == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert exporter.blobs[digest].kind == "output_code"
    exporter.clear()
    assert not exporter.blobs
    with pytest.raises(KeyError, match="no request 'nope' exported; flush the tracker first"):
        exporter.request("nope")


def test_negative_step_is_refused() -> None:
    with pytest.raises(ValueError, match="step_ns must be >= 0, got -1"):
        FixedClock(step_ns=-1)
