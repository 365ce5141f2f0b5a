"""A replaced tracker's ``stats()`` (a second ``instrument()`` while serving code still holds the first) are its
successor's: the same counters and the state of the process's guard hook, which only the successor can install."""

from __future__ import annotations

import torch

from inferensics.collector.host import SdkConfig, instrument, torch_adapter
from inferensics.collector.testing import InMemoryExporter

CONFIG = SdkConfig(health_interval_s=0, journal_dir="off")


def _prints_then_scales(x: torch.Tensor) -> torch.Tensor:
    print("serving")  # a graph break before any tensor op: a compile with no graph, which puts the hook in
    return torch.sin(x) * 3


def test_a_replaced_tracker_reports_the_guard_hook_its_successor_installed() -> None:
    first = instrument(exporter=InMemoryExporter(), host="h", model="A", config=CONFIG)
    second = instrument(exporter=InMemoryExporter(), host="h", model="B", config=CONFIG)
    compiled = second.compile(_prints_then_scales)
    try:
        for i in range(3):
            with first.request(f"r{i}") as req:
                req.set_output(compiled(torch.ones(4)))
        first.flush()
        assert torch_adapter.get_guard_hook() is not None
        assert second.stats()["guard_hook_installed"] == 1
        # The first tracker's own flag said 0 while the successor's hook counted the guards of its requests.
        assert first.stats()["guard_hook_installed"] == 1
        assert first.stats()["requests"] == second.stats()["requests"] == 3
    finally:
        second.shutdown()


def test_a_replaced_tracker_does_not_report_the_hook_its_shutdown_removed() -> None:
    first = instrument(exporter=InMemoryExporter(), host="h", model="A", config=CONFIG)
    compiled = first.compile(_prints_then_scales)
    with first.request("r0") as req:
        req.set_output(compiled(torch.ones(4)))
    assert first.stats()["guard_hook_installed"] == 1
    second = instrument(exporter=InMemoryExporter(), host="h", model="B", config=CONFIG)
    try:
        assert torch_adapter.get_guard_hook() is None  # the first's shutdown took it out; no compile of the second's
        assert first.stats()["guard_hook_installed"] == second.stats()["guard_hook_installed"] == 0
    finally:
        second.shutdown()


def test_a_tracker_shut_down_does_not_report_the_hook_it_removed() -> None:
    tracker = instrument(exporter=InMemoryExporter(), host="h", model="A", config=CONFIG)
    compiled = tracker.compile(_prints_then_scales)
    with tracker.request("r0") as req:
        req.set_output(compiled(torch.ones(4)))
    assert tracker.stats()["guard_hook_installed"] == 1
    tracker.shutdown()
    assert torch_adapter.get_guard_hook() is None
    assert tracker.stats()["guard_hook_installed"] == 0  # was 1: the flag outlived the hook
