"""OTLP export: one ``inferensics.requests`` span per request, sub-records as its span events, compiles
and kernel inventory as small spans of their own (contract: :mod:`inferensics.schema.otlp`).

The wire is the standard one, OTLP/HTTP protobuf, so an OpenTelemetry Collector can sit in between; the
bytes are the message OpenTelemetry's own encoder makes of the same spans. Records wait in a bounded queue
and leave in batches on this exporter's own thread: each batch written as one ``ExportTraceServiceRequest``
(:mod:`~inferensics.collector.host.otlp_wire`) and POSTed with OpenTelemetry's exporter's retries and
settings (:mod:`~inferensics.collector.host.otlp_poster`). Blobs go through
:class:`~inferensics.collector.host.blob_sender.BlobSender`. What the service refuses is counted by cause
in :class:`~inferensics.collector.host.export_health.ExportHealth` (``health``); ``flush`` is bounded, and a
full queue drops, counts and says so. While the service cannot be reached (a collector restarting, a deploy),
encoded batches are held, up to ``hold_bytes``, and sent first once it answers again: only what outgrows that
is dropped, and counted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from inferensics.collector.host.blob_sender import BlobSender
from inferensics.collector.host.delivery import DELIVERED, NOT_DELIVERED, DeliveryWatch, Outcome, Settled, settle
from inferensics.collector.host.export_health import HELD_AT_EXIT, SPAN_NOT_BUILT, ExportHealth, refused_for_good
from inferensics.collector.host.otlp_poster import OtlpPoster
from inferensics.collector.host.otlp_spans import SCOPE_NAME, host_resource
from inferensics.collector.host.otlp_wire import Item, TraceRequestEncoder
from inferensics.schema.events import RequestEvent
from inferensics.schema.table import Event

log = logging.getLogger("inferensics.collector.host")

HOLD_BYTES: Final = 64 * 1024 * 1024
"""Encoded span batches held at most while the service is unreachable (minutes of a busy host's records)."""
RETRY_HELD_S: Final = 2.0
"""Seconds between tries of the held batches while the service stays unreachable."""


class OtlpExporter:
    """Spans over OTLP/HTTP to ``{service_url}/v1/traces``, blobs to the service's blob API.

    Records queue (at most ``max_queue_size``) and leave in batches of up to ``max_batch_size`` spans,
    every ``schedule_delay_ms`` or as soon as a batch is full. ``export_timeout_s`` bounds one batch's
    export with its retries; ``flush_timeout_s`` bounds ``flush`` (a service that is down costs the caller
    of ``flush`` at most that, never the serving path).
    """

    def __init__(
        self,
        service_url: str,
        *,
        host: str,
        token: str | None = None,
        max_queue_size: int = 8192,
        max_batch_size: int = 2048,
        schedule_delay_ms: int = 1000,
        export_timeout_s: float = 2.0,
        flush_timeout_s: float = 3.0,
        hold_bytes: int = HOLD_BYTES,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self.health = ExportHealth(service_url)
        self.destination = f"service {service_url}"  # where a dead process's recovered rows go (crash journal)
        self.flush_timeout_s = flush_timeout_s
        self.max_queue_size = max_queue_size
        self.max_batch_size = max(1, max_batch_size)
        self.schedule_delay_s = schedule_delay_ms / 1000
        self.export_timeout_s = export_timeout_s
        self.spans_started = 0
        self.spans_dropped = 0  # the queue was full
        self.span_errors = 0  # a record that could not be made into a span (counted, never raised)
        self.attribute_errors = 0  # attributes left out of their span: a value OTLP cannot carry
        self.poster = OtlpPoster(f"{service_url.rstrip('/')}/v1/traces", headers=headers, timeout_s=export_timeout_s)
        self.resource = host_resource(host)
        self.encoder = TraceRequestEncoder(self.resource.attributes, SCOPE_NAME, self.resource.schema_url)
        self.blobs = BlobSender(service_url, token, health=self.health)
        self._queue: deque[Item] = deque()
        self.hold_bytes = hold_bytes
        # (encoded batch, spans, request spans among them, their watched rows' watchers): the service was unreachable
        self._held: deque[tuple[bytes, int, int, list[Settled]]] = deque()
        self._held_bytes = 0
        self._held_spans = 0
        self._held_lock = threading.Lock()  # shutdown settles what is held while the thread may still hold more
        self._posting: tuple[bytes, int, int, list[Settled]] | None = None  # the held batch being posted again
        self._retry_at = 0.0  # monotonic time of the next try of the held batches
        self._held_passes = 0  # tries of the held batches so far (a flush waits for one)
        self._settled = 0  # items taken from the queue and exported (or refused, or failed)
        self._settled_cond = threading.Condition()
        self._wake = threading.Event()
        self._stopping = False
        self._end_lock = threading.Lock()
        self._shut_down = False  # shutdown() returned
        self._thread_ended = False
        self._span_error_detail = ""
        self.on_requests_delivered: Callable[[int], None] | None = None
        """Called (on the export thread) with the number of request spans each batch the service took carried (the
        tracker counts them in its crash journal, :mod:`inferensics.collector.host.journal`)."""
        self.delivery_watch = DeliveryWatch()
        """Request rows whose delivery is waited on (a dead process's recovered rows): each is settled once, delivered
        or not (:mod:`inferensics.collector.host.delivery`)."""
        self._thread = threading.Thread(target=self._run, name="inferensics-otlp-export", daemon=True)
        self._thread.start()

    # --- the SDK's side (its background thread) ------------------------------------------------------

    def export_request(self, request: RequestEvent, children: Sequence[Event]) -> None:
        """One span for the request; each child is a span event named after its table."""
        self._put((request, tuple(children)))

    def export_records(self, records: Sequence[Event]) -> None:
        """One small span per record."""
        for record in records:
            self._put((record, None))

    def _put(self, item: Item) -> None:
        self.spans_started += 1
        queue = self._queue
        if len(queue) >= self.max_queue_size:
            self.spans_dropped += 1
            if self.spans_dropped == 1:
                log.error(
                    "inferensics: the span export queue is full (%d records): records are being dropped. "
                    "The export cannot keep up with this host's requests; check the collector service's "
                    "health, or export less (sample_rate, capture).",
                    self.max_queue_size,
                )
            return
        queue.append(item)
        if len(queue) >= self.max_batch_size and not self._wake.is_set():
            self._wake.set()

    # --- the export thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while True:
                self._wake.wait(self.schedule_delay_s)
                self._wake.clear()
                stopping = self._stopping
                if self._held and (stopping or time.monotonic() >= self._retry_at):
                    self._send_held()
                self._export_queued()
                if stopping:
                    return
        finally:
            with self._end_lock:
                self._thread_ended = True
                late = self._shut_down
            if late:  # it outlived shutdown() (a post under way): what it did not deliver is settled now
                self._settle_rest()

    def _export_queued(self) -> None:
        queue, size = self._queue, self.max_batch_size
        while queue:
            items = [queue.popleft() for _ in range(min(size, len(queue)))]
            try:
                self.export_batch(items)
            except Exception as exc:  # a bug: counted with its records, never raised on this thread
                self.health.refuse("rejected", "spans", len(items), f"{type(exc).__name__}: {exc}")
            with self._settled_cond:
                self._settled += len(items)
                self._settled_cond.notify_all()

    def export_batch(self, items: Sequence[Item]) -> None:
        """Encode the records as one request and POST it; the spans delivered or refused (by cause) are
        counted, a record that could not be encoded too."""
        failed: list[int] = []
        body, n = self.encoder.encode(items, self._span_error, self._attribute_error, failed)
        if failed:  # a record that is no span is not delivered: neither counted so nor told so to its watcher
            refused = Outcome(False, self._span_error_detail)  # for good: it would fail again
            settle(self.delivery_watch.take(items[i][0] for i in failed), refused)
            gone = set(failed)
            items = [item for i, item in enumerate(items) if i not in gone]
        watchers = self.delivery_watch.take(record for record, _ in items)
        if not n:
            return
        requests = sum([children is not None for _, children in items])  # a request's span carries its sub-records
        if self._held:  # behind batches held in an outage: in their order, and not tried while it lasts
            self._hold(body, n, requests, "the service was unreachable at the last try", watchers)
            return
        self._deliver(body, n, requests, watchers)

    def _deliver(self, body: bytes, n: int, requests: int, watchers: list[Settled]) -> bool:
        """POST one batch (``n`` spans, ``requests`` of them requests'); held when the service cannot be reached,
        else counted delivered or refused by cause. Whether the service answered."""
        cause, detail = self.poster.post(body)
        if cause == "down":
            self._hold(body, n, requests, detail, watchers)
            return False
        if cause:
            self.health.refuse(cause, "spans", n, detail)
            settle(watchers, _refusal(cause, detail))
        else:
            self.health.delivered("spans", n)
            self._requests_delivered(requests)
            settle(watchers, DELIVERED)
        return True

    def _requests_delivered(self, requests: int) -> None:
        listener = self.on_requests_delivered
        if requests and listener is not None:
            listener(requests)

    def _hold(self, body: bytes, n: int, requests: int, detail: str, watchers: list[Settled]) -> None:
        """Keep a batch the service could not take for the next try; beyond ``hold_bytes`` the oldest held are
        dropped and counted as refused (``down``)."""
        dropped = 0
        undelivered: list[Settled] = []
        with self._held_lock:
            self._held.append((body, n, requests, watchers))
            self._held_bytes += len(body)
            self._held_spans += n
            while self._held_bytes > self.hold_bytes and len(self._held) > 1:
                old, k, _, gone = self._held.popleft()
                undelivered += gone
                self._held_bytes -= len(old)
                self._held_spans -= k
                dropped += k
            if self._retry_at <= time.monotonic():
                self._retry_at = time.monotonic() + RETRY_HELD_S
        self.health.held("spans", n, detail, f"up to {self.hold_bytes // (1024 * 1024)} MiB of spans")
        if dropped:
            self.health.refuse("down", "spans", dropped, f"held longer than {self.hold_bytes} bytes allow")
            settle(undelivered, NOT_DELIVERED)

    def _send_held(self) -> None:
        """Try the held batches, oldest first, until one finds the service still unreachable."""
        try:
            self._try_held()
        finally:
            with self._settled_cond:
                self._held_passes += 1
                self._settled_cond.notify_all()

    def _try_held(self) -> None:
        # The batch stays held (and counted so) while it is posted: stats() never sees it in neither place. A shutdown
        # meanwhile leaves it to this post (_settle_held): the service may take it yet.
        while True:
            with self._held_lock:
                if not self._held:
                    return
                item = self._posting = self._held[0]
            cause, detail = self.poster.post(item[0])  # never raises
            with self._held_lock:
                self._posting = None
                if cause == "down":
                    self._retry_at = time.monotonic() + RETRY_HELD_S
                    return
                if not self._held or self._held[0] is not item:  # settled meanwhile (never while it is posted)
                    return
                self._held.popleft()
                self._held_bytes -= len(item[0])
                self._held_spans -= item[1]
            if cause:
                self.health.refuse(cause, "spans", item[1], detail)
                settle(item[3], _refusal(cause, detail))
            else:
                self.health.delivered("spans", item[1])
                self._requests_delivered(item[2])
                settle(item[3], DELIVERED)

    def _settle_held(self, why: str) -> None:
        """Count what is still held as refused (``down``): the exporter stops. A batch being posted is left to its
        post (the thread settles it when the service answers, or when it ends)."""
        with self._held_lock:
            posting = self._posting
            gone = [held for held in self._held if held is not posting]
            self._held = deque(held for held in self._held if held is posting)
            n = sum(held[1] for held in gone)
            self._held_spans -= n
            self._held_bytes -= sum(len(held[0]) for held in gone)
        if n:
            self.health.refuse("down", "spans", n, why)
        settle([w for held in gone for w in held[3]], NOT_DELIVERED)

    def _span_error(self, exc: Exception) -> None:
        """A record that could not be made into a span (times OTLP cannot carry, or a bug): never raised, never
        delivered; counted as refused (``rejected``: ``export_refused_rejected``, and apart as ``export_span_errors``),
        its reason in ``health.last_error`` and, the first time, in the log."""
        self.span_errors += 1
        self._span_error_detail = f"{SPAN_NOT_BUILT}: {type(exc).__name__}: {exc}"[:500]
        self.health.not_encoded("spans", 1, self._span_error_detail)

    def _attribute_error(self, key: str, exc: Exception) -> None:
        """An attribute left out of its span (a value OTLP cannot carry): counted, the first one logged."""
        self.attribute_errors += 1
        if self.attribute_errors == 1:
            log.error(
                "inferensics: attribute %s left out of its span, its value cannot travel as OTLP (%s: %s); "
                "the row gets the column's default. Counted in stats() as export_attributes_dropped.",
                key,
                type(exc).__name__,
                str(exc)[:200],
            )

    # --- control -------------------------------------------------------------------------------------

    def put_blob(self, data: bytes, kind: str, attrs: Mapping[str, str]) -> str:
        """Queue for upload through the blob API (on the blob sender's own thread); the blob's digest."""
        return self.blobs.put_blob(data, kind, attrs)

    def flush(self) -> None:
        """Export everything queued so far, spans and blobs, waiting at most ``flush_timeout_s`` in all."""
        deadline = time.monotonic() + self.flush_timeout_s
        self.blobs.retry_now()
        self.wait_exported(self.flush_timeout_s)
        self.blobs.wait_sent(max(deadline - time.monotonic(), 0.0))

    def wait_exported(self, timeout_s: float) -> bool:
        """Export everything queued so far, waiting at most ``timeout_s`` (batches held in an outage are tried
        once more); whether it all went out (delivered, refused or held) in time."""
        target = self.spans_started - self.spans_dropped  # every item queued so far
        passes = self._held_passes + 1 if self._held else 0  # and one more try of what an outage held
        self._retry_at = 0.0
        self._wake.set()
        deadline = time.monotonic() + timeout_s
        with self._settled_cond:
            while self._settled < target or self._held_passes < passes:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._settled_cond.wait(left)
        return True

    def stats(self) -> dict[str, int]:
        """Deliveries and refusals by cause; ``export_spans_dropped``: records the full queue turned away;
        ``export_span_errors``: records that could not be made into spans (also in ``export_refused_rejected``, the
        reason in ``health.last_error``); ``export_spans_held`` and
        ``blobs_held``: spans and blobs held while the service is unreachable, sent when it answers again;
        ``export_attributes_dropped``: attributes left out of their spans (values OTLP cannot carry);
        ``export_spans_unaccounted``: spans started but neither delivered, refused, held nor failed (still queued,
        or dropped)."""
        out = self.health.stats()
        settled = out["export_spans_sent"] + sum(v for k, v in out.items() if k.startswith("export_refused_"))
        out["export_spans_dropped"] = self.spans_dropped
        out["export_span_errors"] = self.span_errors
        out["export_attributes_dropped"] = self.attribute_errors
        out["export_spans_held"] = held = self._held_spans
        out["blobs_held"] = self.blobs.held
        # a record that could not become a span is among the refused (rejected)
        out["export_spans_unaccounted"] = max(0, self.spans_started - settled - held)
        return out

    def shutdown(self) -> None:
        """Export what is queued and stop the export thread, waiting at most ``flush_timeout_s``; then
        close the poster (which cuts short a retry still under way: what it held is counted as refused), and
        stop the blob uploads within the same time (blobs still waiting are counted as refused). Every watched row
        (``delivery_watch``) is settled by the time it returns, or, where a post is still under way
        (:attr:`delivering`), by the time the thread ends."""
        deadline = time.monotonic() + self.flush_timeout_s
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=self.flush_timeout_s)
        self.poster.shutdown()
        self._thread.join(timeout=0.5)  # a post the poster's shutdown cut short returns at once
        self._settle_held(HELD_AT_EXIT)
        with self._end_lock:
            self._shut_down = True
            ended = self._thread_ended
        if ended:
            self._settle_rest()
        self.blobs.shutdown(max(deadline - time.monotonic(), 0.0))

    @property
    def delivering(self) -> bool:
        """The export thread outlived :meth:`shutdown` (a post still under way, which the service may yet take): it
        settles each watched row when its post ends, and every row it did not deliver (``delivery_watch``) when the
        thread ends. Until then a dead process's journal stays held (:mod:`~.tracker_journal`)."""
        with self._end_lock:
            return self._shut_down and not self._thread_ended

    def _settle_rest(self) -> None:
        """The exporter stopped and its thread ended: what is still held is refused (``down``), and every watched row
        not settled yet (queued too late, never exported) was not delivered."""
        self._settle_held(HELD_AT_EXIT)
        settle(self.delivery_watch.take_all(), NOT_DELIVERED)


def _refusal(cause: str, detail: str) -> Outcome:
    """A refused batch's watched rows: refused for good (with the service's answer) or to be tried later."""
    return Outcome(False, detail) if refused_for_good(cause, detail) else NOT_DELIVERED
