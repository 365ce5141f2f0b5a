"""A dead process's journal goes only once the rows recovered from it were delivered: a recovering tracker whose
export fails (the service down until it stops) leaves the journal, with the rows it did not deliver, for the next
tracker, and counts them; a row delivered is cleared from the journal, so it is not exported twice. A row the
destination refuses for good (a 400, a row the store cannot hold) is done with, not re-exported on every restart; a
journal carried over too many recoveries, or too old, is given up. A row delivered while its tracker shuts down is
cleared too. Real OTLP exporter over loopback (a service that is down, then one that takes every export) and the real
store exporter."""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from inferensics.collector.host import SdkConfig, delivery, instrument, journal_recovery
from inferensics.collector.host.journal import DELIVERIES, HEARTBEAT_AT, Journal
from inferensics.collector.host.journal_recovery import recover_dead
from inferensics.collector.host.otlp_exporter import OtlpExporter
from inferensics.collector.host.store_exporter import StoreExporter
from inferensics.schema.events import RequestEvent
from inferensics.schema.store import Store
from tests.collector.service.harness import free_port
from tests.loopback import serving
from tests.polling import poll


class _Taking(BaseHTTPRequestHandler):
    """A service that takes every export and keeps the bodies."""

    bodies: ClassVar[list[bytes]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        _Taking.bodies.append(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


@contextmanager
def _taking(port: int, handler: type[BaseHTTPRequestHandler] = _Taking) -> Iterator[None]:
    httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield
    finally:
        httpd.shutdown()
        httpd.server_close()


def _dead_journal(folder: Path, destination: str, in_flight: list[str], finished: int = 0, model: str = "") -> Path:
    """The journal a process killed with ``in_flight`` requests running (and ``finished`` never exported) leaves."""
    live = Journal(folder / "live", {"process": "dead-p", "host": "dead-host", "destination": destination,
                                     "model": model, DELIVERIES: True})  # fmt: skip
    try:
        for i in range(finished):
            live.end(live.begin(f"done-{i}".encode()))
        for rid in in_flight:
            live.begin(rid.encode())
        folder.mkdir(exist_ok=True)
        dead = folder / "1-dead.journal"
        dead.write_bytes(live.path.read_bytes())  # a copy holds no lock: as the file a death leaves
    finally:
        live.close()
    return dead


def _tracker(exporter: Any, journal: Path) -> Any:
    return instrument(exporter=exporter, host="restarted", config=SdkConfig(journal_dir=str(journal)))


def test_rows_recovered_while_the_service_is_down_stay_in_the_journal_for_the_next_tracker(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    journal = tmp_path / "journal"
    dead = _dead_journal(journal, f"service {url}", ["big-1", "side-1"], finished=3)

    # The service is down for all of the first recovering tracker's life: it holds the rows, then stops.
    first = _tracker(OtlpExporter(url, host="h", export_timeout_s=0.3, flush_timeout_s=2.0), journal)
    try:
        assert recover_dead(journal, f"service {url}") == []  # held by the recovering tracker meanwhile
        first.flush()
    finally:
        first.shutdown()
    stats = first.stats()
    assert (stats["dead_processes"], stats["requests_recovered"], stats["requests_lost"]) == (1, 2, 3)
    assert stats["recovered_undelivered"] == 2
    assert dead.exists()  # the rows were never delivered: the journal is still there

    # The next tracker finds the service up: it recovers the same two rows (the loss was counted once, by the
    # first), delivers them, and the journal goes.
    _Taking.bodies = []
    with _taking(port):
        second = _tracker(OtlpExporter(url, host="h", export_timeout_s=2.0, flush_timeout_s=5.0), journal)
        try:
            second.flush()
        finally:
            second.shutdown()
    stats = second.stats()
    assert (stats["dead_processes"], stats["requests_recovered"], stats["requests_lost"]) == (1, 2, 0)
    assert stats["recovered_undelivered"] == 0
    assert not dead.exists()
    assert any(b"big-1" in body for body in _Taking.bodies)
    assert any(b"side-1" in body for body in _Taking.bodies)


def test_a_recovered_row_delivered_is_not_recovered_again(tmp_path: Path) -> None:
    """Of two recovered rows one was delivered when the recovering process stopped (or died): the journal stays with
    the other alone, and its loss, counted by the first reader, reads 0 to the next."""
    journal = tmp_path / "journal"
    dead = _dead_journal(journal, "store a", ["r1", "r2"], finished=4)
    (first,) = recover_dead(journal, "store a")
    assert ([r.request_id for r in first.rows], first.lost) == (["r1", "r2"], 4)
    claim = first.journal
    assert claim is not None
    claim.settled(first.slots[0], delivery.DELIVERED)
    assert claim.release() == 1
    (second,) = recover_dead(journal, "store a")
    assert ([r.request_id for r in second.rows], second.lost) == (["r2"], 0)
    assert second.journal is not None
    second.journal.settled(second.slots[0], delivery.DELIVERED)  # the last row delivered: the journal goes
    assert not dead.exists()
    assert recover_dead(journal, "store a") == []


def _note(settled: list[tuple[str, delivery.Outcome]], rid: str, outcome: delivery.Outcome) -> None:
    settled.append((rid, outcome))


def test_the_store_exporter_settles_a_watched_row_once_inserted_or_not(store: Store) -> None:
    """A row the store cannot hold is refused for good (with the reason): sent again it would be refused again."""
    exporter = StoreExporter(store, host="h")
    settled: list[tuple[str, delivery.Outcome]] = []
    good = RequestEvent(request_id="ok-1", ts=datetime.now(UTC), host="h", model="m", hw_pool="p", traffic_class="t")
    bad = RequestEvent.model_construct(**{**good.model_dump(), "request_id": "bad-\udcff"})  # cannot be written
    for row in (good, bad):
        exporter.delivery_watch.watch(row, functools.partial(_note, settled, row.request_id))
        exporter.export_request(row, ())
    assert settled == []  # buffered: not delivered yet
    exporter.flush()
    assert sorted(rid for rid, _ in settled) == ["bad-\udcff", "ok-1"]
    outcomes = dict(settled)
    assert outcomes["ok-1"] == delivery.DELIVERED
    assert not outcomes["bad-\udcff"].delivered
    assert outcomes["bad-\udcff"].refused.startswith("requests: rejected by the store: ")


class _Answering(BaseHTTPRequestHandler):
    """A service that answers every export with ``status``."""

    status: ClassVar[int] = 200
    bodies: ClassVar[list[bytes]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        _Answering.bodies.append(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        self.send_response(self.status)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.mark.parametrize(("status", "for_good"), [(400, True), (401, False), (503, False)])
def test_a_row_refused_for_good_is_done_with_and_a_refusal_that_may_pass_is_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, status: int, for_good: bool
) -> None:
    """A 400 (a body the service cannot read) would be refused again on every restart: the rows are cleared, counted as
    rejected and logged once with the answer. The token refused (401) or the service shedding load (503) may pass
    later (an operator fixes the token, the load drops): the rows stay for the next tracker."""
    journal = tmp_path / "journal"
    _Answering.status, _Answering.bodies = status, []
    with serving(_Answering) as url:
        dead = _dead_journal(journal, f"service {url}", ["bad-1", "bad-2"])
        with caplog.at_level(logging.ERROR, logger="inferensics.collector.host"):
            tracker = _tracker(OtlpExporter(url, host="h", export_timeout_s=0.5, flush_timeout_s=5.0), journal)
            try:
                tracker.flush()
            finally:
                tracker.shutdown()
    assert any(b"bad-1" in body for body in _Answering.bodies)  # it was sent, and refused
    stats = tracker.stats()
    done = [r.getMessage() for r in caplog.records if "refused for good" in r.getMessage()]
    if for_good:
        assert (stats["recovered_rejected"], stats["recovered_undelivered"]) == (2, 0)
        assert not dead.exists()
        assert recover_dead(journal, f"service {url}") == []
        assert len(done) == 1
        assert "HTTP 400" in done[0]
        assert "recovered_rejected" in done[0]
    else:
        assert (stats["recovered_rejected"], stats["recovered_undelivered"]) == (0, 2)
        assert dead.exists()
        assert done == []


def test_a_recovered_row_the_store_cannot_hold_is_done_with(store: Store, tmp_path: Path) -> None:
    """The dead process's model label holds a lone surrogate: its recovered row can never be written. It is cleared
    from the journal and counted as rejected, not left to fail again on every restart."""
    journal = tmp_path / "journal"
    exporter = StoreExporter(store, host="h")
    dead = _dead_journal(journal, exporter.destination, ["unwritable-1"], model="m\udcff")
    tracker = _tracker(exporter, journal)
    tracker.shutdown()
    stats = tracker.stats()
    assert (stats["recovered_rejected"], stats["recovered_undelivered"], stats["export_rejected_requests"]) == (1, 0, 1)
    assert not dead.exists()


def test_a_journal_carried_over_too_many_recoveries_is_given_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each tracker that reads a journal counts itself in it; after MAX_RECOVERIES trackers could not deliver its rows
    the next one gives them up: removed, counted, one line that says what to do; not exported again."""
    journal = tmp_path / "journal"
    _Answering.status, _Answering.bodies = 200, []
    with serving(_Answering) as url:
        destination = f"service {url}"
        dead = _dead_journal(journal, destination, ["old-1", "old-2"])
        for _ in range(journal_recovery.MAX_RECOVERIES):  # trackers that could not deliver them (the service down)
            (recovered,) = recover_dead(journal, destination)
            assert recovered.journal is not None
            assert recovered.journal.release() == 2
        with caplog.at_level(logging.WARNING, logger="inferensics.collector.host"):
            tracker = _tracker(OtlpExporter(url, host="h", flush_timeout_s=5.0), journal)
            try:
                tracker.flush()
            finally:
                tracker.shutdown()
    stats = tracker.stats()
    assert (stats["recovered_given_up"], stats["requests_recovered"], stats["dead_processes"]) == (2, 0, 1)
    assert not dead.exists()
    assert not any(b"old-1" in body for body in _Answering.bodies)
    lines = [r.getMessage() for r in caplog.records if "given up" in r.getMessage()]
    assert len(lines) == 1
    assert f"{journal_recovery.MAX_RECOVERIES} trackers could not deliver them" in lines[0]
    for said in ("old-1, old-2", "recovered_given_up", destination):
        assert said in lines[0]


def test_the_rows_of_a_process_dead_too_long_ago_are_given_up(tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    dead = _dead_journal(journal, "store a", ["ancient-1"])
    with open(dead, "r+b") as f:  # its last sign of life: longer ago than the limit
        f.seek(HEARTBEAT_AT)
        f.write(struct.pack("<d", time.time() - journal_recovery.GIVE_UP_AFTER_S - 3600))
    # The first reader tries however old the death (a host that was off for a week still sends its rows) ...
    (first,) = recover_dead(journal, "store a")
    assert ([r.request_id for r in first.rows], first.given_up) == (["ancient-1"], [])
    assert first.journal is not None
    assert first.journal.release() == 1  # not delivered: left for the next tracker
    # ... a later one, after that try failed, gives them up.
    (recovered,) = recover_dead(journal, "store a")
    assert (recovered.rows, recovered.given_up, recovered.journal) == ([], ["ancient-1"], None)
    assert "days ago" in recovered.why_given_up
    assert not dead.exists()


def _lock_free(path: Path) -> bool:
    """Whether no one holds ``path``'s lock (a recovering tracker let go of the journal, or it is gone)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


class _Slow(BaseHTTPRequestHandler):
    """A service that takes every export, but answers only once ``go`` is set or the dead journal is let go of."""

    bodies: ClassVar[list[bytes]] = []
    received = threading.Event()
    go = threading.Event()
    journal: ClassVar[Path] = Path()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        _Slow.bodies.append(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        _Slow.received.set()
        while not _Slow.go.wait(0.05) and not _lock_free(_Slow.journal):
            pass
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def test_a_row_delivered_while_its_tracker_shuts_down_is_cleared_not_exported_again(tmp_path: Path) -> None:
    """The service takes the recovered row's export only after the tracker's shutdown gave up waiting for it (a slow
    answer): the journal is let go of only once that post is settled, so the row delivered is cleared from it, and the
    next tracker does not export it a second time (the requests table counts every copy)."""
    journal = tmp_path / "journal"
    _Slow.bodies = []
    _Slow.received.clear()
    _Slow.go.clear()
    with serving(_Slow) as url:
        destination = f"service {url}"
        dead = _dead_journal(journal, destination, ["late-1"])
        _Slow.journal = dead
        exporter = OtlpExporter(url, host="h", export_timeout_s=120.0, flush_timeout_s=0.5)
        tracker = _tracker(exporter, journal)
        tracker.flush()  # the row is being posted; the service holds its answer
        assert _Slow.received.wait(60)
        tracker.shutdown()  # gives up waiting for the answer
        _Slow.go.set()  # the service answers: delivered after the shutdown returned
        exporter._thread.join(60)
        assert not exporter._thread.is_alive()
    assert any(b"late-1" in body for body in _Slow.bodies)
    assert recover_dead(journal, destination) == []  # delivered: not left for the next tracker to export again
    assert not dead.exists()
    stats = tracker.stats()
    assert (stats["recovered_undelivered"], stats["export_spans_sent"] >= 1) == (0, True)


def test_a_held_batch_the_service_takes_while_the_exporter_stops_is_delivered_not_refused(tmp_path: Path) -> None:
    """A batch held while the service was down is posted again as the exporter stops, and the service answers only
    after the shutdown gave up waiting: the batch is left to that post, so its row is settled delivered (and counted
    sent), not refused as held at the exit while the service took it (its journal would then export it again)."""
    port = free_port()
    exporter = OtlpExporter(f"http://127.0.0.1:{port}", host="h", export_timeout_s=10.0, flush_timeout_s=0.5)
    outcomes: list[delivery.Outcome] = []
    row = RequestEvent(request_id="held-1", ts=datetime.now(UTC), host="h", model="m", hw_pool="p", traffic_class="t")
    exporter.delivery_watch.watch(row, outcomes.append)
    exporter.export_request(row, ())
    assert poll(lambda: exporter.stats()["export_spans_held"], lambda n: n == 1, timeout=60) == 1  # the service down
    locked = tmp_path / "locked"
    fd = os.open(locked, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # the slow service answers on go alone
    _Slow.bodies, _Slow.journal = [], locked
    _Slow.received.clear()
    _Slow.go.clear()
    try:
        with _taking(port, _Slow):
            assert _Slow.received.wait(60)  # the held batch is being posted again
            exporter.shutdown()  # gives up waiting for the answer
            assert outcomes == []  # left to the post under way
            _Slow.go.set()
            exporter._thread.join(60)
            assert not exporter._thread.is_alive()
    finally:
        os.close(fd)
    assert outcomes == [delivery.DELIVERED]
    stats = exporter.stats()
    assert (stats["export_spans_sent"], stats["export_refused_down"], stats["export_spans_held"]) == (1, 0, 0)
