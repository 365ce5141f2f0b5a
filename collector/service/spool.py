"""The durable spool: raw OTLP requests are fsynced here before a sender is acknowledged.

Each accepted request becomes one framed record (its ``ExportTraceServiceRequest`` protobuf bytes)
appended to the open *segment* file; concurrent requests share an fsync (group commit). A segment is
sealed when it reaches the span, byte or age limit, and a sealed segment is decoded by the engine and
inserted as exactly one batch per table, its deduplication token ``<segment name>:<table>``. The writer
deletes a segment only after every table of it is in the store. On restart every segment file left is
replayed with the same tokens, so a batch that reached the store before a crash is dropped by the engine
instead of counted twice.

Record frame: ``b"INFS"``, payload length (u32), CRC-32 of the payload (u32), payload (the protobuf). A
torn record at a segment's tail (a crash mid-append, never acknowledged) ends the read of that segment.
"""

from __future__ import annotations

import os
import struct
import threading
import time
import uuid
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

MAGIC: Final = b"INFS"
_HEADER: Final = struct.Struct("<4sII")
RECORD_OVERHEAD: Final = _HEADER.size
"""Bytes a record's frame adds to its payload."""
SUFFIX: Final = ".seg"
QUARANTINE: Final = "quarantine"
"""Folder (inside the spool directory) of segments the store refused while it answered (see the writer)."""


class SpoolFullError(RuntimeError):
    """The spool is at its cap; the sender should retry later."""


@dataclass
class Segment:
    """One spool file: an insert batch in the making (open) or waiting for the store (sealed)."""

    path: Path
    recovered: bool = False
    rows: int = 0
    size: int = 0
    created: float = 0.0
    attempts: int = 0
    refused: int = 0
    """Failed inserts in a row while the store answered (the writer quarantines the segment at a limit)."""
    fd: int = -1
    synced: int = 0
    sync_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def name(self) -> str:
        """The segment's name, the stem of its dedup tokens."""
        return self.path.stem


def encode_record(payload: bytes) -> bytes:
    """Frame one request's protobuf bytes as a spool record."""
    return _HEADER.pack(MAGIC, len(payload), zlib.crc32(payload)) + payload


def read_segment(path: Path) -> tuple[list[bytes], bool]:
    """Every complete record's payload of a segment, in order; the flag says the tail was torn."""
    data = path.read_bytes()
    payloads: list[bytes] = []
    pos, torn = 0, False
    while pos < len(data):
        if pos + _HEADER.size > len(data):
            torn = True
            break
        magic, length, crc = _HEADER.unpack_from(data, pos)
        start, end = pos + _HEADER.size, pos + _HEADER.size + length
        if magic != MAGIC or end > len(data) or zlib.crc32(data[start:end]) != crc:
            torn = True
            break
        payloads.append(data[start:end])
        pos = end
    return payloads, torn


