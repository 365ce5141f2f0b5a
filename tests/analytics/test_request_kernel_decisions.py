"""The kernel-registry decisions behind one request (``request_kernel_decisions``), and the replay verdicts of an id
that several requests share told apart (``request_replays``), in a real embedded store.

Walk 41 (#10): the request page of an eager request showed no provider though the store held its decisions, and a
compiled request's page did not say a provider raised and was taken out. Replay verdicts carry only the request
id: every request sharing the id listed every verdict.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from inferensics.analytics import RequestParams, request_kernel_decisions
from inferensics.analytics.drilldown import DECISION_COLUMNS, SAME_REQUEST, request_replays
from inferensics.schema.events import KernelDecisionEvent, ReplayResultEvent, RequestEvent
from inferensics.schema.store import Store
from tests.seeding import stop_ttl

T0 = datetime(2026, 3, 4, 10, tzinfo=UTC)
WHERE: dict[str, Any] = dict(host="h1", model="m", hw_pool="p")
REQUEST: dict[str, Any] = {**WHERE, "traffic_class": "t"}
GRAPH = "g" * 64
RAISED = "picky: raised RuntimeError: boom"
ON_CPU = "triton: platform cpu not in ['cuda', 'interpreter']"
SIG = "float32[4,64]/64,1@cpu float32[64]@cpu"
SERVED: dict[str, Any] = {"graph_keys": [GRAPH], "graph_artifacts": ["art"], "graph_calls": [1], "graph_us": [5]}
"""The graph a compiled request's row names (its four lists have one entry each)."""


def _decision(
    rid: str, ts: datetime, op: str, provider: str, *, compiled: bool = False, **kw: Any
) -> KernelDecisionEvent:
    where = {**WHERE, **kw.pop("where", {})}
    return KernelDecisionEvent(
        ts=ts, request_id=rid, op=op, provider=provider, signature=SIG, bucket="float32/n64/t4", compiled=compiled,
        graph_key=GRAPH if compiled else "", **where, **kw,
    )  # fmt: skip


def _seed(store: Store) -> None:
    stop_ttl(store)
    reused = (T0 + timedelta(minutes=3), T0 + timedelta(minutes=10))
    store.insert_events([
        RequestEvent(request_id="k-eager", ts=T0, outcome="eager", **REQUEST),
        RequestEvent(request_id="k-comp", ts=T0 + timedelta(minutes=1), outcome="compile", **SERVED, **REQUEST),
        RequestEvent(request_id="k-hit", ts=T0 + timedelta(minutes=2), outcome="hit", **SERVED, **REQUEST),
        *(RequestEvent(request_id="b-002", ts=t, capture_blob=blob, bundle_id="B", **REQUEST)
          for t, blob in zip(reused, ("a" * 64, "b" * 64), strict=True)),
    ])  # fmt: skip
    store.insert_events([
        _decision("k-eager", T0, "rms_norm", "reference", skipped=(RAISED, ON_CPU), fallback=True),
        _decision("k-eager", T0, "silu_mul", "reference", skipped=(ON_CPU,), fallback=True),
        _decision("k-comp", T0 + timedelta(minutes=1, seconds=1), "rms_norm", "inductor", compiled=True,
                  skipped=(RAISED,), fallback=True),
        # The same graph compiled on another host: not what served h1's requests.
        _decision("x", T0, "rms_norm", "mine", compiled=True, where={"host": "h2"}),
        *(_decision("b-002", t + timedelta(seconds=1), op, "reference")
          for t, op in zip(reused, ("rotary_embedding", "silu_and_mul"), strict=True)),
    ])  # fmt: skip

    def verdict(n: int, digest: str | None, attribution: str) -> ReplayResultEvent:
        evidence = {"captured_inputs": {"sha256": digest}} if digest is not None else {}
        return ReplayResultEvent(
            ts=T0 + timedelta(hours=1, minutes=n), replay_id=f"r{n}", request_id="b-002", bundle_id="B",
            attribution=attribution, verdict_json=json.dumps({"summary": attribution, "evidence": evidence}),
        )  # fmt: skip

    store.insert_events([verdict(1, "A" * 64, "source_op"), verdict(2, "b" * 64, "lowering"), verdict(3, None, "none")])


def _rows(store: Store, rid: str, occurrence: int | None = None) -> list[tuple[Any, ...]]:
    frame = request_kernel_decisions(store, RequestParams(request_id=rid, occurrence=occurrence))
    assert frame.columns == list(DECISION_COLUMNS)
    return [(r["this_request"], r["compiled"], r["position"], r["op"], r["provider"], r["raised"])
            for r in frame.iter_rows(named=True)]  # fmt: skip


def test_a_requests_decisions_eager_compiled_and_of_the_graphs_that_served_it(store: Store) -> None:
    _seed(store)
    # Eager: its own decisions, the provider that raised named (it was taken out for that signature).
    assert _rows(store, "k-eager") == [
        (True, False, None, "rms_norm", "reference", [RAISED]),
        (True, False, None, "silu_mul", "reference", []),
    ]
    # Compiled: its compile's decision; a later cache hit of the graph shows the same one, not as its own.
    assert _rows(store, "k-comp") == [(True, True, 0, "rms_norm", "inductor", [RAISED])]
    assert _rows(store, "k-hit") == [(False, True, 0, "rms_norm", "inductor", [RAISED])]
    # Requests sharing an id: each its own.
    assert [r[3] for r in _rows(store, "b-002")] == ["rotary_embedding"]
    assert [r[3] for r in _rows(store, "b-002", 2)] == ["silu_and_mul"]


@pytest.mark.parametrize(("occurrence", "expected"), [(None, ["none", "source_op"]), (2, ["none", "lowering"])])
def test_replay_verdicts_of_a_shared_id_are_tied_to_the_request_whose_inputs_they_replayed(
    store: Store, occurrence: int | None, expected: list[str]
) -> None:
    _seed(store)
    frame = request_replays(store, RequestParams(request_id="b-002", occurrence=occurrence))
    assert frame.get_column("attribution").to_list() == expected  # newest first
    # The verdict that names no inputs digest cannot be tied to either request: kept, and said so.
    assert frame.get_column(SAME_REQUEST).to_list() == [None, True]


@pytest.mark.parametrize(
    ("occurrence", "expected"), [(None, ["none", "source_op"]), (2, ["placed", "none", "lowering"])]
)
def test_a_verdict_that_names_its_request_shows_on_that_occurrence_whatever_inputs_it_names(
    store: Store, occurrence: int | None, expected: list[str]
) -> None:
    """A verdict recorded since schema version 24 names the request it replayed by host and start time: that decides,
    even where the inputs digest in its evidence is another occurrence's (a re-run that sent the same inputs)."""
    _seed(store)
    placed = ReplayResultEvent(
        ts=T0 + timedelta(hours=2), replay_id="r4", request_id="b-002", bundle_id="B", attribution="placed",
        request_host=REQUEST["host"], request_ts=T0 + timedelta(minutes=10),
        verdict_json=json.dumps({"summary": "placed", "evidence": {"captured_inputs": {"sha256": "a" * 64}}}),
    )  # fmt: skip
    store.insert_events([placed])
    frame = request_replays(store, RequestParams(request_id="b-002", occurrence=occurrence))
    assert frame.get_column("attribution").to_list() == expected  # newest first
    assert frame.get_column(SAME_REQUEST).to_list() == [True, None, True][-len(expected) :]
