"""What the background thread hands finished records to: the exporter protocol and the null exporter.

An exporter may also have an ``on_requests_delivered`` attribute (``None`` until the tracker sets it): it calls it
with the number of request rows each write delivered, as the store and OTLP exporters do. The tracker then counts
them in its crash journal, and a process killed before it exported everything (SIGKILL, the out-of-memory killer)
tells the next tracker how many finished requests it lost (``stats()['requests_lost']``).

It may also have a ``delivery_watch`` (:class:`~inferensics.collector.host.delivery.DeliveryWatch`), settling each
watched request row once, delivered or not, as the store and OTLP exporters do: a dead process's crash journal is then
removed only once the rows recovered from it were delivered. Without one, the journal goes as its rows are queued."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from inferensics.schema.events import RequestEvent
from inferensics.schema.table import Event


class Exporter(Protocol):
    """Receives finished records on the SDK's background thread (never on the serving path)."""

    def export_request(self, request: RequestEvent, children: Sequence[Event]) -> None:
        """One request record with its sub-records (recompiles, graph breaks, cache lookups, timings)."""

    def export_records(self, records: Sequence[Event]) -> None:
        """Records that belong to no request span (compiles, kernel inventory, orphan sub-records)."""

    def put_blob(self, data: bytes, kind: str, attrs: Mapping[str, str]) -> str:
        """Store a content-addressed blob; returns its sha256."""

    def flush(self) -> None:
        """Push out anything buffered."""

    def shutdown(self) -> None:
        """Flush and release resources."""


class NullExporter:
    """Counts and discards; for overhead measurement and hosts that only want the hooks."""

    def __init__(self) -> None:
        self.requests = 0
        self.records = 0
        self.blobs = 0

    def export_request(self, request: RequestEvent, children: Sequence[Event]) -> None:
        """Count the request."""
        self.requests += 1
        self.records += len(children)

    def export_records(self, records: Sequence[Event]) -> None:
        """Count the records."""
        self.records += len(records)

    def put_blob(self, data: bytes, kind: str, attrs: Mapping[str, str]) -> str:
        """Count the blob and return its digest."""
        import hashlib

        self.blobs += 1
        return hashlib.sha256(data).hexdigest()

    def flush(self) -> None:
        """Nothing buffered."""

    def shutdown(self) -> None:
        """Nothing to release."""
