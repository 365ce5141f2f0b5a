"""``import-trace``: TORCH_TRACE log files → compile, cache, graph-break, recompile, kernel and shape-guard
records.

The importer reads each file with the shared envelope decoder, assembles records with the shared
:class:`~inferensics.collector.trace.assembler.CompileAssembler` and writes them to a store in batches.
Damaged lines and payloads are counted and skipped, never fatal. A file that is not a TORCH_TRACE log is
refused (none of its first lines is a glog-prefixed JSON record), and a file imported before (same
content) is not imported again: a marker blob named by the file's sha256 records each import. A compile
its process already has stored (recorded live by the host SDK, or imported from another copy of its log,
under any name, or one that has grown since) is not stored again (``inferensics.schema.processes``), except
one stored ``incomplete`` from a copy of the log read before it ended: a store replaces it with the compile the
longer log completes.

Records keep the time they were logged, read off the log's own clock in the one pass that decodes it
(:mod:`~inferensics.collector.trace.log_clock`). A record older than its table's retention would vanish on
insert: it is left out and counted (the file is then not marked imported), or stored at the import time with
``redate`` (:mod:`~inferensics.collector.trace.retention`).
"""

from __future__ import annotations

import codecs
import hashlib
import re
import socket
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from inferensics.collector.trace.artifacts import PROCESS_ARTIFACT, process_key
from inferensics.collector.trace.assembler import AssemblyContext, CompileAssembler
from inferensics.collector.trace.assembly_stats import AssemblyStats, damage_note
from inferensics.collector.trace.envelope import Damaged, Envelope, is_record_header, stamp_time
from inferensics.collector.trace.log_clock import LogClock, LogDater, mtime_year
from inferensics.collector.trace.retention import apply_retention
from inferensics.schema import columns as col
from inferensics.schema.events import CacheEvent, CompileEvent, KernelInventoryEvent, ShapeGuardEvent
from inferensics.schema.processes import (
    COMPILE_SEQ_ATTR,
    COMPILES,
    INCOMPLETE,
    PROCESS_ATTR,
    REPLACED_TABLES,
    SHAPE_GUARDS,
    compile_key,
    forget_compile_rows_sql,
    forget_shape_guards_sql,
    recorded_compiles_sql,
    stored_cache_lookups_sql,
)
from inferensics.schema.table import Event

if TYPE_CHECKING:
    from inferensics.schema.store import Store


Recorded = tuple[str, str, str]
"""``(kind, compile id, seq)`` of what a process has stored (``inferensics.schema.processes``)."""
CompileKey = tuple[str, str]
"""``(compile id, seq)``: one compile of a process."""


class CannotCheckError(Exception):
    """The target cannot say which compiles it holds (one line: why, and what to do)."""


class ImportTarget(Protocol):
    """Where imported records go: a :class:`~inferensics.schema.store.Store`, or a collector service that owns
    one (``inferensics import-trace --service``)."""

    def has_blob(self, sha256: str) -> bool:
        """Whether a blob with this digest is stored."""
        ...

    def put_blob(self, data: bytes, kind: str, *, host: str = "", attrs: Mapping[str, str] | None = None) -> str:
        """Store ``data`` once under its sha256; return the hex digest."""
        ...

    def insert_events(self, events: list[Event]) -> object:
        """Write events of one table (returns once they are durable)."""
        ...

    def recorded_compiles(self, processes: Sequence[str]) -> set[Recorded]:
        """What any of these processes has stored (``inferensics.schema.processes.recorded_compiles_sql``).

        Raises:
            CannotCheckError: the target cannot answer (a service without the query).
        """
        ...


@runtime_checkable
class CompletingTarget(Protocol):
    """A target that can replace the compiles it holds ``incomplete`` (rows deleted, then stored again) when a
    longer copy of their log completes them. A target without these methods keeps them as they are."""

    def stored_cache_lookups(self, processes: Sequence[str], compiles: Sequence[CompileKey]) -> dict[CompileKey, int]:
        """How many cache lookups these processes stored of each compile (absent: none)."""
        ...

    def forget_compiles(self, processes: Sequence[str], compiles: Sequence[CompileKey], *, incomplete: bool) -> None:
        """Delete what these processes stored of the compiles: ``incomplete``, their incomplete compile rows only
        (once the complete ones are stored); else their rows of every other replaced table and their shape guards."""
        ...


