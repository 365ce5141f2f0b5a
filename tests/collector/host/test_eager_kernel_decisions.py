"""An eager call's kernel-registry decision reaches the store as a ``kernel_decisions`` row (``compiled`` false),
once per op signature and provider in the process, with the request it was made in: the README's Kernels page
promised "compiled or eager", but only a compile's trace carried decisions, so no eager one was ever stored.
A decision made before the tracker existed, or before the registry was built, is exported too."""

from __future__ import annotations

import torch

from inferensics.collector.host import SdkConfig, Tracker, instrument
from inferensics.schema import KernelDecisionEvent
from inferensics.schema.store import Store


def _eager_rows(store: Store) -> list[KernelDecisionEvent]:
    return [e for e in store.select_events(KernelDecisionEvent) if not e.compiled]


def test_eager_decisions_are_stored_with_their_request(tracker: Tracker, store: Store) -> None:
    from inferensics import kernels

    tracker.flush()  # the tracker watches the registry from its next drain after it is built (as a server's
    # startup imports the registry before it serves); a decision before that is exported without its request
    x, w = torch.randn(3, 40), torch.ones(40)  # sizes no other test decides, in a process-wide registry
    with tracker.request("k-1", model="mk") as req:
        req.set_output(kernels.rms_norm(x, w, 1e-6))
    with tracker.request("k-2"):  # the same signature again: its decision is held, no second row
        kernels.rms_norm(x, w, 1e-6)
    kernels.silu_mul(torch.randn(2, 42))  # outside any request
    tracker.shutdown()

    decided = {(d.op, d.signature): d for d in kernels.registry().decisions() if not d.compiled}
    rows = _eager_rows(store)
    norm = [r for r in rows if r.op == "rms_norm" and "[3,40]" in r.signature]
    silu = [r for r in rows if r.op == "silu_mul" and "[2,42]" in r.signature]
    assert len(norm) == len(silu) == 1
    assert (norm[0].request_id, norm[0].model) == ("k-1", "mk")
    assert (silu[0].request_id, silu[0].model) == ("", "m")
    for row in (norm[0], silu[0]):
        decision = decided[(row.op, row.signature)]
        assert (row.provider, row.bucket, row.fallback) == (decision.provider, decision.bucket, decision.fallback)
        assert row.skipped == tuple(f"{p}: {r}" for p, r in decision.skipped)
        assert (row.host, row.hw_pool) == ("test-host", "cpu-pool")


def test_decisions_made_before_the_tracker_are_exported_once(store: Store) -> None:
    from inferensics import kernels

    kernels.silu_mul(torch.randn(5, 46))  # no tracker yet
    tracker = instrument(store=store, host="h-late", model="m-late", config=SdkConfig(health_interval_s=0))
    try:
        kernels.silu_mul(torch.randn(5, 46))
        tracker.flush()
    finally:
        tracker.shutdown()
    rows = [r for r in _eager_rows(store) if r.op == "silu_mul" and "[5,46]" in r.signature]
    assert len(rows) == 1
    assert (rows[0].host, rows[0].model, rows[0].request_id) == ("h-late", "m-late", "")
    assert tracker.stats()["kernel_decisions"] >= 1
