"""The durable spool: raw OTLP requests are fsynced here before a sender is acknowledged.

Each accepted request becomes one framed record (its ``ExportTraceServiceRequest`` protobuf bytes)
appended to the open *segment* file; concurrent requests share an fsync (group commit). A segment is
sealed when it reaches the span, byte or age limit, and a sealed segment is decoded by the engine and
inserted as exactly one batch per table, its deduplication token ``<segment name>:<table>``. The writer
deletes a segment only after every table of it is in the store. On restart every segment file left is
replayed with the same tokens, so a batch that reached the store before a crash is dropped by the engine
instead of counted twice.

Record frame: ``b"INFS"``, payload length (u32), CRC-32 of the payload (u32), payload (the protobuf). An
append that fails (a full or failing filesystem) truncates its partial record before it answers, so the
next append starts on a record boundary. A damaged record (a crash mid-append, never acknowledged, or bytes
an fsync error lost) is skipped: the reader looks for the next frame whose CRC holds and reads on, so no
record behind a damaged one is lost.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
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
LOCK_FILE: Final = "spool.lock"
"""File in the spool directory that an exclusive spool holds an ``flock`` on (it names the holder's pid): a
second service on the same folder would replay, write and delete the first one's segments."""
ENGINE_DIR: Final = "engine"
"""Folder (inside the spool directory) where the service's engine decoder writes its schema and a segment's input
files while it decodes them: scratch, rebuilt at every start."""
_FIX_DIR: Final = (
    "give the service a folder it can create and write with --spool-dir (or spool_dir in --config, "
    "$INFERENSICS_SPOOL_DIR)"
)


class SpoolDirError(RuntimeError):
    """The spool directory cannot be used: it cannot be created, is a file, or another process's spool holds it.
    The message names the folder and what to do."""


class SpoolFullError(RuntimeError):
    """The spool is at its cap; the sender should retry later."""


class SpoolDiskError(SpoolFullError):
    """The spool's filesystem refused an append (full, read-only, failing); the sender should retry later."""


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
    """Content refusals in a row while the store answered (the writer quarantines the segment at a limit)."""
    redriven: bool = False
    """Moved back from quarantine by the writer."""
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


def read_segment(path: Path) -> tuple[list[bytes], int]:
    """Every intact record's payload of a segment, in order, and the bytes skipped as damaged.

    A damaged frame (bad magic, a length past the end, a CRC that does not hold) is skipped by searching
    for the next ``MAGIC`` whose frame holds, so records behind a torn one are still read.
    """
    data = path.read_bytes()
    view = memoryview(data)  # the CRC reads the frame in place; only the payload kept is copied
    payloads: list[bytes] = []
    pos, skipped = 0, 0
    while pos < len(data):
        if pos + _HEADER.size <= len(data):
            magic, length, crc = _HEADER.unpack_from(data, pos)
            start, end = pos + _HEADER.size, pos + _HEADER.size + length
            if magic == MAGIC and end <= len(data) and zlib.crc32(view[start:end]) == crc:
                payloads.append(data[start:end])
                pos = end
                continue
        nxt = data.find(MAGIC, pos + 1)
        nxt = len(data) if nxt < 0 else nxt
        skipped += nxt - pos
        pos = nxt
    return payloads, skipped


class Spool:
    """Append-and-fsync spool of segments with a byte cap.

    Args:
        directory: Where segment files live (created if missing).
        max_bytes: Cap on all segment bytes; :meth:`append` raises :class:`SpoolFullError` beyond it.
        seal_rows: Spans that seal the open segment.
        seal_bytes: Bytes that seal the open segment.
        seal_age_s: Age in seconds that seals the open segment (checked by :meth:`seal_if_due`).
        clock: Monotonic clock (tests inject one).
        exclusive: Lock the directory against other processes for as long as the spool is open (a service's
            spool; :meth:`close` releases it, and so does the process's end).

    Raises:
        SpoolDirError: the directory cannot be created or written, or (``exclusive``) another process holds it.
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
        exclusive: bool = False,
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
        self._lock_fd = -1
        _make_dir(directory)
        if exclusive:
            self._lock_fd = _lock_dir(directory)
        try:
            self._recover()
        except BaseException:
            self._release()
            raise

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
            SpoolFullError: the record would take the spool past its cap, or the filesystem refused it (full,
                read-only, failing); a partial record is truncated away first.
        """
        with self._lock:
            self.check_room(len(record))
            try:
                seg = self._current or self._open_segment()
            except OSError as exc:
                raise SpoolDiskError(_disk_message("cannot open a spool segment", exc)) from None
            view = memoryview(record)
            try:
                while view:
                    view = view[os.write(seg.fd, view) :]
            except OSError as exc:
                self._truncate_locked(seg)
                raise SpoolDiskError(_disk_message("cannot write to the spool", exc)) from None
            seg.size += len(record)
            seg.rows += rows
            self._bytes += len(record)
            end = seg.size
            if seg.rows >= self.seal_rows or seg.size >= self.seal_bytes:
                self._seal_locked()
        try:
            self._sync(seg, end)
        except OSError as exc:
            # Not acknowledged. What the failed fsync covered may or may not be on disk (a retry of it is
            # stored once: ingest is idempotent per span); the segment is sealed so that no later append
            # goes behind bytes the kernel may have dropped, and the reader skips a damaged record.
            with self._lock:
                if self._current is seg:
                    self._seal_locked(sync=False)
            raise SpoolDiskError(_disk_message("cannot fsync the spool", exc)) from None

    def _truncate_locked(self, seg: Segment) -> None:
        """Cut a partial record off the open segment (its bytes end at ``seg.size``)."""
        try:
            os.ftruncate(seg.fd, seg.size)
        except OSError:
            # Cannot even truncate: seal the segment as it is; the reader skips the partial record and the
            # next append opens a new segment.
            self._seal_locked(sync=False)

    def _open_segment(self) -> Segment:
        path = self.directory / f"{self._seq:012d}-{self._boot}{SUFFIX}"
        self._seq += 1
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        try:
            _fsync_dir(self.directory)  # the new name itself must survive a crash
        except OSError:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        seg = Segment(path, created=self._clock(), fd=fd)
        self._current = seg
        return seg

    @staticmethod
    def _sync(seg: Segment, end: int) -> None:
        with seg.sync_lock:
            if seg.synced >= end:
                return  # another request's fsync (or the seal) covered this record
            if seg.fd < 0:
                raise OSError(5, "the segment was sealed after a failed fsync")
            target = seg.size
            os.fsync(seg.fd)
            seg.synced = target

    def _seal_locked(self, *, sync: bool = True) -> None:
        seg = self._current
        if seg is None:
            return
        self._current = None
        with seg.sync_lock:
            try:
                if sync:
                    os.fsync(seg.fd)
                    seg.synced = seg.size
            except OSError:
                pass  # the records it held were not acknowledged; the reader skips what was lost
            finally:
                os.close(seg.fd)
                seg.fd = -1
        if seg.size == 0:
            seg.path.unlink(missing_ok=True)
        else:
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

    def quarantined(self) -> list[Path]:
        """Segments in :data:`QUARANTINE`, oldest first."""
        return sorted((self.directory / QUARANTINE).glob(f"*{SUFFIX}"))

    def redrive(self, path: Path) -> Segment:
        """Move a quarantined segment back into the spool, at the head of the queue (its name, and so its dedup
        tokens, unchanged); the writer tries it next."""
        target = self.directory / path.name
        path.rename(target)
        _fsync_dir(self.directory)
        _fsync_dir(path.parent)
        seg = Segment(target, recovered=True, size=target.stat().st_size)
        with self._lock:
            self._sealed.appendleft(seg)
            self._bytes += seg.size
            self._ready.notify_all()
        return seg

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
        """Seal the open segment so its rows are replayed on the next start; release the directory's lock."""
        self.seal_now()
        self._release()

    def _release(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # closing the descriptor releases its flock
            self._lock_fd = -1


def holds_segments(directory: Path) -> bool:
    """Whether ``directory`` holds spans not yet in the store: a segment file with bytes in it, there or in its
    :data:`QUARANTINE`. The service's own files (:data:`LOCK_FILE`, :data:`ENGINE_DIR`) are no spans; a folder
    that cannot be read counts as holding some (it is kept)."""
    try:
        return any(
            p.is_file() and p.stat().st_size > 0
            for folder in (directory, directory / QUARANTINE)
            for p in folder.glob(f"*{SUFFIX}")
        )
    except OSError:
        return True


def retire(directory: Path) -> str:
    """Retire a spool folder no service uses any more (an earlier release's), once it holds no spans.

    The service's own files in it are removed, then the folder; a folder that still holds other files is
    renamed ``<name>.retired`` (nothing it does not know is deleted). Returns what was done, for one log line, or
    ``""`` when nothing was: the folder is gone, holds segments, or another process holds its lock.
    """
    if not directory.is_dir() or holds_segments(directory):
        return ""
    try:
        fd = _lock_dir(directory)
    except SpoolDirError:
        return ""
    try:
        if holds_segments(directory):
            return ""
        (directory / LOCK_FILE).unlink(missing_ok=True)
        shutil.rmtree(directory / ENGINE_DIR, ignore_errors=True)
        with contextlib.suppress(OSError):
            (directory / QUARANTINE).rmdir()  # only when empty
        try:
            directory.rmdir()
        except OSError:
            target = directory.with_name(f"{directory.name}.retired")
            if target.exists():
                target = directory.with_name(f"{directory.name}.retired-{int(time.time())}")
            directory.rename(target)
            return f"moved {directory} to {target} (it holds files the service did not write: look, then delete it)"
        return f"removed {directory}"
    finally:
        os.close(fd)


def _make_dir(directory: Path) -> None:
    """Create the spool directory, or say in one line why it cannot be one."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise SpoolDirError(f"spool directory {directory}: that is a file, not a folder; {_FIX_DIR}") from None
    except NotADirectoryError:
        raise SpoolDirError(f"spool directory {directory}: a folder on its path is a file; {_FIX_DIR}") from None
    except OSError as exc:
        raise SpoolDirError(
            f"spool directory {directory}: cannot create it ({exc.strerror or exc}); {_FIX_DIR}"
        ) from None


def _lock_dir(directory: Path) -> int:
    """Take the directory's :data:`LOCK_FILE` for this process (the kernel drops an ``flock`` with its holder, so a
    crashed service leaves no stale lock); return the descriptor that holds it."""
    path = directory / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise SpoolDirError(
            f"spool directory {directory}: cannot write in it ({exc.strerror or exc}); {_FIX_DIR}"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise SpoolDirError(
                f"spool directory {directory}: cannot lock {LOCK_FILE} ({exc.strerror or exc}); {_FIX_DIR}"
            ) from None
        pid = f" (pid {holder})" if holder.isdigit() else ""
        raise SpoolDirError(
            f"spool directory {directory} is in use by another process{pid}, an `inferensics serve` on the same "
            "store or spool: stop it, or give this service its own --spool-dir (and its own --dsn)"
        ) from None
    with contextlib.suppress(OSError):  # the pid only names the holder in a second service's refusal
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _disk_message(what: str, exc: OSError) -> str:
    """One line for a filesystem refusal; full disks and quotas say so."""
    why = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        why = "its filesystem is full"
    return f"{what}: {why}"


def _seq_of(path: Path) -> int:
    head = path.stem.split("-", 1)[0]
    return int(head) if head.isdigit() else 0


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