@runtime_checkable
class MarkerTarget(Protocol):
    """A target that keeps the attributes of a blob (the import marker's: the file name and labels of the import
    that wrote it). A collector service's blob API keeps the bytes and kind only."""

    def blob_attrs(self, sha256: str) -> dict[str, str]:
        """The attributes stored with the blob (empty: none, or no such blob)."""
        ...


class StoreTarget:
    """A :class:`~inferensics.schema.store.Store` as the target of an import."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def has_blob(self, sha256: str) -> bool:
        """Whether a blob with this digest is stored."""
        return self.store.has_blob(sha256)

    def put_blob(self, data: bytes, kind: str, *, host: str = "", attrs: Mapping[str, str] | None = None) -> str:
        """Store ``data`` once under its sha256."""
        return self.store.put_blob(data, kind, host=host, attrs=attrs)

    def insert_events(self, events: list[Event]) -> object:
        """Insert the events (one table)."""
        return self.store.insert_events(events)

    def blob_attrs(self, sha256: str) -> dict[str, str]:
        """The attributes stored with the blob."""
        from inferensics.schema.events import BlobIndexEvent

        rows = self.store.query_rows(
            f"SELECT {col.ATTRS} FROM {self.store.database}.{BlobIndexEvent.TABLE.name} "
            f"WHERE {col.SHA256} = {{h:String}} LIMIT 1",
            {"h": sha256},
        )
        return {str(k): str(v) for k, v in dict(rows[0][0]).items()} if rows else {}

    def recorded_compiles(self, processes: Sequence[str]) -> set[Recorded]:
        """What these processes have stored."""
        rows = self.store.query_rows(recorded_compiles_sql(self.store.database), {"processes": list(processes)})
        return {(str(k), str(c), str(q)) for k, c, q in rows}

    def stored_cache_lookups(self, processes: Sequence[str], compiles: Sequence[CompileKey]) -> dict[CompileKey, int]:
        """How many cache lookups these processes stored of each compile."""
        keys = [compile_key(c, q) for c, q in compiles]
        rows = self.store.query_rows(
            stored_cache_lookups_sql(self.store.database), {"processes": list(processes), "compiles": keys}
        )
        return {(str(c), str(q)): int(n) for c, q, n in rows}

    def forget_compiles(self, processes: Sequence[str], compiles: Sequence[CompileKey], *, incomplete: bool) -> None:
        """Delete what these processes stored of the compiles (see :class:`CompletingTarget`).

        Raises:
            StoreError: the store refused the delete (a user without the right to delete rows), in one line.
        """
        from inferensics.schema.store import StoreError, error_line

        target, values = self.store.target, {"processes": list(processes)}
        keys = {**values, "compiles": [compile_key(c, q) for c, q in compiles]}
        if incomplete:
            statements = [(forget_compile_rows_sql(target, "compiles", incomplete_only=True), keys)]
        else:
            statements = [(forget_compile_rows_sql(target, t), keys) for t in REPLACED_TABLES if t != "compiles"]
            ids = {**values, "compile_ids": sorted({c for c, _ in compiles})}
            statements.append((forget_shape_guards_sql(target), ids))
        for sql, parameters in statements:
            try:
                self.store.client.command(sql, parameters=parameters)
            except Exception as exc:  # the driver raises several types
                raise StoreError(
                    f"store {self.store.dsn}: cannot replace the incomplete compiles this log completes "
                    f"({error_line(exc)}); import with a user that may delete rows (ALTER DELETE)"
                ) from None


@dataclass
class FileReport:
    """What one file held."""

    path: str
    envelopes: int = 0
    damaged_lines: int = 0
    first_damage: str = ""
    """The first damaged record, ``line N: why`` (``""``: none); the others are counted."""
    stats: AssemblyStats = field(default_factory=AssemblyStats)
    rows: Counter[str] = field(default_factory=Counter)
    not_trace: str = ""
    """Why the file was refused as not a TORCH_TRACE log (``""``: it is one)."""
    already_imported: bool = False
    """The same content was imported into this store before; nothing was added."""
    earlier: dict[str, str] = field(default_factory=dict)
    """For ``already_imported``: what the earlier import's marker holds (``file``, and since this version
    ``host``, ``model``, ``hw_pool``: the labels its rows carry); empty when the target does not keep it."""
    clock: LogClock | None = None
    """How the log's stamps were dated (``None``: the file was not read)."""
    expired: Counter[str] = field(default_factory=Counter)
    """Rows not stored, by table: older than the table's retention (``retention``), or the kernels of such a
    compile. The file is then not marked imported, so an import with ``redate`` can store them."""
    retention: dict[str, int] = field(default_factory=dict)
    """Retention in days of each table in ``expired`` (0: the kernels of compiles left out)."""
    expired_span: tuple[datetime, datetime] | None = None
    """Oldest and newest time of the rows left out as older than their retention."""
    redated: Counter[str] = field(default_factory=Counter)
    """Rows older than their table's retention stored at the import time (``redate``), by table."""
    sha256: str = ""
    processes: list[str] = field(default_factory=list)
    """Keys of the process that wrote the log: its trackers' (when the host SDK ran in it), else its own."""
    instrumented: bool = False
    """The host SDK ran in the process (a tracker wrote its key into the log)."""
    already_recorded: int = 0
    """Compiles not stored again: the process had them stored already (live, or by an earlier import)."""
    completed: list[CompileKey] = field(default_factory=list)
    """Compiles stored ``incomplete`` by an earlier import that this longer log completes: replaced."""
    superseded: list[CompileKey] = field(default_factory=list)
    """Compiles stored ``incomplete`` whose complete row is stored too (live, or by an import that stopped before
    it deleted the incomplete one): only the incomplete row is deleted."""
    left_incomplete: list[CompileKey] = field(default_factory=list)
    """Compiles stored ``incomplete`` that this log completes, kept as they are: the target cannot replace rows
    (a collector service: its rows travel through OTLP, which only adds)."""
    unchecked: str = ""
    """Why the stored compiles of the process could not be checked (``""``: they were); all were stored."""
    refused: str = ""
    """Why nothing of the file was stored (``""``: it was imported)."""


