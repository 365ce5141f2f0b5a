"""The spool and the store writer in this process: framing, torn tails, the cap, and replay dedup."""

from __future__ import annotations

import gzip
import logging
import os
from collections import Counter
from pathlib import Path

import pytest
from google.rpc.status_pb2 import Status  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from inferensics.collector.service.config import ServiceConfig
from inferensics.collector.service.engine_decoder import EngineDecoder, SegmentResult
from inferensics.collector.service.ingest import Ingest
from inferensics.collector.service.metrics import Metrics
from inferensics.collector.service.server import retire_legacy_spool
from inferensics.collector.service.spool import (
    Spool,
    SpoolDirError,
    SpoolFullError,
    encode_record,
    read_segment,
    retire,
)
from inferensics.collector.service.testing import encode_request
from inferensics.collector.service.writer import Faults, StoreWriter
from inferensics.schema.dedup import SEEN_TABLE
from inferensics.schema.store import Store
from tests.collector.service.otel import request


def spool(directory: Path, **kw: int) -> Spool:
    args = {"max_bytes": 10 << 20, "seal_rows": 1000, "seal_bytes": 1 << 20, "seal_age_s": 3600, **kw}
    return Spool(directory, **args)  # type: ignore[arg-type]


def record(run: str, n: int) -> bytes:
    return encode_record(encode_request([request(i, run=run) for i in range(n)]))


def request_ids(payloads: list[bytes]) -> list[str]:
    out = []
    for p in payloads:
        for span in ExportTraceServiceRequest.FromString(p).resource_spans[0].scope_spans[0].spans:
            out += [kv.value.string_value for kv in span.attributes if kv.key == "inferensics.request_id"]
    return out


def test_records_round_trip_and_a_torn_tail_is_cut(tmp_path: Path) -> None:
    s = spool(tmp_path)
    s.append(record("a", 3), 3)
    s.append(record("b", 2), 2)
    s.seal_now()
    seg = s.next_sealed(0)
    assert seg is not None
    assert seg.rows == 5
    payloads, torn = read_segment(seg.path)
    assert not torn
    assert len(payloads) == 2
    assert request_ids(payloads)[-1] == "b-000001"
    with seg.path.open("ab") as fh:  # a crash mid-append leaves a partial record
        fh.write(record("c", 4)[:-7])
    payloads, torn = read_segment(seg.path)
    assert torn
    assert len(request_ids(payloads)) == 5
    with seg.path.open("ab") as fh:  # a record behind the damaged one (an fsync that lost bytes) is still read
        fh.write(record("d", 2))
    payloads, skipped = read_segment(seg.path)
    assert skipped == len(record("c", 4)) - 7
    assert request_ids(payloads)[-2:] == ["d-000000", "d-000001"]


def test_cap_refuses_and_recovery_finds_segments(tmp_path: Path) -> None:
    one = record("a", 10)
    s = spool(tmp_path, max_bytes=len(one) * 2 + 10, seal_rows=10)
    s.append(one, 10)
    s.append(one, 10)
    with pytest.raises(SpoolFullError, match="cap"):
        s.append(one, 10)
    assert s.files() == 2
    assert s.bytes == len(one) * 2
    again = spool(tmp_path)  # a restart
    assert again.files() == 2
    assert again.bytes == len(one) * 2


def test_an_exclusive_spool_locks_its_folder_until_closed(tmp_path: Path) -> None:
    """A service's spool: a second one on the folder (another service) is refused, naming the holder's pid,
    and the folder is free again once the first closes."""
    first = spool(tmp_path, exclusive=True)
    with pytest.raises(SpoolDirError, match=rf"is in use by another process \(pid {os.getpid()}\)"):
        spool(tmp_path, exclusive=True)
    first.close()
    spool(tmp_path, exclusive=True).close()


def _legacy_with_service_files(data: Path) -> Path:
    legacy = data / "store-spool"
    (legacy / "engine").mkdir(parents=True)
    (legacy / "engine" / "inferensics_otlp_trace.proto").write_text("syntax")
    (legacy / "quarantine").mkdir()
    (legacy / "spool.lock").write_text("123\n")
    return legacy