class Spool:
    """Append-and-fsync spool of segments with a byte cap.

    Args:
        directory: Where segment files live (created if missing).
        max_bytes: Cap on all segment bytes; :meth:`append` raises :class:`SpoolFullError` beyond it.
        seal_rows: Spans that seal the open segment.
        seal_bytes: Bytes that seal the open segment.
        seal_age_s: Age in seconds that seals the open segment (checked by :meth:`seal_if_due`).
        clock: Monotonic clock (tests inject one).
    """

    def __init__(
        self,
        directory: Path,
        *,
        max_bytes: int,
        seal_rows: int,
        seal_bytes: int,
        seal_age_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.seal_rows = seal_rows
        self.seal_bytes = seal_bytes
        self.seal_age_s = seal_age_s
        self._clock = clock
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._sealed: deque[Segment] = deque()
        self._in_flight: Segment | None = None
        self._current: Segment | None = None
        self._bytes = 0
        self._boot = uuid.uuid4().hex[:12]
        self._seq = 0
        directory.mkdir(parents=True, exist_ok=True)
        self._recover()

    def _recover(self) -> None:
        for path in sorted(self.directory.glob(f"*{SUFFIX}")):
            size = path.stat().st_size
            if size == 0:
                path.unlink()
                continue
            self._sealed.append(Segment(path, recovered=True, size=size))
            self._bytes += size
            self._seq = max(self._seq, _seq_of(path) + 1)

    # --- the ingest side ------------------------------------------------------------------------------

    def append(self, record: bytes, rows: int) -> None:
        """Append one framed record of ``rows`` spans and return once it is fsynced (the acknowledgement point).

        Spans, not rows, size a segment: the rows they decode into are known only when the engine reads them.

        Raises:
            SpoolFullError: the record would take the spool past its cap.
        """
        with self._lock:
            self.check_room(len(record))
            seg = self._current or self._open_segment()
            view = memoryview(record)
            while view:
                view = view[os.write(seg.fd, view) :]
            seg.size += len(record)
            seg.rows += rows
            self._bytes += len(record)
            end = seg.size
            if seg.rows >= self.seal_rows or seg.size >= self.seal_bytes:
                self._seal_locked()
        self._sync(seg, end)

    def _open_segment(self) -> Segment:
        path = self.directory / f"{self._seq:012d}-{self._boot}{SUFFIX}"
        self._seq += 1
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        _fsync_dir(self.directory)  # the new name itself must survive a crash
        seg = Segment(path, created=self._clock(), fd=fd)
        self._current = seg
        return seg

    @staticmethod
    def _sync(seg: Segment, end: int) -> None:
        with seg.sync_lock:
            if seg.synced >= end:
                return  # another request's fsync (or the seal) covered this record
            target = seg.size
            os.fsync(seg.fd)
            seg.synced = target

    def _seal_locked(self) -> None:
        seg = self._current
        if seg is None:
            return
        self._current = None
        with seg.sync_lock:
            os.fsync(seg.fd)
            seg.synced = seg.size
            os.close(seg.fd)
            seg.fd = -1
        self._sealed.append(seg)
        self._ready.notify_all()

    def seal_if_due(self) -> None:
        """Seal the open segment when it is older than the age limit."""
        with self._lock:
            if self._current is not None and self._clock() - self._current.created >= self.seal_age_s:
                self._seal_locked()

    def seal_now(self) -> None:
        """Seal the open segment regardless of its age (shutdown, tests)."""
        with self._lock:
            self._seal_locked()

    # --- the writer side ------------------------------------------------------------------------------

    def next_sealed(self, timeout: float) -> Segment | None:
        """The oldest sealed segment, waiting up to ``timeout`` seconds; it stays spooled until removed."""
        with self._lock:
            if not self._sealed:
                self._ready.wait(timeout)
            if not self._sealed:
                return None
            self._in_flight = self._sealed[0]
            return self._in_flight

    def remove(self, seg: Segment) -> None:
        """Delete a segment whose rows are all in the store."""
        seg.path.unlink(missing_ok=True)
        self._forget(seg)

    def quarantine(self, seg: Segment) -> Path:
        """Move a sealed segment the store keeps refusing into :data:`QUARANTINE` beside the spool (kept,
        never replayed by itself, out of the cap) so that the segments behind it are written; returns its path."""
        folder = self.directory / QUARANTINE
        folder.mkdir(exist_ok=True)
        target = folder / seg.path.name
        seg.path.rename(target)
        _fsync_dir(folder)
        _fsync_dir(self.directory)
        self._forget(seg)
        return target

    def _forget(self, seg: Segment) -> None:
        """Take a segment that left the spool directory out of the queue and the byte count."""
        with self._lock:
            if self._sealed and self._sealed[0] is seg:
                self._sealed.popleft()
            self._bytes -= seg.size
            self._in_flight = None

    # --- status -------------------------------------------------------------------------------------

    def check_room(self, record_bytes: int) -> None:
        """Raise :class:`SpoolFullError` when a record of ``record_bytes`` would take the spool past its cap
        (without the lock a hint: :meth:`append` checks again under it)."""
        if self._bytes + record_bytes > self.max_bytes:
            raise SpoolFullError(f"spool at its cap ({self._bytes} of {self.max_bytes} bytes)")

    @property
    def bytes(self) -> int:
        """Bytes in all segment files."""
        return self._bytes

    def files(self) -> int:
        """Number of segment files (sealed and open)."""
        with self._lock:
            return len(self._sealed) + (1 if self._current is not None else 0)

    def pending_rows(self) -> int:
        """Rows known to wait in the spool (recovered segments count once read)."""
        with self._lock:
            return sum(s.rows for s in self._sealed) + (self._current.rows if self._current else 0)

    def close(self) -> None:
        """Seal the open segment so its rows are replayed on the next start."""
        self.seal_now()


def _seq_of(path: Path) -> int:
    head = path.stem.split("-", 1)[0]
    return int(head) if head.isdigit() else 0


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