IMPORT_MARKER_KIND = "trace_import"
"""Blob kind of the marker that records one imported file content."""
_HEAD_LINES = 50
_HEAD_LINE_BYTES = 1 << 20
"""The most of a file's first line read to check it (a binary file may have no line end for megabytes)."""
_GZIP_MAGIC = b"\x1f\x8b"
_CONTROL = re.compile(rb"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")
"""Control bytes no text log holds (tab, line ends, form feed and the escape of coloured logs are text)."""


def trace_files(path: Path) -> list[Path]:
    """The TORCH_TRACE logs under ``path`` (itself when it is one), sorted; hidden files are skipped."""
    return [p for p in _candidates(path) if not not_trace_reason(p)]


def _candidates(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))


def not_trace_reason(path: Path) -> str:
    """``""`` when ``path`` reads as a TORCH_TRACE log, else why not.

    Its first lines (up to ``_HEAD_LINES``) are looked at: one glog-prefixed JSON record among them makes a log,
    whose lines before it (a log cut at its head, a stray line on top) the import counts as damaged. A log is
    UTF-8 text. A binary file is named as one, with the first byte that is not text, and never quoted: its bytes
    printed as replacement characters and escapes.
    """
    first, lines, offset, seen = "", 0, 0, False
    try:
        with path.open("rb") as fh:
            while lines < _HEAD_LINES and (raw := fh.readline(_HEAD_LINE_BYTES)):
                lines += 1
                if raw.strip():
                    reason, line = _head_line(raw, offset, opening=not seen)
                    seen = True
                    if reason is not None:
                        return reason
                    if is_record_header(line):
                        return ""
                    first = first or line.strip()[:60]
                offset += len(raw)
    except OSError as exc:
        return f"it cannot be read: {exc.strerror or exc}"
    if not first:
        return "it holds no records"
    if lines == 1:
        return f"its line is not a glog-prefixed JSON record: {first!r}"
    which = f"its first {_HEAD_LINES} lines" if lines == _HEAD_LINES else f"its {lines} lines"
    return f"none of {which} is a glog-prefixed JSON record (the first: {first!r})"