def test_an_earlier_releases_spool_is_retired_once_it_holds_no_spans(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An old `store-spool` holding only the service's own files stayed for ever (and was used as the spool)."""
    caplog.set_level(logging.INFO, logger="inferensics.collector.service")
    config = ServiceConfig(dsn=f"chdb://{tmp_path / 'data' / 'store'}")
    legacy = _legacy_with_service_files(tmp_path / "data")
    segment = legacy / "quarantine" / "000000000001-0123456789ab.seg"
    segment.write_bytes(b"INFS")
    assert retire(legacy) == ""  # quarantined spans are spans: kept
    segment.unlink()
    held = spool(legacy, exclusive=True)
    assert retire(legacy) == ""  # a service has it open
    held.close()
    retire_legacy_spool(config)
    retire_legacy_spool(config)
    assert not legacy.exists()
    lines = [r.getMessage() for r in caplog.records if "earlier release" in r.getMessage()]
    assert lines == [f"the spool folder of an earlier release holds no spans any more: removed {legacy}"]
    # a file the service did not write is not deleted: the folder is moved aside
    legacy = _legacy_with_service_files(tmp_path / "data")
    (legacy / "notes.txt").write_text("mine")
    assert retire(legacy).startswith(f"moved {legacy} to {legacy}.retired")
    assert (tmp_path / "data" / "store-spool.retired" / "notes.txt").read_text() == "mine"
    assert not legacy.exists()


def test_a_replayed_segment_is_deduplicated_by_its_token(tmp_path: Path, store_dsn: str, store: Store) -> None:
    s = spool(tmp_path)
    s.append(record("d", 25), 25)
    s.seal_now()
    seg = s.next_sealed(0)
    assert seg is not None
    first = StoreWriter(
        s, lambda: Store.open(store_dsn), Metrics(), Faults(), decoder=EngineDecoder(tmp_path / "engine")
    )
    # simulate a crash after the rows' insert, before the span keys' insert and the segment's deletion
    s.remove = lambda seg: None  # type: ignore[method-assign]
    assert first._write(seg)
    assert store.row_counts()["requests"] == 25
    store.client.command(f"TRUNCATE TABLE {store.database}.{SEEN_TABLE}")
    after_restart = spool(tmp_path)
    replay = after_restart.next_sealed(0)
    assert replay is not None
    assert replay.recovered
    metrics = Metrics()
    second = StoreWriter(
        after_restart, lambda: Store.open(store_dsn), metrics, Faults(), decoder=EngineDecoder(tmp_path / "engine")
    )
    assert second._write(replay)
    assert store.row_counts()["requests"] == 25
    assert metrics.get("deduplicated_rows") == 25
    assert metrics.get("written_rows") == 0
    assert after_restart.files() == 0
    assert not list(tmp_path.glob("*.seg"))


def test_a_retried_request_in_a_new_segment_is_stored_once(tmp_path: Path, store_dsn: str, store: Store) -> None:
    """Point 6: the same body re-sent after a restart lands in a new segment (a new block token); the span
    keys drop it, in another segment and repeated within one segment alike."""
    s = spool(tmp_path)
    writer = StoreWriter(s, lambda: Store.open(store_dsn), Metrics(), Faults(), decoder=EngineDecoder(tmp_path / "e"))
    body = record("r", 20)
    s.append(body, 20)
    s.seal_now()
    seg = s.next_sealed(0)
    assert seg is not None
    assert writer._write(seg)
    restarted = spool(tmp_path)  # a new boot id: new segment names, new tokens
    metrics = Metrics()
    writer = StoreWriter(
        restarted, lambda: Store.open(store_dsn), metrics, Faults(), decoder=EngineDecoder(tmp_path / "e")
    )
    restarted.append(body, 20)
    again = record("s", 5)  # the same bytes twice (a record() call draws new span ids)
    restarted.append(again, 5)
    restarted.append(again, 5)
    restarted.seal_now()
    seg = restarted.next_sealed(0)
    assert seg is not None
    assert writer._write(seg)
    ids = Counter(r[0] for r in store.query_rows(f"SELECT request_id FROM {store.database}.requests"))
    assert len(ids) == 25
    assert set(ids.values()) == {1}
    assert metrics.get("duplicate_spans") == 25
    assert metrics.get("written_rows") == 5


def test_spool_at_cap_answers_429_while_the_store_is_up_and_503_while_it_is_down(tmp_path: Path) -> None:
    body = encode_request([request(i, run="c") for i in range(5)])
    s = spool(tmp_path, max_bytes=len(encode_record(body)) + 10)
    metrics = Metrics()
    config = ServiceConfig(retry_after_s=7)
    proto = "application/x-protobuf"
    assert Ingest(config, s, metrics, lambda: True).handle(body, proto, None).status == 200
    for store_up, status in ((True, 429), (False, 503)):
        answer = Ingest(config, s, metrics, (lambda: True) if store_up else (lambda: False)).handle(body, proto, None)
        assert answer.status == status
        assert answer.headers == {"Retry-After": "7"}
        message = Status.FromString(answer.body).message  # protobuf, as asked
        assert "cap" in message
        assert "retry after 7 s" in message
        assert ("store is unavailable" in message) is (status == 503)
    assert metrics.get("rejected", "spool_full") == 2
    assert metrics.get("spooled_spans") == 5
    assert s.pending_rows() == 5


def test_at_the_cap_a_protobuf_body_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    """A sender that retries a refused 2 MB body at once would otherwise have it parsed on every try: the
    refusal comes from the body's size (gzip: its trailer) while JSON, whose spooled size is known only after
    the conversion, is still parsed first."""
    body = encode_request([request(i, run="early") for i in range(5)])
    s = spool(tmp_path, max_bytes=len(encode_record(body)) + 20)
    metrics = Metrics()
    ingest = Ingest(ServiceConfig(retry_after_s=3), s, metrics, lambda: True)
    proto = "application/x-protobuf"
    garbage = b"\xff" * len(body)  # not protobuf: a 400 once parsed
    assert ingest.handle(garbage[:20], proto, None).status == 400  # room left: parsed, refused as malformed
    assert ingest.handle(body, proto, None).status == 200
    assert ingest.handle(garbage, proto, None).status == 429  # no room: refused on its size alone
    big = gzip.compress(body)
    assert ingest.handle(big, proto, "gzip").status == 429  # trailer says len(body): cannot fit
    small = gzip.compress(ExportTraceServiceRequest().SerializeToString())
    assert ingest.handle(small, proto, "gzip").status == 200  # an empty request fits (nothing to spool)
    assert ingest.handle(b"{not json", "application/json", None).status == 400  # JSON: parsed first
    assert metrics.get("rejected", "spool_full") == 2
    assert metrics.get("rejected", "malformed") == 2
    assert s.pending_rows() == 5


def test_a_request_larger_than_the_whole_spool_is_413_not_a_retry(tmp_path: Path) -> None:
    body = encode_request([request(i, run="big") for i in range(5)])
    s = spool(tmp_path, max_bytes=len(encode_record(body)) - 1)
    metrics = Metrics()
    answer = Ingest(ServiceConfig(), s, metrics, lambda: True).handle(body, "application/x-protobuf", None)
    assert answer.status == 413
    assert "Retry-After" not in answer.headers
    message = Status.FromString(answer.body).message  # protobuf, as asked
    assert "larger than the whole spool" in message
    assert "spool_max_bytes" in message
    assert metrics.get("rejected", "too_large") == 1
    assert s.pending_rows() == 0


class _RefusesOne(EngineDecoder):
    """The engine decoder, except that it raises for one segment as the engine would for input it cannot
    read (the Protobuf refusals seen so far are re-encoded and read; this stands in for an unknown one)."""

    def __init__(self, work: Path, poison: str) -> None:
        super().__init__(work)
        self.poison = poison

    def insert(self, store: Store, name: str, payloads: list[bytes], **kw: object) -> SegmentResult:
        if name == self.poison:
            raise RuntimeError("Code: 444. DB::Exception: Protobuf messages are corrupted. (UNKNOWN_PROTOBUF_FORMAT)")
        return super().insert(store, name, payloads, **kw)  # type: ignore[arg-type]


def test_a_segment_the_store_refuses_while_up_is_quarantined_and_the_rest_written(
    tmp_path: Path, store_dsn: str, store: Store
) -> None:
    s = spool(tmp_path)
    for run in ("a", "b", "c"):
        s.append(record(run, 4), 4)
        s.seal_now()
    names = sorted(p.stem for p in tmp_path.glob("*.seg"))
    metrics = Metrics()
    writer = StoreWriter(
        s,
        lambda: Store.open(store_dsn),
        metrics,
        Faults(),
        decoder=_RefusesOne(tmp_path / "engine", poison=names[1]),
        quarantine_after=3,
    )
    results = []
    while s.files():
        seg = s.next_sealed(0)
        assert seg is not None
        results.append((seg.name, writer._write(seg)))
    assert results == [(names[0], True), *[(names[1], False)] * 3, (names[2], True)]
    assert store.row_counts()["requests"] == 8
    kept = tmp_path / "quarantine" / f"{names[1]}.seg"
    assert request_ids(read_segment(kept)[0]) == [request(i, run="b").request_id for i in range(4)]
    assert metrics.get("quarantined_segments") == 1
    assert metrics.get("store_errors") == 3
    assert s.bytes == 0
    # a restart does not replay it by itself
    assert spool(tmp_path).files() == 0


def test_a_store_that_is_down_never_quarantines(tmp_path: Path, store_dsn: str) -> None:
    s = spool(tmp_path)
    s.append(record("d", 2), 2)
    s.seal_now()
    seg = s.next_sealed(0)
    assert seg is not None
    faults = Faults(store_down=True)
    writer = StoreWriter(
        s,
        lambda: Store.open(store_dsn),
        Metrics(),
        faults,
        decoder=EngineDecoder(tmp_path / "engine"),
        quarantine_after=2,
    )
    assert not any(writer._write(seg) for _ in range(5))
    assert seg.path.exists()
    assert not (tmp_path / "quarantine").exists()


class _RefusesFor(EngineDecoder):
    """Refuses one segment's content a number of times, then reads it (a refusal that passed)."""

    def __init__(self, work: Path, poison: str, times: int) -> None:
        super().__init__(work)
        self.poison = poison
        self.left = times

    def insert(self, store: Store, name: str, payloads: list[bytes], **kw: object) -> SegmentResult:
        if name == self.poison and self.left > 0:
            self.left -= 1
            raise RuntimeError("Code: 117. DB::Exception: Unexpected data. (INCORRECT_DATA)")
        return super().insert(store, name, payloads, **kw)  # type: ignore[arg-type]


def test_quarantine_is_re_driven_automatically(tmp_path: Path, store_dsn: str, store: Store) -> None:
    s = spool(tmp_path)
    s.append(record("q", 3), 3)
    s.seal_now()
    name = next(tmp_path.glob("*.seg")).stem
    now = [0.0]
    metrics = Metrics()
    writer = StoreWriter(
        s,
        lambda: Store.open(store_dsn),
        metrics,
        Faults(),
        decoder=_RefusesFor(tmp_path / "engine", name, times=2),
        quarantine_after=2,
        clock=lambda: now[0],
    )
    seg = s.next_sealed(0)
    assert seg is not None
    assert not writer._write(seg)
    assert not writer._write(seg)
    assert [p.stem for p in s.quarantined()] == [name]
    writer._redrive_due()
    assert s.files() == 0  # not yet: the first re-drive waits REDRIVE_FIRST_S
    now[0] += 31
    writer._redrive_due()
    assert s.quarantined() == []
    again = s.next_sealed(0)
    assert again is not None
    assert again.name == name
    assert writer._write(again)
    assert store.row_counts()["requests"] == 3
    assert metrics.get("redriven_segments") == 1
    assert not list(tmp_path.glob("*.seg"))
