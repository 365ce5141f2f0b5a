"""A small fleet shaped like the demo's, for the four things a walk through the demo's dashboard found shown wrong:
two hosts compiling the same decoder graphs (and a third serving them with no compile of its own stored), a
process that serves two models under its tracker's one label, requests that compile two frames each, and hours of
slow compiles whose compile-cache lookups all hit (the decoder) or partly missed (the scorer).

Everything lies in one clock hour inside the last one before ``now`` (a minute boundary), so each slow hour is
one hour. :class:`~tests.dashboard.seed.SeedFacts` holds the events; the tests compute what the pages must show
from them.

Run as ``python -m tests.dashboard.demo_like DSN NOW_ISO`` (chDB allows one data directory per process, so the
test process never opens the store itself).
"""

from __future__ import annotations

import hashlib
import sys
from datetime import datetime, timedelta
from typing import Final

from inferensics.schema import CacheEvent, CompileEvent, RequestEvent, SdkHealthEvent
from inferensics.schema.processes import PROCESS_ATTR
from tests.dashboard.seed import SeedFacts
from tests.seeding import seed

DECODER: Final = "tiny-decoder"
"""The tracker's model of every process (``instrument(model=...)``), as the demo's workers label it."""
SCORER: Final = "hf-llama-tiny"
"""The second model the first process serves (``tracker.compile(..., name=SCORER)``)."""
POOL: Final = "cpu-a"
HOST_A: Final = "cpu-a-baseline-0"
"""Compiles the decoder first, then serves :data:`SERVED_HERE`."""
HOST_B: Final = "cpu-a-baseline-1"
"""Compiles the same decoder graphs two minutes after :data:`HOST_A`."""
HOST_C: Final = "cpu-a-canary-0"
"""Serves :data:`SERVED_ELSEWHERE` with no compile of its own stored (its process's records were lost)."""
PIDS: Final = {HOST_A: 4242, HOST_B: 4343}
PREFILL, DECODE, SCORE = (hashlib.sha256(name.encode()).hexdigest() for name in ("prefill", "decode", "score"))
CODE: Final = {PREFILL: "decoder.py:199:prefill", DECODE: "decoder.py:217:decode_step", SCORE: "hf.py:40:forward"}
SERVED_HERE: Final = "req-a-hit"
"""Served on :data:`HOST_A` after :data:`HOST_B` compiled the same graphs."""
SERVED_ELSEWHERE: Final = "req-c-hit"


def hour_window(now: datetime) -> datetime:
    """The first minute of the seed's events: half an hour before ``now``, moved to the next clock hour when the
    six minutes that follow would cross one (they then still end 24 minutes before ``now``)."""
    first = now - timedelta(minutes=30)
    hour = (first + timedelta(minutes=6)).replace(minute=0, second=0, microsecond=0)
    return max(first, hour)


def _process_key(host: str, started: datetime) -> str:
    """A compile row's process key as the host SDK's tracker writes it, a moment before its pipeline starts."""
    at = (started - timedelta(milliseconds=2)).isoformat(timespec="microseconds")
    return f"{host} pid {PIDS[host]} at {at}"


def build(now: datetime) -> SeedFacts:
    """The events, deterministic for a given ``now``."""
    b = hour_window(now)
    facts = SeedFacts(now=now)
    started = {HOST_A: b - timedelta(minutes=10), HOST_B: b - timedelta(minutes=8)}

    def request(rid: str, host: str, model: str, at: datetime, artifacts: tuple[str, ...], **kw: object) -> None:
        facts.requests.append(
            RequestEvent.model_validate({
                "request_id": rid, "ts": at, "host": host, "model": model, "hw_pool": POOL,
                "traffic_class": "interactive", "latency_ms": 40.0, "graph_artifacts": artifacts,
                "graph_keys": tuple(f"k-{a[:8]}" for a in artifacts), "graph_calls": (1,) * len(artifacts),
                "graph_us": (900,) * len(artifacts), **kw,
            })
        )  # fmt: skip

    def compiled(host: str, model: str, rid: str, at: datetime, artifact: str, *, seconds: float, hit: bool) -> None:
        key = {PROCESS_ATTR: _process_key(host, started[host])}
        facts.others.append(CompileEvent(
            ts=at, host=host, model=model, hw_pool=POOL, request_id=rid, graph_key=f"k-{artifact[:8]}",
            code_location=CODE[artifact], compile_id=f"{len(facts.others)}/0", trigger="first",
            entire_frame_s=seconds, cache_status="hit" if hit else "miss", artifact_id=artifact, attrs=key,
        ))  # fmt: skip
        facts.others.append(CacheEvent(
            ts=at, host=host, model=model, hw_pool=POOL, request_id=rid, cache="fx_graph",
            result="hit" if hit else "miss", reason="" if hit else "cold", time_saved_ms=900.0 if hit else 0.0,
        ))  # fmt: skip

    # Each decoder's first request compiles its prefill and decode frames (two compile records, one request).
    for host, offset in ((HOST_A, timedelta(0)), (HOST_B, timedelta(minutes=2))):
        rid = f"req-{host[-1]}-first"
        at = b + offset
        request(rid, host, DECODER, at, (PREFILL, DECODE), outcome="compile", compile_ms=50_000.0,
                cache_status="hit", guard_outcome="first", latency_ms=50_500.0)  # fmt: skip
        compiled(host, DECODER, rid, at + timedelta(seconds=1), PREFILL, seconds=30.0, hit=True)
        compiled(host, DECODER, rid, at + timedelta(seconds=31), DECODE, seconds=20.0, hit=True)
    # HOST_A's process serves the scorer too, compiled under its own name: a cold cache.
    at = b + timedelta(minutes=1)
    request("req-a-score", HOST_A, SCORER, at, (SCORE,), outcome="compile", compile_ms=70_000.0,
            cache_status="miss", guard_outcome="first", latency_ms=70_400.0)  # fmt: skip
    compiled(HOST_A, SCORER, "req-a-score", at + timedelta(seconds=1), SCORE, seconds=70.0, hit=False)
    facts.others.append(CacheEvent(
        ts=at + timedelta(seconds=1), host=HOST_A, model=SCORER, hw_pool=POOL, request_id="req-a-score",
        cache="triton", result="hit", time_saved_ms=300.0,
    ))  # fmt: skip
    request(SERVED_HERE, HOST_A, DECODER, b + timedelta(minutes=4), (PREFILL, DECODE))
    request(SERVED_ELSEWHERE, HOST_C, DECODER, b + timedelta(minutes=5), (PREFILL, DECODE))
    # Each process's health records, every minute from half a minute after its start to half a minute before `now`.
    for host, since in started.items():
        process = f"{PIDS[host]}@{int(since.timestamp() * 1000)}"
        minutes = int((now - since) / timedelta(minutes=1))
        facts.others.extend(
            SdkHealthEvent(ts=since + timedelta(seconds=30 + 60 * i), host=host, model=DECODER, hw_pool=POOL,
                           requests_seen=3 * i, spans_sent=3 * i, interval_s=60.0, process=process)
            for i in range(minutes)
        )  # fmt: skip
    return facts


def write(dsn: str, now: datetime) -> None:
    """Seed the store at ``dsn`` with the events of :func:`build` for ``now``."""
    from inferensics.schema.store import Store

    with Store.open(dsn) as store:
        facts = build(now)
        seed(store, events=[*facts.requests, *facts.others])


if __name__ == "__main__":
    write(sys.argv[1], datetime.fromisoformat(sys.argv[2]))