def _head_line(raw: bytes, offset: int, *, opening: bool) -> tuple[str | None, str]:
    """A refusal for a file whose non-blank line ``raw`` (at ``offset``) is not text (``None``: it is), and the
    line decoded. The ``opening`` line (the first non-blank one) names gzip and UTF-16."""
    if opening and raw.startswith(_GZIP_MAGIC):
        return "it is gzip-compressed: gunzip it, then import the log", ""
    if opening and raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "it is UTF-16 text; a TORCH_TRACE log is UTF-8: convert it, e.g. with iconv -f UTF-16 -t UTF-8", ""
    # A log cut at its head may begin inside a character: its continuation bytes are no sign of a binary file.
    skipped = 0
    while offset == 0 and skipped < 3 and skipped < len(raw) and 0x80 <= raw[skipped] < 0xC0:
        skipped += 1
    body = raw[skipped:]
    bad = [m.start()] if (m := _CONTROL.search(body)) else []
    try:
        # not final: a line cut at the read limit may end inside a character
        line = codecs.getincrementaldecoder("utf-8")().decode(body, final=False)
    except UnicodeDecodeError as exc:
        bad.append(exc.start)
        line = ""
    if bad:
        at = min(bad)
        return f"it is binary, not a text log: byte 0x{body[at]:02x} at offset {offset + skipped + at} is not text", ""
    return None, line


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _marker(content_sha256: str) -> bytes:
    return f"inferensics import-trace of sha256:{content_sha256}".encode()


def _lines(path: Path) -> Iterator[str]:
    # newline="\n": lines end at "\n" only and keep any "\r" (universal newlines would split a payload
    # line at a "\r" inside it and report a sound record as damaged).
    with path.open("r", encoding="utf-8", errors="replace", newline="\n") as fh:
        yield from fh


def read_trace_file(
    path: Path,
    *,
    host: str = "",
    model: str = "",
    hw_pool: str = "",
    store: ImportTarget | None = None,
) -> tuple[FileReport, list[Event]]:
    """Decode and assemble one file in one pass over its lines; blobs go to ``store`` when given. Returns the report
    and the records, each at the time it was logged (:class:`~inferensics.collector.trace.log_clock.LogClock`),
    however old: retention is the import's business."""
    events: list[Event] = []
    report = FileReport(str(path))
    put_blob = None
    if store is not None:
        target = store

        def put_blob(data: bytes, kind: str, attrs: Mapping[str, str]) -> str:
            return target.put_blob(data, kind, host=host, attrs=attrs)

    ctx = AssemblyContext(
        host=host or socket.gethostname(), model=model, hw_pool=hw_pool, source="trace", attrs={"file": path.name}
    )
    assembler = CompileAssembler(ctx, events.append, put_blob)
    mtime = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    dater = LogDater(mtime)
    first: Envelope | None = None
    for item in dater.envelopes(_lines(path)):
        if isinstance(item, Damaged):
            report.damaged_lines += 1
            report.first_damage = report.first_damage or f"line {item.lineno}: {item.reason}"
            continue
        report.envelopes += 1
        first = first or item
        if item.name == PROCESS_ARTIFACT:
            key = process_key(item.payload)
            if key and key not in report.processes:
                report.processes.append(key)
        assembler.feed(item)
    assembler.finish()
    report.clock = dater.clock
    report.instrumented = bool(report.processes)
    if not report.processes and first is not None and first.pid is not None:
        report.processes = _log_process_keys(path.name, first, mtime)
    if report.processes:
        for e in events:
            attrs = getattr(e, col.ATTRS, None)
            if isinstance(attrs, dict):
                attrs[PROCESS_ATTR] = report.processes[0]
    report.stats = assembler.stats
    note = damage_note(assembler.stats)
    if assembler.stats.cut_off_at:  # said whatever else was damaged: the log is cut, or still being written
        report.first_damage = f"{report.first_damage}; {note}" if report.first_damage else note
    elif not report.first_damage and note:
        report.first_damage = note
    for e in events:
        report.rows[type(e).TABLE.name] += 1
    return report, events


