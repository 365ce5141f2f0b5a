"""Direct-to-store export for single-process use and tests: batched Arrow inserts, blobs via ``put_blob``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from inferensics.schema.events import RequestEvent
from inferensics.schema.store import Store
from inferensics.schema.table import Event


class StoreExporter:
    """Buffers records per table and inserts a batch when ``batch_rows`` is reached or on flush."""

    def __init__(self, store: Store, *, host: str = "", batch_rows: int = 10_000) -> None:
        self.store = store
        self.host = host
        self.batch_rows = batch_rows
        self._buffers: dict[type[Event], list[Event]] = {}
        self.inserted = 0

    def _add(self, record: Event) -> None:
        buf = self._buffers.setdefault(type(record), [])
        buf.append(record)
        if len(buf) >= self.batch_rows:
            self._insert(type(record))

    def _insert(self, model: type[Event]) -> None:
        rows = self._buffers.pop(model, [])
        if rows:
            self.inserted += self.store.insert_events(rows)

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
        """Flush; the store stays open (its owner closes it)."""
        self.flush()
