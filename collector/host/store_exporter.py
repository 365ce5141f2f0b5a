"""Direct-to-store export for single-process use and tests: batched Arrow inserts, blobs via ``put_blob``.

A batch that the store refuses because of some of its rows keeps the rest: the rows that cannot be
written are dropped, counted per table in :attr:`StoreExporter.rejected` and named in
:attr:`StoreExporter.last_error`; the others are inserted.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from inferensics.collector.host.delivery import DELIVERED, NOT_DELIVERED, DeliveryWatch, Outcome, settle
from inferensics.schema.arrow import events_to_arrow
from inferensics.schema.events import RequestEvent
from inferensics.schema.store import Store
from inferensics.schema.table import Event

_log = logging.getLogger(__name__)


class StoreExporter:
    """Buffers records per table and inserts a batch when ``batch_rows`` is reached or on flush."""

    def __init__(self, store: Store, *, host: str = "", batch_rows: int = 10_000) -> None:
        """An empty store (a fresh ``chdb:///dir``) is created at the latest schema, as ``inferensics init``
        would: without tables every insert would fail."""
        self.store = store
        self.destination = f"store {store.dsn}"  # where a dead process's recovered rows go (crash journal)
        try:
            store.create_if_empty()
        except Exception as exc:  # the inserts then fail and are counted; say once why and what to do
            _log.warning(
                "inferensics: could not create the store's tables (%s: %s); run `inferensics init --dsn DSN`",
                type(exc).__name__,
                " ".join(str(exc).split())[:300],
            )
        self.host = host
        self.batch_rows = batch_rows
        self._buffers: dict[type[Event], list[Event]] = {}
        self.inserted = 0
        self.rejected: Counter[str] = Counter()
        """Rows dropped because they cannot be written, per table."""
        self.last_error = ""
        """Why the last rejected row was dropped: table, row, error."""
        self.on_requests_delivered: Callable[[int], None] | None = None
        """Called with the number of request rows each insert wrote (the tracker counts them in its crash journal,
        :mod:`inferensics.collector.host.journal`)."""
        self._why: dict[int, str] = {}  # why each row of the batch being inserted cannot be written (by identity)
        self.delivery_watch = DeliveryWatch()
        """Request rows whose delivery is waited on (a dead process's recovered rows): each is settled once, inserted
        or not (:mod:`inferensics.collector.host.delivery`)."""

    def _add(self, record: Event) -> None:
        buf = self._buffers.setdefault(type(record), [])
        buf.append(record)
        if len(buf) >= self.batch_rows:
            self._insert(type(record))

    def _insert(self, model: type[Event]) -> None:
        rows = self._buffers.pop(model, [])
        if not rows:
            return
        watch = self.delivery_watch if model is RequestEvent else None
        try:
            try:
                self.inserted += self.store.insert_events(rows)
            except Exception as exc:
                good = self._drop_unwritable(model, rows)
                if len(good) == len(rows):
                    raise  # every row converts: the store refused the batch itself (unreachable, not migrated)
                _log.debug("%s: batch of %d refused (%s); retrying without the bad rows", model.TABLE.name, len(rows),
                           exc)  # fmt: skip
                if watch is not None:  # the rows that cannot be written are refused for good: they never will be
                    kept = {id(row) for row in good}
                    for row in rows:
                        if id(row) not in kept:
                            settle(watch.take([row]), Outcome(False, self._why.get(id(row), "cannot be written")))
                self._why.clear()
                if good:
                    self.inserted += self.store.insert_events(good)
                rows = good
        except BaseException:
            self._why.clear()
            if watch is not None:  # the store refused the batch (unreachable, not migrated): a later try may pass
                settle(watch.take(rows), NOT_DELIVERED)
            raise
        if watch is not None:
            settle(watch.take(rows), DELIVERED)
        if model is RequestEvent and rows and self.on_requests_delivered is not None:
            self.on_requests_delivered(len(rows))

    def _drop_unwritable(self, model: type[Event], rows: list[Event]) -> list[Event]:
        """The rows that convert to the table's Arrow schema; the others are counted and dropped.

        Pydantic validation does not bound every column (an unsigned column given a negative or too large
        int, a string holding a lone surrogate), so a validated row can still fail the conversion that
        every insert starts with. Halves are converted recursively: a few bad rows in a large batch cost
        about two conversions of the batch, never a store round trip.
        """
        try:
            events_to_arrow(model, rows)
            return rows
        except Exception as exc:
            if len(rows) == 1:
                self._reject(model, rows[0], exc)
                return []
        mid = len(rows) // 2
        return self._drop_unwritable(model, rows[:mid]) + self._drop_unwritable(model, rows[mid:])

    def _reject(self, model: type[Event], row: Event, exc: Exception) -> None:
        table = model.TABLE.name
        if not self.rejected:
            _log.warning("%s: a row cannot be written and is dropped (%s); see StoreExporter.rejected", table, exc)
        self.rejected[table] += 1
        request_id = getattr(row, "request_id", "")
        which = f" (request {request_id})" if request_id else ""
        self.last_error = f"{table}: row{which} rejected: {type(exc).__name__}: {exc}"
        self._why[id(row)] = f"{table}: rejected by the store: {type(exc).__name__}: {exc}"[:500]

    def export_request(self, request: RequestEvent, children: Sequence[Event]) -> None:
        """Buffer the request row and its sub-records."""
        self._add(request)
        for child in children:
            self._add(child)

    def export_records(self, records: Sequence[Event]) -> None:
        """Buffer standalone records."""
        for r in records:
            self._add(r)

    def put_blob(self, data: bytes, kind: str, attrs: Mapping[str, str]) -> str:
        """Store the blob once under its sha256."""
        return self.store.put_blob(data, kind, host=self.host, attrs=attrs)

    def flush(self) -> None:
        """Insert every buffered batch."""
        for model in list(self._buffers):
            self._insert(model)

    def shutdown(self) -> None:
        """Flush; the store stays open (its owner closes it). A watched row not inserted by then was not delivered."""
        try:
            self.flush()
        finally:
            settle(self.delivery_watch.take_all(), NOT_DELIVERED)