def _log_process_keys(name: str, first: Envelope, mtime: datetime) -> list[str]:
    """The keys of an uninstrumented process: the one stored, then those earlier versions stored (still found).

    Its process id and its first record's glog stamp, as written (local time, no year), name the process: in
    any copy of its log, under any name, whatever the copy's mtime, and in a longer copy read later. Earlier
    versions began the key with the log's name (TORCH_TRACE names a file per process), and before those, ended it
    with the stamp read as UTC in the year the file's mtime inferred.
    """
    head = f"{name} pid {first.pid} at "
    keys = [f"log pid {first.pid} at {first.stamp}", head + first.stamp]
    legacy = stamp_time(first.stamp, mtime_year(first.stamp, mtime))
    if legacy is not None:
        keys.append(head + legacy.replace(tzinfo=UTC).isoformat())
    return keys


def _retain(report: FileReport, events: list[Event], *, redate: bool, now: datetime) -> list[Event]:
    """``events`` less those older than their table's retention (``redate``: stored at ``now``); ``report`` says
    what was left out or redated, and replaces only the incomplete compiles whose complete one is kept."""
    retained = apply_retention(events, redate=redate, now=now)
    report.expired, report.retention, report.expired_span = retained.expired, retained.retention, retained.expired_span
    report.redated = retained.redated
    if retained.expired:  # an incomplete compile is replaced only by the complete one stored
        stored = {_compile_of(e) for e in retained.kept if isinstance(e, CompileEvent)}
        report.completed = [k for k in report.completed if k in stored]
    report.rows = Counter(type(e).TABLE.name for e in retained.kept)
    return retained.kept


def _compile_of(event: Event) -> CompileKey | None:
    """The compile a compile-side row belongs to; ``None`` for rows of none (kernel inventory)."""
    cid = getattr(event, col.COMPILE_ID, "")
    if not cid:
        return None
    return cid, getattr(event, col.ATTRS, {}).get(COMPILE_SEQ_ATTR, "")


def _is_recorded(event: Event, recorded: set[Recorded], completed: set[CompileKey], completed_ids: set[str]) -> bool:
    key = _compile_of(event)
    if key is None:
        return False
    if isinstance(event, ShapeGuardEvent):
        return (SHAPE_GUARDS, key[0], "") in recorded and key[0] not in completed_ids
    if key in completed:
        return False
    return (COMPILES, *key) in recorded or (INCOMPLETE, *key) in recorded


def _not_recorded(report: FileReport, events: list[Event], target: ImportTarget) -> list[Event]:
    """The events of compiles the file's process does not have stored yet; ``report`` says what was left out
    and which incomplete compiles it completes (``report.completed``: the caller replaces their rows)."""
    if not report.processes:
        return events
    try:
        recorded = target.recorded_compiles(report.processes)
    except CannotCheckError as exc:
        if report.instrumented:  # its compiles were recorded live: storing them unchecked counts them twice
            report.refused = f"{exc}; nothing of this log was stored, as the host SDK recorded its process live"
            return []
        report.unchecked = str(exc)
        return events
    if not recorded:
        return events
    seen_lookups: dict[CompileKey, int] = {}
    ended = {_compile_of(e) for e in events if isinstance(e, CompileEvent) and e.outcome != INCOMPLETE}
    incomplete = sorted((c, q) for kind, c, q in recorded if kind == INCOMPLETE)
    completes = [k for k in incomplete if k in ended and (COMPILES, *k) not in recorded]
    if not isinstance(target, CompletingTarget):
        report.left_incomplete = completes
    else:
        report.completed = completes
        report.superseded = [k for k in incomplete if (COMPILES, *k) in recorded]
        if report.completed:
            seen_lookups = target.stored_cache_lookups(report.processes, report.completed)
    completed = set(report.completed)
    completed_ids = {c for c, _ in completed}
    dropped: list[Event] = []
    kept: list[Event] = []
    for e in events:
        key = _compile_of(e)
        if isinstance(e, CacheEvent) and key is not None and seen_lookups.get(key, 0) > 0:
            # A log's lookups come in its order: its first ones are those stored before (the rollup counted them).
            seen_lookups[key] -= 1
            dropped.append(e)
            continue
        (dropped if _is_recorded(e, recorded, completed, completed_ids) else kept).append(e)
    # A skipped compile's kernels too (they carry its graph key, not its compile id).
    graphs = {e.graph_key for e in dropped if isinstance(e, CompileEvent) and e.graph_key}
    kept = [e for e in kept if not (isinstance(e, KernelInventoryEvent) and e.graph_key in graphs)]
    report.already_recorded = sum(isinstance(e, CompileEvent) for e in dropped)
    report.rows = Counter(type(e).TABLE.name for e in kept)
    return kept


