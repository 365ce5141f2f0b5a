"""The workload is seeded, long-tailed, carries every incident, and its policy helpers round as stated."""

from __future__ import annotations

from collections import Counter

import pytest

from inferensics.demo.serving import DispatchModel
from inferensics.demo.workload import (
    POOL_A,
    POOL_B,
    STORM_BURST,
    TRAFFIC_CLASSES,
    build_workload,
    bypasses_compile,
    padded_batch,
    padded_capacity,
    padded_seq,
    shape_bucket,
)


def test_same_seed_same_stream_other_seed_other_stream() -> None:
    """Reproducible request by request."""
    assert build_workload(3, 30, 2) == build_workload(3, 30, 2)
    assert build_workload(3, 30, 2).requests != build_workload(4, 30, 2).requests


def test_short_run_still_carries_every_incident_and_enough_mirrors() -> None:
    """Even 20 s at 2 requests/s has the storm burst, two invalid and one NaN request, and mirrors."""
    w = build_workload(0, 20, 2)
    incidents = Counter(r.incident for r in w.requests)
    assert incidents["storm"] >= len(STORM_BURST)
    assert (incidents["invalid"], incidents["nan"]) == (2, 1)
    assert sum(r.mirror for r in w.requests) >= 8
    assert len(w.for_canary()) == sum(r.pool == POOL_B and not r.incident for r in w.requests)
    assert all(r.pool == POOL_B and not r.incident for r in w.requests if r.mirror)
    assert all(r.pool == POOL_A for r in w.requests if r.incident == "storm")
    assert len({r.request_id for r in w.requests}) == len(w.requests)
    assert all(r.at_s >= w.storm_onset_s for r in w.requests if r.spec_tokens)


def test_long_run_is_long_tailed_across_three_classes() -> None:
    """Most prompts are short, a few exceed the compiled range, all traffic classes appear."""
    w = build_workload(0, 300, 2)
    lengths = sorted(r.prompt_len for r in w.requests)
    assert lengths[len(lengths) // 2] < 100 < lengths[-1] / 4
    assert 0 < sum(bypasses_compile(r) for r in w.requests) < len(w.requests) * 0.1
    assert {r.traffic_class for r in w.requests} == set(TRAFFIC_CLASSES)


@pytest.mark.parametrize(
    ("batch", "seq", "capacity", "bucket"),
    [(1, 1, 1, (2, 16, 64)), (3, 17, 65, (4, 32, 128)), (8, 512, 128, (8, 512, 128))],
)
def test_padding(batch: int, seq: int, capacity: int, bucket: tuple[int, int, int]) -> None:
    """Batch to a power of two (at least 2), prompt to 16s, capacity to 64s."""
    assert (padded_batch(batch), padded_seq(seq), padded_capacity(capacity)) == bucket


def test_shape_bucket_and_dispatch_model() -> None:
    """Buckets name the compiled key; the dispatch model fills the limit, then falls back."""
    w = build_workload(0, 20, 2)
    assert all(shape_bucket(r).startswith(("b", "eager:")) for r in w.requests)
    model = DispatchModel(limit=2)
    assert [model.call("decode", q) for q in (1, 3, 4, 3, 1)] == ["compile", "recompile", "fallback", "hit", "hit"]


def test_public_api_is_pinned() -> None:
    """The package root exports the workload only (the runner and models are imported from their modules)."""
    import inferensics.demo

    assert inferensics.demo.__all__ == ["POLICY_TEXT", "RequestSpec", "Workload", "build_workload"]
