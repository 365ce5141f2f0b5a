"""A tracker that stops being the process's tracker while serving code still holds it: a second ``instrument()``
(one per model, in two modules of one server) or a shutdown (at exit, while server threads still serve)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from inferensics.collector.host import SdkConfig, instrument
from inferensics.collector.testing import InMemoryExporter

CONFIG = SdkConfig(health_interval_s=0, journal_dir="off")


def test_requests_scoped_with_a_replaced_tracker_are_recorded_by_its_successor() -> None:
    first, second = InMemoryExporter(), InMemoryExporter()
    a = instrument(exporter=first, host="h", model="A", config=CONFIG)
    compiled_a = a.compile(torch.nn.Linear(4, 4).eval(), name="A")
    b = instrument(exporter=second, host="h", model="B", config=CONFIG)
    compiled_b = b.compile(torch.nn.Sequential(torch.nn.Linear(4, 2)).eval(), name="B")
    x = torch.randn(2, 4)
    try:
        with torch.inference_mode():
            for i in range(2):
                with a.request(f"A-{i}"):
                    compiled_a(x)
                with b.request(f"B-{i}"):
                    compiled_b(x)
        a.flush()  # the replaced tracker's flush flushes the process's tracker
    finally:
        b.shutdown()
    rows = {r.request_id: (r.model, sum(r.graph_calls)) for r in second.requests}
    assert rows == {"A-0": ("A", 1), "B-0": ("B", 1), "A-1": ("A", 1), "B-1": ("B", 1)}
    assert first.requests == []


def test_a_tracker_replaced_twice_follows_to_the_newest() -> None:
    exporters = [InMemoryExporter() for _ in range(3)]
    trackers = [instrument(exporter=e, host="h", model=f"m{i}", config=CONFIG) for i, e in enumerate(exporters)]
    try:
        for i, t in enumerate(trackers):
            with t.request(f"r{i}"):
                pass
    finally:
        trackers[-1].shutdown()
    assert [r.request_id for r in exporters[2].requests] == ["r0", "r1", "r2"]


def test_a_request_that_ends_after_shutdown_is_counted_dropped_and_said(caplog: pytest.LogCaptureFixture) -> None:
    exporter = InMemoryExporter()
    tracker = instrument(exporter=exporter, host="h", model="m", config=CONFIG)
    scope = tracker.request("in-flight")
    scope.__enter__()
    tracker.shutdown()  # at exit, a server thread still in a request
    with caplog.at_level(logging.WARNING, logger="inferensics.collector.host"):
        scope.__exit__(None, None, None)
        with tracker.request("after"):
            pass
    stats = tracker.stats()
    assert (stats["dropped"], stats["dropped_request"], exporter.requests) == (2, 2, [])
    said = [r.getMessage() for r in caplog.records if "records nothing" in r.getMessage()]
    assert len(said) == 1
    assert "in-flight" in said[0]
    assert "dropped_request" in said[0]


def test_requests_scoped_with_a_replaced_tracker_are_journaled_by_its_successor(tmp_path: Path) -> None:
    """Their rows are the successor's to deliver, so they count among the requests its journal says it began (a
    process killed later counts its lost requests right); once the successor has closed its journal, none."""
    config = SdkConfig(health_interval_s=0, journal_dir=str(tmp_path))
    a = instrument(exporter=InMemoryExporter(), host="h", model="A", config=config)
    b = instrument(exporter=InMemoryExporter(), host="h", model="B", config=config)
    try:
        assert b.journal is not None
        for i in range(3):
            with a.request(f"A-{i}"):
                pass
        with b.request("B-0"):
            pass
        begun = b.journal.begun
    finally:
        b.shutdown()
    assert begun == 4
    assert a.journal is None
    with a.request("late"):  # after the end: dropped and counted, and no journal error
        pass
    assert b.stats()["journal_errors"] == 0