def import_trace(
    path: Path,
    store: ImportTarget,
    *,
    host: str = "",
    model: str = "",
    hw_pool: str = "",
    redate: bool = False,
    now: datetime | None = None,
) -> list[FileReport]:
    """Import every trace file under ``path`` into ``store``; one report per file looked at.

    Idempotent: a file whose content was imported into ``store`` before is reported
    ``already_imported`` and adds nothing, and a compile its process already has stored is not stored again
    (``already_recorded``). Files that are not TORCH_TRACE logs are reported with ``not_trace`` and add
    nothing. Rows older than their table's retention (as of ``now``, default the current time) are left out and
    counted (``expired``; the file is not marked imported), or with ``redate`` stored at ``now`` (``redated``).

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    # Arrow comes with the store (the service extra); the host SDK's trace sink imports this package too.
    from inferensics.schema.arrow import events_by_model

    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    now = now or datetime.now(UTC)
    labels = {"host": host or socket.gethostname(), "model": model, "hw_pool": hw_pool}
    reports: list[FileReport] = []
    for file in _candidates(path):
        reason = not_trace_reason(file)
        if reason:
            reports.append(FileReport(str(file), not_trace=reason))
            continue
        digest = _file_sha256(file)
        marker = _marker(digest)
        marker_sha256 = hashlib.sha256(marker).hexdigest()
        if store.has_blob(marker_sha256):
            earlier = store.blob_attrs(marker_sha256) if isinstance(store, MarkerTarget) else {}
            reports.append(FileReport(str(file), already_imported=True, sha256=digest, earlier=earlier))
            continue
        report, events = read_trace_file(file, host=host, model=model, hw_pool=hw_pool, store=store)
        events = _not_recorded(report, events, store)
        if report.refused:
            reports.append(report)
            continue
        events = _retain(report, events, redate=redate, now=now)
        groups = list(events_by_model(events).values())
        if report.completed and isinstance(store, CompletingTarget):
            # Replacing: the other rows of the incomplete compiles go first, their compile rows are written last
            # and the incomplete ones deleted after them. An import that stops on the way leaves the incomplete
            # row, so the next run replaces the compile again; one that stops after the complete row is in
            # finds it superseded.
            store.forget_compiles(report.processes, report.completed, incomplete=False)
            groups.sort(key=lambda group: isinstance(group[0], CompileEvent))
        for group in groups:
            store.insert_events(group)
        stale = [*report.completed, *report.superseded]
        if stale and isinstance(store, CompletingTarget):
            store.forget_compiles(report.processes, stale, incomplete=True)
        report.sha256 = digest
        reports.append(report)
        if report.expired:
            continue  # not marked: an import with redate stores what this one left out
        # Written after the rows: an import that failed part-way is not marked, and can be run again.
        attrs = {"file": file.name, "sha256": digest, **labels}
        store.put_blob(marker, IMPORT_MARKER_KIND, host=host, attrs=attrs)
    return reports
